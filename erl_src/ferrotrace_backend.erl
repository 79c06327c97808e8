%%% @private
%%% @doc The one place that changes a session's trace state in the VM (its start and stop,
%%% call patterns, process flags, the budget's shedding), on both backends:
%%% `legacy' (OTP 25 and 26: the node's one match spec per function, shared by sessions
%%% through claims; the patterns are changed by ferrotrace_legacy in the registry's process,
%%% which serializes them, and asked for here) and `{trace_session, Session, Scopes}'
%%% (OTP 27+: a trace session of our own, changed directly). A raw session (`none') has
%%% patterns its user set: nothing here touches them.
%%%
%%% == A pattern change costs a wait on a busy node ==
%%% Every `erlang:trace_pattern/3' (and `trace:function/4') waits for the VM's code
%%% barrier: on two schedulers kept busy it took 100 to 250 ms a call, whatever the number
%%% of functions it changes. A start that set a wildcard, then each count-only loop (151
%%% on a bare node) and each of ferrotrace's modules off, made hundreds of such calls and
%%% took 15 to 26 s. So a start sets one pattern per spec and is ready; what refines them
%%% is done after, a few changes at a time, by the keeper ({@link steps/2}),
%%% so that a stop or a read is never stuck behind them:
%%% <ol>
%%% <li>loops traced count-only (until then the engine's frame bound holds their frames
%%% at 120 a process, see ferrotrace_frames' doc in the Rust crate);</li>
%%% <li>compiler-generated functions left out of a wildcard (see {@link generated/1}):
%%% those of named modules at once, those of a `'_'' module as the session sees them
%%% called, the hottest first;</li>
%%% <li>ferrotrace's own modules left out of a `'_'' module (its processes are never
%%% traced, ferrotrace_own; this keeps a shell's calls of `ferrotrace:*' out of the
%%% figures).</li>
%%% </ol>
-module(ferrotrace_backend).

-export([start/5, stop/2, take_off/3, put_back/3, count_calls/3]).
-export([patterns/4, match_spec/2, set/3, unset/4, add_loops/3, steps/2, chunks/2, seen_generated/3,
         leave_out_modules/3, calls_flag/4, generated/1, retrace/4]).
-export([trace_self/1, self_flag/2, self_pattern/3, untrace_self/2]).

%% OTP 25's spec of erlang:trace_info/2 omits the `{tracer, {Module, State}}' answer that a
%% tracer module gets (as in ferrotrace_session).
-dialyzer({no_match, [calls_flag/4, already_traced/2, holder/1, how/1]}).
%% trace:function/4 is called through ferrotrace_vm's apply: dialyzer cannot see it answer
%% 0 for patterns that match nothing.
-dialyzer({no_match, start_trace_session/5}).

%% `procs' brings each process's exit, which lets the engine forget calls left open by a
%% process that died inside them.
-define(TRACE_FLAGS, [call, procs]).

-type backend() :: none | legacy | {trace_session, term(), [local | global]}.
%% A change left for later: loops to trace count-only, functions to leave out, ferrotrace's
%% own modules to leave out, or a look at which generated functions the session sees.
-type step() :: {loops, [mfa()]} | {flag, [pid()]} | {leave_out, [mfa()]} | {own, [module()]} | seen_generated.
%% A function's pattern taken off by the budget, to put back as it was.
-type saved() :: {mfa(), MatchSpec :: [tuple()], local | global}.
%% A calibration's own process traced by a throwaway session (see {@link trace_self/1}).
-type self_tracing() :: {trace_session, term()} | {legacy, ferrotrace_tracer:session_id()}.
-export_type([backend/0, step/0, saved/0, self_tracing/0]).

%% Pattern changes per step: each may wait 250 ms on a busy node.
-define(CHUNK, 4).
%% How long a start takes functions off for the budget (`Held', at most 200), the hottest
%% first, a few at a time: each change waits for the code barrier, 2 ms among 50 busy
%% processes, 0.1 to 8 ms on yaws' busy schedulers. Those not reached by then stay
%% patterned, costing the node their calls until the budget's first tick sheds them: the
%% bound is for a server where the barrier is slow, not for the usual case (all 200 held
%% back on yaws in about 300 ms).
-define(HOLD_MS, 1000).
-define(HOLD_BATCH, 8).

%% @doc Starts tracing session `Id': `Patterns' (ferrotrace_backend:patterns/4) on the
%% processes `Targets' (pids, `all', `existing', `new') with the flags of calls and the
%% `Extra' ones of other kinds, less the functions `Held' (the budget's, see
%% {@link count_calls/3}, the hottest first): their patterns are taken off as the budget
%% sheds, before any process is flagged, for at most ?HOLD_MS (the rest keep theirs).
%% `{ok, Backend, HeldSaved, HoldingMs}' (what {@link put_back/3} gives back, and the time
%% taking them off took), or
%% an error that changed nothing. On OTP 27+ a trace session of the calling keeper's own; on
%% OTP 25 and 26 the legacy session, through the registry. Called by any other process than
%% the session's keeper: `{error, {not_the_keeper, Id}}'.
-spec start(ferrotrace_tracer:session_id(), [ferrotrace_registry:pattern()], [pid() | all | existing | new], [atom()],
            [mfa()]) -> {ok, backend(), [saved()], non_neg_integer()} | {error, term()}.
start(Id, Patterns, Targets, Extra, Held) when is_integer(Id), is_list(Patterns), is_list(Targets), is_list(Extra),
                                               is_list(Held) ->
    %% Only the session's keeper starts its tracing (it holds the handle on OTP 27+).
    Self = self(),
    case {ferrotrace_registry:lookup(Id), ferrotrace_vm:trace_sessions()} of
        {{ok, Id, Self, _}, true} -> start_trace_session(Id, Patterns, Targets, Extra, Held);
        {{ok, Id, Self, _}, false} -> start_legacy(Id, Patterns, Targets, Extra, Held);
        _ -> {error, {not_the_keeper, Id}}
    end;
start(Id, _Patterns, _Targets, _Extra, _Held) ->
    {error, {not_the_keeper, Id}}.

%% @doc The call patterns of `Specs' with their match spec heads (return and exception
%% events), and `Loops' count-only.
-spec patterns([ferrotrace:mfa_spec()], list(), local | global, [mfa()]) -> [map()].
patterns(Specs, Heads, Scope, Loops) ->
    [#{mfa => Spec, match_spec => match_spec(H, [{exception_trace}]), scope => Scope,
       loops => [{Loop, match_spec(H, [])} || Loop <- Loops, ferrotrace_spec:matches(Spec, Loop)]}
     || {Spec, H} <- lists:zip(Specs, Heads)].

%% @doc A match spec from a spec's heads (`default': any arguments) with `Actions' added:
%% `[{exception_trace}]' for a timed function (it implies `return_trace'), `[]' for a loop.
-spec match_spec(default | [tuple()], [tuple()]) -> [tuple()].
match_spec(default, Actions) -> [{'_', [], Actions}];
match_spec(Clauses, Actions) -> [{Head, Guards, Body ++ Actions} || {Head, Guards, Body} <- Clauses].

%% @doc Sets `Patterns' (with their loops) for session `Id': `{ok, FunctionsMatched}', or
%% the registry's refusal on OTP 25 and 26.
-spec set(ferrotrace_tracer:session_id() | none, backend(), [ferrotrace_registry:pattern()]) ->
          {ok, non_neg_integer()} | {error, term()}.
set(Id, legacy, Patterns) ->
    ferrotrace_registry:set_patterns(Id, Patterns);
set(_Id, {trace_session, Session, _}, Patterns) ->
    Matched = lists:sum([function(Session, MFA, MS, Scope)
                         || #{mfa := MFA, match_spec := MS, scope := Scope} <- Patterns]),
    _ = [function(Session, Loop, LoopMS, Scope)
         || #{loops := Loops, scope := Scope} <- Patterns, {Loop, LoopMS} <- Loops],
    {ok, Matched};
set(_Id, none, _Patterns) ->
    {ok, 0}.

%% @doc Removes `Removed' (only what this session set), and sets again the patterns it
%% keeps (`Kept') that share functions with them.
-spec unset(ferrotrace_tracer:session_id(), backend(), [ferrotrace_registry:pattern()],
            [ferrotrace_registry:pattern()]) -> ok.
unset(Id, legacy, Removed, _Kept) ->
    ferrotrace_registry:remove_patterns(Id, [MFA || #{mfa := MFA} <- Removed]);
unset(_Id, {trace_session, Session, _} = Backend, Removed, Kept) ->
    _ = [function(Session, MFA, false, Scope) || #{mfa := MFA, scope := Scope} <- Removed],
    _ = [function(Session, Loop, false, Scope)
         || #{scope := Scope} = P <- Removed, {Loop, _} <- maps:get(loops, P, [])],
    Again = [P || P <- Kept, lists:any(fun(#{mfa := R}) -> ferrotrace_spec:overlaps(R, maps:get(mfa, P)) end, Removed)],
    _ = set(none, Backend, Again),
    ok;
unset(_Id, none, _Removed, _Kept) ->
    ok.

%% @doc Traces `Loops' (`{MFA, CountOnlyMatchSpec}') count-only in session `Id''s patterns.
-spec add_loops(ferrotrace_tracer:session_id(), backend(), [{mfa(), [tuple()]}]) -> ok.
add_loops(Id, legacy, Loops) ->
    ferrotrace_registry:add_loops(Id, Loops);
add_loops(_Id, {trace_session, Session, Scopes}, Loops) ->
    _ = [function(Session, MFA, MS, Scope) || {MFA, MS} <- Loops, Scope <- Scopes],
    ok;
add_loops(_Id, none, _Loops) ->
    ok.

%% @doc The changes left for after a start of `Tracing' (as ferrotrace_options made it,
%% with the `loops' found so far): loops, then generated functions, then own modules.
-spec steps(map(), [mfa()]) -> [step()].
steps(#{specs := Specs} = Tracing, Loops) ->
    Wildcard = [S || S = {'_', _, _} <- Specs] =/= [],
    Generated = case maps:get(generated, Tracing, false) of
                    true -> [];
                    false -> [MFA || Spec = {M, F, _} <- Specs, M =/= '_', F =:= '_',
                                     MFA <- ferrotrace_traced:module_functions(Spec, local),
                                     generated(MFA)]
                end,
    Seen = case Wildcard andalso not maps:get(generated, Tracing, false) of
               true -> [seen_generated];
               false -> []
           end,
    Own = case Wildcard of
              true -> [M || M <- ferrotrace_traced:own_modules(), erlang:module_loaded(M)];
              false -> []
          end,
    %% The processes waiting in those loops are traced once the loops are count-only.
    Flag = [{flag, Pids} || Loops =/= [], Pids <- [maps:get(loopers, Tracing, [])], Pids =/= []],
    chunks(loops, Loops) ++ Flag ++ chunks(leave_out, Generated) ++ Seen ++ chunks(own, Own);
steps(_Tracing, _Loops) ->
    [].

%% @doc `List' as steps of `Kind', a few changes each.
-spec chunks(loops | leave_out | own, list()) -> [step()].
chunks(_Kind, []) -> [];
chunks(Kind, List) ->
    %% Linear: the list is walked once (a length per chunk made 100,000 functions a hang).
    {Chunk, Rest} = take(?CHUNK, List, []),
    [{Kind, Chunk} | chunks(Kind, Rest)].

take(0, Rest, Taken) -> {lists:reverse(Taken), Rest};
take(_N, [], Taken) -> {lists:reverse(Taken), []};
take(N, [X | Rest], Taken) -> take(N - 1, Rest, [X | Taken]).

%% @doc Takes the `call' flag of session `Id' off `Pids' (`false'), or puts it back
%% (`true'); their other flags stay. A process that is gone, or traced by another tool
%% meanwhile, is left as it is.
-spec calls_flag(ferrotrace_tracer:session_id(), backend(), [pid()], boolean()) -> ok.
calls_flag(Id, legacy, Pids, On) ->
    Flags = case On of
                true -> [call, {tracer, ferrotrace_tracer, Id}];
                false -> [call]
            end,
    _ = [catch_badarg(fun() -> erlang:trace(P, On, Flags) end)
         || P <- Pids, On =:= false orelse ferrotrace_traced:tracer(P) =:= {ferrotrace_tracer, Id}],
    ok;
calls_flag(_Id, {trace_session, Session, _}, Pids, On) ->
    _ = [catch_badarg(fun() -> ferrotrace_vm:trace_call(process, [Session, P, On, [call]]) end) || P <- Pids],
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
    Own = ferrotrace_own:pids(),
    _ = [catch_badarg(fun() -> erlang:trace(P, true, Flags) end)
         || P <- Pids, not lists:member(P, Own), safe_tracer(P) =:= {tracer, []}],
    ok;
retrace(_Id, {trace_session, Session, _}, Pids, Extra) ->
    Flags = ?TRACE_FLAGS ++ (Extra -- ferrotrace_activity:port_flags()),
    Own = ferrotrace_own:pids(),
    _ = [catch_badarg(fun() -> ferrotrace_vm:trace_call(process, [Session, P, true, Flags]) end)
         || P <- Pids, not lists:member(P, Own)],
    ok;
retrace(_Id, none, _Pids, _Extra) ->
    ok.

catch_badarg(Fun) ->
    try Fun() catch error:badarg -> ok end.

%% @doc The generated functions that session `Id' has timed, among those `Specs' cover and
%% not in `Left' (left out already), the most called first.
-spec seen_generated(ferrotrace_tracer:session_id(), [ferrotrace:mfa_spec()], #{mfa() => true}) -> [mfa()].
seen_generated(Id, Specs, Left) ->
    %% The counts alone: a summary reads every function's histograms.
    case ferrotrace_tracer:session_counts(Id) of
        {ok, #{calls := Calls}} ->
            Seen = [{C, MFA} || {MFA, C} <- Calls, generated(MFA), not is_map_key(MFA, Left),
                                lists:any(fun(S) -> ferrotrace_spec:matches(S, MFA) end, Specs)],
            [MFA || {_, MFA} <- lists:reverse(lists:sort(Seen))];
        _ ->
            []
    end.

%% @doc Leaves ferrotrace's own `Modules' out of session `Id''s patterns.
-spec leave_out_modules(ferrotrace_tracer:session_id(), backend(), [module()]) -> ok.
leave_out_modules(_Id, legacy, Modules) ->
    ferrotrace_registry:exclude_modules(Modules);
leave_out_modules(_Id, {trace_session, Session, _Scopes}, Modules) ->
    _ = [function(Session, {M, '_', '_'}, false, Scope) || M <- Modules, Scope <- [local, global]],
    ok;
leave_out_modules(_Id, none, _Modules) ->
    ok.

%% @doc True for a function the compiler made: a fun (`-f/1-fun-0-'), a list or binary
%% comprehension (`-f/1-lc$^0/1-0-', `-f/1-lbc$^0/1-0-'), an inlined function
%% (`-inlined-g/1-'): a name that starts and ends with `-'.
-spec generated(mfa()) -> boolean().
generated({_M, F, _A}) when is_atom(F) ->
    case atom_to_list(F) of
        [$- | Rest] when Rest =/= [] -> lists:last(Rest) =:= $-;
        _ -> false
    end;
generated(_) ->
    false.

function(Session, MFA, MS, Scope) ->
    ferrotrace_vm:trace_call(function, [Session, MFA, MS, [Scope]]).

%%% Starting and stopping

%% OTP 27 and later: a trace session of our own, so ferrotrace coexists with dbg, tprof,
%% recon or another ferrotrace session on the same processes and functions. This keeper is
%% the only holder of the handle: if it dies, the VM destroys the session with it.
start_trace_session(Id, Patterns, Targets, Extra, Held) ->
    Session = ferrotrace_vm:trace_call(session_create, [ferrotrace, {ferrotrace_tracer, Id}, []]),
    Backend = {trace_session, Session, [Scope || #{scope := Scope} <- Patterns]},
    {ok, Matched} = ferrotrace_backend:set(Id, Backend, Patterns),
    case Matched of
        0 when Patterns =/= [] ->
            stop(Id, Backend),
            {error, {no_matching_functions, [maps:get(mfa, P) || P <- Patterns], <<"no loaded function matches these patterns">>}};
        _ ->
            {HeldSaved, _, HoldingMs} = hold(Id, Backend, Held),
            try
                ProcessFlags = ?TRACE_FLAGS ++ (Extra -- ferrotrace_activity:port_flags()),
                _ = [ferrotrace_vm:trace_call(process, [Session, Target, true, ProcessFlags]) || Target <- Targets],
                %% `all' and `existing' include ferrotrace's own processes: never traced.
                ok = ferrotrace_own:remember(Id, Session),
                ok = ferrotrace_own:untrace({trace_session, Session}),
                _ = case Extra -- ProcessFlags of
                        [] -> ok;
                        PortFlags -> [ferrotrace_vm:trace_call(port, [Session, Target, true, PortFlags]) || Target <- Targets]
                    end,
                {ok, Backend, HeldSaved, HoldingMs}
            catch
                error:badarg ->
                    stop(Id, Backend),
                    {error, {bad_pid, [T || T <- Targets, is_pid(T), not is_process_alive(T)], not_alive}}
            end
    end.

%% OTP 25 and 26: the node's one (legacy) session. Everything is checked before anything
%% changes, so a refused start changes nothing.
start_legacy(Id, Patterns, Targets, Extra, Held) ->
    Specs = [MFA || #{mfa := MFA} <- Patterns],
    case already_traced(Targets, Id) of
        {error, _} = Error ->
            Error;
        ok ->
            case ferrotrace_registry:set_patterns(Id, Patterns) of
                {ok, 0} when Patterns =/= [] ->
                    ok = ferrotrace_registry:remove_patterns(Id),
                    {error, {no_matching_functions, Specs, <<"no loaded function matches these patterns">>}};
                {ok, _} ->
                    {HeldSaved, _, HoldingMs} = hold(Id, legacy, Held),
                    %% `procs' brings each process's exit, which lets the engine forget calls
                    %% left open by a process that died inside them.
                    case set_flags(Targets, [{tracer, ferrotrace_tracer, Id} | ?TRACE_FLAGS ++ Extra]) of
                        ok ->
                            %% `all' and `existing' include ferrotrace's own processes
                            %% (this keeper among them): never traced.
                            ok = ferrotrace_own:untrace(legacy),
                            {ok, legacy, HeldSaved, HoldingMs};
                        {error, _} = Error ->
                            stop(Id, legacy),
                            Error
                    end;
                {error, _} = Error ->
                    Error
            end
    end.

%% On OTP 25 a process has one tracer: refuse, naming the holder, instead of accepting a
%% session that would collect nothing.
already_traced(Targets, Id) ->
    Processes = lists:usort(lists:flatmap(fun expand/1, Targets)) -- ferrotrace_own:pids(),
    Traced = [{Target, Tracer} || Target <- Processes,
                                  {tracer, Tracer} <- [safe_tracer(Target)],
                                  Tracer =/= [], Tracer =/= {ferrotrace_tracer, Id}],
    case Traced of
        [] ->
            ok;
        [{_, Tracer} | _] ->
            Pids = [P || {P, T} <- Traced, T =:= Tracer],
            Holder = holder(Tracer),
            {error, {already_traced, lists:sublist(Pids, 10), Holder, how(Holder)}}
    end.

expand(all) -> [new | erlang:processes()];
expand(existing) -> erlang:processes();
expand(new) -> [new];
expand(Pid) -> [Pid].

safe_tracer(Target) ->
    try erlang:trace_info(Target, tracer)
    catch error:badarg -> undefined
    end.

holder({ferrotrace_tracer, Other}) ->
    case ferrotrace_registry:lookup(Other) of
        {ok, _, _, #{name := Name}} when Name =/= undefined -> {ferrotrace, Other, Name};
        _ -> {ferrotrace, Other}
    end;
holder(Tracer) ->
    {tracer, Tracer}.

%% What to do instead, short enough for a shell not to cut it (it cuts long binaries at the
%% end): stop the session that holds the processes, or add the functions to it.
how(Holder) ->
    Session = case Holder of
                  {ferrotrace, _, Name} -> io_lib:format("~tp", [Name]);
                  {ferrotrace, Id} -> integer_to_list(Id);
                  {tracer, _} -> none
              end,
    case Session of
        none ->
            <<"stop the other tracer (dbg:stop()), or trace other processes: pids => [Pid]">>;
        _ ->
            unicode:characters_to_binary(
              ["ferrotrace:stop(", Session, ") ends it, or add(", Session, ", Spec) to it"])
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

%% @doc Undoes start/4: the session's patterns and flags, whatever the backend.
-spec stop(ferrotrace_tracer:session_id(), backend()) -> ok.
stop(_Id, none) ->
    ok;
stop(Id, {trace_session, Session, _Scopes}) ->
    ok = ferrotrace_own:forget(Id),
    _ = ferrotrace_vm:trace_call(session_destroy, [Session]),
    ok;
stop(Id, legacy) ->
    ok = ferrotrace_registry:remove_patterns(Id),
    ferrotrace_legacy:untrace_processes(Id).

%%% Counting calls before a start

%% @doc The calls per second of the functions `Specs' cover (ferrotrace's own modules
%% aside), counted by the VM for `Ms' ms (at most 1000) before a budgeted session sets any
%% pattern: `{ok, [{MFA, CallsPerSecond}]}' of those called, or `{error, Reason}' where
%% they could not be counted (a spec the VM refuses, `badarg' for other arguments). A budget knows then which functions would make its cost before it pays for
%% them (ferrotrace_budget:first/2).
%%
%% The VM's `call_count' counts every process's calls without a flag, a counter per
%% function and no message: on two schedulers kept busy by 50 processes, setting it on
%% every function of a bare node (7,300) took 3 to 10 ms from a process of high priority,
%% reading them all 20 to 30 ms. On OTP 27+ it counts in a trace session of its own, gone
%% with it; on OTP 25 and 26 it is the node's one set of counters (cprof's): a `cprof'
%% counting the same functions meanwhile loses its counts.
%%
%% Its breakpoints slow every call they count: two processes calling small functions in
%% a loop made 0.14 to 0.41 of their calls while counted over the whole node, and on yaws
%% under wrk the counts were a quarter to a third under what the session's first ticks
%% then saw. So the rates are the counts times how much slower the node's work ran while
%% counting than in `Baseline', the node untraced (ferrotrace_nodeload:slowdown/3; the
%% counts as they are where `Baseline' is `undefined'): 1.1 to 1.4 times the loops' calls
%% untraced, erring on the side of caution.
-spec count_calls([ferrotrace:mfa_spec()], pos_integer(), ferrotrace_nodeload:baseline() | undefined) ->
          {ok, [{mfa(), float()}]} | {error, term()}.
count_calls(Specs, Ms, Baseline) when is_list(Specs), is_integer(Ms), Ms > 0, Ms =< 1000,
                                      is_map(Baseline) orelse Baseline =:= undefined ->
    case lists:all(fun mfa_spec/1, Specs) of
        true ->
            try {ok, counted(Specs, Ms, Baseline, ferrotrace_traced:own_modules())}
            catch error:Reason -> {error, ferrotrace_hint:brief(Reason)}
            end;
        false ->
            {error, badarg}
    end;
count_calls(_Specs, _Ms, _Baseline) ->
    {error, badarg}.

counted(Specs, Ms, Baseline, Own) ->
    %% Listed before the counters are set: every call the node makes while they are
    %% (paused too) pays for their breakpoints, and listing took a part of that time.
    Functions = lists:usort([MFA || Spec <- Specs, MFA <- covered(Spec), not lists:member(element(1, MFA), Own)]),
    {Set, Read, Drop} = counters(),
    try
        %% Counting starts and stops at some point of each change (a wait for the code
        %% barrier): timed from the middle of one to the middle of the other.
        T0 = middle(fun() -> [Set(Spec, true) || Spec <- Specs] end),
        Counting = ferrotrace_nodeload:quick_sample(),
        receive after Ms -> ok end,
        Slowdown = ferrotrace_nodeload:slowdown(Baseline, Counting, ferrotrace_nodeload:quick_sample()),
        %% Paused, the counts stay as they were while they are read.
        T1 = middle(fun() -> [Set(Spec, pause) || Spec <- Specs] end),
        Seconds = max(1, T1 - T0) / 1.0e6,
        [{MFA, N * Slowdown / Seconds} || MFA <- Functions, N <- [Read(MFA)], N > 0]
    after
        Drop(Specs)
    end.

middle(Fun) ->
    T0 = erlang:monotonic_time(microsecond),
    _ = Fun(),
    (T0 + erlang:monotonic_time(microsecond)) div 2.

mfa_spec({M, F, A}) when is_atom(M), is_atom(F), A =:= '_' orelse (is_integer(A) andalso A >= 0 andalso A =< 255) -> true;
mfa_spec(_) -> false.

%% Setting, reading and dropping the counters on this VM: in a trace session of their own
%% (dropped with it: one wait for the code barrier), or the node's.
counters() ->
    case ferrotrace_vm:trace_sessions() of
        true ->
            Session = ferrotrace_vm:trace_call(session_create, [ferrotrace_count, self(), []]),
            {fun(Spec, How) -> ferrotrace_vm:trace_call(function, [Session, Spec, How, [call_count]]) end,
             fun(MFA) -> count(ferrotrace_vm:trace_call(info, [Session, MFA, call_count])) end,
             fun(_Specs) -> ferrotrace_vm:trace_call(session_destroy, [Session]) end};
        false ->
            Set = fun(Spec, How) -> erlang:trace_pattern(Spec, How, [call_count]) end,
            {Set,
             fun(MFA) -> count(erlang:trace_info(MFA, call_count)) end,
             fun(Specs) -> [try Set(Spec, false) catch error:_ -> ok end || Spec <- Specs] end}
    end.

count({call_count, N}) when is_integer(N) -> N;
count(_) -> 0.

%% The functions of loaded modules a spec covers.
covered({'_', _, _} = Spec) ->
    [MFA || M <- erlang:loaded(), MFA <- ferrotrace_traced:module_functions({M, '_', '_'}, local),
            ferrotrace_spec:matches(Spec, MFA)];
covered(Spec) ->
    ferrotrace_traced:module_functions(Spec, local).

%%% Shedding and taking back

%% @doc Takes the patterns of `MFAs' off for session `Id', in their order (the budget's
%% shedding, ferrotrace_shed): `{Saved, Refused}', what was taken off (to give back to
%% {@link put_back/3}) and the functions left as they were.
-spec take_off(ferrotrace_tracer:session_id(), backend(), [mfa()]) -> {[saved()], [mfa()]}.
take_off(Id, legacy, MFAs) ->
    ferrotrace_registry:shed(Id, MFAs);
take_off(_Id, {trace_session, Session, _Scopes}, MFAs) ->
    %% In the order given (the hottest first): see ferrotrace_legacy:shed/2.
    {Saved, Refused} = lists:foldl(fun(MFA, {Off, Left}) ->
                                           case session_pattern(Session, MFA) of
                                               {MS, Scope} ->
                                                   _ = ferrotrace_vm:trace_call(function, [Session, MFA, false, [Scope]]),
                                                   {[{MFA, MS, Scope} | Off], Left};
                                               none ->
                                                   {Off, [MFA | Left]}
                                           end
                                   end, {[], []}, MFAs),
    {lists:reverse(Saved), lists:reverse(Refused)};
take_off(_Id, _Backend, MFAs) ->
    {[], MFAs}.

%% What a start holds back: take_off/3 on `MFAs' in batches, in their order, until ?HOLD_MS
%% have passed. The functions not reached are neither saved nor refused: they keep their
%% patterns (the budget only counts as held what the registry's `held' says was saved).
hold(Id, Backend, MFAs) ->
    T0 = erlang:monotonic_time(millisecond),
    {Saved, Refused} = hold(Id, Backend, MFAs, T0 + ?HOLD_MS, {[], []}),
    {Saved, Refused, erlang:monotonic_time(millisecond) - T0}.

hold(_Id, _Backend, [], _Deadline, {Saved, Refused}) ->
    {lists:append(lists:reverse(Saved)), lists:append(lists:reverse(Refused))};
hold(Id, Backend, MFAs, Deadline, Acc = {Saved, Refused}) ->
    case erlang:monotonic_time(millisecond) < Deadline of
        true ->
            {Batch, Rest} = take(?HOLD_BATCH, MFAs, []),
            {S, R} = take_off(Id, Backend, Batch),
            hold(Id, Backend, Rest, Deadline, {[S | Saved], [R | Refused]});
        false ->
            hold(Id, Backend, [], Deadline, Acc)
    end.

%% @doc Puts back what {@link take_off/3} took off.
-spec put_back(ferrotrace_tracer:session_id(), backend(), [saved()]) -> ok.
put_back(Id, legacy, Saved) ->
    ferrotrace_registry:unshed(Id, Saved);
put_back(_Id, {trace_session, Session, _Scopes}, Saved) ->
    _ = [ferrotrace_vm:trace_call(function, [Session, MFA, MS, [Scope]]) || {MFA, MS, Scope} <- Saved],
    ok;
put_back(_Id, _Backend, _Saved) ->
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

%%% A calibration's throwaway session (ferrotrace_calibrate): the calling process alone,
%%% on one function of its own

%% @doc Makes the calling process traceable by session `Id' alone, its flag off for now:
%% `{ok, Tracing}' for the functions below, or an error when another tool traces it.
-spec trace_self(ferrotrace_tracer:session_id()) -> {ok, self_tracing()} | {error, {traced_by_another_tool, term()}}.
trace_self(Id) ->
    case ferrotrace_vm:trace_sessions() of
        true ->
            Session = ferrotrace_vm:trace_call(session_create, [ferrotrace_calibrate, {ferrotrace_tracer, Id}, []]),
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
    _ = ferrotrace_vm:trace_call(process, [Session, self(), On, [call]]),
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
    1 = ferrotrace_vm:trace_call(function, [Session, MFA, MatchSpec, [local]]),
    ok;
self_pattern({legacy, _Id}, {M, F, A} = MFA, MatchSpec) when is_atom(M), is_atom(F), is_integer(A) ->
    1 = erlang:trace_pattern(MFA, MatchSpec, [local]),
    ok.

%% @doc Undoes {@link trace_self/1} and the pattern on `MFA'.
-spec untrace_self(self_tracing(), mfa()) -> ok.
untrace_self({trace_session, Session}, {M, F, A} = MFA) when is_atom(M), is_atom(F), is_integer(A) ->
    _ = ferrotrace_vm:trace_call(function, [Session, MFA, false, [local]]),
    _ = ferrotrace_vm:trace_call(session_destroy, [Session]),
    ok;
untrace_self({legacy, _Id}, {M, F, A} = MFA) when is_atom(M), is_atom(F), is_integer(A) ->
    _ = erlang:trace_pattern(MFA, false, [local]),
    _ = erlang:trace(self(), false, [call]),
    ok.
