//! The host root, passed through read-only.
//!
//! Every host object the sentry touches is named by an `O_PATH` descriptor.
//! A lookup opens one name relative to its parent's descriptor with
//! `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`, so the host never follows a
//! symlink or `..` on the sandbox's behalf: the sentry's resolver does that,
//! inside the sandbox. Only regular files, directories and symlinks are
//! exposed, and files on host kernel pseudo-file-systems (a procfs or sysfs
//! mounted somewhere under the root) are refused: neither opened nor even
//! looked up. The sandbox sees device and inode numbers of its own, never
//! the host's.

use crate::fs::Context;
use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::{Arc, Mutex, Weak};

use memory::{Frame, GuestSliceMut, MemoryFile, PAGE_SIZE};
use rustix::fs::{AtFlags, Mode, OFlags, ResolveFlags, StatxFlags};

use super::{
    Dentry, FileOps, FileType, FsError, Inode, MapName, Mappable, OpenFile, OpenFlags, Stat, StatFs, Timespec,
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
}

impl HostFs {
    /// The host's files as the sandbox will see them; nothing is opened
    /// yet but the means to reopen.
    pub fn new(mf: Arc<MemoryFile>) -> Result<Arc<HostFs>, FsError> {
        let proc_fd =
            rustix::fs::open("/proc/self/fd", OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
        Ok(Arc::new(HostFs {
            proc_fd,
            mf,
            caches: Mutex::new(HashMap::new()),
            recent: Mutex::new(VecDeque::new()),
            ids: Mutex::new(SandboxIds::default()),
        }))
    }

    /// The host directory or regular file at `path` (the root, or the
    /// source of a bind mount), as the root inode of a mount. Host
    /// pseudo-file-systems are refused here as they are below.
    pub fn open_tree(self: &Arc<Self>, path: &Path) -> Result<Arc<dyn Inode>, FsError> {
        let fd = rustix::fs::open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty())?;
        let inode = HostInode::from_fd(self.clone(), fd)?;
        if !matches!(inode.ftype, FileType::Directory | FileType::Regular) {
            return Err(FsError::PermissionDenied);
        }
        HostInode::check_fs_type(&inode.fd)?;
        Ok(Arc::new(inode))
    }

    /// Opens the object behind an O_PATH descriptor for real.
    fn reopen(&self, fd: &OwnedFd, flags: OFlags) -> Result<OwnedFd, FsError> {
        let name = fd.as_raw_fd().to_string();
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
}

/// An object of the host root.
pub struct HostInode {
    fs: Arc<HostFs>,
    fd: OwnedFd,
    ftype: FileType,
    /// The sandbox's inode number for it.
    ino: u64,
    /// The host device it is on.
    host_dev: u64,
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

impl HostInode {
    fn from_fd(fs: Arc<HostFs>, fd: OwnedFd) -> Result<Self, FsError> {
        let st = statx_fd(&fd)?;
        let ino = fs.ids.lock().unwrap().inode(st.dev, st.ino);
        Ok(HostInode { fs, fd, ftype: st.file_type(), ino, host_dev: st.dev })
    }

    fn check_fs_type(fd: &OwnedFd) -> Result<(), FsError> {
        let sfs = rustix::fs::fstatfs(fd)?;
        if REFUSED_FS_TYPES.contains(&(sfs.f_type as i64)) {
            return Err(FsError::PermissionDenied);
        }
        Ok(())
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
        debug_assert!(!name.contains(&b'/') && name != b"." && name != b"..");
        let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        let fd = match rustix::fs::openat2(&self.fd, name, flags, Mode::empty(), resolve) {
            Err(rustix::io::Errno::NOSYS) => rustix::fs::openat(&self.fd, name, flags, Mode::empty())?,
            r => r?,
        };
        let child = HostInode::from_fd(self.fs.clone(), fd)?;
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

    fn open(&self, _: &Context, _: &Arc<Dentry>, flags: OpenFlags) -> Result<Arc<dyn FileOps>, FsError> {
        if flags.contains(OpenFlags::PATH) {
            let stat = self.stat()?;
            return Ok(Arc::new(PathFile { stat }));
        }
        if flags.writable() || flags.contains(OpenFlags::TRUNC) {
            return Err(if self.ftype == FileType::Directory { FsError::IsDirectory } else { FsError::ReadOnly });
        }
        match self.ftype {
            FileType::Regular => {
                let fd = self.fs.reopen(&self.fd, OFlags::RDONLY)?;
                Self::check_fs_type(&fd)?;
                Ok(Arc::new(HostFile {
                    fd,
                    inode: HostInode {
                        fs: self.fs.clone(),
                        fd: self.fd.try_clone().map_err(|e| FsError::Host(Errno::from_io(&e)))?,
                        ftype: self.ftype,
                        ino: self.ino,
                        host_dev: self.host_dev,
                    },
                }))
            }
            FileType::Directory => {
                let fd = self.fs.reopen(&self.fd, OFlags::RDONLY | OFlags::DIRECTORY)?;
                Self::check_fs_type(&fd)?;
                Ok(Arc::new(HostDir { fd, pos: Mutex::new(0), fs: self.fs.clone(), host_dev: self.host_dev }))
            }
            FileType::Symlink => Err(FsError::Loop),
            _ => Err(FsError::PermissionDenied),
        }
    }

    fn release_caches(&self) {
        self.fs.recent.lock().unwrap().clear();
    }

    fn statfs(&self) -> Result<StatFs, FsError> {
        let s = rustix::fs::fstatfs(&self.fd)?;
        Ok(StatFs {
            fs_type: s.f_type as u64,
            block_size: s.f_bsize as u64,
            blocks: s.f_blocks,
            blocks_free: s.f_bfree,
            blocks_avail: s.f_bavail,
            files: s.f_files,
            files_free: s.f_ffree,
            name_max: s.f_namelen as u64,
            flags: s.f_flags as u64 | linux_raw_sys::general::MS_RDONLY as u64,
        })
    }
}

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

impl FileOps for HostFile {
    fn read(&self, _: &Context, _: &OpenFile, bufs: &[GuestSliceMut<'_>], offset: u64) -> Result<usize, FsError> {
        loop {
            match memory::guest::preadv(self.fd.as_fd(), bufs, offset) {
                Err(rustix::io::Errno::INTR) => continue,
                r => return Ok(r?),
            }
        }
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
    fn sync(&self, _data_only: bool) -> Result<(), FsError> {
        // Nothing of the read-only root is ever dirty.
        Ok(())
    }
}

/// An open directory of the host. The host descriptor's position is the
/// directory position.
struct HostDir {
    fd: OwnedFd,
    pos: Mutex<u64>,
    fs: Arc<HostFs>,
    host_dev: u64,
}

impl FileOps for HostDir {
    fn stat(&self) -> Result<Stat, FsError> {
        Ok(self.fs.sandbox_stat(statx_fd(&self.fd)?))
    }
    fn sync(&self, _data_only: bool) -> Result<(), FsError> {
        Ok(())
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

/// The pages of one host file, read into frames of the memory file once and
/// shared by every mapping of it.
pub struct PageCache {
    mf: Arc<MemoryFile>,
    fd: OwnedFd,
    size: u64,
    mtime: Timespec,
    name: MapName,
    pages: Mutex<HashMap<u64, Frame>>,
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
