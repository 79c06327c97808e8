%%% @doc Activity, the event kinds other than calls: `messages', `procs', `gc', `scheduling', `ports'.
%%%
%%% Which trace flags each kind sets, which combinations the VM cannot take safely, and how
%%% the engine's figures join a session's summary (with pids named at read time, never on
%%% the hot path).
-module(ferrotrace_activity).

-export([check_kinds/1, flags/1, check_safe/2, merge/3, histogram/2, otp_version/0]).

-type kind() :: messages | procs | gc | scheduling | ports.
-type series() :: wakeup | run_slice | lifetime | size_words | {gc, minor | major}
                | {ports, run_slice}.
-export_type([kind/0, series/0]).

%% What to call a process, for the captures' lines too (ferrotrace_capture).
-export([name/1]).

-define(KINDS, [messages, procs, gc, scheduling, ports]).

%% @doc Checks a list of kinds (or one kind): `{ok, Kinds}' (deduplicated) or `{error, {bad_kinds, ...}}'.
-spec check_kinds(term()) -> {ok, [kind()]} | {error, term()}.
check_kinds(Kinds) when is_list(Kinds) ->
    %% An improper list is refused whole (a comprehension over it raises bad_generator).
    case proper_list(Kinds) andalso [K || K <- Kinds, not lists:member(K, ?KINDS)] of
        false -> {error, {bad_kinds, Kinds, <<"a list of messages, procs, gc, scheduling, ports">>}};
        [] -> {ok, lists:usort(Kinds)};
        [First | _] = Bad ->
            {error, {bad_kinds, Bad, ferrotrace_hint:hinted(First, ?KINDS, <<"a list of messages, procs, gc, scheduling, ports">>)}}
    end;
check_kinds(Kind) when is_atom(Kind) ->
    %% One kind alone, as an operator types it: processes(messages, #{}).
    check_kinds([Kind]);
check_kinds(Kinds) ->
    {error, {bad_kinds, Kinds, <<"a list of messages, procs, gc, scheduling, ports">>}}.

proper_list([_ | T]) -> proper_list(T);
proper_list(Tail) -> Tail =:= [].

%% @doc The trace flags of `Kinds' for processes (and, with `ports', for ports), beside a
%% calls session's `call'. With any kind, `procs' too: its exits let the engine forget the
%% calls a process left open when it died (a calls-only session, without `procs', has its
%% keeper look for dead processes instead: ferrotrace_tracer:session_settle_exits/1).
-spec flags([kind()]) -> [atom()].
flags([]) ->
    [];
flags(Kinds) ->
    lists:usort([procs | lists:append([kind_flags(K) || K <- Kinds])]).

kind_flags(messages) -> [send, 'receive'];
kind_flags(procs) -> [procs];
kind_flags(gc) -> [garbage_collection];
kind_flags(scheduling) -> [running];
kind_flags(ports) -> ferrotrace_backend:port_flags().

%% @doc Refuses the kinds this VM cannot trace safely:
%% <ul>
%% <li>`scheduling' (`running') on OTP older than 25.3, where running tracing meets dirty
%%     schedulers in a VM bug fixed in 25.3;</li>
%% <li>`gc' on OTP 27 to 29 while another trace session (another ferrotrace session, or the
%%     legacy session of `erlang:trace/3', dbg, recon) traces garbage collection: two
%%     sessions tracing GC at once is a use-after-free in the VM (erlang/otp#11623).</li>
%% </ul>
%% `Others' are the node's other ferrotrace sessions, oldest first, with the kinds each
%% traces (the keeper reads them from the registry).
-spec check_safe([kind()], [{ferrotrace_tracer:session_id() | pid(), [kind()]}]) -> ok | {error, term()}.
check_safe(Kinds, Others) ->
    Version = otp_version(),
    Running = lists:member(scheduling, Kinds),
    Gc = lists:member(gc, Kinds),
    if
        Running andalso Version < [25, 3] ->
            {error, {unsafe, scheduling,
                     iolist_to_binary(["running tracing can crash OTP ", version_text(Version),
                                       " when dirty schedulers are used (fixed in OTP 25.3)"])}};
        Gc andalso Version >= [27], Version < [30] ->
            case gc_traced_elsewhere(Others) of
                false -> ok;
                Who -> {error, {unsafe, gc,
                                iolist_to_binary(["OTP ", version_text(Version),
                                                  " crashes when two trace sessions trace GC "
                                                  "(erlang/otp#11623); already traced by ",
                                                  io_lib:format("~0tp", [Who])])}}
            end;
        true ->
            ok
    end.

%% Another ferrotrace session with `gc', or any trace session (the legacy one of
%% `erlang:trace/3', dbg, recon, or an OTP 27 session) with `garbage_collection' on a process
%% or on new processes. A session whose flags cannot be read counts as tracing GC.
gc_traced_elsewhere(Others) ->
    case [Other || {Other, Kinds} <- Others, lists:member(gc, Kinds)] of
        [Other | _] ->
            {ferrotrace, Other};
        [] ->
            Traced = [P || P <- [new_processes | erlang:processes()], ferrotrace_backend:traces_gc(P)],
            case Traced of
                [] -> false;
                [P | _] -> {trace_session_on, P}
            end
    end.

%% @doc The running OTP version as a list of integers (`[25, 2, 3]').
-spec otp_version() -> [non_neg_integer()].
otp_version() ->
    Release = erlang:system_info(otp_release),
    File = filename:join([code:root_dir(), "releases", Release, "OTP_VERSION"]),
    Text = case file:read_file(File) of
               {ok, Bin} -> string:trim(binary_to_list(Bin));
               {error, _} -> Release
           end,
    [list_to_integer(N) || N <- string:lexemes(Text, "."), lists:all(fun(C) -> C >= $0 andalso C =< $9 end, N)].

version_text(Version) ->
    lists:join(".", [integer_to_list(N) || N <- Version]).

%% @doc Adds the figures of every kind the session traces to `Summary': the kinds its
%% keeper set (`Info''s `kinds'), or for a raw session the kinds that had events. Each
%% top list entry gets a `name' (see {@link name/1}).
-spec merge(ferrotrace_tracer:session_id(), map(), map()) -> map().
merge(Id, Info, Summary) ->
    case ferrotrace_tracer:session_events(Id) of
        {ok, Events = #{seen := Seen}} ->
            Kinds = case Info of
                        #{kinds := Declared} -> Declared;
                        _ -> Seen
                    end,
            Keys = [{K, key(K)} || K <- ?KINDS, lists:member(K, Kinds)],
            WithKinds = lists:foldl(fun({_, Key}, Acc) -> Acc#{Key => named(maps:get(Key, Events))} end,
                                    Summary, Keys),
            with_migrations(with_splits(WithKinds, maps:get(splits, Events, [])),
                            maps:get(migrations, Events, []));
        {error, _} ->
            Summary
    end.

%% Each call entry with a latency split gets `split => #{running, descheduled, gc}'.
with_splits(Summary = #{calls := Calls}, Splits = [_ | _]) ->
    ByMfa = maps:from_list([{M, maps:remove(mfa, S)} || S = #{mfa := M} <- Splits]),
    Summary#{calls := [case ByMfa of
                           #{M := Split} -> Call#{split => Split};
                           _ -> Call
                       end || Call = #{mfa := M} <- Calls]};
with_splits(Summary, _) ->
    Summary.

%% Each call entry gets `migrations': its calls that returned on another scheduler thread
%% than the one they were called on.
with_migrations(Summary = #{calls := Calls}, Migrations) ->
    ByMfa = maps:from_list(Migrations),
    Summary#{calls := [Call#{migrations => maps:get(M, ByMfa, 0)} || Call = #{mfa := M} <- Calls]};
with_migrations(Summary, _) ->
    Summary.

key(procs) -> processes;
key(Kind) -> Kind.

named(Figures) ->
    maps:map(fun(_, List) when is_list(List) ->
                     [case E of
                          #{pid := Pid} -> E#{name => name(Pid)};
                          _ -> E
                      end || E <- List];
                (_, Value) ->
                     Value
             end, Figures).

%% @doc What to call a process: its registered name, its `proc_lib' label (OTP 27+) or
%% initial call, or the pid itself when it is gone.
-spec name(pid() | port()) -> term().
name(Port) when is_port(Port) ->
    case erlang:port_info(Port, name) of
        {name, Name} -> {port, Name};
        undefined -> Port
    end;
name(Pid) when is_pid(Pid) ->
    case erlang:process_info(Pid, [registered_name, dictionary, initial_call]) of
        undefined ->
            Pid;
        [{registered_name, Name} | _] when is_atom(Name) ->
            Name;
        [_, {dictionary, Dictionary}, {initial_call, Initial}] ->
            case lists:keyfind('$process_label', 1, Dictionary) of
                {_, Label} -> Label;
                false ->
                    case lists:keyfind('$initial_call', 1, Dictionary) of
                        {_, MFA} -> MFA;
                        false -> Initial
                    end
            end
    end;
name(Other) ->
    Other.

%% @doc The buckets of one series: `wakeup', `run_slice', `lifetime', `size_words',
%% `{gc, minor}', `{gc, major}', `{ports, run_slice}'.
-spec histogram(ferrotrace_tracer:session_id(), series()) ->
          [ferrotrace:bucket()] | {error, term()}.
histogram(Id, Series) ->
    case ferrotrace_tracer:session_event_histogram(Id, Series) of
        {ok, Buckets} -> Buckets;
        {error, {bad_series, _}} ->
            {error, {bad_series, Series, <<"an {M, F, A} of a traced function, wakeup, run_slice, "
                                           "lifetime, size_words, {gc, minor}, {gc, major} or "
                                           "{ports, run_slice}">>}};
        {error, _} = Error -> Error
    end.
