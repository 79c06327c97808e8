%%% @doc Reader loops whose wait lies in another module (`ft_wrapper_sock', one module away
%%% or two, or `gen_tcp:recv/2' behind it), the shape of a real server's connection readers,
%%% and recursive helpers on either side of the line the loop analysis draws.
-module(ft_wrapper_reader).

-export([loop/1, far_loop/1, tcp_loop/2, handle/1, walk/3, sum/2, dispatch/1]).

%% @doc Reads from the wrapper, handles what it read, and tail-calls itself; `stop' ends it.
-spec loop(term()) -> ok.
loop(Socket) ->
    case ft_wrapper_sock:recv(Socket) of
        stop -> ok;
        Data -> _ = handle(Data), loop(Socket)
    end.

%% @doc The same with the wait two modules away.
-spec far_loop(term()) -> ok.
far_loop(Socket) ->
    case ft_wrapper_sock:far_recv(Socket) of
        stop -> ok;
        Data -> _ = handle(Data), far_loop(Socket)
    end.

%% @doc Reads lines from a TCP socket until it closes; `Owner' gets `{synced, self()}' for
%% each line `sync'.
-spec tcp_loop(gen_tcp:socket(), pid()) -> ok.
tcp_loop(Socket, Owner) ->
    case ft_wrapper_sock:tcp_recv(Socket) of
        closed -> ok;
        <<"sync\n">> -> Owner ! {synced, self()}, tcp_loop(Socket, Owner);
        Line -> _ = handle(Line), tcp_loop(Socket, Owner)
    end.

%% @doc The handler: replies to `{sync, From}', otherwise a little work. Not on a cycle: it
%% keeps its timing.
-spec handle(term()) -> term().
handle({sync, From}) -> From ! {synced, self()};
handle(N) when is_integer(N) -> N + 1;
handle(Line) when is_binary(Line) -> byte_size(Line);
handle(Other) -> Other.

%% @doc A tail-recursive walk that waits on a server for each element: counted as a loop.
-spec walk(pid(), [integer()], integer()) -> integer().
walk(_Server, [], Acc) -> Acc;
walk(Server, [X | Xs], Acc) -> walk(Server, Xs, Acc + ft_wrapper_sock:ask(Server, X)).

%% @doc A tail-recursive walk that only computes (also in another module): not a loop, it
%% keeps its timing.
-spec sum([integer()], integer()) -> integer().
sum([], Acc) -> Acc;
sum([X | Xs], Acc) -> sum(Xs, Acc + ft_wrapper_sock:double(X) + length(lists:seq(1, 3))).

%% @doc Waits, then tail-calls through a fun: the analysis cannot see the callee, and takes
%% it as a loop.
-spec dispatch(fun((fun()) -> term())) -> term().
dispatch(Next) ->
    receive {go, From} -> From ! ok, Next(Next) end.
