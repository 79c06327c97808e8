//! One table of per-process state, kept by the collector in timestamp order: what each
//! process (or port) is doing now.
//!
//! Each process (or port) has at most one entry: when it was scheduled in, whether a message
//! is waiting for it to run, the collection in progress, when it was born, and its running
//! totals for the latency split. The entry goes when the process exits (`exit` or
//! `out_exited`), when a port closes; at most [`MAX_PROCESSES`] entries exist, further
//! processes are counted in `untracked`. A process whose exit is never seen (procs not traced)
//! keeps its entry until the session ends.
//!
//! The table keeps state, not statistics: the aggregates (`crate::aggregate::activity`) tell it
//! what happened to a process, and it answers with what that ended (a run slice, a wait, a
//! collection, a life), which they count.

use crate::shard::Shard;
use crate::hasher::WordMap;

/// Processes and ports with state at most.
pub const MAX_PROCESSES: usize = 100_000;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
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

/// What a process that is gone left behind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Gone {
    /// How long it lived, ns, if its birth was seen.
    pub lived: Option<u64>,
    /// It was in the middle of a collection (never to be paired).
    pub in_gc: bool,
}

/// The state of every process (and port) seen, and nothing else.
#[derive(Default)]
pub struct ProcessTable {
    table: WordMap<u64, ProcState>,
    /// Events about a process that could not get an entry (the table was full).
    pub untracked: u64,
    /// Scheduling events were seen: processes can be known to be out.
    scheduling: bool,
    /// The pids given entries (`Aggregator::with_shard`): a child spawned by an owned
    /// process may be another aggregator's.
    shard: Shard,
    /// Entries freed when the session stopped ([`ProcessTable::free_state`]), still counted
    /// by [`ProcessTable::len`].
    freed: usize,
}

impl ProcessTable {
    /// Processes and ports with state now (or when the session stopped, once the table
    /// was freed).
    pub fn len(&self) -> usize {
        self.table.len() + self.freed
    }

    /// True when no process has state.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Heap bytes of the table (estimated from its capacity).
    pub fn bytes(&self) -> usize {
        crate::memory::map_bytes(&self.table)
    }

    /// Frees the entries, for a session that stopped: `len` still counts them.
    pub fn free_state(&mut self) {
        self.freed += self.table.len();
        self.table = WordMap::default();
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
        self.scheduling
    }

    pub(crate) fn set_shard(&mut self, shard: Shard) {
        self.shard = shard;
    }

    /// Scheduling events were seen, of a process another aggregator owns.
    pub(crate) fn scheduling_seen(&mut self) {
        self.scheduling = true;
    }

    /// Takes in `other`'s entries (of other pids than this table's), for a table that
    /// answers for several aggregators. Its size may exceed [`MAX_PROCESSES`] (up to the
    /// parts' sum); an entry of a pid in both (not disjoint parts) keeps this table's.
    pub fn merge_from(&mut self, other: &ProcessTable) {
        for (pid, state) in &other.table {
            self.table.entry(*pid).or_insert(*state);
        }
        self.untracked += other.untracked;
        self.freed += other.freed;
        self.scheduling |= other.scheduling;
    }

    fn entry(&mut self, pid: u64) -> Option<&mut ProcState> {
        if self.table.len() >= MAX_PROCESSES && !self.table.contains_key(&pid) {
            self.untracked += 1;
            return None;
        }
        Some(self.table.entry(pid).or_default())
    }

    /// `pid` was born at `ts` (seen by its parent, `spawn`, or by itself, `spawned`: the
    /// first seen counts).
    #[inline]
    pub fn born(&mut self, pid: u64, ts: u64) {
        if !self.shard.owns(pid) {
            return;
        }
        if let Some(state) = self.entry(pid) {
            state.born.get_or_insert(ts);
        }
    }

    /// A message was sent to `receiver` at `ts`: if it is out, its wait to run begins (at
    /// the first such message). Only scheduling events make a process known to be out.
    #[inline]
    pub fn message_to(&mut self, receiver: u64, ts: u64) {
        let to = if self.scheduling && receiver != 0 { self.table.get_mut(&receiver) } else { None };
        if let Some(state) = to {
            if state.out && state.waiting_since.is_none() {
                state.waiting_since = Some(ts);
            }
        }
    }

    /// `pid` was scheduled in at `ts`: how long a message had waited for it to run (the
    /// wakeup latency), if one had.
    #[inline]
    pub fn scheduled_in(&mut self, pid: u64, ts: u64) -> Option<u64> {
        self.scheduling = true;
        let state = self.entry(pid)?;
        state.running_since = Some(ts);
        state.out = false;
        if let Some(out) = state.out_since.take() {
            state.descheduled_ns = state.descheduled_ns.saturating_add(ts.saturating_sub(out));
        }
        state.waiting_since.take().map(|arrived| ts.saturating_sub(arrived))
    }

    /// `pid` was scheduled out at `ts`: the run slice it ends, if its `in` was seen.
    #[inline]
    pub fn scheduled_out(&mut self, pid: u64, ts: u64) -> Option<u64> {
        self.scheduling = true;
        let state = self.entry(pid)?;
        state.out = true;
        state.out_since = Some(ts);
        state.running_since.take().map(|since| ts.saturating_sub(since))
    }

    /// `pid` began a collection at `ts` with `words` in use; true if one in progress is
    /// left unpaired by it.
    #[inline]
    pub fn gc_started(&mut self, pid: u64, ts: u64, major: bool, words: u64) -> bool {
        self.entry(pid).is_some_and(|state| state.gc.replace((ts, major, words)).is_some())
    }

    /// `pid` ended a collection at `ts`: its pause and the words in use when it began, if
    /// its start (of the same kind) was seen; the pause adds to `pid`'s GC total.
    #[inline]
    pub fn gc_ended(&mut self, pid: u64, ts: u64, major: bool) -> Option<(u64, u64)> {
        let state = self.table.get_mut(&pid)?;
        match state.gc.take() {
            Some((start, was_major, words)) if was_major == major => {
                let pause = ts.saturating_sub(start);
                state.gc_ns = state.gc_ns.saturating_add(pause);
                Some((pause, words))
            }
            _ => None,
        }
    }

    /// `pid` (a process or a port) is gone at `ts`: its entry goes.
    #[inline]
    pub fn gone(&mut self, pid: u64, ts: u64) -> Gone {
        match self.table.remove(&pid) {
            Some(state) => Gone { lived: state.born.map(|born| ts.saturating_sub(born)), in_gc: state.gc.is_some() },
            None => Gone::default(),
        }
    }

    /// `port` was scheduled in at `ts`.
    #[inline]
    pub fn port_in(&mut self, port: u64, ts: u64) {
        if let Some(state) = self.entry(port) {
            state.running_since = Some(ts);
        }
    }

    /// `port` was scheduled out at `ts`: the run slice it ends, if its `in` was seen.
    #[inline]
    pub fn port_out(&mut self, port: u64, ts: u64) -> Option<u64> {
        let since = self.table.get_mut(&port)?.running_since.take()?;
        Some(ts.saturating_sub(since))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sharded_table_gives_entries_to_its_own_pids_only() {
        use crate::shard::shard_of;
        let mut t = ProcessTable::default();
        t.set_shard(Shard { index: 1, count: 2 });
        let (mine, theirs) = (0..100u64).map(|i| i << 4 | 3).partition::<Vec<u64>, _>(|pid| shard_of(*pid, 2) == 1);
        for pid in mine.iter().chain(&theirs) {
            t.born(*pid, 5);
        }
        assert_eq!(t.len(), mine.len());
        let mut all = ProcessTable::default();
        all.born(theirs[0], 7);
        all.untracked = 2;
        all.merge_from(&t);
        assert_eq!((all.len(), all.untracked), (mine.len() + 1, 2));
        assert_eq!(all.gone(theirs[0], 10).lived, Some(3));
        assert_eq!(all.gone(mine[0], 10).lived, Some(5));
    }

    #[test]
    fn wakeup_is_arrival_while_out_to_next_in() {
        let mut t = ProcessTable::default();
        assert_eq!(t.scheduled_in(1, 100), None);
        assert_eq!(t.scheduled_out(1, 200), Some(100), "a run slice");
        t.message_to(1, 1_000);
        t.message_to(1, 1_500); // already waiting
        assert_eq!(t.scheduled_in(1, 11_000), Some(10_000), "the wakeup");
        t.message_to(1, 11_100); // running: no wakeup
        assert_eq!(t.scheduled_out(1, 12_000), Some(1_000));
        assert_eq!(t.scheduled_in(1, 12_500), None, "no message waited");
        assert_eq!(t.totals(1), Some((10_800 + 500, 0)));
        assert_eq!(t.gone(1, 13_000), Gone::default());
        assert!(t.is_empty());
    }

    #[test]
    fn without_scheduling_a_message_starts_no_wait() {
        let mut t = ProcessTable::default();
        t.born(1, 0);
        t.message_to(1, 10);
        assert!(!t.splits());
        assert_eq!(t.scheduled_in(1, 100), None);
        assert!(t.splits());
        t.message_to(0, 110); // not a local pid
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn gc_pauses_pair_and_add_to_the_totals() {
        let mut t = ProcessTable::default();
        assert!(!t.gc_started(1, 100, false, 1_000));
        assert_eq!(t.gc_ended(1, 600, false), Some((500, 1_000)));
        t.gc_started(1, 1_000, true, 900);
        assert_eq!(t.gc_ended(1, 3_000, true), Some((2_000, 900)));
        assert_eq!(t.totals(1), Some((0, 2_500)));
        assert_eq!(t.gc_ended(2, 3_000, true), None, "no start");
        t.gc_started(1, 4_000, false, 900);
        assert_eq!(t.gc_ended(1, 4_100, true), None, "a minor start, a major end");
        assert_eq!(t.gc_ended(1, 4_200, false), None, "the start was taken");
        t.gc_started(1, 5_000, false, 900);
        assert!(t.gc_started(1, 5_100, false, 900), "a start over a start");
        assert_eq!(t.gone(1, 6_000), Gone { lived: None, in_gc: true }, "gone mid-collection");
    }

    #[test]
    fn a_life_is_seen_from_its_first_birth() {
        let mut t = ProcessTable::default();
        t.born(10, 100);
        t.born(10, 150);
        assert_eq!(t.gone(10, 1_100), Gone { lived: Some(1_000), in_gc: false });
        assert_eq!(t.gone(11, 1_100), Gone::default(), "birth not seen");
        assert!(t.is_empty());
    }

    #[test]
    fn port_slices() {
        let mut t = ProcessTable::default();
        t.port_in(9, 100);
        assert_eq!(t.port_out(9, 350), Some(250));
        assert_eq!(t.port_out(9, 400), None);
        assert!(!t.splits(), "ports are not processes scheduled");
        t.gone(9, 500);
        assert!(t.is_empty());
    }

    #[test]
    fn a_full_table_counts_the_others_untracked() {
        let mut t = ProcessTable::default();
        for pid in 0..MAX_PROCESSES as u64 {
            t.born(pid, 0);
        }
        assert_eq!(t.scheduled_in(u64::MAX, 1), None);
        assert!(!t.gc_started(u64::MAX, 1, false, 0));
        assert_eq!((t.len(), t.untracked), (MAX_PROCESSES, 2));
    }
}
