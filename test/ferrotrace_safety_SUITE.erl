%%% @doc A session must leave the node as it found it: no stack growth in traced loops, no
%%% interference between sessions, and no figures lost to the operator's mistakes. That
%%% nothing is left behind whoever stops a session is ferrotrace_lifecycle_SUITE.
-module(ferrotrace_safety_SUITE).

-include("support/ft_ct.hrl").

-export([server_loop_module/1, server_loop_everything/1, mutual_loop/1,
         fun_loop_found_at_run_time/1, client_loops/1, gen_server_everything/1, names/1,
         second_session_all_refused/1, refused_start_changes_nothing/1,
         foreign_patterns_not_reported/1, shared_pattern_survives/1,
         coexists_with_process_tracer/1]).

-define(F, {ft_test_target, f, 1}).
-define(G, {ft_test_target, g, 1}).
-define(LONG, 60000).
%% A traced loop may keep at most this many stack words more than it had untraced. With
%% return tracing a loop keeps 3 words per iteration: this is a handful of iterations.
-define(STACK_SLACK, 32).

suite() ->
    [{ct_hooks, [{ft_ct, [ft_test_target, ft_loop_target]}]}].

all() ->
    [server_loop_module, server_loop_everything, mutual_loop, fun_loop_found_at_run_time, client_loops,
     gen_server_everything, names, second_session_all_refused,
     refused_start_changes_nothing, foreign_patterns_not_reported, shared_pattern_survives,
     coexists_with_process_tracer].

%%--------------------------------------------------------------------------------------
%% Loops

%% The issue's server loop, 1,000,000 iterations with calls/2 on its module.
-spec server_loop_module(config()) -> ok.
server_loop_module(_Config) ->
    loop_stays_flat({ft_loop_target, '_', '_'}, fun ft_loop_target:server/0, 1000000,
                    {ft_loop_target, server, 0}).

%% The same with every function of every module traced.
-spec server_loop_everything(config()) -> ok.
server_loop_everything(_Config) ->
    %% The loop analysis knows the server's module, as on a node where a session named it
    %% before (server_loop_module does, run first): a `'_'' start takes the loops the cache
    %% knows at once, and finds the rest after it. Cold, the server's frames pile up to the
    %% engine's bound until the reading after the start finds its loop (that path:
    %% fun_loop_found_at_run_time), and this case would pass only after the one before it.
    _ = ferrotrace_loops:find([{ft_loop_target, '_', '_'}], [], read),
    loop_stays_flat({'_', '_', '_'}, fun ft_loop_target:server/0, 1000000,
                    {ft_loop_target, server, 0}, #{max_functions => 100000, max_overhead => none}).

%% A loop through two functions (one an external `?MODULE:' call) is found too.
-spec mutual_loop(config()) -> ok.
mutual_loop(_Config) ->
    loop_stays_flat({ft_loop_target, '_', '_'}, fun() -> ft_loop_target:mutual(0) end, 200000,
                    {ft_loop_target, mutual, 1}),
    #{loops := Loops} = summary_of_last(),
    ?assert(lists:member({ft_loop_target, handle, 2}, Loops), Loops).

loop_stays_flat(Spec, Loop, Iterations, LoopMFA) ->
    loop_stays_flat(Spec, Loop, Iterations, LoopMFA, #{}).

loop_stays_flat(Spec, Loop, Iterations, LoopMFA, Options) ->
    Server = spawn(Loop),
    ok = drive(Server, 10),
    {stack_size, Before} = erlang:process_info(Server, stack_size),
    {ok, S} = ferrotrace:calls(Spec, Options#{duration => ?LONG}),
    put(last_session, S),
    %% A `'_'' session makes the loops count-only after its start (the server waiting in
    %% one is traced from then on): its stack stays flat meanwhile, and its iterations are
    %% counted from then, exactly.
    ok = drive(Server, 1000),
    ok = settled(S),
    %% The server, left untraced while its loop waited for its count-only pattern (a step),
    %% is traced again by a later step: counted from then.
    ok = ft_ct:poll(fun() -> lists:member(call, ft_trace_state:flags(Server)) end, 30000),
    T0 = erlang:monotonic_time(millisecond),
    ok = drive(Server, Iterations),
    ct:pal("~b iterations traced in ~b ms", [Iterations, erlang:monotonic_time(millisecond) - T0]),
    {stack_size, During} = erlang:process_info(Server, stack_size),
    ok = ferrotrace:stop(S),
    ok = drive(Server, 10),
    {stack_size, After} = erlang:process_info(Server, stack_size),
    ct:pal("stack words: before ~b, during ~b, after ~b", [Before, During, After]),
    ?assert(During =< Before + ?STACK_SLACK, {During, Before}),
    ?assert(After =< Before + ?STACK_SLACK, {After, Before}),
    #{loops := Loops, calls := Calls, events := #{dropped := Dropped} = Events} = ferrotrace:summary(S),
    ?assert(lists:member(LoopMFA, Loops), Loops),
    %% Counted, not timed; exactly when no event was dropped (a collector starved of CPU
    %% drops events, and says how many).
    #{count := Count, returns := 0} = hd([C || C = #{mfa := M} <- Calls, M =:= LoopMFA]),
    case Dropped of
        0 -> ?assert(Count >= Iterations, {Count, Events});
        _ -> ?assert(Count > 0 andalso Count + Dropped >= Iterations, {Count, Events})
    end,
    Server ! stop,
    ok.

summary_of_last() ->
    ferrotrace:summary(get(last_session)).

drive(_Server, 0) ->
    ok;
drive(Server, N) ->
    Server ! {go, self()},
    receive ok -> drive(Server, N - 1)
    after 5000 -> error({server_stuck, N})
    end.

%% A loop that waits and goes round through a fun: found in the code (a wait ending in a
%% tail call through a fun), or else held by the frame bound and found while it runs
%% (ferrotrace_frames_SUITE); either way it ends up counted only, its stack small.
-spec fun_loop_found_at_run_time(config()) -> ok.
fun_loop_found_at_run_time(_Config) ->
    Server = spawn(fun() -> ft_loop_target:fun_loop(fun ft_loop_target:fun_loop/1) end),
    ok = drive(Server, 10),
    {stack_size, Before} = erlang:process_info(Server, stack_size),
    {ok, S} = ferrotrace:calls({ft_loop_target, fun_loop, 1}, #{duration => ?LONG}),
    ok = drive(Server, 50000),
    ok = ft_ct:poll(fun() -> maps:get(loops, ferrotrace:summary(S)) =/= [] end, 10000),
    ok = drive(Server, 50000),
    {stack_size, During} = erlang:process_info(Server, stack_size),
    ok = ferrotrace:stop(S),
    #{loops := Loops} = ferrotrace:summary(S),
    ct:pal("stack words: before ~b, after 50,000 iterations ~b; loops ~p", [Before, During, Loops]),
    ?assertEqual([{ft_loop_target, fun_loop, 1}], Loops),
    %% 4,096 frames to be noticed, up to 1,024 more before the check, and what ran while
    %% the keeper switched the pattern (it polls every 200 ms): 3 words a frame.
    ?assert(During - Before < 3 * 20000, {During, Before}),
    Server ! stop,
    ok.

%% Loops that wait without a receive of their own, in gen_server:call/3 (a client) or in
%% timer:sleep/1 through a helper (a periodic worker), are found in the code too: their
%% stacks stay flat from the first iteration (caught at run time instead, each would keep
%% 4,096 or more frames).
-spec client_loops(config()) -> ok.
client_loops(_Config) ->
    {ok, Server} = ft_loop_target:start_server(),
    {ok, S} = ferrotrace:calls({ft_loop_target, '_', '_'}, #{duration => ?LONG}),
    #{loops := Loops} = ferrotrace:summary(S),
    ?assert(lists:member({ft_loop_target, client, 3}, Loops), Loops),
    ?assert(lists:member({ft_loop_target, tick, 2}, Loops), Loops),
    Self = self(),
    Stacks = [begin
                  Pid = spawn(fun() -> Run(Self) end),
                  receive {stack, Pid, Words} -> Words after 60000 -> error({stuck, Pid}) end
              end || Run <- [fun(To) -> ft_loop_target:client(Server, 20000, To) end,
                             fun(To) -> ft_loop_target:tick(5000, To) end]],
    ok = ferrotrace:stop(S),
    ct:pal("stack words after 20,000 client calls and 5,000 ticks: ~p", [Stacks]),
    [?assert(Words =< ?STACK_SLACK, {Words, Stacks}) || Words <- Stacks],
    gen_server:stop(Server),
    ok.

%% A gen_server handling calls while every function is traced: its stack and memory stay flat.
%% On a node that never read gen_server's code (its reading taken out of the cache here), a
%% `'_'' start takes the loops of OTP's behaviour modules from a list (ferrotrace_loops): the
%% loop is known at the start, and the server waiting in it is flagged only once the loop is
%% count-only.
%% (Before, a cold start left the loop to be found at run time: the frame bound held the
%% server at 120 return-trace frames, and they stayed.)
-spec gen_server_everything(config()) -> ok.
gen_server_everything(_Config) ->
    _ = ferrotrace_registry:ensure_started(),
    _ = ets:match_delete(ferrotrace_loops_cache, {{facts, gen_server, '_'}, '_'}),
    flat_gen_server(fun(Before, During) -> ?assert(During =< Before + ?STACK_SLACK, {During, Before}) end).

flat_gen_server(Check) ->
    {ok, Server} = ft_loop_target:start_server(),
    ok = ft_loop_target:ping(Server, 10),
    {stack_size, Before} = erlang:process_info(Server, stack_size),
    {ok, S} = ferrotrace:calls({'_', '_', '_'}, #{duration => ?LONG, max_overhead => none}),
    ok = ft_loop_target:ping(Server, 1000),
    ok = settled(S),
    %% A frame kept per call would be 600,000 words or more by the end: far past both checks.
    ok = ft_loop_target:ping(Server, 200000),
    {stack_size, During} = erlang:process_info(Server, stack_size),
    {memory, Memory} = erlang:process_info(Server, memory),
    ok = ferrotrace:stop(S),
    #{loops := Loops} = ferrotrace:summary(S),
    ct:pal("gen_server stack words before ~b, during ~b; memory ~b; ~b loops found, e.g. ~p",
           [Before, During, Memory, length(Loops), lists:sublist(Loops, 5)]),
    %% gen_server:loop/7 up to OTP 27, loop/8 on OTP 29: whatever its arity, it is found.
    ?assertMatch([_ | _], [L || L = {gen_server, loop, _} <- Loops], Loops),
    Check(Before, During),
    ?assert(Memory < 100000, Memory),
    ok = ferrotrace:release(S),
    gen_server:stop(Server),
    ok.

%%--------------------------------------------------------------------------------------
%% Names

%% A session can be named, and the name used wherever a session is.
-spec names(config()) -> ok.
names(_Config) ->
    {ok, S} = ferrotrace:calls(?F, #{name => checkout, duration => ?LONG}),
    ?assertMatch({error, {name_taken, checkout, S}}, ferrotrace:session(#{name => checkout})),
    ?assertMatch({error, {bad_option, {name, "x", _}}}, ferrotrace:session(#{name => "x"})),
    ?assertMatch(#{id := S, name := checkout}, ferrotrace:summary(checkout)),
    ?assertMatch(<<"ferrotrace session", _/binary>>, ferrotrace:format(checkout)),
    ok = ferrotrace:stop(checkout),
    ok = ferrotrace:release(checkout),
    ?assertEqual({error, {no_such_session, checkout}}, ferrotrace:summary(checkout)),
    ok.

%%--------------------------------------------------------------------------------------
%% Interference

%% On OTP 25 a process has one tracer: a second `pids => all' session is refused, naming
%% the first, and the first keeps collecting. On OTP 27+ each session is a trace session of
%% its own: the second one starts, and both see every call of the same processes.
-spec second_session_all_refused(config()) -> ok.
second_session_all_refused(_Config) ->
    {ok, S1} = ferrotrace:calls(?F, #{duration => ?LONG, name => first}),
    case ft_trace_state:trace_sessions() of
        false ->
            %% The refusal says how: add the functions to the session that holds them.
            {error, {already_traced, [_ | _], {ferrotrace, S1, first}, How}} =
                ferrotrace:calls({lists, seq, 2}, #{duration => ?LONG}),
            ?assertMatch(<<"ferrotrace:stop(first) ends it, or add(first, Spec)", _/binary>>, How),
            [ft_test_target:f(I) || I <- lists:seq(1, 100)],
            ?assertMatch(#{status := running, calls := [#{mfa := ?F, count := 100}]},
                         ferrotrace:summary(S1)),
            ?assertNot(ft_trace_state:traced({lists, seq, 2}));
        true ->
            {ok, S2} = ferrotrace:calls([?F, ?G], #{duration => ?LONG, name => second}),
            [ft_test_target:f(I) || I <- lists:seq(1, 100)],
            [ft_test_target:g(I) || I <- lists:seq(1, 70)],
            ok = ferrotrace:stop(S1),
            ok = ferrotrace:stop(S2),
            ?assertMatch(#{calls := [#{mfa := ?F, count := 100, returns := 100}]},
                         ferrotrace:summary(S1)),
            #{calls := Calls2} = ferrotrace:summary(S2),
            ?assertMatch([#{mfa := ?F, count := 100, returns := 100},
                          #{mfa := ?G, count := 70, returns := 70}],
                         lists:sort(fun(#{mfa := A}, #{mfa := B}) -> A =< B end, Calls2)),
            ?assertNot(ft_trace_state:traced(?F))
    end,
    ok.

%% A refused calls/2 changes nothing: the running session keeps its pattern and counts.
%% On OTP 27+ the second session on the same process and function is not refused: both
%% count exactly their own calls, and stopping the second leaves the first as it was.
-spec refused_start_changes_nothing(config()) -> ok.
refused_start_changes_nothing(_Config) ->
    Worker = spawn_worker(),
    {ok, S1} = ferrotrace:calls(?F, #{duration => ?LONG, pids => [Worker]}),
    run_in(Worker, fun() -> [ft_test_target:f(I) || I <- lists:seq(1, 100)] end),
    case ft_trace_state:trace_sessions() of
        false ->
            ?assertMatch({error, {already_traced, [Worker], {ferrotrace, S1}, <<"ferrotrace:stop(", _/binary>>}},
                         ferrotrace:calls(?F, #{duration => ?LONG, pids => [Worker]})),
            ?assert(ft_trace_state:traced_by_ferrotrace(?F)),
            run_in(Worker, fun() -> [ft_test_target:f(I) || I <- lists:seq(1, 100)] end);
        true ->
            {ok, S2} = ferrotrace:calls(?F, #{duration => ?LONG, pids => [Worker]}),
            run_in(Worker, fun() -> [ft_test_target:f(I) || I <- lists:seq(1, 60)] end),
            ok = ferrotrace:stop(S2),
            ?assertMatch(#{calls := [#{mfa := ?F, count := 60, returns := 60}]},
                         ferrotrace:summary(S2)),
            ?assert(ft_trace_state:traced_by_ferrotrace(?F)),
            ?assert(ft_trace_state:traced_by_ferrotrace(Worker)),
            run_in(Worker, fun() -> [ft_test_target:f(I) || I <- lists:seq(1, 40)] end)
    end,
    ok = ferrotrace:stop(S1),
    ?assertMatch(#{calls := [#{mfa := ?F, count := 200, returns := 200}]}, ferrotrace:summary(S1)),
    ?assert(ft_trace_state:idle(?F, Worker)),
    ok.

%% A pattern someone else set (a raw session, dbg) does not show in a calls/2 report. On
%% OTP 25 it shares the node's one session, so its events reach ferrotrace's tracer and are
%% counted as foreign; on OTP 27+ it is in the legacy session and ferrotrace's own session
%% never sees it.
-spec foreign_patterns_not_reported(config()) -> ok.
foreign_patterns_not_reported(_Config) ->
    1 = erlang:trace_pattern(?G, [{'_', [], [{return_trace}]}], [local]),
    Worker = spawn_worker(),
    {ok, S} = ferrotrace:calls(?F, #{duration => ?LONG, pids => [Worker]}),
    run_in(Worker, fun() -> [{ft_test_target:f(I), ft_test_target:g(I)} || I <- lists:seq(1, 50)] end),
    ok = ferrotrace:stop(S),
    #{calls := Calls, pairing := #{foreign_events := Foreign}} = ferrotrace:summary(S),
    ?assertMatch([#{mfa := ?F, count := 50}], Calls),
    case ft_trace_state:trace_sessions() of
        false -> ?assertEqual(100, Foreign);
        true -> ?assertEqual(0, Foreign)
    end,
    %% Stopping the session left the foreign pattern alone.
    ?assertEqual({traced, local}, erlang:trace_info(?G, traced)),
    ok.

%% Two sessions on the same function for different processes share its pattern: stopping
%% one leaves the other's in place.
-spec shared_pattern_survives(config()) -> ok.
shared_pattern_survives(_Config) ->
    {W1, W2} = {spawn_worker(), spawn_worker()},
    {ok, S1} = ferrotrace:calls(?F, #{duration => ?LONG, pids => [W1]}),
    {ok, S2} = ferrotrace:calls({ft_test_target, '_', '_'}, #{duration => ?LONG, pids => [W2]}),
    ok = ferrotrace:stop(S1),
    ?assert(ft_trace_state:traced_by_ferrotrace(?F)),
    ?assertNot(ft_trace_state:traced_by_ferrotrace(W1)),
    ?assert(ft_trace_state:traced_by_ferrotrace(W2)),
    run_in(W2, fun() -> [ft_test_target:f(I) || I <- lists:seq(1, 10)] end),
    ok = ferrotrace:stop(S2),
    ?assertMatch(#{calls := [#{mfa := ?F, count := 10, returns := 10}]}, ferrotrace:summary(S2)),
    ?assert(ft_trace_state:idle(?F, W2)),
    ok.

%% OTP 27+: ferrotrace and a plain process tracer (erlang:trace/3, the legacy session, as
%% dbg uses it) trace the same function of the same process at once; each gets every
%% event, and stopping either leaves the other intact.
-spec coexists_with_process_tracer(config()) -> ok | {skip, string()}.
coexists_with_process_tracer(_Config) ->
    case ft_trace_state:skip_before_27("a process has one tracer") of
        ok -> coexists_with_process_tracer();
        Skip -> Skip
    end.

coexists_with_process_tracer() ->
    Worker = spawn_worker(),
    Tracer = spawn(fun() -> count_messages(#{}) end),
    1 = erlang:trace_pattern(?F, [{'_', [], [{return_trace}]}], [local]),
    1 = erlang:trace(Worker, true, [call, {tracer, Tracer}]),
    {ok, S1} = ferrotrace:calls(?F, #{duration => ?LONG, pids => [Worker]}),
    run_in(Worker, fun() -> [ft_test_target:f(I) || I <- lists:seq(1, 100)] end),
    ?assertEqual(#{call => 100, return_from => 100}, tracer_counts(Tracer, #{call => 100, return_from => 100})),
    %% Stopping ferrotrace leaves the process tracer's pattern and flags.
    ok = ferrotrace:stop(S1),
    ?assertMatch(#{calls := [#{mfa := ?F, count := 100, returns := 100}]}, ferrotrace:summary(S1)),
    ?assertEqual({traced, local}, erlang:trace_info(?F, traced)),
    ?assertEqual({tracer, Tracer}, erlang:trace_info(Worker, tracer)),
    run_in(Worker, fun() -> [ft_test_target:f(I) || I <- lists:seq(1, 30)] end),
    ?assertEqual(#{call => 130, return_from => 130}, tracer_counts(Tracer, #{call => 130, return_from => 130})),
    %% And the other way round: the process tracer goes, ferrotrace keeps counting.
    {ok, S2} = ferrotrace:calls(?F, #{duration => ?LONG, pids => [Worker]}),
    1 = erlang:trace(Worker, false, [call]),
    1 = erlang:trace_pattern(?F, false, [local]),
    ?assert(ft_trace_state:traced_by_ferrotrace(?F)),
    ?assert(ft_trace_state:traced_by_ferrotrace(Worker)),
    run_in(Worker, fun() -> [ft_test_target:f(I) || I <- lists:seq(1, 20)] end),
    ok = ferrotrace:stop(S2),
    ?assertMatch(#{calls := [#{mfa := ?F, count := 20, returns := 20}]}, ferrotrace:summary(S2)),
    ?assertEqual(#{call => 130, return_from => 130}, tracer_counts(Tracer, #{call => 130, return_from => 130})),
    ?assert(ft_trace_state:idle(?F, Worker)),
    exit(Tracer, kill),
    ok.

count_messages(Counts) ->
    receive
        {get, From} ->
            From ! {counts, self(), Counts},
            count_messages(Counts);
        Trace when element(1, Trace) =:= trace ->
            Tag = element(3, Trace),
            count_messages(maps:update_with(Tag, fun(N) -> N + 1 end, 1, Counts))
    end.

%% The tracer's counts once they reach Expected (trace messages come from the worker, the
%% request from this process: no order between them), or after 10 s, whatever they are then.
tracer_counts(Tracer, Expected) ->
    Get = fun() ->
                  Tracer ! {get, self()},
                  receive {counts, Tracer, Counts} -> Counts after 5000 -> error(tracer_stuck) end
          end,
    _ = ft_ct:poll(fun() -> Get() =:= Expected end, 10000),
    timer:sleep(20), % and nothing more comes
    Get().

%%--------------------------------------------------------------------------------------
%% Helpers

spawn_worker() ->
    spawn(fun Loop() -> receive {run, From, Fun} -> Fun(), From ! done, Loop() end end).

run_in(Worker, Fun) ->
    Worker ! {run, self(), Fun},
    receive done -> ok after 10000 -> error(worker_stuck) end.

%% The session has refined its patterns after its start (`settling' false).
settled(S) ->
    ft_ct:poll(fun() -> maps:get(settling, ferrotrace:summary(S), false) =:= false end, 30000).
