//! Reading and writing: data moves between files and pinned application
//! memory without an intermediate copy.

use std::sync::Arc;

use linux_raw_sys::general as g;
use memory::{GuestSlice, GuestSliceMut};

use super::{SysError, SysResult, file};
use crate::errno::Errno;
use crate::fs::{FileType, FsError, OpenFile, OpenFlags, inotify};
use crate::mm::Pinned;
use crate::task::Task;

/// Largest transfer of one call (Linux's MAX_RW_COUNT).
pub(super) const MAX_RW: usize = 0x7fff_f000;
/// Most iovecs accepted (UIO_MAXIOV).
const MAX_IOV: u64 = 1024;

fn check_readable(f: &OpenFile) -> Result<(), SysError> {
    if !f.readable() {
        return Err(Errno::EBADF.into());
    }
    if f.dentry.as_ref().is_some_and(|d| d.file_type() == FileType::Directory) {
        return Err(Errno::EISDIR.into());
    }
    Ok(())
}

fn check_writable(f: &OpenFile) -> Result<(), SysError> {
    if !f.writable() { Err(Errno::EBADF.into()) } else { Ok(()) }
}

/// The checks of a transfer at an explicit position, in Linux's order: an
/// O_PATH descriptor is no file for it, then a stream cannot be read or
/// written at a position whatever its access mode (ESPIPE before EBADF).
fn check_positional(f: &OpenFile) -> Result<(), SysError> {
    if f.flags().contains(OpenFlags::PATH) {
        return Err(Errno::EBADF.into());
    }
    if !f.ops.seekable() {
        return Err(Errno::ESPIPE.into());
    }
    Ok(())
}

/// Reads into pinned buffers at the file's offset or at `pos`.
fn read_into(task: &Task, f: &OpenFile, bufs: &mut [Pinned], pos: Option<u64>) -> Result<usize, SysError> {
    let ctx = &task.ctx();
    let slices: Vec<GuestSliceMut> = bufs.iter_mut().flat_map(|p| p.slices_mut()).collect();
    if slices.is_empty() {
        return Ok(0);
    }
    if let Some(p) = pos {
        if !f.ops.seekable() {
            return Err(Errno::ESPIPE.into());
        }
        return Ok(f.ops.read(ctx, f, &slices, p)?);
    }
    if f.ops.ignores_offset() {
        Ok(f.ops.read(ctx, f, &slices, 0)?)
    } else if f.ops.seekable() {
        let mut off = f.offset.lock().unwrap();
        let n = f.ops.read(ctx, f, &slices, *off)?;
        *off += n as u64;
        Ok(n)
    } else {
        Ok(f.ops.read(ctx, f, &slices, 0)?)
    }
}

/// Writes pinned buffers at the file's offset (or its end with O_APPEND),
/// or at `pos`.
fn write_from(task: &mut Task, f: &OpenFile, bufs: &[Pinned], pos: Option<u64>) -> Result<usize, SysError> {
    if f.ops.writes_each_buffer() && bufs.len() > 1 {
        let mut done = 0;
        for b in bufs {
            match write_from(task, f, std::slice::from_ref(b), pos.map(|p| p + done as u64)) {
                Ok(n) => {
                    done += n;
                    if n < b.len() {
                        break;
                    }
                }
                Err(e) if done == 0 => return Err(e),
                Err(_) => break,
            }
        }
        return Ok(done);
    }
    let slices: Vec<GuestSlice> = bufs.iter().flat_map(|p| p.slices()).collect();
    if slices.is_empty() {
        return Ok(0);
    }
    let ctx = &task.ctx();
    let r = if let Some(p) = pos {
        if !f.ops.seekable() {
            return Err(Errno::ESPIPE.into());
        }
        f.ops.write(ctx, f, &slices, p)
    } else if f.ops.ignores_offset() {
        f.ops.write(ctx, f, &slices, 0)
    } else if f.ops.seekable() {
        let mut off = f.offset.lock().unwrap();
        if f.flags().contains(OpenFlags::APPEND) {
            // The end is found and written under the file's own lock, so
            // appenders sharing no description never overwrite each other.
            f.ops.write_append(ctx, f, &slices).map(|(n, end)| {
                *off = end;
                n
            })
        } else {
            let r = f.ops.write(ctx, f, &slices, *off);
            if let Ok(n) = r {
                *off += n as u64;
            }
            r
        }
    } else {
        f.ops.write(ctx, f, &slices, 0)
    };
    match r {
        Err(FsError::BrokenPipe) => {
            task.signal_self(g::SIGPIPE);
            Err(Errno::EPIPE.into())
        }
        r => Ok(r?),
    }
}

/// Most bytes of application memory pinned at once for a transfer. A larger
/// transfer moves in steps of this size, so what the sentry holds for one
/// call (the list of pinned frames) is bounded whatever length the
/// application passes.
pub(super) const TRANSFER_STEP: usize = 16 << 20;

/// One buffer of a transfer: address and length.
pub(super) type Segment = (u64, usize);

/// Reads an iovec array; the lengths are clamped to MAX_RW in total.
pub(super) fn read_iov(task: &Task, iov: u64, count: u64) -> Result<Vec<Segment>, SysError> {
    if count > MAX_IOV {
        return Err(Errno::EINVAL.into());
    }
    let mut segs = Vec::with_capacity(count as usize);
    let mut total: usize = 0;
    for i in 0..count {
        let v: g::iovec = task.mm.read_pod(iov + 16 * i)?;
        let len = v.iov_len as usize;
        if (len as i64) < 0 {
            return Err(Errno::EINVAL.into());
        }
        let len = len.min(MAX_RW - total);
        total += len;
        segs.push((v.iov_base as u64, len));
    }
    Ok(segs)
}

/// Pins the next step of a transfer: up to TRANSFER_STEP bytes of `segs`
/// from `skip` bytes in (`store` if the transfer stores into them), as far
/// as the memory is accessible. Returns the
/// pins, their length, and whether that is all the step asked for (false
/// if an inaccessible byte cut it short). Fails only if not even the first
/// byte is accessible.
pub(super) fn pin_step(
    task: &Task,
    segs: &[Segment],
    mut skip: usize,
    store: bool,
) -> Result<(Vec<Pinned>, usize, bool), SysError> {
    let mut pins = Vec::new();
    let mut len = 0;
    for &(base, seg_len) in segs {
        if skip >= seg_len {
            skip -= seg_len;
            continue;
        }
        let want = (seg_len - skip).min(TRANSFER_STEP - len);
        match task.mm.pin_prefix(base + skip as u64, want, store) {
            Ok(p) => {
                let got = p.len();
                len += got;
                pins.push(p);
                if got < want {
                    return Ok((pins, len, false));
                }
            }
            Err(e) if pins.is_empty() => return Err(e.into()),
            Err(_) => return Ok((pins, len, false)),
        }
        skip = 0;
        if len == TRANSFER_STEP {
            break;
        }
    }
    Ok((pins, len, true))
}

/// Reads into (`write` false) or writes from the buffers `segs`, at the
/// file's offset or at `pos`, a step at a time. The transfer stops at a
/// short step, at the first inaccessible byte (EFAULT if that is the
/// first), or at an error after some progress (the count so far, as
/// Linux's transfers answer). A stream is read one step at most: reading
/// on for more could block where one call must not.
fn transfer(task: &mut Task, f: &OpenFile, segs: &[Segment], pos: Option<u64>, write: bool) -> SysResult {
    let r = transfer_steps(task, f, segs, pos, write);
    if let (Ok(n), Some(d)) = (&r, &f.dentry)
        && *n > 0
    {
        inotify::notify_file(d, if write { inotify::IN_MODIFY } else { inotify::IN_ACCESS });
    }
    r
}

fn transfer_steps(task: &mut Task, f: &OpenFile, segs: &[Segment], pos: Option<u64>, write: bool) -> SysResult {
    let total: usize = segs.iter().map(|s| s.1).sum();
    let mut done = 0;
    loop {
        // A write reads application memory; a read stores into it.
        let (mut pins, len, complete) = match pin_step(task, segs, done, !write) {
            Ok(step) => step,
            Err(e) if done == 0 => return Err(e),
            Err(_) => return Ok(done as u64),
        };
        let at = pos.map(|p| p + done as u64);
        let r = if write { write_from(task, f, &pins, at) } else { read_into(task, f, &mut pins, at) };
        drop(pins);
        let n = match r {
            Ok(n) => n,
            Err(e) if done == 0 => return Err(e),
            Err(_) => return Ok(done as u64),
        };
        done += n;
        if n < len || !complete || done >= total || (!write && !f.ops.seekable()) {
            return Ok(done as u64);
        }
    }
}

fn offset_arg(v: u64) -> Result<u64, SysError> {
    if (v as i64) < 0 { Err(Errno::EINVAL.into()) } else { Ok(v) }
}

pub fn read(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let f = file(task, a[0])?;
    check_readable(&f)?;
    if (a[2] as usize) < f.ops.smallest_transfer() {
        return Err(Errno::EINVAL.into());
    }
    transfer(task, &f, &[(a[1], (a[2] as usize).min(MAX_RW))], None, false)
}

pub fn pread64(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let pos = offset_arg(a[3])?;
    let f = file(task, a[0])?;
    check_positional(&f)?;
    check_readable(&f)?;
    transfer(task, &f, &[(a[1], (a[2] as usize).min(MAX_RW))], Some(pos), false)
}

pub fn readv(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let f = file(task, a[0])?;
    check_readable(&f)?;
    let segs = read_iov(task, a[1], a[2])?;
    transfer(task, &f, &segs, None, false)
}

pub fn preadv(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let pos = offset_arg(a[3])?;
    let f = file(task, a[0])?;
    check_positional(&f)?;
    check_readable(&f)?;
    let segs = read_iov(task, a[1], a[2])?;
    transfer(task, &f, &segs, Some(pos), false)
}

pub fn write(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let f = file(task, a[0])?;
    check_writable(&f)?;
    if (a[2] as usize) < f.ops.smallest_transfer() {
        return Err(Errno::EINVAL.into());
    }
    transfer(task, &f, &[(a[1], (a[2] as usize).min(MAX_RW))], None, true)
}

pub fn pwrite64(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let pos = offset_arg(a[3])?;
    let f = file(task, a[0])?;
    check_positional(&f)?;
    check_writable(&f)?;
    transfer(task, &f, &[(a[1], (a[2] as usize).min(MAX_RW))], Some(pos), true)
}

pub fn writev(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let f = file(task, a[0])?;
    check_writable(&f)?;
    let segs = read_iov(task, a[1], a[2])?;
    transfer(task, &f, &segs, None, true)
}

pub fn pwritev(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let pos = offset_arg(a[3])?;
    let f = file(task, a[0])?;
    check_positional(&f)?;
    check_writable(&f)?;
    let segs = read_iov(task, a[1], a[2])?;
    transfer(task, &f, &segs, Some(pos), true)
}

pub fn lseek(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let f = file(task, a[0])?;
    let (off, whence) = (a[1] as i64, a[2] as u32);
    if !f.ops.seekable() {
        return Ok(f.ops.seek_stream(off, whence)?);
    }
    let mut cur = f.offset.lock().unwrap();
    if f.ops.ignores_offset() {
        *cur = 0;
        return Ok(0);
    }
    let base = match whence {
        g::SEEK_SET => 0,
        g::SEEK_CUR => *cur as i64,
        g::SEEK_END => f.ops.stat()?.size as i64,
        g::SEEK_DATA | g::SEEK_HOLE => {
            if off >= 0
                && let Some(r) = f.ops.seek_data(off as u64, whence == g::SEEK_HOLE)
            {
                let r = r?;
                *cur = r;
                return Ok(r);
            }
            let size = f.ops.stat()?.size as i64;
            if off < 0 || off >= size {
                return Err(Errno::ENXIO.into());
            }
            let r = if whence == g::SEEK_DATA { off } else { size };
            *cur = r as u64;
            return Ok(r as u64);
        }
        _ => return Err(Errno::EINVAL.into()),
    };
    let new = base.checked_add(off).ok_or(Errno::EOVERFLOW)?;
    if new < 0 {
        return Err(Errno::EINVAL.into());
    }
    *cur = new as u64;
    Ok(new as u64)
}

/// Copies between two files through a sentry buffer (sendfile,
/// copy_file_range, splice): from `input` at `in_pos` (or its offset) to
/// `output` at `out_pos` (or its offset, or the stream). A stream input is
/// read once, giving what it holds now (waiting only while it holds
/// nothing), as splice takes what a pipe holds. Returns the count and the
/// positions after it.
fn copy_between(
    task: &mut Task,
    input: &Arc<OpenFile>,
    in_pos: Option<u64>,
    output: &Arc<OpenFile>,
    out_pos: Option<u64>,
    count: usize,
) -> Result<(usize, u64, u64), SysError> {
    let r = copy_steps(task, input, in_pos, output, out_pos, count);
    if let Ok((n, _, _)) = &r
        && *n > 0
    {
        if let Some(d) = &input.dentry {
            inotify::notify_file(d, inotify::IN_ACCESS);
        }
        if let Some(d) = &output.dentry {
            inotify::notify_file(d, inotify::IN_MODIFY);
        }
    }
    r
}

fn copy_steps(
    task: &mut Task,
    input: &Arc<OpenFile>,
    in_pos: Option<u64>,
    output: &Arc<OpenFile>,
    out_pos: Option<u64>,
    count: usize,
) -> Result<(usize, u64, u64), SysError> {
    check_readable(input)?;
    check_writable(output)?;
    let ctx = &task.ctx();
    let mut buf = vec![0u8; count.min(1 << 20)];
    let mut done = 0;
    let mut pos = in_pos;
    let mut opos = out_pos;
    let ended = |done: usize, pos: Option<u64>, opos: Option<u64>| Ok((done, pos.unwrap_or(0), opos.unwrap_or(0)));
    while done < count {
        let want = (count - done).min(buf.len());
        let n = {
            let s = [GuestSliceMut::from(&mut buf[..want])];
            let r = match pos {
                Some(p) => input.ops.read(ctx, input, &s, p),
                None if input.ops.seekable() => {
                    let mut off = input.offset.lock().unwrap();
                    let r = input.ops.read(ctx, input, &s, *off);
                    if let Ok(n) = r {
                        *off += n as u64;
                    }
                    r
                }
                None => input.ops.read(ctx, input, &s, 0),
            };
            match r {
                Ok(n) => n,
                Err(e) if done == 0 => return Err(e.into()),
                Err(_) => break,
            }
        };
        if n == 0 {
            break;
        }
        let mut written = 0;
        while written < n {
            let s = [GuestSlice::from(&buf[written..n])];
            let r = match opos {
                Some(p) => output.ops.write(ctx, output, &s, p + written as u64),
                None if output.ops.seekable() => {
                    let mut off = output.offset.lock().unwrap();
                    let w = output.ops.write(ctx, output, &s, *off);
                    if let Ok(w) = w {
                        *off += w as u64;
                    }
                    w
                }
                None => output.ops.write(ctx, output, &s, 0),
            };
            match r {
                Ok(w) => written += w,
                Err(FsError::BrokenPipe) => {
                    task.signal_self(g::SIGPIPE);
                    return if done > 0 { ended(done, pos, opos) } else { Err(Errno::EPIPE.into()) };
                }
                Err(e) => return if done > 0 { ended(done, pos, opos) } else { Err(e.into()) },
            }
        }
        done += n;
        if let Some(p) = pos.as_mut() {
            *p += n as u64;
        }
        if let Some(p) = opos.as_mut() {
            *p += n as u64;
        }
        if !input.ops.seekable() {
            break;
        }
    }
    ended(done, pos, opos)
}

pub fn sendfile(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let out = file(task, a[0])?;
    let input = file(task, a[1])?;
    if out.flags().contains(OpenFlags::APPEND) {
        return Err(Errno::EINVAL.into());
    }
    if crate::fs::pipe::pipe_of(&*input.ops).is_some() {
        // A pipe has no splice_read for sendfile's direct splice.
        return Err(Errno::EINVAL.into());
    }
    let pos = if a[2] != 0 { Some(offset_arg(task.mm.read_pod::<u64>(a[2])?)?) } else { None };
    let (n, end, _) = copy_between(task, &input, pos, &out, None, (a[3] as usize).min(MAX_RW))?;
    if a[2] != 0 {
        task.mm.write_pod(a[2], &end)?;
    }
    Ok(n as u64)
}

pub fn copy_file_range(task: &mut Task, a: &[u64; 6]) -> SysResult {
    if a[5] != 0 {
        return Err(Errno::EINVAL.into());
    }
    let input = file(task, a[0])?;
    let out = file(task, a[2])?;
    check_readable(&input)?;
    check_writable(&out)?;
    if out.flags().contains(OpenFlags::APPEND) {
        return Err(Errno::EBADF.into());
    }
    for f in [&input, &out] {
        match f.ops.stat()?.file_type() {
            FileType::Regular => {}
            FileType::Directory => return Err(Errno::EISDIR.into()),
            _ => return Err(Errno::EINVAL.into()),
        }
    }
    let pos = if a[1] != 0 { Some(offset_arg(task.mm.read_pod::<u64>(a[1])?)?) } else { None };
    let opos = if a[3] != 0 { Some(offset_arg(task.mm.read_pod::<u64>(a[3])?)?) } else { None };
    let count = (a[4] as usize).min(MAX_RW);
    if Arc::ptr_eq(&input.ops, &out.ops)
        || input.ops.stat()?.ino == out.ops.stat()?.ino && input.ops.stat()?.dev == out.ops.stat()?.dev
    {
        // The same file: the two ranges may not overlap.
        let ip = pos.unwrap_or_else(|| *input.offset.lock().unwrap());
        let op = opos.unwrap_or_else(|| *out.offset.lock().unwrap());
        if ip < op + count as u64 && op < ip + count as u64 {
            return Err(Errno::EINVAL.into());
        }
    }
    let (n, end, oend) = copy_between(task, &input, pos, &out, opos, count)?;
    if a[1] != 0 {
        task.mm.write_pod(a[1], &end)?;
    }
    if a[3] != 0 {
        task.mm.write_pod(a[3], &oend)?;
    }
    Ok(n as u64)
}

/// splice(2) flags.
const SPLICE_F_MOVE: u32 = 1;
const SPLICE_F_NONBLOCK: u32 = 2;
const SPLICE_F_MORE: u32 = 4;
const SPLICE_F_GIFT: u32 = 8;

/// SPLICE_F_NONBLOCK: EAGAIN where the pipe side would wait.
fn splice_would_block(input: &OpenFile, output: &OpenFile) -> bool {
    let in_pipe = crate::fs::pipe::pipe_of(&*input.ops).is_some();
    let out_pipe = crate::fs::pipe::pipe_of(&*output.ops).is_some();
    (in_pipe && input.ops.poll() & (crate::fs::POLLIN | crate::fs::POLLHUP) == 0)
        || (out_pipe && output.ops.poll() & (crate::fs::POLLOUT | crate::fs::POLLERR) == 0)
}

pub fn splice(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let flags = a[5] as u32;
    if flags & !(SPLICE_F_MOVE | SPLICE_F_NONBLOCK | SPLICE_F_MORE | SPLICE_F_GIFT) != 0 {
        return Err(Errno::EINVAL.into());
    }
    let input = file(task, a[0])?;
    let out = file(task, a[2])?;
    check_readable(&input)?;
    check_writable(&out)?;
    let in_pipe = crate::fs::pipe::pipe_of(&*input.ops).is_some();
    let out_pipe = crate::fs::pipe::pipe_of(&*out.ops).is_some();
    if !in_pipe && !out_pipe {
        return Err(Errno::EINVAL.into());
    }
    if (in_pipe && a[1] != 0) || (out_pipe && a[3] != 0) {
        return Err(Errno::ESPIPE.into());
    }
    if out.flags().contains(OpenFlags::APPEND) && !out_pipe {
        return Err(Errno::EINVAL.into());
    }
    if in_pipe
        && out_pipe
        && Arc::ptr_eq(
            crate::fs::pipe::pipe_of(&*input.ops).expect("a pipe"),
            crate::fs::pipe::pipe_of(&*out.ops).expect("a pipe"),
        )
    {
        return Err(Errno::EINVAL.into());
    }
    let count = (a[4] as usize).min(MAX_RW);
    if count == 0 {
        return Ok(0);
    }
    let pos = if a[1] != 0 { Some(offset_arg(task.mm.read_pod::<u64>(a[1])?)?) } else { None };
    let opos = if a[3] != 0 { Some(offset_arg(task.mm.read_pod::<u64>(a[3])?)?) } else { None };
    if flags & SPLICE_F_NONBLOCK != 0 && splice_would_block(&input, &out) {
        return Err(Errno::EAGAIN.into());
    }
    // A pipe is spliced to a file a pipe-load at a time, so what the pipe
    // holds now goes, and the call returns.
    let (n, end, oend) = copy_between(task, &input, pos, &out, opos, count)?;
    if a[1] != 0 {
        task.mm.write_pod(a[1], &end)?;
    }
    if a[3] != 0 {
        task.mm.write_pod(a[3], &oend)?;
    }
    Ok(n as u64)
}

/// tee(2): copies what one pipe holds into another without taking it.
pub fn tee(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let flags = a[3] as u32;
    if flags & !(SPLICE_F_MOVE | SPLICE_F_NONBLOCK | SPLICE_F_MORE | SPLICE_F_GIFT) != 0 {
        return Err(Errno::EINVAL.into());
    }
    let input = file(task, a[0])?;
    let out = file(task, a[1])?;
    check_readable(&input)?;
    check_writable(&out)?;
    let (Some(pin), Some(pout)) = (crate::fs::pipe::pipe_of(&*input.ops), crate::fs::pipe::pipe_of(&*out.ops)) else {
        return Err(Errno::EINVAL.into());
    };
    if Arc::ptr_eq(pin, pout) {
        return Err(Errno::EINVAL.into());
    }
    let count = (a[2] as usize).min(1 << 20);
    if count == 0 {
        return Ok(0);
    }
    let nonblock = flags & SPLICE_F_NONBLOCK != 0 || input.flags().contains(OpenFlags::NONBLOCK);
    if flags & SPLICE_F_NONBLOCK != 0 && splice_would_block(&input, &out) {
        return Err(Errno::EAGAIN.into());
    }
    let ctx = task.ctx();
    let data = pin.peek(&ctx, nonblock, count)?;
    if data.is_empty() {
        return Ok(0);
    }
    // What does not fit in the output pipe now is left for later: tee
    // reports what it copied.
    let fits = data.len().min(pout.room());
    let fits = if fits == 0 && !nonblock { data.len() } else { fits };
    let n = out.ops.write(&ctx, &out, &[GuestSlice::from(&data[..fits])], 0);
    match n {
        Ok(n) => Ok(n as u64),
        Err(FsError::BrokenPipe) => {
            task.signal_self(g::SIGPIPE);
            Err(Errno::EPIPE.into())
        }
        Err(e) => Err(e.into()),
    }
}

/// vmsplice(2): application memory into a pipe (as writev), or out of one
/// (as readv).
pub fn vmsplice(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let flags = a[3] as u32;
    if flags & !(SPLICE_F_MOVE | SPLICE_F_NONBLOCK | SPLICE_F_MORE | SPLICE_F_GIFT) != 0 {
        return Err(Errno::EINVAL.into());
    }
    let f = file(task, a[0])?;
    if crate::fs::pipe::pipe_of(&*f.ops).is_none() {
        return Err(Errno::EBADF.into());
    }
    let segs = read_iov(task, a[1], a[2])?;
    if f.writable() {
        transfer(task, &f, &segs, None, true)
    } else if f.readable() {
        transfer(task, &f, &segs, None, false)
    } else {
        Err(Errno::EBADF.into())
    }
}

/// sync_file_range(2): file data lives in sandbox memory or is the host's
/// to write back; only the arguments are checked.
pub fn sync_file_range(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (offset, nbytes, flags) = (a[1] as i64, a[2] as i64, a[3] as u32);
    if flags & !7 != 0 || offset < 0 || nbytes < 0 || offset.checked_add(nbytes).is_none() {
        return Err(Errno::EINVAL.into());
    }
    let f = file(task, a[0])?;
    match f.ops.stat()?.file_type() {
        FileType::Regular | FileType::Directory | FileType::BlockDevice | FileType::Symlink => Ok(0),
        _ => Err(Errno::ESPIPE.into()),
    }
}
