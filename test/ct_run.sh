#!/bin/bash
# rebar3 ct, once (make test-erlang). A failed case fails the run: nothing is run again.
# On failure the failed and auto-skipped cases are named again at the end, where a log cut
# in the middle (CI's) still shows them.
set -uo pipefail
cd "$(dirname "$0")/.."
out=_build/ct_output.txt
mkdir -p _build
rebar3 ct "$@" 2>&1 | tee "$out"
status=${PIPESTATUS[0]}
((status == 0)) && exit 0
# "%%% SUITE ==> case: FAILED" lines, colour codes taken out.
failed=$(sed -e 's/\x1b\[[0-9;]*m//g' "$out" | grep -E '^%%% [a-z_0-9]+_SUITE ==> [^:]+: (FAILED|auto_skipped)' | sort -u)
echo "ct_run: FAILED (rebar3 ct status $status)${failed:+:}"
[ -z "$failed" ] || echo "$failed" | sed 's/^/ct_run:   /'
exit "$status"
