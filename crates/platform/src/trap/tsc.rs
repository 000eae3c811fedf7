//! The TSC application code reads in a stub: the host's own, since it runs
//! on the host CPU. The sandbox's clock page can use it when it ticks at a
//! constant rate on every CPU (an invariant TSC); its rate comes from CPUID
//! where the CPU states it, else from a measurement against the host's
//! CLOCK_MONOTONIC_RAW.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::arch::read_tsc;

/// How long the rate is measured over at the least. The sandbox's clock
/// measures it again over a longer baseline once running, so this only has
/// to be close: a read uncertain by a microsecond makes it off by 1000 ppm
/// at worst, which the clock's first corrections absorb.
const MIN_CALIBRATION: Duration = Duration::from_millis(1);

/// Reads taken at each end of the measurement; the tightest is kept.
const TRIES: usize = 5;

/// The TSC and CLOCK_MONOTONIC_RAW read together.
#[derive(Clone, Copy, Debug)]
struct Sample {
    /// TSC at the middle of the clock read.
    tsc: u64,
    /// Ticks the clock read took: how uncertain `tsc` is.
    spread: u64,
    raw_ns: i64,
}

fn sample() -> Sample {
    (0..TRIES)
        .map(|_| {
            let before = read_tsc();
            let t = rustix::time::clock_gettime(rustix::time::ClockId::MonotonicRaw);
            let after = read_tsc();
            Sample {
                tsc: before + (after - before) / 2,
                spread: after - before,
                raw_ns: t.tv_sec * 1_000_000_000 + t.tv_nsec,
            }
        })
        .min_by_key(|s| s.spread)
        .expect("at least one try")
}

/// True if the CPU says its TSC is invariant (CPUID 0x80000007 EDX bit 8).
fn invariant() -> bool {
    const ADVANCED_POWER: u32 = 0x8000_0007;
    const INVARIANT_TSC: u32 = 1 << 8;
    std::arch::x86_64::__cpuid(0x8000_0000).eax >= ADVANCED_POWER
        && std::arch::x86_64::__cpuid(ADVANCED_POWER).edx & INVARIANT_TSC != 0
}

/// The TSC's rate as CPUID leaf 0x15 states it (crystal frequency times
/// the TSC/crystal ratio), where the CPU fills in all three.
fn stated_khz() -> Option<u64> {
    const TSC_LEAF: u32 = 0x15;
    if std::arch::x86_64::__cpuid(0).eax < TSC_LEAF {
        return None;
    }
    let l = std::arch::x86_64::__cpuid(TSC_LEAF);
    let (denominator, numerator, crystal_hz) = (l.eax as u64, l.ebx as u64, l.ecx as u64);
    (denominator != 0 && numerator != 0 && crystal_hz != 0).then(|| crystal_hz * numerator / denominator / 1000)
}

/// The host TSC's rate, found once per process.
pub(super) struct HostTsc {
    /// Taken when the platform starts, so that by the time the rate is
    /// first asked for most of the measurement has already elapsed.
    start: Option<(Sample, Instant)>,
    khz: OnceLock<Option<u64>>,
}

impl HostTsc {
    pub(super) fn new() -> HostTsc {
        let start = (invariant() && stated_khz().is_none()).then(|| (sample(), Instant::now()));
        HostTsc { start, khz: OnceLock::new() }
    }

    /// The rate in kHz, or `None` if the host's TSC is not invariant.
    pub(super) fn khz(&self) -> Option<u64> {
        *self.khz.get_or_init(|| {
            if !invariant() {
                return None;
            }
            if let Some(khz) = stated_khz() {
                return Some(khz);
            }
            let (first, at) = self.start?;
            let wait = MIN_CALIBRATION.saturating_sub(at.elapsed());
            if !wait.is_zero() {
                std::thread::sleep(wait);
            }
            let last = sample();
            let ns = last.raw_ns - first.raw_ns;
            let ticks = last.tsc.checked_sub(first.tsc)?;
            let khz = (ns > 0).then(|| (ticks as u128 * 1_000_000 / ns as u128) as u64)?;
            (khz > 0).then_some(khz)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_measured_rate_matches_the_tsc_over_a_longer_run() {
        let tsc = HostTsc::new();
        let Some(khz) = tsc.khz() else {
            eprintln!("skipping: the host's TSC is not invariant");
            return;
        };
        // Measured again over 50 ms, the rate agrees within 1%: a bound
        // far beyond any read's uncertainty, so a loaded host cannot break it.
        let a = sample();
        std::thread::sleep(Duration::from_millis(50));
        let b = sample();
        let again = ((b.tsc - a.tsc) as u128 * 1_000_000 / (b.raw_ns - a.raw_ns) as u128) as u64;
        assert!(khz.abs_diff(again) * 100 <= again, "{khz} kHz at start, {again} kHz over 50 ms");
    }
}
