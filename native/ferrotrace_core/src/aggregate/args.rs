//! Copies of arguments and results (`args => true`) in the aggregator: a call's copy rides in
//! its open frame and, when the call pairs with its return or exception, goes with the result's
//! copy into the slow call offered to `SlowCalls` (kept only if the call is) and into the
//! flight recorder. Copies of calls that are not kept are dropped here, on the collector, and
//! never reach Erlang.
//!
//! Memory: an open call holds its copy (`max_term_bytes` at most) until it returns, so at most
//! `max_open_calls * max_term_bytes`; kept calls and recorded events one or two copies each.

use super::Aggregator;
use crate::event::Event;
use crate::term_format::EventCopies;

impl Aggregator {
    /// Folds one event in with the copies made for it: its arguments or result, and a call's
    /// key (`keyed.rs`).
    #[inline]
    pub fn record_with(&mut self, event: &Event, copies: impl Into<EventCopies>) {
        let EventCopies { args, key } = copies.into();
        (self.copy, self.key) = (args, key);
        self.record(event);
        (self.copy, self.key) = (None, None);
    }

    /// As [`Aggregator::record_with`], for an event that ran on thread `thread` (see
    /// [`Aggregator::record_on`]).
    #[inline]
    pub fn record_on_with(&mut self, event: &Event, thread: u32, copies: EventCopies) {
        self.thread = thread;
        self.record_with(event, copies);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::slowest::SlowestConfig;
    use crate::event::{EventKind, Mfa};
    use crate::term_format::TermCopy;
    use std::sync::Arc;

    const F: Mfa = Mfa { module: 1, function: 2, arity: 1 };

    fn copy(byte: u8) -> Option<TermCopy> {
        Some(Arc::from(vec![byte]))
    }

    #[test]
    fn the_kept_calls_carry_their_arguments_and_results() {
        let config = SlowestConfig { keep: 1, threshold_ns: None, max_slow_calls: 1 };
        let mut agg = Aggregator::new(10, 100).with_slowest(config).with_recent(2);
        let ev = |kind, pid, ts| Event { ts, pid, mfa: F, kind };
        // pid 1: 10 ns; pid 2: 50 ns, raising; pid 3: 20 ns.
        agg.record_with(&ev(EventKind::Call, 1, 0), copy(1));
        agg.record_with(&ev(EventKind::Call, 2, 1), copy(2));
        agg.record_with(&ev(EventKind::Return, 1, 10), copy(11));
        agg.record_with(&ev(EventKind::Call, 3, 20), copy(3));
        agg.record_with(&ev(EventKind::Return, 3, 40), copy(13));
        agg.record_with(&ev(EventKind::Exception, 2, 51), copy(12));
        let slowest = agg.function(&F).unwrap().slow.slowest();
        assert_eq!(slowest.len(), 1);
        assert_eq!((slowest[0].pid, slowest[0].exception), (2, true));
        assert_eq!((slowest[0].args.clone(), slowest[0].result.clone()), (copy(2), copy(12)));
        let recorded: Vec<_> = agg.recorder().unwrap().events().map(|e| e.copy.clone()).collect();
        assert_eq!(recorded, vec![copy(13), copy(12)]);
        assert!(agg.copy.is_none());
    }
}
