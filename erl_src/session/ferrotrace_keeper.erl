%%% @private
%%% @doc The keeper of one ferrotrace session: a process that owns the engine session,
%%% watches the session's owner, and sets and undoes the trace patterns and flags of
%%% `calls/2'.
%%%
%%% Lifecycle:
%%% <ol>
%%% <li>Start: the session is checked before anything changes on the node (processes
%%% already traced, patterns that conflict with another session's); a refused start leaves
%%% the node as it was.</li>
%%% <li>Stop, whoever stops it: `stop/1', the owner leaving, or the engine itself (duration,
%%% a limit, unload, an error; the engine's collector sends `{ferrotrace_stopped, Id, Reason}'
%%% and times `duration' itself: the keeper has no timer of its own).
%%% Tracing ends at once and every pattern and flag the session set is removed; the figures
%%% stay readable.</li>
%%% <li>Release: `release/1', or `keep' milliseconds after the owner left (default ten
%%% minutes), frees the figures.</li>
%%% </ol>
%%% The keeper is not linked to the owner, so the owner's crash cannot take it down before it
%%% has cleaned up; the registry releases the session if the keeper itself is killed.
%%%
%%% Every process beside it (captures, interval snapshots, the budget's tick, the loops'
%%% reading) is started in one place, once the session traces, and ends with it
%%% (side_processes/3). What other processes ask a running keeper is ferrotrace_session's.
%%%
%%% {@link start/1} answers a value or `{error, Reason}', never an exit, whatever happens
%%% meanwhile: the id the keeper sends as it starts (not a later call, which a keeper that
%%% already stopped could not answer: its owner died, or another client released the
%%% session), `{error, {owner_down, Pid}}' for an owner already gone, and
%%% `{error, {no_such_session, Id}}' for a session released while it started. It checks its
%%% settings before a keeper starts (`{error, {bad_argument, Which, Value, Accepted}}'),
%%% and a keeper whose start fails anyway refuses with a summarised reason: a keeper that
%%% crashed in `init/1' had its crash report print its arguments, whatever their size
%%% (found by the fuzz suite: a map nested 1000 deep as the tracing made the node's
%%% virtual size grow by 0.7 to 0.9 GB as the report was formatted, on OTP 25 and 27).
-module(ferrotrace_keeper).
-behaviour(gen_server).

-export([start/1]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2, terminate/2]).

-type settings() :: ferrotrace_options:settings().

%% How often the calls left open by processes that died inside them are forgotten (ms): a
%% process killed inside a traced call keeps its frames on its line of the frame bound
%% (1,024 lines of 120 frames) until then.
-define(SETTLE_EXITS_MS, 1000).


-record(state, {id :: ferrotrace_tracer:session_id(),
                owner :: reference() | none,
                keep :: non_neg_integer() | infinity,
                %% How tracing was set: `legacy', or an OTP 27+ trace session.
                backend = none :: none | legacy | {trace_session, term(), [local | global]},
                %% What the legacy backend checks for another tool taking over (see
                %% ferrotrace_displaced); `none' on OTP 27+ and for raw sessions.
                watch = none :: none | ferrotrace_displaced:watch(),
                %% What calls/2 and processes/2 set (`none' for a raw session): what add/2
                %% and remove/2 change (ferrotrace_amend).
                calls = none :: none | ferrotrace_amend:calls(),
                %% What is left to refine after the start, a change at a time
                %% (ferrotrace_tracing), and the generated functions already left out.
                steps = [] :: [ferrotrace_tracing:step()],
                left_out = #{} :: #{mfa() => true},
                %% The functions the budget took off (ferrotrace_shed): a loop found later
                %% does not put their pattern back.
                shed = #{} :: #{mfa() => true},
                seen_every = 250 :: pos_integer(),
                stopped = false :: boolean()}).

%% Tail-recursive server loops are counted, not timed: `return_trace' would keep a stack
%% frame per iteration for as long as the process lives.
-define(COUNT_ONLY, [{'_', [], []}]).
%% How seldom a `'_'' module session looks for generated functions to leave out, at most
%% (ms; from every 250 ms, twice as long each time).
-define(SEEN_MAX, 4000).
%% The full reading of loops after a start uses at most this share of one scheduler
%% (less within a budget: `read_pace', ferrotrace_budget:read_pace/2): at once and at
%% high priority it took a busy node's schedulers for half a second (about 1 s of reading
%% there; 20 s at this pace, its loops held by the engine's frame bound meanwhile).
-define(READ_PACE, 0.05).

%% @doc Starts a keeper with a start's `Settings' (ferrotrace_options:read/4, completed by
%% ferrotrace_start's steps): the engine session, then, with `tracing', the patterns and
%% flags set, then every process beside the keeper. Settings of another shape are answered
%% `{error, {bad_argument, engine_options | tracing | settings, Value, Accepted}}' (`Value'
%% summarised, `Accepted' a text) before anything starts.
-spec start(settings()) -> {ok, ferrotrace_tracer:session_id()} | {error, term()}.
start(Settings) ->
    case ferrotrace_options:valid(Settings) of
        ok -> start_keeper(Settings);
        {error, _} = Error -> Error
    end.

start_keeper(Settings) ->
    Ref = make_ref(),
    case gen_server:start(?MODULE, {Settings, {self(), Ref}}, [{spawn_opt, ferrotrace_own:spawn_options()}]) of
        {ok, _Keeper} ->
            %% Sent by init/1 before it returned, so here before the start's answer.
            receive {Ref, Id} -> {ok, Id} end;
        {error, Reason} ->
            %% A refusal, or the keeper killed as it started.
            receive {Ref, _} -> ok after 0 -> ok end,
            {error, started_error(Reason)}
    end.

started_error(killed) -> {keeper_down, killed};
started_error(Reason) -> ferrotrace_hint:brief(Reason).

%% @private
%% A refused start is acknowledged as `{error, Reason}' and the process exits `normal': a
%% typo in an option is an answer for the shell, not a crash report (OTP 25's gen_server has
%% no `{error, Reason}' return from init/1). A start that raises is refused the same way,
%% with the reason summarised: a crash report would print the arguments, whatever their
%% size, and a term nested a thousand deep took hundreds of MB to format.
-spec init({settings(), {pid(), reference()}}) -> {ok, #state{}}.
init(Args) ->
    try
        init_keeper(Args)
    catch
        error:Reason:Stack -> refuse_early(start_failed(error, Reason, Stack))
    end.

start_failed(Class, Reason, Stack) ->
    Where = case Stack of
                [{M, F, A, _} | _] when is_list(A) -> {M, F, length(A)};
                [{M, F, A, _} | _] -> {M, F, A};
                _ -> unknown
            end,
    {start_failed, Class, ferrotrace_hint:brief(Reason), Where}.

init_keeper({Settings = #{owner := Owner, keep := Keep, engine := EngineOptions, tracing := Tracing},
             {Caller, Ref}}) ->
    %% Not the shell's group leader: that one may be on a node that goes away.
    group_leader(whereis(init), self()),
    ok = ferrotrace_own:enter(),
    Monitor = watch_owner(Owner),
    %% What a start reads before it changes anything (the loop analysis: a first one reads
    %% the code of every module processes wait in) is done before the engine session
    %% exists, so that its duration counts from when tracing begins.
    T0 = erlang:monotonic_time(millisecond),
    Prepared = prepare(Tracing),
    T1 = erlang:monotonic_time(millisecond),
    Id = registered(Settings),
    %% A budget's fuse holds from the first call traced (the budget's process comes after).
    _ = [ferrotrace_overhead:arm_first(Id, Budget) || #{budget := {_, _, _, _} = Budget} <- [Settings]],
    case safe_start_tracing(Id, Prepared) of
        {ok, Backend, Held, HoldingMs} ->
            T2 = erlang:monotonic_time(millisecond),
            %% What refines the patterns comes after the start, a step at a time.
            Steps = case Backend of
                        none -> [];
                        _ -> ferrotrace_tracing:steps(Prepared, element(2, loops_now(Prepared)))
                    end,
            ok = ferrotrace_registry:update(Id, #{settling => Steps =/= []}),
            case side_processes(Id, Prepared, Settings) of
                ok -> ok;
                {error, Why} -> ferrotrace_tracing:stop(Id, Backend), refuse(Id, Why)
            end,
            %% Where the start's time went (the summary's `start'), before the caller can
            %% read it. The hold is timed within the tracing set up: never negative.
            ok = timed(Id, maps:get(started, Settings, #{}),
                       #{analysis_ms => T1 - T0, holding_ms => HoldingMs, tracing_ms => T2 - T1 - HoldingMs}),
            Caller ! {Ref, Id},
            self() ! step,
            _ = erlang:send_after(?SETTLE_EXITS_MS, self(), settle_exits),
            {ok, #state{id = Id, owner = Monitor, keep = Keep,
                        backend = Backend, watch = watch(Id, Backend, Prepared),
                        calls = calls(Id, Backend, Tracing, EngineOptions),
                        steps = Steps, shed = maps:from_keys(Held, true)}};
        {error, Reason} ->
            refuse(Id, Reason)
    end.

%% The owner monitored first: an owner that dies from now on is seen as a `DOWN'. (A remote
%% shell's group leader is only monitored: its `DOWN' comes at once if it is gone.)
watch_owner(none) ->
    none;
watch_owner({_, Pid}) ->
    Monitor = erlang:monitor(process, Pid),
    case node(Pid) =:= node() andalso not is_process_alive(Pid) of
        true -> refuse_early({owner_down, Pid});
        false -> Monitor
    end.

%% The engine session, its trees' roots told before any pattern is set (`trees => #{root
%% => Spec}', ferrotrace_trees), and the session registered with what the keeper keeps and
%% what the calibration found (ferrotrace_calibrate, for the summary).
registered(Settings = #{engine := Engine}) ->
    case new_session(Engine) of
        {ok, Id} ->
            _ = case ferrotrace_trees:set_roots(Id, maps:get(roots, Settings, [])) of ok -> ok; {error, Bad} -> refuse(Id, Bad) end,
            Info = maps:merge(maps:with([owner, keep, name, spec, capture], Settings),
                              maps:get(calibration, Settings, #{})),
            case ferrotrace_registry:register(Id, self(), Info#{started_at => erlang:system_time(millisecond)}) of
                ok ->
                    Id;
                {error, Reason} ->
                    _ = ferrotrace_tracer:release_session(Id),
                    refuse_early(Reason)
            end;
        {error, Reason} ->
            refuse_early(Reason)
    end.

%% Every process beside the keeper, started here once the session traces, each ending with
%% the keeper: the captures (`capture', ferrotrace_capture), the interval snapshots
%% (`intervals', ferrotrace_intervals), the budget's tick (`max_overhead',
%% ferrotrace_overhead), the loops' reading after the start (ferrotrace_loops), the
%% Prometheus endpoint's serving (`metrics', its socket opened by the start), and a
%% calibration measured after it (ferrotrace_calibrate, which outlives the keeper: a node's
%% calibration is the next starts' too).
side_processes(Id, Prepared, Settings) ->
    case ferrotrace_capture:for_session(Id, Settings) of
        Started when Started =:= none; element(1, Started) =:= ok ->
            _ = [ok = ferrotrace_registry:update(Id, #{capture_pid => Pid}) || {ok, Pid} <- [Started]],
            _ = [intervals(Id, Intervals) || #{intervals := {_, _} = Intervals} <- [Settings]],
            _ = [ferrotrace_overhead:start(Id, self(), Budget) || #{budget := {_, _, _, _} = Budget} <- [Settings]],
            ok = complete_loops(Id, Prepared),
            case served(Id, Settings) of
                ok -> ferrotrace_calibrate:after_start(Id, Settings);
                {error, _} = Error -> Error
            end;
        {error, _} = Error ->
            Error
    end.

%% `metrics => #{...}': the endpoint the start opened (ferrotrace_start, so that a port in
%% use refused the start before anything ran) serves this session from now on, until the
%% keeper ends or ferrotrace:unserve/1.
served(Id, #{metrics := {_, _} = Endpoint}) ->
    case ferrotrace_metrics:attach(Endpoint, Id) of
        {ok, _Url} -> ok;
        {error, _} = Error -> Error
    end;
served(_Id, _Settings) ->
    ok.

%% `intervals => Ms': per-interval histograms for hdr_log, taken until the keeper ends.
intervals(Id, Intervals) ->
    case ferrotrace_intervals:start(Id, self(), Intervals) of
        Pid when is_pid(Pid) -> ok = ferrotrace_registry:update(Id, #{intervals => Pid});
        {error, _} -> ok
    end.

%% The start's parts (ferrotrace_start's: `calibration_ms', `counting_ms', from `at') with
%% the keeper's, and the whole.
timed(Id, Started, Parts) ->
    Total = case Started of
                #{at := At} -> #{total_ms => erlang:monotonic_time(millisecond) - At};
                #{} -> #{}
            end,
    ferrotrace_registry:update(Id, #{start => maps:merge(maps:merge(maps:without([at], Started), Parts), Total)}).

-spec refuse_early(term()) -> no_return().
refuse_early(Reason) ->
    proc_lib:init_ack({error, Reason}),
    exit(normal).

%% Another client may release the session (by id, or every session) while it starts: the
%% engine then answers `{error, {no_such_session, Id}}' to what follows, and the start
%% answers that, with whatever was set undone.
safe_start_tracing(Id, Tracing) ->
    try start_tracing(Id, Tracing) of
        {ok, Backend, Held, HoldingMs} ->
            case lists:member(Id, ferrotrace_tracer:sessions()) of
                true ->
                    {ok, Backend, Held, HoldingMs};
                false ->
                    ferrotrace_tracing:stop(Id, Backend),
                    {error, {no_such_session, Id}}
            end;
        {error, _} = Error ->
            Error
    catch
        error:{badmatch, {error, {no_such_session, Id}}} ->
            _ = ferrotrace_tracing:stop(Id, legacy_if_any()),
            {error, {no_such_session, Id}};
        error:Reason:Stack ->
            %% Arguments start/3 let through that the VM refuses (a match spec): refused,
            %% with whatever was set undone.
            _ = ferrotrace_tracing:stop(Id, legacy_if_any()),
            {error, start_failed(error, Reason, Stack)}
    end.

%% What a start that failed half-way may have set, on OTP 25 and 26 (on OTP 27+ the trace
%% session's handle dies with this keeper).
legacy_if_any() ->
    case ferrotrace_backend:trace_sessions() of
        true -> none;
        false -> legacy
    end.

%% The engine has a fixed number of slots; sessions whose owner left and that only wait out
%% their `keep' time give theirs up, oldest first, rather than refuse a new session.
new_session(EngineOptions) ->
    case ferrotrace_tracer:new_session(EngineOptions, self()) of
        {error, {too_many_sessions, _}} = Full ->
            case [{Id, Keeper} || {Id, _, Keeper, #{left_at := _}} <- ferrotrace_registry:sessions()] of
                [{_, Keeper} | _] ->
                    _ = (catch_exit(fun() -> ferrotrace_session:release(Keeper) end)),
                    ferrotrace_tracer:new_session(EngineOptions, self());
                [] ->
                    Full
            end;
        Other ->
            Other
    end.

catch_exit(Fun) ->
    try Fun() catch exit:_ -> ok end.

-spec refuse(ferrotrace_tracer:session_id(), term()) -> no_return().
refuse(Id, Reason) ->
    ok = ferrotrace_registry:unregister(Id),
    _ = ferrotrace_tracer:release_session(Id),
    proc_lib:init_ack({error, Reason}),
    exit(normal).

%% @private
-spec handle_call(id | stop | release | {add | remove, term()} | {shed, [mfa()]}
                  | {unshed, [ferrotrace_shed:saved()]} | {retrace, [pid()]}, gen_server:from(), #state{}) ->
          {reply, term(), #state{}} | {stop, normal, ok, #state{}}.
handle_call(id, _From, State) ->
    {reply, {ok, State#state.id}, State};
handle_call({Change, _Spec}, _From, State = #state{id = Id, stopped = true})
  when Change =:= add; Change =:= remove ->
    {reply, {error, {session_stopped, Id, <<"a stopped session traces nothing more: start a new "
                                           "one with calls/2">>}}, State};
handle_call({Change, _Spec}, _From, State = #state{id = Id, calls = none})
  when Change =:= add; Change =:= remove ->
    {reply, {error, {raw_session, Id, <<"add and remove change calls/2 and processes/2 sessions; "
                                       "a raw session's patterns are yours to set">>}}, State};
handle_call({Change, Spec}, _From, State = #state{id = Id, backend = Backend, calls = Calls,
                                                  watch = Watch0})
  when Change =:= add; Change =:= remove ->
    %% Never a crash of the keeper (its session would go with it, and its report would print
    %% the spec, whatever its size): a raise is answered, summarised.
    try ferrotrace_amend:change(Change, Spec, {Id, Backend, Watch0}, Calls) of
        {Reply, Changed, Watch} -> {reply, Reply, State#state{calls = Changed, watch = Watch}}
    catch
        error:Reason:Stack ->
            {start_failed, Class, Brief, Where} = start_failed(error, Reason, Stack),
            {reply, {error, {change_failed, Class, Brief, Where}}, State}
    end;
handle_call(traced_processes, _From, State = #state{id = Id, backend = Backend, stopped = false}) ->
    {reply, traced_processes(Id, Backend), State};
handle_call(traced_processes, _From, State) ->
    {reply, {error, stopped}, State};
handle_call(stop, _From, State) ->
    {reply, ok, end_session(user, State)};
handle_call(release, _From, State) ->
    {stop, normal, ok, end_session(user, State)};
handle_call({Switch, _}, _From, State = #state{stopped = true}) when Switch =:= shed; Switch =:= unshed;
                                                                      Switch =:= retrace ->
    {reply, {error, stopped}, State};
handle_call({retrace, Pids}, _From, State = #state{id = Id, backend = Backend}) ->
    %% With the session's kinds and what its scope follows.
    Flags = case ferrotrace_registry:lookup(Id) of
                {ok, _, _, #{kinds := Kinds} = Info} when is_list(Kinds) ->
                    ferrotrace_activity:flags(Kinds) ++ maps:get(follow_flags, Info, []);
                {ok, _, _, Info} ->
                    maps:get(follow_flags, Info, []);
                _ ->
                    []
            end,
    {reply, ferrotrace_backend:retrace(Id, Backend, Pids, Flags), State};
handle_call({Switch, Functions}, _From, State = #state{id = Id, backend = Backend, watch = Watch0})
  when Switch =:= shed; Switch =:= unshed ->
    %% The overhead budget's patterns off and on (ferrotrace_shed), within the patterns the
    %% session has now (remove/2 may have taken some off meanwhile).
    {Reply, Watch} = ferrotrace_shed:switch(Switch, as_loops_now(Switch, Functions, Id), {Id, Backend, Watch0, specs(State)}),
    {reply, Reply, shed_now(Switch, Reply, Functions, State#state{watch = Watch})}.

%% @private
-spec handle_cast(term(), #state{}) -> {noreply, #state{}}.
handle_cast(_Message, State) ->
    {noreply, State}.

%% @private
-spec handle_info(term(), #state{}) -> {noreply, #state{}} | {stop, normal, #state{}}.
handle_info({'DOWN', Monitor, process, _, _}, State = #state{id = Id, owner = Monitor})
  when Monitor =/= none ->
    %% The owner is gone: tracing stops now, the figures are kept for a while.
    ok = ferrotrace_registry:update(Id, #{left_at => erlang:system_time(millisecond)}),
    Stopped = end_session(owner_down, State#state{owner = none}),
    case State#state.keep of
        0 -> {stop, normal, Stopped};
        infinity -> {noreply, Stopped};
        Keep -> _ = erlang:send_after(Keep, self(), expire), {noreply, Stopped}
    end;
handle_info({ferrotrace_stopped, Id, _Reason}, State = #state{id = Id, stopped = false,
                                                            backend = Backend}) ->
    %% The engine stopped the session itself (duration, a limit, unload, an error): only the
    %% patterns and flags are left to undo. No call into ferrotrace_tracer here: after an
    %% unload the module may be gone, and calling it would load it again mid-purge.
    _ = last_check(State),
    ferrotrace_tracing:stop(Id, Backend),
    {noreply, State#state{stopped = true}};
handle_info(check_displaced, State = #state{id = Id, stopped = false, watch = Watch})
  when Watch =/= none ->
    %% Another tool taking over our processes or functions (OTP 25 and 26): see
    %% ferrotrace_displaced. One bounded round, then the next one is due.
    Checked = ferrotrace_displaced:check(Id, Watch),
    _ = erlang:send_after(ferrotrace_displaced:interval(), self(), check_displaced),
    {noreply, State#state{watch = Checked}};
handle_info({ferrotrace_loops, Id, Loops}, State = #state{id = Id, stopped = false}) ->
    %% Loops the code did not show (cycles through funs or apply), or that the analysis at
    %% the start had not read yet.
    {noreply, apply_loops(Loops, State)};
handle_info(step, State = #state{stopped = true}) ->
    {noreply, State#state{steps = []}};
handle_info(step, State = #state{steps = []}) ->
    {noreply, State};
handle_info(step, State = #state{steps = [Step | Rest]}) ->
    %% One change of the patterns refined after the start (ferrotrace_tracing); the next is
    %% a message away, so that a stop or a read waits for one change at most.
    State1 = do_step(Step, State#state{steps = Rest}),
    _ = case State1#state.steps of
            [] -> settled(State1);
            [seen_generated] -> settled(State1), erlang:send_after(State1#state.seen_every, self(), step);
            _ -> self() ! step
        end,
    {noreply, State1};
handle_info(settle_exits, State = #state{id = Id, stopped = false}) ->
    %% A calls session traces no `procs' (ferrotrace_backend): the calls its dead processes
    %% left open are forgotten here, before they fill the frame bound's lines.
    _ = ferrotrace_tracer:session_settle_exits(Id),
    _ = erlang:send_after(?SETTLE_EXITS_MS, self(), settle_exits),
    {noreply, State};
handle_info(expire, State) ->
    {stop, normal, State};
handle_info(_Message, State) ->
    {noreply, State}.

%% What the budget sheds, the keeper remembers; a function found to be a loop since it was
%% shed comes back count-only, not with the pattern it had.
as_loops_now(unshed, Saved, Id) ->
    Loops = case ferrotrace_registry:lookup(Id) of
                {ok, _, _, #{loops := L}} -> L;
                _ -> []
            end,
    [case lists:member(MFA, Loops) of
         true -> {MFA, ?COUNT_ONLY, Scope};
         false -> Entry
     end || {MFA, _, Scope} = Entry <- Saved];
as_loops_now(shed, MFAs, _Id) ->
    MFAs.

shed_now(shed, {ok, Off, _Refused}, _MFAs, State = #state{shed = Shed}) ->
    State#state{shed = maps:merge(Shed, maps:from_list([{MFA, true} || {MFA, _, _} <- Off]))};
shed_now(unshed, ok, Saved, State = #state{shed = Shed}) ->
    State#state{shed = maps:without([MFA || {MFA, _, _} <- Saved], Shed)};
shed_now(_Switch, _Reply, _Functions, State) ->
    State.

%% Loops: stop return tracing them, then tell the engine, which until then counts their
%% frames against the frame bound. A raw session's patterns are the caller's: its loops
%% are counted only where the VM says their pattern keeps no frame.
apply_loops(Loops, State = #state{id = Id, backend = Backend, shed = Shed}) ->
    %% A shed loop stays without a pattern until the budget gives it back (count-only).
    Patterned = [MFA || MFA <- Loops, not maps:is_key(MFA, Shed)],
    ok = ferrotrace_tracing:add_loops(Id, Backend, [{MFA, ?COUNT_ONLY} || MFA <- Patterned]),
    Watch = case State#state.watch of
                none -> none;
                W -> ferrotrace_displaced:add_functions(W, Id, [{MFA, ?COUNT_ONLY} || MFA <- Patterned])
            end,
    Frameless = case Backend of
                    none -> [MFA || MFA <- Loops, not keeps_frames(MFA)];
                    _ -> Loops
                end,
    _ = ferrotrace_tracer:session_add_loops(Id, Frameless),
    case ferrotrace_registry:lookup(Id) of
        {ok, _, _, Info} ->
            ok = ferrotrace_registry:update(Id, #{loops => lists:usort(maps:get(loops, Info, []) ++ Loops)});
        error ->
            ok
    end,
    State#state{watch = Watch}.

do_step({loops, Loops}, State) ->
    apply_loops(Loops, State);
do_step({leave_out, MFAs}, State = #state{id = Id, backend = Backend, watch = Watch0, left_out = Left}) ->
    %% Taken off as the budget sheds a function (ferrotrace_shed), never given back.
    {{ok, Off, _Refused}, Watch} = ferrotrace_shed:switch(shed, MFAs, {Id, Backend, Watch0, specs(State)}),
    Left1 = maps:merge(Left, maps:from_keys(MFAs, true)),
    ok = ferrotrace_registry:update(Id, #{generated_left_out => [MFA || {MFA, _, _} <- Off] ++
                                             generated_left_out(Id)}),
    State#state{watch = Watch, left_out = Left1};
do_step({flag, Pids}, State = #state{id = Id, backend = Backend}) ->
    ok = ferrotrace_backend:calls_flag(Id, Backend, Pids, true),
    State;
do_step({own, Modules}, State = #state{id = Id, backend = Backend}) ->
    ok = ferrotrace_tracing:leave_out_modules(Id, Backend, Modules),
    State;
do_step(seen_generated, State = #state{id = Id, steps = Steps, left_out = Left, seen_every = Every}) ->
    %% The generated functions of a `'_'' module the session has seen called, the most
    %% called first, are left out next; then looked for again, less often each time (each
    %% look reads every function's count).
    Hot = ferrotrace_tracing:seen_generated(Id, specs(State), Left),
    State#state{steps = ferrotrace_tracing:chunks(leave_out, Hot) ++ Steps ++ [seen_generated],
                seen_every = min(?SEEN_MAX, Every * 2)}.

%% The steps after the start are done (but looking for generated functions seen): the
%% summary's `settling' turns false.
settled(#state{id = Id}) ->
    ferrotrace_registry:update(Id, #{settling => false}).

generated_left_out(Id) ->
    case ferrotrace_registry:lookup(Id) of
        {ok, _, _, #{generated_left_out := L}} -> L;
        _ -> []
    end.

%% The specs of the session's patterns now (remove/2 may have taken some off).
specs(#state{calls = #{patterns := Patterns}}) -> [MFA || #{mfa := MFA} <- Patterns];
specs(#state{}) -> [].

%% @private
-spec terminate(term(), #state{}) -> ok.
terminate(_Reason, State = #state{id = Id}) ->
    _ = end_session(user, State),
    %% The endpoint would close on its own once it sees the keeper gone; closed here, a
    %% release returns with its port free.
    _ = try ferrotrace_registry:lookup(Id) of
            {ok, _, _, Info} -> ferrotrace_metrics:unserve(Id, self(), Info);
            error -> ok
        catch exit:_ -> ok
        end,
    %% Unregistered first: a read that finds the engine session gone finds it released
    %% (`{error, {released, Id, _}}', not `no_such_session').
    _ = try ferrotrace_registry:unregister(Id) catch exit:_ -> ok end,
    _ = ferrotrace_tracer:release_session(Id),
    ok.

%% Stops the engine session and removes the patterns and flags this keeper set. Idempotent:
%% the first reason is the one the summary shows (`user' or `owner_down' here; the engine
%% keeps its own when it stopped first).
end_session(_Reason, State = #state{stopped = true}) ->
    State;
end_session(Reason, State = #state{id = Id, backend = Backend}) ->
    %% `{error, {no_such_session, Id}}' when another client released it by id: the
    %% patterns and flags are still this keeper's to remove.
    ok = scope_at_end(Id, Backend),
    _ = ferrotrace_tracer:stop_session(Id, Reason),
    _ = last_check(State),
    ferrotrace_tracing:stop(Id, Backend),
    State#state{stopped = true}.

%% What the legacy backend watches for another tool taking over: the processes traced and
%% the functions patterned, right after they were set. Checked every
%% ferrotrace_displaced:interval() ms until the session stops. OTP 27+ trace sessions do
%% not displace each other (each has its own tracer and patterns): nothing to watch there.
watch(Id, legacy, #{pids := Pids}) ->
    _ = erlang:send_after(ferrotrace_displaced:interval(), self(), check_displaced),
    ferrotrace_displaced:new(Id, ferrotrace_registry:patterns(Id), Pids);
watch(_Id, _Backend, _Tracing) ->
    none.

%% A last round as the session stops: a takeover since the last round is recorded, and
%% the registry then removes only the patterns still ours (see remove_patterns/1).
last_check(#state{id = Id, watch = Watch}) when Watch =/= none ->
    ferrotrace_displaced:check(Id, Watch);
last_check(_State) ->
    none.

%%% Tracing

%% The loops among the functions `Tracing' names that the analysis knows now (see
%% ferrotrace_loops: the modules named, and those read before): `complete' says whether
%% that was all.
prepare(Tracing0 = #{specs := Specs}) ->
    Tracing = resolved(Tracing0),
    {Loops, Complete, Loopers} = ferrotrace_loops:find(Specs, ferrotrace_traced:own_modules(), cached),
    Tracing#{loops => Loops, complete => Complete, loopers => Loopers};
prepare(Tracing) ->
    Tracing.

%% The processes a scope names (`pids', ferrotrace_scope), resolved again now: those gone
%% since the start checked it are left out, and a scope left with none refuses the start.
resolved(Tracing = #{pids := Which}) when Which =:= all; Which =:= new; Which =:= existing ->
    Tracing;
resolved(Tracing = #{pids := Scope}) ->
    case ferrotrace_scope:resolve(Scope) of
        {ok, Pids} -> Tracing#{pids := Pids, written => Scope};
        {error, Reason} -> refuse_early(Reason)
    end.

%% The loops found at the start, `{Now, Later}': set with the patterns, or as steps after
%% (those of a session with a `'_'' module: hundreds, where each change may wait 250 ms).
loops_now(#{specs := Specs, loops := Loops}) ->
    case [S || S = {'_', _, _} <- Specs] of
        [] -> {Loops, []};
        _ -> {[], Loops}
    end;
loops_now(_Tracing) ->
    {[], []}.

%% Where the analysis at the start was not complete, it goes on in a process of its own,
%% which sends the keeper the loops it finds (as the engine does with loops found at run
%% time: until then the frame bound holds their frames). While it reads, the session's info
%% says `reading' (a budget counts the reading's pace against itself, see
%% ferrotrace_budget:read_share/3).
complete_loops(Id, Tracing = #{specs := Specs, complete := false, loops := Known}) ->
    Pace = maps:get(read_pace, Tracing, ?READ_PACE),
    Keeper = self(),
    ok = ferrotrace_registry:update(Id, #{reading => true}),
    _ = spawn_opt(fun() ->
                          ok = ferrotrace_own:enter(),
                          Monitor = monitor(process, Keeper),
                          %% Paced: the node's work comes first (the engine holds
                          %% the frames of loops not found yet meanwhile). The reading
                          %% ends with the session: paced, it outlives short sessions,
                          %% and each new one would add a reader of its own.
                          Waiting = self(),
                          {Reader, Reading} =
                              spawn_opt(fun() ->
                                                ok = ferrotrace_own:enter(),
                                                Waiting ! {self(), ferrotrace_loops:find(Specs, ferrotrace_traced:own_modules(),
                                                                                         read, Pace)}
                                        end, [monitor | ferrotrace_own:spawn_options()]),
                          receive
                              {Reader, {Found, _, _}} ->
                                  _ = [Keeper ! {ferrotrace_loops, Id, Loops} || Loops <- [Found -- Known], Loops =/= []],
                                  demonitor(Monitor);
                              {'DOWN', Reading, process, Reader, _} ->
                                  demonitor(Monitor);
                              {'DOWN', Monitor, process, Keeper, _} ->
                                  exit(Reader, kill)
                          end,
                          ferrotrace_registry:update(Id, #{reading => false})
                  end, ferrotrace_own:spawn_options()),
    ok;
complete_loops(_Id, _Tracing) ->
    ok.

start_tracing(_Id, none) ->
    {ok, none, [], 0};
start_tracing(Id, Tracing = #{kinds := Kinds}) ->
    %% Other event kinds (processes/2, calls/2's `also'): refused before anything changes
    %% when this VM cannot take them safely.
    Others = [{Other, OtherKinds} || {Other, _, _, #{kinds := OtherKinds}} <- ferrotrace_registry:sessions(),
                                     Other =/= Id],
    case ferrotrace_activity:check_safe(Kinds, Others) of
        ok ->
            ok = ferrotrace_registry:update(Id, #{kinds => Kinds}),
            start_tracing(Id, maps:remove(kinds, Tracing), ferrotrace_activity:flags(Kinds));
        {error, _} = Error ->
            Error
    end;
start_tracing(Id, Tracing) ->
    %% Calls only: no `procs' (the keeper forgets dead processes' open calls, see
    %% settle_exits), and the summary shows no other kind.
    ok = ferrotrace_tracer:session_set_events(Id, false),
    ok = ferrotrace_registry:update(Id, #{kinds => []}),
    start_tracing(Id, Tracing, []).

start_tracing(Id, Tracing = #{specs := Specs, heads := Heads, pids := Pids, scope := Scope}, Extra) ->
    %% One pattern per spec, and the loops of named modules (a few: each a pattern change);
    %% a `'_'' module's loops and the functions left out come after, as steps
    %% (ferrotrace_tracing), the engine's frame bound holding their frames until then.
    {Loops, Later} = loops_now(Tracing),
    Patterns = ferrotrace_tracing:patterns(Specs, Heads, Scope, Loops),
    ok = ferrotrace_tracer:session_set_tracing(Id, Specs, Loops),
    %% A `'_'' module covers ferrotrace's own until a step takes them off: never in the
    %% figures meanwhile (a process is flagged from its birth to its enter/0, and a caller
    %% of the API is anybody's).
    ok = ferrotrace_tracer:session_exclude_modules(Id, ferrotrace_traced:own_modules()),
    ok = ferrotrace_registry:update(Id, #{loops => Loops}),
    %% The functions the budget holds back from the start (ferrotrace_start) are taken off
    %% as it sheds, before any process is flagged; the budget's process finds them in the
    %% registry (`held'), to give back as it does what it sheds.
    Follow = ferrotrace_scope:flags(maps:get(follow, Tracing, none), targets(Pids)),
    ok = scoped(Id, Tracing, Follow),
    case ferrotrace_tracing:start(Id, Patterns, targets(Pids), Extra ++ Follow, maps:get(held, Tracing, [])) of
        {ok, Backend, HeldSaved, HoldingMs} ->
            _ = [ok = ferrotrace_registry:update(Id, #{held => HeldSaved}) || HeldSaved =/= []],
            %% The processes waiting in a loop whose count-only pattern comes later (a
            %% server in its receive) are not traced until it is (a step), or each message
            %% would leave a frame on their stacks for as long as they live.
            _ = [ok = ferrotrace_backend:calls_flag(Id, Backend, maps:get(loopers, Tracing, []), false) || Later =/= []],
            %% The calling shell's processes (`shell => leave_out', ferrotrace_options).
            _ = [begin
                     ok = ferrotrace_backend:calls_flag(Id, Backend, Shell, false),
                     ok = ferrotrace_registry:update(Id, #{shell_left_out => length(Shell)})
                 end || Shell <- [maps:get(shell, Tracing, [])], Shell =/= []],
            {ok, Backend, [MFA || {MFA, _, _} <- HeldSaved], HoldingMs};
        {error, _} = Error ->
            Error
    end.

%% What add/2 and remove/2 change: the patterns set at the start, with the loops found then.
calls(_Id, none, _Tracing, _EngineOptions) ->
    none;
calls(Id, _Backend, #{specs := Specs, heads := Heads, scope := Scope}, EngineOptions) ->
    Loops = case ferrotrace_registry:lookup(Id) of
                {ok, _, _, #{loops := L}} -> L;
                _ -> []
            end,
    #{patterns => ferrotrace_tracing:patterns(Specs, Heads, Scope, Loops), scope => Scope,
      key => maps:get(key, EngineOptions, none)}.


%% True if the VM's call pattern of `MFA' pushes a frame per call (return or exception
%% tracing, in its local or global pattern).
keeps_frames(MFA) ->
    Specs = [Spec || Which <- [match_spec, meta_match_spec],
                     {_, Spec} <- [erlang:trace_info(MFA, Which)], is_list(Spec)],
    lists:any(fun({_Head, _Guards, Body}) ->
                      lists:any(fun(Action) -> lists:member(Action, [{return_trace}, {exception_trace}]) end, Body);
                 (_) -> false
              end, lists:append(Specs)).


targets(Pids) when is_list(Pids) -> Pids;
targets(Which) -> [Which].

%% How many processes a scoped session traces now: a walk of every process, done at most
%% once a second (a report, a scrape), the count reused meanwhile.
traced_processes(Id, Backend) ->
    Now = erlang:monotonic_time(millisecond),
    case get(traced_processes) of
        {At, Count} when Now - At < 1000 ->
            Count;
        _ ->
            Count = ferrotrace_backend:traced_processes(Id, Backend),
            put(traced_processes, {Now, Count}),
            Count
    end.

%% A scope's processes as the session stops, for its report. Never in the way of the stop
%% itself (what follows it removes the patterns and flags).
scope_at_end(Id, Backend) ->
    try ferrotrace_registry:lookup(Id) of
        {ok, _, _, #{scope := Scope}} ->
            _ = ferrotrace_registry:update(Id, #{scope => Scope#{at_end => ferrotrace_backend:traced_processes(Id, Backend)}}),
            ok;
        _ ->
            ok
    catch _:_ -> ok
    end.

%% A scope as the operator wrote it, what it follows and how many processes it held at the
%% start, for the report's header (`scope' in the summary); the flags that follow, for the
%% fuse's processes traced again.
scoped(Id, #{written := Written, follow := Follow, pids := Pids}, Flags) ->
    ferrotrace_registry:update(Id, #{scope => #{pids => Written, follow => Follow, at_start => length(Pids)},
                                     follow_flags => Flags});
scoped(_Id, _Tracing, _Flags) ->
    ok.
