%%% @doc Keyed aggregation: a histogram per `{MFA, Key}' where the key is what the match
%%% spec's `{message, Key}' returned (`by_key'), or the caller (`callers => true'); the
%%% `max_keys' bound and its overflow; keys beside argument copies; a raw session.
%%%
%%% Every count here is exact: the calls run in a process the test waits for, and the
%%% session is read after it stopped.
-module(ferrotrace_keys_SUITE).

-include("support/ft_ct.hrl").

-export([three_keys/1, match_spec_form/1, key_flood/1, callers/1, keys_with_args/1,
         raw_session/1, refused/1, report_lines/1]).

-define(CHECKOUT, ft_keys_target, checkout).
-define(LONG, 120000).

suite() ->
    [{ct_hooks, [{ft_ct, [ft_keys_target]}]}].

all() ->
    [three_keys, match_spec_form, key_flood, callers, keys_with_args, raw_session, refused,
     report_lines].

%%--------------------------------------------------------------------------------------

%% 300 gold, 200 silver and 100 bronze checkouts, keyed by tier with a fun typed in the shell.
-spec three_keys(config()) -> ok.
three_keys(_Config) ->
    Spec = {?CHECKOUT, by_tier()},
    {ok, S} = ferrotrace:calls(Spec, #{duration => ?LONG}),
    run(fun() -> checkouts([{gold, 300}, {silver, 200}, {bronze, 100}]) end),
    Entry = entry(S),
    ct:pal("~p", [Entry]),
    ?assertMatch(#{count := 600, returns := 600, keys_overflow := 0}, Entry),
    Keys = maps:get(by_key, Entry),
    ?assertEqual([{bronze, 100}, {gold, 300}, {silver, 200}],
                 lists:sort([{K, N} || #{key := K, count := N} <- Keys])),
    %% Each key's figures are a histogram's: ordered percentiles, a total, most total first.
    [?assert(P50 =< P90 andalso P90 =< P99 andalso P99 =< P999 andalso P999 =< Max andalso
             Total >= N, K)
     || #{key := K, count := N, p50 := P50, p90 := P90, p99 := P99, p999 := P999, max := Max,
          total := Total} <- Keys],
    Totals = [T || #{total := T} <- Keys],
    ?assertEqual(lists:reverse(lists:sort(Totals)), Totals),
    ok.

%% The same with a match-spec list whose head matches a map, and a guard: only gold and
%% silver calls are traced, keyed by `{Tier, big}' or `{Tier, small}'.
-spec match_spec_form(config()) -> ok.
match_spec_form(_Config) ->
    MS = [{[#{tier => '$1', id => '$2'}], [{'>', '$2', 50}, {'=/=', '$1', bronze}], [{message, {{'$1', big}}}]},
          {[#{tier => '$1', id => '$2'}], [{'=<', '$2', 50}, {'=/=', '$1', bronze}], [{message, {{'$1', small}}}]}],
    {ok, S} = ferrotrace:calls({?CHECKOUT, MS}, #{duration => ?LONG}),
    run(fun() -> checkouts([{gold, 80}, {silver, 60}, {bronze, 100}]) end),
    Entry = entry(S),
    ?assertEqual([{{gold, big}, 30}, {{gold, small}, 50}, {{silver, big}, 10}, {{silver, small}, 50}],
                 lists:sort([{K, N} || #{key := K, count := N} <- maps:get(by_key, Entry)])),
    ?assertMatch(#{count := 140}, Entry),
    ok.

%% 1000 distinct keys with `max_keys => 50': 50 kept, the other 950 calls counted.
-spec key_flood(config()) -> ok.
key_flood(_Config) ->
    Spec = {?CHECKOUT, shell_fun("fun([#{id := Id}]) -> message(Id) end")},
    {ok, S} = ferrotrace:calls(Spec, #{duration => ?LONG, max_keys => 50}),
    run(fun() -> checkouts([{gold, 1000}]) end),
    #{count := 1000, by_key := Keys, keys_overflow := Overflow} = entry(S),
    ?assertEqual(50, length(Keys)),
    ?assertEqual(950, Overflow),
    ?assertEqual(50, lists:sum([N || #{count := N} <- Keys])),
    %% The first 50 keys to arrive are the ones kept (ids count down from 1000).
    ?assertEqual(lists:seq(951, 1000), lists:sort([K || #{key := K} <- Keys])),
    ok.

%% `callers => true': two call sites, and a tail call, whose caller is the function it
%% returns to (here the test's fun): the VM does not keep the tail-calling one.
-spec callers(config()) -> ok.
callers(_Config) ->
    {ok, S} = ferrotrace:calls({?CHECKOUT, 1}, #{duration => ?LONG, callers => true}),
    run(fun() ->
                ok = ft_keys_target:from_web(30),
                ok = ft_keys_target:from_batch(20),
                {ok, _} = ft_keys_target:tail_caller(1)
        end),
    Entry = entry(S),
    ct:pal("~p", [Entry]),
    ?assertNot(maps:is_key(by_key, Entry)),
    Callers = [{caller_name(C), N} || #{caller := C, count := N} <- maps:get(callers, Entry)],
    ?assertEqual([{{ferrotrace_keys_SUITE, '-callers/1-fun-0-', 0}, 1},
                  {{ft_keys_target, from_batch, 1}, 20}, {{ft_keys_target, from_web, 1}, 30}],
                 lists:sort(Callers)),
    [{_, File, Line}] = [{C, F, L} || #{caller := {_, from_web, 1, {F, L}} = C} <- maps:get(callers, Entry)],
    ?assertEqual("ft_keys_target.erl", filename:basename(File)),
    ?assert(is_integer(Line) andalso Line > 0),
    ok.

%% Keys and argument copies together: each call's key and arguments reach it.
-spec keys_with_args(config()) -> ok.
keys_with_args(_Config) ->
    Spec = {?CHECKOUT, by_tier()},
    {ok, S} = ferrotrace:calls(Spec, #{duration => ?LONG, args => true, slowest => 1000}),
    run(fun() -> checkouts([{gold, 40}, {silver, 10}]) end),
    Entry = entry(S),
    ?assertEqual([{gold, 40}, {silver, 10}], lists:sort([{K, N} || #{key := K, count := N} <- maps:get(by_key, Entry)])),
    Kept = ferrotrace:slowest(S, {ft_keys_target, checkout, 1}),
    ?assertEqual(50, length(Kept)),
    [?assertEqual({return, {ok, Id}}, R) || #{args := [#{id := Id}], result := R} <- Kept],
    ?assertEqual(40, length([gold || #{args := [#{tier := gold}]} <- Kept])),
    ok.

%% A raw session with `key => message' and the user's own match spec.
-spec raw_session(config()) -> ok.
raw_session(_Config) ->
    {ok, S} = ferrotrace:session(#{duration => ?LONG, key => message}),
    Self = self(),
    Pid = spawn_link(fun() -> receive go -> checkouts([{gold, 7}, {bronze, 3}]), Self ! done end end),
    MS = [{[#{tier => '$1'}], [], [{message, '$1'}, {exception_trace}]}],
    try
        1 = erlang:trace_pattern({ft_keys_target, checkout, 1}, MS, [local]),
        1 = erlang:trace(Pid, true, [call, {tracer, ferrotrace_tracer, S}]),
        Pid ! go,
        receive done -> ok after 60000 -> error(timeout) end
    after
        erlang:trace_pattern({ft_keys_target, checkout, 1}, false, [local])
    end,
    ok = ferrotrace:stop(S),
    #{calls := [#{by_key := Keys}]} = ferrotrace:summary(S),
    ?assertEqual([{bronze, 3}, {gold, 7}], lists:sort([{K, N} || #{key := K, count := N} <- Keys])),
    ok.

%% Bad input is refused by name.
-spec refused(config()) -> ok.
refused(_Config) ->
    Before = ft_ct:sessions(),
    ?assertMatch({error, {bad_option, {callers, yes, <<"true or false">>}}},
                 ferrotrace:calls({?CHECKOUT, 1}, #{callers => yes})),
    Keyed = {?CHECKOUT, by_tier()},
    {error, {bad_option, {callers, true, Why}}} = ferrotrace:calls(Keyed, #{callers => true}),
    ?assertNotEqual(nomatch, binary:match(Why, <<"message">>)),
    ?assertMatch({error, {bad_option, {key, bogus, <<"none, message or caller">>}}},
                 ferrotrace:calls({?CHECKOUT, 1}, #{key => bogus})),
    ?assertMatch({error, {bad_option, {max_keys, 0, <<"an integer from 1 to 10000">>}}},
                 ferrotrace:calls(Keyed, #{max_keys => 0})),
    ?assertEqual(Before, ft_ct:sessions(), "no session left behind"),
    ok.

%% `report/1' prints the keys under the histogram.
-spec report_lines(config()) -> ok.
report_lines(_Config) ->
    Spec = {?CHECKOUT, by_tier()},
    {ok, S} = ferrotrace:calls(Spec, #{duration => ?LONG}),
    run(fun() -> checkouts([{gold, 3}, {silver, 2}]) end),
    ok = ferrotrace:stop(S),
    {ok, Text} = ft_ct:capture(fun() -> ferrotrace:report(S) end),
    ct:pal("~ts", [Text]),
    ?assertMatch({match, _}, re:run(Text, "by key \\(2 kept\\)")),
    ?assertMatch({match, _}, re:run(Text, "\\n +3 .* gold\\n")),
    ?assertMatch({match, _}, re:run(Text, "\\n +2 .* silver\\n")),
    {ok, S2} = ferrotrace:calls({?CHECKOUT, 1}, #{duration => ?LONG, callers => true}),
    run(fun() -> ft_keys_target:from_web(4) end),
    ok = ferrotrace:stop(S2),
    {ok, Text2} = ft_ct:capture(fun() -> ferrotrace:report(S2) end),
    ct:pal("~ts", [Text2]),
    ?assertMatch({match, _}, re:run(Text2, "callers by total time \\(1 kept\\)")),
    ?assertMatch({match, _}, re:run(Text2, "\\n +4 .* ft_keys_target:from_web/1 \\(line [0-9]+\\)\\n")),
    ok.

%%--------------------------------------------------------------------------------------

%% Runs `Fun' in a process of its own and waits for it.
run(Fun) ->
    {Pid, Ref} = spawn_monitor(Fun),
    receive {'DOWN', Ref, process, Pid, Reason} -> normal = Reason end.

checkouts(Tiers) ->
    _ = [{ok, Id} = ft_keys_target:checkout(#{tier => Tier, id => Id})
         || {Tier, N} <- Tiers, Id <- lists:seq(N, 1, -1)],
    ok.

%% The only call entry, read after the session stopped.
entry(S) ->
    ok = ferrotrace:stop(S),
    #{calls := [Entry]} = ferrotrace:summary(S),
    Entry.

%% The fun an operator types in the shell to key checkouts by tier.
by_tier() ->
    shell_fun("fun([#{tier := T}]) -> message(T) end").

%% A fun as the shell makes it (erl_eval), which ferrotrace turns into a match spec.
shell_fun(Text) ->
    {ok, Tokens, _} = erl_scan:string(Text ++ "."),
    {ok, [Expr]} = erl_parse:parse_exprs(Tokens),
    {value, Fun, _} = erl_eval:expr(Expr, erl_eval:new_bindings()),
    Fun.

caller_name({M, F, A, _Location}) -> {M, F, A};
caller_name(Other) -> Other.
