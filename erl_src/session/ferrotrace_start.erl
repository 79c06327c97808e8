%%% @private
%%% @doc Starting a session on this node for `ferrotrace:session/1', `calls/2' and
%%% `processes/2' (`nodes => [Node]' is a cluster session, ferrotrace_cluster, whose parts
%%% start theirs here). A start reads top to bottom in {@link start/3}:
%%% <ol>
%%% <li>`read': the options read and checked once, into the settings every later step reads
%%% (ferrotrace_options:read/4);</li>
%%% <li>`listen': with `metrics', the Prometheus endpoint's socket opened, so that a port in
%%% use refuses the start before anything runs (ferrotrace_metrics; the keeper attaches the
%%% session to it);</li>
%%% <li>`load_tracer': the NIF module loaded, once at a time (ferrotrace_code);</li>
%%% <li>`check_engine': the engine's options read as its session will read them
%%% (ferrotrace_tracer:check_options/1), so that a bad one is refused before the slower
%%% steps;</li>
%%% <li>`calibrate': for calls/2, what a traced call costs its caller here, before any
%%% pattern is set (ferrotrace_calibrate);</li>
%%% <li>`first_moment': with a budget, where it starts: the functions held back and the
%%% per-call rate (ferrotrace_budget, from the calls counted by ferrotrace_tracing);</li>
%%% <li>`keeper': the keeper (ferrotrace_keeper), which creates the engine session, sets
%%% the patterns and flags (ferrotrace_tracing, ferrotrace_backend) and starts every process
%%% beside it.</li>
%%% </ol>
%%% Answers as the API functions do: `{ok, Session}' or `{error, Reason}', an unknown
%%% option explained with every option the entry takes.
-module(ferrotrace_start).

-export([session/1, calls/2, processes/2]).

%% How long a budgeted start counts its functions' calls (ms), for where it starts; and
%% measures the node's work untraced before that (ms), for the budget's measured cost.
-define(COUNT_MS, 25).
-define(BASELINE_MS, 20).

%% @doc A raw session: `ferrotrace:session(Options)'.
-spec session(term()) -> {ok, ferrotrace_tracer:session_id()} | {error, term()}.
session(Options) ->
    start(session, none, Options).

%% @doc `ferrotrace:calls(Spec, Options)' on this node.
-spec calls(term(), term()) -> {ok, ferrotrace_tracer:session_id()} | {error, term()}.
calls(Spec, Options) ->
    start(calls, Spec, Options).

%% @doc `ferrotrace:processes(Kinds, Options)'.
-spec processes(term(), term()) -> {ok, ferrotrace_tracer:session_id()} | {error, term()}.
processes(Kinds, Options) ->
    start(processes, Kinds, Options).

%% The caller tells who it is (only it can tell whether it is a shell's evaluator); the rest
%% runs in a process of ferrotrace's own, at high priority, which the caller waits for once:
%% at normal priority, among 50 runnable processes, each of a start's dozens of waits (for
%% the registry, the calibration, the keeper) cost the caller a turn in the run queue, and a
%% start took 15 to 26 s.
start(Entry, What, Options) ->
    Caller = ferrotrace_owner:caller(),
    as_own_process(fun() ->
                           case ferrotrace_options:read(Entry, What, Options, Caller) of
                               {ok, Settings} ->
                                   explained(steps(Settings, [fun listen/1, fun load_tracer/1, fun check_engine/1, fun calibrate/1,
                                                              fun first_moment/1, fun keeper/1]), Settings);
                               {error, _} = Error ->
                                   Error
                           end
                   end).

%% Each step takes the settings and answers them completed, the session's id at the last,
%% or a refusal, after which what the steps opened is closed.
steps(Settings, Steps) ->
    steps_from(Settings#{started => #{at => erlang:monotonic_time(millisecond)}}, Steps).

steps_from(Settings, [Step | Rest]) ->
    case Step(Settings) of
        {ok, Next} when Rest =/= [] -> steps_from(Next, Rest);
        {ok, _} = Done -> Done;
        {error, _} = Error -> ok = closed(Settings), Error
    end.

%% `metrics => #{port => P, ...}': the endpoint listens before anything runs, so that a port
%% in use refuses the start with nothing started (ferrotrace_metrics).
listen(Settings = #{metrics := none}) ->
    {ok, Settings};
listen(Settings = #{metrics := Metrics}) ->
    case ferrotrace_metrics:listen(Metrics) of
        {ok, Endpoint} -> {ok, Settings#{metrics := Endpoint}};
        {error, _} = Error -> Error
    end.

%% A refused start closes the endpoint it opened (a started keeper has it).
closed(#{metrics := {_, _} = Endpoint}) -> ferrotrace_metrics:close(Endpoint);
closed(#{}) -> ok.

%% Not code:load_file/1, and one load at a time: see ferrotrace_code.
load_tracer(Settings) ->
    case ferrotrace_code:ensure_tracer() of
        {module, _} -> {ok, Settings};
        {error, {nif_not_loaded, _Path, _Reason}} = Error -> Error;
        {error, Reason} -> {error, {nif_not_loaded, Reason}}
    end.

%% The engine's options as the keeper's new session will read them: a bad one was refused
%% only there, after the calibration and the budget's count (0.3 to 0.6 s among busy
%% processes, every time: the slow suite's six bad options took 9.7 s).
check_engine(Settings = #{engine := Engine}) ->
    case ferrotrace_tracer:check_options(Engine) of
        ok -> {ok, Settings};
        %% As the keeper answers: a caller's huge key is not echoed whole.
        {error, Reason} -> {error, ferrotrace_hint:brief(Reason)}
    end.

%% calls/2 measures the probe effect before its patterns are set; the cost to take out
%% reaches the engine with its options (those given by hand win), what was found the
%% summary (`calibration').
calibrate(Settings = #{compensate := none}) ->
    {ok, timed(calibration_ms, Settings)};
calibrate(Settings = #{compensate := Compensate, engine := Engine}) ->
    case ferrotrace_calibrate:for_session(Compensate) of
        {ok, Costs, Found} ->
            {ok, timed(calibration_ms, Settings#{engine := maps:merge(Costs, Engine), calibration => Found})};
        {error, _} = Error ->
            Error
    end.

%% A budget starts cautious (ferrotrace_budget:first/2): the functions held back and the
%% per-call rate, from its functions' calls counted over ?COUNT_MS before any pattern is set
%% (ferrotrace_tracing:count_calls/3); where they cannot be counted (a session of other
%% kinds), the rate from the node's reductions (ferrotrace_budget:initial_rate/2). First,
%% the node's work per busy scheduler time over ?BASELINE_MS, untraced: what the budget
%% measures the session's cost against (ferrotrace_nodeload; counting calls halves it, so
%% it comes before). The budget's tick (ferrotrace_overhead) starts from there.
first_moment(Settings = #{budget := none}) ->
    {ok, timed(counting_ms, Settings)};
first_moment(Settings = #{budget := Budget, tracing := Tracing, engine := Engine}) ->
    Fraction = case Budget of
                   {default, F} -> F;
                   F -> F
               end,
    Baseline = ferrotrace_nodeload:baseline(?BASELINE_MS),
    {Held, Rate} = held_and_rate(Fraction, Settings, Baseline),
    Sampled = case Rate of
                  1 -> Engine;
                  _ -> maps:merge(#{sample => {calls, Rate}}, Engine)
              end,
    {ok, timed(counting_ms, Settings#{engine := Sampled, tracing := paced(held(Tracing, Held), Fraction),
                                      budget := {Budget, Rate, Held, Baseline}})}.

held_and_rate(Fraction, Settings = #{tracing := Tracing}, Baseline) ->
    Node = #{schedulers => erlang:system_info(schedulers_online),
             baseline => Baseline,
             calibration => case Settings of
                                #{calibration := #{calibration := C}} when is_map(C) -> C;
                                _ -> undefined
                            end},
    Counted = case Tracing of
                  #{specs := Specs} -> ferrotrace_tracing:count_calls(Specs, ?COUNT_MS, Baseline);
                  _ -> {error, no_functions}
              end,
    case Counted of
        {ok, Functions} ->
            ferrotrace_budget:first(Fraction, Node#{functions => Functions});
        {error, _} ->
            PerS = case Baseline of
                       #{reductions_per_s := R} -> R;
                       undefined -> 0.0   % idle schedulers
                   end,
            {[], ferrotrace_budget:initial_rate(Fraction, Node#{reductions_per_s => PerS})}
    end.

%% The full reading of loops after the start, within the budget (ferrotrace_budget:read_pace/2).
paced(Tracing = #{specs := _}, Budget) ->
    Tracing#{read_pace => ferrotrace_budget:read_pace(Budget, erlang:system_info(schedulers_online))};
paced(Tracing, _Budget) ->
    Tracing.

held(Tracing, []) -> Tracing;
held(Tracing, Held) -> Tracing#{held => [MFA || {MFA, _} <- Held]}.

%% The keeper: the engine session, the patterns and flags, the processes beside it.
keeper(Settings) ->
    ferrotrace_keeper:start(Settings).

%% Where the start's time went, for the summary's `start': the step `Part' ended now.
timed(Part, Settings = #{started := Started = #{at := At}}) ->
    Last = lists:sum([Ms || {Key, Ms} <- maps:to_list(Started), Key =/= at]),
    Settings#{started := Started#{Part => erlang:monotonic_time(millisecond) - At - Last}}.

%% An unknown option, named by the engine with its own options, is answered with every
%% option the entry takes and the nearest one when the key looks like a typo of it.
explained({error, {unknown_option, Key, Engine}}, #{accepted := Own}) when is_list(Engine), is_list(Own) ->
    Names = lists:usort(Own ++ Engine),
    Accepted = lists:join(", ", [atom_to_list(N) || N <- Names]),
    {error, {unknown_option, Key, ferrotrace_hint:hinted(Key, Names, ["one of ", Accepted])}};
explained(Result, _Settings) ->
    Result.

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
                                       ok = ferrotrace_code:preload_for_start(),
                                       _ = ferrotrace_registry:ensure_started(),
                                       ok = ferrotrace_own:enter(),
                                       %% What reads a session, loaded as it starts.
                                       ok = ferrotrace_code:preload_rest(),
                                       Caller ! {Ref, Fun()}
                               end, [monitor | ferrotrace_own:spawn_options()]),
    receive
        {Ref, Result} ->
            erlang:demonitor(Monitor, [flush]),
            Result;
        {'DOWN', Monitor, process, Pid, Reason} ->
            {error, {start_failed, ferrotrace_hint:brief(Reason)}}
    end.
