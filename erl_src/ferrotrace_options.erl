%%% @doc Options as the API takes them, checked before anything starts: a map or, from
%%% Elixir (`duration: 1000') and old habits, a list of `{Key, Value}' pairs, where the first
%%% pair of a key counts (as `proplists:get_value/2' reads it). One reading for sessions,
%%% reports, the live view and exports, so that they agree on a repeated key and on the
%%% error. The options themselves are documented once, in the edoc of `ferrotrace:calls/2'.
%%%
%%% In the order a call meets them: {@link to_map/1}; the options of reports and the live
%%% view ({@link check/2}); what `calls/2' and `processes/2' trace ({@link calls/2},
%%% {@link processes/2}); the options a session's keeper takes ({@link settings/3}, with
%%% the owner: {@link owner/1}); the answer to an unknown option ({@link explain/2}).
-module(ferrotrace_options).

-export([to_map/1, check/2, default_width/0, terminal_width/0]).
-export([calls/2, processes/2]).
-export([settings/3, owner/1, in_shell/0]).
-export([explain/2]).
-export([start_arguments/3]).  % for ferrotrace_session:start/3

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
-export_type([options/0]).

%% The options that say what calls/2 traces, and those the keeper takes; the rest go to
%% the engine.
-define(CALL_OPTIONS, [pids, scope, also, callers, compensate, generated]).
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
to_map(Options) when is_map(Options) ->
    {ok, Options};
to_map(Options) when is_list(Options) ->
    case pairs(Options) of
        true -> {ok, maps:from_list(lists:reverse(Options))};
        false -> bad(Options)
    end;
to_map(Options) ->
    bad(Options).

bad(Options) ->
    {error, {bad_options, Options, <<"a map or a list of {Key, Value} pairs">>}}.

%% A proper list of `{Atom, Value}' pairs (an improper list is refused, not a raise).
pairs([]) -> true;
pairs([{K, _} | Rest]) when is_atom(K) -> pairs(Rest);
pairs(_) -> false.

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

value(interval, Ms) when is_integer(Ms), Ms >= 10, Ms =< 3600000 -> {ok, Ms};
value(interval, _) -> {error, <<"milliseconds, an integer from 10 to 3600000">>};
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
-spec calls(term(), map()) -> {ok, ferrotrace_session:tracing(), map()} | {error, term()}.
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
    case {pids(Pids), lists:member(Scope, [local, global]), kinds(maps:get(also, Options, []), Pids),
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
        {ok, true, {ok, Kinds}, true} ->
            case ferrotrace_keys:heads([Heads || {_, _, _, Heads} <- Parsed], Options) of
                {ok, Heads, KeyOptions} ->
                    Tracing = #{specs => Specs, heads => Heads, pids => Pids, scope => Scope,
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
-spec processes(term(), term()) -> {ok, ferrotrace_session:tracing(), map()} | {error, term()}.
processes(Kinds, Options0) ->
    case to_map(Options0) of
        {ok, Options} ->
            Pids = maps:get(pids, Options, all),
            case {pids(Pids), ferrotrace_activity:check_kinds(Kinds)} of
                {{error, _} = Error, _} ->
                    Error;
                {_, {error, _} = Error} ->
                    Error;
                {ok, {ok, []}} ->
                    {error, {bad_kinds, [], <<"a list of messages, procs, gc, scheduling, ports">>}};
                {ok, {ok, _}} ->
                    case kinds(Kinds, Pids) of
                        {ok, Checked} ->
                            {ok, #{specs => [], heads => [], pids => Pids, scope => local, kinds => Checked},
                             maps:without(?CALL_OPTIONS, Options)};
                        {error, {bad_option, {pids, _, _}}} = Error ->
                            Error
                    end
            end;
        {error, _} = Error ->
            Error
    end.

%% `ok' for the `pids' option (`all', `new', `existing' or a non-empty list of local
%% pids), else its `{error, {bad_option, {pids, ...}}}'.
-spec pids(term()) -> ok | {error, term()}.
pids(Pids) when Pids =:= all; Pids =:= new; Pids =:= existing ->
    ok;
pids([_ | _] = Pids) ->
    case local_pids(Pids) of
        true -> ok;
        false -> bad_pids(Pids)
    end;
pids(Pids) ->
    bad_pids(Pids).

%% A proper list of local pids (an improper one is refused, not a raise).
local_pids([]) -> true;
local_pids([P | Rest]) when is_pid(P), node(P) =:= node() -> local_pids(Rest);
local_pids(_) -> false.

bad_pids(Pids) ->
    {error, {bad_option, {pids, Pids, <<"all, new, existing or a non-empty list of local pids">>}}}.

%% The kinds of `also' (or of `processes/2') traced with `Pids': known kinds (see
%% `ferrotrace_activity'); `ports' only with pids that include ports (all, new, existing).
-spec kinds(term(), term()) -> {ok, [ferrotrace_activity:kind()]} | {error, term()}.
kinds(Kinds0, Pids) ->
    case ferrotrace_activity:check_kinds(Kinds0) of
        {ok, Kinds} ->
            case lists:member(ports, Kinds) andalso is_list(Pids) of
                true -> {error, {bad_option, {pids, Pids, <<"all, new or existing with the ports kind">>}}};
                false -> {ok, Kinds}
            end;
        {error, {bad_kinds, _, Accepted}} ->
            {error, {bad_option, {also, Kinds0, Accepted}}}
    end.

%%--------------------------------------------------------------------------------------
%% A session's keeper: owner, keep, name

%% @doc Who owns the session, how long its figures outlive the owner, its name, and what it
%% traces (`raw' for `session/1'): the settings of `ferrotrace_session:start/3', with the
%% options left for the engine. `Owner' is what {@link owner/1} answered in the caller (only
%% the caller can tell whether it is a shell's evaluator).
-spec settings(map(), ferrotrace_session:tracing(), ferrotrace_session:owner()) ->
          {ok, ferrotrace_session:settings(), map()} | {error, term()}.
settings(Options, Tracing, Owner) ->
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
            Settings = #{owner => Owner, keep => Keep, name => Name, spec => Spec},
            {ok, case Capture of
                     {ok, Checked} -> Settings#{capture => Checked};
                     none -> Settings
                 end,
             maps:without(?SESSION_OPTIONS, Options)}
    end.

%% True for a `keep' the keeper takes: milliseconds up to seven days, or `infinity'.
-spec valid_keep(term()) -> boolean().
valid_keep(infinity) -> true;
valid_keep(Keep) -> is_integer(Keep) andalso Keep >= 0 andalso Keep =< 7 * 24 * 3600 * 1000.

%% @doc The owner that `owner => Owner' and `duration => Duration' in `Options' give. The
%% operator's presence, not a process that happens to run the call: a shell evaluator is
%% restarted after every exception typed in the shell, so a session started from a shell
%% belongs to the shell's group leader, which lives as long as the shell (local, remote over
%% `-remsh' or `remote_console', or IEx) and goes down with its connection. Without
%% `owner', a caller that is not a shell's evaluator (`bin/rel eval', `rpc:call/4', a
%% control tool's eval: each exits as soon as the call returns) gets no owner, as with
%% `owner => none': its session runs its finite duration; with `duration => infinity' it
%% is refused, since nothing would ever stop it.
-spec owner(map()) -> {ok, ferrotrace_session:owner()} | {error, term()}.
owner(#{owner := Owner} = Options) ->
    owner(Owner, maps:get(duration, Options, ?DEFAULT_DURATION));
owner(Options) when is_map(Options) ->
    case {shell_evaluator(self()), maps:get(duration, Options, ?DEFAULT_DURATION)} of
        {true, _} ->
            {ok, {shell, group_leader()}};
        {false, infinity} ->
            {error, {bad_option, {duration, infinity,
                                  <<"a finite duration, or owner => Pid: outside a shell a "
                                    "session has no owner">>}}};
        {false, _} ->
            {ok, none}
    end;
owner(Options) ->
    {error, {bad_options, Options, <<"a map of options">>}}.

owner(none, infinity) ->
    {error, {bad_option, {owner, none, <<"owner => none needs a finite duration">>}}};
owner(none, _Duration) ->
    {ok, none};
owner(Pid, _Duration) when is_pid(Pid), node(Pid) =:= node() ->
    case Pid =:= self() andalso shell_evaluator(Pid) of
        true -> {ok, {shell, group_leader()}};
        false -> {ok, {process, Pid}}
    end;
owner(Other, _Duration) ->
    {error, {bad_option, {owner, Other, <<"a local pid, or none (needs a finite duration)">>}}}.

%% @doc True when the caller is a shell's evaluator, the process that runs what an
%% operator types (see {@link owner/1}): `erl', `erl -remsh', a release's
%% `remote_console', IEx; false in `bin/rel eval', `rpc', `erl -noshell' and processes
%% spawned from a shell.
-spec in_shell() -> boolean().
in_shell() ->
    shell_evaluator(self()).

%% True when `Pid' is the caller and a shell's evaluator, the process that runs what an
%% operator types:
%% - the Erlang shell's (`erl', `erl -remsh', a release's `remote_console', which runs
%%   `erl -remsh'): the shell process runs on the node the commands run on (over -remsh
%%   only the group leader is remote), is linked to its evaluator and keeps its pid under
%%   `evaluator' in its dictionary (shell:start_eval/3, OTP 25 to 29);
%% - IEx's: its evaluator keeps the IEx server's pid under `iex_server' in its own
%%   dictionary (IEx.Evaluator.init/4; the server is not linked to it: Elixir 1.14 here).
%% A process spawned from a shell has neither (dictionaries are not inherited); an rpc,
%% erpc or `bin/rel eval' process has neither.
shell_evaluator(Pid) when Pid =:= self() ->
    erlang_shell_evaluator(Pid) orelse iex_evaluator();
shell_evaluator(_Pid) ->
    false.

erlang_shell_evaluator(Pid) ->
    {links, Links} = erlang:process_info(Pid, links),
    lists:any(fun(Shell) when is_pid(Shell), node(Shell) =:= node() ->
                      case erlang:process_info(Shell, dictionary) of
                          {dictionary, Dict} -> lists:member({evaluator, Pid}, Dict);
                          undefined -> false
                      end;
                 (_) -> false
              end, Links).

iex_evaluator() ->
    case get(iex_server) of
        Server when is_pid(Server), node(Server) =:= node() -> is_process_alive(Server);
        _ -> false
    end.

%%--------------------------------------------------------------------------------------
%% Did you mean

%% @doc An unknown option (`{error, {unknown_option, Key, EngineOptions}}' from the engine)
%% is answered with every option the entry (`session' or `calls') takes, the engine's and
%% its own, and the nearest one when the key looks like a typo of it; any other result is
%% returned as it is.
-spec explain(Result, session | calls) -> Result | {error, {unknown_option, term(), binary()}}.
explain(Result, session) ->
    explain_with(Result, [trees | ?SESSION_OPTIONS]);
explain(Result, calls) ->
    explain_with(Result, [nodes, trees | ?CALL_OPTIONS ++ ?SESSION_OPTIONS]).

explain_with({error, {unknown_option, Key, Engine}}, Own) when is_list(Engine) ->
    Names = lists:usort(Own ++ Engine),
    Accepted = lists:join(", ", [atom_to_list(N) || N <- Names]),
    {error, {unknown_option, Key, ferrotrace_hint:hinted(Key, Names, ["one of ", Accepted])}};
explain_with(Result, _Own) ->
    Result.

%%--------------------------------------------------------------------------------------
%% What a keeper is started with

-define(ENGINE_OPTIONS_ACCEPTED, <<"a map of the engine's options">>).
-define(TRACING_ACCEPTED,
        <<"none, or a map of specs (a list of {M, F, A}, not ferrotrace's own modules), heads "
          "(a list as long: default or match spec clauses), pids (all, new, existing or a "
          "non-empty list of local pids), scope (local or global) and optionally kinds (a list "
          "of messages, procs, gc, scheduling, ports), generated (a boolean), held (a list "
          "of {M, F, A} the budget holds back) and read_pace (a float from 0.01 to 1)">>).
-define(SETTINGS_ACCEPTED,
        <<"a map of owner ({process, Pid}, {shell, Pid}, or none with a finite duration), "
          "keep (milliseconds up to seven days, or infinity), name (an atom other than none) "
          "and spec (raw or a list), and optionally capture (as the capture option)">>).

%% @doc The arguments of `ferrotrace_session:start/3' checked before a keeper starts, so
%% that what reaches the keeper's `init/1' is what this module makes (`calls/2' or
%% `processes/2', and `settings/3'): `ok', or
%% `{error, {bad_argument, engine_options | tracing | settings, Value, Accepted}}' with
%% `Value' summarised and `Accepted' a text. The checks look no deeper than the shapes.
-spec start_arguments(term(), term(), term()) ->
          ok | {error, {bad_argument, engine_options | tracing | settings, term(), binary()}}.
start_arguments(EngineOptions, _Tracing, _Settings) when not is_map(EngineOptions) ->
    bad_argument(engine_options, EngineOptions, ?ENGINE_OPTIONS_ACCEPTED);
start_arguments(EngineOptions, Tracing, Settings) ->
    case {valid_tracing(Tracing), valid_settings(Settings, EngineOptions)} of
        {false, _} -> bad_argument(tracing, Tracing, ?TRACING_ACCEPTED);
        {true, false} -> bad_argument(settings, Settings, ?SETTINGS_ACCEPTED);
        {true, true} -> ok
    end.

bad_argument(Which, Value, Accepted) ->
    {error, {bad_argument, Which, ferrotrace_hint:brief(Value), Accepted}}.

valid_tracing(none) ->
    true;
valid_tracing(#{specs := Specs, heads := Heads, pids := Pids, scope := Scope} = Tracing) ->
    Own = ferrotrace_traced:own_modules(),
    lists:all(fun(Key) -> lists:member(Key, [specs, heads, pids, scope, kinds, generated, held, read_pace]) end,
              maps:keys(Tracing))
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
    map_size(maps:without([capture], Settings)) =:= 4
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
