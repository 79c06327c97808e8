%%% @private
%%% @doc The Prometheus endpoint's options (`ferrotrace:serve/2', and `metrics => #{...}'
%%% among a session's options): `port', `ip', `path' and `buckets', checked with their
%%% defaults filled in. Apart from ferrotrace_metrics so that the start's options
%%% (ferrotrace_options:read/4) check `metrics' with the others without depending on the
%%% serving and the exposition; it calls only ferrotrace_hint.
-module(ferrotrace_metrics_options).

-export([check/1, default_buckets/0]).

-define(DEFAULT_PORT, 9568).
-define(DEFAULT_PATH, <<"/metrics">>).
%% 1 µs to 60 s, in ns: 1, 2.5, 5 a decade.
-define(DEFAULT_BOUNDS, [1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000,
                         1000000, 2500000, 5000000, 10000000, 25000000, 50000000, 100000000,
                         250000000, 500000000, 1000000000, 2500000000, 5000000000,
                         10000000000, 25000000000, 60000000000]).
-define(MAX_BOUNDS, 100).
-define(KEYS, [port, ip, path, buckets]).
-define(ACCEPTED, <<"port => 0..65535 (default 9568; 0: any free port), ip => {127,0,0,1} (default) | any | "
                    "a tuple or string, path => \"/metrics\", buckets => [Seconds] (ascending)">>).

-type settings() :: #{port := inet:port_number(), ip := inet:ip_address(), path := binary(),
                      bounds := [pos_integer()], buckets_given := boolean()}.
-export_type([settings/0]).

%% @doc The serving options checked (a map or a list of pairs): `port', `ip', `path',
%% `buckets'. `{ok, Settings}' with the defaults filled in, or `{error, Reason}' naming the
%% option and what it takes.
-spec check(term()) -> {ok, settings()} | {error, term()}.
check(Options0) ->
    case ferrotrace_hint:to_map(Options0) of
        {ok, Options} ->
            case ferrotrace_hint:keys(Options, ?KEYS, ?ACCEPTED) of
                ok ->
                    Port = maps:get(port, Options, ?DEFAULT_PORT),
                    case {port(Port), ip(maps:get(ip, Options, {127, 0, 0, 1})),
                          path(maps:get(path, Options, ?DEFAULT_PATH)), bounds(Options)} of
                        {false, _, _, _} ->
                            {error, {bad_option, {port, Port, <<"an integer from 0 to 65535 (0: any free port)">>}}};
                        {_, {error, _} = Error, _, _} -> Error;
                        {_, _, {error, _} = Error, _} -> Error;
                        {_, _, _, {error, _} = Error} -> Error;
                        {true, {ok, Ip}, {ok, Path}, {ok, Bounds}} ->
                            {ok, #{port => Port, ip => Ip, path => Path, bounds => Bounds,
                                   buckets_given => maps:is_key(buckets, Options)}}
                    end;
                {error, Hint} ->
                    {error, {unknown_option, unknown_key(Options), Hint}}
            end;
        {error, _} = Error ->
            Error
    end.

unknown_key(Options) ->
    hd([K || K <- maps:keys(Options), not lists:member(K, ?KEYS)]).

port(Port) -> is_integer(Port) andalso Port >= 0 andalso Port =< 65535.

ip(any) -> {ok, {0, 0, 0, 0}};
ip(loopback) -> {ok, {127, 0, 0, 1}};
ip(Text) when is_list(Text); is_binary(Text) ->
    case is_binary(Text) orelse io_lib:printable_latin1_list(Text) of
        true when byte_size(Text) =< 64; length(Text) =< 64 ->
            case inet:parse_strict_address(unicode:characters_to_list(Text)) of
                {ok, Ip} -> {ok, Ip};
                {error, _} -> bad_ip(Text)
            end;
        _ ->
            bad_ip(Text)
    end;
ip(Ip) when is_tuple(Ip) ->
    case inet:is_ip_address(Ip) of
        true -> {ok, Ip};
        false -> bad_ip(Ip)
    end;
ip(Other) ->
    bad_ip(Other).

bad_ip(Ip) ->
    {error, {bad_option, {ip, ferrotrace_hint:brief(Ip), <<"an address to listen on: {127,0,0,1} (the default), any, "
                                                          "a tuple or a string such as \"10.0.0.5\"">>}}}.

path(Path) when is_list(Path) ->
    case io_lib:printable_latin1_list(Path) andalso length(Path) =< 256 of
        true -> path(list_to_binary(Path));
        false -> bad_path(Path)
    end;
%% Known to be a binary before it is matched: OTP 25's compiler then checks no unit
%% (`bs_test_unit', which OTP 29 no longer loads: the bundle's beams come from OTP 25).
path(Path) when is_binary(Path), byte_size(Path) =< 256 ->
    case Path of
        <<"/", _/binary>> ->
            case [C || <<C>> <= Path, C =< $\s orelse C >= 127 orelse C =:= $? orelse C =:= $#] of
                [] -> {ok, Path};
                _ -> bad_path(Path)
            end;
        _ ->
            bad_path(Path)
    end;
path(Path) ->
    bad_path(Path).

bad_path(Path) ->
    {error, {bad_option, {path, ferrotrace_hint:brief(Path), <<"a path such as \"/metrics\" (at most 256 "
                                                              "characters, no space, ? or #)">>}}}.

%% The `le' bounds in ns: `buckets => [Seconds]', ascending, each a number of seconds from
%% 1 ns to an hour, distinct once rounded to the ns.
bounds(#{buckets := Buckets}) ->
    Bad = {error, {bad_option, {buckets, ferrotrace_hint:brief(Buckets),
                                <<"an ascending list of 1 to 100 bounds in seconds, from 0.000000001 to 3600 "
                                  "(default: 1 us to 60 s, 1, 2.5 and 5 a decade)">>}}},
    case is_list(Buckets) andalso proper(Buckets, 0) of
        true ->
            case [B || B <- Buckets, not is_number(B) orelse B < 1.0e-9 orelse B > 3600] of
                [] ->
                    Ns = [round(B * 1.0e9) || B <- Buckets],
                    case strictly_ascending(Ns) of
                        true -> {ok, Ns};
                        false -> Bad
                    end;
                _ ->
                    Bad
            end;
        false ->
            Bad
    end;
bounds(#{}) ->
    {ok, ?DEFAULT_BOUNDS}.

%% A proper list of 1 to ?MAX_BOUNDS elements.
proper([], N) -> N > 0;
proper([_ | T], N) when N < ?MAX_BOUNDS -> proper(T, N + 1);
proper(_, _) -> false.

strictly_ascending([A, B | T]) -> A < B andalso strictly_ascending([B | T]);
strictly_ascending(_) -> true.

%% @doc The default `le' bounds, in seconds.
-spec default_buckets() -> [float()].
default_buckets() ->
    [N / 1.0e9 || N <- ?DEFAULT_BOUNDS].
