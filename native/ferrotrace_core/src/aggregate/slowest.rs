//! Which calls were slow: per function, the K slowest calls (a min-heap of K, so a call that
//! is not among them costs one comparison), and, with a threshold, every call slower than it
//! up to a bound, the excess counted. Fed by the aggregator when a call pairs with its return
//! or exception, on the collector thread; nothing here runs on a scheduler.
//!
//! Memory is bounded per function: `keep` entries in the heap and `max_slow_calls` in the
//! threshold list, 40 bytes each; with `max_functions` functions that is the session's bound.

use std::collections::BinaryHeap;
use std::cmp::Reverse;

use super::histogram::MAX_LATENCY_NS;
use crate::memory::{opt_copy_bytes, vec_bytes};
use super::ordered::in_order;

/// Default number of slowest calls kept per function.
pub const DEFAULT_KEEP: usize = 10;
/// Accepted `slowest`, inclusive (0 turns it off).
pub const KEEP_RANGE: (i64, i64) = (0, 1_000);
/// Accepted `threshold` in ns, inclusive (up to the one-hour latency bound).
pub const THRESHOLD_RANGE: (i64, i64) = (1, MAX_LATENCY_NS as i64);
/// Default bound of the calls kept over the threshold, per function.
pub const DEFAULT_MAX_SLOW_CALLS: usize = 1_000;
/// Accepted `max_slow_calls`, inclusive.
pub const MAX_SLOW_CALLS_RANGE: (i64, i64) = (1, 100_000);

/// What a session keeps of its slow calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlowestConfig {
    /// The K slowest calls kept per function; 0: none.
    pub keep: usize,
    /// Every call slower than this (ns) is kept, up to `max_slow_calls` per function.
    pub threshold_ns: Option<u64>,
    /// Bound of the calls kept over the threshold, per function; the excess is counted.
    pub max_slow_calls: usize,
}

impl Default for SlowestConfig {
    fn default() -> Self {
        SlowestConfig { keep: DEFAULT_KEEP, threshold_ns: None, max_slow_calls: DEFAULT_MAX_SLOW_CALLS }
    }
}

/// One kept call. Ordered by duration first (then start, pid), which is the heap's order.
#[derive(Clone, Debug, Default)]
pub struct SlowCall {
    /// Call to return or exception, ns.
    pub duration_ns: u64,
    /// When the call began: ns on the session's clock (`clock::to_ns`).
    pub start_ns: u64,
    /// The caller's pid, raw term bits (an immediate).
    pub pid: u64,
    /// True if the call ended with an exception.
    pub exception: bool,
    /// Its arguments (`args => true`): a copy of the argument list.
    pub args: Option<crate::term_format::TermCopy>,
    /// Its return value or `{Class, Reason}` (`args => true`).
    pub result: Option<crate::term_format::TermCopy>,
}

impl SlowCall {
    fn key(&self) -> (u64, u64, u64, bool) {
        (self.duration_ns, self.start_ns, self.pid, self.exception)
    }
}

impl PartialEq for SlowCall {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key() && self.args == other.args && self.result == other.result
    }
}
impl Eq for SlowCall {}
impl PartialOrd for SlowCall {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for SlowCall {
    /// By duration, start, pid (the copies do not count).
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key().cmp(&other.key())
    }
}

/// The slow calls of one function.
#[derive(Debug)]
pub struct SlowCalls {
    config: SlowestConfig,
    /// The `keep` slowest so far; the root is the fastest of them.
    top: BinaryHeap<Reverse<SlowCall>>,
    /// Calls over the threshold, in the order they ended.
    over: Vec<SlowCall>,
    /// Calls over the threshold not kept (the bound was reached).
    over_dropped: u64,
}

impl SlowCalls {
    /// Nothing kept yet, keeping what `config` says.
    pub fn new(config: SlowestConfig) -> Self {
        SlowCalls { config, top: BinaryHeap::new(), over: Vec::new(), over_dropped: 0 }
    }

    /// Considers one finished call.
    #[inline]
    pub fn offer(&mut self, call: SlowCall) {
        let keep = self.config.keep;
        if keep > 0 {
            if self.top.len() < keep {
                self.top.push(Reverse(call.clone()));
            } else if let Some(mut fastest) = self.top.peek_mut() {
                if call > fastest.0 {
                    // Replaces the root and sifts it down: no allocation.
                    *fastest = Reverse(call.clone());
                }
            }
        }
        if let Some(threshold) = self.config.threshold_ns {
            if call.duration_ns > threshold {
                if self.over.len() < self.config.max_slow_calls {
                    self.over.push(call);
                } else {
                    self.over_dropped += 1;
                }
            }
        }
    }

    /// Adds `other`'s kept calls to these (`Aggregator::merged`), as if this had been offered
    /// both streams of calls: the K slowest of both, and the first `max_slow_calls` over the
    /// threshold by the time they ended (then this one's first), the rest counted as
    /// dropped. Exact for calls of distinct processes (the parts own disjoint pids).
    pub fn merge_from(&mut self, other: &SlowCalls) {
        let keep = self.config.keep;
        for Reverse(call) in &other.top {
            if self.top.len() < keep {
                self.top.push(Reverse(call.clone()));
            } else if let Some(mut fastest) = self.top.peek_mut() {
                if *call > fastest.0 {
                    *fastest = Reverse(call.clone());
                }
            }
        }
        // Both lists are in the order calls ended: merge them and keep the first ones.
        let ends = |c: &SlowCall| c.start_ns.saturating_add(c.duration_ns);
        let mut merged = in_order(std::mem::take(&mut self.over), &other.over, ends);
        let bound = self.config.max_slow_calls;
        self.over_dropped += other.over_dropped + merged.len().saturating_sub(bound) as u64;
        merged.truncate(bound);
        self.over = merged;
    }

    /// The K slowest calls, slowest first.
    pub fn slowest(&self) -> Vec<SlowCall> {
        let mut calls: Vec<SlowCall> = self.top.iter().map(|r| r.0.clone()).collect();
        calls.sort_unstable_by(|a, b| b.cmp(a));
        calls
    }

    /// The calls kept over the threshold, in the order they began.
    pub fn over_threshold(&self) -> Vec<SlowCall> {
        let mut calls = self.over.clone();
        calls.sort_by_key(|c| (c.start_ns, c.pid));
        calls
    }

    /// Calls over the threshold that were not kept.
    pub fn over_dropped(&self) -> u64 {
        self.over_dropped
    }

    /// What this keeps.
    #[cfg(test)]
    pub fn config(&self) -> SlowestConfig {
        self.config
    }

    /// Heap bytes of the kept calls and their copies (`memory`'s `slow_calls`).
    pub fn bytes(&self) -> usize {
        let copies = |call: &SlowCall| opt_copy_bytes(&call.args) + opt_copy_bytes(&call.result);
        vec_bytes::<std::cmp::Reverse<SlowCall>>(self.top.capacity())
            + vec_bytes::<SlowCall>(self.over.capacity())
            + self.top.iter().map(|call| copies(&call.0)).sum::<usize>()
            + self.over.iter().map(copies).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::Aggregator;
    use crate::event::{Event, EventKind, Mfa};
    use proptest::prelude::*;

    fn call(duration_ns: u64, start_ns: u64) -> SlowCall {
        SlowCall { duration_ns, start_ns, pid: 1, exception: false, ..SlowCall::default() }
    }

    #[test]
    fn keeps_nothing_when_off() {
        let mut slow = SlowCalls::new(SlowestConfig { keep: 0, threshold_ns: None, max_slow_calls: 1 });
        slow.offer(call(5, 0));
        assert!(slow.slowest().is_empty());
        assert!(slow.over_threshold().is_empty());
    }

    #[test]
    fn threshold_keeps_every_slower_call_up_to_the_bound() {
        let mut slow = SlowCalls::new(SlowestConfig { keep: 1, threshold_ns: Some(100), max_slow_calls: 3 });
        for (i, d) in [50u64, 101, 100, 500, 200, 300, 7].into_iter().enumerate() {
            // Ending in an order other than the start order.
            slow.offer(call(d, 1000 - i as u64));
        }
        let over: Vec<u64> = slow.over_threshold().iter().map(|c| c.duration_ns).collect();
        assert_eq!(over, vec![200, 500, 101], "in start order");
        assert_eq!(slow.over_dropped(), 1);
        assert_eq!(slow.slowest(), vec![call(500, 997)]);
    }

    #[test]
    fn the_aggregator_keeps_the_slowest_paired_calls() {
        const F: Mfa = Mfa { module: 1, function: 2, arity: 1 };
        let config = SlowestConfig { keep: 2, threshold_ns: Some(25), max_slow_calls: 10 };
        let mut agg = Aggregator::new(10, 100).with_slowest(config);
        let ev = |kind, pid, ts| Event { ts, pid, mfa: F, kind };
        for (pid, start, end, kind) in [(1, 0, 10, EventKind::Return), (2, 5, 45, EventKind::Exception),
                                         (3, 6, 36, EventKind::Return), (1, 20, 40, EventKind::Return)] {
            agg.record(&ev(EventKind::Call, pid, start));
            agg.record(&ev(kind, pid, end));
        }
        let slow = &agg.function(&F).unwrap().slow;
        assert_eq!(slow.slowest(), vec![
            SlowCall { duration_ns: 40, start_ns: 5, pid: 2, exception: true, ..SlowCall::default() },
            SlowCall { duration_ns: 30, start_ns: 6, pid: 3, exception: false, ..SlowCall::default() },
        ]);
        assert_eq!(slow.over_threshold().len(), 2);
        assert_eq!(slow.config(), config);
    }

    proptest! {
        /// The heap keeps exactly the K largest of any sequence (as a sort of it says), and
        /// the threshold list exactly the calls over it, up to the bound, the rest counted.
        #[test]
        fn top_k_matches_a_sort(durations in prop::collection::vec(0u64..1_000, 0..300),
                                keep in 0usize..20, threshold in 0u64..1_000, bound in 1usize..50) {
            let config = SlowestConfig { keep, threshold_ns: Some(threshold), max_slow_calls: bound };
            let mut slow = SlowCalls::new(config);
            let calls: Vec<SlowCall> = durations.iter().enumerate().map(|(i, d)| call(*d, i as u64)).collect();
            for c in &calls {
                slow.offer(c.clone());
            }
            let mut sorted = calls.clone();
            sorted.sort_by(|a, b| b.cmp(a));
            sorted.truncate(keep);
            prop_assert_eq!(slow.slowest(), sorted);
            let over: Vec<SlowCall> = calls.iter().filter(|c| c.duration_ns > threshold).cloned().collect();
            let kept: Vec<SlowCall> = over.iter().take(bound).cloned().collect();
            prop_assert_eq!(slow.over_threshold(), kept);
            prop_assert_eq!(slow.over_dropped(), over.len().saturating_sub(bound) as u64);
        }
    }
}
