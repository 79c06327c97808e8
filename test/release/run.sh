#!/bin/bash
# The release test: ferrotrace used the way the README tells users to.
#
# Builds a throwaway relx release of examples/relapp, which depends on ferrotrace as
# `{deps, [ferrotrace]}` with a copy of this working tree in `_checkouts/ferrotrace`, and
# lists ferrotrace in its relx release. Then, against that release:
#   1. the build printed the NIF build line and no "Source code not found" warning, also in
#      dev mode; the .so is in the release's lib/ferrotrace-*/priv;
#   2. boots it with `bin/relapp daemon`, attaches with `bin/relapp remote_console` inside a
#      tmux pane, types calls/2, report/1 and stop/1, and checks the printed report;
#   3. starts a session in a remote shell and leaves the shell as an operator does (Ctrl-G q,
#      then, in a second shell, closing the terminal): the session must be stopped and its
#      trace pattern gone (checked with `bin/relapp eval`);
#   4. scripted use: `bin/relapp eval` creates a session with no `owner` (eval's caller is
#      not a shell: the session has none) bounded by `duration`; it outlives the eval and
#      collects calls, stops by itself, and a later `eval` writes `ferrotrace:format/1` to a
#      file; `duration => infinity` without an owner is refused.
#
# Every wait is bounded; the node, the tmux server and the temporary directory are cleaned up
# on exit (FERROTRACE_KEEP=1 keeps the directory). Cargo builds into the checkout's own
# target/, where the NIF `make compile' built is up to date for the copy (see
# test/elixir/run.sh): nothing is built twice.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/ferrotrace-release.XXXXXX")
app=$work/relapp
rel=$app/_build/default/rel/relapp
node=ftrel$$
test_name=test-release
tmux_sock=ferrotrace-release-$$
tmux_target=rel
started=$SECONDS

# shellcheck source=test/support/lib.sh
. "$repo/test/support/lib.sh"

cleanup() {
    local status=$?
    tmux -L "$tmux_sock" kill-server 2>/dev/null || true
    if [ -x "$rel/bin/relapp" ]; then
        local pid
        pid=$(timeout 10 "$rel/bin/relapp" pid 2>/dev/null) || pid=
        timeout 20 "$rel/bin/relapp" stop >/dev/null 2>&1 || true
        if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -9 "$pid" 2>/dev/null || true; fi
    fi
    if [ -n "${FERROTRACE_KEEP:-}" ]; then say "kept $work"; else rm -rf "$work"; fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

command -v rebar3 >/dev/null || fail "rebar3 is missing (make setup installs it)"
need tmux tmux

# --- 1. build -----------------------------------------------------------------------------
cp -r "$repo/examples/relapp" "$app"
copy_tree "$repo" "$app/_checkouts/ferrotrace"
export CARGO_TARGET_DIR=$repo/target

build() { # build LOG [rebar3 release options]
    local log=$1; shift
    (cd "$app" && timeout 900 rebar3 release "$@") >"$log" 2>&1 \
        || { cat "$log" >&2; fail "rebar3 release $* failed"; }
    grep -q "ferrotrace: NIF built in" "$log" \
        || { cat "$log" >&2; fail "rebar3 release $*: no 'ferrotrace: NIF built in' line from native/build.sh"; }
    if grep -q "Source code not found" "$log"; then
        cat "$log" >&2; fail "rebar3 release $*: relx warned 'Source code not found'"
    fi
}
t=$SECONDS
build "$work/build-dev.log" --dev-mode true
say "dev-mode release built in $((SECONDS - t)) s; $(grep -o 'NIF built in [0-9]* s' "$work/build-dev.log")"
t=$SECONDS
build "$work/build.log"
say "release built in $((SECONDS - t)) s, no 'Source code not found' warning"

so=$(ls "$rel"/lib/ferrotrace-*/priv/libferrotrace_nif.so 2>/dev/null | head -1)
[ -n "$so" ] && [ -f "$so" ] && [ ! -L "$so" ] || fail "no libferrotrace_nif.so in $rel/lib/ferrotrace-*/priv"
say "NIF in the release: ${so#"$app"/}"

# A node name and cookie of our own: other checkouts may run this test at the same time.
sed -i "s/^-sname .*/-sname $node/; s/^-setcookie .*/-setcookie ferrotrace_release_test_$$/" \
    "$rel/releases/0.1.0/vm.args"

# --- 2. daemon + remote shell -------------------------------------------------------------
relapp() { timeout 30 "$rel/bin/relapp" "$@"; }
ev() { relapp eval "$1"; } # prints the value of an Erlang expression evaluated on the node
evs() { relapp eval "$1" | tr -d ' \n'; } # the same without blanks: {traced,false}

relapp daemon >/dev/null || fail "bin/relapp daemon failed"
for _ in $(seq 60); do
    [ "$(relapp ping 2>/dev/null)" = pong ] && break
    sleep 0.5
done
[ "$(relapp ping 2>/dev/null)" = pong ] || fail "the node did not answer ping within 30 s"
say "node $node is up"

open_shell() {
    tmux -L "$tmux_sock" new-session -d -s rel -x 220 -y 80 "$rel/bin/relapp remote_console"
    wait_for "\\($node@[^)]*\\)1> " 30 "remote_console prompt"
}
# wait_node EXPR EXPECTED SECONDS WHAT: until `eval EXPR` prints EXPECTED
wait_node() {
    local deadline=$((SECONDS + $3)) out=
    while ((SECONDS < deadline)); do
        out=$(evs "$1" 2>&1) || true
        [ "$out" = "$2" ] && return 0
        sleep 0.5
    done
    fail "$4: $1 gave '$out', expected '$2' (waited $3 s)"
}
mfa='{relapp_work, handle, 1}'
traced="erlang:trace_info($mfa, traced)."
# A session gone or stopped; its status as one word.
status_of() { echo "case ferrotrace:summary($1) of #{status := St} -> St; {error, _} -> gone end."; }

open_shell
say "remote_console attached through tmux"
type_line "{ok, S} = ferrotrace:calls($mfa, #{duration => 30000})."
wait_for '\{ok,[0-9]+\}' 15 "calls/2"
[ "$(evs "$traced")" = "{traced,local}" ] || fail "calls/2 did not set the trace pattern"
sleep 1.5
type_line "ferrotrace:report(S)."
wait_for '^relapp_work:handle/1 +[0-9]+ ' 15 "report/1"
count=$(pane | awk '/^relapp_work:handle\/1 +[0-9]+ / {print $2; exit}')
pane | grep -q '^ferrotrace session [0-9]*: running' || fail "report/1: no header line"
pane | grep -q 'relapp_work:handle/1  latency' || fail "report/1: no histogram"
((count > 100)) || fail "report/1 counted $count calls of relapp_work:handle/1 in 1.5 s (expected > 100)"
say "report/1 printed in the remote shell: relapp_work:handle/1 called $count times"
type_line "ferrotrace:stop(S)."
wait_node "$traced" "{traced,false}" 10 "stop/1"
type_line "io:format(\"status=~p~n\", [maps:get(status, ferrotrace:summary(S))])."
wait_for '^status=stopped' 10 "summary/1 after stop/1"
say "stop/1: session stopped, trace pattern removed"

# --- 3. leaving the remote shell during a session -----------------------------------------
# leave_check HOW: a session started in the shell, HOW leaves, then the node is checked.
session_in_shell() {
    type_line "{ok, S2} = ferrotrace:calls($mfa, #{duration => 60000}), io:format(\"id=~p~n\", [S2])."
    wait_for '^id=[0-9]+' 15 "calls/2 in a new shell"
    sid=$(pane | sed -n 's/^id=\([0-9][0-9]*\).*/\1/p' | tail -1)
    [ "$(evs "$traced")" = "{traced,local}" ] || fail "calls/2 did not set the trace pattern"
    [ "$(evs "$(status_of "$sid")")" = running ] || fail "session $sid is not running"
}
shell_gone() {
    local deadline=$((SECONDS + 15))
    while ((SECONDS < deadline)); do
        tmux -L "$tmux_sock" has-session -t rel 2>/dev/null || return 0
        sleep 0.2
    done
    fail "$1: the remote shell is still there after 15 s"
}
after_leaving() {
    wait_node "$traced" "{traced,false}" 15 "$1"
    local st
    st=$(evs "$(status_of "$sid")")
    case $st in stopped | gone) ;; *) fail "$1: session $sid is '$st', expected stopped or gone";; esac
    [ "$(evs 'erlang:is_alive().')" = true ] || fail "$1: the node went down"
    say "$1: session $sid $st, trace pattern removed, node still up"
}

session_in_shell
tmux -L "$tmux_sock" send-keys -t rel C-g
wait_for 'User switch command' 10 "Ctrl-G"
type_line "q"
shell_gone "Ctrl-G q"
after_leaving "Ctrl-G q"

open_shell
session_in_shell
tmux -L "$tmux_sock" kill-session -t rel # the operator closes the terminal: SIGHUP
shell_gone "closing the terminal"
after_leaving "closing the terminal"

# --- 4. scripted: bin/relapp eval ---------------------------------------------------------
out=$(evs "ferrotrace:calls($mfa, #{duration => infinity}).")
case $out in
    "{error,{bad_option,{duration,infinity,"*) ;;
    *) fail "eval: calls/2 with duration => infinity and no owner answered $out" ;;
esac
# The same refusal through explain/1: the hint as text (a string), not #Bin<...>.
out=$(ev "ferrotrace:explain(ferrotrace:calls($mfa, #{duration => infinity})).")
case $out in
    *'"bad option: {duration,infinity,...}"'*'"  a finite duration'*) ;;
    *) fail "eval: explain/1 of the refusal printed $out" ;;
esac
out=$(evs "ferrotrace:calls($mfa, #{duration => 3000}).")
case $out in
    "{ok,"*) sid=$(echo "$out" | sed 's/[^0-9]//g') ;;
    *) fail "eval: ferrotrace:calls/2 answered $out" ;;
esac
sleep 1
[ "$(evs "$(status_of "$sid")")" = running ] \
    || fail "eval: session $sid (no owner) did not outlive the eval that created it"
[ "$(evs "case {[O || #{id := $sid, owner := O} <- ferrotrace:list()], ferrotrace:summary($sid)} of {[none], #{calls := [#{count := C}]}} -> C > 100; Other -> Other end.")" = true ] \
    || fail "eval: session $sid has an owner or counted no calls a second after the eval"
wait_node "$(status_of "$sid")" stopped 10 "eval: duration 3000"
[ "$(evs "maps:get(stop_reason, ferrotrace:summary($sid)).")" = duration ] \
    || fail "eval: session $sid was not stopped by its duration"
wait_node "$traced" "{traced,false}" 10 "eval: after the duration"
# eval prints its value with erl_call's printer: a binary comes out as #Bin<102,101,...>,
# so the README has the node write the text to a file (the node runs on this host).
[ "$(evs "file:write_file(\"$work/report.txt\", ferrotrace:format($sid)).")" = ok ] \
    || fail "eval: file:write_file/2 of ferrotrace:format/1"
grep -Eq '^relapp_work:handle/1 +[0-9]+ ' "$work/report.txt" \
    || fail "eval: ferrotrace:format/1 gave: $(cat "$work/report.txt")"
[ "$(evs "ferrotrace:release($sid).")" = ok ] || fail "eval: release/1"
say "bin/relapp eval: a session with no owner ran 3 s, stopped by itself, format/1 read back; infinity refused, explain/1 readable"

say "passed in $((SECONDS - started)) s"
