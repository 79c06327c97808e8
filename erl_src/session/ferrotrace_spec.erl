%%% @doc Trace specs the way operators write them, turned into `{M, F, A, Heads}'.
%%%
%%% {@link parse/1} accepts, alone or in a list:
%%% <ul>
%%% <li>a module name, for every function of the module (`shop_api');</li>
%%% <li>`{M, F, A}' with `` '_' '' wildcards, as `erlang:trace_pattern/3' takes it
%%%     (`` {'_', '_', '_'} '', `` {M, '_', '_'} '', `` {M, F, '_'} '', `{M, F, Arity}');</li>
%%% <li>`{M, F, MatchSpec}': a list of trace match-spec clauses `{Head, Guards, Body}',
%%%     each checked with `erlang:match_spec_test/3';</li>
%%% <li>`{M, F, Fun}' with a fun typed in the shell, turned into a match spec as
%%%     `dbg:fun2ms/1' does: `{shop_api, checkout, fun([#{tier := gold}]) -> true end}';</li>
%%% <li>strings like redbug's: `"shop_api"', `"shop_api:checkout"',
%%%     `"shop_api:checkout/1"', `"shop_api:checkout(#{tier := gold})"',
%%%     `"m:f(X, _) when X > 10"', parsed with OTP's own scanner and parser;</li>
%%% <li>Elixir names: `"MyApp.Cart"', `"MyApp.Cart.add"', `"MyApp.Cart.add/2"',
%%%     `"MyApp.Cart.add(x, _)"' (Erlang syntax inside the parentheses) and `":ets.lookup/2"';
%%%     strings may also be binaries (Elixir strings).</li>
%%% </ul>
%%% A spec string is at most 65,536 characters (bytes, for a binary): a longer one is
%%% refused, `{bad_spec, Start, Accepted}' with its first 40 characters, before it is scanned
%%% (scanning and parsing cost tens of times a string's size: a 7 MB binary took 600 MB).
%%%
%%% A match spec given here filters calls only: its body may hold the actions `message',
%%% `caller', `caller_line', `current_stacktrace' and `get_seq_token' (plain values in a body
%%% are dropped: a trace match spec's value is not used). The caller adds its own
%%% `{exception_trace}', so `return_trace' and `exception_trace' are refused by name, as are
%%% actions that change trace flags or process state or print per event. `{message, false}'
%%% is refused: it would hide calls whose returns are still traced.
%%%
%%% Names are resolved, modules are not loaded: that is the caller's job.
-module(ferrotrace_spec).

-export([parse/1, matches/2, covered/2, overlaps/2, wider/2, function/1]).

-type wild(T) :: T | '_'.
-type clause() :: {Head :: '_' | atom() | [term()], Guards :: [term()], Body :: [term()]}.
-type heads() :: default | [clause(), ...].
-type pattern() :: {wild(module()), wild(atom()), wild(arity()), heads()}.
-type reason() :: {bad_spec, term()}
                | {bad_spec, term(), binary()}
                | {bad_spec, string() | binary(),
                   {Line :: pos_integer(), Column :: pos_integer(), Why :: binary()}}.
-export_type([pattern/0, clause/0, heads/0, reason/0]).

%% Actions a filter may use; everything else that is an action is refused with a reason.
%% The longest spec string parsed (characters, or bytes of a binary); see the module doc.
-define(MAX_STRING, 65536).
-define(TOO_LONG, <<"a spec string of at most 65536 characters">>).

-define(ALLOWED_ACTIONS, [message, caller, caller_line, current_stacktrace, get_seq_token]).
-define(REFUSED_ACTIONS,
        [{return_trace, <<"ferrotrace adds its own exception_trace to every clause">>},
         {exception_trace, <<"ferrotrace adds its own exception_trace to every clause">>},
         {process_dump, <<"process_dump is too costly to run on every call">>},
         {display, <<"display would print on the node's console at every call">>},
         {enable_trace, <<"enable_trace changes trace flags behind the session's back">>},
         {disable_trace, <<"disable_trace changes trace flags behind the session's back">>},
         {trace, <<"trace changes trace flags behind the session's back">>},
         {set_seq_token, <<"set_seq_token changes the traced process's state">>},
         {set_tcw, <<"set_tcw changes the node's trace control word">>},
         {silent, <<"silent changes the traced process's trace state">>}]).

%% @doc Parses a spec or a list of specs (see the module documentation) into a list of
%% `{Module, Function, Arity, Heads}', where `Heads' is `default' (every call) or a list of
%% match-spec clauses whose bodies hold only filter actions (never `return_trace' nor
%% `exception_trace': add your own). The arity of a pattern with a match spec is the length
%% of its heads when they all have one, else `` '_' ''.
%%
%% Errors name the faulty part: `{bad_spec, Spec}' for a malformed `{M, F, A}' or term,
%% `{bad_spec, Part, Why}' for a bad match-spec clause, action or fun, and
%% `{bad_spec, String, {Line, Column, Why}}' for a string that does not parse.
-spec parse(term()) -> {ok, [pattern(), ...]} | {error, reason()}.
parse([]) ->
    {error, {bad_spec, []}};
parse(Spec) when is_binary(Spec), byte_size(Spec) > ?MAX_STRING ->
    too_long(Spec);
parse(Spec) when is_binary(Spec) ->
    one(Spec);
parse(Spec) when is_list(Spec) ->
    case long_string(Spec, ?MAX_STRING) of
        true -> too_long(Spec);
        false ->
            case is_string(Spec) of
                true -> one(Spec);
                false -> many(Spec, [])
            end
    end;
parse(Spec) ->
    one(Spec).

%% @doc One function, as the functions that read one function's figures take it
%% (`ferrotrace:slowest/2', `slow_calls/2', `histogram/2'): `{M, F, Arity}', or any spec
%% that names exactly one function (`"m:f/1"', `"MyApp.Cart.add/2"').
-spec function(term()) -> {ok, mfa()} | {error, {bad_mfa, term(), binary()}}.
function({M, F, A} = MFA) when is_atom(M), is_atom(F), is_integer(A), A >= 0, A =< 255 ->
    {ok, MFA};
function(Spec) ->
    case (is_list(Spec) orelse is_binary(Spec)) andalso parse(Spec) of
        {ok, [{M, F, A, _}]} when M =/= '_', F =/= '_', is_integer(A) -> {ok, {M, F, A}};
        _ -> {error, {bad_mfa, ferrotrace_hint:brief(Spec),
                      <<"one function: {M, F, Arity}, \"m:f/1\" or \"MyApp.Cart.add/2\"">>}}
    end.

many([], Acc) ->
    {ok, lists:append(lists:reverse(Acc))};
many([Spec | Rest], Acc) when is_list(Spec); is_binary(Spec) ->
    case (is_binary(Spec) andalso byte_size(Spec) > ?MAX_STRING)
        orelse (is_list(Spec) andalso long_string(Spec, ?MAX_STRING)) of
        true -> too_long(Spec);
        false ->
            case is_string(Spec) of
                true -> many_one(Spec, Rest, Acc);
                false -> {error, {bad_spec, Spec}}
            end
    end;
many([Spec | Rest], Acc) ->
    many_one(Spec, Rest, Acc);
many(Improper, _Acc) ->
    {error, {bad_spec, Improper}}.

many_one(Spec, Rest, Acc) ->
    case one(Spec) of
        {ok, Patterns} -> many(Rest, [Patterns | Acc]);
        {error, _} = Error -> Error
    end.

%% True for a list whose first `Max' + 1 elements are integers: a string too long to parse
%% (looked at no further than that).
long_string([C | _], 0) when is_integer(C) -> true;
long_string([C | Rest], Max) when is_integer(C) -> long_string(Rest, Max - 1);
long_string(_, _) -> false.

too_long(Spec) when is_binary(Spec) ->
    {error, {bad_spec, <<(binary:part(Spec, 0, 40))/binary, "...">>, ?TOO_LONG}};
too_long(Spec) ->
    {error, {bad_spec, lists:sublist(Spec, 40) ++ "...", ?TOO_LONG}}.

is_string(B) when is_binary(B) -> B =/= <<>>;
is_string([]) -> false;
is_string(L) when is_list(L) ->
    try unicode:characters_to_binary(L) of
        Bin when is_binary(Bin) -> lists:all(fun is_integer/1, L);
        _ -> false
    catch error:_ -> false
    end;
is_string(_) -> false.

one(String) when is_binary(String) ->
    case unicode:characters_to_list(String) of
        Chars when is_list(Chars), Chars =/= [] -> string(String, Chars);
        _ -> {error, {bad_spec, String}}
    end;
one(String) when is_list(String) ->
    string(String, String);
one({M, F, Fun} = Spec) when is_function(Fun) ->
    case names(M, F) of
        ok -> with_fun(Spec);
        error -> {error, {bad_spec, Spec}}
    end;
one({M, F, MS} = Spec) when is_list(MS) ->
    case names(M, F) of
        ok when MS =:= [] -> {error, {bad_spec, Spec, <<"an empty match spec matches nothing">>}};
        ok -> with_clauses(M, F, MS);
        error -> {error, {bad_spec, Spec}}
    end;
one({M, F, A} = Spec) ->
    case names(M, F) =:= ok andalso valid_arity(A) andalso not (F =:= '_' andalso A =/= '_') of
        true -> {ok, [{M, F, A, default}]};
        false -> {error, {bad_spec, Spec}}
    end;
one(Module) when is_atom(Module) ->
    %% A module name alone, as redbug's "shop_api": every function of it.
    {ok, [{Module, '_', '_', default}]};
one(Spec) ->
    {error, {bad_spec, Spec}}.

%% A module wildcard needs a function wildcard, as erlang:trace_pattern/3 wants.
names(M, F) when is_atom(M), is_atom(F), not (M =:= '_' andalso F =/= '_') -> ok;
names(_, _) -> error.

valid_arity('_') -> true;
valid_arity(A) -> is_integer(A) andalso A >= 0 andalso A =< 255.

%%--------------------------------------------------------------------------------------
%% Match specs

with_clauses(M, F, MS) ->
    case check_clauses(MS, []) of
        {ok, Clauses} -> {ok, [{M, F, ms_arity(F, Clauses), Clauses}]};
        {error, _} = Error -> Error
    end.

check_clauses([], Acc) ->
    {ok, lists:reverse(Acc)};
check_clauses([Clause | Rest], Acc) ->
    case check_clause(Clause) of
        {ok, Checked} -> check_clauses(Rest, [Checked | Acc]);
        {error, Why} -> {error, {bad_spec, Clause, Why}}
    end;
check_clauses(Improper, _Acc) ->
    {error, {bad_spec, Improper, <<"a match spec is a proper list of clauses">>}}.

check_clause({Head, Guards, Body}) when (is_list(Head) orelse is_atom(Head)),
                                        is_list(Guards), is_list(Body) ->
    case check_actions(Body) of
        ok ->
            %% The clause as given must compile (an unknown function is named), then
            %% plain values leave the body.
            Filtered = {Head, Guards, [B || B <- Body, is_action(B)]},
            Args = case Head of
                       H when is_list(H) -> [0 || _ <- H];
                       _ -> []
                   end,
            try {erlang:match_spec_test(Args, [{Head, Guards, Body}], trace),
                 erlang:match_spec_test(Args, [Filtered], trace)} of
                {{ok, _, _, _}, {ok, _, _, _}} -> {ok, Filtered};
                {{error, Errors}, _} -> {error, ms_errors(Errors)};
                {_, {error, Errors}} -> {error, ms_errors(Errors)}
            catch error:_ -> {error, <<"not a valid trace match spec clause">>}
            end;
        {error, _} = Error ->
            Error
    end;
check_clause(_) ->
    {error, <<"a clause is {Head, Guards, Body}: Head a list or '_', Guards and Body lists">>}.

ms_errors(Errors) ->
    Texts = [Text || {_, Text} <- Errors],
    unicode:characters_to_binary(lists:join("; ", Texts)).

%% An action is a tuple whose first element is an atom naming an action.
is_action(T) when is_tuple(T), tuple_size(T) >= 1, is_atom(element(1, T)) ->
    Name = element(1, T),
    lists:member(Name, ?ALLOWED_ACTIONS) orelse lists:keymember(Name, 1, ?REFUSED_ACTIONS);
is_action(_) ->
    false.

%% Walks the body: a tuple {Atom, ...} is a call (an action or a guard function), {const, _}
%% is a literal, {{...}} a tuple expression whose elements are expressions.
check_actions(Body) when is_list(Body) ->
    first_error([check_action(Expr) || Expr <- Body]);
check_actions(_) ->
    ok.

check_action({message, false}) ->
    {error, <<"{message, false} hides calls whose returns are still traced">>};
check_action({const, _}) ->
    ok;
check_action({Inner}) when is_tuple(Inner) ->
    first_error([check_action(E) || E <- tuple_to_list(Inner)]);
check_action(T) when is_tuple(T), tuple_size(T) >= 1, is_atom(element(1, T)) ->
    [Name | Args] = tuple_to_list(T),
    case lists:keyfind(Name, 1, ?REFUSED_ACTIONS) of
        {Name, Why} -> {error, Why};
        false -> first_error([check_action(A) || A <- Args])
    end;
check_action(L) when is_list(L) ->
    first_error([check_action(E) || E <- L]);
check_action(_) ->
    ok.

first_error(Results) ->
    case [E || {error, _} = E <- Results] of
        [] -> ok;
        [E | _] -> E
    end.

ms_arity('_', _Clauses) ->
    '_';
ms_arity(_F, Clauses) ->
    case lists:usort([if is_list(H) -> length(H); true -> '_' end || {H, _, _} <- Clauses]) of
        [N] when is_integer(N) -> N;
        _ -> '_'
    end.

%%--------------------------------------------------------------------------------------
%% Funs typed in the shell

with_fun({M, F, Fun}) ->
    case erl_eval:fun_data(Fun) of
        {fun_data, Bindings, Clauses} ->
            from_clauses(M, F, Clauses, Bindings, Fun);
        _ ->
            {error, {bad_spec, Fun,
                     <<"only funs typed in the shell become match specs (as with dbg:fun2ms/1); "
                       "in compiled code give the match spec itself, or a string such as "
                       "\"m:f(X) when X > 1\"">>}}
    end.

from_clauses(M, F, Clauses, Bindings, Part) ->
    try ms_transform:transform_from_shell(dbg, Clauses, Bindings) of
        {error, [{_, [{Loc, Mod, Code} | _]} | _], _} ->
            {error, {bad_spec, Part, fun_error(Loc, Mod, Code)}};
        MS when is_list(MS) ->
            with_clauses(M, F, MS);
        _ ->
            {error, {bad_spec, Part, <<"not a match spec fun">>}}
    catch
        _:_ -> {error, {bad_spec, Part, <<"not a match spec fun">>}}
    end.

fun_error(Loc, Mod, Code) ->
    Text = try Mod:format_error(Code) catch _:_ -> io_lib:format("~tp", [Code]) end,
    unicode:characters_to_binary(io_lib:format("line ~s: ~ts", [loc(Loc), Text])).

loc({Line, Column}) -> io_lib:format("~b, column ~b", [Line, Column]);
loc(Loc) -> io_lib:format("~tp", [erl_anno:line(Loc)]).

%%--------------------------------------------------------------------------------------
%% Strings

string(Original, Chars0) ->
    Chars = string:trim(Chars0),
    Lead = length(Chars0) - length(string:trim(Chars0, leading)),
    case elixir(Chars) of
        {ok, Patterns} ->
            {ok, Patterns};
        {rewrite, Erlang, Shift} ->
            erlang_string(Original, Erlang, Lead, Shift);
        no ->
            erlang_string(Original, Chars, Lead, {0, 0})
    end.

%% `Shift' = {From, Delta}: columns past From in the rewritten text are Delta to the right
%% of where the user typed them.
erlang_string(Original, Chars, Lead, Shift) ->
    Fix = fun({L, C}) -> {L, user_column(C, Shift) + Lead} end,
    End = {1, length(Chars) + 1},
    case erl_scan:string(Chars, {1, 1}) of
        {ok, [], _} ->
            string_error(Original, {1, 1}, "an empty spec names nothing");
        {ok, Tokens, _} ->
            case tokens(Tokens, End) of
                {ok, Patterns} -> {ok, Patterns};
                {error, Pos, Why} -> string_error(Original, Fix(Pos), Why)
            end;
        {error, {Pos, Mod, Code}, _} ->
            string_error(Original, Fix(scan_error_pos(Pos, Code)), Mod:format_error(Code))
    end.

%% An unterminated quoted atom or string is the user's error at its opening quote. OTP 25
%% reports it there (`{string, Quote, Text}'); OTP 27 and later report
%% `{unterminated, atom | string, Text}' one column further, on the first character inside
%% the quotes.
scan_error_pos({Line, Column}, {unterminated, _, _}) when Column > 1 -> {Line, Column - 1};
scan_error_pos(Pos, _Code) -> Pos.

user_column(C, {From, Delta}) when C > From -> max(1, C - Delta);
user_column(C, _) -> C.

string_error(Original, {Line, Column}, Why) ->
    {error, {bad_spec, Original, {Line, Column, unicode:characters_to_binary(Why)}}}.

tokens([M], End) ->
    case wild_atom(M) of
        {ok, Module} -> {ok, [{Module, '_', '_', default}]};
        error -> {error, pos(M), expected("a module name", M, End)}
    end;
tokens([M, {':', _} | Rest], End) ->
    case wild_atom(M) of
        {ok, Module} -> function(Module, Rest, End);
        error -> {error, pos(M), expected("a module name", M, End)}
    end;
tokens([M | Rest], End) ->
    case wild_atom(M) of
        {ok, _} -> unexpected(Rest, End, "':' or the end");
        error -> {error, pos(M), expected("a module name", M, End)}
    end.

function(_Module, [], End) ->
    {error, End, "a function name is expected after ':'"};
function(Module, [F | Rest], End) ->
    case wild_atom(F) of
        {ok, Function} when Module =:= '_', Function =/= '_' ->
            {error, pos(F), "a function needs a module: write '_':'_' or m:f"};
        {ok, Function} ->
            after_function(Module, Function, F, Rest, End);
        error ->
            {error, pos(F), expected("a function name", F, End)}
    end.

after_function(M, F, _, [], _End) ->
    {ok, [{M, F, '_', default}]};
after_function(M, F, _FTok, [{'/', _} | Rest], End) ->
    case Rest of
        [{integer, _, A}] when F =/= '_', A >= 0, A =< 255 ->
            {ok, [{M, F, A, default}]};
        [{var, _, '_'}] ->
            {ok, [{M, F, '_', default}]};
        [{atom, _, '_'}] ->
            {ok, [{M, F, '_', default}]};
        [{integer, P, _}] when F =:= '_' ->
            {error, P, "an arity needs a function: write m:'_' or m:f/N"};
        [{integer, P, _}] ->
            {error, P, "an arity is an integer from 0 to 255"};
        [{integer, _, _}, Extra | _] ->
            {error, pos(Extra), expected("the end", Extra, End)};
        [Other | _] ->
            {error, pos(Other), expected("an arity", Other, End)};
        [] ->
            {error, End, "an arity is expected after '/'"}
    end;
after_function(M, F, FTok, [{'(', _} | _] = Rest, End) when F =/= '_' ->
    clause(M, F, FTok, Rest, End);
after_function(_M, _F, _FTok, [Other | _], End) ->
    {error, pos(Other), expected("'/', '(' or the end", Other, End)}.

%% "m:f(Args) when Guards": parsed as the function clause `f(Args) when Guards -> true.'
clause(M, F, FTok, Rest, End) ->
    case lists:keyfind('->', 1, Rest) of
        {'->', Arrow} ->
            {error, Arrow, "'->' actions are not supported: ferrotrace times every matched "
                           "call (filter with 'when')"};
        false ->
            clause_tokens(M, F, FTok, Rest, End)
    end.

clause_tokens(M, F, FTok, Rest, End) ->
    EndAnno = erl_anno:new(End),
    Tokens = [{atom, element(2, FTok), F} | Rest]
        ++ [{'->', EndAnno}, {atom, EndAnno, true}, {dot, EndAnno}],
    case erl_parse:parse_form(Tokens) of
        {ok, {function, _, _, _, [{clause, Anno, Args, Guards, Body}]}} ->
            Fun = {clause, Anno, [list_pattern(Args, Anno)], Guards, Body},
            case transform(Fun) of
                {error, [{_, [{Loc, Mod, Code} | _]} | _], _} ->
                    {error, erl_anno:location(Loc), Mod:format_error(Code)};
                {error, Why} ->
                    {error, pos(FTok), Why};
                MS when is_list(MS) ->
                    case with_clauses(M, F, MS) of
                        {ok, _} = Ok -> Ok;
                        {error, {bad_spec, _, Why}} -> {error, pos(FTok), Why}
                    end
            end;
        {ok, _} ->
            {error, pos(FTok), "expected m:f(Args) or m:f(Args) when Guards"};
        {error, {End, _, _}} ->
            {error, End, "the spec ends too early: unclosed '(' or a missing guard"};
        {error, {Pos, Mod, Code}} ->
            {error, Pos, Mod:format_error(Code)}
    end.

transform(Fun) ->
    try ms_transform:transform_from_shell(dbg, [Fun], [])
    catch _:_ -> {error, "not a match spec clause"}
    end.

list_pattern(Args, Anno) ->
    lists:foldr(fun(A, Tail) -> {cons, Anno, A, Tail} end, {nil, Anno}, Args).

wild_atom({atom, _, A}) -> {ok, A};
wild_atom({var, _, '_'}) -> {ok, '_'};
wild_atom(_) -> error.

unexpected([Tok | _], End, What) -> {error, pos(Tok), expected(What, Tok, End)}.

expected(What, Tok, _End) ->
    io_lib:format("~s is expected, not ~ts", [What, token_text(Tok)]).

token_text({Category, _, Value}) when Category =:= atom; Category =:= var;
                                      Category =:= integer; Category =:= float;
                                      Category =:= char; Category =:= string ->
    io_lib:format("~tp", [Value]);
token_text({Symbol, _}) ->
    io_lib:format("'~ts'", [atom_to_list(Symbol)]);
token_text(Other) ->
    io_lib:format("~tp", [Other]).

pos(Tok) -> erl_anno:location(element(2, Tok)).

%%--------------------------------------------------------------------------------------
%% Elixir names: "MyApp.Cart", "MyApp.Cart.add", "MyApp.Cart.add/2", "MyApp.Cart.add(...)",
%% ":ets.lookup/2". Function names may end in ? or !.

elixir(Chars) ->
    Alias = "[A-Z][A-Za-z0-9_]*(?:\\.[A-Z][A-Za-z0-9_]*)*",
    Fun = "[a-z_][A-Za-z0-9_]*[?!]?",
    case re:run(Chars, "^(" ++ Alias ++ ")$", [{capture, all_but_first, list}, unicode]) of
        {match, [Mod]} ->
            {ok, [{elixir_module(Mod), '_', '_', default}]};
        nomatch ->
            Re = "^(" ++ Alias ++ "|:[a-z][A-Za-z0-9_]*)\\.(" ++ Fun ++ ")(.*)$",
            case re:run(Chars, Re, [{capture, all_but_first, list}, unicode, dotall]) of
                {match, [Mod, F, Rest]} -> elixir_rest(Mod, F, Rest);
                nomatch -> no
            end
    end.

elixir_rest(Mod, F, Rest) ->
    Module = case Mod of
                 ":" ++ Erlang -> list_to_atom(Erlang);
                 _ -> elixir_module(Mod)
             end,
    Function = list_to_atom(F),
    case re:run(Rest, "^/([0-9]+)$", [{capture, all_but_first, list}]) of
        {match, [A]} ->
            case list_to_integer(A) of
                N when N =< 255 -> {ok, [{Module, Function, N, default}]};
                _ -> rewrite(Mod, F, Module, Function, Rest)
            end;
        nomatch when Rest =:= "" ->
            {ok, [{Module, Function, '_', default}]};
        nomatch ->
            rewrite(Mod, F, Module, Function, Rest)
    end.

%% Anything else after the name is parsed as Erlang, with the name quoted.
rewrite(Mod, F, Module, Function, Rest) ->
    Prefix = io_lib:format("~tp:~tp", [Module, Function]),
    Typed = length(Mod) + 1 + length(F),
    Written = length(lists:flatten(Prefix)),
    {rewrite, lists:flatten(Prefix) ++ Rest, {Written, Written - Typed}}.

elixir_module(Alias) ->
    list_to_atom("Elixir." ++ Alias).

%% @doc True if one of `Specs' names the function `MFA' ({@link matches/2}).
-spec covered(mfa(), [{wild(module()), wild(atom()), wild(arity())}]) -> boolean().
covered(MFA, Specs) ->
    lists:any(fun(Spec) -> matches(Spec, MFA) end, Specs).

%% @doc True if the function `MFA' is one that the `{M, F, A}' spec (with `` '_' ''
%% wildcards) names.
-spec matches({wild(module()), wild(atom()), wild(arity())}, mfa()) -> boolean().
matches({M, F, A}, {M2, F2, A2}) ->
    (M =:= '_' orelse M =:= M2) andalso (F =:= '_' orelse F =:= F2)
        andalso (A =:= '_' orelse A =:= A2).

%% @doc True if two specs can match the same function (`'_'' matches anything).
-spec overlaps({wild(module()), wild(atom()), wild(arity())}, {wild(module()), wild(atom()), wild(arity())}) ->
          boolean().
overlaps({M1, F1, A1}, {M2, F2, A2}) ->
    same(M1, M2) andalso same(F1, F2) andalso same(A1, A2).

same(X, X) -> true;
same('_', _) -> true;
same(_, '_') -> true;
same(_, _) -> false.

%% @doc True if `Wide' matches every function `Narrow' matches.
-spec wider({wild(module()), wild(atom()), wild(arity())}, {wild(module()), wild(atom()), wild(arity())}) ->
          boolean().
wider({M1, F1, A1}, {M2, F2, A2}) ->
    wide(M1, M2) andalso wide(F1, F2) andalso wide(A1, A2).

wide('_', _) -> true;
wide(X, X) -> true;
wide(_, _) -> false.
