%%% @doc A node's first start among 50 busy processes (issue 54, part 2): the first
%%% `ferrotrace:calls({'_','_','_'}, ...)' in a fresh node that has ferrotrace on its code
%%% path and nothing of it loaded, with 50 processes of ft_budget_work keeping both
%%% schedulers busy, called from a normal-priority process as a shell's evaluator would;
%%% then a second (warm) start in the same node.
%%%
%%% {@link main/0} (`make cold-start', and at the end of `make busy', about 20 s) starts a
%%% fresh `erl -noshell +S 2:2' per run, with the parent's `-pa' directories, each running
%%% {@link in_node/0}, and prints a line per run, then one of medians and ranges:
%%% ```
%%% busy cold_start run=1 start_ms=... warm_start_ms=... ping_max_ms=... ...
%%% busy cold_start runs=5 start_ms=median:...,range:...-... warm_start_ms=... ping_max_ms=... load=...
%%% '''
%%% <ul>
%%% <li>`start_ms', `warm_start_ms': how long the first and the second `calls/2' took to
%%% return;</li>
%%% <li>`ping_max_ms': the longest wait of a ping through a normal-priority process
%%% (ft_busy) from just before the first `calls/2' to 500 ms after it returned
%%% (`warm_ping_max_ms' the same for the second, `untraced_ping_max_ms' over 1 s before
%%% either);</li>
%%% <li>`calibration': what the first session's summary said right after the start
%%% (`pending' where the node's first calibration comes after it); `landed': `yes' once the
%%% session has a calibration and compensates with it (looked for over 2 s);</li>
%%% <li>`start', `warm_start': the summaries' `start' maps (where the start's time went,
%%% from the start's own process on); `outside_ms': the rest of `start_ms' (loading the
%%% modules, the hand-offs to and from the start's process);</li>
%%% <li>`load': the machine's load average at the end (other work shares the cores).</li>
%%% </ul>
-module(ferrotrace_cold).
-export([main/0, main/1, in_node/0]).

-define(WORKERS, 50).
-define(RUNS, 5).

%% @doc Five fresh nodes, one cold and one warm start in each.
-spec main() -> ok.
main() ->
    main([?RUNS]).

%% @doc `[Runs]' fresh nodes.
-spec main([pos_integer()]) -> ok.
main([Runs]) ->
    Results = [run(N) || N <- lists:seq(1, Runs)],
    Ok = [R || R = #{start_ms := _} <- Results],
    case Ok of
        [] ->
            io:format("busy cold_start runs=~b failed=~b~n", [Runs, Runs]);
        _ ->
            Stat = fun(Key) -> ft_fresh_node:stat(Key, Ok) end,
            io:format("busy cold_start runs=~b start_ms=~s warm_start_ms=~s ping_max_ms=~s "
                      "warm_ping_max_ms=~s untraced_ping_max_ms=~s failed=~b load=~s~n",
                      [length(Ok), Stat(start_ms), Stat(warm_start_ms), Stat(ping_max_ms),
                       Stat(warm_ping_max_ms), Stat(untraced_ping_max_ms), Runs - length(Ok), load()])
    end,
    ok.

load() ->
    case file:read_file("/proc/loadavg") of
        {ok, Bin} -> lists:join(",", lists:sublist(string:lexemes(binary_to_list(Bin), " "), 3));
        _ -> "unknown"
    end.

%% One fresh node: its line printed, its figures answered.
run(N) ->
    case ft_fresh_node:figures(?MODULE, "cold ") of
        {failed, Lines} ->
            io:format("busy cold_start run=~b failed: ~p~n", [N, Lines]),
            #{};
        Figures ->
            io:format("busy cold_start run=~b ~s~n", [N, line(Figures)]),
            Figures
    end.

line(#{start_ms := Ms, warm_start_ms := Warm, ping_max_ms := Ping, warm_ping_max_ms := WarmPing,
       untraced_ping_max_ms := Untraced, run_queue := RunQueue, calibration := Calibration,
       landed := Landed, start := Start, warm_start := WarmStart}) ->
    io_lib:format("start_ms=~b warm_start_ms=~b ping_max_ms=~b warm_ping_max_ms=~b untraced_ping_max_ms=~b "
                  "run_queue=~b calibration=~s landed=~s outside_ms=~s start=~s warm_start=~s",
                  [Ms, Warm, Ping, WarmPing, Untraced, RunQueue, Calibration, Landed, outside(Ms, Start),
                   parts(Start), parts(WarmStart)]).

%% The part of a start outside the summary's `start' (loading the modules, the registry, the
%% hand-offs to and from the start's process).
outside(Ms, #{total_ms := Total}) -> integer_to_list(Ms - Total);
outside(_Ms, _) -> "unknown".

parts(Map) when is_map(Map) ->
    ["#{", lists:join(",", [io_lib:format("~s=>~p", [K, V]) || {K, V} <- lists:sort(maps:to_list(Map))]), "}"];
parts(Other) ->
    io_lib:format("~p", [Other]).

%%--------------------------------------------------------------------------------------
%% In the fresh node

%% @doc The measurement in a fresh node (`erl -noshell +S 2:2 ... -eval'): it runs in the
%% `-eval' process (normal priority), prints `cold #{...}.'.
-spec in_node() -> ok.
in_node() ->
    %% Nothing of ferrotrace loaded: a node that has it on its code path only.
    [] = [M || M <- erlang:loaded(), M =/= ?MODULE, lists:prefix("ferrotrace", atom_to_list(M))],
    Work = ft_budget_work:start(?WORKERS),
    timer:sleep(1000),
    Untraced = begin P0 = ft_busy:start_pinger(), timer:sleep(1000), ft_busy:stop_pinger(P0) end,
    Pinger = ft_busy:start_pinger(),
    RunQueue = erlang:statistics(total_run_queue_lengths),
    T0 = erlang:monotonic_time(microsecond),
    {ok, S} = ferrotrace:calls({'_', '_', '_'}, #{duration => 2000}),
    Ms = (erlang:monotonic_time(microsecond) - T0) div 1000,
    AtStart = maps:get(calibration, ferrotrace:summary(S), none),
    timer:sleep(500),
    Ping = ft_busy:stop_pinger(Pinger),
    First = ferrotrace:summary(S),
    %% The first session's calibration, where the start went on without it.
    Landed = landed(S, 40),
    ok = ferrotrace:stop(S),
    ok = ferrotrace:release(S),
    Pinger2 = ft_busy:start_pinger(),
    T1 = erlang:monotonic_time(microsecond),
    {ok, S2} = ferrotrace:calls({'_', '_', '_'}, #{duration => 2000}),
    WarmMs = (erlang:monotonic_time(microsecond) - T1) div 1000,
    timer:sleep(500),
    WarmPing = ft_busy:stop_pinger(Pinger2),
    Second = ferrotrace:summary(S2),
    ok = ferrotrace:release(S2),
    ft_budget_work:stop(Work),
    Figures = #{start_ms => Ms, warm_start_ms => WarmMs, ping_max_ms => Ping, warm_ping_max_ms => WarmPing,
                untraced_ping_max_ms => Untraced, run_queue => RunQueue,
                calibration => calibration(AtStart),
                landed => Landed,
                start => maps:get(start, First, none), warm_start => maps:get(start, Second, none)},
    io:format("cold ~0p~n", [Figures]).

%% `yes' once the session's summary has a measured calibration, and compensates with it.
landed(S, 0) ->
    calibration(maps:get(calibration, ferrotrace:summary(S), none));
landed(S, Tries) ->
    case ferrotrace:summary(S) of
        #{calibration := #{call_ns := _}, compensated := true} -> yes;
        _ -> timer:sleep(50), landed(S, Tries - 1)
    end.

calibration(pending) -> pending;
calibration(#{reused := true}) -> reused;
calibration(#{call_ns := _}) -> measured;
calibration({error, Reason}) -> io_lib:format("error:~0p", [Reason]);
calibration(Other) -> io_lib:format("~0p", [Other]).
