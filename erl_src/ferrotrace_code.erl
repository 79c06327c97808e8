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
-spec preload() -> ok.
preload() ->
    Wanted = [M || M <- ferrotrace_traced:own_modules() ++ [beam_disasm, beam_opcodes, beam_types, beam_lib, timer],
                   M =/= ?TRACER, not erlang:module_loaded(M)],
    _ = case Wanted of
            [] -> ok;
            _ -> code:ensure_modules_loaded(Wanted)
        end,
    ok.

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
