%%% @doc The innermost module of a wait two modules away from a reader loop:
%%% `ft_wrapper_reader:far_loop/1' -> `ft_wrapper_sock:far_recv/1' -> `wait/0' here.
-module(ft_wrapper_inner).

-export([wait/0]).

%% @doc Waits for `{data, D}' and returns `D'.
-spec wait() -> term().
wait() ->
    receive {data, D} -> D end.
