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

-type saved() :: ferrotrace_backend:saved().
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
    {MFAs, Gone} = lists:partition(fun(MFA) -> ferrotrace_spec:covered(MFA, Specs) end, MFAs0),
    {Saved, Refused0} = ferrotrace_tracing:take_off(Id, Backend, MFAs),
    Refused = Refused0 ++ Gone,
    {{ok, Saved, Refused}, watch(Watch, fun(W) -> ferrotrace_displaced:remove_functions(W, [MFA || {MFA, _, _} <- Saved]) end)};
switch(unshed, Saved0, {Id, Backend, Watch, Specs}) ->
    Saved = [S || S = {MFA, _, _} <- Saved0, ferrotrace_spec:covered(MFA, Specs)],
    ok = ferrotrace_tracing:put_back(Id, Backend, Saved),
    {ok, watch(Watch, fun(W) -> ferrotrace_displaced:add_functions(W, Id, [{MFA, MS} || {MFA, MS, _} <- Saved]) end)}.

watch(none, _Change) -> none;
watch(Watch, Change) -> Change(Watch).
