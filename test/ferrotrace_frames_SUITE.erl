%%% @doc The frame bound: return tracing keeps a frame per traced call until it returns,
%%% so a loop the analysis cannot see (it waits in another module, or loops through a fun or
%%% `apply') or a very deep recursion would grow its process's stack for as long as it runs.
%%% The engine refuses calls on the scheduler once a process has 120 frames of the session
%%% open: no process keeps more than about 1,000 words of them, during or after a session.
-module(ferrotrace_frames_SUITE).

-include("support/ft_ct.hrl").

-export([reader_waiting_in_another_module/1, loop_through_a_fun/1, loop_through_apply/1,
         loop_through_an_untraced_module/1, cycle_of_two_through_an_untraced_module/1,
         tail_recursion_a_million_deep/1, frames_note_names_the_process/1,
         every_function_with_readers/1, killed_inside_calls/1]).
-export([wait_inside/0]).

-define(MAX_WORDS, 1000).
%% Unbounded, each message would leave a return-trace frame (3 words on OTP 25, 4 on 27+):
%% 20,000 messages would pass ?MAX_WORDS sixty times over.
-define(MESSAGES, 20000).

suite() ->
    [{ct_hooks, [{ft_ct, [ft_frames_sock, ft_frames_reader]}]}, {timetrap, {minutes, 3}}].

all() ->
    [reader_waiting_in_another_module, loop_through_a_fun, loop_through_apply,
     loop_through_an_untraced_module, cycle_of_two_through_an_untraced_module,
     tail_recursion_a_million_deep, frames_note_names_the_process, every_function_with_readers,
     killed_inside_calls].

%% The server's connection reader: the module traced, the wait in the wrapper.
-spec reader_waiting_in_another_module(config()) -> ok.
reader_waiting_in_another_module(_Config) ->
    reader_stays_small(fun ft_frames_reader:reader/0, {ft_frames_reader, '_', '_'}).

-spec loop_through_a_fun(config()) -> ok.
loop_through_a_fun(_Config) ->
    reader_stays_small(fun ft_frames_reader:via_fun/0, {ft_frames_reader, '_', '_'}).

-spec loop_through_apply(config()) -> ok.
loop_through_apply(_Config) ->
    reader_stays_small(fun() -> ft_frames_reader:via_apply(0) end, {ft_frames_reader, '_', '_'}).

%% A cycle through a module the spec does not name is not found in the code: the frame bound
%% holds the stack, and the engine finds the loop while it runs (and says how deep it got).
-spec loop_through_an_untraced_module(config()) -> ok.
loop_through_an_untraced_module(_Config) ->
    reader_stays_small(fun() -> ft_frames_reader:bounce(0) end, {ft_frames_reader, '_', '_'},
                       [{ft_frames_reader, bounce, 1}]).

%% The same with two traced functions on the cycle (as yaws's aloop/4 and
%% handle_method_result/7): each holds half the frames at the bound, and both are found.
-spec cycle_of_two_through_an_untraced_module(config()) -> ok.
cycle_of_two_through_an_untraced_module(_Config) ->
    reader_stays_small(fun() -> ft_frames_reader:ping(0) end, {ft_frames_reader, '_', '_'},
                       [{ft_frames_reader, ping, 1}, {ft_frames_reader, pong, 1}]).

%% Processes killed inside a traced call leave nothing open. A calls session traces no
%% `procs' (only `call': a process born and ended costs the tracer no event), so on OTP 27+,
%% where the VM tells a killed process's open calls by its exit alone, the keeper finds the
%% dead processes (ferrotrace_tracer:session_settle_exits/1, every second and before a
%% summary) and forgets their calls; OTP 25 and 26 unwind them as exceptions.
-spec killed_inside_calls(config()) -> ok.
killed_inside_calls(_Config) ->
    {ok, S} = ferrotrace:calls({?MODULE, wait_inside, 0}, #{max_overhead => none, duration => 120000}),
    Killed = 20,
    Pids = [spawn(fun ?MODULE:wait_inside/0) || _ <- lists:seq(1, Killed)],
    ok = ft_ct:poll(fun() -> calls_of(S) =:= Killed end, 10000),
    Flags = [Flag || P <- Pids, {flags, Fs} <- [erlang:trace_info(P, flags)], Flag <- Fs],
    ?assertNot(lists:member(procs, Flags)),
    {ok, #{open := Killed, exited := 0}} = ferrotrace_tracer:session_settle_exits(S),
    Monitors = [monitor(process, P) || P <- Pids],
    _ = [exit(P, kill) || P <- Pids],
    _ = [receive {'DOWN', M, process, _, _} -> ok end || M <- Monitors],
    {ok, #{exited := Exited}} = ferrotrace_tracer:session_settle_exits(S),
    #{pairing := Pairing, calls := [#{count := Killed, returns := 0, exceptions := Exceptions}]} = ferrotrace:summary(S),
    ok = ferrotrace:release(S),
    ?assertMatch(#{open_calls := 0, processes := 0}, Pairing),
    #{abandoned_calls := Abandoned} = Pairing,
    case list_to_integer(erlang:system_info(otp_release)) of
        Otp when Otp < 27 -> ?assertEqual({0, Killed, 0}, {Exited, Exceptions, Abandoned});
        _ -> ?assertEqual({Killed, 0, Killed}, {Exited, Exceptions, Abandoned})
    end.

%% The function the processes of killed_inside_calls/1 are killed in.
-spec wait_inside() -> ok.
wait_inside() ->
    receive stop -> ok end.

calls_of(S) ->
    case ferrotrace:summary(S) of
        #{calls := [#{count := N}]} -> N;
        _ -> 0
    end.

%% A traced tail recursion a million deep keeps at most 5,000 words while it runs; the calls
%% past the bound are refused and counted, and the outer calls still pair.
-spec tail_recursion_a_million_deep(config()) -> ok.
tail_recursion_a_million_deep(_Config) ->
    {ok, S} = ferrotrace:calls({ft_frames_reader, count_down, 1}, #{duration => 120000}),
    Self = self(),
    P = spawn(fun() -> done = ft_frames_reader:count_down(1000000), Self ! {done, self()} end),
    Max = watch(P, 0),
    ?assert(Max =< 5000, {max_stack_words, Max}),
    #{events := #{frames_refused := Refused}, calls := Calls} = ferrotrace:summary(S),
    ?assert(Refused > 0, Refused),
    [#{count := Count, max_frames := MaxFrames}] = Calls,
    ?assert(Count > 0 andalso Count =< 1000000, Count),
    %% The bound is 120 frames; the process reached it.
    ?assert(MaxFrames > 90 andalso MaxFrames =< 120, MaxFrames),
    {ok, Text} = ft_ct:capture(fun() -> ferrotrace:report(S) end),
    ?assertMatch({match, _}, re:run(Text, "frames: [0-9]+ calls refused, a process had 120 return-trace frames open")),
    ok = ferrotrace:stop(S),
    ok = ferrotrace:release(S).

%% The report's `frames:' note names the process that reached the bound (its registered
%% name) and the function it nested, from the call entry's `max_frames_pid'.
-spec frames_note_names_the_process(config()) -> ok.
frames_note_names_the_process(_Config) ->
    {ok, S} = ferrotrace:calls({ft_frames_reader, count_down, 1}, #{duration => 120000}),
    Self = self(),
    P = spawn(fun() ->
                      true = register(ft_frames_deep_looper, self()),
                      done = ft_frames_reader:count_down(1000000),
                      Self ! {done, self()},
                      receive stop -> ok end
              end),
    receive {done, P} -> ok after 60000 -> ct:fail(count_down_not_done) end,
    #{events := #{frames_refused := Refused}, calls := [Call]} = ferrotrace:summary(S),
    ?assert(Refused > 0, Refused),
    ?assertMatch(#{max_frames_pid := P}, Call),
    {ok, Text} = ft_ct:capture(fun() -> ferrotrace:report(S) end),
    Pattern = io_lib:format("deepest: ~s ft_frames_deep_looper,\\s+[0-9]+ frames of\\s+ft_frames_reader:count_down/1",
                            [re:replace(pid_to_list(P), "[<>.]", "\\\\&", [global, {return, list}])]),
    ?assertMatch({match, _}, re:run(Text, Pattern), Text),
    P ! stop,
    ok = ferrotrace:stop(S),
    ok = ferrotrace:release(S).

%% Ten readers and a `'_'' session of every function: each reader's stack stays small.
-spec every_function_with_readers(config()) -> ok.
every_function_with_readers(_Config) ->
    Readers = [spawn(fun ft_frames_reader:reader/0) || _ <- lists:seq(1, 10)],
    {ok, S} = ferrotrace:calls({'_', '_', '_'}, #{duration => 120000, max_functions => 100000, max_overhead => none}),
    Max = lists:max([feed(P, ?MESSAGES div 10, 0) || P <- Readers]),
    ok = ferrotrace:stop(S),
    After = lists:max([words(P) || P <- Readers]),
    [exit(P, kill) || P <- Readers],
    ok = ferrotrace:release(S),
    ?assert(Max =< ?MAX_WORDS, {max_stack_words, Max}),
    ?assert(After =< ?MAX_WORDS, {stack_words_after, After}).

%%--------------------------------------------------------------------------------------

%% `Start' runs a reader; traced with `Spec', fed ?MESSAGES messages, its stack (sampled every
%% 100 messages) never passes ?MAX_WORDS, nor after the session; `handle/2' is still timed.
reader_stays_small(Start, Spec) ->
    reader_stays_small(Start, Spec, []).

%% ... and `FoundRunning' are the loops found while they ran: each reached the bound first.
reader_stays_small(Start, Spec, FoundRunning) ->
    {ok, S} = ferrotrace:calls(Spec, #{duration => 120000}),
    P = spawn(Start),
    Max = feed(P, ?MESSAGES, 0),
    [ok = ft_ct:poll(fun() -> lists:member(L, maps:get(loops, ferrotrace:summary(S))) end, 10000) || L <- FoundRunning],
    Summary = #{calls := Calls} = ferrotrace:summary(S),
    ok = ferrotrace:stop(S),
    After = words(P),
    exit(P, kill),
    ok = ferrotrace:release(S),
    ct:pal("max ~b words, after ~b; events ~p; loops ~p", [Max, After, maps:get(events, Summary), maps:get(loops, Summary)]),
    ?assert(Max =< ?MAX_WORDS, {max_stack_words, Max}),
    ?assert(After =< ?MAX_WORDS, {stack_words_after, After}),
    [Handle] = [C || C = #{mfa := {ft_frames_reader, handle, 2}} <- Calls],
    ?assertMatch(#{returns := R} when R > 0, Handle),
    [?assertMatch([#{max_frames := F}] when F >= 90 andalso F =< 120, [C || C = #{mfa := M} <- Calls, M =:= L])
     || L <- FoundRunning],
    ok.

%% Sends `N' messages to `P', sampling its stack every 100; waits for each hundred to be taken.
feed(P, 0, Max) ->
    max(Max, words(P));
feed(P, N, Max) ->
    P ! {data, 1},
    case N rem 100 of
        0 -> ok = ft_ct:poll(fun() -> message_queue(P) =:= 0 end, 10000),
             feed(P, N - 1, max(Max, words(P)));
        _ -> feed(P, N - 1, Max)
    end.

message_queue(P) ->
    {message_queue_len, L} = process_info(P, message_queue_len),
    L.

words(P) ->
    {stack_size, Words} = process_info(P, stack_size),
    Words.

watch(P, Max) ->
    receive
        {done, P} -> Max
    after 0 ->
        case process_info(P, stack_size) of
            {stack_size, W} -> watch(P, max(Max, W));
            undefined -> Max
        end
    end.
