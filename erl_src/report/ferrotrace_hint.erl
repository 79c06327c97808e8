%%% @private
%%% @doc What an error says, kept short and safe: the hint for a mistyped name (the nearest
%%% accepted one, first, since a shell cuts a long binary at its end) and a term summarised
%%% when it is large (an error must never carry a caller's huge argument). A leaf: every
%%% module that answers `{error, Reason}' may call it, and it calls no other ferrotrace
%%% module.
-module(ferrotrace_hint).

-export([hinted/3, keys/3, brief/1, nearest/2, to_map/1]).

%% Keys longer than this get no hint (characters).
-define(HINT_MAX_KEY, 64).
%% A hint is looked for among at most this many names (an option takes a handful).
-define(HINT_MAX_NAMES, 256).
%% Terms larger than this (bytes, external format) are summarised in error reasons.
-define(BRIEF_BYTES, 1024).

%% @doc `Accepted' (what an error says is accepted) with, first, the name of `Names'
%% nearest to `Key' when `Key' looks like a typo of it: `<<"did you mean duration? one of
%% ...">>'. First, because the shell cuts a long binary and the hint is what an operator
%% needs.
-spec hinted(term(), [atom()], unicode:chardata()) -> binary().
hinted(Key, Names, Accepted) ->
    case short_list(Names, ?HINT_MAX_NAMES, fun erlang:is_atom/1) andalso nearest_atom(Key, Names) of
        Name when is_atom(Name), Name =/= false, Name =/= none ->
            iolist_to_binary(["did you mean ", atom_to_list(Name), "? ", Accepted]);
        _ ->
            iolist_to_binary(Accepted)
    end.

%% @doc `{ok, Map}' of options given as a map or a list of `{Key, Value}' pairs with atom
%% keys (the first pair of a key wins), else `{error, {bad_options, Options, Accepted}}'.
%% Here, below every module that takes options (ferrotrace_options:to_map/1 is this), so
%% that one read by the start (`metrics') can be checked by its own module.
-spec to_map(term()) -> {ok, map()} | {error, {bad_options, term(), binary()}}.
to_map(Options) when is_map(Options) ->
    {ok, Options};
to_map(Options) when is_list(Options) ->
    case pairs(Options) of
        true -> {ok, maps:from_list(lists:reverse(Options))};
        false -> bad_options(Options)
    end;
to_map(Options) ->
    bad_options(Options).

bad_options(Options) ->
    {error, {bad_options, Options, <<"a map or a list of {Key, Value} pairs">>}}.

%% A proper list of `{Atom, Value}' pairs (an improper list is refused, not a raise).
pairs([]) -> true;
pairs([{K, _} | Rest]) when is_atom(K) -> pairs(Rest);
pairs(_) -> false.

%% @doc The keys of an option's map (`trees', `capture') checked against `Names', those it
%% takes: `ok', or `{error, Hint}' for the first other key, `Hint' being `Accepted' led by
%% the name it looks like a typo of ({@link hinted/3}). One check for every such map, so
%% that each hints alike.
%% Linear in the keys and the names: a map of 100,000 keys checked against as many names,
%% one list's member at a time, ran for hours (the fuzz suite's seed 274).
-spec keys(map(), [atom()], unicode:chardata()) -> ok | {error, binary()}.
keys(Map, Names, Accepted) ->
    Known = maps:from_list([{Name, []} || Name <- Names]),
    case first_unknown(maps:next(maps:iterator(Map)), Known) of
        none -> ok;
        {unknown, Key} -> {error, hinted(Key, Names, Accepted)}
    end.

first_unknown(none, _Known) ->
    none;
first_unknown({Key, _Value, Next}, Known) ->
    case maps:is_key(Key, Known) of
        true -> first_unknown(maps:next(Next), Known);
        false -> {unknown, Key}
    end.

%% Only a key of a sensible length gets a hint: the distance costs its length times each
%% name's, and a key is whatever the caller passed (a 1 MB binary took 10 s here). Longer
%% keys, lists that are not flat strings (improper, deep, not characters) and other terms
%% are answered without one.
nearest_atom(Key, Names) ->
    case key_text(Key) of
        Text when is_list(Text) -> nearest_short(Text, Names);
        _ -> none
    end.

nearest_short(Key, _Names) when length(Key) > ?HINT_MAX_KEY ->
    none;
nearest_short(Key, Names) ->
    case closest(Key, [{atom_to_list(N), N} || N <- Names]) of
        none -> part_of(Key, Names);
        Name -> Name
    end.

%% The name of `{Text, Name}' pairs whose text is at most two edits from `Key', the nearest
%% (the first in order of text among equals), or `none'. Texts whose length differs from the
%% key's by more than two are passed over unmeasured: their distance cannot be smaller.
closest(Key, Named) ->
    Length = length(Key),
    case lists:sort([{distance(Key, Text), Text, Name} || {Text, Name} <- Named,
                                                          abs(length(Text) - Length) =< 2]) of
        [{D, _, Name} | _] when D =< 2 -> Name;
        _ -> none
    end.

%% @doc The text of `Names' nearest to `Key' (an atom, or a string or binary of at most 64
%% characters) when `Key' looks like a typo of it (at most two edits), else `none': the
%% "did you mean" of names drawn from a node (its modules, a module's functions as
%% `"f/2"'), any number of them; only those of a length near the key's are measured.
-spec nearest(term(), [string()]) -> string() | none.
nearest(Key, Names) ->
    case key_text(Key) of
        Text when is_list(Text), length(Text) =< ?HINT_MAX_KEY -> closest(Text, [{N, N} || N <- Names, is_list(N)]);
        _ -> none
    end.

key_text(Key) when is_atom(Key) -> atom_to_list(Key);
key_text(Key) when is_binary(Key), byte_size(Key) =< ?HINT_MAX_KEY -> binary_to_list(Key);
key_text(Key) when is_list(Key) ->
    case short_list(Key, ?HINT_MAX_KEY, fun(C) -> is_integer(C) andalso C >= 0 end) of
        true -> Key;
        false -> none
    end;
key_text(_Key) -> none.

%% A key that is a name and more after an underscore (`trees_keep' for `trees', whose
%% `keep' is set inside it): that name, the longest if several.
part_of(Key, Names) ->
    case lists:reverse(lists:sort([{length(atom_to_list(N)), N} || N <- Names,
                                   lists:prefix(atom_to_list(N) ++ "_", Key)])) of
        [{_, Name} | _] -> Name;
        [] -> none
    end.

%% A proper list of at most `Left' elements, each one `Is', looked at no further than
%% that: names (the distance is measured to each) and a key's characters.
short_list([], _Left, _Is) -> true;
short_list(_List, 0, _Is) -> false;
short_list([X | Rest], Left, Is) ->
    Is(X) andalso short_list(Rest, Left - 1, Is);
short_list(_Other, _Left, _Is) -> false.

%% Levenshtein distance, for option names (a few letters long).
distance(A, B) ->
    First = lists:seq(0, length(B)),
    {Last, _} = lists:foldl(fun(CharA, {Prev, I}) -> {distance_row(CharA, B, Prev, [I]), I + 1} end,
                            {First, 1}, A),
    lists:last(Last).

distance_row(_CharA, [], _Prev, Acc) ->
    lists:reverse(Acc);
distance_row(CharA, [CharB | B], [Diag, Up | Prev], [Left | _] = Acc) ->
    Cost = case CharA =:= CharB of true -> 0; false -> 1 end,
    distance_row(CharA, B, [Up | Prev], [min(min(Left, Up) + 1, Diag + Cost) | Acc]).

%% @doc `Term' itself if it is small, else the same shape with its large parts summarised
%% (`{ferrotrace_large_term, Bytes}'), for error reasons that must never carry a caller's
%% huge argument: `{unknown_option, HugeKey, Hint}' keeps its tag and hint. Tuples of up
%% to 16 elements are kept, three levels deep; any other large term is summarised whole.
-spec brief(term()) -> term().
brief(Term) ->
    brief(Term, 3).

brief(Term, _Depth) when is_atom(Term); is_pid(Term); is_reference(Term); is_port(Term);
                         is_number(Term) ->
    Term;
brief(Term, Depth) ->
    case erlang:external_size(Term) of
        Small when Small =< ?BRIEF_BYTES ->
            Term;
        _ when is_tuple(Term), tuple_size(Term) =< 16, Depth > 0 ->
            list_to_tuple([brief(Element, Depth - 1) || Element <- tuple_to_list(Term)]);
        Bytes ->
            {ferrotrace_large_term, Bytes}
    end.
