//! Routing a split session's events to their shards: every pid belongs to one shard by a
//! hash ([`super::shard_of`]), and an aggregator made
//! [`with_shard`](crate::aggregate::Aggregator::with_shard) keeps the state and figures of
//! its own processes only. [`Aggregator::merged`](crate::aggregate::Aggregator::merged) then
//! answers for all.
//!
//! An event belongs to its tracee's owner. A few also move a *second* process on
//! ([`other_pid`]): a `send` starts the receiver's wait to be scheduled in (its wakeup), a
//! `spawn` gives the child its birth time. Those go to the second pid's owner too, which does
//! only that part. And one fact is session-wide: once any process was scheduled in or out,
//! every call takes a latency-split snapshot (`ProcessTable::splits`); the first scheduling
//! event goes to every aggregator so that each learns it at the same point of the stream.
//! [`Router`] says where each event goes;
//! [`Aggregator::record_routed`](crate::aggregate::Aggregator::record_routed) takes it in.

use super::shard_of;
use crate::event::{Event, EventKind};

/// The second process `event` moves on besides its tracee, if any: the receiver of a `send`
/// (or of a send to a process that does not exist), the child of a `spawn`. `None` when the
/// event names no local pid (a send to a name, a port or a remote pid).
#[inline]
pub fn other_pid(event: &Event) -> Option<u64> {
    match event.kind {
        EventKind::Send | EventKind::SendDead | EventKind::Spawn if event.mfa.module != 0 => Some(event.mfa.module),
        _ => None,
    }
}

/// The aggregators one event goes to (see [`Router::targets`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Targets {
    /// Only its tracee's owner.
    One(u32),
    /// The tracee's owner, then the second pid's (a different one).
    Two(u32, u32),
    /// Every aggregator (the session's first scheduling event).
    All,
}

impl Targets {
    /// The aggregators' indices, of `count`.
    pub fn iter(self, count: u32) -> impl Iterator<Item = u32> {
        let (range, pair) = match self {
            Targets::One(a) => (0..0, [Some(a), None]),
            Targets::Two(a, b) => (0..0, [Some(a), Some(b)]),
            Targets::All => (0..count, [None, None]),
        };
        range.chain(pair.into_iter().flatten())
    }
}

/// Routes the ordered stream of one session to `count` aggregators, the `i`-th made
/// `with_shard(i, count)`: each must take the events [`Router::targets`] names for it with
/// `Aggregator::record_routed`, in the order the router saw them. Events that come with
/// copies (`args`, `key`: calls, returns, exceptions) only ever go to one aggregator.
#[derive(Clone, Debug)]
pub struct Router {
    count: u32,
    /// A scheduling event was already sent to every aggregator.
    scheduling_seen: bool,
}

impl Router {
    /// A router over `count` (at least 1) aggregators.
    pub fn new(count: u32) -> Self {
        Router { count: count.max(1), scheduling_seen: false }
    }

    /// The aggregators sharing the session.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Where `event` goes: its tracee's owner; also [`other_pid`]'s owner if another; every
    /// aggregator for the first `in`/`out` event of the session (then never again).
    #[inline]
    pub fn targets(&mut self, event: &Event) -> Targets {
        if self.count == 1 {
            return Targets::One(0);
        }
        if !self.scheduling_seen && matches!(event.kind, EventKind::In | EventKind::Out | EventKind::OutExited) {
            self.scheduling_seen = true;
            return Targets::All;
        }
        let owner = shard_of(event.pid, self.count);
        match other_pid(event).map(|pid| shard_of(pid, self.count)) {
            Some(other) if other != owner => Targets::Two(owner, other),
            _ => Targets::One(owner),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Mfa;

    fn ev(kind: EventKind, pid: u64, module: u64) -> Event {
        Event { ts: 0, pid, mfa: Mfa { module, function: 0, arity: 0 }, kind }
    }

    #[test]
    fn second_pids_of_sends_and_spawns() {
        assert_eq!(other_pid(&ev(EventKind::Send, 3, 19)), Some(19));
        assert_eq!(other_pid(&ev(EventKind::SendDead, 3, 19)), Some(19));
        assert_eq!(other_pid(&ev(EventKind::Spawn, 3, 35)), Some(35));
        assert_eq!(other_pid(&ev(EventKind::Send, 3, 0)), None, "a name or a port");
        for kind in [EventKind::Call, EventKind::Receive, EventKind::Spawned, EventKind::ProcOther, EventKind::Exit, EventKind::In] {
            assert_eq!(other_pid(&ev(kind, 3, 19)), None, "{kind:?}");
        }
    }

    #[test]
    fn the_router_sends_the_first_scheduling_event_everywhere() {
        let mut router = Router::new(4);
        // Find a send between two pids of different owners.
        let (a, b) = (0..1000u64)
            .map(|i| (i << 4 | 3, (i + 1) << 4 | 3))
            .find(|(a, b)| shard_of(*a, 4) != shard_of(*b, 4))
            .unwrap();
        assert_eq!(router.targets(&ev(EventKind::Send, a, b)), Targets::Two(shard_of(a, 4), shard_of(b, 4)));
        assert_eq!(router.targets(&ev(EventKind::Send, a, a)), Targets::One(shard_of(a, 4)));
        assert_eq!(router.targets(&ev(EventKind::Out, a, 0)), Targets::All);
        assert_eq!(router.targets(&ev(EventKind::In, a, 0)), Targets::One(shard_of(a, 4)));
        assert_eq!(Targets::All.iter(3).collect::<Vec<_>>(), vec![0, 1, 2]);
        assert_eq!(Targets::Two(2, 0).iter(3).collect::<Vec<_>>(), vec![2, 0]);
        assert_eq!(Router::new(1).targets(&ev(EventKind::Out, a, 0)), Targets::One(0));
    }
}
