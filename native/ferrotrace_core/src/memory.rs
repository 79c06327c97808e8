//! What a session holds, by part, in bytes: `ferrotrace:summary/1`'s `memory`.
//!
//! Computed off the hot path, by a reader that holds the aggregators (the summary NIF, on a
//! dirty scheduler), by walking what each part holds: each measured thing says its own bytes
//! with the helpers here (`Aggregator::memory` adds them up), so this module depends on
//! nothing it measures. Sizes are the allocations' own,
//! estimated where Rust does not say them:
//! - a vector's or a deque's bytes are its capacity times its element's size (exact, but
//!   for the allocator's rounding, [`alloc_bytes`]);
//! - a hash map's are estimated from its capacity ([`map_bytes`]): hashbrown's buckets (a
//!   power of two, capacity × 8 / 7) times the entry's size plus a control byte each;
//! - a histogram's counts are `Histogram::distinct_values` × 8 bytes (its counts vector's
//!   length: an auto-resizing histogram's vector may have grown past it:
//!   [`super::histogram::histogram_bytes`]); a timed function's ([`super::compact::Compact`])
//!   are its vectors' capacities (exact);
//! - a kept term copy (`Arc<[u8]>`) is its bytes plus the two reference counts; a copy
//!   shared by a slow call and the recorder is counted in both;
//! - every allocation gets glibc malloc's overhead, 8 bytes rounded up to 16, at least 32
//!   ([`alloc_bytes`]), which matters for many small copies and boxes.
//!
//! Not counted: the allocator's free memory (what `malloc` keeps after a free: see the
//! README's Limitations), thread stacks (the collector and aggregator threads', mostly not
//! touched), and batches in flight to aggregator threads (at most 16 × 4,096 events each,
//! handed back as they are recorded).

use std::collections::HashMap;
use std::mem::size_of;

use crate::term_format::{EventCopies, TermCopy};

/// The bytes of one session, by part. `total()` is their sum.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Memory {
    /// Event rings, one per thread that produced an event (exact: slots × 32 bytes).
    pub ring_bytes: usize,
    /// Term rings (`args`, `key`): one per thread, and their encoding buffers, and the
    /// copies drained from them that wait to be folded in.
    pub term_rings: usize,
    /// The collector's buffers: events drained and not yet folded in, batches being
    /// filled for aggregator threads, the threads' producer records.
    pub collector: usize,
    /// The process table: what each process is doing now (scheduling, GC, waits).
    pub processes: usize,
    /// Open call frames: every process's stack (capacity × frame size) and the map of them.
    pub open_frames: usize,
    /// The argument and key copies the open frames hold.
    pub frame_copies: usize,
    /// Latency histograms: each function's cumulative and own-time ones, its latency split
    /// and per-key ones, and the other event kinds' (GC, messages, scheduling, ...).
    pub histograms: usize,
    /// Each function's interval histogram (`watch/2`): the third histogram per function.
    pub intervals: usize,
    /// Kept slow calls (`slowest`, `threshold`) and their argument and result copies.
    pub slow_calls: usize,
    /// Keys (`key`): the per-function key tables and the key copies.
    pub keys: usize,
    /// The recorder of the last events (`recent`) and its copies.
    pub recent: usize,
    /// Tables: functions and their figures' records, call paths, top-N tables, loops, the
    /// session's own record and its per-thread table.
    pub tables: usize,
    /// The merge kept between reads with `aggregators > 1` (a copy of the figures).
    pub merge: usize,
    /// The frame table of the session's slot (allocated once per slot, never freed: the
    /// next session in the slot reuses it).
    pub frame_table: usize,
}

impl Memory {
    /// Every part's name (as in the summary) and bytes.
    pub fn parts(&self) -> [(&'static str, usize); 14] {
        [
            ("ring_bytes", self.ring_bytes),
            ("term_rings", self.term_rings),
            ("collector", self.collector),
            ("processes", self.processes),
            ("open_frames", self.open_frames),
            ("frame_copies", self.frame_copies),
            ("histograms", self.histograms),
            ("intervals", self.intervals),
            ("slow_calls", self.slow_calls),
            ("keys", self.keys),
            ("recent", self.recent),
            ("tables", self.tables),
            ("merge", self.merge),
            ("frame_table", self.frame_table),
        ]
    }

    /// The sum of the parts.
    pub fn total(&self) -> usize {
        self.parts().iter().map(|(_, bytes)| bytes).sum()
    }

    /// Adds `other`'s parts to these.
    pub fn add(&mut self, other: &Memory) {
        self.ring_bytes += other.ring_bytes;
        self.term_rings += other.term_rings;
        self.collector += other.collector;
        self.processes += other.processes;
        self.open_frames += other.open_frames;
        self.frame_copies += other.frame_copies;
        self.histograms += other.histograms;
        self.intervals += other.intervals;
        self.slow_calls += other.slow_calls;
        self.keys += other.keys;
        self.recent += other.recent;
        self.tables += other.tables;
        self.merge += other.merge;
        self.frame_table += other.frame_table;
    }
}

/// The bytes glibc's malloc takes for a request of `bytes`: 8 bytes of header, rounded up
/// to 16, at least 32; nothing for an empty request (no allocation).
#[inline]
pub fn alloc_bytes(bytes: usize) -> usize {
    if bytes == 0 {
        0
    } else {
        (bytes + 8).div_ceil(16).max(2) * 16
    }
}

/// A vector's (or deque's) heap bytes: `capacity` elements of `T`.
#[inline]
pub fn vec_bytes<T>(capacity: usize) -> usize {
    alloc_bytes(capacity.saturating_mul(size_of::<T>()))
}

/// A hash map's heap bytes, estimated from its capacity: hashbrown keeps `capacity × 8 / 7`
/// buckets (a power of two), each an entry and a control byte, plus a group of 16 control
/// bytes.
pub fn map_bytes<K, V, S>(map: &HashMap<K, V, S>) -> usize {
    let capacity = map.capacity();
    if capacity == 0 {
        return 0;
    }
    let buckets = if capacity < 8 { (capacity + 1).next_power_of_two() } else { (capacity * 8 / 7).next_power_of_two() };
    alloc_bytes(buckets * (size_of::<(K, V)>() + 1) + 16)
}

/// A kept copy's heap bytes: its bytes and the `Arc`'s two counts.
#[inline]
pub fn copy_bytes(copy: &TermCopy) -> usize {
    alloc_bytes(copy.len() + 2 * size_of::<usize>())
}

/// An optional copy's heap bytes.
#[inline]
pub fn opt_copy_bytes(copy: &Option<TermCopy>) -> usize {
    copy.as_ref().map_or(0, copy_bytes)
}

/// An event's boxed copies (an open frame's, a routed event's): the box and both copies.
#[inline]
pub fn boxed_copies_bytes(copies: &EventCopies) -> usize {
    alloc_bytes(size_of::<EventCopies>()) + opt_copy_bytes(&copies.args) + opt_copy_bytes(&copies.key)
}
