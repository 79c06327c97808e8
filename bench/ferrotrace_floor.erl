%% Benchmark-only erl_tracer module: the VM's floor for NIF tracers.
%%
%% Use as `{tracer, ferrotrace_floor, State}`:
%%   State = discard  enabled/3 and enabled_call/3 answer `discard`: the VM asks and stops
%%                    (the floor for asking a tracer module);
%%   State = noop     they answer `trace` and trace/5 does nothing (the floor for delivering
%%                    an event).
%% For the `trace_status` tag the answer is always `trace`; any other state answers `remove`.
%% trace_call/5 is deliberately not exported (see the product brief: meta tracing).
%%
%% The NIF library is native/ferrotrace_floor (built by bench/run.sh). It is loaded from
%% $FERROTRACE_FLOOR_SO (a path without the .so extension) when set, otherwise from
%% libferrotrace_floor next to this module's beam file.
-module(ferrotrace_floor).

-export([enabled/3, enabled_call/3, trace/5]).

-on_load(load_nif/0).

-spec load_nif() -> ok | {error, term()}.
load_nif() ->
    Path =
        case os:getenv("FERROTRACE_FLOOR_SO") of
            false ->
                filename:join(filename:dirname(code:which(?MODULE)), "libferrotrace_floor");
            P ->
                P
        end,
    erlang:load_nif(Path, 0).

-spec enabled(atom(), term(), pid() | port() | undefined) -> trace | discard | remove.
enabled(_TraceTag, _TracerState, _Tracee) ->
    erlang:nif_error(nif_not_loaded).

-spec enabled_call(atom(), term(), pid() | port() | undefined) -> trace | discard | remove.
enabled_call(_TraceTag, _TracerState, _Tracee) ->
    erlang:nif_error(nif_not_loaded).

-spec trace(atom(), term(), pid() | port() | undefined, term(), map()) -> ok.
trace(_TraceTag, _TracerState, _Tracee, _TraceTerm, _Opts) ->
    erlang:nif_error(nif_not_loaded).
