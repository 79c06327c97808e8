%%% @doc Latency histograms per interval of a session, for `hdr_log''s `interval => Ms'.
%%%
%%% With `intervals => P' (ms) a session gets a small process that, every `P' ms while the
%%% session runs and once more when it stopped, takes a snapshot of every function's
%%% histogram (V2 compressed, as {@link ferrotrace_cluster} ships them) and keeps what each
%%% function recorded since the previous snapshot (`ferrotrace_tracer:histogram_subtract/2').
%%% The engine's aggregation is not touched: the snapshots are the session's own cumulative
%%% histograms, so the intervals of a function add up to its session histogram exactly.
%%%
%%% Memory is bounded: at most `max_intervals' intervals (default 600, ten minutes at 1 s)
%%% are kept, each holding one compressed histogram per function that returned in it
%%% (functions without calls in an interval take nothing; about 100 bytes for a narrow
%%% distribution, 1.3 KB measured for one spread over 5 decades), so at most
%%% `max_intervals' x functions histograms, plus the last snapshot, one per function. When one more would not fit, adjacent pairs
%%% are merged and the period doubles, so the whole session stays covered, coarser.
%%%
%%% Cost: one `session_summary' and one `session_histograms_bytes' per period (both take the
%%% collector's lock for as long as they read), then the compression off that lock on a dirty
%%% scheduler.
-module(ferrotrace_intervals).

-export([check/1, start/3, read/2, session/2]).

-define(DEFAULT_MAX, 600).
-define(MIN_PERIOD, 10).

-type interval() :: {OffsetMs :: non_neg_integer(), EndMs :: non_neg_integer(),
                     [{mfa(), binary()}]}.

-record(s, {id :: ferrotrace_tracer:session_id(),
            keeper :: reference(),
            period :: pos_integer(),
            max :: pos_integer(),
            last = 0 :: non_neg_integer(),          % elapsed ms at the last snapshot
            prev = #{} :: #{mfa() => binary()},     % the last snapshot
            intervals = [] :: [interval()],         % newest first
            count = 0 :: non_neg_integer(),
            stopped = false :: boolean()}).

%% @doc Checks `intervals' and `max_intervals' in a session's options:
%% `{ok, none | {PeriodMs, Max}}'.
-spec check(map()) -> {ok, none | {pos_integer(), pos_integer()}} | {error, term()}.
check(Options) ->
    Max = maps:get(max_intervals, Options, ?DEFAULT_MAX),
    case {maps:get(intervals, Options, undefined), Max} of
        {undefined, _} when Max =:= ?DEFAULT_MAX ->
            {ok, none};
        {undefined, _} ->
            {error, {bad_option, {max_intervals, Max, <<"only with intervals => Ms">>}}};
        {P, _} when not is_integer(P); P < ?MIN_PERIOD ->
            {error, {bad_option, {intervals, P, <<"milliseconds per interval, at least 10">>}}};
        {_, M} when not is_integer(M); M < 2 ->
            {error, {bad_option, {max_intervals, M, <<"an integer, at least 2">>}}};
        {P, M} ->
            {ok, {P, M}}
    end.

%% @doc Starts the snapshots of session `Id' (kept by `Keeper'); they end with the keeper.
%% Arguments are checked here, before a process is spawned: `{error, badarg}' otherwise.
-spec start(ferrotrace_tracer:session_id(), pid(), {pos_integer(), pos_integer()}) ->
          pid() | {error, badarg}.
start(Id, Keeper, {Period, Max}) when is_integer(Id), is_pid(Keeper), node(Keeper) =:= node(),
                                      is_integer(Period), Period >= ?MIN_PERIOD,
                                      is_integer(Max), Max >= 2 ->
    spawn_opt(fun() ->
                      ok = ferrotrace_own:enter(),
                      Ref = monitor(process, Keeper),
                      erlang:send_after(Period, self(), tick),
                      loop(#s{id = Id, keeper = Ref, period = Period, max = Max})
              end, ferrotrace_own:spawn_options());
start(_Id, _Keeper, _Intervals) ->
    {error, badarg}.

%% @doc The intervals up to now (a snapshot is taken first), `Ms' each: `{ok, [{OffsetMs,
%% LengthMs, [{MFA, Bin}]}]}' oldest first, or an error naming the periods `Ms' may be
%% (`native': `{ok, PeriodMs, Intervals}', the snapshots as they are, and their period now).
%% `Pid' must be the snapshot process of a registered session (as the registry's
%% `intervals' has it): any other answers `{error, {needs, intervals}}' at once.
-spec read(pid(), pos_integer() | native) -> {ok, [{non_neg_integer(), non_neg_integer(), [{mfa(), binary()}]}]}
                                                 | {ok, pos_integer(), [{non_neg_integer(), non_neg_integer(), [{mfa(), binary()}]}]}
                                        | {error, term()}.
read(Pid, Ms) ->
    Known = is_pid(Pid) andalso
        [Id || {Id, _, _, #{intervals := P}} <- ferrotrace_registry:sessions(), P =:= Pid] =/= [],
    case Known of
        true -> read_known(Pid, Ms);
        false -> {error, {needs, intervals}}
    end.

%% @doc The intervals of local session `Id' as {@link read/2} answers them, with the
%% session's start: `{ok, StartMs, Intervals}' (`{ok, StartMs, PeriodMs, Intervals}' for
%% `native'), `{error, {needs, intervals}}' for a session without them.
-spec session(ferrotrace_tracer:session_id(), pos_integer() | native) ->
          {ok, non_neg_integer(), [{non_neg_integer(), non_neg_integer(), [{mfa(), binary()}]}]}
              | {ok, non_neg_integer(), pos_integer(), [{non_neg_integer(), non_neg_integer(), [{mfa(), binary()}]}]}
              | {error, term()}.
session(Id, Ms) ->
    case {ferrotrace_registry:lookup(Id), ferrotrace_tracer:session_summary(Id)} of
        {{ok, _, _, #{intervals := Pid}}, {ok, #{started_at := Start}}} ->
            case read(Pid, Ms) of
                {ok, Intervals} -> {ok, Start, Intervals};
                {ok, Period, Intervals} -> {ok, Start, Period, Intervals};
                {error, _} = Error -> Error
            end;
        {_, {error, _} = Error} -> Error;
        _ -> {error, {needs, intervals}}
    end.

read_known(Pid, Ms) ->
    Ref = monitor(process, Pid),
    Pid ! {read, self(), Ref},
    receive
        {Ref, Period, Intervals} ->
            demonitor(Ref, [flush]),
            case Ms =:= native orelse is_integer(Ms) andalso Ms > 0 andalso Ms rem Period =:= 0 of
                true when Ms =:= native -> {ok, Period, [{From, To - From, Hs} || {From, To, Hs} <- Intervals]};
                true -> {ok, [{From, To - From, Hs} || {From, To, Hs} <- group(Ms, Intervals)]};
                false -> {error, {bad_option, {interval, Ms, period_text(Period)}}}
            end;
        {'DOWN', Ref, process, _, _} ->
            {error, {needs, intervals}}
    after 30000 ->
            demonitor(Ref, [flush]),
            {error, timeout}
    end.

period_text(Period) ->
    iolist_to_binary(io_lib:format("a multiple of the session's interval, now ~b ms", [Period])).

loop(S = #s{keeper = Keeper}) ->
    receive
        tick when S#s.stopped ->
            loop(S);
        tick ->
            S1 = snapshot(S),
            _ = S1#s.stopped orelse erlang:send_after(S1#s.period, self(), tick),
            loop(S1);
        {read, From, Ref} ->
            S1 = case S#s.stopped of
                     true -> S;
                     false -> snapshot(S)
                 end,
            From ! {Ref, S1#s.period, lists:reverse(S1#s.intervals)},
            loop(S1);
        {'DOWN', Keeper, process, _, _} ->
            ok
    end.

%% What every function recorded since the last snapshot becomes one interval.
snapshot(S = #s{id = Id, prev = Prev, last = Last}) ->
    case {ferrotrace_tracer:session_summary(Id), ferrotrace_tracer:session_histograms_bytes(Id)} of
        {{ok, #{elapsed_ms := Now, status := Status}}, {ok, Histograms}} ->
            Deltas = [{MFA, Delta} || {MFA, Bin} <- Histograms,
                                      {ok, Delta} <- [delta(Bin, maps:get(MFA, Prev, none))]],
            S1 = S#s{prev = maps:from_list(Histograms), last = Now, stopped = Status =:= stopped},
            case Deltas of
                [] when Now =< Last -> S1;
                _ -> add(S1, {Last, Now, Deltas})
            end;
        _ ->
            S#s{stopped = true}
    end.

delta(Bin, Bin) -> none;                   % nothing new (same bytes, same counts)
delta(Bin, none) -> {ok, Bin};
delta(Bin, Prev) -> ferrotrace_tracer:histogram_subtract(Bin, Prev).

%% Keeps at most `max' intervals: when full, adjacent pairs merge and the period doubles.
add(S = #s{count = Count, max = Max}, Interval) when Count < Max ->
    S#s{intervals = [Interval | S#s.intervals], count = Count + 1};
add(S = #s{intervals = Intervals, period = Period}, Interval) ->
    Merged = lists:reverse(group(Period * 2, lists:reverse(Intervals))),
    add(S#s{intervals = Merged, count = length(Merged), period = Period * 2}, Interval).

%% Intervals grouped by the `Ms' slot their start falls in, histograms of a function added.
group(Ms, Intervals) ->
    Slots = lists:foldl(
              fun({From, To, Hs}, Acc) ->
                      Slot = From div Ms,
                      maps:update_with(Slot, fun({F, _, Old}) -> {F, To, Hs ++ Old} end,
                                       {From, To, Hs}, Acc)
              end, #{}, Intervals),
    [{From, To, merge(Hs)} || {_, {From, To, Hs}} <- lists:keysort(1, maps:to_list(Slots))].

merge(Hs) ->
    ByMFA = lists:foldl(fun({MFA, Bin}, Acc) -> maps:update_with(MFA, fun(L) -> [Bin | L] end, [Bin], Acc) end,
                        #{}, Hs),
    [{MFA, sum(Bins)} || {MFA, Bins} <- lists:sort(maps:to_list(ByMFA))].

sum([One]) ->
    One;
sum(Bins) ->
    {ok, Sum} = ferrotrace_tracer:histogram_merge(Bins),
    Sum.
