%%% @private
%%% @doc Text helpers the reports share: a line cut to a width, a table fitted to it, a
%%% function's name shortened in the middle, nanoseconds in a short unit. A leaf: it calls
%%% no other ferrotrace module, so that every report section (the main report, slow calls,
%%% keys, the recorder, process events) can use it without calling back into another.
-module(ferrotrace_text).

-export([cut/2, wrap/3, wrap/4, shorten/2, shorten_all/2, format_ns/1, table/4, explain/1]).

%% @doc The lines of `ferrotrace:explain/1' for an error (`{error, Reason}', a `Reason', or
%% the shell's `v(-1)' after a match on a refusal failed, `{'EXIT', {{badmatch, Error}, _}}'):
%% first what was refused, its tag in words and its parts as Erlang prints them (short),
%% every text in it (hints, accepted values) written `...'; then each text on a line of its
%% own, as text.
-spec explain(term()) -> [string()].
explain({'EXIT', {{badmatch, Answer}, _Stack}}) ->
    %% `v(-1)' after `{ok, S} = ...' met a refusal: the refusal.
    explain(Answer);
explain({badmatch, Answer}) ->
    explain(Answer);
explain({error, Reason}) ->
    explain(Reason);
explain({already_traced, Pids, Holder, How}) when is_list(Pids), is_binary(How) ->
    %% Who holds which processes, in words (the term read as a list of pids and a tuple).
    Processes = [case P of
                     new -> "new processes";
                     _ -> io_lib:format("~0tp", [P])
                 end || P <- Pids],
    By = case Holder of
             {ferrotrace, Id, Name} -> io_lib:format("ferrotrace session ~tp (id ~0tp)", [Name, Id]);
             {ferrotrace, Id} -> io_lib:format("ferrotrace session ~0tp", [Id]);
             {tracer, Tracer} -> io_lib:format("another tracer, ~0tP", [Tracer, 8]);
             Other -> show(Other)
         end,
    [unicode:characters_to_list(["already traced: ", lists:join(", ", Processes), " traced by ", By]),
     "  " ++ unicode:characters_to_list(How)];
explain(Reason) ->
    {Term, Texts} = texts(Reason, 0, []),
    First = case Term of
                T when is_tuple(T), tuple_size(T) > 0, is_atom(element(1, T)) ->
                    [_ | Parts] = tuple_to_list(T),
                    [words(element(1, T)), ": ", lists:join(", ", [show(P) || P <- Parts])];
                A when is_atom(A) -> words(A);
                Other -> show(Other)
            end,
    [unicode:characters_to_list(First) | ["  " ++ T || T <- lists:reverse(Texts)]].

%% A part as Erlang prints it, short, a text in it as `...'.
show(Part) ->
    string:replace(io_lib:format("~0tP", [Part, 12]), "'$text'", "...", all).

%% The term with its texts (binaries of UTF-8 text) replaced by '$text', and the texts.
texts(B, _Depth, Acc) when is_binary(B), byte_size(B) > 0 ->
    case unicode:characters_to_list(B) of
        Text when is_list(Text) -> {'$text', [Text | Acc]};
        _ -> {B, Acc}
    end;
texts(T, Depth, Acc) when is_tuple(T), Depth < 4 ->
    {Parts, Acc1} = lists:mapfoldl(fun(P, A) -> texts(P, Depth + 1, A) end, Acc, tuple_to_list(T)),
    {list_to_tuple(Parts), Acc1};
texts(Other, _Depth, Acc) ->
    {Other, Acc}.

words(Tag) -> lists:join(" ", string:lexemes(atom_to_list(Tag), "_")).

%% @doc A report line (any chardata) cut to `Width' characters (grapheme clusters).
-spec cut(unicode:chardata(), pos_integer()) -> string().
cut(Line, Width) ->
    List = unicode:characters_to_list(Line),
    %% Walked by grapheme only where it must be, and never past `Width' code points and
    %% one (string:slice/3 walked a 7 MB line for over 5 s): a line of no more code points
    %% than `Width' has no more characters either, and where those code points are ASCII
    %% but CR (CR LF is one cluster), each is a character.
    case length(List) =< Width of
        true ->
            List;
        false ->
            Head = lists:sublist(List, Width + 1),
            case lists:all(fun(C) -> C < 128 andalso C =/= $\r end, Head) of
                true -> lists:droplast(Head);
                false -> string:slice(List, 0, Width)
            end
    end.

%% @doc "Prefix a, b, c" over as many lines as `Width' needs, continuation lines indented
%% (by two spaces when the prefix is too wide for a part; a part wider than a line is
%% broken between its words, and a word wider than a line shortened): a report's note.
-spec wrap(string(), [unicode:chardata()], pos_integer()) -> iodata().
wrap(Prefix, Parts, Width) ->
    wrap(Prefix, Parts, ",", Width).

%% @doc As {@link wrap/3}, the parts separated by `Comma'.
-spec wrap(string(), [unicode:chardata()], string(), pos_integer()) -> iodata().
wrap(Prefix, Parts, Comma, Width) ->
    Indent = lists:duplicate(string:length(Prefix), $\s),
    Texts = [unicode:characters_to_list(P) || P <- Parts],
    wrap_lines(Texts, Prefix, Indent, Comma, Width, "").

wrap_lines([], _Prefix, _Indent, _Comma, _Width, Line) ->
    [Line, "\n"];
wrap_lines([Part | Rest], Prefix, Indent, Comma, Width, "") ->
    Text = Part ++ sep(Rest, Comma),
    case string:length(Prefix) + string:length(Text) =< Width of
        true ->
            wrap_lines(Rest, Prefix, Indent, Comma, Width, Prefix ++ Text);
        false ->
            [string:trim(Prefix, trailing), "\n"
             | wrap_lines(Rest, Prefix, Indent, Comma, Width, fit_line("", "  " ++ Text, Width))]
    end;
wrap_lines([Part | Rest], Prefix, Indent, Comma, Width, Line) ->
    Text = Part ++ sep(Rest, Comma),
    Candidate = Line ++ " " ++ Text,
    case string:length(last_line(Candidate)) =< Width of
        true ->
            wrap_lines(Rest, Prefix, Indent, Comma, Width, Candidate);
        false ->
            [Line, "\n" | wrap_lines(Rest, Prefix, Indent, Comma, Width,
                                     fit_line(Indent, Text, Width))]
    end.

sep([], _Comma) -> "";
sep(_, Comma) -> Comma.

fit_line(Lead, Text, Width) ->
    case string:length(Lead) + string:length(Text) =< Width of
        true -> Lead ++ Text;
        false when Lead =/= "" ->
            case string:length(Text) + 2 =< Width of
                true -> "  " ++ Text;
                false -> fit_words(Lead, Text, Width)
            end;
        false ->
            fit_words("  ", string:trim(Text, leading), Width)
    end.

%% A part wider than a line. Shortened in the middle, a sentence lost its words
%% ("1..ocess untraced, costing it even refused" for "1 process untraced, ..."): broken
%% between them instead, each line led by `Lead'; a single word is shortened.
fit_words(Lead, Text, Width) ->
    case string:lexemes(Text, " ") of
        [_, _ | _] = Words -> words(Words, Lead, Width, "");
        _ -> shorten(Text, Width)
    end.

%% `Words' over lines of `Width' led by `Lead', joined by newlines (the last line open).
words([], _Lead, _Width, Line) ->
    Line;
words([Word | Rest], Lead, Width, "") ->
    words(Rest, Lead, Width, fit_word(Lead, Word, Width));
words([Word | Rest], Lead, Width, Line) ->
    case string:length(last_line(Line)) + 1 + string:length(Word) =< Width of
        true -> words(Rest, Lead, Width, Line ++ " " ++ Word);
        false -> words(Rest, Lead, Width, Line ++ "\n" ++ fit_word(Lead, Word, Width))
    end.

fit_word(Lead, Word, Width) ->
    case string:length(Lead) + string:length(Word) =< Width of
        true -> Lead ++ Word;
        false -> shorten(Word, Width)
    end.

%% The line being filled: what follows the last newline.
last_line(Text) ->
    lists:last(string:split(Text, "\n", all)).

%% The narrowest a name column is shortened to before lines are cut instead.
-define(MIN_NAME, 12).

%% @doc A table's lines (without newlines) that keep to `Width': `Rows' are lists of cells
%% (the header, if any, is a row), `Aligns' says for each column `name' (left-aligned, may
%% be shortened), `left' or `right', and each line starts with `Indent'. Every column is as
%% wide as its widest cell, so names print whole where the width allows; where it does not,
%% the widest name column narrows first, down to 12 characters, its cells shortened in the
%% middle (see {@link shorten/2}); a line still too long is cut.
-spec table(string(), [[unicode:chardata()]], [name | left | right], pos_integer()) -> [string()].
table(_Indent, [], _Aligns, _Width) ->
    [];
table(Indent, Rows0, Aligns, Width) ->
    Rows = [[unicode:characters_to_list(C) || C <- Row] || Row <- Rows0],
    Widths0 = [lists:max([string:length(C) || C <- Column]) || Column <- transpose(Rows)],
    Over = string:length(Indent) + lists:sum(Widths0) + length(Widths0) - 1 - Width,
    Widths = narrow(lists:zip(Widths0, Aligns), Over),
    %% Each name column's cells shortened together, so that no two read alike.
    Columns = [case A of
                   name -> shorten_all(Column, W);
                   _ -> Column
               end || {Column, W, A} <- lists:zip3(transpose(Rows), Widths, Aligns)],
    [cut(string:trim([Indent | lists:join(" ", [cell(C, W, A) || {C, W, A} <- lists:zip3(Row, Widths, Aligns)])],
                     trailing),
         Width)
     || Row <- transpose(Columns)].

%% The widths with `Over' columns taken from the name columns, the widest first, none
%% below ?MIN_NAME.
narrow(Columns, Over) when Over > 0 ->
    Names = [W || {W, name} <- Columns, W > ?MIN_NAME],
    case Names of
        [] ->
            [W || {W, _} <- Columns];
        _ ->
            Widest = lists:max(Names),
            {Before, [{Widest, name} | After]} = lists:splitwith(fun(C) -> C =/= {Widest, name} end, Columns),
            narrow(Before ++ [{Widest - 1, name} | After], Over - 1)
    end;
narrow(Columns, _Over) ->
    [W || {W, _} <- Columns].

cell(Cell, Width, name) -> string:pad(Cell, Width);
cell(Cell, Width, left) -> string:pad(Cell, Width);
cell(Cell, Width, right) -> string:pad(Cell, Width, leading).

transpose([[] | _]) -> [];
transpose(Rows) -> [[hd(R) || R <- Rows] | transpose([tl(R) || R <- Rows])].

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

%% @doc `Names' each shortened to `Width' as {@link shorten/2} does, except that two
%% different names never read alike: where the usual cut makes several alike
%% (`rabbit_c..:handle_cast/2' for `rabbit_channel' and `rabbit_connection'), each of them
%% is cut elsewhere, the first place to the right (then to the left) where it reads as no
%% other row; a name with no such place prints whole.
-spec shorten_all([string()], integer()) -> [string()].
shorten_all(Names, Width) ->
    Usual = [shorten(N, Width) || N <- Names],
    Count = lists:foldl(fun(S, Acc) -> maps:update_with(S, fun(C) -> C + 1 end, 1, Acc) end, #{}, Usual),
    %% The whole names count as taken too: a cut name must not read as another's whole one.
    Taken0 = maps:from_list([{S, []} || S <- Usual ++ Names]),
    {Shortened, _} =
        lists:mapfoldl(fun({Name, S}, Taken) ->
                               case maps:get(S, Count) =:= 1 orelse S =:= Name of
                                   true -> {S, Taken};
                                   false ->
                                       Other = elsewhere(Name, Width, Taken),
                                       {Other, Taken#{Other => []}}
                               end
                       end, Taken0, lists:zip(Names, Usual)),
    Shortened.

%% `Name' cut at the first place, right of the usual one then left of it, that reads as
%% nothing in `Taken'; whole if none does.
elsewhere(Name, Width, Taken) ->
    Length = string:length(Name),
    Usual = Width - 2 - string:length(shorten_tail(Name, Width)),
    Heads = lists:seq(Usual + 1, Width - 3) ++ lists:seq(Usual - 1, 1, -1),
    Cuts = [string:slice(Name, 0, Head) ++ ".." ++ string:slice(Name, Length - (Width - 2 - Head))
            || Head <- Heads, Head >= 1, Width - 2 - Head >= 1],
    case [C || C <- Cuts, not maps:is_key(C, Taken)] of
        [Cut | _] -> Cut;
        [] -> Name
    end.

%% The part of `Name' after `..' that shorten/2 keeps.
shorten_tail(Name, Width) ->
    case string:split(shorten(Name, Width), "..", trailing) of
        [_, Tail] -> Tail;
        _ -> ""
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
