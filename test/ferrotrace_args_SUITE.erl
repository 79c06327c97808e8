%%% @doc `args => true': the kept calls carry copies of their arguments and results, bounded
%%% by `max_term_bytes' and marked where cut; copies of calls not kept never reach Erlang.
-module(ferrotrace_args_SUITE).

-include("support/ft_ct.hrl").

-export([kept_calls_carry_args/1, exceptions_carry_class_and_reason/1, large_args_are_cut/1,
         small_terms_round_trip/1, markers/1, off_by_default/1, recorder_lines/1,
         bad_options/1]).

-define(WORK, {ft_args_target, work, 2}).
-define(FAIL, {ft_args_target, fail, 1}).
-define(TAKE, {ft_args_target, take, 1}).
-define(LONG, 120000).
-define(MS, 1000000).

suite() ->
    [{ct_hooks, [{ft_ct, [ft_args_target]}]}].

all() ->
    [kept_calls_carry_args, exceptions_carry_class_and_reason, large_args_are_cut,
     small_terms_round_trip, markers, off_by_default, recorder_lines, bad_options].

%% Runs `Fun' in a process of its own and waits for it; the process's pid.
in_process(Fun) ->
    {Pid, Ref} = spawn_monitor(fun() -> catch Fun() end),
    receive {'DOWN', Ref, process, Pid, _} -> Pid after ?LONG -> error(timeout) end.

%%--------------------------------------------------------------------------------------

%% 20 calls of work/2, each in its own process with its own tag; `slowest => 3'. Every kept
%% call carries exactly the arguments its process passed and the value it returned (the
%% ground truth is the caller's), and lasted at least its sleep.
-spec kept_calls_carry_args(config()) -> ok.
kept_calls_carry_args(_Config) ->
    Sleeps = lists:duplicate(17, 1) ++ [60, 80, 100],
    {ok, S} = ferrotrace:calls(?WORK, #{duration => ?LONG, slowest => 3, threshold => 50 * ?MS,
                                        args => true}),
    Truth = maps:from_list(
              [begin
                   Tag = #{n => N, name => <<"call">>, list => [N, {x, 1.5}]},
                   {in_process(fun() -> ft_args_target:work(Ms, Tag) end), {Ms, Tag}}
               end || {N, Ms} <- lists:zip(lists:seq(1, 20), Sleeps)]),
    ok = ferrotrace:stop(S),
    Kept = ferrotrace:slowest(S, ?WORK),
    ct:pal("kept: ~p", [Kept]),
    ?assertEqual(3, length(Kept)),
    [begin
         {Ms, Tag} = maps:get(Pid, Truth),
         ?assertEqual([Ms, Tag], Args),
         ?assertEqual({return, {done, Ms, Tag}}, Result),
         ?assert(D >= Ms * ?MS)
     end || #{pid := Pid, args := Args, result := Result, duration := D} <- Kept],
    %% Over the threshold: the three long calls at least, same shape.
    Over = ferrotrace:slow_calls(S, ?WORK),
    ?assert(length(Over) >= 3),
    [?assertEqual([element(1, maps:get(Pid, Truth)), element(2, maps:get(Pid, Truth))], Args)
     || #{pid := Pid, args := Args} <- Over],
    ok.

-spec exceptions_carry_class_and_reason(config()) -> ok.
exceptions_carry_class_and_reason(_Config) ->
    {ok, S} = ferrotrace:calls(?FAIL, #{duration => ?LONG, slowest => 2, args => true}),
    Pids = [{in_process(fun() -> ft_args_target:fail(Ms) end), Ms} || Ms <- [1, 2, 3]],
    ok = ferrotrace:stop(S),
    Kept = ferrotrace:slowest(S, ?FAIL),
    ?assertEqual(2, length(Kept)),
    [begin
         Ms = proplists:get_value(Pid, Pids),
         ?assertEqual([Ms], Args),
         ?assertEqual({exception, error, {args_fail, Ms}}, Result)
     end || #{pid := Pid, args := Args, result := Result} <- Kept],
    %% The report prints the kept calls' results with their values (cut to its width).
    Text = unicode:characters_to_list(ferrotrace:format(S)),
    ct:pal("report:~n~ts", [Text]),
    ?assertNotEqual(nomatch, string:find(Text, "exception error:{args_")),
    ok.

%% A 10 MB binary, a million-element list and a tuple nested 100000 deep: each copy is cut
%% and marked, small (bounded by max_term_bytes), and the node stays responsive.
-spec large_args_are_cut(config()) -> ok.
large_args_are_cut(_Config) ->
    Big = binary:copy(<<"0123456789">>, 1024 * 1024),
    Long = lists:seq(1, 1000000),
    Deep = lists:foldl(fun(_, Acc) -> {Acc} end, leaf, lists:seq(1, 100000)),
    {ok, S} = ferrotrace:calls(?TAKE, #{duration => ?LONG, slowest => 10, args => true}),
    Pids = [{in_process(fun() -> ft_args_target:take(T) end), Which}
            || {T, Which} <- [{Big, big}, {Long, long}, {Deep, deep}, {{Big, small}, pair}]],
    %% Responsive: another process answers at once.
    Echo = spawn(fun() -> receive {From, ping} -> From ! pong end end),
    Echo ! {self(), ping},
    receive pong -> ok after ?LONG -> error(unresponsive) end,
    ok = ferrotrace:stop(S),
    Kept = ferrotrace:slowest(S, ?TAKE),
    ?assertEqual(4, length(Kept)),
    ByWhich = maps:from_list([{proplists:get_value(Pid, Pids), Args} || #{pid := Pid, args := Args} <- Kept]),
    ct:pal("copies: ~P", [ByWhich, 20]),
    %% Each copy is small: bounded by max_term_bytes (1024 bytes, as a term here).
    [?assert(erts_debug:flat_size(Args) < 1024, {Which, erts_debug:flat_size(Args)})
     || {Which, Args} <- maps:to_list(ByWhich)],
    [{ferrotrace_truncated, 10485760, Prefix}] = maps:get(big, ByWhich),
    ?assert(byte_size(Prefix) > 100 andalso byte_size(Prefix) < 1024),
    ?assertEqual(binary:part(Big, 0, byte_size(Prefix)), Prefix),
    [{ferrotrace_truncated, Bound, Partial}] = maps:get(long, ByWhich),
    ?assert(length(Partial) > 10),
    ?assertEqual(lists:seq(1, length(Partial)), Partial),
    ?assertEqual(length(Partial) + 1, Bound),
    [DeepCopy] = maps:get(deep, ByWhich),
    ?assertEqual({ferrotrace_truncated, 1, {}}, innermost(DeepCopy, 0)),
    %% A cut element inside a tuple: the tuple keeps its other element.
    [{{ferrotrace_truncated, 10485760, _}, small}] = maps:get(pair, ByWhich),
    ok.

%% Containers nest 48 deep at most, the argument list being the first.
innermost({ferrotrace_truncated, _, _} = Marker, Depth) ->
    ?assertEqual(47, Depth),
    Marker;
innermost({Inner}, Depth) ->
    innermost(Inner, Depth + 1).

%% Arbitrary small terms come back exactly (what `binary_to_term(term_to_binary(T))' gives).
-spec small_terms_round_trip(config()) -> ok.
small_terms_round_trip(_Config) ->
    rand:seed(exsss, {1, 2, 3}),
    Fixed = [[], {}, #{}, <<>>, 0, -1, 1 bsl 59, -(1 bsl 63), (1 bsl 64) - 1, 1.5, -0.0, 'é',
             self(), make_ref(), [a | b], [1, 2 | <<"x">>], "a string", #{[1] => {2}},
             maps:from_list([{K, K} || K <- lists:seq(1, 40)]), erlang:list_to_pid("<0.1.0>"),
             hd(erlang:ports())],
    Random = [random_term(4) || _ <- lists:seq(1, 500)],
    [?assertEqual(binary_to_term(term_to_binary(T)), ferrotrace_tracer:copy_term(T, 65536), T)
     || T <- Fixed ++ Random],
    ok.

random_term(0) ->
    random_leaf();
random_term(Depth) ->
    case rand:uniform(6) of
        1 -> [random_term(Depth - 1) || _ <- lists:seq(1, rand:uniform(5))];
        2 -> list_to_tuple([random_term(Depth - 1) || _ <- lists:seq(1, rand:uniform(5) - 1)]);
        3 -> maps:from_list([{random_term(Depth - 1), random_term(Depth - 1)} || _ <- lists:seq(1, rand:uniform(4) - 1)]);
        4 -> [random_term(Depth - 1) | random_leaf()];
        _ -> random_leaf()
    end.

random_leaf() ->
    case rand:uniform(8) of
        1 -> list_to_atom("a" ++ integer_to_list(rand:uniform(50)));
        2 -> rand:uniform(1 bsl 62) - (1 bsl 61);
        3 -> rand:uniform(1000);
        4 -> rand:uniform() * 1.0e10;
        5 -> crypto_free_bytes(rand:uniform(100) - 1);
        6 -> self();
        7 -> make_ref();
        8 -> []
    end.

crypto_free_bytes(N) -> list_to_binary([rand:uniform(256) - 1 || _ <- lists:seq(1, N)]).

%% What is not copied is marked; a copy never exceeds its bound.
-spec markers(config()) -> ok.
markers(_Config) ->
    ?assertEqual({ferrotrace_opaque, 'fun'}, ferrotrace_tracer:copy_term(fun() -> ok end, 1024)),
    ?assertEqual({ferrotrace_opaque, bignum}, ferrotrace_tracer:copy_term(1 bsl 70, 1024)),
    ?assertEqual({ferrotrace_opaque, bitstring}, ferrotrace_tracer:copy_term(<<1:3>>, 1024)),
    {ferrotrace_truncated, 20, T} = ferrotrace_tracer:copy_term(list_to_tuple(lists:seq(1, 20)), 64),
    ?assert(tuple_size(T) > 0 andalso tuple_size(T) < 20),
    ?assertEqual(lists:seq(1, tuple_size(T)), tuple_to_list(T)),
    ok.

%% Without `args', kept calls are as before: no `args', `result' an atom.
-spec off_by_default(config()) -> ok.
off_by_default(_Config) ->
    {ok, S} = ferrotrace:calls(?WORK, #{duration => ?LONG, slowest => 2}),
    _ = in_process(fun() -> ft_args_target:work(1, x) end),
    ok = ferrotrace:stop(S),
    [#{result := return} = Call] = ferrotrace:slowest(S, ?WORK),
    ?assertNot(is_map_key(args, Call)),
    #{events := #{args_dropped := 0}} = ferrotrace:summary(S),
    ok.

%% The flight recorder prints recon_trace-like lines with the arguments and results.
-spec recorder_lines(config()) -> ok.
recorder_lines(_Config) ->
    {ok, S} = ferrotrace:calls([?WORK, ?FAIL], #{duration => ?LONG, recent => 4, args => true}),
    _ = in_process(fun() -> ft_args_target:work(1, #{k => "v"}) end),
    _ = in_process(fun() -> ft_args_target:fail(1) end),
    ok = ferrotrace:stop(S),
    Lines = string:split(lists:flatten(io_lib:format("~ts", [ferrotrace_recent:lines(ferrotrace:recent(S))])),
                         "\n", all),
    ct:pal("~p", [Lines]),
    [Call, Return, Fail, Raised, ""] = Lines,
    Time = "[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6} <[0-9.]+> ",
    match(Call, Time ++ "ft_args_target:work\\(1, #\\{k => \"v\"\\}\\)$"),
    match(Return, Time ++ "ft_args_target:work/2 --> \\{done,1,#\\{k => \"v\"\\}\\} \\(.+\\)$"),
    match(Fail, Time ++ "ft_args_target:fail\\(1\\)$"),
    match(Raised, Time ++ "ft_args_target:fail/1 --> error:\\{args_fail,1\\} \\(.+\\)$"),
    ok.

match(Line, Re) ->
    ?assertEqual(match, re:run(Line, Re, [{capture, none}]), {Line, Re}).

-spec bad_options(config()) -> ok.
bad_options(_Config) ->
    {error, _} = ferrotrace:calls(?WORK, #{args => yes}),
    {error, _} = ferrotrace:calls(?WORK, #{max_term_bytes => 10}),
    [] = ft_ct:sessions(),
    ok.
