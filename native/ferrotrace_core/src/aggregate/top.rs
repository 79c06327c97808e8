//! Bounded per-key tables (per process, per location) read as top-N lists.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash};

use hdrhistogram::Histogram;

use super::{MAX_LATENCY_NS, SIGNIFICANT_DIGITS};
use crate::hasher::WordHasher;

/// Keys one table keeps; events of further keys are counted in [`TopTable::overflow`].
pub const MAX_KEYS: usize = 10_000;

/// The figures kept per key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Events.
    pub count: u64,
    /// Sum of the values recorded (ns or words), saturating.
    pub total: u64,
    /// Largest value recorded.
    pub max: u64,
}

/// A capped map from key to [`Tally`].
pub struct TopTable<K> {
    entries: HashMap<K, Tally, BuildHasherDefault<WordHasher>>,
    /// Events not tallied because the table was full.
    pub overflow: u64,
}

impl<K: Hash + Eq + Copy> Default for TopTable<K> {
    fn default() -> Self {
        TopTable { entries: HashMap::default(), overflow: 0 }
    }
}

impl<K: Hash + Eq + Copy> TopTable<K> {
    /// Heap bytes of the table (estimated from its capacity).
    pub fn bytes(&self) -> usize {
        super::memory::map_bytes(&self.entries)
    }

    /// Adds one event of `value` to `key`'s tally.
    #[inline]
    pub fn add(&mut self, key: K, value: u64) {
        let full = self.entries.len() >= MAX_KEYS;
        match self.entries.get_mut(&key) {
            Some(tally) => bump(tally, value),
            None if full => self.overflow += 1,
            None => bump(self.entries.entry(key).or_default(), value),
        }
    }

    /// The `n` keys with the largest totals (then counts), largest first.
    pub fn top(&self, n: usize) -> Vec<(K, Tally)> {
        let mut all: Vec<(K, Tally)> = self.entries.iter().map(|(k, t)| (*k, *t)).collect();
        all.sort_unstable_by_key(|(_, t)| std::cmp::Reverse((t.total, t.count)));
        all.truncate(n);
        all
    }

    /// Adds `other`'s tallies and overflow to this table's. Merged tables of disjoint keys
    /// (per pid, of aggregators owning disjoint pids) may hold up to the sum of their keys,
    /// beyond [`MAX_KEYS`]; keys in both have their tallies summed (and the larger max).
    pub fn merge_from(&mut self, other: &TopTable<K>) {
        for (key, tally) in &other.entries {
            let into = self.entries.entry(*key).or_default();
            into.count += tally.count;
            into.total = into.total.saturating_add(tally.total);
            into.max = into.max.max(tally.max);
        }
        self.overflow += other.overflow;
    }

    /// Keys tallied.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when nothing was tallied.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

fn bump(tally: &mut Tally, value: u64) {
    tally.count += 1;
    tally.total = tally.total.saturating_add(value);
    tally.max = tally.max.max(value);
}

/// An auto-resizing HDR histogram (3 significant digits) that starts small.
pub fn histogram() -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(1, 2, SIGNIFICANT_DIGITS).expect("static histogram bounds are valid");
    h.auto(true);
    h
}

/// Adds `from`'s counts to `into`: exact, both having the same precision (and auto-resizing,
/// as every histogram of the aggregator does).
pub fn add_histogram(into: &mut Histogram<u64>, from: &Histogram<u64>) {
    if into.is_empty() && into.buckets() < from.buckets() {
        // A copy of the counts (adding would grow `into` first). An empty `into` as large as
        // `from` takes the copy in place; a larger one has `from` recorded value by value.
        into.clone_from(from);
        return;
    }
    // Cannot fail: `into` auto-resizes, and every value of `from` is within the one-hour
    // bound, so the counts array's length fits a usize.
    let _ = into.add(from);
}

/// Records a duration in ns, clamped to 1 ns .. one hour like call latencies.
#[inline]
pub fn record_ns(h: &mut Histogram<u64>, ns: u64) {
    // Cannot fail: auto-resize is on and the value is bounded.
    let _ = h.record(ns.clamp(1, MAX_LATENCY_NS));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_keys_and_sorts_by_total() {
        let mut t = TopTable::<u64>::default();
        for k in 0..(MAX_KEYS as u64 + 5) {
            t.add(k, k);
        }
        assert_eq!((t.len(), t.overflow), (MAX_KEYS, 5));
        t.add(3, 1_000_000);
        let top = t.top(2);
        assert_eq!(top[0].0, 3);
        assert_eq!(top[0].1, Tally { count: 2, total: 1_000_003, max: 1_000_000 });
    }
}
