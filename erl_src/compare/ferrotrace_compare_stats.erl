%%% @doc The statistics of a comparison: plain functions over HDR buckets (see
%%% doc/comparing.md for the choice and its assumptions).
%%%
%%% <ul>
%%% <li>The body test: a one-sided Wilcoxon-Mann-Whitney rank-sum test of "B is more than
%%% `1 + Margin' times slower than A" (and of "faster"), computed from the buckets: every
%%% call is ranked by its bucket's middle value, calls in one bucket tie (mid-ranks, the
%%% variance corrected for ties), the normal approximation with a continuity correction. A
%%% margin is applied by scaling A's values: under the boundary of the null, B is A scaled
%%% by `1 + Margin', and the two samples are then alike.</li>
%%% <li>The tail test: a z test on the log of the ratio of the two sides' quantile `Q'
%%% (p99), each side's standard error read from its order statistics (distribution-free),
%%% the buckets' width folded in.</li>
%%% <li>The shift: the Hodges-Lehmann estimate of the ratio B/A (the factor by which A must
%%% be scaled for the rank sum to sit at its middle) and its confidence interval, by
%%% inverting the rank test.</li>
%%% <li>A test's standard error widened by a factor (an empirical null's scale: how much
%%% more the functions' z scores spread than sampling alone makes them).</li>
%%% <li>Holm's step-down correction over every test of a comparison.</li>
%%% </ul>
-module(ferrotrace_compare_stats).

-export([prepare/1, rank_test/3, tail_test/4, widened/2, shift/3, holm/2, z_quantile/1, normal_cdf/1]).

-type values() :: [{float(), pos_integer()}].
%% Ascending values (a bucket's middle, possibly scaled), each with its count.
-type test() :: #{z := float(), greater := float(), less := float(), n_a := non_neg_integer(),
                  n_b := non_neg_integer()}.
-opaque prepared() :: {prepared, values(), non_neg_integer(), float()}.
%% Buckets made ready for many rank tests: their middles, count and ties' sum.
-export_type([values/0, test/0, prepared/0]).

%% @doc The rank-sum test of B against A scaled by `Factor': `z' (positive where B ranks
%% above), and the one-sided p-values `greater' (B above) and `less' (B below), with
%% continuity correction and tie-corrected variance. Ascending buckets in, as
%% {@link ferrotrace_hdr:decode/1} gives them.
%% Buckets may be given {@link prepare/1}d, as a comparison does for the many tests of one
%% function.
-spec rank_test(ferrotrace_hdr:buckets() | prepared(), ferrotrace_hdr:buckets() | prepared(), number()) -> test().
rank_test({prepared, A, NA, TA}, {prepared, B, NB, TB}, Factor) ->
    ranks(A, NA, TA, B, NB, TB, float(Factor));
rank_test(A, B, Factor) ->
    rank_test(prepare(A), prepare(B), Factor).

%% @doc Buckets made ready for {@link rank_test/3}: each one's middle value with its count,
%% the calls and the ties' sum (t^3 - t per bucket).
-spec prepare(ferrotrace_hdr:buckets() | prepared()) -> prepared().
prepare({prepared, _, _, _} = P) ->
    P;
prepare(Buckets) ->
    Mids = ferrotrace_hdr:scaled_mid(Buckets, 1),
    {prepared, Mids, total(Mids), lists:foldl(fun({_, C}, T) -> T + cube(C) end, 0.0, Mids)}.

%% @doc The tail test: B's quantile `Q' (0.99) against A's scaled by `Factor', on the log
%% scale, each side's standard error read from its own order statistics (a quarter of the
%% log distance between the values at the ranks two binomial standard deviations either
%% side of `Q * N', the low edge of the lower's bucket and the high edge of the upper's: the
%% histogram's precision folded in), a z test on their difference. `z', `greater' and `less' as {@link rank_test/3}.
-spec tail_test(ferrotrace_hdr:buckets(), ferrotrace_hdr:buckets(), number(), float()) -> test().
tail_test(A, B, Factor, Q) ->
    {NA, NB} = {ferrotrace_hdr:count(A), ferrotrace_hdr:count(B)},
    case NA =:= 0 orelse NB =:= 0 of
        true ->
            #{z => 0.0, greater => 1.0, less => 1.0, n_a => NA, n_b => NB};
        false ->
            {PointA, SeA} = log_quantile(A, NA, Q),
            {PointB, SeB} = log_quantile(B, NB, Q),
            Z = (PointB - PointA - math:log(Factor)) / math:sqrt(SeA * SeA + SeB * SeB),
            #{z => Z, greater => clamp(1 - normal_cdf(Z)), less => clamp(normal_cdf(Z)),
              n_a => NA, n_b => NB}
    end.

%% @doc A test's z and p-values with its standard error widened `Sigma' times (at least 1:
%% an empirical null's scale, see ferrotrace_compare).
-spec widened(test(), float()) -> test().
widened(Test, Sigma) when Sigma =< 1.0 ->
    Test;
widened(Test = #{z := Z0}, Sigma) ->
    Z = Z0 / Sigma,
    Test#{z => Z, greater => clamp(1 - normal_cdf(Z)), less => clamp(normal_cdf(Z))}.

%% The log of the quantile's bucket middle, and its standard error on the log scale.
log_quantile(Buckets, N, Q) ->
    Sd = math:sqrt(N * Q * (1 - Q)),
    Rank = max(1, ceil(Q * N)),
    {Low, High, _} = at(Buckets, Rank, 0),
    %% Two binomial standard deviations each way, halved: a steadier reading of the local
    %% density than one, and one that sees a gap in the order statistics near the quantile.
    {L, _, _} = at(Buckets, max(1, floor(Q * N - 2 * Sd)), 0),
    {_, H, _} = at(Buckets, min(N, ceil(Q * N + 2 * Sd)), 0),
    {math:log(max(1, Low + High) / 2), (math:log(max(1, H)) - math:log(max(1, L))) / 4}.

%% The bucket of the `Rank'th call.
at([{_, _, C} = Bucket | Rest], Rank, Seen) ->
    case Seen + C >= Rank orelse Rest =:= [] of
        true -> Bucket;
        false -> at(Rest, Rank, Seen + C)
    end.

ranks(_A, NA, _TA, _B, NB, _TB, _Factor) when NA =:= 0; NB =:= 0 ->
    #{z => 0.0, greater => 1.0, less => 1.0, n_a => NA, n_b => NB};
ranks(A, NA, TA, B, NB, TB, Factor) ->
    {U, Ties} = u(A, B, Factor, 0, 0.0, TA + TB),
    N = NA + NB,
    Mean = NA * NB / 2,
    Var = NA * NB / 12 * ((N + 1) - Ties / (N * (N - 1))),
    case Var =< 0 of
        true ->
            %% Every call in one bucket: no order to test.
            #{z => 0.0, greater => 1.0, less => 1.0, n_a => NA, n_b => NB};
        false ->
            Sd = math:sqrt(Var),
            Greater = 1 - normal_cdf((U - Mean - 0.5) / Sd),
            Less = normal_cdf((U - Mean + 0.5) / Sd),
            #{z => (U - Mean) / Sd, greater => clamp(Greater), less => clamp(Less),
              n_a => NA, n_b => NB}
    end.

clamp(P) -> min(1.0, max(0.0, P)).

%% U of B (for each call of B, the calls of A below it, plus half those tied with it), A's
%% values scaled by `F' as they are walked, two ascending lists at once; the ties' sum
%% starts as if nothing tied across the two (each list's values are distinct) and is
%% corrected where a value of A meets one of B.
u([{Ma, Ca} | A], [{Vb, _} | _] = B, F, BelowA, U, Ties) when Ma * F < Vb ->
    u(A, B, F, BelowA + Ca, U, Ties);
u([{Ma, _} | _] = A, [{Vb, Cb} | B], F, BelowA, U, Ties) when Ma * F > Vb ->
    u(A, B, F, BelowA, U + Cb * BelowA, Ties);
u([{_, Ca} | A], [{_, Cb} | B], F, BelowA, U, Ties) ->
    u(A, B, F, BelowA + Ca, U + Cb * (BelowA + Ca / 2), Ties + cube(Ca + Cb) - cube(Ca) - cube(Cb));
u([], B, _F, BelowA, U, Ties) ->
    {lists:foldl(fun({_, Cb}, U1) -> U1 + Cb * BelowA end, U, B), Ties};
u(_A, [], _F, _BelowA, U, Ties) ->
    {U, Ties}.

cube(C) ->
    T = float(C),
    T * T * T - T.

total(Values) -> lists:sum([C || {_, C} <- Values]).

%% @doc The Hodges-Lehmann ratio B/A and its two-sided confidence interval at `Level'
%% (0.99): `{Ratio, Low, High}', the factors that scale A where the rank sum crosses its
%% middle and the level's critical values. `undefined' for an empty side. Buckets as
%% {@link rank_test/3} takes them.
-spec shift(ferrotrace_hdr:buckets() | prepared(), ferrotrace_hdr:buckets() | prepared(), float()) ->
          {float(), float(), float()} | undefined.
shift(A0, B0, Level) ->
    case {prepare(A0), prepare(B0)} of
        {{prepared, _, 0, _}, _} -> undefined;
        {_, {prepared, _, 0, _}} -> undefined;
        {A = {prepared, MA, _, _}, B = {prepared, MB, _, _}} ->
            Z = z_quantile(1 - (1 - Level) / 2),
            {MinA, MaxA} = {element(1, hd(MA)), element(1, lists:last(MA))},
            {MinB, MaxB} = {element(1, hd(MB)), element(1, lists:last(MB))},
            %% Log-factors wide enough that every scaled A lies above or below every B.
            Lo = math:log(max(1, MinB) / max(1, MaxA)) - 1.0,
            Hi = math:log(max(1, MaxB) / max(1, MinA)) + 1.0,
            ZAt = fun(D) -> maps:get(z, rank_test(A, B, math:exp(D))) end,
            Point = crossing(ZAt, 0.0, Lo, Hi),
            %% z falls as A is scaled up: the low end of the ratio is where z = +Z.
            {math:exp(Point), math:exp(crossing(ZAt, Z, Lo, Point)), math:exp(crossing(ZAt, -Z, Point, Hi))}
    end.

%% The log-factor in Lo..Hi where the decreasing z(D) crosses `Target': regula falsi with
%% the Illinois step (a side kept twice has its value halved), to 1e-6 or 60 steps.
crossing(ZAt, Target, Lo, Hi) ->
    F = fun(D) -> ZAt(D) - Target end,
    illinois(F, Lo, F(Lo), Hi, F(Hi), none, 60).

illinois(_F, Lo, _FLo, Hi, _FHi, _Kept, Steps) when Steps =:= 0; Hi - Lo < 1.0e-6 ->
    (Lo + Hi) / 2;
illinois(_F, Lo, FLo, _Hi, _FHi, _Kept, _Steps) when FLo =< 0 ->
    Lo;                                      % z already at or under the target: no crossing inside
illinois(_F, _Lo, _FLo, Hi, FHi, _Kept, _Steps) when FHi >= 0 ->
    Hi;
illinois(F, Lo, FLo, Hi, FHi, Kept, Steps) ->
    D0 = (Lo * FHi - Hi * FLo) / (FHi - FLo),
    %% A step stuck at an end (a flat z) falls back to halving.
    D = case D0 =< Lo orelse D0 >= Hi of
            true -> (Lo + Hi) / 2;
            false -> D0
        end,
    case F(D) of
        FD when FD > 0 ->
            FHi1 = case Kept of hi -> FHi / 2; _ -> FHi end,
            illinois(F, D, FD, Hi, FHi1, hi, Steps - 1);
        FD when FD < 0 ->
            FLo1 = case Kept of lo -> FLo / 2; _ -> FLo end,
            illinois(F, Lo, FLo1, D, FD, lo, Steps - 1);
        _ ->
            D
    end.

%% @doc Holm's step-down correction: the keys of `Tests' (`[{Key, P}]') whose p-value
%% survives at family-wise level `Alpha', in the order given.
-spec holm([{Key, float()}], float()) -> [Key] when Key :: term().
holm(Tests, Alpha) ->
    Sorted = lists:keysort(2, Tests),
    M = length(Sorted),
    Passed = holm(Sorted, Alpha, M, []),
    [K || {K, _} <- Tests, lists:member(K, Passed)].

holm([{K, P} | Rest], Alpha, M, Acc) when P =< Alpha / M ->
    holm(Rest, Alpha, M - 1, [K | Acc]);
holm(_, _Alpha, _M, Acc) ->
    Acc.

%% @doc The standard normal distribution function.
-spec normal_cdf(float()) -> float().
normal_cdf(Z) ->
    0.5 * math:erfc(-Z / math:sqrt(2)).

%% @doc The standard normal quantile of `P' (between 0 and 1), by bisection.
-spec z_quantile(float()) -> float().
z_quantile(P) when P > 0, P < 1 ->
    quantile(P, -40.0, 40.0, 100).

quantile(_P, Lo, Hi, 0) -> (Lo + Hi) / 2;
quantile(P, Lo, Hi, N) ->
    Mid = (Lo + Hi) / 2,
    case normal_cdf(Mid) < P of
        true -> quantile(P, Mid, Hi, N - 1);
        false -> quantile(P, Lo, Mid, N - 1)
    end.
