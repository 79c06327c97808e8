//! Per-call sampling (`sample => {calls, N}`): which calls `enabled_call` keeps.
//!
//! A kept call is decided before the VM runs the match spec: a refused one is answered
//! `discard`, so the VM pushes no return-trace frame and sends neither the call nor its return,
//! and pairs stay exact. The rate lives in the session's slot (`slots::SlotState`), where the
//! management NIF `session_set_call_sample/2` changes it while the session runs.
//!
//! # Which calls: a thread-local random draw against the rate
//! Each scheduler thread keeps an xorshift64* generator in its own thread-local (padded to
//! its own cache lines, so no other thread ever writes them); a call is kept when a 32-bit
//! draw `d` has `d * N < 2^32`, i.e. `d < 2^32 / N`: a multiply and a shift, no division,
//! and exactly every call when `N = 1`.
//! - Unbiased: the draw does not depend on which process or function is calling, so every
//!   process and every function keeps 1 call in N in expectation. A counter (per scheduler or
//!   per process) would alias with the calls' own period: a process alternating between two
//!   functions under an even N would have one function always kept and the other never.
//! - Cheap: one thread-local load and store, a few shifts and a multiply; no shared write (the
//!   refused call is then counted on the thread's own producer line, as every refusal is).
//! - Not reproducible between runs (seeds differ per thread and per load): sampling is a
//!   statistical tool, and the counts are of the kept calls, with the rate in the summary.
//!
//! `N = 0` keeps no call at all (a pause, and the floor of a refused call).

use std::cell::Cell;

use crossbeam_utils::CachePadded;

/// The most calls one is kept out of (`sample => {calls, N}`, `session_set_call_sample/2`):
/// the same bound as the per-process form's.
pub const MAX_CALL_RATE: u32 = 1_000_000;

/// The rate of a session that keeps every call.
pub const EVERY_CALL: u32 = 1;

/// One xorshift64* generator: a 64-bit state, never zero.
#[derive(Clone, Copy, Debug)]
pub struct Draws {
    state: u64,
}

impl Draws {
    /// A generator seeded from `seed` (any value: it is mixed, and zero is avoided).
    pub fn new(seed: u64) -> Draws {
        // splitmix64's finaliser spreads neighbouring seeds (thread addresses, counters).
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        Draws { state: if z == 0 { 0x2545_F491_4F6C_DD1D } else { z } }
    }

    /// The next 32 random bits (the high half of xorshift64*'s output, its best bits).
    #[inline]
    pub fn next_u32(&mut self) -> u32 {
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as u32
    }

    /// True if a call is kept at `rate` (1 call in `rate`; 0: none). Draws only when
    /// `rate > 1`.
    #[inline]
    pub fn keep(&mut self, rate: u32) -> bool {
        match rate {
            0 => false,
            1 => true,
            n => (u64::from(self.next_u32()) * u64::from(n)) >> 32 == 0,
        }
    }
}

thread_local! {
    /// This thread's generator; zero until its first draw seeds it. Padded: the lines it is
    /// on are written by this thread only.
    static DRAWS: CachePadded<Cell<u64>> = const { CachePadded::new(Cell::new(0)) };
}

/// True if this thread keeps its current call at `rate` (see the module docs). Never panics:
/// while the thread-local is gone (a thread exiting), every call is kept at a rate above 0.
#[inline]
pub fn keep_call(rate: u32) -> bool {
    if rate <= 1 {
        return rate == 1;
    }
    DRAWS
        .try_with(|cell| {
            let state = cell.get();
            let mut draws = if state == 0 {
                // First draw on this thread: seed from the cell's address (distinct per
                // thread) and the clock (distinct per load).
                Draws::new((std::ptr::from_ref(cell) as u64) ^ crate::clock::now().rotate_left(32))
            } else {
                Draws { state }
            };
            let keep = draws.keep(rate);
            cell.set(draws.state);
            keep
        })
        .unwrap_or(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kept calls over `draws` draws at `rate`.
    fn kept(draws: &mut Draws, rate: u32, n: u32) -> u32 {
        (0..n).filter(|_| draws.keep(rate)).count() as u32
    }

    #[test]
    #[cfg_attr(miri, ignore = "millions of draws: too slow under Miri (rate_zero_keeps_none covers the path)")]
    fn the_rate_is_honoured_within_tolerance() {
        let mut draws = Draws::new(7);
        let n = 1_000_000;
        assert_eq!(kept(&mut draws, 1, n), n);
        for rate in [2u32, 10, 100] {
            let expected = f64::from(n) / f64::from(rate);
            let got = f64::from(kept(&mut draws, rate, n));
            // Binomial: 5 standard deviations.
            let sd = (expected * (1.0 - 1.0 / f64::from(rate))).sqrt();
            assert!((got - expected).abs() < 5.0 * sd, "rate {rate}: {got} kept, {expected} expected");
        }
    }

    #[test]
    fn rate_zero_keeps_none() {
        let mut draws = Draws::new(1);
        assert_eq!(kept(&mut draws, 0, 100_000), 0);
        assert!((0..1000).all(|_| !keep_call(0)));
    }

    #[test]
    #[cfg_attr(miri, ignore = "millions of draws: too slow under Miri (rate_zero_keeps_none covers the path)")]
    fn alternating_functions_are_both_sampled() {
        // A process alternating between two functions: under a per-thread counter and an
        // even rate, one of them would never be kept.
        for rate in [2u32, 4, 10] {
            let mut counts = [0u32; 2];
            for i in 0..200_000u32 {
                if keep_call(rate) {
                    counts[(i % 2) as usize] += 1;
                }
            }
            let expected = 100_000.0 / f64::from(rate);
            for c in counts {
                assert!((f64::from(c) - expected).abs() < 0.05 * expected, "rate {rate}: {counts:?}");
            }
        }
    }

    #[test]
    fn threads_draw_differently() {
        let seqs: Vec<Vec<bool>> = (0..4)
            .map(|_| std::thread::spawn(|| (0..64).map(|_| keep_call(2)).collect()).join().unwrap())
            .collect();
        assert!(seqs.windows(2).all(|w| w[0] != w[1]), "{seqs:?}");
    }

    #[test]
    fn seeds_are_never_zero() {
        assert!((0..1000u64).all(|s| Draws::new(s).state != 0));
    }
}
