//! System calls: one table, one module per family, strace-style tracing.

mod epoll;
mod errors;
mod fs;
mod futex;
mod info;
mod io;
mod ipc;
mod keys;
mod membarrier;
mod mm;
mod mount;
mod namei;
mod net;
mod notify;
mod numa;
mod pipe;
mod process;
mod ptrace;
mod sched;
mod settime;
mod signal;
pub mod strace;
mod table;
mod time;
mod timer;

use std::sync::Arc;
use std::time::{Duration, Instant};

pub use errors::{SysError, SysResult};
use linux_raw_sys::general as g;
pub use settime::capture_host_clock_state;

use crate::errno::Errno;
use crate::fs::path::PATH_MAX;
use crate::fs::{Dentry, FileType, OpenFile};
use crate::task::Task;

/// A number no Linux system call has, which panics in the sentry when
/// [`KernelConfig::test_panic_syscall`] is set (only cordon's tests set
/// it): how the tests make sure a sentry bug ends the sandbox cleanly.
/// Otherwise it is unknown, and fails with ENOSYS as on Linux.
///
/// [`KernelConfig::test_panic_syscall`]: crate::kernel::KernelConfig::test_panic_syscall
pub const TEST_PANIC_SYSCALL: u64 = 0x0bad_c0de;

/// Another number no Linux system call has, which makes the sentry itself
/// call `open_by_handle_at` on the host when
/// [`KernelConfig::test_panic_syscall`] is set: how the tests make sure a
/// host call outside the sentry's seccomp allow-list ends the sandbox.
/// Unconfined, the call fails (EBADF) and the caller gets that error;
/// unset, the number fails with ENOSYS as on Linux.
///
/// [`KernelConfig::test_panic_syscall`]: crate::kernel::KernelConfig::test_panic_syscall
pub const TEST_FORBIDDEN_HOST_CALL: u64 = 0x0bad_ca11;

/// A system call implementation.
pub type Handler = fn(&mut Task, &[u64; 6]) -> SysResult;

/// The raw arguments of a call, read as the C types the call declares
/// (the kernel's SYSCALL_DEFINE conversions: an `int` is the low 32 bits).
pub trait Args {
    /// An `int` (descriptors too).
    fn int(&self, i: usize) -> i32;
    /// An `unsigned int` (flags, lengths declared as int-sized).
    fn uint(&self, i: usize) -> u32;
    /// A `size_t`.
    fn size(&self, i: usize) -> usize;
    /// A pointer into application memory.
    fn ptr(&self, i: usize) -> u64;
}

impl Args for [u64; 6] {
    fn int(&self, i: usize) -> i32 {
        self[i] as i32
    }
    fn uint(&self, i: usize) -> u32 {
        self[i] as u32
    }
    fn size(&self, i: usize) -> usize {
        self[i] as usize
    }
    fn ptr(&self, i: usize) -> u64 {
        self[i]
    }
}

/// Runs the system call in the task's registers and stores its result.
pub fn dispatch(task: &mut Task) {
    let mut nr = task.regs.syscall_number();
    task.orig_rax = nr;
    if task.ptrace_syscalls()
        && let Some(traced_nr) = task.ptrace_syscall_entry(nr)
    {
        nr = traced_nr;
        // -1 from the tracer skips the call; rax stays as it left it.
        if nr == u64::MAX {
            task.ptrace_syscall_exit();
            task.ptrace_syscall_step();
            return;
        }
    }
    let args = task.regs.syscall_args();
    let def = table::lookup(nr);
    let tracing = task.kernel.config.strace;
    let pre = tracing.then(|| strace::enter(task, nr, def, &args));
    let started = task.kernel.stats.timing().then(Instant::now);
    let result = match def {
        Some(d) => (d.handler)(task, &args),
        None if nr == TEST_PANIC_SYSCALL && task.kernel.config.test_panic_syscall => test_panic(task),
        None if nr == TEST_FORBIDDEN_HOST_CALL && task.kernel.config.test_panic_syscall => test_forbidden_host_call(),
        None => {
            task.kernel.report_unsupported(nr, &table::name(nr));
            Err(SysError::Errno(Errno::ENOSYS))
        }
    };
    task.kernel.stats.record_syscall(nr, started.map(|s| s.elapsed()));
    if let Err(SysError::Errno(e)) = result
        && e.is_restart()
    {
        // Resolved when signals are handled: EINTR or a restart.
        task.restart = Some((e, nr));
    }
    match result {
        Ok(v) => task.regs.set_return(v),
        Err(SysError::Errno(e)) => task.regs.set_return(e.as_return()),
        Err(SysError::JustReturn) => {}
    }
    if let Some(line) = pre {
        strace::exit(task, line, def, &args, result);
    }
    task.ptrace_syscall_exit();
    task.ptrace_syscall_step();
}

/// A sentry bug, made on purpose: the panic comes with the process tree
/// locked, where every other task and the sandbox's own shutdown will want
/// it, as a real bug in the middle of an update could leave it.
fn test_panic(task: &Task) -> ! {
    let _tree = task.kernel.procs.lock().unwrap();
    panic!("system call {TEST_PANIC_SYSCALL:#x} made to test the handling of sentry bugs")
}

/// A host system call the sentry never makes, made on purpose (see
/// [`TEST_FORBIDDEN_HOST_CALL`]). With no mount descriptor it can only
/// fail.
fn test_forbidden_host_call() -> SysResult {
    // SAFETY: the handle pointer is null and the mount descriptor invalid:
    // the kernel refuses the call without touching memory.
    let r = unsafe { libc::syscall(libc::SYS_open_by_handle_at, -1, std::ptr::null::<u8>(), libc::O_RDONLY) };
    if r >= 0 {
        // Not expected; do not leak whatever it opened.
        // SAFETY: r is a descriptor this call just returned to us.
        unsafe { libc::close(r as i32) };
        return Ok(0);
    }
    let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EINVAL);
    Err(Errno::new(errno as u16).into())
}

/// The name of system call `nr`.
pub fn name(nr: u64) -> String {
    table::name(nr)
}

/// True if the sentry implements system call `nr`; the others fail with
/// ENOSYS.
pub fn is_supported(nr: u64) -> bool {
    table::lookup(nr).is_some()
}

/// Reads a path argument: EFAULT on a bad pointer, ENAMETOOLONG past
/// PATH_MAX.
pub fn read_path(task: &Task, addr: u64) -> Result<Vec<u8>, SysError> {
    Ok(task.mm.read_cstring(addr, PATH_MAX - 1)?)
}

/// The open file behind `fd`.
pub fn file(task: &Task, fd: u64) -> Result<Arc<OpenFile>, SysError> {
    Ok(task.files.get(fd as i32)?)
}

/// Where a relative path given with `dirfd` starts: None for the working
/// directory.
pub fn start_dir(task: &Task, dirfd: u64, path: &[u8]) -> Result<Option<Arc<Dentry>>, SysError> {
    let dirfd = dirfd as i32;
    if path.first() == Some(&b'/') || dirfd == g::AT_FDCWD {
        return Ok(None);
    }
    let f = task.files.get(dirfd)?;
    let d = f.dentry.clone().ok_or(Errno::ENOTDIR)?;
    if d.file_type() != FileType::Directory {
        return Err(Errno::ENOTDIR.into());
    }
    Ok(Some(d))
}

/// Turns a negative value into EINVAL and anything else into `usize`.
pub fn to_usize(v: u64) -> Result<usize, SysError> {
    if (v as i64) < 0 { Err(Errno::EINVAL.into()) } else { Ok(v as usize) }
}

/// Reads a `struct timespec` duration: EINVAL if negative or with
/// nanoseconds out of range.
pub fn read_timespec(task: &Task, addr: u64) -> Result<Duration, SysError> {
    let t: g::__kernel_timespec = task.mm.read_pod(addr)?;
    if t.tv_sec < 0 || !(0..1_000_000_000).contains(&t.tv_nsec) {
        return Err(Errno::EINVAL.into());
    }
    Ok(Duration::new(t.tv_sec as u64, t.tv_nsec as u32))
}

/// A timeout argument: NULL waits forever.
pub fn read_timeout(task: &Task, addr: u64) -> Result<Option<Duration>, SysError> {
    if addr == 0 { Ok(None) } else { read_timespec(task, addr).map(Some) }
}
