//! Scheduling: run slices (scheduled in until out), CPU time per process, where processes
//! are scheduled out.

use hdrhistogram::Histogram;

use super::histogram::{add_histogram, histogram, record_ns};
use super::top::TopTable;
use crate::event::Mfa;

/// Scheduling statistics (processes; ports have their own in [`super::ports`]).
pub struct Scheduling {
    /// Run slices, ns.
    pub run_slice: Histogram<u64>,
    /// Per process: slices and their total (CPU time on a scheduler).
    pub top_cpu: TopTable<u64>,
    /// Per function the process was in when scheduled out (zero MFA: unknown).
    pub out_locations: TopTable<Mfa>,
    /// `in`/`out` events.
    pub ins: u64,
    /// `out` events.
    pub outs: u64,
}

impl Default for Scheduling {
    fn default() -> Self {
        Scheduling { run_slice: histogram(), top_cpu: TopTable::default(), out_locations: TopTable::default(), ins: 0, outs: 0 }
    }
}

impl Scheduling {
    /// Adds `other`'s figures to these (`Aggregator::merged`).
    pub fn merge_from(&mut self, other: &Scheduling) {
        add_histogram(&mut self.run_slice, &other.run_slice);
        self.top_cpu.merge_from(&other.top_cpu);
        self.out_locations.merge_from(&other.out_locations);
        self.ins += other.ins;
        self.outs += other.outs;
    }

    /// `pid` was scheduled out at `at` after running `slice` ns (if its `in` was seen).
    pub fn out(&mut self, pid: u64, slice: Option<u64>, at: Mfa) {
        self.outs += 1;
        self.out_locations.add(at, 1);
        if let Some(ns) = slice {
            record_ns(&mut self.run_slice, ns);
            self.top_cpu.add(pid, ns);
        }
    }
}
