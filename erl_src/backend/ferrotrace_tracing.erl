%%% @private
%%% @doc A session's tracing as its keeper sets it: the patterns of its specs (loops
%%% count-only), the processes flagged, the steps that refine them after the start, the
%%% functions the budget holds back and sheds, and what a stop undoes. It decides what to set
%%% and in which order; the changes themselves are made by the backend: on OTP 27+ in a
%%% trace session of the keeper's own (`{trace_session, Session, Scopes}', ferrotrace_backend),
%%% on OTP 25 and 26 (`legacy') in the node's one match spec per function, shared by sessions
%%% through claims and changed in the registry's process, which serializes them
%%% (ferrotrace_registry serves them, ferrotrace_backend_legacy changes them). A raw session
%%% (`none') has patterns its user set: nothing here touches them.
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
-module(ferrotrace_tracing).

-export([start/5, stop/2, take_off/3, put_back/3, count_calls/3, count_calls/4]).
-export([patterns/4, match_spec/2, set/3, unset/4, add_loops/3, steps/2, chunks/2, seen_generated/3,
         leave_out_modules/3, generated/1]).

%% OTP 25's spec of erlang:trace_info/2 omits the `{tracer, {Module, State}}' answer that a
%% tracer module gets (as in ferrotrace_backend_legacy).
-dialyzer({no_match, [already_traced/2, holder/1, how/1]}).

-type backend() :: ferrotrace_backend:backend().
%% A change left for later: loops to trace count-only, functions to leave out, ferrotrace's
%% own modules to leave out, or a look at which generated functions the session sees.
-type step() :: {loops, [mfa()]} | {flag, [pid()]} | {leave_out, [mfa()]} | {own, [module()]} | seen_generated.
-type saved() :: ferrotrace_backend:saved().
-export_type([step/0]).

%% Pattern changes per step: each may wait 250 ms on a busy node (the steps are not urgent:
%% they run without ferrotrace_barrier's spinners, which would pause the node).
-define(CHUNK, 4).
%% How long a start takes functions off for the budget (`Held', at most 200), the hottest
%% first, a few at a time: each change waits for the code barrier, 1.2 to 1.8 ms among 50
%% busy processes, 0.1 to 8 ms on yaws' busy schedulers, 40 to 70 us with ferrotrace_barrier's
%% spinners (at most 25 ms a batch). Those not reached by then stay
%% patterned, costing the node their calls until the budget's first tick sheds them: the
%% bound is for a server where the barrier is slow, not for the usual case (all 200 held
%% back on yaws in about 300 ms).
-define(HOLD_MS, 1000).
-define(HOLD_BATCH, 8).

%% @doc Starts tracing session `Id': `Patterns' ({@link patterns/4}) on the processes
%% `Targets' (pids, `all', `existing', `new') with the flags of calls and the `Extra' ones
%% of other kinds, less the functions `Held' (the budget's, see {@link count_calls/3}, the
%% hottest first): their patterns are taken off as the budget sheds, before any process is
%% flagged, for at most ?HOLD_MS (the rest keep theirs).
%% `{ok, Backend, HeldSaved, HoldingMs}' (what {@link put_back/3} gives back, and the time
%% taking them off took), or an error that changed nothing. On OTP 27+ a trace session of
%% the calling keeper's own; on OTP 25 and 26 the legacy session, through the registry.
%% Called by any other process than the session's keeper: `{error, {not_the_keeper, Id}}'.
-spec start(ferrotrace_tracer:session_id(), [ferrotrace_registry:pattern()], [pid() | all | existing | new], [atom()],
            [mfa()]) -> {ok, backend(), [saved()], non_neg_integer()} | {error, term()}.
start(Id, Patterns, Targets, Extra, Held) when is_integer(Id), is_list(Patterns), is_list(Targets), is_list(Extra),
                                               is_list(Held) ->
    %% Only the session's keeper starts its tracing (it holds the handle on OTP 27+).
    Self = self(),
    case {ferrotrace_registry:lookup(Id), ferrotrace_backend:trace_sessions()} of
        {{ok, Id, Self, _}, true} -> start_trace_session(Id, Patterns, Targets, Extra, Held);
        {{ok, Id, Self, _}, false} -> start_legacy(Id, Patterns, Targets, Extra, Held);
        _ -> {error, {not_the_keeper, Id}}
    end;
start(Id, _Patterns, _Targets, _Extra, _Held) ->
    {error, {not_the_keeper, Id}}.

%% OTP 27 and later: a trace session of our own, so ferrotrace coexists with dbg, tprof,
%% recon or another ferrotrace session on the same processes and functions.
start_trace_session(Id, Patterns, Targets, Extra, Held) ->
    Backend = ferrotrace_backend:new(Id, [Scope || #{scope := Scope} <- Patterns]),
    case ferrotrace_barrier:quick(fun() -> ferrotrace_backend:set(Backend, Patterns) end) of
        0 when Patterns =/= [] ->
            stop(Id, Backend),
            {error, {no_matching_functions, [maps:get(mfa, P) || P <- Patterns], <<"no loaded function matches these patterns">>}};
        _ ->
            {HeldSaved, _, HoldingMs} = hold(Id, Backend, Held),
            flagged(Id, Backend, Targets, Extra, HeldSaved, HoldingMs)
    end.

%% OTP 25 and 26: the node's one (legacy) session. Everything is checked before anything
%% changes, so a refused start changes nothing.
start_legacy(Id, Patterns, Targets, Extra, Held) ->
    Specs = [MFA || #{mfa := MFA} <- Patterns],
    case already_traced(Targets, Id) of
        {error, _} = Error ->
            Error;
        ok ->
            case ferrotrace_barrier:quick(fun() -> ferrotrace_registry:set_patterns(Id, Patterns) end) of
                {ok, 0} when Patterns =/= [] ->
                    ok = ferrotrace_registry:remove_patterns(Id),
                    {error, {no_matching_functions, Specs, <<"no loaded function matches these patterns">>}};
                {ok, _} ->
                    {HeldSaved, _, HoldingMs} = hold(Id, legacy, Held),
                    flagged(Id, legacy, Targets, Extra, HeldSaved, HoldingMs);
                {error, _} = Error ->
                    Error
            end
    end.

%% The processes flagged last, ferrotrace's own untraced after (ferrotrace_backend:trace/4).
flagged(Id, Backend, Targets, Extra, HeldSaved, HoldingMs) ->
    case ferrotrace_barrier:quick(fun() -> ferrotrace_backend:trace(Id, Backend, Targets, Extra) end) of
        ok ->
            {ok, Backend, HeldSaved, HoldingMs};
        {error, _} = Error ->
            stop(Id, Backend),
            Error
    end.

%% On OTP 25 a process has one tracer: refuse, naming the holder, instead of accepting a
%% session that would collect nothing.
already_traced(Targets, Id) ->
    Processes = lists:usort(lists:flatmap(fun expand/1, Targets)) -- ferrotrace_backend:own_pids(),
    Traced = [{Target, Tracer} || Target <- Processes,
                                  Tracer <- [ferrotrace_traced:tracer(Target)],
                                  Tracer =/= undefined, Tracer =/= [], Tracer =/= {ferrotrace_tracer, Id}],
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

%% @doc Undoes {@link start/5}: the session's patterns and flags, whatever the backend.
-spec stop(ferrotrace_tracer:session_id(), backend()) -> ok.
stop(Id, legacy) ->
    ok = ferrotrace_registry:remove_patterns(Id),
    ferrotrace_backend_legacy:untrace_processes(Id);
stop(Id, Backend) ->
    ferrotrace_backend:stop(Id, Backend).

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
set(_Id, {trace_session, _, _} = Backend, Patterns) ->
    {ok, ferrotrace_backend:set(Backend, Patterns)};
set(_Id, none, _Patterns) ->
    {ok, 0}.

%% @doc Removes `Removed' (only what this session set), and sets again the patterns it
%% keeps (`Kept') that share functions with them.
-spec unset(ferrotrace_tracer:session_id(), backend(), [ferrotrace_registry:pattern()],
            [ferrotrace_registry:pattern()]) -> ok.
unset(Id, legacy, Removed, _Kept) ->
    ferrotrace_registry:remove_patterns(Id, [MFA || #{mfa := MFA} <- Removed]);
unset(_Id, {trace_session, _, _} = Backend, Removed, Kept) ->
    Again = [P || P <- Kept, lists:any(fun(#{mfa := R}) -> ferrotrace_spec:overlaps(R, maps:get(mfa, P)) end, Removed)],
    ferrotrace_backend:unset(Backend, Removed, Again);
unset(_Id, none, _Removed, _Kept) ->
    ok.

%% @doc Traces `Loops' (`{MFA, CountOnlyMatchSpec}') count-only in session `Id''s patterns.
-spec add_loops(ferrotrace_tracer:session_id(), backend(), [{mfa(), [tuple()]}]) -> ok.
add_loops(Id, legacy, Loops) ->
    ferrotrace_registry:add_loops(Id, Loops);
add_loops(_Id, {trace_session, _, _} = Backend, Loops) ->
    ferrotrace_backend:add_loops(Backend, Loops);
add_loops(_Id, none, _Loops) ->
    ok.

%% @doc Leaves ferrotrace's own `Modules' out of session `Id''s patterns.
-spec leave_out_modules(ferrotrace_tracer:session_id(), backend(), [module()]) -> ok.
leave_out_modules(_Id, legacy, Modules) ->
    ferrotrace_registry:exclude_modules(Modules);
leave_out_modules(_Id, {trace_session, _, _} = Backend, Modules) ->
    ferrotrace_backend:leave_out_modules(Backend, Modules);
leave_out_modules(_Id, none, _Modules) ->
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

%% @doc The generated functions that session `Id' has timed, among those `Specs' cover and
%% not in `Left' (left out already), the most called first.
-spec seen_generated(ferrotrace_tracer:session_id(), [ferrotrace:mfa_spec()], #{mfa() => true}) -> [mfa()].
seen_generated(Id, Specs, Left) ->
    %% The counts alone: a summary reads every function's histograms.
    case ferrotrace_tracer:session_counts(Id) of
        {ok, #{calls := Calls}} ->
            Seen = [{C, MFA} || {MFA, C} <- Calls, generated(MFA), not is_map_key(MFA, Left),
                                ferrotrace_spec:covered(MFA, Specs)],
            [MFA || {_, MFA} <- lists:reverse(lists:sort(Seen))];
        _ ->
            []
    end.

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
%% counting the same functions meanwhile loses its counts (ferrotrace_backend:counters/0).
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
count_calls(Specs, Ms, Baseline) ->
    count_calls(Specs, Ms, Baseline, fun(Rates) -> Rates end).

%% @doc As {@link count_calls/3}, but answers `{ok, Then(Rates)}': `Then' runs while the
%% counters are still set, and they come off once it returns (or raises: what it raises
%% goes on to the caller). A budget's trip sheds from the rates in `Then': the shed is
%% what the node waits for, and the counters' own barriers came before it (their pause
%% and drop, 4 to 12 ms of a trip's 28 to 49 before the shed, with load arriving on a
%% fresh `{'_','_','_'}' session).
-spec count_calls([ferrotrace:mfa_spec()], pos_integer(), ferrotrace_nodeload:baseline() | undefined,
                  fun(([{mfa(), float()}]) -> T)) ->
          {ok, T} | {error, term()}.
count_calls(Specs, Ms, Baseline, Then) when is_list(Specs), is_integer(Ms), Ms > 0, Ms =< 1000,
                                            is_map(Baseline) orelse Baseline =:= undefined, is_function(Then, 1) ->
    case lists:all(fun mfa_spec/1, Specs) andalso counted(Specs, Ms, Baseline, ferrotrace_traced:own_modules()) of
        {ok, Rates, Drop} ->
            try {ok, Then(Rates)}
            after Drop()
            end;
        {error, _} = Error ->
            Error;
        false ->
            {error, badarg}
    end;
count_calls(_Specs, _Ms, _Baseline, _Then) ->
    {error, badarg}.

%% `{ok, Rates, Drop}' with the counters still set (`Drop' takes them off), or `{error,
%% Reason}' with none left set.
counted(Specs, Ms, Baseline, Own) ->
    %% Listed before the counters are set: every call the node makes while they are pays
    %% for their breakpoints, and listing took a part of that time. Own modules left out
    %% as modules, from a map: a list searched for each of a node's 8,000 functions took
    %% 6 ms.
    OwnSet = maps:from_keys(Own, true),
    Functions = [covered(Spec, OwnSet) || Spec <- Specs],
    {Set, Read, Drop0} = ferrotrace_backend:counters(),
    Drop = fun() -> ferrotrace_barrier:quick(fun() -> Drop0(Specs) end) end,
    try
        %% Each spec's counters start counting within its change, once every scheduler
        %% has passed the first wait for the code barrier (the longest: the first change
        %% waits for the spinners too); the waits after that are short. So its count is
        %% timed from the change's end: from its middle, a first change of 2 to 9 ms on a
        %% busy node counted 1 to 4.5 ms of a 12 ms count that its calls had not been
        %% counted in: their rates read 8 to 37 % low.
        %% (ferrotrace_barrier: the changes, not the count, pause the node.)
        Started = ferrotrace_barrier:quick(fun() -> [begin _ = Set(Spec, true), erlang:monotonic_time(microsecond) end
                                                     || Spec <- Specs] end),
        Counting = ferrotrace_nodeload:quick_sample(),
        receive after Ms -> ok end,
        Slowdown = ferrotrace_nodeload:slowdown(Baseline, Counting, ferrotrace_nodeload:quick_sample()),
        %% Read as they go on counting, each against the time it is read at: pausing them
        %% first was another barrier to wait for, one per spec.
        {ok, rates(lists:zip(Started, Functions), Read, Slowdown), Drop}
    catch
        error:Reason ->
            try Drop() catch error:_ -> ok end,
            {error, ferrotrace_hint:brief(Reason)}
    end.

%% `[{MFA, CallsPerSecond}]' of the functions called, each once (under the first of
%% `Counting', `[{StartedAt, MFAs}]' in the order of the specs, that covers it), in the
%% order of their names.
rates(Counting, Read, Slowdown) ->
    {Rates, _} = lists:foldl(
                   fun({T0, MFAs}, Acc0) ->
                           lists:foldl(fun(MFA, {Acc, Done}) when is_map_key(MFA, Done) -> {Acc, Done};
                                          (MFA, {Acc, Done}) ->
                                               N = Read(MFA),
                                               T1 = erlang:monotonic_time(microsecond),
                                               {[{MFA, N * Slowdown * 1.0e6 / max(1, T1 - T0)} || N > 0] ++ Acc,
                                                Done#{MFA => true}}
                                       end, Acc0, MFAs)
                   end, {[], #{}}, Counting),
    lists:sort(Rates).

mfa_spec({M, F, A}) when is_atom(M), is_atom(F), A =:= '_' orelse (is_integer(A) andalso A >= 0 andalso A =< 255) -> true;
mfa_spec(_) -> false.

%% The functions of loaded modules a spec covers, but those of the modules `Own'.
covered({'_', _, _} = Spec, Own) ->
    [MFA || M <- erlang:loaded(), not is_map_key(M, Own),
            MFA <- ferrotrace_traced:module_functions({M, '_', '_'}, local),
            ferrotrace_spec:matches(Spec, MFA)];
covered({M, _, _} = Spec, Own) ->
    case is_map_key(M, Own) of
        true -> [];
        false -> ferrotrace_traced:module_functions(Spec, local)
    end.

%%% Shedding and taking back

%% @doc Takes the patterns of `MFAs' off for session `Id', in their order (the budget's
%% shedding, ferrotrace_shed): `{Saved, Refused}', what was taken off (to give back to
%% {@link put_back/3}) and the functions left as they were.
-spec take_off(ferrotrace_tracer:session_id(), backend(), [mfa()]) -> {[saved()], [mfa()]}.
take_off(Id, legacy, MFAs) ->
    %% Refused by the registry (not a list of functions): nothing taken off.
    case ferrotrace_barrier:quick(fun() -> ferrotrace_registry:shed(Id, MFAs) end) of
        {error, badarg} -> {[], MFAs};
        Result -> Result
    end;
take_off(_Id, {trace_session, _, _} = Backend, MFAs) ->
    ferrotrace_barrier:quick(fun() -> ferrotrace_backend:take_off(Backend, MFAs) end);
take_off(_Id, _Backend, MFAs) ->
    {[], MFAs}.

%% What a start holds back: take_off/3 on `MFAs' in batches, in their order, until ?HOLD_MS
%% have passed. The functions not reached are neither saved nor refused: they keep their
%% patterns (the budget only counts as held what the registry's `held' says was saved).
hold(_Id, _Backend, []) ->
    %% Nothing to hold back takes no time: two reads of the ms clock could still differ by
    %% one (a session without a budget read holding_ms 1 on OTP 29, and the calls suite's
    %% report case, which checks that nothing was held, failed).
    {[], [], 0};
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
    %% Refused by the registry (not what take_off/3 gave): nothing to put back.
    _ = ferrotrace_registry:unshed(Id, Saved),
    ok;
put_back(_Id, {trace_session, _, _} = Backend, Saved) ->
    ferrotrace_backend:put_back(Backend, Saved);
put_back(_Id, _Backend, _Saved) ->
    ok.
