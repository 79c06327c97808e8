//! The synchronisation primitives the lock-free parts ([`crate::ring`], [`crate::quiesce`]) are
//! written against: std's in every build, loom's under `RUSTFLAGS="--cfg loom"` (`make loom`),
//! so that the loom models check the very code the hot path runs.
//!
//! `UnsafeCell` follows loom's closure API (`with`, `with_mut`) so that loom can see every
//! access to a ring cell and report a data race.

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::Arc;

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::Arc;

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;

/// `std::cell::UnsafeCell` with loom's access API; the closures are inlined away.
#[cfg(not(loom))]
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) const fn new(value: T) -> Self {
        UnsafeCell(std::cell::UnsafeCell::new(value))
    }

    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

/// Under loom, a SeqCst fence; in real builds, nothing.
///
/// The quiescence protocol orders a store before a later load of another location (Dekker's
/// pattern) with SeqCst accesses, which the C++/Rust memory model guarantees through the single
/// total order of SeqCst operations. Loom models SeqCst accesses as AcqRel only (its README,
/// "Unsupported features"), which allows both sides to read old values: a false alarm. It does
/// model `fence(SeqCst)`, so the model states the same order with a fence at the two places
/// where the real code relies on SeqCst accesses.
#[inline(always)]
pub(crate) fn seqcst_order_for_loom() {
    #[cfg(loom)]
    loom::sync::atomic::fence(Ordering::SeqCst);
}

/// One step of a wait loop: a CPU hint, or under loom a yield so the model can make progress.
#[inline]
pub(crate) fn spin(step: u32) {
    #[cfg(loom)]
    {
        let _ = step;
        loom::thread::yield_now();
    }
    #[cfg(not(loom))]
    if step < 64 {
        std::hint::spin_loop();
    } else {
        // A callback takes nanoseconds; one still running was descheduled by the OS.
        std::thread::yield_now();
    }
}

/// `std::sync::Mutex` without poisoning: a panic while holding it (a bug, which stops the
/// session with `StopReason::Error`) must not make the session's figures unreadable.
/// std's futex-based mutex rather than parking_lot's, so Miri can run the session tests
/// (parking_lot_core's futex call is rejected by Miri's variadic argument check).
#[derive(Debug, Default)]
pub(crate) struct Mutex<T>(std::sync::Mutex<T>);

impl<T> Mutex<T> {
    pub(crate) const fn new(value: T) -> Self {
        Mutex(std::sync::Mutex::new(value))
    }

    #[inline]
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, T> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
