%%% @doc Times as an operator types them: `"50ms"', `"10s"', `"2.5s"', `"100us"', `"2m"',
%%% `"1h"' (a string or a binary: a number, then `ns', `us' or `µs', `ms', `s', `m' or
%%% `min', `h'). Every option that takes a time takes this form too; an integer keeps the
%%% unit the option has always had (`duration' in ms, `slower_than' in ns), so that what
%%% ran before runs the same. One form, the one the command line's `--for' reads.
-module(ferrotrace_time).

-export([to/2, accepted/1, options/1]).

-type unit() :: nanosecond | microsecond | millisecond.

%% No time an operator types is longer ("1234567.125ms" is 13).
-define(LONGEST, 32).
-export_type([unit/0]).

%% @doc `Value' in `Unit': `{ok, N}' for an integer (taken as `Unit') or a time with its
%% unit (rounded to the nearest `Unit'), `error' for anything else (a negative time, a
%% number without a unit in a string, an unknown unit).
-spec to(term(), unit()) -> {ok, non_neg_integer()} | error.
to(_Value, Unit) when Unit =/= nanosecond, Unit =/= microsecond, Unit =/= millisecond ->
    error;
to(N, _Unit) when is_integer(N), N >= 0 ->
    {ok, N};
to(Text, Unit) when is_binary(Text), byte_size(Text) =< ?LONGEST ->
    case unicode:characters_to_list(Text) of
        List when is_list(List) -> to(List, Unit);
        _ -> error
    end;
to(Text, Unit) when is_list(Text) ->
    %% Looked at only if short: the fuzz suite's 10 MB binary took seconds to trim.
    case short(Text, ?LONGEST) andalso io_lib:printable_unicode_list(Text) of
        true -> parse(string:trim(Text), Unit);
        false -> error
    end;
to(_, _) ->
    error.

%% A proper list of at most `N' elements, walked no further than that.
short([], _N) -> true;
short([_ | Rest], N) when N > 0 -> short(Rest, N - 1);
short(_, _N) -> false.

%% @doc What an option in `Unit' accepts, for its refusal's hint.
-spec accepted(unit()) -> binary().
accepted(Unit) ->
    iolist_to_binary(["an integer of ", name(Unit), ", or a time with its unit: \"50ms\", \"10s\", "
                      "\"2.5s\", \"100us\", \"2m\""]).

-define(TIMES, [{duration, millisecond, [infinity]}, {keep, millisecond, [infinity]},
                {intervals, millisecond, [none]}, {threshold, nanosecond, [infinity]}]).
-define(TIMES_WITHIN, [{capture, [{slower_than, nanosecond}, {every, millisecond}]},
                       {trees, [{slower_than, nanosecond}]}]).

%% @doc A start's options (a map) with every time given with its unit read into the
%% option's own unit (`duration', `keep', `intervals' in ms, `threshold' in ns, `max_rate''s
%% window in ms, `capture''s `slower_than' (ns) and `every' (ms), `trees'' `slower_than'
%% (ns)): `{ok, Options}', or `{error, {bad_option, {Key, Value, Accepted}}}' for a string
%% that is no time. Anything else is left as it is, for the option's own check to refuse.
%% ferrotrace_options reads it once, so that every later check and the engine see integers.
-spec options(map()) -> {ok, map()} | {error, {bad_option, {atom(), term(), binary()}}}.
options(Options) ->
    Top = [{Key, Unit} || {Key, Unit, Words} <- ?TIMES, is_map_key(Key, Options),
                          not lists:member(maps:get(Key, Options), Words)],
    case convert(Options, Top, []) of
        {ok, Converted} -> times_within(rate(Converted), ?TIMES_WITHIN);
        {error, _} = Error -> Error
    end.

%% `max_rate => {N, "1s"}'.
rate(Options = #{max_rate := {N, Window}}) when not is_integer(Window) ->
    case ferrotrace_time:to(Window, millisecond) of
        {ok, Ms} -> Options#{max_rate := {N, Ms}};
        error -> Options
    end;
rate(Options) ->
    Options.

times_within(Options, []) ->
    {ok, Options};
times_within(Options, [{Key, Keys} | Rest]) ->
    case Options of
        #{Key := Inner} when is_map(Inner) ->
            case convert(Inner, [KU || {K, _} = KU <- Keys, is_map_key(K, Inner)], [Key]) of
                {ok, Converted} -> times_within(Options#{Key := Converted}, Rest);
                {error, _} = Error -> Error
            end;
        #{} ->
            times_within(Options, Rest)
    end.

convert(Map, [], _Path) ->
    {ok, Map};
convert(Map, [{Key, Unit} | Rest], Path) ->
    Value = maps:get(Key, Map),
    case ferrotrace_time:to(Value, Unit) of
        {ok, N} ->
            convert(Map#{Key := N}, Rest, Path);
        error when is_list(Value); is_binary(Value) ->
            Accepted = ferrotrace_time:accepted(Unit),
            {error, {bad_option, case Path of
                                     [] -> {Key, Value, Accepted};
                                     [Outer] -> {Outer, Map, iolist_to_binary([atom_to_list(Key), ": ", Accepted])}
                                 end}};
        error ->
            %% Not a time at all (an atom, a float...): the option's own check refuses it
            %% with what it accepts.
            convert(Map, Rest, Path)
    end.

parse(Text, Unit) ->
    case re:run(Text, "^([0-9]+(?:\\.[0-9]+)?)\\s*(ns|us|µs|ms|s|min|m|h)$", [unicode, {capture, all_but_first, list}]) of
        {match, [Number, Suffix]} ->
            Value = number(Number) * ns(Suffix) / ns_of(Unit),
            {ok, round(Value)};
        nomatch ->
            error
    end.

number(Text) ->
    case string:to_float(Text) of
        {F, []} -> F;
        _ -> list_to_integer(Text)
    end.

ns("ns") -> 1;
ns("us") -> 1000;
ns("µs") -> 1000;
ns("ms") -> 1000000;
ns("s") -> 1000000000;
ns("m") -> 60000000000;
ns("min") -> 60000000000;
ns("h") -> 3600000000000.

ns_of(nanosecond) -> 1;
ns_of(microsecond) -> 1000;
ns_of(millisecond) -> 1000000.

name(nanosecond) -> "nanoseconds";
name(microsecond) -> "microseconds";
name(millisecond) -> "milliseconds".
