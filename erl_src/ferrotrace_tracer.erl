%%% @doc The ferrotrace tracer module: an `erl_tracer' whose callbacks are Rust NIFs.
%%%
%%% Use it as any tracer module, with a session from {@link ferrotrace:session/1} as its state:
%%% ```
%%% {ok, S} = ferrotrace:session(#{}),
%%% erlang:trace(Pid, true, [call, {tracer, ferrotrace_tracer, S}]).
%%% '''
%%% The callbacks follow the `erl_tracer' contract (the module does not declare
%%% `-behaviour(erl_tracer)': on OTP 25 that declaration warns, as the preloaded module has
%%% no `behaviour_info'):
%%% <ul>
%%% <li>`enabled/3', `enabled_call/3', `enabled_procs/3': `trace' for the events a running
%%% session aggregates (`call'; `exit' from `procs' tracing), `discard' for the rest, and `remove' once the state is not a running session, so the VM unhooks the
%%% tracer from each tracee as it next produces an event.</li>
%%% <li>`trace/5': stamps the event and queues it in the calling scheduler thread's ring.</li>
%%% </ul>
%%% `trace_call/5' is deliberately not exported: under meta tracing OTP 25 calls it as the
%%% enabled check with only three valid arguments.
%%%
%%% The other exported functions are the engine's management NIFs used by `ferrotrace';
%%% call `ferrotrace' instead.
-module(ferrotrace_tracer).

-export([enabled/3, enabled_call/3, enabled_procs/3, trace/5]).
-export([enabled_send/3, enabled_receive/3, enabled_garbage_collection/3,
         enabled_running_procs/3, enabled_running_ports/3, enabled_ports/3]).
-export([session_events/1, session_event_histogram/2, session_set_events/2]).
-export([session_set_call_sample/2, session_call_sample/1, session_set_compensation/3]).
-export([session_set_fuse/2, session_fuse/1]).
-export([session_settle_exits/1]).
-export([check_options/1, new_session/2, stop_session/2, release_session/1, sessions/0,
         session_summary/1, session_status/1, session_counts/1, session_histogram/2, session_set_tracing/3, session_exclude_modules/2, session_add_loops/2,
         session_interval/1]).
-export([session_slow_calls/3, session_recent/1, session_trees/2, session_set_tree_roots/2]).
-export([session_set_capture/5, session_capture_counts/1]).
-export([session_histograms_bytes/1, session_tagged_histograms/1, session_collapsed/2,
         session_function_histograms/1,
         histogram_merge/1, histogram_figures/1, hdr_log/2, to_json/1, session_stack_counts/1,
         histogram_subtract/2]).
-export([copy_term/2]).
-export([session_metrics/3]).
-export([flamegraph_svg/2, to_json_compact/1]).

-on_load(load_nif/0).

-type session_id() :: pos_integer().
-export_type([session_id/0]).

-define(NOT_LOADED, erlang:nif_error({not_loaded, ?MODULE})).

%% Where a failed load leaves its path and reason: the code server answers only
%% `on_load_failure' to the loader and logs the rest, and this module is not loaded
%% afterwards, so ferrotrace_code (same key) reads them here to answer
%% `{error, {nif_not_loaded, Path, Reason}}'.
-define(LOAD_FAILURE, {ferrotrace_tracer, nif_load_failure}).

-spec load_nif() -> ok | {error, term()}.
load_nif() ->
    %% Unpinned = 0: the library keeps itself mapped for the life of the VM, so that after a
    %% purge and a reload its stopped sessions' figures stay readable until released.
    %% 1 (ferrotrace attach): a purge unmaps it, and detach leaves no library behind.
    {Dir, Unpinned} =
        case {application:get_env(ferrotrace, nif_dir), code:priv_dir(ferrotrace)} of
            {{ok, NifDir}, _} ->
                %% Set by `ferrotrace attach' (the bundle) for as long as this load takes:
                %% where it wrote the library on a node that has no ferrotrace installed.
                {NifDir, 1};
            {undefined, {error, bad_name}} ->
                %% Not installed as an application: priv/ beside ebin/.
                {filename:join(filename:dirname(filename:dirname(code:which(?MODULE))), "priv"), 0};
            {undefined, PrivDir} ->
                {PrivDir, 0}
        end,
    Path = filename:join(Dir, "libferrotrace_nif"),
    case erlang:load_nif(Path, Unpinned) of
        ok ->
            %% Erased only when there (an erase costs every process a scan).
            _ = persistent_term:get(?LOAD_FAILURE, none) =/= none andalso persistent_term:erase(?LOAD_FAILURE),
            ok;
        {error, Reason} = Error ->
            %% A put of an equal value changes nothing (no global scan on a retry).
            persistent_term:put(?LOAD_FAILURE, {library_file(Path), Reason}),
            Error
    end.

%% The file erlang:load_nif/2 opened for `Path' (it adds the OS's extension).
library_file(Path) ->
    case os:type() of
        {win32, _} -> Path ++ ".dll";
        _ -> Path ++ ".so"
    end.

%% erl_tracer callbacks

%% @doc The VM asks whether an event of tag `TraceTag' should be traced.
-spec enabled(atom(), term(), pid() | port() | undefined) -> trace | discard | remove.
enabled(_TraceTag, _TracerState, _Tracee) -> ?NOT_LOADED.

%% @doc As {@link enabled/3} for `call' events.
-spec enabled_call(atom(), term(), pid() | port() | undefined) -> trace | discard | remove.
enabled_call(_TraceTag, _TracerState, _Tracee) -> ?NOT_LOADED.

%% @doc As {@link enabled/3} for `procs' events: `trace' for `exit' (a process's exit closes
%% its open calls), `discard' for `spawn', `link' and the other process events.
-spec enabled_procs(atom(), term(), pid() | port() | undefined) -> trace | discard | remove.
enabled_procs(_TraceTag, _TracerState, _Tracee) -> ?NOT_LOADED.

%% @doc Receives one trace event and queues it for aggregation.
%% The other tags' checks: `trace' while the session runs (the NIF's callbacks/activity.rs).
-spec enabled_send(atom(), term(), pid() | port() | undefined) -> trace | discard | remove.
enabled_send(_TraceTag, _TracerState, _Tracee) -> ?NOT_LOADED.
-spec enabled_receive(atom(), term(), pid() | port() | undefined) -> trace | discard | remove.
enabled_receive(_TraceTag, _TracerState, _Tracee) -> ?NOT_LOADED.
-spec enabled_garbage_collection(atom(), term(), pid() | port() | undefined) -> trace | discard | remove.
enabled_garbage_collection(_TraceTag, _TracerState, _Tracee) -> ?NOT_LOADED.
-spec enabled_running_procs(atom(), term(), pid() | port() | undefined) -> trace | discard | remove.
enabled_running_procs(_TraceTag, _TracerState, _Tracee) -> ?NOT_LOADED.
-spec enabled_running_ports(atom(), term(), pid() | port() | undefined) -> trace | discard | remove.
enabled_running_ports(_TraceTag, _TracerState, _Tracee) -> ?NOT_LOADED.
-spec enabled_ports(atom(), term(), pid() | port() | undefined) -> trace | discard | remove.
enabled_ports(_TraceTag, _TracerState, _Tracee) -> ?NOT_LOADED.

-spec trace(atom(), term(), pid() | port() | undefined, term(), map()) -> ok.
trace(_TraceTag, _TracerState, _Tracee, _Message, _Opts) -> ?NOT_LOADED.

%% Engine management (internal; see ferrotrace)

%% @private
%% What new_session/2 would answer of the engine's options, with no session made.
-spec check_options(map()) -> ok | {error, term()}.
check_options(_Options) -> ?NOT_LOADED.

%% @private
-spec new_session(map(), pid()) -> {ok, session_id()} | {error, term()}.
new_session(_Options, _Keeper) -> ?NOT_LOADED.

%% @private
-spec stop_session(session_id(), user | owner_down) -> ok | {error, term()}.
stop_session(_Id, _Reason) -> ?NOT_LOADED.

%% @private
-spec release_session(session_id()) -> ok | {error, term()}.
release_session(_Id) -> ?NOT_LOADED.

%% @private
-spec sessions() -> [session_id()].
sessions() -> ?NOT_LOADED.

%% @private
-spec session_summary(session_id()) -> {ok, map()} | {error, term()}.
session_summary(_Id) -> ?NOT_LOADED.

%% @private
%% @doc Whether session `Id' runs, and why it stopped (`undefined' while it runs), as in its
%% summary, without reading any figure: for polls (`ferrotrace:list/0', a cluster session's
%% parts).
-spec session_status(session_id()) ->
          {ok, #{status := running | stopped, stop_reason := atom(), elapsed_ms := non_neg_integer()}} |
          {error, term()}.
session_status(_Id) -> ?NOT_LOADED.

%% @private
%% @doc What the overhead budget's tick reads (ferrotrace_overhead): `status',
%% `elapsed_ms', `events' (`seen', `sampled_out', `frames_refused', `fuse_refused',
%% `untraced'), `collector_cpu_ns' as in the summary, `calls' as `[{MFA, Count}]', without
%% reading any histogram, and `untraced_pids': the processes the session's fuse untraced
%% since the last read (each given once; at most 1,024 a read and aggregator).
-spec session_counts(session_id()) ->
          {ok, #{status := running | stopped, elapsed_ms := non_neg_integer(),
                 events := #{seen := non_neg_integer(), sampled_out := non_neg_integer(),
                             frames_refused := non_neg_integer(), fuse_refused := non_neg_integer(),
                             untraced := non_neg_integer()},
                 collector_cpu_ns := non_neg_integer(), calls := [{mfa(), non_neg_integer()}],
                 untraced_pids := [pid()]}} |
          {error, term()}.
session_counts(_Id) -> ?NOT_LOADED.

%% @private
%% @doc Forgets the calls left open by processes that died inside them (abandoned, as at an
%% exit event): a calls-only session traces no `procs', so the VM sends it no exit (its
%% keeper calls this every second, and a summary first). `open': processes with calls open;
%% `exited': those of them found dead. Nothing for a stopped session, or one that traces
%% activity (its exits come from the VM).
-spec session_settle_exits(session_id()) ->
          {ok, #{open := non_neg_integer(), exited := non_neg_integer()}} | {error, term()}.
session_settle_exits(_Id) -> ?NOT_LOADED.

%% @private
-spec session_histogram(session_id(), mfa()) ->
          {ok, [{non_neg_integer(), non_neg_integer(), non_neg_integer()}]} | {error, term()}.
session_histogram(_Id, _MFA) -> ?NOT_LOADED.

%% @private
-spec session_set_tracing(session_id(), [ferrotrace:mfa_spec()], [mfa()]) -> ok | {error, term()}.
session_set_tracing(_Id, _Specs, _Loops) -> ?NOT_LOADED.

%% @private
%% Session `Id' never aggregates the functions of `Modules' from now on, whatever its
%% specs: ferrotrace's own, which a `'_'' module's pattern covers until the keeper takes
%% them off (their events count as `foreign_events'). `ok', `{error, {bad_module, Term}}'
%% for a module that is not an atom, or `{error, {no_such_session, Id}}'.
-spec session_exclude_modules(session_id(), [module()]) -> ok | {error, term()}.
session_exclude_modules(_Id, _Modules) -> ?NOT_LOADED.

%% @private
%% @doc Tells the engine that these loops found at run time are no longer return traced:
%% their calls are counted, not paired, and their frames leave the frame bound.
-spec session_add_loops(session_id(), [mfa()]) -> ok | {error, term()}.
session_add_loops(_Id, _Loops) -> ?NOT_LOADED.

%% @private
%% @doc Gives the session a capture gate (`capture'): from now on each paired call of
%% `SlowerThanNs' or slower is offered to it; at most one per `EveryMs' and `Max' in all are sent
%% to `Pid' as `{ferrotrace_capture, Id, #{mfa, pid, latency, started_at}}' (ferrotrace_capture).
-spec session_set_capture(session_id(), pos_integer(), non_neg_integer(), pos_integer(), pid()) ->
          ok | {error, term()}.
session_set_capture(_Id, _SlowerThanNs, _EveryMs, _Max, _Pid) -> ?NOT_LOADED.

%% @private
%% @doc The capture gate's counts, `none' for a session without captures.
-spec session_capture_counts(session_id()) -> {ok, map() | none} | {error, term()}.
session_capture_counts(_Id) -> ?NOT_LOADED.

%% @private
%% @doc The figures since the previous call (or the session's start), then a new interval.
-spec session_interval(session_id()) ->
          {ok, #{elapsed_ms := non_neg_integer(), calls := [map()],
                 status := running | stopped, stop_reason := atom()}} | {error, term()}.
session_interval(_Id) -> ?NOT_LOADED.

%% @private
%% @doc The slowest calls of a function kept by the session, or those over its threshold.
-spec session_slow_calls(session_id(), mfa(), slowest | threshold) -> {ok, [map()]} | {error, term()}.
session_slow_calls(_Id, _MFA, _Which) -> ?NOT_LOADED.

%% @private
%% @doc The call trees kept of root `MFA', slowest first, or (`all') what the trees hold
%% and saw (see ferrotrace_trees).
-spec session_trees(session_id(), mfa() | all) -> {ok, [map()] | map()} | {error, term()}.
session_trees(_Id, _Which) -> ?NOT_LOADED.

%% @private
%% @doc The calls of the functions `Specs' match are the roots of call trees from now on.
-spec session_set_tree_roots(session_id(), [ferrotrace:mfa_spec()]) -> ok | {error, term()}.
session_set_tree_roots(_Id, _Specs) -> ?NOT_LOADED.

%% @private
%% @doc The flight recorder's events, oldest first, and how many were recorded in all.
-spec session_recent(session_id()) ->
          {ok, #{events := [map()], total := non_neg_integer()}} | {error, term()}.
session_recent(_Id) -> ?NOT_LOADED.

%% Exports and cluster merges (internal; see ferrotrace_export and ferrotrace_cluster)

%% @private
%% @doc What a Prometheus scrape reads (ferrotrace_metrics): per function `{MFA, Calls,
%% Exceptions, TotalNs, Count, Cumulative}' with `Cumulative' the latencies at or below each
%% of `TimeBoundsNs', the activity series against the same bounds (message sizes against
%% `SizeBoundsWords'), the accounting and the memory held. Bounds strictly ascending.
-spec session_metrics(session_id(), [non_neg_integer()], [non_neg_integer()]) -> {ok, map()} | {error, term()}.
session_metrics(_Id, _TimeBoundsNs, _SizeBoundsWords) -> ?NOT_LOADED.

%% @private
%% @doc Every function's latency histogram, HdrHistogram V2 compressed.
-spec session_histograms_bytes(session_id()) -> {ok, [{mfa(), binary()}]} | {error, term()}.
session_histograms_bytes(_Id) -> ?NOT_LOADED.

%% @private
%% @doc Every function's latency, own-time and raw latency histograms (V2 compressed;
%% `undefined' where nothing was taken out of its calls), for ferrotrace_saved.
-spec session_function_histograms(session_id()) ->
          {ok, [{mfa(), binary(), binary(), binary() | undefined}]} | {error, term()}.
session_function_histograms(_Id) -> ?NOT_LOADED.

%% @private
%% @doc Every function's latency histogram, V2 compressed, tagged `m:f/a'.
-spec session_tagged_histograms(session_id()) -> {ok, [{binary(), binary()}]} | {error, term()}.
session_tagged_histograms(_Id) -> ?NOT_LOADED.

%% @private
%% @doc The call paths of the traced functions (outermost first), weighted by inclusive or
%% exclusive ns (paths of weight 0 left out), for the folded-stacks export.
-spec session_collapsed(session_id(), inclusive | exclusive) ->
          {ok, [{[mfa()], pos_integer()}], #{stacks := non_neg_integer(), overflow := non_neg_integer(),
                           too_deep := non_neg_integer()}} | {error, term()}.
session_collapsed(_Id, _Weight) -> ?NOT_LOADED.

%% @private
%% @doc The exact sum of V2 compressed histograms, V2 compressed.
-spec histogram_merge([binary()]) -> {ok, binary()} | {error, term()}.
histogram_merge(_Parts) -> ?NOT_LOADED.

%% @doc What the histogram `Later' recorded since its earlier snapshot `Earlier' (both V2
%% compressed), for hdr_log's intervals.
-spec histogram_subtract(binary(), binary()) -> {ok, binary()} | {error, term()}.
histogram_subtract(_Later, _Earlier) -> ?NOT_LOADED.

%% @private
%% @doc count, mean, p50, p90, p99, p999, max, min and power-of-two buckets of a histogram.
-spec histogram_figures(binary()) -> {ok, map()} | {error, term()}.
histogram_figures(_Bytes) -> ?NOT_LOADED.

%% @private
%% @doc An HdrHistogram interval log: start (ms since the epoch) and intervals of tagged
%% histograms `{OffsetMs, LengthMs, [{Tag, Bytes}]}'.
-spec hdr_log(non_neg_integer(), [{non_neg_integer(), non_neg_integer(), [{binary(), binary()}]}]) ->
          {ok, binary()} | {error, term()}.
hdr_log(_StartMs, _Intervals) -> ?NOT_LOADED.

%% @private
%% @doc A term of maps, lists, numbers, atoms and UTF-8 binaries as JSON text.
-spec to_json(term()) -> {ok, binary()} | {error, term()}.
to_json(_Term) -> ?NOT_LOADED.

%% @private
%% @doc As {@link to_json/1}, on one line (the html export's data).
-spec to_json_compact(term()) -> {ok, binary()} | {error, term()}.
to_json_compact(_Term) -> ?NOT_LOADED.

%% @private
%% @doc Folded stacks (`a;b;c Ns' per line) drawn as an SVG flame graph by the inferno
%% crate, titled `Title': `{error, no_stacks}' when there is no line to draw.
-spec flamegraph_svg(binary(), binary()) -> {ok, binary()} | {error, term()}.
flamegraph_svg(_Folded, _Title) -> ?NOT_LOADED.

%% @private
%% @doc Call paths kept for the collapsed export, and returned calls past the path bounds.
-spec session_stack_counts(session_id()) ->
          {ok, #{paths := non_neg_integer(), overflow := non_neg_integer(),
                 too_deep := non_neg_integer()}} | {error, term()}.
session_stack_counts(_Id) -> ?NOT_LOADED.

%% The figures of the other event kinds; see ferrotrace_activity:merge/3.
-spec session_events(session_id()) -> {ok, map()} | {error, term()}.
session_events(_Id) -> ?NOT_LOADED.

-spec session_event_histogram(session_id(), ferrotrace_activity:series()) ->
          {ok, [{non_neg_integer(), non_neg_integer(), non_neg_integer()}]} | {error, term()}.
session_event_histogram(_Id, _Series) -> ?NOT_LOADED.

%% `false': the session is calls-only (its enabled callbacks discard every tag but call and
%% exit); sessions start with `true'.
-spec session_set_events(session_id(), boolean()) -> ok | {error, term()}.
session_set_events(_Id, _Events) -> ?NOT_LOADED.

%% @doc From the next call on, session `Id' keeps 1 call in `N' of every process
%% (`sample => {calls, N}', see `ferrotrace:calls/2'): `1' keeps every call, `0' none (every
%% call is answered `discard' by `enabled_call', counted as sampled out: a pause, and the floor
%% cost of a refused call). The rate is read by each call, without entering the session; a
%% call already kept keeps its return. `{error, not_running}' if `Id' is not a running session;
%% `{error, {bad_call_sample, N, Accepted}}' for an `N' that is not an integer from 0 to
%% 1,000,000.
-spec session_set_call_sample(session_id(), non_neg_integer()) ->
          ok | {error, not_running | {bad_call_sample, term(), binary()}}.
session_set_call_sample(_Id, _N) -> ?NOT_LOADED.

%% @doc Arms the overhead budget's fuse of running session `Id' (or changes its
%% parameters): from its next call on, each scheduler thread charges the session's calls to
%% a bucket that fills at `share' of the thread's time (up to 10 ms of it), a traced call
%% `traced_ns', a refused one `refused_ns'; a call is refused (`discard') while the bucket
%% is empty, and a process whose calls keep costing past a deficit as deep is untraced
%% (`remove'; counted as `untraced', its pid given once by {@link session_counts/1}).
%% `off' turns the fuse off. `{error, not_running}'; `{error, {bad_fuse, Fuse, Accepted}}'
%% for a share outside (0, 1] or a cost outside (0, 1e9].
-spec session_set_fuse(session_id(), off | #{share := number(), traced_ns := number(), refused_ns := number()}) ->
          ok | {error, not_running | {bad_fuse, term(), binary()}}.
session_set_fuse(_Id, _Fuse) -> ?NOT_LOADED.

%% @doc Whether the fuse of running session `Id' is armed (see {@link session_set_fuse/2}),
%% and how many processes it untraced so far; reads no session memory (a poll).
-spec session_fuse(session_id()) -> {ok, off | #{untraced := non_neg_integer()}} | {error, not_running}.
session_fuse(_Id) -> ?NOT_LOADED.

%% @doc Session `Id' takes `CallNs' per inner call event and `ReturnNs' per inner return or
%% exception out of the latencies of the calls paired from now on, as the options
%% `compensate_call_ns' and `compensate_return_ns' do from the start (the probe effect, see
%% `ferrotrace:calls/2'): a node's first calibration, measured after a start on a loaded node
%% (ferrotrace_calibrate). Calls paired before keep their latencies as measured.
%% `{error, {bad_compensation, {CallNs, ReturnNs}, Accepted}}' unless both are integers from
%% 0 to 1,000,000; `{error, {no_such_session, Id}}' for an unknown session.
-spec session_set_compensation(session_id(), non_neg_integer(), non_neg_integer()) -> ok | {error, term()}.
session_set_compensation(_Id, _CallNs, _ReturnNs) -> ?NOT_LOADED.

%% @doc The current per-call rate of session `Id' (1: every call kept; see
%% {@link session_set_call_sample/2}); also in its summary, as `sample := #{calls := N}'.
-spec session_call_sample(session_id()) -> {ok, non_neg_integer()} | {error, term()}.
session_call_sample(_Id) -> ?NOT_LOADED.

%% @doc `Term' copied as a session with `args => true' and `max_term_bytes => MaxBytes'
%% copies arguments and results, and built again: for tests of the copies' bounds and
%% markers (`{ferrotrace_truncated, OriginalSize, Partial}', `{ferrotrace_opaque, Kind}').
-spec copy_term(term(), pos_integer()) -> term().
copy_term(_Term, _MaxBytes) -> ?NOT_LOADED.
