%%% @doc How soon a budget sheds what load arriving after the start makes hot (issue 54,
%%% part 1): a `{'_','_','_'}' session with `max_overhead => 0.05' starts on an idle node;
%%% as `calls/2' returns, processes born per request (ft_budget_work's `per_request', one
%%% worker per scheduler) start calling small functions. Printed per fresh node: when the
%%% tick that shed first began (`decided_ms', the summary's `shed_at') and when the
%%% patterns of the work's hottest functions had come off (`landed_ms', the first of them;
%%% `last_landed_ms', the last), in ms from the return of `calls/2'; then medians and ranges.
%%%
%%% {@link main/0} (`make shed-latency', about 30 s) starts a fresh `erl -noshell +S 2:2'
%%% per run with the parent's `-pa' directories, each running {@link in_node/0}. The
%%% patterns are watched by a process of `max' priority reading `erlang:trace_info/2' every
%%% millisecond: its wake-ups make the schedulers pass the code barrier sooner than the
%%% work alone would, so a build whose sheds wait for the barrier reads faster here than it
%%% is. Fresh nodes so that each run's start is a first start, as an operator's is. OTP 25
%%% and 26 only (the watcher reads the legacy session's patterns).
%%% ```
%%% shed_latency run=1 decided_ms=... landed_ms=... last_landed_ms=... shed=...
%%% shed_latency runs=5 decided_ms=median:...,range:...-... landed_ms=... last_landed_ms=...
%%% '''
-module(ferrotrace_shed_latency).
-export([main/0, main/1, in_node/0]).

-define(RUNS, 5).
%% The work's functions (ft_budget_work), the hottest first: each is shed in the first
%% trip of every run on this machine.
-define(WATCHED, [{erlang, list_to_atom, 1}, {lists, foldl_1, 3}, {lists, seq_loop, 3}, {counters, add, 3},
                  {lists, reverse, 1}, {erlang, spawn_opt, 4}]).

%% @doc Five fresh nodes.
-spec main() -> ok.
main() ->
    main([?RUNS]).

%% @doc `[Runs]' fresh nodes.
-spec main([pos_integer()]) -> ok.
main([Runs]) ->
    Results = [R || N <- lists:seq(1, Runs), R <- [run(N)], is_map(R)],
    Stat = fun(Key) -> ft_fresh_node:stat(Key, Results) end,
    io:format("shed_latency runs=~b decided_ms=~s landed_ms=~s last_landed_ms=~s failed=~b~n",
              [length(Results), Stat(decided_ms), Stat(landed_ms), Stat(last_landed_ms), Runs - length(Results)]).

run(N) ->
    case ft_fresh_node:figures(?MODULE, "shed ") of
        {failed, Lines} ->
            io:format("shed_latency run=~b failed: ~p~n", [N, Lines]),
            none;
        Figures ->
            io:format("shed_latency run=~b~s~n",
                      [N, [io_lib:format(" ~s=~p", [K, V]) || {K, V} <- lists:sort(maps:to_list(Figures))]]),
            Figures
    end.

%% @doc The measurement in a fresh node: prints `shed #{...}.'.
-spec in_node() -> ok.
in_node() ->
    case ferrotrace_backend:trace_sessions() of
        %% erlang:trace_info/2 sees the legacy session's patterns only.
        true -> io:format("shed #{skipped => <<\"OTP 27+: the patterns are a trace session's\">>}~n");
        false -> measure()
    end.

measure() ->
    {ok, S} = ferrotrace:calls({'_', '_', '_'}, #{duration => 3000, max_overhead => 0.05}),
    T0 = erlang:monotonic_time(microsecond),
    Self = self(),
    Watcher = spawn_opt(fun() -> watch(T0, ?WATCHED, #{}, Self) end, [{priority, max}]),
    Work = ft_budget_work:start(erlang:system_info(schedulers_online), per_request),
    timer:sleep(1500),
    ft_budget_work:stop(Work),
    Watcher ! stop,
    Off = receive {off, O} -> O end,
    #{budget := #{shed := Shed}} = ferrotrace:summary(S),
    ok = ferrotrace:release(S),
    Landed = [T div 1000 || T <- maps:values(Off)],
    Decided = [T || #{shed_at := T} <- Shed, T > 0],
    Figures = #{decided_ms => case Decided of [] -> none; _ -> lists:min(Decided) end,
                landed_ms => case Landed of [] -> none; _ -> lists:min(Landed) end,
                last_landed_ms => case length(Landed) =:= length(?WATCHED) of
                                      true -> lists:max(Landed);
                                      false -> none
                                  end,
                shed => length(Shed)},
    io:format("shed ~0p~n", [Figures]).

%% When each watched function's pattern came off (us from `T0').
watch(T0, Watched, Off, Parent) ->
    receive
        stop -> Parent ! {off, Off}
    after 1 ->
        Now = erlang:monotonic_time(microsecond) - T0,
        watch(T0, Watched,
              lists:foldl(fun(MFA, Acc) ->
                                  case is_map_key(MFA, Acc) orelse erlang:trace_info(MFA, traced) of
                                      {traced, false} -> Acc#{MFA => Now};
                                      _ -> Acc
                                  end
                          end, Off, Watched),
              Parent)
    end.
