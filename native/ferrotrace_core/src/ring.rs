//! A bounded single-producer / single-consumer ring of `Copy` values, as two handles.
//!
//! [`channel`] allocates the ring (fallibly: a ring can be large and is created on a scheduler
//! thread, where an allocation failure must not abort the VM) and returns a [`RingProducer`] and
//! a [`RingConsumer`]. Each handle is unique and pushes or drains through `&mut self`, so "one
//! producer, one consumer" is what the type system enforces, not a caller's promise. A value
//! sits in one of the ring's *cells* ("slot" is kept for a session's place in `slots`).
//!
//! Every scheduler thread owns the producer handle of its own ring, so a push touches only
//! cache lines that its thread writes: the cell, and `tail`. The consumer writes only `head`.
//! A full ring refuses the value and the caller counts a drop: the hot path never waits.
//!
//! Correctness argument (the usual Lamport ring): `tail` is written only by the producer and
//! `head` only by the consumer. The producer writes cell `tail % cap` and then publishes it with
//! a Release store of `tail + 1`; the consumer Acquire-loads `tail`, so it sees the cell's
//! contents. Symmetrically the consumer releases cells by a Release store of `head`, and the
//! producer Acquire-loads `head` before reusing a cell, so the consumer's reads of a cell
//! happen before the producer overwrites it. Indices grow without wrapping (u64 never
//! overflows in practice), so `tail - head` is the fill level. `make loom` checks this with
//! loom (`tests::loom_*`).

use std::mem::MaybeUninit;

use crossbeam_utils::CachePadded;

use crate::sync::{Arc, AtomicU64, Ordering, UnsafeCell};

/// The ring's memory could not be allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllocError;

struct Shared<T> {
    cells: Box<[UnsafeCell<MaybeUninit<T>>]>,
    mask: u64,
    tail: CachePadded<AtomicU64>,
    head: CachePadded<AtomicU64>,
}

// SAFETY: a cell is written only by the unique `RingProducer` and read only by the unique
// `RingConsumer`, and the Release/Acquire pairs on `tail` and `head` order those accesses
// (module docs). `T: Send` because values move from the producer's thread to the consumer's.
unsafe impl<T: Copy + Send> Send for Shared<T> {}
// SAFETY: as above; the shared parts other than cells are atomics.
unsafe impl<T: Copy + Send> Sync for Shared<T> {}

/// The producer side: pushes values. One per ring.
pub struct RingProducer<T: Copy> {
    shared: Arc<Shared<T>>,
    /// `shared.cells` and its mask, copied here so that a push reads only this handle's line
    /// before the cell (no load of the shared block's fields, no bounds check).
    cells: *const UnsafeCell<MaybeUninit<T>>,
    mask: u64,
    /// The producer's own copy of `tail` (it is the only writer).
    tail: u64,
    /// The last `head` seen: the ring is known to have room up to `cached_head + cap`.
    cached_head: u64,
}

// SAFETY: `cells` points into `shared`, which the handle keeps alive; moving the handle to
// another thread moves the unique producer role with it (the Arc'ed block is Send + Sync).
unsafe impl<T: Copy + Send> Send for RingProducer<T> {}

/// The consumer side: drains values. One per ring.
pub struct RingConsumer<T: Copy> {
    shared: Arc<Shared<T>>,
    /// The consumer's own copy of `head` (it is the only writer).
    head: u64,
}

/// Allocates a ring holding at least `capacity` values (rounded up to a power of two, at
/// least 2). Fails, without aborting, when the memory cannot be had.
pub fn channel<T: Copy>(capacity: usize) -> Result<(RingProducer<T>, RingConsumer<T>), AllocError> {
    let cap = capacity.max(2).checked_next_power_of_two().ok_or(AllocError)?;
    let mut cells: Vec<UnsafeCell<MaybeUninit<T>>> = Vec::new();
    cells.try_reserve_exact(cap).map_err(|_| AllocError)?;
    // Under loom, cells are built one by one (they carry loom's bookkeeping).
    cells.extend((0..cap).map(|_| UnsafeCell::new(MaybeUninit::uninit())));
    let shared = Arc::new(Shared {
        cells: cells.into_boxed_slice(),
        mask: cap as u64 - 1,
        tail: CachePadded::new(AtomicU64::new(0)),
        head: CachePadded::new(AtomicU64::new(0)),
    });
    let producer = RingProducer {
        cells: shared.cells.as_ptr(),
        mask: shared.mask,
        shared: Arc::clone(&shared),
        tail: 0,
        cached_head: 0,
    };
    Ok((producer, RingConsumer { shared, head: 0 }))
}

impl<T: Copy> RingProducer<T> {
    /// Number of cells.
    #[cfg(test)]
    pub fn capacity(&self) -> usize {
        self.shared.cells.len()
    }

    /// Appends `value`, or gives it back when the ring is full.
    #[inline]
    pub fn push(&mut self, value: T) -> Result<(), T> {
        let cap = self.mask + 1;
        if self.tail - self.cached_head >= cap {
            self.cached_head = self.shared.head.load(Ordering::Acquire);
            if self.tail - self.cached_head >= cap {
                return Err(value);
            }
        }
        // SAFETY: `tail & mask < cap`, the length of the cells `self.cells` points at, which
        // `self.shared` keeps allocated.
        let cell = unsafe { &*self.cells.add((self.tail & self.mask) as usize) };
        // SAFETY: `tail - head < cap`, so the consumer is done with this cell (its Release
        // store of `head`, read by our Acquire load, came after its last read of the cell) and
        // will not read it before our Release store of `tail + 1` below. We are the only
        // producer (`&mut self` of the unique producer handle).
        cell.with_mut(|p| unsafe { (*p).write(value) });
        self.tail += 1;
        self.shared.tail.store(self.tail, Ordering::Release);
        Ok(())
    }

    /// Appends all of `values`, published at once (the consumer sees all or none of them),
    /// or none when they do not all fit.
    #[inline]
    pub fn push_all(&mut self, values: &[T]) -> bool {
        let (cap, n) = (self.mask + 1, values.len() as u64);
        if self.tail - self.cached_head + n > cap {
            self.cached_head = self.shared.head.load(Ordering::Acquire);
            if self.tail - self.cached_head + n > cap {
                return false;
            }
        }
        for (i, value) in values.iter().enumerate() {
            // SAFETY: `(tail + i) & mask < cap`, within the cells `self.shared` keeps
            // allocated.
            let cell = unsafe { &*self.cells.add(((self.tail + i as u64) & self.mask) as usize) };
            // SAFETY: `tail + n - head <= cap`, so the consumer is done with these cells (as in
            // `push`) and reads none of them before our Release store of the new tail below.
            cell.with_mut(|p| unsafe { (*p).write(*value) });
        }
        self.tail += n;
        self.shared.tail.store(self.tail, Ordering::Release);
        true
    }

    /// Total number of values ever pushed.
    #[cfg(test)]
    pub fn pushed(&self) -> u64 {
        self.tail
    }
}

impl<T: Copy> RingConsumer<T> {
    /// Number of cells.
    pub fn capacity(&self) -> usize {
        self.shared.cells.len()
    }

    /// Removes every value present now, oldest first, handing each to `sink`.
    /// Returns how many were removed.
    pub fn drain(&mut self, mut sink: impl FnMut(T)) -> u64 {
        let shared = &*self.shared;
        let head = self.head;
        let tail = shared.tail.load(Ordering::Acquire);
        for index in head..tail {
            let cell = &shared.cells[(index & shared.mask) as usize];
            // SAFETY: `index < tail`: the producer wrote this cell before its Release store
            // of `tail`, which our Acquire load read; it will not write it again before our
            // Release store of `head` below. We are the only consumer (`&mut self`).
            sink(cell.with(|p| unsafe { (*p).assume_init() }));
        }
        self.head = tail;
        shared.head.store(tail, Ordering::Release);
        tail - head
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn capacity_rounds_up_to_power_of_two() {
        assert_eq!(channel::<u8>(0).unwrap().0.capacity(), 2);
        assert_eq!(channel::<u8>(5).unwrap().1.capacity(), 8);
        assert_eq!(channel::<u8>(1024).unwrap().0.capacity(), 1024);
    }

    #[test]
    fn an_impossible_size_fails_instead_of_aborting() {
        assert_eq!(channel::<[u64; 4]>(1 << 60).err(), Some(AllocError));
        assert_eq!(channel::<u8>(usize::MAX).err(), Some(AllocError));
    }

    #[test]
    fn push_all_is_all_or_nothing() {
        let (mut tx, mut rx) = channel(4).unwrap();
        assert!(tx.push_all(&[1, 2, 3]));
        assert!(!tx.push_all(&[4, 5]));
        let mut out = Vec::new();
        rx.drain(|v| out.push(v));
        assert!(tx.push_all(&[4, 5, 6, 7]));
        rx.drain(|v| out.push(v));
        assert_eq!(out, vec![1, 2, 3, 4, 5, 6, 7]);
    }

    #[test]
    fn refuses_when_full_and_accepts_after_drain() {
        let (mut tx, mut rx) = channel(4).unwrap();
        for i in 0..4 {
            assert_eq!(tx.push(i), Ok(()));
        }
        assert_eq!(tx.push(99), Err(99));
        let mut out = Vec::new();
        assert_eq!(rx.drain(|v| out.push(v)), 4);
        assert_eq!(out, vec![0, 1, 2, 3]);
        assert_eq!(tx.push(4), Ok(()));
        assert_eq!(rx.drain(|v| out.push(v)), 1);
        assert_eq!(out, vec![0, 1, 2, 3, 4]);
        assert_eq!(tx.pushed(), 5);
    }

    #[test]
    fn concurrent_producer_and_consumer_lose_nothing() {
        // Miri runs this too, much shorter.
        let n: u64 = if cfg!(miri) { 200 } else { 1_000_000 };
        let (mut tx, mut rx) = channel(if cfg!(miri) { 8 } else { 256 }).unwrap();
        let producer = std::thread::spawn(move || {
            for i in 0..n {
                while tx.push(i).is_err() {
                    std::thread::yield_now();
                }
            }
            tx.pushed()
        });
        let mut expected = 0u64;
        while expected < n {
            rx.drain(|v| {
                assert_eq!(v, expected, "values arrive in order, none lost or repeated");
                expected += 1;
            });
        }
        assert_eq!(producer.join().unwrap(), n);
    }
}

/// Loom models of the ring (`make loom`): every interleaving of a producer and a consumer on
/// a ring of two cells, pushing past the capacity, must deliver each value once, in order,
/// with no data race on a cell.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;

    #[test]
    fn loom_ring_delivers_in_order_without_races() {
        loom::model(|| {
            let (mut tx, mut rx) = channel::<u32>(2).unwrap();
            let producer = loom::thread::spawn(move || {
                let mut accepted = Vec::new();
                for v in 0..3 {
                    if tx.push(v).is_ok() {
                        accepted.push(v);
                    }
                }
                accepted
            });
            let mut got = Vec::new();
            rx.drain(|v| got.push(v));
            let accepted = producer.join().unwrap();
            rx.drain(|v| got.push(v));
            assert_eq!(got, accepted, "drained exactly what was accepted, in order");
            assert!(accepted.len() >= 2, "two cells are never refused while empty");
        });
    }
}
