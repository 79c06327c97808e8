%%% @doc What every ferrotrace test suite does around its cases: load the modules a suite
%%% traces, leave nothing traced behind (also after a failed case), start peer nodes with
%%% this node's code, wait for a condition with a deadline, and capture what a function
%%% prints.
%%%
%%% It is also the Common Test hook that does a suite's setup, so that a suite keeps only
%%% what is its own: `suite() -> [{ct_hooks, [{ft_ct, Options}]}]', where `Options' lists
%%% <ul>
%%% <li>the modules the suite traces (atoms): loaded, with the tracer, before every case;
%%% before and after every case, every session is released and their patterns removed;</li>
%%% <li>`{distribution, Name}': the node is made distributed as `Name' for the suite (peer
%%% nodes that the suite reaches by name), unless it already is;</li>
%%% <li>`{export_tools, Cases}': the independent export readers are installed for the suite
%%% (ft_export_tools, `{tools, _}' and `{test_dir, _}' in the config), and the cases listed
%%% are skipped where they could not be installed.</li>
%%% </ul>
%%% After every case the peers it started with `peer/1,2' are stopped.
-module(ft_ct).

-export([load/1, cleanup/1, sessions/0, calibrations_done/0, peer/1, peer/2, code_path/0, poll/2, capture/1, median/1]).
-export([init/2, pre_init_per_suite/3, post_end_per_suite/4, pre_init_per_testcase/4,
         post_end_per_testcase/5]).

-type option() :: module() | {distribution, atom()} | {export_tools, [atom()]}.
-type state() :: #{suite := module() | undefined, modules := [module()],
                   distribution := atom() | none, export_tools := [atom()],
                   started_net := boolean()}.

%% @doc CT hook: the hook's state is what `Options' asks for.
-spec init(term(), [option()]) -> {ok, state()}.
init(_Id, Options) ->
    {ok, #{suite => undefined,
           modules => [M || M <- Options, is_atom(M)],
           distribution => proplists:get_value(distribution, Options, none),
           export_tools => proplists:get_value(export_tools, Options, []),
           started_net => false}}.

%% @doc CT hook: before the suite, its modules loaded, the node distributed and the export
%% readers installed where the options ask for them. Where the node cannot be distributed
%% the suite fails (its cases are skipped). A hook whose suite failed in init_per_suite is
%% not removed by CT (its end_per_suite is skipped): it then does nothing for the suites
%% after it.
-spec pre_init_per_suite(module(), Config, state()) ->
          {Config | {fail, term()}, state()} when Config :: [{atom(), term()}].
pre_init_per_suite(Suite, Config, State = #{suite := undefined}) ->
    pre_init_per_suite(Suite, Config, State#{suite := Suite});
pre_init_per_suite(Suite, Config, State = #{suite := Other}) when Suite =/= Other ->
    {Config, State};
pre_init_per_suite(_Suite, Config, State = #{modules := Modules, distribution := Name}) ->
    ok = load(Modules),
    case Name =/= none andalso node() =:= nonode@nohost andalso start_distribution(Name) of
        {error, Reason} ->
            {{fail, {no_distribution, Name, Reason}}, State};
        Started ->
            Config1 = case State of
                          #{export_tools := [_ | _]} -> ft_export_tools:setup(Config);
                          _ -> Config
                      end,
            {Config1, State#{started_net := Started}}
    end.

%% `true', or `{error, Reason}' (the name is taken: another run of the suite on this host).
start_distribution(Name) ->
    _ = os:cmd("epmd -daemon"),
    case net_kernel:start([Name, shortnames]) of
        {ok, _} -> true;
        {error, _} = Error -> Error
    end.

%% @doc CT hook: the suite leaves nothing traced, and the node as distributed as it found it.
-spec post_end_per_suite(module(), term(), Return, state()) -> {Return, state()}.
post_end_per_suite(Suite, _Config, Return, State = #{suite := Suite, modules := Modules}) ->
    ok = cleanup(Modules),
    _ = [net_kernel:stop() || maps:get(started_net, State)],
    {Return, State#{started_net := false}};
post_end_per_suite(_OtherSuite, _Config, Return, State) ->
    {Return, State}.

%% @doc CT hook: every case starts with its modules loaded (a case may purge one) and
%% nothing traced; a case that needs the export readers is skipped where they are missing.
-spec pre_init_per_testcase(module(), atom(), Config, state()) ->
          {Config | {skip, term()}, state()} when Config :: [{atom(), term()}].
pre_init_per_testcase(Suite, Case, Config, State = #{suite := Suite, modules := Modules}) ->
    ok = load(Modules),
    ok = cleanup(Modules),
    NeedsTools = lists:member(Case, maps:get(export_tools, State)),
    case proplists:get_value(tools, Config) of
        {unavailable, Why} when NeedsTools -> {{skip, {export_tools_unavailable, Why}}, State};
        _ -> {Config, State}
    end;
pre_init_per_testcase(_OtherSuite, _Case, Config, State) ->
    {Config, State}.

%% @doc CT hook: a case leaves no peer node and nothing traced, also when it failed.
-spec post_end_per_testcase(module(), atom(), term(), Return, state()) -> {Return, state()}.
post_end_per_testcase(Suite, _Case, _Config, Return, State = #{suite := Suite, modules := Modules}) ->
    _ = [stop_peer(Peer) || {{ft_ct_peer, Peer}, _} <- get()],
    ok = cleanup(Modules),
    {Return, State};
post_end_per_testcase(_OtherSuite, _Case, _Config, Return, State) ->
    {Return, State}.

%% A peer the case may have stopped already.
stop_peer(Peer) ->
    erase({ft_ct_peer, Peer}),
    try peer:stop(Peer) catch _:_ -> ok end.

%% @doc Loads the tracer module and `Modules' (a trace pattern on an unloaded module
%% matches nothing).
-spec load([module()]) -> ok.
load(Modules) ->
    [{module, M} = code:ensure_loaded(M) || M <- [ferrotrace_tracer | Modules]],
    ok.

%% @doc Releases every session (the listed ones, cluster sessions included, and any the
%% engine holds) and removes every trace pattern on `Modules', every local pattern a
%% `{'_', '_', '_'}' session set, and every process's trace flags.
-spec cleanup([module()]) -> ok.
cleanup(Modules) ->
    _ = calibrations_done(),
    _ = [ferrotrace:release(Id) || #{id := Id} <- ferrotrace:list()],
    [_ = ferrotrace:release(S) || S <- ferrotrace_tracer:sessions()],
    _ = [erlang:trace_pattern({M, '_', '_'}, false, [Scope])
         || M <- Modules, Scope <- [local, global]],
    _ = erlang:trace_pattern({'_', '_', '_'}, false, [local]),
    _ = erlang:trace(all, false, [all]),
    ok.

%% @doc A peer node running this node's code: `peer(Options, this_code)'.
-spec peer(peer:start_options()) -> {ok, pid(), node()}.
peer(Options) ->
    peer(Options, this_code).

%% @doc A peer node (OTP's `peer:start_link/1' with `Options'), with this node's code
%% (ferrotrace and the test modules: `code_path/0' after the options' own `args') or with
%% OTP's alone. It is stopped after the case (by the hook).
-spec peer(peer:start_options(), this_code | otp_only) -> {ok, pid(), node()}.
peer(Options, Code) ->
    Args = maps:get(args, Options, []) ++ [A || this_code =:= Code, A <- code_path()],
    {ok, Peer, Node} = peer:start_link(Options#{args => Args}),
    put({ft_ct_peer, Peer}, Node),
    {ok, Peer, Node}.

%% @doc The `-pa' arguments that give a new node this node's code of the build: ferrotrace
%% and the test modules, not the OTP libraries.
-spec code_path() -> [string()].
code_path() ->
    Build = filename:dirname(filename:dirname(filename:dirname(code:which(ferrotrace)))),
    lists:append([["-pa", P] || P <- code:get_path(), lists:prefix(Build, P)]).

%% @doc The engine's sessions once no calibration is being measured. After a start that
%% found the node's calibration stale or pending, ferrotrace_start measures it anew in
%% the background, each measurement in a throwaway engine session of its own (20 to 200
%% ms, while the measuring process holds the calibration's lock, its registered name): a
%% case comparing the sessions before and after would see it come or go.
-spec sessions() -> [ferrotrace_tracer:session_id()].
sessions() ->
    _ = calibrations_done(),
    ferrotrace_tracer:sessions().

%% @doc `ok' once no process holds the calibration's lock (10 s at most): the measuring
%% process is traced by its throwaway session meanwhile.
-spec calibrations_done() -> ok | {error, timeout}.
calibrations_done() ->
    poll(fun() -> whereis(ferrotrace_calibrate) =:= undefined end, 10000).

%% @doc The median of `Values' (the lower one of an even count): the timing suites judge
%% on medians of rounds, not on one round.
-spec median([number()]) -> number().
median(Values) ->
    lists:nth((length(Values) + 1) div 2, lists:sort(Values)).

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
