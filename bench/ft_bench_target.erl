%% The traced function of the ferrotrace benchmark: an exported call that does almost nothing,
%% so what the benchmark measures is the cost of tracing it.
-module(ft_bench_target).

-export([f/1]).

-spec f(integer()) -> integer().
f(X) -> X + 1.
