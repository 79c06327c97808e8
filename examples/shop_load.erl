%%% @doc Load for the demo shop: client processes issuing a mix of requests for ever.
-module(shop_load).

-export([start/1]).

%% @doc Starts the inventory and `Clients' client processes; returns their pids.
-spec start(pos_integer()) -> [pid()].
start(Clients) ->
    {ok, _} = shop_inventory:start_link(500),
    [spawn_link(fun client/0) || _ <- lists:seq(1, Clients)].

client() ->
    _ = try request(rand:uniform(10))
        catch error:payment_declined -> declined
        end,
    client().

request(Roll) when Roll =< 6 -> shop_api:get_item(rand:uniform(600));
request(Roll) when Roll =< 9 -> shop_api:search(rand:uniform(99));
request(_) -> shop_api:checkout(rand:uniform(1000)).
