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
%%% How "never traced" holds: every own process calls {@link enter/0} first, which records
%%% it in this module's table and takes off any trace flag it was born with (a session
%%% tracing `new' processes gives them to every process at spawn); a keeper that has set
%%% flags on `all' or `existing' processes takes them off every recorded process at once
%%% ({@link untrace/1}). Either order of the two leaves the process untraced. On OTP 27+
%%% the flags belong to a trace session: the keepers record their sessions' handles here
%%% ({@link remember/2}), so that a process born traced by one can leave it.
%%%
%%% Almost a leaf: the registry's tables' owner creates the table ({@link new_table/0}); it
%%% calls only ferrotrace_vm, a leaf.
-module(ferrotrace_own).

-export([new_table/0, spawn_options/0, enter/0, pids/0, untrace/1, remember/2, forget/1]).

-define(TABLE, ferrotrace_own).

%% @doc Creates the table of own processes and trace sessions; its caller owns it.
-spec new_table() -> ok.
new_table() ->
    _ = ets:new(?TABLE, [named_table, public, set]),
    ok.

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
    %% Recorded before the flags are taken off: a keeper setting flags meanwhile finds it.
    _ = safe(fun() -> ets:insert(?TABLE, {self(), own}) end),
    untrace_process(self(), sessions()),
    ok.

%% @doc The own processes alive now (dead ones are forgotten as they are met).
-spec pids() -> [pid()].
pids() ->
    Recorded = case safe(fun() -> ets:match(?TABLE, {'$1', own}) end) of
                   Rows when is_list(Rows) -> [P || [P] <- Rows];
                   _ -> []
               end,
    lists:filter(fun(P) ->
                         is_process_alive(P) orelse begin _ = safe(fun() -> ets:delete(?TABLE, P) end), false end
                 end, Recorded).

%% @doc Takes every trace flag off every own process: after a session set flags on `all' or
%% `existing' processes (`legacy', or an OTP 27+ trace session's handle).
-spec untrace(legacy | {trace_session, term()}) -> ok.
untrace(Backend) ->
    Sessions = case Backend of
                   legacy -> legacy;
                   {trace_session, Session} -> [Session]
               end,
    %% The calibration (registered under its module's name while it measures) traces itself
    %% with a throwaway session of its own: left as it is.
    Calibrating = whereis(ferrotrace_calibrate),
    lists:foreach(fun(P) -> untrace_process(P, Sessions) end, pids() -- [Calibrating]).

%% @doc Records the OTP 27+ trace session of engine session `Id', for {@link enter/0}: its
%% weak reference only. The VM destroys a session when its last strong handle is gone, and
%% the keeper must stay the only holder (a killed keeper takes its session with it); the
%% weak one (`{Name, Number}', the second half of the handle) is accepted by
%% `trace:process/4' as long as the session lives.
-spec remember(term(), term()) -> ok.
remember(Id, {Strong, {Name, Number} = Weak}) when is_reference(Strong), is_atom(Name), is_integer(Number) ->
    _ = safe(fun() -> ets:insert(?TABLE, {{session, Id}, Weak}) end),
    ok;
remember(_Id, _Session) ->
    %% A handle of another shape (a later OTP): not kept, rather than kept strong. A process
    %% born traced by this session then keeps its flags until the session ends.
    ok.

%% @doc Forgets what {@link remember/2} recorded (the session is destroyed).
-spec forget(term()) -> ok.
forget(Id) ->
    _ = safe(fun() -> ets:delete(?TABLE, {session, Id}) end),
    ok.

%% The recorded trace sessions (OTP 27+), or `legacy' where the VM has none.
sessions() ->
    case ferrotrace_vm:trace_sessions() of
        true ->
            case safe(fun() -> ets:match(?TABLE, {{session, '_'}, '$1'}) end) of
                Rows when is_list(Rows) -> [S || [S] <- Rows];
                _ -> []
            end;
        false ->
            legacy
    end.

%% The legacy session's flags always; a trace session's where there are some. A process
%% that is gone, or a session destroyed meanwhile, is no error.
untrace_process(Pid, Sessions) ->
    _ = safe(fun() -> erlang:trace(Pid, false, [all]) end),
    _ = [safe(fun() -> ferrotrace_vm:trace_call(process, [S, Pid, false, [all]]) end) || is_list(Sessions), S <- Sessions],
    ok.

safe(Fun) ->
    try Fun()
    catch error:_ -> error
    end.
