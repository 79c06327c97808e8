%%% @doc Processes that run a test's funs on request, so that a session can trace them
%%% before they call anything, and a case knows which process made which call.
%%%
%%% A caller (`start/0') runs funs one at a time until `stop/1'; workers (`workers/2') each
%%% run one fun at once and stay alive until `end_workers/1', so that no process exit falls
%%% inside a session (`calls/2' traces `procs' too, and an exit event counts as seen).
-module(ft_caller).

-include_lib("stdlib/include/assert.hrl").

-export([start/0, run/2, run_parallel/1, stop/1, workers/2, end_workers/1]).

%% @doc A process that runs funs on request (`run/2'), until `stop/1'.
-spec start() -> pid().
start() ->
    spawn(fun caller_loop/0).

caller_loop() ->
    receive
        {run, From, Ref, Fun} ->
            Result = try Fun() of _ -> ok catch C:R:St -> {C, R, St} end,
            From ! {done, Ref, Result},
            caller_loop();
        stop ->
            ok
    end.

%% @doc Runs `Fun' in `Caller'; `ok' once it returned (whatever it returned), a failed
%% assertion if it raised.
-spec run(pid(), fun(() -> term())) -> ok.
run(Caller, Fun) ->
    run_parallel([{Caller, Fun}]).

%% @doc Runs each fun in its caller, all at once; `ok' once every one returned.
-spec run_parallel([{pid(), fun(() -> term())}]) -> ok.
run_parallel(Jobs) ->
    Refs = [begin Ref = make_ref(), Caller ! {run, self(), Ref, Fun}, Ref end
            || {Caller, Fun} <- Jobs],
    lists:foreach(fun(Ref) ->
                          receive {done, Ref, Result} -> ?assertEqual(ok, Result)
                          after 60000 -> error(caller_timeout)
                          end
                  end, Refs).

%% @doc Ends a caller.
-spec stop(pid()) -> ok.
stop(Caller) ->
    Caller ! stop,
    ok.

%% @doc Runs `Fun' in `N' new processes at once; returns them when all have run it. They
%% stay alive until `end_workers/1'.
-spec workers(pos_integer(), fun(() -> term())) -> [{pid(), reference()}].
workers(N, Fun) ->
    Parent = self(),
    Workers = [spawn_monitor(fun() ->
                                     receive go -> ok end,
                                     Result = try Fun() of _ -> ok catch C:R:St -> {C, R, St} end,
                                     Parent ! {worker_done, self(), Result},
                                     receive finish -> ok end
                             end) || _ <- lists:seq(1, N)],
    [Pid ! go || {Pid, _} <- Workers],
    lists:map(
      fun({Pid, Ref}) ->
              receive
                  {worker_done, Pid, Result} -> ?assertEqual(ok, Result), {Pid, Ref};
                  {'DOWN', Ref, process, Pid, Reason} -> error({worker_died, Reason})
              after 60000 -> error({worker_timeout, Pid})
              end
      end, Workers).

%% @doc Ends the workers of `workers/2' and waits for each to be gone.
-spec end_workers([{pid(), reference()}]) -> ok.
end_workers(Workers) ->
    lists:foreach(fun({Pid, Ref}) ->
                          Pid ! finish,
                          receive {'DOWN', Ref, process, Pid, normal} -> ok
                          after 10000 -> error({worker_did_not_finish, Pid})
                          end
                  end, Workers).
