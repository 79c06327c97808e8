//! The keyed figures of each call entry in the summary (`key`, see
//! `ferrotrace_core::aggregate::keyed`): `by_key` for `key => message`, `callers` for
//! `key => caller`, and `keys_overflow`.

use rustler::{Atom, Encoder, Env, Term};

use ferrotrace_core::aggregate::keyed::{KeySource, KeyStats};
use ferrotrace_core::aggregate::FunctionStats;

use super::distribution::distribution;
use crate::encoding::term_copy::copy_term_in;

mod atoms {
    rustler::atoms! { by_key, callers, keys_overflow, key, caller, total }
}

/// Adds `by_key => [#{key, count, total, mean, p50, p90, p99, p999, max}]` (or `callers`,
/// with `caller` for `key`), most total time first, and `keys_overflow` (calls whose key was
/// not kept: `max_keys` reached) to a function's entry; nothing for a session without keys.
pub(super) fn add_keys<'a>(env: Env<'a>, entry: Term<'a>, stats: &FunctionStats, source: KeySource) -> Term<'a> {
    let (list, name) = match source {
        KeySource::None => return entry,
        KeySource::Message => (atoms::by_key(), atoms::key()),
        KeySource::Caller => (atoms::callers(), atoms::caller()),
    };
    let (keys, overflow) = match &stats.by_key {
        Some(keyed) => (keyed.by_total().into_iter().map(|(key, s)| key_term(env, name, key, s)).collect(), keyed.overflow),
        None => (Vec::new(), 0),
    };
    let entry = entry.map_put(list.encode(env), keys.encode(env)).unwrap_or(entry);
    entry.map_put(atoms::keys_overflow().encode(env), overflow.encode(env)).unwrap_or(entry)
}

fn key_term<'a>(env: Env<'a>, name: Atom, key: &[u8], s: &KeyStats) -> Term<'a> {
    distribution(env, &s.latency, Some(s.total_ns), &[(name, copy_term_in(env, key))])
}
