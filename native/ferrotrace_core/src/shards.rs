//! Aggregation split by pid over several threads (`aggregators => N`).
//!
//! One collector thread pairs and aggregates about 22 M events/s (`make collector-ceiling`),
//! less than sixteen schedulers produce. Most of that time is aggregation (the per-process
//! stacks, the histograms), not draining or ordering, so the collector still drains and orders
//! every event, then routes each to the aggregator that owns its pid ([`Router`]):
//! aggregator 0 is the collector thread's own, each other one runs on a thread of its own and
//! takes its events in batches, one per collection, through a bounded channel.
//!
//! Why this is exact: one thread routes, in timestamp order, and a channel keeps its order, so
//! every process's events reach its owner in the order they happened, as with one aggregator.
//! An event that also moves another process on (a send wakes its receiver, a spawn starts its
//! child) goes to both owners, and each does its own part. Readers merge the
//! aggregators ([`Aggregator::merged`]); the caps (`max_functions`, `max_open_calls`,
//! `max_keys`, ...) hold per aggregator.
//!
//! Backpressure: when an aggregator thread falls behind, the channel fills and the collector
//! waits on it; the rings then fill and the schedulers drop and count, as with one slow
//! collector. Nothing on the hot path waits.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, MutexGuard};
use std::thread::JoinHandle;

use crate::aggregate::shard::{Router, Targets};
use crate::aggregate::Aggregator;
use crate::clock;
use crate::event::{Event, Mfa};
use crate::sync::Mutex;
use crate::terms::EventCopies;

/// Accepted `aggregators`, inclusive.
pub const AGGREGATORS_RANGE: (i64, i64) = (1, 16);

/// Schedulers one aggregator keeps up with, for `aggregators => auto`: a scheduler at the
/// no-op floor makes about 3 M events/s, and one aggregator takes 11 to 22 M events/s (the
/// live bench and the ceiling).
const SCHEDULERS_PER_AGGREGATOR: usize = 4;

/// `aggregators => auto`: one aggregator per four CPUs (schedulers), at least one.
pub fn auto_count() -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    cpus.div_ceil(SCHEDULERS_PER_AGGREGATOR).clamp(1, AGGREGATORS_RANGE.1 as usize)
}

/// Events per batch: a batch is handed over as soon as it is full, so the aggregator threads
/// work while the collector still routes the rest of a collection.
const BATCH: usize = 4096;

/// Batches in flight to one aggregator thread before the collector waits: 65,536 events,
/// under 6 MiB (an event as routed is 88 bytes), a few milliseconds of lag.
const BATCHES_IN_FLIGHT: usize = 16;

/// One event as routed: the event (timestamp in ns), its thread's index, its copies.
type Routed = (Event, u32, EventCopies);

enum Message {
    Events(Vec<Routed>),
    /// Answered once every batch sent before it is recorded.
    Flush(SyncSender<()>),
}

/// An aggregator on a thread of its own.
struct Worker {
    aggregator: Arc<Mutex<Aggregator>>,
    /// `None` once stopped (or failed): events are then recorded by the router itself.
    tx: Option<SyncSender<Message>>,
    /// Batches back from the thread, emptied, to be filled again (no allocation per batch).
    spent: Receiver<Vec<Routed>>,
    thread: Option<JoinHandle<()>>,
    cpu_ns: Arc<AtomicU64>,
    /// Its events of the collection under way.
    batch: Vec<Routed>,
}

impl Worker {
    /// Sends the batch to the thread; if the thread is gone (stopped, or failed), records it
    /// here, so nothing is lost.
    fn hand_over(&mut self) {
        let batch = std::mem::take(&mut self.batch);
        let unsent = match &self.tx {
            Some(tx) => match tx.send(Message::Events(batch)) {
                Ok(()) => return,
                Err(mpsc::SendError(Message::Events(batch))) => batch,
                Err(_) => return,
            },
            None => batch,
        };
        self.tx = None;
        let mut aggregator = self.aggregator.lock();
        for (event, thread, copies) in unsent {
            aggregator.record_on_with(&event, thread, copies);
        }
    }
}

/// A session's aggregators.
pub struct Shards {
    /// Aggregator 0, the collector thread's own (the only one unless `aggregators > 1`).
    own: Aggregator,
    workers: Vec<Worker>,
    router: Router,
    /// An aggregator thread failed (panicked): the session should stop with `error`.
    failed: Arc<AtomicBool>,
}

impl Shards {
    /// `count` aggregators made by `make(index, count)`, all but the first on a thread of its
    /// own named `{name}-{index}`.
    pub fn new(count: usize, name: &str, make: impl Fn(u32, u32) -> Aggregator) -> std::io::Result<Shards> {
        let failed = Arc::new(AtomicBool::new(false));
        let mut workers = Vec::with_capacity(count.saturating_sub(1));
        for index in 1..count {
            let aggregator = Arc::new(Mutex::new(make(index as u32, count as u32)));
            let cpu_ns = Arc::new(AtomicU64::new(0));
            let (tx, rx) = mpsc::sync_channel(BATCHES_IN_FLIGHT);
            let (spent_tx, spent) = mpsc::channel();
            let thread = {
                let (aggregator, cpu_ns, failed) = (Arc::clone(&aggregator), Arc::clone(&cpu_ns), Arc::clone(&failed));
                std::thread::Builder::new()
                    .name(format!("{name}-{index}"))
                    .spawn(move || run_worker(&rx, &spent_tx, &aggregator, &cpu_ns, &failed))?
            };
            workers.push(Worker { aggregator, tx: Some(tx), spent, thread: Some(thread), cpu_ns, batch: Vec::new() });
        }
        Ok(Shards { own: make(0, count as u32), workers, router: Router::new(count as u32), failed })
    }

    /// Aggregators in all.
    pub fn count(&self) -> usize {
        1 + self.workers.len()
    }

    /// Whether an aggregator thread failed.
    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }

    /// Folds in (or routes) one event without copies; events in timestamp order.
    #[inline]
    pub fn record(&mut self, event: &Event, thread: u32) {
        if self.workers.is_empty() {
            self.own.record_on(event, thread);
        } else {
            self.route(event, thread, EventCopies::default());
        }
    }

    /// Folds in (or routes) one event with its copies; events in timestamp order.
    #[inline]
    pub fn record_with(&mut self, event: &Event, thread: u32, copies: EventCopies) {
        if self.workers.is_empty() {
            self.own.record_on_with(event, thread, copies);
        } else {
            self.route(event, thread, copies);
        }
    }

    fn route(&mut self, event: &Event, thread: u32, copies: EventCopies) {
        match self.router.targets(event) {
            Targets::One(owner) => self.give(owner, event, thread, copies),
            targets => {
                // Only calls, returns and exceptions have copies, and those go to one owner.
                for shard in targets.iter(self.router.count()) {
                    self.give(shard, event, thread, EventCopies::default());
                }
            }
        }
    }

    /// Aggregator 0 records at once; another's event joins its batch, handed over when full.
    #[inline]
    fn give(&mut self, shard: u32, event: &Event, thread: u32, copies: EventCopies) {
        if shard == 0 {
            self.own.record_on_with(event, thread, copies);
            return;
        }
        let worker = &mut self.workers[shard as usize - 1];
        if worker.batch.capacity() == 0 {
            worker.batch = worker.spent.try_recv().unwrap_or_else(|_| Vec::with_capacity(BATCH));
        }
        worker.batch.push((*event, thread, copies));
        if worker.batch.len() >= BATCH {
            worker.hand_over();
        }
    }

    /// Ends a collection: hands each aggregator thread what is left of its batch.
    pub fn dispatch(&mut self) {
        for worker in &mut self.workers {
            if !worker.batch.is_empty() {
                worker.hand_over();
            }
        }
    }

    /// Waits until every aggregator thread has recorded what it was sent.
    fn flush(&mut self) {
        let (done_tx, done_rx) = mpsc::sync_channel(self.workers.len());
        let mut asked = 0;
        for worker in &mut self.workers {
            if let Some(tx) = &worker.tx {
                if tx.send(Message::Flush(done_tx.clone())).is_ok() {
                    asked += 1;
                } else {
                    worker.tx = None;
                }
            }
        }
        drop(done_tx);
        for _ in 0..asked {
            // A worker that fails drops its answer: `recv` then returns an error, not a hang.
            if done_rx.recv().is_err() {
                break;
            }
        }
    }

    /// The aggregators, up to date with every event routed so far, for reading or configuring.
    pub fn aggregates(&mut self) -> Aggregates<'_> {
        if !self.workers.is_empty() {
            self.flush();
        }
        let Shards { own, workers, .. } = self;
        let others = workers.iter().map(|worker| worker.aggregator.lock()).collect();
        Aggregates { own, others, merged: None }
    }

    /// Loops found at run time since the last call, by any aggregator, each once.
    pub fn take_new_loops(&mut self) -> Vec<Mfa> {
        let mut loops = self.own.take_new_loops();
        for worker in &self.workers {
            for mfa in worker.aggregator.lock().take_new_loops() {
                if !loops.contains(&mfa) {
                    loops.push(mfa);
                }
            }
        }
        loops
    }

    /// CPU time of the aggregator threads (not the collector's), nanoseconds.
    pub fn threads_cpu_ns(&self) -> u64 {
        self.workers.iter().map(|worker| worker.cpu_ns.load(Ordering::Relaxed)).sum()
    }

    /// Ends the aggregator threads once they have recorded everything; their aggregators
    /// stay readable, and any later event is recorded by the caller's thread.
    pub fn stop(&mut self) {
        for worker in &mut self.workers {
            // Disconnecting the channel ends the thread after the batches already sent.
            worker.tx = None;
            if let Some(thread) = worker.thread.take() {
                let _ = thread.join();
            }
        }
    }
}

impl Drop for Shards {
    fn drop(&mut self) {
        self.stop();
    }
}

/// An aggregator thread: records batches until the channel is disconnected.
fn run_worker(
    rx: &Receiver<Message>,
    spent: &mpsc::Sender<Vec<Routed>>,
    aggregator: &Mutex<Aggregator>,
    cpu_ns: &AtomicU64,
    failed: &AtomicBool,
) {
    while let Ok(message) = rx.recv() {
        match message {
            Message::Events(mut batch) => {
                let recorded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    let mut aggregator = aggregator.lock();
                    for (event, thread, copies) in batch.drain(..) {
                        aggregator.record_on_with(&event, thread, copies);
                    }
                }));
                if recorded.is_err() {
                    // A bug: stop taking events (the router records any more itself) and
                    // let the session stop with `error`.
                    failed.store(true, Ordering::Relaxed);
                    return;
                }
                cpu_ns.store(clock::thread_cpu_ns(), Ordering::Relaxed);
                // Back for reuse; gone with the router if it is.
                let _ = spent.send(batch);
            }
            Message::Flush(done) => {
                let _ = done.send(());
            }
        }
    }
}

/// Every aggregator of a session, locked: read them as one, or configure each.
pub struct Aggregates<'a> {
    own: &'a mut Aggregator,
    others: Vec<MutexGuard<'a, Aggregator>>,
    merged: Option<Aggregator>,
}

impl Aggregates<'_> {
    /// The session's figures as one aggregator: aggregator 0 itself when alone, else their
    /// merge (made once per `Aggregates`, and again after `for_each_mut`).
    pub fn view(&mut self) -> &Aggregator {
        if self.others.is_empty() {
            return self.own;
        }
        let Aggregates { own, others, merged } = self;
        merged.get_or_insert_with(|| {
            let parts: Vec<&Aggregator> = std::iter::once(&**own).chain(others.iter().map(|guard| &**guard)).collect();
            Aggregator::merged(&parts)
        })
    }

    /// Runs `f` on every aggregator (setting a filter, loops, a new interval).
    pub fn for_each_mut(&mut self, mut f: impl FnMut(&mut Aggregator)) {
        f(self.own);
        for other in &mut self.others {
            f(other);
        }
        self.merged = None;
    }
}
