//! What a session holds, by part, in bytes: `ferrotrace:summary/1`'s `memory`.
//!
//! Computed off the hot path, by a reader that holds the aggregators (the summary NIF, on a
//! dirty scheduler), by walking what each part holds. Sizes are the allocations' own,
//! estimated where Rust does not say them:
//! - a vector's or a deque's bytes are its capacity times its element's size (exact, but
//!   for the allocator's rounding, [`alloc_bytes`]);
//! - a hash map's are estimated from its capacity ([`map_bytes`]): hashbrown's buckets (a
//!   power of two, capacity × 8 / 7) times the entry's size plus a control byte each;
//! - a histogram's counts are [`Histogram::distinct_values`] × 8 bytes (its counts vector's
//!   length: an auto-resizing histogram's vector may have grown past it);
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

use hdrhistogram::Histogram;

use super::{Aggregator, Frame, FunctionStats};
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

/// A histogram's counts: `distinct_values` × 8 bytes.
#[inline]
pub fn histogram_bytes(h: &Histogram<u64>) -> usize {
    alloc_bytes(h.distinct_values() * size_of::<u64>())
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

impl FunctionStats {
    /// Adds this function's heap bytes (not its own record, counted with the function
    /// table) to `memory`'s parts.
    fn add_memory(&self, memory: &mut Memory) {
        memory.histograms += histogram_bytes(&self.latency) + histogram_bytes(&self.own.latency);
        memory.intervals += histogram_bytes(&self.interval.latency);
        memory.slow_calls += self.slow.bytes();
        if let Some(split) = &self.split {
            memory.histograms += alloc_bytes(size_of::<super::split::SplitStats>())
                + histogram_bytes(&split.running)
                + histogram_bytes(&split.descheduled)
                + histogram_bytes(&split.gc);
        }
        if let Some(keyed) = &self.by_key {
            let (table, histograms) = keyed.bytes();
            memory.keys += alloc_bytes(size_of::<super::keyed::KeyedLatency>()) + table;
            memory.histograms += histograms;
        }
    }
}

impl Aggregator {
    /// The bytes this aggregator holds, by part (its share of [`Memory`]: the processes,
    /// open frames, histograms, slow calls, keys, recent events and tables; not the
    /// rings, the collector's buffers or the frame table, which are the session's).
    pub fn memory(&self) -> Memory {
        let mut memory = Memory { processes: self.processes.bytes(), ..Memory::default() };
        memory.open_frames = map_bytes(&self.stacks)
            + self.stacks.values().map(|stack| vec_bytes::<Frame>(stack.capacity())).sum::<usize>()
            + map_bytes(&self.deep);
        memory.frame_copies = self
            .stacks
            .values()
            .flat_map(|stack| stack.iter())
            .filter_map(|frame| frame.copies.as_deref())
            .map(|copies| alloc_bytes(size_of::<EventCopies>()) + opt_copy_bytes(&copies.args) + opt_copy_bytes(&copies.key))
            .sum();
        for (_, stats) in &self.stats {
            stats.add_memory(&mut memory);
        }
        if let Some(recorder) = &self.recorder {
            memory.recent = recorder.bytes();
        }
        let (histograms, tables) = self.events.bytes();
        memory.histograms += histograms;
        memory.tables = tables
            + map_bytes(&self.functions)
            + vec_bytes::<(crate::event::Mfa, FunctionStats)>(self.stats.capacity())
            + map_bytes(&self.loops)
            + map_bytes(&self.reported_loops)
            + vec_bytes::<crate::event::Mfa>(self.new_loops.capacity())
            + self.filter.as_ref().map_or(0, |f| vec_bytes::<super::MfaPattern>(f.capacity()))
            + self.stack_paths.bytes();
        memory
    }

    /// Frees the open call frames (the stacks and the copies they hold) and the process
    /// table, for a session that stopped: no event comes any more. What they counted stays
    /// as numbers: `open_calls` and `tracked_processes` answer the values at the stop (the
    /// calls still open then are not counted as abandoned), and the process table's length
    /// those it had.
    pub fn free_state(&mut self) {
        self.stacks = Default::default();
        self.deep = Default::default();
        self.copy = None;
        self.key = None;
        self.processes.free_state();
    }
}
