%%% @doc The engine's promises to the Erlang side, through the raw NIFs of `ferrotrace_tracer':
%%% whatever stops a session, its keeper gets `{ferrotrace_stopped, Id, Reason}' from the
%%% engine (the engine owns the `duration' timer), and sampling decided in `enabled_call/3'.
-module(ferrotrace_engine_SUITE).

-include("support/ft_ct.hrl").

-export([duration_stop_notifies_keeper/1, limit_stop_notifies_keeper/1,
         user_stop_notifies_keeper/1, ring_allocation_failure_drops_and_counts/1]).

suite() ->
    [{ct_hooks, [{ft_ct, [ft_test_target]}]}].

all() ->
    [duration_stop_notifies_keeper, limit_stop_notifies_keeper, user_stop_notifies_keeper,
     ring_allocation_failure_drops_and_counts].

-spec duration_stop_notifies_keeper(config()) -> ok.
duration_stop_notifies_keeper(_Config) ->
    {ok, Id} = ferrotrace_tracer:new_session(#{duration => 50}, self()),
    T0 = erlang:monotonic_time(millisecond),
    receive {ferrotrace_stopped, Id, Reason} -> ?assertEqual(duration, Reason)
    after 20000 -> error(no_stop_message)
    end,
    %% Not before the duration (less the clock's ms steps); at most 100 times it, a margin
    %% no loaded machine crosses (a stop left to a periodic check would be seconds late).
    Waited = erlang:monotonic_time(millisecond) - T0,
    ?assert(Waited >= 40 andalso Waited < 5000, Waited),
    {ok, #{status := stopped, stop_reason := duration}} = ferrotrace_tracer:session_summary(Id),
    %% The polls' read (session_status/1) says the same.
    {ok, #{status := stopped, stop_reason := duration, elapsed_ms := _}} = ferrotrace_tracer:session_status(Id),
    ok = ferrotrace_tracer:release_session(Id),
    ?assertEqual({error, {no_such_session, Id}}, ferrotrace_tracer:session_status(Id)),
    receive Other -> error({unexpected, Other}) after 50 -> ok end.

-spec limit_stop_notifies_keeper(config()) -> ok.
limit_stop_notifies_keeper(_Config) ->
    {ok, Id} = ferrotrace_tracer:new_session(#{max_events => 10, duration => infinity}, self()),
    {ok, #{status := running, stop_reason := undefined}} = ferrotrace_tracer:session_status(Id),
    Self = self(),
    Worker = spawn_link(fun() -> receive go -> ok end, [ft_test_target:f(I) || I <- lists:seq(1, 100)], Self ! done end),
    1 = erlang:trace_pattern({ft_test_target, f, 1}, [{'_', [], [{return_trace}]}], [local]),
    1 = erlang:trace(Worker, true, [call, {tracer, ferrotrace_tracer, Id}]),
    Worker ! go,
    receive done -> ok after 5000 -> error(worker_stuck) end,
    receive {ferrotrace_stopped, Id, Reason} -> ?assertEqual(limit, Reason)
    after 5000 -> error(no_stop_message)
    end,
    erlang:trace_pattern({ft_test_target, f, 1}, false, [local]),
    %% The budget's read (session_counts/1) says what the summary says, without histograms.
    {ok, #{status := stopped, elapsed_ms := Elapsed, events := Events, calls := Calls}} =
        ferrotrace_tracer:session_summary(Id),
    {ok, Counts = #{status := stopped, events := CountedEvents, calls := CountedCalls}} =
        ferrotrace_tracer:session_counts(Id),
    ?assertEqual(maps:with([seen, sampled_out, frames_refused, fuse_refused, untraced, born], Events), CountedEvents),
    ?assertEqual(lists:sort([{MFA, N} || #{mfa := MFA, count := N} <- Calls]), lists:sort(CountedCalls)),
    ?assertMatch([{{ft_test_target, f, 1}, N}] when N > 0, CountedCalls),
    ?assert(maps:get(elapsed_ms, Counts) >= Elapsed),
    ok = ferrotrace_tracer:release_session(Id).

-spec user_stop_notifies_keeper(config()) -> ok.
user_stop_notifies_keeper(_Config) ->
    {ok, Id} = ferrotrace_tracer:new_session(#{}, self()),
    ok = ferrotrace_tracer:stop_session(Id, user),
    %% The collector sends before it ends, and stop joins it: the message is already here.
    receive {ferrotrace_stopped, Id, user} -> ok after 10000 -> error(no_stop_message) end,
    ok = ferrotrace_tracer:release_session(Id),
    receive Other -> error({unexpected, Other}) after 50 -> ok end.

%% A ring that cannot be allocated (a child VM whose address space is capped just above what
%% it uses, below the 512 MiB of a `ring_size => 16777216' ring): the node stays up, the
%% thread's events are counted as dropped, and one failure is recorded. The same child without
%% the cap allocates the ring and aggregates everything (so the cap is what made it fail).
-spec ring_allocation_failure_drops_and_counts(config()) -> ok.
ring_allocation_failure_drops_and_counts(_Config) ->
    Free = child(""),
    ?assertMatch({#{seen := 2000, aggregated := 2000, dropped := 0},
                  #{ring_alloc_failures := 0}}, result(Free)),
    #{vm_kb := UsedKb} = Free,
    Capped = child(io_lib:format("ulimit -v ~b; ", [UsedKb + 256 * 1024])),
    ?assertMatch({#{seen := 2000, aggregated := 0, dropped := 2000},
                  #{ring_alloc_failures := 1, ring_bytes := 0}}, result(Capped)),
    ok.

result(#{events := Events, memory := Memory}) -> {Events, Memory}.

%% Runs a fresh VM (after Prefix, a shell command) that traces 1,000 calls with return_trace
%% into a session with the largest ring; returns what it printed: its summary and its VmSize
%% before the session started.
child(Prefix) ->
    Ebin = filename:dirname(code:which(ferrotrace_tracer)),
    TestDir = filename:dirname(code:which(ft_test_target)),
    Erl = filename:join([code:root_dir(), "bin", "erl"]),
    Eval = "{module, _} = code:ensure_loaded(ft_test_target), "
        %% The address space in use before the session: the cap is set from it.
        "[_, Kb | _] = string:lexemes(os:cmd(\"grep VmSize /proc/\" ++ os:getpid() ++ \"/status\"), \" \\t\\n\"), "
        "{ok, S} = ferrotrace_tracer:new_session(#{ring_size => 16777216, duration => infinity}, self()), "
        "Self = self(), "
        "W = spawn(fun() -> receive go -> ok end, [ft_test_target:f(I) || I <- lists:seq(1, 1000)], Self ! done end), "
        "1 = erlang:trace_pattern({ft_test_target, f, 1}, [{list_to_atom(\"_\"), [], [{return_trace}]}], [local]), "
        "1 = erlang:trace(W, true, [call, {tracer, ferrotrace_tracer, S}]), "
        "W ! go, receive done -> ok end, "
        "{ok, #{events := E, memory := M}} = ferrotrace_tracer:session_summary(S), "
        "io:format(\"~w.~n\", [#{events => E, memory => M, vm_kb => list_to_integer(Kb)}]), halt().",
    Cmd = lists:flatten([Prefix, Erl, " -noshell -pa ", Ebin, " -pa ", TestDir, " -eval '", Eval, "' 2>&1"]),
    Out = os:cmd(Cmd),
    case erl_scan:string(lists:last(string:lexemes(Out, "\n"))) of
        {ok, Tokens, _} ->
            case erl_parse:parse_term(Tokens) of
                {ok, Term} -> Term;
                _ -> error({child_output, Out})
            end;
        _ -> error({child_output, Out})
    end.
