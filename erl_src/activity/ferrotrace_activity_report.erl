%%% @doc The report sections of activity (the event kinds other than calls): one per kind in the
%%% summary (`messages', `scheduling', `gc', `processes', `ports'), each with its counts,
%%% its top processes (named, see {@link ferrotrace_activity:name/1}) and quantize
%%% histograms drawn like DTrace's. Every line keeps to the report's `width', as the calls
%%% table does: names print whole where it allows and are shortened in the middle where not.
-module(ferrotrace_activity_report).

-export([format/3]).

%% @doc The sections for the kinds present in `Summary'; `Histogram(Series)' gives the
%% buckets of a series (see `ferrotrace:histogram/2'); no line is longer than `Width'.
-spec format(map(), fun((ferrotrace_activity:series()) -> [ferrotrace:bucket()] | {error, term()}),
             pos_integer()) -> iolist().
format(Summary, Histogram, Width) ->
    Text = [split(maps:get(calls, Summary, []), Width) |
            [section(Key, Figures, Histogram, Width) || Key <- [messages, scheduling, gc, processes, ports],
                                                      {ok, Figures} <- [maps:find(Key, Summary)]]],
    %% Names were fitted where they stand; counts and reasons that run past are cut.
    [[ferrotrace_text:cut(Line, Width), "\n"] || Line <- lines(unicode:characters_to_list(Text))].

lines(Text) ->
    case string:split(Text, "\n", all) of
        [[]] -> [];
        Lines -> [L || L <- lists:droplast(Lines)] ++ [lists:last(Lines) || lists:last(Lines) =/= []]
    end.

%% Why the calls were slow: each function's latency split into running, descheduled and GC.
split(Calls, Width) ->
    case [C || C = #{split := _} <- Calls] of
        [] -> [];
        Split ->
            ["\nwhy slow (p50 / p99 of each part of a call's latency):\n",
             [io_lib:format("  ~ts~n    running ~s / ~s, descheduled ~s / ~s, gc ~s / ~s~n",
                            [ferrotrace_text:shorten(location(M), Width - 2),
                             ns(P50R), ns(P99R), ns(P50D), ns(P99D), ns(P50G), ns(P99G)])
              || #{mfa := M, split := #{running := #{p50 := P50R, p99 := P99R},
                                         descheduled := #{p50 := P50D, p99 := P99D},
                                         gc := #{p50 := P50G, p99 := P99G}}} <- lists:sublist(Split, 10)]]
    end.

section(messages, M, H, W) ->
    [io_lib:format("~nmessages: ~b sent, ~b received, ~b receive timeouts, ~b to dead processes~n",
                   [maps:get(sent, M), maps:get(received, M), maps:get(timeouts, M), maps:get(to_dead, M)]),
     dist("  size (words)", maps:get(size_words, M), words),
     case maps:get(size_capped, M) of
         0 -> [];
         N -> io_lib:format("  ~b sizes are lower bounds (too large to walk)~n", [N])
     end,
     dist("  wakeup", maps:get(wakeup, M), ns),
     top("  top senders", maps:get(top_senders, M), W, fun(E) -> io_lib:format("~b msgs, ~b words", [maps:get(count, E), maps:get(words, E)]) end),
     top("  top receivers", maps:get(top_receivers, M), W, fun(E) -> io_lib:format("~b msgs, ~b words", [maps:get(count, E), maps:get(words, E)]) end),
     top("  slowest to wake (total wakeup)", maps:get(top_wakeup, M), W, fun(E) -> io_lib:format("~b wakeups, ~s total, max ~s", [maps:get(count, E), ns(maps:get(total, E)), ns(maps:get(max, E))]) end),
     quantize("message size (words)", H(size_words), words, W),
     quantize("wakeup latency", H(wakeup), ns, W)];
section(scheduling, S, H, W) ->
    ["\nscheduling:\n",
     dist("  run slice", maps:get(run_slice, S), ns),
     top("  top CPU", maps:get(top_cpu, S), W, fun(E) -> io_lib:format("~s in ~b slices", [ns(maps:get(total, E)), maps:get(count, E)]) end),
     case maps:get(out_locations, S) of
         [] -> [];
         Locations ->
             ["  scheduled out in:\n",
              [io_lib:format("    ~8b  ~ts~n", [C, ferrotrace_text:shorten(location(At), W - 14)])
               || #{mfa := At, count := C} <- lists:sublist(Locations, 10)]]
     end,
     quantize("run slice", H(run_slice), ns, W)];
section(gc, G, H, W) ->
    [io_lib:format("~ngc: ~b words reclaimed~n", [maps:get(reclaimed_words, G)]),
     dist("  minor", maps:get(minor, G), ns),
     dist("  major", maps:get(major, G), ns),
     top("  top pause", maps:get(top_pause, G), W, fun(E) -> io_lib:format("~s in ~b collections, max ~s", [ns(maps:get(total, E)), maps:get(count, E), ns(maps:get(max, E))]) end),
     quantize("minor GC pause", H({gc, minor}), ns, W),
     quantize("major GC pause", H({gc, major}), ns, W)];
section(processes, P, H, W) ->
    [io_lib:format("~nprocesses: ~b spawned, ~b exited~n", [maps:get(spawned, P), maps:get(exited, P)]),
     case maps:get(exit_reasons, P) of
         [] -> [];
         Reasons -> ["  exit reasons: ", lists:join(", ", [io_lib:format("~0tp ~b", [R, N]) || {R, N} <- Reasons]), "\n"]
     end,
     dist("  lifetime", maps:get(lifetime, P), ns),
     quantize("process lifetime", H(lifetime), ns, W)];
section(ports, P, H, W) ->
    [io_lib:format("~nports: ~b opened, ~b closed~n", [maps:get(opened, P), maps:get(closed, P)]),
     dist("  run slice", maps:get(run_slice, P), ns),
     quantize("port run slice", H({ports, run_slice}), ns, W)].

dist(_Title, #{count := 0}, _Unit) ->
    [];
dist(Title, #{count := N, p50 := P50, p99 := P99, max := Max}, Unit) ->
    io_lib:format("~s: ~b, p50 ~s, p99 ~s, max ~s~n", [Title, N, value(P50, Unit), value(P99, Unit), value(Max, Unit)]).

value(V, ns) -> ns(V);
value(V, words) -> integer_to_list(V).

ns(V) -> ferrotrace_text:format_ns(V).

%% The top processes: a name column as wide as the longest name the width allows.
top(_Title, [], _Width, _Text) ->
    [];
top(Title, Entries, Width, Text) ->
    [Title, ":\n",
     [[Line, "\n"] || Line <- ferrotrace_text:table("    ", [[who(E), Text(E)] || E <- lists:sublist(Entries, 5)],
                                                    [name, left], Width)]].

who(#{pid := Pid, name := Pid}) -> io_lib:format("~p", [Pid]);
who(#{pid := Pid, name := Name}) -> io_lib:format("~0tp ~p", [Name, Pid]);
who(#{pid := Pid}) -> io_lib:format("~p", [Pid]).

location(undefined) -> "(unknown)";
location(MFA) -> unicode:characters_to_list(ferrotrace_names:mfa(MFA)).

%% DTrace's quantize: a row per power of two from one below the first bucket to one above
%% the last.
quantize(_Title, {error, _}, _Unit, _Width) ->
    [];
quantize(_Title, [], _Unit, _Width) ->
    [];
quantize(Title, Buckets, Unit, Width) ->
    Bar = max(10, min(40, Width - 30)),
    Total = lists:sum([C || {_, _, C} <- Buckets]),
    Counts = maps:from_list([{L, C} || {L, _, C} <- Buckets]),
    Lows = [L || {L, _, _} <- Buckets],
    First = case lists:min(Lows) of 0 -> 0; Min -> max(1, Min div 2) end,
    Last = max(1, lists:max(Lows) * 2),
    Rows = [begin
                Count = maps:get(Low, Counts, 0),
                Ats = lists:duplicate(round(Bar * Count / max(Total, 1)), $@),
                [string:pad(value(Low, Unit), 12, leading), " |", string:pad(Ats, Bar), " ",
                 integer_to_list(Count), "\n"]
            end || Low <- rows(First, Last)],
    [io_lib:format("~n  ~s~n", [Title]),
     string:pad("value", 12, leading), "  ", string:pad(" Distribution ", Bar, both, $-), " count\n",
     Rows].

rows(0, Last) -> [0 | rows(1, Last)];
rows(Low, Last) when Low > Last -> [];
rows(Low, Last) -> [Low | rows(Low * 2, Last)].
