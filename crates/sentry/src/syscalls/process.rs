//! Process and thread system calls.

use std::sync::Arc;

use linux_raw_sys::general as g;
use linux_raw_sys::prctl as pr;

use super::{SysError, SysResult, read_path, start_dir};
use crate::auth::{Creds, Ids, cap, secure};
use crate::errno::Errno;
use crate::fs::{OpenFile, OpenFlags};
use crate::loader::ExecFile;
use crate::signal::SigFields;
use crate::task::exec::ExecRequest;
use crate::task::pidfd::PidFd;
use crate::task::{
    CloneArgs, ExitKind, ExitStatus, ProcessView, Rlimit, Task, ThreadGroup, WaitFor, WaitOptions, WaitOutcome,
    clone_task, wait_child,
};

/// Most arguments or environment entries accepted by execve.
const MAX_ARG_COUNT: usize = 0x7fff_ffff / 8;
/// Longest argument or environment string, with its NUL (Linux's
/// MAX_ARG_STRLEN, 32 pages).
const MAX_ARG_STRLEN: usize = 32 * 4096;

pub fn exit(task: &mut Task, a: &[u64; 6]) -> SysResult {
    task.request_exit(ExitKind::Thread(a[0] as u8));
    Err(SysError::JustReturn)
}

pub fn exit_group(task: &mut Task, a: &[u64; 6]) -> SysResult {
    task.request_exit(ExitKind::Group(ExitStatus::Exited(a[0] as u8)));
    Err(SysError::JustReturn)
}

pub fn clone(task: &mut Task, a: &[u64; 6]) -> SysResult {
    // x86_64 order: flags, stack, parent_tid, child_tid, tls.
    let flags = a[0] & !0xff;
    // clone() returns a CLONE_PIDFD descriptor where CLONE_PARENT_SETTID
    // would write the tid, so the two cannot go together.
    if flags & g::CLONE_PIDFD as u64 != 0 && flags & g::CLONE_PARENT_SETTID as u64 != 0 {
        return Err(Errno::EINVAL.into());
    }
    let args = CloneArgs {
        flags,
        exit_signal: (a[0] & 0xff) as u32,
        stack: a[1],
        parent_tid: a[2],
        child_tid: a[3],
        tls: a[4],
        pidfd: a[2],
    };
    Ok(clone_task(task, &args)? as u64)
}

fn install_pidfd(task: &mut Task, process: Arc<crate::task::ThreadGroup>, nonblock: bool) -> SysResult {
    let flags = if nonblock { OpenFlags::RDWR | OpenFlags::NONBLOCK } else { OpenFlags::RDWR };
    let f = OpenFile::new(Arc::new(PidFd { process }), None, flags);
    // Process descriptors are always close-on-exec.
    Ok(task.files.install(f, true, 0)? as u64)
}

pub fn pidfd_open(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (pid, flags) = (a[0] as i32, a[1] as u32);
    if flags & !g::O_NONBLOCK != 0 || pid <= 0 {
        return Err(Errno::EINVAL.into());
    }
    let (process, is_thread) = {
        let tree = task.kernel.procs.lock().unwrap();
        (tree.group(pid), tree.thread(pid).is_some())
    };
    match process {
        Some(p) => install_pidfd(task, p, flags != 0),
        // A thread that does not lead its process has no process
        // descriptor (thread descriptors, PIDFD_THREAD, are not provided).
        None if is_thread => Err(Errno::ENOENT.into()),
        None => Err(Errno::ESRCH.into()),
    }
}

pub fn clone3(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let size = a[1] as usize;
    if !(64..=4096).contains(&size) {
        return Err(Errno::EINVAL.into());
    }
    let mut raw = vec![0u8; size];
    task.mm.copy_in(a[0], &mut raw)?;
    if raw[88.min(size)..].iter().any(|b| *b != 0) {
        // Fields this kernel does not know must be zero.
        return Err(Errno::E2BIG.into());
    }
    let w = |i: usize| u64::from_le_bytes(raw[8 * i..8 * i + 8].try_into().unwrap());
    // w(1) is the pidfd pointer, used only with CLONE_PIDFD.
    let (flags, child_tid, parent_tid, exit_signal, stack, stack_size, tls) =
        (w(0), w(2), w(3), w(4), w(5), w(6), w(7));
    let set_tid_size = if size >= 80 { w(9) } else { 0 };
    let cgroup = if size >= 88 { w(10) } else { 0 };
    if set_tid_size != 0 || cgroup != 0 || exit_signal > 64 {
        return Err(Errno::EINVAL.into());
    }
    if (stack == 0) != (stack_size == 0) {
        return Err(Errno::EINVAL.into());
    }
    let args = CloneArgs {
        flags,
        exit_signal: exit_signal as u32,
        stack: if stack == 0 { 0 } else { stack + stack_size },
        parent_tid,
        child_tid,
        tls,
        pidfd: w(1),
    };
    Ok(clone_task(task, &args)? as u64)
}

pub fn fork(task: &mut Task, _: &[u64; 6]) -> SysResult {
    let args = CloneArgs { exit_signal: g::SIGCHLD, ..Default::default() };
    Ok(clone_task(task, &args)? as u64)
}

pub fn vfork(task: &mut Task, _: &[u64; 6]) -> SysResult {
    let args =
        CloneArgs { flags: (g::CLONE_VM | g::CLONE_VFORK) as u64, exit_signal: g::SIGCHLD, ..Default::default() };
    Ok(clone_task(task, &args)? as u64)
}

fn wait_options(options: u64, waitid: bool) -> Result<WaitOptions, SysError> {
    let o = options as u32;
    let known = g::WNOHANG
        | g::WUNTRACED
        | g::WCONTINUED
        | g::__WNOTHREAD
        | g::__WALL
        | g::__WCLONE
        | if waitid { g::WEXITED | g::WNOWAIT } else { 0 };
    if o & !known != 0 {
        return Err(Errno::EINVAL.into());
    }
    let opts = WaitOptions {
        exited: !waitid || o & g::WEXITED != 0,
        stopped: o & g::WUNTRACED != 0,
        continued: o & g::WCONTINUED != 0,
        nohang: o & g::WNOHANG != 0,
        nowait: waitid && o & g::WNOWAIT != 0,
        all: o & g::__WALL != 0,
        clone_only: o & g::__WCLONE != 0,
    };
    if waitid && !(opts.exited || opts.stopped || opts.continued) {
        return Err(Errno::EINVAL.into());
    }
    Ok(opts)
}

fn write_rusage(task: &Task, addr: u64, out: Option<&WaitOutcome>) -> Result<(), SysError> {
    if addr == 0 {
        return Ok(());
    }
    let mut r = <g::rusage as crate::abi::Pod>::zeroed();
    if let Some(o) = out {
        r.ru_utime = timeval_of(o.cpu.user);
        r.ru_stime = timeval_of(o.cpu.system);
    }
    task.mm.write_pod(addr, &r)?;
    Ok(())
}

pub fn wait4(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let opts = wait_options(a[2], false)?;
    let pid = a[0] as i32;
    let which = match pid {
        -1 => WaitFor::Any,
        0 => WaitFor::Pgid(task.kernel.procs.lock().unwrap().pgid_of(task.tg.tgid).unwrap_or(task.tg.tgid)),
        p if p < 0 => WaitFor::Pgid(-p),
        p => WaitFor::Pid(p),
    };
    let out = wait_child(task, which, opts)?;
    if let Some(o) = &out
        && a[1] != 0
    {
        task.mm.write_pod(a[1], &o.status)?;
    }
    write_rusage(task, a[3], out.as_ref())?;
    Ok(out.map(|o| o.pid as u64).unwrap_or(0))
}

pub fn waitid(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let mut opts = wait_options(a[3], true)?;
    let id = a[1] as i32;
    let mut pidfd_nonblock = false;
    let which = match a[0] as u32 {
        g::P_PIDFD => {
            let f = super::file(task, a[1])?;
            let process = f.ops.downcast_ref::<crate::task::pidfd::PidFd>().map(|p| &p.process).ok_or(Errno::EBADF)?;
            // A non-blocking process descriptor makes the wait WNOHANG,
            // failing with EAGAIN when nothing is ready.
            pidfd_nonblock = f.flags().contains(OpenFlags::NONBLOCK) && !opts.nohang;
            opts.nohang |= pidfd_nonblock;
            WaitFor::Pid(process.tgid)
        }
        g::P_ALL => WaitFor::Any,
        g::P_PID if id > 0 => WaitFor::Pid(id),
        g::P_PGID if id >= 0 => WaitFor::Pgid(if id == 0 {
            task.kernel.procs.lock().unwrap().pgid_of(task.tg.tgid).unwrap_or(task.tg.tgid)
        } else {
            id
        }),
        _ => return Err(Errno::EINVAL.into()),
    };
    let out = wait_child(task, which, opts)?;
    if out.is_none() && pidfd_nonblock {
        return Err(Errno::EAGAIN.into());
    }
    if a[2] != 0 {
        let info = match &out {
            Some(o) => crate::signal::SigInfo {
                signo: g::SIGCHLD,
                errno: 0,
                code: o.code,
                fields: SigFields::Child { pid: o.pid, uid: o.uid, status: o.si_status, utime: 0, stime: 0 },
            }
            .to_bytes(),
            None => [0u8; 128],
        };
        task.mm.copy_out(a[2], &info)?;
    }
    write_rusage(task, a[4], out.as_ref())?;
    Ok(0)
}

pub fn setpgid(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let me = task.tg.tgid;
    let pid = if a[0] as i32 == 0 { me } else { a[0] as i32 };
    let pgid = if a[1] as i32 == 0 { pid } else { a[1] as i32 };
    if pgid < 0 {
        return Err(Errno::EINVAL.into());
    }
    let mut tree = task.kernel.procs.lock().unwrap();
    let target = tree.group(pid).ok_or(Errno::ESRCH)?;
    if pid != me {
        if tree.parent_of(pid) != Some(me) {
            return Err(Errno::ESRCH.into());
        }
        if target.state.lock().unwrap().did_exec {
            return Err(Errno::EACCES.into());
        }
    }
    let my_sid = tree.sid_of(me);
    if tree.sid_of(pid) != my_sid {
        return Err(Errno::EPERM.into());
    }
    if tree.sid_of(pid) == Some(pid) {
        return Err(Errno::EPERM.into());
    }
    if pgid != pid && !tree.members_of(pgid).iter().any(|m| tree.sid_of(m.tgid) == my_sid) {
        return Err(Errno::EPERM.into());
    }
    tree.set_pgid(pid, pgid);
    Ok(0)
}

pub fn setsid(task: &mut Task, _: &[u64; 6]) -> SysResult {
    let me = task.tg.tgid;
    let mut tree = task.kernel.procs.lock().unwrap();
    // A process group with the caller's id exists: it leads a group.
    if tree.group_exists(me) {
        return Err(Errno::EPERM.into());
    }
    tree.set_pgid(me, me);
    tree.set_sid(me, me);
    Ok(me as u64)
}

pub fn getsid(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let pid = if a[0] as i32 == 0 { task.tg.tgid } else { a[0] as i32 };
    let tree = task.kernel.procs.lock().unwrap();
    Ok(tree.sid_of(pid).ok_or(Errno::ESRCH)? as u64)
}

pub fn getpid(task: &mut Task, _: &[u64; 6]) -> SysResult {
    Ok(task.tg.tgid as u64)
}

pub fn gettid(task: &mut Task, _: &[u64; 6]) -> SysResult {
    Ok(task.tid() as u64)
}

pub fn getppid(task: &mut Task, _: &[u64; 6]) -> SysResult {
    Ok(task.ppid() as u64)
}

fn creds(task: &Task) -> Arc<Creds> {
    task.tg.creds()
}

/// Replaces the process's credentials with what `f` makes of a copy of
/// them; on error they stay as they were. As Linux's commit_creds, a
/// change of effective or file-system ids, or a wider permitted set, makes
/// the process undumpable (suid_dumpable's default).
fn change_creds<R>(task: &Task, f: impl FnOnce(&mut Creds) -> Result<R, Errno>) -> Result<R, Errno> {
    let mut c = task.tg.creds.lock().unwrap();
    let mut new = Creds::clone(&c);
    let r = f(&mut new)?;
    let old = std::mem::replace(&mut *c, Arc::new(new.clone()));
    drop(c);
    // The other threads' getuid and friends answer the new ids too, also
    // where the platform answers them.
    let me = task.tid();
    for t in task.tg.threads.lock().unwrap().iter().filter(|t| t.tid() != me) {
        t.refresh_published_ids();
    }
    if old.uid.effective != new.uid.effective
        || old.uid.fs != new.uid.fs
        || old.gid.effective != new.gid.effective
        || old.gid.fs != new.gid.fs
        || new.caps.permitted & !old.caps.permitted != 0
    {
        task.tg.state.lock().unwrap().undumpable = true;
    }
    Ok(r)
}

pub fn getuid(task: &mut Task, _: &[u64; 6]) -> SysResult {
    Ok(creds(task).uid.real as u64)
}
pub fn geteuid(task: &mut Task, _: &[u64; 6]) -> SysResult {
    Ok(creds(task).uid.effective as u64)
}
pub fn getgid(task: &mut Task, _: &[u64; 6]) -> SysResult {
    Ok(creds(task).gid.real as u64)
}
pub fn getegid(task: &mut Task, _: &[u64; 6]) -> SysResult {
    Ok(creds(task).gid.effective as u64)
}

fn write_ids(task: &Task, addrs: [u64; 3], ids: Ids) -> SysResult {
    for (a, v) in addrs.into_iter().zip([ids.real, ids.effective, ids.saved]) {
        task.mm.write_pod(a, &v)?;
    }
    Ok(0)
}

pub fn getresuid(task: &mut Task, a: &[u64; 6]) -> SysResult {
    write_ids(task, [a[0], a[1], a[2]], creds(task).uid)
}
pub fn getresgid(task: &mut Task, a: &[u64; 6]) -> SysResult {
    write_ids(task, [a[0], a[1], a[2]], creds(task).gid)
}

pub fn getgroups(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let groups = creds(task).groups.clone();
    let n = a[0] as i32;
    if n < 0 {
        return Err(Errno::EINVAL.into());
    }
    if n == 0 {
        return Ok(groups.len() as u64);
    }
    if (n as usize) < groups.len() {
        return Err(Errno::EINVAL.into());
    }
    let bytes: Vec<u8> = groups.iter().flat_map(|g| g.to_le_bytes()).collect();
    task.mm.copy_out(a[1], &bytes)?;
    Ok(groups.len() as u64)
}

/// Applies `f` to the user ids (`user`) or the group ids of the process;
/// a change of user ids changes the capabilities as Linux's does.
fn change_ids(task: &Task, user: bool, f: impl FnOnce(&mut Ids, bool) -> Result<(), Errno>) -> SysResult {
    change_creds(task, |c| {
        let old = c.uid;
        if user {
            let privileged = c.may_set_uid();
            f(&mut c.uid, privileged)?;
            c.fix_caps_after_setuid(&old);
        } else {
            let privileged = c.may_set_gid();
            f(&mut c.gid, privileged)?;
        }
        Ok(())
    })?;
    Ok(0)
}

pub fn setuid(task: &mut Task, a: &[u64; 6]) -> SysResult {
    change_ids(task, true, |ids, p| ids.set(a[0] as u32, p))
}
pub fn setgid(task: &mut Task, a: &[u64; 6]) -> SysResult {
    change_ids(task, false, |ids, p| ids.set(a[0] as u32, p))
}
pub fn setreuid(task: &mut Task, a: &[u64; 6]) -> SysResult {
    change_ids(task, true, |ids, p| ids.set_re(a[0] as u32, a[1] as u32, p))
}
pub fn setregid(task: &mut Task, a: &[u64; 6]) -> SysResult {
    change_ids(task, false, |ids, p| ids.set_re(a[0] as u32, a[1] as u32, p))
}
pub fn setresuid(task: &mut Task, a: &[u64; 6]) -> SysResult {
    change_ids(task, true, |ids, p| ids.set_res(a[0] as u32, a[1] as u32, a[2] as u32, p))
}
pub fn setresgid(task: &mut Task, a: &[u64; 6]) -> SysResult {
    change_ids(task, false, |ids, p| ids.set_res(a[0] as u32, a[1] as u32, a[2] as u32, p))
}
pub fn setfsuid(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let old = change_creds(task, |c| {
        let p = c.may_set_uid();
        let old = c.uid.set_fs(a[0] as u32, p);
        c.fix_caps_after_setfsuid(old);
        Ok(old)
    })?;
    Ok(old as u64)
}
pub fn setfsgid(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let old = change_creds(task, |c| {
        let p = c.may_set_gid();
        Ok(c.gid.set_fs(a[0] as u32, p))
    })?;
    Ok(old as u64)
}

use crate::auth::NGROUPS_MAX;

pub fn setgroups(task: &mut Task, a: &[u64; 6]) -> SysResult {
    if a[0] > NGROUPS_MAX {
        return Err(Errno::EINVAL.into());
    }
    let mut bytes = vec![0u8; a[0] as usize * 4];
    task.mm.copy_in(a[1], &mut bytes)?;
    let groups: Vec<u32> = bytes.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
    change_creds(task, |c| {
        if !c.may_set_gid() {
            return Err(Errno::EPERM);
        }
        c.groups = groups;
        Ok(())
    })?;
    Ok(0)
}

pub fn set_tid_address(task: &mut Task, a: &[u64; 6]) -> SysResult {
    task.clear_child_tid = a[0];
    Ok(task.tid() as u64)
}

pub fn set_robust_list(task: &mut Task, a: &[u64; 6]) -> SysResult {
    if a[1] != size_of::<g::robust_list_head>() as u64 {
        return Err(Errno::EINVAL.into());
    }
    task.robust_list = (a[0], a[1]);
    Ok(0)
}

pub fn get_robust_list(task: &mut Task, a: &[u64; 6]) -> SysResult {
    if a[0] != 0 && a[0] as i32 != task.tid() {
        return Err(Errno::ESRCH.into());
    }
    task.mm.write_pod(a[1], &task.robust_list.0)?;
    task.mm.write_pod(a[2], &task.robust_list.1)?;
    Ok(0)
}

pub fn arch_prctl(task: &mut Task, a: &[u64; 6]) -> SysResult {
    const ARCH_SET_GS: u64 = 0x1001;
    const ARCH_SET_FS: u64 = 0x1002;
    const ARCH_GET_FS: u64 = 0x1003;
    const ARCH_GET_GS: u64 = 0x1004;
    let canonical = |v: u64| v < (1 << 47);
    match a[0] {
        ARCH_SET_FS if canonical(a[1]) => {
            task.regs.fs_base = a[1];
            Ok(0)
        }
        ARCH_SET_GS if canonical(a[1]) => {
            task.regs.gs_base = a[1];
            Ok(0)
        }
        ARCH_SET_FS | ARCH_SET_GS => Err(Errno::EPERM.into()),
        ARCH_GET_FS => {
            task.mm.write_pod(a[1], &task.regs.fs_base)?;
            Ok(0)
        }
        ARCH_GET_GS => {
            task.mm.write_pod(a[1], &task.regs.gs_base)?;
            Ok(0)
        }
        _ => Err(Errno::EINVAL.into()),
    }
}

pub fn prctl(task: &mut Task, a: &[u64; 6]) -> SysResult {
    match a[0] as u32 {
        pr::PR_SET_NAME => {
            // The calling thread's name; the main thread's is the process's.
            // Up to 15 bytes or the terminator, never reading past either.
            let mut name = Vec::with_capacity(15);
            for i in 0..15 {
                let mut b = [0u8];
                task.mm.copy_in(a[1] + i, &mut b)?;
                if b[0] == 0 {
                    break;
                }
                name.push(b[0]);
            }
            if task.tid() == task.tg.tgid {
                task.tg.info.lock().unwrap().comm = name.clone();
            }
            *task.shared.comm.lock().unwrap() = name;
            Ok(0)
        }
        pr::PR_GET_NAME => {
            let mut name = task.shared.comm.lock().unwrap().clone();
            name.resize(16, 0);
            task.mm.copy_out(a[1], &name)?;
            Ok(0)
        }
        pr::PR_GET_DUMPABLE => Ok(u64::from(!task.tg.state.lock().unwrap().undumpable)),
        pr::PR_SET_DUMPABLE if a[1] <= 1 => {
            task.tg.state.lock().unwrap().undumpable = a[1] == 0;
            Ok(0)
        }
        pr::PR_SET_NO_NEW_PRIVS if a[1] == 1 && a[2] == 0 && a[3] == 0 && a[4] == 0 => {
            task.shared.no_new_privs.store(true, std::sync::atomic::Ordering::Relaxed);
            Ok(0)
        }
        pr::PR_GET_NO_NEW_PRIVS if a[1] == 0 && a[2] == 0 && a[3] == 0 && a[4] == 0 => {
            Ok(u64::from(task.shared.no_new_privs.load(std::sync::atomic::Ordering::Relaxed)))
        }
        pr::PR_SET_PDEATHSIG if a[1] <= 64 => {
            task.tg.state.lock().unwrap().pdeath_signal = a[1] as u32;
            Ok(0)
        }
        pr::PR_GET_PDEATHSIG => {
            let sig = task.tg.state.lock().unwrap().pdeath_signal as i32;
            task.mm.write_pod(a[1], &sig)?;
            Ok(0)
        }
        pr::PR_GET_SECCOMP => Ok(0),
        pr::PR_CAPBSET_READ
        | pr::PR_CAPBSET_DROP
        | pr::PR_GET_KEEPCAPS
        | pr::PR_SET_KEEPCAPS
        | pr::PR_GET_SECUREBITS
        | pr::PR_SET_SECUREBITS
        | pr::PR_CAP_AMBIENT => prctl_caps(task, a),
        pr::PR_GET_TIMERSLACK => Ok(50_000),
        pr::PR_SET_TIMERSLACK => Ok(0),
        pr::PR_SET_CHILD_SUBREAPER => {
            task.tg.state.lock().unwrap().child_subreaper = a[1] != 0;
            Ok(0)
        }
        pr::PR_GET_CHILD_SUBREAPER => {
            let on = task.tg.state.lock().unwrap().child_subreaper;
            task.mm.write_pod(a[1], &i32::from(on))?;
            Ok(0)
        }
        _ => Err(Errno::EINVAL.into()),
    }
}

/// Restartable sequences are not provided; the C library then does
/// without them (as on kernels built without CONFIG_RSEQ).
pub fn rseq(_task: &mut Task, _: &[u64; 6]) -> SysResult {
    Err(Errno::ENOSYS.into())
}

/// The room execve gives the argument and environment strings with their
/// pointers, as Linux's bprm_stack_limits: a quarter of the stack limit,
/// at most 6 MiB (three quarters of _STK_LIM), at least ARG_MAX (128 KiB).
/// Past it, execve fails with E2BIG; so the copies the sentry makes of
/// them are bounded too, however often one string is passed.
fn exec_strings_room(task: &Task) -> usize {
    let stack = task.tg.rlimit(g::RLIMIT_STACK).cur;
    (stack / 4).clamp(128 << 10, 6 << 20) as usize
}

/// Reads a NULL-terminated array of strings (argv or envp), counting each
/// string and its pointer against `room`.
fn read_string_array(task: &Task, addr: u64, room: &mut usize) -> Result<Vec<Vec<u8>>, SysError> {
    let mut out = Vec::new();
    if addr == 0 {
        return Ok(out);
    }
    loop {
        if out.len() >= MAX_ARG_COUNT {
            return Err(Errno::E2BIG.into());
        }
        let p: u64 = task.mm.read_pod(addr + 8 * out.len() as u64)?;
        if p == 0 {
            return Ok(out);
        }
        let s = task.mm.read_cstring(p, MAX_ARG_STRLEN - 1).map_err(|e| match e {
            crate::mm::MmError::TooLong => Errno::E2BIG,
            _ => Errno::EFAULT,
        })?;
        *room = room.checked_sub(s.len() + 1 + 8).ok_or(Errno::E2BIG)?;
        out.push(s);
    }
}

fn execve_common(task: &mut Task, req: ExecRequest, argv_addr: u64, envp_addr: u64) -> SysResult {
    let mut room = exec_strings_room(task);
    let argv = read_string_array(task, argv_addr, &mut room)?;
    let envp = read_string_array(task, envp_addr, &mut room)?;
    crate::task::exec::exec(task, &req, argv, envp)?;
    Ok(0)
}

pub fn execve(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let path = read_path(task, a[0])?;
    execve_common(task, ExecRequest::path(&path), a[1], a[2])
}

/// execveat: a path from a directory descriptor, or with AT_EMPTY_PATH the
/// open file itself (whatever its name now is, or whether the caller's root
/// still reaches it). Such a program goes by the name /dev/fd/N[/path].
pub fn execveat(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (dirfd, flags) = (a[0] as i32, a[4] as u32);
    if flags & !(g::AT_EMPTY_PATH | g::AT_SYMLINK_NOFOLLOW) != 0 {
        return Err(Errno::EINVAL.into());
    }
    let follow = flags & g::AT_SYMLINK_NOFOLLOW == 0;
    let path = read_path(task, a[1])?;
    let req = if path.is_empty() {
        if flags & g::AT_EMPTY_PATH == 0 {
            return Err(Errno::ENOENT.into());
        }
        let f = super::file(task, a[0])?;
        // A file without a name (a pipe) is nothing to execute.
        let d = f.dentry.clone().ok_or(Errno::EACCES)?;
        ExecRequest {
            file: ExecFile::Open(d),
            filename: format!("/dev/fd/{dirfd}").into_bytes(),
            comm_from_file: true,
            filename_inaccessible: task.files.entry(dirfd)?.cloexec,
        }
    } else if path[0] == b'/' || dirfd == g::AT_FDCWD {
        ExecRequest { file: ExecFile::Path { start: None, path: path.clone(), follow }, ..ExecRequest::path(&path) }
    } else {
        let dir = start_dir(task, a[0], &path)?;
        let mut filename = format!("/dev/fd/{dirfd}/").into_bytes();
        filename.extend_from_slice(&path);
        ExecRequest {
            file: ExecFile::Path { start: dir, path, follow },
            filename,
            comm_from_file: false,
            filename_inaccessible: task.files.entry(dirfd)?.cloexec,
        }
    };
    execve_common(task, req, a[2], a[3])
}

fn rlimit_in(task: &Task, addr: u64) -> Result<Rlimit, SysError> {
    let r: g::rlimit64 = task.mm.read_pod(addr)?;
    Ok(Rlimit { cur: r.rlim_cur, max: r.rlim_max })
}

fn rlimit_out(task: &Task, addr: u64, r: Rlimit) -> Result<(), SysError> {
    let mut o = <g::rlimit64 as crate::abi::Pod>::zeroed();
    o.rlim_cur = r.cur;
    o.rlim_max = r.max;
    task.mm.write_pod(addr, &o)?;
    Ok(())
}

use crate::fd::NR_OPEN;

/// The process whose limits an rlimit call reads or changes.
enum LimitTarget {
    /// The caller's process: its descriptor table and address space are
    /// the calling thread's.
    Caller,
    /// Another process (prlimit with its pid), through what it holds.
    Other(Arc<ThreadGroup>, Option<ProcessView>),
}

impl LimitTarget {
    fn group<'a>(&'a self, task: &'a Task) -> &'a Arc<ThreadGroup> {
        match self {
            LimitTarget::Caller => &task.tg,
            LimitTarget::Other(tg, _) => tg,
        }
    }
}

/// The process `pid` names for prlimit (0: the caller's), if the caller
/// may act on it: its own, one whose real, effective and saved ids all are
/// the caller's real ones, or any for a privileged caller
/// (CAP_SYS_RESOURCE).
fn limit_target(task: &Task, pid: i32) -> Result<LimitTarget, Errno> {
    if pid == 0 {
        return Ok(LimitTarget::Caller);
    }
    let thread = task.kernel.procs.lock().unwrap().thread(pid).ok_or(Errno::ESRCH)?;
    let tg = thread.tg.clone();
    if Arc::ptr_eq(&tg, &task.tg) {
        return Ok(LimitTarget::Caller);
    }
    let me = creds(task);
    let them = tg.creds.lock().unwrap().clone();
    let same =
        |mine: &Ids, theirs: &Ids| [theirs.real, theirs.effective, theirs.saved].iter().all(|&id| id == mine.real);
    let permitted = (same(&me.uid, &them.uid) && same(&me.gid, &them.gid)) || me.may_exceed_limits();
    if !permitted {
        return Err(Errno::EPERM);
    }
    let view = tg.view.lock().unwrap().clone();
    Ok(LimitTarget::Other(tg, view))
}

/// Changes one limit as Linux's do_prlimit does; returns the old value.
fn set_rlimit(task: &Task, target: &LimitTarget, resource: u32, new: Rlimit) -> Result<Rlimit, SysError> {
    if new.cur > new.max {
        return Err(Errno::EINVAL.into());
    }
    if resource == g::RLIMIT_NOFILE && new.max > NR_OPEN {
        return Err(Errno::EPERM.into());
    }
    let tg = target.group(task);
    let mut l = tg.rlimits.lock().unwrap();
    let old = l.0[resource as usize];
    if new.max > old.max && !creds(task).may_exceed_limits() {
        return Err(Errno::EPERM.into());
    }
    l.0[resource as usize] = new;
    drop(l);
    let (files, mm) = match target {
        LimitTarget::Caller => (Some(&task.files), Some(&task.mm)),
        LimitTarget::Other(_, view) => (view.as_ref().map(|v| &v.files), view.as_ref().map(|v| &v.mm)),
    };
    match resource {
        g::RLIMIT_NOFILE => {
            if let Some(f) = files {
                f.set_limit(new.cur.min(NR_OPEN) as u32);
            }
        }
        g::RLIMIT_STACK => {
            if let Some(mm) = mm {
                mm.set_stack_limit(new.cur);
            }
        }
        g::RLIMIT_CPU if new.cur != crate::task::RLIM_INFINITY => task.kernel.timers.watch_cpu_limit(tg.tgid),
        _ => {}
    }
    Ok(old)
}

pub fn prlimit64(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (pid, resource) = (a[0] as i32, a[1] as u32);
    let new = if a[2] != 0 { Some(rlimit_in(task, a[2])?) } else { None };
    let target = limit_target(task, pid)?;
    if resource >= 16 {
        return Err(Errno::EINVAL.into());
    }
    let old = match new {
        Some(new) => set_rlimit(task, &target, resource, new)?,
        None => target.group(task).rlimit(resource),
    };
    if a[3] != 0 {
        rlimit_out(task, a[3], old)?;
    }
    Ok(0)
}

pub fn getrlimit(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let resource = a[0] as u32;
    if resource >= 16 {
        return Err(Errno::EINVAL.into());
    }
    rlimit_out(task, a[1], task.tg.rlimit(resource))?;
    Ok(0)
}

pub fn setrlimit(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let resource = a[0] as u32;
    if resource >= 16 {
        return Err(Errno::EINVAL.into());
    }
    let new = rlimit_in(task, a[1])?;
    set_rlimit(task, &LimitTarget::Caller, resource, new)?;
    Ok(0)
}

fn timeval_of(d: std::time::Duration) -> g::__kernel_old_timeval {
    let mut t = <g::__kernel_old_timeval as crate::abi::Pod>::zeroed();
    t.tv_sec = d.as_secs() as _;
    t.tv_usec = d.subsec_micros() as _;
    t
}

pub fn getrusage(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let who = a[0] as i32;
    if ![g::RUSAGE_SELF as i32, g::RUSAGE_CHILDREN, g::RUSAGE_THREAD as i32].contains(&who) {
        return Err(Errno::EINVAL.into());
    }
    let mut r = <g::rusage as crate::abi::Pod>::zeroed();
    let t = if who == g::RUSAGE_CHILDREN {
        task.tg.children_cpu_times()
    } else {
        r.ru_maxrss = (task.mm.resident_pages() * 4) as _;
        if who == g::RUSAGE_THREAD as i32 { task.shared.cpu_times() } else { task.tg.cpu_times() }
    };
    r.ru_utime = timeval_of(t.user);
    r.ru_stime = timeval_of(t.system);
    task.mm.write_pod(a[1], &r)?;
    Ok(0)
}

pub fn times(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let ticks = |d: std::time::Duration| (d.as_millis() / 10) as u64;
    if a[0] != 0 {
        let (own, children) = (task.tg.cpu_times(), task.tg.children_cpu_times());
        let v = [ticks(own.user), ticks(own.system), ticks(children.user), ticks(children.system)];
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        task.mm.copy_out(a[0], &bytes)?;
    }
    Ok(ticks(task.kernel.started.elapsed()))
}

/// personality(2): PER_LINUX, with ADDR_NO_RANDOMIZE (which debuggers set
/// before they run a program) honoured as the sentry lays out every
/// program: at the same addresses each time. Other personas are refused.
pub fn personality(task: &mut Task, a: &[u64; 6]) -> SysResult {
    const ADDR_NO_RANDOMIZE: u32 = 0x0004_0000;
    let old = task.tg.personality.load(std::sync::atomic::Ordering::Relaxed);
    match a[0] as u32 {
        0xffff_ffff => Ok(old as u64),
        p if p & !ADDR_NO_RANDOMIZE == 0 => {
            task.tg.personality.store(p, std::sync::atomic::Ordering::Relaxed);
            Ok(old as u64)
        }
        _ => Err(Errno::EINVAL.into()),
    }
}

/// The words of capability data a capget/capset header's version moves
/// (one 32-bit word of each set for version 1, two since), or EINVAL
/// with the preferred version written back, as Linux's
/// cap_validate_magic.
fn cap_words(task: &Task, header: u64) -> Result<usize, SysError> {
    const V1: u32 = 0x1998_0330;
    const V2: u32 = 0x2007_1026;
    const V3: u32 = 0x2008_0522;
    match task.mm.read_pod::<u32>(header)? {
        V1 => Ok(1),
        V2 | V3 => Ok(2),
        _ => {
            task.mm.write_pod(header, &V3)?;
            Err(Errno::EINVAL.into())
        }
    }
}

pub fn capget(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let words = match cap_words(task, a[0]) {
        // Asking with no data pointer is how the version is learnt.
        Err(SysError::Errno(Errno::EINVAL)) if a[1] == 0 => return Ok(0),
        r => r?,
    };
    let pid: i32 = task.mm.read_pod(a[0] + 4)?;
    if pid < 0 {
        return Err(Errno::EINVAL.into());
    }
    if a[1] == 0 {
        return Ok(0);
    }
    let caps = if pid == 0 || pid == task.tid() {
        creds(task).caps
    } else {
        let t = task.kernel.procs.lock().unwrap().thread(pid).ok_or(Errno::ESRCH)?;
        t.tg.creds().caps
    };
    let mut data = Vec::with_capacity(12 * words);
    for w in 0..words {
        for set in [caps.effective, caps.permitted, caps.inheritable] {
            data.extend_from_slice(&((set >> (32 * w)) as u32).to_le_bytes());
        }
    }
    task.mm.copy_out(a[1], &data)?;
    Ok(0)
}

pub fn capset(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let words = cap_words(task, a[0])?;
    let pid: i32 = task.mm.read_pod(a[0] + 4)?;
    // Only one's own capabilities may be set.
    if pid != 0 && pid != task.tid() {
        return Err(Errno::EPERM.into());
    }
    let mut data = vec![0u8; 12 * words];
    task.mm.copy_in(a[1], &mut data)?;
    let mut sets = [0u64; 3];
    for (i, chunk) in data.chunks_exact(4).enumerate() {
        let v = u32::from_le_bytes(chunk.try_into().unwrap()) as u64;
        sets[i % 3] |= v << (32 * (i / 3));
    }
    let [effective, permitted, inheritable] = sets;
    change_creds(task, |c| c.set_caps(effective, permitted, inheritable))?;
    Ok(0)
}

/// The capability parts of prctl(2).
fn prctl_caps(task: &Task, a: &[u64; 6]) -> SysResult {
    let valid = |c: u64| c <= cap::LAST as u64;
    match a[0] as u32 {
        pr::PR_CAPBSET_READ => {
            if !valid(a[1]) {
                return Err(Errno::EINVAL.into());
            }
            Ok(creds(task).caps.bounding >> a[1] & 1)
        }
        pr::PR_CAPBSET_DROP => {
            change_creds(task, |c| {
                if !c.has(cap::SETPCAP) {
                    return Err(Errno::EPERM);
                }
                if !valid(a[1]) {
                    return Err(Errno::EINVAL);
                }
                c.caps.bounding &= !(1 << a[1]);
                Ok(())
            })?;
            Ok(0)
        }
        pr::PR_GET_KEEPCAPS => Ok(u64::from(creds(task).secure(secure::KEEP_CAPS))),
        pr::PR_SET_KEEPCAPS => {
            if a[1] > 1 {
                return Err(Errno::EINVAL.into());
            }
            change_creds(task, |c| c.set_keep_caps(a[1] == 1))?;
            Ok(0)
        }
        pr::PR_GET_SECUREBITS => Ok(u64::from(creds(task).securebits)),
        pr::PR_SET_SECUREBITS => {
            change_creds(task, |c| c.set_securebits(a[1]))?;
            Ok(0)
        }
        pr::PR_CAP_AMBIENT => {
            let op = a[1] as u32;
            if op == pr::PR_CAP_AMBIENT_CLEAR_ALL {
                if a[2] | a[3] | a[4] != 0 {
                    return Err(Errno::EINVAL.into());
                }
                change_creds(task, |c| {
                    c.caps.ambient = 0;
                    Ok(())
                })?;
                return Ok(0);
            }
            if !valid(a[2]) || a[3] | a[4] != 0 {
                return Err(Errno::EINVAL.into());
            }
            let bit = 1u64 << a[2];
            match op {
                pr::PR_CAP_AMBIENT_IS_SET => Ok(u64::from(creds(task).caps.ambient & bit != 0)),
                pr::PR_CAP_AMBIENT_RAISE | pr::PR_CAP_AMBIENT_LOWER => {
                    change_creds(task, |c| {
                        if op == pr::PR_CAP_AMBIENT_LOWER {
                            c.caps.ambient &= !bit;
                            Ok(())
                        } else {
                            c.raise_ambient(a[2] as u32)
                        }
                    })?;
                    Ok(0)
                }
                _ => Err(Errno::EINVAL.into()),
            }
        }
        _ => Err(Errno::EINVAL.into()),
    }
}

pub fn getpgrp(task: &mut Task, _: &[u64; 6]) -> SysResult {
    let me = task.tg.tgid;
    Ok(task.kernel.procs.lock().unwrap().pgid_of(me).unwrap_or(me) as u64)
}

pub fn getpgid(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let pid = if a[0] as i32 == 0 { task.tg.tgid } else { a[0] as i32 };
    Ok(task.kernel.procs.lock().unwrap().pgid_of(pid).ok_or(Errno::ESRCH)? as u64)
}
