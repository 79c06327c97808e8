%%% @private
%%% @doc Taking single functions' patterns off a running `calls/2' session and putting them
%%% back, for the overhead budget (ferrotrace_budget sheds the hottest, cheapest functions
%%% when the floor of being asked at every call is over the budget). Called by the session's
%%% keeper, which holds the backend; only this session's patterns change.
%%%
%%% A function is taken off with the match spec and scope it carries now remembered (the
%%% session's, or a count-only loop's), and put back with exactly those.
%%% <ul>
%%% <li>OTP 27+ (a trace session of our own): `trace:function/4' on the session: nobody
%%% else's patterns are touched.</li>
%%% <li>OTP 25 and 26 (one match spec per function for the node): through the registry, so
%%% that the change is atomic with other sessions' starts and stops (see
%%% `ferrotrace_registry:shed/2'); a function another live session's pattern also covers,
%%% or whose match spec is another tool's, is not taken off (answered as refused).</li>
%%% <li>A raw session (its patterns are its user's): nothing is taken off.</li>
%%% </ul>
-module(ferrotrace_shed).

-export([switch/3]).

-type saved() :: {mfa(), MatchSpec :: [tuple()], local | global}.
-export_type([saved/0]).

%% @doc The keeper's side (`ferrotrace_session:shed/2', `unshed/2'): `shed' takes
%% `Functions' (MFAs) off, answering `{ok, Saved, Refused}'; `unshed' puts `Functions'
%% (saved) back, answering `ok'. On OTP 25 and 26 the functions taken off leave what the
%% keeper watches for another tool (`Watch', see ferrotrace_displaced; `none' elsewhere),
%% and come back to it. `Specs' are the session's patterns now: a function none of them
%% covers any more (taken off by `ferrotrace:remove/2') is neither taken off nor put back.
-spec switch(shed | unshed, list(),
             {ferrotrace_tracer:session_id(), term(), ferrotrace_displaced:watch() | none, [ferrotrace:mfa_spec()]}) ->
          {{ok, [saved()], [mfa()]} | ok, ferrotrace_displaced:watch() | none}.
switch(shed, MFAs0, {Id, Backend, Watch, Specs}) ->
    {MFAs, Gone} = lists:partition(fun(MFA) -> covered(MFA, Specs) end, MFAs0),
    {Saved, Refused0} = off(Id, Backend, MFAs),
    Refused = Refused0 ++ Gone,
    {{ok, Saved, Refused}, watch(Watch, fun(W) -> ferrotrace_displaced:remove_functions(W, [MFA || {MFA, _, _} <- Saved]) end)};
switch(unshed, Saved0, {Id, Backend, Watch, Specs}) ->
    Saved = [S || S = {MFA, _, _} <- Saved0, covered(MFA, Specs)],
    ok = on(Id, Backend, Saved),
    {ok, watch(Watch, fun(W) -> ferrotrace_displaced:add_functions(W, Id, [{MFA, MS} || {MFA, MS, _} <- Saved]) end)}.

covered(MFA, Specs) ->
    lists:any(fun(Spec) -> ferrotrace_spec:matches(Spec, MFA) end, Specs).

watch(none, _Change) -> none;
watch(Watch, Change) -> Change(Watch).

%% Takes the patterns of `MFAs' off for session `Id': `{Saved, Refused}', what was
%% taken off (to give back to {@link on/3}) and the functions left as they were.
-spec off(ferrotrace_tracer:session_id(), term(), [mfa()]) -> {[saved()], [mfa()]}.
off(Id, legacy, MFAs) ->
    ferrotrace_registry:shed(Id, MFAs);
off(_Id, {trace_session, Session, _Scopes}, MFAs) ->
    lists:foldr(fun(MFA, {Saved, Refused}) ->
                        case session_pattern(Session, MFA) of
                            {MS, Scope} ->
                                _ = ferrotrace_vm:trace_call(function, [Session, MFA, false, [Scope]]),
                                {[{MFA, MS, Scope} | Saved], Refused};
                            none ->
                                {Saved, [MFA | Refused]}
                        end
                end, {[], []}, MFAs);
off(_Id, _Backend, MFAs) ->
    {[], MFAs}.

%% Puts back what off/3 took off.
-spec on(ferrotrace_tracer:session_id(), term(), [saved()]) -> ok.
on(Id, legacy, Saved) ->
    ferrotrace_registry:unshed(Id, Saved);
on(_Id, {trace_session, Session, _Scopes}, Saved) ->
    _ = [ferrotrace_vm:trace_call(function, [Session, MFA, MS, [Scope]]) || {MFA, MS, Scope} <- Saved],
    ok;
on(_Id, _Backend, _Saved) ->
    ok.

%% The match spec and scope of `MFA' in trace session `Session', or `none' when it has no
%% call pattern there.
session_pattern(Session, MFA) ->
    try {ferrotrace_vm:trace_call(info, [Session, MFA, traced]), ferrotrace_vm:trace_call(info, [Session, MFA, match_spec])} of
        {{traced, Scope}, {match_spec, MS}} when (Scope =:= local orelse Scope =:= global), is_list(MS) ->
            {MS, Scope};
        _ ->
            none
    catch error:badarg -> none
    end.

