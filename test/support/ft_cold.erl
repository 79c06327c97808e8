%%% @doc Helpers for ferrotrace_cold_SUITE, run on its peer nodes: a first call that
%%% records which modules its process loaded on demand (its own error handler, which notes
%%% the module and hands over to OTP's `error_handler'), and where each module was loaded
%%% from.
-module(ft_cold).

-export([first_call/3, preload_at_once/1, loaded_files/1, old_code/1]).
-export([undefined_function/3, undefined_lambda/3]).

-define(LOADS, ft_cold_loads).

%% @doc `{Result, Loads}': `apply(M, F, A)' in a new process of normal priority, as a
%% shell's evaluator runs it, and the modules that process loaded on first call (each a
%% wait for the code server), in order.
-spec first_call(module(), atom(), list()) -> {term(), [module()]}.
first_call(M, F, A) ->
    {module, _} = code:ensure_loaded(?MODULE),
    Parent = self(),
    Pid = spawn(fun() ->
                        _ = process_flag(error_handler, ?MODULE),
                        Result = apply(M, F, A),
                        Parent ! {self(), Result, lists:reverse(get_loads())}
                end),
    receive {Pid, Result, Loads} -> {Result, Loads} end.

%% @doc `ferrotrace_code:preload/0' called by `N' processes at once (each waits for the
%% same signal); answers when all returned.
-spec preload_at_once(pos_integer()) -> [ok].
preload_at_once(N) ->
    {module, _} = code:ensure_loaded(ferrotrace_code),
    Parent = self(),
    Pids = [spawn(fun() -> receive go -> Parent ! {self(), ferrotrace_code:preload()} end end)
            || _ <- lists:seq(1, N)],
    _ = [Pid ! go || Pid <- Pids],
    [receive {Pid, Result} -> Result end || Pid <- Pids].

%% @doc Where each of `Modules' is loaded from: `{Module, File}', `{Module, false}' if not
%% loaded.
-spec loaded_files([module()]) -> [{module(), string() | false | atom()}].
loaded_files(Modules) ->
    [{M, case code:is_loaded(M) of
             {file, File} -> File;
             false -> false
         end} || M <- Modules].

%% @doc The modules among `Modules' that have old code (loaded twice).
-spec old_code([module()]) -> [module()].
old_code(Modules) ->
    [M || M <- Modules, erlang:check_old_code(M)].

%% @doc The error handler's callback: notes `M' where it is not loaded, then OTP's.
-spec undefined_function(module(), atom(), list()) -> term().
undefined_function(M, F, A) ->
    note(M),
    error_handler:undefined_function(M, F, A).

%% @doc As {@link undefined_function/3}, for a fun of a module not loaded.
-spec undefined_lambda(module(), fun(), list()) -> term().
undefined_lambda(M, Fun, A) ->
    note(M),
    error_handler:undefined_lambda(M, Fun, A).

note(M) ->
    case erlang:module_loaded(M) of
        true -> ok;
        false -> put(?LOADS, [M | get_loads()])
    end.

get_loads() ->
    case get(?LOADS) of
        undefined -> [];
        Loads -> Loads
    end.
