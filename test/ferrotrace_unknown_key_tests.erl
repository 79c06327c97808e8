%%% @doc An unknown option key of any size or shape is answered `{error, {unknown_option,
%%% Key, Text}}' at once: the "did you mean" hint is only looked for among keys of a sensible
%%% length (a 1 MB key cost 10 s of the caller's CPU in the edit distance; issue 20, part 2).
%%% No timings are asserted: each call runs in its own process, and only a call that gives no
%%% answer within a generous deadline fails.
-module(ferrotrace_unknown_key_tests).

%% Not eunit.hrl: its generated test/0 has no spec (see ferrotrace_bad_input_tests).
-include_lib("stdlib/include/assert.hrl").

-export([huge_keys_answered_test_/0, odd_keys_answered_test_/0, short_keys_still_hinted_test/0]).

-type tests() :: [{string(), fun(() -> term())}].

-define(F, {ft_test_target, f, 1}).
%% Generous: a loaded CI machine is slow, and a call that does the work answers in 10 s.
-define(DEADLINE, 5000).

-spec huge_keys_answered_test_() -> tests().
huge_keys_answered_test_() ->
    MB = binary:copy(<<"x">>, 1 bsl 20),
    Keys = [{"1 MB binary", MB},
            {"10 MB binary", binary:copy(<<"duration">>, (10 bsl 20) div 8)},
            {"1 MB string", binary_to_list(MB)},
            {"255-character atom", list_to_atom(lists:duplicate(255, $d))},
            {"65-byte binary like an option", <<"duration", (binary:copy(<<"n">>, 57))/binary>>}],
    [{Name ++ " " ++ atom_to_list(Entry), fun() -> unknown_answered(Entry, Key) end}
     || {Name, Key} <- Keys, Entry <- [session, calls]].

-spec odd_keys_answered_test_() -> tests().
odd_keys_answered_test_() ->
    Keys = [{"improper list", [$d, $u | r]}, {"deep list", [[$d], "uration"]},
            {"negative chars", [-1, -2]}, {"tuple", {duration}}, {"pid", self()},
            {"bignum", 1 bsl 200}, {"float", 1.5}, {"empty binary", <<>>}, {"empty list", []}],
    [{Name ++ " " ++ atom_to_list(Entry), fun() -> unknown_answered(Entry, Key) end}
     || {Name, Key} <- Keys, Entry <- [session, calls]].

%% The hint itself still works for the keys it is meant for.
-spec short_keys_still_hinted_test() -> ok.
short_keys_still_hinted_test() ->
    {module, ft_test_target} = code:ensure_loaded(ft_test_target),
    [begin
         {error, {unknown_option, Key, Text}} = ferrotrace:calls(?F, #{Key => 1}),
         ?assertMatch({match, _}, re:run(Text, "^did you mean duration\\? one of "), {Key, Text})
     end || Key <- [duraton, <<"duraton">>, "duraton"]],
    ?assertEqual([], ft_ct:sessions()),
    ok.

unknown_answered(Entry, Key) ->
    {module, ft_test_target} = code:ensure_loaded(ft_test_target),
    Call = case Entry of
               session -> fun() -> ferrotrace:session(#{Key => 1}) end;
               calls -> fun() -> ferrotrace:calls(?F, #{Key => 1}) end
           end,
    {Pid, Ref} = spawn_monitor(fun() -> exit({answer, Call()}) end),
    receive
        {'DOWN', Ref, process, Pid, {answer, Answer}} ->
            %% A key too large to echo is summarised: error reasons never carry a huge term.
            Echoed = case erlang:external_size(Key) > 1024 of
                         true -> {ferrotrace_large_term, erlang:external_size(Key)};
                         false -> Key
                     end,
            ?assertMatch({error, {unknown_option, Echoed, Text}} when is_binary(Text), Answer),
            {error, {unknown_option, _, Text}} = Answer,
            ?assertEqual(nomatch, re:run(Text, "did you mean"), Text);
        {'DOWN', Ref, process, Pid, Other} ->
            error({crashed, Other})
    after ?DEADLINE ->
            exit(Pid, kill),
            error({no_answer_within_ms, ?DEADLINE})
    end,
    ?assertEqual([], ft_ct:sessions()).
