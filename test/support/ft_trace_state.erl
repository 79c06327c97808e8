%%% @doc What is traced, and by whom, on every OTP the tests run on.
%%%
%%% `erlang:trace_info/2' sees only the legacy trace session. On OTP 25 and 26 that is the
%%% only session, and ferrotrace's `calls/2' uses it. On OTP 27 and later `calls/2' creates
%%% a trace session of its own (named `ferrotrace'), which `erlang:trace_info/2' does not
%%% see: there `trace:session_info/1' lists every session that affects a function or a
%%% process (the legacy one as `{legacy, default}'), and `trace:info/3' reads one session's
%%% flags. The `trace' module is called through a variable so that this module compiles
%%% and dialyzes on OTP 25.
-module(ft_trace_state).

-export([trace_sessions/0, otp_release/0, sessions/1, traced/1, traced_by_ferrotrace/1,
         flags/1, idle/2, skip_before_27/1]).

%% OTP 25's spec of erlang:trace_info/2 omits the `{tracer, {Module, State}}' answer that a
%% tracer module gets (as in ferrotrace_session).
-dialyzer({no_match, traced_by_ferrotrace/1}).

-type item() :: mfa() | pid() | new | all.
-type session_ref() :: {atom(), term()}.

%% @doc True where the VM has trace sessions (the `trace' module, OTP 27 and later).
-spec trace_sessions() -> boolean().
trace_sessions() ->
    code:ensure_loaded(trace) =:= {module, trace}
        andalso erlang:function_exported(trace, session_info, 1).

-spec otp_release() -> string().
otp_release() ->
    erlang:system_info(otp_release).

%% @doc The sessions that trace `Item': `{Name, Id}' weak references on OTP 27+ (the legacy
%% session is `{legacy, default}'; `all': every session there is); on OTP 25
%% `[{legacy, default}]' or `[]'.
-spec sessions(item()) -> [session_ref()].
sessions(Item) ->
    case trace_sessions() of
        true ->
            Trace = trace,
            case Trace:session_info(Item) of
                Sessions when is_list(Sessions) -> Sessions;
                undefined -> [] % a process that is gone
            end;
        false ->
            case legacy_traced(Item) of
                true -> [{legacy, default}];
                false -> []
            end
    end.

%% @doc Is `Item' (a function, a process, `new') traced by anyone?
-spec traced(item()) -> boolean().
traced(Item) ->
    sessions(Item) =/= [].

%% @doc Is `Item' traced by a ferrotrace session? On OTP 27+ a session named `ferrotrace'
%% affects it. On OTP 25 a process must have ferrotrace's tracer module as its tracer; a
%% function's pattern in the legacy session has no owner to ask, so any pattern counts.
-spec traced_by_ferrotrace(item()) -> boolean().
traced_by_ferrotrace(Item) ->
    case trace_sessions() of
        true ->
            lists:keymember(ferrotrace, 1, sessions(Item));
        false when is_tuple(Item) ->
            legacy_traced(Item);
        false ->
            case safe_trace_info(Item, tracer) of
                {tracer, {ferrotrace_tracer, _}} -> true;
                _ -> false
            end
    end.

%% @doc Every trace flag `Pid' (or `new') carries, in any session.
-spec flags(pid() | new) -> [atom()].
flags(Pid) ->
    Legacy = case safe_trace_info(Pid, flags) of
                 {flags, L} when is_list(L) -> L;
                 _ -> []
             end,
    Others = case trace_sessions() of
                 true ->
                     Trace = trace,
                     [F || S <- sessions(Pid), S =/= {legacy, default},
                           {flags, Fs} <- [Trace:info(S, Pid, flags)], is_list(Fs), F <- Fs];
                 false ->
                     []
             end,
    lists:usort(Legacy ++ Others).

%% @doc Neither the function nor the process is traced by anyone.
-spec idle(mfa(), pid()) -> boolean().
idle(MFA, Pid) ->
    not traced(MFA) andalso flags(Pid) =:= [].

%% @doc For cases that need OTP 27's trace sessions: a skip naming the running OTP.
-spec skip_before_27(string()) -> ok | {skip, string()}.
skip_before_27(What) ->
    case trace_sessions() of
        true -> ok;
        false -> {skip, lists:flatten(io_lib:format("OTP ~s has no trace sessions (OTP 27+): ~s",
                                                    [otp_release(), What]))}
    end.

legacy_traced({_, _, _} = MFA) ->
    case safe_trace_info(MFA, traced) of
        {traced, false} -> false;
        {traced, _} -> true;
        _ -> false
    end;
legacy_traced(Pid) ->
    case safe_trace_info(Pid, flags) of
        {flags, [_ | _]} -> true;
        _ -> false
    end.

safe_trace_info(Item, What) ->
    try erlang:trace_info(Item, What)
    catch error:badarg -> undefined
    end.
