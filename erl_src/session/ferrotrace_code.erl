%%% @doc Loading `ferrotrace_tracer' (the NIF module) without tripping OTP 25's code server.
%%%
%%% == The OTP bug ==
%%% `ferrotrace_tracer' has an `-on_load' function (it loads the NIF library). While an
%%% on_load function runs, OTP 25's code server queues every other request to load the same
%%% module behind it. When the first load finishes, a queued `code:load_file/1' loads the
%%% module again, which starts a second on_load; the code server then drops that second
%%% on_load from its list (`finish_on_load/3' in code_server.erl filters the list it had
%%% before the queued requests ran), so the `code:load_file/1' never gets an answer and the
%%% module is left half loaded. A queued `code:ensure_loaded/1' is safe: it finds the module
%%% loaded and answers at once. Nothing but a load of the same module waiting behind
%%% another, right after `code:delete/1' and `code:purge/1', triggers it; ferrotrace makes
%%% that likely because any API call, and any keeper reacting to the unload, loads the module
%%% again.
%%%
%%% == What ferrotrace does ==
%%% Its own loads go through {@link ensure_tracer/0}: nothing at all when the module is
%%% loaded (no request to the code server), otherwise `code:ensure_loaded/1' (never
%%% `code:load_file/1') under one node-wide lock, so that ferrotrace never has two loads of
%%% the module in the code server at once.
%%%
%%% == The safe sequence for a reload ==
%%% Call {@link reload_tracer/0}, which takes the same lock and runs
%%% `code:purge/1', `code:delete/1', `code:purge/1', then `code:ensure_loaded/1'. By hand:
%%% never `code:load_file(ferrotrace_tracer)' after a delete and purge while anything may
%%% use ferrotrace; use `code:ensure_loaded(ferrotrace_tracer)', which is safe whoever loads
%%% the module first. (Loading over a loaded `ferrotrace_tracer' is refused anyway: the
%%% library has no upgrade callback.)
-module(ferrotrace_code).

-export([ensure_tracer/0, reload_tracer/0, preload/0, preload_for_start/0, preload_rest/0, start_modules/0]).

-define(TRACER, ferrotrace_tracer).
%% What the loop analysis (ferrotrace_loops) reads code with, and their applications.
-define(ANALYSIS_APPS, [{beam_disasm, compiler}, {beam_opcodes, compiler}, {beam_types, compiler},
                        {beam_lib, stdlib}, {timer, stdlib}]).
-define(ANALYSIS_MODULES, [M || {M, _} <- ?ANALYSIS_APPS]).
%% What reads the `.app' file, and its application.
-define(PARSER_APPS, [{erl_anno, stdlib}, {erl_scan, stdlib}, {erl_parse, stdlib}]).
%% How long the files may take to read before the code server is asked instead (ms).
-define(READ_MS, 2000).
-define(LOCK, {?MODULE, ?TRACER}).
%% What a start runs: ferrotrace_start, its keeper, the tracer and every module they call,
%% and those call, as xref finds it module by module (a gen_server's callbacks are called
%% by OTP, not seen as calls): ferrotrace_house_tests checks this list against it. A node's first start
%% loads these before it goes on, and the rest of the application (reading a session:
%% reports, exports, compare, cluster) beside it, as it runs.
-define(START_MODULES,
        [ferrotrace, ferrotrace_activity, ferrotrace_amend, ferrotrace_backend, ferrotrace_backend_legacy,
         ferrotrace_barrier, ferrotrace_budget, ferrotrace_calibrate, ferrotrace_capture, ferrotrace_code, ferrotrace_dispatch,
         ferrotrace_displaced, ferrotrace_exists, ferrotrace_hint, ferrotrace_in_situ, ferrotrace_intervals,
         ferrotrace_keeper, ferrotrace_keys, ferrotrace_loops, ferrotrace_metrics, ferrotrace_metrics_http,
         ferrotrace_metrics_options, ferrotrace_names, ferrotrace_nodeload, ferrotrace_options,
         ferrotrace_overhead, ferrotrace_own, ferrotrace_owner, ferrotrace_paced, ferrotrace_recent, ferrotrace_registry, ferrotrace_scope,
         ferrotrace_session, ferrotrace_shed, ferrotrace_slow, ferrotrace_spec, ferrotrace_start,
         ferrotrace_text, ferrotrace_time, ferrotrace_traced, ferrotrace_tracer, ferrotrace_tracing,
         ferrotrace_trees]).
%% Registered by the process that preloads, while it does (see alone/1).
-define(PRELOADING, ferrotrace_preloading).

%% Set by ferrotrace_tracer's on_load function (same key) when the library fails to load.
-define(LOAD_FAILURE, {ferrotrace_tracer, nif_load_failure}).

%% @doc Makes sure `ferrotrace_tracer' is loaded: at once if it is, else through
%% `code:ensure_loaded/1' under ferrotrace's load lock. When its NIF library fails to load
%% (an unreadable or missing `priv', a library built for another system), the error names
%% the file and the reason `erlang:load_nif/2' gave, which the code server would only log:
%% `{error, {nif_not_loaded, Path, Reason}}'.
-spec ensure_tracer() -> {module, ferrotrace_tracer} | {error, term()}.
ensure_tracer() ->
    case erlang:module_loaded(?TRACER) of
        true -> {module, ?TRACER};
        false -> load_failure(locked(fun() -> code:ensure_loaded(?TRACER) end))
    end.

load_failure({error, on_load_failure} = Error) ->
    case persistent_term:get(?LOAD_FAILURE, none) of
        {Path, Reason} -> {error, {nif_not_loaded, Path, Reason}};
        none -> Error
    end;
load_failure(Result) ->
    Result.

%% @doc Loads at once every module a start may need that is not loaded yet: ferrotrace's own
%% and what the loop analysis reads code with. In an interactive node (not a release's
%% embedded one) a module is loaded on its first call, each load a wait for the code server,
%% which runs at normal priority and walks the code path with erl_prim_loader (another),
%% each step a turn among the runnable processes: on a busy node each such load took tens
%% to hundreds of milliseconds. Called by a process of high priority, this waits for
%% normal-priority processes only a few times, most of them at once (issue 54):
%% <ul>
%% <li>where ferrotrace's object files are, asked once (the code server), with the
%% compiler's and stdlib's directories beside;</li>
%% <li>the application's module list: from its loaded spec, or from the `.app' file beside
%% the object files, read here, the spec then loaded from that term (the application
%% controller asked once, reading no file); `application:load(ferrotrace)' where that
%% fails;</li>
%% <li>the tracer (`ferrotrace_tracer' and its NIF library) through {@link ensure_tracer/0},
%% beside the rest;</li>
%% <li>the object files read all at once, a process each (see read_at_once/2), and loaded
%% by one `code:atomic_load/1'.</li>
%% </ul>
%% Where that fails (a file not where the loaded code says), the code server loads them as
%% before. One preload runs at a time on a node; a second waits for it. Answers once all
%% are loaded.
-spec preload() -> ok.
preload() ->
    case missing() of
        none -> ok;
        _ -> alone(fun() -> preload_alone(fun(_) -> true end) end)
    end.

%% @doc As {@link preload/0}, for a start: answers once what a start runs is loaded
%% ({@link start_modules/0}, and what the loop analysis reads code with); the rest of the
%% application is {@link preload_rest/0}'s. A node's first start among 50 busy processes
%% loads 43 of ferrotrace's 60 modules so before it goes on.
-spec preload_for_start() -> ok.
preload_for_start() ->
    case missing() of
        none -> ok;
        {known, Wanted} ->
            case lists:filter(fun for_start/1, Wanted) of
                [] -> ok;
                _ -> alone(fun() -> preload_alone(fun for_start/1) end)
            end;
        unknown -> alone(fun() -> preload_alone(fun for_start/1) end)
    end.

%% @doc Loads the rest of the application (what a start does not run) in a process of
%% ferrotrace's own beside the caller, which does not wait: a start calls it once it has
%% the registry (an own process is recorded there), and goes on.
-spec preload_rest() -> ok.
preload_rest() ->
    case missing() of
        none ->
            ok;
        _ ->
            _ = spawn_opt(fun() ->
                                  ok = ferrotrace_own:enter(),
                                  named(fun() -> preload_alone(fun(_) -> true end) end)
                          end, [{priority, high}]),
            ok
    end.

%% @doc The modules a start runs (see ?START_MODULES), for ferrotrace_house_tests.
-spec start_modules() -> [module()].
start_modules() ->
    ?START_MODULES.

for_start(Module) ->
    lists:member(Module, ?START_MODULES) orelse lists:member(Module, ?ANALYSIS_MODULES).

%% `none' where everything is loaded, `{known, Wanted}' what is not, `unknown' where the
%% application's spec is not loaded (a node's first start).
missing() ->
    case application:get_key(ferrotrace, modules) of
        {ok, [_ | _] = Modules} ->
            case wanted(Modules) of
                [] -> none;
                Wanted -> {known, Wanted}
            end;
        _ ->
            unknown
    end.

%% Loads what is not loaded among the application's modules for which `Which' is true.
preload_alone(Which) ->
    case application:get_key(ferrotrace, modules) of
        {ok, [_ | _] = Modules} ->
            case lists:filter(Which, wanted(Modules)) of
                [] -> ok;
                Wanted -> load(Wanted, [tracer()], dirs())
            end;
        _ ->
            %% A node's first start: the tracer's load, the longest (its library's on_load
            %% asks the code server too), starts first.
            Tracer = tracer(),
            Dirs = dirs(),
            {Modules, Spec} = app_modules(Dirs),
            load(lists:filter(Which, wanted(Modules)), [Tracer, Spec], Dirs)
    end.

%% What is not loaded among `Modules' (but the tracer) and the analysis's modules.
wanted(Modules) ->
    [M || M <- Modules ++ ?ANALYSIS_MODULES, M =/= ?TRACER, not erlang:module_loaded(M)].

%% Loads `Wanted', then waits for the loads started beside (`Waits').
load(Wanted, Waits, Dirs) ->
    _ = case Wanted of
            [] -> ok;
            _ -> load_read(Wanted, read_at_once(Wanted, Dirs))
        end,
    lists:foreach(fun await/1, Waits).

%% `Fun' in a process beside that holds the name ?PRELOADING meanwhile: one preload at a
%% time. Two first starts at once would otherwise load the same modules twice, the second
%% load making the first one's code old (a purge would then end the processes running it).
alone(Fun) ->
    _ = await(beside(fun() -> named(Fun) end)),
    ok.

named(Fun) ->
    try register(?PRELOADING, self()) of
        true -> Fun()
    catch
        error:badarg ->
            case whereis(?PRELOADING) of
                undefined -> ok;
                Other -> await({Other, erlang:monitor(process, Other)})
            end,
            named(Fun)
    end.

%% `ensure_tracer/0' in a process beside, where the tracer is not loaded yet.
tracer() ->
    case erlang:module_loaded(?TRACER) of
        true -> none;
        false -> beside(fun ensure_tracer/0)
    end.

%% The directories of ferrotrace's object files and of the analysis's applications
%% (`{App, EbinOrError}'), asked of the code server at once: three requests in its queue
%% wait one turn, not three.
dirs() ->
    Asks = [{ferrotrace, fun() -> filename:dirname(code:which(?MODULE)) end}
            | [{App, fun() -> filename:join(code:lib_dir(App), "ebin") end}
               || App <- lists:usort([A || {_, A} <- ?ANALYSIS_APPS ++ ?PARSER_APPS])]],
    Pids = [{App, beside(fun() -> try {dir, Ask()} catch _:_ -> error end end)} || {App, Ask} <- Asks],
    [{App, case await(Pid) of {dir, Dir} -> Dir; _ -> error end} || {App, Pid} <- Pids].

%% ferrotrace's modules from its `.app' file, beside its object files, and the spec loaded
%% from the same term in a process beside: `{Modules, Waiting}'. What reads the term is
%% loaded first where it is not (a node started without a shell: erl_scan and erl_anno),
%% from stdlib's directory. Where the file cannot be read here, the application controller
%% loads it (reading the file with the code server, the modules that read it loaded on
%% first call: 160 ms more among 50 busy processes).
app_modules(Dirs) ->
    try
        {ferrotrace, Ebin} = lists:keyfind(ferrotrace, 1, Dirs),
        App = beside(fun() -> prim_file:read_file(filename:join(Ebin, "ferrotrace.app")) end),
        ok = case [M || {M, _} <- ?PARSER_APPS, not erlang:module_loaded(M)] of
                 [] -> ok;
                 Parser -> load_read(Parser, read_at_once(Parser, Dirs))
             end,
        {ok, Bin} = await(App),
        {ok, Tokens, _} = erl_scan:string(unicode:characters_to_list(Bin)),
        {ok, {application, ferrotrace, Keys} = Spec} = erl_parse:parse_term(Tokens),
        {modules, [_ | _] = Modules} = lists:keyfind(modules, 1, Keys),
        {Modules, beside(fun() -> application:load(Spec) end)}
    catch
        error:_ ->
            _ = application:load(ferrotrace),
            case application:get_key(ferrotrace, modules) of
                {ok, Loaded} -> {Loaded, none};
                undefined -> {[], none}
            end
    end.

%% `Fun' in a process of high priority beside the caller (not linked: an error ends it
%% alone); await/1 answers what it returned, `error' if it failed. One of ferrotrace's own
%% where that module is loaded (a preload while a session runs: never traced).
beside(Fun) ->
    Caller = self(),
    spawn_opt(fun() ->
                      _ = erlang:module_loaded(ferrotrace_own) andalso ferrotrace_own:enter(),
                      Caller ! {?MODULE, self(), Fun()}
              end, [monitor, {priority, high}]).

await(none) ->
    ok;
await({Pid, Monitor}) ->
    receive
        {?MODULE, Pid, Result} -> erlang:demonitor(Monitor, [flush]), Result;
        {'DOWN', Monitor, process, Pid, _} -> error
    end.

%% Loads the object code read (`{ok, [{Module, File, Binary}]}'), or has the code server
%% load `Modules'.
load_read(Modules, {ok, Read}) ->
    %% Not those loaded on first call since they were found missing (the rest, loaded as a
    %% start runs): loaded again, their code would become old.
    case code:atomic_load([R || {M, _, _} = R <- Read, not erlang:module_loaded(M)]) of
        ok -> ok;
        {error, _} -> code:ensure_modules_loaded(Modules)
    end;
load_read(Modules, error) ->
    code:ensure_modules_loaded(Modules).

%% Where module `M''s object file is, without searching the code path (a file operation
%% per directory): ferrotrace's beside this module's, OTP's in its application.
object_file(M, Dirs) ->
    App = case lists:keyfind(M, 1, ?ANALYSIS_APPS ++ ?PARSER_APPS) of
              {M, A} -> A;
              false -> ferrotrace
          end,
    {App, Dir} = lists:keyfind(App, 1, Dirs),
    filename:join(Dir, atom_to_list(M) ++ ".beam").

%% `{ok, [{Module, File, Binary}]}', the object code of each of `Modules', or `error'. Each
%% file is read by a process of its own, all at once: a file operation runs on a dirty I/O
%% scheduler, a thread that gets a core only when the OS takes it from a busy scheduler, and
%% the ten such threads wait for that together. Among 50 busy processes on 2 cores
%% ferrotrace's 42 files took 0 to 11 ms so (one after another: 8 to 630 ms; through one
%% `cat', as before: 22 to 113).
%% Each is checked to be a whole BEAM file (IFF: `FOR1', its length, `BEAM').
read_at_once(Modules, Dirs) ->
    try
        Files = [object_file(M, Dirs) || M <- Modules],
        Deadline = erlang:monotonic_time(millisecond) + ?READ_MS,
        Readers = [beside(fun() -> read_beam(File) end) || File <- Files],
        case collect(Readers, Deadline, []) of
            {ok, Binaries} -> {ok, lists:zip3(Modules, Files, Binaries)};
            error -> error
        end
    catch error:_ -> error
    end.

read_beam(File) ->
    case prim_file:read_file(File) of
        {ok, Beam} when is_binary(Beam) -> beam(Beam);
        _ -> error
    end.

%% Known to be a binary before its header is matched: OTP 25's compiler then checks no unit
%% (`bs_test_unit', which OTP 29 no longer loads: the bundle's beams come from OTP 25).
beam(Beam) when is_binary(Beam) ->
    case Beam of
        <<"FOR1", Size:32, "BEAM", _/binary>> when byte_size(Beam) =:= Size + 8 -> {beam, Beam};
        _ -> error
    end.

collect([], _Deadline, Binaries) ->
    {ok, lists:reverse(Binaries)};
collect([{Pid, Monitor} | Rest] = Readers, Deadline, Binaries) ->
    receive
        {?MODULE, Pid, {beam, Beam}} ->
            erlang:demonitor(Monitor, [flush]),
            collect(Rest, Deadline, [Beam | Binaries]);
        {?MODULE, Pid, error} ->
            stop(Readers), error;
        {'DOWN', Monitor, process, Pid, _} ->
            stop(Rest), error
    after max(0, Deadline - erlang:monotonic_time(millisecond)) ->
        stop(Readers), error
    end.

%% Readers not waited for: ended, and what they sent meanwhile dropped.
stop(Readers) ->
    lists:foreach(fun({Pid, Monitor}) ->
                          erlang:demonitor(Monitor, [flush]),
                          exit(Pid, kill),
                          receive {?MODULE, Pid, _} -> ok after 0 -> ok end
                  end, Readers).

%% @doc Unloads and loads `ferrotrace_tracer' again, the safe way (see the module doc): every
%% session is stopped (`stop_reason' `unload') by the library's unload callback, and its
%% keeper ends: the purge unmaps the library, and the figures go with it.
-spec reload_tracer() -> {module, ferrotrace_tracer} | {error, term()}.
reload_tracer() ->
    load_failure(locked(fun() ->
                                _ = code:purge(?TRACER),
                                _ = code:delete(?TRACER),
                                _ = code:purge(?TRACER),
                                code:ensure_loaded(?TRACER)
                        end)).

%% One load at a time on this node (global's locks work on a node that is not distributed).
locked(Fun) ->
    global:trans({?LOCK, self()}, Fun, [node()], infinity).
