//! Host files passed through: the host root (read-only) and the sources of
//! bind mounts (`-v`, writable unless `:ro`).
//!
//! Every host object the sentry touches is named by an `O_PATH` descriptor.
//! A lookup opens one name relative to its parent's descriptor with
//! `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`, so the host never follows a
//! symlink or `..` on the sandbox's behalf: the sentry's resolver does that,
//! inside the sandbox. Changes work the same way: each is one `*at` call
//! with a single name on the parent's descriptor, none following a final
//! symlink, or a call on the object's own descriptor (through
//! `/proc/self/fd`, which leads to that very object, never to a name). So
//! whatever the host or a racing process puts under a writable directory,
//! the sentry reads and writes only below it.
//!
//! Only regular files, directories and symlinks are opened (a FIFO made in
//! a bind is a pipe of the sandbox's), and files on host kernel
//! pseudo-file-systems (a procfs or sysfs mounted somewhere under the root)
//! are refused: neither opened nor even looked up. The sandbox sees device
//! and inode numbers of its own, never the host's; owners and modes are the
//! host's: a file the sandbox makes belongs on the host to the user who ran
//! cordon.

use crate::fs::Context;
use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::{Arc, Mutex, Weak};

use memory::{Frame, GuestSlice, GuestSliceMut, MemoryFile, PAGE_SIZE};
use rustix::fs::{AtFlags, Mode, OFlags, ResolveFlags, StatxFlags};

use super::pipe::{Pipe, open_fifo};
use super::{
    Dentry, FileOps, FileType, FsError, Inode, MapName, Mappable, NewNode, OpenFile, OpenFlags, RenameFlags, SetAttr,
    Stat, StatFs, Timespec,
};
use crate::errno::Errno;

/// Page caches of recently mapped files kept alive after their last user
/// goes, so short-lived processes (a shell's children) find libc cached.
const RECENT_CACHES: usize = 64;

/// statfs f_type values of host pseudo-file-systems never exposed.
const REFUSED_FS_TYPES: &[i64] = &[
    0x9fa0,      // proc
    0x6265_6572, // sysfs
    0x6462_6720, // debugfs
    0x7363_6673, // securityfs
    0x7472_6163, // tracefs
    0x27e0eb,    // cgroup
    0x6367_7270, // cgroup2
    0xcafe_4a11, // bpf
    0x1cd1,      // devpts
    0x6265_6570, // configfs
    0x6573_5543, // fusectl
    0x6165_676c, // pstore
    0xde5e_81e4, // efivarfs
    0x4249_4e4d, // binfmt_misc
];

/// Minor number of the first device number given to a host file system
/// (major 0, as Linux numbers file systems without a device of their own).
const FIRST_DEVICE_MINOR: u32 = 0x20;

/// The sandbox's numbers for host objects: a device number for each host
/// file system and an inode number for each host file, given in the order
/// they are first seen and kept for the sandbox's life (as hard links and
/// repeated looks must find the same numbers).
#[derive(Default)]
struct SandboxIds {
    devices: HashMap<u64, u64>,
    inodes: HashMap<(u64, u64), u64>,
}

impl SandboxIds {
    fn device(&mut self, host_dev: u64) -> u64 {
        let next = FIRST_DEVICE_MINOR + self.devices.len() as u32;
        *self.devices.entry(host_dev).or_insert_with(|| super::makedev(0, next))
    }

    fn inode(&mut self, host_dev: u64, host_ino: u64) -> u64 {
        // Numbering starts at 2, the root directory's number on most disk
        // file systems (the root is seen first).
        let next = self.inodes.len() as u64 + 2;
        *self.inodes.entry((host_dev, host_ino)).or_insert(next)
    }
}

/// The host file system as the sandbox sees it.
pub struct HostFs {
    proc_fd: OwnedFd,
    mf: Arc<MemoryFile>,
    caches: Mutex<HashMap<(u64, u64), Weak<PageCache>>>,
    recent: Mutex<VecDeque<Arc<PageCache>>>,
    ids: Mutex<SandboxIds>,
    /// The pipes of FIFOs made in writable binds, by host device and inode:
    /// sandbox processes meet there (a FIFO of the host's own is never
    /// opened).
    fifos: Mutex<HashMap<(u64, u64), Weak<Pipe>>>,
}

impl HostFs {
    /// The host's files as the sandbox will see them; nothing is opened
    /// yet but the means to reopen.
    pub fn new(mf: Arc<MemoryFile>) -> Result<Arc<HostFs>, FsError> {
        // The modes the VFS passes down have the application's umask applied
        // already; the host must not apply the sentry's too. Set now, while
        // the sentry may: trees with writable binds can come later (a pod's
        // containers), when its filter allows no umask(2).
        rustix::process::umask(Mode::empty());
        let proc_fd =
            rustix::fs::open("/proc/self/fd", OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
        Ok(Arc::new(HostFs {
            proc_fd,
            mf,
            caches: Mutex::new(HashMap::new()),
            recent: Mutex::new(VecDeque::new()),
            ids: Mutex::new(SandboxIds::default()),
            fifos: Mutex::new(HashMap::new()),
        }))
    }

    /// The host directory or regular file at `path` (the root, or the
    /// source of a bind mount), as the root inode of a mount; with
    /// `writable`, the sandbox may change what is below it. Host
    /// pseudo-file-systems are refused here as they are below.
    pub fn open_tree(self: &Arc<Self>, path: &Path, writable: bool) -> Result<Arc<dyn Inode>, FsError> {
        // openat, not open: a confined sentry opens the trees of containers
        // that join it later, and its seccomp filter allows openat only.
        let fd = rustix::fs::openat(rustix::fs::CWD, path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty())?;
        let inode = HostInode::from_fd(self.clone(), fd, writable)?;
        if !matches!(inode.ftype, FileType::Directory | FileType::Regular) {
            return Err(FsError::PermissionDenied);
        }
        HostInode::check_fs_type(&inode.fd)?;
        Ok(Arc::new(inode))
    }

    /// The name of `fd` in `/proc/self/fd`: a link to the very object
    /// behind it.
    fn proc_name(fd: &OwnedFd) -> String {
        fd.as_raw_fd().to_string()
    }

    /// Opens the object behind an O_PATH descriptor for real.
    fn reopen(&self, fd: &OwnedFd, flags: OFlags) -> Result<OwnedFd, FsError> {
        let name = Self::proc_name(fd);
        Ok(rustix::fs::openat(&self.proc_fd, name.as_str(), flags | OFlags::CLOEXEC, Mode::empty())?)
    }

    /// `st`, a host object's metadata, with the sandbox's device and inode
    /// numbers.
    fn sandbox_stat(&self, mut st: Stat) -> Stat {
        let mut ids = self.ids.lock().unwrap();
        st.ino = ids.inode(st.dev, st.ino);
        st.dev = ids.device(st.dev);
        st
    }

    fn page_cache(self: &Arc<Self>, inode: &HostInode) -> Result<Arc<PageCache>, FsError> {
        let st = statx_fd(&inode.fd)?;
        let key = (st.dev, st.ino);
        let shown = self.sandbox_stat(st);
        let mut caches = self.caches.lock().unwrap();
        if let Some(c) = caches.get(&key).and_then(Weak::upgrade)
            && c.size == st.size
            && c.mtime == st.mtime
        {
            return Ok(c);
        }
        let fd = self.reopen(&inode.fd, OFlags::RDONLY)?;
        let c = Arc::new(PageCache {
            mf: self.mf.clone(),
            fd,
            size: st.size,
            mtime: st.mtime,
            name: MapName { path: String::new(), dev: shown.dev, ino: shown.ino },
            pages: Mutex::new(HashMap::new()),
            shared_writers: std::sync::atomic::AtomicU64::new(0),
        });
        caches.insert(key, Arc::downgrade(&c));
        caches.retain(|_, w| w.strong_count() > 0);
        drop(caches);
        let mut recent = self.recent.lock().unwrap();
        recent.push_back(c.clone());
        if recent.len() > RECENT_CACHES {
            recent.pop_front();
        }
        Ok(c)
    }

    /// Forgets the cached pages of host file `key` after the sandbox changed
    /// it: a later mapping reads it afresh even when its size and
    /// modification time look the same (a rewrite within one clock tick).
    fn forget_cache(&self, key: (u64, u64)) {
        let Some(gone) = self.caches.lock().unwrap().remove(&key).and_then(|w| w.upgrade()) else { return };
        self.recent.lock().unwrap().retain(|c| !Arc::ptr_eq(c, &gone));
    }
}

/// An object of the host root.
pub struct HostInode {
    fs: Arc<HostFs>,
    fd: OwnedFd,
    ftype: FileType,
    /// The sandbox's inode number for it.
    ino: u64,
    /// The host device and inode it is.
    host_dev: u64,
    host_ino: u64,
    /// Below a writable bind mount.
    writable: bool,
    /// The read-write descriptor a `create` opened the new file with, for
    /// the open that follows: a file made with a mode that denies writing
    /// is still written by its creator (open(2) with O_CREAT), where
    /// reopening it would be refused.
    created: Mutex<Option<OwnedFd>>,
}

fn stat_from(x: &rustix::fs::Statx) -> Stat {
    let ts = |t: rustix::fs::StatxTimestamp| Timespec { sec: t.tv_sec, nsec: t.tv_nsec };
    Stat {
        dev: super::makedev(x.stx_dev_major, x.stx_dev_minor),
        ino: x.stx_ino,
        mode: x.stx_mode as u32,
        nlink: x.stx_nlink as u64,
        uid: x.stx_uid,
        gid: x.stx_gid,
        rdev: super::makedev(x.stx_rdev_major, x.stx_rdev_minor),
        size: x.stx_size,
        blksize: x.stx_blksize,
        blocks: x.stx_blocks,
        atime: ts(x.stx_atime),
        mtime: ts(x.stx_mtime),
        ctime: ts(x.stx_ctime),
        btime: (x.stx_mask & rustix::fs::StatxFlags::BTIME.bits() != 0).then(|| ts(x.stx_btime)),
        mount_id: 0,
    }
}

/// The host's metadata of the object behind `fd`, host numbers and all.
fn statx_fd(fd: &OwnedFd) -> Result<Stat, FsError> {
    let x = rustix::fs::statx(
        fd,
        "",
        AtFlags::EMPTY_PATH | AtFlags::SYMLINK_NOFOLLOW,
        StatxFlags::BASIC_STATS | StatxFlags::BTIME,
    )?;
    Ok(stat_from(&x))
}

/// A name the host is asked about: one component, never `.` or `..`. The
/// VFS passes nothing else; checked here too, since a name with a slash
/// would let the host walk where the sentry did not.
fn one_name(name: &[u8]) -> Result<&[u8], FsError> {
    if name.is_empty() || name == b"." || name == b".." || name.contains(&b'/') || name.contains(&0) {
        return Err(FsError::Invalid);
    }
    Ok(name)
}

/// The prefix of the extended attributes the sandbox may set on host
/// files; the other namespaces belong to the host (security labels,
/// ACLs, trusted.*).
const USER_XATTR_PREFIX: &[u8] = b"user.";

fn host_err(e: std::io::Error) -> FsError {
    FsError::from_errno(Errno::from_io(&e))
}

impl HostInode {
    fn from_fd(fs: Arc<HostFs>, fd: OwnedFd, writable: bool) -> Result<Self, FsError> {
        let st = statx_fd(&fd)?;
        let ino = fs.ids.lock().unwrap().inode(st.dev, st.ino);
        Ok(HostInode {
            fs,
            fd,
            ftype: st.file_type(),
            ino,
            host_dev: st.dev,
            host_ino: st.ino,
            writable,
            created: Mutex::new(None),
        })
    }

    /// Another inode for the same host object (an open file keeps one).
    fn duplicate(&self) -> Result<HostInode, FsError> {
        Ok(HostInode {
            fs: self.fs.clone(),
            fd: self.fd.try_clone().map_err(host_err)?,
            ftype: self.ftype,
            ino: self.ino,
            host_dev: self.host_dev,
            host_ino: self.host_ino,
            writable: self.writable,
            created: Mutex::new(None),
        })
    }

    fn check_fs_type(fd: &OwnedFd) -> Result<(), FsError> {
        let sfs = rustix::fs::fstatfs(fd)?;
        if REFUSED_FS_TYPES.contains(&(sfs.f_type as i64)) {
            return Err(FsError::PermissionDenied);
        }
        Ok(())
    }

    /// The host descriptor of this directory, for a change below it.
    fn changeable_dir(&self) -> Result<&OwnedFd, FsError> {
        if self.ftype != FileType::Directory {
            return Err(FsError::NotDirectory);
        }
        if !self.writable {
            return Err(FsError::ReadOnly);
        }
        Ok(&self.fd)
    }

    /// The O_PATH descriptor of the child `name`, opened without following
    /// a symlink or leaving this directory.
    fn open_child(&self, name: &[u8]) -> Result<OwnedFd, FsError> {
        let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        Ok(match rustix::fs::openat2(&self.fd, name, flags, Mode::empty(), resolve) {
            Err(rustix::io::Errno::NOSYS) => rustix::fs::openat(&self.fd, name, flags, Mode::empty())?,
            r => r?,
        })
    }

    /// The inode of the child `name`, just made by the sandbox.
    fn made_child(&self, name: &[u8]) -> Result<Arc<dyn Inode>, FsError> {
        let fd = self.open_child(name)?;
        Ok(Arc::new(HostInode::from_fd(self.fs.clone(), fd, self.writable)?))
    }

    /// A path to this very object for the calls on extended attributes:
    /// its descriptor's /proc link, which those calls follow to the object
    /// (a symlink's too, without following the symlink), as none of them
    /// takes an O_PATH descriptor. Opening the file instead would ask the
    /// host for read permission, which Linux's xattr calls do not need.
    fn xattr_path(&self) -> String {
        format!("/proc/self/fd/{}", self.fd.as_raw_fd())
    }

    /// The host file's key in the page caches.
    fn cache_key(&self) -> (u64, u64) {
        (self.host_dev, self.host_ino)
    }
}

impl Inode for HostInode {
    fn file_type(&self) -> FileType {
        self.ftype
    }

    fn stat(&self) -> Result<Stat, FsError> {
        Ok(self.fs.sandbox_stat(statx_fd(&self.fd)?))
    }

    fn ino(&self) -> Result<u64, FsError> {
        Ok(self.ino)
    }

    fn lookup(&self, name: &[u8]) -> Result<Arc<dyn Inode>, FsError> {
        if self.ftype != FileType::Directory {
            return Err(FsError::NotDirectory);
        }
        let fd = self.open_child(one_name(name)?)?;
        let child = HostInode::from_fd(self.fs.clone(), fd, self.writable)?;
        if child.host_dev != self.host_dev {
            // Another host file system is mounted here.
            Self::check_fs_type(&child.fd)?;
        }
        Ok(Arc::new(child))
    }

    fn read_link(&self) -> Result<Vec<u8>, FsError> {
        if self.ftype != FileType::Symlink {
            return Err(FsError::Invalid);
        }
        Ok(rustix::fs::readlinkat(&self.fd, "", Vec::new())?.into_bytes())
    }

    fn open(&self, ctx: &Context, _: &Arc<Dentry>, flags: OpenFlags) -> Result<Arc<dyn FileOps>, FsError> {
        if flags.contains(OpenFlags::PATH) {
            let stat = self.stat()?;
            return Ok(Arc::new(PathFile { stat }));
        }
        let write = flags.writable() || flags.contains(OpenFlags::TRUNC);
        if write && self.ftype == FileType::Directory {
            return Err(FsError::IsDirectory);
        }
        if write && !self.writable {
            return Err(FsError::ReadOnly);
        }
        match self.ftype {
            FileType::Regular => {
                let created = self.created.lock().unwrap().take();
                let fd = match created {
                    Some(fd) => fd,
                    None => {
                        let mut host_flags = match (flags.readable(), flags.writable()) {
                            (true, true) => OFlags::RDWR,
                            (false, true) => OFlags::WRONLY,
                            _ => OFlags::RDONLY,
                        };
                        if flags.contains(OpenFlags::TRUNC) && flags.writable() {
                            host_flags |= OFlags::TRUNC;
                        }
                        for (ours, host) in [(OpenFlags::SYNC, OFlags::SYNC), (OpenFlags::DSYNC, OFlags::DSYNC)] {
                            if flags.contains(ours) {
                                host_flags |= host;
                            }
                        }
                        self.fs.reopen(&self.fd, host_flags | OFlags::NONBLOCK)?
                    }
                };
                Self::check_fs_type(&fd)?;
                if write {
                    self.fs.forget_cache(self.cache_key());
                }
                Ok(Arc::new(HostFile { fd, inode: self.duplicate()? }))
            }
            FileType::Directory => {
                let fd = self.fs.reopen(&self.fd, OFlags::RDONLY | OFlags::DIRECTORY)?;
                Self::check_fs_type(&fd)?;
                Ok(Arc::new(HostDir {
                    fd,
                    pos: Mutex::new(0),
                    fs: self.fs.clone(),
                    host_dev: self.host_dev,
                    writable: self.writable,
                }))
            }
            FileType::Symlink => Err(FsError::Loop),
            FileType::Fifo if self.writable => {
                let pipe = {
                    let mut fifos = self.fs.fifos.lock().unwrap();
                    fifos.retain(|_, w| w.strong_count() > 0);
                    let owner = (ctx.creds.uid.fs, ctx.creds.gid.fs);
                    let slot = fifos.entry(self.cache_key()).or_default();
                    match slot.upgrade() {
                        Some(p) => p,
                        None => {
                            let p = Pipe::new(self.fs.mf.clone(), owner);
                            *slot = Arc::downgrade(&p);
                            p
                        }
                    }
                };
                open_fifo(ctx, &pipe, flags)
            }
            FileType::Socket => Err(FsError::NoDevice),
            _ => Err(FsError::PermissionDenied),
        }
    }

    fn release_caches(&self) {
        self.fs.recent.lock().unwrap().clear();
    }

    fn statfs(&self) -> Result<StatFs, FsError> {
        let s = rustix::fs::fstatfs(&self.fd)?;
        let read_only = if self.writable { 0 } else { linux_raw_sys::general::MS_RDONLY as u64 };
        Ok(StatFs {
            fs_type: s.f_type as u64,
            block_size: s.f_bsize as u64,
            blocks: s.f_blocks,
            blocks_free: s.f_bfree,
            blocks_avail: s.f_bavail,
            files: s.f_files,
            files_free: s.f_ffree,
            name_max: s.f_namelen as u64,
            flags: s.f_flags as u64 | read_only,
        })
    }

    fn create(&self, _: &Context, name: &[u8], node: NewNode) -> Result<Arc<dyn Inode>, FsError> {
        let dir = self.changeable_dir()?;
        let flags =
            OFlags::CREATE | OFlags::EXCL | OFlags::RDWR | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(dir, one_name(name)?, flags, Mode::from_raw_mode(node.mode & 0o7777))?;
        let open = fd.try_clone().map_err(host_err)?;
        let inode = HostInode::from_fd(self.fs.clone(), fd, self.writable)?;
        *inode.created.lock().unwrap() = Some(open);
        Ok(Arc::new(inode))
    }

    fn mkdir(&self, _: &Context, name: &[u8], node: NewNode) -> Result<Arc<dyn Inode>, FsError> {
        let dir = self.changeable_dir()?;
        rustix::fs::mkdirat(dir, one_name(name)?, Mode::from_raw_mode(node.mode & 0o7777))?;
        self.made_child(name)
    }

    fn mknod(&self, _: &Context, name: &[u8], node: NewNode) -> Result<Arc<dyn Inode>, FsError> {
        let dir = self.changeable_dir()?;
        let kind = rustix::fs::FileType::from_raw_mode(node.mode);
        rustix::fs::mknodat(dir, one_name(name)?, kind, Mode::from_raw_mode(node.mode & 0o7777), node.rdev)?;
        self.made_child(name)
    }

    fn symlink(&self, _: &Context, name: &[u8], target: &[u8], _: NewNode) -> Result<Arc<dyn Inode>, FsError> {
        let dir = self.changeable_dir()?;
        // The target is only text to the host: the sentry resolves it.
        rustix::fs::symlinkat(target, dir, one_name(name)?)?;
        self.made_child(name)
    }

    fn link(&self, _: &Context, name: &[u8], inode: &Arc<dyn Inode>) -> Result<(), FsError> {
        let dir = self.changeable_dir()?;
        let source = match inode.downcast_ref::<HostInode>() {
            Some(h) if Arc::ptr_eq(&h.fs, &self.fs) && h.writable => h,
            _ => return Err(FsError::CrossDevice),
        };
        // Linked through its descriptor's /proc link, which leads to the
        // object itself (whatever its names have become), and, for a
        // symlink, to the link rather than what it names.
        let from = HostFs::proc_name(&source.fd);
        rustix::fs::linkat(&self.fs.proc_fd, from.as_str(), dir, one_name(name)?, AtFlags::SYMLINK_FOLLOW)?;
        Ok(())
    }

    fn unlink(&self, _: &Context, name: &[u8]) -> Result<(), FsError> {
        let dir = self.changeable_dir()?;
        Ok(rustix::fs::unlinkat(dir, one_name(name)?, AtFlags::empty())?)
    }

    fn rmdir(&self, _: &Context, name: &[u8]) -> Result<(), FsError> {
        let dir = self.changeable_dir()?;
        Ok(rustix::fs::unlinkat(dir, one_name(name)?, AtFlags::REMOVEDIR)?)
    }

    fn rename(
        &self,
        _: &Context,
        old_name: &[u8],
        new_dir: &Arc<dyn Inode>,
        new_name: &[u8],
        flags: RenameFlags,
    ) -> Result<(), FsError> {
        let dir = self.changeable_dir()?;
        let to = match new_dir.downcast_ref::<HostInode>() {
            Some(h) if Arc::ptr_eq(&h.fs, &self.fs) && h.writable => h.changeable_dir()?,
            _ => return Err(FsError::CrossDevice),
        };
        let host_flags = rustix::fs::RenameFlags::from_bits_retain(flags.bits());
        Ok(rustix::fs::renameat_with(dir, one_name(old_name)?, to, one_name(new_name)?, host_flags)?)
    }

    fn tmpfile(&self, _: &Context, node: NewNode, linkable: bool) -> Result<Arc<dyn Inode>, FsError> {
        let dir = self.changeable_dir()?;
        let mut flags = OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC;
        if !linkable {
            flags |= OFlags::EXCL;
        }
        let fd = rustix::fs::openat(dir, ".", flags, Mode::from_raw_mode(node.mode & 0o7777))?;
        let open = fd.try_clone().map_err(host_err)?;
        let inode = HostInode::from_fd(self.fs.clone(), fd, self.writable)?;
        *inode.created.lock().unwrap() = Some(open);
        Ok(Arc::new(inode))
    }

    fn setattr(&self, _: &Context, attr: &SetAttr) -> Result<(), FsError> {
        if !self.writable {
            return Err(FsError::ReadOnly);
        }
        if let Some(size) = attr.size {
            if self.ftype != FileType::Regular {
                return Err(if self.ftype == FileType::Directory { FsError::IsDirectory } else { FsError::Invalid });
            }
            let fd = self.fs.reopen(&self.fd, OFlags::WRONLY | OFlags::NONBLOCK)?;
            rustix::fs::ftruncate(&fd, size)?;
            self.fs.forget_cache(self.cache_key());
        }
        if attr.uid.is_some() || attr.gid.is_some() {
            let uid = attr.uid.map(rustix::fs::Uid::from_raw);
            let gid = attr.gid.map(rustix::fs::Gid::from_raw);
            rustix::fs::chownat(&self.fd, "", uid, gid, AtFlags::EMPTY_PATH | AtFlags::SYMLINK_NOFOLLOW)?;
        }
        if let Some(mode) = attr.mode {
            if self.ftype == FileType::Symlink {
                // As Linux: a symlink's mode cannot change.
                return Err(FsError::NotSupported);
            }
            let name = HostFs::proc_name(&self.fd);
            rustix::fs::chmodat(&self.fs.proc_fd, name.as_str(), Mode::from_raw_mode(mode & 0o7777), AtFlags::empty())?;
        }
        if attr.atime.is_some() || attr.mtime.is_some() {
            let omit = rustix::fs::Timespec { tv_sec: 0, tv_nsec: rustix::fs::UTIME_OMIT };
            let host = |t: Option<Timespec>| {
                t.map_or(omit, |t| rustix::fs::Timespec { tv_sec: t.sec, tv_nsec: t.nsec.into() })
            };
            let times = rustix::fs::Timestamps { last_access: host(attr.atime), last_modification: host(attr.mtime) };
            rustix::fs::utimensat(&self.fd, "", &times, AtFlags::EMPTY_PATH | AtFlags::SYMLINK_NOFOLLOW)?;
        }
        Ok(())
    }

    fn getxattr(&self, name: &[u8]) -> Result<Vec<u8>, FsError> {
        let mut value = Vec::with_capacity(XATTR_SIZE_MAX);
        rustix::fs::getxattr(self.xattr_path().as_str(), name, rustix::buffer::spare_capacity(&mut value))?;
        Ok(value)
    }

    fn setxattr(&self, _: &Context, name: &[u8], value: &[u8], flags: u32) -> Result<(), FsError> {
        if !self.writable {
            return Err(FsError::ReadOnly);
        }
        if !name.starts_with(USER_XATTR_PREFIX) {
            return Err(FsError::NotSupported);
        }
        let flags = rustix::fs::XattrFlags::from_bits_retain(flags);
        Ok(rustix::fs::setxattr(self.xattr_path().as_str(), name, value, flags)?)
    }

    fn listxattr(&self) -> Result<Vec<Vec<u8>>, FsError> {
        let mut list = Vec::with_capacity(XATTR_LIST_MAX);
        rustix::fs::listxattr(self.xattr_path().as_str(), rustix::buffer::spare_capacity(&mut list))?;
        Ok(list.split(|b| *b == 0).filter(|n| !n.is_empty()).map(|n| n.to_vec()).collect())
    }

    fn removexattr(&self, _: &Context, name: &[u8]) -> Result<(), FsError> {
        if !self.writable {
            return Err(FsError::ReadOnly);
        }
        if !name.starts_with(USER_XATTR_PREFIX) {
            return Err(FsError::NotSupported);
        }
        Ok(rustix::fs::removexattr(self.xattr_path().as_str(), name)?)
    }

    fn read_only(&self) -> bool {
        !self.writable
    }
}

/// Largest value of one extended attribute, and of the list of names
/// (Linux's XATTR_SIZE_MAX and XATTR_LIST_MAX).
const XATTR_SIZE_MAX: usize = 65536;
const XATTR_LIST_MAX: usize = 65536;

/// An O_PATH descriptor: a name, nothing more.
struct PathFile {
    stat: Stat,
}

impl FileOps for PathFile {
    fn stat(&self) -> Result<Stat, FsError> {
        Ok(self.stat)
    }
    fn read(&self, _: &Context, _: &OpenFile, _: &[GuestSliceMut<'_>], _: u64) -> Result<usize, FsError> {
        Err(FsError::BadFd)
    }
}

/// An open regular file of the host.
struct HostFile {
    fd: OwnedFd,
    inode: HostInode,
}

impl HostFile {
    /// Retries a host call a signal of the sentry's own cut short.
    fn retry<T>(mut call: impl FnMut() -> rustix::io::Result<T>) -> Result<T, FsError> {
        loop {
            match call() {
                Err(rustix::io::Errno::INTR) => continue,
                r => return Ok(r?),
            }
        }
    }

    /// The file changed: mappings made from now on must not see old pages.
    fn changed(&self) {
        self.inode.fs.forget_cache(self.inode.cache_key());
    }

    /// Writes back the pages shared writable mappings of this file hold
    /// (fsync).
    fn write_back_mappings(&self) -> Result<(), FsError> {
        let cache = self.inode.fs.caches.lock().unwrap().get(&self.inode.cache_key()).and_then(Weak::upgrade);
        match cache {
            Some(c) if c.shared_writers.load(std::sync::atomic::Ordering::Acquire) > 0 => c.write_back(&self.fd),
            _ => Ok(()),
        }
    }
}

impl FileOps for HostFile {
    fn read(&self, _: &Context, _: &OpenFile, bufs: &[GuestSliceMut<'_>], offset: u64) -> Result<usize, FsError> {
        Self::retry(|| memory::guest::preadv(self.fd.as_fd(), bufs, offset))
    }
    fn write(&self, ctx: &Context, file: &OpenFile, bufs: &[GuestSlice<'_>], offset: u64) -> Result<usize, FsError> {
        if file.flags().contains(OpenFlags::APPEND) {
            return self.write_append(ctx, file, bufs).map(|(n, _)| n);
        }
        let n = Self::retry(|| memory::guest::pwritev(self.fd.as_fd(), bufs, offset))?;
        self.changed();
        Ok(n)
    }
    fn write_append(&self, _: &Context, _: &OpenFile, bufs: &[GuestSlice<'_>]) -> Result<(usize, u64), FsError> {
        // RWF_APPEND: the host finds the end and writes there in one step,
        // so appenders outside the sandbox are not overwritten either.
        let n = Self::retry(|| memory::guest::pwritev_append(self.fd.as_fd(), bufs))?;
        self.changed();
        Ok((n, statx_fd(&self.fd)?.size))
    }
    fn fallocate(&self, mode: u32, offset: u64, len: u64) -> Result<(), FsError> {
        let mode = rustix::fs::FallocateFlags::from_bits_retain(mode);
        Self::retry(|| rustix::fs::fallocate(&self.fd, mode, offset, len))?;
        self.changed();
        Ok(())
    }
    fn stat(&self) -> Result<Stat, FsError> {
        Ok(self.inode.fs.sandbox_stat(statx_fd(&self.fd)?))
    }
    fn seekable(&self) -> bool {
        true
    }
    fn mappable(&self) -> Option<Arc<dyn Mappable>> {
        self.inode.fs.page_cache(&self.inode).ok().map(|c| c as Arc<dyn Mappable>)
    }
    fn readable_bytes(&self) -> Option<u64> {
        None
    }
    fn sync(&self, data_only: bool) -> Result<(), FsError> {
        if !self.inode.writable {
            // Nothing of the read-only root is ever dirty.
            return Ok(());
        }
        self.write_back_mappings()?;
        if data_only {
            Self::retry(|| rustix::fs::fdatasync(&self.fd))
        } else {
            Self::retry(|| rustix::fs::fsync(&self.fd))
        }
    }
}

/// An open directory of the host. The host descriptor's position is the
/// directory position.
struct HostDir {
    fd: OwnedFd,
    pos: Mutex<u64>,
    fs: Arc<HostFs>,
    host_dev: u64,
    writable: bool,
}

impl FileOps for HostDir {
    fn stat(&self) -> Result<Stat, FsError> {
        Ok(self.fs.sandbox_stat(statx_fd(&self.fd)?))
    }
    fn sync(&self, _data_only: bool) -> Result<(), FsError> {
        if !self.writable {
            return Ok(());
        }
        HostFile::retry(|| rustix::fs::fsync(&self.fd))
    }
    fn seekable(&self) -> bool {
        true
    }
    fn getdents(&self, pos: &mut u64, buf: &mut [u8]) -> Result<usize, FsError> {
        let mut host_pos = self.pos.lock().unwrap();
        if *host_pos != *pos {
            rustix::fs::seek(&self.fd, rustix::fs::SeekFrom::Start(*pos))?;
        }
        // SAFETY: getdents64 writes at most buf.len() bytes into buf, a valid
        // exclusive buffer; the descriptor is an open directory.
        let n =
            unsafe { libc::syscall(libc::SYS_getdents64, self.fd.as_fd().as_raw_fd(), buf.as_mut_ptr(), buf.len()) };
        if n < 0 {
            return Err(FsError::from_errno(Errno::from_io(&std::io::Error::last_os_error())));
        }
        *pos = rustix::fs::seek(&self.fd, rustix::fs::SeekFrom::Current(0))?;
        *host_pos = *pos;
        // Each record's d_ino becomes the sandbox's number for the entry
        // (reckoned on the directory's device, as the host's d_ino is).
        let n = n as usize;
        let mut ids = self.fs.ids.lock().unwrap();
        let mut at = 0;
        while at + 19 <= n {
            let host_ino = u64::from_le_bytes(buf[at..at + 8].try_into().unwrap());
            let reclen = u16::from_le_bytes(buf[at + 16..at + 18].try_into().unwrap()) as usize;
            buf[at..at + 8].copy_from_slice(&ids.inode(self.host_dev, host_ino).to_le_bytes());
            if reclen == 0 {
                break;
            }
            at += reclen;
        }
        Ok(n)
    }
}

/// A shared mapping of a host file opened for writing: the file's cached
/// pages, written back to the host through the writer's own descriptor by
/// msync, fsync and when the mapping goes away, so what the program wrote
/// through memory reaches the file.
struct SharedHostMap {
    cache: Arc<PageCache>,
    fd: OwnedFd,
}

/// The mapping a shared, writable mmap of `ops` uses, if it is an open
/// host file: None for other files.
pub fn shared_writable_mapping(ops: &dyn FileOps) -> Option<Result<Arc<dyn Mappable>, FsError>> {
    let f = ops.downcast_ref::<HostFile>()?;
    Some((|| {
        let cache = f.inode.fs.page_cache(&f.inode)?;
        let fd = rustix::io::fcntl_dupfd_cloexec(&f.fd, 0)?;
        cache.shared_writers.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        Ok(Arc::new(SharedHostMap { cache, fd }) as Arc<dyn Mappable>)
    })())
}

impl Mappable for SharedHostMap {
    fn page(&self, index: u64) -> Result<Option<Frame>, crate::mm::MmError> {
        self.cache.page(index)
    }
    fn size(&self) -> u64 {
        self.cache.size
    }
    fn describe(&self) -> MapName {
        self.cache.describe()
    }
    fn cached(&self, index: u64) -> Option<Frame> {
        self.cache.cached(index)
    }
    fn write_back(&self) -> Result<(), crate::mm::MmError> {
        self.cache.write_back(&self.fd).map_err(crate::mm::MmError::from)
    }
}

impl Drop for SharedHostMap {
    fn drop(&mut self) {
        if let Err(e) = self.cache.write_back(&self.fd) {
            tracing::warn!("writing a shared mapping back to its host file: {e}");
        }
        self.cache.shared_writers.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

impl PageCache {
    /// Writes every cached page (up to the size the cache knows) to `fd`.
    fn write_back(&self, fd: &OwnedFd) -> Result<(), FsError> {
        let pages: Vec<(u64, Frame)> = {
            let p = self.pages.lock().unwrap();
            p.iter().map(|(i, f)| (*i, *f)).collect()
        };
        for (index, f) in pages {
            let at = index * PAGE_SIZE;
            if at >= self.size {
                continue;
            }
            let len = (self.size - at).min(PAGE_SIZE) as usize;
            let src = self.mf.slice(f, 0, len).as_read_only();
            let mut done = 0;
            while done < len {
                match memory::guest::pwritev(fd.as_fd(), &[src.subslice(done, len - done)], at + done as u64) {
                    Ok(n) => done += n,
                    Err(rustix::io::Errno::INTR) => continue,
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Ok(())
    }
}

/// The pages of one host file, read into frames of the memory file once and
/// shared by every mapping of it.
pub struct PageCache {
    mf: Arc<MemoryFile>,
    fd: OwnedFd,
    size: u64,
    mtime: Timespec,
    name: MapName,
    pages: Mutex<HashMap<u64, Frame>>,
    /// Shared mappings that may write these pages ([`SharedHostMap`]).
    shared_writers: std::sync::atomic::AtomicU64,
}

impl Mappable for PageCache {
    fn page(&self, index: u64) -> Result<Option<Frame>, crate::mm::MmError> {
        if index >= self.size.div_ceil(PAGE_SIZE) {
            return Ok(None);
        }
        let mut pages = self.pages.lock().unwrap();
        if let Some(f) = pages.get(&index) {
            self.mf.inc_ref(*f);
            return Ok(Some(*f));
        }
        let f = self.mf.allocate().map_err(|_| crate::mm::MmError::NoMemory)?;
        let buf = self.mf.frame(f);
        let mut done = 0;
        while done < buf.len() {
            let rest = buf.subslice(done, buf.len() - done);
            match memory::guest::preadv(self.fd.as_fd(), &[rest], index * PAGE_SIZE + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => {
                    self.mf.dec_ref(f);
                    return Err(crate::mm::MmError::Io(Errno::from_host(e)));
                }
            }
        }
        pages.insert(index, f);
        self.mf.inc_ref(f);
        Ok(Some(f))
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn describe(&self) -> MapName {
        self.name.clone()
    }

    fn unchanging(&self) -> bool {
        // Written only through shared mappings of writers; a change by
        // write(2) makes a new cache for later mappings.
        self.shared_writers.load(std::sync::atomic::Ordering::Acquire) == 0
    }

    fn cached(&self, index: u64) -> Option<Frame> {
        let f = *self.pages.lock().unwrap().get(&index)?;
        self.mf.inc_ref(f);
        Some(f)
    }

    fn prefetch(&self, index: u64, count: u64) {
        let end = (index + count).min(self.size.div_ceil(PAGE_SIZE));
        let mut pages = self.pages.lock().unwrap();
        let mut i = index;
        while i < end {
            if pages.contains_key(&i) {
                i += 1;
                continue;
            }
            let mut run = i + 1;
            while run < end && run - i < PREFETCH_MAX && !pages.contains_key(&run) {
                run += 1;
            }
            let mut frames = Vec::new();
            if self.mf.allocate_many((run - i) as usize, &mut frames).is_err() {
                return;
            }
            match self.read_pages(i, &frames) {
                Ok(()) => {
                    for (k, f) in frames.into_iter().enumerate() {
                        pages.insert(i + k as u64, f);
                    }
                }
                Err(_) => {
                    for f in frames {
                        self.mf.dec_ref(f);
                    }
                    return;
                }
            }
            i = run;
        }
    }
}

/// The most pages one `prefetch` read brings in.
const PREFETCH_MAX: u64 = 256;

impl PageCache {
    /// Fills `frames` with the file's pages from `index` on, by one vectored
    /// read where the host allows; bytes past the end of the file are zero.
    fn read_pages(&self, index: u64, frames: &[Frame]) -> Result<(), FsError> {
        self.mf.populate(frames);
        let mut bufs: Vec<GuestSliceMut<'_>> = frames.iter().map(|f| self.mf.frame(*f)).collect();
        let total = frames.len() as u64 * PAGE_SIZE;
        let mut done = 0u64;
        while done < total {
            // The frames are whole pages: what came so far fills
            // done / PAGE_SIZE of them and part of the next.
            let first = (done / PAGE_SIZE) as usize;
            let part = (done % PAGE_SIZE) as usize;
            bufs[first] = self.mf.slice(frames[first], part, PAGE_SIZE as usize - part);
            match memory::guest::preadv(self.fd.as_fd(), &bufs[first..], index * PAGE_SIZE + done) {
                Ok(0) => break,
                Ok(n) => done += n as u64,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        // Frames come zeroed from the allocator, so a short read (the file's
        // last page, or a file that shrank) leaves zeros behind.
        Ok(())
    }
}

impl Drop for PageCache {
    fn drop(&mut self) {
        for f in self.pages.get_mut().unwrap().values() {
            self.mf.dec_ref(*f);
        }
    }
}
