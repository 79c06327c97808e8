-module(ferrotrace_barrier_tests).
%%% @doc ferrotrace_barrier: the spinners a pattern change runs beside, one per online
%%% scheduler, and that they end: when the change returns, when it raises, and by their
%%% deadline when their caller is killed. (What they save is a time: `make cold-start'
%%% prints the start's `holding_ms'.)
%% Not eunit.hrl: its generated test/0 has no spec (see ferrotrace_bad_input_tests).
-include_lib("stdlib/include/assert.hrl").

-export([answers_and_ends_its_spinners_test/0, raises_and_ends_its_spinners_test/0,
         nested_adds_none_test/0, a_killed_caller_leaves_none_test/0, changes_patterns_test/0]).

-spec answers_and_ends_its_spinners_test() -> ok.
answers_and_ends_its_spinners_test() ->
    Self = self(),
    {{Answer, Priority}, Spinners} =
        spawning(fun() ->
                         ferrotrace_barrier:quick(fun() ->
                                                          {priority, P} = erlang:process_info(Self, priority),
                                                          {answer, P}
                                                  end)
                 end),
    ?assertEqual(answer, Answer),
    ?assertEqual(high, Priority),
    ?assertEqual(erlang:system_info(schedulers_online), length(Spinners)),
    %% The caller's own priority again, and every spinner gone.
    ?assertEqual({priority, normal}, erlang:process_info(self(), priority)),
    ok = all_end(Spinners).

-spec raises_and_ends_its_spinners_test() -> ok.
raises_and_ends_its_spinners_test() ->
    {Raised, Spinners} = spawning(fun() ->
                                          try ferrotrace_barrier:quick(fun() -> error({spinners, raised}) end)
                                          catch error:Reason -> {raised, Reason}
                                          end
                                  end),
    ?assertEqual({raised, {spinners, raised}}, Raised),
    ?assertEqual(erlang:system_info(schedulers_online), length(Spinners)),
    ?assertEqual({priority, normal}, erlang:process_info(self(), priority)),
    ok = all_end(Spinners).

-spec nested_adds_none_test() -> ok.
nested_adds_none_test() ->
    {ok, Spawned} = spawning(fun() ->
                                     ferrotrace_barrier:quick(fun() -> ferrotrace_barrier:quick(fun() -> ok end) end)
                             end),
    %% The outer call's spinners alone: the inner one added none.
    ?assertEqual(erlang:system_info(schedulers_online), length(Spawned)),
    ok = all_end(Spawned).

%% Killed inside the change, the caller never tells its spinners: they stop by their
%% deadline (25 ms; 5 s allowed here, for a loaded machine).
-spec a_killed_caller_leaves_none_test() -> ok.
a_killed_caller_leaves_none_test() ->
    Self = self(),
    Caller = spawn(fun() ->
                           receive go -> ok end,
                           ferrotrace_barrier:quick(fun() -> Self ! inside, receive never -> ok end end)
                   end),
    Tracer = trace_spawns(Caller),
    Monitor = erlang:monitor(process, Caller),
    Caller ! go,
    receive inside -> ok end,
    exit(Caller, kill),
    receive {'DOWN', Monitor, process, Caller, _} -> ok end,
    Spinners = spawns(Caller, Tracer),
    ?assertEqual(erlang:system_info(schedulers_online), length(Spinners)),
    ok = all_end(Spinners).

%% What it is for: a pattern set and taken off inside it, the change made.
-spec changes_patterns_test() -> ok.
changes_patterns_test() ->
    MFA = {?MODULE, changes_patterns_test, 0},
    try
        ?assertEqual(1, ferrotrace_barrier:quick(fun() -> erlang:trace_pattern(MFA, true, [local]) end)),
        ?assertMatch({traced, local}, erlang:trace_info(MFA, traced))
    after
        erlang:trace_pattern(MFA, false, [local])
    end.

%% What `Fun' answers, and the processes it spawned, told by a process tracing this one's
%% spawns: a spinner ends at its deadline (25 ms), and on a loaded machine one had ended
%% before a listing of the processes made inside the change could see it (OTP 29 in CI:
%% one spinner of two found).
spawning(Fun) ->
    Tracer = trace_spawns(self()),
    Answer = try Fun() after erlang:trace(self(), false, [procs]) end,
    {Answer, spawns(self(), Tracer)}.

%% A process that collects the spawns of `Pid' from now on.
trace_spawns(Pid) ->
    Tracer = spawn(fun() -> collect([]) end),
    1 = erlang:trace(Pid, true, [procs, {tracer, Tracer}]),
    Tracer.

%% The processes `Pid' spawned, once every trace message of it has reached `Tracer'.
spawns(Pid, Tracer) ->
    Ref = erlang:trace_delivered(Pid),
    receive {trace_delivered, Pid, Ref} -> ok end,
    Tracer ! {spawned, self()},
    receive {spawned, Pids} -> Pids end.

collect(Pids) ->
    receive
        {trace, _, spawn, Pid, _} -> collect([Pid | Pids]);
        {spawned, To} -> To ! {spawned, lists:reverse(Pids)};
        _ -> collect(Pids)
    end.

all_end(Pids) ->
    Monitors = [erlang:monitor(process, P) || P <- Pids],
    lists:foreach(fun(M) ->
                          receive {'DOWN', M, process, _, _} -> ok
                          after 5000 -> error(spinner_still_running)
                          end
                  end, Monitors).
