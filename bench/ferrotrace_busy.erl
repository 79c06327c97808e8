%%% @doc ferrotrace on a busy node: what an operator meets when the schedulers are full.
%%%
%%% Three scenarios, each printed as `busy ...' lines (run by `make busy', about 3 minutes):
%%% <ol>
%%% <li>The tsunami: 50 processes of ft_budget_work keep every scheduler busy; a
%%% `{'_','_','_'}' session of 8 s starts. Printed: how long `calls/2' took to return (the
%%% first start on the node and a second one), the longest wait of a ping through a
%%% normal-priority process before and during the session, the events counted, and whether
%%% any process of ferrotrace's own carries a trace flag.</li>
%%% <li>The budget's first seconds: 2 workers (one per scheduler on the 2-core machine),
%%% rounds alternating untraced and traced, each traced round a fresh `{'_','_','_'}'
%%% session with `max_overhead => 0.05'; the work's throughput in 250 ms windows from the
%%% moment `calls/2' returns (the same windows of an untraced round for comparison), the
%%% medians over rounds per window, and over the first 2 s. The same rounds with no session
%%% at all show the noise.</li>
%%% <li>The noise of the budget's measure on the node (ferrotrace_nodeload): with nothing
%%% traced on the same 2 workers, the cost it reads over 4 s against a baseline of 30 ms
%%% (the start's) and of 100 ms, six times each. Anything but 0 is noise.</li>
%%% </ol>
%%% ferrotrace's modules are loaded first, as in a release (embedded mode); a node that
%%% loads them on first use waits for the code server at each.
-module(ferrotrace_busy).
-export([main/0, main/1]).

-define(WINDOW_MS, 250).
-define(WINDOWS, 8).

%% Nine rounds of each: with five, the no-session control's 250 ms windows read 0.69 to
%% 1.17 of its untraced rounds (a median of five moves with one round); with nine, 0.93 to
%% 1.15.
-spec main() -> ok.
main() ->
    main([9]).

%% `[Rounds]': rounds of each kind in the budget scenario.
-spec main([pos_integer()]) -> ok.
main([Rounds]) ->
    {module, _} = code:ensure_loaded(ft_budget_work),
    _ = application:load(ferrotrace),
    {ok, Modules} = application:get_key(ferrotrace, modules),
    ok = code:ensure_modules_loaded(Modules),
    ok = ferrotrace_code:preload(),
    tsunami(),
    budget(Rounds),
    measure_noise(),
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
%% 2. The budget's first seconds

budget(Rounds) ->
    Schedulers = erlang:system_info(schedulers_online),
    Work = ft_budget_work:start(Schedulers),
    timer:sleep(1000),
    %% Untraced and traced rounds alternate; then untraced and "traced" with no session.
    Traced = alternate(Work, Rounds, fun start_budgeted/0),
    Control = alternate(Work, Rounds, fun() -> none end),
    ft_budget_work:stop(Work),
    report("budget", Traced),
    report("no_session", Control).

alternate(Work, Rounds, Start) ->
    [{windows(Work, fun() -> none end), windows(Work, Start)} || _ <- lists:seq(1, Rounds)].

start_budgeted() ->
    {ok, S} = ferrotrace:calls({'_', '_', '_'}, #{duration => 4000, max_overhead => 0.05}),
    S.

%% Throughput (orders/s) in ?WINDOWS windows of ?WINDOW_MS from the moment `Start' returns.
windows(Work, Start) ->
    Session = Start(),
    Counts = [ft_budget_work:throughput(Work, ?WINDOW_MS) || _ <- lists:seq(1, ?WINDOWS)],
    case Session of
        none -> ok;
        _ -> ok = ferrotrace:release(Session)
    end,
    timer:sleep(500),
    Counts.

report(Label, Pairs) ->
    Untraced = [U || {U, _} <- Pairs],
    Traced = [T || {_, T} <- Pairs],
    PerWindow = [median([lists:nth(W, T) || T <- Traced]) / max(1, median([lists:nth(W, U) || U <- Untraced]))
                 || W <- lists:seq(1, ?WINDOWS)],
    Whole = median([lists:sum(T) || T <- Traced]) / max(1, median([lists:sum(U) || U <- Untraced])),
    io:format("busy ~s rounds=~b windows_ms=~b ratio_per_window=~s first_2s_ratio=~.2f~n",
              [Label, length(Pairs), ?WINDOW_MS,
               lists:join(",", [io_lib:format("~.2f", [R]) || R <- PerWindow]), Whole]).

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
