%%% @private
%%% @doc One dispatch for every API function that takes a session: a name (`name => Atom')
%%% stands for what it names, a pid is a cluster session (`ferrotrace_cluster'), anything
%%% else must be a local session's id, looked up in `ferrotrace_registry'. The answers for
%%% a session that is none are the same everywhere: `{error, {no_such_session, Name}}' for
%%% a name, `{error, {bad_session, Term}}' for a term that is no id (shortened by
%%% `ferrotrace_hint:brief/1'), `{error, {released, Id, Hint}}' for one of the last
%%% 1000 sessions released here, and for another id the engine's or the cluster's answer.
-module(ferrotrace_dispatch).

-export([named/2, with_session/3, with_id/2, by_keeper/2]).

%% What a local session's function is given: its id, its keeper (`none' for an id the
%% registry does not hold) and what the registry knows of it.
-type local(Answer) :: fun((ferrotrace_tracer:session_id(), pid() | none, map()) -> Answer).

%% @doc `Fun(Session)', a name replaced by what it names: a local session's id or a cluster
%% session's pid. For entries that check their options after the name and before the id.
-spec named(term(), fun((term()) -> Answer)) -> Answer | {error, {no_such_session, atom()}}.
named(Name, Fun) when is_atom(Name) ->
    case ferrotrace_registry:lookup(Name) of
        {ok, IdOrCluster, _Keeper, _Info} -> Fun(IdOrCluster);
        error -> {error, {no_such_session, Name}}
    end;
named(Session, Fun) ->
    Fun(Session).

%% @doc `Cluster(Pid)' for a cluster session (ferrotrace_cluster answers for a pid that is
%% none); `Local(Id, Keeper, Info)' for a local one, or `Local(Id, none, #{})' for an id the
%% registry does not hold (a session from before a registry restart): the engine answers.
-spec with_session(term(), local(Answer), fun((pid()) -> Answer)) ->
          Answer | {error, {no_such_session | bad_session, term()}}.
with_session(Session, Local, Cluster) ->
    named(Session, fun(Pid) when is_pid(Pid) -> Cluster(Pid);
                      (Id) -> with_id(Id, Local)
                   end).

%% @doc `Local(Id, Keeper, Info)' for a local session's id, as {@link with_session/3} calls
%% it for a term that is neither a name nor a pid: `Local(Id, none, #{})' for an id the
%% registry does not hold, `{error, {bad_session, Term}}' for a term that is no id. For
%% callers on this node that hold an engine id (ferrotrace_local).
-spec with_id(term(), local(Answer)) -> Answer | {error, {bad_session, term()}}.
with_id(Id, Local) ->
    case ferrotrace_registry:lookup(Id) of
        {ok, Found, Keeper, Info} -> Local(Found, Keeper, Info);
        error when is_integer(Id) -> released(Id, Local(Id, none, #{}));
        error -> {error, {bad_session, ferrotrace_hint:brief(Id)}}
    end.

%% A released session answers differently from one that never was.
released(Id, {error, {no_such_session, Id}} = Answer) ->
    case ferrotrace_registry:released(Id) of
        true -> {error, {released, Id, <<"this session was released: its figures are gone">>}};
        false -> Answer
    end;
released(_Id, Answer) ->
    Answer.

%% @doc A local session's function for stop/1 and release/1: `Call(Keeper)', the keeper
%% stops or releases its session and removes what it set. A keeper that died during the
%% call (killed, or it ended as another client released the session) is no answer: what
%% it left is cleaned up now (ferrotrace_registry:reap/1), then `Engine(Id)' answers, as
%% it does for a session without a keeper.
-spec by_keeper(fun((pid()) -> Answer), fun((ferrotrace_tracer:session_id()) -> Answer)) ->
          local(Answer).
by_keeper(Call, Engine) ->
    fun(Id, none, _Info) ->
            Engine(Id);
       (Id, Keeper, _Info) ->
            case Call(Keeper) of
                {error, {Gone, _}} when Gone =:= keeper_down; Gone =:= not_a_keeper ->
                    ok = reap(Id),
                    Engine(Id);
                Answer ->
                    Answer
            end
    end.

%% A registry killed during the reap, again at each retry, is no reason for a stop or a
%% release to raise: the registry that starts next cleans up what no keeper holds.
reap(Id) ->
    try ferrotrace_registry:reap(Id)
    catch exit:{_, {gen_server, call, _}} -> ok
    end.
