%%% @doc A socket-wrapper-like module for ferrotrace's loop analysis tests: its functions
%%% wait (for a message, on a server, on a real TCP socket), while the loops that call them
%%% live in `ft_wrapper_reader'.
-module(ft_wrapper_sock).

-export([recv/1, far_recv/1, tcp_recv/1, ask/2, serve/0, double/1]).

%% @doc Waits for `{data, D}' and returns `D' (the socket argument is not used).
-spec recv(term()) -> term().
recv(_Socket) ->
    receive {data, D} -> D end.

%% @doc Waits one module further away, in `ft_wrapper_inner:wait/0'.
-spec far_recv(term()) -> term().
far_recv(_Socket) ->
    D = ft_wrapper_inner:wait(),
    D.

%% @doc A line from a passive TCP socket (`{packet, line}'), or `closed'.
-spec tcp_recv(gen_tcp:socket()) -> binary() | closed.
tcp_recv(Socket) ->
    case gen_tcp:recv(Socket, 0) of
        {ok, Line} -> Line;
        {error, closed} -> closed
    end.

%% @doc Asks the server `Server' (see {@link serve/0}) for `X * 2' and waits for the answer.
-spec ask(pid(), integer()) -> integer().
ask(Server, X) ->
    Server ! {ask, self(), X},
    receive {answer, A} -> A end.

%% @doc A server answering {@link ask/2}.
-spec serve() -> no_return().
serve() ->
    receive {ask, From, X} -> From ! {answer, X * 2}, serve() end.

%% @doc Does not wait.
-spec double(integer()) -> integer().
double(X) -> 2 * X.
