%%% @private
%%% @doc Starting a session for `ferrotrace:session/1', `calls/2' and `processes/2': the
%%% options checked (ferrotrace_options), the tracer module loaded (ferrotrace_code), a keeper
%%% started with its settings (ferrotrace_session), and with `intervals => Ms' the interval
%%% snapshots beside it (ferrotrace_intervals). Sessions on this node only: `nodes => [Node]'
%%% is a cluster session (ferrotrace_cluster, whose parts start theirs with this module).
%%% Answers as the API functions do: `{ok, Session}' or `{error, Reason}'; an unknown option
%%% is explained by the caller.
-module(ferrotrace_start).

-export([session/1, calls/2, processes/2]).

%% How long a budgeted start counts its functions' calls (ms), for where it starts; and
%% measures the node's work untraced before that (ms), for the budget's measured cost.
-define(COUNT_MS, 40).
-define(BASELINE_MS, 30).
%% How often, and how many times, a calibration after the start looks whether the session's
%% steps are over (see settled/2).
-define(SETTLED_MS, 50).
-define(SETTLED_TRIES, 100).
%% A calibration after the start: tries, and the wait before the next (see measured/1).
-define(MEASURE_TRIES, 3).
-define(MEASURE_AGAIN_MS, 200).

%% @doc A raw session: `ferrotrace:session(Options)'.
-spec session(term()) -> {ok, ferrotrace_tracer:session_id()} | {error, term()}.
session(Options0) ->
    as_guest(Options0, fun(Options, Owner) -> start(Options, none, none, Owner) end).

%% @doc `ferrotrace:calls(Spec, Options)' on this node: a local session (`nodes => [Node]'
%% is ferrotrace_cluster's, see ferrotrace_cluster:calls/2).
-spec calls(term(), term()) -> {ok, ferrotrace_tracer:session_id()} | {error, term()}.
calls(Spec, Options0) ->
    as_guest(Options0,
             fun(Options, Owner) ->
                     case ferrotrace_options:calls(Spec, Options) of
                         {ok, Tracing, Rest} ->
                             start(Rest, Tracing, {compensate, maps:get(compensate, Options, true)}, Owner);
                         {error, _} = Error ->
                             Error
                     end
             end).

%% @doc `ferrotrace:processes(Kinds, Options)'.
-spec processes(term(), term()) -> {ok, ferrotrace_tracer:session_id()} | {error, term()}.
processes(Kinds, Options0) ->
    as_guest(Options0,
             fun(Options, Owner) ->
                     case ferrotrace_options:processes(Kinds, Options) of
                         {ok, Tracing, Rest} -> start(Rest, Tracing, none, Owner);
                         {error, _} = Error -> Error
                     end
             end).

%% The caller's part of a start: its options as a map and who owns the session (only the
%% caller can tell whether it is a shell's evaluator). The rest runs in a process of
%% ferrotrace's own (ferrotrace_own: high priority), which the caller waits for once: at
%% normal priority, among 50 runnable processes, each of a start's dozens of waits (for
%% the registry, the calibration, the keeper) cost the caller a turn in the run queue, and
%% a start took 15 to 26 s.
as_guest(Options0, Start) ->
    case ferrotrace_options:to_map(Options0) of
        {ok, Options} ->
            case ferrotrace_options:owner(Options) of
                {ok, Owner} -> as_own_process(fun() -> Start(maps:remove(owner, Options), Owner) end);
                {error, _} = Error -> Error
            end;
        {error, _} = Error ->
            Error
    end.

as_own_process(Fun) ->
    Ref = make_ref(),
    Caller = self(),
    {Pid, Monitor} = spawn_opt(fun() ->
                                       %% The modules first (the registry's among them:
                                       %% in one read, not one load each), then the
                                       %% registry's tables, where enter/0 records this
                                       %% process: a node's first start recorded nothing,
                                       %% and its session traced the start's own calls
                                       %% after its flags were set.
                                       ok = ferrotrace_code:preload(),
                                       _ = ferrotrace_registry:ensure_started(),
                                       ok = ferrotrace_own:enter(),
                                       Caller ! {Ref, Fun()}
                               end, [monitor | ferrotrace_own:spawn_options()]),
    receive
        {Ref, Result} ->
            erlang:demonitor(Monitor, [flush]),
            Result;
        {'DOWN', Monitor, process, Pid, Reason} ->
            {error, {start_failed, ferrotrace_hint:brief(Reason)}}
    end.

%% `metrics => #{port => P, ...}': the endpoint listens before the session starts (a port in
%% use refuses the start with nothing started), then serves it (ferrotrace_metrics); a
%% start that fails closes it.
start(Options = #{metrics := Metrics}, Tracing, Probe, Owner) ->
    case ferrotrace_metrics:check(Metrics) of
        {ok, Settings} ->
            case ferrotrace_metrics:listen(Settings) of
                {ok, Endpoint} ->
                    Started = start_session(maps:remove(metrics, Options), Tracing, Probe, Owner),
                    case Started of
                        {ok, Id} ->
                            case ferrotrace_metrics:attach(Endpoint, Id) of
                                {ok, _Url} -> Started;
                                {error, _} = Error -> ok = ferrotrace_metrics:close(Endpoint), Error
                            end;
                        {error, _} ->
                            ok = ferrotrace_metrics:close(Endpoint),
                            Started
                    end;
                {error, _} = Error ->
                    Error
            end;
        {error, _} = Error ->
            Error
    end;
start(Options, Tracing, Probe, Owner) ->
    start_session(Options, Tracing, Probe, Owner).

%% A keeper (ferrotrace_session) for the session, with `Options' less those of calls/2. A
%% calls/2 session first measures the probe effect (ferrotrace_calibrate), before its
%% patterns are set; the cost to take out reaches the engine with its options.
start_session(Options, Tracing, Probe, Owner) ->
    T0 = erlang:monotonic_time(millisecond),
    %% Not code:load_file/1, and one load at a time: see ferrotrace_code.
    case ferrotrace_code:ensure_tracer() of
        {module, _} ->
            case {ferrotrace_options:settings(Options, Tracing, Owner), ferrotrace_intervals:check(Options),
                  check_probe(Probe), budget(Options, Tracing), ferrotrace_trees:engine(Options)} of
                {{ok, Settings, Engine0}, {ok, Intervals}, ok, {ok, Budget}, {ok, Trees}} ->
                    %% `trees => #{...}' reaches the engine as its flat options.
                    Engine = maps:merge(maps:remove(trees, Engine0), Trees),
                    case calibrate(Probe) of
                        {ok, ProbeOptions, ProbeInfo} ->
                            T1 = erlang:monotonic_time(millisecond),
                            %% A budget starts cautious: functions held back and the
                            %% per-call rate from the start.
                            {Cautious, Rate, Held, Baseline} = first(fraction(Budget), ProbeInfo, Tracing),
                            T2 = erlang:monotonic_time(millisecond),
                            %% Options given by hand win over the calibration's.
                            Started = ferrotrace_session:start(maps:merge(maps:merge(ProbeOptions, Cautious), Engine),
                                                               paced(held(Tracing, Held), fraction(Budget)), Settings),
                            HandSet = maps:is_key(compensate_call_ns, Engine) orelse maps:is_key(compensate_return_ns, Engine),
                            with_timing(calibrate_after(with_budget(with_intervals(with_info(Started, ProbeInfo), Intervals), Budget,
                                                                    {Rate, Held, Baseline}),
                                                        ProbeInfo, Probe =:= {compensate, true} andalso not HandSet),
                                        #{calibration_ms => T1 - T0, counting_ms => T2 - T1}, T0);
                        {error, _} = Error ->
                            Error
                    end;
                {{error, _} = Error, _, _, _, _} ->
                    Error;
                {_, {error, _} = Error, _, _, _} ->
                    Error;
                {_, _, {error, _} = Error, _, _} ->
                    Error;
                {_, _, _, {error, _} = Error, _} ->
                    Error;
                {_, _, _, _, {error, _} = Error} ->
                    Error
            end;
        {error, {nif_not_loaded, _Path, _Reason}} = Error ->
            Error;
        {error, Reason} ->
            {error, {nif_not_loaded, Reason}}
    end.

check_probe({compensate, Compensate}) when not is_boolean(Compensate) ->
    {error, {bad_option, {compensate, Compensate, <<"true or false">>}}};
check_probe(_) ->
    ok.

calibrate(none) -> {ok, #{}, #{}};
calibrate({compensate, Compensate}) -> ferrotrace_calibrate:for_session(Compensate).

%% The node's calibration measured anew once the session runs, in a process of
%% ferrotrace's own, where ferrotrace_calibrate:for_session/1 found it `pending' (none yet,
%% the schedulers full) or `stale' (older than five minutes): a start does not wait for it.
%% A pending one is given to the session: its compensation from then on (`Compensate':
%% `compensate => true' and no cost set by hand), its summary's `calibration', and the
%% budget's costs at its next tick (ferrotrace_overhead). A stale one stays the session's;
%% the new one is the next starts'.
calibrate_after({ok, Id}, #{calibration := Calibration}, Compensate)
  when Calibration =:= pending; is_map_key(stale, Calibration) ->
    _ = spawn_opt(fun() ->
                          ok = ferrotrace_own:enter(),
                          ok = settled(Id, ?SETTLED_TRIES),
                          Measured = measured(?MEASURE_TRIES),
                          case Calibration of
                              pending -> calibrated(Id, Compensate, Measured);
                              _ -> ok
                          end
                  end, ferrotrace_own:spawn_options()),
    {ok, Id};
calibrate_after(Started, _ProbeInfo, _Compensate) ->
    Started.

%% A calibration, tried again a little later where one failed: on OTP 25 and 26 a session
%% starting meanwhile flags every process before it takes its flags off ferrotrace's own,
%% the calibrating one among them.
measured(Tries) ->
    case ferrotrace_calibrate:calibrate() of
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

calibrated(Id, true, {ok, #{call_ns := CallNs, return_ns := ReturnNs} = Calibration}) ->
    %% An error: the session was released meanwhile.
    case ferrotrace_tracer:session_set_compensation(Id, CallNs, ReturnNs) of
        ok -> ferrotrace_registry:update(Id, #{calibration => Calibration, compensated => true});
        {error, _} -> ok
    end;
calibrated(Id, _Compensate, {ok, Calibration}) ->
    ferrotrace_registry:update(Id, #{calibration => Calibration});
calibrated(Id, _Compensate, {error, _} = Error) ->
    ferrotrace_registry:update(Id, #{calibration => Error}).

%% What the calibration found, for the summary (`calibration', `compensated').
with_info({ok, Id}, Info) when map_size(Info) > 0 ->
    _ = ferrotrace_registry:update(Id, Info),
    {ok, Id};
with_info(Started, _Info) ->
    Started.

%% Where the start's time went, for the summary's `start': the calibration's part and the
%% budget's counting (here), the code analysis and the tracing set up (the keeper's, in the
%% registry already), and the whole from this process's start on.
with_timing({ok, Id}, Parts, T0) ->
    _ = case ferrotrace_registry:lookup(Id) of
            {ok, Id, _Keeper, Info} ->
                Keeper = maps:get(start, Info, #{}),
                ferrotrace_registry:update(Id, #{start => maps:merge(Keeper, Parts#{total_ms => erlang:monotonic_time(millisecond) - T0})});
            error ->
                ok
        end,
    {ok, Id};
with_timing(Started, _Parts, _T0) ->
    Started.

%% `max_overhead => Fraction': checked, and refused beside `sample => {calls, N}' (the
%% budget sets the per-call rate itself). A spec with a `'_' module (every module of the
%% node) has a budget unless told otherwise (`max_overhead => none', or a sampling rate of
%% one's own): on schedulers kept busy, every traced call slows its process's time slice
%% (counted in reductions, not time), and every process waiting for a scheduler waits that
%% much longer: unbudgeted, a normal-priority process's ping took 100 to 180 ms during such
%% a session among 50 busy processes, against 10 ms untraced.
budget(#{max_overhead := none}, _Tracing) ->
    {ok, none};
budget(#{max_overhead := Budget, sample := {calls, _} = Sample}, _Tracing) ->
    {error, {bad_option, {max_overhead, Budget, iolist_to_binary(
        io_lib:format("the budget sets the per-call sampling rate itself: leave out sample => ~0p", [Sample]))}}};
budget(#{max_overhead := Budget}, _Tracing) ->
    case ferrotrace_budget:check(Budget) of
        ok -> {ok, Budget};
        {error, _} = Error -> Error
    end;
budget(#{sample := {calls, _}}, _Tracing) ->
    {ok, none};
budget(#{}, #{specs := Specs}) ->
    case [Spec || Spec <- Specs, element(1, Spec) =:= '_'] of
        [] -> {ok, none};
        [_ | _] -> {ok, {default, ferrotrace_budget:whole_node_default()}}
    end;
budget(#{}, _Tracing) ->
    {ok, none}.

fraction({default, Fraction}) -> Fraction;
fraction(Budget) -> Budget.

%% Where a budgeted session starts (ferrotrace_budget:first/2): the functions held back and
%% the per-call rate, from its functions' calls counted over ?COUNT_MS before any pattern
%% is set (ferrotrace_backend:count_calls/3); where they cannot be counted (a session of
%% other kinds), the rate from the node's reductions (ferrotrace_budget:initial_rate/2).
%% First, the node's work per busy scheduler time over ?BASELINE_MS, untraced: what the
%% budget measures the session's cost against (ferrotrace_nodeload; counting calls halves
%% it, so it comes before). `{EngineOptions, Rate, Held, Baseline}'.
first(none, _ProbeInfo, _Tracing) ->
    {#{}, 1, [], undefined};
first(Budget, ProbeInfo, Tracing) ->
    Baseline = ferrotrace_nodeload:baseline(?BASELINE_MS),
    Node = #{schedulers => erlang:system_info(schedulers_online),
             baseline => Baseline,
             calibration => case ProbeInfo of
                                #{calibration := C} when is_map(C) -> C;
                                _ -> undefined
                            end},
    Counted = case Tracing of
                  #{specs := Specs} -> ferrotrace_backend:count_calls(Specs, ?COUNT_MS, Baseline);
                  _ -> {error, no_functions}
              end,
    {Held, Rate} = case Counted of
                       {ok, Functions} -> ferrotrace_budget:first(Budget, Node#{functions => Functions});
                       {error, _} ->
                           PerS = case Baseline of
                                      #{reductions_per_s := R} -> R;
                                      undefined -> 0.0   % idle schedulers
                                  end,
                           {[], ferrotrace_budget:initial_rate(Budget, Node#{reductions_per_s => PerS})}
                   end,
    case Rate of
        1 -> {#{}, 1, Held, Baseline};
        _ -> {#{sample => {calls, Rate}}, Rate, Held, Baseline}
    end.

%% The full reading of loops after the start, within the budget (ferrotrace_budget:read_pace/2).
paced(Tracing = #{specs := _}, Budget) when is_number(Budget) ->
    Tracing#{read_pace => ferrotrace_budget:read_pace(Budget, erlang:system_info(schedulers_online))};
paced(Tracing, _Budget) ->
    Tracing.

held(Tracing, []) -> Tracing;
held(Tracing, Held) -> Tracing#{held => [MFA || {MFA, _} <- Held]}.

%% The budget's process (ferrotrace_overhead), beside the keeper and ending with it.
with_budget({ok, Id}, Budget, {Rate, Held, Baseline}) when Budget =/= none ->
    case ferrotrace_registry:lookup(Id) of
        {ok, Id, Keeper, _} -> _ = ferrotrace_overhead:start(Id, Keeper, {Budget, Rate, Held, Baseline}), ok;
        error -> ok
    end,
    {ok, Id};
with_budget(Started, _, _) ->
    Started.

%% `intervals => Ms': per-interval histograms for hdr_log (ferrotrace_intervals), taken
%% until the keeper ends.
with_intervals({ok, Id}, {_, _} = Intervals) ->
    case ferrotrace_registry:lookup(Id) of
        {ok, Id, Keeper, _} ->
            case ferrotrace_intervals:start(Id, Keeper, Intervals) of
                Pid when is_pid(Pid) -> ok = ferrotrace_registry:update(Id, #{intervals => Pid});
                {error, _} -> ok
            end;
        error ->
            ok
    end,
    {ok, Id};
with_intervals(Started, _) ->
    Started.
