%%% @private
%%% @doc What this VM offers for tracing, asked without a server: whether it has trace
%%% sessions (the `trace' module, OTP 27 on), and the one call into that module.
%%%
%%% Answered from the release number, not by `code:ensure_loaded(trace)': on OTP 25 and 26
%%% there is no such module, and looking for it is a request to the code server, which
%%% runs at normal priority and searches the code path; on two schedulers kept busy by 50
%%% processes each such request took about a second, and every start and every process of
%%% ferrotrace's own asked. A leaf: it calls no other ferrotrace module.
-module(ferrotrace_vm).

-export([trace_sessions/0, trace_call/2]).

%% @doc True where the VM has trace sessions (OTP 27 and later): a session then traces in
%% one of its own; before, through the node's one tracer per process.
-spec trace_sessions() -> boolean().
trace_sessions() ->
    case erlang:system_info(otp_release) of
        [D1, D2] when D1 >= $0, D1 =< $9, D2 >= $0, D2 =< $9 -> list_to_integer([D1, D2]) >= 27;
        _ -> false
    end.

%% @doc Calls `trace:Function(Args...)', through `apply' so that ferrotrace compiles and
%% dialyzes on OTP 25, where the module does not exist (see {@link trace_sessions/0}).
-spec trace_call(atom(), [term()]) -> term().
trace_call(Function, Args) ->
    apply(trace, Function, Args).
