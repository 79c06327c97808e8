%%% @doc Exports: a session's figures in formats that other tools read.
%%%
%%% Called through {@link ferrotrace:export/2} and {@link ferrotrace:export/3}; works on a
%%% local session id and, through {@link ferrotrace_cluster}, on a cluster session. Formats:
%%% <ul>
%%% <li>`hdr_log': an HdrHistogram interval log (V2 compressed histograms), one histogram
%%% per function tagged with its name as the report names it (values in ns; a space or comma
%%% in a name becomes `_' in its tag), covering the session from its start; read by
%%% HistogramLogProcessor, the Python `hdrhistogram' package, HdrHistogram.js. With
%%% `interval => Ms' (a session started with `intervals => P', `Ms' a multiple of `P'; see
%%% {@link ferrotrace_intervals}) the log holds one interval per `Ms' of the session, each
%%% with a histogram per function that returned in it; a session without `intervals'
%%% answers `{error, {needs, intervals}}'.</li>
%%% <li>`json': the summary of {@link ferrotrace:summary/1} as one JSON object; see
%%% {@link json_document/1} for the field names.</li>
%%% <li>`collapsed': folded stacks of the traced functions (`a;b;c Weight' per line, each
%%% function named as the report names it, see {@link ferrotrace_names}), for
%%% flamegraph.pl, inferno and speedscope; `weight => exclusive' (default: time in the
%%% function itself, less the traced calls it made) or `inclusive'.</li>
%%% <li>`chrome_trace': the flight recorder's calls (`recent => N') as Chrome trace-event
%%% JSON for Perfetto and chrome://tracing, see {@link ferrotrace_chrome}; a session without
%%% a recorder answers `{error, {needs, recent}}'.</li>
%%% <li>`html': one self-contained page to open in a browser, see {@link ferrotrace_html}.</li>
%%% </ul>
-module(ferrotrace_export).

-export([check/2, local/3, json_document/1, hdr_log/3, merge_folded/1,
         chrome_trace/1, intervals/2, hdr_log_intervals/2]).

-type format() :: hdr_log | json | collapsed | chrome_trace | html.
-export_type([format/0]).

%% The formats `export' takes (format()), and how an error names them.
-define(FORMATS, [hdr_log, json, collapsed, chrome_trace, html]).
-define(FORMATS_TEXT, <<"hdr_log, json, collapsed, chrome_trace or html">>).

%% @doc Checks a format and its options: `{ok, Options}' with defaults filled in.
-spec check(term(), term()) -> {ok, map()} | {error, term()}.
check(Format, Options) when not is_map(Options) ->
    case ferrotrace_options:to_map(Options) of
        {ok, Map} -> check(Format, Map);
        Error -> Error
    end;
check(Format, Options) when is_map(Options) ->
    case lists:member(Format, ?FORMATS) of
        false -> {error, {bad_format, Format, ?FORMATS_TEXT}};
        true -> check_options(Format, maps:to_list(Options), #{})
    end.

check_options(collapsed, [], Acc) ->
    {ok, maps:merge(#{weight => exclusive}, Acc)};
check_options(_, [], Acc) ->
    {ok, Acc};
check_options(collapsed, [{weight, W} | Rest], Acc) when W =:= inclusive; W =:= exclusive ->
    check_options(collapsed, Rest, Acc#{weight => W});
check_options(collapsed, [{weight, W} | _], _) ->
    {error, {bad_option, {weight, W, <<"inclusive or exclusive">>}}};
check_options(html, [{recursion, R} | Rest], Acc) when R =:= fold; R =:= keep ->
    check_options(html, Rest, Acc#{recursion => R});
check_options(hdr_log, [{interval, Ms} | Rest], Acc) when is_integer(Ms), Ms > 0 ->
    check_options(hdr_log, Rest, Acc#{interval => Ms});
check_options(Format, [{Key, Value} | _], _) ->
    {error, {bad_option, {Key, Value, accepted(Format)}}}.

accepted(collapsed) -> <<"weight => inclusive | exclusive">>;
accepted(html) -> <<"recursion => fold | keep (the flame graph's direct recursion; default fold)">>;
accepted(hdr_log) -> <<"interval => Ms (a session started with intervals => P; Ms a multiple of P)">>;
accepted(_) -> <<"no options">>.

%% @doc The export of a local session (an engine id), options checked by {@link check/2}.
-spec local(ferrotrace_tracer:session_id(), format(), map()) -> {ok, binary()} | {error, term()}.
local(Id, json, _Options) ->
    case ferrotrace_local:summary(Id) of
        {error, _} = Error -> Error;
        Summary -> ferrotrace_tracer:to_json(json_document(with_captures(ferrotrace_local:captures(Id),
                                                                         ferrotrace_trees:with_trees(Id, Summary))))
    end;
local(Id, hdr_log, #{interval := Ms}) ->
    case intervals(Id, Ms) of
        {ok, Start, Intervals} -> hdr_log_intervals(Start, Intervals);
        {error, _} = Error -> Error
    end;
local(Id, hdr_log, _Options) ->
    case {ferrotrace_tracer:session_summary(Id), ferrotrace_tracer:session_histograms_bytes(Id)} of
        {{ok, #{started_at := Start, elapsed_ms := Elapsed}}, {ok, Histograms}} ->
            hdr_log(Start, Elapsed, Histograms);
        {{error, _} = Error, _} -> Error;
        {_, {error, _} = Error} -> Error
    end;
local(Id, chrome_trace, _Options) ->
    case ferrotrace_local:recent(Id) of
        {error, {no_recorder, _}} -> {error, {needs, recent}};
        {error, _} = Error -> Error;
        Events -> chrome_trace([{node(), Events}])
    end;
local(Id, html, Options) ->
    ferrotrace_html:local(Id, Options);
local(Id, collapsed, #{weight := Weight}) ->
    case ferrotrace_tracer:session_collapsed(Id, Weight) of
        {ok, Paths, _Info} -> {ok, folded(Paths)};
        {error, _} = Error -> Error
    end.

%% @doc The Chrome trace of recorded events, one part per node (see {@link ferrotrace_chrome}).
-spec chrome_trace([ferrotrace_chrome:part()]) -> {ok, binary()} | {error, term()}.
chrome_trace(Parts) ->
    ferrotrace_tracer:to_json(ferrotrace_chrome:document(Parts)).

%% @doc The intervals of local session `Id', `Ms' each, from the snapshots of
%% {@link ferrotrace_intervals}: `{ok, StartMs, [{OffsetMs, LengthMs, [{MFA, Bin}]}]}' (also
%% called on each node of a cluster session).
-spec intervals(ferrotrace_tracer:session_id(), pos_integer()) ->
          {ok, non_neg_integer(), [{non_neg_integer(), non_neg_integer(), [{mfa(), binary()}]}]}
              | {error, term()}.
intervals(Id, Ms) ->
    ferrotrace_intervals:session(Id, Ms).

%% @doc An interval log of `[{OffsetMs, LengthMs, [{MFA, Bin}]}]' from `StartMs'.
-spec hdr_log_intervals(non_neg_integer(), [{non_neg_integer(), non_neg_integer(), [{mfa(), binary()}]}]) ->
          {ok, binary()} | {error, term()}.
hdr_log_intervals(Start, Intervals) ->
    ferrotrace_tracer:hdr_log(Start, [{Offset, Length, [{name(MFA), B} || {MFA, B} <- Hs]}
                                      || {Offset, Length, Hs} <- Intervals]).

%% @doc An interval log of merged histograms `[{MFA, Bytes}]' over one interval.
-spec hdr_log(non_neg_integer(), non_neg_integer(), [{mfa(), binary()}]) -> {ok, binary()} | {error, term()}.
hdr_log(StartMs, ElapsedMs, Histograms) ->
    Tagged = [{name(MFA), Bytes} || {MFA, Bytes} <- Histograms],
    ferrotrace_tracer:hdr_log(StartMs, [{0, ElapsedMs, Tagged}]).

folded(Paths) -> ferrotrace_names:folded(Paths).

name(MFA) -> ferrotrace_names:tag(MFA).

%% @doc Sums the folded lines of several exports (a cluster's nodes): equal paths add.
-spec merge_folded([binary()]) -> binary().
merge_folded(Texts) ->
    ferrotrace_cluster_merge:folded(Texts).

%% @doc The JSON document of a summary. Field names are those of {@link ferrotrace:summary/1}
%% (stable: new fields may be added, existing ones keep their name and meaning), plus
%% `"format": "ferrotrace.summary"' and `"version": 1'. Values: times in ns (ms where the
%% key ends in `_ms' or `_at'), `null' for `undefined'; a function is written `"m:f/a"' with
%% its atoms as they are (`"m:-f/1-lc$^0/1-0-/1"': exact for programs, where the report and
%% the other exports name it `m:f/1 (comprehension)')
%% (in `calls[].mfa' and `loops'), pids and other terms as Erlang prints them (a cluster
%% session's `id' is its pid, so a string; its `by_node' is an object keyed by node name).
-spec json_document(map()) -> map().
json_document(Summary) ->
    (jsonable(Summary))#{format => <<"ferrotrace.summary">>, version => 1}.

%% A session's captures (`capture'), if it took any, under `captures'.
with_captures([_ | _] = Captures, Summary) -> Summary#{captures => Captures};
with_captures(_, Summary) -> Summary.

%% @doc A term with only maps, lists, numbers, atoms and binaries: `{M, F, A}' becomes
%% `<<"m:f/a">>', a pid or another term its printed form, a string-like list stays a list
%% of integers.
-spec jsonable(term()) -> term().
jsonable(Map) when is_map(Map) ->
    maps:from_list([{json_key(K), jsonable(V)} || {K, V} <- maps:to_list(Map)]);
jsonable(List) when is_list(List) ->
    [jsonable(E) || E <- List];
jsonable({M, F, A}) when is_atom(M), is_atom(F), is_integer(A) ->
    iolist_to_binary(io_lib:format("~ts:~ts/~b", [atom_to_binary(M), atom_to_binary(F), A]));
jsonable(X) when is_atom(X); is_number(X) ->
    X;
jsonable(X) when is_binary(X) ->
    case unicode:characters_to_binary(X) of
        B when is_binary(B) -> B;
        _ -> base64:encode(X)
    end;
jsonable(X) ->
    iolist_to_binary(io_lib:format("~0p", [X])).

json_key(K) when is_atom(K); is_binary(K) -> K;
json_key(K) -> iolist_to_binary(io_lib:format("~0p", [K])).


