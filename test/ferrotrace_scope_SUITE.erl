%%% @doc Sessions on the processes an operator means (`pids' naming them, ferrotrace_scope),
%%% on a real supervision tree (ft_shop: two supervisors under the top one, a
%%% simple_one_for_one of workers, a registered worker) with outsiders calling the same
%%% function. Every check is a count of calls made, exact: no timing.
%%% - each_form: each way to name processes traces them and nothing else.
%%% - follows_spawns: what a traced worker spawns is traced (`follow => spawns', the default
%%%   for names), or not (`none'); `first_spawn' passes the flags to the first spawn only.
%%% - follows_restarts: a supervisor's restarted child is traced.
%%% - report_states_the_scope: the report's header names the scope and its processes.
%%% - refusals: a name not registered (with the near one), not a supervisor, an application
%%%   not running, a dead pid, a malformed pid text, a bad `follow': each refused, nothing
%%%   started.
%%% - disjoint_sessions: two sessions on two subtrees at once, each counting its own.
-module(ferrotrace_scope_SUITE).

-include("support/ft_ct.hrl").

-export([init_per_testcase/2, end_per_testcase/2]).
-export([each_form/1, follows_spawns/1, follows_restarts/1, report_states_the_scope/1, refusals/1,
         disjoint_sessions/1]).

-define(WORK, {ft_shop_worker, work, 1}).
-define(LONG, 60000).

suite() ->
    [{timetrap, {minutes, 3}}, {ct_hooks, [{ft_ct, [ft_shop, ft_shop_worker]}]}].

all() ->
    [each_form, follows_spawns, follows_restarts, report_states_the_scope, refusals, disjoint_sessions].

-spec init_per_testcase(atom(), config()) -> config().
init_per_testcase(_Case, Config) ->
    ok = ft_shop:start(),
    Orders = ft_shop:add_orders(10),
    %% Fifty outsiders: servers of the same code, outside the application's tree.
    Outsiders = [begin {ok, P} = ft_shop_worker:start_link(none), unlink(P), P end || _ <- lists:seq(1, 50)],
    [{orders, Orders}, {outsiders, Outsiders} | Config].

-spec end_per_testcase(atom(), config()) -> ok.
end_per_testcase(_Case, Config) ->
    _ = [exit(P, kill) || P <- proplists:get_value(outsiders, Config, [])],
    ok = ft_shop:stop().

%%--------------------------------------------------------------------------------------

-spec each_form(config()) -> ok.
each_form(Config) ->
    Orders = proplists:get_value(orders, Config),
    Outsiders = proplists:get_value(outsiders, Config),
    Router = whereis(ft_shop_router),
    Front = [P || {_, P, worker, _} <- supervisor:which_children(ft_shop_front_sup)],
    yes = global:register_name(ft_scope_global, Router),
    Forms = [{ft_shop_router, [Router]},
             {{global, ft_scope_global}, [Router]},
             {{via, global, ft_scope_global}, [Router]},
             {pid_to_list(Router), [Router]},
             {[ft_shop_router, hd(Orders)], [Router, hd(Orders)]},
             {{children, ft_shop_orders_sup}, Orders},
             {{children, ft_shop_sup}, [Router | Front ++ Orders]},
             {{application, ft_shop}, [Router | Front ++ Orders]},
             {{initial_call, {ft_shop_worker, init, 1}}, [Router | Front ++ Orders ++ Outsiders]},
             {[hd(Outsiders), {children, ft_shop_front_sup}], [hd(Outsiders) | Front]}],
    Everyone = [Router | Front ++ Orders ++ Outsiders],
    lists:foreach(fun({Form, Traced}) ->
                          {ok, S} = ferrotrace:calls(?WORK, #{pids => Form, duration => ?LONG}),
                          %% Each server calls work/1 a number of times its own.
                          Calls = lists:zip(Everyone, lists:seq(1, length(Everyone))),
                          _ = [ok = ft_shop_worker:call(P, N) || {P, N} <- Calls],
                          Expected = lists:sum([N || {P, N} <- Calls, lists:member(P, Traced)]),
                          #{calls := Counted, scope := Scope} = ferrotrace:summary(S),
                          ct:pal("~p: ~p calls expected, ~p", [Form, Expected, Counted]),
                          ?assertMatch([#{mfa := ?WORK, count := Expected}], Counted),
                          %% The supervisors are traced too with a subtree or an application.
                          ?assert(maps:get(at_start, Scope) >= length(Traced)),
                          ok = ferrotrace:release(S)
                  end, Forms),
    _ = global:unregister_name(ft_scope_global),
    ok.

-spec follows_spawns(config()) -> ok.
follows_spawns(_Config) ->
    Router = whereis(ft_shop_router),
    Counted = fun(Options) ->
                      {ok, S} = ferrotrace:calls(?WORK, Options#{duration => ?LONG}),
                      ok = ft_shop_worker:call_spawned(Router, 7),
                      ok = ft_shop_worker:call_spawned(Router, 5),
                      ok = ft_shop_worker:call(Router, 3),
                      #{calls := Calls} = ferrotrace:summary(S),
                      ok = ferrotrace:release(S),
                      case Calls of [#{count := N}] -> N; [] -> 0 end
              end,
    %% A name follows spawns by default; a pid does not.
    ?assertEqual(15, Counted(#{pids => ft_shop_router})),
    ?assertEqual(15, Counted(#{pids => ft_shop_router, follow => spawns})),
    ?assertEqual(3, Counted(#{pids => ft_shop_router, follow => none})),
    ?assertEqual(3, Counted(#{pids => [Router]})),
    ?assertEqual(15, Counted(#{pids => [Router], follow => spawns})),
    %% The first spawn only: 7 of the first request, not 5 of the second.
    ?assertEqual(10, Counted(#{pids => ft_shop_router, follow => first_spawn})).

-spec follows_restarts(config()) -> ok.
follows_restarts(_Config) ->
    {ok, S} = ferrotrace:calls(?WORK, #{pids => {children, ft_shop_sup}, duration => ?LONG}),
    Old = whereis(ft_shop_router),
    [Front1 | _] = [P || {_, P, worker, _} <- supervisor:which_children(ft_shop_front_sup)],
    exit(Old, kill),
    exit(Front1, kill),
    ok = ft_ct:poll(fun() -> is_pid(whereis(ft_shop_router)) andalso whereis(ft_shop_router) =/= Old end, 10000),
    ok = ft_ct:poll(fun() ->
                            [P || {_, P, worker, _} <- supervisor:which_children(ft_shop_front_sup),
                                  P =:= Front1 orelse not is_pid(P)] =:= []
                    end, 10000),
    Restarted = [whereis(ft_shop_router) | [P || {_, P, worker, _} <- supervisor:which_children(ft_shop_front_sup)]],
    _ = [ok = ft_shop_worker:call(P, 4) || P <- Restarted],
    %% A new order worker, started after the start: a spawn of its supervisor.
    [New] = ft_shop:add_orders(1),
    ok = ft_shop_worker:call(New, 6),
    ?assertMatch(#{calls := [#{mfa := ?WORK, count := 18}]}, ferrotrace:summary(S)),
    ok = ferrotrace:release(S).

-spec report_states_the_scope(config()) -> ok.
report_states_the_scope(_Config) ->
    {ok, S} = ferrotrace:calls(?WORK, #{pids => {children, ft_shop_orders_sup}, duration => ?LONG}),
    ok = ft_shop_worker:call(hd(ft_shop:add_orders(2)), 2),
    {_, Report} = ft_ct:capture(fun() -> ferrotrace:report(S) end),
    ct:pal("~ts", [Report]),
    %% The orders' supervisor and its 10 workers at the start; 12 workers now.
    ?assertMatch({match, _}, re:run(Report, "processes: \\{children,ft_shop_orders_sup\\} and what they spawn, "
                                            "11 at the start,\\s+13 now")),
    ok = ferrotrace:stop(S),
    {_, Stopped} = ft_ct:capture(fun() -> ferrotrace:report(S) end),
    ct:pal("~ts", [Stopped]),
    ?assertMatch({match, _}, re:run(Stopped, "11 at the start,\\s+13 at the end")),
    ok = ferrotrace:release(S).

-spec refusals(config()) -> ok.
refusals(_Config) ->
    {Dead, Ref} = spawn_monitor(fun() -> ok end),
    receive {'DOWN', Ref, process, Dead, _} -> ok end,
    Before = ft_ct:sessions(),
    Refused = fun(Pids, Options) ->
                      {error, {bad_option, {Key, _, Hint}}} = Error =
                          ferrotrace:calls(?WORK, Options#{pids => Pids, duration => ?LONG}),
                      ct:pal("~p: ~p", [Pids, Error]),
                      ?assert(is_binary(Hint)),
                      ?assertMatch([_ | _], ferrotrace_text:explain(Error)),
                      {Key, Hint}
              end,
    {pids, Typo} = Refused(ft_shop_ruoter, #{}),
    ?assertMatch({match, _}, re:run(Typo, "did you mean ft_shop_router\\?")),
    {pids, NotSup} = Refused({children, ft_shop_router}, #{}),
    ?assertMatch({match, _}, re:run(NotSup, "is not a supervisor")),
    {pids, NotApp} = Refused({application, ft_shpo}, #{}),
    ?assertMatch({match, _}, re:run(NotApp, "not a running application: did you mean ft_shop\\?")),
    {pids, Library} = Refused({application, stdlib}, #{}),
    ?assertMatch({match, _}, re:run(Library, "library application")),
    {pids, DeadHint} = Refused([whereis(ft_shop_router), Dead], #{}),
    ?assertMatch({match, _}, re:run(DeadHint, "is not alive")),
    {pids, _} = Refused("<0.notapid.0>", #{}),
    {pids, _} = Refused("ft_shop_router", #{}),
    {pids, _} = Refused({initial_call, {ft_shop_worker, nowhere, 9}}, #{}),
    {pids, _} = Refused({via, no_such_module_xyz, name}, #{}),
    {pids, _} = Refused([ft_shop_router | improper], #{}),
    {follow, _} = Refused(ft_shop_router, #{follow => always}),
    ?assertEqual(Before, ft_ct:sessions()).

-spec disjoint_sessions(config()) -> ok.
disjoint_sessions(Config) ->
    Orders = proplists:get_value(orders, Config),
    Front = [P || {_, P, worker, _} <- supervisor:which_children(ft_shop_front_sup)],
    {ok, A} = ferrotrace:calls(?WORK, #{pids => {children, ft_shop_orders_sup}, duration => ?LONG}),
    {ok, B} = ferrotrace:calls(?WORK, #{pids => {children, ft_shop_front_sup}, duration => ?LONG}),
    _ = [ok = ft_shop_worker:call(P, 3) || P <- Orders],
    _ = [ok = ft_shop_worker:call(P, 5) || P <- Front],
    ?assertMatch(#{calls := [#{count := 30}]}, ferrotrace:summary(A)),
    ?assertMatch(#{calls := [#{count := 10}]}, ferrotrace:summary(B)),
    %% On OTP 25 and 26 a process has one tracer: a scope overlapping a running one is
    %% refused, naming the holder; on 27+ each session has its own.
    Overlap = ferrotrace:calls(?WORK, #{pids => {children, ft_shop_sup}, duration => ?LONG}),
    case ferrotrace_backend:trace_sessions() of
        true -> {ok, C} = Overlap, ok = ferrotrace:release(C);
        false -> ?assertMatch({error, {already_traced, _, _, _}}, Overlap)
    end,
    ok = ferrotrace:release(A),
    ok = ferrotrace:release(B).
