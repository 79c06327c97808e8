//! The probe effect (see `ferrotrace_core::aggregate::probe`): the `inner_events` and `raw`
//! keys of each call entry in the summary, and `session_set_compensation/3`, which gives a
//! running session the costs its calibration measured after its start.

use rustler::{Encoder, Env, Term};

use ferrotrace_core::aggregate::probe::Compensation;
use ferrotrace_core::aggregate::FunctionStats;
use ferrotrace_core::options::COMPENSATE_RANGE;

use super::distribution;
use super::lookup::find;
use super::reply::{error, map};

mod atoms {
    rustler::atoms! { ok, inner_events, raw, mean, max, total, compensated_ns, bad_compensation }
}

/// `session_set_compensation(Id, CallNs, ReturnNs) -> ok | {error, Reason}`: session `Id`
/// takes `CallNs` per inner call event and `ReturnNs` per inner return out of the latencies
/// of the calls paired from now on (`compensate`, as `compensate_call_ns` and
/// `compensate_return_ns` at the start: a node's first calibration, measured once a start on
/// a loaded node had begun without it). `{error, {bad_compensation, {CallNs, ReturnNs},
/// Accepted}}` for costs out of range; `find`'s error for an unknown session. Dirty: it
/// takes the consumer lock, as a summary does.
#[rustler::nif(schedule = "DirtyCpu")]
fn session_set_compensation<'a>(env: Env<'a>, id: Term<'a>, call_ns: Term<'a>, return_ns: Term<'a>) -> Term<'a> {
    let cost = |t: Term| t.decode::<i64>().ok().filter(|ns| (COMPENSATE_RANGE.0..=COMPENSATE_RANGE.1).contains(ns));
    let (Some(call), Some(ret)) = (cost(call_ns), cost(return_ns)) else {
        let accepted = format!("integers from {} to {} (ns per event)", COMPENSATE_RANGE.0, COMPENSATE_RANGE.1);
        return error(env, (atoms::bad_compensation(), (call_ns, return_ns), accepted));
    };
    let session = match find(env, id) {
        Ok(session) => session,
        Err(e) => return e,
    };
    // In range, so non-negative: the casts keep the values.
    let compensation = Compensation { call_ns: call as u64, return_ns: ret as u64 };
    session.with_aggregates(|aggregates| aggregates.for_each_mut(|aggregator| aggregator.set_compensation(Some(compensation))));
    atoms::ok().encode(env)
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
