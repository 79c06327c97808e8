%%% @private
%%% @doc The report, composed once for a local session and for a cluster ({@link compose/2}):
%%% a header, a table of the top functions and, for the first rows, power-of-two latency
%%% histograms drawn like DTrace's `quantize' (ASCII only, readable over SSH), the notes
%%% (ferrotrace_report_notes), the other kinds' sections (ferrotrace_activity_report) and
%%% the captures (ferrotrace_capture).
%%%
%%% The table keeps to the width (default `io:columns()', else 80): the latency columns
%%% share one unit, chosen from their largest value and shown in each header (`P99 ms'), and
%%% TOTAL has its own; when the
%%% columns do not fit, MEAN, P90, P99.9 and EXC go first (never the sort column), then
%%% the FUNCTION column is shortened in the middle (`MyApp.Sh..Cart.add/2'), keeping the
%%% function name and arity.
-module(ferrotrace_report).

-export([compose/2, format/2, format/3, check_options/2, help/0]).
-export([sort/2, rows/5, rows/6]).  % the table, for the live view (ferrotrace_watch)

-define(TOP_HISTOGRAMS, 3).
%% The loops line names this many loops (report option `loops => all | N').
-define(LOOPS_NAMED, 3).
-define(DEFAULT_TOP, 20).
-define(MIN_NAME, 24).
-export([by_node_table/2]).  % the last section's
-export([header/2]).  % also the html export's (ferrotrace_html)

-type options() :: #{top => pos_integer() | all,
                     sort => count | total | p99 | max,
                     mfa => term(),
                     width => pos_integer(),
                     histograms => non_neg_integer(),
                     loops => non_neg_integer() | all}.
%% What a report is composed of, read from a local session (ferrotrace_local) or a cluster
%% (ferrotrace_cluster): the summary (merged, for a cluster), a function's histogram, each
%% node's figures of the other kinds with their series' histograms (`local' for a local
%% session's own; a cluster's named by node), the captures and the capture gate's counts.
-type histogram() :: fun((term()) -> [ferrotrace:bucket()] | {error, term()}).
-type parts() :: #{summary := ferrotrace:summary(), histogram := histogram(),
                   activity := [{node() | local, map(), histogram()}],
                   captures := [ferrotrace_capture:capture()] | {error, term()},
                   capture_counts := {ok, ferrotrace_capture:counts() | none} | {error, term()}}.
-export_type([options/0, parts/0]).

%% @doc The report of a session, local or cluster, composed once: the header, the table and
%% histograms and the notes (as {@link format/3}); a cluster's nodes down and, with
%% `by_node => true', its table by node; the other kinds' sections (a cluster's under each
%% node's name); then the captures. `Options' as `ferrotrace:report/2' takes them.
-spec compose(parts(), options() | [{atom(), term()}]) -> iolist() | {error, term()}.
compose(#{summary := Summary, histogram := Histogram, activity := Activity,
          captures := Captures, capture_counts := Counts}, Options0) ->
    Given = case ferrotrace_options:to_map(Options0) of
                {ok, Map} -> Map;
                {error, _} -> Options0
            end,
    case check_options(maybe_without(by_node, Given)) of
        {ok, Options = #{width := Width}} ->
            [render(Summary, Histogram, Options#{names => names(Given)}),
             nodes_down(Summary),
             [by_node_table(Summary, Width) || is_map(Given), maps:get(by_node, Given, false) =:= true],
             [activity(Label, Figures, Series, Width) || {Label, Figures, Series} <- Activity],
             ferrotrace_capture:lines(Captures, Counts, Width)];
        {error, _} = Error ->
            Error
    end;
compose(Parts, _Options) ->
    {error, {bad_argument, ferrotrace_hint:brief(Parts), <<"a map of summary, histogram, activity, captures and capture_counts">>}}.

%% A cluster's nodes that went down, left out of its figures.
nodes_down(#{nodes_down := [_ | _] = Down}) -> io_lib:format("nodes down (left out): ~p~n", [Down]);
nodes_down(_Summary) -> [].

%% The other kinds' sections of one node, under its name for a cluster's.
activity(local, Figures, Series, Width) ->
    ferrotrace_activity_report:format(Figures, Series, Width);
activity(Node, Figures, Series, Width) ->
    case ferrotrace_activity_report:format(Figures, Series, Width) of
        [] -> [];
        Sections -> ["\n", ferrotrace_text:cut(io_lib:format("node ~ts:", [atom_to_list(Node)]), Width), "\n", Sections]
    end.

%% @doc The report for `Summary' with the default options; `Histogram(MFA)' gives a
%% function's buckets.
-spec format(ferrotrace:summary(), fun((mfa()) -> [ferrotrace:bucket()] | {error, term()})) -> iolist().
format(Summary, Histogram) ->
    {ok, Options} = check_options(#{}),
    render(Summary, Histogram, Options#{names => names(#{})}).

%% @doc The report for `Summary' with `Options' (a map or a proplist):
%% <ul>
%% <li>`top => N | all': rows shown (default 20); a line says how many were left out;</li>
%% <li>`sort => count | total | p99 | max': the row order, largest first (default `total');</li>
%% <li>`mfa => Pattern': only functions matching `Pattern', an `{M, F, A}' with `` '_' ''
%%     wildcards or any spec {@link ferrotrace_spec:parse/1} takes (`"MyApp.Cart"');</li>
%% <li>`width => Columns': the width to fit (default `io:columns()', else 80; at least 40);</li>
%% <li>`histograms => N': histograms drawn for the first N rows (default 3);</li>
%% <li>`loops => N | all': loops (counted, not timed) named on the `counted only' line
%% (default 3, the others counted).</li>
%% </ul>
%% The report leads with the session's line and the table; the notes on what was seen,
%% kept and left out follow it, then the histograms.
%% Answers `{error, Reason}' for a bad option, naming it and what is accepted.
-spec format(ferrotrace:summary(), fun((mfa()) -> [ferrotrace:bucket()] | {error, term()}),
             options() | [{atom(), term()}]) -> iolist() | {error, term()}.
format(Summary, Histogram, Options0) ->
    case check_options(Options0) of
        {ok, Options} -> render(Summary, Histogram, Options#{names => names(Options0)});
        {error, _} = Error -> Error
    end.

%% Whole names where no width was asked for and the output is not a terminal: nothing cuts
%% the lines there. Else names fit the width.
names(Options0) ->
    Given = case ferrotrace_options:to_map(Options0) of
                {ok, Map} -> maps:is_key(width, Map);
                _ -> true
            end,
    case Given orelse ferrotrace_options:terminal_width() =/= none of
        true -> fit;
        false -> whole
    end.

%% Checks report options and fills in the defaults (see ferrotrace_options:check/2).
-spec check_options(term()) -> {ok, map()} | {error, term()}.
check_options(Options) ->
    ferrotrace_options:check(Options, [{top, ?DEFAULT_TOP}, {sort, total}, {mfa, '_'},
                                       {width, ferrotrace_options:default_width()},
                                       {histograms, ?TOP_HISTOGRAMS}, {loops, ?LOOPS_NAMED}]).

%% @doc Checks the options of `ferrotrace:report(Session, Options)': `{ok, Options}' as
%% given; for a cluster session (a pid), which also takes `by_node => true' (one more
%% table, a line per function and node), as a map with `by_node'.
-spec check_options(term(), term()) -> {ok, term()} | {error, term()}.
check_options(Options0, Cluster) when is_pid(Cluster) ->
    Options = case ferrotrace_options:to_map(Options0) of {ok, M} -> M; _ -> Options0 end,
    ByNode = is_map(Options) andalso maps:get(by_node, Options, false),
    case check_options(maybe_without(by_node, Options)) of
        {ok, _} when is_boolean(ByNode) ->
            {ok, (maybe_without(by_node, Options))#{by_node => ByNode}};
        {ok, _} ->
            {error, {bad_option, {by_node, ByNode, <<"true or false">>}}};
        {error, _} = Error ->
            Error
    end;
check_options(Options, _Session) ->
    case check_options(Options) of
        {ok, _} -> {ok, Options};
        {error, _} = Error -> Error
    end.

maybe_without(Key, Options) when is_map(Options) -> maps:remove(Key, Options);
maybe_without(_Key, Options) -> Options.

%%--------------------------------------------------------------------------------------

render(Summary = #{calls := Calls0}, Histogram,
       #{top := Top, sort := Sort, mfa := Filter, width := Width, histograms := NHist} = Options) ->
    Matching = [C || C = #{mfa := MFA} <- Calls0, matches(Filter, MFA)],
    Sorted = sort(Sort, Matching),
    Shown = case Top of
                all -> Sorted;
                _ -> lists:sublist(Sorted, Top)
            end,
    {First, Notes} = header(Summary, maps:get(loops, Options, ?LOOPS_NAMED), Width),
    [First, "\n",
     table(Shown, Sort, {Width, maps:get(names, Options, fit)}, Calls0 =:= []),
     left_out(length(Calls0), length(Matching), length(Shown), Filter, Width),
     ferrotrace_report_notes:tracing_shares(Shown, maps:get(calibration, Summary, undefined), Width),
     "\n", Notes, ferrotrace_trees:report_lines(Summary, Width),
     [[quantize(MFA, Histogram(MFA), Width), ferrotrace_slow:lines(Entry, Width),
       ferrotrace_keys:lines(Entry, Width)]
      || Entry = #{mfa := MFA, returns := R, exceptions := E} <- lists:sublist(Shown, NHist),
         R + E > 0]].

matches(all, _) -> true;
matches(Patterns, MFA) -> lists:any(fun(P) -> ferrotrace_spec:matches(P, MFA) end, Patterns).

%% @doc `Calls' (call entries of a summary or of an interval) by `Key', largest first; a
%% call without the figure (no return yet) last.
-spec sort(atom(), [map()]) -> [map()].
sort(Key, Calls) ->
    Value = fun(C) -> case maps:get(Key, C, undefined) of
                          undefined -> -1;
                          V -> V
                      end
            end,
    lists:sort(fun(A, B) -> Value(A) >= Value(B) end, Calls).

%% @doc The report's header for `Summary' in `Width' columns, as the text report prints it:
%% the session and its status, then the notes (the events' accounting, the rings, sampling,
%% pairing, the frame bound, another tool, the probe effect, changes, the budget, what was
%% left out and the loops), a line each where there is one. The html export shows it.
-spec header(ferrotrace:summary(), pos_integer()) -> iolist().
header(Summary, Width) ->
    {First, Notes} = header(Summary, ?LOOPS_NAMED, Width),
    [First, "\n", Notes].

%% The session's line, and the notes that follow the table (ferrotrace_report_notes).
header(Summary = #{id := Id, status := Status, elapsed_ms := Ms}, LoopsNamed, Width) ->
    StatusText = case Status of
                     running -> "running";
                     stopped -> io_lib:format("stopped (~tp)",
                                              [maps:get(stop_reason, Summary, undefined)]);
                     Other -> io_lib:format("~tp", [Other])
                 end,
    Name = case Summary of
               #{name := SessionName} when SessionName =/= undefined ->
                   io_lib:format("~tp (id ~tp)", [SessionName, Id]);
               _ ->
                   io_lib:format("~tp", [Id])
           end,
    Elapsed = io_lib:format("~ts after ~.1f s", [StatusText, Ms / 1000]),
    {[ferrotrace_text:wrap("ferrotrace session ", [[Name, ":"], Elapsed], "", Width),
      scope(maps:get(scope, Summary, none), Width)],
     ferrotrace_report_notes:notes(Summary, LoopsNamed, Width)}.

%% The processes a scoped session traces (`pids' naming them, ferrotrace_scope): as the
%% operator wrote it, what it follows, how many at the start and now (or at the end).
scope(#{pids := Pids, follow := Follow, at_start := AtStart} = Scope, Width) ->
    Followed = case Follow of
                   spawns -> " and what they spawn";
                   first_spawn -> " and their first spawns";
                   none -> ""
               end,
    Later = case Scope of
                #{at_end := End} -> [io_lib:format("~b at the end", [End])];
                #{now := Now} -> [io_lib:format("~b now", [Now])];
                #{} -> []
            end,
    ferrotrace_text:wrap("processes: ", [[io_lib:format("~0tP", [Pids, 12]), Followed],
                                         io_lib:format("~b at the start", [AtStart]) | Later], Width);
scope(_None, _Width) ->
    [].


%%--------------------------------------------------------------------------------------
%% The table

%% {Header, Key, Kind}; optional columns are dropped in ?DROP_ORDER when the table is too wide.
-define(COLUMNS, [{"COUNT", count, count}, {"EXC", exceptions, count}, {"MEAN", mean, time},
                  {"P50", p50, time}, {"P90", p90, time}, {"P99", p99, time},
                  {"P99.9", p999, time}, {"MAX", max, time}, {"TOTAL", total, time}]).
-define(DROP_ORDER, [mean, p90, p999, exceptions, p50, total, p99, max]).
-define(GAP, 2).

table(_Shown, _Sort, _Width, true) ->
    "no traced calls yet\n";
table([], _Sort, _Width, false) ->
    "no function matches\n";
table(Calls, Sort, {Width, Names}, false) ->
    [[Line, "\n"] || Line <- rows(Calls, ?COLUMNS, ?DROP_ORDER, Sort, Width, Names)].

%% @doc The lines of a table of `Calls' (no newlines): a header, then a row per call with
%% its function's name and a cell per column of `Columns' (`{Header, Key, count | time}');
%% while the table is wider than `Width', the columns of `Drop' go in that order (never
%% the `Sort' column), then the names are shortened in the middle.
-spec rows([map()], [{string(), atom(), count | time}], [atom()], atom(), pos_integer()) ->
          [iolist()].
rows(Calls, Columns0, Drop, Sort, Width) ->
    rows(Calls, Columns0, Drop, Sort, Width, fit).

%% @doc As {@link rows/5}; with `whole', names are never shortened (the output is not a
%% terminal: a line may be wider than `Width'), with `fit' they are shortened so that no
%% two rows read alike (ferrotrace_text:shorten_all/2).
-spec rows([map()], [{string(), atom(), count | time}], [atom()], atom(), pos_integer(), fit | whole) ->
          [iolist()].
rows(Calls, Columns0, Drop, Sort, Width, Fit) ->
    Latency = lists:max([0 | [V || {_, Key, time} <- Columns0, Key =/= total, V <- times(Key, Calls), is_integer(V)]]),
    Cells0 = [column(Header, Key, Kind, Calls, Latency) || {Header, Key, Kind} <- Columns0],
    Names = [unicode:characters_to_list(ferrotrace_names:mfa(MFA)) || #{mfa := MFA} <- Calls],
    NameWidth = lists:max([length("FUNCTION") | [string:length(N) || N <- Names]]),
    Columns = fit(Cells0, Drop, Sort, NameWidth, Width),
    Numbers = lists:sum([W + ?GAP || {_, _, W, _} <- Columns]),
    NameCol = case Fit of
                  whole -> NameWidth;
                  fit -> max(min(NameWidth, Width - Numbers), length("FUNCTION"))
              end,
    Gap = lists:duplicate(?GAP, $\s),
    HeaderLine = [string:pad("FUNCTION", NameCol),
                  [[Gap, string:pad(H, W, leading)] || {_, H, W, _} <- Columns]],
    Rows = [[string:pad(Name, NameCol),
             [[Gap, string:pad(lists:nth(I, Cells), W, leading)] || {_, _, W, Cells} <- Columns]]
            || {I, Name} <- lists:zip(lists:seq(1, length(Names)), ferrotrace_text:shorten_all(Names, NameCol))],
    [HeaderLine | Rows].

%% {Key, HeaderText, Width, Cells}: the latency columns in one unit, chosen from the largest
%% of their values (`Latency'); TOTAL, a sum of times, in its own.
column(Header, count, count, Calls, _Latency) ->
    %% A count of calls timed out of more shows the calls made, estimated: `~' marks it.
    Cells = [case C of
                 #{estimated := E, count := N} when E =/= N -> [$~ | integer_to_list(E)];
                 #{} -> integer_to_list(maps:get(count, C, 0))
             end || C <- Calls],
    finish(count, Header, Cells);
column(Header, Key, count, Calls, _Latency) ->
    Cells = [integer_to_list(maps:get(Key, C, 0)) || C <- Calls],
    finish(Key, Header, Cells);
column(Header, Key, time, Calls, Latency) ->
    Values = times(Key, Calls),
    Max = case Key of
              total -> lists:max([0 | [V || V <- Values, is_integer(V)]]);
              _ -> Latency
          end,
    {Unit, Divisor} = case Key of
                          total -> unit_for(Max);
                          _ -> latency_unit(Max)
                      end,
    Cells = [in_unit(V, Divisor) || V <- Values],
    finish(Key, Header ++ " " ++ Unit, Cells).

%% A function counted only (a loop) has no time at all, not a total of zero.
times(Key, Calls) ->
    [case C of
         #{returns := 0, exceptions := 0} -> undefined;
         _ -> maps:get(Key, C, undefined)
     end || C <- Calls].

finish(Key, Header, Cells) ->
    {Key, Header, lists:max([length(Header) | [length(C) || C <- Cells]]), Cells}.

%% The latency columns' unit: the smallest in which their largest value has at most 6 digits
%% (a p50 of 1.49 us beside a max of 150 ms reads 1.49 and 150000 us, not 0.001 and 150 ms).
latency_unit(Max) when Max < 1000000 -> {"ns", 1};
latency_unit(Max) when Max < 1000000000 -> {"us", 1000};
latency_unit(Max) when Max < 1000000000000 -> {"ms", 1000000};
latency_unit(_) -> {"s", 1000000000}.

%% TOTAL's unit: the smallest in which its largest value has at most 5 digits.
unit_for(Max) when Max < 100000 -> {"ns", 1};
unit_for(Max) when Max < 100000000 -> {"us", 1000};
unit_for(Max) when Max < 100000000000 -> {"ms", 1000000};
unit_for(_) -> {"s", 1000000000}.

in_unit(undefined, _) -> "-";
in_unit(V, 1) -> integer_to_list(V);
in_unit(V, Divisor) ->
    X = V / Divisor,
    if X >= 100 -> integer_to_list(round(X));
       X >= 10 -> float_to_list(X, [{decimals, 1}]);
       X >= 1; X == 0 -> float_to_list(X, [{decimals, 2}]);
       true -> float_to_list(X, [{decimals, 3}])
    end.

%% Drops optional columns (never the sort column) until the table fits with a name column
%% of at least ?MIN_NAME characters (or the longest name, if shorter).
fit(Columns, Drop, Sort, NameWidth, Width) ->
    Numbers = lists:sum([W + ?GAP || {_, _, W, _} <- Columns]),
    case Numbers + min(NameWidth, ?MIN_NAME) =< Width of
        true ->
            Columns;
        false ->
            case [K || K <- Drop, K =/= Sort, lists:keymember(K, 1, Columns)] of
                [] -> Columns;
                [Key | _] -> fit(lists:keydelete(Key, 1, Columns), Drop, Sort, NameWidth, Width)
            end
    end.

left_out(_Total, Matching, Shown, _Filter, _Width) when Matching =:= Shown ->
    [];
left_out(Total, Matching, Shown, Filter, Width) ->
    Parts = [io_lib:format("~b more functions not shown", [Matching - Shown]),
             "see them with top => all or mfa => {M, F, A}"]
        ++ case Filter of
               all -> [];
               _ -> [io_lib:format("~b of ~b functions match mfa", [Matching, Total])]
           end,
    ferrotrace_text:wrap("... ", Parts, Width).

%%--------------------------------------------------------------------------------------
%% Histograms

quantize(MFA, {error, Reason}, _Width) ->
    io_lib:format("~n~ts: no histogram (~tp)~n", [ferrotrace_names:mfa(MFA), Reason]);
quantize(_MFA, [], _Width) ->
    [];
quantize(MFA, Buckets, Width) ->
    BarWidth = max(10, min(40, Width - 30)),
    Total = lists:sum([C || {_, _, C} <- Buckets]),
    Lows = [L || {L, _, _} <- Buckets],
    %% Every power of two from one below the first bucket to one above the last, as DTrace.
    First = max(1, lists:min(Lows) div 2),
    Last = lists:max(Lows) * 2,
    Counts = maps:from_list([{L, C} || {L, _, C} <- Buckets]),
    Rows = [begin
                Count = maps:get(Low, Counts, 0),
                Bar = lists:duplicate(round(BarWidth * Count / max(Total, 1)), $@),
                [string:pad(ferrotrace_text:format_ns(Low), 12, leading), " |",
                 string:pad(Bar, BarWidth), " ", integer_to_list(Count), "\n"]
            end || Low <- powers_of_two(First, Last)],
    Title = string:pad(" Distribution ", BarWidth, both, $-),
    Name = unicode:characters_to_list(ferrotrace_names:mfa(MFA)),
    [io_lib:format("~n  ~ts  latency~n", [ferrotrace_text:shorten(Name, Width - 12)]),
     string:pad("value", 12, leading), "  ", Title, " count\n",
     Rows].

powers_of_two(Low, High) when Low > High -> [];
powers_of_two(Low, High) -> [Low | powers_of_two(Low * 2, High)].

%%--------------------------------------------------------------------------------------
%% The cheat sheet

%% @doc The text of `ferrotrace:help()': at most 24 lines of at most 80 columns.
-spec help() -> iodata().
help() ->
    <<"ferrotrace: latencies, slow calls, process events; aggregated off the schedulers\n"
      "  {ok, S} = ferrotrace:calls(Spec, #{duration => 30000})  trace calls of Spec\n"
      "  ferrotrace:processes(Kinds, Opts)  Kinds: messages procs gc scheduling ports\n"
      "  ferrotrace:report(S)  report(S, #{top => 10, sort => p99})  print the table\n"
      "  ferrotrace:summary(S)  format(S)  histogram(S, MFA | wakeup | {gc, minor})\n"
      "  ferrotrace:slowest(S, MFA)  slow_calls(S, MFA)  print_recent(S)  slow calls\n"
      "  ferrotrace:watch(S)  watch(S, #{interval => 1000, count => 5})  live view\n"
      "  ferrotrace:export(S, json | hdr_log | collapsed | chrome_trace | html, File)\n"
      "  ferrotrace:stop(S)  release(S)  list()  stop tracing; free; all sessions\n"
      "  ferrotrace:add(S, Spec)  remove(S, Spec)  change what a running S traces\n"
      "  ferrotrace:report()  stop()  stop(all)  S lost: report the shell's latest,\n"
      "    stop the shell's sessions, stop all;  explain(v(-1))  a refusal in words\n"
      "Spec (one, or a list):\n"
      "  M  {M, F, '_'}  {M, F, Arity}  \"m:f/1\"  \"MyApp.Cart.add/2\"  functions\n"
      "  \"m:f(X, _) when X > 10\"  {m, f, fun([X]) when X > 10 -> true end}  filters\n"
      "  {m, f, fun([#{tier := T}]) -> message(T) end}  a histogram per key (by_key)\n"
      "Options (map or proplist), each with its default: h(ferrotrace, calls).\n"
      "  busy node: sample => {calls, 10} (1 call in 10)  max_overhead => 0.05\n"
      "  pids => Name | {children, Sup} | {application, App} | [...]  whose calls\n"
      "Report options: top => N | all  sort => count | total | p99 | max\n"
      "  mfa => {M, F, A} | \"MyApp.Cart\"   width => Columns   histograms => N\n"
      "Safe by default: limits, bounded rings, no mailbox; a session stops with the\n"
      "shell that started it (elsewhere: runs its duration). Less tracing's cost.\n"
      "Docs: h(ferrotrace). h(ferrotrace, calls).\n">>.

%%--------------------------------------------------------------------------------------
%% Cluster sessions (ferrotrace_cluster): the by-node table.

%% @doc One line per function and node of a cluster session's summary (its `by_node'),
%% in the order of its `calls': COUNT, P50, P99, MAX (µs), in `Width' columns (names
%% whole where the width allows, shortened in the middle where not).
-spec by_node_table(ferrotrace:summary(), pos_integer()) -> iolist().
by_node_table(#{calls := Calls, by_node := ByNode}, Width) ->
    Header = ["FUNCTION", "NODE", "COUNT", "P50(us)", "P99(us)", "MAX(us)"],
    Rows = [[ferrotrace_names:mfa(MFA), atom_to_list(Node), integer_to_list(Count),
             by_node_us(P50), by_node_us(P99), by_node_us(Max)]
            || #{mfa := MFA} <- Calls,
               {Node, #{calls := NodeCalls}} <- lists:sort(maps:to_list(ByNode)),
               #{mfa := M, count := Count, p50 := P50, p99 := P99, max := Max} <- NodeCalls,
               M =:= MFA],
    ["\nby node\n",
     [[Line, "\n"] || Line <- ferrotrace_text:table("", [Header | Rows], [name, name, right, right, right, right], Width)]].

by_node_us(undefined) -> "-";
by_node_us(Ns) -> float_to_list(Ns / 1000, [{decimals, 1}]).
