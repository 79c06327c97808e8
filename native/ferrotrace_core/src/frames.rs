//! The frame bound: no process keeps more than [`MAX_FRAMES`] return-trace frames of a
//! session, enforced on the scheduler before the frame exists.
//!
//! `return_trace` and `exception_trace` turn off last-call optimisation: every traced call
//! keeps a frame on the process's stack until it returns, and a loop that never returns
//! (a server loop, found or not by the loop analysis; a tail recursion a million deep) keeps
//! one per iteration, for the life of the process. The VM asks the tracer
//! (`enabled_call`) *before* it runs the match spec; on `discard` it pushes no frame and sends
//! no event, so refusing there is the one place a bound holds at once, on any code.
//!
//! # Counting open frames without a shared counter per process
//! Each session has a table of [`LINES`] counters, a process's counter chosen by a hash of its
//! pid (processes that share a line are counted together: a collision refuses early, never
//! late). Two numbers per line, each with one kind of writer:
//! - `pushed`, written on the schedulers: +1 for each call event pushed into a ring, -1 for
//!   each return or exception pushed (an atomic add: a process can run on any scheduler, and
//!   processes sharing a line can run at once). Lines are padded, so two lines are never
//!   written on one cache line.
//! - `settled`, written by the aggregators, off the schedulers: for the events they folded in,
//!   calls less returns less the frames open on their stacks. That is what `pushed` counted
//!   but no longer stands for an open frame: the calls of functions traced count-only (loops:
//!   no frame), calls outside the session's figures, frames gone with an exception or an
//!   exit, returns whose call was never seen.
//!
//! `pushed - settled` is then the frames the aggregators know to be open, plus what was
//! pushed since they last looked: exactly the open frames once they have caught up, and never
//! fewer before. `enabled_call` discards a call when it reaches [`MAX_FRAMES`]; the refusals
//! are counted (`frames_refused`). Both sides count only events that entered a ring, so the
//! two views agree event by event; a call refused by a full ring or a limit is invisible to
//! both (its frame is not counted: see the README's Safety section).
//!
//! The tables live beside the slot table, one per session slot, allocated when a session
//! first takes the slot and reset at each start, so that the `enabled` callbacks reach them
//! from the session id alone, without entering the session (no atomic exchange per call).

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::OnceLock;

use crossbeam_utils::CachePadded;

use crate::event::Mfa;
use crate::slots::MAX_SESSIONS;
use crate::sync::Mutex;

/// The most return-trace frames of one session a process keeps open: 360 words on OTP 25 (3
/// a frame), 480 on OTP 27+ (4 a frame). A loop found at run time keeps its frames (they never
/// return) and leaves the bound once it is traced count-only, so a process holds at most
/// twice this: 960 words on OTP 27+. Still past the depth of the calls an operator times (a
/// request's path rarely nests 50 traced calls).
pub const MAX_FRAMES: i64 = 120;

/// Counters per session: with padding, 64 KiB plus 8 KiB.
pub const LINES: usize = 1024;

/// Functions traced count-only (loops) a session's table can name: their calls push no
/// frame and are not counted. Past this, a loop's calls are counted and settled late.
pub const MAX_LOOPS: usize = 1024;

/// One session's open-frame counters, and the functions whose calls keep no frame.
pub struct FrameTable {
    pushed: Box<[CachePadded<AtomicI64>]>,
    settled: Box<[AtomicI64]>,
    /// An open-addressing set of `loop_key`s (0: empty), read lock-free by the callbacks,
    /// written under `adding` (only ever added to while a session runs).
    loops: Box<[AtomicU64]>,
    loop_count: AtomicU64,
    adding: Mutex<()>,
}

/// A non-zero key for a function.
#[inline]
fn loop_key(mfa: &Mfa) -> u64 {
    mix(mfa.module ^ mix(mfa.function ^ u64::from(mfa.arity))) | 1
}

static TABLES: [OnceLock<FrameTable>; MAX_SESSIONS] = [const { OnceLock::new() }; MAX_SESSIONS];

/// A full-avalanche mix of a pid's word (the splitmix64 finalizer): local pids differ in a
/// few middle bits.
#[inline]
pub(crate) fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

#[inline]
fn line(pid: u64) -> usize {
    mix(pid) as usize & (LINES - 1)
}

impl FrameTable {
    fn new() -> FrameTable {
        FrameTable {
            pushed: (0..LINES).map(|_| CachePadded::new(AtomicI64::new(0))).collect(),
            settled: (0..LINES).map(|_| AtomicI64::new(0)).collect(),
            loops: (0..MAX_LOOPS).map(|_| AtomicU64::new(0)).collect(),
            loop_count: AtomicU64::new(0),
            adding: Mutex::new(()),
        }
    }

    /// True if `mfa` is traced count-only: its calls keep no frame. The callbacks' check
    /// before counting a call: one load while there are no loops.
    #[inline]
    pub fn is_loop(&self, mfa: &Mfa) -> bool {
        if self.loop_count.load(Ordering::Acquire) == 0 {
            return false;
        }
        let key = loop_key(mfa);
        let mut i = key as usize % MAX_LOOPS;
        for _ in 0..MAX_LOOPS {
            match self.loops[i].load(Ordering::Acquire) {
                0 => return false,
                k if k == key => return true,
                _ => i = (i + 1) % MAX_LOOPS,
            }
        }
        false
    }

    /// From now on the callbacks do not count the calls of `mfas` (they are traced
    /// count-only). False for those that did not fit ([`MAX_LOOPS`]).
    pub fn add_loops(&self, mfas: &[Mfa]) -> bool {
        let _adding = self.adding.lock();
        let mut all = true;
        for mfa in mfas {
            let key = loop_key(mfa);
            let mut i = key as usize % MAX_LOOPS;
            let mut placed = false;
            for _ in 0..MAX_LOOPS {
                match self.loops[i].load(Ordering::Relaxed) {
                    k if k == key => {
                        placed = true;
                        break;
                    }
                    0 => {
                        self.loops[i].store(key, Ordering::Release);
                        self.loop_count.fetch_add(1, Ordering::Release);
                        placed = true;
                        break;
                    }
                    _ => i = (i + 1) % MAX_LOOPS,
                }
            }
            all &= placed;
        }
        all
    }

    /// The table of session slot `slot`, zeroed, for a session that is starting there (called
    /// before its id is published: no callback of it runs yet, and none of the slot's earlier
    /// session does, which was released only after a grace period).
    pub(crate) fn for_start(slot: usize) -> &'static FrameTable {
        let table = TABLES[slot].get_or_init(FrameTable::new);
        for counter in table.pushed.iter() {
            counter.store(0, Ordering::Relaxed);
        }
        for counter in table.settled.iter() {
            counter.store(0, Ordering::Relaxed);
        }
        for key in table.loops.iter() {
            key.store(0, Ordering::Relaxed);
        }
        table.loop_count.store(0, Ordering::Release);
        table
    }

    /// The table of session slot `slot`, if a session ever started there. The hot path's way
    /// in: it allocates nothing.
    #[inline]
    pub fn of_slot(slot: usize) -> Option<&'static FrameTable> {
        TABLES.get(slot)?.get()
    }

    /// True if `pid` (with the processes sharing its line) has [`MAX_FRAMES`] open: its next
    /// call must be refused. Two loads.
    #[inline]
    pub fn full(&self, pid: u64) -> bool {
        let i = line(pid);
        self.pushed[i].load(Ordering::Relaxed) - self.settled[i].load(Ordering::Relaxed) >= MAX_FRAMES
    }

    /// A call (+1) or a return or exception (-1) of `pid` entered a ring.
    #[inline]
    pub fn pushed(&self, pid: u64, delta: i64) {
        self.pushed[line(pid)].fetch_add(delta, Ordering::Relaxed);
    }

    /// The aggregators found `delta` counted events of `pid` that stand for no open frame
    /// (negative: a return whose call was not counted as open).
    #[inline]
    pub fn settle(&self, pid: u64, delta: i64) {
        if delta != 0 {
            self.settled[line(pid)].fetch_add(delta, Ordering::Relaxed);
        }
    }

    /// The open frames the table counts for `pid`'s line.
    #[inline]
    pub fn open(&self, pid: u64) -> i64 {
        let i = line(pid);
        self.pushed[i].load(Ordering::Relaxed) - self.settled[i].load(Ordering::Relaxed)
    }

    /// The memory one table takes.
    pub const BYTES: usize =
        LINES * (std::mem::size_of::<CachePadded<AtomicI64>>() + std::mem::size_of::<AtomicI64>()) + MAX_LOOPS * 8;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_fill_the_bound_and_settled_frames_free_it() {
        let table = FrameTable::new();
        let pid = 0x1234_5673;
        for _ in 0..MAX_FRAMES - 1 {
            table.pushed(pid, 1);
        }
        assert!(!table.full(pid));
        table.pushed(pid, 1);
        assert!(table.full(pid));
        // A return frees one; calls found frameless (a loop's) free theirs.
        table.pushed(pid, -1);
        assert!(!table.full(pid));
        table.pushed(pid, 1);
        table.settle(pid, 10);
        assert_eq!(table.open(pid), MAX_FRAMES - 10);
    }

    #[test]
    fn loops_are_found_once_added() {
        let table = FrameTable::new();
        let mfas: Vec<Mfa> = (0..200).map(|n| Mfa { module: 0x100 + n, function: 0x200, arity: (n % 7) as u32 }).collect();
        assert!(!table.is_loop(&mfas[0]));
        assert!(table.add_loops(&mfas[..100]));
        assert!(table.add_loops(&mfas[..10]), "adding again is no change");
        assert!(mfas[..100].iter().all(|mfa| table.is_loop(mfa)));
        assert!(!mfas[100..].iter().any(|mfa| table.is_loop(mfa)));
    }

    #[test]
    fn a_start_zeroes_its_slots_table() {
        let table = FrameTable::for_start(MAX_SESSIONS - 1);
        table.pushed(7, 300);
        table.settle(7, 3);
        assert!(FrameTable::of_slot(MAX_SESSIONS - 1).unwrap().full(7));
        let again = FrameTable::for_start(MAX_SESSIONS - 1);
        assert!(std::ptr::eq(table, again), "allocated once per slot");
        assert_eq!(again.open(7), 0);
    }

    #[test]
    fn lines_spread_local_pids() {
        // Local pids differ in their number bits (above the 4 tag bits): consecutive ones
        // must not crowd a few lines.
        let lines: std::collections::HashSet<usize> = (0..LINES as u64).map(|n| line(n << 4 | 0x3)).collect();
        assert!(lines.len() > LINES / 2, "{} distinct lines", lines.len());
    }
}
