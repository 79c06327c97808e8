//! Turns an ordered stream of call events into per-function statistics.
//!
//! Calls are paired with their return per process with a stack of open calls: a return pops
//! frames until it finds the frame of the same function, so recursion pairs innermost-first and
//! frames abandoned by an exception that was not traced are discarded (and counted) instead of
//! being paired with the wrong return. `return_trace` disables last-call optimisation for the
//! functions it traces, so a traced tail call still produces one return per call: figures count
//! the time until the callee's own return, including any tail-called traced functions.
//!
//! Memory is bounded: at most `max_functions` functions get statistics (calls of others are
//! counted in `untracked_events`), a process keeps at most `MAX_DEPTH` open calls, and at most
//! `max_open_calls` frames are open over all processes.
//!
//! Two things keep a session to its own question. A *filter* (the specs `calls/2` traced):
//! on OTP 25 trace patterns belong to the node, so a session's processes also produce events
//! for patterns another session or tool set; those are counted in `foreign_events`, never
//! aggregated. And *loops*: a tail-recursive loop traced with return tracing would keep a
//! VM stack frame per iteration, so loop functions are traced count-only (calls, no frames).
//! Loops the Erlang side cannot see in the code (cycles through funs or `apply`) show up
//! here as one function nested `LOOP_DEPTH` times in one process; they are reported by
//! [`Aggregator::take_new_loops`] so the caller can stop return tracing them.
//!
//! One session may split its events over several aggregators, each owning the processes
//! whose pids hash to it ([`shard`]: which pid is whose, and where each event goes), and read
//! them back as one ([`merge`]).

use std::collections::VecDeque;

use hdrhistogram::Histogram;

use crate::event::{Event, EventKind, Mfa};
use crate::frames::{FrameTable, MAX_FRAMES};
use crate::hasher::WordMap;
use crate::process::ProcessTable;

pub mod events;
pub mod gc;
pub mod messages;
pub mod ports;
pub mod procs;
pub mod scheduling;
pub mod split;
pub mod top;

pub mod args;
pub mod keyed;
pub mod memory;
pub mod own;
pub mod recorder;
use recorder::{Recorded, Recorder};
pub mod slowest;
use own::OwnTime;
use slowest::{SlowCall, SlowCalls, SlowestConfig};
pub mod stacks;
use crate::term_format::{EventCopies, TermCopy};

pub mod merge;
pub mod shard;
use shard::Shard;

/// Largest latency recorded, in ns (one hour); longer calls are recorded as one hour.
pub const MAX_LATENCY_NS: u64 = 3_600_000_000_000;
/// HDR precision: 3 significant digits.
pub const SIGNIFICANT_DIGITS: u8 = 3;
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
const LOOP_CHECK_EVERY: usize = 16;
/// How long the nested calls of a loop span at least: a recursion over a long list nests
/// as deep in microseconds, and keeps its timing (the frame bound keeps its frames few).
pub const LOOP_MIN_SPAN_NS: u64 = 50_000_000;
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
/// [`Aggregator::reset_interval`]. Kept beside the cumulative ones by the collector (never on
/// the schedulers); reset in place at each read, so its memory is allocated once.
pub struct IntervalStats {
    /// Calls seen in the interval.
    pub calls: u64,
    /// Returns seen in the interval.
    pub returns: u64,
    /// Exceptions seen in the interval.
    pub exceptions: u64,
    /// Sum of the latencies recorded in the interval, ns (saturating).
    pub total_ns: u64,
    /// Latencies recorded in the interval (auto-resizing, like the cumulative one).
    pub latency: Histogram<u64>,
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
}

/// An empty histogram that grows to the values recorded (tens of KiB for short calls).
fn small_histogram() -> Histogram<u64> {
    let mut latency = Histogram::new_with_bounds(1, 2, SIGNIFICANT_DIGITS).expect("static histogram bounds are valid");
    latency.auto(true);
    latency
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
    pub latency: Histogram<u64>,
    /// Traced count-only: a tail-recursive loop (calls counted, never paired).
    pub loop_only: bool,
    /// The same figures since the last interval read (`ferrotrace:watch/2`).
    pub interval: IntervalStats,
    /// The slowest calls and those over the threshold (`slowest`).
    pub slow: SlowCalls,
    /// Own time: latency less the time in traced callees of the same process.
    pub own: OwnTime,
    /// The latency split (running, descheduled, GC), once scheduling events were seen.
    pub split: Option<Box<split::SplitStats>>,
    /// Calls that returned on another scheduler thread than the one they were called on.
    pub migrations: u64,
    /// The most return-trace frames of the session its process had open at one of its calls
    /// (the frame bound refuses calls past `frames::MAX_FRAMES`; a loop found at run time
    /// shows how deep it went before it was).
    pub max_frames: u32,
    /// Latency per key (`key`), once a call came with one.
    pub by_key: Option<Box<keyed::KeyedLatency>>,
    /// When the function's first event was recorded (ns): orders functions when
    /// aggregators are merged.
    first_ns: u64,
}

impl FunctionStats {
    fn new(first_ns: u64) -> Self {
        // Auto-resizing keeps a function with short calls small (tens of KiB).
        FunctionStats::with_histograms(first_ns, [small_histogram(), small_histogram(), small_histogram()])
    }

    /// These figures emptied, as `new(first_ns)` makes them, but for the histograms' counts,
    /// zeroed and kept allocated: a merge made into them (`Aggregator::merged`) copies into
    /// memory already mapped instead of faulting in fresh pages.
    fn emptied(self, first_ns: u64) -> Self {
        let mut histograms = [self.latency, self.interval.latency, self.own.latency];
        histograms.iter_mut().for_each(Histogram::reset);
        FunctionStats::with_histograms(first_ns, histograms)
    }

    /// Empty figures over the given empty histograms: latency, the interval's, own time's.
    fn with_histograms(first_ns: u64, [latency, interval, own]: [Histogram<u64>; 3]) -> Self {
        FunctionStats {
            calls: 0,
            returns: 0,
            exceptions: 0,
            total_ns: 0,
            latency,
            loop_only: false,
            interval: IntervalStats { calls: 0, returns: 0, exceptions: 0, total_ns: 0, latency: interval },
            slow: SlowCalls::new(SlowestConfig::default()),
            own: OwnTime { total_ns: 0, latency: own },
            split: None,
            migrations: 0,
            max_frames: 0,
            by_key: None,
            first_ns,
        }
    }

    fn count_call(&mut self) {
        self.calls += 1;
        self.interval.calls += 1;
    }

    fn count_return(&mut self, kind: EventKind) {
        if kind == EventKind::Return {
            self.returns += 1;
            self.interval.returns += 1;
        } else {
            self.exceptions += 1;
            self.interval.exceptions += 1;
        }
    }

    fn record_latency(&mut self, ns: u64) {
        let ns = ns.clamp(1, MAX_LATENCY_NS);
        self.total_ns = self.total_ns.saturating_add(ns);
        self.interval.total_ns = self.interval.total_ns.saturating_add(ns);
        // Cannot fail: auto-resize is on and the value is within the one-hour bound.
        let _ = self.latency.record(ns);
        let _ = self.interval.latency.record(ns);
    }
}

#[derive(Clone, Debug)]
struct Frame {
    mfa: Mfa,
    ts: u64,
    /// Time spent in this call's paired traced callees (own time), ns.
    callees_ns: u64,
    /// This call's path in `stack_paths` (`stacks.rs`).
    node: u32,
    /// The process's (descheduled, gc) totals at the call when scheduling is traced, else
    /// `NO_SPLIT` (an `Option` would take 8 bytes more per frame).
    split: (u64, u64),
    /// The thread the call event ran on.
    thread: u32,
    /// The call's arguments and key (`args`, `key`), boxed: most sessions copy nothing, and
    /// a smaller frame keeps the collector's stacks in fewer cache lines.
    copies: Option<Box<EventCopies>>,
}

/// A frame's `split` when scheduling is not traced: totals never reach it.
const NO_SPLIT: (u64, u64) = (u64::MAX, u64::MAX);

impl Frame {
    fn split(&self) -> Option<(u64, u64)> {
        (self.split != NO_SPLIT).then_some(self.split)
    }
}

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

/// Per-session aggregation state, owned by whoever holds the session's aggregator lock.
pub struct Aggregator {
    /// Index into `stats` per function; `stats` keeps insertion order.
    functions: WordMap<Mfa, usize>,
    stats: Vec<(Mfa, FunctionStats)>,
    /// The last function looked up: hot loops hit it and skip the hash.
    last_function: Option<(Mfa, usize)>,
    /// Open frames per process. A stack that empties stays (no remove and reallocation per
    /// call); empty stacks are swept once they outnumber the others, and a process's exit
    /// removes its stack.
    stacks: WordMap<u64, VecDeque<Frame>>,
    nonempty_stacks: usize,
    open_calls: usize,
    max_functions: usize,
    max_open_calls: usize,
    counters: PairingCounters,
    /// The specs traced; `None` aggregates every function (raw sessions).
    filter: Option<Vec<MfaPattern>>,
    foreign: usize,
    /// Functions counted without pairing (set by the caller: found in the code, or at run
    /// time and then traced count-only), with when the callbacks stopped counting their calls
    /// on the frame table (ns; 0 for loops traced count-only from the start).
    loops: WordMap<Mfa, u64>,
    /// Loops found at run time and not yet taken by `take_new_loops`.
    new_loops: Vec<Mfa>,
    /// Loops found at run time and reported, not yet set by the caller.
    reported_loops: WordMap<Mfa, ()>,
    /// When the current interval began (ms, the caller's clock); `None` before the first
    /// [`Aggregator::reset_interval`].
    interval_started_ms: Option<u64>,
    /// What each function keeps of its slow calls.
    slowest: SlowestConfig,
    /// The last events (`recent`), if kept.
    recorder: Option<Recorder>,
    /// Time per call path, for folded-stack exports (`stacks.rs`).
    stack_paths: stacks::StackPaths,
    /// Per-process state: what each process is doing now.
    pub processes: ProcessTable,
    /// The figures of every other event kind, fed from `processes`.
    pub events: events::EventStats,
    /// The thread that produced the event being recorded ([`Aggregator::record_on`]).
    thread: u32,
    /// The copy that came with the event being recorded (`args`): see `record_with`.
    copy: Option<TermCopy>,
    /// The key that came with the call being recorded (`key`): see `record_with`.
    key: Option<TermCopy>,
    /// Keys the session may still take (`max_keys`).
    keys_left: usize,
    /// The pids this aggregator keeps state for ([`Aggregator::with_shard`]).
    shard: Shard,
    /// Frame stacks held by the aggregators merged into this one ([`Aggregator::merged`]).
    stacks_elsewhere: usize,
    /// The session's frame table, told what counted events stand for no open frame
    /// ([`crate::frames`]); none in tests and merges.
    frames: Option<&'static FrameTable>,
    /// For the event being recorded: what its process's line of the frame table settles.
    settle: i64,
    /// Processes whose stacks reached `LOOP_DEPTH` frames: [`Aggregator::find_stuck_loops`]
    /// looks at them, not at every stack.
    deep: WordMap<u64, ()>,
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

/// Empty stacks tolerated beyond the non-empty ones before a sweep.
const EMPTY_STACK_SLACK: usize = 4096;

impl Aggregator {
    /// An empty aggregator keeping at most `max_functions` functions' statistics and
    /// `max_open_calls` open frames.
    pub fn new(max_functions: usize, max_open_calls: usize) -> Self {
        Aggregator {
            functions: WordMap::default(),
            stats: Vec::new(),
            last_function: None,
            stacks: WordMap::default(),
            nonempty_stacks: 0,
            open_calls: 0,
            max_functions,
            max_open_calls,
            counters: PairingCounters::default(),
            filter: None,
            foreign: 0,
            loops: WordMap::default(),
            new_loops: Vec::new(),
            reported_loops: WordMap::default(),
            interval_started_ms: None,
            slowest: SlowestConfig::default(),
            recorder: None,
            stack_paths: stacks::StackPaths::new(stacks::DEFAULT_MAX_PATHS),
            processes: ProcessTable::default(),
            events: events::EventStats::default(),
            thread: 0,
            copy: None,
            key: None,
            keys_left: keyed::DEFAULT_MAX_KEYS,
            shard: Shard::default(),
            stacks_elsewhere: 0,
            frames: None,
            settle: 0,
            deep: WordMap::default(),
        }
    }

    /// Settles the session's frame table as events are folded in: calls less returns less
    /// the frames open on this aggregator's stacks ([`crate::frames`]). Set it before the
    /// first event.
    pub fn with_frames(mut self, frames: &'static FrameTable) -> Self {
        self.frames = Some(frames);
        self
    }

    /// Makes this aggregator the `index`-th of `count` sharing one session: it keeps the
    /// state and figures of the pids it owns ([`shard::shard_of`]) only. Feed it what
    /// [`shard::Router`] routes to it with [`Aggregator::record_routed`], which also does an
    /// event's part for an owned second pid (a message's receiver, a spawned child:
    /// [`shard::other_pid`]); [`Aggregator::merged`] reads all of them as one. Count 1 (the
    /// default) owns every pid. Set it before the first event.
    ///
    /// # Panics
    /// If `index >= count`.
    pub fn with_shard(mut self, index: u32, count: u32) -> Self {
        assert!(index < count, "shard {index} of {count}");
        self.shard = Shard { index, count };
        self.processes.set_shard(self.shard);
        self
    }

    /// The pids this aggregator keeps state for.
    pub fn shard(&self) -> Shard {
        self.shard
    }

    /// Keeps at most `config.max_keys` keys over the session (`key`).
    pub fn with_keys(mut self, config: keyed::KeysConfig) -> Self {
        self.keys_left = config.max_keys;
        self
    }

    /// Time per call path of the traced functions (folded stacks).
    pub fn stack_paths(&self) -> &stacks::StackPaths {
        &self.stack_paths
    }

    /// The figures of the current interval per function, for the functions with something
    /// in it, in the order functions were first seen.
    pub fn interval(&self) -> impl Iterator<Item = (&Mfa, &IntervalStats)> {
        self.stats.iter().filter(|(_, stats)| !stats.interval.is_empty()).map(|(mfa, stats)| (mfa, &stats.interval))
    }

    /// When the current interval began (ms), if an interval was ever read.
    pub fn interval_started_ms(&self) -> Option<u64> {
        self.interval_started_ms
    }

    /// Ends the current interval at `now_ms`: every function's interval figures go back to
    /// zero (in place: no allocation), and a new interval begins.
    pub fn reset_interval(&mut self, now_ms: u64) {
        for (_, stats) in self.stats.iter_mut() {
            if !stats.interval.is_empty() {
                stats.interval.reset();
            }
        }
        self.interval_started_ms = Some(now_ms);
    }

    /// Aggregates only the functions `patterns` match from now on; others are counted in
    /// `foreign_events`.
    pub fn set_filter(&mut self, patterns: Vec<MfaPattern>) {
        self.filter = Some(patterns);
        self.functions.retain(|_, index| *index != FOREIGN);
        self.foreign = 0;
        self.last_function = None;
    }

    /// Counts the calls of `mfas` without pairing them (they are traced without return
    /// tracing); their open frames are dropped.
    pub fn set_loops(&mut self, mfas: &[Mfa]) {
        self.set_loops_since(mfas, 0);
    }

    /// As [`Aggregator::set_loops`], for loops the callbacks stopped counting on the frame
    /// table at `since_ns` (their calls stamped before were counted, and are settled here).
    pub fn set_loops_since(&mut self, mfas: &[Mfa], since_ns: u64) {
        for mfa in mfas {
            self.loops.insert(*mfa, since_ns);
            if let Some(&index) = self.functions.get(mfa).filter(|index| **index != FOREIGN) {
                self.stats[index].1.loop_only = true;
            }
            self.drop_frames_of(*mfa);
        }
    }

    /// Loops found at run time since the last call.
    pub fn take_new_loops(&mut self) -> Vec<Mfa> {
        std::mem::take(&mut self.new_loops)
    }

    /// True if loops were found that `take_new_loops` has not taken yet.
    pub fn has_new_loops(&self) -> bool {
        !self.new_loops.is_empty()
    }

    /// Every function counted without pairing.
    pub fn loops(&self) -> impl Iterator<Item = &Mfa> {
        self.loops.keys()
    }

    fn drop_frames_of(&mut self, mfa: Mfa) {
        let mut dropped = 0;
        let mut emptied = 0;
        for (pid, stack) in self.stacks.iter_mut() {
            let before = stack.len();
            if before == 0 {
                continue;
            }
            stack.retain(|frame| frame.mfa != mfa);
            dropped += before - stack.len();
            if let Some(frames) = self.frames {
                frames.settle(*pid, (before - stack.len()) as i64);
            }
            emptied += usize::from(stack.is_empty());
        }
        // Not abandoned: a loop's frames are just not timed (those the VM already holds may
        // still return; their returns are counted, not paired).
        self.open_calls -= dropped;
        self.nonempty_stacks -= emptied;
    }

    /// As [`Aggregator::record`], for an event that ran on thread `thread` (the index of its
    /// producer): a call returning on another thread than its call counts as a migration.
    pub fn record_on(&mut self, event: &Event, thread: u32) {
        self.thread = thread;
        self.record(event);
    }

    /// Folds one event in. Events of one process must arrive in the order they happened.
    /// A sharded aggregator ([`Aggregator::with_shard`]) must own the event's tracee: feed
    /// it with [`Aggregator::record_routed`].
    pub fn record(&mut self, event: &Event) {
        // A call counts +1 and a return -1 on the frame table; each frame the event leaves
        // on (or takes off) the process's stack takes one back (`crate::frames`).
        self.settle = 0;
        match event.kind {
            EventKind::Call => {
                self.settle = 1;
                self.record_call(event);
            }
            EventKind::Return | EventKind::Exception => {
                self.settle = -1;
                self.record_return(event);
            }
            EventKind::Exit => {
                if let Some(stack) = self.stacks.remove(&event.pid) {
                    if !stack.is_empty() {
                        self.nonempty_stacks -= 1;
                    }
                    self.open_calls -= stack.len();
                    self.counters.abandoned_calls += stack.len() as u64;
                    self.settle = stack.len() as i64;
                }
                self.events.record(&mut self.processes, event);
            }
            _ => self.events.record(&mut self.processes, event),
        }
        if let Some(frames) = self.frames {
            frames.settle(event.pid, self.settle);
        }
    }

    /// The statistics of `mfa`, for an event at `ts` (kept by a function seen for the first
    /// time).
    fn stats_for(&mut self, mfa: Mfa, ts: u64) -> Option<&mut FunctionStats> {
        let index = match self.last_function {
            Some((last, index)) if last == mfa => index,
            _ => {
                let index = match self.functions.get(&mfa) {
                    Some(&FOREIGN) => return None,
                    Some(index) => *index,
                    None if self.filter.as_ref().is_some_and(|f| !f.iter().any(|p| p.matches(&mfa))) => {
                        if self.foreign < MAX_FOREIGN {
                            self.foreign += 1;
                            self.functions.insert(mfa, FOREIGN);
                        }
                        return None;
                    }
                    None if self.stats.len() < self.max_functions => self.add_function(mfa, ts),
                    None => return None,
                };
                self.last_function = Some((mfa, index));
                index
            }
        };
        Some(&mut self.stats[index].1)
    }

    /// Gives `mfa`, first seen at `ts`, its statistics; their index. Once per function:
    /// kept out of `stats_for`, whose other paths run per event.
    #[inline(never)]
    fn add_function(&mut self, mfa: Mfa, ts: u64) -> usize {
        let mut stats = FunctionStats::new(ts);
        stats.loop_only = self.loops.contains_key(&mfa);
        stats.slow = SlowCalls::new(self.slowest);
        self.stats.push((mfa, stats));
        self.functions.insert(mfa, self.stats.len() - 1);
        self.stats.len() - 1
    }

    /// Why `stats_for` found no statistics: outside the filter, or past `max_functions`.
    fn count_untracked(&mut self, mfa: Mfa) {
        if self.functions.get(&mfa) == Some(&FOREIGN)
            || self.filter.as_ref().is_some_and(|f| !f.iter().any(|p| p.matches(&mfa)))
        {
            self.counters.foreign_events += 1;
        } else {
            self.counters.untracked_events += 1;
        }
    }

    fn record_call(&mut self, event: &Event) {
        match self.stats_for(event.mfa, event.ts) {
            Some(stats) if stats.loop_only => {
                stats.count_call();
                // Not counted on the frame table, unless made before the callbacks knew.
                if self.loops.get(&event.mfa).is_some_and(|since| event.ts >= *since) {
                    self.settle = 0;
                }
                return;
            }
            Some(stats) => stats.count_call(),
            None => {
                self.count_untracked(event.mfa);
                return;
            }
        }
        if let Some(recorder) = &mut self.recorder {
            let copy = self.copy.clone();
            recorder.push(Recorded { ts_ns: event.ts, pid: event.pid, mfa: event.mfa, kind: event.kind, duration_ns: None, copy });
        }
        if self.open_calls >= self.max_open_calls {
            self.counters.abandoned_calls += 1;
            return;
        }
        let split = if self.processes.splits() { self.processes.totals(event.pid) } else { None }.unwrap_or(NO_SPLIT);
        let stack = self.stacks.entry(event.pid).or_default();
        if stack.is_empty() {
            self.nonempty_stacks += 1;
        }
        if stack.len() >= MAX_DEPTH {
            stack.pop_front();
            self.open_calls -= 1;
            self.counters.abandoned_calls += 1;
            self.settle += 1;
        }
        let parent = stack.back().map_or(stacks::ROOT, |frame| frame.node);
        let node = self.stack_paths.enter(parent, event.mfa);
        stack.push_back(Frame {
            mfa: event.mfa,
            ts: event.ts,
            callees_ns: 0,
            node,
            split,
            thread: self.thread,
            copies: match (self.copy.take(), self.key.take()) {
                (None, None) => None,
                (args, key) => Some(Box::new(EventCopies { args, key })),
            },
        });
        self.open_calls += 1;
        self.settle -= 1;
        if stack.len() == LOOP_DEPTH {
            self.deep.insert(event.pid, ());
        }
        let depth = stack.len();
        let looping = if depth >= LOOP_DEPTH && depth.is_multiple_of(LOOP_CHECK_EVERY) {
            loop_functions(stack, event.ts)
        } else {
            Vec::new()
        };
        // The function was looked up above: this hits `last_function`.
        if let Some(stats) = self.stats_for(event.mfa, event.ts) {
            stats.max_frames = stats.max_frames.max(depth as u32);
        }
        for mfa in looping {
            self.mark_loop(mfa, event.ts);
        }
    }

    /// Loops that wait fast: a process with `LOOP_DEPTH` open calls, the oldest made
    /// `LOOP_MIN_SPAN_NS` before `now_ns` (see `loop_functions`). A loop that takes a
    /// message every microsecond nests past `LOOP_DEPTH` before its calls span that long; the
    /// frame bound then refuses its calls and no event of it comes to look at, so the
    /// collector asks now and then ([`crate::shards::Shards::find_stuck_loops`]). Found loops
    /// are counted from then on, as those `record_call` finds.
    pub fn find_stuck_loops(&mut self, now_ns: u64) {
        if self.deep.is_empty() {
            return;
        }
        let stacks = &self.stacks;
        let mut found = Vec::new();
        self.deep.retain(|pid, _| {
            let Some(stack) = stacks.get(pid).filter(|stack| stack.len() >= LOOP_DEPTH) else { return false };
            found.extend(loop_functions(stack, now_ns));
            true
        });
        for mfa in found {
            self.mark_loop(mfa, now_ns);
        }
    }

    /// A function nested `LOOP_DEPTH` deep in one process without returning: tell the caller
    /// (once), so that it stops return tracing it and then says so with `set_loops`. Until
    /// then its calls keep their frames, and are paired and bounded as any other: counting
    /// them as frameless before the trace pattern changed would let frames pass the bound.
    fn mark_loop(&mut self, mfa: Mfa, ts: u64) {
        if self.stats_for(mfa, ts).is_some_and(|stats| !stats.loop_only) && !self.reported_loops.contains_key(&mfa) {
            self.reported_loops.insert(mfa, ());
            self.new_loops.push(mfa);
        }
    }

    fn record_return(&mut self, event: &Event) {
        let frame = self.pop_matching(event.pid, event.mfa, event.ts);
        // Looked up only for a frame that took a split snapshot (scheduling traced).
        let parts = frame.as_ref().and_then(Frame::split).and_then(|at_call| Some((at_call, self.processes.totals(event.pid)?)));
        let thread = self.thread;
        let duration = frame.as_ref().map(|frame| event.ts.saturating_sub(frame.ts));
        let result = self.copy.take();
        let recorded = self.recorder.as_ref().map(|_| result.clone());
        let Some(stats) = self.stats_for(event.mfa, event.ts) else {
            self.count_untracked(event.mfa);
            return;
        };
        stats.count_return(event.kind);
        let mut keyed = None;
        match frame {
            Some(frame) => {
                stats.migrations += u64::from(frame.thread != thread);
                let duration_ns = event.ts.saturating_sub(frame.ts);
                stats.record_latency(duration_ns);
                stats.own.record(duration_ns, frame.callees_ns);
                let EventCopies { args, key } = frame.copies.map(|c| *c).unwrap_or_default();
                stats.slow.offer(SlowCall {
                    duration_ns,
                    start_ns: frame.ts,
                    pid: event.pid,
                    exception: event.kind == EventKind::Exception,
                    args,
                    result,
                });
                if let Some(((d0, g0), (d1, g1))) = parts {
                    let split = stats.split.get_or_insert_with(Default::default);
                    split.record(duration_ns.clamp(1, MAX_LATENCY_NS), d1.saturating_sub(d0), g1.saturating_sub(g0));
                }
                keyed = key.map(|key| (key, duration_ns));
            }
            None if stats.loop_only => {}
            None => self.counters.unmatched_returns += 1,
        }
        if let Some((key, ns)) = keyed {
            let mut keys_left = self.keys_left;
            if let Some(stats) = self.stats_for(event.mfa, event.ts) {
                stats.by_key.get_or_insert_with(Default::default).record(key, ns, &mut keys_left);
            }
            self.keys_left = keys_left;
        }
        if let Some(recorder) = &mut self.recorder {
            let copy = recorded.flatten();
            recorder.push(Recorded { ts_ns: event.ts, pid: event.pid, mfa: event.mfa, kind: event.kind, duration_ns: duration, copy });
        }
    }

    /// Pops the innermost open call of `mfa` in `pid`, discarding the frames above it; the
    /// call it returns to (the frame below) is credited with its time (own time), and its
    /// path in `stack_paths` gets the call's latency (`ts` is the return's).
    fn pop_matching(&mut self, pid: u64, mfa: Mfa, ts: u64) -> Option<Frame> {
        let stack = self.stacks.get_mut(&pid)?;
        let position = stack.iter().rposition(|frame| frame.mfa == mfa)?;
        let abandoned = stack.len() - position - 1;
        let frame = stack.remove(position)?;
        let ns = ts.saturating_sub(frame.ts).clamp(1, MAX_LATENCY_NS);
        self.stack_paths.record(frame.node, ns);
        stack.truncate(position);
        if let Some(caller) = stack.back_mut() {
            caller.callees_ns = caller.callees_ns.saturating_add(ts.saturating_sub(frame.ts));
        }
        self.open_calls -= abandoned + 1;
        self.counters.abandoned_calls += abandoned as u64;
        self.settle += abandoned as i64 + 1;
        if stack.is_empty() {
            self.nonempty_stacks -= 1;
            if self.stacks.len() > 2 * self.nonempty_stacks + EMPTY_STACK_SLACK {
                self.stacks.retain(|_, stack| !stack.is_empty());
            }
        }
        Some(frame)
    }

    /// Statistics per function, in the order functions were first seen (loops included).
    pub fn functions(&self) -> impl Iterator<Item = (&Mfa, &FunctionStats)> {
        self.stats.iter().map(|(mfa, stats)| (mfa, stats))
    }

    /// Statistics of one function, if it was seen.
    pub fn function(&self, mfa: &Mfa) -> Option<&FunctionStats> {
        // A function outside the filter is in the index as `FOREIGN`, with no statistics.
        self.functions.get(mfa).and_then(|index| self.stats.get(*index)).map(|(_, stats)| stats)
    }

    /// How well calls and returns paired up so far.
    pub fn counters(&self) -> PairingCounters {
        self.counters
    }

    /// Open calls currently waiting for their return, over all processes.
    pub fn open_calls(&self) -> usize {
        self.open_calls
    }

    /// Processes with at least one open call.
    pub fn tracked_processes(&self) -> usize {
        self.nonempty_stacks
    }

    /// Frame stacks held, empty ones included (bounded by the sweep); merged, the parts'
    /// summed (each sweeps its own, so not what one aggregator would hold).
    pub fn stacks_held(&self) -> usize {
        self.stacks.len() + self.stacks_elsewhere
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    const F: Mfa = Mfa { module: 1, function: 2, arity: 1 };
    const G: Mfa = Mfa { module: 1, function: 3, arity: 0 };

    fn ev(kind: EventKind, pid: u64, mfa: Mfa, ts: u64) -> Event {
        Event { ts, pid, mfa, kind }
    }

    #[test]
    fn a_return_on_another_thread_is_a_migration() {
        let mut agg = Aggregator::new(100, 1000);
        agg.record_on(&ev(EventKind::Call, 1, F, 0), 0);
        agg.record_on(&ev(EventKind::Return, 1, F, 10), 1);
        agg.record_on(&ev(EventKind::Call, 1, F, 20), 1);
        agg.record_on(&ev(EventKind::Return, 1, F, 30), 1);
        assert_eq!(agg.function(&F).unwrap().migrations, 1);
    }

    #[test]
    fn splits_latency_into_running_descheduled_and_gc() {
        let mut agg = Aggregator::new(100, 1000);
        let at = |kind, ts, function| Event { ts, pid: 7, mfa: Mfa { module: 0, function, arity: 0 }, kind };
        agg.record(&at(EventKind::In, 0, 0));
        agg.record(&ev(EventKind::Call, 7, F, 100));
        agg.record(&at(EventKind::Out, 1_100, 0));
        agg.record(&at(EventKind::In, 11_100, 0));
        agg.record(&at(EventKind::GcStart, 12_000, 50));
        agg.record(&at(EventKind::GcEnd, 12_500, 10));
        agg.record(&ev(EventKind::Return, 7, F, 16_100));
        let split = agg.function(&F).unwrap().split.as_ref().expect("split recorded");
        let only = |h: &Histogram<u64>| {
            assert_eq!(h.len(), 1);
            h.max()
        };
        assert!(split.descheduled.equivalent(only(&split.descheduled), 10_000));
        assert!(split.gc.equivalent(only(&split.gc), 500));
        assert!(split.running.equivalent(only(&split.running), 5_500));
        // Without scheduling events no frame takes a snapshot.
        let mut plain = Aggregator::new(100, 1000);
        plain.record(&ev(EventKind::Call, 7, F, 0));
        plain.record(&ev(EventKind::Return, 7, F, 10));
        assert!(plain.function(&F).unwrap().split.is_none());
    }

    #[test]
    fn pairs_a_call_with_its_return() {
        let mut agg = Aggregator::new(100, 1000);
        agg.record(&ev(EventKind::Call, 7, F, 100));
        agg.record(&ev(EventKind::Return, 7, F, 1100));
        let f = agg.function(&F).unwrap();
        assert_eq!((f.calls, f.returns, f.exceptions), (1, 1, 0));
        assert_eq!(f.latency.len(), 1);
        assert!(f.latency.equivalent(f.latency.max(), 1000));
        assert_eq!(agg.open_calls(), 0);
        assert_eq!(agg.tracked_processes(), 0);
    }

    fn pattern(module: Option<u64>, function: Option<u64>, arity: Option<u32>) -> MfaPattern {
        MfaPattern { module, function, arity }
    }

    #[test]
    fn the_filter_counts_other_functions_as_foreign() {
        let mut agg = Aggregator::new(100, 1000);
        agg.set_filter(vec![pattern(Some(1), Some(2), None)]);
        for (mfa, ts) in [(F, 0), (G, 10)] {
            agg.record(&ev(EventKind::Call, 1, mfa, ts));
        }
        agg.record(&ev(EventKind::Return, 1, G, 20));
        agg.record(&ev(EventKind::Return, 1, F, 30));
        assert_eq!(agg.functions().map(|(mfa, _)| *mfa).collect::<Vec<_>>(), vec![F]);
        assert_eq!(agg.counters().foreign_events, 2);
        assert_eq!(agg.counters().untracked_events, 0);
        assert_eq!(agg.function(&F).unwrap().latency.len(), 1);
        assert!(agg.function(&G).is_none(), "indexed as foreign, without statistics");
        assert_eq!(agg.open_calls(), 0);
    }

    #[test]
    fn loops_are_counted_not_paired() {
        let mut agg = Aggregator::new(100, 1000);
        agg.set_loops(&[G]);
        for ts in 0..100 {
            agg.record(&ev(EventKind::Call, 1, G, ts));
        }
        let g = agg.function(&G).unwrap();
        assert_eq!((g.calls, g.loop_only), (100, true));
        assert_eq!(agg.open_calls(), 0);
        assert_eq!(agg.loops().copied().collect::<Vec<_>>(), vec![G]);
        assert!(agg.take_new_loops().is_empty(), "set by the caller, not found");
    }

    #[test]
    #[cfg_attr(miri, ignore = "13,000 events and depth scans: minutes under Miri; the paths are the loop tests above")]
    fn a_function_nested_past_loop_depth_becomes_a_loop() {
        // A recursion as deep, but over in microseconds, keeps its timing.
        let mut fast = Aggregator::new(100, 1_000_000);
        for ts in 1..=(LOOP_DEPTH + 4 * LOOP_CHECK_EVERY) as u64 {
            fast.record(&ev(EventKind::Call, 1, G, ts));
        }
        assert!(fast.take_new_loops().is_empty());
        // One iteration a millisecond: a loop that waits.
        let mut agg = Aggregator::new(100, 1_000_000);
        agg.record(&ev(EventKind::Call, 1, F, 0));
        for ts in 1..=(LOOP_DEPTH + LOOP_CHECK_EVERY) as u64 {
            agg.record(&ev(EventKind::Call, 1, G, ts * 1_000_000));
        }
        assert_eq!(agg.take_new_loops(), vec![G]);
        // Reported once; paired as before until the caller has stopped return tracing it.
        for ts in 0..(2 * LOOP_CHECK_EVERY) as u64 {
            agg.record(&ev(EventKind::Call, 1, G, 500_000_000 + ts * 1_000_000));
        }
        assert!(agg.take_new_loops().is_empty());
        assert!(!agg.function(&G).unwrap().loop_only);
        agg.set_loops(&[G]);
        assert!(agg.function(&G).unwrap().loop_only);
        // Only F's frame is left open; G's frames were dropped.
        assert_eq!(agg.open_calls(), 1);
        // The dropped frames are not abandoned calls, and their returns are not unmatched.
        assert_eq!(agg.counters().abandoned_calls, 0);
        agg.record(&ev(EventKind::Return, 1, G, 990_000_000));
        assert_eq!(agg.counters().unmatched_returns, 0);
        agg.record(&ev(EventKind::Return, 1, F, 1_000_000_000));
        assert_eq!(agg.function(&F).unwrap().latency.len(), 1);
        // Body recursion below the depth is paired as before.
        let mut agg = Aggregator::new(100, 1_000_000);
        for ts in 0..(LOOP_DEPTH as u64 - 1) {
            agg.record(&ev(EventKind::Call, 2, F, ts));
        }
        for ts in 0..(LOOP_DEPTH as u64 - 1) {
            agg.record(&ev(EventKind::Return, 2, F, 10_000 + ts));
        }
        assert!(agg.take_new_loops().is_empty());
        assert_eq!(agg.function(&F).unwrap().latency.len(), LOOP_DEPTH as u64 - 1);
    }

    /// A loop of two functions (a cycle through a module the Erlang side does not read)
    /// holds half the frames each: both are found, by a call or by the collector's look.
    #[test]
    fn a_cycle_of_two_functions_is_found_whole() {
        let mut agg = Aggregator::new(100, 1_000_000);
        for i in 0..(LOOP_DEPTH + LOOP_CHECK_EVERY) as u64 {
            agg.record(&ev(EventKind::Call, 1, if i % 2 == 0 { F } else { G }, i * 1_000_000));
        }
        assert_eq!(agg.take_new_loops(), vec![G, F]);
        // Sitting at the bound (its calls refused), found when the collector looks.
        let mut stuck = Aggregator::new(100, 1_000_000);
        for i in 0..LOOP_DEPTH as u64 + 1 {
            stuck.record(&ev(EventKind::Call, 2, if i % 2 == 0 { F } else { G }, i));
        }
        stuck.find_stuck_loops(LOOP_MIN_SPAN_NS / 2);
        assert!(stuck.take_new_loops().is_empty(), "not for long enough yet");
        stuck.find_stuck_loops(LOOP_MIN_SPAN_NS + 1_000);
        assert_eq!(stuck.take_new_loops(), vec![F, G]);
    }

    #[test]
    fn recursion_pairs_innermost_first() {
        let mut agg = Aggregator::new(100, 1000);
        // f(2) -> f(1) -> f(0), returns in reverse.
        for (i, ts) in [0u64, 10, 20].iter().enumerate() {
            let _ = i;
            agg.record(&ev(EventKind::Call, 1, F, *ts));
        }
        for ts in [25u64, 40, 100] {
            agg.record(&ev(EventKind::Return, 1, F, ts));
        }
        let f = agg.function(&F).unwrap();
        let mut values: Vec<u64> = f.latency.iter_recorded().map(|v| v.value_iterated_to()).collect();
        values.sort();
        // 25-20, 40-10, 100-0
        assert_eq!(values, vec![5, 30, 100]);
        assert_eq!(agg.counters(), PairingCounters::default());
    }

    #[test]
    fn exception_from_closes_the_frame_and_counts_an_exception() {
        let mut agg = Aggregator::new(100, 1000);
        agg.record(&ev(EventKind::Call, 1, F, 0));
        agg.record(&ev(EventKind::Exception, 1, F, 50));
        let f = agg.function(&F).unwrap();
        assert_eq!((f.returns, f.exceptions), (0, 1));
        assert_eq!(agg.open_calls(), 0);
    }

    #[test]
    fn untraced_exception_abandons_inner_frames() {
        let mut agg = Aggregator::new(100, 1000);
        agg.record(&ev(EventKind::Call, 1, F, 0));
        agg.record(&ev(EventKind::Call, 1, G, 10)); // g raises; no exception_trace
        agg.record(&ev(EventKind::Return, 1, F, 90)); // f caught it and returned
        assert_eq!(agg.counters().abandoned_calls, 1);
        assert_eq!(agg.function(&F).unwrap().latency.max(), 90);
        assert_eq!(agg.open_calls(), 0);
    }

    #[test]
    fn return_without_call_is_counted_unmatched() {
        let mut agg = Aggregator::new(100, 1000);
        agg.record(&ev(EventKind::Return, 1, F, 0));
        assert_eq!(agg.counters().unmatched_returns, 1);
        assert_eq!(agg.function(&F).unwrap().returns, 1);
    }

    #[test]
    fn empty_stacks_are_swept() {
        let mut agg = Aggregator::new(10, 1 << 20);
        for pid in 0..20_000u64 {
            agg.record(&ev(EventKind::Call, pid, F, 0));
            agg.record(&ev(EventKind::Return, pid, F, 1));
        }
        assert_eq!(agg.tracked_processes(), 0);
        assert!(agg.stacks_held() <= EMPTY_STACK_SLACK + 1, "{}", agg.stacks_held());
    }

    #[test]
    fn process_exit_forgets_open_calls() {
        let mut agg = Aggregator::new(100, 1000);
        agg.record(&ev(EventKind::Call, 1, F, 0));
        agg.record(&ev(EventKind::Call, 1, G, 0));
        agg.record(&ev(EventKind::Exit, 1, F, 5));
        assert_eq!(agg.open_calls(), 0);
        assert_eq!(agg.tracked_processes(), 0);
        assert_eq!(agg.counters().abandoned_calls, 2);
    }

    #[test]
    fn bounds_functions_and_open_calls() {
        let mut agg = Aggregator::new(1, 2);
        agg.record(&ev(EventKind::Call, 1, F, 0));
        agg.record(&ev(EventKind::Call, 1, G, 0));
        assert_eq!(agg.counters().untracked_events, 1);
        agg.record(&ev(EventKind::Call, 2, F, 0));
        agg.record(&ev(EventKind::Call, 3, F, 0));
        assert_eq!(agg.open_calls(), 2);
        assert_eq!(agg.counters().abandoned_calls, 1);
        assert_eq!(agg.function(&F).unwrap().calls, 3);
    }

    #[test]
    fn depth_bound_abandons_the_oldest_frame() {
        // Nested calls of many functions, none deep enough to be taken for a loop.
        let mut agg = Aggregator::new(100, 1 << 20);
        for ts in 0..(MAX_DEPTH as u64 + 1) {
            agg.record(&ev(EventKind::Call, 1, Mfa { module: 1, function: ts % 64, arity: 0 }, ts));
        }
        assert!(agg.take_new_loops().is_empty());
        assert_eq!(agg.open_calls(), MAX_DEPTH);
        assert_eq!(agg.counters().abandoned_calls, 1);
    }

    #[test]
    fn latency_is_clamped_to_one_hour() {
        let mut agg = Aggregator::new(10, 10);
        agg.record(&ev(EventKind::Call, 1, F, 0));
        agg.record(&ev(EventKind::Return, 1, F, 10 * MAX_LATENCY_NS));
        let max = agg.function(&F).unwrap().latency.max();
        assert!((MAX_LATENCY_NS..=MAX_LATENCY_NS + MAX_LATENCY_NS / 1000).contains(&max));
    }

    #[test]
    fn interval_figures_reset_when_read_and_sum_to_the_cumulative_ones() {
        let mut agg = Aggregator::new(100, 1000);
        assert_eq!(agg.interval_started_ms(), None);
        let mut sums = (0u64, 0u64, 0u64, 0u64, 0u64);
        let mut ts = 0;
        for (round, n) in [3u64, 0, 5, 1].into_iter().enumerate() {
            for i in 0..n {
                ts += 10;
                agg.record(&ev(EventKind::Call, 1, F, ts));
                ts += 100 * (i + 1);
                let kind = if i % 2 == 0 { EventKind::Return } else { EventKind::Exception };
                agg.record(&ev(kind, 1, F, ts));
            }
            // G only in the first round: it must be left out of the later intervals.
            if round == 0 {
                agg.record(&ev(EventKind::Call, 2, G, ts));
                agg.record(&ev(EventKind::Return, 2, G, ts + 7));
            }
            let shown: Vec<Mfa> = agg.interval().map(|(mfa, _)| *mfa).collect();
            match round {
                0 => assert_eq!(shown, vec![F, G]),
                1 => assert!(shown.is_empty(), "nothing happened: {shown:?}"),
                _ => assert_eq!(shown, vec![F]),
            }
            if let Some((_, f)) = agg.interval().find(|(mfa, _)| **mfa == F) {
                assert_eq!(f.calls, n);
                assert_eq!(f.returns + f.exceptions, n);
                assert_eq!(f.latency.len(), n);
                // The interval's max is this round's longest call, not an earlier one's.
                assert!(f.latency.equivalent(f.latency.max(), 100 * n));
                sums = (sums.0 + f.calls, sums.1 + f.returns, sums.2 + f.exceptions,
                        sums.3 + f.total_ns, sums.4 + f.latency.len());
            }
            agg.reset_interval(1000 * (round as u64 + 1));
            assert_eq!(agg.interval_started_ms(), Some(1000 * (round as u64 + 1)));
            assert_eq!(agg.interval().count(), 0, "reset empties every interval");
        }
        let f = agg.function(&F).unwrap();
        assert_eq!(sums, (f.calls, f.returns, f.exceptions, f.total_ns, f.latency.len()));
        assert_eq!(f.calls, 9);
        // The cumulative figures were not reset.
        assert_eq!(agg.function(&G).unwrap().calls, 1);
    }

    #[test]
    fn loop_calls_count_in_the_interval() {
        let mut agg = Aggregator::new(100, 1000);
        agg.set_loops(&[G]);
        for ts in 0..4 {
            agg.record(&ev(EventKind::Call, 1, G, ts));
        }
        let (_, g) = agg.interval().next().unwrap();
        assert_eq!((g.calls, g.returns, g.latency.len()), (4, 0, 0));
        agg.reset_interval(1);
        agg.record(&ev(EventKind::Call, 1, G, 9));
        assert_eq!(agg.interval().next().unwrap().1.calls, 1);
        assert_eq!(agg.function(&G).unwrap().calls, 5);
    }

    /// A call tree generated as nested calls per process, each either returning or raising.
    fn call_tree() -> impl Strategy<Value = Vec<(u64, bool)>> {
        // (depth-first list of durations, raises?) flattened below.
        prop::collection::vec((1u64..1_000_000, any::<bool>()), 1..20)
    }

    proptest! {
        /// Whatever the events and wherever the interval reads fall, the intervals' figures
        /// add up to the cumulative ones, per function.
        #[test]
        fn intervals_sum_to_the_cumulative_figures(
            steps in prop::collection::vec((0u8..4, 0u64..3, any::<bool>(), 1u64..10_000), 0..300),
        ) {
            let mut agg = Aggregator::new(10, 1 << 20);
            let mut sums: HashMap<Mfa, (u64, u64, u64, u64, u64)> = HashMap::new();
            let mut take = |agg: &mut Aggregator, now: u64| {
                for (mfa, i) in agg.interval() {
                    let s = sums.entry(*mfa).or_default();
                    *s = (s.0 + i.calls, s.1 + i.returns, s.2 + i.exceptions, s.3 + i.total_ns, s.4 + i.latency.len());
                }
                agg.reset_interval(now);
            };
            let mut ts = 0;
            for (what, pid, use_g, dt) in steps {
                ts += dt;
                let mfa = if use_g { G } else { F };
                match what {
                    0 => agg.record(&ev(EventKind::Call, pid, mfa, ts)),
                    1 => agg.record(&ev(EventKind::Return, pid, mfa, ts)),
                    2 => agg.record(&ev(EventKind::Exception, pid, mfa, ts)),
                    _ => take(&mut agg, ts),
                }
            }
            take(&mut agg, ts + 1);
            for (mfa, f) in agg.functions() {
                let s = sums.get(mfa).copied().unwrap_or_default();
                prop_assert_eq!(s, (f.calls, f.returns, f.exceptions, f.total_ns, f.latency.len()));
            }
        }

        /// Whatever the interleaving of several processes' events, as long as each process's
        /// own events keep their order, every call pairs with its own return and the recorded
        /// latencies equal the true ones (to HDR precision).
        #[test]
        fn pairing_is_exact_under_any_interleaving(
            trees in prop::collection::vec(call_tree(), 1..6),
            picks in prop::collection::vec(any::<prop::sample::Index>(), 0..400),
        ) {
            // Each process runs nested calls f -> f -> ... (recursion), then unwinds with the
            // generated durations; the event list per process is in program order.
            let mut per_process: Vec<Vec<Event>> = Vec::new();
            let mut truth: Vec<u64> = Vec::new();
            for (p, tree) in trees.iter().enumerate() {
                let pid = p as u64 + 100;
                let mut events = Vec::new();
                let mut ts = 0u64;
                let mut starts = Vec::new();
                for _ in tree {
                    ts += 1;
                    starts.push(ts);
                    events.push(ev(EventKind::Call, pid, F, ts));
                }
                for (duration, raises) in tree.iter().rev() {
                    ts += duration;
                    let start = starts.pop().unwrap();
                    let kind = if *raises { EventKind::Exception } else { EventKind::Return };
                    events.push(ev(kind, pid, F, ts));
                    truth.push(ts - start);
                }
                events.reverse();
                per_process.push(events);
            }
            // Interleave: repeatedly take the next event of a chosen process.
            let mut agg = Aggregator::new(10, 1 << 20);
            let mut picks = picks.into_iter();
            while per_process.iter().any(|e| !e.is_empty()) {
                let live: Vec<usize> = (0..per_process.len()).filter(|i| !per_process[*i].is_empty()).collect();
                let i = match picks.next() { Some(ix) => live[ix.index(live.len())], None => live[0] };
                let event = per_process[i].pop().unwrap();
                agg.record(&event);
            }
            let f = agg.function(&F).unwrap();
            let total: u64 = trees.iter().map(|t| t.len() as u64).sum();
            prop_assert_eq!(f.calls, total);
            prop_assert_eq!(f.returns + f.exceptions, total);
            prop_assert_eq!(agg.counters(), PairingCounters::default());
            prop_assert_eq!(agg.open_calls(), 0);
            let mut expected = Histogram::<u64>::new_with_bounds(1, MAX_LATENCY_NS, SIGNIFICANT_DIGITS).unwrap();
            for t in &truth { expected.record(*t).unwrap(); }
            for q in [0.5, 0.9, 0.99, 0.999, 1.0] {
                prop_assert!(f.latency.equivalent(f.latency.value_at_quantile(q), expected.value_at_quantile(q)));
            }
        }
    }
}
