%%% @private
%%% @doc The node's ferrotrace sessions: who keeps each one, its name, and the trace patterns
%%% each session set.
%%%
%%% One small process, started on first use (a remote shell may attach to a node where the
%%% ferrotrace application was never started), keeps two ETS tables:
%%% <ul>
%%% <li>`ferrotrace_sessions': `{Id, Name, Keeper, Info}' per session not yet released,
%%% read by the API without a call;</li>
%%% <li>`ferrotrace_claims': the call patterns each session set (ferrotrace_backend_legacy).</li>
%%% </ul>
%%% On OTP 25 and 26 trace patterns belong to the node, not to a session. Every pattern
%%% change is made in this process (by ferrotrace_backend_legacy, the legacy backend's one place
%%% that changes them), so checking for a conflict and setting a pattern, or removing a
%%% pattern that no other live session still needs, are atomic with respect to every other
%%% session's start and stop. The registry also monitors each keeper: a keeper that was
%%% killed has its engine session released and its patterns and flags removed here.
%%%
%%% == Surviving its own death ==
%%% The tables are not the registry's: a second process, `ferrotrace_registry_tables', that
%%% does nothing else (it takes no requests, so nothing but an explicit kill ends it) owns
%%% them. A registry that is killed loses nothing: the next call starts a new one, which
%%% monitors every keeper in `ferrotrace_sessions' again (releasing and cleaning up after
%%% those that died meanwhile) and removes the claims of sessions no longer registered.
%%% A claim is written before its pattern is set and deleted only after the pattern is
%%% removed, so a registry killed between the two leaves a claim that the next stop (or the
%%% next registry) removes, never a pattern nobody knows of. A call in flight when the
%%% registry dies is made again to the new one (every request is idempotent).
-module(ferrotrace_registry).
-behaviour(gen_server).

-export([ensure_started/0, register/3, unregister/1, lookup/1, sessions/0, update/2,
         set_patterns/2, add_loops/2, exclude_modules/1, remove_patterns/1, remove_patterns/2, patterns/1, reap/1,
         is_keeper/1, released/1]).
-export([shed/2, unshed/2]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2]).

-define(SESSIONS, ferrotrace_sessions).
-define(LOOPS_CACHE, ferrotrace_loops_cache).
-define(TABLES, ferrotrace_registry_tables).
%% The ids of the last ?RELEASED_KEPT sessions released (`{Seq, Id}'), so that a released
%% session answers `released', not `no_such_session'.
-define(RELEASED, ferrotrace_released).
-define(RELEASED_KEPT, 1000).
%% A call in flight when the registry dies is made again, this many times at most.
-define(ATTEMPTS, 5).

%% A call pattern as set with erlang:trace_pattern/3.
-type pattern() :: #{mfa := ferrotrace:mfa_spec(),
                     match_spec := [tuple()],
                     scope := local | global}.
-type info() :: #{atom() => term()}.
%% A local session's engine id, or a cluster session's coordinator.
-type id() :: ferrotrace_tracer:session_id() | pid().
-export_type([pattern/0, info/0, id/0]).

%% @doc The registry's pid, starting it if needed. Safe to call concurrently.
-spec ensure_started() -> pid().
ensure_started() ->
    ok = ensure_tables(),
    case whereis(?MODULE) of
        undefined ->
            %% Not linked to the caller (a shell evaluator that may crash), and its group
            %% leader is the node's own, not a remote shell's.
            case gen_server:start({local, ?MODULE}, ?MODULE, [], [{spawn_opt, ferrotrace_own:spawn_options()}]) of
                {ok, Pid} -> Pid;
                {error, {already_started, Pid}} -> Pid;
                %% Killed as it started (its tables' owner too, perhaps): once more.
                {error, _} -> ensure_started()
            end;
        Pid ->
            Pid
    end.

%% The tables' owner: started once, never asked anything, so it outlives any registry.
ensure_tables() ->
    case whereis(?TABLES) of
        undefined ->
            Caller = self(),
            Ref = make_ref(),
            {Pid, Monitor} = spawn_opt(fun() -> tables_init(Caller, Ref) end,
                                       [monitor | ferrotrace_own:spawn_options()]),
            receive
                {Ref, ok} -> erlang:demonitor(Monitor, [flush]), ok;
                {'DOWN', Monitor, process, Pid, _} -> ensure_tables() % another caller won
            end;
        _ ->
            ok
    end.

tables_init(Caller, Ref) ->
    %% Registering first: of two concurrent starts, the loser exits before creating a table.
    try register(?TABLES, self())
    catch error:badarg -> exit(normal)
    end,
    group_leader(whereis(init), self()),
    _ = ets:new(?SESSIONS, [named_table, public, set, {read_concurrency, true}]),
    ok = ferrotrace_backend_legacy:new_table(),
    %% ferrotrace_loops' cache of each module version's tail calls.
    _ = ets:new(?LOOPS_CACHE, [named_table, public, set, {read_concurrency, true}]),
    %% ferrotrace_calibrate's last calibration of this node.
    _ = ets:new(ferrotrace_calibration, [named_table, public, set]),
    ok = ferrotrace_backend:new_table(),
    ok = ferrotrace_own:enter(),
    _ = ets:new(?RELEASED, [named_table, public, ordered_set]),
    Caller ! {Ref, ok},
    tables_loop().

tables_loop() ->
    receive _ -> tables_loop() end.

%% @doc Records a session kept by `Keeper'; `Info' must hold `name' (an atom or
%% `undefined'). Names are unique among sessions not yet released. A cluster session
%% (ferrotrace_cluster) is recorded with its coordinator's pid as both id and keeper.
-spec register(id(), pid(), info()) ->
          ok | {error, {name_taken, atom(), id()}}.
register(Id, Keeper, Info) ->
    call({register, Id, Keeper, Info}).

%% @doc Forgets a session (its keeper calls this as it releases it; from another process,
%% only a session whose keeper is gone).
-spec unregister(id()) -> ok.
unregister(Id) ->
    call({unregister, Id}).

%% @doc Merges `Fields' into a session's info.
-spec update(ferrotrace_tracer:session_id(), info()) -> ok.
update(Id, Fields) ->
    _ = ensure_started(),
    case ets:lookup(?SESSIONS, Id) of
        [{Id, Name, Keeper, Info}] ->
            %% Written only if unchanged since the read (the budget's tick, the keeper and a
            %% calibration landing after the start update one session's info at once): a
            %% change made between is read again, not written over.
            Unchanged = [{'=:=', '$1', {const, Name}}, {'=:=', '$2', {const, Keeper}}, {'=:=', '$3', {const, Info}}],
            case ets:select_replace(?SESSIONS, [{{Id, '$1', '$2', '$3'}, Unchanged,
                                                 [{const, {Id, Name, Keeper, maps:merge(Info, Fields)}}]}]) of
                1 -> ok;
                0 -> update(Id, Fields)
            end;
        [] ->
            ok
    end.

%% @doc Finds a session by id or name.
-spec lookup(id() | atom()) ->
          {ok, id(), pid(), info()} | error.
lookup(Name) when is_atom(Name) ->
    _ = ensure_started(),
    case ets:match_object(?SESSIONS, {'_', Name, '_', '_'}) of
        [{Id, Name, Keeper, Info}] when Name =/= undefined -> {ok, Id, Keeper, Info};
        _ -> error
    end;
lookup(Id) ->
    _ = ensure_started(),
    case ets:lookup(?SESSIONS, Id) of
        [{Id, _Name, Keeper, Info}] -> {ok, Id, Keeper, Info};
        [] -> error
    end.

%% @doc Every registered session, oldest first.
-spec sessions() -> [{id(), atom(), pid(), info()}].
sessions() ->
    _ = ensure_started(),
    lists:keysort(1, ets:tab2list(?SESSIONS)).

%% @doc Sets `Patterns' for session `Id', then `Loops' (each `{MFA, CountOnlyPattern}')
%% over them, then excludes ferrotrace's own modules. Refuses, changing nothing, when a
%% live session set an overlapping pattern with another match spec or scope: on OTP 25 a
%% function has one match spec for the whole node. Returns how many functions matched.
-spec set_patterns(ferrotrace_tracer:session_id(), [pattern()]) ->
          {ok, non_neg_integer()}
              | {error, {pattern_conflict, ferrotrace:mfa_spec(), ferrotrace_tracer:session_id()}}.
set_patterns(Id, Patterns) ->
    call({set_patterns, Id, Patterns}).

%% @doc Traces `Loops' count-only (`{MFA, MatchSpec}' without return tracing) in every
%% pattern of session `Id' that matches them: loops found at run time.
-spec add_loops(ferrotrace_tracer:session_id(), [{mfa(), [tuple()]}]) -> ok.
add_loops(Id, Loops) ->
    call({add_loops, Id, Loops}).

%% @doc Takes every pattern off the functions of `Modules' (ferrotrace's own, left out of a
%% `'_'' module's patterns: see ferrotrace_tracing); again after any session's patterns
%% are removed, while they are loaded.
-spec exclude_modules([module()]) -> ok.
exclude_modules(Modules) ->
    call({exclude_modules, Modules}).

%% @doc Takes the patterns of `MFAs' off for session `Id' (the overhead budget, see
%% ferrotrace_shed): each function one of its patterns covers and that carries its match
%% spec (or a loop's), unless another live session's pattern covers it too. The claim
%% remembers them as shed, so that a pattern set again (another session's stop) leaves them
%% off. `{Saved, Refused}': `{MFA, MatchSpec, Scope}' taken off, and the functions left;
%% `{error, badarg}' unless `MFAs' is a list of `{M, F, Arity}' (ferrotrace_backend_legacy).
-spec shed(ferrotrace_tracer:session_id(), [mfa()]) -> {[ferrotrace_shed:saved()], [mfa()]} | {error, badarg}.
shed(Id, MFAs) ->
    call({shed, Id, MFAs}).

%% @doc Puts back functions {@link shed/2} took off, with the match spec and scope they had;
%% `{error, badarg}' for anything else than what it gave.
-spec unshed(ferrotrace_tracer:session_id(), [ferrotrace_shed:saved()]) -> ok | {error, badarg}.
unshed(Id, Saved) ->
    call({unshed, Id, Saved}).

%% @doc Removes the patterns session `Id' set, except where another live session set the
%% same or a wider one; narrower patterns of other sessions inside a removed one are set
%% again at once. A function whose match spec another tool replaced (recon_trace, dbg on
%% OTP 25 and 26) keeps that tool's: only functions still carrying ours lose theirs.
-spec remove_patterns(ferrotrace_tracer:session_id()) -> ok.
remove_patterns(Id) ->
    call({remove_patterns, Id}).

%% @doc As {@link remove_patterns/1}, only the patterns of session `Id' whose spec is one of
%% `Specs' (`ferrotrace:remove/2'); the session's other patterns count as another live
%% session's do: what they need stays.
-spec remove_patterns(ferrotrace_tracer:session_id(), [ferrotrace:mfa_spec()]) -> ok.
remove_patterns(Id, Specs) ->
    call({remove_patterns, Id, Specs}).

%% @doc Called when the keeper of session `Id' was seen to die: if it died without cleaning
%% up (killed), its engine session is released and its patterns and flags removed now,
%% before this returns (the registry would do it on the keeper's `DOWN', a little later).
-spec reap(ferrotrace_tracer:session_id()) -> ok.
reap(Id) ->
    call({reap, Id}).

%% @doc True if `Pid' keeps a registered session (a `ferrotrace_keeper' or a
%% cluster coordinator).
-spec is_keeper(term()) -> boolean().
is_keeper(Pid) when is_pid(Pid) ->
    _ = ensure_started(),
    ets:match(?SESSIONS, {'_', '_', Pid, '_'}, 1) =/= '$end_of_table';
is_keeper(_) ->
    false.

%% @doc The patterns session `Id' set and still holds.
-spec patterns(ferrotrace_tracer:session_id()) -> [pattern()].
patterns(Id) ->
    _ = ensure_started(),
    ferrotrace_backend_legacy:claims(Id).

%% The registry's work is bounded (ETS and trace_pattern/3), so the call waits for it;
%% a registry that dies meanwhile (killed) is started again and asked again.
call(Request) ->
    call(Request, ?ATTEMPTS).

call(Request, Attempts) ->
    try
        gen_server:call(ensure_started(), Request, infinity)
    catch
        exit:{Reason, {gen_server, call, _}} when Attempts > 1, Reason =/= timeout ->
            call(Request, Attempts - 1)
    end.

%%% gen_server

%% @private
%% A registry started after another died takes over its sessions: every keeper is
%% monitored again (one that is already gone is cleaned up at its `DOWN'), and the claims
%% of a session that is no longer registered are removed.
-spec init([]) -> {ok, #{reference() => id()}}.
init([]) ->
    group_leader(whereis(init), self()),
    ok = ensure_tables(),
    ok = ferrotrace_own:enter(),
    Monitors = maps:from_list([{erlang:monitor(process, Keeper), Id}
                               || {Id, _, Keeper, _} <- ets:tab2list(?SESSIONS)]),
    Registered = fun(Id) -> ets:member(?SESSIONS, Id) end,
    _ = [unclaim(Id, all) || Id <- ferrotrace_backend_legacy:claimed(), not Registered(Id)],
    {ok, Monitors}.

%% @private
%% The requests are ferrotrace's own, but the functions that make them are exported, so any
%% term may arrive: one the registry cannot serve is answered `{error, {bad_request, _}}'
%% (summarised), never a crash, whose report would carry the term and whose restart every
%% other caller would wait for (found by the fuzz suite: a 6 MB binary as `Keeper').
-spec handle_call(term(), gen_server:from(), map()) -> {reply, term(), map()}.
handle_call(Request, From, Monitors) ->
    try
        serve(Request, From, Monitors)
    catch
        error:_ -> {reply, {error, {bad_request, ferrotrace_hint:brief(Request)}}, Monitors}
    end.

serve({register, Id, Keeper, Info = #{name := Name}}, _From, Monitors) when is_pid(Keeper) ->
    %% Idempotent: a keeper whose first call was lost with a killed registry asks again.
    Others = [Other || Name =/= undefined,
                       {Other, _, _, _} <- ets:match_object(?SESSIONS, {'_', Name, '_', '_'}),
                       Other =/= Id],
    Monitored = lists:member(Id, maps:values(Monitors)),
    case Others of
        [Other | _] ->
            {reply, {error, {name_taken, Name, Other}}, Monitors};
        [] when Monitored ->
            true = ets:insert(?SESSIONS, {Id, Name, Keeper, Info}),
            {reply, ok, Monitors};
        [] ->
            true = ets:insert(?SESSIONS, {Id, Name, Keeper, Info}),
            {reply, ok, Monitors#{erlang:monitor(process, Keeper) => Id}}
    end;
serve({reap, Id}, _From, Monitors) ->
    case ets:lookup(?SESSIONS, Id) of
        [{Id, _, Keeper, _}] when is_integer(Id) ->
            case is_process_alive(Keeper) of
                true -> {reply, ok, Monitors};
                false -> {reply, ok, clean_up(Id, Keeper, Monitors)}
            end;
        _ ->
            {reply, ok, Monitors}
    end;
serve({unregister, Id}, {Caller, _}, Monitors) ->
    %% Only by the session's own keeper (a cluster's coordinator: its own pid), or once it is
    %% gone: another caller would leave a live keeper, and what it holds (its endpoint, its
    %% patterns), where no release could reach it (found by the fuzz suite, seed 1506).
    _ = case ets:lookup(?SESSIONS, Id) of
            [{Id, _, Keeper, _}] when Keeper =:= Caller; Id =:= Caller -> forget(Id);
            [{Id, _, Keeper, _}] when is_pid(Keeper) -> is_process_alive(Keeper) orelse forget(Id);
            _ -> forget(Id)
        end,
    {reply, ok, Monitors};
serve({set_patterns, Id, Patterns}, _From, Monitors) ->
    {reply, ferrotrace_backend_legacy:set(Id, Patterns), Monitors};
serve({add_loops, Id, Loops}, _From, Monitors) ->
    {reply, ferrotrace_backend_legacy:add_loops(Id, Loops), Monitors};
serve({exclude_modules, Modules}, _From, Monitors) ->
    {reply, ferrotrace_backend_legacy:exclude_modules(Modules), Monitors};
serve({shed, Id, MFAs}, _From, Monitors) ->
    {reply, ferrotrace_backend_legacy:shed(Id, MFAs), Monitors};
serve({unshed, Id, Saved}, _From, Monitors) ->
    {reply, ferrotrace_backend_legacy:unshed(Id, Saved), Monitors};
serve({remove_patterns, Id}, _From, Monitors) ->
    {reply, unclaim(Id, all), Monitors};
serve({remove_patterns, Id, Specs}, _From, Monitors) when is_list(Specs) ->
    {reply, unclaim(Id, Specs), Monitors};
serve(Request, _From, Monitors) ->
    {reply, {error, {bad_request, ferrotrace_hint:brief(Request)}}, Monitors}.

%% @private
-spec handle_cast(term(), map()) -> {noreply, map()}.
handle_cast(_Request, Monitors) ->
    {noreply, Monitors}.

%% @private
%% A keeper that ends normally has already cleaned up; one that was killed has not.
-spec handle_info(term(), map()) -> {noreply, map()}.
handle_info({'DOWN', Ref, process, Keeper, _Reason}, Monitors) ->
    case maps:take(Ref, Monitors) of
        {Cluster, Rest} when is_pid(Cluster) ->
            %% A cluster session's coordinator (ferrotrace_cluster): no engine session here.
            true = ets:delete(?SESSIONS, Cluster),
            {noreply, Rest};
        {Id, Rest} ->
            {noreply, clean_up(Id, Keeper, Rest)};
        error ->
            {noreply, Monitors}
    end;
handle_info(_Message, Monitors) ->
    {noreply, Monitors}.

%% What a keeper that died without cleaning up (killed) leaves: its patterns, its flags and
%% its engine session. Only if `Keeper' still keeps `Id' (a session that was released
%% normally is no longer registered).
clean_up(Id, Keeper, Monitors) ->
    case ets:lookup(?SESSIONS, Id) of
        [{Id, _, Keeper, _}] ->
            _ = ferrotrace_code:ensure_tracer(),
            ok = unclaim(Id, all),
            ok = ferrotrace_backend_legacy:untrace_processes(Id),
            %% Forgotten first: a read that finds the engine session gone finds it released.
            true = forget(Id),
            _ = ferrotrace_tracer:release_session(Id),
            ok;
        _ ->
            ok
    end,
    maps:filter(fun(_, Other) -> Other =/= Id end, Monitors).

%% A released session's entry goes; its id is remembered among the last ?RELEASED_KEPT.
forget(Id) ->
    true = ets:delete(?SESSIONS, Id),
    try
        true = ets:insert(?RELEASED, {erlang:unique_integer([monotonic]), Id}),
        ets:info(?RELEASED, size) > ?RELEASED_KEPT andalso ets:delete(?RELEASED, ets:first(?RELEASED))
    catch error:badarg -> false  % tables made by a version without it
    end,
    true.

%% @doc Whether `Id' is one of the last 1000 sessions released on this node.
-spec released(term()) -> boolean().
released(Id) ->
    try ets:match_object(?RELEASED, {'_', Id}, 1) =/= '$end_of_table'
    catch error:badarg -> false
    end.

%% Session `Id''s patterns removed, all or those of some specs (ferrotrace_backend_legacy:remove/3), told whether it was found
%% displaced.
unclaim(Id, Which) ->
    Displaced = case ets:lookup(?SESSIONS, Id) of
                    [{Id, _, _, #{displaced := _}}] -> true;
                    _ -> false
                end,
    ferrotrace_backend_legacy:remove(Id, Which, Displaced).
