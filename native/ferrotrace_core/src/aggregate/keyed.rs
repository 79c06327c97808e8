//! Keyed aggregation (`key`), like DTrace's `@[key] = quantize(...)`: a latency histogram per
//! `{MFA, Key}`, where a call's key is what its trace match spec's `{message, Key}` returned
//! (`key => message`, the VM passes it to `trace/5` as `match_spec_result`), or its caller
//! (`key => caller`: the match spec's `{message, {caller_line}}` or `{message, {caller}}`).
//!
//! The key is copied on the scheduler like an argument list (bounded by `max_term_bytes`,
//! see `crate::term_format`), rides in the call's open frame, and is counted when the call returns.
//! Keys are compared by their encoded bytes: equal terms encode alike, and two keys cut at the
//! same prefix (larger than `max_term_bytes`) count as one, marked truncated.
//!
//! Bounded: at most `max_keys` keys over the whole session, each with a histogram of two
//! significant digits (about 10 to 25 KiB once filled); calls whose key arrives after that
//! are counted in their function's `overflow`, not kept.


use hdrhistogram::Histogram;

use super::histogram::{add_histogram, histogram_bytes, MAX_LATENCY_NS};
use crate::memory::{copy_bytes, map_bytes};
use crate::hasher::WordMap;
use crate::term_format::TermCopy;

/// Where a call's key comes from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KeySource {
    /// No keys (the default): nothing is copied.
    #[default]
    None,
    /// The match spec's `{message, Key}` (`match_spec_result`).
    Message,
    /// The caller, which the Erlang side asks the match spec for; reported as `callers`.
    Caller,
}

/// What a session keys its calls by, and how many keys it keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeysConfig {
    /// Where keys come from (`key`).
    pub source: KeySource,
    /// Keys kept over the whole session (`max_keys`).
    pub max_keys: usize,
}

/// Default `max_keys`.
pub const DEFAULT_MAX_KEYS: usize = 1_000;
/// Accepted `max_keys`, inclusive: at most about 250 MB of histograms.
pub const MAX_KEYS_RANGE: (i64, i64) = (1, 10_000);
/// Precision of a key's histogram: percentiles within 1%, a tenth of the memory of three digits.
const KEY_SIGNIFICANT_DIGITS: u8 = 2;

impl Default for KeysConfig {
    fn default() -> Self {
        KeysConfig { source: KeySource::None, max_keys: DEFAULT_MAX_KEYS }
    }
}

/// The calls of one function that had one key.
pub struct KeyStats {
    /// Calls that returned or raised.
    pub count: u64,
    /// Their summed latency, ns (saturating).
    pub total_ns: u64,
    /// Their latency, ns.
    pub latency: Histogram<u64>,
}

/// One function's calls by key.
#[derive(Default)]
pub struct KeyedLatency {
    /// Keys are bounded (`max_keys`) and hashed with the collector's word hasher: SipHash
    /// doubled the lookup's cost.
    keys: WordMap<TermCopy, KeyStats>,
    /// Calls with a key that was not kept: the session's `max_keys` were taken.
    pub overflow: u64,
}

impl KeyedLatency {
    /// Counts a call of latency `ns` under `key`; a new key takes one of the session's
    /// `keys_left`, or is counted in `overflow` when none is left.
    pub fn record(&mut self, key: TermCopy, ns: u64, keys_left: &mut usize) {
        let stats = match self.keys.get_mut(&key) {
            Some(stats) => stats,
            None if *keys_left > 0 => {
                *keys_left -= 1;
                let mut latency = Histogram::new_with_bounds(1, 2, KEY_SIGNIFICANT_DIGITS)
                    .expect("static histogram bounds are valid");
                latency.auto(true);
                self.keys.entry(key).or_insert(KeyStats { count: 0, total_ns: 0, latency })
            }
            None => {
                self.overflow += 1;
                return;
            }
        };
        let ns = ns.clamp(1, MAX_LATENCY_NS);
        stats.count += 1;
        stats.total_ns = stats.total_ns.saturating_add(ns);
        // Cannot fail: auto-resize is on and the value is within the one-hour bound.
        let _ = stats.latency.record(ns);
    }

    /// Adds `other`'s keys and overflow to these (`Aggregator::merged`): a key in both gets
    /// the sum of its figures. Merged, the keys may number up to the parts' `max_keys`
    /// summed: exact while no part ran out of keys.
    pub fn merge_from(&mut self, other: &KeyedLatency) {
        for (key, from) in &other.keys {
            match self.keys.get_mut(key) {
                Some(into) => {
                    into.count += from.count;
                    into.total_ns = into.total_ns.saturating_add(from.total_ns);
                    add_histogram(&mut into.latency, &from.latency);
                }
                None => {
                    let copy = KeyStats { count: from.count, total_ns: from.total_ns, latency: from.latency.clone() };
                    self.keys.insert(key.clone(), copy);
                }
            }
        }
        self.overflow += other.overflow;
    }

    /// Every key kept, with its figures, most total time first.
    pub fn by_total(&self) -> Vec<(&[u8], &KeyStats)> {
        let mut keys: Vec<_> = self.keys.iter().map(|(key, stats)| (&key[..], stats)).collect();
        keys.sort_by(|a, b| b.1.total_ns.cmp(&a.1.total_ns).then(b.1.count.cmp(&a.1.count)).then(a.0.cmp(b.0)));
        keys
    }

    /// Keys kept.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True if no key was kept.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Heap bytes: `(the key table and the key copies, the keys' histograms)`.
    pub fn bytes(&self) -> (usize, usize) {
        let copies: usize = self.keys.keys().map(copy_bytes).sum();
        let histograms: usize = self.keys.values().map(|stats| histogram_bytes(&stats.latency)).sum();
        (map_bytes(&self.keys) + copies, histograms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::Aggregator;
    use crate::event::{Event, EventKind, Mfa};
    use crate::term_format::EventCopies;
    use std::sync::Arc;

    const F: Mfa = Mfa { module: 1, function: 2, arity: 1 };
    const G: Mfa = Mfa { module: 1, function: 3, arity: 0 };

    fn key(bytes: &[u8]) -> EventCopies {
        EventCopies { args: None, key: Some(Arc::from(bytes)) }
    }

    fn keys_of(agg: &Aggregator, mfa: Mfa) -> Vec<(Vec<u8>, u64, u64)> {
        let keyed = agg.function(&mfa).unwrap().by_key.as_ref().unwrap();
        keyed.by_total().into_iter().map(|(k, s)| (k.to_vec(), s.count, s.total_ns)).collect()
    }

    #[test]
    fn a_histogram_per_key_with_exact_counts() {
        let config = KeysConfig { source: KeySource::Message, max_keys: 10 };
        let mut agg = Aggregator::new(10, 100).with_keys(config);
        let ev = |kind, pid, ts| Event { ts, pid, mfa: F, kind };
        // gold: 3 calls of 100 ns; silver: 2 of 50; bronze: 1 of 10, raising; one without a key.
        let mut ts = 0;
        for (k, ns, kind) in [
            (&b"gold"[..], 100, EventKind::Return), (b"silver", 50, EventKind::Return), (b"gold", 100, EventKind::Return),
            (b"bronze", 10, EventKind::Exception), (b"gold", 100, EventKind::Return), (b"silver", 50, EventKind::Return),
        ] {
            agg.record_with(&ev(EventKind::Call, 7, ts), key(k));
            agg.record_with(&ev(kind, 7, ts + ns), EventCopies::default());
            ts += 1_000;
        }
        agg.record(&ev(EventKind::Call, 7, ts));
        agg.record(&ev(EventKind::Return, 7, ts + 5));
        assert_eq!(keys_of(&agg, F), vec![
            (b"gold".to_vec(), 3, 300),
            (b"silver".to_vec(), 2, 100),
            (b"bronze".to_vec(), 1, 10),
        ]);
        let f = agg.function(&F).unwrap();
        assert_eq!((f.calls, f.by_key.as_ref().unwrap().overflow), (7, 0));
        let gold = f.by_key.as_ref().unwrap().by_total()[0].1;
        assert_eq!((gold.latency.len(), gold.latency.max()), (3, 100));
    }

    #[test]
    fn keys_are_capped_over_the_session_and_the_overflow_counted() {
        let config = KeysConfig { source: KeySource::Message, max_keys: 3 };
        let mut agg = Aggregator::new(10, 100).with_keys(config);
        let mut ts = 0;
        for (mfa, n) in [(F, 2u8), (G, 5)] {
            for i in 0..n {
                agg.record_with(&Event { ts, pid: 1, mfa, kind: EventKind::Call }, key(&[i]));
                agg.record(&Event { ts: ts + 1, pid: 1, mfa, kind: EventKind::Return });
                ts += 10;
            }
        }
        // F took two keys; G the one left, and counted its four others.
        assert_eq!(keys_of(&agg, F).len(), 2);
        assert_eq!(keys_of(&agg, G), vec![(vec![0], 1, 1)]);
        assert_eq!(agg.function(&G).unwrap().by_key.as_ref().unwrap().overflow, 4);
        // A kept key still counts.
        agg.record_with(&Event { ts, pid: 1, mfa: G, kind: EventKind::Call }, key(&[0]));
        agg.record(&Event { ts: ts + 1, pid: 1, mfa: G, kind: EventKind::Return });
        assert_eq!(keys_of(&agg, G), vec![(vec![0], 2, 2)]);
    }

    #[test]
    fn a_key_goes_with_its_own_call_when_calls_nest() {
        let config = KeysConfig { source: KeySource::Caller, max_keys: 10 };
        let mut agg = Aggregator::new(10, 100).with_keys(config);
        // F(key a) calls G(key b): G's 10 ns under b, F's 100 ns under a.
        agg.record_with(&Event { ts: 0, pid: 1, mfa: F, kind: EventKind::Call }, key(b"a"));
        agg.record_with(&Event { ts: 5, pid: 1, mfa: G, kind: EventKind::Call }, key(b"b"));
        agg.record(&Event { ts: 15, pid: 1, mfa: G, kind: EventKind::Return });
        agg.record(&Event { ts: 100, pid: 1, mfa: F, kind: EventKind::Return });
        assert_eq!(keys_of(&agg, F), vec![(b"a".to_vec(), 1, 100)]);
        assert_eq!(keys_of(&agg, G), vec![(b"b".to_vec(), 1, 10)]);
    }
}
