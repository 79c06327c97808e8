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
%%% A function is a loop when it lies on a cycle of tail calls: a chain of `call_last',
%%% `call_only', `call_ext_last' or `call_ext_only' instructions that leads back to it. The
%%% cycle may run through functions that are not traced and through other modules
%%% (`?MODULE:loop(S)' for code upgrade is an external tail call). The analysis reads the
%%% loaded code with `beam_disasm'; results are cached per module version. Cycles through
%%% funs or `apply' cannot be seen here; the engine catches those at run time.
-module(ferrotrace_loops).

-export([find/2, module_tail_calls/1]).

-define(CACHE, ferrotrace_loops_cache).

%% @doc The functions matched by `Specs' (in loaded modules, other than `Exclude') that lie
%% on a tail-call cycle, sorted.
-spec find([ferrotrace:mfa_spec()], [module()]) -> [mfa()].
find(Specs, Exclude) ->
    Modules = lists:usort([M || {M, _, _} <- Specs, M =/= '_']),
    Roots = case lists:any(fun({M, _, _}) -> M =:= '_' end, Specs) of
                true -> [M || {M, _} <- code:all_loaded()];
                false -> Modules
            end -- Exclude,
    Edges = edges(Roots, #{}, []),
    Cyclic = cyclic(Edges),
    lists:sort([MFA || MFA <- maps:keys(Cyclic), lists:any(fun(S) -> matches(S, MFA) end, Specs),
                       not lists:member(element(1, MFA), Exclude)]).

%% The tail-call graph of `Modules' and of every loaded module they tail-call into.
edges([], Seen, _Acc) ->
    Seen;
edges([M | Rest], Seen, Acc) when is_map_key(M, Seen) ->
    edges(Rest, Seen, Acc);
edges([M | Rest], Seen, Acc) ->
    Calls = module_tail_calls(M),
    Next = [Callee || {_, {Callee, _, _}} <- Calls, Callee =/= M,
                      not is_map_key(Callee, Seen), erlang:module_loaded(Callee)],
    edges(Next ++ Rest, Seen#{M => Calls}, Acc).

%% @doc The tail calls `{Caller, Callee}' made by the loaded code of `Module'; `[]' when its
%% object code cannot be read.
-spec module_tail_calls(module()) -> [{mfa(), mfa()}].
module_tail_calls(Module) ->
    ensure_cache(),
    Key = {Module, erlang:get_module_info(Module, md5)},
    case ets:lookup(?CACHE, Key) of
        [{_, Calls}] ->
            Calls;
        [] ->
            Calls = disassemble(Module),
            true = ets:insert(?CACHE, {Key, Calls}),
            Calls
    end.

disassemble(Module) ->
    try code:get_object_code(Module) of
        {Module, Binary, _File} ->
            case beam_disasm:file(Binary) of
                {beam_file, Module, _Exports, _Attributes, _Info, Functions} ->
                    [{{Module, F, A}, Callee} || {function, F, A, _Entry, Code} <- Functions,
                                                 Instruction <- Code,
                                                 Callee <- tail_callee(Instruction)];
                _ ->
                    []
            end;
        error ->
            []
    catch
        _:_ -> []
    end.

tail_callee({call_last, _, {M, F, A}, _}) -> [{M, F, A}];
tail_callee({call_only, _, {M, F, A}}) -> [{M, F, A}];
tail_callee({call_ext_last, _, {extfunc, M, F, A}, _}) -> [{M, F, A}];
tail_callee({call_ext_only, _, {extfunc, M, F, A}}) -> [{M, F, A}];
tail_callee(_) -> [].

%% The functions on a cycle of the graph: the members of strongly connected components
%% with more than one function, or with a function that tail-calls itself (Tarjan).
cyclic(EdgesByModule) ->
    Graph = lists:foldl(fun({From, To}, G) -> maps:update_with(From, fun(L) -> [To | L] end, [To], G) end,
                        #{}, lists:append(maps:values(EdgesByModule))),
    Visit = fun(V, Acc = #{index := Index}) when is_map_key(V, Index) -> Acc;
               (V, Acc) -> strongconnect(V, Graph, Acc)
            end,
    #{cyclic := Cyclic} =
        lists:foldl(Visit, #{n => 0, index => #{}, low => #{}, stack => [], on_stack => #{},
                             cyclic => #{}}, maps:keys(Graph)),
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
            IsLoop = case Component of
                         [Single] -> lists:member(Single, maps:get(Single, Graph, []));
                         _ -> true
                     end,
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

matches({M, F, A}, {M2, F2, A2}) ->
    (M =:= '_' orelse M =:= M2) andalso (F =:= '_' orelse F =:= F2)
        andalso (A =:= '_' orelse A =:= A2).

%% A public table owned by the registry, so the cache outlives the callers.
ensure_cache() ->
    _ = ferrotrace_registry:ensure_started(),
    ok.
