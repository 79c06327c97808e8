%%% @private
%%% @doc The overhead budget's controller (`max_overhead => Fraction'): a pure state machine,
%%% fed a session's counters on each tick, answering what to change. No process, no NIF:
%%% `ferrotrace_overhead' reads the counters, applies the decisions and keeps the state.
%%%
%%% == The estimate ==
%%% A session costs the node's schedulers, per second:
%%% ```
%%% traced events x event_ns  +  refused calls x discard_ns
%%% '''
%%% over the capacity the node used in that second (`used' in the view): the CPU time of
%%% its OS process (all threads) over `schedulers x 1 s', at least half of it
%%% (ferrotrace_nodeload:used/2; the schedulers' busy share where /proc cannot tell the CPU
%%% time). A node sharing its cores gets less than its schedulers' capacity, and what
%%% tracing takes it takes from what the node gets: yaws under wrk on the two cores had
%%% 1.25 of them (0.55 to 0.7 of two schedulers, each busy for 0.83 to 0.98 of its wall
%%% time, waiting for the CPU), and sessions whose estimate read 0.02 to 0.05 of two
%%% schedulers cost it 7 to 14 % of its requests per second. A node using less than half
%%% has room, and counts against half: on a quiet node the same calls would count many
%%% times over against its little work and be shed at no gain. Before the first tick (the
%%% first moment, below) the share is the schedulers' busy share over the baseline's 20 ms:
%%% too short for /proc's 10 ms steps. `event_ns' is half of the calibrated cost of a
%%% traced call pair (`call_ns + return_ns', ferrotrace_calibrate: what the caller pays,
%%% the VM's work around the call included), `discard_ns' the cost of a call the tracer refused in
%%% `enabled_call' (sampled out: the VM still asks, the floor). Without a calibration the
%%% costs of the issue that asked for the budget are used (350 ns an event, 90 ns a
%%% refused call: measured on the 2-core development machine) and the state says
%%% `model => default', until a calibration measured after the start lands
%%% ({@link calibrated/2}). Calibrated in one idle process, they are a half to a fifth of what a
%%% call costs among a server's thousands of traced functions: both count `in_situ' times,
%%% 5 until the node says otherwise (below). The collector's and aggregators' CPU
%%% (`collector_cpu_ns') is not in the model: counted alone, its idle polling (1 to 1.4 %
%%% of two schedulers here, varying by a few tenths between ticks) kept a budget of 0.001
%%% from ever falling under ?LOW, and what it shed never came back. The view shows its
%%% share of the capacity (`collector'); where it takes the schedulers' cores from them,
%%% the node's measure (below) counts it.
%%%
%%% == Births ==
%%% Each process born while the session flags new processes gets its flags and tracer: the
%%% VM copies the tracer in, asks `enabled(trace_status, State, undefined)' and frees the
%%% copy after thread progress when the process ends, whether or not any of its calls is
%%% traced (?DEFAULT_BIRTH_NS a birth, measured in situ). On per-request load (100 k
%%% processes a second on two schedulers) that was most of what a session cost, and no
%%% knob on calls took it off: a session with `max_overhead => 0.05' cost 7 % of the first
%%% 2 s while its estimate read 0.01. The NIF counts the births (`born'); `born x
%%% birth_ns' is in the estimate (`whole' in the state, shown as `estimate') and taken from
%%% the node's measure before `in_situ' learns from it (a call's factor, not a birth's).
%%% The decisions and the fuse leave it out: no pattern or rate takes a birth off, and
%%% taking the births' share from what the calls may spend (tried: the calls kept to the
%%% budget less the births, a quarter of it at least) left per-request load's first 2 s
%%% where they were (0.910 and 0.925 of untraced at 0.05, paired, against 0.916 and 0.941)
%%% while a 0.05 session timed 6 k to 19 k calls in 8 s. Where births alone take more than
%%% the budget, the estimate and the report say so; only not tracing new processes would
%%% take them off, which an operator chooses (`pids => existing'), not the budget behind
%%% their back.
%%%
%%% == Measured on the node ==
%%% Each tick also measures what tracing costs the node (ferrotrace_nodeload): the fall of
%%% its work's reductions per busy scheduler time against the same measured for 20 ms
%%% before the start, times the schedulers' utilization. On a real server that reading
%%% moves by more than a budget with nothing traced, and its baseline's error stays for
%%% seconds: it does not drive the decisions alone. It teaches the model its factor
%%% instead (`in_situ', ferrotrace_in_situ: a filter that tells the reading's offset from
%%% the part that moves with the session's cost), starting from 5, within 2 and 10:
%%% the node first. The readings of the start's own work are set aside (starting/2).
%%% What a session learned outlives it for five minutes (ferrotrace_calibrate keeps it
%%% with the node's calibration as `in_situ'): the node's next session starts from it
%%% (`prior' in the view), at its first moment (below) too.
%%%
%%% == The first moment ==
%%% A session with a budget starts cautious, as TCP's slow start does, from its functions'
%%% calls counted for a moment before any pattern is set (ferrotrace_tracing:count_calls/3):
%%% {@link first/2} holds back the functions whose calls would make the floor (below), as
%%% shedding does, and picks the rate for the rest. The session pays neither: their
%%% patterns are taken off before any process is flagged. Where the calls cannot be counted
%%% (a session of other kinds), the rate comes from the node's reductions per second
%%% ({@link initial_rate/2}: each call is a reduction, a bound on the calls that may reach
%%% the tracer). Both choose for ?CAUTION of the budget, and the ticks keep to that share
%%% for the first ?CAUTIOUS ms (the view's `cautious'): until then a call's cost is the
%%% prior's guess, the start's own work still runs, and the node's readings are set aside.
%%% The first ticks come after 100 ms. At the first tick at the whole budget, what the
%%% first moment held back or shed beyond what the whole budget would comes back (open/2),
%%% unless the load moved meanwhile (the fuse tripped, or a tick read over the whole
%%% budget); then the rate falls as soon as the measured load allows, and the rest comes
%%% back as what is shed does. The full reading of loops after the start (ferrotrace_keeper) is
%%% paced within a fifth of the budget ({@link read_pace/2}); while it runs, its share of
%%% the capacity is taken from what the decisions keep to ({@link read_share/3}).
%%%
%%% == Sampling (the first knob) ==
%%% With `R' calls per second reaching the tracer (traced + refused), `k' events per traced
%%% call (about 2: call and return) and 1 call in `N' traced, the cost is
%%% `R/N x k x event_ns + R x (1 - 1/N) x discard_ns'. The rate that puts it at ?AIM of the
%%% budget follows, rounded up to 1, 2, 5, 10, 20, 50, ... (steps far enough apart that
%%% noise does not move the rate). Over the budget, the rate rises at once to that value.
%%% Under ?AIM of the budget for ?SETTLE ticks in a row (in the first moment, above: under
%%% ?LOW), it falls to that value at once where it is lower (the calls reaching the tracer
%%% are known at any rate: the refused ones are counted): the value is computed for ?AIM,
%%% below the budget, so a fall does not cause the next rise unless the load rises (the
%%% hysteresis that prevents oscillation).
%%%
%%% == Shedding (the second knob) ==
%%% A refused call still costs `discard_ns': while a function has a pattern, sampling
%%% cannot take its cost below `R x discard_ns'. When that floor is over ?AIM of the budget
%%% (and the measured estimate over the budget), the session sheds patterns: the functions
%%% whose calls make the cost, the most calls per second first (the floor is the same for
%%% every call; a rarely called function the operator asked about stays), until the floor
%%% left is at most ?SHED_TO of the budget; at most ?SHED_MAX a tick, and none whose known
%%% calls cost under ?SHED_LEAST of the capacity (its change pauses the node for longer).
%%% Under the budget too, once the first moment is over: where the floor takes over
%%% ?FLOOR_HIGH of the budget for ?SETTLE ticks while the session samples, the traced part
%%% has too little room for any rate to time many calls; the same functions are shed, and
%%% the rate is set to what the rest needs (unfloor/2). A function's rate is its sampled
%%% count over the tick times `N': sampled counts times N estimate the real rate (exact at
%%% N = 1, an estimate otherwise, and zero for a function no sampled call reached). Shed
%%% functions are taken back, the hottest whose calls (at their rate when shed) fit in half
%%% the room left under ?AIM, or else the least hot alone, only at `N = 1' (sampling is
%%% given back first: it costs nothing while a shed function's pattern costs the floor on
%%% every call), after ?SETTLE ticks under ?LOW and ?RESTORE_WAIT ticks or ?RESTORE_WAIT_MS
%%% after it was shed, whichever comes first (in ticks alone, the wait of a function shed
%%% as the fast ticks ended lasted 8 s of 1 s ticks: load arriving after the start had its
%%% functions shed at once and none back within an 8 s session, 2 k to 6 k calls timed).
%%% Its rate while shed is unknown (no pattern, no call reaches the tracer): taking it back
%%% is a probe, and a function still too hot is shed again at the next tick over the
%%% budget, then waits twice as long (a day holds about 15 such probes per function), so
%%% shedding and taking back cannot cycle quickly.
-module(ferrotrace_budget).

-export([new/2, first/2, tick/2, calibrated/2, unsheddable/2, view/1, learned/1, initial_rate/2, whole_node_default/0]).
-export([check/1, read_pace/2, read_share/3, fuse/1, room/1]).

%% Aim below the budget, lower the rate only well under it.
-define(AIM, 0.8).
-define(LOW, 0.5).
-define(SETTLE, 3).
-define(SHED_TO, 0.4).
%% Under the budget, a floor over this share of it leaves the traced part too little room
%% (see unfloor/2).
-define(FLOOR_HIGH, 0.6).
-define(SHED_MAX, 200).
%% The least floor a function is shed for (a fraction of the capacity): its change pauses
%% every scheduler for 100 to 120 microseconds (ferrotrace_barrier, 2 schedulers busy), more
%% than its calls cost them in a second.
-define(SHED_LEAST, 1.0e-4).
-define(RESTORE_WAIT, 10).
-define(RESTORE_WAIT_MS, 2500).
-define(MAX_RATE, 1000000).
%% How long after the first tick the node's readings are the start's (see starting/2).
-define(STARTING, 600).
%% While the loops' reading runs, the least share of the budget left to the tracing (see
%% for_tracing/2).
-define(READ_LEFT, 0.25).
%% The first moment's caution (see budget_now/2): the share of the budget a session aims
%% under, and for how long after its first tick.
-define(CAUTION, 0.5).
-define(CAUTIOUS, 1500).
%% The rate changes and shed functions kept for the summary.
-define(HISTORY, 32).
%% The most calls a second a process the fuse untraced is taken to make, in multiples of
%% what got it untraced (see load/3).
-define(HIDDEN_MAX, 4).
%% A spec with a `'_' module without `max_overhead': a tenth of the schedulers.
-define(WHOLE_NODE_DEFAULT, 0.1).
-define(SHED_LOG, 100).
%% The least share of the schedulers' capacity a budget counts against (see share/1).
-define(USED_FLOOR, 0.5).
%% Without a calibration (ns): the figures of issue 22, measured on a 2-core machine.
-define(DEFAULT_EVENT_NS, 350).
-define(DEFAULT_DISCARD_NS, 90).
%% What a process born with a session's flags costs the node more than one born untraced,
%% in situ (ns): on the 2-core development machine, a session whose only pattern nothing
%% calls cost per-request load (make busy-pairs' `flags_only': 110 k to 120 k processes
%% born a second) 4.1 to 4.9 % of its first 2 s, 0.75 us a birth. One process spawning
%% alone reads 0.26 to 0.31 us (`make births'). Not calibrated at a start: measuring it
%% takes the node's flags for new processes, which every process born meanwhile would get.
-define(DEFAULT_BIRTH_NS, 750).

-type measure() :: #{elapsed_ms := non_neg_integer(),
                     traced := non_neg_integer(),
                     refused := non_neg_integer(),
                     fuse_refused => non_neg_integer(),
                     untraced => non_neg_integer(),
                     born => non_neg_integer(),
                     hidden => float(),
                     counted => [{mfa(), number()}],
                     collector_ns := non_neg_integer(),
                     node => ferrotrace_nodeload:sample() | undefined,
                     settling => boolean(),
                     reading => boolean(),
                     functions := [{mfa(), Count :: non_neg_integer(), MeanNs :: number() | undefined}]}.
%% What a tick is fed, cumulative since the session started: events that reached `trace/5'
%% (`traced'), calls refused in `enabled_call' (`refused'), of which those the fuse refused
%% (`fuse_refused'), the processes the fuse untraced (`untraced'), the processes born with
%% the session's flags (`born': see the births below) and the calls a second
%% those untraced since the last tick make now (`hidden'; in a tick after the fuse tripped,
%% every process's calls a second of the functions seen, `counted', where the VM counted
%% them: see trip_counted/3), the collector's CPU time (shown,
%% not in the estimate), each
%% function's sampled call count and mean latency (ns), the node's counters
%% (ferrotrace_nodeload:sample/0), where they can be read, whether the session is still
%% `settling' (processes waiting in loops not flagged yet: see decide/2), and whether the
%% loops' reading after the start still runs (`reading', see read_share/3).
-type decision() :: {rate, pos_integer()} | {shed, [mfa()]} | {restore, [mfa()]}.
-type shed() :: #{mfa := mfa(), rate := non_neg_integer(), shed_at := non_neg_integer(),
                  guessed => true, restored_at => non_neg_integer()}.
-type state() :: #{atom() => term()}.
-export_type([measure/0, decision/0, state/0, shed/0]).

%% @doc `ok' for a budget `max_overhead' takes: a number above 0 and at most 1 (a fraction of
%% the capacity the node uses), else the `bad_option' error naming what is accepted.
-spec check(term()) -> ok | {error, {bad_option, {max_overhead, term(), binary()}}}.
check(F) when is_number(F), F > 0, F =< 1 -> ok;
check(F) -> {error, {bad_option, {max_overhead, F, <<"a fraction of the CPU the node uses, above 0 and at most 1 (0.05 is 5 %), or none (no budget)">>}}}.

%% @doc The share of one scheduler the full reading of loops after the start may take
%% (ferrotrace_loops:find/4's pace) in a session with budget `Budget' on `Schedulers'
%% schedulers: a fifth of the budget, from 0.01 to 0.05. That reading is not in the
%% estimate (its work is no traced call); while it runs, read_share/3 is taken from the
%% budget instead.
-spec read_pace(number(), pos_integer()) -> float().
read_pace(Budget, Schedulers) when is_number(Budget), Budget > 0, is_integer(Schedulers), Schedulers > 0 ->
    min(0.05, max(0.01, Budget * Schedulers / 5)).

%% @doc What the loops' reading at its pace (read_pace/2) takes of the capacity a budget
%% counts against, where the node uses `Used' of its `Schedulers' schedulers (share/1): the
%% decisions keep to the budget less this while the reading runs. On yaws under wrk (the
%% node using 0.6 of two schedulers), a session's reading of the server's modules took
%% 86 M reductions and 0.22 to 0.34 s of a scheduler at once; paced at 0.02, it ran
%% through three 8 s sessions (10 % of the node's reductions, 0.017 of its capacity) while
%% their estimates kept to the whole budget of 0.05: those sessions kept 0.91 to 0.96 of
%% the untraced rate, 0.96 and 0.98 where the reading was done before.
-spec read_share(number(), pos_integer(), float()) -> float().
read_share(Budget, Schedulers, Used) when is_float(Used), Used > 0 ->
    read_pace(Budget, Schedulers) / (Schedulers * Used).

%% @doc The budget of a spec with a `'_' module when none is given (ferrotrace_start).
-spec whole_node_default() -> float().
whole_node_default() -> ?WHOLE_NODE_DEFAULT.

%% @doc A controller for `Budget' on `Schedulers' schedulers, with the session's calibration
%% (`#{call_ns, return_ns, discard_ns}', or `undefined' when none was measured).
%% `rate' is the per-call rate the session started with (default 1); `default' says the
%% budget is {@link whole_node_default/0}, not one given (default false); `held' the
%% functions {@link first/2} held back, with their calls per second (default none);
%% `pending' those it chose that the start had no time to take off, shed at the first
%% tick whatever the estimate then (default none); `baseline' the node's work before tracing (ferrotrace_nodeload:baseline/1), against which
%% each tick measures the cost on the node (default `undefined': not measured).
-spec new(number(), #{schedulers := pos_integer(), calibration := map() | undefined,
                      rate => pos_integer(), default => boolean(), held => [{mfa(), number()}],
                      pending => [{mfa(), number()}], baseline => ferrotrace_nodeload:baseline() | undefined}) -> state().
new(Budget, Node = #{schedulers := Schedulers, calibration := Calibration}) ->
    {EventNs, DiscardNs, Model} = costs(Calibration),
    %% Held back from the start (first/2): shed at 0 ms, given back as what is shed is.
    Held = [{MFA, round(Rate)} || {MFA, Rate} <- maps:get(held, Node, [])],
    #{budget => Budget, schedulers => Schedulers, event_ns => EventNs, discard_ns => DiscardNs,
      birth_ns => ?DEFAULT_BIRTH_NS, births => 0.0, born_per_s => 0.0,
      model => Model, prior => ferrotrace_in_situ:prior(Calibration), rate => maps:get(rate, Node, 1), default => maps:get(default, Node, false),
      estimate => undefined, low_ticks => 0, aim_ticks => 0, floor_ticks => 0, last => undefined,
      used => start_share(Node),
      baseline => maps:get(baseline, Node, undefined), in_situ => ferrotrace_in_situ:new(ferrotrace_in_situ:prior(Calibration), maps:get(baseline, Node, undefined)),
      history => [], changes => 0,
      shed => maps:from_list([{MFA, #{rate => Rate, tick => 0, at => 0, trip => false}} || {MFA, Rate} <- Held]),
      shed_log => lists:sublist([#{mfa => MFA, rate => Rate, shed_at => 0} || {MFA, Rate} <- Held], ?SHED_LOG),
      unsheddable => #{}, times => maps:from_list([{MFA, 1} || {MFA, _} <- Held]),
      pending => [{MFA, round(Rate)} || {MFA, Rate} <- maps:get(pending, Node, [])],
      estimated => #{},
      tick => 0}.

%% @doc Where a session with budget `Budget' starts, from its functions' calls per second
%% counted before tracing (`functions', ferrotrace_tracing:count_calls/3), on `schedulers'
%% schedulers with the calibration's costs (as {@link new/2} takes them): `{Held, Rate}',
%% the functions to hold back (no pattern: the most called first, as shedding takes them,
%% until the floor of the rest is at ?SHED_TO of the budget) with their rates, and the
%% per-call rate that keeps the rest at ?AIM of the budget; of ?CAUTION of the budget,
%% the share a session keeps to for its first moment.
-spec first(number(), #{schedulers := pos_integer(), calibration := map() | undefined,
                        functions := [{mfa(), number()}], baseline => ferrotrace_nodeload:baseline() | undefined}) ->
          {[{mfa(), number()}], pos_integer()}.
first(Budget0, Node = #{schedulers := Schedulers, calibration := Calibration, functions := Functions})
  when is_number(Budget0), Budget0 > 0, is_integer(Schedulers), Schedulers > 0, is_list(Functions) ->
    Budget = Budget0 * ?CAUTION,
    {EventNs0, DiscardNs0, _} = costs(Calibration),
    Prior = ferrotrace_in_situ:prior(Calibration),
    {EventNs, DiscardNs} = {EventNs0 * Prior, DiscardNs0 * Prior},
    Capacity = Schedulers * 1.0e9 * start_share(Node),
    Called = [{MFA, Rate} || {MFA, Rate} <- Functions, is_number(Rate), Rate > 0],
    Reaching = lists:sum([Rate || {_, Rate} <- Called]),
    Held = hold_back(Called, Reaching * DiscardNs / Capacity, Budget, DiscardNs / Capacity, ?SHED_MAX),
    Left = max(0.0, Reaching - lists:sum([Rate || {_, Rate} <- Held])),
    {Held, nice(needed(#{reaching => Left, per_call => 2 * EventNs, discard_ns => DiscardNs, capacity => Capacity},
                       Budget))}.

costs(#{call_ns := C, return_ns := R, discard_ns := D}) when is_number(C), is_number(R), is_number(D),
                                                             C + R > 0 ->
    {(C + R) / 2, D, calibrated};
costs(#{call_ns := C, return_ns := R}) when is_number(C), is_number(R), C + R > 0 ->
    {(C + R) / 2, ?DEFAULT_DISCARD_NS, partial};
costs(_) ->
    {?DEFAULT_EVENT_NS, ?DEFAULT_DISCARD_NS, default}.

%% @doc The per-call rate a session with budget `Budget' starts at: the rate that would
%% keep it at ?AIM of the budget were every reduction of the node (`reductions_per_s',
%% measured before tracing) a call reaching the tracer, on `schedulers' schedulers with the
%% calibration's costs (as {@link new/2} takes them), for ?CAUTION of the budget as
%% {@link first/2}. 1 when the node is idle.
-spec initial_rate(number(), #{schedulers := pos_integer(), calibration := map() | undefined,
                               reductions_per_s := number(), baseline => ferrotrace_nodeload:baseline() | undefined}) ->
          pos_integer().
initial_rate(Budget, Node = #{schedulers := Schedulers, calibration := Calibration, reductions_per_s := R})
  when is_number(R), R >= 0 ->
    {EventNs, DiscardNs, _} = costs(Calibration),
    nice(needed(#{reaching => R, per_call => 2 * EventNs, discard_ns => DiscardNs,
                  capacity => Schedulers * 1.0e9 * start_share(Node)},
                Budget * ?CAUTION)).

%% @doc One tick: the estimate over the time since the previous tick, and what to change.
%% The first tick only takes the counters in, and sheds what the start left `pending'.
-spec tick(measure(), state()) -> {[decision()], state()}.
tick(M = #{elapsed_ms := Now}, S = #{last := undefined, rate := N}) ->
    %% Not the processes the fuse untraced before it: those are the second tick's trip.
    %% Load arriving with the start trips the fuse within milliseconds, often before the
    %% first tick; read against it, the second tick saw no trip, decided nothing on the
    %% count it had made, and the shed waited for the next trip: 80 ms after the start,
    %% not 40 (make busy's arrive_0ms). ferrotrace_overhead's ticked_counts/3 reads the
    %% trip's count against the same zero.
    pending(estimated(M, undefined, N, S#{last := M#{untraced => 0}, since => Now}));
tick(M = #{elapsed_ms := Now}, S = #{last := Last = #{elapsed_ms := Then}, rate := N}) when Now =< Then ->
    {[], estimated(M, Last, N, S#{last := M})};
tick(M, S0 = #{last := Last, tick := T}) ->
    S = S0#{last := M, tick := T + 1},
    Load = load(M, Last, S0),
    S1 = (estimated(M, Last, maps:get(scale, Load), S))#{estimate := maps:get(whole, Load), collector => maps:get(collector, Load),
            in_situ := maps:get(in_situ, Load), used := maps:get(used, Load), tripped => maps:get(tripped, Load),
            reading => maps:get(reading, Load),
            births := maps:get(births, Load), born_per_s := maps:get(born_per_s, Load),
            %% The fuse tripped, or a tick read over the budget, in the first moment: the load
            %% moved since the start counted it (see open/2).
            moved => maps:get(moved, S0, false) orelse (cautious(S0) andalso moved(Load, S0))},
    case cautious(S0) andalso not cautious(S) of
        true -> open(Load, S1);
        false -> decide(Load, S1)
    end.

%% @doc The costs of `Calibration' (as {@link new/2} takes it) in place of the defaults of a
%% session that started without one: a node's first calibration, measured once the session
%% runs where its schedulers were full at the start (ferrotrace_start). A state with costs
%% of its own already, or a `Calibration' without any, is left as it is.
-spec calibrated(term(), state()) -> state().
calibrated(Calibration, S = #{model := default}) ->
    case costs(Calibration) of
        {_, _, default} -> S;
        {EventNs, DiscardNs, Model} -> S#{event_ns := EventNs, discard_ns := DiscardNs, model := Model}
    end;
calibrated(_Calibration, S) ->
    S.

%% What first/2 chose to hold back and the start had no time to take off (each change
%% waits for the code barrier): shed at once. Counted by their calls before the start, they
%% would be seen to cost only once the processes waiting in server loops are flagged, a
%% second or more later on a busy server (the estimate reads an idle node until then).
pending(S = #{pending := [_ | _] = Pending, last := #{elapsed_ms := At}}) ->
    {[{shed, [MFA || {MFA, _} <- Pending]}], mark_shed(Pending, 0, At, false, #{}, S#{pending := []})};
pending(S) ->
    {[], S}.

%% @doc Functions that could not be shed (another session's pattern covers them on OTP 25
%% and 26): forgotten as shed, never tried again.
-spec unsheddable([mfa()], state()) -> state().
unsheddable(MFAs, S = #{shed := Shed, shed_log := Log, unsheddable := Never}) ->
    S#{shed := maps:without(MFAs, Shed),
       shed_log := [E || E = #{mfa := MFA} <- Log, not lists:member(MFA, MFAs) orelse maps:is_key(restored_at, E)],
       unsheddable := maps:merge(Never, maps:from_list([{MFA, true} || MFA <- MFAs]))}.

%% @doc What the summary shows: the budget, whether the session still keeps to ?CAUTION of
%% it (`cautious', its first moment: see first/2), the estimate (a fraction, `undefined' before
%% the second tick; the births' share in it), the births' share of the same capacity at the
%% last tick (`births'), the processes born a second with the session's flags then
%% (`born_per_s') and the cost of one (`birth_ns', in situ), the collector's CPU
%% over the same capacity (not in the estimate), the
%% share of it the loops' reading held at the last tick (`reading', taken from the budget:
%% read_share/3; 0.0 once it is done), the
%% rate, the cost model, the rate's changes (`{ElapsedMs, N,
%% Estimate}', oldest first, the last ?HISTORY) and their count, and the functions shed
%% (`rate' in calls per second when shed; `restored_at' once taken back), the last ?SHED_LOG.
-spec view(state()) -> map().
view(S = #{budget := B, estimate := E, rate := N, model := Model, event_ns := Ev, discard_ns := D,
           history := H, changes := C, shed_log := Log, shed := Shed, baseline := Baseline,
           in_situ := InSitu, used := Used}) ->
    #{max_overhead => B, default => maps:get(default, S, false), cautious => cautious(S),
      estimate => E, rate => N, model => Model, used => Used,
      collector => maps:get(collector, S, undefined),
      %% The node's measure of the calls' cost, and the births' back in it.
      measured => case ferrotrace_in_situ:measured(InSitu) of
                      undefined -> undefined;
                      Measured -> Measured / Used + maps:get(births, S, 0.0)
                  end,
      in_situ => ferrotrace_in_situ:factor(InSitu), prior => maps:get(prior, S),
      reading => maps:get(reading, S, 0.0),
      baseline => Baseline,
      event_ns => round(Ev), discard_ns => round(D),
      births => maps:get(births, S, 0.0), born_per_s => round(maps:get(born_per_s, S, 0.0)),
      birth_ns => maps:get(birth_ns, S, ?DEFAULT_BIRTH_NS),
      rate_changes => lists:reverse(H), rate_changes_total => C,
      shed => lists:sort(fun(#{shed_at := A, rate := Ra}, #{shed_at := A2, rate := Rb}) -> {A, -Ra} =< {A2, -Rb} end, Log),
      shed_now => map_size(Shed),
      estimated => estimates(S)}.

%% Per function, its estimated calls up to the last tick and its count then (see
%% ferrotrace_local: a summary adds the calls counted since at the rate now).
estimates(#{estimated := Estimated, last := #{functions := Functions}}) ->
    maps:from_list([{MFA, {round(maps:get(MFA, Estimated, 0)), C}} || {MFA, C, _} <- Functions]);
estimates(_S) ->
    #{}.

%% @doc Whether the last tick left room under the budget: the fuse did not trip, and the
%% estimate is under ?AIM of the budget the session keeps to now (its first moment's
%% ?CAUTION of it), the births' share left out (no decision takes it off). For processes the
%% fuse untraced to be traced again (ferrotrace_overhead).
-spec room(state()) -> boolean().
room(S = #{estimate := E, budget := B}) when is_number(E) ->
    Now = case cautious(S) of
              true -> B * ?CAUTION;
              false -> B
          end,
    Calls = E - maps:get(births, S, 0.0),
    not maps:get(tripped, S, false) andalso Calls < for_tracing(Now, maps:get(reading, S, 0.0)) * ?AIM;
room(_S) ->
    false.

%% The calls each function made, estimated from those timed: each function's calls counted
%% since the last tick, times what each stands for over that tick (`Scale', fuse_scale/4:
%% the per-call rate and what the fuse left out).
estimated(#{functions := Functions}, Last, Scale, S = #{estimated := Estimated}) ->
    Before = case Last of
                 #{functions := Earlier} -> maps:from_list([{MFA, C} || {MFA, C, _} <- Earlier]);
                 _ -> #{}
             end,
    S#{estimated := lists:foldl(fun({MFA, C, _}, Acc) ->
                                        Delta = max(0, C - maps:get(MFA, Before, 0)),
                                        maps:update_with(MFA, fun(E) -> E + Delta * Scale end, Delta * Scale, Acc)
                                end, Estimated, Functions)}.

%% The share of a scheduler thread's time the fuse lets the session spend: the budget of the
%% capacity the node uses.
fuse_share(#{budget := B, used := Used}) ->
    min(1.0, B * Used).

%% How many calls each sampled call of a function stands for, where the session times 1 call
%% in `N' and `Timed' calls a second were timed: `N', and more for what the fuse left out.
%% Refused by the fuse (`FuseRefused' calls a second that the session would have timed), a
%% stretch of a process's calls is left out, whatever functions they are of: it stands for
%% more of the same. Untraced, a process makes calls no callback sees (`Hidden' a second, at
%% least: see load/3), spread over the functions as the calls timed are: the fuse names no
%% function (enabled_call is not told which). Where nothing was timed, `N'.
fuse_scale(N, Timed, FuseRefused, Hidden) when Timed > 0 ->
    (N * (Timed + FuseRefused) + Hidden) / Timed;
fuse_scale(N, _Timed, _FuseRefused, _Hidden) ->
    N.

%% @doc The parameters of the session's fuse (ferrotrace_tracer:session_set_fuse/2): each
%% scheduler thread may spend the budget's share of the capacity the node uses, a traced
%% call costing its two events and a refused one the VM's asking, at the costs the model
%% uses now (the calibration's, times what the session learned on the node).
-spec fuse(state()) -> #{share := float(), traced_ns := float(), refused_ns := float()}.
fuse(S = #{event_ns := EventNs, discard_ns := DiscardNs, in_situ := InSitu}) ->
    Factor = ferrotrace_in_situ:factor(InSitu),
    #{share => fuse_share(S), traced_ns => 2 * EventNs * Factor, refused_ns => DiscardNs * Factor}.

%%% The load of one tick

load(M, Last, S = #{schedulers := Sch, event_ns := EventNs0, discard_ns := DiscardNs0, rate := N,
                    baseline := Baseline, used := Used0}) ->
    Dt = (maps:get(elapsed_ms, M) - maps:get(elapsed_ms, Last)) / 1000,
    Traced = delta(traced, M, Last) / Dt,
    Refused = delta(refused, M, Last) / Dt,
    Born = delta(born, M, Last) / Dt,
    Whole = Sch * 1.0e9,
    %% What the budget counts against: the capacity the node used over the tick (share/1);
    %% the last tick's where it could not be read.
    Used = case ferrotrace_nodeload:used(maps:get(node, Last, undefined), maps:get(node, M, undefined)) of
               undefined -> Used0;
               U -> share(U)
           end,
    Capacity = Whole * Used,
    %% The model's cost of the calls at the costs calibrated in one process, and the cost
    %% measured on the node over the same tick less the births' (all of the whole
    %% capacity): from both, ferrotrace_in_situ learns what a call costs here. The births'
    %% cost is an in-situ figure already (see the module doc).
    Model = (Traced * EventNs0 + Refused * DiscardNs0) / Whole,
    BirthsWhole = Born * maps:get(birth_ns, S, ?DEFAULT_BIRTH_NS) / Whole,
    Measured = case ferrotrace_nodeload:cost(Baseline, maps:get(node, Last, undefined), maps:get(node, M, undefined)) of
                   undefined -> undefined;
                   Cost -> Cost - BirthsWhole
               end,
    Learning = case starting(M, S) of
                   true -> ferrotrace_in_situ:aside(maps:get(in_situ, S), Measured, Dt);
                   false -> ferrotrace_in_situ:update(maps:get(in_situ, S), Model, Measured, Dt)
               end,
    InSitu = ferrotrace_in_situ:factor(Learning),
    {EventNs, DiscardNs} = {EventNs0 * InSitu, DiscardNs0 * InSitu},
    Collector = delta(collector_ns, M, Last) / Dt,
    Before = maps:from_list([{MFA, C} || {MFA, C, _} <- maps:get(functions, Last)]),
    Counted = [{MFA, max(0, C - maps:get(MFA, Before, 0)) / Dt, Mean} || {MFA, C, Mean} <- maps:get(functions, M)],
    Timed = lists:sum([R || {_, R, _} <- Counted]),
    %% What the fuse left out (fuse_scale/4): each function's sampled count stands for
    %% `Scale' calls. The processes it untraced make calls no callback sees (`Hidden' a
    %% second): at least what got them untraced (each cost its thread more than the fuse's
    %% share with every call refused: `share x 1 s / discard_ns' calls a second, `Bound'),
    %% as measured (`hidden', their reductions a second), at most ?HIDDEN_MAX times the
    %% bound. Reductions count more than calls (a binary's bytes, a map's keys: 40 to 70 M
    %% a second against 12 M calls on the bench's work), and every function seen called
    %% was shed for them, the lukewarm ones too: sessions timed 3.5 k calls in 8 s. Within
    %% the bound's multiple, the hottest functions making 90 % of the calls seen are shed
    %% (on two schedulers); what is left is shed at the next trip, if there is one. Only
    %% shedding takes their calls off the node (untraced, a call through a pattern still
    %% costs, less).
    Untraced = delta(untraced, M, Last),
    FuseRefused = delta(fuse_refused, M, Last) / Dt,
    %% `Guessed': the functions whose rates are read from calls sampled where the fuse
    %% untraced the processes making them, not counted: the log says so. With load
    %% arriving 100 ms after the start (make busy, arrive_100ms), counters:add/3 and the
    %% BIF it calls were shed at 138 calls a second and called 1.4 million times a second.
    %% The take-back still weighs them by it: bringing guesses back one a take-back, tried,
    %% measured worse on yaws (its first 2 s at 0.81 to 0.89 of untraced in four runs,
    %% against 0.95 to 0.99 in three of main alternated with them).
    {Hidden, HiddenSampled, Functions, Guessed} =
        case M of
            #{counted := [_ | _] = AllCalls} ->
                %% The VM counted every process's calls of the functions seen (see
                %% trip_counted/3): their rates are known, whoever made them.
                trip_counted(AllCalls, Counted, seen_scale(N, Timed, FuseRefused));
            _ ->
                Bound = Untraced * fuse_share(S) * 1.0e9 / DiscardNs,
                Hidden0 = max(Bound, min(maps:get(hidden, M, 0.0), ?HIDDEN_MAX * Bound)),
                Scale0 = fuse_scale(N, Timed, FuseRefused, Hidden0),
                {Hidden0, Hidden0, [{MFA, R * Scale0, Mean} || {MFA, R, Mean} <- Counted],
                 case Untraced > 0 of
                     true -> maps:from_keys([MFA || {MFA, _, _} <- Counted], true);
                     false -> #{}
                 end}
        end,
    %% What each sampled call stands for (the functions' estimated calls, estimated/4): the
    %% calls no callback saw of the functions sampled, not those of functions no call of
    %% which was sampled (a trip's count lists them with their own rates).
    Scale = fuse_scale(N, Timed, FuseRefused, HiddenSampled),
    Calls = Timed,
    %% A traced call's events: about 2 (call, return; 1 for a count-only loop).
    Events = case Calls > 0 of
                 true -> max(1.0, min(Traced / Calls, 4.0));
                 false -> 2.0
             end,
    PerCall = Events * EventNs,
    %% What the decisions weigh is what the session asks of the node: the calls the fuse
    %% refused would have been traced (the model's cost above, which the node's measure
    %% is compared with, counts them as refused: what they cost).
    Demand = Model + FuseRefused * (Events * EventNs0 - DiscardNs0) / Whole,
    Reading = reading(M, S, Used),
    %% The births (see the module doc): in the estimate shown, not in what the decisions
    %% weigh (no decision takes them off).
    Births = BirthsWhole / Used,
    Estimate = Demand * InSitu / Used,
    #{estimate => Estimate, whole => Estimate + Births, births => Births, born_per_s => Born,
      in_situ => Learning, used => Used, settling => maps:get(settling, M, false),
      budget => for_tracing(budget_now(M, S), Reading), reading => Reading, tripped => Untraced > 0,
      hidden => Hidden,
      collector => Collector / Capacity,
      reaching => Calls + Refused + Hidden, per_call => PerCall, functions => Functions, guessed => Guessed,
      scale => Scale,
      capacity => Capacity, discard_ns => DiscardNs}.

%% What the session's processes, traced or not, called of the session's functions, as the
%% VM counted them after a trip (`AllCalls', `{MFA, CallsPerSecond}': ferrotrace_overhead
%% counts them with ferrotrace_tracing:count_calls/4): `{Hidden, HiddenSampled, Functions,
%% Guessed}', the calls a second no callback saw (the counted calls over those the session
%% saw, `Seen' each sampled one: seen_scale/3), the same of the sampled functions alone,
%% and each function's calls a second, counted where the VM counted it, else estimated
%% from its sampled count. Estimated from the reductions of the
%% processes the fuse untraced and spread over the functions as the sampled calls are (the
%% way without a count), the trip of fresh workers arriving after the start read every
%% function they called as hot: all 173 were shed at once, a session with the default
%% budget timed 3 k to 7 k calls in 8 s, and each came back alone, a probe, seconds later.
%% Third, the functions not counted (their modules were not: ferrotrace_overhead counts
%% those of most calls), whose rates are a guess.
trip_counted(AllCalls, Sampled, Seen) ->
    Counts = maps:from_list([{MFA, Rate} || {MFA, Rate} <- AllCalls, is_number(Rate), Rate >= 0]),
    Estimates = [{MFA, max(R * Seen, maps:get(MFA, Counts, 0.0)), Mean} || {MFA, R, Mean} <- Sampled],
    Unsampled = [{MFA, Rate, undefined} || {MFA, Rate} <- maps:to_list(Counts), Rate > 0,
                                           not lists:keymember(MFA, 1, Sampled)],
    SeenCalls = lists:sum([R * Seen || {MFA, R, _} <- Sampled, is_map_key(MFA, Counts)]),
    SampledCalls = lists:sum([maps:get(MFA, Counts) || {MFA, _, _} <- Sampled, is_map_key(MFA, Counts)]),
    {max(0.0, lists:sum(maps:values(Counts)) - SeenCalls), max(0.0, SampledCalls - SeenCalls),
     Estimates ++ Unsampled, maps:from_keys([MFA || {MFA, _, _} <- Sampled, not is_map_key(MFA, Counts)], true)}.

%% The calls a second each sampled call stands for among those the callbacks saw: `N', and
%% more for the calls the fuse refused (fuse_scale/4 without the hidden ones).
seen_scale(N, Timed, FuseRefused) ->
    fuse_scale(N, Timed, FuseRefused, 0.0).

%% The start's own work still runs (ferrotrace_in_situ:aside/3): the first ?STARTING ms
%% after the first tick, and while the processes waiting in loops are being flagged.
starting(#{settling := true}, _S) -> true;
starting(#{elapsed_ms := Now}, #{since := Since}) -> Now - Since < ?STARTING.

%% The budget the decisions keep to: ?CAUTION of it for the first ?CAUTIOUS ms after the
%% first tick, the whole of it after. Until then the cost per call is the prior's (the
%% node's last session's, else five times the calibration), the start's own work still runs
%% (its patterns' and flags' changes, the loops' reading) and its readings are set aside:
%% the session leaves room for what it cannot see yet, as TCP's slow start does. Once
%% the node has been read for a second, what the half held back comes back (open/2) and
%% the rate falls (under/2) as the estimate allows.
budget_now(#{elapsed_ms := Now}, #{since := Since, budget := B}) when Now - Since < ?CAUTIOUS ->
    B * ?CAUTION;
budget_now(_M, #{budget := B}) ->
    B.

%% The budget the decisions keep to, `Now' (budget_now/2), less `Reading', the share the
%% loops' reading takes while it runs (reading/3), at least ?READ_LEFT of it.
for_tracing(Now, Reading) ->
    max(Now * ?READ_LEFT, Now - Reading).

%% The share of the capacity the loops' reading holds while it runs (read_share/3), else 0.
reading(#{reading := true}, #{budget := B, schedulers := Sch}, Used) -> read_share(B, Sch, Used);
reading(_M, _S, _Used) -> 0.0.

%% Whether the session keeps to ?CAUTION of its budget: before its first tick, and as of
%% the last tick (budget_now/2).
cautious(#{last := undefined}) -> true;
cautious(S = #{last := M, budget := B}) -> budget_now(M, S) < B.

%% The share of the schedulers' capacity a budget counts against, from the share `U' the
%% node used (ferrotrace_nodeload:used/2, tracing's own time in it): `U', at least
%% ?USED_FLOOR; 1 where it is not known.
share(U) when is_float(U) -> max(?USED_FLOOR, min(1.0, U));
share(_) -> 1.0.

%% The share before the first tick: the schedulers' busy share over the node's `baseline'
%% (ferrotrace_nodeload:baseline/1: 20 ms, too short to read the CPU time by /proc's steps).
start_share(#{baseline := #{utilization := U}}) -> share(U);
start_share(_Node) -> share(undefined).

%% @doc The factor this session learned on the node, once its evidence outweighs the prior
%% it started from (for the node's next starts: ferrotrace_calibrate:remember_in_situ/1), or
%% `none'.
-spec learned(state()) -> {ok, float()} | none.
learned(#{in_situ := InSitu}) ->
    ferrotrace_in_situ:learned(InSitu).

delta(Key, M, Last) ->
    max(0, maps:get(Key, M, 0) - maps:get(Key, Last, 0)).

%%% Decisions

decide(Load = #{estimate := E, budget := B, tripped := Tripped}, S) when E > B; Tripped ->
    %% The fuse untraced a process: its calls cost a scheduler more than the budget's share
    %% even refused, whatever the estimate over the whole node says. (Calls the fuse only
    %% refused count among those reaching the tracer: the rate rises for them as the
    %% estimate asks, not at every refusal, which a scheduler busier than the others or a
    %% short burst brings.)
    over(Load, S#{low_ticks := 0, aim_ticks := 0, floor_ticks := 0});
decide(Load, S = #{floor_ticks := F}) ->
    case floor_bound(Load, S) of
        true when F + 1 >= ?SETTLE -> unfloor(Load, S#{low_ticks := 0, aim_ticks := 0, floor_ticks := 0});
        true -> within(Load, S#{floor_ticks := F + 1});
        false -> within(Load, S#{floor_ticks := 0})
    end.

%% Under the budget: the rate falls while the estimate stays under the aim.
within(#{estimate := E, budget := B, settling := true}, S) when E < B * ?AIM ->
    %% Not all of the session's load yet: the processes waiting in server loops are flagged
    %% once their loops are count-only (ferrotrace_keeper's steps, a second on a busy
    %% server). The rate the start chose counted their calls; it does not fall meanwhile.
    {[], S#{low_ticks := 0, aim_ticks := 0}};
within(Load = #{estimate := E, budget := B}, S = #{low_ticks := Low, aim_ticks := Aim}) when E < B * ?AIM ->
    Low1 = case E < B * ?LOW of
               true -> Low + 1;
               false -> 0
           end,
    %% The first moment lowers its rate only well under its budget (its cost per call is
    %% still the prior's guess); at the whole budget, anywhere under the aim (under/2).
    Aim1 = case cautious(S) of
               true -> Low1;
               false -> Aim + 1
           end,
    under(Load, S#{low_ticks := Low1, aim_ticks := Aim1});
within(_Load, S) ->
    {[], S#{low_ticks := 0, aim_ticks := 0}}.

%% Over the budget: shed when the floor alone is over the aim, then the rate for the rest.
over(Load = #{reaching := R, discard_ns := D, capacity := Cap, budget := B, hidden := Hidden, estimate := E,
            tripped := Tripped, per_call := PerCall},
     S = #{rate := N}) ->
    Floor = R * D,
    Aim = B * ?AIM * Cap,
    {Shed, S1, Left} = case Floor > Aim of
                           true -> shed(Load, S);
                           false -> {[], S, R}
                       end,
    %% The rate is for the calls the tracer sees: those of the processes the fuse untraced
    %% (`Hidden') count for what to shed, not for the rate, which would only hide the
    %% functions to shed from the next ticks (at 1 in 10,000 no function was counted any
    %% more, and fresh processes were untraced by the floor of functions none saw). Of the
    %% calls left, the share the tracer sees.
    Seen = case R > 0 of
               true -> Left * max(0.0, R - Hidden) / R;
               false -> 0.0
           end,
    Needed = needed(Load#{reaching := Seen}, B),
    %% Where the floor is the cost, a higher rate takes nothing off it and hides the hot
    %% functions from the next ticks' shedding (their sampled counts fall to nothing): the
    %% rate is then only what the traced part needs. It does not fall while the functions
    %% shed are taken off (a second on a busy server): until then their calls cost it. Over
    %% the budget with the floor under the aim, the rate rises a step at least; a trip of the
    %% fuse with the estimate within the budget sheds, and the rate is what it needs. Unless
    %% the calls the tracer saw, refused, cost under the aim (`SeenFloor'): then what spent a
    %% thread's share was the calls it traced, and the rate rises a step too. Fresh workers
    %% were traced at birth and untraced within milliseconds, each in turn, the estimate over
    %% the tick reading next to nothing: at 1 in 1 a session of 0.05 timed 13 k calls in 8 s.
    %% A trip raises the rate only while the calls traced make most of a call's cost: at 1
    %% in N a call costs the floor D and (PerCall - D) / N more. Past that, a higher rate
    %% takes little off a thread's cost: the trips are the floor's, a process's bursts of
    %% calls refused (on yaws under wrk, processes born per connection tripped the fuse
    %% 4 times a tick with all of their calls refused; each trip raised the rate a step,
    %% to 1 in 1,000,000 within 4 s, and half the sessions timed 19 to 83 calls).
    SeenFloor = max(0.0, R - Hidden) * D,
    TracedMost = (PerCall - D) / N > D,
    New = if
              Tripped, SeenFloor =< Aim, TracedMost -> max(N + 1, Needed);
              Tripped, SeenFloor =< Aim -> max(N, Needed);
              Floor > Aim; E =< B -> max(N, Needed);
              true -> max(N + 1, Needed)
          end,
    {ShedDecisions, S2} = case Shed of
                              [] -> {[], S1};
                              _ -> {[{shed, Shed}], S1}
                          end,
    {RateDecisions, S3} = set_rate(nice(New), S2),
    %% The rate first: it takes effect at once, where each function shed waits for the
    %% code barrier (200 functions took a second on a busy server).
    {RateDecisions ++ ShedDecisions, S3}.

%% Under the aim for a while: the rate falls where the cost at a lower one stays at the
%% aim. Under ?AIM, not only under ?LOW: where the refused calls of the functions with a
%% pattern make most of the estimate (the floor, over half the budget on yaws), the rate
%% never fell, and a session sampled 1 in 50 all along with room for 1 in 20 (6.7 k calls
%% timed in 8 s). Not in the first moment: there only under ?LOW (decide/2). At rate 1,
%% well under the budget (?LOW) for a while, a shed function comes back.
under(_Load, S = #{aim_ticks := Aim}) when Aim < ?SETTLE ->
    {[], S};
under(Load = #{budget := B}, S = #{rate := N}) when N > 1 ->
    New = nice(needed(Load, B)),
    case New < N of
        true -> set_rate(New, S#{low_ticks := 0, aim_ticks := 0});
        false -> {[], S}
    end;
under(Load, S = #{low_ticks := Low}) when Low >= ?SETTLE ->
    restore(Load, S);
under(_Load, S) ->
    {[], S}.

%% Whether the refused calls alone (the floor) take over ?FLOOR_HIGH of the whole budget
%% while the session samples (1 in N > 1), its patterns all set (not `settling') and its
%% first moment over: sampling then times few calls (on yaws, a floor of 0.7 of the budget
%% kept 1 in 50 for a whole session, 8.7 k calls timed), and only shedding can give the
%% traced part room. At 1 in 1 every call is timed already: nothing to gain.
floor_bound(#{reaching := R, discard_ns := D, capacity := Cap, budget := B, settling := Settling},
            S = #{rate := N}) ->
    N > 1 andalso not Settling andalso not cautious(S) andalso R * D > ?FLOOR_HIGH * B * Cap.

%% Floor-bound for ?SETTLE ticks: the functions whose calls make the floor are shed, as
%% over/2 sheds them (to ?SHED_TO of the budget), and then the rate is set to what the rest
%% needs for the aim: a fall where the floor was the cost (the rest's calls are counted
%% as if the work sped up by what was shed, as take/7 counts them, so it may stay or rise
%% a step where the traced part was most of it). The rate comes second: each shed waits for the code barrier in the
%% tick (ferrotrace_overhead applies the decisions in order), so the functions are off
%% before the rate lets more of the rest's calls through. Nothing comes back before the
%% rate is 1 and the estimate well under the budget (restore/2), where the floor is a
%% fraction of the estimate: shedding and taking back do not cycle.
unfloor(Load = #{budget := B}, S) ->
    case shed(Load, S) of
        {[], S1, _Left} ->
            {[], S1};
        {Shed, S1, Left} ->
            {RateDecisions, S2} = set_rate(nice(needed(Load#{reaching := Left}, B)), S1),
            {[{shed, Shed} | RateDecisions], S2}
    end.

%% The rate (1 in N) that puts the cost at ?AIM of the budget; where the floor alone is
%% over it, the rate that keeps the traced part at half of it.
needed(#{reaching := R, per_call := PerCall, discard_ns := D, capacity := Cap}, B) ->
    Room = B * ?AIM * Cap - R * D,
    Variable = R * (PerCall - D),
    if
        Variable =< 0 -> 1;
        %% The floor alone is over the aim: shedding, not the rate, must take it down, and
        %% the next ticks must still see which functions are hot. The traced part is kept
        %% at half the aim, not sampled out of sight.
        Room =< 0 -> min(?MAX_RATE, max(1, ceil(Variable / (B * ?AIM * Cap / 2))));
        true -> min(?MAX_RATE, max(1, ceil(Variable / Room)))
    end.

set_rate(N, S = #{rate := N}) ->
    {[], S};
set_rate(N, S = #{rate := _, history := H, changes := C, estimate := E, last := #{elapsed_ms := At}}) ->
    {[{rate, N}], S#{rate := N, history := lists:sublist([{At, N, E} | H], ?HISTORY), changes := C + 1}}.

%% 1, 2, 5, 10, 20, 50, ...: the least such value at least `N' (or at most, falling).
nice(N) when N >= ?MAX_RATE -> ?MAX_RATE;
nice(N) -> hd([V || V <- steps(), V >= N]).


steps() ->
    [M * P || P <- [1, 10, 100, 1000, 10000, 100000], M <- [1, 2, 5]] ++ [?MAX_RATE].

%% The functions to shed, those whose calls make the cost first (the most calls per
%% second: a rarely called function the operator asked about stays), until the floor is at
%% ?SHED_TO of the budget; the calls reaching the tracer that are left. Not one whose calls
%% make a floor under ?SHED_LEAST, unless its rate is a guess (`Guessed': it may be called
%% far more often): where the model reads the calls of the processes the fuse untraced as
%% costing more than the node has (through a pattern, an untraced process's call costs
%% less than a refused one), the floor left never read as low enough (take/7), and a trip
%% of fresh workers shed every function the session knew of: 110 to 170, the last 60 to 90
%% at 35 to 1,500 calls a second, each change a pause of the node.
shed(#{reaching := R, discard_ns := D, capacity := Cap, functions := Functions, budget := B, tripped := Tripped,
       guessed := Guessed},
     S = #{shed := Shed, unsheddable := Never,
           tick := T, last := #{elapsed_ms := At}}) ->
    Ordered = hottest_first([{MFA, Rate} || {MFA, Rate, _Mean} <- Functions, Rate > 0,
                                            not maps:is_key(MFA, Shed), not maps:is_key(MFA, Never),
                                            Rate * D / Cap >= ?SHED_LEAST orelse maps:is_key(MFA, Guessed)]),
    Chosen = take(Ordered, R * D / Cap, 0.0, B * ?SHED_TO, D / Cap, ?SHED_MAX, []),
    ShedRate = lists:sum([Rate || {_, Rate} <- Chosen]),
    %% On a node whose schedulers are busy, what the shed functions cost goes to the work,
    %% which then calls the others more often (see take/7).
    Left = (R - ShedRate) / max(0.5, 1 - ShedRate * D / Cap),
    {[MFA || {MFA, _} <- Chosen], mark_shed([{MFA, round(Rate)} || {MFA, Rate} <- Chosen], T, At, Tripped, Guessed, S),
     max(0, Left)}.

%% Records `Chosen' (`{MFA, CallsPerSecond}', hottest first) as shed at tick `Tick', `At' ms:
%% in `shed' (with whether the fuse had tripped, `Trip'), their count of times shed, and
%% the log, newest first, a batch hottest first (past ?SHED_LOG the coldest of the oldest
%% go), those whose rate is a guess (keys of `Guessed', see load/3) marked `guessed'.
mark_shed(Chosen, Tick, At, Trip, Guessed, S = #{shed := Shed, shed_log := Log, times := Times}) ->
    S#{shed := maps:merge(Shed, maps:from_list([{MFA, #{rate => Rate, tick => Tick, at => At, trip => Trip}} || {MFA, Rate} <- Chosen])),
       times := lists:foldl(fun({MFA, _}, Acc) -> maps:update_with(MFA, fun(X) -> X + 1 end, 1, Acc) end, Times, Chosen),
       shed_log := lists:sublist([logged(#{mfa => MFA, rate => Rate, shed_at => At}, is_map_key(MFA, Guessed))
                                  || {MFA, Rate} <- Chosen] ++ Log, ?SHED_LOG)}.

logged(Entry, true) -> Entry#{guessed => true};
logged(Entry, false) -> Entry.

%% Functions from `Ordered' until the floor left is at most `Target' (fractions of the
%% capacity; `PerCall' the floor's fraction per call per second). The floor left counts the
%% work speeding up as the shed functions' cost goes to it, as on a node whose schedulers
%% are busy: `(Floor - Shed) / (1 - Shed)' (where they are not, a few more functions are
%% shed than needed, which the next ticks' take-backs correct).
take([], _Floor, _Shed, _Target, _PerCall, _Max, Acc) ->
    lists:reverse(Acc);
take(_, _Floor, _Shed, _Target, _PerCall, 0, Acc) ->
    lists:reverse(Acc);
take([{MFA, Rate} | Rest], Floor, Shed, Target, PerCall, Max, Acc) ->
    case Shed < 1 andalso (Floor - Shed) / (1 - Shed) =< Target of
        true -> lists:reverse(Acc);
        false -> take(Rest, Floor, Shed + Rate * PerCall, Target, PerCall, Max - 1, [{MFA, Rate} | Acc])
    end.

%% `[{MFA, CallsPerSecond}]', the most called first (ties: the greater MFA first).
hottest_first(Functions) ->
    [{MFA, Rate} || {Rate, MFA} <- lists:reverse(lists:sort([{Rate, MFA} || {MFA, Rate} <- Functions]))].

%% Of `Functions' (`{MFA, CallsPerSecond}'), those to hold back at budget `Budget' where the
%% floor of all (`Floor', a fraction of the capacity) is over ?AIM of it: the most called
%% first until the floor of the rest is at ?SHED_TO of it (hold/5); none where it is not.
hold_back(Functions, Floor, Budget, PerCall, Max) when Floor > Budget * ?AIM ->
    hold(hottest_first(Functions), Floor, Budget * ?SHED_TO, PerCall, Max);
hold_back(_Functions, _Floor, _Budget, _PerCall, _Max) ->
    [].

%% The most called of `Ordered' until the floor of the rest is at most `Target' (fractions
%% of the capacity, `PerCall' the floor's per call per second), at most `Max'. Their rates
%% were counted untraced: unlike take/7's, the rest's do not rise as these leave.
hold(_Ordered, Floor, Target, _PerCall, _Max) when Floor =< Target -> [];
hold(_Ordered, _Floor, _Target, _PerCall, 0) -> [];
hold([], _Floor, _Target, _PerCall, _Max) -> [];
hold([{MFA, Rate} | Rest], Floor, Target, PerCall, Max) ->
    [{MFA, Rate} | hold(Rest, Floor - Rate * PerCall, Target, PerCall, Max - 1)].

%% At rate 1, well under the budget: the least hot shed function whose wait is over comes
%% back. Its rate now is unknown (it has no pattern): the next tick measures it, and sheds
%% it again if the node is back over the budget, with a wait twice as long; still under
%% ?LOW, the next one comes back.
restore(_Load, S = #{shed := Shed}) when map_size(Shed) =:= 0 ->
    {[], S};
restore(#{estimate := E, per_call := PerCall, capacity := Cap, budget := B},
        S = #{shed := Shed, tick := T, times := Times, last := #{elapsed_ms := Now}}) ->
    Ready = lists:sort([{Rate, MFA} || {MFA, #{rate := Rate, tick := Since, at := At}} <- maps:to_list(Shed),
                                       Wait <- [1 bsl (maps:get(MFA, Times) - 1)],
                                       T - Since >= ?RESTORE_WAIT * Wait orelse Now - At >= ?RESTORE_WAIT_MS * Wait]),
    case Ready of
        [{_, Coolest} | _] ->
            %% The hottest whose calls, at their rate when shed, fit in half the room left
            %% under the aim: the figures the operator came for. None fits: the coolest
            %% alone, a probe.
            Room = (B * ?AIM - E) * Cap / 2,
            MFAs = case fitting(lists:reverse(Ready), Room, PerCall, []) of
                       [] -> [Coolest];
                       Fit -> Fit
                   end,
            {[{restore, MFAs}], taken_back(MFAs, S)};
        [] ->
            {[], S}
    end.

%% Of `Ready' (hottest first), those whose calls together cost at most `Room' (ns per
%% second) at `PerCall' each, the hottest first.
fitting([], _Room, _PerCall, Fit) ->
    lists:reverse(Fit);
fitting([{Rate, MFA} | Rest], Room, PerCall, Fit) when Rate * PerCall =< Room ->
    fitting(Rest, Room - Rate * PerCall, PerCall, [MFA | Fit]);
fitting([_ | Rest], Room, PerCall, Fit) ->
    fitting(Rest, Room, PerCall, Fit).

%% The first tick at the whole budget: what the first moment held back or shed beyond
%% what the whole budget holds back comes back at once. Held as first/2 holds at the whole
%% budget (hold_back/5), the floor of all counting the calls reaching the tracer now and
%% those of the functions taken off, at their rate then. The rate rises at once for what
%% comes back, where the whole budget's rate for it is above the first moment's: left to
%% the next tick (in a trial on yaws, 116 functions back at 1 in 1, and the next tick,
%% 1 s later, read three times the budget). It falls as the next ticks allow (under/2).
%% The functions still off come back as shed functions do (restore/2), and so do those
%% shed where the fuse had tripped: the fuse's share is the whole budget's, so they were
%% shed for what they cost against it, and their rates were estimated from the calls of
%% processes no callback saw (given back here, 60 to 75 functions of fresh workers that
%% arrived 1 s in were shed again at the next trip, 150 ms later). Nothing comes back here
%% where the fuse tripped or a tick read over the whole budget in the first moment (`moved'):
%% the load moved since the start counted it, and what was held back at its rates then may
%% be hotter now; it comes back as shed functions do, on what the ticks read then. A
%% tenfold burst 1 s in (make busy's burst_10x) had the functions the start held back
%% given back half a second into it, and read 0.74 to 0.86 of untraced until the next
%% tick shed them again.
open(Load, S = #{moved := true}) ->
    decide(Load, S);
open(Load = #{reaching := R, discard_ns := D, capacity := Cap, budget := B}, S = #{shed := Shed, rate := N}) ->
    Off = [{MFA, Rate} || {MFA, #{rate := Rate, trip := false}} <- maps:to_list(Shed)],
    Floor = (R + lists:sum([Rate || {_, Rate} <- Off])) * D / Cap,
    Kept = hold_back(Off, Floor, B, D / Cap, length(Off)),
    case [{MFA, Rate} || {MFA, Rate} <- Off, not lists:keymember(MFA, 1, Kept)] of
        [] ->
            decide(Load, S);
        Back ->
            Whole = nice(needed(Load#{reaching := R + lists:sum([Rate || {_, Rate} <- Back])}, B)),
            %% The rate first, as over/2 sets it: it takes effect at once.
            {RateDecisions, S1} = set_rate(max(N, Whole), S),
            MFAs = [MFA || {MFA, _} <- Back],
            {RateDecisions ++ [{restore, MFAs}], (taken_back(MFAs, S1))#{low_ticks := 0, aim_ticks := 0}}
    end.

%% Whether a tick in the first moment says the load moved since the start counted it: the
%% fuse tripped, or the estimate is over the whole budget (over the first moment's half,
%% it may only be the caution's: what that sheds, open/2 gives back).
moved(#{tripped := true}, _S) -> true;
moved(#{estimate := E}, #{budget := B}) -> E > B.

%% `MFAs' taken back: no longer shed, and marked so in the log.
taken_back(MFAs, S = #{shed := Shed, shed_log := Log, last := #{elapsed_ms := At}}) ->
    S#{shed := maps:without(MFAs, Shed), shed_log := lists:foldl(fun(MFA, L) -> restored(MFA, At, L) end, Log, MFAs)}.

%% Marks the newest shed entry of `MFA' as taken back.
restored(MFA, At, [E = #{mfa := MFA} | Rest]) when not is_map_key(restored_at, E) ->
    [E#{restored_at => At} | Rest];
restored(MFA, At, [E | Rest]) ->
    [E | restored(MFA, At, Rest)];
restored(_MFA, _At, []) ->
    [].
