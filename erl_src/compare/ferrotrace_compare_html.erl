%%% @doc The html page of a comparison: `ferrotrace:export({A, B}, html, File)'.
%%%
%%% One self-contained file (no network: its Content-Security-Policy allows none), as the
%%% single-session page: the comparison's header, its table side by side (A and B of each
%%% figure, sortable by a click on a header), the functions of one side only, the notes, and
%%% a differential flame graph drawn by the `inferno' crate from the `collapsed' pair export:
%%% each frame as wide as its time in B, coloured by the change of its own time from A to B
%%% (red slower, blue faster, the deeper the larger the change; inferno's differential
%%% colours, as Brendan Gregg's), with a legend.
-module(ferrotrace_compare_html).

-export([page/3]).

%% @doc The page of comparison `C' and its differential folded lines (`<<>>': none).
-spec page(ferrotrace_compare:comparison(), binary(), map()) -> {ok, binary()} | {error, term()}.
page(C = #{rows := Rows, test := #{tail := Q}}, Folded, Options) ->
    Header = ferrotrace_compare_report:format(C#{rows := [], only_a := [], only_b := [], notes := []},
                                              Options#{width => 160}),
    {Flame, FlameNote} = flame(Folded),
    Body = [<<"<h1>ferrotrace: what changed from A to B</h1>\n<pre class=\"head\">">>,
            escape(header_only(Header)), <<"</pre>\n">>,
            table(Rows, Q),
            only(<<"Only in A">>, maps:get(only_a, C)),
            only(<<"Only in B">>, maps:get(only_b, C)),
            notes(maps:get(notes, C)),
            <<"<h2>Differential flame graph</h2>\n">>,
            legend(),
            case Flame of
                none -> [<<"<p class=\"note\">">>, escape(FlameNote), <<"</p>\n">>];
                Svg -> [<<"<p class=\"note\">">>, escape(FlameNote), <<"</p>\n<iframe class=\"flame\" title=\"differential flame graph\" "
                                                                     "sandbox=\"allow-scripts\" src=\"data:image/svg+xml;base64,">>,
                        base64:encode(Svg), <<"\" height=\"">>, integer_to_binary(svg_height(Svg)), <<"\"></iframe>\n">>]
            end],
    Flames = case Flame of none -> 0; _ -> 1 end,
    {ok, iolist_to_binary(
           [<<"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
              "<meta name=\"viewport\" content=\"width=device-width\">"
              "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
              "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; frame-src data:\">"
              "<title>ferrotrace: A to B</title>\n<style>">>, style(), <<"</style></head>\n<body data-rows=\"">>,
            integer_to_binary(length(Rows)), <<"\" data-flames=\"">>, integer_to_binary(Flames), <<"\">\n">>,
            Body, <<"<script>">>, script(), <<"</script>\n</body></html>\n">>])}.

%% The report's header lines, without the table's "no function" line.
header_only(Text) ->
    Lines = string:split(unicode:characters_to_binary(Text), <<"\n">>, all),
    iolist_to_binary(lists:join(<<"\n">>, [L || L <- Lines, L =/= <<>>, L =/= <<"no function timed on both sides">>])).

flame(<<>>) ->
    {none, <<"no call path on either side (a window keeps none; sessions of another tool's patterns keep them "
             "only for the functions traced): nothing to draw">>};
flame(Folded) ->
    case drawn(Folded) of
        {ok, Svg} ->
            Lines = length(binary:matches(Folded, <<"\n">>)),
            {Svg, iolist_to_binary(io_lib:format("~b call paths; click a frame to zoom, Ctrl-F to search", [Lines]))};
        {error, Reason} when is_binary(Reason) ->
            {none, Reason};
        {error, Reason} ->
            {none, iolist_to_binary(io_lib:format("no flame graph: ~0tp", [Reason]))}
    end.

%% Drawn by the NIF; where it is not loaded (the bundle's escript, `ferrotrace compare
%% --html'), the page says so.
drawn(Folded) ->
    try ferrotrace_tracer:flamegraph_svg(Folded, <<"own time by call path, A to B (widths: B)">>)
    catch error:undef -> {error, <<"the flame graph is drawn by ferrotrace's NIF, not loaded here: export the pair "
                                   "from a node (ferrotrace:export({A, B}, html, File))">>}
    end.

svg_height(Svg) ->
    case re:run(Svg, "<svg[^>]*\\sheight=\"([0-9]+)\"", [{capture, all_but_first, list}]) of
        {match, [H]} -> list_to_integer(H) + 20;
        nomatch -> 600
    end.

legend() ->
    <<"<div class=\"legend\"><span class=\"swatch slower\"></span> more own time in B (slower)"
      " <span class=\"swatch same\"></span> about the same"
      " <span class=\"swatch faster\"></span> less own time in B (faster)"
      " &mdash; each frame is as wide as its time in B; its colour deepens with the change of its own time"
      " from A to B, the largest change the deepest (inferno's differential colours). A path only in A has"
      " no width in B and does not show.</div>\n">>.

table([], _Q) ->
    <<"<p class=\"note\">no function timed on both sides</p>\n">>;
table(Rows, Q) ->
    TailName = list_to_binary(string:to_upper(tail_name(Q))),
    Heads = [{<<"function">>, <<"FUNCTION">>, text}, {<<"calls_a">>, <<"CALLS A">>, num}, {<<"calls_b">>, <<"CALLS B">>, num},
             {<<"p50_a">>, <<"P50 A">>, num}, {<<"p50_b">>, <<"P50 B">>, num}, {<<"p50_x">>, <<"x">>, num},
             {<<"tail_a">>, <<TailName/binary, " A">>, num}, {<<"tail_b">>, <<TailName/binary, " B">>, num},
             {<<"tail_x">>, <<"x">>, num}, {<<"total">>, <<"TOTAL +/-">>, num}, {<<"own">>, <<"OWN +/-">>, num},
             {<<"verdict">>, <<"VERDICT">>, text}],
    [<<"<table class=\"compare\"><thead><tr>">>,
     [[<<"<th data-key=\"">>, K, <<"\" data-type=\"">>, atom_to_binary(T), <<"\">">>, H, <<"</th>">>] || {K, H, T} <- Heads],
     <<"</tr></thead><tbody>\n">>,
     [row(R, Q) || R <- Rows],
     <<"</tbody></table>\n">>].

row(R = #{name := Name, count := {CA, CB}, p50 := {PA, PB}, tail_q := {TA, TB}, change := D, own_change := O}, Q) ->
    Verdict = ferrotrace_compare_report:verdict_text(R, Q),
    Class = verdict_class(R),
    [<<"<tr class=\"fn ">>, Class, <<"\">">>,
     cell(Name, Name), cell(CA, integer_to_binary(CA)), cell(CB, integer_to_binary(CB)),
     cell(PA, ns(PA)), cell(PB, ns(PB)), cell(ratio_value(PA, PB), ratio(PA, PB)),
     cell(TA, ns(TA)), cell(TB, ns(TB)), cell(ratio_value(TA, TB), ratio(TA, TB)),
     cell(round(D), signed(D)), cell(case O of undefined -> undefined; _ -> round(O) end, signed(O)),
     cell(list_to_binary(Verdict), list_to_binary(Verdict)), <<"</tr>\n">>].

verdict_class(#{verdict := slower}) -> <<"slower">>;
verdict_class(#{verdict := faster}) -> <<"faster">>;
verdict_class(#{tail := slower}) -> <<"slower">>;
verdict_class(#{tail := faster}) -> <<"faster">>;
verdict_class(_) -> <<"same">>.

%% A cell with its sort value (`data-v'; empty for none, sorted last).
cell(undefined, Text) -> [<<"<td data-v=\"\">">>, escape(Text), <<"</td>">>];
cell(V, Text) when is_number(V) -> [<<"<td data-v=\"">>, number(V), <<"\">">>, escape(Text), <<"</td>">>];
cell(V, Text) -> [<<"<td data-v=\"">>, escape(V), <<"\">">>, escape(Text), <<"</td>">>].

number(V) when is_integer(V) -> integer_to_binary(V);
number(V) -> float_to_binary(V, [{decimals, 4}]).

ns(undefined) -> <<"-">>;
ns(V) -> list_to_binary(ferrotrace_text:format_ns(V)).

signed(undefined) -> <<"-">>;
signed(D) when D >= 0 -> iolist_to_binary(["+", ferrotrace_text:format_ns(round(D))]);
signed(D) -> iolist_to_binary(["-", ferrotrace_text:format_ns(round(-D))]).

ratio_value(A, B) when is_integer(A), is_integer(B), A > 0 -> B / A;
ratio_value(_, _) -> undefined.

ratio(A, B) ->
    case ratio_value(A, B) of
        undefined -> <<"-">>;
        R -> float_to_binary(R, [{decimals, 2}])
    end.

tail_name(Q) ->
    Text = float_to_list(Q * 100, [{decimals, 3}, compact]),
    "p" ++ lists:filter(fun(C) -> C =/= $. end, string:trim(string:trim(Text, trailing, "0"), trailing, ".")).

only(_Title, []) ->
    [];
only(Title, Functions) ->
    [<<"<h2>">>, Title, <<"</h2>\n<ul class=\"only\">">>,
     [[<<"<li>">>, escape(N), <<" &mdash; ">>, integer_to_binary(C), <<" calls, ">>, ns(T), <<" in all</li>">>]
      || #{name := N, count := C, total := T} <- Functions],
     <<"</ul>\n">>].

notes([]) -> [];
notes(Notes) -> [<<"<ul class=\"notes\">">>, [[<<"<li>">>, escape(N), <<"</li>">>] || N <- Notes], <<"</ul>\n">>].

escape(Text) ->
    lists:foldl(fun({From, To}, T) -> binary:replace(T, From, To, [global]) end,
                unicode:characters_to_binary(Text),
                [{<<"&">>, <<"&amp;">>}, {<<"<">>, <<"&lt;">>}, {<<">">>, <<"&gt;">>}, {<<"\"">>, <<"&quot;">>}]).

style() ->
    <<"body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}"
      "pre.head{background:#f6f6f6;padding:.6em;white-space:pre-wrap}"
      "table.compare{border-collapse:collapse;font-variant-numeric:tabular-nums}"
      "table.compare th{cursor:pointer;text-align:right;padding:.2em .5em;border-bottom:2px solid #999;white-space:nowrap}"
      "table.compare th:first-child,table.compare td:first-child,table.compare th:last-child,table.compare td:last-child{text-align:left}"
      "table.compare td{text-align:right;padding:.15em .5em;border-bottom:1px solid #ddd}"
      "tr.slower td:last-child{color:#b00;font-weight:bold}tr.faster td:last-child{color:#05b;font-weight:bold}"
      "th.asc::after{content:' \\25B2'}th.desc::after{content:' \\25BC'}"
      ".note{color:#555}.legend{margin:.5em 0}"
      ".swatch{display:inline-block;width:1.2em;height:.9em;vertical-align:middle;border:1px solid #888}"
      ".swatch.slower{background:rgb(255,90,90)}.swatch.same{background:rgb(250,250,250)}.swatch.faster{background:rgb(90,90,255)}"
      "iframe.flame{width:100%;border:0}">>.

%% Sorting by a click on a header (again: the other way), and the page's account of what
%% it drew for the browser test (body's data-rendered).
script() ->
    <<"(function(){var t=document.querySelector('table.compare');"
      "if(t){var ths=t.querySelectorAll('thead th');"
      "Array.prototype.forEach.call(ths,function(th,i){th.addEventListener('click',function(){"
      "var desc=!th.classList.contains('desc');"
      "Array.prototype.forEach.call(ths,function(h){h.classList.remove('asc','desc');});"
      "th.classList.add(desc?'desc':'asc');var num=th.getAttribute('data-type')==='num';"
      "var body=t.tBodies[0],rows=Array.prototype.slice.call(body.rows);"
      "rows.sort(function(a,b){var x=a.cells[i].getAttribute('data-v'),y=b.cells[i].getAttribute('data-v');"
      "if(x===''&&y==='')return 0;if(x==='')return 1;if(y==='')return -1;"
      "var c=num?(parseFloat(x)-parseFloat(y)):(x<y?-1:x>y?1:0);return desc?-c:c;});"
      "rows.forEach(function(r){body.appendChild(r);});});});}"
      "document.body.setAttribute('data-rendered',JSON.stringify({rows:t?t.tBodies[0].rows.length:0,"
      "flames:document.querySelectorAll('iframe.flame').length,legend:document.querySelectorAll('.legend').length}));"
      "})();">>.
