%%% @doc HdrHistogram V2 histograms read in Erlang: the buckets a comparison walks.
%%%
%%% A comparison must run where only Erlang is (`ferrotrace compare a.json b.json' in the
%%% bundle's escript, on any machine), so it cannot ask the NIF to read a saved histogram.
%%% This module reads the V2 encoding (plain, or deflated as every HdrHistogram port writes
%%% it) with the same bounds as the engine's `hdr_bytes': every length the header claims must
%%% fit the bytes given, the counts must fit 2^20 slots, and inflating stops at what such a
%%% histogram can take, so crafted bytes are refused before anything large is allocated.
%%%
%%% A histogram is read as its non-empty buckets, ascending: `{Low, High, Count}', every
%%% value recorded in the bucket lying in `Low..High' (HdrHistogram's lowest and highest
%%% equivalent values). At ferrotrace's 2 significant digits a bucket is at most 1/128 of
%%% its values wide.
-module(ferrotrace_hdr).

-export([decode/1, count/1, quantile/2, mean/1, total/1, add/2, scaled_mid/2]).

-type bucket() :: {Low :: non_neg_integer(), High :: non_neg_integer(), Count :: pos_integer()}.
-type buckets() :: [bucket()].
-export_type([bucket/0, buckets/0]).

-define(V2_COOKIE, 16#1c849313).
-define(V2_COMPRESSED_COOKIE, 16#1c849314).
-define(HEADER_BYTES, 40).
-define(MAX_COUNTS, (1 bsl 20)).
-define(MAX_PAYLOAD, (?MAX_COUNTS * 9)).

%% @doc The buckets of a V2 histogram (deflated or not): `{ok, Buckets}', or `{error,
%% {bad_histogram, Why}}' with `Why' one of `not_v2', `truncated', `too_large', `corrupt'
%% (as the engine's `hdr_bytes' names them).
-spec decode(term()) -> {ok, buckets()} | {error, {bad_histogram, not_v2 | truncated | too_large | corrupt}}.
%% Known to be a binary before it is matched: OTP 25's compiler then checks no unit
%% (`bs_test_unit', which OTP 29 no longer loads: the bundle's beams come from OTP 25).
decode(Bytes) when is_binary(Bytes) ->
    case Bytes of
        <<?V2_COOKIE:32, _/binary>> ->
            plain(Bytes);
        <<?V2_COMPRESSED_COOKIE:32, Length:32, Body/binary>> when Length =< byte_size(Body) ->
            case inflate(binary:part(Body, 0, Length)) of
                {ok, Plain} -> plain(Plain);
                {error, Why} -> {error, {bad_histogram, Why}}
            end;
        <<?V2_COMPRESSED_COOKIE:32, _:32, _/binary>> ->
            {error, {bad_histogram, truncated}};
        _ ->
            {error, {bad_histogram, not_v2}}
    end;
decode(_) ->
    {error, {bad_histogram, not_v2}}.

plain(<<?V2_COOKIE:32, Payload:32, Offset:32/signed, Digits:32, Low:64, High:64, _Ratio:64, Rest/binary>>) ->
    if
        Payload > byte_size(Rest) ->
            {error, {bad_histogram, truncated}};
        true ->
            case layout(Low, High, Digits) of
                {ok, Layout = #{slots := Slots}} when Slots =< ?MAX_COUNTS ->
                    counts(binary:part(Rest, 0, Payload), Offset, Slots, Layout);
                _ ->
                    {error, {bad_histogram, too_large}}
            end
    end;
plain(_) ->
    {error, {bad_histogram, not_v2}}.

%% The bucket layout HdrHistogram derives from its range and precision, and how many count
%% slots it has (the engine's `counts_len').
layout(Low, High, Digits) when Digits =< 5, Low >= 1, High >= 2 * Low ->
    Single = 2 * pow10(Digits),
    Unit = floor_log2(Low),
    SubMagnitude = ceil_log2(Single),
    Half = max(SubMagnitude, 1) - 1,
    case Unit + Half + 1 > 63 of
        true ->
            error;
        false ->
            SubCount = 1 bsl (Half + 1),
            Buckets = buckets_needed(SubCount bsl Unit, High, 1),
            {ok, #{unit => Unit, half => Half, sub_half => SubCount div 2,
                   slots => (Buckets + 1) * (SubCount div 2)}}
    end;
layout(_, _, _) ->
    error.

buckets_needed(Untrackable, High, N) when Untrackable =< High ->
    case Untrackable > (1 bsl 63) of
        true -> N + 1;
        false -> buckets_needed(Untrackable bsl 1, High, N + 1)
    end;
buckets_needed(_, _, N) ->
    N.

pow10(0) -> 1;
pow10(N) -> 10 * pow10(N - 1).

floor_log2(N) -> floor_log2(N, -1).
floor_log2(0, L) -> L;
floor_log2(N, L) -> floor_log2(N bsr 1, L + 1).

ceil_log2(N) ->
    F = floor_log2(N),
    case 1 bsl F of
        N -> F;
        _ -> F + 1
    end.

%% The payload: ZigZag LEB128 varints (HdrHistogram's 9-byte form), a negative one a run of
%% empty slots. Only the non-empty slots are kept.
counts(Payload, Offset, Slots, Layout) ->
    try walk(Payload, Offset, Slots, Layout, []) of
        Buckets -> {ok, Buckets}
    catch
        throw:corrupt -> {error, {bad_histogram, corrupt}}
    end.

walk(<<>>, _Index, _Slots, _Layout, Acc) ->
    lists:reverse(Acc);
walk(Bytes, Index, Slots, Layout, Acc) ->
    {ZigZag, Rest} = varint(Bytes),
    case (ZigZag bsr 1) bxor -(ZigZag band 1) of
        Zeros when Zeros < 0 ->
            walk(Rest, Index - Zeros, Slots, Layout, Acc);
        0 ->
            walk(Rest, Index + 1, Slots, Layout, Acc);
        _ when Index < 0; Index >= Slots ->
            throw(corrupt);
        Count ->
            {Low, High} = bounds(Index, Layout),
            walk(Rest, Index + 1, Slots, Layout, [{Low, High, Count} | Acc])
    end.

varint(Bytes) when is_binary(Bytes) -> varint(Bytes, 0, 0).

varint(Bytes, Shift, Acc) when is_binary(Bytes) ->
    case Bytes of
        <<B, Rest/binary>> when Shift =:= 56 -> {Acc bor (B bsl 56), Rest};
        <<1:1, B:7, Rest/binary>> -> varint(Rest, Shift + 7, Acc bor (B bsl Shift));
        <<0:1, B:7, Rest/binary>> -> {Acc bor (B bsl Shift), Rest};
        _ -> throw(corrupt)
    end.

%% A slot's lowest and highest equivalent values (HdrHistogram's value_for, and the size of
%% its bucket).
bounds(Index, #{unit := Unit, half := Half, sub_half := SubHalf}) ->
    Bucket0 = (Index bsr Half) - 1,
    Sub0 = (Index band (SubHalf - 1)) + SubHalf,
    {Bucket, Sub} = case Bucket0 < 0 of
                        true -> {0, Sub0 - SubHalf};
                        false -> {Bucket0, Sub0}
                    end,
    Low = Sub bsl (Bucket + Unit),
    {Low, Low + (1 bsl (Bucket + Unit)) - 1}.

%% Inflates at most a bounded histogram's bytes (plus one, to tell a bomb from a fit).
inflate(Deflated) ->
    Limit = ?HEADER_BYTES + ?MAX_PAYLOAD + 1,
    Z = zlib:open(),
    try
        ok = zlib:inflateInit(Z),
        inflate(Z, zlib:safeInflate(Z, Deflated), Limit, 0, [])
    catch
        error:_ -> {error, corrupt}
    after
        zlib:close(Z)
    end.

inflate(Z, {continue, Out}, Limit, Size, Acc) ->
    Size1 = Size + iolist_size(Out),
    case Size1 >= Limit of
        true -> {error, too_large};
        false -> inflate(Z, zlib:safeInflate(Z, []), Limit, Size1, [Acc, Out])
    end;
inflate(_Z, {finished, Out}, Limit, Size, Acc) ->
    case Size + iolist_size(Out) >= Limit of
        true -> {error, too_large};
        false -> {ok, iolist_to_binary([Acc, Out])}
    end;
inflate(_Z, {need_dictionary, _, _}, _Limit, _Size, _Acc) ->
    {error, corrupt}.

%% @doc The calls a histogram holds.
-spec count(buckets()) -> non_neg_integer().
count(Buckets) ->
    lists:sum([C || {_, _, C} <- Buckets]).

%% @doc The value at quantile `Q' (0..1) as HdrHistogram answers it (and as the summary's
%% p50 and p99 read): the highest equivalent value of the bucket holding the
%% `ceil(Q * Count)'th call; `undefined' for an empty histogram.
-spec quantile(buckets(), number()) -> non_neg_integer() | undefined.
quantile([], _Q) ->
    undefined;
quantile(Buckets, Q) ->
    Total = count(Buckets),
    Rank = max(1, ceil(min(1.0, max(0.0, Q)) * Total)),
    at_rank(Buckets, Rank, 0).

at_rank([{_, High, C} | Rest], Rank, Seen) ->
    case Seen + C >= Rank of
        true -> High;
        false when Rest =:= [] -> High;
        false -> at_rank(Rest, Rank, Seen + C)
    end.

%% @doc The mean of the buckets' middle values; `undefined' for an empty histogram.
-spec mean(buckets()) -> float() | undefined.
mean([]) -> undefined;
mean(Buckets) -> total(Buckets) / count(Buckets).

%% @doc The sum of the buckets' middle values times their counts: a total time within the
%% histogram's precision (where the exact sum was not kept, as for a window).
-spec total(buckets()) -> number().
total(Buckets) ->
    lists:sum([C * (Low + High) / 2 || {Low, High, C} <- Buckets]).

%% @doc Two histograms of the same layout added bucket by bucket.
-spec add(buckets(), buckets()) -> buckets().
add(A, []) -> A;
add([], B) -> B;
add([{L, H, Ca} | A], [{L, H, Cb} | B]) -> [{L, H, Ca + Cb} | add(A, B)];
add([{La, _, _} = X | A], [{Lb, _, _} | _] = B) when La < Lb -> [X | add(A, B)];
add(A, [Y | B]) -> [Y | add(A, B)].

%% @doc Each bucket as its middle value times `Factor', with its count, ascending: what the
%% rank tests compare.
-spec scaled_mid(buckets(), number()) -> [{float(), pos_integer()}].
scaled_mid(Buckets, Factor) ->
    [{Factor * (Low + High) / 2, C} || {Low, High, C} <- Buckets].
