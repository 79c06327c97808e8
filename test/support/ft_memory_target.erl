%%% @doc Calls for `ferrotrace_memory_SUITE': processes that each hold one call open with a
%%% large argument (an open frame with an argument copy in the session), and busy processes
%%% calling several functions with large arguments.
-module(ft_memory_target).

-export([holders/2, go/1, hold/1, release/1, busy/2, a/1, b/1, c/1, d/1, e/1, f/1, g/1, h/1]).

%% @doc Spawns `N' processes that call `hold(Arg)' once told `go', and returns them.
-spec holders(pos_integer(), term()) -> [pid()].
holders(N, Arg) ->
    [spawn(fun() -> receive go -> hold(Arg) end end) || _ <- lists:seq(1, N)].

%% @doc Tells the holders `go', ten every 5 ms (the term rings are not flooded).
-spec go([pid()]) -> ok.
go([]) ->
    ok;
go(Pids) ->
    {Now, Later} = lists:split(min(10, length(Pids)), Pids),
    [P ! go || P <- Now],
    timer:sleep(5),
    go(Later).

%% @doc A call that stays open until the process is told `done'.
-spec hold(term()) -> ok.
hold(Arg) ->
    receive done -> _ = erlang:phash2(Arg), ok end.

%% @doc Ends the holders' calls.
-spec release([pid()]) -> ok.
release(Pids) ->
    [P ! done || P <- Pids],
    ok.

%% @doc Calls the eight functions below with `Arg', `Rounds' times.
-spec busy(non_neg_integer(), term()) -> ok.
busy(0, _Arg) ->
    ok;
busy(Rounds, Arg) ->
    _ = [F(Arg) || F <- [fun a/1, fun b/1, fun c/1, fun d/1, fun e/1, fun f/1, fun g/1, fun h/1]],
    busy(Rounds - 1, Arg).

%% @doc A function called by busy/2.
-spec a(term()) -> integer().
a(X) -> erlang:phash2(X).
%% @doc A function called by busy/2.
-spec b(term()) -> integer().
b(X) -> erlang:phash2(X) + 1.
%% @doc A function called by busy/2.
-spec c(term()) -> integer().
c(X) -> erlang:phash2(X) + 2.
%% @doc A function called by busy/2.
-spec d(term()) -> integer().
d(X) -> erlang:phash2(X) + 3.
%% @doc A function called by busy/2.
-spec e(term()) -> integer().
e(X) -> erlang:phash2(X) + 4.
%% @doc A function called by busy/2.
-spec f(term()) -> integer().
f(X) -> erlang:phash2(X) + 5.
%% @doc A function called by busy/2.
-spec g(term()) -> integer().
g(X) -> erlang:phash2(X) + 6.
%% @doc A function called by busy/2.
-spec h(term()) -> integer().
h(X) -> erlang:phash2(X) + 7.
