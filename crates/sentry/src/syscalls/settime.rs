//! Setting the clocks: clock_settime, settimeofday, adjtimex and
//! clock_adjtime. The sandbox's clocks are the host's, which it does not
//! own: every change is refused with EPERM, as a container without
//! CAP_SYS_TIME (not in the default set) sees, and on purpose even with
//! it. Reading the kernel clock's state (adjtimex with no modes) answers
//! the host's, as captured when the sandbox started.

use std::sync::OnceLock;

use linux_raw_sys::general as g;

use super::{SysError, SysResult};
use crate::errno::Errno;
use crate::task::Task;
use crate::vdso::ClockKind;

/// struct timex on x86_64, and the offsets of the fields the sentry reads
/// or writes.
const TIMEX_SIZE: usize = 208;
const TIMEX_STATUS: usize = 40;
const TIMEX_OFFSET: usize = 8;
const TIMEX_TIME_SEC: usize = 72;
const TIMEX_TIME_USEC: usize = 80;
const TIMEX_TICK: usize = 88;

const ADJ_OFFSET_SINGLESHOT: u32 = 0x0001;
const ADJ_OFFSET_READONLY: u32 = 0x2000;
const ADJ_ADJTIME: u32 = 0x8000;
const STA_NANO: i32 = 0x2000;
const STA_UNSYNC: i32 = 0x0040;
const TIME_ERROR: i64 = 5;

/// The host kernel clock's state (adjtimex with no modes) and the value
/// it returned, captured before the sentry's confinement forbids asking.
static HOST_CLOCK_STATE: OnceLock<([u8; TIMEX_SIZE], i64)> = OnceLock::new();

/// Captures the host's clock state for adjtimex to report; called once at
/// start-up, before the sentry is confined.
pub fn capture_host_clock_state() {
    HOST_CLOCK_STATE.get_or_init(|| {
        // SAFETY: an all-zero timex is valid, and modes 0 only reads.
        let mut t: libc::timex = unsafe { std::mem::zeroed() };
        // SAFETY: `t` is a valid, exclusive timex for the call to fill.
        let r = unsafe { libc::adjtimex(&mut t) };
        let mut bytes = [0u8; TIMEX_SIZE];
        let n = std::mem::size_of::<libc::timex>().min(TIMEX_SIZE);
        // SAFETY: timex is integers only, zero-initialised above, so all
        // of its `n` bytes are initialised.
        bytes[..n].copy_from_slice(unsafe { std::slice::from_raw_parts((&raw const t).cast::<u8>(), n) });
        (bytes, r as i64)
    });
}

/// The state adjtimex reports: the host's, or an unsynchronised clock
/// with the usual tick when it was never captured.
fn clock_state() -> ([u8; TIMEX_SIZE], i64) {
    HOST_CLOCK_STATE.get().copied().unwrap_or_else(|| {
        let mut t = [0u8; TIMEX_SIZE];
        t[TIMEX_STATUS..TIMEX_STATUS + 4].copy_from_slice(&STA_UNSYNC.to_le_bytes());
        t[TIMEX_TICK..TIMEX_TICK + 8].copy_from_slice(&10_000i64.to_le_bytes());
        (t, TIME_ERROR)
    })
}

/// The sandbox's real time, in ns.
fn realtime_ns(task: &Task) -> i64 {
    task.kernel.clock.now(ClockKind::Realtime).unwrap_or_else(|| {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::Realtime);
        t.tv_sec * 1_000_000_000 + t.tv_nsec
    })
}

/// Reads the struct timex at `buf`.
fn read_timex(task: &Task, buf: u64) -> Result<[u8; TIMEX_SIZE], SysError> {
    let mut t = [0u8; TIMEX_SIZE];
    task.mm.copy_in(buf, &mut t)?;
    Ok(t)
}

/// adjtimex with the request `t` read from `buf` (do_adjtimex()):
/// reading is answered, any change refused.
fn adjtime(task: &Task, buf: u64, t: &[u8; TIMEX_SIZE]) -> SysResult {
    let modes = u32::from_le_bytes(t[..4].try_into().unwrap());
    // ntp_validate_timex(): adjtime's single shot may only read without
    // CAP_SYS_TIME; any other mode changes the clock.
    let read_only = if modes & ADJ_ADJTIME != 0 {
        if modes & ADJ_OFFSET_SINGLESHOT == 0 {
            return Err(Errno::EINVAL.into());
        }
        modes & ADJ_OFFSET_READONLY != 0
    } else {
        modes == 0
    };
    if !read_only {
        return Err(Errno::EPERM.into());
    }
    let (mut state, result) = clock_state();
    state[..4].copy_from_slice(&modes.to_le_bytes());
    if modes & ADJ_ADJTIME != 0 {
        // What is left of an adjtime(3) adjustment: none was made.
        state[TIMEX_OFFSET..TIMEX_OFFSET + 8].copy_from_slice(&0i64.to_le_bytes());
    }
    let status = i32::from_le_bytes(state[TIMEX_STATUS..TIMEX_STATUS + 4].try_into().unwrap());
    let now = realtime_ns(task);
    let sub = now.rem_euclid(1_000_000_000);
    let sub = if status & STA_NANO != 0 { sub } else { sub / 1000 };
    state[TIMEX_TIME_SEC..TIMEX_TIME_SEC + 8].copy_from_slice(&now.div_euclid(1_000_000_000).to_le_bytes());
    state[TIMEX_TIME_USEC..TIMEX_TIME_USEC + 8].copy_from_slice(&sub.to_le_bytes());
    task.mm.copy_out(buf, &state)?;
    Ok(result as u64)
}

pub fn adjtimex(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let t = read_timex(task, a[0])?;
    adjtime(task, a[0], &t)
}

/// clock_adjtime(2): CLOCK_REALTIME's is adjtimex; the other clocks have
/// nothing to adjust (EOPNOTSUPP), and unknown ones are EINVAL.
pub fn clock_adjtime(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let t = read_timex(task, a[1])?;
    match a[0] as u32 {
        g::CLOCK_REALTIME => adjtime(task, a[1], &t),
        c if c <= g::CLOCK_TAI && c != 10 => Err(Errno::EOPNOTSUPP.into()),
        _ => Err(Errno::EINVAL.into()),
    }
}

/// timespec64_valid_settod(): a time the real-time clock may be set to.
fn valid_settod(sec: i64, nsec: i64) -> bool {
    // KTIME_SEC_MAX less the 30 years Linux keeps in reserve.
    const MAX: i64 = i64::MAX / 1_000_000_000 - 30 * 365 * 86_400;
    sec >= 0 && (0..1_000_000_000).contains(&nsec) && sec < MAX
}

pub fn clock_settime(task: &mut Task, a: &[u64; 6]) -> SysResult {
    // Only CLOCK_REALTIME can be set.
    if a[0] as u32 != g::CLOCK_REALTIME {
        return Err(Errno::EINVAL.into());
    }
    let t: g::__kernel_timespec = task.mm.read_pod(a[1])?;
    if !valid_settod(t.tv_sec, t.tv_nsec) {
        return Err(Errno::EINVAL.into());
    }
    Err(Errno::EPERM.into())
}

pub fn settimeofday(task: &mut Task, a: &[u64; 6]) -> SysResult {
    if a[0] != 0 {
        let tv: g::__kernel_old_timeval = task.mm.read_pod(a[0])?;
        if !(0..=1_000_000).contains(&tv.tv_usec) || !valid_settod(tv.tv_sec, tv.tv_usec * 1000) {
            return Err(Errno::EINVAL.into());
        }
    }
    if a[1] != 0 {
        let _: g::timezone = task.mm.read_pod(a[1])?;
    }
    Err(SysError::Errno(Errno::EPERM))
}
