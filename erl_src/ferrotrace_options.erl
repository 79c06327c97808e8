%%% @doc Options as the API takes them: a map or, from Elixir (`duration: 1000') and old
%%% habits, a list of `{Key, Value}' pairs, where the first pair of a key counts (as
%%% `proplists:get_value/2' reads it). One reading for sessions, reports, the live view and
%%% exports, so that they agree on a repeated key and on the error.
-module(ferrotrace_options).

-export([to_map/1]).

%% @doc `{ok, Map}' of a map or a list of `{Key, Value}' pairs with atom keys (the first
%% pair of a key wins), else `{error, {bad_options, Options, Accepted}}'.
-spec to_map(term()) -> {ok, map()} | {error, {bad_options, term(), binary()}}.
to_map(Options) when is_map(Options) ->
    {ok, Options};
to_map(Options) when is_list(Options) ->
    case pairs(Options) of
        true -> {ok, maps:from_list(lists:reverse(Options))};
        false -> bad(Options)
    end;
to_map(Options) ->
    bad(Options).

bad(Options) ->
    {error, {bad_options, Options, <<"a map or a list of {Key, Value} pairs">>}}.

%% A proper list of `{Atom, Value}' pairs (an improper list is refused, not a raise).
pairs([]) -> true;
pairs([{K, _} | Rest]) when is_atom(K) -> pairs(Rest);
pairs(_) -> false.
