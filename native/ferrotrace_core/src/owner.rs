//! Which of a session's aggregators owns a pid (`aggregators => N`): below both the process
//! table, which keeps state for its own pids only, and the aggregators that route by it.

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

/// Which part of the pid space an aggregator owns: `index` of `count`.
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
