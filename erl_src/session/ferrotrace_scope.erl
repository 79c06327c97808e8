%%% @private
%%% @doc The processes a session traces, named as an operator names them (the `pids'
%%% option of `calls/2' and `processes/2'): `all', `new', `existing', or one of these
%%% forms, or a list of them:
%%% <ul>
%%% <li>a pid of this node, or one written as the shell prints it (`"<0.123.0>"');</li>
%%% <li>a registered name, `{global, Name}', `{via, Module, Name}';</li>
%%% <li>`{children, Sup}': the supervisor `Sup' (a pid or a name as above) and every
%%% process under it, recursively;</li>
%%% <li>`{application, App}': the processes whose group leader is the running
%%% application's master (its supervision tree and whatever they started);</li>
%%% <li>`{initial_call, {M, F, A}}': the processes started in that function (proc_lib's
%%% `$initial_call', else the process's own; `A' may be `'_'').</li>
%%% </ul>
%%% Each form must name at least one live process when the start checks it
%%% ({@link check/1}), or the start is refused, naming the form with a hint; the keeper
%%% resolves the forms again just before it flags the processes ({@link resolve/1}), those
%%% gone meanwhile left out.
%%%
%%% What a scope follows afterwards is `follow' ({@link follow/2}): `spawns' (the VM's
%%% `set_on_spawn': every process a traced process spawns is traced, and so on), the
%%% default where a form names processes by anything but their pid; `first_spawn'
%%% (`set_on_first_spawn': each traced process passes the flags to the first process it
%%% spawns only); `none', the default for pids. A supervisor's restarts are followed through
%%% it: `{children, Sup}' and `{application, App}' trace the supervisors too, and a
%%% restarted child is a spawn of its supervisor. A name registered after the start is not
%%% followed (it is resolved once): only what the named process spawns is.
-module(ferrotrace_scope).

-export([check/1, resolve/1, valid/1, follow/2, flags/2, named/1]).

-type form() :: pid() | atom() | string() | {global, term()} | {via, module(), term()}
              | {children, pid() | atom() | {global, term()} | {via, module(), term()}}
              | {application, atom()} | {initial_call, {module(), atom(), arity() | '_'}}.
-type scope() :: all | new | existing | form() | [form()].
-type follow() :: spawns | first_spawn | none.
-export_type([form/0, scope/0, follow/0]).

%% How long a supervisor may take to list its children (ms).
-define(WHICH_CHILDREN_MS, 2000).
%% How deep supervisors may nest under a `{children, Sup}'.
-define(MAX_DEPTH, 32).
%% How many forms a list may hold.
-define(MAX_FORMS, 1000).
-define(ACCEPTED, <<"all, new, existing, or one or a list of: a pid (or \"<0.123.0>\"), a registered name, "
                    "{global, Name}, {via, Module, Name}, {children, Sup}, {application, App}, "
                    "{initial_call, {M, F, A}}">>).

%% @doc `ok' where `Scope' is well formed and each of its forms names a live process now,
%% else `{error, {bad_option, {pids, Form, Hint}}}' for the first that does not.
-spec check(term()) -> ok | {error, {bad_option, {pids, term(), binary()}}}.
check(Scope) ->
    case resolve(Scope) of
        {ok, _} -> ok;
        {error, _} = Error -> Error
    end.

%% @doc The processes `Scope' names now: `{ok, Targets}', `all', `new' or `existing' alone,
%% or the live pids (sorted, each once); or the error of {@link check/1}.
-spec resolve(term()) -> {ok, [pid() | all | new | existing]} | {error, {bad_option, {pids, term(), binary()}}}.
resolve(Which) when Which =:= all; Which =:= new; Which =:= existing ->
    {ok, [Which]};
resolve([]) ->
    bad([], ?ACCEPTED);
resolve(List) when is_list(List) ->
    case forms(List, ?MAX_FORMS) of
        text -> resolve_forms([List]);
        Forms when is_list(Forms) -> resolve_forms(Forms);
        Bad -> Bad
    end;
resolve(Form) ->
    resolve_forms([Form]).

%% A list's forms, `text' for a list of characters (a pid as the shell prints it), or the
%% error of an improper or too long list.
forms(List, Max) ->
    case proper(List, Max) of
        true ->
            case lists:all(fun(C) -> is_integer(C) end, List) of
                true -> text;
                false -> List
            end;
        false ->
            bad(List, <<"a proper list of at most 1000 forms: ", ?ACCEPTED/binary>>)
    end.

proper([], _Left) -> true;
proper(_, 0) -> false;
proper([_ | Rest], Left) -> proper(Rest, Left - 1);
proper(_, _Left) -> false.

resolve_forms(Forms) ->
    resolve_forms(Forms, []).

resolve_forms([], Acc) ->
    {ok, lists:usort(lists:append(Acc))};
resolve_forms([Form | Rest], Acc) ->
    case processes(Form) of
        {ok, Pids} -> resolve_forms(Rest, [Pids | Acc]);
        {error, Hint} -> bad(Form, Hint)
    end.

bad(Form, Hint) ->
    {error, {bad_option, {pids, ferrotrace_hint:brief(Form), unicode:characters_to_binary(Hint)}}}.

%% @doc True where `Scope' has the shape of a scope (its processes not looked for).
-spec valid(term()) -> boolean().
valid(Which) when Which =:= all; Which =:= new; Which =:= existing -> true;
valid([]) -> false;
valid(List) when is_list(List) ->
    case forms(List, ?MAX_FORMS) of
        text -> true;
        Forms when is_list(Forms) -> lists:all(fun form/1, Forms);
        _ -> false
    end;
valid(Form) -> form(Form).

form(Pid) when is_pid(Pid) -> true;
form(Name) when is_atom(Name) -> true;
form({global, _}) -> true;
form({via, Module, _}) -> is_atom(Module);
form({children, Sup}) -> (is_pid(Sup) orelse is_atom(Sup) orelse is_list(Sup)
                           orelse (is_tuple(Sup) andalso tuple_size(Sup) >= 2
                                   andalso lists:member(element(1, Sup), [global, via])))
                          andalso form(Sup);
form({application, App}) -> is_atom(App);
form({initial_call, {M, F, A}}) -> is_atom(M) andalso is_atom(F) andalso (A =:= '_' orelse is_integer(A));
form(Text) when is_list(Text) -> lists:all(fun is_integer/1, Text);
form(_) -> false.

%% @doc True where `Scope' names processes by anything but their pids (a name, a
%% supervisor, an application, an initial call): `follow' is then `spawns' by default.
-spec named(term()) -> boolean().
named(Which) when Which =:= all; Which =:= new; Which =:= existing -> false;
named(List) when is_list(List) ->
    case forms(List, ?MAX_FORMS) of
        Forms when is_list(Forms) -> lists:any(fun(F) -> not is_pid(F) end, Forms);
        _ -> false
    end;
named(Form) -> not is_pid(Form).

%% @doc The `follow' option for `Scope': `{ok, spawns | first_spawn | none}' (`undefined':
%% its default, see the module doc), or `{error, {bad_option, {follow, Value, Accepted}}}'.
-spec follow(term(), term()) -> {ok, follow()} | {error, {bad_option, {follow, term(), binary()}}}.
follow(undefined, Scope) ->
    {ok, case named(Scope) of true -> spawns; false -> none end};
follow(Follow, _Scope) when Follow =:= spawns; Follow =:= first_spawn; Follow =:= none ->
    {ok, Follow};
follow(Follow, _Scope) ->
    {error, {bad_option, {follow, ferrotrace_hint:brief(Follow),
                          <<"spawns (what a traced process spawns is traced too), first_spawn "
                            "(its first spawn only) or none">>}}}.

%% @doc The trace flags of `follow' on processes named by a list (none for `all', `new' or
%% `existing', which cover every spawn already).
-spec flags(follow(), [pid() | all | new | existing]) -> [atom()].
flags(spawns, Targets) -> [set_on_spawn || lists:all(fun is_pid/1, Targets)];
flags(first_spawn, Targets) -> [set_on_first_spawn || lists:all(fun is_pid/1, Targets)];
flags(none, _Targets) -> [].

%%--------------------------------------------------------------------------------------
%% Each form's processes now: `{ok, [pid()]}' (at least one) or `{error, Hint}'.

processes(Pid) when is_pid(Pid) ->
    live(Pid, "");
processes(Name) when is_atom(Name) ->
    case whereis(Name) of
        Pid when is_pid(Pid) ->
            {ok, [Pid]};
        Port when is_port(Port) ->
            {error, [atom_to_list(Name), " is a port's name: a session traces processes"]};
        undefined ->
            {error, [atom_to_list(Name), " is not a registered name", did_you_mean(Name, registered()),
                     " (registered() lists them)"]}
    end;
processes({global, Name}) ->
    case caught(fun() -> global:whereis_name(Name) end) of
        Pid when is_pid(Pid), node(Pid) =:= node() -> {ok, [Pid]};
        Pid when is_pid(Pid) -> {error, io_lib:format("registered on ~p: trace it there", [node(Pid)])};
        _ -> {error, <<"not a name global knows (global:registered_names() lists them)">>}
    end;
processes({via, Module, Name}) when is_atom(Module) ->
    case caught(fun() -> Module:whereis_name(Name) end) of
        Pid when is_pid(Pid), node(Pid) =:= node() -> {ok, [Pid]};
        Pid when is_pid(Pid) -> {error, io_lib:format("registered on ~p: trace it there", [node(Pid)])};
        _ -> {error, [atom_to_list(Module), ":whereis_name/1 knows no process of that name"]}
    end;
processes({children, Sup}) when is_tuple(Sup), element(1, Sup) =/= global, element(1, Sup) =/= via ->
    {error, <<"{children, Sup} takes a supervisor's pid or name (an atom, {global, Name}, {via, Module, Name})">>};
processes({children, Sup}) ->
    case processes(Sup) of
        {ok, [Pid]} ->
            case is_supervisor(Pid) of
                true -> tree(Pid);
                false -> {error, [pid_to_list(Pid), " is not a supervisor (started by ", started_by(Pid),
                                  "): {children, Sup} takes a supervisor's pid or name"]}
            end;
        {error, _} = Error ->
            Error
    end;
processes({application, App}) when is_atom(App) ->
    Running = [A || {A, _, _} <- catch_list(fun() -> application:which_applications(?WHICH_CHILDREN_MS) end)],
    case lists:member(App, Running) of
        true ->
            Master = application_controller:get_master(App),
            case [P || P <- erlang:processes(), P =/= Master,
                       erlang:process_info(P, group_leader) =:= {group_leader, Master}] of
                [] -> {error, [atom_to_list(App), " runs no process of its own (a library application)"]};
                Pids -> {ok, Pids}
            end;
        false ->
            {error, [atom_to_list(App), " is not a running application", did_you_mean(App, Running),
                     " (application:which_applications() lists them)"]}
    end;
processes({initial_call, {M, F, A}} = Form) when is_atom(M), is_atom(F),
                                                 (A =:= '_' orelse (is_integer(A) andalso A >= 0 andalso A =< 255)) ->
    case [P || P <- erlang:processes(), started_in(P, M, F, A)] of
        [] -> {error, io_lib:format("no process was started in ~tp now", [element(2, Form)])};
        Pids -> {ok, Pids}
    end;
processes(Text) when is_list(Text) ->
    try list_to_pid(Text) of
        Pid -> live(Pid, [" (", Text, ")"])
    catch error:badarg ->
            case io_lib:printable_unicode_list(Text) of
                true -> {error, [<<"a pid as the shell prints it (\"<0.123.0>\"); a registered name is an atom">>]};
                false -> {error, ?ACCEPTED}
            end
    end;
processes(_Other) ->
    {error, ?ACCEPTED}.

live(Pid, Written) ->
    case node(Pid) =:= node() andalso is_process_alive(Pid) of
        true -> {ok, [Pid]};
        false when node(Pid) =/= node() -> {error, [pid_to_list(Pid), Written, " is a process of another node"]};
        false -> {error, [pid_to_list(Pid), Written, " is not alive"]}
    end.

did_you_mean(Key, Names) ->
    case ferrotrace_hint:nearest(Key, [atom_to_list(N) || N <- Names]) of
        none -> "";
        Name -> [": did you mean ", Name, "?"]
    end.

%% What `Fun' returns, or `failed' where it raises.
caught(Fun) ->
    try Fun()
    catch _:_ -> failed
    end.

catch_list(Fun) ->
    try Fun()
    catch _:_ -> []
    end.

%% A supervisor: started by proc_lib as one (`$initial_call'), or a supervisor_bridge.
is_supervisor(Pid) ->
    case initial_call(Pid) of
        {supervisor, _, _} -> true;
        {supervisor_bridge, _, _} -> true;
        _ -> false
    end.

started_by(Pid) ->
    case initial_call(Pid) of
        {M, F, A} -> io_lib:format("~tp:~tp/~p", [M, F, A]);
        _ -> "unknown"
    end.

started_in(Pid, M, F, A) ->
    case initial_call(Pid) of
        {M, F, Arity} -> A =:= '_' orelse A =:= Arity;
        _ -> false
    end.

%% proc_lib's `$initial_call' (the function a gen_server, a supervisor... was started in),
%% else the process's own initial call; `undefined' for a process gone.
initial_call(Pid) ->
    case dictionary_initial_call(Pid) of
        {M, F, A} when is_atom(M), is_atom(F), is_integer(A) ->
            {M, F, A};
        _ ->
            case erlang:process_info(Pid, initial_call) of
                {initial_call, {M, F, A}} -> {M, F, A};
                _ -> undefined
            end
    end.

%% Read alone where the VM can (OTP 26.2 and later), else from the whole dictionary.
%% (Through apply/3: OTP 25's spec of process_info/2 has no `{dictionary, Key}'.)
dictionary_initial_call(Pid) ->
    try apply(erlang, process_info, [Pid, {dictionary, '$initial_call'}]) of
        {{dictionary, '$initial_call'}, Value} -> Value;
        _ -> undefined
    catch error:badarg ->
            case erlang:process_info(Pid, dictionary) of
                {dictionary, Dictionary} -> proplists:get_value('$initial_call', Dictionary);
                _ -> undefined
            end
    end.

%% A supervisor and every process under it: `{ok, Pids}' or `{error, Hint}'.
tree(Sup) ->
    case tree([Sup], ?MAX_DEPTH, []) of
        {ok, Pids} -> {ok, lists:usort(Pids)};
        {error, _} = Error -> Error
    end.

tree([], _Depth, Acc) ->
    {ok, Acc};
tree(_Sups, 0, _Acc) ->
    {error, io_lib:format("supervisors nest deeper than ~b", [?MAX_DEPTH])};
tree([Sup | Rest], Depth, Acc) ->
    case which_children(Sup) of
        {ok, Children} ->
            Workers = [P || {_, P, worker, _} <- Children, is_pid(P)],
            Sups = [P || {_, P, supervisor, _} <- Children, is_pid(P)],
            case tree(Sups, Depth - 1, []) of
                {ok, Under} -> tree(Rest, Depth, [Sup | Workers ++ Under ++ Acc]);
                {error, _} = Error -> Error
            end;
        {error, _} = Error ->
            Error
    end.

%% supervisor:which_children/1 waits for as long as the supervisor takes: asked here by a
%% process beside, for at most ?WHICH_CHILDREN_MS (a supervisor busy restarting, or a
%% process that only looked like one).
which_children(Sup) ->
    Caller = self(),
    Ref = make_ref(),
    {Pid, Monitor} = spawn_monitor(fun() -> Caller ! {Ref, caught(fun() -> supervisor:which_children(Sup) end)} end),
    receive
        {Ref, Children} when is_list(Children) ->
            erlang:demonitor(Monitor, [flush]),
            {ok, Children};
        {Ref, _} ->
            erlang:demonitor(Monitor, [flush]),
            {error, [pid_to_list(Sup), " did not answer as a supervisor"]};
        {'DOWN', Monitor, process, Pid, _} ->
            {error, [pid_to_list(Sup), " did not answer as a supervisor"]}
    after ?WHICH_CHILDREN_MS ->
            exit(Pid, kill),
            erlang:demonitor(Monitor, [flush]),
            receive {Ref, _} -> ok after 0 -> ok end,
            {error, io_lib:format("~s did not list its children within ~b ms", [pid_to_list(Sup), ?WHICH_CHILDREN_MS])}
    end.
