//! The `erl_tracer` callbacks, the hot path: what runs on a traced process's scheduler for
//! every event. Nothing here allocates (but a thread's first ring), locks or waits.
//!
//! - [`tracer`]: `enabled*/3` and `trace/5`, and the calls' own tags;
//! - `activity`: decoding the other tags (messages, processes, GC, scheduling, ports);
//! - `atoms`: the one table of raw atom terms both compare with, made at load;
//! - `raw`: the NIF scaffolding of raw callbacks (registration, argument slices, the panic
//!   guard), shared with the bench's floor crate, which includes the file by path.

pub(crate) mod activity;
pub(crate) mod atoms;
pub(crate) mod raw;
pub mod tracer;
