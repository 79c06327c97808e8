//! Captures (`capture => #{slower_than => Ns}`): a paired call whose latency reaches the
//! session's capture threshold is offered to the session's [`CaptureGate`] by whoever folds
//! its return in (an aggregator thread, the collector, or a reader bringing the figures up
//! to date). The gate lets at most one call through per `every` and `max` in all, counts
//! what it refuses, and queues the one it lets through; the collector thread hands the
//! queue to the notifier at its next collection (within a millisecond), as it hands over
//! loops: the notifier sends a message (`OwnedEnv`), which only a thread the VM does not
//! manage may do, and a reader folding events in runs on a dirty scheduler. The hot path
//! (the trace callbacks) does not change.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::event::Mfa;
use crate::sync::Mutex;

/// One call over the capture threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CaptureCall {
    /// The function called.
    pub mfa: Mfa,
    /// The process, as raw term bits.
    pub pid: u64,
    /// The call's latency, ns (compensated if the session compensates).
    pub latency_ns: u64,
    /// When the call began, ns on the session's clock.
    pub start_ns: u64,
    /// When it returned, ns on the session's clock.
    pub end_ns: u64,
}

/// What the collector thread calls with each call the gate let through
/// ([`CaptureGate::deliver`]).
pub type CaptureNotifier = Box<dyn Fn(&CaptureCall) + Send + Sync>;

/// The gate's counts: `seen` calls over the threshold, `sent` to the notifier, refused because one was sent
/// less than `every` before (`refused_every`) or `max` were sent (`refused_max`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CaptureCounts {
    /// Calls over the threshold.
    pub seen: u64,
    /// Those sent to the notifier.
    pub sent: u64,
    /// Refused: one was sent less than `every` before.
    pub refused_every: u64,
    /// Refused: `max` were sent.
    pub refused_max: u64,
}

/// No call sent yet.
const NONE: u64 = u64::MAX;

/// A session's capture threshold and bounds, shared by its aggregators.
pub struct CaptureGate {
    /// The capture threshold, ns: a call this slow or slower is offered.
    pub slower_than_ns: u64,
    every_ns: u64,
    max: u64,
    /// When the last call sent returned (ns), or [`NONE`].
    last_ns: AtomicU64,
    seen: AtomicU64,
    sent: AtomicU64,
    refused_every: AtomicU64,
    refused_max: AtomicU64,
    /// Let through, not yet delivered: at most `max` in all.
    pending: Mutex<Vec<CaptureCall>>,
    notify: CaptureNotifier,
}

impl CaptureGate {
    /// A gate sending to `notify` at most one call per `every_ns` and `max` in all.
    pub fn new(slower_than_ns: u64, every_ns: u64, max: u64, notify: CaptureNotifier) -> Self {
        CaptureGate {
            slower_than_ns,
            every_ns,
            max,
            last_ns: AtomicU64::new(NONE),
            seen: AtomicU64::new(0),
            sent: AtomicU64::new(0),
            refused_every: AtomicU64::new(0),
            refused_max: AtomicU64::new(0),
            pending: Mutex::new(Vec::new()),
            notify,
        }
    }

    /// A call over the threshold: queued for the notifier if the bounds allow (true), else counted as refused.
    /// Lock-free up to the queue (taken only for a call let through); two aggregators
    /// offering at once let at most one through per `every`.
    pub fn offer(&self, call: CaptureCall) -> bool {
        self.seen.fetch_add(1, Ordering::Relaxed);
        if self.sent.load(Ordering::Acquire) >= self.max {
            self.refused_max.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        if self.every_ns > 0 {
            let last = self.last_ns.load(Ordering::Acquire);
            // A call that returned before the last one sent (another aggregator's, folded
            // in later) is within `every` too.
            let within = last != NONE && call.end_ns.saturating_sub(last) < self.every_ns;
            if within || self.last_ns.compare_exchange(last, call.end_ns, Ordering::AcqRel, Ordering::Acquire).is_err() {
                self.refused_every.fetch_add(1, Ordering::Relaxed);
                return false;
            }
        }
        if self.sent.fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| (s < self.max).then_some(s + 1)).is_err() {
            self.refused_max.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        self.pending.lock().push(call);
        true
    }

    /// Hands the calls let through since the last call to the notifier, oldest first. For
    /// the collector thread (not a thread the VM manages).
    pub fn deliver(&self) {
        let pending = std::mem::take(&mut *self.pending.lock());
        for call in &pending {
            (self.notify)(call);
        }
    }

    /// The counts so far.
    pub fn counts(&self) -> CaptureCounts {
        CaptureCounts {
            seen: self.seen.load(Ordering::Relaxed),
            sent: self.sent.load(Ordering::Relaxed),
            refused_every: self.refused_every.load(Ordering::Relaxed),
            refused_max: self.refused_max.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    fn call(end_ns: u64) -> CaptureCall {
        CaptureCall { mfa: Mfa { module: 1, function: 2, arity: 0 }, pid: 3, latency_ns: 10, start_ns: end_ns - 10, end_ns }
    }

    fn gate(every_ns: u64, max: u64) -> (CaptureGate, Arc<Mutex<Vec<u64>>>) {
        let sent = Arc::new(Mutex::new(Vec::new()));
        let to = Arc::clone(&sent);
        (CaptureGate::new(5, every_ns, max, Box::new(move |s: &CaptureCall| to.lock().unwrap().push(s.end_ns))), sent)
    }

    #[test]
    fn gate_every_and_max() {
        let (g, sent) = gate(100, 2);
        assert!(g.offer(call(1000)));
        assert!(sent.lock().unwrap().is_empty(), "queued until delivered");
        g.deliver();
        assert_eq!(*sent.lock().unwrap(), vec![1000]);
        assert!(!g.offer(call(1050)));
        assert!(!g.offer(call(990)));
        assert!(g.offer(call(1100)));
        assert!(!g.offer(call(5000)));
        g.deliver();
        assert_eq!(*sent.lock().unwrap(), vec![1000, 1100]);
        assert_eq!(g.counts(), CaptureCounts { seen: 5, sent: 2, refused_every: 2, refused_max: 1 });
    }

    #[test]
    fn every_zero_sends_each_up_to_max() {
        let (g, sent) = gate(0, 3);
        for t in [100, 100, 50, 200] {
            g.offer(call(t));
        }
        g.deliver();
        assert_eq!(*sent.lock().unwrap(), vec![100, 100, 50]);
        assert_eq!(g.counts(), CaptureCounts { seen: 4, sent: 3, refused_every: 0, refused_max: 1 });
    }

    #[test]
    fn threads_never_pass_the_bounds() {
        let (g, sent) = gate(0, 7);
        let g = Arc::new(g);
        let threads: Vec<_> = (0..4)
            .map(|i| {
                let g = Arc::clone(&g);
                std::thread::spawn(move || (0..100).for_each(|n| { g.offer(call(1000 + i * 1000 + n)); }))
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        g.deliver();
        assert_eq!(sent.lock().unwrap().len(), 7);
        let c = g.counts();
        assert_eq!((c.seen, c.sent, c.refused_every + c.refused_max), (400, 7, 393));
    }
}
