%%% @doc Limits: `max_events', `max_rate' and `sample'. (Stop reasons, the owner's death and
%%% reloading the tracer module are ferrotrace_lifecycle_SUITE.)
%%%
%%% Every limit is enforced in the NIFs: `max_events' and `max_rate' with `on_limit => stop'
%%% stop the session (the VM then unhooks each tracee), with `on_limit => drop' the session
%%% goes on and counts the excess. The accounting identity
%%% seen = aggregated + dropped + sampled_out + limited is checked everywhere.
-module(ferrotrace_limits_SUITE).

-include("support/ft_ct.hrl").

-export([max_events_stop/1, max_events_drop/1, max_rate_drop/1, max_rate_stop/1, sample/1]).

-define(F, {ft_test_target, f, 1}).

suite() ->
    [{timetrap, {minutes, 2}}, {ct_hooks, [{ft_ct, [ft_test_target]}]}].

all() ->
    [max_events_stop, max_events_drop, max_rate_drop, max_rate_stop, sample].

%%--------------------------------------------------------------------------------------

-spec max_events_stop(config()) -> ok.
max_events_stop(_Config) ->
    Worker = worker(),
    {ok, S} = ferrotrace:calls(?F, #{pids => [Worker], max_events => 1000, duration => 60000}),
    ok = run(Worker, 10000),
    Summary = wait_stopped(S),
    ?assertMatch(#{status := stopped, stop_reason := limit}, Summary),
    #{events := #{aggregated := A, dropped := D, limited := L} = Events} = Summary,
    assert_identity(Events),
    ?assert(A + D =< 1000),
    ?assert(L >= 1),
    %% The VM has unhooked the worker: its next call meets `remove'.
    ok = run(Worker, 1),
    ?assertNotEqual({tracer, {ferrotrace_tracer, S}}, erlang:trace_info(Worker, tracer)),
    ?assertNot(ft_trace_state:traced_by_ferrotrace(Worker)),
    ok.

-spec max_events_drop(config()) -> ok.
max_events_drop(_Config) ->
    Worker = worker(),
    {ok, S} = ferrotrace:calls(?F, #{pids => [Worker], max_events => 1000, on_limit => drop,
                                     duration => 60000}),
    ok = run(Worker, 10000),
    #{status := running, events := Events} = ferrotrace:summary(S),
    #{seen := Seen, aggregated := A, dropped := D, limited := L} = Events,
    assert_identity(Events),
    ?assertEqual(20000, Seen),
    ?assert(A + D =< 1000),
    ?assert(A + D > 1000 - 256),
    ?assertEqual(Seen - A - D, L),
    ok.

-spec max_rate_drop(config()) -> ok.
max_rate_drop(_Config) ->
    Worker = worker(),
    {ok, S} = ferrotrace:calls(?F, #{pids => [Worker], max_rate => {100, 100}, on_limit => drop,
                                     duration => 60000}),
    T0 = erlang:monotonic_time(millisecond),
    ok = run_for(Worker, 500),
    Elapsed = erlang:monotonic_time(millisecond) - T0,
    #{status := running, events := Events} = ferrotrace:summary(S),
    #{aggregated := A, dropped := D, limited := L} = Events,
    assert_identity(Events),
    ct:pal("max_rate {100, 100} over ~p ms: ~p", [Elapsed, Events]),
    ?assert(L > 0),
    ?assert(A + D =< 100 * (Elapsed div 100 + 2)),
    ?assert(A + D >= 100),
    ok.

-spec max_rate_stop(config()) -> ok.
max_rate_stop(_Config) ->
    Worker = worker(),
    {ok, S} = ferrotrace:calls(?F, #{pids => [Worker], max_rate => {10, 1000}, duration => 60000}),
    ok = run(Worker, 100),
    ?assertMatch(#{status := stopped, stop_reason := limit}, wait_stopped(S)),
    ok.

-spec sample(config()) -> ok.
sample(_Config) ->
    Workers = [worker() || _ <- lists:seq(1, 16)],
    {ok, S} = ferrotrace:calls(?F, #{pids => Workers, sample => 4, duration => 60000}),
    [ok = run(W, 500) || W <- Workers],
    ok = ferrotrace:stop(S),
    #{events := Events, pairing := Pairing} = ferrotrace:summary(S),
    assert_identity(Events),
    #{seen := Seen, sampled_out := Out, aggregated := Aggregated, dropped := Dropped} = Events,
    %% Sampling is decided in enabled_call/3: a sampled-out call is one event, answered
    %% `discard', and the VM pushes no return frame for it (no return_from follows); a kept
    %% call is two events.
    ?assertEqual(Seen, Aggregated + Dropped + Out),
    ?assertEqual(16 * 1000, Aggregated + Dropped + 2 * Out),
    ?assert(Out > 0 andalso Out < 16 * 500),
    %% Whole processes are kept or not: no call without its return.
    ?assertMatch(#{unmatched_returns := 0, abandoned_calls := 0}, Pairing),
    ?assertEqual(0, Out rem 500),
    ok.

%%--------------------------------------------------------------------------------------
%% Helpers

assert_identity(#{seen := Seen, aggregated := A, dropped := D, sampled_out := Sa,
                  limited := L}) ->
    ?assertEqual(Seen, A + D + Sa + L).

%% A process that runs funs on request, so tests choose what is traced.
worker() ->
    spawn(fun Loop() ->
                  receive {run, From, Fun} -> From ! {done, self(), Fun()}, Loop() end
          end).

run(Worker, Calls) ->
    Worker ! {run, self(), fun() -> ft_test_target:call_f(Calls) end},
    receive {done, Worker, Result} -> Result after 30000 -> error(worker_timeout) end.

run_for(Worker, Ms) ->
    Deadline = erlang:monotonic_time(millisecond) + Ms,
    Worker ! {run, self(), fun() -> call_until(Deadline) end},
    receive {done, Worker, Result} -> Result after 30000 -> error(worker_timeout) end.

call_until(Deadline) ->
    case erlang:monotonic_time(millisecond) >= Deadline of
        true -> ok;
        false -> ok = ft_test_target:call_f(100), call_until(Deadline)
    end.

wait_stopped(S) ->
    ok = ft_ct:poll(fun() -> maps:get(status, ferrotrace:summary(S)) =:= stopped end, 5000),
    ferrotrace:summary(S).

