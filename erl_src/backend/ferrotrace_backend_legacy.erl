%%% @private
%%% @doc The backend's OTP 25 and 26 half: where a function has one match spec for the whole
%%% node and a process one tracer, the only place that sets or clears a session's call
%%% patterns, or removes its process flags after it (ferrotrace_backend does the rest,
%%% and everything on OTP 27 and later).
%%%
%%% Sessions share the node's patterns through claims: `ferrotrace_claims' holds
%%% `{{Id, Spec}, Pattern}' for each pattern a session set, with the loops traced count-only
%%% inside it and the functions the budget shed from it. A claim is written before its
%%% pattern is set and deleted only after the pattern is removed, so a process killed
%%% between the two leaves a claim that the next stop removes, never a pattern nobody knows
%%% of. Checking claims and changing patterns must be atomic with respect to every other
%%% session: every function here that writes runs in the registry's process
%%% (ferrotrace_registry serves them, ferrotrace_tracing asks it), never called directly.
-module(ferrotrace_backend_legacy).

-export([new_table/0, claims/1, claimed/0]).
-export([set/2, add_loops/2, exclude_modules/1, shed/2, unshed/2, remove/3, untrace_processes/1]).

%% OTP 25's spec of erlang:trace_info/2 omits the `{tracer, {Module, State}}' answer that a
%% tracer module gets, so dialyzer believes our comparison can never succeed.
-dialyzer({no_match, [untrace_processes/1]}).

-define(CLAIMS, ferrotrace_claims).
%% A displaced session's pattern is removed function by function up to this many functions.
-define(ONE_BY_ONE, 1000).

-type pattern() :: ferrotrace_registry:pattern().

%% @doc Creates the claims table, owned by the calling process (the registry's tables'
%% owner, which outlives any registry).
-spec new_table() -> ok.
new_table() ->
    _ = ets:new(?CLAIMS, [named_table, public, ordered_set]),
    ok.

%% @doc The patterns session `Id' claimed and still holds.
-spec claims(ferrotrace_tracer:session_id() | term()) -> [pattern()].
claims(Id) ->
    [P || {{_, _}, P} <- ets:match_object(?CLAIMS, {{Id, '_'}, '_'})].

%% @doc The sessions holding claims.
-spec claimed() -> [ferrotrace_tracer:session_id()].
claimed() ->
    lists:usort([Id || {{Id, _}, _} <- ets:tab2list(?CLAIMS)]).

%% @doc Traces `Loops' count-only (`{MFA, MatchSpec}' without return tracing) in every
%% pattern of session `Id' that matches them: loops found at run time.
-spec add_loops(ferrotrace_tracer:session_id(), [{mfa(), [tuple()]}]) -> ok.
add_loops(Id, Loops) ->
    lists:foreach(
      fun({Key, P = #{mfa := Spec, scope := Scope}}) ->
              New = [L || L = {MFA, _} <- Loops, ferrotrace_spec:matches(Spec, MFA)],
              true = ets:insert(?CLAIMS, {Key, P#{loops => lists:usort(maps:get(loops, P, []) ++ New)}}),
              _ = [erlang:trace_pattern(MFA, MS, [Scope]) || {MFA, MS} <- New]
      end, ets:match_object(?CLAIMS, {{Id, '_'}, '_'})).

%% @doc Takes every pattern off the functions of `Modules' (ferrotrace's own, left out of a
%% `'_'' module's patterns: see ferrotrace_tracing).
-spec exclude_modules([module()]) -> ok.
exclude_modules(Modules) when is_list(Modules) ->
    _ = [erlang:trace_pattern({M, '_', '_'}, false, [Scope]) || M <- Modules, is_atom(M), Scope <- [local, global]],
    ok.

%% @doc Removes every flag of each process and port (and of `new') whose tracer is session
%% `Id''s: a process has one tracer here, so all its flags are the session's.
-spec untrace_processes(ferrotrace_tracer:session_id()) -> ok.
untrace_processes(Id) ->
    Ours = {tracer, {ferrotrace_tracer, Id}},
    %% Both calls guarded: a process that ends between them makes the second raise (outside
    %% a `try ... of''s guard, it crashed the registry cleaning up after a killed keeper,
    %% and the orphan stayed until the next call started a registry).
    Untrace = fun(Target) ->
                      try
                          case erlang:trace_info(Target, tracer) of
                              Ours -> _ = erlang:trace(Target, false, [all]), ok;
                              _ -> ok
                          end
                      catch error:badarg -> ok % the process is gone
                      end
              end,
    lists:foreach(Untrace, [new | erlang:processes()] ++ erlang:ports()).


%% @doc Claims and sets `Patterns' (with their loops, less what was shed) for session `Id';
%% refuses, changing nothing, when another session claimed an overlapping pattern with
%% another match spec or scope. How many functions matched.
-spec set(ferrotrace_tracer:session_id(), [pattern()]) ->
          {ok, non_neg_integer()}
              | {error, {pattern_conflict, ferrotrace:mfa_spec(), ferrotrace_tracer:session_id()}}.
set(Id, Patterns) ->
    Others = [{OtherId, P} || {{OtherId, _}, P} <- ets:tab2list(?CLAIMS), OtherId =/= Id],
    case [{MFA, OtherId} || #{mfa := MFA} = Mine <- Patterns, {OtherId, Theirs} <- Others,
                            overlaps(Mine, Theirs), not compatible(Mine, Theirs)] of
        [{MFA, OtherId} | _] ->
            {error, {pattern_conflict, MFA, OtherId}};
        [] ->
            %% Claimed first: a registry killed while setting them leaves claims that a
            %% stop removes, never patterns that nobody knows of.
            true = ets:insert(?CLAIMS, [{{Id, MFA}, P} || P = #{mfa := MFA} <- Patterns]),
            %% ferrotrace's own modules are left out after (ferrotrace_tracing): each
            %% pattern change waits for the VM's code barrier, 250 ms on a busy node.
            Matched = lists:sum([apply_pattern(P) || P <- Patterns]),
            {ok, Matched}
    end.

%% @doc Removes the patterns session `Id' set (`all', or those whose spec is one of a list:
%% `ferrotrace:remove/2'), except where another claim (another live session's, or one of the
%% session's patterns kept) is the same or wider; narrower ones inside a removed pattern are
%% set again at once. A function whose match spec another tool replaced (recon_trace, dbg)
%% keeps that tool's: only functions still carrying ours lose theirs. `Displaced': the
%% session was found displaced (ferrotrace_displaced), so a `'_'' module pattern's
%% functions are looked at one by one.
-spec remove(ferrotrace_tracer:session_id(), all | [ferrotrace:mfa_spec()], boolean()) -> ok.
remove(Id, Which, Displaced) ->
    Mine = [Claim || Claim = {{_, MFA}, _} <- ets:match_object(?CLAIMS, {{Id, '_'}, '_'}),
                     Which =:= all orelse lists:member(MFA, Which)],
    Others = [P || {Key, P} <- ets:tab2list(?CLAIMS), not lists:keymember(Key, 1, Mine)],
    lists:foreach(
      fun({Key, P = #{mfa := MFA, scope := Scope}}) ->
              case lists:any(fun(Q) -> covers(Q, P) end, Others) of
                  true ->
                      ok;
                  false ->
                      case foreign(P, Displaced) of
                          {Functions, [_ | _] = Foreign} ->
                              %% Another tool set its own match spec on some of these
                              %% functions: remove only ours, theirs stays.
                              remove_ours(P, Functions, Foreign, Others);
                          _ ->
                              _ = erlang:trace_pattern(MFA, false, [Scope]),
                              %% Set again what other sessions need inside what was just removed.
                              _ = [apply_pattern(Q) || Q <- Others, overlaps(P, Q)],
                              ok
                      end
              end,
              %% Forgotten only once removed (see the module doc).
              true = ets:delete(?CLAIMS, Key)
      end, Mine),
    exclude_own_modules(),
    ok.

%% Another tool's pattern is never ours to remove (recon_trace, dbg or redbug replacing our
%% match spec on OTP 25 and 26, see ferrotrace_displaced). The functions of pattern `P' that
%% can be listed (a concrete MFA, the functions of a named module; a `'_'' module's only
%% when the session was found displaced, since that walks all loaded code) and, of those,
%% the ones whose match spec is now neither ours nor none: `{Functions, Foreign}', or
%% `unknown' when not listed. Read with `trace_info(MFA, match_spec)', which does not stop
%% the schedulers (`all' would).
foreign(#{mfa := {'_', F, A}, scope := Scope} = P, true) ->
    Functions = lists:append([ferrotrace_traced:module_functions({M, F, A}, Scope)
                              || {M, _} <- code:all_loaded()]),
    foreign(P, Functions);
foreign(#{mfa := {'_', _, _}}, false) ->
    unknown;
foreign(#{mfa := Spec, scope := Scope} = P, Displaced) when is_boolean(Displaced) ->
    foreign(P, ferrotrace_traced:module_functions(Spec, Scope));
foreign(#{match_spec := MS} = P, Functions) ->
    Loops = maps:from_list(maps:get(loops, P, [])),
    Foreign = [MFA || MFA <- Functions,
                      not lists:member(ferrotrace_traced:match_spec(MFA), [maps:get(MFA, Loops, MS), false, undefined])],
    {Functions, Foreign}.

%% Removes pattern `P' where a function still carries our match spec (or a loop's) and no
%% other live session's claim needs it, function by function (each trace_pattern/3 call
%% waits for a code barrier) up to ?ONE_BY_ONE functions of ours. Past that (a `'_''
%% module pattern of a displaced session), the whole pattern goes in one call and the
%% `Foreign' functions get the match spec and scope they had a moment before back: the
%% other tool misses their calls for that moment.
remove_ours(#{mfa := Spec, match_spec := MS, scope := Scope} = P, Functions, Foreign, Others) ->
    Loops = maps:from_list(maps:get(loops, P, [])),
    Mine = [MFA || MFA <- Functions, ferrotrace_traced:match_spec(MFA) =:= maps:get(MFA, Loops, MS)],
    case length(Mine) =< ?ONE_BY_ONE of
        true ->
            _ = [erlang:trace_pattern(MFA, false, [Scope])
                 || MFA <- Mine, not lists:any(fun(Q) -> overlaps(#{mfa => MFA}, Q) end, Others)],
            ok;
        false ->
            Theirs = [{MFA, TheirMS, TheirScope}
                      || MFA <- Foreign,
                         {match_spec, TheirMS} <- [erlang:trace_info(MFA, match_spec)],
                         {traced, TheirScope} <- [erlang:trace_info(MFA, traced)],
                         is_list(TheirMS)],
            _ = erlang:trace_pattern(Spec, false, [Scope]),
            _ = [erlang:trace_pattern(MFA, TheirMS, [TheirScope]) || {MFA, TheirMS, TheirScope} <- Theirs],
            _ = [apply_pattern(Q) || Q <- Others, overlaps(P, Q)],
            ok
    end.

apply_pattern(#{mfa := MFA, match_spec := MS, scope := Scope} = Pattern) ->
    N = erlang:trace_pattern(MFA, MS, [Scope]),
    _ = [erlang:trace_pattern(Loop, LoopMS, [Scope])
         || {Loop, LoopMS} <- maps:get(loops, Pattern, [])],
    %% Functions the overhead budget took off stay off.
    _ = [erlang:trace_pattern(Shed, false, [Scope]) || Shed <- maps:get(shed, Pattern, [])],
    N.

%% @doc Takes the patterns of `MFAs' off for session `Id' (the overhead budget): a function
%% is shed where one of the session's claims covers it, it carries that claim's match spec
%% (or a loop's), and no other session's claim covers it. The claim remembers it as shed, so
%% that a pattern set again (another session's stop) leaves it off. `{Saved, Refused}';
%% `{error, badarg}' unless `Id' is a session id and `MFAs' a list of `{M, F, Arity}' (checked
%% first: each function reads the claims again, so a million-element list of anything
%% else held a node's schedulers past 20 s in the fuzz suite).
-spec shed(ferrotrace_tracer:session_id(), [mfa()]) -> {[ferrotrace_backend:saved()], [mfa()]} | {error, badarg}.
shed(Id, MFAs) when is_integer(Id), is_list(MFAs) ->
    case lists:all(fun is_mfa/1, MFAs) of
        true -> shed_checked(Id, MFAs);
        false -> {error, badarg}
    end;
shed(_Id, _MFAs) ->
    {error, badarg}.

shed_checked(Id, MFAs) ->
    Others = [P || {{OtherId, _}, P} <- ets:tab2list(?CLAIMS), OtherId =/= Id],
    %% In the order given (the hottest first): each change waits for the code barrier, 4 to
    %% 8 ms on a busy server, and the first ones taken off take off the most cost.
    {Saved, Refused} = lists:foldl(
      fun(MFA, {Off, Left}) ->
              %% Read again for each function: the claim records those already shed.
              Ours = [{Key, P} || {Key, P = #{mfa := Spec}} <- ets:match_object(?CLAIMS, {{Id, '_'}, '_'}),
                                  ferrotrace_spec:matches(Spec, MFA)],
              Shared = lists:any(fun(Q) -> overlaps(#{mfa => MFA}, Q) end, Others),
              case {Ours, Shared} of
                  {[{Key, P = #{match_spec := MS, scope := Scope}} | _], false} ->
                      Expected = proplists:get_value(MFA, maps:get(loops, P, []), MS),
                      case {ferrotrace_traced:match_spec(MFA), ferrotrace_traced:scope(MFA)} of
                          {Expected, Scope} ->
                              Shed = lists:usort([MFA | maps:get(shed, P, [])]),
                              true = ets:insert(?CLAIMS, {Key, P#{shed => Shed}}),
                              _ = erlang:trace_pattern(MFA, false, [Scope]),
                              {[{MFA, Expected, Scope} | Off], Left};
                          _ ->
                              {Off, [MFA | Left]}
                      end;
                  _ ->
                      {Off, [MFA | Left]}
              end
      end, {[], []}, MFAs),
    {lists:reverse(Saved), lists:reverse(Refused)}.

%% @doc Puts back functions {@link shed/2} took off, with the match spec and scope they had,
%% where the session's claim still has them as shed; `{error, badarg}' unless `Id' is a
%% session id and `Saved' a list of what shed/2 gives back (checked first, as there).
-spec unshed(ferrotrace_tracer:session_id(), [ferrotrace_backend:saved()]) -> ok | {error, badarg}.
unshed(Id, Saved) when is_integer(Id), is_list(Saved) ->
    case lists:all(fun({MFA, MS, Scope}) -> is_mfa(MFA) andalso (is_list(MS) orelse is_boolean(MS))
                                             andalso (Scope =:= local orelse Scope =:= global);
                      (_) -> false
                   end, Saved) of
        true -> unshed_checked(Id, Saved);
        false -> {error, badarg}
    end;
unshed(_Id, _Saved) ->
    {error, badarg}.

is_mfa({M, F, A}) -> is_atom(M) andalso is_atom(F) andalso is_integer(A) andalso A >= 0 andalso A =< 255;
is_mfa(_) -> false.

unshed_checked(Id, Saved) ->
    lists:foreach(
      fun({MFA, MS, Scope}) ->
              case [{Key, P} || {Key, P = #{shed := Shed}} <- ets:match_object(?CLAIMS, {{Id, '_'}, '_'}),
                                lists:member(MFA, Shed)] of
                  [] ->
                      ok;
                  Claims ->
                      _ = [ets:insert(?CLAIMS, {Key, P#{shed := lists:delete(MFA, Shed)}})
                           || {Key, P = #{shed := Shed}} <- Claims],
                      _ = erlang:trace_pattern(MFA, MS, [Scope]),
                      ok
              end
      end, Saved),
    ok.

%% Never trace ferrotrace itself, whatever the wildcard.
%% Patterns set again where other sessions need them may cover ferrotrace's own modules:
%% those loaded are left out again when a `'_'' module pattern is still claimed.
exclude_own_modules() ->
    Wildcard = [P || {_, P = #{mfa := {'_', _, _}}} <- ets:tab2list(?CLAIMS)],
    _ = [erlang:trace_pattern({M, '_', '_'}, false, [Scope])
         || Wildcard =/= [], M <- ferrotrace_traced:own_modules(), erlang:module_loaded(M),
            Scope <- [local, global]],
    ok.

%% Two patterns that can match the same function.
overlaps(#{mfa := Spec1}, #{mfa := Spec2}) ->
    ferrotrace_spec:overlaps(Spec1, Spec2).

%% Patterns that may share functions: same match spec, same scope.
compatible(#{match_spec := MS, scope := Scope}, #{match_spec := MS, scope := Scope}) -> true;
compatible(_, _) -> false.

%% `Wide' matches every function `Narrow' matches, with the same settings.
covers(Wide = #{mfa := WideSpec}, Narrow = #{mfa := NarrowSpec}) ->
    compatible(Wide, Narrow) andalso ferrotrace_spec:wider(WideSpec, NarrowSpec).
