%%% @doc The flight recorder: with `recent => N' a session keeps the last N events of its
%%% traced functions (calls, returns, exceptions; memory for N events, allocated at start).
%%% {@link ferrotrace:recent/1} returns them, {@link ferrotrace:print_recent/1} prints them
%%% as recon_trace-like lines:
%%% ```
%%% 13:55:09.123456 <0.123.0> shop_api:checkout/1
%%% 13:55:09.168001 <0.123.0> shop_api:checkout/1 --> return (44.5 ms)
%%% '''
%%% Argument and result values are not kept by this version: functions show as `m:f/A'.
-module(ferrotrace_recent).

-export([events/1, lines/1]).

-type event() :: #{at := integer(), pid := pid(), mfa := mfa(),
                   event := call | return | exception,
                   duration := non_neg_integer() | undefined}.
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

line(#{at := At, pid := Pid, mfa := MFA, event := Kind, duration := D}) ->
    Head = [ferrotrace_slow:format_time(At), " ", pid_to_list(Pid), " ", ferrotrace_names:mfa(MFA)],
    case Kind of
        call -> [Head, "\n"];
        _ when D =:= undefined -> [Head, " --> ", atom_to_list(Kind), "\n"];
        _ -> [Head, " --> ", atom_to_list(Kind), " (", ferrotrace_report:format_ns(D), ")\n"]
    end.
