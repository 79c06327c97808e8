%%% @doc Helpers for ferrotrace_busy_SUITE, run on its busy peer node: a ping through
%%% normal-priority processes (the node's own responsiveness), a timed start, and the
%%% processes of ferrotrace's own that carry a trace flag.
-module(ft_busy).

-export([start_pinger/0, stop_pinger/1, timed/3, own_flagged/0, preload/0]).

%% @doc Starts pinging, every 20 ms, an echo process of normal priority; {@link
%% stop_pinger/1} answers the longest wait (ms).
-spec start_pinger() -> {pid(), pid()}.
start_pinger() ->
    Echo = spawn(fun echo/0),
    {spawn(fun() -> ping(Echo, 0) end), Echo}.

-spec stop_pinger({pid(), pid()}) -> non_neg_integer().
stop_pinger({Pinger, Echo}) ->
    Pinger ! {stop, self()},
    receive {max, Max} -> exit(Echo, kill), Max after 10000 -> exit(Echo, kill), 10000 end.

echo() ->
    receive {From, Ref} -> From ! Ref, echo() end.

ping(Echo, Max) ->
    receive
        {stop, From} -> From ! {max, Max}
    after 20 ->
        T0 = erlang:monotonic_time(microsecond),
        Ref = make_ref(),
        Echo ! {self(), Ref},
        receive Ref -> ok end,
        ping(Echo, max(Max, (erlang:monotonic_time(microsecond) - T0) div 1000))
    end.

%% @doc `{Ms, Result}' of `apply(M, F, A)'.
-spec timed(module(), atom(), list()) -> {non_neg_integer(), term()}.
timed(M, F, A) ->
    {Us, Result} = timer:tc(M, F, A),
    {Us div 1000, Result}.

%% @doc ferrotrace's own processes that carry a trace flag, with their flags.
-spec own_flagged() -> [{pid(), [atom()]}].
own_flagged() ->
    [{P, Flags} || P <- ferrotrace_own:pids(), Flags <- [ft_trace_state:flags(P)], Flags =/= []].

%% @doc Loads ferrotrace's modules, as a release's embedded node has them.
-spec preload() -> ok.
preload() ->
    _ = application:load(ferrotrace),
    {ok, Modules} = application:get_key(ferrotrace, modules),
    ok = code:ensure_modules_loaded(Modules),
    ok = ferrotrace_code:preload(),
    {module, _} = code:ensure_loaded(ft_trace_state),
    {module, _} = code:ensure_loaded(ft_budget_work),
    ok.
