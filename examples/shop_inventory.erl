%%% @doc The demo shop's inventory: a gen_server owning an ETS table of items and stock.
%%% Reads go to ETS directly; reservations are serialised through the server, which is what
%%% makes checkout latency grow under load.
-module(shop_inventory).
-behaviour(gen_server).

-export([start_link/1, lookup/1, reserve/2]).
-export([init/1, handle_call/3, handle_cast/2]).

-define(TABLE, shop_inventory_items).

%% @doc Starts the server with `Items' items in stock.
-spec start_link(pos_integer()) -> {ok, pid()}.
start_link(Items) ->
    gen_server:start_link({local, ?MODULE}, ?MODULE, Items, []).

%% @doc The stock of an item, read from ETS.
-spec lookup(pos_integer()) -> {ok, non_neg_integer()} | not_found.
lookup(Item) ->
    case ets:lookup(?TABLE, Item) of
        [{Item, Stock}] -> {ok, Stock};
        [] -> not_found
    end.

%% @doc Reserves `Count' of an item, through the server.
-spec reserve(pos_integer(), pos_integer()) -> ok | {error, out_of_stock | not_found}.
reserve(Item, Count) ->
    gen_server:call(?MODULE, {reserve, Item, Count}).

%% @private
-spec init(pos_integer()) -> {ok, pos_integer()}.
init(Items) ->
    ?TABLE = ets:new(?TABLE, [named_table, public, {read_concurrency, true}]),
    true = ets:insert(?TABLE, [{I, 1000} || I <- lists:seq(1, Items)]),
    {ok, Items}.

%% @private
-spec handle_call({reserve, pos_integer(), pos_integer()}, gen_server:from(), pos_integer()) ->
          {reply, ok | {error, out_of_stock | not_found}, pos_integer()}.
handle_call({reserve, Item, Count}, _From, Items) ->
    %% A little bookkeeping work per reservation.
    _ = erlang:phash2(lists:seq(1, 200)),
    Reply = case ets:lookup(?TABLE, Item) of
                [{Item, Stock}] when Stock >= Count ->
                    true = ets:insert(?TABLE, {Item, Stock - Count}),
                    ok;
                [{Item, _}] ->
                    %% Restock, so the demo runs for ever.
                    true = ets:insert(?TABLE, {Item, 1000}),
                    {error, out_of_stock};
                [] ->
                    {error, not_found}
            end,
    {reply, Reply, Items}.

%% @private
-spec handle_cast(term(), pos_integer()) -> {noreply, pos_integer()}.
handle_cast(_Message, Items) ->
    {noreply, Items}.
