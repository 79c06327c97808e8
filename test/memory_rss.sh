#!/bin/sh
# RSS of a node (default allocator settings) before, during and after a broad session with
# `args => true`: 2,000 processes each hold a call open with a 70 KB argument, and four
# processes call `lists' functions with large arguments, traced as `{lists, '_', '_'}'.
# Run after `rebar3 as test compile` (or `rebar3 ct`); `FERROTRACE_NO_TRIM=1 test/memory_rss.sh`
# measures without the malloc_trim a stop or release does.
cd "$(dirname "$0")/.." || exit 1
exec erl -noshell -pa _build/test/lib/ferrotrace/ebin -pa _build/test/lib/ferrotrace/test -eval '
Rss = fun() -> {ok, S} = file:read_file("/proc/self/status"),
               [_, L | _] = binary:split(S, <<"VmRSS:">>),
               [Kb | _] = string:lexemes(binary_to_list(L), " \t\nkB"),
               list_to_integer(Kb) div 1024 end,
{module, _} = code:ensure_loaded(ft_memory_target),
{module, _} = code:ensure_loaded(ferrotrace_tracer),
Bin = binary:copy(<<"y">>, 70000),
List = lists:seq(1, 5000),
Holders = ft_memory_target:holders(2000, Bin),
garbage_collect(), timer:sleep(300),
Before = Rss(),
{ok, S} = ferrotrace:calls([{ft_memory_target, hold, 1}, {lists, '"'"'_'"'"', '"'"'_'"'"'}],
                           #{args => true, max_term_bytes => 65536, duration => 60000, ring_size => 65536, max_events => 1000000000, max_rate => infinity}),
ok = ft_memory_target:go(Holders),
Busy = [spawn_monitor(fun() -> lists:foreach(fun(_) -> lists:reverse(List) end, lists:seq(1, 2000)) end) || _ <- lists:seq(1, 4)],
[receive {'"'"'DOWN'"'"', R, _, _, _} -> ok end || {_, R} <- Busy],
timer:sleep(500),
#{memory := #{total := Total}, pairing := #{open_calls := Open}, stop_reason := Status} = ferrotrace:summary(S),
During = Rss(),
T0 = erlang:monotonic_time(millisecond),
ok = ferrotrace:stop(S),
T1 = erlang:monotonic_time(millisecond),
#{memory := #{total := StoppedTotal}} = ferrotrace:summary(S),
AfterStop = Rss(),
ok = ft_memory_target:release(Holders),
ok = ferrotrace:release(S),
T2 = erlang:monotonic_time(millisecond),
garbage_collect(), timer:sleep(300),
After = Rss(),
io:format("~p; open calls ~p; memory.total ~p MB running, ~p MB stopped~n", [Status, Open, Total bsr 20, StoppedTotal bsr 20]),
io:format("RSS MB: before ~p, during ~p, after stop ~p, after release ~p (stop ~p ms, release ~p ms)~n",
          [Before, During, AfterStop, After, T1 - T0, T2 - T1]),
halt().'
