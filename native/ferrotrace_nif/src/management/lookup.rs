//! Reading the management NIFs' common arguments: a session id (a session running or
//! stopped, or the error that says why not) and a function's `{M, F, A}`.

use std::sync::Arc;

use rustler::{Env, Term};

use ferrotrace_core::aggregate::Aggregator;
use ferrotrace_core::decode;
use ferrotrace_core::event::Mfa;
use ferrotrace_core::session::{self, Session};

use super::reply::error;
use crate::encoding::term_reader::EnvReader;

mod atoms {
    rustler::atoms! { bad_session, no_such_session }
}

/// Finds a session (running or stopped) by the id term, or says why not.
pub(super) fn find<'a>(env: Env<'a>, id: Term<'a>) -> Result<Arc<Session>, Term<'a>> {
    match id.decode::<u64>() {
        Ok(n) => session::lookup(n).ok_or_else(|| error(env, (atoms::no_such_session(), id))),
        Err(_) => Err(error(env, (atoms::bad_session(), id))),
    }
}

/// `f` on a session's figures, up to date (`Session::read`), or `find`'s error
/// (`{error, {no_such_session | bad_session, Id}}`); for the export and event NIFs.
pub(super) fn with_aggregator<'a>(
    env: Env<'a>,
    id: Term<'a>,
    f: impl FnOnce(&Aggregator) -> Term<'a>,
) -> Term<'a> {
    match find(env, id) {
        Ok(session) => session.read(|aggregator, _| f(aggregator)),
        Err(e) => e,
    }
}

/// `{M, F, A}` by the same decoder as the hot path's (an arity, or an argument list).
pub(super) fn decode_mfa(env: Env, term: Term) -> Option<Mfa> {
    decode::decode_mfa(&EnvReader(env.as_c_arg()), term.as_c_arg())
}
