//! Sessions: the slot table the hot path reads, per-thread producers, and the collector.
//!
//! The tracer state an Erlang user passes in `{tracer, ferrotrace_tracer, State}` is a small
//! integer, the session id. It names a slot in a static table and carries a generation, so a
//! stale id (a stopped or released session, or one from a previous load of the library) is
//! recognised without touching any reference count. The hot path only *reads* the slot table;
//! the rest of a session is reached through the slot's pointer, which is valid while the
//! reading thread is marked active (see `quiesce`).

use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crossbeam_utils::CachePadded;
use parking_lot::Mutex;

use crate::aggregate::Aggregator;
use crate::clock;
use crate::event::{Event, PackedEvent};
use crate::limit::{Leases, Limiter};
use crate::options::{Config, OnLimit};
use crate::quiesce::{self, MAX_THREADS};
use crate::ring::Ring;

/// Sessions that can exist at once (running or stopped but not yet released).
pub const MAX_SESSIONS: usize = 64;
const SLOT_BITS: u32 = 6;
const GENERATION_BITS: u32 = 34;
/// How often the collector drains the rings.
pub const COLLECT_INTERVAL: Duration = Duration::from_millis(1);

const FREE: u64 = 0;
const LIVE: u64 = 1;
const STOPPED: u64 = 2;

struct Slot {
    /// `id << 2 | state`; read by every callback, written only at start, stop and release.
    tag: AtomicU64,
    session: AtomicPtr<Session>,
}

static SLOTS: [Slot; MAX_SESSIONS] = [const {
    Slot { tag: AtomicU64::new(FREE), session: AtomicPtr::new(ptr::null_mut()) }
}; MAX_SESSIONS];

/// Owns the sessions; the slot table mirrors it for the hot path.
static REGISTRY: Mutex<[Option<Arc<Session>>; MAX_SESSIONS]> =
    Mutex::new([const { None }; MAX_SESSIONS]);
static NEXT_GENERATION: AtomicU64 = AtomicU64::new(1);
/// Distinguishes ids of this load of the library from those of an earlier one.
static LOAD_SALT: AtomicU64 = AtomicU64::new(0);

/// Sets this load's salt (16 bits) so ids from a previous load are never live.
pub fn set_load_salt(salt: u64) {
    LOAD_SALT.store(salt & 0xffff, Ordering::Relaxed);
}

#[inline]
fn slot_of(id: u64) -> usize {
    (id & (MAX_SESSIONS as u64 - 1)) as usize
}

#[inline]
fn tag(id: u64, state: u64) -> u64 {
    id << 2 | state
}

/// True if `id` names a running session. Reads one static word: no session memory.
#[inline]
pub fn is_live(id: u64) -> bool {
    SLOTS[slot_of(id)].tag.load(Ordering::SeqCst) == tag(id, LIVE)
}

/// The running session `id`. The caller must hold an `Active` mark for its whole use of the
/// reference (that is what keeps the session's producers from being freed).
#[inline]
pub fn live_session(id: u64, _active: &quiesce::Active) -> Option<&Session> {
    let slot = &SLOTS[slot_of(id)];
    if slot.tag.load(Ordering::SeqCst) != tag(id, LIVE) {
        return None;
    }
    // SAFETY: the registry keeps the session alive until release, which happens only after the
    // tag stopped being LIVE and a grace period passed; our Active mark precedes the tag load.
    unsafe { slot.session.load(Ordering::Acquire).as_ref() }
}

/// The session `id`, running or stopped, if it has not been released.
pub fn lookup(id: u64) -> Option<Arc<Session>> {
    let registry = REGISTRY.lock();
    registry[slot_of(id)].as_ref().filter(|s| s.id == id).cloned()
}

/// Every session not yet released.
pub fn all() -> Vec<Arc<Session>> {
    REGISTRY.lock().iter().flatten().cloned().collect()
}

/// Why a session stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// `ferrotrace:stop/1` or `release/1`.
    User,
    /// The session's `duration` passed.
    Duration,
    /// The process that created the session died.
    OwnerDown,
    /// The library was unloaded (module purged).
    Unload,
    /// `max_events` or `max_rate` was reached with `on_limit => stop`.
    Limit,
    /// The collector failed (a bug); the session stopped rather than go on unwatched.
    Error,
}

impl StopReason {
    /// The reason's name, as the Erlang atom in summaries.
    pub fn name(self) -> &'static str {
        match self {
            StopReason::User => "user",
            StopReason::Duration => "duration",
            StopReason::OwnerDown => "owner_down",
            StopReason::Unload => "unload",
            StopReason::Limit => "limit",
            StopReason::Error => "error",
        }
    }
}

/// When and why a session stopped.
#[derive(Clone, Copy, Debug)]
pub struct Stopped {
    /// Why.
    pub reason: StopReason,
    /// Wall-clock milliseconds.
    pub at_ms: u64,
}

/// Counters written by exactly one thread: the producer's own cache line.
#[derive(Default)]
struct ProducerCounters {
    dropped: AtomicU64,
    ignored: AtomicU64,
    sampled_out: AtomicU64,
    limited: AtomicU64,
    leases: Leases,
}

/// One thread's side of a session: its ring and its counters.
pub struct Producer {
    ring: Ring<PackedEvent>,
    counters: CachePadded<ProducerCounters>,
}

/// A full-avalanche mix of a word (the splitmix64 finalizer): pid terms differ only in a few
/// middle bits, and a plain multiplication left those out of the bits `sample` reads.
#[inline]
fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

#[inline]
fn bump(counter: &AtomicU64) {
    // Single writer: a load and a store, no read-modify-write.
    counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Release);
}

impl Producer {
    /// Pushes an event, counting a drop when the ring is full.
    ///
    /// # Safety
    /// Must be called only from the thread that owns this producer.
    #[inline]
    pub unsafe fn push(&self, event: Event) {
        match PackedEvent::pack(&event) {
            Some(packed) => {
                if self.ring.push(packed).is_err() {
                    bump(&self.counters.dropped);
                }
            }
            None => bump(&self.counters.ignored),
        }
    }

    /// # Safety
    /// As `push`.
    #[inline]
    pub unsafe fn ignore(&self) {
        bump(&self.counters.ignored);
    }
}

impl Producer {
    fn add_counters(&self, total: &mut Accounting) {
        let c = &self.counters;
        total.dropped += c.dropped.load(Ordering::Acquire);
        total.ignored += c.ignored.load(Ordering::Acquire);
        total.sampled_out += c.sampled_out.load(Ordering::Acquire);
        total.limited += c.limited.load(Ordering::Acquire);
    }
}

/// What the session's limits say about one event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Queue the event.
    Take,
    /// Not kept by `sample`.
    SampledOut,
    /// Refused by `max_events` or `max_rate`.
    Limited,
}

/// Event accounting: `seen = aggregated + dropped + sampled_out + limited`, exactly, in
/// every snapshot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Accounting {
    /// Events the callbacks handled for the session.
    pub seen: u64,
    /// Events taken in by the aggregator.
    pub aggregated: u64,
    /// Refused by a full ring.
    pub dropped: u64,
    /// Not kept by `sample`.
    pub sampled_out: u64,
    /// Refused by `max_events` or `max_rate`.
    pub limited: u64,
    /// Events of kinds the session does not aggregate (outside the identity).
    pub ignored: u64,
}

/// The consumer side: owned by whoever holds the lock (the collector or a reader).
pub struct Consumer {
    /// The statistics.
    pub aggregator: Aggregator,
    /// Drained events not yet folded in: newer than the last collection's cutoff.
    pending: Vec<PackedEvent>,
    aggregated: u64,
    /// Counters of producers already freed.
    retired: Accounting,
}

/// One tracing session: its producers (one per thread), its consumer side and its collector.
pub struct Session {
    /// The id Erlang uses as the tracer state.
    pub id: u64,
    /// Its options.
    pub config: Config,
    /// Raw bits of the keeper process's pid (an immediate), the Erlang side's handle.
    pub keeper: u64,
    /// Wall-clock start, milliseconds.
    pub started_ms: u64,
    started_ticks: u64,
    producers: Box<[AtomicPtr<Producer>]>,
    consumer: Mutex<Consumer>,
    /// Set once, at the end of `halt`; read without a lock, so readers holding the consumer
    /// lock never wait on a halt that waits for that lock.
    stopped: OnceLock<Stopped>,
    /// Serialises `halt`. Lock order: `halting`, then `consumer`.
    halting: Mutex<()>,
    collector: Mutex<Option<JoinHandle<()>>>,
    collector_exit: AtomicBool,
    limiter: Limiter,
    /// Set by the first callback that hits a limit under `on_limit => stop`.
    limit_tripped: AtomicBool,
}

fn wall_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Why a session could not be created.
#[derive(Debug, PartialEq, Eq)]
pub enum StartError {
    /// All `MAX_SESSIONS` slots hold a session not yet released.
    TooManySessions,
    /// The collector thread could not be spawned.
    Thread,
}

/// Creates and publishes a session, and starts its collector thread.
pub fn start(config: Config, keeper: u64) -> Result<Arc<Session>, StartError> {
    let mut registry = REGISTRY.lock();
    let slot = registry.iter().position(Option::is_none).ok_or(StartError::TooManySessions)?;
    let generation = NEXT_GENERATION.fetch_add(1, Ordering::Relaxed) & ((1 << GENERATION_BITS) - 1);
    let id = LOAD_SALT.load(Ordering::Relaxed) << (SLOT_BITS + GENERATION_BITS)
        | generation << SLOT_BITS
        | slot as u64;
    let session = Arc::new(Session {
        id,
        keeper,
        started_ms: wall_ms(),
        started_ticks: clock::now(),
        producers: (0..MAX_THREADS).map(|_| AtomicPtr::new(ptr::null_mut())).collect(),
        consumer: Mutex::new(Consumer {
            aggregator: Aggregator::new(config.max_functions, config.max_open_calls),
            pending: Vec::new(),
            aggregated: 0,
            retired: Accounting::default(),
        }),
        limiter: Limiter::new(config.max_events, config.max_rate.map(|(n, ms)| (n, clock::ns_to_ticks(ms * 1_000_000)))),
        limit_tripped: AtomicBool::new(false),
        config,
        stopped: OnceLock::new(),
        halting: Mutex::new(()),
        collector: Mutex::new(None),
        collector_exit: AtomicBool::new(false),
    });
    let collector = {
        let session = Arc::clone(&session);
        std::thread::Builder::new()
            .name(format!("ferrotrace-{slot}"))
            .spawn(move || session.run_collector())
            .map_err(|_| StartError::Thread)?
    };
    *session.collector.lock() = Some(collector);
    SLOTS[slot].session.store(Arc::as_ptr(&session) as *mut Session, Ordering::Release);
    SLOTS[slot].tag.store(tag(id, LIVE), Ordering::SeqCst);
    registry[slot] = Some(Arc::clone(&session));
    Ok(session)
}

impl Session {
    /// This thread's producer, created on the thread's first event (once per thread and
    /// session: a bounded allocation). `None` past `MAX_THREADS` threads.
    #[inline]
    pub fn producer(&self, thread: usize) -> &Producer {
        let entry = &self.producers[thread];
        let existing = entry.load(Ordering::Acquire);
        if !existing.is_null() {
            // SAFETY: freed only after the session stopped and a grace period passed.
            return unsafe { &*existing };
        }
        let fresh = Box::into_raw(Box::new(Producer {
            ring: Ring::with_capacity(self.config.ring_size),
            counters: CachePadded::new(ProducerCounters::default()),
        }));
        // Only this thread writes this entry, so a plain store publishes it.
        entry.store(fresh, Ordering::Release);
        // SAFETY: just allocated, freed only as above.
        unsafe { &*fresh }
    }

    /// Applies `sample`, `max_events` and `max_rate` to an event of `pid` stamped `ts`,
    /// counting what it refuses. Under `on_limit => stop` the first refusal stops the
    /// session: from then on callbacks see it as not live and answer `remove`.
    ///
    /// # Safety
    /// Must be called only from the thread that owns `producer`.
    #[inline]
    pub unsafe fn admit(&self, producer: &Producer, pid: u64, ts: u64) -> Admission {
        let sample = self.config.sample;
        if sample > 1 && !mix(pid).is_multiple_of(sample) {
            bump(&producer.counters.sampled_out);
            return Admission::SampledOut;
        }
        if self.limiter.is_limited() && !self.limiter.admit(&producer.counters.leases, ts) {
            bump(&producer.counters.limited);
            if self.config.on_limit == OnLimit::Stop && !self.limit_tripped.load(Ordering::Relaxed) {
                self.limit_tripped.store(true, Ordering::Release);
                let slot = &SLOTS[slot_of(self.id)];
                let _ = slot.tag.compare_exchange(tag(self.id, LIVE), tag(self.id, STOPPED),
                                                  Ordering::SeqCst, Ordering::Relaxed);
            }
            return Admission::Limited;
        }
        Admission::Take
    }

    /// When and why the session stopped, if it did.
    pub fn stopped(&self) -> Option<Stopped> {
        self.stopped.get().copied()
    }

    /// Milliseconds since the session started, up to its stop if stopped.
    pub fn elapsed_ms(&self) -> u64 {
        match self.stopped() {
            Some(stopped) => stopped.at_ms.saturating_sub(self.started_ms),
            None => wall_ms().saturating_sub(self.started_ms),
        }
    }

    /// Bytes held by this session's rings now.
    pub fn ring_bytes(&self) -> usize {
        let rings = self.producers.iter().filter(|p| !p.load(Ordering::Acquire).is_null()).count();
        rings * (self.config.ring_size.next_power_of_two() * std::mem::size_of::<PackedEvent>())
    }

    /// Drains every ring and folds in the events older than the cutoff (all if `flush`).
    fn collect(&self, consumer: &mut Consumer, flush: bool) {
        let cutoff = if flush { u64::MAX } else { clock::now() };
        // After this, every event stamped before `cutoff` is in a ring: a callback that began
        // later takes its timestamp later. So the sort below sees each process's events in
        // order even when it migrated between schedulers.
        quiesce::wait_for_quiescence();
        let Consumer { pending, aggregated, aggregator, .. } = consumer;
        for entry in self.producers.iter() {
            // SAFETY: we hold the consumer lock, so we are the ring's only consumer; the
            // producer is freed only under that same lock.
            if let Some(producer) = unsafe { entry.load(Ordering::Acquire).as_ref() } {
                *aggregated += unsafe { producer.ring.drain(|event| pending.push(event)) };
            }
        }
        pending.sort_by_key(PackedEvent::ts);
        let ready = pending.partition_point(|event| event.ts() < cutoff);
        for event in pending.drain(..ready) {
            let event = event.unpack();
            aggregator.record(&Event { ts: clock::to_ns(event.ts), ..event });
        }
    }

    /// Runs `f` on the aggregation state after bringing it up to date.
    pub fn with_consumer<R>(&self, f: impl FnOnce(&Consumer, Accounting) -> R) -> R {
        let mut consumer = self.consumer.lock();
        let flush = self.stopped().is_some();
        self.collect(&mut consumer, flush);
        let accounting = self.accounting(&consumer);
        f(&consumer, accounting)
    }

    /// Runs `f` on the aggregator, for configuring it (filter, loops) or taking what it found.
    pub fn with_aggregator_mut<R>(&self, f: impl FnOnce(&mut Aggregator) -> R) -> R {
        let mut consumer = self.consumer.lock();
        let flush = self.stopped().is_some();
        self.collect(&mut consumer, flush);
        f(&mut consumer.aggregator)
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

    /// Stops tracing (idempotent): callbacks answer `remove` from now on, the rings are
    /// drained one last time and freed. Statistics stay readable until `release`.
    pub fn halt(&self, reason: StopReason) {
        let _halting = self.halting.lock();
        if self.stopped.get().is_some() {
            return;
        }
        SLOTS[slot_of(self.id)].tag.store(tag(self.id, STOPPED), Ordering::SeqCst);
        // No callback can still be using a producer after this.
        quiesce::wait_for_quiescence();
        let mut consumer = self.consumer.lock();
        self.collect(&mut consumer, true);
        for entry in self.producers.iter() {
            let producer = entry.swap(ptr::null_mut(), Ordering::AcqRel);
            if !producer.is_null() {
                // SAFETY: allocated by `producer()` with Box; unreachable from callbacks now.
                let producer = unsafe { Box::from_raw(producer) };
                let aggregator = &mut consumer.aggregator;
                consumer.aggregated += unsafe {
                    producer.ring.drain(|e| {
                        let e = e.unpack();
                        aggregator.record(&Event { ts: clock::to_ns(e.ts), ..e })
                    })
                };
                producer.add_counters(&mut consumer.retired);
            }
        }
        let _ = self.stopped.set(Stopped { reason, at_ms: wall_ms() });
    }

    /// Stops the session and waits for its collector thread to end.
    pub fn stop(&self, reason: StopReason) {
        self.halt(reason);
        self.collector_exit.store(true, Ordering::Release);
        let handle = self.collector.lock().take();
        if let Some(handle) = handle {
            handle.thread().unpark();
            let _ = handle.join();
        }
    }

    fn run_collector(&self) {
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.collector_loop()));
        if run.is_err() {
            self.halt(StopReason::Error);
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
        }
    }
}

/// Stops the session and forgets it; its id is dead from now on.
pub fn release(id: u64) -> bool {
    let Some(session) = lookup(id) else { return false };
    session.stop(StopReason::User);
    let mut registry = REGISTRY.lock();
    let slot = slot_of(id);
    if registry[slot].as_ref().is_some_and(|s| s.id == id) {
        SLOTS[slot].tag.store(FREE, Ordering::SeqCst);
        SLOTS[slot].session.store(ptr::null_mut(), Ordering::Release);
        registry[slot] = None;
    }
    true
}

impl Drop for Session {
    fn drop(&mut self) {
        for entry in self.producers.iter() {
            let producer = entry.swap(ptr::null_mut(), Ordering::AcqRel);
            if !producer.is_null() {
                // SAFETY: last owner; no callback can reach a released session.
                drop(unsafe { Box::from_raw(producer) });
            }
        }
    }
}

impl Consumer {
    /// The statistics.
    pub fn aggregator(&self) -> &Aggregator {
        &self.aggregator
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{EventKind, Mfa};
    use crate::quiesce::{thread_index, Active};

    const F: Mfa = Mfa { module: 11, function: 12, arity: 0 };

    /// What `trace/5` does with an event, minus term decoding.
    fn emit(session_id: u64, pid: u64, kind: EventKind) -> bool {
        let thread = thread_index().unwrap();
        let active = Active::enter(thread);
        match live_session(session_id, &active) {
            Some(session) => {
                let producer = session.producer(thread);
                let ts = clock::now();
                unsafe {
                    if session.admit(producer, pid, ts) == Admission::Take {
                        producer.push(Event { ts, pid, mfa: F, kind });
                    }
                }
                true
            }
            None => false,
        }
    }

    fn run_threads(id: u64, threads: u64, calls: u64) {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                std::thread::spawn(move || {
                    for i in 0..calls {
                        // Shaped like local pid terms: consecutive numbers << 4 | 3.
                        let pid = (t * 1_000_000 + i) << 4 | 3;
                        emit(id, pid, EventKind::Call);
                        emit(id, pid, EventKind::Return);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    }

    #[test]
    fn max_events_with_drop_counts_the_excess_exactly() {
        let config = Config { max_events: Some(1_001), on_limit: OnLimit::Drop, duration_ms: None, ..Config::default() };
        let session = start(config, 0).unwrap();
        run_threads(session.id, 3, 5_000);
        session.stop(StopReason::User);
        let accounting = session.with_consumer(|_, a| a);
        assert_eq!(accounting.seen, 30_000);
        assert_eq!(accounting.aggregated + accounting.dropped, 1_001);
        assert_eq!(accounting.limited, 30_000 - 1_001);
        assert!(release(session.id));
    }

    #[test]
    fn max_events_with_stop_stops_the_session() {
        let config = Config { max_events: Some(500), duration_ms: None, ..Config::default() };
        let session = start(config, 0).unwrap();
        run_threads(session.id, 2, 5_000);
        assert!(!is_live(session.id), "tripped at once, before the collector noticed");
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(session.stopped().map(|s| s.reason), Some(StopReason::Limit));
        let accounting = session.with_consumer(|_, a| a);
        // Another thread may stop with part of a lease unspent: never more than the limit.
        let taken = accounting.aggregated + accounting.dropped;
        assert!((500 - crate::limit::MAX_LEASE..=500).contains(&taken), "{accounting:?}");
        assert!(accounting.limited >= 1);
        assert_eq!(accounting.seen, accounting.aggregated + accounting.dropped + accounting.limited);
        assert!(release(session.id));
    }

    /// Readers of the statistics (the summary NIF reads `elapsed_ms` under the consumer lock)
    /// and a halting collector must not wait on each other: this deadlocked once.
    #[test]
    fn summaries_during_a_limit_stop_do_not_deadlock() {
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for _ in 0..20 {
                let config = Config { max_events: Some(2_000), duration_ms: None, ..Config::default() };
                let session = start(config, 0).unwrap();
                let reader = {
                    let session = Arc::clone(&session);
                    std::thread::spawn(move || {
                        while session.stopped().is_none() {
                            session.with_consumer(|_, _| session.elapsed_ms());
                        }
                    })
                };
                run_threads(session.id, 2, 2_000);
                reader.join().unwrap();
                session.stop(StopReason::User);
                assert_eq!(session.stopped().map(|s| s.reason), Some(StopReason::Limit));
                assert!(release(session.id));
            }
            done.send(()).unwrap();
        });
        finished
            .recv_timeout(Duration::from_secs(60))
            .expect("summaries and a halting collector deadlocked");
    }

    #[test]
    fn sampling_keeps_whole_processes() {
        let config = Config { sample: 4, duration_ms: None, ..Config::default() };
        let session = start(config, 0).unwrap();
        run_threads(session.id, 2, 10_000);
        session.stop(StopReason::User);
        session.with_consumer(|consumer, a| {
            assert_eq!(a.seen, 40_000);
            assert_eq!(a.seen, a.aggregated + a.dropped + a.sampled_out);
            // About a quarter kept; every kept call has its return.
            assert!(a.aggregated > 40_000 / 8 && a.aggregated < 40_000 / 2, "{a:?}");
            assert_eq!(consumer.aggregator().counters(), Default::default());
        });
        assert!(release(session.id));
    }

    #[test]
    fn events_from_many_threads_are_counted_exactly_and_paired() {
        let config = Config { ring_size: 64, duration_ms: None, ..Config::default() };
        let session = start(config, 0).unwrap();
        let id = session.id;
        run_threads(id, 4, 10_000);
        session.stop(StopReason::User);
        assert!(!emit(id, 1, EventKind::Call), "a stopped session takes no events");
        session.with_consumer(|consumer, accounting| {
            assert_eq!(accounting.seen, 80_000);
            assert_eq!(accounting.seen, accounting.aggregated + accounting.dropped);
            let f = consumer.aggregator().function(&F);
            let aggregated_calls = f.map_or(0, |f| f.calls + f.returns);
            assert_eq!(aggregated_calls, accounting.aggregated);
        });
        assert_eq!(session.ring_bytes(), 0, "stop frees the rings");
        assert!(release(id));
        assert!(lookup(id).is_none());
        assert!(!release(id));
    }

    #[test]
    fn duration_stops_the_session() {
        let config = Config { duration_ms: Some(20), ..Config::default() };
        let session = start(config, 0).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(session.stopped().map(|s| s.reason), Some(StopReason::Duration));
        assert!(!is_live(session.id));
        assert!(release(session.id));
    }

    #[test]
    fn stale_ids_are_not_live() {
        let session = start(Config::default(), 0).unwrap();
        let id = session.id;
        assert!(is_live(id));
        assert!(!is_live(id + (1 << SLOT_BITS)), "another generation in the same slot");
        assert!(release(id));
        assert!(!is_live(id));
    }
}
