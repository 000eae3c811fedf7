//! File systems: the VFS the application sees, built from the host root
//! (read-only passthrough) and the sentry's own file systems.

use memory::Frame;

/// Errors of the file-system layer.
#[derive(Debug, Clone, thiserror::Error)]
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
    #[error("interrupted")]
    Interrupted,
    #[error("bad address")]
    Fault,
    #[error("no such device or address")]
    NoDevice,
    #[error("value too large")]
    Overflow,
    /// An error the host reported for a passthrough operation.
    #[error("host: {0}")]
    Host(crate::errno::Errno),
}

impl From<rustix::io::Errno> for FsError {
    fn from(e: rustix::io::Errno) -> Self {
        FsError::Host(crate::errno::Errno::from_host(e))
    }
}

/// How a mapped file is described in /proc/PID/maps.
#[derive(Clone, Debug, Default)]
pub struct MapName {
    pub path: String,
    pub dev: u64,
    pub ino: u64,
}

/// A file whose pages can be mapped into an address space.
pub trait Mappable: Send + Sync {
    /// The frame holding page `index` of the file, with a reference for the
    /// caller; `None` past the end of the file. Bytes of the last page past
    /// the end of the file are zero.
    fn page(&self, index: u64) -> Result<Option<Frame>, FsError>;
    /// Current size in bytes.
    fn size(&self) -> u64;
    /// Name and identity for /proc.
    fn describe(&self) -> MapName;
}
