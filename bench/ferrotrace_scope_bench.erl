%%% @doc What a narrow scope costs the processes outside it (issue 59): ft_shop's
%%% supervision tree with 10 order workers, and 50 servers of the same code outside it, each
%%% calling ft_shop_worker:work/1 for 1 s at once (ft_shop_worker:spin/2), in rounds:
%%% untraced, a session on `{children, ft_shop_orders_sup}' (the 10 and their supervisor),
%%% and a session on every process (`pids => all'), alternated `Rounds' times, twice:
%%% <ul>
%%% <li>`outside_only': the 50 outside spin, the 10 inside are idle. A session on the
%%% subtree should cost the 50 nothing: the VM checks a process's flags at the function's
%%% breakpoint and goes on, no callback, no event;</li>
%%% <li>`everyone': all 60 spin. The 10 inside are traced (each call an event), and their
%%% slower turns and the engine's threads take CPU from the 50 on a small machine: what a
%%% scope cannot save.</li>
%%% </ul>
%%% Prints a line per round and one of medians per phase (calls made in the round by the 50
%%% outside and the 10 inside; `counted': those the session counted, the subtree's equal to
%%% `inside'), with the ratios to the untraced rounds beside them:
%%% ```
%%% scope phase=outside_only round=1 untraced outside=... inside=...
%%% scope phase=outside_only round=1 subtree outside=... inside=... counted=...
%%% scope phase=outside_only medians outside_subtree/untraced=... outside_all/untraced=... load=...
%%% '''
%%% `make scope-bench', about 40 s.
-module(ferrotrace_scope_bench).
-export([main/0, main/1]).

-define(ROUND_MS, 1000).
-define(OUTSIDERS, 50).
-define(INSIDERS, 10).
-define(WORK, {ft_shop_worker, work, 1}).

%% @doc Five rounds of each, in each phase.
-spec main() -> ok.
main() ->
    main([5]).

%% @doc `[Rounds]' rounds of each, in each phase.
-spec main([pos_integer()]) -> ok.
main([Rounds]) ->
    ok = ft_shop:start(),
    Inside = ft_shop:add_orders(?INSIDERS),
    Outside = [begin {ok, P} = ft_shop_worker:start_link(none), P end || _ <- lists:seq(1, ?OUTSIDERS)],
    _ = round(Inside, Outside, Outside, none),   % warm-up
    _ = [phase(Phase, Spinning, Inside, Outside, Rounds)
         || {Phase, Spinning} <- [{outside_only, Outside}, {everyone, Inside ++ Outside}]],
    ok = ft_shop:stop(),
    ok.

phase(Phase, Spinning, Inside, Outside, Rounds) ->
    Results = [[{Kind, print(Phase, R, Kind, round(Inside, Outside, Spinning, Kind))}
                || Kind <- [untraced, subtree, all]] || R <- lists:seq(1, Rounds)],
    Median = fun(Kind, Key) -> median([maps:get(Key, M) || Round <- Results, {K, M} <- Round, K =:= Kind]) end,
    Ratio = fun(Kind, Key) -> Median(Kind, Key) / max(1, Median(untraced, Key)) end,
    Inner = case Phase of
                everyone -> io_lib:format(" inside_subtree/untraced=~.3f inside_all/untraced=~.3f",
                                          [Ratio(subtree, inside), Ratio(all, inside)]);
                outside_only -> ""
            end,
    io:format("scope phase=~s medians outside_subtree/untraced=~.3f outside_all/untraced=~.3f~s load=~s~n",
              [Phase, Ratio(subtree, outside), Ratio(all, outside), Inner, load()]).

%% One round: the servers `Spinning' spin for ?ROUND_MS at once, under the session `Kind'
%% starts.
round(Inside, Outside, Spinning, Kind) ->
    Session = case Kind of
                  subtree -> start(#{pids => {children, ft_shop_orders_sup}});
                  all -> start(#{pids => all});
                  _ -> none
              end,
    Self = self(),
    Spin = fun(P) -> spawn_link(fun() -> Self ! {P, ft_shop_worker:spin(P, ?ROUND_MS)} end) end,
    _ = [Spin(P) || P <- Spinning],
    Counts = maps:from_list([receive {P, N} -> {P, N} end || P <- Spinning]),
    Sum = fun(Ps) -> lists:sum([maps:get(P, Counts, 0) || P <- Ps]) end,
    Counted = case Session of
                  none -> 0;
                  _ ->
                      Calls = maps:get(calls, ferrotrace:summary(Session)),
                      ok = ferrotrace:release(Session),
                      lists:sum([C || #{mfa := ?WORK, count := C} <- Calls])
              end,
    #{inside => Sum(Inside), outside => Sum(Outside), counted => Counted}.

start(Options) ->
    {ok, S} = ferrotrace:calls(?WORK, Options#{duration => 60000, owner => none}),
    S.

print(Phase, Round, Kind, M = #{inside := In, outside := Out, counted := Counted}) ->
    io:format("scope phase=~s round=~b ~s outside=~b inside=~b~s~n",
              [Phase, Round, Kind, Out, In, case Kind of untraced -> ""; _ -> io_lib:format(" counted=~b", [Counted]) end]),
    M.

median(Values) ->
    Sorted = lists:sort(Values),
    lists:nth((length(Sorted) + 1) div 2, Sorted).

load() ->
    case file:read_file("/proc/loadavg") of
        {ok, Bin} -> lists:join(",", lists:sublist(string:lexemes(binary_to_list(Bin), " "), 3));
        _ -> "unknown"
    end.
