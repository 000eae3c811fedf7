//! The sandbox's clocks: CLOCK_MONOTONIC, CLOCK_REALTIME and CLOCK_BOOTTIME
//! as a linear function of the TSC, kept close to the host's clocks and
//! published on the time page the vDSO reads. The clock syscalls answer from
//! the same function, so a program that mixes vDSO reads and syscalls never
//! sees time go backwards.
//!
//! The function only moves forward: every update starts where the previous
//! one had got to, and closes the gap to the host's clock by changing the
//! slope (by at most 500 ppm, NTP's slew limit) rather than by jumping.

use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering, fence};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use memory::{Frame, MemoryError, MemoryFile};
use platform::Platform;
use platform::arch::read_tsc;
use rustix::time::{ClockId, clock_gettime};

/// The time page as the vDSO reads it (`struct cordon_time_page` in
/// `arch/x86_64/vdso/vdso.c`).
#[repr(C)]
pub(super) struct TimePage {
    /// Odd while an update is being written.
    seq: AtomicU32,
    /// Zero tells the vDSO to make the syscall instead.
    usable: AtomicU32,
    tsc_base: AtomicU64,
    mult: AtomicU64,
    shift: AtomicU32,
    /// Nonzero: `rdtscp` gives the CPU number in TSC_AUX, and the vDSO
    /// answers getcpu from it...
    cpu_in_tsc_aux: AtomicU32,
    mono_base: AtomicI64,
    real_offset: AtomicI64,
    boot_offset: AtomicI64,
    /// ...modulo the CPUs the sandbox says it has.
    cpus: AtomicU32,
    _pad: u32,
}

/// Fixed-point shift of `mult`.
const SHIFT: u32 = 32;
/// How often the parameters are brought back to the host's clock.
const UPDATE_PERIOD: Duration = Duration::from_millis(250);
/// Largest slope correction, in parts per million.
const MAX_SLEW_PPM: i128 = 500;
/// Further behind the host's clock than this (a host suspend, say), the
/// clock steps forward instead of catching up slowly.
const MAX_LAG_NS: i64 = 20_000_000;
/// Measuring the TSC's rate against the host's clock takes at least this
/// long a baseline; until then the rate KVM reports is used.
const MIN_BASELINE_NS: i64 = 100_000_000;

/// The clocks the sandbox keeps itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockKind {
    Monotonic,
    Realtime,
    Boottime,
}

/// The function from TSC to time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Params {
    tsc_base: u64,
    /// Nanoseconds per tick, times 2^SHIFT.
    mult: u64,
    mono_base: i64,
    real_offset: i64,
    boot_offset: i64,
    usable: bool,
}

impl Params {
    fn mono_at(&self, tsc: u64) -> i64 {
        let ticks = tsc.saturating_sub(self.tsc_base) as u128;
        self.mono_base + ((ticks * self.mult as u128) >> SHIFT) as i64
    }

    fn at(&self, kind: ClockKind, tsc: u64) -> i64 {
        let mono = self.mono_at(tsc);
        match kind {
            ClockKind::Monotonic => mono,
            ClockKind::Realtime => mono + self.real_offset,
            ClockKind::Boottime => mono + self.boot_offset,
        }
    }
}

/// The host's clocks and the TSC read together.
#[derive(Clone, Copy, Debug)]
struct Sample {
    tsc: u64,
    mono: i64,
    real: i64,
    boot: i64,
}

fn ns(t: rustix::time::Timespec) -> i64 {
    t.tv_sec * 1_000_000_000 + t.tv_nsec
}

fn sample() -> Sample {
    let before = read_tsc();
    let mono = ns(clock_gettime(ClockId::Monotonic));
    let real = ns(clock_gettime(ClockId::Realtime));
    let boot = ns(clock_gettime(ClockId::Boottime));
    let after = read_tsc();
    Sample { tsc: before + (after - before) / 2, mono, real, boot }
}

/// `mult` for a TSC ticking at `khz`.
fn mult_for_khz(khz: u64) -> u64 {
    ((1_000_000u128 << SHIFT) / khz as u128) as u64
}

/// Parameters that continue `cur` from `s.tsc` on at `rate_mult`, bent to
/// meet the host's clock `period_ticks` later.
fn next_params(cur: &Params, s: &Sample, rate_mult: u64, period_ticks: u64) -> Params {
    let here = cur.mono_at(s.tsc);
    let behind = s.mono - here;
    let (mono_base, behind) = if behind > MAX_LAG_NS { (s.mono, 0) } else { (here, behind) };
    let correction = ((behind as i128) << SHIFT) / period_ticks.max(1) as i128;
    let limit = rate_mult as i128 * MAX_SLEW_PPM / 1_000_000;
    let mult = (rate_mult as i128 + correction.clamp(-limit, limit)).max(1) as u64;
    Params {
        tsc_base: s.tsc,
        mult,
        mono_base,
        real_offset: s.real - s.mono,
        boot_offset: s.boot - s.mono,
        usable: cur.usable,
    }
}

struct State {
    /// The first sample, the baseline of the rate measurement.
    first: Sample,
    params: Params,
    stop: bool,
}

/// The sandbox's clock and its time page.
pub struct Clock {
    mf: Arc<MemoryFile>,
    frame: Frame,
    platform: Arc<dyn Platform>,
    /// The host keeps its own time with the TSC, so the TSC is synchronized
    /// across its CPUs and runs at a steady rate.
    host_uses_tsc: bool,
    state: Mutex<State>,
    wake: Condvar,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Clock {
    /// The clock of a sandbox whose programs are told they have `cpus`
    /// CPUs.
    pub fn new(mf: Arc<MemoryFile>, platform: Arc<dyn Platform>, cpus: u32) -> Result<Arc<Clock>, MemoryError> {
        let frame = mf.allocate()?;
        let host_uses_tsc = std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .is_ok_and(|s| s.trim() == "tsc");
        let s = sample();
        let khz = platform.guest_tsc_khz().filter(|_| host_uses_tsc);
        let params = Params {
            tsc_base: s.tsc,
            mult: khz.map(mult_for_khz).unwrap_or(0),
            mono_base: s.mono,
            real_offset: s.real - s.mono,
            boot_offset: s.boot - s.mono,
            usable: khz.is_some(),
        };
        let clock = Arc::new(Clock {
            mf,
            frame,
            platform,
            host_uses_tsc,
            state: Mutex::new(State { first: s, params, stop: false }),
            wake: Condvar::new(),
            thread: Mutex::new(None),
        });
        clock.publish(&params);
        clock.page().cpus.store(cpus.max(1), Ordering::Relaxed);
        let cpu_in_tsc_aux = clock.platform.cpu_number_in_tsc_aux();
        clock.page().cpu_in_tsc_aux.store(cpu_in_tsc_aux as u32, Ordering::Release);
        Ok(clock)
    }

    /// The frame holding the time page.
    pub fn frame(&self) -> Frame {
        self.frame
    }

    /// True while the vDSO answers from the time page.
    pub fn usable(&self) -> bool {
        self.state.lock().unwrap().params.usable
    }

    /// The time on `kind` in nanoseconds, as the vDSO would answer now;
    /// `None` when the time page is not in use (ask the host instead).
    pub fn now(&self, kind: ClockKind) -> Option<i64> {
        let st = self.state.lock().unwrap();
        st.params.usable.then(|| st.params.at(kind, read_tsc()))
    }

    /// Starts the thread that keeps the parameters close to the host's
    /// clocks.
    pub fn start(self: &Arc<Self>) {
        if !self.usable() {
            return;
        }
        let me = self.clone();
        let h =
            std::thread::Builder::new().name("clock".into()).spawn(move || me.serve()).expect("spawn the clock thread");
        *self.thread.lock().unwrap() = Some(h);
    }

    /// Stops the update thread.
    pub fn stop(&self) {
        self.state.lock().unwrap().stop = true;
        self.wake.notify_all();
        if let Some(h) = self.thread.lock().unwrap().take() {
            let _ = h.join();
        }
    }

    fn serve(&self) {
        let mut st = self.state.lock().unwrap();
        loop {
            st = self.wake.wait_timeout(st, UPDATE_PERIOD).unwrap().0;
            if st.stop {
                return;
            }
            self.update(&mut st);
        }
    }

    fn update(&self, st: &mut State) {
        let Some(khz) = self.platform.guest_tsc_khz().filter(|_| self.host_uses_tsc) else {
            if st.params.usable {
                st.params.usable = false;
                self.publish(&st.params);
            }
            return;
        };
        let s = sample();
        let baseline = s.mono - st.first.mono;
        let rate = if baseline >= MIN_BASELINE_NS && s.tsc > st.first.tsc {
            (((baseline as u128) << SHIFT) / (s.tsc - st.first.tsc) as u128) as u64
        } else {
            mult_for_khz(khz)
        };
        let period_ticks = UPDATE_PERIOD.as_nanos() as u64 * khz / 1_000_000;
        st.params = next_params(&st.params, &s, rate, period_ticks);
        self.publish(&st.params);
    }

    fn page(&self) -> &TimePage {
        // SAFETY: the frame is allocated to this clock for its whole life,
        // page-aligned and larger than TimePage; every field is an atomic
        // (or padding), so the vDSO reading it concurrently is no data race.
        unsafe { &*(self.mf.frame_ptr(self.frame) as *const TimePage) }
    }

    /// Writes `p` under the page's sequence counter.
    fn publish(&self, p: &Params) {
        let page = self.page();
        let seq = page.seq.load(Ordering::Relaxed);
        page.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        page.tsc_base.store(p.tsc_base, Ordering::Relaxed);
        page.mult.store(p.mult, Ordering::Relaxed);
        page.shift.store(SHIFT, Ordering::Relaxed);
        page.mono_base.store(p.mono_base, Ordering::Relaxed);
        page.real_offset.store(p.real_offset, Ordering::Relaxed);
        page.boot_offset.store(p.boot_offset, Ordering::Relaxed);
        page.usable.store(p.usable as u32, Ordering::Relaxed);
        page.seq.store(seq.wrapping_add(2), Ordering::Release);
    }
}

impl Drop for Clock {
    fn drop(&mut self) {
        self.mf.dec_ref(self.frame);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::offset_of;

    #[test]
    fn time_page_layout_matches_the_vdso() {
        assert_eq!(offset_of!(TimePage, seq), 0);
        assert_eq!(offset_of!(TimePage, usable), 4);
        assert_eq!(offset_of!(TimePage, tsc_base), 8);
        assert_eq!(offset_of!(TimePage, mult), 16);
        assert_eq!(offset_of!(TimePage, shift), 24);
        assert_eq!(offset_of!(TimePage, mono_base), 32);
        assert_eq!(offset_of!(TimePage, real_offset), 40);
        assert_eq!(offset_of!(TimePage, boot_offset), 48);
    }

    fn params(mult: u64) -> Params {
        Params { tsc_base: 1000, mult, mono_base: 5_000, real_offset: 7, boot_offset: 3, usable: true }
    }

    #[test]
    fn clocks_advance_at_the_tsc_rate() {
        let p = params(mult_for_khz(2_000_000));
        assert_eq!(p.at(ClockKind::Monotonic, 1000), 5_000);
        assert_eq!(p.at(ClockKind::Monotonic, 3000), 6_000, "2000 ticks at 2 GHz is 1 us");
        assert_eq!(p.at(ClockKind::Realtime, 3000), 6_007);
        assert_eq!(p.at(ClockKind::Boottime, 3000), 6_003);
        assert_eq!(p.at(ClockKind::Monotonic, 10), 5_000, "a TSC below the base reads as the base");
    }

    #[test]
    fn updates_continue_the_clock_and_bend_toward_the_host() {
        let rate = mult_for_khz(2_000_000);
        let cur = params(rate);
        let period = 500_000_000; // 250 ms at 2 GHz
        // The host is 1 us ahead of us at tsc 2_000_000_000.
        let at = 2_000_000_000;
        let here = cur.mono_at(at);
        let s = Sample { tsc: at, mono: here + 1_000, real: here + 1_000 + 50, boot: here + 1_000 + 9 };
        let next = next_params(&cur, &s, rate, period);
        assert_eq!(next.mono_at(at), here, "no jump at the update");
        assert!(next.mult > rate, "we speed up to catch up");
        let later = next.mono_at(at + period);
        let host_later = s.mono + 250_000_000;
        assert!((later - host_later).abs() <= 1, "caught up one period later: {later} vs {host_later}");
        assert_eq!(next.real_offset, 50);
        assert_eq!(next.boot_offset, 9);
    }

    #[test]
    fn a_clock_ahead_of_the_host_slows_but_never_goes_back() {
        let rate = mult_for_khz(2_000_000);
        let cur = params(rate);
        let at = 4_000_000_000;
        let here = cur.mono_at(at);
        let s = Sample { tsc: at, mono: here - 10_000_000, real: 0, boot: 0 };
        let next = next_params(&cur, &s, rate, 500_000_000);
        assert_eq!(next.mono_at(at), here);
        assert!(next.mult < rate);
        assert!(next.mult as i128 >= rate as i128 * (1_000_000 - MAX_SLEW_PPM) / 1_000_000, "slew limited");
        assert!(next.mono_at(at + 1) >= here);
    }

    #[test]
    fn far_behind_steps_forward() {
        let rate = mult_for_khz(2_000_000);
        let cur = params(rate);
        let at = 2_000_000;
        let s = Sample { tsc: at, mono: cur.mono_at(at) + 5_000_000_000, real: 0, boot: 0 };
        let next = next_params(&cur, &s, rate, 500_000_000);
        assert_eq!(next.mono_at(at), s.mono);
        assert_eq!(next.mult, rate);
    }

    #[test]
    fn sampling_reads_consistent_host_clocks() {
        let a = sample();
        let b = sample();
        assert!(b.tsc >= a.tsc && b.mono >= a.mono);
        assert!(a.boot >= a.mono);
    }
}
