%%% @doc The `ferrotrace' bundle's entry point (`make bundle' writes the escript
%%% `_build/bundle/ferrotrace'): ferrotrace on any running node, over distribution.
%%%
%%% ```
%%% ferrotrace attach NODE [--keep]                 load ferrotrace, open a remote shell
%%% ferrotrace calls NODE SPEC [--for 10s] [--options TERM] [--json] [--save FILE] [--serve [IP:]PORT]
%%% ferrotrace compare A.json B.json [--options TERM] [--collapsed F] [--html F]   no node
%%% ferrotrace status NODE                          loaded or not, version, sessions
%%% ferrotrace detach NODE                          stop its sessions, unload, check
%%% ferrotrace version
%%% options of every NODE command: --cookie C | --cookie-file F
%%% '''
%%% Not part of the ferrotrace application: it is the operator's side (connecting, the checks
%%% made before anything is loaded, the commands' output); `ferrotrace_attach_node' is the
%%% node's side. A refusal is one line on stderr and exit status 1, with nothing left on the
%%% node. The escript runs with `+Bi' and `-noinput': the remote shell is a child `erl
%%% -remsh' on the same terminal, whose Ctrl-C must not end this VM (Ctrl-G q leaves it).
-module(ferrotrace_attach).

-export([main/1]).

-define(NODE_MOD, ferrotrace_attach_node).
-define(RPC_TIMEOUT, 60000).

%% @doc The escript's entry: runs one command and halts with its status.
-spec main([string()]) -> no_return().
main(Args) ->
    %% A closed terminal ends this VM (the guard on the node then unloads).
    ok = os:set_signal(sighup, default),
    %% Our own one-line messages only (a failed first try at a long name logs reports).
    ok = logger:set_primary_config(level, none),
    Status = try command(Args) of
                 ok -> 0
             catch
                 throw:{refused, Text} ->
                     io:format(standard_error, "ferrotrace: ~ts~n", [Text]),
                     1;
                 Class:Reason:Stack ->
                     io:format(standard_error, "ferrotrace: internal error: ~0p~n",
                               [{Class, Reason, lists:sublist(Stack, 2)}]),
                     2
             end,
    erlang:halt(Status).

-spec refuse(io:format(), [term()]) -> no_return().
refuse(Format, Args) ->
    Text = re:replace(io_lib:format(Format, Args), "\\s*\\n\\s*", " ", [global, unicode, {return, list}]),
    throw({refused, Text}).

%%--------------------------------------------------------------------------------------
%% Commands

command(["version" | _]) ->
    %% Only the meta file read from the archive: no beam, no NIF, no distribution.
    #{version := V, system_architecture := Arch, glibc := Glibc} = meta(archive(["ferrotrace/bundle.meta"])),
    io:format("ferrotrace ~s (NIF for ~s, glibc ~s or later)~n", [V, Arch, Glibc]);
command(["attach", Node | Rest]) ->
    Opts = options(Rest, [keep]),
    %% erl -remsh without a terminal would start a shell on its own node.
    match =:= re:run(tty(), "^/dev/(pts/|tty)", [{capture, none}])
        orelse refuse("attach needs a terminal (stdin is ~s): in scripts use calls, status, detach", [tty()]),
    N = connect(Node, Opts),
    How = ensure(N, Opts),
    shell(N, Opts),
    finish(N, How, Opts);
command(["calls", Node, Spec | Rest]) ->
    Opts = options(Rest, [keep, for, json, options, pids, save, serve]),
    %% Refused before anything is loaded there.
    _ = maps:get(for, Opts, 0) =:= infinity andalso not is_map_key(serve, Opts)
        andalso refuse("--for infinity needs --serve: a one-shot's report comes at its end", []),
    %% Parsed here, then checked on the node over plain rpc: a refusal loads nothing there.
    ok = bundle_path(),
    Extra = scoped(extra(Opts, "calls/2"), Opts),
    Parsed = case ferrotrace_spec:parse(spec(Spec)) of
                 {ok, P} -> [{M, F, A} || {M, F, A, _} <- P];
                 {error, Bad} -> refuse("calls: ~ts", [reason_text(Bad)])
             end,
    N = connect(Node, Opts),
    Scope = maps:get(scope, Extra, local),
    Checked = try ferrotrace_exists:check(Parsed, Scope, ferrotrace_exists:remote(N, ?RPC_TIMEOUT))
              catch Class:Reason -> refuse("~s: checking the spec there failed: ~p", [N, {Class, Reason}])
              end,
    _ = Checked =:= ok
        orelse refuse("calls: ~ts (on ~s; nothing was loaded there)", [reason_text(element(2, Checked)), N]),
    How = ensure(N, Opts),
    try one_shot(N, spec(Spec), Extra, Opts)
    after finish(N, How, Opts)
    end;
command(["compare", A, B | Rest]) ->
    compare(A, B, options(Rest, [options, collapsed, html]));
command(["status", Node | Rest]) ->
    N = connect(Node, options(Rest, [])),
    case presence(N) of
        none -> io:format("~s: ferrotrace is not loaded~n", [N]);
        {partial, Mods} -> io:format("~s: ferrotrace modules loaded by another tool: ~p~n", [N, Mods]);
        {attached, V, Holders} ->
            io:format("~s: ferrotrace ~s attached (~b client~s holding it)~n",
                      [N, V, Holders, plural(Holders)]),
            sessions(N);
        {release, V, Path} ->
            io:format("~s: ferrotrace ~s is part of the node's release (~s)~n", [N, V, Path]),
            sessions(N)
    end;
command(["detach", Node | Rest]) ->
    N = connect(Node, options(Rest, [])),
    case presence(N) of
        {attached, _, _} -> detached(N, rpc(N, ?NODE_MOD, detach, []));
        {release, V, Path} ->
            refuse("ferrotrace ~s is part of ~s's release (~s): nothing to detach; stop its "
                   "sessions with ferrotrace:stop/1", [V, N, Path]);
        {partial, Mods} ->
            refuse("~s has ferrotrace modules that no bundle loaded (~p): not touching them", [N, Mods]);
        none ->
            io:format("~s: ferrotrace is not loaded; nothing to detach~n", [N]),
            findings(N)
    end;
command(_) ->
    io:put_chars(standard_error, usage()),
    refuse("expected a command: attach, calls, compare, status, detach or version", []).

tty() ->
    case file:read_link("/proc/self/fd/0") of
        {ok, Path} -> Path;
        {error, _} -> "unknown"
    end.

usage() ->
    "usage: ferrotrace attach NODE [--keep]\n"
    "       ferrotrace calls NODE SPEC [--for 10s] [--pids TERM] [--options TERM] [--json] [--save FILE] [--keep]\n"
    "                                  [--serve [IP:]PORT]\n"
    "       (--pids: order_router, '{children, shop_sup}', '{application, shop}', '<0.123.0>', a list of them)\n"
    "       (--serve: Prometheus scrapes the session there while it runs; --for infinity with it)\n"
    "       ferrotrace compare A.json B.json [--options TERM] [--collapsed FILE] [--html FILE]\n"
    "         (files written by --save or ferrotrace:save/2; no node needed)\n"
    "       ferrotrace status NODE | detach NODE | version\n"
    "       NODE as name@host (short or long names as erl tells them apart);\n"
    "       --cookie C or --cookie-file F (default ~/.erlang.cookie); ERL_EPMD_PORT is honoured\n".

%% `--name value' and `--flag' options, only those the command takes.
options(Args, Takes) ->
    options(Args, Takes, #{}).

options([], _Takes, Acc) -> Acc;
options(["--cookie", C | Rest], T, Acc) -> options(Rest, T, Acc#{cookie => C});
options(["--cookie-file", F | Rest], T, Acc) -> options(Rest, T, Acc#{cookie => read_cookie(F)});
options(["--keep" | Rest], T, Acc) -> taken(keep, T), options(Rest, T, Acc#{keep => true});
options(["--json" | Rest], T, Acc) -> taken(json, T), options(Rest, T, Acc#{json => true});
options(["--for", D | Rest], T, Acc) -> taken(for, T), options(Rest, T, Acc#{for => duration(D)});
options(["--options", O | Rest], T, Acc) -> taken(options, T), options(Rest, T, Acc#{options => term(O)});
options(["--pids", P | Rest], T, Acc) -> taken(pids, T), options(Rest, T, Acc#{pids => pids(P)});
options(["--serve", S | Rest], T, Acc) -> taken(serve, T), options(Rest, T, Acc#{serve => serve(S)});
options(["--save", F | Rest], T, Acc) ->
    taken(save, T),
    string:lowercase(filename:extension(F)) =:= ".json" orelse refuse("--save ~ts: a file name ending in .json", [F]),
    options(Rest, T, Acc#{save => F});
options(["--collapsed", F | Rest], T, Acc) -> taken(collapsed, T), options(Rest, T, Acc#{collapsed => F});
options(["--html", F | Rest], T, Acc) -> taken(html, T), options(Rest, T, Acc#{html => F});
options([Other | _], _, _) ->
    refuse("unknown argument ~ts (accepted: --cookie C, --cookie-file F, --keep, --for, "
           "--options, --pids, --json, --save, --serve, --collapsed, --html, where the command takes them)", [Other]).

taken(Option, Takes) ->
    lists:member(Option, Takes) orelse refuse("--~s is not an option of this command", [Option]).

read_cookie(File) ->
    case file:read_file(File) of
        {ok, Bin} ->
            case string:trim(binary_to_list(Bin)) of
                "" -> refuse("cookie file ~ts is empty", [File]);
                Cookie -> Cookie
            end;
        {error, Reason} ->
            refuse("cannot read cookie file ~ts: ~s (run as its owner, or as root)",
                   [File, file:format_error(Reason)])
    end.

%% `--serve 9568' or `--serve 10.0.0.5:9568': calls/2's `metrics' option.
serve(Text) ->
    case re:run(Text, "^(?:(.+):)?([0-9]+)$", [{capture, all_but_first, list}]) of
        {match, ["", Port]} -> #{port => list_to_integer(Port)};
        {match, [Ip, Port]} -> #{port => list_to_integer(Port), ip => Ip};
        _ -> refuse("--serve ~ts: expected a port (9568) or an address and a port (10.0.0.5:9568)", [Text])
    end.

%% 10s, 500ms, 2m, 1h, or milliseconds; `infinity' (with --serve).
duration("infinity") -> infinity;
duration(Text) ->
    case re:run(Text, "^([0-9]+)(ms|s|m|h)?$", [{capture, all_but_first, list}]) of
        {match, [N]} -> list_to_integer(N);
        {match, [N, "ms"]} -> list_to_integer(N);
        {match, [N, "s"]} -> list_to_integer(N) * 1000;
        {match, [N, "m"]} -> list_to_integer(N) * 60000;
        {match, [N, "h"]} -> list_to_integer(N) * 3600000;
        _ -> refuse("--for ~ts: expected a duration such as 10s, 500ms, 2m", [Text])
    end.

%% `--pids': the processes to trace as the `pids' option names them (a pid as the shell
%% prints it, "<0.123.0>", is taken as that text; anything else as an Erlang term:
%% order_router, '{children, shop_sup}', '[{application, shop}, router]').
pids("<" ++ _ = Text) -> Text;
pids(Text) -> term(Text).

%% `--pids' beside `--options': one of the two names the processes.
scoped(Extra, #{pids := _}) when is_map_key(pids, Extra) ->
    refuse("--pids and --options #{pids => ...} both name the processes: give one", []);
scoped(Extra, #{pids := Pids}) ->
    Extra#{pids => Pids};
scoped(Extra, _Opts) ->
    Extra.

term(Text) ->
    case erl_scan:string(Text ++ ".") of
        {ok, Tokens, _} ->
            case erl_parse:parse_term(Tokens) of
                {ok, Term} -> Term;
                {error, _} -> refuse("not an Erlang term: ~ts", [Text])
            end;
        _ ->
            refuse("not an Erlang term: ~ts", [Text])
    end.

%% A spec as typed ("m:f/2", "Elixir.Mod.f/1") goes to ferrotrace as a string; a tuple or
%% a list ({m, f, '_'}) as the term.
spec([C | _] = Text) when C =:= ${; C =:= $[ -> term(Text);
spec(Text) -> Text.

plural(1) -> "";
plural(_) -> "s".

%%--------------------------------------------------------------------------------------
%% Connecting, as erl does

connect(Node0, Opts) ->
    {Name, Host} = case string:split(Node0, "@") of
                       [N, H] when N =/= "", H =/= "" -> {N, H};
                       [N] when N =/= "" -> {N, hd(string:split(element(2, inet:gethostname()), "."))};
                       _ -> refuse("~ts: expected a node name, name@host", [Node0])
                   end,
    Node = list_to_atom(Name ++ "@" ++ Host),
    Domain = case lists:member($., Host) of
                 true -> longnames;
                 false -> shortnames
             end,
    start_dist(Domain),
    _ = [erlang:set_cookie(list_to_atom(C)) || #{cookie := C} <- [Opts]],
    case net_kernel:connect_node(Node) of
        true -> Node;
        _ -> refuse("~s", [unreachable(Name, Host, Domain)])
    end.

start_dist(Domain) ->
    Own = "ferrotrace_" ++ os:getpid() ++ "_" ++ integer_to_list(erlang:unique_integer([positive])),
    Try = fun(Name) -> net_kernel:start(list_to_atom(Name), #{name_domain => Domain, hidden => true}) end,
    case Try(Own) of
        {ok, _} -> ok;
        {error, _} when Domain =:= longnames ->
            case Try(Own ++ "@127.0.0.1") of
                {ok, _} -> ok;
                {error, R} -> refuse("cannot start distribution (long names): ~p", [R])
            end;
        {error, R} ->
            refuse("cannot start distribution (is epmd running? erl starts it): ~p", [R])
    end.

unreachable(Name, Host, Domain) ->
    Port = case os:getenv("ERL_EPMD_PORT") of
               false -> "4369";
               P -> P
           end,
    case erl_epmd:names(Host) of
        {ok, Names} ->
            case lists:keymember(Name, 1, Names) of
                true ->
                    io_lib:format("~s@~s refused the connection: wrong cookie? (--cookie C or "
                                  "--cookie-file F; ~s names here)", [Name, Host, Domain]);
                false ->
                    io_lib:format("no node named ~s on ~s (epmd there, port ~s, lists: ~ts)",
                                  [Name, Host, Port, lists:join(", ", [N || {N, _} <- Names])])
            end;
        {error, Reason} ->
            io_lib:format("cannot reach epmd on ~s, port ~s (~p): is the node running?",
                          [Host, Port, Reason])
    end.

rpc(Node, M, F, A) ->
    try erpc:call(Node, M, F, A, ?RPC_TIMEOUT)
    catch
        Class:Reason -> refuse("~s: ~s:~s failed: ~p", [Node, M, F, {Class, Reason}])
    end.

%%--------------------------------------------------------------------------------------
%% What is there, the checks, loading

presence(Node) ->
    case rpc(Node, erlang, module_loaded, [?NODE_MOD]) of
        true ->
            case rpc(Node, ?NODE_MOD, info, []) of
                #{version := V, holders := H} -> {attached, V, H};
                not_attached -> {attached, "(unknown: its guard is gone)", 0}
            end;
        false ->
            case rpc(Node, code, which, [ferrotrace]) of
                Path when is_list(Path) -> {release, release_version(Path), Path};
                _ ->
                    case [M || M <- rpc(Node, erlang, loaded, []),
                               lists:prefix("ferrotrace", atom_to_list(M))] of
                        [] -> none;
                        Mods -> {partial, Mods}
                    end
            end
    end.

release_version(Path) ->
    case re:run(Path, "ferrotrace-([^/]+)/ebin", [{capture, all_but_first, list}]) of
        {match, [V]} -> V;
        nomatch -> "(version unknown)"
    end.

%% How ferrotrace is there for this command: `loaded' here, `reused' (attached before, by a
%% bundle of this version), or `release'.
ensure(Node, Opts) ->
    Bundle = bundle(),
    #{version := Ours} = meta(Bundle),
    Holder = case Opts of
                 #{keep := true} -> none;
                 _ -> self()
             end,
    case presence(Node) of
        {attached, Ours, _} ->
            _ = Holder =:= none orelse rpc(Node, ?NODE_MOD, hold, [Holder]),
            io:format(standard_error, "ferrotrace ~s is attached to ~s already: using it~n", [Ours, Node]),
            reused;
        {attached, Theirs, _} ->
            refuse("~s has ferrotrace ~s attached; this bundle is ~s: use that version's bundle, "
                   "or `ferrotrace detach ~s' first (it stops the sessions running there)",
                   [Node, Theirs, Ours, Node]);
        {release, V, Path} ->
            io:format(standard_error, "ferrotrace ~s is part of ~s's release (~s): using it as it is~n", [V, Node, Path]),
            release;
        {partial, Mods} ->
            refuse("~s has ferrotrace modules that no bundle loaded (~p): not loading over them", [Node, Mods]);
        none ->
            check(Node, meta(Bundle)),
            load(Node, Bundle, Holder),
            loaded
    end.

check(Node, #{system_architecture := Ours, glibc_needs := Needs}) ->
    Release = rpc(Node, erlang, system_info, [otp_release]),
    list_to_integer(Release) >= 25
        orelse refuse("~s runs Erlang/OTP ~s; ferrotrace needs OTP 25 or later", [Node, Release]),
    Theirs = rpc(Node, erlang, system_info, [system_architecture]),
    Key = fun(Arch) -> [Cpu | More] = string:split(Arch, "-", all),
                       {Cpu, lists:any(fun(P) -> string:prefix(P, "linux") =/= nomatch end, More)}
          end,
    Key(Theirs) =:= Key(Ours)
        orelse refuse("~s runs on ~s; this bundle's NIF is built for ~s: build the bundle on such a "
                      "system (make bundle)", [Node, Theirs, Ours]),
    check_libc(Node, Needs).

%% The C library the node's VM has mapped must define every symbol version the NIF needs.
check_libc(Node, Needs) ->
    Maps = case rpc(Node, file, read_file, ["/proc/self/maps"]) of
               {ok, M} -> M;
               {error, R} -> refuse("~s: cannot read /proc/self/maps (~p) to check its C library", [Node, R])
           end,
    Paths = lists:usort([P || Line <- string:split(Maps, "\n", all),
                              [_ | _] = Fields <- [string:lexemes(binary_to_list(Line), " ")],
                              P <- [lists:last(Fields)],
                              lists:prefix("/", P),
                              re:run(filename:basename(P), "^(libc\\.so|libc-|ld-musl)") =/= nomatch]),
    Libc = case Paths of
               [P | _] -> P;
               [] -> refuse("~s: no C library found in its memory map", [Node])
           end,
    string:find(Libc, "musl") =:= nomatch
        orelse refuse("~s runs on musl (~s); this bundle's NIF needs glibc ~s or later",
                      [Node, Libc, lists:last(Needs)]),
    Bytes = case rpc(Node, file, read_file, [Libc]) of
                {ok, B} -> B;
                {error, R2} -> refuse("~s: cannot read its C library ~s (~p)", [Node, Libc, R2])
            end,
    Missing = [V || V <- Needs, binary:match(Bytes, <<0, (list_to_binary(V))/binary, 0>>) =:= nomatch],
    Missing =:= []
        orelse refuse("~s's C library (~s) is too old for this bundle's NIF, which needs ~s",
                      [Node, Libc, lists:join(", ", Missing)]).

load(Node, Files, Holder) ->
    #{version := Version} = meta(Files),
    {ok, LoaderBin} = file_of("ferrotrace_attach_node.beam", Files),
    {ok, AppBin} = file_of("ferrotrace/ebin/ferrotrace.app", Files),
    {application, ferrotrace, Keys} = term(string:trim(binary_to_list(AppBin), trailing, ".\n")),
    Own = proplists:get_value(modules, Keys, []),
    Modules = [{list_to_atom(filename:basename(F, ".beam")), B}
               || {F, B} <- Files, lists:prefix("ferrotrace/ebin/", F), filename:extension(F) =:= ".beam"],
    {ok, Nif} = file_of("ferrotrace/priv/libferrotrace_nif.so", Files),
    Plan = #{version => Version, modules => Modules, nif => Nif, holder => Holder, token => token(),
             %% This module listed too: ferrotrace never traces its own modules.
             app => {application, ferrotrace,
                     lists:keystore(vsn, 1, lists:keystore(modules, 1, Keys, {modules, [?NODE_MOD | Own]}),
                                    {vsn, Version})}},
    {module, _} = rpc(Node, code, load_binary, [?NODE_MOD, "ferrotrace-attach/ferrotrace_attach_node.beam", LoaderBin]),
    case rpc(Node, ?NODE_MOD, attach, [Plan]) of
        {ok, Dir} ->
            io:format(standard_error, "ferrotrace ~s loaded into ~s (~b modules; the NIF loaded from ~s, removed "
                      "from disk)~n", [Version, Node, length(Modules), Dir]);
        {error, Reason} ->
            remove_loader(Node),
            refuse("~s: ferrotrace could not be loaded, nothing left there: ~p", [Node, Reason])
    end.

token() ->
    Bytes = try crypto:strong_rand_bytes(16)
            catch error:_ -> rand:bytes(16)
            end,
    binary_to_list(binary:encode_hex(Bytes)).

remove_loader(Node) ->
    lists:foreach(fun(F) -> _ = rpc(Node, code, F, [?NODE_MOD]) end, [purge, delete, purge]).

%% After a command: this client leaves (the last one out unloads), unless --keep.
finish(_Node, release, _Opts) -> ok;
finish(Node, _How, #{keep := true}) ->
    io:format(standard_error, "ferrotrace stays loaded on ~s (--keep): `ferrotrace detach ~s' unloads it~n", [Node, Node]);
finish(Node, _How, _Opts) ->
    case rpc(Node, erlang, module_loaded, [?NODE_MOD]) of
        false ->
            io:format(standard_error, "ferrotrace was detached from ~s meanwhile~n", [Node]);
        true ->
            case rpc(Node, ?NODE_MOD, leave, [self()]) of
                {kept, N} -> io:format(standard_error, "ferrotrace stays on ~s: other clients hold it (~b)~n", [Node, N]);
                Detached -> detached(Node, Detached)
            end
    end.

detached(Node, {detached, #{sessions := S, modules := M}}) ->
    remove_loader(Node),
    io:format(standard_error, "detached from ~s: ~b session~s released, ~b modules unloaded~n", [Node, S, plural(S), M + 1]),
    findings(Node);
detached(Node, not_attached) ->
    io:format(standard_error, "ferrotrace was detached from ~s meanwhile~n", [Node]).

%%--------------------------------------------------------------------------------------
%% Nothing left: what the node has of ferrotrace now, each line a finding

findings(Node) ->
    {value, Found, _} = rpc(Node, erl_eval, exprs, [parse(nothing_left()), []]),
    Lines = [{Ok, io_lib:format("  ~-12s ~ts", [What, Text])} || {What, Ok, Text} <- Found],
    [io:format(standard_error, "~ts~n", [L]) || {_, L} <- Lines],
    case [W || {W, false, _} <- Found] of
        [] -> io:format(standard_error, "nothing of ferrotrace left on ~s~n", [Node]);
        Left -> refuse("~s still has: ~p", [Node, Left])
    end.

parse(Text) ->
    {ok, Tokens, _} = erl_scan:string(Text),
    {ok, Exprs} = erl_parse:parse_exprs(Tokens),
    Exprs.

%% Evaluated on the node by erl_eval: OTP code only, nothing loaded for it.
nothing_left() ->
    "Own = fun(A) -> is_atom(A) andalso lists:prefix(\"ferrotrace\", atom_to_list(A)) end,
     Loaded = [M || M <- erlang:loaded(), Own(M)],
     Old = [M || M <- erlang:loaded(), Own(M), erlang:check_old_code(M)],
     Mods = erlang:loaded(),
     Fns = [{M, F, A} || M <- Mods, {F, A} <- erlang:get_module_info(M, functions)],
     Patterns = [MFA || MFA <- Fns, erlang:trace_info(MFA, traced) =/= {traced, false}],
     Procs = processes(),
     Flags = [P || P <- Procs, case erlang:trace_info(P, flags) of {flags, []} -> false; undefined -> false; _ -> true end],
     New = element(2, erlang:trace_info(new, flags)),
     Ours = [P || P <- Procs, lists:any(fun({current_function, {M, _, _}}) -> Own(M);
                                           ({initial_call, {M, _, _}}) -> Own(M);
                                           ({registered_name, N}) -> Own(N);
                                           ({dictionary, D}) -> case lists:keyfind('$initial_call', 1, D) of
                                                                    {_, {M, _, _}} -> Own(M); _ -> false end;
                                           (_) -> false end,
                                        case process_info(P, [current_function, initial_call, registered_name, dictionary]) of
                                            undefined -> []; I -> I end)],
     {ok, Maps} = file:read_file(\"/proc/self/maps\"),
     Mapped = binary:matches(Maps, <<\"libferrotrace_nif\">>),
     Temp = lists:usort([D || D <- [os:getenv(\"TMPDIR\", \"/tmp\"), \"/tmp\", \"/dev/shm\", \"/var/tmp\"]]),
     Files = lists:append([filelib:wildcard(filename:join(D, \"ferrotrace-nif-*\")) || D <- Temp]),
     Tables = [T || T <- ets:all(), Own(T) orelse Own(ets:info(T, name))],
     Terms = [K || {K, _} <- persistent_term:get(), Own(K) orelse (is_tuple(K) andalso tuple_size(K) > 0 andalso Own(element(1, K)))],
     App = lists:keymember(ferrotrace, 1, application:loaded_applications()),
     F = fun(L) -> lists:flatten(io_lib:format(\"~0p\", [L])) end,
     [{modules, Loaded =:= [] andalso Old =:= [], \"loaded: \" ++ F(Loaded) ++ \", old code: \" ++ F(Old) ++ \" (of \" ++ integer_to_list(length(Mods)) ++ \" modules)\"},
      {processes, Ours =:= [], \"running or named ferrotrace: \" ++ F(Ours) ++ \" (of \" ++ integer_to_list(length(Procs)) ++ \")\"},
      {trace, Patterns =:= [] andalso Flags =:= [] andalso New =:= [],
       \"patterns on \" ++ F(Patterns) ++ \" (of \" ++ integer_to_list(length(Fns)) ++ \" functions), flags on \" ++ F(Flags) ++ \", on new processes: \" ++ F(New)},
      {library, Mapped =:= [], \"libferrotrace_nif in /proc/self/maps: \" ++ integer_to_list(length(Mapped)) ++ \" mappings\"},
      {files, Files =:= [], \"ferrotrace-nif-* under \" ++ F(Temp) ++ \": \" ++ F(Files)},
      {tables, Tables =:= [] andalso Terms =:= [] andalso not App,
       \"ETS tables: \" ++ F(Tables) ++ \", persistent terms: \" ++ F(Terms) ++ \", application loaded: \" ++ F(App)}].".

%%--------------------------------------------------------------------------------------
%% The commands' bodies

%% `--options TERM': a map of `Of''s options.
extra(Opts, Of) ->
    case maps:get(options, Opts, #{}) of
        M when is_map(M) -> M;
        Other -> refuse("--options ~p: expected a map of ~s's options", [Other, Of])
    end.

one_shot(Node, Spec, Extra, Opts) ->
    For = maps:get(for, Opts, maps:get(duration, Extra, 10000)),
    Serve = maps:get(serve, Opts, none),
    %% Served for ever: the session belongs to a process there linked to this command, so
    %% that it ends when the command does (killed, its terminal closed).
    Owner = case For of
                infinity -> spawn_link(Node, timer, sleep, [infinity]);
                _ -> none
            end,
    Metrics = case Serve of
                  none -> #{};
                  _ -> #{metrics => Serve}
              end,
    Started = erlang:monotonic_time(millisecond),
    Id = case rpc(Node, ferrotrace, calls, [Spec, maps:merge(Extra, Metrics#{duration => For, owner => Owner})]) of
             {ok, I} -> I;
             %% In words, as ferrotrace:explain/1 prints it (refuse/2 makes it one line).
             {error, Reason} -> refuse("calls: ~ts", [lists:join("\n", ferrotrace_text:explain(Reason))])
         end,
    _ = Serve =:= none orelse served(Node, Id, For),
    wait_stopped(Node, Id, case For of infinity -> infinity; _ -> Started + For + 30000 end,
                 case Serve of none -> 50; _ -> 1000 end),
    _ = [save(Node, Id, File) || #{save := File} <- [Opts]],
    Out = case Opts of
              #{json := true} -> rpc(Node, ferrotrace, export, [Id, json]);
              _ -> rpc(Node, ferrotrace, format, [Id])
          end,
    _ = rpc(Node, ferrotrace, release, [Id]),
    case Out of
        {error, R} -> refuse("reading session ~p: ~p", [Id, R]);
        _ -> io:put_chars(Out), ok
    end.

%% The saved form is made on the node (its NIF writes the JSON), written here.
save(Node, Id, File) ->
    Json = try erpc:call(Node, ferrotrace_saved, json, [Id], ?RPC_TIMEOUT)
           catch error:{exception, undef, _} ->
                   _ = rpc(Node, ferrotrace, release, [Id]),
                   refuse("--save: ~s's ferrotrace cannot save a session (a version before issue 58)", [Node]);
                 Class:Reason ->
                   refuse("~s: saving session ~p failed: ~p", [Node, Id, {Class, Reason}])
           end,
    case Json of
        {ok, Bin} ->
            case file:write_file(File, Bin) of
                ok -> io:format(standard_error, "saved to ~ts (~b KB): ferrotrace compare ~ts OTHER.json~n",
                                [File, byte_size(Bin) div 1024, File]);
                {error, R} -> refuse("--save ~ts: ~s", [File, file:format_error(R)])
            end;
        {error, R} ->
            refuse("--save: session ~p: ~p", [Id, R])
    end.

%% Two saved files compared here, in this VM: the comparison's modules come from the
%% bundle (pure Erlang, no NIF, no node). A flame graph needs the NIF: the --html page
%% says so where it is not loaded here.
compare(A, B, Opts) ->
    Extra = extra(Opts, "compare/3"),
    ok = bundle_path(),
    case ferrotrace_compare:compare(A, B, Extra#{as => text}) of
        {error, Reason} -> refuse("compare: ~ts", [reason_text(Reason)]);
        Text -> io:put_chars(Text)
    end,
    [case ferrotrace_compare:export(A, B, Format, Extra) of
         {ok, Bytes} ->
             case file:write_file(File, Bytes) of
                 ok -> io:format(standard_error, "~s: ~ts~n", [Format, File]);
                 {error, R} -> refuse("--~s ~ts: ~s", [Format, File, file:format_error(R)])
             end;
         {error, R} ->
             refuse("--~s: ~ts", [Format, reason_text(R)])
     end || {Format, File} <- [{collapsed, maps:get(collapsed, Opts, none)}, {html, maps:get(html, Opts, none)}],
            File =/= none],
    ok.

%% `{not_a_saved_session, File, Hint}' as "not a saved session: File: Hint".
reason_text(Reason) when is_tuple(Reason), tuple_size(Reason) > 0, is_atom(element(1, Reason)) ->
    [Tag | Parts] = tuple_to_list(Reason),
    lists:join(": ", [lists:join(" ", string:lexemes(atom_to_list(Tag), "_")) | [part_text(P) || P <- Parts]]);
reason_text(Reason) ->
    part_text(Reason).

part_text(Part) when is_binary(Part) -> Part;
part_text(Part) -> io_lib:format("~0tp", [Part]).

%% The bundle's beams on this VM's code path (from the escript's archive, in memory).
bundle_path() ->
    lists:foreach(fun({"ferrotrace/ebin/" ++ Beam, Bin}) ->
                          case filename:extension(Beam) of
                              ".beam" ->
                                  Mod = list_to_atom(filename:basename(Beam, ".beam")),
                                  Mod =:= ferrotrace_tracer orelse code:is_loaded(Mod) =/= false
                                      orelse code:load_binary(Mod, Beam, Bin) =:= {module, Mod}
                                      orelse refuse("the bundle's ~s does not load on OTP ~s", [Mod, erlang:system_info(otp_release)]);
                              _ -> ok
                          end;
                     (_) -> ok
                  end, bundle()).

%% Polled every `Every' ms (a served session's status every second: its summary may be
%% large). A deadline of `infinity' is never late (a number is less than an atom).
wait_stopped(Node, Id, Deadline, Every) ->
    Running = case rpc(Node, ferrotrace_tracer, session_status, [Id]) of
                  {ok, #{status := St}} -> St =:= running;
                  _ -> false
              end,
    Late = erlang:monotonic_time(millisecond) >= Deadline,
    if Running, Late -> _ = rpc(Node, ferrotrace, stop, [Id]), ok;
       Running -> timer:sleep(Every), wait_stopped(Node, Id, Deadline, Every);
       true -> ok
    end.

served(Node, Id, For) ->
    case rpc(Node, ferrotrace_registry, lookup, [Id]) of
        {ok, _, _, #{metrics := #{url := Url}}} ->
            io:format(standard_error, "serving session ~p for Prometheus at ~s on ~s ~s~n",
                      [Id, Url, Node, case For of
                                          infinity -> "until this command ends (kill it, or close its terminal)";
                                          _ -> io_lib:format("for ~b s, then the report", [For div 1000])
                                      end]);
        _ ->
            ok
    end.

sessions(Node) ->
    case rpc(Node, ferrotrace, list, []) of
        [] -> io:format("  no sessions~n");
        List ->
            [io:format("  session ~p~s: ~s, ~0p, owner ~0p~n",
                       [Id, case S of #{name := N0} when N0 =:= none; N0 =:= undefined -> ""; #{name := Nm} -> io_lib:format(" (~p)", [Nm]); _ -> "" end,
                        St, maps:get(spec, S, raw), maps:get(owner, S, none)])
             || #{id := Id, status := St} = S <- List],
            ok
    end.

%% The remote shell: a child `erl -remsh' on this terminal (fds 0 to 2 are inherited), with
%% an explicit cookie passed through a private HOME's .erlang.cookie (never on a command
%% line, which any user of the host can read).
shell(Node, Opts) ->
    [_, Host] = string:split(atom_to_list(node()), "@"),
    Flag = case lists:member($., Host) of true -> "-name"; false -> "-sname" end,
    Name = "ferrotrace_sh_" ++ os:getpid() ++ case Flag of "-name" -> "@" ++ Host; _ -> "" end,
    Home = case Opts of #{cookie := C} -> private_home(C); _ -> none end,
    io:format(standard_error, "remote shell on ~s: leave it with Ctrl-G then q (q() would stop the node)~n", [Node]),
    Erl = [filename:join([code:root_dir(), "bin", "erl"]), "-hidden", Flag, Name, "-remsh", atom_to_list(Node)],
    %% The shell, in a session of its own, never sees the SIGHUP of a closed terminal that
    %% ends this VM: it gets a SIGTERM when this VM's child setup goes (setpriv, where there).
    [Exe | Args] = case os:find_executable("setpriv") of false -> Erl; S -> [S, "--pdeathsig", "TERM" | Erl] end,
    Port = open_port({spawn_executable, Exe}, [{args, Args}, {env, [{"HOME", Home} || Home =/= none]},
                                               nouse_stdio, exit_status]),
    %% The cookie file goes once the shell's node has read it (it is in epmd then).
    _ = Home =:= none orelse forget_home(Home, hd(string:split(Name, "@")), 200),
    receive {Port, {exit_status, _}} -> ok end.

forget_home(Home, Name, Tries) ->
    Up = case erl_epmd:names() of {ok, Names} -> lists:keymember(Name, 1, Names); _ -> false end,
    case Up orelse Tries =:= 0 of
        true -> file:del_dir_r(Home);
        false -> timer:sleep(50), forget_home(Home, Name, Tries - 1)
    end.

private_home(Cookie) ->
    Dir = filename:join(os:getenv("TMPDIR", "/tmp"), "ferrotrace-home-" ++ token()),
    ok = file:make_dir(Dir),
    ok = file:change_mode(Dir, 8#700),
    File = filename:join(Dir, ".erlang.cookie"),
    ok = file:write_file(File, Cookie, [exclusive]),
    ok = file:change_mode(File, 8#400),
    Dir.

%%--------------------------------------------------------------------------------------
%% The bundle: this escript's archive

bundle() ->
    case get(bundle) of
        undefined ->
            Files = archive(all),
            put(bundle, Files),
            Files;
        Files ->
            Files
    end.

%% The archive's files, `all' or those named, in memory.
archive(Names) ->
    {ok, Sections} = escript:extract(escript:script_name(), []),
    {archive, Zip} = lists:keyfind(archive, 1, Sections),
    {ok, Files} = zip:extract(Zip, [memory | [{file_list, Names} || Names =/= all]]),
    Files.

file_of(Name, Files) ->
    case lists:keyfind(Name, 1, Files) of
        {_, Bin} -> {ok, Bin};
        false -> refuse("the bundle has no ~s: rebuild it (make bundle)", [Name])
    end.

meta(Files) ->
    {ok, Bin} = file_of("ferrotrace/bundle.meta", Files),
    binary_to_term(Bin).
