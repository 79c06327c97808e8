%%% @doc Options as the API takes them, checked before anything starts: a map or, from
%%% Elixir (`duration: 1000') and old habits, a list of `{Key, Value}' pairs, where the first
%%% pair of a key counts (as `proplists:get_value/2' reads it). One reading for sessions,
%%% reports, the live view and exports, so that they agree on a repeated key and on the
%%% error. The options themselves are documented once, in the edoc of `ferrotrace:calls/2'.
%%%
%%% In the order a call meets them: {@link to_map/1}; the options of reports and the live
%%% view ({@link check/2}); a start's options, read once into its settings ({@link read/4}:
%%% what `calls/2' traces, {@link calls/2}, the owner (ferrotrace_owner) and the keeper's);
%%% the shape of those settings where the keeper takes them ({@link valid/1}).
-module(ferrotrace_options).

-export([to_map/1, check/2, default_width/0, terminal_width/0]).
-export([read/4, calls/2]).
-export([valid/1]).  % for ferrotrace_keeper:start/1

-type options() :: #{duration => pos_integer() | infinity,
                     ring_size => pos_integer(),
                     max_functions => pos_integer(),
                     max_open_calls => pos_integer(),
                     max_events => pos_integer() | infinity,
                     max_rate => {pos_integer(), pos_integer()} | infinity,
                     on_limit => stop | drop,
                     sample => pos_integer() | {calls | processes, pos_integer()},
                     slowest => non_neg_integer(),
                     threshold => non_neg_integer() | infinity,
                     max_slow_calls => pos_integer(),
                     recent => non_neg_integer(),
                     intervals => pos_integer() | none,   % none: calls/2 only
                     max_intervals => pos_integer(),
                     max_overhead => number(),
                     args => boolean(),
                     max_term_bytes => pos_integer(),
                     key => none | message | caller,
                     max_keys => pos_integer(),
                     aggregators => pos_integer() | auto,
                     name => atom(),
                     owner => pid() | none,
                     keep => non_neg_integer() | infinity,
                     pids => ferrotrace:pid_spec(),
                     follow => ferrotrace_scope:follow(),
                     scope => local | global,
                     also => [ferrotrace_activity:kind()],
                     callers => boolean(),
                     nodes => [node()],
                     trees => #{slower_than := non_neg_integer(), root => term(),
                                keep => pos_integer(), max_nodes => pos_integer()},
                     capture => #{slower_than := pos_integer(), every => non_neg_integer(),
                                  max_captures => pos_integer()},
                     metrics => #{port => inet:port_number(), ip => term(), path => string(),
                                  buckets => [number()]}}
                 | [{atom(), term()}].
%% The options of `ferrotrace:session/1', `calls/2' and `processes/2' (`ferrotrace:options()'),
%% each documented in the edoc of `ferrotrace:calls/2'.
%% What a session traces: none (a raw session), or what calls/2 and processes/2 set, with
%% what the budget holds back from the start and the pace of the loops' reading after it
%% (ferrotrace_start's steps add both).
-type tracing() :: none | #{specs := [ferrotrace:mfa_spec()],
                           heads := [ferrotrace_spec:heads()],
                           pids := ferrotrace:pid_spec(),
                           follow => ferrotrace_scope:follow(),
                           scope := local | global,
                           generated => boolean(),
                           kinds => [ferrotrace_activity:kind()],
                           held => [mfa()],
                           read_pace => float(),
                           shell => [pid()]}.
%% A start's settings, read once ({@link read/4}): the keeper's (`owner', `keep', `name',
%% `spec', `capture'), the engine's options and its trees' roots, what is traced, the
%% interval snapshots, the probe effect's `compensate' (`none': not calls/2), the budget
%% (a fraction, `{default, Fraction}' for a `'_' module, or `none'), and every option the
%% entry takes for an unknown one's answer. The start's steps open the metrics endpoint
%% (`metrics' becomes `{Endpoint, MetricsSettings}'), add `calibration' (what
%% ferrotrace_calibrate found, for the summary) and the budget's first moment (`budget'
%% becomes `{Fraction, Rate, Held, Baseline}'), and `started' (when the start began, and its
%% parts' times).
-type settings() :: #{owner := ferrotrace_owner:owner(), keep := non_neg_integer() | infinity, name := atom(),
                      spec := raw | [ferrotrace:mfa_spec()],
                      capture => ferrotrace_capture:settings(),
                      engine := map(), roots := list(), tracing := tracing(),
                      intervals := none | {pos_integer(), pos_integer()},
                      compensate := none | boolean(), budget := term(),
                      metrics := none | ferrotrace_metrics_options:settings() | {pid(), ferrotrace_metrics_options:settings()},
                      accepted := none | [atom()],
                      calibration => map(), started => map()}.
-export_type([options/0, tracing/0, settings/0]).

%% The options that say what calls/2 traces, and those the keeper takes; the rest go to
%% the engine.
-define(CALL_OPTIONS, [pids, follow, scope, also, callers, compensate, generated, shell]).
-define(SESSION_OPTIONS, [owner, keep, name, intervals, max_intervals, max_overhead, capture, metrics]).

%% A session's duration when none is given (ms), as the engine takes it.
-define(DEFAULT_DURATION, 10000).
%% Figures of a session whose owner left stay readable this long (ms).
-define(DEFAULT_KEEP, 600000).
%% The longest option key given a "did you mean" hint (option names are a few letters long).
-define(DEFAULT_WIDTH, 80).
-define(MIN_WIDTH, 40).

%% @doc `{ok, Map}' of a map or a list of `{Key, Value}' pairs with atom keys (the first
%% pair of a key wins), else `{error, {bad_options, Options, Accepted}}'.
-spec to_map(term()) -> {ok, map()} | {error, {bad_options, term(), binary()}}.
to_map(Options) ->
    ferrotrace_hint:to_map(Options).

%%--------------------------------------------------------------------------------------
%% Reports and the live view

%% @doc Checks the options of a report or of the live view (a map or a proplist) against
%% `Accepted', the keys it takes with their defaults in the order an error names them, and
%% fills in the defaults. A key not in `Accepted' is `{error, {unknown_option, Key,
%% <<"top, sort, ... or width">>}}', a bad value `{error, {bad_option, {Key, Value,
%% WhatIsAccepted}}}'. `mfa' is checked into a list of `{M, F, A}' patterns, or `all'.
-spec check(term(), [{atom(), term()}]) -> {ok, map()} | {error, term()}.
check(Options0, Accepted) ->
    case to_map(Options0) of
        {ok, Options} ->
            case [K || K <- maps:keys(Options), not lists:keymember(K, 1, Accepted)] of
                [Unknown | _] ->
                    {error, {unknown_option, Unknown, ferrotrace_hint:hinted(Unknown, [K || {K, _} <- Accepted], names(Accepted))}};
                [] -> check_each(maps:to_list(maps:merge(maps:from_list(Accepted), Options)), #{})
            end;
        {error, _} = Error ->
            Error
    end.

%% "a, b or c"
names(Accepted) ->
    Names = [atom_to_list(K) || {K, _} <- Accepted],
    iolist_to_binary([lists:join(", ", lists:droplast(Names)), " or ", lists:last(Names)]).

check_each([], Acc) ->
    {ok, Acc};
check_each([{Key, Value} | Rest], Acc) ->
    case value(Key, Value) of
        {ok, Checked} -> check_each(Rest, Acc#{Key => Checked});
        {error, Accepted} -> {error, {bad_option, {Key, Value, Accepted}}}
    end.

value(interval, Time) when is_list(Time); is_binary(Time) ->
    case ferrotrace_time:to(Time, millisecond) of
        {ok, Ms} -> value(interval, Ms);
        error -> value(interval, none)
    end;
value(interval, Ms) when is_integer(Ms), Ms >= 10, Ms =< 3600000 -> {ok, Ms};
value(interval, _) -> {error, <<"milliseconds, an integer from 10 to 3600000, or a time with its unit (\"1s\")">>};
value(count, infinity) -> {ok, infinity};
value(count, N) when is_integer(N), N > 0 -> {ok, N};
value(count, _) -> {error, <<"a positive integer or infinity">>};
value(top, all) -> {ok, all};
value(top, N) when is_integer(N), N > 0 -> {ok, N};
value(top, _) -> {error, <<"a positive integer or all">>};
value(sort, S) when S =:= count; S =:= total; S =:= p99; S =:= max -> {ok, S};
value(sort, _) -> {error, <<"count, total, p99 or max">>};
value(width, W) when is_integer(W), W >= ?MIN_WIDTH, W =< 1000 -> {ok, W};
value(width, _) -> {error, <<"an integer from 40 to 1000">>};
value(histograms, N) when is_integer(N), N >= 0 -> {ok, N};
value(histograms, _) -> {error, <<"a non-negative integer">>};
value(loops, all) -> {ok, all};
value(loops, N) when is_integer(N), N >= 0 -> {ok, N};
value(loops, _) -> {error, <<"all, or how many loops to name (a non-negative integer)">>};
value(mfa, '_') -> {ok, all};
value(mfa, Pattern) ->
    case ferrotrace_spec:parse(Pattern) of
        {ok, Patterns} -> {ok, [{M, F, A} || {M, F, A, _} <- Patterns]};
        {error, _} -> {error, <<"an {M, F, A} with '_' wildcards, or a spec string">>}
    end.

%% @doc The width a report or screen fits by default: the terminal's (`io:columns()'), else
%% 80 columns.
-spec default_width() -> pos_integer().
default_width() ->
    case terminal_width() of
        none -> ?DEFAULT_WIDTH;
        Columns -> Columns
    end.

%% @doc The terminal's width (`io:columns()', at least 40 and at most 1000), or `none' where
%% the output is not a terminal (a pipe, a file, an rpc's caller without one): a report
%% then prints whole names, since no screen cuts them.
-spec terminal_width() -> pos_integer() | none.
terminal_width() ->
    try io:columns() of
        {ok, Columns} when is_integer(Columns), Columns >= ?MIN_WIDTH -> min(Columns, 1000);
        _ -> none
    catch _:_ -> none
    end.

%%--------------------------------------------------------------------------------------
%% What calls/2 and processes/2 trace

%% @doc What `ferrotrace:calls(Spec, Options)' traces: the spec parsed (not ferrotrace's
%% own modules), its modules loaded and its functions there (ferrotrace_exists: a refusal
%% hints at the nearest name), `pids', `scope', `also' and keys checked.
%% `{ok, Tracing, Rest}' with the options left for the session, or the first error.
-spec calls(term(), map()) -> {ok, tracing(), map()} | {error, term()}.
calls(Spec, Options) ->
    case ferrotrace_spec:parse(Spec) of
        {ok, Parsed} ->
            Specs = [{M, F, A} || {M, F, A, _} <- Parsed],
            case ferrotrace_exists:check(Specs, maps:get(scope, Options, local), ferrotrace_exists:local()) of
                ok ->
                    case [S || S = {M, _, _} <- Specs, lists:member(M, ferrotrace_traced:own_modules())] of
                        [] -> calls(Specs, Parsed, Options);
                        [Own | _] -> {error, {bad_spec, Own, <<"ferrotrace does not trace itself">>}}
                    end;
                {error, _} = Error ->
                    Error
            end;
        {error, _} = Error ->
            Error
    end.

calls(Specs, Parsed, Options) ->
    Pids = maps:get(pids, Options, all),
    Scope = maps:get(scope, Options, local),
    Generated = maps:get(generated, Options, false),
    case {scope(Pids, Options), lists:member(Scope, [local, global]), kinds(maps:get(also, Options, []), Pids),
          is_boolean(Generated)} of
        {{error, _} = Error, _, _, _} ->
            Error;
        {_, false, _, _} ->
            {error, {bad_option, {scope, Scope, <<"local or global">>}}};
        {_, _, {error, _} = Error, _} ->
            Error;
        {_, _, _, false} ->
            {error, {bad_option, {generated, Generated, <<"true (a wildcard traces the functions the "
                                                          "compiler made too) or false">>}}};
        {{ok, Follow}, true, {ok, Kinds}, true} ->
            case ferrotrace_keys:heads([Heads || {_, _, _, Heads} <- Parsed], Options) of
                {ok, Heads, KeyOptions} ->
                    Tracing = #{specs => Specs, heads => Heads, pids => Pids, follow => Follow, scope => Scope,
                                generated => Generated},
                    {ok, with_kinds(Tracing, Kinds),
                     maps:merge(maps:without(?CALL_OPTIONS, Options), KeyOptions)};
                {error, _} = Error ->
                    Error
            end
    end.

with_kinds(Tracing, []) -> Tracing;
with_kinds(Tracing, Kinds) -> Tracing#{kinds => Kinds}.

%% @doc What `ferrotrace:processes(Kinds, Options)' traces: a non-empty list of known
%% kinds and `pids'. `{ok, Tracing, Rest}' with the options left for the session, or the
%% first error.
-spec processes(term(), term()) -> {ok, tracing(), map()} | {error, term()}.
processes(Kinds, Options0) ->
    case to_map(Options0) of
        {ok, Options} ->
            Pids = maps:get(pids, Options, all),
            case {scope(Pids, Options), ferrotrace_activity:check_kinds(Kinds)} of
                {{error, _} = Error, _} ->
                    Error;
                {_, {error, _} = Error} ->
                    Error;
                {{ok, _}, {ok, []}} ->
                    {error, {bad_kinds, [], <<"a list of messages, procs, gc, scheduling, ports">>}};
                {{ok, Follow}, {ok, _}} ->
                    case kinds(Kinds, Pids) of
                        {ok, Checked} ->
                            {ok, #{specs => [], heads => [], pids => Pids, follow => Follow, scope => local,
                                   kinds => Checked},
                             maps:without(?CALL_OPTIONS, Options)};
                        {error, {bad_option, {pids, _, _}}} = Error ->
                            Error
                    end
            end;
        {error, _} = Error ->
            Error
    end.

%% `{ok, Follow}' for the `pids' option (see ferrotrace_scope: each form names a live
%% process now) and `follow', else the error of the first that is not.
scope(Pids, Options) ->
    case ferrotrace_scope:check(Pids) of
        ok -> ferrotrace_scope:follow(maps:get(follow, Options, undefined), Pids);
        {error, _} = Error -> Error
    end.

%% `ok' for a well-formed `pids' value (valid_tracing/1: what a start was given).
pids(Pids) ->
    case ferrotrace_scope:valid(Pids) of
        true -> ok;
        false -> {error, {bad_option, {pids, Pids, <<"a scope (ferrotrace_scope)">>}}}
    end.

%% The kinds of `also' (or of `processes/2') traced with `Pids': known kinds (see
%% `ferrotrace_activity'); `ports' only with pids that include ports (all, new, existing).
-spec kinds(term(), term()) -> {ok, [ferrotrace_activity:kind()]} | {error, term()}.
kinds(Kinds0, Pids) ->
    case ferrotrace_activity:check_kinds(Kinds0) of
        {ok, Kinds} ->
            case lists:member(ports, Kinds) andalso not lists:member(Pids, [all, new, existing]) of
                true -> {error, {bad_option, {pids, Pids, <<"all, new or existing with the ports kind">>}}};
                false -> {ok, Kinds}
            end;
        {error, {bad_kinds, _, Accepted}} ->
            {error, {bad_option, {also, Kinds0, Accepted}}}
    end.

%%--------------------------------------------------------------------------------------
%% A start's settings: every option of session/1, calls/2 and processes/2, read once

%% @doc The options of `ferrotrace:session(Options)' (`session', `What' is `none'),
%% `calls(Spec, Options)' (`What' the spec) or `processes(Kinds, Options)' by `Caller'
%% (ferrotrace_owner:caller/0, who owns the session), read and checked
%% into the one value every later step of the start reads ({@link settings()}), or the first
%% refusal: the options' shape, the owner, what the session traces (the spec parsed, its
%% modules loaded; the kinds), then `metrics', the keeper's options (`capture', `keep',
%% `name'), `intervals', `compensate', `max_overhead' and `trees'. The engine checks its own options
%% as the keeper creates its session; an unknown key is explained then, with every option
%% the entry takes (`accepted').
-spec read(session | calls | processes, term(), term(), ferrotrace_owner:caller()) -> {ok, settings()} | {error, term()}.
read(Entry, What, Options0, Caller) ->
    case to_map(Options0) of
        {ok, Options1} ->
            case ferrotrace_time:options(Options1) of
                {ok, Options} -> read_owner(Entry, What, Options, Caller);
                {error, _} = Error -> Error
            end;
        {error, _} = Error ->
            Error
    end.

read_owner(Entry, What, Options, Caller) ->
    case ferrotrace_owner:owner(Options, Caller) of
        {ok, Owner} -> traced(Entry, What, maps:remove(owner, Options), Owner, Caller);
        {error, _} = Error -> Error
    end.

traced(session, _What, Options, Owner, _Caller) ->
    settings(session, Options, none, Owner, none);
traced(calls, Spec, Options, Owner, Caller) ->
    case {calls(Spec, Options), shell(maps:get(shell, Options, leave_out), maps:get(pids, Options, all), Caller)} of
        {{ok, _, _}, {error, _} = Error} -> Error;
        {{ok, Tracing, Rest}, {ok, []}} -> settings(calls, Rest, Tracing, Owner, maps:get(compensate, Options, true));
        {{ok, Tracing, Rest}, {ok, Shell}} -> settings(calls, Rest, Tracing#{shell => Shell}, Owner, maps:get(compensate, Options, true));
        {{error, _} = Error, _} -> Error
    end;
traced(processes, Kinds, Options, Owner, _Caller) ->
    case processes(Kinds, Options) of
        {ok, Tracing, Rest} -> settings(processes, Rest, Tracing, Owner, none);
        {error, _} = Error -> Error
    end.

%% The calling shell's processes that a session on every process (`pids => all' or
%% `existing') leaves untimed (`shell => leave_out', the default): what the operator types
%% is not what they came to see. `shell => include' times them too.
shell(leave_out, Pids, Caller) when Pids =:= all; Pids =:= existing ->
    {ok, ferrotrace_owner:shell_processes(Caller)};
shell(leave_out, _Pids, _Caller) ->
    {ok, []};
shell(include, _Pids, _Caller) ->
    {ok, []};
shell(Other, _Pids, _Caller) ->
    {error, {bad_option, {shell, Other, <<"leave_out (the default: the calling shell's processes are not timed) "
                                          "or include">>}}}.

%% The keeper's options and the start's, each checked, in the order of the refusals.
settings(Entry, Options, Tracing, Owner, Compensate) ->
    Checks = [fun() -> metrics(Options) end,
              fun() -> keeper(Options, Tracing, Owner) end,
              fun() -> ferrotrace_intervals:check(Options) end,
              fun() -> compensate(Compensate) end,
              fun() -> budget(Options, Tracing) end,
              fun() -> ferrotrace_trees:engine(Options) end],
    case first_error(Checks, []) of
        {ok, [Metrics, Keeper, Intervals, Probe, Budget, Trees]} ->
            %% `trees => #{...}' reaches the engine as its flat options, its roots beside.
            {Engine, Roots} = ferrotrace_trees:engine_roots(maps:merge(maps:without([trees | ?SESSION_OPTIONS], Options), Trees)),
            {ok, Keeper#{engine => Engine, roots => Roots, tracing => Tracing, intervals => Intervals,
                         compensate => Probe, budget => Budget, metrics => Metrics,
                         accepted => accepted(Entry)}};
        {error, _} = Error ->
            Error
    end.

first_error([], Checked) ->
    {ok, lists:reverse(Checked)};
first_error([Check | Rest], Checked) ->
    case Check() of
        {ok, Value} -> first_error(Rest, [Value | Checked]);
        {error, _} = Error -> Error
    end.

%% `metrics => #{port => P, ...}': served to Prometheus from the start (ferrotrace_metrics).
metrics(#{metrics := Metrics}) -> ferrotrace_metrics_options:check(Metrics);
metrics(#{}) -> {ok, none}.

%% Who owns the session, how long its figures outlive the owner, its name, and what it
%% traces (`raw' for `session/1'); with `capture', its settings.
keeper(Options, Tracing, Owner) ->
    Keep = maps:get(keep, Options, ?DEFAULT_KEEP),
    Name = maps:get(name, Options, undefined),
    Spec = case Tracing of
               none -> raw;
               #{specs := Specs} -> Specs
           end,
    Capture = case Options of
                  #{capture := Value} -> ferrotrace_capture:check(Value);
                  #{} -> none
              end,
    case {valid_keep(Keep), is_atom(Name) andalso Name =/= none} of
        _ when element(1, Capture) =:= error ->
            Capture;
        {false, _} ->
            {error, {bad_option, {keep, Keep, <<"milliseconds (a non-negative integer) or infinity">>}}};
        {_, false} ->
            {error, {bad_option, {name, Name, <<"an atom naming the session">>}}};
        {true, true} ->
            Keeper = #{owner => Owner, keep => Keep, name => Name, spec => Spec},
            {ok, case Capture of
                     {ok, Checked} -> Keeper#{capture => Checked};
                     none -> Keeper
                 end}
    end.

%% True for a `keep' the keeper takes: milliseconds up to seven days, or `infinity'.
-spec valid_keep(term()) -> boolean().
valid_keep(infinity) -> true;
valid_keep(Keep) -> is_integer(Keep) andalso Keep >= 0 andalso Keep =< 7 * 24 * 3600 * 1000.

%% `compensate' (calls/2 only; `none' for the others): whether the probe effect is taken out.
compensate(none) -> {ok, none};
compensate(Compensate) when is_boolean(Compensate) -> {ok, Compensate};
compensate(Compensate) -> {error, {bad_option, {compensate, Compensate, <<"true or false">>}}}.

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

%% Every option an entry takes but the engine's (which the engine names itself), for the
%% answer to an unknown option (see ferrotrace_start); `processes/2' answers the engine's.
accepted(session) -> [trees | ?SESSION_OPTIONS];
accepted(calls) -> [nodes, trees | ?CALL_OPTIONS ++ ?SESSION_OPTIONS];
accepted(processes) -> none.

%%--------------------------------------------------------------------------------------
%% What a keeper is started with

-define(ENGINE_OPTIONS_ACCEPTED, <<"a map of the engine's options">>).
-define(TRACING_ACCEPTED,
        <<"none, or a map of specs (a list of {M, F, A}, not ferrotrace's own modules), heads "
          "(a list as long: default or match spec clauses), pids (all, new, existing, or "
          "processes named as ferrotrace_scope reads them), scope (local or global) and optionally "
          "follow (spawns, first_spawn or none), kinds (a list "
          "of messages, procs, gc, scheduling, ports), generated (a boolean), held (a list "
          "of {M, F, A} the budget holds back), read_pace (a float from 0.01 to 1) and shell (the "
          "local pids of the calling shell, left untimed)">>).
-define(SETTINGS_ACCEPTED,
        <<"a map of engine (the engine's options), tracing, owner ({process, Pid}, {shell, Pid}, "
          "or none with a finite duration), keep (milliseconds up to seven days, or infinity), "
          "name (an atom other than none) and spec (raw or a list), and optionally capture (as "
          "the capture option), roots (a list), intervals (none or {Ms, Max}), budget, "
          "metrics (none, or the endpoint and its settings), calibration, compensate and started "
          "(as ferrotrace_start makes them)">>).
%% The keys of a start's settings besides the keeper's four.
-define(OPTIONAL_KEYS, [capture, roots, intervals, budget, compensate, metrics, accepted,
                        calibration, started]).

%% @doc The settings `ferrotrace_keeper:start/1' is given, checked before a keeper starts,
%% so that what reaches the keeper's `init/1' has the shape {@link read/4} and the start's
%% steps give it: `ok', or `{error, {bad_argument, engine_options | tracing | settings,
%% Value, Accepted}}' with `Value' summarised and `Accepted' a text. The checks look no
%% deeper than the shapes: what they read again is what the keeper acts on.
-spec valid(term()) ->
          ok | {error, {bad_argument, engine_options | tracing | settings, term(), binary()}}.
valid(#{engine := Engine}) when not is_map(Engine) ->
    bad_argument(engine_options, Engine, ?ENGINE_OPTIONS_ACCEPTED);
valid(#{engine := Engine, tracing := Tracing} = Settings) ->
    case {valid_tracing(Tracing), valid_settings(Settings, Engine)} of
        {false, _} -> bad_argument(tracing, Tracing, ?TRACING_ACCEPTED);
        {true, false} -> bad_argument(settings, Settings, ?SETTINGS_ACCEPTED);
        {true, true} -> ok
    end;
valid(Settings) ->
    bad_argument(settings, Settings, ?SETTINGS_ACCEPTED).

bad_argument(Which, Value, Accepted) ->
    {error, {bad_argument, Which, ferrotrace_hint:brief(Value), Accepted}}.

valid_tracing(none) ->
    true;
valid_tracing(#{specs := Specs, heads := Heads, pids := Pids, scope := Scope} = Tracing) ->
    Own = ferrotrace_traced:own_modules(),
    lists:all(fun(Key) -> lists:member(Key, [specs, heads, pids, follow, scope, kinds, generated, held, read_pace, shell]) end,
              maps:keys(Tracing))
        andalso lists:member(maps:get(follow, Tracing, none), [spawns, first_spawn, none])
        andalso all_of(fun(P) -> is_pid(P) andalso node(P) =:= node() end, maps:get(shell, Tracing, []))
        andalso case Tracing of
                    #{read_pace := Pace} -> is_float(Pace) andalso Pace >= 0.01 andalso Pace =< 1;
                    #{} -> true
                end
        andalso all_of(fun({M, F, A}) -> valid_spec(M, F, A) andalso is_integer(A);
                          (_) -> false
                       end, maps:get(held, Tracing, []))
        andalso all_of(fun({M, F, A}) -> valid_spec(M, F, A) andalso not lists:member(M, Own);
                          (_) -> false
                       end, Specs)
        andalso all_of(fun valid_heads/1, Heads)
        andalso length(Specs) =:= length(Heads)
        andalso pids(Pids) =:= ok
        andalso (Scope =:= local orelse Scope =:= global)
        andalso case Tracing of
                    #{kinds := Kinds} -> is_list(Kinds) andalso
                                             element(1, ferrotrace_activity:check_kinds(Kinds)) =:= ok;
                    #{} -> true
                end;
valid_tracing(_) ->
    false.

valid_spec(M, F, A) ->
    is_atom(M) andalso is_atom(F)
        andalso (A =:= '_' orelse (is_integer(A) andalso A >= 0 andalso A =< 255)).

valid_heads(default) -> true;
valid_heads([_ | _] = Clauses) -> all_of(fun({_Head, Guards, Body}) -> is_list(Guards) andalso is_list(Body);
                                            (_) -> false
                                         end, Clauses);
valid_heads(_) -> false.

valid_settings(#{owner := Owner, keep := Keep, name := Name, spec := Spec} = Settings, EngineOptions) ->
    map_size(maps:without([engine, tracing | ?OPTIONAL_KEYS], Settings)) =:= 4
        andalso case Settings of
                    #{intervals := {Ms, Max}} -> is_integer(Ms) andalso is_integer(Max);
                    #{intervals := Intervals} -> Intervals =:= none;
                    #{} -> true
                end
        andalso is_list(maps:get(roots, Settings, []))
        andalso case Settings of
                    #{metrics := {Endpoint, #{}}} -> is_pid(Endpoint);
                    #{metrics := Metrics} -> Metrics =:= none;
                    #{} -> true
                end
        andalso case Settings of
                    #{capture := Capture} -> ferrotrace_capture:check(Capture) =:= {ok, Capture};
                    #{} -> true
                end
        andalso case Owner of
                    none -> maps:get(duration, EngineOptions, finite) =/= infinity;
                    {Kind, Pid} -> (Kind =:= process orelse Kind =:= shell) andalso is_pid(Pid);
                    _ -> false
                end
        andalso valid_keep(Keep)
        andalso is_atom(Name) andalso Name =/= none
        andalso (Spec =:= raw orelse is_list(Spec));
valid_settings(_Settings, _EngineOptions) ->
    false.

%% `Pred' holds for every element of a proper list (false for an improper one or another
%% term, where lists:all/2 raises).
all_of(Pred, [X | Rest]) -> Pred(X) andalso all_of(Pred, Rest);
all_of(_Pred, []) -> true;
all_of(_Pred, _) -> false.
