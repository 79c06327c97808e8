%%% @private
%%% @doc What other processes ask a running session's keeper (ferrotrace_keeper): stop or
%%% release it (the façade, through ferrotrace_local), change its patterns (`add/2',
%%% `remove/2'), and the overhead budget's requests (ferrotrace_overhead: functions shed and
%%% put back, processes the fuse untraced traced again). Each checks that it was given a
%%% keeper of this node and answers a value or `{error, Reason}', never an exit:
%%% `{error, {not_a_keeper, Term}}', `{error, timeout}', or `{error, {keeper_down,
%%% Reason}}' if the keeper died during the call.
-module(ferrotrace_session).

-export([stop/1, release/1, add/2, remove/2]).
-export([shed/2, unshed/2, retrace/2, traced_processes/1]).

%% How long a call waits for a keeper (a stop may walk every process to untrace).
-define(CALL_TIMEOUT, 60000).
%% How long a summary waits for a scoped session's count of its processes.
-define(COUNT_TIMEOUT, 1000).

%% @doc Stops tracing; the figures stay readable. `{error, Reason}' if `Keeper' is not a
%% keeper, or it died during the call.
-spec stop(pid()) -> ok | {error, term()}.
stop(Keeper) -> call(Keeper, stop).

%% @doc Stops tracing and frees the session; as {@link stop/1}. Returns once the keeper has
%% ended: the session unregistered, its engine slot free, its endpoint's port closed.
-spec release(pid()) -> ok | {error, term()}.
release(Keeper) when is_pid(Keeper) ->
    %% The keeper answers before its terminate/2 runs: waiting for it to end makes what
    %% follows a release (a new session in its slot, the same port served again) find
    %% everything freed.
    Monitor = monitor(process, Keeper),
    case call(Keeper, release) of
        ok ->
            receive {'DOWN', Monitor, process, Keeper, _} -> ok
            after ?CALL_TIMEOUT -> demonitor(Monitor, [flush]), ok
            end;
        Error ->
            demonitor(Monitor, [flush]),
            Error
    end;
release(Keeper) ->
    call(Keeper, release).

%% @doc Traces the functions of `Spec' too, in the running session (`ferrotrace:add/2'):
%% checked and set as a start sets them (ferrotrace_amend).
-spec add(pid(), term()) -> {ok, #{atom() => term()}} | {error, term()}.
add(Keeper, Spec) -> call(Keeper, {add, Spec}).

%% @doc Takes the patterns `Spec' matches off the running session (`ferrotrace:remove/2').
-spec remove(pid(), term()) -> {ok, #{atom() => term()}} | {error, term()}.
remove(Keeper, Spec) -> call(Keeper, {remove, Spec}).

%% @doc Takes the patterns of `MFAs' off this session (the overhead budget, see
%% ferrotrace_shed): `{ok, Saved, Refused}', what was taken off and what was left as it was.
-spec shed(pid(), [mfa()]) -> {ok, [ferrotrace_shed:saved()], [mfa()]} | {error, term()}.
shed(Keeper, MFAs) -> call(Keeper, {shed, MFAs}).

%% @doc Puts back what {@link shed/2} took off.
-spec unshed(pid(), [ferrotrace_shed:saved()]) -> ok | {error, term()}.
unshed(Keeper, Saved) -> call(Keeper, {unshed, Saved}).

%% @doc Traces again `Pids', which the session's fuse untraced (ferrotrace_overhead), with
%% the session's flags: those no other tracer took meanwhile and that still live.
-spec retrace(pid(), [pid()]) -> ok | {error, term()}.
retrace(Keeper, Pids) -> call(Keeper, {retrace, Pids}).

%% @doc How many processes the session traces now (a scoped session's report), counted by
%% its keeper at most once a second; `{error, stopped}' once it stopped, `{error, timeout}'
%% where the keeper is busy for more than ?COUNT_TIMEOUT (a summary does not wait for it).
-spec traced_processes(pid()) -> non_neg_integer() | {error, term()}.
traced_processes(Keeper) -> call(Keeper, traced_processes, ?COUNT_TIMEOUT).

call(Keeper, Request) ->
    call(Keeper, Request, ?CALL_TIMEOUT).

call(Keeper, Request, Timeout) ->
    case ferrotrace_registry:is_keeper(Keeper) andalso node(Keeper) =:= node() of
        true ->
            try gen_server:call(Keeper, Request, Timeout)
            catch exit:{timeout, _} -> {error, timeout};
                  exit:{Reason, _} -> {error, {keeper_down, Reason}}
            end;
        false ->
            {error, {not_a_keeper, ferrotrace_hint:brief(Keeper)}}
    end.

