%%% @private
%%% @doc Formats a ferrotrace summary as text: a table of functions sorted by total time and,
%%% for the top functions, power-of-two latency histograms drawn like DTrace's `quantize'.
-module(ferrotrace_report).

-export([format/2, format_ns/1]).

-define(TOP_HISTOGRAMS, 3).
-define(BAR_WIDTH, 40).

%% @doc The report for `Summary'; `Histogram(MFA)' gives a function's buckets.
-spec format(map(), fun((mfa()) -> [ferrotrace:bucket()] | {error, term()})) -> iolist().
format(Summary = #{calls := Calls}, Histogram) ->
    [header(Summary), "\n", table(Calls), "\n",
     [quantize(MFA, Histogram(MFA)) || #{mfa := MFA, returns := R, exceptions := E}
                                           <- lists:sublist(Calls, ?TOP_HISTOGRAMS), R + E > 0]].

header(#{id := Id, status := Status, stop_reason := Reason, elapsed_ms := Ms,
         events := #{seen := Seen, aggregated := Aggregated, dropped := Dropped,
                     sampled_out := Sampled, limited := Limited},
         pairing := #{unmatched_returns := Unmatched, abandoned_calls := Abandoned}}) ->
    StatusText = case Status of
                     running -> "running";
                     stopped -> io_lib:format("stopped (~p)", [Reason])
                 end,
    io_lib:format("ferrotrace session ~p: ~s after ~.1f s~n"
                  "events: ~b seen, ~b aggregated, ~b dropped (ring full), ~b sampled out, "
                  "~b over a limit~n"
                  "pairing: ~b returns without a call, ~b calls without a return~n",
                  [Id, StatusText, Ms / 1000, Seen, Aggregated, Dropped, Sampled, Limited,
                   Unmatched, Abandoned]).

table([]) ->
    "no traced calls yet\n";
table(Calls) ->
    Columns = ["COUNT", "EXC", "MEAN", "P50", "P90", "P99", "P99.9", "MAX", "TOTAL"],
    Rows = [[mfa_text(MFA), integer_to_list(Count), integer_to_list(Exc),
             format_ns(Mean), format_ns(P50), format_ns(P90), format_ns(P99), format_ns(P999),
             format_ns(Max), format_ns(Total)]
            || #{mfa := MFA, count := Count, exceptions := Exc, mean := Mean, p50 := P50,
                 p90 := P90, p99 := P99, p999 := P999, max := Max, total := Total} <- Calls],
    Width = lists:max([length("FUNCTION") | [length(hd(Row)) || Row <- Rows]]),
    Line = fun([Name | Cells]) ->
                   [string:pad(Name, Width), [string:pad(C, 10, leading) || C <- Cells], "\n"]
           end,
    [Line(["FUNCTION" | Columns]) | [Line(Row) || Row <- Rows]].

quantize(MFA, {error, Reason}) ->
    io_lib:format("~s: no histogram (~p)~n", [mfa_text(MFA), Reason]);
quantize(_MFA, []) ->
    [];
quantize(MFA, Buckets) ->
    Total = lists:sum([C || {_, _, C} <- Buckets]),
    Lows = [L || {L, _, _} <- Buckets],
    %% Every power of two from one below the first bucket to one above the last, as DTrace.
    First = max(1, lists:min(Lows) div 2),
    Last = lists:max(Lows) * 2,
    Counts = maps:from_list([{L, C} || {L, _, C} <- Buckets]),
    Rows = [begin
                Count = maps:get(Low, Counts, 0),
                Bar = lists:duplicate(round(?BAR_WIDTH * Count / Total), $@),
                io_lib:format("~16s |~-40s ~b~n", [format_ns(Low), Bar, Count])
            end || Low <- powers_of_two(First, Last)],
    [io_lib:format("~n  ~s  latency~n~16s  ~-41s ~s~n",
                   [mfa_text(MFA), "value", "------------- Distribution -------------", "count"]),
     Rows].

powers_of_two(Low, High) when Low > High -> [];
powers_of_two(Low, High) -> [Low | powers_of_two(Low * 2, High)].

mfa_text({M, F, A}) ->
    lists:flatten(io_lib:format("~p:~p/~b", [M, F, A])).

%% @doc Nanoseconds in a short human unit: `850 ns', `12.3 us', `4.07 ms', `1.20 s'.
-spec format_ns(non_neg_integer() | undefined) -> string().
format_ns(undefined) -> "-";
format_ns(Ns) when Ns < 1000 -> integer_to_list(Ns) ++ " ns";
format_ns(Ns) when Ns < 1000000 -> unit(Ns / 1.0e3, "us");
format_ns(Ns) when Ns < 1000000000 -> unit(Ns / 1.0e6, "ms");
format_ns(Ns) -> unit(Ns / 1.0e9, "s").

unit(Value, Unit) when Value < 10 -> lists:flatten(io_lib:format("~.2f ~s", [Value, Unit]));
unit(Value, Unit) when Value < 100 -> lists:flatten(io_lib:format("~.1f ~s", [Value, Unit]));
unit(Value, Unit) -> integer_to_list(round(Value)) ++ " " ++ Unit.
