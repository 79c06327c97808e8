%%% @private
%%% @doc Whether the modules and functions a spec names exist, asked before anything is
%%% traced or loaded: by `calls/2' and `add/2' on this node, and by the bundle's one-shot
%%% (`ferrotrace calls NODE SPEC') on its target over plain rpc, before any of ferrotrace is
%%% loaded there. One check for both: it asks through a `call()', `apply/3' here or
%%% `erpc:call/5' there, and only OTP's own functions (`code:ensure_loaded/1',
%%% `erlang:get_module_info/2', `code:all_available/0', `erlang:loaded/0'), so that the target
%%% needs nothing of ferrotrace. A refusal carries a "did you mean" drawn from the node's
%%% modules or the module's functions (ferrotrace_hint). Calls only ferrotrace_hint.
-module(ferrotrace_exists).

-export([check/3, local/0, remote/2]).

-type call() :: fun((module(), atom(), [term()]) -> term()).
-type reason() :: {no_such_module, module(), binary()}
                | {no_matching_functions, [{module(), atom(), arity() | '_'}], binary()}.
-export_type([call/0, reason/0]).

%% How many of a module's functions a refusal lists when none is near the name.
-define(LISTED, 8).

%% @doc Asks this node (`apply/3').
-spec local() -> call().
local() ->
    fun erlang:apply/3.

%% @doc Asks `Node' over plain rpc (`erpc:call/5'), each call within `Timeout' ms.
-spec remote(node(), timeout()) -> call().
remote(Node, Timeout) ->
    fun(M, F, A) -> erpc:call(Node, M, F, A, Timeout) end.

%% @doc `ok' when every `{M, F, A}' of `Specs' (wildcards `` '_' '') whose module is named
%% names a module there (loaded by the check, as a start would load it) and at least one
%% function of it: `local' scope counts every function, `global' the exported ones. Else,
%% for the first that does not, `{error, {no_such_module, M, Hint}}' or `{error,
%% {no_matching_functions, [MFA], Hint}}', `Hint' led by "did you mean ..." when a name
%% there is at most two edits away.
-spec check([{atom(), atom(), arity() | '_'}], local | global | term(), call()) ->
          ok | {error, reason()}.
check([], _Scope, _Call) ->
    ok;
check([{'_', _, _} | Rest], Scope, Call) ->
    check(Rest, Scope, Call);
check([{M, F, A} = Spec | Rest], Scope, Call) ->
    case Call(code, ensure_loaded, [M]) of
        {module, M} ->
            Key = case Scope of
                      global -> exports;
                      _ -> functions
                  end,
            Functions = [FA || {Fn, _} = FA <- Call(erlang, get_module_info, [M, Key]), not generated(Fn)],
            case [FA || {Fn, Ar} = FA <- Functions, F =:= '_' orelse F =:= Fn, A =:= '_' orelse A =:= Ar] of
                [] -> {error, {no_matching_functions, [Spec], function_hint(Spec, Key, Functions)}};
                [_ | _] -> check(Rest, Scope, Call)
            end;
        _ ->
            {error, {no_such_module, M, module_hint(M, Call)}}
    end.

module_hint(M, Call) ->
    Available = [Name || {Name, _File, _Loaded} <- Call(code, all_available, [])],
    Loaded = [atom_to_list(L) || L <- Call(erlang, loaded, [])],
    Names = lists:usort(Available ++ Loaded),
    Accepted = <<"no module of that name is loaded or in the code path">>,
    case ferrotrace_hint:nearest(M, Names) of
        none -> Accepted;
        Near -> iolist_to_binary(["did you mean ", Near, "? ", Accepted])
    end.

function_hint({M, F, A}, Key, Functions) ->
    Module = atom_to_list(M),
    Typed = case A of
                '_' -> atom_to_list(F);
                _ -> atom_to_list(F) ++ "/" ++ integer_to_list(A)
            end,
    Names = case A of
                '_' -> lists:usort([atom_to_list(Fn) || {Fn, _} <- Functions]);
                _ -> lists:usort([atom_to_list(Fn) ++ "/" ++ integer_to_list(Ar) || {Fn, Ar} <- Functions])
            end,
    Own = case Key of
              exports -> " exports ";
              functions -> " has "
          end,
    %% The same name's arities, else the first functions in order.
    Shown = case [FA || {Fn, _} = FA <- Functions, Fn =:= F] of
                [] -> lists:sort(Functions);
                Same -> lists:sort(Same)
            end,
    Listed = [io_lib:format("~tp/~b", [Fn, Ar]) || {Fn, Ar} <- lists:sublist(Shown, ?LISTED)],
    More = case length(Shown) > length(Listed) of
               true -> io_lib:format(", ... (~b in all)", [length(Functions)]);
               false -> ""
           end,
    Accepted = [Module, Own, lists:join(", ", Listed), More],
    case F =/= '_' andalso ferrotrace_hint:nearest(Typed, Names) of
        Near when is_list(Near) -> iolist_to_binary(["did you mean ", Module, ":", Near, "? ", Accepted]);
        _ -> iolist_to_binary(Accepted)
    end.

%% A function the compiler made (`-f/1-fun-0-'): never offered.
generated(F) ->
    case atom_to_list(F) of
        [$- | _] -> true;
        _ -> false
    end.
