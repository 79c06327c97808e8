//! `args => true`: how a bounded copy of a call's arguments or of its result travels from the
//! scheduler to the collector, beside its event.
//!
//! The 32-byte event does not change. A callback that copies a term writes a record into its
//! thread's *term ring* (a ring of 32-byte chunks, allocated fallibly with the thread's
//! producer, written only by that thread): a header chunk with the event's own pid and
//! timestamp, then the encoded term ([`crate::terms`]), published at once. It pushes the
//! record before the event, and the collector drains a thread's event ring before its term
//! ring, so a drained event's copy has been drained too. The collector matches a copy to its
//! event by `(pid, ts)` (a process's events on one thread have distinct timestamps) when it
//! folds the event in, and forgets copies whose event never came (a full event ring): no
//! copy outlives the collection after its event's.
//!
//! A full term ring refuses the copy (counted, `args_dropped`); the event still goes.

use std::collections::HashMap;
use std::sync::Arc;

use crate::event::{Event, EventKind};
use crate::options::{OptionError, OptionValue};
use crate::producer::{Producer, ProducerRef};
use crate::ring::{self, RingConsumer, RingProducer};
use crate::sync::{Mutex, UnsafeCell};
use crate::terms;

/// One slot of a term ring.
pub type Chunk = [u8; 32];

/// A copy as the aggregator keeps it: the encoded term, shared by a slow call and the
/// flight recorder.
pub type TermCopy = Arc<[u8]>;

/// What a session copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArgsConfig {
    /// Copy arguments and results (`args`).
    pub enabled: bool,
    /// Bound of one copy (`max_term_bytes`).
    pub max_term_bytes: usize,
}

impl Default for ArgsConfig {
    fn default() -> Self {
        ArgsConfig { enabled: false, max_term_bytes: terms::DEFAULT_MAX_TERM_BYTES }
    }
}

/// The option keys this module parses.
pub const OPTIONS: [&str; 2] = ["args", "max_term_bytes"];

/// Parses one of [`OPTIONS`]; `index` is the pair's position, for the error.
pub fn parse_option(key: &str, value: &OptionValue, index: usize, config: &mut ArgsConfig) -> Result<(), OptionError> {
    let bad = |expected: String| OptionError::BadValue { index, expected };
    match (key, value) {
        ("args", OptionValue::Atom(a)) if a == "true" || a == "false" => config.enabled = a == "true",
        ("args", _) => return Err(bad("true or false".into())),
        ("max_term_bytes", OptionValue::Integer(n))
            if (terms::MAX_TERM_BYTES_RANGE.0..=terms::MAX_TERM_BYTES_RANGE.1).contains(n) =>
        {
            config.max_term_bytes = *n as usize
        }
        ("max_term_bytes", _) => {
            let (low, high) = terms::MAX_TERM_BYTES_RANGE;
            return Err(bad(format!("an integer from {low} to {high}")));
        }
        _ => return Err(OptionError::Unknown { index }),
    }
    Ok(())
}

/// A thread's term ring and the buffer it encodes into.
pub(crate) struct TermLane {
    tx: UnsafeCell<RingProducer<Chunk>>,
    /// A header chunk, then room for `max_term_bytes`.
    scratch: UnsafeCell<Box<[Chunk]>>,
    max_term_bytes: usize,
    pub(crate) rx: Mutex<RingConsumer<Chunk>>,
}

impl TermLane {
    /// A lane of `chunks` slots (at least the largest record), or `None` if the memory
    /// cannot be had.
    pub(crate) fn new(chunks: usize, max_term_bytes: usize) -> Option<TermLane> {
        let record = 1 + max_term_bytes.div_ceil(32);
        let (tx, rx) = ring::channel::<Chunk>(chunks.max(2 * record)).ok()?;
        let mut scratch = Vec::new();
        scratch.try_reserve_exact(record).ok()?;
        scratch.resize(record, [0u8; 32]);
        Some(TermLane {
            tx: UnsafeCell::new(tx),
            scratch: UnsafeCell::new(scratch.into_boxed_slice()),
            max_term_bytes,
            rx: Mutex::new(rx),
        })
    }
}

fn kind_byte(kind: EventKind) -> u8 {
    kind as u8
}

impl ProducerRef<'_> {
    /// True if the session copies arguments and results (and this thread's term ring could
    /// be allocated).
    #[inline]
    pub fn copies_terms(&self) -> bool {
        self.producer.terms.is_some()
    }

    /// Copies a term for the event of `pid` stamped `ts`: `encode` writes it into the buffer
    /// it is given (at most `max_term_bytes`) and returns the length. Counted as dropped when
    /// the term ring is full. Push the copy before its event.
    #[inline]
    pub fn copy_term(&self, pid: u64, ts: u64, kind: EventKind, encode: impl FnOnce(&mut [u8]) -> usize) {
        let Some(lane) = &self.producer.terms else { return };
        // SAFETY: only the thread owning this producer has a `ProducerRef` to it (see the
        // `Sync` impl of `Producer`); the two `&mut` made here are dropped before returning,
        // and nothing in between re-enters this producer.
        let pushed = lane.scratch.with_mut(|scratch| unsafe {
            let scratch = &mut *scratch;
            let (header, body) = scratch.split_at_mut(1);
            let body = &mut body.as_flattened_mut()[..lane.max_term_bytes];
            let len = encode(body).min(lane.max_term_bytes);
            let header = &mut header[0];
            header[..8].copy_from_slice(&pid.to_le_bytes());
            header[8..16].copy_from_slice(&ts.to_le_bytes());
            header[16..20].copy_from_slice(&(len as u32).to_le_bytes());
            header[20] = kind_byte(kind);
            let record = &scratch[..1 + len.div_ceil(32)];
            lane.tx.with_mut(|tx| (*tx).push_all(record))
        });
        if !pushed {
            self.count_copy_dropped();
        }
    }
}

/// A record being read: its key, kind, length and the bytes so far.
type Partial = ((u64, u64), u8, usize, Vec<u8>);

/// The collector's side: copies drained and not yet matched with their event.
#[derive(Default)]
pub(crate) struct Pairing {
    waiting: HashMap<(u64, u64), (u8, TermCopy)>,
}

impl Pairing {
    /// Takes in the records in `producer`'s term ring. Call after draining its event ring.
    pub(crate) fn drain(&mut self, producer: &Producer) {
        let Some(lane) = &producer.terms else { return };
        let mut rx = lane.rx.lock();
        // Records are published whole: a drain never ends inside one.
        let mut current: Option<Partial> = None;
        rx.drain(|chunk| match &mut current {
            None => {
                let word = |at: usize| u64::from_le_bytes(chunk[at..at + 8].try_into().unwrap_or_default());
                let len = u32::from_le_bytes(chunk[16..20].try_into().unwrap_or_default()) as usize;
                let record = ((word(0), word(8)), chunk[20], len, Vec::with_capacity(len));
                if len == 0 {
                    self.waiting.insert(record.0, (record.1, Arc::from(record.3)));
                } else {
                    current = Some(record);
                }
            }
            Some((_, _, len, bytes)) => {
                let take = (*len - bytes.len()).min(32);
                bytes.extend_from_slice(&chunk[..take]);
                if bytes.len() == *len {
                    if let Some((key, kind, _, bytes)) = current.take() {
                        self.waiting.insert(key, (kind, Arc::from(bytes)));
                    }
                }
            }
        });
    }

    /// The copy made for `event` (timestamp in ticks, as pushed), if any.
    #[inline]
    pub(crate) fn take(&mut self, event: &Event) -> Option<TermCopy> {
        if self.waiting.is_empty() {
            return None;
        }
        match self.waiting.remove(&(event.pid, event.ts)) {
            Some((kind, copy)) if kind == kind_byte(event.kind) => Some(copy),
            _ => None,
        }
    }

    /// Forgets the copies of events stamped before `cutoff` (those events were folded in, or
    /// never reached their ring).
    pub(crate) fn forget_before(&mut self, cutoff: u64) {
        if !self.waiting.is_empty() {
            self.waiting.retain(|(_, ts), _| *ts >= cutoff);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options() {
        let mut c = ArgsConfig::default();
        parse_option("args", &OptionValue::Atom("true".into()), 0, &mut c).unwrap();
        parse_option("max_term_bytes", &OptionValue::Integer(4096), 1, &mut c).unwrap();
        assert_eq!(c, ArgsConfig { enabled: true, max_term_bytes: 4096 });
        assert!(parse_option("args", &OptionValue::Integer(1), 0, &mut c).is_err());
        assert!(parse_option("max_term_bytes", &OptionValue::Integer(10), 0, &mut c)
            .is_err_and(|e| e == OptionError::BadValue { index: 0, expected: "an integer from 64 to 65536".into() }));
    }
}
