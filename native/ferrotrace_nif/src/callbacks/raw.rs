//! NIF scaffolding shared by the two NIF libraries that implement `erl_tracer` callbacks:
//! this crate and the bench floor (`native/ferrotrace_floor` includes this file by path, so
//! the floor measures exactly the scaffolding ferrotrace's hot path uses).
//!
//! Callbacks are plain `extern "C"` functions registered directly: rustler's `#[nif]` wrapper
//! would collect the arguments into a `Vec` on every call.

use std::panic::{catch_unwind, AssertUnwindSafe};

use rustler::sys::ErlNifTerm;

/// Registers `$func`, an `unsafe extern "C" fn(env, argc, argv) -> term`, as the NIF
/// `$name/$arity` of the library being built. The VM then calls `$func` with a valid `env`
/// for that call and `argv` pointing at `$arity` of its terms (see the callbacks' contract
/// in `callbacks/mod.rs`); `$func` must catch its panics ([`guarded`]).
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
pub(crate) use register_raw_nif;

/// Runs a callback body; a panic gives `fallback()` instead of unwinding into the VM.
#[inline(always)]
pub(crate) fn guarded<T>(body: impl FnOnce() -> T, fallback: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|_| fallback())
}

/// The arguments of a NIF call.
///
/// # Safety
/// `argv` points at `N` valid terms: the VM's arguments to a NIF of arity `N`, registered as such.
#[inline(always)]
pub(crate) unsafe fn args<'a, const N: usize>(argv: *const ErlNifTerm) -> &'a [ErlNifTerm; N] {
    // SAFETY: the caller's contract; `[T; N]` has the layout of `N` consecutive `T`s.
    unsafe { &*(argv as *const [ErlNifTerm; N]) }
}
