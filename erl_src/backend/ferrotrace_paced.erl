%%% @private
%%% @doc Work that must not take more than a share of one scheduler, in short slices: the
%%% loops' full reading after a start (ferrotrace_loops:find/4), at high priority like
%%% every process of ferrotrace's own, at a fifth of the session's budget.
%%%
%%% The work runs in a process of its own (the worker) that the caller suspends
%%% (`erlang:suspend_process/1') after each ?SLICE_MS of work and resumes after a rest as
%%% long as keeps it at `Pace' of the time. Pacing from inside the work (a check between
%%% modules, as the reading did) cannot cut a single long call: one module's disassembly
%%% (`beam_disasm:file/1') took 7 to 14 ms for a large module, and a busy node's processes
%%% on that scheduler waited that long behind it, a few times a second, where 2 ms was
%%% meant.
%%%
%%% Suspending the worker is safe where the work holds nothing other processes wait for
%%% (no lock, no server's reply owed: the reading reads files and an ETS table it alone
%%% writes per module): the caller alone suspends it, a suspension ends with its
%%% suspender (the VM undoes those of a process that exits), and the worker is linked to
%%% the caller, so that killing the caller ends the work.
-module(ferrotrace_paced).

-export([run/2]).

%% The longest the worker runs before it is suspended (ms; the VM's timers have a 1 ms
%% grain, and suspending a running process waits for its reductions' slice to end).
-define(SLICE_MS, 2).
%% A slice in which the worker made fewer reductions than this was spent waiting (for
%% other processes' answers, or on a dirty scheduler): no rest follows it.
-define(IDLE_REDUCTIONS, 200).

%% @doc `Work()' run at most `Pace' of the time (a float from 0.01 to 1) of one scheduler:
%% its value, or its exception raised again in the caller.
-spec run(fun(() -> Value), float()) -> Value.
run(Work, Pace) when is_function(Work, 0), is_float(Pace), Pace >= 0.01, Pace =< 1 ->
    Caller = self(),
    {Worker, Monitor} =
        spawn_opt(fun() ->
                          ok = ferrotrace_own:enter(),
                          Result = try {value, Work()} catch Class:Reason:Stack -> {raised, Class, Reason, Stack} end,
                          ok = ferrotrace_own:leave(),
                          Caller ! {self(), Result}
                  end, [link, monitor | ferrotrace_own:spawn_options()]),
    Result = slices(Worker, Monitor, Pace, reductions(Worker)),
    unlink(Worker),
    true = demonitor(Monitor, [flush]),
    case Result of
        {value, Value} -> Value;
        {raised, Class, Reason, Stack} -> erlang:raise(Class, Reason, Stack)
    end.

slices(Worker, Monitor, Pace, Reductions) ->
    Began = erlang:monotonic_time(microsecond),
    receive
        {Worker, Result} ->
            Result;
        {'DOWN', Monitor, process, Worker, Reason} ->
            %% Killed from outside (an exit it could not catch).
            exit({paced_work_ended, Reason})
    after ?SLICE_MS ->
            %% OTP 25 and 26 answer `internal_error' where the worker was on a dirty
            %% scheduler, though it is suspended all the same (erlang/otp#10241): it is
            %% resumed whatever the answer, and a resume it does not need is refused.
            _ = try erlang:suspend_process(Worker) catch error:_ -> false end,
            Now = reductions(Worker),
            _ = Now - Reductions >= ?IDLE_REDUCTIONS andalso rest(Pace, erlang:monotonic_time(microsecond) - Began),
            _ = try erlang:resume_process(Worker) catch error:badarg -> false end,
            slices(Worker, Monitor, Pace, Now)
    end.

%% The rest that puts `Worked' (us) at `Pace' of the time.
rest(Pace, Worked) ->
    receive after round(Worked * (1 - Pace) / Pace / 1000) -> true end.

reductions(Pid) ->
    case erlang:process_info(Pid, reductions) of
        {reductions, R} -> R;
        undefined -> 0
    end.
