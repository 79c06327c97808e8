%%% @doc A traced function for the latency split test: it sleeps 10 ms (scheduled out),
%%% then keeps its scheduler busy for 5 ms (running).
-module(ft_activity_target).

-export([sleep_then_burn/0, move_to/1]).

%% @doc Sleeps 10 ms, then burns 5 ms of wall-clock time on the scheduler.
-spec sleep_then_burn() -> ok.
sleep_then_burn() ->
    timer:sleep(10),
    Until = erlang:monotonic_time(microsecond) + 5000,
    burn(Until).

burn(Until) ->
    case erlang:monotonic_time(microsecond) >= Until of
        true -> ok;
        false -> burn(Until)
    end.

%% @doc Binds the calling process to scheduler `I' and yields, so that it returns there.
-spec move_to(pos_integer()) -> ok.
move_to(I) ->
    _ = erlang:process_flag(scheduler, I),
    erlang:yield(),
    ok.
