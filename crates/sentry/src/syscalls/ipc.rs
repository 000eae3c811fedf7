//! System V IPC system calls: semaphores, message queues, shared memory.
//! The objects live in the sandbox's namespace ([`crate::ipc`]); this
//! layer reads and writes the callers' structures.

use std::time::Instant;

use platform::Access;

use super::{Args, SysResult, read_timespec};
use crate::errno::Errno;
use crate::ipc::{self, IpcPerm, get_u64, msg, sem, shm};
use crate::mm::{Backing, MapFlags, PAGE};
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
    if nsops < 1 {
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
                    found = Some((file.clone(), id, size.next_multiple_of(PAGE)));
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
