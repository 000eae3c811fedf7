//! Pipes: a ring of page-sized buffers between a read end and a write end,
//! as Linux keeps them.
//!
//! Each buffer is a frame of the memory file, so what pipes hold counts
//! against the sandbox's memory like any other page: a write that finds no
//! frame left fails with ENOMEM (or is short), as Linux's does when its
//! page allocation fails. Data moves straight between application memory
//! and those frames, a page at a time; a writer blocked on a full pipe holds
//! nothing but its place.
//!
//! The capacity is a number of slots of one page each. A write first tops
//! up the last page if its whole remainder-of-a-page part fits there, then
//! fills fresh pages, one slot each; so a write of up to PIPE_BUF bytes is
//! atomic, and how much more fits depends on how earlier writes fell into
//! pages, exactly as on Linux. A read on an empty pipe with no writer left
//! is end of file; a write with no reader left is EPIPE (the caller raises
//! SIGPIPE).

use crate::fs::Context;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use memory::{Frame, GuestSlice, GuestSliceMut, MemoryFile};

use super::synthetic::next_ino;
use super::{
    FileOps, FileType, FsError, OpenFile, OpenFlags, POLLERR, POLLHUP, POLLIN, POLLOUT, POLLRDNORM, POLLWRNORM, Stat,
};
use crate::errno::Errno;
use crate::waiter::{BlockError, WaitQueue};

/// Writes up to this size are atomic.
pub const PIPE_BUF: usize = 4096;
/// Size of one slot of the ring.
const PAGE: usize = 4096;
/// Default number of slots (64 KiB, as Linux).
const DEFAULT_SLOTS: usize = 16;
/// Largest capacity an unprivileged F_SETPIPE_SZ may set
/// (/proc/sys/fs/pipe-max-size).
pub const MAX_CAPACITY: usize = 1 << 20;

/// One slot: a frame, of which bytes `[read, end)` are unread.
struct Buf {
    frame: Frame,
    read: usize,
    end: usize,
}

struct State {
    mf: Arc<MemoryFile>,
    bufs: VecDeque<Buf>,
    /// The frame of the last buffer drained, kept for the next write (as
    /// Linux keeps a pipe's tmp_page): a pipe passing small messages back
    /// and forth never goes to the allocator.
    spare: Option<Frame>,
    /// Unread bytes in all slots.
    len: usize,
    /// Slots the ring may hold (Linux's max_usage).
    slots: usize,
    readers: usize,
    writers: usize,
    /// How many times an end for reading and for writing was opened: a
    /// FIFO opener waits for the other side's count to move, not for it
    /// to be nonzero, so a partner that came and went still counts.
    read_opens: u64,
    write_opens: u64,
    /// Ends that are both reader and writer (reopened O_RDWR); they wait on
    /// the readable queue for room as well.
    both: usize,
}

impl State {
    fn full(&self) -> bool {
        self.bufs.len() >= self.slots
    }

    /// Moves up to what `bufs` hold out of the pipe; returns the count.
    fn take(&mut self, bufs: &[GuestSliceMut<'_>]) -> usize {
        let mut n = 0;
        for dst in bufs {
            let mut at = 0;
            while at < dst.len() {
                let Some(b) = self.bufs.front_mut() else { break };
                let k = (dst.len() - at).min(b.end - b.read);
                dst.subslice(at, k).copy_from_guest(self.mf.slice(b.frame, b.read, k).as_read_only());
                b.read += k;
                at += k;
                if b.read == b.end {
                    let done = self.bufs.pop_front().expect("front");
                    match self.spare {
                        None => self.spare = Some(done.frame),
                        Some(_) => self.mf.dec_ref(done.frame),
                    }
                }
            }
            n += at;
            self.len -= at;
            if self.bufs.is_empty() {
                break;
            }
        }
        n
    }

    /// Appends `len` bytes of `src`, starting `from` bytes in, to the
    /// buffer `b`.
    fn fill(&self, b: &mut Buf, src: &[GuestSlice<'_>], from: usize, len: usize) {
        copy_gathered(src, from, self.mf.slice(b.frame, b.end, len));
        b.end += len;
    }
}

impl Drop for State {
    fn drop(&mut self) {
        for b in self.bufs.drain(..) {
            self.mf.dec_ref(b.frame);
        }
        if let Some(f) = self.spare.take() {
            self.mf.dec_ref(f);
        }
    }
}

/// Copies `dst.len()` bytes of the concatenation of `src`, starting `from`
/// bytes in, into `dst`.
fn copy_gathered(src: &[GuestSlice<'_>], mut from: usize, dst: GuestSliceMut<'_>) {
    let mut at = 0;
    for s in src {
        if at == dst.len() {
            break;
        }
        if from >= s.len() {
            from -= s.len();
            continue;
        }
        let k = (s.len() - from).min(dst.len() - at);
        dst.subslice(at, k).copy_from_guest(s.subslice(from, k));
        at += k;
        from = 0;
    }
    debug_assert_eq!(at, dst.len(), "source shorter than the copy");
}

/// A pipe.
pub struct Pipe {
    state: Mutex<State>,
    /// Woken when data arrives or the last writer leaves.
    readable: WaitQueue,
    /// Woken when a slot frees up or the last reader leaves.
    writable: WaitQueue,
    ino: u64,
    /// The user and group that made it (fsuid and fsgid), its owners.
    owner: (u32, u32),
}

static PIPE_DEV: AtomicU64 = AtomicU64::new(0x0e);

impl Pipe {
    /// A new pipe of `owner` and its two ends, buffering in frames of `mf`.
    pub fn new_pair(mf: Arc<MemoryFile>, owner: (u32, u32)) -> (Arc<dyn FileOps>, Arc<dyn FileOps>) {
        let p = Arc::new(Pipe {
            state: Mutex::new(State {
                mf,
                bufs: VecDeque::new(),
                spare: None,
                len: 0,
                slots: DEFAULT_SLOTS,
                readers: 1,
                writers: 1,
                read_opens: 1,
                write_opens: 1,
                both: 0,
            }),
            readable: WaitQueue::default(),
            writable: WaitQueue::default(),
            ino: next_ino(),
            owner,
        });
        (Arc::new(ReadEnd { pipe: p.clone() }), Arc::new(WriteEnd { pipe: p }))
    }

    /// The pipe of a FIFO, with no ends open yet.
    pub fn new(mf: Arc<MemoryFile>, owner: (u32, u32)) -> Arc<Pipe> {
        Arc::new(Pipe {
            state: Mutex::new(State {
                mf,
                bufs: VecDeque::new(),
                spare: None,
                len: 0,
                slots: DEFAULT_SLOTS,
                readers: 0,
                writers: 0,
                read_opens: 0,
                write_opens: 0,
                both: 0,
            }),
            readable: WaitQueue::default(),
            writable: WaitQueue::default(),
            ino: next_ino(),
            owner,
        })
    }

    /// Another end of this pipe, as opening /proc/PID/fd/N of one gives
    /// (bash's `<(...)` and `>(...)` work this way): a read end, a write
    /// end, or for O_RDWR one that is both.
    pub fn open_end(self: &Arc<Self>, flags: OpenFlags) -> Result<Arc<dyn FileOps>, FsError> {
        let mut st = self.state.lock().unwrap();
        let (read, write) = (flags.readable(), flags.writable());
        if read {
            st.readers += 1;
            st.read_opens += 1;
        }
        if write {
            st.writers += 1;
            st.write_opens += 1;
        }
        if read && write {
            st.both += 1;
        }
        drop(st);
        // A new reader may unblock a writer waiting for one, and the other
        // way round.
        self.readable.notify_all();
        self.writable.notify_all();
        Ok(match (read, write) {
            (true, true) => Arc::new(BothEnds { pipe: self.clone() }),
            (false, true) => Arc::new(WriteEnd { pipe: self.clone() }),
            _ => Arc::new(ReadEnd { pipe: self.clone() }),
        })
    }

    /// Bytes waiting to be read (FIONREAD).
    /// Copies up to `max` bytes of what the pipe holds without taking
    /// them (tee), waiting while it holds nothing and has a writer.
    pub fn peek(&self, ctx: &Context, nonblock: bool, max: usize) -> Result<Vec<u8>, FsError> {
        loop {
            {
                let st = self.state.lock().unwrap();
                if st.len > 0 {
                    let mut out = Vec::with_capacity(max.min(st.len));
                    for b in &st.bufs {
                        let k = (b.end - b.read).min(max - out.len());
                        let start = out.len();
                        out.resize(start + k, 0);
                        st.mf.read(b.frame, b.read, &mut out[start..]);
                        if out.len() == max {
                            break;
                        }
                    }
                    return Ok(out);
                }
                if st.writers == 0 {
                    return Ok(Vec::new());
                }
                if nonblock {
                    return Err(FsError::WouldBlock);
                }
            }
            ctx.block_on(&[&self.readable], None, || {
                let st = self.state.lock().unwrap();
                (st.len > 0 || st.writers == 0).then_some(())
            })
            .map_err(|_| FsError::Interrupted)?;
        }
    }

    /// Bytes that can be written without waiting.
    pub fn room(&self) -> usize {
        let st = self.state.lock().unwrap();
        st.slots.saturating_sub(st.bufs.len()) * PAGE
    }

    fn unread(&self) -> u64 {
        self.state.lock().unwrap().len as u64
    }

    /// poll(2) readiness of an end that reads, writes, or both.
    fn poll_mask(&self, read: bool, write: bool) -> u32 {
        let st = self.state.lock().unwrap();
        let mut m = 0;
        if read && st.len > 0 {
            m |= POLLIN | POLLRDNORM;
        }
        if read && st.writers == 0 {
            m |= POLLHUP;
        }
        if write && !st.full() {
            m |= POLLOUT | POLLWRNORM;
        }
        if write && st.readers == 0 {
            m |= POLLERR;
        }
        m
    }

    /// `pipe:[ino]`, as /proc/PID/fd shows it.
    pub fn describe(&self) -> Vec<u8> {
        format!("pipe:[{}]", self.ino).into_bytes()
    }

    /// F_GETPIPE_SZ.
    pub fn capacity(&self) -> usize {
        self.state.lock().unwrap().slots * PAGE
    }

    /// F_SETPIPE_SZ (its argument is an unsigned int): at least a page,
    /// rounded up to a power of two; never fewer slots than are in use.
    pub fn set_capacity(&self, want: usize) -> Result<usize, FsError> {
        let want = want as u32;
        if want > 1 << 31 {
            return Err(FsError::Invalid);
        }
        let size = (want as usize).max(PAGE).next_power_of_two();
        let slots = size / PAGE;
        let mut st = self.state.lock().unwrap();
        if slots > st.slots && size > MAX_CAPACITY {
            // Only CAP_SYS_RESOURCE may go past pipe-max-size.
            return Err(FsError::Host(Errno::EPERM));
        }
        if slots < st.bufs.len() {
            return Err(FsError::Host(Errno::EBUSY));
        }
        st.slots = slots;
        drop(st);
        self.writable.notify_all();
        Ok(size)
    }

    fn stat(&self) -> Stat {
        let t = super::synthetic::boot_time();
        Stat {
            dev: PIPE_DEV.load(Ordering::Relaxed),
            ino: self.ino,
            mode: FileType::Fifo.mode_bits() | 0o600,
            nlink: 1,
            uid: self.owner.0,
            gid: self.owner.1,
            blksize: 4096,
            atime: t,
            mtime: t,
            ctime: t,
            ..Default::default()
        }
    }

    fn read(&self, ctx: &Context, file: &OpenFile, bufs: &[GuestSliceMut<'_>]) -> Result<usize, FsError> {
        let want: usize = bufs.iter().map(|b| b.len()).sum();
        if want == 0 {
            return Ok(0);
        }
        let nonblock = file.flags().contains(OpenFlags::NONBLOCK);
        loop {
            {
                // Checked and taken under one lock: another reader cannot
                // empty the pipe in between.
                let mut st = self.state.lock().unwrap();
                if st.len > 0 {
                    let n = st.take(bufs);
                    let both = st.both > 0;
                    drop(st);
                    self.writable.notify_all();
                    if both {
                        self.readable.notify_all();
                    }
                    return Ok(n);
                }
                if st.writers == 0 {
                    return Ok(0);
                }
                if nonblock {
                    return Err(FsError::WouldBlock);
                }
            }
            let r = ctx.block_on(&[&self.readable], None, || {
                let st = self.state.lock().unwrap();
                (st.len > 0 || st.writers == 0).then_some(())
            });
            if r.is_err() {
                return Err(FsError::Interrupted);
            }
        }
    }

    fn write(&self, ctx: &Context, file: &OpenFile, bufs: &[GuestSlice<'_>]) -> Result<usize, FsError> {
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        if total == 0 {
            return Ok(0);
        }
        let nonblock = file.flags().contains(OpenFlags::NONBLOCK);
        let mut done = 0;
        {
            let mut st = self.state.lock().unwrap();
            if st.readers == 0 {
                return Err(FsError::BrokenPipe);
            }
            // The part of the write beyond whole pages goes into the last
            // slot if it fits there entirely.
            let chars = total % PAGE;
            if chars > 0
                && let Some(mut last) = st.bufs.pop_back()
            {
                if last.end + chars <= PAGE {
                    st.fill(&mut last, bufs, 0, chars);
                    st.len += chars;
                    done = chars;
                }
                st.bufs.push_back(last);
            }
        }
        if done > 0 {
            self.readable.notify_all();
        }
        loop {
            if done == total {
                return Ok(done);
            }
            {
                let mut st = self.state.lock().unwrap();
                if st.readers == 0 {
                    drop(st);
                    if done == 0 {
                        return Err(FsError::BrokenPipe);
                    }
                    // Part went in: the count, and SIGPIPE all the same.
                    ctx.caller.send_signal(linux_raw_sys::general::SIGPIPE);
                    return Ok(done);
                }
                if !st.full() {
                    let Some(frame) = st.spare.take().or_else(|| st.mf.allocate().ok()) else {
                        // No memory for another buffer: what went in, or
                        // ENOMEM, as Linux's pipe_write answers a failed
                        // page allocation.
                        return if done > 0 { Ok(done) } else { Err(FsError::Host(Errno::ENOMEM)) };
                    };
                    let k = PAGE.min(total - done);
                    let mut b = Buf { frame, read: 0, end: 0 };
                    st.fill(&mut b, bufs, done, k);
                    st.bufs.push_back(b);
                    st.len += k;
                    done += k;
                    drop(st);
                    self.readable.notify_all();
                    continue;
                }
            }
            if nonblock {
                return if done > 0 { Ok(done) } else { Err(FsError::WouldBlock) };
            }
            let r = ctx.block_on(&[&self.writable], None, || {
                let st = self.state.lock().unwrap();
                (st.readers == 0 || !st.full()).then_some(())
            });
            if let Err(BlockError::Interrupted) = r {
                return if done > 0 { Ok(done) } else { Err(FsError::Interrupted) };
            }
        }
    }
}

/// The pipe behind a pipe end or a FIFO opened for both.
pub fn pipe_of(ops: &dyn FileOps) -> Option<&Arc<Pipe>> {
    if let Some(e) = ops.downcast_ref::<ReadEnd>() {
        return Some(&e.pipe);
    }
    if let Some(e) = ops.downcast_ref::<WriteEnd>() {
        return Some(&e.pipe);
    }
    ops.downcast_ref::<BothEnds>().map(|e| &e.pipe)
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
    fn read(&self, ctx: &Context, file: &OpenFile, bufs: &[GuestSliceMut<'_>], _: u64) -> Result<usize, FsError> {
        self.pipe.read(ctx, file, bufs)
    }
    fn stat(&self) -> Result<Stat, FsError> {
        Ok(self.pipe.stat())
    }
    fn readable_bytes(&self) -> Option<u64> {
        Some(self.pipe.unread())
    }
    fn poll(&self) -> u32 {
        self.pipe.poll_mask(true, false)
    }
    fn poll_queue(&self) -> Option<&WaitQueue> {
        Some(&self.pipe.readable)
    }
}

impl FileOps for WriteEnd {
    fn write(&self, ctx: &Context, file: &OpenFile, bufs: &[GuestSlice<'_>], _: u64) -> Result<usize, FsError> {
        self.pipe.write(ctx, file, bufs)
    }
    fn stat(&self) -> Result<Stat, FsError> {
        Ok(self.pipe.stat())
    }
    fn readable_bytes(&self) -> Option<u64> {
        // FIONREAD answers for the pipe, whichever end asks.
        Some(self.pipe.unread())
    }
    fn poll(&self) -> u32 {
        self.pipe.poll_mask(false, true)
    }
    fn poll_queue(&self) -> Option<&WaitQueue> {
        Some(&self.pipe.writable)
    }
}

/// Both ends at once (a pipe reopened O_RDWR).
struct BothEnds {
    pipe: Arc<Pipe>,
}

impl Drop for BothEnds {
    fn drop(&mut self) {
        let mut st = self.pipe.state.lock().unwrap();
        st.readers -= 1;
        st.writers -= 1;
        st.both -= 1;
        drop(st);
        self.pipe.readable.notify_all();
        self.pipe.writable.notify_all();
    }
}

impl FileOps for BothEnds {
    fn read(&self, ctx: &Context, file: &OpenFile, bufs: &[GuestSliceMut<'_>], _: u64) -> Result<usize, FsError> {
        self.pipe.read(ctx, file, bufs)
    }
    fn write(&self, ctx: &Context, file: &OpenFile, bufs: &[GuestSlice<'_>], _: u64) -> Result<usize, FsError> {
        self.pipe.write(ctx, file, bufs)
    }
    fn stat(&self) -> Result<Stat, FsError> {
        Ok(self.pipe.stat())
    }
    fn readable_bytes(&self) -> Option<u64> {
        Some(self.pipe.unread())
    }
    fn poll(&self) -> u32 {
        // This end is a reader and a writer itself, so never sees a hang-up
        // or a missing reader.
        self.pipe.poll_mask(true, true)
    }
    fn poll_queue(&self) -> Option<&WaitQueue> {
        // Reads wake this queue too while such an end exists, so it serves
        // for room to write as well.
        Some(&self.pipe.readable)
    }
}

/// Opens a FIFO as Linux's fifo_open does: a reader waits for a writer
/// and a writer for a reader unless O_NONBLOCK is given (then a writer
/// with no reader gets ENXIO); O_RDWR never waits.
pub fn open_fifo(ctx: &Context, pipe: &Arc<Pipe>, flags: OpenFlags) -> Result<Arc<dyn FileOps>, FsError> {
    let (read, write) = (flags.readable(), flags.writable());
    let nonblock = flags.contains(OpenFlags::NONBLOCK);
    if write && !read && nonblock && pipe.state.lock().unwrap().readers == 0 {
        return Err(FsError::NoDevice);
    }
    let (before_r, before_w) = {
        let st = pipe.state.lock().unwrap();
        (st.read_opens, st.write_opens)
    };
    let end = pipe.open_end(flags)?;
    if read && write || nonblock {
        return Ok(end);
    }
    let waited = if read {
        ctx.block_on(&[&pipe.readable], None, || {
            let st = pipe.state.lock().unwrap();
            (st.writers > 0 || st.write_opens != before_w).then_some(())
        })
    } else {
        ctx.block_on(&[&pipe.writable], None, || {
            let st = pipe.state.lock().unwrap();
            (st.readers > 0 || st.read_opens != before_r).then_some(())
        })
    };
    match waited {
        Ok(()) => Ok(end),
        // Dropping the end takes its count back.
        Err(_) => Err(FsError::Interrupted),
    }
}

/// A pipe as /proc/PID/fd/N names it: opening it opens another end.
pub struct PipeInode(pub Arc<Pipe>);

impl super::Inode for PipeInode {
    fn file_type(&self) -> FileType {
        FileType::Fifo
    }
    fn stat(&self) -> Result<Stat, FsError> {
        Ok(self.0.stat())
    }
    fn open(&self, _: &Context, _: &Arc<super::Dentry>, flags: OpenFlags) -> Result<Arc<dyn FileOps>, FsError> {
        self.0.open_end(flags)
    }
    fn access(&self, _: &crate::auth::Creds, _mode: u32) -> Result<(), FsError> {
        Ok(())
    }
    fn read_only(&self) -> bool {
        false
    }
}
