//! Thread identity and quiescence for the hot path.
//!
//! Each thread that runs a trace callback gets a small index on first use (a thread-local
//! `Cell`, no destructor, so unloading the library never leaves a TLS destructor behind). While
//! inside a callback the thread's activity counter is odd; it lives on the thread's own cache
//! line, so entering and leaving write no line that another scheduler writes.
//!
//! `wait_for_quiescence` is the grace period: once it returns, every callback that was running
//! when it was called has finished. It is used to free a stopped session's rings safely and to
//! know that every event stamped before a given instant is already in its ring.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crossbeam_utils::CachePadded;

/// Threads that can produce events (schedulers, dirty schedulers); later threads are refused.
pub const MAX_THREADS: usize = 512;

static NEXT_THREAD: AtomicUsize = AtomicUsize::new(0);
static ACTIVITY: [CachePadded<AtomicU64>; MAX_THREADS] =
    [const { CachePadded::new(AtomicU64::new(0)) }; MAX_THREADS];

thread_local! {
    static THREAD_INDEX: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// This thread's index, assigned on first call; `None` past `MAX_THREADS` threads.
#[inline]
pub fn thread_index() -> Option<usize> {
    let index = THREAD_INDEX.with(|cell| {
        let index = cell.get();
        if index != usize::MAX {
            return index;
        }
        let index = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
        cell.set(index);
        index
    });
    (index < MAX_THREADS).then_some(index)
}

/// Number of thread indices handed out so far (bounded by `MAX_THREADS`).
pub fn threads_seen() -> usize {
    NEXT_THREAD.load(Ordering::Relaxed).min(MAX_THREADS)
}

/// Marks the current thread as inside a callback until dropped.
pub struct Active {
    counter: &'static AtomicU64,
}

impl Active {
    /// Enters. The SeqCst swap orders this mark before every later load of session state,
    /// pairing with the SeqCst unpublish and loads in `wait_for_quiescence`.
    #[inline]
    pub fn enter(thread: usize) -> Active {
        let counter: &'static AtomicU64 = &ACTIVITY[thread];
        let value = counter.load(Ordering::Relaxed);
        counter.swap(value + 1, Ordering::SeqCst);
        Active { counter }
    }
}

impl Drop for Active {
    #[inline]
    fn drop(&mut self) {
        let value = self.counter.load(Ordering::Relaxed);
        self.counter.store(value + 1, Ordering::Release);
    }
}

/// Waits until every callback running at the time of the call has returned.
pub fn wait_for_quiescence() {
    let threads = threads_seen();
    let mut busy: Vec<(usize, u64)> = (0..threads)
        .filter_map(|t| {
            let value = ACTIVITY[t].load(Ordering::SeqCst);
            (value & 1 == 1).then_some((t, value))
        })
        .collect();
    let mut spins = 0u32;
    while !busy.is_empty() {
        busy.retain(|(t, seen)| ACTIVITY[*t].load(Ordering::Acquire) == *seen);
        spins += 1;
        if spins < 64 {
            std::hint::spin_loop();
        } else {
            // A callback takes nanoseconds; one still running was descheduled by the OS.
            std::thread::yield_now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    #[test]
    fn thread_index_is_stable_per_thread_and_distinct_across_threads() {
        let mine = thread_index().unwrap();
        assert_eq!(thread_index(), Some(mine));
        let other = std::thread::spawn(|| thread_index().unwrap()).join().unwrap();
        assert_ne!(mine, other);
    }

    #[test]
    fn quiescence_waits_for_a_running_callback() {
        let inside = Arc::new(AtomicBool::new(false));
        let release = Arc::new(AtomicBool::new(false));
        let worker = {
            let (inside, release) = (Arc::clone(&inside), Arc::clone(&release));
            std::thread::spawn(move || {
                let _active = Active::enter(thread_index().unwrap());
                inside.store(true, Ordering::SeqCst);
                while !release.load(Ordering::SeqCst) {
                    std::hint::spin_loop();
                }
            })
        };
        while !inside.load(Ordering::SeqCst) {}
        let waiter = std::thread::spawn(wait_for_quiescence);
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!waiter.is_finished(), "grace period ended while a callback ran");
        release.store(true, Ordering::SeqCst);
        waiter.join().unwrap();
        worker.join().unwrap();
    }
}
