%%% @doc Connection readers whose loops wait in another module (`ft_frames_sock:recv/1'),
%%% loop through a fun or `apply', and a tail recursion: what the frame bound is for.
-module(ft_frames_reader).
-export([reader/0, handle/2, via_fun/0, via_apply/1, bounce/1, ping/1, pong/1, count_down/1]).

%% @doc Reads forever: the loop waits inside `ft_frames_sock'.
-spec reader() -> no_return().
reader() -> reader(0).

reader(N) ->
    D = ft_frames_sock:recv(socket),
    reader(handle(D, N)).

%% @doc Handles one message: the call whose latency an operator wants.
-spec handle(integer(), integer()) -> integer().
handle(D, N) -> N + D.

%% @doc Reads forever, the loop going through a fun.
-spec via_fun() -> no_return().
via_fun() ->
    Loop = fun(Self, N) -> D = ft_frames_sock:recv(socket), Self(Self, handle(D, N)) end,
    Loop(Loop, 0).

%% @doc Reads forever, the loop going through `apply/3'.
-spec via_apply(integer()) -> no_return().
via_apply(N) ->
    D = ft_frames_sock:recv(socket),
    apply(?MODULE, via_apply, [handle(D, N)]).

%% @doc Reads forever, the loop going through `ft_frames_sock:next/1' and back.
-spec bounce(integer()) -> no_return().
bounce(N) ->
    D = ft_frames_sock:recv(socket),
    ft_frames_sock:next(handle(D, N)).

%% @doc Reads forever, going round `ping/1', `ft_frames_sock:to_pong/1', `pong/1' and
%% `ft_frames_sock:to_ping/1': a loop of two traced functions the analysis does not see.
-spec ping(integer()) -> no_return().
ping(N) ->
    D = ft_frames_sock:recv(socket),
    ft_frames_sock:to_pong(handle(D, N)).

%% @doc See `ping/1'.
-spec pong(integer()) -> no_return().
pong(N) ->
    D = ft_frames_sock:recv(socket),
    ft_frames_sock:to_ping(handle(D, N)).

%% @doc Tail recursion `N' deep.
-spec count_down(non_neg_integer()) -> done.
count_down(0) -> done;
count_down(N) -> count_down(N - 1).
