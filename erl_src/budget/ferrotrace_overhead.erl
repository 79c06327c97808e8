%%% @private
%%% @doc The overhead budget of a session (`max_overhead => Fraction'): a small process beside
%%% the keeper that, every ?PERIOD ms while the session runs (every ?FIRST ms for its first
%%% ?FAST ticks, to settle soon: a broad session on a busy node costs most before, and for
%%% ?FAST_AFTER_PROBE ticks after functions are taken back), reads the session's counters,
%%% asks the controller (`ferrotrace_budget') what to change, and changes it: the per-call
%%% sampling rate (`ferrotrace_tracer:session_set_call_sample/2') and, through the keeper,
%%% the patterns of functions shed (`ferrotrace_session:shed/2', `unshed/2'). Started with
%%% the session when it has a budget (no process, no tick otherwise), it ends with the
%%% keeper or when the session stops; what it found is in the session's registry info
%%% (`budget'), which the summary shows.
%%%
%%% It also sets the session's fuse on the schedulers (ferrotrace_core::fuse, from
%%% ferrotrace_budget:fuse/1; the keeper armed it before the first flag, arm_first/2) anew
%%% at each tick; reads, every ?POLL ms, how many
%%% processes the fuse untraced (one static word, no session memory) and ticks at once when
%%% that rises: the tick has the VM count the calls of the functions seen for ?COUNT_MS
%%% (trip_count/4; where it cannot, it watches those processes for ?HIDDEN_MS, their
%%% reductions a second standing for the calls they make unseen) and the controller sheds
%%% the hottest; and it traces
%%% them again (through the keeper, ferrotrace_backend:retrace/4) in a later tick that
%%% shed nothing and left room.
%%%
%%% Cost per tick: one `ferrotrace_tracer:session_counts/1' (the collector's lock while it
%%% brings the counters up to date, then a pair per function and no histogram; the whole
%%% summary it read before took 4 to 47 ms of a dirty scheduler on yaws under load, several
%%% times a second in the first seconds) and the controller's arithmetic over the functions
%%% (0.2 ms); a shed or a restore is one pattern change per function (at most 200 a tick),
%%% each waiting for the VM's code barrier. Like every process of ferrotrace's own, it is
%%% never traced (ferrotrace_own).
-module(ferrotrace_overhead).

-export([start/3, arm_first/2, period/0, waiting/2, count_modules/1, counted/3]).

-define(PERIOD, 1000).
%% The first ticks: one at once (it takes the counters in), two after ?START ms each (a
%% session starts cautious and opens up as soon as the load is seen to allow), then ?FAST
%% every ?FIRST ms.
-define(START, 100).
-define(FIRST, 250).
-define(FAST, 8).
%% After a take-back's tick (?START ms later), this many ticks ?FIRST ms apart.
-define(FAST_AFTER_PROBE, 3).
%% How often the fuse's count of untraced processes is read (ms), and the least time between
%% a tick and one it brings forward: load that arrives between ticks is untraced by the fuse
%% within milliseconds, and its functions are shed at the next tick, now. (At 20 ms, and a
%% count of 20 ms, load arriving with a start had its hottest patterns off 60 to 80 ms
%% after; at 10 and 10, 36 to 65: `make shed-latency'.)
-define(POLL, 10).
%% Processes the fuse untraced are traced again, at most this many a tick, at most this many
%% times each (then they stay untraced).
-define(RETRACE_MAX, 100).
-define(RETRACE_TIMES, 3).
%% The most processes the fuse untraced kept waiting to be traced again, and read for their
%% hidden calls in a tick: past these, the rest stay untraced (counted). Processes born per
%% request were untraced by the tens of thousands a second; each tick walked them all.
-define(WAITING_MAX, 1000).
-define(HIDDEN_PIDS, 200).
%% How long a tick watches the processes the fuse untraced to read how many calls they make.
-define(HIDDEN_MS, 10).
%% After a trip, how long the VM counts the calls of the functions seen (ms), in at most
%% this many modules (each module's counters are one more change within the barrier's
%% spinners, 40 to 70 us: see count_modules/1). A function that 10 ms does not count once
%% is called under 100 times a second: under 0.01 % of a scheduler at the model's cost of
%% a traced call.
-define(COUNT_MS, 10).
-define(COUNT_MODULES, 16).

-record(s, {id :: ferrotrace_tracer:session_id(),
            keeper :: pid(),
            monitor :: reference(),
            control :: ferrotrace_budget:state(),
            ticks = 0 :: non_neg_integer(),
            %% This tick took a shed function back.
            probing = false :: boolean(),
            %% Ticks stay ?FIRST ms apart until this one (past a take-back, see loop/1).
            fast_until = ?FAST :: non_neg_integer(),
            %% The factor last kept for the node's next starts.
            learned = none :: float() | none,
            saved = #{} :: #{mfa() => ferrotrace_shed:saved()},
            %% The next tick's timer, and when the last tick began (ms).
            timer = none :: reference() | none,
            ticked_at = 0 :: integer(),
            %% The fuse's count of untraced processes as last polled.
            untraced = 0 :: non_neg_integer(),
            %% Processes the fuse untraced, to trace again, with how often it did.
            untraced_pids = #{} :: #{pid() => pos_integer()},
            retraced = 0 :: non_neg_integer(),
            left_untraced = 0 :: non_neg_integer(),
            %% The fuse's count of untraced processes, and each function's sampled calls, as
            %% the last tick read them (for trip_count/4).
            ticked_untraced = 0 :: non_neg_integer(),
            ticked_calls = #{} :: #{mfa() => non_neg_integer()}}).

%% @doc The tick's period, in ms.
-spec period() -> pos_integer().
period() -> ?PERIOD.

%% @doc Starts the budget `Budget' of session `Id' (kept by `Keeper'), at the per-call
%% rate `Rate' with the functions `Held' held back from the start (ferrotrace_budget:first/2,
%% with their calls per second: those whose patterns the keeper took off, in the registry's
%% `held', are shed; the first tick sheds the others), and the node's work measured untraced before the start (`Baseline',
%% ferrotrace_nodeload:baseline/1, or `undefined'): each tick measures the cost on the node
%% against it. Its calibration, if the session has one, is read from the registry.
%% `{error, badarg}' for other arguments. `{default, Fraction}' is the budget a spec with a
%% `'_' module has when none is given.
-spec start(ferrotrace_tracer:session_id(), pid(),
            number() | {number() | {default, number()}, pos_integer(), [{mfa(), number()}],
                        ferrotrace_nodeload:baseline() | undefined}) ->
          pid() | {error, badarg}.
start(Id, Keeper, Budget) when is_number(Budget) ->
    start(Id, Keeper, {Budget, 1, [], undefined});
start(Id, Keeper, {Budget0, Rate, Held0, Baseline}) when is_integer(Id), is_pid(Keeper), node(Keeper) =:= node(),
                                                         is_integer(Rate), Rate >= 1, is_list(Held0),
                                                         is_map(Baseline) orelse Baseline =:= undefined ->
    {Budget, Default} = fraction(Budget0),
    case ferrotrace_budget:check(Budget) of
        ok ->
            spawn_opt(fun() ->
                          ok = ferrotrace_own:enter(),
                          ok = ferrotrace_nodeload:enable(),
                          Monitor = monitor(process, Keeper),
                          Info = info(Id),
                          Saved = maps:from_list([{MFA, Entry} || {MFA, _, _} = Entry <- info(Info, held, [])]),
                          Held = [{MFA, R} || {MFA, R} <- Held0, is_map_key(MFA, Saved), is_number(R)],
                          %% Those the start had no time to take off: the first tick sheds them.
                          Pending = [{MFA, R} || {MFA, R} <- Held0, not is_map_key(MFA, Saved), is_number(R)],
                          Control = control(Info, {Budget, Default}, Rate, Held, Pending, Baseline),
                          publish(Id, Control),
                          arm(Id, Control),
                          erlang:send_after(?POLL, self(), poll),
                          loop(#s{id = Id, keeper = Keeper, monitor = Monitor, control = Control,
                                  saved = maps:with([MFA || {MFA, _} <- Held], Saved),
                                  %% The first tick takes the counters in at once: a
                                  %% tick the fuse brings forward then decides.
                                  timer = erlang:send_after(0, self(), tick),
                                  ticked_at = erlang:monotonic_time(millisecond)})
                  end, ferrotrace_own:spawn_options());
        {error, _} ->
            {error, badarg}
    end;
start(_Id, _Keeper, _Budget) ->
    {error, badarg}.

%% @doc Arms the fuse of session `Id' for its budget (as start/3 takes it) before its
%% processes are flagged, so that it holds from the session's first call: the budget's
%% process, started once they are (start/3), arms it again, then at each tick. Armed by
%% that process alone, the fuse waited for it to be scheduled: behind the keeper's work on
%% the same scheduler, its first moment came 1 to 60 ms after calls/2 returned, and load
%% arriving with the start ran at 0.02 of its untraced speed until then.
%% `{error, badarg}' for a budget start/3 would refuse; else what
%% ferrotrace_tracer:session_set_fuse/2 answers (`{error, not_running}' for a session that
%% is not running).
-spec arm_first(ferrotrace_tracer:session_id(),
                {number() | {default, number()}, pos_integer(), [{mfa(), number()}],
                 ferrotrace_nodeload:baseline() | undefined}) ->
          ok | {error, badarg | not_running | {bad_fuse, term(), binary()}}.
arm_first(Id, {Budget0, Rate, Held, Baseline}) when is_integer(Id), is_integer(Rate), Rate >= 1, is_list(Held),
                                                    is_map(Baseline) orelse Baseline =:= undefined ->
    {Budget, Default} = fraction(Budget0),
    case ferrotrace_budget:check(Budget) of
        ok ->
            Control = control(info(Id), {Budget, Default}, Rate, [], [], Baseline),
            ferrotrace_tracer:session_set_fuse(Id, ferrotrace_budget:fuse(Control));
        {error, _} -> {error, badarg}
    end;
arm_first(_Id, _Budget) ->
    {error, badarg}.

%% A budget as the start gives it, `{Fraction, Default}': whether it is a `'_'' spec's default.
fraction({default, Fraction}) -> {Fraction, true};
fraction(Fraction) -> {Fraction, false}.

%% The controller of a budget (`{Fraction, Default}'), from the session's registry info
%% (its calibration) and what the start chose.
control(Info, {Budget, Default}, Rate, Held, Pending, Baseline) ->
    ferrotrace_budget:new(Budget, #{schedulers => erlang:system_info(schedulers_online),
                                    calibration => info(Info, calibration, undefined),
                                    rate => Rate, default => Default, held => Held,
                                    pending => Pending, baseline => Baseline}).

%% What the registry keeps of the session under `Key' (`calibration', from
%% ferrotrace_calibrate; `held', the patterns the keeper took off at the start; `settling',
%% whether the steps after the start are still going on; `reading', whether the loops'
%% reading after the start still runs; `generated_left_out', the generated functions its
%% steps took off), or `Default'; from the session's
%% info as info/1 read it.
info(#{} = Info, Key, Default) ->
    case Info of
        #{Key := Value} when is_map(Value); is_list(Value); is_boolean(Value) -> Value;
        _ -> Default
    end.

info(Id) ->
    case ferrotrace_registry:lookup(Id) of
        {ok, _, _, Info} -> Info;
        error -> #{}
    end.

loop(S = #s{monitor = Monitor}) ->
    receive
        tick ->
            Began = erlang:monotonic_time(millisecond),
            ticked(tick(S#s{timer = none}), Began, false);
        poll ->
            poll(S);
        {'DOWN', Monitor, process, _, _} ->
            ok
    end.

%% The fuse untraced a process since the last poll: the tick comes now (not sooner than
%% ?POLL ms after the last began: from its end, the session's first tick, which only takes
%% the counters in, held back load arriving with the start by one more poll), its
%% functions are shed at once, and the ticks after it come fast, as after a take-back.
poll(S = #s{id = Id, untraced = Seen, ticked_at = At, timer = Timer}) ->
    case ferrotrace_tracer:session_fuse(Id) of
        {ok, #{untraced := Untraced}} when Untraced > Seen ->
            case erlang:monotonic_time(millisecond) - At >= ?POLL of
                true ->
                    _ = Timer =/= none andalso erlang:cancel_timer(Timer),
                    erlang:send_after(?POLL, self(), poll),
                    Began = erlang:monotonic_time(millisecond),
                    ticked(tick(S#s{untraced = Untraced, timer = none}), Began, true);
                false ->
                    erlang:send_after(?POLL, self(), poll),
                    loop(S)
            end;
        {ok, _} ->
            erlang:send_after(?POLL, self(), poll),
            loop(S);
        {error, _} ->
            %% The session stopped: the tick's timer finds it so and ends.
            loop(S)
    end.

ticked({running, S1 = #s{ticks = Ticks, probing = Probing0, fast_until = Fast0}}, Began, Tripped) ->
    %% A function taken back is a probe: still too hot, it costs its floor until the next
    %% tick sheds it again, so that tick comes soon, and the ticks after it too: a hundred
    %% functions taken back wait a second on the code barrier, past the first tick after
    %% (on yaws at the first moment's end, a 1 s tick then ran at three times the budget).
    %% So after the fuse tripped.
    Probing = Probing0 orelse Tripped,
    Fast = case Probing of
               true -> max(Fast0, Ticks + 1 + ?FAST_AFTER_PROBE);
               false -> Fast0
           end,
    Timer = erlang:send_after(if Ticks < 2; Probing -> ?START; Ticks < Fast -> ?FIRST; true -> ?PERIOD end,
                              self(), tick),
    loop(S1#s{ticks = Ticks + 1, fast_until = Fast, timer = Timer,
              ticked_at = Began});
ticked(stopped, _Began, _Tripped) ->
    ok.

tick(S = #s{id = Id, control = C}) ->
    case ferrotrace_tracer:session_counts(Id) of
        {ok, Summary = #{status := running}} ->
            Info = info(Id),
            %% A calibration that came after the start (ferrotrace_start) replaces the defaults.
            C0 = ferrotrace_budget:calibrated(info(Info, calibration, undefined), C),
            %% Only the living: a process born per request is gone before the tick.
            Untraced = [P || P <- maps:get(untraced_pids, Summary, []), is_process_alive(P)],
            Measure = measure(Summary),
            Calls = maps:get(calls, Summary, []),
            {Decisions, S1} = unseen(Measure, Calls, Untraced, S,
                                     fun(Unseen) -> act(maps:merge(Measure, Unseen), Info, S#s{control = C0}) end),
            S2 = ticked_counts(Measure, Calls, retrace(Untraced, not lists:keymember(shed, 1, Decisions), S1)),
            publish(S2),
            arm(Id, S2#s.control),
            {running, remember(ferrotrace_budget:learned(S2#s.control), S2)};
        _ ->
            stopped
    end.

%% The controller's decisions on the tick's measure `Measure' (the counters and what
%% unseen/5 read), made: `{Decisions, State}'.
act(Measure, Info, S = #s{control = C0}) ->
    {Decisions, C1} = ferrotrace_budget:tick(Measure#{node => ferrotrace_nodeload:sample(),
                                                      settling => info(Info, settling, false),
                                                      reading => info(Info, reading, false)}, C0),
    %% Restores last, and the log published before them: a reader who finds a
    %% function's pattern set again finds it taken back in the log (the budget
    %% suite's sheds_and_restores read the log, then the pattern, between the two).
    {Restores, Others} = lists:partition(fun(D) -> element(1, D) =:= restore end, Decisions),
    S0 = lists:foldl(fun decide/2, S#s{control = C1, probing = Restores =/= []}, Others),
    ok = publish_if(Restores =/= [], S0),
    {Decisions, lists:foldl(fun decide/2, S0, Restores)}.

%% What the session learned, kept for the node's next starts (ferrotrace_budget's doc)
%% when it moved by more than 5 % since it was last kept.
remember({ok, Factor}, S = #s{learned = Kept}) when Kept =:= none; abs(Factor - Kept) > 0.05 * Kept ->
    ok = ferrotrace_calibrate:remember_in_situ(Factor),
    S#s{learned = Factor};
remember(_, S) ->
    S.

%% The counters a tick is fed: events that reached trace/5, calls refused in enabled_call
%% (sampled out, or refused by the frame bound), processes born with the session's flags,
%% the collector's CPU, and each function's
%% sampled count (its mean latency is not read: `undefined').
measure(#{elapsed_ms := Elapsed, events := Events, calls := Calls} = Summary) ->
    SampledOut = maps:get(sampled_out, Events, 0),
    #{elapsed_ms => Elapsed,
      traced => maps:get(seen, Events, 0) - SampledOut,
      refused => SampledOut + maps:get(frames_refused, Events, 0) + maps:get(fuse_refused, Events, 0),
      fuse_refused => maps:get(fuse_refused, Events, 0),
      untraced => maps:get(untraced, Events, 0),
      born => maps:get(born, Events, 0),
      collector_ns => maps:get(collector_cpu_ns, Summary, 0),
      functions => [{MFA, Count, undefined} || {MFA, Count} <- Calls]}.

decide({rate, N}, S = #s{id = Id}) ->
    _ = ferrotrace_tracer:session_set_call_sample(Id, N),
    S;
decide({shed, MFAs}, S = #s{keeper = Keeper, control = C, saved = Saved}) ->
    case ferrotrace_session:shed(Keeper, MFAs) of
        {ok, Off, Refused} ->
            S#s{control = ferrotrace_budget:unsheddable(Refused, C),
                saved = maps:merge(Saved, maps:from_list([{MFA, Entry} || {MFA, _, _} = Entry <- Off]))};
        {error, _} ->
            S#s{control = ferrotrace_budget:unsheddable(MFAs, C)}
    end;
decide({restore, MFAs}, S = #s{keeper = Keeper, saved = Saved}) ->
    _ = ferrotrace_session:unshed(Keeper, [maps:get(MFA, Saved) || MFA <- MFAs, maps:is_key(MFA, Saved)]),
    S#s{saved = maps:without(MFAs, Saved)}.

%% `Then' (the tick's decisions, act/3) applied to what the tick reads of the calls no
%% callback saw: the VM's count after a trip (trip_count/4: applied while its counters
%% still count, so that its shed lands before they come off), else the reductions of the
%% processes the fuse untraced (hidden/1). Not at the session's first tick, which only
%% takes the counters in (the controller decides from the second on,
%% ferrotrace_budget:tick/2): a count there only delayed the tick that sheds. Per-request
%% load arriving with the start tripped the fuse before it; its count took 20 ms, and the
%% tick it brought forward counted again: the load's functions were shed 60 to 90 ms
%% after the start returned, and ran at 0.33 to 0.7 of untraced until then.
unseen(_Measure, _Calls, _Untraced, #s{ticks = 0}, Then) ->
    Then(#{});
unseen(Measure, Calls, Untraced, S, Then) ->
    case trip_count(Measure, Calls, S, Then) of
        {ok, Acted} -> Acted;
        none -> Then(#{hidden => hidden(Untraced)})
    end.

%% The counters trip_count/4 reads against at the next tick: those of this tick, but the
%% first's (which counted nothing: unseen/5), so that a trip before it is counted at the
%% second, with all the calls sampled since the start.
ticked_counts(_Measure, _Calls, S = #s{ticks = 0}) ->
    S;
ticked_counts(Measure, Calls, S) ->
    S#s{ticked_untraced = maps:get(untraced, Measure), ticked_calls = maps:from_list(Calls)}.

%% After the fuse untraced a process (since the last tick): every process's calls a second
%% of the session's functions not shed, as the VM counts them for ?COUNT_MS
%% (ferrotrace_tracing:count_calls/4, traced or not: the floor they make), in the modules
%% of those sampled most since the last tick ({@link count_modules/1}), given to `Then'
%% as `#{counted => [{MFA, CallsPerSecond}]}' (ferrotrace_budget:tick/2): `{ok, What
%% Then answers}'; `none' without a trip, or where they could not be counted. The
%% counters' breakpoints slow those modules' calls for as long as they count: the count's
%% ?COUNT_MS and the shed in `Then', where the trip had already cost the node.
trip_count(#{untraced := Untraced}, Calls, #s{id = Id, ticked_untraced = Before, ticked_calls = Ticked, saved = Saved},
           Then)
  when Untraced > Before ->
    Seen = [{MFA, C - maps:get(MFA, Ticked, 0)} || {MFA, C} <- Calls, not is_map_key(MFA, Saved)],
    ByModule = lists:foldl(fun({{M, _, _}, D}, Acc) -> maps:update_with(M, fun(X) -> X + D end, D, Acc) end,
                           #{}, Seen),
    Modules = count_modules(ByModule),
    Info = info(Id),
    Patterned = #{specs => specs(Info), shed => Saved,
                  left_out => left_out(Info)},
    Counted = fun(Rates) ->
                      Then(#{counted => counted([MFA || {MFA = {M, _, _}, _} <- Seen, lists:member(M, Modules)],
                                                Rates, Patterned)})
              end,
    case Modules =/= [] andalso ferrotrace_tracing:count_calls([{M, '_', '_'} || M <- Modules], ?COUNT_MS,
                                                               undefined, Counted) of
        {ok, Acted} -> {ok, Acted};
        _ -> none
    end;
trip_count(_Measure, _Calls, _S, _Then) ->
    none.

%% @doc What a trip's count reads, `[{MFA, CallsPerSecond}]', from the VM's count of its
%% modules (`Rates'): the functions of those modules the session has sampled since its
%% start and not shed (`Seen'; one not called while counted at 0: its calls stopped), and
%% those the count found called that still carry the session's pattern though it has not
%% sampled them (`Patterned': covered by its `specs', not in `shed', not in `left_out', the
%% compiler-generated functions its steps took off). Load that moves reaches functions the
%% session has not seen yet: counting only those it had seen (89166d8), a trip's shed took
%% 50 to 60 functions 45 to 55 ms after fresh workers arrived, and a second trip 150 ms
%% later another 29 to 34 of the same modules, the work at 0.5 to 0.75 of untraced
%% meanwhile. The functions a spec leaves out, those shed and those left out cost the
%% session nothing: counted (b096716), they were taken for calls no callback saw, and the
%% shed took more than the floor needs. A generated function keeps its pattern until the
%% steps after the start take it off (under a `'_'' module, once the session has sampled
%% it): left out of the count as generated whether or not it still had it, a binary
%% comprehension fresh workers made a tenth of their calls in kept its pattern, unshed,
%% until a second trip 60 to 250 ms later (7 of 24 sessions; 1 of 24 counted so).
-spec counted([mfa()], [{mfa(), number()}],
              #{specs := [ferrotrace:mfa_spec()], shed := #{mfa() => term()}, left_out := #{mfa() => term()}}) ->
          [{mfa(), number()}].
counted(Seen, Rates, #{specs := Specs, shed := Shed, left_out := LeftOut}) ->
    Counted = maps:from_list(Rates),
    Known = maps:from_keys(Seen, true),
    [{MFA, maps:get(MFA, Counted, 0.0)} || MFA <- maps:keys(Known)]
        ++ [Rate || Rate = {MFA, R} <- Rates, R > 0, not is_map_key(MFA, Known), not is_map_key(MFA, Shed),
                    not is_map_key(MFA, LeftOut), ferrotrace_spec:covered(MFA, Specs)].

%% The generated functions the session's steps took off (the registry's
%% `generated_left_out', ferrotrace_keeper).
left_out(Info) ->
    case info(Info, generated_left_out, []) of
        MFAs when is_list(MFAs) -> maps:from_keys(MFAs, true);
        _ -> #{}
    end.

%% The session's specs as the registry has them (its `spec', updated by add/2 and remove/2).
specs(#{spec := Specs}) when is_list(Specs) -> [Spec || {_, _, _} = Spec <- Specs];
specs(#{}) -> [].

%% @doc The modules a trip's count covers: every module with calls sampled since the last
%% tick, the most sampled first, at most ?COUNT_MODULES. Each module counted costs the node
%% the breakpoints of all its functions while its counters are set and dropped; the
%% functions of the rest keep the estimate from their sampled calls. A trip comes within
%% milliseconds of the load (the fuse untraces a process as soon as it spends its share),
%% so the samples are a process's first few hundred calls: a module it calls once an order
%% has two or three of them. Counting the modules of 90 % of the samples (at most 8) left
%% those out, and their patterns on: the process, traced again at the next quiet tick,
%% tripped again 130 to 150 ms after the load arrived and ran at about 0.8 of untraced
%% for the 20 to 30 ms of that second count and shed (`ft_budget_work' arriving 1 s after a start,
%% 2 schedulers: two modules of ten left out, called 11 k times a second). Counting all ten
%% took no longer (the count's changes are one barrier's spinners for all its modules) and
%% that second trip did not come.
-spec count_modules(#{module() => number()}) -> [module()].
count_modules(ByModule) ->
    Sampled = lists:reverse(lists:sort([{D, M} || {M, D} <- maps:to_list(ByModule), D > 0])),
    [M || {_, M} <- lists:sublist(Sampled, ?COUNT_MODULES)].

%% The calls a second the processes the fuse untraced since the last tick make now, unseen:
%% their reductions a second over ?HIDDEN_MS (a call is a reduction, the rest of the work
%% adds some: an estimate on the high side). The budget spreads them over the functions the
%% session saw called, and sheds (ferrotrace_budget:fuse_scale/4): untraced, a process still
%% pays for every pattern it calls through.
hidden([]) ->
    0.0;
hidden(Pids0) ->
    Pids = lists:sublist(Pids0, ?HIDDEN_PIDS),
    {Before, T0} = {reductions(Pids), erlang:monotonic_time(microsecond)},
    timer:sleep(?HIDDEN_MS),
    {After, T1} = {reductions(Pids), erlang:monotonic_time(microsecond)},
    Made = lists:sum([R1 - R0 || {P, R1} <- maps:to_list(After), R0 <- [maps:get(P, Before, R1)]]),
    %% Those not read count as the mean of those read.
    Made * 1.0e6 / max(1, T1 - T0) * length(Pids0) / length(Pids).

reductions(Pids) ->
    maps:from_list([{P, R} || P <- Pids, {reductions, R} <- [erlang:process_info(P, reductions)]]).

%% The processes the fuse untraced (`New', since the last tick) are traced again once the
%% session has room (ferrotrace_budget:room/1) in a tick that shed nothing: by then the
%% functions that made them cost are shed (a process born per request got the patterns of
%% the moment it came), and a process still too hot is untraced again, at a cost the fuse
%% bounds. At most ?RETRACE_MAX a tick, each at most ?RETRACE_TIMES times; at most
%% ?WAITING_MAX waiting (those that ended meanwhile leave).
retrace(New, ShedNothing, S = #s{keeper = Keeper, control = C, untraced_pids = Waiting, retraced = Retraced,
                                  left_untraced = Left}) ->
    {Pids1, Gone} = waiting(New, Waiting),
    case ShedNothing andalso map_size(Pids1) > 0 andalso ferrotrace_budget:room(C) of
        true ->
            {Now, Later} = lists:split(min(?RETRACE_MAX, map_size(Pids1)), maps:keys(Pids1)),
            Alive = [P || P <- Now, is_process_alive(P)],
            _ = Alive =/= [] andalso ferrotrace_session:retrace(Keeper, Alive),
            S#s{untraced_pids = maps:with(Later, Pids1), retraced = Retraced + length(Alive),
                left_untraced = Left + Gone};
        false ->
            S#s{untraced_pids = Pids1, left_untraced = Left + Gone}
    end.

%% @doc The processes the fuse untraced that wait to be traced again (pid to times
%% untraced): `Waiting' less those that ended, with `New' (untraced since); and how many of
%% `New' stay untraced for good: untraced more than ?RETRACE_TIMES times, or past
%% ?WAITING_MAX waiting.
-spec waiting([pid()], #{pid() => pos_integer()}) -> {#{pid() => pos_integer()}, non_neg_integer()}.
waiting(New, Waiting) ->
    lists:foldl(fun(Pid, {Acc, G}) ->
                        case maps:get(Pid, Acc, 0) + 1 of
                            Times when Times > ?RETRACE_TIMES -> {maps:remove(Pid, Acc), G + 1};
                            1 when map_size(Acc) >= ?WAITING_MAX -> {Acc, G + 1};
                            Times -> {Acc#{Pid => Times}, G}
                        end
                end, {maps:filter(fun(P, _) -> is_process_alive(P) end, Waiting), 0}, New).

%% The fuse on the scheduler (ferrotrace_budget:fuse/1), set anew at each tick: its costs
%% follow what the session learns.
arm(Id, Control) ->
    _ = ferrotrace_tracer:session_set_fuse(Id, ferrotrace_budget:fuse(Control)),
    ok.

publish(#s{id = Id, control = Control, retraced = Retraced, left_untraced = Left, untraced_pids = Waiting}) ->
    publish(Id, Control, #{retraced => Retraced, left_untraced => Left, waiting => map_size(Waiting)}).

publish_if(true, S) -> publish(S);
publish_if(false, _S) -> ok.

publish(Id, Control) ->
    publish(Id, Control, #{retraced => 0, left_untraced => 0, waiting => 0}).

publish(Id, Control, Untraced) ->
    ferrotrace_registry:update(Id, #{budget => (ferrotrace_budget:view(Control))#{untraced => Untraced}}).
