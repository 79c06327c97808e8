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

-export([ensure_tracer/0, reload_tracer/0, preload/0]).

-define(TRACER, ferrotrace_tracer).
%% What the loop analysis (ferrotrace_loops) reads code with, and their applications.
-define(ANALYSIS_APPS, [{beam_disasm, compiler}, {beam_opcodes, compiler}, {beam_types, compiler},
                        {beam_lib, stdlib}, {timer, stdlib}]).
-define(ANALYSIS_MODULES, [M || {M, _} <- ?ANALYSIS_APPS]).
-define(CAT, "/bin/cat").
%% How long the files may take to read before the code server is asked instead (ms).
-define(READ_MS, 2000).
-define(LOCK, {?MODULE, ?TRACER}).

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
%% (but the tracer, loaded by {@link ensure_tracer/0}) and what the loop analysis reads code
%% with. In an interactive node (not a release's embedded one) a module is loaded on its
%% first call, each load a wait for the code server, which runs at normal priority: on a
%% busy node each such wait took hundreds of milliseconds. One request waits once.
%%
%% The object files are read in one go by `cat' through a port, not one file operation
%% each: a file operation runs on a dirty I/O scheduler, a thread that gets a core only when
%% the OS takes it from a busy scheduler. With both schedulers of a 2-core node kept busy,
%% each took 3 to 4 ms, and the 45 files of a first start 150 ms (`cat': 10 to 17 ms).
%% Where that fails (no `cat', a file not where the loaded code says), the code server
%% loads them as before.
-spec preload() -> ok.
preload() ->
    Wanted = [M || M <- ferrotrace_traced:own_modules() ++ ?ANALYSIS_MODULES,
                   M =/= ?TRACER, not erlang:module_loaded(M)],
    _ = case Wanted of
            [] -> ok;
            _ -> load_read(Wanted, read_at_once(Wanted))
        end,
    ok.

%% Loads the object code read (`{ok, [{Module, File, Binary}]}'), or has the code server
%% load `Modules'.
load_read(Modules, {ok, Read}) ->
    case code:atomic_load(Read) of
        ok -> ok;
        {error, _} -> code:ensure_modules_loaded(Modules)
    end;
load_read(Modules, error) ->
    code:ensure_modules_loaded(Modules).

%% Where module `M''s object file is, without searching the code path (a file operation
%% per directory): ferrotrace's beside this module's, the analysis's in its application.
object_file(M) ->
    Dir = case lists:keyfind(M, 1, ?ANALYSIS_APPS) of
              {M, App} -> filename:join(code:lib_dir(App), "ebin");
              false -> filename:dirname(code:which(?MODULE))
          end,
    filename:join(Dir, atom_to_list(M) ++ ".beam").

%% `{ok, [{Module, File, Binary}]}', the object code of each of `Modules', or `error'. Each is
%% checked to be a whole BEAM file (IFF: `FOR1', its length, `BEAM'); `cat''s complaints
%% come on the same stream, so they fail that check instead of reaching the node's console.
read_at_once(Modules) ->
    try
        Files = [object_file(M) || M <- Modules],
        Port = open_port({spawn_executable, ?CAT}, [{args, Files}, binary, stream, eof, exit_status, stderr_to_stdout]),
        case split(collect(Port, erlang:monotonic_time(millisecond) + ?READ_MS, []), length(Files), []) of
            {ok, Binaries} -> {ok, lists:zip3(Modules, Files, Binaries)};
            error -> error
        end
    catch error:_ -> error
    end.

collect(Port, Deadline, Acc) ->
    Left = max(0, Deadline - erlang:monotonic_time(millisecond)),
    receive
        {Port, {data, Data}} -> collect(Port, Deadline, [Data | Acc]);
        {Port, eof} ->
            %% With `eof' the port stays open until closed.
            Status = receive {Port, {exit_status, S}} -> S after Left -> timeout end,
            close(Port),
            {Status, iolist_to_binary(lists:reverse(Acc))}
    after Left ->
        close(Port),
        timeout
    end.

close(Port) ->
    try port_close(Port) catch error:badarg -> true end.

split({0, <<>>}, 0, Binaries) ->
    {ok, lists:reverse(Binaries)};
split({0, <<"FOR1", Size:32, "BEAM", _/binary>> = Read}, N, Binaries) when N > 0, byte_size(Read) >= Size + 8 ->
    <<Beam:(Size + 8)/binary, Rest/binary>> = Read,
    split({0, Rest}, N - 1, [Beam | Binaries]);
split(_NotAllRead, _N, _Binaries) ->
    error.

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
