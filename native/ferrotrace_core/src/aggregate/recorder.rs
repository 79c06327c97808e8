//! The flight recorder (`recent => N`): the last N events of the session's traced functions,
//! in the order they happened, with each return's or exception's duration when it paired.
//! A ring of N entries allocated once, on the collector thread; older entries are overwritten.

use std::collections::VecDeque;

use crate::memory::{opt_copy_bytes, vec_bytes};
use super::ordered::in_order;
use crate::event::{EventKind, Mfa};

/// Accepted `recent`, inclusive (0, the default, turns the recorder off).
pub const RECENT_RANGE: (i64, i64) = (0, 100_000);

/// One recorded event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recorded {
    /// When, ns on the session's clock (`clock::to_ns`).
    pub ts_ns: u64,
    /// The process, raw pid bits.
    pub pid: u64,
    /// The function.
    pub mfa: Mfa,
    /// `Call`, `Return` or `Exception`.
    pub kind: EventKind,
    /// For a return or exception paired with its call: the call's duration, ns.
    pub duration_ns: Option<u64>,
    /// A call's arguments, or a return's value or an exception's `{Class, Reason}` (`args`).
    pub copy: Option<crate::term_format::TermCopy>,
}

/// The last `capacity` events.
#[derive(Clone, Debug)]
pub struct Recorder {
    capacity: usize,
    events: VecDeque<Recorded>,
    /// Events recorded in all (those overwritten included).
    total: u64,
}

impl Recorder {
    /// An empty recorder of `capacity` (> 0) events, allocated now.
    pub fn new(capacity: usize) -> Self {
        Recorder { capacity, events: VecDeque::with_capacity(capacity), total: 0 }
    }

    /// Records one event, forgetting the oldest when full.
    #[inline]
    pub fn push(&mut self, event: Recorded) {
        if self.events.len() == self.capacity {
            self.events.pop_front();
        }
        self.events.push_back(event);
        self.total += 1;
    }

    /// Takes in `other`'s events (`Aggregator::merged`): both in time order, and the newest
    /// `capacity` (the larger) of them are kept, as one recorder fed both streams would;
    /// events at the same time keep this one's first. `total` is summed.
    pub fn merge_from(&mut self, other: &Recorder) {
        self.capacity = self.capacity.max(other.capacity);
        let merged = in_order(std::mem::take(&mut self.events), &other.events, |event| event.ts_ns);
        let older = merged.len().saturating_sub(self.capacity);
        self.events = merged.into_iter().skip(older).collect();
        self.total += other.total;
    }

    /// The events kept, oldest first.
    pub fn events(&self) -> impl Iterator<Item = &Recorded> {
        self.events.iter()
    }

    /// Events recorded in all, those overwritten included.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Heap bytes: the ring of events and their copies.
    pub fn bytes(&self) -> usize {
        vec_bytes::<Recorded>(self.events.capacity()) + self.events.iter().map(|event| opt_copy_bytes(&event.copy)).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::Aggregator;
    use crate::event::Event;

    const F: Mfa = Mfa { module: 1, function: 2, arity: 0 };
    const OTHER: Mfa = Mfa { module: 9, function: 9, arity: 0 };

    #[test]
    fn keeps_exactly_the_last_n_in_order() {
        let mut agg = Aggregator::new(10, 100).with_recent(3);
        agg.set_filter(vec![crate::aggregate::MfaPattern { module: Some(1), function: None, arity: None }]);
        for i in 0..5u64 {
            agg.record(&Event { ts: 10 * i, pid: i, mfa: F, kind: EventKind::Call });
            agg.record(&Event { ts: 10 * i + 1, pid: i, mfa: OTHER, kind: EventKind::Call });
            agg.record(&Event { ts: 10 * i + 4, pid: i, mfa: F, kind: EventKind::Return });
        }
        let recorder = agg.recorder().unwrap();
        let kept: Vec<(u64, u64, EventKind, Option<u64>)> =
            recorder.events().map(|e| (e.ts_ns, e.pid, e.kind, e.duration_ns)).collect();
        assert_eq!(kept, vec![
            (34, 3, EventKind::Return, Some(4)),
            (40, 4, EventKind::Call, None),
            (44, 4, EventKind::Return, Some(4)),
        ], "foreign events are not recorded");
        assert_eq!(recorder.total(), 10);
        assert!(Aggregator::new(1, 1).with_recent(0).recorder().is_none());
    }

}
