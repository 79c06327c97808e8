//! The raw atom terms the callbacks compare tags with and answer with: one table for every
//! callback (calls and activity), made once in the library's `load`. Atoms are immediates and
//! never freed, so their bits are valid in every environment; reading one is a load of a
//! static (an acquire load and a branch on the `OnceLock`).

use std::sync::OnceLock;

use rustler::sys::{enif_make_atom, ErlNifEnv, ErlNifTerm};

/// The atoms, by name (`in_` is `in`).
pub(crate) struct Atoms {
    // Answers, and the tags of calls (`tracer.rs`).
    pub(crate) ok: ErlNifTerm,
    pub(crate) trace: ErlNifTerm,
    pub(crate) discard: ErlNifTerm,
    pub(crate) remove: ErlNifTerm,
    pub(crate) trace_status: ErlNifTerm,
    /// The tracee of `trace_status` asked for a tracee being born (`births`, `tracer.rs`).
    pub(crate) undefined: ErlNifTerm,
    pub(crate) call: ErlNifTerm,
    pub(crate) exit: ErlNifTerm,
    pub(crate) return_from: ErlNifTerm,
    pub(crate) exception_from: ErlNifTerm,
    // Keys of `trace/5`'s options.
    pub(crate) extra: ErlNifTerm,
    pub(crate) match_spec_result: ErlNifTerm,
    // The tags of activity (`activity.rs`) and the keys of a GC event's info.
    pub(crate) send: ErlNifTerm,
    pub(crate) send_to_non_existing_process: ErlNifTerm,
    pub(crate) receive: ErlNifTerm,
    pub(crate) timeout: ErlNifTerm,
    pub(crate) spawn: ErlNifTerm,
    pub(crate) spawned: ErlNifTerm,
    pub(crate) link: ErlNifTerm,
    pub(crate) unlink: ErlNifTerm,
    pub(crate) getting_linked: ErlNifTerm,
    pub(crate) getting_unlinked: ErlNifTerm,
    pub(crate) register: ErlNifTerm,
    pub(crate) unregister: ErlNifTerm,
    pub(crate) gc_minor_start: ErlNifTerm,
    pub(crate) gc_minor_end: ErlNifTerm,
    pub(crate) gc_major_start: ErlNifTerm,
    pub(crate) gc_major_end: ErlNifTerm,
    pub(crate) in_: ErlNifTerm,
    pub(crate) out: ErlNifTerm,
    pub(crate) in_exiting: ErlNifTerm,
    pub(crate) out_exiting: ErlNifTerm,
    pub(crate) out_exited: ErlNifTerm,
    pub(crate) open: ErlNifTerm,
    pub(crate) closed: ErlNifTerm,
    pub(crate) heap_size: ErlNifTerm,
    pub(crate) old_heap_size: ErlNifTerm,
    pub(crate) mbuf_size: ErlNifTerm,
}

static ATOMS: OnceLock<Atoms> = OnceLock::new();

/// Creates the atoms; called from the library's `load`.
///
/// # Safety
/// `env` must be a valid environment.
pub(crate) unsafe fn init(env: *mut ErlNifEnv) {
    // SAFETY: `env` is valid (the caller's contract) and `name` a NUL-terminated string.
    let atom = |name: &std::ffi::CStr| unsafe { enif_make_atom(env, name.as_ptr()) };
    let _ = ATOMS.set(Atoms {
        ok: atom(c"ok"),
        trace: atom(c"trace"),
        discard: atom(c"discard"),
        remove: atom(c"remove"),
        trace_status: atom(c"trace_status"),
        undefined: atom(c"undefined"),
        call: atom(c"call"),
        exit: atom(c"exit"),
        return_from: atom(c"return_from"),
        exception_from: atom(c"exception_from"),
        extra: atom(c"extra"),
        match_spec_result: atom(c"match_spec_result"),
        send: atom(c"send"),
        send_to_non_existing_process: atom(c"send_to_non_existing_process"),
        receive: atom(c"receive"),
        timeout: atom(c"timeout"),
        spawn: atom(c"spawn"),
        spawned: atom(c"spawned"),
        link: atom(c"link"),
        unlink: atom(c"unlink"),
        getting_linked: atom(c"getting_linked"),
        getting_unlinked: atom(c"getting_unlinked"),
        register: atom(c"register"),
        unregister: atom(c"unregister"),
        gc_minor_start: atom(c"gc_minor_start"),
        gc_minor_end: atom(c"gc_minor_end"),
        gc_major_start: atom(c"gc_major_start"),
        gc_major_end: atom(c"gc_major_end"),
        in_: atom(c"in"),
        out: atom(c"out"),
        in_exiting: atom(c"in_exiting"),
        out_exiting: atom(c"out_exiting"),
        out_exited: atom(c"out_exited"),
        open: atom(c"open"),
        closed: atom(c"closed"),
        heap_size: atom(c"heap_size"),
        old_heap_size: atom(c"old_heap_size"),
        mbuf_size: atom(c"mbuf_size"),
    });
}

/// The table.
#[inline]
pub(crate) fn atoms() -> &'static Atoms {
    // Set in `load`, before any NIF can run.
    ATOMS.get().expect("ferrotrace atoms are initialised at load")
}
