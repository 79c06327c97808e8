%%% @doc Cluster sessions: one `calls/2' session on several nodes, read as one.
%%%
%%% `ferrotrace:calls(Spec, #{nodes => [Node]})' starts a session on each node through
%%% `erpc' (ferrotrace must be in every node's code path, as in a release) and answers
%%% `{ok, Cluster}', a pid that every `ferrotrace' reading function takes like a session id.
%%%
%%% == Protocol ==
%%% <ul>
%%% <li>A coordinator on the calling node (a `gen_server', started unlinked as a session's
%%% keeper is, so the caller's crash cannot take it down before it has cleaned up) is
%%% registered in {@link ferrotrace_registry} with its pid as both id and keeper: the
%%% registry names and lists it, forgets it if it dies, and is where every call here
%%% checks that a pid is a cluster session. It watches the owner (as a keeper does) and
%%% every node (`monitor_node/2').</li>
%%% <li>On each node a part process owns that node's session (`owner => Part'), which is
%%% registered there with `cluster => Coordinator' in its info: `part_control/2' finds a
%%% part through the registry. The part monitors the coordinator: if the coordinator dies,
%%% or the node loses contact with it (net split), the part exits and the node's keeper
%%% stops its session (`owner_down'), as for any owner. Each node's session also has its
%%% own `duration', so no remote part outlives it, whatever the network does.</li>
%%% <li>A part tells the coordinator when its session stopped by itself (duration or a
%%% limit); the coordinator then stops every other part.</li>
%%% <li>A node that cannot start its part gives `{error, {node, Node, Reason}}'; the parts
%%% already started are released first, so no session is left behind.</li>
%%% <li>`release/1', or `keep' milliseconds after the owner left, releases every part (each
%%% releases its session and exits) and ends the coordinator.</li>
%%% </ul>
%%%
%%% == Reading ==
%%% A reading function asks the coordinator for the parts, asks each live node for its
%%% answer (`part_figures/2', or ferrotrace_local's, which answers as `ferrotrace' does for a
%%% local session) and merges the answers with {@link ferrotrace_cluster_merge}: counts add,
%%% HDR histograms add, means are exact.
%%% `summary/1' adds `nodes', `nodes_down' and `by_node => #{Node => Summary}'. A node that
%%% went down is listed in `nodes_down' and left out of the merged figures; the others carry
%%% on. `hdr_log' with `interval => Ms' (a session started with `intervals => P') places
%%% each node's intervals on one clock, in slots of `Ms' from the earliest node's start, and
%%% adds a slot's histograms.
-module(ferrotrace_cluster).
-behaviour(gen_server).

-export([calls/2, calls/4, summary/1, histogram/2, stop/1, release/1, export/3, report_parts/1, status/1]).
-export([slow_calls/3, recent/1, captures/1, add/2, remove/2, serve/2, unserve/1, replies/4]).
%% Called on each node through erpc.
-export([start_part/4, part_figures/2, part_control/2]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2]).

-define(CALL_TIMEOUT, 15000).
%% How often a part looks whether its session stopped by itself.
-define(POLL_MS, 200).

%% @doc `ferrotrace:calls(Spec, Options)': with `nodes => [Node]' a cluster session (the
%% nodes and the owner checked, then the parts started by {@link calls/4}; `[node()]' alone
%% is a local session, as without the option), anything else (bad options included) a
%% local session (ferrotrace_start), which answers for them, an unknown option explained.
-spec calls(term(), term()) -> {ok, pid() | ferrotrace_tracer:session_id()} | {error, term()}.
calls(Spec, Options) ->
    case ferrotrace_options:to_map(Options) of
        {ok, #{nodes := _} = Map} -> cluster_calls(Spec, Map);
        _ -> ferrotrace_start:calls(Spec, Options)
    end.

cluster_calls(Spec, Options = #{nodes := Nodes}) ->
    Rest = maps:remove(nodes, Options),
    case is_list(Nodes) andalso Nodes =/= [] andalso lists:all(fun is_atom/1, Nodes) of
        false ->
            {error, {bad_option, {nodes, Nodes, <<"a non-empty list of node names">>}}};
        true when Nodes =:= [node()] ->
            ferrotrace_start:calls(Spec, Rest);
        true ->
            case ferrotrace_owner:owner(Rest) of
                {ok, Checked} ->
                    calls(Spec, maps:remove(owner, Rest), lists:usort(Nodes), Checked);
                {error, _} = Error ->
                    Error
            end
    end.

%% @doc Starts the parts on `Nodes' (called by {@link calls/2}).
%% `Owner' is `{shell, GroupLeader}', `{process, Pid}' or `none'.
-spec calls(term(), map(), [node()], {shell | process, pid()} | none) ->
          {ok, pid()} | {error, term()}.
calls(Spec, Options, Nodes, Owner) when is_map(Options), is_list(Nodes) ->
    case lists:all(fun is_atom/1, Nodes) andalso valid_owner(Owner) of
        true ->
            case maps:get(name, Options, undefined) of
                Name when is_atom(Name), Name =/= none -> start(Spec, Options, Nodes, Owner);
                Name -> {error, {bad_option, {name, ferrotrace_hint:brief(Name), <<"an atom naming the session">>}}}
            end;
        false ->
            {error, badarg}
    end;
calls(_Spec, _Options, _Nodes, _Owner) ->
    {error, badarg}.

valid_owner(none) -> true;
valid_owner({Kind, Pid}) -> (Kind =:= shell orelse Kind =:= process) andalso is_pid(Pid);
valid_owner(_) -> false.

start(Spec, Options, Nodes, Owner) ->
    _ = ferrotrace_registry:ensure_started(),
    case gen_server:start(?MODULE, {Spec, Options, Nodes, Owner}, [{spawn_opt, ferrotrace_own:spawn_options()}]) of
        {ok, Coordinator} -> {ok, Coordinator};
        %% A refusal (init/1 acknowledges it as an error), or the coordinator killed as it started.
        {error, {refused, Reason}} -> {error, Reason};
        {error, Reason} -> {error, {coordinator, ferrotrace_hint:brief(Reason)}}
    end.

%% @doc The merged summary, with `nodes', `nodes_down' and `by_node'.
-spec summary(pid()) -> ferrotrace:summary() | {error, term()}.
summary(Cluster) ->
    case gather(Cluster) of
        {error, _} = Error -> Error;
        {Info, Figures} -> ferrotrace_cluster_merge:summary(Info, Figures)
    end.

%% @doc Whether the cluster session runs (as its coordinator knows: a part that stopped by
%% itself stops the others), for {@link ferrotrace:list/0}.
-spec status(pid()) -> {ok, #{status := running | stopped, stop_reason := atom(),
                              nodes := [node()], nodes_down := [node()]}} | {error, term()}.
status(Cluster) ->
    case call(Cluster, info) of
        {ok, Parts, Down, Reason} ->
            {ok, #{status => case Reason of undefined -> running; _ -> stopped end,
                   stop_reason => Reason, nodes => [N || {N, _} <- Parts], nodes_down => Down}};
        {error, _} = Error ->
            Error
    end.

%% @doc One function's merged latency in power-of-two buckets.
-spec histogram(pid(), mfa()) -> [ferrotrace:bucket()] | {error, term()}.
histogram(Cluster, MFA) ->
    case gather(Cluster) of
        {error, _} = Error -> Error;
        {_Info, Figures} -> ferrotrace_cluster_merge:histogram(Figures, MFA)
    end.

%% @doc Stops every node's part; figures stay readable.
-spec stop(pid()) -> ok | {error, term()}.
stop(Cluster) ->
    call(Cluster, stop).

%% @doc Stops and frees every node's part; the cluster session ends.
-spec release(pid()) -> ok | {error, term()}.
release(Cluster) ->
    call(Cluster, release).

%% @doc What the cluster's report is composed of (ferrotrace_report:compose/2), as a local
%% session's: the merged summary and histograms, each live node's figures of the other
%% kinds (their series' histograms read on that node), every node's captures, and the
%% capture gates' counts added.
-spec report_parts(pid()) -> ferrotrace_report:parts() | {error, term()}.
report_parts(Cluster) ->
    case {gather(Cluster), call(Cluster, parts)} of
        {{Info, Figures}, {ok, Parts, _}} ->
            Summary = ferrotrace_cluster_merge:summary(Info, Figures),
            Series = fun(Node, Id) ->
                             fun(S) -> case remote_call(Node, ferrotrace_local, histogram, [Id, S], ?CALL_TIMEOUT) of
                                           {badrpc, Reason} -> {error, Reason};
                                           Buckets -> Buckets
                                       end
                             end
                     end,
            Counts = case replies(Cluster, ferrotrace_capture, counts, fun(Id) -> [Id] end) of
                         {ok, Replies} -> ferrotrace_cluster_merge:capture_counts(Replies);
                         {error, _} = Error -> Error
                     end,
            #{summary => Summary,
              histogram => fun(MFA) -> ferrotrace_cluster_merge:histogram(Figures, MFA) end,
              activity => [{Node, NodeSummary, Series(Node, Id)}
                           || {Node, {_, Id}} <- Parts, {N, {NodeSummary, _}} <- Figures, N =:= Node],
              captures => captures(Cluster), capture_counts => Counts};
        {{error, _} = Error, _} ->
            Error;
        {_, {error, _} = Error} ->
            Error
    end.

%% @doc The merged figures as an export (see {@link ferrotrace_export}).
-spec export(pid(), ferrotrace_export:format(), map()) -> {ok, binary()} | {error, term()}.
export(Cluster, json, _Options) ->
    case summary(Cluster) of
        {error, _} = Error -> Error;
        Summary -> ferrotrace_tracer:to_json(ferrotrace_export:json_document(Summary))
    end;
export(Cluster, hdr_log, #{interval := Ms}) ->
    case replies(Cluster, ferrotrace_export, intervals, fun(Id) -> [Id, Ms] end) of
        {ok, NodeReplies} ->
            Replies = [R || {_Node, R} <- NodeReplies],
            case [E || {error, _} = E <- Replies] of
                [Error | _] ->
                    Error;
                [] ->
                    Nodes = [{Start, Is} || {ok, Start, Is} <- Replies],
                    {Start, Intervals} = ferrotrace_cluster_merge:intervals(Ms, erlang:system_time(millisecond), Nodes),
                    ferrotrace_export:hdr_log_intervals(Start, Intervals)
            end;
        {error, _} = Error ->
            Error
    end;
export(Cluster, hdr_log, _Options) ->
    case gather(Cluster) of
        {error, _} = Error ->
            Error;
        {_Info, Figures} ->
            {Start, Elapsed, Histograms} = ferrotrace_cluster_merge:hdr_log(Figures, erlang:system_time(millisecond)),
            ferrotrace_export:hdr_log(Start, Elapsed, Histograms)
    end;
export(Cluster, chrome_trace, _Options) ->
    %% Each node's recorder, read on its node; the nodes become Chrome processes in order.
    case replies(Cluster, ferrotrace_local, recent, fun(Id) -> [Id] end) of
        {ok, Recent} ->
            case [R || {_, {error, {no_recorder, _}} = R} <- Recent] of
                [_ | _] -> {error, {needs, recent}};
                [] -> ferrotrace_export:chrome_trace([{Node, Es} || {Node, Es} <- Recent, is_list(Es)])
            end;
        {error, _} = Error ->
            Error
    end;
export(Cluster, html, Options) ->
    %% The merged figures as the other exports read them, and each node's view of its part.
    case {gather(Cluster), replies(Cluster, ferrotrace_html, view, fun(Id) -> [Id] end)} of
        {{error, _} = Error, _} -> Error;
        {_, {error, _} = Error} -> Error;
        {{Info, Figures}, {ok, Views}} ->
            ferrotrace_html:cluster(ferrotrace_cluster_merge:summary(Info, Figures),
                                    fun(MFA) -> ferrotrace_cluster_merge:histogram(Figures, MFA) end, Views, Options)
    end;
export(Cluster, collapsed, Options) ->
    case replies(Cluster, ferrotrace_export, local, fun(Id) -> [Id, collapsed, Options] end) of
        {ok, Replies} ->
            Texts = [T || {_Node, {ok, T}} <- Replies],
            {ok, ferrotrace_export:merge_folded(Texts)};
        {error, _} = Error ->
            Error
    end.

%% @doc Every live node's kept calls of `MFA': `slowest' (slowest first) or `threshold'
%% (in the order they began); pids name their node.
-spec slow_calls(pid(), mfa(), slowest | threshold) -> [ferrotrace_slow:slow_call()] | {error, term()}.
slow_calls(Cluster, MFA, Which) ->
    case from_parts(Cluster, ferrotrace_local, slow_calls, fun(Id) -> [Id, MFA, Which] end) of
        {error, _} = Error -> Error;
        Lists -> ferrotrace_cluster_merge:slow_calls(Which, Lists)
    end.

%% @doc Every live node's recorded events (`recent'), merged in time order.
-spec recent(pid()) -> [ferrotrace_recent:event()] | {error, term()}.
recent(Cluster) ->
    case from_parts(Cluster, ferrotrace_local, recent, fun(Id) -> [Id] end) of
        {error, _} = Error -> Error;
        Lists -> ferrotrace_cluster_merge:recent(Lists)
    end.

%% @doc Every live node's captures (`capture'), in the order they were taken.
-spec captures(pid()) -> [ferrotrace_capture:capture()] | {error, term()}.
captures(Cluster) ->
    case from_parts(Cluster, ferrotrace_local, captures, fun(Id) -> [Id] end) of
        {error, _} = Error -> Error;
        Lists -> lists:sort(fun(#{at := A}, #{at := B}) -> A =< B end, lists:append(Lists))
    end.

%% @doc `ferrotrace:add(Cluster, Spec)': every live node's session adds `Spec'
%% (ferrotrace_local:add/2), answers merged (ferrotrace_cluster_merge:changes/1). All or
%% nothing: when a node refuses, the nodes that added take it off again.
-spec add(pid(), term()) -> {ok, #{atom() => term()}} | {error, term()}.
add(Cluster, Spec) ->
    case replies(Cluster, ferrotrace_local, add, fun(Id) -> [Id, Spec] end) of
        {ok, Replies} ->
            case ferrotrace_cluster_merge:changes(Replies) of
                {ok, _} = Ok ->
                    Ok;
                {error, _} = Error ->
                    Parts = case call(Cluster, parts) of
                                {ok, P, _} -> P;
                                {error, _} -> []
                            end,
                    _ = [remote_call(Node, ferrotrace_local, remove, [Id, Added], ?CALL_TIMEOUT)
                         || {Node, {ok, #{added := Added}}} <- Replies, {N, {_, Id}} <- Parts, N =:= Node],
                    Error
            end;
        {error, _} = Error ->
            Error
    end.

%% @doc `ferrotrace:remove(Cluster, Spec)' on every live node's session, as {@link add/2}
%% (a node that refuses is named; the others have removed it).
-spec remove(pid(), term()) -> {ok, #{atom() => term()}} | {error, term()}.
remove(Cluster, Spec) ->
    case replies(Cluster, ferrotrace_local, remove, fun(Id) -> [Id, Spec] end) of
        {ok, Replies} -> ferrotrace_cluster_merge:changes(Replies);
        {error, _} = Error -> Error
    end.

%% @doc `ferrotrace:serve/2' for a cluster: serves each node's part of `Cluster' on that node, with the same
%% `Settings' (`port => 0' picks a port per node): `{ok, [{Node, Url}]}', or the first
%% node's error, `{error, {node, Node, Reason}}', with the nodes served before unserved.
%% Each node serves its own figures, labelled with its name: Prometheus scrapes one target
%% per node, and adds them (`sum by (le) (...)') exactly as the cluster merges them, the
%% bounds being the same everywhere.
-spec serve(pid(), ferrotrace_metrics:settings()) -> {ok, [{node(), string()}]} | {error, term()}.
serve(Cluster, Settings) ->
    case replies(Cluster, ferrotrace_metrics, serve_part, fun(Id) -> [Id, Settings] end) of
        {ok, Replies} ->
            case [{Node, Why} || {Node, Reply} <- Replies, Why <- [failed(Reply)], Why =/= false] of
                [] ->
                    {ok, [{Node, Url} || {Node, {ok, Url}} <- Replies]};
                [{Node, Why} | _] ->
                    _ = unserve(Cluster),
                    {error, {node, Node, Why}}
            end;
        {error, _} = Error ->
            Error
    end.

failed({ok, _}) -> false;
failed({error, Why}) -> Why;
failed(Other) -> Other.

%% @doc Stops serving every node's part of `Cluster'.
-spec unserve(pid()) -> ok | {error, term()}.
unserve(Cluster) ->
    case replies(Cluster, ferrotrace_metrics, unserve_part, fun(Id) -> [Id] end) of
        {ok, _} -> ok;
        {error, _} = Error -> Error
    end.

%% The lists `Module:Function(Args(Id))' returns on each live node (see
%% ferrotrace_cluster_merge:lists/1).
from_parts(Cluster, Module, Function, Args) ->
    case replies(Cluster, Module, Function, Args) of
        {ok, Replies} -> ferrotrace_cluster_merge:lists(Replies);
        {error, _} = Error -> Error
    end.

%% @doc Each live node's answer to `Module:Function(Args(Id))' (`Id' its session), with the
%% node; a node that went down is left out, as in the summary (serve/2 serves each node's
%% part on its node this way; ferrotrace_saved saves each node's part).
-spec replies(pid(), module(), atom(), fun((pos_integer()) -> [term()])) ->
          {ok, [{node(), term()}]} | {error, term()}.
replies(Cluster, Module, Function, Args) ->
    case call(Cluster, parts) of
        {ok, Parts, Down} ->
            {ok, [{Node, remote_call(Node, Module, Function, Args(Id), ?CALL_TIMEOUT)}
                  || {Node, {_Pid, Id}} <- Parts, not lists:member(Node, Down)]};
        {error, _} = Error ->
            Error
    end.

%% Every live node's summary and histograms, and what the coordinator knows of the session
%% (ferrotrace_cluster_merge:info()); a node that does not answer is counted as down.
gather(Cluster) ->
    case call(Cluster, info) of
        {ok, Parts, Down0, StopReason} ->
            Replies = [{Node, remote_call(Node, ?MODULE, part_figures, [Id, all], ?CALL_TIMEOUT)}
                       || {Node, {_Pid, Id}} <- Parts, not lists:member(Node, Down0)],
            {Figures, Down} = ferrotrace_cluster_merge:figures(Down0, Replies),
            Name = case ferrotrace_registry:lookup(Cluster) of
                       {ok, _, _, #{name := N}} -> N;
                       error -> undefined
                   end,
            {#{id => Cluster, name => Name, nodes => [N || {N, _} <- Parts], nodes_down => Down,
               stop_reason => StopReason}, Figures};
        {error, _} = Error ->
            Error
    end.

%% A request to a coordinator: `Cluster' must be one (registered with itself as keeper),
%% else `{error, {no_such_session, Cluster}}' at once, without a message sent.
call(Cluster, Request) ->
    case is_pid(Cluster) andalso node(Cluster) =:= node()
        andalso ferrotrace_registry:lookup(Cluster) of
        {ok, Cluster, Cluster, _} ->
            try gen_server:call(Cluster, Request, ?CALL_TIMEOUT)
            catch exit:{timeout, _} -> {error, timeout};
                  exit:_ -> {error, {no_such_session, Cluster}}
            end;
        _ ->
            {error, {no_such_session, ferrotrace_hint:brief(Cluster)}}
    end.

%% erpc:call/5 whose failure (node down, timeout, an exception there) is a value:
%% `{badrpc, Reason}', which callers skip or count as the node being down.
remote_call(Node, Module, Function, Args, Timeout) ->
    try erpc:call(Node, Module, Function, Args, Timeout)
    catch Class:Reason -> {badrpc, {Class, Reason}}
    end.

%%--------------------------------------------------------------------------------------
%% The coordinator.

-record(c, {owner :: reference() | none, parts :: [{node(), {pid(), pos_integer()}}],
            down = [] :: [node()], stop_reason = undefined :: atom(), keep :: timeout()}).

%% @private
%% Registers the session, then starts every part; a refusal is acknowledged as
%% `{error, {refused, Reason}}' and the process exits `normal' (as a keeper's, see
%% ferrotrace_keeper), with nothing left registered or started.
-spec init({term(), map(), [node()], ferrotrace_owner:owner()}) -> {ok, #c{}}.
init({Spec, Options, Nodes, Owner}) ->
    ok = ferrotrace_own:enter(),
    %% Listed and named in the node's registry like a local session (names are shared).
    Info = #{name => maps:get(name, Options, undefined), spec => Spec, owner => Owner,
             started_at => erlang:system_time(millisecond), nodes => Nodes},
    case ferrotrace_registry:register(self(), self(), Info) of
        ok ->
            case start_parts(Spec, Options, Nodes, []) of
                {ok, Parts} ->
                    _ = [monitor_node(N, true) || {N, _} <- Parts, N =/= node()],
                    OwnerRef = case Owner of
                                   none -> none;
                                   {_, Pid} -> monitor(process, Pid)
                               end,
                    {ok, #c{owner = OwnerRef, parts = Parts, keep = maps:get(keep, Options, 600000)}};
                {error, Reason} ->
                    ok = ferrotrace_registry:unregister(self()),
                    refuse(Reason)
            end;
        {error, Reason} ->
            refuse(Reason)
    end.

-spec refuse(term()) -> no_return().
refuse(Reason) ->
    proc_lib:init_ack({error, {refused, Reason}}),
    exit(normal).

start_parts(_Spec, _Options, [], Acc) ->
    {ok, lists:reverse(Acc)};
start_parts(Spec, Options, [Node | Rest], Acc) ->
    Result = try erpc:call(Node, ?MODULE, start_part, [self(), Spec, Options, node()], ?CALL_TIMEOUT)
             catch error:{exception, undef, _} -> {error, ferrotrace_not_loaded};
                   error:{erpc, Why} -> {error, Why};
                   Class:Reason -> {error, {Class, Reason}}
             end,
    case Result of
        {ok, Part, Id} ->
            start_parts(Spec, Options, Rest, [{Node, {Part, Id}} | Acc]);
        {error, Reason2} ->
            _ = [control(N, P, release) || {N, {P, _}} <- Acc],
            {error, {node, Node, Reason2}}
    end.

%% @private
-spec handle_call(parts | info | stop | release, gen_server:from(), #c{}) ->
          {reply, term(), #c{}} | {stop, normal, ok, #c{}}.
handle_call(parts, _From, State = #c{parts = Parts, down = Down}) ->
    {reply, {ok, Parts, Down}, State};
handle_call(info, _From, State = #c{parts = Parts, down = Down, stop_reason = Reason}) ->
    {reply, {ok, Parts, Down, Reason}, State};
handle_call(stop, _From, State) ->
    {reply, ok, stop_all(user, State, none)};
handle_call(release, _From, State) ->
    {stop, normal, release_all(State), State}.

%% @private
-spec handle_cast(term(), #c{}) -> {noreply, #c{}}.
handle_cast(_Message, State) ->
    {noreply, State}.

%% @private
-spec handle_info(term(), #c{}) -> {noreply, #c{}} | {stop, normal, #c{}}.
handle_info({part_stopped, Node, Reason}, State) ->
    {noreply, stop_all(Reason, State, Node)};
handle_info({nodedown, Node}, State) ->
    {noreply, State#c{down = lists:usort([Node | State#c.down])}};
handle_info({'DOWN', OwnerRef, process, _, _}, State = #c{owner = OwnerRef}) when OwnerRef =/= none ->
    %% The owner left: every part stops; figures stay readable for `keep'.
    State1 = stop_all(owner_down, State#c{owner = none}, none),
    case State#c.keep of
        infinity -> ok;
        Keep -> _ = erlang:send_after(Keep, self(), keep_expired), ok
    end,
    {noreply, State1};
handle_info(keep_expired, State) ->
    ok = release_all(State),
    {stop, normal, State};
handle_info(_Message, State) ->
    {noreply, State}.

%% Stops every live part but `Except' (the one that stopped by itself); the first reason
%% is the session's.
stop_all(Reason, State = #c{parts = Parts, down = Down}, Except) ->
    _ = [control(N, P, stop) || {N, {P, _}} <- Parts, N =/= Except, not lists:member(N, Down)],
    case State#c.stop_reason of
        undefined -> State#c{stop_reason = Reason};
        _ -> State
    end.

%% Releases every live part and forgets the session; the coordinator then ends.
release_all(#c{parts = Parts, down = Down}) ->
    _ = [control(N, P, release) || {N, {P, _}} <- Parts, not lists:member(N, Down)],
    ferrotrace_registry:unregister(self()).

control(Node, Part, What) ->
    try erpc:call(Node, ?MODULE, part_control, [Part, What], ?CALL_TIMEOUT)
    catch _:_ -> {error, {node, Node, unreachable}}
    end.

%%--------------------------------------------------------------------------------------
%% Parts (on each node).

%% @private
%% @doc Runs on `Node' through erpc: starts this node's part and its session.
%% Arguments are checked before anything is spawned: `{error, badarg}' otherwise.
-spec start_part(pid(), term(), map(), node()) -> {ok, pid(), pos_integer()} | {error, term()}.
start_part(Coordinator, Spec, Options, _From) when is_pid(Coordinator), is_map(Options) ->
    Caller = self(),
    Ref = make_ref(),
    {Part, Monitor} = spawn_opt(fun() -> ok = ferrotrace_own:enter(), part_init(Caller, Ref, Coordinator, Spec, Options) end,
                                [monitor | ferrotrace_own:spawn_options()]),
    receive
        {Ref, Result} -> demonitor(Monitor, [flush]), Result;
        {'DOWN', Monitor, process, Part, Reason} -> {error, {part, ferrotrace_hint:brief(Reason)}}
    end;
start_part(_Coordinator, _Spec, _Options, _From) ->
    {error, badarg}.

part_init(Caller, Ref, Coordinator, Spec, Options) ->
    Monitor = monitor(process, Coordinator),
    case calls(Spec, (maps:remove(name, Options))#{owner => self()}) of
        {ok, Id} ->
            %% Marks the session as this part's, for part_control/2 (and before the
            %% coordinator knows the part, so before it can send any control).
            ok = ferrotrace_registry:update(Id, #{cluster => Coordinator}),
            Caller ! {Ref, {ok, self(), Id}},
            part(Coordinator, Monitor, Id, running);
        {error, _} = Error ->
            Caller ! {Ref, Error}
    end.

part(Coordinator, Monitor, Id, Status) ->
    receive
        {'DOWN', Monitor, process, _, _} ->
            %% Coordinator gone or unreachable: leaving stops the session (owner_down).
            ok;
        {control, From, Tag, stop} ->
            From ! {Tag, ferrotrace_local:stop(Id)},
            part(Coordinator, Monitor, Id, stopped);
        {control, From, Tag, release} ->
            From ! {Tag, ferrotrace_local:release(Id)}
    after ?POLL_MS ->
            case Status =:= running andalso ferrotrace_tracer:session_status(Id) of
                {ok, #{status := stopped, stop_reason := Reason}} ->
                    Coordinator ! {part_stopped, node(), Reason},
                    part(Coordinator, Monitor, Id, stopped);
                _ ->
                    part(Coordinator, Monitor, Id, Status)
            end
    end.

%% @private
%% @doc Runs on a part's node: `stop' or `release' its session.
%% `Part' must be a part on this node (the owner of a session registered with a
%% `cluster'): any other process answers `{error, {no_such_part, Part}}' at once, and a
%% part that does not answer in time `{error, timeout}'.
-spec part_control(pid(), stop | release) -> ok | {error, term()}.
part_control(Part, What) when What =:= stop; What =:= release ->
    case is_part(Part) of
        true ->
            Monitor = monitor(process, Part),
            Part ! {control, self(), Monitor, What},
            receive
                {Monitor, Reply} -> demonitor(Monitor, [flush]), Reply;
                {'DOWN', Monitor, process, _, _} -> ok
            after ?CALL_TIMEOUT ->
                    demonitor(Monitor, [flush]),
                    {error, timeout}
            end;
        false ->
            {error, {no_such_part, ferrotrace_hint:brief(Part)}}
    end;
part_control(_Part, What) ->
    {error, {bad_control, ferrotrace_hint:brief(What)}}.

%% A live local process that owns a registered session of a cluster: a part.
is_part(Pid) when is_pid(Pid), node(Pid) =:= node() ->
    is_process_alive(Pid) andalso lists:any(fun({_, _, _, #{owner := Owner, cluster := _}}) -> Owner =:= {process, Pid};
                 (_) -> false
              end, ferrotrace_registry:sessions());
is_part(_) ->
    false.

%% @private
%% @doc Runs on a part's node: its summary and histograms (V2 compressed).
-spec part_figures(pos_integer(), [mfa()] | all) -> {ok, map(), [{mfa(), binary()}]} | {error, term()}.
part_figures(Id, _Which) ->
    case {ferrotrace_local:summary(Id), ferrotrace_tracer:session_histograms_bytes(Id)} of
        {{error, _} = Error, _} -> Error;
        {_, {error, _} = Error} -> Error;
        {Summary, {ok, Histograms}} -> {ok, Summary, Histograms}
    end.
