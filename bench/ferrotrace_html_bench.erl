%%% @doc `make bench-html': the html export of a 1,000-function session, its size and how
%%% long a headless chromium takes to draw it (test/export/browser.py prints the page's own
%%% clock, from its script's start to the last plot drawn, and chromium's wall time). The
%%% targets: at most 3 MB, drawn in at most 2 s; printed, not asserted.
%%%
%%% A module of 1,000 exported functions is compiled from forms: 200 chains of five, each
%%% function calling the next of its chain, so that the flame graph has 200 call paths five
%%% deep. Four processes call the chains for 5 s in a session with `args', `recent => 1000'
%%% and `intervals => 100' (every part of the page has data).
-module(ferrotrace_html_bench).

-export([main/0]).

-define(FUNCTIONS, 1000).
-define(CHAIN, 5).
-define(TARGET, ft_html_bench_target).

%% @doc Runs the benchmark and prints its figures.
-spec main() -> ok.
main() ->
    ok = load_target(),
    Out = filename:absname("bench/out/html-1000.html"),
    {ok, S} = ferrotrace:calls({?TARGET, '_', '_'}, #{duration => 60000, args => true, recent => 1000,
                                                     intervals => 100, max_functions => ?FUNCTIONS}),
    Workers = [spawn_link(fun() -> work(I) end) || I <- lists:seq(1, 4)],
    timer:sleep(5000),
    [begin unlink(W), exit(W, kill) end || W <- Workers],
    ok = ferrotrace:stop(S),
    #{calls := Calls} = ferrotrace:summary(S),
    T0 = erlang:monotonic_time(millisecond),
    ok = ferrotrace:export(S, html, Out),
    Took = erlang:monotonic_time(millisecond) - T0,
    io:format("html export of ~b functions: ~b bytes (target at most 3 MB: 3145728), written in ~b ms~n",
              [length(Calls), filelib:file_size(Out), Took]),
    Cmd = "python3 test/export/browser.py " ++ Out ++ " --rows " ++ integer_to_list(length(Calls))
        ++ " --expect histogram,over_time,flame --min-colours 16 2>&1; echo rc=$?",
    io:format("~ts", [os:cmd(Cmd)]),
    ok = ferrotrace:release(S).

%% Calls the chains' first functions, round and round.
work(I) ->
    [?TARGET:(name(C * ?CHAIN))(I) || C <- lists:seq(0, ?FUNCTIONS div ?CHAIN - 1)],
    work(I + 1).

name(K) -> list_to_atom("f" ++ integer_to_list(K)).

%% f<K>(X) -> f<K+1>(X + 1) within a chain; the chain's last returns X.
load_target() ->
    Functions = [function(K) || K <- lists:seq(0, ?FUNCTIONS - 1)],
    Forms = [{attribute, 1, module, ?TARGET},
             {attribute, 2, export, [{name(K), 1} || K <- lists:seq(0, ?FUNCTIONS - 1)]} | Functions],
    {ok, ?TARGET, Bin} = compile:forms(Forms, []),
    {module, ?TARGET} = code:load_binary(?TARGET, "ft_html_bench_target.erl", Bin),
    ok.

function(K) ->
    X = {var, 3, 'X'},
    Body = case (K + 1) rem ?CHAIN of
               0 -> X;
               _ -> {call, 3, {remote, 3, {atom, 3, ?TARGET}, {atom, 3, name(K + 1)}},
                     [{op, 3, '+', X, {integer, 3, 1}}]}
           end,
    {function, 3, name(K), 1, [{clause, 3, [X], [], [Body]}]}.
