%%% @doc `make bench''s line for the probe effect's calibration: what a calls/2 session
%%% spends at its start measuring what a traced call costs its caller
%%% (ferrotrace_calibrate), and the per-event figures it measured. Five calibrations in a
%%% row, their medians, and the range of the time taken; then the node's first calibration
%%% (`ferrotrace:calibrate()' with none stored: the median of three), and its time.
-module(ferrotrace_calibration_cost).

-export([main/0]).

-define(RUNS, 5).

-spec main() -> ok.
main() ->
    Results = [ferrotrace_calibrate:measure(#{}) || _ <- lists:seq(1, ?RUNS)],
    case [C || {ok, C} <- Results] of
        [] ->
            io:format("calibration: failed: ~0tp~n", [hd(Results)]);
        Calibrations ->
            Median = fun(Key) -> median([maps:get(Key, C) || C <- Calibrations]) end,
            Took = [maps:get(took_us, C) / 1000 || C <- Calibrations],
            io:format("calibration (each calls/2 session's start): ~.1f ms (median of ~b, ~.1f to ~.1f); "
                      "a traced call costs its caller ~b ns for the call event + ~b ns for the return "
                      "(untraced call ~b ns, ~b calls per phase)~n",
                      [median(Took), length(Calibrations), lists:min(Took), lists:max(Took),
                       Median(call_ns), Median(return_ns), Median(untraced_ns), Median(calls)])
    end,
    %% A fresh node: nothing stored yet.
    {Us, First} = timer:tc(ferrotrace, calibrate, []),
    case First of
        {ok, #{pair_ns := Pair} = C1} ->
            io:format("calibration: a node's first (the median of ~b) took ~.1f ms, a pair ~b ns~n",
                      [maps:get(median_of, C1, 1), Us / 1000, Pair]);
        {error, _} = Error ->
            io:format("calibration: a node's first failed: ~0tp~n", [Error])
    end.

median(Values) ->
    lists:nth((length(Values) + 1) div 2, lists:sort(Values)).
