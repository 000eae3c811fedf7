//! Reading and writing: data moves between files and pinned application
//! memory without an intermediate copy.

use std::sync::Arc;

use linux_raw_sys::general as g;
use memory::{GuestSlice, GuestSliceMut};

use super::{SysError, SysResult, file};
use crate::errno::Errno;
use crate::fs::{FileType, FsError, OpenFile, OpenFlags};
use crate::mm::Pinned;
use crate::task::Task;

/// Largest transfer of one call (Linux's MAX_RW_COUNT).
const MAX_RW: usize = 0x7fff_f000;
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
const TRANSFER_STEP: usize = 16 << 20;

/// One buffer of a transfer: address and length.
type Segment = (u64, usize);

/// Reads an iovec array; the lengths are clamped to MAX_RW in total.
fn read_iov(task: &Task, iov: u64, count: u64) -> Result<Vec<Segment>, SysError> {
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
fn pin_step(
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
/// copy_file_range).
fn copy_between(
    task: &mut Task,
    input: &Arc<OpenFile>,
    in_pos: Option<u64>,
    output: &Arc<OpenFile>,
    count: usize,
) -> Result<(usize, u64), SysError> {
    check_readable(input)?;
    check_writable(output)?;
    let ctx = &task.ctx();
    let mut buf = vec![0u8; count.min(1 << 20)];
    let mut done = 0;
    let mut pos = in_pos;
    while done < count {
        let want = (count - done).min(buf.len());
        let n = {
            let s = [GuestSliceMut::from(&mut buf[..want])];
            match pos {
                Some(p) => input.ops.read(ctx, input, &s, p)?,
                None if input.ops.seekable() => {
                    let mut off = input.offset.lock().unwrap();
                    let n = input.ops.read(ctx, input, &s, *off)?;
                    *off += n as u64;
                    n
                }
                None => input.ops.read(ctx, input, &s, 0)?,
            }
        };
        if n == 0 {
            break;
        }
        let mut written = 0;
        while written < n {
            let s = [GuestSlice::from(&buf[written..n])];
            let r = if output.ops.seekable() {
                let mut off = output.offset.lock().unwrap();
                let w = output.ops.write(ctx, output, &s, *off);
                if let Ok(w) = w {
                    *off += w as u64;
                }
                w
            } else {
                output.ops.write(ctx, output, &s, 0)
            };
            match r {
                Ok(w) => written += w,
                Err(FsError::BrokenPipe) => {
                    task.signal_self(g::SIGPIPE);
                    return if done > 0 { Ok((done, pos.unwrap_or(0))) } else { Err(Errno::EPIPE.into()) };
                }
                Err(e) => return if done > 0 { Ok((done, pos.unwrap_or(0))) } else { Err(e.into()) },
            }
        }
        done += n;
        if let Some(p) = pos.as_mut() {
            *p += n as u64;
        }
    }
    Ok((done, pos.unwrap_or(0)))
}

pub fn sendfile(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let out = file(task, a[0])?;
    let input = file(task, a[1])?;
    let pos = if a[2] != 0 { Some(offset_arg(task.mm.read_pod::<u64>(a[2])?)?) } else { None };
    let (n, end) = copy_between(task, &input, pos, &out, (a[3] as usize).min(MAX_RW))?;
    if a[2] != 0 {
        task.mm.write_pod(a[2], &end)?;
    }
    Ok(n as u64)
}

pub fn copy_file_range(task: &mut Task, a: &[u64; 6]) -> SysResult {
    if a[5] != 0 {
        return Err(Errno::EINVAL.into());
    }
    if a[3] != 0 {
        // Writing at an explicit output offset is only possible on a
        // writable regular file, which the read-only root does not have.
        return Err(Errno::EXDEV.into());
    }
    let input = file(task, a[0])?;
    let out = file(task, a[2])?;
    let pos = if a[1] != 0 { Some(offset_arg(task.mm.read_pod::<u64>(a[1])?)?) } else { None };
    let (n, end) = copy_between(task, &input, pos, &out, (a[4] as usize).min(MAX_RW))?;
    if a[1] != 0 {
        task.mm.write_pod(a[1], &end)?;
    }
    Ok(n as u64)
}
