#!/bin/bash
# The live view in a real terminal: ferrotrace:watch/2 typed in a remote shell (erl -remsh)
# inside an 80-column tmux pane must render without wrapping.
#
# 1. starts a named node running a small workload (ft_test_target:call_f/1 in a loop) and a
#    session named `wtty` tracing ft_test_target:f/1 (owner => none, bounded by duration);
# 2. attaches `erl -remsh` to it in a tmux pane 80 columns wide and types
#    `ferrotrace:watch(wtty, #{count => 2, interval => 500}).`;
# 3. captures the pane with wrapped lines joined (capture-pane -J) and checks: two screens
#    (#1 and #2) with a row for ft_test_target:f/1, the call returned ok, and no line that
#    watch printed is longer than 80 columns (a wrapped line is joined into a longer one)
#    or has a character outside printable ASCII;
# 4. types an endless watch, interrupts it as an operator does (Ctrl-G, i, c): no screen
#    after that, and the session still runs.
#
# Every wait is bounded; the node, the tmux server and the temporary directory are removed
# on exit. Needs `rebar3 compile` first (make test-watch-tty does it). About 5 s.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
# Not named ferrotrace-*: on the code path, code:priv_dir(ferrotrace) would take it for the
# application's directory (name-version) and the NIF would not load.
work=$(mktemp -d "${TMPDIR:-/tmp}/ftwatch.XXXXXX")
export ERL_CRASH_DUMP=$work/erl_crash.dump
node=fw$$
cookie=ferrotrace_watch_$$
test_name=test-watch-tty
tmux_sock=ferrotrace-watch-$$
tmux_target=w
host=$(hostname -s)
width=80
started=$SECONDS

# shellcheck source=test/support/lib.sh
. "$repo/test/support/lib.sh"
cleanup() {
    local status=$?
    tmux -L "$tmux_sock" kill-server 2>/dev/null || true
    if [ -s "$work/node.pid" ]; then
        local pid
        pid=$(cat "$work/node.pid")
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
    fi
    rm -rf "$work"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

need tmux tmux
ebin=$repo/_build/default/lib/ferrotrace/ebin
[ -f "$ebin/ferrotrace.beam" ] || fail "no $ebin/ferrotrace.beam: run rebar3 compile first"
erlc -o "$work" "$repo/test/support/ft_test_target.erl" || fail "erlc ft_test_target.erl"

# --- 1. the node and its workload ---------------------------------------------------------
erl -sname "$node" -setcookie "$cookie" -pa "$ebin" -pa "$work" -noshell -eval "
    {module, _} = code:ensure_loaded(ft_test_target),
    spawn(fun Loop() -> ok = ft_test_target:call_f(20), timer:sleep(5), Loop() end),
    {ok, _} = ferrotrace:calls({ft_test_target, f, 1},
                               #{name => wtty, owner => none, duration => 120000}),
    file:write_file(\"$work/ready\", <<\"ready\">>)." >"$work/node.log" 2>&1 </dev/null &
echo $! >"$work/node.pid"
deadline=$((SECONDS + 30))
until [ -f "$work/ready" ]; do
    ((SECONDS < deadline)) || { cat "$work/node.log" >&2; fail "the node did not start its session within 30 s"; }
    sleep 0.1
done
say "node $node@$host traces ft_test_target:f/1 in session wtty"

# --- 2. the remote shell in an 80-column pane ---------------------------------------------
tmux -L "$tmux_sock" new-session -d -s w -x "$width" -y 60 \
    "erl -sname sh$node -setcookie $cookie -remsh $node@$host"
wait_for "\\($node@$host\\)1> " 30 "remote shell prompt"
[ "$(tmux -L "$tmux_sock" display -p -t w '#{pane_width}')" = "$width" ] || fail "the pane is not $width columns wide"
tmux -L "$tmux_sock" send-keys -t w -l 'ferrotrace:watch(wtty, #{count => 2, interval => 500}).'
tmux -L "$tmux_sock" send-keys -t w Enter
wait_for "\\($node@$host\\)2> " 15 "watch/2 returning"

# --- 3. what the terminal shows -----------------------------------------------------------
text=$(pane)
grep -q '^ferrotrace watch #1 ' <<<"$text" || fail "no screen #1"
grep -q '^ferrotrace watch #2 ' <<<"$text" || fail "no screen #2"
grep -q '^ferrotrace watch #3 ' <<<"$text" && fail "a screen #3 after count => 2"
rows=$(grep -Ec '^ft_test_target:f/1 +[0-9]+ ' <<<"$text") || true
[ "$rows" = 2 ] || fail "expected 2 rows for ft_test_target:f/1, got ${rows:-0}"
grep -q '^ok$' <<<"$text" || fail "watch/2 did not return ok"
# What watch/2 printed: from its first screen to the shell's `ok' (the banner above is
# the shell's own and wraps at 80 columns).
out=$(sed -n '/^ferrotrace watch #1 /,/^ok$/p' <<<"$text")
[ "$(wc -l <<<"$out")" -ge 7 ] || fail "expected 2 screens of 3 lines and ok, got: $out"
long=$(awk -v w="$width" 'length($0) > w' <<<"$out")
[ -z "$long" ] || fail "lines longer than $width columns (wrapped): $long"
if LC_ALL=C grep -q '[^ -~]' <<<"$out"; then fail "non-ASCII characters in watch's output"; fi
say "2 screens, every line within $width columns, ASCII only"

# --- 4. the operator interrupts a watch without a count: Ctrl-G, i, c ---------------------
tmux -L "$tmux_sock" send-keys -t w -l 'ferrotrace:watch(wtty, #{interval => 200}).'
tmux -L "$tmux_sock" send-keys -t w Enter
wait_for '^ferrotrace watch #3 ' 15 "an endless watch"
tmux -L "$tmux_sock" send-keys -t w C-g
wait_for 'User switch command' 10 "Ctrl-G"
tmux -L "$tmux_sock" send-keys -t w i Enter
sleep 0.3
tmux -L "$tmux_sock" send-keys -t w c Enter
wait_for "\\($node@$host\\)[0-9]+> \$" 15 "the shell back after Ctrl-G i c"
screens=$(pane | grep -c '^ferrotrace watch #')
sleep 1
[ "$(pane | grep -c '^ferrotrace watch #')" = "$screens" ] || fail "screens still printed after the interrupt"
tmux -L "$tmux_sock" send-keys -t w -l 'maps:get(status, ferrotrace:summary(wtty)).'
tmux -L "$tmux_sock" send-keys -t w Enter
wait_for '^running$' 10 "the session after the interrupt"
say "Ctrl-G i c ended the watch; the session runs on ($((SECONDS - started)) s)"
