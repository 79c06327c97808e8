//! The `own` key of each call entry in the summary: own (exclusive) time, see
//! `ferrotrace_core::aggregate::own`.

use rustler::{Encoder, Env, Term};

use ferrotrace_core::aggregate::FunctionStats;

use super::map;

mod atoms {
    rustler::atoms! { own, total, mean, p50, p90, p99, p999, max, undefined }
}

/// Adds `own => #{total, mean, p50, p90, p99, p999, max}` (ns; `undefined` before the first
/// paired call) to a function's summary entry.
pub(super) fn add_keys<'a>(env: Env<'a>, entry: Term<'a>, stats: &FunctionStats) -> Term<'a> {
    let h = &stats.own.latency;
    let has = !h.is_empty();
    let value = |v: Option<u64>| v.map_or_else(|| atoms::undefined().encode(env), |v| v.encode(env));
    let q = |quantile: f64| value(has.then(|| h.value_at_quantile(quantile)));
    let own = map(env, &[
        (atoms::total(), stats.own.total_ns.encode(env)),
        (atoms::mean(), value(has.then(|| h.mean().round() as u64))),
        (atoms::p50(), q(0.5)),
        (atoms::p90(), q(0.9)),
        (atoms::p99(), q(0.99)),
        (atoms::p999(), q(0.999)),
        (atoms::max(), value(has.then(|| h.max()))),
    ]);
    entry.map_put(atoms::own().encode(env), own).unwrap_or(entry)
}
