%%% @private
%%% @doc Text helpers the reports share: a line cut to a width, a function's name shortened
%%% in the middle, nanoseconds in a short unit. A leaf: it calls no other ferrotrace module,
%%% so that every report section (the main report, slow calls, keys, the recorder, process
%%% events) can use it without calling back into another.
-module(ferrotrace_text).

-export([cut/2, shorten/2, format_ns/1]).

%% @doc A report line (any chardata) cut to `Width' characters.
-spec cut(unicode:chardata(), pos_integer()) -> string().
cut(Line, Width) ->
    string:slice(unicode:characters_to_list(Line), 0, Width).

%% @doc Nanoseconds in a short human unit: `850 ns', `12.3 us', `4.07 ms', `1.20 s'.
-spec format_ns(non_neg_integer() | undefined) -> string().
format_ns(undefined) -> "-";
format_ns(Ns) when Ns < 1000 -> integer_to_list(Ns) ++ " ns";
format_ns(Ns) when Ns < 1000000 -> unit(Ns / 1.0e3, "us");
format_ns(Ns) when Ns < 1000000000 -> unit(Ns / 1.0e6, "ms");
format_ns(Ns) -> unit(Ns / 1.0e9, "s").

unit(Value, Unit) when Value < 10 -> lists:flatten(io_lib:format("~.2f ~s", [Value, Unit]));
unit(Value, Unit) when Value < 100 -> lists:flatten(io_lib:format("~.1f ~s", [Value, Unit]));
unit(Value, Unit) -> integer_to_list(round(Value)) ++ " " ++ Unit.

%% @doc A function's name shortened to `Width' characters in the middle, keeping the function
%% name and arity whole when it can, and the start of the module: `shop_inv..:handle_call/3',
%% `MyApp.Sh...Cart.add/2'.
-spec shorten(string(), integer()) -> string().
shorten(Name, Width) ->
    Length = string:length(Name),
    case Length =< Width of
        true -> Name;
        false when Width < 6 -> string:slice(Name, 0, Width);
        false ->
            Function = function_part(Name),
            Tail = min(Width - 5, max(string:length(Function), (Width - 2) div 2)),
            Head = Width - 2 - Tail,
            string:slice(Name, 0, Head) ++ ".." ++ string:slice(Name, Length - Tail)
    end.

%% The text after the module: after the last ':' (Erlang) or the last '.' (Elixir) that
%% comes before the arity's '/'.
function_part(Name) ->
    [BeforeArity | _] = string:split(Name, "/"),
    Cut = case string:split(BeforeArity, ":", trailing) of
              [_, _] -> ":";
              _ -> "."
          end,
    case string:split(BeforeArity, Cut, trailing) of
        [_, _] -> string:slice(Name, string:length(hd(string:split(BeforeArity, Cut, trailing))));
        _ -> Name
    end.
