%%% @doc Captures (`capture => #{slower_than, every, max_captures}'): what a capture holds
%%% matches the node at that moment, `every' and `max_captures' bound how many are taken
%%% (what they refuse is counted), bad options are refused, a session without captures
%%% answers `[]', and a capture's cost with 10,000 idle processes is printed.
%%%
%%% Nothing here asserts a duration: the traced calls sleep at least as long as the
%%% threshold needs (a loaded machine only makes them slower), and figures are compared
%%% with processes that hold still (blocked in a selective receive) while the capture runs.
-module(ferrotrace_capture_SUITE).

-include("support/ft_ct.hrl").

-export([figures_match/1, every_and_max_bound/1, folded_by_readers/1, bad_options/1,
         no_captures/1, report_lines/1, many_processes/1, cluster_session/1]).

-define(WORK, {ft_slow_target, work, 1}).
-define(LONG, 120000).
-define(MS, 1000000).
-define(WAIT, 30000).

suite() ->
    [{ct_hooks, [{ft_ct, [ft_slow_target, {distribution, ferrotrace_capture_ct}]}]}].

all() ->
    [figures_match, every_and_max_bound, folded_by_readers, bad_options, no_captures,
     report_lines, many_processes, cluster_session].

%%--------------------------------------------------------------------------------------

%% One slow call (100 ms, threshold 50 ms) from a process with 55 unread messages, while a
%% process holds 1,234 and another has burnt reductions since the start.
-spec figures_match(config()) -> ok.
figures_match(_Config) ->
    {ok, S} = ferrotrace:calls(?WORK, #{duration => ?LONG, recent => 20,
                                        capture => #{slower_than => 50 * ?MS}}),
    Holder = holder(1234),
    Burner = spawn_link(fun() -> burn(3000000), receive stop -> ok end end),
    ok = ft_ct:poll(fun() -> element(2, erlang:process_info(Burner, current_function)) =/= {?MODULE, burn, 1}
                                 andalso element(2, erlang:process_info(Burner, status)) =:= waiting
                    end, ?WAIT),
    Parent = self(),
    Slow = spawn_link(fun() ->
                              [self() ! {junk, I} || I <- lists:seq(1, 55)],
                              _ = ft_slow_target:work(100),
                              Parent ! {self(), returned},
                              receive release -> ok end
                      end),
    receive {Slow, returned} -> ok end,
    ok = ft_ct:poll(fun() -> length(ferrotrace:captures(S)) >= 1 end, ?WAIT),
    [Capture] = ferrotrace:captures(S),
    ct:pal("capture: ~p", [Capture]),
    #{call := Call, process := Process, node := Node, top_queues := Queues,
      top_reductions := Reductions, recent := Recent, tree := Tree, took := Took} = Capture,
    %% The slow call.
    #{mfa := ?WORK, pid := Slow, latency := Latency, started_at := StartedAt} = Call,
    ?assert(Latency >= 100 * ?MS - ?MS, {latency, Latency}),
    ?assert(is_integer(StartedAt) andalso StartedAt =< maps:get(at, Capture)),
    %% The slow process, blocked in its receive since it returned.
    ?assertMatch(#{message_queue_len := 55, current_function := {_, _, _}}, Process),
    ?assert(maps:get(memory, Process) > 0 andalso maps:get(reductions, Process) > 0),
    %% The node.
    ?assertEqual(length(erlang:statistics(run_queue_lengths)), length(maps:get(run_queue_lengths, Node))),
    ?assert(maps:get(total, maps:get(memory, Node)) > 0),
    ?assert(maps:get(process_count, Node) >= 3),
    %% The top 10s: longest first, the holder with exactly its queue, the burner with all
    %% its reductions (it was spawned after the baseline and holds still since).
    ?assert(length(Queues) =< 10 andalso length(Reductions) =< 10),
    QueueLens = [Q || #{message_queue_len := Q} <- Queues],
    ?assertEqual(lists:reverse(lists:sort(QueueLens)), QueueLens),
    %% Each named as it was then (a plain spawn: its initial call).
    ?assert(lists:member(#{pid => Holder, name => {erlang, apply, 2}, message_queue_len => 1234}, Queues), Queues),
    ?assert(lists:member(#{pid => Slow, name => {erlang, apply, 2}, message_queue_len => 55}, Queues), Queues),
    {reductions, Burnt} = erlang:process_info(Burner, reductions),
    ?assert(Burnt >= 2000000),
    ?assertMatch([#{reductions := R}] when R =< Burnt andalso R >= 2000000,
                 [E || E = #{pid := P} <- Reductions, P =:= Burner]),
    %% The flight recorder's events, the slow call's return among them; no tree (no trees).
    ?assert(lists:any(fun(#{pid := P, event := return, mfa := ?WORK}) -> P =:= Slow; (_) -> false end, Recent)),
    ?assertEqual(undefined, Tree),
    ?assert(is_integer(Took) andalso Took >= 0),
    ?assertMatch({ok, #{seen := 1, sent := 1, refused_every := 0, refused_max := 0}},
                 ferrotrace_capture:counts(S)),
    [P ! stop || P <- [Holder, Burner]],
    Slow ! release,
    ok.

%% `max_captures => 2' with `every => 0': 5 slow calls take 2 captures, 3 refused over
%% max; `every' of an hour: 4 slow calls take 1, 3 refused within `every'.
-spec every_and_max_bound(config()) -> ok.
every_and_max_bound(_Config) ->
    {ok, S1} = ferrotrace:calls(?WORK, #{duration => ?LONG,
                                         capture => #{slower_than => 5 * ?MS, every => 0, max_captures => 2}}),
    [ft_slow_target:work(10) || _ <- lists:seq(1, 5)],
    ok = ferrotrace:stop(S1),
    ?assertMatch({ok, #{seen := 5, sent := 2, refused_every := 0, refused_max := 3}},
                 ferrotrace_capture:counts(S1)),
    ok = ft_ct:poll(fun() -> length(ferrotrace:captures(S1)) >= 2 end, ?WAIT),
    ?assertEqual(2, length(ferrotrace:captures(S1))),
    [#{at := At1}, #{at := At2}] = ferrotrace:captures(S1),
    ?assert(At1 =< At2, oldest_first),
    {ok, S2} = ferrotrace:calls(?WORK, #{duration => ?LONG,
                                         capture => #{slower_than => 5 * ?MS, every => 3600000}}),
    [ft_slow_target:work(10) || _ <- lists:seq(1, 4)],
    ok = ferrotrace:stop(S2),
    ?assertMatch({ok, #{seen := 4, sent := 1, refused_every := 3, refused_max := 0}},
                 ferrotrace_capture:counts(S2)),
    ok = ft_ct:poll(fun() -> length(ferrotrace:captures(S2)) >= 1 end, ?WAIT),
    ?assertEqual(1, length(ferrotrace:captures(S2))),
    ok.

%% One aggregator (the collector's own) and a read after each slow call: a reader folds
%% events in on a dirty scheduler, where no message may be sent; the slow calls it finds are
%% still captured (the collector sends them), and the session runs on.
-spec folded_by_readers(config()) -> ok.
folded_by_readers(_Config) ->
    {ok, S} = ferrotrace:calls(?WORK, #{duration => ?LONG, aggregators => 1,
                                        capture => #{slower_than => 5 * ?MS, every => 0, max_captures => 20}}),
    [begin _ = ft_slow_target:work(6), #{status := running} = ferrotrace:summary(S) end
     || _ <- lists:seq(1, 20)],
    ok = ft_ct:poll(fun() -> length(ferrotrace:captures(S)) >= 20 end, ?WAIT),
    ?assertMatch({ok, #{seen := 20, sent := 20}}, ferrotrace_capture:counts(S)),
    ?assertMatch(#{status := running}, ferrotrace:summary(S)),
    ok.

-spec bad_options(config()) -> ok.
bad_options(_Config) ->
    Bad = [5, #{}, #{slower_than => 0}, #{slower_than => -1}, #{slower_than => 1.5},
           #{slower_than => 1, every => -1}, #{slower_than => 1, every => 3600001},
           #{slower_than => 1, max_captures => 0}, #{slower_than => 1, max_captures => 1001},
           #{slower_than => 1, max_captures => infinity}, #{slower_than => 1, bogus => 1}],
    [begin
         ?assertMatch({error, {bad_option, {capture, Value, Accepted}}} when is_binary(Accepted),
                      ferrotrace:calls(?WORK, #{capture => Value})),
         ?assertMatch({error, {bad_option, {capture, Value, _}}}, ferrotrace:calls(?WORK, [{capture, Value}]))
     end || Value <- Bad],
    {error, {bad_option, {capture, _, Accepted}}} = ferrotrace:calls(?WORK, #{capture => 5}),
    %% A mistyped key is named as trees => #{...}'s are (one check serves both), also
    %% where slower_than itself is the one mistyped.
    {error, {bad_option, {capture, _, <<"did you mean slower_than? a map of ", _/binary>>}}} =
        ferrotrace:calls(?WORK, #{capture => #{slower_thn => 5}}),
    {error, {bad_option, {capture, _, <<"did you mean every? ", _/binary>>}}} =
        ferrotrace:calls(?WORK, #{capture => #{slower_than => 5, evrey => 10}}),
    [?assertNotEqual(nomatch, binary:match(Accepted, Word))
     || Word <- [<<"slower_than">>, <<"every">>, <<"max_captures">>, <<"default 10">>]],
    ?assertEqual([], ferrotrace:list()),
    ok.

-spec no_captures(config()) -> ok.
no_captures(_Config) ->
    {ok, S} = ferrotrace:calls(?WORK, #{duration => ?LONG}),
    _ = ft_slow_target:work(10),
    ?assertEqual([], ferrotrace:captures(S)),
    ?assertEqual({ok, none}, ferrotrace_capture:counts(S)),
    ok = ferrotrace:release(S),
    ?assertMatch({error, {released, S, _}}, ferrotrace:captures(S)),
    ?assertMatch({error, _}, ferrotrace:captures(make_ref())),
    ?assertMatch({error, _}, ferrotrace:captures(no_such_session_name)),
    ok.

%% The text report lists the captures and the refusals, the JSON export carries them, and
%% the capture process ends with its session.
-spec report_lines(config()) -> ok.
report_lines(_Config) ->
    {ok, S} = ferrotrace:calls(?WORK, #{duration => ?LONG,
                                        capture => #{slower_than => 5 * ?MS, every => 0, max_captures => 1}}),
    %% A named slow process (3 calls of 30 ms: the capture, taken within milliseconds of the
    %% first return, finds it in its next call's timer:sleep/1), a proc_lib process named
    %% by its initial call with 50 unread messages, the longest queue.
    Queue = proc_lib:spawn(fun() -> receive stop -> ok end end),
    [Queue ! hello || _ <- lists:seq(1, 50)],
    Self = self(),
    Slow = spawn(fun() ->
                         true = register(ft_capture_slow, self()),
                         [ft_slow_target:work(30) || _ <- lists:seq(1, 3)],
                         Self ! {worked, self()},
                         receive stop -> ok end
                 end),
    receive {worked, Slow} -> ok after ?WAIT -> ct:fail(slow_process_stuck) end,
    ok = ft_ct:poll(fun() -> length(ferrotrace:captures(S)) >= 1 end, ?WAIT),
    ok = ferrotrace:stop(S),
    Text = lists:flatten(io_lib:format("~ts", [ferrotrace_capture:lines(ferrotrace:captures(S), ferrotrace_capture:counts(S), 200)])),
    Slow ! stop,
    Queue ! stop,
    ct:pal("~ts", [Text]),
    ?assertNotEqual(nomatch, string:find(Text, "captures: 1 taken")),
    ?assertNotEqual(nomatch, string:find(Text, "ft_slow_target:work/1")),
    %% The slow process named, where it was, its queue; the longest queue named.
    ?assertMatch({match, _}, re:run(Text, "ft_slow_target:work/1 \\d+(\\.\\d+)? ms in <0\\.\\d+\\.0> ft_capture_slow\n")),
    ?assertMatch({match, _}, re:run(Text, "\n    at timer:sleep/1, queue 0, [0-9.]+ KB, \\d+ reductions\n")),
    ?assertMatch({match, _}, re:run(Text, "\n    longest queues: 50 " ++ pid_to_list(Queue)
                                    ++ " ferrotrace_capture_SUITE:report_lines/1 \\(fun\\)")),
    ?assertMatch({match, _}, re:run(Text, "\n    busiest \\(reductions\\): \\d+ <")),
    [#{process := #{name := ft_capture_slow, current_function := {timer, sleep, 1}},
       top_queues := [#{pid := Queue, message_queue_len := 50, name := {ferrotrace_capture_SUITE, _, 0}} | _]}]
        = ferrotrace:captures(S),
    ReportText = lists:flatten(io_lib:format("~ts", [ferrotrace:format(S)])),
    ?assertNotEqual(nomatch, string:find(ReportText, "2 over max_captures")),
    ?assertNotEqual(nomatch, string:find(ReportText, "ft_capture_slow")),
    %% The JSON export carries them; the capture process goes with the session.
    {ok, Json} = ferrotrace_export:local(S, json, #{}),
    [?assertNotEqual(nomatch, binary:match(Json, Key)) || Key <- [<<"\"captures\"">>, <<"\"top_queues\"">>]],
    {ok, _, _, #{capture_pid := Capture}} = ferrotrace_registry:lookup(S),
    ?assert(is_process_alive(Capture)),
    ok = ferrotrace:release(S),
    ok = ft_ct:poll(fun() -> not is_process_alive(Capture) end, ?WAIT),
    ok.

%% 10,000 idle processes: the capture's own figures (printed: `took') and the node's
%% process count.
-spec many_processes(config()) -> ok.
many_processes(_Config) ->
    Idle = [spawn(fun() -> receive stop -> ok end end) || _ <- lists:seq(1, 10000)],
    try
        {ok, S} = ferrotrace:calls(?WORK, #{duration => ?LONG,
                                            capture => #{slower_than => 5 * ?MS, every => 0, max_captures => 3}}),
        [ft_slow_target:work(10) || _ <- lists:seq(1, 3)],
        ok = ft_ct:poll(fun() -> length(ferrotrace:captures(S)) >= 3 end, ?WAIT),
        Captures = ferrotrace:captures(S),
        Took = [T || #{took := T} <- Captures],
        ct:pal("captures with ~b processes took ~p us", [erlang:system_info(process_count), Took]),
        [?assert(Count >= 10000) || #{node := #{process_count := Count}} <- Captures]
    after
        [P ! stop || P <- Idle]
    end,
    ok.

%% A cluster session: each node captures its own slow calls; captures/1 on the cluster
%% session gives every node's, in the order they were taken.
-spec cluster_session(config()) -> ok.
cluster_session(_Config) ->
    Nodes = [begin {ok, _Peer, Node} = ft_ct:peer(#{name => peer:random_name(N)}), Node end
             || N <- [ftcap1, ftcap2]],
    {ok, C} = ferrotrace:calls(?WORK, #{nodes => Nodes, duration => ?LONG,
                                        capture => #{slower_than => 5 * ?MS, every => 0}}),
    [_ = erpc:call(N, ft_slow_target, work, [10], 30000) || N <- Nodes],
    ok = ft_ct:poll(fun() -> is_list(ferrotrace:captures(C)) andalso length(ferrotrace:captures(C)) >= 2 end, ?WAIT),
    Captures = ferrotrace:captures(C),
    ct:pal("cluster captures: ~p", [[maps:with([call, at], X) || X <- Captures]]),
    ?assertEqual(lists:sort(Nodes), lists:sort([node(P) || #{call := #{pid := P}} <- Captures])),
    Ats = [At || #{at := At} <- Captures],
    ?assertEqual(lists:sort(Ats), Ats),
    ok = ferrotrace:release(C),
    ok.

%%--------------------------------------------------------------------------------------

%% A process blocked in a selective receive with `N' messages it does not take.
holder(N) ->
    Pid = spawn_link(fun() -> receive stop -> ok end end),
    [Pid ! {m, I} || I <- lists:seq(1, N)],
    Pid.

burn(0) -> ok;
burn(N) -> burn(N - 1).
