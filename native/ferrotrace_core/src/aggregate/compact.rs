//! The four histograms of every timed function (latency, the interval's, own time, raw
//! latency), held compactly: HdrHistogram's own bucket layout at 2 significant digits (so a
//! function's histogram converts to an `hdrhistogram::Histogram` exactly, bucket for bucket:
//! [`Compact::to_hdr`]), with each bucket's count split in two:
//! - its low 16 bits, dense, over the powers of two recorded (128 buckets, 256 bytes, each):
//!   from the shortest value's to the longest's, so calls of 100 ns to 10 ms hold 4.5 KiB and
//!   calls of 2 to 50 µs 1.5 KiB;
//! - the rest (`count >> 16`, 64 bits) in a sorted table of the buckets that reached 65,536
//!   records, the busiest few (10 bytes each).
//!
//! Counts are exact and never wrap: a low part that overflows carries into the table (once
//! per 65,536 records of a bucket, a binary search), whose 64-bit high parts hold 2^80
//! records. Adding two histograms (aggregators merged, `merge.rs`) adds counts bucket by
//! bucket; a record is O(1), as HdrHistogram's own.
//!
//! Why this form (measured in `make always-on`): 3 significant digits with 64-bit counts
//! (HdrHistogram's default, kept until now) held 120 to 290 KB a function. 2 significant digits
//! keep every value read back within 1/128 (0.78 %) of the value recorded, and 128 buckets a
//! power of two. With 32-bit counts from bucket 0 (the crate's `Histogram<u32>`) calls up to
//! 10 ms still take 9 KiB a histogram, 36 KiB a function, and a bucket would have to saturate
//! after 4 G records; 16-bit low parts over the powers of two recorded take half, and the
//! carries keep the counts exact. A log-linear sketch would be smaller at 1 %, but HdrHistogram's
//! exports and merges over nodes would no longer be exact.

use hdrhistogram::Histogram;

use super::histogram::{MAX_LATENCY_NS, SIGNIFICANT_DIGITS};
use crate::memory::alloc_bytes;

/// HdrHistogram's layout at 2 significant digits, lowest discernible value 1: 256 sub-buckets
/// (`2 × 10^2` rounded up to a power of two), the upper half of which each further bucket uses.
const HALF_MAGNITUDE: u32 = 7;
const HALF_COUNT: u64 = 1 << HALF_MAGNITUDE;
const SUB_BUCKET_MASK: u64 = 2 * HALF_COUNT - 1;
/// 64 less the sub-bucket count's magnitude (8).
const LEADING_ZERO_BASE: u32 = 56;
const _: () = assert!(SIGNIFICANT_DIGITS == 2, "the compact layout is HdrHistogram's at 2 significant digits");

/// The bits of a count kept dense.
const LOW_BITS: u32 = 16;
const LOW_MASK: u64 = (1 << LOW_BITS) - 1;

/// The bucket index HdrHistogram (2 digits, lowest 1) gives `value`.
#[inline]
fn index_for(value: u64) -> usize {
    let bucket = LEADING_ZERO_BASE - (value | SUB_BUCKET_MASK).leading_zeros();
    let sub_bucket = value >> bucket;
    (((bucket as u64 + 1) << HALF_MAGNITUDE) + sub_bucket - HALF_COUNT) as usize
}

/// The lowest value of bucket `index` (HdrHistogram's `value_for`).
fn value_for(index: usize) -> u64 {
    let index = index as u64;
    let bucket = (index >> HALF_MAGNITUDE) as i64 - 1;
    let sub_bucket = (index & (HALF_COUNT - 1)) + HALF_COUNT;
    if bucket < 0 {
        sub_bucket - HALF_COUNT
    } else {
        sub_bucket << bucket
    }
}

/// A histogram of durations in ns (1 ns to one hour), HdrHistogram's at 2 significant digits,
/// in the compact form the module docs describe.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Compact {
    /// The low 16 bits of the counts of buckets `base ..`, over whole powers of two.
    low: Vec<u16>,
    /// The bucket of `low[0]` (a multiple of 128).
    base: usize,
    /// The buckets that reached 65,536 records, ascending; and their `count >> 16`.
    high_at: Vec<u16>,
    high: Vec<u64>,
    /// Values recorded.
    count: u64,
}

impl Compact {
    /// An empty histogram; nothing allocated until a value is recorded.
    pub const fn new() -> Self {
        Compact { low: Vec::new(), base: 0, high_at: Vec::new(), high: Vec::new(), count: 0 }
    }

    /// Records a duration in ns, clamped to 1 ns .. one hour.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        let index = index_for(ns.clamp(1, MAX_LATENCY_NS));
        let at = match index.checked_sub(self.base) {
            Some(at) if at < self.low.len() => at,
            _ => self.grow(index, index),
        };
        let low = &mut self.low[at];
        match low.checked_add(1) {
            Some(next) => *low = next,
            None => {
                *low = 0;
                self.carry(index, 1);
            }
        }
        self.count += 1;
    }

    /// Values recorded.
    #[inline]
    pub fn len(&self) -> u64 {
        self.count
    }

    /// True if nothing was recorded.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Zeroes the counts, keeping the memory (an interval's histogram, reset at each read).
    pub fn reset(&mut self) {
        if self.count != 0 {
            self.low.fill(0);
            self.high_at.clear();
            self.high.clear();
            self.count = 0;
        }
    }

    /// Heap bytes: the dense low parts and the table of high parts, as allocated.
    pub fn bytes(&self) -> usize {
        let bytes = |len: usize| if len == 0 { 0 } else { alloc_bytes(len) };
        bytes(self.low.capacity() * 2) + bytes(self.high_at.capacity() * 2) + bytes(self.high.capacity() * 8)
    }

    /// Adds `other`'s counts to these, bucket by bucket (exact).
    pub fn add(&mut self, other: &Compact) {
        if other.is_empty() {
            return;
        }
        if self.is_empty() && self.low.capacity() < other.low.len() {
            self.clone_from(other);
            return;
        }
        self.grow(other.base, other.base + other.low.len() - 1);
        for (index, count) in other.counts() {
            self.add_at(index, count);
        }
        self.count = self.count.saturating_add(other.count);
    }

    /// Takes `other`'s counts out of these, bucket by bucket, for `other` a part of these (a
    /// count never goes below 0).
    pub fn subtract(&mut self, other: &Compact) {
        for (index, count) in other.counts() {
            let have = self.count_at(index);
            if have > 0 {
                self.set_at(index, have.saturating_sub(count));
                self.count -= have.min(count);
            }
        }
    }

    /// The same counts as an HdrHistogram histogram (2 significant digits, lowest 1,
    /// auto-resizing, sized to the highest bucket): equal to one that recorded the same
    /// values. What every reader of the figures (summaries, exports, merges over nodes) reads.
    pub fn to_hdr(&self) -> Histogram<u64> {
        let top = self.counts().last().map_or(2, |(index, _)| value_for(index).max(2));
        let mut h = Histogram::new_with_bounds(1, top, SIGNIFICANT_DIGITS).expect("bounds within one hour are valid");
        h.auto(true);
        for (index, count) in self.counts() {
            // Cannot fail: the histogram reaches the highest bucket.
            let _ = h.record_n(value_for(index), count);
        }
        h
    }

    /// How many values were recorded at or below each of `bounds` (ns, ascending): a
    /// Prometheus histogram's cumulative `le` buckets, read at the bounds a scrape asks for.
    /// A value counts at a bound when the lowest value of its bucket is at or below it, so
    /// each count is exact but for the values of the one bucket that holds the bound (within
    /// 1/128 of it), which count as at or below it. One walk over the buckets recorded;
    /// bounds out of order give the counts of their running maximum.
    pub fn cumulative_at(&self, bounds: &[u64]) -> Vec<u64> {
        let mut counts = self.counts().peekable();
        let mut sum = 0u64;
        bounds
            .iter()
            .map(|&bound| {
                while let Some(&(index, count)) = counts.peek() {
                    if value_for(index) > bound {
                        break;
                    }
                    sum = sum.saturating_add(count);
                    counts.next();
                }
                sum
            })
            .collect()
    }

    /// `(bucket, count)` of every bucket with a count, ascending.
    fn counts(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        let mut high = self.high_at.iter().zip(&self.high).peekable();
        self.low.iter().enumerate().filter_map(move |(at, &low)| {
            let index = self.base + at;
            let carried = match high.peek() {
                Some(&(&i, &h)) if i as usize == index => {
                    high.next();
                    h
                }
                _ => 0,
            };
            let count = (carried << LOW_BITS) | low as u64;
            (count != 0).then_some((index, count))
        })
    }

    /// Where bucket `index`'s high part is, or would be, in the table.
    fn high_slot(&self, index: usize) -> Result<usize, usize> {
        self.high_at.binary_search(&(index as u16))
    }

    fn count_at(&self, index: usize) -> u64 {
        let low = index.checked_sub(self.base).and_then(|at| self.low.get(at)).copied().unwrap_or(0) as u64;
        match self.high_slot(index) {
            Ok(slot) => (self.high[slot] << LOW_BITS) | low,
            Err(_) => low,
        }
    }

    /// Widens the dense low parts to buckets `from ..= to` (whole powers of two); where
    /// bucket `from` now is in them.
    #[cold]
    fn grow(&mut self, from: usize, to: usize) -> usize {
        let (page_from, page_to) = (from >> HALF_MAGNITUDE, (to >> HALF_MAGNITUDE) + 1);
        if self.low.is_empty() {
            self.base = page_from << HALF_MAGNITUDE;
            self.low = vec![0; (page_to - page_from) << HALF_MAGNITUDE];
        } else {
            let (base, end) = (self.base.min(page_from << HALF_MAGNITUDE), (self.base + self.low.len()).max(page_to << HALF_MAGNITUDE));
            if (base, end) != (self.base, self.base + self.low.len()) {
                let mut low = Vec::with_capacity(end - base);
                low.resize(self.base - base, 0);
                low.extend_from_slice(&self.low);
                low.resize(end - base, 0);
                (self.low, self.base) = (low, base);
            }
        }
        from - self.base
    }

    /// Adds `n` to bucket `index`'s high part.
    #[cold]
    fn carry(&mut self, index: usize, n: u64) {
        match self.high_slot(index) {
            Ok(slot) => self.high[slot] += n,
            Err(slot) => {
                self.high_at.insert(slot, index as u16);
                self.high.insert(slot, n);
            }
        }
    }

    /// Adds `n` to bucket `index`, within the dense low parts.
    fn add_at(&mut self, index: usize, n: u64) {
        let at = index - self.base;
        let sum = self.low[at] as u64 + (n & LOW_MASK);
        self.low[at] = sum as u16;
        let carried = (sum >> LOW_BITS) + (n >> LOW_BITS);
        if carried > 0 {
            self.carry(index, carried);
        }
    }

    /// Sets bucket `index`'s count to `n`, within the dense low parts.
    fn set_at(&mut self, index: usize, n: u64) {
        self.low[index - self.base] = n as u16;
        match (self.high_slot(index), n >> LOW_BITS) {
            (Ok(slot), 0) => {
                self.high_at.remove(slot);
                self.high.remove(slot);
            }
            (Ok(slot), high) => self.high[slot] = high,
            (Err(_), 0) => {}
            (Err(slot), high) => {
                self.high_at.insert(slot, index as u16);
                self.high.insert(slot, high);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn reference(values: &[u64]) -> Histogram<u64> {
        let mut h = Histogram::new_with_bounds(1, 2, SIGNIFICANT_DIGITS).unwrap();
        h.auto(true);
        for &v in values {
            h.record(v.clamp(1, MAX_LATENCY_NS)).unwrap();
        }
        h
    }

    fn compact(values: &[u64]) -> Compact {
        let mut c = Compact::new();
        values.iter().for_each(|&v| c.record(v));
        c
    }

    fn recorded(h: &Histogram<u64>) -> Vec<(u64, u64)> {
        h.iter_recorded().map(|v| (v.value_iterated_to(), v.count_at_value())).collect()
    }

    #[test]
    fn the_layout_is_hdrhistograms() {
        let h = reference(&[1]);
        for v in (1..5_000).chain([1 << 20, (1 << 20) + 1, 999_999, 1_000_000_000, MAX_LATENCY_NS]) {
            let i = index_for(v);
            assert_eq!(value_for(i), h.lowest_equivalent(v), "{v}");
            assert!(value_for(i + 1) > v, "{v}");
        }
        assert_eq!(index_for(MAX_LATENCY_NS), 4_561);
    }

    #[test]
    fn cumulative_counts_at_bounds_are_exact_to_the_bucket() {
        let values: Vec<u64> = (0..20_000u64).map(|i| 1 + i * i * 37 % 90_000_000).chain([999, 1_000, 1_003, 1_004]).collect();
        let c = compact(&values);
        let h = reference(&values);
        let bounds = [1, 500, 999, 1_000, 1_003, 1_004, 2_500, 1_000_000, 25_000_000, 60_000_000_000];
        let got = c.cumulative_at(&bounds);
        for (&b, &n) in bounds.iter().zip(&got) {
            let counted = values.iter().filter(|&&v| h.lowest_equivalent(v) <= b).count() as u64;
            assert_eq!(n, counted, "le {b}");
            // Within the bucket holding the bound: every value at or below it, none past the
            // bucket's top.
            assert!(values.iter().filter(|&&v| v <= b).count() as u64 <= n, "le {b}");
            assert!(n <= values.iter().filter(|&&v| v <= h.highest_equivalent(b)).count() as u64, "le {b}");
        }
        assert_eq!(*got.last().unwrap(), values.len() as u64);
        assert_eq!(Compact::new().cumulative_at(&bounds), vec![0; bounds.len()]);
    }

    #[test]
    fn counts_carry_past_16_bits_and_stay_exact() {
        let mut values = vec![1_000u64; 140_000];
        values.extend([5; 65_536]);
        values.extend([7; 65_535]);
        let c = compact(&values);
        assert_eq!(c.to_hdr(), reference(&values));
        assert_eq!(c.count_at(index_for(1_000)), 140_000);
        assert_eq!(c.high_at, [5, index_for(1_000) as u16], "only the buckets past 65,535 have a high part");
    }

    #[test]
    fn a_bucket_past_u32_counts_is_exact() {
        let mut big = Compact::new();
        big.record(42);
        let mut sum = Compact::new();
        // 2^33 records of one bucket, added as merges do: never wraps, never saturates (the
        // crate's `Histogram<u32>` would saturate at 2^32).
        big.set_at(index_for(42), 1 << 32);
        big.count = 1 << 32;
        sum.add(&big);
        sum.add(&big);
        assert_eq!(sum.count_at(index_for(42)), 1 << 33);
        assert_eq!(sum.to_hdr().count_at(42), 1 << 33);
        sum.subtract(&big);
        assert_eq!((sum.count_at(index_for(42)), sum.len()), (1 << 32, 1 << 32));
    }

    #[test]
    fn calls_of_100_ns_to_10_ms_hold_4_kib() {
        // Two million calls spread evenly over the log scale, 100 ns to 10 ms: 18 pages of
        // 128 buckets (the first two, 0 to 255 ns, of 1 ns each), 256 bytes each.
        let values: Vec<u64> = (0..2_000_000u64).map(|i| (100.0 * 1e5f64.powf((i * 7_919 % 2_000_000) as f64 / 2e6)) as u64).collect();
        let c = compact(&values);
        assert_eq!(c.to_hdr(), reference(&values));
        assert!(c.high_at.is_empty());
        assert_eq!(c.bytes(), alloc_bytes(18 * 256));
        // Calls of 2 to 50 µs: 6 powers of two.
        assert_eq!(compact(&[2_000, 50_000]).bytes(), alloc_bytes(6 * 256));
    }

    #[test]
    fn reset_keeps_the_memory() {
        let mut c = compact(&[10, 1_000_000, 1_000_000]);
        let bytes = c.bytes();
        c.reset();
        assert!(c.is_empty() && c.counts().next().is_none() && c.high_at.is_empty());
        assert_eq!(c.bytes(), bytes);
        assert_eq!(Compact::new().bytes(), 0);
    }

    /// Percentiles of a million latencies (log-normal around 20 µs, a tail to 50 ms) against
    /// the exact ones, sorted: each within 1/128; prints the largest error.
    #[test]
    fn percentiles_against_ground_truth() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut uniform = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut values: Vec<u64> = (0..1_000_000)
            .map(|_| {
                let normal = (-2.0 * uniform().max(1e-300).ln()).sqrt() * (std::f64::consts::TAU * uniform()).cos();
                ((20_000.0 * (1.5 * normal).exp()) as u64).clamp(1, 50_000_000)
            })
            .collect();
        let h = compact(&values).to_hdr();
        values.sort_unstable();
        let mut worst: f64 = 0.0;
        for q in [0.5, 0.9, 0.99, 0.999, 0.9999, 1.0] {
            let exact = values[((q * values.len() as f64).ceil() as usize).clamp(1, values.len()) - 1] as f64;
            let error = (h.value_at_quantile(q) as f64 - exact).abs() / exact;
            assert!(error <= 1.0 / 128.0, "q={q}: {error}");
            worst = worst.max(error);
        }
        println!("percentiles against ground truth (1 M log-normal latencies): largest error {:.3} %", worst * 100.0);
    }

    proptest! {
        /// Recording, adding and subtracting read back as HdrHistogram's own histogram of the
        /// same values does, bucket for bucket.
        #[test]
        fn the_same_as_hdrhistogram(
            a in prop::collection::vec(prop_oneof![1u64..300, 0u64..5_000_000, any::<u64>()], 0..600),
            b in prop::collection::vec(prop_oneof![1u64..300, 1u64..2_000], 0..2_000),
        ) {
            let (ca, cb) = (compact(&a), compact(&b));
            prop_assert_eq!(recorded(&ca.to_hdr()), recorded(&reference(&a)));
            prop_assert!(ca.to_hdr() == reference(&a));
            let mut sum = ca.clone();
            sum.add(&cb);
            let both: Vec<u64> = a.iter().chain(&b).copied().collect();
            prop_assert!(sum.to_hdr() == reference(&both));
            prop_assert_eq!(sum.len(), both.len() as u64);
            let mut into_empty = Compact::new();
            into_empty.add(&cb);
            into_empty.add(&ca);
            prop_assert_eq!(&into_empty.to_hdr(), &sum.to_hdr());
            sum.subtract(&ca);
            prop_assert_eq!(recorded(&sum.to_hdr()), recorded(&reference(&b)));
            prop_assert_eq!(sum.len(), b.len() as u64);
        }

        /// Every percentile is within 1/128 of the value recorded at it.
        #[test]
        fn percentiles_within_one_percent(values in prop::collection::vec(1u64..MAX_LATENCY_NS, 1..500), q in 0.0f64..1.0) {
            let mut sorted = values.clone();
            sorted.sort_unstable();
            let h = compact(&values).to_hdr();
            let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
            let exact = sorted[rank - 1] as f64;
            let read = h.value_at_quantile(q) as f64;
            prop_assert!((read - exact).abs() <= exact / 128.0, "q={} exact={} read={}", q, exact, read);
        }
    }
}
