%%% @doc The text of the slow calls and of the flight recorder, from made-up entries.
-module(ferrotrace_slow_tests).

% Not eunit.hrl: its generated test/0 has no spec (see ferrotrace_bad_input_tests).
-include_lib("stdlib/include/assert.hrl").

-export([lines_fit_the_width_test/0, no_slowest_no_lines_test/0, names_test/0, format_time_test/0, recent_lines_test/0]).

-spec entry([map()]) -> map().
entry(Slowest) ->
    #{mfa => {m, f, 1}, slowest => Slowest, slow_calls_dropped => 2}.

-spec call(pid(), non_neg_integer(), return | exception) -> map().
call(Pid, D, R) ->
    #{pid => Pid, duration => D, started_at => 1795414180627476, result => R}.

-spec lines_fit_the_width_test() -> term().
lines_fit_the_width_test() ->
    Calls = [call(self(), 60515667, return), call(self(), 1500, exception),
             call(self(), 900, return), call(self(), 10, return)],
    Text = lists:flatten(io_lib:format("~ts", [ferrotrace_slow:lines(entry(Calls), 40)])),
    Lines = string:split(string:trim(Text), "\n", all),
    %% A header and the top 3.
    ?assertEqual(4, length(Lines)),
    [?assert(string:length(L) =< 40, L) || L <- Lines],
    ?assertNotEqual(nomatch, string:find(Text, "60.5 ms")),
    ?assertNotEqual(nomatch, string:find(Text, "3 of 4 kept")),
    ?assertEqual(nomatch, string:find(Text, "10 ns")).

-spec no_slowest_no_lines_test() -> term().
no_slowest_no_lines_test() ->
    ?assertEqual([], ferrotrace_slow:lines(#{mfa => {m, f, 1}}, 80)),
    ?assertEqual([], ferrotrace_slow:lines(entry([]), 80)).

-spec names_test() -> term().
names_test() ->
    register(ferrotrace_slow_tests_name, self()),
    try
        ?assertEqual(pid_to_list(self()) ++ " ferrotrace_slow_tests_name",
                     ferrotrace_slow:process_name(self()))
    after
        unregister(ferrotrace_slow_tests_name)
    end,
    %% A pid of another node (as in a merged summary) is printed, not looked up.
    Remote = binary_to_term(<<131, 88, 100, 0, 13, "other@nowhere", 0:32, 0:32, 0:32>>),
    ?assertEqual(pid_to_list(Remote), ferrotrace_slow:process_name(Remote)).

-spec format_time_test() -> term().
format_time_test() ->
    ?assertMatch({match, _}, re:run(ferrotrace_slow:format_time(1795414180627476),
                                    "^\\d\\d:\\d\\d:\\d\\d\\.627476$")),
    ?assertMatch({match, _}, re:run(ferrotrace_slow:format_time(1795414180000001),
                                    "\\.000001$")).

-spec recent_lines_test() -> term().
recent_lines_test() ->
    Events = [#{at => 1795414180627476, pid => self(), mfa => {m, f, 1}, event => call,
                duration => undefined},
              #{at => 1795414180627999, pid => self(), mfa => {m, f, 1}, event => return,
                duration => 523000},
              #{at => 1795414180628000, pid => self(), mfa => {m, g, 0}, event => exception,
                duration => undefined}],
    [L1, L2, L3] = string:split(string:trim(lists:flatten(io_lib:format("~ts", [ferrotrace_recent:lines(Events)]))), "\n", all),
    P = pid_to_list(self()),
    ?assertEqual(" " ++ P ++ " m:f/1", string:slice(L1, 15)),
    ?assertEqual(" " ++ P ++ " m:f/1 --> return (523 us)", string:slice(L2, 15)),
    ?assertEqual(" " ++ P ++ " m:g/0 --> exception", string:slice(L3, 15)).
