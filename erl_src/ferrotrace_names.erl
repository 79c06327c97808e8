%%% @doc Function names as operators read them.
%%%
%%% Erlang functions print as `m:f/1' (atoms quoted only where Erlang needs it:
%%% `'my mod':'f g'/1'); Elixir functions print as Elixir does, `MyApp.Cart.add/2'
%%% (`MyApp.Cart."weird name"/1' when the name is not an identifier).
%%%
%%% Anonymous functions carry compiler-made names such as `'-loop/0-fun-0-'' (fun number 0
%%% of `loop/0'). Erlang's stack traces print them as `m:'-loop/0-fun-0-'/2'; here they
%%% print without the quotes and dashes, as `m:loop/0-fun-0/2' (the fun, of arity 2, inside
%%% `loop/0'), and likewise list comprehensions (`m:loop/0-lc$^0/1-0/1'). In Elixir modules
%%% they print as Elixir's stack traces do: `anonymous fn/2 in MyApp.Cart.loop/0'.
%%%
%%% Wildcards print as `_': `m:_/_', `_:_/_'.
-module(ferrotrace_names).

-export([mfa/1, module/1]).

%% @doc The name of a function, `{Module, Function, Arity}' (each may be `` '_' '').
-spec mfa({module() | '_', atom(), arity() | '_'}) -> iodata().
mfa({M, F, A}) when is_atom(M), is_atom(F), (is_integer(A) orelse A =:= '_') ->
    case elixir_alias(M) of
        {ok, Alias} -> elixir_mfa(Alias, F, A);
        false -> erlang_mfa(M, F, A)
    end.

%% @doc The name of a module: `MyApp.Cart' for Elixir's `'Elixir.MyApp.Cart'', else as
%% Erlang writes the atom.
-spec module(module() | '_') -> iodata().
module(M) when is_atom(M) ->
    case elixir_alias(M) of
        {ok, Alias} -> Alias;
        false -> atom(M)
    end.

elixir_alias(M) ->
    case atom_to_list(M) of
        "Elixir." ++ Alias when Alias =/= "" -> {ok, Alias};
        _ -> false
    end.

erlang_mfa(M, F, A) ->
    Fun = case anonymous(F) of
              {ok, Outer, Arity, Kind} -> [atom(Outer), "/", Arity, "-", Kind];
              false -> atom(F)
          end,
    [atom(M), ":", Fun, "/", arity(A)].

elixir_mfa(Alias, F, A) ->
    case anonymous(F) of
        {ok, Outer, Arity, "fun-" ++ _} ->
            ["anonymous fn/", arity(A), " in ", Alias, ".", elixir_fun(Outer), "/", Arity];
        {ok, Outer, Arity, Kind} ->
            [Alias, ".", elixir_fun(Outer), "/", Arity, "-", Kind, "/", arity(A)];
        false ->
            [Alias, ".", elixir_fun(F), "/", arity(A)]
    end.

%% '-loop/0-fun-0-' -> {ok, loop, "0", "fun-0"}
anonymous(F) ->
    Name = atom_to_list(F),
    case re:run(Name, "^-(.+?)/([0-9]+)-(.+)-$", [{capture, all_but_first, list}, unicode]) of
        {match, [Outer, Arity, Kind]} -> {ok, list_to_atom(Outer), Arity, Kind};
        nomatch -> false
    end.

elixir_fun('_') ->
    "_";
elixir_fun(F) ->
    Name = atom_to_list(F),
    case re:run(Name, "^[a-z_][A-Za-z0-9_]*[?!]?$", [unicode]) of
        {match, _} -> Name;
        nomatch -> io_lib:format("~tp", [Name])
    end.

atom('_') -> "_";
atom(A) -> io_lib:write_atom(A).

arity('_') -> "_";
arity(A) -> integer_to_list(A).
