%%% @doc ferrotrace on a busy node, as an operator reaches for it: a peer node whose two
%%% schedulers are kept busy by 50 processes of ft_budget_work (ferrotrace's modules loaded
%%% first, as in a release).
%%%
%%% - ready_at_once: a `{'_', '_', '_'}' start returns in under a second (15 to 26 s in
%%%   the issue that asked for this; 0.15 to 0.25 s measured, printed), the
%%%   session counts events, and the node's own normal-priority processes still answer. The
%%%   node's first calibration is not in the start's way: `pending' at the start, measured
%%%   once the session runs, and its costs compensated from then on.
%%% - cold_start: the same start as an operator's first call in an interactive node, where
%%%   nothing of ferrotrace is loaded yet: within 3 s, and ferrotrace's modules
%%%   all loaded from their files by it (ferrotrace_code:preload/0 reads them in one go).
%%% - own_processes_untraced: with `pids => all' (the default), no process of ferrotrace's
%%%   own carries a trace flag, whatever session runs (a budget's tick and the interval
%%%   snapshots included).
%%% - counted_near_untraced: the calls a budgeted start counts before it sets any pattern
%%%   (ferrotrace_backend:count_calls/3) are near what the workers make untraced, though
%%%   counting every function of the node slows them: the counts are taken up by how much.
%%% - generated_left_out: under a wildcard, the functions the compiler made are left out
%%%   unless `generated => true'.
%%%
%%% Measured figures go to the CT log with ct:pal; `make busy' prints the same scenarios'
%%% figures without asserting them.
-module(ferrotrace_busy_SUITE).

-include("support/ft_ct.hrl").

-export([ready_at_once/1, cold_start/1, own_processes_untraced/1, counted_near_untraced/1, generated_left_out/1]).

%% A start on the busy peer returns within this (ms): 15 to 26 s before the issue that
%% asked for it, 0.15 to 0.25 s now; under a second even on a machine other work shares.
-define(START_BOUND_MS, 1000).
%% The same for a node's first start, which loads ferrotrace's modules too (0.4 to 0.55 s).
-define(COLD_START_BOUND_MS, 3000).
-define(WORKERS, 50).

suite() ->
    [{timetrap, {minutes, 5}}, {ct_hooks, [{ft_ct, [ft_budget_work]}]}].

all() ->
    [ready_at_once, cold_start, own_processes_untraced, counted_near_untraced, generated_left_out].

%%--------------------------------------------------------------------------------------

-spec ready_at_once(config()) -> ok.
ready_at_once(_Config) ->
    Peer = busy_peer(),
    Pinger = call(Peer, ft_busy, start_pinger, []),
    {Ms, {ok, S}} = call(Peer, ft_busy, timed, [ferrotrace, calls, [{'_', '_', '_'}, #{duration => 3000, owner => none}]]),
    #{calibration := AtStart} = call(Peer, ferrotrace, summary, [S]),
    timer:sleep(1000),
    #{events := #{seen := Seen}} = call(Peer, ferrotrace, summary, [S]),
    %% The node's first calibration, measured once the session runs, and given to it.
    _ = ft_ct:poll(fun() -> is_map(maps:get(calibration, call(Peer, ferrotrace, summary, [S]))) end, 2000),
    Landed = call(Peer, ferrotrace, summary, [S]),
    Ping = call(Peer, ft_busy, stop_pinger, [Pinger]),
    %% On OTP 25 a second broad session is refused while the first traces every process.
    ok = call(Peer, ferrotrace, stop, [S]),
    {Ms2, {ok, S2}} = call(Peer, ft_busy, timed, [ferrotrace, calls, [{'_', '_', '_'}, #{duration => 1000, owner => none}]]),
    ct:pal("{'_','_','_'} start among ~b busy processes: ~b ms, a second one ~b ms; ~b events in its first "
           "second; longest ping ~b ms", [?WORKERS, Ms, Ms2, Seen, Ping]),
    ?assert(Ms =< ?START_BOUND_MS, Ms),
    ?assert(Ms2 =< ?START_BOUND_MS, Ms2),
    ?assert(Seen > 10000, Seen),
    ?assertEqual(pending, AtStart),
    ?assertMatch(#{calibration := #{call_ns := _, return_ns := _}, compensated := true}, Landed),
    %% Compensating: the call entries keep their latencies as measured beside (`raw').
    ?assertMatch([#{raw := _} | _], maps:get(calls, Landed)),
    _ = [call(Peer, ferrotrace, release, [Id]) || Id <- [S, S2]],
    ok.

-spec cold_start(config()) -> ok.
cold_start(_Config) ->
    {ok, Peer, _} = ft_ct:peer(#{name => peer:random_name(ft_cold), connection => standard_io,
                                 args => ["+S", "2:2"]}),
    ok = call(Peer, code, ensure_modules_loaded, [[ft_busy, ft_budget_work]]),
    false = call(Peer, erlang, module_loaded, [ferrotrace]),
    _ = call(Peer, ft_budget_work, start, [?WORKERS]),
    timer:sleep(500),
    {Ms, {ok, S}} = call(Peer, ft_busy, timed, [ferrotrace, calls, [{'_', '_', '_'}, #{duration => 1000, owner => none}]]),
    {ok, Modules} = call(Peer, application, get_key, [ferrotrace, modules]),
    Files = [{M, call(Peer, code, is_loaded, [M])} || M <- Modules],
    ct:pal("first {'_','_','_'} start of a node among ~b busy processes, nothing of ferrotrace loaded before: ~b ms",
           [?WORKERS, Ms]),
    ?assert(Ms =< ?COLD_START_BOUND_MS, Ms),
    %% Loaded, each from its own file (not a file of another module, not left to the code
    %% server's next load).
    [] = [{M, F} || {M, F} <- Files,
                    not (is_tuple(F) andalso filename:basename(element(2, F)) =:= atom_to_list(M) ++ ".beam")],
    ok = call(Peer, ferrotrace, release, [S]).

-spec own_processes_untraced(config()) -> ok.
own_processes_untraced(_Config) ->
    Peer = busy_peer(),
    {ok, S} = call(Peer, ferrotrace, calls, [{'_', '_', '_'}, #{duration => 5000, owner => none,
                                                                max_overhead => 0.05, intervals => 1000}]),
    %% After the start, and after the keeper's first steps and the budget's first ticks.
    Flagged0 = call(Peer, ft_busy, own_flagged, []),
    timer:sleep(1500),
    Flagged1 = call(Peer, ft_busy, own_flagged, []),
    Own = call(Peer, ferrotrace_own, pids, []),
    #{calls := Calls} = call(Peer, ferrotrace, summary, [S]),
    Ours = [MFA || #{mfa := {M, _, _} = MFA} <- Calls, lists:prefix("ferrotrace", atom_to_list(M))],
    ct:pal("~b processes of ferrotrace's own; flagged at the start ~p, 1.5 s later ~p; ~b functions timed, "
           "ferrotrace's among them: ~p", [length(Own), Flagged0, Flagged1, length(Calls), Ours]),
    ?assert(length(Own) >= 4, Own),
    ?assertEqual([], Flagged0),
    ?assertEqual([], Flagged1),
    ?assertEqual([], Ours),
    ok = call(Peer, ferrotrace, release, [S]),
    ok.

-spec counted_near_untraced(config()) -> ok.
counted_near_untraced(_Config) ->
    {ok, Peer, _} = ft_ct:peer(#{name => peer:random_name(ft_busy), connection => standard_io,
                                 args => ["+S", "2:2"]}),
    ok = call(Peer, ft_busy, preload, []),
    Work = call(Peer, ft_budget_work, start, [?WORKERS]),
    timer:sleep(500),
    Tax = {ft_budget_work, tax, 1},
    %% Rounds of: the orders per second untraced, then the counts of the start (with its
    %% baseline, as ferrotrace_start takes them) and the bare counts, each order one call
    %% of tax/1; judged on the rounds' medians.
    Rounds = [call(Peer, erlang, apply,
                   [fun() ->
                            process_flag(priority, high),
                            True = ft_budget_work:throughput(Work, 300),
                            Baseline = ferrotrace_nodeload:baseline(30),
                            {ok, Taken} = ferrotrace_backend:count_calls([{'_', '_', '_'}], 40, Baseline),
                            {ok, Bare} = ferrotrace_backend:count_calls([{'_', '_', '_'}], 40, undefined),
                            True2 = ft_budget_work:throughput(Work, 300),
                            {proplists:get_value(Tax, Taken, 0) * 2 / (True + True2),
                             proplists:get_value(Tax, Bare, 0) * 2 / (True + True2)}
                    end, []]) || _ <- lists:seq(1, 7)],
    {Taken, Bare} = {ft_ct:median([T || {T, _} <- Rounds]), ft_ct:median([B || {_, B} <- Rounds])},
    ct:pal("tax/1's calls counted among ~b busy processes against its calls untraced: ~.2f taken up "
           "by the node's slowdown, ~.2f as counted (rounds: ~p)", [?WORKERS, Taken, Bare, Rounds]),
    %% Counted bare, the calls read a fraction of what the workers make untraced.
    ?assert(Taken >= 0.85 andalso Taken =< 3.0, Rounds),
    ?assert(Taken >= Bare, Rounds),
    ok.

-spec generated_left_out(config()) -> ok.
generated_left_out(_Config) ->
    Work = ft_budget_work:start(2),
    Generated = fun(Calls) -> [MFA || #{mfa := MFA} <- Calls, ferrotrace_backend:generated(MFA)] end,
    {ok, S} = ferrotrace:calls({ft_budget_work, '_', '_'}, #{duration => 60000}),
    timer:sleep(1000),
    ok = ferrotrace:stop(S),
    Summary = #{calls := Calls} = ferrotrace:summary(S),
    Report = iolist_to_binary(ferrotrace:format(S)),
    {ok, S2} = ferrotrace:calls({ft_budget_work, '_', '_'}, #{duration => 60000, generated => true}),
    timer:sleep(1000),
    ok = ferrotrace:stop(S2),
    #{calls := Calls2} = ferrotrace:summary(S2),
    ft_budget_work:stop(Work),
    ct:pal("left out: ~p of ~b functions timed; with generated => true: ~p",
           [maps:get(generated_left_out, Summary), length(Calls), Generated(Calls2)]),
    ?assertEqual([], Generated(Calls)),
    ?assert(maps:get(generated_left_out, Summary) >= 1),
    ?assertMatch({_, _}, binary:match(Report, <<"left out: ">>)),
    ?assertNotEqual([], Generated(Calls2)),
    ?assertEqual({error, {bad_option, {generated, yes, <<"true (a wildcard traces the functions the compiler made too) "
                                                       "or false">>}}},
                 ferrotrace:calls({ft_budget_work, '_', '_'}, #{generated => yes})),
    _ = [ferrotrace:release(Id) || Id <- [S, S2]],
    ok.

%%--------------------------------------------------------------------------------------

%% A peer of two schedulers over standard I/O (no distribution, whose own processes would
%% be traced too), its modules loaded, 50 workers keeping both schedulers busy.
busy_peer() ->
    {ok, Peer, _} = ft_ct:peer(#{name => peer:random_name(ft_busy), connection => standard_io,
                                 args => ["+S", "2:2"]}),
    ok = call(Peer, ft_busy, preload, []),
    _ = call(Peer, ft_budget_work, start, [?WORKERS]),
    timer:sleep(500),
    Peer.

call(Peer, M, F, A) ->
    peer:call(Peer, M, F, A, 60000).
