#!/usr/bin/env escript
%% make bundle: writes the one-file `ferrotrace' escript (see doc/installing.md).
%% Usage: escript attach/bundle.escript VERSION OUT
%% Run after `rebar3 compile': it takes ferrotrace's beams and .app from _build, the NIF from
%% priv/ (a copy with its debug sections stripped when `strip' is there), compiles attach/'s
%% two modules, and records the version, the architecture and the glibc symbol versions the
%% NIF needs in ferrotrace/bundle.meta.
main([Version, Out]) ->
    Ebin = "_build/default/lib/ferrotrace/ebin",
    Beams = [{"ferrotrace/ebin/" ++ filename:basename(F), read(F)}
             || F <- filelib:wildcard(filename:join(Ebin, "*.{beam,app}"))],
    Own = [compile_one(F) || F <- ["attach/ferrotrace_attach.erl", "attach/ferrotrace_attach_node.erl"]],
    Nif = stripped("priv/libferrotrace_nif.so"),
    Needs = lists:usort(fun(A, B) -> version(A) =< version(B) end,
                        [V || [V] <- match_all(Nif, "GLIBC_[0-9]+(?:\\.[0-9]+)+")]),
    Meta = #{version => Version, system_architecture => erlang:system_info(system_architecture),
             otp_release => erlang:system_info(otp_release), glibc_needs => Needs,
             glibc => lists:nthtail(6, lists:last(Needs))},
    Files = Own ++ Beams ++ [{"ferrotrace/priv/libferrotrace_nif.so", Nif},
                             {"ferrotrace/bundle.meta", term_to_binary(Meta)}],
    ok = filelib:ensure_dir(Out),
    %% One scheduler, none busy-waiting: on a loaded machine a VM's start took 3.7 s with the
    %% default schedulers (median of 5, beside three busy loops, on 2 cores) and 1.7 s so; the
    %% commands here wait on the node, they compute little.
    Emu = "+Bi -noinput +S 1:1 +SDcpu 1:1 +SDio 1 +sbwt none +sbwtdcpu none +sbwtdio none",
    ok = escript:create(Out, [shebang, {emu_args, Emu ++ " -escript main ferrotrace_attach"},
                              {archive, Files, []}]),
    ok = file:change_mode(Out, 8#755),
    io:format("bundle: ~s (~b KB): ferrotrace ~s, ~b modules, NIF for ~s (~b KB), glibc ~s or later~n",
              [Out, filelib:file_size(Out) div 1024, Version, length(Beams) - 1,
               maps:get(system_architecture, Meta), byte_size(Nif) div 1024, maps:get(glibc, Meta)]);
main(_) ->
    io:format(standard_error, "usage: escript attach/bundle.escript VERSION OUT~n", []),
    halt(2).

read(F) -> {ok, B} = file:read_file(F), B.

compile_one(File) ->
    case compile:file(File, [binary, report, warnings_as_errors, warn_missing_spec, debug_info]) of
        {ok, Module, Bin} -> {atom_to_list(Module) ++ ".beam", Bin};
        _ -> halt(1)
    end.

stripped(So) ->
    case os:find_executable("strip") of
        false -> read(So);
        Strip ->
            Tmp = "_build/bundle/libferrotrace_nif.stripped.so",
            ok = filelib:ensure_dir(Tmp),
            Port = open_port({spawn_executable, Strip}, [{args, ["--strip-debug", "-o", Tmp, So]}, exit_status]),
            receive {Port, {exit_status, 0}} -> ok end,
            Bin = read(Tmp),
            ok = file:delete(Tmp),
            Bin
    end.

match_all(Bin, Re) ->
    case re:run(Bin, Re, [global, {capture, all, list}]) of
        {match, M} -> M;
        nomatch -> []
    end.

version("GLIBC_" ++ V) -> [list_to_integer(P) || P <- string:split(V, ".", all)].
