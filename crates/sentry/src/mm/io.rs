//! The sentry's access to application memory. Every access goes through the
//! VMAs and the page map, so a bad pointer is an error, never a crash, and
//! pages are faulted in as the application itself would have faulted them.
//! The bytes themselves move only through [`memory::guest`] slices: other
//! threads of the application may be writing them at the same moment.

use std::sync::Arc;

use memory::{Frame, GuestSlice, GuestSliceMut, MemoryFile};
use platform::Access;
use zerocopy::{FromBytes, Immutable, IntoBytes};

use super::{MemoryManager, MmError, PAGE, State, USER_TOP, effective, page_down, page_up};

/// Application memory pinned for host I/O: the frames stay allocated until
/// this is dropped even if the application unmaps them meanwhile.
pub struct Pinned {
    mf: Arc<MemoryFile>,
    /// (frame, offset in frame, length), coalesced where frames are adjacent.
    pieces: Vec<(Frame, usize, usize)>,
    frames: Vec<Frame>,
    len: usize,
}

impl Pinned {
    /// Total length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The memory, for writing out of it.
    pub fn slices(&self) -> Vec<GuestSlice<'_>> {
        self.pieces.iter().map(|&(f, off, len)| self.mf.slice(f, off, len).as_read_only()).collect()
    }

    /// The memory, for reading into it.
    pub fn slices_mut(&mut self) -> Vec<GuestSliceMut<'_>> {
        self.pieces.iter().map(|&(f, off, len)| self.mf.slice(f, off, len)).collect()
    }

    /// Copies bytes in, starting at `offset` into the pinned range.
    pub fn write_at(&mut self, mut offset: usize, mut data: &[u8]) {
        for &(f, off, len) in &self.pieces {
            if data.is_empty() {
                break;
            }
            if offset >= len {
                offset -= len;
                continue;
            }
            let n = (len - offset).min(data.len());
            self.mf.slice(f, off + offset, n).copy_from(&data[..n]);
            data = &data[n..];
            offset = 0;
        }
    }

    /// Copies the pinned bytes out.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.len);
        for s in self.slices() {
            s.append_to(&mut v);
        }
        v
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        for f in &self.frames {
            self.mf.dec_ref(*f);
        }
    }
}

impl MemoryManager {
    /// Makes `[addr, addr + len)` present with `access`, faulting pages in
    /// (and growing the stack) as an application access would.
    fn prepare(&self, st: &mut State, addr: u64, len: usize, access: Access) -> Result<(), MmError> {
        let end = addr.checked_add(len as u64).filter(|e| *e <= USER_TOP).ok_or(MmError::Unmapped)?;
        let mut page = page_down(addr);
        let last = page_up(end).ok_or(MmError::Unmapped)?;
        while page < last {
            let present = st.pages.get(&page).map(|p| !(access.write && p.cow)).unwrap_or(false);
            let vma_ok = st.vmas.find(page).map(|v| effective(v.access).contains(access));
            match (present, vma_ok) {
                (true, Some(true)) => page += PAGE,
                (_, Some(false)) => return Err(MmError::Access),
                _ => {
                    self.fault_locked(st, page, access)?;
                    if !st.pages.contains_key(&page) {
                        return Err(MmError::Unmapped);
                    }
                    page += PAGE;
                }
            }
        }
        Ok(())
    }

    /// Calls `f(frame, offset, len)` for each piece of `[addr, addr + len)`
    /// after making it present with `access`.
    fn with_pieces(
        &self,
        addr: u64,
        len: usize,
        access: Access,
        mut f: impl FnMut(Frame, usize, usize),
    ) -> Result<(), MmError> {
        if len == 0 {
            return Ok(());
        }
        let mut st = self.lock();
        self.prepare(&mut st, addr, len, access)?;
        let mut at = addr;
        let end = addr + len as u64;
        while at < end {
            let page = page_down(at);
            let off = (at - page) as usize;
            let n = ((PAGE as usize - off) as u64).min(end - at) as usize;
            let frame = st.pages[&page].frame;
            f(frame, off, n);
            at += n as u64;
        }
        drop(st);
        self.space.flush();
        Ok(())
    }

    /// Copies application memory into `buf`.
    pub fn copy_in(&self, addr: u64, buf: &mut [u8]) -> Result<(), MmError> {
        let mut done = 0;
        self.with_pieces(addr, buf.len(), Access::READ, |f, off, n| {
            self.mf.read(f, off, &mut buf[done..done + n]);
            done += n;
        })
    }

    /// Copies `buf` into application memory.
    pub fn copy_out(&self, addr: u64, buf: &[u8]) -> Result<(), MmError> {
        let mut done = 0;
        self.with_pieces(addr, buf.len(), Access { write: true, ..Access::READ }, |f, off, n| {
            self.mf.write(f, off, &buf[done..done + n]);
            done += n;
        })
    }

    /// Zero-fills application memory.
    pub fn zero(&self, addr: u64, len: usize) -> Result<(), MmError> {
        self.with_pieces(addr, len, Access { write: true, ..Access::READ }, |f, off, n| {
            self.mf.slice(f, off, n).fill(0);
        })
    }

    /// Reads a value of a plain-data type.
    pub fn read<T: FromBytes + IntoBytes>(&self, addr: u64) -> Result<T, MmError> {
        let mut v = T::new_zeroed();
        self.copy_in(addr, v.as_mut_bytes())?;
        Ok(v)
    }

    /// Writes a value of a plain-data type.
    pub fn write<T: IntoBytes + Immutable>(&self, addr: u64, v: &T) -> Result<(), MmError> {
        self.copy_out(addr, v.as_bytes())
    }

    /// Reads a NUL-terminated string of at most `max` bytes (without the
    /// NUL). Pages past the terminator are never touched.
    pub fn read_cstring(&self, addr: u64, max: usize) -> Result<Vec<u8>, MmError> {
        let mut out = Vec::new();
        let mut at = addr;
        loop {
            let page_end = page_down(at) + PAGE;
            let n = (page_end - at) as usize;
            let mut chunk = vec![0u8; n];
            self.copy_in(at, &mut chunk)?;
            if let Some(z) = chunk.iter().position(|b| *b == 0) {
                out.extend_from_slice(&chunk[..z]);
                if out.len() > max {
                    return Err(MmError::TooLong);
                }
                return Ok(out);
            }
            out.extend_from_slice(&chunk);
            if out.len() > max {
                return Err(MmError::TooLong);
            }
            at = page_end;
        }
    }

    /// Pins `[addr, addr + len)` for host I/O; `write` if the host will
    /// store into it.
    pub fn pin(&self, addr: u64, len: usize, write: bool) -> Result<Pinned, MmError> {
        let access = if write { Access { write: true, ..Access::READ } } else { Access::READ };
        let mut pieces: Vec<(Frame, usize, usize)> = Vec::new();
        let mut frames = Vec::new();
        self.with_pieces(addr, len, access, |f, off, n| {
            self.mf.inc_ref(f);
            frames.push(f);
            // Extend the previous piece if this one continues it in the
            // memory file, so large buffers need few host iovecs.
            if let Some(last) = pieces.last_mut() {
                let (lf, loff, llen) = *last;
                let end = loff + llen;
                if off == 0 && end % PAGE as usize == 0 && f.number() == lf.number() + (end / PAGE as usize) as u64 {
                    last.2 += n;
                    return;
                }
            }
            pieces.push((f, off, n));
        })?;
        Ok(Pinned { mf: self.mf.clone(), pieces, frames, len })
    }
}

impl MemoryManager {
    /// Writes `data` at `addr` as a debugger does (Linux's FOLL_FORCE):
    /// into a private mapping even where the application may not write, on
    /// pages of the process's own (copied from the file or from a parent as
    /// a write would copy them). Rewritten system call sites there get
    /// their bytes back first, so the write lands on the program's code.
    pub fn poke(&self, addr: u64, data: &[u8]) -> Result<(), MmError> {
        let end = addr.checked_add(data.len() as u64).filter(|e| *e <= USER_TOP).ok_or(MmError::Unmapped)?;
        let mut st = self.lock();
        self.restore_sites(&mut st, addr, end);
        let mut at = addr;
        let mut done = 0;
        let result = loop {
            if at >= end {
                break Ok(());
            }
            let page = page_down(at);
            let n = ((page + PAGE).min(end) - at) as usize;
            let Some(vma) = st.vmas.find(page).cloned() else { break Err(MmError::Unmapped) };
            let frame = if effective(vma.access).write {
                if let Err(e) = self.prepare(&mut st, at, n, Access::READ_WRITE) {
                    break Err(e);
                }
                st.pages.get(&page).map(|p| p.frame)
            } else if vma.is_private() {
                if let Err(e) =
                    self.populate_vma(&mut st, &vma, page, page + PAGE, Some((page, page + PAGE)), Some(page))
                {
                    break Err(e);
                }
                st.pages.get(&page).filter(|p| !p.cow).map(|p| p.frame)
            } else {
                None
            };
            let Some(frame) = frame else { break Err(MmError::Access) };
            self.mf.write(frame, (at - page) as usize, &data[done..done + n]);
            at += n as u64;
            done += n;
        };
        drop(st);
        self.space.flush();
        result
    }

    /// Pins the longest accessible prefix of `[addr, addr + len)`, for
    /// transfers that stop at the first bad byte with what they moved, as
    /// Linux's copies to and from user memory do. Fails only if not even the
    /// first byte is accessible (and `len` is not 0).
    pub fn pin_prefix(&self, addr: u64, len: usize, write: bool) -> Result<Pinned, MmError> {
        let access = if write { Access { write: true, ..Access::READ } } else { Access::READ };
        let end = addr.saturating_add(len as u64);
        let mut ok = addr;
        let mut first_error = None;
        {
            let mut st = self.lock();
            while ok < end {
                let piece_end = (page_down(ok) + PAGE).min(end);
                if let Err(e) = self.prepare(&mut st, ok, (piece_end - ok) as usize, access) {
                    first_error = Some(e);
                    break;
                }
                ok = piece_end;
            }
        }
        self.space.flush();
        match first_error {
            Some(e) if ok == addr => Err(e),
            _ => self.pin(addr, (ok - addr) as usize, write),
        }
    }

    /// Reads a C structure of the Linux ABI.
    pub fn read_pod<T: crate::abi::Pod>(&self, addr: u64) -> Result<T, MmError> {
        let mut buf = vec![0u8; size_of::<T>()];
        self.copy_in(addr, &mut buf)?;
        Ok(crate::abi::from_bytes(&buf))
    }

    /// Writes a C structure of the Linux ABI.
    pub fn write_pod<T: crate::abi::Pod>(&self, addr: u64, v: &T) -> Result<(), MmError> {
        self.copy_out(addr, crate::abi::bytes_of(v))
    }
}

impl MemoryManager {
    /// Runs `f` on the aligned u32 at `addr` as an atomic shared with the
    /// application's threads (futex words). `write` breaks copy-on-write
    /// first, so stores land in the memory the application sees.
    pub fn with_atomic_u32<R>(
        &self,
        addr: u64,
        write: bool,
        f: impl FnOnce(&std::sync::atomic::AtomicU32) -> R,
    ) -> Result<R, MmError> {
        if !addr.is_multiple_of(4) {
            return Err(MmError::Invalid);
        }
        let access = if write { Access { write: true, ..Access::READ } } else { Access::READ };
        let mut st = self.lock();
        self.prepare(&mut st, addr, 4, access)?;
        let frame = st.pages[&page_down(addr)].frame;
        // SAFETY: the frame is present while the lock is held; the address
        // is 4-aligned and inside the frame; AtomicU32 has the layout of u32
        // and the host CPU's atomics are coherent with the guest's.
        let atomic = unsafe {
            std::sync::atomic::AtomicU32::from_ptr(
                self.mf.frame_ptr(frame).add((addr - page_down(addr)) as usize).cast(),
            )
        };
        Ok(f(atomic))
    }

    /// For a shared mapping, the frame and offset of `addr` (the identity
    /// of a process-shared futex); None for private memory.
    pub fn shared_key(&self, addr: u64) -> Result<Option<(u64, u64)>, MmError> {
        let mut st = self.lock();
        let shared = st.vmas.find(addr).map(|v| !v.is_private()).ok_or(MmError::Unmapped)?;
        if !shared {
            return Ok(None);
        }
        self.prepare(&mut st, addr, 4, Access::READ)?;
        let frame = st.pages[&page_down(addr)].frame;
        Ok(Some((frame.number(), addr - page_down(addr))))
    }
}
