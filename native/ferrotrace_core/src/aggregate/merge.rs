//! Reading several aggregators as one: [`Aggregator::merged`] builds the aggregator that a
//! single one would have become after seeing every event the parts saw, given parts that own
//! disjoint pids ([`Aggregator::with_shard`], fed by [`crate::shard::route::Router`]).
//!
//! Per-pid state and figures come from one part each and are copied; per-function and
//! per-path figures are summed (HDR histograms add exactly: same precision, counts per
//! bucket); bounded lists (slowest calls, calls over the threshold, recent events) keep what
//! one list fed both streams would have kept. Each sub-aggregate merges itself
//! (`merge_from`, next to its own code); this module puts the functions in order.
//!
//! Exact, but for the bounds: each part applies its own (`max_functions`, `max_open_calls`,
//! `max_keys`, paths, processes, per-pid tables), so a merged aggregator may hold up to their
//! sum, and once a part reached one, figures differ from one aggregator's (which would have
//! reached it at another point). Also not exact: `stacks_held` (each part sweeps its own
//! empty stacks), `Messages::size_capped` (see there), and a loop found at run time
//! (`take_new_loops`), which only its finder counts as a loop until the others are told
//! (`set_loops`).

use super::functions::FunctionStats;
use super::stacks::StackPaths;
use super::Aggregator;
use crate::event::Mfa;
use crate::hasher::WordMap;

impl Aggregator {
    /// One aggregator answering every read as a single one would have after seeing all the
    /// events `parts` saw, for parts owning disjoint pids and configured alike (filter,
    /// loops, slow calls, recorder, keys): the module docs say what is exact. Built anew at
    /// each call (its cost is the size of the parts' figures, histograms included): a
    /// session with one aggregator reads it directly.
    ///
    /// The result is a snapshot for reading. It holds no open call frames (`open_calls`,
    /// `tracked_processes` and `stacks_held` still count the parts'), and no loops to take;
    /// its bounds are the parts' summed. Configuring it (`reset_interval`, `set_filter`,
    /// `set_loops`) changes nothing in the parts: do that on each part.
    pub fn merged(parts: &[&Aggregator]) -> Aggregator {
        Aggregator::merged_reusing(parts, None)
    }

    /// As [`Aggregator::merged`], made in the histograms of `spare`, an earlier merge, where
    /// it had the same functions: the result is the same, but the counts are copied into
    /// memory already mapped. A read's merge is mostly those copies, and into fresh memory
    /// most of their time went to page faults (the allocator hands large freed blocks back
    /// to the kernel between reads).
    pub fn merged_reusing(parts: &[&Aggregator], spare: Option<Aggregator>) -> Aggregator {
        let mut spare: WordMap<Mfa, FunctionStats> =
            spare.map(|s| s.functions.stats.into_iter().collect()).unwrap_or_default();
        let mut out = Aggregator::new(0, 0);
        // Bounds are summed from the parts'.
        out.keys_left = 0;
        out.stack_paths = StackPaths::new(0);
        if let Some(first) = parts.first() {
            out.functions.slowest = first.functions.slowest;
            out.functions.filter = first.functions.filter.clone();
            out.compensation = first.compensation;
            out.trees = first.trees.as_ref().map(|t| super::trees::Trees::new(t.config()));
        }
        // Functions in the order they were first seen over all parts (ties: the earlier
        // part, then the part's own order).
        let mut first_seen: WordMap<Mfa, (u64, usize, usize)> = WordMap::default();
        for (p, part) in parts.iter().enumerate() {
            for (i, (mfa, stats)) in part.functions.stats.iter().enumerate() {
                let seen = (stats.first_ns, p, i);
                first_seen.entry(*mfa).and_modify(|s| *s = (*s).min(seen)).or_insert(seen);
            }
        }
        let mut order: Vec<(Mfa, (u64, usize, usize))> = first_seen.into_iter().collect();
        order.sort_unstable_by_key(|(_, seen)| *seen);
        let functions = &mut out.functions;
        for (mfa, (first_ns, _, _)) in order {
            let stats = match spare.remove(&mfa) {
                Some(earlier) => earlier.emptied(first_ns, functions.slowest),
                None => FunctionStats::new(first_ns, functions.slowest),
            };
            functions.index.insert(mfa, functions.stats.len());
            functions.stats.push((mfa, stats));
        }
        for part in parts {
            for (mfa, stats) in &part.functions.stats {
                let index = out.functions.index[mfa];
                out.functions.stats[index].1.merge_from(stats);
            }
            out.functions.max_functions = out.functions.max_functions.saturating_add(part.functions.max_functions);
            out.open.max_open = out.open.max_open.saturating_add(part.open.max_open);
            out.open.open += part.open.open;
            out.open.nonempty += part.open.nonempty;
            out.open.elsewhere += part.stacks_held();
            out.counters.add(&part.counters);
            out.loops.counted.extend(part.loops.counted.iter().map(|(mfa, since)| (*mfa, *since)));
            out.interval_started_ms = out.interval_started_ms.max(part.interval_started_ms);
            match (&mut out.recorder, &part.recorder) {
                (Some(into), Some(from)) => into.merge_from(from),
                (None, Some(from)) => out.recorder = Some(from.clone()),
                _ => {}
            }
            out.stack_paths.merge_from(&part.stack_paths);
            out.processes.merge_from(&part.processes);
            out.activity.merge_from(&part.activity);
            out.keys_left = out.keys_left.saturating_add(part.keys_left);
            if let (Some(into), Some(from)) = (&mut out.trees, &part.trees) {
                into.merge_from(from);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::keyed::{KeySource, KeysConfig};
    use super::super::recorder::Recorded;
    use super::super::slowest::{SlowCall, SlowestConfig};
    use super::super::stacks::Folded;
    use super::super::top::{Tally, TopTable};
    use super::super::MfaPattern;
    use super::*;
    use crate::shard::{self, route::Router};
    use crate::event::{Event, EventKind};
    use crate::term_format::EventCopies;
    use hdrhistogram::Histogram;
    use proptest::prelude::*;
    use std::sync::Arc;

    const FUNCTIONS: [Mfa; 4] = [
        Mfa { module: 1, function: 1, arity: 0 },
        Mfa { module: 1, function: 2, arity: 1 },
        // A loop (count-only) and a function outside the filter.
        Mfa { module: 1, function: 3, arity: 0 },
        Mfa { module: 2, function: 1, arity: 0 },
    ];

    fn aggregator() -> Aggregator {
        let slowest = SlowestConfig { keep: 3, threshold_ns: Some(400), max_slow_calls: 4 };
        let mut agg = Aggregator::new(100, 10_000)
            .with_slowest(slowest)
            .with_recent(8)
            .with_keys(KeysConfig { source: KeySource::Message, max_keys: 100 });
        agg.set_filter(vec![MfaPattern { module: Some(1), function: None, arity: None }]);
        agg.set_loops(&[FUNCTIONS[2]]);
        agg
    }

    /// Every value with its count: equal for two histograms that recorded the same values.
    fn hist(h: &Histogram<u64>) -> (u64, u64, u64, Vec<(u64, u64)>) {
        (h.len(), h.min(), h.max(), h.iter_recorded().map(|v| (v.value_iterated_to(), v.count_at_value())).collect())
    }

    fn table<K: std::hash::Hash + Eq + Copy + Ord>(t: &TopTable<K>) -> Table<K> {
        let mut all = t.top(usize::MAX);
        all.sort_by_key(|(k, _)| *k);
        (all, t.overflow)
    }

    type Hist = (u64, u64, u64, Vec<(u64, u64)>);
    /// A top table's tallies by key, and its overflow.
    type Table<K> = (Vec<(K, Tally)>, u64);
    /// Keys with their count, total and histogram, and the overflow.
    type Keys = (Vec<(Vec<u8>, u64, u64, Hist)>, u64);

    #[derive(Debug, PartialEq)]
    struct FunctionView {
        mfa: Mfa,
        counts: (u64, u64, u64, u64, u64, bool),
        latency: Hist,
        interval: (u64, u64, u64, u64, Hist),
        slowest: Vec<SlowCall>,
        over: (Vec<SlowCall>, u64),
        own: (u64, Hist),
        split: Option<[Hist; 3]>,
        keys: Option<Keys>,
    }

    /// What every read accessor answers (but `stacks_held`, not exact).
    #[derive(Debug, PartialEq)]
    struct View {
        functions: Vec<FunctionView>,
        interval: Vec<Mfa>,
        interval_started_ms: Option<u64>,
        lookups: Vec<Option<u64>>,
        loops: Vec<Mfa>,
        counters: super::super::PairingCounters,
        open: (usize, usize),
        paths: (Vec<Folded>, usize, u64, u64),
        recent: Option<(Vec<Recorded>, u64)>,
        processes: (usize, u64, bool),
        seen: u8,
        messages: (u64, u64, u64, u64, u64, [Hist; 3], Hist),
        message_tables: [Table<u64>; 3],
        scheduling: (u64, u64, Hist, Table<u64>, Table<Mfa>),
        gc: (u64, u64, Hist, Hist, Table<u64>),
        procs: (u64, u64, [u64; 6], Hist, Table<u64>),
        ports: (u64, u64, Hist),
    }

    fn view(agg: &Aggregator) -> View {
        let functions = agg
            .functions()
            .map(|(mfa, f)| FunctionView {
                mfa: *mfa,
                counts: (f.calls, f.returns, f.exceptions, f.total_ns, f.migrations, f.loop_only),
                latency: hist(&f.latency.to_hdr()),
                interval: (f.interval.calls, f.interval.returns, f.interval.exceptions, f.interval.total_ns, hist(&f.interval.latency.to_hdr())),
                slowest: f.slow.slowest(),
                over: (f.slow.over_threshold(), f.slow.over_dropped()),
                own: (f.own.total_ns, hist(&f.own.latency.to_hdr())),
                split: f.split.as_ref().map(|s| [hist(&s.running), hist(&s.descheduled), hist(&s.gc)]),
                keys: f.by_key.as_ref().map(|k| {
                    let keys = k.by_total().into_iter().map(|(key, s)| (key.to_vec(), s.count, s.total_ns, hist(&s.latency))).collect();
                    (keys, k.overflow)
                }),
            })
            .collect();
        let unknown = Mfa { module: 9, function: 9, arity: 9 };
        let lookups = FUNCTIONS.iter().chain([&unknown]).map(|mfa| agg.function(mfa).map(|f| f.calls)).collect();
        let mut loops: Vec<Mfa> = agg.loops().copied().collect();
        loops.sort();
        let paths = agg.stack_paths();
        let (e, m) = (&agg.activity, &agg.activity.messages);
        let (s, g, p) = (&e.scheduling, &e.gc, &e.procs);
        View {
            functions,
            interval: agg.interval().map(|(mfa, _)| *mfa).collect(),
            interval_started_ms: agg.interval_started_ms(),
            lookups,
            loops,
            counters: agg.counters(),
            open: (agg.open_calls(), agg.tracked_processes()),
            paths: (paths.folded(), paths.len(), paths.overflow(), paths.too_deep()),
            recent: agg.recorder().map(|r| (r.events().cloned().collect(), r.total())),
            processes: (agg.processes.len(), agg.processes.untracked, agg.processes.splits()),
            seen: e.seen,
            messages: (m.sent, m.received, m.timeouts, m.to_dead, m.size_capped,
                       [hist(&m.sent_words), hist(&m.received_words), hist(m.size_words())], hist(&m.wakeup)),
            message_tables: [table(&m.top_senders), table(&m.top_receivers), table(&m.wakeup_by_receiver)],
            scheduling: (s.ins, s.outs, hist(&s.run_slice), table(&s.top_cpu), table(&s.out_locations)),
            gc: (g.reclaimed_words, g.unpaired, hist(&g.minor), hist(&g.major), table(&g.top_pause)),
            procs: (p.spawned, p.exited, p.other, hist(&p.lifetime), table(&p.exit_reasons)),
            ports: (e.ports.opened, e.ports.closed, hist(&e.ports.run_slice)),
        }
    }

    fn pid(i: usize) -> u64 {
        ((0x100 + i as u64) << 4) | 3
    }

    /// One step of the stream: an event with its thread and copies, or an interval read.
    enum Step {
        Event(Event, u32, EventCopies),
        Reset(u64),
    }

    /// A plausible stream from generated numbers: processes calling nested functions and
    /// returning (or raising, or returning out of order), sending to each other, spawning,
    /// scheduled in and out, collecting garbage, exiting; ports; interval reads.
    fn stream(ops: &[(u8, u8, u8, u16, u16)]) -> Vec<Step> {
        let mut pids: Vec<u64> = (0..6).map(pid).collect();
        let mut open: Vec<Vec<Mfa>> = vec![Vec::new(); 6];
        let (mut running, mut in_gc) = (vec![false; 6], vec![false; 6]);
        let copy = |b: u8| Some(Arc::from(vec![b]));
        let (mut ts, mut steps) = (1_000u64, Vec::new());
        for &(op, a, b, c, dt) in ops {
            ts += 1 + u64::from(dt % 1_000);
            let i = a as usize % pids.len();
            let p = pids[i];
            let f = FUNCTIONS[b as usize % FUNCTIONS.len()];
            let thread = u32::from(c % 3);
            let mut event = |kind, module, function, arity, copies| {
                steps.push(Step::Event(Event { ts, pid: p, mfa: Mfa { module, function, arity }, kind }, thread, copies));
            };
            match op % 16 {
                0..=2 => {
                    open[i].push(f);
                    let key = (c % 3 == 0).then(|| Arc::from(vec![(c % 5) as u8]));
                    event(EventKind::Call, f.module, f.function, f.arity, EventCopies { args: copy(b), key });
                }
                3 | 4 => {
                    let kind = if c % 4 == 0 { EventKind::Exception } else { EventKind::Return };
                    let g = open[i].pop().unwrap_or(f);
                    event(kind, g.module, g.function, g.arity, EventCopies { args: copy(a), key: None });
                }
                5 => {
                    // Out of order: abandons the frames above, or unmatched.
                    if let Some(at) = open[i].iter().rposition(|m| *m == f) {
                        open[i].truncate(at);
                    }
                    event(EventKind::Return, f.module, f.function, f.arity, EventCopies::default());
                }
                6 => {
                    let to = if b % 7 == 0 { 0 } else { pids[b as usize % pids.len()] };
                    let kind = if b % 5 == 0 { EventKind::SendDead } else { EventKind::Send };
                    event(kind, to, u64::from(c), u32::from(c % 5 == 0), EventCopies::default());
                }
                7 if b % 3 == 0 => event(EventKind::ReceiveTimeout, 0, 0, 0, EventCopies::default()),
                7 => event(EventKind::Receive, 0, u64::from(c), 0, EventCopies::default()),
                8 if pids.len() < 12 => {
                    let child = pid(0x80 + pids.len());
                    event(EventKind::Spawn, child, 0, 0, EventCopies::default());
                    pids.push(child);
                    open.push(Vec::new());
                    running.push(false);
                    in_gc.push(false);
                }
                8 => event(EventKind::Spawned, pids[b as usize % pids.len()], 0, 0, EventCopies::default()),
                9 => {
                    let kind = if running[i] { EventKind::Out } else { EventKind::In };
                    running[i] = !running[i];
                    event(kind, f.module, f.function, f.arity, EventCopies::default());
                }
                10 => {
                    let kind = if in_gc[i] { EventKind::GcEnd } else { EventKind::GcStart };
                    in_gc[i] = !in_gc[i] || b % 4 == 0;
                    event(kind, 0, u64::from(c), u32::from(b % 2), EventCopies::default());
                }
                11 => {
                    open[i].clear();
                    event(EventKind::Exit, u64::from(b % 3) + 1, 0, 0, EventCopies::default());
                }
                12 => {
                    open[i].clear();
                    running[i] = false;
                    event(EventKind::OutExited, 0, 0, 0, EventCopies::default());
                }
                13 => event(EventKind::ProcOther, 0, 0, u32::from(b % 6), EventCopies::default()),
                14 => {
                    let port = ((0x300 + u64::from(b % 3)) << 4) | 7;
                    let kind = [EventKind::PortOpen, EventKind::PortIn, EventKind::PortOut, EventKind::PortClosed][c as usize % 4];
                    steps.push(Step::Event(Event { ts, pid: port, mfa: crate::event::NO_MFA, kind }, thread, EventCopies::default()));
                }
                _ => steps.push(Step::Reset(ts / 1_000)),
            }
        }
        steps
    }

    fn single(steps: &[Step]) -> Aggregator {
        let mut agg = aggregator();
        for step in steps {
            match step {
                Step::Event(event, thread, copies) => agg.record_from(event, *thread, copies.clone()),
                Step::Reset(now) => agg.reset_interval(*now),
            }
        }
        agg
    }

    /// The stream routed as the collector routes it to `count` aggregators.
    fn sharded(steps: &[Step], count: u32) -> Vec<Aggregator> {
        let mut parts: Vec<Aggregator> = (0..count).map(|i| aggregator().with_shard(i, count)).collect();
        let mut router = Router::new(count);
        for step in steps {
            match step {
                Step::Event(event, thread, copies) => {
                    for t in router.targets(event).iter(count) {
                        parts[t as usize].record_routed(event, *thread, copies.clone());
                    }
                }
                Step::Reset(now) => parts.iter_mut().for_each(|part| part.reset_interval(*now)),
            }
        }
        parts
    }

    fn merged_of(parts: &[Aggregator]) -> Aggregator {
        Aggregator::merged(&parts.iter().collect::<Vec<_>>())
    }

    #[test]
    fn one_part_merges_to_itself_and_none_to_an_empty_aggregator() {
        let ops: Vec<(u8, u8, u8, u16, u16)> = (0..200u32).map(|i| ((i * 7) as u8, (i * 3) as u8, (i * 5) as u8, (i * 11) as u16, (i * 13) as u16)).collect();
        let steps = stream(&ops);
        let agg = single(&steps);
        assert_eq!(view(&Aggregator::merged(&[&agg])), view(&agg));
        assert_eq!(Aggregator::merged(&[&agg]).stacks_held(), agg.stacks_held());
        let empty = Aggregator::merged(&[]);
        assert_eq!((empty.functions().count(), empty.open_calls(), empty.recorder().is_none()), (0, 0, true));
    }

    #[test]
    fn a_send_wakes_a_receiver_owned_elsewhere_and_a_child_is_born_where_it_is_owned() {
        let count = 2;
        let a = pid(0);
        let b = (1..100).map(pid).find(|p| shard::shard_of(*p, count) != shard::shard_of(a, count)).unwrap();
        let at = |kind, pid, module, ts| Event { ts, pid, mfa: Mfa { module, function: 1, arity: 0 }, kind };
        let events = [
            at(EventKind::In, b, 0, 10), at(EventKind::Out, b, 0, 20),
            at(EventKind::Send, a, b, 100), at(EventKind::In, b, 0, 1_100),
            at(EventKind::Spawn, a, b + 0x10_000, 2_000), at(EventKind::Exit, b + 0x10_000, 0, 5_000),
        ];
        let steps: Vec<Step> = events.iter().map(|e| Step::Event(*e, 0, EventCopies::default())).collect();
        let parts = sharded(&steps, count);
        let merged = merged_of(&parts);
        assert_eq!(merged.activity.messages.wakeup.len(), 1, "the receiver's owner saw the send");
        assert!(merged.activity.messages.wakeup.equivalent(merged.activity.messages.wakeup.max(), 1_000));
        assert_eq!(merged.activity.procs.lifetime.len(), 1, "the child's owner saw the spawn");
        assert_eq!(view(&merged), view(&single(&steps)));
    }

    proptest! {
        /// Any stream, split over 2 to 4 aggregators as the router splits it, then merged,
        /// reads as the one aggregator fed the whole stream reads: every figure exactly.
        #[test]
        #[cfg_attr(miri, ignore = "256 streams of up to 400 events, 4 ways: minutes under Miri; no unsafe code")]
        fn sharded_then_merged_reads_as_one(ops in prop::collection::vec(any::<(u8, u8, u8, u16, u16)>(), 0..400),
                                            other in prop::collection::vec(any::<(u8, u8, u8, u16, u16)>(), 0..400)) {
            let steps = stream(&ops);
            let one = single(&steps);
            let expected = view(&one);
            for count in 2..=4 {
                let parts = sharded(&steps, count);
                let merged = merged_of(&parts);
                prop_assert_eq!(&view(&merged), &expected, "{} shards", count);
                // Made again in an earlier merge's histograms: of the same figures (as large),
                // or of another stream (larger, smaller, other functions), it reads the same.
                let refs: Vec<&Aggregator> = parts.iter().collect();
                let again = Aggregator::merged_reusing(&refs, Some(merged));
                prop_assert_eq!(&view(&again), &expected, "{} shards, made in the same merge", count);
                let elsewhere = merged_of(&sharded(&stream(&other), count));
                let again = Aggregator::merged_reusing(&refs, Some(elsewhere));
                prop_assert_eq!(&view(&again), &expected, "{} shards, made in another stream's merge", count);
                // Ownership: per-pid state is in exactly one part.
                let held: usize = parts.iter().map(|p| p.processes.len()).sum();
                prop_assert_eq!(held, one.processes.len());
            }
        }
    }
}
