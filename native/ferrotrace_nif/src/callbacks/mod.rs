//! The `erl_tracer` callbacks, the hot path: what runs on a traced process's scheduler for
//! every event. Nothing here allocates (but a thread's first ring), locks or waits.
//!
//! - [`tracer`]: `enabled*/3` and `trace/5`, and the calls' own tags;
//! - `activity`: decoding the other tags (messages, processes, GC, scheduling, ports);
//! - `atoms`: the one table of raw atom terms both compare with, made at load;
//! - `raw`: the NIF scaffolding of raw callbacks (registration, argument slices, the panic
//!   guard), shared with the bench's floor crate, which includes the file by path.
//!
//! # The entry points' contract
//! Each callback is an `unsafe extern "C" fn(env, argc, argv) -> term` registered by
//! `register_raw_nif!` as `enabled/3`, `enabled_<tag>/3` or `trace/5`; its `# Safety` is
//! the VM's side of the contract, its body ours:
//! - the VM calls it on the tracee's scheduler thread (a dirty one too), never concurrently
//!   on one thread; `env` is valid for the call only, with no process in it for `enabled*`
//!   (the tracee is an argument) and the tracee's for `trace/5`; `argv` points at `arity`
//!   terms of that env, and `argc` is the arity registered;
//! - a callback reads its arguments without trusting their shape (`erlang:trace/3` calls
//!   `enabled(trace_status, Tracee, State)` from Erlang with the arguments in another
//!   order; anybody may call the module's functions), answers an atom of the `erl_tracer`
//!   contract (`trace`, `discard`, `remove`, `ok`), never blocks, locks or waits, keeps no
//!   term past the call (only copies and immediates as raw bits), and never lets a panic
//!   reach the VM (`raw::guarded`: a panic in `enabled*` answers `remove`, in `trace/5`
//!   `ok`).

pub(crate) mod activity;
pub(crate) mod atoms;
pub(crate) mod raw;
pub mod tracer;
