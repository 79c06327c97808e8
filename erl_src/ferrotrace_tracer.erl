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
-export([new_session/2, stop_session/2, release_session/1, sessions/0,
         session_summary/1, session_histogram/2, session_set_tracing/3,
         session_interval/1]).
-export([session_slow_calls/3, session_recent/1]).
-export([copy_term/2]).

-on_load(load_nif/0).

-type session_id() :: pos_integer().
-export_type([session_id/0]).

-define(NOT_LOADED, erlang:nif_error({not_loaded, ?MODULE})).

-spec load_nif() -> ok | {error, term()}.
load_nif() ->
    Dir = case code:priv_dir(ferrotrace) of
              {error, bad_name} ->
                  %% Not installed as an application: priv/ beside ebin/.
                  filename:join(filename:dirname(filename:dirname(code:which(?MODULE))), "priv");
              PrivDir ->
                  PrivDir
          end,
    erlang:load_nif(filename:join(Dir, "libferrotrace_nif"), 0).

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
-spec trace(atom(), term(), pid() | port() | undefined, term(), map()) -> ok.
trace(_TraceTag, _TracerState, _Tracee, _Message, _Opts) -> ?NOT_LOADED.

%% Engine management (internal; see ferrotrace)

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
-spec session_histogram(session_id(), mfa()) ->
          {ok, [{non_neg_integer(), non_neg_integer(), non_neg_integer()}]} | {error, term()}.
session_histogram(_Id, _MFA) -> ?NOT_LOADED.

%% @private
-spec session_set_tracing(session_id(), [ferrotrace:mfa_spec()], [mfa()]) -> ok | {error, term()}.
session_set_tracing(_Id, _Specs, _Loops) -> ?NOT_LOADED.

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
%% @doc The flight recorder's events, oldest first, and how many were recorded in all.
-spec session_recent(session_id()) ->
          {ok, #{events := [map()], total := non_neg_integer()}} | {error, term()}.
session_recent(_Id) -> ?NOT_LOADED.

%% @doc `Term' copied as a session with `args => true' and `max_term_bytes => MaxBytes'
%% copies arguments and results, and built again: for tests of the copies' bounds and
%% markers (`{ferrotrace_truncated, OriginalSize, Partial}', `{ferrotrace_opaque, Kind}').
-spec copy_term(term(), pos_integer()) -> term().
copy_term(_Term, _MaxBytes) -> ?NOT_LOADED.
