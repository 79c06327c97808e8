#!/usr/bin/env escript
%%% Builds EEP-48 doc chunks from the edoc of erl_src/**/*.erl so that `h(ferrotrace, calls)'
%%% works in the shell on OTP 25 and later (OTP 25's compiler writes no docs of its own).
%%%
%%% Run by rebar3 as a post-compile hook, in the app's source dir. For every compiled copy
%%% of the app it finds (`$REBAR_DEPS_DIR/ferrotrace', `$REBAR_CHECKOUTS_OUT_DIR/ferrotrace'),
%%% it writes
%%%   - `doc/chunks/Module.chunk' beside its ebin (where code:get_doc/1 looks, and what a
%%%     dev-mode release links to), and
%%%   - the same term as a "Docs" chunk inside each ebin/Module.beam, which code:get_doc/1
%%%     reads first: a release copies ebin but not doc/ (relx copies ebin, include, priv),
%%%     so this is what keeps `h/2' working in a release (unless the release strips beams,
%%%     `{debug_info, strip}', which drops every non-code chunk).
%%% A beam is rewritten only when its Docs chunk differs, and edoc runs only when a source is
%%% newer than its chunk (or a beam lacks its Docs), so a no-op compile stays quick.
%%% Without edoc (Debian's erlang-edoc) it prints a note and succeeds: docs are a comfort,
%%% never a reason for a dependency's build to fail.
-mode(compile).

main(_) ->
    App = "ferrotrace",
    case code:which(edoc) of
        non_existing ->
            io:format("ferrotrace: edoc not installed; no shell docs (h/2)~n");
        _ ->
            Sources = filelib:wildcard("erl_src/**/*.erl"),   % role folders too
            Tmp = filename:join(tmp_dir(), "ferrotrace_doc_chunks_" ++ os:getpid()),
            %% An edoc error must not fail a dependent's build: warn, keep the old docs.
            %% (Our own EUnit test, ferrotrace_shell_tests:docs_test/0, fails instead.)
            try build(Sources, Tmp, App)
            catch Class:Reason ->
                    io:format(standard_error,
                              "ferrotrace: shell docs (h/2) not rebuilt: ~tp:~tp~n",
                              [Class, Reason])
            after _ = file:del_dir_r(Tmp)
            end
    end.

build(Sources, Tmp, App) ->
    Targets = [D || D <- app_dirs(App), filelib:is_dir(filename:join(D, "ebin"))],
    case [T || T <- Targets, not up_to_date(Sources, T)] of
        [] -> ok;   % a no-op compile: nothing to redo
        Stale -> build(Sources, Tmp, Stale, edoc)
    end.

%% Every module's chunk is newer than its source, and its beam carries it.
up_to_date(Sources, AppDir) ->
    lists:all(
      fun(Source) ->
              Mod = filename:basename(Source, ".erl"),
              Chunk = filename:join([AppDir, "doc", "chunks", Mod ++ ".chunk"]),
              Beam = filename:join([AppDir, "ebin", Mod ++ ".beam"]),
              filelib:is_regular(Chunk)
                  andalso filelib:last_modified(Chunk) >= filelib:last_modified(Source)
                  andalso element(1, beam_lib:chunks(Beam, ["Docs"])) =:= ok
      end, Sources).

build(Sources, Tmp, Targets, edoc) ->
    ok = edoc:files(Sources, [{doclet, edoc_doclet_chunks}, {layout, edoc_layout_chunks},
                              {dir, Tmp}, {preprocess, true}, {includes, ["include"]},
                              {report_missing_types, false}]),
    Chunks = filelib:wildcard(filename:join([Tmp, "chunks", "*.chunk"])),
    lists:foreach(fun(Dir) -> install(Chunks, Dir) end, Targets).

app_dirs(App) ->
    Env = [os:getenv(V) || V <- ["REBAR_DEPS_DIR", "REBAR_CHECKOUTS_OUT_DIR"]],
    Dirs = [filename:join(D, App) || D <- Env, D =/= false, D =/= ""],
    %% Run by hand (or as a dependency built in place): the current dir.
    lists:usort([filename:absname(D) || D <- Dirs ++ ["."]]).

install(Chunks, AppDir) ->
    DocDir = filename:join([AppDir, "doc", "chunks"]),
    ok = filelib:ensure_dir(filename:join(DocDir, "x")),
    lists:foreach(
      fun(Chunk) ->
              {ok, Raw} = file:read_file(Chunk),
              Beam = filename:join([AppDir, "ebin",
                                    filename:basename(Chunk, ".chunk") ++ ".beam"]),
              Bin = exported_only(Beam, Raw),
              ok = write_chunk(filename:join(DocDir, filename:basename(Chunk)), Bin),
              embed(Beam, Bin)
      end, Chunks).

%% edoc lists internal functions too (with no doc): h(ferrotrace, calls_with) would show
%% them. Keep the functions the beam exports (and every type).
exported_only(Beam, Raw) ->
    case beam_lib:chunks(Beam, [exports]) of
        {ok, {_, [{exports, Exports}]}} ->
            Docs = binary_to_term(Raw),
            Entries = element(7, Docs),
            Kept = [E || E = {{Kind, F, A}, _, _, _, _} <- Entries,
                         Kind =/= function orelse lists:member({F, A}, Exports)],
            term_to_binary(setelement(7, Docs, Kept), [compressed]);
        _ ->
            Raw
    end.

%% Written even when unchanged: its time says the docs are as new as the source.
write_chunk(File, Bin) ->
    file:write_file(File, Bin).

embed(Beam, Docs) ->
    case beam_lib:all_chunks(Beam) of
        {ok, _, Chunks} ->
            case lists:keyfind("Docs", 1, Chunks) of
                {"Docs", Docs} ->
                    ok;
                _ ->
                    {ok, New} = beam_lib:build_module(lists:keystore("Docs", 1, Chunks,
                                                                      {"Docs", Docs})),
                    ok = file:write_file(Beam, New)
            end;
        {error, beam_lib, _} ->
            ok   % no beam for this module here (not compiled into this copy)
    end.

tmp_dir() ->
    case os:getenv("TMPDIR") of
        false -> "/tmp";
        "" -> "/tmp";
        Dir -> Dir
    end.
