#!/bin/bash
# Runs ferrotrace's Erlang checks on newer OTPs than the host's, in minimal debootstrap
# chroots of Debian releases: trixie (OTP 27) and sid (OTP 29), by default both, and
# bullseye (OTP 23, erlang-nox only) for the attach bundle's refusal of an OTP before 25.
#
#   test/otp/run.sh [trixie] [sid] [bullseye]
#
# In each chroot it runs the attach bundle (_build/bundle/ferrotrace: make test-otp builds it)
# with that OTP's escript against a node of that OTP without ferrotrace (test/otp/attach.sh:
# one-shot calls, the remote shell on a pty, detach's checks; FERROTRACE_OTP_ATTACH=0 skips
# it, and bullseye unless named), compiles erl_src/**/*.erl with the project's erl_opts (warnings are errors),
# loads the NIF built on the host (priv/libferrotrace_nif.so, nif_version_2_16), compiles the
# test helpers (test/support/*.erl), runs the EUnit modules test/*_tests.erl and the Common
# Test suites test/*_SUITE.erl
# (FERROTRACE_OTP_SUITES: a list of suites instead, or none; FERROTRACE_OTP_EUNIT: a list of
# EUnit modules instead, or none), less the cases in FERROTRACE_OTP_SKIP
# (Suite:case, reported as skipped with the reason below). The fuzz suite's replay variables
# (FERROTRACE_FUZZ_SEED, _CALLS, _FROM, _TIMEOUT) reach the run in the chroot; nothing else
# of the caller's environment does. One seed on OTP 27 alone:
#
#   FERROTRACE_OTP_SUITES=ferrotrace_fuzz_SUITE FERROTRACE_OTP_EUNIT=none \
#     FERROTRACE_FUZZ_SEED=307 test/otp/run.sh trixie
#
# The chroots are cached in $FERROTRACE_CHROOTS (default .chroots/, gitignored): the first
# run downloads and installs (about a minute or two per release), later runs reuse them.
# FERROTRACE_OTP_PREPARE_ONLY=1 builds them (Prometheus included) and checks nothing: .ci/run
# does so beside make test.
# Needs root (debootstrap, chroot, mount). Every mount is undone on exit, also on failure.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
chroots=${FERROTRACE_CHROOTS:-$repo/.chroots}
mirror=${FERROTRACE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
suites_to_run=${FERROTRACE_OTP_SUITES:-$(cd test && ls *_SUITE.erl | sed 's/\.erl$//' | tr '\n' ' ')}
[ "$suites_to_run" != none ] || suites_to_run=   # EUnit only
eunit_modules=${FERROTRACE_OTP_EUNIT:-$(cd test && ls *_tests.erl 2>/dev/null | sed 's/\.erl$//' | tr '\n' ' ')}
[ "$eunit_modules" != none ] || eunit_modules=   # Common Test only
# The fuzz suite's variables, passed through `env -i' into the chroot.
fuzz_env=()
for var in FERROTRACE_FUZZ_SEED FERROTRACE_FUZZ_CALLS FERROTRACE_FUZZ_FROM FERROTRACE_FUZZ_TIMEOUT; do
    [ -z "${!var:-}" ] || fuzz_env+=("$var=${!var}")
done
# FERROTRACE_OTP_SKIP: Suite:case ... to skip, with the reason FERROTRACE_OTP_SKIP_REASON
# (empty: none). By default the overload suite's minute-long soak, which reads the engine's
# resident memory: that is the NIF's, built once and the same on every OTP; the host runs it.
skip_cases=${FERROTRACE_OTP_SKIP-ferrotrace_overload_SUITE:soak}
skip_reason=${FERROTRACE_OTP_SKIP_REASON:-${FERROTRACE_OTP_SKIP+skipped by FERROTRACE_OTP_SKIP}}
skip_reason=${skip_reason:-run on the host only: the memory it reads is the NIF, the same on every OTP}
packages="erlang-nox,erlang-common-test,erlang-eunit"
erl_opts="+debug_info +warnings_as_errors +warn_missing_spec"
step_timeout=${FERROTRACE_OTP_TIMEOUT:-900}   # seconds, per install and per test run

releases=("$@")
if [ ${#releases[@]} = 0 ]; then
    releases=(trixie sid)
    [ "${FERROTRACE_OTP_ATTACH:-1}" = 0 ] || releases+=(bullseye)
fi

say() { printf 'test-otp: %s\n' "$*"; }
die() { printf 'test-otp: FAILED: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot and mount)"
# One run at a time per chroot folder: a second run would unmount the first one's /proc and
# /dev as stale, overwrite its work tree and take its node name. It waits instead.
mkdir -p "$chroots"
exec 9>"$chroots/.run.lock"
flock -n 9 || { say "another run holds $chroots: waiting for it"; flock 9; }
if ! command -v debootstrap >/dev/null 2>&1; then
    say "installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null \
        || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; } \
        || die "cannot install debootstrap"
fi

# Mounts made by this script, innermost last; all undone by cleanup, whatever happens.
mounts=()
cleanup() {
    local status=$? i
    for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
        umount "${mounts[i]}" 2>/dev/null || umount -l "${mounts[i]}" 2>/dev/null \
            || echo "test-otp: could not unmount ${mounts[i]}" >&2
    done
    mounts=()
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mount_in() { # mount_in ROOT: /proc and /dev for apt and erl, where mounting is allowed
    local root=$1
    if mount -t proc proc "$root/proc" 2>/dev/null; then
        mounts+=("$root/proc")
        mount --bind /dev "$root/dev" && mounts+=("$root/dev")
        # A pty for the attach step's remote shell (its ptmx is /dev's, bound above).
        mount --bind /dev/pts "$root/dev/pts" && mounts+=("$root/dev/pts")
    else
        # An unprivileged container: erl runs without them (tried); ct_run, apt and
        # dpkg inside the chroot and debootstrap there are untested.
        say "cannot mount /proc in $root (no privilege?): going on without /proc and /dev"
    fi
}

# A run killed with SIGKILL can leave mounts behind: undo them before touching the tree
# (rm -rf through a bind mount of /dev would remove the host's device nodes).
unmount_stale() { # unmount_stale ROOT
    local root=$1 m
    for m in $(awk -v r="$root/" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r); do
        say "unmounting $m, left by an earlier run"
        umount "$m" || umount -l "$m" || die "cannot unmount $m"
    done
}

umount_all() { # fails (after trying them all, lazily where busy) if one stays mounted
    local i ok=0
    for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
        umount "${mounts[i]}" 2>/dev/null || umount -l "${mounts[i]}" \
            || { echo "test-otp: could not unmount ${mounts[i]}" >&2; ok=1; }
    done
    mounts=()
    return $ok
}

# sid's (and testing's) Release files carry Valid-Until; a snapshot mirror or a slow clock
# makes them "expired". Trust them anyway: the signatures are still checked.
apt_conf='Acquire::Check-Valid-Until "false";
Acquire::Check-Date "false";
APT::Install-Recommends "false";
APT::Install-Suggests "false";'

prepare() { # prepare RELEASE: a cached chroot with Erlang, built once
    local release=$1 root=$chroots/$1 packages=$packages
    [ "$release" != bullseye ] || packages=erlang-nox   # a node to attach to, no more
    local stamp="$root/.ferrotrace-ready"
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$packages" ]; then
        say "$release: cached chroot $root"
        return 0
    fi
    say "$release: building chroot in $root (debootstrap, then $packages)"
    unmount_stale "$root"
    rm -rf "$root"
    mkdir -p "$chroots"
    local started=$SECONDS m built=0 mirrors=("$mirror")
    # bullseye's LTS ended in August 2026: once deb.debian.org drops it, archive.debian.org should
    # have it (not tried: archive.debian.org cannot be reached from the machine this was written on).
    [ "$release" != bullseye ] || mirrors+=(http://archive.debian.org/debian)
    for m in "${mirrors[@]}"; do
        unmount_stale "$root"
        rm -rf "$root"
        if timeout "$step_timeout" debootstrap --variant=minbase "$release" "$root" "$m" \
            >"$chroots/$release.debootstrap.log" 2>&1; then built=1; break; fi
        say "$release: debootstrap from $m failed"
    done
    ((built == 1)) || { tail -20 "$chroots/$release.debootstrap.log" >&2; die "$release: debootstrap failed (log: $chroots/$release.debootstrap.log)"; }
    printf '%s\n' "$apt_conf" >"$root/etc/apt/apt.conf.d/99ferrotrace"
    mount_in "$root"
    timeout "$step_timeout" chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
        DEBIAN_FRONTEND=noninteractive sh -c \
        "apt-get update -qq && apt-get install -y -qq ${packages//,/ } && apt-get clean" \
        >"$chroots/$release.apt.log" 2>&1 \
        || { tail -20 "$chroots/$release.apt.log" >&2; die "$release: installing $packages failed (log: $chroots/$release.apt.log)"; }
    umount_all
    printf '%s' "$packages" >"$stamp"
    say "$release: chroot ready in $((SECONDS - started)) s"
}

# Debian's prometheus (with promtool) in a chroot that lacks it, for the metrics suite,
# which starts one and scrapes the session from inside the chroot as on the host (its
# cases skip where it is missing). Installed once into the cached chroot (no rebuild: the
# chroot's stamp is unchanged); about 20 s of apt the first time.
ensure_prometheus() { # ensure_prometheus RELEASE
    local release=$1 root=$chroots/$1
    [ -x "$root/usr/bin/prometheus" ] && [ -x "$root/usr/bin/promtool" ] && return 0
    say "$release: installing prometheus in the chroot"
    unmount_stale "$root"
    mount_in "$root"
    timeout "$step_timeout" chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
        DEBIAN_FRONTEND=noninteractive sh -c \
        "apt-get update -qq && apt-get install -y -qq --no-install-recommends prometheus && apt-get clean" \
        >"$chroots/$release.prometheus.log" 2>&1 \
        || say "$release: prometheus could not be installed (its cases will skip; log: $chroots/$release.prometheus.log)"
    umount_all
}

check() { # check RELEASE: compile, load the NIF, EUnit, Common Test, inside the chroot
    local release=$1 root=$chroots/$1
    local work=$root/ferrotrace
    local started=$SECONDS
    [ -f priv/libferrotrace_nif.so ] || die "priv/libferrotrace_nif.so is missing: run 'make compile' first"
    case " $suites_to_run " in *" ferrotrace_metrics_SUITE "*) ensure_prometheus "$release";; esac
    rm -rf "$work"
    mkdir -p "$work/ferrotrace/ebin" "$work/ferrotrace/priv" "$work/ferrotrace/erl_src" "$work/test/support" "$work/logs"
    # Flat in the chroot: the role folders (erl_src/export/, ...) are one module namespace.
    find erl_src -name '*.erl' -exec cp {} "$work/ferrotrace/erl_src/" \;
    # Shell docs (EEP-48 chunks), where the project builds them in a rebar3 post-hook.
    if [ -f native/doc_chunks.escript ]; then cp native/doc_chunks.escript "$work/"; fi
    local modules
    modules=$(cd "$work/ferrotrace/erl_src" && ls *.erl | sed 's/\.erl$//' | paste -sd, -)
    sed "s/{modules, \[\]}/{modules, [$modules]}/" \
        erl_src/ferrotrace.app.src >"$work/ferrotrace/ebin/ferrotrace.app"
    cp priv/libferrotrace_nif.so "$work/ferrotrace/priv/"
    cp -r priv/html "$work/ferrotrace/priv/"   # the html export's vendored scripts
    # The attach bundle (make bundle, built on the host's OTP 25), run by this OTP's escript.
    if [ "${FERROTRACE_OTP_ATTACH:-1}" != 0 ]; then
        [ -x _build/bundle/ferrotrace ] || die "_build/bundle/ferrotrace is missing: run 'make bundle' (or FERROTRACE_OTP_ATTACH=0)"
        cp _build/bundle/ferrotrace "$work/bundle-ferrotrace"
        cp test/otp/attach.sh "$work/"
    fi
    cp test/*.erl "$work/test/"
    mkdir -p "$work/examples" && cp examples/shop_*.erl "$work/examples/"   # the metrics suite's shop
    cp test/support/* "$work/test/support/"
    { echo '{logdir, "logs"}.'
      printf '{suites, "test", [%s]}.\n' "$(echo $suites_to_run | tr ' ' ',')"
      local sc
      for sc in $skip_cases; do
          printf '{skip_cases, "test", %s, [%s], "%s"}.\n' "${sc%%:*}" "${sc#*:}" "$skip_reason"
      done
    } >"$work/ferrotrace.spec"
    [ -z "$skip_cases" ] || say "$release: skipping $skip_cases: $skip_reason"
    unmount_stale "$root"
    mount_in "$root"
    local script
    script=$(cat <<EOF
set -eu
cd /ferrotrace
echo "test-otp: $release: OTP \$(erl -noshell -eval 'io:put_chars(erlang:system_info(otp_release)), halt().')"
erlc $erl_opts -o ferrotrace/ebin ferrotrace/erl_src/*.erl
if [ -f doc_chunks.escript ]; then (cd ferrotrace && REBAR_DEPS_DIR=/ferrotrace escript ../doc_chunks.escript); fi
for f in test/*.erl test/support/*.erl; do case \$f in *_SUITE.erl) ;; *) erlc $erl_opts -pa ferrotrace/ebin -o test \$f;; esac; done
erl -noshell -pa ferrotrace/ebin -eval '
    {module, ferrotrace_tracer} = code:ensure_loaded(ferrotrace_tracer),
    {ok, S} = ferrotrace:session(#{duration => 1000}),
    #{status := running} = ferrotrace:summary(S),
    ok = ferrotrace:release(S),
    io:format("test-otp: NIF loaded: ~s~n", [code:priv_dir(ferrotrace)]),
    halt().'
status=0
if [ -x bundle-ferrotrace ]; then sh attach.sh $release || status=1; fi
if [ -n "$eunit_modules" ]; then
erl -noshell -pa ferrotrace/ebin -pa test -eval '
    case eunit:test([$(echo $eunit_modules | tr ' ' ',')], []) of
        ok -> halt(0);
        _ -> halt(1)
    end.' || { echo "test-otp: $release: EUnit failed"; status=1; }
fi
if [ -n "$suites_to_run" ]; then
    if ! ct_run -noshell -pa /ferrotrace/ferrotrace/ebin -spec ferrotrace.spec >ct_output.txt 2>&1; then
        tail -40 ct_output.txt; grep -h -B2 -A15 "=result *failed" logs/ct_run.*/*/run.*/suite.log 2>/dev/null | head -80
        # A failed case fails the run: nothing is run again.
        echo "test-otp: $release: Common Test failed: \$(grep -E '^Testing ferrotrace\.[a-z_]+_SUITE: (TEST COMPLETE, .* [1-9][0-9]* failed|.*auto_skipped)' ct_output.txt \
            | sed -E 's/^Testing ferrotrace\.([a-z_]+_SUITE):.*/\1/' | sort -u | tr '\n' ' ')"
        status=1
    fi
    grep -E "TEST COMPLETE" ct_output.txt | tail -1
fi
exit \$status
EOF
)
    say "$release: compile, load the NIF, EUnit (${eunit_modules:-none}), Common Test (${suites_to_run:-none})${fuzz_env[*]:+ with ${fuzz_env[*]}}"
    # The output is kept (chroots/RELEASE.check.log): a failure's lines are printed again at
    # the end of the run, where a log cut in the middle (CI's) still shows them.
    local rc=0
    timeout "$step_timeout" chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
        HOME=/root LANG=C.UTF-8 ${fuzz_env[@]+"${fuzz_env[@]}"} sh -c "$script" 2>&1 \
        | tee "$chroots/$release.check.log" || rc=$?
    if ((rc != 0)); then
        umount_all
        ((rc != 124)) || say "$release: timed out after $step_timeout s (FERROTRACE_OTP_TIMEOUT), in: $(grep -E '^Testing ' "$work/ct_output.txt" 2>/dev/null | tail -1)"
        say "$release: FAILED in $((SECONDS - started)) s (Common Test logs: $work/logs)"
        return 1
    fi
    umount_all || return 1
    say "$release: passed in $((SECONDS - started)) s"
}

# check_old RELEASE (bullseye, OTP 23): the bundle, run on the host, is refused by a node of
# the chroot's OTP with one line, and loads nothing there.
check_old() {
    local release=$1 root=$chroots/$1 started=$SECONDS port=$((20000 + ($$ + 7) % 20000)) node i ok=0
    local out=$chroots/$release.attach.out
    [ -x _build/bundle/ferrotrace ] || die "_build/bundle/ferrotrace is missing: run 'make bundle' (or FERROTRACE_OTP_ATTACH=0)"
    ft() { ERL_EPMD_PORT=$port timeout 60 _build/bundle/ferrotrace "$@" --cookie ftold; }
    unmount_stale "$root"
    mount_in "$root"
    chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root ERL_EPMD_PORT=$port \
        erl -sname ftold -setcookie ftold -noshell >/dev/null 2>&1 </dev/null &
    node=$!
    for i in $(seq 120); do ft status ftold >"$out" 2>&1 && break; sleep 0.5; done
    if ! grep -q 'ferrotrace is not loaded' "$out"; then
        cat "$out"; say "$release: attach: the OTP node did not answer status"
    elif ft calls ftold lists:seq/2 --for 1s >"$out" 2>&1; then
        cat "$out"; say "$release: attach: calls on an old OTP did not fail"
    elif ! { [ "$(wc -l <"$out")" = 1 ] && grep -Eq '^ferrotrace: .* runs Erlang/OTP 2[0-4]; ferrotrace needs OTP 25 or later$' "$out"; }; then
        cat "$out"; say "$release: attach: not the one-line refusal"
    else
        say "$release: attach: $(cat "$out")"
        ft status ftold >"$out" 2>&1 && grep -q 'ferrotrace is not loaded' "$out" && ok=1 \
            || { cat "$out"; say "$release: attach: something was loaded"; }
    fi
    kill "$node" 2>/dev/null; wait "$node" 2>/dev/null
    for i in $(seq 50); do ERL_EPMD_PORT=$port epmd -kill >/dev/null 2>&1 && break; sleep 0.2; done
    umount_all || ok=0
    ((ok == 1)) || { say "$release: FAILED in $((SECONDS - started)) s"; return 1; }
    say "$release: passed in $((SECONDS - started)) s"
}

total=$SECONDS
# The chroots are built at the same time (mostly downloads and dpkg); each builder has its
# own mounts and its own trap.
builders=()
for release in "${releases[@]}"; do
    case $release in trixie | sid | bullseye) ;; *) die "unknown release '$release' (trixie, sid or bullseye)";; esac
    # Prometheus too where the metrics suite will run (FERROTRACE_OTP_PREPARE_ONLY=1 then
    # leaves nothing to install for the checks).
    ( trap cleanup EXIT; prepare "$release"
      case "$release: $suites_to_run " in bullseye:*) ;; *" ferrotrace_metrics_SUITE "*) ensure_prometheus "$release";; esac ) &
    builders+=($!)
done
failed=0
for pid in "${builders[@]}"; do wait "$pid" || failed=1; done
((failed == 0)) || die "building a chroot failed"
[ -n "${FERROTRACE_OTP_PREPARE_ONLY:-}" ] && exit 0
failed=()
for release in "${releases[@]}"; do
    if [ "$release" = bullseye ]; then check_old "$release" || failed+=("$release")
    else check "$release" || failed+=("$release"); fi
done
if ((${#failed[@]} > 0)); then
    for release in "${failed[@]}"; do
        [ -f "$chroots/$release.check.log" ] || continue
        say "$release: what failed (from $chroots/$release.check.log):"
        grep -E -A12 'failed|FAILED|\*\*\* |=result|Reason|timed out|timetrap' "$chroots/$release.check.log" | tail -120
    done
    die "${failed[*]} failed (after $((SECONDS - total)) s)"
fi
say "all passed (${releases[*]}) in $((SECONDS - total)) s"
