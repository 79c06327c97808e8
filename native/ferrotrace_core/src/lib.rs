//! # ferrotrace_core
//!
//! The engine behind ferrotrace's Erlang tracer, free of any NIF code so that it can be tested
//! with plain `cargo test`.
//!
//! Every module, in the order events travel: this is the engine's one file map (the internals
//! page, `doc/internals.md`, links here rather than keeping its own).
//!
//! On a scheduler thread, inside the `enabled*` and `trace` callbacks:
//! - [`slots`]: session ids and the slot table the hot path reads first;
//! - [`frames`]: the frame bound the `enabled_call` callback reads (open frames per process);
//! - [`fuse`]: the overhead budget's bucket per thread, charged by `enabled_call`;
//! - [`quiesce`]: the per-thread token, the active mark and grace periods;
//! - [`decode`]: reading trace messages, never trusting their shape;
//! - [`msgsize`]: a message's size in words, by a bounded walk (`messages`);
//! - [`clock`]: the timestamps;
//! - [`event`]: the event record;
//! - [`limit`]: `max_events` and `max_rate` leased to threads, no shared counter per event;
//! - [`sampling`]: which calls `enabled_call` keeps under `sample => {calls, N}`;
//! - [`producer`]: a thread's ring, counters and admission (sampling, limits);
//! - [`ring`]: bounded single-producer/single-consumer rings with split handles;
//! - [`term_format`]: the bounded encoding of a copied term (arguments, results, keys);
//! - [`term_lane`]: how a copy travels beside its event, in the thread's term ring, and waits
//!   in the collector for its event to be folded in;
//!
//! On the session's own threads:
//! - [`collector`]: draining, ordering by timestamp, feeding the aggregators, each on a
//!   thread of its own with `aggregators` (`collector/shards.rs`);
//! - [`shard`]: aggregation split by pid (`aggregators`): which shard owns a pid, where each
//!   event goes;
//! - [`hasher`]: the hasher of the collector's maps;
//! - [`process`]: what each process is doing now (scheduled in or out, in GC, waited on);
//! - [`aggregate`]: pairing calls with returns per process, HDR latency histograms, and the
//!   figures of the other event kinds, fed by the process table;
//! - [`memory`]: the bytes a session holds, by part, measured by each part with its helpers;
//!
//! Around them, for the management NIFs:
//! - [`session`]: lifecycle: start, the collector thread's loop (`session/collect.rs`), stop
//!   (and the keeper's notification), release; the read path the summaries take is
//!   `session/read.rs`;
//! - [`off_scheduler`]: where a session spawns its threads from, so that a purge unmaps the library;
//! - [`options`]: session options with safe defaults;
//! - [`hdr_bytes`]: histograms read back from bytes, bounded before anything is allocated;
//! - `sync` (private): the primitives the lock-free parts use, std's or loom's (`make loom`).

#![warn(missing_docs)]
// The unsafe discipline, checked rather than kept by habit: every unsafe operation in an
// unsafe fn sits in its own block, and every unsafe block says why it is sound (`// SAFETY:`).
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

#![cfg_attr(loom, allow(dead_code, unused_imports))]

// Under `--cfg loom` (`make loom`) only the lock-free parts are built, on loom's atomics.
#[cfg(not(loom))]
pub mod aggregate;
#[cfg(not(loom))]
pub mod births;
#[cfg(not(loom))]
pub mod clock;
#[cfg(not(loom))]
pub mod collector;
#[cfg(not(loom))]
pub mod decode;
#[cfg(not(loom))]
pub mod msgsize;
#[cfg(not(loom))]
pub mod process;
#[cfg(not(loom))]
pub mod event;
#[cfg(not(loom))]
pub mod frames;
#[cfg(not(loom))]
pub mod fuse;
#[cfg(not(loom))]
pub mod hasher;
#[cfg(not(loom))]
pub mod hdr_bytes;
#[cfg(not(loom))]
pub mod limit;
#[cfg(not(loom))]
pub mod memory;
#[cfg(not(loom))]
pub mod off_scheduler;
#[cfg(not(loom))]
pub mod options;
#[cfg(not(loom))]
pub mod producer;
pub mod quiesce;
pub mod ring;
#[cfg(not(loom))]
pub mod sampling;
#[cfg(not(loom))]
pub mod session;
#[cfg(not(loom))]
pub mod shard;
#[cfg(not(loom))]
pub mod slots;
pub mod term_format;
#[cfg(not(loom))]
pub mod term_lane;
mod sync;
