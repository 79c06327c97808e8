//! The session NIFs, called by the `ferrotrace` Erlang API (not on the hot path): start,
//! stop, release, the summary and its call entries, histograms, intervals, and the patterns
//! and loops the keeper sets. They are exported by `ferrotrace_tracer` because one NIF
//! library serves one module; users call `ferrotrace`, which documents them.

use rustler::types::map::MapIterator;
use rustler::{Atom, Encoder, Env, LocalPid, NifResult, Term};

use rustler::OwnedEnv;

use ferrotrace_core::aggregate::{FunctionStats, MfaPattern, PairingCounters, RELATIVE_ERROR, SIGNIFICANT_DIGITS};
use hdrhistogram::Histogram;
use ferrotrace_core::event::Mfa;
use ferrotrace_core::options::{self, OptionError, OptionValue};
use ferrotrace_core::clock;
use ferrotrace_core::session::{self, Accounting, Notifier, Session, StartError, StopReason, Stopped, SystemAnchor};
use super::lookup::{decode_mfa, find};
use super::reply::{error, map, mfa_term};
use super::{keys, own, probe, slow};
use crate::encoding::immediate::{kept_term, Immediate};

mod atoms {
    rustler::atoms! {
        ok, undefined, running, stopped,
        bad_options, unknown_option, bad_option, too_many_sessions, thread_spawn_failed,
        bad_mfa, no_such_function,
        id, status, stop_reason, started_at, stopped_at, elapsed_ms, calls, events, pairing, memory,
        seen, aggregated, dropped, ignored, sampled_out, limited, args_dropped,
        unmatched_returns, abandoned_calls, untracked_events, open_calls, processes,
        ring_bytes, functions, collector_cpu_ns, aggregators, ring_alloc_failures, ferrotrace_stopped,
        mfa, count, returns, exceptions, total,
        user, owner_down, duration, loops, foreign_events, bad_spec, ferrotrace_loops,
        backlog, ring_peak, ring_size, longest_gap_us, frames_refused, fuse_refused, untraced, born, untraced_pids, max_frames, max_frames_pid, sample,
        precision, significant_digits, relative_error, bad_module, open, exited,
    }
}

fn option_value(term: Term) -> OptionValue {
    if let Ok(i) = term.decode::<i64>() {
        OptionValue::Integer(i)
    } else if let Ok((a, b, c)) = term.decode::<(i64, i64, i64)>() {
        OptionValue::IntegerTriple(a, b, c)
    } else if let Ok((n, ms)) = term.decode::<(i64, i64)>() {
        OptionValue::IntegerPair(n, ms)
    } else if let Ok((form, n)) = term.decode::<(Atom, i64)>() {
        form.to_term(term.get_env()).atom_to_string().map_or(OptionValue::Other, |form| OptionValue::Tagged(form, n))
    } else if term.is_atom() {
        term.atom_to_string().map_or(OptionValue::Other, OptionValue::Atom)
    } else {
        OptionValue::Other
    }
}

/// Releases sessions whose keeper process is gone (it was killed before it could release
/// them), so their slots and statistics cannot leak.
fn release_orphans(env: Env) {
    for orphan in session::all() {
        let keeper = kept_term(env, orphan.keeper);
        if keeper.decode::<LocalPid>().is_ok_and(|pid| !pid.is_alive(env)) {
            session::release(orphan.id);
        }
    }
}

/// `{error, {unknown_option, Key, Names}}`: `Names` are the engine's options, as atoms, to
/// which the Erlang API adds its own when it explains the error.
fn unknown_option<'a>(env: Env<'a>, key: Term<'a>) -> Term<'a> {
    let names: Vec<Atom> = options::names().filter_map(|name| Atom::from_str(env, name).ok()).collect();
    error(env, (atoms::unknown_option(), key, names))
}

/// The engine's configuration read from `opts`, or the `{error, Reason}` term that names
/// the problem: a map is required, every key an option the engine takes, every value one its
/// option accepts.
fn read_config<'a>(env: Env<'a>, opts: Term<'a>) -> Result<options::Config, Term<'a>> {
    let Some(iter) = MapIterator::new(opts) else {
        return Err(error(env, (atoms::bad_options(), opts)));
    };
    let mut pairs = Vec::new();
    let mut terms = Vec::new();
    for (key, value) in iter {
        if !key.is_atom() {
            return Err(unknown_option(env, key));
        }
        pairs.push((key.atom_to_string().unwrap_or_default(), option_value(value)));
        terms.push((key, value));
    }
    options::parse(&pairs).map_err(|err| match err {
        OptionError::Unknown { index } => unknown_option(env, terms[index].0),
        OptionError::BadValue { index, expected } => {
            let (key, value) = terms[index];
            error(env, (atoms::bad_option(), (key, value, expected)))
        }
    })
}

/// `check_options(Options :: map()) -> ok | {error, Reason}`: what `new_session/2` would
/// answer of `Options`, with no session made, so that a start refuses bad options before its
/// slower steps (the calibration, the budget's count). Dirty, as `new_session/2`: the map
/// is the caller's, of any size.
#[rustler::nif(schedule = "DirtyCpu")]
fn check_options<'a>(env: Env<'a>, opts: Term<'a>) -> Term<'a> {
    match read_config(env, opts) {
        Ok(_) => atoms::ok().encode(env),
        Err(refusal) => refusal,
    }
}

/// `new_session(Options :: map(), Keeper :: pid()) -> {ok, Id} | {error, Reason}`.
/// Dirty: it may first release orphaned sessions, which joins their collector threads.
#[rustler::nif(schedule = "DirtyCpu")]
fn new_session<'a>(env: Env<'a>, opts: Term<'a>, keeper: LocalPid) -> Term<'a> {
    let config = match read_config(env, opts) {
        Ok(config) => config,
        Err(refusal) => return refusal,
    };
    release_orphans(env);
    let keeper_bits = Immediate::of_pid(env, &keeper).bits();
    match session::start(config, keeper_bits, Some(stop_notifier(keeper)), vm_anchor())
        .inspect(|s| s.on_loops(loop_notifier(keeper)))
    {
        Ok(session) => (atoms::ok(), session.id).encode(env),
        Err(StartError::TooManySessions) => error(env, (atoms::too_many_sessions(), session::MAX_SESSIONS)),
        Err(StartError::Thread) => error(env, atoms::thread_spawn_failed()),
    }
}

/// The VM's system time (`erlang:system_time/1`'s) with a tick of the session clock read
/// beside it: the session's times then agree with the Erlang side's stamps (a capture's
/// `at`, the registry's `started_at`) even after the OS clock was stepped, which the VM does
/// not follow at once (a capture read 3.1 s before its call's start, on a CI machine).
fn vm_anchor() -> SystemAnchor {
    // SAFETY: both read the VM's clocks and take a unit only; callable from any scheduler
    // thread, dirty ones included (this NIF runs on one).
    let vm_ns = unsafe {
        rustler::sys::enif_monotonic_time(rustler::sys::ErlNifTimeUnit::ERL_NIF_NSEC)
            + rustler::sys::enif_time_offset(rustler::sys::ErlNifTimeUnit::ERL_NIF_NSEC)
    };
    SystemAnchor { ticks: clock::now(), system_ns: i128::from(vm_ns) }
}

/// Tells `keeper` `{ferrotrace_stopped, Id, Reason}` when the session stops, whatever stops
/// it. Called on the session's collector thread (not an ERTS thread), as its last act, which
/// is what `OwnedEnv::send_and_clear` requires.
fn stop_notifier(keeper: LocalPid) -> Notifier {
    Box::new(move |id: u64, stopped: Stopped| {
        let mut owned = OwnedEnv::new();
        // A keeper already gone makes the send fail: nothing to tell.
        let _ = owned.send_and_clear(&keeper, |env| {
            let reason = Atom::from_str(env, stopped.reason.name()).map_or_else(|_| rustler::types::atom::error().encode(env), |a| a.encode(env));
            (atoms::ferrotrace_stopped(), id, reason).encode(env)
        });
    })
}

/// Tells `keeper` `{ferrotrace_loops, Id, [MFA]}` when the aggregator takes functions for
/// tail-recursive loops (one process nesting a function 4,096 deep without a return): the
/// keeper stops return tracing them. Called on the collector thread, like `stop_notifier`.
fn loop_notifier(keeper: LocalPid) -> session::LoopNotifier {
    Box::new(move |id: u64, loops: Vec<Mfa>| {
        let mut owned = OwnedEnv::new();
        let _ = owned.send_and_clear(&keeper, |env| {
            let loops: Vec<Term> = loops.iter().map(|mfa| mfa_term(env, mfa)).collect();
            (atoms::ferrotrace_loops(), id, loops).encode(env)
        });
    })
}

/// `stop_session(Id, Reason :: user | owner_down) -> ok | {error, Reason}`: stops tracing,
/// drains and frees the rings, joins the collector. Statistics stay readable.
#[rustler::nif(schedule = "DirtyCpu")]
fn stop_session<'a>(env: Env<'a>, id: Term<'a>, reason: Atom) -> Term<'a> {
    let reason = if reason == atoms::owner_down() {
        StopReason::OwnerDown
    } else if reason == atoms::duration() {
        StopReason::Duration
    } else {
        StopReason::User
    };
    match find(env, id) {
        Ok(session) => {
            session.stop(reason);
            atoms::ok().encode(env)
        }
        Err(e) => e,
    }
}

/// `release_session(Id) -> ok | {error, Reason}`: stops the session and frees everything.
#[rustler::nif(schedule = "DirtyCpu")]
fn release_session<'a>(env: Env<'a>, id: Term<'a>) -> Term<'a> {
    match find(env, id) {
        Ok(session) => {
            session::release(session.id);
            atoms::ok().encode(env)
        }
        Err(e) => e,
    }
}

/// `sessions() -> [Id]`: every session not yet released.
#[rustler::nif]
fn sessions() -> Vec<u64> {
    session::all().iter().map(|s| s.id).collect()
}

fn function_term<'a>(env: Env<'a>, session: &Session, mfa: &Mfa, stats: &FunctionStats, compensates: bool) -> Term<'a> {
    let entry = figures_term(env, mfa, (stats.calls, stats.returns, stats.exceptions, stats.total_ns), &stats.latency.to_hdr());
    let entry = entry.map_put(atoms::max_frames().encode(env), stats.max_frames.encode(env)).unwrap_or(entry);
    let entry = match stats.max_frames_pid {
        0 => entry,
        pid => entry.map_put(atoms::max_frames_pid().encode(env), kept_term(env, pid)).unwrap_or(entry),
    };
    let entry = slow::add_keys(env, entry, stats, session.system_offset());
    let entry = keys::add_keys(env, entry, stats, session.config.keys.source);
    let entry = probe::add_keys(env, entry, stats, compensates);
    own::add_keys(env, entry, stats)
}

/// The map of one function's figures: `(calls, returns, exceptions, total_ns)` and the
/// latency histogram they go with (cumulative, or of one interval).
fn figures_term<'a>(env: Env<'a>, mfa: &Mfa, counts: (u64, u64, u64, u64), h: &Histogram<u64>) -> Term<'a> {
    let (calls, returns, exceptions, total_ns) = counts;
    super::distribution::quantiles(env, h, Some(total_ns), &[
        (atoms::mfa(), mfa_term(env, mfa)),
        (atoms::count(), calls.encode(env)),
        (atoms::returns(), returns.encode(env)),
        (atoms::exceptions(), exceptions.encode(env)),
    ])
}

fn accounting_term<'a>(env: Env<'a>, a: &Accounting) -> Term<'a> {
    map(env, &[
        (atoms::seen(), a.seen.encode(env)),
        (atoms::aggregated(), a.aggregated.encode(env)),
        (atoms::dropped(), a.dropped.encode(env)),
        (atoms::sampled_out(), a.sampled_out.encode(env)),
        (atoms::limited(), a.limited.encode(env)),
        (atoms::ignored(), a.ignored.encode(env)),
        (atoms::args_dropped(), a.args_dropped.encode(env)),
        (atoms::frames_refused(), a.frames_refused.encode(env)),
        (atoms::fuse_refused(), a.fuse_refused.encode(env)),
        (atoms::untraced(), a.untraced.encode(env)),
        (atoms::born(), a.born.encode(env)),
    ])
}

fn pairing_term<'a>(env: Env<'a>, p: &PairingCounters, open: usize, processes: usize) -> Term<'a> {
    map(env, &[
        (atoms::unmatched_returns(), p.unmatched_returns.encode(env)),
        (atoms::abandoned_calls(), p.abandoned_calls.encode(env)),
        (atoms::untracked_events(), p.untracked_events.encode(env)),
        (atoms::foreign_events(), p.foreign_events.encode(env)),
        (atoms::open_calls(), open.encode(env)),
        (atoms::processes(), processes.encode(env)),
    ])
}

/// The summary's `memory`: every part of [`ferrotrace_core::memory::Memory`] by
/// its name, `total`, and the counts `functions` and `ring_alloc_failures`.
fn memory_term<'a>(env: Env<'a>, memory: &ferrotrace_core::memory::Memory, functions: usize, failures: u64) -> Term<'a> {
    let mut pairs: Vec<(Atom, Term<'a>)> = memory
        .parts()
        .iter()
        .filter_map(|(name, bytes)| Some((Atom::from_str(env, name).ok()?, bytes.encode(env))))
        .collect();
    pairs.push((atoms::total(), memory.total().encode(env)));
    pairs.push((atoms::functions(), functions.encode(env)));
    pairs.push((atoms::ring_alloc_failures(), failures.encode(env)));
    map(env, &pairs)
}

/// `session_summary(Id) -> {ok, map()} | {error, Reason}`; see `ferrotrace:summary/1`.
#[rustler::nif(schedule = "DirtyCpu")]
fn session_summary<'a>(env: Env<'a>, id: Term<'a>) -> Term<'a> {
    let session = match find(env, id) {
        Ok(session) => session,
        Err(e) => return e,
    };
    let (backlog, ring_size) = session.backlog();
    let stopped = session.stopped();
    let (status, reason, stopped_at) = match stopped {
        Some(s) => (atoms::stopped(), Atom::from_str(env, s.reason.name()).expect("atom").encode(env), s.at_ms.encode(env)),
        None => (atoms::running(), atoms::undefined().encode(env), atoms::undefined().encode(env)),
    };
    session.read_with_memory(|agg, accounting, memory| {
        let compensates = agg.compensation().is_some();
        let calls: Vec<Term> = agg.functions().map(|(mfa, stats)| function_term(env, &session, mfa, stats, compensates)).collect();
        let summary = map(env, &[
            (atoms::id(), session.id.encode(env)),
            (atoms::status(), status.encode(env)),
            (atoms::stop_reason(), reason),
            (atoms::started_at(), session.started_ms.encode(env)),
            (atoms::stopped_at(), stopped_at),
            (atoms::elapsed_ms(), session.elapsed_ms().encode(env)),
            (atoms::calls(), calls.encode(env)),
            (atoms::loops(), agg.loops().map(|mfa| mfa_term(env, mfa)).collect::<Vec<_>>().encode(env)),
            (atoms::events(), accounting_term(env, &accounting)),
            (atoms::pairing(), pairing_term(env, &agg.counters(), agg.open_calls(), agg.tracked_processes())),
            (atoms::memory(), memory_term(env, &memory, agg.functions().count(), session.ring_alloc_failures())),
            (atoms::collector_cpu_ns(), session.collector_cpu_ns().encode(env)),
            (atoms::aggregators(), session.aggregators().encode(env)),
            // What every percentile and maximum of the histograms is within.
            (atoms::precision(), map(env, &[
                (atoms::significant_digits(), SIGNIFICANT_DIGITS.encode(env)),
                (atoms::relative_error(), RELATIVE_ERROR.encode(env)),
            ])),
            // The current rates: `calls` may have changed since the start.
            (atoms::sample(), map(env, &[
                (atoms::processes(), session.config.sample.encode(env)),
                (atoms::calls(), session::call_sample(session.id).encode(env)),
            ])),
            (atoms::backlog(), map(env, &[
                (atoms::ring_peak(), backlog.ring_peak.encode(env)),
                (atoms::ring_size(), ring_size.encode(env)),
                (atoms::longest_gap_us(), (backlog.longest_gap_ns / 1_000).encode(env)),
            ])),
        ]);
        (atoms::ok(), summary).encode(env)
    })
}

/// A session's `status` and `stop_reason` (`undefined` while it runs), as the summary,
/// `session_status` and `session_interval` give them.
fn status_terms<'a>(env: Env<'a>, session: &Session) -> (Atom, Term<'a>) {
    match session.stopped() {
        Some(s) => (atoms::stopped(), Atom::from_str(env, s.reason.name()).expect("atom").encode(env)),
        None => (atoms::running(), atoms::undefined().encode(env)),
    }
}

/// `session_status(Id) -> {ok, #{status, stop_reason, elapsed_ms}} | {error, Reason}`: whether
/// the session runs, and why it stopped, as in the summary, without bringing any figure up to
/// date (no collection, no aggregator read): what `ferrotrace:list/0` and each part of a
/// cluster session (every 200 ms) need. They read the whole summary before: 4 to 65 ms of a
/// dirty scheduler on yaws under load.
#[rustler::nif(schedule = "DirtyCpu")]
fn session_status<'a>(env: Env<'a>, id: Term<'a>) -> Term<'a> {
    let session = match find(env, id) {
        Ok(session) => session,
        Err(e) => return e,
    };
    let (status, reason) = status_terms(env, &session);
    let status = map(env, &[
        (atoms::status(), status.encode(env)),
        (atoms::stop_reason(), reason),
        (atoms::elapsed_ms(), session.elapsed_ms().encode(env)),
    ]);
    (atoms::ok(), status).encode(env)
}

/// `session_counts(Id) -> {ok, #{status, elapsed_ms, events, collector_cpu_ns, calls,
/// untraced_pids}} | {error, Reason}`: what the overhead budget's tick reads
/// (`ferrotrace_overhead`), several times a second: the summary's counters of the same names
/// (`events` with `seen`, `sampled_out`, `frames_refused`, `fuse_refused`, `untraced` and
/// `born`),
/// `calls` as `[{MFA, Count}]`, calls seen per function, and the processes the fuse untraced
/// since the last read (taken: each is given once). No histogram is read: on yaws under load a summary took 4 to 47 ms of a dirty
/// scheduler, and each of the budget's first ticks came every 250 ms.
#[rustler::nif(schedule = "DirtyCpu")]
fn session_counts<'a>(env: Env<'a>, id: Term<'a>) -> Term<'a> {
    let session = match find(env, id) {
        Ok(session) => session,
        Err(e) => return e,
    };
    let status = match session.stopped() {
        Some(_) => atoms::stopped(),
        None => atoms::running(),
    };
    let (accounting, counts, untraced) = session.call_counts();
    let calls: Vec<Term> = counts.iter().map(|(mfa, calls)| (mfa_term(env, mfa), *calls).encode(env)).collect();
    // The aggregators keep local pids' words (`enabled_call`'s `Immediate::local_pid`):
    // checked again by their tag before they become pids.
    let untraced: Vec<Term> = untraced.into_iter().filter_map(Immediate::kept_pid).map(|pid| pid.term(env)).collect();
    let counts = map(env, &[
        (atoms::status(), status.encode(env)),
        (atoms::elapsed_ms(), session.elapsed_ms().encode(env)),
        (atoms::events(), map(env, &[
            (atoms::seen(), accounting.seen.encode(env)),
            (atoms::sampled_out(), accounting.sampled_out.encode(env)),
            (atoms::frames_refused(), accounting.frames_refused.encode(env)),
            (atoms::fuse_refused(), accounting.fuse_refused.encode(env)),
            (atoms::untraced(), accounting.untraced.encode(env)),
            (atoms::born(), accounting.born.encode(env)),
        ])),
        (atoms::collector_cpu_ns(), session.collector_cpu_ns().encode(env)),
        (atoms::calls(), calls.encode(env)),
        (atoms::untraced_pids(), untraced.encode(env)),
    ]);
    (atoms::ok(), counts).encode(env)
}

/// `session_settle_exits(Id) -> {ok, #{open := N, exited := M}} | {error, Reason}`: the calls
/// left open by processes that died inside them are forgotten (abandoned, as at an exit
/// event): `open` processes had calls open, `exited` of them were dead. A calls-only session
/// traces no `procs`, so the VM sends it no exit; its keeper calls this every second, and a
/// summary first. Nothing for a stopped session or one that traces activity (its exits
/// come from the VM). Dirty: two collections, and a liveness check per process.
#[rustler::nif(schedule = "DirtyCpu")]
fn session_settle_exits<'a>(env: Env<'a>, id: Term<'a>) -> Term<'a> {
    let session = match find(env, id) {
        Ok(session) => session,
        Err(e) => return e,
    };
    // The aggregators keep local pids' words (`enabled_call`'s `Immediate::local_pid`):
    // checked again by their tag before they become pids; a word that is not one is taken
    // for a live process (its calls stay open, as they would have).
    let alive = |word: u64| match Immediate::kept_pid(word).map(|pid| pid.term(env).decode::<LocalPid>()) {
        Some(Ok(pid)) => env.is_process_alive(pid),
        _ => true,
    };
    let (open, exited) = session.settle_exits(alive);
    let counts = map(env, &[(atoms::open(), open.encode(env)), (atoms::exited(), exited.encode(env))]);
    (atoms::ok(), counts).encode(env)
}

/// `session_interval(Id) -> {ok, #{elapsed_ms, calls, status, stop_reason}} | {error, Reason}`:
/// the figures of the interval since the previous call (or since the session started), one
/// map per function with something in it (keys as in `session_summary`'s `calls`), then a
/// new interval begins. `elapsed_ms` is the interval's length, up to the stop of a stopped
/// session. See `ferrotrace:watch/2`.
#[rustler::nif(schedule = "DirtyCpu")]
fn session_interval<'a>(env: Env<'a>, id: Term<'a>) -> Term<'a> {
    let session = match find(env, id) {
        Ok(session) => session,
        Err(e) => return e,
    };
    let (status, reason) = status_terms(env, &session);
    session.with_aggregates(|aggregates| {
        // Read after the collection (the aggregators as it left them): the session's own clock.
        let now_ms = session.started_ms + session.elapsed_ms();
        let agg = aggregates.view();
        let since = agg.interval_started_ms().unwrap_or(session.started_ms);
        let calls: Vec<Term> = agg
            .interval()
            .map(|(mfa, i)| figures_term(env, mfa, (i.calls, i.returns, i.exceptions, i.total_ns), &i.latency.to_hdr()))
            .collect();
        aggregates.for_each_mut(|agg| agg.reset_interval(now_ms));
        let figures = map(env, &[
            (atoms::elapsed_ms(), now_ms.saturating_sub(since).encode(env)),
            (atoms::calls(), calls.encode(env)),
            (atoms::status(), status.encode(env)),
            (atoms::stop_reason(), reason),
        ]);
        (atoms::ok(), figures).encode(env)
    })
}

/// `session_histogram(Id, {M, F, A}) -> {ok, [{LowNs, HighNs, Count}]} | {error, Reason}`.
#[rustler::nif(schedule = "DirtyCpu")]
fn session_histogram<'a>(env: Env<'a>, id: Term<'a>, mfa: Term<'a>) -> Term<'a> {
    let session = match find(env, id) {
        Ok(session) => session,
        Err(e) => return e,
    };
    let Some(key) = decode_mfa(env, mfa) else { return error(env, (atoms::bad_mfa(), mfa)) };
    session.read(|aggregator, _| match aggregator.function(&key) {
        Some(stats) => (atoms::ok(), super::distribution::log2_buckets(&stats.latency.to_hdr())).encode(env),
        None => error(env, (atoms::no_such_function(), mfa)),
    })
}

/// `session_add_loops(Id, [MFA]) -> ok | {error, Reason}`: the keeper has stopped return
/// tracing these functions (loops the engine found at run time): their calls are counted, not
/// paired, and their open frames no longer count against the frame bound.
#[rustler::nif(schedule = "DirtyCpu")]
fn session_add_loops<'a>(env: Env<'a>, id: Term<'a>, loops: Vec<Term<'a>>) -> Term<'a> {
    let session = match find(env, id) {
        Ok(session) => session,
        Err(e) => return e,
    };
    let mut mfas = Vec::with_capacity(loops.len());
    for mfa in loops {
        match decode_mfa(env, mfa) {
            Some(mfa) => mfas.push(mfa),
            None => return error(env, (atoms::bad_mfa(), mfa)),
        }
    }
    // The callbacks stop counting the loops' calls on the frame table first; the
    // aggregators settle those stamped before.
    let since = ferrotrace_core::clock::to_ns(ferrotrace_core::clock::now());
    if let Some(frames) = session::frames_of(session.id) {
        frames.add_loops(&mfas);
    }
    session.with_aggregates(|aggregates| aggregates.for_each_mut(|aggregator| aggregator.set_loops_since(&mfas, since)));
    atoms::ok().encode(env)
}

/// A spec `{M | '_', F | '_', A | '_'}` as a filter pattern.
pub(super) fn decode_pattern(term: Term) -> NifResult<MfaPattern> {
    let (m, f, a): (Term, Term, Term) = term.decode()?;
    let any = |t: Term| t.is_atom() && t.atom_to_string().is_ok_and(|s| s == "_");
    let atom = |t: Term| -> NifResult<Option<u64>> {
        if any(t) {
            return Ok(None);
        }
        // SAFETY: `t` is a term of this NIF call's env.
        let word = unsafe { Immediate::atom(t.get_env().as_c_arg(), t.as_c_arg()) };
        word.map(|atom| Some(atom.bits())).ok_or(rustler::Error::BadArg)
    };
    let arity = if any(a) { None } else { Some(a.decode::<u32>().ok().filter(|a| *a <= 255).ok_or(rustler::Error::BadArg)?) };
    Ok(MfaPattern { module: atom(m)?, function: atom(f)?, arity })
}

/// `session_exclude_modules(Id, Modules) -> ok | {error, Reason}`: the session never
/// aggregates the functions of `Modules` (atoms), whatever its specs: ferrotrace's own,
/// which a `'_'` module's pattern covers until the keeper takes them off. Their events are
/// counted in `foreign_events`.
#[rustler::nif(schedule = "DirtyCpu")]
fn session_exclude_modules<'a>(env: Env<'a>, id: Term<'a>, modules: Vec<Term<'a>>) -> Term<'a> {
    let session = match find(env, id) {
        Ok(session) => session,
        Err(e) => return e,
    };
    let mut atoms = Vec::with_capacity(modules.len());
    for module in modules {
        // SAFETY: `module` is a term of this NIF call's env.
        match unsafe { Immediate::atom(env.as_c_arg(), module.as_c_arg()) } {
            Some(atom) => atoms.push(atom.bits()),
            None => return error(env, (atoms::bad_module(), module)),
        }
    }
    session.with_aggregates(|aggregates| aggregates.for_each_mut(|aggregator| aggregator.exclude_modules(atoms.clone())));
    atoms::ok().encode(env)
}

/// `session_set_tracing(Id, Specs, Loops) -> ok | {error, Reason}`: the session aggregates
/// only the functions `Specs` match (others are counted as `foreign_events`), and counts the
/// calls of `Loops` (traced without return tracing) without pairing them.
#[rustler::nif(schedule = "DirtyCpu")]
fn session_set_tracing<'a>(env: Env<'a>, id: Term<'a>, specs: Vec<Term<'a>>, loops: Vec<Term<'a>>) -> Term<'a> {
    let session = match find(env, id) {
        Ok(session) => session,
        Err(e) => return e,
    };
    let mut patterns = Vec::with_capacity(specs.len());
    for spec in specs {
        match decode_pattern(spec) {
            Ok(pattern) => patterns.push(pattern),
            Err(_) => return error(env, (atoms::bad_spec(), spec)),
        }
    }
    let mut mfas = Vec::with_capacity(loops.len());
    for mfa in loops {
        match decode_mfa(env, mfa) {
            Some(mfa) => mfas.push(mfa),
            None => return error(env, (atoms::bad_mfa(), mfa)),
        }
    }
    // Loops found in the code are traced count-only from the start: the callbacks never
    // count their calls on the frame table.
    if let Some(frames) = session::frames_of(session.id) {
        frames.add_loops(&mfas);
    }
    session.with_aggregates(|aggregates| {
        aggregates.for_each_mut(|aggregator| {
            aggregator.set_filter(patterns.clone());
            aggregator.set_loops(&mfas);
        })
    });
    atoms::ok().encode(env)
}
