%%% @doc What the fresh-node benchmarks share (`make cold-start', `make shed-latency'): a
%%% measurement run in a fresh `erl -noshell +S 2:2' with the parent's `-pa' directories,
%%% read back from the one line it prints, and the medians printed over the runs.
-module(ft_fresh_node).
-export([figures/2, stat/2]).

%% @doc Runs `Module:in_node()' in a fresh node and answers the map it printed after
%% `Prefix' (`"cold "': `cold #{...}.'), or `{failed, Lines}' with all it printed.
-spec figures(module(), string()) -> map() | {failed, [string()]}.
figures(Module, Prefix) ->
    Erl = os:find_executable("erl"),
    Pa = lists:append([["-pa", D] || {ok, Dirs} <- [init:get_argument(pa)], D <- lists:append(Dirs)]),
    Port = open_port({spawn_executable, Erl},
                     [{args, ["-noshell", "+S", "2:2"] ++ Pa ++
                          ["-eval", atom_to_list(Module) ++ ":in_node(), halt()."]},
                      exit_status, stderr_to_stdout, {line, 4096}]),
    Lines = collect(Port, []),
    case [L || L <- Lines, lists:prefix(Prefix, L)] of
        [Line] ->
            {ok, Tokens, _} = erl_scan:string(lists:nthtail(length(Prefix), Line) ++ "."),
            {ok, Figures} = erl_parse:parse_term(Tokens),
            Figures;
        _ ->
            {failed, Lines}
    end.

collect(Port, Acc) ->
    receive
        {Port, {data, {_, Line}}} -> collect(Port, [Line | Acc]);
        {Port, {exit_status, _}} -> lists:reverse(Acc)
    after 120000 ->
        port_close(Port),
        lists:reverse(Acc)
    end.

%% @doc `median:M,range:Lo-Hi' of the integers under `Key' in `Results', `none' without any.
-spec stat(atom(), [map()]) -> iolist().
stat(Key, Results) ->
    case lists:sort([V || #{Key := V} <- Results, is_integer(V)]) of
        [] -> "none";
        Values -> io_lib:format("median:~b,range:~b-~b",
                                [lists:nth((length(Values) + 1) div 2, Values), hd(Values), lists:last(Values)])
    end.
