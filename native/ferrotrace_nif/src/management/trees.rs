//! The call trees a session kept (`trees => #{slower_than => Ns}`, see
//! `ferrotrace_core::aggregate::trees`): `session_trees/2` behind `ferrotrace:trees/2`, the
//! report and the export, and `session_set_tree_roots/2`, which the keeper calls with
//! `root => Spec` before the session's patterns are set.

use rustler::{Atom, Encoder, Env, Term};

use ferrotrace_core::aggregate::trees::{Tree, Trees};
use ferrotrace_core::session::SystemOffset;

use super::lookup::{decode_mfa, find};
use super::reply::{error, map, mfa_term};
use crate::encoding::immediate::kept_term;

mod atoms {
    rustler::atoms! {
        ok, all, mfa, latency, own, started_at, children, dropped, exception, pid, args,
        no_trees, bad_mfa, bad_spec, kept, roots, built, not_built, abandoned, nodes_dropped,
        slower_than, keep, max_nodes, bytes,
    }
}

/// A tree as nested maps `#{mfa, latency, own, started_at, children, dropped}` (plus
/// `exception => true` where a call raised), the root also with `pid` and, if copied,
/// `args`. Built from the last node back, so that each node's children are built before it
/// and a deep tree takes no recursion.
fn tree_term<'a>(env: Env<'a>, tree: &Tree, offset: SystemOffset) -> Term<'a> {
    let children = tree.children();
    let mut terms: Vec<Option<Term<'a>>> = vec![None; tree.nodes.len()];
    for (i, node) in tree.nodes.iter().enumerate().rev() {
        let kids: Vec<Term<'a>> = children[i].iter().filter_map(|c| terms[*c as usize].take()).collect();
        let started_us = offset.us(node.start_ns);
        let mut pairs = vec![
            (atoms::mfa(), mfa_term(env, &node.mfa)),
            (atoms::latency(), node.latency_ns.encode(env)),
            (atoms::own(), node.own_ns.encode(env)),
            (atoms::started_at(), started_us.encode(env)),
            (atoms::children(), kids.encode(env)),
            (atoms::dropped(), node.dropped.encode(env)),
        ];
        if node.exception {
            pairs.push((atoms::exception(), true.encode(env)));
        }
        if i == 0 {
            pairs.push((atoms::pid(), kept_term(env, tree.pid)));
            if let Some(copy) = &tree.args {
                pairs.push((atoms::args(), crate::encoding::term_copy::copy_term_in(env, copy)));
            }
        }
        terms[i] = Some(map(env, &pairs));
    }
    terms.first_mut().and_then(Option::take).unwrap_or_else(|| map(env, &[]))
}

/// What the trees hold and saw: `#{kept => [{MFA, Count}], built, not_built, abandoned,
/// nodes_dropped, bytes, slower_than, keep, max_nodes}`.
fn counts_term<'a>(env: Env<'a>, trees: &Trees) -> Term<'a> {
    let kept: Vec<Term<'a>> = trees.kept_counts().map(|(mfa, n)| (mfa_term(env, mfa), n).encode(env)).collect();
    let (c, config) = (trees.counters, trees.config());
    map(env, &[
        (atoms::kept(), kept.encode(env)),
        (atoms::built(), c.built.encode(env)),
        (atoms::not_built(), c.not_built.encode(env)),
        (atoms::abandoned(), c.abandoned.encode(env)),
        (atoms::nodes_dropped(), c.nodes_dropped.encode(env)),
        (atoms::bytes(), trees.bytes().encode(env)),
        (atoms::slower_than(), config.slower_than_ns.encode(env)),
        (atoms::keep(), config.keep.encode(env)),
        (atoms::max_nodes(), config.max_nodes.encode(env)),
    ])
}

/// `session_trees(Id, MFA | all) -> {ok, [map()] | map()} | {error, Reason}`: the kept trees
/// of root `MFA`, slowest first, or (`all`) what the trees hold and saw;
/// `{error, no_trees}` for a session without `trees`.
#[rustler::nif(schedule = "DirtyCpu")]
fn session_trees<'a>(env: Env<'a>, id: Term<'a>, which: Term<'a>) -> Term<'a> {
    let session = match find(env, id) {
        Ok(session) => session,
        Err(e) => return e,
    };
    let all = which.decode::<Atom>().is_ok_and(|a| a == atoms::all());
    let key = if all { None } else {
        match decode_mfa(env, which) {
            Some(key) => Some(key),
            None => return error(env, (atoms::bad_mfa(), which)),
        }
    };
    let offset = session.system_offset();
    session.read(|aggregator, _| {
        let Some(trees) = aggregator.trees() else { return error(env, atoms::no_trees()) };
        match key {
            None => (atoms::ok(), counts_term(env, trees)).encode(env),
            Some(key) => {
                let terms: Vec<Term> = trees.kept(&key).iter().map(|t| tree_term(env, t, offset)).collect();
                (atoms::ok(), terms).encode(env)
            }
        }
    })
}

/// `session_set_tree_roots(Id, Specs) -> ok | {error, Reason}`: the calls of the functions
/// `Specs` (`{M | '_', F | '_', A | '_'}`) match are the roots of trees from now on; `[]`:
/// the outermost traced call of each process.
#[rustler::nif(schedule = "DirtyCpu")]
fn session_set_tree_roots<'a>(env: Env<'a>, id: Term<'a>, specs: Vec<Term<'a>>) -> Term<'a> {
    let session = match find(env, id) {
        Ok(session) => session,
        Err(e) => return e,
    };
    let mut patterns = Vec::with_capacity(specs.len());
    for spec in specs {
        match super::session::decode_pattern(spec) {
            Ok(pattern) => patterns.push(pattern),
            Err(_) => return error(env, (atoms::bad_spec(), spec)),
        }
    }
    session.with_aggregates(|aggregates| aggregates.for_each_mut(|aggregator| aggregator.set_tree_roots(patterns.clone())));
    atoms::ok().encode(env)
}
