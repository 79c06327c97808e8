%%% @doc A node's first start (issue 54, part 2), in fresh peer nodes that have ferrotrace on
%%% their code path and nothing of it loaded. What is checked is how the start loads, never
%%% how long it took (`make busy' prints that: bench/ferrotrace_cold.erl):
%%% - first_call_loads_at_once: the caller of the first `calls/2' loads nothing on demand
%%%   but the façade (each such load a wait for the code server, a process of normal
%%%   priority); what a start runs is loaded when it returns, the rest of the application
%%%   soon after (none twice); every module is loaded from its own file, with the
%%%   tracer and what the loop analysis needs; the application's spec is loaded as its
%%%   `.app' file has it, read by ferrotrace_code (a peer has no shell: what parses it is
%%%   loaded first), not by the application controller.
%%% - busy_first_start: the same among 50 busy processes; the node's first calibration is
%%%   `pending' at the start (full schedulers) and reaches the session afterwards, which
%%%   then compensates with it.
%%% - preloads_one_at_a_time: eight first loads at once load each module once (none has
%%%   old code).
%%% - falls_back_to_the_code_server: where an object file or the `.app' file is not beside
%%%   the others, the code server loads what is missing.
-module(ferrotrace_cold_SUITE).

-include("support/ft_ct.hrl").

-export([first_call_loads_at_once/1, busy_first_start/1, preloads_one_at_a_time/1,
         falls_back_to_the_code_server/1]).

-define(ANALYSIS, [beam_disasm, beam_opcodes, beam_types, beam_lib, timer]).
-define(WORKERS, 50).

suite() ->
    [{timetrap, {minutes, 3}}, {ct_hooks, [{ft_ct, []}]}].

all() ->
    [first_call_loads_at_once, busy_first_start, preloads_one_at_a_time, falls_back_to_the_code_server].

%%--------------------------------------------------------------------------------------

-spec first_call_loads_at_once(config()) -> ok.
first_call_loads_at_once(_Config) ->
    Peer = fresh_peer([]),
    %% A peer has no shell: erl_scan is not loaded, nor epp, which the application
    %% controller loads to read a `.app' file.
    Before = call(Peer, erlang, loaded, []),
    {{ok, S}, Loads} = call(Peer, ft_cold, first_call,
                            [ferrotrace, calls, [{lists, seq, 2}, #{duration => 2000, owner => none}]]),
    ct:pal("loaded on demand by the caller: ~p; erl_scan before: ~p", [Loads, lists:member(erl_scan, Before)]),
    ?assertEqual([ferrotrace], [M || M <- Loads, own(M)]),
    %% What a start runs was loaded before it went on; the rest follows.
    Start = call(Peer, ferrotrace_code, start_modules, []),
    ?assertEqual([], [M || {M, false} <- call(Peer, ft_cold, loaded_files, [Start ++ ?ANALYSIS])]),
    loaded_from_their_files(Peer),
    ?assertEqual([], call(Peer, ft_cold, old_code, [app_modules() ++ ?ANALYSIS])),
    %% The `.app' file read and parsed by ferrotrace_code, not by the application controller.
    ?assertEqual(lists:member(epp, Before), call(Peer, erlang, module_loaded, [epp])),
    ok = call(Peer, ferrotrace, release, [S]).

-spec busy_first_start(config()) -> ok.
busy_first_start(_Config) ->
    Peer = fresh_peer(["+S", "2:2"]),
    ok = call(Peer, code, ensure_modules_loaded, [[ft_budget_work]]),
    _ = call(Peer, ft_budget_work, start, [?WORKERS]),
    timer:sleep(500),
    {{ok, S}, Loads} = call(Peer, ft_cold, first_call,
                            [ferrotrace, calls, [{'_', '_', '_'}, #{duration => 15000, owner => none}]]),
    #{calibration := AtStart, start := Start} = call(Peer, ferrotrace, summary, [S]),
    Landed = ft_ct:poll(fun() -> is_map(maps:get(calibration, call(Peer, ferrotrace, summary, [S]))) end, 14000),
    Summary = call(Peer, ferrotrace, summary, [S]),
    ct:pal("loaded on demand by the caller: ~p; calibration at the start ~p, then ~p; start ~p",
           [Loads, AtStart, maps:get(calibration, Summary), Start]),
    ?assertEqual([ferrotrace], [M || M <- Loads, own(M)]),
    ?assertEqual(pending, AtStart),
    ?assertEqual(ok, Landed),
    ?assertMatch(#{calibration := #{call_ns := _, return_ns := _}, compensated := true}, Summary),
    loaded_from_their_files(Peer),
    ok = call(Peer, ferrotrace, release, [S]).

-spec preloads_one_at_a_time(config()) -> ok.
preloads_one_at_a_time(_Config) ->
    Peer = fresh_peer([]),
    %% Loaded already (a node that used the compiler): a second load of one of them, from a
    %% sticky directory, would be refused, and the load fall back to the code server.
    ok = call(Peer, code, ensure_modules_loaded, [?ANALYSIS]),
    [ok] = lists:usort(call(Peer, ft_cold, preload_at_once, [8])),
    Modules = app_modules(),
    ?assertEqual([], call(Peer, ft_cold, old_code, [Modules ++ ?ANALYSIS])),
    loaded_from_their_files(Peer).

%% A copy of the object files without one of them and without the `.app' file, first on
%% the peer's code path, the build's after it: the missing file and the spec come from the
%% build's directory, through the code server.
-spec falls_back_to_the_code_server(config()) -> ok.
falls_back_to_the_code_server(Config) ->
    Ebin = filename:dirname(code:which(ferrotrace)),
    Copy = filename:join([proplists:get_value(priv_dir, Config), "ferrotrace", "ebin"]),
    ok = filelib:ensure_dir(filename:join(Copy, "x")),
    Missing = ferrotrace_text,
    _ = [{ok, _} = file:copy(filename:join(Ebin, F), filename:join(Copy, F))
         || F <- filelib:wildcard("*.beam", Ebin), F =/= atom_to_list(Missing) ++ ".beam"],
    ok = file:make_symlink(filename:join(filename:dirname(Ebin), "priv"),
                           filename:join(filename:dirname(Copy), "priv")),
    Peer = fresh_peer(["-pa", Copy]),
    [ok] = call(Peer, ft_cold, preload_at_once, [1]),
    Files = call(Peer, ft_cold, loaded_files, [app_modules()]),
    ct:pal("loaded from ~p", [Files]),
    ?assertEqual([], [M || {M, false} <- Files]),
    ?assertEqual(filename:join(Ebin, "ferrotrace_text.beam"), proplists:get_value(Missing, Files)),
    ?assertEqual({ok, app_modules()}, call(Peer, application, get_key, [ferrotrace, modules])),
    {ok, S} = call(Peer, ferrotrace, calls, [{lists, seq, 2}, #{duration => 1000, owner => none}]),
    ok = call(Peer, ferrotrace, release, [S]).

%%--------------------------------------------------------------------------------------

%% A peer of this node's code, over standard I/O, nothing of ferrotrace loaded.
fresh_peer(Args) ->
    {ok, Peer, _} = ft_ct:peer(#{name => peer:random_name(ft_cold), connection => standard_io, args => Args}),
    ?assertEqual([], [M || M <- call(Peer, erlang, loaded, []), own(M)]),
    Peer.

own(M) ->
    lists:prefix("ferrotrace", atom_to_list(M)).

%% Every module of the application, the analysis's and the tracer loaded, ferrotrace's
%% each from its own file beside the others; the application's spec as its file has it.
loaded_from_their_files(Peer) ->
    Ebin = filename:dirname(code:which(ferrotrace)),
    Modules = app_modules(),
    %% After a start, the rest of the application loads beside it.
    ok = ft_ct:poll(fun() ->
                            [] =:= [M || {M, false} <- call(Peer, ft_cold, loaded_files, [Modules])]
                    end, 30000),
    Files = call(Peer, ft_cold, loaded_files, [Modules ++ ?ANALYSIS]),
    ?assertEqual([], [M || {M, false} <- Files]),
    ?assertEqual([], [{M, F} || {M, F} <- Files, lists:member(M, Modules),
                               F =/= filename:join(Ebin, atom_to_list(M) ++ ".beam")]),
    ?assertEqual({ok, Modules}, call(Peer, application, get_key, [ferrotrace, modules])).

%% The application's modules as its `.app' file lists them.
app_modules() ->
    {ok, [{application, ferrotrace, Keys}]} =
        file:consult(filename:join(filename:dirname(code:which(ferrotrace)), "ferrotrace.app")),
    proplists:get_value(modules, Keys).

call(Peer, M, F, A) ->
    peer:call(Peer, M, F, A, 60000).
