//! The aggregator's tests: pairing, loops, bounds, intervals, and the copies that ride with
//! calls (the parts have theirs beside their code).

use super::pairing::{EMPTY_STACK_SLACK, LOOP_CHECK_EVERY};
use super::slowest::SlowestConfig;
use super::*;
use crate::term_format::TermCopy;
use hdrhistogram::Histogram;
use proptest::prelude::*;
use std::collections::HashMap;
use std::sync::Arc;

const F: Mfa = Mfa { module: 1, function: 2, arity: 1 };
const G: Mfa = Mfa { module: 1, function: 3, arity: 0 };
const H: Mfa = Mfa { module: 2, function: 2, arity: 1 };

/// An event of `kind` of `mfa` in `pid` at `ts`.
pub(super) fn ev(kind: EventKind, pid: u64, mfa: Mfa, ts: u64) -> Event {
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
    let h = f.latency.to_hdr();
    assert!(h.equivalent(h.max(), 1000));
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
fn excluded_modules_are_foreign_whatever_the_filter() {
    // F and G are in module 1, H in module 2 (see the constants above).
    let mut agg = Aggregator::new(100, 1000);
    agg.exclude_modules(vec![1]);
    for (mfa, ts) in [(F, 0), (H, 10)] {
        agg.record(&ev(EventKind::Call, 1, mfa, ts));
    }
    agg.record(&ev(EventKind::Return, 1, H, 20));
    agg.record(&ev(EventKind::Return, 1, F, 30));
    assert_eq!(agg.functions().map(|(mfa, _)| *mfa).collect::<Vec<_>>(), vec![H]);
    assert_eq!(agg.counters().foreign_events, 2);
    // A filter set after keeps them out.
    agg.set_filter(vec![pattern(None, None, None)]);
    agg.record(&ev(EventKind::Call, 1, G, 40));
    agg.record(&ev(EventKind::Return, 1, G, 50));
    assert!(agg.function(&G).is_none());
    assert_eq!(agg.counters().foreign_events, 4);
    assert_eq!(agg.open_calls(), 0);
}

#[test]
fn a_function_removed_from_the_filter_keeps_its_figures_and_counts_no_more() {
    let mut agg = Aggregator::new(100, 1000);
    agg.set_filter(vec![pattern(Some(1), None, None)]);
    agg.record(&ev(EventKind::Call, 1, F, 0));
    agg.record(&ev(EventKind::Return, 1, F, 10));
    // A call open when F is removed still pairs; later calls are foreign.
    agg.record(&ev(EventKind::Call, 1, F, 20));
    agg.set_filter(vec![pattern(Some(1), Some(3), None)]);
    agg.record(&ev(EventKind::Return, 1, F, 30));
    agg.record(&ev(EventKind::Call, 1, F, 40));
    agg.record(&ev(EventKind::Return, 1, F, 50));
    let f = agg.function(&F).unwrap();
    assert_eq!((f.calls, f.returns, f.latency.len()), (2, 2, 2));
    assert_eq!(agg.counters().foreign_events, 2);
    assert_eq!(agg.counters().unmatched_returns, 0);
    assert_eq!(agg.open_calls(), 0);
    // Added again: counted again.
    agg.set_filter(vec![pattern(Some(1), None, None)]);
    agg.record(&ev(EventKind::Call, 1, F, 60));
    agg.record(&ev(EventKind::Return, 1, F, 70));
    assert_eq!(agg.function(&F).unwrap().calls, 3);
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
    let mut values: Vec<u64> = f.latency.to_hdr().iter_recorded().map(|v| v.value_iterated_to()).collect();
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
    assert_eq!(agg.function(&F).unwrap().latency.to_hdr().max(), 90);
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
fn open_pids_name_the_processes_with_calls_open_until_they_exit() {
    // What `Session::settle_exits` asks: processes whose stacks are empty are not named.
    let mut agg = Aggregator::new(100, 1000);
    agg.record(&ev(EventKind::Call, 1, F, 0));
    agg.record(&ev(EventKind::Call, 2, F, 1));
    agg.record(&ev(EventKind::Call, 3, F, 2));
    agg.record(&ev(EventKind::Return, 3, F, 3));
    let mut pids = Vec::new();
    agg.open_pids(&mut pids);
    pids.sort_unstable();
    assert_eq!(pids, vec![1, 2]);
    agg.record_routed(&ev(EventKind::Exit, 1, crate::event::NO_MFA, 4), 0, EventCopies::default());
    pids.clear();
    agg.open_pids(&mut pids);
    assert_eq!(pids, vec![2]);
    assert_eq!(agg.counters().abandoned_calls, 1);
}

#[test]
fn an_untraced_process_has_its_open_calls_forgotten_and_is_kept_to_trace_again() {
    let mut agg = Aggregator::new(100, 1000);
    agg.record(&ev(EventKind::Call, 1, F, 0));
    agg.record(&ev(EventKind::Call, 1, G, 1));
    agg.record(&ev(EventKind::Call, 2, F, 2));
    agg.record(&ev(EventKind::Untraced, 1, crate::event::NO_MFA, 5));
    assert_eq!(agg.open_calls(), 1, "the other process's call stays open");
    assert_eq!(agg.counters().abandoned_calls, 2);
    // Not an exit: the process figures count no exit for it.
    assert_eq!(agg.activity.procs.exited, 0);
    assert_eq!(agg.take_untraced(), vec![1]);
    assert!(agg.take_untraced().is_empty(), "each given once");
    // Past the bound, the rest are left untraced (not kept).
    for pid in 0..(MAX_UNTRACED as u64 + 10) {
        agg.record(&ev(EventKind::Untraced, pid, crate::event::NO_MFA, 6));
    }
    assert_eq!(agg.take_untraced().len(), MAX_UNTRACED);
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
    let max = agg.function(&F).unwrap().latency.to_hdr().max();
    assert!((MAX_LATENCY_NS..=MAX_LATENCY_NS + MAX_LATENCY_NS / 128).contains(&max));
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
            let h = f.latency.to_hdr();
            assert!(h.equivalent(h.max(), 100 * n));
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

fn copy(byte: u8) -> Option<TermCopy> {
    Some(Arc::from(vec![byte]))
}

#[test]
fn the_kept_calls_carry_their_arguments_and_results() {
    let config = SlowestConfig { keep: 1, threshold_ns: None, max_slow_calls: 1 };
    let mut agg = Aggregator::new(10, 100).with_slowest(config).with_recent(2);
    let ev = |kind, pid, ts| Event { ts, pid, mfa: F, kind };
    // pid 1: 10 ns; pid 2: 50 ns, raising; pid 3: 20 ns.
    agg.record_with(&ev(EventKind::Call, 1, 0), copy(1));
    agg.record_with(&ev(EventKind::Call, 2, 1), copy(2));
    agg.record_with(&ev(EventKind::Return, 1, 10), copy(11));
    agg.record_with(&ev(EventKind::Call, 3, 20), copy(3));
    agg.record_with(&ev(EventKind::Return, 3, 40), copy(13));
    agg.record_with(&ev(EventKind::Exception, 2, 51), copy(12));
    let slowest = agg.function(&F).unwrap().slow.slowest();
    assert_eq!(slowest.len(), 1);
    assert_eq!((slowest[0].pid, slowest[0].exception), (2, true));
    assert_eq!((slowest[0].args.clone(), slowest[0].result.clone()), (copy(2), copy(12)));
    let recorded: Vec<_> = agg.recorder().unwrap().events().map(|e| e.copy.clone()).collect();
    assert_eq!(recorded, vec![copy(13), copy(12)]);
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
            prop_assert!(expected.equivalent(f.latency.to_hdr().value_at_quantile(q), expected.value_at_quantile(q)));
        }
    }
}
