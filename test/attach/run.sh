#!/bin/bash
# The attach test: the bundle (`make bundle`) against a release built WITHOUT ferrotrace.
#
# Builds examples/relapp as a relx release with ferrotrace taken out of its deps and release,
# boots it (`bin/relapp daemon`) with a cookie in a file that only root can read (mode 0400),
# and with `_build/bundle/ferrotrace ... --cookie-file F`:
#   1. refusals, one line each and nothing loaded: a wrong cookie, a node that is not there,
#      the cookie file read by another user, bundles whose meta says another architecture or
#      a glibc symbol version the node's C library lacks, a one-shot's mistyped function,
#      module or term (its "did you mean" from the node; no ferrotrace module loaded there);
#   2. one-shot `calls ... --for 2s` (its time from command to report printed), then --json,
#      --save twice and `compare` of the two files (no node), a json export refused,
#      then --keep (left loaded, with no client) and detach;
#      after each, the detach's findings say nothing is left, and this script checks
#      /proc/PID/maps and the temporary directories itself;
#   3. `attach` in a tmux pane: the node's code path as it was and the operator's nodes
#      hidden (nodes() has none of them); calls/2, report/1 in the remote shell; a second attach (a
#      one-shot while the shell holds it) reuses it and leaves it loaded; a bundle of another
#      version is refused; `ferrotrace detach` while the shell's session runs; then a new
#      shell left with Ctrl-G q unloads; one whose terminal is closed (the guard unloads);
#      `attach --keep` left with Ctrl-G q: its session stopped, ferrotrace left loaded, detached;
#   4. a node that has ferrotrace on its code path (as a release that has it): used as it is;
#   5. a node with long names, its epmd on another port (ERL_EPMD_PORT).
# Every wait is bounded; nodes, tmux and the temporary directory are removed on exit.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/ftattach.XXXXXX")
app=$work/relapp
rel=$app/_build/default/rel/relapp
node=ftatt$$
host=$(hostname -s)
full=$node@$host
test_name=test-attach
tmux_sock=ferrotrace-attach-$$
tmux_target=a
bundle=$repo/_build/bundle/ferrotrace
started=$SECONDS

# shellcheck source=test/support/lib.sh
. "$repo/test/support/lib.sh"

cleanup() {
    local status=$?
    tmux -L "$tmux_sock" kill-server 2>/dev/null || true
    tmux -L "$tmux_sock-2" kill-server 2>/dev/null || true
    tmux -L "$tmux_sock-3" kill-server 2>/dev/null || true
    tmux -L "ferrotrace-attach-$$-keep" kill-server 2>/dev/null || true
    if [ -x "$rel/bin/relapp" ]; then timeout 20 "$rel/bin/relapp" stop >/dev/null 2>&1 || true; fi
    if [ -s "$work/plain.pid" ]; then kill "$(cat "$work/plain.pid")" 2>/dev/null || true; fi
    if [ -s "$work/long.pid" ]; then
        kill "$(cat "$work/long.pid")" 2>/dev/null || true
        for _ in $(seq 20); do epmd -port "$epmd_port" -kill >/dev/null 2>&1 && break; sleep 0.2; done
    fi
    rm -rf "$work"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

need tmux tmux
[ -x "$bundle" ] || fail "no $bundle: run make bundle"

# --- the release without ferrotrace -------------------------------------------------------
cp -r "$repo/examples/relapp" "$app"
sed -i 's/{deps, \[ferrotrace\]}./{deps, []}./; s/\[relapp, ferrotrace\]/[relapp]/' "$app/rebar.config"
(cd "$app" && timeout 300 rebar3 release) >"$work/build.log" 2>&1 || { cat "$work/build.log" >&2; fail "rebar3 release"; }
ls "$rel"/lib | grep -q '^ferrotrace' && fail "the release has ferrotrace in lib/"
cookie=ferrotrace_attach_test_$$
sed -i "s/^-sname .*/-sname $node/; s/^-setcookie .*/-setcookie $cookie/" "$rel/releases/0.1.0/vm.args"
printf '%s\n' "$cookie" >"$work/cookie"
chmod 0400 "$work/cookie"
[ "$(id -u)" = 0 ] && chown root:root "$work/cookie"
ft() { timeout 60 "$bundle" "$@" --cookie-file "$work/cookie"; }
"$rel/bin/relapp" daemon >/dev/null || fail "bin/relapp daemon"
for _ in $(seq 60); do [ "$(timeout 10 "$rel/bin/relapp" ping 2>/dev/null)" = pong ] && break; sleep 0.5; done
pid=$(timeout 10 "$rel/bin/relapp" pid) || fail "the release did not start"
say "release without ferrotrace up: $full (pid $pid), cookie file mode $(stat -c '%a %U' "$work/cookie")"
evs() { timeout 30 "$rel/bin/relapp" eval "$1" | tr -d ' \n'; } # an expression's value on the node, no blanks
code_path=$(evs 'erlang:phash2(code:get_path()).')

# nothing_left WHAT: the detach's findings said so, and the node's maps and temp dirs agree
nothing_left() {
    grep -q "^nothing of ferrotrace left on $full" "$work/out" || { cat "$work/out" >&2; fail "$1: no 'nothing left' line"; }
    grep -q 'libferrotrace_nif' "/proc/$pid/maps" && fail "$1: libferrotrace_nif still mapped"
    ls -d /tmp/ferrotrace-nif-* /dev/shm/ferrotrace-nif-* /var/tmp/ferrotrace-nif-* 2>/dev/null | grep -q . \
        && fail "$1: a ferrotrace-nif-* directory is left"
    say "$1: findings:"
    grep -E '^  (modules|processes|trace|library|files|tables) ' "$work/out" | sed 's/^/    /'
}
one_line_refusal() { # WHAT OUTPUT-FILE
    [ "$(wc -l <"$2")" = 1 ] && grep -q '^ferrotrace: ' "$2" || { cat "$2" >&2; fail "$1: expected one line"; }
    say "$1: $(cat "$2")"
}

# --- 1. refusals --------------------------------------------------------------------------
if timeout 60 "$bundle" status "$full" --cookie wrong >"$work/err" 2>&1; then fail "a wrong cookie was accepted"; fi
one_line_refusal "wrong cookie" "$work/err"
if ft status "nosuch$$@$host" >"$work/err" 2>&1; then fail "a missing node was accepted"; fi
one_line_refusal "no such node" "$work/err"
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
    cp "$bundle" "$work/ferrotrace" && chmod 755 "$work" "$work/ferrotrace"
    if setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$work" "$work/ferrotrace" status "$full" \
        --cookie-file "$work/cookie" >"$work/err" 2>&1; then fail "another user read the cookie file"; fi
    one_line_refusal "cookie file read as nobody" "$work/err"
fi
# A bundle whose NIF would need another machine: its meta changed, the rest as built.
variant() { # variant FILE KEY VALUE: a copy of the bundle with bundle.meta's KEY set to VALUE
    erl -noshell -eval '
        [Out, Key, Value] = init:get_plain_arguments(),
        {ok, Sections} = escript:extract("'"$bundle"'", []),
        {archive, Zip} = lists:keyfind(archive, 1, Sections),
        {ok, Files} = zip:extract(Zip, [memory]),
        Meta = binary_to_term(element(2, lists:keyfind("ferrotrace/bundle.meta", 1, Files))),
        V = case Key of "glibc_needs" -> maps:get(glibc_needs, Meta) ++ [Value]; _ -> Value end,
        New = lists:keystore("ferrotrace/bundle.meta", 1, Files,
                             {"ferrotrace/bundle.meta", term_to_binary(Meta#{list_to_atom(Key) => V})}),
        ok = escript:create(Out, [shebang, {emu_args, "+Bi -noinput -escript main ferrotrace_attach"}, {archive, New, []}]),
        halt().' -extra "$@"
    chmod 755 "$1"
}
variant "$work/arm" system_architecture aarch64-unknown-linux-gnu
variant "$work/newlibc" glibc_needs GLIBC_9.99
for v in arm newlibc; do
    if timeout 60 "$work/$v" calls "$full" relapp_work:handle/1 --for 1s --cookie-file "$work/cookie" >"$work/err" 2>&1; then
        fail "a bundle for $v was loaded"
    fi
    one_line_refusal "bundle for $v" "$work/err"
    ft status "$full" >"$work/out" 2>&1
    grep -q "ferrotrace is not loaded" "$work/out" || fail "$v: left something loaded: $(cat "$work/out")"
done
# A one-shot with a mistyped function, module or term: refused in one line with the nearest
# name there, checked over plain rpc before anything is loaded (the node's own module list
# says so, and no detach line was printed).
ft_modules() { evs '[M || M <- erlang:loaded(), lists:prefix("ferrotrace", atom_to_list(M))].'; }
for typo in 'relapp_work:handel/1|did you mean relapp_work:handle/1?' \
            'relapp_wrok:handle/1|did you mean relapp_work?' \
            '{relapp_work, handle, 1|not an Erlang term'; do
    spec=${typo%%|*} expect=${typo#*|}
    if ft calls "$full" "$spec" --for 2s >"$work/err" 2>&1; then fail "one-shot of $spec was accepted"; fi
    one_line_refusal "one-shot of $spec" "$work/err"
    grep -qF "$expect" "$work/err" || fail "one-shot of $spec: no '$expect' in $(cat "$work/err")"
    [ "$(ft_modules)" = "[]" ] || fail "one-shot of $spec: loaded $(ft_modules)"
done
ft status "$full" >"$work/out" 2>&1
grep -q "ferrotrace is not loaded" "$work/out" || fail "status before attaching: $(cat "$work/out")"

# --- 2. one-shot --------------------------------------------------------------------------
t0=$(date +%s%N)
ft calls "$full" relapp_work:handle/1 --for 2s >"$work/out" 2>&1 || { cat "$work/out" >&2; fail "one-shot calls"; }
t1=$(date +%s%N)
count=$(awk '/^relapp_work:handle\/1 +[0-9]+ / {print $2; exit}' "$work/out")
((${count:-0} > 100)) || { cat "$work/out" >&2; fail "one-shot: relapp_work:handle/1 counted ${count:-no} calls in 2 s"; }
say "one-shot calls --for 2s: $count calls, command to report in $(( (t1 - t0) / 1000000 )) ms"
nothing_left "one-shot"
ft calls "$full" '{relapp_work, handle, 1}' --for 500ms --json --options '#{slowest => 3}' >"$work/json" 2>"$work/out" \
    || { cat "$work/out" >&2; fail "one-shot --json"; }
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["calls"][0]["count"] > 0, d' "$work/json" \
    || fail "--json: not a summary with calls"
nothing_left "one-shot --json"
# --pids: a scope named on the command line (issue 59), and its typo refused with the near name.
ft calls "$full" relapp_work:handle/1 --for 500ms --pids '{children, relapp_sup}' >"$work/out" 2>&1 \
    || { cat "$work/out" >&2; fail "one-shot --pids"; }
grep -q "^processes: {children,relapp_sup} and what they spawn, 2 at the start" "$work/out" \
    || { cat "$work/out" >&2; fail "--pids: the report does not state the scope"; }
count=$(awk '/^relapp_work:handle\/1 +[0-9]+ / {print $2; exit}' "$work/out")
((${count:-0} > 10)) || { cat "$work/out" >&2; fail "--pids: handle/1 counted ${count:-no} calls"; }
nothing_left "one-shot --pids"
if ft calls "$full" relapp_work:handle/1 --for 500ms --pids relapp_supp >"$work/err" 2>&1; then fail "--pids relapp_supp accepted"; fi
grep -q "did you mean relapp_sup" "$work/err" || { cat "$work/err" >&2; fail "--pids typo: no hint"; }
say "one-shot --pids '{children, relapp_sup}': $count calls"
# Checked on the node (its processes), so after the load: refused in one line, then unloaded.
grep -q '^ferrotrace: calls: bad option: {pids,relapp_supp,...} relapp_supp is not a registered name' "$work/err" \
    || { cat "$work/err" >&2; fail "--pids typo: not refused in words"; }
say "one-shot --pids relapp_supp: $(grep '^ferrotrace: calls' "$work/err")"
nothing_left "one-shot --pids relapp_supp"
# --save, twice, then compare the two files here, with no node: the bundle's own beams.
for f in before after; do
    ft calls "$full" relapp_work:handle/1 --for 500ms --save "$work/$f.json" >"$work/out" 2>&1 \
        || { cat "$work/out" >&2; fail "one-shot --save"; }
    nothing_left "one-shot --save $f.json"
done
timeout 60 "$bundle" compare "$work/before.json" "$work/after.json" --collapsed "$work/diff.folded" >"$work/out" 2>&1 \
    || { cat "$work/out" >&2; fail "compare of two saved files"; }
grep -Eq '^relapp_work:handle/1 +[0-9.]+[mun]?s->[0-9.]+[mun]?s ' "$work/out" || { cat "$work/out" >&2; fail "compare: no row for handle/1"; }
grep -q '^relapp_work:handle/1 [0-9]* [0-9]*$' "$work/diff.folded" || { cat "$work/diff.folded" >&2; fail "compare --collapsed"; }
say "compare before.json after.json, no node: $(grep '^relapp_work:handle/1' "$work/out")"
if timeout 60 "$bundle" compare "$work/before.json" "$work/json" >"$work/err" 2>&1; then fail "a json export compared as a saved session"; fi
one_line_refusal "compare of a json export" "$work/err"
ft calls "$full" relapp_work:handle/1 --for 200ms --keep >"$work/out" 2>&1 || { cat "$work/out" >&2; fail "--keep"; }
ft status "$full" >"$work/out" 2>&1
grep -q "attached (0 clients holding it)" "$work/out" || fail "--keep: $(cat "$work/out")"
ft detach "$full" >"$work/out" 2>&1 || { cat "$work/out" >&2; fail "detach after --keep"; }
nothing_left "--keep, then detach"

# --- 3. the remote shell ------------------------------------------------------------------
open_shell() { # open_shell [--keep]
    tmux -L "$tmux_sock" new-session -d -s a -x 200 -y 60 "$bundle attach $full --cookie-file $work/cookie ${1:-}; sleep 60"
    wait_for "\\($full\\)1> " 30 "the attach's remote shell prompt"
    # The cookie reached the shell's node through a private HOME, gone once it was read.
    for _ in $(seq 50); do ls -d "${TMPDIR:-/tmp}"/ferrotrace-home-* >/dev/null 2>&1 || return 0; sleep 0.1; done
    fail "a ferrotrace-home-* directory (the shell's cookie) is still there: $(ls -d "${TMPDIR:-/tmp}"/ferrotrace-home-*)"
}
open_shell
# While attached: the node's code path as it was; the escript's and the shell's nodes hidden.
[ "$(evs 'erlang:phash2(code:get_path()).')" = "$code_path" ] || fail "the code path changed while attached"
seen=$(evs '{[N || N <- nodes(), lists:prefix("ferrotrace", atom_to_list(N))], [N || N <- nodes(hidden), lists:prefix("ferrotrace", atom_to_list(N))]}.')
[[ $seen == '{[],['*ferrotrace_sh_*']}' ]] || fail "attached: expected only hidden ferrotrace nodes ({visible, hidden}): $seen"
say "while attached: code path unchanged, the operator's nodes hidden: $seen"
ft calls "$full" relapp_work:loop/1 --for 500ms >"$work/out" 2>&1 || { cat "$work/out" >&2; fail "a second attach"; }
grep -q "is attached to $full already: using it" "$work/out" || fail "second attach: $(cat "$work/out")"
grep -q "stays on $full: other clients hold it (1)" "$work/out" || fail "second attach: $(cat "$work/out")"
ft status "$full" >"$work/out" 2>&1
grep -q "attached (1 client holding it)" "$work/out" && grep -q "no sessions" "$work/out" \
    || fail "status after the second attach: $(cat "$work/out")"
say "second attach: reused it, left it loaded for the shell"
(cd "$repo" && escript attach/bundle.escript 0.0.0-other "$work/other" >/dev/null)
if timeout 60 "$work/other" status "$full" --cookie-file "$work/cookie" >/dev/null 2>&1 \
    && timeout 60 "$work/other" calls "$full" relapp_work:handle/1 --for 1s --cookie-file "$work/cookie" >"$work/err" 2>&1; then
    fail "a bundle of another version loaded over the attached one"
fi
one_line_refusal "another version" "$work/err"
type_line '{ok, S} = ferrotrace:calls("relapp_work:handle/1", #{duration => 60000}).'
wait_for '\{ok,[0-9]+\}' 15 "calls/2 in the attached shell"
sleep 1
type_line 'ferrotrace:report(S).'
wait_for '^relapp_work:handle/1 +[0-9]+ ' 15 "report/1 in the attached shell"
say "attach: calls/2 and report/1 in the remote shell"
ft detach "$full" >"$work/out" 2>&1 || { cat "$work/out" >&2; fail "detach while a session runs"; }
grep -q "1 session released" "$work/out" || fail "detach: $(cat "$work/out")"
nothing_left "detach while the shell's session runs"
tmux -L "$tmux_sock" send-keys -t a C-g
wait_for 'User switch command' 10 "Ctrl-G"
type_line q
wait_for 'detached from .* meanwhile' 15 "the shell's exit after a detach"
# A server of its own for the next shell: kill-server returns before the old one is gone,
# and a new-session on the same socket then meets a server that is exiting.
tmux -L "$tmux_sock" kill-server
tmux_sock=$tmux_sock-2
open_shell
type_line '{ok, S} = ferrotrace:calls("relapp_work:handle/1", #{duration => 60000}).'
wait_for '\{ok,[0-9]+\}' 15 "calls/2 in a new attached shell"
tmux -L "$tmux_sock" send-keys -t a C-g
wait_for 'User switch command' 10 "Ctrl-G"
type_line q
wait_for "^nothing of ferrotrace left on $full" 30 "detach when the shell is left"
pane >"$work/out"
nothing_left "Ctrl-G q in the attached shell"
# The terminal closed under an attached shell: the escript dies, the guard on the node unloads.
tmux -L "$tmux_sock" kill-server
tmux_sock=$tmux_sock-3
open_shell
tmux -L "$tmux_sock" kill-server
for _ in $(seq 100); do ft status "$full" 2>&1 | grep -q "ferrotrace is not loaded" && break; sleep 0.2; done
ft detach "$full" >"$work/out" 2>&1 || { cat "$work/out" >&2; fail "after a closed terminal"; }
grep -q "ferrotrace is not loaded; nothing to detach" "$work/out" || fail "closed terminal: still loaded: $(cat "$work/out")"
nothing_left "a closed terminal (the guard unloaded)"
for _ in $(seq 50); do pgrep -f -- "-remsh $full" >/dev/null || break; sleep 0.2; done
pgrep -af -- "-remsh $full" && fail "the remote shell's erl outlived its closed terminal"
# attach --keep: the shell's session stops when the shell is left; ferrotrace stays, unheld.
tmux_sock=ferrotrace-attach-$$-keep
open_shell --keep
type_line '{ok, S} = ferrotrace:calls("relapp_work:handle/1", #{duration => 60000}).'
wait_for '\{ok,[0-9]+\}' 15 "calls/2 in an attach --keep shell"
tmux -L "$tmux_sock" send-keys -t a C-g
wait_for 'User switch command' 10 "Ctrl-G"
type_line q
wait_for "stays loaded on $full \\(--keep\\)" 30 "leaving an attach --keep shell"
tmux -L "$tmux_sock" kill-server
# Stopped as a release's remote shell stops them (its figures kept until released).
for _ in $(seq 50); do ft status "$full" >"$work/out" 2>&1; grep -q "^  session .*: stopped, " "$work/out" && break; sleep 0.2; done
grep -q "attached (0 clients holding it)" "$work/out" && grep -q "^  session .*: stopped, " "$work/out" \
    && ! grep -q "^  session .*: running" "$work/out" || fail "attach --keep, left: $(cat "$work/out")"
say "attach --keep, left with Ctrl-G q: $(grep -c '^  session' "$work/out") session, stopped; ferrotrace still loaded, held by no client"
ft detach "$full" >"$work/out" 2>&1 || { cat "$work/out" >&2; fail "detach after attach --keep"; }
nothing_left "attach --keep, then detach"

# --- 4. a node that has ferrotrace --------------------------------------------------------
erl -sname "fthas$$" -setcookie "$cookie" -pa "$repo/_build/default/lib/ferrotrace/ebin" -noshell \
    >"$work/plain.log" 2>&1 </dev/null &
echo $! >"$work/plain.pid"
for _ in $(seq 60); do ft status "fthas$$@$host" >/dev/null 2>&1 && break; sleep 0.5; done
ft calls "fthas$$@$host" lists:seq/2 --for 200ms >"$work/out" 2>&1 || { cat "$work/out" >&2; fail "calls on a node with ferrotrace"; }
grep -q "part of fthas$$@$host's release" "$work/out" || fail "node with ferrotrace: $(cat "$work/out")"
ft status "fthas$$@$host" >"$work/out" 2>&1
grep -q "part of the node's release" "$work/out" || fail "it was unloaded: $(cat "$work/out")"
say "a node with ferrotrace on its path: used as it is, left loaded"

# --- 5. long names and an epmd on another port ----------------------------------------------
epmd_port=$((20000 + $$ % 20000))
ERL_EPMD_PORT=$epmd_port erl -name "ftlong$$@127.0.0.1" -setcookie "$cookie" -noshell \
    -eval 'spawn(fun L() -> _ = lists:seq(1, 10), timer:sleep(1), L() end).' >"$work/long.log" 2>&1 </dev/null &
echo $! >"$work/long.pid"
for _ in $(seq 60); do ERL_EPMD_PORT=$epmd_port ft status "ftlong$$@127.0.0.1" >/dev/null 2>&1 && break; sleep 0.5; done
ERL_EPMD_PORT=$epmd_port ft calls "ftlong$$@127.0.0.1" lists:seq/2 --for 300ms >"$work/out" 2>&1 \
    || { cat "$work/out" >&2; fail "long names with ERL_EPMD_PORT=$epmd_port"; }
grep -q '^lists:seq/2 ' "$work/out" && grep -q "^nothing of ferrotrace left on ftlong$$@127.0.0.1" "$work/out" \
    || fail "long names: $(cat "$work/out")"
[ "$(wc -l <"$work/out")" -lt 60 ] && ! grep -q 'REPORT' "$work/out" || fail "long names: log reports printed: $(cat "$work/out")"
say "long names, epmd on port $epmd_port: one-shot and detach, nothing left"
say "passed in $((SECONDS - started)) s"
