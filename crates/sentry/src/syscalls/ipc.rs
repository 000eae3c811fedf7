//! System V IPC system calls: semaphores, message queues, shared memory.
//! The objects live in the sandbox's namespace ([`crate::ipc`]); this
//! layer reads and writes the callers' structures.

use std::time::Instant;

use platform::Access;

use linux_raw_sys::general as g;

use super::{Args, SysError, SysResult, read_timespec};
use crate::errno::Errno;
use crate::fs::OpenFlags;
use crate::ipc::{self, IpcPerm, get_u64, mqueue, msg, sem, shm};
use crate::mm::{Backing, MapFlags, PAGE};
use crate::net::SocketFile;
use crate::net::netlink::NetlinkSocket;
use crate::signal::{SigFields, SigInfo};
use crate::task::Task;
use crate::timers;

// ---- semaphores ----

pub fn semget(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let creds = task.tg.creds();
    Ok(task.kernel.ipc.sem.get(a.int(0), a.int(1), a.int(2), &creds)? as u64)
}

pub fn semop(task: &mut Task, a: &[u64; 6]) -> SysResult {
    semtimedop_at(task, a, None)
}

pub fn semtimedop(task: &mut Task, a: &[u64; 6]) -> SysResult {
    semtimedop_at(task, a, Some(a.ptr(3)))
}

fn semtimedop_at(task: &mut Task, a: &[u64; 6], timeout: Option<u64>) -> SysResult {
    let (id, sops, nsops) = (a.int(0), a.ptr(1), a.size(2));
    if nsops < 1 || id < 0 {
        return Err(Errno::EINVAL.into());
    }
    if nsops > sem::SEMOPM {
        return Err(Errno::E2BIG.into());
    }
    let mut raw = vec![0u8; nsops * 6];
    task.mm.copy_in(sops, &mut raw)?;
    let ops: Vec<sem::SemOp> = raw
        .chunks_exact(6)
        .map(|c| sem::SemOp {
            num: u16::from_ne_bytes([c[0], c[1]]),
            op: i16::from_ne_bytes([c[2], c[3]]),
            flags: i16::from_ne_bytes([c[4], c[5]]),
        })
        .collect();
    let deadline = match timeout {
        Some(t) if t != 0 => Some(timers::after(Instant::now(), read_timespec(task, t)?)),
        _ => None,
    };
    let creds = task.tg.creds();
    let caller = ipc::Caller { creds: &creds, tgid: task.tg.tgid, blocker: &*task.shared };
    task.kernel.ipc.sem.op(id, &ops, &caller, deadline)?;
    Ok(0)
}

pub fn semctl(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (id, num, cmd, arg) = (a.int(0), a.int(1), a.int(2), a.ptr(3));
    let creds = task.tg.creds();
    let sems = &task.kernel.ipc.sem;
    let input = match cmd {
        sem::SETVAL => sem::CtlArg::Value(arg as i32),
        sem::SETALL => {
            let n = sems.nsems(id).map_err(|e| if id < 0 { Errno::EINVAL } else { e })?;
            let mut raw = vec![0u8; n * 2];
            task.mm.copy_in(arg, &mut raw)?;
            sem::CtlArg::Values(raw.chunks_exact(2).map(|c| u16::from_ne_bytes([c[0], c[1]])).collect())
        }
        ipc::IPC_SET => {
            let mut raw = [0u8; 104];
            task.mm.copy_in(arg, &mut raw)?;
            let (uid, gid, mode) = IpcPerm::decode_set(&raw);
            sem::CtlArg::Set { uid, gid, mode }
        }
        _ => sem::CtlArg::None,
    };
    match sems.ctl(id, num, cmd, input, &creds, task.tg.tgid)? {
        sem::CtlOut::Value(v) => Ok(v as u64),
        sem::CtlOut::Struct(b, v) => {
            task.mm.copy_out(arg, &b)?;
            Ok(v as u64)
        }
        sem::CtlOut::Values(vs) => {
            let raw: Vec<u8> = vs.iter().flat_map(|v| v.to_ne_bytes()).collect();
            task.mm.copy_out(arg, &raw)?;
            Ok(0)
        }
    }
}

// ---- message queues ----

pub fn msgget(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let creds = task.tg.creds();
    Ok(task.kernel.ipc.msg.get(a.int(0), a.int(1), &creds)? as u64)
}

pub fn msgsnd(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (id, msgp, size, flags) = (a.int(0), a.ptr(1), a.size(2), a.int(3));
    let mtype: i64 = task.mm.read(msgp)?;
    if size > msg::MSGMAX || id < 0 {
        return Err(Errno::EINVAL.into());
    }
    if mtype < 1 {
        return Err(Errno::EINVAL.into());
    }
    let mut data = vec![0u8; size];
    task.mm.copy_in(msgp + 8, &mut data)?;
    let creds = task.tg.creds();
    let caller = ipc::Caller { creds: &creds, tgid: task.tg.tgid, blocker: &*task.shared };
    task.kernel.ipc.msg.send(id, mtype, data, flags, &caller)?;
    Ok(0)
}

pub fn msgrcv(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (id, msgp, size, msgtyp, flags) = (a.int(0), a.ptr(1), a[2] as i64, a[3] as i64, a.int(4));
    if id < 0 || size < 0 {
        return Err(Errno::EINVAL.into());
    }
    let creds = task.tg.creds();
    let caller = ipc::Caller { creds: &creds, tgid: task.tg.tgid, blocker: &*task.shared };
    let (mtype, data) = task.kernel.ipc.msg.receive(id, size as usize, msgtyp, flags, &caller)?;
    task.mm.write(msgp, &mtype)?;
    task.mm.copy_out(msgp + 8, &data)?;
    Ok(data.len() as u64)
}

pub fn msgctl(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (id, cmd, buf) = (a.int(0), a.int(1), a.ptr(2));
    let creds = task.tg.creds();
    let set = if cmd == ipc::IPC_SET {
        let mut raw = [0u8; 120];
        task.mm.copy_in(buf, &mut raw)?;
        let (uid, gid, mode) = IpcPerm::decode_set(&raw);
        Some((uid, gid, mode, get_u64(&raw, 88)))
    } else {
        None
    };
    match task.kernel.ipc.msg.ctl(id, cmd, set, &creds)? {
        msg::CtlOut::Value(v) => Ok(v as u64),
        msg::CtlOut::Struct(b, v) => {
            task.mm.copy_out(buf, &b)?;
            Ok(v as u64)
        }
    }
}

// ---- shared memory ----

const SHM_RDONLY: i32 = 0o10000;
const SHM_RND: i32 = 0o20000;
const SHM_REMAP: i32 = 0o40000;
const SHM_EXEC: i32 = 0o100000;
/// Attach addresses are multiples of this on x86_64.
const SHMLBA: u64 = PAGE;

pub fn shmget(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let creds = task.tg.creds();
    Ok(task.kernel.ipc.shm.get(a.int(0), a[1], a.int(2), &creds, task.tg.tgid)? as u64)
}

pub fn shmat(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (id, mut addr, flags) = (a.int(0), a.ptr(1), a.int(2));
    if id < 0 {
        return Err(Errno::EINVAL.into());
    }
    if addr != 0 {
        if !addr.is_multiple_of(SHMLBA) {
            if flags & SHM_RND == 0 {
                return Err(Errno::EINVAL.into());
            }
            addr &= !(SHMLBA - 1);
            if addr == 0 && flags & SHM_REMAP != 0 {
                return Err(Errno::EINVAL.into());
            }
        }
    } else if flags & SHM_REMAP != 0 {
        return Err(Errno::EINVAL.into());
    }
    let readonly = flags & SHM_RDONLY != 0;
    let exec = flags & SHM_EXEC != 0;
    let mut wanted = if readonly { ipc::S_IRUGO } else { ipc::S_IRUGO | ipc::S_IWUGO };
    if exec {
        wanted |= 0o111;
    }
    let creds = task.tg.creds();
    let segments = task.kernel.ipc.shm.clone();
    let attach = segments.attach(id, wanted, &creds)?;
    let access = Access { read: true, write: !readonly, execute: exec };
    let fixed = addr != 0;
    let mflags = MapFlags {
        fixed: fixed && flags & SHM_REMAP != 0,
        fixed_noreplace: fixed && flags & SHM_REMAP == 0,
        lock_limit: super::mm::lock_limit(task),
        ..Default::default()
    };
    let backing = Backing::File { file: attach.file, offset: 0, shared: true, name: None };
    let at = task.mm.map(addr, attach.len, access, backing, mflags).map_err(|e| match e {
        // An address in use without SHM_REMAP.
        crate::mm::MmError::Exists => Errno::EINVAL,
        e => e.into(),
    })?;
    if readonly {
        task.mm.set_max_access(at, at + attach.len, Access::ALL.without_write());
    }
    segments.attached(id, task.tg.tgid);
    Ok(at)
}

pub fn shmdt(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let addr = a.ptr(0);
    if !addr.is_multiple_of(PAGE) {
        return Err(Errno::EINVAL.into());
    }
    let segments = task.kernel.ipc.shm.clone();
    // Linux's shmdt: the first attach at or above `addr` that starts
    // where its segment does relative to `addr`, then every other piece of
    // the same attach within the segment's size.
    let mut found: Option<(std::sync::Arc<dyn crate::mm::Mappable>, i32, u64)> = None;
    let mut unmap = Vec::new();
    for v in task.mm.vmas().into_iter().filter(|v| v.end > addr) {
        let Backing::File { file, offset, shared: true, .. } = &v.backing else { continue };
        if v.start < addr || v.start - addr != *offset {
            continue;
        }
        match &found {
            None => {
                if let Some((id, size)) = segments.attachment_of(file) {
                    found = Some((file.clone(), id, size.checked_next_multiple_of(PAGE).unwrap_or(u64::MAX)));
                    unmap.push((v.start, v.len()));
                }
            }
            Some((f, _, size)) => {
                if v.end - addr > *size {
                    break;
                }
                if std::sync::Arc::ptr_eq(f, file) {
                    unmap.push((v.start, v.len()));
                }
            }
        }
    }
    let Some((file, id, _)) = found else { return Err(Errno::EINVAL.into()) };
    drop(file);
    segments.detached(id, task.tg.tgid);
    for (start, len) in unmap {
        task.mm.unmap(start, len)?;
    }
    Ok(0)
}

pub fn shmctl(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (id, cmd, buf) = (a.int(0), a.int(1), a.ptr(2));
    let creds = task.tg.creds();
    let set = if cmd == ipc::IPC_SET {
        let mut raw = [0u8; 112];
        task.mm.copy_in(buf, &mut raw)?;
        Some(IpcPerm::decode_set(&raw))
    } else {
        None
    };
    let memlock = task.tg.rlimit(linux_raw_sys::general::RLIMIT_MEMLOCK).cur;
    match task.kernel.ipc.shm.ctl(id, cmd, set, &creds, memlock)? {
        shm::CtlOut::Value(v) => Ok(v as u64),
        shm::CtlOut::Struct(b, v) => {
            task.mm.copy_out(buf, &b)?;
            Ok(v as u64)
        }
    }
}

// ---- another process's memory ----

pub fn process_vm_readv(task: &mut Task, a: &[u64; 6]) -> SysResult {
    process_vm(task, a, false)
}

pub fn process_vm_writev(task: &mut Task, a: &[u64; 6]) -> SysResult {
    process_vm(task, a, true)
}

/// Linux's ptrace_may_access with PTRACE_MODE_ATTACH_REALCREDS (see
/// [`crate::task::may_access`]).
pub(super) fn may_access(task: &Task, target: &crate::task::ThreadGroup) -> Result<(), Errno> {
    crate::task::may_access(&task.tg, target, false)
}

/// process_vm_readv and process_vm_writev: copies between the caller's
/// `local` buffers and another process's `remote` ones, in order, until
/// either runs out or a page of either cannot be reached. A transfer cut
/// short answers what it moved; one that moved nothing, EFAULT.
fn process_vm(task: &mut Task, a: &[u64; 6], write: bool) -> SysResult {
    let (pid, local_iov, local_count, remote_iov, remote_count, flags) = (a.int(0), a[1], a[2], a[3], a[4], a[5]);
    if flags != 0 {
        return Err(Errno::EINVAL.into());
    }
    let local = super::io::read_iov(task, local_iov, local_count)?;
    if local.iter().all(|(_, len)| *len == 0) {
        return Ok(0);
    }
    let remote = super::io::read_iov(task, remote_iov, remote_count)?;
    let target = {
        let tree = task.kernel.procs.lock().unwrap();
        let by_thread = || tree.thread(pid).map(|t| t.tg.clone());
        if pid > 0 { tree.group(pid).or_else(by_thread) } else { None }
    }
    .ok_or(Errno::ESRCH)?;
    may_access(task, &target)?;
    let other = target.view.lock().unwrap().as_ref().map(|v| v.mm.clone()).ok_or(Errno::ESRCH)?;
    let mut moved = 0usize;
    let mut local_at = local.iter().copied().filter(|(_, len)| *len > 0);
    let (mut laddr, mut lleft) = local_at.next().unwrap_or((0, 0));
    let mut buf = vec![0u8; PAGE as usize];
    let mut cut_short = false;
    'remote: for (raddr, rlen) in remote {
        let mut done = 0;
        while done < rlen {
            if lleft == 0 {
                match local_at.next() {
                    Some((a, l)) => (laddr, lleft) = (a, l),
                    None => break 'remote,
                }
            }
            // A range that wraps around the address space ends where it
            // wraps, as an unmapped page would end it.
            let Some(r) = raddr.checked_add(done as u64) else {
                cut_short = true;
                break 'remote;
            };
            // A page of the remote side at a time: the first one it cannot
            // reach ends the transfer.
            let n = (rlen - done).min((PAGE - r % PAGE) as usize).min(lleft);
            let chunk = &mut buf[..n];
            let ok = if write {
                task.mm.copy_in(laddr, chunk).is_ok() && other.copy_out(r, chunk).is_ok()
            } else {
                other.copy_in(r, chunk).is_ok() && task.mm.copy_out(laddr, chunk).is_ok()
            };
            if !ok {
                cut_short = true;
                break 'remote;
            }
            done += n;
            moved += n;
            laddr = laddr.wrapping_add(n as u64);
            lleft -= n;
        }
    }
    if moved == 0 && cut_short {
        return Err(Errno::EFAULT.into());
    }
    Ok(moved as u64)
}

// ---- POSIX message queues ----

/// The queue behind descriptor `fd`: EBADF for any other file.
fn queue_file(
    task: &Task,
    fd: i32,
) -> Result<(std::sync::Arc<crate::fs::OpenFile>, std::sync::Arc<mqueue::PosixQueue>), SysError> {
    let f = task.files.get(fd)?;
    let q = f.ops.downcast_ref::<mqueue::QueueFile>().ok_or(Errno::EBADF)?.queue.clone();
    Ok((f, q))
}

/// `struct mq_attr`: four longs (and four reserved).
fn read_attr(task: &Task, addr: u64) -> Result<mqueue::Attr, SysError> {
    let v: [i64; 4] = task.mm.read(addr)?;
    Ok(mqueue::Attr { flags: v[0], max_messages: v[1], message_size: v[2], current: v[3] })
}

/// An absolute CLOCK_REALTIME timeout, checked before anything else.
fn read_abs_timeout(task: &Task, addr: u64) -> Result<Option<Instant>, SysError> {
    if addr == 0 {
        return Ok(None);
    }
    let at = read_timespec(task, addr)?;
    Ok(Some(super::futex::absolute_deadline(rustix::time::ClockId::Realtime, at)))
}

pub fn mq_open(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (name, oflag, mode, attr) = (super::read_path(task, a.ptr(0))?, a.uint(1), a.uint(2), a.ptr(3));
    let create = if oflag & g::O_CREAT != 0 {
        let attr = if attr != 0 { Some(read_attr(task, attr)?) } else { None };
        Some((mode, attr))
    } else {
        None
    };
    let req = mqueue::OpenRequest {
        access: oflag & g::O_ACCMODE,
        create,
        exclusive: oflag & g::O_EXCL != 0,
        limit: task.tg.rlimit(g::RLIMIT_MSGQUEUE).cur,
    };
    let creds = task.tg.creds();
    let umask = task.fs_context().umask;
    let queue = task.kernel.ipc.mq.open(&name, req, umask, &creds)?;
    let flags = OpenFlags::from_bits_retain(oflag & (g::O_ACCMODE | g::O_NONBLOCK));
    let file = crate::fs::OpenFile::new(std::sync::Arc::new(mqueue::QueueFile { queue }), None, flags);
    // Close-on-exec whatever the flags say, as Linux's mq_open makes it.
    Ok(task.files.install(file, true, 0)? as u64)
}

pub fn mq_unlink(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let name = super::read_path(task, a.ptr(0))?;
    let creds = task.tg.creds();
    task.kernel.ipc.mq.unlink(&name, &creds)?;
    Ok(0)
}

pub fn mq_timedsend(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (fd, msg, len, priority, timeout) = (a.int(0), a.ptr(1), a.size(2), a.uint(3), a.ptr(4));
    if priority >= mqueue::MQ_PRIO_MAX {
        return Err(Errno::EINVAL.into());
    }
    let deadline = read_abs_timeout(task, timeout)?;
    let (file, queue) = queue_file(task, fd)?;
    if !file.writable() {
        return Err(Errno::EBADF.into());
    }
    if len > queue.attr().message_size as usize {
        return Err(Errno::EMSGSIZE.into());
    }
    let mut data = vec![0u8; len];
    task.mm.copy_in(msg, &mut data)?;
    let nonblocking = file.flags().contains(OpenFlags::NONBLOCK);
    let sender = (task.tg.tgid, task.tg.creds().uid.real);
    queue.send(data, priority, nonblocking, deadline, sender, &*task.shared)?;
    Ok(0)
}

pub fn mq_timedreceive(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (fd, msg, len, priority_at, timeout) = (a.int(0), a.ptr(1), a.size(2), a.ptr(3), a.ptr(4));
    let deadline = read_abs_timeout(task, timeout)?;
    let (file, queue) = queue_file(task, fd)?;
    if !file.readable() {
        return Err(Errno::EBADF.into());
    }
    let nonblocking = file.flags().contains(OpenFlags::NONBLOCK);
    let (priority, data) = queue.receive(len, nonblocking, deadline, &*task.shared)?;
    task.mm.copy_out(msg, &data)?;
    if priority_at != 0 {
        task.mm.write(priority_at, &priority)?;
    }
    Ok(data.len() as u64)
}

const SIGEV_SIGNAL: i32 = 0;
const SIGEV_NONE: i32 = 1;
const SIGEV_THREAD: i32 = 2;
/// si_code of a message queue's notification.
const SI_MESGQ: i32 = -3;
/// A SIGEV_THREAD cookie's length, and what its last byte says.
const NOTIFY_COOKIE_LEN: usize = 32;
const NOTIFY_WOKENUP: u8 = 1;
const NOTIFY_REMOVED: u8 = 2;

pub fn mq_notify(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (fd, sevp) = (a.int(0), a.ptr(1));
    let owner = task.tg.tgid;
    let registration = if sevp != 0 {
        // struct sigevent: the value, the signal, how to notify.
        let raw: [u8; 16] = task.mm.read(sevp)?;
        let value = u64::from_ne_bytes(raw[0..8].try_into().unwrap());
        let signo = i32::from_ne_bytes(raw[8..12].try_into().unwrap());
        let how = i32::from_ne_bytes(raw[12..16].try_into().unwrap());
        Some(match how {
            SIGEV_NONE => mqueue::Registration { how, signo: 0, notify: None, removed: None },
            // Signal 0 is a valid registration that sends nothing.
            SIGEV_SIGNAL if (0..=64).contains(&signo) => {
                let signo = signo as u32;
                let kernel = std::sync::Arc::downgrade(&task.kernel);
                let notify: mqueue::Notifier = Box::new(move |pid: i32, uid: u32| {
                    let Some(kernel) = kernel.upgrade().filter(|_| signo != 0) else { return };
                    let Some(tg) = kernel.procs.lock().unwrap().group(owner) else { return };
                    let fields = SigFields::Queue { pid, uid, value };
                    crate::task::send_to_group(&kernel, &tg, SigInfo { signo, errno: 0, code: SI_MESGQ, fields });
                });
                mqueue::Registration { how, signo, notify: Some(notify), removed: None }
            }
            // glibc starts the thread itself: it passes a netlink socket
            // and a cookie, and the kernel posts the cookie to that socket
            // when the message comes, marked as a wake-up.
            SIGEV_THREAD => {
                let mut cookie = vec![0u8; NOTIFY_COOKIE_LEN];
                task.mm.copy_in(value, &mut cookie)?;
                let f = task.files.get(signo)?;
                let socket = f.ops.downcast_ref::<SocketFile>().ok_or(Errno::ENOTSOCK)?.socket.clone();
                if socket.downcast_ref::<NetlinkSocket>().is_none() {
                    return Err(Errno::EINVAL.into());
                }
                // Taken back unused, it is posted marked as removed, so
                // that glibc frees what it kept for the thread.
                let post = |mark: u8| -> mqueue::Notifier {
                    let (socket, mut cookie) = (socket.clone(), cookie.clone());
                    cookie[NOTIFY_COOKIE_LEN - 1] = mark;
                    Box::new(move |_, _| {
                        if let Some(n) = socket.downcast_ref::<NetlinkSocket>() {
                            n.post_from_kernel(cookie.clone());
                        }
                    })
                };
                mqueue::Registration {
                    how,
                    signo: 0,
                    notify: Some(post(NOTIFY_WOKENUP)),
                    removed: Some(post(NOTIFY_REMOVED)),
                }
            }
            _ => return Err(Errno::EINVAL.into()),
        })
    } else {
        None
    };
    let (_, queue) = queue_file(task, fd)?;
    queue.set_notification(owner, registration)?;
    Ok(0)
}

pub fn mq_getsetattr(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (fd, new, old) = (a.int(0), a.ptr(1), a.ptr(2));
    let new = if new != 0 { Some(read_attr(task, new)?) } else { None };
    let (file, queue) = queue_file(task, fd)?;
    if let Some(n) = new
        && n.flags & !(g::O_NONBLOCK as i64) != 0
    {
        return Err(Errno::EINVAL.into());
    }
    let nonblock = file.flags().contains(OpenFlags::NONBLOCK);
    if old != 0 {
        let at = queue.attr();
        let v: [i64; 8] =
            [if nonblock { g::O_NONBLOCK as i64 } else { 0 }, at.max_messages, at.message_size, at.current, 0, 0, 0, 0];
        task.mm.write(old, &v)?;
    }
    if let Some(n) = new {
        let mut flags = file.flags() & !OpenFlags::NONBLOCK;
        if n.flags != 0 {
            flags |= OpenFlags::NONBLOCK;
        }
        file.set_status_flags(flags);
    }
    Ok(0)
}
