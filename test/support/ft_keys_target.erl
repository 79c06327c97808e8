%%% @doc Functions traced by ferrotrace_keys_SUITE: an order checkout keyed by tier, and two
%%% callers of it.
-module(ft_keys_target).

-export([checkout/1, from_web/1, from_batch/1, tail_caller/1]).

%% @doc Returns the order's id.
-spec checkout(#{tier := atom(), id := term()}) -> {ok, term()}.
checkout(#{id := Id}) ->
    {ok, Id}.

%% @doc Checks `N' orders out, one call site.
-spec from_web(non_neg_integer()) -> ok.
from_web(0) -> ok;
from_web(N) ->
    {ok, _} = ?MODULE:checkout(#{tier => gold, id => N}),
    from_web(N - 1).

%% @doc Checks `N' orders out, another call site.
-spec from_batch(non_neg_integer()) -> ok.
from_batch(0) -> ok;
from_batch(N) ->
    {ok, _} = ?MODULE:checkout(#{tier => silver, id => N}),
    from_batch(N - 1).

%% @doc Checks one order out in a tail call: the VM knows no caller.
-spec tail_caller(term()) -> {ok, term()}.
tail_caller(Id) ->
    ?MODULE:checkout(#{tier => bronze, id => Id}).
