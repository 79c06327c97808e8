%% compare/2,3 and save/2 on real sessions (issue 58): a known change found (ft_compare_target:
%% up/1 six times slower, down/1 six times faster), saved files read back as the sessions
%% were, windows of one session, a cluster session, the refusals, the pair exports read by
%% inferno and by a headless chromium. The verdicts on noise and on small changes are the
%% EUnit module's (figures by hand) and `make compare-bench''s (20 runs, printed).
-module(ferrotrace_compare_SUITE).

-include("support/ft_ct.hrl").

-export([changes_found/1, saved_files/1, windows/1, cluster_sessions/1, refusals/1,
         collapsed_drawn_by_inferno/1, html_in_a_browser/1]).

-define(SPEC, {ft_compare_target, '_', '_'}).
-define(CALLS, 30).

suite() ->
    [{timetrap, {minutes, 5}},
     {ct_hooks, [{ft_ct, [ft_compare_target, {distribution, ferrotrace_compare_ct},
                          {export_tools, [collapsed_drawn_by_inferno]}]}]}].

all() ->
    [changes_found, saved_files, windows, cluster_sessions, refusals, collapsed_drawn_by_inferno,
     html_in_a_browser].

%% A stopped session of `?CALLS' outer calls in `Phase'.
session(Phase) ->
    {ok, S} = ferrotrace:calls(?SPEC, #{duration => 60000}),
    ok = ft_compare_target:run(?CALLS, Phase),
    ok = ferrotrace:stop(S),
    S.

tmp(Config, Name) ->
    filename:join(proplists:get_value(priv_dir, Config), Name).

row(#{rows := Rows}, F) ->
    [R] = [R || R = #{mfa := {<<"ft_compare_target">>, G, _}} <- Rows, G =:= F],
    R.

%% up/1 slower, down/1 faster, both first (the rows a test calls changed), outer/1 (the
%% same sleeps) unchanged; the printed table names them; counts and the summary's
%% percentiles agree.
-spec changes_found(config()) -> ok.
changes_found(_Config) ->
    A = session(before),
    B = session('after'),
    {ok, C} = ferrotrace:compare(A, B, #{as => map}),
    #{rows := [R1, R2 | _], only_a := [], only_b := []} = C,
    ?assertEqual([<<"down">>, <<"up">>], lists:sort([F || #{mfa := {_, F, _}} <- [R1, R2]])),
    Up = #{verdict := slower, count := {?CALLS, ?CALLS}} = row(C, <<"up">>),
    #{verdict := faster} = row(C, <<"down">>),
    #{verdict := unchanged} = row(C, <<"outer">>),
    #{verdict := not_timed} = row(C, <<"run">>),
    #{calls := Calls} = ferrotrace:summary(B),
    [#{p50 := P50, p99 := P99}] = [X || X = #{mfa := {_, up, 1}} <- Calls],
    #{p50 := {_, P50}, tail_q := {_, P99}} = Up,
    #{a := #{kind := calls, source := <<"session">>, id := A, compensated := true}} = C,
    Text = ferrotrace:compare(A, B, #{as => text, width => 132}),
    [?assertMatch({_, _}, binary:match(Text, T)) || T <- [<<"FUNCTION">>, <<"ft_compare_target:up/1">>, <<"slower">>]],
    ok = ferrotrace:compare(A, B),
    ok.

%% Sessions saved to files compare as the sessions do; a running session saves what it has;
%% a file against a session works.
-spec saved_files(config()) -> ok.
saved_files(Config) ->
    A = session(before),
    B = session('after'),
    [FA, FB] = [tmp(Config, N) || N <- ["a.json", "b.json"]],
    ok = ferrotrace:save(A, FA),
    ok = ferrotrace:save(B, FB),
    {ok, Sessions} = ferrotrace:compare(A, B, #{as => map}),
    {ok, Files} = ferrotrace:compare(FA, FB, #{as => map}),
    Strip = fun(#{rows := Rows}) -> Rows end,
    ?assertEqual(Strip(Sessions), Strip(Files)),
    #{a := #{source := <<"file">>, file := FileA}} = Files,
    ?assertEqual(list_to_binary(FA), FileA),
    {ok, Mixed} = ferrotrace:compare(FA, B, #{as => map}),
    ?assertEqual(Strip(Sessions), Strip(Mixed)),
    {ok, Json} = file:read_file(FA),
    {ok, #{<<"format">> := <<"ferrotrace.saved">>, <<"version">> := 1, <<"functions">> := Fs}} = ferrotrace_json:decode(Json),
    ?assert(length(Fs) >= 4),
    %% Running: saved as it is now.
    {ok, Running} = ferrotrace:calls(?SPEC, #{duration => 60000}),
    ok = ft_compare_target:run(3, before),
    FR = tmp(Config, "running.json"),
    ok = ferrotrace:save(Running, FR),
    {ok, #{a := #{status := running}}} = ferrotrace:compare(FR, A, #{as => map}),
    ok = ferrotrace:stop(Running).

%% Two windows of one session with intervals: the calls before and after a change; a window
%% holds no own time. Windows outside the session, or of a session without intervals, refused.
-spec windows(config()) -> ok.
windows(_Config) ->
    {ok, S} = ferrotrace:calls(?SPEC, #{duration => 60000, intervals => 100}),
    ok = ft_compare_target:run(40, before),
    timer:sleep(300),                          % an idle gap: no interval holds both phases
    #{elapsed_ms := Middle} = ferrotrace:summary(S),
    ok = ft_compare_target:run(40, 'after'),
    ok = ferrotrace:stop(S),
    #{elapsed_ms := End} = ferrotrace:summary(S),
    {ok, C} = ferrotrace:compare({S, {0, Middle}}, {S, {Middle, End + 100}}, #{as => map, min_calls => 10}),
    #{verdict := slower, own := undefined} = row(C, <<"up">>),
    #{verdict := faster, count := {CA, CB}} = row(C, <<"down">>),
    ?assert(CA =< 40 andalso CB =< 40 andalso CA + CB >= 60),
    #{a := #{window := {0, ToA}}, b := #{window := {FromB, _}}} = C,
    ?assert(ToA =< Middle andalso FromB >= Middle),
    ?assertMatch({error, {window_outside, {_, _}, _}}, ferrotrace:compare({S, {End + 5000, End + 6000}}, S)),
    ?assertMatch({error, {bad_window, _, _}}, ferrotrace:compare({S, {500, 100}}, S)),
    {ok, Plain} = ferrotrace:calls(?SPEC, #{duration => 60000, intervals => none}),
    ok = ferrotrace:stop(Plain),
    ?assertMatch({error, {needs, intervals, _}}, ferrotrace:compare({Plain, {0, 100}}, S)),
    ok.

%% A cluster session (one peer) against another, and saved: the nodes' figures added.
-spec cluster_sessions(config()) -> ok.
cluster_sessions(Config) ->
    {ok, _Peer, Node} = ft_ct:peer(#{name => peer:random_name(ft_compare)}),
    Cluster = fun(Phase) ->
                      {ok, C} = ferrotrace:calls(?SPEC, #{nodes => [Node], duration => 60000}),
                      ok = erpc:call(Node, ft_compare_target, run, [?CALLS, Phase], 30000),
                      ok = ferrotrace:stop(C),
                      C
              end,
    A = Cluster(before),
    B = Cluster('after'),
    {ok, C} = ferrotrace:compare(A, B, #{as => map}),
    #{verdict := slower, count := {?CALLS, ?CALLS}} = row(C, <<"up">>),
    #{a := #{source := <<"cluster">>, nodes := [NodeName]}} = C,
    ?assertEqual(atom_to_binary(Node), NodeName),
    File = tmp(Config, "cluster.json"),
    ok = ferrotrace:save(A, File),
    {ok, C2} = ferrotrace:compare(File, B, #{as => map}),
    ?assertEqual(maps:get(rows, C), maps:get(rows, C2)),
    ok.

%% Bad input: each a clear error, with a hint.
-spec refusals(config()) -> ok.
refusals(Config) ->
    A = session(before),
    B = session(before),
    ok = ferrotrace:release(B),
    ?assertMatch({error, {released, B, _}}, ferrotrace:compare(A, B)),
    {ok, Raw} = ferrotrace:session(#{duration => 60000}),
    ?assertMatch({error, {different_kinds, calls, raw, _}}, ferrotrace:compare(A, Raw)),
    ok = ferrotrace:release(Raw),
    {ok, P} = ferrotrace:processes([procs], #{duration => 60000}),
    ?assertMatch({error, {no_functions, b, _}}, ferrotrace:compare(A, P)),
    ok = ferrotrace:release(P),
    Export = tmp(Config, "summary.json"),
    ok = ferrotrace:export(A, json, Export),
    ?assertMatch({error, {not_a_saved_session, _, _}}, ferrotrace:compare(Export, A)),
    Future = tmp(Config, "future.json"),
    ok = file:write_file(Future, <<"{\"format\": \"ferrotrace.saved\", \"version\": 7}">>),
    ?assertMatch({error, {future_version, _, 7, _}}, ferrotrace:compare(A, Future)),
    ?assertMatch({error, {no_such_session, no_session_named_so}}, ferrotrace:save(no_session_named_so, tmp(Config, "x.json"))),
    [?assertMatch([_ | _], ferrotrace:explain(E)) || E <- [ferrotrace:compare(A, Future), ferrotrace:compare(Export, A)]],
    ok.

%% The differential folded form, read by inferno: an SVG with red (slower) and blue
%% (faster) frames and the functions' names.
-spec collapsed_drawn_by_inferno(config()) -> ok.
collapsed_drawn_by_inferno(Config) ->
    A = session(before),
    B = session('after'),
    Folded = tmp(Config, "diff.folded"),
    Svg = tmp(Config, "diff.svg"),
    ok = ferrotrace:export({A, B}, collapsed, Folded),
    {ok, Lines} = file:read_file(Folded),
    [Up] = [L || L <- binary:split(Lines, <<"\n">>, [global]), binary:match(L, <<"up/1 ">>) =/= nomatch],
    [_, CountA, CountB] = string:lexemes(binary_to_list(Up), " "),
    ?assert(list_to_integer(CountB) > 2 * list_to_integer(CountA)),
    Inferno = filename:join([proplists:get_value(tools, Config), "bin", "inferno-flamegraph"]),
    {"0", _} = ft_export_tools:run(Inferno ++ " " ++ Folded ++ " > " ++ Svg),
    {ok, Drawn} = file:read_file(Svg),
    Fills = [[list_to_integer(X) || X <- C]
             || [_ | C] <- element(2, re:run(Drawn, "fill=\"rgb\\(([0-9]+),([0-9]+),([0-9]+)\\)\"",
                                            [global, {capture, all, list}]))],
    ?assert(lists:any(fun([R, _, Bl]) -> R > Bl + 20 end, Fills)),
    ?assert(lists:any(fun([R, _, Bl]) -> Bl > R + 20 end, Fills)),
    [?assertMatch({_, _}, binary:match(Drawn, N)) || N <- [<<"ft_compare_target:up/1">>, <<"ft_compare_target:down/1">>]],
    ok.

%% The pair's html page in a headless chromium (test/export/browser_compare.py).
-spec html_in_a_browser(config()) -> ok | {skip, string()}.
html_in_a_browser(Config) ->
    case os:find_executable("chromium") of
        false ->
            {skip, "chromium is not installed (make export-tools installs it)"};
        _ ->
            A = session(before),
            B = session('after'),
            File = tmp(Config, "compare.html"),
            ok = ferrotrace:export({A, B}, html, File),
            {ok, #{rows := Rows}} = ferrotrace:compare(A, B, #{as => map}),
            {ok, Page} = file:read_file(File),
            [?assertMatch({_, _}, binary:match(Page, T)) || T <- [<<"<table class=\"compare\">">>, <<"slower">>, <<"faster">>]],
            TestDir = filename:dirname(filename:dirname(proplists:get_value(source, ft_export_tools:module_info(compile)))),
            Script = filename:join([TestDir, "export", "browser_compare.py"]),
            {Rc, Out} = ft_export_tools:run(lists:flatten(
                                              io_lib:format("python3 ~s ~s --rows ~b --names ft_compare_target:up/1,ft_compare_target:down/1",
                                                            [Script, File, length(Rows)]))),
            ct:pal("~ts", [Out]),
            ?assertEqual("0", Rc, Out),
            ?assertMatch({error, {bad_option, {colour, _, _}}}, ferrotrace:export({A, B}, {html, #{colour => red}})),
            ok
    end.
