//! The one place where the sentry's module errors become the errno the
//! application sees.

use crate::errno::Errno;
use crate::fd::FdError;
use crate::fs::FsError;
use crate::loader::LoadError;
use crate::mm::MmError;

/// Why a system call did not return a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SysError {
    /// Return `-errno`.
    Errno(Errno),
    /// The registers already hold what the application must see
    /// (rt_sigreturn, a task that is exiting).
    JustReturn,
}

/// What a system call handler returns.
pub type SysResult = Result<u64, SysError>;

impl From<Errno> for SysError {
    fn from(e: Errno) -> Self {
        SysError::Errno(e)
    }
}

impl From<rustix::io::Errno> for SysError {
    fn from(e: rustix::io::Errno) -> Self {
        SysError::Errno(Errno::from_host(e))
    }
}

impl From<MmError> for Errno {
    fn from(e: MmError) -> Self {
        match e {
            MmError::Unmapped | MmError::Access | MmError::BeyondEof => Errno::EFAULT,
            MmError::NoMemory => Errno::ENOMEM,
            MmError::Invalid => Errno::EINVAL,
            MmError::Exists => Errno::EEXIST,
            MmError::Denied => Errno::EACCES,
            MmError::TooLow => Errno::EPERM,
            MmError::TooLong => Errno::ENAMETOOLONG,
            MmError::Io(e) => e,
            // mmap, mremap and brk's answer; mlock's is ENOMEM.
            MmError::LockLimit => Errno::EAGAIN,
        }
    }
}

impl From<FdError> for Errno {
    fn from(e: FdError) -> Self {
        match e {
            FdError::BadFd => Errno::EBADF,
            FdError::TooMany => Errno::EMFILE,
        }
    }
}

impl From<LoadError> for Errno {
    fn from(e: LoadError) -> Self {
        match e {
            LoadError::Lookup(f) => f.into(),
            LoadError::NotExecutable => Errno::EACCES,
            LoadError::BadFormat => Errno::ENOEXEC,
            LoadError::BadInterpreter => Errno::ELIBBAD,
            LoadError::ShortRead => Errno::EIO,
            LoadError::TooManyInterpreters => Errno::ELOOP,
            LoadError::TooBig => Errno::E2BIG,
            LoadError::NoMemory => Errno::ENOMEM,
            LoadError::Io(f) => f.into(),
            LoadError::TextBusy => Errno::ETXTBSY,
            LoadError::NotPermitted => Errno::EPERM,
        }
    }
}

macro_rules! via_errno {
    ($($t:ty),*) => {
        $(impl From<$t> for SysError {
            fn from(e: $t) -> Self {
                SysError::Errno(e.into())
            }
        })*
    };
}

via_errno!(FsError, MmError, FdError, LoadError);
