%%% @doc A known change for the compare suite: `run(N, Phase)' calls outer/1 N times; outer/1
%%% calls up/1, down/1 and same/1. From `before' to `after', up/1 sleeps 20 ms instead of 1
%%% (slower), down/1 1 ms instead of 20 (faster), same/1 and outer/1 keep their time. 20, not
%%% 6: on a loaded 2-core machine a 1 ms sleep took several, and the change in own time the
%%% differential flame graph colours by (red against blue) came out faint on one side.
-module(ft_compare_target).

-export([run/2, outer/1, up/1, down/1, same/1]).

-type phase() :: before | 'after'.

-spec run(non_neg_integer(), phase()) -> ok.
run(0, _Phase) -> ok;
run(N, Phase) ->
    ok = ?MODULE:outer(Phase),
    run(N - 1, Phase).

-spec outer(phase()) -> ok.
outer(Phase) ->
    ok = ?MODULE:up(Phase),
    ok = ?MODULE:down(Phase),
    _ = ?MODULE:same(Phase),
    ok.

-spec up(phase()) -> ok.
up(before) -> timer:sleep(1);
up('after') -> timer:sleep(20).

-spec down(phase()) -> ok.
down(before) -> timer:sleep(20);
down('after') -> timer:sleep(1).

-spec same(phase()) -> integer().
same(_) -> lists:sum(lists:seq(1, 100)).
