//! Own (exclusive) time, as erlang_doctor's `own_time`: a call's latency minus the time spent
//! in the traced calls it made in the same process (paired calls only; frames abandoned by an
//! untraced exception are not subtracted, their time is unknown). Recursion counts as a
//! callee: `f -> f` gives the outer call only the time outside the inner one.

use super::compact::Compact;

/// The own time of one function's calls.
pub struct OwnTime {
    /// Sum of own times, ns (saturating).
    pub total_ns: u64,
    /// Own time per call, ns.
    pub latency: Compact,
}

impl OwnTime {
    /// Adds `other`'s own times to these (`Aggregator::merged`).
    pub fn merge_from(&mut self, other: &OwnTime) {
        self.total_ns = self.total_ns.saturating_add(other.total_ns);
        self.latency.add(&other.latency);
    }

    /// Records one call that took `duration_ns`, `callees_ns` of it in traced callees.
    pub(super) fn record(&mut self, duration_ns: u64, callees_ns: u64) {
        let own = duration_ns.saturating_sub(callees_ns);
        self.total_ns = self.total_ns.saturating_add(own);
        // Clamped to 1 ns .. one hour, like latencies.
        self.latency.record(own);
    }
}

#[cfg(test)]
mod tests {
    use crate::aggregate::tests::ev;
    use crate::aggregate::Aggregator;
    use crate::event::{EventKind, Mfa};
    use proptest::prelude::*;

    const F: Mfa = Mfa { module: 1, function: 2, arity: 0 };
    const G: Mfa = Mfa { module: 1, function: 3, arity: 0 };
    const H: Mfa = Mfa { module: 1, function: 4, arity: 0 };

    #[test]
    fn own_time_excludes_traced_callees() {
        let mut agg = Aggregator::new(10, 100);
        // f [0, 100] calls g [10, 40] and h [50, 90]; h raises.
        for (kind, mfa, ts) in [(EventKind::Call, F, 0), (EventKind::Call, G, 10), (EventKind::Return, G, 40),
                                (EventKind::Call, H, 50), (EventKind::Exception, H, 90), (EventKind::Return, F, 100)] {
            agg.record(&ev(kind, 1, mfa, ts));
        }
        let own = |mfa| agg.function(&mfa).unwrap().own.total_ns;
        assert_eq!((own(F), own(G), own(H)), (30, 30, 40));
        assert_eq!(agg.function(&F).unwrap().total_ns, 100);
    }

    #[test]
    fn recursion_and_other_processes() {
        let mut agg = Aggregator::new(10, 100);
        // f(1) [0, 50] calls f(0) [10, 30]; process 2's g runs meanwhile and counts for no one.
        agg.record(&ev(EventKind::Call, 1, F, 0));
        agg.record(&ev(EventKind::Call, 1, F, 10));
        agg.record(&ev(EventKind::Call, 2, G, 11));
        agg.record(&ev(EventKind::Return, 2, G, 29));
        agg.record(&ev(EventKind::Return, 1, F, 30));
        agg.record(&ev(EventKind::Return, 1, F, 50));
        let f = &agg.function(&F).unwrap().own;
        assert_eq!(f.total_ns, 20 + 30);
        assert_eq!(agg.function(&G).unwrap().own.total_ns, 18);
    }

    #[test]
    fn abandoned_frames_are_not_subtracted() {
        let mut agg = Aggregator::new(10, 100);
        agg.record(&ev(EventKind::Call, 1, F, 0));
        agg.record(&ev(EventKind::Call, 1, G, 10)); // raises without exception_trace
        agg.record(&ev(EventKind::Return, 1, F, 100));
        assert_eq!(agg.function(&F).unwrap().own.total_ns, 100);
    }

    proptest! {
        /// In any well-nested call tree of one process, the own times of all calls add up to
        /// the time the outermost calls took.
        #[test]
        fn own_times_add_up_to_the_roots(ops in prop::collection::vec((any::<bool>(), 0u8..3, 1u64..1000), 1..200)) {
            let mfas = [F, G, H];
            let mut agg = Aggregator::new(10, 1000);
            let (mut ts, mut stack, mut roots) = (0u64, Vec::new(), 0u64);
            for (open, which, dt) in ops {
                ts += dt;
                if open || stack.is_empty() {
                    stack.push((mfas[which as usize], ts));
                    agg.record(&ev(EventKind::Call, 1, mfas[which as usize], ts));
                } else {
                    let (mfa, start) = stack.pop().unwrap();
                    agg.record(&ev(EventKind::Return, 1, mfa, ts));
                    if stack.is_empty() { roots += ts - start; }
                }
            }
            while let Some((mfa, start)) = stack.pop() {
                ts += 1;
                agg.record(&ev(EventKind::Return, 1, mfa, ts));
                if stack.is_empty() { roots += ts - start; }
            }
            let own: u64 = agg.functions().map(|(_, s)| s.own.total_ns).sum();
            prop_assert_eq!(own, roots);
        }
    }
}
