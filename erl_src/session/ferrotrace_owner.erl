%%% @private
%%% @doc Who owns a session: the operator's presence, not a process that happens to run the
%%% call. A session stops when its owner leaves (ferrotrace_keeper monitors it); the owner
%%% is read from the options `owner' and `duration' and from what the caller is
%%% ({@link caller/0}): a shell's evaluator gives the session to its shell.
-module(ferrotrace_owner).

-export([caller/0, owner/1, owner/2, in_shell/0, shell_processes/1]).

%% Who the session belongs to: a process, or nobody (`owner => none', bounded by duration).
-type owner() :: {process | shell, pid()} | none.
%% What the caller of a start is: itself, whether it is a shell's evaluator, its group leader.
-type caller() :: {pid(), boolean(), pid()}.
-export_type([owner/0, caller/0]).

%% A session's duration when none is given (ms), as the engine takes it.
-define(DEFAULT_DURATION, 10000).

%% @doc What the calling process is, for a start's owner ({@link owner/2}): only the caller
%% can tell whether it is a shell's evaluator, and a start reads its options in a process
%% of ferrotrace's own (ferrotrace_options:read/4).
-spec caller() -> caller().
caller() ->
    {self(), shell_evaluator(self()), group_leader()}.

%% @doc The owner that `owner => Owner' and `duration => Duration' in `Options' give. The
%% operator's presence, not a process that happens to run the call: a shell evaluator is
%% restarted after every exception typed in the shell, so a session started from a shell
%% belongs to the shell's group leader, which lives as long as the shell (local, remote over
%% `-remsh' or `remote_console', or IEx) and goes down with its connection. Without
%% `owner', a caller that is not a shell's evaluator (`bin/rel eval', `rpc:call/4', a
%% control tool's eval: each exits as soon as the call returns) gets no owner, as with
%% `owner => none': its session runs its finite duration; with `duration => infinity' it
%% is refused, since nothing would ever stop it.
-spec owner(map()) -> {ok, owner()} | {error, term()}.
owner(Options) ->
    owner(Options, caller()).

%% @doc As {@link owner/1}, for `Caller' ({@link caller/0}, taken in the caller).
-spec owner(term(), caller()) -> {ok, owner()} | {error, term()}.
owner(#{owner := Owner} = Options, Caller) ->
    owner_of(Owner, maps:get(duration, Options, ?DEFAULT_DURATION), Caller);
owner(Options, {_Pid, Shell, GroupLeader}) when is_map(Options) ->
    case {Shell, maps:get(duration, Options, ?DEFAULT_DURATION)} of
        {true, _} ->
            {ok, {shell, GroupLeader}};
        {false, infinity} ->
            {error, {bad_option, {duration, infinity,
                                  <<"a finite duration, or owner => Pid: outside a shell a "
                                    "session has no owner">>}}};
        {false, _} ->
            {ok, none}
    end;
owner(Options, _Caller) ->
    {error, {bad_options, Options, <<"a map of options">>}}.

owner_of(none, infinity, _Caller) ->
    {error, {bad_option, {owner, none, <<"owner => none needs a finite duration">>}}};
owner_of(none, _Duration, _Caller) ->
    {ok, none};
owner_of(Pid, _Duration, {Caller, Shell, GroupLeader}) when is_pid(Pid), node(Pid) =:= node() ->
    case Pid =:= Caller andalso Shell of
        true -> {ok, {shell, GroupLeader}};
        false -> {ok, {process, Pid}}
    end;
owner_of(Other, _Duration, _Caller) ->
    {error, {bad_option, {owner, Other, <<"a local pid, or none (needs a finite duration)">>}}}.

%% @doc The processes on this node of the shell whose evaluator is `Caller' ({@link
%% caller/0}): the evaluator, the shell process it is linked to, and where they are local
%% (a shell on the node's own console) its group leader and the terminal's processes
%% (`user_drv' and those linked to it); for a remote shell (`-remsh', `remote_console') the
%% distribution connection to the operator's node. `[]' for a caller that is no shell's
%% evaluator. An evaluator the shell starts after an exception is a new process, not in it.
-spec shell_processes(caller()) -> [pid()].
shell_processes({Eval, true, GroupLeader}) when is_pid(Eval), is_pid(GroupLeader) ->
    %% The shell keeps its evaluator's pid (shell:start_eval/3; IEx's server, iex_server).
    Shell = [P || P <- links(Eval), dictionary_has(P, {evaluator, Eval})]
        ++ [P || {iex_server, P} <- dictionary(Eval), is_pid(P), node(P) =:= node()],
    Terminal = case node(GroupLeader) =:= node() of
                   true ->
                       Drv = [D || D <- [whereis(user_drv)], is_pid(D)],
                       [GroupLeader | Drv] ++ [P || Q <- [GroupLeader | Drv], P <- links(Q),
                                                    in_module(P, [user_drv, prim_tty, group, user_drv_reader, user_drv_writer])];
                   false ->
                       connection(node(GroupLeader))
               end,
    lists:usort([P || P <- [Eval | Shell ++ Terminal], is_process_alive(P)]);
shell_processes(_Caller) ->
    [].

links(P) ->
    case process_info(P, links) of
        {links, Links} -> [L || L <- Links, is_pid(L), node(L) =:= node()];
        undefined -> []
    end.

dictionary(P) ->
    case process_info(P, dictionary) of
        {dictionary, D} -> D;
        undefined -> []
    end.

dictionary_has(P, Entry) ->
    lists:member(Entry, dictionary(P)).

%% Whether `P' was started in, or runs now in, one of `Modules'.
in_module(P, Modules) ->
    Calls = [C || Key <- [current_function, initial_call], {_, C} <- [process_info(P, Key)]]
        ++ [C || {'$initial_call', C} <- dictionary(P)],
    lists:any(fun({M, _, _}) -> lists:member(M, Modules); (_) -> false end, Calls).

%% The process that owns the connection to `Node' (a remote shell's).
connection(Node) ->
    try net_kernel:node_info(Node, owner) of
        {ok, Owner} when is_pid(Owner), node(Owner) =:= node() -> [Owner];
        _ -> []
    catch _:_ -> []
    end.

%% @doc True when the caller is a shell's evaluator, the process that runs what an
%% operator types (see {@link owner/1}): `erl', `erl -remsh', a release's
%% `remote_console', IEx; false in `bin/rel eval', `rpc', `erl -noshell' and processes
%% spawned from a shell.
-spec in_shell() -> boolean().
in_shell() ->
    shell_evaluator(self()).

%% True when `Pid' is the caller and a shell's evaluator, the process that runs what an
%% operator types:
%% - the Erlang shell's (`erl', `erl -remsh', a release's `remote_console', which runs
%%   `erl -remsh'): the shell process runs on the node the commands run on (over -remsh
%%   only the group leader is remote), is linked to its evaluator and keeps its pid under
%%   `evaluator' in its dictionary (shell:start_eval/3, OTP 25 to 29);
%% - IEx's: its evaluator keeps the IEx server's pid under `iex_server' in its own
%%   dictionary (IEx.Evaluator.init/4; the server is not linked to it: Elixir 1.14 here).
%% A process spawned from a shell has neither (dictionaries are not inherited); an rpc,
%% erpc or `bin/rel eval' process has neither.
shell_evaluator(Pid) when Pid =:= self() ->
    erlang_shell_evaluator(Pid) orelse iex_evaluator();
shell_evaluator(_Pid) ->
    false.

erlang_shell_evaluator(Pid) ->
    {links, Links} = erlang:process_info(Pid, links),
    lists:any(fun(Shell) when is_pid(Shell), node(Shell) =:= node() ->
                      case erlang:process_info(Shell, dictionary) of
                          {dictionary, Dict} -> lists:member({evaluator, Pid}, Dict);
                          undefined -> false
                      end;
                 (_) -> false
              end, Links).

iex_evaluator() ->
    case get(iex_server) of
        Server when is_pid(Server), node(Server) =:= node() -> is_process_alive(Server);
        _ -> false
    end.

