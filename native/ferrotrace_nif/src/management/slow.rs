//! The slow calls a session kept (`slowest`, `threshold`): the `slowest` key of each call
//! entry in the summary, and `session_slow_calls/3` behind `ferrotrace:slowest/2` and
//! `ferrotrace:slow_calls/2`.

use rustler::{Atom, Encoder, Env, Term};

use ferrotrace_core::aggregate::slowest::SlowCall;
use ferrotrace_core::aggregate::FunctionStats;
use ferrotrace_core::session::SystemOffset;

use super::reply::{error, map};
use super::lookup::{decode_mfa, find};
use crate::encoding::immediate::kept_term;

mod atoms {
    rustler::atoms! {
        ok, pid, started_at, duration, result, exception, slowest, slow_calls_dropped,
        threshold, bad_mfa, no_such_function, bad_which, args,
        // `return` is a Rust keyword.
        return_ = "return",
    }
}

/// One kept call as `#{pid, started_at, duration, result}`: `started_at` in system time µs,
/// `duration` in ns, `result` `return` or `exception`. With copies (`args => true`) it also
/// has `args`, the argument list, and `result` is `{return, Value}` or
/// `{exception, Class, Reason}`.
fn call_term<'a>(env: Env<'a>, call: &SlowCall, offset: SystemOffset) -> Term<'a> {
    let pid = kept_term(env, call.pid);
    let started_us = offset.us(call.start_ns);
    let kind: Atom = if call.exception { atoms::exception() } else { atoms::return_() };
    let result = match &call.result {
        Some(copy) => crate::encoding::term_copy::result_term(env, kind, call.exception, copy),
        None => kind.encode(env),
    };
    let entry = map(env, &[
        (atoms::pid(), pid),
        (atoms::started_at(), started_us.encode(env)),
        (atoms::duration(), call.duration_ns.encode(env)),
        (atoms::result(), result),
    ]);
    match &call.args {
        Some(copy) => entry.map_put(atoms::args().encode(env), crate::encoding::term_copy::copy_term_in(env, copy)).unwrap_or(entry),
        None => entry,
    }
}

/// Adds `slowest` (the kept slowest calls, slowest first) and `slow_calls_dropped` (calls
/// over the threshold past its bound) to a function's summary entry.
pub(super) fn add_keys<'a>(env: Env<'a>, entry: Term<'a>, stats: &FunctionStats, offset: SystemOffset) -> Term<'a> {
    let slowest: Vec<Term> = stats.slow.slowest().iter().map(|c| call_term(env, c, offset)).collect();
    entry
        .map_put(atoms::slowest().encode(env), slowest.encode(env))
        .and_then(|e| e.map_put(atoms::slow_calls_dropped().encode(env), stats.slow.over_dropped().encode(env)))
        .unwrap_or(entry)
}

/// `session_slow_calls(Id, MFA, slowest | threshold) -> {ok, [map()]} | {error, Reason}`:
/// the K slowest calls of a function, slowest first, or those kept over the threshold, in
/// the order they began.
#[rustler::nif(schedule = "DirtyCpu")]
fn session_slow_calls<'a>(env: Env<'a>, id: Term<'a>, mfa: Term<'a>, which: Term<'a>) -> Term<'a> {
    let session = match find(env, id) {
        Ok(session) => session,
        Err(e) => return e,
    };
    let Some(key) = decode_mfa(env, mfa) else { return error(env, (atoms::bad_mfa(), mfa)) };
    let threshold = if which.decode::<Atom>().is_ok_and(|a| a == atoms::threshold()) {
        true
    } else if which.decode::<Atom>().is_ok_and(|a| a == atoms::slowest()) {
        false
    } else {
        return error(env, (atoms::bad_which(), which));
    };
    let offset = session.system_offset();
    session.read(|aggregator, _| match aggregator.function(&key) {
        Some(stats) => {
            let calls = if threshold { stats.slow.over_threshold() } else { stats.slow.slowest() };
            let terms: Vec<Term> = calls.iter().map(|c| call_term(env, c, offset)).collect();
            (atoms::ok(), terms).encode(env)
        }
        None => error(env, (atoms::no_such_function(), mfa)),
    })
}
