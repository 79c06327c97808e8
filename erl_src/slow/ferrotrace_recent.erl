%%% @doc The flight recorder: with `recent => N' a session keeps the last N events of its
%%% traced functions (calls, returns, exceptions; memory for N events, allocated at start).
%%% {@link ferrotrace:recent/1} returns them, {@link ferrotrace:print_recent/1} prints them
%%% as recon_trace-like lines:
%%% ```
%%% 13:55:09.123456 <0.123.0> shop_api:checkout/1
%%% 13:55:09.168001 <0.123.0> shop_api:checkout/1 --> return (44.5 ms)
%%% '''
%%% With `args => true' the arguments and results are copied (bounded by `max_term_bytes')
%%% and printed, with depth limits, as recon_trace does:
%%% ```
%%% 13:55:09.123456 <0.123.0> shop_api:checkout(#{cart => [...],user => 42})
%%% 13:55:09.168001 <0.123.0> shop_api:checkout/1 --> {ok,42} (44.5 ms)
%%% '''
%%% otherwise functions show as `m:f/A'.
-module(ferrotrace_recent).

-export([events/1, lines/1]).

%% Depth to which arguments and results are printed (io_lib:format's ~P).
-define(DEPTH, 12).

-type event() :: #{at := integer(), pid := pid(), mfa := mfa(),
                   event := call | return | exception,
                   duration := non_neg_integer() | undefined,
                   args => [term()] | tuple(),
                   result => {return, term()} | {exception, atom(), term()}}.
-export_type([event/0]).

%% @doc The recorded events of session `Id', oldest first.
-spec events(ferrotrace_tracer:session_id()) -> [event()] | {error, term()}.
events(Id) ->
    case ferrotrace_tracer:session_recent(Id) of
        {ok, #{events := Events}} -> Events;
        {error, no_recorder} -> {error, {no_recorder, <<"start the session with recent => N">>}};
        {error, _} = Error -> Error
    end.

%% @doc One line per event: time (local, µs), pid, function and, for a return or an
%% exception, `--> return' or `--> exception' with the call's duration when it paired.
-spec lines([event()]) -> iodata().
lines(Events) ->
    [line(E) || E <- Events].

%% A pid as `<0.123.0>'; anything else a session was handed as the tracee (junk given to
%% the tracer's trace/5 by hand) printed as it is, cut short, not a badarg.
pid_text(Pid) when is_pid(Pid) -> pid_to_list(Pid);
pid_text(Other) -> io_lib:format("~P", [Other, 4]).

line(#{at := At, pid := Pid, mfa := {M, F, _} = MFA, event := Kind, duration := D} = E) ->
    Time = [ferrotrace_slow:format_time(At), " ", pid_text(Pid), " "],
    Head = [Time, ferrotrace_names:mfa(MFA)],
    Result = case E of
                 #{result := {return, V}} -> io_lib:format("~P", [V, ?DEPTH]);
                 #{result := {exception, C, R}} -> io_lib:format("~p:~P", [C, R, ?DEPTH]);
                 _ -> atom_to_list(Kind)
             end,
    case Kind of
        call when is_map_key(args, E) ->
            [Time, io_lib:format("~p:~p(~ts)", [M, F, args_text(maps:get(args, E))]), "\n"];
        call -> [Head, "\n"];
        _ when D =:= undefined -> [Head, " --> ", Result, "\n"];
        _ -> [Head, " --> ", Result, " (", ferrotrace_text:format_ns(D), ")\n"]
    end.

%% An argument list as recon_trace prints it: the arguments, comma separated, each printed
%% with a depth limit; a cut list (`{ferrotrace_truncated, N, Partial}') as the marker.
args_text(Args) when is_list(Args) ->
    lists:join(", ", [io_lib:format("~P", [A, ?DEPTH]) || A <- Args]);
args_text(Marker) ->
    io_lib:format("~P", [Marker, ?DEPTH]).
