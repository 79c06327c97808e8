%%% @doc The text of a comparison ({@link ferrotrace_compare}): a header saying what was
%%% compared and how, the node's shift, one row per function sorted by the change in total
%%% time, the functions of one side only, and notes. Every line keeps to the width.
-module(ferrotrace_compare_report).

-export([format/2, verdict_text/2]).

%% Columns left out, in this order, until the table fits the width.
-define(DROP, [own, calls, tail_x]).

%% @doc The comparison's text.
-spec format(ferrotrace_compare:comparison(), map()) -> iolist().
format(C = #{rows := Rows, only_a := OnlyA, only_b := OnlyB, notes := Notes}, Options) ->
    Width = maps:get(width, Options, 80),
    Top = maps:get(top, Options, 20),
    Shown = case Top of
                all -> Rows;
                N -> lists:sublist(Rows, N)
            end,
    [header(C, Width),
     "\n",
     [[L, "\n"] || L <- table(Shown, C, Width)],
     case length(Rows) - length(Shown) of
         0 -> [];
         Left -> [ferrotrace_text:cut(io_lib:format("... ~b more functions: top => all shows them", [Left]), Width), "\n"]
     end,
     only("only in A", OnlyA, Width),
     only("only in B", OnlyB, Width),
     case Notes of
         [] -> [];
         _ -> ["\n" | [words(["note: ", N], Width) || N <- Notes]]
     end].

header(#{a := A, b := B, test := T, node_shift := Node}, Width) ->
    #{level := Level, tests := Tests, min_change := M, min_tail_change := Mt, tail := Q} = T,
    Lines = [["A: ", side(A)], ["B: ", side(B)],
             io_lib:format("test: rank sum and ~s at ~s, Holm over ~b test~s; margins ~s (~s: ~s)",
                           [q_name(Q), percent(Level), Tests, plural(Tests), percent(M), q_name(Q), percent(Mt)]),
             case Node of
                 none ->
                     "node: not read (5 functions of enough calls needed): each function judged on its own change";
                 #{p50 := P, tail := Tail, functions := N, spread := #{tail := St}} ->
                     [io_lib:format("node: every function moved x~s at p50, x~s at ~s (median of ~b); "
                                    "verdicts also beyond it", [ratio(P), ratio(Tail), q_name(Q), N]),
                      case St > 1.0 of
                          true -> io_lib:format("; their ~s spread widened its test x~s", [q_name(Q), ratio(St)]);
                          false -> ""
                      end]
             end],
    [words(L, Width) || L <- Lines].

%% A line broken between words to fit `Width', continued two spaces in.
words(Line, Width) ->
    Words = string:lexemes(unicode:characters_to_list(Line), " "),
    words(Words, Width, "", []).

words([], _Width, Current, Acc) ->
    lists:reverse([[Current, "\n"] | Acc]);
words([W | Rest], Width, "", Acc) ->
    words(Rest, Width, W, Acc);
words([W | Rest], Width, Current, Acc) ->
    case string:length(Current) + 1 + string:length(W) =< Width of
        true -> words(Rest, Width, Current ++ " " ++ W, Acc);
        false -> words(Rest, Width, "  " ++ W, [[Current, "\n"] | Acc])
    end.

side(S = #{source := Source, node := Node, nodes := Nodes, span_ms := Span, status := Status, window := Window}) ->
    What = case Source of
               <<"file">> -> io_lib:format("~ts, saved from", [maps:get(file, S, <<"a file">>)]);
               <<"cluster">> -> io_lib:format("cluster session ~ts of ~b nodes,", [id(S), length(Nodes)]);
               _ -> io_lib:format("session ~ts on", [id(S)])
           end,
    Where = case Window of
                undefined -> "";
                {From, To} -> io_lib:format(", window ~s to ~s", [secs(From), secs(To)])
            end,
    io_lib:format("~ts ~ts, ~s~s~s", [What, Node, secs(Span), Where,
                                      case Status of running -> ", running"; stopped -> "" end]).

id(#{id := Id}) -> io_lib:format("~0tp", [Id]);
id(_) -> "".

secs(Ms) -> io_lib:format("~.1f s", [Ms / 1000]).

plural(1) -> "";
plural(_) -> "s".

q_name(Q) ->
    Text = float_to_list(Q * 100, [{decimals, 3}, compact]),
    "p" ++ lists:filter(fun(C) -> C =/= $. end, string:trim(string:trim(Text, trailing, "0"), trailing, ".")).

percent(F) ->
    Text = float_to_list(F * 100, [{decimals, 1}, compact]),
    string:trim(string:trim(Text, trailing, "0"), trailing, ".") ++ " %".

ratio(R) when R >= 99.5 -> integer_to_list(round(R));
ratio(R) when R >= 9.95 -> float_to_list(R, [{decimals, 1}]);
ratio(R) -> float_to_list(R, [{decimals, 2}]).

%% The table: a header row, then one row per function.
table([], _C, _Width) ->
    ["no function timed on both sides"];
table(Rows, #{test := #{tail := Q}}, Width) ->
    Tail = string:to_upper(q_name(Q)),
    Columns = [{name, "FUNCTION", name, fun(#{name := N}) -> N end},
               {calls, "CALLS A->B", right, fun(#{count := {A, B}}) -> [integer_to_list(A), "->", integer_to_list(B)] end},
               {p50, "P50 A->B", right, fun(#{p50 := {A, B}}) -> pair(A, B) end},
               {p50_x, "x", right, fun(#{p50 := {A, B}}) -> times(A, B) end},
               {tail, [Tail, " A->B"], right, fun(#{tail_q := {A, B}}) -> pair(A, B) end},
               {tail_x, "x", right, fun(#{tail_q := {A, B}}) -> times(A, B) end},
               {total, "TOTAL +/-", right, fun(#{change := D}) -> signed(D) end},
               {own, "OWN +/-", right, fun(#{own_change := D}) -> signed(D) end},
               {verdict, "VERDICT", left, fun(R) -> verdict_text(R, Q) end}],
    Fitted = fit(Columns, Rows, Width),
    ferrotrace_text:table("", [[H || {_, H, _, _} <- Fitted] | [[Cell(R) || {_, _, _, Cell} <- Fitted] || R <- Rows]],
                          [Align || {_, _, Align, _} <- Fitted], Width).

%% Drops columns (?DROP, in order) until the numbers and the longest name fit.
fit(Columns, Rows, Width) ->
    Widths = [lists:max([string:length(unicode:characters_to_list(H)) |
                         [string:length(unicode:characters_to_list(Cell(R))) || R <- Rows]])
              || {_, H, _, Cell} <- Columns],
    case lists:sum(Widths) + length(Widths) - 1 =< Width of
        true -> Columns;
        false ->
            case [K || K <- ?DROP, lists:keymember(K, 1, Columns)] of
                [] -> Columns;
                [K | _] -> fit(lists:keydelete(K, 1, Columns), Rows, Width)
            end
    end.

%% @doc A row's verdict in words: `slower', `faster', `unchanged', `too few calls', `not
%% timed', and where the tail moved alone, `p99 slower' (the tail quantile's name).
-spec verdict_text(map(), float()) -> string().
verdict_text(#{verdict := V, tail := T}, Q) ->
    case {V, T} of
        {not_timed, _} -> "not timed";
        {too_few_calls, _} -> "too few calls";
        {Same, Same} -> atom_to_list(V);
        {unchanged, Dir} when Dir =:= slower; Dir =:= faster -> q_name(Q) ++ " " ++ atom_to_list(Dir);
        {Dir, unchanged} -> atom_to_list(Dir);
        {Dir, too_few_calls} -> atom_to_list(Dir);
        {Dir, Other} -> atom_to_list(Dir) ++ ", " ++ q_name(Q) ++ " " ++ atom_to_list(Other)
    end.

pair(undefined, undefined) -> "-";
pair(A, B) -> [ns(A), "->", ns(B)].

times(A, B) when is_integer(A), is_integer(B), A > 0 -> ratio(B / A);
times(_, _) -> "-".

signed(undefined) -> "-";
signed(D) when D >= 0 -> ["+", ns(D)];
signed(D) -> ["-", ns(-D)].

%% A time in its own unit, three significant digits, no space: `850ns', `12.3us', `4.07ms',
%% `1.20s' (a column's times span microseconds to seconds).
ns(undefined) -> "-";
ns(V) when V < 1000 -> [integer_to_list(round(V)), "ns"];
ns(V) when V < 1000000 -> [digits(V / 1.0e3), "us"];
ns(V) when V < 1000000000 -> [digits(V / 1.0e6), "ms"];
ns(V) -> [digits(V / 1.0e9), "s"].

digits(X) when X >= 99.95 -> integer_to_list(round(X));
digits(X) when X >= 9.995 -> float_to_list(X, [{decimals, 1}]);
digits(X) -> float_to_list(X, [{decimals, 2}]).

only(_Title, [], _Width) ->
    [];
only(Title, Functions, Width) ->
    Parts = [io_lib:format("~ts (~b calls, ~s)", [N, C, ferrotrace_text:format_ns(T)])
             || #{name := N, count := C, total := T} <- Functions],
    [ferrotrace_text:wrap(Title ++ ": ", Parts, Width), "\n"].
