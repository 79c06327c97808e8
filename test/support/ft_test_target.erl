%%% @doc Functions traced by the ferrotrace tests. Keep them small and predictable: the
%%% tests count their calls exactly and time the sleeping one.
-module(ft_test_target).

-export([f/1, g/1, sleeper/1, rec/1, raiser/1, catcher/1,
         call_f/1, call_g/1, call_rec/2, call_catcher/1]).

%% @doc The function most tests trace.
-spec f(integer()) -> integer().
f(X) -> X + 1.

%% @doc A second traced function, for tests that need two.
-spec g(integer()) -> integer().
g(X) -> X * 2.

%% @doc Sleeps `Ms' milliseconds: a call with a known lower bound on its latency.
-spec sleeper(non_neg_integer()) -> non_neg_integer().
sleeper(Ms) ->
    timer:sleep(Ms),
    Ms.

%% @doc Body recursion: `rec(N)' makes N + 1 calls of `rec/1' (N down to 0).
-spec rec(non_neg_integer()) -> non_neg_integer().
rec(0) -> 0;
rec(N) when N > 0 -> 1 + rec(N - 1).

%% @doc Always raises `error:{boom, X}'.
-spec raiser(term()) -> no_return().
raiser(X) -> erlang:error({boom, X}).

%% @doc Calls `raiser/1' (a local call) and catches its exception: returns normally.
-spec catcher(term()) -> caught.
catcher(X) ->
    try raiser(X) of
        _ -> erlang:error(raiser_returned)
    catch
        error:{boom, X} -> caught
    end.

%% @doc Calls `f/1' (fully qualified) `N' times.
-spec call_f(non_neg_integer()) -> ok.
call_f(0) -> ok;
call_f(N) ->
    _ = ?MODULE:f(N),
    call_f(N - 1).

%% @doc Calls `g/1' (fully qualified) `N' times.
-spec call_g(non_neg_integer()) -> ok.
call_g(0) -> ok;
call_g(N) ->
    _ = ?MODULE:g(N),
    call_g(N - 1).

%% @doc Calls `rec(Depth)' `K' times.
-spec call_rec(non_neg_integer(), non_neg_integer()) -> ok.
call_rec(0, _Depth) -> ok;
call_rec(K, Depth) ->
    Depth = ?MODULE:rec(Depth),
    call_rec(K - 1, Depth).

%% @doc Calls `catcher/1' `M' times.
-spec call_catcher(non_neg_integer()) -> ok.
call_catcher(0) -> ok;
call_catcher(M) ->
    caught = ?MODULE:catcher(M),
    call_catcher(M - 1).
