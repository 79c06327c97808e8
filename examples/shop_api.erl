%%% @doc The demo shop's request handlers: three request types with different latencies.
%%% `get_item/1' is fast (an ETS read), `search/1' does real work that varies with the query,
%%% `checkout/1' goes through the inventory server, waits on a "payment provider" (a sleep
%%% with occasional slow outliers), and sometimes fails.
-module(shop_api).

-export([get_item/1, search/1, checkout/1]).

-define(ITEMS, 500).

%% @doc Looks an item up.
-spec get_item(pos_integer()) -> {ok, non_neg_integer()} | not_found.
get_item(Item) ->
    shop_inventory:lookup(Item).

%% @doc Finds items whose number contains `Query' as digits; work grows with the query, and
%% doubles on the slow path (`shop_demo:slow_path(true)').
-spec search(pos_integer()) -> [pos_integer()].
search(Query) ->
    Needle = integer_to_list(Query),
    Scan = ?ITEMS * (1 + Query rem 4) * persistent_term:get({shop_api, slow_path}, 1),
    Matches = [I || I <- lists:seq(1, Scan),
                    string:find(integer_to_list(I), Needle) =/= nomatch],
    lists:sublist(lists:sort(Matches), 20).

%% @doc Reserves an item and "charges" for it: usually a few ms, 1 in 100 takes 50 ms, and
%% 1 in 20 fails with an error.
-spec checkout(pos_integer()) -> ok | {error, out_of_stock | not_found}.
checkout(Item) ->
    case shop_inventory:reserve(Item rem ?ITEMS + 1, 1) of
        ok -> charge(rand:uniform(100));
        Error -> Error
    end.

charge(Roll) when Roll =< 5 -> error(payment_declined);
charge(Roll) when Roll =:= 100 -> timer:sleep(50);
charge(Roll) -> timer:sleep(1 + Roll rem 3).
