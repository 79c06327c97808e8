%%% @doc A small shop traced by ferrotrace_trees_SUITE and the trees bench: a gen_server whose
%%% `handle_call/3' validates an order, looks its items up (through a fun, as real code
%%% does), fetches its stock and prices it (through `apply/3'). One order in 100 takes the
%%% slow path: `fetch/1' waits `SlowMs'.
-module(ft_trees_target).
-behaviour(gen_server).

-export([start/1, stop/1, order/2, bulk/2]).
-export([init/1, handle_call/3, handle_cast/2]).
-export([validate/1, lookup/1, fetch/2, stock/1, price/1]).
-export([deep/1, level/2]).

%% @doc A shop whose slow orders wait `SlowMs' in fetch/2.
-spec start(non_neg_integer()) -> {ok, pid()}.
start(SlowMs) -> gen_server:start(?MODULE, SlowMs, []).

%% @doc Stops the shop.
-spec stop(pid()) -> ok.
stop(Shop) -> gen_server:stop(Shop).

%% @doc Order `N' (of 5 items): slow if `N rem 100 =:= 0'.
-spec order(pid(), pos_integer()) -> {ok, pos_integer(), number()}.
order(Shop, N) -> gen_server:call(Shop, {order, N}, infinity).

%% @doc An order of `Items' items, each looked up.
-spec bulk(pid(), pos_integer()) -> {ok, pos_integer(), number()}.
bulk(Shop, Items) -> gen_server:call(Shop, {bulk, Items}, infinity).

%% @private
-spec init(non_neg_integer()) -> {ok, non_neg_integer()}.
init(SlowMs) -> {ok, SlowMs}.

%% @private
-spec handle_call({order | bulk, pos_integer()}, term(), non_neg_integer()) ->
          {reply, {ok, pos_integer(), number()}, non_neg_integer()}.
handle_call({order, N}, _From, SlowMs) ->
    {reply, serve(N, 5, case N rem 100 of 0 -> SlowMs; _ -> 0 end), SlowMs};
handle_call({bulk, Items}, _From, SlowMs) ->
    {reply, serve(1, Items, 0), SlowMs}.

%% @private
-spec handle_cast(term(), State) -> {noreply, State}.
handle_cast(_Msg, State) -> {noreply, State}.

serve(N, Items, WaitMs) ->
    ok = ?MODULE:validate(N),
    Found = lists:map(fun(I) -> ?MODULE:lookup(N * 10 + I) end, lists:seq(1, Items)),
    Stock = ?MODULE:fetch(Found, WaitMs),
    {ok, N, apply(?MODULE, price, [Stock])}.

%% @doc Checks an order number.
-spec validate(integer()) -> ok.
validate(N) when is_integer(N) -> ok.

%% @doc An item's record.
-spec lookup(integer()) -> {item, integer()}.
lookup(I) -> {item, I}.

%% @doc The stock of `Items', after waiting `WaitMs' (the slow path).
-spec fetch([{item, integer()}], non_neg_integer()) -> [integer()].
fetch(Items, WaitMs) ->
    timer:sleep(WaitMs),
    ?MODULE:stock(Items).

%% @doc The stock of `Items'.
-spec stock([{item, integer()}]) -> [integer()].
stock(Items) -> [I || {item, I} <- Items].

%% @doc The price of the stock.
-spec price([integer()]) -> number().
price(Stock) -> lists:sum(Stock) * 1.5.

%% @doc A call tree 5 deep: deep/1 calls level/2 four levels down (the bench's root).
-spec deep(integer()) -> integer().
deep(X) -> ?MODULE:level(4, X).

%% @doc One level of deep/1's tree.
-spec level(non_neg_integer(), integer()) -> integer().
level(0, X) -> X + 1;
level(Depth, X) -> ?MODULE:level(Depth - 1, X) + 1.
