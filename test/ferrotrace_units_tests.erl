%%% @doc Times given with their unit (`"2s"', `"20ms"'): read into each option's own unit,
%%% the same session as the integer gives; and the report's note on a duration that ran out
%%% within 100 ms (seconds typed as milliseconds).
-module(ferrotrace_units_tests).

-include_lib("stdlib/include/assert.hrl").

-export([units_reach_the_session_test/0, short_duration_noted_test/0]).

-define(F, {ft_test_target, f, 1}).

-spec units_reach_the_session_test() -> ok.
units_reach_the_session_test() ->
    {module, ft_test_target} = code:ensure_loaded(ft_test_target),
    {ok, S} = ferrotrace:calls(?F, #{duration => "1h", keep => "10m", threshold => "1ms",
                                     max_rate => {100000, "1s"}, intervals => "1s",
                                     capture => #{slower_than => "50ms", every => "2s"},
                                     trees => #{slower_than => "20ms"}}),
    try
        %% An hour: still running (an integer 1 would have stopped it at once; "1h" read as
        %% anything under a second would too).
        timer:sleep(200),
        ?assertMatch(#{status := running}, ferrotrace:summary(S)),
        {ok, _, _, #{intervals := P}} = ferrotrace_registry:lookup(S),
        ?assertMatch({ok, 1000, _}, ferrotrace_intervals:read(P, native))
    after
        ok = ferrotrace:release(S)
    end,
    %% "150ms": stops by itself, well within the margin a loaded machine needs.
    {ok, Short} = ferrotrace:calls(?F, #{duration => "150ms"}),
    ok = ft_ct:poll(fun() -> maps:get(status, ferrotrace:summary(Short)) =:= stopped end, 10000),
    ?assertMatch(#{stop_reason := duration}, ferrotrace:summary(Short)),
    ok = ferrotrace:release(Short).

-spec short_duration_noted_test() -> ok.
short_duration_noted_test() ->
    {ok, S} = ferrotrace:calls(?F, #{duration => 10}),
    ok = ft_ct:poll(fun() -> maps:get(status, ferrotrace:summary(S)) =:= stopped end, 10000),
    Text = iolist_to_binary(ferrotrace:format(S)),
    ok = ferrotrace:release(S),
    ?assertNotEqual(nomatch, binary:match(Text, <<"durations are in milliseconds">>)),
    %% A session stopped by hand says nothing of it.
    {ok, Stopped} = ferrotrace:calls(?F, #{duration => 60000}),
    ok = ferrotrace:stop(Stopped),
    Plain = iolist_to_binary(ferrotrace:format(Stopped)),
    ok = ferrotrace:release(Stopped),
    ?assertEqual(nomatch, binary:match(Plain, <<"durations are in milliseconds">>)).
