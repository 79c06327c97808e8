%%% @private
%%% @doc One session on this node, by id: read, change, stop, release. `ferrotrace' uses these
%%% for a local session (the three-argument forms are the functions its dispatch calls with
%%% the id, the keeper and what the registry knows, see ferrotrace_dispatch); a cluster's
%%% parts (ferrotrace_cluster) and the exports (ferrotrace_export) call the one-argument
%%% forms on their node. Being below all three, it lets them work on a local session without
%%% calling back into the façade. A by-id function looks the id up as the façade does
%%% (ferrotrace_dispatch:with_id/2), so it answers as the façade does for that id.
-module(ferrotrace_local).

-export([summary/1, slow_calls/3, recent/1, captures/1, stop/1, release/1, add/2, remove/2]).
-export([summary/3, histogram/2, report_parts/1, stop/3, release/3]).

-import(ferrotrace_dispatch, [with_id/2, by_keeper/2]).

%% @doc `ferrotrace:summary(Id)' for a local session's id.
-spec summary(ferrotrace_tracer:session_id()) -> ferrotrace:summary() | {error, term()}.
summary(Id) ->
    with_id(Id, fun summary/3).

%% @doc The summary of local session `Id' (see `ferrotrace:summary/1'): the engine's, its
%% calls sorted by total time, with what the keeper found (`displaced', `loops', `name'),
%% the call-path counts and the other kinds' figures (ferrotrace_activity).
-spec summary(ferrotrace_tracer:session_id(), pid() | none, map()) ->
          ferrotrace:summary() | {error, term()}.
summary(Id, Keeper, Info) ->
    %% The calls of processes dead since the keeper last looked are not shown as open.
    _ = ferrotrace_tracer:session_settle_exits(Id),
    case ferrotrace_tracer:session_summary(Id) of
        {ok, Summary = #{calls := Calls}} ->
            ByTotal = fun(#{total := A}, #{total := B}) -> A >= B end,
            %% `displaced' (OTP 25 and 26): what the keeper's checks found, absent if none.
            %% `calibration' and `compensated' (calls/2, ferrotrace_calibrate); `changes': what
            %% add/2 and remove/2 changed, absent if nothing; `budget' (max_overhead,
            %% ferrotrace_overhead): the budget's figures; `start' (calls/2, ferrotrace_start):
            %% where the start's time went.
            Merged = maps:merge(maps:merge(Summary, maps:with([displaced, calibration, compensated, changes, budget,
                                                               start], Info)),
                                scope(Keeper, Info)),
            %% Generated functions a wildcard left out (ferrotrace_tracing): the few calls
            %% timed before they were are not shown as the session's figures.
            LeftOut = maps:get(generated_left_out, Info, []),
            Shown = [C || C = #{mfa := MFA} <- Calls, not lists:member(MFA, LeftOut)],
            ferrotrace_activity:merge(Id, Info,
                (ferrotrace_trees:with_counts(Id, Merged))#{calls := lists:sort(ByTotal, estimated(Shown, Merged)),
                        generated_left_out => length(LeftOut),
                        shell_left_out => maps:get(shell_left_out, Info, 0),
                        settling => maps:get(settling, Info, false),
                        stacks => stack_counts(Id),
                        name => maps:get(name, Info, undefined),
                        loops => lists:usort(maps:get(loops, Info, []) ++
                                                 maps:get(loops, Summary, []))});
        {error, _} = Error ->
            Error
    end.

%% `scope' (a session on named processes, ferrotrace_scope): the scope as written, what it
%% follows, how many processes it held at the start and holds now (`now', while the
%% session runs) or held as it stopped (`at_end').
scope(_Keeper, #{scope := #{at_end := _} = Scope}) ->
    #{scope => Scope};
scope(Keeper, #{scope := Scope}) when is_pid(Keeper) ->
    case ferrotrace_session:traced_processes(Keeper) of
        Now when is_integer(Now) -> #{scope => Scope#{now => Now}};
        {error, _} -> #{scope => Scope}
    end;
scope(_Keeper, _Info) ->
    #{}.

%% Each call entry's `estimated' calls where its count is of calls timed out of more:
%% sampled (`sample', the budget's rate) or refused by the budget's fuse. A budget's tick
%% estimates each function's calls from its count and what each timed call stood for
%% (ferrotrace_budget), the calls counted since at the rate now; a fixed `sample' counts
%% each timed call as the calls it was kept out of. Otherwise no `estimated': the count is
%% every call.
estimated(Calls, #{budget := #{estimated := Estimated, rate := Rate}}) ->
    [case Estimated of
         #{MFA := {Est, Then}} -> C#{estimated => Est + max(0, Count - Then) * Rate};
         #{} -> C#{estimated => Count * Rate}
     end || C = #{mfa := MFA, count := Count} <- Calls];
estimated(Calls, #{sample := #{calls := N, processes := P}}) when N > 1; P > 1 ->
    [C#{estimated => Count * max(N, 1) * P} || C = #{count := Count} <- Calls];
estimated(Calls, _Summary) ->
    Calls.

stack_counts(Id) ->
    case ferrotrace_tracer:session_stack_counts(Id) of
        {ok, Counts} -> Counts;
        {error, _} -> #{paths => 0, overflow => 0, too_deep => 0}
    end.

%% @doc The buckets of a function or another series of local session `Id' (see
%% `ferrotrace:histogram/2'); `Id' as the dispatch found it.
-spec histogram(ferrotrace_tracer:session_id(), mfa() | ferrotrace_activity:series()) ->
          [ferrotrace:bucket()] | {error, term()}.
histogram(Id, Series) when Series =:= wakeup; Series =:= run_slice; Series =:= lifetime;
                           Series =:= size_words; Series =:= {gc, minor};
                           Series =:= {gc, major}; Series =:= {ports, run_slice} ->
    ferrotrace_activity:histogram(Id, Series);
histogram(Id, MFA) ->
    case ferrotrace_tracer:session_histogram(Id, MFA) of
        {ok, Buckets} -> Buckets;
        {error, _} = Error -> Error
    end.

%% @doc What the report of local session `Id' is composed of (ferrotrace_report:compose/2):
%% its summary and histograms, its other kinds' figures, its captures and their counts.
-spec report_parts(ferrotrace_tracer:session_id()) -> ferrotrace_report:parts() | {error, term()}.
report_parts(Id) ->
    case summary(Id) of
        {error, _} = Error ->
            Error;
        Summary ->
            Histogram = fun(Series) -> histogram(Id, Series) end,
            #{summary => Summary, histogram => Histogram, activity => [{local, Summary, Histogram}],
              captures => captures(Id), capture_counts => ferrotrace_capture:counts(Id)}
    end.

%% @doc `ferrotrace:slowest(Id, MFA)' (`slowest') or `ferrotrace:slow_calls(Id, MFA)'
%% (`threshold') for a local session's id; ferrotrace_cluster calls it on each node through
%% `erpc'.
-spec slow_calls(ferrotrace_tracer:session_id(), mfa(), slowest | threshold) ->
          [ferrotrace_slow:slow_call()] | {error, term()}.
slow_calls(Id, MFA, Which) ->
    with_id(Id, fun(Found, _, _) -> ferrotrace_slow:calls(Found, MFA, Which) end).

%% @doc `ferrotrace:captures(Id)' for a local session's id (for a cluster session's parts).
-spec captures(ferrotrace_tracer:session_id()) -> [ferrotrace_capture:capture()] | {error, term()}.
captures(Id) ->
    with_id(Id, fun ferrotrace_capture:local/3).

%% @doc `ferrotrace:recent(Id)' for a local session's id: the recorder's events (for the
%% exports, and on each node of a cluster through `erpc').
-spec recent(ferrotrace_tracer:session_id()) -> [ferrotrace_recent:event()] | {error, term()}.
recent(Id) ->
    with_id(Id, fun(Found, _, _) -> ferrotrace_recent:events(Found) end).

%% @doc `ferrotrace:add(Id, Spec)' for a local session's id: its keeper sets the patterns
%% (ferrotrace_amend); ferrotrace_cluster calls it on each node through `erpc'.
-spec add(ferrotrace_tracer:session_id(), term()) -> {ok, #{atom() => term()}} | {error, term()}.
add(Id, Spec) ->
    with_id(Id, fun(Found, Keeper, _) -> with_keeper(Found, Keeper, fun(K) -> ferrotrace_session:add(K, Spec) end) end).

%% @doc `ferrotrace:remove(Id, Spec)' for a local session's id, as {@link add/2}.
-spec remove(ferrotrace_tracer:session_id(), term()) -> {ok, #{atom() => term()}} | {error, term()}.
remove(Id, Spec) ->
    with_id(Id, fun(Found, Keeper, _) -> with_keeper(Found, Keeper, fun(K) -> ferrotrace_session:remove(K, Spec) end) end).

%% A session with no keeper (released, or from before a registry restart) has no patterns
%% to change.
with_keeper(Id, none, _Call) ->
    case lists:member(Id, ferrotrace_tracer:sessions()) of
        true -> {error, {no_keeper, Id, <<"this session's keeper is gone: start a new session">>}};
        false -> {error, {no_such_session, Id}}
    end;
with_keeper(_Id, Keeper, Call) ->
    Call(Keeper).

%% @doc `ferrotrace:stop(Id)' for a local session's id.
-spec stop(ferrotrace_tracer:session_id()) -> ok | {error, term()}.
stop(Id) ->
    with_id(Id, fun stop/3).

%% @doc Stops local session `Id' through its keeper, which removes what it set; without a
%% keeper (or once it died), the engine stops it (see ferrotrace_dispatch:by_keeper/2).
-spec stop(ferrotrace_tracer:session_id(), pid() | none, map()) -> ok | {error, term()}.
stop(Id, Keeper, Info) ->
    Stop = by_keeper(fun ferrotrace_session:stop/1,
                     fun(Engine) -> ferrotrace_tracer:stop_session(Engine, user) end),
    Stop(Id, Keeper, Info).

%% @doc `ferrotrace:release(Id)' for a local session's id.
-spec release(ferrotrace_tracer:session_id()) -> ok | {error, term()}.
release(Id) ->
    with_id(Id, fun release/3).

%% @doc Releases local session `Id' through its keeper, as {@link stop/3} stops it.
-spec release(ferrotrace_tracer:session_id(), pid() | none, map()) -> ok | {error, term()}.
release(Id, Keeper, Info) ->
    Release = by_keeper(fun ferrotrace_session:release/1, fun ferrotrace_tracer:release_session/1),
    Release(Id, Keeper, Info).
