%% Known call trees for the export and cluster suites: outer/1 calls mid/1 twice, mid/1
%% calls leaf/1 once; leaf/1 sleeps.
-module(ft_export_target).

-export([outer/1, mid/1, leaf/1, run/2]).

-spec outer(non_neg_integer()) -> ok.
outer(Ms) ->
    ok = ?MODULE:mid(Ms),
    ok = ?MODULE:mid(Ms).

-spec mid(non_neg_integer()) -> ok.
mid(Ms) ->
    ?MODULE:leaf(Ms).

-spec leaf(non_neg_integer()) -> ok.
leaf(0) -> ok;
leaf(Ms) -> timer:sleep(Ms).

%% @doc Calls outer(Ms) N times.
-spec run(non_neg_integer(), non_neg_integer()) -> ok.
run(0, _Ms) -> ok;
run(N, Ms) ->
    ok = ?MODULE:outer(Ms),
    run(N - 1, Ms).
