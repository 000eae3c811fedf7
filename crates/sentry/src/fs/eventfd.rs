//! eventfd: a 64-bit counter that write adds to and read takes, for
//! wake-ups between threads and processes (libuv and Go's runtime poller
//! use one each).

use crate::fs::Context;
use std::sync::Mutex;

use memory::{GuestSlice, GuestSliceMut};

use super::{FileOps, FsError, OpenFile, OpenFlags, POLLIN, POLLOUT, POLLRDNORM, POLLWRNORM, Stat};
use crate::waiter::WaitQueue;

/// The counter never reaches this: a write that would is held back.
const MAX: u64 = u64::MAX - 1;

pub struct EventFd {
    count: Mutex<u64>,
    /// EFD_SEMAPHORE: a read takes 1, not everything.
    semaphore: bool,
    /// Woken on every change, for readers, writers and pollers alike.
    queue: WaitQueue,
}

impl EventFd {
    pub fn new(initial: u64, semaphore: bool) -> EventFd {
        EventFd { count: Mutex::new(initial), semaphore, queue: WaitQueue::default() }
    }
}

fn scatter(bufs: &[GuestSliceMut<'_>], v: u64) {
    let b = v.to_ne_bytes();
    let mut n = 0;
    for s in bufs {
        let put = (8 - n).min(s.len());
        s.copy_from(&b[n..n + put]);
        n += put;
        if n == 8 {
            return;
        }
    }
}

impl EventFd {
    /// Adds `v` to the counter, waiting (unless non-blocking) while that
    /// would reach the maximum.
    fn add(&self, ctx: &Context, file: &OpenFile, v: u64) -> Result<(), FsError> {
        if v == u64::MAX {
            return Err(FsError::Invalid);
        }
        let add = || {
            let mut c = self.count.lock().unwrap();
            (MAX - *c >= v).then(|| *c += v)
        };
        match add() {
            Some(()) => {}
            None if file.flags().contains(OpenFlags::NONBLOCK) => return Err(FsError::WouldBlock),
            None => ctx.block_on(&[&self.queue], None, add).map_err(|_| FsError::Interrupted)?,
        }
        self.queue.notify_all();
        Ok(())
    }
}

impl FileOps for EventFd {
    fn read(&self, ctx: &Context, file: &OpenFile, bufs: &[GuestSliceMut<'_>], _: u64) -> Result<usize, FsError> {
        if bufs.iter().map(|b| b.len()).sum::<usize>() < 8 {
            return Err(FsError::Invalid);
        }
        let take = || {
            let mut c = self.count.lock().unwrap();
            if *c == 0 {
                return None;
            }
            let v = if self.semaphore { 1 } else { *c };
            *c -= v;
            Some(v)
        };
        let v = match take() {
            Some(v) => v,
            None if file.flags().contains(OpenFlags::NONBLOCK) => return Err(FsError::WouldBlock),
            None => ctx.block_on(&[&self.queue], None, take).map_err(|_| FsError::Interrupted)?,
        };
        self.queue.notify_all();
        scatter(bufs, v);
        Ok(8)
    }

    /// One write of exactly 8 bytes (the buffers are one application
    /// buffer; see `writes_each_buffer`).
    fn write(&self, ctx: &Context, file: &OpenFile, bufs: &[GuestSlice<'_>], _: u64) -> Result<usize, FsError> {
        let mut b = [0u8; 8];
        let mut n = 0;
        for s in bufs {
            if n + s.len() > 8 {
                return Err(FsError::Invalid);
            }
            s.copy_to(&mut b[n..n + s.len()]);
            n += s.len();
        }
        if n != 8 {
            return Err(FsError::Invalid);
        }
        self.add(ctx, file, u64::from_ne_bytes(b))?;
        Ok(8)
    }

    fn smallest_transfer(&self) -> usize {
        8
    }

    fn writes_each_buffer(&self) -> bool {
        true
    }

    fn stat(&self) -> Result<Stat, FsError> {
        Ok(super::synthetic::anon_inode_stat())
    }

    fn poll(&self) -> u32 {
        let c = *self.count.lock().unwrap();
        let mut m = 0;
        if c > 0 {
            m |= POLLIN | POLLRDNORM;
        }
        if c < MAX {
            m |= POLLOUT | POLLWRNORM;
        }
        m
    }

    fn poll_queue(&self) -> Option<&WaitQueue> {
        Some(&self.queue)
    }

    fn anon_name(&self) -> Option<&'static str> {
        Some("anon_inode:[eventfd]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_values_cross_buffer_boundaries() {
        let v = 0x0102_0304_0506_0708u64;
        let bytes = v.to_ne_bytes();
        let (mut a, mut b) = ([0u8; 5], [0u8; 5]);
        scatter(&[GuestSliceMut::from(&mut a[..]), GuestSliceMut::from(&mut b[..])], v);
        assert_eq!([&a[..], &b[..3]].concat(), bytes);
    }
}
