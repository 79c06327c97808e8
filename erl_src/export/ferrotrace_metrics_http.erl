%%% @private
%%% @doc The endpoint a Prometheus server scrapes (see ferrotrace_metrics): a listening
%%% socket and the processes that answer on it, all of them ferrotrace's own (high priority,
%%% never traced: ferrotrace_own), with `gen_tcp' and the VM's HTTP packet parser only.
%%%
%%% Processes: the endpoint owns the listening socket, renders the exposition (one at a
%%% time) and watches the session's keeper: when the keeper ends (the session released) or
%%% {@link stop/1} is called, it exits and the socket closes. An acceptor, linked to it,
%%% accepts at most `?MAX_CONNECTIONS' connections at a time (past that it stops accepting:
%%% the kernel's backlog holds the rest); each connection has a handler, linked to the
%%% acceptor, so that everything goes when the endpoint does.
%%%
%%% What a client can cost (a scrape, or a hostile or slow client):
%%% <ul>
%%% <li>a request is one request line and at most 64 header lines of at most 8 KB each,
%%% 64 KB in all, within 5 s of the connection; anything else is answered 400 (or the connection
%%% closed at the deadline), and the connection is always closed after one answer (after
%%% reading at most 64 KB more for at most 1 s, so that the close is no reset);</li>
%%% <li>only `GET' of the path is answered 200; another path 404, another method 405;</li>
%%% <li>a send that cannot go on for 5 s closes the connection (`send_timeout');</li>
%%% <li>the exposition is rendered at most once per ten times the last render took: a
%%% client that asks more often gets the last one again, so the endpoint's work stays
%%% under a tenth of one scheduler however often it is asked (a render of 1,000
%%% functions: `make metrics-bench').</li>
%%% </ul>
-module(ferrotrace_metrics_http).

-export([listen/1, attach/3, stop/1, port/1, stats/1]).

-define(MAX_CONNECTIONS, 8).
-define(REQUEST_MS, 5000).
-define(SEND_MS, 5000).
-define(MAX_LINE, 8192).
-define(MAX_HEADERS, 64).
-define(MAX_REQUEST, 65536).
-define(LINGER_MS, 1000).
-define(LINGER_BYTES, 65536).
%% A render is reused for ten times as long as it took (at least this long, ms).
-define(REUSE_FACTOR, 10).
-define(START_MS, 5000).
-define(MARK, '$ferrotrace_metrics_endpoint').
-define(CONTENT_TYPE, <<"text/plain; version=0.0.4; charset=utf-8">>).

-type settings() :: #{ip := inet:ip_address(), port := inet:port_number(), path := binary(), atom() => term()}.
-type render() :: fun(() -> {ok, iodata()} | {error, term()}).
-export_type([settings/0, render/0]).

%% @doc Opens the listening socket in a new endpoint process: `{ok, Endpoint}', or
%% `{error, {port_in_use, Port}}', `{error, {listen, Reason}}' with nothing left running.
%% The endpoint answers nothing until {@link attach/3}, and exits with its caller until then.
-spec listen(settings()) -> {ok, pid()} | {error, term()}.
listen(#{ip := Ip, port := Port, path := Path}) when is_integer(Port), Port >= 0, Port =< 65535, is_binary(Path) ->
    Caller = self(),
    Ref = make_ref(),
    {Pid, Monitor} = spawn_opt(fun() -> init(Caller, Ref, Ip, Port, Path) end,
                               [monitor | ferrotrace_own:spawn_options()]),
    receive
        {Ref, ok} -> demonitor(Monitor, [flush]), {ok, Pid};
        {Ref, {error, _} = Error} -> demonitor(Monitor, [flush]), Error;
        {'DOWN', Monitor, process, Pid, Reason} -> {error, {listen, ferrotrace_hint:brief(Reason)}}
    after ?START_MS ->
            exit(Pid, kill),
            demonitor(Monitor, [flush]),
            {error, {listen, timeout}}
    end;
listen(_) ->
    {error, badarg}.

%% @doc Makes `Endpoint' answer scrapes with what `Render' gives, for as long as `Keeper'
%% lives. `ok', or `{error, not_listening}' for a pid that is no waiting endpoint.
-spec attach(pid(), pid(), render()) -> ok | {error, not_listening}.
attach(Endpoint, Keeper, Render) when is_pid(Endpoint), is_pid(Keeper), is_function(Render, 0) ->
    request(Endpoint, {attach, Keeper, Render});
attach(_, _, _) ->
    {error, not_listening}.

%% @doc Closes the endpoint (its socket, connections and processes); `ok' also for one that
%% is gone.
-spec stop(pid()) -> ok.
stop(Endpoint) when is_pid(Endpoint) ->
    case is_endpoint(Endpoint) of
        true -> stop_endpoint(Endpoint);
        false -> ok
    end;
stop(_) ->
    ok.

stop_endpoint(Endpoint) ->
    Monitor = monitor(process, Endpoint),
    Endpoint ! {stop, self()},
    receive {'DOWN', Monitor, process, Endpoint, _} -> ok
    after ?START_MS -> exit(Endpoint, kill), receive {'DOWN', Monitor, process, Endpoint, _} -> ok end
    end.

%% Only an endpoint is sent a request (any other process would be made to wait, or
%% stopped): each marks itself in its dictionary as it starts.
is_endpoint(Pid) ->
    node(Pid) =:= node() andalso
        case erlang:process_info(Pid, dictionary) of
            {dictionary, Dictionary} -> lists:member({?MARK, true}, Dictionary);
            undefined -> false
        end.

%% @doc The port an endpoint listens on (the one the system chose for `port => 0').
-spec port(pid()) -> {ok, inet:port_number()} | {error, not_listening}.
port(Endpoint) when is_pid(Endpoint) ->
    request(Endpoint, port);
port(_) ->
    {error, not_listening}.

%% @doc What an endpoint did: `renders' (the exposition rendered anew), `reused' (a render
%% answered again), `last_render_us' (the last render's time: the figures read, the text
%% written).
-spec stats(pid()) -> {ok, #{renders := non_neg_integer(), reused := non_neg_integer(),
                             last_render_us := non_neg_integer()}} | {error, not_listening}.
stats(Endpoint) when is_pid(Endpoint) ->
    request(Endpoint, stats);
stats(_) ->
    {error, not_listening}.

request(Endpoint, Request) ->
    case is_endpoint(Endpoint) of
        true -> ask(Endpoint, Request);
        false -> {error, not_listening}
    end.

ask(Endpoint, Request) ->
    Monitor = monitor(process, Endpoint),
    Endpoint ! {request, self(), Monitor, Request},
    receive
        {Monitor, Reply} -> demonitor(Monitor, [flush]), Reply;
        {'DOWN', Monitor, process, Endpoint, _} -> {error, not_listening}
    after ?START_MS ->
            demonitor(Monitor, [flush]),
            {error, not_listening}
    end.

%%--------------------------------------------------------------------------------------
%% The endpoint

-record(e, {socket :: gen_tcp:socket(), path :: binary(), port :: inet:port_number(),
            watched :: reference(), acceptor = none :: pid() | none,
            render = none :: render() | none,
            last = none :: none | {integer(), {binary(), binary()}},   % {ReusableUntilMs, {Head, Body}}
            reuse_ms = 0 :: non_neg_integer(),
            renders = 0 :: non_neg_integer(), reused = 0 :: non_neg_integer(),
            render_us = 0 :: non_neg_integer()}).

init(Caller, Ref, Ip, Port, Path) ->
    ok = ferrotrace_own:enter(),
    put(?MARK, true),
    Family = case tuple_size(Ip) of 8 -> [inet6]; _ -> [] end,
    Options = Family ++ [binary, {ip, Ip}, {active, false}, {reuseaddr, true}, {backlog, 16},
                         {packet, raw}, {send_timeout, ?SEND_MS},
                         {send_timeout_close, true}, {nodelay, true}],
    case gen_tcp:listen(Port, Options) of
        {ok, Socket} ->
            {ok, Bound} = inet:port(Socket),
            Caller ! {Ref, ok},
            waiting(#e{socket = Socket, path = Path, port = Bound, watched = monitor(process, Caller)});
        {error, eaddrinuse} ->
            Caller ! {Ref, {error, {port_in_use, Port}}};
        {error, Reason} ->
            Caller ! {Ref, {error, {listen, Reason}}}
    end.

%% Listening, not answering yet: until attached, the endpoint ends with the caller of
%% listen/1 (a start that failed after it).
waiting(E = #e{watched = Watched}) ->
    receive
        {request, From, Tag, {attach, Keeper, Render}} ->
            demonitor(Watched, [flush]),
            Self = self(),
            Acceptor = spawn_opt(fun() -> ok = ferrotrace_own:enter(), accepting(Self, E#e.path, E#e.socket, 0) end,
                                 [link | ferrotrace_own:spawn_options()]),
            From ! {Tag, ok},
            serving(E#e{watched = monitor(process, Keeper), acceptor = Acceptor, render = Render});
        {request, From, Tag, port} ->
            From ! {Tag, {ok, E#e.port}},
            waiting(E);
        {stop, _} ->
            ok;
        {'DOWN', Watched, process, _, _} ->
            ok
    end.

serving(E = #e{watched = Watched}) ->
    receive
        {scrape, From, Tag} ->
            {Response, E1} = response(E),
            From ! {Tag, Response},
            serving(E1);
        {request, From, Tag, port} ->
            From ! {Tag, {ok, E#e.port}},
            serving(E);
        {request, From, Tag, stats} ->
            From ! {Tag, {ok, #{renders => E#e.renders, reused => E#e.reused, last_render_us => E#e.render_us}}},
            serving(E);
        forget ->
            %% Between scrapes the endpoint holds nothing (a 1,000-function exposition is
            %% about 3 MB): the last render is dropped once it may no longer be reused.
            erlang:garbage_collect(),
            serving(E#e{last = none});
        {request, From, Tag, {attach, _, _}} ->
            From ! {Tag, {error, not_listening}},
            serving(E);
        {stop, _} ->
            closed(E);
        {'DOWN', Watched, process, _, _} ->
            closed(E)
    end.

%% The acceptor and the handlers are linked to each other: killing the acceptor ends them.
closed(#e{socket = Socket, acceptor = Acceptor}) ->
    _ = gen_tcp:close(Socket),
    _ = is_pid(Acceptor) andalso exit(Acceptor, kill),
    ok.

%% The exposition, rendered anew unless the last one is recent (see the module doc).
response(E = #e{last = {Until, Last}}) ->
    case erlang:monotonic_time(millisecond) < Until of
        true -> {Last, E#e{reused = E#e.reused + 1}};
        false -> render(E)
    end;
response(E) ->
    render(E).

render(E = #e{render = Render}) ->
    T0 = erlang:monotonic_time(microsecond),
    Rendered = try Render()
               catch Class:Reason -> {error, {Class, ferrotrace_hint:brief(Reason)}}
               end,
    T1 = erlang:monotonic_time(microsecond),
    case Rendered of
        {ok, Body0} ->
            Body = iolist_to_binary(Body0),
            Response = iolist_to_binary(head(200, [{<<"Content-Type">>, ?CONTENT_TYPE}], byte_size(Body))),
            ReuseMs = (T1 - T0) * ?REUSE_FACTOR div 1000,
            Both = {Response, Body},
            _ = erlang:send_after(ReuseMs + 1, self(), forget),
            {Both, E#e{last = {T1 div 1000 + ReuseMs, Both}, reuse_ms = ReuseMs,
                       renders = E#e.renders + 1, render_us = erlang:monotonic_time(microsecond) - T0}};
        {error, Why} ->
            {plain(503, io_lib:format("ferrotrace: the session's figures cannot be read: ~0tp~n", [Why])), E}
    end.

%%--------------------------------------------------------------------------------------
%% Accepting, at most ?MAX_CONNECTIONS at a time

accepting(Endpoint, Path, Socket, Open) when Open >= ?MAX_CONNECTIONS ->
    %% Full: no accept until a handler ends (the kernel's backlog holds the others).
    receive {'DOWN', _, process, _, _} -> accepting(Endpoint, Path, Socket, Open - 1) end;
accepting(Endpoint, Path, Socket, Open) ->
    Done = flush_done(0),
    case gen_tcp:accept(Socket) of
        {ok, Connection} ->
            Handler = spawn_opt(fun() -> ok = ferrotrace_own:enter(), handler(Endpoint, Path, Connection) end,
                                [link | ferrotrace_own:spawn_options()]),
            _ = monitor(process, Handler),
            case gen_tcp:controlling_process(Connection, Handler) of
                ok -> Handler ! go;
                {error, _} -> gen_tcp:close(Connection), exit(Handler, kill)
            end,
            accepting(Endpoint, Path, Socket, Open - Done + 1);
        {error, closed} ->
            exit(closed);
        {error, _} ->
            %% emfile and the like: give the system a moment rather than spin.
            timer:sleep(100),
            accepting(Endpoint, Path, Socket, Open - Done)
    end.

flush_done(N) ->
    receive {'DOWN', _, process, _, _} -> flush_done(N + 1)
    after 0 -> N
    end.

%%--------------------------------------------------------------------------------------
%% One connection: one request, one answer, closed

handler(Endpoint, Path, Socket) ->
    receive go -> ok end,
    Deadline = erlang:monotonic_time(millisecond) + ?REQUEST_MS,
    Answer = case read_request(Socket, Deadline) of
                 {ok, _Method, Target} when Target =/= Path -> plain(404, <<"not found: ferrotrace serves GET of its path only\n">>);
                 {ok, 'GET', _} -> answer(Endpoint);
                 {ok, _Method, _} -> plain(405, <<"method not allowed: GET only\n">>);
                 {error, timeout} -> none;
                 {error, closed} -> none;
                 {error, _} -> plain(400, <<"bad request\n">>)
             end,
    _ = case Answer of
            none -> ok;
            {Head, Body} -> gen_tcp:send(Socket, [Head, Body])
        end,
    linger(Socket).

%% Closed once the client has read the answer: what it sent and we did not read (a line too
%% long, a body) would otherwise make the close a reset, which can drop the answer on its
%% way. Bounded: at most 64 KB read, for at most a second.
linger(Socket) ->
    _ = gen_tcp:shutdown(Socket, write),
    Deadline = erlang:monotonic_time(millisecond) + ?LINGER_MS,
    drain(Socket, Deadline, ?LINGER_BYTES),
    gen_tcp:close(Socket).

drain(_Socket, _Deadline, Left) when Left =< 0 ->
    ok;
drain(Socket, Deadline, Left) ->
    case recv(Socket, Deadline) of
        {ok, Data} when is_binary(Data) -> drain(Socket, Deadline, Left - byte_size(Data));
        _ -> ok
    end.

answer(Endpoint) ->
    case scrape(Endpoint) of
        {ok, Response} -> Response;
        {error, _} -> plain(503, <<"ferrotrace: the session is gone\n">>)
    end.

scrape(Endpoint) ->
    Monitor = monitor(process, Endpoint),
    Endpoint ! {scrape, self(), Monitor},
    receive
        {Monitor, Response} -> demonitor(Monitor, [flush]), {ok, Response};
        {'DOWN', Monitor, process, Endpoint, _} -> {error, gone}
    after ?REQUEST_MS ->
            demonitor(Monitor, [flush]),
            {error, timeout}
    end.

%% `{ok, Method, Path}' (the path without its query), or `{error, Why}'. Read raw and
%% parsed with the VM's HTTP parser (erlang:decode_packet/3): a socket in `http_bin' mode
%% closes itself on a line too long, and could not be answered 400.
read_request(Socket, Deadline) ->
    case packet(Socket, Deadline, http_bin, <<>>, 0) of
        {ok, {http_request, Method, Target, {1, _}}, Rest, Read} ->
            case headers(Socket, Deadline, Rest, Read, 0) of
                ok -> {ok, Method, target(Target)};
                {error, _} = Error -> Error
            end;
        {ok, {http_request, _, _, _}, _, _} -> {error, version};
        {ok, _, _, _} -> {error, malformed};
        {error, _} = Error -> Error
    end.

headers(_Socket, _Deadline, _Buffer, _Read, N) when N > ?MAX_HEADERS ->
    {error, too_many_headers};
headers(Socket, Deadline, Buffer, Read, N) ->
    case packet(Socket, Deadline, httph_bin, Buffer, Read) of
        {ok, http_eoh, _, _} -> ok;
        {ok, {http_header, _, _, _, _}, Rest, Read1} -> headers(Socket, Deadline, Rest, Read1, N + 1);
        {ok, _, _, _} -> {error, malformed};
        {error, _} = Error -> Error
    end.

%% One line of the request: `{ok, Packet, Rest, BytesReadSoFar}', more read as needed,
%% at most ?MAX_LINE a line and ?MAX_REQUEST in all.
packet(Socket, Deadline, Type, Buffer, Read) ->
    case erlang:decode_packet(Type, Buffer, [{packet_size, ?MAX_LINE}]) of
        {ok, {http_error, _}, _} ->
            {error, malformed};
        {ok, Packet, Rest} ->
            {ok, Packet, Rest, Read};
        {more, _} when byte_size(Buffer) >= ?MAX_LINE ->
            {error, line_too_long};
        {more, _} when Read >= ?MAX_REQUEST ->
            {error, request_too_large};
        {more, _} ->
            case recv(Socket, Deadline) of
                {ok, Data} -> packet(Socket, Deadline, Type, <<Buffer/binary, Data/binary>>, Read + byte_size(Data));
                {error, _} = Error -> Error
            end;
        {error, _} ->
            {error, malformed}
    end.

recv(Socket, Deadline) ->
    case Deadline - erlang:monotonic_time(millisecond) of
        Left when Left > 0 -> gen_tcp:recv(Socket, 0, Left);
        _ -> {error, timeout}
    end.

%% The path a request names, without its query (`abs_path' or an absolute URI).
target({abs_path, Path}) -> path(Path);
target({absoluteURI, _Scheme, _Host, _Port, Path}) -> path(Path);
target(_) -> <<>>.

path(Path) ->
    hd(binary:split(Path, <<"?">>)).

plain(Status, Text) ->
    Body = iolist_to_binary(Text),
    Extra = case Status of
                405 -> [{<<"Allow">>, <<"GET">>}];
                _ -> []
            end,
    {iolist_to_binary(head(Status, [{<<"Content-Type">>, <<"text/plain; charset=utf-8">>} | Extra],
                           byte_size(Body))), Body}.

head(Status, Headers, Length) ->
    [<<"HTTP/1.1 ">>, integer_to_binary(Status), $\s, reason(Status), <<"\r\n">>,
     [[Name, <<": ">>, Value, <<"\r\n">>] || {Name, Value} <- Headers],
     <<"Content-Length: ">>, integer_to_binary(Length), <<"\r\nConnection: close\r\n\r\n">>].

reason(200) -> <<"OK">>;
reason(400) -> <<"Bad Request">>;
reason(404) -> <<"Not Found">>;
reason(405) -> <<"Method Not Allowed">>;
reason(503) -> <<"Service Unavailable">>.
