%%% @doc The probe effect's test target: `outer/0' calls `callee/1' 50 times; both are
%%% traced, and `outer/0''s latency is compared with its untraced time.
-module(ft_probe_target).

-export([outer/0, callee/1, timed_outer/1, thin_outer/0, thin/1]).

%% @doc Calls `callee/1' 50 times (local calls, as in a module traced whole).
-spec outer() -> integer().
outer() -> outer(50, 0).

outer(0, Acc) -> Acc;
outer(N, Acc) -> outer(N - 1, Acc + callee(N)).

%% @doc A little real work (a list of 201 built and summed, about 1 µs), so that tracing (two
%% events, about 0.5 µs) is not most of it and the figures are not all noise.
-spec callee(integer()) -> integer().
callee(N) -> lists:sum(lists:seq(N, N + 200)).

%% @doc As `outer/0', with a callee that does almost nothing: its latency is mostly tracing.
-spec thin_outer() -> integer().
thin_outer() -> thin_outer(50, 0).

thin_outer(0, Acc) -> Acc;
thin_outer(N, Acc) -> thin_outer(N - 1, Acc + thin(N)).

%% @doc Almost nothing.
-spec thin(integer()) -> integer().
thin(N) -> N * 2.

%% @doc `outer/0' called `Runs' times by this caller: each call's time, ns, as the caller
%% measures it.
-spec timed_outer(pos_integer()) -> [non_neg_integer()].
timed_outer(Runs) ->
    [begin
         T0 = erlang:monotonic_time(nanosecond),
         _ = outer(),
         erlang:monotonic_time(nanosecond) - T0
     end || _ <- lists:seq(1, Runs)].
