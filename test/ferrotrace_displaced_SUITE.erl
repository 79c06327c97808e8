%%% @doc Another tool taking over a session's processes or match specs (OTP 25 and 26, the
%%% legacy trace session: one tracer per process, one match spec per function). The
%%% session notices within a couple of seconds (the keeper checks every 500 ms), says so in
%%% summary/1 (`displaced') and report/1 (a `displaced:' line), and its stop leaves the
%%% other tool's tracer and match specs in place. The "other tool" does what recon_trace
%%% does: clears the flags of the processes (erlang:trace/3 refuses a process that has a
%%% tracer), traces them with a process tracer, and sets its own match spec with
%%% erlang:trace_pattern/3. On OTP 27+ sessions coexist and nothing is displaced: only the
%%% case without a takeover runs there.
-module(ferrotrace_displaced_SUITE).

-include("support/ft_ct.hrl").

-export([pids_and_spec_taken/1, all_taken/1, module_pattern_keeps_foreign_spec/1,
         not_displaced/1]).

-define(F, {ft_test_target, f, 1}).
-define(G, {ft_test_target, g, 1}).
-define(LONG, 60000).
%% A generous deadline for the keeper's notice (it checks every 500 ms).
-define(NOTICE_MS, 5000).
-define(OTHERS_SPEC, [{'_', [], []}]).

suite() ->
    [{ct_hooks, [{ft_ct, [ft_test_target]}]}].

all() ->
    [pids_and_spec_taken, all_taken, module_pattern_keeps_foreign_spec, not_displaced].

%% Two of three traced workers go to another tracer, and ?F's match spec is replaced:
%% `displaced' counts the two, names ?F and the other tracer; the report says so; the stop
%% leaves the other tool's tracer and spec, and removes ours (?G's pattern, the third
%% worker's flags).
-spec pids_and_spec_taken(config()) -> ok | {skip, string()}.
pids_and_spec_taken(_Config) ->
    legacy_only(fun() ->
        [W1, W2, W3] = Workers = [spawn_worker() || _ <- lists:seq(1, 3)],
        {ok, S} = ferrotrace:calls([?F, ?G], #{duration => ?LONG, pids => Workers}),
        [run_in(W, fun() -> [ft_test_target:f(I) || I <- lists:seq(1, 10)] end) || W <- Workers],
        Other = spawn_other_tracer(),
        [take(W, Other) || W <- [W1, W2]],
        1 = erlang:trace_pattern(?F, ?OTHERS_SPEC, [local]),
        ok = ft_ct:poll(fun() -> displaced(S, 2, [?F]) end, ?NOTICE_MS),
        #{displaced := #{by := By, at := At}} = ferrotrace:summary(S),
        ?assertEqual([Other], By),
        ?assert(is_integer(At)),
        Report = ferrotrace:format(S),
        ?assertMatch({match, _}, re:run(Report, "^displaced: at \\d\\d:\\d\\d:\\d\\d another tracer \\("
                                        ++ re_quote(pid_to_list(Other)) ++ "\\) took 2 processes",
                                        [multiline])),
        ?assertMatch({match, _}, re:run(Report, "1 function's match spec replaced: ft_test_target:f/1")),
        ok = ferrotrace:stop(S),
        %% The other tool's tracer and match spec are still in place; ours are gone.
        ?assertEqual({tracer, Other}, erlang:trace_info(W1, tracer)),
        ?assertEqual({tracer, Other}, erlang:trace_info(W2, tracer)),
        ?assertEqual({tracer, []}, erlang:trace_info(W3, tracer)),
        ?assertEqual({match_spec, ?OTHERS_SPEC}, erlang:trace_info(?F, match_spec)),
        ?assertEqual({match_spec, false}, erlang:trace_info(?G, match_spec)),
        %% Still displaced after the stop: the figures say what they missed.
        ?assertMatch(#{status := stopped, displaced := #{processes := 2, functions := [?F]}},
                     ferrotrace:summary(S)),
        stop_other(Other)
    end).

%% recon_trace with `all': every process's flags cleared, every process and new ones given
%% to its tracer. The session sees processes under the other tracer, `new' taken, and its
%% function's spec replaced; its stop leaves all of that in place.
-spec all_taken(config()) -> ok | {skip, string()}.
all_taken(_Config) ->
    legacy_only(fun() ->
        {ok, S} = ferrotrace:calls(?F, #{duration => ?LONG}),
        Other = spawn_other_tracer(),
        _ = erlang:trace(all, false, [all]),
        _ = erlang:trace(all, true, [call, {tracer, Other}]),
        1 = erlang:trace_pattern(?F, ?OTHERS_SPEC, [local]),
        Taken = fun() ->
                        case ferrotrace:summary(S) of
                            #{displaced := #{processes := N, functions := [?F], by := [Other],
                                             new_processes := true}} -> N > 0;
                            _ -> false
                        end
                end,
        ok = ft_ct:poll(Taken, ?NOTICE_MS),
        Report = ferrotrace:format(S),
        ?assertMatch({match, _}, re:run(Report, "^displaced: at .* another tracer \\("
                                        ++ re_quote(pid_to_list(Other)) ++ "\\) took \\d+ process",
                                        [multiline])),
        ?assertMatch({match, _}, re:run(Report, "and new processes")),
        ok = ferrotrace:stop(S),
        ?assertEqual({tracer, Other}, erlang:trace_info(new, tracer)),
        Worker = spawn_worker(),
        ?assertEqual({tracer, Other}, erlang:trace_info(Worker, tracer)),
        ?assertEqual({match_spec, ?OTHERS_SPEC}, erlang:trace_info(?F, match_spec)),
        _ = erlang:trace(all, false, [all]),
        stop_other(Other)
    end).

%% A module pattern, one function of which another tool re-patterned: the stop removes our
%% pattern from the module's other functions and leaves that one the other tool's.
-spec module_pattern_keeps_foreign_spec(config()) -> ok | {skip, string()}.
module_pattern_keeps_foreign_spec(_Config) ->
    legacy_only(fun() ->
        Worker = spawn_worker(),
        {ok, S} = ferrotrace:calls({ft_test_target, '_', '_'}, #{duration => ?LONG, pids => [Worker]}),
        1 = erlang:trace_pattern(?F, ?OTHERS_SPEC, [local]),
        ok = ft_ct:poll(fun() -> displaced(S, 0, [?F]) end, ?NOTICE_MS),
        ?assertMatch(#{displaced := #{by := []}}, ferrotrace:summary(S)),
        ?assertMatch({match, _}, re:run(ferrotrace:format(S),
                                        "^displaced: at \\d\\d:\\d\\d:\\d\\d 1 function's match spec replaced: ft_test_target:f/1",
                                        [multiline])),
        ok = ferrotrace:stop(S),
        ?assertEqual({match_spec, ?OTHERS_SPEC}, erlang:trace_info(?F, match_spec)),
        ?assertEqual({match_spec, false}, erlang:trace_info(?G, match_spec)),
        ?assertEqual({tracer, []}, erlang:trace_info(Worker, tracer))
    end).

%% Nothing taken: no `displaced' entry, no report line, on every OTP (on 27+ not even with
%% a process tracer and a pattern of the other tool on the same function and process: trace
%% sessions coexist).
-spec not_displaced(config()) -> ok.
not_displaced(_Config) ->
    Worker = spawn_worker(),
    {ok, S} = ferrotrace:calls(?F, #{duration => ?LONG, pids => [Worker]}),
    Other = spawn_other_tracer(),
    case ft_trace_state:trace_sessions() of
        true ->
            _ = erlang:trace(Worker, true, [call, {tracer, Other}]),
            _ = erlang:trace_pattern(?F, ?OTHERS_SPEC, [local]);
        false ->
            ok
    end,
    run_in(Worker, fun() -> [ft_test_target:f(I) || I <- lists:seq(1, 10)] end),
    %% Long enough for the keeper's checks to have run a few times.
    timer:sleep(1500),
    Summary = ferrotrace:summary(S),
    ?assertNot(maps:is_key(displaced, Summary), Summary),
    ?assertMatch(#{calls := [#{mfa := ?F, count := 10}]}, Summary),
    ?assertEqual(nomatch, re:run(ferrotrace:format(S), "displaced")),
    ok = ferrotrace:stop(S),
    ?assertNot(maps:is_key(displaced, ferrotrace:summary(S))),
    stop_other(Other),
    ok.

%%--------------------------------------------------------------------------------------

legacy_only(Case) ->
    case ft_trace_state:trace_sessions() of
        true -> {skip, "OTP 27+: trace sessions coexist, nothing is displaced"};
        false -> Case(), ok
    end.

displaced(S, Processes, Functions) ->
    case ferrotrace:summary(S) of
        #{displaced := #{processes := Processes, functions := Functions}} -> true;
        _ -> false
    end.

%% What recon_trace does to a process: its flags cleared, then traced with its tracer.
take(Pid, Tracer) ->
    _ = erlang:trace(Pid, false, [all]),
    1 = erlang:trace(Pid, true, [call, {tracer, Tracer}]).

spawn_other_tracer() ->
    spawn(fun Loop() -> receive stop -> ok; _ -> Loop() end end).

stop_other(Pid) ->
    Pid ! stop,
    ok.

spawn_worker() ->
    spawn(fun Loop() ->
                  receive
                      {run, From, Fun} -> Fun(), From ! {done, self()}, Loop();
                      stop -> ok
                  end
          end).

run_in(Worker, Fun) ->
    Worker ! {run, self(), Fun},
    receive {done, Worker} -> ok after 10000 -> error(timeout) end.

re_quote(Text) ->
    re:replace(Text, "[.<>]", "\\\\&", [global, {return, list}]).
