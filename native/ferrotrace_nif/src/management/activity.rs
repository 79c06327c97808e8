//! Management NIFs for activity, the event kinds other than calls: the `messages`,
//! `scheduling`, `gc`, `processes` and `ports` figures of a session, and their histograms.
//! (The NIFs keep the names the Erlang side loads: `session_events/1`, ...) Read off the
//! schedulers (dirty), from the collector's aggregates.

use hdrhistogram::Histogram;
use rustler::{Atom, Encoder, Env, Term};

use ferrotrace_core::aggregate::activity::{kinds, ActivityStats};
use ferrotrace_core::aggregate::top::Tally;
use ferrotrace_core::event::Mfa;
use ferrotrace_core::process::ProcessTable;

use super::reply::{error, map, mfa_term};
use super::lookup::with_aggregator;
use crate::encoding::immediate::kept_term;

mod atoms {
    rustler::atoms! {
        ok, undefined, other, bad_session, no_such_session, bad_series,
        messages, scheduling, gc, processes, ports, procs, seen, tracked, untracked,
        sent, received, timeouts, to_dead, size_words, size_capped, wakeup, top_senders,
        top_receivers, top_wakeup, run_slice, top_cpu, out_locations, minor, major,
        reclaimed_words, top_pause, unpaired, spawned, exited, exit_reasons, lifetime, links,
        unlinks, getting_linked, getting_unlinked, registered, unregistered, opened, closed,
        count, max, total, words, pid, mfa, reason, ins, outs,
        splits, running, descheduled, migrations,
    }
}

/// Entries in each top list.
const TOP: usize = 10;

/// A distribution as a call entry shows latencies: `count, mean, p50, p90, p99, p999, max`
/// (`undefined` when empty).
fn distribution<'a>(env: Env<'a>, h: &Histogram<u64>) -> Term<'a> {
    super::distribution::distribution(env, h, None, &[])
}

/// A pid (or port) from the bits the tracer kept: tracees are local pids and ports, which
/// are immediates.
fn pid<'a>(env: Env<'a>, bits: u64) -> Term<'a> {
    immediate(env, bits)
}

/// A term from the word of an immediate the tracer kept: a tracee (a local pid or port), a
/// local pid, or an atom (see `crate::immediate`).
fn immediate<'a>(env: Env<'a>, bits: u64) -> Term<'a> {
    kept_term(env, bits)
}

/// A function's `{M, F, A}`, or `undefined` for an event that has none (`NO_MFA`).
fn mfa<'a>(env: Env<'a>, m: &Mfa) -> Term<'a> {
    if m.module == 0 {
        return atoms::undefined().encode(env);
    }
    mfa_term(env, m)
}

fn top<'a>(env: Env<'a>, list: Vec<(u64, Tally)>, total_key: Atom, with_max: bool) -> Term<'a> {
    list.into_iter()
        .map(|(key, t)| {
            let mut pairs = vec![(atoms::pid(), pid(env, key)), (atoms::count(), t.count.encode(env)), (total_key, t.total.encode(env))];
            if with_max {
                pairs.push((atoms::max(), t.max.encode(env)));
            }
            map(env, &pairs)
        })
        .collect::<Vec<_>>()
        .encode(env)
}

fn summary<'a>(env: Env<'a>, t: &ActivityStats, table: &ProcessTable) -> Term<'a> {
    let m = &t.messages;
    let messages = map(env, &[
        (atoms::sent(), m.sent.encode(env)),
        (atoms::received(), m.received.encode(env)),
        (atoms::timeouts(), m.timeouts.encode(env)),
        (atoms::to_dead(), m.to_dead.encode(env)),
        (atoms::size_words(), distribution(env, m.size_words())),
        (atoms::size_capped(), m.size_capped.encode(env)),
        (atoms::wakeup(), distribution(env, &m.wakeup)),
        (atoms::top_senders(), top(env, m.top_senders.top(TOP), atoms::words(), false)),
        (atoms::top_receivers(), top(env, m.top_receivers.top(TOP), atoms::words(), false)),
        (atoms::top_wakeup(), top(env, m.wakeup_by_receiver.top(TOP), atoms::total(), true)),
    ]);
    let s = &t.scheduling;
    let locations: Vec<Term> = s.out_locations.top(TOP * 2).into_iter()
        .map(|(at, tally)| map(env, &[(atoms::mfa(), mfa(env, &at)), (atoms::count(), tally.count.encode(env))]))
        .collect();
    let scheduling = map(env, &[
        (atoms::run_slice(), distribution(env, &s.run_slice)),
        (atoms::top_cpu(), top(env, s.top_cpu.top(TOP), atoms::total(), true)),
        (atoms::out_locations(), locations.encode(env)),
        (atoms::ins(), s.ins.encode(env)),
        (atoms::outs(), s.outs.encode(env)),
    ]);
    let g = &t.gc;
    let gc = map(env, &[
        (atoms::minor(), distribution(env, &g.minor)),
        (atoms::major(), distribution(env, &g.major)),
        (atoms::reclaimed_words(), g.reclaimed_words.encode(env)),
        (atoms::top_pause(), top(env, g.top_pause.top(TOP), atoms::total(), true)),
        (atoms::unpaired(), g.unpaired.encode(env)),
    ]);
    let p = &t.procs;
    let reasons: Vec<Term> = p.exit_reasons.top(TOP * 2).into_iter()
        .map(|(reason, tally)| {
            // Non-zero reasons are atom bits (immediates) kept by the tracer.
            let reason = if reason == 0 { atoms::other().encode(env) } else { immediate(env, reason) };
            (reason, tally.count).encode(env)
        })
        .collect();
    let processes = map(env, &[
        (atoms::spawned(), p.spawned.encode(env)),
        (atoms::exited(), p.exited.encode(env)),
        (atoms::exit_reasons(), reasons.encode(env)),
        (atoms::lifetime(), distribution(env, &p.lifetime)),
        (atoms::links(), p.other[0].encode(env)),
        (atoms::unlinks(), p.other[1].encode(env)),
        (atoms::getting_linked(), p.other[2].encode(env)),
        (atoms::getting_unlinked(), p.other[3].encode(env)),
        (atoms::registered(), p.other[4].encode(env)),
        (atoms::unregistered(), p.other[5].encode(env)),
    ]);
    let ports = map(env, &[
        (atoms::opened(), t.ports.opened.encode(env)),
        (atoms::closed(), t.ports.closed.encode(env)),
        (atoms::run_slice(), distribution(env, &t.ports.run_slice)),
    ]);
    let seen: Vec<Atom> = [
        (kinds::MESSAGES, atoms::messages()),
        (kinds::PROCS, atoms::procs()),
        (kinds::GC, atoms::gc()),
        (kinds::SCHEDULING, atoms::scheduling()),
        (kinds::PORTS, atoms::ports()),
    ]
    .into_iter()
    .filter(|(bit, _)| t.seen & bit != 0)
    .map(|(_, kind)| kind)
    .collect();
    map(env, &[
        (atoms::seen(), seen.encode(env)),
        (atoms::tracked(), table.len().encode(env)),
        (atoms::untracked(), table.untracked.encode(env)),
        (atoms::messages(), messages),
        (atoms::scheduling(), scheduling),
        (atoms::gc(), gc),
        (atoms::processes(), processes),
        (atoms::ports(), ports),
    ])
}

fn with_activity<'a>(env: Env<'a>, id: Term<'a>, f: impl FnOnce(&ActivityStats) -> Term<'a>) -> Term<'a> {
    with_aggregator(env, id, |agg| f(&agg.activity))
}

/// `session_events(Id) -> {ok, map()} | {error, Reason}`: the figures of every event kind
/// other than calls (see `ferrotrace:summary/1`), and `seen`, the kinds that had events.
#[rustler::nif(schedule = "DirtyCpu")]
fn session_events<'a>(env: Env<'a>, id: Term<'a>) -> Term<'a> {
    with_aggregator(env, id, |agg| {
        let splits: Vec<Term> = agg.functions()
            .filter_map(|(m, stats)| stats.split.as_ref().map(|split| (m, split)))
            .map(|(m, split)| map(env, &[
                (atoms::mfa(), mfa(env, m)),
                (atoms::running(), distribution(env, &split.running)),
                (atoms::descheduled(), distribution(env, &split.descheduled)),
                (atoms::gc(), distribution(env, &split.gc)),
            ]))
            .collect();
        let migrations: Vec<Term> = agg.functions()
            .filter(|(_, stats)| stats.migrations > 0)
            .map(|(m, stats)| (mfa(env, m), stats.migrations).encode(env))
            .collect();
        let figures = summary(env, &agg.activity, &agg.processes)
            .map_put(atoms::splits().encode(env), splits.encode(env))
            .and_then(|t| t.map_put(atoms::migrations().encode(env), migrations.encode(env)))
            .expect("a map");
        (atoms::ok(), figures).encode(env)
    })
}

/// Power-of-two buckets `{Low, High, Count}` of a histogram; zero gets its own bucket.
/// `session_event_histogram(Id, Series) -> {ok, [{Low, High, Count}]} | {error, Reason}`;
/// `Series` is `wakeup`, `run_slice`, `{gc, minor}`, `{gc, major}`, `lifetime`,
/// `size_words` or `{ports, run_slice}`.
#[rustler::nif(schedule = "DirtyCpu")]
fn session_event_histogram<'a>(env: Env<'a>, id: Term<'a>, series: Term<'a>) -> Term<'a> {
    let name = |t: Term| t.atom_to_string().ok();
    let which: Option<fn(&ActivityStats) -> &Histogram<u64>> = match (name(series), series.decode::<(Atom, Atom)>().ok()) {
        (Some(s), _) if s == "wakeup" => Some(|t| &t.messages.wakeup),
        (Some(s), _) if s == "run_slice" => Some(|t| &t.scheduling.run_slice),
        (Some(s), _) if s == "lifetime" => Some(|t| &t.procs.lifetime),
        (Some(s), _) if s == "size_words" => Some(|t| t.messages.size_words()),
        (None, Some((a, b))) if a == atoms::gc() && b == atoms::minor() => Some(|t| &t.gc.minor),
        (None, Some((a, b))) if a == atoms::gc() && b == atoms::major() => Some(|t| &t.gc.major),
        (None, Some((a, b))) if a == atoms::ports() && b == atoms::run_slice() => Some(|t| &t.ports.run_slice),
        _ => None,
    };
    let Some(which) = which else {
        return error(env, (atoms::bad_series(), series));
    };
    with_activity(env, id, |t| (atoms::ok(), super::distribution::log2_buckets(which(t))).encode(env))
}

/// `session_set_events(Id, Bool) -> ok | {error, Reason}`: `false` makes a session
/// calls-only (its `enabled` callbacks discard every tag but `call` and `exit`), as
/// `calls/2` without other kinds wants; sessions start with `true`.
#[rustler::nif]
fn session_set_events<'a>(env: Env<'a>, id: Term<'a>, activity: bool) -> Term<'a> {
    match id.decode::<u64>() {
        Ok(n) if ferrotrace_core::session::set_activity(n, activity) => atoms::ok().encode(env),
        Ok(_) => error(env, (atoms::no_such_session(), id)),
        Err(_) => error(env, (atoms::bad_session(), id)),
    }
}
