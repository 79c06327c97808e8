%%% @doc `make bench''s line for call trees (`trees => #{slower_than => Ns}'): what a call
%%% costs with trees on and no root slow enough to keep its tree, against the same session
%%% without trees. One process calls `ft_trees_target:deep/1', a tree 5 calls deep under it
%%% (6 traced calls a root); each session traces deep/1 and level/2, and the rounds
%%% alternate (without, with) so that the machine's load falls on both alike. Target: at
%%% most 1.3x. The trees are built on the aggregator thread, not on the caller's scheduler:
%%% on a machine with fewer cores than busy threads that thread competes with the caller.
-module(ferrotrace_trees_cost).

-export([main/0]).

-define(ROUNDS, 7).
-define(SPEC, [{ft_trees_target, deep, 1}, {ft_trees_target, level, 2}]).

-spec main() -> ok.
main() ->
    Roots = max(1000, round(20000 * scale())),
    _ = loop(Roots, 0),  % loaded and warm
    Pairs = [{per_call(#{}, Roots), per_call(#{trees => #{slower_than => 3600000000000}}, Roots)}
             || _ <- lists:seq(1, ?ROUNDS)],
    Without = median([W || {{W, _, _}, _} <- Pairs]),
    With = median([T || {_, {T, _, _}} <- Pairs]),
    CpuWithout = median([C || {{_, C, _}, _} <- Pairs]),
    CpuWith = median([C || {_, {_, C, _}} <- Pairs]),
    Dropped = lists:sum([D1 + D2 || {{_, _, D1}, {_, _, D2}} <- Pairs]),
    Untraced = median([untraced(Roots) || _ <- lists:seq(1, ?ROUNDS)]),
    io:format("call trees (one process, a 5-deep tree, no root slow enough): ~.2fx the same "
              "session without trees (target <= 1.3x): ~b ns a root call with trees, ~b ns "
              "without, ~b ns untraced (medians of ~b rounds of ~b roots); the collector's CPU "
              "(aggregation, off the schedulers) ~b ns a root with trees, ~b without (~.2fx); "
              "~b events dropped in all~n",
              [With / Without, round(With), round(Without), round(Untraced), ?ROUNDS, Roots,
               round(CpuWith), round(CpuWithout), CpuWith / max(1, CpuWithout), Dropped]).

%% `{ns per root call, the collector's CPU ns per root call, events dropped}' in a session
%% with `Options' (and `compensate => false': no calibration at each start; rings large
%% enough that a collector slowed by the machine's load drops nothing, as a rule).
per_call(Options, Roots) ->
    {ok, S} = ferrotrace:calls(?SPEC, maps:merge(#{duration => 600000, compensate => false,
                                                   ring_size => 1 bsl 19}, Options)),
    Ns = timed(Roots),
    ok = ferrotrace:stop(S),
    #{collector_cpu_ns := Cpu, events := #{dropped := Dropped}} = ferrotrace:summary(S),
    _ = ferrotrace:release(S),
    {Ns, Cpu / Roots, Dropped}.

untraced(Roots) -> timed(Roots).

timed(Roots) ->
    T0 = erlang:monotonic_time(nanosecond),
    _ = loop(Roots, 0),
    (erlang:monotonic_time(nanosecond) - T0) / Roots.

loop(0, Acc) -> Acc;
loop(N, Acc) -> loop(N - 1, Acc + ft_trees_target:deep(N)).

scale() ->
    case os:getenv("FERROTRACE_BENCH_SCALE") of
        false -> 1.0;
        S -> try list_to_float(S) catch error:badarg -> float(list_to_integer(S)) end
    end.

median(Values) ->
    lists:nth((length(Values) + 1) div 2, lists:sort(Values)).
