%%% @private
%%% @doc What a call costs on this node against its calibrated cost (the budget's
%%% `in_situ' factor), learned from the cost measured on the node (ferrotrace_nodeload)
%%% while a session runs. Pure: ferrotrace_budget keeps the state and feeds it each tick.
%%%
%%% == Why a filter, not a ratio ==
%%% The node's reading is the fall of its work per busy scheduler time against a baseline
%%% taken for 30 ms before the start. On a busy loop it matches the work's throughput window
%%% by window. On a real server it does not: yaws under wrk, with nothing traced, read -0.37
%%% to +0.38 of the capacity per 250 ms window, and the mean of 4 s after a baseline (30 ms
%%% or a whole second) sat anywhere from -0.28 to +0.22 (bench trial beside `make
%%% yaws-bench'). Divided by a model's cost of 0.02, such an offset reads as a factor of 10:
%%% a session at its cap timed 5 to 17 k calls where one left at 2 timed 16 to 82 k.
%%%
%%% So each reading is taken as `Offset + Factor x Model + noise': the offset is the
%%% baseline's error and the node's own drift (a random walk), the factor what the session
%%% learns. A two-state Kalman filter weighs each reading by what it can tell: a level
%%% that moves while the session's cost holds still moves the offset; a reading that moves
%%% with the session's cost (its start, a shed, a rate change) teaches the factor. Its
%%% factor starts from the prior (the node's last session's, else ?LOW) with a spread of
%%% ?SPREAD and stays within ?LOW and ?HIGH: the node first, never read cheaper than twice
%%% the calibration.
-module(ferrotrace_in_situ).

-export([new/2, prior/1, update/4, aside/3, factor/1, measured/1, learned/1]).

%% Calibrated in one idle process, a call costs a half to a fifth of what it costs among a
%% server's thousands of traced functions: the factor's floor. Its default prior is 5: on
%% make busy's two workers the node's own measure read 0.085 to 0.09 of the capacity while
%% a prior of 2 estimated 0.043 (a factor near 4); on yaws under wrk, sessions whose
%% estimate read 0.035 to 0.037 at a prior of 3 cost 0.07 of the requests (per-pair median
%% of 9 pairs over 3 runs: a factor near 5 to 6). A session whose cost holds still teaches
%% the filter little, and on yaws nothing (its readings stay within their noise: the
%% factor ended at 2.9 to 3.1 from 3), so the prior is what such a session keeps: from 2
%% the budget was spent twice over.
-define(LOW, 2.0).
-define(PRIOR, 5.0).
-define(HIGH, 10.0).
%% The filter's own estimate stays within these (a bound on what noise can do to it).
-define(FLOOR, 0.5).
-define(CEILING, 20.0).
%% The prior's standard deviation (a factor of 2 +/- 2: 10 takes evidence).
-define(SPREAD, 2.0).
%% The baseline's noise (ferrotrace_nodeload:baseline/1's `noise', the relative standard
%% deviation of its thirds) within these, and where it was not measured. Its thirds are
%% 10 ms apart: with 50 busy processes they strayed by 0.006 to 0.04 while a 250 ms
%% reading moved by 0.1 to 0.2.
-define(NOISE_MIN, 0.1).
-define(NOISE_MAX, 1.0).
-define(NOISE_DEFAULT, 0.1).
%% The offset's standard deviation at the start, at least (times the utilization). The
%% node's work per busy time drifts over seconds, which a 30 ms baseline cannot see: with
%% nothing traced yet, 50 busy processes read 0.2 to 0.3 for a whole session after a
%% baseline whose thirds strayed by 0.04, while their throughput said 0.1; the mean of 4 s
%% sat within +/- 0.2 with two busy workers, +/- 0.28 on yaws.
-define(OFFSET_MIN, 0.15).
%% The factor's own drift per second (variance: it follows the node over minutes).
-define(FACTOR_DRIFT, 0.01).
%% The shown reading: the last ticks' readings, each tick older weighing ?DECAY as much.
-define(DECAY, 0.7).

-opaque state() :: #{offset := float(), factor := float(), p_oo := float(), p_of := float(),
                     p_ff := float(), noise := float(), shown := {float(), float()}}.
-export_type([state/0]).

%% @doc A filter starting from `Prior' (see prior/1), for a node measured against
%% `Baseline' (ferrotrace_nodeload:baseline/1). Its noise sets the filter's: `S', the
%% baseline's error (its thirds' noise over the square root of 3, times the utilization),
%% is a reading's standard deviation over a second, twice the offset's drift in a second,
%% and the offset's at the start where over ?OFFSET_MIN. On yaws under wrk `S' comes to
%% about 0.2, as the readings above; with busy workers, 0.06 (?NOISE_MIN).
-spec new(float(), map() | undefined) -> state().
new(Prior, Baseline) when is_float(Prior) ->
    Noise = case Baseline of
                #{noise := N} when is_float(N) -> min(?NOISE_MAX, max(?NOISE_MIN, N));
                _ -> ?NOISE_DEFAULT
            end,
    Utilization = case Baseline of
                      #{utilization := U} when is_float(U) -> min(1.0, max(0.05, U));
                      _ -> 1.0
                  end,
    S = Utilization * Noise / math:sqrt(3),
    Offset = max(S, Utilization * ?OFFSET_MIN),
    #{offset => 0.0, factor => Prior, p_oo => Offset * Offset, p_of => 0.0, p_ff => ?SPREAD * ?SPREAD,
      noise => S * S, shown => {0.0, 0.0}}.

%% @doc The factor a session starts from: the one the node's last session learned, while it
%% is fresh (ferrotrace_calibrate keeps it with the calibration as `in_situ'), within the
%% bounds, else ?PRIOR.
-spec prior(map() | undefined) -> float().
prior(#{in_situ := F}) when is_number(F) -> clamp(float(F));
prior(_) -> ?PRIOR.

%% @doc One tick of `Dt' seconds: the model's cost (a fraction of the capacity, at the
%% calibrated costs) and the cost measured on the node over the same tick (`undefined'
%% where it could not be read: the state stays).
-spec update(state(), float(), float() | undefined, float()) -> state().
update(S, _Model, undefined, _Dt) ->
    S;
update(S = #{offset := O, factor := F, p_oo := Poo0, p_of := Pof, p_ff := Pff0, noise := Noise},
       X, Y, Dt) when is_float(Y), Dt > 0 ->
    %% The offset drifts by half the reading's noise in a second (see new/2).
    Poo = Poo0 + Noise / 4 * Dt,
    Pff = Pff0 + ?FACTOR_DRIFT * Dt,
    %% H = [1, X]: what a reading sees of the state; HP = H x P.
    {Ho, Hf} = {Poo + X * Pof, Pof + X * Pff},
    Innovation = Y - (O + F * X),
    Var = Ho + X * Hf + Noise / Dt,
    {Ko, Kf} = {Ho / Var, Hf / Var},
    shown(S#{offset := O + Ko * Innovation, factor := within(?FLOOR, ?CEILING, F + Kf * Innovation),
             p_oo := Poo - Ko * Ho, p_of := Pof - Ko * Hf, p_ff := Pff - Kf * Hf}, Y, Dt).

%% @doc A reading of `Dt' seconds taken while the start's own work runs (its patterns set
%% on every module, its processes flagged): shown, not learned from. That work costs what
%% it costs whatever the session traces: on 50 busy processes the first half second read
%% 0.2 to 0.3 of the capacity, the next ones 0.05. Learned from, it took the factor to 4
%% to 6.5 within a second, and those sessions shed what they came to time (0.2 to 0.5 M
%% events in 8 s where the others counted 1.3 M).
-spec aside(state(), float() | undefined, float()) -> state().
aside(S, undefined, _Dt) ->
    S;
aside(S, Y, Dt) when is_float(Y), Dt > 0 ->
    shown(S, Y, Dt).

%% @doc The factor now, within ?LOW and ?HIGH.
-spec factor(state()) -> float().
factor(#{factor := F}) -> clamp(F).

%% @doc The cost measured on the node over the last ticks (the raw reading, offset and
%% all), at least 0, or `undefined' before the first.
-spec measured(state()) -> float() | undefined.
measured(#{shown := {_, T}}) when T == 0 -> undefined;
measured(#{shown := {C, T}}) -> max(0.0, C / T).

%% @doc The factor, once the session's evidence has halved the prior's variance (for the
%% node's next starts: ferrotrace_calibrate:remember_in_situ/1), or `none'.
-spec learned(state()) -> {ok, float()} | none.
learned(#{factor := F, p_ff := P}) when P =< ?SPREAD * ?SPREAD / 2 -> {ok, clamp(F)};
learned(_) -> none.

%% A reading `Y' of `Dt' seconds into the shown mean, each older tick weighing ?DECAY as much.
shown(S = #{shown := {C, T}}, Y, Dt) ->
    S#{shown := {C * ?DECAY + Y * Dt, T * ?DECAY + Dt}}.

clamp(F) -> within(?LOW, ?HIGH, F).

within(Low, High, F) -> min(High, max(Low, F)).
