%%% @doc Every table of the reports honours `width' as the calls table does: a long name
%%% prints whole at `width => 200' and is shortened to fit at `width => 80', and no line is
%%% longer than the width. The tables: activity's top processes (messages, scheduling, GC),
%%% where processes were scheduled out, why calls were slow, a cluster's by-node table,
%%% slow calls and keys (callers).
-module(ferrotrace_width_tests).

-include_lib("stdlib/include/assert.hrl").

-export([activity_tables_test_/0, by_node_table_test_/0, slow_calls_test_/0, keys_test_/0]).

-type tests() :: [{string(), fun(() -> term())}].

-define(LONG_MODULE, a_queue_module_whose_name_is_long_enough_to_need_cutting).
-define(WIDTHS, [200, 80]).

%% A process of the tables: its name (as the summary names processes) and pid, printed as
%% `{Module,init,1} <0.N.0>'.
long_process() ->
    Pid = list_to_pid("<0.696.0>"),
    {#{pid => Pid, name => {?LONG_MODULE, init, 1}},
     lists:flatten(io_lib:format("~0tp ~p", [{?LONG_MODULE, init, 1}, Pid]))}.

dist() -> #{count => 0, p50 => 0, p99 => 0, max => 0}.

activity_summary() ->
    {Who, _} = long_process(),
    #{calls => [#{mfa => {?LONG_MODULE, handle_call_whose_name_is_long_too, 3},
                  split => #{running => #{p50 => 1000, p99 => 2000},
                             descheduled => #{p50 => 10, p99 => 20},
                             gc => #{p50 => 0, p99 => 5}}}],
      messages => #{sent => 10, received => 10, timeouts => 0, to_dead => 0,
                    size_words => dist(), size_capped => 0, wakeup => dist(),
                    top_senders => [Who#{count => 10, words => 123}],
                    top_receivers => [Who#{count => 10, words => 123}],
                    top_wakeup => [Who#{count => 10, total => 123456, max => 23456}]},
      scheduling => #{run_slice => dist(),
                      top_cpu => [Who#{count => 7, total => 7654321}],
                      out_locations => [#{mfa => {?LONG_MODULE, wait_for_the_next_message, 2}, count => 42}]},
      gc => #{reclaimed_words => 1000, minor => dist(), major => dist(),
              top_pause => [Who#{count => 3, total => 30000, max => 20000}]}}.

%% Each width: no line longer; `Whole' printed whole at 200 and not at 80, where its start
%% still shows (shortened, not dropped).
fits(Text, Width, Whole) ->
    Lines = string:split(Text, "\n", all),
    [?assert(string:length(L) =< Width, {too_wide, Width, L}) || L <- Lines],
    case Width of
        200 -> ?assertNotEqual(nomatch, string:find(Text, Whole), {not_whole, Whole, Text});
        80 -> ?assertEqual(nomatch, string:find(Text, Whole), {not_shortened, Whole, Text}),
              %% Shortened in the middle (`..') or cut at its end: a part of it shows.
              Start = string:slice(Whole, 0, 10),
              End = string:slice(Whole, string:length(Whole) - 10),
              ?assert(string:find(Text, Start) =/= nomatch orelse string:find(Text, End) =/= nomatch,
                      {dropped, Whole, Text})
    end.

-spec activity_tables_test_() -> tests().
activity_tables_test_() ->
    {_, Process} = long_process(),
    Text = fun(Width) ->
                   unicode:characters_to_list(
                     ferrotrace_activity_report:format(activity_summary(), fun(_) -> [] end, Width))
           end,
    Section = fun(Width, Title) ->
                      [_, After] = string:split(Text(Width), Title),
                      hd(string:split(After, "\n\n"))
              end,
    [{lists:flatten(io_lib:format("~ts at ~b", [Title, Width])),
      fun() -> fits(Section(Width, Title), Width, Whole) end}
     || Width <- ?WIDTHS,
        {Title, Whole} <- [{"top senders", Process}, {"top receivers", Process},
                           {"slowest to wake", Process}, {"top CPU", Process},
                           {"top pause", Process},
                           {"scheduled out in", atom_to_list(?LONG_MODULE) ++ ":wait_for_the_next_message/2"},
                           {"why slow", atom_to_list(?LONG_MODULE) ++ ":handle_call_whose_name_is_long_too/3"}]].

-spec by_node_table_test_() -> tests().
by_node_table_test_() ->
    MFA = {?LONG_MODULE, handle_call, 3},
    Node = 'a_node_with_a_rather_long_name@a-host-with-a-long-name.example.com',
    Figures = #{mfa => MFA, count => 5, p50 => 1000, p99 => 2000, max => 3000},
    Summary = #{calls => [Figures], by_node => #{Node => #{calls => [Figures]}}},
    [{integer_to_list(Width),
      fun() ->
              Text = unicode:characters_to_list(ferrotrace_report:by_node_table(Summary, Width)),
              fits(Text, Width, atom_to_list(?LONG_MODULE) ++ ":handle_call/3"),
              Width =:= 200 andalso ?assertNotEqual(nomatch, string:find(Text, atom_to_list(Node)))
      end} || Width <- ?WIDTHS].

-spec slow_calls_test_() -> tests().
slow_calls_test_() ->
    Name = ft_width_tests_a_registered_process_with_a_long_name,
    [{integer_to_list(Width),
      fun() ->
              Pid = spawn(fun() -> receive stop -> ok end end),
              true = register(Name, Pid),
              try
                  Entry = #{slowest => [#{pid => Pid, started_at => os:system_time(microsecond),
                                          duration => 123456, result => return}]},
                  Text = unicode:characters_to_list(ferrotrace_slow:lines(Entry, Width)),
                  fits(Text, Width, pid_to_list(Pid) ++ " " ++ atom_to_list(Name) ++ " return")
              after
                  Pid ! stop
              end
      end} || Width <- ?WIDTHS].

-spec keys_test_() -> tests().
keys_test_() ->
    Caller = {?LONG_MODULE, a_caller_function_with_a_long_name, 2, {"x.erl", 120}},
    Entry = #{callers => [#{caller => Caller, count => 10, p99 => 1000, total => 10000}]},
    [{integer_to_list(Width),
      fun() ->
              Text = unicode:characters_to_list(ferrotrace_keys:lines(Entry, Width)),
              fits(Text, Width, atom_to_list(?LONG_MODULE) ++ ":a_caller_function_with_a_long_name/2 (x.erl:120)")
      end} || Width <- ?WIDTHS].
