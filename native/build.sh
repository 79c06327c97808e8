#!/bin/sh
# Builds the ferrotrace NIF with cargo and installs it as priv/libferrotrace_nif.so.
# Paths are taken from this script's location, so it works both for the top-level
# project and when ferrotrace is a dependency (rebar3 runs the hook in the app dir).
# It says what it does: a first build takes tens of seconds, and cargo runs --quiet.
# rebar3 prints a hook's output (stderr included) once the hook ends, for a dependency too.
set -eu
app_dir=$(cd "$(dirname "$0")/.." && pwd)
cd "$app_dir"
command -v cargo >/dev/null 2>&1 || { echo "ferrotrace: cargo not found; install Rust" >&2; exit 1; }
say() { printf '%s\n' "$*" >&2; }
say "ferrotrace: building the NIF with cargo (a first build takes a minute) ..."
started=$(date +%s)
cargo build --release --quiet -p ferrotrace_nif
mkdir -p priv
target_dir=${CARGO_TARGET_DIR:-$app_dir/target}
cp -f "$target_dir/release/libferrotrace_nif.so" priv/libferrotrace_nif.so.tmp
mv -f priv/libferrotrace_nif.so.tmp priv/libferrotrace_nif.so
say "ferrotrace: NIF built in $(( $(date +%s) - started )) s: $app_dir/priv/libferrotrace_nif.so"
