//! System information, randomness and scheduling.

use std::sync::Arc;

use linux_raw_sys::general as g;
use linux_raw_sys::system as s;

use super::{SysError, SysResult};
use crate::errno::Errno;
use crate::task::{Task, TaskShared, all_cpus_mask};

fn fill(dst: &mut [std::ffi::c_char], v: &[u8]) {
    let n = dst.len() - 1;
    for (d, b) in dst.iter_mut().zip(v.iter().chain(std::iter::repeat(&0)).take(n)) {
        *d = *b as std::ffi::c_char;
    }
}

pub fn uname(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let mut u = <s::new_utsname as crate::abi::Pod>::zeroed();
    fill(&mut u.sysname, b"Linux");
    fill(&mut u.nodename, &task.kernel.hostname.lock().unwrap());
    fill(&mut u.release, crate::kernel::kernel_release().as_bytes());
    fill(&mut u.version, crate::kernel::KERNEL_VERSION.as_bytes());
    fill(&mut u.machine, b"x86_64");
    fill(&mut u.domainname, b"(none)");
    task.mm.write_pod(a[0], &u)?;
    Ok(0)
}

/// Longest host name (__NEW_UTS_LEN).
const HOST_NAME_MAX: u64 = 64;

pub fn sethostname(task: &mut Task, a: &[u64; 6]) -> SysResult {
    if !task.tg.creds().has(crate::auth::cap::SYS_ADMIN) {
        return Err(Errno::EPERM.into());
    }
    if a[1] > HOST_NAME_MAX {
        return Err(Errno::EINVAL.into());
    }
    let mut name = vec![0u8; a[1] as usize];
    task.mm.copy_in(a[0], &mut name)?;
    *task.kernel.hostname.lock().unwrap() = name;
    Ok(0)
}

pub fn sysinfo(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let k = &task.kernel;
    let mut i = <s::sysinfo as crate::abi::Pod>::zeroed();
    i.uptime = k.started.elapsed().as_secs() as _;
    i.totalram = k.mf.capacity() as _;
    i.freeram = (k.mf.capacity() - k.mf.stats().frames_in_use * 4096) as _;
    i.procs = k.procs.lock().unwrap().thread_count() as u16;
    i.mem_unit = 1;
    task.mm.write_pod(a[0], &i)?;
    Ok(0)
}

pub fn getrandom(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let flags = a[2] as u32;
    let both = g::GRND_RANDOM | g::GRND_INSECURE;
    if flags & !(g::GRND_NONBLOCK | both) != 0 || flags & both == both {
        return Err(Errno::EINVAL.into());
    }
    let len = (a[1] as usize).min(32 << 20);
    // A page at a time: the sentry holds one page whatever the length.
    let mut buf = [0u8; 4096];
    let mut done = 0;
    while done < len {
        let n = (len - done).min(buf.len());
        let mut filled = 0;
        while filled < n {
            filled += rustix::rand::getrandom(&mut buf[filled..n], rustix::rand::GetRandomFlags::empty())?;
        }
        if let Err(e) = task.mm.copy_out(a[0] + done as u64, &buf[..n]) {
            // What was stored counts, as Linux's copy to the caller.
            return if done > 0 { Ok(done as u64) } else { Err(e.into()) };
        }
        done += n;
    }
    Ok(len as u64)
}

/// The thread an affinity call names: the caller for 0, else any thread of
/// the sandbox; ESRCH if there is none.
fn affinity_target(task: &Task, pid: i32) -> Result<Arc<TaskShared>, SysError> {
    if pid == 0 {
        return Ok(task.shared.clone());
    }
    Ok(task.kernel.procs.lock().unwrap().thread(pid).ok_or(Errno::ESRCH)?)
}

/// sched_getaffinity. The platform may answer it for the calling thread
/// without the sentry ([`platform::FAST_PATH_SYSCALLS`]), from the mask
/// published when the thread last ran: whoever changes a thread's mask
/// interrupts it.
pub fn sched_getaffinity(task: &mut Task, a: &[u64; 6]) -> SysResult {
    // The length is an unsigned int to the kernel.
    let (pid, len) = (a[0] as i32, a[1] as u32 as usize);
    let cpus = task.kernel.config.cpus;
    let size = all_cpus_mask(cpus).len();
    if len.saturating_mul(8) < cpus || !len.is_multiple_of(8) {
        return Err(Errno::EINVAL.into());
    }
    let m = affinity_target(task, pid)?.affinity.lock().unwrap().clone();
    task.mm.copy_out(a[2], &m[..size.min(len)])?;
    Ok(size.min(len) as u64)
}

/// sched_setaffinity: the mask is kept for the thread (what
/// sched_getaffinity then reports); host threads are not pinned.
pub fn sched_setaffinity(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let all = all_cpus_mask(task.kernel.config.cpus);
    // Bytes past the sandbox's CPUs are ignored; a short mask means the
    // CPUs it does not reach are not wanted.
    let mut m = vec![0u8; all.len()];
    let n = (a[1] as usize).min(all.len());
    task.mm.copy_in(a[2], &mut m[..n])?;
    let target = affinity_target(task, a[0] as i32)?;
    for (b, online) in m.iter_mut().zip(&all) {
        *b &= online;
    }
    if m.iter().all(|b| *b == 0) {
        return Err(Errno::EINVAL.into());
    }
    *target.affinity.lock().unwrap() = m;
    // Another thread's sched_getaffinity may be answered from the mask it
    // runs with (this one publishes its own before it runs again).
    if !Arc::ptr_eq(&target, &task.shared) {
        target.refresh_published_ids();
    }
    Ok(0)
}

pub fn sched_yield(_task: &mut Task, _: &[u64; 6]) -> SysResult {
    std::thread::yield_now();
    Ok(0)
}

pub fn getcpu(task: &mut Task, a: &[u64; 6]) -> SysResult {
    // The host CPU handling the call, among the CPUs the sandbox says it
    // has (as the vDSO answers: see vdso/clock.rs).
    let cpu = rustix::thread::sched_getcpu() as u32 % (task.kernel.config.cpus.max(1) as u32);
    if a[0] != 0 {
        task.mm.write_pod(a[0], &cpu)?;
    }
    if a[1] != 0 {
        task.mm.write_pod(a[1], &0u32)?;
    }
    Ok(0)
}

/// sched_get_priority_max(2): 99 for the real-time policies, else 0.
pub fn sched_get_priority_max(_task: &mut Task, a: &[u64; 6]) -> SysResult {
    match a[0] as u32 {
        g::SCHED_FIFO | g::SCHED_RR => Ok(99),
        g::SCHED_NORMAL | g::SCHED_BATCH | g::SCHED_IDLE | g::SCHED_DEADLINE => Ok(0),
        _ => Err(Errno::EINVAL.into()),
    }
}

/// sched_get_priority_min(2): 1 for the real-time policies, else 0.
pub fn sched_get_priority_min(_task: &mut Task, a: &[u64; 6]) -> SysResult {
    match a[0] as u32 {
        g::SCHED_FIFO | g::SCHED_RR => Ok(1),
        g::SCHED_NORMAL | g::SCHED_BATCH | g::SCHED_IDLE | g::SCHED_DEADLINE => Ok(0),
        _ => Err(Errno::EINVAL.into()),
    }
}
