//! One table of per-process state, kept by the collector in timestamp order, and the
//! aggregates it feeds (messages, scheduling, GC, processes, ports).
//!
//! Each process (or port) has at most one entry: when it was scheduled in, whether a message
//! is waiting for it to run, the collection in progress, when it was born. The entry goes when
//! the process exits (`exit` or `out_exited`), when a port closes; at most
//! [`MAX_PROCESSES`] entries exist, further processes are counted in `untracked`. A process
//! whose exit is never seen (procs not traced) keeps its entry until the session ends.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use crate::aggregate::gc::Gc;
use crate::aggregate::messages::Messages;
use crate::aggregate::ports::Ports;
use crate::aggregate::procs::Procs;
use crate::aggregate::scheduling::Scheduling;
use crate::aggregate::WordHasher;
use crate::event::{Event, EventKind, Mfa};

/// Processes and ports with state at most.
pub const MAX_PROCESSES: usize = 100_000;

/// The `procs` tags counted but not aggregated further, in [`crate::aggregate::procs::Procs::other`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum ProcTag {
    /// `link`.
    Link,
    /// `unlink`.
    Unlink,
    /// `getting_linked`.
    GettingLinked,
    /// `getting_unlinked`.
    GettingUnlinked,
    /// `register`.
    Register,
    /// `unregister`.
    Unregister,
}

/// The kinds of events seen, bit per kind, for the summary to show only those.
pub mod kinds {
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
}

#[derive(Clone, Copy, Debug, Default)]
struct ProcState {
    /// Scheduled in at this time; `None` while out (or before its first `in`).
    running_since: Option<u64>,
    /// Known to be out: a message arriving now waits.
    out: bool,
    /// A message arrived while out, at this time.
    waiting_since: Option<u64>,
    /// A collection in progress: start time, major, words in use.
    gc: Option<(u64, bool, u64)>,
    /// Spawned at this time.
    born: Option<u64>,
    /// Scheduled out at this time (for the descheduled total).
    out_since: Option<u64>,
    /// Total time scheduled out so far (between an `out` and the next `in`), ns.
    descheduled_ns: u64,
    /// Total time in paired collections so far, ns.
    gc_ns: u64,
}

/// The process table and the aggregates it feeds.
#[derive(Default)]
pub struct ProcessTable {
    table: HashMap<u64, ProcState, BuildHasherDefault<WordHasher>>,
    /// Events about a process that could not get an entry (the table was full).
    pub untracked: u64,
    /// Kinds of events seen ([`kinds`]).
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

impl ProcessTable {
    /// Processes and ports with state now.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// True when no process has state.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// `pid`'s running totals `(descheduled, gc)` in ns, for the latency split; `None`
    /// before its first scheduling or GC event.
    #[inline]
    pub fn totals(&self, pid: u64) -> Option<(u64, u64)> {
        self.table.get(&pid).map(|s| (s.descheduled_ns, s.gc_ns))
    }

    /// True once scheduling events were seen: call frames then take split snapshots.
    #[inline]
    pub fn splits(&self) -> bool {
        self.seen & kinds::SCHEDULING != 0
    }

    fn entry(&mut self, pid: u64) -> Option<&mut ProcState> {
        if self.table.len() >= MAX_PROCESSES && !self.table.contains_key(&pid) {
            self.untracked += 1;
            return None;
        }
        Some(self.table.entry(pid).or_default())
    }

    /// Folds in one event other than a call, return or exception. Events of one process
    /// must arrive in the order they happened.
    pub fn record(&mut self, event: &Event) {
        let (pid, ts, mfa) = (event.pid, event.ts, event.mfa);
        match event.kind {
            EventKind::Call | EventKind::Return | EventKind::Exception => {}
            EventKind::Send | EventKind::SendDead => {
                self.seen |= kinds::MESSAGES;
                self.messages.send(pid, mfa.function, mfa.arity != 0, event.kind == EventKind::SendDead);
                // The receiver's wakeup starts when the message is sent to it while it is
                // out (`'receive'` is traced later, by the receiver itself, when it takes
                // the message in: it is running by then).
                // (Only scheduling events make a process known to be out.)
                let to = if self.splits() && mfa.module != 0 { self.table.get_mut(&mfa.module) } else { None };
                if let Some(state) = to {
                    if state.out && state.waiting_since.is_none() {
                        state.waiting_since = Some(ts);
                    }
                }
            }
            EventKind::Receive => {
                self.seen |= kinds::MESSAGES;
                self.messages.receive(pid, mfa.function, mfa.arity != 0);
            }
            EventKind::ReceiveTimeout => {
                self.seen |= kinds::MESSAGES;
                self.messages.timeouts += 1;
            }
            EventKind::Spawn => {
                self.seen |= kinds::PROCS;
                self.procs.spawned += 1;
                if let Some(child) = self.entry(mfa.module) {
                    child.born.get_or_insert(ts);
                }
            }
            EventKind::Spawned => {
                self.seen |= kinds::PROCS;
                if let Some(child) = self.entry(pid) {
                    child.born.get_or_insert(ts);
                }
            }
            EventKind::ProcOther => {
                self.seen |= kinds::PROCS;
                if let Some(count) = self.procs.other.get_mut(mfa.arity as usize) {
                    *count += 1;
                }
            }
            EventKind::Exit => {
                self.seen |= kinds::PROCS;
                let state = self.table.remove(&pid);
                let lived = state.and_then(|s| s.born).map(|born| ts.saturating_sub(born));
                self.procs.exit(mfa.module, lived);
                if state.is_some_and(|s| s.gc.is_some()) {
                    self.gc.unpaired += 1;
                }
            }
            EventKind::GcStart => {
                self.seen |= kinds::GC;
                if let Some(state) = self.entry(pid) {
                    if state.gc.replace((ts, mfa.arity != 0, mfa.function)).is_some() {
                        self.gc.unpaired += 1;
                    }
                }
            }
            EventKind::GcEnd => {
                self.seen |= kinds::GC;
                let major = mfa.arity != 0;
                match self.table.get_mut(&pid).and_then(|s| s.gc.take()) {
                    Some((start, was_major, before)) if was_major == major => {
                        let pause = ts.saturating_sub(start);
                        if let Some(state) = self.table.get_mut(&pid) {
                            state.gc_ns = state.gc_ns.saturating_add(pause);
                        }
                        self.gc.collection(pid, major, pause, before, mfa.function);
                    }
                    _ => self.gc.unpaired += 1,
                }
            }
            EventKind::In => {
                self.seen |= kinds::SCHEDULING;
                self.scheduling.ins += 1;
                if let Some(state) = self.entry(pid) {
                    state.running_since = Some(ts);
                    state.out = false;
                    if let Some(out) = state.out_since.take() {
                        state.descheduled_ns = state.descheduled_ns.saturating_add(ts.saturating_sub(out));
                    }
                    if let Some(arrived) = state.waiting_since.take() {
                        self.messages.wakeup(pid, ts.saturating_sub(arrived));
                    }
                }
            }
            EventKind::Out | EventKind::OutExited => {
                self.seen |= kinds::SCHEDULING;
                let slice = match self.entry(pid) {
                    Some(state) => {
                        state.out = true;
                        state.out_since = Some(ts);
                        state.running_since.take().map(|since| ts.saturating_sub(since))
                    }
                    None => None,
                };
                self.scheduling.out(pid, slice, mfa);
                if event.kind == EventKind::OutExited {
                    self.forget(pid);
                }
            }
            EventKind::PortOpen => {
                self.seen |= kinds::PORTS;
                self.ports.opened += 1;
            }
            EventKind::PortClosed => {
                self.seen |= kinds::PORTS;
                self.ports.closed += 1;
                self.table.remove(&pid);
            }
            EventKind::PortIn => {
                self.seen |= kinds::PORTS;
                if let Some(state) = self.entry(pid) {
                    state.running_since = Some(ts);
                }
            }
            EventKind::PortOut => {
                self.seen |= kinds::PORTS;
                if let Some(since) = self.table.get_mut(&pid).and_then(|s| s.running_since.take()) {
                    crate::aggregate::top::record_ns(&mut self.ports.run_slice, ts.saturating_sub(since));
                }
            }
        }
    }

    /// Drops `pid`'s state (it exited without an `exit` event being traced).
    fn forget(&mut self, pid: u64) {
        if let Some(state) = self.table.remove(&pid) {
            if state.gc.is_some() {
                self.gc.unpaired += 1;
            }
        }
    }
}

/// The zero MFA: no location.
pub const NO_MFA: Mfa = Mfa { module: 0, function: 0, arity: 0 };

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ev(kind: EventKind, pid: u64, ts: u64, module: u64, function: u64, arity: u32) -> Event {
        Event { ts, pid, mfa: Mfa { module, function, arity }, kind }
    }

    #[test]
    fn wakeup_is_arrival_while_out_to_next_in() {
        let mut t = ProcessTable::default();
        t.record(&ev(EventKind::In, 1, 100, 0, 0, 0));
        t.record(&ev(EventKind::Out, 1, 200, 5, 6, 1));
        t.record(&ev(EventKind::Send, 2, 1_000, 1, 3, 0));
        t.record(&ev(EventKind::Send, 2, 1_500, 1, 3, 0)); // already waiting
        t.record(&ev(EventKind::In, 1, 11_000, 0, 0, 0));
        t.record(&ev(EventKind::Receive, 1, 11_050, 0, 3, 0));
        t.record(&ev(EventKind::Send, 2, 11_100, 1, 3, 0)); // running: no wakeup
        t.record(&ev(EventKind::Out, 1, 12_000, 5, 6, 1));
        assert_eq!(t.messages.wakeup.len(), 1);
        assert!(t.messages.wakeup.equivalent(t.messages.wakeup.max(), 10_000));
        assert_eq!((t.messages.sent, t.messages.received), (3, 1));
        assert_eq!(t.messages.wakeup_by_receiver.top(1)[0].0, 1);
        assert_eq!(t.scheduling.run_slice.len(), 2);
        assert_eq!(t.scheduling.top_cpu.top(1)[0].1.total, 100 + 1_000);
        assert_eq!(t.scheduling.out_locations.top(1)[0].1.count, 2);
        t.record(&ev(EventKind::OutExited, 1, 13_000, 0, 0, 0));
        assert!(t.is_empty());
    }

    #[test]
    fn gc_pauses_pair_and_reclaim() {
        let mut t = ProcessTable::default();
        t.record(&ev(EventKind::GcStart, 1, 100, 0, 1_000, 0));
        t.record(&ev(EventKind::GcEnd, 1, 600, 0, 400, 0));
        t.record(&ev(EventKind::GcStart, 1, 1_000, 0, 900, 1));
        t.record(&ev(EventKind::GcEnd, 1, 3_000, 0, 100, 1));
        t.record(&ev(EventKind::GcEnd, 2, 3_000, 0, 100, 1));
        assert_eq!((t.gc.minor.len(), t.gc.major.len(), t.gc.reclaimed_words, t.gc.unpaired), (1, 1, 1_400, 1));
        assert_eq!(t.gc.top_pause.top(1)[0].1.total, 2_500);
        assert_eq!(t.seen, kinds::GC);
    }

    #[test]
    fn spawn_exit_lifetime_and_reasons() {
        let mut t = ProcessTable::default();
        for child in 10..20 {
            t.record(&ev(EventKind::Spawn, 1, 100, child, 0, 0));
        }
        for child in 10..20 {
            t.record(&ev(EventKind::Exit, child, 1_100, 77, 0, 0));
        }
        assert_eq!((t.procs.spawned, t.procs.exited, t.procs.lifetime.len()), (10, 10, 10));
        assert_eq!(t.procs.exit_reasons.top(5), vec![(77, crate::aggregate::top::Tally { count: 10, total: 10, max: 1 })]);
        assert!(t.is_empty());
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
        /// Any order of events never panics, counts every event of its kind, and once every
        /// process has exited (and every port closed) no state is left.
        #[test]
        fn arbitrary_orders_leave_no_state(events in prop::collection::vec(
            (kind(), 1u64..6, any::<u64>(), 1u64..6, 0u64..1_000_000, 0u32..8), 0..200)) {
            let mut t = ProcessTable::default();
            let mut sends = 0;
            for (kind, pid, ts, module, function, arity) in &events {
                sends += u64::from(*kind == EventKind::Send);
                t.record(&ev(*kind, *pid, *ts, *module, *function, *arity));
            }
            prop_assert_eq!(t.messages.sent, sends);
            prop_assert!(t.len() <= 6);
            for pid in 1..6 {
                t.record(&ev(EventKind::Exit, pid, u64::MAX, 0, 0, 0));
                t.record(&ev(EventKind::PortClosed, pid, u64::MAX, 0, 0, 0));
            }
            prop_assert!(t.is_empty());
        }
    }
}
