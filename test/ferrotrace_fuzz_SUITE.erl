%%% @doc Fuzzing (issue 20, part 2): every exported function of every ferrotrace module is
%%% called with random and adversarial terms (deep, huge, improper, remote and dead pids,
%%% refs, funs, ports, bignums, crafted HdrHistogram binaries, mutations of valid options and
%%% MFAs, and the ids and names of live sessions), each call in its own process with a
%%% deadline, on a peer node, so that a crash is a failed case and not a dead runner.
%%%
%%% A call may answer anything or raise (an exported internal function may raise on junk).
%%% A case fails when a call kills the peer node, when a call neither answers nor raises
%%% within `FERROTRACE_FUZZ_TIMEOUT' ms (default 5000: a hang), when the peer's memory grew
%%% by more than 200 MB at the end, or when processes left behind keep growing. Each is
%%% reported with M:F/A and its arguments (symbolic: `{'$ffz', What}' stands for a term made
%%% on the peer, see resolve/1), with the seed and the call's index to reproduce it. After a
%%% node death or an unresponsive node the run goes on on a fresh peer, so one run lists
%%% several defects.
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
%% Run on the peer.
-export([peer_setup/1, peer_call/4, peer_check/1, peer_probe/0, peer_end/1, resolve/1, bystander/0,
         null_io/0]).

-define(DEFAULT_CALLS, 5000).
-define(DEFAULT_TIMEOUT, 5000).
%% Growth of erlang:memory(total) on a peer that fails the run.
-define(MEMORY_BOUND, 200 * 1024 * 1024).
%% Growth of the peer's peak virtual size (kB) that fails the run: 3 GiB.
-define(VM_PEAK_BOUND_KB, 3 * 1024 * 1024).
%% A worker's heap beyond this many words is killed (and reported: one call built 800 MB).
-define(MAX_HEAP_WORDS, 100 * 1024 * 1024).
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
    {ferrotrace, watch, 2, blocks_by_design}
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
    Args = [arg(M, F, N) || N <- lists:seq(1, A)],
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
    try erpc:call(Node, ?MODULE, peer_probe, [], 60000) of
        ok -> ok
    catch
        error:{erpc, noconnection} -> {failed, {node_died_in_probe, os_status(Peer)}};
        error:{erpc, timeout} -> {failed, {probe_unresponsive, os_status(Peer)}};
        Class:Reason -> {failed, {probe_raised, Class, short(Reason)}}
    end.

outcome_kind({fine, Kind}) -> Kind;
outcome_kind({Kind, _}) -> Kind.

%% One call on the peer; a dead or unresponsive peer is replaced by a fresh one.
call_on_peer(Peer = #{node := Node}, M, F, Args, Timeout) ->
    try erpc:call(Node, ?MODULE, peer_call, [M, F, Args, Timeout], Timeout + 15000) of
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
    try erpc:call(Node, ?MODULE, peer_end, [Baseline], 60000) of
        {ok, Report} ->
            ct:pal("fuzz: at the end of the last peer: ~p~nOS: ~p", [Report, os_status(Peer)]),
            #{vm := Before} = Peer,
            Now = vm_status(maps:get(os_pid, Peer)),
            Peak = fun(Vm) when is_map(Vm) -> kb(maps:get(<<"VmPeak">>, Vm, <<"0 kB">>));
                      (_) -> 0
                   end,
            [{memory_growth, Report} || maps:get(memory_growth, Report) > ?MEMORY_BOUND] ++
                %% A call that asked the OS for gigabytes (a crafted histogram's 4 GiB).
                [{vm_peak_growth_kb, Peak(Now) - Peak(Before)}
                 || Peak(Now) - Peak(Before) > ?VM_PEAK_BOUND_KB] ++
                [{growing_processes, Report} || maps:get(growing, Report) =/= []]
    catch Class:Reason ->
            [{end_check_failed, {Class, Reason}}]
    end.

%%--------------------------------------------------------------------------------------
%% The peer

start_peer(Name) ->
    {ok, Pid, Node} = peer:start(#{name => peer:random_name(Name), args => ft_ct:code_path(),
                                   wait_boot => 60000}),
    {ok, State} = erpc:call(Node, ?MODULE, peer_setup, [self()], 60000),
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

%% @doc On the peer: the live state the generated terms refer to, kept by a process that
%% lives as long as the node.
-spec peer_setup(pid()) -> {ok, map()}.
peer_setup(Runner) ->
    _ = application:load(ferrotrace),
    {module, ferrotrace_tracer} = code:ensure_loaded(ferrotrace_tracer),
    _ = code:ensure_loaded(ft_test_target),
    Parent = self(),
    Keeper = spawn(fun() -> keeper(Parent, Runner) end),
    receive {Keeper, Live} -> ok after 30000 -> Live = error(keeper_timeout) end,
    persistent_term:put({?MODULE, live}, Live),
    _ = [erlang:garbage_collect(P) || P <- processes()],
    Baseline = #{memory => erlang:memory(total), processes => processes()},
    {ok, #{os_pid => os:getpid(), baseline => Baseline}}.

keeper(Parent, Runner) ->
    Null = spawn(fun null_io/0),
    true = register(ferrotrace_fuzz_null, Null),
    group_leader(Null, self()),
    Bystander = spawn(fun bystander/0),
    true = register(ferrotrace_fuzz_bystander, Bystander),
    {ok, Raw} = ferrotrace:session(#{recent => 100, name => fuzz_raw, duration => infinity}),
    {ok, Calls} = ferrotrace:calls([{lists, seq, 2}, {ft_test_target, '_', '_'}],
                                   #{recent => 100, name => fuzz_calls, args => true,
                                     duration => infinity, slowest => 5}),
    {ok, Stopped} = ferrotrace:session(#{}),
    ok = ferrotrace:stop(Stopped),
    {ok, Released} = ferrotrace:session(#{}),
    ok = ferrotrace:release(Released),
    _ = [lists:seq(1, N) || N <- lists:seq(1, 200)],
    _ = [catch ft_test_target:f(N) || N <- lists:seq(1, 50)],
    _ = ferrotrace_tracer:trace(call, Raw, self(), {lists, seq, [1, 2]}, #{}),
    Summary = ferrotrace:summary(Calls),
    Recent = ferrotrace:recent(Calls),
    Histograms = case ferrotrace_tracer:session_histograms_bytes(Calls) of
                     {ok, [_ | _] = Hs} -> [B || {_, B} <- Hs];
                     _ -> []
                 end,
    Dead = spawn(fun() -> ok end),
    Port = open_port({spawn_executable, "/bin/cat"}, []),
    Registry = whereis(ferrotrace_registry),
    SessionPids = [P || {_, _, P, _} <- catch ferrotrace_registry:sessions()],
    Live = #{raw => Raw, calls => Calls, stopped => Stopped, released => Released,
             names => [fuzz_raw, fuzz_calls], keeper => self(), bystander => Bystander,
             null => Null, dead_pid => Dead, runner_pid => Runner, port => Port,
             registry => Registry, session_pids => SessionPids,
             summary => Summary, recent => Recent, histograms => Histograms,
             ghost_pid => ghost_pid(), stable_ref => make_ref()},
    Parent ! {self(), Live},
    receive stop -> ok end.

%% A pid of a node that does not exist, made as the external format encodes it.
ghost_pid() ->
    Name = <<"ghost@nowhere">>,
    binary_to_term(<<131, 88, 119, (byte_size(Name)), Name/binary, 1:32, 0:32, 7:32>>).

%% @doc On the peer: a registered process that takes every message and never answers.
-spec bystander() -> no_return().
bystander() ->
    receive _ -> bystander() end.

%% @doc On the peer: an io server that answers every request `ok' and keeps nothing.
-spec null_io() -> no_return().
null_io() ->
    receive
        {io_request, From, ReplyAs, _} -> From ! {io_reply, ReplyAs, ok};
        _ -> ok
    end,
    null_io().

%% @doc On the peer: `M:F(Args...)' in a fresh process, its output discarded.
-spec peer_call(module(), atom(), [term()], pos_integer()) ->
          {returned, atom()} | {raised, atom(), term()} | {hang, map()} | {heap_limit, map()}.
peer_call(M, F, SymArgs, Timeout) ->
    Null = whereis(ferrotrace_fuzz_null),
    {Pid, Ref} = spawn_opt(fun() ->
                                   group_leader(Null, self()),
                                   Args = resolve(SymArgs),
                                   %% Caught: a process that dies of an error is logged by
                                   %% the emulator with its arguments (10 MB binaries), and
                                   %% the peer's logger_proxy grew by hundreds of MB.
                                   try erlang:apply(M, F, Args) of
                                       _ -> exit('$ffz_returned')
                                   catch Class:Reason:Stack ->
                                           exit({'$ffz_raised', Class,
                                                 raise_head({Reason, Stack})})
                                   end
                           end,
                           [monitor, {max_heap_size, #{size => ?MAX_HEAP_WORDS, kill => true,
                                                       error_logger => false}}]),
    receive
        {'DOWN', Ref, process, Pid, '$ffz_returned'} -> {returned, ok};
        {'DOWN', Ref, process, Pid, {'$ffz_raised', Class, Head}} -> {raised, Class, Head};
        {'DOWN', Ref, process, Pid, killed} -> {heap_limit, #{}};
        {'DOWN', Ref, process, Pid, Reason} -> {raised, exit, raise_head(Reason)}
    after Timeout ->
            Info = erlang:process_info(Pid, [current_stacktrace, status, memory,
                                             message_queue_len]),
            exit(Pid, kill),
            receive {'DOWN', Ref, process, Pid, _} -> ok after 5000 -> ok end,
            {hang, #{after_ms => Timeout, info => short(Info), still_alive => is_process_alive(Pid)}}
    end.

%% The reason's name and where it was raised: `{badarg, {erlang, node, 1}}'.
raise_head({Reason, [{M, F, A, _} | _]}) ->
    {reason_name(Reason), {M, F, if is_list(A) -> length(A); true -> A end}};
raise_head(Reason) ->
    {reason_name(Reason), exit}.

reason_name(Reason) when is_atom(Reason) -> Reason;
reason_name(Reason) when is_tuple(Reason), tuple_size(Reason) > 0, is_atom(element(1, Reason)) ->
    element(1, Reason);
reason_name(_) -> other.

short(Term) ->
    lists:flatten(io_lib:format("~P", [Term, ?DEPTH])).

%% @doc On the peer: the live sessions read (summary, flight recorder, report) and every
%% process garbage collected. What the reads answer does not matter (a fuzzed call may have
%% stopped or released a session); the node must live through them.
-spec peer_probe() -> ok.
peer_probe() ->
    Live = persistent_term:get({?MODULE, live}),
    Null = whereis(ferrotrace_fuzz_null),
    {Pid, Ref} = spawn_monitor(
                   fun() ->
                           group_leader(Null, self()),
                           _ = [catch Read(maps:get(K, Live))
                                || K <- [raw, calls],
                                   Read <- [fun ferrotrace:summary/1, fun ferrotrace:recent/1,
                                            fun ferrotrace:format/1]],
                           _ = [erlang:garbage_collect(P) || P <- processes()],
                           exit(normal)
                   end),
    receive {'DOWN', Ref, process, Pid, _} -> ok
    after 30000 -> exit(Pid, kill), error(probe_timeout)
    end.

%% @doc On the peer: whether the live state is still there (for the regressions).
-spec peer_check(term()) -> map().
peer_check(_) ->
    #{memory => erlang:memory(total), processes => length(processes())}.

%% @doc On the peer: memory growth since the baseline, and processes left behind that
%% keep growing (two looks a second apart, after a garbage collection).
-spec peer_end(map()) -> {ok, map()}.
peer_end(#{memory := Memory0, processes := Procs0}) ->
    [erlang:garbage_collect(P) || P <- processes()],
    timer:sleep(500),
    [erlang:garbage_collect(P) || P <- processes()],
    Memory1 = erlang:memory(total),
    Left = processes() -- Procs0,
    Look = fun() -> maps:from_list([{P, M} || P <- Left,
                                              {memory, M} <- [erlang:process_info(P, memory)]])
           end,
    First = Look(),
    timer:sleep(1000),
    [erlang:garbage_collect(P) || P <- Left],
    Second = Look(),
    Growing = [{P, M0, M1, erlang:process_info(P, [initial_call, current_function, registered_name])}
               || {P, M1} <- maps:to_list(Second), {ok, M0} <- [maps:find(P, First)],
                  M1 > M0 + 1024 * 1024],
    {ok, #{memory_before => Memory0, memory_after => Memory1, memory_growth => Memory1 - Memory0,
           memory => erlang:memory(),
           largest_processes => lists:sublist(lists:reverse(lists:keysort(2,
               [{P, M, erlang:process_info(P, [initial_call, registered_name])}
                || P <- processes(), {memory, M} <- [erlang:process_info(P, memory)]])), 3),
           largest_tables => lists:sublist(lists:reverse(lists:keysort(2,
               [{T, W * erlang:system_info(wordsize)} || T <- ets:all(),
                                                         W <- [ets:info(T, memory)], is_integer(W)])), 3),
           sessions => length(ferrotrace_tracer:sessions()),
           processes_left => length(Left),
           left_initial_calls => lists:usort([IC || P <- Left,
                                                     {initial_call, IC} <- [erlang:process_info(P, initial_call)]]),
           growing => Growing}}.

%%--------------------------------------------------------------------------------------
%% The terms. Generated on the runner as data; `{'$ffz', What}' is made on the peer by
%% resolve/1 (live pids and sessions, funs, ports, refs, huge and deep terms).

%% Where a function takes a session, half its arguments there are a live one (the raw
%% session, the calls session, their names): the engine's state is fuzzed, not only its
%% checks of the arguments.
arg(ferrotrace_tracer, F, 2) when F =:= trace; F =:= enabled; F =:= enabled_call;
                                 F =:= enabled_procs ->
    session_arg();
%% trace/5: half the events are shaped as the VM sends them, so that they reach the
%% aggregation with whatever tracee (argument 3) was generated.
arg(ferrotrace_tracer, trace, 3) ->
    %% A few tracees used again and again, so that a call and its return pair up.
    case rand:uniform(2) of
        1 -> term(3);
        2 -> pick([{'$ffz', runner_pid}, {'$ffz', ghost_pid}, {'$ffz', stable_ref},
                   {'$ffz', keeper}, <<"tracee">>, tracee, {'$ffz', port}])
    end;
arg(ferrotrace_tracer, trace, N) ->
    case rand:uniform(2) of
        1 -> term(3);
        2 -> case N of
                 1 -> pick([call, return_from, exception_from, exit, return_to, send,
                            'receive', in, out, gc_major_start, spawn]);
                 2 -> {'$ffz', pick([raw, calls, fuzz_raw, fuzz_calls])};
                 4 -> pick([{lists, seq, [1, 2]}, {ft_test_target, f, [1]}, {lists, seq, 2},
                            {ft_test_target, f, 1}, normal, {x, y}, [1, 2]]);
                 5 -> pick([#{}, #{extra => 1}, #{extra => {error, x}},
                            #{match_spec_result => true}, #{timestamp => 1}])
             end
    end;
arg(ferrotrace_tracer, F, 1) ->
    case atom_to_list(F) of
        "session_" ++ _ when F =/= session_set_tracing, F =/= session_set_events -> session_arg();
        _ -> term(3)
    end;
arg(ferrotrace, F, 1) when F =/= stop, F =/= release ->
    session_arg();
arg(_M, _F, _N) ->
    term(3).

session_arg() ->
    case rand:uniform(2) of
        1 -> {'$ffz', pick([raw, calls, fuzz_raw, fuzz_calls, raw, calls])};
        2 -> term(3)
    end.

term(0) ->
    leaf();
term(Size) ->
    case rand:uniform(100) of
        N when N =< 35 -> leaf();
        N when N =< 45 -> [term(Size - 1) || _ <- lists:seq(1, rand:uniform(4) - 1)];
        N when N =< 52 -> list_to_tuple([term(Size - 1) || _ <- lists:seq(1, rand:uniform(4) - 1)]);
        N when N =< 58 -> maps:from_list([{term(Size - 1), term(Size - 1)}
                                          || _ <- lists:seq(1, rand:uniform(3) - 1)]);
        N when N =< 61 -> [term(Size - 1) | term(Size - 1)];
        N when N =< 75 -> live();
        N when N =< 90 -> valid();
        N when N =< 97 -> mutated();
        _ -> heavy()
    end.

pick(List) ->
    lists:nth(rand:uniform(length(List)), List).

leaf() ->
    case rand:uniform(12) of
        1 -> pick([ok, undefined, true, false, '_', '$1', call, return_from, exception_from,
                   exit, send, 'receive', all, new, existing, infinity, local, global, json,
                   hdr_log, collapsed, chrome_trace, slowest, threshold, inclusive, exclusive,
                   user, owner_down, count, total, p99, max, messages, procs, gc, scheduling,
                   ports, nonode@nohost, lists, seq, ft_test_target, f, ferrotrace, fuzz_raw]);
        2 -> pick([duration, ring_size, max_events, max_rate, max_functions, max_open_calls,
                   sample, on_limit, recent, name, keep, owner, pids, scope, also, callers,
                   intervals, max_intervals, args, max_term_bytes, keys, slow, top, sort,
                   width, interval, weight, nodes]);
        3 -> pick([0, 1, -1, 2, 3, 7, 64, 255, 256, 1000, 60000, 16#FFFFFFFF, 16#100000000,
                   1 bsl 63, (1 bsl 64) - 1, 1 bsl 64, -(1 bsl 63), -(1 bsl 64)]);
        4 -> rand:uniform(1 bsl rand:uniform(2000)) * pick([1, -1]);
        5 -> pick([0.0, 1.5, -1.5, 1.0e308, -1.0e308, 5.0e-324, 3.0, 0.5]);
        6 -> rand:uniform(100000) - 50000;
        7 -> crypto_free_bytes(rand:uniform(64) - 1);
        8 -> pick(["lists:seq/2", "lists:seq(A, B) when A > B", "ft_test_target:f/1",
                   "MyApp.Cart.add/2", "lists:_/_", "_:_/_", "lists:seq/300", "a:b(",
                   "", "m:f/-1", <<"lists:seq/2">>, <<"duration">>, "duration", [$a | $b]]);
        9 -> hdr_crafted();
        10 -> pick([[], #{}, {}, <<>>, "", [[]], {{}}]);
        11 -> list_to_atom([$a + rand:uniform(25) || _ <- lists:seq(1, rand:uniform(12))]);
        12 -> pick([list_to_atom(lists:duplicate(255, $x)), {lists, seq, 2}, {ft_test_target, f, 1},
                    {'_', '_', '_'}, {lists, '_', '_'}, {lists, seq, '_'}])
    end.

crypto_free_bytes(N) ->
    << <<(rand:uniform(256) - 1)>> || _ <- lists:seq(1, N) >>.

%% HdrHistogram V2 headers that claim more than they hold.
hdr_crafted() ->
    Cookie = pick([16#1c849304, 16#1c849313, 16#1c849314, 16#1c849303, 16#1c849301]),
    Len = pick([16#FFFFFFFF, 16#7FFFFFFF, 16#10000000, 0, 1, 40]),
    Tail = pick([<<>>, <<1, 2, 3>>, crypto_free_bytes(40), <<0:320>>,
                 <<1:32, 3:32, 1:64, 16#FFFFFFFFFFFF:64, 1.0:64/float>>]),
    <<Cookie:32, Len:32, Tail/binary>>.

live() ->
    {'$ffz', pick([raw, calls, stopped, released, fuzz_raw, fuzz_calls, self, keeper, bystander, null, dead_pid,
                   runner_pid, ghost_pid, port, registry, session_pid, ref, remote_ref,
                   fun0, fun1, fun2, fun3, fun_raise, ext_fun, histogram, summary, recent,
                   raw_id_plus_one])}.

heavy() ->
    {'$ffz', pick([{binary, rand:uniform(10) bsl 20}, {deep_list, 1000}, {deep_list, 400},
                   {deep_tuple, 1000}, {deep_map, 1000}, {long_list, 100000},
                   {long_improper, 100000}, {long_string, 1 bsl 20},
                   {deep_list, rand:uniform(1000)}, {big_map, 100000}])}.

%% Valid values of the API's arguments.
valid() ->
    pick([#{}, #{duration => 60000}, #{ring_size => 1024, max_events => 1000},
          #{recent => 10, args => true}, #{name => fuzz_new}, #{intervals => 1000},
          #{max_rate => {100, 1000}, sample => 0.5, on_limit => stop}, #{top => 5, sort => p99},
          #{interval => 100, count => 1}, #{weight => inclusive}, [{duration, 1000}],
          #{slowest => 3, threshold => 1000, max_slow_calls => 10}, #{aggregators => 2},
          #{callers => true, max_keys => 10}, #{nodes => [nonode@nohost]}, #{key => message},
          #{pids => [{'$ffz', self}]}, #{owner => none},
          {lists, seq, 2}, {ft_test_target, f, 1}, [{lists, seq, 2}],
          {lists, seq, [{['$1', '_'], [{'>', '$1', 1}], []}]}, {json, #{}},
          {collapsed, #{weight => exclusive}}, [procs, messages], [gc], [scheduling],
          {'$ffz', histogram}, {'$ffz', summary}, {'$ffz', recent}]).

%% A valid value with one part changed.
mutated() ->
    case valid() of
        Map when is_map(Map), map_size(Map) > 0 ->
            Key = pick(maps:keys(Map)),
            case rand:uniform(3) of
                1 -> Map#{Key := term(1)};
                2 -> maps:put(term(1), maps:get(Key, Map), maps:remove(Key, Map));
                3 -> Map#{term(1) => term(1)}
            end;
        Tuple when is_tuple(Tuple), tuple_size(Tuple) > 0, element(1, Tuple) =/= '$ffz' ->
            setelement(rand:uniform(tuple_size(Tuple)), Tuple, term(1));
        [_ | _] = List ->
            lists:droplast(List) ++ term(1);
        _ ->
            {'$ffz', {mutated_histogram, rand:uniform(64), rand:uniform(256) - 1}}
    end.

%% @doc On the peer: `Term' with every `{'$ffz', What}' made.
-spec resolve(term()) -> term().
resolve({'$ffz', What}) ->
    make(What);
resolve([H | T]) ->
    [resolve(H) | resolve(T)];
resolve(Tuple) when is_tuple(Tuple) ->
    list_to_tuple(resolve(tuple_to_list(Tuple)));
resolve(Map) when is_map(Map) ->
    maps:from_list([{resolve(K), resolve(V)} || {K, V} <- maps:to_list(Map)]);
resolve(Other) ->
    Other.

make(What) ->
    Live = persistent_term:get({?MODULE, live}),
    case What of
        self -> self();
        session_pid -> case maps:get(session_pids, Live) of [] -> self(); [P | _] -> P end;
        ref -> make_ref();
        remote_ref -> erpc:call(node(maps:get(runner_pid, Live)), erlang, make_ref, []);
        fun0 -> fun() -> ok end;
        fun1 -> fun(X) -> X end;
        fun2 -> fun(_, _) -> [] end;
        fun3 -> fun(_, _, _) -> {error, fuzz} end;
        fun_raise -> fun(_) -> error(fuzz) end;
        ext_fun -> fun lists:seq/2;
        raw_id_plus_one -> maps:get(raw, Live) + 1000;
        histogram -> case maps:get(histograms, Live) of [] -> <<>>; [H | _] -> H end;
        {mutated_histogram, At, Byte} ->
            case maps:get(histograms, Live) of
                [] -> <<>>;
                [H | _] when At < byte_size(H) ->
                    <<Before:At/binary, _, After/binary>> = H,
                    <<Before/binary, Byte, After/binary>>;
                [H | _] -> binary:part(H, 0, byte_size(H) div 2)
            end;
        {binary, Size} -> binary:copy(<<"ferrotrace">>, Size div 10);
        {deep_list, D} -> nest(D, fun(X) -> [X] end);
        {deep_tuple, D} -> nest(D, fun(X) -> {X} end);
        {deep_map, D} -> nest(D, fun(X) -> #{k => X} end);
        {long_list, N} -> lists:seq(1, N);
        {long_improper, N} -> lists:foldl(fun(I, Acc) -> [I | Acc] end, tail, lists:seq(1, N));
        {long_string, N} -> lists:duplicate(N, $d);
        {big_map, N} -> maps:from_list([{I, I} || I <- lists:seq(1, N)]);
        Key when is_atom(Key) -> maps:get(Key, Live, Key);
        Other -> {'$ffz', Other}
    end.

nest(0, _Wrap) -> [];
nest(D, Wrap) -> Wrap(nest(D - 1, Wrap)).

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
                 ghost -> ghost_pid();
                 port -> open_port({spawn_executable, "/bin/cat"}, []);
                 _ -> Tracee0
             end,
    {ok, S} = ferrotrace:session(#{recent => 100}),
    MFA = {ft_test_target, f, 1},
    %% What trace/5 answers is kept (a raise is not the defect here): the node must live
    %% through the reads that follow.
    Traced = lists:usort(
               [short(catch ferrotrace_tracer:trace(Tag, S, Tracee, Message, Opts))
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
    Term = nest(Depth, case Kind of
                           list -> fun(X) -> [X] end;
                           tuple -> fun(X) -> {X} end;
                           map -> fun(X) -> #{<<"k">> => X} end
                       end),
    short(catch ferrotrace_tracer:to_json(Term)).

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
    [Valid | _] = maps:get(histograms, persistent_term:get({?MODULE, live})),
    case catch Call(Bin, Valid) of
        {error, _} -> ok;
        Other -> {answered, short(Other)}
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
                 error:{exception, Reason, _} -> {raised, short(Reason)};
                 Class:Reason -> {Class, short(Reason)}
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
