%% The ferrotrace benchmark (`make bench`, or `sh bench/run.sh`).
%%
%% Measures, side by side in one VM, the cost of tracing an exported `ft_bench_target:f/1'
%% (`f(X) -> X + 1') with `return_trace' (two events per call: `call' and `return_from'):
%%
%%   untraced       no trace pattern, no trace flags (the cost of the call itself);
%%   floor_discard  {tracer, ferrotrace_floor, discard}: the VM asks a NIF tracer, which says
%%                  `discard' (the floor for asking a tracer module);
%%   floor_noop     {tracer, ferrotrace_floor, noop}: the NIF tracer says `trace' and its
%%                  trace/5 does nothing (the floor for delivering an event to a NIF tracer);
%%   ferrotrace     {tracer, ferrotrace_tracer, S} with S from ferrotrace:session/1: the
%%                  full hot path (filter, limits, timestamp, ring push), aggregation off the
%%                  schedulers; timed until the traced process is done;
%%   floor_noop_keyed, ferrotrace_keyed  the same two with a match spec that keys each call
%%                  (`{message, X rem 4}'), the session with `key => message': the cost of
%%                  copying a small key, against the floor of the same match spec;
%%   process_count  {tracer, Pid}: a tracer process that only counts messages, timed until it
%%                  has received every event (drained);
%%   dbg_style_hist {tracer, Pid} with monotonic_timestamp: a tracer process that pairs call
%%                  and return per pid and keeps a log2 latency histogram in a map (what a
%%                  hand-written dbg handler does), timed until drained.
%%
%% Two scenarios: `single' (one process makes all the calls) and `workers' (one worker per
%% online scheduler, bound to it when the VM accepts the `{scheduler, I}' spawn option, all
%% traced, all sending to the same tracer). Each case runs 3 times, the rounds interleaved
%% across cases, and the median is reported. A sampler process (high priority, every 2 ms)
%% records the peak of erlang:memory(total) and, for process tracers, of the tracer's
%% message_queue_len. That memory is the VM's (ERTS allocators): what the Rust side allocates
%% with the system allocator is not in it, so the sampler also records the OS process's
%% resident set (Linux /proc/self/statm, every 5th sample); `rss_deltaMB' is its peak over its
%% value before the run (memory an earlier case freed may still be resident and be reused
%% without growth, so a case can show less than it used). `cpu/wall' is the OS process's CPU time (user + system, /proc/self/stat) over
%% the run's wall time: how many cores the case kept busy, the collector thread of ferrotrace
%% and the schedulers' busy-waiting included.
%%
%% Sizes scale with the FERROTRACE_BENCH_SCALE environment variable (default 1.0);
%% FERROTRACE_BENCH_CASES names the cases to run (default all). The
%% benchmark asserts nothing about speed: it prints numbers, ratios and whether each target of
%% the product brief is met. It exits non-zero only if a case crashed.
-module(ferrotrace_bench).

-export([main/0, run/1]).
%% For the other benches.
-export([cpu_ns/0, by_bucket/2]).

%% Calls in the single-process scenario at scale 1.0, for cheap and for slow cases.
-define(CALLS_CHEAP, 4000000).
-define(CALLS_SLOW, 1000000).
-define(ROUNDS, 3).
-define(SAMPLE_MS, 2).
-define(WAIT_MS, 300000).
-define(MS, [{'_', [], [{return_trace}]}]).
-define(KEYED_MS, [{['$1'], [], [{message, {'rem', '$1', 4}}, {return_trace}]}]).
-define(TARGET, {ft_bench_target, f, 1}).
-define(SAMPLE, 10).
-define(SAMPLED_CHUNKS, 200).

-type case_name() :: untraced | floor_discard | floor_noop | ferrotrace | ferrotrace_sampled
                   | ft_call_sampled | ft_call_paused
                   | ferrotrace_args | ferrotrace_page | floor_noop_keyed | ferrotrace_keyed
                   | process_count | dbg_style_hist.
-type scenario() :: single | workers.
-type result() :: #{atom() => term()}.

-spec main() -> no_return().
main() ->
    Scale = scale(),
    Status =
        try run(Scale) of
            ok -> 0;
            crashed -> 1
        catch
            Class:Reason:Stack ->
                io:format("benchmark crashed: ~p:~p~n~p~n", [Class, Reason, Stack]),
                2
        end,
    halt(Status).

%% @doc Runs the whole benchmark at the given scale and prints the report. Returns `crashed'
%% when a case crashed (its row says so), `ok' otherwise.
-spec run(number()) -> ok | crashed.
run(Scale) ->
    {module, ft_bench_target} = code:ensure_loaded(ft_bench_target),
    FloorOk = ensure_floor(),
    FtStatus = ferrotrace_status(),
    Scheds = erlang:system_info(schedulers_online),
    Cores = erlang:system_info(logical_processors_available),
    Bind = bind_supported(),
    io:format("ferrotrace benchmark: OTP ~s, erts ~s~n",
              [erlang:system_info(otp_release), erlang:system_info(version)]),
    io:format("cores logical_processors_available=~p schedulers_online=~p "
              "logical_processors=~p~n",
              [Cores, Scheds, erlang:system_info(logical_processors)]),
    io:format("traced: ft_bench_target:f/1 with match spec ~p (2 events per call)~n", [?MS]),
    io:format("scale ~p, ~p rounds, median reported; workers bound to schedulers: ~p~n",
              [Scale, ?ROUNDS, Bind]),
    case FtStatus of
        ok -> ok;
        {skip, Why} -> io:format("ferrotrace case SKIPPED: ~s~n", [Why])
    end,
    case FloorOk of
        ok -> ok;
        {error, FloorWhy} -> io:format("floor cases SKIPPED: ferrotrace_floor not loaded: ~p~n",
                                       [FloorWhy])
    end,
    Cases = [C || C <- cases(),
                  not (is_floor(C) andalso FloorOk =/= ok),
                  not (is_ferrotrace(C) andalso FtStatus =/= ok)],
    T0 = erlang:monotonic_time(millisecond),
    Single = scenario(single, Cases, 1, Scale, Bind),
    Workers = scenario(workers, Cases, Scheds, Scale, Bind),
    print_ratios(Single, Workers, FtStatus),
    io:format("benchmark took ~.1f s~n", [(erlang:monotonic_time(millisecond) - T0) / 1000]),
    Crashed = [1 || {_, #{error := _}} <- Single ++ Workers],
    case Crashed of
        [] -> ok;
        _ -> crashed
    end.

%%% Setup -------------------------------------------------------------------------------

scale() ->
    case os:getenv("FERROTRACE_BENCH_SCALE") of
        false -> 1.0;
        S ->
            try list_to_float(S)
            catch error:badarg ->
                    try float(list_to_integer(S)) catch error:badarg -> 1.0 end
            end
    end.

%% FERROTRACE_BENCH_CASES="floor_noop ferrotrace": those cases only (bench/compare.sh).
cases() ->
    case os:getenv("FERROTRACE_BENCH_CASES") of
        false -> all_cases();
        Names -> [C || C <- all_cases(), lists:member(atom_to_list(C), string:lexemes(Names, " ,"))]
    end.

all_cases() ->
    [untraced, floor_discard, floor_noop, ferrotrace, ferrotrace_page, ferrotrace_args, ferrotrace_sampled,
     ft_call_sampled, ft_call_paused, floor_noop_keyed, ferrotrace_keyed, process_count,
     dbg_style_hist].

is_ferrotrace(C) -> lists:member(C, [ferrotrace, ferrotrace_page, ferrotrace_sampled, ferrotrace_args, ferrotrace_keyed,
                                     ft_call_sampled, ft_call_paused]).

%% The sampled case runs each worker's calls in ?SAMPLED_CHUNKS short-lived processes (traced
%% through set_on_spawn): `sample' keeps whole processes, so it needs many pids to keep 1 in 10.
chunks(ferrotrace_sampled) -> ?SAMPLED_CHUNKS;
chunks(_) -> 1.

is_floor(C) -> lists:member(C, [floor_discard, floor_noop, floor_noop_keyed]).

%% The keyed cases' match spec sets a key; the others only ask for returns.
match_spec(C) when C =:= floor_noop_keyed; C =:= ferrotrace_keyed -> ?KEYED_MS;
match_spec(_) -> ?MS.

ensure_floor() ->
    case code:ensure_loaded(ferrotrace_floor) of
        {module, ferrotrace_floor} -> ok;
        {error, Why} -> {error, Why}
    end.

ferrotrace_status() ->
    case {code:ensure_loaded(ferrotrace), code:ensure_loaded(ferrotrace_tracer)} of
        {{module, _}, {module, _}} ->
            case erlang:function_exported(ferrotrace, session, 1) of
                true -> ok;
                false -> {skip, "ferrotrace:session/1 is not exported"}
            end;
        {{error, Why}, _} ->
            {skip, io_lib:format("code:ensure_loaded(ferrotrace) failed: ~p "
                                 "(build the core with rebar3 compile)", [Why])};
        {_, {error, Why}} ->
            {skip, io_lib:format("code:ensure_loaded(ferrotrace_tracer) failed: ~p", [Why])}
    end.

%% `{scheduler, I}' is an undocumented spawn option of OTP 25 that binds a process to the run
%% queue of scheduler I. Use it when the VM accepts it, otherwise plain spawn.
bind_supported() ->
    Opts = [{scheduler, 1}],
    try spawn_opt(fun() -> ok end, Opts) of
        _ -> true
    catch
        error:badarg -> false
    end.

%%% Scenarios ---------------------------------------------------------------------------

-spec scenario(scenario(), [case_name()], pos_integer(), number(), boolean()) ->
          [{case_name(), result()}].
scenario(Scenario, Cases, NWorkers, Scale, Bind) ->
    io:format("~n== scenario ~p: ~p worker(s) ==~n", [Scenario, NWorkers]),
    Plan = [{C, per_worker_calls(C, NWorkers, Scale)} || C <- Cases],
    %% Warm-up: a short run of every case (loads code, grows allocators), not reported.
    _ = [run_once(C, max(1, N div 20), NWorkers, Bind) || {C, N} <- Plan],
    Rounds = [[{C, run_once(C, N, NWorkers, Bind)} || {C, N} <- Plan]
              || _ <- lists:seq(1, ?ROUNDS)],
    Results = [{C, median_result([R || Round <- Rounds, {C2, R} <- Round, C2 =:= C])}
               || C <- Cases],
    print_notes(Scenario, Rounds),
    print_table(Scenario, Results),
    Results.

per_worker_calls(Case, NWorkers, Scale) ->
    Total = case Case of
                process_count -> ?CALLS_SLOW;
                dbg_style_hist -> ?CALLS_SLOW;
                _ -> ?CALLS_CHEAP
            end,
    max(1000, round(Total * Scale) div NWorkers).

%%% One run -----------------------------------------------------------------------------

%% Runs one case once: NWorkers processes each make Calls traced calls.
-spec run_once(case_name(), pos_integer(), pos_integer(), boolean()) -> result().
run_once(Case, Calls, NWorkers, Bind) ->
    tracing_off(),
    erlang:garbage_collect(),
    Events = case Case of untraced -> 0; _ -> 2 * Calls * NWorkers end,
    MemBase = erlang:memory(total),
    try
        run_case(Case, Calls, NWorkers, Bind, Events, MemBase)
    catch
        Class:Reason:Stack ->
            io:format("case ~p crashed: ~p:~p~n  ~p~n", [Case, Class, Reason, Stack]),
            #{case_name => Case, error => {Class, Reason}, calls => Calls * NWorkers,
              events => Events}
    after
        tracing_off()
    end.

run_case(Case, Calls, NWorkers, Bind, Events, MemBase) ->
    Tracer = tracer_setup(Case, Events),
    RssBase = rss(),
    Sampler = start_sampler(maps:get(pid, Tracer, undefined)),
    Cpu0 = cpu_ns(),
    Parent = self(),
    Workers = [spawn_worker(Parent, I, {Calls, chunks(Case)}, NWorkers > 1 andalso Bind)
               || I <- lists:seq(1, NWorkers)],
    case Case of
        untraced -> ok;
        _ -> 1 = erlang:trace_pattern(?TARGET, match_spec(Case), [])
    end,
    _ = [1 = erlang:trace(W, true, maps:get(flags, Tracer)) || W <- Workers,
                                                               Case =/= untraced],
    _ = [W ! go || W <- Workers],
    Spans = [receive {done, W, T0, T1} -> {T0, T1} after ?WAIT_MS -> timeout end
             || W <- Workers],
    Start = lists:min([T0 || {T0, _} <- Spans]),
    WorkEnd = lists:max([T1 || {_, T1} <- Spans]),
    %% Tracing stops here for every case; process tracers may still have a backlog.
    tracing_off(),
    {End, Drained} = wait_drained(Tracer, WorkEnd),
    Cpu1 = cpu_ns(),
    {PeakMem, PeakMbox, PeakRss} = stop_sampler(Sampler),
    Extra = tracer_teardown(Case, Tracer),
    Elapsed = max(1, End - Start),
    TotalCalls = Calls * NWorkers,
    Extra#{case_name => Case, calls => TotalCalls, events => Events, elapsed_ns => Elapsed,
           work_ns => max(1, WorkEnd - Start), drained => Drained,
           peak_mem => PeakMem, mem_delta => max(0, PeakMem - MemBase),
           peak_mbox => PeakMbox, cpu_ns => cpu_diff(Cpu0, Cpu1),
           rss_delta => rss_delta(RssBase, PeakRss)}.

spawn_worker(Parent, I, Calls, true) ->
    spawn_opt(fun() -> worker(Parent, Calls) end, [link, {scheduler, I}]);
spawn_worker(Parent, _I, Calls, false) ->
    spawn_opt(fun() -> worker(Parent, Calls) end, [link]).

worker(Parent, {Calls, Chunks}) ->
    receive go -> ok end,
    T0 = erlang:monotonic_time(nanosecond),
    _ = case Chunks of
            1 -> loop(Calls, 0);
            _ -> [chunk(Calls div Chunks + min(1, max(0, Calls rem Chunks - I)))
                  || I <- lists:seq(0, Chunks - 1)]
        end,
    T1 = erlang:monotonic_time(nanosecond),
    Parent ! {done, self(), T0, T1}.

%% Runs N calls in a new process (traced by inheritance) and waits for it.
chunk(N) ->
    {Pid, Ref} = spawn_monitor(fun() -> loop(N, 0) end),
    receive {'DOWN', Ref, process, Pid, normal} -> ok end.

loop(0, Acc) -> Acc;
loop(N, Acc) -> loop(N - 1, ft_bench_target:f(Acc)).

tracing_off() ->
    _ = erlang:trace(all, false, [all]),
    _ = erlang:trace_pattern({ft_bench_target, '_', '_'}, false, []),
    ok.

%%% Tracers -----------------------------------------------------------------------------

tracer_setup(untraced, _Events) ->
    #{flags => []};
tracer_setup(floor_discard, _Events) ->
    #{flags => [call, {tracer, ferrotrace_floor, discard}]};
tracer_setup(floor_noop, _Events) ->
    #{flags => [call, {tracer, ferrotrace_floor, noop}]};
tracer_setup(ferrotrace, _Events) ->
    {ok, S} = ferrotrace:session(#{duration => 3600000}),
    #{flags => [call, {tracer, ferrotrace_tracer, S}], session => S};
%% What calls/2 keeps by default for the html page: a recorder of 200 events (on the
%% collector thread) and a snapshot of the histograms every second (ferrotrace_intervals).
tracer_setup(ferrotrace_page, _Events) ->
    {ok, S} = ferrotrace:session(#{duration => 3600000, recent => 200, intervals => 1000}),
    #{flags => [call, {tracer, ferrotrace_tracer, S}], session => S};
%% `args => true': each event also copies f/1's argument list or its return value.
tracer_setup(ferrotrace_args, _Events) ->
    {ok, S} = ferrotrace:session(#{duration => 3600000, args => true}),
    #{flags => [call, {tracer, ferrotrace_tracer, S}], session => S};
tracer_setup(floor_noop_keyed, Events) ->
    tracer_setup(floor_noop, Events);
%% `key => message': each call also copies its key (a small integer) into the term ring.
tracer_setup(ferrotrace_keyed, _Events) ->
    {ok, S} = ferrotrace:session(#{duration => 3600000, key => message}),
    #{flags => [call, {tracer, ferrotrace_tracer, S}], session => S};
tracer_setup(ferrotrace_sampled, _Events) ->
    {ok, S} = ferrotrace:session(#{duration => 3600000, sample => ?SAMPLE}),
    #{flags => [call, set_on_spawn, {tracer, ferrotrace_tracer, S}], session => S};
%% `sample => {calls, 10}': 1 call in 10 of the one busy process, decided in enabled_call.
tracer_setup(ft_call_sampled, _Events) ->
    {ok, S} = ferrotrace:session(#{duration => 3600000, sample => {calls, ?SAMPLE}}),
    #{flags => [call, {tracer, ferrotrace_tracer, S}], session => S};
%% Rate 0: every call refused in enabled_call, the floor of a refused call.
tracer_setup(ft_call_paused, _Events) ->
    {ok, S} = ferrotrace:session(#{duration => 3600000}),
    ok = ferrotrace_tracer:session_set_call_sample(S, 0),
    #{flags => [call, {tracer, ferrotrace_tracer, S}], session => S};
tracer_setup(process_count, Events) ->
    Parent = self(),
    Pid = spawn_link(fun() -> counter(Parent, Events, 0) end),
    #{flags => [call, {tracer, Pid}], pid => Pid};
tracer_setup(dbg_style_hist, Events) ->
    Parent = self(),
    Pid = spawn_link(fun() -> hist_tracer(Parent, Events, 0, #{}, #{}) end),
    #{flags => [call, monotonic_timestamp, {tracer, Pid}], pid => Pid}.

%% Waits until a process tracer has received every event. Returns the time it had them all.
wait_drained(#{pid := Pid}, WorkEnd) ->
    receive
        {drained, Pid, T} -> {max(T, WorkEnd), true}
    after ?WAIT_MS ->
            {erlang:monotonic_time(nanosecond), false}
    end;
wait_drained(_, WorkEnd) ->
    {WorkEnd, true}.

tracer_teardown(_, #{session := S}) ->
    T0 = erlang:monotonic_time(nanosecond),
    Summary = wait_aggregated(S, T0 + 30000000000),
    DrainMs = (erlang:monotonic_time(nanosecond) - T0) div 1000000,
    _ = ferrotrace:stop(S),
    _ = ferrotrace:release(S),
    ft_extra(Summary, DrainMs);
tracer_teardown(_, #{pid := Pid}) ->
    Ref = monitor(process, Pid),
    Pid ! {stop, self()},
    Extra = receive {tracer_stats, Pid, Stats} -> Stats after ?WAIT_MS -> #{} end,
    unlink(Pid),
    exit(Pid, kill),
    receive {'DOWN', Ref, process, Pid, _} -> ok end,
    Extra;
tracer_teardown(_, _) ->
    #{}.

%% Polls the summary until every seen event is aggregated or dropped (the collector thread
%% works off the schedulers and may still be busy when the traced processes are done).
wait_aggregated(S, Deadline) ->
    Summary = ferrotrace:summary(S),
    Done = case Summary of
               #{events := #{seen := Seen, aggregated := Agg, dropped := Drop}} ->
                   Ev = maps:get(events, Summary),
                   Agg + Drop + maps:get(limited, Ev, 0) + maps:get(sampled_out, Ev, 0) >= Seen;
               _ -> true
           end,
    case Done orelse erlang:monotonic_time(nanosecond) > Deadline of
        true -> Summary;
        false -> timer:sleep(5), wait_aggregated(S, Deadline)
    end.

ft_extra(#{events := Ev} = Summary, DrainMs) ->
    Calls = maps:get(calls, Summary, []),
    Fn = case [C || C = #{mfa := ?TARGET} <- Calls] of
             [C | _] -> C;
             [] -> #{}
         end,
    #{ft_seen => maps:get(seen, Ev, undefined),
      ft_aggregated => maps:get(aggregated, Ev, undefined),
      ft_dropped => maps:get(dropped, Ev, undefined),
      ft_limited => maps:get(limited, Ev, undefined),
      ft_sampled_out => maps:get(sampled_out, Ev, undefined),
      %% The collector thread's CPU time per event it aggregated: its budget, made visible.
      ft_collector_ns => case {maps:get(collector_cpu_ns, Summary, undefined),
                               maps:get(aggregated, Ev, 0)} of
                             {undefined, _} -> undefined;
                             {_, 0} -> undefined;
                             {Cpu, Agg} -> Cpu / Agg
                         end,
      %% The fullest ring at a drain and the longest gap between drains: what a drop means.
      ft_backlog => case maps:get(backlog, Summary, undefined) of
                        #{ring_peak := Peak, ring_size := Size, longest_gap_us := Gap} ->
                            io_lib:format("~b/~b ~.1fms", [Peak, Size, Gap / 1000]);
                        _ -> "n/a"
                    end,
      ft_drain_ms => DrainMs,
      ft_count => maps:get(count, Fn, undefined),
      ft_p50 => maps:get(p50, Fn, undefined),
      ft_p99 => maps:get(p99, Fn, undefined)};
ft_extra(Other, DrainMs) ->
    #{ft_summary => Other, ft_drain_ms => DrainMs}.

%% A process tracer that only counts; tells Parent when it has Expected messages.
counter(Parent, Expected, N) ->
    receive
        {stop, From} ->
            From ! {tracer_stats, self(), #{received => N}};
        _ ->
            N1 = N + 1,
            case N1 =:= Expected of
                true -> Parent ! {drained, self(), erlang:monotonic_time(nanosecond)};
                false -> ok
            end,
            counter(Parent, Expected, N1)
    end.

%% What a hand-written dbg handler keeping latencies does: pair the call and the return of
%% each process, put the latency in a log2 bucket of a map.
hist_tracer(Parent, Expected, N, Open, Hist) ->
    receive
        {trace_ts, Pid, call, _MFA, Ts} ->
            hist_seen(Parent, Expected, N),
            hist_tracer(Parent, Expected, N + 1, Open#{Pid => Ts}, Hist);
        {trace_ts, Pid, return_from, _MFA, _Ret, Ts} ->
            hist_seen(Parent, Expected, N),
            case maps:take(Pid, Open) of
                {T0, Open1} ->
                    B = log2(Ts - T0, 0),
                    hist_tracer(Parent, Expected, N + 1, Open1,
                                Hist#{B => maps:get(B, Hist, 0) + 1});
                error ->
                    hist_tracer(Parent, Expected, N + 1, Open, Hist)
            end;
        {stop, From} ->
            From ! {tracer_stats, self(),
                    #{received => N, hist_count => lists:sum(maps:values(Hist)),
                      hist_buckets => lists:sort(maps:to_list(Hist))}};
        _ ->
            hist_seen(Parent, Expected, N),
            hist_tracer(Parent, Expected, N + 1, Open, Hist)
    end.

hist_seen(Parent, Expected, N) when N + 1 =:= Expected ->
    Parent ! {drained, self(), erlang:monotonic_time(nanosecond)};
hist_seen(_, _, _) ->
    ok.

log2(D, B) when D > 1 -> log2(D bsr 1, B + 1);
log2(_, B) -> B.

%%% Sampler -----------------------------------------------------------------------------

start_sampler(TracerPid) ->
    Parent = self(),
    spawn_opt(fun() -> sampler(Parent, TracerPid, 0, 0, rss(), 0) end,
              [link, {priority, high}]).

sampler(Parent, TracerPid, PeakMem, PeakMbox, PeakRss, Tick) ->
    Mem = max(PeakMem, erlang:memory(total)),
    Mbox = case TracerPid of
               undefined -> PeakMbox;
               _ ->
                   case erlang:process_info(TracerPid, message_queue_len) of
                       {message_queue_len, L} -> max(PeakMbox, L);
                       undefined -> PeakMbox
                   end
           end,
    Rss = case Tick rem 5 of
              0 -> max_rss(PeakRss, rss());
              _ -> PeakRss
          end,
    receive
        {stop, From} -> From ! {peaks, self(), Mem, Mbox, max_rss(Rss, rss())}
    after ?SAMPLE_MS ->
            sampler(Parent, TracerPid, Mem, Mbox, Rss, Tick + 1)
    end.

stop_sampler(Pid) ->
    Pid ! {stop, self()},
    receive {peaks, Pid, Mem, Mbox, Rss} -> unlink(Pid), {Mem, Mbox, Rss} end.

%%% OS figures (Linux /proc; `undefined' elsewhere) -------------------------------------

%% Resident set size in bytes.
rss() ->
    case file:read_file("/proc/self/statm") of
        {ok, B} ->
            case string:lexemes(binary_to_list(B), " \n") of
                [_, Pages | _] -> list_to_integer(Pages) * os_const(page_size);
                _ -> undefined
            end;
        _ -> undefined
    end.

max_rss(undefined, New) -> New;
max_rss(Old, undefined) -> Old;
max_rss(Old, New) -> max(Old, New).

rss_delta(Base, Peak) when is_integer(Base), is_integer(Peak) -> max(0, Peak - Base);
rss_delta(_, _) -> undefined.

%% @doc CPU time (user + system) of the whole OS process, all its threads, in ns (at the
%% OS's clock-tick resolution); `undefined' without /proc.
-spec cpu_ns() -> non_neg_integer() | undefined.
cpu_ns() ->
    case file:read_file("/proc/self/stat") of
        {ok, B} ->
            %% The command name is in parentheses and may hold spaces: split after it.
            [_, Rest] = string:split(binary_to_list(B), ")", trailing),
            Fields = string:lexemes(Rest, " "),
            Ticks = list_to_integer(lists:nth(12, Fields)) + list_to_integer(lists:nth(13, Fields)),
            Ticks * (1000000000 div os_const(clk_tck));
        _ -> undefined
    end.

%% @doc How many of the times `Ats' (ms) fall in each bucket of `BucketMs':
%% `[{Bucket, Count}]', in bucket order, only those with a time.
-spec by_bucket([non_neg_integer()], pos_integer()) -> [{non_neg_integer(), pos_integer()}].
by_bucket(Ats, BucketMs) ->
    lists:sort(maps:to_list(lists:foldl(fun(At, Acc) -> maps:update_with(At div BucketMs, fun(N) -> N + 1 end, 1, Acc) end,
                                        #{}, Ats))).

cpu_diff(A, B) when is_integer(A), is_integer(B) -> B - A;
cpu_diff(_, _) -> undefined.

os_const(Name) ->
    case get({os_const, Name}) of
        undefined ->
            {Cmd, Default} = case Name of
                                 page_size -> {"getconf PAGESIZE", 4096};
                                 clk_tck -> {"getconf CLK_TCK", 100}
                             end,
            V = try list_to_integer(string:trim(os:cmd(Cmd)))
                catch error:badarg -> Default
                end,
            put({os_const, Name}, V),
            V;
        V -> V
    end.

%%% Results -----------------------------------------------------------------------------

%% The median of each numeric figure over the rounds (a crashed round makes the case crashed).
median_result(Rs) ->
    case [R || R = #{error := _} <- Rs] of
        [E | _] -> E;
        [] ->
            Keys = [elapsed_ns, work_ns, peak_mem, mem_delta, peak_mbox, cpu_ns, rss_delta],
            Base = lists:nth((length(Rs) + 1) div 2,
                             lists:sort(fun(A, B) -> elapsed(A) =< elapsed(B) end, Rs)),
            Medians = maps:from_list([{K, median([maps:get(K, R) || R <- Rs])} || K <- Keys]),
            Drained = lists:all(fun(#{drained := D}) -> D end, Rs),
            (maps:merge(Base, Medians))#{drained => Drained}
    end.

elapsed(#{elapsed_ns := E}) -> E.

median(L) ->
    case lists:member(undefined, L) of
        true -> undefined;
        false -> lists:nth((length(L) + 1) div 2, lists:sort(L))
    end.

print_notes(Scenario, Rounds) ->
    lists:foreach(
      fun({RoundNo, Round}) ->
              lists:foreach(fun({C, R}) -> note(Scenario, RoundNo, C, R) end, Round)
      end, lists:zip(lists:seq(1, length(Rounds)), Rounds)).

note(Scenario, RoundNo, C, R = #{ft_seen := _}) ->
    Limited = case maps:get(ft_limited, R) of
                  undefined -> "";
                  L -> io_lib:format(" limited=~p", [L])
              end,
    Expected = case C of
                   %% A sampled-out call is one event (answered `discard' in enabled_call,
                   %% so the VM pushes no return frame); a kept one two.
                   ferrotrace_sampled -> io_lib:format("(1 in ~p processes kept)", [?SAMPLE]);
                   ft_call_sampled -> io_lib:format("(1 in ~p calls kept)", [?SAMPLE]);
                   ft_call_paused -> "(no call kept)";
                   _ -> io_lib:format("(expected ~p events)", [maps:get(events, R)])
               end,
    CollectorNs = case maps:get(ft_collector_ns, R) of
                      undefined -> "n/a";
                      Ns -> fmt(Ns, 1)
                  end,
    io:format("~p ~p round ~p: seen=~p aggregated=~p dropped=~p sampled_out=~p~s ~s "
              "count(f/1)=~p p50=~pns p99=~pns aggregation_drain=~pms "
              "collector_cpu_ns/event=~s fullest_ring/longest_gap=~s~n",
              [C, Scenario, RoundNo, maps:get(ft_seen, R), maps:get(ft_aggregated, R),
               maps:get(ft_dropped, R), maps:get(ft_sampled_out, R), Limited, Expected,
               maps:get(ft_count, R), maps:get(ft_p50, R), maps:get(ft_p99, R),
               maps:get(ft_drain_ms, R), CollectorNs, maps:get(ft_backlog, R, "n/a")]);
note(Scenario, RoundNo, C, R = #{ft_summary := Other}) ->
    io:format("~p ~p round ~p: unexpected summary ~p (drain ~pms)~n",
              [C, Scenario, RoundNo, Other, maps:get(ft_drain_ms, R)]);
note(Scenario, RoundNo, C, R = #{drained := false}) ->
    io:format("~p ~p round ~p: NOT DRAINED after ~ps (received ~p of ~p)~n",
              [C, Scenario, RoundNo, ?WAIT_MS div 1000, maps:get(received, R, unknown),
               maps:get(events, R)]);
note(Scenario, RoundNo, dbg_style_hist, R = #{hist_count := HC}) ->
    Calls = maps:get(calls, R),
    case HC =:= Calls of
        true -> ok;
        false -> io:format("dbg_style_hist ~p round ~p: histogram holds ~p calls of ~p~n",
                           [Scenario, RoundNo, HC, Calls])
    end;
note(_, _, _, _) ->
    ok.

print_table(Scenario, Results) ->
    io:format("~n~-8s ~-15s ~8s ~8s ~8s ~8s ~7s ~8s ~10s ~11s ~11s ~9s~n",
              ["scenario", "case", "calls", "ms", "ns/call", "ns/event", "Mev/s", "cpu/wall",
               "peak_memMB", "mem_deltaMB", "rss_deltaMB", "peak_mbox"]),
    lists:foreach(fun({C, R}) -> print_row(Scenario, C, R) end, Results).

print_row(Scenario, C, #{error := E, calls := Calls}) ->
    io:format("~-8s ~-15s ~8w CRASHED ~p~n", [Scenario, C, Calls, E]);
print_row(Scenario, C, R = #{calls := Calls, events := Events, elapsed_ns := Ns}) ->
    PerEvent = case Events of 0 -> "-"; _ -> fmt(Ns / Events, 1) end,
    Mev = case Events of 0 -> "-"; _ -> fmt(Events * 1000 / Ns, 2) end,
    Mbox = case C =:= process_count orelse C =:= dbg_style_hist of
               true -> integer_to_list(maps:get(peak_mbox, R));
               false -> "-"
           end,
    Drained = case maps:get(drained, R, true) of true -> ""; false -> " NOT DRAINED" end,
    CpuWall = case maps:get(cpu_ns, R) of undefined -> "-"; Cpu -> fmt(Cpu / Ns, 2) end,
    Rss = case maps:get(rss_delta, R) of undefined -> "-"; RD -> fmt(RD / 1048576, 1) end,
    io:format("~-8s ~-15s ~8w ~8s ~8s ~8s ~7s ~8s ~10s ~11s ~11s ~9s~s~n",
              [Scenario, C, Calls, fmt(Ns / 1.0e6, 1), fmt(Ns / Calls, 1), PerEvent, Mev,
               CpuWall, fmt(maps:get(peak_mem, R) / 1048576, 1),
               fmt(maps:get(mem_delta, R) / 1048576, 1), Rss, Mbox, Drained]).

fmt(X, Decimals) ->
    float_to_list(float(X), [{decimals, Decimals}]).

%%% Ratios ------------------------------------------------------------------------------

print_ratios(Single, Workers, FtStatus) ->
    io:format("~n"),
    PerEvent = fun(Results, C) -> metric(Results, C, fun(#{elapsed_ns := N, events := E}) ->
                                                             N / E end) end,
    Throughput = fun(Results, C) -> metric(Results, C, fun(#{elapsed_ns := N, events := E}) ->
                                                               E * 1000 / N end) end,
    Div = fun(undefined, _) -> undefined;
             (_, undefined) -> undefined;
             (A, B) -> A / B
          end,
    FtSkipped = FtStatus =/= ok,
    %% Lower is better: ferrotrace's cost per event over the no-op floor's, single process.
    ratio(ferrotrace_per_event_vs_noop_floor,
          Div(PerEvent(Single, ferrotrace), PerEvent(Single, floor_noop)),
          '=<', 1.10, FtSkipped),
    %% Higher is better: aggregated events per second with one worker per scheduler.
    ratio(ferrotrace_throughput_vs_noop_floor_workers,
          Div(Throughput(Workers, ferrotrace), Throughput(Workers, floor_noop)),
          '>=', 0.90, FtSkipped),
    ratio(ferrotrace_throughput_vs_process_tracer_workers,
          Div(Throughput(Workers, ferrotrace), Throughput(Workers, process_count)),
          none, none, FtSkipped),
    %% The most any tracer can gain over a process tracer on this machine is the floor's
    %% gain (floor / process tracer); the target is 0.90 of it.
    ratio(ferrotrace_gain_over_process_tracer_vs_most_possible_workers,
          Div(Div(Throughput(Workers, ferrotrace), Throughput(Workers, process_count)),
              Div(Throughput(Workers, floor_noop), Throughput(Workers, process_count))),
          '>=', 0.90, FtSkipped),
    %% Speed-up over the counting process tracer (until drained), single process.
    ratio(ferrotrace_vs_process_tracer_single,
          Div(Throughput(Single, ferrotrace), Throughput(Single, process_count)),
          none, none, FtSkipped),
    ratio(ferrotrace_vs_dbg_style_hist_single,
          Div(Throughput(Single, ferrotrace), Throughput(Single, dbg_style_hist)),
          none, none, FtSkipped),
    ratio(ferrotrace_throughput_vs_dbg_style_hist_workers,
          Div(Throughput(Workers, ferrotrace), Throughput(Workers, dbg_style_hist)),
          none, none, FtSkipped),
    %% calls/2's defaults for the html page (recorder, intervals) against none: the hot path
    %% is the same; the collector records each event once more.
    ratio(ferrotrace_page_per_event_vs_ferrotrace,
          Div(PerEvent(Single, ferrotrace_page), PerEvent(Single, ferrotrace)),
          none, none, FtSkipped),
    ratio(ferrotrace_page_throughput_vs_ferrotrace_workers,
          Div(Throughput(Workers, ferrotrace_page), Throughput(Workers, ferrotrace)),
          none, none, FtSkipped),
    %% `args => true' with f/1's small argument and result: target at most 2x the floor.
    ratio(ferrotrace_args_per_event_vs_noop_floor,
          Div(PerEvent(Single, ferrotrace_args), PerEvent(Single, floor_noop)),
          '=<', 2.0, FtSkipped),
    ratio(ferrotrace_args_per_event_vs_ferrotrace,
          Div(PerEvent(Single, ferrotrace_args), PerEvent(Single, ferrotrace)),
          none, none, FtSkipped),
    %% Keys: against the floor with the same (keying) match spec, and against no keys.
    ratio(ferrotrace_keyed_per_event_vs_keyed_floor,
          Div(PerEvent(Single, ferrotrace_keyed), PerEvent(Single, floor_noop_keyed)),
          none, none, FtSkipped),
    ratio(ferrotrace_keyed_per_event_vs_ferrotrace,
          Div(PerEvent(Single, ferrotrace_keyed), PerEvent(Single, ferrotrace)),
          none, none, FtSkipped),
    ratio(ferrotrace_per_event_vs_noop_floor_workers,
          Div(PerEvent(Workers, ferrotrace), PerEvent(Workers, floor_noop)),
          none, none, FtSkipped),
    %% A 1-in-10 sampled session, per traced call, against both floors (single process run
    %% as short-lived chunks, see chunks/1): sampled-out calls cost what `discard' costs.
    PerCall = fun(Results, C) -> metric(Results, C, fun(#{elapsed_ns := N, calls := K}) ->
                                                            N / K end) end,
    ratio(ferrotrace_sampled_per_call_vs_discard_floor,
          Div(PerCall(Single, ferrotrace_sampled), PerCall(Single, floor_discard)),
          none, none, FtSkipped),
    ratio(ferrotrace_sampled_per_call_vs_noop_floor,
          Div(PerCall(Single, ferrotrace_sampled), PerCall(Single, floor_noop)),
          none, none, FtSkipped),
    %% `sample => {calls, 10}', per traced call, against no sampling: target at most 0.45.
    ratio(ferrotrace_call_sampled_per_call_vs_ferrotrace,
          Div(PerCall(Single, ft_call_sampled), PerCall(Single, ferrotrace)),
          '=<', 0.45, FtSkipped),
    %% Rate 0: what a refused call costs, against the floor tracer's `discard'.
    ratio(ferrotrace_call_paused_per_call_vs_discard_floor,
          Div(PerCall(Single, ft_call_paused), PerCall(Single, floor_discard)),
          none, none, FtSkipped),
    Ns = fun(undefined) -> "n/a"; (X) -> fmt(X, 1) end,
    io:format("refused call (rate 0): ~s ns per call; discard floor ~s; untraced ~s~n",
              [Ns(PerCall(Single, ft_call_paused)), Ns(PerCall(Single, floor_discard)),
               Ns(metric_calls(Single, untraced))]),
    ratio(noop_floor_per_event_vs_discard_floor,
          Div(PerEvent(Single, floor_noop), PerEvent(Single, floor_discard)),
          none, none, false),
    ratio(process_tracer_per_event_vs_noop_floor,
          Div(PerEvent(Single, process_count), PerEvent(Single, floor_noop)),
          none, none, false),
    ok.

metric(Results, C, F) ->
    case lists:keyfind(C, 1, Results) of
        {C, R = #{elapsed_ns := _, events := E}} when E > 0 -> F(R);
        _ -> undefined
    end.

%% Per call, for a case with no events (untraced).
metric_calls(Results, C) ->
    case lists:keyfind(C, 1, Results) of
        {C, #{elapsed_ns := N, calls := K}} when K > 0 -> N / K;
        _ -> undefined
    end.

ratio(Name, undefined, Op, Target, Skipped) ->
    io:format("ratio ~s n/a~n", [Name]),
    case Op of
        none -> ok;
        _ ->
            Why = case Skipped of true -> "skipped (ferrotrace not available)";
                      false -> "not measured"
                  end,
            io:format("target ~s ~s ~s ~s~n", [Name, op(Op), num(Target), Why])
    end;
ratio(Name, Value, Op, Target, _Skipped) ->
    io:format("ratio ~s ~s~n", [Name, fmt(Value, 3)]),
    case Op of
        none -> ok;
        _ ->
            Met = case Op of '=<' -> Value =< Target; '>=' -> Value >= Target end,
            io:format("target ~s ~s ~s ~s~n",
                      [Name, op(Op), num(Target), case Met of true -> "met";
                                                      false -> "MISSED" end])
    end.

op('=<') -> "<=";
op('>=') -> ">=".

num(X) when is_integer(X) -> integer_to_list(X);
num(X) -> fmt(X, 2).
