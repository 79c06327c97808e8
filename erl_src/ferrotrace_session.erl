%%% @private
%%% @doc The keeper of one ferrotrace session: a process that owns the engine session, watches
%%% the session's owner (the shell that created it), ends the session after its duration, and
%%% undoes the trace patterns and flags it set. It is not linked to the owner, so the owner's
%%% crash cannot take it down before it has cleaned up.
-module(ferrotrace_session).
-behaviour(gen_server).

-export([start/3, stop/1, release/1]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2, terminate/2]).

-type tracing() :: none | #{specs := [ferrotrace:mfa_spec()],
                           pids := ferrotrace:pid_spec(),
                           scope := local | global}.
-export_type([tracing/0]).

%% OTP 25's spec of erlang:trace_info/2 omits the `{tracer, {Module, State}}' answer that a
%% tracer module gets, so dialyzer believes our comparison can never succeed.
-dialyzer({no_match, stop_tracing/2}).

-record(state, {id :: ferrotrace_tracer:session_id(),
                owner :: reference(),
                tracing :: tracing()}).

%% The engine's default duration (native/ferrotrace_core/src/options.rs); the engine stops
%% the session by itself, this keeper's timer then removes the patterns and flags.
-define(DEFAULT_DURATION, 10000).

%% Return and exception events for every traced call; `exception_trace' implies `return_trace'.
-define(MATCH_SPEC, [{'_', [], [{exception_trace}]}]).

%% @doc Starts a keeper for `Owner' and, if asked, sets up call tracing.
-spec start(pid(), map(), tracing()) -> {ok, ferrotrace_tracer:session_id()} | {error, term()}.
start(Owner, EngineOptions, Tracing) ->
    case gen_server:start(?MODULE, {Owner, EngineOptions, Tracing}, []) of
        {ok, Keeper} -> gen_server:call(Keeper, id, infinity);
        {error, Reason} -> {error, Reason}
    end.

%% @doc Stops tracing; the figures stay readable.
-spec stop(pid()) -> ok.
stop(Keeper) -> gen_server:call(Keeper, stop, infinity).

%% @doc Stops tracing and frees the session.
-spec release(pid()) -> ok.
release(Keeper) -> gen_server:call(Keeper, release, infinity).

%% @private
%% A refused start is acknowledged as `{error, Reason}' and the process exits `normal': a
%% typo in an option is an answer for the shell, not a crash report (OTP 25's gen_server has
%% no `{error, Reason}' return from init/1).
-spec init({pid(), map(), tracing()}) -> {ok, #state{}}.
init({Owner, EngineOptions, Tracing}) ->
    Monitor = erlang:monitor(process, Owner),
    case ferrotrace_tracer:new_session(EngineOptions, self()) of
        {ok, Id} ->
            case start_tracing(Id, Tracing) of
                ok ->
                    _ = case maps:get(duration, EngineOptions, ?DEFAULT_DURATION) of
                            infinity -> none;
                            Ms -> erlang:send_after(Ms, self(), duration)
                        end,
                    {ok, #state{id = Id, owner = Monitor, tracing = Tracing}};
                {error, Reason} ->
                    _ = ferrotrace_tracer:release_session(Id),
                    refuse(Reason)
            end;
        {error, Reason} ->
            refuse(Reason)
    end.

-spec refuse(term()) -> no_return().
refuse(Reason) ->
    proc_lib:init_ack({error, Reason}),
    exit(normal).

%% @private
-spec handle_call(id | stop | release, gen_server:from(), #state{}) ->
          {reply, term(), #state{}} | {stop, normal, ok, #state{}}.
handle_call(id, _From, State) ->
    {reply, {ok, State#state.id}, State};
handle_call(stop, _From, State) ->
    {reply, ok, end_session(user, State)};
handle_call(release, _From, State) ->
    {stop, normal, ok, end_session(user, State)}.

%% @private
-spec handle_cast(term(), #state{}) -> {noreply, #state{}}.
handle_cast(_Message, State) ->
    {noreply, State}.

%% @private
-spec handle_info(term(), #state{}) -> {noreply, #state{}} | {stop, normal, #state{}}.
handle_info({'DOWN', Monitor, process, _, _}, State = #state{owner = Monitor}) ->
    {stop, normal, end_session(owner_down, State)};
handle_info(duration, State) ->
    {noreply, end_session(duration, State)};
handle_info(_Message, State) ->
    {noreply, State}.

%% @private
-spec terminate(term(), #state{}) -> ok.
terminate(_Reason, State = #state{id = Id}) ->
    _ = end_session(user, State),
    _ = ferrotrace_tracer:release_session(Id),
    ok.

%% Stops the engine session and removes the patterns and flags this keeper set. Idempotent.
end_session(Reason, State = #state{id = Id, tracing = Tracing}) ->
    ok = ferrotrace_tracer:stop_session(Id, Reason),
    stop_tracing(Id, Tracing),
    State#state{tracing = none}.

start_tracing(_Id, none) ->
    ok;
start_tracing(Id, Tracing = #{specs := Specs, pids := Pids, scope := Scope}) ->
    Matched = lists:sum([erlang:trace_pattern(Spec, ?MATCH_SPEC, [Scope]) || Spec <- Specs]),
    %% Never trace ferrotrace itself, whatever the wildcard.
    [erlang:trace_pattern({M, '_', '_'}, false, [Scope]) || M <- own_modules()],
    case Matched of
        0 ->
            {error, {no_matching_functions, Specs}};
        _ ->
            %% `procs' brings each process's exit, which lets the engine forget calls left
            %% open by a process that died inside them.
            Flags = [call, procs, {tracer, ferrotrace_tracer, Id}],
            case set_flags(targets(Pids), Flags) of
                ok ->
                    %% `all' includes this keeper; it makes no calls worth tracing.
                    _ = erlang:trace(self(), false, [call, procs]),
                    ok;
                {error, _} = Error ->
                    stop_tracing(Id, Tracing),
                    Error
            end
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

stop_tracing(_Id, none) ->
    ok;
stop_tracing(Id, #{specs := Specs, pids := Pids, scope := Scope}) ->
    _ = [erlang:trace_pattern(Spec, false, [Scope]) || Spec <- Specs],
    Ours = {tracer, {ferrotrace_tracer, Id}},
    Untrace = fun(Target) ->
                      try erlang:trace_info(Target, tracer) of
                          Ours -> _ = erlang:trace(Target, false, [call, procs]), ok;
                          _ -> ok
                      catch error:badarg -> ok % the process is gone
                      end
              end,
    lists:foreach(Untrace, untrace_targets(Pids)).

targets(Pids) when is_list(Pids) -> Pids;
targets(Which) -> [Which].

untrace_targets(all) -> [new | erlang:processes()];
untrace_targets(existing) -> erlang:processes();
untrace_targets(new) -> [new | erlang:processes()];
untrace_targets(Pids) -> Pids.

own_modules() ->
    [ferrotrace, ferrotrace_tracer, ferrotrace_session, ferrotrace_report].
