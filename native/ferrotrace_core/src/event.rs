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
    Exit,
}

/// A function as the VM names it: module and function atoms (raw term bits) and arity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Mfa {
    pub module: u64,
    pub function: u64,
    pub arity: u32,
}

/// One trace event. 40 bytes; copied by value into rings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// Clock ticks from `clock::now` in rings; nanoseconds (`clock::to_ns`) once aggregated.
    pub ts: u64,
    /// The tracee (raw pid bits).
    pub pid: u64,
    pub mfa: Mfa,
    pub kind: EventKind,
}
