//! System calls that change a file system: making and removing names,
//! renaming, linking, and changing attributes and extended attributes. The
//! checks they share live in `fs::namei`; these read the arguments.

use std::sync::Arc;

use linux_raw_sys::general as g;

use super::{SysError, SysResult, file, read_path, start_dir};
use crate::auth::{Creds, FILE_CAPS_XATTR, FileCaps, cap};
use crate::errno::Errno;
use crate::fs::namei::{self, AttrChange, Parent, TimeArg};
use crate::fs::{Dentry, FileType, FsError, Lookup, OpenFile, RenameFlags, Timespec};
use crate::task::Task;

/// Resolves the parent of the path at `path_addr` for `dirfd`.
fn parent_at(task: &Task, dirfd: u64, path_addr: u64) -> Result<Parent, SysError> {
    let path = read_path(task, path_addr)?;
    let start = start_dir(task, dirfd, &path)?;
    Ok(task.with_resolver(|r| namei::parent_of(r, start.as_ref(), &path))?)
}

/// Resolves a path, or with AT_EMPTY_PATH and an empty path the file of
/// `dirfd` itself.
fn target_at(task: &Task, dirfd: u64, path_addr: u64, flags: u64, follow: bool) -> Result<Arc<Dentry>, SysError> {
    let path = read_path(task, path_addr)?;
    if path.is_empty() {
        if flags & g::AT_EMPTY_PATH as u64 == 0 {
            return Err(Errno::ENOENT.into());
        }
        if dirfd as i32 == g::AT_FDCWD {
            return Ok(task.fs_context().cwd);
        }
        return file(task, dirfd)?.dentry.clone().ok_or_else(|| Errno::EBADF.into());
    }
    let start = start_dir(task, dirfd, &path)?;
    let how = Lookup { follow, directory: false };
    Ok(task.with_resolver(|r| r.resolve(start.as_ref(), &path, how))?)
}

fn umask(task: &Task) -> u32 {
    task.fs.lock().unwrap().umask
}

fn make_node(task: &Task, dirfd: u64, path_addr: u64, mode: u32, rdev: u64) -> SysResult {
    let parent = parent_at(task, dirfd, path_addr)?;
    let ctx = task.ctx();
    let is_dir = mode & g::S_IFMT == g::S_IFDIR;
    task.with_resolver(|r| {
        namei::create_node(r, &ctx, &parent, is_dir, |dir, name| {
            let node = namei::new_node(&parent.dir, &ctx.creds, mode, rdev)?;
            if is_dir { dir.mkdir(&ctx, name, node) } else { dir.mknod(&ctx, name, node) }
        })
    })?;
    Ok(0)
}

fn mkdir_common(task: &Task, dirfd: u64, path_addr: u64, mode: u32) -> SysResult {
    let mode = g::S_IFDIR | (mode & 0o1777 & !umask(task));
    make_node(task, dirfd, path_addr, mode, 0)
}

pub fn mkdir(task: &mut Task, a: &[u64; 6]) -> SysResult {
    mkdir_common(task, g::AT_FDCWD as u64, a[0], a[1] as u32)
}

pub fn mkdirat(task: &mut Task, a: &[u64; 6]) -> SysResult {
    mkdir_common(task, a[0], a[1], a[2] as u32)
}

fn mknod_common(task: &Task, dirfd: u64, path_addr: u64, mode: u32, dev: u64) -> SysResult {
    let kind = mode & g::S_IFMT;
    let kind = if kind == 0 { g::S_IFREG } else { kind };
    match kind {
        g::S_IFREG | g::S_IFIFO | g::S_IFSOCK => {}
        g::S_IFCHR | g::S_IFBLK => {
            if !task.tg.creds().has(crate::auth::cap::MKNOD) {
                return Err(Errno::EPERM.into());
            }
        }
        g::S_IFDIR => return Err(Errno::EPERM.into()),
        _ => return Err(Errno::EINVAL.into()),
    }
    let mode = kind | (mode & 0o7777 & !umask(task));
    // The kernel's encoding of the 32-bit dev_t argument.
    let rdev = crate::fs::makedev(((dev >> 8) & 0xfff) as u32, ((dev & 0xff) | ((dev >> 12) & 0xfff00)) as u32);
    let rdev = if matches!(kind, g::S_IFCHR | g::S_IFBLK) { rdev } else { 0 };
    make_node(task, dirfd, path_addr, mode, rdev)
}

pub fn mknod(task: &mut Task, a: &[u64; 6]) -> SysResult {
    mknod_common(task, g::AT_FDCWD as u64, a[0], a[1] as u32, a[2])
}

pub fn mknodat(task: &mut Task, a: &[u64; 6]) -> SysResult {
    mknod_common(task, a[0], a[1], a[2] as u32, a[3])
}

fn symlink_common(task: &Task, target_addr: u64, dirfd: u64, path_addr: u64) -> SysResult {
    let target = read_path(task, target_addr)?;
    if target.is_empty() {
        return Err(Errno::ENOENT.into());
    }
    let parent = parent_at(task, dirfd, path_addr)?;
    let ctx = task.ctx();
    task.with_resolver(|r| {
        namei::create_node(r, &ctx, &parent, false, |dir, name| {
            let node = namei::new_node(&parent.dir, &ctx.creds, g::S_IFLNK | 0o777, 0)?;
            dir.symlink(&ctx, name, &target, node)
        })
    })?;
    Ok(0)
}

pub fn symlink(task: &mut Task, a: &[u64; 6]) -> SysResult {
    symlink_common(task, a[0], g::AT_FDCWD as u64, a[1])
}

pub fn symlinkat(task: &mut Task, a: &[u64; 6]) -> SysResult {
    symlink_common(task, a[0], a[1], a[2])
}

fn remove_common(task: &Task, dirfd: u64, path_addr: u64, is_dir: bool) -> SysResult {
    let path = read_path(task, path_addr)?;
    let start = start_dir(task, dirfd, &path)?;
    let ctx = task.ctx();
    task.with_resolver(|r| {
        let parent = namei::parent_of(r, start.as_ref(), &path)?;
        if is_dir && let namei::LastName::Dot = parent.last {
            // rmdir of "." is EINVAL, of ".." ENOTEMPTY, of the root EBUSY.
            let last = last_component(&path);
            return Err(match last {
                b"." => FsError::Invalid,
                b".." => FsError::NotEmpty,
                _ => FsError::Busy,
            });
        }
        namei::remove(r, &ctx, &parent, is_dir)
    })?;
    Ok(0)
}

/// The last component of a path, trailing slashes ignored.
fn last_component(path: &[u8]) -> &[u8] {
    let end = path.iter().rposition(|b| *b != b'/').map_or(0, |i| i + 1);
    let trimmed = &path[..end];
    match trimmed.iter().rposition(|b| *b == b'/') {
        Some(i) => &trimmed[i + 1..],
        None => trimmed,
    }
}

pub fn unlink(task: &mut Task, a: &[u64; 6]) -> SysResult {
    remove_common(task, g::AT_FDCWD as u64, a[0], false)
}

pub fn rmdir(task: &mut Task, a: &[u64; 6]) -> SysResult {
    remove_common(task, g::AT_FDCWD as u64, a[0], true)
}

pub fn unlinkat(task: &mut Task, a: &[u64; 6]) -> SysResult {
    if a[2] & !(g::AT_REMOVEDIR as u64) != 0 {
        return Err(Errno::EINVAL.into());
    }
    remove_common(task, a[0], a[1], a[2] & g::AT_REMOVEDIR as u64 != 0)
}

fn rename_common(task: &Task, olddir: u64, old_addr: u64, newdir: u64, new_addr: u64, flags: u64) -> SysResult {
    let flags = RenameFlags::from_bits(flags as u32).ok_or(Errno::EINVAL)?;
    if flags.contains(RenameFlags::WHITEOUT) && !task.tg.creds().has(crate::auth::cap::MKNOD) {
        return Err(Errno::EPERM.into());
    }
    let old = parent_at(task, olddir, old_addr)?;
    let new = parent_at(task, newdir, new_addr)?;
    let ctx = task.ctx();
    task.with_resolver(|r| namei::rename(r, &ctx, &old, &new, flags))?;
    Ok(0)
}

pub fn rename(task: &mut Task, a: &[u64; 6]) -> SysResult {
    rename_common(task, g::AT_FDCWD as u64, a[0], g::AT_FDCWD as u64, a[1], 0)
}

pub fn renameat(task: &mut Task, a: &[u64; 6]) -> SysResult {
    rename_common(task, a[0], a[1], a[2], a[3], 0)
}

pub fn renameat2(task: &mut Task, a: &[u64; 6]) -> SysResult {
    rename_common(task, a[0], a[1], a[2], a[3], a[4])
}

fn link_common(task: &Task, olddir: u64, old_addr: u64, newdir: u64, new_addr: u64, flags: u64) -> SysResult {
    if flags & !((g::AT_SYMLINK_FOLLOW | g::AT_EMPTY_PATH) as u64) != 0 {
        return Err(Errno::EINVAL.into());
    }
    let target = target_at(task, olddir, old_addr, flags, flags & g::AT_SYMLINK_FOLLOW as u64 != 0)?;
    let parent = parent_at(task, newdir, new_addr)?;
    let ctx = task.ctx();
    task.with_resolver(|r| namei::link(r, &ctx, &target, &parent))?;
    Ok(0)
}

pub fn link(task: &mut Task, a: &[u64; 6]) -> SysResult {
    link_common(task, g::AT_FDCWD as u64, a[0], g::AT_FDCWD as u64, a[1], 0)
}

pub fn linkat(task: &mut Task, a: &[u64; 6]) -> SysResult {
    link_common(task, a[0], a[1], a[2], a[3], a[4])
}

/// Applies an attribute change to the file a path or descriptor names.
fn change(task: &Task, d: &Dentry, change: &AttrChange) -> SysResult {
    namei::change_attr(&task.ctx(), d, change)?;
    Ok(0)
}

/// The dentry of an open file for fchmod/fchown/futimens; O_PATH
/// descriptors are refused (EBADF) as Linux does.
fn fd_dentry(task: &Task, fd: u64) -> Result<(Arc<OpenFile>, Arc<Dentry>), SysError> {
    let f = file(task, fd)?;
    if f.flags().contains(crate::fs::OpenFlags::PATH) {
        return Err(Errno::EBADF.into());
    }
    let d = f.dentry.clone().ok_or(Errno::EBADF)?;
    Ok((f, d))
}

fn mode_change(mode: u64) -> AttrChange {
    AttrChange { mode: Some(mode as u32 & 0o7777), ..Default::default() }
}

pub fn chmod(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let d = target_at(task, g::AT_FDCWD as u64, a[0], 0, true)?;
    change(task, &d, &mode_change(a[1]))
}

pub fn fchmodat(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let d = target_at(task, a[0], a[1], 0, true)?;
    change(task, &d, &mode_change(a[2]))
}

pub fn fchmodat2(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let flags = a[3];
    if flags & !((g::AT_SYMLINK_NOFOLLOW | g::AT_EMPTY_PATH) as u64) != 0 {
        return Err(Errno::EINVAL.into());
    }
    let d = target_at(task, a[0], a[1], flags, flags & g::AT_SYMLINK_NOFOLLOW as u64 == 0)?;
    if d.file_type() == FileType::Symlink {
        return Err(Errno::EOPNOTSUPP.into());
    }
    change(task, &d, &mode_change(a[2]))
}

pub fn fchmod(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (_, d) = fd_dentry(task, a[0])?;
    change(task, &d, &mode_change(a[1]))
}

fn owner_change(uid: u64, gid: u64) -> AttrChange {
    let id = |v: u64| (v as u32 != u32::MAX).then_some(v as u32);
    AttrChange { uid: id(uid), gid: id(gid), ..Default::default() }
}

pub fn chown(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let d = target_at(task, g::AT_FDCWD as u64, a[0], 0, true)?;
    change(task, &d, &owner_change(a[1], a[2]))
}

pub fn lchown(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let d = target_at(task, g::AT_FDCWD as u64, a[0], 0, false)?;
    change(task, &d, &owner_change(a[1], a[2]))
}

pub fn fchownat(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let flags = a[4];
    if flags & !((g::AT_SYMLINK_NOFOLLOW | g::AT_EMPTY_PATH) as u64) != 0 {
        return Err(Errno::EINVAL.into());
    }
    let d = target_at(task, a[0], a[1], flags, flags & g::AT_SYMLINK_NOFOLLOW as u64 == 0)?;
    change(task, &d, &owner_change(a[2], a[3]))
}

pub fn fchown(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (_, d) = fd_dentry(task, a[0])?;
    change(task, &d, &owner_change(a[1], a[2]))
}

fn size_arg(v: u64) -> Result<u64, SysError> {
    if (v as i64) < 0 { Err(Errno::EINVAL.into()) } else { Ok(v) }
}

pub fn truncate(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let size = size_arg(a[1])?;
    let d = target_at(task, g::AT_FDCWD as u64, a[0], 0, true)?;
    match d.file_type() {
        FileType::Directory => return Err(Errno::EISDIR.into()),
        FileType::Regular => {}
        _ => return Err(Errno::EINVAL.into()),
    }
    namei::want_write(&d)?;
    crate::fs::permission(&d, &task.tg.creds(), crate::fs::MAY_WRITE)?;
    let _truncating = crate::fs::write_access::WriteAccess::get(d.key())?;
    change(task, &d, &AttrChange { size: Some(size), ..Default::default() })
}

pub fn ftruncate(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let size = size_arg(a[1])?;
    let f = file(task, a[0])?;
    if f.flags().contains(crate::fs::OpenFlags::PATH) {
        return Err(Errno::EBADF.into());
    }
    if !f.writable() {
        return Err(Errno::EINVAL.into());
    }
    let d = f.dentry.clone().ok_or(Errno::EINVAL)?;
    if d.file_type() != FileType::Regular {
        return Err(Errno::EINVAL.into());
    }
    // The descriptor was opened for writing: no permission is asked again,
    // and the owner need not be the caller (do_truncate with a file).
    change(task, &d, &AttrChange { size: Some(size), ..Default::default() })
}

/// A time of utimensat's array: UTIME_NOW, UTIME_OMIT or a time.
fn time_arg(t: &g::__kernel_timespec) -> Result<TimeArg, SysError> {
    const UTIME_NOW: i64 = (1 << 30) - 1;
    const UTIME_OMIT: i64 = (1 << 30) - 2;
    match t.tv_nsec {
        UTIME_NOW => Ok(TimeArg::Now),
        UTIME_OMIT => Ok(TimeArg::Omit),
        n if (0..1_000_000_000).contains(&n) => Ok(TimeArg::At(Timespec { sec: t.tv_sec, nsec: n as u32 })),
        _ => Err(Errno::EINVAL.into()),
    }
}

pub fn utimensat(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let flags = a[3];
    if flags & !((g::AT_SYMLINK_NOFOLLOW | g::AT_EMPTY_PATH) as u64) != 0 {
        return Err(Errno::EINVAL.into());
    }
    let (atime, mtime) = if a[2] == 0 {
        (TimeArg::Now, TimeArg::Now)
    } else {
        let ts: [g::__kernel_timespec; 2] = [task.mm.read_pod(a[2])?, task.mm.read_pod(a[2] + 16)?];
        (time_arg(&ts[0])?, time_arg(&ts[1])?)
    };
    let d = if a[1] == 0 {
        // futimens: the descriptor itself.
        file(task, a[0])?.dentry.clone().ok_or(Errno::EBADF)?
    } else {
        target_at(task, a[0], a[1], flags, flags & g::AT_SYMLINK_NOFOLLOW as u64 == 0)?
    };
    if atime == TimeArg::Omit && mtime == TimeArg::Omit {
        return Ok(0);
    }
    change(task, &d, &AttrChange { atime, mtime, ..Default::default() })
}

/// utimes(2) and utime(2): microsecond or second times, or now.
pub fn utimes(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (atime, mtime) = if a[1] == 0 {
        (TimeArg::Now, TimeArg::Now)
    } else if task.regs.syscall_number() == g::__NR_utime as u64 {
        let t: [i64; 2] = [task.mm.read_pod(a[1])?, task.mm.read_pod(a[1] + 8)?];
        (TimeArg::At(Timespec { sec: t[0], nsec: 0 }), TimeArg::At(Timespec { sec: t[1], nsec: 0 }))
    } else {
        let tv: [g::__kernel_old_timeval; 2] = [task.mm.read_pod(a[1])?, task.mm.read_pod(a[1] + 16)?];
        let conv = |t: &g::__kernel_old_timeval| -> Result<TimeArg, SysError> {
            if !(0..1_000_000).contains(&t.tv_usec) {
                return Err(Errno::EINVAL.into());
            }
            Ok(TimeArg::At(Timespec { sec: t.tv_sec, nsec: t.tv_usec as u32 * 1000 }))
        };
        (conv(&tv[0])?, conv(&tv[1])?)
    };
    let d = target_at(task, g::AT_FDCWD as u64, a[0], 0, true)?;
    change(task, &d, &AttrChange { atime, mtime, ..Default::default() })
}

pub fn fallocate(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (mode, offset, len) = (a[1] as u32, a[2] as i64, a[3] as i64);
    let f = file(task, a[0])?;
    let known = g::FALLOC_FL_KEEP_SIZE | g::FALLOC_FL_PUNCH_HOLE;
    if mode & !known != 0 {
        return Err(Errno::EOPNOTSUPP.into());
    }
    if mode & g::FALLOC_FL_PUNCH_HOLE != 0 && mode & g::FALLOC_FL_KEEP_SIZE == 0 {
        return Err(Errno::EOPNOTSUPP.into());
    }
    if offset < 0 || len <= 0 {
        return Err(Errno::EINVAL.into());
    }
    if !f.writable() {
        return Err(Errno::EBADF.into());
    }
    match f.ops.stat()?.file_type() {
        FileType::Directory => return Err(Errno::EISDIR.into()),
        FileType::Fifo => return Err(Errno::ESPIPE.into()),
        FileType::Regular => {}
        _ => return Err(Errno::ENODEV.into()),
    }
    if let Some(d) = &f.dentry {
        namei::want_write(d)?;
    }
    if offset.checked_add(len).is_none() {
        return Err(Errno::EFBIG.into());
    }
    f.ops.fallocate(mode, offset as u64, len as u64)?;
    if let Some(d) = &f.dentry {
        crate::fs::inotify::notify_file(d, crate::fs::inotify::IN_MODIFY);
    }
    Ok(0)
}

/// Largest extended attribute value (XATTR_SIZE_MAX).
const XATTR_SIZE_MAX: usize = 65536;
/// Largest list of names (XATTR_LIST_MAX).
const XATTR_LIST_MAX: usize = 65536;

fn xattr_name(task: &Task, addr: u64) -> Result<Vec<u8>, SysError> {
    let name = task.mm.read_cstring(addr, 256).map_err(|_| Errno::ERANGE)?;
    if name.is_empty() || name.len() > 255 {
        return Err(Errno::ERANGE.into());
    }
    Ok(name)
}

/// The file an xattr call names: a path (following symlinks or not) or a
/// descriptor.
enum XattrTarget {
    Path(bool),
    Fd,
}

fn xattr_dentry(task: &Task, a: &[u64; 6], how: &XattrTarget) -> Result<Arc<Dentry>, SysError> {
    match how {
        XattrTarget::Path(follow) => target_at(task, g::AT_FDCWD as u64, a[0], 0, *follow),
        XattrTarget::Fd => Ok(fd_dentry(task, a[0])?.1),
    }
}

fn getxattr_common(task: &Task, a: &[u64; 6], how: XattrTarget) -> SysResult {
    let d = xattr_dentry(task, a, &how)?;
    let name = xattr_name(task, a[1])?;
    namei::xattr_permission(&d, &name, &task.tg.creds(), false)?;
    let value = d.inode.getxattr(&name)?;
    let size = a[3] as usize;
    if size == 0 {
        return Ok(value.len() as u64);
    }
    if value.len() > size {
        return Err(Errno::ERANGE.into());
    }
    task.mm.copy_out(a[2], &value)?;
    Ok(value.len() as u64)
}

pub fn getxattr(task: &mut Task, a: &[u64; 6]) -> SysResult {
    getxattr_common(task, a, XattrTarget::Path(true))
}
pub fn lgetxattr(task: &mut Task, a: &[u64; 6]) -> SysResult {
    getxattr_common(task, a, XattrTarget::Path(false))
}
pub fn fgetxattr(task: &mut Task, a: &[u64; 6]) -> SysResult {
    getxattr_common(task, a, XattrTarget::Fd)
}

fn listxattr_common(task: &Task, a: &[u64; 6], how: XattrTarget) -> SysResult {
    let d = xattr_dentry(task, a, &how)?;
    let creds = task.tg.creds();
    let mut out = Vec::new();
    for n in d.inode.listxattr()? {
        // Names of trusted.* only for who may read them.
        if n.starts_with(b"trusted.") && !creds.has(crate::auth::cap::SYS_ADMIN) {
            continue;
        }
        out.extend_from_slice(&n);
        out.push(0);
    }
    let size = a[2] as usize;
    if size == 0 {
        return Ok(out.len() as u64);
    }
    if out.len() > size || out.len() > XATTR_LIST_MAX {
        return Err(Errno::ERANGE.into());
    }
    task.mm.copy_out(a[1], &out)?;
    Ok(out.len() as u64)
}

pub fn listxattr(task: &mut Task, a: &[u64; 6]) -> SysResult {
    listxattr_common(task, a, XattrTarget::Path(true))
}
pub fn llistxattr(task: &mut Task, a: &[u64; 6]) -> SysResult {
    listxattr_common(task, a, XattrTarget::Path(false))
}
pub fn flistxattr(task: &mut Task, a: &[u64; 6]) -> SysResult {
    listxattr_common(task, a, XattrTarget::Fd)
}

/// Who may set or remove a security.* attribute, as Linux's capability
/// rules say (cap_inode_setxattr, cap_convert_nscap): a file's
/// capabilities need CAP_SETFCAP, any other CAP_SYS_ADMIN.
fn security_xattr_permission(name: &[u8], creds: &Creds) -> Result<(), SysError> {
    let needed = if name == FILE_CAPS_XATTR {
        cap::SETFCAP
    } else if name.starts_with(b"security.") {
        cap::SYS_ADMIN
    } else {
        return Ok(());
    };
    if creds.has(needed) { Ok(()) } else { Err(Errno::EPERM.into()) }
}

fn setxattr_common(task: &Task, a: &[u64; 6], how: XattrTarget) -> SysResult {
    let flags = a[4] as u32;
    if flags & !(g::XATTR_CREATE | g::XATTR_REPLACE) != 0 {
        return Err(Errno::EINVAL.into());
    }
    let name = xattr_name(task, a[1])?;
    let size = a[3] as usize;
    if size > XATTR_SIZE_MAX {
        return Err(Errno::E2BIG.into());
    }
    let mut value = vec![0u8; size];
    task.mm.copy_in(a[2], &mut value)?;
    let d = xattr_dentry(task, a, &how)?;
    if name == b"system.posix_acl_access" {
        // The mode, said as an ACL: its own checks are chmod's.
        namei::want_write(&d)?;
        namei::set_access_acl(&task.ctx(), &d, &value)?;
        return Ok(0);
    }
    if name == b"system.posix_acl_default" {
        return Err(Errno::EOPNOTSUPP.into());
    }
    let creds = task.tg.creds();
    let value = if name == FILE_CAPS_XATTR && !value.is_empty() {
        FileCaps::stored_form(&value).ok_or(Errno::EINVAL)?
    } else {
        value
    };
    security_xattr_permission(&name, &creds)?;
    namei::xattr_permission(&d, &name, &creds, true)?;
    d.inode.setxattr(&task.ctx(), &name, &value, flags)?;
    Ok(0)
}

pub fn setxattr(task: &mut Task, a: &[u64; 6]) -> SysResult {
    setxattr_common(task, a, XattrTarget::Path(true))
}
pub fn lsetxattr(task: &mut Task, a: &[u64; 6]) -> SysResult {
    setxattr_common(task, a, XattrTarget::Path(false))
}
pub fn fsetxattr(task: &mut Task, a: &[u64; 6]) -> SysResult {
    setxattr_common(task, a, XattrTarget::Fd)
}

fn removexattr_common(task: &Task, a: &[u64; 6], how: XattrTarget) -> SysResult {
    let name = xattr_name(task, a[1])?;
    let d = xattr_dentry(task, a, &how)?;
    let creds = task.tg.creds();
    security_xattr_permission(&name, &creds)?;
    namei::xattr_permission(&d, &name, &creds, true)?;
    d.inode.removexattr(&task.ctx(), &name)?;
    Ok(0)
}

pub fn removexattr(task: &mut Task, a: &[u64; 6]) -> SysResult {
    removexattr_common(task, a, XattrTarget::Path(true))
}
pub fn lremovexattr(task: &mut Task, a: &[u64; 6]) -> SysResult {
    removexattr_common(task, a, XattrTarget::Path(false))
}
pub fn fremovexattr(task: &mut Task, a: &[u64; 6]) -> SysResult {
    removexattr_common(task, a, XattrTarget::Fd)
}
