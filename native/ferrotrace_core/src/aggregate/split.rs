//! The latency split of a traced function: of each call's latency, how much the process spent
//! scheduled out (descheduled), in garbage collection, and running (the rest). Needs
//! `scheduling` (and `gc` for the GC part) on the calling processes; read from the process
//! table's per-process totals at the call and at its return.

use hdrhistogram::Histogram;

use super::histogram::{add_histogram, histogram, record_ns};

/// The three parts' distributions, ns.
pub struct SplitStats {
    /// Time running (latency minus the other two).
    pub running: Histogram<u64>,
    /// Time scheduled out.
    pub descheduled: Histogram<u64>,
    /// Time in garbage collection.
    pub gc: Histogram<u64>,
}

impl Default for SplitStats {
    fn default() -> Self {
        SplitStats { running: histogram(), descheduled: histogram(), gc: histogram() }
    }
}

impl SplitStats {
    /// Adds `other`'s distributions to these (`Aggregator::merged`).
    pub fn merge_from(&mut self, other: &SplitStats) {
        add_histogram(&mut self.running, &other.running);
        add_histogram(&mut self.descheduled, &other.descheduled);
        add_histogram(&mut self.gc, &other.gc);
    }

    /// One call of `latency` ns, `descheduled` of them scheduled out and `gc` in GC.
    pub fn record(&mut self, latency: u64, descheduled: u64, gc: u64) {
        let descheduled = descheduled.min(latency);
        let gc = gc.min(latency - descheduled);
        record_zero_ok(&mut self.descheduled, descheduled);
        record_zero_ok(&mut self.gc, gc);
        record_zero_ok(&mut self.running, latency - descheduled - gc);
    }
}

/// Parts are often zero (a call never scheduled out): zero is recorded as zero.
fn record_zero_ok(h: &mut Histogram<u64>, ns: u64) {
    if ns == 0 {
        let _ = h.record(0);
    } else {
        record_ns(h, ns);
    }
}
