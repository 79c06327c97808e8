%%% @doc ferrotrace: call latency on a live node, aggregated off the schedulers.
%%%
%%% ferrotrace answers "what is the p99 of this function on this node right now" from a
%%% remote shell, without sending one message per event to a tracer process. Trace events go
%%% to Rust NIF callbacks ({@link ferrotrace_tracer}) that stamp them and queue them in
%%% per-scheduler rings; a collector thread per session pairs calls with returns and keeps an
%%% HDR histogram (2 significant digits: within 0.78 %) per function. Only summaries come back to Erlang.
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
%%% the owner's death. What the bounds do not cover (the VM's own cost per traced event,
%%% return tracing and tail calls, OTP 25's one tracer per process, copied arguments) is in
%%% doc/safety.md: read it before tracing a production node.
%%%
%%% == More ==
%%% Options: `h(ferrotrace, calls).' (the doc of {@link calls/2}). The cheat sheet:
%%% {@link help/0}. The guides in doc/: using.md (the report and what each figure means,
%%% specs, `watch/2'), slow-calls.md (slow calls, arguments, keys, the recorder),
%%% processes.md, safety.md, clusters-and-exports.md, installing.md; how an event travels
%%% and the file map: internals.md.
-module(ferrotrace).

%% In the order an operator meets them, as the functions below are.
-export([session/1, calls/2, processes/2]).
-export([add/2, remove/2]).
-export([summary/1, histogram/2, slowest/2, slow_calls/2, recent/1, print_recent/1]).
-export([trees/2, print_tree/2]).
-export([captures/1]).
-export([report/0, report/1, report/2, format/1, help/0, explain/1, calibrate/0]).
-export([stop/0, stop/1, release/1, list/0]).
-export([watch/1, watch/2]).
-export([export/2, export/3]).
-export([serve/1, serve/2, unserve/1]).
-export([compare/2, compare/3, save/2]).

%% Every function that takes a session finds it through one dispatch: by name, a cluster
%% session by its pid, a local one by its id (ferrotrace_dispatch).
-import(ferrotrace_dispatch, [named/2, with_session/3]).

-type session() :: ferrotrace_tracer:session_id() | atom().
%% A session: its id (what session/1 and calls/2 answer) or its name (`name => Atom').
-type mfa_spec() :: {module() | '_', atom() | '_', arity() | '_'}.
%% A function, or several with `` '_' '' for any module, name or arity.
-type pid_spec() :: all | new | existing | ferrotrace_scope:form() | [ferrotrace_scope:form()].
%% The processes calls/2 traces: all, those spawned from now on, those alive now, or those
%% named (pids, names, supervisors, applications, initial calls: see calls/2).
-type spec() :: mfa_spec() | {module() | '_', atom() | '_', [tuple()] | function()}
              | string() | binary().
%% What calls/2 traces; see ferrotrace_spec for the forms.
-type options() :: ferrotrace_options:options().
%% The options of session/1, calls/2 and processes/2, a map or a list of `{Name, Value}'
%% pairs: {@link calls/2} documents each.
-type bucket() :: {LowNs :: non_neg_integer(), HighNs :: non_neg_integer(),
                   Count :: non_neg_integer()}.
%% A histogram bucket: how many values fell in LowNs..HighNs (power-of-two bounds).
-type time() :: non_neg_integer() | undefined.
%% A time in ns; `undefined' for a figure of no call yet.
-type call_summary() :: #{mfa := mfa(),
                          count := non_neg_integer(),
                          estimated => non_neg_integer(),
                          returns := non_neg_integer(),
                          exceptions := non_neg_integer(),
                          total := non_neg_integer(),
                          mean := time(), p50 := time(), p90 := time(), p99 := time(),
                          p999 := time(), max := time(),
                          own => #{atom() => time()},
                          inner_events => #{mean := float(), max := non_neg_integer(),
                                            total := non_neg_integer(),
                                            compensated_ns := non_neg_integer()},
                          raw => #{atom() => time()},
                          migrations => non_neg_integer(),
                          max_frames => non_neg_integer(),
                          max_frames_pid => pid(),
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
                     generated_left_out => non_neg_integer(),
                     shell_left_out => non_neg_integer(),
                     scope => #{pids := pid_spec(), follow := ferrotrace_scope:follow(),
                                at_start := non_neg_integer(), now => non_neg_integer(),
                                at_end => non_neg_integer()},
                     settling => boolean(),
                     start => #{total_ms := non_neg_integer(), calibration_ms := non_neg_integer(),
                                counting_ms := non_neg_integer(), analysis_ms := non_neg_integer(),
                                tracing_ms := non_neg_integer(), holding_ms := non_neg_integer()},
                     displaced => displacement(),
                     budget => budget(),
                     calibration => ferrotrace_calibrate:calibration() | {error, term()} | pending,
                     compensated => boolean(),
                     changes => [#{at := integer(), added => [mfa_spec()], loops => [mfa()],
                                   removed => [mfa_spec()]}],
                     events := #{seen := non_neg_integer(), aggregated := non_neg_integer(),
                                 dropped := non_neg_integer(), sampled_out := non_neg_integer(),
                                 limited := non_neg_integer(), ignored := non_neg_integer(),
                                 args_dropped := non_neg_integer(),
                                 frames_refused := non_neg_integer(),
                                 fuse_refused := non_neg_integer(), untraced := non_neg_integer()},
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
                     precision => #{significant_digits := pos_integer(), relative_error := float()},
                     sample => #{processes := pos_integer(), calls := non_neg_integer()},
                     messages => map(), scheduling => map(), gc => map(), processes => map(),
                     ports => map(), trees => map(),
                     nodes => [node()], nodes_down => [node()], by_node => #{node() => summary()}}.
%% What summary/1 answers; its doc describes every key.
%% Another tool took over some of a session's processes or functions (OTP 25 and 26), see
%% summary/1.
-type displacement() :: #{at := integer(), processes := non_neg_integer(),
                          functions := [mfa()], by := [term()], new_processes => true}.
-type budget() :: #{max_overhead := number(), default := boolean(), cautious := boolean(),
                    estimate := float() | undefined, used := float(),
                    collector := float() | undefined, rate := pos_integer(),
                    measured := float() | undefined, in_situ := float(), reading := float(),
                    baseline := #{per_busy := float(), utilization := float(), reductions_per_s := float(),
                                  noise => float()} | undefined,
                    model := calibrated | partial | default,
                    event_ns := non_neg_integer(), discard_ns := non_neg_integer(),
                    rate_changes := [{non_neg_integer(), pos_integer(), float() | undefined}],
                    rate_changes_total := non_neg_integer(),
                    shed := [#{mfa := mfa(), rate := non_neg_integer(), shed_at := non_neg_integer(),
                               guessed => true, restored_at => non_neg_integer()}],
                    shed_now := non_neg_integer(),
                    untraced => #{retraced := non_neg_integer(), left_untraced := non_neg_integer(),
                                  waiting := non_neg_integer()}}.
%% A session's overhead budget (`max_overhead'), see summary/1.
-export_type([session/0, spec/0, mfa_spec/0, pid_spec/0, bucket/0, options/0, summary/0,
              call_summary/0, time/0, displacement/0, budget/0]).

%%--------------------------------------------------------------------------------------
%% Starting a session

%% @doc Creates a session for raw use as `{tracer, ferrotrace_tracer, Session}' with
%% `erlang:trace/3'; you set the trace patterns (with `return_trace' or `exception_trace'
%% for latencies). The session belongs to the shell it is started from, or has no owner
%% (see `owner' in {@link calls/2}); an `owner' that is already gone is refused,
%% `{error, {owner_down, Pid}}' (as by calls/2).
%% `Options' are those of {@link calls/2} (`h(ferrotrace, calls).' lists them with their
%% defaults) but `pids', `scope', `also', `callers' and `nodes', which say what calls/2
%% traces, and `compensate' (a raw session has no calibration); here you set the patterns
%% and flags. A raw session takes `key => message' to
%% keep a histogram per `{message, Key}' that your own match specs set (see
%% `ferrotrace_keys'). A raw session whose user sets `send', `` 'receive' '', `procs',
%% `garbage_collection', `running', `ports' or `running_ports' gets the figures of
%% {@link processes/2}.
-spec session(options()) -> {ok, ferrotrace_tracer:session_id()} | {error, term()}.
session(Options) ->
    ok = loaded(),
    ferrotrace_start:session(Options).

%% @doc Traces calls matching `Spec' with return and exception tracing. `Spec' is an
%% `{M, F, A}' with `` '_' '' wildcards, `{M, F, MatchSpec}' (heads and guards; ferrotrace
%% adds `exception_trace'), `{M, F, Fun}' with a fun typed in the shell (as `dbg:fun2ms/1'),
%% a string like redbug's (`"m:f/2"', `"m:f(X, _) when X > 10"', `"MyApp.Cart.add/2"'),
%% or a list of these (see `ferrotrace_spec'); a spec string is at most 65,536 characters
%% (a longer one is refused before it is parsed). Calls are aggregated in a new session that
%% belongs to the caller. Tail-recursive loops among the matched functions are counted, not timed (they
%% are listed under `loops' in the summary).
%%
%% Figures are nanoseconds. A traced call's latency runs from the call event to its
%% `return_from' or `exception_from' event in the same process. `return_trace' turns off
%% last-call optimisation for the traced function, so a traced function that tail-calls
%% another still gets its own return, and its latency includes the callee's.
%%
%% `Options', a map or a list of `{Name, Value}' pairs; every one has a default. This is
%% the one list of the options: {@link session/1} takes them all but those that say what
%% calls/2 traces (`pids', `scope', `also', `callers', `nodes'), {@link processes/2} those
%% and `pids'. Every time below (`Ms', `Ns') may also be given with its unit, as a string:
%% `"30s"', `"20ms"', `"2.5s"', `"100us"', `"2m"', `"1h"'; an integer is in the unit named.
%% A session that ran out its duration within 100 ms says in its report that durations are
%% milliseconds (`duration => 10' is 10 ms).
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
%% recon_trace's integer limit); never exceeded, counted across schedulers without a
%% shared counter per event. `max_rate => {N, Ms} | infinity': at most N events per
%% window of Ms milliseconds (default `infinity'; like recon_trace's `{N, Ms}').
%% `on_limit => stop | drop': at either limit, `stop' (default) ends the session
%% (its `stop_reason' is `limit'; the VM unhooks every tracee at its next event), `drop'
%% keeps it and counts the excess as `limited'.</li>
%% <li>`sample => N | {processes, N} | {calls, N}' (N from 1 to 1000000; default 1, all):
%% `N' and `{processes, N}' keep the events of 1 process in N, by pid hash, so a process
%% is kept or not as a whole (a few busy processes may all be left out); `{calls, N}' keeps
%% 1 call in N of every process, drawn at random on the scheduler before the match spec
%% runs, so every busy process is sampled. Either way a refused call is answered `discard':
%% the VM makes no event and pushes no return frame, so calls and returns stay paired.
%% Each refused call is one event counted as `sampled_out' (its return never exists; with
%% `{calls, N}' not per function: the refusal is decided before the function's figures are
%% reached). Counts and latencies are of the kept calls, never scaled; the summary's
%% `sample' and the report's header say the rate. `ferrotrace_tracer:session_set_call_sample/2'
%% changes the per-call rate while the session runs (0: keep no call).</li>
%% <li>`shell => leave_out | include': with `pids => all' or `existing', started from a
%% shell, whether the shell's own processes are timed: its evaluator, the shell process, and
%% where they are on the node its group leader and terminal processes, or a remote shell's
%% connection (default `leave_out': what the operator types is not what they came to see;
%% the report says how many were left out). An evaluator the shell restarts after an
%% exception is a new process, traced as any other.</li>
%% <li>`pids': the processes to trace (default `all'): `all', `new' (spawned from now on),
%% `existing', or processes named, one form or a list of them: a pid or its text
%% (`"<0.123.0>"'), a registered name, `{global, Name}', `{via, Module, Name}',
%% `{children, Sup}' (the supervisor and everything under it), `{application, App}' (the
%% processes whose group leader is the application's master), `{initial_call, {M, F, A}}'
%% (proc_lib's, `A' may be `'_''). Each form must name a live process, or the start is
%% refused with a hint (`{error, {bad_option, {pids, Form, Hint}}}'). Untraced processes
%% cost nothing: the VM skips them before any callback. `follow => spawns | first_spawn |
%% none': what a named scope's processes spawn is traced too (default `spawns', `none' for
%% pids): a supervisor's restarts and new `simple_one_for_one' children are followed through
%% the supervisor; a name registered after the start is not. The report's `processes:' line
%% states the scope and its processes at the start and now. On OTP 25 and 26 a process has
%% one tracer: a scope overlapping another session's is refused, naming it.
%% `scope => local | global': `local' (default) traces local calls too.</li>
%% <li>`owner => pid() | none': who the session belongs to; it stops when its owner exits.
%% By default, in a shell (`erl', `erl -remsh', a release's `remote_console', IEx), the
%% shell's group leader, so the session outlives a crashed evaluator and stops when the
%% shell is left; anywhere else (`bin/rel eval', `rpc:call/4', a control tool's eval,
%% any process) none: the caller of such a call exits as soon as it returns, so the
%% session runs its `duration', and `duration => infinity' is refused there without an
%% owner (`{error, {bad_option, {duration, infinity, _}}}'). `owner => self()' ties it to
%% the calling process; `none' needs a finite `duration'. `keep => Ms | infinity': how long
%% the figures outlive the owner (default 600000). `name => atom()': a name accepted
%% wherever a session id is (default none).</li>
%% <li>`slowest => K': the K slowest calls kept per function (default 10; 0 off), see
%% {@link slowest/2}; `threshold => Ns | infinity': every call slower than Ns kept (default
%% `infinity', off), up to `max_slow_calls => N' per function (default 1000), see
%% {@link slow_calls/2}; `recent => N': the flight recorder keeps the last N events
%% (default 200 for `calls/2', for the html page; 0 for {@link session/1} and
%% {@link processes/2}; `0' is off), see {@link recent/1}.</li>
%% <li>`capture => #{slower_than => Ns, every => Ms, max_captures => N}': when a call of
%% `Ns' or slower returns, freeze what the node looks like (the slow process, run queues,
%% memory, the top 10 message queues and reductions, `recent'), at most one capture per
%% `every' ms (default 1000, 0 to 3600000) and `max_captures' in all (default 10, 1 to
%% 1000), the rest counted; off by default. See {@link captures/1}.</li>
%% <li>`args => true | false': copy each call's arguments and each return value or
%% exception (default `false'), kept only with the calls kept by `slowest', `threshold' or
%% `recent'; `max_term_bytes => N' bounds one copy (default 1024, 64 to 65536): a larger
%% term is cut where it stood and marked `{ferrotrace_truncated, OriginalSize, Partial}'.</li>
%% <li>Keys, like DTrace's `@[key] = quantize(...)': a spec whose match spec sets
%% `{message, Key}' (`{shop_api, checkout, fun([#{tier := T}]) -> message(T) end}') gets a
%% histogram per key in its call entry's `by_key'. `callers => true | false': key each
%% call by its caller instead (default `false'; in `callers'). `max_keys => N' bounds the
%% keys kept over the session (default 1000, 1 to 10000; calls past it counted in
%% `keys_overflow'). A raw session takes `key => message' (see {@link session/1} and
%% `ferrotrace_keys').</li>
%% <li>`also => [Kind]': trace these kinds of {@link processes/2} too (`messages', `procs',
%% `gc', `scheduling', `ports'; default none).</li>
%% <li>`intervals => Ms | none': keep each function's histogram per `Ms' (at least 10) for
%% {@link export/2}'s `{hdr_log, #{interval => Ms}}' and the html page's percentiles over
%% time; at most `max_intervals', then neighbours merge and the interval doubles (see
%% `ferrotrace_intervals'). Default: `1000' with `max_intervals => 60' for `calls/2'
%% (`5000' for a spec of every module, `{'_', F, A}'; none with `duration => infinity';
%% `none' turns it off), off for {@link session/1} and {@link processes/2}
%% (`max_intervals' 600).</li>
%% <li>`max_overhead => Fraction | none': an overhead budget, a fraction of the CPU the node
%% uses, above 0 and at most 1 (`0.05' is 5 %; of at least half the schedulers' capacity).
%% Default: none, but `0.1' for a spec with a `'_' module (every module of the node: on
%% busy schedulers each traced call lengthens its process's time slice, and every other
%% process waits that much longer), unless `none' or `sample => {calls, N}' is given.
%% Every second (four times a second for its first two) the session estimates its own
%% cost, `(traced events x the calibrated cost of an event + calls refused x the cost of a
%% refused call) / (the CPU the node used in that second, at least half of schedulers
%% online x 1 s)', and keeps it under the budget: it traces 1 call in N (as `sample => {calls, N}', which it then
%% replaces: giving both is refused), raising N at once when over, lowering it when well
%% under (hysteresis). A function with a pattern costs a refused call's floor at every call
%% (the VM asks the tracer first), whatever N: where that floor alone is over the budget,
%% the session takes this session's patterns off the hottest and cheapest functions (most
%% calls per second, shortest latency; a call rate is the sampled count times N, an
%% estimate) and puts them back one by one when the load falls. Counts are then of the
%% sampled calls, and shed functions are missing from the figures while shed; the summary's
%% `budget' says the rate over time and what was shed. Between those ticks a fuse on each
%% scheduler holds the budget within milliseconds, whatever the load does (processes born
%% per request, a burst, a batch job): once the session's calls on a scheduler have cost
%% it the budget's share (with 10 ms of it to spare), its calls are refused there
%% (`fuse_refused'), and a process whose calls cost more than the share even refused (a
%% tight loop of cheap calls) is untraced (`untraced'); the next tick, brought forward,
%% sheds the functions it called, and traces it again once there is room. With
%% `duration => infinity' this is the always-on mode (its costs: doc/safety.md).</li>
%% <li>`aggregators => N | auto': split aggregation by pid over N threads (1 to 16; default
%% `auto', one per four CPUs, at least one). One thread pairs and aggregates about 13 to
%% 20 M events/s, fewer than sixteen busy schedulers make; each process's events still
%% reach one aggregator in order, and reads merge them. The caps (`max_functions',
%% `max_open_calls', `max_keys') hold per aggregator; the summary's `aggregators' says how
%% many.</li>
%% <li>`nodes => [Node]': one session on each node through `erpc', read as one (default the
%% local node only); answers `{ok, Cluster}', a pid every function here takes like a
%% session id, or `{error, {node, Node, Reason}}' with no session left behind. Counts add
%% and HDR histograms are added, so percentiles are those of all the calls; `name => Atom'
%% names it as it names a local session ({@link list/0} shows it on this node). See
%% {@link ferrotrace_cluster}.</li>
%% <li>`compensate => true | false': take the probe effect out (default `true'). Each
%% traced call made inside a traced call costs its caller the VM's and ferrotrace's work
%% for two events; before its patterns are set, the session measures that cost on this
%% node (`calibration' in the summary, see `ferrotrace_calibrate'), and with `true' records
%% each call's latency and own time less the cost of the session's events inside it
%% (`inner_events'), never below zero; the latency as measured stays in the call entry's
%% `raw'. `false' records latencies as measured (the calibration is still shown, and the
%% report still marks the functions whose latency is mostly tracing). A calibration that
%% fails leaves the session uncompensated, and its summary says why. The default is `true'
%% because the figure an operator reads should be the closest to the untraced code's; what
%% it does not take out (GC and cache effects of tracing, calls refused by `sample' or the
%% frame bound, dropped events): doc/slow-calls.md, "The probe effect". The engine's
%% `compensate_call_ns => Ns' and `compensate_return_ns => Ns' (0 to 1000000) set the cost
%% per event by hand, over the calibration's (and in a raw session, which has none). The
%% calibration is measured once and reused: for five minutes as it is, then measured again
%% in the background while a start uses the old one ({@link calibrate/0} measures it again
%% at once). A start never waits for it on full schedulers: a node's first one is then
%% measured once the session runs.</li>
%% <li>`trees => #{slower_than => Ns}': call trees, kept speculatively (default off). For
%% each root call (`root => Spec': the calls of the functions a spec names; default the
%% outermost traced call of each process) the engine builds the tree of the traced calls
%% its process makes, off the schedulers, and keeps it if the root took `Ns' or longer:
%% the `keep => K' slowest per root function (1 to 100; default 10), each at most
%% `max_nodes => N' nodes (1 to 100000; default 2000; the calls past it are counted). Only
%% traced functions appear. Trees being built hold at most 262144 nodes per aggregator
%% (56 bytes each); a root past that builds none and is counted. See {@link trees/2},
%% {@link print_tree/2}, `ferrotrace_trees' and doc/slow-calls.md.</li>
%% <li>`metrics => #{port => Port, ip => Ip, path => Path, buckets => [Seconds]}': serve the
%% session's figures to Prometheus from its start, as {@link serve/2} does (default off);
%% a port in use refuses the start, with nothing started.</li>
%% <li>`generated => false | true': under a wildcard function (`{M, '_', '_'}',
%% `{'_', '_', '_'}'), whether the functions the compiler made are traced too: funs and
%% list or binary comprehensions, usually the hottest code and code nobody wrote (default
%% `false': left out, those of a named module as the session starts, those of a `'_''
%% module as the session sees them called, the most called first; the summary's
%% `generated_left_out' counts them). A function named alone is always traced.</li>
%% </ul>
%% A bad option, spec or session gives `{error, Reason}' naming it, e.g.
%% `{error, {bad_option, {ring_size, 3, <<"an integer from 64 to 16777216">>}}}'; an
%% unknown option is answered with those that exist and the nearest one.
-spec calls(spec() | [spec()], options()) ->
          {ok, ferrotrace_tracer:session_id()} | {error, term()}.
calls(Spec, Options0) ->
    ok = loaded(),
    Options = page_defaults(Spec, Options0),
    case ferrotrace_options:to_map(Options) of
        {ok, #{nodes := _}} -> ferrotrace_cluster:calls(Spec, Options);
        _ -> ferrotrace_start:calls(Spec, Options)
    end.

%% @doc Traces processes rather than functions: `Kinds' is a non-empty list of `messages'
%% (send and receive), `procs' (spawn, exit, link, register), `gc' (garbage collections),
%% `scheduling' (processes scheduled in and out) and `ports' (ports opened, closed, run).
%% The figures appear in {@link summary/1} under `messages', `processes', `gc',
%% `scheduling' and `ports'. Options as {@link calls/2} (`pids', `duration', limits, ...).
%% Kinds this VM cannot trace safely are refused with `{error, {unsafe, Kind, Why}}'.
%% To trace calls and processes in one session, use `calls/2' with `#{also => Kinds}'.
-spec processes(Kinds :: [ferrotrace_activity:kind()], Options :: options()) ->
          {ok, ferrotrace_tracer:session_id()} | {error, term()}.
processes(Kinds, Options) ->
    ok = loaded(),
    ferrotrace_start:processes(Kinds, Options).

%% A node's first start: the modules a start runs are loaded at once by a process of high
%% priority (ferrotrace_code:preload_for_start/0) before the caller calls any of them. Loaded on
%% first call instead, each would wait for the code server, a process of normal priority,
%% and the caller's turns among busy processes: 200 ms of a first start among 50 of them.
%% Nothing but this module and BIFs is used until then.
loaded() ->
    case erlang:module_loaded(ferrotrace_start) andalso erlang:module_loaded(ferrotrace_code) of
        true ->
            ok;
        false ->
            %% ferrotrace_own:spawn_options/0, not loaded yet.
            {Pid, Monitor} = spawn_opt(fun ferrotrace_code:preload_for_start/0, [monitor, {priority, high}]),
            %% Whatever it did, the start goes on: what is not loaded is loaded on first call.
            receive {'DOWN', Monitor, process, Pid, _} -> ok end
    end.

%%--------------------------------------------------------------------------------------
%% Reading a session: figures, histograms, kept calls, the recorder

%% @doc Statistics so far: `calls' (one map per function, sorted by total time, with `mfa',
%% `count', `returns', `exceptions', `total', `mean', `p50', `p90', `p99', `p999', `max';
%% times in ns, `undefined' before the first return; `mean' is exact, `total' over the
%% latencies recorded; the percentiles and `max' are HDR's, to 2 significant digits: each
%% within 1/128, 0.78 %, of the latency recorded, as `precision' says; where the count is
%% of calls timed out of more (`sample', or a budget's rate and fuse), `estimated' is the
%% calls made, estimated from those timed: the figures are of the `count' calls timed),
%% `loops' (functions
%% counted but not timed, see {@link calls/2}), `settling' (true while a `calls/2' session
%% still refines its patterns after its start: a `'_'' module's loops made count-only, the
%% processes waiting in them traced from then on, generated and ferrotrace's own functions
%% left out; a few changes at a time, each of which waits for the VM's code barrier, up to
%% 250 ms on a busy node), `generated_left_out' (see `generated' in {@link calls/2}), `scope'
%% (with `pids' naming processes: the scope as given, its `follow', `at_start', and `now' or
%% `at_end', how many processes it traced), `start'
%% (where the session's start took its time, in ms: `total_ms' from the start's own
%% process on, `calibration_ms' (the tracer's NIF loaded where it was not, and the probe
%% effect's calibration, reused for five minutes),
%% `counting_ms' (a budget's: the node's work and its functions' calls counted before any
%% pattern), `analysis_ms' (reading code for loops), `holding_ms' (a budget's hottest
%% functions taken off before any process is flagged, up to 1 s), `tracing_ms' (the rest:
%% patterns and flags)), `events' (`seen', `aggregated', `dropped', `sampled_out',
%% `limited': seen = aggregated + dropped + sampled_out + limited, exactly; `ignored';
%% `args_dropped', copies (arguments, results, keys) refused by a full term ring;
%% `frames_refused', calls refused on the scheduler because their process had 120
%% return-trace frames of the session open: no event, no frame; `fuse_refused', calls the
%% budget's fuse refused, and `untraced', processes it untraced: see `max_overhead' in
%% {@link calls/2}), `pairing'
%% (`open_calls' still awaiting their return, `abandoned_calls', `unmatched_returns', ...),
%% `status' (`running' | `stopped'), `stop_reason' (`user', `duration', `limit',
%% `owner_down', `unload', `error', or `undefined' while running) and `stopped_at' (ms);
%% `backlog' (`ring_peak', the most events one scheduler's ring held when the collector
%% drained it, of `ring_size'; `longest_gap_us', the longest time between two drains while
%% the session ran: a ring that fills in less than that gap drops, see `report/1');
%% `stacks' (`paths' kept for the `collapsed' export, returned calls not kept: `overflow'
%% past 10,000 paths, `too_deep' past 64 frames); `sample' (the current rates: `processes',
%% 1 process in N kept, and `calls', 1 call in N, 0 none; see `sample' in {@link calls/2});
%% with `trees', `trees' (the call trees kept and what did not fit: `ferrotrace_trees:with_counts/2';
%% their bytes count in `memory''s `slow_calls').
%% `memory' is what the session holds, in bytes, by part, and their `total':
%% `ring_bytes' (event rings, one per scheduler thread that traced: exact), `term_rings'
%% (with `args' or `key': the term rings, their buffers and the copies drained from them),
%% `collector' (events drained and not yet folded in, batches for aggregator threads),
%% `processes' (the process table), `open_frames' (the open calls' frames, capacity times
%% frame size) and `frame_copies' (the argument and key copies they hold), `histograms'
%% (each function's latency and own-time histograms, raw, split and per-key ones, the other
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
%% before it was traced count-only) with `max_frames_pid' (the process that had them open:
%% the report's `frames:' note names it),
%% `inner_events' (`#{mean, max, total, compensated_ns}': the session's events inside each
%% paired call of the function, its own two not counted, over its calls, and the ns taken
%% out of its latencies; see `compensate' in {@link calls/2}) and, in a compensated
%% session, `raw' (`#{total, mean, p50, p90, p99, p999, max}': the latency as measured; the
%% entry's own figures are compensated). With keys, it has
%% `by_key => [#{key, count, total, mean, p50, p90, p99, p999, max}]' (or `callers', with
%% `caller' for `key'), most total time first, and `keys_overflow' (see `ferrotrace_keys').
%% Sessions that trace other kinds (processes/2, `also', or a raw session's own flags) add
%% `messages', `scheduling', `gc', `processes' and `ports' (see the README, "Tracing
%% processes"), and call entries gain `split => #{running, descheduled, gc}' when
%% scheduling is traced with the calls. A cluster session (a pid, see `nodes') merges its
%% nodes' figures.
%% A calls/2 session has `calibration' (`#{call_ns, return_ns, pair_ns, untraced_ns, calls,
%% took_us, split}', see `ferrotrace_calibrate', or `{error, Reason}'; `pending' for a
%% moment on a node that had none and whose schedulers were full at the start: measured
%% once the session runs, its latencies compensated from then on) and `compensated'
%% (whether its latencies have the probe effect taken out).
%% `displaced' is there only once another tool took over on OTP 25 or 26 (one tracer per
%% process, one match spec per function): `#{at, processes, functions, by}', `at' when it
%% was first noticed (ms; the keeper checks every 500 ms, bounded per round), `processes'
%% how many live processes it found under another tracer, `functions' those whose match spec
%% was replaced or removed, `by' the other tracers (a pid, `{Module, State}'; `[]' when only
%% functions were seen: the VM does not say who set a pattern), and `new_processes => true'
%% when new processes go to the other tracer. Such a session's counts miss what was taken,
%% and its stop leaves the other tool's tracer and match specs in place. Never on OTP 27+,
%% where sessions coexist.
%% `budget' is there for a session with a budget: `max_overhead', `default' (true where it
%% is the default of a `'_' module spec), `cautious' (true for the session's first moment,
%% about 1.6 s from its start, when it keeps within half the budget: what a call costs
%% here is not measured yet), `estimate' (the
%% session's cost now as a fraction of `used', over the last tick (a second);
%% `undefined' at first: the model's events and refused calls at their calibrated costs,
%% times `in_situ'), `used' (the share of the schedulers' capacity the node used over the
%% last tick, at least 0.5: the CPU time of its OS process over schedulers online times the
%% tick, or the schedulers' busy share where /proc cannot tell it; a node sharing its cores
%% gets less than its schedulers), `measured' (the cost measured on the node over the last
%% ticks, over `used' too: the fall of its work's reductions per busy scheduler time against
%% `baseline', measured for 30 ms before the start, offset and noise included; `undefined'
%% where the schedulers were idle then), `in_situ' (what a call costs on this node against
%% its calibration, within 2 and 10: learned from the part of `measured' that moves with the session's
%% cost, weighed by the noise of the baseline, whose `noise' is its thirds' relative
%% standard deviation), `reading' (the share of `used' held for the reading of loops after
%% the start, paced, while it runs, and taken from what the budget leaves the tracing; 0.0
%% once done: a node's first sessions read its modules' code, later ones find it cached),
%% `collector' (the collector thread's CPU over
%% the same capacity: off the schedulers, shown alone), `rate' (1 call in `rate' traced
%% now), `model' (`calibrated', or `default' costs where the session has no calibration),
%% `event_ns' and `discard_ns' (the calibrated costs), `rate_changes' (`{ElapsedMs, Rate, Estimate}', the last 32,
%% oldest first; `rate_changes_total' counts them all), `shed' (functions whose patterns
%% were taken off: `#{mfa, rate, shed_at}' with `rate' the estimated calls per second when
%% shed, `guessed' where that is read from the few calls sampled before the fuse untraced
%% the processes making them (not counted), and `restored_at' once put back; the last
%% 100), `shed_now' and `untraced'
%% (processes the fuse untraced: `retraced', traced again since; `left_untraced', untraced
%% three times and left so; `waiting', to trace again once there is room).
%% `changes' is there once {@link add/2} or {@link remove/2} changed the session: the latest
%% 20, oldest first, `#{at, added, loops}' or `#{at, removed}' (`at' in ms, `loops' the added
%% functions traced count-only); the report prints them on a `changes:' line.
-spec summary(session() | pid()) -> summary() | {error, term()}.
summary(Session) ->
    with_session(Session, fun ferrotrace_local:summary/3, fun ferrotrace_cluster:summary/1).

%% @doc The latency distribution of one function in power-of-two buckets, ascending; or
%% of another series: `wakeup', `run_slice', `lifetime', `size_words' (words, not ns),
%% `{gc, minor}', `{gc, major}', `{ports, run_slice}'.
%% A function may be given as a spec string naming one (`"m:f/1"', `"MyApp.Cart.add/2"').
-spec histogram(session() | pid(), mfa() | string() | binary() | ferrotrace_activity:series()) ->
          [bucket()] | {error, term()}.
histogram(Session, Series) when is_list(Series); is_binary(Series) ->
    case ferrotrace_spec:function(Series) of
        {ok, MFA} -> histogram(Session, MFA);
        {error, _} = Error -> Error
    end;
histogram(Session, Series) ->
    with_session(Session, fun(Id, _, _) -> ferrotrace_local:histogram(Id, Series) end,
                 fun(Cluster) -> ferrotrace_cluster:histogram(Cluster, Series) end).

%% @doc The slowest calls of `MFA' the session kept (`slowest => K' calls per function,
%% default 10), slowest first: maps `#{pid, started_at, duration, result}' with
%% `started_at' in system time (us), `duration' in ns and `result' `return' or `exception'.
%% With `args => true' each also has `args' (the argument list) and `result' is
%% `{return, Value}' or `{exception, Class, Reason}'.
%% A cluster session's are every node's, slowest first. `MFA' may be a spec string naming
%% one function (`"m:f/1"', `"MyApp.Cart.add/2"').
-spec slowest(session() | pid(), mfa() | string() | binary()) -> [ferrotrace_slow:slow_call()] | {error, term()}.
slowest(Session, MFA) ->
    kept_calls(Session, MFA, slowest).

%% @doc The calls of `MFA' slower than the session's `threshold => Ns', in the order they
%% began (at most `max_slow_calls' per function, default 1000; the excess is counted in the
%% call entry's `slow_calls_dropped'); maps as {@link slowest/2}'s.
%% A cluster session's are every node's, in the order they began.
-spec slow_calls(session() | pid(), mfa() | string() | binary()) -> [ferrotrace_slow:slow_call()] | {error, term()}.
slow_calls(Session, MFA) ->
    kept_calls(Session, MFA, threshold).

%% The calls kept by `slowest' or by `threshold', on this node or every node's.
kept_calls(Session, MFA0, Which) when is_list(MFA0); is_binary(MFA0) ->
    case ferrotrace_spec:function(MFA0) of
        {ok, MFA} -> kept(Session, MFA, Which);
        {error, _} = Error -> Error
    end;
kept_calls(Session, MFA, Which) ->
    kept(Session, MFA, Which).

kept(Session, MFA, Which) ->
    with_session(Session, fun(Id, _, _) -> ferrotrace_slow:calls(Id, MFA, Which) end,
                 fun(Cluster) -> ferrotrace_cluster:slow_calls(Cluster, MFA, Which) end).

%% @doc The last events the session recorded (`recent => N'), oldest first: maps
%% `#{at, pid, mfa, event, duration}' with `at' in system time (us), `event' `call',
%% `return' or `exception', `duration' the paired call's (ns) or `undefined'; with
%% `args => true' a call has `args' and a return or exception `result' (as in
%% {@link slowest/2}).
%% A cluster session's are every node's recorded events, merged in time order (each node
%% keeps its own last N).
-spec recent(session() | pid()) -> [ferrotrace_recent:event()] | {error, term()}.
recent(Session) ->
    with_session(Session, fun(Id, _, _) -> ferrotrace_recent:events(Id) end,
                 fun ferrotrace_cluster:recent/1).

%% @doc The captures the session took (`capture => #{slower_than => Ns}'), oldest first:
%% what the node looked like when a call that slow returned. Each is a map `#{call,
%% process, node, top_queues, top_reductions, recent, tree, at, took}' (see
%% ferrotrace_capture for each key); `[]' for a session without captures. A cluster
%% session's are every node's, in the order they were taken.
-spec captures(session() | pid()) -> [ferrotrace_capture:capture()] | {error, term()}.
captures(Session) ->
    with_session(Session, fun ferrotrace_capture:local/3, fun ferrotrace_cluster:captures/1).

%% @doc Prints {@link recent/1}'s events as recon_trace-like lines
%% (`13:55:09.123456 <0.123.0> m:f/1', `... m:f/1 --> return (12.0 ms)').
-spec print_recent(session() | pid()) -> ok | {error, term()}.
print_recent(Session) ->
    case recent(Session) of
        {error, _} = Error -> Error;
        Events -> io:put_chars(ferrotrace_recent:lines(Events))
    end.

%% @doc The call trees the session kept of root `MFA' (`trees => #{slower_than => Ns}',
%% see {@link calls/2}), slowest first: maps `#{mfa, latency, own, started_at, children,
%% dropped}' (`exception => true' on a call that raised; the root also has `pid' and, with
%% `args => true', `args'), latencies in ns, compensated, `started_at' in system time (us);
%% `children' are the traced calls it made, in the order they began, and `dropped' counts
%% those the tree had no room for (`max_nodes'). Only traced functions appear. `MFA' may be
%% a spec string naming one function (`"m:f/1"'). `{error, {no_trees, Why}}' for a session
%% started without `trees'; a cluster session's are read on each node's session
%% (`{error, {cluster, Why}}'). See `ferrotrace_trees'.
-spec trees(session() | pid(), mfa() | string() | binary()) -> [ferrotrace_trees:tree()] | {error, term()}.
trees(Session, MFA0) ->
    case ferrotrace_spec:function(MFA0) of
        {ok, MFA} ->
            with_session(Session, fun(Id, _, _) -> ferrotrace_trees:trees(Id, MFA) end,
                         fun(_Cluster) -> {error, {cluster, <<"read the trees on each node's session">>}} end);
        {error, _} = Error ->
            Error
    end.

%% @doc Prints the slowest tree {@link trees/2} answers as an indented tree: each call's
%% latency, own time and share of the root's latency; siblings of one function folded
%% (`shop_inventory:lookup/1 ×48  2.10 ms'). `ok', or the error.
-spec print_tree(session() | pid(), mfa() | string() | binary()) -> ok | {error, term()}.
print_tree(Session, MFA) ->
    ferrotrace_trees:print(trees(Session, MFA), ferrotrace_options:default_width()).

%%--------------------------------------------------------------------------------------
%% Changing a running session

%% @doc Traces the functions of `Spec' (any spec {@link calls/2} takes) too, in a running
%% `calls/2' or `processes/2' session, without stopping it: on OTP 25 and 26, where a second
%% session is refused while the first holds the processes (`already_traced'), this is the way
%% to look at one more function. The new functions are checked and set as at a start: the
%% session's `scope', keys (`callers => true' adds the caller to the new clauses; a spec that
%% sets `message' needs a session that keeps keys) and `args'; server loops among them traced
%% count-only before their first call; on OTP 25 and 26 a function another session traces
%% with another match spec is refused (`{error, {pattern_conflict, Spec, Session}}'), and
%% ferrotrace's own modules never traced. `max_functions' holds for the whole session.
%% Answers `{ok, #{added => [Spec], loops => [MFA], functions => N}}' (`loops' those traced
%% count-only, `functions' how many the VM matched), or `{error, Reason}' with nothing
%% changed: `{already_in_session, Spec, Pattern, Hint}' for functions it traces already,
%% `{session_stopped, Id, Hint}', `{raw_session, Id, Hint}' for {@link session/1}'s, the
%% errors of calls/2 for a bad spec. A cluster session adds on every node, or on none
%% (`{error, {node, Node, Reason}}'), and answers the nodes' `by_node' too. The summary's
%% `changes' lists what was added and removed, and when.
-spec add(session() | pid(), spec() | [spec()]) -> {ok, #{added := [mfa_spec()], loops := [mfa()],
                                                           functions := non_neg_integer(),
                                                           by_node => map()}} | {error, term()}.
add(Session, Spec) ->
    with_session(Session, fun(Id, _, _) -> ferrotrace_local:add(Id, Spec) end,
                 fun(Cluster) -> ferrotrace_cluster:add(Cluster, Spec) end).

%% @doc Takes the patterns of a running session that `Spec' matches off (`{M, F, A}' with
%% `` '_' '' wildcards, or a spec string; whole patterns: a spec that would cut a hole in one,
%% `{m, f, 1}' of a session on `` {m, '_', '_'} '', is refused, `{part_of_pattern, Spec,
%% Pattern, Hint}'). Its functions are no longer traced; calls running now still pair, and
%% their figures stay in the summary. Answers `{ok, #{removed => [Spec]}}', or `{error,
%% Reason}': `{not_in_session, Specs, Patterns}', as {@link add/2} for a stopped or raw
%% session. A cluster session removes on every node.
-spec remove(session() | pid(), spec() | [spec()]) ->
          {ok, #{removed := [mfa_spec()], by_node => map()}} | {error, term()}.
remove(Session, Spec) ->
    with_session(Session, fun(Id, _, _) -> ferrotrace_local:remove(Id, Spec) end,
                 fun(Cluster) -> ferrotrace_cluster:remove(Cluster, Spec) end).

%%--------------------------------------------------------------------------------------
%% Reports: text for the shell, scripts and the cheat sheet

%% @doc Prints the report of the latest session started from this shell (see
%% {@link report/1}): the one to read when `S' was rebound or lost. `{error, {no_session,
%% Hint}}' where this shell started none ({@link list/0} shows them all).
-spec report() -> ok | {error, term()}.
report() ->
    latest(fun report/1).

%% @doc Prints the table sorted by total time and, for the top functions, a histogram drawn
%% like DTrace's `quantize'. Given options instead of a session (`report(#{histograms =>
%% 0})', a map or a list of `{Key, Value}' pairs), the report of this shell's latest session
%% with them, as {@link report/2}.
-spec report(session() | pid() | ferrotrace_report:options() | [{atom(), term()}, ...]) ->
          ok | {error, term()}.
report(Options) when is_map(Options); is_list(Options), Options =/= [], is_tuple(hd(Options)) ->
    latest(fun(Session) -> report(Session, Options) end);
report(Session) ->
    print(format(Session)).

%% `Fun' of this shell's latest session.
latest(Fun) ->
    case shell_sessions() of
        [] -> {error, {no_session, <<"none started from this shell: ferrotrace:list() shows all">>}};
        Mine -> Fun(lists:last(Mine))
    end.

%% @doc Prints the report of `Session' with `Options' (a map or a proplist):
%% `top => N | all' (rows shown, default 20; a line says how many were left out),
%% `sort => count | total | p99 | max' (default `total'), `mfa => Pattern' (only the
%% functions matching an `{M, F, A}' with `` '_' '' wildcards or a spec string such as
%% `"MyApp.Cart"'), `width => Columns' (default the terminal's, else 80; every table and
%% section keeps to it, names shortened in the middle where they do not fit) and
%% `histograms => N' (drawn for the first N rows, default 3). Names print as Erlang or
%% Elixir writes them; each time column has one unit, shown in its header. For a cluster
%% session (see `nodes' in {@link calls/2}), `by_node => true' adds a table with one line
%% per function and node, and the nodes that went down are named.
-spec report(session() | pid(), ferrotrace_report:options() | [{atom(), term()}]) ->
          ok | {error, term()}.
report(Session, Options0) ->
    %% A name is answered first, then the options, then the id: as every entry with options.
    named(Session, fun(S) ->
        case ferrotrace_report:check_options(Options0, S) of
            {ok, Options} -> print(text(S, Options));
            {error, _} = Error -> Error
        end
    end).

%% @doc The text that {@link report/1} prints, as a flat binary: for `bin/rel eval', `rpc'
%% and scripts, whose output would otherwise go to the node's console.
-spec format(session() | pid()) -> binary() | {error, term()}.
format(Session) ->
    case text(Session, #{}) of
        {error, _} = Error -> Error;
        Text -> unicode:characters_to_binary(Text)
    end.

%% The report's text: its parts read from the session, local or cluster, then composed once.
text(Session, Options) ->
    case with_session(Session, fun(Id, _, _) -> ferrotrace_local:report_parts(Id) end,
                      fun ferrotrace_cluster:report_parts/1) of
        {error, _} = Error -> Error;
        Parts -> ferrotrace_report:compose(Parts, Options)
    end.

%% @doc Explains an answer `{error, Reason}' (or a `Reason', or `v(-1)' after `{ok, S} = ...'
%% failed on a refusal): what was refused, then each
%% hint and list of accepted values the error carries, as text. Typed in a shell (`erl',
%% a remote shell, IEx) it prints the lines and answers `ok'; called from anything else
%% (`bin/rel eval', `rpc', `erl -noshell'), where printed text would go to the node's
%% console, it answers the lines, which `bin/rel eval' then prints as strings (where it
%% prints a binary as `#Bin<...>').
-spec explain(term()) -> ok | [string()].
explain(Error) ->
    Lines = ferrotrace_text:explain(Error),
    %% Not the group leader: a local console shell's is the process registered as `user',
    %% as `bin/rel eval''s is.
    case ferrotrace_owner:in_shell() of
        true -> io:put_chars([[L, "\n"] || L <- Lines]);
        false -> Lines
    end.

print({error, _} = Error) -> Error;
print(Text) -> io:put_chars(Text).

%% @doc Prints a one-screen cheat sheet of the commands and specs (the options:
%% `h(ferrotrace, calls).').
-spec help() -> ok.
help() ->
    io:put_chars(ferrotrace_report:help()).

%% @doc Measures anew what a traced call costs its caller on this node, the figures that
%% `compensate' takes out and the overhead budget's estimate uses, and keeps them for the
%% starts of the next five minutes (a start reuses the node's last calibration while it is
%% fresh, and an older one while it is measured again in the background). A measurement far
%% from the last one (its pair or its refused call under half or over twice the last's) is
%% taken again and the median of the three kept (by pair; the refused call's of its own);
%% a node's first is the median of three. `{ok, Calibration}' (ns per event:
%% `call_ns', `return_ns', `pair_ns', `discard_ns', `untraced_ns'; `took_us'), or
%% `{error, Reason}' (another tool traces this process, a timeout, implausible figures).
-spec calibrate() -> {ok, ferrotrace_calibrate:calibration()} | {error, term()}.
calibrate() ->
    _ = ferrotrace_registry:ensure_started(),
    ferrotrace_calibrate:calibrate().

%%--------------------------------------------------------------------------------------
%% Ending sessions, and the sessions there are

%% @doc Stops every session started from this shell (their figures stay readable until
%% {@link release/1}, or until the shell exits): the way out when a session's id was lost,
%% as when `{ok, S} = ...' met an `S' already bound. Answers `ok'.
-spec stop() -> ok.
stop() ->
    lists:foreach(fun(Session) -> _ = stop(Session) end, shell_sessions()).

%% This shell's sessions (owned by its group leader), oldest first.
shell_sessions() ->
    Shell = {shell, group_leader()},
    [Id || #{id := Id, owner := Owner} <- lists:sort(fun(A, B) -> started(A) =< started(B) end, list()),
           Owner =:= Shell].

started(Entry) -> maps:get(started_at, Entry, 0).

%% @doc Stops the session: tracing ends, the patterns and flags it set are removed. The
%% figures stay readable until {@link release/1}. Stopping a stopped session is `ok'.
%% Never an exit: a session whose keeper was killed or released it meanwhile answers
%% `{error, {no_such_session, Id}}' once what it set is removed.
%% `stop(all)' stops every session on this node (whoever started it; `list/0' shows them).
-spec stop(session() | pid() | all) -> ok | {error, term()}.
stop(all) ->
    lists:foreach(fun(#{id := Id}) -> _ = stop(Id) end, list());
stop(Session) ->
    with_session(Session, fun ferrotrace_local:stop/3, fun ferrotrace_cluster:stop/1).

%% @doc Stops the session and frees everything it holds; its id is dead afterwards.
%% Never an exit: as {@link stop/1}, `{error, {no_such_session, Id}}' for a session that
%% another client released meanwhile.
-spec release(session() | pid()) -> ok | {error, term()}.
release(Session) ->
    with_session(Session, fun ferrotrace_local:release/3, fun ferrotrace_cluster:release/1).

%% @doc Every session on this node not yet released, oldest first: its `id', `name',
%% `status', `stop_reason', `spec' (what `calls/2' traces, as {@link add/2} and
%% {@link remove/2} changed it; `raw' for {@link session/1}),
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
              case ferrotrace_tracer:session_status(Id) of
                  {ok, #{status := Status, stop_reason := Reason}} ->
                      {true, maps:merge(maps:with([spec, owner, started_at, left_at], Info),
                                        #{id => Id, name => Name, status => Status,
                                          stop_reason => Reason, keeper => Keeper})};
                  _ ->
                      false
              end
      end, ferrotrace_registry:sessions()).

%%--------------------------------------------------------------------------------------
%% The live view (ferrotrace_watch)

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
-spec watch(session(), ferrotrace_watch:options() | [{atom(), term()}]) ->
          ok | {error, term()}.
watch(Session, Options) ->
    ferrotrace_watch:watch(Session, Options).

%%--------------------------------------------------------------------------------------
%% Exports (ferrotrace_export)

%% @doc The figures of `Session' in a format other tools read, as bytes. `Format' is
%% `hdr_log' (HdrHistogram interval log, V2 compressed, one histogram per function tagged
%% `m:f/a', in ns), `json' (the summary; field names as in {@link summary/1}), `collapsed'
%% (folded stacks `a;b;c Ns' of the traced functions for flamegraph.pl, inferno and
%% speedscope), or `{collapsed, #{weight => inclusive | exclusive}}' (default exclusive:
%% the time in a function less the traced calls it made); `chrome_trace' (the flight
%% recorder's calls as Chrome trace-event JSON for Perfetto and chrome://tracing; a session
%% without `recent => N' answers `{error, {needs, recent}}'), or `html' (one self-contained
%% page to open in a browser from disk, no network: the report's header, the function table
%% sortable by any column, each function's latency distribution, its p50/p90/p99 over time
%% with `intervals', its slowest calls with their arguments, the recorder's last events, a
%% zoomable flame graph of own time by call path, process activity; see
%% {@link ferrotrace_html}; `{html, #{recursion => keep}}' draws each level of a direct
%% recursion, folded into one frame by default). A cluster session's export is its merged figures (`html': a
%% merged view and one per node). See {@link ferrotrace_export}. A pair `{A, B}' of sides
%% as {@link compare/3} takes them exports as `collapsed' (the differential folded form,
%% `path OwnNsA OwnNsB' a line, as difffolded writes it) or `html' (the comparison's table
%% and a differential flame graph; `{html, Options}' takes compare/3's options).
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

export_with({A, B}, Format, Options)
  when not (is_tuple(B) andalso tuple_size(B) =:= 2 andalso is_integer(element(1, B))) ->
    %% A pair of sides (a window {S, {From, To}} is one side, not a pair).
    case ferrotrace_options:to_map(Options) of
        {ok, Map} -> unwrap(ferrotrace_compare:export(A, B, Format, Map));
        {error, _} = Error -> Error
    end;
export_with(Session, Format, Options0) ->
    named(Session, fun(S) ->
        case ferrotrace_export:check(Format, Options0) of
            {ok, Options} ->
                unwrap(with_session(S, fun(Id, _, _) -> ferrotrace_export:local(Id, Format, Options) end,
                                    fun(Cluster) -> ferrotrace_cluster:export(Cluster, Format, Options) end));
            {error, _} = Error ->
                Error
        end
    end).

unwrap({ok, Bytes}) -> Bytes;
unwrap({error, _} = Error) -> Error.

%%--------------------------------------------------------------------------------------
%% Prometheus (ferrotrace_metrics)

%% @doc Serves the figures of `Session' for Prometheus on `127.0.0.1:9568': see
%% {@link serve/2}.
-spec serve(session() | pid()) -> {ok, string() | [{node(), string()}]} | {error, term()}.
serve(Session) ->
    serve(Session, #{}).

%% @doc Serves the figures of `Session' for Prometheus to scrape, in its text format 0.0.4,
%% until the session is released or {@link unserve/1}: answers `{ok, Url}'
%% (`"http://127.0.0.1:9568/metrics"'). Per function (labelled `node', `session', its name
%% or id, and `function', as the report names it) a latency histogram
%% `ferrotrace_call_duration_seconds' and the counters `ferrotrace_calls_total' and
%% `ferrotrace_call_exceptions_total'; the session's health (events seen, dropped, sampled
%% out, over a limit, refused by the budget's fuse, processes untraced, memory, the budget's
%% estimate and rate, the functions shed); with other kinds (`processes/2', `also') the
%% wakeup, run slice, GC pause, lifetime and message size histograms. Counters count from
%% the session's start and never reset. Every family: doc/prometheus.md.
%% `Options' (a map or a list of pairs):
%% <ul>
%% <li>`port => 0..65535': default 9568; `0' takes any free port (the answer's URL says
%% which);</li>
%% <li>`ip => Address': where to listen, default `{127,0,0,1}' (this host only); `any', a
%% tuple or a string (`"10.0.0.5"');</li>
%% <li>`path => "/metrics"': the one path answered (GET only: another path is 404, another
%% method 405, a malformed request 400);</li>
%% <li>`buckets => [Seconds]': the histograms' `le' bounds, ascending (default 1 µs to 60 s,
%% 1, 2.5 and 5 a decade); fixed for the session's life: a later serve takes the same or
%% none.</li>
%% </ul>
%% A stopped session is served as it stopped (`ferrotrace_session_running' 0). The
%% endpoint is one of ferrotrace's own processes (high priority, never traced); it takes at
%% most 8 connections at a time, each with one request within 5 s, and renders at most once
%% per ten times its last render took. A cluster session serves each node's figures on
%% that node (`{ok, [{Node, Url}]}'; `port => 0' picks a port per node). Errors:
%% `{error, {port_in_use, Port, Hint}}', `{error, {bad_option, {Key, Value, Accepted}}}',
%% `{error, {already_served, Url, Hint}}', `{error, {released, Id, Hint}}'.
-spec serve(session() | pid(), map() | [{atom(), term()}]) ->
          {ok, string() | [{node(), string()}]} | {error, term()}.
serve(Session, Options) ->
    named(Session, fun(S) ->
        case ferrotrace_metrics:check(Options) of
            {ok, Settings} ->
                with_session(S, fun(Id, Keeper, Info) -> ferrotrace_metrics:serve(Id, Keeper, Info, Settings) end,
                             fun(Cluster) -> ferrotrace_cluster:serve(Cluster, Settings) end);
            {error, _} = Error ->
                Error
        end
    end).

%% @doc Stops serving `Session' (its socket closed); `ok', also for a session not served.
-spec unserve(session() | pid()) -> ok | {error, term()}.
unserve(Session) ->
    with_session(Session, fun ferrotrace_metrics:unserve/3, fun ferrotrace_cluster:unserve/1).

%%--------------------------------------------------------------------------------------
%% What changed (ferrotrace_compare)

%% @doc What changed from `A' to `B', printed: see {@link compare/3}.
-spec compare(term(), term()) -> ok | {error, term()}.
compare(A, B) ->
    case compare(A, B, #{}) of
        {error, _} = Error -> Error;
        _ -> ok
    end.

%% @doc What changed from `A' to `B': one row per function in both, sorted by the change
%% in total time, with the calls, p50 and p99 of A and B and their ratio, the change in
%% total and own time, and a verdict: `slower', `faster', `unchanged', `p99 slower' (or
%% faster: the tail moved, the rest did not), `too few calls'; then the functions of one
%% side only. `A' and `B' are each a session (id, name, cluster pid; running or stopped),
%% `{Session, {FromMs, ToMs}}' (a window of a session started with `intervals', ms from
%% its start), or a file written by {@link save/2}.
%%
%% A verdict is a test, not a reading by eye: a rank-sum test on all calls and a test of
%% the p99, each asking whether B is slower (or faster) than A by more than a margin, at the
%% level asked, Holm's correction over every test of the comparison. With five functions or
%% more, the margin is taken around the shift they all share (the node's load or CPU,
%% printed on the `node:' line). Sampled sides are tested on the calls they timed;
%% compensated and raw latencies never mix (one of each: both compared raw). Details and
%% assumptions: doc/comparing.md. `Options' (a map or a proplist):
%% <ul>
%% <li>`level => 0.99': the family-wise level of the verdicts (0.5 to below 1);</li>
%% <li>`min_change => auto | F': the margin of the rank-sum test, a fraction (auto: 0.1
%% around the node's shift, 0.25 where it is not read);</li>
%% <li>`min_tail_change => auto | F': the margin of the tail test (auto: 0.25, or 0.5);</li>
%% <li>`tail => 0.99': the tail quantile tested;</li>
%% <li>`min_calls => 20': timed calls each side needs for a verdict;</li>
%% <li>`node_shift => auto | none': read the shift every function shares (auto, from five
%% functions or more), or test each function's change alone;</li>
%% <li>`top => 20 | all', `width => Columns': the rows and width of the table;</li>
%% <li>`as => print | text | map': print the table (`ok'), answer it as a binary, or
%% answer `{ok, Comparison}', its figures.</li>
%% </ul>
%% Refusals: `{error, {not_a_saved_session, File, Hint}}', `{future_version, File, V,
%% Hint}', `{different_kinds, KindA, KindB, Hint}', `{released, Id, Hint}',
%% `{window_outside, Window, Hint}', `{needs, intervals, Hint}', a bad option.
-spec compare(term(), term(), ferrotrace_compare:options() | [{atom(), term()}]) ->
          ok | binary() | {ok, ferrotrace_compare:comparison()} | {error, term()}.
compare(A, B, Options) ->
    ferrotrace_compare:compare(A, B, Options).

%% @doc Writes what {@link compare/3} needs of `Session' to `File' (JSON, `"format":
%% "ferrotrace.saved"', version 1; doc/comparing.md lists its fields): per function its
%% counts, total and own time and its HDR histograms (HdrHistogram V2, base64), with the
%% session's kind, node, OTP release, span, compensation and sampling, and its call paths by
%% own time. `Session' is any side compare/3 takes. Compare it later, on any machine with
%% Erlang: `ferrotrace compare before.json after.json'.
-spec save(term(), file:name_all()) -> ok | {error, term()}.
save(Session, File) ->
    ferrotrace_saved:save(Session, File).

%% What a calls/2 session keeps by default for the html page (ferrotrace_html), where the
%% options do not say: the last 200 events (the flight recorder, on the collector thread)
%% and each function's histogram per second, at most 60 intervals (then neighbours merge:
%% the page draws at most 60 points a function). A spec with a `'_' ' module takes one
%% every 5 s: each interval's read is a dirty pass over every function (12 to 51 ms for
%% about 300 functions on a busy node, doc/safety.md), which a broad session on a busy
%% node should not pay every second. A session left on (`duration => infinity') keeps no
%% intervals unless asked. `recent => 0' and `intervals => none' turn them off.
%% Applied once here, so a cluster's parts get them with the options. Their cost:
%% bench/ferrotrace_bench.erl's `ferrotrace_page' case. Options that are no map nor
%% proplist go on as they are (refused further on).
page_defaults(Spec, Options0) ->
    case ferrotrace_options:to_map(Options0) of
        {ok, Options} ->
            Recent = maps:merge(#{recent => 200}, Options),
            Every = case any_module(Spec) of
                        true -> 5000;
                        false -> 1000
                    end,
            case {maps:get(intervals, Recent, default), maps:get(duration, Recent, finite)} of
                %% Left on (`infinity'): a few KB a function, as the always-on mode promises;
                %% its intervals are asked for.
                {default, infinity} -> Recent;
                {default, _} -> maps:merge(#{intervals => Every, max_intervals => 60}, Recent);
                {none, _} -> maps:remove(intervals, Recent);
                _ -> Recent
            end;
        {error, _} ->
            Options0
    end.

%% Whether a spec (or a list of them) names every module (`{'_', F, A}').
any_module(Specs) when is_list(Specs) -> lists:any(fun any_module/1, Specs);
any_module(Spec) when is_tuple(Spec), tuple_size(Spec) >= 1 -> element(1, Spec) =:= '_';
any_module(_) -> false.
