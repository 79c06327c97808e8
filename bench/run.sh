#!/bin/sh
# The ferrotrace benchmark: builds the floor NIF (benchmark-only), compiles the bench modules
# into bench/out/ and runs them next to the ferrotrace core built by `rebar3 compile`
# (`make bench` runs that first). Sizes scale with FERROTRACE_BENCH_SCALE (default 1.0).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=bench/out
mkdir -p "$out"

cargo build --release --quiet -p ferrotrace_floor
target_dir=${CARGO_TARGET_DIR:-$root/target}
cp -f "$target_dir/release/libferrotrace_floor.so" "$out/libferrotrace_floor.so.tmp"
mv -f "$out/libferrotrace_floor.so.tmp" "$out/libferrotrace_floor.so"

erlc -o "$out" +debug_info +warn_missing_spec -Werror \
    bench/ferrotrace_floor.erl bench/ft_bench_target.erl bench/ferrotrace_bench.erl \
    bench/ferrotrace_msg_cost.erl

ebin=_build/default/lib/ferrotrace/ebin
if [ ! -d "$ebin" ]; then
    echo "note: $ebin not found (run rebar3 compile); the ferrotrace case will be skipped" >&2
fi
FERROTRACE_FLOOR_SO="$root/$out/libferrotrace_floor"
export FERROTRACE_FLOOR_SO
# The probe effect's calibration at a calls/2 session's start, when ferrotrace is built.
if [ -d "$ebin" ]; then
    erlc -o "$out" +debug_info +warn_missing_spec -Werror bench/ferrotrace_calibration_cost.erl
    erl -noshell -pa "$ebin" -pa "$out" -eval 'ferrotrace_calibration_cost:main(), halt().' \
        || echo "calibration line crashed" >&2
fi
# Call trees on against off (trees => #{slower_than => Ns}, no root slow enough).
if [ -d "$ebin" ]; then
    erlc -o "$out" +debug_info +warn_missing_spec -Werror bench/ferrotrace_trees_cost.erl \
        test/support/ft_trees_target.erl
    erl -noshell -pa "$ebin" -pa "$out" -eval 'ferrotrace_trees_cost:main(), halt().' \
        || echo "call trees line crashed" >&2
fi
# The probe effect: the calibrated compensation against the untraced time.
if [ -d "$ebin" ]; then
    erlc -o "$out" +debug_info +warn_missing_spec -Werror bench/ferrotrace_probe_cost.erl \
        test/support/ft_probe_target.erl
    erl -noshell -pa "$ebin" -pa "$out" -eval 'ferrotrace_probe_cost:main(), halt().' \
        || echo "probe effect line crashed" >&2
fi
# The message scenario (send and 'receive' events), when ferrotrace is built.
if [ -d "$ebin" ]; then
    erl -noshell -pa "$ebin" -pa "$out" -eval 'ferrotrace_msg_cost:main(), halt().' \
        || echo "message scenario crashed" >&2
fi
exec erl -noshell -pa "$ebin" -pa "$out" -eval 'ferrotrace_bench:main().'
