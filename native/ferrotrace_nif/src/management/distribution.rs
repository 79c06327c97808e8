//! An HDR histogram as the Erlang map of figures every summary shows: `mean, p50, p90, p99,
//! p999, max` (and `count`), `undefined` while the histogram is empty; and as the
//! power-of-two buckets `histogram/2` draws. The one place that picks those keys, quantiles
//! and buckets: a call entry, its `own` time, the process figures, the export's
//! `histogram_figures` and per-key entries all read the same.

use hdrhistogram::Histogram;
use rustler::{Atom, Encoder, Env, Term};

use super::reply::map;

mod atoms {
    rustler::atoms! { undefined, count, mean, p50, p90, p99, p999, max, total }
}

/// `v`, or `undefined` for `None` (a figure of an empty histogram).
pub(crate) fn value_or_undefined(env: Env, v: Option<u64>) -> Term {
    v.map_or_else(|| atoms::undefined().encode(env), |v| v.encode(env))
}

/// The mean of the values `h` recorded. With `total`, their exact sum kept beside it (a call's
/// latencies, its own times, a key's), the mean is that sum over the count: exact, and free.
/// Without, it is HDR's estimate, a walk over every bucket: a few tens of µs for a histogram
/// of millisecond latencies, which made most of a summary's cost when every call entry and
/// its own time took that walk.
fn mean(h: &Histogram<u64>, total: Option<u64>) -> u64 {
    match total {
        // A saturated sum is no longer exact.
        Some(total) if total < u64::MAX && !h.is_empty() => (total as f64 / h.len() as f64).round() as u64,
        _ => h.mean().round() as u64,
    }
}

/// `with` and `#{mean, p50, p90, p99, p999, max}` of `h`, as one map (no `count`: for
/// entries whose count is not the histogram's, such as a call entry's calls); with `total`,
/// the exact sum of the values `h` recorded, also `total => Total` and an exact mean.
pub(crate) fn quantiles<'a>(env: Env<'a>, h: &Histogram<u64>, total: Option<u64>, with: &[(Atom, Term<'a>)]) -> Term<'a> {
    let has = !h.is_empty();
    let q = |quantile: f64| value_or_undefined(env, has.then(|| h.value_at_quantile(quantile)));
    let figures = [
        (atoms::mean(), value_or_undefined(env, has.then(|| mean(h, total)))),
        (atoms::p50(), q(0.5)),
        (atoms::p90(), q(0.9)),
        (atoms::p99(), q(0.99)),
        (atoms::p999(), q(0.999)),
        (atoms::max(), value_or_undefined(env, has.then(|| h.max()))),
    ];
    let total = total.map(|t| (atoms::total(), t.encode(env)));
    let pairs: Vec<(Atom, Term<'a>)> = with.iter().copied().chain(total).chain(figures).collect();
    map(env, &pairs)
}

/// Power-of-two buckets `[{Low, High, Count}]` of `h`, ascending, empty buckets left out;
/// a recorded 0 has the bucket `{0, 0, Count}` (call latencies are at least 1 ns).
pub(crate) fn log2_buckets(h: &Histogram<u64>) -> Vec<(u64, u64, u64)> {
    let mut out: Vec<(u64, u64, u64)> = Vec::new();
    for v in h.iter_recorded() {
        let value = v.value_iterated_to();
        let (low, high) = if value == 0 {
            (0, 0)
        } else {
            let low = 1u64 << (63 - value.leading_zeros());
            (low, low.saturating_mul(2) - 1)
        };
        match out.last_mut() {
            Some(last) if last.0 == low => last.2 += v.count_at_value(),
            _ => out.push((low, high, v.count_at_value())),
        }
    }
    out
}

/// `with` and `#{count, mean, p50, p90, p99, p999, max}` of `h` (`count`: values recorded),
/// as one map, and `total` as [`quantiles`] takes it; e.g. `with` = `[(key, Key)]` for a
/// per-key entry.
pub(crate) fn distribution<'a>(env: Env<'a>, h: &Histogram<u64>, total: Option<u64>, with: &[(Atom, Term<'a>)]) -> Term<'a> {
    let count = [(atoms::count(), h.len().encode(env))];
    let with: Vec<(Atom, Term<'a>)> = count.into_iter().chain(with.iter().copied()).collect();
    quantiles(env, h, total, &with)
}
