%%% @doc Many timed functions, for what a function's figures hold (`make always-on',
%%% ferrotrace_memory_SUITE): a generated module whose `fI/1' sums `W' list elements and
%%% recurses on `W div 8' (body-recursive, so timed, not counted as a loop, and its inner
%%% calls compensated: every function gets all four histograms: latency, own time, the
%%% interval's, raw), and work from 1 to 20,000 elements, even over the log scale
%%% (latencies from a few hundred ns to milliseconds).
-module(ft_functions).

-export([load/2, specs/2, work/1, call/3]).

%% @doc Compiles and loads `Module' with `f1/1' .. `fCount/1'.
-spec load(module(), pos_integer()) -> {module, module()}.
load(Module, Count) ->
    Text = [io_lib:format("f~b(0) -> 0; f~b(W) -> lists:sum(lists:seq(1, W)) + f~b(W div 8) - W.", [I, I, I])
            || I <- lists:seq(1, Count)],
    Exports = lists:join(",", [io_lib:format("f~b/1", [I]) || I <- lists:seq(1, Count)]),
    Forms = [form(F) || F <- [["-module(", atom_to_list(Module), ")."], ["-export([", Exports, "])."] | Text]],
    {ok, Module, Bin} = compile:forms(Forms, []),
    code:load_binary(Module, "generated", Bin).

%% @doc The specs of `f1/1' .. `fN/1'.
-spec specs(module(), pos_integer()) -> [{module(), atom(), 1}].
specs(Module, N) ->
    [{Module, name(I), 1} || I <- lists:seq(1, N)].

%% @doc Work for one call, from `Uniform' in [0, 1]: 1 to 20,000 elements, even over the log
%% scale.
-spec work(float()) -> pos_integer().
work(Uniform) ->
    max(1, round(math:pow(20000, Uniform))).

%% @doc Calls `fI(W)' of `Module'.
-spec call(module(), pos_integer(), non_neg_integer()) -> integer().
call(Module, I, W) ->
    Module:(name(I))(W).

name(I) ->
    list_to_atom("f" ++ integer_to_list(I)).

form(Text) ->
    {ok, Tokens, _} = erl_scan:string(lists:flatten(Text)),
    {ok, Form} = erl_parse:parse_form(Tokens),
    Form.
