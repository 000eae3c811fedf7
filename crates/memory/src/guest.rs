//! Access to sandbox memory.
//!
//! The application's threads may load and store any byte of sandbox memory
//! at any moment, from other CPUs. A Rust reference (`&[u8]`, `&mut [u8]`)
//! over such bytes would promise the compiler that they do not change
//! meanwhile (or that nobody else sees them), a promise concurrent stores
//! break: undefined behaviour, which the optimiser is free to turn into torn
//! or repeated reads. So the sentry never forms one. A [`GuestSlice`] or
//! [`GuestSliceMut`] is an address and a length and nothing more; bytes move
//! through `vm-memory`'s volatile copies, or the host kernel moves them
//! itself when a system call is handed the slices as raw `iovec`s.
//!
//! The same types also stand for buffers of the sentry's own (made with
//! `From<&[u8]>` / `From<&mut [u8]>`), so a file operation serves an
//! application buffer and a sentry buffer alike.

use std::fmt;
use std::marker::PhantomData;
use std::os::fd::{AsRawFd, BorrowedFd};

use vm_memory::VolatileSlice;

/// Most iovecs one host call takes (UIO_MAXIOV); longer lists are cut there
/// and the transfer is short, as rustix's vectored calls do.
const MAX_IOV: usize = 1024;

/// Bytes of sandbox memory the sentry may read. Laid out as a `libc::iovec`.
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct GuestSlice<'a> {
    iov: libc::iovec,
    memory: PhantomData<&'a [u8]>,
}

/// Bytes of sandbox memory the sentry may read and write. Laid out as a
/// `libc::iovec`.
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct GuestSliceMut<'a> {
    iov: libc::iovec,
    memory: PhantomData<&'a mut [u8]>,
}

impl<'a> GuestSlice<'a> {
    /// The `len` bytes at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` is non-null and `[ptr, ptr + len)` stays mapped and readable for
    /// `'a`, and no Rust `&mut` reference to any of it is alive for `'a`.
    pub unsafe fn from_raw_parts(ptr: *const u8, len: usize) -> Self {
        GuestSlice { iov: libc::iovec { iov_base: ptr.cast_mut().cast(), iov_len: len }, memory: PhantomData }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.iov.iov_len
    }

    pub fn is_empty(&self) -> bool {
        self.iov.iov_len == 0
    }

    /// Address of the first byte, for host calls that take one.
    pub fn as_ptr(&self) -> *const u8 {
        self.iov.iov_base.cast()
    }

    /// `len` bytes from `offset` on. Panics if they are not all inside.
    pub fn subslice(&self, offset: usize, len: usize) -> Self {
        assert!(offset <= self.len() && len <= self.len() - offset, "subslice out of range");
        // SAFETY: inside self, so valid for as long as self.
        unsafe { Self::from_raw_parts(self.as_ptr().add(offset), len) }
    }

    /// The first `mid` bytes and the rest. Panics if `mid > len`.
    pub fn split_at(&self, mid: usize) -> (Self, Self) {
        (self.subslice(0, mid), self.subslice(mid, self.len() - mid))
    }

    /// Copies the first `min(len, dst.len())` bytes into `dst`; returns the
    /// count.
    pub fn copy_to(&self, dst: &mut [u8]) -> usize {
        if self.is_empty() || dst.is_empty() {
            return 0;
        }
        self.volatile().copy_to(dst)
    }

    /// Appends all the bytes to `out`.
    pub fn append_to(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.reserve(self.len());
        let spare = out.spare_capacity_mut();
        // SAFETY: the spare capacity holds at least len bytes; the source
        // is valid for reads by the type's invariant and is not the vector's
        // storage (a &mut to which is held here). u8 needs no initialisation
        // beyond its bytes, which the copy writes.
        unsafe {
            self.volatile().copy_to_volatile_slice(VolatileSlice::new(spare.as_mut_ptr().cast(), self.len()));
            out.set_len(start + self.len());
        }
    }

    /// The bytes, copied out.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::new();
        self.append_to(&mut v);
        v
    }

    /// The slices as the host's `iovec` array, for vectored host calls that
    /// read from them.
    pub fn as_iovecs<'s>(bufs: &'s [GuestSlice<'a>]) -> &'s [libc::iovec] {
        // SAFETY: GuestSlice is repr(transparent) over libc::iovec. This is
        // the sentry's own array of descriptors, not the memory they name.
        unsafe { std::slice::from_raw_parts(bufs.as_ptr().cast(), bufs.len()) }
    }

    fn volatile(&self) -> VolatileSlice<'a> {
        // SAFETY: the type's invariant makes the range valid for 'a. Only
        // reading copies are made through it (GuestSlice has no others), so
        // the cast to a mutable pointer never leads to a store.
        unsafe { VolatileSlice::new(self.iov.iov_base.cast(), self.iov.iov_len) }
    }
}

impl<'a> GuestSliceMut<'a> {
    /// The `len` bytes at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` is non-null and `[ptr, ptr + len)` stays mapped, readable and
    /// writable for `'a`, and for `'a` no Rust reference to any of it lets
    /// the compiler assume the bytes unchanged (a `&mut`, or a `&` to a type
    /// without interior mutability) other than the one it may derive from.
    pub unsafe fn from_raw_parts(ptr: *mut u8, len: usize) -> Self {
        GuestSliceMut { iov: libc::iovec { iov_base: ptr.cast(), iov_len: len }, memory: PhantomData }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.iov.iov_len
    }

    pub fn is_empty(&self) -> bool {
        self.iov.iov_len == 0
    }

    /// Address of the first byte, for host calls that take one.
    pub fn as_mut_ptr(&self) -> *mut u8 {
        self.iov.iov_base.cast()
    }

    /// The same bytes, for reading only.
    pub fn as_read_only(&self) -> GuestSlice<'a> {
        GuestSlice { iov: self.iov, memory: PhantomData }
    }

    /// `len` bytes from `offset` on. Panics if they are not all inside.
    pub fn subslice(&self, offset: usize, len: usize) -> Self {
        assert!(offset <= self.len() && len <= self.len() - offset, "subslice out of range");
        // SAFETY: inside self, so valid for as long as self.
        unsafe { Self::from_raw_parts(self.as_mut_ptr().add(offset), len) }
    }

    /// The first `mid` bytes and the rest. Panics if `mid > len`.
    pub fn split_at(&self, mid: usize) -> (Self, Self) {
        (self.subslice(0, mid), self.subslice(mid, self.len() - mid))
    }

    /// Copies the first `min(len, dst.len())` bytes into `dst`; returns the
    /// count.
    pub fn copy_to(&self, dst: &mut [u8]) -> usize {
        self.as_read_only().copy_to(dst)
    }

    /// Copies `src` into the first `min(len, src.len())` bytes; returns the
    /// count.
    pub fn copy_from(&self, src: &[u8]) -> usize {
        if self.is_empty() || src.is_empty() {
            return 0;
        }
        self.volatile().copy_from(src);
        src.len().min(self.len())
    }

    /// Copies the first `min(len, src.len())` bytes of `src` in; returns the
    /// count. The two may overlap.
    pub fn copy_from_guest(&self, src: GuestSlice<'_>) -> usize {
        let n = src.len().min(self.len());
        if n == 0 {
            return 0;
        }
        src.volatile().copy_to_volatile_slice(self.volatile());
        n
    }

    /// Sets every byte to `byte`.
    pub fn fill(&self, byte: u8) {
        if self.is_empty() {
            return;
        }
        // SAFETY: valid for writes of len bytes by the type's invariant; a
        // raw-pointer store forms no reference, and any interleaving with
        // the application's own stores leaves plain bytes.
        unsafe { std::ptr::write_bytes(self.as_mut_ptr(), byte, self.len()) }
    }

    /// Appends all the bytes to `out`.
    pub fn append_to(&self, out: &mut Vec<u8>) {
        self.as_read_only().append_to(out)
    }

    /// The bytes, copied out.
    pub fn to_vec(&self) -> Vec<u8> {
        self.as_read_only().to_vec()
    }

    /// The slices as the host's `iovec` array, for vectored host calls that
    /// write into them.
    pub fn as_iovecs<'s>(bufs: &'s [GuestSliceMut<'a>]) -> &'s [libc::iovec] {
        // SAFETY: GuestSliceMut is repr(transparent) over libc::iovec. This
        // is the sentry's own array of descriptors, not the memory they name.
        unsafe { std::slice::from_raw_parts(bufs.as_ptr().cast(), bufs.len()) }
    }

    fn volatile(&self) -> VolatileSlice<'a> {
        // SAFETY: the type's invariant makes the range valid for reads and
        // writes for 'a.
        unsafe { VolatileSlice::new(self.as_mut_ptr(), self.len()) }
    }
}

impl<'a> From<&'a [u8]> for GuestSlice<'a> {
    fn from(buf: &'a [u8]) -> Self {
        // SAFETY: a shared borrow for 'a: readable, and no &mut can coexist.
        unsafe { GuestSlice::from_raw_parts(buf.as_ptr(), buf.len()) }
    }
}

impl<'a> From<&'a mut [u8]> for GuestSliceMut<'a> {
    fn from(buf: &'a mut [u8]) -> Self {
        // SAFETY: an exclusive borrow for 'a, from which the pointer derives.
        unsafe { GuestSliceMut::from_raw_parts(buf.as_mut_ptr(), buf.len()) }
    }
}

impl<'a> From<GuestSliceMut<'a>> for GuestSlice<'a> {
    fn from(s: GuestSliceMut<'a>) -> Self {
        s.as_read_only()
    }
}

impl fmt::Debug for GuestSlice<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GuestSlice({:p}, {})", self.as_ptr(), self.len())
    }
}

impl fmt::Debug for GuestSliceMut<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GuestSliceMut({:p}, {})", self.as_mut_ptr(), self.len())
    }
}

fn host_result(r: isize) -> rustix::io::Result<usize> {
    if r < 0 {
        let raw = std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO);
        Err(rustix::io::Errno::from_raw_os_error(raw))
    } else {
        Ok(r as usize)
    }
}

/// `readv(2)` straight into `bufs`.
pub fn readv(fd: BorrowedFd<'_>, bufs: &[GuestSliceMut<'_>]) -> rustix::io::Result<usize> {
    let iov = GuestSliceMut::as_iovecs(&bufs[..bufs.len().min(MAX_IOV)]);
    // SAFETY: every iovec is valid for writes for the slices' lifetime,
    // which outlasts the call; the host writes only inside them.
    host_result(unsafe { libc::readv(fd.as_raw_fd(), iov.as_ptr(), iov.len() as libc::c_int) })
}

/// `preadv(2)` straight into `bufs`.
pub fn preadv(fd: BorrowedFd<'_>, bufs: &[GuestSliceMut<'_>], offset: u64) -> rustix::io::Result<usize> {
    let iov = GuestSliceMut::as_iovecs(&bufs[..bufs.len().min(MAX_IOV)]);
    // SAFETY: as for readv.
    host_result(unsafe { libc::preadv(fd.as_raw_fd(), iov.as_ptr(), iov.len() as libc::c_int, offset as libc::off_t) })
}

/// `writev(2)` straight out of `bufs`.
pub fn writev(fd: BorrowedFd<'_>, bufs: &[GuestSlice<'_>]) -> rustix::io::Result<usize> {
    let iov = GuestSlice::as_iovecs(&bufs[..bufs.len().min(MAX_IOV)]);
    // SAFETY: every iovec is valid for reads for the slices' lifetime, which
    // outlasts the call; the host only reads them.
    host_result(unsafe { libc::writev(fd.as_raw_fd(), iov.as_ptr(), iov.len() as libc::c_int) })
}

/// `pwritev(2)` straight out of `bufs`.
pub fn pwritev(fd: BorrowedFd<'_>, bufs: &[GuestSlice<'_>], offset: u64) -> rustix::io::Result<usize> {
    let iov = GuestSlice::as_iovecs(&bufs[..bufs.len().min(MAX_IOV)]);
    // SAFETY: as for writev.
    host_result(unsafe { libc::pwritev(fd.as_raw_fd(), iov.as_ptr(), iov.len() as libc::c_int, offset as libc::off_t) })
}

/// `pwritev2(2)` with `RWF_APPEND` straight out of `bufs`: the host
/// writes at the file's end, found and written in one step.
pub fn pwritev_append(fd: BorrowedFd<'_>, bufs: &[GuestSlice<'_>]) -> rustix::io::Result<usize> {
    let iov = GuestSlice::as_iovecs(&bufs[..bufs.len().min(MAX_IOV)]);
    // SAFETY: as for writev; the offset -1 means the current one, which
    // RWF_APPEND overrides with the end of the file.
    host_result(unsafe { libc::pwritev2(fd.as_raw_fd(), iov.as_ptr(), iov.len() as libc::c_int, -1, libc::RWF_APPEND) })
}

/// `getrandom(2)` straight into `buf`: fills a prefix of it with bytes of
/// the host's CSPRNG and returns its length.
pub fn getrandom(buf: GuestSliceMut<'_>) -> rustix::io::Result<usize> {
    // SAFETY: the host writes at most buf.len() bytes at its address, which
    // the slice keeps valid for writes.
    host_result(unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), 0) })
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;

    use super::*;

    #[test]
    fn copies_are_bounded_by_the_shorter_side() {
        let mut mem = [0u8; 8];
        let s = GuestSliceMut::from(&mut mem[..]);
        assert_eq!(s.copy_from(b"0123456789"), 8);
        let mut out = [0u8; 4];
        assert_eq!(s.copy_to(&mut out), 4);
        assert_eq!(&out, b"0123");
        assert_eq!(s.subslice(6, 2).copy_from(b"xyz"), 2);
        assert_eq!(s.to_vec(), b"012345xy");
        let (a, b) = s.as_read_only().split_at(3);
        assert_eq!((a.to_vec(), b.to_vec()), (b"012".to_vec(), b"345xy".to_vec()));
    }

    #[test]
    fn zero_length_slices_move_nothing() {
        let mut mem = [7u8; 4];
        let s = GuestSliceMut::from(&mut mem[..]);
        let empty = s.subslice(4, 0);
        assert!(empty.is_empty());
        assert_eq!(empty.copy_from(b"abc"), 0);
        assert_eq!(empty.copy_to(&mut [0u8; 3]), 0);
        empty.fill(0);
        assert_eq!(empty.to_vec(), b"");
        assert_eq!(s.copy_from(b""), 0);
        assert_eq!(s.copy_to(&mut []), 0);
        let none = GuestSliceMut::from(&mut [][..]);
        none.fill(1);
        assert_eq!(none.copy_from_guest(s.as_read_only()), 0);
        assert_eq!(mem, [7; 4]);
    }

    #[test]
    #[should_panic(expected = "subslice out of range")]
    fn a_subslice_past_the_end_is_refused() {
        let mem = [0u8; 4];
        GuestSlice::from(&mem[..]).subslice(3, 2);
    }

    #[test]
    fn fill_and_overlapping_copies() {
        let mut mem = *b"abcdefgh";
        let s = GuestSliceMut::from(&mut mem[..]);
        s.subslice(0, 2).fill(b'-');
        assert_eq!(s.subslice(2, 6).copy_from_guest(s.subslice(0, 6).as_read_only()), 6);
        assert_eq!(&mem, b"----cdef");
    }

    #[test]
    fn small_copies_of_every_length_and_alignment() {
        // The volatile copies take a different path for short and aligned
        // runs; every byte must still land where it belongs.
        let src: Vec<u8> = (1..=32).collect();
        for off in 0..8 {
            for len in 0..=17 {
                let mut mem = [0u8; 40];
                let s = GuestSliceMut::from(&mut mem[..]);
                assert_eq!(s.subslice(off, len).copy_from(&src[..len]), len);
                let mut back = vec![0u8; len];
                assert_eq!(s.subslice(off, len).copy_to(&mut back), len);
                assert_eq!(back, &src[..len]);
                assert!(mem[..off].iter().chain(&mem[off + len..]).all(|b| *b == 0), "{off} {len}");
            }
        }
    }

    #[test]
    fn appending_keeps_what_was_there() {
        let mem = *b"tail";
        let mut v = b"head ".to_vec();
        GuestSlice::from(&mem[..]).append_to(&mut v);
        assert_eq!(v, b"head tail");
    }

    #[test]
    fn iovecs_name_the_same_bytes() {
        let mut mem = [0u8; 16];
        let s = GuestSliceMut::from(&mut mem[..]);
        let bufs = [s.subslice(1, 3), s.subslice(8, 8)];
        let iov = GuestSliceMut::as_iovecs(&bufs);
        assert_eq!(iov.len(), 2);
        assert_eq!((iov[0].iov_base as *mut u8, iov[0].iov_len), (s.as_mut_ptr().wrapping_add(1), 3));
        assert_eq!((iov[1].iov_base as *mut u8, iov[1].iov_len), (s.as_mut_ptr().wrapping_add(8), 8));
        let ro: Vec<GuestSlice> = bufs.iter().map(|b| b.as_read_only()).collect();
        let iov = GuestSlice::as_iovecs(&ro);
        assert_eq!((iov[1].iov_base as *const u8, iov[1].iov_len), (s.as_mut_ptr().wrapping_add(8) as *const u8, 8));
    }

    #[test]
    fn host_vectored_calls_move_bytes_directly() {
        let (r, w) = rustix::pipe::pipe().unwrap();
        let data = *b"hello, world";
        let out = [GuestSlice::from(&data[..5]), GuestSlice::from(&data[5..])];
        assert_eq!(writev(w.as_fd(), &out).unwrap(), 12);
        let mut mem = [0u8; 12];
        let s = GuestSliceMut::from(&mut mem[..]);
        assert_eq!(readv(r.as_fd(), &[s.subslice(0, 3), s.subslice(3, 9)]).unwrap(), 12);
        assert_eq!(&mem, b"hello, world");

        let f = rustix::fs::memfd_create("guest-test", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
        assert_eq!(pwritev(f.as_fd(), &[GuestSlice::from(&b"abcdef"[..])], 10).unwrap(), 6);
        let mut mem = [0u8; 4];
        let s = GuestSliceMut::from(&mut mem[..]);
        assert_eq!(preadv(f.as_fd(), &[s.subslice(0, 1), s.subslice(1, 3)], 12).unwrap(), 4);
        assert_eq!(preadv(f.as_fd(), &[s], 16).unwrap(), 0, "end of file");
        assert_eq!(&mem, b"cdef");
        drop(r);
        assert_eq!(writev(w.as_fd(), &out), Err(rustix::io::Errno::PIPE));
    }

    #[test]
    fn random_bytes_land_in_the_slice_only() {
        let mut mem = [0u8; 4 + 256 + 4];
        let s = GuestSliceMut::from(&mut mem[..]);
        let mut got = 0;
        while got < 256 {
            got += getrandom(s.subslice(4 + got, 256 - got)).unwrap();
        }
        assert_eq!(&mem[..4], &[0; 4]);
        assert_eq!(&mem[260..], &[0; 4]);
        assert!(mem[4..260].iter().any(|b| *b != 0), "256 random bytes are not all zero");
    }

    #[test]
    fn host_calls_take_at_most_uio_maxiov_slices() {
        let f = rustix::fs::memfd_create("guest-test", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
        let data = vec![1u8; MAX_IOV + 10];
        let bufs: Vec<GuestSlice> = data.chunks(1).map(GuestSlice::from).collect();
        assert_eq!(pwritev(f.as_fd(), &bufs, 0).unwrap(), MAX_IOV);
    }
}
