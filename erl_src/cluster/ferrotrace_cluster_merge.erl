%%% @private
%%% @doc The nodes' answers of a cluster session, read as one: plain functions of the terms
%%% the parts send (summaries, histogram binaries, lists), no processes and no calls to
%%% other nodes; {@link ferrotrace_cluster} gathers the answers and calls these.
%%%
%%% == Merging ==
%%% <ul>
%%% <li>Counts add (`count', `returns', `exceptions', `total', and the integer fields of
%%% `events', `pairing', `memory' and `stacks').</li>
%%% <li>Latencies merge exactly: each node ships its HDR histograms in HdrHistogram's V2
%%% compressed encoding; they are added bucket by bucket and the percentiles and `max' are
%%% read from the sum, never averaged, so the cluster p99 is the p99 of all calls to HDR
%%% precision.</li>
%%% <li>The mean is exact, as one node's is: the nodes' summed totals over the latencies the
%%% merged histogram recorded.</li>
%%% <li>The backlog is the worst node's (the fullest ring, the longest gap), not a sum.</li>
%%% <li>A node that did not answer is listed in `nodes_down' and left out of the figures.</li>
%%% </ul>
%%% Merging histograms needs the engine's NIFs (`ferrotrace_tracer:histogram_merge/1'); a
%%% binary that is not a V2 histogram is a bug in a part, and crashes the reader.
-module(ferrotrace_cluster_merge).

-export([figures/2, lists/1, summary/2, histogram/2, hdr_log/2, intervals/3,
         slow_calls/2, recent/1, changes/1, folded/1, capture_counts/1]).

%% One node's summary and its histograms (`{MFA, V2Binary}').
-type node_figures() :: {ferrotrace:summary(), [{mfa(), binary()}]}.
%% What the coordinator knows of the cluster session itself.
-type info() :: #{id := pid(), name := atom(), nodes := [node()], nodes_down := [node()],
                  stop_reason := atom()}.
%% One node's interval histograms: its start (system time, ms) and, per interval, its
%% offset from that start and its length (ms) and each function's histogram.
-type node_intervals() :: {integer(), [{non_neg_integer(), non_neg_integer(), [{mfa(), binary()}]}]}.
-export_type([node_figures/0, info/0, node_intervals/0]).

%% @doc The nodes that answered their figures (`{ok, Summary, Histograms}'), and the nodes
%% down: `Down' and every node that answered anything else (an error, `{badrpc, _}').
-spec figures([node()], [{node(), term()}]) -> {[{node(), node_figures()}], [node()]}.
figures(Down, Replies) ->
    {[{Node, {S, H}} || {Node, {ok, S, H}} <- Replies],
     lists:usort(Down ++ [Node || {Node, R} <- Replies, not is_tuple(R) orelse element(1, R) =/= ok])}.

%% @doc The nodes' answers to `ferrotrace:add/2' or `remove/2' as one: `{ok, Merged}' when
%% every node answered `{ok, Map}' (its lists joined, `functions' added, each node's
%% answer in `by_node'), else `{error, {node, Node, Reason}}' for the first that did not.
-spec changes([{node(), term()}]) -> {ok, #{atom() => term()}} | {error, {node, node(), term()}}.
changes(Replies) ->
    case [{Node, R} || {Node, R} <- Replies, not is_tuple(R) orelse element(1, R) =/= ok] of
        [{Node, {error, Reason}} | _] ->
            {error, {node, Node, Reason}};
        [{Node, {badrpc, Reason}} | _] ->
            {error, {node, Node, Reason}};
        [{Node, Other} | _] ->
            {error, {node, Node, Other}};
        [] ->
            Maps = [M || {_, {ok, M}} <- Replies, is_map(M)],
            Joined = lists:foldl(fun(M, Acc) -> maps:fold(fun join/3, Acc, M) end, #{}, Maps),
            {ok, Joined#{by_node => maps:from_list([{Node, M} || {Node, {ok, M}} <- Replies])}}
    end.

join(Key, N, Acc) when is_integer(N) -> Acc#{Key => N + maps:get(Key, Acc, 0)};
join(Key, L, Acc) when is_list(L) -> Acc#{Key => lists:usort(L ++ maps:get(Key, Acc, []))};
join(Key, V, Acc) -> Acc#{Key => V}.

%% @doc The lists the nodes answered (a node that never called the function has none of
%% it); the first error only if no node answered a list.
-spec lists([{node(), term()}]) -> [list()] | {error, term()}.
lists(Replies) ->
    case {[L || {_, L} <- Replies, is_list(L)], [E || {_, {error, _} = E} <- Replies]} of
        {[], [Error | _]} -> Error;
        {Lists, _} -> Lists
    end.

%% @doc The merged summary, with `nodes', `nodes_down' and `by_node => #{Node => Summary}'.
%% The session is `running' while any node's is; once stopped, its reason is the
%% coordinator's (`StopReason' in `Info') or, if it has none, the first node's.
-spec summary(info(), [{node(), node_figures()}]) -> ferrotrace:summary().
summary(#{id := Id, name := Name, stop_reason := Reason0} = Info, Figures) ->
    Summaries = [S || {_, {S, _}} <- Figures],
    Calls = [Call#{mfa => MFA} || {MFA, {_Bin, Call}} <- merge_histograms(Figures)],
    ByTotal = fun(#{total := A}, #{total := B}) -> A >= B end,
    Status = case lists:any(fun(#{status := S}) -> S =:= running end, Summaries) of
                 true -> running;
                 false -> stopped
             end,
    Reason = case {Status, Reason0} of
                 {running, _} -> undefined;
                 {stopped, undefined} -> first([R || #{stop_reason := R} <- Summaries]);
                 {stopped, R} -> R
             end,
    %% The histograms' precision, as the first node that says it (every node runs this code).
    Precision = lists:foldr(fun(S, Acc) -> maps:merge(Acc, maps:with([precision], S)) end, #{}, Summaries),
    Precision#{id => Id, name => Name, status => Status, stop_reason => Reason,
      started_at => min_of([T || #{started_at := T} <- Summaries]),
      stopped_at => case Status of
                        running -> undefined;
                        stopped -> max_of([T || #{stopped_at := T} <- Summaries, is_integer(T)])
                    end,
      elapsed_ms => max_of([E || #{elapsed_ms := E} <- Summaries]),
      calls => lists:sort(ByTotal, Calls),
      loops => lists:usort(lists:append([L || #{loops := L} <- Summaries])),
      events => add_maps([E || #{events := E} <- Summaries]),
      pairing => add_maps([P || #{pairing := P} <- Summaries]),
      memory => add_maps([M || #{memory := M} <- Summaries]),
      backlog => max_maps([B || #{backlog := B} <- Summaries]),
      stacks => add_maps([M || #{stacks := M} <- Summaries]),
      collector_cpu_ns => lists:sum([C || #{collector_cpu_ns := C} <- Summaries]),
      aggregators => lists:sum([maps:get(aggregators, S, 1) || S <- Summaries]),
      nodes => maps:get(nodes, Info), nodes_down => maps:get(nodes_down, Info),
      by_node => maps:from_list([{Node, S} || {Node, {S, _}} <- Figures])}.

%% @doc One function's latency over every node, in power-of-two buckets.
-spec histogram([{node(), node_figures()}], mfa()) ->
          [ferrotrace:bucket()] | {error, {no_such_function, mfa()}}.
histogram(Figures, MFA) ->
    case [B || {_Node, {_Summary, Hs}} <- Figures, {M, B} <- Hs, M =:= MFA] of
        [] ->
            {error, {no_such_function, MFA}};
        Parts ->
            {ok, Merged} = ferrotrace_tracer:histogram_merge(Parts),
            {ok, #{buckets := Buckets}} = ferrotrace_tracer:histogram_figures(Merged),
            Buckets
    end.

%% @doc What {@link ferrotrace_export:hdr_log/3} writes for the whole cluster: the earliest
%% node's start (`Now' when no node answered), the longest node's elapsed time, and each
%% function's histograms added.
-spec hdr_log([{node(), node_figures()}], integer()) ->
          {integer(), non_neg_integer(), [{mfa(), binary()}]}.
hdr_log(Figures, Now) ->
    Summaries = [S || {_, {S, _}} <- Figures],
    Start = lists:min([T || #{started_at := T} <- Summaries] ++ [Now]),
    Elapsed = lists:max([0 | [E || #{elapsed_ms := E} <- Summaries]]),
    {Start, Elapsed, [{MFA, Bin} || {MFA, {Bin, _}} <- merge_histograms(Figures)]}.

%% @doc Each node's intervals placed on one clock (system time, ms) in slots of `Ms' from
%% the earliest node's start (`Now' if that is earlier), a slot's histograms of a function
%% added: `{Start, [{From, Length, Histograms}]}' for
%% {@link ferrotrace_export:hdr_log_intervals/2}, `From' relative to `Start'.
-spec intervals(pos_integer(), integer(), [node_intervals()]) ->
          {integer(), [{non_neg_integer(), non_neg_integer(), [{mfa(), binary()}]}]}.
intervals(Ms, Now, Nodes) ->
    Start0 = lists:min([Now | [S || {S, _} <- Nodes]]),
    Slots = lists:foldl(
              fun({Slot, From, To, Hs}, Acc) ->
                      maps:update_with(Slot, fun({F, T, Old}) -> {min(F, From), max(T, To), Hs ++ Old} end,
                                       {From, To, Hs}, Acc)
              end, #{},
              [{(S + Off - Start0) div Ms, S + Off - Start0, S + Off + Len - Start0, Hs}
               || {S, Is} <- Nodes, {Off, Len, Hs} <- Is]),
    {Start0, [{From, To - From, merge_tagged(Hs)} || {_, {From, To, Hs}} <- lists:keysort(1, maps:to_list(Slots))]}.

%% @doc The capture gates' counts of every node that answered them, added (`seen', `sent',
%% `refused_every', `refused_max'): `{ok, none}' when no node's session has captures.
-spec capture_counts([{node(), term()}]) -> {ok, ferrotrace_capture:counts() | none}.
capture_counts(Replies) ->
    case [Counts || {_Node, {ok, Counts}} <- Replies, is_map(Counts)] of
        [] -> {ok, none};
        All -> {ok, add_maps(All)}
    end.

%% @doc The nodes' kept calls as one list: `slowest' slowest first, `threshold' in the
%% order they began.
-spec slow_calls(slowest | threshold, [[ferrotrace_slow:slow_call()]]) -> [ferrotrace_slow:slow_call()].
slow_calls(slowest, Lists) ->
    lists:sort(fun(#{duration := A}, #{duration := B}) -> A >= B end, lists:append(Lists));
slow_calls(threshold, Lists) ->
    lists:sort(fun(#{started_at := A}, #{started_at := B}) -> A =< B end, lists:append(Lists)).

%% @doc The nodes' recorded events as one list, in time order.
-spec recent([[ferrotrace_recent:event()]]) -> [ferrotrace_recent:event()].
recent(Lists) ->
    lists:sort(fun(#{at := A}, #{at := B}) -> A =< B end, lists:append(Lists)).

%% @doc Sums the folded lines of several exports (`a;b;c Weight' per line; a cluster's
%% nodes): equal paths add, sorted by path.
-spec folded([binary()]) -> binary().
folded(Texts) ->
    Sums = lists:foldl(
             fun(Line, Acc) ->
                     case string:split(Line, <<" ">>, trailing) of
                         [Path, N] -> maps:update_with(Path, fun(V) -> V + binary_to_integer(N) end,
                                                       binary_to_integer(N), Acc);
                         _ -> Acc
                     end
             end, #{}, [L || T <- Texts, L <- binary:split(T, <<"\n">>, [global]), L =/= <<>>]),
    iolist_to_binary([[Path, $\s, integer_to_binary(N), $\n] || {Path, N} <- lists:sort(maps:to_list(Sums))]).

%%--------------------------------------------------------------------------------------
%% Internal functions.

%% [{MFA, {MergedBin, CallFigures}}]: counts added, latency read from the summed histogram.
merge_histograms(Figures) ->
    Bins = by_mfa([H || {_, {_, Hs}} <- Figures, H <- Hs]),
    Counts = lists:foldl(
               fun(#{mfa := MFA} = C, Acc) ->
                       %% A node whose count is of every call estimates it as the count.
                       Add = (maps:with([count, returns, exceptions, total], C))#{estimated => maps:get(estimated, C, maps:get(count, C, 0))},
                       maps:update_with(MFA, fun(Old) -> add_maps([Old, Add]) end, Add, Acc)
               end, #{}, [C || {_, {#{calls := Cs}, _}} <- Figures, C <- Cs]),
    [begin
         {ok, Merged} = ferrotrace_tracer:histogram_merge(Parts),
         {ok, F} = ferrotrace_tracer:histogram_figures(Merged),
         Added = maps:get(MFA, Counts, #{}),
         Quantiles = maps:with([p50, p90, p99, p999, max], F),
         {MFA, {Merged, maps:merge(Quantiles#{mean => exact_mean(F, Added)}, Added)}}
     end || {MFA, Parts} <- maps:to_list(Bins)].

%% The mean as one node's summary has it: exact, the nodes' summed totals over the latencies
%% the merged histogram recorded (HDR's estimate, or `undefined', when there is no total).
exact_mean(#{count := Recorded}, #{total := Total}) when Recorded > 0 ->
    round(Total / Recorded);
exact_mean(#{mean := Mean}, _) ->
    Mean.

%% [{MFA, Bin}] with a function's histograms added, sorted by function.
merge_tagged(Hs) ->
    [begin {ok, Sum} = ferrotrace_tracer:histogram_merge(Bins), {MFA, Sum} end
     || {MFA, Bins} <- lists:sort(maps:to_list(by_mfa(Hs)))].

%% #{MFA => [Bin]}: a function's histograms, from every node.
by_mfa(Hs) ->
    lists:foldl(fun({MFA, Bin}, Acc) -> maps:update_with(MFA, fun(L) -> [Bin | L] end, [Bin], Acc) end,
                #{}, Hs).

%% Integer values added key by key; any other value is the last map's.
add_maps(Maps) ->
    lists:foldl(fun(M, Acc) ->
                        maps:fold(fun(K, V, A) when is_integer(V) ->
                                          maps:update_with(K, fun(Old) -> Old + V end, V, A);
                                     (K, V, A) -> A#{K => V}
                                  end, Acc, M)
                end, #{}, Maps).

%% The largest value of each key (the backlog: the fullest ring and the longest gap of any
%% node, not their sum).
max_maps(Maps) ->
    lists:foldl(fun(M, Acc) ->
                        maps:fold(fun(K, V, A) -> maps:update_with(K, fun(Old) -> max(Old, V) end, V, A) end,
                                  Acc, M)
                end, #{}, Maps).

first([]) -> undefined;
first([X | _]) -> X.

min_of([]) -> undefined;
min_of(L) -> lists:min(L).

max_of([]) -> undefined;
max_of(L) -> lists:max(L).
