#!/bin/sh
# Installs the independent readers the export suite checks ferrotrace's exports with, once,
# into _build/export-tools (cached; later runs only check they are there):
#   - the Python `hdrhistogram` package (pip, in a venv): decodes the hdr_log export;
#   - the Python `jsonschema` package (pip, same venv): validates the chrome_trace export;
#   - inferno (cargo install): draws an SVG flame graph from the collapsed export.
# Prints the tools directory. First run about 1 minute (inferno builds), later ones < 1 s.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
tools=${FERROTRACE_EXPORT_TOOLS:-$root/_build/export-tools}
mkdir -p "$tools"
if ! "$tools/venv/bin/python" -c 'import hdrh, jsonschema' >/dev/null 2>&1; then
  python3 -m venv "$tools/venv" >&2
  "$tools/venv/bin/pip" install -q 'hdrhistogram==0.10.8' 'jsonschema==4.23.0' >&2
fi
if [ ! -x "$tools/bin/inferno-flamegraph" ]; then
  cargo install -q --root "$tools" --locked --version 0.12.8 inferno --no-default-features --features cli >&2
fi
echo "$tools"
