%%% @private
%%% @doc Changing the functions of a running `calls/2' session: `ferrotrace:add/2' and
%%% `ferrotrace:remove/2', done by the session's keeper (ferrotrace_keeper) with what it
%%% knows of the session, through the same checks and in the same order as a start:
%%% <ol>
%%% <li>the spec parsed, its modules loaded, ferrotrace's own modules refused
%%% (ferrotrace_options:calls/2), with the session's `scope' and keys (`callers => true'
%%% adds `caller_line' to the new clauses; a clause that sets `message' needs a session that
%%% keeps keys);</li>
%%% <li>nothing the session traces already (a function has one pattern per session: remove
%%% it first);</li>
%%% <li>server loops among the new functions found (ferrotrace_loops) and put in the frame
%%% table's loop set (`session_add_loops') before any pattern is set, so they are traced
%%% count-only from their first call;</li>
%%% <li>the engine's filter widened, then the patterns set: on OTP 25 and 26 through the
%%% registry, which refuses a pattern another live session holds with another match spec
%%% (`pattern_conflict', as at a start) and excludes ferrotrace's modules; on OTP 27+ in the
%%% session's own trace session. A refused add changes nothing.</li>
%%% </ol>
%%% `max_functions' holds as at a start: the engine gives figures to that many functions and
%%% counts the events of later ones as `untracked_events'.
%%%
%%% `remove' takes off whole patterns of the session (those a spec matches, or wider than):
%%% the VM stops calling the tracer for them, calls already running still pair, and the
%%% functions' figures stay in the summary. A spec inside one of the session's patterns
%%% (`{m, f, 1}' of `{m, '_', '_'}') is refused: on OTP 25 a function has one match spec for
%%% the node, and the registry keeps claims per pattern, so a hole in a pattern could be
%%% filled again by another session's stop.
-module(ferrotrace_amend).

-export([change/4]).

%% The changes a session's summary lists (the latest).
-define(MAX_CHANGES, 20).

-type calls() :: #{patterns := [ferrotrace_registry:pattern()],
                   scope := local | global,
                   key := none | message | caller}.
%% How tracing was set (the keeper's backend, ferrotrace_tracing).
-type backend() :: legacy | {trace_session, term(), [local | global]}.
-export_type([calls/0]).

%% @doc Does `add' or `remove' of `Spec' for the keeper of session `Id', traced as `Calls'
%% with `Backend', and records it in the registry (`spec', `loops', `changes'):
%% `{Reply, Calls, Watch}' with the reply to the caller, and what the keeper keeps now
%% (the patterns; the functions ferrotrace_displaced watches on OTP 25 and 26).
-spec change(add | remove, term(), {ferrotrace_tracer:session_id(), backend(), Watch}, calls()) ->
          {{ok, #{atom() => term()}} | {error, term()}, calls(), Watch}
              when Watch :: none | ferrotrace_displaced:watch().
change(add, Spec, {Id, Backend, Watch}, Calls = #{patterns := Old}) ->
    case parse(Spec, Calls) of
        {ok, New} ->
            case add(Id, Backend, Old, New) of
                {ok, Set, Loops, Matched} ->
                    Added = specs(Set),
                    ok = record(Id, Old ++ Set, #{added => Added, loops => Loops}, Loops),
                    Watched = case Watch of
                                  none -> none;
                                  _ -> ferrotrace_displaced:add_patterns(Watch, Id, Set)
                              end,
                    {{ok, #{added => Added, loops => Loops, functions => Matched}},
                     Calls#{patterns := Old ++ Set}, Watched};
                {error, _} = Error ->
                    {Error, Calls, Watch}
            end;
        {error, _} = Error ->
            {Error, Calls, Watch}
    end;
change(remove, Spec, {Id, Backend, Watch}, Calls = #{patterns := Old}) ->
    case remove(Id, Backend, Old, Spec) of
        {ok, Removed, Kept} ->
            Specs = specs(Removed),
            ok = record(Id, Kept, #{removed => Specs}, []),
            Watched = case Watch of
                          none -> none;
                          _ -> ferrotrace_displaced:remove_functions(Watch, Specs)
                      end,
            {{ok, #{removed => Specs}}, Calls#{patterns := Kept}, Watched};
        {error, _} = Error ->
            {Error, Calls, Watch}
    end.

%% What `list/0' and the summary show: the specs traced now, the loops, the changes.
record(Id, Patterns, Change, Loops) ->
    case ferrotrace_registry:lookup(Id) of
        {ok, _, _, Info} ->
            ferrotrace_registry:update(Id, #{spec => specs(Patterns),
                                             loops => lists:usort(maps:get(loops, Info, []) ++ Loops),
                                             changes => changes(maps:get(changes, Info, []), Change)});
        error ->
            ok
    end.

%% What `add' would set for `Spec' in a session traced as `Calls': the new patterns
%% (specs and their match specs), checked as a start checks them, or the first error.
parse(Spec, #{patterns := Patterns, scope := Scope, key := Key}) ->
    Options = case Key of
                  caller -> #{callers => true};
                  message -> #{key => message};
                  none -> #{}
              end,
    case ferrotrace_options:calls(Spec, Options#{scope => Scope}) of
        {ok, #{specs := Specs, heads := Heads}, Rest} ->
            New = [#{mfa => S, match_spec => ferrotrace_tracing:match_spec(H, [{exception_trace}]), scope => Scope,
                     heads => H} || {S, H} <- lists:zip(Specs, Heads)],
            Traced = [MFA || #{mfa := MFA} <- Patterns],
            case {maps:get(key, Rest, Key), overlapping(Specs, Traced)} of
                {message, _} when Key =/= message ->
                    {error, {bad_spec, Spec,
                             <<"a spec that sets {message, Key} needs a session that keeps keys: "
                               "start one with such a spec, or with key => message">>}};
                {_, [{S, Old} | _]} ->
                    {error, {already_in_session, S, Old,
                             <<"this session traces these functions already: remove the pattern first">>}};
                {_, []} ->
                    {ok, New}
            end;
        {error, _} = Error ->
            Error
    end.

%% Each new spec and the first of the session's patterns that can match a function it
%% matches (the same function would get two patterns of one session).
overlapping(Specs, Traced) ->
    [{S, Old} || S <- Specs, [Old | _] <- [[T || T <- Traced, ferrotrace_spec:overlaps(S, T)]]].

%% Sets the patterns `New' (from parse/2) in session `Id', whose patterns are
%% `Old': loops first, then the engine's filter, then the patterns. `{ok, Set, Loops,
%% Functions}' with the patterns as set (loops included), the new loops and how many
%% functions matched, or `{error, Reason}' with nothing changed.
add(Id, Backend, Old, New) ->
    NewSpecs = [MFA || #{mfa := MFA} <- New],
    Loops = ferrotrace_loops:find(NewSpecs, ferrotrace_traced:own_modules()),
    Set = [maps:remove(heads, P#{loops => [{Loop, ferrotrace_tracing:match_spec(H, [])} || Loop <- Loops,
                                                                                             ferrotrace_spec:matches(Spec, Loop)]})
           || P = #{mfa := Spec, heads := H} <- New],
    %% Count-only before any pattern: a loop's first call must keep no frame.
    ok = ferrotrace_tracer:session_set_tracing(Id, specs(Old) ++ NewSpecs, []),
    ok = ferrotrace_tracer:session_add_loops(Id, Loops),
    case ferrotrace_tracing:set(Id, Backend, Set) of
        {ok, 0} ->
            _ = ferrotrace_tracing:unset(Id, Backend, Set, Old),
            ok = ferrotrace_tracer:session_set_tracing(Id, specs(Old), []),
            {error, {no_matching_functions, NewSpecs, <<"no loaded function matches these patterns">>}};
        {ok, Matched} ->
            %% A `'_'' module leaves ferrotrace's own modules out (ferrotrace_tracing).
            _ = [ferrotrace_tracing:leave_out_modules(Id, Backend, Own)
                 || [_ | _] <- [[S || S = {'_', _, _} <- NewSpecs]],
                    Own <- [[M || M <- ferrotrace_traced:own_modules(), erlang:module_loaded(M)]]],
            {ok, Set, Loops, Matched};
        {error, _} = Error ->
            ok = ferrotrace_tracer:session_set_tracing(Id, specs(Old), []),
            Error
    end.

%% Takes off the patterns of session `Id' that `Spec' matches, of its patterns `Old':
%% `{ok, Removed, Kept}', or `{error, Reason}' naming what is accepted, nothing changed.
remove(Id, Backend, Old, Spec) ->
    case ferrotrace_spec:parse(Spec) of
        {ok, Parsed} ->
            Specs = [{M, F, A} || {M, F, A, _} <- Parsed],
            Traced = [MFA || #{mfa := MFA} <- Old],
            case [{S, T} || S <- Specs, T <- Traced, ferrotrace_spec:overlaps(S, T), not ferrotrace_spec:wider(S, T)] of
                [{S, T} | _] ->
                    {error, {part_of_pattern, S, T,
                             <<"remove takes whole patterns off: remove this pattern, then add "
                               "what you keep">>}};
                [] ->
                    case lists:partition(fun(#{mfa := T}) -> lists:any(fun(S) -> ferrotrace_spec:wider(S, T) end, Specs) end, Old) of
                        {[], _} ->
                            {error, {not_in_session, Specs, ferrotrace_hint:brief(Traced)}};
                        {Removed, Kept} ->
                            ok = ferrotrace_tracing:unset(Id, Backend, Removed, Kept),
                            %% The engine counts their later calls as `foreign' (another
                            %% session may keep the pattern on OTP 25); their figures stay,
                            %% and calls running now still pair.
                            _ = ferrotrace_tracer:session_set_tracing(Id, specs(Kept), []),
                            {ok, Removed, Kept}
                    end
            end;
        {error, _} = Error ->
            Error
    end.

%% A session's record of its changes (`changes' in the summary) with `Change' added last,
%% stamped now (ms): the latest ?MAX_CHANGES.
changes(Changes, Change) ->
    All = Changes ++ [Change#{at => erlang:system_time(millisecond)}],
    lists:nthtail(max(0, length(All) - ?MAX_CHANGES), All).

specs(Patterns) -> [MFA || #{mfa := MFA} <- Patterns].
