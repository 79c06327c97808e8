//! The per-call rate of a running session (`sample => {calls, N}`): read and changed while it
//! runs (an overhead budget raises and lowers it; 0 pauses every call). The rate lives in the
//! session's slot, where `enabled_call` reads it without entering the session; these NIFs are
//! its only writers after the start.

use rustler::{Encoder, Env, Term};

use ferrotrace_core::sampling::MAX_CALL_RATE;
use ferrotrace_core::session;

use super::lookup::find;
use super::reply::error;

mod atoms {
    rustler::atoms! { ok, not_running, bad_call_sample }
}

/// `session_set_call_sample(Id, N) -> ok | {error, not_running} | {error, {bad_call_sample,
/// N, Accepted}}`: from the next call on, session `Id` keeps 1 call in `N` of every process
/// (1: every call; 0: none, each answered `discard`). Dirty: it takes the registry's lock,
/// which a release holds across a grace period.
#[rustler::nif(schedule = "DirtyCpu")]
fn session_set_call_sample<'a>(env: Env<'a>, id: Term<'a>, rate: Term<'a>) -> Term<'a> {
    let Some(n) = rate.decode::<i64>().ok().filter(|n| (0..=i64::from(MAX_CALL_RATE)).contains(n)) else {
        let accepted = format!("an integer from 0 (no call) to {MAX_CALL_RATE}");
        return error(env, (atoms::bad_call_sample(), rate, accepted));
    };
    match id.decode::<u64>() {
        Ok(id) if session::set_call_sample(id, n as u32) => atoms::ok().encode(env),
        _ => error(env, atoms::not_running()),
    }
}

/// `session_call_sample(Id) -> {ok, N} | {error, {no_such_session | bad_session, Id}}`: the
/// session's current per-call rate (1: every call is kept).
#[rustler::nif]
fn session_call_sample<'a>(env: Env<'a>, id: Term<'a>) -> Term<'a> {
    match find(env, id) {
        Ok(s) => (atoms::ok(), session::call_sample(s.id)).encode(env),
        Err(e) => e,
    }
}
