%%% @doc The fuzz suite's terms (ferrotrace_fuzz_SUITE). They are generated on the runner as
%%% data (`arg/3'), so that a finding can be printed and replayed; `{'$ffz', What}' stands for
%%% a term that only the peer can make, and `resolve/1' makes it there (live pids and
%%% sessions, funs, ports, refs, huge and deep terms) from what the peer published with
%%% `set_live/1'.
-module(ft_fuzz_terms).

-export([arg/3, resolve/1, set_live/1, live_state/0, nest/2]).

%% @doc On the peer: what `resolve/1' makes `{'$ffz', Key}' from (live pids, sessions,
%% histograms).
-spec set_live(map()) -> ok.
set_live(Live) ->
    persistent_term:put({?MODULE, live}, Live).

%% @doc On the peer: what `set_live/1' published.
-spec live_state() -> map().
live_state() ->
    persistent_term:get({?MODULE, live}).

%% @doc Argument `N' of a call of `M:F', as data. Where a function takes a session, half its
%% arguments there are a live one (the raw session, the calls session, their names): the
%% engine's state is fuzzed, not only its checks of the arguments.
-spec arg(module(), atom(), pos_integer()) -> term().
arg(ferrotrace_tracer, F, 2) when F =:= trace; F =:= enabled; F =:= enabled_call;
                                 F =:= enabled_procs ->
    session_arg();
%% trace/5: half the events are shaped as the VM sends them, so that they reach the
%% aggregation with whatever tracee (argument 3) was generated.
arg(ferrotrace_tracer, trace, 3) ->
    %% A few tracees used again and again, so that a call and its return pair up.
    case rand:uniform(2) of
        1 -> term(3);
        2 -> pick([{'$ffz', runner_pid}, {'$ffz', ghost_pid}, {'$ffz', stable_ref},
                   {'$ffz', keeper}, <<"tracee">>, tracee, {'$ffz', port}])
    end;
arg(ferrotrace_tracer, trace, N) ->
    case rand:uniform(2) of
        1 -> term(3);
        2 -> case N of
                 1 -> pick([call, return_from, exception_from, exit, return_to, send,
                            'receive', in, out, gc_major_start, spawn]);
                 2 -> {'$ffz', pick([raw, calls, fuzz_raw, fuzz_calls])};
                 4 -> pick([{lists, seq, [1, 2]}, {ft_test_target, f, [1]}, {lists, seq, 2},
                            {ft_test_target, f, 1}, normal, {x, y}, [1, 2]]);
                 5 -> pick([#{}, #{extra => 1}, #{extra => {error, x}},
                            #{match_spec_result => true}, #{timestamp => 1}])
             end
    end;
arg(ferrotrace_tracer, session_set_call_sample, 2) ->
    case rand:uniform(2) of
        1 -> pick([0, 1, 2, 10, 1000000, 1000001, -1, 1 bsl 64, 2.0]);
        2 -> term(3)
    end;
arg(ferrotrace_tracer, F, 1) ->
    case atom_to_list(F) of
        "session_" ++ _ when F =/= session_set_tracing, F =/= session_set_events -> session_arg();
        _ -> term(3)
    end;
arg(ferrotrace, F, 1) when F =/= stop, F =/= release ->
    session_arg();
arg(_M, _F, _N) ->
    term(3).

session_arg() ->
    case rand:uniform(2) of
        1 -> {'$ffz', pick([raw, calls, fuzz_raw, fuzz_calls, raw, calls])};
        2 -> term(3)
    end.

term(0) ->
    leaf();
term(Size) ->
    case rand:uniform(100) of
        N when N =< 35 -> leaf();
        N when N =< 45 -> [term(Size - 1) || _ <- lists:seq(1, rand:uniform(4) - 1)];
        N when N =< 52 -> list_to_tuple([term(Size - 1) || _ <- lists:seq(1, rand:uniform(4) - 1)]);
        N when N =< 58 -> maps:from_list([{term(Size - 1), term(Size - 1)}
                                          || _ <- lists:seq(1, rand:uniform(3) - 1)]);
        N when N =< 61 -> [term(Size - 1) | term(Size - 1)];
        N when N =< 75 -> live();
        N when N =< 90 -> valid();
        N when N =< 97 -> mutated();
        _ -> heavy()
    end.

pick(List) ->
    lists:nth(rand:uniform(length(List)), List).

leaf() ->
    case rand:uniform(12) of
        1 -> pick([ok, undefined, true, false, '_', '$1', call, return_from, exception_from,
                   exit, send, 'receive', all, new, existing, infinity, local, global, json,
                   hdr_log, collapsed, chrome_trace, slowest, threshold, inclusive, exclusive,
                   user, owner_down, count, total, p99, max, messages, procs, gc, scheduling,
                   ports, nonode@nohost, lists, seq, ft_test_target, f, ferrotrace, fuzz_raw]);
        2 -> pick([duration, ring_size, max_events, max_rate, max_functions, max_open_calls,
                   sample, on_limit, recent, name, keep, owner, pids, scope, also, callers,
                   intervals, max_intervals, args, max_term_bytes, keys, slow, top, sort,
                   width, interval, weight, nodes, port, ip, path, buckets, metrics, follow,
                   children, application, initial_call, via, spawns, first_spawn]);
        3 -> pick([0, 1, -1, 2, 3, 7, 64, 255, 256, 1000, 60000, 16#FFFFFFFF, 16#100000000,
                   1 bsl 63, (1 bsl 64) - 1, 1 bsl 64, -(1 bsl 63), -(1 bsl 64)]);
        4 -> rand:uniform(1 bsl rand:uniform(2000)) * pick([1, -1]);
        5 -> pick([0.0, 1.5, -1.5, 1.0e308, -1.0e308, 5.0e-324, 3.0, 0.5]);
        6 -> rand:uniform(100000) - 50000;
        7 -> crypto_free_bytes(rand:uniform(64) - 1);
        8 -> pick(["lists:seq/2", "lists:seq(A, B) when A > B", "ft_test_target:f/1",
                   "MyApp.Cart.add/2", "lists:_/_", "_:_/_", "lists:seq/300", "a:b(",
                   "", "m:f/-1", <<"lists:seq/2">>, <<"duration">>, "duration", [$a | $b]]);
        9 -> hdr_crafted();
        10 -> pick([[], #{}, {}, <<>>, "", [[]], {{}}]);
        11 -> list_to_atom([$a + rand:uniform(25) || _ <- lists:seq(1, rand:uniform(12))]);
        12 -> pick([list_to_atom(lists:duplicate(255, $x)), {lists, seq, 2}, {ft_test_target, f, 1},
                    {'_', '_', '_'}, {lists, '_', '_'}, {lists, seq, '_'}])
    end.

crypto_free_bytes(N) ->
    << <<(rand:uniform(256) - 1)>> || _ <- lists:seq(1, N) >>.

%% HdrHistogram V2 headers that claim more than they hold.
hdr_crafted() ->
    Cookie = pick([16#1c849304, 16#1c849313, 16#1c849314, 16#1c849303, 16#1c849301]),
    Len = pick([16#FFFFFFFF, 16#7FFFFFFF, 16#10000000, 0, 1, 40]),
    Tail = pick([<<>>, <<1, 2, 3>>, crypto_free_bytes(40), <<0:320>>,
                 <<1:32, 3:32, 1:64, 16#FFFFFFFFFFFF:64, 1.0:64/float>>]),
    <<Cookie:32, Len:32, Tail/binary>>.

live() ->
    {'$ffz', pick([raw, calls, stopped, released, fuzz_raw, fuzz_calls, self, keeper, bystander, null, dead_pid,
                   runner_pid, ghost_pid, port, registry, session_pid, ref, remote_ref,
                   fun0, fun1, fun2, fun3, fun_raise, ext_fun, histogram, summary, recent,
                   raw_id_plus_one])}.

heavy() ->
    {'$ffz', pick([{binary, rand:uniform(10) bsl 20}, {deep_list, 1000}, {deep_list, 400},
                   {deep_tuple, 1000}, {deep_map, 1000}, {long_list, 100000},
                   {long_improper, 100000}, {long_string, 1 bsl 20},
                   {deep_list, rand:uniform(1000)}, {big_map, 100000}])}.

%% Valid values of the API's arguments.
valid() ->
    pick([#{}, #{duration => 60000}, #{ring_size => 1024, max_events => 1000},
          #{recent => 10, args => true}, #{name => fuzz_new}, #{intervals => 1000},
          #{max_rate => {100, 1000}, sample => 0.5, on_limit => stop}, #{top => 5, sort => p99},
          #{interval => 100, count => 1}, #{weight => inclusive}, [{duration, 1000}],
          #{slowest => 3, threshold => 1000, max_slow_calls => 10}, #{aggregators => 2},
          #{callers => true, max_keys => 10}, #{nodes => [nonode@nohost]}, #{key => message},
          #{pids => [{'$ffz', self}]}, #{owner => none},
          %% Scopes (ferrotrace_scope): the peer's own processes, named every way.
          #{pids => kernel_sup}, #{pids => {children, kernel_sup}}, #{pids => {application, kernel}},
          #{pids => {initial_call, {erl_prim_loader, start_it, 4}}}, #{pids => {global, fuzz_name}},
          #{pids => {via, global, fuzz_name}}, #{pids => "<0.0.0>"}, #{pids => [code_server, {children, kernel_sup}]},
          #{pids => kernel_sup, follow => first_spawn}, #{pids => [{'$ffz', self}], follow => spawns},
          {lists, seq, 2}, {ft_test_target, f, 1}, [{lists, seq, 2}],
          {lists, seq, [{['$1', '_'], [{'>', '$1', 1}], []}]}, {json, #{}},
          {collapsed, #{weight => exclusive}}, [procs, messages], [gc], [scheduling],
          {'$ffz', histogram}, {'$ffz', summary}, {'$ffz', recent}]).

%% A valid value with one part changed.
mutated() ->
    case valid() of
        Map when is_map(Map), map_size(Map) > 0 ->
            Key = pick(maps:keys(Map)),
            case rand:uniform(3) of
                1 -> Map#{Key := term(1)};
                2 -> maps:put(term(1), maps:get(Key, Map), maps:remove(Key, Map));
                3 -> Map#{term(1) => term(1)}
            end;
        Tuple when is_tuple(Tuple), tuple_size(Tuple) > 0, element(1, Tuple) =/= '$ffz' ->
            setelement(rand:uniform(tuple_size(Tuple)), Tuple, term(1));
        [_ | _] = List ->
            lists:droplast(List) ++ term(1);
        _ ->
            {'$ffz', {mutated_histogram, rand:uniform(64), rand:uniform(256) - 1}}
    end.

%% @doc On the peer: `Term' with every `{'$ffz', What}' made.
-spec resolve(term()) -> term().
resolve({'$ffz', What}) ->
    make(What);
resolve([H | T]) ->
    [resolve(H) | resolve(T)];
resolve(Tuple) when is_tuple(Tuple) ->
    list_to_tuple(resolve(tuple_to_list(Tuple)));
resolve(Map) when is_map(Map) ->
    maps:from_list([{resolve(K), resolve(V)} || {K, V} <- maps:to_list(Map)]);
resolve(Other) ->
    Other.

make(What) ->
    Live = live_state(),
    case What of
        self -> self();
        session_pid -> case maps:get(session_pids, Live) of [] -> self(); [P | _] -> P end;
        ref -> make_ref();
        remote_ref -> erpc:call(node(maps:get(runner_pid, Live)), erlang, make_ref, []);
        fun0 -> fun() -> ok end;
        fun1 -> fun(X) -> X end;
        fun2 -> fun(_, _) -> [] end;
        fun3 -> fun(_, _, _) -> {error, fuzz} end;
        fun_raise -> fun(_) -> error(fuzz) end;
        ext_fun -> fun lists:seq/2;
        raw_id_plus_one -> maps:get(raw, Live) + 1000;
        histogram -> case maps:get(histograms, Live) of [] -> <<>>; [H | _] -> H end;
        {mutated_histogram, At, Byte} ->
            case maps:get(histograms, Live) of
                [] -> <<>>;
                [H | _] when At < byte_size(H) ->
                    <<Before:At/binary, _, After/binary>> = H,
                    <<Before/binary, Byte, After/binary>>;
                [H | _] -> binary:part(H, 0, byte_size(H) div 2)
            end;
        {binary, Size} -> binary:copy(<<"ferrotrace">>, Size div 10);
        {deep_list, D} -> nest(D, fun(X) -> [X] end);
        {deep_tuple, D} -> nest(D, fun(X) -> {X} end);
        {deep_map, D} -> nest(D, fun(X) -> #{k => X} end);
        {long_list, N} -> lists:seq(1, N);
        {long_improper, N} -> lists:foldl(fun(I, Acc) -> [I | Acc] end, tail, lists:seq(1, N));
        {long_string, N} -> lists:duplicate(N, $d);
        {big_map, N} -> maps:from_list([{I, I} || I <- lists:seq(1, N)]);
        Key when is_atom(Key) -> maps:get(Key, Live, Key);
        Other -> {'$ffz', Other}
    end.

%% @doc A term `D' deep: `Wrap' applied `D' times, from `[]'.
-spec nest(non_neg_integer(), fun((term()) -> term())) -> term().
nest(0, _Wrap) -> [];
nest(D, Wrap) -> Wrap(nest(D - 1, Wrap)).
