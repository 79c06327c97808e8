//! The collector: drains every producer's ring off the schedulers, orders events by
//! timestamp, and feeds them to the aggregator. One thread per session, every
//! [`COLLECT_INTERVAL`]; readers of the statistics bring them up to date the same way.
//!
//! # Ordering by timestamp
//! A process can migrate between schedulers, so its events sit in several rings. Each
//! collection takes a cutoff timestamp, waits for a grace period, drains every ring, sorts, and
//! folds in only the events older than the cutoff, keeping the rest for the next round. That
//! is exact if every event stamped before the cutoff is in a ring once the grace period ends:
//! - the cutoff is read with [`clock::now_ordered`], whose `lfence` keeps the grace period's
//!   loads of activity words from executing before the timestamp is taken;
//! - a callback stamps its event after entering, and entering is a locked `xchg` (a full
//!   barrier), which completes, store visible, before the timestamp instruction executes
//!   (`rdtscp` waits for earlier instructions).
//!
//! So a callback that entered after the grace period read its (even) activity word stamps a
//! time after the cutoff; one that entered before is waited for, and its push (Release on the
//! ring's tail) happens before the drain.

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::aggregate::Aggregator;
use crate::clock;
use crate::event::{Event, PackedEvent};
use crate::producer::Producer;
use crate::quiesce;
use crate::session::{Accounting, Session, StopReason};

/// How often the collector drains the rings.
pub const COLLECT_INTERVAL: Duration = Duration::from_millis(1);

/// The consumer side: owned by whoever holds the session's consumer lock (the collector or a
/// reader).
pub struct Consumer {
    /// The statistics.
    pub aggregator: Aggregator,
    /// Drained events not yet folded in: newer than the last collection's cutoff.
    pending: Vec<PackedEvent>,
    aggregated: u64,
    /// Counters of producers already freed.
    retired: Accounting,
}

impl Consumer {
    pub(crate) fn new(aggregator: Aggregator) -> Consumer {
        Consumer { aggregator, pending: Vec::new(), aggregated: 0, retired: Accounting::default() }
    }

    /// The statistics.
    pub fn aggregator(&self) -> &Aggregator {
        &self.aggregator
    }

    fn drain(&mut self, producer: &Producer) {
        if let Some(rx) = producer.rx.lock().as_mut() {
            let pending = &mut self.pending;
            self.aggregated += rx.drain(|event| pending.push(event));
        }
    }

    /// Folds in the pending events stamped before `cutoff`, in timestamp order.
    fn fold_in(&mut self, cutoff: u64) {
        let Consumer { pending, aggregator, .. } = self;
        pending.sort_unstable_by_key(PackedEvent::ts);
        let ready = pending.partition_point(|event| event.ts() < cutoff);
        for event in pending.drain(..ready) {
            let event = event.unpack();
            aggregator.record(&Event { ts: clock::to_ns(event.ts), ..event });
        }
    }

    /// Takes in the last events and the counters of producers being freed (by `halt`, after a
    /// grace period: nothing pushes any more).
    pub(crate) fn retire(&mut self, producers: &[Box<Producer>]) {
        for producer in producers {
            self.drain(producer);
            producer.add_counters(&mut self.retired);
        }
        self.fold_in(u64::MAX);
    }
}

impl Session {
    /// Drains every ring and folds in the events older than the cutoff (all if `flush`).
    fn collect(&self, consumer: &mut Consumer, flush: bool) {
        let cutoff = if flush { u64::MAX } else { clock::now_ordered() };
        // After this, every event stamped before `cutoff` is in a ring (module docs).
        quiesce::wait_for_quiescence();
        for entry in self.producers.iter() {
            // SAFETY: producers are freed only by `halt` under the consumer lock, which the
            // caller holds (`consumer` is borrowed from it).
            if let Some(producer) = unsafe { entry.load(Ordering::Acquire).as_ref() } {
                consumer.drain(producer);
            }
        }
        consumer.fold_in(cutoff);
    }

    /// Runs `f` on the aggregation state after bringing it up to date.
    pub fn with_consumer<R>(&self, f: impl FnOnce(&Consumer, Accounting) -> R) -> R {
        let mut consumer = self.consumer.lock();
        let flush = self.stopped().is_some();
        self.collect(&mut consumer, flush);
        let accounting = self.accounting(&consumer);
        f(&consumer, accounting)
    }

    fn accounting(&self, consumer: &Consumer) -> Accounting {
        let mut total = consumer.retired;
        for entry in self.producers.iter() {
            // SAFETY: as in `collect`; the caller holds the consumer lock.
            if let Some(producer) = unsafe { entry.load(Ordering::Acquire).as_ref() } {
                producer.add_counters(&mut total);
            }
        }
        total.aggregated = consumer.aggregated;
        total.seen = total.aggregated + total.dropped + total.sampled_out + total.limited;
        total
    }

    /// The collector thread's body: collect until stopped, then notify, as its last act.
    pub(crate) fn run_collector(&self) {
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.collector_loop()));
        if run.is_err() {
            self.halt(StopReason::Error);
        }
        self.collector_cpu_ns.store(clock::thread_cpu_ns(), Ordering::Relaxed);
        let notifier = self.notifier.lock().take();
        if let (Some(notify), Some(stopped)) = (notifier, self.stopped()) {
            // The notifier is the NIF layer's; a panic in it must not take the thread's
            // unwinding anywhere (this thread is ours, but stay quiet and finish).
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| notify(self.id, stopped)));
        }
    }

    fn collector_loop(&self) {
        let deadline = self.config.duration_ms
            .map(|ms| self.started_ticks.saturating_add(clock::ns_to_ticks(ms * 1_000_000)));
        while !self.collector_exit.load(Ordering::Acquire) {
            std::thread::park_timeout(COLLECT_INTERVAL);
            if self.stopped().is_some() {
                break;
            }
            if self.limit_tripped.load(Ordering::Acquire) {
                self.halt(StopReason::Limit);
                break;
            }
            if deadline.is_some_and(|d| clock::now() >= d) {
                self.halt(StopReason::Duration);
                break;
            }
            let mut consumer = self.consumer.lock();
            self.collect(&mut consumer, false);
            drop(consumer);
            self.collector_cpu_ns.store(clock::thread_cpu_ns(), Ordering::Relaxed);
        }
    }
}
