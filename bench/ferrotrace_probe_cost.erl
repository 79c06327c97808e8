%%% @doc `make bench''s line for the probe effect: how near the calibrated compensation
%%% brings a traced function's latency to its untraced time (ferrotrace_probe_SUITE asserts
%%% what compensation takes out with costs set by hand; this is the figure). `outer/0' of
%%% ft_probe_target calls its callee 50 times; traced with its callee (100 inner events a
%%% call), its raw p50 is inflated and its compensated p50 should be near the untraced one
%%% (the calibration under-corrects: 1.05 to 1.22 of untraced idle, 1.25 in a CI run with
%%% two OTP chroots' suites on the machine's two cores). Side by side: two workers alike (the
%%% callee allocates, so a process's heap weighs on its time), a session tracing one, calls
%%% made in turn in small batches, so that a load that comes and goes weighs on both alike;
%%% medians of ?ROUNDS rounds, each with a calibration and a session of its own (a loaded
%%% machine moved one round alone to 0.72x or 1.29x). The untraced worker runs the
%%% functions with their patterns set: the VM checks its flags at each call, a few ns.
-module(ferrotrace_probe_cost).

-export([main/0]).

-define(OUTER, {ft_probe_target, outer, 0}).
-define(CALLEE, {ft_probe_target, callee, 1}).
-define(RUNS, 1000).
-define(ROUNDS, 7).
-define(BATCHES, 20).

-spec main() -> ok.
main() ->
    [Worker, Other] = [spawn_opt(fun worker/0, [link, {min_heap_size, 8192}]) || _ <- [1, 2]],
    _ = {run_in(Other, 200), run_in(Worker, 200)},
    Rounds = [round(Worker, Other) || _ <- lists:seq(1, ?ROUNDS)],
    [begin unlink(P), exit(P, kill) end || P <- [Worker, Other]],
    Untraced = median([U || #{untraced := U} <- Rounds]),
    Raw = median([R / U || #{raw := R, untraced := U} <- Rounds]),
    Compensated = median([C / U || #{compensated := C, untraced := U} <- Rounds]),
    TakenOut = median([(R - C) / (R - U) || #{raw := R, compensated := C, untraced := U} <- Rounds, R > U]),
    io:format("probe effect (outer/0 and its callee traced, 100 inner events a call; medians of ~b rounds): "
              "untraced p50 ~b ns; raw p50 ~.2fx untraced, compensated ~.2fx (rounds ~s); compensation took "
              "out ~.2f of what tracing added; pair ~b ns~n",
              [?ROUNDS, Untraced, Raw, Compensated,
               lists:join(" ", [io_lib:format("~.2f", [C / U]) || #{compensated := C, untraced := U} <- Rounds]),
               TakenOut, median([P || #{pair_ns := P} <- Rounds])]).

%% One round: a calibration of this moment (a start reuses the node's last one for five
%% minutes), a session tracing `Worker', ?BATCHES batches of calls in each worker in turn.
round(Worker, Other) ->
    {ok, _} = ferrotrace:calibrate(),
    {ok, S} = ferrotrace:calls([?OUTER, ?CALLEE], #{duration => 600000, pids => [Worker]}),
    Batches = [{run_in(Other, ?RUNS div ?BATCHES), run_in(Worker, ?RUNS div ?BATCHES)}
               || _ <- lists:seq(1, ?BATCHES)],
    ok = ferrotrace:stop(S),
    #{calibration := #{pair_ns := Pair}, calls := Calls} = ferrotrace:summary(S),
    ok = ferrotrace:release(S),
    [#{p50 := P50, raw := #{p50 := RawP50}}] = [E || E = #{mfa := ?OUTER} <- Calls],
    #{untraced => median(lists:append([U || {U, _} <- Batches])), raw => RawP50, compensated => P50,
      pair_ns => Pair}.

%% A process that runs outer/0 when asked, timing each call.
worker() ->
    receive {run, From, Runs} -> From ! {self(), ft_probe_target:timed_outer(Runs)} end,
    worker().

run_in(Worker, Runs) ->
    Worker ! {run, self(), Runs},
    receive {Worker, Times} -> Times after 60000 -> error(worker_timeout) end.

median(Values) ->
    lists:nth((length(Values) + 1) div 2, lists:sort(Values)).
