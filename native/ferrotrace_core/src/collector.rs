//! The collector: drains every producer's ring off the schedulers, orders events by
//! timestamp, and feeds them to the aggregators ([`shards`]). One thread per session,
//! every 1 to 8 ms, as the rings fill ([`next_interval`]; its body is `session/collect.rs`); readers of the statistics
//! bring them up to date the same way (`session/read.rs`).
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

use std::sync::atomic::{AtomicPtr, Ordering};
use std::time::Duration;

use crate::memory::{alloc_bytes, vec_bytes, Memory};
use crate::clock;
use crate::term_lane::{HeldCopies, PendingCopies};
use crate::event::PackedEvent;
use crate::term_format::EventCopies;
use crate::producer::{Accounting, Producer};
use crate::quiesce;
use crate::collector::shards::Shards;

pub mod shards;

/// The shortest wait between two collections, while events flow.
pub const COLLECT_INTERVAL_MIN: Duration = Duration::from_millis(1);

/// The longest wait between two collections, while the rings stay nearly empty: a thread
/// woken a thousand times a second takes a core from a busy scheduler as often (on yaws
/// under load, the collector's 1 ms wake-ups cost more of the server's throughput than the
/// events did).
pub const COLLECT_INTERVAL_MAX: Duration = Duration::from_millis(8);

/// Events a scheduler can put in its ring per microsecond, at most (a callback takes well
/// over 250 ns): what bounds the wait so that a burst cannot fill an empty ring before the
/// next collection.
const MOST_EVENTS_PER_US: u64 = 4;

/// The wait before the next collection, after one whose fullest ring held `fullest` of its
/// `capacity` events: back to the shortest once a ring was an eighth full, twice as long
/// while every ring held under a thirty-second, never longer than the time a scheduler takes
/// to fill an empty ring ([`MOST_EVENTS_PER_US`]) nor than [`COLLECT_INTERVAL_MAX`].
pub fn next_interval(current: Duration, fullest: u64, capacity: u64) -> Duration {
    let longest = Duration::from_micros(capacity / MOST_EVENTS_PER_US).clamp(COLLECT_INTERVAL_MIN, COLLECT_INTERVAL_MAX);
    if fullest.saturating_mul(8) >= capacity {
        COLLECT_INTERVAL_MIN
    } else if fullest.saturating_mul(32) < capacity {
        current.saturating_mul(2).clamp(COLLECT_INTERVAL_MIN, longest)
    } else {
        current.clamp(COLLECT_INTERVAL_MIN, longest)
    }
}

/// How far behind the rings the collector fell: what tells an operator whose session dropped
/// events whether the rings are too small for the load or the collector went without CPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Backlog {
    /// The most events one ring held when it was drained.
    pub ring_peak: u64,
    /// The longest time between two collections of the running session, in nanoseconds (the
    /// collector's thread runs one every 1 to 8 ms when it gets a CPU, [`next_interval`]).
    pub longest_gap_ns: u64,
}

/// The consumer side: owned by whoever holds the session's consumer lock (the collector or a
/// reader).
pub struct Consumer {
    /// The statistics: one aggregator, or several by pid.
    pub shards: Shards,
    /// Drained events not yet folded in (newer than the last collection's cutoff), with the
    /// index of the thread that produced each.
    pending: Vec<(PackedEvent, u32)>,
    aggregated: u64,
    /// Counters of producers already freed.
    retired: Accounting,
    /// With `args` or `key`: drained events of producers with a term ring, each with its
    /// thread's index and where its copies are in that thread's `held`.
    pending_with: Vec<(PackedEvent, u32, PendingCopies)>,
    /// The drained copies of each thread (by index) with a term ring.
    held: Vec<HeldCopies>,
    /// A producer's events while its copies are matched (reused).
    drained: Vec<PackedEvent>,
    /// The fullest ring drained so far, and in the last collection.
    ring_peak: u64,
    last_fullest: u64,
    /// When the last collection of the running session took its cutoff, and the longest
    /// time between two, in ticks.
    last_collection: u64,
    longest_gap: u64,
}

impl Consumer {
    pub(crate) fn new(shards: Shards) -> Consumer {
        Consumer {
            shards,
            pending: Vec::new(),
            aggregated: 0,
            retired: Accounting::default(),
            pending_with: Vec::new(),
            held: Vec::new(),
            drained: Vec::new(),
            ring_peak: 0,
            last_fullest: 0,
            last_collection: clock::now(),
            longest_gap: 0,
        }
    }

    /// How far behind the collector fell so far.
    pub fn backlog(&self) -> Backlog {
        Backlog { ring_peak: self.ring_peak, longest_gap_ns: clock::ticks_to_ns(self.longest_gap) }
    }

    /// The most events one ring held in the last collection.
    pub(crate) fn last_fullest(&self) -> u64 {
        self.last_fullest
    }

    fn drain(&mut self, producer: &Producer) {
        let thread = producer.thread;
        let Some(lane) = &producer.term_lane else {
            if let Some(rx) = producer.rx.lock().as_mut() {
                let pending = &mut self.pending;
                let drained = rx.drain(|event| pending.push((event, thread)));
                self.took(drained);
            }
            return;
        };
        let mut lane = lane.rx.lock();
        if let Some(rx) = producer.rx.lock().as_mut() {
            let drained = &mut self.drained;
            let count = rx.drain(|event| drained.push(event));
            self.took(count);
        }
        let index = thread as usize;
        if self.held.len() <= index {
            self.held.resize_with(index + 1, HeldCopies::default);
        }
        let held = &mut self.held[index];
        // After the events: a drained event's copy, pushed before it, is drained too.
        lane.drain_into(held);
        for event in self.drained.drain(..) {
            let taken = held.take_for(&event.unpack());
            self.pending_with.push((event, thread, taken));
        }
    }

    /// Counts `count` events drained from one ring.
    fn took(&mut self, count: u64) {
        self.aggregated += count;
        self.ring_peak = self.ring_peak.max(count);
        self.last_fullest = self.last_fullest.max(count);
    }

    /// Folds in the pending events stamped before `cutoff`, in timestamp order.
    fn fold_in(&mut self, cutoff: u64) {
        let Consumer { pending, shards, pending_with, held, .. } = self;
        // `pending` is a few sorted runs (what was left from the last collection, then each
        // ring's events, stamped in order by one thread): a stable sort merges runs, where
        // an unstable one sorts from scratch (`make collector-ceiling`: 91.5 -> 62.6 ns per
        // event with four rings' events interleaved in time).
        pending.sort_by_key(|(event, _)| event.ts());
        let ready = pending.partition_point(|(event, _)| event.ts() < cutoff);
        if pending_with.is_empty() {
            for (event, thread) in pending.drain(..ready) {
                shards.record(event, thread);
            }
            shards.dispatch();
            return;
        }
        // `args`: the events with copies merged in timestamp order with any without (from a
        // thread whose term ring could not be allocated).
        pending_with.sort_by_key(|(event, _, _)| event.ts());
        let ready_with = pending_with.partition_point(|(event, _, _)| event.ts() < cutoff);
        let mut plain = pending.drain(..ready).peekable();
        let mut with = pending_with.drain(..ready_with).peekable();
        loop {
            let (event, thread, copies) = match (plain.peek(), with.peek()) {
                (Some((a, _)), Some((b, _, _))) if a.ts() <= b.ts() => match plain.next() {
                    Some((event, thread)) => (event, thread, EventCopies::default()),
                    None => break,
                },
                (Some(_), None) => match plain.next() {
                    Some((event, thread)) => (event, thread, EventCopies::default()),
                    None => break,
                },
                (_, Some(_)) => match with.next() {
                    Some((event, thread, copies)) => match held.get_mut(thread as usize) {
                        Some(held) => (event, thread, held.resolve(copies)),
                        None => (event, thread, EventCopies::default()),
                    },
                    None => break,
                },
                (None, None) => break,
            };
            shards.record_with(event, thread, copies);
        }
        held.iter_mut().for_each(HeldCopies::let_go);
        shards.dispatch();
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

impl Consumer {
    /// Drains every producer's ring and folds in the events older than the cutoff (all if
    /// `flush`).
    ///
    /// # Safety
    /// `producers` are the producers of the session whose consumer lock guards `self`: they
    /// are freed only by `Session::halt`, under that lock, which the caller holds.
    pub(crate) unsafe fn collect(&mut self, producers: &[AtomicPtr<Producer>], flush: bool) {
        let cutoff = if flush { u64::MAX } else { clock::now_ordered() };
        if !flush {
            // A stopped session's reads flush; the gaps that matter are the running ones.
            self.longest_gap = self.longest_gap.max(cutoff.saturating_sub(self.last_collection));
            self.last_collection = cutoff;
        }
        self.last_fullest = 0;
        // After this, every event stamped before `cutoff` is in a ring (module docs).
        quiesce::wait_for_quiescence();
        for entry in producers {
            // SAFETY: the caller's contract: not freed while its consumer lock is held.
            if let Some(producer) = unsafe { entry.load(Ordering::Acquire).as_ref() } {
                self.drain(producer);
            }
        }
        self.fold_in(cutoff);
    }

    /// The session's accounting: the counters of its live producers, of those already freed,
    /// and what was aggregated.
    ///
    /// # Safety
    /// As for [`Consumer::collect`].
    pub(crate) unsafe fn accounting(&self, producers: &[AtomicPtr<Producer>]) -> Accounting {
        let mut total = self.retired;
        for entry in producers {
            // SAFETY: as in `collect`.
            if let Some(producer) = unsafe { entry.load(Ordering::Acquire).as_ref() } {
                producer.add_counters(&mut total);
            }
        }
        total.aggregated = self.aggregated;
        total.seen = total.aggregated + total.dropped + total.sampled_out + total.limited;
        total
    }

    /// The memory of the consumer side and of the live producers: `ring_bytes` (event
    /// rings), `term_rings` (term rings, their buffers, the drained copies held here) and
    /// `collector` (drained events waiting, batches being filled, producer records).
    ///
    /// # Safety
    /// As for [`Consumer::collect`].
    pub(crate) unsafe fn memory(&self, producers: &[AtomicPtr<Producer>]) -> Memory {
        let mut memory = Memory::default();
        for entry in producers {
            // SAFETY: as in `collect`.
            if let Some(producer) = unsafe { entry.load(Ordering::Acquire).as_ref() } {
                memory.collector += alloc_bytes(std::mem::size_of::<Producer>());
                if let Some(rx) = producer.rx.lock().as_ref() {
                    memory.ring_bytes += rx.capacity() * std::mem::size_of::<PackedEvent>();
                }
                if let Some(lane) = &producer.term_lane {
                    memory.term_rings += lane.bytes();
                }
            }
        }
        memory.term_rings += vec_bytes::<HeldCopies>(self.held.capacity()) + self.held.iter().map(HeldCopies::heap_bytes).sum::<usize>();
        memory.collector += vec_bytes::<(PackedEvent, u32)>(self.pending.capacity())
            + vec_bytes::<(PackedEvent, u32, PendingCopies)>(self.pending_with.capacity())
            + vec_bytes::<PackedEvent>(self.drained.capacity())
            + self.shards.buffer_bytes();
        memory
    }

    /// Frees the buffers of a session that stopped (every event folded in): the drained
    /// copies, the vectors of drained events, the batches.
    pub(crate) fn free_buffers(&mut self) {
        self.pending = Vec::new();
        self.pending_with = Vec::new();
        self.held = Vec::new();
        self.drained = Vec::new();
        self.shards.free_buffers();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::Aggregator;
    use crate::event::{Event, EventKind, Mfa};
    use crate::ring;
    use std::time::Instant;

    /// The wait doubles while the rings stay nearly empty, up to 8 ms for the default ring
    /// and less for one that a scheduler could fill sooner; an eighth full brings it back
    /// to 1 ms at once.
    #[test]
    fn the_wait_follows_how_full_the_rings_come() {
        let ms = Duration::from_millis;
        let mut wait = COLLECT_INTERVAL_MIN;
        let waits: Vec<Duration> = (0..5).map(|_| { wait = next_interval(wait, 0, 32_768); wait }).collect();
        assert_eq!(waits, [ms(2), ms(4), ms(8), ms(8), ms(8)]);
        assert_eq!(next_interval(ms(8), 32_768 / 8, 32_768), ms(1), "an eighth full");
        assert_eq!(next_interval(ms(4), 2_000, 32_768), ms(4), "between: kept");
        assert_eq!(next_interval(ms(4), 32_768 / 32 - 1, 32_768), ms(8), "under a thirty-second");
        let fill = Duration::from_micros(8_192 / 4);
        assert_eq!(next_interval(ms(2), 0, 8_192), fill, "8,192 events: filled in 2.048 ms at most");
        assert_eq!(next_interval(fill, 0, 8_192), fill);
        assert_eq!(next_interval(ms(1), 0, 64), ms(1), "a small ring: every millisecond");
        assert_eq!(next_interval(ms(8), 0, 64), ms(1));
        assert_eq!(next_interval(ms(1), u64::MAX, u64::MAX), ms(1), "no overflow");
    }

    /// The backlog: the fullest ring drained, and the longest time between two collections
    /// of the running session (a flush, a stopped session's read, does not count).
    #[test]
    fn backlog_is_the_fullest_ring_and_the_longest_gap() {
        crate::clock::init();
        let mut consumer = consumer_of(1, || Aggregator::new(10, 100));
        let producers: Vec<Box<Producer>> = (0..2).map(|_| Box::new(Producer::new(64))).collect();
        let entries: Vec<AtomicPtr<Producer>> =
            producers.iter().map(|p| AtomicPtr::new(&**p as *const Producer as *mut Producer)).collect();
        let push = |producer: &Producer, count: u64| {
            for n in 0..count {
                let event = Event { ts: clock::now(), pid: 0x13, mfa: Mfa { module: 0x0b, function: 0x4b, arity: n as u32 % 2 }, kind: EventKind::Call };
                // SAFETY: this thread is the producer's only user.
                let pushed = producer.tx.as_ref().unwrap().with_mut(|tx| unsafe { (*tx).push(PackedEvent::pack(&event).unwrap()) });
                assert!(pushed.is_ok());
            }
        };
        push(&producers[0], 10);
        push(&producers[1], 40);
        // SAFETY: the producers outlive the consumer's use of them here.
        unsafe { consumer.collect(&entries, false) };
        assert_eq!(consumer.backlog().ring_peak, 40, "the fullest ring, not the sum");
        std::thread::sleep(Duration::from_millis(20));
        push(&producers[0], 25);
        // SAFETY: as above.
        unsafe { consumer.collect(&entries, false) };
        let backlog = consumer.backlog();
        assert_eq!(backlog.ring_peak, 40);
        assert!(backlog.longest_gap_ns >= 20_000_000, "{backlog:?}");
        std::thread::sleep(Duration::from_millis(60));
        // SAFETY: as above.
        unsafe { consumer.collect(&entries, true) };
        assert_eq!(consumer.backlog(), backlog, "a flush is not a gap");
    }

    /// A consumer with `count` aggregators made by `make`, for the benches.
    fn consumer_of(count: usize, make: impl Fn() -> Aggregator) -> Consumer {
        Consumer::new(Shards::new(count, "bench", |index, count| make().with_shard(index, count)).unwrap())
    }

    /// The collector's ceiling: events per second one collector drains from the rings, orders
    /// and aggregates (calls paired with returns, HDR histograms), with one aggregator and
    /// with the work split over 2 and 4 (`aggregators`), measured alone, with the rings
    /// filled beforehand as schedulers would between two collections. Run by
    /// `make collector-ceiling`; prints its figures. On a machine with fewer cores than
    /// aggregator threads plus the collector, the split ones share them.
    #[test]
    #[ignore = "a benchmark: make collector-ceiling"]
    fn collector_ceiling() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        for aggregators in [1, 2, 4] {
            collector_ceiling_with(aggregators, cores);
        }
    }

    fn collector_ceiling_with(aggregators: usize, cores: usize) {
        const THREADS: usize = 4;
        const PIDS_PER_THREAD: u64 = 256;
        const FUNCTIONS: u64 = 16;
        const PER_ROUND: usize = 16_384; // events per ring per collection
        const ROUNDS: usize = 200;
        crate::clock::init();
        let mut consumer = consumer_of(aggregators, || Aggregator::new(1_000, 100_000));
        let mut rings: Vec<_> = (0..THREADS).map(|_| ring::channel::<PackedEvent>(PER_ROUND).unwrap()).collect();
        let mut ts = 0u64;
        let mut spent = Duration::ZERO;
        let mut collector_cpu = 0u64;
        let mut events = 0u64;
        for round in 0..ROUNDS {
            for (t, (tx, _)) in rings.iter_mut().enumerate() {
                for i in 0..PER_ROUND / 2 {
                    let n = (round * PER_ROUND + i) as u64;
                    let pid = ((t as u64 * PIDS_PER_THREAD + n % PIDS_PER_THREAD) << 4) | 3;
                    let function = 0x1_000b + ((n / PIDS_PER_THREAD) % FUNCTIONS) * 64;
                    let mfa = Mfa { module: 0x1_000b, function, arity: 1 };
                    for (k, kind) in [EventKind::Call, EventKind::Return].into_iter().enumerate() {
                        // The rings' events interleave in time, as schedulers' do.
                        let ts = ts + (((2 * i + k) * THREADS + t) as u64 + 1) * 7;
                        let packed = PackedEvent::pack(&Event { ts, pid, mfa, kind }).unwrap();
                        tx.push(packed).unwrap();
                    }
                }
            }
            ts += (PER_ROUND * THREADS) as u64 * 7;
            let start = Instant::now();
            let cpu_before = crate::clock::thread_cpu_ns();
            for (_, rx) in rings.iter_mut() {
                let pending = &mut consumer.pending;
                consumer.aggregated += rx.drain(|event| pending.push((event, 0)));
            }
            consumer.fold_in(ts + 1);
            collector_cpu += crate::clock::thread_cpu_ns() - cpu_before;
            // Until the aggregator threads are done too (they would otherwise go on while
            // the next round fills the rings, untimed).
            drop(consumer.shards.aggregates());
            spent += start.elapsed();
            events += (THREADS * PER_ROUND) as u64;
        }
        let mut aggregates = consumer.shards.aggregates();
        assert_eq!(consumer.aggregated, events);
        assert_eq!(aggregates.view().counters(), Default::default(), "every call paired");
        let returns: u64 = aggregates.view().functions().map(|(_, f)| f.returns).sum();
        assert_eq!(returns, events / 2);
        drop(aggregates);
        let rate = events as f64 / spent.as_secs_f64();
        println!(
            "collector ceiling, {aggregators} aggregator(s) on {cores} cores: {events} events in {:.1} ms: \
             {:.1} M events/s, {:.1} ns/event ({THREADS} rings, {} pids, {FUNCTIONS} functions, \
             {PER_ROUND} events per ring per collection)",
            spent.as_secs_f64() * 1e3,
            rate / 1e6,
            1e9 / rate,
            THREADS as u64 * PIDS_PER_THREAD,
        );
        if aggregators > 1 {
            // CPU per event: what bounds the session with a core per thread.
            let (router, aggregating) = (collector_cpu as f64 / events as f64, consumer.shards.threads_cpu_ns() as f64 / events as f64);
            println!(
                "  CPU per event: collector (drain, order, route) {router:.1} ns, aggregator threads {aggregating:.1} ns in all; \
                 with a core each: up to {:.1} M events/s",
                1e3 / router.max(aggregating / aggregators as f64),
            );
        }
    }

    /// The same with `args => true`: every event comes with a copy (a one-element argument
    /// list or an integer, as the bench's `f/1` makes), drained from the term rings, matched
    /// and freed (no call is kept: `slowest` is 0). Run by `make collector-ceiling`.
    #[test]
    #[ignore = "a benchmark: make collector-ceiling"]
    fn collector_ceiling_with_args() {
        collector_ceiling_with_copies(crate::term_lane::CopyOf::Args);
    }

    /// The same with keys (`key => message`): every call comes with one of four keys (the
    /// bench's `f/1` keyed by `X rem 4`), its return with none. Run by `make collector-ceiling`.
    #[test]
    #[ignore = "a benchmark: make collector-ceiling"]
    fn collector_ceiling_with_keys() {
        collector_ceiling_with_copies(crate::term_lane::CopyOf::Key);
    }

    fn collector_ceiling_with_copies(copy_of: crate::term_lane::CopyOf) {
        use crate::aggregate::keyed::{KeySource, KeysConfig};
        use crate::term_lane::CopyOf;
        const THREADS: usize = 4;
        const PIDS_PER_THREAD: u64 = 256;
        const PER_ROUND: usize = 16_384;
        const ROUNDS: usize = 100;
        crate::clock::init();
        let slowest = crate::aggregate::slowest::SlowestConfig { keep: 0, threshold_ns: None, max_slow_calls: 1 };
        let keys = KeysConfig { source: KeySource::Message, max_keys: 1_000 };
        let mut consumer = consumer_of(1, || {
            let aggregator = Aggregator::new(1_000, 100_000).with_slowest(slowest);
            if copy_of == CopyOf::Key { aggregator.with_keys(keys) } else { aggregator }
        });
        let producers: Vec<Producer> = (0..THREADS)
            .map(|_| {
                let mut p = Producer::new(PER_ROUND);
                p.term_lane = crate::term_lane::TermLane::new(2 * PER_ROUND, 1024, copy_of == CopyOf::Args, copy_of == CopyOf::Key);
                p
            })
            .collect();
        let (call_copy, return_copy) = ([7u8; 15], [8u8; 9]);
        let mut ts = 0u64;
        let mut spent = Duration::ZERO;
        let mut events = 0u64;
        for round in 0..ROUNDS {
            for (t, producer) in producers.iter().enumerate() {
                let lane = producer.term_lane.as_ref().unwrap();
                for i in 0..PER_ROUND / 2 {
                    let n = (round * PER_ROUND + i) as u64;
                    let pid = ((t as u64 * PIDS_PER_THREAD + n % PIDS_PER_THREAD) << 4) | 3;
                    let mfa = Mfa { module: 0x1_000b, function: 0x1_000b, arity: 1 };
                    for (k, kind) in [EventKind::Call, EventKind::Return].into_iter().enumerate() {
                        // Interleaved in time with the other rings', as in `collector_ceiling`.
                        let ts = ts + (((2 * i + k) * THREADS + t) as u64 + 1) * 7;
                        let key = [n as u8 % 4; 3];
                        let body: Option<&[u8]> = match (copy_of, kind) {
                            (CopyOf::Args, EventKind::Call) => Some(&call_copy),
                            (CopyOf::Args, _) => Some(&return_copy),
                            (CopyOf::Key, EventKind::Call) => Some(&key),
                            (CopyOf::Key, _) => None,
                        };
                        if let Some(body) = body {
                            // SAFETY: this thread is the producer's only user.
                            let copied = unsafe {
                                lane.push_copy(pid, ts, kind, copy_of, |out| {
                                    out[..body.len()].copy_from_slice(body);
                                    body.len()
                                })
                            };
                            assert!(copied);
                        }
                        let packed = PackedEvent::pack(&Event { ts, pid, mfa, kind }).unwrap();
                        // SAFETY: as above.
                        let pushed = producer.tx.as_ref().unwrap().with_mut(|tx| unsafe { (*tx).push(packed) });
                        assert!(pushed.is_ok());
                    }
                }
            }
            ts += (PER_ROUND * THREADS) as u64 * 7;
            let start = Instant::now();
            for producer in &producers {
                consumer.drain(producer);
            }
            consumer.fold_in(ts + 1);
            spent += start.elapsed();
            events += (THREADS * PER_ROUND) as u64;
        }
        assert_eq!(consumer.aggregated, events);
        if copy_of == CopyOf::Key {
            let mut aggregates = consumer.shards.aggregates();
            let (_, stats) = aggregates.view().functions().next().unwrap();
            assert_eq!(stats.by_key.as_ref().map(|k| k.len()), Some(4), "four keys");
        }
        let rate = events as f64 / spent.as_secs_f64();
        println!(
            "collector ceiling with {}: {events} events (each {}) in {:.1} ms: {:.1} M events/s, {:.1} ns/event",
            if copy_of == CopyOf::Args { "args" } else { "keys" },
            if copy_of == CopyOf::Args { "with a copy" } else { "call with one of four keys" },
            spent.as_secs_f64() * 1e3,
            rate / 1e6,
            1e9 / rate,
        );
    }
}
