%%% @doc Work for the overhead budget's tests and benchmarks (ferrotrace_budget_SUITE,
%%% make busy), written as real code is: worker processes loop through orders, each built,
%%% priced with a fold and a fun, taxed through `apply', encoded to a binary and decoded
%%% again, with a gen_server call every 50 orders. Each finished order adds one to a
%%% counter: the work's throughput.
%%%
%%% The load comes in the shapes a server's does: long-lived workers ({@link start/1}),
%%% workers replaced by fresh ones every window ({@link start/2} `fresh'), a process born
%%% per request of ten orders as cowboy and Phoenix spawn one (`per_request'), a batch job
%%% whose functions nothing called before (`batch': orders checked line by line), and
%%% workers paced to a rate that a burst multiplies (`paced').
-module(ft_budget_work).
-behaviour(gen_server).

-export([start/1, start/2, stop/1, done/1, throughput/2]).
-export([tax/1, check_line/2]).
-export([init/1, handle_call/3, handle_cast/2]).

-type work() :: #{counter := counters:counters_ref(), workers := [pid()], server := pid()}.
-type shape() :: steady | fresh | per_request | batch | {paced, OrdersPerSecond :: pos_integer()}.
-export_type([work/0, shape/0]).

%% How often `fresh' workers are replaced (ms).
-define(FRESH_MS, 250).
%% Orders a `per_request' process makes.
-define(REQUEST_ORDERS, 10).

%% @doc Starts a ledger server and `Workers' workers looping through orders.
-spec start(pos_integer()) -> work().
start(Workers) ->
    start(Workers, steady).

%% @doc Starts a ledger server and `Workers' workers in `Shape' (see the module doc); each
%% `paced' worker makes its orders per second in steps of a millisecond.
-spec start(pos_integer(), shape()) -> work().
start(Workers, Shape) ->
    Counter = counters:new(1, [write_concurrency]),
    {ok, Server} = gen_server:start(?MODULE, [], []),
    Pids = [spawn(fun() -> run(Shape, Server, Counter, I * 1000000) end) || I <- lists:seq(1, Workers)],
    #{counter => Counter, workers => Pids, server => Server}.

run(steady, Server, Counter, I) ->
    loop(Server, Counter, I);
run(batch, Server, Counter, I) ->
    batch(Server, Counter, I);
run(fresh, Server, Counter, I) ->
    %% A worker of its own, killed and replaced every ?FRESH_MS (linked: it dies with this
    %% driver when the work stops).
    process_flag(trap_exit, true),
    fresh(Server, Counter, I, none);
run(per_request, Server, Counter, I) ->
    per_request(Server, Counter, I);
run({paced, PerSecond}, Server, Counter, I) ->
    paced(Server, Counter, I, max(1, PerSecond div 1000), erlang:monotonic_time(millisecond)).

fresh(Server, Counter, I, Old) ->
    _ = Old =:= none orelse begin exit(Old, kill), receive {'EXIT', Old, _} -> ok end end,
    New = spawn_link(fun() -> loop(Server, Counter, I) end),
    timer:sleep(?FRESH_MS),
    fresh(Server, Counter, I + 1000, New).

%% A process a request of ?REQUEST_ORDERS orders (about 400 calls: a small HTTP request's
%% worth), one after another: the acceptor waits for each.
per_request(Server, Counter, I) ->
    {Pid, Ref} = spawn_monitor(fun() -> _ = [order_done(Server, Counter, I + K) || K <- lists:seq(1, ?REQUEST_ORDERS)] end),
    receive {'DOWN', Ref, process, Pid, _} -> ok end,
    per_request(Server, Counter, I + ?REQUEST_ORDERS).

%% `PerMs' orders each millisecond, then a wait for the next one.
paced(Server, Counter, I, PerMs, Ms) ->
    _ = [order_done(Server, Counter, I + K) || K <- lists:seq(0, PerMs - 1)],
    Now = erlang:monotonic_time(millisecond),
    _ = Now =< Ms andalso timer:sleep(Ms + 1 - Now),
    paced(Server, Counter, I + PerMs, PerMs, max(Ms + 1, Now)).

%% @doc Stops the workers and the server.
-spec stop(work()) -> ok.
stop(#{workers := Pids, server := Server}) ->
    _ = [exit(P, kill) || P <- Pids],
    exit(Server, kill),
    ok.

%% @doc Orders finished so far.
-spec done(work()) -> non_neg_integer().
done(#{counter := Counter}) ->
    counters:get(Counter, 1).

%% @doc Orders finished per second over the next `Ms' milliseconds.
-spec throughput(work(), pos_integer()) -> non_neg_integer().
throughput(Work, Ms) ->
    {Before, T0} = {done(Work), erlang:monotonic_time(microsecond)},
    timer:sleep(Ms),
    {After, T1} = {done(Work), erlang:monotonic_time(microsecond)},
    (After - Before) * 1000000 div (T1 - T0).

loop(Server, Counter, I) ->
    order_done(Server, Counter, I),
    loop(Server, Counter, I + 1).

order_done(Server, Counter, I) ->
    Order = order(I),
    Priced = price(Order),
    Taxed = apply(?MODULE, tax, [Priced]),
    Decoded = decode(encode(Order#{total => Taxed})),
    case I rem 50 of
        0 -> {ok, _} = gen_server:call(Server, {record, erlang:phash2(Decoded)});
        _ -> ok
    end,
    counters:add(Counter, 1, 1).

%% The batch job: each order's lines checked one by one (functions no other shape calls).
batch(Server, Counter, I) ->
    #{items := Items} = order(I),
    ok = check_lines(Items, I),
    order_done(Server, Counter, I),
    batch(Server, Counter, I + 1).

check_lines([], _I) -> ok;
check_lines([Line | Rest], I) -> true = check_line(Line, I), check_lines(Rest, I).

%% @doc A batch job's check of an order line, called through the module.
-spec check_line({atom(), pos_integer(), pos_integer()}, integer()) -> boolean().
check_line({Sku, Qty, Price}, I) ->
    is_atom(Sku) andalso Qty > 0 andalso Price * Qty + I rem 7 > 0.

order(I) ->
    Items = [item(I, N) || N <- lists:seq(1, 1 + I rem 5)],
    #{id => I, customer => I rem 97, items => Items}.

item(I, N) ->
    {list_to_atom("sku" ++ integer_to_list((I + N) rem 20)), 1 + (I * N) rem 3, price_of(N)}.

price_of(N) ->
    100 + N * 25.

price(#{items := Items}) ->
    lists:foldl(fun({_Sku, Qty, Price}, Sum) -> Sum + line(Qty, Price) end, 0, Items).

line(Qty, Price) ->
    Qty * Price.

%% @doc A tax, called through apply.
-spec tax(number()) -> number().
tax(Amount) ->
    Amount + Amount div 5.

encode(#{id := Id, customer := C, total := T, items := Items}) ->
    Lines = << <<(encode_item(Item))/binary>> || Item <- Items >>,
    <<Id:64, C:16, T:32, (length(Items)):8, Lines/binary>>.

encode_item({Sku, Qty, Price}) ->
    Name = atom_to_binary(Sku),
    <<(byte_size(Name)):8, Name/binary, Qty:8, Price:16>>.

decode(<<Id:64, C:16, T:32, N:8, Rest/binary>>) ->
    {Items, <<>>} = decode_items(N, Rest, []),
    #{id => Id, customer => C, total => T, items => Items}.

decode_items(0, Rest, Acc) ->
    {lists:reverse(Acc), Rest};
decode_items(N, <<Len:8, Name:Len/binary, Qty:8, Price:16, Rest/binary>>, Acc) ->
    decode_items(N - 1, Rest, [{binary_to_atom(Name), Qty, Price} | Acc]).

%% The ledger: counts what it recorded.

%% @private
-spec init([]) -> {ok, #{atom() => non_neg_integer()}}.
init([]) ->
    {ok, #{recorded => 0}}.

%% @private
-spec handle_call({record, integer()}, gen_server:from(), map()) -> {reply, {ok, integer()}, map()}.
handle_call({record, Key}, _From, State = #{recorded := N}) ->
    {reply, {ok, Key}, State#{recorded := N + 1}}.

%% @private
-spec handle_cast(term(), map()) -> {noreply, map()}.
handle_cast(_Message, State) ->
    {noreply, State}.
