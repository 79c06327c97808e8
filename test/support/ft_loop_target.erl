%%% @doc Server loops for ferrotrace's stack-growth tests: a receive loop that tail-calls
%%% itself, one that tail-calls through a helper, one that loops through a fun (invisible
%%% to the static analysis), and an ordinary gen_server.
-module(ft_loop_target).
-behaviour(gen_server).

-export([server/0, mutual/1, handle/2, fun_loop/1, work/1, start_server/0, ping/2,
         client/3, tick/2]).
-export([init/1, handle_call/3, handle_cast/2]).

%% @doc `server() -> receive {go, From} -> From ! ok, server() end.'
-spec server() -> no_return().
server() ->
    receive
        {go, From} -> From ! ok, server();
        stop -> exit(normal)
    end.

%% @doc A loop through a second function: mutual/1 -> handle/2 -> mutual/1, all tail calls.
-spec mutual(non_neg_integer()) -> no_return().
mutual(N) ->
    receive
        {go, From} -> handle(From, N);
        stop -> exit(normal)
    end.

%% @doc The second half of the mutual loop.
-spec handle(pid(), non_neg_integer()) -> no_return().
handle(From, N) ->
    From ! ok,
    ?MODULE:mutual(N + 1).

%% @doc A loop that tail-calls itself through a fun held in a variable.
-spec fun_loop(fun((fun()) -> no_return())) -> no_return().
fun_loop(Next) ->
    receive
        {go, From} -> From ! ok, work(1), Next(Next);
        stop -> exit(normal)
    end.

%% @doc A traced function called in each iteration of the loops.
-spec work(integer()) -> integer().
work(X) -> X + 1.

%% @doc Starts an unregistered gen_server answering `ping'.
-spec start_server() -> {ok, pid()}.
start_server() -> gen_server:start(?MODULE, [], []).

%% @doc Calls the gen_server `N' times.
-spec ping(pid(), non_neg_integer()) -> ok.
ping(_Server, 0) -> ok;
ping(Server, N) -> pong = gen_server:call(Server, ping, infinity), ping(Server, N - 1).

%% @doc A client loop with no `receive' of its own: it waits in gen_server:call/3. After
%% `N' calls it sends its stack size (every frame a traced iteration kept) to `To'.
-spec client(pid(), non_neg_integer(), pid()) -> ok.
client(_Server, 0, To) ->
    To ! {stack, self(), element(2, erlang:process_info(self(), stack_size))},
    ok;
client(Server, N, To) ->
    pong = gen_server:call(Server, ping, infinity),
    client(Server, N - 1, To).

%% @doc A periodic worker: it waits in timer:sleep/1 between iterations (through a helper
%% of its module), then sends its stack size to `To'.
-spec tick(non_neg_integer(), pid()) -> ok.
tick(0, To) ->
    To ! {stack, self(), element(2, erlang:process_info(self(), stack_size))},
    ok;
tick(N, To) ->
    pause(),
    tick(N - 1, To).

pause() -> timer:sleep(0).

%% @private
-spec init([]) -> {ok, []}.
init([]) -> {ok, []}.

%% @private
-spec handle_call(ping, gen_server:from(), []) -> {reply, pong, []}.
handle_call(ping, _From, State) -> {reply, pong, State}.

%% @private
-spec handle_cast(term(), []) -> {noreply, []}.
handle_cast(_Message, State) -> {noreply, State}.
