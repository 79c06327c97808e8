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
%%% == Example ==
%%% A remote shell into the demo shop of `make demo', three seconds of its checkouts (the
%%% histogram's empty rows cut here):
%%% ```
%%% 1> {ok, S} = ferrotrace:calls("shop_api:checkout/1", #{duration => 3000}).
%%% 2> ferrotrace:report(S).
%%% ferrotrace session 114908862090244288: stopped (duration) after 3.0 s
%%% events: 6669 seen, 6669 aggregated, 0 dropped (ring full), 0 sampled out,
%%%         0 over a limit
%%% pairing: 6 calls still open, 0 abandoned, 0 returns without a call
%%%
%%% FUNCTION             COUNT  EXC  P50 us  P99 us  P99.9 us  MAX us  TOTAL ms
%%% shop_api:checkout/1   3337  140    3772   14098     55673   56590     14943
%%%
%%%   shop_api:checkout/1  latency
%%%        value  ------------- Distribution ------------- count
%%%      4.10 us |                                         11
%%%      8.19 us |                                         15
%%%      16.4 us |                                         9
%%%      32.8 us |                                         3
%%%      65.5 us |                                         20
%%%       131 us |                                         18
%%%       262 us |                                         20
%%%       524 us |                                         19
%%%      1.05 ms |@@@@@@@@@@                                    441
%%%      2.10 ms |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@                       1492
%%%      4.19 ms |@@@@@@@@@@@@@@@@@@@@@@@@@@                            1117
%%%      8.39 ms |@@@@                                       133
%%%      16.8 ms |                                         0
%%%      33.6 ms |                                         33
%%%
%%%   slowest calls (3 of 10 kept)
%%%     56.6 ms  16:22:51.169633  <0.90.0>                 return
%%%     56.2 ms  16:22:52.911842  <0.89.0>                 return
%%%     55.9 ms  16:22:52.241281  <0.92.0>                 return
%%% '''
%%% The 6 open calls were in flight when the session stopped; {@link slowest/2} gives the
%%% kept calls as maps.
%%%
%%% == Structure ==
%%% An event travels: the traced process's scheduler calls {@link ferrotrace_tracer}'s NIF
%%% callbacks (`enabled*' may answer `discard' for a sampled-out process; `trace/5' stamps
%%% the event, applies the limits and pushes it into the scheduler's own ring) -> the
%%% session's collector thread drains the rings every millisecond, orders the events by time
%%% and pairs calls with returns per process -> histograms, counters and kept calls, read
%%% by this module. The Erlang side:
%%% <ul>
%%% <li>`ferrotrace' (here): sessions by id or name, summaries, reports, exports;</li>
%%% <li>`ferrotrace_spec' reads specs (`"m:f/2"', funs, match specs),
%%% `ferrotrace_options' options;</li>
%%% <li>`ferrotrace_session': the keeper of one session, a process that sets its trace
%%% patterns and flags, clears them when the session stops, and stops the session when its
%%% owner (the shell) goes; `ferrotrace_registry' maps names and ids to keepers;</li>
%%% <li>`ferrotrace_report', `ferrotrace_slow', `ferrotrace_events_report': text;
%%% `ferrotrace_export': files for other tools; `ferrotrace_cluster': one session on several
%%% nodes.</li>
%%% </ul>
%%%
%%% == Safety ==
%%% Every session is bounded: it stops by itself after `duration' (default 10 s), its rings
%%% hold at most `ring_size' events per scheduler thread (a full ring drops and counts), at
%%% most `max_functions' functions get histograms, and the session stops when the process that
%%% created it (the shell) dies. A stopped session makes the VM unhook the tracer from every
%%% tracee at its next event. Statistics stay readable after `stop/1' until `release/1' or
%%% the owner's death.
%%%
%%% == Dangers ==
%%% What the bounds above do not cover:
%%% <ul>
%%% <li>The VM's own work per traced event is paid by the traced process, whatever the
%%% tracer: about 0.37 us per event on the 2-core machine `make bench' ran on, to which
%%% ferrotrace adds about 0.07 us; a traced call with its return costs about 0.9 us. A broad spec
%%% (`` {'_', '_', '_'} '', a whole application) on a busy node slows every call it matches;
%%% narrow the spec, or bound the cost with `sample => N' (decided before the VM builds
%%% the event) or `max_rate'.</li>
%%% <li>Return tracing turns off last-call optimisation for the traced functions. Server
%%% loops found in the spec are traced without it (counted, not timed, see `loops' in the
%%% summary), and a function found nested 4,096 deep is switched to counting; until then a
%%% deep tail recursion keeps one frame per call.</li>
%%% <li>On OTP 25 a process has one tracer: a session refuses processes that `dbg',
%%% `recon_trace' or another session already trace (`{error, {already_traced, ...}}').</li>
%%% <li>`args => true' and keys copy terms on the traced process's scheduler, up to
%%% `max_term_bytes' each: a large argument costs its copy on every call.</li>
%%% <li>Memory: 32 bytes x `ring_size' per scheduler thread that produced an event (1 MiB
%%% each by default), two to three times that again with `args' or keys; `duration => infinity'
%%% keeps it until `stop/1'.</li>
%%% </ul>
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
%%% <li>`intervals => Ms': keep each function's histogram per `Ms' (at least 10) for
%%% {@link export/2}'s `{hdr_log, #{interval => Ms}}'; at most `max_intervals' (default
%%% 600), then neighbours merge and the interval doubles (see `ferrotrace_intervals').</li>
%%% <li>`args => true | false': copy each call's arguments and each return value or
%%% exception (default `false'), kept only with the calls kept by `slowest', `threshold' or
%%% `recent'; `max_term_bytes => N' bounds one copy (default 1024, 64 to 65536): a larger
%%% term is cut where it stood, `{ferrotrace_truncated, OriginalSize, Partial}'.</li>
%%% <li>Keys, like DTrace's `@[key] = quantize(...)': a spec whose match spec sets
%%% `{message, Key}' (`{shop_api, checkout, fun([#{tier := T}]) -> message(T) end}') gets a
%%% histogram per key in its call entry's `by_key'; `calls/2' only: `callers => true' keys
%%% each call by its caller (`callers'); `max_keys => N' bounds the keys kept over the
%%% session (default 1000, 1 to 10000; the calls past it counted in `keys_overflow');
%%% `key => message' turns keys on for a raw session (see `ferrotrace_keys').</li>
%%% <li>`aggregators => N | auto': split aggregation by pid over N threads (default
%%% `auto': one per four CPUs, at least one; 1 to 16). One thread pairs and aggregates about
%%% 13 to 20 M events/s, fewer than sixteen busy schedulers make; each process's events
%%% still reach one aggregator in order, and reads merge them. The caps (`max_functions',
%%% `max_open_calls', `max_keys') hold per aggregator. The summary says how many.</li>
%%% <li>`sample => N': keep the events of 1 process in N (by pid hash; default 1, all), so
%%% calls and returns stay paired; the rest are counted as `sampled_out'.</li>
%%% <li>`calls/2' only: `pids => all | new | existing | [pid()]' (default `all'),
%%% `scope => local | global' (default `local': local calls are traced too).</li>
%%% <li>`calls/2' only: `nodes => [Node]' (default the local node only): one session on
%%% each node through `erpc', read as one; answers `{ok, Cluster}' (a pid that every
%%% function here takes like a session id) or `{error, {node, Node, Reason}}' with no
%%% session left behind. Counts add and HDR histograms are added, so percentiles are
%%% those of all the calls; see {@link ferrotrace_cluster}. `name => Atom' names it as it
%%% names a local session (the same names; {@link list/0} shows it on this node).</li>
%%% </ul>
%%%
%%% Figures are nanoseconds. A traced call's latency runs from the call event to its
%%% `return_from' or `exception_from' event in the same process. `return_trace' turns off
%%% last-call optimisation for the traced function, so a traced function that tail-calls
%%% another still gets its own return, and its latency includes the callee's.
-module(ferrotrace).

-export([processes/2]).
-export([session/1, calls/2, summary/1, histogram/2, report/1, format/1, stop/1, release/1,
         list/0]).
-export([report/2, help/0, watch/1, watch/2]).  % the shell surface, at the end of the file
-export([slowest/2, slow_calls/2]).  % the slow calls kept, after histogram/2
-export([recent/1, print_recent/1]).  % the flight recorder, after slow_calls/2
-export([export/2, export/3]).  % exports and cluster sessions, at the end of the file

-type session() :: ferrotrace_tracer:session_id() | atom().
%% A session: its id (what session/1 and calls/2 answer) or its name (`name => Atom').
-type mfa_spec() :: {module() | '_', atom() | '_', arity() | '_'}.
%% A function, or several with `` '_' '' for any module, name or arity.
-type pid_spec() :: all | new | existing | [pid()].
%% The processes calls/2 traces: all, those spawned from now on, those alive now, or a list.
-type spec() :: mfa_spec() | {module() | '_', atom() | '_', [tuple()] | function()}
              | string() | binary().
%% What calls/2 traces; see ferrotrace_spec for the forms.
-type options() :: #{duration => pos_integer() | infinity,
                     ring_size => pos_integer(),
                     max_functions => pos_integer(),
                     max_open_calls => pos_integer(),
                     max_events => pos_integer() | infinity,
                     max_rate => {pos_integer(), pos_integer()} | infinity,
                     on_limit => stop | drop,
                     sample => pos_integer(),
                     slowest => non_neg_integer(),
                     threshold => non_neg_integer() | infinity,
                     max_slow_calls => pos_integer(),
                     recent => non_neg_integer(),
                     intervals => pos_integer(),
                     max_intervals => pos_integer(),
                     args => boolean(),
                     max_term_bytes => pos_integer(),
                     key => none | message | caller,
                     max_keys => pos_integer(),
                     aggregators => pos_integer() | auto,
                     name => atom(),
                     owner => pid() | none,
                     keep => non_neg_integer() | infinity,
                     pids => pid_spec(),
                     scope => local | global,
                     also => [ferrotrace_events:kind()],
                     callers => boolean(),
                     nodes => [node()]}
                 | [{atom(), term()}].
%% The options of session/1, calls/2 and processes/2 (see the module doc's "Options"); a list of
%% `{Name, Value}' pairs is taken too. An option that is not one of these, or a value out of
%% its range, is answered `{error, {unknown_option, ...}}' or `{error, {bad_option, ...}}'.
%% `pids', `scope', `also', `callers' and `nodes' are for calls/2 only.
-type bucket() :: {LowNs :: non_neg_integer(), HighNs :: non_neg_integer(),
                   Count :: non_neg_integer()}.
%% A histogram bucket: how many values fell in LowNs..HighNs (power-of-two bounds).
-type time() :: non_neg_integer() | undefined.
%% A time in ns; `undefined' for a figure of no call yet.
-type call_summary() :: #{mfa := mfa(),
                          count := non_neg_integer(),
                          returns := non_neg_integer(),
                          exceptions := non_neg_integer(),
                          total := non_neg_integer(),
                          mean := time(), p50 := time(), p90 := time(), p99 := time(),
                          p999 := time(), max := time(),
                          own => #{atom() => time()},
                          migrations => non_neg_integer(),
                          max_frames => non_neg_integer(),
                          slowest => [ferrotrace_slow:slow_call()],
                          slow_calls_dropped => non_neg_integer(),
                          by_key => [#{atom() => term()}],
                          callers => [#{atom() => term()}],
                          keys_overflow => non_neg_integer(),
                          split => #{running | descheduled | gc => #{atom() => time()}}}.
%% One traced function in summary/1: counts, the latency (total and percentiles, ns), and
%% what the session's options add (see summary/1).
-type summary() :: #{id := ferrotrace_tracer:session_id() | pid(),
                     name := atom(),
                     status := running | stopped,
                     stop_reason := user | duration | limit | owner_down | unload | error | undefined,
                     started_at := integer(),
                     stopped_at := integer() | undefined,
                     elapsed_ms := non_neg_integer(),
                     calls := [call_summary()],
                     loops := [mfa()],
                     displaced => displacement(),
                     events := #{seen := non_neg_integer(), aggregated := non_neg_integer(),
                                 dropped := non_neg_integer(), sampled_out := non_neg_integer(),
                                 limited := non_neg_integer(), ignored := non_neg_integer(),
                                 args_dropped := non_neg_integer(),
                                 frames_refused := non_neg_integer()},
                     pairing := #{atom() => non_neg_integer()},
                     memory := #{ring_bytes := non_neg_integer(), term_rings := non_neg_integer(),
                                 collector := non_neg_integer(), processes := non_neg_integer(),
                                 open_frames := non_neg_integer(),
                                 frame_copies := non_neg_integer(),
                                 histograms := non_neg_integer(), intervals := non_neg_integer(),
                                 slow_calls := non_neg_integer(), keys := non_neg_integer(),
                                 recent := non_neg_integer(), tables := non_neg_integer(),
                                 merge := non_neg_integer(), frame_table := non_neg_integer(),
                                 total := non_neg_integer(), functions := non_neg_integer(),
                                 ring_alloc_failures := non_neg_integer()},
                     backlog := #{ring_peak := non_neg_integer(), ring_size := pos_integer(),
                                  longest_gap_us := non_neg_integer()},
                     stacks := #{paths := non_neg_integer(), overflow := non_neg_integer(),
                                 too_deep := non_neg_integer()},
                     collector_cpu_ns := non_neg_integer(),
                     aggregators := pos_integer(),
                     messages => map(), scheduling => map(), gc => map(), processes => map(),
                     ports => map(),
                     nodes => [node()], nodes_down => [node()], by_node => #{node() => summary()}}.
%% What summary/1 answers; its doc describes every key.
%% Another tool took over some of a session's processes or functions (OTP 25 and 26), see
%% summary/1.
-type displacement() :: #{at := integer(), processes := non_neg_integer(),
                          functions := [mfa()], by := [term()], new_processes => true}.
-export_type([session/0, spec/0, mfa_spec/0, pid_spec/0, bucket/0, options/0, summary/0,
              call_summary/0, time/0, displacement/0]).

%% Options handled here; the rest go to the engine.
-define(CALL_OPTIONS, [pids, scope, also, callers]).
-define(SESSION_OPTIONS, [owner, keep, name, intervals, max_intervals]).
%% Figures of a session whose owner left stay readable this long (ms).
-define(DEFAULT_KEEP, 600000).
%% The longest option key given a "did you mean" hint (option names are a few letters long).
-define(HINT_MAX_KEY, 64).

%% @doc Creates a session for raw use as `{tracer, ferrotrace_tracer, Session}' with
%% `erlang:trace/3'; you set the trace patterns (with `return_trace' or `exception_trace'
%% for latencies). The session belongs to the caller (see `owner' in {@link calls/2}); an
%% `owner' that is already gone is refused, `{error, {owner_down, Pid}}' (as by calls/2).
%% `Options' are those of {@link calls/2} (`h(ferrotrace, calls).' lists them with their
%% defaults) but `pids', `scope', `also', `callers' and `nodes', which say what calls/2
%% traces; here you set the patterns and flags. A raw session takes `key => message' to
%% keep a histogram per `{message, Key}' that your own match specs set (see
%% `ferrotrace_keys'). A raw session whose user sets `send', `` 'receive' '', `procs',
%% `garbage_collection', `running', `ports' or `running_ports' gets the figures of
%% {@link processes/2}.
-spec session(options()) -> {ok, ferrotrace_tracer:session_id()} | {error, term()}.
session(Options0) ->
    explain(case options_map(Options0) of
                {ok, Options} -> start(Options, none);
                {error, _} = Error -> Error
            end, ?SESSION_OPTIONS).

%% @doc Traces calls matching `Spec' with return and exception tracing. `Spec' is an
%% `{M, F, A}' with `` '_' '' wildcards, `{M, F, MatchSpec}' (heads and guards; ferrotrace
%% adds `exception_trace'), `{M, F, Fun}' with a fun typed in the shell (as `dbg:fun2ms/1'),
%% a string like redbug's (`"m:f/2"', `"m:f(X, _) when X > 10"', `"MyApp.Cart.add/2"'),
%% or a list of these (see `ferrotrace_spec'). Calls are aggregated in a new session that
%% belongs to the caller. Tail-recursive loops among the matched functions are counted, not timed (they
%% are listed under `loops' in the summary).
%%
%% `Options', a map or a list of `{Name, Value}' pairs; every one has a default:
%% <ul>
%% <li>`duration => Ms | infinity': the session stops by itself after this long (default
%% 10000; at most one week; `infinity' must be asked for).</li>
%% <li>`ring_size => N': events buffered per scheduler thread (default 32768; 64 to 2^24);
%% a full ring drops the event and counts it (`dropped'), the scheduler never waits.</li>
%% <li>`max_functions => N': functions that get statistics (default 1000); the events of
%% others are counted as `untracked_events'.</li>
%% <li>`max_open_calls => N': calls awaiting their return, over all processes (default
%% 100000).</li>
%% <li>`max_events => N | infinity': events taken in all (default `infinity'; like
%% recon_trace's integer limit). `max_rate => {N, Ms} | infinity': at most N events per
%% window of Ms milliseconds (default `infinity'; like recon_trace's `{N, Ms}').
%% `on_limit => stop | drop': at either limit, `stop' (default) ends the session
%% (its `stop_reason' is `limit'), `drop' keeps it and counts the excess as `limited'.</li>
%% <li>`sample => N': keep the events of 1 process in N (by pid hash; default 1, all), so
%% calls and returns stay paired; the rest are counted as `sampled_out'.</li>
%% <li>`pids => all | new | existing | [pid()]': the processes to trace (default `all');
%% `scope => local | global': `local' (default) traces local calls too.</li>
%% <li>`owner => pid() | none': who the session belongs to (default the caller; in a shell,
%% the shell's group leader, so the session outlives a crashed evaluator and stops when
%% the shell is left); `none' needs a finite `duration'. `keep => Ms | infinity': how long
%% the figures outlive the owner (default 600000). `name => atom()': a name accepted
%% wherever a session id is (default none).</li>
%% <li>`slowest => K': the K slowest calls kept per function (default 10; 0 off), see
%% {@link slowest/2}; `threshold => Ns | infinity': every call slower than Ns kept (default
%% `infinity', off), up to `max_slow_calls => N' per function (default 1000), see
%% {@link slow_calls/2}; `recent => N': the flight recorder keeps the last N events
%% (default 0, off), see {@link recent/1}.</li>
%% <li>`args => true | false': copy each call's arguments and each return value or
%% exception (default `false'), kept only with the calls kept by `slowest', `threshold' or
%% `recent'; `max_term_bytes => N' bounds one copy (default 1024, 64 to 65536): a larger
%% term is cut where it stood and marked `{ferrotrace_truncated, OriginalSize, Partial}'.</li>
%% <li>`callers => true | false': key each call by its caller (default `false'); a match
%% spec that sets `{message, Key}' keys calls by `Key' in any case. `max_keys => N' bounds
%% the keys kept over the session (default 1000, 1 to 10000; calls past it counted in
%% `keys_overflow').</li>
%% <li>`also => [Kind]': trace these kinds of {@link processes/2} too (`messages', `procs',
%% `gc', `scheduling', `ports'; default none).</li>
%% <li>`intervals => Ms': keep each function's histogram per `Ms' (at least 10; default
%% off) for {@link export/2}'s `{hdr_log, #{interval => Ms}}'; at most `max_intervals'
%% (default 600), then neighbours merge and the interval doubles.</li>
%% <li>`aggregators => N | auto': split aggregation by pid over N threads (1 to 16; default
%% `auto', one per four CPUs, at least one); the caps (`max_functions', `max_open_calls',
%% `max_keys') hold per aggregator; the summary's `aggregators' says how many.</li>
%% <li>`nodes => [Node]': one session on each node through `erpc', read as one (default the
%% local node only); answers `{ok, Cluster}', a pid every function here takes like a
%% session id, see {@link ferrotrace_cluster}.</li>
%% </ul>
%% A bad option, spec or session gives `{error, Reason}' naming it, e.g.
%% `{error, {bad_option, {ring_size, 3, <<"an integer from 64 to 16777216">>}}}'; an
%% unknown option is answered with those that exist and the nearest one.
-spec calls(spec() | [spec()], options()) ->
          {ok, ferrotrace_tracer:session_id()} | {error, term()}.
calls(Spec, Options0) ->
    explain(case options_map(Options0) of
                {ok, #{nodes := _} = Options} -> cluster_calls(Spec, Options);
                {ok, Options} -> calls_with(Spec, Options);
                {error, _} = Error -> Error
            end, [nodes | ?CALL_OPTIONS ++ ?SESSION_OPTIONS]).

%% An unknown option is answered with every option the entry takes (the engine's and the
%% entry's own), and the nearest one when the key looks like a typo of it.
explain({error, {unknown_option, Key, Engine}}, Own) when is_list(Engine) ->
    Names = lists:usort(Own ++ Engine),
    Accepted = lists:join(", ", [atom_to_list(N) || N <- Names]),
    Hint = case nearest(Key, Names) of
               none -> "";
               Name -> ["; did you mean ", atom_to_list(Name), "?"]
           end,
    {error, {unknown_option, Key, iolist_to_binary(["one of ", Accepted, Hint])}};
explain(Result, _Own) ->
    Result.

%% Only a key of a sensible length gets a hint: the distance costs its length times each
%% name's, and a key is whatever the caller passed (a 1 MB binary took 10 s here). Longer
%% keys, lists that are not flat strings (improper, deep, not characters) and other terms
%% are answered without one.
nearest(Key, Names) when is_atom(Key) ->
    nearest_short(atom_to_list(Key), Names);
nearest(Key, Names) when is_binary(Key), byte_size(Key) =< ?HINT_MAX_KEY ->
    nearest_short(binary_to_list(Key), Names);
nearest(Key, Names) when is_list(Key) ->
    case short_string(Key, ?HINT_MAX_KEY) of
        true -> nearest_short(Key, Names);
        false -> none
    end;
nearest(_Key, _Names) ->
    none.

nearest_short(Key, _Names) when length(Key) > ?HINT_MAX_KEY ->
    none;
nearest_short(Key, Names) ->
    case lists:sort([{distance(Key, atom_to_list(N)), N} || N <- Names]) of
        [{D, Name} | _] when D =< 2 -> Name;
        _ -> none
    end.

%% A proper list of at most `Left' characters, looked at no further than that.
short_string([], _Left) -> true;
short_string(_List, 0) -> false;
short_string([C | Rest], Left) when is_integer(C), C >= 0 -> short_string(Rest, Left - 1);
short_string(_Other, _Left) -> false.

%% Levenshtein distance, for option names (a few letters long).
distance(A, B) ->
    First = lists:seq(0, length(B)),
    {Last, _} = lists:foldl(fun(CharA, {Prev, I}) -> {distance_row(CharA, B, Prev, [I]), I + 1} end,
                            {First, 1}, A),
    lists:last(Last).

distance_row(_CharA, [], _Prev, Acc) ->
    lists:reverse(Acc);
distance_row(CharA, [CharB | B], [Diag, Up | Prev], [Left | _] = Acc) ->
    Cost = case CharA =:= CharB of true -> 0; false -> 1 end,
    distance_row(CharA, B, [Up | Prev], [min(min(Left, Up) + 1, Diag + Cost) | Acc]).

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
    case {valid_pids(Pids), lists:member(Scope, [local, global]),
          also_kinds(maps:get(also, Options, []), Pids)} of
        {false, _, _} ->
            {error, {bad_option, {pids, Pids, <<"all, new, existing or a non-empty list of local pids">>}}};
        {_, false, _} ->
            {error, {bad_option, {scope, Scope, <<"local or global">>}}};
        {_, _, {error, _} = Error} ->
            Error;
        {true, true, {ok, Kinds}} ->
            case ferrotrace_keys:heads([Heads || {_, _, _, Heads} <- Parsed], Options) of
                {ok, Heads, KeyOptions} ->
                    Tracing = #{specs => Specs, heads => Heads, pids => Pids, scope => Scope},
                    start(maps:merge(maps:without(?CALL_OPTIONS, Options), KeyOptions),
                          with_kinds(Tracing, Kinds));
                {error, _} = Error ->
                    Error
            end
    end.

with_kinds(Tracing, []) -> Tracing;
with_kinds(Tracing, Kinds) -> Tracing#{kinds => Kinds}.

%% The kinds of `also' (or of processes/2): known kinds; `ports' only with pids that
%% include ports (all, new, existing).
also_kinds(Kinds0, Pids) ->
    case ferrotrace_events:check_kinds(Kinds0) of
        {ok, Kinds} ->
            case lists:member(ports, Kinds) andalso is_list(Pids) of
                true -> {error, {bad_option, {pids, Pids, <<"all, new or existing with the ports kind">>}}};
                false -> {ok, Kinds}
            end;
        {error, {bad_kinds, _, Accepted}} ->
            {error, {bad_option, {also, Kinds0, Accepted}}}
    end.

%% @doc Traces processes rather than functions: `Kinds' is a non-empty list of `messages'
%% (send and receive), `procs' (spawn, exit, link, register), `gc' (garbage collections),
%% `scheduling' (processes scheduled in and out) and `ports' (ports opened, closed, run).
%% The figures appear in {@link summary/1} under `messages', `processes', `gc',
%% `scheduling' and `ports'. Options as {@link calls/2} (`pids', `duration', limits, ...).
%% Kinds this VM cannot trace safely are refused with `{error, {unsafe, Kind, Why}}'.
%% To trace calls and processes in one session, use `calls/2' with `#{also => Kinds}'.
-spec processes(Kinds :: [ferrotrace_events:kind()], Options :: options()) ->
          {ok, ferrotrace_tracer:session_id()} | {error, term()}.
processes(Kinds, Options0) ->
    case options_map(Options0) of
        {ok, Options} ->
            Pids = maps:get(pids, Options, all),
            case {valid_pids(Pids), ferrotrace_events:check_kinds(Kinds)} of
                {false, _} ->
                    {error, {bad_option, {pids, Pids, <<"all, new, existing or a non-empty list of local pids">>}}};
                {_, {error, _} = Error} ->
                    Error;
                {true, {ok, []}} ->
                    {error, {bad_kinds, [], <<"a list of messages, procs, gc, scheduling, ports">>}};
                {true, {ok, _}} ->
                    case also_kinds(Kinds, Pids) of
                        {ok, Checked} ->
                            Tracing = #{specs => [], heads => [], pids => Pids, scope => local,
                                        kinds => Checked},
                            start(maps:without(?CALL_OPTIONS, Options), Tracing);
                        {error, {bad_option, {pids, _, _}}} = Error ->
                            Error
                    end
            end;
        {error, _} = Error ->
            Error
    end.

%% @doc Statistics so far: `calls' (one map per function, sorted by total time, with `mfa',
%% `count', `returns', `exceptions', `total', `mean', `p50', `p90', `p99', `p999', `max';
%% times in ns, `undefined' before the first return; `mean' is exact, `total' over the
%% latencies recorded; the percentiles are HDR's, to 3 significant digits), `loops' (functions counted but not
%% timed, see {@link calls/2}), `events' (`seen', `aggregated', `dropped', `sampled_out',
%% `limited': seen = aggregated + dropped + sampled_out + limited, exactly; `ignored';
%% `args_dropped', copies (arguments, results, keys) refused by a full term ring;
%% `frames_refused', calls refused on the scheduler because their process had 120
%% return-trace frames of the session open: no event, no frame), `pairing'
%% (`open_calls' still awaiting their return, `abandoned_calls', `unmatched_returns', ...),
%% `status' (`running' | `stopped'), `stop_reason' (`user', `duration', `limit',
%% `owner_down', `unload', `error', or `undefined' while running) and `stopped_at' (ms);
%% `backlog' (`ring_peak', the most events one scheduler's ring held when the collector
%% drained it, of `ring_size'; `longest_gap_us', the longest time between two drains while
%% the session ran: a ring that fills in less than that gap drops, see `report/1');
%% `stacks' (`paths' kept for the `collapsed' export, returned calls not kept: `overflow'
%% past 10,000 paths, `too_deep' past 64 frames).
%% `memory' is what the session holds, in bytes, by part, and their `total':
%% `ring_bytes' (event rings, one per scheduler thread that traced: exact), `term_rings'
%% (with `args' or `key': the term rings, their buffers and the copies drained from them),
%% `collector' (events drained and not yet folded in, batches for aggregator threads),
%% `processes' (the process table), `open_frames' (the open calls' frames, capacity times
%% frame size) and `frame_copies' (the argument and key copies they hold), `histograms'
%% (each function's latency and own-time histograms, split and per-key ones, the other
%% event kinds'), `intervals' (each function's interval histogram), `slow_calls' (kept slow
%% calls with their copies), `keys' (key tables and key copies), `recent' (the recorder),
%% `tables' (functions, call paths, top-N tables, the session's records), `merge' (with
%% `aggregators' > 1, the merge kept between reads) and `frame_table' (the slot's frame
%% table, allocated once per slot and kept for the next session); `functions' (a count)
%% and `ring_alloc_failures' (threads whose ring could not be allocated). Rings and copies
%% are exact but for malloc's rounding; hash maps are estimated from their capacity and a
%% histogram from its counts (8 bytes a value); freed memory that the allocator keeps is
%% not counted. A stopped session has freed its rings, term rings, collector buffers,
%% process table and open frames (those parts are 0): its `total' is its figures alone,
%% and `pairing''s `open_calls' and `processes' keep their values at the stop (the frames
%% are freed, the calls not counted as abandoned).
%% Each call entry also has `slowest' and `slow_calls_dropped' (see {@link slowest/2}),
%% `own' (`#{total, mean, p50, p90, p99, p999, max}': own time, the latency less the time in
%% traced callees of the same process), `migrations' (calls that returned on another
%% scheduler thread than the one they were called on) and `max_frames' (the most
%% return-trace frames of the session its process had open at one of its calls: calls past
%% 120 are refused, see `frames_refused'; for a loop found while it ran, how deep it got
%% before it was traced count-only). With keys, it has
%% `by_key => [#{key, count, total, mean, p50, p90, p99, p999, max}]' (or `callers', with
%% `caller' for `key'), most total time first, and `keys_overflow' (see `ferrotrace_keys').
%% Sessions that trace other kinds (processes/2, `also', or a raw session's own flags) add
%% `messages', `scheduling', `gc', `processes' and `ports' (see the README, "Tracing
%% processes"), and call entries gain `split => #{running, descheduled, gc}' when
%% scheduling is traced with the calls. A cluster session (a pid, see `nodes') merges its
%% nodes' figures.
%% `displaced' is there only once another tool took over on OTP 25 or 26 (one tracer per
%% process, one match spec per function): `#{at, processes, functions, by}', `at' when it
%% was first noticed (ms; the keeper checks every 500 ms, bounded per round), `processes'
%% how many live processes it found under another tracer, `functions' those whose match spec
%% was replaced or removed, `by' the other tracers (a pid, `{Module, State}'; `[]' when only
%% functions were seen: the VM does not say who set a pattern), and `new_processes => true'
%% when new processes go to the other tracer. Such a session's counts miss what was taken,
%% and its stop leaves the other tool's tracer and match specs in place. Never on OTP 27+,
%% where sessions coexist.
-spec summary(session() | pid()) -> summary() | {error, term()}.
summary(Name) when is_atom(Name) ->
    with_name(Name, fun summary/1);
summary(Cluster) when is_pid(Cluster) ->
    ferrotrace_cluster:summary(Cluster);
summary(Session) ->
    with_id(Session, fun(Id, Info) ->
        case ferrotrace_tracer:session_summary(Id) of
            {ok, Summary = #{calls := Calls}} ->
                ByTotal = fun(#{total := A}, #{total := B}) -> A >= B end,
                %% `displaced' (OTP 25 and 26): what the keeper's checks found, absent if none.
                Merged = maps:merge(Summary, maps:with([displaced], Info)),
                ferrotrace_events:merge(Id, Info,
                    Merged#{calls := lists:sort(ByTotal, Calls),
                            stacks => stack_counts(Id),
                            name => maps:get(name, Info, undefined),
                            loops => lists:usort(maps:get(loops, Info, []) ++
                                                     maps:get(loops, Summary, []))});
            {error, _} = Error ->
                Error
        end
    end).

%% @doc The latency distribution of one function in power-of-two buckets, ascending; or
%% of another series: `wakeup', `run_slice', `lifetime', `size_words' (words, not ns),
%% `{gc, minor}', `{gc, major}', `{ports, run_slice}'.
-spec histogram(session() | pid(), mfa() | ferrotrace_events:series()) -> [bucket()] | {error, term()}.
histogram(Name, MFA) when is_atom(Name) ->
    with_name(Name, fun(S) -> histogram(S, MFA) end);
histogram(Cluster, MFA) when is_pid(Cluster) ->
    ferrotrace_cluster:histogram(Cluster, MFA);
histogram(Session, Series) when Series =:= wakeup; Series =:= run_slice; Series =:= lifetime;
                                Series =:= size_words; Series =:= {gc, minor};
                                Series =:= {gc, major}; Series =:= {ports, run_slice} ->
    with_id(Session, fun(Id, _) -> ferrotrace_events:histogram(Id, Series) end);
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
%% A cluster session's are every node's, slowest first.
-spec slowest(session() | pid(), mfa()) -> [ferrotrace_slow:slow_call()] | {error, term()}.
slowest(Name, MFA) when is_atom(Name) ->
    with_name(Name, fun(S) -> slowest(S, MFA) end);
slowest(Cluster, MFA) when is_pid(Cluster) ->
    ferrotrace_cluster:slow_calls(Cluster, MFA, slowest);
slowest(Session, MFA) ->
    with_id(Session, fun(Id, _) -> ferrotrace_slow:calls(Id, MFA, slowest) end).

%% @doc The calls of `MFA' slower than the session's `threshold => Ns', in the order they
%% began (at most `max_slow_calls' per function, default 1000; the excess is counted in the
%% call entry's `slow_calls_dropped'); maps as {@link slowest/2}'s.
%% A cluster session's are every node's, in the order they began.
-spec slow_calls(session() | pid(), mfa()) -> [ferrotrace_slow:slow_call()] | {error, term()}.
slow_calls(Name, MFA) when is_atom(Name) ->
    with_name(Name, fun(S) -> slow_calls(S, MFA) end);
slow_calls(Cluster, MFA) when is_pid(Cluster) ->
    ferrotrace_cluster:slow_calls(Cluster, MFA, threshold);
slow_calls(Session, MFA) ->
    with_id(Session, fun(Id, _) -> ferrotrace_slow:calls(Id, MFA, threshold) end).

%% @doc The last events the session recorded (`recent => N'), oldest first: maps
%% `#{at, pid, mfa, event, duration}' with `at' in system time (us), `event' `call',
%% `return' or `exception', `duration' the paired call's (ns) or `undefined'; with
%% `args => true' a call has `args' and a return or exception `result' (as in
%% {@link slowest/2}).
%% A cluster session's are every node's recorded events, merged in time order (each node
%% keeps its own last N).
-spec recent(session() | pid()) -> [ferrotrace_recent:event()] | {error, term()}.
recent(Name) when is_atom(Name) ->
    with_name(Name, fun recent/1);
recent(Cluster) when is_pid(Cluster) ->
    ferrotrace_cluster:recent(Cluster);
recent(Session) ->
    with_id(Session, fun(Id, _) -> ferrotrace_recent:events(Id) end).

%% @doc Prints {@link recent/1}'s events as recon_trace-like lines
%% (`13:55:09.123456 <0.123.0> m:f/1', `... m:f/1 --> return (12.0 ms)').
-spec print_recent(session() | pid()) -> ok | {error, term()}.
print_recent(Session) ->
    case recent(Session) of
        {error, _} = Error -> Error;
        Events -> io:put_chars(ferrotrace_recent:lines(Events))
    end.

%% @doc Prints the table sorted by total time and, for the top functions, a histogram drawn
%% like DTrace's `quantize'.
-spec report(session() | pid()) -> ok | {error, term()}.
report(Session) ->
    case format(Session) of
        {error, _} = Error -> Error;
        Text -> io:put_chars(Text)
    end.

%% @doc The text that {@link report/1} prints, as a flat binary: for `bin/rel eval', `rpc'
%% and scripts, whose output would otherwise go to the node's console.
-spec format(session() | pid()) -> binary() | {error, term()}.
format(Name) when is_atom(Name) ->
    with_name(Name, fun format/1);
format(Cluster) when is_pid(Cluster) ->
    case ferrotrace_cluster:format(Cluster, #{}) of
        {error, _} = Error -> Error;
        Text -> unicode:characters_to_binary(Text)
    end;
format(Session) ->
    case summary(Session) of
        {error, _} = Error ->
            Error;
        Summary ->
            Text = ferrotrace_report:format(Summary, fun(MFA) -> histogram(Session, MFA) end),
            Events = ferrotrace_events_report:format(Summary, fun(S) -> histogram(Session, S) end),
            unicode:characters_to_binary([Text, Events])
    end.

%% @doc Stops the session: tracing ends, the patterns and flags it set are removed. The
%% figures stay readable until {@link release/1}. Stopping a stopped session is `ok'.
%% Never an exit: a session whose keeper was killed or released it meanwhile answers
%% `{error, {no_such_session, Id}}' once what it set is removed.
-spec stop(session() | pid()) -> ok | {error, term()}.
stop(Name) when is_atom(Name) ->
    with_name(Name, fun stop/1);
stop(Cluster) when is_pid(Cluster) ->
    ferrotrace_cluster:stop(Cluster);
stop(Session) ->
    with_keeper(Session, fun ferrotrace_session:stop/1,
                fun(Id) -> ferrotrace_tracer:stop_session(Id, user) end).

%% @doc Stops the session and frees everything it holds; its id is dead afterwards.
%% Never an exit: as {@link stop/1}, `{error, {no_such_session, Id}}' for a session that
%% another client released meanwhile.
-spec release(session() | pid()) -> ok | {error, term()}.
release(Name) when is_atom(Name) ->
    with_name(Name, fun release/1);
release(Cluster) when is_pid(Cluster) ->
    ferrotrace_cluster:release(Cluster);
release(Session) ->
    with_keeper(Session, fun ferrotrace_session:release/1,
                fun(Id) -> ferrotrace_tracer:release_session(Id) end).

%% @doc Every session on this node not yet released, oldest first: its `id', `name',
%% `status', `stop_reason', `spec' (what `calls/2' traces, `raw' for {@link session/1}),
%% `owner' (`{shell, GroupLeader}', `{process, Pid}' or `none'), `keeper', `started_at'
%% and, once the owner left, `left_at' (ms). A cluster session (see `nodes' in
%% {@link calls/2}) is listed on the node that started it: its `id' and `keeper' are its pid,
%% with `nodes' and `nodes_down'.
-spec list() -> [#{id := ferrotrace_tracer:session_id() | pid(), status := running | stopped,
                   atom() => term()}].
list() ->
    lists:filtermap(
      fun({Cluster, Name, _, Info}) when is_pid(Cluster) ->
              case ferrotrace_cluster:status(Cluster) of
                  {ok, Status} ->
                      {true, maps:merge(maps:with([spec, owner, started_at], Info),
                                        Status#{id => Cluster, name => Name, keeper => Cluster})};
                  {error, _} ->
                      false
              end;
         ({Id, Name, Keeper, Info}) ->
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
options_map(Options) ->
    ferrotrace_options:to_map(Options).

start(Options, Tracing) ->
    %% Not code:load_file/1, and one load at a time: see ferrotrace_code.
    case ferrotrace_code:ensure_tracer() of
        {module, _} ->
            case {settings(Options, Tracing), ferrotrace_intervals:check(Options)} of
                {{ok, Settings}, {ok, Intervals}} ->
                    Started = ferrotrace_session:start(maps:without(?SESSION_OPTIONS, Options),
                                                       Tracing, Settings),
                    with_intervals(Started, Intervals);
                {{error, _} = Error, _} ->
                    Error;
                {_, {error, _} = Error} ->
                    Error
            end;
        {error, Reason} ->
            {error, {nif_not_loaded, Reason}}
    end.

%% `intervals => Ms': per-interval histograms for hdr_log (ferrotrace_intervals), taken
%% until the keeper ends.
with_intervals({ok, Id}, {_, _} = Intervals) ->
    case ferrotrace_registry:lookup(Id) of
        {ok, Id, Keeper, _} ->
            case ferrotrace_intervals:start(Id, Keeper, Intervals) of
                Pid when is_pid(Pid) -> ok = ferrotrace_registry:update(Id, #{intervals => Pid});
                {error, _} -> ok
            end;
        error ->
            ok
    end,
    {ok, Id};
with_intervals(Started, _) ->
    Started.

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

%% A name stands for its session: a local session's id, or a cluster session's pid.
with_name(Name, Fun) ->
    case ferrotrace_registry:lookup(Name) of
        {ok, IdOrCluster, _Keeper, _Info} -> Fun(IdOrCluster);
        error -> {error, {no_such_session, Name}}
    end.

%% Resolves an id or a name.
with_id(Session, Fun) ->
    case ferrotrace_registry:lookup(Session) of
        {ok, Id, _Keeper, Info} -> Fun(Id, Info);
        error when is_integer(Session) -> Fun(Session, #{});
        error when is_atom(Session) -> {error, {no_such_session, Session}};
        error -> {error, {bad_session, ferrotrace_registry:brief(Session)}}
    end.

%% A keeper that died during the call (killed, or it ended as another client released the
%% session) is no answer: what it left is cleaned up now (ferrotrace_registry:reap/1), then
%% the engine answers for the session.
with_keeper(Session, Call, KeeperGone) ->
    case ferrotrace_registry:lookup(Session) of
        {ok, Id, Keeper, _Info} ->
            case Call(Keeper) of
                {error, {Gone, _}} when Gone =:= keeper_down; Gone =:= not_a_keeper ->
                    ok = ferrotrace_registry:reap(Id),
                    KeeperGone(Id);
                Answer ->
                    Answer
            end;
        error when is_integer(Session) ->
            %% No keeper (a session from before a registry restart): the engine answers.
            KeeperGone(Session);
        error when is_atom(Session) ->
            {error, {no_such_session, Session}};
        error ->
            {error, {bad_session, ferrotrace_registry:brief(Session)}}
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
%% Elixir writes them; each time column has one unit, shown in its header. For a cluster
%% session (see `nodes' in {@link calls/2}), `by_node => true' adds a table with one line
%% per function and node, and the nodes that went down are named.
-spec report(session() | pid(), ferrotrace_report:options() | [{atom(), term()}]) ->
          ok | {error, term()}.
report(Name, Options) when is_atom(Name) ->
    with_name(Name, fun(S) -> report(S, Options) end);
report(Cluster, Options0) when is_pid(Cluster) ->
    %% `by_node => true' (cluster sessions): one more table, a line per function and node.
    Options = case options_map(Options0) of {ok, M} -> M; _ -> Options0 end,
    ByNode = is_map(Options) andalso maps:get(by_node, Options, false),
    case ferrotrace_report:check_options(maybe_without(by_node, Options)) of
        {ok, _} when is_boolean(ByNode) ->
            case ferrotrace_cluster:format(Cluster, (maybe_without(by_node, Options))#{by_node => ByNode}) of
                {error, _} = Error -> Error;
                Text -> io:put_chars(Text)
            end;
        {ok, _} ->
            {error, {bad_option, {by_node, ByNode, <<"true or false">>}}};
        {error, _} = Error ->
            Error
    end;
report(Session, Options) ->
    case ferrotrace_report:check_options(Options) of
        {ok, _} ->
            case summary(Session) of
                {error, _} = Error ->
                    Error;
                Summary ->
                    Histogram = fun(MFA) -> histogram(Session, MFA) end,
                    Events = ferrotrace_events_report:format(Summary, fun(S) -> histogram(Session, S) end),
                    io:put_chars([ferrotrace_report:format(Summary, Histogram, Options), Events])
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

%%--------------------------------------------------------------------------------------
%% Exports (ferrotrace_export) and cluster sessions (ferrotrace_cluster).

%% @doc The figures of `Session' in a format other tools read, as bytes. `Format' is
%% `hdr_log' (HdrHistogram interval log, V2 compressed, one histogram per function tagged
%% `m:f/a', in ns), `json' (the summary; field names as in {@link summary/1}), `collapsed'
%% (folded stacks `a;b;c Ns' of the traced functions for flamegraph.pl, inferno and
%% speedscope), or `{collapsed, #{weight => inclusive | exclusive}}' (default exclusive:
%% the time in a function less the traced calls it made); `chrome_trace' (the flight
%% recorder's calls as Chrome trace-event JSON for Perfetto and chrome://tracing; a session
%% without `recent => N' answers `{error, {needs, recent}}'). A cluster session's export is its
%% merged figures. See {@link ferrotrace_export}.
-spec export(session() | pid(), ferrotrace_export:format() | {ferrotrace_export:format(), map()}) ->
          binary() | {error, term()}.
export(Session, {Format, Options}) ->
    export_with(Session, Format, Options);
export(Session, Format) ->
    export_with(Session, Format, #{}).

%% @doc As {@link export/2}, written to `File'.
-spec export(session() | pid(), ferrotrace_export:format() | {ferrotrace_export:format(), map()},
             file:name_all()) -> ok | {error, term()}.
export(Session, Format, File) ->
    case export(Session, Format) of
        {error, _} = Error -> Error;
        Bytes -> file:write_file(File, Bytes)
    end.

export_with(Name, Format, Options) when is_atom(Name) ->
    with_name(Name, fun(S) -> export_with(S, Format, Options) end);
export_with(Session, Format, Options0) ->
    case ferrotrace_export:check(Format, Options0) of
        {ok, Options} when is_pid(Session) ->
            unwrap(ferrotrace_cluster:export(Session, Format, Options));
        {ok, Options} ->
            with_id(Session, fun(Id, _) -> unwrap(ferrotrace_export:local(Id, Format, Options)) end);
        {error, _} = Error ->
            Error
    end.

unwrap({ok, Bytes}) -> Bytes;
unwrap({error, _} = Error) -> Error.

%% A cluster session: `nodes => [Node]' (see ferrotrace_cluster). `[node()]' alone is a
%% local session, as without the option.
cluster_calls(Spec, Options = #{nodes := Nodes}) ->
    Rest = maps:remove(nodes, Options),
    case is_list(Nodes) andalso Nodes =/= [] andalso lists:all(fun is_atom/1, Nodes) of
        false ->
            {error, {bad_option, {nodes, Nodes, <<"a non-empty list of node names">>}}};
        true when Nodes =:= [node()] ->
            calls_with(Spec, Rest);
        true ->
            case owner(maps:get(owner, Rest, self()), maps:get(duration, Rest, 10000)) of
                {ok, Owner} ->
                    ferrotrace_cluster:calls(Spec, maps:remove(owner, Rest), lists:usort(Nodes), Owner);
                {error, _} = Error ->
                    Error
            end
    end.

maybe_without(Key, Options) when is_map(Options) -> maps:remove(Key, Options);
maybe_without(_Key, Options) -> Options.

stack_counts(Id) ->
    case ferrotrace_tracer:session_stack_counts(Id) of
        {ok, Counts} -> Counts;
        {error, _} -> #{paths => 0, overflow => 0, too_deep => 0}
    end.
