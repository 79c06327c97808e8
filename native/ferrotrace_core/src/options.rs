//! Session options: parsing and validation, independent of Erlang terms so it can be tested.

use std::fmt;

use crate::aggregate::probe::Compensation;
use crate::aggregate::keyed::{KeySource, KeysConfig, MAX_KEYS_RANGE};
use crate::aggregate::recorder::RECENT_RANGE;
use crate::aggregate::slowest::{SlowestConfig, KEEP_RANGE, MAX_SLOW_CALLS_RANGE, THRESHOLD_RANGE};
use crate::aggregate::trees::{self, TreesConfig};
use crate::shard::{auto_count, AGGREGATORS_RANGE};
use crate::term_format::ArgsConfig;
use crate::term_format::MAX_TERM_BYTES_RANGE;

/// An option value as the NIF layer saw it.
#[derive(Clone, Debug, PartialEq)]
pub enum OptionValue {
    /// An integer that fits 64 bits.
    Integer(i64),
    /// An atom, by name.
    Atom(String),
    /// A 2-tuple of integers, for `{N, Ms}`.
    IntegerPair(i64, i64),
    /// A 2-tuple of an atom and an integer, for `{calls, N}`.
    Tagged(String, i64),
    /// A 3-tuple of integers, for `trees`'s `{SlowerThanNs, Keep, MaxNodes}`.
    IntegerTriple(i64, i64, i64),
    /// Anything else (tuple, list, float, ...), kept only to be refused.
    Other,
}

/// The engine's settings for one session. Every limit has a safe default.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Ring slots per producing thread (rounded up to a power of two).
    pub ring_size: usize,
    /// Functions that get statistics; calls of others are only counted.
    pub max_functions: usize,
    /// Calls waiting for their return, over all processes.
    pub max_open_calls: usize,
    /// The session stops itself after this long; `None` is `infinity`.
    pub duration_ms: Option<u64>,
    /// Events the session takes in all (like recon_trace's integer limit); `None`: no limit.
    pub max_events: Option<u64>,
    /// At most `.0` events per window of `.1` milliseconds (recon_trace's `{N, Ms}`).
    pub max_rate: Option<(u64, u64)>,
    /// Keep the events of 1 process in N (by pid hash), so calls and returns stay paired
    /// (`sample => N`, `{processes, N}`).
    pub sample: u64,
    /// Keep 1 call in N of every process, decided in `enabled_call` (`sample => {calls, N}`;
    /// see `sampling`); changed while the session runs by `session_set_call_sample/2`.
    pub call_sample: u32,
    /// What happens when `max_events` or `max_rate` is reached.
    pub on_limit: OnLimit,
    /// The slow calls kept per function (`slowest`, `threshold`, `max_slow_calls`).
    pub slowest: SlowestConfig,
    /// Events kept by the flight recorder (`recent`); 0: none.
    pub recent: usize,
    /// Copies of arguments and results (`args`, `max_term_bytes`).
    pub args: ArgsConfig,
    /// Latency per call key (`key`, `max_keys`).
    pub keys: KeysConfig,
    /// Aggregators the session's events are split over by pid (`aggregators`; `auto`: one
    /// per four CPUs).
    pub aggregators: usize,
    /// The cost taken out of latencies per inner event (`compensate_call_ns`,
    /// `compensate_return_ns`, set by `calls/2` from the session's calibration); `None`:
    /// latencies as measured.
    pub compensate: Option<Compensation>,
    /// Call trees kept speculatively (`trees => {SlowerThanNs, Keep, MaxNodes}`: calls/2's
    /// `trees => #{...}` as `ferrotrace_trees` gives it the engine); `None`: none.
    pub trees: Option<TreesConfig>,
}

/// The action at a limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnLimit {
    /// The session stops; `enabled` answers `remove`, so the VM unhooks every tracee.
    Stop,
    /// The session goes on counting what it sees, without aggregating the excess.
    Drop,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            ring_size: 32_768,
            max_functions: 1_000,
            max_open_calls: 100_000,
            duration_ms: Some(10_000),
            max_events: None,
            max_rate: None,
            sample: 1,
            call_sample: 1,
            on_limit: OnLimit::Stop,
            slowest: SlowestConfig::default(),
            recent: 0,
            args: ArgsConfig::default(),
            keys: KeysConfig::default(),
            aggregators: auto_count(),
            compensate: None,
            trees: None,
        }
    }
}

/// Every option `parse` takes, for the error that names an unknown one (a test checks that
/// each is parsed). Each is a name users write: `trees` is theirs too, its map given the
/// engine as one tuple, so that no name of the engine's own is listed or taken from them.
const NAMES: [&str; 20] = [
    "duration", "max_events", "max_rate", "sample", "on_limit", "ring_size", "max_functions", "max_open_calls",
    "slowest", "threshold", "max_slow_calls", "recent", "args", "max_term_bytes", "key", "max_keys", "aggregators",
    "compensate_call_ns", "compensate_return_ns", "trees",
];

/// Every option `parse` takes.
pub fn names() -> impl Iterator<Item = &'static str> {
    NAMES.into_iter()
}

/// Accepted `ring_size`, inclusive.
pub const RING_SIZE_RANGE: (i64, i64) = (64, 1 << 24);
/// Accepted `max_functions`, inclusive.
pub const MAX_FUNCTIONS_RANGE: (i64, i64) = (1, 100_000);
/// Accepted `max_open_calls`, inclusive.
pub const MAX_OPEN_CALLS_RANGE: (i64, i64) = (1, 10_000_000);
/// Accepted `max_events`, inclusive.
pub const MAX_EVENTS_RANGE: (i64, i64) = (1, 1 << 48);
/// A rate's count must fit the 24 bits the window word keeps for it.
pub const RATE_COUNT_RANGE: (i64, i64) = (1, (1 << 24) - 1);
/// Accepted `max_rate` window in milliseconds, inclusive.
pub const RATE_WINDOW_RANGE: (i64, i64) = (1, 3_600_000);
// The per-call form takes the same N as the per-process one.
const _: () = assert!(SAMPLE_RANGE.1 == crate::sampling::MAX_CALL_RATE as i64);
/// Accepted `sample`, inclusive.
pub const SAMPLE_RANGE: (i64, i64) = (1, 1_000_000);
/// Accepted `compensate_call_ns` and `compensate_return_ns`, inclusive: up to 1 ms per event.
pub const COMPENSATE_RANGE: (i64, i64) = (0, 1_000_000);
/// Accepted `duration` in milliseconds, inclusive: up to one week; a longer session is a
/// mistake, and `infinity` says so explicitly.
pub const DURATION_RANGE: (i64, i64) = (1, 7 * 24 * 3600 * 1000);

/// Why an option was refused; `index` is its position in the input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OptionError {
    /// The key is not an option.
    Unknown {
        /// Position of the pair in the input.
        index: usize,
    },
    /// The value is out of range or of the wrong type.
    BadValue {
        /// Position of the pair in the input.
        index: usize,
        /// What the option takes, for the error message (written from the range constants).
        expected: String,
    },
}

impl fmt::Display for OptionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OptionError::Unknown { index } => write!(f, "unknown option #{index}"),
            OptionError::BadValue { index, expected } => write!(f, "option #{index}: expected {expected}"),
        }
    }
}

/// "an integer from LOW to HIGH", from a range constant.
fn integers((low, high): (i64, i64)) -> String {
    format!("an integer from {low} to {high}")
}

fn integer_in(value: &OptionValue, (low, high): (i64, i64)) -> Option<i64> {
    match value {
        OptionValue::Integer(i) if (low..=high).contains(i) => Some(*i),
        _ => None,
    }
}

/// Builds a `Config` from `(key, value)` pairs; the first bad pair is reported.
pub fn parse(pairs: &[(String, OptionValue)]) -> Result<Config, OptionError> {
    let mut config = Config::default();
    for (index, (key, value)) in pairs.iter().enumerate() {
        let bad = |expected: String| OptionError::BadValue { index, expected };
        match key.as_str() {
            "ring_size" => {
                config.ring_size = integer_in(value, RING_SIZE_RANGE)
                    .ok_or_else(|| bad(integers(RING_SIZE_RANGE)))? as usize;
            }
            "max_functions" => {
                config.max_functions = integer_in(value, MAX_FUNCTIONS_RANGE)
                    .ok_or_else(|| bad(integers(MAX_FUNCTIONS_RANGE)))? as usize;
            }
            "max_open_calls" => {
                config.max_open_calls = integer_in(value, MAX_OPEN_CALLS_RANGE)
                    .ok_or_else(|| bad(integers(MAX_OPEN_CALLS_RANGE)))? as usize;
            }
            "duration" => {
                config.duration_ms = match value {
                    OptionValue::Atom(a) if a == "infinity" => None,
                    v => Some(integer_in(v, DURATION_RANGE)
                        .ok_or_else(|| bad(format!("milliseconds from {} to {}, or infinity", DURATION_RANGE.0, DURATION_RANGE.1)))? as u64),
                };
            }
            "max_events" => {
                config.max_events = match value {
                    OptionValue::Atom(a) if a == "infinity" => None,
                    v => Some(integer_in(v, MAX_EVENTS_RANGE)
                        .ok_or_else(|| bad(format!("{}, or infinity", integers(MAX_EVENTS_RANGE))))? as u64),
                };
            }
            "max_rate" => {
                config.max_rate = match value {
                    OptionValue::Atom(a) if a == "infinity" => None,
                    OptionValue::IntegerPair(n, ms)
                        if (RATE_COUNT_RANGE.0..=RATE_COUNT_RANGE.1).contains(n)
                            && (RATE_WINDOW_RANGE.0..=RATE_WINDOW_RANGE.1).contains(ms) =>
                    {
                        Some((*n as u64, *ms as u64))
                    }
                    _ => {
                        return Err(bad(format!(
                            "{{N, Ms}} with N from {} to {} and Ms from {} to {}, or infinity",
                            RATE_COUNT_RANGE.0, RATE_COUNT_RANGE.1, RATE_WINDOW_RANGE.0, RATE_WINDOW_RANGE.1
                        )))
                    }
                };
            }
            "sample" => {
                let in_range = |n: &i64| (SAMPLE_RANGE.0..=SAMPLE_RANGE.1).contains(n);
                match value {
                    OptionValue::Tagged(form, n) if form == "calls" && in_range(n) => config.call_sample = *n as u32,
                    OptionValue::Tagged(form, n) if form == "processes" && in_range(n) => config.sample = *n as u64,
                    v => {
                        config.sample = integer_in(v, SAMPLE_RANGE).ok_or_else(|| {
                            bad(format!("{}, {{calls, N}} or {{processes, N}} with N from {} to {}",
                                        integers(SAMPLE_RANGE), SAMPLE_RANGE.0, SAMPLE_RANGE.1))
                        })? as u64
                    }
                }
            }
            "on_limit" => {
                config.on_limit = match value {
                    OptionValue::Atom(a) if a == "stop" => OnLimit::Stop,
                    OptionValue::Atom(a) if a == "drop" => OnLimit::Drop,
                    _ => return Err(bad("stop or drop".into())),
                };
            }
            "slowest" => {
                config.slowest.keep = integer_in(value, KEEP_RANGE).ok_or_else(|| bad(integers(KEEP_RANGE)))? as usize;
            }
            "threshold" => {
                config.slowest.threshold_ns = match value {
                    OptionValue::Atom(a) if a == "infinity" => None,
                    v => Some(integer_in(v, THRESHOLD_RANGE)
                        .ok_or_else(|| bad(format!("nanoseconds, {}, or infinity", integers(THRESHOLD_RANGE))))? as u64),
                };
            }
            "max_slow_calls" => {
                config.slowest.max_slow_calls = integer_in(value, MAX_SLOW_CALLS_RANGE)
                    .ok_or_else(|| bad(integers(MAX_SLOW_CALLS_RANGE)))? as usize;
            }
            "recent" => {
                config.recent = integer_in(value, RECENT_RANGE).ok_or_else(|| bad(integers(RECENT_RANGE)))? as usize;
            }
            "args" => {
                config.args.enabled = match value {
                    OptionValue::Atom(a) if a == "true" => true,
                    OptionValue::Atom(a) if a == "false" => false,
                    _ => return Err(bad("true or false".into())),
                };
            }
            "max_term_bytes" => {
                config.args.max_term_bytes = integer_in(value, MAX_TERM_BYTES_RANGE)
                    .ok_or_else(|| bad(integers(MAX_TERM_BYTES_RANGE)))? as usize;
            }
            "key" => {
                config.keys.source = match value {
                    OptionValue::Atom(a) if a == "none" => KeySource::None,
                    OptionValue::Atom(a) if a == "message" => KeySource::Message,
                    OptionValue::Atom(a) if a == "caller" => KeySource::Caller,
                    _ => return Err(bad("none, message or caller".into())),
                };
            }
            "max_keys" => {
                config.keys.max_keys = integer_in(value, MAX_KEYS_RANGE).ok_or_else(|| bad(integers(MAX_KEYS_RANGE)))? as usize;
            }
            "aggregators" => {
                config.aggregators = match value {
                    OptionValue::Atom(a) if a == "auto" => auto_count(),
                    v => integer_in(v, AGGREGATORS_RANGE)
                        .ok_or_else(|| bad(format!("{}, or auto", integers(AGGREGATORS_RANGE))))? as usize,
                };
            }
            "compensate_call_ns" => {
                let ns = integer_in(value, COMPENSATE_RANGE).ok_or_else(|| bad(integers(COMPENSATE_RANGE)))? as u64;
                config.compensate.get_or_insert_with(Default::default).call_ns = ns;
            }
            "compensate_return_ns" => {
                let ns = integer_in(value, COMPENSATE_RANGE).ok_or_else(|| bad(integers(COMPENSATE_RANGE)))? as u64;
                config.compensate.get_or_insert_with(Default::default).return_ns = ns;
            }
            "trees" => {
                let within = |i: &i64, (low, high): (i64, i64)| (low..=high).contains(i);
                config.trees = match value {
                    OptionValue::IntegerTriple(ns, keep, nodes)
                        if within(ns, trees::SLOWER_THAN_RANGE)
                            && within(keep, trees::KEEP_RANGE)
                            && within(nodes, trees::MAX_NODES_RANGE) =>
                    {
                        Some(TreesConfig { slower_than_ns: *ns as u64, keep: *keep as usize, max_nodes: *nodes as usize })
                    }
                    _ => {
                        return Err(bad(format!(
                            "{{SlowerThanNs, Keep, MaxNodes}}: {}, {}, {}",
                            integers(trees::SLOWER_THAN_RANGE),
                            integers(trees::KEEP_RANGE),
                            integers(trees::MAX_NODES_RANGE)
                        )))
                    }
                };
            }
            _ => return Err(OptionError::Unknown { index }),
        }
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pair(key: &str, value: OptionValue) -> (String, OptionValue) {
        (key.to_string(), value)
    }

    #[test]
    fn every_name_is_an_option() {
        for name in names() {
            let refused = parse(&[pair(name, OptionValue::Other)]);
            assert!(matches!(refused, Err(OptionError::BadValue { .. })), "{name}: {refused:?}");
        }
        assert_eq!(parse(&[pair("duraton", OptionValue::Integer(5))]), Err(OptionError::Unknown { index: 0 }));
    }

    /// `trees` is one option, a tuple `ferrotrace_trees` makes of the user's map; the names
    /// it was once given the engine as are nobody's option, so neither listed nor taken.
    #[test]
    fn trees_is_one_tuple_and_its_parts_are_no_options() {
        let config = parse(&[pair("trees", OptionValue::IntegerTriple(20_000_000, 5, 300))]).unwrap();
        assert_eq!(config.trees, Some(TreesConfig { slower_than_ns: 20_000_000, keep: 5, max_nodes: 300 }));
        assert_eq!(parse(&[]).unwrap().trees, None);
        for bad in [(-1, 5, 300), (0, 0, 300), (0, 101, 300), (0, 5, 0), (0, 5, 100_001)] {
            let value = OptionValue::IntegerTriple(bad.0, bad.1, bad.2);
            assert!(matches!(parse(&[pair("trees", value)]), Err(OptionError::BadValue { index: 0, .. })), "{bad:?}");
        }
        for internal in ["trees_slower_than", "trees_keep", "trees_max_nodes", "trees_root"] {
            assert!(names().all(|name| name != internal), "{internal} listed");
            assert_eq!(parse(&[pair(internal, OptionValue::Integer(5))]), Err(OptionError::Unknown { index: 0 }), "{internal}");
        }
    }

    #[test]
    fn slow_calls_recorder_and_copies() {
        let config = parse(&[
            pair("slowest", OptionValue::Integer(3)),
            pair("threshold", OptionValue::Integer(1_000_000)),
            pair("max_slow_calls", OptionValue::Integer(7)),
            pair("recent", OptionValue::Integer(50)),
            pair("args", OptionValue::Atom("true".into())),
            pair("max_term_bytes", OptionValue::Integer(4096)),
        ])
        .unwrap();
        assert_eq!((config.slowest.keep, config.slowest.threshold_ns, config.slowest.max_slow_calls), (3, Some(1_000_000), 7));
        assert_eq!((config.recent, config.args), (50, ArgsConfig { enabled: true, max_term_bytes: 4096 }));
        let config = parse(&[pair("key", OptionValue::Atom("message".into())), pair("max_keys", OptionValue::Integer(20))]).unwrap();
        assert_eq!(config.keys, KeysConfig { source: KeySource::Message, max_keys: 20 });
        assert_eq!(parse(&[pair("key", OptionValue::Atom("caller".into()))]).unwrap().keys.source, KeySource::Caller);
        assert_eq!(parse(&[pair("aggregators", OptionValue::Integer(3))]).unwrap().aggregators, 3);
        assert_eq!(parse(&[pair("aggregators", OptionValue::Atom("auto".into()))]).unwrap().aggregators, auto_count());
        assert_eq!(
            parse(&[pair("aggregators", OptionValue::Integer(17))]),
            Err(OptionError::BadValue { index: 0, expected: "an integer from 1 to 16, or auto".into() })
        );
        let config = parse(&[pair("threshold", OptionValue::Atom("infinity".into()))]).unwrap();
        assert_eq!(config.slowest.threshold_ns, None);
        let refused = |key: &str, value: OptionValue| parse(&[pair("recent", OptionValue::Integer(1)), pair(key, value)]);
        assert_eq!(
            refused("slowest", OptionValue::Integer(-1)),
            Err(OptionError::BadValue { index: 1, expected: "an integer from 0 to 1000".into() })
        );
        assert_eq!(
            refused("max_term_bytes", OptionValue::Integer(10)),
            Err(OptionError::BadValue { index: 1, expected: "an integer from 64 to 65536".into() })
        );
        for (key, value) in [
            ("max_slow_calls", OptionValue::Integer(0)),
            ("threshold", OptionValue::Other),
            ("recent", OptionValue::Integer(-1)),
            ("recent", OptionValue::Atom("all".into())),
            ("args", OptionValue::Integer(1)),
            ("key", OptionValue::Atom("args".into())),
            ("max_keys", OptionValue::Integer(0)),
        ] {
            assert!(matches!(refused(key, value), Err(OptionError::BadValue { index: 1, .. })), "{key}");
        }
    }

    #[test]
    fn defaults_are_bounded() {
        let config = parse(&[]).unwrap();
        assert_eq!(config, Config::default());
        assert!(config.duration_ms.is_some(), "a session stops by itself by default");
    }

    #[test]
    fn accepts_valid_values() {
        let config = parse(&[
            pair("ring_size", OptionValue::Integer(1024)),
            pair("duration", OptionValue::Atom("infinity".into())),
            pair("max_functions", OptionValue::Integer(5)),
        ])
        .unwrap();
        assert_eq!((config.ring_size, config.duration_ms, config.max_functions), (1024, None, 5));
    }

    #[test]
    fn names_the_bad_option() {
        assert_eq!(
            parse(&[pair("duration", OptionValue::Integer(5)), pair("ring_size", OptionValue::Integer(3))]),
            Err(OptionError::BadValue { index: 1, expected: "an integer from 64 to 16777216".into() })
        );
        // Every message is written from its range constant.
        let expected = |key: &str, value| match parse(&[pair(key, value)]) {
            Err(OptionError::BadValue { expected, .. }) => expected,
            other => panic!("{key}: {other:?}"),
        };
        assert_eq!(expected("sample", OptionValue::Integer(0)),
                   format!("an integer from 1 to {0}, {{calls, N}} or {{processes, N}} with N from 1 to {0}", SAMPLE_RANGE.1));
        assert!(expected("duration", OptionValue::Other).contains(&DURATION_RANGE.1.to_string()));
        assert!(expected("max_rate", OptionValue::Other).contains(&RATE_COUNT_RANGE.1.to_string()));
        assert!(expected("max_events", OptionValue::Other).contains(&MAX_EVENTS_RANGE.1.to_string()));
        assert_eq!(parse(&[pair("color", OptionValue::Integer(1))]), Err(OptionError::Unknown { index: 0 }));
        assert!(parse(&[pair("duration", OptionValue::Atom("forever".into()))]).is_err());
        assert!(parse(&[pair("duration", OptionValue::Other)]).is_err());
        assert!(parse(&[pair("duration", OptionValue::Integer(0))]).is_err());
    }

    #[test]
    fn sample_by_process_or_by_call() {
        let sample = |value| parse(&[pair("sample", value)]).map(|c| (c.sample, c.call_sample));
        assert_eq!(sample(OptionValue::Integer(4)), Ok((4, 1)));
        assert_eq!(sample(OptionValue::Tagged("processes".into(), 4)), Ok((4, 1)));
        assert_eq!(sample(OptionValue::Tagged("calls".into(), 10)), Ok((1, 10)));
        assert_eq!(sample(OptionValue::Tagged("calls".into(), SAMPLE_RANGE.1)), Ok((1, SAMPLE_RANGE.1 as u32)));
        for bad in [OptionValue::Tagged("calls".into(), 0), OptionValue::Tagged("calls".into(), SAMPLE_RANGE.1 + 1),
                    OptionValue::Tagged("process".into(), 4), OptionValue::IntegerPair(1, 10)] {
            assert!(sample(bad.clone()).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn limits() {
        let config = parse(&[
            pair("max_events", OptionValue::Integer(100)),
            pair("max_rate", OptionValue::IntegerPair(10, 1000)),
            pair("sample", OptionValue::Integer(4)),
            pair("on_limit", OptionValue::Atom("drop".into())),
        ])
        .unwrap();
        assert_eq!(config.max_events, Some(100));
        assert_eq!(config.max_rate, Some((10, 1000)));
        assert_eq!((config.sample, config.on_limit), (4, OnLimit::Drop));
        for (key, value) in [
            ("max_events", OptionValue::Integer(0)),
            ("max_rate", OptionValue::IntegerPair(0, 10)),
            ("max_rate", OptionValue::IntegerPair(10, 0)),
            ("max_rate", OptionValue::IntegerPair(1 << 24, 10)),
            ("max_rate", OptionValue::Integer(10)),
            ("sample", OptionValue::Integer(0)),
            ("on_limit", OptionValue::Atom("explode".into())),
        ] {
            assert!(matches!(parse(&[pair(key, value.clone())]), Err(OptionError::BadValue { index: 0, .. })),
                    "{key} {value:?} must be refused");
        }
    }

    fn any_value() -> impl Strategy<Value = OptionValue> {
        prop_oneof![
            (any::<i64>(), any::<i64>()).prop_map(|(n, ms)| OptionValue::IntegerPair(n, ms)),
            (-5i64..100, -5i64..5000).prop_map(|(n, ms)| OptionValue::IntegerPair(n, ms)),
            (-5i64..100, -5i64..200, -5i64..200).prop_map(|(a, b, c)| OptionValue::IntegerTriple(a, b, c)),
            any::<i64>().prop_map(OptionValue::Integer),
            (-10i64..100_000).prop_map(OptionValue::Integer),
            "[a-z]{0,9}".prop_map(OptionValue::Atom),
            Just(OptionValue::Atom("infinity".into())),
            Just(OptionValue::Other),
        ]
    }

    proptest! {
        /// Whatever the input, the parser either refuses it or yields a config within bounds.
        #[test]
        fn accepted_configs_are_within_bounds(pairs in prop::collection::vec(
            (prop_oneof![Just("ring_size"), Just("max_functions"), Just("max_open_calls"),
                         Just("duration"), Just("max_events"), Just("max_rate"), Just("sample"),
                         Just("on_limit"), Just("bogus")].prop_map(String::from), any_value()), 0..8)) {
            match parse(&pairs) {
                Ok(c) => {
                    prop_assert!(c.ring_size >= 64 && c.ring_size <= 1 << 24);
                    prop_assert!(c.max_functions >= 1 && c.max_functions <= 100_000);
                    prop_assert!(c.max_open_calls >= 1);
                    prop_assert!(c.duration_ms.is_none_or(|d| d >= 1));
                    prop_assert!(c.max_events.is_none_or(|n| n >= 1));
                    prop_assert!(c.max_rate.is_none_or(|(n, ms)| (1..1 << 24).contains(&n) && ms >= 1));
                    prop_assert!(c.sample >= 1);
                    prop_assert!(pairs.iter().all(|(k, _)| k != "bogus"));
                }
                Err(OptionError::Unknown { index }) | Err(OptionError::BadValue { index, .. }) => {
                    prop_assert!(index < pairs.len());
                }
            }
        }
    }
}
