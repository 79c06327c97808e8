//! The overhead budget's fuse of a running session (`ferrotrace_core::fuse`): armed, set and
//! turned off by the budget's process (`ferrotrace_overhead`), read back for the summary.

use rustler::types::map::MapIterator;
use rustler::{Encoder, Env, Term};

use ferrotrace_core::fuse::{self, Params};
use ferrotrace_core::session;

use super::reply::{error, map};

mod atoms {
    rustler::atoms! { ok, off, not_running, bad_fuse, share, traced_ns, refused_ns, untraced }
}

const ACCEPTED: &str =
    "off, or #{share => S, traced_ns => T, refused_ns => R}: a share of each scheduler's time above 0 and at most 1, and the costs of a traced and a refused call in ns, above 0 and at most 1e9";

/// `session_set_fuse(Id, Fuse) -> ok | {error, not_running} | {error, {bad_fuse, Fuse,
/// Accepted}}`: `#{share, traced_ns, refused_ns}` arms session `Id`'s fuse with these
/// parameters (or changes them): from its next call on, each scheduler thread refuses the
/// session's calls once they cost it more than `share` of its time, and untraces the
/// process whose calls keep costing after that; `off` turns it off. Dirty: it takes the
/// registry's lock (as `session_set_call_sample/2`), which a release holds across a grace
/// period.
#[rustler::nif(schedule = "DirtyCpu")]
fn session_set_fuse<'a>(env: Env<'a>, id: Term<'a>, value: Term<'a>) -> Term<'a> {
    let id = match id.decode::<u64>() {
        Ok(id) if session::is_live(id) => id,
        _ => return error(env, atoms::not_running()),
    };
    if value.decode::<rustler::Atom>().is_ok_and(|a| a == atoms::off()) {
        return if session::set_fuse(id, None) { atoms::ok().encode(env) } else { error(env, atoms::not_running()) };
    }
    match params(value) {
        Some(params) if params.valid() => {
            if session::set_fuse(id, Some(params)) { atoms::ok().encode(env) } else { error(env, atoms::not_running()) }
        }
        _ => error(env, (atoms::bad_fuse(), value, ACCEPTED)),
    }
}

/// The three numbers of a fuse map, and no other key.
fn params(value: Term) -> Option<Params> {
    let (mut share, mut traced, mut refused) = (None, None, None);
    for (key, v) in MapIterator::new(value)? {
        let number = v.decode::<f64>().ok().or_else(|| v.decode::<i64>().ok().map(|n| n as f64));
        let key = key.decode::<rustler::Atom>().ok()?;
        if key == atoms::share() {
            share = number;
        } else if key == atoms::traced_ns() {
            traced = number;
        } else if key == atoms::refused_ns() {
            refused = number;
        } else {
            return None;
        }
    }
    Some(Params { share: share?, traced_ns: traced?, refused_ns: refused? })
}

/// `session_fuse(Id) -> {ok, off | #{untraced => N}} | {error, not_running}`: whether session
/// `Id`'s fuse is armed, and how many processes it untraced so far. Reads two static words:
/// the budget's process polls it.
#[rustler::nif]
fn session_fuse<'a>(env: Env<'a>, id: Term<'a>) -> Term<'a> {
    match id.decode::<u64>() {
        Ok(id) if session::is_live(id) => {
            let state = match fuse::untraced(id) {
                Some(untraced) => map(env, &[(atoms::untraced(), untraced.encode(env))]),
                None => atoms::off().encode(env),
            };
            (atoms::ok(), state).encode(env)
        }
        _ => error(env, atoms::not_running()),
    }
}
