#!/bin/sh
# The ferrotrace demo (`make demo`): a shop service under load runs as a named node; a second
# node attaches the way a remote shell would, traces it for a few seconds and prints the report.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=examples/out
mkdir -p "$out"
erlc +warnings_as_errors +warn_missing_spec -o "$out" examples/*.erl

host=$(hostname -s)
shop="ferrotrace_shop@$host"
cookie="ferrotrace_demo_$$"
paths="-pa $root/_build/default/lib/ferrotrace/ebin -pa $root/$out"

cleanup() {
    erl -noshell -sname "ferrotrace_stopper_$$" -setcookie "$cookie" -eval "
        _ = net_adm:ping('$shop'), catch erpc:call('$shop', erlang, halt, [], 5000), halt()." \
        >/dev/null 2>&1 || true
}
trap cleanup EXIT INT TERM

echo "starting the shop node $shop under load (8 clients)"
# shellcheck disable=SC2086
erl -sname ferrotrace_shop -setcookie "$cookie" $paths -noshell -detached \
    -eval 'ok = shop_demo:start_shop().'

echo "attaching from a second node, as a remote shell would"
# shellcheck disable=SC2086
erl -sname "ferrotrace_operator_$$" -setcookie "$cookie" $paths -noshell -eval "
    Shop = '$shop',
    Wait = fun W(0) -> exit(shop_node_not_up);
               W(N) -> case net_adm:ping(Shop) of pong -> ok; pang -> timer:sleep(200), W(N - 1) end
           end,
    ok = Wait(50),
    ok = shop_demo:attach(Shop),
    halt()."
