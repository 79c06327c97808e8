//! Ports: opened, closed, run slices.

use hdrhistogram::Histogram;

use super::histogram::{add_histogram, histogram};

/// Port statistics.
pub struct Ports {
    /// `open` events.
    pub opened: u64,
    /// `closed` events.
    pub closed: u64,
    /// Port run slices (scheduled in until out), ns.
    pub run_slice: Histogram<u64>,
}

impl Ports {
    /// Adds `other`'s figures to these (`Aggregator::merged`).
    pub fn merge_from(&mut self, other: &Ports) {
        self.opened += other.opened;
        self.closed += other.closed;
        add_histogram(&mut self.run_slice, &other.run_slice);
    }
}

impl Default for Ports {
    fn default() -> Self {
        Ports { opened: 0, closed: 0, run_slice: histogram() }
    }
}
