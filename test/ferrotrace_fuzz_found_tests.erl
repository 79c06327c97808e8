%%% @doc Erlang-side defects the fuzz suite (ferrotrace_fuzz_SUITE) found, each kept as a
%%% case here once fixed.
-module(ferrotrace_fuzz_found_tests).

%% Not eunit.hrl: its generated test/0 has no spec (see ferrotrace_bad_input_tests).
-include_lib("stdlib/include/assert.hrl").

-export([process_name_of_anything_test/0, chrome_names_of_a_long_list_test/0, improper_options_test/0, improper_kinds_test/0,
         recent_lines_of_anything_test/0, chrome_names_of_anything_test/0,
         registry_answers_junk_test/0, session_start_checks_its_arguments_test/0,
         long_spec_strings_test/0, option_keys_of_a_big_map_test/0, cut_a_long_line_test/0]).

%% A report line of 7 MB cut to a width past its length walked every character as a
%% grapheme cluster (over 5 s, the fuzz suite's hang, seed 419); it is the line. Cutting
%% still counts clusters where they are not code points.
-spec cut_a_long_line_test() -> ok.
cut_a_long_line_test() ->
    Line = binary:copy(<<"ferrotrace">>, 700000),
    ?assertEqual(binary_to_list(Line), ferrotrace_text:cut(Line, 1 bsl 59)),
    ?assertEqual("ferro", ferrotrace_text:cut(Line, 5)),
    ?assertEqual("ab\r\nc", ferrotrace_text:cut("ab\r\ncd", 4)),
    %% e and a combining acute accent: one character.
    ?assertEqual([$x, $e, 16#301, $y], ferrotrace_text:cut([$x, $e, 16#301, $y, $z], 3)),
    ?assertEqual([$e, 16#301], ferrotrace_text:cut(<<"e", 16#cc, 16#81>>, 9)),
    ok.

%% A session handed a caller that is not a pid (a port, or junk given to the tracer's
%% trace/5 by hand) made format/1 raise badarg in erlang:node/1 as it printed the slow
%% calls. Any caller is printed.
-spec process_name_of_anything_test() -> ok.
process_name_of_anything_test() ->
    Port = open_port({spawn_executable, "/bin/cat"}, []),
    try
        ?assertEqual(erlang:port_to_list(Port), ferrotrace_slow:process_name(Port))
    after
        port_close(Port)
    end,
    ?assertEqual("junk", ferrotrace_slow:process_name(junk)),
    ?assertEqual("<<\"not a pid\">>", ferrotrace_slow:process_name(<<"not a pid">>)),
    ?assertMatch("#Ref<" ++ _, ferrotrace_slow:process_name(make_ref())),
    ?assertMatch("[1,2,3|...]", ferrotrace_slow:process_name(lists:seq(1, 100000))),
    Self = pid_to_list(self()),
    ?assertEqual(Self, ferrotrace_slow:process_name(self())),
    ok.

%% An improper options list raised function_clause in lists:all/2 from every entry that
%% takes options; it is a bad_options answer.
-spec improper_options_test() -> ok.
improper_options_test() ->
    Improper = [{duration, 1} | b],
    ?assertMatch({error, {bad_options, Improper, _}}, ferrotrace_options:to_map(Improper)),
    ?assertMatch({error, {bad_options, Improper, _}}, ferrotrace:session(Improper)),
    ?assertMatch({error, {bad_options, _, _}}, ferrotrace:report(1, [{top, 1} | b])),
    ?assertEqual([], ft_ct:sessions()),
    ok.

%% An improper list of kinds raised bad_generator in processes/2 (and `also'); it is a
%% bad_kinds answer.
-spec improper_kinds_test() -> ok.
improper_kinds_test() ->
    {module, ft_test_target} = code:ensure_loaded(ft_test_target),
    ?assertMatch({error, {bad_kinds, [procs | x], _}}, ferrotrace_activity:check_kinds([procs | x])),
    ?assertMatch({error, {bad_kinds, [procs | x], _}}, ferrotrace:processes([procs | x], #{})),
    ?assertMatch({error, _}, ferrotrace:calls({ft_test_target, f, 1}, #{also => [procs | x]})),
    ?assertEqual([], ft_ct:sessions()),
    ok.

%% print_recent/1 raised badarg in pid_to_list/1 for a flight recorder holding a tracee
%% that is not a pid (junk given to trace/5 by hand); it is printed.
-spec recent_lines_of_anything_test() -> ok.
recent_lines_of_anything_test() ->
    Event = #{at => 1795513853748305, mfa => {m, f, 1}, event => call, duration => undefined},
    Text = lists:flatten(io_lib:format("~s", [ferrotrace_recent:lines([Event#{pid => junk},
                                                                       Event#{pid => self()}])])),
    ?assertMatch({match, _}, re:run(Text, " junk m:f/1")),
    ?assertMatch({match, _}, re:run(Text, pid_to_list(self()))),
    ok.

%% The chrome_trace export raised badarg in pid_to_list/1 for a flight recorder holding a
%% tracee that is not a pid; it is named as it is, on a thread of its own.
-spec chrome_names_of_anything_test() -> ok.
chrome_names_of_anything_test() ->
    {Ref, Self} = {make_ref(), self()},
    [{junk, N, <<"junk">>}, {Ref, M, _}, {Self, S, SelfText}] = ferrotrace_chrome:names([junk, Ref, Self]),
    ?assert(is_integer(N) andalso is_integer(M) andalso N =/= M),
    ?assertEqual(list_to_binary(pid_to_list(Self)), SelfText),
    ?assertEqual(S, list_to_integer(lists:nth(2, string:lexemes(pid_to_list(Self), "<.>")))),
    ok.

%% Junk given to the registry's exported functions crashed it (`register(1, self(), #{})',
%% a 6 MB binary as the keeper): its crash report carried the term, and every caller waited
%% for its restarts. It answers bad_request, summarised, and stays the same process.
-spec registry_answers_junk_test() -> ok.
registry_answers_junk_test() ->
    Registry = ferrotrace_registry:ensure_started(),
    Huge = binary:copy(<<"x">>, 6 bsl 20),
    ?assertMatch({error, {bad_request, _}}, ferrotrace_registry:register(1, self(), #{})),
    ?assertMatch({error, {bad_request, {register, _, {ferrotrace_large_term, _}, -29097}}},
                 ferrotrace_registry:register(self(), Huge, -29097)),
    ?assertMatch({error, {bad_request, _}}, ferrotrace_registry:set_patterns(1, [junk])),
    ?assertEqual(Registry, whereis(ferrotrace_registry)),
    ok.

%% ferrotrace_session:start/3 with junk (seed 307, call #4069, on OTP 27.3: a histogram in a
%% list as the engine's options, a map nested 1000 deep as the tracing, settings without an
%% owner) started a keeper that crashed in init/1 with function_clause; its crash report
%% printed the arguments, and formatting the deep map grew the node's virtual size by
%% 0.7 to 0.9 GB (OTP 25 and 27). The settings are checked before a keeper starts (now one
%% value, ferrotrace_keeper:start/1): the answer names the part and what is accepted,
%% summarised, and nothing is logged. (The fuzz peer's histogram was a live session's; any
%% binary refuses the same way.)
-spec session_start_checks_its_arguments_test() -> ok.
session_start_checks_its_arguments_test() ->
    {module, ft_test_target} = code:ensure_loaded(ft_test_target),
    Deep = ft_fuzz_terms:nest(1000, fun(X) -> #{k => X} end),
    Histogram = <<28, 132, 147, 19, 0, 0, 0, 40, 0:320>>,
    Tracing = #{specs => [{ft_test_target, f, 1}], heads => [default], pids => all, scope => local},
    Keeper = #{owner => {process, self()}, keep => 0, name => undefined, spec => []},
    Start = fun(Engine, T, K) -> ferrotrace_keeper:start(K#{engine => Engine, tracing => T}) end,
    Logged = logged_during(
               fun() ->
                       Found = Start([Histogram], Deep, #{name => fuzz_new}),
                       ?assertMatch({error, {bad_argument, engine_options, [Histogram], <<_/binary>>}}, Found),
                       ?assertMatch({error, {bad_argument, tracing, {ferrotrace_large_term, _}, <<_/binary>>}},
                                    Start(#{}, Deep, Keeper)),
                       ?assertMatch({error, {bad_argument, settings, #{name := fuzz_new}, <<_/binary>>}},
                                    Start(#{}, Tracing, #{name => fuzz_new})),
                       ?assertMatch({error, {bad_argument, settings, _, _}},
                                    Start(#{}, none, Keeper#{keep := 1 bsl 40})),
                       ?assertMatch({error, {bad_argument, settings, _, _}}, ferrotrace_keeper:start([Deep])),
                       ?assertMatch({error, {bad_argument, tracing, _, _}},
                                    Start(#{}, Tracing#{pids := [self() | x]}, Keeper)),
                       ?assertMatch({error, {bad_argument, tracing, _, _}},
                                    Start(#{}, Tracing#{heads := []}, Keeper)),
                       %% The loops' reading pace: a float from 0.01 to 1.
                       [?assertMatch({error, {bad_argument, tracing, _, <<_/binary>>}},
                                     Start(#{}, Tracing#{read_pace => Pace}, Keeper))
                        || Pace <- [0, 0.0, 0.001, 1.5, 1, -0.1, fast, "0.02"]],
                       ?assertMatch({error, {bad_argument, tracing, _, _}},
                                    Start(#{}, Tracing#{specs := [{ferrotrace, calls, 2}]}, Keeper)),
                       %% What the checks let through and the VM refuses (a match spec that is
                       %% not one) is refused too, summarised, with nothing left behind.
                       ?assertMatch({error, {start_failed, error, _, _}},
                                    Start(#{}, Tracing#{heads := [[{'_', [], [Deep | x]}]]}, Keeper)),
                       ?assert(erlang:external_size(Found) < 1024)
               end),
    ?assertEqual([], Logged),
    ?assertEqual([], ft_ct:sessions()),
    ?assertEqual([], ferrotrace_registry:sessions()),
    ok.

%% What the logger was asked to log while `Fun' ran and for half a second after (a keeper
%% crash is reported as it exits, after its start answered): level and report kind, the
%% events themselves dropped unformatted.
logged_during(Fun) ->
    Self = self(),
    Filter = fun(#{level := Level, meta := Meta}, _) ->
                     Self ! {ft_logged, Level, maps:get(domain, Meta, none), maps:get(pid, Meta, none)},
                     stop
             end,
    ok = logger:add_primary_filter(ft_fuzz_found, {Filter, []}),
    try
        Fun()
    after
        timer:sleep(500),
        logger:remove_primary_filter(ft_fuzz_found)
    end,
    collect_logged().

collect_logged() ->
    receive {ft_logged, Level, Domain, Pid} -> [{Level, Domain, Pid} | collect_logged()]
    after 0 -> []
    end.

%% Spec strings of megabytes were scanned and parsed whole: a 7 MB binary given to
%% ferrotrace_options:calls/2 raised the fuzz peer's peak virtual size by 590 MB (seed 307,
%% call #63783 of 100,000, OTP 27), an 8 MB one to ferrotrace_spec:parse/1 was killed at the
%% fuzz suite's 800 MB heap bound (#18455). Strings over 65,536 characters are refused
%% before they are scanned: here in a process whose heap may not pass 80 MB.
-spec long_spec_strings_test() -> ok.
long_spec_strings_test() ->
    TooLong = <<"a spec string of at most 65536 characters">>,
    Answers = bounded(fun() ->
                              [ferrotrace_options:calls(binary:copy(<<"d">>, 7 bsl 20), #{}),
                               ferrotrace_spec:parse(binary:copy(<<"ferrotrace">>, (8 bsl 20) div 10)),
                               ferrotrace_spec:parse(lists:duplicate(1 bsl 20, $d)),
                               ferrotrace_spec:parse([{lists, seq, 2}, lists:duplicate(1 bsl 20, $d)])]
                      end, 10 * 1024 * 1024),
    ?assertMatch([{error, {bad_spec, <<"dddd", _/binary>>, TooLong}},
                  {error, {bad_spec, <<"ferrotrace", _/binary>>, TooLong}},
                  {error, {bad_spec, "dddd" ++ _, TooLong}},
                  {error, {bad_spec, "dddd" ++ _, TooLong}}], Answers),
    ?assertMatch({ok, [{lists, seq, 2, default}]}, ferrotrace_spec:parse("lists:seq/2")),
    ok.

%% A list of a million integers named as Chrome trace threads: each went through io_lib
%% and the call hung past the fuzz suite's 5 s (seed 1187, call #3867). Integers and atoms
%% are named directly now: the list is named whole, each element a binary.
-spec chrome_names_of_a_long_list_test() -> ok.
chrome_names_of_a_long_list_test() ->
    Names = ferrotrace_chrome:names([[{also} | <<1, 2>>] | lists:duplicate(1 bsl 20, $a)]),
    ?assertEqual(1 + (1 bsl 20), length(Names)),
    ?assert(lists:all(fun({_, N, Text}) -> is_integer(N) andalso is_binary(Text) end, Names)).

%% `Fun()' in a process killed if its heap passes `Words'.
bounded(Fun, Words) ->
    Self = self(),
    {Pid, Ref} = spawn_opt(fun() -> Self ! {self(), Fun()} end,
                           [monitor, {max_heap_size, #{size => Words, kill => true, error_logger => false}}]),
    receive
        {Pid, Answer} -> Answer;
        {'DOWN', Ref, process, Pid, Reason} -> {died, Reason}
    end.

%% A map of 100,000 keys checked against a list of 100,000 names (ferrotrace_hint:keys/3,
%% which the `trees' and `capture' options go through) took one list's member per key:
%% the fuzz suite's seed 274 found it running on after 5 s. Now linear, and a hint is
%% looked for among a few hundred names at most; the answer names a key all the same.
%% (Before, this case ran past EUnit's 5 s for a test.)
-spec option_keys_of_a_big_map_test() -> ok.
option_keys_of_a_big_map_test() ->
    Big = maps:from_list([{I, I} || I <- lists:seq(1, 100000)]),
    Names = [list_to_atom("ft_name_" ++ integer_to_list(I)) || I <- lists:seq(1, 100000)],
    ?assertEqual({error, <<"accepted">>}, ferrotrace_hint:keys(Big, Names, <<"accepted">>)),
    ?assertEqual(ok, ferrotrace_hint:keys(#{ft_name_7 => 1}, Names, <<"accepted">>)),
    ?assertEqual({error, <<"did you mean keep? accepted">>},
                 ferrotrace_hint:keys(#{kepe => 1}, [keep, min_ms], <<"accepted">>)),
    ?assertEqual(ok, ferrotrace_hint:keys(#{}, [], <<"accepted">>)),
    ok.
