# ferrotrace: the README's two commands are `make demo` and `make test` (every CI part and its
# time: the CI table in CONTRIBUTING.md).
.PHONY: busy-pairs births read-stalls compare-bench scope-bench yaws-scope metrics-bench metrics-demo metrics-demo-stop metrics-soak busy cold-start shed-latency yaws-bench yaws-pool all setup compile demo test bundle test-attach test-rust test-erlang dialyzer test-release test-otp test-elixir test-watch-tty test-snippets bench bench-reads bench-html always-on loom miri collector-ceiling clean export-tools fuzz

DEBIAN_PACKAGES = erlang-nox erlang-dev rebar3 erlang-common-test erlang-eunit erlang-dialyzer erlang-tools

all: compile

# Installs Debian's Erlang/OTP and rebar3 when they are missing (needs root or sudo).
setup:
	@if ! command -v erl >/dev/null 2>&1 || ! command -v rebar3 >/dev/null 2>&1 \
	    || ! erl -noshell -eval 'halt(case code:lib_dir(common_test) of {error,_} -> 1; _ -> 0 end).'; then \
	  SUDO=$$(test "$$(id -u)" = 0 || echo sudo); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $(DEBIAN_PACKAGES); \
	fi
	@command -v cargo >/dev/null 2>&1 || { echo "cargo is required (https://rustup.rs)"; exit 1; }

compile: setup
	rebar3 compile

demo: compile
	sh examples/demo.sh

test: compile test-rust test-erlang dialyzer test-elixir test-release test-watch-tty test-snippets test-attach

test-rust:
	cargo test --workspace --release
	cargo clippy --workspace --release --all-targets -- -D warnings

# Common Test once (test/ct_run.sh names the failed cases again at the end; none is run again).
test-erlang: compile export-tools
	rebar3 eunit
	bash test/ct_run.sh

# The independent readers the export and cluster suites check exports with
# (test/export/setup.sh): Python's hdrhistogram and jsonschema (pip, in a venv) and inferno (cargo
# install), cached in _build/export-tools: 88 s the first time here, under 1 s after; and
# Debian's chromium, which loads the html export (test/export/browser.py); and Debian's
# prometheus (2.42, with promtool), which the metrics suite starts and scrapes with.
export-tools:
	@python3 -c 'import ensurepip' >/dev/null 2>&1 || { SUDO=$$(test "$$(id -u)" = 0 || echo sudo); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq python3-venv; }
	@command -v chromium >/dev/null 2>&1 || { SUDO=$$(test "$$(id -u)" = 0 || echo sudo); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium; }
	@command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1 || { SUDO=$$(test "$$(id -u)" = 0 || echo sudo); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends prometheus; }
	sh test/export/setup.sh

# Then attach/'s two modules (not part of the application) with the same PLT.
dialyzer: compile
	rebar3 dialyzer
	mkdir -p _build/attach-dialyzer
	erlc +debug_info -o _build/attach-dialyzer attach/ferrotrace_attach.erl attach/ferrotrace_attach_node.erl
	dialyzer --plt $$(ls _build/default/rebar3_*_plt | head -1) -Wunmatched_returns -Werror_handling -Wunknown \
	    _build/attach-dialyzer/*.beam _build/default/lib/ferrotrace/ebin/*.beam

# A relx release of examples/relapp with ferrotrace as a _checkouts dependency: daemon,
# remote_console through tmux, bin/relapp eval (times: CONTRIBUTING.md's CI table).
test-release: compile
	bash test/release/run.sh

# The one-file escript `_build/bundle/ferrotrace' (doc/installing.md): ferrotrace's beams, the
# NIF built here and the attach commands, for any node over distribution (about 3 s).
BUNDLE_VERSION = $(shell sed -n 's/.*{vsn, "\(.*\)"}.*/\1/p' erl_src/ferrotrace.app.src)$(shell git rev-parse --short HEAD 2>/dev/null | sed 's/^/+/')
bundle: compile
	escript attach/bundle.escript "$(BUNDLE_VERSION)" _build/bundle/ferrotrace

# The bundle against a release built without ferrotrace: refusals, one-shot calls, the
# remote shell through tmux, a second attach, detach while a session runs, a cookie file
# only root reads, attach --keep; nothing left after each detach.
test-attach: bundle
	bash test/attach/run.sh

# The Erlang checks on OTP 27 (Debian trixie) and OTP 29 (sid) in debootstrap chroots cached
# in .chroots/ (needs root; the first run builds the chroots).
test-otp: bundle
	bash test/otp/run.sh

# ferrotrace:watch/2 typed in `erl -remsh` inside an 80-column tmux pane: renders without
# wrapping, and Ctrl-G i c ends it (installs Debian's tmux if missing).
test-watch-tty: compile
	bash test/watch/run_tty.sh

# A mix project (test/elixir/shop) with ferrotrace as a path dependency, built with Debian's
# rebar3; traces an Elixir function (installs Debian's elixir if missing).
test-elixir: compile
	bash test/elixir/run.sh

# The README's and doc/using.md's snippets typed into fresh `erl' shells with the demo shop:
# each runs, and each sample output has the shape of the run's (columns, rows, note lines;
# not the figures). `sh doc/snippets/run.sh update' rewrites the samples.
test-snippets: compile
	sh doc/snippets/run.sh check

bench: compile
	sh bench/run.sh

# Mechanical checks of the engine's lock-free protocols (not part of `make test`). loom:
# every interleaving of the ring and of the publish / quiescence / free protocol. Miri:
# ferrotrace_core's unit tests under the interpreter (needs nightly and miri: rustup
# toolchain install nightly --profile minimal && rustup +nightly component add miri).
# Every CI part's time, these two's included: the CI table in CONTRIBUTING.md.
loom:
	RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test --release -p ferrotrace_core --lib -- loom

# Under Miri: the modules with unsafe code and lock-free protocols (ring, quiesce, slots,
# producer, collector, session, clock, term_lane, limit, ...). Skipped: the safe code that walks
# or aggregates many events or large terms, or checks many option sets (aggregate, process,
# msgsize, term_format, hdr_bytes, decode, options: no unsafe block, no shared state);
# aggregate's tests alone took about 16 of the 19 minutes of a full run here, decode's and
# options' 98 of 324 s. Proptests run 8 cases each. Isolation is off for the clock and sleeps.
miri:
	PROPTEST_CASES=8 MIRIFLAGS="-Zmiri-disable-isolation" cargo +nightly miri test -p ferrotrace_core --lib -- \
	    --skip aggregate:: --skip process:: --skip msgsize:: --skip term_format:: --skip hdr_bytes:: \
	    --skip decode:: --skip options::

# One collector thread's ceiling: events/s it drains, orders and aggregates.
collector-ceiling:
	cargo test --release -p ferrotrace_core --lib collector_ceiling -- --ignored --nocapture

# Summaries read every 200 ms during a load, aggregation split over 4 threads: drops, the
# backlog and the slowest read, without and with the reads (about 4 minutes on 2 cores).
bench-reads: compile
	mkdir -p bench/out
	erlc -o bench/out +debug_info +warn_missing_spec -Werror bench/ferrotrace_reads.erl
	erl -noshell -pa _build/default/lib/ferrotrace/ebin -pa bench/out -eval 'ferrotrace_reads:main(), halt().'

# The html export of a 1,000-function session: its size and chromium's drawing time, printed
# (targets 3 MB and 2 s, not asserted; needs chromium: make export-tools; about 30 s).
bench-html: compile
	mkdir -p bench/out
	erlc -o bench/out +debug_info +warn_missing_spec -Werror bench/ferrotrace_html_bench.erl
	erl -noshell -pa _build/default/lib/ferrotrace/ebin -pa bench/out -eval 'ferrotrace_html_bench:main(), halt().'

# What compare/3 tells from noise: 20 runs of four sessions of 20 functions (A and B alike,
# C with one function twice as slow, D with its p99 doubled): how often the slowed function
# is ranked first and called slower, an A/A comparison flags nothing, the tail is found;
# with the machine's load average (about 2 minutes).
compare-bench: compile
	mkdir -p bench/out
	erlc -o bench/out +debug_info +warn_missing_spec -Werror bench/ferrotrace_compare_bench.erl bench/ft_compare_work.erl
	erl -noshell -pa _build/default/lib/ferrotrace/ebin -pa bench/out -eval 'ferrotrace_compare_bench:main(), halt().'

# A narrow scope's cost to the processes outside it (issue 59): 10 workers of a supervision
# tree traced, 50 servers of the same code outside it, against untraced and `pids => all'
# rounds, with the 10 idle and spinning (about 40 s).
scope-bench: compile
	mkdir -p bench/out
	erlc -o bench/out +debug_info +warn_missing_spec -Werror bench/ferrotrace_scope_bench.erl test/support/ft_shop.erl \
		test/support/ft_shop_worker.erl
	erl -noshell +S 2:2 -pa _build/default/lib/ferrotrace/ebin -pa bench/out -eval 'ferrotrace_scope_bench:main(), halt().'

# The always-on mode: bytes per timed function (sessions of 20, 200 and 1,000 functions),
# then a {'_','_','_'} session with max_overhead => 0.05 and intervals => 1000 on busy
# schedulers for 60 s: the budget, memory per interval, a tick's cost (about 100 s).
always-on: compile
	mkdir -p bench/out
	erlc -o bench/out +debug_info +warn_missing_spec -Werror bench/ferrotrace_always_on.erl test/support/ft_budget_work.erl \
		test/support/ft_functions.erl
	erl -noshell -pa _build/default/lib/ferrotrace/ebin -pa bench/out -eval 'ferrotrace_always_on:main(), halt().'

# What a Prometheus scrape of a 1,000-function session costs (ferrotrace:serve/2): the
# scrape's time, the schedulers' busy time during one, the exposition's size, what the
# endpoint does between scrapes (target: at most 50 ms of one scheduler; about 30 s).
metrics-bench: compile
	mkdir -p bench/out
	erlc -o bench/out +debug_info +warn_missing_spec -Werror bench/ferrotrace_metrics_bench.erl test/support/ft_functions.erl
	erl -noshell -pa _build/default/lib/ferrotrace/ebin -pa bench/out -eval 'ferrotrace_metrics_bench:main(), halt().'

# The demo shop with a session served to Prometheus, and Debian's Prometheus scraping it
# every second (installed by make export-tools); both left running, the query to paste
# printed (README, "In Prometheus"). make metrics-demo-stop ends them.
metrics-demo: compile export-tools
	sh examples/metrics_demo.sh start

metrics-demo-stop:
	sh examples/metrics_demo.sh stop

# Ten minutes of the shop under load with a 1 % budget, served and scraped every second by
# Prometheus: the session's memory over time, failed scrapes, the shop's throughput against
# untraced, and the PromQL answers next to the session's own (METRICS_SOAK_S=600; a
# benchmark, not a test: about 11 minutes).
METRICS_SOAK_S ?= 600
metrics-soak: compile export-tools
	mkdir -p bench/out
	erlc -o bench/out +debug_info +warn_missing_spec -Werror bench/ferrotrace_metrics_soak.erl test/support/ft_prometheus.erl \
		examples/shop_api.erl examples/shop_inventory.erl
	erl -noshell -pa _build/default/lib/ferrotrace/ebin -pa bench/out -eval 'ferrotrace_metrics_soak:main($(METRICS_SOAK_S)), halt().'

# ferrotrace on a busy node: a {'_','_','_'} start among 50 busy processes (start time, pings,
# own processes untraced), and a budgeted session's first 2 s in 250 ms windows against
# untraced rounds, and the noise of the budget's measure on the node; then a node's first
# start (cold-start, below; about 4 minutes in all).
busy: compile
	mkdir -p bench/out
	erlc -o bench/out +debug_info +warn_missing_spec -Werror bench/ferrotrace_busy.erl bench/ferrotrace_bench.erl \
		test/support/ft_budget_work.erl test/support/ft_busy.erl
	erl -noshell -pa _build/default/lib/ferrotrace/ebin -pa bench/out -eval 'ferrotrace_busy:main(), halt().'
	$(MAKE) --no-print-directory cold-start

# The first 2 s of a budgeted session, paired with untraced runs 2 s apart, for each
# scenario of `make busy' (ferrotrace_busy's fourth part; BUSY_PAIRS pairs each, 12 by
# default: about 28 minutes; BUSY_SCENARIOS="arrive_1s" for some).
busy-pairs: compile
	mkdir -p bench/out
	erlc -o bench/out +debug_info +warn_missing_spec -Werror bench/ferrotrace_busy.erl bench/ferrotrace_bench.erl \
		test/support/ft_budget_work.erl test/support/ft_busy.erl
	BUSY_PARTS=pairs erl -noshell -pa _build/default/lib/ferrotrace/ebin -pa bench/out -eval 'ferrotrace_busy:main(), halt().'

# A node's first start among 50 busy processes (also the last part of `make busy'): fresh
# `erl' nodes with ferrotrace on their code path and nothing of it loaded, the first
# {'_','_','_'} calls/2 and a second one, the pings, where the time went (about 20 s).
cold-start: compile
	mkdir -p bench/out
	erlc -o bench/out +debug_info +warn_missing_spec -Werror bench/ferrotrace_cold.erl bench/ft_fresh_node.erl test/support/ft_budget_work.erl \
		test/support/ft_busy.erl
	erl -noshell -pa _build/default/lib/ferrotrace/ebin -pa bench/out -eval 'ferrotrace_cold:main(), halt().'

# What a process born and ended costs under a calls session's flags, and with `procs' added
# (bench/ferrotrace_births.erl; about 10 s). One scheduler: on two, where each process is
# placed moves the time per process by more than the flags cost.
births: compile
	mkdir -p bench/out
	erlc -o bench/out +debug_info +warn_missing_spec -Werror bench/ferrotrace_births.erl
	erl -noshell +S 1 -pa _build/default/lib/ferrotrace/ebin -pa bench/out -eval 'ferrotrace_births:main(), halt().'

# How soon a budget sheds what load arriving after the start makes hot: five fresh nodes,
# a {'_','_','_'} session with max_overhead => 0.05, processes born per request from the
# return of calls/2; when the tick that shed first began and when the hottest patterns came off
# (about 30 s; OTP 25 and 26).
shed-latency: compile
	mkdir -p bench/out
	erlc -o bench/out +debug_info +warn_missing_spec -Werror bench/ferrotrace_shed_latency.erl bench/ft_fresh_node.erl test/support/ft_budget_work.erl
	erl -noshell -pa _build/default/lib/ferrotrace/ebin -pa bench/out -eval 'ferrotrace_shed_latency:main(), halt().'

# What the loops' paced reading after a node's first '_' start costs its busy processes
# moment by moment: the gaps a busy process per scheduler sees, without and with the
# reading (about 25 s).
read-stalls: compile
	mkdir -p bench/out
	erlc -o bench/out +debug_info +warn_missing_spec -Werror bench/ferrotrace_read_stalls.erl
	erl -noshell -pa _build/default/lib/ferrotrace/ebin -pa bench/out -eval 'ferrotrace_read_stalls:main(), halt().'

# The overhead budget on Debian's yaws under wrk (installs both if missing): rounds of 12 s,
# wrk running through each (3 s of load first), alternating untraced and a fresh
# {'_','_','_'} session with max_overhead => 0.05, then the same with no session (the
# noise), after a minute of untraced load. YAWS_ROUNDS=N rounds of each (default 4; about 6 min). The node's schedulers do
# not spin for work (YAWS_ERL_FLAGS): the client shares the 2 cores, and a spinning
# scheduler takes its CPU. With spinning, one wrk run's rate strayed from the mean of 8 to
# 12 runs by 15 to 23 % (relative standard deviation), by 10 to 12 % without it.
YAWS_ROUNDS ?= 4
YAWS_ERL_FLAGS ?= +sbwt none +sbwtdcpu none +sbwtdio none
yaws-bench: compile
	command -v wrk >/dev/null && ls -d /usr/lib/yaws-*/ebin >/dev/null 2>&1 || \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk yaws >/dev/null; }
	mkdir -p bench/out
	erlc -o bench/out +debug_info +warn_missing_spec -Werror bench/ferrotrace_yaws.erl bench/ferrotrace_bench.erl
	erl -noshell +S 2:2 $(YAWS_ERL_FLAGS) -pa _build/default/lib/ferrotrace/ebin -pa bench/out \
		-pa $$(ls -d /usr/lib/yaws-*/ebin | head -1) -eval 'ferrotrace_yaws:main(["$(YAWS_ROUNDS)"]), halt().'

# A scope on yaws (issue 59): a {'_','_','_'} session on {application, yaws} under wrk, beside
# other work the session must leave alone, in alternating 5 s rounds (about a minute).
yaws-scope: compile
	command -v wrk >/dev/null && ls -d /usr/lib/yaws-*/ebin >/dev/null 2>&1 || \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk yaws >/dev/null; }
	mkdir -p bench/out
	erlc -o bench/out +debug_info +warn_missing_spec -Werror bench/ferrotrace_yaws_scope.erl bench/ferrotrace_yaws.erl \
		bench/ferrotrace_bench.erl
	erl -noshell +S 2:2 $(YAWS_ERL_FLAGS) -pa _build/default/lib/ferrotrace/ebin -pa bench/out \
		-pa $$(ls -d /usr/lib/yaws-*/ebin | head -1) -eval 'ferrotrace_yaws_scope:main(["3"]), halt().'

# The pairs of several saved yaws-bench outputs taken together (each run prints its pairs
# whole): make yaws-pool YAWS_LOGS="run1.log run2.log run3.log".
yaws-pool:
	mkdir -p bench/out
	erlc -o bench/out +debug_info +warn_missing_spec -Werror bench/ferrotrace_yaws.erl bench/ferrotrace_bench.erl
	erl -noshell -pa bench/out -eval 'ferrotrace_yaws:main(["pool" | string:lexemes("$(YAWS_LOGS)", " ")]), halt().'

# Every exported function called with seeded adversarial terms on a peer node: 100,000 calls
# (the suite's default in `make test' is 5,000). FERROTRACE_FUZZ_SEED=N repeats a run.
fuzz: compile
	FERROTRACE_FUZZ_CALLS=$${FERROTRACE_FUZZ_CALLS:-100000} rebar3 ct --suite test/ferrotrace_fuzz_SUITE --case random_calls

clean:
	rebar3 clean
	cargo clean
	rm -f priv/*.so
