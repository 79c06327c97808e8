//! Sharding: a session's aggregation split by pid over several aggregators, each on a thread
//! of its own (`aggregators => N`); each aggregator is a *shard*, owning the processes whose
//! pids hash to it. Below both the process table, which keeps state for its own pids only,
//! and the aggregators, which keep figures for theirs.
//!
//! In the order an event goes through them:
//! - this module: how many shards a session has, and which one owns a pid ([`shard_of`],
//!   [`Shard`]);
//! - [`route`]: where the collector sends each event (its tracee's owner, and another
//!   process's it moves on), and why that is exact.
//!
//! The threads the aggregators run on are the collector's (`crate::collector::shards`); the
//! aggregator's side is `Aggregator::with_shard`, `Aggregator::record_routed` and
//! `Aggregator::merged` (`crate::aggregate`).

pub mod route;

/// Accepted `aggregators`, inclusive.
pub const AGGREGATORS_RANGE: (i64, i64) = (1, 16);

/// Schedulers one aggregator keeps up with, for `aggregators => auto`: a scheduler at the
/// no-op floor makes about 3 M events/s, and one aggregator takes 13 to 20 M events/s (the
/// aggregator threads' CPU per event in `make collector-ceiling`, and the live bench's).
const SCHEDULERS_PER_AGGREGATOR: usize = 4;

/// `aggregators => auto`: one aggregator per four CPUs (schedulers), at least one.
pub fn auto_count() -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    cpus.div_ceil(SCHEDULERS_PER_AGGREGATOR).clamp(1, AGGREGATORS_RANGE.1 as usize)
}

/// Which of `count` aggregators owns `pid` (always 0 when `count` is 0 or 1).
///
/// Pids are immediates: consecutive processes differ by 16 (`n << 4 | 3`), so low bits say
/// nothing. A multiply by an odd 64-bit constant (Fibonacci hashing) moves the index into the
/// high bits, and the top 32 of them scale to `0..count` by a multiply-shift (no division).
#[inline]
pub fn shard_of(pid: u64, count: u32) -> u32 {
    let mixed = pid.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
    ((mixed * u64::from(count)) >> 32) as u32
}

/// Which part of the pid space an aggregator owns, its shard: `index` of `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// This aggregator's index, below `count`.
    pub index: u32,
    /// The aggregators sharing the session; 1: this one owns every pid.
    pub count: u32,
}

impl Default for Shard {
    fn default() -> Self {
        Shard { index: 0, count: 1 }
    }
}

impl Shard {
    /// True if this aggregator keeps `pid`'s state.
    #[inline]
    pub fn owns(&self, pid: u64) -> bool {
        self.count <= 1 || shard_of(pid, self.count) == self.index
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore = "40,000 hashes: slow under Miri; the hash is plain arithmetic")]
    fn consecutive_pids_spread_evenly() {
        for count in [2u32, 3, 4, 7, 16] {
            let mut per = vec![0u32; count as usize];
            let n = 10_000u64;
            for i in 0..n {
                let pid = (0x1_0000 + i) << 4 | 3;
                per[shard_of(pid, count) as usize] += 1;
            }
            let fair = n as f64 / count as f64;
            for (shard, got) in per.iter().enumerate() {
                let share = *got as f64 / fair;
                assert!((0.8..=1.2).contains(&share), "{count} shards: shard {shard} got {got} of {n}: {per:?}");
            }
        }
    }

    #[test]
    fn one_shard_owns_everything() {
        for pid in [0, 3, 19, u64::MAX] {
            assert_eq!(shard_of(pid, 1), 0);
            assert_eq!(shard_of(pid, 0), 0);
            assert!(Shard::default().owns(pid));
            assert!(shard_of(pid, 5) < 5);
        }
    }
}
