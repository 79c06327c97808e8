//! The HDR histograms every figure of the aggregator is kept in: their bounds, how one is
//! made, recorded into, added to another (merging aggregators) and measured in bytes.

use hdrhistogram::Histogram;

use crate::memory::alloc_bytes;

/// Largest latency recorded, in ns (one hour); longer calls are recorded as one hour.
pub const MAX_LATENCY_NS: u64 = 3_600_000_000_000;
/// HDR precision: 2 significant digits. Every value read back (a percentile, the maximum) is
/// within 1/128 (0.78 %) of the value recorded: HdrHistogram keeps 128 buckets per power of
/// two. The functions' histograms keep the same layout, compactly (`compact.rs`).
pub const SIGNIFICANT_DIGITS: u8 = 2;

/// The largest relative error of a value read back from any histogram: 1/128.
pub const RELATIVE_ERROR: f64 = 1.0 / 128.0;

/// An auto-resizing HDR histogram (2 significant digits) that starts small: it grows to the
/// values recorded (a few KiB for short calls).
pub fn histogram() -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(1, 2, SIGNIFICANT_DIGITS).expect("static histogram bounds are valid");
    h.auto(true);
    h
}

/// Records a duration in ns, clamped to 1 ns .. one hour like call latencies.
#[inline]
pub fn record_ns(h: &mut Histogram<u64>, ns: u64) {
    // Cannot fail: auto-resize is on and the value is bounded.
    let _ = h.record(ns.clamp(1, MAX_LATENCY_NS));
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

/// A histogram's heap bytes, its counts: `distinct_values` × 8 bytes (the counts vector's
/// length: an auto-resizing histogram's vector may have grown past it).
#[inline]
pub fn histogram_bytes(h: &Histogram<u64>) -> usize {
    alloc_bytes(h.distinct_values() * std::mem::size_of::<u64>())
}
