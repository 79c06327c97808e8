//! An HDR histogram as the Erlang map of figures every summary shows: `mean, p50, p90, p99,
//! p999, max` (and `count`), `undefined` while the histogram is empty. The one place that
//! picks those keys and quantiles: a call entry, its `own` time, the process figures, the
//! export's `histogram_figures` and per-key entries all read the same.

use hdrhistogram::Histogram;
use rustler::{Atom, Encoder, Env, Term};

mod atoms {
    rustler::atoms! { undefined, count, mean, p50, p90, p99, p999, max }
}

/// `v`, or `undefined` for `None` (a figure of an empty histogram).
pub(crate) fn value_or_undefined(env: Env, v: Option<u64>) -> Term {
    v.map_or_else(|| atoms::undefined().encode(env), |v| v.encode(env))
}

/// `with` and `#{mean, p50, p90, p99, p999, max}` of `h`, as one map (no `count`: for
/// entries whose count is not the histogram's, such as a call entry's calls).
pub(crate) fn quantiles<'a>(env: Env<'a>, h: &Histogram<u64>, with: &[(Atom, Term<'a>)]) -> Term<'a> {
    let has = !h.is_empty();
    let q = |quantile: f64| value_or_undefined(env, has.then(|| h.value_at_quantile(quantile)));
    let figures = [
        (atoms::mean(), value_or_undefined(env, has.then(|| h.mean().round() as u64))),
        (atoms::p50(), q(0.5)),
        (atoms::p90(), q(0.9)),
        (atoms::p99(), q(0.99)),
        (atoms::p999(), q(0.999)),
        (atoms::max(), value_or_undefined(env, has.then(|| h.max()))),
    ];
    let pairs: Vec<(Atom, Term<'a>)> = with.iter().copied().chain(figures).collect();
    Term::map_from_pairs(env, &pairs).expect("keys are distinct atoms")
}

/// `with` and `#{count, mean, p50, p90, p99, p999, max}` of `h` (`count`: values recorded),
/// as one map; e.g. `with` = `[(key, Key)]` for a per-key entry.
pub(crate) fn distribution<'a>(env: Env<'a>, h: &Histogram<u64>, with: &[(Atom, Term<'a>)]) -> Term<'a> {
    let count = [(atoms::count(), h.len().encode(env))];
    let with: Vec<(Atom, Term<'a>)> = count.into_iter().chain(with.iter().copied()).collect();
    quantiles(env, h, &with)
}
