%%% @doc A socket wrapper as real servers have one: the wait is in its `recv/1', not in the
%%% loop of the module that calls it (`ft_frames_reader').
-module(ft_frames_sock).
-export([recv/1]).

%% @doc The next `{data, D}' sent to the caller.
-spec recv(term()) -> term().
recv(_Socket) ->
    receive {data, D} -> D end.
