%%% @doc A socket wrapper as real servers have one: the wait is in its `recv/1', not in the
%%% loop of the module that calls it (`ft_frames_reader').
-module(ft_frames_sock).
-export([recv/1, next/1]).

%% @doc The next `{data, D}' sent to the caller.
-spec recv(term()) -> term().
recv(_Socket) ->
    receive {data, D} -> D end.

%% @doc Goes back to the reader's loop: a cycle through this module, which a spec naming only
%% `ft_frames_reader' does not read for cycles (the run-time bound finds it).
-spec next(integer()) -> no_return().
next(N) ->
    ft_frames_reader:bounce(N).
