%%% @doc Keyed aggregation, like DTrace's `@[key] = quantize(...)': a latency histogram per
%%% function and key.
%%%
%%% A call's key is what its trace match spec's `{message, Key}' action returned, so a spec
%%% such as `{shop_api, checkout, [{[#{tier => '$1'}], [], [{message, '$1'}]}]}' or its fun
%%% form `{shop_api, checkout, fun([#{tier := T}]) -> message(T) end}' keys checkout's calls
%%% by tier. {@link ferrotrace:calls/2} turns keys on (`key => message') when a clause sets
%%% `message'; the call entry then has `by_key => [#{key, count, total, mean, p50, p90, p99,
%%% p999, max}]', most total time first, and `keys_overflow'.
%%%
%%% `callers => true' keys each call by its caller instead: ferrotrace adds
%%% `{message, {caller_line}}' to every clause, and the entry has `callers' (`caller' for
%%% `key'): `{M, F, A, {File, Line}}' as the VM's `caller_line' gives it, or `undefined'.
%%% A call made as a tail call shows the function it returns to, which is the tail-calling
%%% function's own caller: the VM keeps no frame of the function that made it. A spec that
%%% sets `message' itself cannot be combined with `callers'.
%%%
%%% Keys are copied bounded by `max_term_bytes' (a larger key is kept cut, marked
%%% `{ferrotrace_truncated, ...}'), and at most `max_keys' (default 1000) are kept over the
%%% session: calls whose key came later are counted in their entry's `keys_overflow'.
%%% For a raw session ({@link ferrotrace:session/1}) with your own match specs, pass
%%% `key => message'.
-module(ferrotrace_keys).

-export([heads/2, lines/2]).

%% Keys (or callers) printed under each histogram, per list.
-define(SHOWN, 5).

%% @doc The heads to trace and the engine options for keys: `callers => true' adds
%% `{message, {caller_line}}' to every clause and `key => caller'; a clause that sets
%% `message' itself turns on `key => message' (unless the options already set `key').
-spec heads([ferrotrace_spec:heads()], map()) ->
          {ok, [ferrotrace_spec:heads()], #{key => message | caller}} | {error, term()}.
heads(Heads, Options) ->
    Messages = lists:any(fun sets_message/1, Heads),
    case {maps:get(callers, Options, false), Messages} of
        {false, true} when not is_map_key(key, Options) ->
            {ok, Heads, #{key => message}};
        {false, _} ->
            {ok, Heads, #{}};
        {true, false} ->
            {ok, [with_caller(H) || H <- Heads], #{key => caller}};
        {true, true} ->
            {error, {bad_option, {callers, true,
                                  <<"callers => true keys calls by their caller with the match spec's "
                                    "message action; this spec sets {message, _} itself">>}}};
        {Other, _} ->
            {error, {bad_option, {callers, Other, <<"true or false">>}}}
    end.

sets_message(default) ->
    false;
sets_message(Clauses) ->
    lists:any(fun({_Head, _Guards, Body}) -> lists:keymember(message, 1, [B || B <- Body, is_tuple(B)]) end,
              Clauses).

with_caller(default) -> [{'_', [], [{message, {caller_line}}]}];
with_caller(Clauses) -> [{Head, Guards, Body ++ [{message, {caller_line}}]} || {Head, Guards, Body} <- Clauses].

%% @doc The report's lines for one call entry: its keys (or callers), the five with the most
%% total time, and for callers also the five that called most often.
-spec lines(map(), pos_integer()) -> iodata().
lines(#{by_key := [_ | _] = Keys} = Entry, Width) ->
    [title("by key", length(Keys), Entry, Width), rows(key, lists:sublist(Keys, ?SHOWN), Width)];
lines(#{callers := [_ | _] = Callers} = Entry, Width) ->
    ByTotal = lists:sublist(Callers, ?SHOWN),
    ByCount = lists:sublist(lists:sort(fun(#{count := A}, #{count := B}) -> A >= B end, Callers), ?SHOWN),
    [title("callers by total time", length(Callers), Entry, Width),
     rows(caller, ByTotal, Width),
     case ByCount =:= ByTotal of
         true -> [];
         false -> [ferrotrace_text:cut("  callers by count", Width), "\n", rows(caller, ByCount, Width)]
     end];
lines(_Entry, _Width) ->
    [].

title(What, Kept, Entry, Width) ->
    Overflow = case maps:get(keys_overflow, Entry, 0) of
                   0 -> "";
                   N -> io_lib:format(", ~b calls past max_keys not kept", [N])
               end,
    ["\n", ferrotrace_text:cut(io_lib:format("  ~s (~b kept~s)", [What, Kept, Overflow]), Width), "\n"].

rows(Name, Keys, Width) ->
    [ferrotrace_text:cut(io_lib:format("  ~10s ~9s ~9s  ~s", ["count", "p99", "total", Name]), Width), "\n",
     [[ferrotrace_text:cut(io_lib:format("  ~10b ~9s ~9s  ~ts",
                         [Count, ferrotrace_text:format_ns(P99), ferrotrace_text:format_ns(Total),
                          %% Shortened in the middle to what the three figures leave.
                          ferrotrace_text:shorten(lists:flatten(key_text(Name, maps:get(Name, K))), Width - 35)]),
                           Width), "\n"]
      || K = #{count := Count, p99 := P99, total := Total} <- Keys]].

%% A caller as `m:f/1 (line 12)', naming the file when it is not the module's own (an
%% included one); a key as the shell prints it, cut at depth 8.
key_text(caller, {M, F, A, {File, Line}}) ->
    case filename:basename(File) =:= atom_to_list(M) ++ ".erl" of
        true -> io_lib:format("~tw:~tw/~b (line ~b)", [M, F, A, Line]);
        false -> io_lib:format("~tw:~tw/~b (~ts:~b)", [M, F, A, filename:basename(File), Line])
    end;
key_text(caller, {M, F, A}) ->
    io_lib:format("~tw:~tw/~b", [M, F, A]);
key_text(caller, undefined) ->
    "undefined (not known to the VM)";
key_text(_, Key) ->
    io_lib:format("~0tP", [Key, 8]).

