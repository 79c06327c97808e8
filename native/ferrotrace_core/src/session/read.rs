//! The read path: what the management NIFs call to read a session's figures (summaries,
//! histograms, slow calls, memory). Each read brings the aggregation up to date under the
//! consumer lock, as the collector thread does (`Session::collect`), then, with aggregator
//! threads, merges them off that lock.

use std::sync::atomic::AtomicPtr;
use std::sync::Arc;

use crate::memory::Memory;
use crate::aggregate::Aggregator;
use crate::collector::Backlog;
use crate::frames::FrameTable;
use crate::producer::{Accounting, Producer};
use crate::collector::shards::Aggregates;
use crate::event::{Event, EventKind, NO_MFA};
use crate::term_format::EventCopies;

use super::Session;

impl Session {
    /// How far behind its rings the collector fell (see [`Backlog`]), and the events one ring
    /// holds.
    pub fn backlog(&self) -> (Backlog, usize) {
        (self.consumer.lock().backlog(), self.ring_cells())
    }

    /// Runs `f` on the session's figures (every aggregator's, as one) and accounting, after
    /// bringing them up to date.
    pub fn read<R>(&self, f: impl FnOnce(&Aggregator, Accounting) -> R) -> R {
        self.up_to_date(|aggregates, accounting| f(aggregates.view(), accounting))
    }

    /// As [`Session::read`], with what the session holds ([`Memory`]), measured under the
    /// same locks as the figures read (the merge counted is the one `f` reads). Walks every
    /// open frame and function: for the summary, off the schedulers.
    pub fn read_with_memory<R>(&self, f: impl FnOnce(&Aggregator, Accounting, Memory) -> R) -> R {
        self.up_to_date_measured(true, |aggregates, accounting, mut memory| {
            aggregates.view();
            memory.add(&aggregates.memory());
            f(aggregates.view(), accounting, memory)
        })
    }

    /// What the session holds now, by part ([`Memory`]); with aggregator threads, the merge
    /// counted is the one kept from the last read (none is made).
    pub fn memory(&self) -> Memory {
        self.up_to_date_measured(true, |aggregates, _, mut memory| {
            memory.add(&aggregates.memory());
            memory
        })
    }

    /// Offers every paired call as slow as `gate.slower_than_ns` to `gate` from now on
    /// (`capture`; see [`crate::aggregate::capture`]), on every aggregator.
    pub fn set_capture(&self, gate: Arc<crate::aggregate::capture::CaptureGate>) {
        *self.capture.lock() = Some(Arc::clone(&gate));
        self.with_aggregates(|aggregates| aggregates.for_each_mut(|aggregator| aggregator.set_capture(Some(Arc::clone(&gate)))));
    }

    /// The capture gate's counts, if the session captures.
    pub fn capture_counts(&self) -> Option<crate::aggregate::capture::CaptureCounts> {
        self.capture.lock().as_ref().map(|gate| gate.counts())
    }

    /// The accounting and the calls seen per function ([`Aggregates::call_counts`]), up to
    /// date, without merging the aggregators, and the processes the fuse untraced since the
    /// last such read ([`Aggregates::take_untraced`]): the overhead budget's read.
    pub fn call_counts(&self) -> (Accounting, Vec<(crate::event::Mfa, u64)>, Vec<u64>) {
        self.up_to_date(|aggregates, accounting| (accounting, aggregates.call_counts(), aggregates.take_untraced()))
    }

    /// Forgets the calls left open by processes that died inside them, for a session that
    /// gets no `exit` events (a calls-only session traces no `procs`: the VM's `spawn`,
    /// `spawned` and `exit` events made each process born and ended cost 0.15 to 0.2 µs more,
    /// of 1.8, `make births`). `alive` answers for a kept pid word whether that process
    /// still lives; it is asked between two collections, so that every event of a process
    /// found dead (stamped before it died, so before the question) is folded in before its
    /// exit, which is recorded as if the VM had sent it. Gives (processes with calls open,
    /// of which dead). A session that traces activity gets its exits from the VM: nothing
    /// to do (an exit counted twice would count twice in its figures).
    pub fn settle_exits(&self, alive: impl Fn(u64) -> bool) -> (usize, usize) {
        if self.stopped().is_some() || super::wants_activity(self.id) {
            return (0, 0);
        }
        let open = self.up_to_date(|aggregates, _| aggregates.open_pids());
        let dead: Vec<u64> = open.iter().copied().filter(|&pid| !alive(pid)).collect();
        if !dead.is_empty() {
            let ts = crate::clock::to_ns(crate::clock::now());
            self.up_to_date(|aggregates, _| {
                aggregates.for_each_mut(|aggregator| {
                    for &pid in &dead {
                        let exit = Event { ts, pid, mfa: NO_MFA, kind: EventKind::Exit };
                        aggregator.record_routed(&exit, 0, EventCopies::default());
                    }
                })
            });
        }
        (open.len(), dead.len())
    }

    /// Runs `f` on the aggregators, up to date, for reading them and configuring each (a
    /// filter, loops, a new interval) under one lock.
    pub fn with_aggregates<R>(&self, f: impl FnOnce(&mut Aggregates<'_>) -> R) -> R {
        self.up_to_date(|aggregates, _| f(aggregates))
    }

    /// Under the consumer lock: collects (everything if stopped), then runs `f` on the
    /// aggregators and the accounting.
    ///
    /// With aggregator threads, the reader locks their aggregators (frozen where `accounting`
    /// was taken) and lets go of the consumer lock before `f` merges and reads them: a merge
    /// takes milliseconds, and the collector drains on meanwhile instead of letting the rings
    /// fill. `f` must not take the consumer lock (no `backlog` or `halt` in it):
    /// the collector may be waiting, under it, for an aggregator thread that waits for `f`.
    fn up_to_date<R>(&self, f: impl FnOnce(&mut Aggregates<'_>, Accounting) -> R) -> R {
        self.up_to_date_measured(false, |aggregates, accounting, _| f(aggregates, accounting))
    }

    /// As `up_to_date`, giving `f` the memory of the consumer side and the session's own
    /// parts if `measure` (else nothing: zeroes).
    fn up_to_date_measured<R>(&self, measure: bool, f: impl FnOnce(&mut Aggregates<'_>, Accounting, Memory) -> R) -> R {
        let mut consumer = self.consumer.lock();
        let flush = self.stopped().is_some();
        self.collect(&mut consumer, flush);
        let accounting = self.accounting(&consumer);
        let mut memory = Memory::default();
        if measure {
            memory = self.consumer_memory(&consumer);
            memory.frame_table = FrameTable::BYTES;
            memory.tables += std::mem::size_of::<Session>() + self.producers.len() * std::mem::size_of::<AtomicPtr<Producer>>();
        }
        let Some(handles) = consumer.shards.detach() else {
            let mut aggregates = consumer.shards.aggregates();
            return f(&mut aggregates, accounting, memory);
        };
        let spare = self.spare_merge.lock().take();
        let mut aggregates = Aggregates::of_parts(handles.iter().map(|part| part.lock()).collect(), spare);
        drop(consumer);
        let read = f(&mut aggregates, accounting, memory);
        let spare = aggregates.into_spare();
        *self.spare_merge.lock() = spare;
        read
    }
}
