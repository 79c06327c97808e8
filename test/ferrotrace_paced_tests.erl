%%% @doc Work run at a pace (ferrotrace_paced): its value or its exception comes back to the
%%% caller; a worker that computes is suspended between its slices; one that waits rests
%%% not; killing the caller ends the work.
-module(ferrotrace_paced_tests).

-include_lib("stdlib/include/assert.hrl").

-export([value_and_exceptions_come_back_test/0, computing_work_is_suspended_between_slices_test/0,
         waiting_work_does_not_rest_test/0, killing_the_caller_ends_the_work_test/0]).

%% In a process of its own, whose links and messages are the run's alone (the test
%% process keeps other tests' messages).
-spec value_and_exceptions_come_back_test() -> ok.
value_and_exceptions_come_back_test() ->
    Self = self(),
    {Caller, Monitor} =
        spawn_monitor(fun() ->
                              Runs = [ferrotrace_paced:run(fun() -> 42 end, 0.5)
                                      | [try ferrotrace_paced:run(Raise, 0.5) catch Class:Reason -> {Class, Reason} end
                                         || Raise <- [fun() -> error(boom) end, fun() -> throw(thrown) end,
                                                      fun() -> exit(gone) end]]],
                              Self ! {self(), Runs, erlang:process_info(self(), [links, messages])}
                      end),
    receive
        {Caller, Runs, Left} ->
            ?assertEqual([42, {error, boom}, {throw, thrown}, {exit, gone}], Runs),
            %% No worker left linked to the caller, and no message.
            ?assertEqual([{links, []}, {messages, []}], Left)
    end,
    receive {'DOWN', Monitor, process, Caller, normal} -> ok end.

%% At a pace of 0.1, each slice of 2 ms or more is followed by a rest of 9 times as long,
%% the worker suspended through it: work of 5 M reductions (tens of ms here) takes many
%% slices, and a poll every ms at high priority sees the worker suspended. A loaded machine
%% lengthens the slices and the rests alike.
-spec computing_work_is_suspended_between_slices_test() -> ok.
computing_work_is_suspended_between_slices_test() ->
    Self = self(),
    {Caller, Monitor} = spawn_opt(fun() -> Self ! {self(), ferrotrace_paced:run(fun() -> spin(5000000) end, 0.1)} end,
                                  [monitor]),
    _ = process_flag(priority, high),
    Seen = try watch(Caller, #{}) after process_flag(priority, normal) end,
    receive {'DOWN', Monitor, process, Caller, normal} -> ok end,
    ?assertMatch([_], maps:keys(Seen), Seen),
    [{Worker, States}] = maps:to_list(Seen),
    ?assert(lists:member(suspended, States), States),
    ?assertNot(is_process_alive(Worker)),
    ok.

%% A worker that waits (here: 100 ms in a receive) makes no reductions meanwhile and is
%% not rested for: at a pace of 0.01 a rest would be 99 times its slice, 4 s or more over
%% 100 ms of slices.
-spec waiting_work_does_not_rest_test() -> ok.
waiting_work_does_not_rest_test() ->
    {Us, ok} = timer:tc(ferrotrace_paced, run, [fun() -> timer:sleep(100) end, 0.01]),
    ?assert(Us < 2000000, Us),
    ok.

%% The keeper ends a reading by killing its caller (an exit no one traps): the worker,
%% suspended or not, ends with it.
-spec killing_the_caller_ends_the_work_test() -> ok.
killing_the_caller_ends_the_work_test() ->
    Self = self(),
    Caller = spawn(fun() -> ferrotrace_paced:run(fun() -> Self ! {worker, self()}, spin(1000000000) end, 0.05) end),
    Worker = receive {worker, W} -> W end,
    Monitor = monitor(process, Worker),
    timer:sleep(50),
    exit(Caller, kill),
    receive {'DOWN', Monitor, process, Worker, Reason} -> ?assertEqual(killed, Reason)
    after 5000 -> error(worker_left)
    end.

%% The states each process linked to `Caller' (its worker) was seen in, polled every ms
%% until `Caller' answers.
watch(Caller, Seen) ->
    receive
        {Caller, _} -> Seen
    after 1 ->
            Links = case erlang:process_info(Caller, links) of
                        {links, L} -> L;
                        undefined -> []
                    end,
            watch(Caller, lists:foldl(fun(P, Acc) ->
                                              case erlang:process_info(P, status) of
                                                  {status, St} -> maps:update_with(P, fun(S) -> lists:usort([St | S]) end,
                                                                                   [St], Acc);
                                                  undefined -> Acc
                                              end
                                      end, Seen, [P || P <- Links, is_pid(P)]))
    end.

spin(0) -> ok;
spin(N) -> spin(N - 1).
