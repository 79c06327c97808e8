#!/bin/sh
# The attach bundle on a newer OTP, run INSIDE a test-otp chroot by test/otp/run.sh:
#   sh attach.sh RELEASE       (cwd holds bundle-ferrotrace, built on the host by make bundle)
# The bundle runs under this chroot's escript against a node of this OTP that has no
# ferrotrace (its code path and cwd hold none), on an epmd of its own (ERL_EPMD_PORT, so the
# host's epmd and its nodes are never touched):
#   1. one-shot `calls NODE lists:seq/2 --for 1s`: the report, then detach's findings;
#   2. `attach NODE` on a pty (util-linux's `script`, /dev/pts bound by run.sh): calls/2 and
#      report/1 typed in the remote shell, Ctrl-G q, detach's findings;
#   3. `status NODE`: not loaded.
# Every wait returns as soon as its text shows and gives up after a generous bound. The
# node, the shell and the epmd are ended and waited for before it returns (run.sh then
# unmounts /dev).
set -u
release=$1
b=./bundle-ferrotrace
port=$((20000 + $$ % 20000))
export ERL_EPMD_PORT=$port
target=
shell=
t0=$(date +%s)

say() { echo "test-otp: $release: attach: $*"; }
fail() {
    say "FAILED: $1"
    [ -z "${2:-}" ] || sed 's/^/    /' "$2"
    exit 1
}
# wait_for REGEX FILE SECONDS: until FILE has a line matching REGEX (extended grep).
wait_for() {
    i=0
    while [ "$i" -lt $(($3 * 10)) ]; do
        grep -Eq -- "$1" "$2" 2>/dev/null && return 0
        sleep 0.1
        i=$((i + 1))
    done
    return 1
}
finish() {
    status=$?
    exec 3>&- 2>/dev/null
    for p in $shell $target; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    i=0
    while [ "$i" -lt 50 ] && ! epmd -kill >/dev/null 2>&1; do sleep 0.2; i=$((i + 1)); done
    exit "$status"
}
trap finish EXIT
trap 'exit 130' INT TERM

mkdir -p /tmp/ftotp
(cd /tmp/ftotp && exec erl -sname ftotp -setcookie ftotp -noshell \
    -eval 'spawn(fun L() -> _ = lists:seq(1, 10), timer:sleep(1), L() end).' >/dev/null 2>&1 </dev/null) &
target=$!
i=0
until $b status ftotp --cookie ftotp >out 2>&1; do
    i=$((i + 1))
    [ "$i" -lt 120 ] || fail "the node ftotp did not answer status within 60 s" out
    sleep 0.5
done
grep -q 'ferrotrace is not loaded' out || fail "status before attaching" out

# 1. one-shot
$b calls ftotp lists:seq/2 --for 1s --cookie ftotp >out 2>&1 || fail "one-shot calls" out
grep -q '^lists:seq/2 ' out && grep -q '^nothing of ferrotrace left' out || fail "one-shot calls" out
say "one-shot calls and detach, nothing left (port $port); findings:"
grep -E '^  (modules|processes|trace|library|files|tables) ' out | sed 's/^/    /'

# 2. the remote shell, on a pty
rm -f shell.in shell.out
mkfifo shell.in
# TERM as an operator's terminal has it: without one (env -i), OTP 26 and later keep the
# pty cooked and a Ctrl-G waits for a newline.
TERM=xterm script -qfec "$b attach ftotp --cookie ftotp" /dev/null <shell.in >shell.out 2>&1 &
shell=$!
exec 3>shell.in
wait_for '\(ftotp@[^)]*\)1> ' shell.out 60 || fail "no remote shell prompt within 60 s" shell.out
printf '%s\n' '{ok, S} = ferrotrace:calls("lists:seq/2", #{duration => 60000}).' >&3
wait_for '\{ok,[0-9]+\}' shell.out 30 || fail "calls/2 in the remote shell" shell.out
sleep 1
printf '%s\n' 'ferrotrace:report(S).' >&3
wait_for '^lists:seq/2 +[0-9]+ ' shell.out 30 || fail "report/1 in the remote shell" shell.out
printf '\007' >&3
wait_for 'User switch command' shell.out 15 || fail "Ctrl-G in the remote shell" shell.out
printf 'q\n' >&3
wait_for '^nothing of ferrotrace left' shell.out 60 || fail "Ctrl-G q: no detach" shell.out
exec 3>&-
wait "$shell" || fail "attach exited with status $?" shell.out
shell=
say "remote shell: calls/2, report/1, Ctrl-G q, nothing left"

# 3. nothing loaded
$b status ftotp --cookie ftotp >out 2>&1 && grep -q 'ferrotrace is not loaded' out || fail "status after" out
say "passed in $(($(date +%s) - t0)) s"
