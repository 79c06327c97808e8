//! Process activity: the figures of every event kind other than calls (messages,
//! scheduling, GC, processes, ports). The one place where such an event moves its process on
//! in the process table and what that ended (a run slice, a wait, a collection, a life) is
//! counted.

use super::gc::Gc;
use super::messages::Messages;
use super::ports::Ports;
use super::procs::Procs;
use super::scheduling::Scheduling;
use super::histogram::{histogram_bytes, record_ns};
use crate::event::{Event, EventKind};
use crate::process::ProcessTable;

/// The kinds of activity seen, bit per kind, for the summary to show only those.
pub mod kinds {
    use crate::event::EventKind;

    /// Messages.
    pub const MESSAGES: u8 = 1;
    /// Processes (procs).
    pub const PROCS: u8 = 2;
    /// Garbage collection.
    pub const GC: u8 = 4;
    /// Scheduling (running).
    pub const SCHEDULING: u8 = 8;
    /// Ports.
    pub const PORTS: u8 = 16;

    /// The kind `kind` is an event of (none for calls, returns and exceptions).
    #[inline]
    pub const fn of(kind: EventKind) -> u8 {
        match kind {
            EventKind::Call | EventKind::Return | EventKind::Exception | EventKind::Untraced => 0,
            EventKind::Send | EventKind::SendDead | EventKind::Receive | EventKind::ReceiveTimeout => MESSAGES,
            EventKind::Spawn | EventKind::Spawned | EventKind::ProcOther | EventKind::Exit => PROCS,
            EventKind::GcStart | EventKind::GcEnd => GC,
            EventKind::In | EventKind::Out | EventKind::OutExited => SCHEDULING,
            EventKind::PortOpen | EventKind::PortClosed | EventKind::PortIn | EventKind::PortOut => PORTS,
        }
    }
}

/// The figures of process activity: every event kind other than calls.
#[derive(Default)]
pub struct ActivityStats {
    /// Kinds of activity seen ([`kinds`]).
    pub seen: u8,
    /// Message statistics.
    pub messages: Messages,
    /// Scheduling statistics.
    pub scheduling: Scheduling,
    /// GC statistics.
    pub gc: Gc,
    /// Process lifecycle statistics.
    pub procs: Procs,
    /// Port statistics.
    pub ports: Ports,
}

impl ActivityStats {
    /// Heap bytes: `(histograms, top-N tables)`.
    pub fn bytes(&self) -> (usize, usize) {
        let h = histogram_bytes;
        let (m, s, g, p) = (&self.messages, &self.scheduling, &self.gc, &self.procs);
        let histograms = h(&m.sent_words) + h(&m.received_words) + h(&m.wakeup) + h(&s.run_slice)
            + h(&g.minor) + h(&g.major) + h(&p.lifetime) + h(&self.ports.run_slice);
        let tables = m.top_senders.bytes() + m.top_receivers.bytes() + m.wakeup_by_receiver.bytes()
            + s.top_cpu.bytes() + s.out_locations.bytes() + g.top_pause.bytes() + p.exit_reasons.bytes();
        (histograms, tables)
    }

    /// Adds `other`'s figures to these (`Aggregator::merged`): exact for aggregators that
    /// own disjoint pids, but for the bounds of the per-pid tables and `size_capped` (see
    /// [`Messages::merge_from`]).
    pub fn merge_from(&mut self, other: &ActivityStats) {
        self.seen |= other.seen;
        self.messages.merge_from(&other.messages);
        self.scheduling.merge_from(&other.scheduling);
        self.gc.merge_from(&other.gc);
        self.procs.merge_from(&other.procs);
        self.ports.merge_from(&other.ports);
    }

    /// Folds in one event other than a call, return or exception: it moves its process on
    /// in `processes`, and what that ended is counted. Events of one process must arrive in
    /// the order they happened.
    #[inline]
    pub fn record(&mut self, processes: &mut ProcessTable, event: &Event) {
        let (pid, ts, mfa) = (event.pid, event.ts, event.mfa);
        self.seen |= kinds::of(event.kind);
        match event.kind {
            EventKind::Call | EventKind::Return | EventKind::Exception | EventKind::Untraced => {}
            EventKind::Send | EventKind::SendDead => {
                self.messages.send(pid, mfa.function, mfa.arity != 0, event.kind == EventKind::SendDead);
                // The receiver's wakeup starts when the message is sent to it while it is
                // out (`'receive'` is traced later, by the receiver itself, when it takes
                // the message in: it is running by then).
                processes.message_to(mfa.module, ts);
            }
            EventKind::Receive => self.messages.receive(pid, mfa.function, mfa.arity != 0),
            EventKind::ReceiveTimeout => self.messages.timeouts += 1,
            EventKind::Spawn => {
                self.procs.spawned += 1;
                processes.born(mfa.module, ts);
            }
            EventKind::Spawned => processes.born(pid, ts),
            EventKind::ProcOther => {
                if let Some(count) = self.procs.other.get_mut(mfa.arity as usize) {
                    *count += 1;
                }
            }
            EventKind::Exit => {
                let gone = processes.gone(pid, ts);
                self.procs.exit(mfa.module, gone.lived);
                self.gc.unpaired += u64::from(gone.in_gc);
            }
            EventKind::GcStart => self.gc.unpaired += u64::from(processes.gc_started(pid, ts, mfa.arity != 0, mfa.function)),
            EventKind::GcEnd => {
                let major = mfa.arity != 0;
                match processes.gc_ended(pid, ts, major) {
                    Some((pause, words_before)) => self.gc.collection(pid, major, pause, words_before, mfa.function),
                    None => self.gc.unpaired += 1,
                }
            }
            EventKind::In => {
                self.scheduling.ins += 1;
                if let Some(wakeup) = processes.scheduled_in(pid, ts) {
                    self.messages.wakeup(pid, wakeup);
                }
            }
            EventKind::Out | EventKind::OutExited => {
                let slice = processes.scheduled_out(pid, ts);
                self.scheduling.out(pid, slice, mfa);
                if event.kind == EventKind::OutExited {
                    // Gone without an `exit` event being traced.
                    self.gc.unpaired += u64::from(processes.gone(pid, ts).in_gc);
                }
            }
            EventKind::PortOpen => self.ports.opened += 1,
            EventKind::PortClosed => {
                self.ports.closed += 1;
                processes.gone(pid, ts);
            }
            EventKind::PortIn => processes.port_in(pid, ts),
            EventKind::PortOut => {
                if let Some(slice) = processes.port_out(pid, ts) {
                    record_ns(&mut self.ports.run_slice, slice);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Mfa;
    use proptest::prelude::*;

    fn ev(kind: EventKind, pid: u64, ts: u64, module: u64, function: u64, arity: u32) -> Event {
        Event { ts, pid, mfa: Mfa { module, function, arity }, kind }
    }

    /// The process table and the figures, fed as the aggregator feeds them.
    #[derive(Default)]
    struct Fed {
        table: ProcessTable,
        stats: ActivityStats,
    }

    impl Fed {
        fn record(&mut self, event: &Event) {
            self.stats.record(&mut self.table, event);
        }
    }

    #[test]
    fn messages_scheduling_and_wakeups() {
        let mut f = Fed::default();
        f.record(&ev(EventKind::In, 1, 100, 0, 0, 0));
        f.record(&ev(EventKind::Out, 1, 200, 5, 6, 1));
        f.record(&ev(EventKind::Send, 2, 1_000, 1, 3, 0));
        f.record(&ev(EventKind::Send, 2, 1_500, 1, 3, 0)); // already waiting
        f.record(&ev(EventKind::In, 1, 11_000, 0, 0, 0));
        f.record(&ev(EventKind::Receive, 1, 11_050, 0, 3, 0));
        f.record(&ev(EventKind::Send, 2, 11_100, 1, 3, 0)); // running: no wakeup
        f.record(&ev(EventKind::Out, 1, 12_000, 5, 6, 1));
        let (m, s) = (&f.stats.messages, &f.stats.scheduling);
        assert_eq!(m.wakeup.len(), 1);
        assert!(m.wakeup.equivalent(m.wakeup.max(), 10_000));
        assert_eq!((m.sent, m.received), (3, 1));
        assert_eq!(m.wakeup_by_receiver.top(1)[0].0, 1);
        assert_eq!((s.ins, s.outs, s.run_slice.len()), (2, 2, 2));
        assert_eq!(s.top_cpu.top(1)[0].1.total, 100 + 1_000);
        assert_eq!(s.out_locations.top(1)[0].1.count, 2);
        assert_eq!(f.stats.seen, kinds::MESSAGES | kinds::SCHEDULING);
    }

    #[test]
    fn gc_pauses_pair_and_reclaim() {
        let mut f = Fed::default();
        f.record(&ev(EventKind::GcStart, 1, 100, 0, 1_000, 0));
        f.record(&ev(EventKind::GcEnd, 1, 600, 0, 400, 0));
        f.record(&ev(EventKind::GcStart, 1, 1_000, 0, 900, 1));
        f.record(&ev(EventKind::GcEnd, 1, 3_000, 0, 100, 1));
        f.record(&ev(EventKind::GcEnd, 2, 3_000, 0, 100, 1));
        let g = &f.stats.gc;
        assert_eq!((g.minor.len(), g.major.len(), g.reclaimed_words, g.unpaired), (1, 1, 1_400, 1));
        assert_eq!(g.top_pause.top(1)[0].1.total, 2_500);
        assert_eq!(f.stats.seen, kinds::GC);
    }

    #[test]
    fn spawn_exit_lifetime_and_reasons() {
        let mut f = Fed::default();
        for child in 10..20 {
            f.record(&ev(EventKind::Spawn, 1, 100, child, 0, 0));
        }
        for child in 10..20 {
            f.record(&ev(EventKind::Exit, child, 1_100, 77, 0, 0));
        }
        let p = &f.stats.procs;
        assert_eq!((p.spawned, p.exited, p.lifetime.len()), (10, 10, 10));
        assert_eq!(p.exit_reasons.top(5), vec![(77, crate::aggregate::top::Tally { count: 10, total: 10, max: 1 })]);
        assert!(f.table.is_empty());
    }

    #[test]
    fn ports_open_close_and_run() {
        let mut f = Fed::default();
        f.record(&ev(EventKind::PortOpen, 9, 0, 0, 0, 0));
        f.record(&ev(EventKind::PortIn, 9, 100, 0, 0, 0));
        f.record(&ev(EventKind::PortOut, 9, 350, 0, 0, 0));
        f.record(&ev(EventKind::PortClosed, 9, 400, 0, 0, 0));
        let p = &f.stats.ports;
        assert_eq!((p.opened, p.closed, p.run_slice.len()), (1, 1, 1));
        assert_eq!(f.stats.seen, kinds::PORTS);
    }

    fn kind() -> impl Strategy<Value = EventKind> {
        prop::sample::select(vec![
            EventKind::Send, EventKind::SendDead, EventKind::Receive, EventKind::ReceiveTimeout,
            EventKind::Spawn, EventKind::Spawned, EventKind::ProcOther, EventKind::Exit,
            EventKind::GcStart, EventKind::GcEnd, EventKind::In, EventKind::Out, EventKind::OutExited,
            EventKind::PortOpen, EventKind::PortClosed, EventKind::PortIn, EventKind::PortOut,
            EventKind::Call, EventKind::Return, EventKind::Exception,
        ])
    }

    proptest! {
        /// Any order of events never panics, and once every process has exited (and every
        /// port closed) no state is left.
        #[test]
        fn arbitrary_orders_leave_no_state(events in prop::collection::vec(
            (kind(), 1u64..6, any::<u64>(), 1u64..6, 0u64..1_000_000, 0u32..8), 0..200)) {
            let mut f = Fed::default();
            for (kind, pid, ts, module, function, arity) in &events {
                f.record(&ev(*kind, *pid, *ts, *module, *function, *arity));
            }
            prop_assert!(f.table.len() <= 6);
            for pid in 1..6 {
                f.record(&ev(EventKind::Exit, pid, u64::MAX, 0, 0, 0));
                f.record(&ev(EventKind::PortClosed, pid, u64::MAX, 0, 0, 0));
            }
            prop_assert!(f.table.is_empty());
        }

        /// Whatever the order, every event is counted under its kind.
        #[test]
        fn every_event_is_counted(events in prop::collection::vec(
            (prop::sample::select(vec![EventKind::Send, EventKind::SendDead, EventKind::In, EventKind::Out,
                                       EventKind::OutExited, EventKind::Spawn, EventKind::Exit]),
             1u64..6, any::<u64>(), 1u64..6), 0..200)) {
            let mut f = Fed::default();
            for (kind, pid, ts, module) in &events {
                f.record(&ev(*kind, *pid, *ts, *module, 8, 0));
            }
            let count = |k: &[EventKind]| events.iter().filter(|e| k.contains(&e.0)).count() as u64;
            let s = &f.stats;
            prop_assert_eq!((s.messages.sent, s.messages.to_dead), (count(&[EventKind::Send]), count(&[EventKind::SendDead])));
            prop_assert_eq!((s.scheduling.ins, s.scheduling.outs), (count(&[EventKind::In]), count(&[EventKind::Out, EventKind::OutExited])));
            prop_assert_eq!((s.procs.spawned, s.procs.exited), (count(&[EventKind::Spawn]), count(&[EventKind::Exit])));
        }
    }
}
