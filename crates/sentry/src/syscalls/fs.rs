//! File-system system calls: names, metadata, descriptors.

use std::sync::Arc;

use linux_raw_sys::general as g;
use linux_raw_sys::ioctl as ioc;

use super::{SysError, SysResult, file, read_path, start_dir};
use crate::auth::cap;
use crate::errno::Errno;
use crate::fs::inotify;
use crate::fs::lock::{self, LockKind, LockOwner, RecordLock};
use crate::fs::namei;
use crate::fs::path::Restrict;
use crate::fs::write_access::WriteAccess;
use crate::fs::{
    Dentry, FileOwner, FileType, FsError, Lookup, MAY_EXEC, MAY_READ, MAY_WRITE, OpenFile, OpenFlags, Stat,
};
use crate::task::Task;

fn resolve(task: &Task, dirfd: u64, path: &[u8], how: Lookup) -> Result<Arc<Dentry>, SysError> {
    let start = start_dir(task, dirfd, path)?;
    Ok(task.with_resolver(|r| r.resolve(start.as_ref(), path, how))?)
}

/// Resolves a path argument, or the file of `dirfd` itself when the path is
/// empty and AT_EMPTY_PATH is given.
fn resolve_at(task: &Task, dirfd: u64, path_addr: u64, flags: u64, how: Lookup) -> Result<Target, SysError> {
    let path = read_path(task, path_addr)?;
    if path.is_empty() {
        if flags & g::AT_EMPTY_PATH as u64 == 0 {
            return Err(Errno::ENOENT.into());
        }
        if dirfd as i32 == g::AT_FDCWD {
            return Ok(Target::Dentry(task.fs_context().cwd));
        }
        return Ok(Target::File(file(task, dirfd)?));
    }
    Ok(Target::Dentry(resolve(task, dirfd, &path, how)?))
}

enum Target {
    Dentry(Arc<Dentry>),
    File(Arc<OpenFile>),
}

impl Target {
    fn stat(&self) -> Result<Stat, FsError> {
        match self {
            Target::Dentry(d) => d.inode.stat(),
            Target::File(f) => f.ops.stat(),
        }
    }
}

fn open_common(task: &mut Task, dirfd: u64, path_addr: u64, flags: u32, mode: u32, restrict: Restrict) -> SysResult {
    let path = read_path(task, path_addr)?;
    let mut flags = OpenFlags::from_bits_retain(flags);
    if flags.contains(OpenFlags::PATH) {
        flags &= OpenFlags::PATH | OpenFlags::CLOEXEC | OpenFlags::DIRECTORY | OpenFlags::NOFOLLOW;
    } else {
        // A 64-bit kernel opens every file as large (force_o_largefile), and
        // F_GETFL shows it.
        flags |= OpenFlags::LARGEFILE;
    }
    if flags.contains(OpenFlags::CREAT | OpenFlags::DIRECTORY) && !flags.contains(OpenFlags::TMPFILE) {
        // Refused outright since Linux 6.4.
        return Err(Errno::EINVAL.into());
    }
    // openat2's scoped walks start at the directory even for an absolute
    // path: RESOLVE_IN_ROOT takes "/" as it, RESOLVE_BENEATH refuses it.
    let scoped = restrict.intersects(Restrict::IN_ROOT | Restrict::BENEATH);
    let start = if scoped { start_dir(task, dirfd, b".")? } else { start_dir(task, dirfd, &path)? };
    if flags.contains(OpenFlags::CREAT) && !flags.contains(OpenFlags::TMPFILE) && path.ends_with(b"/") {
        // A name to create cannot be a directory (Linux's open_last_lookups).
        return Err(Errno::EISDIR.into());
    }
    if flags.contains(OpenFlags::TMPFILE) {
        return open_tmpfile(task, start.as_ref(), &path, flags, mode, restrict);
    }
    let create = flags.contains(OpenFlags::CREAT);
    let exclusive = create && flags.contains(OpenFlags::EXCL);
    let follow = !flags.contains(OpenFlags::NOFOLLOW) && !exclusive;
    let how = Lookup { follow, directory: flags.contains(OpenFlags::DIRECTORY) && !create };
    let found = task.with_resolver_in(restrict, |r| r.resolve(start.as_ref(), &path, how));
    let mut created = false;
    let dentry = match found {
        Ok(d) => {
            if exclusive {
                return Err(Errno::EEXIST.into());
            }
            if create && d.file_type() == FileType::Directory {
                return Err(Errno::EISDIR.into());
            }
            d
        }
        Err(FsError::NotFound) if create => {
            let ctx = task.ctx();
            let umask = task.fs.lock().unwrap().umask;
            // A dangling symlink as the last name: what it points at is made
            // (Linux follows it unless O_EXCL or O_NOFOLLOW).
            let (mut cstart, mut cpath) = (start.clone(), path.clone());
            if follow && !restrict.contains(Restrict::NO_SYMLINKS) {
                let mut links = 0;
                while let Ok(l) =
                    task.with_resolver_in(restrict, |r| r.resolve(cstart.as_ref(), &cpath, Lookup::NOFOLLOW))
                    && l.file_type() == FileType::Symlink
                    && l.inode.magic_link().is_none()
                {
                    links += 1;
                    if links > 40 {
                        return Err(Errno::ELOOP.into());
                    }
                    let target = l.inode.read_link()?;
                    if target.is_empty() {
                        return Err(Errno::ENOENT.into());
                    }
                    cstart = if target[0] == b'/' { None } else { l.parent() };
                    cpath = target;
                }
            }
            let (start, path) = (cstart, cpath);
            let made = task.with_resolver_in(restrict, |r| {
                let parent = namei::parent_of(r, start.as_ref(), &path)?;
                if parent.slash {
                    return Err(FsError::IsDirectory);
                }
                let node_mode = g::S_IFREG | (mode & 0o7777 & !umask);
                namei::create_node(r, &ctx, &parent, false, |dir, name| {
                    let node = namei::new_node(&parent.dir, &ctx.creds, node_mode, 0)?;
                    dir.create(&ctx, name, node)
                })
            });
            match made {
                Ok(d) => {
                    created = true;
                    d
                }
                // Made by someone else in between: open theirs, unless
                // O_EXCL.
                Err(FsError::Exists) if !exclusive => {
                    task.with_resolver_in(restrict, |r| r.resolve(start.as_ref(), &path, how))?
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(e) => return Err(e.into()),
    };
    if d_is(&dentry, FileType::Symlink) && !flags.contains(OpenFlags::PATH) {
        return Err(Errno::ELOOP.into());
    }
    if flags.contains(OpenFlags::DIRECTORY) && !d_is(&dentry, FileType::Directory) {
        return Err(Errno::ENOTDIR.into());
    }
    if d_is(&dentry, FileType::Directory) && (flags.writable() || flags.contains(OpenFlags::TRUNC)) {
        return Err(Errno::EISDIR.into());
    }
    // A device node of a nodev mount opens nothing (Linux's may_open_dev),
    // whoever asks.
    if !flags.contains(OpenFlags::PATH)
        && (d_is(&dentry, FileType::CharDevice) || d_is(&dentry, FileType::BlockDevice))
        && dentry.mount.flags().contains(crate::fs::dentry::MountFlags::NODEV)
    {
        return Err(Errno::EACCES.into());
    }
    if !flags.contains(OpenFlags::PATH) && !created {
        // As Linux's may_open: the access mode asks for read and write
        // permission, O_TRUNC for write. A file this call made is opened
        // whatever its mode.
        let mut want = 0;
        if flags.readable() {
            want |= MAY_READ;
        }
        if flags.writable() || flags.contains(OpenFlags::TRUNC) {
            want |= MAY_WRITE;
        }
        crate::fs::permission(&dentry, &task.tg.creds(), want)?;
    }
    // A file some address space runs is not opened for writing, nor
    // truncated (Linux's get_write_access in do_dentry_open and
    // handle_truncate).
    let regular = d_is(&dentry, FileType::Regular) && !flags.contains(OpenFlags::PATH);
    let write_access = if regular && flags.writable() { Some(WriteAccess::get(dentry.key())?) } else { None };
    let ctx = task.ctx();
    let ops = if flags.contains(OpenFlags::PATH) {
        Arc::new(crate::fs::PathFile { inode: dentry.inode.clone() })
    } else if let Some(rdev) = dentry.inode.device_number() {
        crate::devices::open(&task.kernel, &ctx, rdev, flags)?
    } else {
        dentry.inode.open(&ctx, &dentry, flags)?
    };
    let f = OpenFile::new(ops, Some(dentry.clone()), flags);
    if let Some(access) = write_access {
        f.hold_write_access(access);
    }
    if !flags.contains(OpenFlags::PATH) {
        inotify::notify_file(&dentry, inotify::IN_OPEN);
    }
    // Truncated once open, as Linux's do_open: watchers see the open
    // first, and a failed truncate closes the file again.
    if flags.contains(OpenFlags::TRUNC) && !created && regular {
        let _truncating = WriteAccess::get(dentry.key())?;
        namei::change_attr(&ctx, &dentry, &namei::AttrChange { size: Some(0), ..Default::default() })?;
    }
    Ok(task.files.install(f, flags.contains(OpenFlags::CLOEXEC), 0)? as u64)
}

/// open(O_TMPFILE): an unnamed file in the file system of directory `path`.
fn open_tmpfile(
    task: &mut Task,
    start: Option<&Arc<Dentry>>,
    path: &[u8],
    flags: OpenFlags,
    mode: u32,
    restrict: Restrict,
) -> SysResult {
    if !flags.writable() {
        return Err(Errno::EINVAL.into());
    }
    let dir = task.with_resolver_in(restrict, |r| r.resolve(start, path, Lookup { follow: true, directory: true }))?;
    namei::want_write(&dir)?;
    let ctx = task.ctx();
    namei::may_create(&dir, &ctx.creds)?;
    let umask = task.fs.lock().unwrap().umask;
    let node = namei::new_node(&dir, &ctx.creds, g::S_IFREG | (mode & 0o7777 & !umask), 0)?;
    let inode = dir.inode.tmpfile(&ctx, node, !flags.contains(OpenFlags::EXCL))?;
    let name = format!("#{}", inode.ino()?).into_bytes();
    let dentry = dir.child(&name, inode, dir.mount.clone());
    dentry.set_deleted();
    let access = WriteAccess::get(dentry.key())?;
    let ops = dentry.inode.open(&ctx, &dentry, flags)?;
    let f = OpenFile::new(ops, Some(dentry), flags);
    f.hold_write_access(access);
    Ok(task.files.install(f, flags.contains(OpenFlags::CLOEXEC), 0)? as u64)
}

fn d_is(d: &Dentry, t: FileType) -> bool {
    d.file_type() == t
}

pub fn openat(task: &mut Task, a: &[u64; 6]) -> SysResult {
    open_common(task, a[0], a[1], a[2] as u32, a[3] as u32, Restrict::empty())
}

pub fn open(task: &mut Task, a: &[u64; 6]) -> SysResult {
    open_common(task, g::AT_FDCWD as u64, a[0], a[1] as u32, a[2] as u32, Restrict::empty())
}

pub fn creat(task: &mut Task, a: &[u64; 6]) -> SysResult {
    open_common(task, g::AT_FDCWD as u64, a[0], g::O_CREAT | g::O_WRONLY | g::O_TRUNC, a[1] as u32, Restrict::empty())
}

pub fn openat2(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let size = a[3] as usize;
    if size < size_of::<g::open_how>() {
        return Err(Errno::EINVAL.into());
    }
    if size > 4096 {
        return Err(Errno::E2BIG.into());
    }
    let how: g::open_how = task.mm.read_pod(a[2])?;
    if size > size_of::<g::open_how>() {
        // A larger struct from a newer caller: fine while the rest is zero.
        let mut rest = vec![0u8; size - size_of::<g::open_how>()];
        task.mm.copy_in(a[2] + size_of::<g::open_how>() as u64, &mut rest)?;
        if rest.iter().any(|b| *b != 0) {
            return Err(Errno::E2BIG.into());
        }
    }
    const RESOLVE_CACHED: u64 = 0x20;
    let known_flags = OpenFlags::all().bits() as u64 | g::O_ACCMODE as u64;
    if how.flags & !known_flags != 0 || how.resolve & !(Restrict::all().bits() | RESOLVE_CACHED) != 0 {
        return Err(Errno::EINVAL.into());
    }
    let flags = how.flags as u32;
    let creates = flags & (g::O_CREAT | g::__O_TMPFILE) != 0;
    if (how.mode != 0 && !creates) || how.mode & !0o7777 != 0 {
        return Err(Errno::EINVAL.into());
    }
    let restrict = Restrict::from_bits_truncate(how.resolve);
    if restrict.contains(Restrict::BENEATH | Restrict::IN_ROOT) {
        return Err(Errno::EINVAL.into());
    }
    if how.resolve & RESOLVE_CACHED != 0 {
        // Every lookup may need the file system itself, so none can be
        // promised from the cache alone: the caller retries without it.
        return Err(Errno::EAGAIN.into());
    }
    open_common(task, a[0], a[1], flags, how.mode as u32, restrict)
}

pub fn close(task: &mut Task, a: &[u64; 6]) -> SysResult {
    task.files.remove(a[0] as i32)?;
    Ok(0)
}

pub fn close_range(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (first, last, flags) = (a[0] as u32, a[1] as u32, a[2] as u32);
    if first > last || flags & !(libc::CLOSE_RANGE_CLOEXEC | libc::CLOSE_RANGE_UNSHARE) != 0 {
        return Err(Errno::EINVAL.into());
    }
    if flags & libc::CLOSE_RANGE_CLOEXEC != 0 {
        for (fd, _) in task.files.list() {
            if (fd as u32) >= first && (fd as u32) <= last {
                let _ = task.files.set_cloexec(fd, true);
            }
        }
    } else {
        task.files.remove_range(first, last);
    }
    Ok(0)
}

fn write_stat(task: &Task, addr: u64, st: &Stat) -> SysResult {
    task.mm.write_pod(addr, &st.to_abi())?;
    Ok(0)
}

pub fn fstat(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let st = file(task, a[0])?.ops.stat()?;
    write_stat(task, a[1], &st)
}

pub fn stat(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let path = read_path(task, a[0])?;
    let st = resolve(task, g::AT_FDCWD as u64, &path, Lookup::FOLLOW)?.inode.stat()?;
    write_stat(task, a[1], &st)
}

pub fn lstat(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let path = read_path(task, a[0])?;
    let st = resolve(task, g::AT_FDCWD as u64, &path, Lookup::NOFOLLOW)?.inode.stat()?;
    write_stat(task, a[1], &st)
}

fn follow_of(flags: u64) -> Lookup {
    Lookup { follow: flags & g::AT_SYMLINK_NOFOLLOW as u64 == 0, directory: false }
}

pub fn newfstatat(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let flags = a[3];
    if flags & !((g::AT_SYMLINK_NOFOLLOW | g::AT_EMPTY_PATH | g::AT_NO_AUTOMOUNT) as u64) != 0 {
        return Err(Errno::EINVAL.into());
    }
    let st = resolve_at(task, a[0], a[1], flags, follow_of(flags))?.stat()?;
    write_stat(task, a[2], &st)
}

pub fn statx(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let flags = a[2];
    let known = g::AT_SYMLINK_NOFOLLOW | g::AT_EMPTY_PATH | g::AT_NO_AUTOMOUNT | g::AT_STATX_SYNC_TYPE;
    let sync = (g::AT_STATX_FORCE_SYNC | g::AT_STATX_DONT_SYNC) as u64;
    if flags & !(known as u64) != 0 || a[3] & g::STATX__RESERVED as u64 != 0 || flags & sync == sync {
        return Err(Errno::EINVAL.into());
    }
    let st = resolve_at(task, a[0], a[1], flags, follow_of(flags))?.stat()?;
    task.mm.write_pod(a[4], &st.to_statx())?;
    Ok(0)
}

fn access_common(task: &Task, dirfd: u64, path_addr: u64, mode: u64, flags: u64) -> SysResult {
    if mode & !7 != 0 || flags & !((g::AT_EACCESS | g::AT_SYMLINK_NOFOLLOW | g::AT_EMPTY_PATH) as u64) != 0 {
        return Err(Errno::EINVAL.into());
    }
    // Without AT_EACCESS the question is asked as the real ids
    // (access_override_creds), lookups included.
    let creds = task.tg.creds();
    let creds = if flags & g::AT_EACCESS as u64 == 0 { Arc::new(creds.for_access()) } else { creds };
    let target = {
        let path = read_path(task, path_addr)?;
        if path.is_empty() {
            if flags & g::AT_EMPTY_PATH as u64 == 0 {
                return Err(Errno::ENOENT.into());
            }
            if dirfd as i32 == g::AT_FDCWD { Some(task.fs_context().cwd) } else { file(task, dirfd)?.dentry.clone() }
        } else {
            let start = start_dir(task, dirfd, &path)?;
            let fsc = task.fs_context();
            let r = crate::fs::Resolver {
                root: &fsc.root,
                cwd: &fsc.cwd,
                mounts: &task.kernel.mounts,
                creds: &creds,
                restrict: crate::fs::path::Restrict::empty(),
            };
            Some(r.resolve(start.as_ref(), &path, follow_of(flags))?)
        }
    };
    if let Some(d) = target
        && mode != 0
    {
        crate::fs::permission(&d, &creds, mode as u32)?;
    }
    Ok(0)
}

pub fn access(task: &mut Task, a: &[u64; 6]) -> SysResult {
    access_common(task, g::AT_FDCWD as u64, a[0], a[1], 0)
}

pub fn faccessat(task: &mut Task, a: &[u64; 6]) -> SysResult {
    access_common(task, a[0], a[1], a[2], 0)
}

pub fn faccessat2(task: &mut Task, a: &[u64; 6]) -> SysResult {
    access_common(task, a[0], a[1], a[2], a[3])
}

fn readlink_common(task: &Task, dirfd: u64, path_addr: u64, buf: u64, size: u64) -> SysResult {
    if (size as i64) <= 0 {
        return Err(Errno::EINVAL.into());
    }
    let path = read_path(task, path_addr)?;
    let d = if path.is_empty() {
        file(task, dirfd)?.dentry.clone().ok_or(Errno::ENOENT)?
    } else {
        resolve(task, dirfd, &path, Lookup::NOFOLLOW)?
    };
    if d.file_type() != FileType::Symlink {
        return Err(Errno::EINVAL.into());
    }
    let target = d.inode.read_link()?;
    let n = target.len().min(size as usize);
    task.mm.copy_out(buf, &target[..n])?;
    Ok(n as u64)
}

pub fn readlink(task: &mut Task, a: &[u64; 6]) -> SysResult {
    readlink_common(task, g::AT_FDCWD as u64, a[0], a[1], a[2])
}

pub fn readlinkat(task: &mut Task, a: &[u64; 6]) -> SysResult {
    readlink_common(task, a[0], a[1], a[2], a[3])
}

pub fn getdents64(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let f = file(task, a[0])?;
    if f.flags().contains(OpenFlags::PATH) {
        return Err(Errno::EBADF.into());
    }
    let count = (a[2] as u32).min(1 << 20) as usize;
    if f.dentry.as_ref().is_some_and(|d| d.file_type() != FileType::Directory) {
        return Err(Errno::ENOTDIR.into());
    }
    if f.dentry.as_ref().is_some_and(|d| d.is_deleted()) {
        // A removed directory lists nothing more, not even its dot
        // entries (Linux's IS_DEADDIR).
        return Err(Errno::ENOENT.into());
    }
    let mut buf = vec![0u8; count];
    let mut pos = f.offset.lock().unwrap();
    let mut p = *pos;
    let n = f.ops.getdents(&mut p, &mut buf)?;
    task.mm.copy_out(a[1], &buf[..n])?;
    *pos = p;
    if let Some(d) = &f.dentry {
        inotify::notify_file(d, inotify::IN_ACCESS);
    }
    Ok(n as u64)
}

pub fn getcwd(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let fsc = task.fs_context();
    if fsc.cwd.is_deleted() {
        // The working directory was removed (Linux's d_unlinked check).
        return Err(Errno::ENOENT.into());
    }
    let path = match fsc.cwd.path_from(&fsc.root) {
        Some(p) => p,
        None => {
            let mut p = b"(unreachable)".to_vec();
            p.extend(fsc.cwd.path());
            p
        }
    };
    if path.len() + 1 > a[1] as usize {
        return Err(Errno::ERANGE.into());
    }
    let mut out = path;
    out.push(0);
    task.mm.copy_out(a[0], &out)?;
    Ok(out.len() as u64)
}

fn set_cwd(task: &Task, d: Arc<Dentry>) -> SysResult {
    if d.file_type() != FileType::Directory {
        return Err(Errno::ENOTDIR.into());
    }
    d.inode.access(&task.tg.creds(), MAY_EXEC)?;
    task.fs.lock().unwrap().cwd = d;
    Ok(0)
}

pub fn chdir(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let path = read_path(task, a[0])?;
    let d = resolve(task, g::AT_FDCWD as u64, &path, Lookup::FOLLOW)?;
    set_cwd(task, d)
}

pub fn fchdir(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let d = file(task, a[0])?.dentry.clone().ok_or(Errno::ENOTDIR)?;
    set_cwd(task, d)
}

pub fn dup(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let f = file(task, a[0])?;
    Ok(task.files.install(f, false, 0)? as u64)
}

fn dup_to(task: &Task, old: u64, new: u64, cloexec: bool) -> SysResult {
    let f = file(task, old)?;
    task.files.install_at(new as i32, f, cloexec)?;
    Ok(new as i32 as u64)
}

pub fn dup2(task: &mut Task, a: &[u64; 6]) -> SysResult {
    if a[0] as i32 == a[1] as i32 {
        file(task, a[0])?;
        return Ok(a[1] as i32 as u64);
    }
    dup_to(task, a[0], a[1], false)
}

pub fn dup3(task: &mut Task, a: &[u64; 6]) -> SysResult {
    if a[2] & !(g::O_CLOEXEC as u64) != 0 || a[0] as i32 == a[1] as i32 {
        return Err(Errno::EINVAL.into());
    }
    dup_to(task, a[0], a[1], a[2] != 0)
}

pub fn fcntl(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let fd = a[0] as i32;
    let arg = a[2];
    match a[1] as u32 {
        g::F_DUPFD | g::F_DUPFD_CLOEXEC => {
            let f = file(task, a[0])?;
            // The minimum is an int taken as unsigned, as Linux's f_dupfd
            // does: a negative one is past any limit.
            let min = arg as u32;
            if min >= task.files.limit() {
                return Err(Errno::EINVAL.into());
            }
            Ok(task.files.install(f, a[1] as u32 == g::F_DUPFD_CLOEXEC, min)? as u64)
        }
        g::F_GETFD => Ok(u64::from(task.files.entry(fd)?.cloexec)),
        g::F_SETFD => {
            task.files.set_cloexec(fd, arg & g::FD_CLOEXEC as u64 != 0)?;
            Ok(0)
        }
        g::F_GETFL => Ok(file(task, a[0])?.flags().bits() as u64),
        g::F_SETFL => {
            file(task, a[0])?.set_status_flags(OpenFlags::from_bits_retain(arg as u32));
            Ok(0)
        }
        g::F_GETLK | g::F_SETLK | g::F_SETLKW | g::F_OFD_GETLK | g::F_OFD_SETLK | g::F_OFD_SETLKW => {
            record_lock(task, a[0], a[1] as u32, arg)
        }
        g::F_GETOWN => {
            let (kind, id) = live_owner(task, &*file(task, a[0])?);
            Ok((if kind == FileOwner::Group { -id } else { id }) as i64 as u64)
        }
        g::F_SETOWN => {
            let f = file(task, a[0])?;
            let who = arg as i32;
            if who == i32::MIN {
                return Err(Errno::EINVAL.into());
            }
            let (kind, id) = if who < 0 { (FileOwner::Group, -who) } else { (FileOwner::Process, who) };
            if id != 0 && !task.kernel.procs.lock().unwrap().id_in_use(id) {
                return Err(Errno::ESRCH.into());
            }
            f.set_owner(kind, id);
            Ok(0)
        }
        g::F_GETOWN_EX => {
            let (kind, id) = live_owner(task, &*file(task, a[0])?);
            let ty = match kind {
                FileOwner::Thread => g::F_OWNER_TID,
                FileOwner::Process => g::F_OWNER_PID,
                FileOwner::Group => g::F_OWNER_PGRP,
            };
            let mut o = <g::f_owner_ex as crate::abi::Pod>::zeroed();
            o.type_ = ty as _;
            o.pid = id;
            task.mm.write_pod(arg, &o)?;
            Ok(0)
        }
        g::F_SETOWN_EX => {
            let f = file(task, a[0])?;
            let o: g::f_owner_ex = task.mm.read_pod(arg)?;
            let kind = match o.type_ as u32 {
                g::F_OWNER_TID => FileOwner::Thread,
                g::F_OWNER_PID => FileOwner::Process,
                g::F_OWNER_PGRP => FileOwner::Group,
                _ => return Err(Errno::EINVAL.into()),
            };
            if o.pid != 0 && (o.pid < 0 || !task.kernel.procs.lock().unwrap().id_in_use(o.pid)) {
                return Err(Errno::ESRCH.into());
            }
            f.set_owner(kind, o.pid);
            Ok(0)
        }
        g::F_GETSIG => Ok(u64::from(file(task, a[0])?.owner_signal())),
        g::F_SETSIG => {
            let f = file(task, a[0])?;
            if arg > crate::signal::NSIG as u64 {
                return Err(Errno::EINVAL.into());
            }
            f.set_owner_signal(arg as u32);
            Ok(0)
        }
        g::F_GETPIPE_SZ => {
            let f = file(task, a[0])?;
            Ok(crate::fs::pipe::pipe_of(&*f.ops).ok_or(Errno::EBADF)?.capacity() as u64)
        }
        g::F_SETPIPE_SZ => {
            let f = file(task, a[0])?;
            let p = crate::fs::pipe::pipe_of(&*f.ops).ok_or(Errno::EBADF)?;
            Ok(p.set_capacity(arg as usize)? as u64)
        }
        g::F_ADD_SEALS | g::F_GET_SEALS => {
            let f = file(task, a[0])?;
            let Some(t) = f.ops.downcast_ref::<crate::fs::tmpfs::TmpFile>() else {
                return Err(Errno::EINVAL.into());
            };
            if a[1] as u32 == g::F_GET_SEALS {
                return Ok(t.inode().seals() as u64);
            }
            if !f.writable() {
                return Err(Errno::EPERM.into());
            }
            t.inode().add_seals(arg as u32)?;
            Ok(0)
        }
        _ => Err(Errno::EINVAL.into()),
    }
}

/// F_GETLK, F_SETLK, F_SETLKW and their OFD forms (Linux's fcntl_getlk
/// and fcntl_setlk).
fn record_lock(task: &Task, fd: u64, cmd: u32, arg: u64) -> SysResult {
    let f = file(task, fd)?;
    if f.flags().contains(OpenFlags::PATH) {
        return Err(Errno::EBADF.into());
    }
    let mut l: g::flock = task.mm.read_pod(arg)?;
    let ofd = matches!(cmd, g::F_OFD_GETLK | g::F_OFD_SETLK | g::F_OFD_SETLKW);
    let kind = match l.l_type as u32 {
        g::F_RDLCK => Some(LockKind::Read),
        g::F_WRLCK => Some(LockKind::Write),
        _ => None,
    };
    let valid_type = kind.is_some() || l.l_type as u32 == g::F_UNLCK;
    let key = f.key()?;
    if matches!(cmd, g::F_GETLK | g::F_OFD_GETLK) {
        // Asking about an unlock means nothing.
        let Some(kind) = kind else { return Err(Errno::EINVAL.into()) };
        let (start, end) = lock_range(&f, &l)?;
        if ofd && l.l_pid != 0 {
            return Err(Errno::EINVAL.into());
        }
        let owner = if ofd { LockOwner::File(f.id()) } else { LockOwner::Process(task.files.lock_owner_id()) };
        let req = RecordLock { owner, pid: 0, kind, start, end };
        match lock::test(key, &req) {
            Some(held) => {
                l.l_type = if held.kind == LockKind::Write { g::F_WRLCK } else { g::F_RDLCK } as i16;
                l.l_whence = g::SEEK_SET as i16;
                l.l_start = held.start;
                l.l_len = if held.end == lock::OFFSET_MAX { 0 } else { held.end - held.start + 1 };
                l.l_pid = held.pid;
            }
            None => l.l_type = g::F_UNLCK as i16,
        }
        task.mm.write_pod(arg, &l)?;
        return Ok(0);
    }
    let (start, end) = lock_range(&f, &l)?;
    if !valid_type {
        return Err(Errno::EINVAL.into());
    }
    match kind {
        Some(LockKind::Read) if !f.readable() => return Err(Errno::EBADF.into()),
        Some(LockKind::Write) if !f.writable() => return Err(Errno::EBADF.into()),
        _ => {}
    }
    if ofd && l.l_pid != 0 {
        return Err(Errno::EINVAL.into());
    }
    let wait = matches!(cmd, g::F_SETLKW | g::F_OFD_SETLKW);
    let (owner, pid) = if ofd {
        f.note_locked();
        (LockOwner::File(f.id()), -1)
    } else {
        (task.files.lock_owner(), task.tg.tgid)
    };
    lock::set(&task.ctx(), key, owner, pid, kind, (start, end), wait)?;
    Ok(0)
}

/// The bytes a `struct flock` names, first and last (Linux's
/// flock_to_posix_lock): from the start, the offset or the end of the file,
/// backwards for a negative length, to the end of any file for length 0.
fn lock_range(f: &OpenFile, l: &g::flock) -> Result<(i64, i64), SysError> {
    let base = match l.l_whence as u32 {
        g::SEEK_SET => 0,
        g::SEEK_CUR => *f.offset.lock().unwrap() as i64,
        g::SEEK_END => f.ops.stat()?.size as i64,
        _ => return Err(Errno::EINVAL.into()),
    };
    let start = base.checked_add(l.l_start).ok_or(Errno::EOVERFLOW)?;
    if start < 0 {
        return Err(Errno::EINVAL.into());
    }
    match l.l_len {
        0 => Ok((start, lock::OFFSET_MAX)),
        len if len > 0 => {
            if len - 1 > lock::OFFSET_MAX - start {
                return Err(Errno::EOVERFLOW.into());
            }
            Ok((start, start + (len - 1)))
        }
        len => {
            let first = start.checked_add(len).filter(|s| *s >= 0).ok_or(Errno::EINVAL)?;
            Ok((first, start - 1))
        }
    }
}

/// flock(2): BSD locks, owned by the open file description.
pub fn flock(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let op = a[1] as u32;
    if op & g::LOCK_MAND != 0 {
        // Never enforced, and accepted as doing nothing since Linux 5.15.
        return Ok(0);
    }
    let kind = match op & !g::LOCK_NB {
        g::LOCK_SH => Some(LockKind::Read),
        g::LOCK_EX => Some(LockKind::Write),
        g::LOCK_UN => None,
        _ => return Err(Errno::EINVAL.into()),
    };
    let f = file(task, a[0])?;
    if f.flags().contains(OpenFlags::PATH) {
        return Err(Errno::EBADF.into());
    }
    if kind.is_some() {
        f.note_locked();
    }
    lock::flock(&task.ctx(), f.key()?, f.id(), kind, op & g::LOCK_NB != 0)?;
    Ok(0)
}

/// A file's owner as F_GETOWN reports it: the id only while what it names
/// still exists.
fn live_owner(task: &Task, f: &OpenFile) -> (FileOwner, i32) {
    let (kind, id) = f.owner();
    let tree = task.kernel.procs.lock().unwrap();
    let live = match kind {
        FileOwner::Thread => tree.thread(id).is_some(),
        FileOwner::Process => tree.group(id).is_some(),
        FileOwner::Group => tree.group_exists(id),
    };
    (kind, if live { id } else { 0 })
}

pub fn ioctl(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let f = file(task, a[0])?;
    if f.flags().contains(OpenFlags::PATH) {
        return Err(Errno::EBADF.into());
    }
    let cmd = a[1] as u32;
    match cmd {
        ioc::FIOCLEX | ioc::FIONCLEX => {
            task.files.set_cloexec(a[0] as i32, cmd == ioc::FIOCLEX)?;
            Ok(0)
        }
        ioc::FIONBIO => {
            let on: i32 = task.mm.read_pod(a[2])?;
            let fl = f.flags();
            f.set_status_flags(if on != 0 { fl | OpenFlags::NONBLOCK } else { fl - OpenFlags::NONBLOCK });
            Ok(0)
        }
        ioc::FIONREAD => {
            let st = f.ops.stat()?;
            // Anonymous files have no type bits: only real regular files
            // answer from their size.
            let avail = if st.mode & g::S_IFMT == g::S_IFREG {
                // The bytes between the offset and the end, as an int
                // (negative past the end), as Linux answers for any file.
                let pos = *f.offset.lock().unwrap();
                Some((st.size as i64).wrapping_sub(pos as i64) as i32)
            } else {
                f.ops.readable_bytes().map(|n| n.min(i32::MAX as u64) as i32)
            };
            match avail {
                Some(n) => {
                    task.mm.write_pod(a[2], &n)?;
                    Ok(0)
                }
                None => Ok(f.ops.ioctl(&task.ctx(), &f, &task.mm, cmd, a[2])?),
            }
        }
        ioc::TIOCGPTPEER if f.ops.downcast_ref::<crate::tty::MasterFile>().is_some() => {
            let pty = f.ops.downcast_ref::<crate::tty::MasterFile>().expect("a pty master").pty().clone();
            let allowed = g::O_ACCMODE | g::O_NOCTTY | g::O_NONBLOCK | g::O_CLOEXEC;
            if a[2] & !(allowed as u64) != 0 {
                return Err(Errno::EINVAL.into());
            }
            // The slave as /dev/pts/N would open it, that path and all.
            let flags = OpenFlags::from_bits_retain(a[2] as u32) | OpenFlags::LARGEFILE;
            let path = format!("/dev/pts/{}", pty.index());
            let dentry = task.with_resolver(|r| r.resolve(None, path.as_bytes(), Lookup::FOLLOW))?;
            let ops = pty.open_slave(&task.ctx(), flags, None)?;
            let peer = OpenFile::new(ops, Some(dentry), flags);
            Ok(task.files.install(peer, flags.contains(OpenFlags::CLOEXEC), 0)? as u64)
        }
        _ => Ok(f.ops.ioctl(&task.ctx(), &f, &task.mm, cmd, a[2])?),
    }
}

fn write_statfs(task: &Task, addr: u64, s: &crate::fs::StatFs) -> SysResult {
    let mut out = <g::statfs64 as crate::abi::Pod>::zeroed();
    out.f_type = s.fs_type as _;
    out.f_bsize = s.block_size as _;
    out.f_blocks = s.blocks;
    out.f_bfree = s.blocks_free;
    out.f_bavail = s.blocks_avail;
    out.f_files = s.files;
    out.f_ffree = s.files_free;
    out.f_namelen = s.name_max as _;
    out.f_frsize = s.block_size as _;
    out.f_flags = s.flags as _;
    task.mm.write_pod(addr, &out)?;
    Ok(0)
}

pub fn statfs(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let path = read_path(task, a[0])?;
    let s = resolve(task, g::AT_FDCWD as u64, &path, Lookup::FOLLOW)?.statfs()?;
    write_statfs(task, a[1], &s)
}

pub fn fstatfs(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let f = file(task, a[0])?;
    let s = match &f.dentry {
        Some(d) => d.statfs()?,
        None => crate::fs::StatFs { block_size: 4096, name_max: 255, ..Default::default() },
    };
    write_statfs(task, a[1], &s)
}

pub fn umask(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let mut fs = task.fs.lock().unwrap();
    let old = fs.umask;
    fs.umask = a[0] as u32 & 0o777;
    Ok(old as u64)
}

/// fsync, fdatasync, syncfs, fadvise64, readahead: valid on any open
/// file, with nothing to do for read-only and sentry-served files.
pub fn fd_noop(task: &mut Task, a: &[u64; 6]) -> SysResult {
    file(task, a[0])?;
    Ok(0)
}

/// fsync and fdatasync: what the file's own operation answers.
fn sync_file(task: &Task, fd: u64, data_only: bool) -> SysResult {
    let f = file(task, fd)?;
    if f.flags().contains(OpenFlags::PATH) {
        return Err(Errno::EBADF.into());
    }
    f.ops.sync(data_only)?;
    Ok(0)
}

pub fn fsync(task: &mut Task, a: &[u64; 6]) -> SysResult {
    sync_file(task, a[0], false)
}

pub fn fdatasync(task: &mut Task, a: &[u64; 6]) -> SysResult {
    sync_file(task, a[0], true)
}

pub fn sync(_task: &mut Task, _a: &[u64; 6]) -> SysResult {
    Ok(0)
}

pub fn chroot(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let path = read_path(task, a[0])?;
    let d = resolve(task, g::AT_FDCWD as u64, &path, Lookup::FOLLOW)?;
    if d.file_type() != FileType::Directory {
        return Err(Errno::ENOTDIR.into());
    }
    let creds = task.tg.creds();
    d.inode.access(&creds, MAY_EXEC)?;
    if !creds.has(cap::SYS_CHROOT) {
        return Err(Errno::EPERM.into());
    }
    task.fs.lock().unwrap().root = d;
    Ok(0)
}

/// memfd_create(2): an anonymous tmpfs file, sealable with
/// MFD_ALLOW_SEALING.
pub fn memfd_create(task: &mut Task, a: &[u64; 6]) -> SysResult {
    const MFD_CLOEXEC: u32 = 1;
    const MFD_ALLOW_SEALING: u32 = 2;
    const MFD_HUGETLB: u32 = 4;
    const MFD_NOEXEC_SEAL: u32 = 8;
    const MFD_EXEC: u32 = 0x10;
    /// NAME_MAX less the "memfd:" prefix.
    const NAME_MAX: usize = 249;
    let flags = a[1] as u32;
    if flags & !(MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_HUGETLB | MFD_NOEXEC_SEAL | MFD_EXEC) != 0
        || flags & (MFD_NOEXEC_SEAL | MFD_EXEC) == (MFD_NOEXEC_SEAL | MFD_EXEC)
    {
        return Err(Errno::EINVAL.into());
    }
    if flags & MFD_HUGETLB != 0 {
        // No huge page pool in the sandbox (as a kernel without one).
        return Err(Errno::EINVAL.into());
    }
    let name = task.mm.read_cstring(a[0], NAME_MAX + 1)?;
    if name.len() > NAME_MAX {
        return Err(Errno::EINVAL.into());
    }
    let creds = task.tg.creds();
    let noexec = flags & MFD_NOEXEC_SEAL != 0;
    let mode = g::S_IFREG | if noexec { 0o666 } else { 0o777 };
    let node = crate::fs::NewNode { mode, uid: creds.uid.fs, gid: creds.gid.fs, rdev: 0 };
    let root = task.kernel.memfd_root.clone();
    let tmp = root.inode.downcast_ref::<crate::fs::tmpfs::TmpInode>().expect("the memfd root is a tmpfs");
    let sealing = flags & (MFD_ALLOW_SEALING | MFD_NOEXEC_SEAL) != 0;
    let inode = tmp.memfd(node, sealing);
    if noexec {
        inode.add_seals(crate::fs::tmpfs::seal::EXEC)?;
    }
    let mut dname = b"memfd:".to_vec();
    dname.extend_from_slice(&name);
    let dentry = root.child(&dname, inode, root.mount.clone());
    dentry.set_deleted();
    let oflags = OpenFlags::RDWR | OpenFlags::LARGEFILE;
    let ops = dentry.inode.open(&task.ctx(), &dentry, oflags)?;
    let f = OpenFile::new(ops, Some(dentry), oflags);
    Ok(task.files.install(f, flags & MFD_CLOEXEC != 0, 0)? as u64)
}
