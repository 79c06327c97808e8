%%% @doc The part of `ferrotrace attach' that runs on the attached node: loads ferrotrace
%%% there, guards it while clients hold it, and unloads it leaving nothing behind.
%%%
%%% Not part of the ferrotrace application: the bundle (`make bundle') carries it, and the
%%% escript (`ferrotrace_attach') loads it on the node with `code:load_binary/3', like every
%%% ferrotrace module, the node's code path untouched.
%%%
%%% <ul>
%%% <li>{@link attach/1}: the NIF's bytes are written to a new directory of mode 0700 with an
%%% unguessable name under the node's temporary directory, `ferrotrace_tracer' is loaded
%%% with the file name `Dir/ebin/ferrotrace_tracer.beam' (its on_load looks for the library
%%% in `Dir/priv', as beside an installed ebin), and the directory is removed as soon as the
%%% load returns: the library stays mapped, no file stays. Then the other modules and the
%%% application's spec (`application:load/1', so that `ferrotrace' finds its module list).
%%% A failure undoes every step.</li>
%%% <li>A guard process (registered `ferrotrace_attach_guard') monitors the clients that
%%% hold ferrotrace here (each `ferrotrace attach' or one-shot command that loaded or
%%% reused it, but `--keep'); when the last one leaves or goes down, it unloads.</li>
%%% <li>{@link detach/0} and the guard unload the same way: every session released, every
%%% ferrotrace module deleted and purged (purging `ferrotrace_tracer' unmaps the library;
%%% the purge ends any process still running ferrotrace code), ferrotrace's persistent terms
%%% erased, the application spec unloaded. This module itself is removed by the caller
%%% (the escript) or, when the guard unloads, by a process running only OTP code.</li>
%%% </ul>
-module(ferrotrace_attach_node).

-export([attach/1, info/0, hold/1, leave/1, detach/0]).

-define(GUARD, ferrotrace_attach_guard).
-define(TRACER, ferrotrace_tracer).
-define(CALL_TIMEOUT, 60000).

-type plan() :: #{version := string(), modules := [{module(), binary()}], nif := binary(),
                  app := tuple(), token := string(), holder := pid() | none}.
-type report() :: #{sessions := non_neg_integer(), modules := non_neg_integer()}.
-export_type([plan/0, report/0]).

%% @doc Loads ferrotrace from `Plan' (see the module doc) and starts the guard, with
%% `holder' as its first client (or none, for `--keep'). `{error, already_attached}' when
%% a guard runs; `{error, {nif, [{Dir, Reason}]}}' when the library loads from no directory.
-spec attach(plan()) -> {ok, string()} | {error, term()}.
attach(#{version := Version, modules := Modules, nif := Nif, app := App, token := Token,
         holder := Holder}) ->
    case whereis(?GUARD) of
        undefined ->
            %% The spec first: the tracer's on_load reads `nif_dir' from its env.
            _ = application:load(App),
            case load_tracer(proplists:get_value(?TRACER, Modules), Nif, Token) of
                {ok, Dir} ->
                    Rest = [{M, B} || {M, B} <- Modules, M =/= ?TRACER],
                    case load_rest(Rest, Dir) of
                        ok ->
                            start_guard(Version, Holder),
                            {ok, Dir};
                        {error, _} = Error ->
                            _ = unload(),
                            Error
                    end;
                {error, _} = Error ->
                    _ = application:unload(ferrotrace),
                    Error
            end;
        _ ->
            {error, already_attached}
    end.

%% @doc The attached version and its number of clients; `not_attached' without a guard.
-spec info() -> #{version := string(), holders := non_neg_integer()} | not_attached.
info() ->
    guard_call(info, not_attached).

%% @doc Adds `Client' to the processes that hold ferrotrace here.
-spec hold(pid()) -> ok | not_attached.
hold(Client) ->
    guard_call({hold, Client}, not_attached).

%% @doc `Client' leaves: when no client is left, ferrotrace is unloaded (`{detached,
%% Report}'); else `{kept, Clients}'.
-spec leave(pid()) -> {detached, report()} | {kept, non_neg_integer()} | not_attached.
leave(Client) ->
    guard_call({leave, Client}, not_attached).

%% @doc Unloads ferrotrace now, whoever holds it.
-spec detach() -> {detached, report()}.
detach() ->
    case guard_call(detach, not_attached) of
        not_attached -> {detached, unload()};
        Detached -> Detached
    end.

%%--------------------------------------------------------------------------------------
%% Loading

load_tracer(undefined, _Nif, _Token) ->
    {error, {missing_module, ?TRACER}};
load_tracer(Beam, Nif, Token) ->
    load_tracer(Beam, Nif, Token, temp_dirs(), []).

load_tracer(_Beam, _Nif, _Token, [], Failures) ->
    {error, {nif, lists:reverse(Failures)}};
load_tracer(Beam, Nif, Token, [Base | Bases], Failures) ->
    Dir = filename:join(Base, "ferrotrace-nif-" ++ Token),
    case private_dir(Dir) of
        ok ->
            Result = try write_and_load(Dir, Beam, Nif)
                     after remove_dir(Dir)
                     end,
            case Result of
                ok -> {ok, Dir};
                {error, Reason} -> load_tracer(Beam, Nif, Token, Bases, [{Dir, Reason} | Failures])
            end;
        {error, Reason} ->
            load_tracer(Beam, Nif, Token, Bases, [{Dir, Reason} | Failures])
    end.

%% TMPDIR, /tmp, /dev/shm, /var/tmp: a later one where an earlier is missing, read-only or
%% mounted noexec (the library then fails to map).
temp_dirs() ->
    Env = case os:getenv("TMPDIR") of
              false -> [];
              "" -> [];
              T -> [T]
          end,
    lists:usort(fun(A, B) -> A =/= B end, Env ++ ["/tmp", "/dev/shm", "/var/tmp"]).

%% A new directory (never one that exists: make_dir fails on any existing name), then mode
%% 0700, then checked: a directory, not a link, with that mode.
private_dir(Dir) ->
    case file:make_dir(Dir) of
        ok ->
            case {file:change_mode(Dir, 8#700), file:read_link_info(Dir)} of
                {ok, {ok, {file_info, _, directory, _, _, _, _, Mode, _, _, _, _, _, _}}}
                  when Mode band 8#777 =:= 8#700 ->
                    ok;
                Other ->
                    remove_dir(Dir),
                    {error, {not_private, Other}}
            end;
        {error, _} = Error ->
            Error
    end.

write_and_load(Dir, Beam, Nif) ->
    Priv = filename:join(Dir, "priv"),
    Lib = filename:join(Priv, "libferrotrace_nif.so"),
    ok = file:make_dir(Priv),
    case file:write_file(Lib, Nif, [exclusive, raw]) of
        ok ->
            File = filename:join([Dir, "ebin", atom_to_list(?TRACER) ++ ".beam"]),
            ok = application:set_env(ferrotrace, nif_dir, Priv),
            Loaded = code:load_binary(?TRACER, File, Beam),
            ok = application:unset_env(ferrotrace, nif_dir),
            case Loaded of
                {module, ?TRACER} ->
                    ok;
                {error, on_load_failure} ->
                    Key = {?TRACER, nif_load_failure},
                    Reason = persistent_term:get(Key, on_load_failure),
                    _ = Reason =/= on_load_failure andalso persistent_term:erase(Key),
                    {error, Reason};
                {error, _} = Error ->
                    Error
            end;
        {error, _} = Error ->
            Error
    end.

remove_dir(Dir) ->
    _ = file:delete(filename:join([Dir, "priv", "libferrotrace_nif.so"])),
    _ = file:del_dir(filename:join(Dir, "priv")),
    _ = file:del_dir(Dir),
    ok.

load_rest([], _Dir) ->
    ok;
load_rest([{Module, Beam} | Rest], Dir) ->
    File = filename:join([Dir, "ebin", atom_to_list(Module) ++ ".beam"]),
    case code:load_binary(Module, File, Beam) of
        {module, Module} -> load_rest(Rest, Dir);
        {error, Reason} -> {error, {load, Module, Reason}}
    end.

%%--------------------------------------------------------------------------------------
%% Unloading

%% Every session released, then every ferrotrace module but this one deleted and purged.
unload() ->
    Sessions = case erlang:module_loaded(ferrotrace) of
                   true -> [release(S) || S <- safe_list()];
                   false -> []
               end,
    %% Its processes (the registry, keepers) may wait in OTP code (gen_server's loop),
    %% which a purge does not count as using ferrotrace's: ended here.
    Procs = [P || P <- processes(), P =/= self(), ours(P)],
    lists:foreach(fun(P) -> exit(P, kill) end, Procs),
    Modules = [M || {M, _} <- code:all_loaded(), M =/= ?MODULE, own(M)]
        ++ [M || M <- old_modules(), M =/= ?MODULE],
    %% The tracer last: purging it runs the library's unload callback, which stops any
    %% session still in the engine.
    {Tracer, Others} = lists:partition(fun(M) -> M =:= ?TRACER end, lists:usort(Modules)),
    lists:foreach(fun(M) -> _ = code:purge(M), _ = code:delete(M), _ = code:purge(M) end,
                  Others ++ Tracer),
    [persistent_term:erase(K) || {K, _} <- persistent_term:get(), own_key(K)],
    _ = application:unload(ferrotrace),
    #{sessions => length(Sessions), modules => length(lists:usort(Modules))}.

safe_list() ->
    try ferrotrace:list() of
        List -> [Id || #{id := Id} <- List]
    catch
        _:_ -> []
    end.

release(Id) ->
    try ferrotrace:release(Id)
    catch _:_ -> error
    end.

ours(Pid) ->
    case process_info(Pid, [registered_name, current_function, dictionary]) of
        [{registered_name, Name}, {current_function, {M, _, _}}, {dictionary, D}] ->
            (is_atom(Name) andalso own(Name)) orelse (M =/= ?MODULE andalso own(M))
                orelse case lists:keyfind('$initial_call', 1, D) of
                           {_, {I, _, _}} -> own(I);
                           _ -> false
                       end;
        _ ->
            false
    end.

own(Module) ->
    lists:prefix("ferrotrace", atom_to_list(Module)).

%% Modules with old code left (deleted but not purged).
old_modules() ->
    [M || M <- erlang:loaded(), own(M), erlang:check_old_code(M)].

own_key(Key) when is_atom(Key) -> own(Key);
own_key(Key) when is_tuple(Key), tuple_size(Key) > 0, is_atom(element(1, Key)) -> own(element(1, Key));
own_key(_) -> false.

%%--------------------------------------------------------------------------------------
%% The guard

start_guard(Version, Holder) ->
    Parent = self(),
    Pid = spawn(fun() ->
                        process_flag(priority, high),
                        true = register(?GUARD, self()),
                        Parent ! {?GUARD, ready},
                        guard(#{version => Version, holders => #{}}, monitor_holder(Holder, #{}))
                end),
    receive {?GUARD, ready} -> Pid after 5000 -> Pid end.

monitor_holder(none, Holders) -> Holders;
monitor_holder(Pid, Holders) -> Holders#{monitor(process, Pid) => Pid}.

guard(State, Holders) ->
    receive
        {call, From, Ref, Request} ->
            case handle(Request, State, Holders) of
                {reply, Reply, Holders1} ->
                    From ! {Ref, Reply},
                    guard(State, Holders1);
                {stop, Reply} ->
                    unregister(?GUARD),
                    From ! {Ref, Reply}
            end;
        {'DOWN', Ref, process, _, _} when is_map_key(Ref, Holders) ->
            case maps:remove(Ref, Holders) of
                Left when map_size(Left) =:= 0 ->
                    %% The last client went away without leaving (killed, its node down):
                    %% unload, then remove this module with OTP code only.
                    _ = unload(),
                    unregister(?GUARD),
                    _ = code:delete(?MODULE),
                    _ = spawn(code, purge, [?MODULE]),
                    ok;
                Left ->
                    guard(State, Left)
            end;
        _ ->
            guard(State, Holders)
    end.

handle(info, #{version := Version}, Holders) ->
    {reply, #{version => Version, holders => map_size(Holders)}, Holders};
handle({hold, Pid}, _State, Holders) ->
    {reply, ok, monitor_holder(Pid, Holders)};
handle({leave, Pid}, _State, Holders) ->
    Left = maps:filter(fun(Ref, P) when P =:= Pid -> not demonitor(Ref, [flush]);
                          (_, _) -> true
                       end, Holders),
    case map_size(Left) of
        0 -> {stop, {detached, unload()}};
        N -> {reply, {kept, N}, Left}
    end;
handle(detach, _State, _Holders) ->
    {stop, {detached, unload()}}.

guard_call(Request, Default) ->
    case whereis(?GUARD) of
        undefined ->
            Default;
        Pid ->
            Ref = monitor(process, Pid),
            Pid ! {call, self(), Ref, Request},
            receive
                {Ref, Reply} -> demonitor(Ref, [flush]), Reply;
                {'DOWN', Ref, process, _, _} -> Default
            after ?CALL_TIMEOUT ->
                    demonitor(Ref, [flush]),
                    Default
            end
    end.
