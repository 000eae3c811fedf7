//! Error numbers as the application sees them.

use std::fmt;

/// A Linux error number. Values from 512 up are the kernel-internal restart
/// codes; they are turned into EINTR or a restart before the application can
/// see them.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Errno(u16);

macro_rules! errnos {
    ($($name:ident),* $(,)?) => {
        impl Errno {
            $(pub const $name: Errno = Errno(linux_raw_sys::errno::$name as u16);)*
        }
    };
}

errnos!(
    EPERM,
    ENOENT,
    ESRCH,
    EINTR,
    EIO,
    ENXIO,
    E2BIG,
    ENOEXEC,
    EBADF,
    ECHILD,
    EAGAIN,
    ENOMEM,
    EACCES,
    EFAULT,
    EBUSY,
    EEXIST,
    EXDEV,
    ENODEV,
    ENOTDIR,
    EISDIR,
    EINVAL,
    ENFILE,
    EMFILE,
    ENOTTY,
    ETXTBSY,
    EFBIG,
    ENOSPC,
    ESPIPE,
    EROFS,
    EMLINK,
    EPIPE,
    EDOM,
    ERANGE,
    EDEADLK,
    ENAMETOOLONG,
    ENOLCK,
    ENOSYS,
    ENOTEMPTY,
    ELOOP,
    ENOMSG,
    EIDRM,
    ENODATA,
    ETIME,
    EOVERFLOW,
    EBADFD,
    ELIBBAD,
    EILSEQ,
    ENOTSOCK,
    EDESTADDRREQ,
    EMSGSIZE,
    EPROTOTYPE,
    ENOPROTOOPT,
    EPROTONOSUPPORT,
    ESOCKTNOSUPPORT,
    EOPNOTSUPP,
    EAFNOSUPPORT,
    EADDRINUSE,
    EADDRNOTAVAIL,
    ENETUNREACH,
    ECONNABORTED,
    ECONNRESET,
    ENOBUFS,
    EISCONN,
    ENOTCONN,
    ETIMEDOUT,
    ECONNREFUSED,
    EALREADY,
    EINPROGRESS,
    ECANCELED,
    EOWNERDEAD,
    ENOTRECOVERABLE,
    ENOKEY,
    EKEYREVOKED,
);

impl Errno {
    /// The same as EAGAIN.
    pub const EWOULDBLOCK: Errno = Errno::EAGAIN;
    /// A blocking call was interrupted and is restarted if the signal's
    /// handler has SA_RESTART (or there is no handler).
    pub const ERESTARTSYS: Errno = Errno(512);
    /// Restarted unconditionally.
    pub const ERESTARTNOINTR: Errno = Errno(513);
    /// Restarted only if no handler runs.
    pub const ERESTARTNOHAND: Errno = Errno(514);
    /// Restarted through restart_syscall with the remaining time.
    pub const ERESTART_RESTARTBLOCK: Errno = Errno(516);

    /// The errno with number `n`.
    pub const fn new(n: u16) -> Self {
        Errno(n)
    }

    /// The number.
    pub const fn get(self) -> u16 {
        self.0
    }

    /// The value a system call returns for this error: `-errno`.
    pub fn as_return(self) -> u64 {
        (-(self.0 as i64)) as u64
    }

    /// True for the kernel-internal restart codes.
    pub fn is_restart(self) -> bool {
        self.0 >= 512
    }

    /// The symbolic name, e.g. `ENOENT`.
    pub fn name(self) -> &'static str {
        match self.0 {
            512 => "ERESTARTSYS",
            513 => "ERESTARTNOINTR",
            514 => "ERESTARTNOHAND",
            516 => "ERESTART_RESTARTBLOCK",
            n => syscalls::Errno::new(n as i32).name().unwrap_or("E?"),
        }
    }

    /// The C library's message, e.g. `No such file or directory` (what
    /// strace and perror print).
    pub fn description(self) -> String {
        if self.is_restart() {
            return "To be restarted".into();
        }
        let mut buf = [0u8; 128];
        // SAFETY: XSI strerror_r writes a NUL-terminated message of at most
        // buf.len() bytes into buf, which we own.
        let r = unsafe { libc::strerror_r(self.0 as i32, buf.as_mut_ptr().cast(), buf.len()) };
        if r != 0 {
            return syscalls::Errno::new(self.0 as i32).description().unwrap_or("Unknown error").into();
        }
        let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(&buf[..end]).into_owned()
    }

    /// From a host error number.
    pub fn from_host(e: rustix::io::Errno) -> Self {
        Errno(e.raw_os_error() as u16)
    }

    /// From a host `std::io::Error`, EIO if it carries no number.
    pub fn from_io(e: &std::io::Error) -> Self {
        e.raw_os_error().map(|n| Errno(n as u16)).unwrap_or(Errno::EIO)
    }
}

impl fmt::Debug for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.description())
    }
}

impl std::error::Error for Errno {}

impl From<rustix::io::Errno> for Errno {
    fn from(e: rustix::io::Errno) -> Self {
        Errno::from_host(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_returns() {
        assert_eq!(Errno::ENOENT.get(), 2);
        assert_eq!(Errno::ENOENT.name(), "ENOENT");
        assert_eq!(Errno::ENOENT.description(), "No such file or directory");
        assert_eq!(Errno::EBADF.as_return() as i64, -9);
        assert!(Errno::ERESTARTSYS.is_restart());
        assert!(!Errno::EINTR.is_restart());
        assert_eq!(format!("{}", Errno::EROFS), "EROFS (Read-only file system)");
    }
}
