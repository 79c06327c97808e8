%%% @doc The independent readers the export and cluster suites check exports with
%%% (installed by test/export/setup.sh): install them once per suite, run a command and
%%% read its exit status, run test/export/check.py, and compare its `hdr_sum' figures with
%%% the summary's call entries.
-module(ft_export_tools).

-include_lib("stdlib/include/assert.hrl").

-export([setup/1, run/1, check_py/3, hdr_sum/2, assert_sums/2, tag/1, browser/2]).

-type config() :: [{atom(), term()}].

%% @doc Installs the readers (once; cached in _build/export-tools): `Config' with
%% `{tools, Dir}', or `{tools, {unavailable, Output}}' where they could not be installed
%% (`make test' installs them first, with `make export-tools', and fails loudly there;
%% elsewhere, as in the OTP 27/29 chroots, the cases that need them skip), and `{test_dir, Dir}'.
-spec setup(config()) -> config().
setup(Config) ->
    %% This module is test/support/ft_export_tools.erl: the test directory is above it.
    TestDir = filename:dirname(filename:dirname(proplists:get_value(source, ?MODULE:module_info(compile)))),
    Tools = case run("sh " ++ filename:join([TestDir, "export", "setup.sh"])) of
                {"0", Out} -> lists:last(string:split(string:trim(Out), "\n", all));
                {_, Out} -> {unavailable, Out}
            end,
    [{tools, Tools}, {test_dir, TestDir} | Config].

%% @doc `{ExitStatus, Output}' of a shell command (stderr included).
-spec run(string()) -> {string(), string()}.
run(Cmd) ->
    Out = os:cmd(Cmd ++ " 2>&1; echo \"rc=$?\""),
    case string:split(Out, "rc=", trailing) of
        [Body, Rc] -> {string:trim(Rc), Body};
        _ -> {"?", Out}
    end.

%% @doc Runs test/export/browser.py on an html export with `Args' (`--rows 3 ...'): the
%% case fails with its output if it does; its line of figures is printed in the case's log.
-spec browser(file:filename(), string()) -> ok.
browser(File, Args) ->
    TestDir = filename:dirname(filename:dirname(proplists:get_value(source, ?MODULE:module_info(compile)))),
    Script = filename:join([TestDir, "export", "browser.py"]),
    {Rc, Out} = run(lists:flatten(["python3 ", Script, " ", File, " ", Args])),
    ct:pal("~ts", [Out]),
    ?assertEqual("0", Rc, Out),
    ok.

%% @doc `{ExitStatus, Output}' of `check.py Command Files...', run by the venv's Python.
-spec check_py(config(), atom(), [file:filename()] | file:filename()) -> {string(), string()}.
check_py(Config, Command, [File | _] = Files) when is_list(File) ->
    Python = filename:join([proplists:get_value(tools, Config), "venv", "bin", "python"]),
    Check = filename:join([proplists:get_value(test_dir, Config), "export", "check.py"]),
    run(lists:flatten(lists:join(" ", [Python, Check, atom_to_list(Command) | Files])));
check_py(Config, Command, File) ->
    check_py(Config, Command, [File]).

%% @doc check.py's `hdr_sum' of hdr_log files: `[Tag, Count, P50, P90, P99, P999, Max]'
%% per tag, as strings (it fails the case if check.py does).
-spec hdr_sum(config(), [file:filename()] | file:filename()) -> [[string()]].
hdr_sum(Config, Files) ->
    {"0", Out} = check_py(Config, hdr_sum, Files),
    [string:lexemes(L, " ") || L <- string:split(string:trim(Out), "\n", all)].

%% @doc Each call entry's `count, p50, p90, p99, p999, max' are those `hdr_sum' read for
%% its tag.
-spec assert_sums([map()], [[string()]]) -> ok.
assert_sums(Calls, Sums) ->
    lists:foreach(
      fun(#{mfa := MFA} = Ours) ->
              Tag = tag(MFA),
              [[_ | Figures]] = [L || [T | _] = L <- Sums, T =:= Tag],
              ?assertEqual([maps:get(K, Ours) || K <- [count, p50, p90, p99, p999, max]],
                           [list_to_integer(X) || X <- Figures], Tag)
      end, Calls).

%% @doc `m:f/a', as the exports name a function.
-spec tag(mfa()) -> string().
tag({M, F, A}) ->
    lists:flatten(io_lib:format("~s:~s/~b", [M, F, A])).
