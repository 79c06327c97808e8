%%% @doc The report's lines on a capture (ferrotrace_capture:lines/3), from a capture map as the
%%% capture process freezes it: the slow process named and where it was, its queue, the
%%% longest queues and the busiest processes with their names, cut to what fits the width.
-module(ferrotrace_capture_tests).

% Not eunit.hrl: its generated test/0 has no spec (see ferrotrace_bad_input_tests).
-include_lib("stdlib/include/assert.hrl").

-export([named_and_where_test/0, narrow_test/0, gone_test/0, no_captures_test/0]).

-define(AT, 1795734998768034).

-spec capture() -> ferrotrace_capture:capture().
capture() ->
    Slow = list_to_pid("<0.9.0>"),
    Queue = list_to_pid("<0.120.0>"),
    Busy = list_to_pid("<0.98.0>"),
    Gone = list_to_pid("<0.77.0>"),
    #{call => #{mfa => {orders, place, 1}, pid => Slow, latency => 61014774, started_at => ?AT - 61015},
      process => #{current_function => {timer, sleep, 1}, memory => 142808, message_queue_len => 3,
                   reductions => 6234, name => orders_srv},
      node => #{run_queue_lengths => [0, 2], memory => #{total => 1}, process_count => 80},
      top_queues => [#{pid => Queue, name => {shop_inventory, init, 1}, message_queue_len => 500},
                     #{pid => Slow, name => orders_srv, message_queue_len => 3}],
      top_reductions => [#{pid => Busy, name => {shop_load, client, 0}, reductions => 120000},
                         #{pid => Gone, name => Gone, reductions => 10},
                         #{pid => list_to_pid("<0.78.0>"), name => {erlang, apply, 2}, reductions => 9}],
      recent => undefined, tree => undefined, at => ?AT, took => 1661}.

-spec counts() -> {ok, ferrotrace_capture:counts()}.
counts() ->
    {ok, #{seen => 2, sent => 1, refused_every => 1, refused_max => 0}}.

-spec text([ferrotrace_capture:capture()], pos_integer()) -> string().
text(Captures, Width) ->
    unicode:characters_to_list(ferrotrace_capture:lines(Captures, counts(), Width)).

-spec named_and_where_test() -> term().
named_and_where_test() ->
    Lines = string:split(text([capture()], 200), "\n", all),
    Time = ferrotrace_slow:format_time(?AT),
    ?assertEqual(["captures: 1 taken, 2 calls over slower_than",
                  "  refused: 1 within every, 0 over max_captures",
                  "  " ++ Time ++ " orders:place/1 61.0 ms in <0.9.0> orders_srv",
                  "    at timer:sleep/1, queue 3, 139.5 KB, 6234 reductions",
                  "    run queues [0,2], the capture took 1.66 ms",
                  "    longest queues: 500 <0.120.0> shop_inventory:init/1, 3 <0.9.0> orders_srv",
                  "    busiest (reductions): 120000 <0.98.0> shop_load:client/0, 10 <0.77.0>, 9 <0.78.0>",
                  ""], Lines).

%% A narrow report keeps the first of each top whole, and no more than fits.
-spec narrow_test() -> term().
narrow_test() ->
    Lines = string:split(text([capture()], 60), "\n", all),
    ?assert(lists:member("    longest queues: 500 <0.120.0> shop_inventory:init/1", Lines)),
    ?assert(lists:all(fun(L) -> string:length(L) =< 60 end, Lines)).

%% The slow process gone before the capture: said so, named by its pid alone.
-spec gone_test() -> term().
gone_test() ->
    Text = text([(capture())#{process => undefined, top_queues => [], top_reductions => []}], 200),
    ?assertNotEqual(nomatch, string:find(Text, "61.0 ms in <0.9.0>\n    gone when captured\n")),
    ?assertEqual(nomatch, string:find(Text, "longest queues")).

-spec no_captures_test() -> term().
no_captures_test() ->
    ?assertEqual("", unicode:characters_to_list(ferrotrace_capture:lines([], {ok, none}, 80))).
