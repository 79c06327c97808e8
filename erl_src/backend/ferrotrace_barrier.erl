%%% @private
%%% @doc Pattern changes that do not wait on busy schedulers.
%%%
%%% Each `erlang:trace_pattern/3' (and `trace:function/4') waits, two or three times, until
%%% every scheduler has passed a point between two processes (the VM's code barrier and
%%% thread progress). A scheduler running a busy process passes it only when that process's
%%% time slice ends: among 50 busy processes on 2 schedulers, one change of one function
%%% took 1.2 to 1.8 ms, so a start that held back 40 functions spent 60 to 100 ms holding,
%%% and a budget's shed of 50 functions took as long while their calls went on costing.
%%%
%%% {@link quick/1} runs such changes while a process of ferrotrace's own, at high priority
%%% and bound to its scheduler, passes that point again and again on every scheduler
%%% (`erlang:yield/0' in a loop). The same change then takes 40 to 70 microseconds. The
%%% node's processes wait meanwhile (at most ?MAX_MS, then the changes go on at the usual
%%% pace), which is the point: a short pause of a few ms in place of tens of ms of changes
%%% that each pause a scheduler anyway. The function given must change patterns, not wait
%%% for normal-priority processes or run on a dirty scheduler: those would wait out the
%%% spinners. (One such wait cannot be ruled out: a module that the code server is loading
%%% at that moment holds the permission every change needs, and the code server runs at
%%% normal priority; the changes then wait out the spinners, ?MAX_MS at most.)
%%%
%%% Without spinners a change costs the node nothing (each scheduler finishes its slice, then
%%% passes), only its caller's time. So they are for changes that someone waits for or that
%%% take cost off: a start's patterns, flags, hold and count (its caller waits), a budget's
%%% shed (its calls cost until it lands). Not for the settling steps after a start nor for a
%%% function given back: those wait at no cost to anyone.
-module(ferrotrace_barrier).

-export([quick/1]).

%% The longest the spinners keep the schedulers (ms).
-define(MAX_MS, 25).
%% Set in the calling process's dictionary while quick/1 runs (a nested call adds none).
-define(RUNNING, {?MODULE, running}).

%% @doc Runs `Fun' (pattern changes) with a spinner on every online scheduler, at most
%% ?MAX_MS; answers what `Fun' answers (or raises what it raised). The caller runs at high
%% priority meanwhile.
-spec quick(fun(() -> T)) -> T.
quick(Fun) when is_function(Fun, 0) ->
    case get(?RUNNING) of
        true ->
            Fun();
        _ ->
            Priority = process_flag(priority, high),
            put(?RUNNING, true),
            Spinners = spinners(erlang:monotonic_time(millisecond) + ?MAX_MS),
            try
                Fun()
            after
                lists:foreach(fun(Spinner) -> Spinner ! {?MODULE, stop} end, Spinners),
                erase(?RUNNING),
                process_flag(priority, Priority)
            end
    end.

%% One per online scheduler, bound to it: spawned unbound, a process waits where its
%% spawner runs until the schedulers balance their queues (30 ms and more).
%% `{scheduler, N}' is an option of spawn_opt/2 that OTP's own tests use (OTP 25 to 29);
%% where it is refused, they are spawned unbound.
spinners(Deadline) ->
    [spinner(Deadline, N) || N <- lists:seq(1, erlang:system_info(schedulers_online))].

spinner(Deadline, N) ->
    Spin = fun() ->
                   ok = ferrotrace_own:enter(),
                   spin(Deadline),
                   ferrotrace_own:leave()
           end,
    try spawn_opt(Spin, [{priority, high}, {scheduler, N}])
    catch error:badarg -> spawn_opt(Spin, [{priority, high}])
    end.

spin(Deadline) ->
    receive
        {?MODULE, stop} -> ok
    after 0 ->
        case erlang:monotonic_time(millisecond) < Deadline of
            true -> erlang:yield(), spin(Deadline);
            false -> ok
        end
    end.
