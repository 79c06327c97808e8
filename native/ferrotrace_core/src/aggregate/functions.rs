//! The per-function statistics: counts, latency, the interval's figures, slow calls, own
//! time, the latency split and keys ([`FunctionStats`]), and the table that finds a
//! function's statistics per event (`Functions`): bounded by `max_functions`, and keeping
//! to the session's filter (the specs `calls/2` traced).
//!
//! A *filter*: on OTP 25 trace patterns belong to the node, so a session's processes also
//! produce events for patterns another session or tool set; those are counted in
//! `foreign_events`, never aggregated.

use super::compact::Compact;
use super::histogram::{histogram_bytes, MAX_LATENCY_NS};
use super::keyed::KeyedLatency;
use crate::memory::{alloc_bytes, map_bytes, vec_bytes, Memory};
use super::own::OwnTime;
use super::pairing::PairingCounters;
use super::probe::{InnerEvents, RawLatency};
use super::slowest::{SlowCalls, SlowestConfig};
use super::split::SplitStats;
use crate::event::{EventKind, Mfa};
use crate::hasher::WordMap;

/// Functions outside the filter remembered as such; past this they are matched each time.
const MAX_FOREIGN: usize = 4_096;
/// Marks a function outside the session's filter in the function index.
const FOREIGN: usize = usize::MAX;

/// One spec of the filter; `None` is the `'_'` wildcard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MfaPattern {
    /// Module atom bits, or any.
    pub module: Option<u64>,
    /// Function atom bits, or any.
    pub function: Option<u64>,
    /// Arity, or any.
    pub arity: Option<u32>,
}

impl MfaPattern {
    /// True if `mfa` is one of the functions this pattern names.
    pub fn matches(&self, mfa: &Mfa) -> bool {
        self.module.is_none_or(|m| m == mfa.module)
            && self.function.is_none_or(|f| f == mfa.function)
            && self.arity.is_none_or(|a| a == mfa.arity)
    }
}

/// The figures of one function over the current interval: since the last
/// [`super::Aggregator::reset_interval`]. Kept beside the cumulative ones by the collector
/// (never on the schedulers); reset in place at each read, so its memory is allocated once.
pub struct IntervalStats {
    /// Calls seen in the interval.
    pub calls: u64,
    /// Returns seen in the interval.
    pub returns: u64,
    /// Exceptions seen in the interval.
    pub exceptions: u64,
    /// Sum of the latencies recorded in the interval, ns (saturating).
    pub total_ns: u64,
    /// Latencies recorded in the interval (growing, like the cumulative one).
    pub latency: Compact,
}

impl IntervalStats {
    /// True if nothing happened in the interval.
    pub fn is_empty(&self) -> bool {
        self.calls == 0 && self.returns == 0 && self.exceptions == 0
    }

    fn reset(&mut self) {
        self.calls = 0;
        self.returns = 0;
        self.exceptions = 0;
        self.total_ns = 0;
        // Zeroes the counts; keeps the buckets allocated.
        self.latency.reset();
    }

    fn merge_from(&mut self, other: &IntervalStats) {
        self.calls += other.calls;
        self.returns += other.returns;
        self.exceptions += other.exceptions;
        self.total_ns = self.total_ns.saturating_add(other.total_ns);
        self.latency.add(&other.latency);
    }
}

/// Statistics of one function.
pub struct FunctionStats {
    /// Calls seen.
    pub calls: u64,
    /// Returns seen (`return_from`).
    pub returns: u64,
    /// Exceptions seen (`exception_from`).
    pub exceptions: u64,
    /// Sum of recorded latencies, ns (saturating).
    pub total_ns: u64,
    /// Latency (call to return or exception), ns.
    pub latency: Compact,
    /// Traced count-only: a tail-recursive loop (calls counted, never paired).
    pub loop_only: bool,
    /// Outside the filter since it changed (`ferrotrace:remove/2`): its figures stay, its
    /// later calls are foreign; the calls it had open still pair.
    pub removed: bool,
    /// The same figures since the last interval read (`ferrotrace:watch/2`).
    pub interval: IntervalStats,
    /// The slowest calls and those over the threshold (`slowest`).
    pub slow: SlowCalls,
    /// Own time: latency less the time in traced callees of the same process.
    pub own: OwnTime,
    /// The latency split (running, descheduled, GC), once scheduling events were seen.
    pub split: Option<Box<SplitStats>>,
    /// Calls that returned on another scheduler thread than the one they were called on.
    pub migrations: u64,
    /// The most return-trace frames of the session its process had open at one of its calls
    /// (the frame bound refuses calls past `frames::MAX_FRAMES`; a loop found at run time
    /// shows how deep it went before it was).
    pub max_frames: u32,
    /// The process (its pid's word, 0 for none yet) that had `max_frames` open: the report's
    /// `frames:` note names it.
    pub max_frames_pid: u64,
    /// Latency per key (`key`), once a call came with one.
    pub by_key: Option<Box<KeyedLatency>>,
    /// The session's events inside this function's paired calls (`probe.rs`).
    pub inner: InnerEvents,
    /// The latency before compensation, once a call had something taken out (`probe.rs`);
    /// `latency`, `total_ns`, the interval's and own time's are then compensated.
    pub raw: Option<Box<RawLatency>>,
    /// When the function's first event was recorded (ns): orders functions when
    /// aggregators are merged.
    pub(super) first_ns: u64,
}

impl FunctionStats {
    /// Empty figures of a function first seen at `first_ns`, keeping slow calls as `slowest`
    /// says.
    pub(super) fn new(first_ns: u64, slowest: SlowestConfig) -> Self {
        // Nothing allocated until a call returns; a few KiB each once filled (`compact.rs`).
        FunctionStats::with_histograms(first_ns, slowest, [Compact::new(), Compact::new(), Compact::new()])
    }

    /// These figures emptied, as `new(first_ns, slowest)` makes them, but for the
    /// histograms' counts, zeroed and kept allocated: a merge made into them
    /// (`Aggregator::merged`) copies into memory already mapped instead of faulting in fresh
    /// pages.
    pub(super) fn emptied(self, first_ns: u64, slowest: SlowestConfig) -> Self {
        let mut histograms = [self.latency, self.interval.latency, self.own.latency];
        histograms.iter_mut().for_each(Compact::reset);
        FunctionStats::with_histograms(first_ns, slowest, histograms)
    }

    /// Empty figures over the given empty histograms: latency, the interval's, own time's.
    fn with_histograms(first_ns: u64, slowest: SlowestConfig, [latency, interval, own]: [Compact; 3]) -> Self {
        FunctionStats {
            calls: 0,
            returns: 0,
            exceptions: 0,
            total_ns: 0,
            latency,
            loop_only: false,
            removed: false,
            interval: IntervalStats { calls: 0, returns: 0, exceptions: 0, total_ns: 0, latency: interval },
            slow: SlowCalls::new(slowest),
            own: OwnTime { total_ns: 0, latency: own },
            split: None,
            migrations: 0,
            max_frames: 0,
            max_frames_pid: 0,
            by_key: None,
            inner: InnerEvents::default(),
            raw: None,
            first_ns,
        }
    }

    pub(super) fn count_call(&mut self) {
        self.calls += 1;
        self.interval.calls += 1;
    }

    pub(super) fn count_return(&mut self, kind: EventKind) {
        if kind == EventKind::Return {
            self.returns += 1;
            self.interval.returns += 1;
        } else {
            self.exceptions += 1;
            self.interval.exceptions += 1;
        }
    }

    pub(super) fn record_latency(&mut self, ns: u64) {
        let ns = ns.clamp(1, MAX_LATENCY_NS);
        self.total_ns = self.total_ns.saturating_add(ns);
        self.interval.total_ns = self.interval.total_ns.saturating_add(ns);
        self.latency.record(ns);
        self.interval.latency.record(ns);
    }

    /// Records a paired call's latency `raw_ns` as `ns` (compensated: `ns < raw_ns`), keeping
    /// the raw one (`probe.rs`).
    pub(super) fn record_compensated(&mut self, raw_ns: u64, ns: u64) {
        if ns < raw_ns || self.raw.is_some() {
            // The calls before this had nothing taken out: their raw latencies are these.
            let raw = self.raw.get_or_insert_with(|| Box::new(RawLatency { total_ns: self.total_ns, latency: self.latency.clone() }));
            raw.record(raw_ns);
        }
        self.record_latency(ns);
    }

    /// Adds `other`'s figures (the same function, in another aggregator) to these.
    pub fn merge_from(&mut self, other: &FunctionStats) {
        self.calls += other.calls;
        self.returns += other.returns;
        self.exceptions += other.exceptions;
        self.total_ns = self.total_ns.saturating_add(other.total_ns);
        self.latency.add(&other.latency);
        self.loop_only |= other.loop_only;
        self.interval.merge_from(&other.interval);
        self.slow.merge_from(&other.slow);
        self.own.merge_from(&other.own);
        if let Some(from) = &other.split {
            self.split.get_or_insert_with(Default::default).merge_from(from);
        }
        self.migrations += other.migrations;
        if other.max_frames > self.max_frames {
            self.max_frames = other.max_frames;
            self.max_frames_pid = other.max_frames_pid;
        }
        if let Some(from) = &other.by_key {
            self.by_key.get_or_insert_with(Default::default).merge_from(from);
        }
        self.inner.merge_from(&other.inner);
        match (&mut self.raw, &other.raw) {
            (Some(raw), Some(from)) => raw.merge_from(from),
            (Some(raw), None) => raw.merge_from(&RawLatency { total_ns: other.total_ns, latency: other.latency.clone() }),
            // The latencies of `self` (merged above) are raw until now: add `other`'s raw to
            // them less `other`'s compensated ones, which is a copy of ours plus `other`'s raw.
            (None, Some(from)) => {
                let mut raw = RawLatency { total_ns: self.total_ns.saturating_sub(other.total_ns), latency: self.latency.clone() };
                raw.latency.subtract(&other.latency);
                raw.merge_from(from);
                self.raw = Some(Box::new(raw));
            }
            (None, None) => {}
        }
        self.first_ns = self.first_ns.min(other.first_ns);
    }

    /// Adds this function's heap bytes (not its own record, counted with the function
    /// table) to `memory`'s parts.
    fn add_memory(&self, memory: &mut Memory) {
        memory.histograms += self.latency.bytes() + self.own.latency.bytes();
        memory.intervals += self.interval.latency.bytes();
        memory.slow_calls += self.slow.bytes();
        if let Some(split) = &self.split {
            memory.histograms += alloc_bytes(size_of::<SplitStats>())
                + histogram_bytes(&split.running)
                + histogram_bytes(&split.descheduled)
                + histogram_bytes(&split.gc);
        }
        if let Some(raw) = &self.raw {
            memory.histograms += alloc_bytes(size_of::<RawLatency>()) + raw.latency.bytes();
        }
        if let Some(keyed) = &self.by_key {
            let (table, histograms) = keyed.bytes();
            memory.keys += alloc_bytes(size_of::<KeyedLatency>()) + table;
            memory.histograms += histograms;
        }
    }
}

/// The functions with statistics, in the order they were first seen, and how each event
/// finds its function's.
pub(super) struct Functions {
    /// Index into `stats` per function (`FOREIGN` for one outside the filter).
    pub(super) index: WordMap<Mfa, usize>,
    /// In insertion order.
    pub(super) stats: Vec<(Mfa, FunctionStats)>,
    /// The last function looked up: hot loops hit it and skip the hash.
    last: Option<(Mfa, usize)>,
    pub(super) max_functions: usize,
    /// The specs traced; `None` aggregates every function (raw sessions).
    pub(super) filter: Option<Vec<MfaPattern>>,
    /// Modules never aggregated, whatever the filter (module atom bits): ferrotrace's own,
    /// whose patterns a `'_'` module covers until the keeper takes them off.
    excluded: Vec<u64>,
    /// Functions indexed as `FOREIGN`.
    foreign: usize,
    /// What each function keeps of its slow calls.
    pub(super) slowest: SlowestConfig,
}

impl Functions {
    /// No function yet; statistics for at most `max_functions`.
    pub(super) fn new(max_functions: usize) -> Self {
        Functions {
            index: WordMap::default(),
            stats: Vec::new(),
            last: None,
            max_functions,
            filter: None,
            excluded: Vec::new(),
            foreign: 0,
            slowest: SlowestConfig::default(),
        }
    }

    /// The statistics of `mfa`, for an event at `ts`: a function seen for the first time
    /// gets them (counted only, `loop_only`, if `is_loop` says so); none outside the filter
    /// or past `max_functions`.
    #[inline]
    pub(super) fn stats_for(&mut self, mfa: Mfa, ts: u64, is_loop: impl FnOnce(&Mfa) -> bool) -> Option<&mut FunctionStats> {
        let index = match self.last {
            Some((last, index)) if last == mfa => index,
            _ => {
                let index = match self.index.get(&mfa) {
                    Some(&FOREIGN) => return None,
                    Some(index) => *index,
                    None if self.outside_filter(&mfa) => {
                        if self.foreign < MAX_FOREIGN {
                            self.foreign += 1;
                            self.index.insert(mfa, FOREIGN);
                        }
                        return None;
                    }
                    None if self.stats.len() < self.max_functions => self.add(mfa, ts, is_loop(&mfa)),
                    None => return None,
                };
                self.last = Some((mfa, index));
                index
            }
        };
        Some(&mut self.stats[index].1)
    }

    /// Gives `mfa`, first seen at `ts`, its statistics; their index. Once per function:
    /// kept out of `stats_for`, whose other paths run per event.
    #[inline(never)]
    fn add(&mut self, mfa: Mfa, ts: u64, loop_only: bool) -> usize {
        let mut stats = FunctionStats::new(ts, self.slowest);
        stats.loop_only = loop_only;
        self.stats.push((mfa, stats));
        self.index.insert(mfa, self.stats.len() - 1);
        self.stats.len() - 1
    }

    fn outside_filter(&self, mfa: &Mfa) -> bool {
        self.excluded.contains(&mfa.module) || self.filter.as_ref().is_some_and(|f| !f.iter().any(|p| p.matches(mfa)))
    }

    /// Counts an event `stats_for` found no statistics for: outside the filter, or past
    /// `max_functions`.
    pub(super) fn count_untracked(&self, mfa: Mfa, counters: &mut PairingCounters) {
        if self.index.get(&mfa) == Some(&FOREIGN) || self.outside_filter(&mfa) {
            counters.foreign_events += 1;
        } else {
            counters.untracked_events += 1;
        }
    }

    /// Aggregates only the functions `patterns` match from now on; those with figures that
    /// it no longer matches keep them, marked `removed`.
    pub(super) fn set_filter(&mut self, patterns: Vec<MfaPattern>) {
        self.filter = Some(patterns);
        self.refilter();
    }

    /// Never aggregates the functions of `modules` (atom bits) from now on, whatever the
    /// filter; those with figures keep them, marked `removed`.
    pub(super) fn exclude_modules(&mut self, modules: Vec<u64>) {
        self.excluded = modules;
        self.refilter();
    }

    /// After the filter or the exclusions changed: what is `removed`, and no function
    /// remembered as foreign.
    fn refilter(&mut self) {
        let mut stats = std::mem::take(&mut self.stats);
        for (mfa, stats) in stats.iter_mut() {
            stats.removed = self.outside_filter(mfa);
        }
        self.stats = stats;
        self.index.retain(|_, index| *index != FOREIGN);
        self.foreign = 0;
        self.last = None;
    }

    /// Counts `mfa`'s calls without pairing them, if it has statistics.
    pub(super) fn set_loop_only(&mut self, mfa: &Mfa) {
        if let Some(&index) = self.index.get(mfa).filter(|index| **index != FOREIGN) {
            self.stats[index].1.loop_only = true;
        }
    }

    /// Statistics of one function, if it was seen.
    pub(super) fn get(&self, mfa: &Mfa) -> Option<&FunctionStats> {
        // A function outside the filter is in the index as `FOREIGN`, with no statistics.
        self.index.get(mfa).and_then(|index| self.stats.get(*index)).map(|(_, stats)| stats)
    }

    /// Ends the current interval of every function.
    pub(super) fn reset_interval(&mut self) {
        for (_, stats) in self.stats.iter_mut() {
            if !stats.interval.is_empty() {
                stats.interval.reset();
            }
        }
    }

    /// Adds every function's heap bytes to `memory`'s parts; the table's own bytes.
    pub(super) fn add_memory(&self, memory: &mut Memory) -> usize {
        for (_, stats) in &self.stats {
            stats.add_memory(memory);
        }
        map_bytes(&self.index)
            + vec_bytes::<(Mfa, FunctionStats)>(self.stats.capacity())
            + self.filter.as_ref().map_or(0, |f| vec_bytes::<MfaPattern>(f.capacity()))
    }
}
