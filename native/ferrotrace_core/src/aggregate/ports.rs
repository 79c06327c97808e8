//! Ports: opened, closed, run slices.

use hdrhistogram::Histogram;

use super::top::histogram;

/// Port statistics.
pub struct Ports {
    /// `open` events.
    pub opened: u64,
    /// `closed` events.
    pub closed: u64,
    /// Port run slices (scheduled in until out), ns.
    pub run_slice: Histogram<u64>,
}

impl Default for Ports {
    fn default() -> Self {
        Ports { opened: 0, closed: 0, run_slice: histogram() }
    }
}
