%%% @doc The overhead budget on a server ferrotrace's authors did not write: Debian's yaws
%%% under `wrk', the client's throughput counted per second (run by `make yaws-bench').
%%%
%%% yaws runs embedded in this node (2 schedulers on the 2-core machine, which do not spin
%%% for work: `make yaws-bench' starts it with `+sbwt none', see the Makefile), serving a small
%%% static page to `wrk' (1 thread, 8 connections, each request on a connection of its own:
%%% `Connection: close', so yaws serves each in a process born for it; YAWS_KEEPALIVE=1 keeps
%%% the connections), which runs without a pause through a
%%% whole round and counts its responses per 100 ms of wall-clock time (bench/wrk_buckets.lua).
%%% The rounds begin after a minute of untraced load (the client's rate falls by a fifth
%%% over it, with nothing traced), the server's first session under the same load, kept
%%% until its reading of the server's code for loops is done (paced at a fifth of the
%%% budget, it takes a node's first 15 to 25 s of sessions here; the budget counts it, see
%%% ferrotrace_budget:read_share/3; printed: `yaws first_session'), and one traced round
%%% not counted. A round: ?PRE_MS of load first, then the moment a session would start, then ?SECONDS s
%%% counted from that moment. Rounds alternate untraced and traced (in pairs, each kind first
%%% in turn); each traced round starts
%%% a fresh `{'_','_','_'}' session of 8 s with `max_overhead => 0.05' at that moment, on a
%%% server already under the client's load (a session started between two runs of the
%%% client, on an idle server, would learn nothing of the load before it came). The same
%%% rounds with no session at all (`traced' rounds that start nothing) show the noise. Printed per kind: the medians over rounds of
%%% the requests per round and of its first two seconds, traced against untraced (the
%%% issue's measure), the same ratios taken within each pair and their median over pairs
%%% (less moved by the client's drift over the run) with a 90 % bootstrap interval of that
%%% median, the same again with each round taken against its own 2 s before the session's
%%% moment (`against_2s_before': the level a round starts at cancels), how many calls each
%%% session timed, and
%%% the node's CPU and reductions per CPU-second over the session's 8 s (its own view of the cost).
%%%
%%% Each pair of rounds is also printed whole (a `yaws pair' line), so that the outputs of
%%% several runs can be read again and taken together (`main(["pool" | Files])', run by
%%% `make yaws-pool'): one run's twelve pairs leave an interval 0.12 to 0.32 wide on this
%%% machine, and the pairs of three runs narrow it by about the square root of three.
-module(ferrotrace_yaws).
-export([main/1, start_yaws/0]).

-define(SECONDS, 12).
-define(SESSION_MS, 8000).
-define(PRE_MS, 3000).
%% Seconds of untraced load before the first round (see main/1).
-define(SETTLE_S, 60).
%% The longest the server's first session may take to finish its reading of the code.
-define(FIRST_MAX_S, 60).
-define(PORT, 8391).
%% Bootstrap resamples for the pairs' interval (interval/1).
-define(RESAMPLES, 2000).

%% `[Rounds]': rounds of each kind (4 or more for a median that means something).
%% `["pool" | Files]': the pairs printed in the saved outputs `Files', reported together.
-spec main([string()]) -> ok.
main(["pool" | Files]) ->
    Pairs = lists:append([read_pairs(File) || File <- Files]),
    _ = [report(Label, [Pair || {L, Pair} <- Pairs, L =:= Label]) || Label <- ["budget", "no_session"],
                                                                      lists:keymember(Label, 1, Pairs)],
    ok;
main([Rounds0]) ->
    Rounds = list_to_integer(Rounds0),
    _ = application:load(ferrotrace),
    {ok, Modules} = application:get_key(ferrotrace, modules),
    ok = code:ensure_modules_loaded(Modules),
    ok = ferrotrace_code:preload(),
    Url = start_yaws(),
    %% Untraced load first, until the client's rate settles: with `Connection: close' it
    %% falls by a fifth over the first minute with nothing traced (8 s runs of wrk on a
    %% fresh node read 16.9, 14.7 and 15.3 k requests a second, then 12.0 to 12.9 k from
    %% the 40th second), and the first pair's untraced round, run first, read 17 to 18 k
    %% where every later round read 13 to 15 k.
    _ = wrk(?SETTLE_S, Url),
    first_session(Url),
    %% Warm the server once.
    _ = round(Url, fun() ->
                           {ok, Warm} = ferrotrace:calls({'_', '_', '_'}, #{duration => 2000, max_overhead => 0.05,
                                                                             owner => none}),
                           Warm
                   end),
    Budget = alternate(Url, Rounds, fun start_session/0),
    Control = alternate(Url, Rounds, fun() -> none end),
    _ = [print_pair(Label, Pair) || {Label, Pairs} <- [{"budget", Budget}, {"no_session", Control}], Pair <- Pairs],
    report("budget", Budget),
    report("no_session", Control),
    ok.

%% The server's first session, under the client's load, until its reading of the server's
%% code for loops is done (its budget's `reading' back to 0), at most ?FIRST_MAX_S: the
%% rounds measure the sessions of a node that has had one. Those that run while the
%% reading goes on pay it within their budget (0.91 to 0.98 of the untraced rate here,
%% 0.96 and 0.98 after it).
first_session(Url) ->
    Self = self(),
    Client = spawn_link(fun() -> client_until_stopped(Self, Url) end),
    timer:sleep(1000),
    T0 = erlang:monotonic_time(millisecond),
    {ok, S} = ferrotrace:calls({'_', '_', '_'}, #{duration => ?FIRST_MAX_S * 1000, max_overhead => 0.05, owner => none}),
    Done = reading_done(S, T0 + ?FIRST_MAX_S * 1000),
    #{calls := Calls, budget := #{in_situ := K}} = ferrotrace:summary(S),
    ok = ferrotrace:release(S),
    Client ! stop,
    receive {Client, stopped} -> ok end,
    io:format("yaws first_session reading_done=~w seconds=~.1f calls_timed=~b in_situ=~.2f~n",
              [Done, (erlang:monotonic_time(millisecond) - T0) / 1000, lists:sum([C || #{count := C} <- Calls]), K]).

reading_done(S, Until) ->
    timer:sleep(1000),
    case ferrotrace:summary(S) of
        #{budget := #{reading := R}} when R == 0 -> true;
        _ ->
            case erlang:monotonic_time(millisecond) < Until of
                true -> reading_done(S, Until);
                false -> false
            end
    end.

%% wrk in runs of 2 s until told to stop.
client_until_stopped(Parent, Url) ->
    _ = wrk(2, Url),
    receive stop -> Parent ! {self(), stopped}
    after 0 -> client_until_stopped(Parent, Url)
    end.

%% The client for `Seconds' without counting its responses (the rounds' own run counts them).
wrk(Seconds, Url) ->
    os:cmd(lists:flatten(io_lib:format("wrk -t1 -c8 -d~bs ~s~s 2>&1", [Seconds, close_header(), Url]))).

%% One pair whole, as read_pairs/1 reads it back: each round's requests per second, the
%% calls the session timed (`none' in an untraced round, and in all of the control's), the
%% node's CPU and reductions per CPU-second over the session's seconds, and the requests
%% of the 2 s before.
print_pair(Label, {Untraced, Traced}) ->
    Round = fun({Counts, Timed, {Cpu, Reds}, Before}) ->
                    io_lib:format("~s/~w/~.3f/~.3f/~w", [lists:join(",", [integer_to_list(C) || C <- Counts]), Timed, Cpu,
                                                         Reds, Before])
            end,
    io:format("yaws pair ~s untraced=~s traced=~s~n", [Label, Round(Untraced), Round(Traced)]).

%% The pairs printed by print_pair/2 in a saved output, `[{Label, Pair}]'.
read_pairs(File) ->
    {ok, Text} = file:read_file(File),
    Lines = case re:run(Text, "^yaws pair (\\S+) untraced=(\\S+) traced=(\\S+)$",
                        [global, multiline, {capture, all_but_first, list}]) of
                {match, Found} -> Found;
                nomatch -> error({no_yaws_pair_lines, File})
            end,
    Round = fun(Field) ->
                    [Counts, Timed, Cpu, Reds | Before] = string:split(Field, "/", all),
                    {[list_to_integer(C) || C <- string:split(Counts, ",", all)],
                     case Timed of "none" -> none; _ -> list_to_integer(Timed) end,
                     {list_to_float(Cpu), list_to_float(Reds)},
                     case Before of [B] -> list_to_integer(B); [] -> none end}
            end,
    [{Label, {Round(U), Round(T)}} || [Label, U, T] <- Lines].

%% @doc yaws embedded in this node, serving a small page on 127.0.0.1:?PORT: its URL (also
%% the scope trial's, ferrotrace_yaws_scope).
-spec start_yaws() -> string().
start_yaws() ->
    Dir = filename:join(["/tmp", "ferrotrace_yaws_" ++ os:getpid()]),
    ok = filelib:ensure_dir(filename:join([Dir, "www", "x"])),
    ok = filelib:ensure_dir(filename:join([Dir, "logs", "x"])),
    ok = file:write_file(filename:join([Dir, "www", "index.html"]),
                         ["<html><body>", lists:duplicate(40, "<p>ferrotrace bench</p>"), "</body></html>"]),
    %% No access log: its one writer (yaws_log) falls behind the client on a machine whose
    %% disk writes are slow, untraced (here: a million messages queued in 30 s, 5 GB, the
    %% node killed for its memory), and the rounds would measure that backlog.
    ok = yaws:start_embedded(filename:join(Dir, "www"),
                             [{port, ?PORT}, {listen, {127, 0, 0, 1}}, {servername, "localhost"},
                              {flags, [{access_log, false}]}],
                             [{logdir, filename:join(Dir, "logs")}, {id, "ferrotrace_bench"}]),
    "http://127.0.0.1:" ++ integer_to_list(?PORT) ++ "/index.html".

%% Pairs of rounds, untraced first and traced first in turn (ABBA): the client's rate drifts
%% over a run (by a fifth in some, with nothing traced), and a fixed order would charge the
%% drift to the second round of every pair.
alternate(Url, Rounds, Start) ->
    Untraced = fun() -> none end,
    [case I rem 2 of
         1 -> U = round(Url, Untraced), {U, round(Url, Start)};
         0 -> T = round(Url, Start), {round(Url, Untraced), T}
     end || I <- lists:seq(1, Rounds)].

start_session() ->
    {ok, S} = ferrotrace:calls({'_', '_', '_'}, #{duration => ?SESSION_MS, max_overhead => 0.05, owner => none}),
    _ = [spawn(fun() -> ticks(S, erlang:monotonic_time(millisecond), []) end)
         || os:getenv("FERROTRACE_YAWS_VERBOSE") =:= "ticks"],
    S.

%% With FERROTRACE_YAWS_VERBOSE=ticks: the budget's view and the session's counters every
%% 250 ms of its 8 s, printed once it ends (what the rate and the shedding did, and why).
%% session_counts/1 hands each untraced pid out once: those it takes here, the budget's
%% tick does not trace again, so a verbose run retraces fewer processes.
ticks(S, T0, Acc) ->
    timer:sleep(250),
    T = erlang:monotonic_time(millisecond) - T0,
    case {ferrotrace_tracer:session_counts(S), ferrotrace_registry:lookup(S)} of
        {{ok, #{status := running, events := Ev, calls := Calls}}, {ok, _, _, #{budget := B} = Info}} ->
            Line = io_lib:format("yaws tick t=~b est=~.4f cautious=~w rate=~b shed_now=~b settling=~w "
                                 "timed=~b seen=~b sampled_out=~b frames_refused=~b fuse_refused=~b untraced=~b",
                                 [T, float(case maps:get(estimate, B) of undefined -> 0.0; E -> E end),
                                  maps:get(cautious, B), maps:get(rate, B), maps:get(shed_now, B),
                                  maps:get(settling, Info, false), lists:sum([C || {_, C} <- Calls]),
                                  maps:get(seen, Ev, 0), maps:get(sampled_out, Ev, 0), maps:get(frames_refused, Ev, 0),
                                  maps:get(fuse_refused, Ev, 0), maps:get(untraced, Ev, 0)]),
            ticks(S, T0, [Line | Acc]);
        _ when T < ?SESSION_MS + 500 ->
            ticks(S, T0, Acc);
        _ ->
            io:format("~s", [[[L, $\n] || L <- lists:reverse(Acc)]])
    end.

%% Each request on a connection of its own (`Connection: close'): yaws then serves each in
%% a process born for it, the load whose processes come and go (issue 54); YAWS_KEEPALIVE=1
%% keeps the 8 connections (8 long-lived processes), as the runs before it did.
close_header() ->
    case os:getenv("YAWS_KEEPALIVE") of
        "1" -> "";
        _ -> "-H 'Connection: close' "
    end.

%% Requests per second over ?SECONDS s from the moment `Start' is called, on a server under
%% the client's load since ?PRE_MS before, the calls the session timed, the node's use
%% (node_use/2) and the requests of the 2 s before that moment.
round(Url, Start) ->
    Script = filename:join(filename:dirname(filename:dirname(code:which(?MODULE))), "wrk_buckets.lua"),
    Self = self(),
    Seconds = (?PRE_MS + 999) div 1000 + ?SECONDS + 1,
    Client = spawn_link(fun() ->
                                Self ! {self(), os:cmd(lists:flatten(io_lib:format("wrk -t1 -c8 -d~bs ~s-s ~s ~s 2>&1",
                                                                                   [Seconds, close_header(), Script, Url])))}
                        end),
    timer:sleep(?PRE_MS),
    T0 = os:system_time(millisecond),
    Session = Start(),
    Started = os:system_time(millisecond) - T0,
    _ = [io:format("yaws start_ms=~b~n", [Started]) || Session =/= none, os:getenv("FERROTRACE_YAWS_VERBOSE") =/= false],
    %% The node's CPU and work over the session's 8 s (or the same 8 s of an untraced round).
    Node0 = node_counters(),
    timer:sleep(max(0, ?SESSION_MS - Started)),
    Node = node_use(Node0, node_counters()),
    timer:sleep(?SECONDS * 1000 - ?SESSION_MS),
    Timed = case Session of
                none -> none;
                _ ->
                    #{calls := Calls} = Summary = ferrotrace:summary(Session),
                    _ = [io:format("yaws session start=~w budget estimate=~.3f measured=~w in_situ=~.2f prior=~w rate=~b "
                                   "shed_now=~b changes=~w event_ns=~w discard_ns=~w~n",
                                   [maps:get(start, Summary, undefined), E, Measured, K, maps:get(prior, B, undefined), N, Shed, Changes,
                                    maps:get(event_ns, B, undefined), maps:get(discard_ns, B, undefined)])
                         || os:getenv("FERROTRACE_YAWS_VERBOSE") =/= false,
                            #{budget := #{estimate := E, measured := Measured, in_situ := K, rate := N, shed_now := Shed,
                                          rate_changes := Changes} = B} <- [Summary],
                            is_float(E)],
                    _ = [io:format("yaws session shed_by_s=~w restored_by_s=~w events=~w untraced=~w collector=~w~n",
                                   shed_timeline(maps:get(shed, B))
                                   ++ [maps:with([seen, sampled_out, fuse_refused, untraced, dropped], Events),
                                       maps:get(untraced, B, none), maps:get(collector, B, none)])
                         || os:getenv("FERROTRACE_YAWS_VERBOSE") =/= false, #{budget := B, events := Events} <- [Summary]],
                    ok = ferrotrace:release(Session),
                    lists:sum([C || #{count := C} <- Calls])
            end,
    Out = receive {Client, O} -> O end,
    Buckets = [{list_to_integer(B) * 100, list_to_integer(N)}
               || [B, N] <- case re:run(Out, "bucket ([0-9]+) ([0-9]+)", [global, {capture, all_but_first, list}]) of
                               {match, M} -> M;
                               nomatch -> error({wrk, Out})
                           end],
    Counts = [lists:sum([N || {At, N} <- Buckets, At >= T0 + I * 1000, At < T0 + (I + 1) * 1000])
              || I <- lists:seq(0, ?SECONDS - 1)],
    %% Verbose: the first 2 s by the client's 100 ms buckets (where in them a start costs).
    _ = [io:format("yaws round session=~w first_2s_100ms=~s~n",
                   [Session =/= none, lists:join(",", [integer_to_list(lists:sum([N || {At, N} <- Buckets, At >= T0 + I * 100,
                                                                                       At < T0 + (I + 1) * 100]))
                                                       || I <- lists:seq(-5, 19)])])
         || os:getenv("FERROTRACE_YAWS_VERBOSE") =/= false],
    %% The same client's requests in the 2 s before: each round's own level, which
    %% moves between rounds by more than a budget.
    Before = lists:sum([N || {At, N} <- Buckets, At >= T0 - 2000, At < T0]),
    {Counts, Timed, Node, Before}.

%% A session's shedding over its seconds (its budget's shed log): `[Shed, Restored]', each
%% `[{Second, Functions}]' where the session shed or took back functions in that second.
shed_timeline(Log) ->
    [ferrotrace_bench:by_bucket([At || #{shed_at := At} <- Log], 1000),
     ferrotrace_bench:by_bucket([At || #{restored_at := At} <- Log], 1000)].

%% The node's CPU time (ferrotrace_bench:cpu_ns/0: all its threads, user and system, ns)
%% and reductions.
node_counters() ->
    Cpu = ferrotrace_bench:cpu_ns(),
    true = is_integer(Cpu),
    {erlang:monotonic_time(millisecond), Cpu, element(1, erlang:statistics(reductions))}.

%% Between two node_counters/0: `{CpuCores, MillionReductionsPerCpuSecond}'.
node_use({T0, Cpu0, R0}, {T1, Cpu1, R1}) ->
    {(Cpu1 - Cpu0) / 1.0e6 / max(1, T1 - T0), (R1 - R0) * 1000 / max(1, Cpu1 - Cpu0)}.

report(Label, Pairs) ->
    Untraced = [U || {{U, _, _, _}, _} <- Pairs],
    Traced = [T || {_, {T, _, _, _}} <- Pairs],
    Timed = [N || {_, {_, N, _, _}} <- Pairs, N =/= none],
    Whole = median([lists:sum(T) || T <- Traced]) / max(1, median([lists:sum(U) || U <- Untraced])),
    First = median([lists:sum(lists:sublist(T, 2)) || T <- Traced])
        / max(1, median([lists:sum(lists:sublist(U, 2)) || U <- Untraced])),
    %% The same within each pair of rounds run side by side, then the median over pairs:
    %% a view that leaves out the client's drift over the run.
    {PairWholes, PairFirsts} = pair_ratios(Pairs, fun(_Round) -> 1 end),
    {PairWhole, PairFirst} = {median(PairWholes), median(PairFirsts)},
    io:format("yaws ~s rounds=~b seconds=~b untraced_rps=~s traced_rps=~s~n"
              "yaws ~s round_ratio=~.2f first_2s_ratio=~.2f calls_timed_per_session=~w~n"
              "yaws ~s per_pair_median round_ratio=~.2f first_2s_ratio=~.2f~n"
              "yaws ~s per_pair_90pct_interval round_ratio=~s first_2s_ratio=~s~n",
              [Label, length(Pairs), ?SECONDS, rps(Untraced), rps(Traced), Label, Whole, First, Timed,
               Label, PairWhole, PairFirst, Label, interval(PairWholes), interval(PairFirsts)]),
    %% Each round against its own 2 s before the session's moment, traced against untraced
    %% within each pair: what moves a round's whole level (the connections' luck, the
    %% machine) cancels. Only for outputs that printed those 2 s.
    {OwnWholes, OwnFirsts} = pair_ratios([P || P = {{_, _, _, UB}, {_, _, _, TB}} <- Pairs,
                                               is_integer(UB), is_integer(TB), UB > 0, TB > 0],
                                         fun({_, _, _, Before}) -> Before end),
    _ = [io:format("yaws ~s against_2s_before pairs=~b round_ratio=~.2f first_2s_ratio=~.2f "
                   "90pct_interval round_ratio=~s first_2s_ratio=~s~n",
                   [Label, length(OwnWholes), median(OwnWholes), median(OwnFirsts), interval(OwnWholes),
                    interval(OwnFirsts)])
         || OwnWholes =/= []],
    %% What the node itself saw over the session's seconds: its CPU (the client shares the
    %% machine's cores), and its reductions per CPU-second (what a measure of the cost by
    %% reductions, ferrotrace_nodeload, takes as the node's work).
    Use = fun(Rounds) -> {median([C || {_, _, {C, _}, _} <- Rounds]), median([R || {_, _, {_, R}, _} <- Rounds])} end,
    {{UCpu, URed}, {TCpu, TRed}} = {Use([U || {U, _} <- Pairs]), Use([T || {_, T} <- Pairs])},
    io:format("yaws ~s node_cpu_cores untraced=~.2f traced=~.2f mreds_per_cpu_s untraced=~.1f traced=~.1f~n",
              [Label, UCpu, TCpu, URed, TRed]),
    %% Where in the round a session costs: each second's median, traced against untraced.
    PerSecond = [median([lists:nth(I, T) || T <- Traced]) / max(1, median([lists:nth(I, U) || U <- Untraced]))
                 || I <- lists:seq(1, ?SECONDS)],
    _ = [io:format("yaws ~s per_second_ratio=~s~n", [Label, lists:join(",", [io_lib:format("~.2f", [R]) || R <- PerSecond])])
         || os:getenv("FERROTRACE_YAWS_VERBOSE") =/= false],
    ok.

%% Within each pair, the traced round's requests against the untraced round's, each over
%% its `Level' (1, or its own 2 s before): `{WholeRounds, FirstTwoSeconds}', a ratio a pair.
pair_ratios(Pairs, Level) ->
    lists:unzip([{lists:sum(T) * Level(URound) / max(1, lists:sum(U) * Level(TRound)),
                  lists:sum(lists:sublist(T, 2)) * Level(URound) / max(1, lists:sum(lists:sublist(U, 2)) * Level(TRound))}
                 || {URound = {U, _, _, _}, TRound = {T, _, _, _}} <- Pairs]).

%% Where the median of the pairs' ratios would lie over other runs like this one: the 5th
%% and 95th percentiles of the median over ?RESAMPLES resamples of the pairs (a bootstrap,
%% with a fixed seed so that one run's output reads the same twice). With 12 pairs on the
%% 2-core machine it came to 0.16 to 0.33 wide, the no-session control's as wide.
interval(Ratios) ->
    Pairs = list_to_tuple(Ratios),
    Seed = rand:seed_s(exsss, {17, 29, 43}),
    {Medians, _} = lists:mapfoldl(fun(_, S0) -> resampled_median(Pairs, S0) end, Seed, lists:seq(1, ?RESAMPLES)),
    Sorted = list_to_tuple(lists:sort(Medians)),
    io_lib:format("~.2f..~.2f", [element(?RESAMPLES div 20, Sorted), element(?RESAMPLES - ?RESAMPLES div 20, Sorted)]).

%% The median of as many pairs drawn from `Pairs' (with replacement) as there are.
resampled_median(Pairs, Seed) ->
    {Sample, Next} = lists:mapfoldl(fun(_, S) ->
                                            {I, S1} = rand:uniform_s(tuple_size(Pairs), S),
                                            {element(I, Pairs), S1}
                                    end, Seed, tuple_to_list(Pairs)),
    {median(Sample), Next}.

rps(Rounds) ->
    lists:join(" ", [integer_to_list(lists:sum(R) div ?SECONDS) || R <- Rounds]).

median(List) ->
    Sorted = lists:sort(List),
    lists:nth((length(Sorted) + 1) div 2, Sorted).
