//! mount(2), umount2(2) and pivot_root(2): changes to the sandbox's one
//! mount namespace, made from inside by a process with CAP_SYS_ADMIN.

use std::sync::Arc;

use super::{SysError, SysResult, read_path};
use crate::auth::{Creds, cap};
use crate::errno::Errno;
use crate::fs::dentry::{MountFlags, Place, Propagation, new_peer_group};
use crate::fs::path::Restrict;
use crate::fs::{Dentry, FileType, Inode, Lookup, Mount, Resolver, sys, tmpfs::Tmpfs};
use crate::task::Task;
use crate::task::mounts::{mounts_in_use, replace_root};

const MS_RDONLY: u64 = 1;
const MS_NOSUID: u64 = 2;
const MS_NODEV: u64 = 4;
const MS_NOEXEC: u64 = 8;
const MS_REMOUNT: u64 = 32;
const MS_NOSYMFOLLOW: u64 = 256;
const MS_NOATIME: u64 = 1024;
const MS_NODIRATIME: u64 = 2048;
const MS_BIND: u64 = 4096;
const MS_MOVE: u64 = 8192;
const MS_REC: u64 = 16384;
const MS_SILENT: u64 = 32768;
const MS_UNBINDABLE: u64 = 1 << 17;
const MS_PRIVATE: u64 = 1 << 18;
const MS_SLAVE: u64 = 1 << 19;
const MS_SHARED: u64 = 1 << 20;
const MS_RELATIME: u64 = 1 << 21;
const MS_STRICTATIME: u64 = 1 << 24;
const MS_NOUSER: u64 = 1 << 31;
/// The magic number old programs put in the top half of the flags.
const MS_MGC_VAL: u64 = 0xc0ed_0000;
const MS_MGC_MSK: u64 = 0xffff_0000;
const PROPAGATION: u64 = MS_SHARED | MS_PRIVATE | MS_SLAVE | MS_UNBINDABLE;

const MNT_FORCE: u64 = 1;
const MNT_DETACH: u64 = 2;
const MNT_EXPIRE: u64 = 4;
const UMOUNT_NOFOLLOW: u64 = 8;

/// The longest mount data string read (Linux copies one page).
const DATA_MAX: usize = 4095;

/// A string argument that may be NULL.
fn optional_string(task: &Task, addr: u64, max: usize) -> Result<Option<Vec<u8>>, SysError> {
    if addr == 0 {
        return Ok(None);
    }
    match task.mm.read_cstring(addr, max) {
        Ok(s) => Ok(Some(s)),
        Err(crate::mm::MmError::TooLong) => Err(Errno::EINVAL.into()),
        Err(e) => Err(e.into()),
    }
}

/// The caller may change the mount namespace (Linux's may_mount).
fn may_mount(task: &Task) -> Result<(), SysError> {
    if task.tg.creds().has(cap::SYS_ADMIN) { Ok(()) } else { Err(Errno::EPERM.into()) }
}

/// True if `d` is the root of its mount as seen where it is mounted (or
/// the namespace's root): what mount calls that change a mount name.
fn is_mount_root(d: &Dentry) -> bool {
    match d.parent() {
        Some(p) => p.mount.id != d.mount.id,
        None => true,
    }
}

/// The root of the topmost mount over `d`, following mounts stacked on
/// it: umount and pivot_root act on what a path ends at, even when it
/// is reached by `.` (Linux's LOOKUP_MOUNTPOINT).
fn topmost(task: &Task, d: Arc<Dentry>) -> Result<Arc<Dentry>, SysError> {
    let mut d = d;
    while let Some(m) = task.kernel.mounts.covering(&d) {
        d = match d.parent() {
            Some(p) if !d.name().is_empty() => task.with_resolver(|r| r.child(&p, &d.name()))?,
            _ => d.child(b"", m.root.clone(), m),
        };
    }
    Ok(d)
}

/// The per-mount flags mount(2)'s `flags` ask for (Linux's path_mount):
/// relatime unless noatime or strictatime says otherwise; a remount that
/// names no atime flag keeps the mount's.
fn mount_flags(flags: u64, current: Option<MountFlags>) -> MountFlags {
    let mut f = MountFlags::empty();
    if flags & MS_NOATIME == 0 {
        f |= MountFlags::RELATIME;
    }
    for (ms, mnt) in [
        (MS_NOSUID, MountFlags::NOSUID),
        (MS_NODEV, MountFlags::NODEV),
        (MS_NOEXEC, MountFlags::NOEXEC),
        (MS_NOATIME, MountFlags::NOATIME),
        (MS_NODIRATIME, MountFlags::NODIRATIME),
        (MS_RDONLY, MountFlags::READ_ONLY),
        (MS_NOSYMFOLLOW, MountFlags::NOSYMFOLLOW),
    ] {
        if flags & ms != 0 {
            f |= mnt;
        }
    }
    if flags & MS_STRICTATIME != 0 {
        f -= MountFlags::RELATIME | MountFlags::NOATIME;
    }
    if let Some(cur) = current
        && flags & (MS_NOATIME | MS_NODIRATIME | MS_RELATIME | MS_STRICTATIME) == 0
    {
        f = (f - MountFlags::ATIME) | (cur & MountFlags::ATIME);
    }
    f
}

/// Resolves a path for a mount call with the caller's view and creds.
fn lookup(task: &Task, path: &[u8], how: Lookup) -> Result<Arc<Dentry>, SysError> {
    Ok(task.with_resolver(|r| r.resolve(None, path, how))?)
}

/// mount(2).
pub fn mount(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let fs_type = optional_string(task, a[2], 4095)?;
    let source = optional_string(task, a[0], 4095)?;
    let data = optional_string(task, a[4], DATA_MAX)?;
    let target = read_path(task, a[1])?;
    let mut flags = a[3];
    if flags & MS_MGC_MSK == MS_MGC_VAL {
        flags &= !MS_MGC_MSK;
    }
    let target = lookup(task, &target, Lookup::FOLLOW)?;
    if flags & MS_NOUSER != 0 {
        return Err(Errno::EINVAL.into());
    }
    may_mount(task)?;
    let mounts = &task.kernel.mounts;
    if flags & (MS_REMOUNT | MS_BIND) == (MS_REMOUNT | MS_BIND) {
        let m = &target.mount;
        if !is_mount_root(&target) || !mounts.is_attached(m.id) {
            return Err(Errno::EINVAL.into());
        }
        set_mount_flags(m, mount_flags(flags, Some(m.flags())))?;
        return Ok(0);
    }
    if flags & MS_REMOUNT != 0 {
        let m = &target.mount;
        if !is_mount_root(&target) || !mounts.is_attached(m.id) {
            return Err(Errno::EINVAL.into());
        }
        let new = mount_flags(flags, Some(m.flags()));
        if m.flags().contains(MountFlags::LOCK_READ_ONLY) && !new.contains(MountFlags::READ_ONLY) {
            return Err(Errno::EPERM.into());
        }
        // The options are checked as a new mount would check them; what a
        // remount may change of them is only read-only-ness.
        let mut sb_ro = flags & MS_RDONLY != 0;
        if let Some(d) = &data {
            sb_ro = parse_options(m.fs_type, d, task.kernel.mf.capacity())?.read_only.unwrap_or(sb_ro);
        }
        set_mount_flags(m, new)?;
        m.sb.set_read_only(sb_ro);
        return Ok(0);
    }
    if flags & MS_BIND != 0 {
        return bind(task, source.as_deref(), &target, flags & MS_REC != 0);
    }
    if flags & PROPAGATION != 0 {
        return change_propagation(task, &target, flags);
    }
    if flags & MS_MOVE != 0 {
        return move_mount(task, source.as_deref(), &target);
    }
    let fs_type = fs_type.ok_or(Errno::EINVAL)?;
    new_mount(task, &fs_type, source, data, &target, flags)
}

/// Sets a mount's flags, keeping its locks: a mount the sandbox made
/// read-only stays so (EPERM).
fn set_mount_flags(m: &Mount, new: MountFlags) -> Result<(), SysError> {
    let locks = m.flags() - MountFlags::SETTABLE;
    if locks.contains(MountFlags::LOCK_READ_ONLY) && !new.contains(MountFlags::READ_ONLY) {
        return Err(Errno::EPERM.into());
    }
    m.set_flags((new & MountFlags::SETTABLE) | locks);
    Ok(())
}

/// Options of a new mount parsed from its data string.
#[derive(Default)]
struct Options {
    /// "ro" or "rw" in the string.
    read_only: Option<bool>,
    size: Option<u64>,
    nr_inodes: Option<u64>,
    mode: Option<u32>,
    uid: Option<u32>,
    gid: Option<u32>,
}

impl Options {
    /// The file-system options as /proc/mounts shows them for a tmpfs
    /// (Linux's shmem_show_options).
    fn show_tmpfs(&self) -> String {
        let mut s = String::new();
        if let Some(size) = self.size.filter(|s| *s > 0) {
            s.push_str(&format!(",size={}k", size.div_ceil(4096) * 4));
        }
        if let Some(n) = self.nr_inodes.filter(|n| *n > 0) {
            s.push_str(&format!(",nr_inodes={n}"));
        }
        if let Some(mode) = self.mode.filter(|m| *m != 0o1777) {
            s.push_str(&format!(",mode={mode:03o}"));
        }
        if let Some(uid) = self.uid.filter(|u| *u != 0) {
            s.push_str(&format!(",uid={uid}"));
        }
        if let Some(gid) = self.gid.filter(|g| *g != 0) {
            s.push_str(&format!(",gid={gid}"));
        }
        s
    }
}

/// A number with an optional binary suffix (Linux's memparse).
fn memparse(s: &str) -> Option<u64> {
    let (digits, shift) = match s.as_bytes().last()? {
        b'k' | b'K' => (&s[..s.len() - 1], 10),
        b'm' | b'M' => (&s[..s.len() - 1], 20),
        b'g' | b'G' => (&s[..s.len() - 1], 30),
        b't' | b'T' => (&s[..s.len() - 1], 40),
        _ => (s, 0),
    };
    let n: u64 = if let Some(hex) = digits.strip_prefix("0x") {
        u64::from_str_radix(hex, 16).ok()?
    } else {
        digits.parse().ok()?
    };
    n.checked_mul(1 << shift)
}

/// Parses the data string of a mount of `fs_type`: generic flags, then
/// the file system's own options; an unknown or malformed one is EINVAL.
/// `memory` is what size=N% is a share of.
fn parse_options(fs_type: &str, data: &[u8], memory: u64) -> Result<Options, SysError> {
    let data = std::str::from_utf8(data).map_err(|_| Errno::EINVAL)?;
    let mut o = Options::default();
    for opt in data.split(',').filter(|s| !s.is_empty()) {
        let (key, value) = match opt.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (opt, None),
        };
        match (key, value) {
            ("ro", None) => o.read_only = Some(true),
            ("rw", None) => o.read_only = Some(false),
            ("sync" | "async" | "dirsync" | "mand" | "nomand" | "lazytime" | "nolazytime", None) => {}
            _ if fs_type == "sysfs" => {}
            (k, Some(v)) if matches!(fs_type, "tmpfs" | "devtmpfs") => {
                let bad = || SysError::from(Errno::EINVAL);
                match k {
                    "size" => {
                        o.size = Some(if let Some(pct) = v.strip_suffix('%') {
                            let pct: u64 = pct.parse().map_err(|_| bad())?;
                            (memory / 100).checked_mul(pct).ok_or_else(bad)?
                        } else {
                            memparse(v).ok_or_else(bad)?
                        })
                    }
                    "nr_inodes" => o.nr_inodes = Some(memparse(v).ok_or_else(bad)?),
                    "mode" => o.mode = Some(u32::from_str_radix(v, 8).map_err(|_| bad())? & 0o7777),
                    "uid" => o.uid = Some(v.parse().map_err(|_| bad())?),
                    "gid" => o.gid = Some(v.parse().map_err(|_| bad())?),
                    _ => return Err(bad()),
                }
            }
            _ => return Err(Errno::EINVAL.into()),
        }
    }
    Ok(o)
}

/// A mount of a new instance of `fs_type` over `target`.
fn new_mount(
    task: &Task,
    fs_type: &[u8],
    source: Option<Vec<u8>>,
    data: Option<Vec<u8>>,
    target: &Arc<Dentry>,
    flags: u64,
) -> SysResult {
    let kernel = &task.kernel;
    let creds = task.tg.creds();
    let fs_type: &'static str = match fs_type {
        b"tmpfs" => "tmpfs",
        b"proc" => "proc",
        b"sysfs" => "sysfs",
        b"devtmpfs" => "devtmpfs",
        b"mqueue" => "mqueue",
        _ => return Err(Errno::ENODEV.into()),
    };
    let opts = match &data {
        Some(d) => parse_options(fs_type, d, kernel.mf.capacity())?,
        None => Options::default(),
    };
    let (root, shown): (Arc<dyn Inode>, String) = match fs_type {
        "tmpfs" => {
            let mode = opts.mode.unwrap_or(0o1777);
            let uid = opts.uid.unwrap_or(creds.uid.fs);
            let gid = opts.gid.unwrap_or(creds.gid.fs);
            let size = opts.size.filter(|s| *s > 0);
            (Tmpfs::new_root(kernel.mf.clone(), mode, uid, gid, size), opts.show_tmpfs())
        }
        // devtmpfs has one instance, wherever it is mounted.
        "devtmpfs" => (kernel.devfs.get().ok_or(Errno::ENODEV)?.clone(), String::new()),
        // The queues of the sandbox's IPC namespace, wherever mounted.
        "mqueue" => (crate::ipc::mqueue::mqueue_root(&kernel.ipc.mq), String::new()),
        "proc" => {
            let src = crate::task::KernelProcSource { kernel: Arc::downgrade(kernel) };
            (crate::fs::proc::new_procfs(Arc::new(src)).0, String::new())
        }
        _ => {
            let src = crate::task::KernelSysSource { kernel: Arc::downgrade(kernel) };
            (sys::new_sysfs(Arc::new(src)).0, String::new())
        }
    };
    if target.file_type() != FileType::Directory {
        return Err(Errno::ENOTDIR.into());
    }
    let parent = &target.mount;
    if !kernel.mounts.is_attached(parent.id) {
        return Err(Errno::EINVAL.into());
    }
    let source = source.map(|s| String::from_utf8_lossy(&s).into_owned()).unwrap_or_default();
    let m = Mount::new(fs_type, source, false, root);
    m.set_flags(mount_flags(flags, None));
    m.sb.set_read_only(opts.read_only.unwrap_or(flags & MS_RDONLY != 0));
    m.sb.set_options(shown);
    check_mount_count(task)?;
    graft(task, target, m);
    Ok(0)
}

/// Attaches `m` over `target`; under a shared mount it becomes shared
/// too, as Linux's attach_recursive_mnt makes it.
fn graft(task: &Task, target: &Arc<Dentry>, m: Arc<Mount>) {
    let mounts = &task.kernel.mounts;
    let place = Place::over(target);
    let parent = target.mount.clone();
    let mut p = m.propagation();
    if parent.propagation().shared.is_some() && p.shared.is_none() {
        p.shared = Some(new_peer_group());
        m.set_propagation(p);
    }
    mounts.attach(place, m);
}

/// MS_BIND: the subtree at `source` mounted again over `target`; with
/// `recursive`, the mounts inside it come along.
fn bind(task: &Task, source: Option<&[u8]>, target: &Arc<Dentry>, recursive: bool) -> SysResult {
    let source = source.filter(|s| !s.is_empty()).ok_or(Errno::EINVAL)?;
    let src = lookup(task, source, Lookup::FOLLOW)?;
    let mounts = &task.kernel.mounts;
    if src.mount.propagation().unbindable {
        return Err(Errno::EINVAL.into());
    }
    if !mounts.is_attached(src.mount.id) || !mounts.is_attached(target.mount.id) {
        return Err(Errno::EINVAL.into());
    }
    if (src.file_type() == FileType::Directory) != (target.file_type() == FileType::Directory) {
        return Err(Errno::ENOTDIR.into());
    }
    let m = src.mount.bind_of(&src);
    let place = Place::over(target);
    // What is inside is copied as it was before the bind, which may land
    // inside it.
    let inside = mounts.children(src.mount.id);
    check_mount_count(task)?;
    graft(task, target, m.clone());
    if recursive {
        let new_root = seen_root(task, &place, &m)?;
        let within = path_in(&src);
        clone_tree(task, &src.mount, inside, &within, &new_root, &place)?;
    }
    Ok(0)
}

/// The path of `d` below the root of its mount.
fn path_in(d: &Arc<Dentry>) -> Vec<u8> {
    let mut parts = Vec::new();
    let mut cur = d.clone();
    while let Some(p) = cur.parent() {
        if p.mount.id != cur.mount.id {
            break;
        }
        parts.push(cur.name());
        cur = p;
    }
    let mut out = Vec::new();
    for p in parts.iter().rev() {
        out.push(b'/');
        out.extend_from_slice(p);
    }
    if out.is_empty() {
        out.push(b'/');
    }
    out
}

/// The dentry of the root of `m`, just attached at `place`.
fn seen_root(task: &Task, place: &Place, m: &Arc<Mount>) -> Result<Arc<Dentry>, SysError> {
    match place {
        Place::Over(dir, name) if !name.is_empty() => Ok(task.with_resolver(|r| r.child(dir, name))?),
        Place::Over(dir, _) => Ok(dir.child(b"", m.root.clone(), m.clone())),
        Place::Root => Err(Errno::EINVAL.into()),
    }
}

/// Copies `children`, the mounts on `from`, that are below `within` (a
/// path in `from`) into the new bind mount whose root is `to`, attached at
/// `to_place` (Linux's copy_tree), parents before children. A list of work
/// rather than recursion: mount trees can be deep.
fn clone_tree(
    task: &Task,
    from: &Arc<Mount>,
    children: Vec<Arc<Mount>>,
    within: &[u8],
    to: &Arc<Dentry>,
    to_place: &Place,
) -> Result<(), SysError> {
    let mounts = &task.kernel.mounts;
    let creds = Creds::new(0, 0, Vec::new());
    let mut work = vec![(from.clone(), children, within.to_vec(), to.clone(), to_place.clone())];
    while let Some((from, children, within, to, to_place)) = work.pop() {
        for child in children {
            let Some((Place::Over(dir, name), _)) = mounts.place_of(child.id) else { continue };
            if child.propagation().unbindable {
                continue;
            }
            let place = if dir.mount.id != from.id || name.is_empty() {
                // Stacked on `from` itself: stacked on its copy.
                if within != b"/" {
                    continue;
                }
                to_place.clone()
            } else {
                let at = path_in(&dir);
                let rel = if within == b"/" {
                    at
                } else if at == within {
                    b"/".to_vec()
                } else if at.starts_with(&within) && at.get(within.len()) == Some(&b'/') {
                    at[within.len()..].to_vec()
                } else {
                    continue;
                };
                let r = Resolver { root: &to, cwd: &to, mounts, creds: &creds, restrict: Restrict::empty() };
                let new_dir = r.resolve(None, &rel, Lookup { follow: false, directory: true })?;
                Place::Over(new_dir, name)
            };
            let copy = child.bind_of(&seen_root_of(task, &child)?);
            check_mount_count(task)?;
            mounts.attach(place.clone(), copy.clone());
            let copy_root = seen_root(task, &place, &copy)?;
            work.push((child.clone(), mounts.children(child.id), b"/".to_vec(), copy_root, place));
        }
    }
    Ok(())
}

/// Linux's fs.mount-max: how many mounts the namespace may hold.
const MOUNT_MAX: usize = 100_000;

/// ENOSPC once the namespace holds [`MOUNT_MAX`] mounts.
fn check_mount_count(task: &Task) -> Result<(), SysError> {
    if task.kernel.mounts.count() >= MOUNT_MAX { Err(Errno::ENOSPC.into()) } else { Ok(()) }
}

/// A dentry of the root of attached mount `m`.
fn seen_root_of(task: &Task, m: &Arc<Mount>) -> Result<Arc<Dentry>, SysError> {
    match task.kernel.mounts.place_of(m.id) {
        Some((Place::Over(dir, _), _)) => Ok(dir.child(b"", m.root.clone(), m.clone())),
        _ => Err(Errno::EINVAL.into()),
    }
}

/// MS_SHARED, MS_PRIVATE, MS_SLAVE or MS_UNBINDABLE (one of them), of the
/// mount at `target` or, with MS_REC, of it and every mount below it.
fn change_propagation(task: &Task, target: &Arc<Dentry>, flags: u64) -> SysResult {
    let mounts = &task.kernel.mounts;
    if !is_mount_root(target) || !mounts.is_attached(target.mount.id) {
        return Err(Errno::EINVAL.into());
    }
    let kind = flags & !(MS_REC | MS_SILENT);
    if !kind.is_power_of_two() || kind & PROPAGATION == 0 {
        return Err(Errno::EINVAL.into());
    }
    let affected = if flags & MS_REC != 0 { mounts.subtree(target.mount.id) } else { vec![target.mount.clone()] };
    let all = mounts.list();
    for m in affected {
        let mut p = m.propagation();
        match kind {
            MS_SHARED => {
                if p.shared.is_none() {
                    p.shared = Some(new_peer_group());
                }
                p.unbindable = false;
            }
            MS_SLAVE => {
                // A mount with peers receives from them from now on; one
                // without becomes private.
                let peers = p
                    .shared
                    .is_some_and(|g| all.iter().any(|e| e.mount.id != m.id && e.mount.propagation().shared == Some(g)));
                if peers {
                    p.master = p.shared;
                }
                p.shared = None;
                p.unbindable = false;
            }
            MS_PRIVATE => p = Propagation::default(),
            _ => p = Propagation { unbindable: true, ..Propagation::default() },
        }
        m.set_propagation(p);
    }
    Ok(0)
}

/// MS_MOVE: the mount at `source` moves over `target`.
fn move_mount(task: &Task, source: Option<&[u8]>, target: &Arc<Dentry>) -> SysResult {
    let source = source.filter(|s| !s.is_empty()).ok_or(Errno::EINVAL)?;
    let src = lookup(task, source, Lookup::FOLLOW)?;
    let mounts = &task.kernel.mounts;
    let m = &src.mount;
    if !is_mount_root(&src) || !mounts.is_attached(m.id) || !mounts.is_attached(target.mount.id) {
        return Err(Errno::EINVAL.into());
    }
    let Some((_, Some(parent))) = mounts.place_of(m.id) else { return Err(Errno::EINVAL.into()) };
    if (src.file_type() == FileType::Directory) != (target.file_type() == FileType::Directory) {
        return Err(Errno::ENOTDIR.into());
    }
    if parent.propagation().shared.is_some() {
        return Err(Errno::EINVAL.into());
    }
    if mounts.subtree(m.id).iter().any(|s| s.id == target.mount.id) {
        return Err(Errno::ELOOP.into());
    }
    mounts.move_mount(m.id, &src, Place::over(target));
    Ok(0)
}

/// umount2(2).
pub fn umount2(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let flags = a[1];
    if flags & !(MNT_FORCE | MNT_DETACH | MNT_EXPIRE | UMOUNT_NOFOLLOW) != 0 {
        return Err(Errno::EINVAL.into());
    }
    may_mount(task)?;
    let path = read_path(task, a[0])?;
    let how = if flags & UMOUNT_NOFOLLOW != 0 { Lookup::NOFOLLOW } else { Lookup::FOLLOW };
    let d = topmost(task, lookup(task, &path, how)?)?;
    let mounts = &task.kernel.mounts;
    let m = d.mount.clone();
    if !is_mount_root(&d) || !mounts.is_attached(m.id) {
        return Err(Errno::EINVAL.into());
    }
    let own_root = task.fs_context().root.mount.id == m.id;
    if flags & MNT_EXPIRE != 0 {
        if own_root || flags & (MNT_FORCE | MNT_DETACH) != 0 {
            return Err(Errno::EINVAL.into());
        }
        if busy(task, &m) {
            return Err(Errno::EBUSY.into());
        }
        if !m.mark_expired() {
            return Err(Errno::EAGAIN.into());
        }
    }
    if mounts.is_root(m.id) {
        // The namespace's root: in use by every process, and nothing
        // would be left to stand on.
        return Err(if flags & MNT_DETACH != 0 { Errno::EINVAL } else { Errno::EBUSY }.into());
    }
    if flags & MNT_DETACH == 0 && busy(task, &m) {
        return Err(Errno::EBUSY.into());
    }
    mounts.detach_tree(m.id);
    Ok(0)
}

/// Linux's propagate_mount_busy for one namespace: a mount with mounts on
/// it, or used by a process, cannot go.
fn busy(task: &Task, m: &Mount) -> bool {
    !task.kernel.mounts.children(m.id).is_empty() || mounts_in_use(&task.kernel, &[m.id])
}

/// pivot_root(2): the mount at `new_root` becomes the root, and the old
/// root moves to `put_old`.
pub fn pivot_root(task: &mut Task, a: &[u64; 6]) -> SysResult {
    may_mount(task)?;
    let dir = Lookup { follow: true, directory: true };
    let new_path = read_path(task, a[0])?;
    let new = lookup(task, &new_path, dir)?;
    let old_path = read_path(task, a[1])?;
    let old = topmost(task, lookup(task, &old_path, dir)?)?;
    let root = task.fs_context().root;
    let mounts = &task.kernel.mounts;
    let (new_mnt, root_mnt, old_mnt) = (&new.mount, &root.mount, &old.mount);
    let parent_of = |id| mounts.place_of(id).and_then(|(_, p)| p);
    let shared = |m: Option<Arc<Mount>>| m.is_some_and(|m| m.propagation().shared.is_some());
    if shared(Some(old_mnt.clone())) || shared(parent_of(new_mnt.id)) || shared(parent_of(root_mnt.id)) {
        return Err(Errno::EINVAL.into());
    }
    if !mounts.is_attached(root_mnt.id) || !mounts.is_attached(new_mnt.id) {
        return Err(Errno::EINVAL.into());
    }
    if new.is_deleted() {
        return Err(Errno::ENOENT.into());
    }
    if new_mnt.id == root_mnt.id || old_mnt.id == root_mnt.id {
        return Err(Errno::EBUSY.into());
    }
    if !is_mount_root(&root) || !is_mount_root(&new) || mounts.is_root(new_mnt.id) {
        return Err(Errno::EINVAL.into());
    }
    if !old.is_below(&new) || !new.is_below(&root) {
        return Err(Errno::EINVAL.into());
    }
    // The old root goes over put_old; when that is new_root itself, over
    // it, where only umount's walk finds it.
    let put_old = if Dentry::same(&old, &new) { Place::Over(new.clone(), Vec::new()) } else { Place::over(&old) };
    mounts.pivot(&new, &root, put_old)?;
    replace_root(&task.kernel, &root, &new);
    Ok(0)
}
