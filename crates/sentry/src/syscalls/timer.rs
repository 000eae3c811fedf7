//! alarm, interval timers, POSIX timers and timer descriptors.

use std::sync::Arc;
use std::time::{Duration, Instant};

use linux_raw_sys::general as g;
use rustix::time::ClockId;

use super::time::CpuTarget;
use super::{SysError, SysResult};
use crate::errno::Errno;
use crate::fs::{OpenFile, OpenFlags};
use crate::task::Task;
use crate::timerfd::TimerFd;
use crate::timers::{self, CpuTimeOf, Notify, Setting, Target};

fn timeval(d: Duration) -> g::timeval {
    let mut t = <g::timeval as crate::abi::Pod>::zeroed();
    t.tv_sec = d.as_secs() as _;
    t.tv_usec = d.subsec_micros() as _;
    t
}

fn timespec(d: Duration) -> g::timespec {
    let mut t = <g::timespec as crate::abi::Pod>::zeroed();
    t.tv_sec = d.as_secs() as _;
    t.tv_nsec = d.subsec_nanos() as _;
    t
}

pub fn alarm(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let secs = a[0] as u32;
    let old = task
        .kernel
        .timers
        .set_itimer_real(task.tg.tgid, Setting { value: Duration::from_secs(secs as u64), interval: Duration::ZERO });
    let mut s = old.value.as_secs();
    if old.value.subsec_micros() >= 500_000 || (s == 0 && !old.value.is_zero()) {
        s += 1;
    }
    Ok(s)
}

fn write_itimerval(task: &Task, addr: u64, s: Setting) -> Result<(), SysError> {
    let mut v = <g::itimerval as crate::abi::Pod>::zeroed();
    v.it_interval = timeval(s.interval);
    v.it_value = timeval(s.value);
    task.mm.write_pod(addr, &v)?;
    Ok(())
}

/// The interval timer `which` names, and for those on the process's CPU
/// clock (ITIMER_VIRTUAL, ITIMER_PROF) its CPU time now.
fn itimer(task: &Task, which: u64) -> Result<(u32, Option<Duration>), SysError> {
    match which as u32 {
        g::ITIMER_REAL => Ok((g::ITIMER_REAL, None)),
        // The virtual timer counts user time, the profiling timer both.
        _ if which > u32::MAX as u64 => Err(Errno::EINVAL.into()),
        g::ITIMER_VIRTUAL => Ok((g::ITIMER_VIRTUAL, Some(task.tg.cpu_times().user))),
        g::ITIMER_PROF => Ok((g::ITIMER_PROF, Some(task.tg.cpu_time()))),
        _ => Err(Errno::EINVAL.into()),
    }
}

/// A timer on a CPU clock that is due is about to fire: Linux reports a
/// tick left rather than a value that reads as disarmed.
fn itimer_shown(s: Setting, cpu: bool) -> Setting {
    if cpu && !s.value.is_zero() && s.value < Duration::from_micros(1) {
        let r = rustix::time::clock_getres(ClockId::RealtimeCoarse);
        return Setting { value: Duration::new(r.tv_sec as u64, r.tv_nsec as u32), ..s };
    }
    s
}

pub fn getitimer(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (which, cpu_now) = itimer(task, a[0])?;
    let s = task.kernel.timers.get_itimer(task.tg.tgid, which, cpu_now);
    write_itimerval(task, a[1], itimer_shown(s, cpu_now.is_some()))?;
    Ok(0)
}

pub fn setitimer(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (which, cpu_now) = itimer(task, a[0])?;
    let new = if a[1] == 0 {
        Setting::default()
    } else {
        let v: g::itimerval = task.mm.read_pod(a[1])?;
        let d = |t: g::timeval| -> Result<Duration, SysError> {
            if t.tv_sec < 0 || !(0..1_000_000).contains(&t.tv_usec) {
                return Err(Errno::EINVAL.into());
            }
            Ok(Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000))
        };
        Setting { value: d(v.it_value)?, interval: d(v.it_interval)? }
    };
    let old = task.kernel.timers.set_itimer(task.tg.tgid, which, new, cpu_now);
    if a[2] != 0 {
        write_itimerval(task, a[2], itimer_shown(old, cpu_now.is_some()))?;
    }
    Ok(0)
}

fn clock_id(c: u32) -> Result<ClockId, SysError> {
    Ok(match c {
        g::CLOCK_REALTIME => ClockId::Realtime,
        g::CLOCK_MONOTONIC => ClockId::Monotonic,
        g::CLOCK_BOOTTIME => ClockId::Boottime,
        _ => return Err(Errno::EINVAL.into()),
    })
}

/// The CPU clock `clock` names, if it names one.
fn cpu_timer_clock(task: &Task, clock: u32) -> Result<Option<CpuTimeOf>, SysError> {
    Ok(super::time::cpu_clock(task, clock as i32, false)?.map(|(target, _)| match target {
        CpuTarget::Thread(t) => CpuTimeOf::Thread(t.tid()),
        CpuTarget::Process(tg) => CpuTimeOf::Process(tg.tgid),
    }))
}

pub fn timer_create(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let clock = a[0] as u32;
    let cpu = cpu_timer_clock(task, clock)?;
    if cpu.is_none() {
        clock_id(clock)?;
    }
    let notify = if a[1] == 0 {
        Notify::Signal { signo: g::SIGALRM, value: u64::MAX, target: Target::Process(task.tg.tgid) }
    } else {
        let mut raw = [0u8; 64];
        task.mm.copy_in(a[1], &mut raw)?;
        let value = u64::from_le_bytes(raw[0..8].try_into().unwrap());
        let signo = i32::from_le_bytes(raw[8..12].try_into().unwrap());
        let how = i32::from_le_bytes(raw[12..16].try_into().unwrap()) as u32;
        let tid = i32::from_le_bytes(raw[16..20].try_into().unwrap());
        let sig_ok = (1..=64).contains(&signo);
        match how {
            g::SIGEV_NONE => Notify::None,
            g::SIGEV_SIGNAL if sig_ok => {
                Notify::Signal { signo: signo as u32, value, target: Target::Process(task.tg.tgid) }
            }
            g::SIGEV_THREAD_ID if sig_ok => {
                let t = task.kernel.procs.lock().unwrap().thread(tid).ok_or(Errno::EINVAL)?;
                if t.tg.tgid != task.tg.tgid {
                    return Err(Errno::EINVAL.into());
                }
                Notify::Signal { signo: signo as u32, value, target: Target::Thread(tid) }
            }
            _ => return Err(Errno::EINVAL.into()),
        }
    };
    let limit = task.tg.rlimit(g::RLIMIT_SIGPENDING).cur;
    let id = task.kernel.timers.create(task.tg.tgid, clock, cpu, notify, limit).ok_or(Errno::EAGAIN)?;
    if let Err(e) = task.mm.write(a[2], &id) {
        task.kernel.timers.delete(task.tg.tgid, id);
        return Err(Errno::from(e).into());
    }
    Ok(0)
}

fn read_its(task: &Task, addr: u64) -> Result<(Duration, Duration), SysError> {
    let v: g::itimerspec = task.mm.read_pod(addr)?;
    let d = |t: g::timespec| -> Result<Duration, SysError> {
        if t.tv_sec < 0 || !(0..1_000_000_000).contains(&t.tv_nsec) {
            return Err(Errno::EINVAL.into());
        }
        Ok(Duration::new(t.tv_sec as u64, t.tv_nsec as u32))
    };
    Ok((d(v.it_value)?, d(v.it_interval)?))
}

fn write_its(task: &Task, addr: u64, s: Setting) -> Result<(), SysError> {
    let mut v = <g::itimerspec as crate::abi::Pod>::zeroed();
    v.it_interval = timespec(s.interval);
    v.it_value = timespec(s.value);
    task.mm.write_pod(addr, &v)?;
    Ok(())
}

pub fn timer_settime(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let id = a[0] as i32;
    let (mut value, interval) = read_its(task, a[2])?;
    let pid = task.tg.tgid;
    let (clock, cpu) = task.kernel.timers.clock(pid, id).ok_or(Errno::EINVAL)?;
    // The thread whose clock it runs on may be gone.
    let cpu_now = cpu.map(|c| timers::cpu_time_of(&task.kernel, c).ok_or(Errno::ESRCH)).transpose()?;
    if a[1] as u32 & g::TIMER_ABSTIME != 0 && !value.is_zero() {
        let now = match cpu_now {
            Some(now) => now,
            None => {
                let now = rustix::time::clock_gettime(clock_id(clock)?);
                Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
            }
        };
        // A time already past fires at once.
        value = value.saturating_sub(now).max(Duration::from_nanos(1));
    }
    let old = task.kernel.timers.settime(pid, id, Setting { value, interval }, cpu_now).ok_or(Errno::EINVAL)?;
    if a[3] != 0 {
        write_its(task, a[3], old)?;
    }
    Ok(0)
}

pub fn timer_gettime(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (_, cpu) = task.kernel.timers.clock(task.tg.tgid, a[0] as i32).ok_or(Errno::EINVAL)?;
    let cpu_now = cpu.and_then(|c| timers::cpu_time_of(&task.kernel, c));
    let s = task.kernel.timers.gettime(task.tg.tgid, a[0] as i32, cpu_now).ok_or(Errno::EINVAL)?;
    write_its(task, a[1], s)?;
    Ok(0)
}

pub fn timer_getoverrun(task: &mut Task, a: &[u64; 6]) -> SysResult {
    Ok(task.kernel.timers.overrun(task.tg.tgid, a[0] as i32).ok_or(Errno::EINVAL)? as u64)
}

pub fn timer_delete(task: &mut Task, a: &[u64; 6]) -> SysResult {
    if task.kernel.timers.delete(task.tg.tgid, a[0] as i32) { Ok(0) } else { Err(Errno::EINVAL.into()) }
}

/// CAP_WAKE_ALARM: arming a timer on an alarm clock.
const CAP_WAKE_ALARM: u32 = 35;

/// The clock a timerfd of `clock` runs on, as clock_gettime names it.
/// The alarm clocks are their plain twins here: the sandbox cannot wake a
/// suspended host, and it keeps the time they would while it runs.
fn timerfd_clock(clock: u32) -> Option<u32> {
    match clock {
        g::CLOCK_REALTIME | g::CLOCK_REALTIME_ALARM => Some(g::CLOCK_REALTIME),
        g::CLOCK_MONOTONIC => Some(g::CLOCK_MONOTONIC),
        g::CLOCK_BOOTTIME | g::CLOCK_BOOTTIME_ALARM => Some(g::CLOCK_BOOTTIME),
        _ => None,
    }
}

pub fn timerfd_create(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let clock = a[0] as u32;
    let flags = a[1] as u32;
    if flags & !(g::TFD_CLOEXEC | g::TFD_NONBLOCK) != 0 || timerfd_clock(clock).is_none() {
        return Err(Errno::EINVAL.into());
    }
    if matches!(clock, g::CLOCK_REALTIME_ALARM | g::CLOCK_BOOTTIME_ALARM) && !task.tg.creds().has(CAP_WAKE_ALARM) {
        return Err(Errno::EPERM.into());
    }
    let ops = Arc::new(TimerFd::new(clock, task.kernel.timers.clone()));
    let nonblock = OpenFlags::from_bits_retain(flags & g::O_NONBLOCK);
    let f = OpenFile::new(ops, None, OpenFlags::RDWR | nonblock);
    Ok(task.files.install(f, flags & g::TFD_CLOEXEC != 0, 0)? as u64)
}

/// The timerfd open at `fd`: EBADF if none is, EINVAL if it is another
/// kind of file.
fn timerfd_at(task: &Task, fd: u64) -> Result<(Arc<OpenFile>, u32), SysError> {
    let f = super::file(task, fd)?;
    let clock = f.ops.downcast_ref::<TimerFd>().ok_or(Errno::EINVAL)?.clock();
    Ok((f, clock))
}

pub fn timerfd_settime(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let flags = a[1] as u32;
    let (value, interval) = read_its(task, a[2])?;
    if flags & !(g::TFD_TIMER_ABSTIME | g::TFD_TIMER_CANCEL_ON_SET) != 0 {
        return Err(Errno::EINVAL.into());
    }
    let (f, clock) = timerfd_at(task, a[0])?;
    let now = Instant::now();
    let deadline = if value.is_zero() {
        None
    } else if flags & g::TFD_TIMER_ABSTIME != 0 {
        // An absolute time is kept as the instant it comes on the clock
        // now: the sandbox cannot set its clocks, so they never jump. For
        // the same reason TFD_TIMER_CANCEL_ON_SET never cancels a read.
        let on_clock = super::time::time_on(task, timerfd_clock(clock).expect("made with a timerfd clock"))?;
        Some(timers::after(now, value.saturating_sub(on_clock)))
    } else {
        Some(timers::after(now, value))
    };
    let timer = f.ops.downcast_ref::<TimerFd>().expect("checked");
    let old = timer.set(deadline, interval, flags);
    if a[3] != 0 {
        write_its(task, a[3], old)?;
    }
    Ok(0)
}

pub fn timerfd_gettime(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (f, _) = timerfd_at(task, a[0])?;
    let s = f.ops.downcast_ref::<TimerFd>().expect("checked").get();
    write_its(task, a[1], s)?;
    Ok(0)
}
