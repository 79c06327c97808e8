%%% @doc A session's figures as a comparison reads them, from a session, a window of one, a
%%% cluster session, or a file written by `ferrotrace:save/2'; and that file's form.
%%%
%%% Every side of a comparison becomes one map ({@link saved()}): per function its counts,
%%% total and own time, and its HDR histograms as the V2 bytes the engine writes (latency,
%%% own time, and the raw latency where compensation took something out); the session's
%%% kind, node, OTP release, time span, whether it compensated, its sampling; its call paths
%%% weighted by own time (for the differential flame graph). Functions are named by binaries
%%% (`{<<"m">>, <<"f">>, 1}'), never atoms, so that reading a file creates none.
%%%
%%% The file is JSON, `"format": "ferrotrace.saved"', `"version": 1' (doc/comparing.md
%%% lists its fields). A reader refuses a later version rather than guess at it; new fields
%%% may be added within a version, existing ones keep name and meaning.
-module(ferrotrace_saved).

-include_lib("kernel/include/file.hrl").

-export([read/1, local/1, local_window/3, save/2, json/1, to_json/1, from_json/2]).

-define(VERSION, 1).
-define(FORMAT, <<"ferrotrace.saved">>).
%% Bounds on what a file may hold: its bytes, its functions and its call paths.
-define(MAX_FILE_BYTES, 256 * 1024 * 1024).
-define(MAX_FUNCTIONS, 100000).
-define(MAX_PATHS, 1000000).

-type name() :: {binary(), binary(), non_neg_integer()}.
-type function_figures() ::
        #{mfa := name(), name := binary(), count := non_neg_integer(),
          exceptions := non_neg_integer(), total_ns := non_neg_integer(),
          own_ns := non_neg_integer() | undefined, raw_ns := non_neg_integer() | undefined,
          estimated := non_neg_integer() | undefined, latency := binary(),
          own := binary() | undefined, raw := binary() | undefined}.
-type saved() ::
        #{version := pos_integer(), kind := calls | raw | processes, source := binary(),
          node := binary(), nodes := [binary()], otp := binary(), spec := [binary()] | raw,
          started_at := non_neg_integer(), span_ms := non_neg_integer(),
          window := undefined | {non_neg_integer(), non_neg_integer()},
          status := running | stopped, compensated := boolean(),
          sample := #{calls := pos_integer(), processes := pos_integer()}, budget := boolean(),
          functions := [function_figures()], paths := [{[binary()], non_neg_integer()}],
          id => term(), file => binary()}.
-export_type([saved/0, name/0, function_figures/0]).

%%--------------------------------------------------------------------------------------
%% The sides of a comparison

%% @doc A side of a comparison: a session (its id, its name, a cluster session's pid),
%% `{Session, {FromMs, ToMs}}' (a window of a session started with `intervals', ms from its
%% start), or a file name (a string or binary) written by {@link save/2}.
-spec read(term()) -> {ok, saved()} | {error, term()}.
read({Session, {From, To}}) when is_integer(From), is_integer(To) ->
    if
        From < 0; To =< From ->
            {error, {bad_window, {From, To}, <<"{FromMs, ToMs}: ms from the session's start, 0 =< FromMs < ToMs">>}};
        true ->
            ferrotrace_dispatch:with_session(
              Session, fun(Id, _, _) -> local_window(Id, From, To) end,
              fun(Cluster) -> cluster(Cluster, fun(Id) -> [Id, From, To] end, local_window) end)
    end;
read({_Session, Window}) ->
    {error, {bad_window, ferrotrace_hint:brief(Window), <<"{FromMs, ToMs}: two integers, ms from the session's start">>}};
read(File) when is_binary(File) ->
    file(File);
read([C | _] = File) when is_integer(C) ->
    case io_lib:printable_unicode_list(File) of
        true -> file(unicode:characters_to_binary(File));
        false -> {error, {bad_side, ferrotrace_hint:brief(File), side_hint()}}
    end;
read(Session) when is_atom(Session); is_integer(Session); is_pid(Session) ->
    ferrotrace_dispatch:with_session(Session, fun(Id, _, _) -> local(Id) end,
                                     fun(Cluster) -> cluster(Cluster, fun(Id) -> [Id] end, local) end);
read(Other) ->
    {error, {bad_side, ferrotrace_hint:brief(Other), side_hint()}}.

side_hint() ->
    <<"a session (id, name, cluster pid), {Session, {FromMs, ToMs}} or a file written by ferrotrace:save/2">>.

%% @doc The figures of local session `Id' (also called on each node of a cluster session).
-spec local(term()) -> {ok, saved()} | {error, term()}.
local(Id) ->
    case {ferrotrace_local:summary(Id), ferrotrace_tracer:session_function_histograms(Id)} of
        {{error, _} = Error, _} ->
            Error;
        {_, {error, _} = Error} ->
            Error;
        {Summary, {ok, Histograms}} ->
            Info = info(Id),
            Bytes = maps:from_list([{MFA, {L, O, R}} || {MFA, L, O, R} <- Histograms]),
            Paths = case ferrotrace_tracer:session_collapsed(Id, exclusive) of
                        {ok, P, _} -> [{[ferrotrace_names:tag(MFA) || MFA <- Path], Ns} || {Path, Ns} <- P];
                        {error, _} -> []
                    end,
            Functions = [function(Call, maps:get(MFA, Bytes))
                         || Call = #{mfa := MFA} <- maps:get(calls, Summary), maps:is_key(MFA, Bytes)],
            {ok, (header(Summary, Info))#{id => maps:get(id, Summary, Id), functions => Functions, paths => Paths}}
    end.

%% @doc The figures of the intervals of local session `Id' within `FromMs'..`ToMs' (ms from
%% its start): latency histograms only (no own time, raw latency or call paths: intervals
%% keep none), counts and totals read from them.
-spec local_window(term(), term(), term()) -> {ok, saved()} | {error, term()}.
local_window(Id, From, To) when is_integer(From), is_integer(To), From >= 0, To > From ->
    case ferrotrace_local:summary(Id) of
        {error, _} = Error ->
            Error;
        Summary = #{elapsed_ms := Elapsed} ->
            case ferrotrace_intervals:session(Id, native) of
                {ok, _Start, Period, Intervals} when From < Elapsed, To =< Elapsed + Period ->
                    Inside = [I || I = {Offset, Length, _} <- Intervals, Offset >= From, Offset + Length =< To],
                    case Inside of
                        [] ->
                            {error, {window_outside, {From, To}, window_hint(Elapsed, Period)}};
                        _ ->
                            First = element(1, hd(Inside)),
                            {Last, LastLength, _} = lists:last(Inside),
                            window(Summary, info(Id), {First, Last + LastLength}, Inside)
                    end;
                {ok, _Start, Period, _} ->
                    {error, {window_outside, {From, To}, window_hint(Elapsed, Period)}};
                {error, {needs, intervals}} ->
                    {error, {needs, intervals, <<"a window reads a session started with intervals => Ms">>}};
                {error, _} = Error ->
                    Error
            end
    end;
local_window(_Id, From, To) ->
    {error, {bad_window, ferrotrace_hint:brief({From, To}), <<"{FromMs, ToMs}: ms from the session's start, 0 =< FromMs < ToMs">>}}.

window_hint(Elapsed, Period) ->
    iolist_to_binary(io_lib:format("the session spans 0..~b ms, in intervals of ~b ms: a window must hold "
                                   "at least one of them", [Elapsed, Period])).

window(Summary, Info, {From, To}, Inside) ->
    ByMFA = lists:foldl(fun({_, _, Hs}, Acc) ->
                                lists:foldl(fun({MFA, Bin}, A) -> maps:update_with(MFA, fun(L) -> [Bin | L] end, [Bin], A) end,
                                            Acc, Hs)
                        end, #{}, Inside),
    Calls = maps:from_list([{MFA, C} || C = #{mfa := MFA} <- maps:get(calls, Summary)]),
    Functions = lists:filtermap(
                  fun({MFA, Bins}) ->
                          case {merged(Bins), maps:find(MFA, Calls)} of
                              {{ok, Bin}, {ok, Call}} ->
                                  {ok, Buckets} = ferrotrace_hdr:decode(Bin),
                                  Count = ferrotrace_hdr:count(Buckets),
                                  {true, #{mfa => name(MFA), name => name_text(MFA), count => Count,
                                           exceptions => 0, total_ns => round(ferrotrace_hdr:total(Buckets)),
                                           own_ns => undefined, raw_ns => undefined,
                                           estimated => estimated(Call, Count), latency => Bin,
                                           own => undefined, raw => undefined}};
                              _ ->
                                  false
                          end
                  end, lists:sort(maps:to_list(ByMFA))),
    Header = header(Summary, Info),
    {ok, Header#{id => maps:get(id, Summary), window => {From, To}, span_ms => To - From,
                 started_at => maps:get(started_at, Header) + From, functions => Functions, paths => []}}.

merged([Bin]) -> {ok, Bin};
merged(Bins) -> ferrotrace_tracer:histogram_merge(Bins).

%% A window's calls stand for as many as the session's count does for its timed calls.
estimated(#{estimated := Est, count := Count}, N) when Count > 0 -> round(N * Est / Count);
estimated(_, _) -> undefined.

info(Id) ->
    case ferrotrace_registry:lookup(Id) of
        {ok, _, _, Info} -> Info;
        error -> #{}
    end.

header(Summary, Info) ->
    Spec = maps:get(spec, Info, raw),
    Kind = case Spec of
               raw -> raw;
               [] -> processes;
               _ -> calls
           end,
    #{version => ?VERSION, kind => Kind, source => <<"session">>,
      node => atom_to_binary(node()), nodes => [atom_to_binary(node())],
      otp => list_to_binary(erlang:system_info(otp_release)),
      spec => spec_text(Spec),
      started_at => maps:get(started_at, Summary, 0),
      span_ms => maps:get(elapsed_ms, Summary, 0),
      window => undefined,
      status => maps:get(status, Summary, stopped),
      compensated => maps:get(compensated, Summary, false) =:= true,
      sample => maps:with([calls, processes], maps:get(sample, Summary, #{calls => 1, processes => 1})),
      budget => maps:is_key(budget, Summary)}.

spec_text(raw) -> raw;
spec_text(Specs) when is_list(Specs) ->
    [case S of
         {M, F, A} when is_atom(M), is_atom(F), (is_integer(A) orelse A =:= '_') ->
             unicode:characters_to_binary(ferrotrace_names:mfa(S));
         _ ->
             unicode:characters_to_binary(io_lib:format("~0tP", [S, 8]))
     end || S <- Specs];
spec_text(_) -> [].

function(Call = #{mfa := MFA, count := Count}, {Latency, Own, Raw}) ->
    #{mfa => name(MFA), name => name_text(MFA), count => Count,
      exceptions => maps:get(exceptions, Call, 0), total_ns => maps:get(total, Call, 0),
      own_ns => maps:get(total, maps:get(own, Call, #{}), undefined),
      raw_ns => maps:get(total, maps:get(raw, Call, #{}), undefined),
      estimated => maps:get(estimated, Call, undefined), latency => Latency, own => Own, raw => Raw}.

name({M, F, A}) -> {atom_to_binary(M), atom_to_binary(F), A}.

name_text(MFA) -> unicode:characters_to_binary(ferrotrace_names:mfa(MFA)).

%% A cluster session: every live node's figures, added (histograms exactly, by the NIF).
cluster(Cluster, Args, Function) ->
    case ferrotrace_cluster:replies(Cluster, ?MODULE, Function, Args) of
        {ok, Replies} ->
            case [{N, R} || {N, R} <- Replies, not (is_tuple(R) andalso element(1, R) =:= ok)] of
                [{Node, {error, _} = Error} | _] when length(Replies) =:= 1 -> {error, {node, Node, Error}};
                _ ->
                    case [S || {_, {ok, S}} <- Replies] of
                        [] -> {error, {no_figures, Cluster, <<"no node of the cluster session answered">>}};
                        Parts -> add_parts(Parts, Cluster)
                    end
            end;
        {error, _} = Error ->
            Error
    end.

add_parts([First | _] = Parts, Cluster) ->
    Functions = lists:foldl(
                  fun(#{functions := Fs}, Acc) ->
                          lists:foldl(fun(F = #{mfa := M}, A) -> maps:update_with(M, fun(L) -> [F | L] end, [F], A) end, Acc, Fs)
                  end, #{}, Parts),
    Paths = lists:foldl(fun(#{paths := Ps}, Acc) ->
                                lists:foldl(fun({P, Ns}, A) -> maps:update_with(P, fun(N) -> N + Ns end, Ns, A) end, Acc, Ps)
                        end, #{}, Parts),
    {ok, First#{id => Cluster, node => atom_to_binary(node()), nodes => [N || #{node := N} <- Parts],
                source => <<"cluster">>,
                span_ms => lists:max([S || #{span_ms := S} <- Parts]),
                started_at => lists:min([S || #{started_at := S} <- Parts]),
                status => case lists:all(fun(#{status := S}) -> S =:= stopped end, Parts) of true -> stopped; false -> running end,
                functions => [add_functions(Fs) || {_, Fs} <- lists:sort(maps:to_list(Functions))],
                paths => lists:sort(maps:to_list(Paths))}}.

add_functions([One]) ->
    One;
add_functions([F | _] = Fs) ->
    Sum = fun(Key) -> case [V || #{Key := V} <- Fs, V =/= undefined] of
                          [] -> undefined;
                          Vs -> lists:sum(Vs)
                      end
          end,
    Hist = fun(Key) -> case [V || #{Key := V} <- Fs, V =/= undefined] of
                           Bins when length(Bins) =:= length(Fs) ->
                               {ok, B} = ferrotrace_tracer:histogram_merge(Bins),
                               B;
                           _ -> undefined
                       end
           end,
    F#{count => Sum(count), exceptions => Sum(exceptions), total_ns => Sum(total_ns),
       own_ns => Sum(own_ns), raw_ns => Sum(raw_ns), estimated => Sum(estimated),
       latency => Hist(latency), own => Hist(own), raw => Hist(raw)}.

%%--------------------------------------------------------------------------------------
%% The saved file

%% @doc Writes what a comparison needs of `Session' (as {@link read/1} takes it: a session,
%% a window, a cluster session, or a saved file) to `File' as JSON (see the module doc).
-spec save(term(), term()) -> ok | {error, term()}.
save(Session, File) ->
    %% A name ending in .json: what is written is JSON, and a mistyped argument (a spec, an
    %% option) is not taken for a file to create.
    case (is_binary(File) orelse (is_list(File) andalso io_lib:printable_unicode_list(File)))
        andalso string:lowercase(filename:extension(File)) == string:lowercase(json_extension(File)) of
        false ->
            {error, {bad_file, ferrotrace_hint:brief(File), <<"a file name ending in .json (a string)">>}};
        true ->
            case json(Session) of
                {ok, Json} -> file:write_file(File, Json);
                {error, _} = Error -> Error
            end
    end.

json_extension(File) when is_binary(File) -> <<".json">>;
json_extension(_) -> ".json".

%% @doc A side as {@link read/1} takes it, as the saved file's JSON text (for `ferrotrace
%% calls ... --save', which writes it where the command runs).
-spec json(term()) -> {ok, binary()} | {error, term()}.
json(Side) ->
    case read(Side) of
        {ok, Saved} -> to_json(Saved);
        {error, _} = Error -> Error
    end.

%% @doc The saved form as JSON text (pretty, as the json export).
-spec to_json(saved()) -> {ok, binary()} | {error, term()}.
to_json(Saved = #{functions := Functions, paths := Paths}) ->
    Doc = (maps:without([functions, paths, window, version, id, file], Saved))#{
            format => ?FORMAT, version => ?VERSION,
            window => case maps:get(window, Saved) of
                          undefined -> null;
                          {From, To} -> #{from_ms => From, to_ms => To}
                      end,
            functions => [json_function(F) || F <- Functions],
            paths => [#{frames => Frames, own_ns => Ns} || {Frames, Ns} <- Paths]},
    ferrotrace_tracer:to_json(Doc).

json_function(F = #{mfa := {M, Fn, A}}) ->
    Hdr = fun(undefined) -> null;
             (Bin) -> base64:encode(Bin)
          end,
    (maps:without([mfa, latency, own, raw], F))#{
      module => M, function => Fn, arity => A,
      latency_hdr => Hdr(maps:get(latency, F)), own_hdr => Hdr(maps:get(own, F)),
      raw_hdr => Hdr(maps:get(raw, F))}.

file(File) ->
    case file:read_file_info(File) of
        {error, Reason} ->
            {error, {file, File, list_to_binary(file:format_error(Reason))}};
        {ok, #file_info{type = Type}} when Type =/= regular ->
            {error, {file, File, <<"not a regular file">>}};
        {ok, #file_info{size = Size}} when Size > ?MAX_FILE_BYTES ->
            {error, {not_a_saved_session, File, <<"larger than 256 MB: not a file ferrotrace:save/2 wrote">>}};
        {ok, _} ->
            case file:read_file(File) of
                {ok, Bin} ->
                    case from_json(File, Bin) of
                        {ok, Saved} -> {ok, Saved#{file => File}};
                        {error, _} = Error -> Error
                    end;
                {error, Reason} -> {error, {file, File, list_to_binary(file:format_error(Reason))}}
            end
    end.

%% @doc The saved form read back from JSON text (`Source' names it in errors): checked
%% field by field, histograms decoded as far as their headers (every byte is read when
%% compared, within the bounds of {@link ferrotrace_hdr}).
-spec from_json(binary(), binary()) -> {ok, saved()} | {error, term()}.
from_json(Source, Bin) ->
    case ferrotrace_json:decode(Bin) of
        {error, {not_json, At}} ->
            {error, {not_a_saved_session, Source,
                     iolist_to_binary(io_lib:format("not JSON (from byte ~b): write one with ferrotrace:save(S, File) "
                                                    "or `ferrotrace calls ... --save File'", [At]))}};
        {ok, #{<<"format">> := ?FORMAT, <<"version">> := V}} when is_integer(V), V > ?VERSION ->
            {error, {future_version, Source, V,
                     iolist_to_binary(io_lib:format("saved by a newer ferrotrace (format version ~b); this one reads "
                                                    "version ~b: compare with the newer one", [V, ?VERSION]))}};
        {ok, #{<<"format">> := ?FORMAT, <<"version">> := ?VERSION} = Doc} ->
            try {ok, saved(Doc)}
            catch throw:{field, Field} ->
                    {error, {bad_saved_session, Source, Field, <<"this field is missing or malformed">>}}
            end;
        {ok, #{<<"format">> := <<"ferrotrace.summary">>}} ->
            {error, {not_a_saved_session, Source,
                     <<"a json export holds percentiles, not histograms: write the session with ferrotrace:save(S, File)">>}};
        {ok, _} ->
            {error, {not_a_saved_session, Source, <<"JSON, but not a saved session (\"format\": \"ferrotrace.saved\")">>}}
    end.

saved(Doc) ->
    Functions = field(<<"functions">>, Doc, fun(L) -> is_list(L) andalso length(L) =< ?MAX_FUNCTIONS end),
    Paths = field(<<"paths">>, Doc, fun(L) -> is_list(L) andalso length(L) =< ?MAX_PATHS end),
    Spec = case maps:get(<<"spec">>, Doc, []) of
               <<"raw">> -> raw;
               L when is_list(L) -> [S || S <- L, is_binary(S)];
               _ -> throw({field, <<"spec">>})
           end,
    #{version => ?VERSION,
      kind => enum(<<"kind">>, Doc, [calls, raw, processes]),
      source => <<"file">>,
      node => field(<<"node">>, Doc, fun is_binary/1),
      nodes => field(<<"nodes">>, Doc, fun(L) -> is_list(L) andalso lists:all(fun is_binary/1, L) end),
      otp => field(<<"otp">>, Doc, fun is_binary/1),
      spec => Spec,
      started_at => field(<<"started_at">>, Doc, fun natural/1),
      span_ms => field(<<"span_ms">>, Doc, fun natural/1),
      window => case maps:get(<<"window">>, Doc, null) of
                    null -> undefined;
                    #{<<"from_ms">> := F, <<"to_ms">> := T} when is_integer(F), is_integer(T), F >= 0, T > F -> {F, T};
                    _ -> throw({field, <<"window">>})
                end,
      status => enum(<<"status">>, Doc, [running, stopped]),
      compensated => field(<<"compensated">>, Doc, fun is_boolean/1),
      sample => case maps:get(<<"sample">>, Doc, null) of
                    #{<<"calls">> := C, <<"processes">> := P} when is_integer(C), C >= 1, is_integer(P), P >= 1 ->
                        #{calls => C, processes => P};
                    _ -> throw({field, <<"sample">>})
                end,
      budget => field(<<"budget">>, Doc, fun is_boolean/1),
      functions => [saved_function(F) || F <- Functions],
      paths => [saved_path(P) || P <- Paths]}.

saved_function(F) when is_map(F) ->
    Int = fun(K) -> field(K, F, fun natural/1) end,
    Maybe = fun(K) -> case maps:get(K, F, null) of
                          null -> undefined;
                          V when is_integer(V), V >= 0 -> V;
                          _ -> throw({field, K})
                      end
            end,
    Hdr = fun(K, Required) ->
                  case maps:get(K, F, null) of
                      null when not Required -> undefined;
                      B64 when is_binary(B64) ->
                          try base64:decode(B64) of
                              Bin -> Bin
                          catch error:_ -> throw({field, K})
                          end;
                      _ -> throw({field, K})
                  end
          end,
    #{mfa => {field(<<"module">>, F, fun is_binary/1), field(<<"function">>, F, fun is_binary/1),
              field(<<"arity">>, F, fun(A) -> is_integer(A) andalso A >= 0 andalso A =< 255 end)},
      name => field(<<"name">>, F, fun is_binary/1),
      count => Int(<<"count">>), exceptions => Int(<<"exceptions">>), total_ns => Int(<<"total_ns">>),
      own_ns => Maybe(<<"own_ns">>), raw_ns => Maybe(<<"raw_ns">>), estimated => Maybe(<<"estimated">>),
      latency => Hdr(<<"latency_hdr">>, true), own => Hdr(<<"own_hdr">>, false), raw => Hdr(<<"raw_hdr">>, false)};
saved_function(_) ->
    throw({field, <<"functions">>}).

saved_path(#{<<"frames">> := Frames, <<"own_ns">> := Ns}) when is_list(Frames), is_integer(Ns), Ns >= 0 ->
    case lists:all(fun is_binary/1, Frames) of
        true -> {Frames, Ns};
        false -> throw({field, <<"paths">>})
    end;
saved_path(_) ->
    throw({field, <<"paths">>}).

field(Key, Map, Valid) ->
    case maps:find(Key, Map) of
        {ok, V} ->
            case Valid(V) of
                true -> V;
                false -> throw({field, Key})
            end;
        error ->
            throw({field, Key})
    end.

natural(V) -> is_integer(V) andalso V >= 0.

enum(Key, Map, Atoms) ->
    V = field(Key, Map, fun is_binary/1),
    case [A || A <- Atoms, atom_to_binary(A) =:= V] of
        [A] -> A;
        [] -> throw({field, Key})
    end.
