%%% @doc A session's figures for Prometheus: `ferrotrace:serve(S, #{port => 9568})' (or
%%% `metrics => #{port => 9568}' among a session's options) serves them at
%%% `http://127.0.0.1:9568/metrics' in Prometheus's text format 0.0.4, for as long as the
%%% session is not released (or until `ferrotrace:unserve(S)'). The families, what each
%%% means and the PromQL to read them: doc/prometheus.md.
%%%
%%% <ul>
%%% <li>Per function (labels `node', `session', `function', the name as the report writes
%%% it, see ferrotrace_names): `ferrotrace_call_duration_seconds' (a histogram: cumulative
%%% `le' buckets, `_sum', `_count'), `ferrotrace_calls_total',
%%% `ferrotrace_call_exceptions_total'.</li>
%%% <li>The session's health (labels `node', `session'): running, its start, the events'
%%% accounting (seen, dropped, sampled out, over a limit, refused by the frame bound or the
%%% budget's fuse, processes untraced), memory, calls open, the per-call sampling rate and,
%%% with a budget, its limit, estimate and the functions shed now.</li>
%%% <li>With other kinds (`processes/2', `also'): wakeup latency, run slices (processes and
%%% ports), GC pauses (`kind' minor or major), process lifetimes and message sizes, as
%%% histograms.</li>
%%% </ul>
%%% Counters count from the session's start and never reset, so `rate()' and
%%% `histogram_quantile()' work as Prometheus users expect. The `le' bounds are fixed for the
%%% session's life (Prometheus cannot add buckets whose bounds change): those of its first
%%% serve, 1 µs to 60 s by default (`buckets => [Seconds]' sets others). Each bucket's count
%%% is read from the function's HDR histogram at the bound: exact but for the values of the
%%% HDR bucket holding the bound (within 1/128 of it), counted at or below it. `_sum' is
%%% the exact sum of the latencies; the activity series' sums are their histograms' (within
%%% 1/128).
%%%
%%% A scrape reads the figures once (`ferrotrace_tracer:session_metrics/3', a dirty NIF)
%%% and writes the text; nothing is computed between scrapes. The endpoint: see
%%% ferrotrace_metrics_http. A cluster session serves each node's figures on that node
%%% (ferrotrace_cluster:serve/2 asks each node's {@link serve_part/2}).
-module(ferrotrace_metrics).

-export([check/1, serve/4, unserve/3, serve_part/2, unserve_part/1,
         listen/1, attach/2, close/1, exposition/2, default_buckets/0]).

%% Message sizes, in bytes: 64 B to 1 MiB, times 4.
-define(SIZE_BYTES, [64, 256, 1024, 4096, 16384, 65536, 262144, 1048576]).

%% The serving options, checked (their module: ferrotrace_metrics_options, below the start's
%% options, which read `metrics' with the other options).
-type settings() :: ferrotrace_metrics_options:settings().
-export_type([settings/0]).

%% @doc The serving options checked: see ferrotrace_metrics_options:check/1.
-spec check(term()) -> {ok, settings()} | {error, term()}.
check(Options) ->
    ferrotrace_metrics_options:check(Options).

%% @doc The default `le' bounds, in seconds.
-spec default_buckets() -> [float()].
default_buckets() ->
    ferrotrace_metrics_options:default_buckets().

%%--------------------------------------------------------------------------------------
%% Serving a local session

%% @doc Serves local session `Id' (kept by `Keeper', registered with `Info'), `Settings' as
%% {@link check/1} made them: `{ok, Url}', or `{error, Reason}' with nothing left listening.
%% A session served already answers `{error, {already_served, Url, Hint}}'; bounds other than
%% those of its first serve `{error, {bad_option, {buckets, ..., Hint}}}'.
-spec serve(ferrotrace_tracer:session_id(), pid() | none, map(), settings()) -> {ok, string()} | {error, term()}.
serve(Id, none, _Info, _Settings) ->
    {error, {no_such_session, Id}};
serve(Id, Keeper, Info, Settings = #{bounds := Bounds}) when is_pid(Keeper), is_map(Info) ->
    case {served(Info), maps:get(metrics_bounds, Info, Bounds)} of
        {{yes, Url}, _} ->
            {error, {already_served, Url, <<"ferrotrace:unserve(S) first to serve it elsewhere">>}};
        {no, Bounds} ->
            case listen(Settings) of
                {ok, Endpoint} ->
                    case attach(Endpoint, Id) of
                        {ok, Url} -> {ok, Url};
                        {error, _} = Error -> close(Endpoint), Error
                    end;
                {error, _} = Error ->
                    Error
            end;
        {no, Fixed} ->
            {error, {bad_option, {buckets, [N / 1.0e9 || N <- Bounds],
                                  iolist_to_binary(["the bounds are fixed for the session's life: leave buckets "
                                                    "out, or give those of its first serve, ",
                                                    io_lib:format("~0p", [[N / 1.0e9 || N <- Fixed]])])}}}
    end;
serve(_Id, _Keeper, _Info, _Settings) ->
    {error, badarg}.

%% `{yes, Url}' when the session has a live endpoint.
served(#{metrics := #{endpoint := Pid, url := Url}}) when is_pid(Pid) ->
    case is_process_alive(Pid) of
        true -> {yes, Url};
        false -> no
    end;
served(_) ->
    no.

%% @doc Stops serving local session `Id': `ok' (also when it was not served), or
%% `{error, {no_such_session, Id}}'.
-spec unserve(ferrotrace_tracer:session_id(), pid() | none, map()) -> ok | {error, term()}.
unserve(Id, none, _Info) ->
    {error, {no_such_session, Id}};
unserve(Id, _Keeper, Info) ->
    case Info of
        #{metrics := #{endpoint := Pid}} when is_pid(Pid) ->
            ok = ferrotrace_metrics_http:stop(Pid),
            ferrotrace_registry:update(Id, #{metrics => none});
        #{} ->
            ok
    end.

%% @doc Opens the endpoint's socket before a session starts (the `metrics' option of
%% `calls/2' and `processes/2': a port in use refuses the start before anything runs):
%% `{ok, Endpoint}' or the error. {@link attach/2} gives it the session, {@link close/1}
%% closes it when the start fails.
-spec listen(settings()) -> {ok, {pid(), settings()}} | {error, term()}.
listen(Settings = #{port := Port}) ->
    case ferrotrace_metrics_http:listen(Settings) of
        {ok, Pid} -> {ok, {Pid, Settings}};
        {error, {port_in_use, Port}} ->
            {error, {port_in_use, Port, iolist_to_binary(
                ["another process listens on ", address(Settings), ": pick another port (port => 0 takes "
                 "any free one), or ferrotrace:unserve/1 the session that holds it"])}};
        {error, {listen, Reason}} ->
            {error, {cannot_listen, Reason, iolist_to_binary(["on ", address(Settings), ": ip => an address of this host"])}};
        {error, _} = Error ->
            Error
    end.

%% @doc Serves local session `Id' on an endpoint {@link listen/1} opened: `{ok, Url}'.
-spec attach({pid(), settings()}, ferrotrace_tracer:session_id()) -> {ok, string()} | {error, term()}.
attach({Endpoint, Settings = #{bounds := Bounds}}, Id) ->
    case ferrotrace_registry:lookup(Id) of
        {ok, Id, Keeper, Info} ->
            Context = context(Id, Info, Bounds),
            case ferrotrace_metrics_http:attach(Endpoint, Keeper, fun() -> exposition(Id, Context) end) of
                ok ->
                    {ok, Port} = ferrotrace_metrics_http:port(Endpoint),
                    Url = url(Settings#{port := Port}),
                    ok = ferrotrace_registry:update(Id, #{metrics => #{endpoint => Endpoint, url => Url},
                                                          metrics_bounds => Bounds}),
                    {ok, Url};
                {error, _} ->
                    {error, {no_such_session, Id}}
            end;
        error ->
            {error, {no_such_session, Id}}
    end.

%% @doc Closes an endpoint {@link listen/1} opened.
-spec close({pid(), settings()} | pid()) -> ok.
close({Endpoint, _Settings}) -> ferrotrace_metrics_http:stop(Endpoint);
close(Endpoint) -> ferrotrace_metrics_http:stop(Endpoint).

url(Settings = #{path := Path}) ->
    lists:flatten(["http://", address(Settings), binary_to_list(Path)]).

address(#{ip := Ip, port := Port}) ->
    Host = case Ip of
               {0, 0, 0, 0} -> "127.0.0.1";
               {_, _, _, _} -> inet:ntoa(Ip);
               _ -> ["[", inet:ntoa(Ip), "]"]
           end,
    lists:flatten([Host, ":", integer_to_list(Port)]).

%%--------------------------------------------------------------------------------------
%% A cluster session's parts: each node serves its own figures (ferrotrace_cluster:serve/2)

%% @doc On a cluster part's node: serves its local session `Id' (as {@link serve/4}).
-spec serve_part(ferrotrace_tracer:session_id(), settings()) -> {ok, string()} | {error, term()}.
serve_part(Id, Settings) when is_map(Settings) ->
    ferrotrace_dispatch:with_id(Id, fun(I, Keeper, Info) -> serve(I, Keeper, Info, Settings) end);
serve_part(_Id, _Settings) ->
    {error, badarg}.

%% @doc On a cluster part's node: stops serving its local session `Id'.
-spec unserve_part(ferrotrace_tracer:session_id()) -> ok | {error, term()}.
unserve_part(Id) ->
    ferrotrace_dispatch:with_id(Id, fun unserve/3).

%%--------------------------------------------------------------------------------------
%% The exposition

%% What every scrape of a session reuses: its labels and bounds, written once.
context(Id, Info, Bounds) ->
    Session = case maps:get(name, Info, undefined) of
                  Name when is_atom(Name), Name =/= undefined -> atom_to_binary(Name);
                  _ -> integer_to_binary(Id)
              end,
    Words = [max(1, B div erlang:system_info(wordsize)) || B <- ?SIZE_BYTES],
    #{labels => [<<"node=\"">>, escape(atom_to_binary(node())), <<"\",session=\"">>, escape(Session), $"],
      bounds => Bounds, le => [seconds(B) || B <- Bounds],
      words => Words, size_le => [integer_to_binary(B) || B <- ?SIZE_BYTES]}.

%% @doc The exposition of local session `Id' now (`Context' from its serve): `{ok, IoData}'
%% or `{error, Reason}' for a session gone.
-spec exposition(ferrotrace_tracer:session_id(), map()) -> {ok, iodata()} | {error, term()}.
exposition(Id, #{labels := L, bounds := Bounds, words := Words} = Context) ->
    case ferrotrace_tracer:session_metrics(Id, Bounds, Words) of
        {ok, Figures0} ->
            %% When the figures were read: a scrape is stamped when it starts, and read a
            %% moment later (tens of ms on a loaded node), so a client's count compared with
            %% them must be taken at this time.
            Figures = Figures0#{read_at => erlang:system_time(microsecond)},
            Info = case ferrotrace_registry:lookup(Id) of
                       {ok, _, _, I} -> I;
                       error -> #{}
                   end,
            Sample = case ferrotrace_tracer:session_call_sample(Id) of
                         {ok, N} -> N;
                         _ -> 1
                     end,
            {ok, [functions(Figures, Info, Context), health(Figures, Info, Sample, L),
                  activity(Figures, Context)]};
        {error, _} = Error ->
            Error
    end.

functions(#{functions := Functions0}, Info, #{labels := L, le := Le}) ->
    LeftOut = maps:get(generated_left_out, Info, []),
    Functions = [F || F = {MFA, _, _, _, _, _} <- Functions0, not lists:member(MFA, LeftOut)],
    Named = [{[L, <<",function=\"">>, escape(name(MFA)), $"], F} || F = {MFA, _, _, _, _, _} <- Functions],
    Duration = <<"ferrotrace_call_duration_seconds">>,
    [family(Duration, histogram, <<"Latency of the traced calls, from call to return or exception (less "
                                   "tracing's own cost where compensated).">>),
     [histogram(Duration, Labels, Le, Cumulative, Count, seconds(TotalNs))
      || {Labels, {_, _, _, TotalNs, Count, Cumulative}} <- Named],
     family(<<"ferrotrace_calls_total">>, counter, <<"Calls traced (of the calls made, where sampled: see "
                                                     "ferrotrace_calls_sampled_one_in).">>),
     [sample(<<"ferrotrace_calls_total">>, Labels, Calls) || {Labels, {_, Calls, _, _, _, _}} <- Named],
     family(<<"ferrotrace_call_exceptions_total">>, counter, <<"Traced calls that raised.">>),
     [sample(<<"ferrotrace_call_exceptions_total">>, Labels, Exc) || {Labels, {_, _, Exc, _, _, _}} <- Named]].

health(Figures = #{status := Status, events := E, memory := Memory, open_calls := Open, functions := Fs}, Info, Sample, L) ->
    Labels = [L],
    Gauges = [{<<"ferrotrace_session_running">>, <<"1 while the session traces, 0 once it stopped.">>,
               case Status of running -> 1; stopped -> 0 end},
              {<<"ferrotrace_session_start_time_seconds">>, <<"When the session started, Unix time.">>,
               seconds(maps:get(started_at, Info, 0) * 1000000)},
              {<<"ferrotrace_read_time_seconds">>, <<"When these figures were read, Unix time (a scrape is "
                                                    "stamped when it starts, a moment before).">>,
               seconds(maps:get(read_at, Figures, 0) * 1000)},
              {<<"ferrotrace_memory_bytes">>, <<"Bytes the session holds (rings, histograms, tables).">>, Memory},
              {<<"ferrotrace_functions">>, <<"Functions with figures.">>, length(Fs)},
              {<<"ferrotrace_calls_open">>, <<"Calls awaiting their return.">>, Open},
              {<<"ferrotrace_calls_sampled_one_in">>, <<"1 call in N traced now (the budget's rate or "
                                                        "sample => {calls, N}); 1: every call, 0: none.">>, Sample}]
        ++ budget(maps:get(budget, Info, none)),
    Counters = [{<<"ferrotrace_events_seen_total">>, <<"Trace events seen: aggregated + dropped + sampled out + "
                                                       "over a limit.">>, seen},
                {<<"ferrotrace_events_dropped_total">>, <<"Events dropped: a scheduler's ring was full.">>, dropped},
                {<<"ferrotrace_events_sampled_out_total">>, <<"Events left out by sampling (sample, the budget's "
                                                              "rate).">>, sampled_out},
                {<<"ferrotrace_events_limited_total">>, <<"Events over max_events or max_rate.">>, limited},
                {<<"ferrotrace_calls_frames_refused_total">>, <<"Calls refused: their process had 120 return-trace "
                                                                "frames of the session open.">>, frames_refused},
                {<<"ferrotrace_calls_fuse_refused_total">>, <<"Calls the budget's fuse refused on the scheduler.">>,
                 fuse_refused},
                {<<"ferrotrace_processes_untraced_total">>, <<"Processes the budget's fuse untraced.">>, untraced}],
    [[[family(Name, gauge, Help), sample(Name, Labels, Value)] || {Name, Help, Value} <- Gauges],
     [[family(Name, counter, Help), sample(Name, Labels, maps:get(Key, E, 0))] || {Name, Help, Key} <- Counters]].

budget(#{max_overhead := Max} = Budget) ->
    [{<<"ferrotrace_budget_max_overhead_ratio">>, <<"The overhead budget: a fraction of the CPU the node uses.">>, Max},
     {<<"ferrotrace_functions_shed">>, <<"Functions the budget has taken off now.">>, maps:get(shed_now, Budget, 0)}]
        ++ case maps:get(estimate, Budget, undefined) of
               Estimate when is_number(Estimate) ->
                   [{<<"ferrotrace_budget_estimate_ratio">>, <<"The session's cost over the last tick, as a fraction "
                                                              "of the CPU the node used.">>, Estimate}];
               _ ->
                   []
           end;
budget(_) ->
    [].

activity(#{series := Series}, #{labels := L, le := Le, size_le := SizeLe}) ->
    Kinds = [{wakeup, <<"ferrotrace_wakeup_latency_seconds">>, <<>>,
              <<"From a message sent to its receiver running (processes/2, messages with scheduling).">>},
             {run_slice, <<"ferrotrace_run_slice_seconds">>, <<>>, <<"How long a process ran once scheduled in.">>},
             {gc_minor, <<"ferrotrace_gc_pause_seconds">>, <<",kind=\"minor\"">>, <<"Garbage collection pauses.">>},
             {gc_major, <<"ferrotrace_gc_pause_seconds">>, <<",kind=\"major\"">>, <<"Garbage collection pauses.">>},
             {lifetime, <<"ferrotrace_process_lifetime_seconds">>, <<>>, <<"From spawn to exit.">>},
             {port_run_slice, <<"ferrotrace_port_run_slice_seconds">>, <<>>, <<"How long a port ran once scheduled in.">>},
             {message_size, <<"ferrotrace_message_size_bytes">>, <<>>, <<"Sizes of the messages sent (or received).">>}],
    Present = [{Kind, Name, Extra, Help, S} || {Kind, Name, Extra, Help} <- Kinds,
                                                S = {K, _, _, _} <- Series, K =:= Kind],
    %% One HELP and TYPE per family (the GC kinds share theirs).
    {Text, _} = lists:mapfoldl(
                  fun({Kind, Name, Extra, Help, {_, Count, Sum, Cumulative}}, Seen) ->
                          Head = case lists:member(Name, Seen) of
                                     true -> [];
                                     false -> family(Name, histogram, Help)
                                 end,
                          {Bounds, SumText} = case Kind of
                                                  message_size -> {SizeLe, integer_to_binary(Sum * erlang:system_info(wordsize))};
                                                  _ -> {Le, seconds(Sum)}
                                              end,
                          {[Head, histogram(Name, [L, Extra], Bounds, Cumulative, Count, SumText)], [Name | Seen]}
                  end, [], Present),
    Text.

family(Name, Type, Help) ->
    [<<"# HELP ">>, Name, $\s, Help, <<"\n# TYPE ">>, Name, $\s, atom_to_binary(Type), $\n].

sample(Name, Labels, Value) ->
    [Name, ${, Labels, <<"} ">>, number(Value), $\n].

histogram(Name, Labels, Le, Cumulative, Count, SumText) ->
    [[[Name, <<"_bucket{">>, Labels, <<",le=\"">>, Bound, <<"\"} ">>, integer_to_binary(N), $\n]
      || {Bound, N} <- lists:zip(Le, Cumulative)],
     Name, <<"_bucket{">>, Labels, <<",le=\"+Inf\"} ">>, integer_to_binary(Count), $\n,
     Name, <<"_sum{">>, Labels, <<"} ">>, SumText, $\n,
     Name, <<"_count{">>, Labels, <<"} ">>, integer_to_binary(Count), $\n].

number(N) when is_integer(N) -> integer_to_binary(N);
number(N) when is_float(N) -> float_to_binary(N, [short]);
number(N) when is_binary(N) -> N.

%% Nanoseconds as seconds, exactly: 2500 -> <<"0.0000025">>, 60000000000 -> <<"60">>.
seconds(Ns) when is_integer(Ns), Ns >= 0 ->
    Whole = integer_to_binary(Ns div 1000000000),
    case Ns rem 1000000000 of
        0 -> Whole;
        Frac -> <<Whole/binary, $., (trim(iolist_to_binary(io_lib:format("~9..0b", [Frac]))))/binary>>
    end.

trim(Digits) ->
    case binary:last(Digits) of
        $0 -> trim(binary:part(Digits, 0, byte_size(Digits) - 1));
        _ -> Digits
    end.

%% A function's name as the report writes it, kept for the endpoint's life (names do not
%% change; the process ends with the session).
name(MFA) ->
    case get({?MODULE, MFA}) of
        undefined ->
            Name = unicode:characters_to_binary(ferrotrace_names:mfa(MFA)),
            put({?MODULE, MFA}, Name),
            Name;
        Name ->
            Name
    end.

%% A label value: backslash, double quote and line feed escaped.
escape(Text) ->
    case binary:match(Text, [<<"\\">>, <<"\"">>, <<"\n">>]) of
        nomatch -> Text;
        _ -> << <<(case C of $\\ -> <<"\\\\">>; $" -> <<"\\\"">>; $\n -> <<"\\n">>; _ -> <<C>> end)/binary>>
               || <<C>> <= Text >>
    end.
