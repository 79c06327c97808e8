%%% @doc `ferrotrace:add/2' and `remove/2': the functions of a running session changed
%%% without stopping it, checked as a start checks them (another session's pattern, loops
%%% count-only, bad specs), by name and by id, with figures kept; and the issue's scenario on
%%% OTP 25 and 26, where a second session is refused while the first holds every process.
-module(ferrotrace_add_SUITE).

-include("support/ft_ct.hrl").

-export([add_then_remove_exact/1, add_while_calling/1, held_by_another_session/1,
         loop_added_count_only/1, by_name_and_id/1, refused_changes/1,
         second_session_refused_then_add/1, remove_leaves_what_others_need/1]).

-define(F, {ft_test_target, f, 1}).
-define(G, {ft_test_target, g, 1}).
-define(READER, ft_wrapper_reader).
-define(LONG, 60000).

suite() ->
    [{timetrap, {minutes, 3}},
     {ct_hooks, [{ft_ct, [ft_test_target, ft_wrapper_reader, ft_wrapper_sock, ft_wrapper_inner]}]}].

all() ->
    [add_then_remove_exact, add_while_calling, held_by_another_session, loop_added_count_only,
     by_name_and_id, refused_changes, second_session_refused_then_add,
     remove_leaves_what_others_need].

%% A session on f; g added: g's calls from then on are counted, f's go on; f removed: its
%% calls are no longer counted, its figures stay; the summary and the report list both
%% changes. Counts exact: one caller, calls made between the changes.
-spec add_then_remove_exact(config()) -> ok.
add_then_remove_exact(_Config) ->
    Caller = ft_caller:start(),
    {ok, S} = ferrotrace:calls(?F, #{duration => ?LONG}),
    Both = fun(NF, NG) -> ok = ft_caller:run(Caller, fun() -> calls(NF, NG) end) end,
    Both(100, 100),
    ?assertEqual({ok, #{added => [?G], loops => [], functions => 1}}, ferrotrace:add(S, ?G)),
    ?assert(ft_trace_state:traced_by_ferrotrace(?G)),
    Both(100, 70),
    ?assertEqual(#{?F => 200, ?G => 70}, counts(S)),
    ?assertEqual({ok, #{removed => [?F]}}, ferrotrace:remove(S, "ft_test_target:f/1")),
    ?assertNot(ft_trace_state:traced_by_ferrotrace(?F)),
    Both(100, 30),
    ok = ferrotrace:stop(S),
    ?assertEqual(#{?F => 200, ?G => 100}, counts(S)),
    #{changes := [#{added := [?G], at := A1}, #{removed := [?F], at := A2}]} = ferrotrace:summary(S),
    ?assert(A1 =< A2),
    ?assertMatch({match, _}, re:run(ferrotrace:format(S), "changes: at .* added ft_test_target:g/1,")),
    [#{spec := [?G]}] = [L || L = #{id := Id} <- ferrotrace:list(), Id =:= S],
    ?assert(ft_trace_state:idle(?G, Caller)),
    ft_caller:stop(Caller).

%% Processes call f and g all the while: once g is added its calls appear and f's count
%% keeps growing; once f is removed its count stops (after the calls in flight) and stays.
-spec add_while_calling(config()) -> ok.
add_while_calling(_Config) ->
    Spinners = [spawn_link(fun() -> spin(0) end) || _ <- [1, 2]],
    {ok, S} = ferrotrace:calls(?F, #{duration => ?LONG}),
    ok = ft_ct:poll(fun() -> maps:get(?F, counts(S), 0) > 1000 end, 10000),
    {ok, _} = ferrotrace:add(S, ?G),
    F1 = maps:get(?F, counts(S)),
    ok = ft_ct:poll(fun() -> case counts(S) of
                                 #{?F := F2, ?G := G2} -> F2 > F1 andalso G2 > 1000;
                                 _ -> false
                             end
                    end, 10000),
    {ok, _} = ferrotrace:remove(S, ?F),
    timer:sleep(100),
    #{?F := Fa, ?G := Ga} = counts(S),
    timer:sleep(300),
    #{?F := Fb, ?G := Gb} = counts(S),
    [begin unlink(P), exit(P, kill) end || P <- Spinners],
    ok = ferrotrace:stop(S),
    ct:pal("f: ~b at the add, ~b and ~b after the remove; g: ~b then ~b", [F1, Fa, Fb, Ga, Gb]),
    ?assertEqual(Fa, Fb),
    ?assert(Fa > F1),
    ?assert(Gb > Ga),
    ok.

spin(I) ->
    _ = ft_test_target:f(I),
    _ = ft_test_target:g(I),
    spin(I + 1).

%% On OTP 25 and 26 a function has one match spec for the node: adding a function another
%% session traces with another match spec is refused as its start would be, and the session
%% is left as it was. On OTP 27+ each session has its own: the add is taken, and each
%% session counts its own processes' calls.
-spec held_by_another_session(config()) -> ok.
held_by_another_session(_Config) ->
    {W1, W2} = {ft_caller:start(), ft_caller:start()},
    {ok, S1} = ferrotrace:calls(?F, #{duration => ?LONG, pids => [W1]}),
    {ok, S2} = ferrotrace:calls("ft_test_target:g(X) when X > 5", #{duration => ?LONG, pids => [W2]}),
    case ft_trace_state:trace_sessions() of
        false ->
            ?assertEqual({error, {pattern_conflict, ?G, S2}}, ferrotrace:add(S1, ?G)),
            ?assertNot(maps:is_key(changes, ferrotrace:summary(S1))),
            ok = ft_caller:run(W1, fun() -> calls(10, 10) end),
            ?assertEqual(#{?F => 10}, counts(S1));
        true ->
            {ok, #{added := [?G]}} = ferrotrace:add(S1, ?G),
            ok = ft_caller:run(W1, fun() -> calls(10, 10) end),
            ok = ft_caller:run(W2, fun() -> calls(10, 10) end),
            ?assertEqual(#{?F => 10, ?G => 10}, counts(S1)),
            ?assertEqual(#{?G => 5}, counts(S2))
    end,
    [ft_caller:stop(W) || W <- [W1, W2]],
    ok.

%% A reader whose loop waits in another module (ft_wrapper_sock:recv/1): its loop added to a
%% session on its handler is found by the analysis and traced count-only from its first
%% call, so no call is refused by the frame bound and the stack stays flat; the handler is
%% still timed.
-spec loop_added_count_only(config()) -> ok.
loop_added_count_only(_Config) ->
    Self = self(),
    Reader = spawn(fun() -> ?READER:loop(socket) end),
    {ok, S} = ferrotrace:calls({?READER, handle, 1}, #{duration => ?LONG}),
    ?assertEqual({ok, #{added => [{?READER, loop, 1}], loops => [{?READER, loop, 1}], functions => 1}},
                 ferrotrace:add(S, {?READER, loop, 1})),
    N = 5000,
    [Reader ! {data, I} || I <- lists:seq(1, N)],
    Reader ! {data, {sync, Self}},
    receive {synced, Reader} -> ok after 30000 -> error(reader_stuck) end,
    {stack_size, Stack} = process_info(Reader, stack_size),
    ok = ferrotrace:stop(S),
    exit(Reader, kill),
    #{loops := Loops, calls := Calls, events := #{frames_refused := Refused}} = ferrotrace:summary(S),
    ct:pal("stack ~b words, ~b calls refused, loops ~p", [Stack, Refused, Loops]),
    ?assert(lists:member({?READER, loop, 1}, Loops), Loops),
    ?assertEqual(0, Refused),
    ?assert(Stack < 200, Stack),
    [#{count := LoopCount, returns := 0}] = [C || C = #{mfa := {?READER, loop, 1}} <- Calls],
    %% One loop and one handle call per message (the sync's loop call may come after the stop).
    ?assert(LoopCount >= N, LoopCount),
    [#{returns := Returns, p50 := P50}] = [C || C = #{mfa := {?READER, handle, 1}} <- Calls],
    ?assert(Returns >= N, Returns),
    ?assert(is_integer(P50)),
    ok.

%% A session is found by its name, its id, as every API function finds it.
-spec by_name_and_id(config()) -> ok.
by_name_and_id(_Config) ->
    {ok, S} = ferrotrace:calls(?F, #{duration => ?LONG, name => adding}),
    {ok, #{added := [?G]}} = ferrotrace:add(adding, ?G),
    {ok, #{added := [{ft_test_target, rec, 1}]}} = ferrotrace:add(S, "ft_test_target:rec/1"),
    {ok, #{removed := [?G]}} = ferrotrace:remove(S, ?G),
    {ok, #{removed := [?F]}} = ferrotrace:remove(adding, ?F),
    ?assertEqual({error, {no_such_session, nosuch}}, ferrotrace:add(nosuch, ?G)),
    ?assertMatch({error, {bad_session, _}}, ferrotrace:remove(<<"x">>, ?G)),
    ?assertMatch({error, {no_such_session, _}}, ferrotrace:add(self(), ?G)),
    #{changes := Changes} = ferrotrace:summary(adding),
    ?assertEqual(4, length(Changes)),
    ok.

%% What is refused, each with its reason, the session unchanged: a bad spec, ferrotrace's
%% own modules, functions traced already, a hole in a pattern, a spec of no pattern, a
%% stopped, released or raw session.
-spec refused_changes(config()) -> ok.
refused_changes(_Config) ->
    {ok, S} = ferrotrace:calls({ft_test_target, '_', '_'}, #{duration => ?LONG}),
    ?assertMatch({error, {no_such_module, no_such_module_here, <<_/binary>>}}, ferrotrace:add(S, {no_such_module_here, f, 1})),
    ?assertMatch({error, {no_matching_functions, [{ft_test_target, g, 9}], <<"did you mean ft_test_target:g/", _/binary>>}},
                 ferrotrace:add(S, {ft_test_target, g, 9})),
    ?assertMatch({error, {bad_spec, _}}, ferrotrace:add(S, 42)),
    ?assertMatch({error, {bad_spec, {ferrotrace, '_', '_'}, _}}, ferrotrace:add(S, {ferrotrace, '_', '_'})),
    ?assertMatch({error, {already_in_session, ?G, {ft_test_target, '_', '_'}, _}}, ferrotrace:add(S, ?G)),
    ?assertMatch({error, {part_of_pattern, ?F, {ft_test_target, '_', '_'}, _}}, ferrotrace:remove(S, ?F)),
    ?assertMatch({error, {not_in_session, [{lists, seq, 2}], _}}, ferrotrace:remove(S, {lists, seq, 2})),
    ?assertMatch({error, {bad_spec, _, _}},
                 ferrotrace:add(S, {lists, seq, [{['$1', '_'], [], [{message, '$1'}]}]})),
    ?assertNot(maps:is_key(changes, ferrotrace:summary(S))),
    ok = ferrotrace:stop(S),
    ?assertMatch({error, {session_stopped, S, _}}, ferrotrace:add(S, {lists, seq, 2})),
    ?assertMatch({error, {session_stopped, S, _}}, ferrotrace:remove(S, {ft_test_target, '_', '_'})),
    ok = ferrotrace:release(S),
    ?assertMatch({error, {released, S, _}}, ferrotrace:add(S, ?G)),
    {ok, Raw} = ferrotrace:session(#{}),
    ?assertMatch({error, {raw_session, Raw, _}}, ferrotrace:add(Raw, ?G)),
    ok.

%% The issue's scenario: a session on every process; on OTP 25 and 26 a second calls/2 is
%% refused, and the refusal says to add the functions to the first, by its name; adding
%% them works. On OTP 27+ the second session starts; adding works all the same.
-spec second_session_refused_then_add(config()) -> ok.
second_session_refused_then_add(_Config) ->
    Caller = ft_caller:start(),
    {ok, S} = ferrotrace:calls(?F, #{duration => ?LONG, name => first}),
    case ft_trace_state:trace_sessions() of
        false ->
            {error, {already_traced, [_ | _], {ferrotrace, S, first}, How}} =
                ferrotrace:calls(?G, #{duration => ?LONG}),
            ct:pal("~ts", [How]),
            ?assertEqual(<<"ferrotrace:stop(first) ends it, or add(first, Spec) to it">>, How);
        true ->
            {ok, S2} = ferrotrace:calls(?G, #{duration => ?LONG}),
            ok = ferrotrace:release(S2)
    end,
    {ok, #{added := [?G]}} = ferrotrace:add(first, ?G),
    ok = ft_caller:run(Caller, fun() -> calls(20, 30) end),
    ?assertEqual(#{?F => 20, ?G => 30}, counts(S)),
    ft_caller:stop(Caller).

%% Two sessions on f for different processes (OTP 25 and 26: they share the node's pattern):
%% the first removes f, the second's pattern stays and it goes on counting; the first counts
%% its own process's later calls of f no more (foreign, as any function outside its specs).
-spec remove_leaves_what_others_need(config()) -> ok.
remove_leaves_what_others_need(_Config) ->
    {W1, W2} = {ft_caller:start(), ft_caller:start()},
    {ok, S1} = ferrotrace:calls([?F, ?G], #{duration => ?LONG, pids => [W1]}),
    {ok, S2} = ferrotrace:calls(?F, #{duration => ?LONG, pids => [W2]}),
    ok = ft_caller:run(W1, fun() -> calls(10, 10) end),
    {ok, #{removed := [?F]}} = ferrotrace:remove(S1, ?F),
    ?assert(ft_trace_state:traced_by_ferrotrace(?F)),
    ok = ft_caller:run(W1, fun() -> calls(20, 20) end),
    ok = ft_caller:run(W2, fun() -> calls(30, 30) end),
    ?assertEqual(#{?F => 10, ?G => 30}, counts(S1)),
    ?assertEqual(#{?F => 30}, counts(S2)),
    [ft_caller:stop(W) || W <- [W1, W2]],
    ok.

calls(NF, NG) ->
    [ft_test_target:f(I) || I <- lists:seq(1, NF)],
    [ft_test_target:g(I) || I <- lists:seq(1, NG)].

%% Each function's count in the summary (the collector is polled until it caught up: a
%% count read twice the same after the calls returned).
counts(S) ->
    Read = fun() -> #{calls := Calls} = ferrotrace:summary(S), maps:from_list([{M, N} || #{mfa := M, count := N} <- Calls]) end,
    settle(Read, Read(), 20).

settle(_Read, Last, 0) ->
    Last;
settle(Read, Last, Tries) ->
    timer:sleep(20),
    case Read() of
        Last -> Last;
        Next -> settle(Read, Next, Tries - 1)
    end.
