%%% @doc Functions traced by ferrotrace_slow_SUITE: latency set by the argument.
-module(ft_slow_target).

-export([work/1, fail/1, fast/1, caller/2, callee/1]).

%% @doc Sleeps `Ms' milliseconds and returns `Ms'.
-spec work(non_neg_integer()) -> non_neg_integer().
work(Ms) ->
    timer:sleep(Ms),
    Ms.

%% @doc Sleeps `Ms' milliseconds, then raises `error:{slow_fail, Ms}'.
-spec fail(non_neg_integer()) -> no_return().
fail(Ms) ->
    timer:sleep(Ms),
    erlang:error({slow_fail, Ms}).

%% @doc Returns at once.
-spec fast(term()) -> term().
fast(X) -> X.

%% @doc Sleeps `OwnMs', then calls `callee/1' which sleeps `CalleeMs'.
-spec caller(non_neg_integer(), non_neg_integer()) -> ok.
caller(OwnMs, CalleeMs) ->
    timer:sleep(OwnMs),
    _ = ?MODULE:callee(CalleeMs),
    ok.

%% @doc Sleeps `Ms'.
-spec callee(non_neg_integer()) -> ok.
callee(Ms) ->
    timer:sleep(Ms),
    ok.
