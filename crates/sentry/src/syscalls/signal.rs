//! Signal system calls.

use linux_raw_sys::general as g;

use super::{SysError, SysResult};
use crate::errno::Errno;
use crate::signal::{NSIG, SigAction, SigSet};
use crate::task::Task;

fn valid(sig: u64) -> Result<u32, SysError> {
    if (1..=NSIG as u64).contains(&sig) { Ok(sig as u32) } else { Err(Errno::EINVAL.into()) }
}

pub fn rt_sigaction(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let sig = valid(a[0])?;
    if a[3] != 8 {
        return Err(Errno::EINVAL.into());
    }
    let new = if a[1] != 0 {
        Some(SigAction::from_abi(&task.mm.read::<crate::signal::KernelSigAction>(a[1])?))
    } else {
        None
    };
    if new.is_some() && (sig == g::SIGKILL || sig == g::SIGSTOP) {
        return Err(Errno::EINVAL.into());
    }
    let old = {
        let mut h = task.tg.handlers.lock().unwrap();
        let old = h.get(sig);
        if let Some(mut n) = new {
            n.mask = n.mask.blockable();
            h.set(sig, n);
        }
        old
    };
    if a[2] != 0 {
        task.mm.write(a[2], &old.to_abi())?;
    }
    Ok(0)
}

pub fn rt_sigprocmask(task: &mut Task, a: &[u64; 6]) -> SysResult {
    if a[3] != 8 {
        return Err(Errno::EINVAL.into());
    }
    let old = task.signal_mask;
    if a[1] != 0 {
        let set = SigSet(task.mm.read_pod::<u64>(a[1])?);
        task.signal_mask = match a[0] as u32 {
            g::SIG_BLOCK => SigSet(old.0 | set.0),
            g::SIG_UNBLOCK => SigSet(old.0 & !set.0),
            g::SIG_SETMASK => set,
            _ => return Err(Errno::EINVAL.into()),
        }
        .blockable();
    }
    if a[2] != 0 {
        task.mm.write_pod(a[2], &old.0)?;
    }
    Ok(0)
}

pub fn sigaltstack(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (base, size, flags) = task.altstack;
    if a[1] != 0 {
        let mut old = [0u8; 24];
        old[0..8].copy_from_slice(&base.to_le_bytes());
        old[8..12].copy_from_slice(&flags.to_le_bytes());
        old[16..24].copy_from_slice(&size.to_le_bytes());
        task.mm.copy_out(a[1], &old)?;
    }
    if a[0] != 0 {
        let mut raw = [0u8; 24];
        task.mm.copy_in(a[0], &mut raw)?;
        let sp = u64::from_le_bytes(raw[0..8].try_into().unwrap());
        let fl = u32::from_le_bytes(raw[8..12].try_into().unwrap());
        let sz = u64::from_le_bytes(raw[16..24].try_into().unwrap());
        if fl & !(g::SS_DISABLE | g::SS_AUTODISARM) != 0 {
            return Err(Errno::EINVAL.into());
        }
        if fl & g::SS_DISABLE != 0 {
            task.altstack = (0, 0, g::SS_DISABLE);
        } else {
            if sz < crate::arch::min_signal_stack() {
                return Err(Errno::ENOMEM.into());
            }
            task.altstack = (sp, sz, fl);
        }
    }
    Ok(0)
}

/// kill/tkill/tgkill aimed at the calling process: the only process there
/// is until fork exists.
pub fn kill(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let pid = a[0] as i32;
    if pid != task.tg.tgid && pid != 0 && pid != -1 && pid != -task.tg.tgid {
        return Err(Errno::ESRCH.into());
    }
    let sig = a[1];
    if sig == 0 {
        return Ok(0);
    }
    task.signal_self(valid(sig)?);
    if task.exit.is_some() { Err(SysError::JustReturn) } else { Ok(0) }
}

pub fn tgkill(task: &mut Task, a: &[u64; 6]) -> SysResult {
    if a[0] as i32 != task.tg.tgid || a[1] as i32 != task.tid {
        return Err(Errno::ESRCH.into());
    }
    if a[2] == 0 {
        return Ok(0);
    }
    task.signal_self(valid(a[2])?);
    if task.exit.is_some() { Err(SysError::JustReturn) } else { Ok(0) }
}

pub fn tkill(task: &mut Task, a: &[u64; 6]) -> SysResult {
    if a[0] as i32 != task.tid {
        return Err(Errno::ESRCH.into());
    }
    if a[1] == 0 {
        return Ok(0);
    }
    task.signal_self(valid(a[1])?);
    if task.exit.is_some() { Err(SysError::JustReturn) } else { Ok(0) }
}

pub fn rt_sigpending(task: &mut Task, a: &[u64; 6]) -> SysResult {
    if a[1] > 8 {
        return Err(Errno::EINVAL.into());
    }
    task.mm.write_pod(a[0], &0u64)?;
    Ok(0)
}

/// futex for a single-threaded process: a wait sleeps out its timeout if
/// the value matches (nobody else can wake it), wakes find no waiter.
pub fn futex(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let op = a[1] as u32 & !(g::FUTEX_PRIVATE_FLAG | g::FUTEX_CLOCK_REALTIME);
    match op {
        g::FUTEX_WAIT | g::FUTEX_WAIT_BITSET => {
            let v: u32 = task.mm.read_pod(a[0])?;
            if v != a[2] as u32 {
                return Err(Errno::EAGAIN.into());
            }
            if a[3] == 0 {
                // Nothing can ever wake this thread.
                loop {
                    std::thread::park();
                }
            }
            let t: g::__kernel_timespec = task.mm.read_pod(a[3])?;
            if t.tv_sec < 0 || !(0..1_000_000_000).contains(&t.tv_nsec) {
                return Err(Errno::EINVAL.into());
            }
            let mut d = std::time::Duration::new(t.tv_sec as u64, t.tv_nsec as u32);
            if op == g::FUTEX_WAIT_BITSET {
                let clock = if a[1] as u32 & g::FUTEX_CLOCK_REALTIME != 0 {
                    rustix::time::ClockId::Realtime
                } else {
                    rustix::time::ClockId::Monotonic
                };
                let now = rustix::time::clock_gettime(clock);
                d = d.saturating_sub(std::time::Duration::new(now.tv_sec as u64, now.tv_nsec as u32));
            }
            std::thread::sleep(d);
            Err(Errno::ETIMEDOUT.into())
        }
        g::FUTEX_WAKE | g::FUTEX_WAKE_BITSET | g::FUTEX_REQUEUE | g::FUTEX_CMP_REQUEUE | g::FUTEX_WAKE_OP => {
            task.mm.read_pod::<u32>(a[0])?;
            Ok(0)
        }
        _ => Err(Errno::ENOSYS.into()),
    }
}
