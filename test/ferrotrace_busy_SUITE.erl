%%% @doc ferrotrace on a busy node, as an operator reaches for it: a peer node whose two
%%% schedulers are kept busy by 50 processes of ft_budget_work (ferrotrace's modules loaded
%%% first, as in a release).
%%%
%%% - ready_at_once: a `{'_', '_', '_'}' start returns within 10 s (15 to 26 s in the issue
%%%   that asked for this, when the start ran at normal priority among the 50; 0.14 to
%%%   0.25 s measured, up to 3.3 s at load average 8 to 10; printed: `make busy' prints it
%%%   too), the session counts events, and
%%%   the node's own normal-priority processes still answer. The node's first calibration
%%%   is not in the start's way: `pending' at the start, measured once the session runs,
%%%   and its costs compensated from then on.
%%% - cold_start: the same start as an operator's first call in an interactive node, where
%%%   nothing of ferrotrace is loaded yet: within 10 s (0.34 to 1.2 s measured, up to 2.3 s
%%%   at load average 10), and
%%%   ferrotrace's modules all loaded from their files (ferrotrace_code reads what a start
%%%   runs in one go before it goes on, the rest beside it).
%%% - own_processes_untraced: with `pids => all' (the default), no process of ferrotrace's
%%%   own carries a trace flag, whatever session runs (a budget's tick and the interval
%%%   snapshots included).
%%% - counts_taken_up: the calls a budgeted start counts before it sets any pattern
%%%   (ferrotrace_tracing:count_calls/3) are taken up by how much counting slowed the node
%%%   against a baseline measured untraced: against a baseline that says the node ran
%%%   infinitely faster, by the most there is (8 times); without one, as counted. What the
%%%   counts come to against the work's untraced throughput is a figure (1.1 to 1.4 times;
%%%   0.14 to 0.41 as counted).
%%% - counters_off_after_then: a trip's count (ferrotrace_tracing:count_calls/4) hands
%%%   its rates to a function while its counters still count (the budget sheds there),
%%%   and takes them off once it returns or raises; a function that is not one is refused.
%%% - generated_left_out: under a wildcard, the functions the compiler made are left out
%%%   unless `generated => true'.
%%%
%%% The two starts' bounds are this suite's only wall-clock figures: 8 to 70 times what was
%%% measured on a quiet machine, 3 to 7 times at load average 8 to 10, and under what the start
%%% took when it queued behind the work (test/README.md, "Cases that touch timing").
%%% Measured figures go to the CT log with ct:pal.
-module(ferrotrace_busy_SUITE).

-include("support/ft_ct.hrl").

-export([ready_at_once/1, cold_start/1, own_processes_untraced/1, counts_taken_up/1, counters_off_after_then/1,
         generated_left_out/1]).

%% A start on the busy peer returns within this (ms): 15 to 26 s when it ran at normal
%% priority among the work, 0.14 to 0.25 s now, up to 1.4 s at load average 10 (two other
%% Common Test runs on the 2 cores), 3.3 s in one of those runs, in a chroot. The start
%% runs at high priority: the work does not slow it, only the machine's other work, which
%% would have to be 3 times that.
-define(START_BOUND_MS, 10000).
%% The same for a node's first start, which loads ferrotrace's modules and calibrates too
%% (0.34 to 1.2 s, up to 2.3 s at load average 10).
-define(COLD_START_BOUND_MS, 10000).
-define(WORKERS, 50).

suite() ->
    [{timetrap, {minutes, 5}}, {ct_hooks, [{ft_ct, [ft_budget_work]}]}].

all() ->
    [ready_at_once, cold_start, own_processes_untraced, counts_taken_up, counters_off_after_then, generated_left_out].

%%--------------------------------------------------------------------------------------

-spec ready_at_once(config()) -> ok.
ready_at_once(_Config) ->
    Peer = busy_peer(),
    Pinger = call(Peer, ft_busy, start_pinger, []),
    {Ms, {ok, S}} = call(Peer, ft_busy, timed, [ferrotrace, calls, [{'_', '_', '_'}, #{duration => 60000, owner => none}]]),
    #{calibration := AtStart} = call(Peer, ferrotrace, summary, [S]),
    Seen = fun() -> #{events := #{seen := N}} = call(Peer, ferrotrace, summary, [S]), N end,
    _ = ft_ct:poll(fun() -> Seen() > 10000 end, 10000),
    %% The node's first calibration, measured once the session's steps after the start are
    %% over, and given to it (0.5 to 2 s here; the session runs until stopped below).
    ok = ft_ct:poll(fun() -> maps:get(calibration, call(Peer, ferrotrace, summary, [S])) =/= pending end, 60000),
    Landed = call(Peer, ferrotrace, summary, [S]),
    Ping = call(Peer, ft_busy, stop_pinger, [Pinger]),
    %% On OTP 25 a second broad session is refused while the first traces every process.
    ok = call(Peer, ferrotrace, stop, [S]),
    {Ms2, {ok, S2}} = call(Peer, ft_busy, timed, [ferrotrace, calls, [{'_', '_', '_'}, #{duration => 1000, owner => none}]]),
    Events = maps:get(events, call(Peer, ferrotrace, summary, [S])),
    ct:pal("{'_','_','_'} start among ~b busy processes: ~b ms, a second one ~b ms; events ~p; longest ping ~b ms;~n"
           "the calibration after the start: ~p", [?WORKERS, Ms, Ms2, Events, Ping, maps:get(calibration, Landed)]),
    ?assert(Ms =< ?START_BOUND_MS, Ms),
    ?assert(Ms2 =< ?START_BOUND_MS, Ms2),
    ?assert(maps:get(seen, Events) > 10000, Events),
    ?assertEqual(pending, AtStart),
    case Landed of
        #{calibration := #{call_ns := _, return_ns := _}} ->
            %% Compensating: the call entries keep their latencies as measured beside (`raw').
            ?assertMatch(#{compensated := true, calls := [#{raw := _} | _]}, Landed);
        #{calibration := {error, timeout}} ->
            %% Each measurement has 2 s, three tries (ferrotrace_calibrate, ferrotrace_start):
            %% a loaded machine can take them all (once in a chroot at load average 8, where
            %% this start took 3.3 s). The session then says why, uncompensated.
            ?assertMatch(#{compensated := false}, Landed)
    end,
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
    %% What reads a session loads beside the start, after it.
    ok = ft_ct:poll(fun() -> lists:all(fun(M) -> call(Peer, erlang, module_loaded, [M]) end, Modules) end, 30000),
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
    {ok, S} = call(Peer, ferrotrace, calls, [{'_', '_', '_'}, #{duration => 60000, owner => none,
                                                                max_overhead => 0.05, intervals => 1000}]),
    %% After the start, and once the budget's first moment is over (ticks for 1.5 s, the
    %% interval snapshots' first second, the keeper's first steps).
    Flagged0 = call(Peer, ft_busy, own_flagged, []),
    ok = ft_ct:poll(fun() ->
                            case call(Peer, ferrotrace, summary, [S]) of
                                #{budget := #{cautious := false}} -> true;
                                _ -> false
                            end
                    end, 30000),
    Flagged1 = call(Peer, ft_busy, own_flagged, []),
    Own = call(Peer, ferrotrace_own, pids, []),
    #{calls := Calls} = call(Peer, ferrotrace, summary, [S]),
    Ours = [MFA || #{mfa := {M, _, _} = MFA} <- Calls, lists:prefix("ferrotrace", atom_to_list(M))],
    ct:pal("~b processes of ferrotrace's own; flagged at the start ~p, after the first moment ~p; ~b functions timed, "
           "ferrotrace's among them: ~p", [length(Own), Flagged0, Flagged1, length(Calls), Ours]),
    ?assert(length(Own) >= 4, Own),
    ?assertEqual([], Flagged0),
    ?assertEqual([], Flagged1),
    ?assertEqual([], Ours),
    ok = call(Peer, ferrotrace, release, [S]),
    ok.

%% Rounds of two countings of every function among the busy processes, 200 ms each, in turn:
%% against a baseline that says the node did its work infinitely faster per busy
%% scheduler time (the slowdown is then the most the counts are taken up by, 8), and
%% without a baseline (as counted). tax/1 (one call per order) is counted 8 times up, give
%% or take what the work did differently in the two windows: judged on the median of the
%% rounds, within a factor of two. Also: ferrotrace's own modules are never counted, a
%% function the work never calls has no count.
-spec counts_taken_up(config()) -> ok.
counts_taken_up(_Config) ->
    Peer = busy_peer(),
    Tax = {ft_budget_work, tax, 1},
    Rounds = [call(Peer, erlang, apply,
                   [fun() ->
                            process_flag(priority, high),
                            %% What ferrotrace_nodeload:baseline/1 turns on for the start.
                            ok = ferrotrace_nodeload:enable(),
                            Faster = #{per_busy => 1.0e30, utilization => 1.0, reductions_per_s => 1.0e30,
                                       noise => 0.0},
                            {ok, Taken} = ferrotrace_tracing:count_calls([{'_', '_', '_'}], 200, Faster),
                            {ok, Bare} = ferrotrace_tracing:count_calls([{'_', '_', '_'}], 200, undefined),
                            {Taken, Bare}
                    end, []]) || _ <- lists:seq(1, 7)],
    Ratios = [proplists:get_value(Tax, Taken, 0) / max(1.0e-9, proplists:get_value(Tax, Bare, 0))
              || {Taken, Bare} <- Rounds],
    Ratio = ft_ct:median(Ratios),
    ct:pal("tax/1's calls per s counted among ~b busy processes, taken up by the most / as counted: ~w; median ~.2f",
           [?WORKERS, [{round(proplists:get_value(Tax, T, 0)), round(proplists:get_value(Tax, B, 0))} || {T, B} <- Rounds],
            Ratio]),
    ?assert(Ratio >= 4.0 andalso Ratio =< 16.0, Ratios),
    Counted = lists:usort([MFA || {Taken, Bare} <- Rounds, {MFA, _} <- Taken ++ Bare]),
    ?assert(lists:member(Tax, Counted)),
    ?assertNot(lists:member({ft_budget_work, done, 1}, Counted)),
    ?assertEqual([], [MFA || {M, _, _} = MFA <- Counted, lists:prefix("ferrotrace", atom_to_list(M))]),
    ok.

%% In this node, one worker: tax/1 is counted (it runs once an order, and the count waits
%% 200 ms, where one order takes microseconds), the counters are set while the function
%% runs and gone after, whether it returned or raised.
-spec counters_off_after_then(config()) -> ok.
counters_off_after_then(_Config) ->
    Work = ft_budget_work:start(1),
    Tax = {ft_budget_work, tax, 1},
    Specs = [{ft_budget_work, '_', '_'}],
    try
        {ok, {Rates, During}} = ferrotrace_tracing:count_calls(Specs, 200, undefined,
                                                               fun(Rates) -> {Rates, counting(Tax)} end),
        ?assert(proplists:get_value(Tax, Rates, 0) > 0, Rates),
        ?assert(During),
        ?assertNot(counting(Tax)),
        ?assertError(boom, ferrotrace_tracing:count_calls(Specs, 10, undefined, fun(_) -> error(boom) end)),
        ?assertNot(counting(Tax)),
        ?assertEqual({error, badarg}, ferrotrace_tracing:count_calls(Specs, 10, undefined, fun() -> ok end)),
        ?assertNot(counting(Tax))
    after
        ft_budget_work:stop(Work)
    end,
    ok.

%% Whether the VM counts `MFA''s calls: in a trace session (OTP 27+: the count's own), or
%% the node's counters (OTP 25 and 26).
counting(MFA) ->
    _ = code:ensure_loaded(trace),
    case erlang:function_exported(trace, session_info, 1) of
        true -> trace:session_info(MFA) =/= [];
        false -> is_integer(element(2, erlang:trace_info(MFA, call_count)))
    end.

-spec generated_left_out(config()) -> ok.
generated_left_out(_Config) ->
    Work = ft_budget_work:start(2),
    Generated = fun(Calls) -> [MFA || #{mfa := MFA} <- Calls, ferrotrace_tracing:generated(MFA)] end,
    Timed = fun(Id, Which) -> lists:any(Which, [MFA || #{mfa := MFA} <- maps:get(calls, ferrotrace:summary(Id))]) end,
    {ok, S} = ferrotrace:calls({ft_budget_work, '_', '_'}, #{duration => 60000}),
    %% Until the work's own functions are timed (tax/1: once per order), then no generated one.
    ok = ft_ct:poll(fun() -> Timed(S, fun(MFA) -> MFA =:= {ft_budget_work, tax, 1} end) end, 10000),
    ok = ferrotrace:stop(S),
    Summary = #{calls := Calls} = ferrotrace:summary(S),
    Report = iolist_to_binary(ferrotrace:format(S)),
    {ok, S2} = ferrotrace:calls({ft_budget_work, '_', '_'}, #{duration => 60000, generated => true}),
    _ = ft_ct:poll(fun() -> Timed(S2, fun ferrotrace_tracing:generated/1) end, 10000),
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
