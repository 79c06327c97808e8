%%% @doc Common Test suite for `ferrotrace:watch/2', the live view: screens captured through
%%% a group leader process, with a known number of calls driven into each interval.
%%%
%%% The workload is synchronised with the screens, not with the clock: the calls of
%%% interval K are made after screen K-1 was printed (so after its read) and long before
%%% the next read (intervals of 500 ms; a batch takes microseconds). The one timing
%%% assumption: a batch made right after a screen finishes within the interval.
-module(ferrotrace_watch_SUITE).

-include("support/ft_ct.hrl").

-export([three_intervals/1, ends_when_the_session_stops/1, bad_sessions_and_options/1,
         narrow_width/1]).

-define(F, {ft_test_target, f, 1}).
-define(G, {ft_test_target, g, 1}).
-define(LONG, 60000).
-define(WIDTH, 60).

suite() ->
    [{ct_hooks, [{ft_ct, [ft_test_target]}]}].

all() ->
    [three_intervals, ends_when_the_session_stops, bad_sessions_and_options, narrow_width].

%%--------------------------------------------------------------------------------------

%% Three intervals with 7, 13 and 29 calls of f/1 (and 2 of g/1, left out by top => 1):
%% exactly three screens, each with its own interval's count, summing to the session's
%% total; no line wider than the width.
-spec three_intervals(config()) -> ok.
three_intervals(_Config) ->
    {ok, S} = ferrotrace:calls([?F, ?G], #{duration => ?LONG, name => watched}),
    Batches = [7, 13, 29],
    {Watcher, GL} = start_watch(watched, [{interval, 500}, {count, 3}, {top, 1},
                                          {width, ?WIDTH}]),
    Screens = lists:map(
                fun({K, N}) ->
                        %% In interval K: the read of screen K-1 was made, and the watch
                        %% sleeps until the end of interval K.
                        ok = ft_ct:poll(fun() -> where(Watcher) =:= sleeping end, 5000),
                        ok = ft_test_target:call_f(N),
                        ok = ft_test_target:call_g(2),
                        ?assertEqual({sleeping, 0}, {where(Watcher), pending_output(GL)},
                                     {batch, K, "made too late"}),
                        next_output(GL, 5000)
                end, lists:zip(lists:seq(1, 3), Batches)),
    ?assertEqual(ok, watch_result(Watcher, 5000)),
    ?assertEqual([], rest_output(GL), "nothing after the third screen"),
    Counts = [screen_count(K, Screen, "ft_test_target:f/1")
              || {K, Screen} <- lists:zip(lists:seq(1, 3), Screens)],
    ?assertEqual(Batches, Counts),
    #{calls := Calls} = ferrotrace:summary(S),
    [Total] = [C || #{mfa := ?F, count := C} <- Calls],
    ?assertEqual(Total, lists:sum(Counts)),
    [begin
         ?assertEqual(nomatch, re:run(Screen, "ft_test_target:g/1"), Screen),
         ?assertMatch({match, _}, re:run(Screen, "1 more functions", [])),
         %% The header counts every function of the interval: f's batch and g's two.
         ?assertMatch({match, _}, re:run(Screen, [", ", integer_to_list(N + 2), " calls;"]))
     end || {Screen, N} <- lists:zip(Screens, Batches)],
    ok = within_width(Screens, ?WIDTH).

%% A session that the engine stops during the watch (here its event limit, reached after
%% the second screen) ends it with a line saying why; a stopped session ends it at once.
-spec ends_when_the_session_stops(config()) -> ok.
ends_when_the_session_stops(_Config) ->
    {ok, S} = ferrotrace:calls(?F, #{duration => ?LONG, max_events => 10}),
    {Watcher, GL} = start_watch(S, #{interval => 300}),
    First = [next_output(GL, 5000) || _ <- [1, 2]],
    [ft_test_target:f(I) || I <- lists:seq(1, 20)],
    ?assertEqual(ok, watch_result(Watcher, 10000)),
    Text = iolist_to_binary([First | rest_output(GL)]),
    ?assertMatch({match, _}, re:run(Text, "stopped \\(limit\\), watch ends\n$"), Text),
    Screens = length(binary:matches(Text, <<"ferrotrace watch #">>)),
    %% The two screens taken, and at most one made before the watch saw the stop.
    ?assert(Screens >= 2 andalso Screens =< 3, {screens, Screens, Text}),
    {Watcher2, GL2} = start_watch(S, #{}),
    ?assertEqual(ok, watch_result(Watcher2, 5000)),
    ?assertMatch([<<"ferrotrace watch: session ", _/binary>>],
                 [iolist_to_binary(O) || O <- rest_output(GL2)]),
    ok = within_width([Text], 80).

-spec bad_sessions_and_options(config()) -> ok.
bad_sessions_and_options(_Config) ->
    ?assertEqual({error, {no_such_session, nobody}}, ferrotrace:watch(nobody)),
    ?assertEqual({error, {bad_session, "s"}}, ferrotrace:watch("s", #{})),
    {ok, S} = ferrotrace:calls(?F, #{duration => ?LONG}),
    ?assertMatch({error, {bad_option, {interval, 0, <<_/binary>>}}},
                 ferrotrace:watch(S, #{interval => 0})),
    ?assertMatch({error, {bad_option, {sort, mean, <<"count, total, p99 or max">>}}},
                 ferrotrace:watch(S, [{sort, mean}])),
    ?assertMatch({error, {bad_option, {count, 0, <<_/binary>>}}},
                 ferrotrace:watch(S, #{count => 0})),
    ?assertMatch({error, {bad_option, {top, all, <<_/binary>>}}},
                 ferrotrace:watch(S, #{top => all})),
    ?assertMatch({error, {bad_option, {width, 20, <<_/binary>>}}},
                 ferrotrace:watch(S, #{width => 20})),
    ?assertMatch({error, {unknown_option, histograms, <<_/binary>>}},
                 ferrotrace:watch(S, #{histograms => 1})),
    ?assertMatch({error, {bad_options, [x], <<_/binary>>}}, ferrotrace:watch(S, [x])),
    ok = ferrotrace:release(S),
    ?assertMatch({error, {released, S, _}}, ferrotrace:watch(S, #{count => 1})).

%% At 40 columns, with a long function name: lines are cut, never wrapped; the sort column
%% stays.
-spec narrow_width(config()) -> ok.
narrow_width(_Config) ->
    {ok, S} = ferrotrace:calls(?F, #{duration => ?LONG}),
    {Watcher, GL} = start_watch(S, #{interval => 200, count => 1, width => 40, sort => max}),
    ok = ft_test_target:call_f(3),
    Screen = next_output(GL, 5000),
    ?assertEqual(ok, watch_result(Watcher, 5000)),
    ok = within_width([Screen], 40),
    ?assertMatch({match, _}, re:run(Screen, "MAX ns|MAX us|MAX ms")),
    ?assertEqual(3, screen_count(1, Screen, "ft_test_target:f/1")).

%%--------------------------------------------------------------------------------------

%% Runs watch/2 in a process whose group leader forwards the output here; returns once the
%% watch sleeps in its first interval (the first read was made).
start_watch(Session, Options) ->
    Self = self(),
    GL = spawn_link(fun() -> capture(Self) end),
    Watcher = spawn_link(fun() ->
                                 group_leader(GL, self()),
                                 Self ! {watch_done, self(), ferrotrace:watch(Session, Options)}
                         end),
    ok = ft_ct:poll(fun() -> where(Watcher) =/= starting end, 5000),
    {Watcher, GL}.

%% sleeping: waiting for the end of an interval; done: returned.
where(Pid) ->
    case erlang:process_info(Pid, [current_function, status]) of
        [{current_function, {ferrotrace_watch, sleep, 1}}, {status, waiting}] -> sleeping;
        undefined -> done;
        _ -> starting
    end.

watch_result(Watcher, Ms) ->
    receive {watch_done, Watcher, Result} -> Result
    after Ms -> ct:fail({watch_did_not_end_within, Ms})
    end.

next_output(GL, Ms) ->
    receive {watch_output, GL, Text} -> Text
    after Ms -> ct:fail({no_screen_within, Ms})
    end.

pending_output(GL) ->
    {messages, Messages} = erlang:process_info(self(), messages),
    length([T || {watch_output, G, T} <- Messages, G =:= GL]).

%% Everything printed and not yet taken (the capture process answers `sync' after every
%% request before it).
rest_output(GL) ->
    GL ! {sync, self()},
    receive {synced, GL} -> ok after 5000 -> ct:fail(capture_process_stuck) end,
    rest_output(GL, []).

rest_output(GL, Acc) ->
    receive {watch_output, GL, Text} -> rest_output(GL, [Text | Acc])
    after 0 -> lists:reverse(Acc)
    end.

%% A group leader: each output request's text goes to `Test' as one message.
capture(Test) ->
    receive
        {io_request, From, ReplyAs, {get_geometry, _}} ->
            From ! {io_reply, ReplyAs, {error, enotsup}},
            capture(Test);
        {io_request, From, ReplyAs, Request} ->
            Test ! {watch_output, self(), unicode:characters_to_binary(text(Request))},
            From ! {io_reply, ReplyAs, ok},
            capture(Test);
        {sync, From} ->
            From ! {synced, self()},
            capture(Test)
    end.

text({put_chars, unicode, Chars}) -> Chars;
text({put_chars, latin1, Chars}) -> unicode:characters_to_list(iolist_to_binary(Chars), latin1);
text({put_chars, Chars}) -> text({put_chars, latin1, Chars});
text({put_chars, unicode, M, F, A}) -> apply(M, F, A);
text({put_chars, latin1, M, F, A}) -> text({put_chars, latin1, apply(M, F, A)});
text(Other) -> io_lib:format("unexpected io request ~p~n", [Other]).

%% The screen's number in its header, and the count of `Function' in its table.
screen_count(K, Screen, Function) ->
    [Header | _] = binary:split(Screen, <<"\n">>),
    ?assertMatch({match, _}, re:run(Header, ["^ferrotrace watch #", integer_to_list(K), " "]),
                 Screen),
    ?assertEqual(1, length(binary:matches(Screen, <<"ferrotrace watch #">>)), Screen),
    case re:run(Screen, ["^", Function, " +([0-9]+) "], [multiline, {capture, all_but_first, list}]) of
        {match, [Count]} -> list_to_integer(Count);
        nomatch -> ct:fail({no_row, Function, Screen})
    end.

within_width(Texts, Width) ->
    Lines = [L || T <- Texts, L <- binary:split(iolist_to_binary(T), <<"\n">>, [global])],
    ?assertEqual([], [L || L <- Lines, byte_size(L) > Width]),
    ?assertEqual([], [L || L <- Lines, lists:any(fun(C) -> C > 126 orelse C < 32 end,
                                                 binary_to_list(L))]),
    ok.
