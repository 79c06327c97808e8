%%% @doc What a Prometheus scrape costs (`make metrics-bench', about 30 s): a session of
%%% 1,000 timed functions (ft_functions, each called with work spread over the log scale, so
%%% every histogram spans decades) served with `ferrotrace:serve/2', scraped 20 times over
%%% loopback, each after the endpoint's reuse window (every scrape renders anew). Prints the
%%% scrape's time as the client sees it, the schedulers' busy time during one (normal
%%% schedulers, the client's reading included; dirty CPU schedulers, the figures' read), the
%%% exposition's size, and the endpoint's reductions over 2 s without a scrape (what is paid
%%% between scrapes). The target (issue 57): at most 50 ms of one scheduler a scrape.
-module(ferrotrace_metrics_bench).

-export([main/0]).

-define(FUNCTIONS, 1000).
-define(SCRAPES, 20).

%% @doc Runs the benchmark and prints its lines.
-spec main() -> ok.
main() ->
    Module = ft_metrics_bench_functions,
    {module, Module} = ft_functions:load(Module, ?FUNCTIONS),
    {ok, S} = ferrotrace:calls(ft_functions:specs(Module, ?FUNCTIONS), #{duration => infinity, owner => self()}),
    %% Every function timed 20 times, its work spread over the log scale.
    [ft_functions:call(Module, I, ft_functions:work(K / 20)) || K <- lists:seq(1, 20), I <- lists:seq(1, ?FUNCTIONS)],
    timer:sleep(500),
    {ok, Url} = ferrotrace:serve(S, #{port => 0}),
    {match, [P]} = re:run(Url, ":([0-9]+)/", [{capture, all_but_first, list}]),
    Port = list_to_integer(P),
    _ = scrape(Port),
    _ = erlang:system_flag(scheduler_wall_time, true),
    {ok, _, _, #{metrics := #{endpoint := Endpoint}}} = ferrotrace_registry:lookup(S),
    Runs = [begin
                timer:sleep(1000),
                {Wall, Normal, Dirty, Bytes0} = measured(Port),
                {ok, #{last_render_us := RenderUs}} = ferrotrace_metrics_http:stats(Endpoint),
                {Wall, Normal, Dirty, Bytes0, RenderUs / 1000}
            end || _ <- lists:seq(1, ?SCRAPES)],
    _ = erlang:system_flag(scheduler_wall_time, false),
    Walls = lists:sort([W || {W, _, _, _, _} <- Runs]),
    Normals = lists:sort([N || {_, N, _, _, _} <- Runs]),
    Dirties = lists:sort([D || {_, _, D, _, _} <- Runs]),
    Renders = lists:sort([R || {_, _, _, _, R} <- Runs]),
    Bytes = element(4, hd(Runs)),
    %% After the last render's reuse window (it is then dropped, once).
    timer:sleep(2000),
    {reductions, R0} = erlang:process_info(Endpoint, reductions),
    timer:sleep(2000),
    {reductions, R1} = erlang:process_info(Endpoint, reductions),
    {memory, EndpointBytes} = erlang:process_info(Endpoint, memory),
    #{memory := #{total := Total}} = ferrotrace:summary(S),
    io:format("metrics scrape functions=~b bytes=~b scrape_ms median=~.1f max=~.1f; the endpoint's render "
              "(figures read on a dirty scheduler, text written) render_ms median=~.1f max=~.1f; busy during one "
              "scrape: normal_schedulers_ms median=~.1f max=~.1f (the client's reading included), dirty_cpu_ms "
              "median=~.1f max=~.1f (target: at most 50 ms of one scheduler)~n",
              [?FUNCTIONS, Bytes, median(Walls), lists:last(Walls), median(Renders), lists:last(Renders),
               median(Normals), lists:last(Normals), median(Dirties), lists:last(Dirties)]),
    io:format("metrics between scrapes: endpoint reductions over 2 s=~b, endpoint memory_bytes=~b; session "
              "memory total_bytes=~b~n", [R1 - R0, EndpointBytes, Total]),
    ok = ferrotrace:release(S).

%% One scrape: its wall time (ms), the normal and dirty CPU schedulers' busy time (ms).
measured(Port) ->
    Before = erlang:statistics(scheduler_wall_time_all),
    T0 = erlang:monotonic_time(microsecond),
    Bytes = scrape(Port),
    T1 = erlang:monotonic_time(microsecond),
    After = erlang:statistics(scheduler_wall_time_all),
    Normal = erlang:system_info(schedulers),
    Pairs = [{I, A1 - A0, W1 - W0} || {{I, A0, W0}, {I, A1, W1}} <- lists:zip(lists:sort(Before), lists:sort(After))],
    %% Its unit is the runtime's own: scaled by scheduler 1's total time over the wall time.
    {1, _, Total1} = lists:keyfind(1, 1, Pairs),
    PerMs = Total1 / max(1, (T1 - T0) / 1000),
    Busy = fun(Ids) -> lists:sum([A || {I, A, _} <- Pairs, lists:member(I, Ids)]) / PerMs end,
    Dirty = lists:seq(Normal + 1, Normal + erlang:system_info(dirty_cpu_schedulers)),
    {(T1 - T0) / 1000, Busy(lists:seq(1, Normal)), Busy(Dirty), Bytes}.

scrape(Port) ->
    {ok, C} = gen_tcp:connect({127, 0, 0, 1}, Port, [binary, {active, false}]),
    ok = gen_tcp:send(C, <<"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n">>),
    Bytes = read(C, 0),
    ok = gen_tcp:close(C),
    Bytes.

read(C, N) ->
    case gen_tcp:recv(C, 0, 30000) of
        {ok, Data} -> read(C, N + byte_size(Data));
        {error, closed} -> N
    end.

median(Sorted) ->
    lists:nth((length(Sorted) + 1) div 2, Sorted).
