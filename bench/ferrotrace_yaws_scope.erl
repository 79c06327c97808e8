%%% @doc A scope on a real server (issue 59): Debian's yaws embedded in this node under
%%% `wrk' (a connection per request: a process born for each), beside 20 processes of
%%% other work, and a `{'_','_','_'}' session on `{application, yaws}' (yaws' supervision
%%% tree and what it spawns: its acceptors and each request's process) with the default
%%% budget of a `'_'' spec. Rounds of 5 s alternate untraced and traced (`Rounds' of each);
%%% per round it prints yaws' requests per second (wrk's), the other work's calls per
%%% second, and for a traced round the scope's processes at the start and the end, the
%%% calls the session timed, and how many of them were the other work's (none: it is
%%% outside the scope):
%%% ```
%%% yaws_scope round=1 untraced requests_per_s=... other_per_s=...
%%% yaws_scope round=1 traced requests_per_s=... other_per_s=... processes=...->... timed=... other_timed=0
%%% yaws_scope medians requests traced/untraced=... other traced/untraced=...
%%% '''
%%% `make yaws-scope' (installs yaws and wrk where missing), about a minute.
-module(ferrotrace_yaws_scope).
-export([main/1, other/1]).

-define(OTHERS, 20).
-define(ROUND_S, 5).

%% @doc `[Rounds]' rounds of each kind.
-spec main([string()]) -> ok.
main([Rounds0]) ->
    Rounds = list_to_integer(Rounds0),
    ok = ferrotrace_code:preload(),
    Url = ferrotrace_yaws:start_yaws(),
    Counter = atomics:new(1, []),
    _ = [spawn_link(fun() -> loop(Counter) end) || _ <- lists:seq(1, ?OTHERS)],
    _ = round(Url, Counter, untraced),   % warm-up
    Results = lists:append([[round(Url, Counter, untraced), round(Url, Counter, traced)]
                            || _ <- lists:seq(1, Rounds)]),
    _ = [print(R, I) || {I, R} <- lists:zip([(N + 1) div 2 || N <- lists:seq(1, length(Results))], Results)],
    Median = fun(Kind, Key) -> median([maps:get(Key, R) || R = #{kind := K} <- Results, K =:= Kind]) end,
    io:format("yaws_scope medians requests traced/untraced=~.3f other traced/untraced=~.3f~n",
              [Median(traced, requests) / Median(untraced, requests), Median(traced, other) / Median(untraced, other)]),
    ok.

%% The other work: a function called in a loop, counted.
loop(Counter) ->
    _ = ?MODULE:other(7),
    atomics:add(Counter, 1, 1),
    loop(Counter).

%% @doc The other work's function (never in the session's table).
-spec other(integer()) -> integer().
other(N) -> erlang:phash2(N, 1000).

round(Url, Counter, Kind) ->
    Self = self(),
    Client = spawn_link(fun() ->
                                Self ! {self(), os:cmd(lists:flatten(io_lib:format(
                                                         "wrk -t1 -c8 -d~bs -H 'Connection: close' ~s 2>&1",
                                                         [?ROUND_S, Url])))}
                        end),
    Session = case Kind of
                  traced ->
                      {ok, S} = ferrotrace:calls({'_', '_', '_'}, #{pids => {application, yaws},
                                                                   duration => (?ROUND_S + 5) * 1000, owner => none}),
                      S;
                  untraced ->
                      none
              end,
    C0 = atomics:get(Counter, 1),
    Out = receive {Client, O} -> O end,
    Other = (atomics:get(Counter, 1) - C0) div ?ROUND_S,
    Requests = case re:run(Out, "Requests/sec:\\s+([0-9.]+)", [{capture, all_but_first, list}]) of
                   {match, [R]} -> round(list_to_float(R));
                   nomatch -> error({wrk, Out})
               end,
    Figures = case Session of
                  none ->
                      #{};
                  _ ->
                      ok = ferrotrace:stop(Session),
                      #{calls := Calls, scope := #{at_start := AtStart, at_end := AtEnd}} = ferrotrace:summary(Session),
                      ok = ferrotrace:release(Session),
                      #{processes => {AtStart, AtEnd}, timed => lists:sum([C || #{count := C} <- Calls]),
                        other_timed => lists:sum([C || #{mfa := {?MODULE, _, _}, count := C} <- Calls])}
              end,
    Figures#{kind => Kind, requests => Requests, other => Other}.

print(#{kind := Kind, requests := Requests, other := Other} = R, I) ->
    io:format("yaws_scope round=~b ~s requests_per_s=~b other_per_s=~b~s~n",
              [I, Kind, Requests, Other,
               case R of
                   #{processes := {A, B}, timed := T, other_timed := O} ->
                       io_lib:format(" processes=~b->~b timed=~b other_timed=~b", [A, B, T, O]);
                   #{} -> ""
               end]).

median(Values) ->
    Sorted = lists:sort(Values),
    lists:nth((length(Sorted) + 1) div 2, Sorted).
