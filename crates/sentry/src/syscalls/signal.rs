//! Signal system calls.

use std::sync::Arc;
use std::time::Instant;

use linux_raw_sys::general as g;

use super::{SysError, SysResult, read_timeout};
use crate::auth::cap;
use crate::errno::Errno;
use crate::fs::{OpenFile, OpenFlags};
use crate::signal::{KernelSigAction, NSIG, SigAction, SigInfo, SigSet, code};
use crate::task::signalfd::SignalFd;
use crate::task::{
    BlockError, INIT_PID, Task, ThreadGroup, block_on, queue_to_group, queue_to_thread, send_to_group, take_signal,
};
use crate::timers;

/// MINSIGSTKSZ: the smallest alternate stack accepted.
const MINSIGSTKSZ: u64 = 2048;

fn valid(sig: u64) -> Result<u32, SysError> {
    if (1..=NSIG as u64).contains(&sig) { Ok(sig as u32) } else { Err(Errno::EINVAL.into()) }
}

fn read_sigset(task: &Task, addr: u64, size: u64) -> Result<SigSet, SysError> {
    if size != 8 {
        return Err(Errno::EINVAL.into());
    }
    Ok(SigSet(task.mm.read::<u64>(addr)?))
}

pub fn rt_sigaction(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let sig = valid(a[0])?;
    if a[3] != 8 {
        return Err(Errno::EINVAL.into());
    }
    let new = if a[1] != 0 { Some(SigAction::from_abi(&task.mm.read::<KernelSigAction>(a[1])?)) } else { None };
    if new.is_some() && (sig == g::SIGKILL || sig == g::SIGSTOP) {
        return Err(Errno::EINVAL.into());
    }
    let handlers = task.tg.handlers();
    let (old, ignored) = {
        let mut h = handlers.lock().unwrap();
        let old = h.get(sig);
        if let Some(mut n) = new {
            n.mask = n.mask.blockable();
            h.set(sig, n);
        }
        (old, new.is_some() && h.ignores(sig))
    };
    if ignored {
        // A signal set to be ignored is discarded if pending.
        let set = SigSet::of(sig);
        task.tg.shared_pending.lock().unwrap().discard(set);
        let threads = task.tg.threads.lock().unwrap().clone();
        for t in &threads {
            t.sig.lock().unwrap().pending.discard(set);
        }
        for t in &threads {
            t.recalc_sigpending();
        }
    }
    if a[2] != 0 {
        task.mm.write(a[2], &old.to_abi())?;
    }
    Ok(0)
}

pub fn rt_sigprocmask(task: &mut Task, a: &[u64; 6]) -> SysResult {
    if a[3] != 8 {
        return Err(Errno::EINVAL.into());
    }
    let old = task.signal_mask();
    if a[1] != 0 {
        let set = SigSet(task.mm.read::<u64>(a[1])?);
        let new = match a[0] as u32 {
            g::SIG_BLOCK => old.union(set),
            g::SIG_UNBLOCK => old.minus(set),
            g::SIG_SETMASK => set,
            _ => return Err(Errno::EINVAL.into()),
        };
        task.set_signal_mask(new);
    }
    if a[2] != 0 {
        task.mm.write(a[2], &old.0)?;
    }
    Ok(0)
}

pub fn rt_sigpending(task: &mut Task, a: &[u64; 6]) -> SysResult {
    if a[1] > 8 {
        return Err(Errno::EINVAL.into());
    }
    let (mask, private) = {
        let s = task.shared.sig.lock().unwrap();
        (s.mask, s.pending.pending())
    };
    let shared = task.tg.shared_pending.lock().unwrap().pending();
    let set = SigSet(private.union(shared).0 & mask.0);
    task.mm.copy_out(a[0], &set.0.to_le_bytes()[..a[1] as usize])?;
    Ok(0)
}

/// Waits until a signal handler is about to run; always interrupted.
fn wait_for_signal(task: &Task) -> Result<(), SysError> {
    let _ = block_on(&*task.shared, &[], None, || None::<()>);
    Err(Errno::ERESTARTNOHAND.into())
}

pub fn rt_sigsuspend(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let set = read_sigset(task, a[0], a[1])?;
    {
        let mut s = task.shared.sig.lock().unwrap();
        s.saved_mask = Some(s.mask);
    }
    task.shared.set_mask(set);
    wait_for_signal(task)?;
    Ok(0)
}

pub fn pause(task: &mut Task, _: &[u64; 6]) -> SysResult {
    wait_for_signal(task)?;
    Ok(0)
}

pub fn rt_sigtimedwait(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let set = read_sigset(task, a[0], a[3])?.blockable();
    let timeout = read_timeout(task, a[2])?;
    let take = |t: &Task| take_signal(&t.kernel, &t.shared, set);
    let info = match take(task) {
        Some(i) => i,
        None => {
            // Unblock the awaited signals while waiting so their arrival
            // wakes this thread; they are taken here, never by a handler.
            let saved = task.signal_mask();
            task.shared.sig.lock().unwrap().real_blocked = saved;
            task.set_signal_mask(saved.minus(set));
            let deadline = timeout.map(|d| timers::after(Instant::now(), d));
            let r = block_on(&*task.shared, &[], deadline, || take(task));
            task.set_signal_mask(saved);
            task.shared.sig.lock().unwrap().real_blocked = SigSet::EMPTY;
            match r {
                Ok(i) => i,
                Err(BlockError::TimedOut) => return Err(Errno::EAGAIN.into()),
                Err(BlockError::Interrupted) => return Err(Errno::EINTR.into()),
            }
        }
    };
    if a[1] != 0 {
        task.mm.copy_out(a[1], &info.to_bytes())?;
    }
    Ok(info.signo as u64)
}

pub fn rt_sigreturn(task: &mut Task, _: &[u64; 6]) -> SysResult {
    if task.sigreturn().is_err() {
        let info = SigInfo::kernel(g::SIGSEGV);
        task.force_signal(info, (0, 0, 0));
    }
    Err(SysError::JustReturn)
}

pub fn sigaltstack(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (base, size, flags) = task.altstack;
    let on_alt = flags & g::SS_DISABLE == 0 && task.regs.rsp > base && task.regs.rsp <= base + size;
    if a[1] != 0 {
        let shown = if on_alt { g::SS_ONSTACK } else { flags };
        let mut old = [0u8; 24];
        old[0..8].copy_from_slice(&base.to_le_bytes());
        old[8..12].copy_from_slice(&shown.to_le_bytes());
        old[16..24].copy_from_slice(&size.to_le_bytes());
        task.mm.copy_out(a[1], &old)?;
    }
    if a[0] != 0 {
        let mut raw = [0u8; 24];
        task.mm.copy_in(a[0], &mut raw)?;
        let sp = u64::from_le_bytes(raw[0..8].try_into().unwrap());
        let fl = u32::from_le_bytes(raw[8..12].try_into().unwrap());
        let sz = u64::from_le_bytes(raw[16..24].try_into().unwrap());
        if on_alt {
            return Err(Errno::EPERM.into());
        }
        let mode = fl & !g::SS_AUTODISARM;
        if mode != 0 && mode != g::SS_DISABLE && mode != g::SS_ONSTACK {
            return Err(Errno::EINVAL.into());
        }
        if mode == g::SS_DISABLE {
            task.altstack = (0, 0, g::SS_DISABLE);
        } else {
            if sz < MINSIGSTKSZ {
                return Err(Errno::ENOMEM.into());
            }
            task.altstack = (sp, sz, fl & g::SS_AUTODISARM);
        }
    }
    Ok(0)
}

/// May the caller send signal `sig` (0: only asking) to `target`? As
/// Linux's check_kill_permission: its own process, a process whose real
/// or saved uid is the caller's real or effective one, SIGCONT within the
/// session, or CAP_KILL.
fn may_signal(task: &Task, target: &ThreadGroup, sig: u32) -> Result<(), Errno> {
    if std::ptr::eq(target, task.tg.as_ref()) {
        return Ok(());
    }
    let me = task.tg.creds();
    let them = target.creds();
    let ids_match = [me.uid.real, me.uid.effective].iter().any(|&u| u == them.uid.real || u == them.uid.saved);
    if ids_match || me.has(cap::KILL) {
        return Ok(());
    }
    if sig == g::SIGCONT {
        let tree = task.kernel.procs.lock().unwrap();
        if tree.sid_of(target.tgid) == tree.sid_of(task.tg.tgid) {
            return Ok(());
        }
    }
    Err(Errno::EPERM)
}

/// Sends `info` to a process; ESRCH if there is none, EPERM if the caller
/// may not signal it, EAGAIN if a real-time signal's siginfo finds the
/// queue full.
fn kill_process(task: &Task, pid: i32, info: Option<SigInfo>) -> Result<(), SysError> {
    let tg = task.kernel.procs.lock().unwrap().group(pid).ok_or(Errno::ESRCH)?;
    may_signal(task, &tg, info.map_or(0, |i| i.signo))?;
    if tg.state.lock().unwrap().zombie && info.is_none() {
        return Ok(());
    }
    if let Some(i) = info {
        queue_to_group(&task.kernel, &tg, i).map_err(|_| Errno::EAGAIN)?;
    }
    Ok(())
}

pub fn kill(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let pid = a[0] as i32;
    let info = if a[1] == 0 {
        None
    } else {
        Some(SigInfo::user(valid(a[1])?, code::SI_USER, task.tg.tgid, task.tg.creds().uid.real))
    };
    let me = task.tg.tgid;
    let targets: Vec<i32> = {
        let tree = task.kernel.procs.lock().unwrap();
        match pid {
            p if p > 0 => vec![p],
            0 => tree.members_of(tree.pgid_of(me).unwrap_or(me)).iter().map(|t| t.tgid).collect(),
            -1 => tree.pids().into_iter().filter(|p| *p != INIT_PID && *p != me).collect(),
            p => tree.members_of(-p).iter().map(|t| t.tgid).collect(),
        }
    };
    if targets.is_empty() {
        return Err(Errno::ESRCH.into());
    }
    if pid > 0 {
        kill_process(task, pid, info)?;
    } else if pid == -1 {
        // As Linux's kill(-1): processes the caller may not signal are
        // passed over, and only another error is reported.
        let mut result = Ok(());
        for t in targets {
            match kill_process(task, t, info) {
                Err(SysError::Errno(Errno::EPERM)) => {}
                r => result = r,
            }
        }
        result?;
    } else {
        // A process group: success if any member took it, else the last
        // error.
        let mut any = false;
        let mut last = Ok(());
        for t in targets {
            let r = kill_process(task, t, info);
            any |= r.is_ok();
            last = r;
        }
        if !any {
            last?;
        }
    }
    Ok(0)
}

fn kill_thread(task: &Task, tgid: Option<i32>, tid: i32, info: Option<SigInfo>) -> SysResult {
    if tid <= 0 || tgid.is_some_and(|t| t <= 0) {
        return Err(Errno::EINVAL.into());
    }
    // A thread signalling itself (raise) needs no look-up in the process
    // tree, whose lock every process shares.
    let t = if tid == task.tid() {
        task.shared.clone()
    } else {
        task.kernel.procs.lock().unwrap().thread(tid).ok_or(Errno::ESRCH)?
    };
    if tgid.is_some_and(|g| g != t.tg.tgid) {
        return Err(Errno::ESRCH.into());
    }
    may_signal(task, &t.tg, info.map_or(0, |i| i.signo))?;
    if let Some(i) = info {
        queue_to_thread(&task.kernel, &t, i).map_err(|_| Errno::EAGAIN)?;
    }
    Ok(0)
}

pub fn tgkill(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let info = if a[2] == 0 {
        None
    } else {
        Some(SigInfo::user(valid(a[2])?, code::SI_TKILL, task.tg.tgid, task.tg.creds().uid.real))
    };
    kill_thread(task, Some(a[0] as i32), a[1] as i32, info)
}

pub fn tkill(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let info = if a[1] == 0 {
        None
    } else {
        Some(SigInfo::user(valid(a[1])?, code::SI_TKILL, task.tg.tgid, task.tg.creds().uid.real))
    };
    kill_thread(task, None, a[0] as i32, info)
}

/// The siginfo of rt_sigqueueinfo: only negative codes (or SI_TKILL) may be
/// forged for another process.
fn queued_info(task: &Task, target: i32, sig: u32, addr: u64) -> Result<SigInfo, SysError> {
    let mut raw = [0u8; 128];
    task.mm.copy_in(addr, &mut raw)?;
    let info = SigInfo::from_bytes(sig, &raw);
    if (info.code >= 0 || info.code == code::SI_TKILL) && target != task.tg.tgid {
        return Err(Errno::EPERM.into());
    }
    Ok(info)
}

pub fn rt_sigqueueinfo(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let pid = a[0] as i32;
    let sig = valid(a[1])?;
    let info = queued_info(task, pid, sig, a[2])?;
    kill_process(task, pid, Some(info))?;
    Ok(0)
}

/// pidfd_send_signal's scopes: the descriptor's thread, its process (the
/// default for a process descriptor), or its process group.
const PIDFD_SIGNAL_THREAD: u64 = 1;
const PIDFD_SIGNAL_THREAD_GROUP: u64 = 2;
const PIDFD_SIGNAL_PROCESS_GROUP: u64 = 4;

pub fn pidfd_send_signal(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let scope = a[3];
    if ![0, PIDFD_SIGNAL_THREAD, PIDFD_SIGNAL_THREAD_GROUP, PIDFD_SIGNAL_PROCESS_GROUP].contains(&scope) {
        return Err(Errno::EINVAL.into());
    }
    let f = super::file(task, a[0])?;
    let process = f.ops.downcast_ref::<crate::task::pidfd::PidFd>().map(|p| &p.process).ok_or(Errno::EBADF)?.clone();
    // The process must still be the one the descriptor was made for, not
    // a later one with its pid.
    let live = task.kernel.procs.lock().unwrap().group(process.tgid).is_some_and(|g| Arc::ptr_eq(&g, &process));
    if !live {
        return Err(Errno::ESRCH.into());
    }
    may_signal(task, &process, a[1] as u32)?;
    if a[1] == 0 {
        return Ok(0);
    }
    let sig = valid(a[1])?;
    let info = if a[2] == 0 {
        SigInfo::user(sig, code::SI_USER, task.tg.tgid, task.tg.creds().uid.real)
    } else {
        let signo: i32 = task.mm.read_pod(a[2])?;
        if signo != sig as i32 {
            return Err(Errno::EINVAL.into());
        }
        queued_info(task, process.tgid, sig, a[2])?
    };
    match scope {
        PIDFD_SIGNAL_THREAD => {
            if let Some(t) = process.main_thread() {
                queue_to_thread(&task.kernel, &t, info).map_err(|_| Errno::EAGAIN)?;
            }
        }
        PIDFD_SIGNAL_PROCESS_GROUP => {
            let members = {
                let tree = task.kernel.procs.lock().unwrap();
                tree.members_of(tree.pgid_of(process.tgid).unwrap_or(process.tgid))
            };
            for m in members.iter().filter(|m| !m.state.lock().unwrap().zombie) {
                send_to_group(&task.kernel, m, info);
            }
        }
        _ => {
            if !process.state.lock().unwrap().zombie {
                queue_to_group(&task.kernel, &process, info).map_err(|_| Errno::EAGAIN)?;
            }
        }
    }
    Ok(0)
}

pub fn rt_tgsigqueueinfo(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let sig = valid(a[2])?;
    let info = queued_info(task, a[0] as i32, sig, a[3])?;
    kill_thread(task, Some(a[0] as i32), a[1] as i32, Some(info))
}

pub fn signalfd4(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let mask = read_sigset(task, a[1], a[2])?;
    let flags = a[3] as u32;
    // SFD_CLOEXEC and SFD_NONBLOCK are O_CLOEXEC and O_NONBLOCK.
    if flags & !(g::O_CLOEXEC | g::O_NONBLOCK) != 0 {
        return Err(Errno::EINVAL.into());
    }
    let fd = a[0] as i32;
    if fd != -1 {
        // Another mask for an existing signalfd; the flags are ignored.
        let f = super::file(task, a[0])?;
        f.ops.downcast_ref::<SignalFd>().ok_or(Errno::EINVAL)?.set_mask(mask);
        return Ok(fd as u64);
    }
    let ops = Arc::new(SignalFd::new(mask, Arc::downgrade(&task.kernel)));
    let nonblock = OpenFlags::from_bits_retain(flags & g::O_NONBLOCK);
    let f = OpenFile::new(ops, None, OpenFlags::RDWR | nonblock);
    Ok(task.files.install(f, flags & g::O_CLOEXEC != 0, 0)? as u64)
}

pub fn signalfd(task: &mut Task, a: &[u64; 6]) -> SysResult {
    signalfd4(task, &[a[0], a[1], a[2], 0, 0, 0])
}
