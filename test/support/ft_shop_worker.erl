%%% @doc ft_shop's worker: a gen_server whose requests call work/1, in itself or in a
%%% process it spawns for the request (as a server that spawns a process per request).
-module(ft_shop_worker).
-behaviour(gen_server).

-export([start_link/1, work/1, call/2, call_spawned/2, spin/2]).
-export([init/1, handle_call/3, handle_cast/2]).

-spec start_link({local, atom()} | none) -> {ok, pid()}.
start_link(none) -> gen_server:start_link(?MODULE, [], []);
start_link(Name) -> gen_server:start_link(Name, ?MODULE, [], []).

%% @doc The function the suite traces.
-spec work(integer()) -> integer().
work(N) -> N + 1.

%% @doc `N' calls of work/1 in server `Server'.
-spec call(pid() | atom(), non_neg_integer()) -> ok.
call(Server, N) -> gen_server:call(Server, {work, N}).

%% @doc `N' calls of work/1 in a process `Server' spawns for the request.
-spec call_spawned(pid() | atom(), non_neg_integer()) -> ok.
call_spawned(Server, N) -> gen_server:call(Server, {spawned, N}).

%% @doc Calls of work/1 in server `Server' for `Ms' milliseconds: how many (a benchmark's
%% measure of its speed).
-spec spin(pid() | atom(), pos_integer()) -> non_neg_integer().
spin(Server, Ms) -> gen_server:call(Server, {spin, Ms}, Ms + 60000).

-spec init([]) -> {ok, []}.
init([]) -> {ok, []}.

-spec handle_call(term(), gen_server:from(), []) -> {reply, ok | non_neg_integer(), []} | {noreply, []}.
handle_call({work, N}, _From, State) ->
    _ = [work(I) || I <- lists:seq(1, N)],
    {reply, ok, State};
handle_call({spin, Ms}, _From, State) ->
    {reply, spin_until(erlang:monotonic_time(millisecond) + Ms, 0), State};
handle_call({spawned, N}, From, State) ->
    _ = spawn(fun() -> _ = [work(I) || I <- lists:seq(1, N)], gen_server:reply(From, ok) end),
    {noreply, State}.

spin_until(Until, N) ->
    _ = work(N),
    case N rem 100 =:= 0 andalso erlang:monotonic_time(millisecond) >= Until of
        true -> N + 1;
        false -> spin_until(Until, N + 1)
    end.

-spec handle_cast(term(), []) -> {noreply, []}.
handle_cast(_, State) -> {noreply, State}.
