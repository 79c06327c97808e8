//! Export NIFs: a session's figures in formats other tools read, and histograms as bytes so
//! that a cluster session can add them exactly (`ferrotrace_export`, `ferrotrace_cluster`).
//!
//! - HdrHistogram's own encodings through the hdrhistogram crate's `serialization` feature:
//!   V2 deflate histograms (the compressed form every HdrHistogram port decodes) and the
//!   interval log. Writing these by hand would mean re-deriving a bit-exact format.
//! - JSON through serde_json: escaping and number formatting done by a well-kept crate.
//! - Folded stacks are one line per path; no library is needed to write them.

use std::time::{Duration, UNIX_EPOCH};

use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use rustler::types::map::MapIterator;
use rustler::{Binary, Encoder, Env, NewBinary, Term, TermType};

use ferrotrace_core::aggregate::SIGNIFICANT_DIGITS;
use ferrotrace_core::event::Mfa;

use super::distribution;
use super::reply::{error, map, mfa_term};
use super::lookup::with_aggregator;
use crate::encoding::immediate::kept_term;

mod atoms {
    rustler::atoms! {
        ok,
        bad_histogram, not_json, inclusive, exclusive, serialize,
        min, buckets, stacks, overflow, too_deep, paths, undefined,
    }
}

fn binary<'a>(env: Env<'a>, bytes: &[u8]) -> Term<'a> {
    let mut new = NewBinary::new(env, bytes.len());
    new.as_mut_slice().copy_from_slice(bytes);
    Binary::from(new).encode(env)
}

/// An atom's text from its bits (atoms are immediates and never freed).
fn atom_text(env: Env, bits: u64) -> String {
    kept_term(env, bits).atom_to_string().unwrap_or_else(|_| "?".to_string())
}

/// `m:f/a` as Erlang writes a function reference (module and function unquoted).
fn mfa_text(env: Env, mfa: &Mfa) -> String {
    format!("{}:{}/{}", atom_text(env, mfa.module), atom_text(env, mfa.function), mfa.arity)
}

/// A histogram from bytes any caller may pass: bounded before anything is allocated.
fn deserialize(bytes: &[u8]) -> Option<Histogram<u64>> {
    ferrotrace_core::hdr_bytes::decode(bytes).ok()
}

/// `{error, {bad_histogram, Bytes}}`: `bytes` do not decode, or do not add up with the rest.
fn bad_histogram<'a>(env: Env<'a>, bytes: Binary<'a>) -> Term<'a> {
    error(env, (atoms::bad_histogram(), bytes.to_term(env)))
}

/// The histogram a NIF argument holds, or its `bad_histogram` error.
fn decode<'a>(env: Env<'a>, bytes: Binary<'a>) -> Result<Histogram<u64>, Term<'a>> {
    deserialize(bytes.as_slice()).ok_or_else(|| bad_histogram(env, bytes))
}

/// A histogram as a V2 deflate binary, or `{error, serialize}`.
fn encode<'a>(env: Env<'a>, h: &Histogram<u64>) -> Result<Term<'a>, Term<'a>> {
    let mut out = Vec::new();
    match V2DeflateSerializer::new().serialize(h, &mut out) {
        Ok(_) => Ok(binary(env, &out)),
        Err(_) => Err(error(env, atoms::serialize())),
    }
}

/// `{ok, Value}`, or the error a step returned.
fn reply<'a>(env: Env<'a>, result: Result<Term<'a>, Term<'a>>) -> Term<'a> {
    result.map_or_else(|e| e, |value| (atoms::ok(), value).encode(env))
}

/// `session_histograms_bytes(Id) -> {ok, [{MFA, V2DeflateBinary}]} | {error, Reason}`:
/// every function's latency histogram, for cluster merges in one round trip.
#[rustler::nif(schedule = "DirtyCpu")]
fn session_histograms_bytes<'a>(env: Env<'a>, id: Term<'a>) -> Term<'a> {
    with_aggregator(env, id, |agg| {
        let out: Result<Vec<_>, _> = agg.functions()
            .map(|(mfa, stats)| {
                let (m, f) = (kept_term(env, mfa.module), kept_term(env, mfa.function));
                Ok(((m, f, mfa.arity).encode(env), encode(env, &stats.latency.to_hdr())?))
            })
            .collect();
        reply(env, out.map(|out| out.encode(env)))
    })
}

/// `session_function_histograms(Id) -> {ok, [{MFA, Latency, Own, Raw | undefined}]}`: each
/// function's latency, own-time and (where compensation took something out of its calls)
/// raw latency histograms as V2 deflate binaries, for a saved session and `compare`
/// (`ferrotrace_saved`). `undefined` where the raw latency is the latency.
#[rustler::nif(schedule = "DirtyCpu")]
fn session_function_histograms<'a>(env: Env<'a>, id: Term<'a>) -> Term<'a> {
    with_aggregator(env, id, |agg| {
        let out: Result<Vec<_>, _> = agg.functions()
            .map(|(mfa, stats)| {
                let (m, f) = (kept_term(env, mfa.module), kept_term(env, mfa.function));
                let raw = match &stats.raw {
                    Some(raw) => encode(env, &raw.latency.to_hdr())?,
                    None => atoms::undefined().encode(env),
                };
                Ok(((m, f, mfa.arity).encode(env), encode(env, &stats.latency.to_hdr())?,
                    encode(env, &stats.own.latency.to_hdr())?, raw).encode(env))
            })
            .collect();
        reply(env, out.map(|out| out.encode(env)))
    })
}

/// `histogram_merge([V2DeflateBinary]) -> {ok, V2DeflateBinary} | {error, {bad_histogram, B}}`:
/// the exact sum of the histograms (counts per bucket added), as one histogram.
#[rustler::nif(schedule = "DirtyCpu")]
fn histogram_merge<'a>(env: Env<'a>, parts: Vec<Binary<'a>>) -> Term<'a> {
    let mut sum = Histogram::<u64>::new_with_bounds(1, 2, SIGNIFICANT_DIGITS).expect("static bounds");
    sum.auto(true);
    let merged = parts.into_iter().try_for_each(|part| {
        sum.add(&decode(env, part)?).map_err(|_| bad_histogram(env, part))
    });
    reply(env, merged.and_then(|()| encode(env, &sum)))
}

/// `histogram_subtract(Later, Earlier) -> {ok, V2DeflateBinary} | {error, {bad_histogram, B}}`:
/// what `Later` recorded since `Earlier` (an earlier snapshot of the same histogram: every
/// bucket's count is at least the earlier one's), for `hdr_log`'s intervals.
#[rustler::nif(schedule = "DirtyCpu")]
fn histogram_subtract<'a>(env: Env<'a>, later: Binary<'a>, earlier: Binary<'a>) -> Term<'a> {
    let delta = decode(env, later).and_then(|mut delta| {
        delta.subtract(&decode(env, earlier)?).map_err(|_| bad_histogram(env, earlier))?;
        Ok(delta)
    });
    reply(env, delta.and_then(|delta| encode(env, &delta)))
}

/// `histogram_figures(V2DeflateBinary) -> {ok, #{count, mean, p50, p90, p99, p999, max,
/// min, buckets}} | {error, ...}`: the figures `ferrotrace:summary/1` shows, read from a
/// histogram (`undefined` when it is empty), and its power-of-two buckets.
#[rustler::nif(schedule = "DirtyCpu")]
fn histogram_figures<'a>(env: Env<'a>, bytes: Binary<'a>) -> Term<'a> {
    let figures = decode(env, bytes).map(|h| {
        let min = distribution::value_or_undefined(env, (!h.is_empty()).then(|| h.min()));
        let buckets = distribution::log2_buckets(&h).encode(env);
        distribution::distribution(env, &h, None, &[(atoms::min(), min), (atoms::buckets(), buckets)])
    });
    reply(env, figures)
}

/// Tags may not hold `,`, spaces or line breaks (the log's separators).
fn tag_text(text: &str) -> String {
    text.chars().map(|c| if c == ',' || c.is_whitespace() { '_' } else { c }).collect()
}

/// One interval of the log: offset and length (ms), and its tagged histograms.
type Interval<'a> = (u64, u64, Vec<(String, Binary<'a>)>);

/// `hdr_log(StartMs, [{OffsetMs, LengthMs, [{Tag, Bin}]}]) ->
/// {ok, Binary} | {error, ...}`: an HdrHistogram interval log whose start time is `StartMs`
/// (ms since the epoch) holding each interval's tagged histograms; timestamps are seconds
/// relative to the start (a BaseTime header says so).
#[rustler::nif(schedule = "DirtyCpu")]
fn hdr_log<'a>(env: Env<'a>, start_ms: u64, intervals: Vec<Interval<'a>>) -> Term<'a> {
    let start = UNIX_EPOCH + Duration::from_millis(start_ms);
    let mut out: Vec<u8> = Vec::new();
    let mut serializer = V2DeflateSerializer::new();
    let result = (|| -> Result<(), Term<'a>> {
        let mut writer = IntervalLogWriterBuilder::new()
            .add_comment("ferrotrace latency histograms, values in ns, one tag per function")
            .with_start_time(start)
            .with_base_time(start)
            .with_max_value_divisor(1.0)
            .begin_log_with(&mut out, &mut serializer)
            .map_err(|_| error(env, atoms::serialize()))?;
        for (offset_ms, length_ms, histograms) in intervals {
            for (tag, bytes) in histograms {
                let h = deserialize(bytes.as_slice()).ok_or_else(|| error(env, (atoms::bad_histogram(), tag.as_str())))?;
                let tag = tag_text(&tag);
                writer
                    .write_histogram(&h, Duration::from_millis(offset_ms), Duration::from_millis(length_ms), Tag::new(&tag))
                    .map_err(|_| error(env, atoms::serialize()))?;
            }
        }
        Ok(())
    })();
    reply(env, result.map(|()| binary(env, &out)))
}

/// `session_histogram_tags(Id) -> {ok, [{Tag, V2DeflateBinary}]}`: every function's
/// histogram tagged `m:f/a`, for `hdr_log`.
#[rustler::nif(schedule = "DirtyCpu")]
fn session_tagged_histograms<'a>(env: Env<'a>, id: Term<'a>) -> Term<'a> {
    with_aggregator(env, id, |agg| {
        let out: Result<Vec<_>, _> = agg.functions()
            .map(|(mfa, stats)| Ok((mfa_text(env, mfa), encode(env, &stats.latency.to_hdr())?)))
            .collect();
        reply(env, out.map(|out| out.encode(env)))
    })
}

/// `session_collapsed(Id, inclusive | exclusive) -> {ok, [{[MFA], Ns}], #{stacks, overflow,
/// too_deep}}`: each call path of the traced functions (outermost first) with its weight,
/// paths of weight 0 left out. `ferrotrace_export` writes the folded lines, naming the
/// functions as the report does (`ferrotrace_names`).
#[rustler::nif(schedule = "DirtyCpu")]
fn session_collapsed<'a>(env: Env<'a>, id: Term<'a>, weight: Term<'a>) -> Term<'a> {
    let inclusive = weight.decode::<rustler::Atom>().is_ok_and(|a| a == atoms::inclusive());
    with_aggregator(env, id, |agg| {
        let paths = agg.stack_paths();
        let lines: Vec<Term<'a>> = paths
            .folded()
            .into_iter()
            .filter_map(|line| {
                let ns = if inclusive { line.inclusive_ns } else { line.exclusive_ns };
                let path: Vec<Term<'a>> = line.path.iter().map(|mfa| mfa_term(env, mfa)).collect();
                (ns > 0).then(|| (path, ns).encode(env))
            })
            .collect();
        let info = map(env, &[
            (atoms::stacks(), paths.len().encode(env)),
            (atoms::overflow(), paths.overflow().encode(env)),
            (atoms::too_deep(), paths.too_deep().encode(env)),
        ]);
        (atoms::ok(), lines, info).encode(env)
    })
}

/// `session_stack_counts(Id) -> {ok, #{paths, overflow, too_deep}}`: the call paths kept for
/// the `collapsed` export, and the returned calls not kept (past the path bounds).
#[rustler::nif(schedule = "DirtyCpu")]
fn session_stack_counts<'a>(env: Env<'a>, id: Term<'a>) -> Term<'a> {
    with_aggregator(env, id, |agg| {
        let paths = agg.stack_paths();
        let counts = map(env, &[
            (atoms::paths(), paths.len().encode(env)),
            (atoms::overflow(), paths.overflow().encode(env)),
            (atoms::too_deep(), paths.too_deep().encode(env)),
        ]);
        (atoms::ok(), counts).encode(env)
    })
}

/// How deep `to_json` nests (ferrotrace's own documents nest under 10): past it the term is
/// refused, not walked, so that no term can run the dirty scheduler's stack out (a list
/// nested 400 deep did).
const MAX_JSON_DEPTH: u32 = 100;

/// Why a term is not JSON: a part that is not, or nesting past `MAX_JSON_DEPTH`.
enum NotJson<'a> {
    Part(Term<'a>),
    TooDeep,
}

/// A term as JSON: maps (atom or binary keys) are objects, lists arrays, integers and floats
/// numbers, `true`/`false` booleans, `null` and `undefined` null, other atoms and UTF-8
/// binaries strings. Anything else (tuples, pids, ...) is refused: shape it first.
fn json_value(term: Term, depth: u32) -> Result<serde_json::Value, NotJson> {
    use serde_json::Value;
    let part = |t| NotJson::Part(t);
    if depth > MAX_JSON_DEPTH {
        return Err(NotJson::TooDeep);
    }
    Ok(match term.get_type() {
        TermType::Map => {
            let mut object = serde_json::Map::new();
            for (key, value) in MapIterator::new(term).ok_or(part(term))? {
                let key = if key.is_atom() { key.atom_to_string().map_err(|_| part(key))? } else { key.decode::<String>().map_err(|_| part(key))? };
                object.insert(key, json_value(value, depth + 1)?);
            }
            Value::Object(object)
        }
        TermType::List => Value::Array(
            term.decode::<Vec<Term>>()
                .map_err(|_| part(term))?
                .into_iter()
                .map(|item| json_value(item, depth + 1))
                .collect::<Result<_, _>>()?,
        ),
        TermType::Integer => match (term.decode::<i64>(), term.decode::<u64>()) {
            (Ok(i), _) => Value::from(i),
            (_, Ok(u)) => Value::from(u),
            _ => return Err(part(term)),
        },
        TermType::Float => serde_json::Number::from_f64(term.decode::<f64>().map_err(|_| part(term))?).map(Value::Number).ok_or(part(term))?,
        TermType::Atom => match term.atom_to_string().map_err(|_| part(term))?.as_str() {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            "null" | "undefined" => Value::Null,
            other => Value::String(other.to_string()),
        },
        TermType::Binary => Value::String(term.decode::<String>().map_err(|_| part(term))?),
        _ => return Err(part(term)),
    })
}

/// `to_json(Term) -> {ok, Binary} | {error, {not_json, Part}} | {error, {too_deep, Max}}`;
/// see `json_value`. Indented, for people to read.
#[rustler::nif(schedule = "DirtyCpu")]
fn to_json<'a>(env: Env<'a>, term: Term<'a>) -> Term<'a> {
    json_reply(env, term, serde_json::to_vec_pretty)
}

/// As `to_json`, on one line: the html export's data, read by the page's script only.
#[rustler::nif(schedule = "DirtyCpu")]
fn to_json_compact<'a>(env: Env<'a>, term: Term<'a>) -> Term<'a> {
    json_reply(env, term, serde_json::to_vec)
}

fn json_reply<'a>(env: Env<'a>, term: Term<'a>,
                  write: fn(&serde_json::Value) -> serde_json::Result<Vec<u8>>) -> Term<'a> {
    match json_value(term, 0).map(|v| write(&v)) {
        Ok(Ok(bytes)) => (atoms::ok(), binary(env, &bytes)).encode(env),
        Ok(Err(_)) => error(env, atoms::serialize()),
        Err(NotJson::Part(part)) => error(env, (atoms::not_json(), part)),
        Err(NotJson::TooDeep) => error(env, (atoms::too_deep(), MAX_JSON_DEPTH)),
    }
}
