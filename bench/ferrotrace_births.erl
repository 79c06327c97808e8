%%% @doc What a process born and ended costs under a calls session's trace flags (issue 54:
%%% `make busy''s `per_request' rows, where a process is born per request of 400 calls).
%%% One process spawns and waits for short-lived processes, each making 40 local calls, one
%%% after another, and the time per process is printed, in rounds that alternate:
%%% <ul>
%%% <li>`untraced': no session;</li>
%%% <li>`session': a `calls/2' session on a function the work never calls: every process
%%% born gets the session's flags (`call' and `procs'), no call is traced;</li>
%%% <li>`no_procs': the same session with `procs' taken off every process and off those to
%%% come (`erlang:trace(all | new, false, [procs])'): what the `call' flag alone costs.
%%% OTP 25 and 26 only, where the session is the node's legacy one; on OTP 27+ its flags are
%%% in a trace session of its own, which `erlang:trace/3' does not reach (printed as
%%% `no_procs=n/a').</li>
%%% </ul>
%%% `make births' prints:
%%% ```
%%% births us_per_process untraced=... session=... no_procs=... (median of 5 rounds of 50000)
%%% '''
%%% The difference between `session' and `no_procs' is the VM's `procs' events (`spawn',
%%% `spawned', `exit') each asking the tracer's `enabled_procs', which discards them: a
%%% calls session keeps `procs' only to forget the calls a process left open when it died.
-module(ferrotrace_births).
-export([main/0, never_called/0]).

-define(ROUNDS, 5).
-define(PROCESSES, 50000).
-define(CALLS, 40).

-spec main() -> ok.
main() ->
    _ = application:load(ferrotrace),
    {ok, Mods} = application:get_key(ferrotrace, modules),
    ok = code:ensure_modules_loaded(Mods),
    Legacy = not erlang:function_exported(trace, session_create, 3),
    Rounds = [round_of(Legacy) || _ <- lists:seq(1, ?ROUNDS)],
    Median = fun(Key) -> median([maps:get(Key, R) || R <- Rounds]) end,
    NoProcs = case Legacy of
                  true -> io_lib:format("~.2f", [Median(no_procs)]);
                  false -> "n/a"
              end,
    io:format("births us_per_process untraced=~.2f session=~.2f no_procs=~ts (median of ~b rounds of ~b)~n",
              [Median(untraced), Median(session), NoProcs, ?ROUNDS, ?PROCESSES]).

%% @doc The function the session traces: nothing calls it.
-spec never_called() -> ok.
never_called() ->
    ok.

round_of(Legacy) ->
    Untraced = per_process(),
    {ok, S} = ferrotrace:calls({?MODULE, never_called, 0}, #{max_overhead => none}),
    Session = per_process(),
    NoProcs = case Legacy of
                  true ->
                      _ = erlang:trace(all, false, [procs]),
                      _ = erlang:trace(new, false, [procs]),
                      per_process();
                  false ->
                      undefined
              end,
    ok = ferrotrace:release(S),
    #{untraced => Untraced, session => Session, no_procs => NoProcs}.

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
