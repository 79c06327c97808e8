#!/bin/bash
# The Elixir test: a mix project (test/elixir/shop) depends on ferrotrace by path, builds it
# with Debian's rebar3 (`mix local.rebar rebar3 /usr/bin/rebar3`, in a private MIX_HOME:
# `mix local.rebar --force` would need hex.pm), and
# `mix run check.exs` traces Shop.Cart.checkout/1 with keyword options and checks the counts.
# Works in a temporary directory (FERROTRACE_KEEP=1 keeps it); cargo builds into the
# checkout's own target/ (as test/release/run.sh): the copy has the same sources and times,
# and cargo's hashes of a workspace's paths are relative to it, so the NIF that `make
# compile' built is found up to date (a build of its own in target/release-test took 65 s).
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/ferrotrace-elixir.XXXXXX")
started=$SECONDS
test_name=test-elixir
# shellcheck source=test/support/lib.sh
. "$repo/test/support/lib.sh"
cleanup() {
    local status=$?
    if [ -n "${FERROTRACE_KEEP:-}" ]; then say "kept $work"; else rm -rf "$work"; fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

need mix elixir
command -v rebar3 >/dev/null || fail "rebar3 is missing (make setup installs it)"

cp -r "$repo/test/elixir/shop" "$work/shop"
copy_tree "$repo" "$work/ferrotrace"
export CARGO_TARGET_DIR=$repo/target
unset MIX_REBAR3
export MIX_HOME=$work/mix_home HEX_OFFLINE=1 FERROTRACE_PATH=$work/ferrotrace
mix local.rebar rebar3 "$(command -v rebar3)" >/dev/null || fail "mix local.rebar rebar3 $(command -v rebar3)"
say "Elixir $(elixir --short-version 2>/dev/null || elixir --version | tail -1), rebar3 $(command -v rebar3) via mix local.rebar"

cd "$work/shop"
t=$SECONDS
timeout 900 mix compile >"$work/compile.log" 2>&1 || { cat "$work/compile.log" >&2; fail "mix compile"; }
grep -q "ferrotrace: NIF built in" "$work/compile.log" \
    || { cat "$work/compile.log" >&2; fail "mix compile: no 'ferrotrace: NIF built in' line"; }
so=$(ls _build/dev/lib/ferrotrace/priv/libferrotrace_nif.so 2>/dev/null) || fail "no NIF in _build/dev/lib/ferrotrace/priv"
say "mix compile in $((SECONDS - t)) s; NIF at $so"
t=$SECONDS
timeout 120 mix run check.exs >"$work/run.log" 2>&1 || { cat "$work/run.log" >&2; fail "mix run check.exs"; }
cat "$work/run.log"
say "passed in $((SECONDS - started)) s (mix run: $((SECONDS - t)) s)"
