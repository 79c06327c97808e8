%%% @doc The house's shape, asked of xref over the application's object files: the VM's
%%% trace state is changed by the backend alone (ferrotrace_backend and its OTP 25/26 half,
%%% ferrotrace_backend_legacy), and no two modules call each other, however far round.
-module(ferrotrace_house_tests).

%% Not eunit.hrl: its generated test/0 has no spec (see ferrotrace_bad_input_tests).
-include_lib("stdlib/include/assert.hrl").

-export([one_owner_of_the_trace_state_test/0, no_module_circle_test/0, loads_on_the_newest_otp_test/0,
         start_modules_test/0]).

%% Who may call erlang:trace/3, erlang:trace_pattern/2,3 or the `trace' module (OTP 27+,
%% called through apply/3: xref sees `trace:'$F_EXPR'/-1').
-define(OWNERS, [ferrotrace_backend, ferrotrace_backend_legacy]).

-spec one_owner_of_the_trace_state_test() -> ok.
one_owner_of_the_trace_state_test() ->
    Callers = with_xref(fun(X) ->
                                {ok, Calls} = xref:q(X, "E || (trace : Mod + \"erlang\" : \"trace(_pattern)?\" / \".*\")"),
                                lists:usort([M || {{M, _, _}, _} <- Calls])
                        end),
    %% Each of the two does call them (so that the query is seen to find calls at all).
    ?assertEqual(?OWNERS, Callers).

-spec no_module_circle_test() -> ok.
no_module_circle_test() ->
    Circles = with_xref(fun(X) ->
                                {ok, Components} = xref:q(X, "components (ME || AM)"),
                                [C || C <- Components, length(C) > 1]
                        end),
    ?assertEqual([], Circles).

%% A node's first start loads ferrotrace_code:start_modules/0 before it goes on, the rest
%% as it runs: the list holds every module a start may call, module by module from the
%% start, the keeper and the tracer (a module's every function counted, its callbacks too).
%% One the start does not reach may be listed: the rest is also loaded by the first start.
-spec start_modules_test() -> ok.
start_modules_test() ->
    Reached = with_xref(fun(X) ->
                                {ok, Ms} = xref:q(X, "range (closure ME | [ferrotrace_start, ferrotrace_keeper, "
                                                     "ferrotrace_tracer]) * \"ferrotrace.*\" : Mod"),
                                Ms
                        end),
    %% The query finds modules (the start's steps among them).
    ?assert(lists:member(ferrotrace_options, Reached)),
    ?assertEqual([], Reached -- ferrotrace_code:start_modules()),
    %% Not everything: what reads a session is left to after the start.
    ?assertNot(lists:member(ferrotrace_report, ferrotrace_code:start_modules())).

%% The bundle's beams are compiled on the build host's OTP (25 here) and loaded on 25 to 29.
%% OTP 29 refuses `bs_test_unit' (what OTP 25's compiler emits for a `_/binary' tail of a
%% term not known to be a binary: matched first with `when is_binary(...)', it emits none);
%% the OTP 29 chroot's attach step found it in four functions. On OTP 26+ nothing emits it.
-spec loads_on_the_newest_otp_test() -> ok.
loads_on_the_newest_otp_test() ->
    Ebin = filename:dirname(code:which(ferrotrace)),
    Refused = [{M, F, A} || Beam <- filelib:wildcard(filename:join(Ebin, "*.beam")),
                            {beam_file, M, _, _, _, Code} <- [beam_disasm:file(Beam)],
                            {function, F, A, _, Is} <- Code,
                            lists:keymember(bs_test_unit, 2, [I || I <- Is, tuple_size(I) >= 2])],
    ?assertEqual([], Refused).

with_xref(Fun) ->
    Ebin = filename:dirname(code:which(ferrotrace)),
    {ok, X} = xref:start([{xref_mode, functions}]),
    try
        ok = xref:set_default(X, [{verbose, false}, {warnings, false}]),
        {ok, _} = xref:add_directory(X, Ebin),
        Fun(X)
    after
        xref:stop(X)
    end.
