%%% @doc Fuzzing (issue 20, part 2): every exported function of every ferrotrace module is
%%% called with random and adversarial terms (deep, huge, improper, remote and dead pids,
%%% refs, funs, ports, bignums, crafted HdrHistogram binaries, mutations of valid options and
%%% MFAs, and the ids and names of live sessions), each call in its own process with a
%%% deadline, on a peer node, so that a crash is a failed case and not a dead runner.
%%%
%%% A call may answer anything or raise (an exported internal function may raise on junk).
%%% A case fails when a call kills the peer node, when a call neither answers nor raises
%%% within `FERROTRACE_FUZZ_TIMEOUT' ms (default 5000: a hang), when the peer's memory grew
%%% by more than 200 MB at the end or its peak virtual size by more than 3 GiB (listing the
%%% calls after which that peak rose by 64 MiB or more), or when processes left behind keep
%%% growing. Each is
%%% reported with M:F/A and its arguments (symbolic: `{'$ffz', What}' stands for a term
%%% made on the peer, see ft_fuzz_terms:resolve/1), with the seed and the call's index to
%%% reproduce it. After a node death or an unresponsive node the run goes on on a fresh
%%% peer, so one run lists several defects. The terms are made by ft_fuzz_terms, the peer's
%%% side of each call is ft_fuzz_peer.
%%%
%%% Deterministic per seed: `FERROTRACE_FUZZ_SEED' (default: random, printed),
%%% `FERROTRACE_FUZZ_CALLS' (default 5000; `make fuzz' makes 100000). `FERROTRACE_FUZZ_FROM'
%% makes only the calls from that index on: a finding's window is replayed alone.
%%%
%%% The other cases are regressions for defects found by hand, each on its own peer: they
%%% fail until the NIF is fixed.
%%%
%%% What the random calls found when the suite was written (2026-11-24), left for the
%%% modules' owners (see the regressions for the NIF's):
%%% <ul>
%%% <li>Node death: `ferrotrace_tracer:to_json/1' of a list nested 400 deep or more (also a
%%% map 1000 deep); `ferrotrace_tracer:session_events/1' after `send' events from a tracee
%%% that is not a pid (a binary, a ref); reads of the live sessions now and then after
%%% such calls (a probe).</li>
%%% <li>Hangs: `ferrotrace_session:stop/1' and `release/1', `ferrotrace_cluster:part_control/2'
%%% on a live pid that is not such a server wait forever; `ferrotrace_intervals:read/2'
%%% answers after 30 s.</li>
%%% <li>`ferrotrace_registry:register/3' with an info map without `name' (and
%%% `set_patterns/2' with junk) crashes the registry: its tables go with it (live sessions
%%% are no longer found by name), and with a large term in the request its crash report
%%% keeps the caller over 5 s.</li>
%%% </ul>
-module(ferrotrace_fuzz_SUITE).

-include("support/ft_ct.hrl").

-export([end_per_testcase/2]).
-export([random_calls/1, trace_non_local_tracee/1, to_json_deep/1, histogram_huge_claims/1]).

-define(DEFAULT_CALLS, 5000).
-define(DEFAULT_TIMEOUT, 5000).
%% Growth of erlang:memory(total) on a peer that fails the run.
-define(MEMORY_BOUND, 200 * 1024 * 1024).
%% Growth of the peer's peak virtual size (kB) that fails the run: 3 GiB.
-define(VM_PEAK_BOUND_KB, 3 * 1024 * 1024).
%% A call after which the peer's peak virtual size is this much higher (kB) is remembered,
%% so that a vm_peak_growth_kb finding names the calls that raised the peak: 64 MiB.
-define(VM_PEAK_STEP_KB, 64 * 1024).
%% How many such calls a finding lists.
-define(VM_PEAK_STEPS, 20).
%% The run stops after this many findings (each death costs a fresh peer).
-define(MAX_FINDINGS, 30).
%% Every this many calls, the live sessions are read and the peer's processes collected.
-define(PROBE_EVERY, 100).
%% How deep arguments are printed in a report.
-define(DEPTH, 12).

%% Functions not fuzzed. Each entry names why; the engineers fixing them empty this list.
%% `{M, F, A, Why}'.
-define(SKIP, [
    %% Blocks by design: with a live session and `count => infinity' (the default) it
    %% prints a screen every interval until the session stops.
    {ferrotrace, watch, 1, blocks_by_design},
    {ferrotrace, watch, 2, blocks_by_design},
    {ferrotrace_watch, watch, 2, blocks_by_design}
]).

suite() ->
    [{timetrap, {minutes, 15}}, {ct_hooks, [{ft_ct, [{distribution, ferrotrace_fuzz_ct}]}]}].

all() ->
    [random_calls, trace_non_local_tracee, to_json_deep, histogram_huge_claims].

-spec end_per_testcase(atom(), config()) -> ok.
end_per_testcase(_Case, _Config) ->
    _ = [stop_peer(P) || {{fuzz_peer, _}, P} <- get()],
    ok.

%%--------------------------------------------------------------------------------------
%% The random calls

-spec random_calls(config()) -> ok.
random_calls(_Config) ->
    Seed = env_int("FERROTRACE_FUZZ_SEED", erlang:unique_integer([positive]) rem 1000000000),
    Calls = env_int("FERROTRACE_FUZZ_CALLS", ?DEFAULT_CALLS),
    Timeout = env_int("FERROTRACE_FUZZ_TIMEOUT", ?DEFAULT_TIMEOUT),
    ct:pal("fuzz: seed ~b, ~b calls, ~b ms a call (reproduce: FERROTRACE_FUZZ_SEED=~b)",
           [Seed, Calls, Timeout, Seed]),
    %% 100 to 300 calls a second here (a hang costs its timeout); the deadline grows with
    %% the calls asked for.
    ct:timetrap({seconds, 600 + Calls div 10}),
    T0 = erlang:monotonic_time(millisecond),
    Peer0 = start_peer(fuzz),
    Functions = functions(Peer0),
    ct:pal("fuzz: ~b functions in ~b modules; skipped: ~p",
           [length(Functions), length(lists:usort([M || {M, _, _} <- Functions])), ?SKIP]),
    %% The NIFs' functions are drawn four times as often as the others.
    FunTuple = list_to_tuple(lists:append([case M of
                                               ferrotrace_tracer -> [MFA, MFA, MFA, MFA];
                                               _ -> [MFA]
                                           end || MFA = {M, _, _} <- Functions])),
    %% FERROTRACE_FUZZ_FROM=I: calls I..FERROTRACE_FUZZ_CALLS only (each call's terms
    %% depend on the seed and its index alone), to narrow a finding down.
    From = env_int("FERROTRACE_FUZZ_FROM", 1),
    put(fuzz_peer_since, From),
    put(fuzz_vm_peak, {maps:get(node, Peer0), vm_peak_kb(Peer0#{os_pid := none}), []}),
    {Peer, Findings, Tally} = fuzz_loop(From, Calls, Seed, Timeout, FunTuple, Peer0, [], #{}),
    Last = case probe(Peer) of
               ok -> [];
               {failed, Why} -> [#{index => Calls, mfa => {probe_after, length(get_recent()), calls},
                                   args => lists:reverse(get_recent()), outcome => Why}]
           end,
    End = case Last of
              [] -> peer_end_findings(Peer);
              _ -> Last
          end,
    stop_peer(Peer),
    All = lists:reverse(Findings) ++ End,
    Raises = lists:sort([{FA, I} || {{api_raise, FA}, I} <- get()]),
    ct:pal("fuzz: ferrotrace's own functions raised (function, arity, {reason, where}; first call "
           "index):~n~p", [Raises]),
    ct:pal("fuzz: ~b calls in ~b ms, seed ~b: ~p", [Calls, erlang:monotonic_time(millisecond) - T0,
                                                     Seed, Tally]),
    case All of
        [] -> ok;
        _ ->
            Text = [format_finding(F, Seed) || F <- All],
            ct:pal("fuzz: ~b findings, seed ~b:~n~ts", [length(All), Seed, Text]),
            ct:fail({fuzz_findings, length(All), seed, Seed, [summary_line(F) || F <- All]})
    end.

fuzz_loop(I, Calls, _Seed, _Timeout, _Funs, Peer, Findings, Tally) when I > Calls ->
    {Peer, Findings, Tally};
fuzz_loop(I, Calls, Seed, Timeout, Funs, Peer, Findings, Tally) ->
    %% Hashed: exsss seeded with {Seed, I, _} alone made seed S's call I much like seed
    %% S + 1's call I - 1.
    rand:seed(exsss, {erlang:phash2({Seed, I}, 1 bsl 32), erlang:phash2({I, Seed, fuzz}, 1 bsl 32),
                      erlang:phash2({fuzz, Seed, I}, 1 bsl 32)}),
    {M, F, A} = element(rand:uniform(tuple_size(Funs)), Funs),
    Args = [ft_fuzz_terms:arg(M, F, N) || N <- lists:seq(1, A)],
    {Outcome, Peer1} =
        case call_on_peer(Peer, M, F, Args, Timeout) of
            {Fine, P, Head} ->
                %% The API's own module answers {error, Reason} for bad input: its raises are
                %% listed at the end (not a failure: the internal modules may raise).
                _ = [put({api_raise, {F, A, Head}}, I)
                     || M =:= ferrotrace, get({api_raise, {F, A, Head}}) =:= undefined],
                {Fine, P};
            Answer ->
                Answer
        end,
    Tally1 = maps:update_with(outcome_kind(Outcome), fun(N) -> N + 1 end, 1, Tally),
    vm_peak_step(Peer1, I, {M, F, A}, Args),
    Recent = [{I, {M, F, A}, Args} | lists:sublist(get_recent(), ?PROBE_EVERY - 1)],
    %% The calls a probe lists are those the peer it reads has run (FERROTRACE_FUZZ_FROM
    %% the first of them replays its whole life).
    case maps:get(node, Peer1) =:= maps:get(node, Peer) of
        true -> put(fuzz_recent, Recent);
        false -> put(fuzz_recent, []), put(fuzz_peer_since, I + 1)
    end,
    case Outcome of
        {fine, _} when I rem ?PROBE_EVERY =:= 0 ->
            %% Damage that shows later (a corrupt heap, a bad term kept by the engine):
            %% the live sessions are read and every process collected.
            case probe(Peer1) of
                ok ->
                    fuzz_loop(I + 1, Calls, Seed, Timeout, Funs, Peer1, Findings, Tally1);
                {failed, Why} ->
                    Since = get(fuzz_peer_since),
                    Finding = #{index => I, mfa => {probe_after, length(get_recent()), calls},
                                args => lists:reverse(get_recent()),
                                outcome => {Why, peer_ran_calls_from, Since}},
                    ct:pal("fuzz: ~ts", [format_finding(Finding, Seed)]),
                    put(fuzz_recent, []),
                    put(fuzz_peer_since, I + 1),
                    fuzz_loop(I + 1, Calls, Seed, Timeout, Funs, restart_peer(Peer1),
                              [Finding | Findings], Tally1)
            end;
        {fine, _} ->
            fuzz_loop(I + 1, Calls, Seed, Timeout, Funs, Peer1, Findings, Tally1);
        _ ->
            Finding = #{index => I, mfa => {M, F, A}, args => Args, outcome => Outcome},
            ct:pal("fuzz: ~ts", [format_finding(Finding, Seed)]),
            case length(Findings) + 1 >= ?MAX_FINDINGS of
                true ->
                    {Peer1, [Finding, {stopped_early, after_findings, length(Findings) + 1} | Findings],
                     Tally1};
                false ->
                    fuzz_loop(I + 1, Calls, Seed, Timeout, Funs, Peer1, [Finding | Findings], Tally1)
            end
    end.

get_recent() ->
    case get(fuzz_recent) of
        undefined -> [];
        Recent -> Recent
    end.

probe(Peer = #{node := Node}) ->
    try erpc:call(Node, ft_fuzz_peer, peer_probe, [], 60000) of
        ok -> ok
    catch
        error:{erpc, noconnection} -> {failed, {node_died_in_probe, os_status(Peer)}};
        error:{erpc, timeout} -> {failed, {probe_unresponsive, os_status(Peer)}};
        Class:Reason -> {failed, {probe_raised, Class, ft_fuzz_peer:short(Reason)}}
    end.

outcome_kind({fine, Kind}) -> Kind;
outcome_kind({Kind, _}) -> Kind.

%% One call on the peer; a dead or unresponsive peer is replaced by a fresh one.
call_on_peer(Peer = #{node := Node}, M, F, Args, Timeout) ->
    try erpc:call(Node, ft_fuzz_peer, peer_call, [M, F, Args, Timeout], Timeout + 15000) of
        {returned, _} -> {{fine, returned}, Peer};
        {raised, _, Head} -> {{fine, raised}, Peer, Head};
        {hang, Info} ->
            case peer_alive(Peer) of
                true -> {{hang, Info}, Peer};
                false -> {{hang, Info#{then => peer_unresponsive}}, restart_peer(Peer)}
            end;
        {heap_limit, Info} -> {{heap_limit, Info}, Peer}
    catch
        error:{erpc, noconnection} ->
            {{node_died, os_status(Peer)}, restart_peer(Peer)};
        error:{erpc, timeout} ->
            {{peer_unresponsive, os_status(Peer)}, restart_peer(Peer)};
        Class:Reason ->
            {{runner_error, {Class, Reason}}, restart_peer(Peer)}
    end.

peer_alive(#{node := Node}) ->
    try erpc:call(Node, erlang, node, [], 10000) of
        Node -> true
    catch _:_ -> false
    end.

restart_peer(Peer) ->
    stop_peer(Peer),
    start_peer(fuzz).

%% The functions fuzzed: every export of every module of the application on the peer.
functions(#{node := Node}) ->
    {ok, Modules} = erpc:call(Node, fun() ->
                                        _ = application:load(ferrotrace),
                                        application:get_key(ferrotrace, modules)
                                    end),
    Skip = [{M, F, A} || {M, F, A, _} <- ?SKIP],
    lists:sort([{M, F, A} || M <- Modules,
                             {F, A} <- erpc:call(Node, M, module_info, [exports]),
                             F =/= module_info,
                             not lists:member({M, F, A}, Skip)]).

%% What the peer left at the end: memory growth, processes that keep growing.
peer_end_findings(#{node := Node, baseline := Baseline} = Peer) ->
    try erpc:call(Node, ft_fuzz_peer, peer_end, [Baseline], 60000) of
        {ok, Report} ->
            ct:pal("fuzz: at the end of the last peer: ~p~nOS: ~p~nthe calls after which its peak "
                   "virtual size rose by 64 MiB or more: ~p",
                   [Report, os_status(Peer), vm_peak_steps(Node)]),
            #{vm := Before} = Peer,
            Now = vm_status(maps:get(os_pid, Peer)),
            Peak = fun(Vm) when is_map(Vm) -> kb(maps:get(<<"VmPeak">>, Vm, <<"0 kB">>));
                      (_) -> 0
                   end,
            Steps = vm_peak_steps(Node),
            [{memory_growth, Report} || maps:get(memory_growth, Report) > ?MEMORY_BOUND] ++
                %% A call that asked the OS for gigabytes (a crafted histogram's 4 GiB),
                %% with the calls after which the peak rose by 64 MiB or more.
                [{vm_peak_growth_kb, Peak(Now) - Peak(Before),
                  #{raised_by => Steps}}
                 || Peak(Now) - Peak(Before) > ?VM_PEAK_BOUND_KB] ++
                [{growing_processes, Report} || maps:get(growing, Report) =/= []] ++
                %% A session's endpoint (ferrotrace:serve/2) left listening after every
                %% session was released.
                [{listening_left, maps:get(listening_left, Report)} || maps:get(listening_left, Report, []) =/= []]
    catch Class:Reason ->
            [{end_check_failed, {Class, Reason}}]
    end.

%%--------------------------------------------------------------------------------------
%% The peer

start_peer(Name) ->
    {ok, Pid, Node} = peer:start(#{name => peer:random_name(Name), args => ft_ct:code_path(),
                                   wait_boot => 60000}),
    {ok, State} = erpc:call(Node, ft_fuzz_peer, peer_setup, [self()], 60000),
    OsPid = maps:get(os_pid, State),
    Peer = #{pid => Pid, node => Node, os_pid => OsPid, baseline => maps:get(baseline, State),
             vm => vm_status(OsPid)},
    put({fuzz_peer, Node}, Peer),
    Peer.

stop_peer(#{pid := Pid, node := Node, os_pid := OsPid}) ->
    erase({fuzz_peer, Node}),
    _ = (catch peer:stop(Pid)),
    %% A node stuck in a NIF does not halt: the OS process goes.
    _ = os:cmd("kill -9 " ++ OsPid ++ " 2>/dev/null"),
    ok.

%% Remembers call `I' when the peak virtual size of the peer it ran on rose by
%% ?VM_PEAK_STEP_KB or more since the call before (a fresh peer starts a fresh record).
vm_peak_step(Peer = #{node := Node}, I, MFA, Args) ->
    Now = vm_peak_kb(Peer),
    case get(fuzz_vm_peak) of
        {Node, Last, Raised} when Now - Last >= ?VM_PEAK_STEP_KB,
                                  length(Raised) < ?VM_PEAK_STEPS ->
            put(fuzz_vm_peak, {Node, Now, [{I, MFA, Args, Now - Last} | Raised]});
        {Node, Last, Raised} ->
            put(fuzz_vm_peak, {Node, max(Now, Last), Raised});
        _ ->
            %% A fresh peer: from its peak at start.
            put(fuzz_vm_peak, {Node, vm_peak_kb(Peer#{os_pid := none}), []}),
            vm_peak_step(Peer, I, MFA, Args)
    end.

%% The calls vm_peak_step/4 remembered on the peer `Node', as `{Index, MFA, Args, {kb, Rise}}'.
vm_peak_steps(Node) ->
    case get(fuzz_vm_peak) of
        {Node, _, Raised} -> [{Index, MFA, ft_fuzz_peer:short(Args), {kb, Kb}}
                              || {Index, MFA, Args, Kb} <- lists:reverse(Raised)];
        _ -> []
    end.

vm_peak_kb(#{os_pid := none, vm := Vm}) when is_map(Vm) ->
    kb(maps:get(<<"VmPeak">>, Vm, <<"0 kB">>));
vm_peak_kb(#{os_pid := none}) ->
    0;
vm_peak_kb(#{os_pid := OsPid}) ->
    case vm_status(OsPid) of
        Vm when is_map(Vm) -> kb(maps:get(<<"VmPeak">>, Vm, <<"0 kB">>));
        gone -> 0
    end.

os_status(#{os_pid := OsPid, vm := Before}) ->
    #{vm_before => Before, vm_now => vm_status(OsPid)}.

%% Peak virtual and resident sizes of the peer's OS process (kB), from /proc.
vm_status(OsPid) ->
    case file:read_file("/proc/" ++ OsPid ++ "/status") of
        {ok, Text} ->
            maps:from_list([{K, V} || Line <- binary:split(Text, <<"\n">>, [global]),
                                      [K, V] <- [string:split(Line, ":\t")],
                                      lists:member(K, [<<"VmPeak">>, <<"VmHWM">>, <<"VmRSS">>])]);
        {error, _} -> gone
    end.

%%--------------------------------------------------------------------------------------
%% Reports

format_finding(#{index := I, mfa := {probe_after, N, calls}, args := Recent, outcome := Outcome},
               Seed) ->
    [io_lib:format("~nreading the live sessions after call #~b of seed ~b (FERROTRACE_FUZZ_SEED=~b): "
                   "~P~n  the ~b calls before it:~n", [I, Seed, Seed, Outcome, ?DEPTH, N]),
     [io_lib:format("  #~b ~p:~p/~b ~P~n", [J, M, F, A, Args, ?DEPTH]) || {J, {M, F, A}, Args} <- Recent]];
format_finding(#{index := I, mfa := {M, F, A}, args := Args, outcome := Outcome}, Seed) ->
    io_lib:format("~n~p:~p/~b ~P~n  call #~b of seed ~b (FERROTRACE_FUZZ_SEED=~b); arguments:~n  ~P~n",
                  [M, F, A, Outcome, ?DEPTH, I, Seed, Seed, Args, ?DEPTH]);
format_finding(Other, _Seed) ->
    io_lib:format("~n~P~n", [Other, ?DEPTH]).

summary_line(#{index := I, mfa := MFA, outcome := Outcome}) ->
    {I, MFA, element(1, Outcome)};
summary_line(Other) ->
    element(1, Other).

env_int(Name, Default) ->
    case os:getenv(Name) of
        false -> Default;
        "" -> Default;
        Value -> list_to_integer(Value)
    end.

%%--------------------------------------------------------------------------------------
%% Regressions, each on its own peer: they fail until the NIF is fixed.

%% trace/5 with a live session and a tracee that is not a local pid, then the session's
%% summary and flight recorder (heap corruption of the peer); with `send' events, its
%% session_events/1 (20 sends from a binary tracee: "eheap_alloc: Cannot allocate
%% 17494803277448 bytes", or a tag_val_def assertion).
-spec trace_non_local_tracee(config()) -> ok.
trace_non_local_tracee(_Config) ->
    Tracees = [{binary, <<"not a pid">>}, {runner_pid, self()}, {ref, make_ref()},
               {ghost_pid, ghost}, {atom, junk}, {port, port}],
    Results = [{Name, on_fresh_peer(fun() -> trace_non_local(Tracee) end)}
               || {Name, Tracee} <- Tracees],
    expect_survived(Results).

trace_non_local(Tracee0) ->
    Tracee = case Tracee0 of
                 ghost -> ft_fuzz_peer:ghost_pid();
                 port -> open_port({spawn_executable, "/bin/cat"}, []);
                 _ -> Tracee0
             end,
    {ok, S} = ferrotrace:session(#{recent => 100}),
    MFA = {ft_test_target, f, 1},
    %% What trace/5 answers is kept (a raise is not the defect here): the node must live
    %% through the reads that follow.
    Traced = lists:usort(
               [ft_fuzz_peer:short(catch ferrotrace_tracer:trace(Tag, S, Tracee, Message, Opts))
                || _ <- lists:seq(1, 50),
        {Tag, Message, Opts} <- [{call, {ft_test_target, f, [1]}, #{}},
                                 {return_from, MFA, #{extra => 1}},
                                 {call, {ft_test_target, f, [1]}, #{}},
                                 {exception_from, MFA, #{extra => {error, x}}},
                                 {exit, normal, #{}},
                                 %% Message events, read by session_events/1 (found by the
                                 %% fuzz suite: seed 6, call #3688, before this seeding).
                                 {send, {x, y}, #{extra => self()}},
                                 {'receive', {x, y}, #{}}]]),
    Events = ferrotrace_tracer:session_events(S),
    Summary = ferrotrace:summary(S),
    Recent = ferrotrace:recent(S),
    Text = ferrotrace:format(S),
    _ = [erlang:garbage_collect(P) || P <- processes()],
    ok = ferrotrace:release(S),
    {Traced, element(1, Events), is_map(Summary), is_list(Recent), is_binary(Text)}.

%% to_json/1 with a deeply nested term (a 400-deep list: SIGSEGV).
-spec to_json_deep(config()) -> ok.
to_json_deep(_Config) ->
    Cases = [{list, 400}, {list, 1000}, {list, 100000}, {tuple, 1000}, {map, 1000}],
    Results = [{{Kind, Depth}, on_fresh_peer(fun() -> to_json(Kind, Depth) end)}
               || {Kind, Depth} <- Cases],
    expect_survived(Results).

to_json(Kind, Depth) ->
    Term = ft_fuzz_terms:nest(Depth, case Kind of
                           list -> fun(X) -> [X] end;
                           tuple -> fun(X) -> {X} end;
                           map -> fun(X) -> #{<<"k">> => X} end
                       end),
    ft_fuzz_peer:short(catch ferrotrace_tracer:to_json(Term)).

%% histogram_figures/1, histogram_merge/1 and histogram_subtract/2 with a V2 header that
%% claims 4 GiB and holds a few bytes (a 4 GiB allocation).
-spec histogram_huge_claims(config()) -> ok.
histogram_huge_claims(_Config) ->
    Bins = [{{Cookie, few_bytes}, <<Cookie:32, 16#FFFFFFFF:32, 1, 2, 3>>}
            || Cookie <- [16#1c849304, 16#1c849313, 16#1c849314]] ++
           [{{Cookie, header}, <<Cookie:32, 16#FFFFFFFF:32, 0:32, 3:32, 1:64,
                                 16#FFFFFFFFFFFF:64, 1.0:64/float, 1, 2, 3>>}
            || Cookie <- [16#1c849303, 16#1c849304, 16#1c849313, 16#1c849314]],
    Calls = [{figures, fun(B, _) -> ferrotrace_tracer:histogram_figures(B) end},
             {merge, fun(B, _) -> ferrotrace_tracer:histogram_merge([B]) end},
             {merge_with_valid, fun(B, V) -> ferrotrace_tracer:histogram_merge([V, B]) end},
             {subtract_later, fun(B, V) -> ferrotrace_tracer:histogram_subtract(B, V) end},
             {subtract_earlier, fun(B, V) -> ferrotrace_tracer:histogram_subtract(V, B) end}],
    Results = [{{Which, Name}, on_fresh_peer(fun() -> histogram_call(Call, Bin) end)}
               || {Which, Call} <- Calls, {Name, Bin} <- Bins],
    expect_survived(Results).

histogram_call(Call, Bin) ->
    %% A valid histogram: the peer's live calls session has traced lists:seq/2.
    [Valid | _] = maps:get(histograms, ft_fuzz_terms:live_state()),
    case catch Call(Bin, Valid) of
        {error, _} -> ok;
        Other -> {answered, ft_fuzz_peer:short(Other)}
    end.

%% `Fun' on a fresh peer, in a process with a deadline: what it answered, or how it failed,
%% and the peer's peak memory against its start.
on_fresh_peer(Fun) ->
    Peer = start_peer(regression),
    #{node := Node} = Peer,
    Result = try erpc:call(Node, erlang, apply, [Fun, []], 20000) of
                 Answer -> {answered, Answer}
             catch
                 error:{erpc, noconnection} -> {node_died, os_status(Peer)};
                 error:{erpc, timeout} -> {hang, os_status(Peer)};
                 error:{exception, Reason, _} -> {raised, ft_fuzz_peer:short(Reason)};
                 Class:Reason -> {Class, ft_fuzz_peer:short(Reason)}
             end,
    Final = case {Result, peer_alive(Peer)} of
                {{answered, _}, false} -> {node_died_after, Result, os_status(Peer)};
                {{answered, _}, true} -> peak_check(Result, Peer);
                _ -> Result
            end,
    stop_peer(Peer),
    Final.

%% A call that answered but made the peer's virtual memory peak grow by over 1 GiB.
peak_check(Result, Peer = #{vm := Before}) ->
    #{vm_now := Now} = os_status(Peer),
    case {kb(maps:get(<<"VmPeak">>, Before, <<"0 kB">>)), kb(maps:get(<<"VmPeak">>, Now, <<"0 kB">>))} of
        {B, N} when N - B > 1024 * 1024 -> {huge_peak, Result, #{vm_before => Before, vm_now => Now}};
        _ -> Result
    end.

kb(Text) ->
    case string:to_integer(string:trim(Text)) of
        {N, _} when is_integer(N) -> N;
        _ -> 0
    end.

expect_survived(Results) ->
    ct:pal("~p", [Results]),
    Bad = [R || {_, Outcome} = R <- Results, element(1, Outcome) =/= answered],
    case Bad of
        [] -> ok;
        _ -> ct:fail({defects, length(Bad), 'of', length(Results), Bad})
    end.
