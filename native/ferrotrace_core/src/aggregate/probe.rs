//! The probe effect: how many of the session's own events each call contained, and its
//! latency with their cost taken out (`compensate`).
//!
//! Every traced call made inside a traced call costs its caller the VM's and the tracer's
//! work for its call and return events; a function whose callees are traced looks slower
//! than it is. Each open frame counts the events of its process between its call and its
//! return, not its own two ([`Inner`]: calls, and returns or exceptions, apart, as their
//! costs differ). The counts go up the stack as frames close, so counting costs no lookup
//! per event: a closed frame hands its events and its own two to its caller; events that
//! open no frame (a loop's call, a call past `max_functions` or outside the filter, a return
//! without its call) are added to the innermost open frame of their process.
//!
//! With a [`Compensation`] (the per-event costs the session measured at its start: see
//! `ferrotrace_calibrate`), a call's latency is recorded less `calls × call_ns + returns ×
//! return_ns` for its inner events, never below zero; its own time less the part of that
//! cost not already taken out of its callees. The raw latency is kept beside it
//! ([`RawLatency`]), only for functions whose calls had inner events.
//!
//! Not counted: process activity (messages, GC, scheduling) inside a call, calls refused by
//! `sample` or a limit (no event, though the VM asked the tracer), events dropped on a full
//! ring (never seen here).

use super::compact::Compact;
use super::histogram::MAX_LATENCY_NS;

/// Events of the session inside a call: call events, and return or exception events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Inner {
    /// Call events.
    pub calls: u32,
    /// Return and exception events.
    pub returns: u32,
}

impl Inner {
    /// One call event.
    pub const CALL: Inner = Inner { calls: 1, returns: 0 };
    /// One return or exception event.
    pub const RETURN: Inner = Inner { calls: 0, returns: 1 };
    /// A paired call's own two events.
    pub const PAIR: Inner = Inner { calls: 1, returns: 1 };

    /// Both counts added (saturating: a call with four billion events inside stays there).
    #[must_use]
    pub fn plus(self, other: Inner) -> Inner {
        Inner { calls: self.calls.saturating_add(other.calls), returns: self.returns.saturating_add(other.returns) }
    }

    /// All events.
    pub fn total(self) -> u64 {
        u64::from(self.calls) + u64::from(self.returns)
    }
}

/// What the session takes out per inner event (ns): the cost its caller pays for a traced
/// call's call event and for its return event, measured at the session's start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Compensation {
    /// Per call event, ns.
    pub call_ns: u64,
    /// Per return or exception event, ns.
    pub return_ns: u64,
}

impl Compensation {
    /// The cost of `inner`'s events, ns.
    pub fn cost(&self, inner: Inner) -> u64 {
        u64::from(inner.calls).saturating_mul(self.call_ns).saturating_add(u64::from(inner.returns).saturating_mul(self.return_ns))
    }

    /// A call's latency and own time less the cost of its events: `duration_ns` with
    /// `inner` events inside, `callees_ns` of it in traced callees that had `callees_inner`
    /// inside them (already taken out of theirs). Neither goes below zero.
    pub fn compensated(&self, duration_ns: u64, callees_ns: u64, inner: Inner, callees_inner: Inner) -> (u64, u64) {
        let cost = self.cost(inner);
        let latency = duration_ns.saturating_sub(cost);
        // Own time is latency less the callees' (compensated) latencies: the callees' own
        // inner cost was taken out of theirs, so only the rest comes out of this own time.
        let own_cost = cost.saturating_sub(self.cost(callees_inner));
        let own = duration_ns.saturating_sub(callees_ns).saturating_sub(own_cost);
        (latency, own)
    }
}

/// The inner events of one function's calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InnerEvents {
    /// Over every paired call (saturating).
    pub total: u64,
    /// The most in one call.
    pub max: u64,
    /// The cost taken out of the latencies, ns (saturating; 0 without compensation).
    pub compensated_ns: u64,
}

impl InnerEvents {
    /// Counts one paired call's inner events, of which `taken_ns` were taken out.
    pub(super) fn record(&mut self, inner: Inner, taken_ns: u64) {
        self.total = self.total.saturating_add(inner.total());
        self.max = self.max.max(inner.total());
        self.compensated_ns = self.compensated_ns.saturating_add(taken_ns);
    }

    /// Adds `other`'s counts (`Aggregator::merged`).
    pub(super) fn merge_from(&mut self, other: &InnerEvents) {
        self.total = self.total.saturating_add(other.total);
        self.max = self.max.max(other.max);
        self.compensated_ns = self.compensated_ns.saturating_add(other.compensated_ns);
    }
}

/// A compensated function's latency as measured (before compensation): kept from the first
/// call that had something taken out, starting as a copy of the compensated histogram (the
/// calls before had nothing taken out, so they are the same).
pub struct RawLatency {
    /// Sum of raw latencies, ns (saturating).
    pub total_ns: u64,
    /// Raw latency per call, ns.
    pub latency: Compact,
}

impl RawLatency {
    /// Records a raw latency.
    pub(super) fn record(&mut self, ns: u64) {
        let ns = ns.clamp(1, MAX_LATENCY_NS);
        self.total_ns = self.total_ns.saturating_add(ns);
        self.latency.record(ns);
    }

    /// Adds `other`'s latencies (`Aggregator::merged`).
    pub(super) fn merge_from(&mut self, other: &RawLatency) {
        self.total_ns = self.total_ns.saturating_add(other.total_ns);
        self.latency.add(&other.latency);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::tests::ev;
    use crate::aggregate::Aggregator;
    use crate::event::{EventKind, Mfa};

    const F: Mfa = Mfa { module: 1, function: 2, arity: 0 };
    const G: Mfa = Mfa { module: 1, function: 3, arity: 0 };
    const H: Mfa = Mfa { module: 1, function: 4, arity: 0 };
    /// Outside the filter: its events count inside F, it gets no figures.
    const OUT: Mfa = Mfa { module: 9, function: 9, arity: 0 };
    const COST: Compensation = Compensation { call_ns: 3, return_ns: 2 };

    fn feed(agg: &mut Aggregator, events: &[(EventKind, u64, Mfa, u64)]) {
        for &(kind, pid, mfa, ts) in events {
            agg.record(&ev(kind, pid, mfa, ts));
        }
    }

    fn inner(agg: &Aggregator, mfa: Mfa) -> InnerEvents {
        agg.function(&mfa).unwrap().inner
    }

    use EventKind::{Call, Exception, Exit, Return};

    #[test]
    fn nested_calls_count_what_is_inside_them() {
        let mut agg = Aggregator::new(10, 100);
        // f [0, 100] calls g twice; the second g calls h, which raises (exception_trace).
        feed(&mut agg, &[(Call, 1, F, 0), (Call, 1, G, 10), (Return, 1, G, 20), (Call, 1, G, 30), (Call, 1, H, 40),
                         (Exception, 1, H, 50), (Return, 1, G, 60), (Return, 1, F, 100)]);
        assert_eq!(inner(&agg, F), InnerEvents { total: 6, max: 6, compensated_ns: 0 });
        assert_eq!(inner(&agg, G), InnerEvents { total: 2, max: 2, compensated_ns: 0 });
        assert_eq!(inner(&agg, H).total, 0);
        // Another process's events never count.
        feed(&mut agg, &[(Call, 1, F, 200), (Call, 2, G, 201), (Return, 2, G, 202), (Return, 1, F, 210)]);
        assert_eq!(inner(&agg, F), InnerEvents { total: 6, max: 6, compensated_ns: 0 });
    }

    #[test]
    fn events_without_a_frame_count_in_the_innermost_call() {
        let mut agg = Aggregator::new(10, 100);
        agg.set_filter(vec![crate::aggregate::MfaPattern { module: Some(1), function: None, arity: None }]);
        agg.set_loops(&[H]);
        // Inside f: a call and return outside the filter, a loop's call (no return), a
        // return without its call.
        feed(&mut agg, &[(Call, 1, F, 0), (Call, 1, OUT, 1), (Return, 1, OUT, 2), (Call, 1, H, 3), (Return, 1, G, 4),
                         (Return, 1, F, 10)]);
        assert_eq!(inner(&agg, F).total, 4);
    }

    #[test]
    fn abandoned_frames_and_their_events_count_in_the_call_that_returns() {
        let mut agg = Aggregator::new(10, 100);
        // g is unwound by an untraced exception after calling h: f's return finds g open.
        feed(&mut agg, &[(Call, 1, F, 0), (Call, 1, G, 10), (Call, 1, H, 20), (Return, 1, H, 30), (Return, 1, F, 100)]);
        assert_eq!(inner(&agg, F).total, 3);
        assert_eq!(agg.counters().abandoned_calls, 1);
    }

    #[test]
    fn a_process_exiting_inside_calls_leaves_nothing_behind() {
        let mut agg = Aggregator::new(10, 100);
        feed(&mut agg, &[(Call, 1, F, 0), (Call, 1, G, 10), (Return, 1, G, 20), (Exit, 1, F, 30)]);
        // The pid comes back (a new process with a reused pid): its first call starts clean.
        feed(&mut agg, &[(Call, 1, F, 40), (Return, 1, F, 50)]);
        assert_eq!(inner(&agg, F), InnerEvents { total: 0, max: 0, compensated_ns: 0 });
        assert_eq!(agg.function(&F).unwrap().calls, 2);
    }

    #[test]
    fn compensation_takes_out_the_inner_events_cost_never_below_zero() {
        let mut agg = Aggregator::new(10, 100).with_compensation(Some(COST));
        // f [0, 100] calls g [10, 40] twice... once; g calls h [20, 25].
        feed(&mut agg, &[(Call, 1, F, 0), (Call, 1, G, 10), (Call, 1, H, 20), (Return, 1, H, 25), (Return, 1, G, 40),
                         (Return, 1, F, 100)]);
        let f = agg.function(&F).unwrap();
        // f: 2 calls and 2 returns inside: 2*3 + 2*2 = 10 taken out.
        assert_eq!((f.total_ns, f.raw.as_ref().unwrap().total_ns), (90, 100));
        assert_eq!(f.inner.compensated_ns, 10);
        // g: h's pair (5) taken out: 30 - 5 = 25.
        assert_eq!(agg.function(&G).unwrap().total_ns, 25);
        // h: nothing inside, no raw histogram kept.
        assert!(agg.function(&H).unwrap().raw.is_none());
        // Own times: h 5; g 30 - 5 (h) - 5 (h's pair) = 20; f 100 - 30 (g) - (10 - 5) = 65.
        let own = |mfa| agg.function(&mfa).unwrap().own.total_ns;
        assert_eq!((own(H), own(G), own(F)), (5, 20, 65));
        // The compensated own times add up to the root's compensated latency.
        assert_eq!(own(H) + own(G) + own(F), 90);

        // A call shorter than its inner events' cost is recorded as zero (kept at the
        // histogram's floor of 1 ns), its own time too.
        let mut agg = Aggregator::new(10, 100).with_compensation(Some(Compensation { call_ns: 500, return_ns: 500 }));
        feed(&mut agg, &[(Call, 1, F, 0), (Call, 1, G, 10), (Return, 1, G, 20), (Return, 1, F, 30)]);
        let f = agg.function(&F).unwrap();
        assert_eq!((f.total_ns, f.latency.to_hdr().max(), f.own.total_ns, f.raw.as_ref().unwrap().latency.to_hdr().max()), (1, 1, 0, 30));
    }

    #[test]
    fn the_raw_histogram_starts_as_a_copy_of_the_compensated_one() {
        let mut agg = Aggregator::new(10, 100).with_compensation(Some(COST));
        // Two calls of f with nothing inside, then one with g inside.
        feed(&mut agg, &[(Call, 1, F, 0), (Return, 1, F, 7), (Call, 1, F, 10), (Return, 1, F, 17),
                         (Call, 1, F, 20), (Call, 1, G, 21), (Return, 1, G, 22), (Return, 1, F, 40)]);
        let f = agg.function(&F).unwrap();
        let raw = f.raw.as_ref().unwrap();
        assert_eq!((raw.latency.len(), raw.total_ns, raw.latency.to_hdr().max()), (3, 34, 20));
        assert_eq!((f.latency.len(), f.total_ns, f.latency.to_hdr().max()), (3, 29, 15));
    }

    #[test]
    fn compensation_set_while_running_takes_out_of_later_calls_only() {
        let mut agg = Aggregator::new(10, 100);
        // Before: f with g inside, recorded as measured.
        feed(&mut agg, &[(Call, 1, F, 0), (Call, 1, G, 1), (Return, 1, G, 2), (Return, 1, F, 40)]);
        agg.set_compensation(Some(COST));
        // After: the same call, g's pair (3 + 2) taken out.
        feed(&mut agg, &[(Call, 1, F, 100), (Call, 1, G, 101), (Return, 1, G, 102), (Return, 1, F, 140)]);
        let f = agg.function(&F).unwrap();
        let raw = f.raw.as_ref().unwrap();
        // The raw histogram holds both calls as measured; the latencies, 40 and 35.
        assert_eq!((raw.latency.len(), raw.total_ns), (2, 80));
        assert_eq!((f.latency.len(), f.total_ns, f.inner.compensated_ns), (2, 75, 5));
        assert_eq!(agg.compensation(), Some(COST));
    }

    #[test]
    fn merged_parts_keep_raw_and_inner_events() {
        // Part a: f with g inside (something taken out); part b: f alone (no raw kept).
        let mut a = Aggregator::new(10, 100).with_compensation(Some(COST));
        feed(&mut a, &[(Call, 1, F, 0), (Call, 1, G, 1), (Return, 1, G, 2), (Return, 1, F, 40)]);
        let mut b = Aggregator::new(10, 100).with_compensation(Some(COST));
        feed(&mut b, &[(Call, 2, F, 0), (Return, 2, F, 8)]);
        for merged in [Aggregator::merged(&[&a, &b]), Aggregator::merged(&[&b, &a])] {
            let f = merged.function(&F).unwrap();
            let raw = f.raw.as_ref().unwrap();
            assert_eq!((f.total_ns, raw.total_ns, raw.latency.len(), raw.latency.to_hdr().max()), (35 + 8, 48, 2, 40));
            assert_eq!(f.inner, InnerEvents { total: 2, max: 2, compensated_ns: 5 });
            assert_eq!(merged.compensation(), Some(COST));
        }
    }

    #[test]
    fn compensation_arithmetic() {
        assert_eq!(COST.cost(Inner { calls: 50, returns: 50 }), 250);
        assert_eq!(COST.compensated(1_000, 400, Inner { calls: 3, returns: 3 }, Inner { calls: 1, returns: 1 }), (985, 590));
        assert_eq!(COST.compensated(10, 0, Inner { calls: 3, returns: 3 }, Inner::default()), (0, 0));
        let huge = Compensation { call_ns: u64::MAX, return_ns: u64::MAX };
        assert_eq!(huge.compensated(10, 5, Inner { calls: u32::MAX, returns: 1 }, Inner::default()), (0, 0));
        assert_eq!(Inner { calls: u32::MAX, returns: 0 }.plus(Inner::CALL).calls, u32::MAX);
    }
}
