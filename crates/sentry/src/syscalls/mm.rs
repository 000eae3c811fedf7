//! Memory system calls.

use linux_raw_sys::general as g;
use platform::Access;

use super::{SysResult, file};
use crate::errno::Errno;
use crate::mm::{Backing, MapFlags, MemLock, MmError, PAGE, SharedMemory, USER_TOP, page_down, page_up};
use crate::task::Task;

/// The access `prot` asks for. mprotect refuses unknown bits (`strict`);
/// mmap ignores them, as Linux does.
fn prot_to_access(prot: u64, strict: bool) -> Result<Access, Errno> {
    let known = (g::PROT_READ | g::PROT_WRITE | g::PROT_EXEC | g::PROT_GROWSDOWN | g::PROT_GROWSUP) as u64;
    if strict && prot & !known != 0 {
        return Err(Errno::EINVAL);
    }
    Ok(Access {
        read: prot & g::PROT_READ as u64 != 0,
        write: prot & g::PROT_WRITE as u64 != 0,
        execute: prot & g::PROT_EXEC as u64 != 0,
    })
}

pub fn mmap(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (addr, len, prot, flags, fd, off) = (a[0], a[1], a[2], a[3] as u32, a[4] as i32, a[5]);
    let access = prot_to_access(prot, false)?;
    let kind = flags & g::MAP_TYPE;
    if len == 0 || !off.is_multiple_of(PAGE) || !matches!(kind, g::MAP_SHARED | g::MAP_PRIVATE | g::MAP_SHARED_VALIDATE)
    {
        return Err(Errno::EINVAL.into());
    }
    let known = g::MAP_TYPE
        | g::MAP_FIXED
        | g::MAP_ANONYMOUS
        | g::MAP_GROWSDOWN
        | g::MAP_DENYWRITE
        | g::MAP_EXECUTABLE
        | g::MAP_LOCKED
        | g::MAP_NORESERVE
        | g::MAP_POPULATE
        | g::MAP_NONBLOCK
        | g::MAP_STACK
        | g::MAP_HUGETLB
        | g::MAP_SYNC
        | g::MAP_FIXED_NOREPLACE
        | g::MAP_UNINITIALIZED
        | (g::MAP_HUGE_MASK << g::MAP_HUGE_SHIFT);
    if kind == g::MAP_SHARED_VALIDATE && flags & !known != 0 {
        return Err(Errno::EOPNOTSUPP.into());
    }
    if flags & g::MAP_LOCKED != 0 && !may_lock(task) {
        return Err(Errno::EPERM.into());
    }
    if flags & g::MAP_HUGETLB != 0 {
        // No huge page pool in the sandbox, as on a host with none reserved.
        return Err(Errno::ENOMEM.into());
    }
    let len = page_up(len).filter(|l| *l <= USER_TOP).ok_or(Errno::ENOMEM)?;
    off.checked_add(len).ok_or(Errno::EOVERFLOW)?;
    let shared = kind != g::MAP_PRIVATE;
    let mf = task.mm.memory_file().clone();
    let mut max_access = Access::ALL;
    let backing = if flags & g::MAP_ANONYMOUS != 0 {
        if shared { Backing::Shared { object: SharedMemory::new(mf), offset: 0 } } else { Backing::Anonymous }
    } else {
        let f = file(task, fd as u64)?;
        if f.flags().contains(crate::fs::OpenFlags::PATH) {
            return Err(Errno::EBADF.into());
        }
        if !f.readable() {
            return Err(Errno::EACCES.into());
        }
        let anonymous = f.ops.anonymous_mapping();
        let mut mappable = if anonymous { None } else { Some(f.ops.mappable().ok_or(Errno::ENODEV)?) };
        if shared
            && f.writable()
            && let Some(m) = crate::fs::host::shared_writable_mapping(&*f.ops)
        {
            // Written back to the host file by msync and when the mapping
            // goes away.
            mappable = Some(m?);
        }
        if shared
            && f.writable()
            && let Some(t) = f.ops.downcast_ref::<crate::fs::tmpfs::TmpFile>()
        {
            // A memfd sealed against writes maps shared only read-only, and
            // for good; otherwise the mapping is counted, so that the seal
            // cannot be added while it exists.
            match crate::fs::tmpfs::WritableMap::create(t.inode()) {
                Ok(m) => mappable = Some(m),
                Err(_) if access.write => return Err(Errno::EPERM.into()),
                Err(_) => max_access = Access::ALL.without_write(),
            }
        }
        // A shared mapping writes through to the file (even /dev/zero's,
        // as far as permissions go): never writable without write access.
        if shared && !f.writable() {
            if access.write {
                return Err(Errno::EACCES.into());
            }
            max_access = Access::ALL.without_write();
        }
        // A file of a noexec mount is never mapped executable, now or by a
        // later mprotect (Linux's path_noexec in do_mmap).
        if f.dentry.as_ref().is_some_and(|d| d.mount.flags().contains(crate::fs::dentry::MountFlags::NOEXEC)) {
            if access.execute {
                return Err(Errno::EPERM.into());
            }
            max_access = Access { execute: false, ..max_access };
        }
        match mappable {
            None if shared => Backing::Shared { object: SharedMemory::new(mf), offset: 0 },
            None => Backing::Anonymous,
            Some(m) => Backing::File {
                file: m,
                offset: off,
                shared,
                name: f.dentry.clone().map(|d| d as std::sync::Arc<dyn crate::mm::MapPath>),
            },
        }
    };
    let mflags = MapFlags {
        fixed: flags & g::MAP_FIXED != 0,
        fixed_noreplace: flags & g::MAP_FIXED_NOREPLACE != 0,
        populate: flags & g::MAP_POPULATE != 0 && flags & g::MAP_NONBLOCK == 0,
        grows_down: flags & g::MAP_GROWSDOWN != 0,
        locked: flags & g::MAP_LOCKED != 0,
        lock_limit: lock_limit(task),
    };
    let at = task.mm.map(addr, len, access, backing, mflags)?;
    if max_access != Access::ALL {
        task.mm.set_max_access(at, at + len, max_access);
    }
    Ok(at)
}

pub fn munmap(task: &mut Task, a: &[u64; 6]) -> SysResult {
    task.mm.unmap(a[0], a[1])?;
    Ok(0)
}

pub fn mprotect(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let access = prot_to_access(a[2], true)?;
    task.mm.protect(a[0], a[1], access)?;
    Ok(0)
}

pub fn mremap(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let flags = a[3] as u32;
    if flags & !(g::MREMAP_MAYMOVE | g::MREMAP_FIXED | g::MREMAP_DONTUNMAP) != 0
        || flags & g::MREMAP_DONTUNMAP != 0
        || (flags & g::MREMAP_FIXED != 0 && flags & g::MREMAP_MAYMOVE == 0)
    {
        return Err(Errno::EINVAL.into());
    }
    let fixed = (flags & g::MREMAP_FIXED != 0).then_some(a[4]);
    let limit = lock_limit(task);
    Ok(task.mm.remap(a[0], a[1], a[2], flags & g::MREMAP_MAYMOVE != 0, fixed, limit)?)
}

pub fn madvise(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (addr, len, advice) = (a[0], a[1], a[2] as u32);
    if !addr.is_multiple_of(PAGE) {
        return Err(Errno::EINVAL.into());
    }
    match advice {
        g::MADV_DONTNEED | g::MADV_DONTNEED_LOCKED | g::MADV_REMOVE => {
            task.mm.discard(addr, len)?;
            Ok(0)
        }
        // MADV_FREE may drop the pages or keep them; keeping is simplest
        // and always correct.
        g::MADV_NORMAL
        | g::MADV_RANDOM
        | g::MADV_SEQUENTIAL
        | g::MADV_WILLNEED
        | g::MADV_FREE
        | g::MADV_DONTFORK
        | g::MADV_DOFORK
        | g::MADV_MERGEABLE
        | g::MADV_UNMERGEABLE
        | g::MADV_HUGEPAGE
        | g::MADV_NOHUGEPAGE
        | g::MADV_DONTDUMP
        | g::MADV_DODUMP
        | g::MADV_WIPEONFORK
        | g::MADV_KEEPONFORK
        | g::MADV_COLD
        | g::MADV_PAGEOUT
        | g::MADV_POPULATE_READ
        | g::MADV_POPULATE_WRITE
        | g::MADV_COLLAPSE => Ok(0),
        _ => Err(Errno::EINVAL.into()),
    }
}

pub fn brk(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let limit = lock_limit(task);
    Ok(task.mm.brk(a[0], limit))
}

pub fn msync(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let flags = a[2] as u32;
    if !a[0].is_multiple_of(PAGE)
        || flags & !(g::MS_ASYNC | g::MS_SYNC | g::MS_INVALIDATE) != 0
        || (flags & g::MS_ASYNC != 0 && flags & g::MS_SYNC != 0)
    {
        return Err(Errno::EINVAL.into());
    }
    let end = a[0].checked_add(page_up(a[1]).ok_or(Errno::ENOMEM)?).ok_or(Errno::ENOMEM)?;
    let vmas: Vec<_> = task.mm.vmas().into_iter().filter(|v| v.start < end && v.end > a[0]).collect();
    // Every page of the range must be mapped (ENOMEM otherwise), as Linux
    // checks while it walks.
    let mut at = a[0];
    for v in &vmas {
        if v.start > at {
            return Err(Errno::ENOMEM.into());
        }
        at = v.end;
    }
    if at < end {
        return Err(Errno::ENOMEM.into());
    }
    // Shared file mappings go back to their files now, whichever flag:
    // MS_ASYNC may write at once.
    for v in vmas {
        if let Backing::File { file, shared: true, .. } = &v.backing {
            file.write_back()?;
        }
    }
    Ok(0)
}

/// The most pages the process may lock (RLIMIT_MEMLOCK's soft limit),
/// None with CAP_IPC_LOCK, which lifts the limit.
pub(super) fn lock_limit(task: &Task) -> Option<u64> {
    if task.tg.creds().has(crate::auth::cap::IPC_LOCK) {
        return None;
    }
    Some(task.tg.rlimit(g::RLIMIT_MEMLOCK).cur / PAGE)
}

/// Linux's can_do_mlock(): a limit of 0 forbids locking at all (EPERM)
/// without CAP_IPC_LOCK.
fn may_lock(task: &Task) -> bool {
    task.tg.rlimit(g::RLIMIT_MEMLOCK).cur != 0 || task.tg.creds().has(crate::auth::cap::IPC_LOCK)
}

/// The page-aligned range of an mlock-family call: from the page of
/// `addr` through the page of its last byte. EINVAL if it wraps.
fn lock_range(addr: u64, len: u64) -> Result<(u64, u64), Errno> {
    let start = page_down(addr);
    let len = page_up(len + (addr - start)).ok_or(Errno::EINVAL)?;
    let end = start.checked_add(len).ok_or(Errno::EINVAL)?;
    Ok((start, end))
}

/// mlock's errors: more than the limit is ENOMEM, as is a hole.
fn lock_error(e: MmError) -> Errno {
    match e {
        MmError::LockLimit => Errno::ENOMEM,
        e => e.into(),
    }
}

fn do_mlock(task: &mut Task, addr: u64, len: u64, lock: MemLock) -> SysResult {
    if lock != MemLock::Unlocked && !may_lock(task) {
        return Err(Errno::EPERM.into());
    }
    let (start, end) = lock_range(addr, len)?;
    let limit = lock_limit(task);
    task.mm.set_lock(start, end, lock, limit).map_err(lock_error)?;
    Ok(0)
}

/// mlock(2): locks the pages of a range and makes them resident.
pub fn mlock(task: &mut Task, a: &[u64; 6]) -> SysResult {
    do_mlock(task, a[0], a[1], MemLock::Locked)
}

/// mlock2(2): mlock, or with MLOCK_ONFAULT, locking each page as it is
/// first touched.
pub fn mlock2(task: &mut Task, a: &[u64; 6]) -> SysResult {
    const MLOCK_ONFAULT: u64 = 1;
    if a[2] & !MLOCK_ONFAULT != 0 {
        return Err(Errno::EINVAL.into());
    }
    let lock = if a[2] & MLOCK_ONFAULT != 0 { MemLock::LockedOnFault } else { MemLock::Locked };
    do_mlock(task, a[0], a[1], lock)
}

/// munlock(2): needs no privilege.
pub fn munlock(task: &mut Task, a: &[u64; 6]) -> SysResult {
    do_mlock(task, a[0], a[1], MemLock::Unlocked)
}

/// mlockall(2): MCL_CURRENT locks what is mapped, MCL_FUTURE what will
/// be, MCL_ONFAULT makes either lock on fault.
pub fn mlockall(task: &mut Task, a: &[u64; 6]) -> SysResult {
    const MCL_CURRENT: u64 = 1;
    const MCL_FUTURE: u64 = 2;
    const MCL_ONFAULT: u64 = 4;
    let flags = a[0];
    if flags == 0 || flags & !(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT) != 0 || flags == MCL_ONFAULT {
        return Err(Errno::EINVAL.into());
    }
    if !may_lock(task) {
        return Err(Errno::EPERM.into());
    }
    let lock = if flags & MCL_ONFAULT != 0 { MemLock::LockedOnFault } else { MemLock::Locked };
    let current = (flags & MCL_CURRENT != 0).then_some(lock);
    let future = if flags & MCL_FUTURE != 0 { lock } else { MemLock::Unlocked };
    let limit = lock_limit(task);
    task.mm.set_lock_all(current, future, limit).map_err(lock_error)?;
    Ok(0)
}

/// munlockall(2).
pub fn munlockall(task: &mut Task, _a: &[u64; 6]) -> SysResult {
    task.mm.set_lock_all(Some(MemLock::Unlocked), MemLock::Unlocked, None)?;
    Ok(0)
}

pub fn mincore(task: &mut Task, a: &[u64; 6]) -> SysResult {
    if !a[0].is_multiple_of(PAGE) {
        return Err(Errno::EINVAL.into());
    }
    let pages = page_up(a[1]).ok_or(Errno::ENOMEM)? / PAGE;
    let vmas = task.mm.vmas();
    for i in 0..pages {
        let va = a[0] + i * PAGE;
        if !vmas.iter().any(|v| va >= v.start && va < v.end) {
            return Err(Errno::ENOMEM.into());
        }
    }
    task.mm.copy_out(a[2], &vec![1u8; pages as usize])?;
    Ok(0)
}

// Memory protection keys, as x86 Linux answers on a CPU without them
// (no OSPKE): a process holds no key, not even key 0, and none can be
// set up.

/// pkey_alloc(2): Linux has one key slot then, which the first call takes
/// before finding that the key's rights cannot be set (EINVAL, from
/// arch_set_user_pkey_access()) and never gives back: later calls find no
/// key left (ENOSPC).
pub fn pkey_alloc(task: &mut Task, a: &[u64; 6]) -> SysResult {
    const PKEY_ACCESS_MASK: u64 = 0x3;
    if a[0] != 0 || a[1] & !PKEY_ACCESS_MASK != 0 {
        return Err(Errno::EINVAL.into());
    }
    if task.tg.pkey_slot_spent.swap(true, std::sync::atomic::Ordering::Relaxed) {
        return Err(Errno::ENOSPC.into());
    }
    Err(Errno::EINVAL.into())
}

/// pkey_free(2): no key was allocated.
pub fn pkey_free(_task: &mut Task, _: &[u64; 6]) -> SysResult {
    Err(Errno::EINVAL.into())
}

/// pkey_mprotect(2): with key -1 it is mprotect; any other key was never
/// allocated (EINVAL, after mprotect's own checks of the range).
pub fn pkey_mprotect(task: &mut Task, a: &[u64; 6]) -> SysResult {
    if a[3] as i32 == -1 {
        return mprotect(task, a);
    }
    let (addr, len) = (a[0], a[1]);
    if !addr.is_multiple_of(PAGE) {
        return Err(Errno::EINVAL.into());
    }
    if len == 0 {
        return Ok(0);
    }
    let end = len.checked_next_multiple_of(PAGE).and_then(|l| addr.checked_add(l));
    if end.is_none_or(|e| e <= addr) {
        return Err(Errno::ENOMEM.into());
    }
    prot_to_access(a[2], true)?;
    Err(Errno::EINVAL.into())
}
