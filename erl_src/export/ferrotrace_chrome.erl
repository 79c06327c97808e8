%%% @doc The `chrome_trace' export: the flight recorder's calls (`recent => N', read through
%%% {@link ferrotrace:recent/1}) as Chrome trace-event JSON (the "JSON Object Format"),
%%% which Perfetto (ui.perfetto.dev) and chrome://tracing open.
%%%
%%% Mapping:
%%% <ul>
%%% <li>A returned call (or one that raised) is a complete event, `"ph": "X"', named `m:f/a' as the report names it
%%% (`m:f/1 (comprehension)', see {@link ferrotrace_names}),
%%% with `ts' (its start) and `dur' in whole µs, as the recorder's times are, and its exact
%%% duration in `args.duration_ns'; `cat' is `call' or `exception'. A call whose call event
%%% left the recorder's window starts at its return's time less its duration, so it still
%%% shows whole. Callees nest inside their callers (the times are floored alike).</li>
%%% <li>A call still open when the recorder was read (no return after it in the window; a
%%% stuck call, or one the window cut) is a begin event, `"ph": "B"', without an end: both
%%% viewers draw it to the end of the trace ("did not end").</li>
%%% <li>Erlang node: Chrome process (`pid' 1 for a local session, 1.. in node order for a
%%% cluster), named by a `process_name' metadata event with the node's name.</li>
%%% <li>Erlang process: Chrome thread, `tid' the process's number (`N' in `<0.N.S>', the
%%% same on every node; a number seen twice with another serial gets a fresh one above all
%%% others), named by a `thread_name' metadata event: the pid as the node prints it and its
%%% registered name, looked up when the export runs (on the process's own node).</li>
%%% <li>`ts' counts from `otherData.base_time_us', the earliest start (system time, µs
%%% since the epoch).</li>
%%% </ul>
-module(ferrotrace_chrome).

-export([document/1, names/1]).

%% One node's recorded events: the node and what ferrotrace:recent/1 answered there.
-type part() :: {node(), [ferrotrace_recent:event()]}.
-export_type([part/0]).

%% @doc The trace document of the parts (one per node, in the order they become Chrome
%% processes), ready for `ferrotrace_tracer:to_json/1'.
-spec document([part()]) -> map().
document(Parts) ->
    Numbered = lists:zip(lists:seq(1, length(Parts)), Parts),
    Spans = [{P, Node, spans(Events)} || {P, {Node, Events}} <- Numbered],
    Base = lists:min([erlang:system_time(microsecond)
                      | [S || {_, _, {Done, Open}} <- Spans,
                              S <- [S || {_, S, _, _, _, _} <- Done] ++ [S || {_, S, _} <- Open]]]),
    Events = lists:append([node_events(P, Node, Done, Open, Base)
                           || {P, Node, {Done, Open}} <- Spans]),
    #{traceEvents => Events,
      displayTimeUnit => ns,
      otherData => #{format => <<"ferrotrace.chrome_trace">>, version => 1,
                     base_time_us => Base,
                     nodes => [Node || {Node, _} <- Parts]}}.

%% Completed spans `{Pid, StartUs, EndUs, DurationNs, MFA, Result}' and open calls
%% `{Pid, StartUs, MFA}' (system time, µs). The recorder's times are whole µs (floored), its
%% durations ns: a span runs from its call's time (when the call is in the window; else the
%% return's time less the duration, floored) to its return's time, so that spans nest as
%% the calls did (a callee's floored times lie within its caller's); the exact duration is
%% in `args.duration_ns'.
spans(Events) ->
    {Done, Stacks} = lists:foldl(fun span/2, {[], #{}}, Events),
    Open = [{Pid, At, MFA} || {Pid, Stack} <- maps:to_list(Stacks), {MFA, At} <- Stack],
    {lists:reverse(Done), lists:sort(Open)}.

span(#{event := call, pid := Pid, mfa := MFA, at := At}, {Done, Stacks}) ->
    {Done, Stacks#{Pid => [{MFA, At} | maps:get(Pid, Stacks, [])]}};
span(#{event := Result, pid := Pid, mfa := MFA, at := At, duration := D}, {Done, Stacks}) ->
    %% The return closes the innermost open call of the same function (frames above it
    %% lost their return to a dropped event or a throw through them).
    Stack = maps:get(Pid, Stacks, []),
    {Called, Stacks1} =
        case lists:dropwhile(fun({M, _}) -> M =/= MFA end, Stack) of
            [{_, CallAt} | Below] -> {CallAt, Stacks#{Pid => Below}};
            [] -> {undefined, Stacks}
        end,
    case {Called, D} of
        {undefined, undefined} ->
            {Done, Stacks1};
        {undefined, _} ->
            {[{Pid, floor_div(At * 1000 - D, 1000), At, D, MFA, Result} | Done], Stacks1};
        _ ->
            {[{Pid, min(Called, At), At, D, MFA, Result} | Done], Stacks1}
    end.

floor_div(A, B) when A >= 0 -> A div B;
floor_div(A, B) -> -((-A + B - 1) div B).

node_events(P, Node, Done, Open, Base) ->
    Pids = lists:usort([element(1, S) || S <- Done ++ Open]),
    Names = names_on(Node, Pids),
    Tids = tids(Names),
    Meta = [#{name => process_name, ph => 'M', pid => P, tid => 0,
              args => #{name => atom_to_binary(Node)}}
           | [#{name => thread_name, ph => 'M', pid => P, tid => maps:get(Pid, Tids),
                args => #{name => Text}} || {Pid, _, Text} <- Names]],
    %% Callers before callees: by start, the longer first.
    Sorted = lists:sort([{Start, -(End - Start), S} || S = {_, Start, End, _, _, _} <- Done]),
    Spans = [#{name => mfa_text(MFA), cat => category(Result), ph => 'X', pid => P,
               tid => maps:get(Pid, Tids), ts => Start - Base, dur => End - Start,
               args => #{result => Result, duration_ns => D}}
             || {_, _, {Pid, Start, End, D, MFA, Result}} <- Sorted],
    Opens = [#{name => mfa_text(MFA), cat => call, ph => 'B', pid => P,
               tid => maps:get(Pid, Tids), ts => Start - Base, args => #{result => open}}
             || {Pid, Start, MFA} <- Open],
    Meta ++ Spans ++ Opens.

category(exception) -> exception;
category(_) -> call.

%% Pid numbers as tids; a number taken by another pid gets a fresh one.
tids(Names) ->
    Max = lists:max([0 | [N || {_, N, _} <- Names]]),
    {Tids, _, _} = lists:foldl(
                     fun({Pid, N, _}, {Acc, Used, Next}) ->
                             case sets:is_element(N, Used) of
                                 false -> {Acc#{Pid => N}, sets:add_element(N, Used), Next};
                                 true -> {Acc#{Pid => Next}, Used, Next + 1}
                             end
                     end, {#{}, sets:new(), Max + 1}, Names),
    Tids.

names_on(Node, Pids) when Node =:= node() ->
    names(Pids);
names_on(Node, Pids) ->
    try erpc:call(Node, ?MODULE, names, [Pids], 15000)
    catch _:_ -> [{Pid, number(Pid), pid_text(Pid)} || Pid <- Pids]
    end.

%% @doc Runs on the processes' node: `{Pid, Number, "<0.N.S> registered_name"}' per pid, the
%% registered name as it is now (none for a process that exited or has none).
-spec names([pid() | term()]) -> [{pid() | term(), non_neg_integer(), binary()}].
names(Pids) ->
    [{Pid, number(Pid),
      case is_pid(Pid) andalso node(Pid) =:= node() andalso erlang:process_info(Pid, registered_name) of
          {registered_name, Name} -> iolist_to_binary([pid_text(Pid), " ", atom_to_binary(Name)]);
          _ -> pid_text(Pid)
      end} || Pid <- Pids].

%% A tracee that is not a pid (junk given to the tracer's trace/5 by hand) is named as it
%% is, cut short, and numbered past the pids' numbers, not a badarg.
pid_text(Pid) when is_pid(Pid) -> list_to_binary(pid_to_list(Pid));
%% Cheap where it can be: the fuzz suite's list of a million integers took over 5 s
%% through io_lib.
pid_text(Integer) when is_integer(Integer) -> integer_to_binary(Integer);
pid_text(Atom) when is_atom(Atom) -> atom_to_binary(Atom);
pid_text(Other) -> iolist_to_binary(io_lib:format("~P", [Other, 4])).

number(Pid) when is_pid(Pid) ->
    [_, N | _] = string:lexemes(pid_to_list(Pid), "<.>"),
    list_to_integer(N);
number(Other) ->
    (1 bsl 32) + erlang:phash2(Other, 1 bsl 27).

%% Named as the report names it (ferrotrace_names).
mfa_text(MFA) ->
    unicode:characters_to_binary(ferrotrace_names:mfa(MFA)).
