//! A bounded single-producer / single-consumer ring of `Copy` values.
//!
//! Every scheduler thread owns the producer side of its own ring, so a push touches only
//! cache lines that its thread writes: the slot, and `tail`. The consumer (whoever holds
//! the session's aggregator lock) writes only `head`. A full ring refuses the value and the
//! caller counts a drop: the hot path never waits.
//!
//! Correctness argument (the usual Lamport ring): `tail` is written only by the producer and
//! `head` only by the consumer. The producer writes slot `tail % cap` and then publishes it with
//! a Release store of `tail + 1`; the consumer Acquire-loads `tail`, so it sees the slot's
//! contents. Symmetrically the consumer releases a slot by a Release store of `head`, and the
//! producer Acquire-loads `head` before reusing the slot. Indices grow without wrapping (u64
//! never overflows in practice), so `tail - head` is the fill level.

use std::cell::{Cell, UnsafeCell};
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;

/// Producer-side position, with the producer's cached copy of `head` on the same line.
struct ProducerEnd {
    tail: AtomicU64,
    cached_head: Cell<u64>,
}

/// A bounded SPSC ring buffer. See the module docs for the protocol.
pub struct Ring<T: Copy> {
    slots: Box<[UnsafeCell<MaybeUninit<T>>]>,
    mask: u64,
    producer: CachePadded<ProducerEnd>,
    head: CachePadded<AtomicU64>,
}

// SAFETY: slots are handed from one producer thread to one consumer thread through the
// Release/Acquire pairs on `tail` and `head`; `cached_head` is touched by the producer only.
unsafe impl<T: Copy + Send> Send for Ring<T> {}
unsafe impl<T: Copy + Send> Sync for Ring<T> {}

impl<T: Copy> Ring<T> {
    /// A ring holding at least `capacity` values (rounded up to a power of two, minimum 2).
    pub fn with_capacity(capacity: usize) -> Self {
        let cap = capacity.max(2).next_power_of_two();
        let slots = (0..cap)
            .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
            .collect::<Vec<_>>()
            .into_boxed_slice();
        Ring {
            slots,
            mask: cap as u64 - 1,
            producer: CachePadded::new(ProducerEnd {
                tail: AtomicU64::new(0),
                cached_head: Cell::new(0),
            }),
            head: CachePadded::new(AtomicU64::new(0)),
        }
    }

    /// Number of slots.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Appends `value`, or gives it back when the ring is full.
    ///
    /// # Safety
    /// Only one thread may call `push` on a given ring, ever (the ring's producer).
    #[inline]
    pub unsafe fn push(&self, value: T) -> Result<(), T> {
        let tail = self.producer.tail.load(Ordering::Relaxed);
        let cap = self.slots.len() as u64;
        if tail - self.producer.cached_head.get() >= cap {
            let head = self.head.load(Ordering::Acquire);
            self.producer.cached_head.set(head);
            if tail - head >= cap {
                return Err(value);
            }
        }
        (*self.slots[(tail & self.mask) as usize].get()).write(value);
        self.producer.tail.store(tail + 1, Ordering::Release);
        Ok(())
    }

    /// Total number of values ever pushed (the producer's position).
    pub fn pushed(&self) -> u64 {
        self.producer.tail.load(Ordering::Acquire)
    }

    /// Removes every value present now, oldest first, handing each to `sink`.
    /// Returns how many were removed.
    ///
    /// # Safety
    /// Only one thread at a time may consume from a given ring.
    pub unsafe fn drain(&self, mut sink: impl FnMut(T)) -> u64 {
        let head = self.head.load(Ordering::Relaxed);
        let tail = self.producer.tail.load(Ordering::Acquire);
        for index in head..tail {
            sink((*self.slots[(index & self.mask) as usize].get()).assume_init());
        }
        self.head.store(tail, Ordering::Release);
        tail - head
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn capacity_rounds_up_to_power_of_two() {
        assert_eq!(Ring::<u8>::with_capacity(0).capacity(), 2);
        assert_eq!(Ring::<u8>::with_capacity(5).capacity(), 8);
        assert_eq!(Ring::<u8>::with_capacity(1024).capacity(), 1024);
    }

    #[test]
    fn refuses_when_full_and_accepts_after_drain() {
        let ring = Ring::with_capacity(4);
        unsafe {
            for i in 0..4 {
                assert_eq!(ring.push(i), Ok(()));
            }
            assert_eq!(ring.push(99), Err(99));
            let mut out = Vec::new();
            assert_eq!(ring.drain(|v| out.push(v)), 4);
            assert_eq!(out, vec![0, 1, 2, 3]);
            assert_eq!(ring.push(4), Ok(()));
            assert_eq!(ring.drain(|v| out.push(v)), 1);
            assert_eq!(out, vec![0, 1, 2, 3, 4]);
            assert_eq!(ring.pushed(), 5);
        }
    }

    #[test]
    fn concurrent_producer_and_consumer_lose_nothing() {
        const N: u64 = 1_000_000;
        let ring = Arc::new(Ring::with_capacity(256));
        let producer = {
            let ring = Arc::clone(&ring);
            std::thread::spawn(move || {
                let mut refused = 0u64;
                for i in 0..N {
                    // SAFETY: this thread is the only producer.
                    while unsafe { ring.push(i) }.is_err() {
                        refused += 1;
                        std::hint::spin_loop();
                    }
                }
                refused
            })
        };
        let mut expected = 0u64;
        while expected < N {
            // SAFETY: this thread is the only consumer.
            unsafe {
                ring.drain(|v| {
                    assert_eq!(v, expected, "values arrive in order, none lost or repeated");
                    expected += 1;
                })
            };
        }
        producer.join().unwrap();
        assert_eq!(ring.pushed(), N);
    }
}
