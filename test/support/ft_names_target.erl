%%% @doc Compiler-generated functions for ferrotrace_names' tests: two list comprehensions,
%%% a binary comprehension and two funs in `work/1'.
-module(ft_names_target).

-export([work/1]).

-spec work([byte()]) -> term().
work(L) ->
    A = [X + 1 || X <- L],
    B = << <<X>> || X <- L >>,
    C = [X || X <- L, X > 1],
    F = fun(X) -> X * 2 end,
    G = fun(X, Y) -> X + Y end,
    {A, B, C, lists:map(F, L), lists:foldl(G, 0, L)}.
