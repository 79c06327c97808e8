//! Pairing calls with their returns: the open call frames of each process, and the loops
//! found among them.
//!
//! Calls are paired with their return per process with a stack of open calls: a return pops
//! frames until it finds the frame of the same function, so recursion pairs innermost-first and
//! frames abandoned by an exception that was not traced are discarded (and counted) instead of
//! being paired with the wrong return. `return_trace` disables last-call optimisation for the
//! functions it traces, so a traced tail call still produces one return per call: figures count
//! the time until the callee's own return, including any tail-called traced functions.
//!
//! Memory is bounded: a process keeps at most `MAX_DEPTH` open calls, and at most
//! `max_open_calls` frames are open over all processes.
//!
//! *Loops*: a tail-recursive loop traced with return tracing would keep a VM stack frame per
//! iteration, so loop functions are traced count-only (calls, no frames). Loops the Erlang
//! side cannot see in the code (cycles through funs or `apply`) show up here as one function
//! nested `LOOP_DEPTH` times in one process; they are reported
//! (`Aggregator::take_new_loops`) so the caller can stop return tracing them.

use std::collections::VecDeque;

use crate::memory::{boxed_copies_bytes, map_bytes, vec_bytes};
use super::probe::Inner;
use super::stacks::{StackPaths, ROOT};
use crate::event::Mfa;
use crate::frames::{FrameTable, MAX_FRAMES};
use crate::hasher::WordMap;
use crate::term_format::EventCopies;

/// Open calls kept per process; deeper recursion abandons the oldest frame. Body-recursive
/// functions over long lists (list comprehensions) go thousands deep, so this is generous;
/// `max_open_calls` bounds the total.
pub const MAX_DEPTH: usize = 65_536;
/// Open calls in one process at which the functions they repeat are taken for a loop (traced
/// with return tracing, each iteration keeps a VM stack frame), if the calls also span
/// `LOOP_MIN_SPAN_NS`: a loop that waits for messages. Below the frame bound
/// ([`MAX_FRAMES`]), which refuses further calls of the process on the scheduler, so that a
/// loop is found (and traced count-only from then on) before its process's other calls are
/// refused; checked every `LOOP_CHECK_EVERY` frames past it.
pub const LOOP_DEPTH: usize = MAX_FRAMES as usize * 3 / 4;
/// Frames of one function among `LOOP_DEPTH` that make it part of the loop: a cycle of up to
/// eight functions (a server's `aloop` and `handle_method_result`, 60 frames each at the
/// bound) is found whole.
const LOOP_SHARE: usize = LOOP_DEPTH / 8;
pub(super) const LOOP_CHECK_EVERY: usize = 16;
/// How long the nested calls of a loop span at least: a recursion over a long list nests
/// as deep in microseconds, and keeps its timing (the frame bound keeps its frames few).
pub const LOOP_MIN_SPAN_NS: u64 = 50_000_000;
/// Empty stacks tolerated beyond the non-empty ones before a sweep.
pub(super) const EMPTY_STACK_SLACK: usize = 4096;

/// Counters describing how well the stream paired up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PairingCounters {
    /// Returns or exceptions with no open call of the same function in that process.
    pub unmatched_returns: u64,
    /// Open calls that never got a return: unwound by an untraced exception, the process
    /// exited, or dropped by the depth and open-call bounds.
    pub abandoned_calls: u64,
    /// Events for functions beyond `max_functions`.
    pub untracked_events: u64,
    /// Events for functions outside the session's filter (another session's patterns).
    pub foreign_events: u64,
}

impl PairingCounters {
    /// Adds `other`'s counts to these (`Aggregator::merged`).
    pub(super) fn add(&mut self, other: &PairingCounters) {
        self.unmatched_returns += other.unmatched_returns;
        self.abandoned_calls += other.abandoned_calls;
        self.untracked_events += other.untracked_events;
        self.foreign_events += other.foreign_events;
    }
}

/// One open call.
#[derive(Clone, Debug)]
pub(super) struct Frame {
    pub(super) mfa: Mfa,
    pub(super) ts: u64,
    /// Time spent in this call's paired traced callees (own time), ns.
    pub(super) callees_ns: u64,
    /// The session's events of this process since the call, its own excepted (`probe.rs`).
    pub(super) inner: Inner,
    /// The part of `inner` that was inside its paired callees (own time, compensated).
    pub(super) callees_inner: Inner,
    /// This call's path in `stack_paths` (`stacks.rs`).
    pub(super) node: u32,
    /// The process's (descheduled, gc) totals at the call when scheduling is traced, else
    /// `NO_SPLIT` (an `Option` would take 8 bytes more per frame).
    pub(super) split: (u64, u64),
    /// The thread the call event ran on.
    pub(super) thread: u32,
    /// The call's arguments and key (`args`, `key`), boxed: most sessions copy nothing, and
    /// a smaller frame keeps the collector's stacks in fewer cache lines.
    pub(super) copies: Option<Box<EventCopies>>,
}

/// A frame's `split` when scheduling is not traced: totals never reach it.
pub(super) const NO_SPLIT: (u64, u64) = (u64::MAX, u64::MAX);

impl Frame {
    /// The process's (descheduled, gc) totals at the call, if scheduling was traced then.
    pub(super) fn split(&self) -> Option<(u64, u64)> {
        (self.split != NO_SPLIT).then_some(self.split)
    }
}

/// What opening a frame did ([`OpenCalls::open`]).
pub(super) struct Opened {
    /// The process's open calls, this one included.
    pub(super) depth: usize,
    /// The oldest frame was abandoned for it (the depth bound).
    pub(super) dropped_oldest: bool,
    /// Functions found looping on the process's stack (see `loop_functions`).
    pub(super) looping: Vec<Mfa>,
}

/// The open call frames of every process.
pub(super) struct OpenCalls {
    /// Open frames per process. A stack that empties stays (no remove and reallocation per
    /// call); empty stacks are swept once they outnumber the others, and a process's exit
    /// removes its stack.
    stacks: WordMap<u64, VecDeque<Frame>>,
    /// Stacks with at least one frame.
    pub(super) nonempty: usize,
    /// Frames over all stacks.
    pub(super) open: usize,
    pub(super) max_open: usize,
    /// Processes whose stacks reached `LOOP_DEPTH` frames: `find_stuck_loops` looks at them,
    /// not at every stack.
    deep: WordMap<u64, ()>,
    /// Frame stacks held by the aggregators merged into this one (`Aggregator::merged`).
    pub(super) elsewhere: usize,
}

impl OpenCalls {
    /// No open call; at most `max_open` over all processes.
    pub(super) fn new(max_open: usize) -> Self {
        OpenCalls { stacks: WordMap::default(), nonempty: 0, open: 0, max_open, deep: WordMap::default(), elsewhere: 0 }
    }

    /// True if no further frame may open.
    #[inline]
    pub(super) fn is_full(&self) -> bool {
        self.open >= self.max_open
    }

    /// Opens `frame` on `pid`'s stack (at `frame.ts`), giving it its node in `paths` under
    /// its caller's; a stack at `MAX_DEPTH` abandons its oldest frame for it.
    pub(super) fn open(&mut self, pid: u64, mut frame: Frame, paths: &mut StackPaths, counters: &mut PairingCounters) -> Opened {
        let stack = self.stacks.entry(pid).or_default();
        if stack.is_empty() {
            self.nonempty += 1;
        }
        let dropped_oldest = stack.len() >= MAX_DEPTH;
        if dropped_oldest {
            stack.pop_front();
            self.open -= 1;
            counters.abandoned_calls += 1;
        }
        let parent = stack.back().map_or(ROOT, |frame| frame.node);
        frame.node = paths.enter(parent, frame.mfa);
        let ts = frame.ts;
        stack.push_back(frame);
        self.open += 1;
        if stack.len() == LOOP_DEPTH {
            self.deep.insert(pid, ());
        }
        let depth = stack.len();
        let looping = if depth >= LOOP_DEPTH && depth.is_multiple_of(LOOP_CHECK_EVERY) {
            loop_functions(stack, ts)
        } else {
            Vec::new()
        };
        Opened { depth, dropped_oldest, looping }
    }

    /// Pops the innermost open call of `mfa` in `pid`, discarding the frames above it; the
    /// call it returns to (the frame below) is credited with its time (own time), and its
    /// path in `paths` gets the call's latency (`ts` is the return's). Gives the frame and
    /// how many frames above it were abandoned.
    pub(super) fn close(&mut self, pid: u64, mfa: Mfa, ts: u64, paths: &mut StackPaths, counters: &mut PairingCounters) -> Option<(Frame, usize)> {
        let stack = self.stacks.get_mut(&pid)?;
        let position = stack.iter().rposition(|frame| frame.mfa == mfa)?;
        let abandoned = stack.len() - position - 1;
        // The frames above, abandoned, and what was inside them happened inside this call.
        let above = stack.range(position + 1..).fold(Inner::default(), |sum, f| sum.plus(f.inner).plus(Inner::CALL));
        let mut frame = stack.remove(position)?;
        frame.inner = frame.inner.plus(above);
        let ns = ts.saturating_sub(frame.ts).clamp(1, super::histogram::MAX_LATENCY_NS);
        paths.record(frame.node, ns);
        stack.truncate(position);
        if let Some(caller) = stack.back_mut() {
            caller.callees_ns = caller.callees_ns.saturating_add(ts.saturating_sub(frame.ts));
            caller.inner = caller.inner.plus(frame.inner).plus(Inner::PAIR);
            caller.callees_inner = caller.callees_inner.plus(frame.inner);
        }
        self.open -= abandoned + 1;
        counters.abandoned_calls += abandoned as u64;
        if stack.is_empty() {
            self.nonempty -= 1;
            if self.stacks.len() > 2 * self.nonempty + EMPTY_STACK_SLACK {
                self.stacks.retain(|_, stack| !stack.is_empty());
            }
        }
        Some((frame, abandoned))
    }

    /// Counts `events` of `pid` that open or close no frame (`probe.rs`) in its innermost
    /// open call, if it has one.
    #[inline]
    pub(super) fn count_inner(&mut self, pid: u64, events: Inner) {
        if self.nonempty == 0 {
            return;
        }
        if let Some(frame) = self.stacks.get_mut(&pid).and_then(|stack| stack.back_mut()) {
            frame.inner = frame.inner.plus(events);
        }
    }

    /// The processes with at least one open call.
    pub(super) fn open_pids(&self) -> impl Iterator<Item = u64> + '_ {
        self.stacks.iter().filter(|(_, stack)| !stack.is_empty()).map(|(pid, _)| *pid)
    }

    /// Forgets the open calls of `pid`, which exited (abandoned); how many there were.
    pub(super) fn exit(&mut self, pid: u64, counters: &mut PairingCounters) -> usize {
        let Some(stack) = self.stacks.remove(&pid) else { return 0 };
        if !stack.is_empty() {
            self.nonempty -= 1;
        }
        self.open -= stack.len();
        counters.abandoned_calls += stack.len() as u64;
        stack.len()
    }

    /// Drops the frames of `mfa`, now a loop, settling them on `frames`. Not abandoned: a
    /// loop's frames are just not timed (those the VM already holds may still return; their
    /// returns are counted, not paired).
    pub(super) fn drop_frames_of(&mut self, mfa: Mfa, frames: Option<&FrameTable>) {
        let mut dropped = 0;
        let mut emptied = 0;
        for (pid, stack) in self.stacks.iter_mut() {
            let before = stack.len();
            if before == 0 {
                continue;
            }
            stack.retain(|frame| frame.mfa != mfa);
            dropped += before - stack.len();
            if let Some(frames) = frames {
                frames.settle(*pid, (before - stack.len()) as i64);
            }
            emptied += usize::from(stack.is_empty());
        }
        self.open -= dropped;
        self.nonempty -= emptied;
    }

    /// The functions looping on the stacks of processes that reached `LOOP_DEPTH` frames,
    /// judged at `now_ns` (see `loop_functions`).
    pub(super) fn stuck_loops(&mut self, now_ns: u64) -> Vec<Mfa> {
        let stacks = &self.stacks;
        let mut found = Vec::new();
        self.deep.retain(|pid, _| {
            let Some(stack) = stacks.get(pid).filter(|stack| stack.len() >= LOOP_DEPTH) else { return false };
            found.extend(loop_functions(stack, now_ns));
            true
        });
        found
    }

    /// True if no process reached `LOOP_DEPTH` frames.
    pub(super) fn none_deep(&self) -> bool {
        self.deep.is_empty()
    }

    /// Frame stacks held, empty ones included, with those of merged parts.
    pub(super) fn stacks_held(&self) -> usize {
        self.stacks.len() + self.elsewhere
    }

    /// Heap bytes: `(the stacks and their map, the copies the frames hold)`.
    pub(super) fn bytes(&self) -> (usize, usize) {
        let frames = map_bytes(&self.stacks)
            + self.stacks.values().map(|stack| vec_bytes::<Frame>(stack.capacity())).sum::<usize>()
            + map_bytes(&self.deep);
        let copies = self
            .stacks
            .values()
            .flat_map(|stack| stack.iter())
            .filter_map(|frame| frame.copies.as_deref())
            .map(boxed_copies_bytes)
            .sum();
        (frames, copies)
    }

    /// Frees the stacks, keeping the counts (a stopped session: `Aggregator::free_state`).
    pub(super) fn free(&mut self) {
        self.stacks = Default::default();
        self.deep = Default::default();
    }
}

/// The functions of a loop on `stack` (at least `LOOP_DEPTH` open calls), judged at `now_ns`:
/// none unless the oldest call was made `LOOP_MIN_SPAN_NS` before (a recursion as deep but
/// over in microseconds keeps its timing); else each function with `LOOP_SHARE` of the
/// frames, in the order first seen. A loop of one function (a tail recursion, or a receive
/// loop through a fun) or of a few (a cycle through another module) shows so.
fn loop_functions(stack: &VecDeque<Frame>, now_ns: u64) -> Vec<Mfa> {
    if stack.front().is_none_or(|oldest| now_ns.saturating_sub(oldest.ts) < LOOP_MIN_SPAN_NS) {
        return Vec::new();
    }
    let mut counts: Vec<(Mfa, usize)> = Vec::new();
    for frame in stack.iter().rev().take(LOOP_DEPTH) {
        match counts.iter().position(|(mfa, _)| *mfa == frame.mfa) {
            Some(i) => counts[i].1 += 1,
            None if counts.len() < 64 => counts.push((frame.mfa, 1)),
            None => {}
        }
    }
    counts.into_iter().filter(|(_, n)| *n >= LOOP_SHARE).map(|(mfa, _)| mfa).collect()
}

/// The functions counted without pairing, and those found looping at run time.
#[derive(Default)]
pub(super) struct Loops {
    /// Functions counted without pairing (set by the caller: found in the code, or at run
    /// time and then traced count-only), with when the callbacks stopped counting their calls
    /// on the frame table (ns; 0 for loops traced count-only from the start).
    pub(super) counted: WordMap<Mfa, u64>,
    /// Loops found at run time and not yet taken by `take_new`.
    new: Vec<Mfa>,
    /// Loops found at run time and reported, not yet set by the caller.
    reported: WordMap<Mfa, ()>,
}

impl Loops {
    /// True if `mfa` is counted without pairing.
    #[inline]
    pub(super) fn contains(&self, mfa: &Mfa) -> bool {
        self.counted.contains_key(mfa)
    }

    /// True if a call of loop `mfa` at `ts` was not counted on the frame table: made after
    /// the callbacks knew it for a loop.
    #[inline]
    pub(super) fn uncounted(&self, mfa: &Mfa, ts: u64) -> bool {
        self.counted.get(mfa).is_some_and(|since| ts >= *since)
    }

    /// Reports `mfa`, found looping, once.
    pub(super) fn report(&mut self, mfa: Mfa) {
        if self.reported.insert(mfa, ()).is_none() {
            self.new.push(mfa);
        }
    }

    /// Loops found since the last call.
    pub(super) fn take_new(&mut self) -> Vec<Mfa> {
        std::mem::take(&mut self.new)
    }

    /// True if loops were found that `take_new` has not taken yet.
    pub(super) fn has_new(&self) -> bool {
        !self.new.is_empty()
    }

    /// Heap bytes of the three tables.
    pub(super) fn bytes(&self) -> usize {
        map_bytes(&self.counted) + map_bytes(&self.reported) + vec_bytes::<Mfa>(self.new.capacity())
    }
}
