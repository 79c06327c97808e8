%%% @doc The workload behind the README's process-tracing report: a registered server
%%% (`ft_demo_store') that clients flood with casts of several sizes, a pool of short-lived
%%% workers that exit normally or crash, and garbage-heavy work. `run/0' traces it with
%%% `ferrotrace:processes/2' and prints the report.
-module(ft_activity_demo).

-export([run/0, run/1]).

%% @doc Traces the demo workload with messages, procs and gc and prints the report.
-spec run() -> ok.
run() ->
    run([messages, procs, gc]).

%% @doc As run/0, with the given kinds.
-spec run([ferrotrace_activity:kind()]) -> ok.
run(Kinds) ->
    {ok, S} = ferrotrace:processes(Kinds, #{duration => 60000}),
    Store = spawn(fun() -> register(ft_demo_store, self()), store(#{}) end),
    Clients = [spawn_monitor(fun() -> client(I) end) || I <- lists:seq(1, 4)],
    [receive {'DOWN', R, _, _, _} -> ok end || {_, R} <- Clients],
    Workers = [spawn_monitor(fun() -> worker(I) end) || I <- lists:seq(1, 200)],
    [receive {'DOWN', R, _, _, _} -> ok end || {_, R} <- Workers],
    %% The report names the processes still alive: the store is stopped after it.
    ok = ferrotrace:report(S),
    Ref = erlang:monitor(process, Store),
    Store ! stop,
    receive {'DOWN', Ref, _, _, _} -> ok end,
    ferrotrace:release(S).

store(State) ->
    receive
        {put, K, V} -> store(State#{K => V});
        stop -> ok
    end.

client(I) ->
    [ft_demo_store ! {put, {I, N}, lists:seq(1, (N rem 5) * 40)} || N <- lists:seq(1, 2000)],
    ok.

worker(I) when I rem 10 =:= 0 -> exit({shutdown, I});
worker(I) when I rem 25 =:= 0 -> error(badarg);
worker(I) -> _ = length(lists:seq(1, I * 500)), ok.
