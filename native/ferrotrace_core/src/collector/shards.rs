//! A session's shards: its one aggregator, or several each on a thread of its own
//! (`aggregators => N`).
//!
//! One collector thread orders, pairs and aggregates about 16 M events/s (`make
//! collector-ceiling`, rings interleaved in time as schedulers fill them), less than sixteen
//! schedulers produce. Over half of that time is aggregation (the per-process stacks, the
//! histograms), not draining or ordering, so the collector still drains and orders
//! every event, then routes each to the aggregator that owns its pid ([`Router`]: its shard); each
//! aggregator runs on a thread of its own and takes its events in batches through a bounded
//! channel. The collector does no aggregation then, so that it can route for many
//! aggregators: its cost per event is what bounds the session (`make collector-ceiling`
//! prints both).
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

use crate::shard::route::{Router, Targets};
use crate::memory::{boxed_copies_bytes, vec_bytes, Memory};
use crate::aggregate::Aggregator;
use crate::clock;
use crate::event::{Event, Mfa, PackedEvent};
use crate::sync::Mutex;
use crate::term_format::EventCopies;

/// Events per batch: a batch is handed over as soon as it is full, so the aggregator threads
/// work while the collector still routes the rest of a collection.
const BATCH: usize = 4096;

/// Collections (one every 1 to 8 ms, `collector::next_interval`) between hand-overs of batches
/// not yet full.
const PARTIAL_EVERY: u32 = 10;

/// Batches in flight to one aggregator thread before the collector waits: 65,536 events,
/// 3 MiB (an event as routed is 48 bytes), a few milliseconds of lag.
const BATCHES_IN_FLIGHT: usize = 16;

/// One event as routed: the event as its ring held it, its thread's index, its copies if it
/// has any (boxed: most events have none, and the batch stays small).
type Routed = (PackedEvent, u32, Option<Box<EventCopies>>);

/// The event with its timestamp in nanoseconds, as aggregators take it.
#[inline]
fn unpack_ns(packed: PackedEvent) -> Event {
    let event = packed.unpack();
    Event { ts: clock::to_ns(event.ts), ..event }
}

fn unroute((packed, thread, copies): Routed) -> (Event, u32, EventCopies) {
    (unpack_ns(packed), thread, copies.map_or_else(EventCopies::default, |copies| *copies))
}

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
    /// Set by the thread when its aggregator found a loop at run time, so that the collector
    /// locks the aggregators for their loops only then (a reader may hold them a while).
    found_loops: Arc<AtomicBool>,
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
        for routed in unsent {
            let (event, thread, copies) = unroute(routed);
            aggregator.record_routed(&event, thread, copies);
        }
    }
}

/// A session's shards: its one aggregator (the collector's own), or one per aggregator thread.
pub struct Shards {
    /// The one aggregator, the collector thread's own, unless `aggregators > 1`.
    one: Option<Aggregator>,
    /// Otherwise: one thread per aggregator, aggregator `i` on `workers[i]`.
    workers: Vec<Worker>,
    router: Router,
    /// Collections since partial batches were last handed over.
    collections: u32,
    /// An aggregator thread failed (panicked): the session should stop with `error`.
    failed: Arc<AtomicBool>,
}

impl Shards {
    /// `count` aggregators made by `make(index, count)`: one is the caller's own; more each
    /// run on a thread of its own named `{name}-{index}`.
    pub fn new(count: usize, name: &str, make: impl Fn(u32, u32) -> Aggregator) -> std::io::Result<Shards> {
        let failed = Arc::new(AtomicBool::new(false));
        let router = Router::new(count as u32);
        if count <= 1 {
            return Ok(Shards { one: Some(make(0, 1)), workers: Vec::new(), router, collections: 0, failed });
        }
        let mut workers = Vec::with_capacity(count);
        for index in 0..count {
            let aggregator = Arc::new(Mutex::new(make(index as u32, count as u32)));
            let cpu_ns = Arc::new(AtomicU64::new(0));
            let found_loops = Arc::new(AtomicBool::new(false));
            let (tx, rx) = mpsc::sync_channel(BATCHES_IN_FLIGHT);
            let (spent_tx, spent) = mpsc::channel();
            let thread = {
                let shared = (Arc::clone(&aggregator), Arc::clone(&cpu_ns), Arc::clone(&found_loops), Arc::clone(&failed));
                std::thread::Builder::new()
                    .name(format!("{name}-{index}"))
                    .spawn(move || {
                        let (aggregator, cpu_ns, found_loops, failed) = shared;
                        run_worker(&rx, &spent_tx, &aggregator, &cpu_ns, &found_loops, &failed)
                    })?
            };
            workers.push(Worker { aggregator, tx: Some(tx), spent, thread: Some(thread), cpu_ns, found_loops, batch: Vec::new() });
        }
        Ok(Shards { one: None, workers, router, collections: 0, failed })
    }

    /// Aggregators in all.
    pub fn count(&self) -> usize {
        self.workers.len().max(1)
    }

    /// Whether an aggregator thread failed.
    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }

    /// Folds in (or routes) one event as a ring held it (timestamp in ticks) without copies;
    /// events in timestamp order.
    #[inline]
    pub fn record(&mut self, packed: PackedEvent, thread: u32) {
        match &mut self.one {
            Some(one) => one.record_from(&unpack_ns(packed), thread, EventCopies::default()),
            None => self.route(packed, thread, None),
        }
    }

    /// Folds in (or routes) one event as a ring held it with its copies; events in
    /// timestamp order.
    #[inline]
    pub fn record_with(&mut self, packed: PackedEvent, thread: u32, copies: EventCopies) {
        match &mut self.one {
            Some(one) => one.record_from(&unpack_ns(packed), thread, copies),
            None => {
                let any = copies.args.is_some() || copies.key.is_some();
                self.route(packed, thread, any.then(|| Box::new(copies)))
            }
        }
    }

    /// Routes the event as it is packed: the aggregator thread unpacks it and converts its
    /// timestamp, not the collector.
    fn route(&mut self, packed: PackedEvent, thread: u32, copies: Option<Box<EventCopies>>) {
        match self.router.targets(&packed.unpack()) {
            Targets::One(owner) => self.give(owner, (packed, thread, copies)),
            targets => {
                // Only calls, returns and exceptions have copies, and those go to one owner.
                for shard in targets.iter(self.router.count()) {
                    self.give(shard, (packed, thread, None));
                }
            }
        }
    }

    /// The event joins its aggregator's batch, handed over when full.
    #[inline]
    fn give(&mut self, shard: u32, routed: Routed) {
        let worker = &mut self.workers[shard as usize];
        if worker.batch.capacity() == 0 {
            worker.batch = worker.spent.try_recv().unwrap_or_else(|_| Vec::with_capacity(BATCH));
        }
        worker.batch.push(routed);
        if worker.batch.len() >= BATCH {
            worker.hand_over();
        }
    }

    /// Ends a collection. A batch not yet full is handed over only every
    /// `PARTIAL_EVERY` collections: at a low event rate, waking every aggregator thread
    /// at every collection would cost more than the events (readers and `stop` hand over
    /// everything first).
    pub fn dispatch(&mut self) {
        self.collections += 1;
        if self.collections >= PARTIAL_EVERY {
            self.hand_over_all();
        }
    }

    /// Hands every aggregator thread what it has not been sent yet.
    fn hand_over_all(&mut self) {
        self.collections = 0;
        for worker in &mut self.workers {
            if !worker.batch.is_empty() {
                worker.hand_over();
            }
        }
    }

    /// Waits until every aggregator thread has recorded every event routed to it.
    fn flush(&mut self) {
        self.hand_over_all();
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
        let Shards { one, workers, .. } = self;
        let parts = workers.iter().map(|worker| worker.aggregator.lock()).collect();
        Aggregates { one: one.as_mut(), parts, merged: None, spare: None }
    }

    /// With aggregator threads: hands over and waits for every event routed so far, then
    /// gives the aggregators themselves, for a reader to lock and read after it let go of the
    /// consumer lock (the collector then drains on while the reader merges). `None` with one
    /// aggregator, which is the collector's own: read it through [`Shards::aggregates`].
    pub(crate) fn detach(&mut self) -> Option<Vec<Arc<Mutex<Aggregator>>>> {
        if self.workers.is_empty() {
            return None;
        }
        self.flush();
        Some(self.workers.iter().map(|worker| Arc::clone(&worker.aggregator)).collect())
    }

    /// Loops found at run time since the last call, by any aggregator (each aggregator
    /// reports a function once; two may report the same one).
    pub fn take_new_loops(&mut self) -> Vec<Mfa> {
        if let Some(one) = &mut self.one {
            return one.take_new_loops();
        }
        // Every flag cleared (no short cut); a loop found after its flag was cleared sets it
        // again and is taken next time.
        let found = self.workers.iter().fold(false, |found, worker| worker.found_loops.swap(false, Ordering::Acquire) | found);
        if !found {
            return Vec::new();
        }
        let mut parts: Vec<_> = self.workers.iter().map(|worker| worker.aggregator.lock()).collect();
        let mut loops = Vec::new();
        for part in &mut parts {
            for mfa in part.take_new_loops() {
                if !loops.contains(&mfa) {
                    loops.push(mfa);
                }
            }
        }
        loops
    }

    /// Looks for loops whose processes sit at the frame bound
    /// ([`Aggregator::find_stuck_loops`]), in every aggregator; what is found is taken by
    /// [`Shards::take_new_loops`].
    pub fn find_stuck_loops(&mut self, now_ns: u64) {
        if let Some(one) = &mut self.one {
            return one.find_stuck_loops(now_ns);
        }
        for worker in &self.workers {
            let mut aggregator = worker.aggregator.lock();
            aggregator.find_stuck_loops(now_ns);
            if aggregator.has_new_loops() {
                worker.found_loops.store(true, Ordering::Release);
            }
        }
    }

    /// CPU time of the aggregator threads (not the collector's), nanoseconds.
    pub fn threads_cpu_ns(&self) -> u64 {
        self.workers.iter().map(|worker| worker.cpu_ns.load(Ordering::Relaxed)).sum()
    }

    /// Heap bytes of the batches being filled for the aggregator threads and of those
    /// handed back for reuse, with the copies in them (not those in flight).
    pub fn buffer_bytes(&self) -> usize {
        let batch = |batch: &Vec<Routed>| {
            vec_bytes::<Routed>(batch.capacity())
                + batch.iter().filter_map(|(_, _, copies)| copies.as_deref()).map(boxed_copies_bytes).sum::<usize>()
        };
        self.workers.iter().map(|worker| batch(&worker.batch)).sum()
    }

    /// Frees the batches of stopped aggregator threads (call after [`Shards::stop`]).
    pub fn free_buffers(&mut self) {
        for worker in &mut self.workers {
            worker.batch = Vec::new();
            while worker.spent.try_recv().is_ok() {}
        }
    }

    /// Frees every aggregator's open frames and process table ([`Aggregator::free_state`]),
    /// for a session that stopped (call after [`Shards::stop`]).
    pub fn free_state(&mut self) {
        if let Some(one) = &mut self.one {
            one.free_state();
        }
        for worker in &self.workers {
            worker.aggregator.lock().free_state();
        }
    }

    /// Ends the aggregator threads once they have recorded everything; their aggregators
    /// stay readable, and any later event is recorded by the caller's thread.
    pub fn stop(&mut self) {
        self.hand_over_all();
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
    found_loops: &AtomicBool,
    failed: &AtomicBool,
) {
    while let Ok(message) = rx.recv() {
        match message {
            Message::Events(mut batch) => {
                let recorded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    let mut aggregator = aggregator.lock();
                    for routed in batch.drain(..) {
                        let (event, thread, copies) = unroute(routed);
                        aggregator.record_routed(&event, thread, copies);
                    }
                    if aggregator.has_new_loops() {
                        // Under the aggregator's lock: whoever clears the flag and then
                        // takes the lock sees the loops.
                        found_loops.store(true, Ordering::Release);
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
    one: Option<&'a mut Aggregator>,
    parts: Vec<MutexGuard<'a, Aggregator>>,
    merged: Option<Aggregator>,
    /// An earlier merge, whose histograms the next merge is made in.
    spare: Option<Aggregator>,
}

impl<'a> Aggregates<'a> {
    /// The aggregator threads' aggregators, locked (see [`Shards::detach`]), with an earlier
    /// read's merge to make the next one in, if there is one.
    pub(crate) fn of_parts(parts: Vec<MutexGuard<'a, Aggregator>>, spare: Option<Aggregator>) -> Aggregates<'a> {
        Aggregates { one: None, parts, merged: None, spare }
    }

    /// Lets go of the parts and gives the merge made (or the spare one), for the next read.
    pub(crate) fn into_spare(self) -> Option<Aggregator> {
        self.merged.or(self.spare)
    }

    /// The bytes the aggregators hold, by part ([`Aggregator::memory`]), with the merge
    /// made for this read, or kept from an earlier one, as `merge` (its total).
    pub fn memory(&self) -> Memory {
        let mut memory = Memory::default();
        if let Some(one) = &self.one {
            memory.add(&one.memory());
        }
        for part in &self.parts {
            memory.add(&part.memory());
        }
        if let Some(merge) = self.merged.as_ref().or(self.spare.as_ref()) {
            memory.merge = merge.memory().total();
        }
        memory
    }

    /// The session's figures as one aggregator: the one itself when alone, else the parts'
    /// merge (made once per `Aggregates`, and again after `for_each_mut`).
    pub fn view(&mut self) -> &Aggregator {
        let Aggregates { one, parts, merged, spare } = self;
        if let Some(one) = one {
            return one;
        }
        merged.get_or_insert_with(|| {
            let parts: Vec<&Aggregator> = parts.iter().map(|guard| &**guard).collect();
            Aggregator::merged_reusing(&parts, spare.take())
        })
    }

    /// The calls seen per function, summed over the aggregators without merging them (no
    /// histogram is read or copied): what the overhead budget reads several times a second.
    /// In no particular order; a function every aggregator has counted once.
    pub fn call_counts(&self) -> Vec<(Mfa, u64)> {
        if let Some(one) = &self.one {
            return one.functions().map(|(mfa, stats)| (*mfa, stats.calls)).collect();
        }
        let mut counts: std::collections::HashMap<Mfa, u64> = std::collections::HashMap::new();
        for part in &self.parts {
            for (mfa, stats) in part.functions() {
                *counts.entry(*mfa).or_insert(0) += stats.calls;
            }
        }
        counts.into_iter().collect()
    }

    /// The processes the fuse untraced, taken from every aggregator
    /// ([`Aggregator::take_untraced`]); the merged figures stay (no figure changes).
    pub fn take_untraced(&mut self) -> Vec<u64> {
        let mut pids = Vec::new();
        if let Some(one) = &mut self.one {
            pids.append(&mut one.take_untraced());
        }
        for part in &mut self.parts {
            pids.append(&mut part.take_untraced());
        }
        pids
    }

    /// The processes with calls open, over every aggregator (each process is paired in one).
    pub fn open_pids(&self) -> Vec<u64> {
        let mut pids = Vec::new();
        if let Some(one) = &self.one {
            one.open_pids(&mut pids);
        }
        for part in &self.parts {
            part.open_pids(&mut pids);
        }
        pids
    }

    /// Runs `f` on every aggregator (setting a filter, loops, a new interval).
    pub fn for_each_mut(&mut self, mut f: impl FnMut(&mut Aggregator)) {
        if let Some(one) = &mut self.one {
            f(one);
        }
        for part in &mut self.parts {
            f(part);
        }
        if let Some(merged) = self.merged.take() {
            self.spare = Some(merged);
        }
    }
}
