#!/bin/sh
# The README's and guides' sample outputs from real runs (doc/snippets/snippets.escript):
#   sh doc/snippets/run.sh          check: each sample has the shape of a run (make test)
#   sh doc/snippets/run.sh update   rewrite the samples from a run
# Needs ferrotrace built (rebar3 compile); compiles the demo shop into examples/out as
# `make demo' does. About 15 s.
set -eu
cd "$(dirname "$0")/../.."
mkdir -p examples/out
erlc +warnings_as_errors +warn_missing_spec -o examples/out examples/*.erl
exec escript doc/snippets/snippets.escript "${1:-check}"
