%%% @doc A small OTP application for ferrotrace_scope_SUITE: a real supervision tree to name
%%% processes by. `ft_shop_sup' (one_for_one) holds the registered worker `ft_shop_router',
%%% `ft_shop_front_sup' (one_for_one: two workers) and `ft_shop_orders_sup'
%%% (simple_one_for_one of ft_shop_worker). This module is the application callback and the
%%% three supervisors' callback (init/1 told which).
-module(ft_shop).
-behaviour(application).
-behaviour(supervisor).

-export([start/0, stop/0, add_orders/1, start/2, stop/1, init/1]).

%% @doc Loads and starts the application (its spec given here: the suite has no `.app' file).
-spec start() -> ok.
start() ->
    _ = application:load({application, ft_shop,
                          [{description, "ferrotrace's test shop"}, {vsn, "1"}, {modules, [ft_shop, ft_shop_worker]},
                           {registered, [ft_shop_sup, ft_shop_router]}, {applications, [kernel, stdlib]},
                           {mod, {ft_shop, []}}]}),
    ok = application:start(ft_shop).

%% @doc Stops and unloads it.
-spec stop() -> ok.
stop() ->
    _ = application:stop(ft_shop),
    _ = application:unload(ft_shop),
    ok.

%% @doc `N' order workers started under `ft_shop_orders_sup': their pids.
-spec add_orders(non_neg_integer()) -> [pid()].
add_orders(N) ->
    [begin {ok, Pid} = supervisor:start_child(ft_shop_orders_sup, []), Pid end || _ <- lists:seq(1, N)].

-spec start(application:start_type(), term()) -> {ok, pid()}.
start(_Type, _Args) ->
    supervisor:start_link({local, ft_shop_sup}, ?MODULE, top).

-spec stop(term()) -> ok.
stop(_State) ->
    ok.

-spec init(top | front | orders) -> {ok, {supervisor:sup_flags(), [supervisor:child_spec()]}}.
init(top) ->
    {ok, {#{strategy => one_for_one, intensity => 100, period => 1},
          [#{id => router, start => {ft_shop_worker, start_link, [{local, ft_shop_router}]}},
           #{id => front, start => {supervisor, start_link, [{local, ft_shop_front_sup}, ?MODULE, front]},
             type => supervisor},
           #{id => orders, start => {supervisor, start_link, [{local, ft_shop_orders_sup}, ?MODULE, orders]},
             type => supervisor}]}};
init(front) ->
    {ok, {#{strategy => one_for_one, intensity => 100, period => 1},
          [#{id => {front, N}, start => {ft_shop_worker, start_link, [none]}} || N <- [1, 2]]}};
init(orders) ->
    {ok, {#{strategy => simple_one_for_one, intensity => 100, period => 1},
          [#{id => order, start => {ft_shop_worker, start_link, [none]}}]}}.
