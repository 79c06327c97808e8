//! Benchmark-only `erl_tracer` NIFs for the Erlang module `ferrotrace_floor`.
//!
//! They measure the VM's floor for NIF tracers, the cost no tracer module can go below:
//!
//! * state `discard`: `enabled/3` and `enabled_call/3` answer `discard`, so the VM pays only
//!   for asking the tracer (the floor for *asking*);
//! * state `noop`: they answer `trace` and `trace/5` does nothing, so the VM pays for asking and
//!   for delivering the event (the floor for *delivering*).
//!
//! For the `trace_status` tag the answer is always `trace` (anything but `remove` keeps the
//! tracer), which also covers the Erlang-side `enabled(trace_status, self(), State)` call that
//! `erlang:trace/3` makes with its arguments in another order. Any other state answers `remove`,
//! so a misuse unhooks the tracer instead of tracing for ever.
//!
//! The functions are registered by hand rather than with `#[rustler::nif]`, with the same
//! scaffolding as ferrotrace's own callbacks (`ferrotrace_nif/src/callbacks/raw.rs`, included
//! below), so the floor measures what is left when the tracer does nothing. `trace_call/5` is deliberately
//! not exported: under meta tracing OTP 25 calls it as the enabled check with only three valid
//! arguments.

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

use std::sync::OnceLock;

use rustler::codegen_runtime::c_int;
use rustler::sys::{enif_make_badarg, ErlNifEnv, ErlNifTerm};
use rustler::{Atom, Env, Term};

#[path = "../../ferrotrace_nif/src/callbacks/raw.rs"]
mod raw;

use raw::{args, guarded, register_raw_nif};

/// Raw terms of the atoms we compare with and return. Atoms are immediates: the bits of an atom
/// term never change while the VM runs, so they are made once at load time. Reading them is an
/// acquire load and a branch (a plain load on x86-64).
struct Atoms {
    discard: ErlNifTerm,
    noop: ErlNifTerm,
    trace: ErlNifTerm,
    remove: ErlNifTerm,
    ok: ErlNifTerm,
    trace_status: ErlNifTerm,
}

static ATOMS: OnceLock<Atoms> = OnceLock::new();

/// The answer of `enabled/3` and `enabled_call/3`, on raw terms only: up to three integer
/// compares, no allocation, no decode.
#[inline(always)]
fn answer(a: &Atoms, tag: ErlNifTerm, state: ErlNifTerm) -> ErlNifTerm {
    if tag == a.trace_status {
        a.trace
    } else if state == a.discard {
        a.discard
    } else if state == a.noop {
        a.trace
    } else {
        a.remove
    }
}

/// Shared body of the two enabled callbacks. A panic cannot happen here, but none may cross the
/// NIF boundary either: if one did, `badarg` is raised and the VM removes the tracer. The same
/// happens if the atoms are missing (they cannot be: loading fails without them).
///
/// # Safety
/// `env` must be the callback's env and `argv` must point to `argc` valid terms.
#[inline(always)]
unsafe fn enabled_body(env: *mut ErlNifEnv, argc: c_int, argv: *const ErlNifTerm) -> ErlNifTerm {
    let answered = guarded(|| {
        let a = ATOMS.get()?;
        if argc != 3 {
            return Some(a.remove);
        }
        // SAFETY: the VM passes `argc` (= 3) valid terms.
        let [tag, state, _] = *unsafe { args::<3>(argv) };
        Some(answer(a, tag, state))
    }, || None);
    // SAFETY: `env` is the callback's env.
    answered.unwrap_or_else(|| unsafe { enif_make_badarg(env) })
}

/// `enabled(TraceTag, TracerState, Tracee) -> trace | discard | remove`.
unsafe extern "C" fn nif_enabled(
    env: *mut ErlNifEnv,
    argc: c_int,
    argv: *const ErlNifTerm,
) -> ErlNifTerm {
    // SAFETY: called by the VM with its env and `argc` arguments.
    unsafe { enabled_body(env, argc, argv) }
}

/// `enabled_call(TraceTag, TracerState, Tracee) -> trace | discard | remove`.
unsafe extern "C" fn nif_enabled_call(
    env: *mut ErlNifEnv,
    argc: c_int,
    argv: *const ErlNifTerm,
) -> ErlNifTerm {
    // SAFETY: called by the VM with its env and `argc` arguments.
    unsafe { enabled_body(env, argc, argv) }
}

/// `trace(TraceTag, TracerState, Tracee, TraceTerm, Opts) -> ok`: does nothing.
unsafe extern "C" fn nif_trace(
    env: *mut ErlNifEnv,
    _argc: c_int,
    _argv: *const ErlNifTerm,
) -> ErlNifTerm {
    // SAFETY: `env` is the callback's env.
    guarded(|| ATOMS.get().map(|a| a.ok), || None).unwrap_or_else(|| unsafe { enif_make_badarg(env) })
}

register_raw_nif!("enabled", 3, nif_enabled);
register_raw_nif!("enabled_call", 3, nif_enabled_call);
register_raw_nif!("trace", 5, nif_trace);

/// Makes the atoms. Returns `false` (the load fails) if one cannot be made.
fn load(env: Env, _info: Term) -> bool {
    let make = |name: &str| Atom::from_str(env, name).map(|a| a.as_c_arg());
    let atoms = (|| {
        Ok::<_, rustler::Error>(Atoms {
            discard: make("discard")?,
            noop: make("noop")?,
            trace: make("trace")?,
            remove: make("remove")?,
            ok: make("ok")?,
            trace_status: make("trace_status")?,
        })
    })();
    match atoms {
        // A load after delete + purge may find the static already set: atoms never change, so
        // the old values are the same as the new ones.
        Ok(atoms) => {
            let _ = ATOMS.get_or_init(|| atoms);
            true
        }
        Err(_) => false,
    }
}

rustler::init!("ferrotrace_floor", load = load);
