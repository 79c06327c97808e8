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
%%% A function is a server loop when it lies on a cycle of tail calls (a chain of
%%% `call_last', `call_only', `call_ext_last' or `call_ext_only' instructions that leads
%%% back to it) and a function of that cycle waits: it has a `receive', or calls a function
%%% of its module that waits, or calls one of the OTP functions that wait for a reply or a
%%% timer (`gen_server:call/2,3', `timer:sleep/1', ...: a client loop or a periodic worker
%%% has no `receive' of its own). The cycle may
%%% run through functions that are not traced (`?MODULE:loop(S)' for code upgrade is an
%%% external tail call) and through other modules the spec names. The analysis reads the loaded code with
%%% `beam_disasm'; results are cached per module version.
%%%
%%% Tail recursion that does not wait for messages (`lists:foldl/3', a loop over a list)
%%% ends by itself and its frames go when it returns: it keeps its timing. Such a loop
%%% that runs very long, and cycles through funs or `apply' that cannot be seen here, are
%%% caught by the engine at run time (one function nested 4,096 deep in one process).
-module(ferrotrace_loops).

-export([find/2]).

-define(CACHE, ferrotrace_loops_cache).

%% @doc The functions matched by `Specs' (in loaded modules, other than `Exclude') that lie
%% on a tail-call cycle, sorted.
-spec find([ferrotrace:mfa_spec()], [module()]) -> [mfa()].
find(Specs, Exclude) ->
    Modules = lists:usort([M || {M, _, _} <- Specs, M =/= '_']),
    %% With every module traced, reading all loaded code takes seconds on a busy node: the
    %% loops that matter now are those live processes wait in (a server sits in its
    %% receive). A loop entered later is caught at run time.
    Roots = case lists:any(fun({M, _, _}) -> M =:= '_' end, Specs) of
                true -> lists:usort(Modules ++ waiting_in());
                false -> Modules
            end -- Exclude,
    Modules1 = edges(Roots),
    Receivers = maps:from_list([{MFA, true} || {_, Receive} <- maps:values(Modules1),
                                               MFA <- Receive]),
    Cyclic = cyclic(maps:map(fun(_, {Calls, _}) -> Calls end, Modules1), Receivers),
    lists:sort([MFA || MFA <- maps:keys(Cyclic), lists:any(fun(S) -> ferrotrace_spec:matches(S, MFA) end, Specs),
                       not lists:member(element(1, MFA), Exclude)]).

%% The modules whose code live processes are running now.
waiting_in() ->
    [M || P <- erlang:processes(), {current_function, {M, _, _}} <- [erlang:process_info(P, current_function)]].

%% The tail-call graph of `Modules'. Calls into other modules are edges too, but those
%% modules are not read (following every external tail call reads most of the node's code):
%% a cycle through a module outside the set is caught at run time.
edges(Modules) ->
    %% One call to the code server for every path: on a busy node each call waits its turn.
    Files = maps:from_list([{M, F} || {M, F} <- code:all_loaded(), is_list(F)]),
    ensure_cache(),
    maps:from_list([{M, module_tail_calls(M, maps:get(M, Files, none))} || M <- Modules]).

%% The tail calls `{Caller, Callee}' made by the loaded code of `Module' (read from `File'),
%% and the functions that wait for messages; empty when its object code cannot be read.
module_tail_calls(Module, File) ->
    MD5 = try erlang:get_module_info(Module, md5) catch error:badarg -> none end,
    case ets:lookup(?CACHE, {Module, MD5}) of
        [{_, Analysis}] ->
            Analysis;
        [] ->
            Analysis = disassemble(Module, File, MD5),
            true = ets:insert(?CACHE, {{Module, MD5}, Analysis}),
            Analysis
    end.

%% Reads the module's file directly (no code or file server in the way) and only if it is
%% the code that is loaded.
disassemble(_Module, none, _MD5) ->
    {[], []};
disassemble(Module, File, MD5) ->
    try
        {ok, Binary} = prim_file:read_file(File),
        {ok, {Module, MD5}} = beam_lib:md5(Binary),
        {beam_file, Module, _Exports, _Attributes, _Info, Functions} = beam_disasm:file(Binary),
        {[{{Module, F, A}, Callee} || {function, F, A, _Entry, Code} <- Functions,
                                      Instruction <- Code,
                                      Callee <- tail_callee(Instruction)],
         waiting(Module, Functions)}
    catch
        _:_ -> {[], []}
    end.

%% The functions of the module that may wait for a message: those with a `receive' or a
%% call to an OTP function that waits, and those calling one of these in the module (one
%% level: following calls further makes most of a module's recursive helpers look like
%% loops, and takes their timing).
waiting(Module, Functions) ->
    Calls = [{{Module, F, A}, lists:usort([Callee || I <- Code, Callee <- callee(I)]),
              lists:any(fun waits/1, Code)}
             || {function, F, A, _Entry, Code} <- Functions],
    Direct = maps:from_list([{MFA, true} || {MFA, Callees, Receives} <- Calls,
                                            Receives orelse lists:any(fun blocking/1, Callees)]),
    lists:usort(maps:keys(Direct)
                ++ [MFA || {MFA, Callees, _} <- Calls, lists:any(fun(C) -> is_map_key(C, Direct) end, Callees)]).

waits({loop_rec, _, _}) -> true;
waits({wait, _}) -> true;
waits({wait_timeout, _, _}) -> true;
waits(_) -> false.

%% OTP functions that wait for a reply or a timer.
blocking({gen_server, call, A}) -> A =:= 2 orelse A =:= 3;
blocking({gen_statem, call, A}) -> A =:= 2 orelse A =:= 3;
blocking({gen_event, call, A}) -> A =:= 3 orelse A =:= 4;
blocking({gen, call, A}) -> A =:= 3 orelse A =:= 4;
blocking({timer, sleep, 1}) -> true;
blocking({erlang, hibernate, 3}) -> true;
blocking({proc_lib, hibernate, 3}) -> true;
blocking({rpc, call, A}) -> A =:= 4 orelse A =:= 5;
blocking({erpc, call, A}) -> A >= 2 andalso A =< 5;
blocking({erpc, receive_response, _}) -> true;
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

%% The functions on a cycle of the graph that waits for messages: the members of strongly
%% connected components (Tarjan) with more than one function or with a function that
%% tail-calls itself, one of whose functions receives.
cyclic(EdgesByModule, Receivers) ->
    Graph = lists:foldl(fun({From, To}, G) -> maps:update_with(From, fun(L) -> [To | L] end, [To], G) end,
                        #{}, lists:append(maps:values(EdgesByModule))),
    Visit = fun(V, Acc = #{index := Index}) when is_map_key(V, Index) -> Acc;
               (V, Acc) -> strongconnect(V, Graph, Acc)
            end,
    #{cyclic := Cyclic} =
        lists:foldl(Visit, #{n => 0, index => #{}, low => #{}, stack => [], on_stack => #{},
                             cyclic => #{}, receivers => Receivers}, maps:keys(Graph)),
    Cyclic.

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
    #{index := Index2, low := Low2, stack := Stack2, on_stack := On2, cyclic := Cyclic} = S2,
    case map_get(V, Low2) =:= map_get(V, Index2) of
        true ->
            {Component, Rest} = pop_component(V, Stack2, []),
            IsCycle = case Component of
                          [Single] -> lists:member(Single, maps:get(Single, Graph, []));
                          _ -> true
                      end,
            #{receivers := Receivers} = S2,
            IsLoop = IsCycle andalso lists:any(fun(C) -> is_map_key(C, Receivers) end, Component),
            Cyclic2 = case IsLoop of
                          true -> maps:merge(Cyclic, maps:from_list([{C, true} || C <- Component]));
                          false -> Cyclic
                      end,
            S2#{stack := Rest, on_stack := maps:without(Component, On2), cyclic := Cyclic2};
        false ->
            S2
    end.

pop_component(V, [V | Rest], Acc) -> {[V | Acc], Rest};
pop_component(V, [W | Rest], Acc) -> pop_component(V, Rest, [W | Acc]).

%% A public table owned by the registry, so the cache outlives the callers.
ensure_cache() ->
    _ = ferrotrace_registry:ensure_started(),
    ok.
