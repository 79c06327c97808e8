//! Tracees born with a session's flags, counted per scheduler thread: what the overhead
//! budget counts in its estimate (`ferrotrace_budget`'s births). The VM asks
//! `enabled(trace_status, State, undefined)` once for each process (or port) it gives a
//! session's flags and tracer at birth (OTP's `get_default_tracing`), and each costs the
//! node whether or not any of its events is traced.
//!
//! A count per (thread, session slot), each thread's on lines of its own and written by
//! that thread only, with a plain load and store: no read-modify-write, no line another
//! thread writes, and not the active mark either (through the producer's counters, its
//! SeqCst swap cost a birth 0.05 µs more, a fifth of what the VM's part costs, `make
//! births`). A session counts from the slot's count when it started ([`total`] then,
//! `Session::born_base`), so a slot's next session does not inherit the last one's.

use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;

use crate::quiesce::{self, MAX_THREADS};
use crate::slots::{slot_of, MAX_SESSIONS};

/// Per thread index, a count per session slot.
static BORN: [CachePadded<[AtomicU64; MAX_SESSIONS]>; MAX_THREADS] =
    [const { CachePadded::new([const { AtomicU64::new(0) }; MAX_SESSIONS]) }; MAX_THREADS];

/// Counts a tracee born with session `id`'s flags, on this thread. Nothing on a thread
/// that has no index (past `MAX_THREADS`, or exiting).
#[inline]
pub fn count(id: u64) {
    let _ = quiesce::with_token(|token| {
        let counter = &BORN[token.index()][slot_of(id)];
        // Only this thread writes it: its own last store is what the load reads.
        counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    });
}

/// The births counted in `id`'s slot, on every thread, since the library was loaded.
pub fn total(id: u64) -> u64 {
    let slot = slot_of(id);
    BORN[..quiesce::threads_seen()].iter().map(|thread| thread[slot].load(Ordering::Relaxed)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn births_add_up_over_threads_and_stay_in_their_slot() {
        // Slots 61 and 62, which no other test's sessions take.
        let (id, other) = ((9 << 6) | 61, (9 << 6) | 62);
        let (before, other_before) = (total(id), total(other));
        let threads: Vec<_> = (0..4)
            .map(|_| std::thread::spawn(move || (0..1000).for_each(|_| count(id))))
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        count(id);
        assert_eq!(total(id) - before, 4001);
        assert_eq!(total(other), other_before);
        // The next session in the slot counts from its start.
        let next = (10 << 6) | 61;
        let base = total(next);
        count(next);
        assert_eq!(total(next) - base, 1);
    }
}
