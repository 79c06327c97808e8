%%% @doc ferrotrace: call latency on a live node, aggregated off the schedulers.
%%%
%%% ferrotrace answers "what is the p99 of this function on this node right now" from a
%%% remote shell, without sending one message per event to a tracer process. Trace events go
%%% to Rust NIF callbacks ({@link ferrotrace_tracer}) that stamp them and queue them in
%%% per-scheduler rings; a collector thread per session pairs calls with returns and keeps an
%%% HDR histogram (3 significant digits) per function. Only summaries come back to Erlang.
%%%
%%% == Quick start (in a remote shell) ==
%%% ```
%%% 1> {ok, S} = ferrotrace:calls({my_mod, '_', '_'}, #{duration => 30000}).
%%% 2> ferrotrace:report(S).      % table: count, mean, p50, p90, p99, p99.9, max; histograms
%%% 3> ferrotrace:stop(S).
%%% '''
%%% or, composed with your own `erlang:trace/3' calls:
%%% ```
%%% 1> {ok, S} = ferrotrace:session(#{}).
%%% 2> erlang:trace_pattern({m, f, '_'}, [{'_', [], [{exception_trace}]}], [local]).
%%% 3> erlang:trace(all, true, [call, {tracer, ferrotrace_tracer, S}]).
%%% 4> ferrotrace:summary(S).
%%% '''
%%%
%%% == Safety ==
%%% Every session is bounded: it stops by itself after `duration' (default 10 s), its rings
%%% hold at most `ring_size' events per scheduler thread (a full ring drops and counts), at
%%% most `max_functions' functions get histograms, and the session stops when the process that
%%% created it (the shell) dies. A stopped session makes the VM unhook the tracer from every
%%% tracee at its next event. Statistics stay readable after `stop/1' until `release/1' or
%%% the owner's death.
%%%
%%% == Options ==
%%% <ul>
%%% <li>`duration => Ms | infinity': stop after this long (default 10000).</li>
%%% <li>`ring_size => N': events buffered per scheduler thread (default 32768; 64..2^24).</li>
%%% <li>`max_functions => N': functions with statistics (default 1000).</li>
%%% <li>`max_open_calls => N': calls awaiting their return, all processes (default 100000).</li>
%%% <li>`max_events => N | infinity': events taken in all (default `infinity'; like
%%% recon_trace's integer limit). Never exceeded, counted across schedulers without a
%%% shared counter per event.</li>
%%% <li>`max_rate => {N, Ms} | infinity': at most N events per window of Ms milliseconds
%%% (default `infinity'; like recon_trace's `{N, Ms}').</li>
%%% <li>`on_limit => stop | drop': at `max_events' or `max_rate', `stop' (default) ends the
%%% session (`stop_reason' `limit'; the VM unhooks every tracee at its next event), `drop'
%%% keeps the session and counts the excess as `limited'.</li>
%%% <li>`slowest => K': the K slowest calls kept per function (default 10; 0 off), see
%%% {@link slowest/2}; `threshold => Ns | infinity': every call slower than Ns kept, up to
%%% `max_slow_calls => N' per function (default 1000), see {@link slow_calls/2}.</li>
%%% <li>`recent => N': the flight recorder keeps the last N events (default 0, off), see
%%% {@link recent/1}.</li>
%%% <li>`args => true | false': copy each call's arguments and each return value or
%%% exception (default `false'), kept only with the calls kept by `slowest', `threshold' or
%%% `recent'; `max_term_bytes => N' bounds one copy (default 1024, 64 to 65536): a larger
%%% term is cut where it stood, `{ferrotrace_truncated, OriginalSize, Partial}'.</li>
%%% <li>`sample => N': keep the events of 1 process in N (by pid hash; default 1, all), so
%%% calls and returns stay paired; the rest are counted as `sampled_out'.</li>
%%% <li>`calls/2' only: `pids => all | new | existing | [pid()]' (default `all'),
%%% `scope => local | global' (default `local': local calls are traced too).</li>
%%% </ul>
%%%
%%% Figures are nanoseconds. A traced call's latency runs from the call event to its
%%% `return_from' or `exception_from' event in the same process. `return_trace' turns off
%%% last-call optimisation for the traced function, so a traced function that tail-calls
%%% another still gets its own return, and its latency includes the callee's.
-module(ferrotrace).

-export([session/1, calls/2, summary/1, histogram/2, report/1, format/1, stop/1, release/1,
         list/0]).
-export([report/2, help/0, watch/1, watch/2]).  % the shell surface, at the end of the file
-export([slowest/2, slow_calls/2]).  % the slow calls kept, after histogram/2
-export([recent/1, print_recent/1]).  % the flight recorder, after slow_calls/2

-type session() :: ferrotrace_tracer:session_id() | atom().
-type mfa_spec() :: {module() | '_', atom() | '_', arity() | '_'}.
-type pid_spec() :: all | new | existing | [pid()].
%% What calls/2 traces; see ferrotrace_spec for the forms.
-type spec() :: mfa_spec() | {module() | '_', atom() | '_', [tuple()] | function()}
              | string() | binary().
-type options() :: #{atom() => term()} | [{atom(), term()}].
-type bucket() :: {LowNs :: non_neg_integer(), HighNs :: non_neg_integer(),
                   Count :: non_neg_integer()}.
-export_type([session/0, spec/0, mfa_spec/0, pid_spec/0, bucket/0, options/0]).

%% Options handled here; the rest go to the engine.
-define(CALL_OPTIONS, [pids, scope]).
-define(SESSION_OPTIONS, [owner, keep, name]).
%% Figures of a session whose owner left stay readable this long (ms).
-define(DEFAULT_KEEP, 600000).

%% @doc Creates a session for raw use as `{tracer, ferrotrace_tracer, Session}' with
%% `erlang:trace/3'; you set the trace patterns (with `return_trace' or `exception_trace'
%% for latencies). The session belongs to the caller (see `owner' in the module doc).
-spec session(options()) -> {ok, ferrotrace_tracer:session_id()} | {error, term()}.
session(Options0) ->
    case options_map(Options0) of
        {ok, Options} -> start(Options, none);
        {error, _} = Error -> Error
    end.

%% @doc Traces calls matching `Spec' with return and exception tracing. `Spec' is an
%% `{M, F, A}' with `` '_' '' wildcards, `{M, F, MatchSpec}' (heads and guards; ferrotrace
%% adds `exception_trace'), `{M, F, Fun}' with a fun typed in the shell (as `dbg:fun2ms/1'),
%% a string like redbug's (`"m:f/2"', `"m:f(X, _) when X > 10"', `"MyApp.Cart.add/2"'),
%% or a list of these (see `ferrotrace_spec'). Calls are aggregated in a new session that
%% belongs to the caller. Tail-recursive loops among the matched functions are counted, not timed (they
%% are listed under `loops' in the summary).
-spec calls(spec() | [spec()], options()) ->
          {ok, ferrotrace_tracer:session_id()} | {error, term()}.
calls(Spec, Options0) ->
    case options_map(Options0) of
        {ok, Options} -> calls_with(Spec, Options);
        {error, _} = Error -> Error
    end.

calls_with(Spec, Options) ->
    case ferrotrace_spec:parse(Spec) of
        {ok, Parsed} ->
            Specs = [{M, F, A} || {M, F, A, _} <- Parsed],
            case check_modules(Specs) of
                ok ->
                    case [S || S = {M, _, _} <- Specs, lists:member(M, ferrotrace_session:own_modules())] of
                        [] -> calls_with(Specs, Parsed, Options);
                        [Own | _] -> {error, {bad_spec, Own, <<"ferrotrace does not trace itself">>}}
                    end;
                {error, _} = Error ->
                    Error
            end;
        {error, _} = Error ->
            Error
    end.

calls_with(Specs, Parsed, Options) ->
    Pids = maps:get(pids, Options, all),
    Scope = maps:get(scope, Options, local),
    case {valid_pids(Pids), lists:member(Scope, [local, global])} of
        {false, _} ->
            {error, {bad_option, {pids, Pids, <<"all, new, existing or a non-empty list of local pids">>}}};
        {_, false} ->
            {error, {bad_option, {scope, Scope, <<"local or global">>}}};
        {true, true} ->
            Tracing = #{specs => Specs, heads => [Heads || {_, _, _, Heads} <- Parsed],
                        pids => Pids, scope => Scope},
            start(maps:without(?CALL_OPTIONS, Options), Tracing)
    end.

%% @doc Statistics so far: `calls' (one map per function, sorted by total time, with `mfa',
%% `count', `returns', `exceptions', `total', `mean', `p50', `p90', `p99', `p999', `max';
%% times in ns, `undefined' before the first return), `loops' (functions counted but not
%% timed, see {@link calls/2}), `events' (`seen', `aggregated', `dropped', `sampled_out',
%% `limited': seen = aggregated + dropped + sampled_out + limited, exactly; `ignored';
%% `args_dropped', copies refused by a full term ring under `args => true'), `pairing'
%% (`open_calls' still awaiting their return, `abandoned_calls', `unmatched_returns', ...),
%% `status' (`running' | `stopped'), `stop_reason' (`user', `duration', `limit',
%% `owner_down', `unload', `error', or `undefined' while running) and `stopped_at' (ms).
%% Each call entry also has `slowest' and `slow_calls_dropped' (see {@link slowest/2}) and
%% `own' (`#{total, mean, p50, p90, p99, p999, max}': own time, the latency less the time in
%% traced callees of the same process).
-spec summary(session()) -> map() | {error, term()}.
summary(Session) ->
    with_id(Session, fun(Id, Info) ->
        case ferrotrace_tracer:session_summary(Id) of
            {ok, Summary = #{calls := Calls}} ->
                ByTotal = fun(#{total := A}, #{total := B}) -> A >= B end,
                Summary#{calls := lists:sort(ByTotal, Calls),
                         name => maps:get(name, Info, undefined),
                         loops => lists:usort(maps:get(loops, Info, []) ++
                                                  maps:get(loops, Summary, []))};
            {error, _} = Error ->
                Error
        end
    end).

%% @doc The latency distribution of one function in power-of-two buckets, ascending.
-spec histogram(session(), mfa()) -> [bucket()] | {error, term()}.
histogram(Session, MFA) ->
    with_id(Session, fun(Id, _) ->
        case ferrotrace_tracer:session_histogram(Id, MFA) of
            {ok, Buckets} -> Buckets;
            {error, _} = Error -> Error
        end
    end).

%% @doc The slowest calls of `MFA' the session kept (`slowest => K' calls per function,
%% default 10), slowest first: maps `#{pid, started_at, duration, result}' with
%% `started_at' in system time (us), `duration' in ns and `result' `return' or `exception'.
%% With `args => true' each also has `args' (the argument list) and `result' is
%% `{return, Value}' or `{exception, Class, Reason}'.
-spec slowest(session(), mfa()) -> [ferrotrace_slow:slow_call()] | {error, term()}.
slowest(Session, MFA) ->
    with_id(Session, fun(Id, _) -> ferrotrace_slow:calls(Id, MFA, slowest) end).

%% @doc The calls of `MFA' slower than the session's `threshold => Ns', in the order they
%% began (at most `max_slow_calls' per function, default 1000; the excess is counted in the
%% call entry's `slow_calls_dropped'); maps as {@link slowest/2}'s.
-spec slow_calls(session(), mfa()) -> [ferrotrace_slow:slow_call()] | {error, term()}.
slow_calls(Session, MFA) ->
    with_id(Session, fun(Id, _) -> ferrotrace_slow:calls(Id, MFA, threshold) end).

%% @doc The last events the session recorded (`recent => N'), oldest first: maps
%% `#{at, pid, mfa, event, duration}' with `at' in system time (us), `event' `call',
%% `return' or `exception', `duration' the paired call's (ns) or `undefined'; with
%% `args => true' a call has `args' and a return or exception `result' (as in
%% {@link slowest/2}).
-spec recent(session()) -> [ferrotrace_recent:event()] | {error, term()}.
recent(Session) ->
    with_id(Session, fun(Id, _) -> ferrotrace_recent:events(Id) end).

%% @doc Prints {@link recent/1}'s events as recon_trace-like lines
%% (`13:55:09.123456 <0.123.0> m:f/1', `... m:f/1 --> return (12.0 ms)').
-spec print_recent(session()) -> ok | {error, term()}.
print_recent(Session) ->
    case recent(Session) of
        {error, _} = Error -> Error;
        Events -> io:put_chars(ferrotrace_recent:lines(Events))
    end.

%% @doc Prints the table sorted by total time and, for the top functions, a histogram drawn
%% like DTrace's `quantize'.
-spec report(session()) -> ok | {error, term()}.
report(Session) ->
    case format(Session) of
        {error, _} = Error -> Error;
        Text -> io:put_chars(Text)
    end.

%% @doc The text that {@link report/1} prints, as a flat binary: for `bin/rel eval', `rpc'
%% and scripts, whose output would otherwise go to the node's console.
-spec format(session()) -> binary() | {error, term()}.
format(Session) ->
    case summary(Session) of
        {error, _} = Error ->
            Error;
        Summary ->
            Text = ferrotrace_report:format(Summary, fun(MFA) -> histogram(Session, MFA) end),
            unicode:characters_to_binary(Text)
    end.

%% @doc Stops the session: tracing ends, the patterns and flags it set are removed. The
%% figures stay readable until {@link release/1}. Stopping a stopped session is `ok'.
-spec stop(session()) -> ok | {error, term()}.
stop(Session) ->
    with_keeper(Session, fun ferrotrace_session:stop/1,
                fun(Id) -> ferrotrace_tracer:stop_session(Id, user) end).

%% @doc Stops the session and frees everything it holds; its id is dead afterwards.
-spec release(session()) -> ok | {error, term()}.
release(Session) ->
    with_keeper(Session, fun ferrotrace_session:release/1,
                fun(Id) -> ferrotrace_tracer:release_session(Id) end).

%% @doc Every session on this node not yet released, oldest first: its `id', `name',
%% `status', `stop_reason', `spec' (what `calls/2' traces, `raw' for {@link session/1}),
%% `owner' (`{shell, GroupLeader}', `{process, Pid}' or `none'), `keeper', `started_at'
%% and, once the owner left, `left_at' (ms).
-spec list() -> [#{id := ferrotrace_tracer:session_id(), status := running | stopped,
                   atom() => term()}].
list() ->
    lists:filtermap(
      fun({Id, Name, Keeper, Info}) ->
              case ferrotrace_tracer:session_summary(Id) of
                  {ok, #{status := Status, stop_reason := Reason}} ->
                      {true, maps:merge(maps:with([spec, owner, started_at, left_at], Info),
                                        #{id => Id, name => Name, status => Status,
                                          stop_reason => Reason, keeper => Keeper})};
                  _ ->
                      false
              end
      end, ferrotrace_registry:sessions()).

%% Internals

%% Options come as a map or, from Elixir (`duration: 1000') and old habits, a proplist.
options_map(Options) when is_map(Options) ->
    {ok, Options};
options_map(Options) when is_list(Options) ->
    case lists:all(fun({K, _}) -> is_atom(K); (_) -> false end, Options) of
        true -> {ok, maps:from_list(lists:reverse(Options))};
        false -> {error, {bad_options, Options, <<"a map or a list of {Key, Value} pairs">>}}
    end;
options_map(Options) ->
    {error, {bad_options, Options, <<"a map or a list of {Key, Value} pairs">>}}.

start(Options, Tracing) ->
    case code:ensure_loaded(ferrotrace_tracer) of
        {module, _} ->
            case settings(Options, Tracing) of
                {ok, Settings} ->
                    ferrotrace_session:start(maps:without(?SESSION_OPTIONS, Options), Tracing,
                                             Settings);
                {error, _} = Error ->
                    Error
            end;
        {error, Reason} ->
            {error, {nif_not_loaded, Reason}}
    end.

%% Who owns the session, how long its figures outlive the owner, its name.
settings(Options, Tracing) ->
    Keep = maps:get(keep, Options, ?DEFAULT_KEEP),
    Name = maps:get(name, Options, undefined),
    Spec = case Tracing of
               none -> raw;
               #{specs := Specs} -> Specs
           end,
    case {owner(maps:get(owner, Options, self()), maps:get(duration, Options, 10000)),
          valid_keep(Keep), is_atom(Name) andalso Name =/= none} of
        {{error, _} = Error, _, _} ->
            Error;
        {_, false, _} ->
            {error, {bad_option, {keep, Keep, <<"milliseconds (a non-negative integer) or infinity">>}}};
        {_, _, false} ->
            {error, {bad_option, {name, Name, <<"an atom naming the session">>}}};
        {{ok, Owner}, true, true} ->
            {ok, #{owner => Owner, keep => Keep, name => Name, spec => Spec}}
    end.

valid_keep(infinity) -> true;
valid_keep(Keep) -> is_integer(Keep) andalso Keep >= 0 andalso Keep =< 7 * 24 * 3600 * 1000.

%% The operator's presence, not a process that happens to run the call: a shell evaluator is
%% restarted after every exception typed in the shell, so a session started from a shell
%% belongs to the shell's group leader, which lives as long as the shell (local, remote over
%% `-remsh' or `remote_console', or IEx) and goes down with its connection.
owner(none, infinity) ->
    {error, {bad_option, {owner, none, <<"owner => none needs a finite duration">>}}};
owner(none, _Duration) ->
    {ok, none};
owner(Pid, _Duration) when is_pid(Pid), node(Pid) =:= node() ->
    case Pid =:= self() andalso shell_evaluator(Pid) of
        true -> {ok, {shell, group_leader()}};
        false -> {ok, {process, Pid}}
    end;
owner(Other, _Duration) ->
    {error, {bad_option, {owner, Other, <<"a local pid, or none (needs a finite duration)">>}}}.

%% The Erlang shell keeps its evaluator's pid under `evaluator' in its dictionary, and is
%% linked to it (shell:start_eval/3, OTP 25 to 29).
shell_evaluator(Pid) ->
    {links, Links} = erlang:process_info(Pid, links),
    lists:any(fun(Shell) when is_pid(Shell), node(Shell) =:= node() ->
                      case erlang:process_info(Shell, dictionary) of
                          {dictionary, Dict} -> lists:member({evaluator, Pid}, Dict);
                          undefined -> false
                      end;
                 (_) -> false
              end, Links).

%% Resolves an id or a name.
with_id(Session, Fun) ->
    case ferrotrace_registry:lookup(Session) of
        {ok, Id, _Keeper, Info} -> Fun(Id, Info);
        error when is_integer(Session) -> Fun(Session, #{});
        error when is_atom(Session) -> {error, {no_such_session, Session}};
        error -> {error, {bad_session, Session}}
    end.

with_keeper(Session, Call, KeeperGone) ->
    case ferrotrace_registry:lookup(Session) of
        {ok, Id, Keeper, _Info} ->
            try Call(Keeper)
            catch exit:{noproc, _} -> KeeperGone(Id);
                  exit:{normal, _} -> KeeperGone(Id)
            end;
        error when is_integer(Session) ->
            %% No keeper (a session from before a registry restart): the engine answers.
            KeeperGone(Session);
        error when is_atom(Session) ->
            {error, {no_such_session, Session}};
        error ->
            {error, {bad_session, Session}}
    end.

%% trace_pattern/3 silently matches nothing in a module that is not loaded: load it first.
check_modules([]) ->
    ok;
check_modules([{'_', _, _} | Rest]) ->
    check_modules(Rest);
check_modules([{M, _, _} | Rest]) ->
    case code:ensure_loaded(M) of
        {module, M} -> check_modules(Rest);
        {error, _} -> {error, {no_such_module, M}}
    end.

valid_pids(Pids) when Pids =:= all; Pids =:= new; Pids =:= existing -> true;
valid_pids([_ | _] = Pids) -> lists:all(fun(P) -> is_pid(P) andalso node(P) =:= node() end, Pids);
valid_pids(_) -> false.

%%--------------------------------------------------------------------------------------
%% The shell surface: reports that fit a terminal, the cheat sheet.


%% @doc Prints the report of `Session' with `Options' (a map or a proplist):
%% `top => N | all' (rows shown, default 20; a line says how many were left out),
%% `sort => count | total | p99 | max' (default `total'), `mfa => Pattern' (only the
%% functions matching an `{M, F, A}' with `` '_' '' wildcards or a spec string such as
%% `"MyApp.Cart"'), `width => Columns' (default the terminal's, else 80) and
%% `histograms => N' (drawn for the first N rows, default 3). Names print as Erlang or
%% Elixir writes them; each time column has one unit, shown in its header.
-spec report(session(), ferrotrace_report:options() | [{atom(), term()}]) ->
          ok | {error, term()}.
report(Session, Options) ->
    case ferrotrace_report:check_options(Options) of
        {ok, _} ->
            case summary(Session) of
                {error, _} = Error ->
                    Error;
                Summary ->
                    Histogram = fun(MFA) -> histogram(Session, MFA) end,
                    io:put_chars(ferrotrace_report:format(Summary, Histogram, Options))
            end;
        {error, _} = Error ->
            Error
    end.

%% @doc Prints a one-screen cheat sheet of the commands, specs and options.
-spec help() -> ok.
help() ->
    io:put_chars(ferrotrace_report:help()).

%% @doc A live view of `Session' (an id or a name) with the default options: see
%% {@link watch/2}.
-spec watch(session()) -> ok | {error, term()}.
watch(Session) ->
    watch(Session, #{}).

%% @doc A live view of `Session' (an id or a name): every `interval' it prints one screen,
%% a header line (session, interval number, local time, the interval's length) and, for the
%% top functions of that interval only, COUNT, RATE/s, P50, P99 and MAX (each time column
%% in one unit, shown in its header). Every line is cut to the width; ASCII only. The
%% first interval begins when `watch' is called, so the first screen covers exactly one
%% interval. `Options' (a map or a proplist):
%% <ul>
%% <li>`interval => Ms': the length of an interval (default 1000; 10 to 3600000);</li>
%% <li>`top => N': functions per screen (default 10); a line says how many were left out;</li>
%% <li>`sort => count | total | p99 | max': the order, largest first (default `count');</li>
%% <li>`count => N | infinity': screens to print (default `infinity');</li>
%% <li>`width => Columns': the width to fit (default `io:columns()', else 80; 40 to 1000).</li>
%% </ul>
%% It returns `ok' when `count' screens were printed, or after a last line saying why when
%% the session stops or is released. To end it earlier, interrupt the shell's job (Ctrl-G,
%% then `i' and `c'); the session itself keeps running. Answers `{error, Reason}' for a
%% session that does not exist, or a bad option, naming it and what is accepted
%% (`{bad_option, {interval, 0, <<"...">>}}'). Reading an interval resets it: two watches
%% of one session split the calls between them.
-spec watch(session(), ferrotrace_report:watch_options() | [{atom(), term()}]) ->
          ok | {error, term()}.
watch(Session, Options) ->
    case ferrotrace_report:check_watch_options(Options) of
        {ok, Checked} ->
            with_id(Session, fun(Id, Info) ->
                Who = #{id => Id, name => maps:get(name, Info, undefined)},
                watch_start(Who, Checked)
            end);
        {error, _} = Error ->
            Error
    end.

watch_start(Who = #{id := Id}, Options = #{interval := Interval}) ->
    %% This read ends whatever interval was open: the first screen covers one interval.
    case ferrotrace_tracer:session_interval(Id) of
        {ok, #{status := stopped, stop_reason := Reason}} ->
            io:put_chars(ferrotrace_report:watch_end(Who, {stopped, Reason}, Options));
        {ok, _} ->
            watch_loop(Who, Options, 1, erlang:monotonic_time(millisecond) + Interval);
        {error, _} = Error ->
            Error
    end.

watch_loop(Who = #{id := Id}, Options = #{interval := Interval, count := Count}, N, Next) ->
    watch_sleep(Next - erlang:monotonic_time(millisecond)),
    case ferrotrace_tracer:session_interval(Id) of
        {ok, Figures = #{status := Status}} ->
            io:put_chars(ferrotrace_report:watch_screen(Who#{number => N}, Figures, Options)),
            case {Status, Count} of
                {stopped, _} ->
                    Why = {stopped, maps:get(stop_reason, Figures, undefined)},
                    io:put_chars(ferrotrace_report:watch_end(Who, Why, Options));
                {running, N} ->
                    ok;
                {running, _} ->
                    %% Ticks keep to the schedule; one that is already past is skipped.
                    Now = erlang:monotonic_time(millisecond),
                    watch_loop(Who, Options, N + 1, max(Next + Interval, Now))
            end;
        {error, {no_such_session, _}} ->
            io:put_chars(ferrotrace_report:watch_end(Who, released, Options));
        {error, _} = Error ->
            Error
    end.

%% Sleeps without taking any message: the caller is often the shell's evaluator.
watch_sleep(Ms) when Ms > 0 ->
    receive after Ms -> ok end;
watch_sleep(_) ->
    ok.
