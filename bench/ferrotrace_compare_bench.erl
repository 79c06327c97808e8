%%% @doc How well `ferrotrace:compare/3' tells a real change from noise (`make compare-bench',
%%% about two minutes on 2 cores): 20 runs, each of four sessions of the same load
%%% (bench/ft_compare_work.erl: 20 functions, 6,000 calls each, 5 % of them on a slow path), one
%%% after the other:
%%% A and B untouched, C with one function (drawn at random per run) twice as slow, D with
%%% that function's slow path twice as slow (its p99 doubles, its p50 stays). Each run
%%% compares A with B (nothing should be called slower or faster), A with C (the function
%%% ranked first and called slower, nothing else flagged), A with D (the function's row
%%% says its p99 is slower). It prints a line per run and the counts out of the runs, with
%%% the machine's load average (/proc/loadavg) before and after: the load is the noise the
%%% verdicts must survive.
%%%
%%% `ferrotrace_compare_bench:main([Runs, Rounds, Seed])' runs another size or replays a seed.
-module(ferrotrace_compare_bench).

-export([main/0, main/1]).

-define(RUNS, 20).
-define(ROUNDS, 6000).

%% @doc 20 runs of 6,000 rounds, a random seed (printed).
-spec main() -> ok.
main() ->
    main([?RUNS, ?ROUNDS, erlang:phash2(erlang:unique_integer())]).

%% @doc `[Runs, Rounds, Seed]'.
-spec main([integer()]) -> ok.
main([Runs, Rounds, Seed]) ->
    _ = rand:seed(exsss, Seed),
    io:format("compare-bench: ~b runs of 4 sessions, ~b calls per function each, seed ~b; load ~s~n",
              [Runs, Rounds, Seed, load()]),
    T0 = erlang:monotonic_time(millisecond),
    Results = [run(I, Rounds) || I <- lists:seq(1, Runs)],
    Count = fun(Key) -> length([1 || R <- Results, maps:get(Key, R)]) end,
    io:format("~ncompare-bench: ~b runs in ~b s; load ~s~n", [Runs, (erlang:monotonic_time(millisecond) - T0) div 1000, load()]),
    io:format("  2x slower: ranked first and called slower in ~b of ~b (nothing else flagged in ~b; "
              "first by the change in total time alone in ~b)~n",
              [Count(slower_found), Runs, Count(slower_alone), Count(slower_first_by_total)]),
    io:format("  A/A:       nothing called slower or faster in ~b of ~b~n", [Count(aa_clean), Runs]),
    io:format("  tail x2:   the row says p99 slower in ~b of ~b (its p50 left unchanged in ~b; nothing else "
              "flagged in ~b)~n", [Count(tail_found), Runs, Count(tail_body_unchanged), Count(tail_alone)]),
    ok.

run(I, Rounds) ->
    K = rand:uniform(20),
    Slowed = <<"ft_compare_work:f", (integer_to_binary(K))/binary, "/1">>,
    [A, B, C, D] = [session(Change, Rounds) || Change <- [none, none, {slower, K}, {tail, K}]],
    {ok, AA} = ferrotrace:compare(A, B, #{as => map}),
    {ok, AC} = ferrotrace:compare(A, C, #{as => map}),
    {ok, AD} = ferrotrace:compare(A, D, #{as => map}),
    _ = [ferrotrace:release(S) || S <- [A, B, C, D]],
    Flagged = fun(#{rows := Rows}) -> [N || R = #{name := N} <- Rows, changed(R)] end,
    Said = fun(#{rows := Rows}) ->
                   case [[short(N), " ", ferrotrace_compare_report:verdict_text(R, 0.99)] || R = #{name := N} <- Rows, changed(R)] of
                       [] -> "none";
                       L -> lists:join(", ", L)
                   end
           end,
    [First | _] = maps:get(rows, AC),
    ByTotal = hd(lists:sort(fun(#{change := X}, #{change := Y}) -> abs(X) >= abs(Y) end, maps:get(rows, AC))),
    RowD = hd([R || R = #{name := N} <- maps:get(rows, AD), N =:= Slowed]),
    Result = #{aa_clean => Flagged(AA) =:= [],
               slower_found => maps:get(name, First) =:= Slowed andalso maps:get(verdict, First) =:= slower,
               slower_alone => Flagged(AC) =:= [Slowed],
               slower_first_by_total => maps:get(name, ByTotal) =:= Slowed,
               tail_found => maps:get(tail, RowD) =:= slower,
               tail_body_unchanged => maps:get(verdict, RowD) =:= unchanged,
               tail_alone => Flagged(AD) -- [Slowed] =:= []},
    #{tail_q := {TA, TB}, p_tail := PTail} = RowD,
    io:format("run ~2b f~-2b | A/A: node x~.2f p99 x~.2f, flagged ~s | 2x: first ~s ~s, flagged ~s | "
              "tail: ~ts (p99 x~.2f, node x~.2f, p ~s), flagged ~s | load ~s~n",
              [I, K, shift(AA, p50), shift(AA, tail), Said(AA), short(maps:get(name, First)),
               maps:get(verdict, First), Said(AC),
               ferrotrace_compare_report:verdict_text(RowD, 0.99), TB / TA, shift(AD, tail), p_text(PTail),
               Said(AD), load()]),
    Result.

changed(#{verdict := V, tail := T}) ->
    lists:member(V, [slower, faster]) orelse lists:member(T, [slower, faster]).

shift(#{node_shift := #{p50 := P}}, p50) -> P;
shift(#{node_shift := #{tail := T}}, tail) -> T;
shift(_, _) -> 1.0.

short(<<"ft_compare_work:", Rest/binary>>) -> Rest;
short(Name) -> Name.

p_text(P) when is_float(P) -> io_lib:format("~.2e", [P]);
p_text(_) -> "-".



session(Change, Rounds) ->
    {ok, S} = ferrotrace:calls(ft_compare_work:functions(), #{duration => 120000}),
    ok = ft_compare_work:run(Change, Rounds),
    ok = ferrotrace:stop(S),
    S.

load() ->
    case file:read_file("/proc/loadavg") of
        {ok, Bin} -> lists:join(" ", lists:sublist(string:lexemes(binary_to_list(Bin), " "), 3));
        {error, _} -> "unknown"
    end.
