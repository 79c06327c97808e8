%%% @doc How a session ends and what it leaves: whoever stops it (`stop/1', `duration', a
%%% limit, unloading the tracer module, its owner's death), tracing stops, its patterns and
%%% flags go and its figures stay readable until `release/1' (or for `keep' ms once the owner
%%% is gone); `owner => none' sessions outlive their caller; a killed keeper leaves nothing.
%%% (The engine's own stop notices, through the raw NIFs, are ferrotrace_engine_SUITE.)
%%%
%%% Timing: polls wait up to several seconds for what normally happens within milliseconds;
%%% the times measured are printed to the CT log.
-module(ferrotrace_lifecycle_SUITE).

-include("support/ft_ct.hrl").

-export([stop_and_release/1, stop_unhooks_raw_tracee/1, stop_reasons/1,
         stopped_by_max_events/1, duration_stops/1, stopped_by_duration/1, stopped_by_unload/1,
         purge_and_reload/1, owner_death/1, owner_down_stops_the_session/1,
         shell_evaluator_crash/1, shell_left_out/1, owner_none/1, no_owner_outside_a_shell/1, killed_keeper/1,
         keeper_holds_the_handle/1]).

-define(F, {ft_test_target, f, 1}).
-define(LONG, 60000).

suite() ->
    [{timetrap, {minutes, 2}}, {ct_hooks, [{ft_ct, [ft_test_target]}]}].

all() ->
    [stop_and_release, stop_unhooks_raw_tracee, stop_reasons,
     stopped_by_max_events, duration_stops, stopped_by_duration, stopped_by_unload,
     purge_and_reload, owner_death, owner_down_stops_the_session, shell_evaluator_crash, shell_left_out,
     owner_none, no_owner_outside_a_shell, killed_keeper, keeper_holds_the_handle].

%%--------------------------------------------------------------------------------------
%% Stop and release

-spec stop_and_release(config()) -> ok.
stop_and_release(_Config) ->
    Caller = ft_caller:start(),
    {ok, S} = ferrotrace:calls(?F, #{duration => ?LONG, pids => [Caller]}),
    ?assertMatch(#{status := running, stop_reason := undefined}, ferrotrace:summary(S)),
    ok = ft_caller:run(Caller, fun() -> ft_test_target:call_f(100) end),
    ok = ferrotrace:stop(S),
    Stopped = ferrotrace:summary(S),
    ?assertMatch(#{status := stopped, stop_reason := user,
                   memory := #{ring_bytes := 0},
                   calls := [#{mfa := ?F, count := 100, returns := 100}],
                   events := #{seen := 200}}, Stopped),
    %% Calls after the stop are not counted, and the caller is no longer traced by us.
    ok = ft_caller:run(Caller, fun() -> ft_test_target:call_f(100) end),
    AfterCalls = ferrotrace:summary(S),
    ?assertEqual(maps:get(calls, Stopped), maps:get(calls, AfterCalls)),
    ?assertEqual(maps:get(events, Stopped), maps:get(events, AfterCalls)),
    ok = assert_not_traced_by(Caller, S),
    ?assertNot(ft_trace_state:traced(?F)),
    %% Stopping twice is fine and changes nothing.
    ok = ferrotrace:stop(S),
    ?assertMatch(#{status := stopped, stop_reason := user}, ferrotrace:summary(S)),
    ?assert(lists:member(S, ferrotrace_tracer:sessions())),
    ok = ferrotrace:release(S),
    %% A released session answers so, not as an id that never was.
    ?assertMatch({error, {released, S, <<_/binary>>}}, ferrotrace:summary(S)),
    ?assertMatch({error, {released, S, <<_/binary>>}}, ferrotrace:histogram(S, ?F)),
    ?assertMatch({error, {released, S, <<_/binary>>}}, ferrotrace:stop(S)),
    ?assertMatch({error, {released, S, <<_/binary>>}}, ferrotrace:release(S)),
    ?assertEqual({error, {no_such_session, S + 1}}, ferrotrace:summary(S + 1)),
    ?assertNot(lists:member(S, ferrotrace_tracer:sessions())),
    ft_caller:stop(Caller),
    ok.

%% Raw use: nobody but the VM can unhook the tracee after stop/1, and it does so at the
%% tracee's next traced call because `enabled' answers `remove'.
-spec stop_unhooks_raw_tracee(config()) -> ok.
stop_unhooks_raw_tracee(_Config) ->
    {ok, S} = ferrotrace:session(#{duration => ?LONG}),
    Caller = ft_caller:start(),
    try
        1 = erlang:trace_pattern(?F, [{'_', [], [{return_trace}]}], [local]),
        1 = erlang:trace(Caller, true, [call, {tracer, ferrotrace_tracer, S}]),
        ok = ft_caller:run(Caller, fun() -> ft_test_target:call_f(10) end),
        ?assertEqual({flags, [call]}, erlang:trace_info(Caller, flags)),
        ok = ferrotrace:stop(S),
        #{calls := Before, events := EventsBefore} = ferrotrace:summary(S),
        ?assertMatch([#{count := 10, returns := 10}], Before),
        %% The pattern and the flags are the caller's; nobody but the VM removes them. (The
        %% VM also asks `enabled(trace_status, ...)' when trace_info/2 reads the flags, so
        %% we look only after the next call.)
        ok = ft_caller:run(Caller, fun() -> ft_test_target:call_f(10) end),
        ?assertEqual({flags, []}, erlang:trace_info(Caller, flags)),
        ?assertEqual({tracer, []}, erlang:trace_info(Caller, tracer)),
        #{calls := After, events := EventsAfter} = ferrotrace:summary(S),
        ?assertEqual(Before, After),
        ?assertEqual(EventsBefore, EventsAfter)
    after
        ft_caller:stop(Caller),
        erlang:trace_pattern(?F, false, [local])
    end,
    ok.

-spec stop_reasons(config()) -> ok.
stop_reasons(_Config) ->
    {ok, User} = ferrotrace:session(#{}),
    Before = erlang:system_time(millisecond),
    ok = ferrotrace:stop(User),
    #{status := stopped, stop_reason := user, stopped_at := At} = ferrotrace:summary(User),
    ?assert(At >= Before - 1000 andalso At =< erlang:system_time(millisecond)),
    {ok, Timed} = ferrotrace:session(#{duration => 50}),
    ?assertMatch(#{status := stopped, stop_reason := duration}, wait_stopped(Timed)),
    ok.

%%--------------------------------------------------------------------------------------
%% Whoever stops a session, its patterns and flags go

-spec stopped_by_max_events(config()) -> ok.
stopped_by_max_events(_Config) ->
    Worker = ft_caller:start(),
    {ok, S} = ferrotrace:calls(?F, #{duration => infinity, owner => self(), max_events => 100, pids => [Worker]}),
    ?assert(ft_trace_state:traced_by_ferrotrace(?F)),
    ?assert(ft_trace_state:traced_by_ferrotrace(Worker)),
    ft_caller:run(Worker, fun() -> [ft_test_target:f(I) || I <- lists:seq(1, 1000)] end),
    T0 = erlang:monotonic_time(millisecond),
    ok = ft_ct:poll(fun() -> ft_trace_state:idle(?F, Worker) end, 10000),
    ct:pal("patterns and flags gone ~b ms after the limit",
           [erlang:monotonic_time(millisecond) - T0]),
    ?assertMatch(#{status := stopped, stop_reason := limit}, ferrotrace:summary(S)),
    ok.

-spec duration_stops(config()) -> ok.
duration_stops(_Config) ->
    {ok, S} = ferrotrace:calls(?F, #{duration => 200}),
    %% Normally done after 200 ms; poll for 5 s on a loaded machine.
    Done = fun() ->
                   case {ferrotrace:summary(S), ft_trace_state:traced(?F)} of
                       {#{status := stopped}, false} -> true;
                       _ -> false
                   end
           end,
    ?assert(wait_until(Done, 5000), {not_stopped, ferrotrace:summary(S),
                                       ft_trace_state:sessions(?F)}),
    #{status := stopped, stop_reason := Reason, elapsed_ms := Elapsed,
      memory := #{ring_bytes := RingBytes}} = ferrotrace:summary(S),
    ?assertEqual(duration, Reason),
    ?assertEqual(0, RingBytes),
    %% Stopped by the 200 ms limit and not before; wall-clock milliseconds, so a little
    %% slack below for clock granularity, and up to the poll limit above.
    ?assert(Elapsed >= 190 andalso Elapsed =< 5200, {elapsed_ms, Elapsed}),
    %% Still readable until released; calls now are not counted.
    ok = ft_caller:end_workers(ft_caller:workers(1, fun() -> ft_test_target:call_f(50) end)),
    #{calls := Calls} = ferrotrace:summary(S),
    ?assertEqual([], [C || C = #{count := Count} <- Calls, Count > 0]),
    ok = ferrotrace:release(S),
    ok.

-spec stopped_by_duration(config()) -> ok.
stopped_by_duration(_Config) ->
    Worker = ft_caller:start(),
    {ok, S} = ferrotrace:calls(?F, #{duration => 300, pids => [Worker]}),
    ok = ft_ct:poll(fun() -> maps:get(status, ferrotrace:summary(S)) =:= stopped end, 10000),
    T0 = erlang:monotonic_time(millisecond),
    %% The keeper has no timer of its own: only the engine's notice can undo them (12 ms
    %% here; the deadline is for a loaded machine, where 1.6 s was seen).
    ok = ft_ct:poll(fun() -> ft_trace_state:idle(?F, Worker) end, 10000),
    Took = erlang:monotonic_time(millisecond) - T0,
    ct:pal("patterns and flags gone ~b ms after the engine stopped the session", [Took]),
    ?assertMatch(#{stop_reason := duration}, ferrotrace:summary(S)),
    ok.

-spec stopped_by_unload(config()) -> ok.
stopped_by_unload(_Config) ->
    Worker = ft_caller:start(),
    {ok, _S} = ferrotrace:calls(?F, #{duration => ?LONG, pids => [Worker]}),
    true = code:delete(ferrotrace_tracer),
    _ = code:purge(ferrotrace_tracer),
    try
        ok = ft_ct:poll(fun() -> ft_trace_state:idle(?F, Worker) end, 10000)
    after
        %% The keepers' next call may have loaded it again already (interactive mode).
        {module, ferrotrace_tracer} = code:ensure_loaded(ferrotrace_tracer)
    end,
    ok.

%% Purging the tracer module unloads the NIF library: its unload callback stops every session
%% (stop_reason unload) and joins its collector thread first, so nothing runs the library's
%% code after it is gone. The dynamic loader may keep the library mapped (it does here, on
%% glibc): then the stopped sessions stay readable until released; otherwise they are gone.
%% Either way old ids are not live in the new load. Loading new code over a loaded
%% ferrotrace_tracer is refused by the VM (the library has no upgrade callback).
-spec purge_and_reload(config()) -> ok.
purge_and_reload(_Config) ->
    Worker = ft_caller:start(),
    {ok, Old} = ferrotrace:calls(?F, #{pids => [Worker], duration => 60000}),
    Busy = spawn_link(fun() -> busy_run(Worker) end),
    timer:sleep(100),
    Upgrade = code:load_file(ferrotrace_tracer),
    ct:pal("load_file over a loaded ferrotrace_tracer: ~p", [Upgrade]),
    ?assertMatch({error, _}, Upgrade),
    true = code:delete(ferrotrace_tracer),
    _ = code:purge(ferrotrace_tracer),
    %% Not code:load_file/1: the keepers and the registry react to the unload by calling
    %% ferrotrace_tracer, and in interactive mode such a call may already have loaded it
    %% again (seen on OTP 27 and 29); loading over that is the refused upgrade above.
    {module, ferrotrace_tracer} = code:ensure_loaded(ferrotrace_tracer),
    timer:sleep(100),
    unlink(Busy),
    exit(Busy, kill),
    ?assert(is_process_alive(Worker)),
    case ferrotrace:summary(Old) of
        {error, {no_such_session, Old}} -> ok;
        {error, {released, Old, _}} -> ok;
        OldSummary -> ?assertMatch(#{status := stopped, stop_reason := unload}, OldSummary)
    end,
    ok = run(Worker, 1),
    Worker2 = ft_caller:start(),
    {ok, New} = ferrotrace:calls(?F, #{pids => [Worker2], duration => 60000}),
    ?assertNotEqual(Old, New),
    ok = run(Worker2, 1000),
    ok = ferrotrace:stop(New),
    ?assertMatch(#{calls := [#{count := 1000, returns := 1000}]}, ferrotrace:summary(New)),
    ok.

%%--------------------------------------------------------------------------------------
%% Owners

-spec owner_death(config()) -> ok.
owner_death(_Config) ->
    %% An owner of a raw session that exits normally.
    %% (Outside a shell a session has no owner unless given one: `owner => self()'.)
    {Owner1, S1} = start_owner(fun() -> ferrotrace:session(#{duration => ?LONG, owner => self()}) end),
    %% An owner of a calls/2 session that is killed.
    {Owner2, S2} = start_owner(fun() -> ferrotrace:calls(?F, #{duration => ?LONG, owner => self()}) end),
    ?assertMatch(#{status := running}, ferrotrace:summary(S1)),
    ?assertMatch(#{status := running}, ferrotrace:summary(S2)),
    ?assert(ft_trace_state:traced_by_ferrotrace(?F)),
    Owner1 ! exit,
    exit(Owner2, kill),
    %% Tracing stops at once; the figures stay readable (`keep', ten minutes by default).
    Stopped = fun(S) -> fun() -> maps:get(status, ferrotrace:summary(S)) =:= stopped end end,
    ?assert(wait_until(Stopped(S1), 10000), {still_running, S1, ferrotrace:summary(S1)}),
    ?assert(wait_until(Stopped(S2), 10000), {still_running, S2, ferrotrace:summary(S2)}),
    ?assertMatch(#{stop_reason := owner_down}, ferrotrace:summary(S1)),
    ?assertMatch(#{stop_reason := owner_down}, ferrotrace:summary(S2)),
    ?assert(wait_until(fun() -> not ft_trace_state:traced(?F) end, 10000)),
    ok.

start_owner(Start) ->
    Parent = self(),
    Owner = spawn(fun() ->
                          {ok, S} = Start(),
                          Parent ! {session, self(), S},
                          receive exit -> ok end
                  end),
    receive {session, Owner, S} -> {Owner, S}
    after 10000 -> error(owner_did_not_start)
    end.

-spec owner_down_stops_the_session(config()) -> ok.
owner_down_stops_the_session(_Config) ->
    Self = self(),
    Owner = spawn(fun() ->
                          Self ! {session, ferrotrace:calls(?F, #{duration => 60000, owner => self()})},
                          receive die -> ok end
                  end),
    {ok, S} = receive {session, Result} -> Result end,
    ?assert(ft_trace_state:traced_by_ferrotrace(?F)),
    T0 = erlang:monotonic_time(millisecond),
    Owner ! die,
    ok = ft_ct:poll(fun() -> not ft_trace_state:traced(?F) end, 10000),
    Took = erlang:monotonic_time(millisecond) - T0,
    %% The keeper monitors the owner (no timer): the poll's deadline is for a loaded
    %% machine; the time is printed (a few ms here).
    ct:pal("session stopped and its pattern removed ~p ms after its owner died", [Took]),
    %% The figures outlive the owner (for `keep' ms, ten minutes by default).
    ?assertMatch(#{status := stopped, stop_reason := owner_down}, ferrotrace:summary(S)),
    ?assertMatch([#{id := S, left_at := _}], [E || E = #{id := Id} <- ferrotrace:list(), Id =:= S]),
    %% With keep => 0 they go at once.
    Owner2 = spawn(fun() ->
                           Self ! {session, ferrotrace:calls(?F, #{duration => 60000, keep => 0, owner => self()})},
                           receive die -> ok end
                   end),
    {ok, S2} = receive {session, Result2} -> Result2 end,
    Owner2 ! die,
    ok = ft_ct:poll(fun() -> case ferrotrace:summary(S2) of
                                {error, {released, S2, _}} -> true;
                                _ -> false
                            end
                    end, 10000),
    ok.

%% A shell evaluator that crashes (a typo) is not the operator leaving: the session keeps
%% running. When the shell's group leader goes, tracing stops and the figures stay.
-spec shell_evaluator_crash(config()) -> ok.
shell_evaluator_crash(_Config) ->
    Self = self(),
    GroupLeader = spawn(fun() -> receive leave -> ok end end),
    %% Shaped like shell:start_eval/3: the shell links to its evaluator and keeps its pid.
    _Shell = spawn(fun() ->
                          process_flag(trap_exit, true),
                          Eval = spawn_link(fun() ->
                                                    group_leader(GroupLeader, self()),
                                                    receive go -> ok end,
                                                    Self ! {session, ferrotrace:calls(?F, #{duration => ?LONG})},
                                                    receive typo -> erlang:error({badmatch, 2}) end
                                            end),
                          put(evaluator, Eval),
                          Eval ! go,
                          Self ! {evaluator, Eval},
                          receive _ -> timer:sleep(infinity) end
                  end),
    Eval = receive {evaluator, E} -> E end,
    {ok, S} = receive {session, R} -> R end,
    ?assertMatch([#{id := S, owner := {shell, GroupLeader}}], [L || L = #{id := Id} <- ferrotrace:list(), Id =:= S]),
    Eval ! typo,
    timer:sleep(100),
    ?assertMatch(#{status := running}, ferrotrace:summary(S)),
    ?assert(ft_trace_state:traced_by_ferrotrace(?F)),
    [ft_test_target:f(I) || I <- lists:seq(1, 10)],
    GroupLeader ! leave,
    ok = ft_ct:poll(fun() -> maps:get(status, ferrotrace:summary(S)) =:= stopped end, 10000),
    #{stop_reason := owner_down, calls := [#{count := Count}]} = ferrotrace:summary(S),
    ?assert(Count >= 10),
    %% The engine says `stopped' first; the keeper takes the patterns off (on OTP 27, its
    %% trace session) a moment later.
    ok = ft_ct:poll(fun() -> not ft_trace_state:traced(?F) end, 5000),
    ok.

%% A session on every process started from a shell does not time the shell's own
%% processes (its evaluator, the shell, a local group leader): 5 calls of the other process
%% counted, not the evaluator's 10 nor the group leader's 20; the report says so.
%% `shell => include' counts all 35.
-spec shell_left_out(config()) -> ok.
shell_left_out(_Config) ->
    Counted = fun(Options) ->
                      Self = self(),
                      GroupLeader = spawn(fun() -> receive calls -> [ft_test_target:f(I) || I <- lists:seq(1, 20)] end,
                                                   Self ! gl_done, receive leave -> ok end end),
                      Other = spawn(fun() -> receive calls -> [ft_test_target:f(I) || I <- lists:seq(1, 5)] end,
                                             Self ! other_done end),
                      Shell = spawn(fun() ->
                                            Eval = spawn_link(fun() ->
                                                                      group_leader(GroupLeader, self()),
                                                                      receive go -> ok end,
                                                                      {ok, S} = ferrotrace:calls({ft_test_target, f, 1},
                                                                                                 Options#{duration => ?LONG}),
                                                                      [ft_test_target:f(I) || I <- lists:seq(1, 10)],
                                                                      Self ! {session, S},
                                                                      receive _ -> ok end
                                                              end),
                                            put(evaluator, Eval),
                                            Eval ! go,
                                            receive _ -> ok end
                                    end),
                      S = receive {session, R} -> R end,
                      GroupLeader ! calls, Other ! calls,
                      receive gl_done -> ok end, receive other_done -> ok end,
                      ok = ferrotrace:stop(S),
                      #{calls := Calls} = Summary = ferrotrace:summary(S),
                      Text = iolist_to_binary(ferrotrace:format(S)),
                      ok = ferrotrace:release(S),
                      GroupLeader ! leave, exit(Shell, kill),
                      {lists:sum([C || #{count := C} <- Calls]), maps:get(shell_left_out, Summary), Text}
              end,
    {Left, LeftOut, Text} = Counted(#{}),
    ?assertEqual(5, Left),
    ?assert(LeftOut >= 3, LeftOut),
    ?assertNotEqual(nomatch, binary:match(Text, <<"shell => include times them">>)),
    {All, 0, _} = Counted(#{shell => include}),
    ?assertEqual(35, All),
    ?assertMatch({error, {bad_option, {shell, perhaps, _}}}, ferrotrace:calls(?F, #{shell => perhaps})),
    ok.

%% `owner => none' for scripts (`bin/rel eval', rpc): the session outlives its caller and is
%% bounded by its duration, which must be finite.
-spec owner_none(config()) -> ok.
owner_none(_Config) ->
    ?assertMatch({error, {bad_option, {owner, none, _}}},
                 ferrotrace:calls(?F, #{owner => none, duration => infinity})),
    ?assertMatch({error, {bad_option, {owner, "me", _}}}, ferrotrace:calls(?F, #{owner => "me"})),
    Self = self(),
    Caller = spawn(fun() -> Self ! {session, ferrotrace:calls(?F, #{owner => none, duration => 2000})} end),
    {ok, S} = receive {session, R} -> R end,
    ok = ft_ct:poll(fun() -> not is_process_alive(Caller) end, 10000),
    ?assertMatch(#{status := running}, ferrotrace:summary(S)),
    ok = ft_ct:poll(fun() -> maps:get(status, ferrotrace:summary(S)) =:= stopped end, 10000),
    ?assertMatch(#{stop_reason := duration}, ferrotrace:summary(S)),
    ok.

%% Started outside a shell with no `owner' (`rpc:call/4', `bin/rel eval', a control
%% tool's eval: the caller exits when the call returns), a session has no owner: it runs
%% its duration and collects calls after its caller is gone; `duration => infinity' is
%% refused, saying what to give. Here over `rpc:call/4' between two peer nodes, and from a
%% process of this node's.
-spec no_owner_outside_a_shell(config()) -> ok.
no_owner_outside_a_shell(_Config) ->
    Self = self(),
    Caller = spawn(fun() -> Self ! {session, ferrotrace:calls(?F, #{duration => 3000})} end),
    {ok, Local} = receive {session, R} -> R end,
    ok = ft_ct:poll(fun() -> not is_process_alive(Caller) end, 10000),
    timer:sleep(200),
    ?assertMatch([#{id := Local, owner := none}], [L || L = #{id := Id} <- ferrotrace:list(), Id =:= Local]),
    ok = ft_test_target:call_f(10),
    ?assertMatch(#{status := running, calls := [#{count := 10}]}, ferrotrace:summary(Local)),
    ok = ferrotrace:release(Local),
    %% Over rpc from another node: the caller on Target is erpc's process, gone at once.
    [{TargetPeer, Target}, {CallerPeer, _}] =
        [begin
             {ok, P, N} = ft_ct:peer(#{name => peer:random_name(ft_rpc), connection => standard_io}),
             ok = peer:call(P, ft_ct, load, [[ft_test_target]]),
             {P, N}
         end || _ <- [target, caller]],
    RpcCall = fun(Options) -> peer:call(CallerPeer, rpc, call, [Target, ferrotrace, calls, [?F, Options]]) end,
    ?assertMatch({error, {bad_option, {duration, infinity, <<"a finite duration, or owner => Pid", _/binary>>}}},
                 RpcCall(#{duration => infinity})),
    {ok, S} = RpcCall(#{duration => 3000}),
    InTarget = fun(M, F, A) -> peer:call(TargetPeer, M, F, A) end,
    %% Stopped 40 ms after the call (owner_down) before: well past that, it still runs.
    timer:sleep(500),
    ?assertMatch(#{status := running, stop_reason := undefined}, InTarget(ferrotrace, summary, [S])),
    ok = InTarget(ft_test_target, call_f, [100]),
    ?assertMatch(#{status := running, calls := [#{mfa := ?F, count := 100}]}, InTarget(ferrotrace, summary, [S])),
    ok = ft_ct:poll(fun() -> maps:get(status, InTarget(ferrotrace, summary, [S])) =:= stopped end, 10000),
    ?assertMatch(#{stop_reason := duration, calls := [#{count := 100}]}, InTarget(ferrotrace, summary, [S])),
    ok.

%%--------------------------------------------------------------------------------------
%% Keepers

%% A keeper killed before it could release its session leaves an orphan; the next session
%% created releases it, so its slot and statistics cannot leak.
-spec killed_keeper(config()) -> ok.
killed_keeper(_Config) ->
    {ok, Orphan} = ferrotrace:calls(?F, #{duration => infinity, owner => self()}),
    [#{keeper := Keeper}] = [E || E = #{id := Id} <- ferrotrace:list(), Id =:= Orphan],
    Monitor = erlang:monitor(process, Keeper),
    exit(Keeper, kill),
    receive {'DOWN', Monitor, process, Keeper, killed} -> ok end,
    %% The registry watches keepers: it releases the orphan and removes its pattern.
    ok = ft_ct:poll(fun() -> not lists:member(Orphan, ferrotrace_tracer:sessions()) end, 10000),
    ok = ft_ct:poll(fun() -> not ft_trace_state:traced(?F) end, 5000),
    ?assertMatch({error, {released, Orphan, _}}, ferrotrace:summary(Orphan)),
    ok.

%% OTP 27+: the keeper is the only holder of its trace session's handle. Killed, it cannot
%% clean up, yet the VM destroys the session with the handle: nothing of it stays.
-spec keeper_holds_the_handle(config()) -> ok | {skip, string()}.
keeper_holds_the_handle(_Config) ->
    case ft_trace_state:skip_before_27("no trace session handle to hold") of
        ok -> keeper_holds_the_handle();
        Skip -> Skip
    end.

keeper_holds_the_handle() ->
    Worker = ft_caller:start(),
    {ok, S} = ferrotrace:calls(?F, #{duration => ?LONG, pids => [Worker]}),
    [#{keeper := Keeper}] = [E || E = #{id := Id} <- ferrotrace:list(), Id =:= S],
    [Session] = [Ref || Ref = {ferrotrace, _} <- ft_trace_state:sessions(?F)],
    ?assertEqual([Session], [Ref || Ref = {ferrotrace, _} <- ft_trace_state:sessions(Worker)]),
    Monitor = erlang:monitor(process, Keeper),
    exit(Keeper, kill),
    receive {'DOWN', Monitor, process, Keeper, killed} -> ok end,
    ok = ft_ct:poll(fun() -> not lists:member(Session, ft_trace_state:sessions(all)) end, 10000),
    ?assert(ft_trace_state:idle(?F, Worker)),
    ok.

%%--------------------------------------------------------------------------------------
%% Helpers

%% purge_and_reload's workload: `Calls' calls of f/1 in `Caller', and a process keeping it busy.
run(Caller, Calls) ->
    ft_caller:run(Caller, fun() -> ft_test_target:call_f(Calls) end).

busy_run(Worker) ->
    _ = run(Worker, 1000),
    busy_run(Worker).

wait_stopped(S) ->
    ok = ft_ct:poll(fun() -> maps:get(status, ferrotrace:summary(S)) =:= stopped end, 5000),
    ferrotrace:summary(S).

assert_not_traced_by(Pid, S) ->
    ?assertNot(ft_trace_state:traced_by_ferrotrace(Pid)),
    Flags = erlang:trace_info(Pid, flags),
    Tracer = erlang:trace_info(Pid, tracer),
    Ours = {tracer, {ferrotrace_tracer, S}},
    case {Flags, Tracer} of
        {_, Ours} -> ?assertNot(lists:member(call, element(2, Flags)), {still_traced, Flags});
        _ -> ok
    end.

wait_until(Pred, TimeoutMs) ->
    ft_ct:poll(Pred, TimeoutMs) =:= ok.
