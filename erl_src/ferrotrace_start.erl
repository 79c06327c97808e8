%%% @private
%%% @doc Starting a session for `ferrotrace:session/1', `calls/2' and `processes/2': the
%%% options checked (ferrotrace_options), the tracer module loaded (ferrotrace_code), a keeper
%%% started with its settings (ferrotrace_session), and with `intervals => Ms' the interval
%%% snapshots beside it (ferrotrace_intervals); `nodes => [Node]' starts a cluster session
%%% (ferrotrace_cluster) instead. Answers as the API functions do: `{ok, Session}' or
%%% `{error, Reason}'; an unknown option is explained by the caller.
-module(ferrotrace_start).

-export([session/1, calls/2, processes/2]).

%% @doc A raw session: `ferrotrace:session(Options)'.
-spec session(term()) -> {ok, ferrotrace_tracer:session_id()} | {error, term()}.
session(Options0) ->
    case ferrotrace_options:to_map(Options0) of
        {ok, Options} -> start(Options, none);
        {error, _} = Error -> Error
    end.

%% @doc `ferrotrace:calls(Spec, Options)': a local session, or a cluster session's pid.
-spec calls(term(), term()) -> {ok, ferrotrace_tracer:session_id() | pid()} | {error, term()}.
calls(Spec, Options0) ->
    case ferrotrace_options:to_map(Options0) of
        {ok, #{nodes := _} = Options} -> cluster_calls(Spec, Options);
        {ok, Options} -> start_with(ferrotrace_options:calls(Spec, Options));
        {error, _} = Error -> Error
    end.

%% @doc `ferrotrace:processes(Kinds, Options)'.
-spec processes(term(), term()) -> {ok, ferrotrace_tracer:session_id()} | {error, term()}.
processes(Kinds, Options) ->
    start_with(ferrotrace_options:processes(Kinds, Options)).

%% A cluster session: `nodes => [Node]' (see ferrotrace_cluster). `[node()]' alone is a
%% local session, as without the option.
cluster_calls(Spec, Options = #{nodes := Nodes}) ->
    Rest = maps:remove(nodes, Options),
    case is_list(Nodes) andalso Nodes =/= [] andalso lists:all(fun is_atom/1, Nodes) of
        false ->
            {error, {bad_option, {nodes, Nodes, <<"a non-empty list of node names">>}}};
        true when Nodes =:= [node()] ->
            start_with(ferrotrace_options:calls(Spec, Rest));
        true ->
            Owner = maps:get(owner, Rest, self()),
            case ferrotrace_options:owner(Owner, maps:get(duration, Rest, 10000)) of
                {ok, Checked} ->
                    ferrotrace_cluster:calls(Spec, maps:remove(owner, Rest), lists:usort(Nodes), Checked);
                {error, _} = Error ->
                    Error
            end
    end.

start_with({ok, Tracing, Options}) -> start(Options, Tracing);
start_with({error, _} = Error) -> Error.

%% A keeper (ferrotrace_session) for the session, with `Options' less those of calls/2.
start(Options, Tracing) ->
    %% Not code:load_file/1, and one load at a time: see ferrotrace_code.
    case ferrotrace_code:ensure_tracer() of
        {module, _} ->
            case {ferrotrace_options:settings(Options, Tracing), ferrotrace_intervals:check(Options)} of
                {{ok, Settings, Engine}, {ok, Intervals}} ->
                    with_intervals(ferrotrace_session:start(Engine, Tracing, Settings), Intervals);
                {{error, _} = Error, _} ->
                    Error;
                {_, {error, _} = Error} ->
                    Error
            end;
        {error, Reason} ->
            {error, {nif_not_loaded, Reason}}
    end.

%% `intervals => Ms': per-interval histograms for hdr_log (ferrotrace_intervals), taken
%% until the keeper ends.
with_intervals({ok, Id}, {_, _} = Intervals) ->
    case ferrotrace_registry:lookup(Id) of
        {ok, Id, Keeper, _} ->
            case ferrotrace_intervals:start(Id, Keeper, Intervals) of
                Pid when is_pid(Pid) -> ok = ferrotrace_registry:update(Id, #{intervals => Pid});
                {error, _} -> ok
            end;
        error ->
            ok
    end,
    {ok, Id};
with_intervals(Started, _) ->
    Started.
