%%% @doc Aggregation split over several threads (`aggregators => N'): every figure must be
%%% what one aggregator gives, however the processes spread over the aggregators. Counts are
%%% exact (the workers run to the end before the session is read, with rings large enough
%%% not to drop); the stack, slow-call and message figures are checked where they cross
%%% aggregators: a process's calls, the slowest of many processes, a sender and its receiver.
-module(ferrotrace_aggregators_SUITE).

-include("support/ft_ct.hrl").

-export([calls_exact/1, same_as_one/1, slowest_across/1, keys_across/1, messages_across/1,
         refused/1]).

-define(F, {ft_test_target, f, 1}).
-define(REC, {ft_test_target, rec, 1}).
-define(CATCHER, {ft_test_target, catcher, 1}).
-define(RAISER, {ft_test_target, raiser, 1}).
-define(SLEEPER, {ft_test_target, sleeper, 1}).
-define(LONG, 120000).
%% Large enough that nothing drops while the workers run on a loaded 2-core machine.
-define(RING, 1 bsl 18).

suite() ->
    [{ct_hooks, [{ft_ct, [ft_test_target]}]}].

all() ->
    [calls_exact, same_as_one, slowest_across, keys_across, messages_across, refused].

%%--------------------------------------------------------------------------------------

%% 8 processes call f/1 and recurse, over 4 aggregators: every count exact, every call
%% paired, and each histogram holds every call. Latencies as measured (`compensate =>
%% false'): rec/1 does next to nothing besides its traced calls, and a calibration measured
%% on a loaded machine can take all of each call out, own time and latency alike, both
%% then at the histograms' floor (the likely cause of the own-time assertion's one failure
%% in a CI run), which says nothing of how the aggregators split own time.
-spec calls_exact(config()) -> ok.
calls_exact(_Config) ->
    {Procs, PerProc, Recs, Depth} = {8, 3000, 50, 20},
    {ok, S} = ferrotrace:calls([?F, ?REC], #{aggregators => 4, ring_size => ?RING, duration => ?LONG,
                                             compensate => false}),
    run(Procs, fun() -> ft_test_target:call_f(PerProc), ft_test_target:call_rec(Recs, Depth) end),
    ok = ferrotrace:stop(S),
    Summary = ferrotrace:summary(S),
    ct:pal("~p", [maps:with([events, pairing, aggregators], Summary)]),
    ?assertMatch(#{aggregators := 4, events := #{dropped := 0},
                   pairing := #{unmatched_returns := 0, abandoned_calls := 0, open_calls := 0}},
                 Summary),
    F = entry(Summary, ?F),
    Rec = entry(Summary, ?REC),
    ?assertMatch(#{count := N, returns := N, exceptions := 0} when N =:= Procs * PerProc, F),
    RecCalls = Procs * Recs * (Depth + 1),
    ?assertMatch(#{count := N, returns := N} when N =:= RecCalls, Rec),
    ?assertEqual(Procs * PerProc, histogram_count(S, ?F)),
    ?assertEqual(RecCalls, histogram_count(S, ?REC)),
    %% Nested calls: rec's own time is less than its total, as with one aggregator.
    ?assert(maps:get(total, maps:get(own, Rec)) < maps:get(total, Rec)),
    ok.

%% The same work with one aggregator and with three: the same counts, pairing and call paths
%% (the folded stacks' lines, without their times).
-spec same_as_one(config()) -> ok.
same_as_one(_Config) ->
    Work = fun() ->
                   ft_test_target:call_rec(20, 6),
                   ft_test_target:call_catcher(30),
                   ft_test_target:call_f(200)
           end,
    Read = fun(Aggregators) ->
                   {ok, S} = ferrotrace:calls([?F, ?REC, ?CATCHER, ?RAISER],
                                              #{aggregators => Aggregators, ring_size => ?RING,
                                                duration => ?LONG}),
                   run(6, Work),
                   ok = ferrotrace:stop(S),
                   Summary = ferrotrace:summary(S),
                   Folded = ferrotrace:export(S, collapsed),
                   ok = ferrotrace:release(S),
                   Counts = lists:sort([{MFA, maps:with([count, returns, exceptions], E)}
                                        || #{mfa := MFA} = E <- maps:get(calls, Summary)]),
                   {Counts, maps:get(pairing, Summary), paths(Folded), maps:get(aggregators, Summary)}
           end,
    {Counts1, Pairing1, Paths1, 1} = Read(1),
    {Counts3, Pairing3, Paths3, 3} = Read(3),
    ct:pal("~p~n~p", [Counts1, Paths1]),
    ?assertMatch([_, _, _, _], Counts1),
    ?assertEqual(Counts1, Counts3),
    ?assertEqual(Pairing1, Pairing3),
    ?assertEqual(Paths1, Paths3),
    ok.

%% Twelve processes each sleep a different time: the five slowest calls, kept by different
%% aggregators, come back merged, slowest first, each with its own arguments.
-spec slowest_across(config()) -> ok.
slowest_across(_Config) ->
    {ok, S} = ferrotrace:calls(?SLEEPER, #{aggregators => 3, slowest => 5, args => true,
                                           duration => ?LONG}),
    Self = self(),
    Pids = [spawn(fun() -> ft_test_target:sleeper(10 * I), Self ! {slept, self()} end)
            || I <- lists:seq(1, 12)],
    [receive {slept, P} -> ok after ?LONG -> error(timeout) end || P <- Pids],
    ok = ferrotrace:stop(S),
    Kept = ferrotrace:slowest(S, ?SLEEPER),
    ct:pal("~p", [Kept]),
    ?assertEqual([[120], [110], [100], [90], [80]], [Args || #{args := Args} <- Kept]),
    ?assertEqual(5, length(lists:usort([P || #{pid := P} <- Kept]))),
    #{calls := [#{count := 12, returns := 12}]} = ferrotrace:summary(S),
    ok.

%% Keys from many processes over three aggregators: f(N) keyed by N rem 3, each of 6
%% processes calling f(300) .. f(1): every key counted exactly, its histogram full.
-spec keys_across(config()) -> ok.
keys_across(_Config) ->
    {ok, Tokens, _} = erl_scan:string("fun([X]) -> message(X rem 3) end."),
    {ok, [Expr]} = erl_parse:parse_exprs(Tokens),
    {value, ByRem, _} = erl_eval:expr(Expr, erl_eval:new_bindings()),
    {ok, S} = ferrotrace:calls({ft_test_target, f, ByRem}, #{aggregators => 3, ring_size => ?RING,
                                                             duration => ?LONG}),
    run(6, fun() -> ft_test_target:call_f(300) end),
    ok = ferrotrace:stop(S),
    Entry = entry(ferrotrace:summary(S), ?F),
    ct:pal("~p", [Entry]),
    ?assertMatch(#{count := 1800, returns := 1800, keys_overflow := 0}, Entry),
    ?assertEqual([{0, 600}, {1, 600}, {2, 600}],
                 lists:sort([{K, N} || #{key := K, count := N} <- maps:get(by_key, Entry)])),
    ok.

%% Senders and receivers spread over two aggregators: every message counted once, on both
%% sides, and the top senders merged.
-spec messages_across(config()) -> ok.
messages_across(_Config) ->
    {Pairs, N} = {6, 400},
    Receivers = [receiver(N) || _ <- lists:seq(1, Pairs)],
    Senders = [sender(B, N) || B <- Receivers],
    {ok, S} = ferrotrace:processes([messages], #{pids => Senders ++ Receivers, aggregators => 2,
                                                 ring_size => ?RING, duration => ?LONG}),
    [A ! go || A <- Senders],
    ok = wait_down(Senders ++ Receivers),
    ok = ferrotrace:stop(S),
    #{messages := M, events := Events, aggregators := 2} = ferrotrace:summary(S),
    ct:pal("~p~n~p", [M, Events]),
    ?assertMatch(#{dropped := 0}, Events),
    ?assertMatch(#{sent := Sent} when Sent =:= Pairs * N, M),
    %% Each receiver takes its N, each sender its `go'.
    ?assertEqual(Pairs * (N + 1), maps:get(received, M)),
    Top = maps:get(top_senders, M),
    ?assertEqual(lists:sort(Senders), lists:sort([P || #{pid := P, count := C} <- Top, C =:= N])),
    ok.

%% Bad values are refused with what is accepted; `auto' is taken.
-spec refused(config()) -> ok.
refused(_Config) ->
    Accepted = <<"an integer from 1 to 16, or auto">>,
    ?assertEqual({error, {bad_option, {aggregators, 0, Accepted}}},
                 ferrotrace:calls(?F, #{aggregators => 0})),
    ?assertEqual({error, {bad_option, {aggregators, 17, Accepted}}},
                 ferrotrace:calls(?F, #{aggregators => 17})),
    ?assertEqual({error, {bad_option, {aggregators, many, Accepted}}},
                 ferrotrace:calls(?F, #{aggregators => many})),
    {ok, S} = ferrotrace:calls(?F, #{aggregators => auto}),
    #{aggregators := Auto} = ferrotrace:summary(S),
    ?assertEqual(max(1, (erlang:system_info(logical_processors_available) + 3) div 4),
                 min(16, Auto)),
    ok = ferrotrace:release(S).

%%--------------------------------------------------------------------------------------

run(Procs, Work) ->
    Self = self(),
    Pids = [spawn(fun() -> Work(), Self ! {done, self()} end) || _ <- lists:seq(1, Procs)],
    [receive {done, P} -> ok after ?LONG -> error(timeout) end || P <- Pids],
    ok.

entry(#{calls := Calls}, MFA) ->
    [Entry] = [E || #{mfa := M} = E <- Calls, M =:= MFA],
    Entry.

histogram_count(S, MFA) ->
    lists:sum([C || {_, _, C} <- ferrotrace:histogram(S, MFA)]).

%% Folded stack lines without their times.
paths(Folded) ->
    Lines = string:split(string:trim(unicode:characters_to_list(Folded)), "\n", all),
    lists:sort([lists:sublist(L, string:rchr(L, $\s) - 1) || L <- Lines, L =/= ""]).

receiver(N) ->
    spawn(fun() -> [receive {msg, _} -> ok end || _ <- lists:seq(1, N)], ok end).

sender(To, N) ->
    spawn(fun() -> receive go -> [To ! {msg, I} || I <- lists:seq(1, N)], ok end end).

wait_down(Pids) ->
    Refs = [erlang:monitor(process, P) || P <- Pids],
    [receive {'DOWN', R, process, _, _} -> ok after ?LONG -> error(timeout) end || R <- Refs],
    ok.
