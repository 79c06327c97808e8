%%% @doc `summary/1''s `memory' against the operating system's view, in a peer node started
%%% with `+MMmcs 0' (the VM's allocators keep no cache of freed carriers): under a session
%%% holding open frames with argument copies, `memory.total' is within a factor of 1.5 of
%%% the peer's RSS growth; a stop frees the rings, term rings and open frames (the total is
%%% the figures alone); a release gives the memory back to the system. And what a timed
%%% function's histograms hold: at most 32 KB a function, 40 MB for 1,000 functions.
-module(ferrotrace_memory_SUITE).

-include("support/ft_ct.hrl").

-export([total_follows_rss_and_stop_and_release_free/1, a_timed_function_holds_at_most_32_kb/1]).

%% Processes holding a call open, and the size of the binary each holds (one binary,
%% shared: the VM holds it once, the session copies it per call, up to max_term_bytes).
-define(HOLDERS, 1500).
-define(ARG_BYTES, 60000).

suite() ->
    [{ct_hooks, [{ft_ct, []}]}].

all() ->
    [total_follows_rss_and_stop_and_release_free, a_timed_function_holds_at_most_32_kb].

%% The peer: this node's code path (ferrotrace and the test modules), `+MMmcs 0'.
peer() ->
    {ok, Peer, _Node} = ft_ct:peer(#{connection => standard_io, args => ["+MMmcs", "0"]}),
    Peer.

call(Peer, M, F, A) ->
    peer:call(Peer, M, F, A, 60000).

%% The peer's resident set, bytes (VmRSS of /proc/<pid>/status).
rss(Peer) ->
    Pid = call(Peer, os, getpid, []),
    {ok, Status} = file:read_file("/proc/" ++ Pid ++ "/status"),
    [_, Line | _] = binary:split(Status, <<"VmRSS:">>),
    [Kb | _] = string:lexemes(binary_to_list(Line), " \t\nkB"),
    list_to_integer(Kb) * 1024.

wait(Fun, Ms) when Ms =< 0 ->
    Fun();
wait(Fun, Ms) ->
    case Fun() of
        true -> true;
        false -> timer:sleep(50), wait(Fun, Ms - 50)
    end.

mb(Bytes) ->
    io_lib:format("~.1f MB", [Bytes / 1048576]).

-spec total_follows_rss_and_stop_and_release_free(config()) -> ok.
total_follows_rss_and_stop_and_release_free(_Config) ->
    Peer = peer(),
    try
        {module, _} = call(Peer, code, ensure_loaded, [ft_memory_target]),
        {module, _} = call(Peer, code, ensure_loaded, [ferrotrace_tracer]),
        Bin = call(Peer, binary, copy, [<<"x">>, ?ARG_BYTES]),
        Holders = call(Peer, ft_memory_target, holders, [?HOLDERS, Bin]),
        _ = call(Peer, erlang, garbage_collect, []),
        timer:sleep(500),
        Before = rss(Peer),
        {ok, S} = call(Peer, ferrotrace, calls,
                       [{ft_memory_target, '_', '_'},
                        #{args => true, max_term_bytes => 65536, owner => none,
                          duration => 120000, ring_size => 65536}]),
        ok = call(Peer, ft_memory_target, go, [Holders]),
        Open = fun() -> #{pairing := #{open_calls := N}} = call(Peer, ferrotrace, summary, [S]),
                        N >= ?HOLDERS end,
        true = wait(Open, 30000),
        %% Then busy processes: many calls of several functions with the large argument.
        ok = call(Peer, ft_memory_target, busy, [100, Bin]),
        timer:sleep(500),
        #{memory := Running, pairing := Pairing, events := Events} = call(Peer, ferrotrace, summary, [S]),
        During = rss(Peer),
        Growth = During - Before,
        #{total := Total, frame_copies := Copies} = Running,
        ct:pal("RSS before ~s, during ~s (growth ~s); memory.total ~s; ~p~n~p~n~p",
               [mb(Before), mb(During), mb(Growth), mb(Total), Running, Pairing, Events]),
        true = Copies >= ?HOLDERS * ?ARG_BYTES * 9 div 10,
        true = Total =:= lists:sum([V || {K, V} <- maps:to_list(Running),
                                         not lists:member(K, [total, functions, ring_alloc_failures])]),
        Ratio = Total / Growth,
        ct:pal("memory.total / RSS growth = ~.2f", [Ratio]),
        true = Ratio >= 1 / 1.5 andalso Ratio =< 1.5,
        ok = call(Peer, ferrotrace, stop, [S]),
        #{memory := Stopped, pairing := #{open_calls := OpenAtStop}} = call(Peer, ferrotrace, summary, [S]),
        AfterStop = rss(Peer),
        ct:pal("after stop: RSS ~s; memory ~p", [mb(AfterStop), Stopped]),
        true = OpenAtStop >= ?HOLDERS,
        #{ring_bytes := 0, term_rings := 0, collector := 0, processes := 0,
          open_frames := 0, frame_copies := 0} = Stopped,
        Figures = lists:sum([maps:get(K, Stopped)
                             || K <- [histograms, intervals, slow_calls, keys, recent, tables,
                                      merge, frame_table]]),
        Figures = maps:get(total, Stopped),
        ok = call(Peer, ft_memory_target, release, [Holders]),
        ok = call(Peer, ferrotrace, release, [S]),
        _ = call(Peer, erlang, garbage_collect, []),
        %% Back near the start: within a quarter of the growth, or 16 MB (polled: where one
        %% of the session's threads still holds it at the release, it is freed when that
        %% thread lets go).
        Near = max(Growth div 4, 16 * 1048576),
        _ = wait(fun() -> rss(Peer) - Before =< Near end, 30000),
        After = rss(Peer),
        ct:pal("after release: RSS ~s (before ~s, during ~s)", [mb(After), mb(Before), mb(During)]),
        true = After - Before =< Near,
        ok
    after
        catch peer:stop(Peer)
    end.

%% Sessions of 20, 200 and 1,000 functions of a generated module (ft_functions), each called
%% 20 times with work from 1 to 20,000 elements (latencies from hundreds of ns to ms, and
%% all four histograms: latency, own time, the interval's, raw). Per function, the 200-
%% function session's histograms less the 20-function one's, over 180, in the engine's
%% accounting: at most 32 KB (3 significant digits with 64-bit counts held 120 to 290 KB); a
%% 1,000-function session at most 40 MB in all.
-spec a_timed_function_holds_at_most_32_kb(config()) -> ok.
a_timed_function_holds_at_most_32_kb(_Config) ->
    Module = ft_memory_functions,
    {module, Module} = ft_functions:load(Module, 1000),
    [{H20, _}, {H200, _}, {H1000, T1000}] = [functions_session(Module, N) || N <- [20, 200, 1000]],
    PerFunction = (H200 - H20) div 180,
    ct:pal("histograms per function ~b bytes; 1,000 functions: histograms ~s, total ~s",
           [PerFunction, mb(H1000), mb(T1000)]),
    true = PerFunction =< 32 * 1024,
    true = T1000 =< 40 * 1000 * 1000,
    ok.

%% The histograms' bytes (cumulative and interval) and the total of a session timing
%% `f1/1' .. `fN/1', once every call returned.
functions_session(Module, N) ->
    {ok, S} = ferrotrace:calls(ft_functions:specs(Module, N), #{duration => 120000, owner => self()}),
    Works = [ft_functions:work(K / 20) || K <- lists:seq(1, 20)],
    _ = [ft_functions:call(Module, I, W) || I <- lists:seq(1, N), W <- Works],
    %% Each call of `fI(W)' recurses until `W' is 0.
    Returns = lists:sum([depth(W) || W <- Works]),
    Returned = fun() -> #{calls := Calls} = ferrotrace:summary(S),
                        length([R || #{returns := R} <- Calls, R =:= Returns]) =:= N end,
    true = wait(Returned, 60000),
    #{memory := #{histograms := H, intervals := I, total := T}} = ferrotrace:summary(S),
    ok = ferrotrace:release(S),
    {H + I, T}.

depth(0) -> 1;
depth(W) -> 1 + depth(W div 8).
