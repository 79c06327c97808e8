%%% @doc The slow calls a session kept: lookups behind {@link ferrotrace:slowest/2} and
%%% {@link ferrotrace:slow_calls/2}, and the lines {@link ferrotrace:report/1} prints under
%%% each histogram.
%%%
%%% The engine keeps, per traced function, the K slowest calls (`slowest => K', default 10,
%%% `0' turns it off) and, with `threshold => Ns', every call slower than `Ns' up to
%%% `max_slow_calls' (default 1000) per function, counting the excess in the call entry's
%%% `slow_calls_dropped'. Each kept call is a map `#{pid, started_at, duration, result}':
%%% `started_at' in system time (microseconds, as `erlang:system_time(microsecond)'),
%%% `duration' in nanoseconds, `result' `return' or `exception'. With `args => true' the
%%% session copies arguments and results (bounded by `max_term_bytes'): each kept call also
%%% has `args' (the argument list) and `result' is `{return, Value}' or
%%% `{exception, Class, Reason}'. A copy larger than `max_term_bytes' is cut where it stood:
%%% `{ferrotrace_truncated, OriginalSize, Partial}' (see the README).
-module(ferrotrace_slow).

-export([calls/3, lines/2, process_name/1, format_time/1]).

-type slow_call() :: #{pid := pid(), started_at := integer(), duration := non_neg_integer(),
                       result := return | exception | {return, term()}
                               | {exception, atom(), term()},
                       args => [term()] | tuple()}.
-export_type([slow_call/0]).

%% Slow calls printed under each histogram.
-define(SHOWN, 3).

%% @doc The kept calls of `MFA' in session `Id': `slowest' (slowest first) or `threshold'
%% (those over the threshold, in the order they began).
-spec calls(ferrotrace_tracer:session_id(), mfa(), slowest | threshold) ->
          [slow_call()] | {error, term()}.
calls(Id, MFA, Which) ->
    case ferrotrace_tracer:session_slow_calls(Id, MFA, Which) of
        {ok, Calls} -> Calls;
        {error, _} = Error -> Error
    end.

%% @doc The report's lines for one call entry of a summary: its slowest calls (at most 3),
%% with the registered name of each process that still has one.
-spec lines(map(), pos_integer()) -> iodata().
lines(#{slowest := [_ | _] = Slowest} = Entry, Width) ->
    Kept = length(Slowest),
    Shown = lists:sublist(Slowest, ?SHOWN),
    Dropped = case maps:get(slow_calls_dropped, Entry, 0) of
                  0 -> "";
                  N -> io_lib:format(", ~b over the threshold not kept", [N])
              end,
    Title = io_lib:format("  slowest calls (~b of ~b kept~s)", [length(Shown), Kept, Dropped]),
    ["\n", ferrotrace_text:cut(Title, Width), "\n",
     [[ferrotrace_text:cut(io_lib:format("  ~9s  ~s  ~ts ~s",
                                           [ferrotrace_text:format_ns(D), format_time(At),
                                            string:pad(process_name(Pid), 24), result_text(R)]),
                             Width), "\n"]
      || #{duration := D, started_at := At, pid := Pid, result := R} <- Shown]];
lines(_Entry, _Width) ->
    [].

%% A result as the report prints it: the kind, and the value when it was copied.
result_text(R) when is_atom(R) -> atom_to_list(R);
result_text({return, V}) -> io_lib:format("return ~P", [V, 8]);
result_text({exception, C, R}) -> io_lib:format("exception ~p:~P", [C, R, 8]).

%% @doc A pid as `<0.123.0>', followed by its registered name if it has one now. Anything
%% else a session was handed as the caller (a port, or junk given to the tracer's `trace/5'
%% by hand) is printed as it is, cut short.
-spec process_name(term()) -> string().
process_name(Pid) when is_pid(Pid) ->
    %% A merged summary may hold other nodes' pids: only local ones are looked up.
    Local = node(Pid) =:= node(),
    Name = case Local andalso is_process_alive(Pid) andalso erlang:process_info(Pid, registered_name) of
               {registered_name, N} -> " " ++ atom_to_list(N);
               _ -> ""
           end,
    pid_to_list(Pid) ++ Name;
process_name(Port) when is_port(Port) ->
    erlang:port_to_list(Port);
process_name(Other) ->
    lists:flatten(io_lib:format("~P", [Other, 4])).

%% @doc System time in microseconds as `13:55:09.123456' (local time).
-spec format_time(integer()) -> string().
format_time(Us) ->
    {_, {H, M, S}} = calendar:system_time_to_local_time(Us div 1000000, second),
    lists:flatten(io_lib:format("~2..0b:~2..0b:~2..0b.~6..0b", [H, M, S, Us rem 1000000])).
