//! The erl_tracer callbacks: `enabled/3`, `enabled_call/3`, `enabled_procs/3` and `trace/5`.
//!
//! They are plain `extern "C"` NIFs registered directly (rustler's `#[nif]` wrapper would
//! allocate an argument vector on every call). Each runs on the tracee's scheduler thread and
//! does: decode the small-integer session id, read the session's slot tag (static, read-only
//! on this path), and for `trace/5` stamp the event, apply the session's sampling and limits,
//! and push it into this thread's ring. No
//! lock, no allocation (but a thread's first event of a session creates its ring), no shared
//! counter, no reference count. Panics are caught here and never reach the VM.

use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

use rustler::sys::{
    enif_get_int64, enif_get_list_length, enif_get_tuple, enif_is_atom, enif_make_atom, ErlNifEnv,
    ErlNifTerm,
};

use ferrotrace_core::clock;
use ferrotrace_core::decode::{decode_mfa, TermReader};
use ferrotrace_core::event::{Event, EventKind, Mfa};
use ferrotrace_core::quiesce::{thread_index, Active};
use ferrotrace_core::session::{self, Admission};

/// Raw atom terms the callbacks compare against or return. Atoms are immediates and never
/// freed, so their bits are valid in every environment.
struct Atoms {
    ok: ErlNifTerm,
    trace: ErlNifTerm,
    discard: ErlNifTerm,
    remove: ErlNifTerm,
    trace_status: ErlNifTerm,
    call: ErlNifTerm,
    return_from: ErlNifTerm,
    exception_from: ErlNifTerm,
    exit: ErlNifTerm,
}

static ATOMS: OnceLock<Atoms> = OnceLock::new();

/// Creates the atoms; called from the library's `load`.
///
/// # Safety
/// `env` must be a valid environment.
pub unsafe fn init_atoms(env: *mut ErlNifEnv) {
    let atom = |name: &std::ffi::CStr| enif_make_atom(env, name.as_ptr());
    let _ = ATOMS.set(Atoms {
        ok: atom(c"ok"),
        trace: atom(c"trace"),
        discard: atom(c"discard"),
        remove: atom(c"remove"),
        trace_status: atom(c"trace_status"),
        call: atom(c"call"),
        return_from: atom(c"return_from"),
        exception_from: atom(c"exception_from"),
        exit: atom(c"exit"),
    });
}

/// The raw bits of a term (`ErlNifTerm` is a transparent word whose field is private).
#[inline]
pub fn term_bits(term: ErlNifTerm) -> u64 {
    // SAFETY: `ErlNifTerm` is `#[repr(transparent)]` over a `usize`.
    unsafe { std::mem::transmute::<ErlNifTerm, usize>(term) as u64 }
}

/// A term from raw bits. Only sound for immediates (atoms, local pids, small integers).
#[inline]
pub fn term_from_bits(bits: u64) -> ErlNifTerm {
    // SAFETY: as above.
    unsafe { std::mem::transmute::<usize, ErlNifTerm>(bits as usize) }
}

#[inline]
fn atoms() -> &'static Atoms {
    // Set in `load`, before any NIF can run.
    ATOMS.get().expect("ferrotrace atoms are initialised at load")
}

/// The session id from `enabled`'s arguments. The contract is `(Tag, TracerState, Tracee)`,
/// but when the module was not loaded yet, `erlang:trace/3` first calls
/// `enabled(trace_status, Tracee, State)` from Erlang, so the swapped order is accepted too.
#[inline]
unsafe fn enabled_session_id(env: *mut ErlNifEnv, argv: &[ErlNifTerm]) -> Option<u64> {
    session_id(env, argv[1]).or_else(|| session_id(env, argv[2]))
}

#[inline]
unsafe fn session_id(env: *mut ErlNifEnv, state: ErlNifTerm) -> Option<u64> {
    let mut value: i64 = 0;
    (enif_get_int64(env, state, &mut value) != 0 && value > 0).then_some(value as u64)
}

/// Runs a callback body, mapping a panic to `fallback` so it never unwinds into the VM.
#[inline(always)]
fn guarded(fallback: fn(&Atoms) -> ErlNifTerm, body: impl FnOnce() -> ErlNifTerm) -> ErlNifTerm {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|_| fallback(atoms()))
}

/// The shared body of the enabled callbacks: `remove` (the VM unhooks the tracer from the
/// tracee) unless the state names a running session, else `answer(atoms, tag)`.
#[inline(always)]
unsafe fn enabled_by(
    env: *mut ErlNifEnv,
    argv: *const ErlNifTerm,
    answer: impl FnOnce(&Atoms, ErlNifTerm) -> ErlNifTerm,
) -> ErlNifTerm {
    guarded(|a| a.remove, || {
        let a = atoms();
        let argv = std::slice::from_raw_parts(argv, 3);
        match enabled_session_id(env, argv) {
            Some(id) if session::is_live(id) => answer(a, argv[0]),
            _ => a.remove,
        }
    })
}

/// `enabled(TraceTag, TracerState, Tracee)`: `trace` for the events a running session
/// aggregates (`call`, and `exit` from `procs` tracing), `discard` for other tags.
/// `trace_status` keeps the tracer while the session runs.
unsafe extern "C" fn enabled(env: *mut ErlNifEnv, _argc: c_int, argv: *const ErlNifTerm) -> ErlNifTerm {
    enabled_by(env, argv, |a, tag| {
        if tag == a.call || tag == a.trace_status || tag == a.exit {
            a.trace
        } else {
            a.discard
        }
    })
}

/// `enabled_call/3`: the tag is `call`, only the session is checked.
unsafe extern "C" fn enabled_call(env: *mut ErlNifEnv, _argc: c_int, argv: *const ErlNifTerm) -> ErlNifTerm {
    enabled_by(env, argv, |a, _tag| a.trace)
}

/// `enabled_procs/3`: the VM passes the event's own tag (`spawn`, `exit`, `link`, ...); only
/// `exit` is wanted, to forget the open calls of a process that died inside them.
unsafe extern "C" fn enabled_procs(env: *mut ErlNifEnv, _argc: c_int, argv: *const ErlNifTerm) -> ErlNifTerm {
    enabled_by(env, argv, |a, tag| {
        if tag == a.exit || tag == a.trace_status {
            a.trace
        } else {
            a.discard
        }
    })
}

/// The decoder's view of terms in a NIF environment.
struct EnvReader(*mut ErlNifEnv);

impl TermReader for EnvReader {
    type Term = ErlNifTerm;
    #[inline]
    fn tuple3(&self, term: ErlNifTerm) -> Option<[ErlNifTerm; 3]> {
        let mut arity: c_int = 0;
        let mut elements: *const ErlNifTerm = std::ptr::null();
        // SAFETY: `self.0` is the callback's env; on success `elements` points at `arity` terms.
        unsafe {
            if enif_get_tuple(self.0, term, &mut arity, &mut elements) == 0 || arity != 3 {
                return None;
            }
            Some([*elements, *elements.add(1), *elements.add(2)])
        }
    }
    #[inline]
    fn is_atom(&self, term: ErlNifTerm) -> bool {
        // SAFETY: a valid env and term.
        unsafe { enif_is_atom(self.0, term) != 0 }
    }
    #[inline]
    fn list_length(&self, term: ErlNifTerm) -> Option<u32> {
        let mut length: std::ffi::c_uint = 0;
        // SAFETY: a valid env and term.
        (unsafe { enif_get_list_length(self.0, term, &mut length) } != 0).then_some(length)
    }
    #[inline]
    fn integer(&self, term: ErlNifTerm) -> Option<i64> {
        let mut value: i64 = 0;
        // SAFETY: a valid env and term.
        (unsafe { enif_get_int64(self.0, term, &mut value) } != 0).then_some(value)
    }
    #[inline]
    fn bits(&self, term: ErlNifTerm) -> u64 {
        term_bits(term)
    }
}

/// `trace(TraceTag, TracerState, Tracee, Message, Opts)`: stamps and queues call, return_from,
/// exception_from and exit events; counts and ignores any other tag or malformed message.
unsafe extern "C" fn trace(env: *mut ErlNifEnv, _argc: c_int, argv: *const ErlNifTerm) -> ErlNifTerm {
    guarded(|a| a.ok, || {
        let a = atoms();
        let argv = std::slice::from_raw_parts(argv, 5);
        let Some(id) = session_id(env, argv[1]) else { return a.ok };
        let Some(thread) = thread_index() else { return a.ok };
        let active = Active::enter(thread);
        let Some(session) = session::live_session(id, &active) else { return a.ok };
        let producer = session.producer(thread);
        let tag = argv[0];
        let kind = if tag == a.call {
            EventKind::Call
        } else if tag == a.return_from {
            EventKind::Return
        } else if tag == a.exception_from {
            EventKind::Exception
        } else if tag == a.exit {
            EventKind::Exit
        } else {
            producer.ignore();
            return a.ok;
        };
        let mfa = if kind == EventKind::Exit {
            Mfa { module: 0, function: 0, arity: 0 }
        } else {
            match decode_mfa(&EnvReader(env), argv[3]) {
                Some(mfa) => mfa,
                None => {
                    producer.ignore();
                    return a.ok;
                }
            }
        };
        let (ts, pid) = (clock::now(), term_bits(argv[2]));
        if session.admit(producer, pid, ts) == Admission::Take {
            producer.push(Event { ts, pid, mfa, kind });
        }
        a.ok
    })
}

macro_rules! register_raw_nif {
    ($name:literal, $arity:literal, $func:path) => {
        rustler::codegen_runtime::inventory::submit!(rustler::Nif {
            name: concat!($name, "\0").as_ptr() as *const std::ffi::c_char,
            arity: $arity,
            flags: 0,
            raw_func: $func,
        });
    };
}

register_raw_nif!("enabled", 3, enabled);
register_raw_nif!("enabled_call", 3, enabled_call);
register_raw_nif!("enabled_procs", 3, enabled_procs);
register_raw_nif!("trace", 5, trace);
