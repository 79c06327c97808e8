//! The collector thread's body: one per session, started by `session::start`. Every 1 to
//! 8 ms ([`next_interval`]) it drains, orders and folds in the events (`Session::collect`), checks
//! the session's stop conditions (a tripped limit, the duration, a failed aggregator thread),
//! hands the loops the aggregators found to the keeper and the calls the capture gate let
//! through to the capture process; when the session has stopped, it
//! notifies the keeper as its last act.

use std::sync::atomic::Ordering;

use crate::clock;
use super::{Session, StopReason};

use crate::collector::{next_interval, COLLECT_INTERVAL_MIN};

/// How often the collector looks for loops whose processes sit at the frame bound.
const STUCK_LOOPS_EVERY_NS: u64 = 50_000_000;

// The body is a method of `Session`, as the read path is (`session/read.rs`), and lives with
// it: it drives the session's lifecycle (its stop conditions and notices) on the collector's
// thread, so `session` uses `collector` and never the other way round.
impl Session {
    /// The collector thread: runs until the session stops, then notifies (`Notifier`). A
    /// panic in the loop (a bug) stops the session with `StopReason::Error` rather than leave
    /// it unwatched.
    pub(crate) fn run_collector(&self) {
        run(self)
    }
}

fn run(session: &Session) {
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| collect_until_stopped(session)));
    if run.is_err() {
        session.halt(StopReason::Error);
    }
    // Calls over the capture threshold folded in by the last drain, before the keeper hears of the stop.
    deliver_captures(session);
    session.collector_cpu_ns.store(clock::thread_cpu_ns(), Ordering::Relaxed);
    let notifier = session.notifier.lock().take();
    if let (Some(notify), Some(stopped)) = (notifier, session.stopped()) {
        // The notifier is the NIF layer's; a panic in it must not take the thread's
        // unwinding anywhere (this thread is ours, but stay quiet and finish).
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| notify(session.id, stopped)));
    }
}

fn collect_until_stopped(session: &Session) {
    let deadline = session.config.duration_ms
        .map(|ms| session.started_ticks.saturating_add(clock::ns_to_ticks(ms * 1_000_000)));
    let capacity = session.config.ring_size.next_power_of_two() as u64;
    let mut interval = COLLECT_INTERVAL_MIN;
    let mut stuck_checked_ns = 0u64;
    while !session.collector_exit.load(Ordering::Acquire) {
        std::thread::park_timeout(interval);
        if session.stopped().is_some() {
            break;
        }
        if session.gate.limit_tripped.load(Ordering::Acquire) {
            session.halt(StopReason::Limit);
            break;
        }
        if deadline.is_some_and(|d| clock::now() >= d) {
            session.halt(StopReason::Duration);
            break;
        }
        let mut consumer = session.consumer.lock();
        session.collect(&mut consumer, false);
        interval = next_interval(interval, consumer.last_fullest(), capacity);
        let now_ns = clock::to_ns(clock::now());
        if now_ns.saturating_sub(stuck_checked_ns) >= STUCK_LOOPS_EVERY_NS {
            stuck_checked_ns = now_ns;
            consumer.shards.find_stuck_loops(now_ns);
        }
        let loops = consumer.shards.take_new_loops();
        let failed = consumer.shards.failed();
        session.aggregators_cpu_ns.store(consumer.shards.threads_cpu_ns(), Ordering::Relaxed);
        drop(consumer);
        if failed {
            session.halt(StopReason::Error);
            break;
        }
        deliver_captures(session);
        if !loops.is_empty() {
            if let Some(notify) = session.loop_notifier.lock().as_mut() {
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| notify(session.id, loops)));
            }
        }
        session.collector_cpu_ns.store(clock::thread_cpu_ns(), Ordering::Relaxed);
    }
}

/// Hands the calls the capture gate let through (`capture`) to its notifier: on this
/// thread, which the VM does not manage, as a message send requires.
fn deliver_captures(session: &Session) {
    let gate = session.capture.lock().clone();
    if let Some(gate) = gate {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| gate.deliver()));
    }
}
