//! # ferrotrace_core
//!
//! The engine behind ferrotrace's Erlang tracer, free of any NIF code so that it can be tested
//! with plain `cargo test`:
//!
//! - [`ring`]: bounded single-producer/single-consumer rings, one per thread and session;
//! - [`quiesce`]: thread identity and the grace period that makes freeing rings safe;
//! - [`session`]: the slot table read by the hot path, producers, and the collector thread;
//! - [`aggregate`]: pairing calls with returns per process, HDR latency histograms;
//! - [`limit`]: `max_events` and `max_rate` leased to threads, no shared counter per event;
//! - [`options`]: session options with safe defaults;
//! - [`decode`]: reading trace messages, never trusting their shape;
//! - [`event`], [`clock`]: the event record and its timestamps.

#![warn(missing_docs)]

pub mod aggregate;
pub mod clock;
pub mod decode;
pub mod event;
pub mod limit;
pub mod options;
pub mod quiesce;
pub mod ring;
pub mod session;
