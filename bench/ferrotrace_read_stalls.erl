%%% @doc What the loops' paced reading after a start costs a busy node's processes, moment
%%% by moment (run by `make read-stalls'): the reading holds its average pace, but each slice
%%% of its work runs at high priority and holds a scheduler's processes for as long as it
%%% lasts. A fresh node with much of OTP loaded and nothing read yet (as a node's first
%%% `'_'' session finds it); one process per scheduler runs short pieces of work at normal
%%% priority and notes every gap over 1 ms between two of them, for ?SECONDS s without the
%%% reading (the control), then through a whole reading from an empty cache
%%% (ferrotrace_loops:find/4 as the keeper runs it, at most ?MAX_S s), at a pace of ?PACE:
%%% a session's pace (ferrotrace_budget:read_pace/2, 0.02 with `max_overhead => 0.05' on
%%% two schedulers) reads a tenth as much in the same time, in slices as long. Printed: the
%%% gaps by length, the longest, and what the reading read.
-module(ferrotrace_read_stalls).
-export([main/0]).

-define(SECONDS, 10).
-define(MAX_S, 60).
-define(PACE, 0.2).
%% Gap lengths printed (ms, from each to the next).
-define(BINS, [1, 2, 3, 5, 8, 12, 20]).

-spec main() -> ok.
main() ->
    _ = application:load(ferrotrace),
    {ok, Own} = application:get_key(ferrotrace, modules),
    ok = code:ensure_modules_loaded(Own),
    %% Code to read: the modules of the applications a release commonly holds.
    _ = [code:ensure_loaded(M) || App <- [kernel, stdlib, compiler, sasl, crypto, ssl, inets, public_key],
                                  ok =:= application:load(App) orelse true,
                                  {ok, Ms} <- [application:get_key(App, modules)], M <- Ms],
    {ok, _} = application:ensure_all_started(ferrotrace),
    Schedulers = erlang:system_info(schedulers_online),
    print("control", none, gaps(Schedulers, fun() -> none end)),
    print("reading", ?PACE, gaps(Schedulers, fun() -> reader(?PACE) end)),
    ok.

%% The gaps the busy processes saw while `Start()' ran (?SECONDS s where it starts nothing,
%% else until the reading it started is done), and what the reading read.
gaps(Schedulers, Start) ->
    Self = self(),
    Busy = [spawn(fun() -> busy(Self, erlang:monotonic_time(microsecond), []) end) || _ <- lists:seq(1, Schedulers)],
    timer:sleep(500),
    Read = case Start() of
               none ->
                   timer:sleep(?SECONDS * 1000),
                   none;
               {Pid, Monitor} ->
                   receive
                       {read, Ms, Modules} ->
                           true = demonitor(Monitor, [flush]),
                           {done_ms, Ms, modules, Modules}
                   after ?MAX_S * 1000 ->
                           exit(Pid, kill),
                           {not_done_in_ms, ?MAX_S * 1000, modules, cached()}
                   end
           end,
    _ = [B ! {stop, Self} || B <- Busy],
    {Read, lists:append([receive {gaps, B, G} -> G end || B <- Busy])}.

%% The reading as the keeper runs it (its own process, high priority), from an empty cache.
reader(Pace) ->
    Self = self(),
    true = ets:info(ferrotrace_loops_cache) =:= undefined orelse ets:delete_all_objects(ferrotrace_loops_cache),
    spawn_opt(fun() ->
                      ok = ferrotrace_own:enter(),
                      T0 = erlang:monotonic_time(millisecond),
                      _ = ferrotrace_loops:find([{'_', '_', '_'}], ferrotrace_traced:own_modules(), read, Pace),
                      Self ! {read, erlang:monotonic_time(millisecond) - T0, cached()}
              end, [monitor | ferrotrace_own:spawn_options()]).

%% The modules read so far.
cached() ->
    ets:select_count(ferrotrace_loops_cache, [{{{facts, '_', '_'}, '_'}, [], [true]}]).

busy(Parent, Last, Gaps) ->
    receive
        {stop, Parent} -> Parent ! {gaps, self(), Gaps}
    after 0 ->
            _ = work(200),
            Now = erlang:monotonic_time(microsecond),
            busy(Parent, Now, case Now - Last of G when G > 1000 -> [G | Gaps]; _ -> Gaps end)
    end.

work(0) -> ok;
work(N) -> _ = erlang:phash2(N), work(N - 1).

print(Label, Pace, {Read, Gaps}) ->
    Bins = lists:zip(?BINS, tl(?BINS) ++ [infinity]),
    io:format("read_stalls ~s pace=~w read=~w gaps_over_1ms=~b by_ms=~s longest_ms=~.1f~n",
              [Label, Pace, Read, length(Gaps),
               lists:join(" ", [io_lib:format("~w-~w:~b", [Lo, Hi, length([G || G <- Gaps, G >= Lo * 1000,
                                                                                   Hi =:= infinity orelse G < Hi * 1000])])
                                || {Lo, Hi} <- Bins]),
               lists:max([0 | Gaps]) / 1000]).
