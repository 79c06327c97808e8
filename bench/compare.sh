#!/bin/sh
# The hot path's cost of two builds, side by side: `make bench`'s cases of the cost per
# event (untraced, the discard and no-op floors, a full session, a refused call), run by
# each build in turn, PAIRS times (default 5), so that the machine's drift meets both
# alike. OTHER is another checkout of ferrotrace, built (`rebar3 compile` there: its
# _build/default/lib/ferrotrace/ebin and priv/ are used); this checkout must be built too.
#
#   sh bench/compare.sh ../ferrotrace-old [PAIRS]
#
# Printed: each run's figures as they come, then per build the median and range of the
# ferrotrace session's ns per event over the no-op floor (single process), its ratio to the
# floor, the floor's own ns per event, and the workers rounds that dropped events; then the
# workers case (a worker per scheduler): the session's ns per event and its cost over the
# no-op floor there.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
other=$(cd "${1:?usage: sh bench/compare.sh OTHER_CHECKOUT [PAIRS]}" && pwd)
pairs=${2:-5}
cd "$root"
out=bench/out
mkdir -p "$out"
cargo build --release --quiet -p ferrotrace_floor
cp -f "${CARGO_TARGET_DIR:-$root/target}/release/libferrotrace_floor.so" "$out/libferrotrace_floor.so"
erlc -o "$out" +debug_info +warn_missing_spec -Werror bench/ferrotrace_floor.erl bench/ft_bench_target.erl \
    bench/ferrotrace_bench.erl
for build in "$root" "$other"; do
    [ -d "$build/_build/default/lib/ferrotrace/ebin" ] || { echo "compare: $build is not built (rebar3 compile)" >&2; exit 1; }
done
log=$(mktemp)
trap 'rm -f "$log"' EXIT
run() {
    # The bench's own modules from here; ferrotrace's beams and NIF from the build.
    FERROTRACE_FLOOR_SO="$root/$out/libferrotrace_floor" \
    FERROTRACE_BENCH_CASES="untraced floor_discard floor_noop ferrotrace ft_call_paused" \
        erl -noshell -pa "$1/_build/default/lib/ferrotrace/ebin" -pa "$root/$out" \
            -eval 'ferrotrace_bench:main().' 2>&1 |
        awk -v b="$2" '
            $1 == "single" && $2 == "floor_noop" { floor = $6 }
            $1 == "single" && $2 == "ferrotrace" { ft = $6 }
            $1 == "workers" && $2 == "floor_noop" { wfloor = $6 }
            $1 == "workers" && $2 == "ferrotrace" { wft = $6 }
            $1 == "ferrotrace" && $2 == "workers" && / dropped=/ { n++; if ($0 !~ / dropped=0 /) d++ }
            $1 == "ratio" && $2 == "ferrotrace_per_event_vs_noop_floor" { r = $3 }
            END { printf "%s over_floor_ns=%.1f ratio=%s floor_ns=%s ferrotrace_ns=%s workers_rounds_dropping=%d/%d workers_over_floor_ns=%.1f workers_ferrotrace_ns=%s\n",
                         b, ft - floor, r, floor, ft, d, n, wft - wfloor, wft }'
}
i=1
while [ "$i" -le "$pairs" ]; do
    for label in this other; do
        case $label in this) dir=$root ;; *) dir=$other ;; esac
        line=$(run "$dir" "$label")
        echo "compare pair=$i $line"
        echo "$line" >> "$log"
    done
    i=$((i + 1))
done
for label in this other; do
    grep "^$label " "$log" | awk -v b="$label" '
        { split($2, o, "="); split($3, r, "="); split($4, f, "="); over[NR] = o[2]; ratio[NR] = r[2]; fl[NR] = f[2]
          split($6, w, "="); split(w[2], wd, "/"); drop += wd[1]; rounds += wd[2]
          split($7, wo, "="); wover[NR] = wo[2]; split($8, wf, "="); wns[NR] = wf[2] }
        function median(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
                                          return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
        END { n = NR; printf "compare %s runs=%d over_floor_ns median=%.1f (%.1f to %.1f) ratio median=%.3f floor_ns median=%.1f workers_rounds_dropping=%d/%d\n",
                     b, n, median(over, n), over[1], over[n], median(ratio, n), median(fl, n), drop, rounds
              printf "compare %s workers ns_per_event median=%.1f (%.1f to %.1f) over_floor_ns median=%.1f (%.1f to %.1f)\n",
                     b, median(wns, n), wns[1], wns[n], median(wover, n), wover[1], wover[n] }'
done
