%%% @doc The loop analysis sees waits in other modules: a reader loop that waits in a socket
%%% wrapper's `recv/1' (one module away, two, or `gen_tcp:recv/2' on a real loopback socket)
%%% is found before tracing starts, its stack stays flat through 100,000 messages, and the
%%% handler it calls keeps its timing. Recursive helpers: one that waits on a server for each
%%% element is counted, one that only computes keeps its timing.
-module(ferrotrace_loops_SUITE).

-include("support/ft_ct.hrl").

-export([found_in_other_modules/1, wait_in_unloaded_module/1, whole_node/1, paced_walk/1, behaviours_known/1,
         reading_held_from_the_budget/1,
         reader_one_module_away/1, reader_two_modules_away/1, reader_on_tcp/1,
         helpers_counted_or_timed/1, fun_tail_call/1, other_messages_kept/1]).

-define(READER, ft_wrapper_reader).
-define(LONG, 120000).
%% The most stack words a reader may have, during or after a session (the brief's bound).
-define(MAX_STACK, 1000).

suite() ->
    [{timetrap, {minutes, 5}},
     {ct_hooks, [{ft_ct, [ft_wrapper_reader, ft_wrapper_sock, ft_wrapper_inner]}]}].

all() ->
    [found_in_other_modules, wait_in_unloaded_module, whole_node, paced_walk, behaviours_known,
     reading_held_from_the_budget, reader_one_module_away,
     reader_two_modules_away, reader_on_tcp, helpers_counted_or_timed, fun_tail_call, other_messages_kept].

%%--------------------------------------------------------------------------------------
%% The analysis

%% The loops of the reader module wait in `ft_wrapper_sock' (one module away), in
%% `ft_wrapper_inner' (two), in `gen_tcp:recv/2' (behind `apply': the listed fallback), on
%% a server for each element (`walk/3'), or end in a fun call after a receive
%% (`dispatch/1'). The handler and the walk that only computes are not loops.
-spec found_in_other_modules(config()) -> ok.
found_in_other_modules(_Config) ->
    {Us, Loops} = timer:tc(ferrotrace_loops, find, [[{?READER, '_', '_'}], []]),
    ct:pal("find/2 on ~p: ~b us, ~p", [?READER, Us, Loops]),
    ?assert(lists:member({?READER, loop, 1}, Loops), Loops),
    ?assertEqual([{?READER, dispatch, 1}, {?READER, far_loop, 1}, {?READER, loop, 1},
                  {?READER, tcp_loop, 2}, {?READER, walk, 3}], Loops),
    ?assertEqual([{?READER, far_loop, 1}], ferrotrace_loops:find([{?READER, far_loop, 1}], [])),
    %% Excluded modules give nothing.
    ?assertEqual([], ferrotrace_loops:find([{?READER, '_', '_'}], [?READER])),
    ok.

%% Only loaded code is read: with the inner module unloaded, the wait two modules away is
%% not seen (the engine's run-time bound covers it); loaded again, it is.
-spec wait_in_unloaded_module(config()) -> ok.
wait_in_unloaded_module(_Config) ->
    true = code:delete(ft_wrapper_inner),
    _ = code:purge(ft_wrapper_inner),
    try
        ?assertEqual(false, code:is_loaded(ft_wrapper_inner)),
        ?assertEqual([], ferrotrace_loops:find([{?READER, far_loop, 1}], []))
    after
        {module, ft_wrapper_inner} = code:ensure_loaded(ft_wrapper_inner)
    end,
    ?assertEqual([{?READER, far_loop, 1}], ferrotrace_loops:find([{?READER, far_loop, 1}], [])),
    ok.

%% With every module traced, the loops of the processes running now are found, also in
%% preloaded modules (read from erts's ebin), and a loop whose process waits in another
%% module (the reader sits in the wrapper's recv/1). The stacks are read for at most 100 ms
%% (a process that has not answered by then is taken as running): a stall of the VM's
%% threads on a loaded machine may leave one reading short, so the loops are asked for
%% until they come, within 10 s. Each module version's reading is cached: a reading planted
%% under the reader's MD5 is what find/2 answers from, not the file; planted under another
%% MD5 (another version) it is not used; taken out, the file is read again. (Not by
%% comparing two answers over every module: the node's processes and loaded code move
%% between two calls, CT's included.)
-spec whole_node(config()) -> ok.
whole_node(_Config) ->
    Reader = spawn(fun() -> ?READER:loop(socket) end),
    ok = ft_ct:poll(fun() -> element(2, process_info(Reader, current_function)) =:= {ft_wrapper_sock, recv, 1} end,
                    5000),
    Expected = [{?READER, loop, 1}, {init, loop, 1}, {erl_prim_loader, loop, 3}],
    Found = fun(Loops) -> Expected -- Loops =:= [] andalso [L || L = {gen_server, loop, _} <- Loops] =/= [] end,
    try
        {Whole, Times} = until_found(fun() -> ferrotrace_loops:find([{'_', '_', '_'}], []) end, Found,
                                     erlang:monotonic_time(millisecond) + 10000, []),
        ct:pal("find/2 on every module: ~b loops; ~b calls, taking (us, the first maybe cached by earlier cases) ~w; "
               "~b modules loaded", [length(Whole), length(Times), lists:reverse(Times), length(code:all_loaded())])
    after
        Reader ! {data, stop}
    end,
    %% The cache, through a spec naming the reader's module (its loops found from its code
    %% alone, whatever the node's processes do).
    Named = fun() -> ferrotrace_loops:find([{?READER, '_', '_'}], []) end,
    Loops = [{?READER, dispatch, 1}, {?READER, far_loop, 1}, {?READER, loop, 1}, {?READER, tcp_loop, 2},
             {?READER, walk, 3}],
    ?assertEqual(Loops, Named()),
    MD5 = ?READER:module_info(md5),
    Key = {facts, ?READER, MD5},
    Other = {facts, ?READER, erlang:md5(MD5)},
    [{Key, Facts}] = ets:lookup(ferrotrace_loops_cache, Key),
    try
        %% A reading with no function at all, under this version's MD5, then another's.
        true = ets:insert(ferrotrace_loops_cache, {Key, {[], #{}}}),
        ?assertEqual([], Named()),
        true = ets:insert(ferrotrace_loops_cache, [{Key, Facts}, {Other, {[], #{}}}]),
        ?assertEqual(Loops, Named())
    after
        ets:delete(ferrotrace_loops_cache, Other),
        ets:insert(ferrotrace_loops_cache, {Key, Facts})
    end,
    true = ets:delete(ferrotrace_loops_cache, Key),
    ?assertEqual(Loops, Named()),
    ?assertEqual([{Key, Facts}], ets:lookup(ferrotrace_loops_cache, Key)),
    ok.

%% A start with a `'_'' module reads only what the cache knows and the modules the spec
%% names (`cached'). For OTP's behaviour modules whose code it has not read, it takes their
%% loops from a list: a busy gen_server whose stack was not read in time, on a node that
%% never read gen_server's code, was traced with return tracing in its loop and kept its
%% frames for life. The list is what reading each module's code finds, on this release
%% (the case runs on OTP 25, 27 and 29): with the readings taken out of the cache, the
%% loops a `'_'' start finds in each module are those its code has. The start reads none of
%% them (their readings are still not cached), and its answer says it is not complete.
-spec behaviours_known(config()) -> ok.
behaviours_known(_Config) ->
    _ = ferrotrace_registry:ensure_started(),
    Behaviours = [gen_server, gen_statem, gen_event],
    _ = [{module, B} = code:ensure_loaded(B) || B <- Behaviours],
    Uncache = fun() -> [ets:match_delete(ferrotrace_loops_cache, {{facts, B, '_'}, '_'}) || B <- Behaviours] end,
    _ = Uncache(),
    {Loops, Complete, _Loopers} = ferrotrace_loops:find([{'_', '_', '_'}], [], cached),
    ?assertEqual([], [B || B <- Behaviours, ets:match(ferrotrace_loops_cache, {{facts, B, '_'}, '$1'}) =/= []]),
    ?assertNot(Complete),
    [begin
         Known = [L || L = {M, _, _} <- Loops, M =:= B],
         Read = ferrotrace_loops:find([{B, '_', '_'}], []),
         ct:pal("~p: ~b loops known, ~b read", [B, length(Known), length(Read)]),
         ?assertMatch([_ | _], Read),
         ?assertEqual(Read, Known)
     end || B <- Behaviours],
    _ = Uncache(),
    ok.

%% A paced find paces all of its work, not only the reading of code: with every module
%% read and cached, the walk over every module's facts takes tens of ms of work (24 ms here
%% at once; only the reading was paced, so a session's full reading after its start took
%% that from the node's first 25 ms). At a pace of 0.01, a slice of 2 ms or more
%% (ferrotrace_paced) is followed by a rest of 99 times as long: the paced walk takes at
%% least 198 ms, whatever the machine's load (a loaded machine only lengthens both).
%% Unpaced, it rests never.
-spec paced_walk(config()) -> ok.
paced_walk(_Config) ->
    Whole = [{'_', '_', '_'}],
    _ = ferrotrace_loops:find(Whole, [], read, none),
    {Unpaced, _} = timer:tc(ferrotrace_loops, find, [Whole, [], read, none]),
    {Paced, {Loops, true, _}} = timer:tc(ferrotrace_loops, find, [Whole, [], read, 0.01]),
    ct:pal("a whole-node find over the cache: ~b us at once, ~b us at a pace of 0.01; ~b loops",
           [Unpaced, Paced, length(Loops)]),
    ?assert(Paced >= 198000, {Unpaced, Paced}),
    ok.

%% A `'_'' start on a node whose code is not cached reads it after the start, paced (the
%% keeper's reader): meanwhile the session's info says `reading', and its budget holds the
%% reading's share of the capacity back from the tracing (the summary's `reading', as
%% ferrotrace_budget:read_share/3 gives it for the capacity used); once the reading is
%% done, both say so and the whole budget is the tracing's again. With the cache emptied,
%% the reading of every loaded module takes 0.1 to 0.3 s of work here, 5 to 15 s at its
%% pace of 0.02: polled every 200 ms for 120 s, a loaded machine only lengthens it.
-spec reading_held_from_the_budget(config()) -> ok.
reading_held_from_the_budget(_Config) ->
    %% Given back after: the cases after it start from what the earlier ones read.
    Cached = ets:tab2list(ferrotrace_loops_cache),
    true = ets:delete_all_objects(ferrotrace_loops_cache),
    {ok, S} = ferrotrace:calls({'_', '_', '_'}, #{duration => ?LONG, max_overhead => 0.05}),
    try
        Reading = fun() -> {ok, _, _, Info} = ferrotrace_registry:lookup(S), maps:get(reading, Info, undefined) end,
        %% The budget is in the summary from its first tick on.
        Held = fun() ->
                       case ferrotrace:summary(S) of
                           #{budget := #{reading := R, used := Used}} -> {R, Used};
                           #{} -> {undefined, undefined}
                       end
               end,
        ?assertEqual(true, Reading()),
        {R, Used} = until(Held, fun({R0, _}) -> is_float(R0) andalso R0 > 0 end, 120000),
        ?assertEqual(ferrotrace_budget:read_share(0.05, erlang:system_info(schedulers_online), Used), R),
        false = until(Reading, fun(Now) -> Now =:= false end, 120000),
        {Done, _} = until(Held, fun({R0, _}) -> R0 == 0 end, 10000),
        ?assert(Done == 0, Done)
    after
        ok = ferrotrace:release(S),
        true = ets:insert(ferrotrace_loops_cache, Cached)
    end.

%% `Read()' once `Done' of it, read every 200 ms for `Ms' at most.
until(Read, Done, Ms) ->
    Value = Read(),
    case Done(Value) of
        true -> Value;
        false when Ms > 0 -> timer:sleep(200), until(Read, Done, Ms - 200);
        false -> ct:fail({still, Value})
    end.

%% `Find()' asked until `Found' of its answer, until `Deadline' at most: the answer and the
%% calls' times (us), the last first.
until_found(Find, Found, Deadline, Times) ->
    {Us, Answer} = timer:tc(Find),
    case Found(Answer) of
        true -> {Answer, [Us | Times]};
        false ->
            erlang:monotonic_time(millisecond) < Deadline orelse ct:fail({not_found, Answer, [Us | Times]}),
            until_found(Find, Found, Deadline, [Us | Times])
    end.

%%--------------------------------------------------------------------------------------
%% Sessions

%% The issue's reader: its loop waits in the wrapper's recv/1. 100,000 messages traced with
%% the whole reader module: the stack stays flat, the handler is timed.
-spec reader_one_module_away(config()) -> ok.
reader_one_module_away(_Config) ->
    reader_stays_flat(fun(_) -> ?READER:loop(socket) end, {?READER, loop, 1}, message_feed(), 100000).

%% The wait two modules away.
-spec reader_two_modules_away(config()) -> ok.
reader_two_modules_away(_Config) ->
    reader_stays_flat(fun(_) -> ?READER:far_loop(socket) end, {?READER, far_loop, 1}, message_feed(), 50000).

%% The wrapper's wait is `gen_tcp:recv/2' on a loopback socket; a client sends lines.
-spec reader_on_tcp(config()) -> ok.
reader_on_tcp(_Config) ->
    {ok, Listen} = gen_tcp:listen(0, [binary, {ip, {127, 0, 0, 1}}, {packet, line}, {active, false},
                                      {reuseaddr, true}]),
    {ok, Port} = inet:port(Listen),
    Self = self(),
    Client = spawn_link(fun() -> tcp_client(Port, Self) end),
    Reader = fun(Owner) -> {ok, Socket} = gen_tcp:accept(Listen, 10000), ?READER:tcp_loop(Socket, Owner) end,
    Feed = fun(_Reader, From, To) ->
                   Client ! {lines, self(), From, To},
                   receive {sent, Client} -> ok after 60000 -> error(client_stuck) end
           end,
    try
        reader_stays_flat(Reader, {?READER, tcp_loop, 2}, Feed, 30000)
    after
        unlink(Client),
        exit(Client, kill),
        gen_tcp:close(Listen)
    end.

tcp_client(Port, Owner) ->
    {ok, Socket} = gen_tcp:connect({127, 0, 0, 1}, Port, [binary, {active, false}]),
    tcp_client_loop(Socket, Owner).

tcp_client_loop(Socket, Owner) ->
    receive
        {lines, From, First, Last} ->
            ok = gen_tcp:send(Socket, [[integer_to_list(I), $\n] || I <- lists:seq(First, Last)]
                                      ++ ["sync\n"]),
            From ! {sent, self()},
            tcp_client_loop(Socket, Owner)
    end.

%% Feeds messages `{data, I}' to a reader, and a sync after each batch.
message_feed() ->
    fun(Reader, From, To) ->
            [Reader ! {data, I} || I <- lists:seq(From, To)],
            Reader ! {data, {sync, self()}}
    end.

%% Starts a reader (`Start(Owner)' runs in it), feeds it a batch untraced, then traces the
%% reader module while feeding `N' more in batches of 1,000, sampling its stack size all
%% the while; feeds a batch after the session. The reader's stack stays at most
%% ?MAX_STACK words during and after, the loop is counted only and the handler timed.
reader_stays_flat(Start, LoopMFA, Feed, N) ->
    %% The wrappers' code read and cached, as a node's earlier session would have: a start
    %% reads only what the cache knows beside the modules its spec names, and the wait is
    %% in another module (without it, run alone, the loop is found by the paced reading
    %% after the start, and the handler's calls meanwhile meet the frame bound).
    _ = ferrotrace_loops:find([{?READER, '_', '_'}], []),
    Self = self(),
    Reader = spawn(fun() -> Start(Self) end),
    ok = feed(Reader, Feed, 1, 100),
    {stack_size, Before} = process_info(Reader, stack_size),
    {ok, S} = ferrotrace:calls({?READER, '_', '_'}, #{duration => ?LONG}),
    Sampler = spawn_link(fun() -> sample(Reader, 0, 0) end),
    T0 = erlang:monotonic_time(millisecond),
    ok = feed(Reader, Feed, 1, N),
    Took = erlang:monotonic_time(millisecond) - T0,
    Sampler ! {done, self()},
    {Max, Samples} = receive {max, Sampler, M, K} -> {M, K} after 10000 -> error(sampler_stuck) end,
    {stack_size, During} = process_info(Reader, stack_size),
    ok = ferrotrace:stop(S),
    ok = feed(Reader, Feed, 1, 100),
    {stack_size, After} = process_info(Reader, stack_size),
    #{loops := Loops, calls := Calls, events := #{dropped := Dropped}} = ferrotrace:summary(S),
    ct:pal("~b messages in ~b ms; reader stack words: before ~b, at most ~b over ~b samples, "
           "at the end ~b, after ~b; loops ~p; ~b events dropped",
           [N, Took, Before, Max, Samples, During, After, Loops, Dropped]),
    exit(Reader, kill),
    ?assert(Samples > 0),
    ?assert(Max =< ?MAX_STACK, {Max, Before}),
    ?assert(During =< ?MAX_STACK, {During, Before}),
    ?assert(After =< ?MAX_STACK, {After, Before}),
    ?assert(lists:member(LoopMFA, Loops), Loops),
    #{count := LoopCount, returns := 0} = call(LoopMFA, Calls),
    ?assert(LoopCount > 0),
    %% The handler is timed: it has returns and latency figures.
    #{count := Count, returns := Returns, p50 := P50, p99 := P99, max := Max99} = call({?READER, handle, 1}, Calls),
    ct:pal("handle/1: ~b calls, ~b returns, p50 ~p ns, p99 ~p ns, max ~p ns", [Count, Returns, P50, P99, Max99]),
    ?assert(Returns > 0 andalso Returns + Dropped >= N, {Returns, Dropped}),
    ?assert(is_integer(P50) andalso P50 > 0, P50),
    ?assert(is_integer(P99) andalso P99 >= P50, P99),
    ok.

call(MFA, Calls) ->
    case [C || C = #{mfa := M} <- Calls, M =:= MFA] of
        [C] -> C;
        [] -> error({not_traced, MFA, [M || #{mfa := M} <- Calls]})
    end.

%% Feeds `From..To' in batches of 1,000, each ended by a sync the reader answers.
feed(_Reader, _Feed, From, To) when From > To ->
    ok;
feed(Reader, Feed, From, To) ->
    Last = min(To, From + 999),
    Feed(Reader, From, Last),
    receive {synced, Reader} -> ok after 60000 -> error({reader_stuck, From}) end,
    feed(Reader, Feed, Last + 1, To).

sample(Reader, Max, Samples) ->
    receive
        {done, From} -> From ! {max, self(), Max, Samples}
    after 0 ->
            case process_info(Reader, stack_size) of
                {stack_size, Words} ->
                    erlang:yield(),
                    sample(Reader, max(Max, Words), Samples + 1);
                undefined ->
                    sample(Reader, Max, Samples)
            end
    end.

%% A walk that waits on a server for each element is a loop (counted); a walk that only
%% computes keeps its timing.
-spec helpers_counted_or_timed(config()) -> ok.
helpers_counted_or_timed(_Config) ->
    Server = spawn(fun ft_wrapper_sock:serve/0),
    {ok, S} = ferrotrace:calls([{?READER, walk, 3}, {?READER, sum, 2}], #{duration => ?LONG}),
    List = lists:seq(1, 1000),
    ?assertEqual(2 * lists:sum(List), ?READER:walk(Server, List, 0)),
    %% Timed, so each level keeps a frame: 100 levels stay under the frame bound (120; calls
    %% past it are refused, see ferrotrace_frames_SUITE).
    Short = lists:seq(1, 100),
    ?assertEqual(2 * lists:sum(Short) + 300, ?READER:sum(Short, 0)),
    ok = ferrotrace:stop(S),
    #{loops := Loops, calls := Calls} = ferrotrace:summary(S),
    ?assertEqual([{?READER, walk, 3}], Loops),
    #{count := WalkCount, returns := 0} = call({?READER, walk, 3}, Calls),
    #{count := SumCount, returns := SumReturns, p50 := P50} = call({?READER, sum, 2}, Calls),
    ct:pal("walk/3 counted ~b; sum/2 ~b calls, ~b returns, p50 ~p ns", [WalkCount, SumCount, SumReturns, P50]),
    ?assertEqual(1001, WalkCount),
    ?assertEqual(101, SumCount),
    ?assertEqual(101, SumReturns),
    ?assert(is_integer(P50) andalso P50 > 0, P50),
    exit(Server, kill),
    ok.

%% A function that waits and ends in a tail call through a fun is taken as a loop before
%% tracing starts: its stack stays flat from the first iteration.
-spec fun_tail_call(config()) -> ok.
fun_tail_call(_Config) ->
    ?assertEqual([{?READER, dispatch, 1}], ferrotrace_loops:find([{?READER, dispatch, 1}], [])),
    Reader = spawn(fun() -> ?READER:dispatch(fun ?READER:dispatch/1) end),
    {ok, S} = ferrotrace:calls({?READER, dispatch, 1}, #{duration => ?LONG}),
    [begin Reader ! {go, self()}, receive ok -> ok after 5000 -> error(stuck) end end
     || _ <- lists:seq(1, 10000)],
    {stack_size, Words} = process_info(Reader, stack_size),
    ok = ferrotrace:stop(S),
    ct:pal("dispatch/1 stack after 10,000 iterations: ~b words", [Words]),
    ?assert(Words =< 32, Words),
    exit(Reader, kill),
    ok.

%% A start reads the live stacks in the keeper, whose mailbox holds messages of its own (its
%% owner's `DOWN'): the readers' monitors are taken back, nothing else.
-spec other_messages_kept(config()) -> ok.
other_messages_kept(_Config) ->
    Gone = spawn(fun() -> ok end),
    Monitor = monitor(process, Gone),
    receive after 50 -> ok end,
    self() ! other,
    {_, _, _} = ferrotrace_loops:find([{'_', '_', '_'}], [], cached),
    ?assertMatch({'DOWN', Monitor, process, Gone, _}, receive {'DOWN', Monitor, _, _, _} = D -> D after 0 -> none end),
    ?assertEqual(other, receive other -> other after 0 -> none end),
    ok.
