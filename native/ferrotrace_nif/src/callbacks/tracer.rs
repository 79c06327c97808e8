//! The erl_tracer callbacks: `enabled/3`, `enabled_call/3`, `enabled_procs/3` and `trace/5`.
//!
//! They are plain `extern "C"` NIFs registered directly (rustler's `#[nif]` wrapper would
//! allocate an argument vector on every call). Each runs on the tracee's scheduler thread and
//! does: decode the small-integer session id, read the session's slot tag (static, read-only
//! on this path); the `enabled*` callbacks of a sampled session answer `discard` for a
//! sampled-out tracee, and `enabled_call` for a call refused by the per-call rate (counted
//! there, so the VM never builds the event), and a budgeted session's call when the
//! thread's fuse says so (`discard`, or `remove` for a process whose calls cost too much
//! even refused); `trace/5` stamps the
//! event, applies the session's limits, and pushes it into this thread's ring. No lock, no
//! allocation (but a thread's first event of a session creates its ring, fallibly), no shared
//! counter, no reference count. Panics are caught here and never reach the VM.

use std::ffi::c_int;

use rustler::sys::{enif_get_int64, enif_get_map_value, enif_get_tuple, enif_thread_type, ErlNifEnv, ErlNifTerm,
                   ERL_NIF_THR_NORMAL_SCHEDULER};

use ferrotrace_core::births;
use ferrotrace_core::clock;
use ferrotrace_core::term_lane::CopyOf;
use ferrotrace_core::decode::decode_mfa;
use ferrotrace_core::event::{Event, EventKind, Mfa};
use ferrotrace_core::fuse::{self, Verdict};
use ferrotrace_core::producer::{Admission, ProducerRef};
use ferrotrace_core::quiesce::with_token;
use ferrotrace_core::sampling::{self, EVERY_CALL};
use ferrotrace_core::session;

use super::atoms::{atoms, Atoms};
use super::raw::{args, guarded, register_raw_nif};
use crate::encoding::immediate::Immediate;
use crate::encoding::term_reader::EnvReader;

/// The session id from `enabled`'s arguments. The contract is `(Tag, TracerState, Tracee)`,
/// but when the module was not loaded yet, `erlang:trace/3` first calls
/// `enabled(trace_status, Tracee, State)` from Erlang, so the swapped order is accepted too.
/// Returns the id and the tracee.
///
/// # Safety
/// `env` is the callback's env and `argv` its three arguments.
#[inline]
unsafe fn enabled_session_id(env: *mut ErlNifEnv, argv: &[ErlNifTerm]) -> Option<(u64, ErlNifTerm)> {
    // SAFETY: the caller's contract.
    match unsafe { session_id(env, argv[1]) } {
        Some(id) => Some((id, argv[2])),
        // SAFETY: as above.
        None => unsafe { session_id(env, argv[2]) }.map(|id| (id, argv[1])),
    }
}

/// The session id in a tracer state: a positive integer.
///
/// # Safety
/// `env` is the callback's env and `state` one of its terms.
#[inline]
unsafe fn session_id(env: *mut ErlNifEnv, state: ErlNifTerm) -> Option<u64> {
    let mut value: i64 = 0;
    // SAFETY: the caller's contract; `value` is a valid out-pointer.
    (unsafe { enif_get_int64(env, state, &mut value) } != 0 && value > 0).then_some(value as u64)
}

/// True, and counted, if the session's `sample` leaves `tracee` out. Enters the thread's
/// active mark to reach the session's producer counters.
#[inline]
fn sampled_out(id: u64, tracee: u64) -> bool {
    with_token(|token| {
        let active = token.enter();
        session::live_session(id, &active).is_some_and(|session| session.producer(&active).sample_out(tracee))
    })
    .unwrap_or(false)
}

/// True, and counted, if session `id`'s per-call rate (`sample => {calls, N}`) refuses this
/// call: a draw from the thread's own generator (`ferrotrace_core::sampling`). An unsampled
/// session reads one static word; only a refusal enters the active mark, to count it.
#[inline]
fn call_sampled_out(id: u64) -> bool {
    let rate = session::call_sample(id);
    if rate == EVERY_CALL || sampling::keep_call(rate) {
        return false;
    }
    let _ = with_token(|token| {
        let active = token.enter();
        if let Some(session) = session::live_session(id, &active) {
            session.producer(&active).refuse_call();
        }
    });
    true
}

/// True, and counted, if `tracee` has the most return-trace frames of session `id` a
/// process may keep (`ferrotrace_core::frames`): its call must be refused. The check reads
/// two words of the session slot's frame table; only a refusal enters the active mark, to
/// count it.
#[inline]
fn frames_full(id: u64, tracee: u64) -> bool {
    if !session::frames_of(id).is_some_and(|frames| frames.full(tracee)) {
        return false;
    }
    let _ = with_token(|token| {
        let active = token.enter();
        if let Some(session) = session::live_session(id, &active) {
            session.producer(&active).refuse_frame();
        }
    });
    true
}

/// The shared body of the enabled callbacks: `remove` (the VM unhooks the tracer from the
/// tracee) unless the state names a running session, else `answer(atoms, tag)`; an event the
/// session would trace is answered `discard` instead when `sample` leaves the tracee out (the
/// VM then builds no event and, for a call, pushes no return frame), and a call (`calls`)
/// when the per-call rate refuses it or the tracee has as many return-trace frames open as a
/// process may keep. A budgeted session's calls are then charged to the thread's fuse
/// (`ferrotrace_core::fuse`), which may refuse the call or untrace the process. `procs`:
/// the callback may be asked about `exit` (see `exit_settles_nothing`).
///
/// A birth is counted: the VM asks `trace_status` with the tracee `undefined` as it gives a
/// process (or port) born the session's flags (OTP's `get_default_tracing`), before it is
/// a tracee. What a birth costs the node (copying the tracer in, this question, freeing
/// the copy after thread progress) no knob on calls takes off; the budget counts it in its
/// estimate (`ferrotrace_budget`).
///
/// # Safety
/// `env` is the callback's env and `argv` points at its three arguments.
#[inline(always)]
unsafe fn enabled_by(
    env: *mut ErlNifEnv,
    argv: *const ErlNifTerm,
    calls: bool,
    procs: bool,
    answer: impl FnOnce(&Atoms, ErlNifTerm, bool) -> ErlNifTerm,
) -> ErlNifTerm {
    guarded(|| {
        let a = atoms();
        // SAFETY: the VM passes three valid terms to an arity-3 NIF (the caller's contract).
        let argv = unsafe { args::<3>(argv) };
        // SAFETY: as above.
        let Some((id, tracee)) = (unsafe { enabled_session_id(env, argv) }) else { return a.remove };
        let Some(sample) = session::live_sample(id) else { return a.remove };
        let tag = argv[0];
        let answer = answer(a, tag, session::wants_activity(id));
        if tag == a.trace_status {
            if tracee == a.undefined {
                births::count(id);
            }
            return answer;
        }
        if answer != a.trace {
            return answer;
        }
        // Only hashed, never kept: any word will do for a term that is not a pid.
        let bits = Immediate::of(tracee).map_or(0, Immediate::bits);
        let process_out = sample > 1 && sampled_out(id, bits);
        // Only a call is refused by the rate, the frame bound or the fuse: a refused call
        // gets no return frame, so its return never comes. The VM asks `enabled_call` with
        // the tag `call` only (OTP's `erts_call_trace`; `erts_trace_return` and
        // `erts_trace_exception` send without asking), but the tag is checked anyway: a
        // refused return would leave its call open and its frame counted forever.
        if calls && tag == a.call {
            let refused = process_out || call_sampled_out(id) || frames_full(id, bits);
            if !session::fused(id) {
                return if refused { a.discard } else { answer };
            }
            return match fuse::charge(id, !refused) {
                Verdict::Pass if refused => a.discard,
                Verdict::Pass => answer,
                Verdict::Refuse => {
                    count(id, |producer| producer.refuse_fused());
                    a.discard
                }
                // SAFETY: `env` is this callback's env and `tracee` its term.
                Verdict::Untrace => unsafe { untrace(env, id, tracee) },
            };
        }
        if process_out || (procs && tag == a.exit && exit_settles_nothing(id, bits)) { a.discard } else { answer }
    }, || atoms().remove)
}

/// True if an `exit` of `tracee` would tell a calls-only session nothing: the session keeps
/// exits only to forget the calls a process left open (activity sessions count every exit),
/// and the frame table counts none open on the tracee's line (the frames the aggregators
/// know to be open, plus those pushed since: never fewer than are open). A process born
/// per request exits with none: tracing its exit cost as much as a call pair (a process per
/// 40 calls spent a fifth of two schedulers on exits alone). Out of line: the callbacks'
/// common paths keep their size (inlined, it cost `enabled`'s `trace_status` 8 instructions).
#[inline(never)]
fn exit_settles_nothing(id: u64, tracee: u64) -> bool {
    !session::wants_activity(id) && session::frames_of(id).is_some_and(|frames| frames.open(tracee) <= 0)
}

/// Runs `f` on this thread's producer of session `id`, if it still runs: the rare paths
/// that count (a refusal), entering the thread's active mark.
#[inline(never)]
fn count(id: u64, f: impl FnOnce(&ProducerRef<'_>)) {
    let _ = with_token(|token| {
        let active = token.enter();
        if let Some(session) = session::live_session(id, &active) {
            f(&session.producer(&active));
        }
    });
}

/// The fuse's last resort for `tracee`, whose calls cost the thread more than the session's
/// share even refused: `remove`, counted, and told to the aggregators (an `Untraced` event:
/// its open calls will not return). The VM acts on `remove` only for the calling process on
/// a normal scheduler (`is_tracer_enabled` in OTP's erl_trace.c); elsewhere, and for a tracee
/// that is not a local pid, the call is only refused.
///
/// # Safety
/// `env` is the callback's env and `tracee` one of its terms.
#[inline(never)]
unsafe fn untrace(env: *mut ErlNifEnv, id: u64, tracee: ErlNifTerm) -> ErlNifTerm {
    let a = atoms();
    // SAFETY: callable from any thread; it only reads the thread's scheduler data.
    let normal = unsafe { enif_thread_type() } == ERL_NIF_THR_NORMAL_SCHEDULER;
    // SAFETY: the caller's contract.
    match (normal, unsafe { Immediate::local_pid(env, tracee) }) {
        (true, Some(pid)) => {
            count(id, |producer| {
                producer.untrace(pid.bits(), clock::now());
            });
            fuse::count_untraced(id);
            a.remove
        }
        _ => {
            count(id, |producer| producer.refuse_fused());
            a.discard
        }
    }
}

/// `enabled(TraceTag, TracerState, Tracee)`: `trace` for every tag of a running session
/// (each is aggregated or counted as ignored), but only `call` and `exit` for a calls-only
/// session (`calls/2` without other kinds); `trace_status` keeps the tracer (counting a
/// birth: see `enabled_by`).
unsafe extern "C" fn enabled(env: *mut ErlNifEnv, _argc: c_int, argv: *const ErlNifTerm) -> ErlNifTerm {
    // SAFETY: called by the VM as an arity-3 NIF: its env and three arguments.
    // With activity, every tag is traced: `trace/5` aggregates it or counts it as ignored
    // (activity.rs). A calls-only session keeps calls and exits.
    unsafe { enabled_by(env, argv, false, true, |a, tag, activity| {
        if activity || tag == a.call || tag == a.trace_status || tag == a.exit {
            a.trace
        } else {
            a.discard
        }
    }) }
}

/// `enabled_call/3`: the tag is `call` (see `enabled_by` for the others); the session, its
/// per-call rate and the frame bound are checked.
unsafe extern "C" fn enabled_call(env: *mut ErlNifEnv, _argc: c_int, argv: *const ErlNifTerm) -> ErlNifTerm {
    // SAFETY: called by the VM as an arity-3 NIF: its env and three arguments.
    unsafe { enabled_by(env, argv, true, false, |a, _tag, _activity| a.trace) }
}

/// `enabled_procs/3`: the VM passes the event's own tag (`spawn`, `exit`, `link`, ...); all
/// are aggregated (`exit` also forgets the open calls of a process that died inside them);
/// a calls-only session keeps only `exit`.
unsafe extern "C" fn enabled_procs(env: *mut ErlNifEnv, _argc: c_int, argv: *const ErlNifTerm) -> ErlNifTerm {
    // SAFETY: called by the VM as an arity-3 NIF: its env and three arguments.
    unsafe { enabled_by(env, argv, false, true, |a, tag, activity| {
        if activity || tag == a.exit || tag == a.trace_status {
            a.trace
        } else {
            a.discard
        }
    }) }
}

/// `trace(TraceTag, TracerState, Tracee, Message, Opts)`: stamps and queues call, return_from,
/// exception_from and exit events; counts and ignores any other tag or malformed message.
unsafe extern "C" fn trace(env: *mut ErlNifEnv, _argc: c_int, argv: *const ErlNifTerm) -> ErlNifTerm {
    guarded(|| {
        let a = atoms();
        // SAFETY: the VM passes five valid terms to this arity-5 NIF.
        let argv = unsafe { args::<5>(argv) };
        // SAFETY: `env` is this callback's env, `argv[1]` its term.
        let Some(id) = (unsafe { session_id(env, argv[1]) }) else { return a.ok };
        with_token(|token| {
            let active = token.enter();
            let Some(session) = session::live_session(id, &active) else { return };
            let producer = session.producer(&active);
            // The tracee's word is kept and rebuilt when the session is read: only a local
            // pid or port (an immediate) may be. The VM never passes anything else, but
            // `trace/5` is an exported function any code can call.
            // SAFETY: `env` is this callback's env, `argv[2]` its term.
            let Some(tracee) = (unsafe { Immediate::tracee(env, argv[2]) }) else { return producer.ignore() };
            let tag = argv[0];
            let kind = if tag == a.call {
                EventKind::Call
            } else if tag == a.return_from {
                EventKind::Return
            } else if tag == a.exception_from {
                EventKind::Exception
            } else {
                // SAFETY: `env` and `argv` are this callback's.
                match unsafe { super::activity::decode(env, argv) } {
                    Some((kind, mfa)) => {
                        push(&producer, kind, mfa, tracee, |_, _| {});
                        return;
                    }
                    None => return producer.ignore(),
                }
            };
            let Some(mfa) = decode_mfa(&EnvReader(env), argv[3]) else { return producer.ignore() };
            let pushed = push(&producer, kind, mfa, tracee, |pid, ts| {
                if producer.copies_terms() {
                    // SAFETY: `env` is this callback's env and `argv` its five terms.
                    unsafe { copy_terms(env, a, &producer, kind, pid, ts, argv) };
                }
            });
            // The frame bound counts what entered the ring, but the calls of loops (traced
            // count-only: no frame); the aggregators settle the rest.
            if pushed {
                if let Some(frames) = session::frames_of(id) {
                    if kind != EventKind::Call {
                        frames.pushed(tracee.bits(), -1);
                    } else if !frames.is_loop(&mfa) {
                        frames.pushed(tracee.bits(), 1);
                    }
                }
            }
        });
        a.ok
    }, || atoms().ok)
}

/// Stamps an event of `tracee`, applies the session's limits and queues it; `copy(pid, ts)`
/// runs for an admitted event just before it is queued (its copies go first). True if the
/// event entered the ring.
#[inline(always)]
fn push(producer: &ProducerRef<'_>, kind: EventKind, mfa: Mfa, tracee: Immediate, copy: impl FnOnce(u64, u64)) -> bool {
    let (ts, pid) = (clock::now(), tracee.bits());
    if producer.admit(pid, ts) != Admission::Take {
        return false;
    }
    copy(pid, ts);
    producer.push(Event { ts, pid, mfa, kind })
}

/// `enabled_<tag>/3` for the tags `activity.rs` decodes: every event of a running session is
/// traced (the VM then calls `trace/5`), unless the session is calls-only (`discard`);
/// `remove` for a session that is gone.
unsafe extern "C" fn enabled_any(env: *mut ErlNifEnv, _argc: c_int, argv: *const ErlNifTerm) -> ErlNifTerm {
    // SAFETY: called by the VM as an arity-3 NIF: its env and three arguments.
    unsafe { enabled_by(env, argv, false, false, |a, _tag, activity| if activity { a.trace } else { a.discard }) }
}

register_raw_nif!("enabled_send", 3, enabled_any);
register_raw_nif!("enabled_receive", 3, enabled_any);
register_raw_nif!("enabled_garbage_collection", 3, enabled_any);
register_raw_nif!("enabled_running_procs", 3, enabled_any);
register_raw_nif!("enabled_running_ports", 3, enabled_any);
register_raw_nif!("enabled_ports", 3, enabled_any);

/// `args => true`: copies a call's argument list, or the value (`{Class, Reason}` for an
/// exception) that the VM passes as `extra` in the options, into the thread's term ring,
/// before the event is pushed. `key`: copies a call's `match_spec_result` (what its match
/// spec's `{message, Key}` returned; absent when it returned `true`) the same way. Bounded by
/// `max_term_bytes` (see `ferrotrace_core::term_format`).
/// Nothing is allocated but what the VM allocates, bounded, for a reference or a remote pid
/// or port (`enif_term_to_binary`, a few dozen bytes) or a large map's iterator.
///
/// # Safety
/// `env` is the trace callback's env and `argv` its five arguments.
#[inline(never)]
unsafe fn copy_terms(
    env: *mut ErlNifEnv,
    a: &Atoms,
    producer: &ProducerRef<'_>,
    kind: EventKind,
    pid: u64,
    ts: u64,
    argv: &[ErlNifTerm; 5],
) {
    if kind == EventKind::Call && producer.copies_keys() {
        let mut key = argv[4];
        // SAFETY: the caller's contract; `key` is a valid out-pointer.
        if unsafe { enif_get_map_value(env, argv[4], a.match_spec_result, &mut key) } != 0 {
            producer.copy_term(pid, ts, kind, CopyOf::Key, |out| crate::encoding::term_copy::encode(env, key, out));
        }
    }
    if !producer.copies_args() {
        return;
    }
    let mut term = argv[3];
    if kind == EventKind::Call {
        let mut arity: c_int = 0;
        let mut elements: *const ErlNifTerm = std::ptr::null();
        // SAFETY: the caller's contract; `elements` points at `arity` terms on success.
        if unsafe { enif_get_tuple(env, argv[3], &mut arity, &mut elements) } == 0 || arity != 3 {
            return;
        }
        // SAFETY: index 2 of a 3-tuple's elements.
        term = unsafe { *elements.add(2) };
    } else {
        // SAFETY: the caller's contract; `term` is a valid out-pointer.
        if unsafe { enif_get_map_value(env, argv[4], a.extra, &mut term) } == 0 {
            return;
        }
    }
    producer.copy_term(pid, ts, kind, CopyOf::Args, |out| crate::encoding::term_copy::encode(env, term, out));
}

register_raw_nif!("enabled", 3, enabled);
register_raw_nif!("enabled_call", 3, enabled_call);
register_raw_nif!("enabled_procs", 3, enabled_procs);
register_raw_nif!("trace", 5, trace);
