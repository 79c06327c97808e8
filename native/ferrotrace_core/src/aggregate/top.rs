//! Bounded per-key tables (per process, per location) read as top-N lists.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash};

use crate::memory::map_bytes;
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
        map_bytes(&self.entries)
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
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when nothing was tallied.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

fn bump(tally: &mut Tally, value: u64) {
    tally.count += 1;
    tally.total = tally.total.saturating_add(value);
    tally.max = tally.max.max(value);
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
