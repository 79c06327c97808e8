%%% @doc Comparisons of histograms made by hand (ft_hdr_encode): the verdicts, the node's
%%% shift, the ranking, functions of one side only, the tail, compensation, refusals; the
%%% saved form read back; the Erlang readers of HdrHistogram V2 and JSON against the NIF and
%%% against bad bytes. No session, no timing: every figure is known in advance.
-module(ferrotrace_compare_tests).

% Not eunit.hrl: its generated test/0 has no spec (see ferrotrace_bad_input_tests).
-include_lib("stdlib/include/assert.hrl").

-export([identical_sides_test/0, small_moves_test/0, doubled_function_test/0, faster_test/0,
         node_shift_test/0, node_shift_only_widens_test/0, spread_test/0, tail_only_test/0, few_functions_test/0, too_few_calls_test/0,
         one_side_only_test/0, ranking_test/0, compensation_test/0, refusals_test/0,
         options_test/0, holm_test/0, shift_estimate_test/0, report_width_test/0,
         difffolded_test/0, saved_round_trip_test/0, saved_refusals_test/0,
         hdr_against_nif_test/0, hdr_bad_bytes_test/0, json_test/0]).

-define(N, 2000).

%% A side of `[{Name, Values}]' (values as ft_hdr_encode:values/2 gives them).
-spec side([{binary(), [{pos_integer(), pos_integer()}]}]) -> ferrotrace_saved:saved().
side(Functions) ->
    side(Functions, #{}).

-spec side([{binary(), [{pos_integer(), pos_integer()}]}], map()) -> ferrotrace_saved:saved().
side(Functions, Extra) ->
    maps:merge(#{version => 1, kind => calls, source => <<"test">>, node => <<"a@h">>, nodes => [<<"a@h">>],
                 otp => <<"25">>, spec => [], started_at => 0, span_ms => 1000, window => undefined,
                 status => stopped, compensated => true, sample => #{calls => 1, processes => 1},
                 budget => false, functions => [fn(N, V) || {N, V} <- Functions], paths => []}, Extra).

-spec fn(binary(), [{pos_integer(), pos_integer()}]) -> ferrotrace_saved:function_figures().
fn(Name, Values) ->
    Bin = ft_hdr_encode:encode(Values),
    Total = lists:sum([V * C || {V, C} <- Values]),
    #{mfa => {<<"m">>, Name, 1}, name => <<"m:", Name/binary, "/1">>,
      count => lists:sum([C || {_, C} <- Values]), exceptions => 0, total_ns => Total, own_ns => Total,
      raw_ns => undefined, estimated => undefined, latency => Bin, own => Bin, raw => undefined}.

%% Function `I' of twenty: its own width of latencies (1 to 3 us), `Change' applied.
-spec shape(pos_integer()) -> tuple().
shape(I) ->
    Base = 1000 + 100 * I,
    {tail, 0.02, 4, {uniform, Base * 3 div 4, Base * 5 div 4}}.

-spec twenty(fun((pos_integer()) -> tuple())) -> ferrotrace_saved:saved().
twenty(Shape) ->
    side([{name(I), ft_hdr_encode:values(Shape(I), ?N)} || I <- lists:seq(1, 20)]).

-spec name(pos_integer()) -> binary().
name(I) -> <<"f", (integer_to_binary(I))/binary>>.

-spec compare(term(), term()) -> map().
compare(A, B) ->
    compare(A, B, #{}).

-spec compare(term(), term(), map()) -> map().
compare(A, B, Options) ->
    {ok, C} = ferrotrace:compare(A, B, Options#{as => map}),
    C.

-spec row(map(), binary()) -> map().
row(#{rows := Rows}, Name) ->
    [Row] = [R || R = #{mfa := {_, N, _}} <- Rows, N =:= Name],
    Row.

-spec flagged(map()) -> [binary()].
flagged(#{rows := Rows}) ->
    [N || #{mfa := {_, N, _}, verdict := V, tail := T} <- Rows,
          lists:member(V, [slower, faster]) orelse lists:member(T, [slower, faster])].

%%--------------------------------------------------------------------------------------
%% Verdicts

%% The same calls on both sides: nothing changed, the node did not move, every row's
%% figures are A's on both sides.
-spec identical_sides_test() -> ok.
identical_sides_test() ->
    A = twenty(fun shape/1),
    C = compare(A, A),
    ?assertEqual([], flagged(C)),
    #{node_shift := #{p50 := P50, tail := Tail, functions := 20}} = C,
    ?assert(abs(P50 - 1) < 0.005 andalso abs(Tail - 1) < 0.005),
    #{count := {?N, ?N}, p50 := {P, P}, tail_q := {Q, Q}, change := 0} = row(C, <<"f7">>),
    #{test := #{tests := 40, min_change := 0.1, min_tail_change := 0.25, level := 0.99}} = C,
    ok.

%% Each function moved by up to 4 % either way (less than the 10 % margin): unchanged.
-spec small_moves_test() -> ok.
small_moves_test() ->
    A = twenty(fun shape/1),
    B = twenty(fun(I) -> {scaled, 1 + 0.04 * math:sin(I), shape(I)} end),
    ?assertEqual([], flagged(compare(A, B))).

%% One function twice as slow: called slower, its p50 and p99 doubled, first in the table;
%% no other function flagged.
-spec doubled_function_test() -> ok.
doubled_function_test() ->
    A = twenty(fun shape/1),
    B = twenty(fun(9) -> {scaled, 2.0, shape(9)}; (I) -> shape(I) end),
    C = #{rows := [First | _]} = compare(A, B),
    ?assertEqual([<<"f9">>], flagged(C)),
    #{mfa := {_, <<"f9">>, 1}, verdict := slower, tail := slower, p50 := {PA, PB}, p_body := P} = First,
    ?assert(abs(PB / PA - 2) < 0.05),
    ?assert(P < 1.0e-6),
    {Ratio, Low, High} = maps:get(shift, First),
    ?assert(Low < Ratio andalso Ratio < High andalso abs(Ratio - 2) < 0.05),
    ?assertEqual("slower", ferrotrace_compare_report:verdict_text(First, 0.99)).

%% One function twice as fast: faster.
-spec faster_test() -> ok.
faster_test() ->
    A = twenty(fun shape/1),
    B = twenty(fun(3) -> {scaled, 0.5, shape(3)}; (I) -> shape(I) end),
    C = compare(A, B),
    ?assertEqual([<<"f3">>], flagged(C)),
    #{verdict := faster} = row(C, <<"f3">>).

%% Every function 1.3 times slower: the node moved, no function did beyond it; without
%% the node's shift every function is slower.
-spec node_shift_test() -> ok.
node_shift_test() ->
    A = twenty(fun shape/1),
    B = twenty(fun(I) -> {scaled, 1.3, shape(I)} end),
    C = compare(A, B),
    #{node_shift := #{p50 := P50, tail := Tail}} = C,
    ?assert(abs(P50 - 1.3) < 0.02 andalso abs(Tail - 1.3) < 0.03),
    ?assertEqual([], flagged(C)),
    Absolute = compare(A, B, #{node_shift => none}),
    #{node_shift := none, test := #{min_change := 0.25}} = Absolute,
    ?assertEqual(20, length(flagged(Absolute))),
    %% And beyond the node: one function 2.6 times slower where the rest are 1.3.
    B2 = twenty(fun(5) -> {scaled, 2.6, shape(5)}; (I) -> {scaled, 1.3, shape(I)} end),
    ?assertEqual([<<"f5">>], flagged(compare(A, B2))).

%% Every function but one 1.3 times slower: the one that kept its time is not called
%% faster (it did not change on its own); the node's shift only widens "unchanged".
-spec node_shift_only_widens_test() -> ok.
node_shift_only_widens_test() ->
    A = twenty(fun shape/1),
    B = twenty(fun(7) -> shape(7); (I) -> {scaled, 1.3, shape(I)} end),
    C = compare(A, B),
    ?assertEqual([], flagged(C)),
    #{verdict := unchanged, shift := {R, _, _}} = row(C, <<"f7">>),
    ?assert(abs(R - 1) < 0.02),
    %% Tested on its own change alone, as where no node's shift is read, unchanged too.
    ?assertEqual([], [N || N <- flagged(compare(A, B, #{node_shift => none})), N =:= <<"f7">>]).

%% Functions' slow paths moved 20 % up or down in turn: their p99s spread over sampling's,
%% within the p99's margin: the spread widens the tail test, and the node: line says so.
%% Their bodies moved 8 % up or down (z about 10, within the margin): the rank sum is not
%% widened.
-spec spread_test() -> ok.
spread_test() ->
    Base = fun(I) -> {uniform, 750 + 75 * I, 1250 + 125 * I} end,
    A = side([{name(I), ft_hdr_encode:values({tail, 0.02, 4, Base(I)}, 5000)} || I <- lists:seq(1, 20)]),
    B = side([{name(I), ft_hdr_encode:values({scaled, case I rem 2 of 0 -> 1.08; 1 -> 0.93 end,
                                                {tail, 0.02, case I rem 2 of 0 -> 4.8; 1 -> 3.2 end, Base(I)}}, 5000)}
              || I <- lists:seq(1, 20)]),
    C = #{node_shift := #{spread := #{body := 1.0, tail := St}}} = compare(A, B),
    ?assert(St > 1.5),
    ?assertEqual([], flagged(C)),
    Text = ferrotrace:compare(A, B, #{as => text, width => 200}),
    ?assertMatch({_, _}, binary:match(Text, <<"p99 spread widened its test">>)),
    #{node_shift := #{spread := #{body := 1.0, tail := 1.0}}} = compare(A, A).

%% The slow path twice as slow (p99 doubles, p50 stays): the row says the tail moved.
-spec tail_only_test() -> ok.
tail_only_test() ->
    Base = fun(I) -> {uniform, 750 + 75 * I, 1250 + 125 * I} end,
    A = side([{name(I), ft_hdr_encode:values({tail, 0.02, 4, Base(I)}, 5000)} || I <- lists:seq(1, 20)]),
    B = side([{name(I), ft_hdr_encode:values({tail, 0.02, case I of 11 -> 8; _ -> 4 end, Base(I)}, 5000)}
              || I <- lists:seq(1, 20)]),
    C = compare(A, B),
    ?assertEqual([<<"f11">>], flagged(C)),
    Row = #{verdict := unchanged, tail := slower, p50 := {P, P}, tail_q := {TA, TB}} = row(C, <<"f11">>),
    ?assert(abs(TB / TA - 2) < 0.1),
    ?assertEqual("p99 slower", ferrotrace_compare_report:verdict_text(Row, 0.99)),
    Text = ferrotrace:compare(A, B, #{as => text, width => 120}),
    ?assertMatch({_, _}, binary:match(Text, <<"p99 slower">>)).

%% Three functions: no node's shift, wider margins; 1.2 times is within them, 2 is not.
-spec few_functions_test() -> ok.
few_functions_test() ->
    A = side([{name(I), ft_hdr_encode:values(shape(I), ?N)} || I <- [1, 2, 3]]),
    B = side([{name(1), ft_hdr_encode:values({scaled, 1.2, shape(1)}, ?N)},
              {name(2), ft_hdr_encode:values({scaled, 2.0, shape(2)}, ?N)},
              {name(3), ft_hdr_encode:values(shape(3), ?N)}]),
    C = compare(A, B),
    #{node_shift := none, test := #{min_change := 0.25, min_tail_change := 0.5}} = C,
    ?assertEqual([<<"f2">>], flagged(C)),
    Text = ferrotrace:compare(A, B, #{as => text, width => 100}),
    ?assertMatch({_, _}, binary:match(Text, <<"node: not read">>)).

%% A function with fewer calls than min_calls on a side has no verdict; min_calls lowers it.
-spec too_few_calls_test() -> ok.
too_few_calls_test() ->
    Few = ft_hdr_encode:values({uniform, 1000, 2000}, 10),
    A = side([{name(I), ft_hdr_encode:values(shape(I), ?N)} || I <- lists:seq(1, 6)] ++ [{<<"few">>, Few}]),
    B = side([{name(I), ft_hdr_encode:values(shape(I), ?N)} || I <- lists:seq(1, 6)]
             ++ [{<<"few">>, ft_hdr_encode:values({uniform, 5000, 9000}, 10)}]),
    C = compare(A, B),
    #{verdict := too_few_calls, tail := too_few_calls, p_body := undefined} = row(C, <<"few">>),
    ?assertEqual("too few calls", ferrotrace_compare_report:verdict_text(row(C, <<"few">>), 0.99)),
    #{verdict := slower} = row(compare(A, B, #{min_calls => 5}), <<"few">>).

%% Functions only in A and only in B are listed apart, not in the table.
-spec one_side_only_test() -> ok.
one_side_only_test() ->
    Common = [{name(I), ft_hdr_encode:values(shape(I), ?N)} || I <- lists:seq(1, 5)],
    A = side(Common ++ [{<<"gone">>, ft_hdr_encode:values({uniform, 100, 200}, 50)}]),
    B = side(Common ++ [{<<"new">>, ft_hdr_encode:values({uniform, 300, 400}, 70)},
                        {<<"new2">>, ft_hdr_encode:values({uniform, 300, 400}, 7)}]),
    C = #{rows := Rows, only_a := OnlyA, only_b := OnlyB} = compare(A, B),
    ?assertEqual(5, length(Rows)),
    ?assertMatch([#{name := <<"m:gone/1">>, count := 50}], OnlyA),
    ?assertMatch([#{name := <<"m:new/1">>, count := 70}, #{name := <<"m:new2/1">>, count := 7}], OnlyB),
    Text = ferrotrace:compare(A, B, #{as => text, width => 100}),
    ?assertMatch({_, _}, binary:match(Text, <<"only in A: m:gone/1 (50 calls">>)),
    ?assertMatch({_, _}, binary:match(Text, <<"only in B: m:new/1 (70 calls">>)),
    ?assertEqual([], flagged(C)).

%% Rows a test calls changed come first, each part by the size of the change in total time.
-spec ranking_test() -> ok.
ranking_test() ->
    A = twenty(fun shape/1),
    B = twenty(fun(2) -> {scaled, 3.0, shape(2)};          % +2 x 1.3 us x 2000: +5.2 ms
                  (15) -> {scaled, 0.4, shape(15)};        % -0.6 x 2.7 us x 2000: -3.2 ms
                  (20) -> {scaled, 1.05, shape(20)};       % unchanged, +0.05 x 3.2 us x 2000
                  (I) -> shape(I) end),
    #{rows := [R1, R2, R3 | _]} = compare(A, B),
    ?assertMatch({#{mfa := {_, <<"f2">>, _}, verdict := slower}, #{mfa := {_, <<"f15">>, _}, verdict := faster}},
                 {R1, R2}),
    ?assert(abs(maps:get(change, R1)) > abs(maps:get(change, R2))),
    #{mfa := {_, <<"f20">>, _}, verdict := unchanged} = R3.

%% Compensated against raw: each side's raw latency is compared (A's raw kept beside its
%% compensated latency), and says so; windows keep no raw latency and are refused.
-spec compensation_test() -> ok.
compensation_test() ->
    Shape = fun(I) -> {uniform, 1000 + 100 * I, 2000 + 100 * I} end,
    Raw = fun(I) -> ft_hdr_encode:encode(ft_hdr_encode:values({scaled, 1.5, Shape(I)}, ?N)) end,
    A0 = side([{name(I), ft_hdr_encode:values(Shape(I), ?N)} || I <- lists:seq(1, 6)]),
    A = A0#{functions := [F#{raw => Raw(I), raw_ns => 1} || {I, F} <- lists:zip(lists:seq(1, 6), maps:get(functions, A0))]},
    B = side([{name(I), ft_hdr_encode:values({scaled, 1.5, Shape(I)}, ?N)} || I <- lists:seq(1, 6)],
             #{compensated => false}),
    C = compare(A, B),
    #{test := #{compared := raw}, notes := [Note | _]} = C,
    ?assertMatch({_, _}, binary:match(Note, <<"compared raw">>)),
    ?assertEqual([], flagged(C)),
    #{own := undefined, own_change := undefined} = row(C, <<"f1">>),
    %% Read as compensated against raw, the raw side would be 1.5 times slower everywhere.
    ?assertEqual(6, length(flagged(compare(A#{compensated := false}, B, #{node_shift => none})))),
    ?assertMatch({error, {mixed_compensation, _}}, ferrotrace:compare(A#{window := {0, 100}}, B)),
    %% Call paths keep times as measured on both sides: their export needs no refusal.
    ?assertEqual(<<>>, ferrotrace:export({A, B}, collapsed)).

%% Sides of different kinds, and sessions that time no function, are refused.
-spec refusals_test() -> ok.
refusals_test() ->
    A = twenty(fun shape/1),
    ?assertMatch({error, {different_kinds, calls, raw, _}}, ferrotrace:compare(A, A#{kind := raw})),
    ?assertMatch({error, {no_functions, b, _}}, ferrotrace:compare(A, A#{kind := processes})),
    ?assertMatch({error, {bad_side, _, _}}, ferrotrace:compare(A, {1, 2, 3})),
    ?assertMatch({error, {bad_window, _, _}}, ferrotrace:compare(A, {some_session, {10, 5}})),
    ?assertMatch({error, {no_such_session, nobody_named_this}}, ferrotrace:compare(nobody_named_this, A)),
    Broken = A#{functions := [(hd(maps:get(functions, A)))#{latency => <<1, 2, 3>>}]},
    ?assertMatch({error, {bad_histogram, <<"m:f1/1">>, not_v2, _}}, ferrotrace:compare(A, Broken)).

%% Options are checked, one at a time, with what is accepted.
-spec options_test() -> ok.
options_test() ->
    A = twenty(fun shape/1),
    [?assertMatch({error, {bad_option, {Key, _, _}}}, ferrotrace:compare(A, A, #{Key => Value}))
     || {Key, Value} <- [{level, 1}, {level, 0.2}, {min_change, -1}, {tail, 1.0}, {min_calls, 1},
                         {node_shift, 'maybe'}, {top, 0}, {width, 5}, {as, json}, {colour, red}]],
    ?assertMatch({error, _}, ferrotrace:compare(A, A, not_options)),
    ok = ferrotrace:compare(A, A, [{top, 2}, {width, 60}]),
    #{test := #{level := 0.999, min_change := 0.5}} = compare(A, A, #{level => 0.999, min_change => 0.5}),
    ok.

%% Holm: sorted p-values against alpha/m, alpha/(m-1), ...; the first that fails stops it.
-spec holm_test() -> ok.
holm_test() ->
    ?assertEqual([a, c], ferrotrace_compare_stats:holm([{a, 0.001}, {b, 0.04}, {c, 0.004}, {d, 0.5}], 0.05)),
    ?assertEqual([], ferrotrace_compare_stats:holm([{a, 0.02}, {b, 0.02}], 0.01)),
    ?assertEqual([a, b], ferrotrace_compare_stats:holm([{a, 0.004}, {b, 0.009}], 0.01)),
    ?assertEqual([], ferrotrace_compare_stats:holm([], 0.01)).

%% The Hodges-Lehmann ratio of B to A scaled by a known factor, within the buckets' width,
%% and a confidence interval around it; the rank test's z is 0 for equal sides.
-spec shift_estimate_test() -> ok.
shift_estimate_test() ->
    {ok, A} = ferrotrace_hdr:decode(ft_hdr_encode:encode(ft_hdr_encode:values({uniform, 1000, 4000}, 3000))),
    [begin
         {ok, B} = ferrotrace_hdr:decode(ft_hdr_encode:encode(ft_hdr_encode:values({scaled, F, {uniform, 1000, 4000}}, 3000))),
         {R, Lo, Hi} = ferrotrace_compare_stats:shift(A, B, 0.99),
         ?assert(abs(R / F - 1) < 0.01),
         ?assert(Lo =< R andalso R =< Hi andalso Hi / Lo < 1.2)
     end || F <- [0.5, 1.0, 1.37, 3.0]],
    #{z := Z, greater := G} = ferrotrace_compare_stats:rank_test(A, A, 1),
    ?assert(abs(Z) < 1.0e-9 andalso G > 0.4),
    ?assert(abs(ferrotrace_compare_stats:z_quantile(0.995) - 2.5758) < 0.001),
    ?assertEqual(undefined, ferrotrace_compare_stats:shift([], A, 0.99)).

%% Every line of the text keeps to the width, long names shortened in the middle.
-spec report_width_test() -> ok.
report_width_test() ->
    Long = <<"a_module_with_a_rather_long_name_indeed:and_a_function_named_at_length">>,
    A = side([{<<Long/binary, (name(I))/binary>>, ft_hdr_encode:values(shape(I), ?N)} || I <- lists:seq(1, 8)]
             ++ [{<<"only_a">>, ft_hdr_encode:values(shape(1), 5)}]),
    B = side([{<<Long/binary, (name(I))/binary>>, ft_hdr_encode:values({scaled, 1 + I / 10, shape(I)}, ?N)}
              || I <- lists:seq(1, 8)]),
    [begin
         Text = ferrotrace:compare(A, B, #{as => text, width => W}),
         Lines = string:split(Text, <<"\n">>, all),
         ?assertEqual([], [L || L <- Lines, string:length(L) > W]),
         ?assertMatch([_ | _], [L || L <- Lines, string:prefix(L, "FUNCTION") =/= nomatch])
     end || W <- [40, 60, 80, 132]],
    ok.

%% The differential folded lines: each path of either side with A's and B's own time.
-spec difffolded_test() -> ok.
difffolded_test() ->
    A = (twenty(fun shape/1))#{paths => [{[<<"m:a/0">>], 10}, {[<<"m:a/0">>, <<"m:b/1">>], 30}]},
    B = (twenty(fun shape/1))#{paths => [{[<<"m:a/0">>, <<"m:b/1">>], 50}, {[<<"m:c/0">>], 7}]},
    ?assertEqual(<<"m:a/0 10 0\nm:a/0;m:b/1 30 50\nm:c/0 0 7\n">>, ferrotrace:export({A, B}, collapsed)),
    ?assertMatch({error, {bad_format, json, _}}, ferrotrace:export({A, B}, json)).

%% A saved side written as JSON reads back as it was (a file is its source).
-spec saved_round_trip_test() -> ok.
saved_round_trip_test() ->
    A = (twenty(fun shape/1))#{paths => [{[<<"m:a/0">>, <<"m:b/1">>], 30}], window => {100, 900},
                                spec => [<<"m:_/_">>], sample => #{calls => 10, processes => 1}},
    {ok, Json} = ferrotrace_saved:to_json(A),
    {ok, Back} = ferrotrace_saved:from_json(<<"test">>, Json),
    ?assertEqual(A#{source := <<"file">>}, Back),
    File = filename:join(os:getenv("TMPDIR", "/tmp"), "ferrotrace_compare_tests_" ++ os:getpid() ++ ".json"),
    ok = file:write_file(File, Json),
    try
        C = compare(File, A),
        ?assertEqual([], flagged(C)),
        #{a := #{source := <<"file">>}} = C
    after
        file:delete(File)
    end.

%% A file that is no saved session, a later version, a broken field: each refused, named.
-spec saved_refusals_test() -> ok.
saved_refusals_test() ->
    From = fun(Json) -> ferrotrace_saved:from_json(<<"f">>, Json) end,
    ?assertMatch({error, {not_a_saved_session, <<"f">>, _}}, From(<<"not json">>)),
    ?assertMatch({error, {not_a_saved_session, <<"f">>, _}}, From(<<"{\"format\": \"ferrotrace.summary\", \"version\": 1}">>)),
    ?assertMatch({error, {not_a_saved_session, <<"f">>, _}}, From(<<"[1, 2]">>)),
    ?assertMatch({error, {future_version, <<"f">>, 2, _}}, From(<<"{\"format\": \"ferrotrace.saved\", \"version\": 2}">>)),
    {ok, Good} = ferrotrace_saved:to_json(twenty(fun shape/1)),
    {ok, Doc} = ferrotrace_json:decode(Good),
    [F | Fs] = maps:get(<<"functions">>, Doc),
    Broken = fun(Change) -> iolist_to_binary(json(Change(Doc))) end,
    ?assertMatch({error, {bad_saved_session, <<"f">>, <<"arity">>, _}},
                 From(Broken(fun(D) -> D#{<<"functions">> := [F#{<<"arity">> => 300} | Fs]} end))),
    ?assertMatch({error, {bad_saved_session, <<"f">>, <<"latency_hdr">>, _}},
                 From(Broken(fun(D) -> D#{<<"functions">> := [F#{<<"latency_hdr">> => <<"*not base64*">>} | Fs]} end))),
    ?assertMatch({error, {bad_saved_session, <<"f">>, <<"kind">>, _}},
                 From(Broken(fun(D) -> D#{<<"kind">> => <<"other">>} end))),
    ?assertMatch({error, {bad_saved_session, <<"f">>, <<"span_ms">>, _}},
                 From(Broken(fun(D) -> maps:remove(<<"span_ms">>, D) end))),
    %% A histogram that is no histogram is read only when compared: refused then.
    {ok, Junk} = From(Broken(fun(D) -> D#{<<"functions">> := [F#{<<"latency_hdr">> => base64:encode(<<"junk">>)} | Fs]} end)),
    ?assertMatch({error, {bad_histogram, _, not_v2, _}}, ferrotrace:compare(Junk, Junk)),
    ?assertMatch({error, {file, <<"/nonexistent/dir/x.json">>, _}}, ferrotrace:compare("/nonexistent/dir/x.json", Junk)),
    ?assertMatch({error, {bad_file, _, _}}, ferrotrace:save(1, {not_a, file})),
    ?assertMatch({error, {bad_file, "duration", _}}, ferrotrace:save(1, "duration")),
    ?assertMatch({error, {file, <<"/dev/null">>, <<"not a regular file">>}}, ferrotrace:compare("/dev/null", Junk)),
    ?assertMatch({error, {file, <<"/tmp">>, <<"not a regular file">>}}, ferrotrace:compare("/tmp", Junk)).

%% JSON as the NIF writes it, for the refusals above (a decoded document back to text).
-spec json(term()) -> iodata().
json(M) when is_map(M) -> ["{", lists:join(",", [[json(K), ":", json(V)] || {K, V} <- maps:to_list(M)]), "}"];
json(L) when is_list(L) -> ["[", lists:join(",", [json(V) || V <- L]), "]"];
json(B) when is_binary(B) -> [$", B, $"];
json(null) -> "null";
json(true) -> "true";
json(false) -> "false";
json(N) when is_integer(N) -> integer_to_list(N);
json(F) when is_float(F) -> float_to_list(F).

%%--------------------------------------------------------------------------------------
%% The readers

%% Histograms by hand read the same in Erlang as by the NIF (which re-encodes them
%% deflated: read back too), quantiles equal the NIF's figures.
-spec hdr_against_nif_test() -> ok.
hdr_against_nif_test() ->
    [begin
         Bin = ft_hdr_encode:encode(Values),
         {ok, Mine} = ferrotrace_hdr:decode(Bin),
         {ok, Deflated} = ferrotrace_tracer:histogram_merge([Bin]),
         ?assertEqual({ok, Mine}, ferrotrace_hdr:decode(Deflated)),
         {ok, #{count := Count, p50 := P50, p99 := P99, max := Max}} = ferrotrace_tracer:histogram_figures(Deflated),
         ?assertEqual({Count, P50, P99, Max},
                      {ferrotrace_hdr:count(Mine), ferrotrace_hdr:quantile(Mine, 0.5),
                       ferrotrace_hdr:quantile(Mine, 0.99), ferrotrace_hdr:quantile(Mine, 1.0)}),
         ?assert(lists:all(fun({L, H, C}) -> L =< H andalso C > 0 end, Mine))
     end || Values <- [[{1, 1}], [{1, 3}, {255, 2}, {256, 1}, {257, 5}, {1000000, 2}],
                       ft_hdr_encode:values({uniform, 1, 3600000000000}, 5000),
                       ft_hdr_encode:values({tail, 0.01, 100, {uniform, 500, 700}}, 2000)]],
    ok.

%% Bytes that are no histogram are refused by name, never a crash, never a large allocation.
-spec hdr_bad_bytes_test() -> ok.
hdr_bad_bytes_test() ->
    Good = ft_hdr_encode:encode([{1000, 3}, {5000, 1}]),
    ?assertEqual({error, {bad_histogram, not_v2}}, ferrotrace_hdr:decode(<<1, 2, 3>>)),
    ?assertEqual({error, {bad_histogram, not_v2}}, ferrotrace_hdr:decode(not_a_binary)),
    <<Head:4/binary, _:32, Rest/binary>> = Good,
    ?assertEqual({error, {bad_histogram, truncated}}, ferrotrace_hdr:decode(<<Head/binary, 16#FFFFFFFF:32, Rest/binary>>)),
    ?assertEqual({error, {bad_histogram, truncated}}, ferrotrace_hdr:decode(<<16#1c849314:32, 16#7FFFFFFF:32, 0:64>>)),
    ?assertEqual({error, {bad_histogram, too_large}}, ferrotrace_hdr:decode(wide())),
    %% A deflate bomb: zeros far past any bounded payload.
    Bomb = zlib:compress(<<16#1c849313:32, 0:32, 0:32, 2:32, 1:64, 100:64, 1.0:64/float, 0:(8 * 20000000)>>),
    ?assertEqual({error, {bad_histogram, too_large}}, ferrotrace_hdr:decode(<<16#1c849314:32, (byte_size(Bomb)):32, Bomb/binary>>)),
    ?assertEqual({error, {bad_histogram, corrupt}}, ferrotrace_hdr:decode(<<16#1c849314:32, 4:32, "junk">>)),
    _ = rand:seed(exsss, 58),
    [begin
         At = rand:uniform(byte_size(Good)) - 1,
         <<Before:At/binary, _, After/binary>> = Good,
         case ferrotrace_hdr:decode(<<Before/binary, (rand:uniform(256) - 1), After/binary>>) of
             {ok, Buckets} -> ?assert(is_list(Buckets));
             {error, {bad_histogram, _}} -> ok
         end
     end || _ <- lists:seq(1, 500)],
    ok.

%% A header whose range would need more than 2^20 counts.
-spec wide() -> binary().
wide() ->
    <<16#1c849313:32, 0:32, 0:32, 5:32, 1:64, (1 bsl 62):64, 1.0:64/float>>.

-spec json_test() -> ok.
json_test() ->
    ?assertEqual({ok, #{<<"a">> => [1, 2.5, -300.0, true, false, null, <<"x", 16#e9/utf8, 16#1F600/utf8, "\n">>]}},
                 ferrotrace_json:decode(<<"{\"a\": [1, 2.5, -3e2, true, false, null, \"x\\u00e9\\ud83d\\ude00\\n\"]}">>)),
    ?assertEqual({ok, #{}}, ferrotrace_json:decode(<<" {} ">>)),
    [?assertMatch({error, {not_json, _}}, ferrotrace_json:decode(Bad))
     || Bad <- [<<>>, <<"[1,]">>, <<"01">>, <<"\"\\ud800\"">>, <<"{\"a\" 1}">>, <<"[1] 2">>, <<"\"\t\"">>,
                <<"nul">>, iolist_to_binary(lists:duplicate(65, "[")), <<"1", (binary:copy(<<"0">>, 80))/binary>>,
                <<"\"", 255, "\"">>, not_binary]],
    Deep = iolist_to_binary([lists:duplicate(64, "["), lists:duplicate(64, "]")]),
    ?assertMatch({ok, [_]}, ferrotrace_json:decode(Deep)).
