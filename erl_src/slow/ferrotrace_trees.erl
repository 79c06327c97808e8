%%% @doc Call trees, kept speculatively (`trees => #{slower_than => Ns}'): the option
%%% checked, the kept trees read, and printed.
%%%
%%% For each root call (by default the outermost traced call of a process; with
%%% `root => Spec' a call of a function the spec names) the engine builds the process's
%%% tree of traced calls in a bounded buffer on its aggregator threads, not on the
%%% schedulers; when the root returns after `slower_than' ns or longer the tree is kept
%%% (the `keep' slowest per root function, default 10), otherwise dropped. A tree keeps
%%% its first `max_nodes' nodes (default 2000) and counts the calls past them in the
%%% `dropped' of their nearest kept caller. Only the session's traced functions appear.
%%% Latencies are nanoseconds, compensated as the session's other figures are.
%%%
%%% Each tree is a map `#{mfa, latency, own, started_at, children, dropped}', with
%%% `exception => true' on a call that raised (or was unwound), and on the root `pid' and,
%%% when the session copies arguments (`args => true'), `args'. `started_at' is system time
%%% in microseconds, as in `ferrotrace:slowest/2'.
-module(ferrotrace_trees).

-export([engine/1, engine_roots/1, set_roots/2, trees/2, with_counts/2, with_trees/2, print/2, format/2, report_lines/2]).
-export([text/2, tree_at/3]).

-type tree() :: #{mfa := mfa(), latency := non_neg_integer(), own := non_neg_integer(),
                  started_at := integer(), children := [tree()], dropped := non_neg_integer(),
                  exception => true, pid => pid(), args => [term()]}.
-export_type([tree/0]).

-define(MAX_NS, 3600000000000).
-define(KEYS, [slower_than, root, keep, max_nodes]).
-define(ACCEPTED,
        <<"a map of slower_than (ns, an integer from 0 to 3600000000000: a root call that took "
          "this long or longer keeps its tree; required), root (a spec naming the functions "
          "whose calls are roots; default: the outermost traced call of each process), keep "
          "(trees kept per root function, 1 to 100; default 10) and max_nodes (nodes kept per "
          "tree, 1 to 100000; default 2000)">>).
-define(NO_TREES, <<"the session keeps no call trees: start it with trees => #{slower_than => Ns}">>).

%% @doc The engine's options for `trees => #{...}' in a session's options: `{ok, Engine}'
%% with `trees => {SlowerThanNs, Keep, MaxNodes, Roots}' (`Roots' are the specs of `root',
%% or `[]': a start's options split them off with {@link engine_roots/1} and the keeper gives them the engine
%% with {@link set_roots/2}), `{ok, #{}}' without `trees', or
%% `{error, {bad_option, {trees, Value, Accepted}}}'. The engine takes `trees' as one
%% tuple, so that no option of its own is a name a user could give.
-spec engine(map()) -> {ok, map()} | {error, {bad_option, {trees, term(), binary()}}}.
engine(#{trees := Trees}) ->
    case check(Trees) of
        {ok, Engine} -> {ok, Engine};
        {error, Accepted} -> {error, {bad_option, {trees, Trees, Accepted}}}
    end;
engine(_Options) ->
    {ok, #{}}.

%% The keys first, so that a mistyped `slower_than' is hinted too.
check(Trees) when is_map(Trees) ->
    case ferrotrace_hint:keys(Trees, ?KEYS, ?ACCEPTED) of
        ok -> values(Trees);
        {error, _} = Error -> Error
    end;
check(_Trees) ->
    {error, ?ACCEPTED}.

values(#{slower_than := Ns} = Trees) when is_integer(Ns), Ns >= 0, Ns =< ?MAX_NS ->
    Keep = maps:get(keep, Trees, 10),
    MaxNodes = maps:get(max_nodes, Trees, 2000),
    case roots(Trees) of
        error -> {error, ?ACCEPTED};
        _ when not is_integer(Keep); Keep < 1; Keep > 100 -> {error, ?ACCEPTED};
        _ when not is_integer(MaxNodes); MaxNodes < 1; MaxNodes > 100000 -> {error, ?ACCEPTED};
        Roots -> {ok, #{trees => {Ns, Keep, MaxNodes, Roots}}}
    end;
values(_Trees) ->
    {error, ?ACCEPTED}.

roots(#{root := Spec}) ->
    try ferrotrace_spec:parse(Spec) of
        {ok, Parsed} -> [{M, F, A} || {M, F, A, _} <- Parsed];
        {error, _} -> error
    catch _:_ -> error
    end;
roots(#{}) ->
    [].

%% @doc The engine's options as its `new_session' takes them, and the roots to give it
%% with {@link set_roots/2}: `{EngineOptions, Roots}' (`trees' of {@link engine/1} less its
%% roots; other options as they are, `Roots' `[]').
-spec engine_roots(map()) -> {map(), list()}.
engine_roots(#{trees := {Ns, Keep, MaxNodes, Roots}} = Engine) when is_list(Roots) ->
    {Engine#{trees := {Ns, Keep, MaxNodes}}, Roots};
engine_roots(Engine) ->
    {Engine, []}.

%% @doc Tells session `Id' which calls are roots (the `trees_root' of {@link engine/1}):
%% `ok', also for `[]' (the default roots).
-spec set_roots(ferrotrace_tracer:session_id(), [mfa() | {atom(), atom(), '_'}]) -> ok | {error, term()}.
set_roots(_Id, []) -> ok;
set_roots(Id, Roots) -> ferrotrace_tracer:session_set_tree_roots(Id, Roots).

%% @doc The kept trees of root `MFA' in session `Id', slowest first, or
%% `{error, {no_trees, Why}}' for a session started without `trees'.
-spec trees(ferrotrace_tracer:session_id(), mfa()) -> [tree()] | {error, term()}.
trees(Id, MFA) ->
    case ferrotrace_tracer:session_trees(Id, MFA) of
        {ok, Trees} when is_list(Trees) -> Trees;
        {error, no_trees} -> {error, {no_trees, ?NO_TREES}};
        {error, _} = Error -> Error
    end.

%% @doc The kept tree of process `Pid' whose root call ran at `AtUs' (system time in
%% microseconds, as `started_at'; a slow call's `started_at' for instance), of any root
%% function of session `Id': `{ok, Tree}', or `none' (no such tree kept, or no trees).
%% Roots of one process do not overlap, so there is at most one.
-spec tree_at(ferrotrace_tracer:session_id(), pid(), integer()) -> {ok, tree()} | none.
tree_at(Id, Pid, AtUs) ->
    Kept = case counts(Id) of
               #{kept := K} -> K;
               none -> []
           end,
    Found = [T || #{mfa := MFA} <- Kept, Trees <- [trees(Id, MFA)], is_list(Trees),
                  T = #{pid := P, started_at := From, latency := L} <- Trees,
                  P =:= Pid, AtUs >= From, AtUs =< From + L div 1000 + 1],
    case Found of
        [Tree | _] -> {ok, Tree};
        [] -> none
    end.

%% What the trees of session `Id' hold and saw, the summary's `trees':
%% `#{kept => [#{mfa, count}], built, not_built, abandoned, nodes_dropped, bytes,
%% slower_than, keep, max_nodes}' (`built': root calls whose tree was built to the end;
%% `not_built': roots past the bound of nodes being built; `abandoned': roots that never
%% returned; `nodes_dropped': calls left out of trees by `max_nodes' or by the bound of nodes
%% being built; `bytes': what the trees hold), or
%% `none' for a session without trees (or one gone).
-spec counts(ferrotrace_tracer:session_id()) -> map() | none.
counts(Id) ->
    case ferrotrace_tracer:session_trees(Id, all) of
        {ok, #{kept := Kept} = Counts} ->
            Counts#{kept := [#{mfa => MFA, count => N} || {MFA, N} <- lists:sort(Kept)]};
        _ ->
            none
    end.

%% @doc `Summary' of session `Id' with `trees => counts(Id)' (see counts/1 below) if the
%% session keeps trees, else as it is.
-spec with_counts(ferrotrace_tracer:session_id(), map()) -> map().
with_counts(Id, Summary) ->
    case counts(Id) of
        none -> Summary;
        Counts -> Summary#{trees => Counts}
    end.

%% @doc `Summary' of session `Id' with, in its `trees', every kept tree (for the JSON
%% export): `roots', a list of `#{mfa, trees}', each tree a flat list of its nodes in the
%% order the calls began, each node a map as {@link trees/2}'s without `children' and with
%% `parent', the index of its caller in the list (the root is the first, its own parent):
%% a JSON document nests 100 deep at most, and a tree may be deeper. `Summary' itself
%% without trees.
-spec with_trees(ferrotrace_tracer:session_id(), map()) -> map().
with_trees(Id, #{trees := #{kept := Kept} = Counts} = Summary) ->
    Roots = [#{mfa => MFA, trees => [flat(T) || T <- Trees]}
             || #{mfa := MFA} <- Kept, Trees <- [trees(Id, MFA)], is_list(Trees)],
    Summary#{trees := Counts#{roots => Roots}};
with_trees(_Id, Summary) ->
    Summary.

flat(Root) ->
    lists:reverse(flat([{Root, 0}], 0, [])).

%% In pre-order, without recursion over the depth: `Pending' holds `{Node, ParentIndex}'.
flat([], _Index, Acc) ->
    Acc;
flat([{#{children := Children} = Node, Parent} | Pending], Index, Acc) ->
    flat([{C, Index} || C <- Children] ++ Pending, Index + 1,
         [(maps:remove(children, Node))#{parent => Parent} | Acc]).

%% @doc Prints the slowest of `Trees' ({@link trees/2}'s answer) as {@link format/2} does:
%% `ok', or the error it was given.
-spec print([tree()] | {error, term()}, pos_integer()) -> ok | {error, term()}.
print({error, _} = Error, _Width) ->
    Error;
print([], _Width) ->
    io:format("no tree kept: no root call took slower_than or longer yet~n");
print([Slowest | _], Width) ->
    io:put_chars(format(Slowest, Width)).

%% @doc One tree as indented lines, `Width' characters at most: each call's latency, own time
%% and share of the root's latency; siblings of the same function folded into one line
%% (`shop_inventory:lookup/1 ×48', their latencies and own times added, their children
%% folded together), calls the tree had no room for counted.
-spec format(tree(), pos_integer()) -> iodata().
format(#{latency := Root} = Tree, Width) ->
    Header = io_lib:format("call tree of ~ts, ~s~s~n",
                           [ferrotrace_names:mfa(maps:get(mfa, Tree)), ferrotrace_text:format_ns(Root),
                            case Tree of
                                #{pid := Pid} -> [" in ", ferrotrace_slow:process_name(Pid)];
                                #{} -> ""
                            end]),
    [Header | lines(group([Tree]), 0, max(1, Root), Width)].

%% Siblings folded by function, in the order each function was first called:
%% `{MFA, Count, Latency, Own, Exceptions, Dropped, Children}'.
group(Trees) ->
    Order = lists:foldl(fun(#{mfa := MFA}, Acc) ->
                                case lists:member(MFA, Acc) of
                                    true -> Acc;
                                    false -> [MFA | Acc]
                                end
                        end, [], Trees),
    [begin
         Same = [T || T = #{mfa := M} <- Trees, M =:= MFA],
         {MFA, length(Same), sum(latency, Same), sum(own, Same),
          length([T || T = #{exception := true} <- Same]), sum(dropped, Same),
          lists:append([maps:get(children, T) || T <- Same])}
     end || MFA <- lists:reverse(Order)].

sum(Key, Trees) -> lists:sum([maps:get(Key, T) || T <- Trees]).

lines(Groups, Depth, Root, Width) ->
    [[line(G, Depth, Root, Width), lines(group(Children), Depth + 1, Root, Width)]
     || {_, _, _, _, _, _, Children} = G <- Groups].

line({MFA, Count, Latency, Own, Exceptions, Dropped, _}, Depth, Root, Width) ->
    Name = [lists:duplicate(2 * Depth, $\s), ferrotrace_names:mfa(MFA),
            case Count of
                1 -> "";
                _ -> io_lib:format(" ×~b", [Count])
            end],
    Figures = io_lib:format("~9s  own ~9s  ~3b%~s~s",
                            [ferrotrace_text:format_ns(Latency), ferrotrace_text:format_ns(Own),
                             round(100 * Latency / Root),
                             case Exceptions of
                                 0 -> "";
                                 _ -> io_lib:format("  ~b raised", [Exceptions])
                             end,
                             case Dropped of
                                 0 -> "";
                                 _ -> io_lib:format("  +~b calls not kept", [Dropped])
                             end]),
    [ferrotrace_text:cut(io_lib:format("~-48ts ~s", [Name, Figures]), Width), "\n"].

%% @doc The slowest kept tree of each root function of session `Id' as {@link format/2}
%% prints it, `Width' wide, as UTF-8 (the HTML report's); `null' for a session without
%% trees.
-spec text(ferrotrace_tracer:session_id(), pos_integer()) -> binary() | null.
text(Id, Width) ->
    case counts(Id) of
        none ->
            null;
        #{kept := Kept} ->
            Text = [[format(Slowest, Width), "\n"]
                    || #{mfa := MFA} <- Kept, [Slowest | _] <- [trees(Id, MFA)]],
            case unicode:characters_to_binary(Text) of
                Bin when is_binary(Bin) -> Bin;
                _ -> null
            end
    end.

%% @doc The report's lines for a summary's `trees' (see {@link with_counts/2}): how many trees are
%% kept, of which roots, and what did not fit; none for a session without trees.
-spec report_lines(map(), pos_integer()) -> iodata().
report_lines(#{trees := #{kept := Kept, built := Built} = Trees}, Width) ->
    Total = lists:sum([N || #{count := N} <- Kept]),
    Roots = [[ferrotrace_names:mfa(MFA), io_lib:format(" (~b)", [N])] || #{mfa := MFA, count := N} <- Kept],
    Lost = [io_lib:format("~b ~s", [N, What])
            || {Key, What} <- [{nodes_dropped, "calls left out (max_nodes)"}, {not_built, "roots not built (bound)"},
                               {abandoned, "abandoned"}],
               N <- [maps:get(Key, Trees, 0)], N > 0],
    Head = io_lib:format("~b kept of ~b built (slower than ~s)",
                         [Total, Built, ferrotrace_text:format_ns(maps:get(slower_than, Trees, 0))]),
    %% Wrapped as the other notes are (cut, a root's count lost its last digits).
    [ferrotrace_text:wrap("call trees: ", [Head | Lost], Width),
     [ferrotrace_text:wrap("            by root: ", Roots, Width) || Roots =/= []]];
report_lines(_Summary, _Width) ->
    [].
