//! Building blocks for file systems the sentry serves itself (/dev, /proc):
//! directories listing a fixed or computed set of children, files whose
//! contents are generated when opened, and symlinks.

use crate::fs::Context;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use memory::{GuestSlice, GuestSliceMut};

use super::{Dentry, FileOps, FileType, FsError, Inode, OpenFile, OpenFlags, Stat, StatFs, Timespec};

/// Device number of every sentry-served file system (an anonymous device,
/// as Linux gives in-memory file systems).
pub const SYNTHETIC_DEV: u64 = 0x15;

/// A fresh inode number.
pub fn next_ino() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(2);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// When the sandbox started: the times synthetic files report.
pub fn boot_time() -> Timespec {
    static T: OnceLock<Timespec> = OnceLock::new();
    *T.get_or_init(Timespec::now)
}

/// Who owns a synthetic object, asked each time it is looked at (a
/// process's /proc files follow its effective ids).
pub type Owner = Arc<dyn Fn() -> (u32, u32) + Send + Sync>;

/// The owner's user and group id: root's unless `owner` says (as Linux's
/// /dev, /sys and /proc's own files belong to root).
pub(super) fn owner_ids(owner: &Option<Owner>) -> (u32, u32) {
    owner.as_ref().map_or((0, 0), |o| o())
}

fn synthetic_stat(ino: u64, mode: u32, size: u64, nlink: u64) -> Stat {
    owned_stat(ino, mode, size, nlink, (0, 0))
}

pub(super) fn owned_stat(ino: u64, mode: u32, size: u64, nlink: u64, (uid, gid): (u32, u32)) -> Stat {
    let t = boot_time();
    Stat {
        dev: SYNTHETIC_DEV,
        ino,
        mode,
        nlink,
        uid,
        gid,
        size,
        blksize: 4096,
        atime: t,
        mtime: t,
        ctime: t,
        ..Default::default()
    }
}

/// The one inode Linux gives every anonymous-inode file (eventfd,
/// eventpoll): no file type, mode 0600.
pub fn anon_inode_stat() -> Stat {
    static INO: OnceLock<u64> = OnceLock::new();
    synthetic_stat(*INO.get_or_init(next_ino), 0o600, 0, 1)
}

/// Appends one linux_dirent64 record to `buf`, if it fits.
pub fn push_dirent(buf: &mut [u8], used: &mut usize, ino: u64, next: u64, ty: FileType, name: &[u8]) -> bool {
    let reclen = (19 + name.len() + 1).div_ceil(8) * 8;
    if *used + reclen > buf.len() {
        return false;
    }
    let r = &mut buf[*used..*used + reclen];
    r.fill(0);
    r[0..8].copy_from_slice(&ino.to_le_bytes());
    r[8..16].copy_from_slice(&next.to_le_bytes());
    r[16..18].copy_from_slice(&(reclen as u16).to_le_bytes());
    r[18] = ty.dirent_type();
    r[19..19 + name.len()].copy_from_slice(name);
    *used += reclen;
    true
}

/// The `.` and `..` records a listing starts with (positions 0 and 1),
/// from position `*pos`, advancing it; false if `buf` filled up first.
pub fn push_dot_entries(buf: &mut [u8], used: &mut usize, pos: &mut u64, ino: u64, parent_ino: u64) -> bool {
    if *pos == 0 {
        if !push_dirent(buf, used, ino, 1, FileType::Directory, b".") {
            return false;
        }
        *pos = 1;
    }
    if *pos == 1 {
        if !push_dirent(buf, used, parent_ino, 2, FileType::Directory, b"..") {
            return false;
        }
        *pos = 2;
    }
    true
}

/// The children of a synthetic directory.
pub trait DirSource: Send + Sync {
    fn entries(&self) -> Vec<(Vec<u8>, Arc<dyn Inode>)>;
    fn lookup(&self, name: &[u8]) -> Option<Arc<dyn Inode>> {
        self.entries().into_iter().find(|(n, _)| n == name).map(|(_, i)| i)
    }
}

impl DirSource for Vec<(Vec<u8>, Arc<dyn Inode>)> {
    fn entries(&self) -> Vec<(Vec<u8>, Arc<dyn Inode>)> {
        self.clone()
    }
}

/// A directory served by the sentry.
pub struct SynthDir {
    ino: u64,
    mode: u32,
    source: Box<dyn DirSource>,
    owner: Option<Owner>,
    /// fsync succeeds (as on devtmpfs and sysfs) rather than failing with
    /// EINVAL (as on procfs).
    syncs: bool,
}

impl SynthDir {
    /// A directory with fixed children, as devtmpfs and sysfs keep them
    /// (fsync on it succeeds).
    pub fn new(entries: Vec<(Vec<u8>, Arc<dyn Inode>)>) -> Arc<SynthDir> {
        let mode = super::FileType::Directory.mode_bits() | 0o755;
        Arc::new(SynthDir { ino: next_ino(), mode, source: Box::new(entries), owner: None, syncs: true })
    }

    /// A directory whose children `source` computes, as procfs's are
    /// (fsync on it fails with EINVAL); root's unless `owner` says.
    pub fn with_source(source: Box<dyn DirSource>, perm: u32, owner: Option<Owner>) -> Arc<SynthDir> {
        Arc::new(SynthDir {
            ino: next_ino(),
            mode: super::FileType::Directory.mode_bits() | perm,
            source,
            owner,
            syncs: false,
        })
    }

    /// A read-only file with fixed contents, as a sysfs attribute is
    /// (fsync on it succeeds).
    pub fn file_with(data: Vec<u8>) -> Arc<dyn Inode> {
        Arc::new(SynthFile {
            ino: next_ino(),
            mode: FileType::Regular.mode_bits() | 0o444,
            generate: Box::new(move || Ok(data.clone())),
            owner: None,
            syncs: true,
            store: None,
        })
    }
}

impl Inode for SynthDir {
    fn file_type(&self) -> FileType {
        FileType::Directory
    }
    fn stat(&self) -> Result<Stat, FsError> {
        Ok(owned_stat(self.ino, self.mode, 0, 2, owner_ids(&self.owner)))
    }
    fn lookup(&self, name: &[u8]) -> Result<Arc<dyn Inode>, FsError> {
        self.source.lookup(name).ok_or(FsError::NotFound)
    }
    fn open(&self, _: &Context, _: &Arc<Dentry>, flags: OpenFlags) -> Result<Arc<dyn FileOps>, FsError> {
        if flags.writable() {
            return Err(FsError::IsDirectory);
        }
        let mut list =
            vec![(b".".to_vec(), self.ino, FileType::Directory), (b"..".to_vec(), self.ino, FileType::Directory)];
        for (n, i) in self.source.entries() {
            let ino = i.stat().map(|s| s.ino).unwrap_or(0);
            list.push((n, ino, i.file_type()));
        }
        Ok(Arc::new(SynthDirFile { stat: self.stat()?, entries: list, syncs: self.syncs }))
    }
    fn statfs(&self) -> Result<StatFs, FsError> {
        Ok(StatFs { block_size: 4096, name_max: 255, ..Default::default() })
    }
}

/// An open synthetic directory: a snapshot of its entries.
struct SynthDirFile {
    stat: Stat,
    entries: Vec<(Vec<u8>, u64, FileType)>,
    syncs: bool,
}

impl FileOps for SynthDirFile {
    fn stat(&self) -> Result<Stat, FsError> {
        Ok(self.stat)
    }
    fn sync(&self, _data_only: bool) -> Result<(), FsError> {
        if self.syncs { Ok(()) } else { Err(FsError::Invalid) }
    }
    fn seekable(&self) -> bool {
        true
    }
    fn getdents(&self, pos: &mut u64, buf: &mut [u8]) -> Result<usize, FsError> {
        let mut used = 0;
        while let Some((name, ino, ty)) = self.entries.get(*pos as usize) {
            if !push_dirent(buf, &mut used, *ino, *pos + 1, *ty, name) {
                if used == 0 {
                    return Err(FsError::Invalid);
                }
                break;
            }
            *pos += 1;
        }
        Ok(used)
    }
}

type Generator = Box<dyn Fn() -> Result<Vec<u8>, FsError> + Send + Sync>;

/// What a write to a synthetic file does with the bytes written, as one
/// write of a procfs file sets its value whole.
pub type Store = Arc<dyn Fn(&[u8]) -> Result<(), FsError> + Send + Sync>;

/// A file whose contents are generated when it is opened.
pub struct SynthFile {
    ino: u64,
    mode: u32,
    generate: Generator,
    owner: Option<Owner>,
    /// As [`SynthDir`]'s.
    syncs: bool,
    /// Where writes go, for the files that take them.
    store: Option<Store>,
}

impl SynthFile {
    /// A file generated at each open, as a procfs file is (fsync on it
    /// fails with EINVAL); root's unless `owner` says.
    pub fn inode(
        perm: u32,
        owner: Option<Owner>,
        generate: impl Fn() -> Result<Vec<u8>, FsError> + Send + Sync + 'static,
    ) -> Arc<dyn Inode> {
        Arc::new(SynthFile {
            ino: next_ino(),
            mode: FileType::Regular.mode_bits() | perm,
            generate: Box::new(generate),
            owner,
            syncs: false,
            store: None,
        })
    }

    /// A generated file that also takes writes: each write hands its bytes
    /// to `store` (mode and owner decide who may open it for writing).
    pub fn writable(
        perm: u32,
        owner: Option<Owner>,
        generate: impl Fn() -> Result<Vec<u8>, FsError> + Send + Sync + 'static,
        store: impl Fn(&[u8]) -> Result<(), FsError> + Send + Sync + 'static,
    ) -> Arc<dyn Inode> {
        Arc::new(SynthFile {
            ino: next_ino(),
            mode: FileType::Regular.mode_bits() | perm,
            generate: Box::new(generate),
            owner,
            syncs: false,
            store: Some(Arc::new(store)),
        })
    }
}

impl Inode for SynthFile {
    fn file_type(&self) -> FileType {
        FileType::Regular
    }
    fn stat(&self) -> Result<Stat, FsError> {
        Ok(owned_stat(self.ino, self.mode, 0, 1, owner_ids(&self.owner)))
    }
    fn open(&self, _: &Context, _: &Arc<Dentry>, flags: OpenFlags) -> Result<Arc<dyn FileOps>, FsError> {
        let store = match (&self.store, flags.writable()) {
            (_, false) => None,
            (Some(s), true) => Some(s.clone()),
            (None, true) => return Err(FsError::PermissionDenied),
        };
        // A file opened only to write is not generated.
        let data = if flags.readable() { (self.generate)()? } else { Vec::new() };
        Ok(Arc::new(Snapshot { stat: self.stat()?, data, syncs: self.syncs, store }))
    }
    fn read_only(&self) -> bool {
        self.store.is_none()
    }
}

/// Contents captured at open.
struct Snapshot {
    stat: Stat,
    data: Vec<u8>,
    syncs: bool,
    store: Option<Store>,
}

impl FileOps for Snapshot {
    fn read(&self, _: &Context, _: &OpenFile, bufs: &[GuestSliceMut<'_>], offset: u64) -> Result<usize, FsError> {
        let mut off = offset as usize;
        let mut n = 0;
        for b in bufs {
            if off >= self.data.len() {
                break;
            }
            let k = b.len().min(self.data.len() - off);
            b.copy_from(&self.data[off..off + k]);
            off += k;
            n += k;
        }
        Ok(n)
    }
    fn write(&self, _: &Context, _: &OpenFile, bufs: &[GuestSlice<'_>], _offset: u64) -> Result<usize, FsError> {
        let store = self.store.as_ref().ok_or(FsError::BadFd)?;
        let mut data = Vec::new();
        for b in bufs {
            let at = data.len();
            data.resize(at + b.len(), 0);
            b.copy_to(&mut data[at..]);
        }
        store(&data)?;
        Ok(data.len())
    }
    fn stat(&self) -> Result<Stat, FsError> {
        Ok(self.stat)
    }
    fn seekable(&self) -> bool {
        true
    }
    fn sync(&self, _data_only: bool) -> Result<(), FsError> {
        if self.syncs { Ok(()) } else { Err(FsError::Invalid) }
    }
}

type LinkTarget = Box<dyn Fn() -> Result<Vec<u8>, FsError> + Send + Sync>;
type MagicTarget = Box<dyn Fn() -> Result<Arc<Dentry>, FsError> + Send + Sync>;

/// A symlink, with a fixed or computed target, optionally magic (resolving
/// to an object directly, as /proc/self/cwd does).
pub struct SynthSymlink {
    ino: u64,
    target: LinkTarget,
    magic: Option<MagicTarget>,
    owner: Option<Owner>,
}

impl SynthSymlink {
    pub fn inode(target: &[u8]) -> Arc<dyn Inode> {
        let t = target.to_vec();
        Arc::new(SynthSymlink { ino: next_ino(), target: Box::new(move || Ok(t.clone())), magic: None, owner: None })
    }

    pub fn computed(target: impl Fn() -> Result<Vec<u8>, FsError> + Send + Sync + 'static) -> Arc<dyn Inode> {
        Arc::new(SynthSymlink { ino: next_ino(), target: Box::new(target), magic: None, owner: None })
    }

    /// A magic link, root's unless `owner` says.
    pub fn magic(
        owner: Option<Owner>,
        target: impl Fn() -> Result<Vec<u8>, FsError> + Send + Sync + 'static,
        object: impl Fn() -> Result<Arc<Dentry>, FsError> + Send + Sync + 'static,
    ) -> Arc<dyn Inode> {
        Arc::new(SynthSymlink { ino: next_ino(), target: Box::new(target), magic: Some(Box::new(object)), owner })
    }
}

impl Inode for SynthSymlink {
    fn file_type(&self) -> FileType {
        FileType::Symlink
    }
    fn stat(&self) -> Result<Stat, FsError> {
        let len = (self.target)().map(|t| t.len() as u64).unwrap_or(0);
        Ok(owned_stat(self.ino, FileType::Symlink.mode_bits() | 0o777, len, 1, owner_ids(&self.owner)))
    }
    fn read_link(&self) -> Result<Vec<u8>, FsError> {
        (self.target)()
    }
    fn magic_link(&self) -> Option<Result<Arc<Dentry>, FsError>> {
        self.magic.as_ref().map(|m| m())
    }
    fn open(&self, _: &Context, _: &Arc<Dentry>, _: OpenFlags) -> Result<Arc<dyn FileOps>, FsError> {
        Err(FsError::Loop)
    }
}

type DeviceOpen = Box<dyn Fn(&Context, OpenFlags) -> Result<Arc<dyn FileOps>, FsError> + Send + Sync>;

/// A device node served by the sentry: stat says what it is, `open` makes
/// the file.
pub struct DeviceNode {
    ino: u64,
    perm: u32,
    rdev: u64,
    open: DeviceOpen,
}

impl DeviceNode {
    pub fn inode(
        perm: u32,
        rdev: u64,
        open: impl Fn(&Context, OpenFlags) -> Result<Arc<dyn FileOps>, FsError> + Send + Sync + 'static,
    ) -> Arc<dyn Inode> {
        Arc::new(DeviceNode { ino: next_ino(), perm, rdev, open: Box::new(open) })
    }

    pub fn stat_for(&self) -> Stat {
        let mut s = synthetic_stat(self.ino, FileType::CharDevice.mode_bits() | self.perm, 0, 1);
        s.rdev = self.rdev;
        s.uid = 0;
        s.gid = 0;
        s
    }
}

impl Inode for DeviceNode {
    fn file_type(&self) -> FileType {
        FileType::CharDevice
    }
    fn stat(&self) -> Result<Stat, FsError> {
        Ok(self.stat_for())
    }
    fn open(&self, ctx: &Context, _: &Arc<Dentry>, flags: OpenFlags) -> Result<Arc<dyn FileOps>, FsError> {
        (self.open)(ctx, flags)
    }
    fn read_only(&self) -> bool {
        false
    }
}
