//! Pipes: a buffer between a read end and a write end.
//!
//! Writes of up to PIPE_BUF bytes are atomic; a read on an empty pipe with
//! no writer left is end of file; a write with no reader left is EPIPE (the
//! caller raises SIGPIPE).

use std::collections::VecDeque;
use std::io::{IoSlice, IoSliceMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::synthetic::next_ino;
use super::{
    FileOps, FileType, FsError, OpenFile, OpenFlags, POLLERR, POLLHUP, POLLIN, POLLOUT, POLLRDNORM, POLLWRNORM, Stat,
};
use crate::task::{BlockError, WaitQueue, block_on};

/// Writes up to this size are atomic.
pub const PIPE_BUF: usize = 4096;
/// Default capacity (16 pages, as Linux).
const DEFAULT_CAPACITY: usize = 65536;
/// Largest capacity F_SETPIPE_SZ may set (/proc/sys/fs/pipe-max-size).
pub const MAX_CAPACITY: usize = 1 << 20;

struct State {
    buf: VecDeque<u8>,
    capacity: usize,
    readers: usize,
    writers: usize,
}

/// A pipe.
pub struct Pipe {
    state: Mutex<State>,
    /// Woken when data arrives or the last writer leaves.
    readable: WaitQueue,
    /// Woken when space frees up or the last reader leaves.
    writable: WaitQueue,
    ino: u64,
}

static PIPE_DEV: AtomicU64 = AtomicU64::new(0x0e);

impl Pipe {
    /// A new pipe and its two ends.
    pub fn new_pair() -> (Arc<dyn FileOps>, Arc<dyn FileOps>) {
        let p = Arc::new(Pipe {
            state: Mutex::new(State { buf: VecDeque::new(), capacity: DEFAULT_CAPACITY, readers: 1, writers: 1 }),
            readable: WaitQueue::default(),
            writable: WaitQueue::default(),
            ino: next_ino(),
        });
        (Arc::new(ReadEnd { pipe: p.clone() }), Arc::new(WriteEnd { pipe: p }))
    }

    /// `pipe:[ino]`, as /proc/PID/fd shows it.
    pub fn describe(&self) -> Vec<u8> {
        format!("pipe:[{}]", self.ino).into_bytes()
    }

    pub fn capacity(&self) -> usize {
        self.state.lock().unwrap().capacity
    }

    /// F_SETPIPE_SZ: at least a page, rounded up to a power of two; never
    /// below what the pipe holds.
    pub fn set_capacity(&self, want: usize) -> Result<usize, FsError> {
        if want > MAX_CAPACITY {
            return Err(FsError::PermissionDenied);
        }
        let cap = want.max(4096).next_power_of_two();
        let mut st = self.state.lock().unwrap();
        if cap < st.buf.len() {
            return Err(FsError::Host(crate::errno::Errno::EBUSY));
        }
        st.capacity = cap;
        drop(st);
        self.writable.notify_all();
        Ok(cap)
    }

    fn stat(&self) -> Stat {
        let t = super::synthetic::boot_time();
        Stat {
            dev: PIPE_DEV.load(Ordering::Relaxed),
            ino: self.ino,
            mode: FileType::Fifo.mode_bits() | 0o600,
            nlink: 1,
            uid: rustix::process::getuid().as_raw(),
            gid: rustix::process::getgid().as_raw(),
            blksize: 4096,
            atime: t,
            mtime: t,
            ctime: t,
            ..Default::default()
        }
    }

    fn read(&self, file: &OpenFile, bufs: &mut [IoSliceMut<'_>]) -> Result<usize, FsError> {
        let want: usize = bufs.iter().map(|b| b.len()).sum();
        if want == 0 {
            return Ok(0);
        }
        let nonblock = file.flags().contains(OpenFlags::NONBLOCK);
        let take = |st: &mut State, bufs: &mut [IoSliceMut<'_>]| -> usize {
            let mut n = 0;
            for b in bufs.iter_mut() {
                let k = b.len().min(st.buf.len());
                for (d, s) in b[..k].iter_mut().zip(st.buf.drain(..k)) {
                    *d = s;
                }
                n += k;
                if st.buf.is_empty() {
                    break;
                }
            }
            n
        };
        let mut st = self.state.lock().unwrap();
        if !st.buf.is_empty() {
            let n = take(&mut st, bufs);
            drop(st);
            self.writable.notify_all();
            return Ok(n);
        }
        if st.writers == 0 {
            return Ok(0);
        }
        if nonblock {
            return Err(FsError::WouldBlock);
        }
        drop(st);
        let r = block_on(&[&self.readable], None, || {
            let st = self.state.lock().unwrap();
            (!st.buf.is_empty() || st.writers == 0).then_some(())
        });
        match r {
            Ok(()) => {
                let mut st = self.state.lock().unwrap();
                let n = take(&mut st, bufs);
                drop(st);
                self.writable.notify_all();
                Ok(n)
            }
            Err(_) => Err(FsError::Interrupted),
        }
    }

    fn write(&self, file: &OpenFile, bufs: &[IoSlice<'_>]) -> Result<usize, FsError> {
        let data: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
        if data.is_empty() {
            return if self.state.lock().unwrap().readers == 0 { Err(FsError::BrokenPipe) } else { Ok(0) };
        }
        let nonblock = file.flags().contains(OpenFlags::NONBLOCK);
        let atomic = data.len() <= PIPE_BUF;
        let mut done = 0;
        loop {
            {
                let mut st = self.state.lock().unwrap();
                if st.readers == 0 {
                    return if done > 0 { Ok(done) } else { Err(FsError::BrokenPipe) };
                }
                let space = st.capacity.saturating_sub(st.buf.len());
                let rest = data.len() - done;
                let fits = if atomic { space >= rest } else { space > 0 };
                if fits {
                    let k = space.min(rest);
                    st.buf.extend(&data[done..done + k]);
                    done += k;
                    drop(st);
                    self.readable.notify_all();
                    if done == data.len() {
                        return Ok(done);
                    }
                    continue;
                }
            }
            if nonblock {
                return if done > 0 { Ok(done) } else { Err(FsError::WouldBlock) };
            }
            let need = if atomic { data.len() - done } else { 1 };
            let r = block_on(&[&self.writable], None, || {
                let st = self.state.lock().unwrap();
                (st.readers == 0 || st.capacity.saturating_sub(st.buf.len()) >= need).then_some(())
            });
            if let Err(BlockError::Interrupted) = r {
                return if done > 0 { Ok(done) } else { Err(FsError::Interrupted) };
            }
        }
    }
}

struct ReadEnd {
    pipe: Arc<Pipe>,
}

struct WriteEnd {
    pipe: Arc<Pipe>,
}

impl Drop for ReadEnd {
    fn drop(&mut self) {
        self.pipe.state.lock().unwrap().readers -= 1;
        self.pipe.writable.notify_all();
    }
}

impl Drop for WriteEnd {
    fn drop(&mut self) {
        self.pipe.state.lock().unwrap().writers -= 1;
        self.pipe.readable.notify_all();
    }
}

impl FileOps for ReadEnd {
    fn read(&self, file: &OpenFile, bufs: &mut [IoSliceMut<'_>], _: u64) -> Result<usize, FsError> {
        self.pipe.read(file, bufs)
    }
    fn stat(&self) -> Result<Stat, FsError> {
        Ok(self.pipe.stat())
    }
    fn readable_bytes(&self) -> Option<u64> {
        Some(self.pipe.state.lock().unwrap().buf.len() as u64)
    }
    fn poll(&self) -> u32 {
        let st = self.pipe.state.lock().unwrap();
        let mut m = 0;
        if !st.buf.is_empty() {
            m |= POLLIN | POLLRDNORM;
        }
        if st.writers == 0 {
            m |= POLLHUP;
        }
        m
    }
    fn poll_queue(&self) -> Option<&WaitQueue> {
        Some(&self.pipe.readable)
    }
    fn pipe(&self) -> Option<&Pipe> {
        Some(&self.pipe)
    }
}

impl FileOps for WriteEnd {
    fn write(&self, file: &OpenFile, bufs: &[IoSlice<'_>], _: u64) -> Result<usize, FsError> {
        self.pipe.write(file, bufs)
    }
    fn stat(&self) -> Result<Stat, FsError> {
        Ok(self.pipe.stat())
    }
    fn poll(&self) -> u32 {
        let st = self.pipe.state.lock().unwrap();
        if st.readers == 0 {
            return POLLERR;
        }
        if st.capacity - st.buf.len() >= PIPE_BUF { POLLOUT | POLLWRNORM } else { 0 }
    }
    fn poll_queue(&self) -> Option<&WaitQueue> {
        Some(&self.pipe.writable)
    }
    fn pipe(&self) -> Option<&Pipe> {
        Some(&self.pipe)
    }
}
