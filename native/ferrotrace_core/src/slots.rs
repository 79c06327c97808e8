//! Session ids, slot tags and the registry: what the hot path reads first.
//!
//! The tracer state an Erlang user passes in `{tracer, ferrotrace_tracer, State}` is a small
//! integer, the session id: `generation << SLOT_BITS | slot`. It names a slot in a static
//! table whose tag word says whether that very id is live, so a stale id (a stopped or
//! released session, or one from an earlier load of the library) is recognised without
//! touching any reference count. The hot path only *reads* the slot table; the rest of a
//! session is reached through the slot's pointer, valid while the reading thread is marked
//! active (see [`crate::quiesce`]).
//!
//! The table and the registry that owns what it points at ([`Slots`]) are generic over the
//! published type, so that this module, first in the order events travel, knows nothing of
//! sessions: `session` declares the one instance, for `Session`. What does not depend on that
//! type (the tag, `sample`, `events`) is a `SlotState`, through which a session's producers
//! stop it when a limit trips without naming `Session` either.
//!
//! # Ids are never live again
//! Generations are wall-clock microseconds: each start takes `max(last + 1, now_us)`. Within a
//! load they strictly increase; across loads, a later load starts from the wall clock at its
//! own starts, which is past every generation of an earlier load as long as (1) the wall clock
//! does not step backwards across a reload and (2) an earlier load did not start more than one
//! session per microsecond on average (each start spawns a thread, which takes far longer).
//! So an id of an earlier load is never the id of a later session. Generations stay below
//! 2^53 (the year 2255), so ids stay positive and below 2^59: Erlang small integers.

use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use crossbeam_utils::CachePadded;

use crate::quiesce::{self, Active};
use crate::sync::Mutex;

/// Sessions that can exist at once (running or stopped but not yet released).
pub const MAX_SESSIONS: usize = 64;
pub(crate) const SLOT_BITS: u32 = 6;
const GENERATION_BITS: u32 = 53;
/// Every id is below this bound: an Erlang small integer on 64-bit VMs.
pub const ID_LIMIT: u64 = 1 << (GENERATION_BITS + SLOT_BITS);

const FREE: u64 = 0;
const LIVE: u64 = 1;
const STOPPED: u64 = 2;

/// The words of a slot that the hot path reads and that do not depend on what is published.
pub(crate) struct SlotState {
    /// `id << 2 | state`; read by every callback, written only at start, stop and release.
    tag: AtomicU64,
    /// The session's `sample`, so that `enabled` callbacks of unsampled sessions decide
    /// without entering or touching session memory.
    sample: AtomicU64,
    /// False: the session wants call events and exits only (a `calls/2` session without
    /// activity, the other kinds), so the `enabled` callbacks discard every other tag.
    activity: AtomicBool,
    /// The session's per-call rate (`sample => {calls, N}`: keep 1 call in N; 0: none; 1:
    /// all), read by `enabled_call`; written at publish and by `set_call_sample` only.
    call_sample: AtomicU32,
    /// True while the session's overhead fuse is armed (`crate::fuse`): `enabled_call`
    /// charges its calls. Here, on the line a callback reads anyway, so that a session
    /// without a budget pays one byte's load for the fuse.
    fused: AtomicBool,
}

struct Slot<T> {
    state: SlotState,
    /// What the live id names; set before the tag says LIVE, cleared after it says FREE.
    published: AtomicPtr<T>,
}

// The tag, `sample`, `activity`, `call_sample`, `fused` and the pointer of a slot share 32 bytes, as when the table held
// sessions only, and the table starts on a cache line (below): a callback reads one line.
const _: () = assert!(std::mem::size_of::<Slot<()>>() == 32);

/// The slot table the hot path reads, and the registry that owns what it points at: one
/// static instance per published type (`session` declares the one for `Session`).
#[repr(C)]
pub struct Slots<T> {
    /// First, in a struct that `CachePadded` aligns to a cache line.
    slots: [Slot<T>; MAX_SESSIONS],
    /// On lines of its own: taking the lock writes no line a callback reads.
    registry: CachePadded<Mutex<Entries<T>>>,
}

/// What the registry owns: `(id, value)` per slot, and the last generation handed out.
struct Entries<T> {
    entries: [Option<(u64, Arc<T>)>; MAX_SESSIONS],
    last_generation: u64,
}

/// The registry proper, locked: owns the published values; the slot table mirrors it for the
/// hot path. Made only by [`Slots::registry`], so each table has exactly one.
pub(crate) struct Registry<'a, T> {
    table: &'a [Slot<T>; MAX_SESSIONS],
    locked: MutexGuard<'a, Entries<T>>,
}

#[inline]
pub(crate) fn slot_of(id: u64) -> usize {
    (id & (MAX_SESSIONS as u64 - 1)) as usize
}

#[inline]
fn tag(id: u64, state: u64) -> u64 {
    id << 2 | state
}

fn wall_micros() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}

impl SlotState {
    /// Marks `id` stopped: from the next callback on, it is not live. SeqCst, for the grace
    /// period that follows (`quiesce`).
    pub(crate) fn unpublish(&self, id: u64) {
        self.tag.store(tag(id, STOPPED), Ordering::SeqCst);
    }

    /// As `unpublish`, only if `id` is still live (a callback tripping a limit).
    pub(crate) fn try_unpublish(&self, id: u64) {
        let _ = self.tag.compare_exchange(tag(id, LIVE), tag(id, STOPPED), Ordering::SeqCst, Ordering::Relaxed);
    }
}

impl<T: Send + Sync> Slots<T> {
    /// An empty table.
    #[allow(clippy::new_without_default)]
    pub const fn new() -> Slots<T> {
        Slots {
            slots: [const {
                Slot {
                    state: SlotState {
                        tag: AtomicU64::new(FREE),
                        sample: AtomicU64::new(1),
                        activity: AtomicBool::new(true),
                        call_sample: AtomicU32::new(1),
                        fused: AtomicBool::new(false),
                    },
                    published: AtomicPtr::new(ptr::null_mut()),
                }
            }; MAX_SESSIONS],
            registry: CachePadded::new(Mutex::new(Entries { entries: [const { None }; MAX_SESSIONS], last_generation: 0 })),
        }
    }

    /// The registry, locked.
    pub(crate) fn registry(&self) -> Registry<'_, T> {
        Registry { table: &self.slots, locked: self.registry.lock() }
    }

    /// The words of `id`'s slot that do not depend on `T` (a session's producers stop it
    /// through them).
    pub(crate) fn state(&self, id: u64) -> &SlotState {
        &self.slots[slot_of(id)].state
    }

    /// Marks `id` stopped: see [`SlotState::unpublish`].
    pub(crate) fn unpublish(&self, id: u64) {
        self.state(id).unpublish(id);
    }

    /// True if `id` names a running session. Reads one static word: no session memory.
    #[inline]
    pub fn is_live(&self, id: u64) -> bool {
        id < ID_LIMIT && self.slots[slot_of(id)].state.tag.load(Ordering::SeqCst) == tag(id, LIVE)
    }

    /// `Some(sample)` if `id` names a running session, with that session's `sample` option.
    /// Reads two static words: no session memory.
    #[inline]
    pub fn live_sample(&self, id: u64) -> Option<u64> {
        // The SeqCst (so also Acquire) tag load reads the tag stored after `sample` in `publish`.
        self.is_live(id).then(|| self.slots[slot_of(id)].state.sample.load(Ordering::Relaxed))
    }

    /// Whether running session `id` wants activity, the events other than calls and exits
    /// (true unless [`set_activity`](Slots::set_activity) said otherwise). Read by the `enabled` callbacks
    /// after `live_sample`.
    #[inline]
    pub fn wants_activity(&self, id: u64) -> bool {
        self.slots[slot_of(id)].state.activity.load(Ordering::Acquire)
    }

    /// Sets what [`wants_activity`](Slots::wants_activity) answers for session `id` (the keeper
    /// calls it before it sets any trace flag). Returns false if `id` is not live.
    pub fn set_activity(&self, id: u64, activity: bool) -> bool {
        if !self.is_live(id) {
            return false;
        }
        self.slots[slot_of(id)].state.activity.store(activity, Ordering::Release);
        true
    }

    /// The per-call rate of session `id`'s slot (see `SlotState::call_sample`), for a callback
    /// that has just checked that `id` is running (`live_sample`), or a read of a session not
    /// yet released (its slot is still its own).
    #[inline]
    pub fn call_sample(&self, id: u64) -> u32 {
        self.slots[slot_of(id)].state.call_sample.load(Ordering::Relaxed)
    }

    /// Sets the per-call rate of running session `id`, under the registry's lock so that a
    /// session stopped and released meanwhile cannot lend its slot's word to the next one.
    /// Returns false if `id` is not running.
    pub fn set_call_sample(&self, id: u64, rate: u32) -> bool {
        let registry = self.registry();
        if !self.is_live(id) || registry.locked.entries[slot_of(id)].as_ref().is_none_or(|(own, _)| *own != id) {
            return false;
        }
        // Relaxed: the rate is a hint each call reads afresh; no other memory goes with it.
        self.slots[slot_of(id)].state.call_sample.store(rate, Ordering::Relaxed);
        true
    }

    /// Whether running session `id`'s fuse is armed (see `SlotState::fused`), for a callback
    /// that has just checked that `id` is running.
    #[inline]
    pub fn fused(&self, id: u64) -> bool {
        self.slots[slot_of(id)].state.fused.load(Ordering::Relaxed)
    }

    /// Says whether running session `id`'s fuse is armed, under the registry's lock (as
    /// [`Slots::set_call_sample`]). Returns false if `id` is not running.
    pub fn set_fused(&self, id: u64, fused: bool) -> bool {
        let registry = self.registry();
        if !self.is_live(id) || registry.locked.entries[slot_of(id)].as_ref().is_none_or(|(own, _)| *own != id) {
            return false;
        }
        self.slots[slot_of(id)].state.fused.store(fused, Ordering::Release);
        true
    }

    /// The running session `id`, borrowed for as long as both the table and the thread's
    /// active mark live (the mark is what keeps the registry from letting go of it).
    #[inline]
    pub fn live<'a>(&'a self, id: u64, _active: &'a Active<'_>) -> Option<&'a T> {
        if !self.is_live(id) {
            return None;
        }
        let slot = &self.slots[slot_of(id)];
        // SAFETY: only this table's registry writes the pointer (the field is private to this
        // module, and `registry()` is the only way to one): `publish` stores it from the `Arc`
        // the registry then keeps, and `remove` lets go of that `Arc` only after the tag
        // stopped being LIVE and a grace period passed. Our active mark was set before the
        // SeqCst tag load above read LIVE, so that grace period waits for us (`quiesce`'s
        // argument), and `&'a self` keeps the registry itself alive. The Acquire load pairs
        // with the Release store in `publish`, made before the tag's. `T: Sync`, so the shared
        // reference may be used on this thread.
        unsafe { slot.published.load(Ordering::Acquire).as_ref() }
    }
}

impl<T> Registry<'_, T> {
    /// A free slot and a fresh id for it (see the module docs).
    pub(crate) fn allocate(&mut self) -> Option<(usize, u64)> {
        let slot = self.locked.entries.iter().position(Option::is_none)?;
        let generation = (self.locked.last_generation + 1).max(wall_micros()).max(1);
        debug_assert!(generation < 1 << GENERATION_BITS);
        self.locked.last_generation = generation;
        Some((slot, (generation & ((1 << GENERATION_BITS) - 1)) << SLOT_BITS | slot as u64))
    }

    /// Makes `value` reachable by `id` (from `allocate`) and live for the hot path, with the
    /// session's `sample` (per process) and `call_sample` (per call).
    pub(crate) fn publish(&mut self, id: u64, sample: u64, call_sample: u32, value: Arc<T>) {
        let slot = &self.table[slot_of(id)];
        debug_assert!(self.locked.entries[slot_of(id)].is_none());
        slot.published.store(Arc::as_ptr(&value) as *mut T, Ordering::Release);
        slot.state.sample.store(sample, Ordering::Release);
        slot.state.activity.store(true, Ordering::Release);
        slot.state.call_sample.store(call_sample, Ordering::Release);
        slot.state.fused.store(false, Ordering::Release);
        // SeqCst: the tag is the word grace periods are argued on (`quiesce`).
        slot.state.tag.store(tag(id, LIVE), Ordering::SeqCst);
        self.locked.entries[slot_of(id)] = Some((id, value));
    }

    /// Forgets `id`: it is dead from now on. Lets go of the value only after a grace period,
    /// so that no callback can still be using it (`Slots::live`'s argument); for a session
    /// stopped before (`Session::halt`, which had its own) this one waits for nobody.
    pub(crate) fn remove(&mut self, id: u64) -> bool {
        let index = slot_of(id);
        if self.locked.entries[index].as_ref().is_none_or(|(own, _)| *own != id) {
            return false;
        }
        let slot = &self.table[index];
        slot.state.tag.store(FREE, Ordering::SeqCst);
        quiesce::wait_for_quiescence();
        slot.published.store(ptr::null_mut(), Ordering::Release);
        self.locked.entries[index] = None;
        true
    }

    /// The value `id`, running or stopped, if it has not been removed.
    pub(crate) fn get(&self, id: u64) -> Option<Arc<T>> {
        self.locked.entries[slot_of(id)].as_ref().filter(|(own, _)| *own == id).map(|(_, value)| Arc::clone(value))
    }

    /// Every value not yet removed.
    pub(crate) fn all(&self) -> Vec<Arc<T>> {
        self.locked.entries.iter().flatten().map(|(_, value)| Arc::clone(value)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_grow_across_starts_and_stay_small_integers() {
        let table: Slots<()> = Slots::new();
        let (slot, first) = table.registry().allocate().unwrap();
        let (_, second) = table.registry().allocate().unwrap();
        assert_eq!(slot_of(first), slot);
        assert!(second > first, "the same slot, a later generation");
        assert!(first > 0 && second < ID_LIMIT && ID_LIMIT <= 1 << 59);
        // A later load starts from the wall clock, past every earlier id.
        std::thread::sleep(std::time::Duration::from_millis(1));
        let reloaded: Slots<()> = Slots::new();
        let (_, later) = reloaded.registry().allocate().unwrap();
        assert!(later > second, "{later} after {second}");
    }

    /// `remove` without a stop first (no caller's discipline) still waits for a callback that
    /// holds the value: under Miri, a read after a free would be reported.
    #[test]
    fn remove_waits_for_a_callback_using_the_value() {
        static TABLE: Slots<AtomicU64> = Slots::new();
        let (_, id) = TABLE.registry().allocate().unwrap();
        TABLE.registry().publish(id, 1, 1, Arc::new(AtomicU64::new(7)));
        let removed = AtomicBool::new(false);
        std::thread::scope(|scope| {
            quiesce::with_token(|token| {
                let active = token.enter();
                let value = TABLE.live(id, &active).expect("live");
                scope.spawn(|| {
                    assert!(TABLE.registry().remove(id));
                    removed.store(true, Ordering::SeqCst);
                });
                // Wait until `remove` has freed the tag: it is then in its grace period.
                while TABLE.is_live(id) {
                    std::thread::yield_now();
                }
                // Give a wrong `remove` time to return (a correct one never does while we are
                // inside, so no load on the machine can fail this).
                let until = std::time::Instant::now() + std::time::Duration::from_millis(20);
                while !removed.load(Ordering::SeqCst) && std::time::Instant::now() < until {
                    std::thread::yield_now();
                }
                assert!(!removed.load(Ordering::SeqCst), "remove returned while a callback was inside");
                assert_eq!(value.load(Ordering::Relaxed), 7);
            })
            .expect("a thread token");
        });
        assert!(removed.load(Ordering::SeqCst));
        assert!(TABLE.registry().get(id).is_none() && TABLE.live_sample(id).is_none());
    }
}
