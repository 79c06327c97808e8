%%% @doc A socket wrapper as real servers have one: the wait is in its `recv/1', not in the
%%% loop of the module that calls it (`ft_frames_reader').
-module(ft_frames_sock).
-export([recv/1, next/1, to_ping/1, to_pong/1]).

%% @doc The next `{data, D}' sent to the caller.
-spec recv(term()) -> term().
recv(_Socket) ->
    receive {data, D} -> D end.

%% @doc Goes back to the reader's loop: a cycle through this module, which a spec naming only
%% `ft_frames_reader' does not read for cycles (the run-time bound finds it).
-spec next(integer()) -> no_return().
next(N) ->
    ft_frames_reader:bounce(N).

%% @doc Back to the reader's `ping/1': a cycle of two traced functions through this module.
-spec to_ping(integer()) -> no_return().
to_ping(N) ->
    ft_frames_reader:ping(N).

%% @doc Back to the reader's `pong/1'.
-spec to_pong(integer()) -> no_return().
to_pong(N) ->
    ft_frames_reader:pong(N).
