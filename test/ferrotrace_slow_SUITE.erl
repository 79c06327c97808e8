%%% @doc The slow calls a session keeps: `slowest => K', `threshold => Ns', their lookups
%%% (`ferrotrace:slowest/2', `ferrotrace:slow_calls/2') and their lines in `report/1'.
%%%
%%% Each traced call runs in a process of its own, so a kept call's pid says which call it
%%% was, and the caller's own timing of that call is the ground truth it is checked against.
%%% Timing-based expectations are asserted only where the caller's measurements make them
%%% unambiguous (a loaded 2-core machine can stall a 1 ms call past a 100 ms one).
-module(ferrotrace_slow_SUITE).

-include("support/ft_ct.hrl").

-export([slowest_are_the_largest/1, exceptions_kept/1, threshold_bound/1, off/1,
         bad_options/1, report_lines/1, own_time/1, recorder/1]).

-define(WORK, {ft_slow_target, work, 1}).
-define(FAIL, {ft_slow_target, fail, 1}).
-define(FAST, {ft_slow_target, fast, 1}).
-define(LONG, 120000).
-define(MS, 1000000).

suite() ->
    [{ct_hooks, [{ft_ct, [ft_slow_target]}]}].

all() ->
    [slowest_are_the_largest, exceptions_kept, threshold_bound, off, bad_options, report_lines,
     own_time, recorder].

%%--------------------------------------------------------------------------------------

%% 30 calls of work/1: 27 of 1 ms and 3 of 100, 200 and 300 ms, in a shuffled order, each
%% in its own process; `slowest => 3'.
-spec slowest_are_the_largest(config()) -> ok.
slowest_are_the_largest(_Config) ->
    Sleeps = shuffle(lists:duplicate(27, 1) ++ [100, 200, 300]),
    {ok, S} = ferrotrace:calls(?WORK, #{duration => ?LONG, slowest => 3}),
    Before = erlang:system_time(microsecond),
    Truth = [call_in_process(fun() -> ft_slow_target:work(Ms) end, Ms) || Ms <- Sleeps],
    After = erlang:system_time(microsecond),
    ok = ferrotrace:stop(S),
    Kept = ferrotrace:slowest(S, ?WORK),
    ct:pal("kept: ~p~ntruth: ~p", [Kept, Truth]),
    ?assertEqual(3, length(Kept)),
    Durations = [D || #{duration := D} <- Kept],
    ?assertEqual(lists:reverse(lists:sort(Durations)), Durations, slowest_first),
    ByPid = maps:from_list([{Pid, {Ms, Outer}} || {Pid, Ms, Outer, _} <- Truth]),
    %% Each kept call is one of ours, lies within the caller's span of it and is at least
    %% its sleep; it returned; it began within the test.
    [begin
         {Ms, Outer} = maps:get(Pid, ByPid),
         ?assert(D >= low(Ms) andalso D =< up(Outer), {duration, Pid, Ms, D, Outer}),
         ?assert(At >= Before - 1000 andalso At =< After + 1000, {started_at, At, Before, After})
     end || #{pid := Pid, duration := D, started_at := At, result := return} <- Kept],
    %% No call left out was certainly slower than one kept.
    KeptPids = [P || #{pid := P} <- Kept],
    MinKept = lists:min(Durations),
    [?assert(low(Ms) =< MinKept, {left_out_slower, Pid, Ms, MinKept})
     || {Pid, Ms, _, _} <- Truth, not lists:member(Pid, KeptPids)],
    %% Where the caller's spans leave no doubt (every short call took less than the
    %% shortest long sleep), the kept ones are exactly the three long ones, longest first.
    ShortMax = lists:max([Outer || {_, 1, Outer, _} <- Truth]),
    case ShortMax < low(100) of
        true ->
            Long = [Pid || Ms <- [300, 200, 100], {Pid, M, _, _} <- Truth, M =:= Ms],
            ?assertEqual(Long, KeptPids);
        false ->
            ct:pal("a 1 ms call took ~b ns: identity not asserted", [ShortMax])
    end,
    %% The summary's entry carries the same list.
    #{calls := [#{mfa := ?WORK, slowest := Kept, slow_calls_dropped := 0}]} = ferrotrace:summary(S),
    ok.

%% Exceptions are kept with their kind.
-spec exceptions_kept(config()) -> ok.
exceptions_kept(_Config) ->
    {ok, S} = ferrotrace:calls(?FAIL, #{duration => ?LONG, slowest => 2}),
    Truth = [call_in_process(fun() -> ft_slow_target:fail(Ms) end, Ms) || Ms <- [5, 40, 20]],
    ok = ferrotrace:stop(S),
    [{error, {slow_fail, Ms}} = R || {_, Ms, _, R} <- Truth],
    Kept = ferrotrace:slowest(S, ?FAIL),
    ct:pal("kept: ~p", [Kept]),
    ?assertEqual(2, length(Kept)),
    Pids = [P || {P, _, _, _} <- Truth],
    [?assert(lists:member(P, Pids)) || #{pid := P} <- Kept],
    ?assertEqual([exception, exception], [R || #{result := R} <- Kept]),
    #{calls := [#{exceptions := 3}]} = ferrotrace:summary(S),
    ok.

%% `threshold => 50 ms', `max_slow_calls => 3': 4 calls of 120 ms among 12 fast ones.
-spec threshold_bound(config()) -> ok.
threshold_bound(_Config) ->
    Threshold = 50 * ?MS,
    {ok, S} = ferrotrace:calls([?WORK, ?FAST], #{duration => ?LONG, threshold => Threshold,
                                                 max_slow_calls => 3}),
    Sleeps = shuffle(lists:duplicate(8, 0) ++ lists:duplicate(4, 120)),
    Truth = [call_in_process(fun() -> ft_slow_target:work(Ms) end, Ms) || Ms <- Sleeps],
    FastTruth = [call_in_process(fun() -> ft_slow_target:fast(X) end, 0) || X <- lists:seq(1, 5)],
    ok = ferrotrace:stop(S),
    Over = ferrotrace:slow_calls(S, ?WORK),
    ct:pal("over the threshold: ~p~ntruth: ~p", [Over, Truth]),
    ?assertEqual(3, length(Over)),
    [?assert(D > Threshold, {under_threshold, D}) || #{duration := D} <- Over],
    Starts = [At || #{started_at := At} <- Over],
    ?assertEqual(lists:sort(Starts), Starts, call_order),
    #{calls := Calls} = ferrotrace:summary(S),
    [#{slow_calls_dropped := Dropped}] = [C || C = #{mfa := ?WORK} <- Calls],
    %% At least the 4 long calls were over it; exactly those when no short call was slowed
    %% past the threshold (the caller's spans say).
    ?assert(3 + Dropped >= 4, Dropped),
    case lists:max([Outer || {_, 0, Outer, _} <- Truth ++ FastTruth]) < Threshold of
        true ->
            ?assertEqual(1, Dropped),
            LongPids = [P || {P, 120, _, _} <- Truth],
            [?assert(lists:member(P, LongPids)) || #{pid := P} <- Over],
            ?assertEqual([], ferrotrace:slow_calls(S, ?FAST));
        false ->
            ok
    end,
    %% slowest is independent of the threshold: the default 10 are kept.
    ?assertEqual(10, length(ferrotrace:slowest(S, ?WORK))),
    ok.

%% `slowest => 0' keeps nothing; without a threshold slow_calls/2 is empty.
-spec off(config()) -> ok.
off(_Config) ->
    {ok, S} = ferrotrace:calls(?WORK, #{duration => ?LONG, slowest => 0}),
    _ = [call_in_process(fun() -> ft_slow_target:work(Ms) end, Ms) || Ms <- [1, 2, 3]],
    ok = ferrotrace:stop(S),
    ?assertEqual([], ferrotrace:slowest(S, ?WORK)),
    ?assertEqual([], ferrotrace:slow_calls(S, ?WORK)),
    #{calls := [#{count := 3, slowest := []}]} = ferrotrace:summary(S),
    ?assertMatch({error, {no_such_function, {ft_slow_target, nope, 0}}},
                 ferrotrace:slowest(S, {ft_slow_target, nope, 0})),
    ?assertMatch({error, {bad_mfa, nope}}, ferrotrace:slowest(S, nope)),
    ?assertMatch({error, {bad_mfa, "ft_slow_target:work/x", <<_/binary>>}},
                 ferrotrace:slowest(S, "ft_slow_target:work/x")),
    %% A function as a spec string names it as a tuple does.
    ?assertEqual([], ferrotrace:slowest(S, "ft_slow_target:work/1")),
    ?assertMatch({error, _}, ferrotrace:slowest(no_such_session_name, ?WORK)),
    ok.

-spec bad_options(config()) -> ok.
bad_options(_Config) ->
    [?assertMatch({error, {bad_option, {Key, Value, _}}},
                  ferrotrace:calls(?WORK, #{Key => Value}))
     || {Key, Value} <- [{slowest, -1}, {slowest, 1001}, {slowest, many}, {threshold, 0},
                         {threshold, 1.5}, {max_slow_calls, 0}]],
    ?assertEqual([], ft_ct:sessions()),
    ok.

%% report/1 prints the slowest calls under the histogram, with the registered name of the
%% process that made them.
-spec report_lines(config()) -> ok.
report_lines(_Config) ->
    {ok, S} = ferrotrace:calls(?WORK, #{duration => ?LONG}),
    Parent = self(),
    Named = spawn(fun() ->
                          register(ft_slow_named_caller, self()),
                          _ = ft_slow_target:work(30),
                          _ = ft_slow_target:work(1),
                          Parent ! {done, self()},
                          receive stop -> ok end
                  end),
    try
        receive {done, Named} -> ok after 30000 -> error(caller_timeout) end,
        ok = ferrotrace:stop(S),
        Text = unicode:characters_to_list(ferrotrace:format(S)),
        ct:pal("report:~n~ts", [Text]),
        [?assertNotEqual(nomatch, string:find(Text, Word), {missing, Word})
         || Word <- ["slowest calls (2 of 2 kept)", "ft_slow_named_caller", pid_to_list(Named),
                     "return"]],
        %% The 30 ms call is printed first.
        [#{started_at := At} | _] = ferrotrace:slowest(S, ?WORK),
        ?assertNotEqual(nomatch, string:find(Text, ferrotrace_slow:format_time(At)))
    after
        Named ! stop
    end,
    ok.

%% caller(20, 60) sleeps 20 ms and calls callee(60), which sleeps 60 ms: the caller's own
%% time is its latency less the callee's, exactly, and at least its own sleep.
-spec own_time(config()) -> ok.
own_time(_Config) ->
    Caller = {ft_slow_target, caller, 2},
    Callee = {ft_slow_target, callee, 1},
    {ok, S} = ferrotrace:calls([Caller, Callee], #{duration => ?LONG}),
    Truth = [call_in_process(fun() -> ft_slow_target:caller(20, 60) end, 80) || _ <- lists:seq(1, 5)],
    ok = ferrotrace:stop(S),
    #{calls := Calls} = ferrotrace:summary(S),
    [F] = [C || C = #{mfa := M} <- Calls, M =:= Caller],
    [G] = [C || C = #{mfa := M} <- Calls, M =:= Callee],
    ct:pal("caller: ~p~ncallee: ~p", [F, G]),
    #{count := 5, total := FTotal, own := #{total := FOwn, p50 := FOwn50, max := FOwnMax}} = F,
    #{count := 5, total := GTotal, own := #{total := GOwn}} = G,
    ?assertEqual(FTotal - GTotal, FOwn),
    ?assertEqual(GTotal, GOwn),
    ?assert(FOwn >= 5 * low(20), FOwn),
    ?assert(GTotal >= 5 * low(60), GTotal),
    ?assert(FOwn50 >= low(20) andalso FOwnMax =< up(lists:max([O || {_, _, O, _} <- Truth])) - low(60),
            {own, FOwn50, FOwnMax}),
    ok.

%% `recent => 6': 10 calls of fast/1, each in its own process, leave exactly the call and
%% return of the last three, in order; the printed lines read like recon_trace's.
-spec recorder(config()) -> ok.
recorder(_Config) ->
    {ok, S} = ferrotrace:calls(?FAST, #{duration => ?LONG, recent => 6}),
    Truth = [call_in_process(fun() -> ft_slow_target:fast(X) end, 0) || X <- lists:seq(1, 10)],
    ok = ferrotrace:stop(S),
    Events = ferrotrace:recent(S),
    ct:pal("recent: ~p", [Events]),
    LastPids = [P || {P, _, _, _} <- lists:nthtail(7, Truth)],
    ?assertEqual(lists:append([[{P, call}, {P, return}] || P <- LastPids]),
                 [{P, K} || #{pid := P, event := K} <- Events]),
    Ats = [At || #{at := At} <- Events],
    ?assertEqual(lists:sort(Ats), Ats),
    [?assertMatch(#{mfa := ?FAST, duration := D} when is_integer(D), E)
     || E = #{event := return} <- Events],
    {ok, Text} = ft_ct:capture(fun() -> ferrotrace:print_recent(S) end),
    ct:pal("printed:~n~ts", [Text]),
    Lines = string:split(string:trim(Text, trailing), "\n", all),
    ?assertEqual(6, length(Lines)),
    Call = "^\\d\\d:\\d\\d:\\d\\d\\.\\d{6} <\\d+\\.\\d+\\.\\d+> ft_slow_target:fast/1",
    [?assertMatch({match, _}, re:run(L, Call ++ "$"), L) || L <- Lines,
                                                        string:find(L, "-->") =:= nomatch],
    Returns = [L || L <- Lines, string:find(L, "-->") =/= nomatch],
    ?assertEqual(3, length(Returns)),
    [?assertMatch({match, _}, re:run(L, Call ++ " --> return \\(.+\\)$"), L) || L <- Returns],
    %% calls/2 keeps the last 200 by default (for the html page); `recent => 0' is off, a
    %% clear error.
    {ok, S1} = ferrotrace:calls(?FAST, #{duration => ?LONG}),
    _ = [ft_slow_target:fast(I) || I <- lists:seq(1, 150)],
    ok = ferrotrace:stop(S1),
    ok = ft_ct:poll(fun() -> length(ferrotrace:recent(S1)) =:= 200 end, 5000),
    {ok, S2} = ferrotrace:calls(?FAST, #{duration => ?LONG, recent => 0}),
    ?assertMatch({error, {no_recorder, _}}, ferrotrace:recent(S2)),
    ?assertMatch({error, {bad_option, {recent, -1, _}}}, ferrotrace:calls(?FAST, #{recent => -1})),
    ok.

%%--------------------------------------------------------------------------------------

%% Runs Fun in a new process; {Pid, Ms, OuterNs, Result}: the span the caller measured.
call_in_process(Fun, Ms) ->
    Parent = self(),
    Ref = make_ref(),
    {Pid, MRef} = spawn_monitor(fun() ->
                                        T0 = erlang:monotonic_time(nanosecond),
                                        Result = try Fun() catch C:R -> {C, R} end,
                                        Outer = erlang:monotonic_time(nanosecond) - T0,
                                        Parent ! {Ref, Outer, Result}
                                end),
    receive
        {Ref, Outer, Result} ->
            erlang:demonitor(MRef, [flush]),
            {Pid, Ms, Outer, Result}
    after 60000 ->
            exit(Pid, kill),
            error(call_timeout)
    end.

%% The least a sleep of Ms can take by the tracer's clock (1% for clock slew).
low(Ms) -> Ms * ?MS - Ms * ?MS div 100.

%% The most a traced call inside a span of Ns can take by the tracer's clock (1% slew).
up(Ns) -> Ns + Ns div 90.

shuffle(List) ->
    [X || {_, X} <- lists:sort([{rand:uniform(), X} || X <- List])].
