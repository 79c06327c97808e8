%%% @doc What the always-on mode costs: a `{'_', '_', '_'}' session with `duration =>
%%% infinity', `max_overhead => 0.05' and `intervals => 1000' on a node whose schedulers are
%%% busy with ft_budget_work (worker processes through module functions, funs, apply and a
%%% gen_server). Every 10 s it prints the budget (estimate, rate, functions shed), the
%%% functions with figures, the session's memory (`summary/1''s `memory.total') and the
%%% interval snapshots' (the snapshot process: heap and binaries) with the bytes per interval;
%%% at the end the cost of one budget tick (a summary read and the controller) and of one
%%% interval snapshot read, medians of 21, and what a day of it holds (at most
%%% `max_intervals' intervals: past them neighbours merge). Run by `make always-on' (about
%%% 70 s); `ferrotrace_always_on:main([Seconds])' runs for another length.
-module(ferrotrace_always_on).
-export([main/0, main/1]).

-spec main() -> ok.
main() ->
    main([60]).

-spec main([pos_integer()]) -> ok.
main([Seconds]) ->
    {module, _} = code:ensure_loaded(ft_budget_work),
    Schedulers = erlang:system_info(schedulers_online),
    Work = ft_budget_work:start(2 * Schedulers),
    {ok, S} = ferrotrace:calls({'_', '_', '_'}, #{duration => infinity, owner => self(), max_overhead => 0.05,
                                                  intervals => 1000}),
    {ok, _, _, #{intervals := Snapshots}} = ferrotrace_registry:lookup(S),
    [begin timer:sleep(10000), line(S, Snapshots, T * 10) end || T <- lists:seq(1, Seconds div 10)],
    #{calls := Calls} = ferrotrace:summary(S),
    Tick = median(fun() -> {ok, Summary} = ferrotrace_tracer:session_summary(S), tick(Summary, Schedulers) end),
    Read = median(fun() -> {ok, _} = ferrotrace_tracer:session_histograms_bytes(S) end),
    {Bytes, Count} = snapshots(Snapshots),
    PerInterval = Bytes div max(1, Count),
    io:format("always_on schedulers=~b functions=~b tick_us=~b ticks_per_s=2 tick_share=~.4f%"
              " snapshot_read_us=~b bytes_per_interval=~b day_at_1s_max_intervals=600 day_bytes=~b~n",
              [Schedulers, length(Calls), Tick, 2 * Tick / (Schedulers * 1.0e6) * 100, Read, PerInterval,
               600 * PerInterval]),
    ok = ferrotrace:release(S),
    ft_budget_work:stop(Work).

line(S, Snapshots, T) ->
    #{budget := B, calls := Calls, memory := #{total := Total}} = ferrotrace:summary(S),
    {Bytes, Count} = snapshots(Snapshots),
    io:format("always_on t=~bs estimate=~.4f rate=~b shed_now=~b functions=~b session_bytes=~b"
              " intervals=~b interval_bytes=~b bytes_per_interval=~b~n",
              [T, estimate(B), maps:get(rate, B), maps:get(shed_now, B), length(Calls), Total,
               Count, Bytes, Bytes div max(1, Count)]).

estimate(#{estimate := E}) when is_number(E) -> E;
estimate(_) -> 0.0.

%% The snapshot process's heap and the binaries it holds, and how many intervals it keeps.
snapshots(Pid) ->
    {memory, Heap} = erlang:process_info(Pid, memory),
    {binary, Bins} = erlang:process_info(Pid, binary),
    Pid ! {read, self(), Ref = make_ref()},
    Count = receive {Ref, _Period, Intervals} -> length(Intervals) end,
    {Heap + lists:sum([Size || {_, Size, _} <- lists:ukeysort(1, Bins)]), Count}.

%% One budget tick's work on a summary (the read is timed by the caller).
tick(Summary, Schedulers) ->
    C0 = ferrotrace_budget:new(0.05, #{schedulers => Schedulers, calibration => undefined}),
    M = measure(Summary),
    {_, C1} = ferrotrace_budget:tick(M, C0),
    ferrotrace_budget:tick(M#{elapsed_ms := maps:get(elapsed_ms, M) + 500}, C1).

measure(#{elapsed_ms := Elapsed, events := #{seen := Seen, sampled_out := Out}, calls := Calls}) ->
    #{elapsed_ms => Elapsed, traced => Seen - Out, refused => Out, collector_ns => 0,
      functions => [{MFA, C, maps:get(mean, Call, undefined)} || #{mfa := MFA, count := C} = Call <- Calls]}.

median(Fun) ->
    Times = lists:sort([element(1, timer:tc(Fun)) || _ <- lists:seq(1, 21)]),
    lists:nth(11, Times).
