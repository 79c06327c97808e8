%%% @doc JSON read in Erlang (RFC 8259): a saved session read back where only Erlang is
%%% (the bundle's escript, OTP 25 and 26 have no `json' module).
%%%
%%% Objects become maps with binary keys (a repeated key: the last wins), arrays lists,
%%% strings UTF-8 binaries, numbers integers or floats, and `true', `false', `null' those
%%% atoms. Bounded, since a file may hold anything: nesting at most 64 deep, a number at
%%% most 64 characters; anything else is `{error, {not_json, Offset}}' with the byte offset
%%% where reading stopped.
-module(ferrotrace_json).

-export([decode/1]).

-define(MAX_DEPTH, 64).
-define(MAX_NUMBER, 64).

-type value() :: #{binary() => value()} | [value()] | binary() | number() | true | false | null.
-export_type([value/0]).

%% @doc The value a JSON text holds, or `{error, {not_json, Offset}}'.
-spec decode(term()) -> {ok, value()} | {error, {not_json, non_neg_integer()}}.
decode(Text) when is_binary(Text) ->
    try value(skip(Text), 0) of
        {Value, Rest} ->
            case skip(Rest) of
                <<>> -> {ok, Value};
                Trailing -> {error, {not_json, byte_size(Text) - byte_size(Trailing)}}
            end
    catch
        throw:{at, Rest} -> {error, {not_json, byte_size(Text) - byte_size(Rest)}}
    end;
decode(_) ->
    {error, {not_json, 0}}.

skip(<<C, Rest/binary>>) when C =:= $\s; C =:= $\t; C =:= $\n; C =:= $\r -> skip(Rest);
skip(Rest) -> Rest.

value(Rest, Depth) when Depth > ?MAX_DEPTH -> throw({at, Rest});
value(<<${, Rest/binary>>, Depth) -> object(skip(Rest), Depth + 1, #{});
value(<<$[, Rest/binary>>, Depth) -> array(skip(Rest), Depth + 1, []);
value(<<$", Rest/binary>>, _) -> string(Rest, []);
value(<<"true", Rest/binary>>, _) -> {true, Rest};
value(<<"false", Rest/binary>>, _) -> {false, Rest};
value(<<"null", Rest/binary>>, _) -> {null, Rest};
value(<<C, _/binary>> = Rest, _) when C =:= $-; C >= $0, C =< $9 -> number(Rest);
value(Rest, _) -> throw({at, Rest}).

object(<<$}, Rest/binary>>, _Depth, Acc) when map_size(Acc) =:= 0 ->
    {Acc, Rest};
object(<<$", Rest/binary>>, Depth, Acc) ->
    {Key, Rest1} = string(Rest, []),
    case skip(Rest1) of
        <<$:, Rest2/binary>> ->
            {Value, Rest3} = value(skip(Rest2), Depth),
            Acc1 = Acc#{Key => Value},
            case skip(Rest3) of
                <<$,, Rest4/binary>> -> object(skip(Rest4), Depth, Acc1);
                <<$}, Rest4/binary>> -> {Acc1, Rest4};
                Other -> throw({at, Other})
            end;
        Other ->
            throw({at, Other})
    end;
object(Rest, _Depth, _Acc) ->
    throw({at, Rest}).

array(<<$], Rest/binary>>, _Depth, []) ->
    {[], Rest};
array(Rest, Depth, Acc) ->
    {Value, Rest1} = value(Rest, Depth),
    case skip(Rest1) of
        <<$,, Rest2/binary>> -> array(skip(Rest2), Depth, [Value | Acc]);
        <<$], Rest2/binary>> -> {lists:reverse([Value | Acc]), Rest2};
        Other -> throw({at, Other})
    end.

%% A string's bytes up to its closing quote, escapes read; checked as UTF-8 at the end.
string(Text, Acc) ->
    case plain(Text, 0) of
        {N, <<$", Rest/binary>>} ->
            Bin = iolist_to_binary(lists:reverse([binary:part(Text, 0, N) | Acc])),
            case unicode:characters_to_binary(Bin) of
                Bin -> {Bin, Rest};
                _ -> throw({at, Text})
            end;
        {N, <<$\\, Escape/binary>>} ->
            {Char, Rest} = escape(Escape),
            string(Rest, [Char, binary:part(Text, 0, N) | Acc]);
        {_, Rest} ->
            throw({at, Rest})
    end.

%% How many bytes before a quote, a backslash, a control character or the end.
plain(Text, N) ->
    case Text of
        <<_:N/binary, C, _/binary>> when C =/= $", C =/= $\\, C >= 16#20 -> plain(Text, N + 1);
        <<_:N/binary, Rest/binary>> -> {N, Rest}
    end.

escape(<<$", R/binary>>) -> {<<$">>, R};
escape(<<$\\, R/binary>>) -> {<<$\\>>, R};
escape(<<$/, R/binary>>) -> {<<$/>>, R};
escape(<<$b, R/binary>>) -> {<<8>>, R};
escape(<<$f, R/binary>>) -> {<<12>>, R};
escape(<<$n, R/binary>>) -> {<<10>>, R};
escape(<<$r, R/binary>>) -> {<<13>>, R};
escape(<<$t, R/binary>>) -> {<<9>>, R};
escape(<<$u, H:4/binary, R/binary>> = Text) ->
    case hex(H) of
        High when High >= 16#D800, High =< 16#DBFF ->
            case R of
                <<$\\, $u, L:4/binary, R2/binary>> ->
                    case hex(L) of
                        Low when Low >= 16#DC00, Low =< 16#DFFF ->
                            {<<(16#10000 + ((High - 16#D800) bsl 10) + (Low - 16#DC00))/utf8>>, R2};
                        _ -> throw({at, Text})
                    end;
                _ -> throw({at, Text})
            end;
        Low when Low >= 16#DC00, Low =< 16#DFFF -> throw({at, Text});
        Char when is_integer(Char) -> {<<Char/utf8>>, R};
        _ -> throw({at, Text})
    end;
escape(Text) ->
    throw({at, Text}).

hex(H) ->
    try binary_to_integer(H, 16)
    catch error:badarg -> bad
    end.

number(Text) ->
    N = number_length(Text, 0),
    <<Digits:N/binary, Rest/binary>> = Text,
    Parsed = case re:run(Digits, "^-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][-+]?[0-9]+)?$", [{capture, all, binary}]) of
                 _ when N > ?MAX_NUMBER -> bad;
                 {match, [_, _]} -> binary_to_integer(Digits);
                 {match, [_, _Int, Frac | _Exp]} -> to_float(Frac, Digits);
                 nomatch -> bad
             end,
    case Parsed of
        bad -> throw({at, Text});
        Number -> {Number, Rest}
    end.

number_length(Text, N) ->
    case Text of
        <<_:N/binary, C, _/binary>> when C >= $0, C =< $9; C =:= $-; C =:= $+; C =:= $.; C =:= $e; C =:= $E ->
            number_length(Text, N + 1);
        _ -> N
    end.

%% Erlang reads "1.5e3" but not "1e3": a fraction is added where there is none.
to_float(Frac, Digits) ->
    Text = case Frac of
               <<>> -> binary:replace(Digits, [<<"e">>, <<"E">>], <<".0e">>);
               _ -> Digits
           end,
    try binary_to_float(Text)
    catch error:badarg -> bad
    end.
