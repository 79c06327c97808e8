//! Turns the ordered stream of a session's events into its figures: per-function statistics
//! of calls paired with their returns, and the figures of process activity.
//!
//! The files, in the order an event goes through them:
//! - this module: the [`Aggregator`] and its entry points, one per source of events:
//!   [`Aggregator::record_from`] for the collector's stream (calls, returns and exceptions
//!   are paired, other kinds are process activity), [`Aggregator::record_routed`] for a
//!   session split over several aggregators ([`crate::shard`]), and the reads (the accessors
//!   here, [`Aggregator::merged`] for a split session);
//! - [`functions`]: the function an event is of, within the filter and `max_functions`,
//!   and its statistics ([`FunctionStats`]);
//! - [`pairing`]: a call's open frame, the return that closes it, the loops found among
//!   the frames;
//! - what a paired call feeds: [`stacks`] (time per call path), [`slowest`] (the slow
//!   calls, with their copies), [`own`] (own time), [`probe`] (the events inside a call, and
//!   their cost taken out), [`split`] (running, descheduled, GC),
//!   [`keyed`] (latency per key), [`recorder`] (the last events, `recent`), [`trees`] (call
//!   trees built while their root runs, kept when it turns out slow), [`capture`] (a call
//!   over the capture threshold offered to the session's gate, `capture`);
//! - [`activity`]: every other kind, moving its process on in the process table, counted in
//!   [`messages`], [`scheduling`], [`gc`], [`procs`] and [`ports`] ([`top`]: their per-pid
//!   top-N tables);
//! - [`merge`]: several aggregators read as one;
//! - the leaves: [`histogram`] (the HDR histograms every figure is kept in; [`compact`]: a
//!   timed function's, in a compact form of the same layout), `ordered`
//!   (the ordered merge of bounded lists); the bytes each part holds are measured with
//!   [`crate::memory`]'s helpers.
//!
//! Memory is bounded: at most `max_functions` functions get statistics (calls of others are
//! counted in `untracked_events`), and open frames are bounded per process and over all
//! ([`pairing`]).
//!
//! Copies of arguments and results (`args => true`) and keys (`key`) come with their event
//! ([`EventCopies`]): a call's ride in its open frame and, when the call pairs with its
//! return or exception, go with the result's copy into the slow call offered to
//! [`slowest::SlowCalls`] (kept only if the call is), into the flight recorder, and the key
//! into the function's keys. Copies of calls that are not kept are dropped here, on the
//! collector, and never reach Erlang. An open call holds its copy (`max_term_bytes` at most)
//! until it returns, so at most `max_open_calls * max_term_bytes`.
//!
//! One session may split its events over several aggregators, each owning the processes
//! whose pids hash to it ([`crate::shard`]: which pid is whose, and where each event goes),
//! and read them back as one ([`merge`]).

use crate::event::{Event, EventKind, Mfa};
use crate::frames::FrameTable;
use crate::process::ProcessTable;
use crate::shard::Shard;
use crate::term_format::EventCopies;

pub mod functions;
pub mod pairing;

pub mod keyed;
pub mod own;
pub mod probe;
pub mod recorder;
pub mod slowest;
pub mod split;
pub mod stacks;
pub mod trees;
pub mod capture;

pub mod activity;
pub mod gc;
pub mod messages;
pub mod ports;
pub mod procs;
pub mod scheduling;
pub mod top;

pub mod merge;

pub mod compact;
pub mod histogram;
mod ordered;

#[cfg(test)]
mod tests;

use activity::ActivityStats;
use functions::Functions;
pub use functions::{FunctionStats, IntervalStats, MfaPattern};
pub use compact::Compact;
pub use histogram::{MAX_LATENCY_NS, RELATIVE_ERROR, SIGNIFICANT_DIGITS};
use crate::memory::Memory;
use pairing::{Frame, Loops, OpenCalls, NO_SPLIT};
use probe::{Compensation, Inner};
pub use pairing::{PairingCounters, LOOP_DEPTH, LOOP_MIN_SPAN_NS, MAX_DEPTH};
use recorder::{Recorded, Recorder};
use slowest::{SlowCall, SlowestConfig};
use stacks::StackPaths;
use trees::{Trees, TreesConfig};

/// Per-session aggregation state, owned by whoever holds the session's aggregator lock.
pub struct Aggregator {
    /// The functions with statistics, the filter, what each keeps of its slow calls.
    functions: Functions,
    /// Open call frames per process.
    open: OpenCalls,
    /// Functions counted without pairing, and loops found at run time.
    loops: Loops,
    counters: PairingCounters,
    /// When the current interval began (ms, the caller's clock); `None` before the first
    /// [`Aggregator::reset_interval`].
    interval_started_ms: Option<u64>,
    /// The last events (`recent`), if kept.
    recorder: Option<Recorder>,
    /// Time per call path, for folded-stack exports (`stacks.rs`).
    stack_paths: StackPaths,
    /// Keys the session may still take (`max_keys`).
    keys_left: usize,
    /// Per-process state: what each process is doing now.
    pub processes: ProcessTable,
    /// The figures of process activity (every other event kind), fed from `processes`.
    pub activity: ActivityStats,
    /// The pids this aggregator keeps state for ([`Aggregator::with_shard`]).
    shard: Shard,
    /// The session's frame table, told what counted events stand for no open frame
    /// ([`crate::frames`]); none in tests and merges.
    frames: Option<&'static FrameTable>,
    /// The cost taken out per inner event (`compensate`), if any (`probe.rs`).
    compensation: Option<Compensation>,
    /// The call trees, built and kept speculatively (`trees`), if the session keeps them.
    trees: Option<Trees>,
    /// The session's capture threshold and bounds (`capture`), if any (`capture.rs`).
    capture: Option<std::sync::Arc<capture::CaptureGate>>,
    /// Processes the overhead budget's fuse untraced, not yet taken by
    /// [`Aggregator::take_untraced`] (at most [`MAX_UNTRACED`]).
    untraced: Vec<u64>,
}

/// The processes untraced by the fuse an aggregator keeps until they are taken (the budget
/// traces them again, `ferrotrace_overhead`): past this, the rest stay untraced.
pub const MAX_UNTRACED: usize = 1024;

impl Aggregator {
    /// An empty aggregator keeping at most `max_functions` functions' statistics and
    /// `max_open_calls` open frames.
    pub fn new(max_functions: usize, max_open_calls: usize) -> Self {
        Aggregator {
            functions: Functions::new(max_functions),
            open: OpenCalls::new(max_open_calls),
            loops: Loops::default(),
            counters: PairingCounters::default(),
            interval_started_ms: None,
            recorder: None,
            stack_paths: StackPaths::new(stacks::DEFAULT_MAX_PATHS),
            keys_left: keyed::DEFAULT_MAX_KEYS,
            processes: ProcessTable::default(),
            activity: ActivityStats::default(),
            shard: Shard::default(),
            frames: None,
            compensation: None,
            trees: None,
            capture: None,
            untraced: Vec::new(),
        }
    }

    /// Offers every call as slow as `gate.slower_than_ns` or slower, once paired, to `gate`
    /// (`capture`, `capture.rs`); `None`: none.
    pub fn set_capture(&mut self, gate: Option<std::sync::Arc<capture::CaptureGate>>) {
        self.capture = gate;
    }

    /// Settles the session's frame table as events are folded in: calls less returns less
    /// the frames open on this aggregator's stacks ([`crate::frames`]). Set it before the
    /// first event.
    pub fn with_frames(mut self, frames: &'static FrameTable) -> Self {
        self.frames = Some(frames);
        self
    }

    /// Makes this aggregator the `index`-th of `count` sharing one session: it keeps the
    /// state and figures of the pids it owns ([`crate::shard::shard_of`]) only. Feed it what
    /// [`crate::shard::route::Router`] routes to it with [`Aggregator::record_routed`], which
    /// also does an event's part for an owned second pid (a message's receiver, a spawned
    /// child: [`crate::shard::route::other_pid`]); [`Aggregator::merged`] reads all of them
    /// as one. Count 1 (the default) owns every pid. Set it before the first event.
    ///
    /// # Panics
    /// If `index >= count`.
    pub fn with_shard(mut self, index: u32, count: u32) -> Self {
        assert!(index < count, "shard {index} of {count}");
        self.shard = Shard { index, count };
        self.processes.set_shard(self.shard);
        self
    }

    /// Records latencies and own times less the cost of the session's events inside each
    /// call (`probe.rs`); `None` records them as measured. Set it before the first event.
    pub fn with_compensation(mut self, compensation: Option<Compensation>) -> Self {
        self.compensation = compensation;
        self
    }

    /// Takes `compensation` out of the calls paired from now on (a calibration that landed
    /// after the start, `ferrotrace_calibrate`). The calls paired before keep their raw
    /// latencies, from which a function's raw histogram starts (`probe.rs`).
    pub fn set_compensation(&mut self, compensation: Option<Compensation>) {
        self.compensation = compensation;
    }

    /// The cost taken out per inner event, if any.
    pub fn compensation(&self) -> Option<Compensation> {
        self.compensation
    }

    /// Keeps at most `config.max_keys` keys over the session (`key`).
    pub fn with_keys(mut self, config: keyed::KeysConfig) -> Self {
        self.keys_left = config.max_keys;
        self
    }

    /// Keeps slow calls as `config` says, for the functions seen from now on (set it before
    /// the first event; the session does at start).
    pub fn with_slowest(mut self, config: SlowestConfig) -> Self {
        self.functions.slowest = config;
        self
    }

    /// Builds call trees and keeps the slow ones as `config` says (`trees.rs`); `None`:
    /// none. Set it before the first event.
    pub fn with_trees(mut self, config: Option<TreesConfig>) -> Self {
        self.trees = config.map(Trees::new);
        self
    }

    /// The calls of the functions `patterns` match are the roots of trees from now on
    /// (empty: the outermost traced call of each process).
    pub fn set_tree_roots(&mut self, patterns: Vec<MfaPattern>) {
        if let Some(trees) = &mut self.trees {
            trees.set_roots(patterns);
        }
    }

    /// The call trees, if the session keeps them.
    pub fn trees(&self) -> Option<&Trees> {
        self.trees.as_ref()
    }

    /// Keeps the last `capacity` events of the traced functions; 0: none.
    pub fn with_recent(mut self, capacity: usize) -> Self {
        self.recorder = (capacity > 0).then(|| Recorder::new(capacity));
        self
    }

    /// Aggregates only the functions `patterns` match from now on; others are counted in
    /// `foreign_events`.
    pub fn set_filter(&mut self, patterns: Vec<MfaPattern>) {
        self.functions.set_filter(patterns);
    }

    /// Never aggregates the functions of `modules` (module atom bits) from now on, whatever
    /// the filter: their events are counted in `foreign_events`.
    pub fn exclude_modules(&mut self, modules: Vec<u64>) {
        self.functions.exclude_modules(modules);
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
            self.loops.counted.insert(*mfa, since_ns);
            self.functions.set_loop_only(mfa);
            self.open.drop_frames_of(*mfa, self.frames);
        }
    }

    // --- Entry points: the collector's stream, a split session's routed events. ---

    /// Folds one event in: it ran on thread `thread` (the index of its producer: a call
    /// returning on another thread than its call counts as a migration), with the copies
    /// made for it (its arguments or result, and a call's key). Events of one process must
    /// arrive in the order they happened. A sharded aggregator ([`Aggregator::with_shard`])
    /// must own the event's tracee: feed it with [`Aggregator::record_routed`].
    #[inline]
    pub fn record_from(&mut self, event: &Event, thread: u32, copies: EventCopies) {
        // A call counts +1 and a return -1 on the frame table; each frame the event leaves
        // on (or takes off) the process's stack takes one back (`crate::frames`): what the
        // event settles.
        let settle = match event.kind {
            EventKind::Call => self.record_call(event, thread, copies),
            EventKind::Return | EventKind::Exception => self.record_return(event, thread, copies),
            _ => self.record_activity(event),
        };
        if let Some(frames) = self.frames {
            frames.settle(event.pid, settle);
        }
    }

    /// Folds in an event the router sent to this aggregator (as [`Aggregator::record_from`]):
    /// all of it if this aggregator owns the tracee, else only what concerns the owned
    /// second pid, or that scheduling is traced. The check is here rather than in
    /// `record_from`, so that an unsharded session's collector does not pay it per event.
    #[inline]
    pub fn record_routed(&mut self, event: &Event, thread: u32, copies: EventCopies) {
        if self.shard.owns(event.pid) {
            self.record_from(event, thread, copies);
            return;
        }
        match event.kind {
            EventKind::Send | EventKind::SendDead => self.processes.message_to(event.mfa.module, event.ts),
            EventKind::Spawn => self.processes.born(event.mfa.module, event.ts),
            EventKind::In | EventKind::Out | EventKind::OutExited => self.processes.scheduling_seen(),
            _ => {}
        }
    }

    // --- Calls and returns: paired (`pairing.rs`), fed to the function's figures. ---

    /// A call: counted, and its frame opened unless it is a loop's; what it settles.
    fn record_call(&mut self, event: &Event, thread: u32, copies: EventCopies) -> i64 {
        let (mfa, ts) = (event.mfa, event.ts);
        match self.functions.stats_for(mfa, ts, |mfa| self.loops.contains(mfa)) {
            Some(stats) if stats.removed => {
                self.counters.foreign_events += 1;
                return 1;
            }
            Some(stats) if stats.loop_only => {
                stats.count_call();
                self.open.count_inner(event.pid, Inner::CALL);
                // Not counted on the frame table, unless made before the callbacks knew.
                return if self.loops.uncounted(&mfa, ts) { 0 } else { 1 };
            }
            Some(stats) => stats.count_call(),
            None => {
                self.functions.count_untracked(mfa, &mut self.counters);
                self.open.count_inner(event.pid, Inner::CALL);
                return 1;
            }
        }
        let EventCopies { args, key } = copies;
        if let Some(recorder) = &mut self.recorder {
            recorder.push(Recorded { ts_ns: ts, pid: event.pid, mfa, kind: event.kind, duration_ns: None, copy: args.clone() });
        }
        if self.open.is_full() {
            self.counters.abandoned_calls += 1;
            self.open.count_inner(event.pid, Inner::CALL);
            return 1;
        }
        let split = if self.processes.splits() { self.processes.totals(event.pid) } else { None }.unwrap_or(NO_SPLIT);
        let copies = match (args, key) {
            (None, None) => None,
            (args, key) => Some(Box::new(EventCopies { args, key })),
        };
        let frame = Frame { mfa, ts, callees_ns: 0, inner: Inner::default(), callees_inner: Inner::default(), node: 0, split, thread, copies };
        let opened = self.open.open(event.pid, frame, &mut self.stack_paths, &mut self.counters);
        if let Some(trees) = &mut self.trees {
            trees.call(event.pid, mfa, ts, opened.depth);
        }
        // The function was looked up above: this hits the last function's shortcut.
        if let Some(stats) = self.functions.stats_for(mfa, ts, |mfa| self.loops.contains(mfa)) {
            if opened.depth as u32 > stats.max_frames {
                stats.max_frames = opened.depth as u32;
                stats.max_frames_pid = event.pid;
            }
        }
        for mfa in opened.looping {
            self.mark_loop(mfa, ts);
        }
        i64::from(opened.dropped_oldest)
    }

    /// A return or exception: paired with its call's frame, and the call's figures recorded;
    /// what it settles.
    fn record_return(&mut self, event: &Event, thread: u32, copies: EventCopies) -> i64 {
        let closed = self.open.close(event.pid, event.mfa, event.ts, &mut self.stack_paths, &mut self.counters);
        let (frame, settle) = match closed {
            Some((frame, abandoned)) => (Some(frame), abandoned as i64),
            None => {
                self.open.count_inner(event.pid, Inner::RETURN);
                (None, -1)
            }
        };
        // Looked up only for a frame that took a split snapshot (scheduling traced).
        let parts = frame.as_ref().and_then(Frame::split).and_then(|at_call| Some((at_call, self.processes.totals(event.pid)?)));
        let duration = frame.as_ref().map(|frame| event.ts.saturating_sub(frame.ts));
        let result = copies.args;
        let recorded = self.recorder.as_ref().map(|_| result.clone());
        let Some(stats) = self.functions.stats_for(event.mfa, event.ts, |mfa| self.loops.contains(mfa)) else {
            self.functions.count_untracked(event.mfa, &mut self.counters);
            return settle;
        };
        if stats.removed && frame.is_none() {
            // The return of a call made after the function left the filter.
            self.counters.foreign_events += 1;
            return settle;
        }
        stats.count_return(event.kind);
        match frame {
            Some(frame) => {
                stats.migrations += u64::from(frame.thread != thread);
                let raw_ns = event.ts.saturating_sub(frame.ts);
                // The figures an operator reads: compensated if the session says so.
                let (duration_ns, own_ns) = match self.compensation {
                    Some(c) => {
                        let (latency, own) = c.compensated(raw_ns, frame.callees_ns, frame.inner, frame.callees_inner);
                        stats.record_compensated(raw_ns, latency);
                        stats.own.record(own, 0);
                        stats.inner.record(frame.inner, raw_ns - latency);
                        (latency, own)
                    }
                    None => {
                        stats.record_latency(raw_ns);
                        stats.own.record(raw_ns, frame.callees_ns);
                        stats.inner.record(frame.inner, 0);
                        (raw_ns, raw_ns.saturating_sub(frame.callees_ns))
                    }
                };
                if let Some(gate) = self.capture.as_ref().filter(|gate| duration_ns >= gate.slower_than_ns) {
                    gate.offer(capture::CaptureCall { mfa: event.mfa, pid: event.pid, latency_ns: duration_ns, start_ns: frame.ts, end_ns: event.ts });
                }
                let EventCopies { args, key } = frame.copies.map(|c| *c).unwrap_or_default();
                if let Some(trees) = &mut self.trees {
                    let exception = event.kind == EventKind::Exception;
                    trees.returned(event.pid, event.mfa, event.ts, (duration_ns, own_ns), exception, args.as_ref());
                }
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
                    split.record(raw_ns.clamp(1, MAX_LATENCY_NS), d1.saturating_sub(d0), g1.saturating_sub(g0));
                }
                if let Some(key) = key {
                    stats.by_key.get_or_insert_with(Default::default).record(key, duration_ns, &mut self.keys_left);
                }
            }
            None if stats.loop_only => {}
            None => self.counters.unmatched_returns += 1,
        }
        if let Some(recorder) = &mut self.recorder {
            let copy = recorded.flatten();
            recorder.push(Recorded { ts_ns: event.ts, pid: event.pid, mfa: event.mfa, kind: event.kind, duration_ns: duration, copy });
        }
        settle
    }

    /// A function nested `LOOP_DEPTH` deep in one process without returning: tell the caller
    /// (once), so that it stops return tracing it and then says so with `set_loops`. Until
    /// then its calls keep their frames, and are paired and bounded as any other: counting
    /// them as frameless before the trace pattern changed would let frames pass the bound.
    fn mark_loop(&mut self, mfa: Mfa, ts: u64) {
        if self.functions.stats_for(mfa, ts, |mfa| self.loops.contains(mfa)).is_some_and(|stats| !stats.loop_only) {
            self.loops.report(mfa);
        }
    }

    /// Loops that wait fast: a process with `LOOP_DEPTH` open calls, the oldest made
    /// `LOOP_MIN_SPAN_NS` before `now_ns` (see `pairing.rs`). A loop that takes a message
    /// every microsecond nests past `LOOP_DEPTH` before its calls span that long; the frame
    /// bound then refuses its calls and no event of it comes to look at, so the collector
    /// asks now and then ([`crate::collector::shards::Shards::find_stuck_loops`]). Found loops
    /// are counted from then on, as those a call finds.
    pub fn find_stuck_loops(&mut self, now_ns: u64) {
        if self.open.none_deep() {
            return;
        }
        for mfa in self.open.stuck_loops(now_ns) {
            self.mark_loop(mfa, now_ns);
        }
    }

    /// Loops found at run time since the last call.
    pub fn take_new_loops(&mut self) -> Vec<Mfa> {
        self.loops.take_new()
    }

    /// True if loops were found that `take_new_loops` has not taken yet.
    pub fn has_new_loops(&self) -> bool {
        self.loops.has_new()
    }

    // --- Process activity: every other kind (`activity.rs`). ---

    /// An event other than a call, return or exception; what it settles (an exit: the
    /// frames its process left open).
    fn record_activity(&mut self, event: &Event) -> i64 {
        // An untraced process's returns will not come, as a dead one's.
        let gone = matches!(event.kind, EventKind::Exit | EventKind::Untraced);
        let settle = if gone { self.open.exit(event.pid, &mut self.counters) as i64 } else { 0 };
        if let (true, Some(trees)) = (gone, &mut self.trees) {
            trees.exited(event.pid);
        }
        if event.kind == EventKind::Untraced {
            if self.untraced.len() < MAX_UNTRACED {
                self.untraced.push(event.pid);
            }
            return settle;
        }
        self.activity.record(&mut self.processes, event);
        settle
    }

    /// Adds to `pids` the processes with calls open in this aggregator (a sharded one's own
    /// processes only: the others' calls are not paired here).
    pub fn open_pids(&self, pids: &mut Vec<u64>) {
        pids.extend(self.open.open_pids());
    }

    /// The processes the fuse untraced since the last call (at most [`MAX_UNTRACED`], in the
    /// order they were untraced; a process untraced twice is there twice).
    pub fn take_untraced(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.untraced)
    }

    // --- Reads (several aggregators: `merge.rs`). ---

    /// Statistics per function, in the order functions were first seen (loops included).
    pub fn functions(&self) -> impl Iterator<Item = (&Mfa, &FunctionStats)> {
        self.functions.stats.iter().map(|(mfa, stats)| (mfa, stats))
    }

    /// Statistics of one function, if it was seen.
    pub fn function(&self, mfa: &Mfa) -> Option<&FunctionStats> {
        self.functions.get(mfa)
    }

    /// The figures of the current interval per function, for the functions with something
    /// in it, in the order functions were first seen.
    pub fn interval(&self) -> impl Iterator<Item = (&Mfa, &IntervalStats)> {
        self.functions().filter(|(_, stats)| !stats.interval.is_empty()).map(|(mfa, stats)| (mfa, &stats.interval))
    }

    /// When the current interval began (ms), if an interval was ever read.
    pub fn interval_started_ms(&self) -> Option<u64> {
        self.interval_started_ms
    }

    /// Ends the current interval at `now_ms`: every function's interval figures go back to
    /// zero (in place: no allocation), and a new interval begins.
    pub fn reset_interval(&mut self, now_ms: u64) {
        self.functions.reset_interval();
        self.interval_started_ms = Some(now_ms);
    }

    /// Every function counted without pairing.
    pub fn loops(&self) -> impl Iterator<Item = &Mfa> {
        self.loops.counted.keys()
    }

    /// How well calls and returns paired up so far.
    pub fn counters(&self) -> PairingCounters {
        self.counters
    }

    /// Open calls currently waiting for their return, over all processes.
    pub fn open_calls(&self) -> usize {
        self.open.open
    }

    /// Processes with at least one open call.
    pub fn tracked_processes(&self) -> usize {
        self.open.nonempty
    }

    /// Frame stacks held, empty ones included (bounded by the sweep); merged, the parts'
    /// summed (each sweeps its own, so not what one aggregator would hold).
    pub fn stacks_held(&self) -> usize {
        self.open.stacks_held()
    }

    /// Time per call path of the traced functions (folded stacks).
    pub fn stack_paths(&self) -> &StackPaths {
        &self.stack_paths
    }

    /// The flight recorder, if the session has one.
    pub fn recorder(&self) -> Option<&Recorder> {
        self.recorder.as_ref()
    }

    /// The bytes this aggregator holds, by part (its share of [`Memory`]: the processes,
    /// open frames, histograms, slow calls, keys, recent events and tables; not the
    /// rings, the collector's buffers or the frame table, which are the session's).
    pub fn memory(&self) -> Memory {
        let (open_frames, frame_copies) = self.open.bytes();
        let mut memory = Memory { processes: self.processes.bytes(), open_frames, frame_copies, ..Memory::default() };
        let function_table = self.functions.add_memory(&mut memory);
        if let Some(recorder) = &self.recorder {
            memory.recent = recorder.bytes();
        }
        let (histograms, tables) = self.activity.bytes();
        memory.histograms += histograms;
        // Call trees count with the slow calls: what is kept of slow calls.
        memory.slow_calls += self.trees.as_ref().map_or(0, Trees::bytes);
        memory.tables = tables + function_table + self.loops.bytes() + self.stack_paths.bytes();
        memory
    }

    /// Frees the open call frames (the stacks and the copies they hold) and the process
    /// table, for a session that stopped: no event comes any more. What they counted stays
    /// as numbers: `open_calls` and `tracked_processes` answer the values at the stop (the
    /// calls still open then are not counted as abandoned), and the process table's length
    /// those it had.
    pub fn free_state(&mut self) {
        self.open.free();
        self.processes.free_state();
        if let Some(trees) = &mut self.trees {
            trees.free();
        }
    }
}

/// Shorthands for tests: an event on thread 0, with or without copies.
#[cfg(test)]
impl Aggregator {
    /// [`Aggregator::record_from`] on thread 0 without copies.
    pub fn record(&mut self, event: &Event) {
        self.record_from(event, 0, EventCopies::default());
    }

    /// [`Aggregator::record_from`] without copies.
    pub fn record_on(&mut self, event: &Event, thread: u32) {
        self.record_from(event, thread, EventCopies::default());
    }

    /// [`Aggregator::record_from`] on thread 0.
    pub fn record_with(&mut self, event: &Event, copies: impl Into<EventCopies>) {
        self.record_from(event, 0, copies.into());
    }
}
