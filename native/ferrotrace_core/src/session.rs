//! A session's lifecycle: start (publish, spawn the collector), stop (unpublish, grace
//! period, last drain, free the producers, tell the keeper), release (forget the id).
//!
//! Events travel `slots` (is the id live?) -> `producer` (admit, push into this thread's
//! ring) -> `collector` (drain, order, aggregate); this module ties them together. The
//! collector thread's body is `session/collect.rs`; the read path the management NIFs use
//! (summaries, merges, memory) is `session/read.rs`.

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::sync::Mutex;

use crate::aggregate::keyed::KeySource;
use crate::memory::Memory;
use crate::aggregate::Aggregator;
use crate::clock;
use crate::collector::Consumer;
use crate::frames::FrameTable;
use crate::collector::shards::Shards;
use crate::limit::Limiter;
use crate::options::Config;
use crate::producer::{Gate, Producer, ProducerRef};
use crate::quiesce::{self, Active, MAX_THREADS};
use crate::slots::{slot_of, Slots};

pub use crate::slots::MAX_SESSIONS;

mod collect;
mod read;

/// The slot table every callback reads first, and the registry that owns the sessions.
static SESSIONS: Slots<Session> = Slots::new();

/// True if `id` names a running session. Reads one static word: no session memory.
pub fn is_live(id: u64) -> bool {
    SESSIONS.is_live(id)
}

/// `Some(sample)` if `id` names a running session, with its `sample` option. Reads two static
/// words: no session memory.
#[inline]
pub fn live_sample(id: u64) -> Option<u64> {
    SESSIONS.live_sample(id)
}

/// The per-call rate of running session `id` (`sample => {calls, N}`: 1 call in N, 0 none),
/// for a callback that has just checked that it runs ([`live_sample`]). Reads one static word.
#[inline]
pub fn call_sample(id: u64) -> u32 {
    SESSIONS.call_sample(id)
}

/// Sets the per-call rate of running session `id` (`session_set_call_sample/2`; the rate is
/// checked by the caller). Returns false if `id` is not running.
pub fn set_call_sample(id: u64, rate: u32) -> bool {
    SESSIONS.set_call_sample(id, rate)
}

/// Whether running session `id`'s overhead fuse is armed, for a callback that has just
/// checked that it runs ([`live_sample`]). Reads one byte of the slot a callback reads anyway.
#[inline]
pub fn fused(id: u64) -> bool {
    SESSIONS.fused(id)
}

/// Arms running session `id`'s overhead fuse with `params`, or changes them
/// ([`crate::fuse::arm`]); `None` turns it off. False if `id` is not running or the
/// parameters are not valid (then nothing changed).
pub fn set_fuse(id: u64, params: Option<crate::fuse::Params>) -> bool {
    match params {
        Some(params) => SESSIONS.is_live(id) && crate::fuse::arm(id, params) && SESSIONS.set_fused(id, true),
        None => {
            let done = SESSIONS.set_fused(id, false);
            crate::fuse::disarm(id);
            done
        }
    }
}

/// The frame table of session `id`'s slot, for a callback that has just checked that `id` is
/// running ([`live_sample`]). Reads static memory only.
#[inline]
pub fn frames_of(id: u64) -> Option<&'static FrameTable> {
    FrameTable::of_slot(slot_of(id))
}

/// Whether running session `id` wants activity, the events other than calls and exits (see
/// [`set_activity`]).
#[inline]
pub fn wants_activity(id: u64) -> bool {
    SESSIONS.wants_activity(id)
}

/// Sets what [`wants_activity`] answers for session `id` (the keeper calls it before it sets any
/// trace flag). Returns false if `id` is not live.
pub fn set_activity(id: u64, activity: bool) -> bool {
    SESSIONS.set_activity(id, activity)
}

/// The running session `id`, borrowed for as long as the thread's active mark lives (that is
/// what keeps it, and its producers, from being freed).
#[inline]
pub fn live_session<'a>(id: u64, active: &'a Active<'_>) -> Option<&'a Session> {
    SESSIONS.live(id, active)
}

/// The session `id`, running or stopped, if it has not been released.
pub fn lookup(id: u64) -> Option<Arc<Session>> {
    SESSIONS.registry().get(id)
}

/// Every session not yet released.
pub fn all() -> Vec<Arc<Session>> {
    SESSIONS.registry().all()
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
    /// The reason's name, as the Erlang atom in summaries and in the keeper's
    /// `{ferrotrace_stopped, Id, Reason}` message.
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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stopped {
    /// Why.
    pub reason: StopReason,
    /// System time, milliseconds (on the session's clock, see [`SystemAnchor`]).
    pub at_ms: u64,
}

/// Called once, by the collector thread as its last act, when the session has stopped for any
/// reason: `(session id, how it stopped)`. The NIF layer sends the keeper a message from it.
pub type Notifier = Box<dyn FnOnce(u64, Stopped) + Send>;

/// Called by the collector thread with the functions the aggregator took for tail-recursive
/// loops since the last call (`(session id, functions)`), so that the keeper stops return
/// tracing them while the process's stack is still small. See [`Session::on_loops`].
pub type LoopNotifier = Box<dyn FnMut(u64, Vec<crate::event::Mfa>) + Send>;

pub use crate::producer::Accounting;

/// One tracing session: its producers (one per thread), its consumer side and its collector.
pub struct Session {
    /// The id Erlang uses as the tracer state.
    pub id: u64,
    /// Its options.
    pub config: Config,
    /// Raw bits of the keeper process's pid (an immediate), the Erlang side's handle.
    pub keeper: u64,
    /// System time at the start, milliseconds (on the anchor's clock, see [`SystemAnchor`]).
    pub started_ms: u64,
    pub(crate) started_ticks: u64,
    /// System time minus clock time (`clock::to_ns`) at the start: see
    /// [`Session::system_offset`].
    system_offset: SystemOffset,
    /// One entry per thread index; written by that thread only (creation), and swapped out by
    /// `halt` after a grace period.
    pub(crate) producers: Box<[AtomicPtr<Producer>]>,
    pub(crate) consumer: Mutex<Consumer>,
    /// Set once, at the end of `halt`; read without a lock, so readers holding the consumer
    /// lock never wait on a halt that waits for that lock.
    stopped: OnceLock<Stopped>,
    /// Serialises `halt`. Lock order: `halting`, then `consumer`.
    halting: Mutex<()>,
    /// With aggregator threads, the last read's merge, for the next read to be made in
    /// (`Aggregator::merged_reusing`): its memory stays mapped, as much as one aggregator's
    /// histograms, until the session is released. Locked only to take or put it back,
    /// never while waiting for another lock.
    spare_merge: Mutex<Option<Aggregator>>,
    collector: Mutex<Option<JoinHandle<()>>>,
    pub(crate) collector_exit: AtomicBool,
    /// Sampling and limits, read by every producer.
    pub(crate) gate: Gate,
    pub(crate) notifier: Mutex<Option<Notifier>>,
    pub(crate) loop_notifier: Mutex<Option<LoopNotifier>>,
    /// The capture gate (`capture`), shared with every aggregator; see `session/read.rs`.
    pub(crate) capture: Mutex<Option<Arc<crate::aggregate::capture::CaptureGate>>>,
    /// Threads whose event ring or term ring could not be allocated (their events are
    /// counted as dropped, or go without copies).
    ring_alloc_failures: AtomicU64,
    /// CPU time the collector thread has used, nanoseconds.
    pub(crate) collector_cpu_ns: AtomicU64,
    /// CPU time the aggregator threads (`aggregators` > 1) have used, nanoseconds.
    pub(crate) aggregators_cpu_ns: AtomicU64,
    /// The slot's births counted before the session started (`crate::births::total`).
    born_base: u64,
}

/// Where the session's clock (`clock::now`) meets system time: a tick and the system time
/// read beside it, nanoseconds since the epoch. Every time a session reports (`started_at`,
/// a call's `started_at`, the stop's) is that system time plus the ticks since, so all of
/// them are on the clock the anchor was read from. The NIF reads the VM's (what
/// `erlang:system_time/1` answers, and the Erlang side stamps its own records with): in the
/// VM's default mode it does not follow a step of the OS clock but slews toward it, so after
/// a step the OS's time and the VM's differ by seconds for minutes.
#[derive(Clone, Copy, Debug)]
pub struct SystemAnchor {
    /// A tick of `clock::now`.
    pub ticks: u64,
    /// System time at that tick, ns since the Unix epoch.
    pub system_ns: i128,
}

impl SystemAnchor {
    /// The OS's system time now (where no VM is there to ask: tests, benchmarks).
    pub fn os_now() -> Self {
        let ticks = clock::now();
        let system_ns = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i128);
        SystemAnchor { ticks, system_ns }
    }
}

/// The ns to add to a time on the session's clock (`clock::to_ns`) to get system time: the
/// one conversion every time a session reports goes through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SystemOffset(i128);

impl SystemOffset {
    /// System time in µs of `clock_ns` (a time on the session's clock, ns).
    pub fn us(self, clock_ns: u64) -> i64 {
        ((i128::from(clock_ns) + self.0) / 1000) as i64
    }

    /// System time in ms at `ticks`, never before the epoch.
    fn ms_at(self, ticks: u64) -> u64 {
        ((i128::from(clock::to_ns(ticks)) + self.0) / 1_000_000).max(0) as u64
    }
}

/// Why a session could not be created.
#[derive(Debug, PartialEq, Eq)]
pub enum StartError {
    /// All `MAX_SESSIONS` slots hold a session not yet released.
    TooManySessions,
    /// The collector thread could not be spawned.
    Thread,
}

/// Creates and publishes a session, and starts its collector thread. `notifier`, if any, is
/// called once when the session stops, whatever stops it; the times it reports are on the
/// clock of `anchor`.
/// Its threads are spawned from a thread of their own (`off_scheduler`), so that the
/// scheduler that asks keeps no destructor that would pin this library after a purge.
pub fn start(config: Config, keeper: u64, notifier: Option<Notifier>, anchor: SystemAnchor) -> Result<Arc<Session>, StartError> {
    crate::off_scheduler::run(move || start_here(config, keeper, notifier, anchor))
}

fn start_here(config: Config, keeper: u64, notifier: Option<Notifier>, anchor: SystemAnchor) -> Result<Arc<Session>, StartError> {
    let mut registry = SESSIONS.registry();
    let (slot, id) = registry.allocate().ok_or(StartError::TooManySessions)?;
    let frames = FrameTable::for_start(slot);
    let shards = Shards::new(config.aggregators, &format!("ferrotrace-{slot}"), |index, count| {
        Aggregator::new(config.max_functions, config.max_open_calls)
            .with_slowest(config.slowest)
            .with_recent(config.recent)
            .with_keys(config.keys)
            .with_shard(index, count)
            .with_frames(frames)
            .with_compensation(config.compensate)
            .with_trees(config.trees)
    })
    .map_err(|_| StartError::Thread)?;
    let started_ticks = clock::now();
    let system_offset = SystemOffset(anchor.system_ns - clock::to_ns(anchor.ticks) as i128);
    let session = Arc::new(Session {
        id,
        keeper,
        started_ms: system_offset.ms_at(started_ticks),
        started_ticks,
        system_offset,
        producers: (0..MAX_THREADS).map(|_| AtomicPtr::new(std::ptr::null_mut())).collect(),
        consumer: Mutex::new(Consumer::new(shards)),
        spare_merge: Mutex::new(None),
        gate: Gate {
            id,
            slot: SESSIONS.state(id),
            sample: config.sample,
            on_limit: config.on_limit,
            limiter: Limiter::new(config.max_events, config.max_rate.map(|(n, ms)| (n, clock::ns_to_ticks(ms * 1_000_000)))),
            limit_tripped: AtomicBool::new(false),
        },
        config,
        stopped: OnceLock::new(),
        halting: Mutex::new(()),
        collector: Mutex::new(None),
        collector_exit: AtomicBool::new(false),
        notifier: Mutex::new(notifier),
        loop_notifier: Mutex::new(None),
        capture: Mutex::new(None),
        ring_alloc_failures: AtomicU64::new(0),
        collector_cpu_ns: AtomicU64::new(0),
        aggregators_cpu_ns: AtomicU64::new(0),
        born_base: crate::births::total(id),
    });
    let collector = {
        let session = Arc::clone(&session);
        std::thread::Builder::new()
            .name(format!("ferrotrace-{slot}"))
            .spawn(move || session.run_collector())
            .map_err(|_| StartError::Thread)?
    };
    *session.collector.lock() = Some(collector);
    registry.publish(id, session.config.sample, session.config.call_sample, Arc::clone(&session));
    Ok(session)
}

impl Session {
    /// This thread's producer for the session, created on the thread's first event (once per
    /// thread and session: a bounded allocation, the ring allocated fallibly; if it fails,
    /// the thread's events are counted as dropped and no allocation is tried again).
    ///
    /// The active mark proves both that the session's producers stay allocated while the
    /// reference lives and, through its token, which thread is asking: only that thread ever
    /// gets a `ProducerRef` to this entry.
    #[inline]
    pub fn producer<'a>(&'a self, active: &'a Active<'_>) -> ProducerRef<'a> {
        let token = active.token();
        let entry = &self.producers[token.index()];
        let mut producer = entry.load(Ordering::Acquire);
        if producer.is_null() {
            let mut fresh = Box::new(Producer::new(self.config.ring_size));
            fresh.thread = token.index() as u32;
            let (args, keys) = (self.config.args.enabled, self.config.keys.source != KeySource::None);
            if (args || keys) && fresh.has_ring() {
                // A small copy is two 32-byte chunks (header, body). Per event cell: one copy
                // with `args` (or a key per call, half an event's worth); with both, a call
                // carries two copies, so three chunks per event on average.
                let chunks = if args && keys { 3 } else { 2 } * self.config.ring_size;
                fresh.term_lane = crate::term_lane::TermLane::new(chunks, self.config.args.max_term_bytes, args, keys);
                if fresh.term_lane.is_none() {
                    // The thread's events still go, without copies: counted as a failed ring.
                    self.ring_alloc_failures.fetch_add(1, Ordering::Relaxed);
                }
            }
            if !fresh.has_ring() {
                self.ring_alloc_failures.fetch_add(1, Ordering::Relaxed);
            }
            producer = Box::into_raw(fresh);
            // Only this thread writes this entry while the session is live (`halt` swaps it
            // out only after a grace period that waits for our active mark).
            entry.store(producer, Ordering::Release);
        }
        // SAFETY: non-null, allocated by `Box` above (now or on an earlier event of this
        // thread), and freed only by `halt` or `Drop` after a grace period that our active
        // mark holds back.
        ProducerRef { gate: &self.gate, producer: unsafe { &*producer }, _token: token }
    }

    /// What to add to a time on the session's clock (`clock::to_ns`) to get system
    /// time, taken once at the start, so that a call reads the same `started_at` every time
    /// it is asked for. Anchored at the session's start rather than the library's load: the
    /// clock's calibration error (a few ns per ms) then grows with the session's age only;
    /// an anchor taken once per load drifted 2.3 ms from the system clock after minutes of
    /// other sessions (`ferrotrace_slow_SUITE`, on a loaded CI run).
    pub fn system_offset(&self) -> SystemOffset {
        self.system_offset
    }

    /// When and why the session stopped, if it did.
    pub fn stopped(&self) -> Option<Stopped> {
        self.stopped.get().copied()
    }

    /// Milliseconds since the session started, up to its stop if stopped.
    pub fn elapsed_ms(&self) -> u64 {
        match self.stopped() {
            Some(stopped) => stopped.at_ms.saturating_sub(self.started_ms),
            None => self.system_ms_now().saturating_sub(self.started_ms),
        }
    }

    /// System time now, milliseconds, on the session's clock (its anchor's, see
    /// [`SystemAnchor`]): a step of the OS clock during the session moves none of its times.
    pub fn system_ms_now(&self) -> u64 {
        self.system_offset.ms_at(clock::now())
    }

    /// Bytes held by this session's rings now (the summary counts them in `Memory`).
    #[cfg(test)]
    pub fn ring_bytes(&self) -> usize {
        let _consumer = self.consumer.lock();
        let rings = self
            .producers
            .iter()
            // SAFETY: producers are freed only under the consumer lock, which we hold.
            .filter(|p| unsafe { p.load(Ordering::Acquire).as_ref() }.is_some_and(Producer::has_ring))
            .count();
        rings * (self.ring_cells() * std::mem::size_of::<crate::event::PackedEvent>())
    }

    /// Events one ring holds: `ring_size`, rounded up to a power of two as `ring::channel`
    /// allocates it.
    fn ring_cells(&self) -> usize {
        self.config.ring_size.next_power_of_two()
    }

    /// Sets what the collector calls with loops found at run time (see [`LoopNotifier`]).
    pub fn on_loops(&self, notify: LoopNotifier) {
        *self.loop_notifier.lock() = Some(notify);
    }

    /// Threads whose event ring or term ring could not be allocated.
    pub fn ring_alloc_failures(&self) -> u64 {
        self.ring_alloc_failures.load(Ordering::Relaxed)
    }

    /// CPU time the collector thread and the aggregator threads have used so far,
    /// nanoseconds (0 where unsupported).
    pub fn collector_cpu_ns(&self) -> u64 {
        self.collector_cpu_ns.load(Ordering::Relaxed) + self.aggregators_cpu_ns.load(Ordering::Relaxed)
    }

    /// Stops tracing (idempotent): callbacks answer `remove` from now on, the rings are
    /// drained one last time and freed with the term rings, the aggregator threads end,
    /// and what only a running session needs is freed: the open call frames (and the copies
    /// they hold), the process table, the collector's buffers. The figures stay readable
    /// until `release`; `open_calls` and `tracked_processes` keep their values at the stop
    /// (the calls still open then are neither paired nor counted as abandoned). If that
    /// freed [`TRIM_AT`] bytes or more, the allocator is asked to give its free memory back
    /// ([`trim_allocator`]).
    pub fn halt(&self, reason: StopReason) {
        let _halting = self.halting.lock();
        if self.stopped.get().is_some() {
            return;
        }
        SESSIONS.unpublish(self.id);
        // No callback can still be using a producer after this (`quiesce`'s argument).
        quiesce::wait_for_quiescence();
        let mut consumer = self.consumer.lock();
        let producers: Vec<Box<Producer>> = self
            .producers
            .iter()
            .map(|entry| entry.swap(std::ptr::null_mut(), Ordering::AcqRel))
            .filter(|p| !p.is_null())
            // SAFETY: allocated by `producer()` with `Box`; swapped out, so this is the only
            // owner, and unreachable from callbacks after the grace period above.
            .map(|p| unsafe { Box::from_raw(p) })
            .collect();
        consumer.retire(&producers);
        // Everything is routed: the aggregator threads finish and end.
        consumer.shards.stop();
        self.aggregators_cpu_ns.store(consumer.shards.threads_cpu_ns(), Ordering::Relaxed);
        // What goes now: the rings (the producers, still in this session's array for
        // `memory`'s count), the frames, the process table, the buffers.
        let freed = {
            // SAFETY: `producers` were swapped out of the array: `memory` sees none of them.
            let mut before = unsafe { consumer.memory(&self.producers) };
            before.add(&consumer.shards.aggregates().memory());
            let rings: usize = producers.iter().map(|p| self.producer_bytes(p)).sum();
            rings + before.collector + before.term_rings + before.open_frames + before.frame_copies + before.processes
        };
        consumer.shards.free_state();
        consumer.free_buffers();
        drop(producers);
        drop(consumer);
        let _ = self.stopped.set(Stopped { reason, at_ms: self.system_ms_now() });
        if freed >= TRIM_AT {
            trim_allocator();
        }
    }

    /// The rings of one producer being freed, in bytes.
    fn producer_bytes(&self, producer: &Producer) -> usize {
        let ring = producer.rx.lock().as_ref().map_or(0, |rx| rx.capacity() * std::mem::size_of::<crate::event::PackedEvent>());
        ring + producer.term_lane.as_ref().map_or(0, |lane| lane.bytes())
    }

    /// Stops the session and waits for its collector thread to end (it notifies the keeper
    /// before it ends).
    pub fn stop(&self, reason: StopReason) {
        self.halt(reason);
        self.collector_exit.store(true, Ordering::Release);
        let handle = self.collector.lock().take();
        if let Some(handle) = handle {
            handle.thread().unpark();
            let _ = handle.join();
        }
    }
}

/// The bridge to the consumer side: the collector thread (`session/collect.rs`) and the
/// readers (`session/read.rs`) both bring the aggregation up to date with `Consumer::collect`
/// under the consumer lock.
impl Session {
    /// Drains every ring and folds in the events older than the cutoff (all if `flush`).
    pub(crate) fn collect(&self, consumer: &mut Consumer, flush: bool) {
        // SAFETY: `consumer` is borrowed from this session's consumer lock, and these are its
        // producers: `Consumer::collect`'s contract.
        unsafe { consumer.collect(&self.producers, flush) }
    }

    /// The session's counters, the retired producers' and the live ones'.
    fn accounting(&self, consumer: &Consumer) -> Accounting {
        // SAFETY: as in `collect`.
        let mut accounting = unsafe { consumer.accounting(&self.producers) };
        accounting.born = crate::births::total(self.id).saturating_sub(self.born_base);
        accounting
    }

    /// What the consumer side holds (its buffers, the live producers' rings), measured.
    fn consumer_memory(&self, consumer: &Consumer) -> Memory {
        // SAFETY: as in `collect`.
        unsafe { consumer.memory(&self.producers) }
    }

    /// Aggregators: 1, or `aggregators`.
    pub fn aggregators(&self) -> usize {
        self.config.aggregators
    }
}

/// Stops the session and forgets it; its id is dead from now on. If the session held
/// [`TRIM_AT`] bytes or more, the allocator is then asked to give its free memory back
/// ([`trim_allocator`]), once the session is freed (unless a reader still holds it).
pub fn release(id: u64) -> bool {
    let Some(session) = lookup(id) else { return false };
    session.stop(StopReason::User);
    let held = session.memory().total() - FrameTable::BYTES;
    let removed = SESSIONS.registry().remove(id);
    drop(session);
    if removed && held >= TRIM_AT {
        trim_allocator();
    }
    removed
}

/// Bytes freed by a stop or a release from which the allocator is asked to give its free
/// memory back to the system ([`trim_allocator`]).
pub const TRIM_AT: usize = 8 << 20;

/// Asks the allocator to give the free memory it keeps back to the system. With glibc,
/// memory freed by another thread than the one that allocated it, and small blocks (under
/// the mmap threshold: term copies, frames, histograms), stays in malloc's arenas and in
/// the process's RSS after it is freed; `malloc_trim(0)` returns every arena's free pages.
/// It locks each arena in turn while it walks it (milliseconds for hundreds of MB), so it is
/// called off the schedulers only: by a stop or a release, which run on a dirty scheduler
/// or on the session's own threads. Does nothing on other C libraries, nor where the
/// environment variable `FERROTRACE_NO_TRIM` is set (to measure what it returns).
pub fn trim_allocator() {
    if std::env::var_os("FERROTRACE_NO_TRIM").is_some() {
        return;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu", not(miri)))]
    // SAFETY: `malloc_trim` takes the arenas' own locks; it may be called from any thread
    // at any time, and it only returns free pages to the kernel.
    unsafe {
        libc::malloc_trim(0);
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        for entry in self.producers.iter() {
            let producer = entry.swap(std::ptr::null_mut(), Ordering::AcqRel);
            if !producer.is_null() {
                // SAFETY: last owner of the session; a released session is unreachable from
                // callbacks (its tag is FREE and a grace period passed in `halt`).
                drop(unsafe { Box::from_raw(producer) });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Event, EventKind, Mfa};
    use crate::options::OnLimit;
    use crate::producer::Admission;
    use crate::quiesce::with_token;
    use std::time::Duration;

    const F: Mfa = Mfa { module: 11, function: 12, arity: 0 };

    #[derive(Debug, PartialEq, Eq)]
    enum Emitted {
        NotLive,
        /// `enabled` answered `discard` (sampled out): the VM makes no event, no return frame.
        Discarded,
        Traced,
    }

    /// What `enabled_call/3` then `trace/5` do with an event, minus term decoding.
    fn emit(session_id: u64, pid: u64, kind: EventKind) -> Emitted {
        with_token(|token| {
            let active = token.enter();
            let Some(session) = live_session(session_id, &active) else { return Emitted::NotLive };
            let producer = session.producer(&active);
            if kind == EventKind::Call && producer.sample_out(pid) {
                return Emitted::Discarded;
            }
            if kind == EventKind::Call && !crate::sampling::keep_call(call_sample(session_id)) {
                producer.refuse_call();
                return Emitted::Discarded;
            }
            let ts = clock::now();
            if producer.admit(pid, ts) == Admission::Take {
                producer.push(Event { ts, pid, mfa: F, kind });
            }
            Emitted::Traced
        })
        .unwrap()
    }

    fn run_threads(id: u64, threads: u64, calls: u64) {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                std::thread::spawn(move || {
                    for i in 0..calls {
                        // Shaped like local pid terms: consecutive numbers << 4 | 3.
                        let pid = (t * 1_000_000 + i) << 4 | 3;
                        if emit(id, pid, EventKind::Call) == Emitted::Traced {
                            emit(id, pid, EventKind::Return);
                        }
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    }

    fn start_test(config: Config) -> Arc<Session> {
        start(config, 0, None, SystemAnchor::os_now()).unwrap()
    }

    /// The session's accounting, after checking that it is exact: every event of `F`
    /// aggregated is in `F`'s figures, and every event seen was aggregated or dropped.
    fn exact_accounting(session: &Session) -> Accounting {
        let a = session.read(|aggregator, a| {
            assert_eq!(aggregator.function(&F).map_or(0, |f| f.calls + f.returns), a.aggregated);
            a
        });
        assert_eq!(a.seen, a.aggregated + a.dropped);
        a
    }

    #[test]
    #[cfg_attr(miri, ignore = "thousands of events: too slow under Miri (small_session_is_exact covers the path)")]
    fn max_events_with_drop_counts_the_excess_exactly() {
        let config = Config { max_events: Some(1_001), on_limit: OnLimit::Drop, duration_ms: None, ..Config::default() };
        let session = start_test(config);
        run_threads(session.id, 3, 5_000);
        session.stop(StopReason::User);
        let accounting = session.read(|_, a| a);
        assert_eq!(accounting.seen, 30_000);
        assert_eq!(accounting.aggregated + accounting.dropped, 1_001);
        assert_eq!(accounting.limited, 30_000 - 1_001);
        assert!(release(session.id));
    }

    #[test]
    #[cfg_attr(miri, ignore = "thousands of events: too slow under Miri (small_session_is_exact covers the path)")]
    fn max_events_with_stop_stops_the_session() {
        let config = Config { max_events: Some(500), duration_ms: None, ..Config::default() };
        let session = start_test(config);
        run_threads(session.id, 2, 5_000);
        assert!(!is_live(session.id), "tripped at once, before the collector noticed");
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(session.stopped().map(|s| s.reason), Some(StopReason::Limit));
        let accounting = session.read(|_, a| a);
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
    #[cfg_attr(miri, ignore = "thousands of events: too slow under Miri (small_session_is_exact covers the path)")]
    fn summaries_during_a_limit_stop_do_not_deadlock() {
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for _ in 0..20 {
                let config = Config { max_events: Some(2_000), duration_ms: None, ..Config::default() };
                let session = start_test(config);
                let reader = {
                    let session = Arc::clone(&session);
                    std::thread::spawn(move || {
                        while session.stopped().is_none() {
                            session.read(|_, _| session.elapsed_ms());
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

    /// Sampling decided at `enabled`: a sampled-out call is one event, counted there, and
    /// never has a return; kept processes keep every call with its return.
    #[test]
    #[cfg_attr(miri, ignore = "thousands of events: too slow under Miri (small_session_is_exact covers the path)")]
    fn sampling_keeps_whole_processes() {
        let config = Config { sample: 4, duration_ms: None, ..Config::default() };
        let session = start_test(config);
        run_threads(session.id, 2, 10_000);
        session.stop(StopReason::User);
        session.read(|aggregator, a| {
            assert_eq!(a.seen, a.aggregated + a.dropped + a.sampled_out);
            // Kept calls bring two events, sampled-out ones one: 20,000 calls in all.
            assert_eq!((a.aggregated + a.dropped) / 2 + a.sampled_out, 20_000, "{a:?}");
            // About a quarter kept; every kept call has its return.
            assert!(a.sampled_out > 20_000 / 2 && a.sampled_out < 20_000 * 7 / 8, "{a:?}");
            assert_eq!(aggregator.counters(), Default::default());
        });
        assert!(release(session.id));
    }

    /// Per-call sampling: every process keeps about 1 call in N, each with its return; a
    /// refused call is one event sampled out; the rate changes while the session runs, and 0
    /// refuses every call.
    #[test]
    #[cfg_attr(miri, ignore = "thousands of events: too slow under Miri (small_session_is_exact covers the path)")]
    fn call_sampling_keeps_every_process() {
        let config = Config { call_sample: 10, duration_ms: None, ..Config::default() };
        let session = start_test(config);
        assert_eq!(call_sample(session.id), 10);
        run_threads(session.id, 2, 10_000);
        session.read(|aggregator, a| {
            assert_eq!(a.seen, a.aggregated + a.dropped + a.sampled_out + a.limited, "{a:?}");
            assert_eq!((a.aggregated + a.dropped) / 2 + a.sampled_out, 20_000, "{a:?}");
            // About 2,000 kept (binomial, sd about 42).
            let kept = 20_000 - a.sampled_out;
            assert!((1_700..2_300).contains(&kept), "{a:?}");
            assert_eq!(aggregator.counters(), Default::default());
        });
        assert!(set_call_sample(session.id, 0));
        let before = session.read(|_, a| a.sampled_out);
        run_threads(session.id, 1, 1_000);
        assert_eq!(session.read(|_, a| a.sampled_out), before + 1_000);
        session.stop(StopReason::User);
        assert!(!set_call_sample(session.id, 1), "a stopped session's rate is not changed");
        assert!(release(session.id));
    }

    #[test]
    #[cfg_attr(miri, ignore = "thousands of events: too slow under Miri (small_session_is_exact covers the path)")]
    fn events_from_many_threads_are_counted_exactly_and_paired() {
        let config = Config { ring_size: 64, duration_ms: None, ..Config::default() };
        let session = start_test(config);
        let id = session.id;
        run_threads(id, 4, 10_000);
        session.stop(StopReason::User);
        assert_eq!(emit(id, 1, EventKind::Call), Emitted::NotLive, "a stopped session takes no events");
        session.read(|aggregator, accounting| {
            assert_eq!(accounting.seen, 80_000);
            assert_eq!(accounting.seen, accounting.aggregated + accounting.dropped);
            let f = aggregator.function(&F);
            let aggregated_calls = f.map_or(0, |f| f.calls + f.returns);
            assert_eq!(aggregated_calls, accounting.aggregated);
        });
        assert_eq!(session.ring_bytes(), 0, "stop frees the rings");
        assert!(release(id));
        assert!(lookup(id).is_none());
        assert!(!release(id));
    }

    /// Aggregation split over three threads (`aggregators`): the same exact accounting and
    /// pairing as one aggregator, read as one, and the aggregator threads' CPU counted.
    #[test]
    #[cfg_attr(miri, ignore = "thousands of events: too slow under Miri (small_split_session_is_exact covers the path)")]
    fn split_aggregation_is_exact_and_paired() {
        // Rings that hold every event: no drop, so every call pairs.
        let config = Config { aggregators: 3, ring_size: 1 << 16, duration_ms: None, ..Config::default() };
        let session = start_test(config);
        run_threads(session.id, 4, 10_000);
        let live = session.read(|aggregator, a| (aggregator.function(&F).map_or(0, |f| f.calls + f.returns), a.aggregated));
        assert_eq!(live.0, live.1, "a read while running merges every aggregator, up to date");
        session.stop(StopReason::User);
        session.read(|aggregator, a| {
            assert_eq!((a.seen, a.aggregated), (80_000, 80_000));
            let f = aggregator.function(&F).expect("F aggregated");
            assert_eq!(f.calls + f.returns, a.aggregated);
            assert_eq!(f.latency.len(), f.returns, "one latency per return");
            assert_eq!(aggregator.counters(), Default::default(), "every call paired");
            assert_eq!(aggregator.open_calls(), 0);
        });
        assert_eq!(session.aggregators(), 3);
        assert!(release(session.id));
    }

    /// The budget's read (`call_counts`) sums the aggregators without merging them: the
    /// same calls per function and accounting as the merged read, on one aggregator and on
    /// three, while running and once stopped.
    #[test]
    #[cfg_attr(miri, ignore = "thousands of events: too slow under Miri")]
    fn call_counts_match_the_merged_read() {
        for aggregators in [1, 3] {
            let config = Config { aggregators, ring_size: 1 << 16, duration_ms: None, ..Config::default() };
            let session = start_test(config);
            run_threads(session.id, 3, 5_000);
            for stop in [false, true] {
                if stop {
                    session.stop(StopReason::User);
                }
                let (accounting, counts, _untraced) = session.call_counts();
                let (merged_calls, merged_seen) = session.read(|aggregator, a| (aggregator.function(&F).map(|f| f.calls), a.seen));
                assert_eq!(counts, vec![(F, merged_calls.expect("F aggregated"))], "{aggregators} aggregators, stopped: {stop}");
                assert!(accounting.seen <= merged_seen, "read before the merged one");
                if stop {
                    assert_eq!((accounting.seen, counts[0].1), (30_000, 15_000));
                }
            }
            assert!(release(session.id));
        }
    }

    /// The split path at a size Miri can run: two aggregators, their thread and channel.
    #[test]
    fn small_split_session_is_exact() {
        let config = Config { aggregators: 2, ring_size: 16, duration_ms: None, ..Config::default() };
        let session = start_test(config);
        run_threads(session.id, 2, 40);
        session.stop(StopReason::User);
        assert!(session.spare_merge.lock().is_none());
        let first = exact_accounting(&session);
        // The read's merge is kept for the next read to be made in, which reads the same.
        assert!(session.spare_merge.lock().is_some(), "the merge is kept");
        assert_eq!(exact_accounting(&session), first);
        assert!(release(session.id));
    }

    /// With aggregator threads, a reader lets go of the consumer lock before it merges and
    /// reads: the collector (here, another thread taking that lock) goes on meanwhile, and the
    /// figures read are those the accounting counts. With one aggregator, which is the
    /// collector's own, the reader keeps the lock. The wait for the other thread is generous
    /// where it must come (it returns as soon as it does: 500 ms was missed once at load
    /// average 4 on two cores) and short where it must not (only a slow machine lengthens it).
    #[test]
    #[cfg_attr(miri, ignore = "timing: a 500 ms wait decides, and Miri runs the other threads far slower")]
    fn a_split_read_lets_the_collector_go_on() {
        for (aggregators, goes_on) in [(2, true), (1, false)] {
            let config = Config { aggregators, ring_size: 64, duration_ms: None, ..Config::default() };
            let session = start_test(config);
            run_threads(session.id, 1, 20);
            let (tx, rx) = std::sync::mpsc::channel();
            let other = Arc::clone(&session);
            let went_on = session.read(|aggregator, a| {
                assert_eq!(aggregator.function(&F).map_or(0, |f| f.calls + f.returns), a.aggregated);
                // Sent to no one once the read gave up waiting (one aggregator).
                std::thread::spawn(move || {
                    let _ = tx.send(other.backlog());
                });
                rx.recv_timeout(Duration::from_millis(if goes_on { 10_000 } else { 500 })).is_ok()
            });
            assert_eq!(went_on, goes_on, "aggregators {aggregators}");
            session.stop(StopReason::User);
            assert!(release(session.id));
        }
    }

    /// Reads, configuring reads and stops at once, with aggregator threads: a reader holds
    /// the aggregators without the consumer lock while the collector, the producers and a
    /// stop go on. Nothing waits forever, and the figures stay exact. (200 rounds passed
    /// when the read path changed; 10 here.)
    #[test]
    #[cfg_attr(miri, ignore = "tens of thousands of events: too slow under Miri")]
    fn reads_and_stops_at_once_with_aggregator_threads() {
        for round in 0..10u64 {
            let config = Config { aggregators: 3, ring_size: 256, duration_ms: None, ..Config::default() };
            let session = start_test(config);
            let id = session.id;
            let producers = std::thread::spawn(move || run_threads(id, 2, 20_000));
            let readers: Vec<_> = (0..2)
                .map(|_| {
                    let session = Arc::clone(&session);
                    std::thread::spawn(move || {
                        for _ in 0..20 {
                            session.with_aggregates(|aggregates| {
                                std::thread::sleep(Duration::from_millis(1));
                                aggregates.for_each_mut(|_| {});
                            });
                            session.read(|_, _| std::thread::sleep(Duration::from_millis(2)));
                            let _ = session.backlog();
                        }
                    })
                })
                .collect();
            std::thread::sleep(Duration::from_millis(round % 7 * 3));
            session.stop(StopReason::User);
            producers.join().unwrap();
            readers.into_iter().for_each(|reader| reader.join().unwrap());
            exact_accounting(&session);
            assert!(release(session.id));
        }
    }

    /// A loop found at run time by an aggregator thread (a function nested `LOOP_DEPTH` deep
    /// in one process) reaches the loop notifier once, though the collector no longer locks
    /// the aggregators at every collection to look for loops.
    #[test]
    #[cfg_attr(miri, ignore = "thousands of events: too slow under Miri")]
    fn a_loop_found_by_an_aggregator_thread_is_reported_once() {
        let depth = crate::aggregate::LOOP_DEPTH as u64;
        let config = Config { aggregators: 2, ring_size: 2 * depth as usize, duration_ms: None, ..Config::default() };
        let session = start_test(config);
        let (tx, rx) = std::sync::mpsc::channel();
        session.on_loops(Box::new(move |_, loops| drop(tx.send(loops))));
        let pid = 7 << 4 | 3;
        // One iteration a millisecond: the loop's calls span `LOOP_MIN_SPAN_NS`.
        for _ in 0..depth {
            assert_eq!(emit(session.id, pid, EventKind::Call), Emitted::Traced);
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(vec![F]));
        emit(session.id, pid, EventKind::Call);
        assert!(rx.recv_timeout(Duration::from_millis(200)).is_err(), "reported once");
        session.stop(StopReason::User);
        assert!(release(session.id));
    }

    /// A ring that cannot be allocated (here: a size no allocator can give) never aborts:
    /// that thread's events are counted as dropped, and allocation is tried once per thread.
    #[test]
    #[cfg_attr(miri, ignore = "thousands of events: too slow under Miri (small_session_is_exact covers the path)")]
    fn a_failed_ring_allocation_drops_and_counts() {
        let config = Config { ring_size: 1 << 58, duration_ms: None, ..Config::default() };
        let session = start_test(config);
        run_threads(session.id, 2, 1_000);
        assert_eq!(session.ring_alloc_failures(), 2, "one attempt per thread, not per event");
        assert_eq!(session.ring_bytes(), 0);
        session.stop(StopReason::User);
        let a = session.read(|_, a| a);
        assert_eq!(a.seen, 4_000);
        assert_eq!((a.aggregated, a.dropped), (0, 4_000));
        assert!(release(session.id));
    }

    /// The whole path (producer creation, push, grace periods, drain, free) at a size Miri
    /// can run: two threads, a small ring that overflows.
    #[test]
    fn small_session_is_exact() {
        let (threads, calls) = (2, 40);
        let config = Config { ring_size: 16, duration_ms: None, ..Config::default() };
        let session = start_test(config);
        run_threads(session.id, threads, calls);
        session.stop(StopReason::User);
        let a = exact_accounting(&session);
        assert_eq!(a.seen, 2 * threads * calls);
        assert!(release(session.id));
    }

    /// The session's times are its anchor's, not the OS clock's: a VM whose system time is
    /// 5 s behind the OS's (the OS clock stepped since the VM started) reads a start, a stop
    /// and a call's start (`system_offset`) 5 s behind too. Each is bounded by the OS
    /// clock read before and after it, less 5 s (a start takes seconds under Miri).
    #[test]
    fn times_are_on_the_anchor_clock() {
        const BEHIND_NS: i128 = 5_000_000_000;
        let ms = |ns: i128| (ns / 1_000_000) as u64;
        let os = SystemAnchor::os_now();
        let behind = SystemAnchor { ticks: os.ticks, system_ns: os.system_ns - BEHIND_NS };
        let session = start(Config { duration_ms: None, ..Config::default() }, 0, None, behind).unwrap();
        let started = SystemAnchor::os_now().system_ns - BEHIND_NS;
        assert!((ms(behind.system_ns)..=ms(started)).contains(&session.started_ms), "{} not in {}..={}",
                session.started_ms, ms(behind.system_ns), ms(started));
        // Through the conversion every reported call start takes (µs), back to ns.
        let call_ns = i128::from(session.system_offset().us(clock::to_ns(clock::now()))) * 1000;
        let called = SystemAnchor::os_now().system_ns - BEHIND_NS;
        assert!((started - 1_000_000..=called + 1_000_000).contains(&call_ns), "{call_ns} not in {started}..={called}");
        session.stop(StopReason::User);
        let stopped = SystemAnchor::os_now().system_ns - BEHIND_NS;
        let at_ms = session.stopped().expect("stopped").at_ms;
        assert!((ms(called) - 1..=ms(stopped) + 1).contains(&at_ms), "{at_ms} not in {}..={}", ms(called), ms(stopped));
        assert!(session.elapsed_ms() <= ms(stopped) - ms(behind.system_ns) + 1);
        assert!(release(session.id));
    }

    #[test]
    fn duration_stops_the_session_and_notifies() {
        let (tx, rx) = std::sync::mpsc::channel();
        let config = Config { duration_ms: Some(20), ..Config::default() };
        let notify: Notifier = Box::new(move |id, stopped| tx.send((id, stopped.reason)).unwrap());
        let session = start(config, 0, Some(notify), SystemAnchor::os_now()).unwrap();
        let (id, reason) = rx.recv_timeout(Duration::from_secs(5)).expect("the collector notified");
        assert_eq!((id, reason), (session.id, StopReason::Duration));
        assert_eq!(session.stopped().map(|s| s.reason), Some(StopReason::Duration));
        assert!(!is_live(session.id));
        assert!(release(session.id));
        assert!(rx.try_recv().is_err(), "notified once");
    }

    #[test]
    #[cfg_attr(miri, ignore = "thousands of events: too slow under Miri (small_session_is_exact covers the path)")]
    fn every_stop_notifies_once_with_its_reason() {
        for reason in [StopReason::User, StopReason::OwnerDown, StopReason::Unload] {
            let (tx, rx) = std::sync::mpsc::channel();
            let notify: Notifier = Box::new(move |_, stopped| tx.send(stopped.reason).unwrap());
            let session = start(Config { duration_ms: None, ..Config::default() }, 0, Some(notify), SystemAnchor::os_now()).unwrap();
            session.stop(reason);
            // `stop` joins the collector, which notified before it ended.
            assert_eq!(rx.try_recv(), Ok(reason));
            assert!(release(session.id));
            assert!(rx.try_recv().is_err(), "notified once");
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let notify: Notifier = Box::new(move |_, stopped| tx.send(stopped.reason).unwrap());
        let config = Config { max_events: Some(10), duration_ms: None, ..Config::default() };
        let session = start(config, 0, Some(notify), SystemAnchor::os_now()).unwrap();
        run_threads(session.id, 1, 100);
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok(StopReason::Limit));
        assert!(release(session.id));
    }

    /// Our own cost per event on the hot path, minus term decoding and the VM: what `trace/5`
    /// adds to the no-op floor. A benchmark (`cargo test --release -p ferrotrace_core --lib
    /// hot_path_cost -- --ignored --nocapture`); prints ns per event.
    #[test]
    #[ignore = "a benchmark"]
    fn hot_path_cost() {
        const EVENTS: u64 = 1_000_000;
        let config = Config { ring_size: 1 << 21, duration_ms: None, ..Config::default() };
        let session = start_test(config);
        let mut best = f64::MAX;
        for round in 0..5u64 {
            let start = std::time::Instant::now();
            for i in 0..EVENTS / 2 {
                let pid = (round << 32 | i) << 4 | 3;
                emit(session.id, pid, EventKind::Call);
                emit(session.id, pid, EventKind::Return);
            }
            best = best.min(start.elapsed().as_nanos() as f64 / EVENTS as f64);
            std::thread::sleep(Duration::from_millis(300));
        }
        session.stop(StopReason::User);
        let a = session.read(|_, a| a);
        assert_eq!(a.seen, 5 * EVENTS);
        println!("hot path: {best:.1} ns/event (best of 5 rounds of {EVENTS}; dropped {})", a.dropped);
        assert!(release(session.id));
    }

    /// What a session holds, by part: the parts add up to the total; the open frames and
    /// the copies they hold are counted; a stop frees the rings, the term rings, the open
    /// frames, the process table and the collector's buffers, keeping the figures (and the
    /// count of the calls open at the stop).
    #[test]
    #[cfg_attr(miri, ignore = "4 MB rings and 300 copies: slow under Miri")]
    fn memory_parts_add_up_and_a_stop_frees_all_but_the_figures() {
        const CALLS: u64 = 300;
        const BYTES: usize = 2_000;
        for aggregators in [1, 2] {
            let mut config = Config { aggregators, ring_size: 1 << 16, duration_ms: None, ..Config::default() };
            config.args = crate::term_format::ArgsConfig { enabled: true, max_term_bytes: 4_096 };
            let session = start_test(config);
            let id = session.id;
            // Calls that never return, each with a copy of its arguments: open frames.
            with_token(|token| {
                let active = token.enter();
                let session = live_session(id, &active).unwrap();
                let producer = session.producer(&active);
                for i in 0..CALLS {
                    let (pid, ts) = (i << 4 | 3, clock::now());
                    producer.copy_term(pid, ts, EventKind::Call, crate::term_lane::CopyOf::Args, |out| {
                        out[..BYTES].fill(7);
                        BYTES
                    });
                    assert_eq!(producer.admit(pid, ts), Admission::Take);
                    producer.push(Event { ts, pid, mfa: F, kind: EventKind::Call });
                }
            })
            .unwrap();
            let (open, running) = session.read_with_memory(|agg, a, memory| {
                assert_eq!((a.seen, a.aggregated, a.args_dropped), (CALLS, CALLS, 0));
                (agg.open_calls(), memory)
            });
            assert_eq!(open, CALLS as usize);
            assert_eq!(running.total(), running.parts().iter().map(|(_, bytes)| bytes).sum::<usize>());
            assert_eq!(running.ring_bytes, session.ring_bytes());
            assert!(running.ring_bytes >= (1 << 16) * 32, "{running:?}");
            assert!(running.term_rings >= 2 * (1 << 16) * 32, "{running:?}");
            assert!(running.open_frames >= CALLS as usize * 64, "{running:?}");
            // Each copy: its bytes, the `Arc`'s counts, the box of the event's copies.
            assert!(running.frame_copies >= CALLS as usize * BYTES, "{running:?}");
            assert!(running.frame_copies < CALLS as usize * (BYTES + 200), "{running:?}");
            // No call returned: the function's histograms hold nothing yet (`Compact`).
            assert!(running.histograms > 0 && running.tables > 0, "{running:?}");
            assert_eq!(running.frame_table, FrameTable::BYTES);
            session.stop(StopReason::User);
            let stopped = session.read_with_memory(|agg, _, memory| {
                assert_eq!(agg.open_calls(), CALLS as usize, "the calls open at the stop stay counted");
                assert_eq!(agg.counters().abandoned_calls, 0);
                memory
            });
            assert_eq!(stopped.total(), stopped.parts().iter().map(|(_, bytes)| bytes).sum::<usize>());
            let freed = [stopped.ring_bytes, stopped.term_rings, stopped.collector, stopped.processes, stopped.open_frames, stopped.frame_copies];
            assert_eq!(freed, [0; 6], "{stopped:?}");
            assert_eq!(stopped.histograms, running.histograms);
            assert_eq!(
                stopped.total(),
                stopped.histograms + stopped.intervals + stopped.slow_calls + stopped.keys + stopped.recent
                    + stopped.tables + stopped.merge + stopped.frame_table,
                "the figures alone"
            );
            assert!(release(id));
        }
    }

    #[test]
    fn stale_ids_are_not_live() {
        let session = start_test(Config::default());
        let id = session.id;
        assert!(is_live(id));
        assert!(!is_live(id + (1 << crate::slots::SLOT_BITS)), "another generation in the same slot");
        assert!(!is_live(u64::MAX), "out of range");
        assert!(release(id));
        assert!(!is_live(id));
        let next = start_test(Config::default());
        assert!(next.id > id, "ids grow");
        assert!(release(next.id));
    }
}
