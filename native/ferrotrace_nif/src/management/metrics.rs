//! `session_metrics/3`: what a Prometheus scrape of a session reads (`ferrotrace_metrics`),
//! in one read of the figures: each function's counts, exact latency sum and cumulative
//! counts at the scrape's fixed bounds; the activity series the same way; the events'
//! accounting and the memory held. Nothing else: no percentile, no own time, no slow
//! call, so a scrape of 1,000 functions stays a walk over their buckets (the summary, which
//! reads all of those, took 4 to 65 ms of a dirty scheduler on a loaded node).

use hdrhistogram::Histogram;
use rustler::{Encoder, Env, Term};

use ferrotrace_core::aggregate::activity::ActivityStats;

use super::lookup::find;
use super::reply::{error, map, mfa_term};

mod atoms {
    rustler::atoms! {
        ok, bad_bounds, status, running, stopped, elapsed_ms, events, memory, functions,
        series, seen, aggregated, dropped, sampled_out, limited, frames_refused,
        fuse_refused, untraced, args_dropped, wakeup, run_slice, gc_minor, gc_major,
        message_size, lifetime, port_run_slice, open_calls,
    }
}

/// At most this many bounds a series (Prometheus histograms rarely have more than 30).
const MAX_BOUNDS: usize = 200;

/// `bounds` if it is a strictly ascending list of at most `MAX_BOUNDS`, else `None`.
fn checked(bounds: Vec<u64>) -> Option<Vec<u64>> {
    (bounds.len() <= MAX_BOUNDS && bounds.windows(2).all(|w| w[0] < w[1])).then_some(bounds)
}

/// How many values `h` recorded at or below each bound, as `Compact::cumulative_at` reads a
/// function's: a bucket counts at a bound when its lowest value does.
fn cumulative_at(h: &Histogram<u64>, bounds: &[u64]) -> Vec<u64> {
    let mut recorded = h.iter_recorded().peekable();
    let mut sum = 0u64;
    bounds
        .iter()
        .map(|&bound| {
            while let Some(v) = recorded.peek() {
                if h.lowest_equivalent(v.value_iterated_to()) > bound {
                    break;
                }
                sum = sum.saturating_add(v.count_at_value());
                recorded.next();
            }
            sum
        })
        .collect()
}

/// `{Name, Count, Sum, Cumulative}` of one activity series: its sum is HdrHistogram's (each
/// value at the middle of its bucket: within the histograms' precision), no exact one is kept.
fn series<'a>(env: Env<'a>, name: rustler::Atom, h: &Histogram<u64>, bounds: &[u64]) -> Term<'a> {
    let sum = if h.is_empty() { 0 } else { (h.mean() * h.len() as f64).round() as u64 };
    (name, h.len(), sum, cumulative_at(h, bounds)).encode(env)
}

/// The activity series with values, each against its bounds (times in ns, sizes in words).
fn activity<'a>(env: Env<'a>, t: &ActivityStats, times: &[u64], words: &[u64]) -> Vec<Term<'a>> {
    let timed: [(rustler::Atom, &Histogram<u64>); 6] = [
        (atoms::wakeup(), &t.messages.wakeup),
        (atoms::run_slice(), &t.scheduling.run_slice),
        (atoms::gc_minor(), &t.gc.minor),
        (atoms::gc_major(), &t.gc.major),
        (atoms::lifetime(), &t.procs.lifetime),
        (atoms::port_run_slice(), &t.ports.run_slice),
    ];
    let mut out: Vec<Term<'a>> = timed
        .into_iter()
        .filter(|(_, h)| !h.is_empty())
        .map(|(name, h)| series(env, name, h, times))
        .collect();
    let sizes = t.messages.size_words();
    if !sizes.is_empty() {
        out.push(series(env, atoms::message_size(), sizes, words));
    }
    out
}

/// `session_metrics(Id, TimeBoundsNs, SizeBoundsWords) -> {ok, #{status, elapsed_ms,
/// events, memory, open_calls, functions, series}} | {error, Reason}`: the figures a scrape
/// serves, read in one pass under the session's read lock, on a dirty scheduler.
/// - `functions`: `[{{M, F, A}, Calls, Exceptions, TotalNs, Count, Cumulative}]`, `Count`
///   the latencies recorded (returns and exceptions paired), `Cumulative` how many of them
///   at or below each time bound (see `Compact::cumulative_at`), `TotalNs` their exact sum;
/// - `series`: `[{Name, Count, SumNs, Cumulative}]` of the activity histograms that have
///   values (`wakeup`, `run_slice`, `gc_minor`, `gc_major`, `lifetime`, `port_run_slice`
///   against the time bounds; `message_size` in words against the size bounds);
/// - `events`: the summary's accounting; `memory`: the bytes the session holds (`total`).
///
/// Bounds must be strictly ascending, at most 200 each: `{error, {bad_bounds, Which}}`.
#[rustler::nif(schedule = "DirtyCpu")]
fn session_metrics<'a>(env: Env<'a>, id: Term<'a>, times: Term<'a>, words: Term<'a>) -> Term<'a> {
    let Some(times) = times.decode::<Vec<u64>>().ok().and_then(checked) else {
        return error(env, (atoms::bad_bounds(), times));
    };
    let Some(words) = words.decode::<Vec<u64>>().ok().and_then(checked) else {
        return error(env, (atoms::bad_bounds(), words));
    };
    let session = match find(env, id) {
        Ok(session) => session,
        Err(e) => return e,
    };
    let status = if session.stopped().is_some() { atoms::stopped() } else { atoms::running() };
    session.read_with_memory(|agg, a, memory| {
        let functions: Vec<Term<'a>> = agg
            .functions()
            .map(|(mfa, stats)| {
                (
                    mfa_term(env, mfa),
                    stats.calls,
                    stats.exceptions,
                    stats.total_ns,
                    stats.latency.len(),
                    stats.latency.cumulative_at(&times),
                )
                    .encode(env)
            })
            .collect();
        let events = map(env, &[
            (atoms::seen(), a.seen.encode(env)),
            (atoms::aggregated(), a.aggregated.encode(env)),
            (atoms::dropped(), a.dropped.encode(env)),
            (atoms::sampled_out(), a.sampled_out.encode(env)),
            (atoms::limited(), a.limited.encode(env)),
            (atoms::frames_refused(), a.frames_refused.encode(env)),
            (atoms::fuse_refused(), a.fuse_refused.encode(env)),
            (atoms::untraced(), a.untraced.encode(env)),
            (atoms::args_dropped(), a.args_dropped.encode(env)),
        ]);
        let figures = map(env, &[
            (atoms::status(), status.encode(env)),
            (atoms::elapsed_ms(), session.elapsed_ms().encode(env)),
            (atoms::events(), events),
            (atoms::memory(), memory.total().encode(env)),
            (atoms::open_calls(), agg.open_calls().encode(env)),
            (atoms::functions(), functions.encode(env)),
            (atoms::series(), activity(env, &agg.activity, &times, &words).encode(env)),
        ]);
        (atoms::ok(), figures).encode(env)
    })
}
