//! The management NIFs the `ferrotrace` API calls, on dirty schedulers where they may take
//! time: sessions and their summaries, and the exports. They read the engine through
//! `ferrotrace_core::session` and reply with terms built by [`reply`] and [`distribution`].
//!
//! - `session`: start, stop, release; the summary, its call entries, histograms, intervals;
//!   the patterns and loops the keeper sets;
//! - `own`, `probe`, `keys`, `slow`: the parts a call entry adds (own time, the events
//!   inside its calls and its raw latency, keys or callers, slow calls), and
//!   `session_slow_calls/3`;
//! - `recent`: the flight recorder; `trees`: the call trees kept (`session_trees/2`);
//! - `capture`: the capture gate of `capture` and its counts;
//! - `sample`: the per-call rate of a running session, read and changed;
//! - `fuse`: the overhead budget's fuse of a running session, armed, set, turned off;
//! - `activity`: the figures of the kinds other than calls (messages, scheduling, GC,
//!   processes, ports);
//! - `export`: histograms as bytes, the HDR log, folded stacks, JSON;
//! - `metrics`: what a Prometheus scrape reads (`session_metrics/3`: counts and cumulative
//!   bucket counts at fixed bounds, the accounting, the memory held);
//! - `flame`: folded stacks drawn as an SVG flame graph (the html export);
//! - [`distribution`]: a histogram as the map of figures every summary shows;
//! - `lookup`: the arguments every NIF here reads: a session by id, a function's `{M, F, A}`;
//! - [`reply`]: `{error, Reason}`, maps from atom keys, `{M, F, A}`.
//!
//! # The entry points' contract
//! Every NIF here is a `#[rustler::nif]` function of `ferrotrace_tracer`, documented with
//! its Erlang signature. rustler decodes its arguments (a term of another type raises
//! `badarg`) and turns a panic into an Erlang exception, never an unwinding into the VM;
//! a NIF answers a value or `{error, Reason}` for any other bad input (an id that is no
//! session, a malformed histogram, a key past its bound) and keeps no term after it
//! returns (messages to the keeper and the capture process are built in an `OwnedEnv`). One
//! that may take more than a few microseconds (it reads a session's figures, joins a
//! thread, compresses or walks a term) runs on a dirty CPU scheduler
//! (`schedule = "DirtyCpu"`); the few left on a normal scheduler read a word or two.

mod activity;
mod capture;
pub(crate) mod distribution;
mod export;
mod flame;
mod fuse;
mod keys;
mod lookup;
mod metrics;
mod own;
mod probe;
mod recent;
pub(crate) mod reply;
mod sample;
mod session;
mod slow;
mod trees;
