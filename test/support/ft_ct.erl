%%% @doc What every ferrotrace test suite does around its cases: load the modules a suite
%%% traces, leave nothing traced behind (also after a failed case), wait for a condition
%%% with a deadline, and capture what a function prints.
%%%
%%% It is also a Common Test hook doing the first two for a suite:
%%% `suite() -> [{ct_hooks, [{ft_ct, [ft_test_target]}]}]' loads the tracer and the listed
%%% modules and cleans up before and after every case.
-module(ft_ct).

-export([load/1, cleanup/1, poll/2, capture/1]).
-export([init/2, pre_init_per_testcase/4, post_end_per_testcase/5,
         post_end_per_suite/4]).

%% @doc CT hook: the hook's state is the list of modules the suite traces.
-spec init(term(), [module()]) -> {ok, [module()]}.
init(_Id, Modules) ->
    {ok, Modules}.

%% @doc CT hook: every case starts with its modules loaded (a case may purge one) and
%% nothing traced.
-spec pre_init_per_testcase(module(), atom(), Config, [module()]) -> {Config, [module()]}.
pre_init_per_testcase(_Suite, _Case, Config, Modules) ->
    ok = load(Modules),
    ok = cleanup(Modules),
    {Config, Modules}.

%% @doc CT hook: a case leaves nothing traced, also when it failed.
-spec post_end_per_testcase(module(), atom(), term(), Return, [module()]) -> {Return, [module()]}.
post_end_per_testcase(_Suite, _Case, _Config, Return, Modules) ->
    ok = cleanup(Modules),
    {Return, Modules}.

%% @doc CT hook: the suite leaves nothing traced.
-spec post_end_per_suite(module(), term(), Return, [module()]) -> {Return, [module()]}.
post_end_per_suite(_Suite, _Config, Return, Modules) ->
    ok = cleanup(Modules),
    {Return, Modules}.

%% @doc Loads the tracer module and `Modules' (a trace pattern on an unloaded module
%% matches nothing).
-spec load([module()]) -> ok.
load(Modules) ->
    [{module, M} = code:ensure_loaded(M) || M <- [ferrotrace_tracer | Modules]],
    ok.

%% @doc Releases every session and removes every trace pattern on `Modules', every local
%% pattern a `{'_', '_', '_'}' session set, and every process's trace flags.
-spec cleanup([module()]) -> ok.
cleanup(Modules) ->
    [_ = ferrotrace:release(S) || S <- ferrotrace_tracer:sessions()],
    _ = [erlang:trace_pattern({M, '_', '_'}, false, [Scope])
         || M <- Modules, Scope <- [local, global]],
    _ = erlang:trace_pattern({'_', '_', '_'}, false, [local]),
    _ = erlang:trace(all, false, [all]),
    ok.

%% @doc `ok' once `Check()' is true, `{error, timeout}' if it is still false after `Ms'
%% milliseconds of wall time. Deadlines are generous: success returns at once, and a loaded
%% CI machine is slow.
-spec poll(fun(() -> boolean()), non_neg_integer()) -> ok | {error, timeout}.
poll(Check, Ms) ->
    poll_until(Check, erlang:monotonic_time(millisecond) + Ms).

poll_until(Check, Deadline) ->
    case Check() of
        true -> ok;
        false ->
            case erlang:monotonic_time(millisecond) >= Deadline of
                true -> {error, timeout};
                false -> timer:sleep(5), poll_until(Check, Deadline)
            end
    end.

%% @doc Runs `Fun' with a group leader that records what it prints: `{Result, Text}'.
-spec capture(fun(() -> Result)) -> {Result, string()}.
capture(Fun) ->
    Old = group_leader(),
    Capture = spawn(fun() -> capture_loop([]) end),
    group_leader(Capture, self()),
    Result = try Fun() after group_leader(Old, self()) end,
    Capture ! {get, self()},
    receive {captured, Capture, Text} -> {Result, Text}
    after 5000 -> error(capture_timeout)
    end.

capture_loop(Acc) ->
    receive
        {io_request, From, ReplyAs, Request} ->
            {Reply, Text} = io_reply(Request),
            From ! {io_reply, ReplyAs, Reply},
            capture_loop([Text | Acc]);
        {get, From} ->
            From ! {captured, self(), unicode:characters_to_list(lists:reverse(Acc))}
    end.

io_reply({put_chars, unicode, Chars}) -> {ok, Chars};
io_reply({put_chars, latin1, Chars}) -> {ok, unicode:characters_to_list(iolist_to_binary(Chars), latin1)};
io_reply({put_chars, Chars}) -> io_reply({put_chars, latin1, Chars});
io_reply({put_chars, Enc, M, F, A}) -> io_reply({put_chars, Enc, apply(M, F, A)});
io_reply({put_chars, M, F, A}) -> io_reply({put_chars, latin1, M, F, A});
io_reply({get_geometry, _}) -> {{error, enotsup}, []};
%% A pager's question (OTP 27's c:h/2 pages long docs: 'more (y/n)? (y)'): Enter, go on.
io_reply({get_line, _Encoding, _Prompt}) -> {"\n", []};
io_reply({get_line, _Prompt}) -> {"\n", []};
io_reply(getopts) -> {[{encoding, unicode}], []};
io_reply({requests, Rs}) ->
    lists:foldl(fun(R, {_, Acc}) -> {Reply, Text} = io_reply(R), {Reply, [Acc, Text]} end,
                {ok, []}, Rs);
io_reply(_Other) -> {{error, enotsup}, []}.
