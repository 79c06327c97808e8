-module(ferrotrace_time_tests).
%%% @doc ferrotrace_time: times with their unit, read into an option's unit.
%% Not eunit.hrl: its generated test/0 has no spec (see ferrotrace_bad_input_tests).
-include_lib("stdlib/include/assert.hrl").

-export([integers_keep_their_unit_test/0, units_test/0, refused_test/0, accepted_names_the_unit_test/0]).

-spec integers_keep_their_unit_test() -> ok.
integers_keep_their_unit_test() ->
    ?assertEqual({ok, 10}, ferrotrace_time:to(10, millisecond)),
    ?assertEqual({ok, 0}, ferrotrace_time:to(0, nanosecond)),
    ?assertEqual(error, ferrotrace_time:to(-1, millisecond)).

-spec units_test() -> ok.
units_test() ->
    ?assertEqual({ok, 50}, ferrotrace_time:to("50ms", millisecond)),
    ?assertEqual({ok, 10000}, ferrotrace_time:to(<<"10s">>, millisecond)),
    ?assertEqual({ok, 2500}, ferrotrace_time:to("2.5s", millisecond)),
    ?assertEqual({ok, 120000}, ferrotrace_time:to("2m", millisecond)),
    ?assertEqual({ok, 120000}, ferrotrace_time:to("2min", millisecond)),
    ?assertEqual({ok, 3600000}, ferrotrace_time:to("1h", millisecond)),
    ?assertEqual({ok, 50000000}, ferrotrace_time:to("50ms", nanosecond)),
    ?assertEqual({ok, 100000}, ferrotrace_time:to("100us", nanosecond)),
    ?assertEqual({ok, 100000}, ferrotrace_time:to(<<"100µs"/utf8>>, nanosecond)),
    ?assertEqual({ok, 250}, ferrotrace_time:to("250ns", nanosecond)),
    ?assertEqual({ok, 1}, ferrotrace_time:to("1 ms", millisecond)),
    %% Rounded to the option's unit.
    ?assertEqual({ok, 0}, ferrotrace_time:to("100us", millisecond)),
    ?assertEqual({ok, 2}, ferrotrace_time:to("1500us", millisecond)).

-spec refused_test() -> ok.
refused_test() ->
    lists:foreach(fun(V) -> ?assertEqual(error, ferrotrace_time:to(V, millisecond)) end,
                  ["10", "ms", "-5s", "10 seconds", "1e3ms", "10S", "", [16#110000], <<255>>, 1.5,
                   {10, second}, '10s', [$1, $0, foo], "5d", [$1, $s | $x],
                   %% Refused at once, not read (the fuzz suite's seed 755 hung on one).
                   binary:copy(<<"1">>, 10485760), lists:duplicate(1000000, $1) ++ "s"]),
    ?assertEqual(error, ferrotrace_time:to("1s", sort)).

-spec accepted_names_the_unit_test() -> ok.
accepted_names_the_unit_test() ->
    ?assertMatch(<<"an integer of milliseconds", _/binary>>, ferrotrace_time:accepted(millisecond)),
    ?assertMatch(<<"an integer of nanoseconds", _/binary>>, ferrotrace_time:accepted(nanosecond)).
