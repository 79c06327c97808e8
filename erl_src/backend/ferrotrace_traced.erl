%%% @private
%%% @doc What the VM traces now, as ferrotrace reads it: the modules no session traces, the
%%% functions a pattern names and the match spec each carries, the tracer a process has.
%%% It changes nothing (ferrotrace_backend and, on OTP 25 and 26, ferrotrace_backend_legacy do).
%%%
%%% A leaf: ferrotrace_backend_legacy reads with it before removing a pattern (a function another
%%% tool took over keeps that tool's), the keeper and `ferrotrace_displaced' read the same
%%% answers. Reads use `erlang:trace_info/2' with one key (`match_spec', `tracer'), never
%%% `all', which stops the schedulers.
-module(ferrotrace_traced).

-export([own_modules/0, module_functions/2, match_spec/1, scope/1, tracer/1]).

%% @doc Modules no session ever traces.
-spec own_modules() -> [module()].
own_modules() ->
    %% The application's module list (rebar3 writes it into the .app file), or the loaded
    %% modules named like ours where no application file is found.
    %% Neither the application controller nor the code server is asked unless needed: on
    %% a busy node each call waits its turn among the runnable processes.
    case application:get_key(ferrotrace, modules) of
        {ok, [_ | _] = Modules} ->
            Modules;
        _ ->
            _ = application:load(ferrotrace),
            case application:get_key(ferrotrace, modules) of
                {ok, [_ | _] = Modules} -> Modules;
                _ -> [M || M <- erlang:loaded(), lists:prefix("ferrotrace", atom_to_list(M))]
            end
    end.

%% @doc The functions a pattern names, where they can be listed: a concrete MFA, or the
%% functions of a loaded named module (exported ones for `global'); `[]' for a `'_'' module.
-spec module_functions(ferrotrace:mfa_spec(), local | global) -> [mfa()].
module_functions({M, F, A}, _Scope) when M =/= '_', F =/= '_', A =/= '_' ->
    [{M, F, A}];
module_functions({'_', _, _}, _Scope) ->
    [];
module_functions({M, F, A}, Scope) ->
    Key = case Scope of
              local -> functions;
              global -> exports
          end,
    case erlang:module_loaded(M) of
        true ->
            [{M, Fn, Ar} || {Fn, Ar} <- erlang:get_module_info(M, Key),
                            F =:= '_' orelse F =:= Fn, A =:= '_' orelse A =:= Ar];
        false ->
            []
    end.

%% @doc The match spec a function carries now: a list, `false' (none) or `undefined' (no
%% such function).
-spec match_spec(mfa()) -> [tuple()] | false | undefined.
match_spec(MFA) ->
    trace_info(MFA, match_spec).

%% @doc Whether a function's call pattern is `local', `global', or `false' (none; also for
%% no such function).
-spec scope(mfa()) -> local | global | false.
scope(MFA) ->
    case trace_info(MFA, traced) of
        Scope when Scope =:= local; Scope =:= global -> Scope;
        _ -> false
    end.

%% @doc The tracer of a process (or of `new', the one new processes get) now: `[]' for
%% none, `undefined' for a process that is gone.
-spec tracer(pid() | new) -> term().
tracer(Target) ->
    trace_info(Target, tracer).

%% What `erlang:trace_info/2' says of `Item' (a function or a process), or `undefined'.
trace_info(Item, Key) ->
    try erlang:trace_info(Item, Key) of
        {Key, Value} -> Value;
        _ -> undefined
    catch error:badarg -> undefined
    end.
