//! The clock used for event timestamps: the CPU's time-stamp counter where the kernel trusts
//! it (its clocksource is `tsc`, so the counter is invariant and synchronised across cores),
//! otherwise `CLOCK_MONOTONIC` through `Instant`.
//!
//! Reading the TSC with `rdtscp` costs a few nanoseconds against about twenty for
//! `clock_gettime`, and the hot path reads the clock once per event. Timestamps are kept in
//! ticks; the collector converts them to nanoseconds with a rate calibrated against
//! `Instant` when the clock is first used.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How ticks are read and converted.
struct Clock {
    epoch: Instant,
    /// Some((first tick, nanoseconds per tick)) when the TSC is used.
    tsc: Option<(u64, f64)>,
}

static CLOCK: OnceLock<Clock> = OnceLock::new();

#[cfg(target_arch = "x86_64")]
#[inline]
fn rdtscp() -> u64 {
    let mut aux = 0u32;
    // SAFETY: only called after `tsc_usable` saw the rdtscp flag (or in `calibrate`, behind
    // the same check). rdtscp waits until earlier instructions have executed, so a timestamp
    // is never taken before the code that precedes it; it does not keep later instructions
    // from starting early (see `now_ordered`).
    unsafe { std::arch::x86_64::__rdtscp(&mut aux) }
}

#[cfg(target_arch = "x86_64")]
fn tsc_usable() -> bool {
    let clocksource = std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource");
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let flags = cpuinfo.lines().find(|l| l.starts_with("flags")).unwrap_or("");
    let has = |flag: &str| flags.split_whitespace().any(|f| f == flag);
    clocksource.is_ok_and(|s| s.trim() == "tsc") && has("rdtscp") && has("constant_tsc") && has("nonstop_tsc")
}

#[cfg(target_arch = "x86_64")]
fn calibrate() -> Option<(u64, f64)> {
    // Miri cannot run `rdtscp`: under Miri the clock is `Instant`, the fallback path.
    if cfg!(miri) || std::env::var_os("FERROTRACE_NO_TSC").is_some() || !tsc_usable() {
        return None;
    }
    let (start, start_ticks) = (Instant::now(), rdtscp());
    while start.elapsed() < Duration::from_millis(2) {
        std::hint::spin_loop();
    }
    let (elapsed, ticks) = (start.elapsed(), rdtscp() - start_ticks);
    (ticks > 0).then(|| (start_ticks, elapsed.as_nanos() as f64 / ticks as f64))
}

#[cfg(not(target_arch = "x86_64"))]
fn calibrate() -> Option<(u64, f64)> {
    None
}

#[inline]
fn clock() -> &'static Clock {
    CLOCK.get_or_init(|| Clock { epoch: Instant::now(), tsc: calibrate() })
}

/// Sets the clock up (a 2 ms calibration); later calls are free. Called at library load.
pub fn init() {
    let _ = clock();
}

/// The current time in ticks: monotonic, comparable across threads.
#[inline]
pub fn now() -> u64 {
    let clock = clock();
    #[cfg(target_arch = "x86_64")]
    if clock.tsc.is_some() {
        return rdtscp();
    }
    Instant::now().saturating_duration_since(clock.epoch).as_nanos() as u64
}

/// As [`now`], and no later load executes before the time is read: `rdtscp` then `lfence`
/// (Intel SDM, RDTSCP: "if software requires RDTSCP to be executed prior to execution of any
/// subsequent instruction, it can execute LFENCE immediately after"). The collector reads its
/// cutoff with it, so the grace period's loads that follow observe memory no earlier than the
/// cutoff (see `collector`). Without the TSC, `Instant::now` reads the kernel's vDSO clock,
/// whose own TSC read is ordered (`rdtsc_ordered`), followed here by a SeqCst fence.
#[inline]
pub fn now_ordered() -> u64 {
    let clock = clock();
    #[cfg(target_arch = "x86_64")]
    if clock.tsc.is_some() {
        let ticks = rdtscp();
        // SAFETY: lfence is in SSE2, part of the x86_64 baseline; it has no memory effects
        // besides ordering.
        unsafe { std::arch::x86_64::_mm_lfence() };
        return ticks;
    }
    let ticks = Instant::now().saturating_duration_since(clock.epoch).as_nanos() as u64;
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    ticks
}

/// Nanoseconds since the clock's epoch for a tick value from `now`.
#[inline]
pub fn to_ns(ticks: u64) -> u64 {
    match clock().tsc {
        Some((first, ns_per_tick)) => (ticks.saturating_sub(first) as f64 * ns_per_tick) as u64,
        None => ticks,
    }
}

/// Nanoseconds in a span of `ticks` (a difference of two `now` values).
pub fn ticks_to_ns(ticks: u64) -> u64 {
    match clock().tsc {
        Some((_, ns_per_tick)) => (ticks as f64 * ns_per_tick) as u64,
        None => ticks,
    }
}

/// Ticks in a span of `ns` nanoseconds.
pub fn ns_to_ticks(ns: u64) -> u64 {
    match clock().tsc {
        Some((_, ns_per_tick)) => (ns as f64 / ns_per_tick) as u64,
        None => ns,
    }
}

/// CPU time used by the calling thread, nanoseconds (`CLOCK_THREAD_CPUTIME_ID`); 0 if the
/// clock cannot be read.
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; the call writes only it.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore = "timing: Miri's clocks are not real time; thread CPU time is unsupported")]
    fn ticks_convert_to_elapsed_nanoseconds() {
        init();
        let (start, t0) = (Instant::now(), now());
        std::thread::sleep(Duration::from_millis(50));
        let (t1, elapsed) = (now(), start.elapsed().as_nanos() as u64);
        let measured = to_ns(t1) - to_ns(t0);
        // Within 2% (the conversion is calibrated over 2 ms; reads are not simultaneous).
        assert!(measured.abs_diff(elapsed) < elapsed / 50, "{measured} vs {elapsed}");
        assert!(ns_to_ticks(1_000_000_000) > 0);
    }

    #[test]
    #[cfg_attr(miri, ignore = "timing: Miri's clocks are not real time; thread CPU time is unsupported")]
    fn thread_cpu_time_counts_this_threads_work() {
        let before = thread_cpu_ns();
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(20) {
            std::hint::spin_loop();
        }
        assert!(thread_cpu_ns() > before, "a busy thread uses CPU time");
        let earlier = now();
        assert!(now_ordered() >= earlier, "the ordered read is on the same clock");
    }

    #[test]
    fn monotonic_across_threads() {
        let before = now();
        let after = std::thread::spawn(now).join().unwrap();
        assert!(after >= before);
    }
}
