%%% @doc The fuzz suite's side on the peer node (ferrotrace_fuzz_SUITE calls it with erpc):
%%% the live state the generated terms refer to (sessions, pids, histograms; published for
%%% ft_fuzz_terms), one fuzzed call in a fresh process with a heap bound and a deadline,
%%% probes of the live sessions, and the memory and processes left at the end.
-module(ft_fuzz_peer).

-export([peer_setup/1, peer_call/4, peer_check/1, peer_probe/0, peer_end/1, bystander/0,
         null_io/0, ghost_pid/0, short/1]).

%% A worker's heap beyond this many words is killed (and reported: one call built 800 MB).
-define(MAX_HEAP_WORDS, 100 * 1024 * 1024).
%% How deep a term is printed (short/1).
-define(DEPTH, 12).

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
    ft_fuzz_terms:set_live(Live),
    _ = [erlang:garbage_collect(P) || P <- processes()],
    Baseline = #{memory => erlang:memory(total), processes => processes(), listening => listening()},
    {ok, #{os_pid => os:getpid(), baseline => Baseline}}.

keeper(Parent, Runner) ->
    Null = spawn(fun null_io/0),
    true = register(ferrotrace_fuzz_null, Null),
    group_leader(Null, self()),
    Bystander = spawn(fun bystander/0),
    true = register(ferrotrace_fuzz_bystander, Bystander),
    {ok, Raw} = ferrotrace:session(#{recent => 100, name => fuzz_raw, duration => infinity, owner => self()}),
    {ok, Calls} = ferrotrace:calls([{lists, seq, 2}, {ft_test_target, '_', '_'}],
                                   #{recent => 100, name => fuzz_calls, args => true,
                                     duration => infinity, owner => self(), slowest => 5}),
    {ok, Stopped} = ferrotrace:session(#{}),
    ok = ferrotrace:stop(Stopped),
    {ok, Released} = ferrotrace:session(#{}),
    ok = ferrotrace:release(Released),
    _ = [lists:seq(1, N) || N <- lists:seq(1, 200)],
    _ = [try ft_test_target:f(N) catch _:_ -> error end || N <- lists:seq(1, 50)],
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
    SessionPids = [P || {_, _, P, _} <- ferrotrace_registry:sessions()],
    Live = #{raw => Raw, calls => Calls, stopped => Stopped, released => Released,
             names => [fuzz_raw, fuzz_calls], keeper => self(), bystander => Bystander,
             null => Null, dead_pid => Dead, runner_pid => Runner, port => Port,
             registry => Registry, session_pids => SessionPids,
             summary => Summary, recent => Recent, histograms => Histograms,
             ghost_pid => ghost_pid(), stable_ref => make_ref()},
    Parent ! {self(), Live},
    receive stop -> ok end.

%% @doc A pid of a node that does not exist, made as the external format encodes it.
-spec ghost_pid() -> pid().
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
                                   Args = ft_fuzz_terms:resolve(SymArgs),
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

%% @doc `Term' printed `~P' to a bounded depth, for reports.
-spec short(term()) -> string().
short(Term) ->
    lists:flatten(io_lib:format("~P", [Term, ?DEPTH])).

%% @doc On the peer: the live sessions read (summary, flight recorder, report) and every
%% process garbage collected. What the reads answer does not matter (a fuzzed call may have
%% stopped or released a session); the node must live through them.
-spec peer_probe() -> ok.
peer_probe() ->
    Live = ft_fuzz_terms:live_state(),
    Null = whereis(ferrotrace_fuzz_null),
    {Pid, Ref} = spawn_monitor(
                   fun() ->
                           group_leader(Null, self()),
                           _ = [try Read(maps:get(K, Live)) catch _:_ -> error end
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
%% keep growing (two looks a second apart, after a garbage collection). The sessions the
%% calls started and left running are released first: their processes are theirs, not
%% left behind (a session's paced reading of loaded code grows for seconds), and what a
%% released session leaves is what this looks for.
-spec peer_end(map()) -> {ok, map()}.
peer_end(Baseline = #{memory := Memory0, processes := Procs0}) ->
    Running = length(ferrotrace_tracer:sessions()),
    _ = [try ferrotrace:release(Id) catch _:_ -> ok end || {Id, _, _, _} <- ferrotrace_registry:sessions()],
    [erlang:garbage_collect(P) || P <- processes()],
    timer:sleep(500),
    [erlang:garbage_collect(P) || P <- processes()],
    Memory1 = erlang:memory(total),
    Left = processes() -- Procs0,
    %% A session's endpoint (ferrotrace:serve/2) closes with its release: none is left
    %% listening (the release's end reaches the endpoint as its keeper's exit).
    Listening0 = maps:get(listening, Baseline, []),
    ListeningLeft = wait_listening(Listening0, 20),
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
           sessions_released => Running, sessions => length(ferrotrace_tracer:sessions()),
           processes_left => length(Left),
           listening_left => ListeningLeft,
           left_initial_calls => lists:usort([IC || P <- Left,
                                                     {initial_call, IC} <- [erlang:process_info(P, initial_call)]]),
           growing => Growing}}.

%% The node's listening TCP sockets.
listening() ->
    lists:sort([P || P <- erlang:ports(), {name, "tcp_inet"} =:= erlang:port_info(P, name),
                     case prim_inet:getstatus(P) of {ok, Status} -> lists:member(listen, Status); _ -> false end]).

%% The listening sockets opened since the baseline, once those closing have closed
%% (`Tries' looks 100 ms apart).
wait_listening(Baseline, Tries) ->
    case listening() -- Baseline of
        [_ | _] when Tries > 0 -> timer:sleep(100), wait_listening(Baseline, Tries - 1);
        Left -> [{P, inet:sockname(P)} || P <- Left]
    end.
