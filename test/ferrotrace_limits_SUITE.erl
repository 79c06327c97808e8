%%% @doc Limits, stop reasons, the owner's death and reloading the tracer module.
%%%
%%% Every limit is enforced in the NIFs: `max_events' and `max_rate' with `on_limit => stop'
%%% stop the session (the VM then unhooks each tracee), with `on_limit => drop' the session
%%% goes on and counts the excess. The accounting identity
%%% seen = aggregated + dropped + sampled_out + limited is checked everywhere.
-module(ferrotrace_limits_SUITE).

-include_lib("stdlib/include/assert.hrl").

-export([all/0, suite/0]).
-export([max_events_stop/1, max_events_drop/1, max_rate_drop/1, max_rate_stop/1, sample/1,
         stop_reasons/1, owner_down_stops_the_session/1, killed_keeper/1, purge_and_reload/1]).

-type config() :: [{atom(), term()}].

-define(F, {ft_test_target, f, 1}).

-spec suite() -> [tuple()].
suite() ->
    [{timetrap, {minutes, 2}}, {ct_hooks, [{ft_ct, [ft_test_target]}]}].

-spec all() -> [atom()].
all() ->
    [max_events_stop, max_events_drop, max_rate_drop, max_rate_stop, sample, stop_reasons,
     owner_down_stops_the_session, killed_keeper, purge_and_reload].

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

-spec stop_reasons(config()) -> ok.
stop_reasons(_Config) ->
    {ok, User} = ferrotrace:session(#{}),
    Before = os:system_time(millisecond),
    ok = ferrotrace:stop(User),
    #{status := stopped, stop_reason := user, stopped_at := At} = ferrotrace:summary(User),
    ?assert(At >= Before - 1000 andalso At =< os:system_time(millisecond)),
    {ok, Timed} = ferrotrace:session(#{duration => 50}),
    ?assertMatch(#{status := stopped, stop_reason := duration}, wait_stopped(Timed)),
    ok.

-spec owner_down_stops_the_session(config()) -> ok.
owner_down_stops_the_session(_Config) ->
    Self = self(),
    Owner = spawn(fun() ->
                          Self ! {session, ferrotrace:calls(?F, #{duration => 60000})},
                          receive die -> ok end
                  end),
    {ok, S} = receive {session, Result} -> Result end,
    ?assert(ft_trace_state:traced_by_ferrotrace(?F)),
    T0 = erlang:monotonic_time(millisecond),
    Owner ! die,
    ok = ft_ct:poll(fun() -> not ft_trace_state:traced(?F) end, 10000),
    Took = erlang:monotonic_time(millisecond) - T0,
    %% The keeper monitors the owner (no timer): the poll's deadline is for a loaded
    %% machine; the time is printed (a few ms here).
    ct:pal("session stopped and its pattern removed ~p ms after its owner died", [Took]),
    %% The figures outlive the owner (for `keep' ms, ten minutes by default).
    ?assertMatch(#{status := stopped, stop_reason := owner_down}, ferrotrace:summary(S)),
    ?assertMatch([#{id := S, left_at := _}], [E || E = #{id := Id} <- ferrotrace:list(), Id =:= S]),
    %% With keep => 0 they go at once.
    Owner2 = spawn(fun() ->
                           Self ! {session, ferrotrace:calls(?F, #{duration => 60000, keep => 0})},
                           receive die -> ok end
                   end),
    {ok, S2} = receive {session, Result2} -> Result2 end,
    Owner2 ! die,
    ok = ft_ct:poll(fun() -> ferrotrace:summary(S2) =:= {error, {no_such_session, S2}} end, 10000),
    ok.

%% A keeper killed before it could release its session leaves an orphan; the next session
%% created releases it, so its slot and statistics cannot leak.
-spec killed_keeper(config()) -> ok.
killed_keeper(_Config) ->
    {ok, Orphan} = ferrotrace:calls(?F, #{duration => infinity}),
    [#{keeper := Keeper}] = [E || E = #{id := Id} <- ferrotrace:list(), Id =:= Orphan],
    Monitor = erlang:monitor(process, Keeper),
    exit(Keeper, kill),
    receive {'DOWN', Monitor, process, Keeper, killed} -> ok end,
    %% The registry watches keepers: it releases the orphan and removes its pattern.
    ok = ft_ct:poll(fun() -> not lists:member(Orphan, ferrotrace_tracer:sessions()) end, 10000),
    ?assertNot(ft_trace_state:traced(?F)),
    ?assertEqual({error, {no_such_session, Orphan}}, ferrotrace:summary(Orphan)),
    ok.

%% Purging the tracer module unloads the NIF library: its unload callback stops every session
%% (stop_reason unload) and joins its collector thread first, so nothing runs the library's
%% code after it is gone. The dynamic loader may keep the library mapped (it does here, on
%% glibc): then the stopped sessions stay readable until released; otherwise they are gone.
%% Either way old ids are not live in the new load. Loading new code over a loaded
%% ferrotrace_tracer is refused by the VM (the library has no upgrade callback).
-spec purge_and_reload(config()) -> ok.
purge_and_reload(_Config) ->
    Worker = worker(),
    {ok, Old} = ferrotrace:calls(?F, #{pids => [Worker], duration => 60000}),
    Busy = spawn_link(fun() -> busy_run(Worker) end),
    timer:sleep(100),
    Upgrade = code:load_file(ferrotrace_tracer),
    ct:pal("load_file over a loaded ferrotrace_tracer: ~p", [Upgrade]),
    ?assertMatch({error, _}, Upgrade),
    true = code:delete(ferrotrace_tracer),
    _ = code:purge(ferrotrace_tracer),
    %% Not code:load_file/1: the keepers and the registry react to the unload by calling
    %% ferrotrace_tracer, and in interactive mode such a call may already have loaded it
    %% again (seen on OTP 27 and 29); loading over that is the refused upgrade above.
    {module, ferrotrace_tracer} = code:ensure_loaded(ferrotrace_tracer),
    timer:sleep(100),
    unlink(Busy),
    exit(Busy, kill),
    ?assert(is_process_alive(Worker)),
    case ferrotrace:summary(Old) of
        {error, {no_such_session, Old}} -> ok;
        OldSummary -> ?assertMatch(#{status := stopped, stop_reason := unload}, OldSummary)
    end,
    ok = run(Worker, 1),
    Worker2 = worker(),
    {ok, New} = ferrotrace:calls(?F, #{pids => [Worker2], duration => 60000}),
    ?assertNotEqual(Old, New),
    ok = run(Worker2, 1000),
    ok = ferrotrace:stop(New),
    ?assertMatch(#{calls := [#{count := 1000, returns := 1000}]}, ferrotrace:summary(New)),
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

busy_run(Worker) ->
    _ = run(Worker, 1000),
    busy_run(Worker).

wait_stopped(S) ->
    ok = ft_ct:poll(fun() -> maps:get(status, ferrotrace:summary(S)) =:= stopped end, 5000),
    ferrotrace:summary(S).

