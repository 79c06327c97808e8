//! # ferrotrace_tracer NIF library
//!
//! The NIF library behind the Erlang module `ferrotrace_tracer`, in three parts:
//! - [`callbacks`]: the `erl_tracer` callbacks (`enabled*/3`, `trace/5`), the hot path, run
//!   on the traced processes' schedulers;
//! - `management`: the management NIFs the `ferrotrace` API calls (sessions, summaries,
//!   exports; it also sends the keeper `{ferrotrace_stopped, Id, Reason}`). Every file here
//!   is a NIF, so the part is named for what its NIFs are for, as the docs call them;
//! - [`encoding`]: between Erlang terms and the engine's words and bytes (reading trace
//!   messages, immediates, term copies), used by both.
//!
//! The engine itself (rings, sessions, aggregation) is the `ferrotrace_core` crate.

#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod callbacks;
pub mod encoding;
mod management;

use ferrotrace_core::{clock, off_scheduler, session};

use rustler::codegen_runtime::{c_int, c_void, inventory, ErlNifEntry, ErlNifEnv, ErlNifTerm};

/// Called by the VM once, as `erlang:load_nif/2` loads the library (`ferrotrace_tracer`'s
/// `on_load`), before any NIF of it runs: the atom table and the clock are set up; answers 0,
/// or 1 (the load fails) if that panicked. `info` is `erlang:load_nif/2`'s second argument: 0
/// pins the library in memory (a purge and a reload find its sessions again, stopped), 1
/// leaves it free to be unmapped at the purge (`ferrotrace attach`, whose detach must leave
/// no library mapped).
extern "C" fn load(env: *mut ErlNifEnv, _priv: *mut *mut c_void, info: ErlNifTerm) -> c_int {
    let result = std::panic::catch_unwind(|| {
        // SAFETY: `env` is the environment the VM passes to `load`.
        unsafe { callbacks::atoms::init(env) };
        clock::init();
        let mut unpinned: c_int = 0;
        // SAFETY: `env` and `info` are what the VM passes to `load`; on a term that is not
        // an integer `enif_get_int` fails and leaves `unpinned` at 0.
        let _ = unsafe { rustler::sys::enif_get_int(env, info, &mut unpinned) };
        if unpinned == 0 {
            off_scheduler::pin(load as *const () as usize);
        }
    });
    c_int::from(result.is_err())
}

/// Called by the VM before it unloads this library (module purge), after every NIF call of
/// it has returned: every session stops and its collector thread is joined, so no thread
/// runs this library's code after `dlclose`. A panic is caught and ignored.
extern "C" fn unload(_env: *mut ErlNifEnv, _priv: *mut c_void) {
    let _ = std::panic::catch_unwind(|| {
        for session in session::all() {
            session.stop(session::StopReason::Unload);
        }
    });
}

/// The NIF entry point, the one symbol the VM looks up: the function table (every
/// `register_raw_nif!` callback and `#[rustler::nif]`), `load` and `unload`. Written out
/// instead of `rustler::init!` to register `unload`.
#[no_mangle]
extern "C" fn nif_init() -> *const ErlNifEntry {
    static ENTRY: std::sync::OnceLock<EntryCell> = std::sync::OnceLock::new();
    struct EntryCell(ErlNifEntry);
    // SAFETY: the entry only holds pointers to 'static data (leaked below) and is never
    // written after initialisation.
    unsafe impl Send for EntryCell {}
    // SAFETY: as above: shared read-only.
    unsafe impl Sync for EntryCell {}
    let cell = ENTRY.get_or_init(|| {
        // SAFETY: rustler's symbol table setup, called once, before any NIF runs (the VM
        // calls `nif_init` before `load`), as `rustler::init!` does.
        unsafe { rustler::codegen_runtime::internal_write_symbols() };
        let funcs: &'static [_] = Box::leak(
            inventory::iter::<rustler::Nif>().map(rustler::Nif::get_def).collect::<Box<[_]>>(),
        );
        let mut entry = ErlNifEntry::new(c"ferrotrace_tracer", funcs, load);
        entry.unload = Some(unload);
        EntryCell(entry)
    });
    &cell.0
}
