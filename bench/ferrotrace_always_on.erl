%%% @doc What the always-on mode costs: a `{'_', '_', '_'}' session with `duration =>
%%% infinity', `max_overhead => 0.05' and `intervals => 1000' on a node whose schedulers are
%%% busy with ft_budget_work (worker processes through module functions, funs, apply and a
%%% gen_server). Every 10 s it prints the budget (estimate, rate, functions shed), the
%%% functions with figures, the session's memory (`summary/1''s `memory.total') and the
%%% interval snapshots' (the snapshot process: heap and binaries) with the bytes per interval;
%%% at the end the cost of one budget tick (a counts read and the controller; a summary read
%%% beside it) and of one
%%% interval snapshot read, medians of 21, and what a day of it holds (at most
%%% `max_intervals' intervals: past them neighbours merge). Run by `make always-on' (about
%%% 100 s); `ferrotrace_always_on:main([Seconds])' runs for another length.
%%%
%%% First, what a timed function holds at the default options: sessions of 20, 200 and 1,000
%%% functions of a generated module, each function called under load with work from 1 to
%%% 20,000 list elements (latencies from a few hundred ns to milliseconds) and recursing
%%% (body-recursive: its inner calls are compensated, so it has all four histograms:
%%% latency, own time, interval, raw). Per function: the difference between the 200- and
%%% the 20-function session over 180, in the engine's own accounting (`summary/1''s
%%% `memory': `histograms' plus `intervals', and `total') and in the node's resident set
%%% (`/proc/self/statm', less before the session: noisier, the load's heaps move it too).
-module(ferrotrace_always_on).
-export([main/0, main/1]).

-spec main() -> ok.
main() ->
    per_function(),
    main([60, 1000]).

%% The sessions of 20, 200 and 1,000 functions (ft_functions), one after another, each 5 s
%% under load.
per_function() ->
    Module = ft_always_on_functions,
    {module, Module} = ft_functions:load(Module, 1000),
    [{20, H20, T20, R20}, {200, H200, T200, R200}, {1000, H1000, T1000, R1000}] =
        [functions_session(Module, N) || N <- [20, 200, 1000]],
    %% `total' also moves with the rings and buffers each session happened to allocate.
    io:format("always_on per_function (200 less 20 functions, over 180): histograms_bytes=~b (engine's accounting:"
              " histograms + intervals) total_bytes=~b rss_bytes=~b~n",
              [(H200 - H20) div 180, (T200 - T20) div 180, (R200 - R20) div 180]),
    io:format("always_on functions=1000 histograms_bytes=~b total_bytes=~b (~.1f MB) rss_delta_bytes=~b;"
              " functions=200 total_bytes=~b; functions=20 total_bytes=~b~n",
              [H1000, T1000, T1000 / 1.0e6, R1000, T200, T20]).

%% One session timing functions 1 to `N' of `Module' while workers call them (started 1 s
%% before, so that their heaps have grown): its histograms' and total bytes, and the node's
%% resident set less before the session.
functions_session(Module, N) ->
    Workers = [spawn_link(fun() -> rand:seed(exsss, {I, 7, 11}), call_loop(Module, N) end)
               || I <- lists:seq(1, 2 * erlang:system_info(schedulers_online))],
    timer:sleep(1000),
    Rss0 = rss(),
    {ok, S} = ferrotrace:calls(ft_functions:specs(Module, N), #{duration => infinity, owner => self()}),
    timer:sleep(5000),
    #{memory := #{histograms := H, intervals := I, total := T}, calls := Calls} = ferrotrace:summary(S),
    Rss = rss() - Rss0,
    [begin unlink(W), exit(W, kill) end || W <- Workers],
    %% Every function was timed.
    N = length([C || #{count := C} <- Calls, C > 0]),
    ok = ferrotrace:release(S),
    {N, H + I, T, Rss}.

call_loop(Module, N) ->
    _ = ft_functions:call(Module, rand:uniform(N), ft_functions:work(rand:uniform())),
    call_loop(Module, N).

%% The node's resident set, bytes (Linux).
rss() ->
    {ok, Statm} = file:read_file("/proc/self/statm"),
    [_, Pages | _] = binary:split(Statm, <<" ">>, [global]),
    binary_to_integer(Pages) * 4096.

%% `[Seconds, IntervalMs]': a shorter interval fills `max_intervals' (600) sooner, to see
%% the bytes a day holds once its neighbours merge.
-spec main([pos_integer()]) -> ok.
main([Seconds, Period]) ->
    {module, _} = code:ensure_loaded(ft_budget_work),
    Schedulers = erlang:system_info(schedulers_online),
    Work = ft_budget_work:start(2 * Schedulers),
    {ok, S} = ferrotrace:calls({'_', '_', '_'}, #{duration => infinity, owner => self(), max_overhead => 0.05,
                                                  intervals => Period}),
    {ok, _, _, #{intervals := Snapshots}} = ferrotrace_registry:lookup(S),
    Lines = [begin timer:sleep(10000), line(S, Snapshots, T * 10) end || T <- lists:seq(1, Seconds div 10)],
    #{calls := Calls} = ferrotrace:summary(S),
    Tick = median(fun() -> {ok, Counts} = ferrotrace_tracer:session_counts(S), tick(Counts, Schedulers) end),
    CountsRead = median(fun() -> {ok, _} = ferrotrace_tracer:session_counts(S) end),
    Read = median(fun() -> {ok, _} = ferrotrace_tracer:session_histograms_bytes(S) end),
    Idle = median(fun() -> {ok, _} = ferrotrace_tracer:session_summary(S) end),
    {Bytes, Count} = snapshots(Snapshots),
    %% What one more interval adds: the growth between the first and the last line (the
    %% last snapshot, one cumulative histogram per function, is there from the start).
    [{_, B0, N0} | _] = Lines,
    {_, B1, N1} = lists:last(Lines),
    PerInterval = (B1 - B0) div max(1, N1 - N0),
    ft_budget_work:stop(Work),
    timer:sleep(1000),
    IdleRead = median(fun() -> {ok, _} = ferrotrace_tracer:session_summary(S) end),
    ok = ferrotrace:release(S),
    io:format("always_on schedulers=~b functions=~b tick_us=~b (busy node, wall) counts_read_us=~b (busy)"
              " summary_read_us=~b (busy) ~b (idle)"
              " ticks_per_s=~.1f snapshot_read_us=~b (busy) intervals=~b interval_bytes=~b"
              " bytes_per_interval=~b at_max_intervals_600=~b~n",
              [Schedulers, length(Calls), Tick, CountsRead, Idle, IdleRead, 1000 / ferrotrace_overhead:period(), Read, Count, Bytes,
               PerInterval, Bytes + (600 - Count) * PerInterval]).
line(S, Snapshots, T) ->
    #{budget := B, calls := Calls, memory := #{total := Total}} = ferrotrace:summary(S),
    {ok, #{collector_cpu_ns := CpuNs, elapsed_ms := Elapsed}} = ferrotrace_tracer:session_counts(S),
    {Bytes, Count} = snapshots(Snapshots),
    io:format("always_on t=~bs estimate=~.4f rate=~b shed_now=~b functions=~b session_bytes=~b"
              " intervals=~b interval_bytes=~b bytes_per_interval_average=~b"
              " collector_cpu_share=~.2f% (of one core, since the start)~n",
              [T, estimate(B), maps:get(rate, B), maps:get(shed_now, B), length(Calls), Total,
               Count, Bytes, Bytes div max(1, Count), CpuNs / 1.0e4 / max(1, Elapsed)]),
    {T, Bytes, Count}.

estimate(#{estimate := E}) when is_number(E) -> E;
estimate(_) -> 0.0.

%% The snapshot process's heap (after a collection: what it holds, not its garbage) and the
%% binaries it holds, and how many intervals it keeps.
snapshots(Pid) ->
    true = erlang:garbage_collect(Pid),
    {memory, Heap} = erlang:process_info(Pid, memory),
    {binary, Bins} = erlang:process_info(Pid, binary),
    Pid ! {read, self(), Ref = make_ref()},
    Count = receive {Ref, _Period, Intervals} -> length(Intervals) end,
    {Heap + lists:sum([Size || {_, Size, _} <- lists:ukeysort(1, Bins)]), Count}.

%% One budget tick's work on the counts it reads (the read is timed by the caller).
tick(Counts, Schedulers) ->
    C0 = ferrotrace_budget:new(0.05, #{schedulers => Schedulers, calibration => undefined}),
    M = measure(Counts),
    {_, C1} = ferrotrace_budget:tick(M, C0),
    ferrotrace_budget:tick(M#{elapsed_ms := maps:get(elapsed_ms, M) + 500}, C1).

measure(#{elapsed_ms := Elapsed, events := #{seen := Seen, sampled_out := Out}, calls := Calls}) ->
    #{elapsed_ms => Elapsed, traced => Seen - Out, refused => Out, collector_ns => 0,
      functions => [{MFA, C, undefined} || {MFA, C} <- Calls]}.

median(Fun) ->
    Times = lists:sort([element(1, timer:tc(Fun)) || _ <- lists:seq(1, 21)]),
    lists:nth(11, Times).
