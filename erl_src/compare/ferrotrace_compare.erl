%%% @doc What changed between two sessions: `ferrotrace:compare/2,3' and the pair exports.
%%%
%%% Each side is read into its saved form ({@link ferrotrace_saved}): a session, a window of
%%% one, a cluster session or a saved file. Functions are matched by name; for each one in
%%% both, two tests ({@link ferrotrace_compare_stats}) ask whether B's calls are slower or
%%% faster than A's beyond a margin: a rank-sum test on the whole distribution (the body)
%%% and a test of the tail quantile (p99). With five functions or more, a change must also
%%% pass the margin around the shift every function shares (the node's: its load, its CPU),
%%% the median of the functions' own shifts; Holm's correction runs over every test of the
%%% comparison, at the level asked (99 %). doc/comparing.md explains the choice and its
%%% assumptions.
-module(ferrotrace_compare).

-export([compare/3, comparison/3, check_options/1, export/4]).

%% Functions that must have enough calls on both sides for the node's shift to be read.
-define(NODE_FUNCTIONS, 5).
%% Calls above the tail quantile each side needs for the tail test.
-define(TAIL_CALLS, 10).

-type verdict() :: slower | faster | unchanged | too_few_calls | not_timed.
-type options() :: #{level => float(), min_change => auto | number(), min_tail_change => auto | number(),
                     tail => float(), min_calls => pos_integer(), node_shift => auto | none,
                     top => pos_integer() | all, width => pos_integer(), as => print | text | map}.
-type comparison() :: #{atom() => term()}.
-export_type([verdict/0, options/0, comparison/0]).

-define(DEFAULTS, #{level => 0.99, min_change => auto, min_tail_change => auto, tail => 0.99,
                    min_calls => 20, node_shift => auto, top => 20, as => print}).

%% @doc `ferrotrace:compare(A, B, Options)': the table printed (`as => print'), as text
%% (`as => text') or the comparison as a map (`as => map').
-spec compare(term(), term(), term()) -> ok | binary() | {ok, comparison()} | {error, term()}.
compare(A, B, Options0) ->
    case check_options(Options0) of
        {ok, Options = #{as := As, width := Width}} ->
            case comparison(A, B, Options) of
                {ok, C} when As =:= map -> {ok, C};
                {ok, C} when As =:= text -> unicode:characters_to_binary(ferrotrace_compare_report:format(C, Options#{width => Width}));
                {ok, C} -> io:put_chars(ferrotrace_compare_report:format(C, Options#{width => Width}));
                {error, _} = Error -> Error
            end;
        {error, _} = Error ->
            Error
    end.

%% @doc Options checked, defaults filled in (see `ferrotrace:compare/3').
-spec check_options(term()) -> {ok, map()} | {error, term()}.
check_options(Options0) ->
    case ferrotrace_options:to_map(Options0) of
        {ok, Options} -> check(maps:to_list(Options), maps:put(width, ferrotrace_options:default_width(), ?DEFAULTS));
        {error, _} = Error -> Error
    end.

check([], Acc) ->
    {ok, Acc};
check([{level, L} | Rest], Acc) when is_number(L), L >= 0.5, L < 1 ->
    check(Rest, Acc#{level => float(L)});
check([{K, auto} | Rest], Acc) when K =:= min_change; K =:= min_tail_change ->
    check(Rest, Acc#{K => auto});
check([{K, M} | Rest], Acc) when (K =:= min_change orelse K =:= min_tail_change), is_number(M), M >= 0, M =< 10 ->
    check(Rest, Acc#{K => float(M)});
check([{tail, Q} | Rest], Acc) when is_number(Q), Q >= 0.5, Q < 1 ->
    check(Rest, Acc#{tail => float(Q)});
check([{min_calls, N} | Rest], Acc) when is_integer(N), N >= 2, N =< 1000000 ->
    check(Rest, Acc#{min_calls => N});
check([{node_shift, S} | Rest], Acc) when S =:= auto; S =:= none ->
    check(Rest, Acc#{node_shift => S});
check([{top, T} | Rest], Acc) when T =:= all; is_integer(T), T > 0 ->
    check(Rest, Acc#{top => T});
check([{width, W} | Rest], Acc) when is_integer(W), W >= 40, W =< 1000 ->
    check(Rest, Acc#{width => W});
check([{as, As} | Rest], Acc) when As =:= print; As =:= text; As =:= map ->
    check(Rest, Acc#{as => As});
check([{Key, Value} | _], _Acc) ->
    {error, {bad_option, {Key, ferrotrace_hint:brief(Value), accepted(Key)}}}.

accepted(level) -> <<"the test's level, 0.5 =< L < 1 (default 0.99)">>;
accepted(min_change) -> <<"auto or a fraction: the change called slower or faster beyond (auto: 0.1 around the node's shift, 0.25 without)">>;
accepted(min_tail_change) -> <<"auto or a fraction, as min_change for the tail (auto: 0.25 around the node's shift, 0.5 without)">>;
accepted(tail) -> <<"the tail quantile tested, 0.5 =< Q < 1 (default 0.99)">>;
accepted(min_calls) -> <<"the calls each side needs for a verdict, 2 to 1000000 (default 20)">>;
accepted(node_shift) -> <<"auto (the median shift of 5 functions or more) or none">>;
accepted(top) -> <<"rows printed: a positive integer or all (default 20)">>;
accepted(width) -> <<"columns, 40 to 1000">>;
accepted(as) -> <<"print, text or map">>;
accepted(_) -> <<"level, min_change, min_tail_change, tail, min_calls, node_shift, top, width, as">>.

%%--------------------------------------------------------------------------------------
%% The comparison

%% @doc The comparison of sides `A' and `B' (see {@link ferrotrace_saved:read/1}) with
%% options checked by {@link check_options/1}.
-spec comparison(term(), term(), map()) -> {ok, comparison()} | {error, term()}.
comparison(A, B, Options) ->
    case {side(A), side(B)} of
        {{ok, SA}, {ok, SB}} -> compatible(SA, SB, Options);
        {{error, _} = Error, _} -> Error;
        {_, {error, _} = Error} -> Error
    end.

side(Saved = #{version := _, functions := _}) -> {ok, Saved};
side(Side) -> ferrotrace_saved:read(Side).

compatible(#{kind := processes}, _, _) ->
    {error, {no_functions, a, <<"A is a processes/2 session: it times no function">>}};
compatible(_, #{kind := processes}, _) ->
    {error, {no_functions, b, <<"B is a processes/2 session: it times no function">>}};
compatible(#{kind := KA}, #{kind := KB}, _) when KA =/= KB ->
    {error, {different_kinds, KA, KB, <<"compare a calls/2 session with a calls/2 session, a session/1 with a session/1">>}};
compatible(SA = #{compensated := Same}, SB = #{compensated := Same}, Options) ->
    compare_sides(SA, SB, latency, Options);
compatible(SA, SB, Options) ->
    %% One compensated, one not: the compensated side's raw latency (kept beside it) is
    %% compared with the other's; a window keeps no raw latency.
    case [S || S = #{window := W} <- [SA, SB], W =/= undefined] of
        [] -> compare_sides(SA, SB, raw, Options);
        _ -> {error, {mixed_compensation, <<"one side is compensated, the other not, and a window keeps no raw "
                                            "latency to compare with: compare windows of sessions started alike "
                                            "(compensate)">>}}
    end.

compare_sides(SA, SB, Compared, Options) ->
    try
        FA = functions(SA, Compared),
        FB = functions(SB, Compared),
        {ok, rows(SA, SB, FA, FB, Compared, Options)}
    catch
        throw:{bad_histogram, Name, Why} ->
            {error, {bad_histogram, Name, Why, <<"a saved histogram does not read: the file was changed or cut">>}}
    end.

%% Each function's figures with its histogram decoded: what is compared (`latency', or
%% `raw' where one side compensated and the other not).
functions(Side = #{functions := Fs, compensated := Compensated}, Compared) ->
    Scale = total_scale(Side),
    maps:from_list(
      [begin
           Bin = case {Compared, Compensated, Raw} of
                     {raw, true, undefined} -> Latency;
                     {raw, true, _} -> Raw;
                     _ -> Latency
                 end,
           Buckets = case ferrotrace_hdr:decode(Bin) of
                         {ok, Bs} -> Bs;
                         {error, {bad_histogram, Why}} -> throw({bad_histogram, Name, Why})
                     end,
           Total = case {Compared, Compensated} of
                       {raw, true} when is_integer(RawNs) -> RawNs;
                       _ -> maps:get(total_ns, F)
                   end,
           {MFA, F#{buckets => Buckets, ranks => ferrotrace_compare_stats:prepare(Buckets),
                    timed => ferrotrace_hdr:count(Buckets), total => Total * Scale(F),
                    own_total => case Compared of
                                     raw -> undefined;
                                     latency when is_integer(OwnNs) -> OwnNs * Scale(F);
                                     latency -> undefined
                                 end}}
       end || F = #{mfa := MFA, name := Name, latency := Latency, raw := Raw, raw_ns := RawNs, own_ns := OwnNs} <- Fs]).

%% A sampled side's totals stand for the calls it did not time: scaled by each function's
%% estimate.
total_scale(_Side) ->
    fun(#{estimated := Est, count := Count}) when is_integer(Est), Count > 0 -> Est / Count;
       (_) -> 1
    end.

rows(SA, SB, FA, FB, Compared, Options = #{min_calls := MinCalls, tail := Q, level := Level}) ->
    Common = [M || M <- lists:sort(maps:keys(FA)), maps:is_key(M, FB)],
    Pairs = [{M, maps:get(M, FA), maps:get(M, FB)} || M <- Common],
    Enough = fun(#{timed := NA}, #{timed := NB}) -> NA >= MinCalls andalso NB >= MinCalls end,
    TailEnough = fun(#{timed := NA}, #{timed := NB}) ->
                         NA * (1 - Q) >= ?TAIL_CALLS andalso NB * (1 - Q) >= ?TAIL_CALLS
                 end,
    Shifts = maps:from_list([{M, ferrotrace_compare_stats:shift(RA, RB, Level)}
                             || {M, FA1 = #{ranks := RA}, FB1 = #{ranks := RB}} <- Pairs, Enough(FA1, FB1)]),
    TailRatios = maps:from_list([{M, tail_ratio(BA, BB, Q)}
                                 || {M, FA1 = #{buckets := BA}, FB1 = #{buckets := BB}} <- Pairs, TailEnough(FA1, FB1)]),
    Node0 = node_shift(Shifts, TailRatios, Options),
    {MinChange, MinTail} = margins(Node0, Options),
    {Cb, Ct} = case Node0 of
                   none -> {1.0, 1.0};
                   #{p50 := P, tail := T} -> {P, T}
               end,
    %% How much more the functions' p99 z scores spread around the node's shift than
    %% sampling alone would make them (at least 1): the tail test's standard error is
    %% widened by it. Not the rank sum's: its margin holds there, and where a change
    %% reached most functions (a busier node queueing every call differently) that spread
    %% is the change itself, and widening by it hid a 6x slower search on the demo shop.
    Spread = spread(Node0, [tail_z(FA1, FB1, Ct, Q) || {_, FA1, FB1} <- Pairs, TailEnough(FA1, FB1)]),
    Node = case Node0 of
               none -> none;
               _ -> Node0#{spread => Spread}
           end,
    Tested = [{M, FA1, FB1, test(FA1, FB1, Cb, Ct, MinChange, MinTail, Enough(FA1, FB1), TailEnough(FA1, FB1), Q, Spread)}
              || {M, FA1, FB1} <- Pairs],
    PValues = lists:append([[{{M, body}, P} || {M, _, _, #{body := {_, P}}} <- [T]] ++
                            [{{M, tail}, P} || {M, _, _, #{tail := {_, P}}} <- [T]] || T <- Tested]),
    Alpha = 1 - Level,
    Passed = ferrotrace_compare_stats:holm(PValues, Alpha),
    Rows = [row(M, FA1, FB1, T, Passed, maps:get(M, Shifts, undefined), Q, Compared) || {M, FA1, FB1, T} <- Tested],
    %% The rows a test calls changed first, each part by the change in total time: a total
    %% also moves with a few calls held up by the machine (a descheduled scheduler), which
    %% the tests weigh and a sum does not.
    Sorted = lists:sort(fun(X, Y) -> order(X) =< order(Y) end, Rows),
    #{a => describe(SA), b => describe(SB),
      test => #{level => Level, tests => length(PValues), correction => holm, min_change => MinChange,
                min_tail_change => MinTail, tail => Q, min_calls => MinCalls, compared => Compared},
      node_shift => Node,
      rows => Sorted,
      only_a => only([maps:get(M, FA) || M <- lists:sort(maps:keys(FA)), not maps:is_key(M, FB)], Q),
      only_b => only([maps:get(M, FB) || M <- lists:sort(maps:keys(FB)), not maps:is_key(M, FA)], Q),
      notes => notes(SA, SB, Compared)}.

order(#{verdict := V, tail := T, change := D}) ->
    Changed = lists:member(V, [slower, faster]) orelse lists:member(T, [slower, faster]),
    {not Changed, -abs(D)}.

tail_ratio(A, B, Q) ->
    ferrotrace_hdr:quantile(B, Q) / max(1, ferrotrace_hdr:quantile(A, Q)).

%% The shift every function shares: the median of the functions' shifts at p50 (their
%% Hodges-Lehmann ratios) and at the tail quantile, from ?NODE_FUNCTIONS or more.
node_shift(_Shifts, _Tails, #{node_shift := none}) ->
    none;
node_shift(Shifts, Tails, _Options) ->
    Points = [math:log(R) || {R, _, _} <- maps:values(Shifts)],
    TailPoints = [math:log(max(R, 1.0e-9)) || R <- maps:values(Tails)],
    case length(Points) >= ?NODE_FUNCTIONS of
        true ->
            Tail = case length(TailPoints) >= ?NODE_FUNCTIONS of
                       true -> math:exp(median(TailPoints));
                       false -> 1.0
                   end,
            #{p50 => math:exp(median(Points)), tail => Tail, functions => length(Points),
              tail_functions => length(TailPoints)};
        false ->
            none
    end.

tail_z(#{buckets := A}, #{buckets := B}, Factor, Q) ->
    maps:get(z, ferrotrace_compare_stats:tail_test(A, B, Factor, Q)).

%% Efron's empirical null, its scale only: 1.4826 times the median absolute deviation of
%% the functions' z scores around the node's shift, where that shift is read (the same
%% functions); never below 1.
spread(none, _TailZ) ->
    #{body => 1.0, tail => 1.0};
spread(_Node, TailZ) when length(TailZ) >= ?NODE_FUNCTIONS ->
    Mid = median(TailZ),
    #{body => 1.0, tail => max(1.0, 1.4826 * median([abs(Z - Mid) || Z <- TailZ]))};
spread(_Node, _TailZ) ->
    #{body => 1.0, tail => 1.0}.

median(L) ->
    S = lists:sort(L),
    N = length(S),
    case N rem 2 of
        1 -> lists:nth((N + 1) div 2, S);
        0 -> (lists:nth(N div 2, S) + lists:nth(N div 2 + 1, S)) / 2
    end.

%% The margins: as given, or by default wider where the node's shift is not taken out.
margins(Node, #{min_change := M, min_tail_change := T}) ->
    {margin(M, Node, 0.1, 0.25), margin(T, Node, 0.25, 0.5)}.

margin(auto, none, _Relative, Absolute) -> Absolute;
margin(auto, _, Relative, _Absolute) -> Relative;
margin(M, _, _, _) -> M.

%% The body and tail tests of one function: `{Direction, P}' each, two-sided p-values.
%% Slower means beyond the margin both on its own and around the node's shift (an
%% intersection-union test: the larger of the two p-values, which is the test against the
%% larger factor); the node's shift only ever widens what is called unchanged.
test(#{buckets := A, ranks := RA}, #{buckets := B, ranks := RB}, Cb, Ct, M, Mt, Enough, TailEnough, Q,
     #{body := Sb, tail := St}) ->
    Wide = fun ferrotrace_compare_stats:widened/2,
    Body = case Enough of
               true ->
                   Slower = maps:get(greater, Wide(ferrotrace_compare_stats:rank_test(RA, RB, max(Cb, 1.0) * (1 + M)), Sb)),
                   Faster = maps:get(less, Wide(ferrotrace_compare_stats:rank_test(RA, RB, min(Cb, 1.0) / (1 + M)), Sb)),
                   #{body => two_sided(Slower, Faster)};
               false ->
                   #{}
           end,
    case TailEnough of
        true ->
            TS = maps:get(greater, Wide(ferrotrace_compare_stats:tail_test(A, B, max(Ct, 1.0) * (1 + Mt), Q), St)),
            TF = maps:get(less, Wide(ferrotrace_compare_stats:tail_test(A, B, min(Ct, 1.0) / (1 + Mt), Q), St)),
            Body#{tail => two_sided(TS, TF)};
        false ->
            Body
    end.

two_sided(Slower, Faster) when Slower =< Faster -> {slower, min(1.0, 2 * Slower)};
two_sided(_Slower, Faster) -> {faster, min(1.0, 2 * Faster)}.

row(M, FA, FB, Tests, Passed, Shift, Q, Compared) ->
    #{buckets := BA, timed := NA, total := TA, own_total := OA} = FA,
    #{buckets := BB, timed := NB, total := TB, own_total := OB} = FB,
    Verdict = fun(Key, Enough) ->
                      case maps:find(Key, Tests) of
                          {ok, {Dir, _}} -> case lists:member({M, Key}, Passed) of
                                                true -> Dir;
                                                false -> unchanged
                                            end;
                          error when NA =:= 0, NB =:= 0 -> not_timed;
                          error -> Enough
                      end
              end,
    Own = case {OA, OB, Compared} of
              {_, _, raw} -> undefined;
              {X, Y, _} when is_number(X), is_number(Y) -> {round(X), round(Y)};
              _ -> undefined
          end,
    #{mfa => M, name => maps:get(name, FB),
      count => {maps:get(count, FA), maps:get(count, FB)}, timed => {NA, NB},
      p50 => {ferrotrace_hdr:quantile(BA, 0.5), ferrotrace_hdr:quantile(BB, 0.5)},
      tail_q => {ferrotrace_hdr:quantile(BA, Q), ferrotrace_hdr:quantile(BB, Q)},
      total => {round(TA), round(TB)}, own => Own,
      change => TB - TA,
      own_change => case Own of undefined -> undefined; {OA1, OB1} -> OB1 - OA1 end,
      shift => Shift,
      p_body => case maps:find(body, Tests) of {ok, {_, P}} -> P; error -> undefined end,
      p_tail => case maps:find(tail, Tests) of {ok, {_, P}} -> P; error -> undefined end,
      verdict => Verdict(body, too_few_calls),
      tail => Verdict(tail, too_few_calls)}.

only(Fs, Q) ->
    [#{mfa => M, name => Name, count => C, p50 => ferrotrace_hdr:quantile(Bs, 0.5),
       tail_q => ferrotrace_hdr:quantile(Bs, Q), total => round(T)}
     || #{mfa := M, name := Name, count := C, buckets := Bs, total := T} <- Fs].

describe(S) ->
    maps:with([source, file, id, kind, node, nodes, otp, spec, started_at, span_ms, window, status, compensated,
               sample, budget], S).

notes(SA, SB, Compared) ->
    [N || N <- [compensation_note(SA, SB, Compared),
                sampling_note(a, SA), sampling_note(b, SB),
                span_note(SA, SB),
                window_note(SA, SB),
                running_note(a, SA), running_note(b, SB)], N =/= none].

compensation_note(#{compensated := CA}, _, raw) ->
    Which = case CA of true -> "A"; false -> "B" end,
    iolist_to_binary(["compared raw: ", Which, " took tracing's cost out of its latencies (compensate), the other did not, ",
                      "so both are compared as measured; own time is not compared"]);
compensation_note(#{compensated := true}, _, latency) -> none;
compensation_note(_, _, latency) -> <<"both sides as measured (not compensated): tracing's own cost is in every latency">>.

sampling_note(Side, #{sample := #{calls := C, processes := P}, budget := Budget}) when C > 1; P > 1; Budget ->
    What = case Budget of
               true -> "an overhead budget sampled its calls";
               false -> io_lib:format("sampled (1 call in ~b, 1 process in ~b)", [C, P])
           end,
    iolist_to_binary([side_name(Side), " was ", What, ": tests on the calls it timed, totals estimated"]);
sampling_note(_, _) ->
    none.

%% Totals add up a side's calls over its span: spans far apart weigh on their change.
span_note(#{span_ms := A}, #{span_ms := B}) when A > 2 * B; B > 2 * A ->
    iolist_to_binary(io_lib:format("spans differ (A ~s, B ~s): a total counts the calls of its side's span",
                                   [ms(A), ms(B)]));
span_note(_, _) -> none.

window_note(#{window := undefined}, #{window := undefined}) -> none;
window_note(_, _) -> <<"a window holds latency histograms only: own time and call paths are the whole session's or none">>.

running_note(Side, #{status := running, span_ms := Span}) ->
    iolist_to_binary([side_name(Side), " still running: read at ", ms(Span)]);
running_note(_, _) -> none.

side_name(a) -> "A";
side_name(b) -> "B".

ms(Ms) when Ms < 10000 -> io_lib:format("~.1f s", [Ms / 1000]);
ms(Ms) -> io_lib:format("~b s", [round(Ms / 1000)]).

%%--------------------------------------------------------------------------------------
%% The pair exports

%% @doc `ferrotrace:export({A, B}, Format)': `collapsed' (the differential folded form, two
%% counts a line: A's and B's own time on each call path, as Brendan Gregg's difffolded
%% writes it and flamegraph.pl and inferno read it) or `html' (one page: the comparison's
%% table and a differential flame graph, see {@link ferrotrace_compare_html}).
-spec export(term(), term(), collapsed | html, map()) -> {ok, binary()} | {error, term()}.
export(A, B, Format, Options) when Format =:= collapsed; Format =:= html ->
    case {side(A), side(B)} of
        {{ok, SA}, {ok, SB}} ->
            case Format of
                collapsed ->
                    %% Call paths keep times as measured on both sides (compensated or not).
                    {ok, difffolded(SA, SB)};
                html ->
                    case check_options(maps:merge(#{width => 160}, Options)) of
                        {ok, Opts} ->
                            case compatible(SA, SB, Opts) of
                                {ok, C} ->
                                    ferrotrace_compare_html:page(C, difffolded(SA, SB), Opts);
                                {error, _} = Error ->
                                    Error
                            end;
                        {error, _} = Error ->
                            Error
                    end
            end;
        {{error, _} = Error, _} -> Error;
        {_, {error, _} = Error} -> Error
    end;
export(_A, _B, Format, _Options) ->
    {error, {bad_format, Format, <<"a pair {A, B} exports as collapsed or html">>}}.

%% @doc The differential folded lines: every call path of either side, `path A B' with each
%% side's own time on it (0 where a side has none), paths in order.
-spec difffolded(ferrotrace_saved:saved(), ferrotrace_saved:saved()) -> binary().
difffolded(#{paths := PA}, #{paths := PB}) ->
    Add = fun(Paths, I, Acc) ->
                  lists:foldl(fun({Frames, Ns}, M) ->
                                      maps:update_with(Frames, fun(T) -> setelement(I, T, element(I, T) + Ns) end,
                                                       setelement(I, {0, 0}, Ns), M)
                              end, Acc, Paths)
          end,
    Both = Add(PB, 2, Add(PA, 1, #{})),
    iolist_to_binary([[lists:join($;, Frames), $\s, integer_to_binary(A), $\s, integer_to_binary(B), $\n]
                      || {Frames, {A, B}} <- lists:sort(maps:to_list(Both))]).
