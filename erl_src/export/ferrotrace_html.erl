%%% @doc The `html' export: one self-contained HTML page of a session, to open in a browser
%%% from disk (no network) and attach to a ticket.
%%%
%%% The page holds the report's header (the same lines `ferrotrace:report/1' prints, from
%%% `ferrotrace_report'), the function table (sortable by any column), and for the function
%%% picked in it (the first, most total time, at load) its latency distribution
%%% (power-of-two buckets, log scale), its p50, p90 and p99 over time (a session with
%%% `intervals'), its slowest calls with their arguments; the flight recorder's last events;
%%% a flame graph of the call paths kept (own time; drawn by the `inferno' crate, it zooms
%%% on a click; direct recursion folded into one frame, see {@link fold_recursion/1}, unless
%%% `{html, #{recursion => keep}}'); with `trees', the slowest kept call tree of each root function
%%% (`ferrotrace_trees:text/2'); the process activity (`also' or `processes/2'). A cluster session's page
%%% has a view per node and a merged one.
%%%
%%% The data travels as JSON inside the page; `priv/html/' holds the page's script and
%%% style and the vendored uPlot (MIT, its licence beside it), inlined at each export.
%%% Everything but the page is gathered on the session's node ({@link view/1}), so that a
%%% cluster's coordinator reads each node's view in one call.
-module(ferrotrace_html).

-export([local/1, local/2, view/1, cluster/3, cluster/4, fold_recursion/1]).

%% The report's width for the header's lines.
-define(WIDTH, 120).
%% Slowest calls shown per function; a term's text is cut to this many characters.
-define(SLOW_SHOWN, 5).
-define(TERM_CHARS, 160).
%% The points of a function's percentiles over time: at most this many in all the page's
%% functions together (intervals are grouped), between 10 and 60 a function.
-define(TIME_POINTS, 20000).
%% The flight recorder's events shown (the last ones).
-define(RECENT_SHOWN, 200).
-define(SERIES, [wakeup, run_slice, lifetime, size_words, {gc, minor}, {gc, major}, {ports, run_slice}]).

-type view() :: #{atom() => term()}.
-export_type([view/0]).

%% @doc The page of local session `Id', with the default options.
-spec local(ferrotrace_tracer:session_id()) -> {ok, binary()} | {error, term()}.
local(Id) ->
    local(Id, #{}).

%% @doc The page of local session `Id'. `Options' (checked by `ferrotrace_export:check/2'):
%% `recursion => fold' (default: a function that calls itself is one frame of the flame
%% graph) or `keep' (a frame per level).
-spec local(ferrotrace_tracer:session_id(), map()) -> {ok, binary()} | {error, term()}.
local(Id, Options) ->
    case view(Id) of
        {ok, View} -> page(atom_to_binary(node()), [render(atom_to_binary(node()), View, fun(S) -> series(View, S) end, Options)]);
        {error, _} = Error -> Error
    end.

%% @doc What the page shows of local session `Id', read on its node: the summary, each
%% function's buckets, the intervals, the recorder, the folded stacks, the other series.
-spec view(ferrotrace_tracer:session_id()) -> {ok, view()} | {error, term()}.
view(Id) ->
    case ferrotrace_local:summary(Id) of
        {error, _} = Error ->
            Error;
        #{calls := Calls} = Summary ->
            Info = case ferrotrace_registry:lookup(Id) of
                       {ok, _, _, I} -> I;
                       error -> #{}
                   end,
            Buckets = maps:from_list([{MFA, B} || #{mfa := MFA} <- Calls,
                                                  B <- [ferrotrace_local:histogram(Id, MFA)], is_list(B)]),
            Series = maps:from_list([{S, B} || S <- ?SERIES, B <- [ferrotrace_local:histogram(Id, S)],
                                               is_list(B), B =/= []]),
            Folded = case ferrotrace_tracer:session_collapsed(Id, exclusive) of
                         {ok, Paths, _} -> ferrotrace_names:folded(Paths);
                         {error, _} -> <<>>
                     end,
            {ok, #{summary => Summary, node => node(), otp => list_to_binary(erlang:system_info(otp_release)),
                   spec => maps:get(spec, Info, undefined), buckets => Buckets, series => Series,
                   intervals => intervals(Id, length(Calls)), recent => ferrotrace_local:recent(Id),
                   folded => Folded, trees => ferrotrace_trees:text(Id, ?WIDTH)}}
    end.

%% @doc The page of a cluster session: its merged `Summary' and `Histogram(MFA)', and each
%% node's reply to {@link view/1} (`{Node, {ok, View}}'; a node that failed is named).
-spec cluster(ferrotrace:summary(), fun((mfa()) -> [ferrotrace:bucket()] | {error, term()}),
              [{node(), term()}]) -> {ok, binary()} | {error, term()}.
cluster(Summary, Histogram, Replies) ->
    cluster(Summary, Histogram, Replies, #{}).

%% @doc {@link cluster/3} with the page's `Options' (as {@link local/2}'s).
-spec cluster(ferrotrace:summary(), fun((mfa()) -> [ferrotrace:bucket()] | {error, term()}),
              [{node(), term()}], map()) -> {ok, binary()} | {error, term()}.
cluster(Summary = #{calls := Calls}, Histogram, Replies, Options) ->
    Views = [{Node, V} || {Node, {ok, V}} <- Replies],
    Failed = [{Node, R} || {Node, R} <- Replies, not is_tuple(R) orelse element(1, R) =/= ok],
    %% Each function's slowest calls of every node, slowest first (the merged summary has none).
    Slowest = lists:foldl(fun(#{mfa := MFA, slowest := S}, Acc) -> maps:update_with(MFA, fun(L) -> [S | L] end, [S], Acc);
                             (_, Acc) -> Acc
                          end, #{}, [C || {_, #{summary := #{calls := Cs}}} <- Views, C <- Cs]),
    WithSlowest = [C#{slowest => ferrotrace_cluster_merge:slow_calls(slowest, maps:get(MFA, Slowest, []))}
                   || C = #{mfa := MFA} <- Calls],
    Merged = #{summary => Summary#{calls := WithSlowest}, failed => Failed, node => cluster,
               otp => list_to_binary(erlang:system_info(otp_release)),
               spec => first([maps:get(spec, V) || {_, V} <- Views]),
               buckets => maps:from_list([{MFA, B} || #{mfa := MFA} <- Calls, B <- [Histogram(MFA)], is_list(B)]),
               series => merged_series([Series || {_, #{series := Series}} <- Views]),
               intervals => merged_intervals([maps:get(intervals, V) || {_, V} <- Views]),
               recent => case [R || {_, #{recent := R}} <- Views, is_list(R)] of
                             [] -> {error, no_recorder};
                             Lists -> ferrotrace_cluster_merge:recent(Lists)
                         end,
               folded => ferrotrace_cluster_merge:folded([F || {_, #{folded := F}} <- Views])},
    Title = iolist_to_binary(["cluster of ", lists:join(", ", [atom_to_list(N) || {N, _} <- Replies])]),
    page(Title, [render(<<"merged">>, Merged, fun(S) -> series(Merged, S) end, Options)
                 | [render(atom_to_binary(Node), V, fun(S) -> series(V, S) end, Options) || {Node, V} <- Views]]).

%% The nodes' process activity series added, bucket by bucket (power-of-two buckets: the
%% same bounds on every node).
merged_series(Nodes) ->
    Added = lists:foldl(fun({Key, {Low, High, Count}}, Acc) ->
                                maps:update_with({Key, Low, High}, fun(C) -> C + Count end, Count, Acc)
                        end, #{}, [{S, B} || Series <- Nodes, {S, Buckets} <- maps:to_list(Series), B <- Buckets]),
    lists:foldr(fun({{S, Low, High}, Count}, Acc) -> maps:update_with(S, fun(L) -> [{Low, High, Count} | L] end,
                                                                      [{Low, High, Count}], Acc)
                end, #{}, lists:sort(maps:to_list(Added))).

first([X | _]) -> X;
first([]) -> undefined.

series(#{series := Series}, S) -> maps:get(S, Series, []).

%%--------------------------------------------------------------------------------------
%% Intervals: a session's own snapshots, grouped so that the page keeps ?TIME_POINTS points.

intervals(Id, Functions) ->
    case ferrotrace_intervals:session(Id, native) of
        {ok, _Start, _Period, []} ->
            none;
        {ok, Start, Period, Native} ->
            Points = max(10, min(60, ?TIME_POINTS div max(1, Functions))),
            Ms = Period * ceil_div(length(Native), Points),
            case Ms =:= Period orelse ferrotrace_intervals:session(Id, Ms) of
                true -> {Start, Period, Native};
                {ok, Start1, Grouped} -> {Start1, Ms, Grouped};
                {error, _} -> {Start, Period, Native}
            end;
        {error, _} ->
            none
    end.

ceil_div(A, B) -> (A + B - 1) div B.

%% The nodes' intervals on one clock, when every node has them at the same length.
merged_intervals(Nodes) ->
    case lists:usort([Ms || {_, Ms, _} <- Nodes]) of
        [Ms] when length(Nodes) > 0 ->
            Now = erlang:system_time(millisecond),
            {Start, Is} = ferrotrace_cluster_merge:intervals(Ms, Now, [{S, I} || {S, _, I} <- Nodes]),
            {Start, Ms, Is};
        _ ->
            none
    end.

%% [{MFA, [[OffsetMs, P50, P90, P99]]}] from the intervals' histograms.
percentiles_over_time(none) ->
    #{};
percentiles_over_time({_Start, _Ms, Intervals}) ->
    Points = [{MFA, [Offset, P50, P90, P99]}
              || {Offset, _Len, Hs} <- Intervals, {MFA, Bin} <- Hs,
                 {ok, #{count := N, p50 := P50, p90 := P90, p99 := P99}} <- [ferrotrace_tracer:histogram_figures(Bin)],
                 N > 0],
    lists:foldr(fun({MFA, P}, Acc) -> maps:update_with(MFA, fun(L) -> [P | L] end, [P], Acc) end, #{}, Points).

%%--------------------------------------------------------------------------------------
%% A view as the page's data (JSON: maps, lists, numbers, binaries).

render(Name, View = #{summary := Summary, buckets := Buckets}, SeriesFun, Options) ->
    #{calls := Calls} = Summary,
    Times = percentiles_over_time(maps:get(intervals, View)),
    Header = iolist_to_binary(ferrotrace_report:header(Summary, ?WIDTH)),
    {Flame, FlameNote} = flame(Name, maps:get(folded, View), maps:get(stacks, Summary, #{}),
                               maps:get(recursion, Options, fold)),
    #{name => Name,
      facts => facts(View),
      header => Header,
      interval_ms => case maps:get(intervals, View) of {_, Ms, _} -> Ms; none -> null end,
      functions => [function(C, maps:get(MFA, Buckets, []), maps:get(MFA, Times, [])) || C = #{mfa := MFA} <- Calls],
      flame => Flame, flame_note => FlameNote,
      recent => recent(maps:get(recent, View)),
      trees => maps:get(trees, View, null),
      activity => activity(Summary, SeriesFun),
      series => [#{name => series_name(S), unit => series_unit(S), counted => series_counted(S),
                   buckets => [[L, C] || {L, _, C} <- B]}
                 || S <- ?SERIES, B <- [SeriesFun(S)], B =/= []]}.

facts(#{summary := Summary, node := Node, otp := Otp, spec := Spec} = View) ->
    Started = case maps:get(started_at, Summary, undefined) of
                  undefined -> <<"-">>;
                  Ms -> list_to_binary(calendar:system_time_to_rfc3339(Ms, [{unit, millisecond}]))
              end,
    [[<<"spec">>, spec_text(Spec)],
     [<<"node">>, text(Node)],
     [<<"OTP">>, Otp],
     [<<"started">>, Started],
     [<<"duration">>, iolist_to_binary(io_lib:format("~.1f s", [maps:get(elapsed_ms, Summary, 0) / 1000]))]]
        ++ [[<<"nodes down">>, text(Down)] || Down <- [maps:get(nodes_down, Summary, [])], Down =/= []]
        ++ [[<<"nodes failed">>, text(Failed)] || Failed <- [maps:get(failed, View, [])], Failed =/= []]
        ++ [[<<"pids">>, Pids] || Pids <- [other_nodes_pids(View)], Pids =/= <<>>].

%% A cluster's pids are printed as the coordinator prints them, `<N.x.y>', where N is its own
%% number for the pid's node: which node each N is, for whoever reads the page elsewhere.
other_nodes_pids(#{summary := #{calls := Calls}} = View) ->
    Pids = [P || #{slowest := Slowest} <- Calls, is_list(Slowest), #{pid := P} <- Slowest]
        ++ [P || Events <- [maps:get(recent, View, [])], is_list(Events), #{pid := P} <- Events],
    Nodes = lists:usort([{node(P), hd(string:split(tl(pid_to_list(P)), "."))} || P <- Pids, is_pid(P), node(P) =/= node()]),
    iolist_to_binary(lists:join(", ", [["<", N, ".x.y> on ", atom_to_list(Node)] || {Node, N} <- Nodes])).

spec_text(undefined) -> <<"-">>;
spec_text(Specs) when is_list(Specs) -> iolist_to_binary(lists:join(" ", [spec_text(S) || S <- Specs]));
spec_text({M, F, A} = MFA) when is_atom(M), is_atom(F), (is_integer(A) orelse A =:= '_') ->
    iolist_to_binary(ferrotrace_names:mfa(MFA));
spec_text(Other) -> text(Other).

function(C = #{mfa := MFA}, Buckets, Times) ->
    Timed = maps:get(returns, C, 0) + maps:get(exceptions, C, 0) > 0,
    Figure = fun(K) when Timed -> maps:get(K, C, null);
                (_) -> null
             end,
    #{mfa => iolist_to_binary(ferrotrace_names:mfa(MFA)),
      count => maps:get(count, C, 0), exceptions => maps:get(exceptions, C, 0),
      mean => Figure(mean), p50 => Figure(p50), p90 => Figure(p90), p99 => Figure(p99),
      p999 => Figure(p999), max => Figure(max), total => Figure(total),
      own => case maps:get(own, C, undefined) of #{total := Own} when Timed -> Own; _ -> null end,
      buckets => [[L, N] || {L, _, N} <- Buckets],
      times => Times,
      slow_kept => length(maps:get(slowest, C, [])),
      slow => [slow(S) || S <- lists:sublist(maps:get(slowest, C, []), ?SLOW_SHOWN)]}.

slow(#{duration := D, started_at := At, pid := Pid} = S) ->
    Args = case S of
               #{args := A} when is_list(A) -> cut(lists:join(", ", [printed(X) || X <- A]));
               _ -> null   % not copied (args => true): the page leaves the columns out
           end,
    Result = case maps:get(result, S, undefined) of
                 {return, V} -> [<<"return ">>, term_text(V)];
                 {exception, Class, Reason} -> [<<"exception ">>, term_text(Class), $:, term_text(Reason)];
                 undefined -> <<"-">>;
                 Other -> text(Other)
             end,
    #{duration => D, at => list_to_binary(ferrotrace_slow:format_time(At)),
      pid => unicode_text(ferrotrace_slow:process_name(Pid)), args => Args, result => iolist_to_binary(Result)}.

recent(Events) when is_list(Events) ->
    Shown = lists:nthtail(max(0, length(Events) - ?RECENT_SHOWN), Events),
    #{total => length(Events), text => unicode_text(ferrotrace_recent:lines(Shown))};
recent(_) ->
    null.

activity(Summary, SeriesFun) ->
    case [K || K <- [messages, scheduling, gc, processes, ports], is_map_key(K, Summary)] of
        [] -> null;
        _ -> unicode_text(ferrotrace_activity_report:format(Summary, SeriesFun, ?WIDTH))
    end.

%% A series' plot: its title (as the activity report's histograms have it) and what it counts.
series_name(wakeup) -> <<"wakeup latency">>;
series_name(run_slice) -> <<"run slice">>;
series_name(lifetime) -> <<"process lifetime">>;
series_name(size_words) -> <<"message size (words)">>;
series_name({gc, minor}) -> <<"minor GC pause">>;
series_name({gc, major}) -> <<"major GC pause">>;
series_name({ports, run_slice}) -> <<"port run slice">>.

series_counted(wakeup) -> <<"wakeups">>;
series_counted(lifetime) -> <<"processes">>;
series_counted(size_words) -> <<"messages">>;
series_counted({gc, _}) -> <<"collections">>;
series_counted(_) -> <<"slices">>.

series_unit(size_words) -> <<"words">>;
series_unit(_) -> <<"ns">>.

%% The flame graph's SVG (inferno), or null and why not.
flame(_Name, <<>>, _Stacks, _Recursion) ->
    {null, <<"no call path kept: a call path is a traced call that returned">>};
flame(Name, Folded0, Stacks, Recursion) ->
    Title = iolist_to_binary(["own time by call path, ", Name]),
    {Folded, Levels} = case Recursion of
                           keep -> {Folded0, 0};
                           fold -> fold_recursion(Folded0)
                       end,
    Folding = case Levels of
                  0 -> "";
                  _ -> io_lib:format("; direct recursion folded (~b frames), {html, #{recursion => keep}} draws them", [Levels])
              end,
    Note = iolist_to_binary(io_lib:format("~b paths kept; ~b returned calls past the path bounds not drawn~ts",
                                          [maps:get(paths, Stacks, 0),
                                           maps:get(overflow, Stacks, 0) + maps:get(too_deep, Stacks, 0), Folding])),
    case ferrotrace_tracer:flamegraph_svg(Folded, Title) of
        {ok, Svg} -> {Svg, Note};
        {error, Reason} -> {null, text(Reason)}
    end.

%% @doc Folded call paths (`a;b;b;c Ns' lines) with direct recursion folded: a frame that
%% repeats the one below it (a function calling itself, `b;b') is dropped, its own time
%% kept in the one frame, and paths that become alike added up. Answers the folded text
%% (its lines sorted) and the number of frames dropped over all lines (0: nothing folded,
%% the text as it was).
-spec fold_recursion(binary()) -> {binary(), non_neg_integer()}.
fold_recursion(Folded) ->
    Lines = binary:split(Folded, <<"\n">>, [global, trim_all]),
    {Paths, Dropped} =
        lists:foldl(fun(Line, {Acc, D}) ->
                            case string:split(Line, <<" ">>, trailing) of
                                [Path, N] ->
                                    Frames = binary:split(Path, <<";">>, [global]),
                                    Kept = dedup(Frames),
                                    Ns = binary_to_integer(N),
                                    {maps:update_with(Kept, fun(C) -> C + Ns end, Ns, Acc),
                                     D + length(Frames) - length(Kept)};
                                _ ->
                                    {Acc, D}
                            end
                    end, {#{}, 0}, Lines),
    case Dropped of
        0 -> {Folded, 0};
        _ -> {iolist_to_binary([[lists:join($;, F), $\s, integer_to_binary(N), $\n] || {F, N} <- lists:sort(maps:to_list(Paths))]),
              Dropped}
    end.

dedup([A, A | Rest]) -> dedup([A | Rest]);
dedup([A | Rest]) -> [A | dedup(Rest)];
dedup([]) -> [].

%%--------------------------------------------------------------------------------------
%% Text and the page

%% A term as Erlang prints it, on one line, cut to ?TERM_CHARS characters.
term_text(T) -> cut(printed(T)).

printed(T) -> io_lib:format("~0tP", [T, 40]).

cut(Chars) ->
    Text = unicode:characters_to_list(Chars),
    case string:length(Text) > ?TERM_CHARS of
        true -> unicode:characters_to_binary([string:slice(Text, 0, ?TERM_CHARS - 3), "..."]);
        false -> unicode:characters_to_binary(Text)
    end.

text(T) -> unicode_text(io_lib:format("~0tp", [T])).

unicode_text(Chars) ->
    case unicode:characters_to_binary(Chars) of
        B when is_binary(B) -> B;
        _ -> iolist_to_binary(io_lib:format("~0p", [Chars]))
    end.

page(Title, Views) ->
    case ferrotrace_tracer:to_json_compact(#{format => <<"ferrotrace.html">>, version => 1, views => Views}) of
        {ok, Json} ->
            case assets() of
                {ok, [UplotJs, UplotCss, AppJs, AppCss, UplotLicence]} ->
                    {ok, iolist_to_binary(
                           [<<"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                              "<meta name=\"viewport\" content=\"width=device-width\">"
                              "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
                              "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data: blob:; "
                              "frame-src blob: data:\"><title>ferrotrace: ">>, escape(Title), <<"</title>\n<style>">>,
                            UplotCss, AppCss, <<"</style></head>\n<body><div id=\"app\"></div>\n"
                                               "<script type=\"application/json\" id=\"ferrotrace-data\">">>,
                            script_safe(Json), <<"</script>\n<!-- uPlot 1.6.32 (priv/html/uPlot.iife.min.js):\n">>,
                            UplotLicence, <<"-->\n<script>">>, UplotJs, <<"</script>\n<script>">>,
                            AppJs, <<"</script></body></html>\n">>])};
                {error, _} = Error ->
                    Error
            end;
        {error, _} = Error ->
            Error
    end.

%% JSON inside a script element: `</' and `<!--' must not appear (`\/' is JSON for `/').
script_safe(Json) ->
    binary:replace(binary:replace(Json, <<"</">>, <<"<\\/">>, [global]), <<"<!--">>, <<"\\u003c!--">>, [global]).

escape(Text) ->
    lists:foldl(fun({From, To}, T) -> binary:replace(T, From, To, [global]) end, Text,
                [{<<"&">>, <<"&amp;">>}, {<<"<">>, <<"&lt;">>}, {<<">">>, <<"&gt;">>}]).

assets() ->
    Dir = filename:join(code:priv_dir(ferrotrace), "html"),
    Read = [file:read_file(filename:join(Dir, F)) || F <- ["uPlot.iife.min.js", "uPlot.min.css", "ferrotrace.js", "ferrotrace.css",
                                                          "LICENSE-uPlot"]],
    case [R || {error, R} <- Read] of
        [] -> {ok, [B || {ok, B} <- Read]};
        [Reason | _] -> {error, {html_assets, Dir, Reason}}
    end.
