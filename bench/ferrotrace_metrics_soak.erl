%%% @doc `make metrics-soak': a session left on the demo shop under load, with a 1 % overhead
%%% budget, served and scraped every second by Debian's Prometheus for `Seconds' (600 by
%%% default). Prints, every minute, the session's memory and the shop's throughput; at the
%%% end, the scrapes that failed (`up' 0) of those made, the throughput against 30 s
%%% untraced before the session, and the PromQL answers next to the session's own over the
%%% last 10 s window (p99 of checkout/1, its calls' rate against the calls the clients made).
%%% A benchmark: it prints figures and judges nothing.
-module(ferrotrace_metrics_soak).

-export([main/1]).

-define(CLIENTS, 8).
-define(UNTRACED_S, 30).

%% @doc Runs the soak for `Seconds' and prints its lines.
-spec main(pos_integer()) -> ok.
main(Seconds) ->
    Prometheus = case os:find_executable("prometheus") of
                     false -> io:format("metrics soak: prometheus is missing (make export-tools)~n"), halt(1);
                     P -> P
                 end,
    {ok, _} = shop_inventory:start_link(500),
    Counter = counters:new(2, [write_concurrency]),
    _ = [spawn_link(fun() -> client(Counter) end) || _ <- lists:seq(1, ?CLIENTS)],
    Untraced = rate(Counter, 1, ?UNTRACED_S),
    io:format("metrics soak: untraced ~.1f requests/s over ~b s (~b clients)~n", [Untraced, ?UNTRACED_S, ?CLIENTS]),
    {ok, S} = ferrotrace:calls([{shop_api, '_', '_'}, {shop_inventory, '_', '_'}],
                               #{duration => infinity, owner => self(), max_overhead => 0.01,
                                 metrics => #{port => 0}}),
    {ok, _, _, #{metrics := #{url := Url}}} = ferrotrace_registry:lookup(S),
    {match, [Port]} = re:run(Url, ":([0-9]+)/", [{capture, all_but_first, list}]),
    {Api, Handle} = ft_prometheus:start(Prometheus, list_to_integer(Port)),
    Log = spawn_link(fun() -> log(Counter, []) end),
    Snapshots = spawn_link(fun() -> snapshots(S, []) end),
    T0 = ft_prometheus:now_s(),
    Minutes = [begin
                   Rate = rate(Counter, 1, 60),
                   #{memory := #{total := Memory}, budget := Budget} = ferrotrace:summary(S),
                   io:format("metrics soak: minute ~b: ~.1f requests/s (~.3f of untraced), session memory ~b bytes, "
                             "budget estimate ~p, rate 1 in ~p~n",
                             [M, Rate, Rate / Untraced, Memory, maps:get(estimate, Budget), maps:get(rate, Budget)]),
                   {Rate, Memory}
               end || M <- lists:seq(1, max(1, Seconds div 60))],
    T1 = ft_prometheus:now_s() - 1.0,
    Window = io_lib:format("~bs", [round(T1 - T0)]),
    Scrapes = ft_prometheus:query(Api, "count_over_time(up{job=\"ferrotrace\"}[" ++ Window ++ "])", T1),
    Failed = ft_prometheus:query(Api, "count_over_time((up{job=\"ferrotrace\"} == 0)[" ++ Window ++ ":1s])", T1, 0.0),
    LongestScrape = ft_prometheus:query(Api, "max_over_time(scrape_duration_seconds{job=\"ferrotrace\"}[" ++ Window ++ "])", T1),
    Memories = [M || {_, M} <- Minutes],
    Rates = [R || {R, _} <- Minutes],
    io:format("metrics soak: ~b s: ~w scrapes, ~w failed, the longest ~.1f ms; session memory ~b to ~b bytes (first "
              "minute ~b, last ~b); throughput ~.3f of untraced (the minutes' median; the minutes ~.3f to ~.3f)~n",
              [round(T1 - T0), round(Scrapes), round(Failed), LongestScrape * 1000, lists:min(Memories),
               lists:max(Memories), hd(Memories), lists:last(Memories), median(Rates) / Untraced,
               lists:min(Rates) / Untraced, lists:max(Rates) / Untraced]),
    %% The closing figures: PromQL next to the session's own, over the last 10 s.
    Checkout = "{function=\"shop_api:checkout/1\"}",
    Samples = ft_prometheus:range(Api, "ferrotrace_calls_total" ++ Checkout ++ "[10s]", T1),
    {First, _} = hd(Samples),
    {Last, _} = lists:last(Samples),
    PromRate = ft_prometheus:query(Api, "rate(ferrotrace_calls_total" ++ Checkout ++ "[10s])", T1),
    P99 = ft_prometheus:query(Api, "histogram_quantile(0.99, rate(ferrotrace_call_duration_seconds_bucket" ++ Checkout ++ "[10s]))", T1),
    #{budget := #{rate := SampleRate, shed_now := Shed}} = ferrotrace:summary(S),
    OwnP99 = own_p99(Snapshots, First, Last),
    Made = made(Log, First, Last) / (Last - First),
    io:format("metrics soak: checkout/1 over the last 10 s window: rate(ferrotrace_calls_total) ~p/s timed (1 in ~b "
              "traced now, ~b functions shed) against ~.2f/s checkouts the clients made; histogram_quantile(0.99) "
              "~p s against the session's own p99 over the same scrapes ~p s~n",
              [PromRate, SampleRate, Shed, Made, P99, OwnP99]),
    ok = ft_prometheus:stop(Handle),
    ok = ferrotrace:release(S).

client(Counter) ->
    _ = try case rand:uniform(10) of
                R when R =< 6 -> shop_api:get_item(rand:uniform(600));
                R when R =< 9 -> shop_api:search(rand:uniform(99));
                _ -> counters:add(Counter, 2, 1), shop_api:checkout(rand:uniform(1000))
            end
        catch error:payment_declined -> declined
        end,
    counters:add(Counter, 1, 1),
    client(Counter).

%% Requests a second over `Seconds'.
rate(Counter, Index, Seconds) ->
    C0 = counters:get(Counter, Index),
    timer:sleep(Seconds * 1000),
    (counters:get(Counter, Index) - C0) / Seconds.

%% Every 20 ms, the checkouts begun with the system time (s).
log(Counter, Log) ->
    receive
        {log, From, Ref} -> From ! {Ref, lists:reverse(Log)}, log(Counter, Log)
    after 20 ->
            log(Counter, lists:sublist([{erlang:system_time(microsecond) / 1.0e6, counters:get(Counter, 2)} | Log], 3000))
    end.

made(Log, From, To) ->
    Ref = make_ref(),
    Log ! {log, self(), Ref},
    Entries = receive {Ref, L} -> L end,
    at(Entries, To) - at(Entries, From).

at([{T0, C0}, {T1, C1} | _], T) when T >= T0, T =< T1 -> C0 + (C1 - C0) * (T - T0) / max(T1 - T0, 1.0e-9);
at([_ | Rest], T) -> at(Rest, T);
at([], _T) -> 0.

median(List) ->
    lists:nth((length(List) + 1) div 2, lists:sort(List)).

%% The session's p99 (s) of checkout/1 over the calls between two times, from its
%% snapshots (`undefined' where it timed none).
own_p99(Snapshots, From, To) ->
    Ref = make_ref(),
    Snapshots ! {log, self(), Ref},
    Taken = receive {Ref, L} -> L end,
    Nearest = fun(T) -> element(2, hd(lists:sort([{abs(At - T), B} || {At, B} <- Taken]))) end,
    case Taken of
        [] -> undefined;
        _ ->
            {ok, Delta} = ferrotrace_tracer:histogram_subtract(Nearest(To), Nearest(From)),
            case ferrotrace_tracer:histogram_figures(Delta) of
                {ok, #{p99 := Ns}} when is_integer(Ns) -> Ns / 1.0e9;
                _ -> undefined
            end
    end.

%% Every 50 ms, the session's histogram of checkout/1 with the system time (s); the last
%% 30 s kept.
snapshots(S, Log) ->
    receive
        {log, From, Ref} -> From ! {Ref, Log}, snapshots(S, Log)
    after 50 ->
            case ferrotrace_tracer:session_histograms_bytes(S) of
                {ok, All} ->
                    case lists:keyfind({shop_api, checkout, 1}, 1, All) of
                        {_, Bytes} -> snapshots(S, lists:sublist([{erlang:system_time(microsecond) / 1.0e6, Bytes} | Log], 600));
                        false -> snapshots(S, Log)
                    end;
                {error, _} ->
                    snapshots(S, Log)
            end
    end.
