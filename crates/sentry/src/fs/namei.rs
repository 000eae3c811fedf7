//! The VFS half of the calls that change a file system (Linux's namei.c
//! and attr.c): the checks every file system shares — a writable mount,
//! the caller's permission on the directories, the sticky bit, ownership
//! for attribute changes — then the inode operation, then the dentry
//! cache brought up to date. File systems see only calls already allowed.

use std::sync::Arc;

use linux_raw_sys::general as g;

use super::dentry::RENAME_LOCK;
use super::inotify::{self, IN_ACCESS, IN_ATTRIB, IN_CREATE, IN_DELETE, IN_MODIFY, IN_MOVE_SELF};
use super::inotify::{IN_MOVED_FROM, IN_MOVED_TO};
use super::{Context, Dentry, FileType, FsError, Inode, MAY_EXEC, MAY_WRITE, NewNode, RenameFlags, SetAttr, Stat};
use super::{Resolver, Timespec, permission};
use crate::auth::{Creds, cap};

/// Linux's mnt_want_write: EROFS on a read-only mount.
pub fn want_write(d: &Dentry) -> Result<(), FsError> {
    if d.mount.read_only() { Err(FsError::ReadOnly) } else { Ok(()) }
}

/// Linux's may_create: the directory still exists and the caller may
/// write and search it.
pub fn may_create(dir: &Dentry, creds: &Creds) -> Result<(), FsError> {
    if dir.is_deleted() {
        return Err(FsError::NotFound);
    }
    permission(dir, creds, MAY_WRITE | MAY_EXEC)
}

/// Linux's check_sticky: in a sticky directory only the owner of the
/// entry, the owner of the directory, or CAP_FOWNER may remove or rename
/// an entry.
fn sticky_denies(dir: &Stat, victim: &Stat, creds: &Creds) -> bool {
    dir.mode & g::S_ISVTX != 0 && creds.uid.fs != victim.uid && creds.uid.fs != dir.uid && !creds.has(cap::FOWNER)
}

/// Linux's may_delete: `victim`, the child of `dir`, may be removed (or
/// renamed away) by the caller, and is of the kind the call expects.
pub fn may_delete(dir: &Arc<Dentry>, victim: &Arc<Dentry>, is_dir: bool, creds: &Creds) -> Result<(), FsError> {
    permission(dir, creds, MAY_WRITE | MAY_EXEC)?;
    if sticky_denies(&dir.inode.stat()?, &victim.inode.stat()?, creds) {
        return Err(FsError::NotPermitted);
    }
    let victim_dir = victim.file_type() == FileType::Directory;
    if is_dir && !victim_dir {
        return Err(FsError::NotDirectory);
    }
    if !is_dir && victim_dir {
        return Err(FsError::IsDirectory);
    }
    Ok(())
}

/// A new object's owner and mode, as Linux's inode_init_owner makes them:
/// the caller's fsuid; the directory's group and (for a directory) its
/// setgid bit when the directory is setgid, else the caller's fsgid. A
/// file whose group the caller is not in loses S_ISGID unless the caller
/// has CAP_FSETID.
pub fn new_node(dir: &Dentry, creds: &Creds, mode: u32, rdev: u64) -> Result<NewNode, FsError> {
    let st = dir.inode.stat()?;
    let mut mode = mode;
    let gid = if st.mode & g::S_ISGID != 0 {
        if mode & g::S_IFMT == g::S_IFDIR {
            mode |= g::S_ISGID;
        } else if mode & g::S_ISGID != 0 && !creds.in_group(st.gid) && !creds.has(cap::FSETID) {
            mode &= !g::S_ISGID;
        }
        st.gid
    } else {
        creds.gid.fs
    };
    Ok(NewNode { mode, uid: creds.uid.fs, gid, rdev })
}

/// How the last component of a path to be made looks.
pub enum LastName {
    /// A plain name.
    Name(Vec<u8>),
    /// `.`, `..`, or the path names the root: nothing can be made there.
    Dot,
}

/// The parent directory of the path's last component and that name; a
/// trailing slash is reported by `slash`.
pub struct Parent {
    pub dir: Arc<Dentry>,
    pub last: LastName,
    pub slash: bool,
}

/// Resolves the parent of `path`'s last component (Linux's
/// filename_parentat): errors of the walk come first.
pub fn parent_of(r: &Resolver, start: Option<&Arc<Dentry>>, path: &[u8]) -> Result<Parent, FsError> {
    if path.is_empty() {
        return Err(FsError::NotFound);
    }
    let slash = path.len() > 1 && path.ends_with(b"/");
    match r.resolve_parent(start, path) {
        Ok((dir, name)) => Ok(Parent { dir, last: LastName::Name(name), slash }),
        Err(FsError::Exists) => {
            // ".", ".." or the root: the path itself must resolve.
            let dir = r.resolve(start, path, super::Lookup { follow: true, directory: true })?;
            Ok(Parent { dir, last: LastName::Dot, slash })
        }
        Err(e) => Err(e),
    }
}

/// True if `d` is the root of a mount seen from its mount point: it can
/// be neither removed nor renamed (EBUSY).
fn is_mount_root(d: &Dentry) -> bool {
    d.parent().is_some_and(|p| p.mount.id != d.mount.id)
}

/// The child `name` of `dir` if it exists.
pub fn lookup_child(r: &Resolver, dir: &Arc<Dentry>, name: &[u8]) -> Result<Option<Arc<Dentry>>, FsError> {
    may_lookup_dir(dir, r.creds)?;
    match r.child(dir, name) {
        Ok(d) => Ok(Some(d)),
        Err(FsError::NotFound) => Ok(None),
        Err(e) => Err(e),
    }
}

fn may_lookup_dir(dir: &Dentry, creds: &Creds) -> Result<(), FsError> {
    super::may_lookup(dir, creds)
}

/// Makes a new object as Linux's filename_create + vfs_* do: EEXIST for
/// an existing name before EROFS, then the permission, then the file
/// system. `make` is the inode operation; returns the new dentry.
pub fn create_node(
    r: &Resolver,
    ctx: &Context,
    parent: &Parent,
    is_dir: bool,
    make: impl FnOnce(&dyn Inode, &[u8]) -> Result<Arc<dyn Inode>, FsError>,
) -> Result<Arc<Dentry>, FsError> {
    let name = match &parent.last {
        LastName::Name(n) => n,
        LastName::Dot => return Err(FsError::Exists),
    };
    let writable = want_write(&parent.dir);
    if lookup_child(r, &parent.dir, name)?.is_some() {
        return Err(FsError::Exists);
    }
    if parent.slash && !is_dir {
        return Err(FsError::NotFound);
    }
    writable?;
    may_create(&parent.dir, &ctx.creds)?;
    let made = make(&*parent.dir.inode, name)?;
    inotify::notify_name(&parent.dir, IN_CREATE, name, made.file_type(), 0);
    if !parent.dir.inode.stable_names() {
        // The inode made, not what a new lookup finds: where others change
        // the names too, that is the object this call made (and a host
        // file keeps the descriptor it was made with).
        return Ok(parent.dir.child(name, made, parent.dir.mount.clone()));
    }
    r.child(&parent.dir, name)
}

/// True if the file `d` named has no name left (a directory removed, a
/// file's last link gone): its watchers hear it deleted.
fn unlinked(d: &Dentry) -> bool {
    d.file_type() == FileType::Directory || d.inode.stat().map_or(true, |st| st.nlink == 0)
}

/// unlink(2) and rmdir(2) after the parent was resolved.
pub fn remove(r: &Resolver, ctx: &Context, parent: &Parent, is_dir: bool) -> Result<(), FsError> {
    let name = match &parent.last {
        LastName::Name(n) => n,
        LastName::Dot => {
            return Err(if !is_dir { FsError::IsDirectory } else { FsError::Busy });
        }
    };
    want_write(&parent.dir)?;
    let victim = lookup_child(r, &parent.dir, name)?.ok_or(FsError::NotFound)?;
    if parent.slash && !is_dir && victim.file_type() != FileType::Directory {
        return Err(FsError::NotDirectory);
    }
    may_delete(&parent.dir, &victim, is_dir, &ctx.creds)?;
    if !Arc::ptr_eq(&victim.mount, &parent.dir.mount) || is_mount_root(&victim) {
        return Err(FsError::Busy);
    }
    if is_dir {
        parent.dir.inode.rmdir(ctx, name)?;
    } else {
        parent.dir.inode.unlink(ctx, name)?;
    }
    parent.dir.forget_child(name);
    victim.set_deleted();
    // Linux's order: the link count, the file's own end, then the name.
    if !is_dir {
        inotify::notify_self(&victim, IN_ATTRIB);
    }
    if unlinked(&victim) {
        inotify::notify_gone(&victim);
    }
    inotify::notify_name(&parent.dir, IN_DELETE, name, victim.file_type(), 0);
    Ok(())
}

/// rename(2) and renameat2(2) after both parents were resolved.
pub fn rename(r: &Resolver, ctx: &Context, old: &Parent, new: &Parent, flags: RenameFlags) -> Result<(), FsError> {
    if flags.contains(RenameFlags::EXCHANGE) && flags.intersects(RenameFlags::NOREPLACE | RenameFlags::WHITEOUT) {
        return Err(FsError::Invalid);
    }
    let (LastName::Name(old_name), LastName::Name(new_name)) = (&old.last, &new.last) else {
        return Err(FsError::Busy);
    };
    want_write(&old.dir)?;
    if !Arc::ptr_eq(&old.dir.mount, &new.dir.mount) && old.dir.mount.id != new.dir.mount.id {
        return Err(FsError::CrossDevice);
    }
    let _serial = RENAME_LOCK.lock().unwrap();
    let moved = lookup_child(r, &old.dir, old_name)?.ok_or(FsError::NotFound)?;
    let target = lookup_child(r, &new.dir, new_name)?;
    if flags.contains(RenameFlags::NOREPLACE) && target.is_some() {
        return Err(FsError::Exists);
    }
    if flags.contains(RenameFlags::EXCHANGE) && target.is_none() {
        return Err(FsError::NotFound);
    }
    let moved_dir = moved.file_type() == FileType::Directory;
    if (old.slash || new.slash) && !moved_dir {
        return Err(FsError::NotDirectory);
    }
    if let Some(t) = &target
        && (Arc::ptr_eq(t, &moved) || Dentry::same(t, &moved))
    {
        return Ok(());
    }
    // A directory may not move below itself; the target may not be an
    // ancestor of the source.
    if moved_dir && new.dir.is_below(&moved) {
        return Err(FsError::Invalid);
    }
    if let Some(t) = &target
        && old.dir.is_below(t)
    {
        return Err(if flags.contains(RenameFlags::EXCHANGE) { FsError::Invalid } else { FsError::NotEmpty });
    }
    may_delete(&old.dir, &moved, moved_dir, &ctx.creds)?;
    match &target {
        Some(t) if flags.contains(RenameFlags::EXCHANGE) => {
            may_delete(&new.dir, t, t.file_type() == FileType::Directory, &ctx.creds)?
        }
        Some(t) => may_delete(&new.dir, t, moved_dir, &ctx.creds)?,
        None => may_create(&new.dir, &ctx.creds)?,
    }
    // A directory changing parent rewrites its `..`: the caller must be
    // able to write it (Linux's vfs_rename).
    if !Dentry::same(&old.dir, &new.dir) {
        if moved_dir {
            permission(&moved, &ctx.creds, MAY_WRITE)?;
        }
        if let Some(t) = &target
            && flags.contains(RenameFlags::EXCHANGE)
            && t.file_type() == FileType::Directory
        {
            permission(t, &ctx.creds, MAY_WRITE)?;
        }
    }
    for d in [Some(&moved), target.as_ref()].into_iter().flatten() {
        if is_mount_root(d) {
            return Err(FsError::Busy);
        }
    }
    old.dir.inode.rename(ctx, old_name, &new.dir.inode, new_name, flags)?;
    let exchange = flags.contains(RenameFlags::EXCHANGE);
    Dentry::move_child(&old.dir, old_name, &new.dir, new_name, exchange);
    notify_move(&old.dir, old_name, &new.dir, new_name, &moved, if exchange { None } else { target.as_ref() });
    if let Some(t) = &target {
        if exchange {
            notify_move(&new.dir, new_name, &old.dir, old_name, t, None);
        } else if unlinked(t) {
            inotify::notify_gone(t);
        }
    }
    Ok(())
}

/// The events of one name moving (Linux's fsnotify_move): the two halves
/// with one cookie, the link count of a file it replaced, and the move of
/// the file itself.
fn notify_move(
    from: &Dentry,
    old_name: &[u8],
    to: &Dentry,
    new_name: &[u8],
    moved: &Dentry,
    replaced: Option<&Arc<Dentry>>,
) {
    let cookie = inotify::new_cookie();
    inotify::notify_name(from, IN_MOVED_FROM, old_name, moved.file_type(), cookie);
    inotify::notify_name(to, IN_MOVED_TO, new_name, moved.file_type(), cookie);
    if let Some(t) = replaced {
        inotify::notify_self(t, IN_ATTRIB);
    }
    inotify::notify_self(moved, IN_MOVE_SELF);
}

/// link(2): `target` gets the new name of `parent`.
pub fn link(r: &Resolver, ctx: &Context, target: &Arc<Dentry>, parent: &Parent) -> Result<(), FsError> {
    let name = match &parent.last {
        LastName::Name(n) => n,
        LastName::Dot => return Err(FsError::Exists),
    };
    let writable = want_write(&parent.dir);
    if lookup_child(r, &parent.dir, name)?.is_some() {
        return Err(FsError::Exists);
    }
    writable?;
    if target.mount.id != parent.dir.mount.id {
        return Err(FsError::CrossDevice);
    }
    may_create(&parent.dir, &ctx.creds)?;
    if target.file_type() == FileType::Directory {
        return Err(FsError::NotPermitted);
    }
    may_link(target, &ctx.creds)?;
    parent.dir.inode.link(ctx, name, &target.inode)?;
    inotify::notify_self(target, IN_ATTRIB);
    inotify::notify_name(&parent.dir, IN_CREATE, name, target.file_type(), 0);
    Ok(())
}

/// Linux's may_linkat with protected_hardlinks off (its default outside
/// distributions that turn it on is the same for root): the owner or
/// CAP_FOWNER, or anyone who can read and write a regular file.
fn may_link(target: &Dentry, creds: &Creds) -> Result<(), FsError> {
    let st = target.inode.stat()?;
    if creds.uid.fs == st.uid || creds.has(cap::FOWNER) {
        return Ok(());
    }
    if st.file_type() == FileType::Regular
        && st.mode & g::S_ISUID == 0
        && (st.mode & (g::S_ISGID | g::S_IXGRP)) != (g::S_ISGID | g::S_IXGRP)
        && permission(target, creds, super::MAY_READ | MAY_WRITE).is_ok()
    {
        return Ok(());
    }
    Err(FsError::NotPermitted)
}

/// Times for utimensat: unchanged, the current time, or a given one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeArg {
    Omit,
    Now,
    At(Timespec),
}

/// Linux's setattr_prepare + notify_change for chmod, chown, utimes and
/// truncate of `d`: the mount must be writable, the caller must own the
/// file or hold the capability that stands in for it.
pub struct AttrChange {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub atime: TimeArg,
    pub mtime: TimeArg,
    pub size: Option<u64>,
}

impl AttrChange {
    /// The inotify event of the change, as Linux's fsnotify_change tells
    /// it from what was asked: a size or a new modification time alone
    /// modify, an access time alone is an access, anything else (both
    /// times, owner, mode) is an attribute change.
    fn event(&self) -> u32 {
        let mut mask = 0;
        if self.uid.is_some() || self.gid.is_some() || self.mode.is_some() {
            mask |= IN_ATTRIB;
        }
        if self.size.is_some() {
            mask |= IN_MODIFY;
        }
        mask |= match (self.atime != TimeArg::Omit, self.mtime != TimeArg::Omit) {
            (true, true) => IN_ATTRIB,
            (true, false) => IN_ACCESS,
            (false, true) => IN_MODIFY,
            (false, false) => 0,
        };
        mask
    }
}

impl Default for AttrChange {
    fn default() -> Self {
        AttrChange { mode: None, uid: None, gid: None, atime: TimeArg::Omit, mtime: TimeArg::Omit, size: None }
    }
}

/// Applies `change` to `d` for the caller in `ctx`.
pub fn change_attr(ctx: &Context, d: &Dentry, change: &AttrChange) -> Result<(), FsError> {
    change_inode_attr(ctx, &*d.inode, d.mount.read_only(), change)?;
    inotify::notify_change(d, change.event());
    Ok(())
}

/// [`change_attr`] on an inode and the read-only state of its mount.
pub fn change_inode_attr(
    ctx: &Context,
    inode: &dyn Inode,
    read_only: bool,
    change: &AttrChange,
) -> Result<(), FsError> {
    let creds = &ctx.creds;
    if read_only {
        return Err(FsError::ReadOnly);
    }
    let st = inode.stat()?;
    let owner = creds.uid.fs == st.uid;
    let mut attr = SetAttr::default();
    if let Some(uid) = change.uid
        && uid != st.uid
    {
        if !creds.has(cap::CHOWN) {
            return Err(FsError::NotPermitted);
        }
        attr.uid = Some(uid);
    }
    if let Some(gid) = change.gid
        && gid != st.gid
    {
        if !(creds.has(cap::CHOWN) || (owner && creds.in_group(gid))) {
            return Err(FsError::NotPermitted);
        }
        attr.gid = Some(gid);
    }
    if change.uid.is_some() || change.gid.is_some() {
        // chown drops the set-id bits of a non-directory (the group one
        // only when it means set-group-id, with group execute).
        if st.file_type() != FileType::Directory {
            let mut m = st.mode & 0o7777;
            m &= !g::S_ISUID;
            if m & g::S_IXGRP != 0 {
                m &= !g::S_ISGID;
            }
            if m != st.mode & 0o7777 {
                attr.mode = Some(m);
            }
        }
        if change.uid.is_some() || change.gid.is_some() {
            // Even an unchanged chown by a permitted caller touches ctime.
            if attr.uid.is_none() && attr.gid.is_none() && !(owner || creds.has(cap::CHOWN)) {
                return Err(FsError::NotPermitted);
            }
        }
    }
    if let Some(mode) = change.mode {
        if !owner && !creds.has(cap::FOWNER) {
            return Err(FsError::NotPermitted);
        }
        let mut m = mode & 0o7777;
        let gid = attr.gid.unwrap_or(st.gid);
        if m & g::S_ISGID != 0 && !creds.in_group(gid) && !creds.has(cap::FSETID) {
            m &= !g::S_ISGID;
        }
        attr.mode = Some(m);
    }
    let now = Timespec::now();
    let explicit = matches!(change.atime, TimeArg::At(_)) || matches!(change.mtime, TimeArg::At(_));
    let any_time = change.atime != TimeArg::Omit || change.mtime != TimeArg::Omit;
    if any_time {
        if explicit {
            if !owner && !creds.has(cap::FOWNER) {
                return Err(FsError::NotPermitted);
            }
        } else if !owner && !creds.has(cap::FOWNER) {
            // Setting both to now needs only write access.
            if !creds.has(cap::DAC_OVERRIDE) {
                super::generic_permission(&st, creds, MAY_WRITE)?;
            }
        }
        let pick = |t: TimeArg| match t {
            TimeArg::Omit => None,
            TimeArg::Now => Some(now),
            TimeArg::At(t) => Some(t),
        };
        attr.atime = pick(change.atime);
        attr.mtime = pick(change.mtime);
    }
    if let Some(size) = change.size {
        match st.file_type() {
            FileType::Directory => return Err(FsError::IsDirectory),
            FileType::Regular => {}
            _ => return Err(FsError::Invalid),
        }
        attr.size = Some(size);
        // A write by someone without CAP_FSETID drops the set-id bits.
        if st.mode & (g::S_ISUID | g::S_ISGID) != 0 && !creds.has(cap::FSETID) && attr.mode.is_none() {
            let mut m = st.mode & 0o7777 & !g::S_ISUID;
            if m & g::S_IXGRP != 0 {
                m &= !g::S_ISGID;
            }
            attr.mode = Some(m);
        }
    }
    inode.setattr(ctx, &attr)
}

/// May the caller change the extended attribute `name` of `d` (Linux's
/// xattr_permission for the user namespace): user.* on regular files and
/// directories only, with write permission; trusted.* needs CAP_SYS_ADMIN;
/// security.* and system.* are left to the file system.
pub fn xattr_permission(d: &Dentry, name: &[u8], creds: &Creds, write: bool) -> Result<(), FsError> {
    if name.is_empty() || name.len() > 255 {
        return Err(FsError::Range);
    }
    if name.starts_with(b"trusted.") {
        return if creds.has(cap::SYS_ADMIN) { Ok(()) } else { Err(FsError::NotPermitted) };
    }
    if name.starts_with(b"user.") {
        if !matches!(d.file_type(), FileType::Regular | FileType::Directory) {
            return Err(if write { FsError::NotPermitted } else { FsError::NoData });
        }
    } else if !name.starts_with(b"security.") && !name.starts_with(b"system.") {
        return Err(FsError::NotSupported);
    }
    if write {
        want_write(d)?;
    }
    permission(d, creds, if write { MAY_WRITE } else { super::MAY_READ })
}
