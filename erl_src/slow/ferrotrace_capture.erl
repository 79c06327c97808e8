%%% @doc Captures (`capture => #{slower_than => Ns}'): what the node looked like when a slow
%%% call returned.
%%%
%%% The engine pushes; nothing polls. The aggregator that pairs a call as slow as
%%% `slower_than' or slower offers it to the session's capture gate (Rust,
%%% `aggregate/capture.rs'); the gate lets at most one through per `every' ms and
%%% `max_captures' in all and counts the rest (`refused_every', `refused_max'); the
%%% collector thread (off the schedulers) sends the one let through to this module's process
%%% at its next collection, within a millisecond: `{ferrotrace_capture, Id, #{mfa, pid,
%%% latency, started_at}}'. The hot path (the trace callbacks) does not change.
%%%
%%% The capture process is one of ferrotrace's own (high priority, never traced), started
%%% by the session's keeper and gone with it. On such a call it freezes:
%%% <ul>
%%% <li>`call': the slow call, `#{mfa, pid, latency (ns), started_at (system time, us)}';</li>
%%% <li>`process': the slow process now, `#{message_queue_len, reductions,
%%%     current_function, memory, name}', or `undefined' if it is gone (`name': its
%%%     registered name, `proc_lib' label or initial call, `ferrotrace_activity:name/1');</li>
%%% <li>`node': `#{run_queue_lengths, memory (erlang:memory/0 as a map), process_count}';</li>
%%% <li>`top_queues': the (at most) 10 processes with the longest non-empty message queues,
%%%     `[#{pid, name, message_queue_len}]', longest first;</li>
%%% <li>`top_reductions': the 10 processes with the most reductions since the previous
%%%     capture (or since the session started, for the first), `[#{pid, name, reductions}]';</li>
%%% <li>`recent': the flight recorder's events (`recent => N'), or `undefined';</li>
%%% <li>`tree': the tree of the root call the slow call ran in, when `trees' is on and kept it, else `undefined';</li>
%%% <li>`at' (system time, us) and `took' (how long the capture took, us).</li>
%%% </ul>
%%% The reductions baseline is one map entry per process, taken when the session starts and
%%% replaced at each capture: a capture walks every process once
%%% (`process_info(P, [message_queue_len, reductions])'), keeping the top 10s as it goes;
%%% its own process is left out.
-module(ferrotrace_capture).

-export([check/1, for_session/2, local/3, counts/1, lines/3]).

%% The default and accepted values of `capture''s keys.
-define(DEFAULT_EVERY, 1000).
-define(MAX_EVERY, 3600000).
-define(DEFAULT_MAX, 10).
-define(MAX_MAX, 1000).
-define(TOP, 10).
-define(CALL_TIMEOUT, 5000).
%% In a capture process's dictionary: what captures/1 checks before it asks.
-define(MARK, '$ferrotrace_capture').
-define(ACCEPTED, <<"a map of slower_than (ns, a positive integer; required), every (ms, at most "
                    "one capture per period: an integer from 0 to 3600000, default 1000) and "
                    "max_captures (an integer from 1 to 1000, default 10)">>).

-type settings() :: #{slower_than := pos_integer(), every := non_neg_integer(),
                      max_captures := pos_integer()}.
-type capture() :: #{call := #{mfa := mfa(), pid := pid(), latency := non_neg_integer(),
                               started_at := integer()},
                     process := #{atom() => term()} | undefined,
                     node := #{run_queue_lengths := [non_neg_integer()],
                               memory := #{atom() => non_neg_integer()},
                               process_count := non_neg_integer()},
                     top_queues := [#{pid := pid(), name := term(), message_queue_len := non_neg_integer()}],
                     top_reductions := [#{pid := pid(), name := term(), reductions := non_neg_integer()}],
                     recent := [ferrotrace_recent:event()] | undefined,
                     tree := term(),
                     at := integer(), took := non_neg_integer()}.
-type counts() :: #{seen := non_neg_integer(), sent := non_neg_integer(),
                    refused_every := non_neg_integer(), refused_max := non_neg_integer()}.
-export_type([settings/0, capture/0, counts/0]).

%% @doc Checks the value of the `capture' option, filling in the defaults: `{ok, Settings}'
%% or `{error, {bad_option, {capture, Value, Accepted}}}'.
-spec check(term()) -> {ok, settings()} | {error, {bad_option, {capture, term(), binary()}}}.
check(Capture) when is_map(Capture) ->
    %% The keys first, hinted as `trees''s are: a mistyped `slower_than' is named.
    case ferrotrace_hint:keys(Capture, [slower_than, every, max_captures], ?ACCEPTED) of
        ok -> values(Capture);
        {error, Hint} -> {error, {bad_option, {capture, Capture, Hint}}}
    end;
check(Capture) ->
    {error, {bad_option, {capture, Capture, ?ACCEPTED}}}.

values(#{slower_than := Ns} = Capture) when is_integer(Ns), Ns > 0 ->
    Every = maps:get(every, Capture, ?DEFAULT_EVERY),
    Max = maps:get(max_captures, Capture, ?DEFAULT_MAX),
    case is_integer(Every) andalso Every >= 0 andalso Every =< ?MAX_EVERY
        andalso is_integer(Max) andalso Max >= 1 andalso Max =< ?MAX_MAX of
        true -> {ok, #{slower_than => Ns, every => Every, max_captures => Max}};
        false -> {error, {bad_option, {capture, Capture, ?ACCEPTED}}}
    end;
values(Capture) ->
    {error, {bad_option, {capture, Capture, ?ACCEPTED}}}.

%% @doc For the keeper of session `Id', with `capture' in its `Settings': the capture process
%% (its pid, which the keeper records as `capture_pid' for ferrotrace:captures/1), `none'
%% without `capture', or the engine's refusal.
-spec for_session(ferrotrace_tracer:session_id(), map()) -> {ok, pid()} | none | {error, term()}.
for_session(Id, #{capture := Capture}) ->
    start(Id, Capture, self());
for_session(_Id, _Settings) ->
    none.

%% Starts session `Id''s capture process for the calling keeper (gone when the keeper
%% is), and gives the engine its capture gate.
-spec start(ferrotrace_tracer:session_id(), settings(), pid()) -> {ok, pid()} | {error, term()}.
start(Id, Settings, Keeper) when is_integer(Id), is_pid(Keeper), node(Keeper) =:= node() ->
    case check(Settings) of
        {ok, #{slower_than := Ns, every := Every, max_captures := Max}} ->
            Ref = make_ref(),
            Self = self(),
            Pid = spawn_opt(fun() -> init(Id, Keeper, Max, {Self, Ref}) end, ferrotrace_own:spawn_options()),
            %% Its baseline taken first: a process spawned after the start has all its
            %% reductions counted in the first capture.
            Monitor = erlang:monitor(process, Pid),
            receive
                {Ref, ready} -> erlang:demonitor(Monitor, [flush]);
                {'DOWN', Monitor, process, Pid, _} -> ok
            end,
            case ferrotrace_tracer:session_set_capture(Id, Ns, Every, Max, Pid) of
                ok -> {ok, Pid};
                {error, _} = Error -> exit(Pid, kill), Error
            end;
        {error, _} = Error ->
            Error
    end;
start(Id, _Settings, Keeper) ->
    {error, {bad_argument, ferrotrace_hint:brief({Id, Keeper}), <<"a session id and a local keeper pid">>}}.

%% The captures a capture process holds, oldest first; `{error, {not_a_capture, _}}' for
%% a pid that is no live capture process.
captures(Capture) when is_pid(Capture), node(Capture) =:= node() ->
    case erlang:process_info(Capture, dictionary) of
        {dictionary, Dictionary} when is_list(Dictionary) ->
            case lists:keyfind(?MARK, 1, Dictionary) of
                {?MARK, true} -> ask(Capture);
                _ -> {error, {not_a_capture, Capture}}
            end;
        _ ->
            {error, {not_a_capture, Capture}}
    end;
captures(Other) ->
    {error, {not_a_capture, ferrotrace_hint:brief(Other)}}.

ask(Capture) ->
    Ref = erlang:monitor(process, Capture),
    Capture ! {captures, self(), Ref},
    receive
        {Ref, Captures} -> erlang:demonitor(Ref, [flush]), Captures;
        {'DOWN', Ref, process, _, Reason} -> {error, {capture_down, ferrotrace_hint:brief(Reason)}}
    after ?CALL_TIMEOUT ->
            erlang:demonitor(Ref, [flush]),
            {error, timeout}
    end.

%% @doc `ferrotrace:captures/1' for a local session (as ferrotrace_dispatch calls it): the
%% capture process's captures, `[]' for a session without one, the engine's error for an id
%% it does not hold.
-spec local(ferrotrace_tracer:session_id(), pid() | none, map()) -> [capture()] | {error, term()}.
local(_Id, _Keeper, #{capture_pid := Pid}) ->
    captures(Pid);
local(Id, _Keeper, _Info) ->
    case counts(Id) of
        {ok, _} -> [];
        {error, _} = Error -> Error
    end.

%% @doc The capture gate's counts of session `Id': `seen' (calls over `slower_than'),
%% `sent' (captures asked for), `refused_every', `refused_max'; `none' without captures.
-spec counts(ferrotrace_tracer:session_id()) -> {ok, counts() | none} | {error, term()}.
counts(Id) ->
    ferrotrace_tracer:session_capture_counts(Id).

%% The slow call's tree, when the session keeps trees (`trees') and has kept the tree
%% of the root call the slow call ran in (the root returned, slow enough); `undefined'
%% otherwise (no trees, or a slow callee whose root is still running).
-spec tree(ferrotrace_tracer:session_id(), map()) -> ferrotrace_trees:tree() | undefined.
tree(Id, #{pid := Pid, started_at := StartedAt}) when is_pid(Pid), is_integer(StartedAt) ->
    case ferrotrace_trees:tree_at(Id, Pid, StartedAt) of
        {ok, Tree} -> Tree;
        none -> undefined
    end;
tree(_Id, _Call) ->
    undefined.

%% @doc The report's lines on captures: none for a session without captures, else a line
%% of counts, one of refusals, and per capture: when (local time), the call, its latency and
%% its process (pid and name); where that process was (`current_function'), its queue,
%% memory and reductions, the run queues, what the capture took; the longest queues and
%% the busiest processes (reductions since the previous capture), named, at most 3 each.
%% Each line cut to `Width'.
-spec lines([capture()] | {error, term()}, {ok, counts() | none} | {error, term()}, pos_integer()) -> iodata().
lines(Captures, {ok, #{seen := Seen, sent := Sent, refused_every := Every, refused_max := Max}}, Width)
  when is_list(Captures) ->
    Head = [io_lib:format("captures: ~b taken, ~b calls over slower_than", [length(Captures), Seen]),
            io_lib:format("  refused: ~b within every, ~b over max_captures", [Every, Max])],
    Pending = [io_lib:format("  ~b asked for, not taken yet", [Sent - length(Captures)]) || Sent > length(Captures)],
    [[ferrotrace_text:cut(Line, Width), "\n"] || Line <- Head ++ Pending ++ lists:append([line(C, Width) || C <- Captures])];
lines(_Captures, _Counts, _Width) ->
    [].

line(#{call := #{mfa := MFA, pid := Pid, latency := Latency}, at := At, process := Process,
       node := #{run_queue_lengths := Queues}, top_queues := TopQueues, took := Took} = Capture, Width) ->
    Own = case Process of
              #{message_queue_len := Q} = P ->
                  io_lib:format("    at ~ts, queue ~b, ~ts, ~b reductions",
                                [where(maps:get(current_function, P, undefined)), Q,
                                 bytes(maps:get(memory, P, 0)), maps:get(reductions, P, 0)]);
              undefined ->
                  "    gone when captured"
          end,
    Named = case Process of
                #{name := Name} -> Name;
                _ -> Pid
            end,
    [io_lib:format("  ~ts ~ts ~ts in ~ts", [ferrotrace_slow:format_time(At), ferrotrace_names:mfa(MFA),
                                             ferrotrace_text:format_ns(Latency), named(Pid, Named)]),
     Own,
     io_lib:format("    run queues ~w, the capture took ~ts", [Queues, ferrotrace_text:format_ns(Took * 1000)])]
        ++ named_top("longest queues:", [{L, P, maps:get(name, T, P)} || T = #{pid := P, message_queue_len := L} <- TopQueues], Width)
        ++ named_top("busiest (reductions):", [{R, P, maps:get(name, T, P)} || T = #{pid := P, reductions := R} <- maps:get(top_reductions, Capture, [])], Width).

%% The processes that fit in `Width' (at least one), named: `longest queues: 500 <0.120.0>
%% shop_inventory, 3 <0.98.0> shop_load:client/0'.
named_top(_Title, [], _Width) ->
    [];
named_top(Title, [First | Rest], Width) ->
    Entry = fun({N, P, Name}) -> io_lib:format("~b ~ts", [N, named(P, Name)]) end,
    Line = lists:foldl(fun(E, Acc) ->
                               Longer = [Acc, ", ", Entry(E)],
                               case string:length(Longer) =< Width of
                                   true -> Longer;
                                   false -> Acc
                               end
                       end, ["    ", Title, " ", Entry(First)], Rest),
    [Line].

%% A pid and, when it has one, its name: `<0.120.0> shop_inventory'.
named(Pid, Pid) -> io_lib:format("~p", [Pid]);
named(Pid, {erlang, apply, 2}) -> io_lib:format("~p", [Pid]);   % a plain spawn of a fun: no name
named(Pid, Name) -> io_lib:format("~p ~ts", [Pid, name_text(Name)]).

name_text({M, F, A}) when is_atom(M), is_atom(F), is_integer(A) -> ferrotrace_names:mfa({M, F, A});
name_text(Name) when is_atom(Name) -> atom_to_list(Name);
name_text(Name) -> io_lib:format("~0tP", [Name, 8]).

where({M, F, A}) when is_atom(M), is_atom(F), is_integer(A) -> ferrotrace_names:mfa({M, F, A});
where(undefined) -> "?";
where(Other) -> io_lib:format("~0tp", [Other]).

bytes(B) when B >= 1048576 -> io_lib:format("~.1f MB", [B / 1048576]);
bytes(B) when B >= 1024 -> io_lib:format("~.1f KB", [B / 1024]);
bytes(B) -> io_lib:format("~b B", [B]).

%%--------------------------------------------------------------------------------------
%% The capture process

init(Id, Keeper, Max, {Starter, Ref}) ->
    ok = ferrotrace_own:enter(),
    _ = put(?MARK, true),
    Monitor = erlang:monitor(process, Keeper),
    {_, _, Baseline} = walk(),
    Starter ! {Ref, ready},
    loop(#{id => Id, keeper => Monitor, max => Max, captures => [], baseline => Baseline}).

loop(State = #{id := Id, keeper := Keeper, max := Max, captures := Captures}) ->
    receive
        {ferrotrace_capture, Id, Call} when length(Captures) < Max ->
            {Capture, Baseline} = freeze(Id, Call, maps:get(baseline, State)),
            loop(State#{captures := [Capture | Captures], baseline := Baseline});
        {ferrotrace_capture, Id, _Call} ->
            %% The gate sends no more than max_captures: a defence only.
            loop(State);
        {captures, From, Ref} ->
            From ! {Ref, lists:reverse(Captures)},
            loop(State);
        {'DOWN', Keeper, process, _, _} ->
            ok;
        _ ->
            loop(State)
    end.

freeze(Id, Call = #{pid := Pid}, Previous) ->
    T0 = erlang:monotonic_time(microsecond),
    Process = case erlang:process_info(Pid, [message_queue_len, reductions, current_function, memory]) of
                  undefined -> undefined;
                  Info -> (maps:from_list(Info))#{name => ferrotrace_activity:name(Pid)}
              end,
    Node = #{run_queue_lengths => erlang:statistics(run_queue_lengths),
             memory => maps:from_list(erlang:memory()),
             process_count => erlang:system_info(process_count)},
    {Queues, Reductions, Baseline} = walk(Previous),
    Recent = case ferrotrace_recent:events(Id) of
                 Events when is_list(Events) -> Events;
                 {error, _} -> undefined
             end,
    Capture = #{call => Call, process => Process, node => Node,
                %% Named now: a process may be gone by the time the capture is read.
                top_queues => [#{pid => P, name => ferrotrace_activity:name(P), message_queue_len => Q}
                               || {Q, P} <- Queues, Q > 0],
                top_reductions => [#{pid => P, name => ferrotrace_activity:name(P), reductions => R}
                                   || {R, P} <- Reductions, R > 0],
                recent => Recent, tree => tree(Id, Call),
                at => erlang:system_time(microsecond),
                took => erlang:monotonic_time(microsecond) - T0},
    {Capture, Baseline}.

%% One pass over every process but this one: the top message queues, the top reductions
%% since `Previous' (a process not in it: all its reductions), and the new baseline.
walk() ->
    walk(#{}).

walk(Previous) ->
    Self = self(),
    %% ferrotrace's own processes (the session's keeper, its collector readers...) are left
    %% out of the tops: they are not what the operator looks for.
    Own = maps:from_keys(ferrotrace_own:pids(), own),
    {Queues, Reductions, Baseline} =
        lists:foldl(fun(P, Acc) when P =:= Self -> Acc;
                       (P, Acc) when is_map_key(P, Own) -> Acc;
                       (P, {Qs, Rs, Base}) ->
                            case erlang:process_info(P, [message_queue_len, reductions]) of
                                [{message_queue_len, Q}, {reductions, R}] ->
                                    Delta = R - maps:get(P, Previous, 0),
                                    {top({Q, P}, Qs), top({Delta, P}, Rs), Base#{P => R}};
                                undefined ->
                                    {Qs, Rs, Base}
                            end
                    end, {{0, []}, {0, []}, #{}}, erlang:processes()),
    {lists:reverse(element(2, Queues)), lists:reverse(element(2, Reductions)), Baseline}.

%% The `?TOP' largest, kept ascending with their count: most processes are refused by one
%% comparison with the smallest.
top(Entry, {N, Top}) when N < ?TOP ->
    {N + 1, lists:sort([Entry | Top])};
top(Entry, {N, [Smallest | Rest]}) when Entry > Smallest ->
    {N, lists:sort([Entry | Rest])};
top(_Entry, Acc) ->
    Acc.
