//! Captures (`capture => #{slower_than, every, max_captures}`): `session_set_capture/5`
//! gives a session a capture gate ([`ferrotrace_core::aggregate::capture`]) whose notifier
//! sends `{ferrotrace_capture, Id, #{mfa, pid, latency, started_at}}` to the session's
//! capture process (`ferrotrace_capture`) from the collector thread, within a collection of
//! the slow return being folded in (never a scheduler thread, dirty ones included, which is
//! what `OwnedEnv::send_and_clear` requires);
//! `session_capture_counts/1` reads the gate's counts.

use std::sync::Arc;

use rustler::{Encoder, Env, LocalPid, OwnedEnv, Term};

use ferrotrace_core::aggregate::capture::{CaptureCall, CaptureGate};

use super::lookup::find;
use super::reply::{error, map, mfa_term};
use crate::encoding::immediate::kept_term;

mod atoms {
    rustler::atoms! {
        ok, none, ferrotrace_capture, mfa, pid, latency, started_at, bad_capture,
        seen, sent, refused_every, refused_max,
    }
}

/// The most captures a session takes (`max_captures`), as `ferrotrace_options` checks it.
const MAX_CAPTURES: u64 = 1000;

/// `session_set_capture(Id, SlowerThanNs, EveryMs, MaxCaptures, Pid) -> ok | {error, _}`:
/// from now on each paired call as slow as `SlowerThanNs` or slower is offered to it; at most one
/// per `EveryMs` and `MaxCaptures` in all are sent to `Pid`, the rest counted.
#[rustler::nif(schedule = "DirtyCpu")]
fn session_set_capture<'a>(env: Env<'a>, id: Term<'a>, slower_than_ns: u64, every_ms: u64, max: u64, to: LocalPid) -> Term<'a> {
    let session = match find(env, id) {
        Ok(session) => session,
        Err(e) => return e,
    };
    if slower_than_ns == 0 || every_ms > 3_600_000 || max == 0 || max > MAX_CAPTURES {
        return error(env, (atoms::bad_capture(), (slower_than_ns, every_ms, max)));
    }
    let (session_id, offset) = (session.id, session.system_offset());
    let notify = Box::new(move |slow: &CaptureCall| {
        let mut owned = OwnedEnv::new();
        // A capture process already gone makes the send fail: nothing to tell.
        let _ = owned.send_and_clear(&to, |env| {
            let started_us = offset.us(slow.start_ns);
            let call = map(env, &[
                (atoms::mfa(), mfa_term(env, &slow.mfa)),
                (atoms::pid(), kept_term(env, slow.pid)),
                (atoms::latency(), slow.latency_ns.encode(env)),
                (atoms::started_at(), started_us.encode(env)),
            ]);
            (atoms::ferrotrace_capture(), session_id, call).encode(env)
        });
    });
    session.set_capture(Arc::new(CaptureGate::new(slower_than_ns, every_ms * 1_000_000, max, notify)));
    atoms::ok().encode(env)
}

/// `session_capture_counts(Id) -> {ok, #{seen, sent, refused_every, refused_max}} | {ok,
/// none} | {error, _}`: the capture gate's counts, `none` for a session without captures.
#[rustler::nif(schedule = "DirtyCpu")]
fn session_capture_counts<'a>(env: Env<'a>, id: Term<'a>) -> Term<'a> {
    let session = match find(env, id) {
        Ok(session) => session,
        Err(e) => return e,
    };
    match session.capture_counts() {
        Some(c) => (atoms::ok(), map(env, &[
            (atoms::seen(), c.seen.encode(env)),
            (atoms::sent(), c.sent.encode(env)),
            (atoms::refused_every(), c.refused_every.encode(env)),
            (atoms::refused_max(), c.refused_max.encode(env)),
        ])).encode(env),
        None => (atoms::ok(), atoms::none()).encode(env),
    }
}
