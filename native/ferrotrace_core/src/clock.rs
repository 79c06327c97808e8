//! The monotonic clock used for event timestamps.

use std::sync::OnceLock;
use std::time::Instant;

static EPOCH: OnceLock<Instant> = OnceLock::new();

/// Nanoseconds since the library's first use of the clock; monotonic across all threads.
#[inline]
pub fn now_ns() -> u64 {
    let epoch = EPOCH.get_or_init(Instant::now);
    Instant::now().saturating_duration_since(*epoch).as_nanos() as u64
}

/// Wall-clock nanoseconds, used only to salt ids per load of the library.
pub fn wall_nanos() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() as u64 ^ d.as_secs())
}
