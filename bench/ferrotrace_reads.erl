%%% @doc Reads under load: what `summary/1' every 200 ms costs a session, with one aggregator
%%% and with its aggregation split over threads (`aggregators => 4'). Two processes call 14
%%% `lists' functions 30,000 times each (about 22 M events with `{lists, '_', '_'}' traced)
%%% while a third reads the summary, or sleeps; it prints, per run, the events dropped, the
%%% backlog (the fullest ring and the longest gap between two drains), the slowest read under
%%% load, and the median of 9 reads once the load is gone (`idle_read_ms': the read's own
%%% cost, about 40 functions). Run by `make bench-reads' (about 2 minutes on 2 cores);
%%% `ferrotrace_reads:main([Aggregators])' runs one size.
-module(ferrotrace_reads).
-export([main/0, main/1]).

-define(RUNS, 3).

-spec main() -> ok.
main() ->
    main([1]),
    main([4]).

-spec main([pos_integer()]) -> ok.
main([Aggregators]) ->
    [run(Aggregators, Reads) || _ <- lists:seq(1, ?RUNS), Reads <- [false, true]],
    ok.

run(Aggregators, Reads) ->
    {ok, S} = ferrotrace:calls({lists, '_', '_'}, #{duration => 120000, aggregators => Aggregators}),
    Self = self(),
    Workers = [spawn(fun() -> work(30000), Self ! {done, self()} end) || _ <- [1, 2]],
    Reader = spawn(fun() -> reader(S, Reads, 0) end),
    [receive {done, W} -> ok end || W <- Workers],
    Reader ! {stop, self()},
    Slowest = receive {slowest_read_us, Us} -> Us end,
    Idle = lists:nth(5, lists:sort([element(1, timer:tc(ferrotrace, summary, [S])) || _ <- lists:seq(1, 9)])),
    #{events := #{seen := Seen, dropped := Dropped},
      backlog := #{ring_peak := Peak, ring_size := Size, longest_gap_us := Gap}} = ferrotrace:summary(S),
    io:format("reads aggregators=~b reads=~p seen=~b dropped=~b fullest_ring=~b/~b longest_gap_ms=~.1f "
              "slowest_read_ms=~.1f idle_read_ms=~.1f~n",
              [Aggregators, Reads, Seen, Dropped, Peak, Size, Gap / 1000, Slowest / 1000, Idle / 1000]),
    ok = ferrotrace:release(S).

reader(S, Reads, Slowest) ->
    receive
        {stop, From} -> From ! {slowest_read_us, Slowest}
    after 200 ->
        case Reads of
            true ->
                T0 = erlang:monotonic_time(microsecond),
                _ = ferrotrace:summary(S),
                reader(S, Reads, max(Slowest, erlang:monotonic_time(microsecond) - T0));
            false ->
                reader(S, Reads, Slowest)
        end
    end.

work(0) ->
    ok;
work(N) ->
    L = lists:seq(1, 20),
    _ = lists:reverse(L), _ = lists:sum(L), _ = lists:max(L), _ = lists:member(5, L),
    _ = lists:nth(3, L), _ = lists:last(L), _ = lists:sort(L), _ = lists:usort(L),
    _ = lists:zip(L, L), _ = lists:keyfind(1, 1, [{1, a}]), _ = lists:flatten([L]),
    _ = lists:duplicate(3, x), _ = lists:split(2, L), _ = lists:sublist(L, 3),
    work(N - 1).
