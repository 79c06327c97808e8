%%% @private
%%% @doc The live view, `ferrotrace:watch/2': every `interval' one screen of the functions
%%% called in that interval, read with `ferrotrace_tracer:session_interval/1' (which resets
%%% the interval it answers): the options checked, the session found, the loop, and the
%%% screens: a header line, then a table of COUNT, RATE/s, P50, P99 and MAX (TOTAL when
%%% sorted by it) cut to the width, ASCII only. The options are documented in the edoc of
%%% `ferrotrace:watch/2'.
-module(ferrotrace_watch).

-export([watch/2]).

-type options() :: #{interval => pos_integer(),
                     top => pos_integer(),
                     sort => count | total | p99 | max,
                     count => pos_integer() | infinity,
                     width => pos_integer()}.
%% The session being watched: its id and name.
-type who() :: #{id := ferrotrace_tracer:session_id(), name := atom(), atom() => term()}.
-export_type([options/0]).

%% {Header, Key, Kind} of the live view's columns, and the order they go in when the width
%% is too small (never the sort column).
-define(COLUMNS, [{"COUNT", count, count}, {"RATE/s", rate, count}, {"P50", p50, time},
                  {"P99", p99, time}, {"MAX", max, time}, {"TOTAL", total, time}]).
-define(DROP, [p50, rate, total, p99, max]).

%% @doc `ferrotrace:watch(Session, Options)': the options first, then the session (the view
%% reads one node's engine: a cluster session's pid is no session id there).
-spec watch(term(), term()) -> ok | {error, term()}.
watch(Session, Options0) ->
    case check_options(Options0) of
        {ok, Options} ->
            ferrotrace_dispatch:with_session(
              Session, fun(Id, _Keeper, Info) ->
                               run(#{id => Id, name => maps:get(name, Info, undefined)}, Options)
                       end,
              fun(Cluster) -> {error, {bad_session, Cluster}} end);
        {error, _} = Error ->
            Error
    end.

%% The options (a map or a proplist) with the defaults filled in: `interval' 1000 ms, `top'
%% 10, `sort' `count', `count' `infinity', `width' the terminal's (else 80).
check_options(Options) ->
    Accepted = [{interval, 1000}, {top, 10}, {sort, count}, {count, infinity},
                {width, ferrotrace_options:default_width()}],
    case ferrotrace_options:check(Options, Accepted) of
        {ok, #{top := all}} -> {error, {bad_option, {top, all, <<"a positive integer">>}}};
        Checked -> Checked
    end.

%% Watches the session `Who': `ok' after `count' screens, or after a last line when the
%% session stops or is released.
-spec run(who(), map()) -> ok | {error, term()}.
run(Who = #{id := Id}, Options = #{interval := Interval}) ->
    %% This read ends whatever interval was open: the first screen covers one interval.
    case ferrotrace_tracer:session_interval(Id) of
        {ok, #{status := stopped, stop_reason := Reason}} ->
            io:put_chars(last_line(Who, {stopped, Reason}, Options));
        {ok, _} ->
            loop(Who, Options, 1, erlang:monotonic_time(millisecond) + Interval);
        {error, _} = Error ->
            Error
    end.

loop(Who = #{id := Id}, Options = #{interval := Interval, count := Count}, N, Next) ->
    sleep(Next - erlang:monotonic_time(millisecond)),
    case ferrotrace_tracer:session_interval(Id) of
        {ok, Figures = #{status := Status}} ->
            io:put_chars(screen(Who#{number => N}, Figures, Options)),
            case {Status, Count} of
                {stopped, _} ->
                    Why = {stopped, maps:get(stop_reason, Figures, undefined)},
                    io:put_chars(last_line(Who, Why, Options));
                {running, N} ->
                    ok;
                {running, _} ->
                    %% Ticks keep to the schedule; one that is already past is skipped.
                    Now = erlang:monotonic_time(millisecond),
                    loop(Who, Options, N + 1, max(Next + Interval, Now))
            end;
        {error, {no_such_session, _}} ->
            io:put_chars(last_line(Who, released, Options));
        {error, _} = Error ->
            Error
    end.

%% Sleeps without taking any message: the caller is often the shell's evaluator.
sleep(Ms) when Ms > 0 ->
    receive after Ms -> ok end;
sleep(_) ->
    ok.

%%--------------------------------------------------------------------------------------
%% The screens

%% One screen: `Who' is `#{id, name, number}' (the interval's number, from 1),
%% `Figures' what `ferrotrace_tracer:session_interval/1' answered, `Options' checked by
%% check_options/1. Every line is at most `width' columns, ASCII.
-spec screen(#{id := integer(), name := atom(), number := pos_integer()},
             #{elapsed_ms := non_neg_integer(), calls := [map()], atom() => term()},
             map()) -> iolist().
screen(Who = #{number := N}, #{elapsed_ms := Elapsed, calls := Calls0},
       #{top := Top, sort := Sort, width := Width}) ->
    {{_, _, _}, {H, Mi, S}} = calendar:local_time(),
    Total = lists:sum([C || #{count := C} <- Calls0]),
    %% What changes each screen first: a long session id may be cut off at the end.
    Header = io_lib:format("ferrotrace watch #~b ~2..0b:~2..0b:~2..0b ~ts, ~b calls; session ~ts",
                           [N, H, Mi, S, format_ms(Elapsed), Total, session_name(Who)]),
    Calls = [C#{rate => C0 * 1000 div max(Elapsed, 1)} || C = #{count := C0} <- Calls0],
    Shown = lists:sublist(ferrotrace_report:sort(Sort, Calls), Top),
    Body = case Shown of
               [] -> ["  no calls in this interval"];
               _ -> table(Shown, Sort, Width)
           end,
    More = case length(Calls) - length(Shown) of
               0 -> [];
               Left -> [io_lib:format("  ... ~b more functions (top => N shows more)", [Left])]
           end,
    [[clip(Line, Width), "\n"] || Line <- [Header | Body] ++ More].

%% The last line when the session stopped or was released.
-spec last_line(#{id := integer(), name := atom(), atom() => term()},
                {stopped, atom()} | released, map()) -> iolist().
last_line(Who, {stopped, Reason}, #{width := Width}) ->
    Line = io_lib:format("ferrotrace watch: session ~ts stopped (~tp), watch ends",
                         [session_name(Who), Reason]),
    [clip(Line, Width), "\n"];
last_line(Who, released, #{width := Width}) ->
    Line = io_lib:format("ferrotrace watch: session ~ts was released, watch ends",
                         [session_name(Who)]),
    [clip(Line, Width), "\n"].

session_name(#{id := Id, name := Name}) when Name =/= undefined ->
    io_lib:format("~tp (id ~b)", [Name, Id]);
session_name(#{id := Id}) ->
    io_lib:format("~b", [Id]).

format_ms(Ms) ->
    io_lib:format("~.2f s", [Ms / 1000]).

%% The report's table with the live view's columns (TOTAL only when sorted by it).
table(Calls, Sort, Width) ->
    Columns = [C || C = {_, Key, _} <- ?COLUMNS, Key =/= total orelse Sort =:= total],
    ferrotrace_report:rows(Calls, Columns, ?DROP, Sort, Width).

%% A line cut to `Width' columns, anything outside printable ASCII shown as `?'.
clip(Line, Width) ->
    Chars = case unicode:characters_to_list(Line) of
                L when is_list(L) -> L;
                _ -> "?"
            end,
    Ascii = [if C >= $\s, C =< $~ -> C; true -> $? end || C <- Chars],
    lists:sublist(string:trim(Ascii, trailing), Width).
