%%% @doc Common Test suite for the event kinds other than calls (`ferrotrace:processes/2',
%%% `calls/2' with `also', raw sessions with their own flags): exact counts on known
%%% workloads (messages, sizes, spawns and exit reasons, GC), the report sections, the
%%% series of `histogram/2', bad input, and the refusal of unsafe kinds.
%%%
%%% Timing: no assertion depends on how fast anything runs; workers end by message, and the
%%% test waits for their 'DOWN' before reading the summary (which folds in every event
%%% stamped before it is read).
-module(ferrotrace_activity_SUITE).

-include("support/ft_ct.hrl").

-export([messages_exact/1, message_sizes/1, spawn_storm/1, gc_pauses/1, raw_session/1,
         calls_also/1, report_sections/1, bad_input/1, scheduling/1, flags_undone/1,
         gc_two_sessions/1, latency_split/1, ports/1, migrations/1]).

-define(LONG, 60000).

suite() ->
    [{ct_hooks, [{ft_ct, [ft_test_target]}]}].

all() ->
    [messages_exact, message_sizes, spawn_storm, gc_pauses, raw_session, calls_also,
     report_sections, bad_input, scheduling, flags_undone, gc_two_sessions, latency_split, ports, migrations].

%%--------------------------------------------------------------------------------------
%% Workloads

%% A receiver that takes `N' messages and exits normally.
receiver(N) ->
    spawn(fun() -> [receive _ -> ok end || _ <- lists:seq(1, N)], ok end).

%% A sender that, on `go', sends each of `Messages' to `To' and exits normally.
sender(To, Messages) ->
    spawn(fun() -> receive go -> [To ! M || M <- Messages], ok end end).

wait_down(Pids) ->
    Refs = [erlang:monitor(process, P) || P <- Pids],
    [receive {'DOWN', R, process, _, _} -> ok after ?LONG -> error(timeout) end || R <- Refs],
    ok.

%%--------------------------------------------------------------------------------------
%% Cases

%% N messages from A to B: sent = N; received = N + 1 (B's N and A's `go'); every size is
%% that of the message, as erts_debug:flat_size/1 gives it.
-spec messages_exact(config()) -> ok.
messages_exact(_Config) ->
    N = 2000,
    Message = {ping, lists:seq(1, 20)},
    Words = erts_debug:flat_size(Message),
    B = receiver(N),
    A = sender(B, lists:duplicate(N, Message)),
    {ok, S} = ferrotrace:processes([messages], #{pids => [A, B], duration => ?LONG}),
    A ! go,
    ok = wait_down([A, B]),
    #{messages := M} = ferrotrace:summary(S),
    ?assertMatch(#{sent := N, to_dead := 0, size_capped := 0}, M),
    ?assertEqual(N + 1, maps:get(received, M)),
    ?assertMatch(#{count := N, p50 := Words, max := Words}, maps:get(size_words, M)),
    ?assertMatch([#{pid := A, count := N, words := W} | _] when W =:= N * Words,
                 maps:get(top_senders, M)),
    ?assertMatch([#{pid := B, count := N} | _], maps:get(top_receivers, M)),
    %% Not traced: no key.
    Summary = ferrotrace:summary(S),
    [?assertNot(maps:is_key(K, Summary)) || K <- [gc, scheduling, processes, ports]],
    ok.

%% Messages of three known sizes land in their power-of-two buckets, counted exactly; a
%% message too large to walk cheaply is counted as capped.
-spec message_sizes(config()) -> ok.
message_sizes(_Config) ->
    Small = x,                         % 0 words
    Mid = {a, b, c},                   % 4 words: bucket 4..7
    Large = lists:seq(1, 300),         % 600 words: bucket 512..1023
    Huge = lists:seq(1, 5000),         % past the walk's bound: capped
    Messages = lists:append([lists:duplicate(10, Small), lists:duplicate(20, Mid),
                             lists:duplicate(30, Large), [Huge]]),
    B = receiver(length(Messages)),
    A = sender(B, Messages),
    {ok, S} = ferrotrace:processes([messages], #{pids => [A], duration => ?LONG}),
    A ! go,
    ok = wait_down([A, B]),
    ?assertEqual([4, 600], [erts_debug:flat_size(T) || T <- [Mid, Large]]),
    Buckets = ferrotrace:histogram(S, size_words),
    ?assertEqual(10, count_in(0, Buckets)),
    ?assertEqual(20, count_in(4, Buckets)),
    ?assertEqual(30, count_in(600, Buckets)),
    #{messages := #{sent := 61, size_capped := 1, received := 1}} = ferrotrace:summary(S),
    ok.

count_in(Value, Buckets) ->
    lists:sum([C || {Low, High, C} <- Buckets, Low =< Value, Value =< High]).

%% A spawn storm: every child exits with `{ft_storm, I}', counted as `ft_storm' exactly;
%% each spawn and exit is seen, and each child's lifetime recorded.
-spec spawn_storm(config()) -> ok.
spawn_storm(_Config) ->
    N = 500,
    {ok, S} = ferrotrace:processes([procs], #{pids => new, duration => ?LONG}),
    Self = self(),
    Spawner = spawn(fun() ->
                            Children = [spawn_monitor(fun() -> exit({ft_storm, I}) end)
                                        || I <- lists:seq(1, N)],
                            [receive {'DOWN', R, _, _, _} -> ok end || {_, R} <- Children],
                            Self ! {storm_done, self()}
                    end),
    receive {storm_done, Spawner} -> ok after ?LONG -> error(timeout) end,
    ok = wait_down([Spawner]),
    #{processes := P} = ferrotrace:summary(S),
    ?assertEqual(N, proplists:get_value(ft_storm, maps:get(exit_reasons, P))),
    ?assert(maps:get(spawned, P) >= N),
    ?assert(maps:get(exited, P) >= N + 1),
    ?assert(maps:get(count, maps:get(lifetime, P)) >= N),
    ok.

%% A process that allocates shows GC pauses: at least the K explicit collections as major
%% ones, minor ones from allocation, words reclaimed, and it tops the pause table.
-spec gc_pauses(config()) -> ok.
gc_pauses(_Config) ->
    K = 10,
    Worker = spawn(fun() ->
                           receive go -> ok end,
                           [begin _ = length(lists:seq(1, 20000)), erlang:garbage_collect() end
                            || _ <- lists:seq(1, K)],
                           ok
                   end),
    case ferrotrace:processes([gc], #{pids => [Worker], duration => ?LONG}) of
        {ok, S} ->
            Worker ! go,
            ok = wait_down([Worker]),
            #{gc := G} = ferrotrace:summary(S),
            ?assert(maps:get(count, maps:get(major, G)) >= K),
            ?assert(maps:get(count, maps:get(minor, G)) >= 1),
            ?assert(maps:get(reclaimed_words, G) > 0),
            ?assertMatch([#{pid := Worker, count := C} | _] when C >= K + 1, maps:get(top_pause, G)),
            ?assertMatch([_ | _], ferrotrace:histogram(S, {gc, major}));
        {error, {unsafe, gc, _}} = Refused ->
            exit(Worker, kill),
            ct:comment("refused here: ~p", [Refused])
    end,
    ok.

%% A raw session with the user's own send/'receive'/procs flags gets the same figures.
-spec raw_session(config()) -> ok.
raw_session(_Config) ->
    N = 300,
    B = receiver(N),
    A = sender(B, lists:duplicate(N, hello)),
    {ok, S} = ferrotrace:session(#{duration => ?LONG}),
    _ = erlang:trace(A, true, [send, procs, {tracer, ferrotrace_tracer, S}]),
    _ = erlang:trace(B, true, ['receive', procs, {tracer, ferrotrace_tracer, S}]),
    A ! go,
    ok = wait_down([A, B]),
    Summary = ferrotrace:summary(S),
    ?assertMatch(#{messages := #{sent := N, received := N}}, Summary),
    ?assertMatch(#{processes := #{exited := 2, exit_reasons := [{normal, 2}]}}, Summary),
    ?assertMatch(#{events := #{ignored := 0}}, Summary),
    ok.

%% calls/2 with `also': one session, calls and messages.
-spec calls_also(config()) -> ok.
calls_also(_Config) ->
    N = 100,
    Self = self(),
    {ok, S} = ferrotrace:calls({ft_test_target, f, 1}, #{also => [messages], pids => new,
                                                        duration => ?LONG}),
    W = spawn(fun() -> [begin ft_test_target:f(I), Self ! {tick, self()} end || I <- lists:seq(1, N)] end),
    [receive {tick, W} -> ok after ?LONG -> error(timeout) end || _ <- lists:seq(1, N)],
    ok = wait_down([W]),
    Summary = ferrotrace:summary(S),
    ?assertMatch(#{calls := [#{mfa := {ft_test_target, f, 1}, count := N}]}, Summary),
    ?assertMatch(#{messages := #{sent := N}}, Summary),
    ?assertNot(maps:is_key(processes, Summary)),
    %% Without `also', a calls session shows no other kind, though `procs' brings exits.
    ok = ferrotrace:release(S),
    {ok, S2} = ferrotrace:calls({ft_test_target, f, 1}, #{pids => new, duration => ?LONG}),
    W2 = spawn(fun() -> ft_test_target:f(1) end),
    ok = wait_down([W2]),
    Plain = ferrotrace:summary(S2),
    ?assertMatch(#{calls := [#{count := 1, migrations := 0}]}, Plain),
    [?assertNot(maps:is_key(K, Plain)) || K <- [messages, processes, gc, scheduling, ports]],
    ok.

%% report/1 prints a section per kind with quantize histograms.
-spec report_sections(config()) -> ok.
report_sections(_Config) ->
    B = receiver(50),
    A = sender(B, lists:duplicate(50, lists:seq(1, 10))),
    {ok, S} = ferrotrace:processes([messages, procs], #{pids => [A, B], duration => ?LONG}),
    A ! go,
    ok = wait_down([A, B]),
    Text = ferrotrace:format(S),
    %% report/2 (options for the call table) prints the same sections.
    {ok, Printed} = ft_ct:capture(fun() -> ferrotrace:report(S, #{top => 3}) end),
    [?assertMatch({_, _}, binary:match(T, Part), Part)
     || T <- [Text, unicode:characters_to_binary(Printed)],
        Part <- [<<"messages: 50 sent, 51 received">>, <<"message size (words)">>,
                 <<"processes: 0 spawned, 2 exited">>, <<"exit reasons: normal 2">>]],
    ok.

%% Bad kinds, options and series are answered with {error, Reason} naming what is accepted.
-spec bad_input(config()) -> ok.
bad_input(_Config) ->
    ?assertMatch({error, {bad_kinds, [bogus], _}}, ferrotrace:processes([messages, bogus], #{})),
    ?assertMatch({error, {bad_kinds, [nope], _}}, ferrotrace:processes(nope, #{})),
    ?assertMatch({error, {bad_kinds, "messages", _}}, ferrotrace:processes("messages", #{})),
    ?assertMatch({error, {bad_kinds, [], _}}, ferrotrace:processes([], #{})),
    ?assertMatch({error, {bad_option, {pids, _, _}}}, ferrotrace:processes([ports], #{pids => [self()]})),
    ?assertMatch({error, {bad_option, {also, [x], _}}},
                 ferrotrace:calls({ft_test_target, f, 1}, #{also => [x]})),
    {ok, S} = ferrotrace:processes([procs], #{pids => [self()], duration => ?LONG}),
    ?assertMatch({error, {bad_mfa, bogus}}, ferrotrace:histogram(S, bogus)),
    ?assertEqual([], ferrotrace:histogram(S, wakeup)),
    ?assertEqual([], ft_ct:sessions() -- [S]),
    ok.

%% `scheduling' is refused before OTP 25.3 (running tracing and dirty schedulers); from 25.3
%% on it gives run slices, CPU per process, wakeup latency and where processes went out.
-spec scheduling(config()) -> ok.
scheduling(_Config) ->
    case ferrotrace_activity:otp_version() < [25, 3] of
        true ->
            {error, {unsafe, scheduling, Why}} = ferrotrace:processes([scheduling], #{}),
            Version = list_to_binary(erlang:system_info(otp_release)),
            ?assertMatch({_, _}, binary:match(Why, Version)),
            ?assertEqual([], ft_ct:sessions()),
            ?assertEqual({flags, []}, erlang:trace_info(self(), flags));
        false ->
            N = 20,
            B = receiver(N),
            {ok, S} = ferrotrace:processes([messages, scheduling], #{pids => [B, self()], duration => ?LONG}),
            %% B waits in receive (scheduled out) each time a message arrives.
            [begin B ! {tick, I}, timer:sleep(2) end || I <- lists:seq(1, N)],
            ok = wait_down([B]),
            #{messages := #{wakeup := Wakeup}, scheduling := Sched} = ferrotrace:summary(S),
            ?assert(maps:get(count, Wakeup) >= 1),
            ?assert(maps:get(max, Wakeup) < 10000000000),
            ?assert(maps:get(count, maps:get(run_slice, Sched)) >= N),
            ?assertMatch([_ | _], maps:get(out_locations, Sched)),
            %% The text for the README's scheduling section (read in the CT log).
            ct:log("~ts", [ferrotrace:format(S)])
    end,
    ok.

%% stop/1 removes every flag processes/2 set, from the processes and from `new'.
-spec flags_undone(config()) -> ok.
flags_undone(_Config) ->
    P = spawn(fun() -> receive stop -> ok end end),
    {ok, S} = ferrotrace:processes([messages, procs, gc, ports], #{duration => ?LONG}),
    ?assert(traced(P)),
    ok = ferrotrace:stop(S),
    ?assertNot(traced(P)),
    ?assertNot(traced(new)),
    [?assertNot(traced(Port)) || Port <- erlang:ports()],
    P ! stop,
    ok.

%% OTP 27 to 29: another trace session tracing GC makes `gc' refused (two sessions tracing
%% GC at once is a use-after-free, erlang/otp#11623); without it, `gc' is accepted.
-spec gc_two_sessions(config()) -> ok | {skip, string()}.
gc_two_sessions(_Config) ->
    Version = ferrotrace_activity:otp_version(),
    case Version >= [27] andalso Version < [30] of
        false ->
            {skip, "erlang/otp#11623 concerns OTP 27 to 29 (trace sessions)"};
        true ->
            Tracer = spawn(fun Loop() -> receive _ -> Loop() end end),
            Victim = spawn(fun() -> receive stop -> ok end end),
            Other = apply(trace, session_create, [ft_other, Tracer, []]),
            1 = apply(trace, process, [Other, Victim, true, [garbage_collection]]),
            try
                ?assertMatch({error, {unsafe, gc, _}},
                             ferrotrace:processes([gc], #{duration => ?LONG})),
                ?assertEqual([], ft_ct:sessions())
            after
                true = apply(trace, session_destroy, [Other]),
                exit(Tracer, kill),
                Victim ! stop
            end,
            {ok, S} = ferrotrace:processes([gc], #{duration => ?LONG}),
            ?assertMatch({error, {unsafe, gc, _}},
                         ferrotrace:processes([gc], #{duration => ?LONG})),
            ok = ferrotrace:release(S)
    end.

%% Traced by anyone: legacy flags (OTP 25, 26), or any trace session (OTP 27+: ferrotrace
%% uses a session of its own, and the legacy flags stay empty).
traced(Target) ->
    Legacy = erlang:trace_info(Target, flags) =/= {flags, []},
    _ = code:ensure_loaded(trace),
    Sessions = case erlang:function_exported(trace, session_info, 1) of
                   true when Target =:= new -> apply(trace, session_info, [new_processes]) =/= [];
                   true -> not lists:member(apply(trace, session_info, [Target]), [[], undefined]);
                   false -> false
               end,
    Legacy orelse Sessions.

%% The latency split: a traced function that sleeps 10 ms then burns 5 ms shows about 10 ms
%% descheduled and 5 ms running. Tolerance: descheduled at least 9.5 ms (the sleep) and
%% running at least 2 ms (the burn is wall-clock time, so a preemption moves part of it to
%% descheduled on a loaded machine), neither above 1 s; the parts' means add up to the mean
%% latency within 1% (HDR precision). Needs scheduling: OTP 25.3 and later.
-spec latency_split(config()) -> ok | {skip, string()}.
latency_split(_Config) ->
    case ferrotrace_activity:otp_version() < [25, 3] of
        true ->
            {skip, "scheduling (running) tracing is refused before OTP 25.3"};
        false ->
            {module, _} = code:ensure_loaded(ft_activity_target),
            N = 5,
            Self = self(),
            W = spawn(fun() -> receive go -> ok end,
                               [ft_activity_target:sleep_then_burn() || _ <- lists:seq(1, N)],
                               Self ! {done, self()}
                      end),
            {ok, S} = ferrotrace:calls({ft_activity_target, sleep_then_burn, 0},
                                       #{also => [scheduling, gc], pids => [W], duration => ?LONG}),
            W ! go,
            receive {done, W} -> ok after ?LONG -> error(timeout) end,
            #{calls := [Call = #{count := N, split := Split}]} = ferrotrace:summary(S),
            ct:log("~p~n~ts", [Call, ferrotrace:format(S)]),
            #{running := R, descheduled := D, gc := G} = Split,
            ?assertMatch(#{count := N}, R),
            ?assert(maps:get(p50, D) >= 9500000 andalso maps:get(max, D) < 1000000000),
            ?assert(maps:get(p50, R) >= 2000000 andalso maps:get(max, R) < 1000000000),
            Sum = maps:get(mean, R) + maps:get(mean, D) + maps:get(mean, G),
            ?assert(abs(Sum - maps:get(mean, Call)) =< maps:get(mean, Call) div 100, {Sum, Call}),
            ok
    end.

%% Ports opened and closed after the session starts are counted, and their run slices
%% recorded; the port figures name no process.
-spec ports(config()) -> ok.
ports(_Config) ->
    N = 3,
    {ok, S} = ferrotrace:processes([ports], #{pids => new, duration => ?LONG}),
    [begin
         Port = open_port({spawn, "cat"}, [binary]),
         true = port_command(Port, <<"hello\n">>),
         receive {Port, {data, _}} -> ok after ?LONG -> error(no_echo) end,
         true = port_close(Port)
     end || _ <- lists:seq(1, N)],
    #{ports := P} = ferrotrace:summary(S),
    ?assertMatch(#{opened := Opened, closed := Closed} when Opened >= N andalso Closed >= N, P),
    ?assert(maps:get(count, maps:get(run_slice, P)) >= N),
    ?assertMatch([_ | _], ferrotrace:histogram(S, {ports, run_slice})),
    ok.

%% A call that moves its process to another scheduler before returning counts as a
%% migration in its call entry; a call that stays does not. Moving uses OTP's undocumented
%% `process_flag(scheduler, I)' (a bound run queue), skipped where the VM refuses it or has
%% a single scheduler.
-spec migrations(config()) -> ok | {skip, string()}.
migrations(_Config) ->
    Schedulers = erlang:system_info(schedulers_online),
    Movable = Schedulers > 1 andalso
        try erlang:process_flag(scheduler, 0) of _ -> true catch error:badarg -> false end,
    case Movable of
        false ->
            {skip, "needs two schedulers and process_flag(scheduler, I)"};
        true ->
            N = 20,
            Self = self(),
            W = spawn(fun() ->
                              _ = erlang:process_flag(scheduler, 1),
                              erlang:yield(),
                              receive go -> ok end,
                              [ft_activity_target:move_to(1 + I rem 2) || I <- lists:seq(1, N)],
                              [ft_activity_target:move_to(1) || _ <- lists:seq(1, N)],
                              Self ! {done, self()}
                      end),
            {ok, S} = ferrotrace:calls({ft_activity_target, move_to, 1},
                                       #{pids => [W], duration => ?LONG}),
            W ! go,
            receive {done, W} -> ok after ?LONG -> error(timeout) end,
            #{calls := [#{count := Count, migrations := M}]} = ferrotrace:summary(S),
            ?assertEqual(2 * N, Count),
            %% The first N alternate schedulers 2, 1, 2, ...: each call moves; then N stay on 1.
            ?assertEqual(N, M),
            ok
    end.
