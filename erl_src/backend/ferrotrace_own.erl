%%% @private
%%% @doc ferrotrace's own processes: a guest on a loaded node, with a badge.
%%%
%%% An operator reaches for ferrotrace when the schedulers are full. Its processes (the
%%% registry and its tables' owner, each session's keeper, the overhead budget's tick, the
%%% interval snapshots, the calibration) then compete with every runnable process for a
%%% share of a scheduler: at normal priority, on two schedulers kept busy by 50 processes,
%%% a broad start took 15 to 26 s. So each of them runs at `high' priority (its work is
%%% bounded: a start, a tick, a read), and none is ever traced, whatever a session's
%%% `pids' says: under `{'_','_','_'}' their every call would be an event, and a budget's
%%% tick that traces itself starves.
%%%
%%% Every own process calls {@link enter/0} first: the backend records it and takes off any
%%% trace flag it was born with, and takes its flags off again whenever a session sets flags
%%% on `all' or `existing' processes (see ferrotrace_backend, which owns the trace state).
-module(ferrotrace_own).

-export([spawn_options/0, enter/0, leave/0, pids/0]).

%% @doc The options an own process is spawned with (`spawn_opt/2', a gen_server's
%% `{spawn_opt, _}').
-spec spawn_options() -> [{priority, high}].
spawn_options() ->
    [{priority, high}].

%% @doc Makes the calling process one of ferrotrace's own: high priority, recorded, and
%% untraced. Called first by each own process.
-spec enter() -> ok.
enter() ->
    _ = process_flag(priority, high),
    ferrotrace_backend:enter().

%% @doc Forgets the calling process as one of ferrotrace's own, as it ends: one that lives
%% a few ms (ferrotrace_barrier's), born again and again.
-spec leave() -> ok.
leave() ->
    ferrotrace_backend:leave().

%% @doc The own processes alive now.
-spec pids() -> [pid()].
pids() ->
    ferrotrace_backend:own_pids().
