//! File systems: the VFS the application sees, built from the host root
//! (read-only passthrough) and the sentry's own file systems.
//!
//! Names are resolved by the sentry itself, one component at a time, over
//! [`Dentry`] chains that remember their parents. `..` therefore never asks
//! the host, symlinks are expanded by the sentry against the sandbox root,
//! and a path can never leave the root, whatever it contains.

pub mod context;
pub mod dentry;
pub mod dev;
pub mod epoll;
pub mod eventfd;
pub mod host;
pub mod inotify;
pub mod lock;
pub mod namei;
pub mod overlay;
pub mod path;
pub mod pipe;
pub mod proc;
pub mod stdio;
pub mod synthetic;
pub mod sys;
pub mod tmpfs;
pub mod write_access;

use std::any::Any;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bitflags::bitflags;
use linux_raw_sys::general as g;
use memory::{GuestSlice, GuestSliceMut};

pub use crate::mm::{MapName, MapPath, Mappable};
pub use context::{Caller, Context};
pub use dentry::{Dentry, Mount};
pub use path::{Lookup, Resolver};

use crate::auth::{Creds, cap};
use crate::errno::Errno;
use crate::mm::MemoryManager;

/// Errors of the file-system layer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FsError {
    #[error("no such file or directory")]
    NotFound,
    #[error("not a directory")]
    NotDirectory,
    #[error("is a directory")]
    IsDirectory,
    #[error("read-only file system")]
    ReadOnly,
    #[error("file exists")]
    Exists,
    #[error("too many levels of symbolic links")]
    Loop,
    #[error("file name too long")]
    NameTooLong,
    #[error("permission denied")]
    PermissionDenied,
    #[error("invalid argument")]
    Invalid,
    #[error("directory not empty")]
    NotEmpty,
    #[error("bad file descriptor")]
    BadFd,
    #[error("illegal seek")]
    NotSeekable,
    #[error("inappropriate ioctl for device")]
    NotTty,
    #[error("operation not supported")]
    NotSupported,
    #[error("would block")]
    WouldBlock,
    #[error("broken pipe")]
    BrokenPipe,
    /// A signal cut a blocking call short; it restarts or fails with EINTR
    /// depending on the handler.
    #[error("interrupted")]
    Interrupted,
    #[error("bad address")]
    Fault,
    #[error("no such device or address")]
    NoDevice,
    #[error("value too large")]
    Overflow,
    #[error("operation not permitted")]
    NotPermitted,
    #[error("no space left on device")]
    NoSpace,
    #[error("invalid cross-device link")]
    CrossDevice,
    #[error("device or resource busy")]
    Busy,
    #[error("no data available")]
    NoData,
    #[error("text file busy")]
    TextBusy,
    #[error("too many links")]
    TooManyLinks,
    #[error("result out of range")]
    Range,
    #[error("out of memory")]
    NoMemory,
    #[error("resource deadlock would occur")]
    Deadlock,
    /// An error the host reported for a passthrough operation.
    #[error("host: {0}")]
    Host(Errno),
}

impl From<rustix::io::Errno> for FsError {
    fn from(e: rustix::io::Errno) -> Self {
        FsError::from_errno(Errno::from_host(e))
    }
}

impl FsError {
    /// The variant for a host error number, so callers can match on it.
    pub fn from_errno(e: Errno) -> FsError {
        match e {
            Errno::ENOENT => FsError::NotFound,
            Errno::ENOTDIR => FsError::NotDirectory,
            Errno::EISDIR => FsError::IsDirectory,
            Errno::EROFS => FsError::ReadOnly,
            Errno::EEXIST => FsError::Exists,
            Errno::ELOOP => FsError::Loop,
            Errno::ENAMETOOLONG => FsError::NameTooLong,
            Errno::EACCES => FsError::PermissionDenied,
            Errno::EINVAL => FsError::Invalid,
            Errno::ENOTEMPTY => FsError::NotEmpty,
            Errno::EBADF => FsError::BadFd,
            Errno::ESPIPE => FsError::NotSeekable,
            Errno::ENOTTY => FsError::NotTty,
            Errno::EAGAIN => FsError::WouldBlock,
            Errno::EPIPE => FsError::BrokenPipe,
            Errno::EINTR => FsError::Interrupted,
            Errno::EFAULT => FsError::Fault,
            Errno::ENXIO => FsError::NoDevice,
            Errno::EOVERFLOW => FsError::Overflow,
            Errno::EPERM => FsError::NotPermitted,
            Errno::ENOSPC => FsError::NoSpace,
            Errno::EXDEV => FsError::CrossDevice,
            Errno::EBUSY => FsError::Busy,
            Errno::ENODATA => FsError::NoData,
            Errno::ETXTBSY => FsError::TextBusy,
            Errno::EMLINK => FsError::TooManyLinks,
            Errno::ERANGE => FsError::Range,
            Errno::ENOMEM => FsError::NoMemory,
            Errno::EDEADLK => FsError::Deadlock,
            other => FsError::Host(other),
        }
    }
}

impl From<FsError> for Errno {
    fn from(e: FsError) -> Self {
        match e {
            FsError::NotFound => Errno::ENOENT,
            FsError::NotDirectory => Errno::ENOTDIR,
            FsError::IsDirectory => Errno::EISDIR,
            FsError::ReadOnly => Errno::EROFS,
            FsError::Exists => Errno::EEXIST,
            FsError::Loop => Errno::ELOOP,
            FsError::NameTooLong => Errno::ENAMETOOLONG,
            FsError::PermissionDenied => Errno::EACCES,
            FsError::Invalid => Errno::EINVAL,
            FsError::NotEmpty => Errno::ENOTEMPTY,
            FsError::BadFd => Errno::EBADF,
            FsError::NotSeekable => Errno::ESPIPE,
            FsError::NotTty => Errno::ENOTTY,
            FsError::NotSupported => Errno::EOPNOTSUPP,
            FsError::WouldBlock => Errno::EAGAIN,
            FsError::BrokenPipe => Errno::EPIPE,
            FsError::Interrupted => Errno::ERESTARTSYS,
            FsError::Fault => Errno::EFAULT,
            FsError::NoDevice => Errno::ENXIO,
            FsError::Overflow => Errno::EOVERFLOW,
            FsError::NotPermitted => Errno::EPERM,
            FsError::NoSpace => Errno::ENOSPC,
            FsError::CrossDevice => Errno::EXDEV,
            FsError::Busy => Errno::EBUSY,
            FsError::NoData => Errno::ENODATA,
            FsError::TextBusy => Errno::ETXTBSY,
            FsError::TooManyLinks => Errno::EMLINK,
            FsError::Range => Errno::ERANGE,
            FsError::NoMemory => Errno::ENOMEM,
            FsError::Deadlock => Errno::EDEADLK,
            FsError::Host(e) => e,
        }
    }
}

impl From<FsError> for crate::mm::MmError {
    fn from(e: FsError) -> Self {
        match e {
            FsError::NoMemory | FsError::Host(Errno::ENOMEM) => crate::mm::MmError::NoMemory,
            e => crate::mm::MmError::Io(e.into()),
        }
    }
}

impl From<crate::mm::MmError> for FsError {
    fn from(_: crate::mm::MmError) -> Self {
        FsError::Fault
    }
}

/// The type of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileType {
    Regular,
    Directory,
    Symlink,
    CharDevice,
    BlockDevice,
    Fifo,
    Socket,
}

impl FileType {
    /// The S_IF* bits.
    pub fn mode_bits(self) -> u32 {
        match self {
            FileType::Regular => g::S_IFREG,
            FileType::Directory => g::S_IFDIR,
            FileType::Symlink => g::S_IFLNK,
            FileType::CharDevice => g::S_IFCHR,
            FileType::BlockDevice => g::S_IFBLK,
            FileType::Fifo => g::S_IFIFO,
            FileType::Socket => g::S_IFSOCK,
        }
    }

    /// From S_IF* bits.
    pub fn from_mode(mode: u32) -> FileType {
        match mode & g::S_IFMT {
            g::S_IFDIR => FileType::Directory,
            g::S_IFLNK => FileType::Symlink,
            g::S_IFCHR => FileType::CharDevice,
            g::S_IFBLK => FileType::BlockDevice,
            g::S_IFIFO => FileType::Fifo,
            g::S_IFSOCK => FileType::Socket,
            _ => FileType::Regular,
        }
    }

    /// The d_type of a directory entry.
    pub fn dirent_type(self) -> u8 {
        (match self {
            FileType::Regular => g::DT_REG,
            FileType::Directory => g::DT_DIR,
            FileType::Symlink => g::DT_LNK,
            FileType::CharDevice => g::DT_CHR,
            FileType::BlockDevice => g::DT_BLK,
            FileType::Fifo => g::DT_FIFO,
            FileType::Socket => g::DT_SOCK,
        }) as u8
    }
}

/// A point in time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Timespec {
    pub sec: i64,
    pub nsec: u32,
}

impl Timespec {
    pub fn now() -> Timespec {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::Realtime);
        Timespec { sec: t.tv_sec, nsec: t.tv_nsec as u32 }
    }
}

/// File metadata.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stat {
    pub dev: u64,
    pub ino: u64,
    pub mode: u32,
    pub nlink: u64,
    pub uid: u32,
    pub gid: u32,
    pub rdev: u64,
    pub size: u64,
    pub blksize: u32,
    pub blocks: u64,
    pub atime: Timespec,
    pub mtime: Timespec,
    pub ctime: Timespec,
    pub btime: Option<Timespec>,
    /// Device major/minor of `dev`, as statx reports them.
    pub mount_id: u64,
}

impl Stat {
    pub fn file_type(&self) -> FileType {
        FileType::from_mode(self.mode)
    }

    /// As the x86_64 `struct stat`.
    pub fn to_abi(&self) -> g::stat {
        let mut s = <g::stat as crate::abi::Pod>::zeroed();
        s.st_dev = self.dev as _;
        s.st_ino = self.ino as _;
        s.st_nlink = self.nlink as _;
        s.st_mode = self.mode as _;
        s.st_uid = self.uid as _;
        s.st_gid = self.gid as _;
        s.st_rdev = self.rdev as _;
        s.st_size = self.size as _;
        s.st_blksize = self.blksize as _;
        s.st_blocks = self.blocks as _;
        s.st_atime = self.atime.sec as _;
        s.st_atime_nsec = self.atime.nsec as _;
        s.st_mtime = self.mtime.sec as _;
        s.st_mtime_nsec = self.mtime.nsec as _;
        s.st_ctime = self.ctime.sec as _;
        s.st_ctime_nsec = self.ctime.nsec as _;
        s
    }

    /// As `struct statx`, with the fields `mask` asked for (all are filled;
    /// the mask says which are valid).
    pub fn to_statx(&self) -> g::statx {
        let mut s = <g::statx as crate::abi::Pod>::zeroed();
        let ts = |t: Timespec| {
            let mut x = <g::statx_timestamp as crate::abi::Pod>::zeroed();
            x.tv_sec = t.sec;
            x.tv_nsec = t.nsec;
            x
        };
        s.stx_mask = g::STATX_BASIC_STATS | if self.btime.is_some() { g::STATX_BTIME } else { 0 };
        s.stx_blksize = self.blksize;
        s.stx_nlink = self.nlink as u32;
        s.stx_uid = self.uid;
        s.stx_gid = self.gid;
        s.stx_mode = self.mode as u16;
        s.stx_ino = self.ino;
        s.stx_size = self.size;
        s.stx_blocks = self.blocks;
        s.stx_atime = ts(self.atime);
        s.stx_mtime = ts(self.mtime);
        s.stx_ctime = ts(self.ctime);
        if let Some(b) = self.btime {
            s.stx_btime = ts(b);
        }
        s.stx_rdev_major = dev_major(self.rdev);
        s.stx_rdev_minor = dev_minor(self.rdev);
        s.stx_dev_major = dev_major(self.dev);
        s.stx_dev_minor = dev_minor(self.dev);
        s
    }
}

/// Major number of an encoded device number.
pub fn dev_major(d: u64) -> u32 {
    (((d >> 32) & 0xffff_f000) | ((d >> 8) & 0xfff)) as u32
}

/// Minor number of an encoded device number.
pub fn dev_minor(d: u64) -> u32 {
    (((d >> 12) & 0xffff_ff00) | (d & 0xff)) as u32
}

/// Encodes a device number.
pub fn makedev(major: u32, minor: u32) -> u64 {
    let (ma, mi) = (major as u64, minor as u64);
    ((ma & 0xffff_f000) << 32) | ((ma & 0xfff) << 8) | ((mi & 0xffff_ff00) << 12) | (mi & 0xff)
}

bitflags! {
    /// open(2) flags.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct OpenFlags: u32 {
        const WRONLY = g::O_WRONLY;
        const RDWR = g::O_RDWR;
        const CREAT = g::O_CREAT;
        const EXCL = g::O_EXCL;
        const NOCTTY = g::O_NOCTTY;
        const TRUNC = g::O_TRUNC;
        const APPEND = g::O_APPEND;
        const NONBLOCK = g::O_NONBLOCK;
        const DSYNC = g::O_DSYNC;
        const ASYNC = g::FASYNC;
        const DIRECT = g::O_DIRECT;
        const LARGEFILE = g::O_LARGEFILE;
        const DIRECTORY = g::O_DIRECTORY;
        const NOFOLLOW = g::O_NOFOLLOW;
        const NOATIME = g::O_NOATIME;
        const CLOEXEC = g::O_CLOEXEC;
        const SYNC = g::O_SYNC;
        const PATH = g::O_PATH;
        const TMPFILE = g::__O_TMPFILE;
    }
}

impl OpenFlags {
    /// The access mode bits.
    pub fn access_mode(self) -> u32 {
        self.bits() & g::O_ACCMODE
    }
    pub fn readable(self) -> bool {
        !self.contains(OpenFlags::PATH) && self.access_mode() != g::O_WRONLY
    }
    pub fn writable(self) -> bool {
        !self.contains(OpenFlags::PATH) && matches!(self.access_mode(), g::O_WRONLY | g::O_RDWR)
    }
    /// True if opening with these flags would modify the file system.
    pub fn modifies(self) -> bool {
        self.writable() || self.intersects(OpenFlags::CREAT | OpenFlags::TRUNC | OpenFlags::TMPFILE)
    }
    /// Flags F_GETFL reports and F_SETFL may change.
    pub const STATUS: OpenFlags = OpenFlags::APPEND
        .union(OpenFlags::NONBLOCK)
        .union(OpenFlags::ASYNC)
        .union(OpenFlags::DIRECT)
        .union(OpenFlags::NOATIME);
}

/// File-system statistics (statfs).
#[derive(Clone, Copy, Debug, Default)]
pub struct StatFs {
    pub fs_type: u64,
    pub block_size: u64,
    pub blocks: u64,
    pub blocks_free: u64,
    pub blocks_avail: u64,
    pub files: u64,
    pub files_free: u64,
    pub name_max: u64,
    pub flags: u64,
}

/// Downcasting of trait objects: how a file system recognises its own
/// inodes among `dyn Inode`s (rename, link), and how the syscall layer tells
/// file kinds apart (a pipe, an epoll instance) among `dyn FileOps`.
pub trait AsAny: Any + Send + Sync {
    fn as_any(&self) -> &dyn Any;
}

impl<T: Any + Send + Sync> AsAny for T {
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Attributes to change (Linux's `struct iattr`): chmod, chown, truncate
/// and the time calls. Times are resolved (UTIME_NOW to the clock) before a
/// file system sees them; every change also sets the change time.
#[derive(Clone, Copy, Debug, Default)]
pub struct SetAttr {
    /// Permission bits and S_ISUID/S_ISGID/S_ISVTX (never the type).
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: Option<Timespec>,
    pub mtime: Option<Timespec>,
}

impl SetAttr {
    pub fn is_empty(&self) -> bool {
        self.mode.is_none()
            && self.uid.is_none()
            && self.gid.is_none()
            && self.size.is_none()
            && self.atime.is_none()
            && self.mtime.is_none()
    }
}

bitflags! {
    /// renameat2(2) flags.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct RenameFlags: u32 {
        const NOREPLACE = 1;
        const EXCHANGE = 2;
        const WHITEOUT = 4;
    }
}

/// What a new object is: the type and its permission bits (umask already
/// applied), its owner, and for devices the device number.
#[derive(Clone, Copy, Debug)]
pub struct NewNode {
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub rdev: u64,
}

impl NewNode {
    pub fn file_type(&self) -> FileType {
        FileType::from_mode(self.mode)
    }
}

/// An object in a file system.
///
/// The operations that change a directory are asked of the directory, with
/// the name in it; the VFS has already resolved the names, checked the
/// caller's permissions (search, write, the sticky bit) and that the mount
/// is writable. What Linux does for an inode without the operation is the
/// default: EPERM for most, EACCES for create.
pub trait Inode: AsAny {
    /// The file's type; never changes.
    fn file_type(&self) -> FileType;
    /// Current metadata.
    fn stat(&self) -> Result<Stat, FsError>;
    /// The inode number, which never changes; inodes that learned it when
    /// they were made save a stat.
    fn ino(&self) -> Result<u64, FsError> {
        self.stat().map(|s| s.ino)
    }
    /// The child called `name` (never "." or "..").
    fn lookup(&self, _name: &[u8]) -> Result<Arc<dyn Inode>, FsError> {
        Err(FsError::NotDirectory)
    }
    /// True if the names in this directory change only through this
    /// inode's own operations, so that a lookup may be remembered: file
    /// systems held by the sentry. Not for /proc (processes come and go) or
    /// host directories others may change.
    fn stable_names(&self) -> bool {
        false
    }
    /// The target of a symlink.
    fn read_link(&self) -> Result<Vec<u8>, FsError> {
        Err(FsError::Invalid)
    }
    /// Links of /proc that lead straight to an object (/proc/self/fd/N,
    /// /proc/self/cwd, ...), bypassing the link text.
    fn magic_link(&self) -> Option<Result<Arc<Dentry>, FsError>> {
        None
    }
    /// Opens the object. `dentry` is where it was found.
    fn open(&self, ctx: &Context, dentry: &Arc<Dentry>, flags: OpenFlags) -> Result<Arc<dyn FileOps>, FsError>;
    /// For a character device node that is only a name and a number (made
    /// by mknod in a tmpfs or an overlay): the number, by which the
    /// kernel's table of devices finds what serves it when it is opened,
    /// as Linux's chrdev_open does. None for every other object, devices
    /// whose file system serves them itself included.
    fn device_number(&self) -> Option<u64> {
        None
    }
    /// May `creds` read, write or execute (search) the object, for mode
    /// bits [`MAY_READ`], [`MAY_WRITE`], [`MAY_EXEC`]: the object's owner
    /// and mode against the credentials. A read-only mount is the caller's
    /// to check first.
    fn access(&self, creds: &Creds, mode: u32) -> Result<(), FsError> {
        generic_permission(&self.stat()?, creds, mode)
    }
    /// statfs(2).
    fn statfs(&self) -> Result<StatFs, FsError> {
        Ok(StatFs { block_size: 4096, name_max: 255, ..Default::default() })
    }
    /// Makes a regular file `name` in this directory (open with O_CREAT).
    fn create(&self, _ctx: &Context, _name: &[u8], _node: NewNode) -> Result<Arc<dyn Inode>, FsError> {
        Err(FsError::PermissionDenied)
    }
    /// Makes a directory.
    fn mkdir(&self, _ctx: &Context, _name: &[u8], _node: NewNode) -> Result<Arc<dyn Inode>, FsError> {
        Err(FsError::NotPermitted)
    }
    /// Makes a device, FIFO or socket node, or a regular file (mknod).
    fn mknod(&self, _ctx: &Context, _name: &[u8], _node: NewNode) -> Result<Arc<dyn Inode>, FsError> {
        Err(FsError::NotPermitted)
    }
    /// Makes a symlink to `target`.
    fn symlink(&self, _ctx: &Context, _name: &[u8], _target: &[u8], _node: NewNode) -> Result<Arc<dyn Inode>, FsError> {
        Err(FsError::NotPermitted)
    }
    /// Adds `name` as another link to `inode`, an inode of the same mount.
    fn link(&self, _ctx: &Context, _name: &[u8], _inode: &Arc<dyn Inode>) -> Result<(), FsError> {
        Err(FsError::NotPermitted)
    }
    /// Removes the non-directory `name`.
    fn unlink(&self, _ctx: &Context, _name: &[u8]) -> Result<(), FsError> {
        Err(FsError::NotPermitted)
    }
    /// Removes the empty directory `name`.
    fn rmdir(&self, _ctx: &Context, _name: &[u8]) -> Result<(), FsError> {
        Err(FsError::NotPermitted)
    }
    /// Moves `old_name` of this directory to `new_name` of `new_dir` (a
    /// directory of the same mount), replacing what is there atomically
    /// unless `flags` say otherwise. The VFS has checked the types of the
    /// two names agree and that a directory is not moved below itself.
    fn rename(
        &self,
        _ctx: &Context,
        _old_name: &[u8],
        _new_dir: &Arc<dyn Inode>,
        _new_name: &[u8],
        _flags: RenameFlags,
    ) -> Result<(), FsError> {
        Err(FsError::NotPermitted)
    }
    /// An unnamed regular file in this directory's file system (O_TMPFILE);
    /// `linkable` unless O_EXCL forbids ever giving it a name.
    fn tmpfile(&self, _ctx: &Context, _node: NewNode, _linkable: bool) -> Result<Arc<dyn Inode>, FsError> {
        Err(FsError::NotSupported)
    }
    /// Changes attributes; the VFS has checked the caller may.
    fn setattr(&self, _ctx: &Context, _attr: &SetAttr) -> Result<(), FsError> {
        Err(FsError::NotPermitted)
    }
    /// The value of extended attribute `name` (with its namespace prefix).
    fn getxattr(&self, _name: &[u8]) -> Result<Vec<u8>, FsError> {
        Err(FsError::NoData)
    }
    /// Sets an extended attribute; `flags` are XATTR_CREATE/XATTR_REPLACE.
    fn setxattr(&self, _ctx: &Context, _name: &[u8], _value: &[u8], _flags: u32) -> Result<(), FsError> {
        Err(FsError::NotSupported)
    }
    /// The names of the extended attributes.
    fn listxattr(&self) -> Result<Vec<Vec<u8>>, FsError> {
        Ok(Vec::new())
    }
    fn removexattr(&self, _ctx: &Context, _name: &[u8]) -> Result<(), FsError> {
        Err(FsError::NotSupported)
    }
    /// True if the file system refuses every modification.
    fn read_only(&self) -> bool {
        true
    }
    /// Drops data the file system keeps only as a cache (for an exact
    /// account of memory at the end of a sandbox).
    fn release_caches(&self) {}
}

/// Permission bits, as access(2)'s R_OK/W_OK/X_OK.
pub const MAY_EXEC: u32 = 1;
pub const MAY_WRITE: u32 = 2;
pub const MAY_READ: u32 = 4;

/// Linux's generic_permission(): the owner's, group's or others' bits,
/// whichever class `creds` falls in first, then the capabilities that
/// override them. CAP_DAC_OVERRIDE allows anything but executing a
/// non-directory nobody may execute; CAP_DAC_READ_SEARCH allows reading
/// any file and reading and searching any directory.
pub fn generic_permission(st: &Stat, creds: &Creds, mask: u32) -> Result<(), FsError> {
    let mask = mask & (MAY_READ | MAY_WRITE | MAY_EXEC);
    let bits = if st.uid == creds.uid.fs {
        st.mode >> 6
    } else if creds.in_group(st.gid) {
        st.mode >> 3
    } else {
        st.mode
    };
    if mask & !bits & 7 == 0 {
        return Ok(());
    }
    if st.file_type() == FileType::Directory {
        if mask & MAY_WRITE == 0 && creds.has(cap::DAC_READ_SEARCH) {
            return Ok(());
        }
        if creds.has(cap::DAC_OVERRIDE) {
            return Ok(());
        }
        return Err(FsError::PermissionDenied);
    }
    if (mask & MAY_EXEC == 0 || st.mode & 0o111 != 0) && creds.has(cap::DAC_OVERRIDE) {
        return Ok(());
    }
    if mask == MAY_READ && creds.has(cap::DAC_READ_SEARCH) {
        return Ok(());
    }
    Err(FsError::PermissionDenied)
}

/// May `creds` look names up in directory `dir` (search permission)?
/// Asked for every directory a path walks through.
pub fn may_lookup(dir: &Dentry, creds: &Creds) -> Result<(), FsError> {
    // The capabilities that allow any search spare a stat of each
    // directory.
    if creds.has(cap::DAC_READ_SEARCH) || creds.has(cap::DAC_OVERRIDE) {
        return Ok(());
    }
    dir.inode.access(creds, MAY_EXEC)
}

/// The permission check of opening or asking access(2) about `d`: EROFS
/// for writing a file, directory or symlink of a read-only mount, then the
/// object's own check.
pub fn permission(d: &Dentry, creds: &Creds, mask: u32) -> Result<(), FsError> {
    if mask & MAY_WRITE != 0
        && d.mount.read_only()
        && matches!(d.file_type(), FileType::Regular | FileType::Directory | FileType::Symlink)
    {
        return Err(FsError::ReadOnly);
    }
    // CAP_DAC_OVERRIDE allows anything short of executing, whatever the
    // mode: no need to ask for it.
    if mask & MAY_EXEC == 0 && creds.has(cap::DAC_OVERRIDE) {
        return Ok(());
    }
    d.inode.access(creds, mask)
}

/// How an open file behaves.
pub trait FileOps: AsAny {
    /// Reads at `offset` into `bufs` (application memory, or a sentry
    /// buffer standing in for it).
    fn read(
        &self,
        _ctx: &Context,
        _file: &OpenFile,
        _bufs: &[GuestSliceMut<'_>],
        _offset: u64,
    ) -> Result<usize, FsError> {
        Err(FsError::Invalid)
    }
    /// Writes `bufs` at `offset`.
    fn write(
        &self,
        _ctx: &Context,
        _file: &OpenFile,
        _bufs: &[GuestSlice<'_>],
        _offset: u64,
    ) -> Result<usize, FsError> {
        Err(FsError::Invalid)
    }
    /// Writes `bufs` at the end of the file (O_APPEND), finding the end
    /// and writing under one lock so appenders never overwrite each other;
    /// returns the count and the new end.
    fn write_append(&self, ctx: &Context, file: &OpenFile, bufs: &[GuestSlice<'_>]) -> Result<(usize, u64), FsError> {
        let end = self.stat()?.size;
        let n = self.write(ctx, file, bufs, end)?;
        Ok((n, end + n as u64))
    }
    /// lseek's SEEK_DATA (or with `hole`, SEEK_HOLE) from `offset`, for
    /// files that know where their holes are; None: the whole file is data.
    fn seek_data(&self, _offset: u64, _hole: bool) -> Option<Result<u64, FsError>> {
        None
    }
    /// fallocate(2) on an open regular file.
    fn fallocate(&self, _mode: u32, _offset: u64, _len: u64) -> Result<(), FsError> {
        Err(FsError::NotSupported)
    }
    /// The fewest bytes a `read` or `write` of this file may ask to move;
    /// fewer, even none, is EINVAL (eventfd's 8-byte counter). A vectored
    /// call of no bytes at all moves nothing and returns 0 first, as in
    /// Linux's vfs_readv.
    fn smallest_transfer(&self) -> usize {
        0
    }
    /// True if a vectored write is a `write` per application buffer, each
    /// on its own, as Linux does for files with no write_iter (eventfd):
    /// the call ends at the first that fails or falls short.
    fn writes_each_buffer(&self) -> bool {
        false
    }
    /// Metadata of the open object.
    fn stat(&self) -> Result<Stat, FsError>;
    /// True if reads and writes use the file offset (regular files and
    /// directories); false for streams.
    fn seekable(&self) -> bool {
        false
    }
    /// True for files whose offset means nothing (the memory devices): reads
    /// and writes leave it alone and lseek always answers 0, as Linux's
    /// null_lseek does. Such files are still `seekable` (pread works).
    fn ignores_offset(&self) -> bool {
        false
    }
    /// Fills `buf` with linux_dirent64 records from the directory position
    /// `*pos`, advancing it; returns bytes written.
    fn getdents(&self, _pos: &mut u64, _buf: &mut [u8]) -> Result<usize, FsError> {
        Err(FsError::NotDirectory)
    }
    /// Handles an ioctl. `mm` reaches the argument in application memory.
    fn ioctl(
        &self,
        _ctx: &Context,
        _file: &OpenFile,
        _mm: &MemoryManager,
        _cmd: u32,
        _arg: u64,
    ) -> Result<u64, FsError> {
        Err(FsError::NotTty)
    }
    /// The pages of the file, if it can be mapped.
    fn mappable(&self) -> Option<Arc<dyn Mappable>> {
        None
    }
    /// Bytes that can be read without blocking (FIONREAD), if known.
    fn readable_bytes(&self) -> Option<u64> {
        None
    }
    /// fsync (`data_only` for fdatasync): files whose Linux counterparts
    /// have no fsync operation (pipes, devices, procfs, anonymous files)
    /// refuse it with EINVAL.
    fn sync(&self, _data_only: bool) -> Result<(), FsError> {
        Err(FsError::Invalid)
    }
    /// True if mapping the file gives anonymous memory (/dev/zero).
    fn anonymous_mapping(&self) -> bool {
        false
    }
    /// Repositions a file that keeps its own offset on the host (streams
    /// passed through from the caller). Offset-based files never get here.
    fn seek_stream(&self, _offset: i64, _whence: u32) -> Result<u64, FsError> {
        Err(FsError::NotSeekable)
    }
    /// Readiness for poll/select: POLLIN, POLLOUT, POLLHUP, POLLERR bits.
    /// Files that never block are always ready.
    fn poll(&self) -> u32 {
        POLLIN | POLLOUT
    }
    /// Where a poller waits for the readiness to change, for files served by
    /// the sentry.
    fn poll_queue(&self) -> Option<&crate::waiter::WaitQueue> {
        None
    }
    /// The host descriptor behind a passed-through file, polled in the host.
    fn host_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        None
    }
    /// How /proc/PID/fd names a file that has no path (`anon_inode:[eventfd]`).
    fn anon_name(&self) -> Option<&'static str> {
        None
    }
    /// Lines /proc/PID/fdinfo shows for this kind of file after the common
    /// ones (a timerfd's clock and setting, a signalfd's mask).
    fn fdinfo(&self) -> String {
        String::new()
    }
}

impl dyn FileOps {
    /// The file as its concrete kind, if it is a `T` (a pipe end, an epoll
    /// instance).
    pub fn downcast_ref<T: FileOps>(&self) -> Option<&T> {
        self.as_any().downcast_ref::<T>()
    }
}

impl dyn Inode {
    /// The inode as its file system's own type, if it is a `T`.
    pub fn downcast_ref<T: Inode>(&self) -> Option<&T> {
        self.as_any().downcast_ref::<T>()
    }
}

/// An O_PATH descriptor of any file system: a name, nothing more. The
/// file system's own open is never asked (Linux's do_o_path), so a
/// symlink, a FIFO or a device with no driver all have one.
pub struct PathFile {
    pub inode: Arc<dyn Inode>,
}

impl FileOps for PathFile {
    fn stat(&self) -> Result<Stat, FsError> {
        self.inode.stat()
    }
    fn read(&self, _: &Context, _: &OpenFile, _: &[GuestSliceMut<'_>], _: u64) -> Result<usize, FsError> {
        Err(FsError::BadFd)
    }
    fn write(&self, _: &Context, _: &OpenFile, _: &[GuestSlice<'_>], _: u64) -> Result<usize, FsError> {
        Err(FsError::BadFd)
    }
}

/// poll(2) event bits.
pub const POLLIN: u32 = linux_raw_sys::general::POLLIN;
pub const POLLPRI: u32 = linux_raw_sys::general::POLLPRI;
pub const POLLOUT: u32 = linux_raw_sys::general::POLLOUT;
pub const POLLERR: u32 = linux_raw_sys::general::POLLERR;
pub const POLLHUP: u32 = linux_raw_sys::general::POLLHUP;
pub const POLLNVAL: u32 = linux_raw_sys::general::POLLNVAL;
pub const POLLRDNORM: u32 = linux_raw_sys::general::POLLRDNORM;
pub const POLLWRNORM: u32 = linux_raw_sys::general::POLLWRNORM;

/// Who gets a file's I/O signals (F_SETOWN, F_SETOWN_EX).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FileOwner {
    /// One thread (F_OWNER_TID); with id 0, nobody, as a new file has.
    #[default]
    Thread,
    /// A process (F_OWNER_PID).
    Process,
    /// A process group (F_OWNER_PGRP).
    Group,
}

/// What identifies a file across separate opens and processes: its mount
/// and inode number. Locks and inotify watches are kept by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FileKey {
    pub mount: u64,
    pub ino: u64,
}

impl Dentry {
    /// The identity of the file this name leads to.
    pub fn key(&self) -> FileKey {
        FileKey { mount: self.mount.id, ino: self.ino() }
    }
}

/// An open file description: shared by descriptors made by dup and fork.
pub struct OpenFile {
    /// Unique for the life of the sentry: the owner of the description's
    /// flock and OFD locks.
    id: u64,
    /// Set once the description took a flock or OFD lock, which its last
    /// reference must release.
    has_locks: AtomicBool,
    pub ops: Arc<dyn FileOps>,
    /// Where the file was opened from (for /proc/self/fd and fchdir).
    pub dentry: Option<Arc<Dentry>>,
    flags: AtomicU32,
    pub offset: Mutex<u64>,
    /// The owner's kind and id (0: none).
    owner: Mutex<(FileOwner, i32)>,
    /// The signal F_SETSIG chose (0: SIGIO).
    owner_signal: AtomicU32,
    /// Held by a regular file opened for writing by name: no address space
    /// may run it meanwhile.
    write_access: std::sync::OnceLock<write_access::WriteAccess>,
}

impl OpenFile {
    pub fn new(ops: Arc<dyn FileOps>, dentry: Option<Arc<Dentry>>, flags: OpenFlags) -> Arc<Self> {
        let kept =
            flags & !(OpenFlags::CREAT | OpenFlags::EXCL | OpenFlags::NOCTTY | OpenFlags::TRUNC | OpenFlags::CLOEXEC);
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        Arc::new(OpenFile {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            has_locks: AtomicBool::new(false),
            ops,
            dentry,
            flags: AtomicU32::new(kept.bits()),
            offset: Mutex::new(0),
            owner: Mutex::new((FileOwner::Thread, 0)),
            owner_signal: AtomicU32::new(0),
            write_access: std::sync::OnceLock::new(),
        })
    }

    /// Keeps the right to write the file for the life of the description.
    pub fn hold_write_access(&self, access: write_access::WriteAccess) {
        let _ = self.write_access.set(access);
    }

    /// The owner: its kind and id, 0 for none.
    pub fn owner(&self) -> (FileOwner, i32) {
        *self.owner.lock().unwrap()
    }

    pub fn set_owner(&self, kind: FileOwner, id: i32) {
        *self.owner.lock().unwrap() = (kind, id);
    }

    /// F_GETSIG.
    pub fn owner_signal(&self) -> u32 {
        self.owner_signal.load(Ordering::Relaxed)
    }

    /// F_SETSIG.
    pub fn set_owner_signal(&self, sig: u32) {
        self.owner_signal.store(sig, Ordering::Relaxed);
    }

    /// Flags as F_GETFL reports them.
    pub fn flags(&self) -> OpenFlags {
        OpenFlags::from_bits_retain(self.flags.load(Ordering::Relaxed))
    }

    /// F_SETFL: changes the status flags only.
    pub fn set_status_flags(&self, new: OpenFlags) {
        let cur = self.flags();
        let v = (cur & !OpenFlags::STATUS) | (new & OpenFlags::STATUS);
        self.flags.store(v.bits(), Ordering::Relaxed);
    }

    pub fn readable(&self) -> bool {
        self.flags().readable()
    }

    pub fn writable(&self) -> bool {
        self.flags().writable()
    }

    /// The sandbox path the file was opened at.
    pub fn path(&self) -> Option<Vec<u8>> {
        self.dentry.as_ref().map(|d| d.path())
    }

    /// The id that owns this description's flock and OFD locks.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The identity of the file: its mount and inode, or for a file opened
    /// by no name (a pipe, an anonymous file) what its stat reports.
    pub fn key(&self) -> Result<FileKey, FsError> {
        match &self.dentry {
            Some(d) => Ok(d.key()),
            None => {
                let st = self.ops.stat()?;
                // Device numbers never reach the top bit, mount ids neither:
                // the two spaces cannot meet.
                Ok(FileKey { mount: (1 << 63) | st.dev, ino: st.ino })
            }
        }
    }

    /// Notes that the description now holds a flock or OFD lock.
    pub fn note_locked(&self) {
        self.has_locks.store(true, Ordering::Relaxed);
    }
}

/// The last reference to a description went (Linux's __fput): its locks
/// go, and watchers hear it closed.
impl Drop for OpenFile {
    fn drop(&mut self) {
        if self.has_locks.load(Ordering::Relaxed)
            && let Ok(key) = self.key()
        {
            lock::release_file(key, self.id);
        }
        if let Some(d) = &self.dentry
            && !self.flags().contains(OpenFlags::PATH)
        {
            let mask = if self.writable() { inotify::IN_CLOSE_WRITE } else { inotify::IN_CLOSE_NOWRITE };
            inotify::notify_file(d, mask);
        }
    }
}
