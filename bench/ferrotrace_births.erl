%%% @doc What a process born and ended costs under a calls session's trace flags (issue 54:
%%% `make busy''s `per_request' rows, where a process is born per request of 400 calls).
%%% One process spawns and waits for short-lived processes, each making 40 local calls, one
%%% after another, and the time per process is printed, in rounds that alternate:
%%% <ul>
%%% <li>`untraced': no session;</li>
%%% <li>`session': a `calls/2' session on a function the work never calls, measured once its
%%% start has settled (its keeper's steps, the calibration after it): every process born
%%% gets the session's flags (`call' only), no call is traced;</li>
%%% <li>`with_procs': the same session with `procs' added to every process and to those to
%%% come, as calls sessions had until 2026-12-04: the VM's `spawn', `spawned' and `exit'
%%% events each ask the tracer's `enabled', which discards them. OTP 25 and 26 only, where
%%% the session is the node's legacy one; on OTP 27+ its flags are in a trace session of
%%% its own, which `erlang:trace/3' does not reach (printed as `with_procs=n/a').</li>
%%% </ul>
%%% `make births' prints:
%%% ```
%%% births us_per_process untraced=... session=... with_procs=... (median of 5 rounds of 50000)
%%% '''
-module(ferrotrace_births).
-export([main/0, never_called/0]).

-define(ROUNDS, 5).
-define(PROCESSES, 50000).
-define(CALLS, 40).
%% How long a session's start is left to settle before it is measured (its keeper's steps,
%% a calibration after the start): measured at once, it read 0.15 us a process more.
-define(SETTLE_MS, 500).

-spec main() -> ok.
main() ->
    _ = application:load(ferrotrace),
    {ok, Mods} = application:get_key(ferrotrace, modules),
    ok = code:ensure_modules_loaded(Mods),
    Legacy = not erlang:function_exported(trace, session_create, 3),
    Rounds = [round_of(Legacy) || _ <- lists:seq(1, ?ROUNDS)],
    Median = fun(Key) -> median([maps:get(Key, R) || R <- Rounds]) end,
    WithProcs = case Legacy of
                    true -> io_lib:format("~.2f", [Median(with_procs)]);
                    false -> "n/a"
                end,
    io:format("births us_per_process untraced=~.2f session=~.2f with_procs=~ts (median of ~b rounds of ~b)~n",
              [Median(untraced), Median(session), WithProcs, ?ROUNDS, ?PROCESSES]).

%% @doc The function the session traces: nothing calls it.
-spec never_called() -> ok.
never_called() ->
    ok.

round_of(Legacy) ->
    Untraced = per_process(),
    {ok, S} = ferrotrace:calls({?MODULE, never_called, 0}, #{max_overhead => none}),
    timer:sleep(?SETTLE_MS),
    Session = per_process(),
    WithProcs = case Legacy of
                    true ->
                        {tracer, {Module, State}} = erlang:trace_info(new, tracer),
                        _ = erlang:trace(all, true, [procs, {tracer, Module, State}]),
                        per_process();
                    false ->
                        undefined
                end,
    ok = ferrotrace:release(S),
    #{untraced => Untraced, session => Session, with_procs => WithProcs}.

%% Microseconds a process, born, making ?CALLS calls and ended, one after another.
per_process() ->
    {Us, ok} = timer:tc(fun() -> births(?PROCESSES) end),
    Us / ?PROCESSES.

births(0) ->
    ok;
births(N) ->
    {Pid, Ref} = spawn_monitor(fun() -> work(?CALLS) end),
    receive {'DOWN', Ref, process, Pid, _} -> ok end,
    births(N - 1).

work(0) -> ok;
work(N) -> _ = lists:reverse([N, N]), work(N - 1).

median(L) ->
    lists:nth((length(L) + 1) div 2, lists:sort(L)).
