%%% @doc Function names as operators read them: one form for the report, the live view, the
%%% recorder's lines and every export (collapsed stacks, Chrome traces, HdrHistogram tags).
%%%
%%% Erlang functions print as `m:f/1' (atoms quoted only where Erlang needs it:
%%% `'my mod':'f g'/1'); Elixir functions print as Elixir does, `MyApp.Cart.add/2'
%%% (`MyApp.Cart."weird name"/1' when the name is not an identifier).
%%%
%%% The compiler gives the code it generates inside a function names such as
%%% `'-search/1-lc$^0/1-0-'' (a list comprehension in `search/1') or `'-loop/0-fun-0-''
%%% (a fun in `loop/0'). They print as their author reads them, by the function they are
%%% written in and what they are, numbered from the second one of a kind in that function
%%% (in the compiler's order):
%%% <ul>
%%% <li>`shop_api:search/1 (comprehension)', `... (comprehension 2)';</li>
%%% <li>`m:f/1 (binary comprehension)', `m:f/1 (map comprehension)';</li>
%%% <li>`m:loop/0 (fun)', `m:loop/0 (fun 2)';</li>
%%% <li>`m:h/1 (inlined)' for the compiler's `'-inlined-h/1-'' copy of `h/1';</li>
%%% <li>in Elixir modules, as Elixir's stack traces do: `anonymous fn/2 in MyApp.Cart.loop/0'
%%% (a comprehension: `MyApp.Cart.loop/0 (comprehension)').</li>
%%% </ul>
%%% The number is the function's place among its kind in the module as loaded on this node
%%% (a module not loaded here: the compiler's own count, plus one).
%%%
%%% Wildcards print as `_': `m:_/_', `_:_/_'.
-module(ferrotrace_names).

-export([mfa/1, module/1, generated/1, tag/1, folded/1]).

%% @doc The name of a function, `{Module, Function, Arity}' (each may be `` '_' '').
-spec mfa({module() | '_', atom(), arity() | '_'}) -> iodata().
mfa({M, F, A}) when is_atom(M), is_atom(F), (is_integer(A) orelse A =:= '_') ->
    case elixir_alias(M) of
        {ok, Alias} -> elixir_mfa(M, Alias, F, A);
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

%% @doc What a compiler-generated function of module `M' is: `{ok, {Outer, OuterArity},
%% Kind, Number}' with `Kind' `fun', `comprehension', `binary_comprehension',
%% `map_comprehension', `inlined' or, for another kind the compiler names, its name as a
%% binary (`<<"xc">>'), and `Number' its place
%% among that kind in `Outer' (1 for the first); `false' for a function written by hand.
-spec generated({module(), atom(), arity() | '_'}) ->
          {ok, {atom(), arity()}, atom() | binary(), pos_integer()} | false.
generated({M, F, _A}) when is_atom(M), is_atom(F) ->
    case parse(F) of
        {Outer, Kind, Lift} ->
            {ok, Outer, Kind, number(M, Outer, Kind, Lift)};
        false ->
            false
    end.

%% '-search/1-lc$^0/1-0-' -> {{search, 1}, comprehension, 0}. The function it is in is
%% an atom already (its module's); a name whose outer function is no atom is none of these
%% (no atom is made from what a caller passes).
parse(F) ->
    Name = atom_to_list(F),
    Found = case re:run(Name, "^-inlined-(.+)/([0-9]+)-$", [{capture, all_but_first, list}, unicode]) of
                {match, [Outer, Arity]} ->
                    {Outer, Arity, inlined, "0"};
                nomatch ->
                    case re:run(Name, "^-(.+)/([0-9]+)-(?:fun-([0-9]+)|([a-z]+)\\$\\^[0-9]+/[0-9]+-([0-9]+))-$",
                                [{capture, all_but_first, list}, unicode]) of
                        {match, [Outer, Arity, Lift]} -> {Outer, Arity, 'fun', Lift};
                        {match, [Outer, Arity, "", Kind, Lift]} -> {Outer, Arity, kind(Kind), Lift};
                        nomatch -> false
                    end
            end,
    case Found of
        {O, A, K, L} ->
            try {{list_to_existing_atom(O), list_to_integer(A)}, K, list_to_integer(L)}
            catch error:badarg -> false
            end;
        false ->
            false
    end.

kind("lc") -> comprehension;
kind("lbc") -> binary_comprehension;
kind("mc") -> map_comprehension;
kind(Other) -> list_to_binary(Other).

%% The place of the one lifted `Lift'-th among the functions of `Kind' in `Outer', from the
%% module's functions where it is loaded here.
number(_M, _Outer, inlined, _Lift) ->
    1;
number(M, Outer, Kind, Lift) ->
    Siblings = try erlang:get_module_info(M, functions) of
                   Functions -> lists:sort([L || {F, _} <- Functions, {O, K, L} <- [parse(F)],
                                                 O =:= Outer, K =:= Kind])
               catch error:badarg -> []
               end,
    case lists:member(Lift, Siblings) of
        true -> length(lists:takewhile(fun(L) -> L =/= Lift end, Siblings)) + 1;
        false -> Lift + 1
    end.

elixir_alias(M) ->
    case atom_to_list(M) of
        "Elixir." ++ Alias when Alias =/= "" -> {ok, Alias};
        _ -> false
    end.

erlang_mfa(M, F, A) ->
    case F =/= '_' andalso generated({M, F, A}) of
        {ok, {Outer, OuterArity}, Kind, N} ->
            [atom(M), ":", atom(Outer), "/", integer_to_list(OuterArity), " ", what(Kind, N)];
        _ ->
            [atom(M), ":", atom(F), "/", arity(A)]
    end.

elixir_mfa(M, Alias, F, A) ->
    case F =/= '_' andalso generated({M, F, A}) of
        {ok, {Outer, OuterArity}, 'fun', _} ->
            ["anonymous fn/", arity(A), " in ", Alias, ".", elixir_fun(Outer), "/",
             integer_to_list(OuterArity)];
        {ok, {Outer, OuterArity}, Kind, N} ->
            [Alias, ".", elixir_fun(Outer), "/", integer_to_list(OuterArity), " ", what(Kind, N)];
        _ ->
            [Alias, ".", elixir_fun(F), "/", arity(A)]
    end.

%% "(comprehension)", "(comprehension 2)", "(binary comprehension)", "(fun 3)"
what(Kind, N) when is_binary(Kind) ->
    ["(", Kind, [[" ", integer_to_list(N)] || N > 1], ")"];
what(Kind, N) ->
    Words = lists:join(" ", string:lexemes(atom_to_list(Kind), "_")),
    ["(", Words, [[" ", integer_to_list(N)] || N > 1], ")"].

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

%% @doc A function's name in an export (an hdr_log tag, a folded frame): as the report
%% names it, with the characters that end a folded frame (`;') or a line made `_'.
-spec tag(mfa()) -> binary().
tag(MFA) ->
    Text = unicode:characters_to_binary(mfa(MFA)),
    binary:replace(Text, [<<";">>, <<"\n">>], <<"_">>, [global]).

%% @doc The folded lines `a;b;c Ns' of call paths (`[{[MFA], Ns}]', as the engine keeps
%% them), each function named by {@link tag/1}: the collapsed export and the html page's
%% flame graph.
-spec folded([{[mfa()], non_neg_integer()}]) -> binary().
folded(Paths) ->
    Names = maps:from_list([{MFA, tag(MFA)} || MFA <- lists:usort(lists:append([P || {P, _} <- Paths]))]),
    iolist_to_binary([[lists:join($;, [maps:get(MFA, Names) || MFA <- Path]), $\s, integer_to_binary(Ns), $\n]
                      || {Path, Ns} <- Paths]).
