%%% @doc Histograms made by hand for the comparison's tests: values with counts written as
%%% HdrHistogram V2 (uncompressed) bytes at ferrotrace's precision (2 significant digits,
%%% lowest 1), as the engine would record them; the NIF reads them back
%%% (ferrotrace_compare_tests checks it does, and that ferrotrace_hdr agrees).
-module(ft_hdr_encode).

-export([encode/1, encode/2, values/2]).

-define(HALF_MAGNITUDE, 7).     % 2 digits: 256 sub-buckets, half of them 128
-define(SUB_HALF, 128).
-define(HIGHEST, 3600000000000).

%% @doc `[{ValueNs, Count}]' as V2 bytes.
-spec encode([{pos_integer(), non_neg_integer()}]) -> binary().
encode(Values) ->
    encode(Values, ?HIGHEST).

%% @doc As {@link encode/1} with the header's highest trackable value given.
-spec encode([{pos_integer(), non_neg_integer()}], pos_integer()) -> binary().
encode(Values, Highest) ->
    Counts = lists:foldl(fun({V, C}, Acc) -> maps:update_with(index(V), fun(X) -> X + C end, C, Acc) end,
                         #{}, [{V, C} || {V, C} <- Values, C > 0]),
    Payload = payload(lists:sort(maps:to_list(Counts)), 0, []),
    <<16#1c849313:32, (byte_size(Payload)):32, 0:32, 2:32, 1:64, Highest:64, 1.0:64/float, Payload/binary>>.

%% @doc `N' values spread as `Shape' says, scaled by `Scale': `{uniform, Low, High}' evenly
%% between the two; `{tail, Fraction, Factor, Shape}' that shape with the top `Fraction' of
%% its values made `Factor' times larger. Deterministic (no random draws).
-spec values(tuple(), pos_integer()) -> [{pos_integer(), pos_integer()}].
values({uniform, Low, High}, N) ->
    counted([round(Low + (High - Low) * (I + 0.5) / N) || I <- lists:seq(0, N - 1)]);
values({scaled, Factor, Shape}, N) ->
    counted([round(V * Factor) || {V, C} <- values(Shape, N), _ <- lists:seq(1, C)]);
values({tail, Fraction, Factor, Shape}, N) ->
    All = lists:sort([V || {V, C} <- values(Shape, N), _ <- lists:seq(1, C)]),
    Keep = N - round(N * Fraction),
    {Body, Tail} = lists:split(Keep, All),
    counted(Body ++ [round(V * Factor) || V <- Tail]).

counted(Vs) ->
    lists:foldl(fun(V, [{V, C} | Rest]) -> [{V, C + 1} | Rest];
                   (V, Acc) -> [{V, 1} | Acc]
                end, [], lists:sort(Vs)).

%% HdrHistogram's counts index of a value (unit magnitude 0).
index(V) ->
    Bucket = 56 - leading_zeros(V bor 255),
    Sub = V bsr Bucket,
    ((Bucket + 1) bsl ?HALF_MAGNITUDE) + (Sub - ?SUB_HALF).

leading_zeros(V) -> 64 - bits(V, 0).

bits(0, N) -> N;
bits(V, N) -> bits(V bsr 1, N + 1).

%% Counts as ZigZag LEB128 varints, runs of empty slots as one negative count.
payload([], _Next, Acc) ->
    iolist_to_binary(lists:reverse(Acc));
payload([{Index, Count} | Rest], Next, Acc) ->
    Zeros = case Index - Next of
                0 -> [];
                Gap -> [varint(zigzag(-Gap))]
            end,
    payload(Rest, Index + 1, [varint(zigzag(Count)), Zeros | Acc]).

zigzag(N) when N >= 0 -> N bsl 1;
zigzag(N) -> ((-N) bsl 1) - 1.

varint(N) -> varint(N, 1).

varint(N, 9) -> <<(N band 255)>>;
varint(N, _I) when N < 128 -> <<N>>;
varint(N, I) -> <<(128 bor (N band 127)), (varint(N bsr 7, I + 1))/binary>>.
