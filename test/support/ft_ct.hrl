%% Included by every Common Test suite (`-include("support/ft_ct.hrl")'): the callbacks CT
%% asks a suite for, exported with their specs (the suite defines them: all/0 lists its
%% cases, suite/0 installs the ft_ct hook with the suite's options), the type of a case's
%% config, and stdlib's assertion macros.
-include_lib("stdlib/include/assert.hrl").

-export([all/0, suite/0]).

-type config() :: [{atom(), term()}].

-spec all() -> [atom()].
-spec suite() -> [tuple()].
