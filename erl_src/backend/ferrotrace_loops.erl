%%% @private
%%% @doc Finds the tail-recursive loops among the functions a spec traces.
%%%
%%% `return_trace' and `exception_trace' turn off last-call optimisation: each call of a
%%% traced function keeps a frame until the function returns. A receive loop
%%% (`loop(S) -> receive M -> loop(handle(M, S)) end', `gen_server:loop/7' and every other
%%% server loop) never returns, so with return tracing it would keep one frame per message
%%% for as long as the process lives, also after the session ends. Such functions must be
%%% traced without return tracing: counted, not timed.
%%%
%%% == What is a loop ==
%%%
%%% A function is a loop when it lies on a cycle of tail calls (a chain of `call_last',
%%% `call_only', `call_ext_last' or `call_ext_only' instructions that leads back to it) and
%%% a function of that cycle waits. The cycle may run through functions that are not traced
%%% (`?MODULE:loop(S)' for code upgrade is an external tail call) and through other modules
%%% the spec names. Lying on a cycle is required: a helper that is not on one keeps its
%%% timing, however much it waits (its frames go when it returns).
%%%
%%% A function waits when it has a `receive', or calls (tail or not) a function that waits,
%%% in any loaded module: the calls of the functions on a cycle are followed into the
%%% modules they call, transitively, up to 8 modules away and 300 modules
%%% read per call of {@link find/2}. This finds the connection reader whose loop waits in
%%% the `recv/1' of a socket wrapper module, or two modules further, before tracing starts.
%%% Where code cannot be read (a module not loaded, a call beyond the bounds, a BIF, or a
%%% call through `apply'), a fixed list of the functions of OTP that wait stands in
%%% (`gen_server:call/2,3', `gen_tcp:recv/2,3', `ssl:recv/2,3', `socket:recv/1..4',
%%% `timer:sleep/1', `erlang:hibernate/3', ...: `gen_tcp:recv' itself goes through
%%% `apply' to `inet_tcp' and could not be followed).
%%%
%%% Preloaded modules (`erlang', `prim_inet', `prim_file', `erts_internal', ...) have no
%%% file in `code:all_loaded()'. Their code is read from the running erts's `ebin', where
%%% the file has the loaded module's MD5 or, as on Debian where those files are compiled
%%% again from the same sources, its exports. Other code is read from its file only if that
%%% is the version that is loaded. Each module version's reading is cached (by MD5).
%%%
%%% == Recursive helpers that wait ==
%%%
%%% Following calls transitively makes more recursive helpers loops than following them one
%%% level inside a module did: a tail-recursive walk over a list that calls
%%% `gen_server:call/3' (or `io:format/2', which waits for the group leader, or a wrapper of
%%% either) for each element is counted, not timed. That is deliberate:
%%% <ul>
%%% <li>its depth and its time are set by other processes, not by its input: a walk that
%%% waits on a server may run as long as a server loop, and with return tracing it keeps a
%%% frame (3 words, 4 on OTP 27+) per element until it ends;</li>
%%% <li>what its timing would say is kept anyway: every level's latency is the rest of the
%%% walk, and the walk's whole time is in the latency of the function that called it, which
%%% is not on the cycle and stays timed;</li>
%%% <li>stopping at one level made the answer depend on where the code was split into
%%% modules and functions: `loop(S) -> D = wrapper:recv(S), handle(D), loop(S)' was missed
%%% and kept a frame per message (a real server's readers reached 24,000 stack words).</li>
%%% </ul>
%%% The price is paid also where no frames would pile up: callbacks that tail-call each
%%% other on a cycle that waits somewhere below are counted, e.g. the state functions of
%%% `ssl_gen_statem' (`connection/3' -> `tls_sender:downgrade/2' -> `gen_statem:call/3'),
%%% which return to `gen_statem' after each event. Their time is still in the latency of
%%% whatever traced function called them; a spec naming such a function alone
%%% (`{ssl_gen_statem, connection, 3}') loses its latency. Missing a loop costs a stack of
%%% up to the engine's run-time bound per process, for as long as it lives; this costs
%%% figures, and the summary lists what was counted (`loops').
%%%
%%% Tail recursion that does not wait (`lists:foldl/3', a loop over a list that computes)
%%% ends by itself and its frames go when it returns: it keeps its timing.
%%%
%%% == What is not found here ==
%%%
%%% Calls through a fun or `apply' (`call_fun', `apply', `apply_last', `erlang:apply/2,3')
%%% cannot be followed. A function that waits and ends in such a tail call
%%% (`loop(Next) -> receive M -> ..., Next(Next) end', a callback that calls back into its
%%% loop) is taken as a loop of its own; a cycle whose only way back is a non-tail fun call,
%%% a cycle through a module that only the fun or `apply' names, a wait only reached through
%%% a fun or `apply' (other than the listed OTP functions), a cycle through modules the spec
%%% does not name, and anything beyond the bounds are not found here. Those, and a loop that
%%% does not wait but runs very long, are caught by the engine at run time (one function
%%% nested 4,096 deep in one process).
-module(ferrotrace_loops).

-export([find/2, find/3, find/4]).

-define(CACHE, ferrotrace_loops_cache).
%% How far calls are followed from a cycle: modules away, and modules read per find/2
%% (besides the modules the spec names).
-define(MAX_DEPTH, 8).
-define(MAX_MODULES, 300).
%% How long the stacks of live processes are read for (ms), and how many processes each
%% reader takes.
-define(STACKS_MS, 100).
-define(STACKS_CHUNK, 16).
%% The longest a read of stacks waits for readers that have not run yet (a node whose
%% schedulers are held by other work).
-define(STACKS_CAP_MS, 2000).

%% The loops of OTP's behaviour modules, as reading their code finds them on OTP 25, 27
%% and 29 (ferrotrace_loops_SUITE:behaviours_known checks that on each): a start that
%% only reads what the cache knows (`cached') takes these for a behaviour module whose
%% code it has not read yet. Most servers wait in one, and a busy one's stack may not be
%% read in time at the start: in a fresh node, a gen_server taking 50 workers' calls was
%% traced with return tracing in its loop until the full reading found it, and kept 371
%% to 692 words of frames for life. Reading the three modules' code instead made a first
%% start among 50 busy processes 25 to 50 ms slower. Only those of the names here that the
%% loaded module has are taken, and `{F, A, Since}' only from OTP release `Since' on (the
%% function is there before, but not a loop); the module's reading replaces them once it
%% is cached.
-define(BEHAVIOUR_LOOPS,
        #{gen_server =>
              [{decode_msg, 4}, {decode_msg, 6}, {decode_msg, 9},
               {handle_common_reply, 5}, {handle_common_reply, 6}, {handle_common_reply, 8},
               {handle_common_reply, 9}, {handle_msg, 3}, {handle_msg, 4}, {handle_msg, 6},
               {handle_msg, 7}, {init_it, 6}, {loop, 4}, {loop, 5}, {loop, 7}, {loop_hibernate, 4},
               {loop_wakeup, 4}, {mc_recv, 5}, {mc_recv_tmo, 4}, {mc_send, 6}, {rec_nodes, 7},
               {rec_nodes_rest, 5}, {terminate, 9, 29}, {terminate, 10}],
          gen_statem =>
              [{do_reply_then_terminate, 8}, {init_it, 6}, {loop, 3}, {loop_actions, 10},
               {loop_actions, 12}, {loop_actions_list, 12}, {loop_actions_list, 13},
               {loop_actions_next_event, 14}, {loop_actions_reply, 14}, {loop_done, 4},
               {loop_done, 5}, {loop_event, 5}, {loop_hibernate, 3, 29}, {loop_keep_state, 9},
               {loop_msg, 4}, {loop_msg_event, 5}, {loop_next_events, 10}, {loop_receive, 3},
               {loop_receive_result, 4}, {loop_state_callback, 11},
               {loop_state_callback_result, 11}, {loop_state_change, 8}, {loop_state_change, 9},
               {loop_state_transition, 9}, {loop_t0q, 5}, {loop_timeouts, 12},
               {loop_timeouts, 16}, {loop_timeouts_cancel, 13}, {loop_timeouts_register, 15},
               {loop_timeouts_register, 17}, {loop_timeouts_start, 16},
               {loop_timeouts_update, 14}, {loop_wakeup, 3}, {terminate, 7}],
          gen_event =>
              [{decode_msg, 7}, {fetch_msg, 6}, {handle_msg, 6}, {init_it, 6}, {loop, 6},
               {server_notify, 4}, {stop_handlers, 2}]}).

%% What is kept of one module version: its tail calls `{Caller, Callee}', and per
%% function whether it has a `receive', what it calls, and whether it ends in a call
%% through a fun or `apply'.
-type facts() :: {[{mfa(), mfa()}], #{mfa() => {boolean(), [mfa()], boolean()}}}.

%% @doc The functions matched by `Specs' (in loaded modules, other than `Exclude') that lie
%% on a tail-call cycle that waits, sorted.
-spec find([ferrotrace:mfa_spec()], [module()]) -> [mfa()].
find(Specs, Exclude) ->
    element(1, find(Specs, Exclude, read)).

%% @doc As {@link find/2}; with `cached', only the modules the spec names and those read
%% before (cached) are read (the loops of OTP's behaviour modules not read yet are taken
%% from a list, ?BEHAVIOUR_LOOPS), and `Complete' says whether that was all {@link find/2} would
%% have read: a session's start on a busy node takes the loops the cache knows at once
%% (a first reading of every module processes wait in took 2.5 to 4 s there) and the rest
%% from a full reading after it is ready (ferrotrace_keeper). `Loopers': with a `'_''
%% module, the processes whose stack holds one of the loops now (a server waiting in its
%% receive), which the session flags only once their loops are traced count-only.
-spec find([ferrotrace:mfa_spec()], [module()], read | cached) ->
          {[mfa()], Complete :: boolean(), Loopers :: [pid()]}.
find(Specs, Exclude, Mode) ->
    find(Specs, Exclude, Mode, none).

%% @doc As {@link find/3}, working at most `Pace' of the time (a float from 0.01 to 1, or
%% `none': at once), in slices of a few ms (ferrotrace_paced) with rests that keep it at
%% that share of one scheduler. The session's full reading after its start runs so: at
%% high priority and at once, it took the schedulers from a busy node's work for half a
%% second after the start (0.58 of its throughput). All of the work is paced, the walk over
%% what was read as well as the reading: with every module cached, the walk alone took 24
%% ms of a scheduler, at once, when only the reading was paced, and a busy node's first
%% 25 ms after a start ran at 0.5 of untraced.
-spec find([ferrotrace:mfa_spec()], [module()], read | cached, float() | none) ->
          {[mfa()], Complete :: boolean(), Loopers :: [pid()]}.
find(Specs, Exclude, Mode, Pace) when Mode =:= read orelse Mode =:= cached, is_float(Pace), Pace >= 0.01, Pace =< 1 ->
    ferrotrace_paced:run(fun() -> find(Specs, Exclude, Mode, none) end, Pace);
find(Specs, Exclude, Mode, none) when Mode =:= read orelse Mode =:= cached ->
    Modules = lists:usort([M || {M, _, _} <- Specs, M =/= '_']),
    %% With every module traced, reading all loaded code takes seconds on a busy node: the
    %% loops that matter now are those live processes wait in (a server sits in its
    %% receive, perhaps in another module). A loop entered later is caught at run time.
    Wildcard = lists:any(fun({M, _, _}) -> M =:= '_' end, Specs),
    Stacks = case Wildcard of
                 true -> stacks();
                 false -> []
             end,
    %% With a `'_'' module, OTP's behaviour modules are roots whether or not a stack
    %% could be read in them: a busy server's may not be, in time.
    Behaviours = [M || Wildcard, M <- maps:keys(?BEHAVIOUR_LOOPS), erlang:module_loaded(M)],
    Roots = lists:usort(Modules ++ Behaviours ++ [M || {_, Frames} <- Stacks, {M, _, _} <- Frames]) -- Exclude,
    ensure_cache(),
    Context0 = #{files => undefined, erts_ebin => undefined, modules => #{},
                 budget => ?MAX_MODULES, named => Modules, mode => Mode, complete => true},
    %% The modules the spec names are read whatever the budget.
    Context1 = lists:foldl(fun(M, C = #{budget := B}) -> C1 = element(2, read(M, C#{budget := 1})), C1#{budget := B} end,
                           Context0, Roots),
    #{modules := Read} = Context1,
    Facts = [maps:get(M, Read) || M <- Roots],
    %% A function that ends in a call through a fun or `apply' may be calling itself.
    Edges = lists:append([Tail ++ [{MFA, MFA} || {MFA, {_, _, true}} <- maps:to_list(Functions)]
                          || {Tail, Functions} <- Facts]),
    Cycles = cycles(Edges),
    {Calls, #{complete := Complete}} = explore(lists:append(Cycles), 0, #{}, Context1),
    Waiting = waiting(Calls),
    Loops = lists:usort([MFA || Cycle <- Cycles, lists:any(fun(C) -> is_map_key(C, Waiting) end, Cycle),
                                MFA <- Cycle,
                                ferrotrace_spec:covered(MFA, Specs),
                                not lists:member(element(1, MFA), Exclude)]),
    Set = maps:from_keys(Loops, true),
    {Loops, Complete, [P || {P, Frames} <- Stacks, lists:any(fun(F) -> is_map_key(F, Set) end, Frames)]}.

%% The functions live processes are running now, or will return to, per process: a reader
%% loop waits in its socket wrapper's module, with the loop's frame below.
%%
%% `process_info/2' of a running process waits until that process handles the request: on
%% yaws under load, reading 70 processes' stacks one after another took 0.3 to 0.7 s in 3
%% reads of 25 (and a start 2.5 s once). So readers of ?STACKS_CHUNK processes each read in
%% parallel, for at most ?STACKS_MS from when it runs: a process that has not answered by
%% then is running, not waiting in a receive, and a loop it runs is caught at run time.
%% Counted from when each reader runs, not from its spawn: on a node whose schedulers were
%% held (load average 9 on 2 cores), readers that had not run yet when a deadline from the
%% spawn passed found 1 waiting process in 39, and a gen_server traced before its loop was
%% count-only kept 371 words of frames for life. Readers that do not run within
%% ?STACKS_CAP_MS are given up. Answers come to an alias, dropped by the VM once the time
%% is up.
stacks() ->
    Alias = alias([explicit_unalias]),
    Readers = [spawn_opt(fun() ->
                                 ok = ferrotrace_own:enter(),
                                 Alias ! {Alias, started, self(), erlang:monotonic_time(millisecond)},
                                 read_stacks(Alias, Chunk)
                         end,
                         [monitor | ferrotrace_own:spawn_options()])
               || Chunk <- chunks(erlang:processes())],
    Cap = erlang:monotonic_time(millisecond) + ?STACKS_CAP_MS,
    Stacks = collect_stacks(Alias, maps:from_list(Readers), #{}, Cap, []),
    true = unalias(Alias),
    _ = [begin exit(Reader, kill), demonitor(Monitor, [flush]) end || {Reader, Monitor} <- Readers],
    Stacks.

read_stacks(Alias, Pids) ->
    _ = [Alias ! {Alias, P, [{M, F, arity(A)} || {M, F, A, _} <- Frames]}
         || P <- Pids, {current_stacktrace, Frames} <- [erlang:process_info(P, current_stacktrace)]],
    ok.

%% The answers of `Readers' (still reading), each given ?STACKS_MS from when it started
%% (`Started'), those not started at most until `Cap'.
collect_stacks(_Alias, Readers, _Started, _Cap, Stacks) when map_size(Readers) =:= 0 ->
    Stacks;
collect_stacks(Alias, Readers, Started, Cap, Stacks) ->
    Deadline = lists:max([case Started of
                              #{R := At} -> At + ?STACKS_MS;
                              #{} -> Cap
                          end || R <- maps:keys(Readers)]),
    Wait = max(0, min(Cap, Deadline) - erlang:monotonic_time(millisecond)),
    receive
        {Alias, started, Reader, At} -> collect_stacks(Alias, Readers, Started#{Reader => At}, Cap, Stacks);
        {Alias, P, Frames} -> collect_stacks(Alias, Readers, Started, Cap, [{P, Frames} | Stacks]);
        %% Only the readers' own (a guard's map_get/2 of a missing key fails it): a keeper
        %% reading stacks keeps every other message.
        {'DOWN', Ref, process, Reader, _} when map_get(Reader, Readers) =:= Ref ->
            collect_stacks(Alias, maps:remove(Reader, Readers), Started, Cap, Stacks)
    after Wait ->
            Stacks
    end.

%% `Pids' in lists of ?STACKS_CHUNK (the last shorter).
chunks(Pids) ->
    chunks(Pids, 0, [], []).

chunks([], _N, [], Chunks) -> Chunks;
chunks([], _N, Chunk, Chunks) -> [Chunk | Chunks];
chunks(Pids, ?STACKS_CHUNK, Chunk, Chunks) -> chunks(Pids, 0, [], [Chunk | Chunks]);
chunks([P | Rest], N, Chunk, Chunks) -> chunks(Rest, N + 1, [P | Chunk], Chunks).

arity(A) when is_list(A) -> length(A);
arity(A) -> A.

%% One call to the code server for every path: on a busy node each call waits its turn.
loaded_files() ->
    maps:from_list(code:all_loaded()).

%% The calls made by the functions `Frontier' and by those they call, transitively:
%% `#{Function => {Receives, Callees}}'. `Depth' counts the modules left to get there.
%% Calls into a module not read (not loaded, unreadable, beyond the bounds) end there;
%% calls of the listed OTP functions that wait are not followed.
explore([], _Depth, Calls, Context) ->
    {Calls, Context};
explore(_Frontier, Depth, Calls, Context) when Depth > ?MAX_DEPTH ->
    {Calls, Context};
explore(Frontier, Depth, Calls, Context) ->
    {Calls1, Next, Context1} = closure(Frontier, Calls, [], Context),
    explore(Next, Depth + 1, Calls1, Context1).

%% Follows the calls inside each function's module; those into other modules are left for
%% the next step (`Next').
closure([], Calls, Next, Context) ->
    {Calls, Next, Context};
closure([MFA | Rest], Calls, Next, Context) when is_map_key(MFA, Calls) ->
    closure(Rest, Calls, Next, Context);
closure([MFA = {M, _, _} | Rest], Calls, Next, Context) ->
    case read(M, Context) of
        {{_, #{MFA := {Receives, Callees, _}}}, Context1} ->
            Followed = [C || C <- Callees, not blocking(C)],
            Same = [C || C = {CM, _, _} <- Followed, CM =:= M],
            Other = [C || C = {CM, _, _} <- Followed, CM =/= M],
            closure(Same ++ Rest, Calls#{MFA => {Receives, Callees}}, Other ++ Next, Context1);
        {_, Context1} ->
            closure(Rest, Calls#{MFA => {false, []}}, Next, Context1)
    end.

%% The functions that wait: those with a `receive' or a call of a listed OTP function,
%% and every function calling one of these, transitively.
waiting(Calls) ->
    Callers = maps:fold(fun(Caller, {_, Callees}, Acc) ->
                                lists:foldl(fun(Callee, A) ->
                                                    maps:update_with(Callee, fun(L) -> [Caller | L] end,
                                                                     [Caller], A)
                                            end, Acc, Callees)
                        end, #{}, Calls),
    Seeds = [MFA || {MFA, {Receives, Callees}} <- maps:to_list(Calls),
                    Receives orelse lists:any(fun blocking/1, Callees)],
    spread(Seeds, Callers, #{}).

spread([], _Callers, Waiting) ->
    Waiting;
spread([MFA | Rest], Callers, Waiting) when is_map_key(MFA, Waiting) ->
    spread(Rest, Callers, Waiting);
spread([MFA | Rest], Callers, Waiting) ->
    spread(maps:get(MFA, Callers, []) ++ Rest, Callers, Waiting#{MFA => true}).

%% The facts of `Module' (empty when its code cannot be read) and the context that keeps
%% them. A module not read yet takes one from the budget; none left, it is not read.
-spec read(module(), map()) -> {facts() | none, map()}.
read(Module, Context = #{modules := Read}) when is_map_key(Module, Read) ->
    {map_get(Module, Read), Context};
read(_Module, Context = #{budget := 0}) ->
    {none, Context};
read(Module, Context = #{modules := Read, budget := Budget}) ->
    {Facts, Context1} = module_facts(Module, Context),
    {Facts, Context1#{modules := Read#{Module => Facts}, budget := Budget - 1}}.

%% Cached per module version. Under `cached', a module not in the cache is read only if the
%% spec names it; any other is taken as unknown, and the answer as incomplete.
module_facts(Module, Context = #{mode := Mode, named := Named}) ->
    MD5 = try erlang:get_module_info(Module, md5) catch error:badarg -> none end,
    case ets:lookup(?CACHE, {facts, Module, MD5}) of
        [{_, Facts}] ->
            {Facts, Context};
        [] ->
            case Mode =:= read orelse lists:member(Module, Named) of
                true -> disassemble_new(Module, MD5, Context);
                false -> {known_loops(Module), Context#{complete := false}}
            end
    end.

%% What is known of a module whose code is not read: for a behaviour module, its loops
%% (?BEHAVIOUR_LOOPS, those it has), each as a function that waits and tail-calls itself.
known_loops(Module) when is_map_key(Module, ?BEHAVIOUR_LOOPS) ->
    Functions = try erlang:get_module_info(Module, functions) catch error:badarg -> [] end,
    Release = try list_to_integer(erlang:system_info(otp_release)) catch error:badarg -> 0 end,
    Loops = [{Module, F, A} || Known <- map_get(Module, ?BEHAVIOUR_LOOPS),
                               {F, A, Since} <- [since(Known)],
                               Release >= Since, lists:member({F, A}, Functions)],
    {[{MFA, MFA} || MFA <- Loops], maps:from_list([{MFA, {true, [], false}} || MFA <- Loops])};
known_loops(_Module) ->
    {[], #{}}.

%% An entry of ?BEHAVIOUR_LOOPS as `{F, A, Since}' (a loop on every release: since 0).
since({F, A}) -> {F, A, 0};
since({_F, _A, _Since} = Known) -> Known.

%% The code server is asked for the files once per find/3, and only if a module is read.
disassemble_new(Module, MD5, Context = #{files := undefined}) ->
    disassemble_new(Module, MD5, Context#{files := loaded_files()});
disassemble_new(Module, MD5, Context = #{files := Files}) ->
    {File, Context1} = file_of(Module, maps:get(Module, Files, none), Context),
    Facts = disassemble(Module, File, MD5),
    true = ets:insert(?CACHE, {{facts, Module, MD5}, Facts}),
    {Facts, Context1}.

%% Where the code of a module can be read: its file, or for a preloaded module the file
%% of the same name in the running erts's `ebin' (one call to the code server per find/2).
file_of(_Module, preloaded, Context = #{erts_ebin := undefined}) ->
    Ebin = try filename:join(code:lib_dir(erts), "ebin") catch _:_ -> none end,
    file_of(_Module, preloaded, Context#{erts_ebin := Ebin});
file_of(_Module, preloaded, Context = #{erts_ebin := none}) ->
    {none, Context};
file_of(Module, preloaded, Context = #{erts_ebin := Ebin}) ->
    {{preloaded, filename:join(Ebin, atom_to_list(Module) ++ ".beam")}, Context};
file_of(_Module, File, Context) when is_list(File) ->
    {File, Context};
file_of(_Module, _, Context) ->
    {none, Context}.

%% Reads the module's file directly (no code or file server in the way) and only if it is
%% the code that is loaded (for a preloaded module: the same exports).
-spec disassemble(module(), none | file:filename() | {preloaded, file:filename()}, binary() | none) ->
          facts().
disassemble(_Module, none, _MD5) ->
    {[], #{}};
disassemble(Module, File, MD5) ->
    try
        {ok, Binary} = prim_file:read_file(case File of {preloaded, Path} -> Path; Path -> Path end),
        {beam_file, Module, Exports, _Attributes, _Info, Functions} = beam_disasm:file(Binary),
        true = case beam_lib:md5(Binary) of
                   {ok, {Module, MD5}} -> true;
                   _ when is_tuple(File) ->
                       lists:sort([{F, A} || {F, A, _} <- Exports])
                           =:= lists:sort(erlang:get_module_info(Module, exports));
                   _ -> false
               end,
        {[{{Module, F, A}, Callee} || {function, F, A, _Entry, Code} <- Functions,
                                      Instruction <- Code,
                                      Callee <- tail_callee(Instruction)],
         maps:from_list([{{Module, F, A}, {lists:any(fun waits/1, Code),
                                           lists:usort([Callee || I <- Code, Callee <- callee(I)]),
                                           dynamic_tail(Code)}}
                         || {function, F, A, _Entry, Code} <- Functions])}
    catch
        _:_ -> {[], #{}}
    end.

waits({loop_rec, _, _}) -> true;
waits({wait, _}) -> true;
waits({wait_timeout, _, _}) -> true;
waits(_) -> false.

%% OTP functions that wait for a reply, a packet or a timer: where their code cannot be
%% read, or goes through `apply' (`gen_tcp:recv/2' calls `inet_tcp' so), they still wait.
blocking({gen_server, call, A}) -> A =:= 2 orelse A =:= 3;
blocking({gen_statem, call, A}) -> A =:= 2 orelse A =:= 3;
blocking({gen_event, call, A}) -> A =:= 3 orelse A =:= 4;
blocking({gen, call, A}) -> A =:= 3 orelse A =:= 4;
blocking({gen, do_call, 4}) -> true;
blocking({timer, sleep, 1}) -> true;
blocking({erlang, hibernate, 3}) -> true;
blocking({proc_lib, hibernate, 3}) -> true;
blocking({rpc, call, A}) -> A =:= 4 orelse A =:= 5;
blocking({erpc, call, A}) -> A >= 2 andalso A =< 5;
blocking({erpc, receive_response, _}) -> true;
blocking({gen_tcp, recv, A}) -> A =:= 2 orelse A =:= 3;
blocking({gen_tcp, accept, A}) -> A =:= 1 orelse A =:= 2;
blocking({gen_udp, recv, A}) -> A =:= 2 orelse A =:= 3;
blocking({gen_sctp, recv, A}) -> A =:= 1 orelse A =:= 2;
blocking({ssl, recv, A}) -> A =:= 2 orelse A =:= 3;
blocking({ssl, transport_accept, A}) -> A =:= 1 orelse A =:= 2;
blocking({prim_inet, recv, A}) -> A =:= 2 orelse A =:= 3;
blocking({prim_inet, recvfrom, A}) -> A =:= 2 orelse A =:= 3;
blocking({prim_inet, accept, A}) -> A >= 1 andalso A =< 3;
blocking({socket, F, A}) -> lists:member(F, [recv, recvfrom, recvmsg, accept]) andalso A =< 5;
blocking(_) -> false.

%% Every function an instruction calls (tail or not).
callee({call, _, {M, F, A}}) -> [{M, F, A}];
callee({call_ext, _, {extfunc, M, F, A}}) -> [{M, F, A}];
callee(Instruction) -> tail_callee(Instruction).

tail_callee({call_last, _, {M, F, A}, _}) -> [{M, F, A}];
tail_callee({call_only, _, {M, F, A}}) -> [{M, F, A}];
tail_callee({call_ext_last, _, {extfunc, M, F, A}, _}) -> [{M, F, A}];
tail_callee({call_ext_only, _, {extfunc, M, F, A}}) -> [{M, F, A}];
tail_callee(_) -> [].

%% Whether the code ends a path in a call through a fun or `apply' (a tail call whose
%% callee is not known here).
dynamic_tail([]) -> false;
dynamic_tail([{apply_last, _, _} | _]) -> true;
dynamic_tail([{call_ext_last, _, {extfunc, erlang, apply, A}, _} | _]) when A =:= 2; A =:= 3 -> true;
dynamic_tail([{call_ext_only, _, {extfunc, erlang, apply, A}} | _]) when A =:= 2; A =:= 3 -> true;
dynamic_tail([I | Rest]) -> (dynamic_call(I) andalso returns(Rest)) orelse dynamic_tail(Rest).

dynamic_call({call_fun, _}) -> true;
dynamic_call({call_fun2, _, _, _}) -> true;
dynamic_call({apply, _}) -> true;
dynamic_call(_) -> false.

returns([{line, _} | Rest]) -> returns(Rest);
returns([{deallocate, _}, return | _]) -> true;
returns([return | _]) -> true;
returns(_) -> false.

%% The cycles of the tail-call graph: the strongly connected components (Tarjan) with more
%% than one function or with a function that tail-calls itself.
cycles(Edges) ->
    Graph = lists:foldl(fun({From, To}, G) -> maps:update_with(From, fun(L) -> [To | L] end, [To], G) end,
                        #{}, Edges),
    Visit = fun(V, Acc = #{index := Index}) when is_map_key(V, Index) -> Acc;
               (V, Acc) -> strongconnect(V, Graph, Acc)
            end,
    #{cycles := Cycles} =
        lists:foldl(Visit, #{n => 0, index => #{}, low => #{}, stack => [], on_stack => #{},
                             cycles => []}, maps:keys(Graph)),
    Cycles.

strongconnect(V, Graph, S0 = #{n := N, index := Index, low := Low, stack := Stack, on_stack := On}) ->
    S1 = S0#{n := N + 1, index := Index#{V => N}, low := Low#{V => N}, stack := [V | Stack],
             on_stack := On#{V => true}},
    S2 = lists:foldl(
           fun(W, S = #{index := I}) when not is_map_key(W, I) ->
                   S3 = #{low := L} = strongconnect(W, Graph, S),
                   S3#{low := L#{V => min(map_get(V, L), map_get(W, L))}};
              (W, S = #{index := I, low := L, on_stack := O}) when is_map_key(W, O) ->
                   S#{low := L#{V => min(map_get(V, L), map_get(W, I))}};
              (_W, S) ->
                   S
           end, S1, maps:get(V, Graph, [])),
    #{index := Index2, low := Low2, stack := Stack2, on_stack := On2, cycles := Cycles} = S2,
    case map_get(V, Low2) =:= map_get(V, Index2) of
        true ->
            {Component, Rest} = pop_component(V, Stack2, []),
            IsCycle = case Component of
                          [Single] -> lists:member(Single, maps:get(Single, Graph, []));
                          _ -> true
                      end,
            Cycles2 = case IsCycle of
                          true -> [Component | Cycles];
                          false -> Cycles
                      end,
            S2#{stack := Rest, on_stack := maps:without(Component, On2), cycles := Cycles2};
        false ->
            S2
    end.

pop_component(V, [V | Rest], Acc) -> {[V | Acc], Rest};
pop_component(V, [W | Rest], Acc) -> pop_component(V, Rest, [W | Acc]).

%% A public table owned by the registry, so the cache outlives the callers.
ensure_cache() ->
    _ = ferrotrace_registry:ensure_started(),
    ok.
