%%% @doc Merging cluster figures (ferrotrace_cluster_merge) without peer nodes: each "node"
%%% is a local session of its own, run with a known workload, whose summary and histograms
%%% are what a part would ship; the merge must add them as one session would have counted.
-module(ferrotrace_cluster_merge_tests).

% Not eunit.hrl: its generated test/0 has no spec (see ferrotrace_bad_input_tests).
-include_lib("stdlib/include/assert.hrl").

-export([two_nodes_add_test/0, three_nodes_any_order_test/0, one_node_is_itself_test/0,
         empty_node_test/0, function_on_one_node_test/0, no_node_answered_test/0,
         stop_reason_test/0, figures_and_down_test/0, lists_test/0, hdr_log_test/0,
         intervals_test/0, slow_calls_and_recent_test/0]).

-define(SPEC, [{ft_export_target, outer, 1}, {ft_export_target, mid, 1},
               {ft_export_target, leaf, 1}]).
-define(OUTER, {ft_export_target, outer, 1}).
-define(LEAF, {ft_export_target, leaf, 1}).
-define(NOW, 1795414180627).

%% One node's figures: a local session over `Spec' while this process calls outer/1 `Runs'
%% times (each call sleeps 2 * `Ms' ms in its leaves), as part_figures/2 ships them.
-spec node_figures(list(), non_neg_integer(), non_neg_integer()) -> ferrotrace_cluster_merge:node_figures().
node_figures(Spec, Runs, Ms) ->
    {module, ft_export_target} = code:ensure_loaded(ft_export_target),
    {ok, S} = ferrotrace:calls(Spec, #{duration => 60000, pids => [self()]}),
    try
        ok = ft_export_target:run(Runs, Ms),
        ok = ferrotrace:stop(S),
        {ok, Hs} = ferrotrace_tracer:session_histograms_bytes(S),
        {ferrotrace:summary(S), Hs}
    after
        ok = ferrotrace:release(S)
    end.

-spec info([node()], [node()]) -> ferrotrace_cluster_merge:info().
info(Nodes, Down) ->
    #{id => self(), name => shop, nodes => Nodes, nodes_down => Down, stop_reason => undefined}.

-spec call(ferrotrace:summary(), mfa()) -> map().
call(#{calls := Calls}, MFA) ->
    [Call] = [C || #{mfa := M} = C <- Calls, M =:= MFA],
    Call.

-spec count(ferrotrace:summary(), mfa()) -> non_neg_integer().
count(Summary, MFA) ->
    maps:get(count, call(Summary, MFA)).

%% Counts add, the mean is the summed totals over all calls, max is the larger node's, the
%% percentiles come from the summed histogram (a slow node and a fast one: the median is
%% the fast node's, the p99 the slow node's), histogram/2 adds up to the merged count.
-spec two_nodes_add_test() -> ok.
two_nodes_add_test() ->
    Slow = {SlowSummary, _} = node_figures(?SPEC, 2, 3),
    Fast = {FastSummary, _} = node_figures(?SPEC, 3, 0),
    Merged = ferrotrace_cluster_merge:summary(info([a@h, b@h], []), [{a@h, Slow}, {b@h, Fast}]),
    ?assertEqual(5, count(Merged, ?OUTER)),
    ?assertEqual(10, count(Merged, ?LEAF)),
    #{returns := Returns, exceptions := 0, total := Total, mean := Mean, max := Max,
      p50 := P50, p99 := P99} = call(Merged, ?OUTER),
    ?assertEqual(5, Returns),
    [SlowOuter, FastOuter] = [call(S, ?OUTER) || S <- [SlowSummary, FastSummary]],
    ?assertEqual(maps:get(total, SlowOuter) + maps:get(total, FastOuter), Total),
    ?assertEqual(round(Total / 5), Mean),
    ?assertEqual(max(maps:get(max, SlowOuter), maps:get(max, FastOuter)), Max),
    ?assertEqual(maps:get(max, SlowOuter), Max),
    ?assert(P50 =< maps:get(max, FastOuter), {P50, FastOuter}),
    ?assert(P99 >= 6000000, P99),
    Buckets = ferrotrace_cluster_merge:histogram([{a@h, Slow}, {b@h, Fast}], ?OUTER),
    ?assertEqual(5, lists:sum([N || {_, _, N} <- Buckets])),
    %% The accounting maps add, the session's fields and the nodes' summaries pass through.
    #{seen := SeenSlow} = maps:get(events, SlowSummary),
    #{seen := SeenFast} = maps:get(events, FastSummary),
    ?assertEqual(SeenSlow + SeenFast, maps:get(seen, maps:get(events, Merged))),
    ?assertMatch(#{id := _, name := shop, status := stopped, stop_reason := user,
                   nodes := [a@h, b@h], nodes_down := []}, Merged),
    ?assertEqual(#{a@h => SlowSummary, b@h => FastSummary}, maps:get(by_node, Merged)),
    ?assertEqual(2, maps:get(aggregators, Merged) div maps:get(aggregators, SlowSummary)),
    %% The backlog is the worse node's, not a sum.
    Peaks = [P || #{backlog := #{ring_peak := P}} <- [SlowSummary, FastSummary]],
    ?assertEqual(lists:max(Peaks), maps:get(ring_peak, maps:get(backlog, Merged))),
    ?assertEqual(maps:get(ring_size, maps:get(backlog, SlowSummary)),
                 maps:get(ring_size, maps:get(backlog, Merged))),
    %% Calls sorted by total time, largest first.
    Totals = [T || #{total := T} <- maps:get(calls, Merged)],
    ?assertEqual(lists:reverse(lists:sort(Totals)), Totals),
    ok.

%% Three nodes add up whatever order they answered in.
-spec three_nodes_any_order_test() -> ok.
three_nodes_any_order_test() ->
    Figures = lists:zip([a@h, b@h, c@h], [node_figures(?SPEC, K, 0) || K <- [1, 2, 3]]),
    Merged = ferrotrace_cluster_merge:summary(info([a@h, b@h, c@h], []), Figures),
    ?assertEqual(6, count(Merged, ?OUTER)),
    ?assertEqual(12, count(Merged, ?LEAF)),
    Reversed = ferrotrace_cluster_merge:summary(info([a@h, b@h, c@h], []), lists:reverse(Figures)),
    ?assertEqual(Merged, Reversed),
    ok.

%% One node merged with nothing is that node: its own figures, exact mean included.
-spec one_node_is_itself_test() -> ok.
one_node_is_itself_test() ->
    Node = {Summary, _} = node_figures(?SPEC, 4, 1),
    Merged = ferrotrace_cluster_merge:summary(info([a@h], []), [{a@h, Node}]),
    Keys = [count, returns, exceptions, total, mean, p50, p90, p99, p999, max],
    [?assertEqual(maps:with(Keys, call(Summary, MFA)), maps:with(Keys, call(Merged, MFA)), MFA)
     || #{mfa := MFA} <- maps:get(calls, Summary)],
    ?assertEqual(maps:get(backlog, Summary), maps:get(backlog, Merged)),
    ?assertEqual(maps:get(started_at, Summary), maps:get(started_at, Merged)),
    ok.

%% A node that traced nothing adds nothing, but is listed by node.
-spec empty_node_test() -> ok.
empty_node_test() ->
    Busy = node_figures(?SPEC, 2, 0),
    Empty = {EmptySummary, []} = node_figures(?SPEC, 0, 0),
    ?assertEqual([], maps:get(calls, EmptySummary)),
    Alone = ferrotrace_cluster_merge:summary(info([a@h], []), [{a@h, Busy}]),
    Both = ferrotrace_cluster_merge:summary(info([a@h, b@h], []), [{a@h, Busy}, {b@h, Empty}]),
    ?assertEqual(maps:get(calls, Alone), maps:get(calls, Both)),
    ?assertEqual([a@h, b@h], lists:sort(maps:keys(maps:get(by_node, Both)))),
    ok.

%% A function only one node traced is that node's alone; the others add.
-spec function_on_one_node_test() -> ok.
function_on_one_node_test() ->
    Full = node_figures(?SPEC, 2, 0),
    LeafOnly = node_figures([?LEAF], 3, 0),
    Figures = [{a@h, Full}, {b@h, LeafOnly}],
    Merged = ferrotrace_cluster_merge:summary(info([a@h, b@h], []), Figures),
    ?assertEqual(2, count(Merged, ?OUTER)),
    ?assertEqual(4 + 6, count(Merged, ?LEAF)),
    ?assertEqual(3, length(maps:get(calls, Merged))),
    ?assertEqual(2, lists:sum([N || {_, _, N} <- ferrotrace_cluster_merge:histogram(Figures, ?OUTER)])),
    ?assertEqual(10, lists:sum([N || {_, _, N} <- ferrotrace_cluster_merge:histogram(Figures, ?LEAF)])),
    ?assertEqual({error, {no_such_function, {lists, seq, 9}}},
                 ferrotrace_cluster_merge:histogram(Figures, {lists, seq, 9})),
    ok.

%% Every node down: an empty, stopped summary that still names the nodes.
-spec no_node_answered_test() -> ok.
no_node_answered_test() ->
    Merged = ferrotrace_cluster_merge:summary(info([a@h, b@h], [a@h, b@h]), []),
    ?assertMatch(#{status := stopped, stop_reason := undefined, started_at := undefined,
                   stopped_at := undefined, elapsed_ms := undefined, calls := [], loops := [],
                   events := #{}, backlog := #{}, collector_cpu_ns := 0, aggregators := 0,
                   nodes := [a@h, b@h], nodes_down := [a@h, b@h]}, Merged),
    ?assertEqual(#{}, maps:get(by_node, Merged)),
    ?assertEqual({error, {no_such_function, ?OUTER}}, ferrotrace_cluster_merge:histogram([], ?OUTER)),
    ok.

%% The coordinator's reason (a part stopped by its limit, then it stopped the others) wins
%% over the nodes' own; without one, the first node's.
-spec stop_reason_test() -> ok.
stop_reason_test() ->
    Node = node_figures(?SPEC, 1, 0),
    Info = info([a@h], []),
    ?assertEqual(user, maps:get(stop_reason, ferrotrace_cluster_merge:summary(Info, [{a@h, Node}]))),
    ?assertEqual(limit, maps:get(stop_reason, ferrotrace_cluster_merge:summary(Info#{stop_reason => limit},
                                                                               [{a@h, Node}]))),
    ok.

%% What the nodes answered to part_figures/2: figures, or a node counted as down.
-spec figures_and_down_test() -> ok.
figures_and_down_test() ->
    Replies = [{a@h, {ok, #{calls => []}, []}},
               {b@h, {badrpc, {error, {erpc, noconnection}}}},
               {c@h, {error, {no_such_session, 3}}},
               {e@h, {ok, #{calls => [x]}, [{?OUTER, <<>>}]}}],
    ?assertEqual({[{a@h, {#{calls => []}, []}}, {e@h, {#{calls => [x]}, [{?OUTER, <<>>}]}}],
                  [b@h, c@h, d@h]},
                 ferrotrace_cluster_merge:figures([d@h], Replies)),
    ?assertEqual({[], [d@h]}, ferrotrace_cluster_merge:figures([d@h], [])),
    ok.

%% Lists from the nodes that have one; an error only when no node answered a list.
-spec lists_test() -> ok.
lists_test() ->
    ?assertEqual([[1], [2, 3]], ferrotrace_cluster_merge:lists([{a@h, [1]}, {b@h, {error, x}}, {c@h, [2, 3]}])),
    ?assertEqual({error, x}, ferrotrace_cluster_merge:lists([{a@h, {badrpc, y}}, {b@h, {error, x}}, {c@h, {error, z}}])),
    ?assertEqual([], ferrotrace_cluster_merge:lists([{a@h, {badrpc, y}}])),
    ?assertEqual([], ferrotrace_cluster_merge:lists([])),
    ok.

%% The merged hdr_log: the earliest start, the longest run, each function's histograms
%% added; with no node, now and nothing.
-spec hdr_log_test() -> ok.
hdr_log_test() ->
    A = {SA, _} = node_figures(?SPEC, 1, 0),
    B = {SB, _} = node_figures(?SPEC, 2, 0),
    {Start, Elapsed, Hs} = ferrotrace_cluster_merge:hdr_log([{a@h, A}, {b@h, B}], ?NOW * 2),
    ?assertEqual(min(maps:get(started_at, SA), maps:get(started_at, SB)), Start),
    ?assertEqual(max(maps:get(elapsed_ms, SA), maps:get(elapsed_ms, SB)), Elapsed),
    [Outer] = [Bin || {MFA, Bin} <- Hs, MFA =:= ?OUTER],
    ?assertMatch({ok, #{count := 3}}, ferrotrace_tracer:histogram_figures(Outer)),
    ?assertEqual({?NOW, 0, []}, ferrotrace_cluster_merge:hdr_log([], ?NOW)),
    ok.

%% Two nodes' intervals on one clock: node a starts at NOW, node b 30 ms later; in slots
%% of 20 ms, a's two 10 ms intervals share slot 0 (added), b's lands in slot 1.
-spec intervals_test() -> ok.
intervals_test() ->
    {_, HsA} = node_figures(?SPEC, 1, 0),
    {_, HsB} = node_figures(?SPEC, 2, 0),
    [OuterA] = [Bin || {MFA, Bin} <- HsA, MFA =:= ?OUTER],
    [OuterB] = [Bin || {MFA, Bin} <- HsB, MFA =:= ?OUTER],
    Nodes = [{?NOW, [{0, 10, [{?OUTER, OuterA}]}, {10, 10, [{?OUTER, OuterA}]}]},
             {?NOW + 30, [{0, 10, [{?OUTER, OuterB}]}]}],
    {Start, Slots} = ferrotrace_cluster_merge:intervals(20, ?NOW + 1000, Nodes),
    ?assertEqual(?NOW, Start),
    ?assertMatch([{0, 20, [{?OUTER, _}]}, {30, 10, [{?OUTER, _}]}], Slots),
    [{_, _, [{_, Slot0}]}, {_, _, [{_, Slot1}]}] = Slots,
    ?assertMatch({ok, #{count := 2}}, ferrotrace_tracer:histogram_figures(Slot0)),
    ?assertMatch({ok, #{count := 2}}, ferrotrace_tracer:histogram_figures(Slot1)),
    %% A clock earlier than every node's start is the start.
    ?assertMatch({?NOW, _}, ferrotrace_cluster_merge:intervals(20, ?NOW, Nodes)),
    ?assertEqual({?NOW - 5, []}, ferrotrace_cluster_merge:intervals(20, ?NOW - 5, [])),
    ok.

%% Kept calls: slowest first, or in the order they began; recorded events in time order.
-spec slow_calls_and_recent_test() -> ok.
slow_calls_and_recent_test() ->
    Call = fun(D, T) -> #{duration => D, started_at => T} end,
    Lists = [[Call(50, 3), Call(10, 1)], [Call(70, 2)], []],
    ?assertEqual([Call(70, 2), Call(50, 3), Call(10, 1)], ferrotrace_cluster_merge:slow_calls(slowest, Lists)),
    ?assertEqual([Call(10, 1), Call(70, 2), Call(50, 3)], ferrotrace_cluster_merge:slow_calls(threshold, Lists)),
    ?assertEqual([#{at => 1}, #{at => 2}, #{at => 5}],
                 ferrotrace_cluster_merge:recent([[#{at => 2}, #{at => 5}], [#{at => 1}]])),
    ok.
