//! Garbage collection: minor and major pauses, words reclaimed, who pauses most.

use hdrhistogram::Histogram;

use super::histogram::{add_histogram, histogram, record_ns};
use super::top::TopTable;

/// GC statistics.
pub struct Gc {
    /// Minor (generational) collections: pause, ns.
    pub minor: Histogram<u64>,
    /// Major (fullsweep) collections: pause, ns.
    pub major: Histogram<u64>,
    /// Words in use before minus after, summed over the collections paired.
    pub reclaimed_words: u64,
    /// Per process: collections and total pause.
    pub top_pause: TopTable<u64>,
    /// Ends with no start (tracing began mid-collection) or starts never ended.
    pub unpaired: u64,
}

impl Default for Gc {
    fn default() -> Self {
        Gc { minor: histogram(), major: histogram(), reclaimed_words: 0, top_pause: TopTable::default(), unpaired: 0 }
    }
}

impl Gc {
    /// Adds `other`'s figures to these (`Aggregator::merged`).
    pub fn merge_from(&mut self, other: &Gc) {
        add_histogram(&mut self.minor, &other.minor);
        add_histogram(&mut self.major, &other.major);
        self.reclaimed_words = self.reclaimed_words.saturating_add(other.reclaimed_words);
        self.top_pause.merge_from(&other.top_pause);
        self.unpaired += other.unpaired;
    }

    /// One collection of `pid`, paired start to end.
    pub fn collection(&mut self, pid: u64, major: bool, ns: u64, words_before: u64, words_after: u64) {
        record_ns(if major { &mut self.major } else { &mut self.minor }, ns);
        self.reclaimed_words = self.reclaimed_words.saturating_add(words_before.saturating_sub(words_after));
        self.top_pause.add(pid, ns);
    }
}
