//! The `own` key of each call entry in the summary: own (exclusive) time, see
//! `ferrotrace_core::aggregate::own`.

use rustler::{Encoder, Env, Term};

use ferrotrace_core::aggregate::FunctionStats;

use super::distribution;

mod atoms {
    rustler::atoms! { own }
}

/// Adds `own => #{total, mean, p50, p90, p99, p999, max}` (ns; `undefined` before the first
/// paired call) to a function's summary entry.
pub(super) fn add_keys<'a>(env: Env<'a>, entry: Term<'a>, stats: &FunctionStats) -> Term<'a> {
    let own = distribution::quantiles(env, &stats.own.latency.to_hdr(), Some(stats.own.total_ns), &[]);
    entry.map_put(atoms::own().encode(env), own).unwrap_or(entry)
}
