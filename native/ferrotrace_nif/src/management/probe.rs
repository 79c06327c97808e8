//! The `inner_events` and `raw` keys of each call entry in the summary: the probe effect,
//! see `ferrotrace_core::aggregate::probe`.

use rustler::{Encoder, Env, Term};

use ferrotrace_core::aggregate::FunctionStats;

use super::distribution;
use super::reply::map;

mod atoms {
    rustler::atoms! { inner_events, raw, mean, max, total, compensated_ns }
}

/// Adds `inner_events => #{mean, max, total, compensated_ns}` (the session's events inside
/// each paired call: mean and most per call, over all; the ns taken out of the latencies)
/// and, if the session compensates, `raw => #{total, mean, p50, p90, p99, p999, max}` (the
/// latency as measured) to a function's summary entry.
pub(super) fn add_keys<'a>(env: Env<'a>, entry: Term<'a>, stats: &FunctionStats, compensates: bool) -> Term<'a> {
    let paired = stats.latency.len();
    // One decimal: 0.1 event per call is as fine as the report shows.
    let mean = if paired == 0 { 0.0 } else { (stats.inner.total as f64 / paired as f64 * 10.0).round() / 10.0 };
    let inner = map(env, &[
        (atoms::mean(), mean.encode(env)),
        (atoms::max(), stats.inner.max.encode(env)),
        (atoms::total(), stats.inner.total.encode(env)),
        (atoms::compensated_ns(), stats.inner.compensated_ns.encode(env)),
    ]);
    let entry = entry.map_put(atoms::inner_events().encode(env), inner).unwrap_or(entry);
    if !compensates {
        return entry;
    }
    // No raw histogram: nothing was taken out, the latencies are the raw ones.
    let raw = match &stats.raw {
        Some(raw) => distribution::quantiles(env, &raw.latency.to_hdr(), Some(raw.total_ns), &[]),
        None => distribution::quantiles(env, &stats.latency.to_hdr(), Some(stats.total_ns), &[]),
    };
    entry.map_put(atoms::raw().encode(env), raw).unwrap_or(entry)
}
