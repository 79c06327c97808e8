%%% @private
%%% @doc What tracing costs the node, measured on the node: the work done per busy
%%% scheduler-second, before tracing and while it runs.
%%%
%%% A reduction is a unit of the node's work (a function call, a BIF's share), and tracing
%%% adds none: the time a traced call spends in the VM's breakpoint, in `enabled' and
%%% `trace' is time a scheduler is busy without reducing. So the reductions per busy
%%% scheduler-microsecond fall by the share of busy time tracing takes. Measured with two
%%% busy workers under a `{'_','_','_'}' session, the fall matched the work's own
%%% throughput window by window (0.59 against 0.59, 0.45 against 0.45, 0.87 against 0.87),
%%% where the model calibrated in an idle process read a fifth of it.
%%%
%%% `Cost = Utilization x (1 - E / E0)': the share of the schedulers' capacity that is
%%% tracing, `E0' the reductions per busy microsecond before tracing ({@link baseline/1}),
%%% `E' the same while it runs, both without ferrotrace's own processes' reductions
%%% (their busy time stays in: it is what ferrotrace costs too). A window of 50 to 250 ms
%%% moves by 10 to 15 % with nothing traced on a 2-core VM running busy workers, by up to
%%% 40 % on a server under a client's load: the budget learns from it only what moves with
%%% the session's cost (ferrotrace_in_situ), weighed by the noise the baseline showed.
%%%
%%% Needs the node's `scheduler_wall_time' flag, which counts per process: each process
%%% that measures turns it on for itself ({@link enable/0}); it goes off with the last one.
%%% A leaf but for ferrotrace_own (which processes are ferrotrace's).
-module(ferrotrace_nodeload).

-export([enable/0, sample/0, quick_sample/0, baseline/1, cost/3, used/2, slowdown/3]).

-type sample() :: #{reductions := non_neg_integer(), own := #{pid() => non_neg_integer()},
                    busy := non_neg_integer(), wall := non_neg_integer(),
                    at := integer(), cpu := non_neg_integer() | undefined}.
%% The node's counters at one moment: all reductions, each own process's, the
%% schedulers' busy and wall time (their units, summed over the schedulers online), the
%% monotonic time (ns) and the OS process's CPU time (ns, all its threads, user and
%% system; `undefined' where /proc cannot tell it, and in the baseline's samples).
-type baseline() :: #{per_busy := float(), utilization := float(), reductions_per_s := float(),
                      noise => float()}.
%% Before tracing: the reductions of the node's work per unit of busy scheduler time (the VM's unit), the
%% schedulers' utilization (0 to 1), all reductions per second, and how far the work per
%% busy time of each third of the window strays from their mean (`noise': the relative
%% standard deviation; 0.05 with two busy workers here, 0.3 to 0.4 on yaws under wrk).
-export_type([sample/0, baseline/0]).

%% The most a moment that costs the node can be taken to have slowed its work (slowdown/3).
-define(MAX_SLOWDOWN, 8.0).

%% @doc Turns the node's `scheduler_wall_time' on for the calling process (until it ends).
-spec enable() -> ok.
enable() ->
    _ = erlang:system_flag(scheduler_wall_time, true),
    ok.

%% @doc The node's counters now, its CPU time included; `undefined' where
%% `scheduler_wall_time' is off.
-spec sample() -> sample() | undefined.
sample() ->
    counters(cpu_ns()).

%% @doc The node's counters now without its CPU time (`cpu' is `undefined'): quick where
%% the schedulers are full, for windows too short for /proc's steps; `undefined' where
%% `scheduler_wall_time' is off.
-spec quick_sample() -> sample() | undefined.
quick_sample() ->
    counters(undefined).

%% The counters with the CPU time `Cpu' read just before (`undefined' for none: the
%% baseline's samples, 10 ms apart, go without: /proc's steps are as long, and on a node
%% whose schedulers are full a file read waits 2 to 7 ms for a dirty I/O thread's turn).
counters(Cpu) ->
    At = erlang:monotonic_time(nanosecond),
    case erlang:statistics(scheduler_wall_time) of
        Schedulers when is_list(Schedulers) ->
            Online = erlang:system_info(schedulers_online),
            {Busy, Wall} = lists:foldl(fun({I, B, W}, {B0, W0}) when I =< Online -> {B0 + B, W0 + W};
                                          (_, Acc) -> Acc
                                       end, {0, 0}, Schedulers),
            #{reductions => element(1, erlang:statistics(reductions)),
              own => maps:from_list([{P, R} || P <- ferrotrace_own:pids(),
                                               {reductions, R} <- [erlang:process_info(P, reductions)]]),
              busy => Busy, wall => Wall, at => At, cpu => Cpu};
        undefined ->
            undefined
    end.

%% @doc The node before tracing, over the next `Ms' ms (1 to 1000; the caller waits):
%% `undefined' where the schedulers were idle (nothing to compare with) or the flag could not be read.
-spec baseline(pos_integer()) -> baseline() | undefined.
baseline(Ms) when is_integer(Ms), Ms > 0, Ms =< 1000 ->
    ok = enable(),
    T0 = erlang:monotonic_time(microsecond),
    First = counters(undefined),
    Samples = [First | [receive after max(1, Ms div 3) -> counters(undefined) end || _ <- [1, 2, 3]]],
    T1 = erlang:monotonic_time(microsecond),
    case work(First, lists:last(Samples)) of
        {Utilization, PerBusy, Reductions} when Utilization > 0.05 ->
            #{per_busy => PerBusy, utilization => Utilization,
              reductions_per_s => Reductions * 1.0e6 / max(1, T1 - T0),
              noise => noise(PerBusy, thirds(Samples))};
        _ ->
            undefined
    end.

thirds([A, B | Rest]) ->
    case work(A, B) of
        {_, PerBusy, _} -> [PerBusy | thirds([B | Rest])];
        undefined -> thirds([B | Rest])
    end;
thirds(_) ->
    [].

%% The thirds' relative standard deviation around the whole window's work per busy time;
%% 1 where fewer than two thirds had busy time.
noise(Mean, Thirds) when length(Thirds) >= 2, Mean > 0 ->
    math:sqrt(lists:sum([(E / Mean - 1) * (E / Mean - 1) || E <- Thirds]) / (length(Thirds) - 1));
noise(_, _) ->
    1.0.

%% @doc The share of the schedulers' capacity that tracing took between samples `S0' and
%% `S1', against `Baseline': `Utilization x (1 - E / E0)'; below 0 where the work ran
%% faster than before (noise: kept, so that noise cancels over windows); `undefined'
%% without a baseline, a sample, or busy time between them.
-spec cost(baseline() | undefined, sample() | undefined, sample() | undefined) -> float() | undefined.
cost(#{per_busy := E0}, S0, S1) when is_map(S0), is_map(S1), E0 > 0 ->
    case work(S0, S1) of
        {Utilization, E, _} -> Utilization * (1 - E / E0);
        undefined -> undefined
    end;
cost(_Baseline, _S0, _S1) ->
    undefined.

%% @doc How many times slower the node's work ran between samples `S0' and `S1' than in
%% `Baseline': what a moment that costs every call (counting calls before a start, whose
%% breakpoints slowed yaws' workers by a third) took from the rates measured in it. The
%% work's reductions per second before over those between, bounded by the fall of its
%% reductions per busy time (a node with spare capacity serves the same work with more
%% busy time: its rates did not fall), from 1 to ?MAX_SLOWDOWN; 1.0 where it cannot be
%% measured (no baseline, a sample, or busy time between them).
-spec slowdown(baseline() | undefined, sample() | undefined, sample() | undefined) -> float().
slowdown(#{per_busy := E0, utilization := U0}, S0, S1) when is_number(E0), E0 > 0, is_number(U0), U0 > 0 ->
    case work(S0, S1) of
        {U, E, _} when E > 0, U > 0 -> max(1.0, min(?MAX_SLOWDOWN, min(E0 / E, E0 * U0 / (E * U))));
        _ -> 1.0
    end;
slowdown(_Baseline, _S0, _S1) ->
    1.0.

%% @doc The share of the schedulers' capacity the node used between samples `S0' and
%% `S1' (0 to 1, tracing's own time included): the OS process's CPU time over the
%% schedulers online times the time between them, where /proc tells it; else the
%% schedulers' busy share of their wall time; `undefined' without both samples. The CPU
%% time is the one that counts where the node shares its cores: yaws under wrk on two
%% cores kept its schedulers busy for 0.83 to 0.98 of their wall time while the node had
%% 1.25 cores of CPU (the client took the rest).
-spec used(sample() | undefined, sample() | undefined) -> float() | undefined.
used(#{cpu := C0, at := T0}, #{cpu := C1, at := T1}) when is_integer(C0), is_integer(C1), T1 > T0 ->
    max(0.0, min(1.0, (C1 - C0) / ((T1 - T0) * erlang:system_info(schedulers_online))));
used(#{busy := B0, wall := W0}, #{busy := B1, wall := W1}) when W1 > W0 ->
    max(0.0, min(1.0, (B1 - B0) / (W1 - W0)));
used(_S0, _S1) ->
    undefined.

%% The OS process's CPU time (user and system, all threads) in ns from /proc/self/stat
%% (fields 14 and 15, in clock ticks of USER_HZ: 100 on Linux's architectures, so 10 ms
%% steps; a tick of 250 ms or more reads it within a few percent), or `undefined'.
%% Nothing here waits for a process of normal priority, whose turn a budget's tick waited
%% for among busy processes (the first tick of a session where processes were born per
%% request: 70 to 85 ms, and the tick that sheds came as much later): prim_file, not
%% file:read_file/1 (the file server; 2.5 to 8.7 ms a read after, against 1.2 to 4), and
%% binary, not string (not loaded in every node: its first call waited for the code
%% server).
cpu_ns() ->
    try prim_file:read_file("/proc/self/stat") of
        {ok, Stat} ->
            %% The command's name, in parentheses, may hold spaces: the fields after the last ')'.
            {Close, 1} = lists:last(binary:matches(Stat, <<")">>)),
            After = binary:part(Stat, Close + 1, byte_size(Stat) - Close - 1),
            [UTime, STime] = lists:sublist(binary:split(After, [<<" ">>, <<"\n">>], [global, trim_all]), 12, 2),
            (binary_to_integer(UTime) + binary_to_integer(STime)) * 10000000;
        {error, _} ->
            undefined
    catch
        error:_ -> undefined
    end.

%% `{Utilization, WorkReductionsPerBusy, WorkReductions}' between two samples: the
%% reductions of every process but ferrotrace's own (those of an own process that ended
%% between them are lost, a few).
work(#{reductions := R0, own := Own0, busy := B0, wall := W0},
     #{reductions := R1, own := Own1, busy := B1, wall := W1}) when B1 > B0, W1 > W0 ->
    Own = lists:sum([R - maps:get(P, Own0, 0) || {P, R} <- maps:to_list(Own1)]),
    Work = max(0, R1 - R0 - Own),
    %% scheduler_wall_time counts in a unit of the VM's own (nanoseconds here): only
    %% ratios of it are used, busy over wall and one E over another.
    {(B1 - B0) / (W1 - W0), Work / (B1 - B0), Work};
work(_, _) ->
    undefined.
