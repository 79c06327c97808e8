%%% @doc The probe effect's calibration: what a traced call costs its caller on this node,
%%% with this VM and this tracer, measured when a `calls/2' session starts.
%%%
%%% A function of this module calls a small function of its own a few thousand times in a
%%% process of its own (with a busy process's heap), untraced and traced by a throwaway
%%% engine session of its own: with `exception_trace', as `calls/2' traces, then without
%%% return tracing. The differences, per call, are what the caller paid for the callee's
%%% call and return events
%%% (`call_ns', `return_ns'): what compensation takes out of a call per traced call made
%%% inside it (see "The probe effect" in doc/slow-calls.md). The throwaway session is released
%%% at the end, before the session's own patterns are set, so its events never reach the
%%% session's figures or its accounting; it is all over in a few milliseconds (`took_us').
%%%
%%% Traced and untraced rounds alternate, and each figure is the median of the differences
%%% of its round pairs (a traced round less the untraced one just before it): a load that
%%% comes and goes weighs on both of a pair alike, and a round slowed alone moves the median
%%% little. The process runs at high priority (ferrotrace_own). A result that is not
%%% plausible (a pair costing nothing, or more than `?MAX_PAIR_NS') is an error: the session
%%% then runs without compensation and its summary says why.
%%%
%%% == Measured once, reused, never in a loaded start's way ==
%%% A session's start uses the node's last calibration while it is younger than
%%% `?FRESH_MS' ({@link for_session/1}). An older one is still used, and measured anew in the
%%% background for the next starts. A node with none measures it at the start when its
%%% schedulers have room; where they are full (processes wait in their run queues), the
%%% start goes on without and the calibration comes after it (`pending': {@link after_start/2}
%%% measures it once the session runs and gives the session its costs,
%%% ferrotrace_tracer:session_set_compensation/3): among 50 busy processes it took 30 to
%%% 140 ms of a 250 ms start. A new measurement is checked against the last one: one whose
%%% pair or refused call differs by more than half or twice is measured again, and the
%%% median of the three is kept (a noisy moment over-compensated a caller to 0.45x of its
%%% untraced time). A node's first has no last one: it is the median of three measured in a
%%% row.
%%% {@link calibrate/0} measures anew on demand.
-module(ferrotrace_calibrate).

-export([measure/1, for_session/1, after_start/2, calibrate/0, remember_in_situ/1]).

%% A calibration's figures. `call_ns' and `return_ns': what a caller pays per traced call
%% for its call and its return event; `pair_ns': both, measured together; `discard_ns': a
%% call refused in `enabled_call' (per-call rate 0: the floor of a function with a pattern,
%% which the overhead budget's estimate uses, see ferrotrace_budget); `untraced_ns':
%% the untraced call; `calls': calls per phase; `took_us': how long it all took; `split':
%% `measured', or `halved' where noise put the call alone above the pair (each is then half
%% the pair); `median_of': how many measurements the figures are the median of, where more
%% than one (see calibrate/0). The map is open: later parts add their own keys.
-type calibration() :: #{call_ns := non_neg_integer(), return_ns := non_neg_integer(),
                         pair_ns := non_neg_integer(), discard_ns := non_neg_integer(),
                         untraced_ns := non_neg_integer(),
                         calls := pos_integer(), took_us := non_neg_integer(),
                         split := measured | halved, median_of => pos_integer(),
                         atom() => term()}.
-export_type([calibration/0]).

-define(DEFAULT_CALLS, 400).
-define(DEFAULT_ROUNDS, 15).
-define(DEFAULT_TIMEOUT, 2000).
%% A traced call pair dearer than this is no measurement of the tracer (the process was
%% descheduled throughout): refused.
-define(MAX_PAIR_NS, 100000).
-define(MFA, {?MODULE, callee, 1}).
%% How long a node's calibration is reused (ms), and where it is kept (a table of the
%% registry's tables' owner: ferrotrace_registry).
-define(FRESH_MS, 300000).
%% A node's first calibration, with no last one to check it against: the median of this many
%% (one measured among 50 busy processes while a session ran read a pair at 0.8 to 2.3 us,
%% most at 1.0 to 1.4: an outlier halved what the budget let that session count).
-define(FIRST_MEASUREMENTS, 3).
-define(TABLE, ferrotrace_calibration).
%% The calibrating process's heap (words): a busy process's, not a fresh one's. The VM
%% builds each event's terms on the tracee's heap, so the collections tracing causes depend
%% on it: 575 ns per pair with the default 233 words, 505 with 4096, here.
-define(HEAP_WORDS, 4096).
%% How often, and how many times, a calibration after the start looks whether the session's
%% steps are over (see settled/2).
-define(SETTLED_MS, 50).
-define(SETTLED_TRIES, 100).
%% A calibration after the start: tries, and the wait before the next (see measured/1).
-define(MEASURE_TRIES, 3).
-define(MEASURE_AGAIN_MS, 200).
-define(PAIR, [{'_', [], [{exception_trace}]}]).
-define(CALL_ONLY, [{'_', [], []}]).

%% @doc Measures what a traced call costs its caller, in a process of its own: `Options' is
%% a map of `calls' (per round, default 400, 100 to 20000), `rounds' (per phase, default
%% 15, 1 to 51) and `timeout' (ms, default 2000, 1 to 10000), any of them left out.
%% `{ok, Calibration}', or `{error, Reason}': bad options, `busy' (another calibration holds the callee for too
%% long), `timeout', `{traced_by_another_tool, _}' (the process could not be traced by the
%% throwaway session), `{implausible, Calibration}', `{events_missing, Expected, Seen}', or
%% what the engine answered.
-spec measure(map()) -> {ok, calibration()} | {error, term()}.
measure(Options) when is_map(Options) ->
    Calls = maps:get(calls, Options, ?DEFAULT_CALLS),
    Rounds = maps:get(rounds, Options, ?DEFAULT_ROUNDS),
    Timeout = maps:get(timeout, Options, ?DEFAULT_TIMEOUT),
    case maps:keys(maps:without([calls, rounds, timeout], Options)) of
        [] when is_integer(Calls), Calls >= 100, Calls =< 20000,
                is_integer(Rounds), Rounds >= 1, Rounds =< 51,
                is_integer(Timeout), Timeout >= 1, Timeout =< 10000 ->
            run(Calls, Rounds, Timeout);
        _ ->
            {error, {bad_options, Options,
                     <<"a map of calls (100 to 20000), rounds (1 to 51), timeout (ms, 1 to 10000)">>}}
    end;
measure(Options) ->
    {error, {bad_options, Options, <<"a map of calls, rounds and timeout">>}}.

%% @doc What a `calls/2' session with `compensate => Compensate' gives the engine and shows
%% in its summary: `{ok, EngineOptions, Info}', with `compensate_call_ns' and
%% `compensate_return_ns' if compensating, and `Info' `#{calibration => Calibration |
%% {error, Reason} | pending, compensated => boolean()}'; `{error, Reason}' for a
%% `Compensate' other than `true' or `false'. A failed calibration is not an error: the
%% session runs without. `pending': the node has none and its schedulers are full; a
%% calibration with `stale => true': the node's last, older than five minutes. The caller
%% measures either anew once the session runs ({@link calibrate/0}).
-spec for_session(term()) -> {ok, map(), map()} | {error, term()}.
for_session(Compensate) when is_boolean(Compensate) ->
    case node_calibration() of
        {ok, #{call_ns := CallNs, return_ns := ReturnNs} = Calibration} when Compensate ->
            {ok, #{compensate_call_ns => CallNs, compensate_return_ns => ReturnNs},
             #{calibration => Calibration, compensated => true}};
        {ok, Calibration} ->
            {ok, #{}, #{calibration => Calibration, compensated => false}};
        pending ->
            {ok, #{}, #{calibration => pending, compensated => false}};
        {error, _} = Error ->
            {ok, #{}, #{calibration => Error, compensated => false}}
    end;
for_session(Other) ->
    {error, {bad_option, {compensate, Other, <<"true or false">>}}}.

%% @doc The node's calibration measured anew once session `Id' runs, in a process of
%% ferrotrace's own, where {@link for_session/1} found it `pending' (none yet, the
%% schedulers full) or `stale' (older than five minutes): a start does not wait for it. Its
%% keeper starts it with the start's settings (ferrotrace_options:settings()). A pending one
%% is given to the session: its compensation from then on (`compensate => true' and no cost
%% set by hand), its summary's `calibration', and the budget's costs at its next tick
%% (ferrotrace_overhead). A stale one stays the session's; the new one is the next starts'.
%% It outlives the keeper: the node's calibration serves the next starts too.
-spec after_start(ferrotrace_tracer:session_id(), map()) -> ok.
after_start(Id, #{calibration := #{calibration := Calibration}} = Settings)
  when is_integer(Id), Calibration =:= pending; is_integer(Id), is_map(Calibration), is_map_key(stale, Calibration) ->
    Engine = maps:get(engine, Settings, #{}),
    Compensate = maps:get(compensate, Settings, none) =:= true
        andalso not (is_map(Engine) andalso (is_map_key(compensate_call_ns, Engine) orelse is_map_key(compensate_return_ns, Engine))),
    _ = spawn_opt(fun() ->
                          ok = ferrotrace_own:enter(),
                          ok = settled(Id, ?SETTLED_TRIES),
                          Measured = measured(?MEASURE_TRIES),
                          case Calibration of
                              pending -> calibrated(Id, Compensate, Measured);
                              _ -> ok
                          end
                  end, ferrotrace_own:spawn_options()),
    ok;
after_start(_Id, _Settings) ->
    ok.

%% A calibration, tried again a little later where one failed: on OTP 25 and 26 a session
%% starting meanwhile flags every process before it takes its flags off ferrotrace's own,
%% the calibrating one among them.
measured(Tries) ->
    case calibrate() of
        {error, _} when Tries > 1 -> timer:sleep(?MEASURE_AGAIN_MS), measured(Tries - 1);
        Result -> Result
    end.

%% The session's steps after the start are over (`settling' false), or `Tries' looks later:
%% on OTP 25 and 26 its last step takes the patterns off ferrotrace's own modules, the
%% calibration's callee among them (one pattern per function on the node), and a
%% calibration measured meanwhile missed half its events.
settled(_Id, 0) ->
    ok;
settled(Id, Tries) ->
    case ferrotrace_registry:lookup(Id) of
        {ok, Id, _Keeper, #{settling := true}} -> timer:sleep(?SETTLED_MS), settled(Id, Tries - 1);
        _ -> ok
    end.

%% Only a running session takes it: a stopped one's figures stay as they were when it
%% stopped (two reads of them agree), its calibration `pending'.
calibrated(Id, Compensate, Measured) ->
    case ferrotrace_tracer:session_status(Id) of
        {ok, #{status := running}} -> landed(Id, Compensate, Measured);
        _ -> ok
    end.

landed(Id, true, {ok, #{call_ns := CallNs, return_ns := ReturnNs} = Calibration}) ->
    %% An error: the session was released meanwhile.
    case ferrotrace_tracer:session_set_compensation(Id, CallNs, ReturnNs) of
        ok -> ferrotrace_registry:update(Id, #{calibration => Calibration, compensated => true});
        {error, _} -> ok
    end;
landed(Id, _Compensate, {ok, Calibration}) ->
    ferrotrace_registry:update(Id, #{calibration => Calibration});
landed(Id, _Compensate, {error, _} = Error) ->
    ferrotrace_registry:update(Id, #{calibration => Error}).

%% @doc Measures the node's calibration anew (as a session's start would when the last one
%% is older than five minutes), keeps it for the next starts and answers it: checked
%% against the last one, or the median of three where the node has none.
-spec calibrate() -> {ok, calibration()} | {error, term()}.
calibrate() ->
    Measured = case stored() of
                   {ok, _At, Last} -> checked(measure(#{}), Last);
                   none -> median(measurements(?FIRST_MEASUREMENTS))
               end,
    case Measured of
        {ok, Calibration} = Ok ->
            _ = store(Calibration),
            Ok;
        {error, _} = Error ->
            Error
    end.

%% The node's calibration: the last one while it is fresh; an older one, `stale' (for the
%% caller to measure anew); with none, a new one, or `pending' while the schedulers are full. With
%% the factor the node's last budgeted session learned (`in_situ', ferrotrace_budget) while
%% that is fresh.
node_calibration() ->
    Calibration = case stored() of
                      {ok, At, Last} ->
                          case erlang:monotonic_time(millisecond) - At < ?FRESH_MS of
                              true -> {ok, Last#{reused => true}};
                              false -> {ok, Last#{reused => true, stale => true}}
                          end;
                      none ->
                          case schedulers_full() of
                              true -> pending;
                              false -> calibrate()
                          end
                  end,
    case {Calibration, lookup(in_situ)} of
        {{ok, C}, {ok, At2, Factor}} ->
            case erlang:monotonic_time(millisecond) - At2 < ?FRESH_MS of
                true -> {ok, C#{in_situ => Factor}};
                false -> Calibration
            end;
        _ ->
            Calibration
    end.

%% @doc Keeps `Factor', what a call costs on this node against its calibrated cost as a
%% budgeted session learned it (ferrotrace_budget:learned/1), for the next sessions' starts
%% in the next five minutes.
-spec remember_in_situ(term()) -> ok | {error, {bad_factor, term()}}.
remember_in_situ(Factor) when is_float(Factor), Factor >= 1.0, Factor =< 100.0 ->
    try ets:insert(?TABLE, {in_situ, erlang:monotonic_time(millisecond), Factor}) of
        true -> ok
    catch error:badarg -> ok   % no registry's tables yet
    end;
remember_in_situ(Other) ->
    {error, {bad_factor, ferrotrace_hint:brief(Other)}}.

%% Whether processes wait for every scheduler: the run queues hold at least one process per
%% scheduler online, or more processes than schedulers are at work (running or runnable),
%% the caller aside, at any of three looks 1 ms apart. The run queues alone, read once, were
%% short of that now and then among 50 busy processes (waiting for a server they call, or
%% for the OS to run the schedulers' threads), and a node's first start then measured its
%% calibration before it went on (45 ms more; 780 ms on a loaded machine).
schedulers_full() ->
    schedulers_full(erlang:system_info(schedulers_online), 3).

schedulers_full(Online, Looks) ->
    case erlang:statistics(total_run_queue_lengths) >= Online
             orelse erlang:statistics(total_active_tasks) - 1 > Online of
        true -> true;
        false when Looks > 1 -> receive after 1 -> schedulers_full(Online, Looks - 1) end;
        false -> false
    end.

%% A measurement far from the last one (under half, or over twice its pair or its refused
%% call: the budget counts both) is measured again; the median of the three is kept. (An
%% on-demand calibration among busy processes read a refused call at 1763 ns, the stored
%% one 221, its pair within bounds.)
checked({ok, New} = Measured, Previous) ->
    case far(pair_ns, New, Previous) orelse far(discard_ns, New, Previous) of
        true ->
            case measure(#{}) of
                {ok, _} = Again ->
                    {ok, Median} = median([Measured, {ok, Previous}, Again]),
                    {ok, Median#{remeasured => true}};
                {error, _} ->
                    {ok, Previous}
            end;
        false ->
            Measured
    end;
checked(Measured, _Previous) ->
    Measured.

far(Key, Measured, Last) ->
    case {Measured, Last} of
        {#{Key := New}, #{Key := Old}} -> New * 2 < Old orelse New > Old * 2;
        _ -> false
    end.

%% `N' measurements in a row, ended by a timeout: a start on an idle node waits for its
%% node's first, and three timeouts would be three times the wait.
measurements(0) ->
    [];
measurements(N) ->
    case measure(#{}) of
        {error, timeout} = Timeout -> [Timeout];
        Result -> [Result | measurements(N - 1)]
    end.

%% The median by pair of the measurements that succeeded (the lower of two), its refused
%% call the median of theirs (measured in rounds of its own), else the first error.
median(Results) ->
    case lists:sort(fun(#{pair_ns := A}, #{pair_ns := B}) -> A =< B end, [C || {ok, C} <- Results]) of
        [] ->
            hd(Results);
        Sorted ->
            Middle = (length(Sorted) + 1) div 2,
            Discard = lists:nth(Middle, lists:sort([D || #{discard_ns := D} <- Sorted])),
            {ok, (lists:nth(Middle, Sorted))#{discard_ns := Discard, median_of => length(Sorted)}}
    end.

stored() ->
    lookup(node).

lookup(Key) ->
    try ets:lookup(?TABLE, Key) of
        [{Key, At, Value}] -> {ok, At, Value};
        [] -> none
    catch error:badarg -> none
    end.

store(Calibration) ->
    try ets:insert(?TABLE, {node, erlang:monotonic_time(millisecond), maps:without([reused, stale, remeasured, in_situ], Calibration)})
    catch error:badarg -> false
    end.

%% The calibration's callee: a little arithmetic, so that the call is a real one. Local
%% (the loop's calls are local calls, as most of a traced module's are).
-spec callee(integer()) -> integer().
callee(X) ->
    (X * 7 + 3) rem 1000003.

%%--------------------------------------------------------------------------------------
%% The measurement, in a process of its own

run(Calls, Rounds, Timeout) ->
    {Parent, Ref} = {self(), make_ref()},
    {Pid, Monitor} = spawn_opt(fun() -> ok = ferrotrace_own:enter(), Parent ! {Ref, locked(Calls, Rounds)} end,
                               [monitor, {min_heap_size, ?HEAP_WORDS} | ferrotrace_own:spawn_options()]),
    receive
        {Ref, Result} ->
            erlang:demonitor(Monitor, [flush]),
            Result;
        {'DOWN', Monitor, process, Pid, Reason} ->
            {error, {calibration_failed, ferrotrace_hint:brief(Reason)}}
    after Timeout ->
        exit(Pid, kill),
        receive {'DOWN', Monitor, process, Pid, _} -> ok end,
        %% Sent just before the kill, perhaps.
        receive {Ref, _} -> ok after 0 -> ok end,
        {error, timeout}
    end.

%% One calibration at a time on a node: the callee's trace pattern is the node's (OTP 25
%% and 26). The name is the lock; a process holding it is waited for a little.
locked(Calls, Rounds) ->
    locked(Calls, Rounds, 20).

locked(_Calls, _Rounds, 0) ->
    {error, busy};
locked(Calls, Rounds, Tries) ->
    try register(?MODULE, self()) of
        true -> calibrate(Calls, Rounds)
    catch
        error:badarg ->
            timer:sleep(5),
            locked(Calls, Rounds, Tries - 1)
    end.

calibrate(Calls, Rounds) ->
    Started = erlang:monotonic_time(),
    case ferrotrace_code:ensure_tracer() of
        {module, _} ->
            %% Small rings: one thread, a few thousand events between drains.
            case ferrotrace_tracer:new_session(#{ring_size => 16384, duration => 10000, aggregators => 1,
                                                 max_functions => 10}, self()) of
                {ok, Id} ->
                    try traced(Id, Calls, Rounds) of
                        {ok, Phases} -> figures(Id, Phases, Calls, Rounds, Started);
                        {error, _} = Error -> Error
                    after
                        _ = ferrotrace_tracer:release_session(Id)
                    end;
                {error, _} = Error ->
                    Error
            end;
        {error, Reason} ->
            {error, {nif_not_loaded, Reason}}
    end.

%% The four phases' figures (ns per call): untraced, traced with return tracing, traced
%% without, and every call refused in `enabled_call'. Traced and untraced rounds alternate
%% (the process's trace flag goes on and off, which is cheap; a pattern change is not), so
%% that a load that comes and goes weighs on both alike; each phase's figure is its fastest
%% round, the one least disturbed.
traced(Id, Calls, Rounds) ->
    case ferrotrace_backend:trace_self(Id) of
        {ok, Tracing} ->
            try
                ok = ferrotrace_backend:self_pattern(Tracing, ?MFA, ?PAIR),
                {Untraced1, Pair} = alternate(Tracing, Calls, Rounds),
                ok = ferrotrace_backend:self_pattern(Tracing, ?MFA, ?CALL_ONLY),
                %% Calls without returns are a loop's to the engine: counted, and kept out
                %% of the frame bound, which would refuse them past 120.
                ok = ferrotrace_tracer:session_add_loops(Id, [?MFA]),
                {Untraced2, CallOnly} = alternate(Tracing, Calls, Rounds),
                %% Every call refused in enabled_call (per-call rate 0): the floor a call
                %% pays while its function has a pattern, for the overhead budget.
                ok = ferrotrace_tracer:session_set_call_sample(Id, 0),
                {Untraced3, Discard} = alternate(Tracing, Calls, Rounds),
                {ok, {lists:min([Untraced1, Untraced2, Untraced3]), Pair, CallOnly, Discard}}
            after
                ferrotrace_backend:untrace_self(Tracing, ?MFA)
            end;
        {error, _} = Error ->
            Error
    end.

%% `{Untraced, Traced}' per call: the fastest untraced round, and that plus the median of
%% the pairs' differences.
alternate(Tracing, Calls, Rounds) ->
    Times = [{begin ok = ferrotrace_backend:self_flag(Tracing, false), round_ns(Calls) end,
              begin ok = ferrotrace_backend:self_flag(Tracing, true), round_ns(Calls) end}
             || _ <- lists:seq(1, Rounds)],
    ok = ferrotrace_backend:self_flag(Tracing, false),
    Untraced = lists:min([U || {U, _} <- Times]),
    Differences = lists:sort([T - U || {U, T} <- Times]),
    Median = lists:nth((length(Differences) + 1) div 2, Differences),
    {Untraced / Calls, (Untraced + Median) / Calls}.

round_ns(Calls) ->
    T0 = erlang:monotonic_time(nanosecond),
    _ = loop(Calls, 0),
    erlang:monotonic_time(nanosecond) - T0.

loop(0, Acc) -> Acc;
loop(N, Acc) -> loop(N - 1, Acc + callee(N)).

%% The figures, once every traced call was seen by the throwaway session (a call that went
%% elsewhere, or was dropped, would make them wrong).
figures(Id, {Untraced, Pair, CallOnly, Discard}, Calls, Rounds, Started) ->
    _ = ferrotrace_tracer:stop_session(Id, user),
    Expected = 2 * Calls * Rounds,
    Seen = case ferrotrace_tracer:session_summary(Id) of
               {ok, #{calls := Entries}} -> lists:sum([C || #{mfa := ?MFA, count := C} <- Entries]);
               _ -> 0
           end,
    PairNs = round(Pair - Untraced),
    CallNs0 = round(CallOnly - Untraced),
    {CallNs, ReturnNs, Split} = case CallNs0 >= 0 andalso CallNs0 =< PairNs of
                                    true -> {CallNs0, PairNs - CallNs0, measured};
                                    false -> {PairNs div 2, PairNs - PairNs div 2, halved}
                                end,
    Took = erlang:convert_time_unit(erlang:monotonic_time() - Started, native, microsecond),
    Calibration = #{call_ns => CallNs, return_ns => ReturnNs, pair_ns => PairNs,
                    discard_ns => max(0, round(Discard - Untraced)),
                    untraced_ns => round(Untraced), calls => Calls * Rounds, took_us => Took,
                    split => Split},
    if
        Seen =/= Expected -> {error, {events_missing, Expected, Seen}};
        PairNs =< 0; PairNs > ?MAX_PAIR_NS -> {error, {implausible, Calibration}};
        true -> {ok, Calibration}
    end.

