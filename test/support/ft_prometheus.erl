%%% @doc A real Prometheus for the metrics suite and `make metrics-soak': Debian's
%%% `prometheus' started with a scrape config for one target (every second, a temporary
%%% storage directory, removed at the stop), and its HTTP API's answers read (no JSON library
%%% on OTP 25: the few fields read are matched).
-module(ft_prometheus).

-export([start/2, stop/1, query/3, query/4, range/3, now_s/0, raw/2]).

-type handle() :: {port(), non_neg_integer(), file:filename()}.
-export_type([handle/0]).

%% @doc Starts Prometheus (the executable `Prometheus') scraping `127.0.0.1:Target' every
%% second: `{ApiPort, Handle}' once it is ready.
-spec start(string(), inet:port_number()) -> {inet:port_number(), handle()}.
start(Prometheus, Target) ->
    Dir = filename:join("/tmp", "ferrotrace_prometheus_" ++ os:getpid() ++ "_" ++ integer_to_list(erlang:unique_integer([positive]))),
    ok = filelib:ensure_path(filename:join(Dir, "data")),
    {ok, L} = gen_tcp:listen(0, [{ip, {127, 0, 0, 1}}]),
    {ok, Web} = inet:port(L),
    ok = gen_tcp:close(L),
    Yml = io_lib:format("global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n  evaluation_interval: 1s\n"
                        "scrape_configs:\n  - job_name: ferrotrace\n    static_configs:\n"
                        "      - targets: ['127.0.0.1:~b']\n", [Target]),
    ok = file:write_file(filename:join(Dir, "prometheus.yml"), Yml),
    %% Through a shell that kills it when its standard input closes: the port's owner
    %% ending (a case that crashed, the node gone) ends Prometheus too.
    Args = ["--config.file=" ++ filename:join(Dir, "prometheus.yml"),
            "--storage.tsdb.path=" ++ filename:join(Dir, "data"),
            "--web.listen-address=127.0.0.1:" ++ integer_to_list(Web),
            "--log.level=warn"],
    Port = open_port({spawn_executable, "/bin/sh"},
                     [{args, ["-c", "\"$0\" \"$@\" </dev/null & p=$!; read _; kill $p; wait $p", Prometheus | Args]},
                      exit_status, stderr_to_stdout, binary, use_stdio]),
    {os_pid, OsPid} = erlang:port_info(Port, os_pid),
    ok = ready(Web, 300),
    {Web, {Port, OsPid, Dir}}.

-spec stop(handle()) -> ok.
%% @doc Stops it and removes its storage.
stop({Port, OsPid, Dir}) ->
    %% Its shell kills it once its input closes, and ends when it has.
    catch_close(Port),
    gone(OsPid, 100),
    _ = file:del_dir_r(Dir),
    ok.

catch_close(Port) ->
    try port_close(Port) catch error:badarg -> ok end.

gone(_OsPid, 0) ->
    ok;
gone(OsPid, Tries) ->
    case os:cmd("kill -0 " ++ integer_to_list(OsPid) ++ " 2>/dev/null && echo alive") of
        "alive" ++ _ -> timer:sleep(100), gone(OsPid, Tries - 1);
        _ -> ok
    end.

%% @doc The system time, s.
-spec now_s() -> float().
now_s() -> erlang:system_time(millisecond) / 1000.

%% @doc As {@link query/3}, `Default' where the answer is empty (no series).
-spec query(inet:port_number(), string(), float(), float()) -> float() | nan | infinity | '-infinity'.
query(Api, Query, T, Default) ->
    Body = api(Api, "/api/v1/query", [{"query", Query}, {"time", float_to_list(T, [{decimals, 3}])}]),
    case re:run(Body, "\"value\":\\[[0-9.]+,\"([^\"]+)\"\\]", [{capture, all_but_first, list}]) of
        {match, [V]} -> number(V);
        nomatch -> Default
    end.

%% @doc One instant query's scalar, at time T (s).
-spec query(inet:port_number(), string(), float()) -> float() | nan | infinity | '-infinity'.
query(Api, Query, T) ->
    Body = api(Api, "/api/v1/query", [{"query", Query}, {"time", float_to_list(T, [{decimals, 3}])}]),
    case re:run(Body, "\"value\":\\[[0-9.]+,\"([^\"]+)\"\\]", [{capture, all_but_first, list}]) of
        {match, [V]} -> number(V);
        nomatch -> error({no_value, Query, Body})
    end.

%% @doc A range vector's samples `[{Time, Value}]' at time T (one series).
-spec range(inet:port_number(), string(), float()) -> [{float(), float() | nan | infinity | '-infinity'}].
range(Api, Query, T) ->
    Body = api(Api, "/api/v1/query", [{"query", Query}, {"time", float_to_list(T, [{decimals, 3}])}]),
    case re:run(Body, "\"values\":\\[(.*?)\\]\\]", [{capture, all_but_first, list}]) of
        {match, [Values]} ->
            {match, Pairs} = re:run(Values, "\\[([0-9.]+),\"([^\"]+)\"", [global, {capture, all_but_first, list}]),
            [{number(Ts), number(V)} || [Ts, V] <- Pairs];
        nomatch -> []
    end.

number("NaN") -> nan;
number("+Inf") -> infinity;
number("-Inf") -> '-infinity';
number(Text) ->
    case string:to_float(Text) of
        {F, ""} -> F;
        _ -> float(list_to_integer(Text))
    end.

api(Port, Path, Params) ->
    Query = lists:join("&", [[K, "=", uri_string:quote(V)] || {K, V} <- Params]),
    case http_get(Port, lists:flatten([Path, "?", Query])) of
        {200, _, Body} -> Body;
        Other -> error({prometheus_api, Path, Params, Other})
    end.


ready(_Web, 0) ->
    error(prometheus_not_ready);
ready(Web, Tries) ->
    case catch_get(Web, "/-/ready") of
        200 -> ok;
        _ -> timer:sleep(100), ready(Web, Tries - 1)
    end.

catch_get(Port, Path) ->
    try element(1, http_get(Port, Path)) catch error:_ -> error end.

http_get(Port, Path) ->
    raw(Port, ["GET ", Path, " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"]).

%% @doc `{Status, Head, Body}' of one request sent to 127.0.0.1:`Port' as it is, the
%% connection closed by the server (the metrics suite's malformed requests use it too).
-spec raw(inet:port_number(), iodata()) -> {integer(), binary(), binary()}.
raw(Port, Request) ->
    {ok, C} = gen_tcp:connect({127, 0, 0, 1}, Port, [binary, {active, false}], 5000),
    ok = gen_tcp:send(C, Request),
    Response = read_all(C, []),
    _ = gen_tcp:close(C),
    [Head, Body] = binary:split(Response, <<"\r\n\r\n">>),
    {match, [Status]} = re:run(Head, "^HTTP/1.1 ([0-9]{3}) ", [{capture, all_but_first, list}]),
    {list_to_integer(Status), Head, Body}.

read_all(C, Acc) ->
    case gen_tcp:recv(C, 0, 20000) of
        {ok, Data} -> read_all(C, [Data | Acc]);
        {error, closed} -> iolist_to_binary(lists:reverse(Acc))
    end.
