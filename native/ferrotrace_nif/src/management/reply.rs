//! The terms the management NIFs reply with, built one way everywhere: `{error, Reason}`, a
//! map from atom keys, and a function's `{Module, Function, Arity}`.

use rustler::{Atom, Encoder, Env, Term};

use ferrotrace_core::event::Mfa;

use crate::encoding::immediate::kept_term;

mod atoms {
    rustler::atoms! { error }
}

/// `{error, Reason}`.
pub(crate) fn error<'a>(env: Env<'a>, reason: impl Encoder) -> Term<'a> {
    (atoms::error(), reason).encode(env)
}

/// A map of `pairs`, whose keys are distinct atoms (every caller's keys are literals).
pub(crate) fn map<'a>(env: Env<'a>, pairs: &[(Atom, Term<'a>)]) -> Term<'a> {
    Term::map_from_pairs(env, pairs).expect("atom keys are distinct")
}

/// `{Module, Function, Arity}` of a function the tracer kept (module and function are atoms
/// from `decode_mfa`: immediates).
pub(crate) fn mfa_term<'a>(env: Env<'a>, mfa: &Mfa) -> Term<'a> {
    (kept_term(env, mfa.module), kept_term(env, mfa.function), mfa.arity).encode(env)
}
