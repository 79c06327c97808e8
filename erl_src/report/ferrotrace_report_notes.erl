%%% @private
%%% @doc The notes of a report (ferrotrace_report), after its table: what the session saw,
%%% kept, sampled, left out and could not pair, the rings' backlog, the frame bound, another
%%% tool taking over, the probe effect, changes, the budget and the loops counted, a line
%%% each where there is one, every line kept to the report's width.
-module(ferrotrace_report_notes).

-export([notes/3, tracing_shares/3]).

%% The report's `displaced:' line names at most this many functions.
-define(DISPLACED_NAMED, 10).

%% @doc The notes on `Summary' in `Width' columns, naming `LoopsNamed' loops (or `all').
-spec notes(ferrotrace:summary(), non_neg_integer() | all, pos_integer()) -> iolist().
notes(Summary = #{events := Events, pairing := Pairing}, LoopsNamed, Width) ->
    Count = fun(Key, Map) -> maps:get(Key, Map, 0) end,
    EventParts = [io_lib:format("~b seen", [Count(seen, Events)]),
                  io_lib:format("~b aggregated", [Count(aggregated, Events)]),
                  io_lib:format("~b dropped (ring full)", [Count(dropped, Events)]),
                  io_lib:format("~b sampled out", [Count(sampled_out, Events)]),
                  io_lib:format("~b over a limit", [Count(limited, Events)])],
    PairingParts =
        [io_lib:format("~b calls still open", [Count(open_calls, Pairing)]),
         io_lib:format("~b abandoned", [Count(abandoned_calls, Pairing)]),
         io_lib:format("~b returns without a call", [Count(unmatched_returns, Pairing)])],
    Loops = loops(maps:get(loops, Summary, []), maps:get(calls, Summary, []), LoopsNamed, Width),
    Estimated = estimated(maps:get(calls, Summary, [])),
    [ferrotrace_text:wrap("events: ", EventParts, Width),
     short(Summary, Width),
     slow_start(maps:get(start, Summary, #{}), Width),
     backlog(Summary, Count(dropped, Events), Width),
     sampling(maps:get(sample, Summary, #{}), Estimated =/= [], Width),
     ferrotrace_text:wrap("pairing: ", PairingParts, Width),
     frames(Count(frames_refused, Events), maps:get(calls, Summary, []), Width),
     displaced(maps:get(displaced, Summary, undefined), Width),
     probe(Summary, Width),
     changes(maps:get(changes, Summary, []), Width),
     budget(maps:get(budget, Summary, undefined), Estimated =/= [], Width),
     fuse(Events, maps:get(budget, Summary, #{}), Width),
     estimates(Estimated, Width),
     left_out(maps:get(generated_left_out, Summary, 0), Width),
     shell(maps:get(shell_left_out, Summary, 0), Width),
     Loops].


%% The calling shell's processes, not timed (`shell => leave_out', the default).
shell(0, _Width) ->
    [];
shell(N, Width) ->
    ferrotrace_text:wrap("shell: ", [io_lib:format("the calling shell's ~b processes not timed", [N]),
                                     "shell => include times them"], Width).

%% A session that ran out its duration within a tenth of a second: most likely seconds
%% given as milliseconds (`duration => 10').
short(#{status := stopped, stop_reason := duration, elapsed_ms := Ms}, Width) when Ms < 100 ->
    ferrotrace_text:wrap("duration: ", [io_lib:format("the session ran its duration, ~b ms", [Ms]),
                                        "durations are in milliseconds: \"10s\" or 10000 is ten seconds"], Width);
short(_Summary, _Width) ->
    [].

%% A start that took a second or more (the summary's `start'): where its time went, the
%% parts of a tenth of a second or more. A busy node's code barrier is the usual cause.
slow_start(#{total_ms := Total} = Start, Width) when is_integer(Total), Total >= 1000 ->
    Parts = [io_lib:format("~ts ~.1f s", [Label, Ms / 1000])
             || {Key, Label} <- [{tracing_ms, "patterns and flags set"},
                                 {holding_ms, "hottest functions held back"}, {analysis_ms, "code read for loops"},
                                 {counting_ms, "calls counted for the budget"}, {calibration_ms, "calibration"}],
                Ms <- [maps:get(Key, Start, 0)], is_integer(Ms), Ms >= 100],
    ferrotrace_text:wrap("slow start: ", [io_lib:format("the start took ~.1f s", [Total / 1000]) | Parts], Width);
slow_start(_Start, _Width) ->
    [].

%% The loops counted without timing, on one line: the first `Named' and how many more
%% (`loops => all' names them all).
loops([], _Calls, _Named, _Width) ->
    [];
loops(LoopMFAs, Calls, Named, Width) ->
    {Shown, More} = case Named of
                        all -> {LoopMFAs, 0};
                        _ -> {lists:sublist(LoopMFAs, Named), max(0, length(LoopMFAs) - Named)}
                    end,
    ferrotrace_text:wrap("counted only (loops): ", [loop_text(L, Calls) || L <- Shown]
         ++ [io_lib:format("~b more (report option loops => all)", [More]) || More > 0], Width).

%% The probe effect (calls/2 sessions): what a traced call costs its caller here, and
%% whether the figures have it taken out (ferrotrace_calibrate).
probe(#{calibration := #{call_ns := C, return_ns := R, took_us := Us}} = Summary, Width) ->
    What = case maps:get(compensated, Summary, false) of
               true -> "compensated";
               false -> "not compensated (compensate => false)"
           end,
    ferrotrace_text:wrap("probe effect: ", [What, io_lib:format("~b ns per call event", [C]), io_lib:format("~b ns per return", [R]),
                            io_lib:format("calibrated in ~.1f ms", [Us / 1000])], Width);
probe(#{calibration := pending}, Width) ->
    ferrotrace_text:wrap("probe effect: ", ["not compensated yet", "calibration measured after a start on full schedulers"], Width);
probe(#{calibration := {error, Reason}}, Width) ->
    ferrotrace_text:wrap("probe effect: ", ["not compensated", io_lib:format("calibration failed: ~0tp", [Reason])], Width);
probe(_Summary, _Width) ->
    [].

-define(MOSTLY_TRACING, 0.5).
%% @doc Below the table, where a calibration is known: the functions shown whose (raw)
%% latency is mostly the cost of the traced calls inside them ("62 % of this latency is
%% tracing: 100 traced events inside each call").
-spec tracing_shares([map()], term(), pos_integer()) -> iolist().
tracing_shares(Calls, #{call_ns := C, return_ns := R}, Width) ->
    [ferrotrace_text:wrap("  ", [io_lib:format("~ts: ~b % of this latency is tracing",
                              [ferrotrace_text:shorten(unicode:characters_to_list(ferrotrace_names:mfa(MFA)), Width div 2),
                               round(100 * Share)]),
                io_lib:format("~ts traced events inside each call~ts", [mean_text(Mean), taken_text(Entry)])],
         ":", Width)
     || Entry = #{mfa := MFA, inner_events := #{mean := Mean}} <- Calls,
        Share <- [tracing_share(Entry, (C + R) / 2)], Share >= ?MOSTLY_TRACING];
tracing_shares(_Calls, _Calibration, _Width) ->
    [].

%% The share of a function's median raw latency that its inner events cost, at the mean
%% cost of an event (the median: a few calls slowed by other work weigh on a mean).
tracing_share(#{inner_events := #{mean := Mean}} = Entry, PerEventNs) ->
    case maps:get(p50, maps:get(raw, Entry, Entry)) of
        P50 when is_integer(P50), P50 > 0 -> min(1.0, Mean * PerEventNs / P50);
        _ -> 0
    end.

mean_text(Mean) when Mean == round(Mean) -> integer_to_list(round(Mean));
mean_text(Mean) -> float_to_list(float(Mean), [{decimals, 1}]).

taken_text(#{raw := _}) -> " (taken out)";
taken_text(_) -> "".

%% A loop, and for one found while it ran (not in the code) how many frames it had reached:
%% those stay on its process's stack.
loop_text(MFA, Calls) ->
    case [N || #{mfa := M, max_frames := N} <- Calls, M =:= MFA] of
        [Frames] when Frames > 1 -> io_lib:format("~ts (found at ~b frames)", [ferrotrace_names:mfa(MFA), Frames]);
        _ -> ferrotrace_names:mfa(MFA)
    end.

%% Calls refused on the scheduler by the frame bound: their process had as many return-trace
%% frames open as a process may keep (a loop that waits where the analysis could not see, or
%% a deep recursion); they are neither timed nor counted in the table.
%% What `sample' keeps (the current rates): counts are of the kept calls, but those the
%% table marks `~', estimated from them (see estimates/2): the note said "not scaled" beside
%% a table of estimated counts.
sampling(Sample, Estimated, Width) ->
    Processes = maps:get(processes, Sample, 1),
    Calls = maps:get(calls, Sample, 1),
    Parts = [io_lib:format("1 process in ~b kept (by pid hash)", [Processes]) || Processes > 1]
        ++ [case Calls of
                0 -> "no call kept (paused)";
                _ -> io_lib:format("1 call in ~b kept", [Calls])
            end || Calls =/= 1],
    case Parts of
        [] -> [];
        _ -> ferrotrace_text:wrap("sampling: ", Parts ++ [kept_counts(Estimated)], Width)
    end.

frames(0, _Calls, _Width) ->
    [];
frames(Refused, Calls, Width) ->
    ferrotrace_text:wrap("frames: ", [io_lib:format("~b calls refused", [Refused]),
                                      "a process had 120 return-trace frames open"]
                         ++ deepest(Calls) ++ ["its deeper calls are not in the table"], Width).

%% The process that had the most frames of one function open (a call entry's `max_frames'
%% and `max_frames_pid'), named as ferrotrace_activity:name/1 names it, and what to do: a
%% loop (a tail call that waits: a server or a client loop) is counted once found, a
%% recursion is timed without its deepest levels. Only a function with half the bound (60
%% frames) in one process is named: the frames may be a generated function's (a
%% comprehension's recursion), left out of the table, and the loops line names it.
deepest(Calls) ->
    case lists:sort([{-N, MFA, Pid} || #{mfa := MFA, max_frames := N, max_frames_pid := Pid} <- Calls, N >= 60]) of
        [] ->
            ["a loop or a deep recursion"];
        [{MinusN, MFA, Pid} | _] ->
            Name = case ferrotrace_activity:name(Pid) of
                       Pid -> io_lib:format("~p (gone)", [Pid]);
                       Named -> io_lib:format("~p ~0tp", [Pid, Named])
                   end,
            [io_lib:format("deepest: ~ts", [Name]),
             io_lib:format("~b frames of ~ts", [-MinusN, ferrotrace_names:mfa(MFA)]),
             "a loop or a deep recursion",
             "leave that function out of the spec or time it on its own"]
    end.

%% Another tool took over processes or functions of the session (OTP 25 and 26, see
%% ferrotrace_displaced): the counts above miss what it took. At most ?DISPLACED_NAMED
%% functions are named.
displaced(#{at := At, processes := N, functions := Functions, by := By} = D, Width) ->
    {{_, _, _}, {H, Mi, S}} = calendar:system_time_to_local_time(At, millisecond),
    Who = case By of
              [] -> "another tool";
              _ -> io_lib:format("another tracer (~ts)",
                                 [lists:join(", ", [io_lib:format("~0tp", [B]) || B <- By])])
          end,
    Took = [io_lib:format("at ~2..0b:~2..0b:~2..0b ~ts took ~b ~ts", [H, Mi, S, Who, N, plural(N, "process", "processes")])
            || N > 0 orelse By =/= []]
        ++ ["and new processes" || maps:get(new_processes, D, false)],
    Named = [ferrotrace_names:mfa(MFA) || MFA <- lists:sublist(Functions, ?DISPLACED_NAMED)],
    More = [io_lib:format("~b more", [length(Functions) - ?DISPLACED_NAMED])
            || length(Functions) > ?DISPLACED_NAMED],
    Replaced = case Functions of
                   [] -> [];
                   [_ | _] when Took =:= [] ->
                       [io_lib:format("at ~2..0b:~2..0b:~2..0b ~b ~ts replaced: ~ts",
                                      [H, Mi, S, length(Functions),
                                       plural(length(Functions), "function's match spec", "functions' match specs"),
                                       hd(Named)]) | tl(Named) ++ More];
                   _ ->
                       [io_lib:format("~b ~ts replaced: ~ts",
                                      [length(Functions),
                                       plural(length(Functions), "function's match spec", "functions' match specs"),
                                       hd(Named)]) | tl(Named) ++ More]
               end,
    ferrotrace_text:wrap("displaced: ", Took ++ Replaced, Width);
displaced(_, _Width) ->
    [].

%% The overhead budget (`max_overhead', see ferrotrace_budget): the budget and the estimate
%% (with the factor and the cost measured on the node, where measured),
%% the rate now and its last changes, the functions shed (with their calls per second when
%% shed) and those taken back. Counts in the table are of the sampled calls, but those it
%% marks `~' (estimated from them, `Estimated': kept_counts/1).
budget(#{max_overhead := B, estimate := E, rate := N, model := Model,
         rate_changes := Changes, rate_changes_total := Total, shed := Shed} = View, Estimated, Width) ->
    Estimate = case E of
                   undefined -> "estimate not yet";
                   _ -> io_lib:format("estimate ~.1f %", [E * 100])
               end,
    Rate = case N of
               1 -> "every call traced";
               _ -> io_lib:format("1 call in ~b traced (~ts)", [N, kept_counts(Estimated)])
           end,
    Costs = case View of
                #{measured := Measured, in_situ := K} when is_float(Measured) ->
                    io_lib:format("costs ~ts x ~.1f, measured on the node: ~.1f %", [Model, K, Measured * 100]);
                _ ->
                    io_lib:format("costs ~ts", [Model])
            end,
    Recent = lists:nthtail(max(0, length(Changes) - 4), Changes),
    ChangeParts = [io_lib:format("at ~.1f s 1 in ~b (~ts)", [At / 1000, R, percent(Est)]) || {At, R, Est} <- Recent],
    Earlier = [io_lib:format("~b earlier", [Total - length(Recent)]) || Total > length(Recent)],
    Now = [S || S <- Shed, not maps:is_key(restored_at, S)],
    Back = length(Shed) - length(Now),
    %% The log keeps the last ?SHED_LOG (ferrotrace_budget): `shed_now' counts them all.
    Off = maps:get(shed_now, View, length(Now)),
    Named = lists:sublist(Now, ?DISPLACED_NAMED),
    ShedParts = [io_lib:format("~b ~ts off (calls/s when shed)", [Off, plural(Off, "pattern", "patterns")])
                 || Off > 0]
        ++ [io_lib:format("~ts ~ts/s~ts ~ts", [ferrotrace_names:mfa(MFA), per_second(R), guessed(Entry), shed_when(At)])
            || Entry = #{mfa := MFA, rate := R, shed_at := At} <- Named]
        ++ [io_lib:format("~b more", [Off - length(Named)]) || Off > length(Named)]
        ++ [io_lib:format("~b taken back", [Back]) || Back > 0],
    Default = ["the default for a '_' module (max_overhead => none turns it off)" || maps:get(default, View, false)]
        ++ ["first moment: within half of it" || maps:get(cautious, View, false)],
    %% What the estimate is a share of: the node's CPU, where it used less than its schedulers.
    Used = [io_lib:format(" (the node used ~b % of its schedulers)", [round(U * 100)])
            || U <- [maps:get(used, View, 1.0)], is_float(U), U < 0.995],
    [ferrotrace_text:wrap("budget: ", [io_lib:format("at most ~.1f % of the node's CPU~ts", [B * 100, Used])] ++ Default
                          ++ [Estimate, Rate, Costs], Width),
     births(View, Width),
     [ferrotrace_text:wrap("rate: ", ChangeParts ++ Earlier, Width) || ChangeParts =/= []],
     [ferrotrace_text:wrap("shed: ", ShedParts, Width) || ShedParts =/= []]];
budget(_, _Estimated, _Width) ->
    [].

%% What the processes born with the session's flags cost at the last tick (ferrotrace_budget's
%% births), where it is a tenth of the budget or more: in the estimate, out of the budget's
%% reach; past the budget by themselves, what would take them off.
births(#{births := Births, born_per_s := Born, max_overhead := B}, Width) when is_float(Births), Births >= B / 10 ->
    Over = case Births >= B of
               true -> ["over the budget alone", "pids => existing traces no new process"];
               false -> []
           end,
    ferrotrace_text:wrap("births: ", [io_lib:format("~ts processes a second born traced", [per_second(Born)]),
                                      io_lib:format("~ts (in the estimate)", [percent(Births)]),
                                      "no pattern or rate takes them off"] ++ Over, Width);
births(_View, _Width) ->
    [].

%% A rate when shed that is a guess (ferrotrace_budget: read from the calls sampled before
%% the fuse untraced the processes making them, not counted).
guessed(#{guessed := true}) -> " (a guess)";
guessed(_) -> "".

%% What the table's counts are where calls were sampled: those timed, but where the table
%% marks a count `~' (estimated from them, estimates/2).
kept_counts(true) -> "~ counts estimated from those kept, the others as kept";
kept_counts(false) -> "counts are of the kept calls, not scaled".

%% The calls whose count the table shows estimated (`~'), as `{Timed, Estimated}'.
estimated(Calls) ->
    [{N, E} || #{count := N, estimated := E} <- Calls, E =/= N].

%% What the budget's fuse left out (ferrotrace_overhead): calls refused where a scheduler
%% had spent the budget's share, processes untraced where even refusing their calls cost
%% more, and how many of those were traced again once their functions were shed.
fuse(Events, Budget, Width) ->
    Refused = maps:get(fuse_refused, Events, 0),
    Untraced = maps:get(untraced, Events, 0),
    Again = case Budget of
                #{untraced := #{retraced := R}} when R > 0 -> [io_lib:format("~b traced again", [R])];
                _ -> []
            end,
    case Refused + Untraced of
        0 ->
            [];
        _ ->
            ferrotrace_text:wrap("fuse: ", [io_lib:format("~b ~ts refused where a scheduler spent the budget's share",
                                                          [Refused, plural(Refused, "call", "calls")]) || Refused > 0]
                                 ++ [io_lib:format("~b ~ts untraced, costing it even refused (calls after are not in the table)",
                                                   [Untraced, plural(Untraced, "process", "processes")]) || Untraced > 0]
                                 ++ Again, Width)
    end.

%% Where a count in the table is an estimate (`~', estimated/1): of how many calls timed.
estimates([], _Width) ->
    [];
estimates(Estimated, Width) ->
    Timed = lists:sum([N || {N, _} <- Estimated]),
    Made = lists:sum([E || {_, E} <- Estimated]),
    ferrotrace_text:wrap("counts: ", ["~ counts are the calls made, estimated from those timed",
                                      io_lib:format("the figures are of the ~b calls timed of about ~b", [Timed, Made])],
                         Width).

%% Held back at the start (counted before tracing, ferrotrace_budget:first/2), or shed later.
shed_when(0) -> "from the start";
shed_when(At) -> io_lib:format("at ~.1f s", [At / 1000]).

%% Generated functions (funs, comprehensions) a wildcard left out.
left_out(0, _Width) ->
    [];
left_out(N, Width) ->
    ferrotrace_text:wrap("left out: ", [io_lib:format("~b generated ~ts (funs, comprehensions)", [N, plural(N, "function", "functions")]),
                        "generated => true times them"], Width).

percent(undefined) -> "no estimate";
percent(E) -> io_lib:format("~.1f %", [E * 100]).

per_second(R) when R >= 1000000 -> io_lib:format("~.1f M", [R / 1000000]);
per_second(R) when R >= 1000 -> io_lib:format("~.1f k", [R / 1000]);
per_second(R) -> integer_to_list(R).

%% What ferrotrace:add/2 and remove/2 changed, and when (the summary keeps the latest 20).
changes(Changes, Width) ->
    Parts = [begin
                 {{_, _, _}, {H, Mi, S}} = calendar:system_time_to_local_time(At, millisecond),
                 {What, Specs} = case C of
                                     #{added := Added} -> {"added", Added};
                                     #{removed := Removed} -> {"removed", Removed}
                                 end,
                 io_lib:format("at ~2..0b:~2..0b:~2..0b ~s ~ts", [H, Mi, S, What, lists:join(" ", [spec_name(Spec) || Spec <- Specs])])
             end || C = #{at := At} <- Changes],
    case Parts of
        [] -> [];
        _ -> ferrotrace_text:wrap("changes: ", Parts, Width)
    end.

%% A spec as the report names functions; `'_'' stands for any module or name.
spec_name({M, F, A}) when is_atom(M), is_atom(F) -> ferrotrace_names:mfa({M, F, A}).

plural(1, One, _Many) -> One;
plural(_, _One, Many) -> Many.

%% When events were dropped or a ring came within a tenth of full: how full the fullest ring
%% got and the longest the collector went without draining, which tell a ring too small for
%% the load from a collector starved of CPU (a gap of many milliseconds).
backlog(#{backlog := #{ring_peak := Peak, ring_size := Size, longest_gap_us := GapUs}}, Dropped, Width)
  when Dropped > 0; Peak * 10 >= Size * 9 ->
    ferrotrace_text:wrap("rings: ", [io_lib:format("the fullest held ~b of ~b events", [Peak, Size]),
                     io_lib:format("~.1f ms at most between two drains", [GapUs / 1000]),
                     "a larger ring_size or sample => N keeps up"], Width);
backlog(_Summary, _Dropped, _Width) ->
    [].

