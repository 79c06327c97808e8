//! `session_recent/1`, behind `ferrotrace:recent/1`: the flight recorder's events.

use rustler::{Atom, Encoder, Env, Term};

use ferrotrace_core::event::EventKind;

use super::reply::{error, map, mfa_term};
use super::lookup::find;
use crate::encoding::immediate::kept_term;

mod atoms {
    rustler::atoms! {
        ok, at, pid, mfa, event, duration, call, exception, undefined, no_recorder, events, total, args, result,
        return_ = "return",
    }
}

/// `session_recent(Id) -> {ok, #{events => [map()], total => N}} | {error, Reason}`: the
/// events the recorder kept, oldest first, each `#{at, pid, mfa, event, duration}` (`at` in
/// system time µs; `event` `call`, `return` or `exception`; `duration` the paired call's, ns,
/// or `undefined`), and `total`, the events recorded in all.
#[rustler::nif(schedule = "DirtyCpu")]
fn session_recent<'a>(env: Env<'a>, id: Term<'a>) -> Term<'a> {
    let session = match find(env, id) {
        Ok(session) => session,
        Err(e) => return e,
    };
    let offset = session.system_offset();
    session.read(|aggregator, _| {
        let Some(recorder) = aggregator.recorder() else { return error(env, atoms::no_recorder()) };
        let events: Vec<Term> = recorder
            .events()
            .map(|e| {
                let pid = kept_term(env, e.pid);
                let kind: Atom = match e.kind {
                    EventKind::Call => atoms::call(),
                    EventKind::Exception => atoms::exception(),
                    _ => atoms::return_(),
                };
                let duration = e.duration_ns.map_or_else(|| atoms::undefined().encode(env), |d| d.encode(env));
                let entry = map(env, &[
                    (atoms::at(), offset.us(e.ts_ns).encode(env)),
                    (atoms::pid(), pid),
                    (atoms::mfa(), mfa_term(env, &e.mfa)),
                    (atoms::event(), kind.encode(env)),
                    (atoms::duration(), duration),
                ]);
                // With copies (`args => true`): a call's `args`, a return's or exception's
                // `result` ({return, V} or {exception, Class, Reason}).
                let copied = match (&e.copy, e.kind) {
                    (None, _) => None,
                    (Some(copy), EventKind::Call) => Some((atoms::args(), crate::encoding::term_copy::copy_term_in(env, copy))),
                    (Some(copy), k) => {
                        Some((atoms::result(), crate::encoding::term_copy::result_term(env, kind, k == EventKind::Exception, copy)))
                    }
                };
                match copied {
                    Some((key, value)) => entry.map_put(key.encode(env), value).unwrap_or(entry),
                    None => entry,
                }
            })
            .collect();
        let result = map(env, &[(atoms::events(), events.encode(env)), (atoms::total(), recorder.total().encode(env))]);
        (atoms::ok(), result).encode(env)
    })
}
