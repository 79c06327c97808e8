%%% @doc The comparison benchmark's load (bench/ferrotrace_compare_bench.erl): twenty functions
%%% `f1/1' .. `f20/1', each a loop of CPU work of its own size (460 to 1,600 steps, about 1 to
%%% 4 us here), each call's size drawn between 0.75 and 1.25 of it; 5 % of calls take 4 times
%%% as long (a slow path: the tail, p99 sits in it). `run(Change, Rounds)' calls the twenty
%%% in turn `Rounds' times, with `Change':
%%% <ul>
%%% <li>`none': as above;</li>
%%% <li>`{slower, K}': `fK' twice as slow in every call (its p50 doubles, and its tail);</li>
%%% <li>`{tail, K}': `fK''s slow path twice as slow (8 times the work): its p99 doubles, its
%%% p50 stays.</li>
%%% </ul>
-module(ft_compare_work).

-export([run/2, functions/0]).
-export([f1/1, f2/1, f3/1, f4/1, f5/1, f6/1, f7/1, f8/1, f9/1, f10/1, f11/1, f12/1, f13/1,
         f14/1, f15/1, f16/1, f17/1, f18/1, f19/1, f20/1]).

-type change() :: none | {slower | tail, 1..20}.
-export_type([change/0]).

%% @doc The twenty functions, as a spec.
-spec functions() -> [mfa()].
functions() ->
    [{?MODULE, name(I), 1} || I <- lists:seq(1, 20)].

%% @doc Calls the twenty functions in turn, `Rounds' times, with `Change'.
-spec run(change(), pos_integer()) -> ok.
run(Change, Rounds) ->
    Names = [name(I) || I <- lists:seq(1, 20)],
    lists:foreach(fun(_) -> [?MODULE:F(Change) || F <- Names] end, lists:seq(1, Rounds)).

name(I) -> list_to_atom("f" ++ integer_to_list(I)).

-spec f1(change()) -> non_neg_integer().
f1(C) -> call(1, C).
-spec f2(change()) -> non_neg_integer().
f2(C) -> call(2, C).
-spec f3(change()) -> non_neg_integer().
f3(C) -> call(3, C).
-spec f4(change()) -> non_neg_integer().
f4(C) -> call(4, C).
-spec f5(change()) -> non_neg_integer().
f5(C) -> call(5, C).
-spec f6(change()) -> non_neg_integer().
f6(C) -> call(6, C).
-spec f7(change()) -> non_neg_integer().
f7(C) -> call(7, C).
-spec f8(change()) -> non_neg_integer().
f8(C) -> call(8, C).
-spec f9(change()) -> non_neg_integer().
f9(C) -> call(9, C).
-spec f10(change()) -> non_neg_integer().
f10(C) -> call(10, C).
-spec f11(change()) -> non_neg_integer().
f11(C) -> call(11, C).
-spec f12(change()) -> non_neg_integer().
f12(C) -> call(12, C).
-spec f13(change()) -> non_neg_integer().
f13(C) -> call(13, C).
-spec f14(change()) -> non_neg_integer().
f14(C) -> call(14, C).
-spec f15(change()) -> non_neg_integer().
f15(C) -> call(15, C).
-spec f16(change()) -> non_neg_integer().
f16(C) -> call(16, C).
-spec f17(change()) -> non_neg_integer().
f17(C) -> call(17, C).
-spec f18(change()) -> non_neg_integer().
f18(C) -> call(18, C).
-spec f19(change()) -> non_neg_integer().
f19(C) -> call(19, C).
-spec f20(change()) -> non_neg_integer().
f20(C) -> call(20, C).

call(I, Change) ->
    Slow = rand:uniform(100) =< 5,
    Times = case Change of
                {slower, I} when Slow -> 8;
                {slower, I} -> 2;
                {tail, I} when Slow -> 8;
                _ when Slow -> 4;
                _ -> 1
            end,
    work(round((400 + 60 * I) * (0.75 + rand:uniform() / 2) * Times), 0).

work(0, Acc) -> Acc;
work(N, Acc) -> work(N - 1, (Acc * 31 + N) band 16#ffff).
