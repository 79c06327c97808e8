//! The fixed-size record a trace callback pushes into its ring.
//!
//! Terms are kept as raw `ERL_NIF_TERM` bits: atoms and local pids are immediates, valid in any
//! environment for as long as the VM runs, so no term is copied on the hot path.

/// What happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum EventKind {
    /// `trace(call, ...)`: a traced function was entered.
    Call,
    /// `trace(return_from, ...)`: it returned (needs `return_trace`).
    Return,
    /// `trace(exception_from, ...)`: it raised (needs `exception_trace`).
    Exception,
    /// `trace(exit, ...)` from `procs` tracing: the process is gone, forget its open calls.
    /// `mfa.module` holds the reason's atom bits (see [`crate::aggregate::procs`]), zero for others.
    Exit,
    /// `send`: `mfa.module` the receiver (local pid bits, else 0: a name, a port, a remote
    /// pid), `mfa.function` the size in words, `mfa.arity` 1 when the size is a lower bound.
    Send,
    /// `send_to_non_existing_process`: as `Send`.
    SendDead,
    /// `'receive'`: the tracee took a message in; size fields as `Send`.
    Receive,
    /// `'receive'` of `timeout`: a `receive ... after` timed out.
    ReceiveTimeout,
    /// `spawn`: the tracee created `mfa.module` (the child's pid bits).
    Spawn,
    /// `spawned`: the tracee was created (by `mfa.module`).
    Spawned,
    /// `link`, `unlink`, `getting_linked`, `getting_unlinked`, `register`, `unregister`:
    /// counted, `mfa.arity` says which ([`ProcTag`]).
    ProcOther,
    /// `gc_minor_start` (`mfa.arity` 0) or `gc_major_start` (1); `mfa.function` the words in
    /// use (heap, old heap, message buffers).
    GcStart,
    /// `gc_minor_end` / `gc_major_end`; as `GcStart`, words in use after.
    GcEnd,
    /// `in` / `in_exiting`: scheduled in at `mfa` (zero when the VM gives no location).
    In,
    /// `out` / `out_exiting`: scheduled out at `mfa`.
    Out,
    /// `out_exited`: scheduled out for the last time; the process is gone.
    OutExited,
    /// A port was opened (`open`).
    PortOpen,
    /// A port was closed (`closed`).
    PortClosed,
    /// A port was scheduled in (`running_ports`).
    PortIn,
    /// A port was scheduled out (`running_ports`, `out`, `out_exiting`, `out_exited`).
    PortOut,
    /// The overhead budget's fuse untraced the process (`crate::fuse`): forget its open calls
    /// (their returns will not come), as at an exit, but it lives on.
    Untraced,
}

/// A function as the VM names it: module and function atoms (raw term bits) and arity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Mfa {
    /// Module atom, raw term bits.
    pub module: u64,
    /// Function atom, raw term bits.
    pub function: u64,
    /// Arity (0 to 255).
    pub arity: u32,
}

/// The zero MFA: no location.
pub const NO_MFA: Mfa = Mfa { module: 0, function: 0, arity: 0 };

/// The `procs` tags counted but not aggregated further (a [`EventKind::ProcOther`]'s
/// `mfa.arity`), in [`crate::aggregate::procs::Procs::other`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum ProcTag {
    /// `link`.
    Link,
    /// `unlink`.
    Unlink,
    /// `getting_linked`.
    GettingLinked,
    /// `getting_unlinked`.
    GettingUnlinked,
    /// `register`.
    Register,
    /// `unregister`.
    Unregister,
}

/// One trace event, as the aggregator reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// Clock ticks from `clock::now` in rings; nanoseconds (`clock::to_ns`) once aggregated.
    pub ts: u64,
    /// The tracee (raw pid bits).
    pub pid: u64,
    /// The function the event is about (zero for `Exit`).
    pub mfa: Mfa,
    /// What happened.
    pub kind: EventKind,
}

/// An event as a ring stores it: 32 bytes, so two share a cache line. The ring is written on
/// the hot path; measured on the bench loop, a 48-byte event in a ring that outgrew the L2
/// cache cost the VM's next memory fence more than our whole callback.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PackedEvent {
    ts: u64,
    pid: u64,
    module: u64,
    /// Function atom bits (low 48), arity (8), kind (8).
    function_arity_kind: u64,
}

const FUNCTION_BITS: u32 = 48;

impl EventKind {
    fn from_u8(value: u8) -> EventKind {
        match value {
            0 => EventKind::Call,
            1 => EventKind::Return,
            2 => EventKind::Exception,
            4 => EventKind::Send,
            5 => EventKind::SendDead,
            6 => EventKind::Receive,
            7 => EventKind::ReceiveTimeout,
            8 => EventKind::Spawn,
            9 => EventKind::Spawned,
            10 => EventKind::ProcOther,
            11 => EventKind::GcStart,
            12 => EventKind::GcEnd,
            13 => EventKind::In,
            14 => EventKind::Out,
            15 => EventKind::OutExited,
            16 => EventKind::PortOpen,
            17 => EventKind::PortClosed,
            18 => EventKind::PortIn,
            19 => EventKind::PortOut,
            20 => EventKind::Untraced,
            _ => EventKind::Exit,
        }
    }
}

impl PackedEvent {
    /// Packs `event`; `None` if the function's atom bits or the arity do not fit (an atom
    /// index beyond 2^42, far past the VM's atom table limit).
    #[inline]
    pub fn pack(event: &Event) -> Option<PackedEvent> {
        let function = event.mfa.function;
        if function >> FUNCTION_BITS != 0 || event.mfa.arity > 255 {
            return None;
        }
        Some(PackedEvent {
            ts: event.ts,
            pid: event.pid,
            module: event.mfa.module,
            function_arity_kind: function | (event.mfa.arity as u64) << FUNCTION_BITS | (event.kind as u64) << 56,
        })
    }

    /// The timestamp, for sorting without unpacking.
    #[inline]
    pub fn ts(&self) -> u64 {
        self.ts
    }

    /// The event this was packed from.
    #[inline]
    pub fn unpack(&self) -> Event {
        let word = self.function_arity_kind;
        Event {
            ts: self.ts,
            pid: self.pid,
            mfa: Mfa {
                module: self.module,
                function: word & ((1 << FUNCTION_BITS) - 1),
                arity: ((word >> FUNCTION_BITS) & 0xff) as u32,
            },
            kind: EventKind::from_u8((word >> 56) as u8),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn packed_event_is_half_a_cache_line() {
        assert_eq!(std::mem::size_of::<PackedEvent>(), 32);
    }

    #[test]
    fn refuses_what_does_not_fit() {
        let mfa = Mfa { module: 1, function: 1 << 48, arity: 1 };
        assert_eq!(PackedEvent::pack(&Event { ts: 0, pid: 0, mfa, kind: EventKind::Call }), None);
    }

    proptest! {
        #[test]
        fn pack_unpack_round_trips(ts: u64, pid: u64, module: u64, function in 0u64..(1 << 48),
                                   arity in 0u32..256, kind in 0u8..21) {
            let event = Event { ts, pid, mfa: Mfa { module, function, arity }, kind: EventKind::from_u8(kind) };
            prop_assert_eq!(PackedEvent::pack(&event).unwrap().unpack(), event);
        }
    }
}
