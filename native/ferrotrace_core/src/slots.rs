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
//! # Ids are never live again
//! Generations are wall-clock microseconds: each start takes `max(last + 1, now_us)`. Within a
//! load they strictly increase; across loads, a later load starts from the wall clock at its
//! own starts, which is past every generation of an earlier load as long as (1) the wall clock
//! does not step backwards across a reload and (2) an earlier load did not start more than one
//! session per microsecond on average (each start spawns a thread, which takes far longer).
//! So an id of an earlier load is never the id of a later session. Generations stay below
//! 2^53 (the year 2255), so ids stay positive and below 2^59: Erlang small integers.

use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::sync::Mutex;

use crate::quiesce::Active;
use crate::session::Session;

/// Sessions that can exist at once (running or stopped but not yet released).
pub const MAX_SESSIONS: usize = 64;
pub(crate) const SLOT_BITS: u32 = 6;
const GENERATION_BITS: u32 = 53;
/// Every id is below this bound: an Erlang small integer on 64-bit VMs.
pub const ID_LIMIT: u64 = 1 << (GENERATION_BITS + SLOT_BITS);

const FREE: u64 = 0;
const LIVE: u64 = 1;
const STOPPED: u64 = 2;

struct Slot {
    /// `id << 2 | state`; read by every callback, written only at start, stop and release.
    tag: AtomicU64,
    session: AtomicPtr<Session>,
    /// The session's `sample`, so that `enabled` callbacks of unsampled sessions decide
    /// without entering or touching session memory.
    sample: AtomicU64,
    /// False: the session wants call events and exits only (a `calls/2` session without
    /// other kinds), so the `enabled` callbacks discard every other tag.
    events: AtomicBool,
}

static SLOTS: [Slot; MAX_SESSIONS] = [const {
    Slot { tag: AtomicU64::new(FREE), session: AtomicPtr::new(ptr::null_mut()), sample: AtomicU64::new(1), events: AtomicBool::new(true) }
}; MAX_SESSIONS];

/// The registry proper: owns the sessions; the slot table mirrors it for the hot path.
pub(crate) struct Registry {
    pub(crate) sessions: [Option<Arc<Session>>; MAX_SESSIONS],
    last_generation: u64,
}

pub(crate) static REGISTRY: Mutex<Registry> =
    Mutex::new(Registry { sessions: [const { None }; MAX_SESSIONS], last_generation: 0 });

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

impl Registry {
    /// A free slot and a fresh id for it (see the module docs).
    pub(crate) fn allocate(&mut self) -> Option<(usize, u64)> {
        let slot = self.sessions.iter().position(Option::is_none)?;
        let generation = (self.last_generation + 1).max(wall_micros()).max(1);
        debug_assert!(generation < 1 << GENERATION_BITS);
        self.last_generation = generation;
        Some((slot, (generation & ((1 << GENERATION_BITS) - 1)) << SLOT_BITS | slot as u64))
    }

    /// Makes `session` reachable by id and live for the hot path.
    pub(crate) fn publish(&mut self, slot: usize, session: Arc<Session>) {
        SLOTS[slot].session.store(Arc::as_ptr(&session) as *mut Session, Ordering::Release);
        SLOTS[slot].sample.store(session.config.sample, Ordering::Release);
        SLOTS[slot].events.store(true, Ordering::Release);
        // SeqCst: the tag is the word grace periods are argued on (`quiesce`).
        SLOTS[slot].tag.store(tag(session.id, LIVE), Ordering::SeqCst);
        self.sessions[slot] = Some(session);
    }

    /// Forgets session `id`: its id is dead from now on. The caller has stopped it (its
    /// producers are freed), so no callback can still be using it.
    pub(crate) fn remove(&mut self, id: u64) -> bool {
        let slot = slot_of(id);
        if self.sessions[slot].as_ref().is_none_or(|s| s.id != id) {
            return false;
        }
        SLOTS[slot].tag.store(FREE, Ordering::SeqCst);
        SLOTS[slot].session.store(ptr::null_mut(), Ordering::Release);
        self.sessions[slot] = None;
        true
    }
}

/// Marks `id` stopped: from the next callback on, it is not live. SeqCst, for the grace period
/// that follows (`quiesce`).
pub(crate) fn unpublish(id: u64) {
    SLOTS[slot_of(id)].tag.store(tag(id, STOPPED), Ordering::SeqCst);
}

/// As `unpublish`, only if `id` is still live (a callback tripping a limit).
pub(crate) fn try_unpublish(id: u64) {
    let _ = SLOTS[slot_of(id)].tag.compare_exchange(tag(id, LIVE), tag(id, STOPPED), Ordering::SeqCst, Ordering::Relaxed);
}

/// True if `id` names a running session. Reads one static word: no session memory.
#[inline]
pub fn is_live(id: u64) -> bool {
    id < ID_LIMIT && SLOTS[slot_of(id)].tag.load(Ordering::SeqCst) == tag(id, LIVE)
}

/// `Some(sample)` if `id` names a running session, with that session's `sample` option.
/// Reads two static words: no session memory.
#[inline]
pub fn live_sample(id: u64) -> Option<u64> {
    // The SeqCst (so also Acquire) tag load reads the tag stored after `sample` in `publish`.
    is_live(id).then(|| SLOTS[slot_of(id)].sample.load(Ordering::Relaxed))
}

/// Whether running session `id` wants events other than calls and exits (true unless
/// [`set_events`] said otherwise). Read by the `enabled` callbacks after `live_sample`.
#[inline]
pub fn wants_events(id: u64) -> bool {
    SLOTS[slot_of(id)].events.load(Ordering::Acquire)
}

/// Sets what [`wants_events`] answers for session `id` (the keeper calls it before it sets
/// any trace flag). Returns false if `id` is not live.
pub fn set_events(id: u64, events: bool) -> bool {
    if !is_live(id) {
        return false;
    }
    SLOTS[slot_of(id)].events.store(events, Ordering::Release);
    true
}

/// The running session `id`, borrowed for as long as the thread's active mark lives (that is
/// what keeps the session's producers from being freed).
#[inline]
pub fn live_session<'a>(id: u64, _active: &'a Active<'_>) -> Option<&'a Session> {
    if !is_live(id) {
        return None;
    }
    let slot = &SLOTS[slot_of(id)];
    // SAFETY: the registry keeps the session alive until `remove`, which runs only after the
    // tag stopped being LIVE and a grace period passed (`Session::halt`). Our active mark was
    // set before the SeqCst tag load above read LIVE, so that grace period waits for us; the
    // Acquire load pairs with the Release store in `publish`, made before the tag's.
    unsafe { slot.session.load(Ordering::Acquire).as_ref() }
}

/// The session `id`, running or stopped, if it has not been released.
pub fn lookup(id: u64) -> Option<Arc<Session>> {
    let registry = REGISTRY.lock();
    registry.sessions[slot_of(id)].as_ref().filter(|s| s.id == id).cloned()
}

/// Every session not yet released.
pub fn all() -> Vec<Arc<Session>> {
    REGISTRY.lock().sessions.iter().flatten().cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_grow_across_starts_and_stay_small_integers() {
        let mut registry = Registry { sessions: [const { None }; MAX_SESSIONS], last_generation: 0 };
        let (slot, first) = registry.allocate().unwrap();
        let (_, second) = registry.allocate().unwrap();
        assert_eq!(slot_of(first), slot);
        assert!(second > first, "the same slot, a later generation");
        assert!(first > 0 && second < ID_LIMIT && ID_LIMIT <= 1 << 59);
        // A later load starts from the wall clock, past every earlier id.
        std::thread::sleep(std::time::Duration::from_millis(1));
        let mut reloaded = Registry { sessions: [const { None }; MAX_SESSIONS], last_generation: 0 };
        let (_, later) = reloaded.allocate().unwrap();
        assert!(later > second, "{later} after {second}");
    }
}
