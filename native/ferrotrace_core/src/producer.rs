//! A thread's side of a session: its ring, its counters, admission (sampling and limits).
//!
//! Each (thread, session) pair gets one [`Producer`], created on the thread's first event of
//! the session and reached through a [`ProducerRef`], which can only be made with the thread's
//! own token (`Session::producer`). Everything a callback writes is on lines that only its
//! thread writes: the ring's tail and cells, and the counters.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crossbeam_utils::CachePadded;
use crate::sync::Mutex;

use crate::term_lane::CopyOf;
use crate::event::{Event, EventKind, PackedEvent};
use crate::limit::{Leases, Limiter};
use crate::options::OnLimit;
use crate::ring::{self, RingConsumer, RingProducer};
use crate::slots::SlotState;
use crate::sync::UnsafeCell;

/// Event accounting: `seen = aggregated + dropped + sampled_out + limited`, exactly, in
/// every snapshot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Accounting {
    /// Events the callbacks handled for the session.
    pub seen: u64,
    /// Events taken in by the aggregator.
    pub aggregated: u64,
    /// Refused by a full ring, or by a ring that could not be allocated.
    pub dropped: u64,
    /// Not kept by `sample` (counted in `enabled` for a discarded call, else in `trace`); a
    /// call refused by `sample => {calls, N}` is one event (its return never exists).
    pub sampled_out: u64,
    /// Refused by `max_events` or `max_rate`.
    pub limited: u64,
    /// Events of kinds the session does not aggregate (outside the identity).
    pub ignored: u64,
    /// Copies of arguments, results or keys refused by a full term ring (`args`, `key`).
    pub args_dropped: u64,
    /// Calls refused in `enabled_call` because their process had `frames::MAX_FRAMES`
    /// return-trace frames open (outside the identity: the VM built no event for them).
    pub frames_refused: u64,
    /// Calls the session would have traced, refused by the overhead budget's fuse in
    /// `enabled_call` (`crate::fuse`; outside the identity, as `frames_refused`).
    pub fuse_refused: u64,
    /// Processes the fuse untraced (`remove`): their later calls reach no callback.
    pub untraced: u64,
    /// Processes (and ports) born with the session's flags: the VM asked `enabled` about
    /// each (`trace_status`, tracee `undefined`) as it gave them the session's tracer, which
    /// costs the node whether or not any of their events is traced (`crate::births`).
    /// Outside the identity.
    pub born: u64,
}

/// What every producer of one session checks before taking an event: the session's
/// `sample` and limits. Part of the session; producers only read it, and set
/// `limit_tripped` once.
pub(crate) struct Gate {
    /// The session's id and slot, to unpublish it when a limit stops it.
    pub(crate) id: u64,
    pub(crate) slot: &'static SlotState,
    /// Keep the events of 1 process in `sample`.
    pub(crate) sample: u64,
    pub(crate) on_limit: OnLimit,
    pub(crate) limiter: Limiter,
    /// Set by the first callback that hits a limit under `on_limit => stop`.
    pub(crate) limit_tripped: AtomicBool,
}

/// Counters written by exactly one thread: the producer's own cache line.
#[derive(Default)]
pub(crate) struct ProducerCounters {
    dropped: AtomicU64,
    ignored: AtomicU64,
    sampled_out: AtomicU64,
    limited: AtomicU64,
    leases: Leases,
    /// Copies refused by a full term ring (`args`, keys).
    copies_dropped: AtomicU64,
    /// Calls refused by the frame bound.
    frames_refused: AtomicU64,
    /// Calls refused, and processes untraced, by the fuse.
    fuse_refused: AtomicU64,
    untraced: AtomicU64,
}

/// One thread's side of a session.
pub(crate) struct Producer {
    /// `None` when the ring could not be allocated: the thread's events are counted as dropped
    /// (and allocation is not tried again).
    pub(crate) tx: Option<UnsafeCell<RingProducer<PackedEvent>>>,
    /// The consumer end, used by whoever holds the session's consumer lock.
    pub(crate) rx: CachePadded<Mutex<Option<RingConsumer<PackedEvent>>>>,
    /// The index of the thread that owns this producer (its events ran there).
    pub(crate) thread: u32,
    counters: CachePadded<ProducerCounters>,
    /// The term lane (a term ring and its encoding buffer), when the session copies
    /// arguments and results (`args`) or keys (`key`).
    pub(crate) term_lane: Option<crate::term_lane::TermLane>,
}

// SAFETY: `tx` and the producer side of `term_lane` (its ring's producer end and its scratch
// buffer) are the only parts that are not `Sync`; they are reached only through a `ProducerRef`,
// which is made only by `Session::producer` from the token of the thread whose index names this
// producer, and which (like the token) cannot leave that thread. So they are only ever used by
// one thread. The counters are atomics, `rx` and the term ring's consumer end are behind mutexes.
unsafe impl Sync for Producer {}

impl Producer {
    /// A producer with a ring of `ring_size` events, or none if it cannot be allocated.
    pub(crate) fn new(ring_size: usize) -> Producer {
        let (tx, rx) = match ring::channel(ring_size) {
            Ok((tx, rx)) => (Some(UnsafeCell::new(tx)), Some(rx)),
            Err(ring::AllocError) => (None, None),
        };
        Producer {
            tx,
            rx: CachePadded::new(Mutex::new(rx)),
            thread: 0,
            counters: CachePadded::new(ProducerCounters::default()),
            term_lane: None,
        }
    }

    /// True if the ring was allocated.
    pub(crate) fn has_ring(&self) -> bool {
        self.tx.is_some()
    }

    pub(crate) fn add_counters(&self, total: &mut Accounting) {
        let c = &self.counters;
        total.dropped += c.dropped.load(Ordering::Acquire);
        total.ignored += c.ignored.load(Ordering::Acquire);
        total.sampled_out += c.sampled_out.load(Ordering::Acquire);
        total.limited += c.limited.load(Ordering::Acquire);
        total.args_dropped += c.copies_dropped.load(Ordering::Acquire);
        total.frames_refused += c.frames_refused.load(Ordering::Acquire);
        total.fuse_refused += c.fuse_refused.load(Ordering::Acquire);
        total.untraced += c.untraced.load(Ordering::Acquire);
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

// `sample` hashes pids with the frame table's full-avalanche mix: pid terms differ only in a
// few middle bits, and a plain multiplication left those out of the bits `sample` reads.
use crate::frames::mix;

#[inline]
fn bump(counter: &AtomicU64) {
    // Single writer: a load and a store, no read-modify-write.
    counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Release);
}

/// The current thread's producer for one session, borrowed for one callback. Made only by
/// `Session::producer` with the thread's token, and `!Send` like it.
pub struct ProducerRef<'a> {
    pub(crate) gate: &'a Gate,
    pub(crate) producer: &'a Producer,
    pub(crate) _token: &'a crate::quiesce::ThreadToken,
}

impl ProducerRef<'_> {
    /// True if the session keeps the events of `pid` (by `sample`, a hash of the pid, so a
    /// process is kept or not as a whole). Does not count anything.
    #[inline]
    pub fn sampled_in(&self, pid: u64) -> bool {
        let sample = self.gate.sample;
        sample <= 1 || mix(pid).is_multiple_of(sample)
    }

    /// Counts one event of `pid` refused by `sample` where it is decided (an `enabled`
    /// callback answering `discard`). Returns true if `pid` is sampled out.
    #[inline]
    pub fn sample_out(&self, pid: u64) -> bool {
        if self.sampled_in(pid) {
            return false;
        }
        bump(&self.producer.counters.sampled_out);
        true
    }

    /// Applies `sample`, `max_events` and `max_rate` to an event of `pid` stamped `ts`,
    /// counting what it refuses. Under `on_limit => stop` the first refusal stops the
    /// session: from then on callbacks see it as not live and answer `remove`.
    #[inline]
    pub fn admit(&self, pid: u64, ts: u64) -> Admission {
        let gate = self.gate;
        if self.sample_out(pid) {
            return Admission::SampledOut;
        }
        if gate.limiter.is_limited() && !gate.limiter.admit(&self.producer.counters.leases, ts) {
            bump(&self.producer.counters.limited);
            if gate.on_limit == OnLimit::Stop && !gate.limit_tripped.load(Ordering::Relaxed) {
                gate.limit_tripped.store(true, Ordering::Release);
                gate.slot.try_unpublish(gate.id);
            }
            return Admission::Limited;
        }
        Admission::Take
    }

    /// Counts a call refused by the per-call rate (`sample => {calls, N}`, in `enabled_call`):
    /// one event sampled out, whose return never exists.
    #[inline]
    pub fn refuse_call(&self) {
        bump(&self.producer.counters.sampled_out);
    }

    /// Counts a call refused by the frame bound (in `enabled_call`).
    #[inline]
    pub fn refuse_frame(&self) {
        bump(&self.producer.counters.frames_refused);
    }

    /// Counts a call refused by the fuse (in `enabled_call`).
    #[inline]
    pub fn refuse_fused(&self) {
        bump(&self.producer.counters.fuse_refused);
    }

    /// The fuse untraced `pid` at `ts` (`enabled_call` answers `remove`): counted, and told to
    /// the aggregators, which forget its open calls as they do at an exit (its returns will
    /// not come) and keep it for the budget to trace again. True if the event entered the
    /// ring.
    pub fn untrace(&self, pid: u64, ts: u64) -> bool {
        bump(&self.producer.counters.untraced);
        self.push(Event { ts, pid, mfa: crate::event::NO_MFA, kind: EventKind::Untraced })
    }

    /// Pushes an event, counting a drop when the ring is full or missing. True if it entered
    /// the ring.
    #[inline]
    pub fn push(&self, event: Event) -> bool {
        let counters = &self.producer.counters;
        let Some(packed) = PackedEvent::pack(&event) else {
            bump(&counters.ignored);
            return false;
        };
        let Some(tx) = &self.producer.tx else {
            bump(&counters.dropped);
            return false;
        };
        // SAFETY: only the thread owning this producer has a `ProducerRef` to it (see the
        // `Sync` impl of `Producer`), and no other `&mut` to `tx` is live on this thread: it
        // is created here and dropped before returning, and `push` does not re-enter.
        let pushed = tx.with_mut(|tx| unsafe { (*tx).push(packed) });
        if pushed.is_err() {
            bump(&counters.dropped);
            return false;
        }
        true
    }

    /// Counts a copy refused by a full term ring.
    #[inline]
    pub(crate) fn count_copy_dropped(&self) {
        bump(&self.producer.counters.copies_dropped);
    }

    /// Counts an event of a kind the session does not aggregate.
    #[inline]
    pub fn ignore(&self) {
        bump(&self.producer.counters.ignored);
    }
}

/// The term lane (`args`, `key`, see `crate::term_lane`).
impl ProducerRef<'_> {
    /// True if the session copies arguments, results or keys (and this thread's term ring
    /// could be allocated).
    #[inline]
    pub fn copies_terms(&self) -> bool {
        self.producer.term_lane.is_some()
    }

    /// True if the session copies arguments and results (`args`).
    #[inline]
    pub fn copies_args(&self) -> bool {
        self.producer.term_lane.as_ref().is_some_and(|lane| lane.args)
    }

    /// True if the session copies calls' keys (`key`).
    #[inline]
    pub fn copies_keys(&self) -> bool {
        self.producer.term_lane.as_ref().is_some_and(|lane| lane.keys)
    }

    /// Copies a term for the event of `pid` stamped `ts`, as its `copy_of` (arguments or key): `encode` writes it
    /// into the buffer it is given (at most `max_term_bytes`) and returns the length. Counted
    /// as dropped when the term ring is full. Push the copies before their event.
    #[inline]
    pub fn copy_term(&self, pid: u64, ts: u64, kind: EventKind, copy_of: CopyOf, encode: impl FnOnce(&mut [u8]) -> usize) {
        let Some(lane) = &self.producer.term_lane else { return };
        // SAFETY: only the thread owning this producer has a `ProducerRef` to it (see the
        // `Sync` impl of `Producer`), and `push_copy` does not re-enter this producer.
        if !unsafe { lane.push_copy(pid, ts, kind, copy_of, encode) } {
            self.count_copy_dropped();
        }
    }
}
