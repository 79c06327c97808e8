%%% @private
%%% @doc Noticing another tool taking over a `calls/2' session's processes or functions, on
%%% OTP 25 and 26 (the legacy trace session), and removing only what is still ours.
%%%
%%% On those releases a process has one tracer and a function one match spec for the whole
%%% node: `erlang:trace(all, true, [call, {tracer, Other}])' (recon_trace, dbg, redbug) takes
%%% processes from our tracer module, and `erlang:trace_pattern/3' on a function we trace
%%% replaces our match spec. Neither tells us. The session's keeper therefore checks, every
%%% ?CHECK_MS milliseconds while the session runs and once more as it stops, what it set:
%%% <ul>
%%% <li>Functions: `erlang:trace_info(MFA, match_spec)' of the functions it set a pattern on
%%% is still the match spec it set (a foreign spec, or `false' when another tool removed the
%%% pattern, is a displacement). The functions watched are those the session's patterns
%%% named, found carrying our match spec right after they were set: every function of a
%%% named module for `{m, '_', '_'}', none for a `'_'' module (no bounded list exists).
%%% At most ?MAX_FUNCTIONS are kept, ?FUNCTIONS_PER_CHECK checked per round, round robin.
%%% The `match_spec' key, never `all': `all' (and `call_time') block thread progress on
%%% every scheduler.</li>
%%% <li>Processes: `erlang:trace_info(Pid, tracer)' (the process's lock only) is still
%%% `{ferrotrace_tracer, Id}'. A list of pids: all of them, ?PROCESSES_PER_CHECK per round.
%%% `all' and `existing': a window of ?PROCESSES_PER_CHECK of `erlang:processes()' per
%%% round, moving on each round, so a node with P processes is seen whole every
%%% P / ?PROCESSES_PER_CHECK rounds; one process of the window taken is enough to notice.
%%% `all' and `new': also `new', the tracer new processes get (one call); a takeover by
%%% `erlang:trace(all, ...)' shows there at once. Only a process whose tracer is another
%%% tracer counts: a process with no tracer at all may be one the VM unhooked from a
%%% session that just stopped (a limit answers `remove' at each tracee's next event), and
%%% under `existing' a process spawned later was never ours.</li>
%%% </ul>
%%% What is found accumulates (a displacement is not undone: the other tool's tracer or
%%% pattern stays until it goes, and ours does not come back) in the session's registry
%%% info as `displaced => #{at, processes, functions, by}' (and `new_processes => true' when
%%% the default for new processes was taken): `at' the first notice (ms), `processes' how
%%% many live processes the checks found under another tracer (at most ?MAX_PIDS are
%%% remembered), `functions' whose match spec is no longer ours, `by' the other tracers (a
%%% pid, `{Module, State}' shortened by `ferrotrace_hint:brief/1', or
%%% `{ferrotrace, Id}'); `by' is `[]' when only functions were seen, the VM does not say who
%%% set a pattern. Absent while nothing was displaced.
%%%
%%% Cost per round, bounded whatever the node's size: at most ?FUNCTIONS_PER_CHECK +
%%% ?PROCESSES_PER_CHECK + 1 trace_info calls, plus, for `all' and `existing', one
%%% `erlang:processes()' (the one cost proportional to the node: a list of its pids).
%%%
%%% OTP 27+ trace sessions do not displace each other (each session has its own tracer and
%%% patterns): no check runs for that backend.
-module(ferrotrace_displaced).

-export([new/3, add_functions/3, add_patterns/3, remove_functions/2, check/2, interval/0]).

%% OTP 25's spec of erlang:trace_info/2 omits the `{tracer, {Module, State}}' answer.
-dialyzer({no_match, [check_processes/2]}).

-define(CHECK_MS, 500).
-define(MAX_FUNCTIONS, 1000).
-define(FUNCTIONS_PER_CHECK, 64).
-define(PROCESSES_PER_CHECK, 500).
-define(MAX_PIDS, 10000).

-type watch() :: #{functions := [{mfa(), [tuple()]}],
                   fn_next := non_neg_integer(),
                   pids := ferrotrace:pid_spec(),
                   pid_next := non_neg_integer(),
                   taken := #{pid() => term()},
                   new_taken := boolean(),
                   displaced_functions := [mfa()],
                   by := [term()]}.
-export_type([watch/0]).

%% @doc How often the keeper checks, in ms.
-spec interval() -> pos_integer().
interval() -> ?CHECK_MS.

%% @doc What session `Id' watches: the functions of `Patterns' (claims as the registry holds
%% them) that carry our match spec now, and the processes `Pids'.
-spec new(ferrotrace_tracer:session_id(), [ferrotrace_registry:pattern()],
          ferrotrace:pid_spec()) -> watch().
new(Id, Patterns, Pids) ->
    add_functions(#{functions => [], fn_next => 0, pids => Pids, pid_next => 0, taken => #{},
                    new_taken => false, displaced_functions => [], by => []},
                  Id, expected(Patterns)).

%% @doc Adds `Functions' (`{MFA, MatchSpec}' just set, loops found at run time) to what is
%% watched, those that carry that match spec now, up to ?MAX_FUNCTIONS.
-spec add_functions(watch(), ferrotrace_tracer:session_id(), [{mfa(), [tuple()]}]) -> watch().
add_functions(Watch = #{functions := Known}, _Id, Functions) ->
    Mine = [{MFA, MS} || {MFA, MS} <- Functions, ferrotrace_traced:match_spec(MFA) =:= MS],
    New = lists:ukeysort(1, Mine ++ Known),
    Watch#{functions := lists:sublist(New, ?MAX_FUNCTIONS)}.

%% @doc Adds the functions of `Patterns' (claims just set by `ferrotrace:add/2') to what is
%% watched, as {@link add_functions/3}.
-spec add_patterns(watch(), ferrotrace_tracer:session_id(), [ferrotrace_registry:pattern()]) -> watch().
add_patterns(Watch, Id, Patterns) ->
    add_functions(Watch, Id, expected(Patterns)).

%% @doc Stops watching the functions `Specs' match (their patterns were taken off by
%% `ferrotrace:remove/2': their match spec gone is no other tool's doing).
-spec remove_functions(watch(), [ferrotrace:mfa_spec()]) -> watch().
remove_functions(Watch = #{functions := Known}, Specs) ->
    Watch#{functions := [F || F = {MFA, _} <- Known,
                              not ferrotrace_spec:covered(MFA, Specs)],
           fn_next := 0}.

%% The functions and match specs `Patterns' set (loops' count-only specs over the pattern's).
expected(Patterns) ->
    lists:append(
      [[{MFA, maps:get(MFA, Loops, MS)} || MFA <- ferrotrace_traced:module_functions(Spec, Scope)]
       || #{mfa := Spec, match_spec := MS, scope := Scope} = P <- Patterns,
          Loops <- [maps:from_list(maps:get(loops, P, []))]]).

%% @doc One bounded round of checks for session `Id'; records what it found in the
%% registry when that changed.
-spec check(ferrotrace_tracer:session_id(), watch()) -> watch().
check(Id, Watch0) ->
    Watch1 = check_functions(Watch0),
    Watch2 = check_processes(Id, Watch1),
    case changed(Watch0, Watch2) of
        true -> record(Id, Watch2);
        false -> ok
    end,
    Watch2.

check_functions(Watch = #{functions := []}) ->
    Watch;
check_functions(Watch = #{functions := Functions, fn_next := Next, displaced_functions := Found}) ->
    {Batch, After} = window(Functions, Next, ?FUNCTIONS_PER_CHECK),
    Lost = [MFA || {MFA, MS} <- Batch, not same_or_gone(MFA, MS)],
    Watch#{fn_next := After, displaced_functions := lists:usort(Found ++ Lost)}.

%% A function whose module was unloaded or reloaded lost our pattern through no other tool.
same_or_gone(MFA, MS) ->
    case ferrotrace_traced:match_spec(MFA) of
        MS -> true;
        undefined -> true;
        false -> reloaded(MFA);
        _ -> false
    end.

%% A new version of the module carries no pattern: not a displacement, while the old one is
%% still there (after the purge a reloaded module's functions do count as displaced).
reloaded({M, _, _}) ->
    erlang:check_old_code(M) orelse not erlang:module_loaded(M).

check_processes(Id, Watch = #{pids := Pids, pid_next := Next, taken := Taken0, by := By0,
                              new_taken := NewTaken0}) ->
    Ours = {ferrotrace_tracer, Id},
    {Batch, After} = case Pids of
                         List when is_list(List) -> window(List, Next, ?PROCESSES_PER_CHECK);
                         new -> {[], 0};
                         _ -> window(erlang:processes(), Next, ?PROCESSES_PER_CHECK)
                     end,
    Tracers = [{P, ferrotrace_traced:tracer(P)} || P <- Batch],
    Found = [{P, T} || {P, T} <- Tracers, T =/= Ours, T =/= [], T =/= undefined],
    Back = [P || {P, T} <- Tracers, T =:= Ours],
    Taken1 = maps:without(Back, Taken0),
    Live = maps:filter(fun(P, _) -> is_process_alive(P) end, Taken1),
    Room = max(0, ?MAX_PIDS - map_size(Live)),
    Taken = maps:merge(maps:from_list(lists:sublist(Found, Room)), Live),
    {NewTaken, NewBy} =
        case Pids =:= all orelse Pids =:= new of
            true ->
                case ferrotrace_traced:tracer(new) of
                    T when T =/= Ours, T =/= [], T =/= undefined -> {true, [T]};
                    _ -> {NewTaken0, []}
                end;
            false ->
                {NewTaken0, []}
        end,
    By = lists:usort(By0 ++ NewBy ++ [T || {_, T} <- Found]),
    Watch#{pid_next := After, taken := Taken, by := By, new_taken := NewTaken}.

%% `N' items from position `Next' on (wrapping), and where the next window starts.
window(List, Next, N) ->
    Len = length(List),
    case Len =< N of
        true ->
            {List, 0};
        false ->
            Start = Next rem Len,
            {Tail, Head} = {lists:nthtail(Start, List), lists:sublist(List, Start)},
            Batch = lists:sublist(Tail ++ Head, N),
            {Batch, (Start + N) rem Len}
    end.

changed(#{taken := T0, new_taken := N0, displaced_functions := F0, by := B0},
        #{taken := T1, new_taken := N1, displaced_functions := F1, by := B1}) ->
    map_size(T0) =/= map_size(T1) orelse N0 =/= N1 orelse F0 =/= F1 orelse B0 =/= B1.

record(Id, #{taken := Taken, new_taken := NewTaken, displaced_functions := Functions, by := By}) ->
    case map_size(Taken) =:= 0 andalso not NewTaken andalso Functions =:= [] of
        true ->
            ok;
        false ->
            At = case ferrotrace_registry:lookup(Id) of
                     {ok, _, _, #{displaced := #{at := First}}} -> First;
                     _ -> erlang:system_time(millisecond)
                 end,
            Displaced0 = #{at => At, processes => map_size(Taken), functions => Functions,
                           by => [who(T) || T <- By]},
            Displaced = case NewTaken of
                            true -> Displaced0#{new_processes => true};
                            false -> Displaced0
                        end,
            ferrotrace_registry:update(Id, #{displaced => Displaced})
    end.

who({ferrotrace_tracer, Other}) -> {ferrotrace, Other};
who(Tracer) -> ferrotrace_hint:brief(Tracer).
