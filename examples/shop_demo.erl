%%% @doc The ferrotrace demo: what an operator types in a remote shell of the shop node.
%%% `demo.sh' starts the shop node under load, then calls `attach/1' from a second node.
-module(shop_demo).

-export([start_shop/0, serve_shop/1, slow_path/1, attach/1, operator_session/0]).

%% @doc On the shop node: starts the service and its load, and keeps them running.
-spec start_shop() -> ok.
start_shop() ->
    _ = spawn(fun() -> _ = shop_load:start(8), receive stop -> ok end end),
    ok.

%% @doc On the shop node (`make metrics-demo'): the shop under load and a session on its
%% API and inventory left on (a 1 % overhead budget), served to Prometheus on `Port'; the
%% session belongs to a process that lives as long as the node.
-spec serve_shop(inet:port_number()) -> ok.
serve_shop(Port) ->
    ok = start_shop(),
    Self = self(),
    _ = spawn(fun() ->
                      Started = ferrotrace:calls([{shop_api, '_', '_'}, {shop_inventory, '_', '_'}],
                                                 #{duration => infinity, owner => self(), max_overhead => 0.01,
                                                   metrics => #{port => Port}}),
                      Self ! {served, Started},
                      receive stop -> ok end
              end),
    receive
        {served, {ok, S}} -> io:format("session ~p served on port ~b~n", [S, Port]);
        {served, {error, _} = Error} -> io:format("not served: ~p~n", [Error]), halt(1)
    end.
%% @doc Switches the shop's slow path on or off: search/1 scans twice the items (what a
%% comparison between two sessions should find, see the README).
-spec slow_path(boolean()) -> ok.
slow_path(On) ->
    persistent_term:put({shop_api, slow_path}, case On of true -> 2; false -> 1 end).

%% @doc On the operator node: runs `operator_session/0' on `Node', in a process there that
%% lives for the whole session (it owns the session, as a remote shell would), with its
%% output coming back here.
-spec attach(node()) -> ok.
attach(Node) ->
    pong = net_adm:ping(Node),
    ok = erpc:call(Node, ?MODULE, operator_session, [], 60000).

%% @doc The operator's commands, echoed as in a shell, then run.
-spec operator_session() -> ok.
operator_session() ->
    io:format("~n=== remote shell on ~p ===~n", [node()]),
    Spec = [{shop_api, get_item, 1}, {shop_api, search, 1}, {shop_api, checkout, 1},
            {shop_inventory, '_', '_'}],
    io:format("1> {ok, S} = ferrotrace:calls(~p, #{duration => 5000}).~n", [Spec]),
    {ok, S} = ferrotrace:calls(Spec, #{duration => 5000}),
    io:format("2> timer:sleep(3000).~n"),
    timer:sleep(3000),
    io:format("3> ferrotrace:report(S).~n"),
    ok = ferrotrace:report(S),
    io:format("4> ferrotrace:stop(S).~n"),
    ok = ferrotrace:stop(S),
    %% The same node seen as processes: who sends to whom, how big, GC pauses, exits.
    io:format("5> {ok, P} = ferrotrace:processes([messages, gc, procs], #{duration => 2000}).~n"),
    {ok, P} = ferrotrace:processes([messages, gc, procs], #{duration => 2000}),
    io:format("6> timer:sleep(1500), ferrotrace:report(P).~n"),
    timer:sleep(1500),
    ok = ferrotrace:report(P),
    ok = ferrotrace:stop(P),
    %% Latency per key: search/1's work grows with Query rem 4; key each call by it.
    KeySpec = {shop_api, search, [{['$1'], [], [{message, {'rem', '$1', 4}}]}]},
    io:format("7> {ok, K} = ferrotrace:calls(~p, #{duration => 2000}).~n", [KeySpec]),
    {ok, K} = ferrotrace:calls(KeySpec, #{duration => 2000}),
    io:format("8> timer:sleep(1500), ferrotrace:report(K).~n"),
    timer:sleep(1500),
    ok = ferrotrace:report(K),
    ok = ferrotrace:stop(K),
    %% One page to attach to a ticket: plots, the flame graph, the slow calls' arguments.
    HtmlOptions = #{duration => 3000, intervals => 200, args => true, recent => 200, also => [messages, gc]},
    io:format("9> {ok, H} = ferrotrace:calls(Spec, ~p).~n", [HtmlOptions]),
    {ok, H} = ferrotrace:calls(Spec, HtmlOptions),
    io:format("10> timer:sleep(2500), ferrotrace:export(H, html, \"examples/out/shop.html\").~n"),
    timer:sleep(2500),
    ok = ferrotrace:export(H, html, "examples/out/shop.html"),
    io:format("ok: open examples/out/shop.html in a browser~n"),
    ok = ferrotrace:stop(H).
