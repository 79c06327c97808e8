//! Processes: spawned, exited, why, and how long they lived.

use hdrhistogram::Histogram;

use super::histogram::{add_histogram, histogram, record_ns};
use super::top::TopTable;

/// Process lifecycle statistics.
pub struct Procs {
    /// `spawn` events.
    pub spawned: u64,
    /// `exit` events.
    pub exited: u64,
    /// Exit reasons: atom bits (the reason, or the first element of a tuple reason), zero for
    /// any other reason.
    pub exit_reasons: TopTable<u64>,
    /// Lifetimes of processes whose spawn and exit were both seen, ns.
    pub lifetime: Histogram<u64>,
    /// `link`, `unlink`, `getting_linked`, `getting_unlinked`, `register`, `unregister`.
    pub other: [u64; 6],
}

impl Default for Procs {
    fn default() -> Self {
        Procs { spawned: 0, exited: 0, exit_reasons: TopTable::default(), lifetime: histogram(), other: [0; 6] }
    }
}

impl Procs {
    /// Adds `other`'s figures to these (`Aggregator::merged`).
    pub fn merge_from(&mut self, other: &Procs) {
        self.spawned += other.spawned;
        self.exited += other.exited;
        self.exit_reasons.merge_from(&other.exit_reasons);
        add_histogram(&mut self.lifetime, &other.lifetime);
        for (into, from) in self.other.iter_mut().zip(other.other) {
            *into += from;
        }
    }

    /// A process exited with `reason`, after `lived` ns if its spawn was seen.
    pub fn exit(&mut self, reason: u64, lived: Option<u64>) {
        self.exited += 1;
        self.exit_reasons.add(reason, 1);
        if let Some(ns) = lived {
            record_ns(&mut self.lifetime, ns);
        }
    }
}
