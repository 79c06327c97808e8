%% A worker that calls handle/1 every millisecond or so: something to trace.
-module(relapp_work).
-export([start_link/0, handle/1, loop/1]).

start_link() -> {ok, proc_lib:spawn_link(?MODULE, loop, [0])}.

loop(N) ->
    _ = ?MODULE:handle(N),
    receive after 1 -> ok end,
    ?MODULE:loop(N + 1).

handle(N) -> erlang:phash2(N, 1000).
