//! `args => true` and `key`: how a bounded copy of a call's arguments, of its result or of
//! its key travels from the scheduler to the collector, beside its event.
//!
//! The 32-byte event does not change. A callback that copies a term writes a record into its
//! thread's *term ring* (a ring of 32-byte chunks, allocated fallibly with the thread's
//! producer, written only by that thread): a header chunk with the event's own pid and
//! timestamp, then the encoded term ([`crate::term_format`]), published at once. It pushes the
//! record before the event, and the collector drains a thread's event ring before its term
//! ring, so a drained event's copy has been drained too. A thread's copies and events are
//! both in the order it pushed them (its timestamps only grow), so the collector matches them
//! by `(pid, ts)` in one pass as it drains the thread (`HeldCopies::take_for`); a copy
//! whose event never reached its ring (full) is dropped when a later event passes it. A call
//! can have two copies, its key and its arguments, told apart by their [`CopyOf`]. The copy's
//! bytes wait in the thread's `HeldCopies` until the event is folded in, and only then become
//! a `TermCopy` (see `HeldCopies` for why).
//!
//! A full term ring refuses the copy (counted, `args_dropped`); the event still goes.

use std::collections::VecDeque;

use crate::event::{Event, EventKind};
use crate::ring::{self, RingConsumer, RingProducer};
use crate::sync::{Mutex, UnsafeCell};
use crate::term_format::{EventCopies, TermCopy};

/// One cell of a term ring.
pub type Chunk = [u8; 32];

/// Which copy of an event a record holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyOf {
    /// A call's argument list, or a return's value or an exception's `{Class, Reason}`.
    Args = 0,
    /// A call's key (`key`).
    Key = 1,
}

/// A thread's term ring and the buffer it encodes into.
pub(crate) struct TermLane {
    tx: UnsafeCell<RingProducer<Chunk>>,
    /// A header chunk, then room for `max_term_bytes`.
    scratch: UnsafeCell<Box<[Chunk]>>,
    max_term_bytes: usize,
    /// The session copies arguments and results (`args`).
    pub(crate) args: bool,
    /// The session copies calls' keys (`key`).
    pub(crate) keys: bool,
    pub(crate) rx: Mutex<LaneConsumer>,
}

impl TermLane {
    /// A lane of `chunks` cells (at least the largest record) copying arguments and results
    /// (`args`) and keys (`keys`), or `None` if the memory cannot be had.
    pub(crate) fn new(chunks: usize, max_term_bytes: usize, args: bool, keys: bool) -> Option<TermLane> {
        let record = 1 + max_term_bytes.div_ceil(32);
        let (tx, rx) = ring::channel::<Chunk>(chunks.max(2 * record)).ok()?;
        let mut scratch = Vec::new();
        scratch.try_reserve_exact(record).ok()?;
        scratch.resize(record, [0u8; 32]);
        Some(TermLane {
            tx: UnsafeCell::new(tx),
            scratch: UnsafeCell::new(scratch.into_boxed_slice()),
            max_term_bytes,
            args,
            keys,
            rx: Mutex::new(LaneConsumer { ring: rx }),
        })
    }

    /// Heap bytes: the ring (its cells, rounded up to a power of two as allocated) and the
    /// encoding buffer.
    pub(crate) fn bytes(&self) -> usize {
        use crate::memory::vec_bytes;
        // The buffer is the producer's: its size is what `new` made it.
        let scratch = 1 + self.max_term_bytes.div_ceil(32);
        vec_bytes::<Chunk>(self.rx.lock().ring.capacity()) + vec_bytes::<Chunk>(scratch)
    }
}

fn kind_byte(kind: EventKind) -> u8 {
    kind as u8
}

impl TermLane {
    /// Encodes a copy into the scratch buffer and pushes it whole; false if the ring is full.
    ///
    /// # Safety
    /// Only one thread ever calls this on a lane (its producer's), and not re-entrantly.
    #[inline]
    pub(crate) unsafe fn push_copy(&self, pid: u64, ts: u64, kind: EventKind, copy_of: CopyOf, encode: impl FnOnce(&mut [u8]) -> usize) -> bool {
        // SAFETY: the caller's contract: the two `&mut` made here are the only ones, and are
        // dropped before returning.
        self.scratch.with_mut(|scratch| unsafe {
            let scratch = &mut *scratch;
            let (header, body) = scratch.split_at_mut(1);
            let body = &mut body.as_flattened_mut()[..self.max_term_bytes];
            let len = encode(body).min(self.max_term_bytes);
            let header = &mut header[0];
            header[..8].copy_from_slice(&pid.to_le_bytes());
            header[8..16].copy_from_slice(&ts.to_le_bytes());
            header[16..20].copy_from_slice(&(len as u32).to_le_bytes());
            header[20] = kind_byte(kind);
            header[21] = copy_of as u8;
            let record = &scratch[..1 + len.div_ceil(32)];
            self.tx.with_mut(|tx| (*tx).push_all(record))
        })
    }
}

/// The collector's side of a term ring: the ring's consumer end, behind the lane's lock.
pub(crate) struct LaneConsumer {
    ring: RingConsumer<Chunk>,
}

impl LaneConsumer {
    /// Moves the records in the term ring into `held`, the thread's copies on the consumer
    /// side. Call after draining the thread's event ring.
    pub(crate) fn drain_into(&mut self, held: &mut HeldCopies) {
        // Records are published whole: a drain never ends inside one.
        let HeldCopies { bytes, base, current, waiting, .. } = held;
        self.ring.drain(|chunk| match current {
            None => {
                let word = |at: usize| u64::from_le_bytes(chunk[at..at + 8].try_into().unwrap_or_default());
                let len = u32::from_le_bytes(chunk[16..20].try_into().unwrap_or_default());
                let header = Header { key: (word(0), word(8)), kind: chunk[20], copy_of: chunk[21] };
                let span = Span { at: *base + bytes.len() as u64, len };
                if len == 0 {
                    waiting.push_back((header, span));
                } else {
                    *current = Some((header, span));
                }
            }
            Some((header, span)) => {
                let end = (span.at - *base) as usize + span.len as usize;
                let take = (end - bytes.len()).min(32);
                bytes.extend_from_slice(&chunk[..take]);
                if bytes.len() == end {
                    waiting.push_back((*header, *span));
                    *current = None;
                }
            }
        });
    }
}

/// What a record's header says: the event's `(pid, ts)`, its kind and which copy it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Header {
    key: (u64, u64),
    kind: u8,
    copy_of: u8,
}

/// Where a drained copy's bytes are in its thread's [`HeldCopies`]: a position counted from
/// the thread's first byte, so that it stays valid when earlier bytes are let go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Span {
    at: u64,
    len: u32,
}

impl Span {
    fn end(self) -> u64 {
        self.at + u64::from(self.len)
    }
}

/// The copies matched with a drained event that waits to be folded in: spans in its
/// thread's [`HeldCopies`], made into [`EventCopies`] by [`HeldCopies::resolve`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PendingCopies {
    args: Option<Span>,
    key: Option<Span>,
}

/// One thread's drained copies, on the consumer side: their bytes, in the order the thread
/// pushed them, and the copies not yet matched with an event.
///
/// A copy is made into a [`TermCopy`] (an allocation) only when its event is folded in, in
/// timestamp order with the others, not when it is drained: a call's copy is then usually
/// freed again (the call was not kept) within the same few events, so the allocator hands
/// the same warm memory out again, where allocating a whole drain's copies first touched a
/// fresh line for each (`make collector-ceiling`, `args`). Copies of one thread are folded
/// in the order they were pushed (its events are, and a collection folds in the events
/// older than its cutoff), so the bytes before the last copy folded in can go.
#[derive(Default)]
pub(crate) struct HeldCopies {
    /// The bytes from position `base` on.
    bytes: Vec<u8>,
    base: u64,
    /// The record being read.
    current: Option<(Header, Span)>,
    waiting: VecDeque<(Header, Span)>,
    /// Bytes before this position belong to copies already folded in (or never matched).
    done: u64,
}

impl HeldCopies {
    /// The copies made for `event` (timestamp in ticks, as pushed), if any. Call with the
    /// thread's events in the order they were drained: copies and events are in push order
    /// (one thread's timestamps only grow), so a copy stamped before `event` belongs to an
    /// event that never reached the ring and is dropped; one stamped after waits for its own.
    #[inline]
    pub(crate) fn take_for(&mut self, event: &Event) -> PendingCopies {
        let mut copies = PendingCopies::default();
        while let Some(&(Header { key: (pid, ts), kind, copy_of }, span)) = self.waiting.front() {
            if ts < event.ts {
                self.waiting.pop_front();
                continue;
            }
            if (pid, ts) != (event.pid, event.ts) || kind != kind_byte(event.kind) {
                break;
            }
            self.waiting.pop_front();
            if copy_of == CopyOf::Key as u8 {
                copies.key = Some(span);
            } else {
                copies.args = Some(span);
            }
        }
        copies
    }

    /// The copies of an event being folded in; the bytes before them can go.
    #[inline]
    pub(crate) fn resolve(&mut self, pending: PendingCopies) -> EventCopies {
        let mut copy = |span: Option<Span>| {
            let span = span?;
            self.done = self.done.max(span.end());
            let from = (span.at - self.base) as usize;
            self.bytes.get(from..from + span.len as usize).map(TermCopy::from)
        };
        EventCopies { args: copy(pending.args), key: copy(pending.key) }
    }

    /// Lets go of the bytes of copies folded in: all of them at once when nothing after them
    /// is held, else once they are at least half the buffer (a move of what is left).
    pub(crate) fn let_go(&mut self) {
        let done = (self.done.saturating_sub(self.base) as usize).min(self.bytes.len());
        if done == self.bytes.len() || (done >= 4096 && done >= self.bytes.len() / 2) {
            self.bytes.drain(..done);
            self.base += done as u64;
        }
    }

    /// Heap bytes: the copies' bytes and the records waiting for their events.
    pub(crate) fn heap_bytes(&self) -> usize {
        use crate::memory::vec_bytes;
        vec_bytes::<u8>(self.bytes.capacity()) + vec_bytes::<(Header, Span)>(self.waiting.capacity())
    }

    /// Bytes held (for tests).
    #[cfg(test)]
    fn held(&self) -> usize {
        self.bytes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Mfa;
    use crate::producer::Producer;

    fn event(pid: u64, ts: u64, kind: EventKind) -> Event {
        Event { ts, pid, mfa: Mfa { module: 0, function: 0, arity: 0 }, kind }
    }

    fn push(lane: &TermLane, pid: u64, ts: u64, kind: EventKind, copy_of: CopyOf, body: &[u8]) -> bool {
        // SAFETY: each test is its lane's only user.
        unsafe {
            lane.push_copy(pid, ts, kind, copy_of, |out| {
                out[..body.len()].copy_from_slice(body);
                body.len()
            })
        }
    }

    #[test]
    fn copies_pair_with_their_events_in_push_order() {
        let mut producer = Producer::new(64);
        producer.term_lane = TermLane::new(16, 100, true, false);
        let lane = producer.term_lane.as_ref().unwrap();
        let push = |pid, ts, kind, body: &[u8]| push(lane, pid, ts, kind, CopyOf::Args, body);
        let long: Vec<u8> = (0..100).collect();
        assert!(push(1, 10, EventKind::Call, b"short"));
        assert!(push(2, 11, EventKind::Call, &long));
        assert!(push(1, 12, EventKind::Return, b""));
        assert!(push(3, 13, EventKind::Call, b"orphan"));
        let mut copies = HeldCopies::default();
        lane.rx.lock().drain_into(&mut copies);
        let args = |copies: &mut HeldCopies, event: Event| {
            let pending = copies.take_for(&event);
            copies.resolve(pending).args
        };
        // The event of (1, 10) never reached its ring: its copy is dropped at the next event.
        assert_eq!(args(&mut copies, event(2, 11, EventKind::Call)).as_deref(), Some(&long[..]));
        assert_eq!(args(&mut copies, event(1, 12, EventKind::Exception)), None, "kinds must match");
        assert_eq!(args(&mut copies, event(4, 12, EventKind::Return)), None);
        assert_eq!(copies.waiting.len(), 2, "later copies wait for their events");
        assert_eq!(args(&mut copies, event(3, 13, EventKind::Call)).as_deref(), Some(&b"orphan"[..]));
        assert!(copies.waiting.is_empty());
        copies.let_go();
        assert_eq!(copies.held(), 0, "every copy was folded in or passed");
        // The ring was drained: its 16 chunks hold three 100-byte copies (5 chunks each).
        assert!((20..23).all(|ts| push(2, ts, EventKind::Call, &long)));
        assert!(!push(2, 23, EventKind::Call, &long), "full: refused whole");
    }

    /// Bytes of copies folded in go, and the copies still held read the same bytes after the
    /// buffer moved what was left to its front.
    #[test]
    fn held_copies_stay_whole_when_earlier_ones_go() {
        let mut producer = Producer::new(64);
        producer.term_lane = TermLane::new(2048, 100, true, false);
        let lane = producer.term_lane.as_ref().unwrap();
        let body = |ts: u64| -> Vec<u8> { (0..100).map(|i| (ts * 7 + i) as u8).collect() };
        let mut copies = HeldCopies::default();
        let mut pending = VecDeque::new();
        // Under Miri a fifth of the copies (63 s to 11): still past let_go's 4,096 bytes, so
        // the front moves each round.
        let (per_round, kept) = if cfg!(miri) { (60u64, 10usize) } else { (300, 100) };
        for round in 0..3u64 {
            let from = round * per_round;
            assert!((from..from + per_round).all(|ts| push(lane, 1, ts, EventKind::Call, CopyOf::Args, &body(ts))));
            lane.rx.lock().drain_into(&mut copies);
            pending.extend((from..from + per_round).map(|ts| (ts, copies.take_for(&event(1, ts, EventKind::Call)))));
            // Fold in all but the last `kept`: their bytes go, the rest move to the front.
            while pending.len() > kept {
                let (ts, waiting) = pending.pop_front().unwrap();
                assert_eq!(copies.resolve(waiting).args.as_deref(), Some(&body(ts)[..]));
            }
            copies.let_go();
            assert_eq!(copies.held(), kept * 100, "round {round}: only the copies not folded in are held");
        }
        for (ts, waiting) in pending.drain(..) {
            assert_eq!(copies.resolve(waiting).args.as_deref(), Some(&body(ts)[..]));
        }
        copies.let_go();
        assert_eq!(copies.held(), 0);
    }

    #[test]
    fn a_call_takes_its_key_and_its_arguments() {
        let mut producer = Producer::new(64);
        producer.term_lane = TermLane::new(64, 100, true, true);
        let lane = producer.term_lane.as_ref().unwrap();
        assert!(push(lane, 1, 10, EventKind::Call, CopyOf::Key, b"gold"));
        assert!(push(lane, 1, 10, EventKind::Call, CopyOf::Args, b"[1]"));
        assert!(push(lane, 2, 11, EventKind::Call, CopyOf::Key, b"silver"));
        assert!(push(lane, 1, 12, EventKind::Return, CopyOf::Args, b"ok"));
        let mut copies = HeldCopies::default();
        lane.rx.lock().drain_into(&mut copies);
        let pending: Vec<PendingCopies> = [event(1, 10, EventKind::Call), event(2, 11, EventKind::Call), event(1, 12, EventKind::Return)]
            .iter()
            .map(|event| copies.take_for(event))
            .collect();
        let mut got = pending.into_iter().map(|p| copies.resolve(p));
        let (first, second, third) = (got.next().unwrap(), got.next().unwrap(), got.next().unwrap());
        assert_eq!((first.key.as_deref(), first.args.as_deref()), (Some(&b"gold"[..]), Some(&b"[1]"[..])));
        assert_eq!((second.key.as_deref(), second.args), (Some(&b"silver"[..]), None));
        assert_eq!((third.key, third.args.as_deref()), (None, Some(&b"ok"[..])));
    }
}
