//! Clocks and sleeping.

use std::sync::Arc;
use std::time::{Duration, Instant};

use linux_raw_sys::general as g;
use rustix::time::ClockId;

use super::{SysError, SysResult, read_timespec};
use crate::errno::Errno;
use crate::task::{BlockError, RestartBlock, Task, TaskShared, ThreadGroup, block_on};
use crate::timers;
use crate::vdso::ClockKind;

/// The host clock behind a clock id.
#[derive(Clone, Copy)]
enum Clock {
    Known(ClockId),
    Tai,
}

/// The sandbox's own clock behind a host clock, if it keeps one.
fn kept(id: ClockId) -> Option<ClockKind> {
    match id {
        ClockId::Monotonic | ClockId::MonotonicCoarse => Some(ClockKind::Monotonic),
        ClockId::Realtime | ClockId::RealtimeCoarse => Some(ClockKind::Realtime),
        ClockId::Boottime => Some(ClockKind::Boottime),
        _ => None,
    }
}

/// The time on `c`: what the vDSO answers for the clocks it serves (so the
/// two never disagree), the host's clock for the rest.
fn now(task: &Task, c: Clock) -> rustix::time::Timespec {
    if let Clock::Known(id) = c
        && let Some(ns) = kept(id).and_then(|k| task.kernel.clock.now(k))
    {
        return rustix::time::Timespec { tv_sec: ns.div_euclid(1_000_000_000), tv_nsec: ns.rem_euclid(1_000_000_000) };
    }
    match c {
        Clock::Known(id) => rustix::time::clock_gettime(id),
        Clock::Tai => rustix::time::clock_gettime_dynamic(rustix::time::DynamicClockId::Tai)
            .unwrap_or_else(|_| rustix::time::clock_gettime(ClockId::Realtime)),
    }
}

/// The time on the clock `id` since its epoch, as clock_gettime answers.
pub(super) fn time_on(task: &Task, id: u32) -> Result<Duration, SysError> {
    let t = now(task, clock_of(id as u64)?);
    Ok(Duration::new(t.tv_sec.max(0) as u64, t.tv_nsec as u32))
}

fn clock_of(id: u64) -> Result<Clock, SysError> {
    if id as u32 == g::CLOCK_TAI {
        return Ok(Clock::Tai);
    }
    Ok(Clock::Known(match id as u32 {
        g::CLOCK_REALTIME => ClockId::Realtime,
        g::CLOCK_MONOTONIC => ClockId::Monotonic,
        g::CLOCK_PROCESS_CPUTIME_ID => ClockId::ProcessCPUTime,
        g::CLOCK_THREAD_CPUTIME_ID => ClockId::ThreadCPUTime,
        g::CLOCK_MONOTONIC_RAW => ClockId::MonotonicRaw,
        g::CLOCK_REALTIME_COARSE => ClockId::RealtimeCoarse,
        g::CLOCK_MONOTONIC_COARSE => ClockId::MonotonicCoarse,
        g::CLOCK_BOOTTIME => ClockId::Boottime,
        _ => return Err(Errno::EINVAL.into()),
    }))
}

fn write_ts(task: &Task, addr: u64, sec: i64, nsec: i64) -> SysResult {
    let mut t = <g::__kernel_timespec as crate::abi::Pod>::zeroed();
    t.tv_sec = sec;
    t.tv_nsec = nsec;
    task.mm.write_pod(addr, &t)?;
    Ok(0)
}

/// What a CPU clock measures: one thread or a whole process.
pub(super) enum CpuTarget {
    Thread(Arc<TaskShared>),
    Process(Arc<ThreadGroup>),
}

impl CpuTarget {
    pub(super) fn cpu_time(&self) -> Duration {
        match self {
            CpuTarget::Thread(t) => t.cpu_time(),
            CpuTarget::Process(tg) => tg.cpu_time(),
        }
    }
}

/// Linux's CPUCLOCK_SCHED: the clock of scheduled time, which
/// CLOCK_PROCESS_CPUTIME_ID and CLOCK_THREAD_CPUTIME_ID are.
const CPUCLOCK_SCHED: u32 = 2;

/// The thread or process a CPU clock id names, and which of its three
/// clocks (CPUCLOCK_PROF, _VIRT, _SCHED); None if `id` is no CPU clock.
/// Other processes' clocks are encoded as Linux's MAKE_PROCESS_CPUCLOCK
/// (clock_getcpuclockid), other threads' as MAKE_THREAD_CPUCLOCK
/// (pthread_getcpuclockid), pid 0 meaning the caller; a thread's clock
/// is only for threads of the caller's process. With `gettime`, a
/// process clock may name the caller by its thread id, as Linux allows.
pub(super) fn cpu_clock(task: &Task, id: i32, gettime: bool) -> Result<Option<(CpuTarget, u32)>, SysError> {
    let (pid, per_thread, which) = match id {
        _ if id as u32 == g::CLOCK_PROCESS_CPUTIME_ID => (0, false, CPUCLOCK_SCHED),
        _ if id as u32 == g::CLOCK_THREAD_CPUTIME_ID => (0, true, CPUCLOCK_SCHED),
        _ if id < 0 => (!(id >> 3), id & 4 != 0, (id & 3) as u32),
        _ => return Ok(None),
    };
    if which > CPUCLOCK_SCHED {
        return Err(Errno::EINVAL.into());
    }
    let target = if per_thread {
        if pid == 0 {
            CpuTarget::Thread(task.shared.clone())
        } else {
            let t = task.kernel.procs.lock().unwrap().thread(pid);
            CpuTarget::Thread(t.filter(|t| Arc::ptr_eq(&t.tg, &task.tg)).ok_or(Errno::EINVAL)?)
        }
    } else if pid == 0 || (gettime && pid == task.tid()) {
        CpuTarget::Process(task.tg.clone())
    } else {
        CpuTarget::Process(task.kernel.procs.lock().unwrap().group(pid).ok_or(Errno::EINVAL)?)
    };
    Ok(Some((target, which)))
}

pub fn clock_gettime(task: &mut Task, a: &[u64; 6]) -> SysResult {
    if let Some((target, _)) = cpu_clock(task, a[0] as i32, true)? {
        // Every CPU time is user time here (see getrusage): the three
        // clocks read the same.
        let d = target.cpu_time();
        return write_ts(task, a[1], d.as_secs() as i64, d.subsec_nanos() as i64);
    }
    let t = now(task, clock_of(a[0])?);
    write_ts(task, a[1], t.tv_sec, t.tv_nsec)
}

pub fn clock_getres(task: &mut Task, a: &[u64; 6]) -> SysResult {
    if let Some((_, which)) = cpu_clock(task, a[0] as i32, false)? {
        if a[1] == 0 {
            return Ok(0);
        }
        // Linux's: nanoseconds for scheduled time, a tick for the others.
        if which == CPUCLOCK_SCHED {
            return write_ts(task, a[1], 0, 1);
        }
        let r = rustix::time::clock_getres(ClockId::RealtimeCoarse);
        return write_ts(task, a[1], r.tv_sec, r.tv_nsec);
    }
    let c = clock_of(a[0])?;
    if a[1] == 0 {
        return Ok(0);
    }
    // The host's answer: the coarse clocks tick at its HZ.
    let id = match c {
        Clock::Known(id) => id,
        Clock::Tai => ClockId::Realtime,
    };
    let r = rustix::time::clock_getres(id);
    write_ts(task, a[1], r.tv_sec, r.tv_nsec)
}

pub fn gettimeofday(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let t = now(task, Clock::Known(ClockId::Realtime));
    if a[0] != 0 {
        let mut tv = <g::__kernel_old_timeval as crate::abi::Pod>::zeroed();
        tv.tv_sec = t.tv_sec;
        tv.tv_usec = t.tv_nsec / 1000;
        task.mm.write_pod(a[0], &tv)?;
    }
    if a[1] != 0 {
        task.mm.write_pod(a[1], &<g::timezone as crate::abi::Pod>::zeroed())?;
    }
    Ok(0)
}

pub fn time(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let t = now(task, Clock::Known(ClockId::Realtime)).tv_sec as u64;
    if a[0] != 0 {
        task.mm.write_pod(a[0], &t)?;
    }
    Ok(t)
}

/// Sleeps until `deadline`, interruptibly. An interrupted relative sleep
/// reports what is left at `rem` and resumes through restart_syscall.
fn sleep_until(task: &mut Task, deadline: Instant, rem: Option<u64>) -> SysResult {
    match block_on(&*task.shared, &[], Some(deadline), || None::<()>) {
        Err(BlockError::TimedOut) | Ok(()) => Ok(0),
        Err(BlockError::Interrupted) => match rem {
            None => Err(Errno::ERESTARTNOHAND.into()),
            Some(addr) => {
                if addr != 0 {
                    let left = deadline.saturating_duration_since(Instant::now());
                    write_ts(task, addr, left.as_secs() as i64, left.subsec_nanos() as i64)?;
                }
                task.restart_block = Some(RestartBlock::Sleep { deadline, rem_addr: addr });
                Err(Errno::ERESTART_RESTARTBLOCK.into())
            }
        },
    }
}

pub fn nanosleep(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let d = read_timespec(task, a[0])?;
    sleep_until(task, timers::after(Instant::now(), d), Some(a[1]))
}

/// restart_syscall: resumes an interrupted call where it left off.
pub fn restart_syscall(task: &mut Task, _: &[u64; 6]) -> SysResult {
    match task.restart_block.take() {
        Some(RestartBlock::Sleep { deadline, rem_addr }) => sleep_until(task, deadline, Some(rem_addr)),
        Some(RestartBlock::Poll { fds, nfds, deadline }) => super::pipe::poll_until(task, fds, nfds, deadline),
        Some(RestartBlock::Futex { addr, val, bitset, private, deadline }) => {
            super::futex::wait_until(task, addr, val, bitset, private, deadline)
        }
        None => Err(Errno::EINTR.into()),
    }
}

/// Sleeps until the CPU clock of `target` reads `until`: the sleeper
/// itself uses none, so another thread or process must. The clock is
/// looked at every tick, as Linux's CPU timers are. Interrupted, the call
/// restarts (as a new sleep of the same length, for a relative one) or
/// fails with EINTR, having reported what was left at `rem`.
fn cpu_sleep(task: &mut Task, target: CpuTarget, until: Duration, rem: Option<u64>) -> SysResult {
    loop {
        let used = target.cpu_time();
        if used >= until {
            return Ok(0);
        }
        let tick = Instant::now() + timers::cpu_tick();
        match block_on(&*task.shared, &[], Some(tick), || None::<()>) {
            Err(BlockError::TimedOut) | Ok(()) => {}
            Err(BlockError::Interrupted) => {
                if let Some(addr) = rem.filter(|a| *a != 0) {
                    let left = until - used;
                    write_ts(task, addr, left.as_secs() as i64, left.subsec_nanos() as i64)?;
                }
                return Err(Errno::ERESTARTNOHAND.into());
            }
        }
    }
}

pub fn clock_nanosleep(task: &mut Task, a: &[u64; 6]) -> SysResult {
    if let Some((target, _)) = cpu_clock(task, a[0] as i32, false)? {
        // A thread cannot sleep on a thread's clock (Linux: EINVAL).
        if matches!(target, CpuTarget::Thread(_)) {
            return Err(Errno::EINVAL.into());
        }
        let d = read_timespec(task, a[2])?;
        if a[1] as u32 & g::TIMER_ABSTIME != 0 {
            return cpu_sleep(task, target, d, None);
        }
        let until = target.cpu_time().saturating_add(d);
        return cpu_sleep(task, target, until, Some(a[3]));
    }
    let clock = clock_of(a[0])?;
    let d = read_timespec(task, a[2])?;
    if a[1] as u32 & g::TIMER_ABSTIME != 0 {
        let n = now(task, clock);
        let left = d.saturating_sub(Duration::new(n.tv_sec as u64, n.tv_nsec as u32));
        return sleep_until(task, timers::after(Instant::now(), left), None);
    }
    sleep_until(task, timers::after(Instant::now(), d), Some(a[3]))
}
