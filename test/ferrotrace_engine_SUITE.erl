%%% @doc The engine's promises to the Erlang side, through the raw NIFs of `ferrotrace_tracer':
%%% whatever stops a session, its keeper gets `{ferrotrace_stopped, Id, Reason}' from the
%%% engine (the engine owns the `duration' timer), and sampling decided in `enabled_call/3'.
-module(ferrotrace_engine_SUITE).

-include_lib("stdlib/include/assert.hrl").

-export([all/0, init_per_suite/1, end_per_suite/1]).
-export([duration_stop_notifies_keeper/1, limit_stop_notifies_keeper/1,
         user_stop_notifies_keeper/1]).

-type config() :: [{atom(), term()}].

-spec all() -> [atom()].
all() ->
    [duration_stop_notifies_keeper, limit_stop_notifies_keeper, user_stop_notifies_keeper].

-spec init_per_suite(config()) -> config().
init_per_suite(Config) ->
    {module, ferrotrace_tracer} = code:ensure_loaded(ferrotrace_tracer),
    {module, ft_test_target} = code:ensure_loaded(ft_test_target),
    Config.

-spec end_per_suite(config()) -> ok.
end_per_suite(_Config) ->
    ok.

-spec duration_stop_notifies_keeper(config()) -> ok.
duration_stop_notifies_keeper(_Config) ->
    {ok, Id} = ferrotrace_tracer:new_session(#{duration => 50}, self()),
    T0 = erlang:monotonic_time(millisecond),
    receive {ferrotrace_stopped, Id, Reason} -> ?assertEqual(duration, Reason)
    after 5000 -> error(no_stop_message)
    end,
    Waited = erlang:monotonic_time(millisecond) - T0,
    ?assert(Waited >= 40 andalso Waited < 1000),
    {ok, #{status := stopped, stop_reason := duration}} = ferrotrace_tracer:session_summary(Id),
    ok = ferrotrace_tracer:release_session(Id),
    receive Other -> error({unexpected, Other}) after 50 -> ok end.

-spec limit_stop_notifies_keeper(config()) -> ok.
limit_stop_notifies_keeper(_Config) ->
    {ok, Id} = ferrotrace_tracer:new_session(#{max_events => 10, duration => infinity}, self()),
    Self = self(),
    Worker = spawn_link(fun() -> receive go -> ok end, [ft_test_target:f(I) || I <- lists:seq(1, 100)], Self ! done end),
    1 = erlang:trace_pattern({ft_test_target, f, 1}, [{'_', [], [{return_trace}]}], [local]),
    1 = erlang:trace(Worker, true, [call, {tracer, ferrotrace_tracer, Id}]),
    Worker ! go,
    receive done -> ok after 5000 -> error(worker_stuck) end,
    receive {ferrotrace_stopped, Id, Reason} -> ?assertEqual(limit, Reason)
    after 5000 -> error(no_stop_message)
    end,
    erlang:trace_pattern({ft_test_target, f, 1}, false, [local]),
    ok = ferrotrace_tracer:release_session(Id).

-spec user_stop_notifies_keeper(config()) -> ok.
user_stop_notifies_keeper(_Config) ->
    {ok, Id} = ferrotrace_tracer:new_session(#{}, self()),
    ok = ferrotrace_tracer:stop_session(Id, user),
    %% The collector sends before it ends, and stop joins it: the message is already here.
    receive {ferrotrace_stopped, Id, user} -> ok after 1000 -> error(no_stop_message) end,
    ok = ferrotrace_tracer:release_session(Id),
    receive Other -> error({unexpected, Other}) after 50 -> ok end.
