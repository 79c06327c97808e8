#!/bin/sh
# make metrics-demo: the demo shop under load with a session left on (1 % budget) served on
# 127.0.0.1:9568, and Debian's Prometheus scraping it every second, its UI on 127.0.0.1:9090.
# Both are left running; `make metrics-demo-stop` (this script's `stop`) ends them.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=examples/out
dir=$out/prometheus
node=ferrotrace_metrics_shop
cookie=ferrotrace_metrics_demo
host=$(hostname -s)

stop() {
    [ -f "$dir/pid" ] && kill "$(cat "$dir/pid")" 2>/dev/null || true
    rm -f "$dir/pid"
    erl -noshell -sname "ferrotrace_metrics_stopper_$$" -setcookie "$cookie" -eval "
        _ = net_adm:ping('$node@$host'), catch erpc:call('$node@$host', erlang, halt, [], 5000), halt()." \
        >/dev/null 2>&1 || true
}

case ${1:-start} in
stop) stop; echo "metrics demo stopped"; exit 0;;
esac

command -v prometheus >/dev/null 2>&1 || { echo "prometheus is missing: make export-tools installs it"; exit 1; }
stop
mkdir -p "$out" "$dir/data"
erlc +warnings_as_errors +warn_missing_spec -o "$out" examples/*.erl
erl -sname "$node" -setcookie "$cookie" -pa "$root/_build/default/lib/ferrotrace/ebin" -pa "$root/$out" \
    -noshell -detached -eval 'ok = shop_demo:serve_shop(9568).'
cat >"$dir/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  scrape_timeout: 900ms
scrape_configs:
  - job_name: ferrotrace
    static_configs:
      - targets: ['127.0.0.1:9568']
YML
nohup prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/data" \
    --web.listen-address=127.0.0.1:9090 >"$dir/log" 2>&1 &
echo $! >"$dir/pid"
i=0
until curl -fs http://127.0.0.1:9568/metrics >/dev/null 2>&1 && curl -fs http://127.0.0.1:9090/-/ready >/dev/null 2>&1; do
    i=$((i + 1)); [ $i -lt 100 ] || { echo "the shop or Prometheus did not come up (log: $dir/log)"; stop; exit 1; }
    sleep 0.2
done
cat <<TXT
The shop ($node@$host) serves its session on http://127.0.0.1:9568/metrics;
Prometheus scrapes it every second: http://127.0.0.1:9090 (its data in $dir).
Paste into Prometheus's Graph tab (after a minute of scrapes), the p99 of each function:
  histogram_quantile(0.99, sum by (le, function) (rate(ferrotrace_call_duration_seconds_bucket[1m])))
or from a shell:
  curl -s http://127.0.0.1:9090/api/v1/query --data-urlencode 'query=rate(ferrotrace_calls_total[1m])'
Both keep running: make metrics-demo-stop ends them.
TXT
