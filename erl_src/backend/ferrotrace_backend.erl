%%% @private
%%% @doc The VM's trace state, changed here and in the backend's OTP 25/26 half
%%% (ferrotrace_backend_legacy) only: every call of `erlang:trace/3', `erlang:trace_pattern/3'
%%% and the `trace' module (OTP 27+) that ferrotrace makes is in one of the two, and
%%% `ferrotrace_backend_tests' asks xref that it stays so.
%%%
%%% Here: a session's trace session (OTP 27 and later: its patterns, flags, shedding and
%%% destruction), process flags on either VM (a session's, the fuse's untraced processes
%%% traced again), the calls counted before a budgeted start (`call_count'), a calibration's
%%% throwaway session, and ferrotrace's own processes kept untraced. What to set and in what
%%% order is ferrotrace_tracing's; a session's patterns on OTP 25 and 26 are the node's,
%%% shared through claims (ferrotrace_backend_legacy, in the registry's process).
%%%
%%% == Own processes ==
%%% Every process of ferrotrace's own records itself here as it starts ({@link enter/0},
%%% through ferrotrace_own) and takes off any trace flag it was born with (a session tracing
%%% `new' processes gives them to every process at spawn); a keeper that set flags on `all'
%%% or `existing' processes takes them off every recorded process at once (in
%%% {@link trace/4}). Either order of the two leaves the process untraced. On OTP 27+ the
%%% flags belong to a trace session: the weak half of each session's handle is recorded
%%% here too, so that a process born traced by one can leave it.
%%%
%%% Below every process-spawning module: it calls only ferrotrace_traced (reads).
-module(ferrotrace_backend).

-export([trace_sessions/0, port_flags/0]).
-export([new/2, stop/2, set/2, unset/3, add_loops/2, leave_out_modules/2, take_off/2, put_back/2]).
-export([trace/4, calls_flag/4, retrace/4, traced_processes/2, counters/0, traces_gc/1]).
-export([trace_self/1, self_flag/2, self_pattern/3, untrace_self/2]).
-export([new_table/0, enter/0, leave/0, own_pids/0]).

%% OTP 25's spec of erlang:trace_info/2 omits the `{tracer, {Module, State}}' answer that a
%% tracer module gets (as in ferrotrace_backend_legacy).
-dialyzer({no_match, [calls_flag/4, traced_processes/2]}).

%% A calls session's flags: `call' only. Not `procs': its exits would let the engine forget
%% the calls a process left open when it died, but each process born and ended then gets
%% three events (`spawn', `spawned', `exit'), each a call of the tracer, which made a process
%% of 40 calls cost 1.79 to 1.86 us instead of 1.65 to 1.71 (1.40 to 1.45 untraced: `make
%% births'), whatever the session traced. The keeper forgets dead processes' calls instead
%% (ferrotrace_tracer:session_settle_exits/1).
-define(TRACE_FLAGS, [call]).
%% The flags that trace ports (trace:port/4 takes them, trace:process/4 does not).
-define(PORT_FLAGS, [ports, running_ports]).
-define(OWN, ferrotrace_own).

-type backend() :: none | legacy | {trace_session, term(), [local | global]}.
%% A function's pattern taken off by the budget, to put back as it was.
-type saved() :: {mfa(), MatchSpec :: [tuple()], local | global}.
%% A calibration's own process traced by a throwaway session (see {@link trace_self/1}).
-type self_tracing() :: {trace_session, term()} | {legacy, ferrotrace_tracer:session_id()}.
-export_type([backend/0, saved/0, self_tracing/0]).

%% @doc True where the VM has trace sessions (OTP 27 and later): a session then traces in
%% one of its own; before, through the node's one tracer per process. Answered from the
%% release number, not by `code:ensure_loaded(trace)': on OTP 25 and 26 there is no such
%% module, and looking for it is a request to the code server, which on two schedulers kept
%% busy by 50 processes took about a second.
-spec trace_sessions() -> boolean().
trace_sessions() ->
    case erlang:system_info(otp_release) of
        [D1, D2] when D1 >= $0, D1 =< $9, D2 >= $0, D2 =< $9 -> list_to_integer([D1, D2]) >= 27;
        _ -> false
    end.

%% @doc The trace flags of activity that apply to ports.
-spec port_flags() -> [atom()].
port_flags() -> ?PORT_FLAGS.

%%% A session's trace session (OTP 27 and later)

%% @doc A trace session of the calling keeper's own for engine session `Id', with the
%% `Scopes' of its patterns; recorded for {@link enter/0}. This keeper is the only holder of
%% the handle: if it dies, the VM destroys the session with it.
-spec new(ferrotrace_tracer:session_id(), [local | global]) -> backend().
new(Id, Scopes) ->
    Session = trace(session_create, [ferrotrace, {ferrotrace_tracer, Id}, []]),
    ok = remember(Id, Session),
    {trace_session, Session, Scopes}.

%% @doc Sets `Patterns' (with their loops) in the trace session: how many functions matched.
-spec set(backend(), [ferrotrace_registry:pattern()]) -> non_neg_integer().
set({trace_session, Session, _}, Patterns) ->
    Matched = lists:sum([function(Session, MFA, MS, Scope)
                         || #{mfa := MFA, match_spec := MS, scope := Scope} <- Patterns]),
    _ = [function(Session, Loop, LoopMS, Scope)
         || #{loops := Loops, scope := Scope} <- Patterns, {Loop, LoopMS} <- Loops],
    Matched.

%% @doc Removes `Removed', and sets again the patterns `Again' (kept ones that share
%% functions with them).
-spec unset(backend(), [ferrotrace_registry:pattern()], [ferrotrace_registry:pattern()]) -> ok.
unset({trace_session, Session, _} = Backend, Removed, Again) ->
    _ = [function(Session, MFA, false, Scope) || #{mfa := MFA, scope := Scope} <- Removed],
    _ = [function(Session, Loop, false, Scope)
         || #{scope := Scope} = P <- Removed, {Loop, _} <- maps:get(loops, P, [])],
    _ = set(Backend, Again),
    ok.

%% @doc Traces `Loops' (`{MFA, CountOnlyMatchSpec}') count-only, in each of the session's scopes.
-spec add_loops(backend(), [{mfa(), [tuple()]}]) -> ok.
add_loops({trace_session, Session, Scopes}, Loops) ->
    _ = [function(Session, MFA, MS, Scope) || {MFA, MS} <- Loops, Scope <- Scopes],
    ok.

%% @doc Leaves ferrotrace's own `Modules' out of the session's patterns.
-spec leave_out_modules(backend(), [module()]) -> ok.
leave_out_modules({trace_session, Session, _Scopes}, Modules) ->
    _ = [function(Session, {M, '_', '_'}, false, Scope) || M <- Modules, Scope <- [local, global]],
    ok.

%% @doc Takes the patterns of `MFAs' off, in the order given (the hottest first: see
%% ferrotrace_backend_legacy:shed/2): `{Saved, Refused}', what was taken off (to give back
%% to {@link put_back/2}) and the functions the session has no pattern on.
-spec take_off(backend(), [mfa()]) -> {[saved()], [mfa()]}.
take_off({trace_session, Session, _Scopes}, MFAs) ->
    {Saved, Refused} = lists:foldl(fun(MFA, {Off, Left}) ->
                                           case session_pattern(Session, MFA) of
                                               {MS, Scope} ->
                                                   _ = function(Session, MFA, false, Scope),
                                                   {[{MFA, MS, Scope} | Off], Left};
                                               none ->
                                                   {Off, [MFA | Left]}
                                           end
                                   end, {[], []}, MFAs),
    {lists:reverse(Saved), lists:reverse(Refused)}.

%% @doc Puts back what {@link take_off/2} took off.
-spec put_back(backend(), [saved()]) -> ok.
put_back({trace_session, Session, _Scopes}, Saved) ->
    _ = [function(Session, MFA, MS, Scope) || {MFA, MS, Scope} <- Saved],
    ok.

%% The match spec and scope of `MFA' in trace session `Session', or `none' when it has no
%% call pattern there.
session_pattern(Session, MFA) ->
    try {trace(info, [Session, MFA, traced]), trace(info, [Session, MFA, match_spec])} of
        {{traced, Scope}, {match_spec, MS}} when (Scope =:= local orelse Scope =:= global), is_list(MS) ->
            {MS, Scope};
        _ ->
            none
    catch error:badarg -> none
    end.

function(Session, MFA, MS, Scope) ->
    trace(function, [Session, MFA, MS, [Scope]]).

%% @doc Undoes a session's trace session (OTP 27+): destroyed, its patterns and flags with
%% it. (On OTP 25 and 26, ferrotrace_tracing:stop/2 asks the registry and
%% ferrotrace_backend_legacy.)
-spec stop(ferrotrace_tracer:session_id(), backend()) -> ok.
stop(Id, {trace_session, Session, _Scopes}) ->
    ok = forget(Id),
    _ = trace(session_destroy, [Session]),
    ok;
stop(_Id, _Backend) ->
    ok.

%%% Process flags

%% @doc Flags `Targets' (pids, `all', `existing', `new') for session `Id' with the flags of
%% calls and the `Extra' ones of other kinds, then takes every flag off ferrotrace's own
%% processes (`all' and `existing' include them, the keeper among them): `ok', or what
%% refused (a dead pid; on OTP 25 and 26 one another tracer holds), with some targets
%% possibly flagged (the caller stops the session).
-spec trace(ferrotrace_tracer:session_id(), backend(), [pid() | all | existing | new], [atom()]) ->
          ok | {error, {bad_pid, term(), not_alive | already_traced}}.
trace(Id, legacy, Targets, Extra) ->
    case set_flags(Targets, [{tracer, ferrotrace_tracer, Id} | ?TRACE_FLAGS ++ Extra]) of
        ok -> untrace_own(legacy);
        {error, _} = Error -> Error
    end;
trace(_Id, {trace_session, Session, _}, Targets, Extra) ->
    try
        ProcessFlags = ?TRACE_FLAGS ++ (Extra -- ?PORT_FLAGS),
        _ = [trace(process, [Session, Target, true, ProcessFlags]) || Target <- Targets],
        ok = untrace_own([Session]),
        _ = case Extra -- ProcessFlags of
                [] -> ok;
                PortFlags -> [trace(port, [Session, Target, true, PortFlags]) || Target <- Targets]
            end,
        ok
    catch
        error:badarg ->
            {error, {bad_pid, [T || T <- Targets, is_pid(T), not is_process_alive(T)], not_alive}}
    end.

%% erlang:trace/3 refuses a dead process, or one another tracer already traces.
set_flags([], _Flags) ->
    ok;
set_flags([Target | Rest], Flags) ->
    try erlang:trace(Target, true, Flags) of
        _ -> set_flags(Rest, Flags)
    catch
        error:badarg when is_pid(Target) ->
            Why = case is_process_alive(Target) of
                      false -> not_alive;
                      true -> already_traced
                  end,
            {error, {bad_pid, Target, Why}}
    end.

%% @doc Takes the `call' flag of session `Id' off `Pids' (`false'), or puts it back
%% (`true'); their other flags stay. A process that is gone, or traced by another tool
%% meanwhile, is left as it is, and one of ferrotrace's own is never flagged.
-spec calls_flag(ferrotrace_tracer:session_id(), backend(), [pid()], boolean()) -> ok.
calls_flag(_Id, legacy, Pids, false) ->
    _ = [catch_badarg(fun() -> erlang:trace(P, false, [call]) end) || P <- Pids],
    ok;
calls_flag(Id, legacy, Pids, true) ->
    %% `call' is a calls session's only flag: a process it was taken off has no flag left,
    %% and the VM forgot its tracer too. So a process with no tracer is ours to flag again
    %% (a process another tool took meanwhile has that tool's), never one of our own (the
    %% processes waiting in a loop include ferrotrace's servers).
    Own = own_pids(),
    _ = [catch_badarg(fun() -> erlang:trace(P, true, [call, {tracer, ferrotrace_tracer, Id}]) end)
         || P <- Pids, not lists:member(P, Own),
            lists:member(ferrotrace_traced:tracer(P), [{ferrotrace_tracer, Id}, []])],
    ok;
calls_flag(_Id, {trace_session, Session, _}, Pids, On) ->
    %% Never one of ferrotrace's own (as retrace/4): the processes waiting in a loop
    %% (flagged once the loop is count-only) include its servers, the registry's among them.
    Own = case On of
              true -> own_pids();
              false -> []
          end,
    _ = [catch_badarg(fun() -> trace(process, [Session, P, On, [call]]) end) || P <- Pids, not lists:member(P, Own)],
    ok;
calls_flag(_Id, none, _Pids, _On) ->
    ok.

%% @doc Traces `Pids' again with session `Id''s flags (those of calls and the `Extra' ones of
%% other kinds), after its fuse untraced them (`remove' from enabled_call clears every flag
%% and the tracer). On OTP 25 and 26 only the processes that no tracer took meanwhile; a
%% process that is gone, or one of ferrotrace's own, is left as it is.
-spec retrace(ferrotrace_tracer:session_id(), backend(), [pid()], [atom()]) -> ok.
retrace(Id, legacy, Pids, Extra) ->
    Flags = [{tracer, ferrotrace_tracer, Id} | ?TRACE_FLAGS ++ Extra],
    Own = own_pids(),
    _ = [catch_badarg(fun() -> erlang:trace(P, true, Flags) end)
         || P <- Pids, not lists:member(P, Own), safe_tracer(P) =:= {tracer, []}],
    ok;
retrace(_Id, {trace_session, Session, _}, Pids, Extra) ->
    Flags = ?TRACE_FLAGS ++ (Extra -- ?PORT_FLAGS),
    Own = own_pids(),
    _ = [catch_badarg(fun() -> trace(process, [Session, P, true, Flags]) end)
         || P <- Pids, not lists:member(P, Own)],
    ok;
retrace(_Id, none, _Pids, _Extra) ->
    ok.

catch_badarg(Fun) ->
    try Fun() catch error:badarg -> ok end.

%% @doc How many processes session `Id' traces now (a walk of every process: for a scope's
%% report, not for a hot path).
-spec traced_processes(ferrotrace_tracer:session_id(), backend()) -> non_neg_integer().
traced_processes(Id, legacy) ->
    length([P || P <- erlang:processes(), ferrotrace_traced:tracer(P) =:= {ferrotrace_tracer, Id}]);
traced_processes(_Id, {trace_session, Session, _}) ->
    length([P || P <- erlang:processes(),
                 case safe(fun() -> trace(info, [Session, P, flags]) end) of
                     {flags, [_ | _]} -> true;
                     _ -> false
                 end]);
traced_processes(_Id, none) ->
    0.

safe_tracer(Target) ->
    try erlang:trace_info(Target, tracer)
    catch error:badarg -> undefined
    end.

%% @doc Whether a trace session traces the garbage collections of `P' (OTP 27+; `true'
%% where the VM cannot say): what ferrotrace_activity checks before a second session
%% traces GC (erlang/otp#11623).
-spec traces_gc(pid() | new_processes) -> boolean().
traces_gc(P) ->
    Sessions = try trace(session_info, [P]) of
                   List when is_list(List) -> List;
                   _ -> []
               catch error:_ -> []
               end,
    lists:any(fun(Session) ->
                      try trace(info, [Session, P, flags]) of
                          {flags, Flags} -> lists:member(garbage_collection, Flags);
                          _ -> false
                      catch error:_ -> true
                      end
              end, Sessions).

%%% The calls counted before a budgeted start

%% @doc Setting, reading and dropping the VM's `call_count' counters (see
%% ferrotrace_tracing:count_calls/3): in a trace session of their own (dropped with it: one
%% wait for the code barrier), or on OTP 25 and 26 the node's (cprof's).
-spec counters() -> {fun((ferrotrace:mfa_spec(), boolean()) -> term()),
                     fun((mfa()) -> non_neg_integer()),
                     fun(([ferrotrace:mfa_spec()]) -> term())}.
counters() ->
    case trace_sessions() of
        true ->
            Session = trace(session_create, [ferrotrace_count, self(), []]),
            {fun(Spec, How) -> trace(function, [Session, Spec, How, [call_count]]) end,
             fun(MFA) -> count(trace(info, [Session, MFA, call_count])) end,
             fun(_Specs) -> trace(session_destroy, [Session]) end};
        false ->
            Set = fun(Spec, How) -> erlang:trace_pattern(Spec, How, [call_count]) end,
            {Set,
             fun(MFA) -> count(erlang:trace_info(MFA, call_count)) end,
             fun(Specs) -> [try Set(Spec, false) catch error:_ -> ok end || Spec <- Specs] end}
    end.

count({call_count, N}) when is_integer(N) -> N;
count(_) -> 0.

%%% A calibration's throwaway session (ferrotrace_calibrate): the calling process alone,
%%% on one function of its own

%% @doc Makes the calling process traceable by session `Id' alone, its flag off for now:
%% `{ok, Tracing}' for the functions below, or an error when another tool traces it.
-spec trace_self(ferrotrace_tracer:session_id()) -> {ok, self_tracing()} | {error, {traced_by_another_tool, term()}}.
trace_self(Id) ->
    case trace_sessions() of
        true ->
            Session = trace(session_create, [ferrotrace_calibrate, {ferrotrace_tracer, Id}, []]),
            {ok, {trace_session, Session}};
        false ->
            %% A session tracing new processes (OTP 25 and 26: one tracer per process) has
            %% made this process its tracee at spawn: it is ferrotrace's own process, its
            %% calls are no one's figures, so that tracing is taken off first (else the VM
            %% refuses the tracer below and logs "can only have one tracer per process").
            _ = erlang:trace(self(), false, [all]),
            try erlang:trace(self(), true, [call, {tracer, ferrotrace_tracer, Id}]) of
                _ ->
                    _ = erlang:trace(self(), false, [call]),
                    {ok, {legacy, Id}}
            catch
                error:badarg -> {error, {traced_by_another_tool, erlang:trace_info(self(), tracer)}}
            end
    end.

%% @doc Turns the calling process's call flag on or off (cheap, unlike a pattern change).
-spec self_flag(self_tracing(), boolean()) -> ok.
self_flag({trace_session, Session}, On) ->
    _ = trace(process, [Session, self(), On, [call]]),
    ok;
self_flag({legacy, Id}, true) ->
    %% The tracer again each time: a process with no flag left has none.
    _ = erlang:trace(self(), true, [call, {tracer, ferrotrace_tracer, Id}]),
    ok;
self_flag({legacy, _Id}, false) ->
    _ = erlang:trace(self(), false, [call]),
    ok.

%% @doc Sets a local pattern on one concrete function, which must exist.
-spec self_pattern(self_tracing(), mfa(), [tuple()]) -> ok.
self_pattern({trace_session, Session}, {M, F, A} = MFA, MatchSpec) when is_atom(M), is_atom(F), is_integer(A) ->
    1 = trace(function, [Session, MFA, MatchSpec, [local]]),
    ok;
self_pattern({legacy, _Id}, {M, F, A} = MFA, MatchSpec) when is_atom(M), is_atom(F), is_integer(A) ->
    1 = erlang:trace_pattern(MFA, MatchSpec, [local]),
    ok.

%% @doc Undoes {@link trace_self/1} and the pattern on `MFA'.
-spec untrace_self(self_tracing(), mfa()) -> ok.
untrace_self({trace_session, Session}, {M, F, A} = MFA) when is_atom(M), is_atom(F), is_integer(A) ->
    _ = trace(function, [Session, MFA, false, [local]]),
    _ = trace(session_destroy, [Session]),
    ok;
untrace_self({legacy, _Id}, {M, F, A} = MFA) when is_atom(M), is_atom(F), is_integer(A) ->
    _ = erlang:trace_pattern(MFA, false, [local]),
    _ = erlang:trace(self(), false, [call]),
    ok.

%%% Own processes

%% @doc Creates the table of own processes and trace sessions; its caller owns it (the
%% registry's tables' owner, which outlives any registry).
-spec new_table() -> ok.
new_table() ->
    _ = ets:new(?OWN, [named_table, public, set]),
    ok.

%% @doc Records the calling process as one of ferrotrace's own and takes off every trace
%% flag it has (see the module doc; ferrotrace_own:enter/0 calls it).
-spec enter() -> ok.
enter() ->
    %% Recorded before the flags are taken off: a keeper setting flags meanwhile finds it.
    _ = safe(fun() -> ets:insert(?OWN, {self(), own}) end),
    untrace_process(self(), sessions()).

%% @doc Forgets the calling process as one of ferrotrace's own (it is about to end).
-spec leave() -> ok.
leave() ->
    _ = safe(fun() -> ets:delete(?OWN, self()) end),
    ok.

%% @doc The own processes alive now (dead ones are forgotten as they are met).
-spec own_pids() -> [pid()].
own_pids() ->
    Recorded = case safe(fun() -> ets:match(?OWN, {'$1', own}) end) of
                   Rows when is_list(Rows) -> [P || [P] <- Rows];
                   _ -> []
               end,
    lists:filter(fun(P) ->
                         is_process_alive(P) orelse begin _ = safe(fun() -> ets:delete(?OWN, P) end), false end
                 end, Recorded).

%% Every trace flag off every own process: after a session set flags on `all' or `existing'
%% processes (`legacy', or an OTP 27+ trace session's handles). The calibration (registered
%% under its module's name while it measures) traces itself with a throwaway session of its
%% own: left as it is.
untrace_own(Sessions) ->
    Calibrating = whereis(ferrotrace_calibrate),
    lists:foreach(fun(P) -> untrace_process(P, Sessions) end, own_pids() -- [Calibrating]).

%% The weak reference of session `Id''s trace session, for enter/0. The VM destroys a
%% session when its last strong handle is gone, and the keeper must stay the only holder (a
%% killed keeper takes its session with it); the weak one (`{Name, Number}', the second half
%% of the handle) is accepted by `trace:process/4' as long as the session lives. A handle of
%% another shape (a later OTP) is not kept, rather than kept strong: a process born traced
%% by this session then keeps its flags until the session ends.
remember(Id, Session) ->
    _ = [safe(fun() -> ets:insert(?OWN, {{session, Id}, Weak}) end) || Weak <- [weak(Session)], Weak =/= none],
    ok.

weak({Strong, {Name, Number} = Weak}) when is_reference(Strong), is_atom(Name), is_integer(Number) -> Weak;
weak(_Session) -> none.

forget(Id) ->
    _ = safe(fun() -> ets:delete(?OWN, {session, Id}) end),
    ok.

%% The recorded trace sessions (OTP 27+), or `legacy' where the VM has none.
sessions() ->
    case trace_sessions() of
        true ->
            case safe(fun() -> ets:match(?OWN, {{session, '_'}, '$1'}) end) of
                Rows when is_list(Rows) -> [S || [S] <- Rows];
                _ -> []
            end;
        false ->
            legacy
    end.

%% The legacy session's flags always; a trace session's where there are some. A process
%% that is gone, or a session destroyed meanwhile, is no error.
untrace_process(Pid, Sessions) ->
    _ = safe(fun() -> erlang:trace(Pid, false, [all]) end),
    _ = [safe(fun() -> trace(process, [S, Pid, false, [all]]) end) || is_list(Sessions), S <- Sessions, S =/= none],
    ok.

safe(Fun) ->
    try Fun()
    catch error:_ -> error
    end.

%% `trace:Function(Args...)', through `apply' so that ferrotrace compiles and dialyzes on
%% OTP 25, where the module does not exist (see trace_sessions/0).
trace(Function, Args) ->
    apply(trace, Function, Args).
