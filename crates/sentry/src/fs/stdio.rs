//! The caller's standard descriptors, passed through to the application.
//!
//! These are the only host descriptors the application reaches directly:
//! reads and writes go to the host object (a terminal, a pipe, a file), and
//! so does the offset, which the caller's shell may share.

use crate::fs::Context;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use memory::{GuestSlice, GuestSliceMut};
use rustix::event::{PollFd, PollFlags};

use linux_raw_sys::general as g;
use linux_raw_sys::ioctl as io;

use super::{FileOps, FsError, OpenFile, OpenFlags, POLLERR, POLLHUP, POLLIN, POLLOUT, Stat};
use crate::mm::MemoryManager;

/// A host descriptor passed through.
pub struct HostStream {
    fd: OwnedFd,
}

impl HostStream {
    pub fn new(fd: OwnedFd) -> Self {
        HostStream { fd }
    }

    /// Waits until the host descriptor is ready for `events`, interruptibly:
    /// the task's waiter is polled along with it. With `nonblock`, only
    /// checks.
    fn wait_ready(&self, ctx: &Context, events: PollFlags, nonblock: bool) -> Result<(), FsError> {
        let task = ctx.caller;
        loop {
            let ev = task.waiter().eventfd();
            let mut fds = [PollFd::new(&self.fd, events), PollFd::new(&ev, PollFlags::IN)];
            let timeout = if nonblock { Some(&rustix::time::Timespec { tv_sec: 0, tv_nsec: 0 }) } else { None };
            match rustix::event::poll(&mut fds, timeout) {
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
                Ok(_) => {}
            }
            if !fds[0].revents().is_empty() {
                return Ok(());
            }
            if nonblock {
                return Err(FsError::WouldBlock);
            }
            if !fds[1].revents().is_empty() {
                task.waiter().drain_eventfd();
            }
            if task.interrupted() {
                return Err(FsError::Interrupted);
            }
        }
    }
}

impl FileOps for HostStream {
    fn read(&self, ctx: &Context, file: &OpenFile, bufs: &[GuestSliceMut<'_>], _: u64) -> Result<usize, FsError> {
        self.wait_ready(ctx, PollFlags::IN, file.flags().contains(OpenFlags::NONBLOCK))?;
        loop {
            match memory::guest::readv(self.fd.as_fd(), bufs) {
                Err(rustix::io::Errno::INTR) => continue,
                Err(rustix::io::Errno::AGAIN) => return Err(FsError::WouldBlock),
                r => return Ok(r?),
            }
        }
    }

    fn write(&self, ctx: &Context, file: &OpenFile, bufs: &[GuestSlice<'_>], _: u64) -> Result<usize, FsError> {
        self.wait_ready(ctx, PollFlags::OUT, file.flags().contains(OpenFlags::NONBLOCK))?;
        loop {
            match memory::guest::writev(self.fd.as_fd(), bufs) {
                Err(rustix::io::Errno::INTR) => continue,
                Err(rustix::io::Errno::PIPE) => return Err(FsError::BrokenPipe),
                Err(rustix::io::Errno::AGAIN) => return Err(FsError::WouldBlock),
                r => return Ok(r?),
            }
        }
    }

    fn stat(&self) -> Result<Stat, FsError> {
        let s = rustix::fs::fstat(&self.fd)?;
        let ts = |sec: i64, nsec: i64| super::Timespec { sec, nsec: nsec as u32 };
        Ok(Stat {
            dev: s.st_dev,
            ino: s.st_ino,
            mode: s.st_mode,
            nlink: s.st_nlink,
            uid: s.st_uid,
            gid: s.st_gid,
            rdev: s.st_rdev,
            size: s.st_size as u64,
            blksize: s.st_blksize as u32,
            blocks: s.st_blocks as u64,
            atime: ts(s.st_atime, s.st_atime_nsec as i64),
            mtime: ts(s.st_mtime, s.st_mtime_nsec as i64),
            ctime: ts(s.st_ctime, s.st_ctime_nsec as i64),
            btime: None,
            mount_id: 0,
        })
    }

    fn poll(&self) -> u32 {
        let mut fds = [PollFd::new(&self.fd, PollFlags::IN | PollFlags::OUT)];
        let zero = rustix::time::Timespec { tv_sec: 0, tv_nsec: 0 };
        if rustix::event::poll(&mut fds, Some(&zero)).is_err() {
            return POLLERR;
        }
        let r = fds[0].revents();
        let mut m = 0;
        if r.contains(PollFlags::IN) {
            m |= POLLIN;
        }
        if r.contains(PollFlags::OUT) {
            m |= POLLOUT;
        }
        if r.contains(PollFlags::HUP) {
            m |= POLLHUP;
        }
        if r.contains(PollFlags::ERR) {
            m |= POLLERR;
        }
        m
    }

    fn host_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.fd.as_fd())
    }

    fn sync(&self, data_only: bool) -> Result<(), FsError> {
        // The host object answers: a file syncs, a terminal or pipe refuses.
        if data_only {
            rustix::fs::fdatasync(&self.fd)?
        } else {
            rustix::fs::fsync(&self.fd)?
        }
        Ok(())
    }

    fn seek_stream(&self, offset: i64, whence: u32) -> Result<u64, FsError> {
        let pos = match whence {
            g::SEEK_SET => rustix::fs::SeekFrom::Start(u64::try_from(offset).map_err(|_| FsError::Invalid)?),
            g::SEEK_CUR => rustix::fs::SeekFrom::Current(offset),
            g::SEEK_END => rustix::fs::SeekFrom::End(offset),
            _ => return Err(FsError::Invalid),
        };
        Ok(rustix::fs::seek(&self.fd, pos)?)
    }

    fn ioctl(&self, _: &Context, _: &OpenFile, mm: &MemoryManager, cmd: u32, arg: u64) -> Result<u64, FsError> {
        match cmd {
            io::TCGETS => {
                let t: g::termios = host_ioctl_get(&self.fd, io::TCGETS)?;
                mm.write_pod(arg, &t)?;
                Ok(0)
            }
            io::TIOCGWINSZ => {
                let w: g::winsize = host_ioctl_get(&self.fd, io::TIOCGWINSZ)?;
                mm.write_pod(arg, &w)?;
                Ok(0)
            }
            io::FIONREAD => {
                let n: i32 = host_ioctl_get(&self.fd, io::FIONREAD)?;
                mm.write_pod(arg, &n)?;
                Ok(0)
            }
            _ => Err(FsError::NotTty),
        }
    }
}

/// An ioctl that fills a plain structure, run on a host descriptor.
fn host_ioctl_get<T: crate::abi::Pod>(fd: &OwnedFd, cmd: u32) -> Result<T, FsError> {
    use std::os::fd::AsRawFd;
    let mut v = T::zeroed();
    // SAFETY: the request is one of a fixed set of getters whose argument is
    // a pointer to a T, which we own exclusively for the call.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), cmd as _, &mut v as *mut T) };
    if r < 0 {
        return Err(match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::ENOTTY) => FsError::NotTty,
            Some(n) => FsError::Host(crate::errno::Errno::new(n as u16)),
            None => FsError::NotTty,
        });
    }
    Ok(v)
}

/// One of the caller's streams as an object opened again by name
/// (`/dev/stdout`, `/proc/self/fd/1`): the same host descriptor, as
/// reopening a pipe or terminal reaches the same object on Linux.
pub struct StreamInode(pub std::sync::Arc<dyn FileOps>);

impl super::Inode for StreamInode {
    fn file_type(&self) -> super::FileType {
        self.0.stat().map_or(super::FileType::CharDevice, |s| s.file_type())
    }
    fn stat(&self) -> Result<Stat, FsError> {
        self.0.stat()
    }
    fn open(
        &self,
        _: &super::Context,
        _: &std::sync::Arc<super::Dentry>,
        _: OpenFlags,
    ) -> Result<std::sync::Arc<dyn FileOps>, FsError> {
        Ok(self.0.clone())
    }
    fn read_only(&self) -> bool {
        false
    }
}
