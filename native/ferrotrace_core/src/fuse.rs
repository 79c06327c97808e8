//! The overhead budget's fuse: what holds a budget within the window, on the scheduler,
//! before any tick of the controller could see the load.
//!
//! A budgeted session (`max_overhead => F`) is otherwise steered by ticks a few times a
//! second (`ferrotrace_budget`): the per-call rate and the functions shed. Load that arrives
//! between two ticks (processes born per request, a batch job, a burst) ran at 2 to 10 % of
//! its untraced speed for most of a second before they reacted. The fuse reacts at once, in
//! `enabled_call`, where a call can still be refused before the VM builds its event or
//! pushes its return frame.
//!
//! # A token bucket per scheduler thread
//! Each (thread, session) pair has a bucket of *cost*, in clock ticks of the thread's time:
//! it fills at the session's share of the thread's time (`F` of it, at most [`Fuse::depth`]
//! ahead) and every call that reaches `enabled_call` empties it by what the call costs the
//! node: a traced call its pair of events (`traced`), a refused one the VM's asking
//! (`refused`): the costs the controller's model uses, scaled by what it learned on the node.
//! The bucket's level says what to do with the call:
//! - above 0: as the session would (traced, or refused by its sampling);
//! - from `-depth` to 0: refused (`discard`, [`Verdict::Refuse`]): the thread spent its
//!   share; only the VM's cost of asking is paid, and charged;
//! - at `-depth` or under: the process is untraced (`remove`, [`Verdict::Untrace`]): even
//!   refused, its calls cost more than the share (cheap functions called in a tight loop cost
//!   more to ask about than to run). A removed process costs nothing more: the VM no longer
//!   asks about its calls. The budget's ticks shed the functions that made it hot and trace
//!   the process again (`ferrotrace_overhead`).
//!
//! So over any window of `w` the thread spends at most `F x w + 2 x depth` on the session's
//! calls (a full bucket at the start, a deficit down to `-depth` at the end), plus
//! [`TRICKLE_CALLS`] traced calls each [`TRICKLE_MS`] in deficit (so that the budget sees
//! which functions made it), whatever the load does; the depth is [`DEPTH_MS`] of the share.
//!
//! # The hot path stays the hot path
//! The bucket is a thread-local (written by its thread only); the session's parameters are
//! static words written a few times a second by the controller. A charge is a few
//! arithmetic operations; the clock is read only when the level is about to run out, or
//! every [`REFILL_EVERY`] charges (so that a bucket that was full for a while does not lend a
//! burst more than a few calls past its depth). A session without a budget reads one word.

use std::cell::Cell;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use crossbeam_utils::CachePadded;

use crate::clock;
use crate::slots::{slot_of, MAX_SESSIONS};

/// The bucket's depth, in ms of the share: the burst a thread may spend before the fuse
/// refuses, and the deficit it may run into before it untraces.
pub const DEPTH_MS: u64 = 10;

/// Charges between two reads of the clock while the level is well above zero.
pub const REFILL_EVERY: u32 = 16;

/// In deficit, every this many ms the next [`TRICKLE_CALLS`] calls a thread's sessions
/// would trace are traced anyway (the trickle): with none, the budget's ticks count no
/// function of the load that spent the share, and shed none. Processes born per request
/// were untraced at their first calls, 60 k a second, for a whole session, while nothing
/// was counted.
pub const TRICKLE_MS: u64 = 2;

/// The calls of a trickle: a run of them, mostly of one process (the one running), shows
/// the functions its work calls, where one call a time showed only the first each process
/// makes, and the budget shed them a few a tick, in the order they are called (450 ms for
/// 41 functions). At the model's 700 ns a traced call, 16 every 2 ms are 0.56 % of a thread.
pub const TRICKLE_CALLS: u32 = 16;

/// The refill rate's fixed point: cost ticks per wall tick, times 2^32.
const ONE: u64 = 1 << 32;

/// A session's fuse: its parameters, in a static table beside the slot table, so that
/// `enabled_call` reaches them from the session id alone.
pub struct Fuse {
    /// The session whose parameters these are; 0 when none (the fuse is off).
    id: AtomicU64,
    /// The share of a thread's time the session may spend, as cost ticks per wall tick,
    /// times 2^32.
    refill: AtomicU64,
    /// Ticks: the level's bound above, and the deficit that untraces below.
    depth: AtomicI64,
    /// Ticks a traced call costs (its call and return events).
    traced: AtomicI64,
    /// Ticks a refused call costs (the VM asks `enabled`).
    refused: AtomicI64,
    /// Ticks between two calls of the trickle ([`TRICKLE_MS`]).
    trickle: AtomicU64,
}

static FUSES: [CachePadded<Fuse>; MAX_SESSIONS] = [const {
    CachePadded::new(Fuse {
        id: AtomicU64::new(0),
        refill: AtomicU64::new(0),
        depth: AtomicI64::new(0),
        traced: AtomicI64::new(0),
        refused: AtomicI64::new(0),
        trickle: AtomicU64::new(0),
    })
}; MAX_SESSIONS];

/// Processes the fuse of each slot's session untraced, for a poll that reads no session
/// memory (the budget's process ticks at once when it rises). Written once per untraced
/// process, on lines apart from the parameters every call reads.
static UNTRACED: [CachePadded<AtomicU64>; MAX_SESSIONS] = [const { CachePadded::new(AtomicU64::new(0)) }; MAX_SESSIONS];

/// What the fuse says of one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// As the session would decide it.
    Pass,
    /// Refuse the call (`discard`): the thread spent its share.
    Refuse,
    /// Untrace the process (`remove`): refusing its calls costs more than the share.
    Untrace,
}

/// The fuse's parameters, as the controller gives them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Params {
    /// The share of each scheduler thread's time the session may spend (above 0, at most 1).
    pub share: f64,
    /// Nanoseconds a traced call costs the node (call and return).
    pub traced_ns: f64,
    /// Nanoseconds a refused call costs the node.
    pub refused_ns: f64,
}

impl Params {
    /// True if the parameters can arm a fuse: a share in (0, 1], costs positive and finite
    /// (at most a second).
    pub fn valid(&self) -> bool {
        let cost = |ns: f64| ns.is_finite() && ns > 0.0 && ns <= 1e9;
        self.share.is_finite() && self.share > 0.0 && self.share <= 1.0 && cost(self.traced_ns) && cost(self.refused_ns)
    }
}

/// Arms (or updates) the fuse of session `id` with `params`: from the next call on, its
/// calls are charged. False, and nothing changed, for parameters that are not
/// [`Params::valid`].
pub fn arm(id: u64, params: Params) -> bool {
    if !params.valid() {
        return false;
    }
    let fuse = &FUSES[slot_of(id)];
    let depth_ns = params.share * (DEPTH_MS * 1_000_000) as f64;
    let ticks = |ns: f64| (clock::ns_to_ticks(ns.round() as u64) as i64).max(1);
    // Each word on its own: a call that reads some old and some new values meanwhile is
    // charged a mix of two valid settings.
    fuse.refill.store((params.share * ONE as f64) as u64, Ordering::Relaxed);
    fuse.depth.store(ticks(depth_ns), Ordering::Relaxed);
    fuse.traced.store(ticks(params.traced_ns), Ordering::Relaxed);
    fuse.refused.store(ticks(params.refused_ns), Ordering::Relaxed);
    fuse.trickle.store(clock::ns_to_ticks(TRICKLE_MS * 1_000_000), Ordering::Relaxed);
    // A session's first arming starts its count of processes untraced.
    if fuse.id.load(Ordering::Acquire) != id {
        UNTRACED[slot_of(id)].store(0, Ordering::Relaxed);
    }
    // Release: a call that sees the id sees parameters of this session.
    fuse.id.store(id, Ordering::Release);
    true
}

/// Counts a process untraced by session `id`'s fuse (see [`untraced`]).
pub fn count_untraced(id: u64) {
    UNTRACED[slot_of(id)].fetch_add(1, Ordering::Relaxed);
}

/// Processes untraced by the fuse of the session in `id`'s slot since the slot was armed for
/// it, if it is armed for `id`; `None` otherwise.
pub fn untraced(id: u64) -> Option<u64> {
    armed(id).then(|| UNTRACED[slot_of(id)].load(Ordering::Relaxed))
}

/// Turns session `id`'s fuse off (if it is still the slot's).
pub fn disarm(id: u64) {
    let _ = FUSES[slot_of(id)].id.compare_exchange(id, 0, Ordering::AcqRel, Ordering::Relaxed);
}

/// Whether session `id`'s fuse is armed.
pub fn armed(id: u64) -> bool {
    FUSES[slot_of(id)].id.load(Ordering::Acquire) == id
}

/// One thread's bucket for one session slot.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    /// The session it belongs to: another id in the slot starts a full bucket.
    id: u64,
    /// Cost ticks left; negative: the deficit.
    level: i64,
    /// When it was last filled.
    last: u64,
    /// Charges since then.
    charges: u32,
}

/// One thread's trickle for one session slot, beside its bucket: read only in deficit (the
/// bucket, copied in and out at every call, took 2 instructions more with it inside).
#[derive(Clone, Copy, Debug, Default)]
struct Trickle {
    /// The session it counts for: another id in the slot starts it afresh.
    id: u64,
    /// When its run last began.
    began: u64,
    /// Calls the run may still trace.
    left: u32,
}

impl Trickle {
    /// Whether the trickle of session `id` traces a call at `now`: a run of
    /// [`TRICKLE_CALLS`] begins `every` ticks after the last one began (the first, `every`
    /// after the session's first call here in deficit).
    fn take(&mut self, id: u64, now: u64, every: u64) -> bool {
        if self.id != id {
            *self = Trickle { id, began: now, left: 0 };
        }
        if now.saturating_sub(self.began) >= every {
            self.began = now;
            self.left = TRICKLE_CALLS;
        }
        if self.left == 0 {
            return false;
        }
        self.left -= 1;
        true
    }
}

thread_local! {
    /// This thread's buckets, one per session slot. Written by this thread only, on lines of
    /// their own.
    static BUCKETS: CachePadded<[Cell<Bucket>; MAX_SESSIONS]> =
        const { CachePadded::new([const { Cell::new(Bucket { id: 0, level: 0, last: 0, charges: 0 }) }; MAX_SESSIONS]) };
    /// This thread's trickles, one per session slot (see [`Trickle`]).
    static TRICKLES: [Cell<Trickle>; MAX_SESSIONS] = const { [const { Cell::new(Trickle { id: 0, began: 0, left: 0 }) }; MAX_SESSIONS] };
}

/// Charges a call of session `id` that reached `enabled_call` to this thread's bucket:
/// `traced` if the session would trace it, else it refuses it anyway (sampling, the frame
/// bound). See the module docs for the verdict. `Pass` when the fuse is off.
#[inline]
pub fn charge(id: u64, traced: bool) -> Verdict {
    let fuse = &FUSES[slot_of(id)];
    if fuse.id.load(Ordering::Acquire) != id {
        return Verdict::Pass;
    }
    BUCKETS.try_with(|buckets| {
        let cell = &buckets[slot_of(id)];
        let mut bucket = cell.get();
        let trickle = |now, every| {
            TRICKLES
                .try_with(|trickles| {
                    let cell = &trickles[slot_of(id)];
                    let mut trickle = cell.get();
                    let taken = trickle.take(id, now, every);
                    cell.set(trickle);
                    taken
                })
                .unwrap_or(false)
        };
        let verdict = settle(&mut bucket, id, fuse, traced, clock::now, trickle);
        cell.set(bucket);
        verdict
    })
    // The thread-local is gone (a thread exiting): as the session would.
    .unwrap_or(Verdict::Pass)
}

/// The bucket's part of [`charge`], on a bucket and a clock given: fills it if it is
/// running out (or every [`REFILL_EVERY`] charges), then charges the call and says what to
/// do with it. In deficit, calls the session would trace pass, uncharged, while the
/// thread's trickle has a run (`trickle(now, every)`, [`Trickle::take`] on the thread's,
/// with the fuse's interval).
#[inline]
fn settle(
    bucket: &mut Bucket,
    id: u64,
    fuse: &Fuse,
    traced: bool,
    now: impl Fn() -> u64,
    trickle: impl FnOnce(u64, u64) -> bool,
) -> Verdict {
    let depth = fuse.depth.load(Ordering::Relaxed);
    let cost = if traced { fuse.traced.load(Ordering::Relaxed) } else { fuse.refused.load(Ordering::Relaxed) };
    if bucket.id != id {
        *bucket = Bucket { id, level: depth, last: now(), charges: 0 };
    }
    bucket.charges += 1;
    if bucket.level <= cost || bucket.charges >= REFILL_EVERY {
        let t = now();
        let elapsed = t.saturating_sub(bucket.last);
        let refill = fuse.refill.load(Ordering::Relaxed);
        let gained = ((u128::from(elapsed) * u128::from(refill)) >> 32).min(i64::MAX as u128) as i64;
        bucket.level = bucket.level.saturating_add(gained).min(depth);
        bucket.last = t;
        bucket.charges = 0;
    }
    if bucket.level > 0 {
        bucket.level -= cost;
        Verdict::Pass
    } else if traced && trickle(bucket.last, fuse.trickle.load(Ordering::Relaxed)) {
        // (In deficit the level is under any cost: the bucket was filled just now, at
        // `last`.) Not charged: the trickle is its own allowance, and charged, each run
        // took a deficit past its depth at once, untracing the process that was running.
        Verdict::Pass
    } else if bucket.level > -depth {
        bucket.level -= fuse.refused.load(Ordering::Relaxed);
        if traced { Verdict::Refuse } else { Verdict::Pass }
    } else {
        // An untraced process is asked about no more: nothing to charge.
        Verdict::Untrace
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fuse with costs and depth in ticks as given, refilling `share` of the time.
    fn fuse(share: f64, depth: i64, traced: i64, refused: i64) -> Fuse {
        Fuse {
            id: AtomicU64::new(7),
            refill: AtomicU64::new((share * ONE as f64) as u64),
            depth: AtomicI64::new(depth),
            traced: AtomicI64::new(traced),
            refused: AtomicI64::new(refused),
            trickle: AtomicU64::new(1000),
        }
    }

    fn fresh() -> Bucket {
        Bucket { id: 0, level: 0, last: 0, charges: 0 }
    }

    /// No trickle: the tests of the bucket alone.
    fn none(_now: u64, _every: u64) -> bool {
        false
    }

    #[test]
    fn a_full_bucket_passes_calls_until_its_depth_is_spent() {
        let f = fuse(0.05, 1000, 100, 30);
        let mut b = fresh();
        // No time passes: ten traced calls spend the depth.
        let verdicts: Vec<Verdict> = (0..12).map(|_| settle(&mut b, 7, &f, true, || 0, none)).collect();
        assert!(verdicts[..10].iter().all(|v| *v == Verdict::Pass), "{verdicts:?}");
        assert_eq!(verdicts[10], Verdict::Refuse);
    }

    #[test]
    fn refusals_are_charged_until_the_deficit_untraces() {
        let f = fuse(0.05, 1000, 100, 30);
        let mut b = fresh();
        let mut verdicts = Vec::new();
        for _ in 0..200 {
            verdicts.push(settle(&mut b, 7, &f, true, || 0, none));
        }
        let refused = verdicts.iter().filter(|v| **v == Verdict::Refuse).count();
        // From 0 down to -1000 by 30 a refusal: 34 of them, then every call untraces.
        assert_eq!(refused, 34, "{verdicts:?}");
        assert!(verdicts[44..].iter().all(|v| *v == Verdict::Untrace));
        // Calls the session refuses anyway are never reported refused by the fuse.
        let mut b = fresh();
        let quiet: Vec<Verdict> = (0..80).map(|_| settle(&mut b, 7, &f, false, || 0, none)).collect();
        assert!(quiet.iter().all(|v| *v != Verdict::Refuse));
        assert_eq!(quiet.last(), Some(&Verdict::Untrace));
    }

    #[test]
    fn the_bucket_fills_at_the_share_up_to_its_depth() {
        let f = fuse(0.25, 1000, 100, 30);
        let mut b = fresh();
        let mut now = 0u64;
        for _ in 0..10 {
            settle(&mut b, 7, &f, true, || now, none);
        }
        assert!(b.level <= 0);
        // 400 ticks at a quarter: 100 ticks of cost, one traced call.
        now = 400;
        assert_eq!(settle(&mut b, 7, &f, true, || now, none), Verdict::Pass);
        assert_eq!(settle(&mut b, 7, &f, true, || now, none), Verdict::Refuse);
        // A long wait fills it to its depth, not past it.
        now = 1_000_000_000;
        settle(&mut b, 7, &f, false, || now, none);
        assert!(b.level <= 1000 && b.level >= 1000 - 30, "{}", b.level);
    }

    /// Deep in deficit, every call untraces its process, but a trickle's time after the
    /// last run began (the first: after the first call in deficit), the next TRICKLE_CALLS
    /// calls the session would trace pass, uncharged, and no more.
    #[test]
    fn the_trickle_traces_a_run_of_calls_now_and_then_in_deficit() {
        let f = fuse(0.05, 1000, 100, 30);
        let mut b = fresh();
        let mut t = Trickle::default();
        let mut now = 1u64;
        let mut call = |b: &mut Bucket, traced: bool, now: u64| settle(b, 7, &f, traced, || now, |at, every| t.take(7, at, every));
        while call(&mut b, true, now) != Verdict::Untrace {}
        // No time: no refill, no trickle.
        assert_eq!(call(&mut b, true, now), Verdict::Untrace);
        // A trickle's time later (the share refills 50 ticks of cost: still deep).
        now += 1000;
        let run: Vec<Verdict> = (0..TRICKLE_CALLS).map(|_| call(&mut b, true, now)).collect();
        assert!(run.iter().all(|v| *v == Verdict::Pass), "{run:?}");
        let level = b.level;
        assert_ne!(call(&mut b, true, now), Verdict::Pass);
        // The run charged nothing (the call after it, refused, its refusal at most).
        assert!(b.level >= level - 30, "{} then {}", level, b.level);
        // A call the session refuses anyway does not use the next run: all of it is left.
        now += 1000;
        let _ = call(&mut b, false, now);
        let run: Vec<Verdict> = (0..TRICKLE_CALLS).map(|_| call(&mut b, true, now)).collect();
        assert!(run.iter().all(|v| *v == Verdict::Pass), "{run:?}");
        assert_ne!(call(&mut b, true, now), Verdict::Pass);
    }

    #[test]
    fn a_new_session_in_the_slot_starts_full() {
        let f = fuse(0.05, 1000, 100, 30);
        let mut b = fresh();
        for _ in 0..100 {
            settle(&mut b, 7, &f, true, || 0, none);
        }
        assert_eq!(settle(&mut b, 7, &f, true, || 0, none), Verdict::Untrace);
        f.id.store(71, Ordering::Relaxed);
        assert_eq!(settle(&mut b, 71, &f, true, || 0, none), Verdict::Pass);
    }

    /// Over any window, a thread spends at most the share of it plus twice the depth,
    /// whatever the calls: a steady storm, bursts, idle stretches.
    #[test]
    #[cfg_attr(miri, ignore = "millions of calls: too slow under Miri (the bucket's unit cases cover the path)")]
    fn spending_stays_within_the_share_and_twice_the_depth() {
        let (share, depth) = (0.05, 50_000i64);
        let f = fuse(share, depth, 700, 250);
        for (gap, burst, pause) in [(10u64, 1_000_000u64, 0u64), (3, 20_000, 2_000_000), (50, 5_000, 100_000)] {
            let mut b = fresh();
            let mut now = 0u64;
            let mut spent: Vec<(u64, i64)> = Vec::new();
            let mut total = 0i64;
            let mut i = 0;
            while now < 20_000_000 {
                let v = settle(&mut b, 7, &f, true, || now, none);
                // What this call cost: its charge (none once untraced).
                total += match v {
                    Verdict::Pass => 700,
                    Verdict::Refuse => 250,
                    Verdict::Untrace => 0,
                };
                spent.push((now, total));
                i += 1;
                now += gap;
                if pause > 0 && i % burst == 0 {
                    now += pause;
                }
            }
            // Every window of 1,000,000 ticks.
            let window = 1_000_000u64;
            let mut j = 0;
            for k in 0..spent.len() {
                while spent[j].0 + window < spent[k].0 {
                    j += 1;
                }
                let cost = spent[k].1 - spent[j].1;
                // The cap is applied at refills: a burst after a long wait gets up to
                // REFILL_EVERY calls past it.
                let bound = (share * window as f64) as i64 + 2 * depth + i64::from(REFILL_EVERY) * 700;
                assert!(cost <= bound, "gap {gap}: {cost} spent in a window, bound {bound}");
            }
        }
    }

    #[test]
    fn params_are_checked() {
        let ok = Params { share: 0.05, traced_ns: 700.0, refused_ns: 200.0 };
        assert!(ok.valid());
        for bad in [
            Params { share: 0.0, ..ok },
            Params { share: 1.5, ..ok },
            Params { share: f64::NAN, ..ok },
            Params { traced_ns: 0.0, ..ok },
            Params { refused_ns: f64::INFINITY, ..ok },
            Params { refused_ns: -1.0, ..ok },
        ] {
            assert!(!bad.valid(), "{bad:?}");
        }
    }

    #[test]
    fn arming_and_disarming_a_slot() {
        let id = (1 << 20) << 6 | 63;
        assert!(!armed(id));
        assert!(!arm(id, Params { share: 2.0, traced_ns: 1.0, refused_ns: 1.0 }));
        assert!(arm(id, Params { share: 0.05, traced_ns: 700.0, refused_ns: 200.0 }));
        assert!(armed(id));
        // A fresh bucket passes the first call; another session of the slot is not charged.
        assert_eq!(charge(id, true), Verdict::Pass);
        assert!(!armed(id + 64));
        assert_eq!(charge(id + 64, true), Verdict::Pass);
        disarm(id + 64);
        assert!(armed(id), "only the slot's own id disarms it");
        disarm(id);
        assert!(!armed(id));
    }
}
