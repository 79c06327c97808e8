%%% @doc The overhead budget's fuse (ferrotrace_core::fuse, ferrotrace_overhead): what holds a
%%% budget within the window, on the scheduler. Each case asserts the mechanism, not a
%%% figure of the machine's speed: the fuse charges the costs of its model against the wall
%%% clock, so a tight loop of cheap calls overspends a small share on any machine, however
%%% loaded (it would have to make fewer calls a second than the share allows: at 1 %
%%% and the model's 700 ns a traced call, fewer than 14,000).
-module(ferrotrace_fuse_SUITE).

-include("support/ft_ct.hrl").

-export([untraces_a_process_over_its_share/1, refuses_before_it_untraces/1,
         forgets_the_open_calls_of_an_untraced_process/1, bad_fuse_is_refused/1,
         budget_sheds_what_the_fuse_untraced/1, untraced_process_is_traced_again/1,
         armed_before_processes_are_flagged/1, counts_the_processes_born_with_its_flags/1]).

suite() ->
    [{ct_hooks, [{ft_ct, [ft_fuse_target, ft_trace_state]}]}, {timetrap, {minutes, 2}}].

all() ->
    [untraces_a_process_over_its_share, refuses_before_it_untraces,
     forgets_the_open_calls_of_an_untraced_process, bad_fuse_is_refused,
     budget_sheds_what_the_fuse_untraced, untraced_process_is_traced_again,
     armed_before_processes_are_flagged, counts_the_processes_born_with_its_flags].

%% A fuse armed by hand (no budget process to set it anew): a share of a thousandth and a
%% millisecond a call. The first call spends the bucket and more; at the second the deficit
%% is past its depth (10 ms of the share: 10 us) and the process is untraced: `remove'.
-spec untraces_a_process_over_its_share(config()) -> ok.
untraces_a_process_over_its_share(_Config) ->
    {ok, S} = ferrotrace:calls({ft_fuse_target, hot, 1}, #{duration => 60000, max_overhead => none}),
    ok = ferrotrace_tracer:session_set_fuse(S, #{share => 0.001, traced_ns => 1.0e6, refused_ns => 1.0e6}),
    {ok, #{untraced := 0}} = ferrotrace_tracer:session_fuse(S),
    P = spin_and_wait(10000),
    ?assertNot(ft_trace_state:traced_by_ferrotrace(P)),
    {ok, #{untraced := 1}} = ferrotrace_tracer:session_fuse(S),
    #{events := #{untraced := 1}, calls := [#{count := Count}]} = ferrotrace:summary(S),
    %% The first call was traced; none after the second, unless the second came 2 ms after
    %% (the fuse's trickle then traces a run of 16).
    ?assert(Count >= 1 andalso Count =< 17, Count),
    %% The budget's read gives its pid, once.
    {ok, #{untraced_pids := [P]}} = ferrotrace_tracer:session_counts(S),
    {ok, #{untraced_pids := []}} = ferrotrace_tracer:session_counts(S),
    %% Another process is traced as before: the fuse is the thread's, the removal the
    %% process's (the deficit is still deep: its first call untraces it too, or the first
    %% past the trickle's run of 16 calls).
    Q = spin_and_wait(100),
    ?assertNot(ft_trace_state:traced_by_ferrotrace(Q)),
    #{events := #{untraced := 2}} = ferrotrace:summary(S),
    P ! stop, Q ! stop,
    ok = ferrotrace:release(S).

%% A deeper bucket: calls pass while it lasts, then are refused (`discard', counted as
%% `fuse_refused') while the deficit is within the depth, and only then the process is
%% untraced. A refused call costs a tenth of a traced one here: ten refusals a traced call.
-spec refuses_before_it_untraces(config()) -> ok.
refuses_before_it_untraces(_Config) ->
    {ok, S} = ferrotrace:calls({ft_fuse_target, hot, 1}, #{duration => 60000, max_overhead => none}),
    %% Depth: 10 ms of 0.01 = 100 us: ten traced calls of 10 us, then refusals of 1 us.
    ok = ferrotrace_tracer:session_set_fuse(S, #{share => 0.01, traced_ns => 1.0e4, refused_ns => 1.0e3}),
    P = spin_and_wait(100000),
    ?assertNot(ft_trace_state:traced_by_ferrotrace(P)),
    #{events := #{untraced := 1, fuse_refused := Refused}, calls := [#{count := Count}]} = ferrotrace:summary(S),
    %% About 10 traced (more where the clock moved meanwhile: the share refills), about
    %% 100 refused; far fewer than the 100,000 calls.
    ?assert(Count >= 10 andalso Count < 1000, Count),
    ?assert(Refused >= 90 andalso Refused < 10000, Refused),
    P ! stop,
    ok = ferrotrace:release(S).

%% Untraced inside a call of its own, a process's open call will never return to the
%% tracer: it is forgotten (abandoned), as at an exit, not left open for the life of the
%% session.
-spec forgets_the_open_calls_of_an_untraced_process(config()) -> ok.
forgets_the_open_calls_of_an_untraced_process(_Config) ->
    {ok, S} = ferrotrace:calls([{ft_fuse_target, hot, 1}, {ft_fuse_target, inside, 1}],
                               #{duration => 60000, max_overhead => none}),
    ok = ferrotrace_tracer:session_set_fuse(S, #{share => 0.001, traced_ns => 1.0e6, refused_ns => 1.0e6}),
    P = spawn(fun() -> ft_fuse_target:inside(10000) end),
    ok = ft_ct:poll(fun() -> not ft_trace_state:traced_by_ferrotrace(P) end, 10000),
    ok = ft_ct:poll(fun() ->
                            #{pairing := #{open_calls := Open, abandoned_calls := Abandoned}} = ferrotrace:summary(S),
                            Open =:= 0 andalso Abandoned =:= 1
                    end, 10000),
    P ! stop,
    ok = ferrotrace:release(S).

%% The fuse's parameters are checked: a share in (0, 1], costs in (0, 1e9], no other key.
-spec bad_fuse_is_refused(config()) -> ok.
bad_fuse_is_refused(_Config) ->
    {ok, S} = ferrotrace:calls({ft_fuse_target, hot, 1}, #{duration => 60000, max_overhead => none}),
    Good = #{share => 0.05, traced_ns => 700, refused_ns => 200},
    _ = [?assertMatch({error, {bad_fuse, Bad, <<_/binary>>}}, ferrotrace_tracer:session_set_fuse(S, Bad))
         || Bad <- [Good#{share := 0}, Good#{share := 1.5}, Good#{traced_ns := 0}, Good#{refused_ns := -1},
                    Good#{refused_ns := 2.0e9}, Good#{share := half}, maps:remove(share, Good),
                    Good#{extra => 1}, on, [], 7]],
    {ok, off} = ferrotrace_tracer:session_fuse(S),
    ok = ferrotrace_tracer:session_set_fuse(S, Good),
    {ok, #{untraced := 0}} = ferrotrace_tracer:session_fuse(S),
    ok = ferrotrace_tracer:session_set_fuse(S, off),
    {ok, off} = ferrotrace_tracer:session_fuse(S),
    ok = ferrotrace:release(S),
    {error, not_running} = ferrotrace_tracer:session_set_fuse(S, Good),
    {error, not_running} = ferrotrace_tracer:session_fuse(S),
    {error, not_running} = ferrotrace_tracer:session_set_fuse(-1, Good),
    ok.

%% Load that arrives after the start: a budgeted session's fuse untraces the process that
%% calls a cheap function in a tight loop, and the budget's next tick, brought forward by
%% the fuse, sheds that function (its pattern comes off).
-spec budget_sheds_what_the_fuse_untraced(config()) -> ok.
budget_sheds_what_the_fuse_untraced(_Config) ->
    {ok, S} = ferrotrace:calls({ft_fuse_target, '_', '_'}, #{duration => 60000, max_overhead => 0.01}),
    Worker = spawn(fun ft_fuse_target:forever/0),
    ok = ft_ct:poll(fun() -> shed(S) =/= [] end, 20000),
    ?assert(lists:member({ft_fuse_target, hot, 1}, shed(S)), shed(S)),
    #{events := #{untraced := Untraced}} = ferrotrace:summary(S),
    ?assert(Untraced >= 1, Untraced),
    ?assertNot(ft_trace_state:traced({ft_fuse_target, hot, 1})),
    exit(Worker, kill),
    ok = ferrotrace:release(S).

%% Once what made it cost is shed, an untraced process is traced again: its other calls are
%% timed.
-spec untraced_process_is_traced_again(config()) -> ok.
untraced_process_is_traced_again(_Config) ->
    {ok, S} = ferrotrace:calls({ft_fuse_target, '_', '_'}, #{duration => 60000, max_overhead => 0.01}),
    Worker = spawn(fun ft_fuse_target:forever/0),
    ok = ft_ct:poll(fun() -> retraced(S) >= 1 end, 30000),
    ok = ft_ct:poll(fun() -> ft_trace_state:traced_by_ferrotrace(Worker) end, 10000),
    exit(Worker, kill),
    ok = ferrotrace:release(S).

%% A budget's fuse is armed by the keeper before any process is flagged
%% (ferrotrace_overhead:arm_first/2), not only by the budget's process once it runs: a
%% budgeted session's fuse is armed when calls/2 returns. arm_first/2 arms a running
%% session's fuse, and refuses a budget start/3 refuses and a session that ended.
-spec armed_before_processes_are_flagged(config()) -> ok.
armed_before_processes_are_flagged(_Config) ->
    {ok, B} = ferrotrace:calls({ft_fuse_target, hot, 1}, #{duration => 60000, max_overhead => 0.01}),
    {ok, #{untraced := 0}} = ferrotrace_tracer:session_fuse(B),
    ok = ferrotrace:release(B),
    {ok, S} = ferrotrace:calls({ft_fuse_target, hot, 1}, #{duration => 60000, max_overhead => none}),
    {ok, off} = ferrotrace_tracer:session_fuse(S),
    _ = [?assertEqual({error, badarg}, ferrotrace_overhead:arm_first(S, Bad))
         || Bad <- [{0, 1, [], undefined}, {1.5, 1, [], undefined}, {{default, -1}, 1, [], undefined},
                    {0.05, 0, [], undefined}, {0.05, 1, none, undefined}, {0.05, 1, [], baseline}, 0.05]],
    {ok, off} = ferrotrace_tracer:session_fuse(S),
    ok = ferrotrace_overhead:arm_first(S, {{default, 0.1}, 1, [], undefined}),
    {ok, #{untraced := 0}} = ferrotrace_tracer:session_fuse(S),
    ok = ferrotrace:release(S),
    {error, not_running} = ferrotrace_overhead:arm_first(S, {0.05, 1, [], undefined}),
    ok.

%% The processes born while a session flags new ones are counted (`born', what the budget
%% charges for them: ferrotrace_budget's births), each once, whatever they call: the VM asks
%% `enabled(trace_status, State, undefined)' as it gives one the session's flags. Others born
%% on the node meanwhile (CT's own) count too: a margin of a tenth. A session that flags no
%% new process (`pids => existing') counts none.
-spec counts_the_processes_born_with_its_flags(config()) -> ok.
counts_the_processes_born_with_its_flags(_Config) ->
    N = 5000,
    {ok, S} = ferrotrace:calls({ft_fuse_target, hot, 1}, #{duration => 60000, max_overhead => none}),
    {ok, #{events := #{born := B0}}} = ferrotrace_tracer:session_counts(S),
    ok = births(N),
    {ok, #{events := #{born := B1}}} = ferrotrace_tracer:session_counts(S),
    ?assert(B1 - B0 >= N andalso B1 - B0 =< N + N div 10, {B0, B1}),
    #{events := #{born := Born}} = ferrotrace:summary(S),
    ?assert(Born >= B1, {Born, B1}),
    ok = ferrotrace:release(S),
    {ok, E} = ferrotrace:calls({ft_fuse_target, hot, 1}, #{duration => 60000, max_overhead => none, pids => existing}),
    ok = births(N),
    {ok, #{events := #{born := 0}}} = ferrotrace_tracer:session_counts(E),
    ok = ferrotrace:release(E).

%% `N' processes born and ended, one after another.
births(0) ->
    ok;
births(N) ->
    {Pid, Ref} = spawn_monitor(fun() -> ok end),
    receive {'DOWN', Ref, process, Pid, _} -> births(N - 1) end.

%% Spawns a process that calls hot/1 `N' times and then waits for `stop'; returns it once
%% its calls are done.
spin_and_wait(N) ->
    Self = self(),
    P = spawn(fun() -> ok = ft_fuse_target:spin(N), Self ! {spun, self()}, receive stop -> ok end end),
    receive {spun, P} -> P after 30000 -> error({timeout, spin, N}) end.

%% What the budget shed, and how many processes it traced again (none before its process
%% first published, a moment after the start).
shed(S) ->
    case ferrotrace:summary(S) of
        #{budget := #{shed := Shed}} -> [MFA || #{mfa := MFA} <- Shed];
        #{} -> []
    end.

retraced(S) ->
    case ferrotrace:summary(S) of
        #{budget := #{untraced := #{retraced := Retraced}}} -> Retraced;
        #{} -> 0
    end.
