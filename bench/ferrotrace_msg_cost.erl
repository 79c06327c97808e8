%% The hot path's cost per message event against the call path's, single process, side by
%% side in one run: ns per iteration of `self() ! M, receive M -> ok end' (one `send' and one
%% `'receive'' event) and of a traced call with return (one `call' and one `return_from'),
%% untraced, with the no-op NIF floor (the VM's cost of delivering the events to a tracer
%% module that does nothing) and with ferrotrace. Best of 5 runs of N iterations.
%%
%% Then the message scenario with one worker per scheduler, each sending itself and
%% receiving N messages: events per second until drained (all events aggregated, or all
%% received by the process tracer), for the no-op floor, ferrotrace and a process tracer that
%% counts, with `ratio NAME VALUE' lines: ferrotrace's throughput against the floor's, and
%% its gain over the process tracer against the most any tracer can gain (floor / process).
%%
%%   bench/run.sh builds the floor; then:
%%   erl -noshell -pa _build/default/lib/ferrotrace/ebin -pa bench/out \
%%       -eval 'ferrotrace_msg_cost:main(), halt().'
-module(ferrotrace_msg_cost).

-export([main/0]).

-define(N, 500000).

%% @doc Prints `ns_per_iteration CASE PATH VALUE' lines and the ratios to the floor.
-spec main() -> ok.
main() ->
    {module, _} = code:ensure_loaded(ft_bench_target),
    Results = [{Case, Path, best(Case, Path)} || Path <- [messages, calls],
                                                 Case <- [untraced, floor_noop, ferrotrace]],
    [io:format("ns_per_iteration ~s ~s ~.1f~n", [Case, Path, Ns]) || {Case, Path, Ns} <- Results],
    [begin
         {_, _, Floor} = lists:keyfind(floor_noop, 1, [R || R = {_, P, _} <- Results, P =:= Path]),
         {_, _, Ft} = lists:keyfind(ferrotrace, 1, [R || R = {_, P, _} <- Results, P =:= Path]),
         {_, _, Un} = lists:keyfind(untraced, 1, [R || R = {_, P, _} <- Results, P =:= Path]),
         io:format("ratio ferrotrace_vs_floor_~s ~.3f~n", [Path, Ft / Floor]),
         io:format("ns_over_floor_per_event ~s ~.1f~n", [Path, (Ft - Floor) / 2]),
         io:format("ns_floor_per_event ~s ~.1f~n", [Path, (Floor - Un) / 2])
     end || Path <- [messages, calls]],
    Workers = erlang:system_info(schedulers_online),
    Rates = [{Case, best_rate(Case, Workers)} || Case <- [floor_noop, ferrotrace, process_count]],
    [io:format("events_per_s ~s messages workers=~b ~b~n", [Case, Workers, round(R)]) || {Case, R} <- Rates],
    {_, Floor} = lists:keyfind(floor_noop, 1, Rates),
    {_, Ft} = lists:keyfind(ferrotrace, 1, Rates),
    {_, Pt} = lists:keyfind(process_count, 1, Rates),
    io:format("ratio messages_throughput_vs_floor ~.3f~n", [Ft / Floor]),
    io:format("ratio messages_gain_over_process_tracer ~.3f~n", [Ft / Pt]),
    io:format("ratio messages_gain_vs_possible ~.3f~n", [(Ft / Pt) / (Floor / Pt)]),
    ok.

best_rate(Case, Workers) ->
    lists:max([rate(Case, Workers) || _ <- lists:seq(1, 3)]).

%% Events per second, from the start of the work until every event is accounted for.
rate(Case, Workers) ->
    Self = self(),
    Pids = [spawn(fun() -> receive go -> ok end, msg_loop(?N), Self ! {done, self()} end)
            || _ <- lists:seq(1, Workers)],
    Events = 2 * ?N * Workers,
    {Flags, Drained, Teardown} = rate_setup(Case, Events),
    [erlang:trace(P, true, ['send', 'receive' | Flags]) || P <- Pids],
    T0 = erlang:monotonic_time(),
    [P ! go || P <- Pids],
    [receive {done, P} -> ok end || P <- Pids],
    Drained(),
    T = erlang:convert_time_unit(erlang:monotonic_time() - T0, native, nanosecond),
    Teardown(),
    Events / (T / 1.0e9).

rate_setup(floor_noop, _Events) ->
    {[{tracer, ferrotrace_floor, noop}], fun() -> ok end, fun() -> ok end};
rate_setup(ferrotrace, Events) ->
    {ok, S} = ferrotrace:session(#{duration => 600000, ring_size => 1 bsl 20}),
    Drained = fun() -> wait_aggregated(S, Events) end,
    {[{tracer, ferrotrace_tracer, S}], Drained, fun() -> ferrotrace:release(S) end};
rate_setup(process_count, Events) ->
    Self = self(),
    Counter = spawn(fun() -> count(Self, Events, 0) end),
    {[{tracer, Counter}], fun() -> receive {drained, Counter} -> ok end end,
     fun() -> exit(Counter, kill) end}.

%% The `'receive'' of the last message can still be in a ring: poll until every event
%% (aggregated or dropped) is accounted for.
wait_aggregated(S, Events) ->
    #{events := #{seen := Seen}} = ferrotrace:summary(S),
    case Seen >= Events of
        true -> ok;
        false -> timer:sleep(1), wait_aggregated(S, Events)
    end.

count(Parent, Expected, N) when N =:= Expected ->
    Parent ! {drained, self()};
count(Parent, Expected, N) ->
    receive _ -> count(Parent, Expected, N + 1) end.

best(Case, Path) ->
    lists:min([once(Case, Path) || _ <- lists:seq(1, 5)]).

once(Case, Path) ->
    Self = self(),
    Pid = spawn(fun() -> receive go -> ok end, T0 = erlang:monotonic_time(),
                         work(Path, ?N), Self ! {done, self(), erlang:monotonic_time() - T0} end),
    Teardown = setup(Case, Path, Pid),
    Pid ! go,
    Time = receive {done, Pid, T} -> T end,
    Teardown(),
    erlang:convert_time_unit(Time, native, nanosecond) / ?N.

work(messages, N) -> msg_loop(N);
work(calls, N) -> call_loop(N, 0).

msg_loop(0) -> ok;
msg_loop(N) -> self() ! N, receive N -> msg_loop(N - 1) end.

call_loop(0, _) -> ok;
call_loop(N, Acc) -> call_loop(N - 1, ft_bench_target:f(Acc)).

flags(messages) -> [send, 'receive'];
flags(calls) -> [call].

patterns(calls, On) ->
    erlang:trace_pattern({ft_bench_target, f, 1}, On andalso [{'_', [], [{return_trace}]}], [local]);
patterns(messages, _) -> 0.

setup(untraced, _Path, _Pid) ->
    fun() -> ok end;
setup(floor_noop, Path, Pid) ->
    patterns(Path, true),
    erlang:trace(Pid, true, [{tracer, ferrotrace_floor, noop} | flags(Path)]),
    fun() -> patterns(Path, false) end;
setup(ferrotrace, messages, Pid) ->
    {ok, S} = ferrotrace:processes([messages], #{pids => [Pid], duration => 600000,
                                                ring_size => 1 bsl 20}),
    fun() -> ferrotrace:release(S) end;
setup(ferrotrace, calls, Pid) ->
    {ok, S} = ferrotrace:session(#{duration => 600000, ring_size => 1 bsl 20}),
    patterns(calls, true),
    erlang:trace(Pid, true, [{tracer, ferrotrace_tracer, S}, call]),
    fun() -> patterns(calls, false), ferrotrace:release(S) end.
