//! Thread identity and quiescence for the hot path.
//!
//! A thread that runs trace callbacks gets a [`ThreadToken`] on first use, from a thread-local
//! (no destructor, so unloading the library never leaves a TLS destructor behind). The token
//! is `!Send` and `!Sync`: a `&ThreadToken` proves that the code holding it runs on the thread
//! the token's index belongs to, which is what makes that thread's producers safe to use.
//!
//! [`ThreadToken::enter`] marks the thread as inside a callback until the returned [`Active`]
//! guard drops. Entering nests, as crossbeam-epoch's `Local::pin` does: only the outermost
//! enter and leave touch the thread's activity word, which is odd while inside. The word lives
//! on the thread's own cache line, so entering and leaving write no line that another
//! scheduler writes.
//!
//! [`wait_for_quiescence`] is the grace period: once it returns, every callback that was inside
//! when it was called has left. It is used to free a stopped session's producers and to know
//! that every event stamped before a given instant is already in its ring.
//!
//! # Why a grace period cannot miss a thread
//! The unpublisher (`slots`) does: SeqCst store of the slot's tag (not LIVE any more), then
//! `wait_for_quiescence`: SeqCst load of `next` (threads seen), SeqCst load of each activity
//! word. A callback does: SeqCst `fetch_add` of `next` (first use only), SeqCst swap of its
//! activity word (enter), SeqCst load of the tag. All of these are in the single total order S
//! of SeqCst operations. If the callback's tag load read LIVE, it precedes the unpublisher's tag
//! store in S, so the callback's `fetch_add` and enter precede, in S, the unpublisher's loads of
//! `next` and of the activity word; a SeqCst load reads the last write before it in S, so the
//! unpublisher counts the thread and sees its odd word (or a later, even one, written by the
//! Release store of a leave that the Acquire re-load synchronises with). Either way the
//! callback's use of the session happens before the grace period ends. If instead the tag load
//! read the new tag, the callback never touches the session. A Relaxed `fetch_add` or load of
//! `next` would break this (the unpublisher could read a count that misses a thread that has
//! just taken its first index); x86 hid that because `lock xadd` is a full barrier.

use std::cell::Cell;
use std::marker::PhantomData;

use crossbeam_utils::CachePadded;

use crate::sync::{AtomicU64, AtomicUsize, Ordering};

/// Threads that can produce events (schedulers, dirty schedulers); later threads are refused.
pub const MAX_THREADS: usize = 512;

/// The activity words of up to `N` threads and the count of indices handed out.
pub(crate) struct Registry<const N: usize> {
    next: AtomicUsize,
    activity: [CachePadded<AtomicU64>; N],
}

impl<const N: usize> Registry<N> {
    #[cfg(not(loom))]
    pub(crate) const fn new() -> Self {
        Registry { next: AtomicUsize::new(0), activity: [const { CachePadded::new(AtomicU64::new(0)) }; N] }
    }

    #[cfg(loom)]
    pub(crate) fn new() -> Self {
        Registry {
            next: AtomicUsize::new(0),
            activity: std::array::from_fn(|_| CachePadded::new(AtomicU64::new(0))),
        }
    }

    /// A new thread index; `None` past `N`. SeqCst: see the module docs.
    pub(crate) fn take_index(&self) -> Option<usize> {
        let index = self.next.fetch_add(1, Ordering::SeqCst);
        (index < N).then_some(index)
    }

    /// Number of indices handed out (at most `N`). SeqCst: see the module docs.
    pub(crate) fn threads_seen(&self) -> usize {
        self.next.load(Ordering::SeqCst).min(N)
    }

    /// Marks thread `index` inside. The SeqCst swap orders the mark before the caller's later
    /// SeqCst load of a slot tag (module docs); it is also a full barrier on x86 (`xchg`),
    /// which `clock` relies on: a timestamp read after entering is taken after the mark is
    /// visible to the collector.
    #[inline]
    pub(crate) fn enter(&self, index: usize) {
        let word = &self.activity[index];
        // Only this thread writes its word: the Relaxed load reads its own last store.
        let value = word.load(Ordering::Relaxed);
        word.swap(value + 1, Ordering::SeqCst);
        crate::sync::seqcst_order_for_loom();
    }

    /// Marks thread `index` outside. Release: the callback's accesses to session memory
    /// happen before a grace period that Acquire-loads this value ends.
    #[inline]
    pub(crate) fn leave(&self, index: usize) {
        let word = &self.activity[index];
        let value = word.load(Ordering::Relaxed);
        word.store(value + 1, Ordering::Release);
    }

    /// Waits until every thread inside at the time of the call has left.
    pub(crate) fn wait_for_quiescence(&self) {
        crate::sync::seqcst_order_for_loom();
        let threads = self.threads_seen();
        let mut busy: Vec<(usize, u64)> = (0..threads)
            .filter_map(|t| {
                let value = self.activity[t].load(Ordering::SeqCst);
                (value & 1 == 1).then_some((t, value))
            })
            .collect();
        let mut step = 0u32;
        while !busy.is_empty() {
            busy.retain(|(t, seen)| self.activity[*t].load(Ordering::Acquire) == *seen);
            crate::sync::spin(step);
            step = step.saturating_add(1);
        }
    }
}

#[cfg(not(loom))]
static THREADS: Registry<MAX_THREADS> = Registry::new();

/// This thread's identity for the hot path: its index among producing threads, and how deep
/// it is inside callbacks. `!Send` and `!Sync`; reached only through [`with_token`].
pub struct ThreadToken {
    index: Cell<usize>,
    depth: Cell<u32>,
    _not_send: PhantomData<*const ()>,
}

const UNASSIGNED: usize = usize::MAX;

#[cfg(not(loom))]
thread_local! {
    static TOKEN: ThreadToken = const {
        ThreadToken { index: Cell::new(UNASSIGNED), depth: Cell::new(0), _not_send: PhantomData }
    };
}

/// Runs `f` with this thread's token, assigning the thread an index on first use; `None`
/// (and `f` is not run) past [`MAX_THREADS`] threads or while the thread-local is gone.
#[cfg(not(loom))]
#[inline]
pub fn with_token<R>(f: impl FnOnce(&ThreadToken) -> R) -> Option<R> {
    TOKEN.try_with(|token| {
        if token.index.get() == UNASSIGNED {
            // A refused thread keeps UNASSIGNED and asks again; `next` only grows past
            // MAX_THREADS by the number of such calls, far from overflowing.
            token.index.set(THREADS.take_index()?);
        }
        Some(f(token))
    })
    .ok()
    .flatten()
}

#[cfg(not(loom))]
impl ThreadToken {
    /// This thread's index, below [`MAX_THREADS`].
    #[inline]
    pub fn index(&self) -> usize {
        self.index.get()
    }

    /// Marks the thread as inside a callback until the guard drops. Nested enters are
    /// counted; only the outermost one writes the activity word.
    #[inline]
    pub fn enter(&self) -> Active<'_> {
        let depth = self.depth.get();
        if depth == 0 {
            THREADS.enter(self.index());
        }
        self.depth.set(depth + 1);
        Active { token: self }
    }

    /// True while the thread is inside (for tests and assertions).
    pub fn is_active(&self) -> bool {
        self.depth.get() > 0
    }
}

/// Proof that the current thread is marked inside a callback; session memory reached while it
/// lives stays allocated. Borrowed from the thread's token, so it is `!Send` too.
pub struct Active<'t> {
    token: &'t ThreadToken,
}

#[cfg(not(loom))]
impl Active<'_> {
    /// The token this mark belongs to.
    #[inline]
    pub fn token(&self) -> &ThreadToken {
        self.token
    }
}

#[cfg(not(loom))]
impl Drop for Active<'_> {
    #[inline]
    fn drop(&mut self) {
        let depth = self.token.depth.get() - 1;
        self.token.depth.set(depth);
        if depth == 0 {
            THREADS.leave(self.token.index());
        }
    }
}

/// Waits until every callback running at the time of the call has returned.
#[cfg(not(loom))]
pub fn wait_for_quiescence() {
    THREADS.wait_for_quiescence();
}

/// Number of thread indices handed out so far (bounded by [`MAX_THREADS`]).
#[cfg(not(loom))]
pub fn threads_seen() -> usize {
    THREADS.threads_seen()
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    #[test]
    fn thread_index_is_stable_per_thread_and_distinct_across_threads() {
        let mine = with_token(|t| t.index()).unwrap();
        assert_eq!(with_token(|t| t.index()), Some(mine));
        let other = std::thread::spawn(|| with_token(|t| t.index()).unwrap()).join().unwrap();
        assert_ne!(mine, other);
        assert!(threads_seen() > mine.max(other));
    }

    /// The thread stays active until the outermost guard drops (a second enter once flipped
    /// the word back to even, making the thread look idle while still inside).
    #[test]
    fn nested_enter_keeps_the_thread_active() {
        with_token(|token| {
            let word = &THREADS.activity[token.index()];
            let outer = token.enter();
            assert_eq!(word.load(Ordering::SeqCst) & 1, 1);
            {
                let _inner = token.enter();
                assert_eq!(word.load(Ordering::SeqCst) & 1, 1, "inner enter keeps it odd");
            }
            assert_eq!(word.load(Ordering::SeqCst) & 1, 1, "inner leave keeps it odd");
            assert!(token.is_active());
            drop(outer);
            assert_eq!(word.load(Ordering::SeqCst) & 1, 0);
            assert!(!token.is_active());
        })
        .unwrap();
    }

    #[test]
    fn quiescence_waits_for_a_nested_callback() {
        let inside = Arc::new(AtomicBool::new(false));
        let release = Arc::new(AtomicBool::new(false));
        let worker = {
            let (inside, release) = (Arc::clone(&inside), Arc::clone(&release));
            std::thread::spawn(move || {
                with_token(|token| {
                    let _outer = token.enter();
                    drop(token.enter());
                    inside.store(true, Ordering::SeqCst);
                    while !release.load(Ordering::SeqCst) {
                        std::thread::yield_now();
                    }
                })
            })
        };
        while !inside.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        let waiter = std::thread::spawn(wait_for_quiescence);
        std::thread::sleep(std::time::Duration::from_millis(if cfg!(miri) { 1 } else { 50 }));
        assert!(!waiter.is_finished(), "grace period ended while a callback ran");
        release.store(true, Ordering::SeqCst);
        waiter.join().unwrap();
        worker.join().unwrap();
    }
}

/// Loom model of the publish / quiescence / free protocol (`make loom`), on the real
/// `Registry`: a callback thread takes its first index, enters, checks the slot tag and reads
/// the session; the unpublisher stores the new tag, waits for quiescence and frees (writes) the
/// session. Loom reports a data race if any interleaving lets the read and the free overlap.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;

    const LIVE: u64 = 1;
    const STOPPED: u64 = 2;

    struct World {
        threads: Registry<2>,
        tag: AtomicU64,
        session: UnsafeCell<u64>,
    }

    fn callback(world: &World) -> Option<u64> {
        let index = world.threads.take_index()?;
        world.threads.enter(index);
        let seen = if world.tag.load(Ordering::SeqCst) == LIVE {
            // SAFETY: the point of the model: loom reports it if this read can race the free.
            Some(world.session.with(|p| unsafe { *p }))
        } else {
            None
        };
        world.threads.leave(index);
        seen
    }

    #[test]
    fn loom_grace_period_covers_a_thread_taking_its_first_index() {
        loom::model(|| {
            let world = Arc::new(World { threads: Registry::new(), tag: AtomicU64::new(LIVE), session: UnsafeCell::new(7) });
            let reader = {
                let world = Arc::clone(&world);
                loom::thread::spawn(move || callback(&world))
            };
            world.tag.store(STOPPED, Ordering::SeqCst);
            world.threads.wait_for_quiescence();
            // The free: a write no callback may overlap.
            // SAFETY: after the grace period no reader is inside (what loom checks).
            world.session.with_mut(|p| unsafe { *p = 0 });
            let seen = reader.join().unwrap();
            assert!(seen.is_none() || seen == Some(7), "a reader never sees freed memory");
        });
    }
}
