%%% @doc The report's header (ferrotrace_report:header/2) on summaries made by hand.
-module(ferrotrace_report_tests).

% Not eunit.hrl: its generated test/0 has no spec (see ferrotrace_bad_input_tests).
-include_lib("stdlib/include/assert.hrl").

-export([slow_start_test/0, shed_count_test/0, births_line_test/0, tracing_share_test/0]).

summary(Start) ->
    #{id => 1, status => running, elapsed_ms => 5000, events => #{}, pairing => #{}, start => Start}.

header(Start) ->
    lists:flatten(io_lib:format("~ts", [ferrotrace_report:header(summary(Start), 200)])).

%% A start of a second or more says where its time went (the parts of 0.1 s or more); a
%% quick one says nothing.
-spec slow_start_test() -> ok.
slow_start_test() ->
    Slow = header(#{total_ms => 9519, tracing_ms => 9300, analysis_ms => 5, counting_ms => 150, calibration_ms => 0}),
    [Line] = [L || L <- string:split(Slow, "\n", all), string:prefix(L, "slow start:") =/= nomatch],
    ?assertEqual("slow start: the start took 9.5 s, patterns and flags set 9.3 s, calls counted for the budget 0.1 s", Line),
    %% The hold is its own part (tracing_ms is the rest of the keeper's tracing set up).
    Held = header(#{total_ms => 1429, tracing_ms => 101, holding_ms => 1000, analysis_ms => 59, counting_ms => 264,
                    calibration_ms => 0}),
    ?assertEqual(["slow start: the start took 1.4 s, patterns and flags set 0.1 s, hottest functions held back 1.0 s, "
                  "calls counted for the budget 0.3 s"],
                 [L || L <- string:split(Held, "\n", all), string:prefix(L, "slow start:") =/= nomatch]),
    Quick = header(#{total_ms => 320, tracing_ms => 150, analysis_ms => 5, counting_ms => 120, calibration_ms => 40}),
    ?assertEqual(nomatch, string:find(Quick, "slow start")),
    ?assertEqual(nomatch, string:find(header(#{}), "slow start")),
    ok.

%% The shed line counts every function off (`shed_now'), not only those the budget's log
%% keeps (the last 100): a start that held 196 back said 100.
-spec shed_count_test() -> ok.
shed_count_test() ->
    Log = [#{mfa => {m, list_to_atom("f" ++ integer_to_list(I)), 1}, rate => 1000 - I, shed_at => 0}
           || I <- lists:seq(1, 100)],
    Budget = #{max_overhead => 0.05, estimate => 0.03, rate => 1, model => "calibrated", rate_changes => [],
               rate_changes_total => 0, shed => Log, shed_now => 196},
    Text = lists:flatten(io_lib:format("~ts", [ferrotrace_report:header((summary(#{}))#{budget => Budget}, 200)])),
    [Line] = [L || L <- string:split(Text, "\n", all), string:prefix(L, "shed:") =/= nomatch],
    ?assertEqual("shed: 196 patterns off (calls/s when shed)", hd(string:split(Line, ", "))),
    %% The line wraps: the rest is on the lines under it.
    ?assertNotEqual(nomatch, string:find(Text, ", 186 more")),
    %% An older view without `shed_now': the log's count.
    Old = lists:flatten(io_lib:format("~ts", [ferrotrace_report:header((summary(#{}))#{budget => maps:remove(shed_now, Budget)}, 200)])),
    ?assertNotEqual(nomatch, string:find(Old, "shed: 100 patterns off")),
    %% The first moment says so on the budget's line, and only then.
    Cautious = lists:flatten(io_lib:format("~ts", [ferrotrace_report:header((summary(#{}))#{budget => Budget#{cautious => true}}, 200)])),
    ?assertNotEqual(nomatch, string:find(Cautious, "first moment: within half of it")),
    ?assertEqual(nomatch, string:find(Text, "first moment")),
    %% What the budget is a share of: the node's CPU, and how much of its schedulers it used.
    ?assertNotEqual(nomatch, string:find(Text, "budget: at most 5.0 % of the node's CPU, ")),
    Shared = lists:flatten(io_lib:format("~ts", [ferrotrace_report:header((summary(#{}))#{budget => Budget#{used => 0.62}}, 200)])),
    ?assertNotEqual(nomatch, string:find(Shared, "at most 5.0 % of the node's CPU (the node used 62 % of its schedulers)")),
    %% A rate that is a guess (shed where the fuse tripped, not counted) says so.
    Guess = lists:flatten(io_lib:format("~ts", [ferrotrace_report:header((summary(#{}))#{budget => Budget#{shed := [(hd(Log))#{guessed => true} | tl(Log)]}}, 200)])),
    ?assertNotEqual(nomatch, string:find(Guess, "m:f1/1 999/s (a guess) ")),
    ?assertEqual(nomatch, string:find(Text, "a guess")),
    ok.

%% What processes born with the session's flags cost (the budget's births) has its line where
%% it is a tenth of the budget or more, and says so where they alone are over it.
-spec births_line_test() -> ok.
births_line_test() ->
    Budget = #{max_overhead => 0.05, estimate => 0.045, rate => 1, model => "calibrated", rate_changes => [],
               rate_changes_total => 0, shed => [], shed_now => 0},
    Text = fun(B) -> lists:flatten(io_lib:format("~ts", [ferrotrace_report:header((summary(#{}))#{budget => B}, 200)])) end,
    Some = Text(Budget#{births => 0.021, born_per_s => 62000}),
    ?assertNotEqual(nomatch, string:find(Some, "births: 62.0 k processes a second born traced, 2.1 % (in the estimate), ")),
    ?assertEqual(nomatch, string:find(Some, "over the budget alone")),
    Over = Text(Budget#{births => 0.06, born_per_s => 180000}),
    ?assertNotEqual(nomatch, string:find(Over, "over the budget alone")),
    ?assertNotEqual(nomatch, string:find(Over, "pids => existing")),
    ?assertEqual(nomatch, string:find(Text(Budget#{births => 0.001, born_per_s => 3000}), "births:")),
    ?assertEqual(nomatch, string:find(Text(Budget), "births:")),
    ok.

%% The note under the table names a function whose median raw latency is at least half
%% its inner events' cost at the calibration (?MOSTLY_TRACING), and no other: 100 events
%% at 300 ns are 30 us, half of a 60 us median.
-spec tracing_share_test() -> ok.
tracing_share_test() ->
    Entry = fun(Name, P50) -> #{mfa => {m, Name, 0}, inner_events => #{mean => 100.0},
                                raw => #{p50 => P50}, p50 => P50}
            end,
    Calibration = #{call_ns => 400, return_ns => 200},
    Text = lists:flatten(io_lib:format("~ts", [ferrotrace_report_notes:tracing_shares(
                                                   [Entry(thin, 40000), Entry(half, 60000), Entry(thick, 60001),
                                                    Entry(unknown, undefined)], Calibration, 200)])),
    ?assertNotEqual(nomatch, string:find(Text, "m:thin/0: 75 % of this latency is tracing: 100 traced events inside each call (taken out)")),
    ?assertNotEqual(nomatch, string:find(Text, "m:half/0: 50 %")),
    ?assertEqual(nomatch, string:find(Text, "thick")),
    ?assertEqual(nomatch, string:find(Text, "unknown")),
    %% Without a calibration, nothing to weigh.
    ?assertEqual([], ferrotrace_report_notes:tracing_shares([Entry(thin, 40000)], pending, 200)),
    ok.
