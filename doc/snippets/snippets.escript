#!/usr/bin/env escript
%%! -noshell
%%% The sample outputs of the README and the guides, from real runs (issue 28).
%%%
%%% A snippet is marked in a Markdown file:
%%%
%%%   <!-- snippet NAME node -->      a ```sh block whose line starting `erl ' starts the node
%%%   <!-- snippet NAME input -->     a ```erlang block: one expression a line, pasted as is
%%%   <!-- snippet NAME output N -->  a ``` block: what input line N printed
%%%   <!-- snippet NAME output N lines M -->  the same, its first M lines, then `...'
%%%
%%% Each snippet's input is typed into a fresh interactive `erl' (in a pseudo-terminal, 80
%%% columns as a shell without a terminal size) started by its node line (the README's,
%%% default the file's first node line, else `erl -pa _build/default/lib/ferrotrace/ebin')
%%% from the repository root, then `halt().'.
%%%
%%%   escript doc/snippets/snippets.escript check    compare each output block's shape with
%%%                                                  a run (make test): exit 1 on a mismatch
%%%   escript doc/snippets/snippets.escript update   write each run's output into the block
%%%
%%% The shape of a report: the table's column names (units aside) and row names, and the
%%% notes' prefixes (`events:', `probe effect:', ...) but those that come and go with the
%%% load (`rings:', `frames:', ...); any other output compares whole.
-mode(compile).

-define(FILES, ["README.md", "doc/using.md"]).
%% Note lines that appear or not with the machine's load.
-define(CONDITIONAL, ["rings", "frames", "sampling", "displaced", "budget", "rate", "shed",
                      "changes", "counted only (loops)", "..."]).
%% Columns a narrow table drops first (ferrotrace_report's drop order), as the numbers'
%% widths decide: the others (FUNCTION, COUNT, TOTAL, P99, MAX) compare.
-define(DROPPABLE, ["MEAN", "P90", "P99.9", "EXC", "P50"]).
-define(TIMEOUT_S, "90").
%% The node of a snippet without a node line.
-define(ERL, "erl -pa _build/default/lib/ferrotrace/ebin").

main([Mode]) when Mode =:= "check"; Mode =:= "update" ->
    Results = [{File, run_file(File, list_to_atom(Mode))} || File <- ?FILES],
    case [E || {_, Errors} <- Results, E <- Errors] of
        [] ->
            io:format("snippets: ~s: ~b files, all outputs ~s~n",
                      [Mode, length(?FILES), case Mode of "check" -> "have the shape of a run"; _ -> "rewritten" end]);
        Errors ->
            [io:format(standard_error, "snippets: ~ts~n", [E]) || E <- Errors],
            halt(1)
    end;
main(_) ->
    io:format(standard_error, "usage: snippets.escript check | update~n", []),
    halt(2).

run_file(File, Mode) ->
    {ok, Bin} = file:read_file(File),
    Lines = string:split(unicode:characters_to_list(Bin), "\n", all),
    Snippets = snippets(Lines),
    %% A snippet without a node line runs on the file's first one (?ERL where none).
    Erl = case [L || {_, #{node := L}} <- lists:sort(maps:to_list(Snippets))] of
              [] -> ?ERL;
              _ -> first_node(Lines)
          end,
    Runs = maps:map(fun(Name, S) -> run(File, Name, maps:merge(#{node => Erl}, S)) end, inputs(Snippets)),
    {NewLines, Errors} = outputs(Lines, Runs, Mode, File, [], []),
    case Mode of
        update when Errors =:= [] ->
            ok = file:write_file(File, unicode:characters_to_binary(lists:join("\n", NewLines)));
        _ -> ok
    end,
    Errors.

%% #{Name => #{node => Line, input => [Line]}}
snippets(Lines) ->
    snippets(Lines, #{}).

snippets([], Acc) -> Acc;
snippets([Line | Rest], Acc) ->
    case marker(Line) of
        {Name, node} ->
            Erl = node_line(block(Rest)),
            snippets(Rest, maps:update_with(Name, fun(M) -> M#{node => Erl} end, #{node => Erl}, Acc));
        {Name, input} ->
            Input = [L || L <- block(Rest), string:trim(L) =/= ""],
            snippets(Rest, maps:update_with(Name, fun(M) -> M#{input => Input} end, #{input => Input}, Acc));
        _ ->
            snippets(Rest, Acc)
    end.

first_node([Line | Rest]) ->
    case marker(Line) of
        {_, node} -> node_line(block(Rest));
        _ -> first_node(Rest)
    end.

%% The line of a node block that starts `erl ', or ?ERL.
node_line(Block) ->
    hd([L || L <- Block, string:prefix(L, "erl ") =/= nomatch] ++ [?ERL]).

inputs(Snippets) -> maps:filter(fun(_, S) -> maps:is_key(input, S) end, Snippets).

marker(Line) ->
    case re:run(Line, "^<!-- snippet ([a-z0-9_-]+) (node|input|output ([0-9]+)( lines ([0-9]+))?) -->\\s*$",
                [{capture, all_but_first, list}]) of
        {match, [Name, "node" | _]} -> {Name, node};
        {match, [Name, "input" | _]} -> {Name, input};
        {match, [Name, _, N]} -> {Name, {output, list_to_integer(N), all}};
        {match, [Name, _, N, _, Max]} -> {Name, {output, list_to_integer(N), list_to_integer(Max)}};
        nomatch -> false
    end.

%% The lines of the fenced block that starts the lines given.
block(["```" ++ _ | Rest]) -> lists:takewhile(fun(L) -> string:prefix(L, "```") =:= nomatch end, Rest);
block(_) -> [].

%% Runs one snippet: {ok, #{N => Output}} or {error, Why}.
run(File, Name, #{input := Input} = S) ->
    Erl = maps:get(node, S, ?ERL),
    Tmp = filename:join(os:getenv("TMPDIR", "/tmp"), "ferrotrace_snippet_" ++ os:getpid() ++ "_" ++ Name),
    ok = file:write_file(Tmp, unicode:characters_to_binary([[L, "\n"] || L <- Input ++ ["halt()."]])),
    Cmd = Erl ++ " < " ++ Tmp,
    Port = open_port({spawn_executable, os:find_executable("timeout")},
                     [{args, [?TIMEOUT_S, "script", "-qec", Cmd, "/dev/null"]}, binary, exit_status,
                      stderr_to_stdout, {env, [{"TERM", "dumb"}]}]),
    {Status, Out} = collect(Port, []),
    _ = file:delete(Tmp),
    _ = [file:write_file(Tmp ++ ".out", Out) || os:getenv("SNIPPETS_DEBUG") =/= false],
    %% The terminal's line ends are "\r\n", one grapheme for string:replace/3.
    Text = [C || C <- unicode:characters_to_list(Out), C =/= $\r],
    case Status of
        0 when length(Text) > 0 ->
            case string:find(Text, "** exception") of
                nomatch -> {ok, by_prompt(Text, length(Input))};
                _ -> {error, io_lib:format("~ts: snippet ~ts raised:~n~ts", [File, Name, Text])}
            end;
        _ -> {error, io_lib:format("~ts: snippet ~ts: `~ts' exited ~b:~n~ts", [File, Name, Cmd, Status, Text])}
    end.

collect(Port, Acc) ->
    receive
        {Port, {data, D}} -> collect(Port, [Acc, D]);
        {Port, {exit_status, S}} -> {S, iolist_to_binary(Acc)}
    end.

%% What each input line printed: the text between prompt N> and prompt N+1>.
by_prompt(Text, Count) ->
    maps:from_list([{N, between(Text, N)} || N <- lists:seq(1, Count)]).

between(Text, N) ->
    Start = integer_to_list(N) ++ "> ",
    case string:find(Text, "\n" ++ Start) of
        nomatch -> "";
        From ->
            After = string:slice(From, 1 + length(Start)),
            case string:find(After, "\n" ++ integer_to_list(N + 1) ++ "> ") of
                nomatch -> After;
                Rest -> string:slice(After, 0, length(After) - length(Rest))
            end
    end.

%% Walks the file: each output block checked against, or replaced by, its run.
outputs([], _Runs, _Mode, _File, Acc, Errors) ->
    {lists:reverse(Acc), lists:reverse(Errors)};
outputs([Line | Rest], Runs, Mode, File, Acc, Errors) ->
    case marker(Line) of
        {Name, {output, N, Max}} ->
            ["```" ++ _ = Fence | Rest1] = Rest,
            Old = block(Rest),
            Rest2 = tl(lists:nthtail(length(Old), Rest1)),
            case maps:get(Name, Runs, {error, io_lib:format("~ts: snippet ~ts has no input", [File, Name])}) of
                {error, Why} ->
                    outputs(Rest2, Runs, Mode, File, lists:reverse([Line, Fence | Old] ++ ["```"], Acc), [Why | Errors]);
                {ok, Outputs} ->
                    Printed = printed(maps:get(N, Outputs, "")),
                    New = first(Max, Printed),
                    Error = [io_lib:format("~ts: snippet ~ts, output of line ~b:~n~ts~nREADME:~n~ts~nrun:~n~ts",
                                           [File, Name, N, Diff, lists:join("\n", Old), lists:join("\n", New)])
                             || Mode =:= check, Diff <- [compare(Old, Printed, Max)], Diff =/= ok],
                    Block = case Mode of update -> New; check -> Old end,
                    outputs(Rest2, Runs, Mode, File, lists:reverse([Line, Fence | Block] ++ ["```"], Acc),
                            Error ++ Errors)
            end;
        _ ->
            outputs(Rest, Runs, Mode, File, [Line | Acc], Errors)
    end.

%% The first `Max' lines, and a line `...' for the others.
first(all, Lines) -> Lines;
first(Max, Lines) when length(Lines) > Max -> lists:sublist(Lines, Max) ++ ["..."];
first(_Max, Lines) -> Lines.

%% A command's printed lines: its trailing `ok' (the shell's echo of the answer) and blank
%% lines at the ends left out.
printed(Text) ->
    Lines = string:split(string:trim(Text, trailing), "\n", all),
    Trim = fun(Ls) -> lists:dropwhile(fun(L) -> string:trim(L) =:= "" end, Ls) end,
    Body = case lists:reverse(Trim(lists:reverse(Lines))) of
               Ls when length(Ls) > 1 -> case lists:last(Ls) of "ok" -> lists:droplast(Ls); _ -> Ls end;
               Ls -> Ls
           end,
    lists:reverse(Trim(lists:reverse(Trim([string:trim(L, trailing) || L <- Body])))).

%% ok, or what differs between a sample and the whole output of its run. A sample cut to
%% its first lines shows the notes that fell within them, and how many do depends on the
%% conditional lines above: its notes are looked for in the whole run, and the run's other
%% notes are not held against it.
compare(Old, New, Max) ->
    case {shape(Old), shape(New)} of
        {{report, C, R, P}, {report, C2, R2, P2}} when C =:= C2 ->
            Required = P -- ?CONDITIONAL,
            Missing = Required -- P2,
            Extra = case Max of
                        all -> (P2 -- P) -- ?CONDITIONAL;
                        _ -> []
                    end,
            case {Missing, Extra, same_names(R, R2)} of
                {[], [], true} -> ok;
                {[], [], false} -> io_lib:format("rows ~p, the run's ~p", [R, R2]);
                _ -> io_lib:format("note lines missing ~p, new ~p", [Missing, Extra])
            end;
        {{report, C, R, _}, {report, C2, R2, _}} ->
            io_lib:format("table differs: columns ~p, rows ~p; the run's: columns ~p, rows ~p", [C, R, C2, R2]);
        {Same, Same} -> ok;
        {Cut, Whole} when Max =/= all, is_list(Cut), is_list(Whole) ->
            case first(Max, Whole) of
                Cut -> ok;
                _ -> "the output differs"
            end;
        {{report, _, _, _}, _} -> "the run printed no report";
        _ -> "the output differs"
    end.

%% A report: {report, Columns, Rows, NotePrefixes}; any other text is its own shape.
shape(Lines) ->
    case lists:splitwith(fun(L) -> string:prefix(L, "FUNCTION ") =:= nomatch end, Lines) of
        {Before, [Header | After]} ->
            Columns = [C || C <- string:lexemes(Header, " "), not lists:member(C, ["ns", "us", "ms", "s"]),
                            not lists:member(C, ?DROPPABLE)],
            {Rows, Rest} = lists:splitwith(fun(L) -> L =/= "" end, After),
            Names = lists:sort([name(R) || R <- Rows, string:prefix(R, "...") =:= nomatch,
                                           string:prefix(R, "  ") =:= nomatch]),
            Notes = lists:usort([P || L <- Before ++ Rest, P <- [note(L)], P =/= false]),
            {report, Columns, Names, Notes};
        _ ->
            Lines
    end.

%% The same rows, a name shortened in the middle (`sho..h/1') standing for a name it fits.
same_names(A, B) when length(A) =/= length(B) -> false;
same_names(A, B) ->
    lists:all(fun(N) -> lists:any(fun(M) -> fits(N, M) orelse fits(M, N) end, B) end, A)
        andalso lists:all(fun(M) -> lists:any(fun(N) -> fits(N, M) orelse fits(M, N) end, A) end, B).

fits(Same, Same) -> true;
fits(Short, Long) ->
    case string:split(Short, "..") of
        [Head, Tail] -> string:prefix(Long, Head) =/= nomatch andalso lists:suffix(Tail, Long);
        _ -> false
    end.

%% A row's function name: the text before the first space and a digit (a column filled to
%% its width leaves one space between it and the name).
name(Row) ->
    [Name | _] = re:split(Row, " +[0-9-]", [{return, list}, unicode]),
    string:trim(Name).

note(Line) ->
    case re:run(Line, "^([a-z][a-z ()]*):", [{capture, all_but_first, list}]) of
        {match, [P]} -> P;
        nomatch -> case string:prefix(Line, "...") of nomatch -> false; _ -> "..." end
    end.
