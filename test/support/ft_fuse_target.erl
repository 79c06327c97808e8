%%% @doc Work for the fuse's tests (ferrotrace_fuse_SUITE): a cheap function called in a
%%% tight loop (the cost of asking a tracer about it is many times its own), the loop itself
%%% in functions a spec on `hot/1' alone leaves untraced.
-module(ft_fuse_target).

-export([spin/1, forever/0, hot/1, inside/1]).

%% @doc Calls hot/1 `N' times.
-spec spin(non_neg_integer()) -> ok.
spin(0) -> ok;
spin(N) -> _ = hot(N), spin(N - 1).

%% @doc Calls hot/1 until killed.
-spec forever() -> no_return().
forever() ->
    _ = spin(1000),
    forever().

%% @doc A call that costs next to nothing.
-spec hot(integer()) -> integer().
hot(N) -> N + 1.

%% @doc Calls spin/1 from inside a call of its own (a frame open while the loop runs), then
%% waits for `stop'.
-spec inside(non_neg_integer()) -> ok.
inside(N) ->
    ok = spin(N),
    receive stop -> ok end.
