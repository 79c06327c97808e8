%%% @doc ferrotrace on a busy node: what an operator meets when the schedulers are full.
%%%
%%% Three parts, each printed as `busy ...' lines (run by `make busy', about 15 minutes with
%%% three rounds):
%%% <ol>
%%% <li>The tsunami: 50 processes of ft_budget_work keep every scheduler busy; a
%%% `{'_','_','_'}' session of 8 s starts. Printed: how long `calls/2' took to return (the
%%% first start on the node and a second one), the longest wait of a ping through a
%%% normal-priority process before and during the session, the events counted, and whether
%%% any process of ferrotrace's own carries a trace flag.</li>
%%% <li>The budget while the load moves: {'_','_','_'} sessions of 8 s, with `max_overhead
%%% => 0.05' and with the default budget of a `'_'' spec, while the work (ft_budget_work,
%%% one worker per scheduler) runs from before the start (`steady'), arrives 0 ms, 100 ms or
%%% 1 s after `calls/2' returns on workers replaced every 250 ms (`arrive_*'), arrives as a
%%% process per order (`per_request'), moves to functions nothing called at the start
%%% (`cold_turns_hot', a batch job from 1 s), or bursts tenfold for a second (`burst_10x').
%%% Rounds of four runs: untraced, each budget (their order turned each round), untraced
%%% again (the control, `budget=no_session'); `per_request' adds a fifth, a session on a
%%% function the work never calls (`budget=flags_only': the VM's cost of trace flags on each
%%% process born, whatever the tracer). Printed per scenario and budget: the median over
%%% rounds of each 250 ms window's throughput over the untraced ones' (the runs before and
%%% after the sessions: the control is read against the run before it), for the first 2 s,
%%% the first 2 s as a whole (and against the untraced runs before the sessions alone), the
%%% worst window, the worst of seconds 2 to 8, and the calls timed.
%%% `BUSY_SCENARIOS="arrive_0ms per_request"' runs those only; `FERROTRACE_BUSY_VERBOSE=1'
%%% prints what each session's budget did (rate changes, functions shed and taken back by
%%% window, calls the fuse refused, processes it untraced) and by 25 ms each budget's first
%%% window with work in it (`busy first_window': that of the arrival where no work ran
%%% before).</li>
%%% `BUSY_PARTS="moving"' runs that part only (`tsunami', `moving', `noise', `pairs').
%%% <li>The noise of the budget's measure on the node (ferrotrace_nodeload): with nothing
%%% traced on the same 2 workers, the cost it reads over 4 s against a baseline of 30 ms
%%% (the start's) and of 100 ms, six times each. Anything but 0 is noise.</li>
%%% <li>Not in the default parts (`BUSY_PARTS=pairs', `make busy-pairs'): the first 2 s,
%%% paired. Each scenario (BUSY_SCENARIOS chooses; 3 to 5 minutes each, 28 for the seven),
%%% each budget (and `flags_only' for `per_request'), and `no_session' (two untraced runs:
%%% the pairs' own noise), in BUSY_PAIRS pairs (12) of two 2 s runs side by side, one
%%% untraced and one from `calls/2''s return, each pair in the other order from the last;
%%% the work that arrives later starts at its time in both alike (for `arrive_1s', the 2 s
%%% hold the second after its arrival, as part 2's first 2 s do). Printed: the
%%% median of the pairs' ratios of work done, their range less the lowest and highest
%%% tenth (`middle'), and each pair's ratio. A 250 ms window's median over three rounds of
%%% the part above moves by 0.1 to 0.15 from run to run (its controls read 0.85 to 1.42);
%%% twelve pairs of untraced runs read 0.996 to 1.005 (2026-12-06).</li>
%%% </ol>
%%% ferrotrace's modules are loaded first, as in a release (embedded mode); a node that
%%% loads them on first use waits for the code server at each.
-module(ferrotrace_busy).
-export([main/0, main/1]).

-define(WINDOW_MS, 250).
%% With FERROTRACE_BUSY_VERBOSE, the first window is also read by buckets of this many ms.
-define(BUCKET_MS, 25).
-define(WINDOWS, 32).
-define(SESSION_MS, 8000).

%% Three rounds of each scenario (BUSY_ROUNDS sets another number): a round takes about
%% 40 s, and there are seven scenarios. The no-session control says how far two untraced
%% runs differ: with five rounds of the old budget scenario its windows read 0.69 to 1.17,
%% with nine 0.93 to 1.15.
-spec main() -> ok.
main() ->
    main([case os:getenv("BUSY_ROUNDS") of
              false -> 3;
              N -> list_to_integer(N)
          end]).

%% `[Rounds]': rounds of each kind in the budget scenario.
-spec main([pos_integer()]) -> ok.
main([Rounds]) ->
    {module, _} = code:ensure_loaded(ft_budget_work),
    _ = application:load(ferrotrace),
    {ok, Modules} = application:get_key(ferrotrace, modules),
    ok = code:ensure_modules_loaded(Modules),
    ok = ferrotrace_code:preload(),
    Parts = case os:getenv("BUSY_PARTS") of
                false -> [tsunami, moving, noise];
                Names -> [list_to_atom(N) || N <- string:lexemes(Names, " ,")]
            end,
    _ = [tsunami() || lists:member(tsunami, Parts)],
    _ = [budget(Rounds) || lists:member(moving, Parts)],
    _ = [measure_noise() || lists:member(noise, Parts)],
    _ = [pairs() || lists:member(pairs, Parts)],
    ok.

%%--------------------------------------------------------------------------------------
%% 1. The tsunami

tsunami() ->
    Work = ft_budget_work:start(50),
    timer:sleep(1000),
    %% The pings of the busy suite (ft_busy): a normal-priority process's longest wait.
    Untraced = begin P0 = ft_busy:start_pinger(), timer:sleep(2000), ft_busy:stop_pinger(P0) end,
    Pinger = ft_busy:start_pinger(),
    {First, {ok, S}} = timer:tc(fun() -> ferrotrace:calls({'_', '_', '_'}, #{duration => 8000}) end),
    Flagged = flagged(),
    timer:sleep(8500),
    During = ft_busy:stop_pinger(Pinger),
    #{events := #{seen := Seen, dropped := Dropped}} = ferrotrace:summary(S),
    ok = ferrotrace:release(S),
    {Second, {ok, S2}} = timer:tc(fun() -> ferrotrace:calls({'_', '_', '_'}, #{duration => 2000}) end),
    timer:sleep(2500),
    ok = ferrotrace:release(S2),
    ft_budget_work:stop(Work),
    io:format("busy tsunami workers=50 schedulers=~b start_ms=~b second_start_ms=~b ping_max_ms untraced=~b "
              "during=~b events_seen=~b dropped=~b own_processes_flagged=~b~n",
              [erlang:system_info(schedulers_online), First div 1000, Second div 1000, Untraced, During,
               Seen, Dropped, length(Flagged)]).

%% ferrotrace's own processes that carry a trace flag (OTP 25: the legacy session).
flagged() ->
    [P || P <- ferrotrace_own:pids(), {flags, [_ | _]} <- [erlang:trace_info(P, flags)]].

%%--------------------------------------------------------------------------------------
%% 2. The budget while the load moves

%% A scenario: the work running before the start (`before'), and the work that arrives
%% after `calls/2' returns, at its ms (`arrives'), or leaves (`{stop, Ms, Index}': the
%% arrival of that index ends). Each work is `{Workers, Shape}' of ft_budget_work.
scenarios(Sch) ->
    [{steady, #{before => [{Sch, steady}], arrives => []}},
     {arrive_0ms, #{before => [], arrives => [{0, {Sch, fresh}}]}},
     {arrive_100ms, #{before => [], arrives => [{100, {Sch, fresh}}]}},
     {arrive_1s, #{before => [], arrives => [{1000, {Sch, fresh}}]}},
     %% Also a session that traces a function the work never calls (`flags_only'): the VM's
     %% own cost of trace flags on every process born, whatever a tracer does.
     {per_request, #{before => [], arrives => [{0, {Sch, per_request}}], floor => true}},
     {cold_turns_hot, #{before => [{Sch, steady}], arrives => [{1000, {Sch, batch}}]}},
     %% Light paced load (a tenth of what the node can do, on an idle 2-core machine), then
     %% ten times as many workers for a second.
     {burst_10x, #{before => [{Sch, {paced, 50000}}], arrives => [{1000, {9 * Sch, {paced, 50000}}}, {stop, 2000, 1}]}}].

budget(Rounds) ->
    _ = [scenario(Name, Scenario, Rounds) || {Name, Scenario} <- chosen_scenarios()],
    ok.

%% The scenarios BUSY_SCENARIOS names (all where it is not set), on this node's schedulers.
chosen_scenarios() ->
    Only = case os:getenv("BUSY_SCENARIOS") of
               false -> all;
               Names -> [list_to_atom(N) || N <- string:lexemes(Names, " ,")]
           end,
    [S || S = {Name, _} <- scenarios(erlang:system_info(schedulers_online)), Only =:= all orelse lists:member(Name, Only)].

%% Rounds of four runs each: untraced, a session with `max_overhead => 0.05', a session
%% with the default budget of a `'_'' spec (0.1), and untraced again (the control: what
%% two untraced runs differ by); and a fifth, `flags_only', where the scenario has it.
scenario(Name, Scenario, Rounds) ->
    Floor = maps:get(floor, Scenario, false),
    Runs = [round(Scenario, Floor, R) || R <- lists:seq(1, Rounds)],
    %% Each run: its windows, the calls timed, its first window by ?BUCKET_MS.
    BeforeRuns = [R || {R, _, _, _, _} <- Runs],
    AfterRuns = [R || {_, _, _, R, _} <- Runs],
    %% The sessions ran between the two untraced runs of their round: both are their
    %% reference (the median of twice as many windows). The control is read against the
    %% run before it alone: what two untraced runs differ by.
    _ = [begin
             report(Name, Label, [W || {W, _, _} <- Traced], [W || {W, _, _} <- Reference],
                    [W || {W, _, _} <- BeforeRuns], [C || {_, C, _} <- Traced]),
             [first_window(Name, Label, [B || {_, _, B} <- Traced], [B || {_, _, B} <- Reference])
              || os:getenv("FERROTRACE_BUSY_VERBOSE") =/= false]
         end
         || {Label, Traced, Reference} <- [{"0.05", [T || {_, T, _, _, _} <- Runs], BeforeRuns ++ AfterRuns},
                                           {"default", [T || {_, _, T, _, _} <- Runs], BeforeRuns ++ AfterRuns},
                                           {"no_session", [T || {_, _, _, T, _} <- Runs], BeforeRuns}]
                                          ++ [{"flags_only", [T || {_, _, _, _, T} <- Runs], BeforeRuns ++ AfterRuns} || Floor]],
    ok.

%% Round `R': untraced, two sessions, untraced, and the third session where there is one
%% (`Floor'), as `{Before, At0.05, AtDefault, After, FlagsOnly | none}'. The sessions' order
%% turns by one each round, so that each takes each place in turn: in a fixed
%% order `flags_only', always fifth, read 0.81 and 0.84 of untraced for its first 2 s (three
%% and seven rounds), where turned it read 0.95, and paired (part 4) 0.95 (2026-12-06).
round(Scenario, Floor, R) ->
    Kinds = turned(R - 1, [0.05, default] ++ [flags_only || Floor]),
    {Early, Late} = lists:split(2, Kinds),
    Before = run(Scenario, none),
    Sessions = [{Kind, run(Scenario, Kind)} || Kind <- Early],
    After = run(Scenario, none),
    Done = Sessions ++ [{Kind, run(Scenario, Kind)} || Kind <- Late],
    Of = fun(Kind) -> case lists:keyfind(Kind, 1, Done) of {_, Run} -> Run; false -> none end end,
    {Before, Of(0.05), Of(default), After, Of(flags_only)}.

turned(By, List) ->
    {Head, Tail} = lists:split(By rem length(List), List),
    Tail ++ Head.

%% With FERROTRACE_BUSY_VERBOSE set: the first window with work by ?BUCKET_MS, each bucket's median
%% over rounds against the median of the untraced runs' same bucket (as the windows: the
%% control's against the runs before it), and the worst bucket of each round: where in
%% the window a session's start costs, and how often.
first_window(Name, Label, Traced, Untraced) ->
    Ref = [median([lists:nth(B, U) || U <- Untraced]) || B <- lists:seq(1, ?WINDOW_MS div ?BUCKET_MS)],
    %% A bucket where the work had not arrived yet (as a window: under a twentieth of the
    %% busiest) has no ratio.
    Loaded = [B || {B, R} <- lists:enumerate(Ref), R > no_work(Ref)],
    Ratio = fun(B, Counts) -> lists:nth(B, Counts) / lists:nth(B, Ref) end,
    Format = fun(Rs) -> lists:join(",", [case R of none -> "-"; _ -> io_lib:format("~.2f", [R]) end || R <- Rs]) end,
    io:format("busy first_window scenario=~s budget=~s by_~bms=~s worst_bucket_by_round=~s~n",
              [Name, Label, ?BUCKET_MS,
               Format([case lists:member(B, Loaded) of
                           true -> median([Ratio(B, T) || T <- Traced]);
                           false -> none
                       end || B <- lists:seq(1, length(Ref))]),
               Format([case Loaded of
                           [] -> none;
                           _ -> lists:min([Ratio(B, T) || B <- Loaded])
                       end || T <- Traced])]).

%% One run: the windows' throughput from the moment `calls/2' returns (or would), and the
%% calls the session timed.
run(#{before := Before, arrives := Arrives}, Budget) ->
    Running = [ft_budget_work:start(N, Shape) || {N, Shape} <- Before],
    timer:sleep(1000),
    Session = session(Budget),
    {Windows, Buckets} = windows(Running, Arrives),
    Timed = case Session of
                none -> 0;
                _ ->
                    #{calls := Calls} = Summary = ferrotrace:summary(Session),
                    _ = [verbose(Budget, Summary) || os:getenv("FERROTRACE_BUSY_VERBOSE") =/= false],
                    ok = ferrotrace:release(Session),
                    lists:sum([C || #{count := C} <- Calls])
            end,
    timer:sleep(500),
    {Windows, Timed, Buckets}.

%% A session of ?SESSION_MS on `{'_','_','_'}' with the budget `Budget' (`default': none
%% given; `flags_only': a session on a function the work never calls), or `none'.
session(none) -> none;
session(default) -> started(ferrotrace:calls({'_', '_', '_'}, #{duration => ?SESSION_MS}));
session(flags_only) -> started(ferrotrace:calls({ft_budget_work, check_line, 2}, #{duration => ?SESSION_MS}));
session(Budget) -> started(ferrotrace:calls({'_', '_', '_'}, #{duration => ?SESSION_MS, max_overhead => Budget})).

started({ok, Session}) -> Session.

%% With FERROTRACE_BUSY_VERBOSE set: what a session's budget did (its rate's changes, the
%% functions off, what the fuse refused and untraced), read from its summary once it ends.
verbose(Budget, #{events := Events} = Summary) ->
    B = maps:get(budget, Summary, #{}),
    io:format("busy session budget=~w rate_changes=~w shed_now=~w shed_restored_by_window=~w events=~w untraced=~w~n",
              [Budget, [{At, N} || {At, N, _} <- maps:get(rate_changes, B, [])], maps:get(shed_now, B, 0),
               [ferrotrace_bench:by_bucket([At || #{shed_at := At} <- maps:get(shed, B, [])], ?WINDOW_MS),
                ferrotrace_bench:by_bucket([At || #{restored_at := At} <- maps:get(shed, B, [])], ?WINDOW_MS)],
               maps:with([seen, sampled_out, fuse_refused, untraced], Events), maps:get(untraced, B, none)]).

%% ?WINDOWS windows of ?WINDOW_MS: orders done by every work running, the arrivals started
%% (and stopped) at their times; and by ?BUCKET_MS, the window where the work is first
%% there (the first window, or that of the first arrival where nothing ran before).
windows(Running, Arrives) ->
    Loaded = case {Running, lists:sort([At || {At, _} <- Arrives, is_integer(At)])} of
                 {[], [FirstAt | _]} -> FirstAt div ?WINDOW_MS * ?WINDOW_MS;
                 _ -> 0
             end,
    Ends = lists:usort([W * ?WINDOW_MS || W <- lists:seq(1, ?WINDOWS)]
                       ++ [Loaded + B * ?BUCKET_MS || B <- lists:seq(1, ?WINDOW_MS div ?BUCKET_MS)]),
    Done = lists:zip(Ends, done_by(Running, Arrives, Ends)),
    Within = fun(From, To) -> lists:sum([N || {End, N} <- Done, End > From, End =< To]) end,
    {[Within((W - 1) * ?WINDOW_MS, W * ?WINDOW_MS) || W <- lists:seq(1, ?WINDOWS)],
     [N || {End, N} <- Done, End > Loaded, End =< Loaded + ?WINDOW_MS]}.

%% The orders done in each span up to the next of `Ends' (ms from now, ascending), by the
%% work `Running' and the arrivals started (and stopped) at their times before the last
%% end; every work stopped after. Part 2's windows and part 4's pairs both.
done_by(Running, Arrives, Ends) ->
    T0 = erlang:monotonic_time(millisecond),
    Last = lists:last(Ends),
    Events = lists:sort([{At, {start, Work}} || {At, Work} <- Arrives, is_integer(At), At < Last]
                        ++ [{At, {stop, I}} || {stop, At, I} <- Arrives, At =< Last])
        ++ [{End, window} || End <- Ends],
    {Counts, Works} = timeline(lists:keysort(1, Events), T0, [{W, 0} || W <- Running], [], [], total(Running)),
    _ = [ft_budget_work:stop(W) || {W, _} <- Works, is_map(W)],
    Counts.

timeline([], _T0, Works, _Arrived, Counts, _Last) ->
    {lists:reverse(Counts), Works};
timeline([{At, What} | Rest], T0, Works, Arrived, Counts, Last) ->
    Wait = T0 + At - erlang:monotonic_time(millisecond),
    _ = Wait > 0 andalso timer:sleep(Wait),
    case What of
        window ->
            Now = total([W || {W, _} <- Works]),
            timeline(Rest, T0, Works, Arrived, [Now - Last | Counts], Now);
        {start, {N, Shape}} ->
            Work = ft_budget_work:start(N, Shape),
            timeline(Rest, T0, [{Work, 0} | Works], Arrived ++ [Work], Counts, Last);
        {stop, I} ->
            %% Its orders stay counted: the total runs on from what it had.
            Work = lists:nth(I, Arrived),
            Done = ft_budget_work:done(Work),
            ft_budget_work:stop(Work),
            timeline(Rest, T0, lists:keydelete(Work, 1, Works) ++ [{frozen(Done), 0}], Arrived, Counts, Last)
    end.

total(Works) ->
    lists:sum([case W of {frozen, N} -> N; _ -> ft_budget_work:done(W) end || W <- Works]).

frozen(Done) -> {frozen, Done}.

%% Per window, the median over rounds of the traced windows over the median of the
%% untraced ones (`Untraced': those before and after the sessions); the first 2 s as a
%% whole (medians of sums), also against the untraced runs before the sessions alone
%% (`first_2s_vs_before', the reference `make busy' used until 2026-12-04); the worst window of seconds
%% 2 to 8; the calls the sessions timed (median).
report(Name, Label, Traced, Untraced, Before, Timed) ->
    %% A window where the work had not arrived yet (its untraced median under a twentieth
    %% of the busiest window's) has no ratio: `-', and it is not the worst.
    Medians = [median([lists:nth(W, U) || U <- Untraced]) || W <- lists:seq(1, ?WINDOWS)],
    NoWork = no_work(Medians),
    PerWindow = [case M > NoWork of
                     true -> median([lists:nth(W, T) || T <- Traced]) / M;
                     false -> none
                 end || {W, M} <- lists:zip(lists:seq(1, ?WINDOWS), Medians)],
    First = 2000 div ?WINDOW_MS,
    Sum = fun(Ws) -> lists:sum(lists:sublist(Ws, First)) end,
    First2s = median([Sum(T) || T <- Traced]) / max(1, median([Sum(U) || U <- Untraced])),
    First2sBefore = median([Sum(T) || T <- Traced]) / max(1, median([Sum(U) || U <- Before])),
    Later = lists:nthtail(First, PerWindow),
    Worst = fun(Ws) -> case [R || R <- Ws, R =/= none] of [] -> "-"; Rs -> io_lib:format("~.2f", [lists:min(Rs)]) end end,
    io:format("busy moving scenario=~s budget=~s rounds=~b first_2s=~.2f first_2s_vs_before=~.2f first_2s_windows=~s "
              "worst_window=~s worst_window_2_to_8s=~s calls_timed=~b~n",
              [Name, Label, length(Traced), First2s, First2sBefore,
               lists:join(",", [case R of none -> "-"; _ -> io_lib:format("~.2f", [R]) end || R <- lists:sublist(PerWindow, First)]),
               Worst(PerWindow), Worst(Later), median(Timed)]).

%% Where the work had not arrived yet: an untraced median under a twentieth of the busiest.
no_work(Medians) ->
    lists:max(Medians) / 20.

median(List) ->
    Sorted = lists:sort(List),
    lists:nth((length(Sorted) + 1) div 2, Sorted).

%%--------------------------------------------------------------------------------------
%% 3. The noise of the node's measure

measure_noise() ->
    Work = ft_budget_work:start(erlang:system_info(schedulers_online)),
    ok = ferrotrace_nodeload:enable(),
    timer:sleep(1000),
    _ = [begin
             Means = [untraced_cost(BaselineMs) || _ <- lists:seq(1, 6)],
             io:format("busy measure_noise baseline_ms=~b untraced_cost_over_4s=~s~n",
                       [BaselineMs, lists:join(",", [case M of
                                                         undefined -> "none";
                                                         _ -> io_lib:format("~.2f", [M])
                                                     end || M <- Means])])
         end || BaselineMs <- [30, 100]],
    ft_budget_work:stop(Work).

%% The cost the node's measure reads over 4 s with nothing traced: the mean of its 250 ms
%% ticks against a baseline of `BaselineMs', as a budgeted session's ticks read it.
untraced_cost(BaselineMs) ->
    Baseline = ferrotrace_nodeload:baseline(BaselineMs),
    case [C || C <- ticks(Baseline, ferrotrace_nodeload:sample(), 16), is_float(C)] of
        [] -> undefined;   % idle schedulers, or no scheduler_wall_time
        Costs -> lists:sum(Costs) / length(Costs)
    end.

ticks(_Baseline, _Last, 0) ->
    [];
ticks(Baseline, Last, N) ->
    timer:sleep(?WINDOW_MS),
    Now = ferrotrace_nodeload:sample(),
    [ferrotrace_nodeload:cost(Baseline, Last, Now) | ticks(Baseline, Now, N - 1)].

%%--------------------------------------------------------------------------------------
%% 4. The first 2 s, paired (the module doc)

-define(PAIR_MS, 2000).

pairs() ->
    N = case os:getenv("BUSY_PAIRS") of
            false -> 12;
            Pairs -> list_to_integer(Pairs)
        end,
    _ = [pairs(Name, Scenario, Budget, N)
         || {Name, Scenario} <- chosen_scenarios(),
            Budget <- [no_session, 0.05, default] ++ [flags_only || maps:get(floor, Scenario, false)]],
    ok.

%% `N' pairs, each an untraced run and one of `Budget' (`no_session': a second untraced
%% one), the order swapped from one pair to the next.
pairs(Name, Scenario, Budget, N) ->
    Other = case Budget of no_session -> none; _ -> Budget end,
    Ratios = [case I rem 2 of
                  0 -> U = pair_run(Scenario, none), T = pair_run(Scenario, Other), T / max(1, U);
                  1 -> T = pair_run(Scenario, Other), U = pair_run(Scenario, none), T / max(1, U)
              end || I <- lists:seq(1, N)],
    %% Less the lowest and the highest tenth.
    Cut = N div 10,
    Middle = lists:sublist(lists:sort(Ratios), Cut + 1, N - 2 * Cut),
    io:format("busy pairs scenario=~s budget=~s pairs=~b first_2s=~.3f middle=~.2f..~.2f ratios=~s~n",
              [Name, label(Budget), N, median(Ratios), hd(Middle), lists:last(Middle),
               lists:join(",", [io_lib:format("~.2f", [R]) || R <- Ratios])]).

label(Budget) when is_float(Budget) -> io_lib:format("~w", [Budget]);
label(Budget) -> atom_to_list(Budget).

%% The work done in ?PAIR_MS from the moment `calls/2' returns (or would), the work that
%% arrives (or leaves) started (stopped) at its time, as in the windows of part 2: where
%% nothing ran before, the first 2 s hold what the work did from its arrival to their end.
pair_run(#{before := Before, arrives := Arrives}, Budget) ->
    Running = [ft_budget_work:start(N, Shape) || {N, Shape} <- Before],
    _ = Before =/= [] andalso timer:sleep(1000),
    Session = session(Budget),
    [Done] = done_by(Running, Arrives, [?PAIR_MS]),
    _ = Session =:= none orelse ferrotrace:release(Session),
    timer:sleep(500),
    Done.
