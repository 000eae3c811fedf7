//! The memory file and its frame allocator.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::Mutex;

use rustix::fs::{FallocateFlags, MemfdFlags, fallocate, ftruncate, memfd_create};
use rustix::mm::{Advice, MapFlags, ProtFlags, madvise, mmap, munmap};

use crate::refcount::RefTable;
use crate::{Frame, GuestSliceMut, MemoryError, PAGE_SIZE, frame_runs};

/// Freed frames are reclaimed in batches of at least this many, so a burst of
/// frees costs a few host calls rather than one per frame.
const RECLAIM_BATCH: usize = 256;

/// Up to this many freed frames are kept backed for reuse (64 MiB) instead
/// of being punched out. Reusing a backed frame costs clearing 4 KiB;
/// punching and later refaulting it costs a host page allocation plus
/// clearing, several times more, and that is most of what a fork + exec
/// spends on memory.
pub const DEFAULT_RECYCLE_LIMIT: usize = 16384;

/// Drops every translation another mapping of the memory file holds for the
/// frames `[first, first + count)`; false if it could not.
pub type Invalidator = Box<dyn Fn(Frame, u64) -> bool + Send + Sync>;

/// Counters describing the memory file, for `--profile` and leak checks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Frames currently allocated.
    pub frames_in_use: u64,
    /// Most frames allocated at once.
    pub frames_peak: u64,
    /// Frames ever handed out from the top of the file (the high-water mark).
    pub frames_high_water: u64,
    /// Allocations served in total.
    pub allocations: u64,
    /// Host `fallocate(PUNCH_HOLE)` calls made to return freed frames.
    pub punch_calls: u64,
    /// Freed frames currently kept backed for reuse.
    pub frames_recycled: u64,
    /// Frames' worth of capacity charged for the sentry's own state held on
    /// the application's behalf (see [`MemoryFile::charge`]).
    pub frames_charged: u64,
}

struct AllocState {
    /// Frames `[0, next)` have been handed out at some point.
    next: u64,
    /// Punched (hence zero) frames ready for reuse. Min-heaps, so the lowest
    /// frame goes out first and allocations stay clustered.
    free: BinaryHeap<Reverse<u64>>,
    /// Freed frames still backed by host memory, with no translation left
    /// anywhere; cleared when handed out again.
    recycled: BinaryHeap<Reverse<u64>>,
    /// Freed frames that other mappings may still translate.
    pending: Vec<Frame>,
    stats: MemoryStats,
}

impl AllocState {
    /// Frames of capacity taken: allocated frames plus charges.
    fn used(&self) -> u64 {
        self.stats.frames_in_use + self.stats.frames_charged
    }
}

/// One memfd holding every frame of the sandbox's memory.
pub struct MemoryFile {
    fd: OwnedFd,
    base: NonNull<u8>,
    capacity_frames: u64,
    refs: RefTable,
    state: Mutex<AllocState>,
    recycle_limit: usize,
    invalidators: Mutex<Vec<Invalidator>>,
    /// The frame every untouched private page reads through, allocated on
    /// first use and never freed.
    zero_frame: std::sync::OnceLock<Frame>,
}

// SAFETY: the mapping is shared by design: frames are handed to one owner at a
// time by the allocator, and the bytes are only reached through raw pointers
// (GuestSlice copies, host calls, atomics), never Rust references, so the
// application's concurrent stores are no data race of the sentry's. Internal
// state is behind a Mutex.
unsafe impl Send for MemoryFile {}
// SAFETY: as above.
unsafe impl Sync for MemoryFile {}

impl MemoryFile {
    /// Creates a memory file able to hold `capacity` bytes (rounded down to
    /// whole frames). Nothing is backed until used.
    pub fn new(capacity: u64) -> Result<Self, MemoryError> {
        Self::with_recycle_limit(capacity, DEFAULT_RECYCLE_LIMIT)
    }

    /// As [`new`](Self::new), keeping at most `recycle_limit` freed frames
    /// backed for reuse.
    pub fn with_recycle_limit(capacity: u64, recycle_limit: usize) -> Result<Self, MemoryError> {
        let capacity_frames = capacity / PAGE_SIZE;
        let fd = memfd_create("cordon-memory", MemfdFlags::CLOEXEC)?;
        ftruncate(&fd, capacity_frames * PAGE_SIZE)?;
        // SAFETY: a new shared mapping of our own memfd; unmapped in Drop and
        // never handed out beyond the lifetime of self.
        let base = unsafe {
            mmap(
                std::ptr::null_mut(),
                (capacity_frames * PAGE_SIZE) as usize,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED | MapFlags::NORESERVE,
                &fd,
                0,
            )?
        };
        Ok(MemoryFile {
            fd,
            base: NonNull::new(base.cast()).expect("mmap returned null"),
            capacity_frames,
            refs: RefTable::new(capacity_frames as usize)?,
            state: Mutex::new(AllocState {
                next: 0,
                free: BinaryHeap::new(),
                recycled: BinaryHeap::new(),
                pending: Vec::new(),
                stats: MemoryStats::default(),
            }),
            recycle_limit,
            invalidators: Mutex::new(Vec::new()),
            zero_frame: std::sync::OnceLock::new(),
        })
    }

    /// Registers a mapping of the file made outside this type (a
    /// hypervisor's view of it) whose translations of a freed frame must be
    /// dropped before the frame is reused. Punching a frame drops every
    /// mapping's translations by itself; recycling needs this.
    pub fn add_invalidator(&self, invalidate: Invalidator) {
        self.invalidators.lock().unwrap().push(invalidate);
    }

    /// The memfd, for platforms that map it themselves.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Capacity in bytes.
    pub fn capacity(&self) -> u64 {
        self.capacity_frames * PAGE_SIZE
    }

    /// Allocates one zero-filled frame with a reference count of one.
    pub fn allocate(&self) -> Result<Frame, MemoryError> {
        let (f, dirty) = {
            let mut st = self.state.lock().unwrap();
            self.allocate_locked(&mut st)?
        };
        if dirty {
            self.zero(f);
        }
        Ok(f)
    }

    /// Allocates `n` zero-filled frames, appending them to `out`. Frames come
    /// out lowest first, which keeps later host calls on them to a few runs.
    /// On failure nothing is allocated.
    pub fn allocate_many(&self, n: usize, out: &mut Vec<Frame>) -> Result<(), MemoryError> {
        let start = out.len();
        let mut dirty = Vec::new();
        {
            let mut st = self.state.lock().unwrap();
            for _ in 0..n {
                match self.allocate_locked(&mut st) {
                    Ok((f, d)) => {
                        out.push(f);
                        if d {
                            dirty.push(f);
                        }
                    }
                    Err(e) => {
                        for f in out.drain(start..) {
                            self.refs.set(f.number(), 0);
                            if dirty.contains(&f) {
                                st.recycled.push(Reverse(f.number()));
                            } else {
                                st.free.push(Reverse(f.number()));
                            }
                            st.stats.frames_in_use -= 1;
                        }
                        st.stats.frames_recycled = st.recycled.len() as u64;
                        return Err(e);
                    }
                }
            }
        }
        // Clearing happens outside the lock: nobody else can reach these
        // frames yet.
        for f in dirty {
            self.zero(f);
        }
        Ok(())
    }

    /// A frame and whether it still holds old contents.
    fn allocate_locked(&self, st: &mut AllocState) -> Result<(Frame, bool), MemoryError> {
        if st.used() >= self.capacity_frames {
            return Err(MemoryError::Exhausted { capacity: self.capacity() });
        }
        if st.recycled.is_empty() && st.free.is_empty() && st.next == self.capacity_frames && !st.pending.is_empty() {
            self.reclaim_locked(st);
        }
        let (n, dirty) = if let Some(Reverse(n)) = st.recycled.pop() {
            st.stats.frames_recycled = st.recycled.len() as u64;
            (n, true)
        } else if let Some(Reverse(n)) = st.free.pop() {
            (n, false)
        } else if st.next < self.capacity_frames {
            st.next += 1;
            st.stats.frames_high_water = st.next;
            (st.next - 1, false)
        } else {
            return Err(MemoryError::Exhausted { capacity: self.capacity() });
        };
        self.refs.set(n, 1);
        st.stats.allocations += 1;
        st.stats.frames_in_use += 1;
        st.stats.frames_peak = st.stats.frames_peak.max(st.stats.frames_in_use);
        Ok((Frame::from_number(n), dirty))
    }

    /// The shared frame of zeros that untouched private memory reads
    /// through, mapped read-only wherever it appears. It is never written
    /// and never freed; its one permanent reference makes every mapping of
    /// it copy-on-write.
    pub fn zero_frame(&self) -> Result<Frame, MemoryError> {
        if let Some(f) = self.zero_frame.get() {
            return Ok(*f);
        }
        let f = self.allocate()?;
        let kept = *self.zero_frame.get_or_init(|| f);
        if kept != f {
            // Another thread made it first.
            self.dec_ref(f);
        }
        Ok(kept)
    }

    /// True if `f` is the [`zero_frame`](Self::zero_frame).
    pub fn is_zero_frame(&self, f: Frame) -> bool {
        self.zero_frame.get() == Some(&f)
    }

    /// Takes `frames` frames' worth of capacity for state the sentry keeps
    /// on the application's behalf outside the file (task and mapping
    /// records), so that what an application makes the sentry hold counts
    /// against the same limit as its memory. Fails, charging nothing, if
    /// that much capacity is not free.
    pub fn charge(&self, frames: u64) -> Result<(), MemoryError> {
        let mut st = self.state.lock().unwrap();
        if st.used() + frames > self.capacity_frames {
            return Err(MemoryError::Exhausted { capacity: self.capacity() });
        }
        st.stats.frames_charged += frames;
        Ok(())
    }

    /// Gives back capacity taken by [`charge`](Self::charge).
    pub fn uncharge(&self, frames: u64) {
        let mut st = self.state.lock().unwrap();
        assert!(st.stats.frames_charged >= frames, "uncharging more than was charged");
        st.stats.frames_charged -= frames;
    }

    /// Takes another reference on an allocated frame.
    pub fn inc_ref(&self, f: Frame) {
        self.refs.inc(f.number());
    }

    /// Drops a reference; the frame is freed when the last one goes. Freed
    /// frames keep their contents until [`reclaim`](Self::reclaim) punches
    /// them out, and are not reused before that.
    pub fn dec_ref(&self, f: Frame) {
        if self.refs.dec(f.number()) == 0 {
            let mut st = self.state.lock().unwrap();
            st.stats.frames_in_use -= 1;
            st.pending.push(f);
            if st.pending.len() >= RECLAIM_BATCH {
                self.reclaim_locked(&mut st);
            }
        }
    }

    /// Current reference count of a frame (zero if free).
    pub fn ref_count(&self, f: Frame) -> u32 {
        self.refs.get(f.number())
    }

    /// Reclaims every freed frame now: each one's translations in other
    /// mappings are dropped, and it is either kept backed for reuse or
    /// punched out of the file (returning its memory to the host).
    pub fn reclaim(&self) {
        let mut st = self.state.lock().unwrap();
        if !st.pending.is_empty() {
            self.reclaim_locked(&mut st);
        }
    }

    /// Punches every freed frame out of the file, recycled ones included, so
    /// the host gets all memory not in use back.
    pub fn trim(&self) {
        let mut st = self.state.lock().unwrap();
        let mut frames: Vec<Frame> = std::mem::take(&mut st.pending);
        frames.extend(st.recycled.drain().map(|Reverse(n)| Frame::from_number(n)));
        st.stats.frames_recycled = 0;
        frames.sort_unstable();
        let invalidators = self.invalidators.lock().unwrap();
        for (first, n) in frame_runs(&frames) {
            self.punch(&mut st, &invalidators, first, n);
        }
    }

    fn reclaim_locked(&self, st: &mut AllocState) {
        let mut pending = std::mem::take(&mut st.pending);
        pending.sort_unstable();
        let invalidators = self.invalidators.lock().unwrap();
        for (first, n) in frame_runs(&pending) {
            let room = st.recycled.len() + n as usize <= self.recycle_limit;
            if room && invalidators.iter().all(|inv| inv(first, n)) {
                st.recycled.extend((first.number()..first.number() + n).map(Reverse));
            } else {
                self.punch(st, &invalidators, first, n);
            }
        }
        st.stats.frames_recycled = st.recycled.len() as u64;
        pending.clear();
        st.pending = pending;
    }

    /// Punches `[first, first + n)` out of the file and makes the frames free.
    fn punch(&self, st: &mut AllocState, invalidators: &[Invalidator], first: Frame, n: u64) {
        // A failed punch only costs host memory: the frames are then cleared
        // by hand, and the punch's other effect, dropping every mapping's
        // translations, is obtained from the invalidators.
        if fallocate(&self.fd, FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE, first.offset(), n * PAGE_SIZE)
            .is_err()
        {
            for inv in invalidators {
                inv(first, n);
            }
            for i in 0..n {
                self.zero(Frame::from_number(first.number() + i));
            }
        }
        st.stats.punch_calls += 1;
        st.free.extend((first.number()..first.number() + n).map(Reverse));
    }

    /// Counters for reports.
    pub fn stats(&self) -> MemoryStats {
        self.state.lock().unwrap().stats
    }

    /// Frames `[0, high_water)` are the only ones ever handed out.
    pub fn high_water(&self) -> u64 {
        self.state.lock().unwrap().next
    }

    /// Address of a frame in the sentry's mapping, for host calls on the
    /// mapping and for atomics shared with the application. Bytes of the
    /// frame are read and written through [`slice`](Self::slice), never
    /// through a reference made from this; the frame must be allocated.
    pub fn frame_ptr(&self, f: Frame) -> *mut u8 {
        assert!(f.number() < self.capacity_frames, "frame {f:?} outside the memory file");
        // SAFETY: in bounds of the mapping by the assert above.
        unsafe { self.base.as_ptr().add(f.offset() as usize) }
    }

    /// Bytes `[offset, offset + len)` from the start of frame `first`, which
    /// may run on into the frames after it. Their contents are the business
    /// of whoever holds references on those frames.
    pub fn slice(&self, first: Frame, offset: usize, len: usize) -> GuestSliceMut<'_> {
        let start = first.offset().checked_add(offset as u64);
        let end = start.and_then(|s| s.checked_add(len as u64));
        assert!(end.is_some_and(|e| e <= self.capacity()), "{len} bytes at {first:?}+{offset} outside the memory file");
        // SAFETY: in bounds of the mapping, which lives as long as self and
        // is never referenced by Rust references.
        unsafe { GuestSliceMut::from_raw_parts(self.base.as_ptr().add(start.unwrap() as usize), len) }
    }

    /// One whole frame.
    pub fn frame(&self, f: Frame) -> GuestSliceMut<'_> {
        self.slice(f, 0, PAGE_SIZE as usize)
    }

    /// Copies `buf.len()` bytes out of a frame starting at `offset`.
    pub fn read(&self, f: Frame, offset: usize, buf: &mut [u8]) {
        assert!(offset + buf.len() <= PAGE_SIZE as usize);
        self.slice(f, offset, buf.len()).copy_to(buf);
    }

    /// Copies `buf` into a frame starting at `offset`.
    pub fn write(&self, f: Frame, offset: usize, buf: &[u8]) {
        assert!(offset + buf.len() <= PAGE_SIZE as usize);
        self.slice(f, offset, buf.len()).copy_from(buf);
    }

    /// Backs `frames` with host memory in the sentry's mapping ahead of a
    /// bulk write into them: one call per run of consecutive frames instead
    /// of one host page fault per frame. Only a hint; failures are ignored
    /// (the writes then fault the pages in one by one).
    pub fn populate(&self, frames: &[Frame]) {
        let mut sorted = frames.to_vec();
        sorted.sort_unstable();
        for (first, n) in frame_runs(&sorted) {
            // SAFETY: the range is allocated frames inside our mapping;
            // populating faults pages in without changing their contents.
            let _ =
                unsafe { madvise(self.frame_ptr(first).cast(), (n * PAGE_SIZE) as usize, Advice::LinuxPopulateWrite) };
        }
    }

    /// Fills a frame with zeros.
    pub fn zero(&self, f: Frame) {
        self.frame(f).fill(0);
    }

    /// Copies the contents of frame `src` into frame `dst`.
    pub fn copy_frame(&self, src: Frame, dst: Frame) {
        assert_ne!(src, dst);
        self.frame(dst).copy_from_guest(self.frame(src).as_read_only());
    }

    /// Reads a little-endian u64 at a byte offset of the file (8-aligned).
    pub fn read_u64(&self, offset: u64) -> u64 {
        assert!(offset.is_multiple_of(8) && offset < self.capacity());
        // SAFETY: aligned and in bounds; page-table entries are read this way
        // while only the owning address space writes them.
        unsafe { std::ptr::read_volatile(self.base.as_ptr().add(offset as usize).cast::<u64>()) }
    }

    /// Writes a little-endian u64 at a byte offset of the file (8-aligned).
    pub fn write_u64(&self, offset: u64, v: u64) {
        assert!(offset.is_multiple_of(8) && offset < self.capacity());
        // SAFETY: aligned and in bounds; a single aligned store, so a guest
        // walking the same table sees either the old or the new entry.
        unsafe { std::ptr::write_volatile(self.base.as_ptr().add(offset as usize).cast::<u64>(), v) }
    }
}

impl Drop for MemoryFile {
    fn drop(&mut self) {
        // SAFETY: unmaps the mapping made in new(); nothing borrowed from it
        // can outlive self.
        unsafe {
            let _ = munmap(self.base.as_ptr().cast(), (self.capacity_frames * PAGE_SIZE) as usize);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resident_kib(mf: &MemoryFile) -> u64 {
        let st = rustix::fs::fstat(mf.fd()).unwrap();
        st.st_blocks as u64 / 2
    }

    #[test]
    fn frames_start_zero_and_count_references() {
        let mf = MemoryFile::new(1 << 20).unwrap();
        let a = mf.allocate().unwrap();
        let mut buf = [1u8; 16];
        mf.read(a, 100, &mut buf);
        assert_eq!(buf, [0; 16]);
        mf.write(a, 100, b"hello");
        mf.inc_ref(a);
        assert_eq!(mf.ref_count(a), 2);
        mf.dec_ref(a);
        assert_eq!(mf.ref_count(a), 1);
        assert_eq!(mf.stats().frames_in_use, 1);
        mf.dec_ref(a);
        assert_eq!(mf.stats().frames_in_use, 0);
    }

    #[test]
    fn freed_frames_are_punched_and_reused_zeroed() {
        let mf = MemoryFile::with_recycle_limit(1 << 20, 0).unwrap();
        let mut v = Vec::new();
        mf.allocate_many(8, &mut v).unwrap();
        for f in &v {
            mf.write(*f, 0, &[0xaa; 64]);
        }
        assert!(resident_kib(&mf) >= 32);
        for f in &v {
            mf.dec_ref(*f);
        }
        mf.reclaim();
        assert_eq!(resident_kib(&mf), 0, "punched frames give memory back");
        let again = mf.allocate().unwrap();
        assert_eq!(again, v[0], "lowest freed frame is reused first");
        let mut buf = [1u8; 64];
        mf.read(again, 0, &mut buf);
        assert_eq!(buf, [0; 64]);
        assert_eq!(mf.stats().frames_high_water, 8);
    }

    #[test]
    fn recycled_frames_are_invalidated_kept_and_cleared() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicU64, Ordering};
        let mf = MemoryFile::with_recycle_limit(1 << 20, 6).unwrap();
        let invalidated = Arc::new(AtomicU64::new(0));
        let seen = invalidated.clone();
        mf.add_invalidator(Box::new(move |_, n| {
            seen.fetch_add(n, Ordering::Relaxed);
            true
        }));
        let mut v = Vec::new();
        mf.allocate_many(8, &mut v).unwrap();
        for f in &v {
            mf.write(*f, 0, &[0xaa; 64]);
        }
        for f in &v[..4] {
            mf.dec_ref(*f);
        }
        mf.reclaim();
        assert_eq!(invalidated.load(Ordering::Relaxed), 4, "recycling drops other mappings' translations");
        assert_eq!(mf.stats().frames_recycled, 4);
        assert_eq!(mf.stats().punch_calls, 0);
        assert!(resident_kib(&mf) >= 32, "recycled frames stay backed");
        // Past the limit, frees are punched.
        for f in &v[4..] {
            mf.dec_ref(*f);
        }
        mf.reclaim();
        assert_eq!(mf.stats().frames_recycled, 4);
        assert!(mf.stats().punch_calls >= 1);
        let mut again = Vec::new();
        mf.allocate_many(8, &mut again).unwrap();
        assert_eq!(&again[..4], &v[..4], "recycled frames go out first");
        for f in &again {
            let mut buf = [1u8; 64];
            mf.read(*f, 0, &mut buf);
            assert_eq!(buf, [0; 64], "frame {f:?} handed out with old contents");
        }
        assert_eq!(mf.stats().frames_high_water, 8);
        for f in again {
            mf.dec_ref(f);
        }
        mf.reclaim();
        mf.trim();
        assert_eq!(mf.stats().frames_recycled, 0);
        assert_eq!(resident_kib(&mf), 0, "trim gives everything back");
    }

    #[test]
    fn a_refused_invalidation_means_a_punch() {
        let mf = MemoryFile::with_recycle_limit(1 << 20, 64).unwrap();
        mf.add_invalidator(Box::new(|_, _| false));
        let f = mf.allocate().unwrap();
        mf.write(f, 0, b"secret");
        mf.dec_ref(f);
        mf.reclaim();
        assert_eq!(mf.stats().frames_recycled, 0);
        assert_eq!(mf.stats().punch_calls, 1);
    }

    #[test]
    fn exhaustion_is_an_error_and_allocate_many_is_all_or_nothing() {
        let mf = MemoryFile::new(4 * PAGE_SIZE).unwrap();
        let mut v = Vec::new();
        assert!(matches!(mf.allocate_many(5, &mut v), Err(MemoryError::Exhausted { .. })));
        assert!(v.is_empty());
        assert_eq!(mf.stats().frames_in_use, 0);
        mf.allocate_many(4, &mut v).unwrap();
        assert!(mf.allocate().is_err());
        mf.dec_ref(v[2]);
        assert_eq!(mf.allocate().unwrap(), v[2], "a pending free is reclaimed when the file is full");
    }

    #[test]
    fn charges_take_capacity_from_frames_and_back() {
        let mf = MemoryFile::new(4 * PAGE_SIZE).unwrap();
        mf.charge(3).unwrap();
        assert!(mf.charge(2).is_err(), "more than is free");
        let f = mf.allocate().unwrap();
        assert!(mf.allocate().is_err(), "charges and frames share the capacity");
        assert!(mf.charge(1).is_err());
        mf.uncharge(2);
        assert_eq!(mf.stats().frames_charged, 1);
        mf.allocate().unwrap();
        mf.allocate().unwrap();
        assert!(mf.allocate().is_err());
        mf.dec_ref(f);
        mf.charge(1).unwrap();
    }

    #[test]
    fn the_zero_frame_is_one_kept_frame_of_zeros() {
        let mf = MemoryFile::new(1 << 20).unwrap();
        let z = mf.zero_frame().unwrap();
        assert_eq!(mf.zero_frame().unwrap(), z);
        assert!(mf.frame(z).to_vec().iter().all(|b| *b == 0));
        mf.inc_ref(z);
        mf.dec_ref(z);
        assert_eq!(mf.ref_count(z), 1, "its own reference stays");
    }

    #[test]
    fn slices_run_across_frame_boundaries() {
        let mf = MemoryFile::new(1 << 20).unwrap();
        let mut v = Vec::new();
        mf.allocate_many(3, &mut v).unwrap();
        assert_eq!(v.iter().map(|f| f.number()).collect::<Vec<_>>(), [0, 1, 2], "a fresh file hands out a run");
        let page = PAGE_SIZE as usize;
        let data: Vec<u8> = (0..page + 200).map(|i| (i % 251) as u8).collect();
        let s = mf.slice(v[0], page - 100, data.len());
        assert_eq!(s.copy_from(&data), data.len());
        let mut tail = [0u8; 100];
        mf.read(v[0], page - 100, &mut tail);
        assert_eq!(&tail[..], &data[..100], "end of the first frame");
        let mut head = [0u8; 100];
        mf.read(v[2], 0, &mut head);
        assert_eq!(&head[..], &data[page + 100..], "start of the third frame");
        assert_eq!(s.to_vec(), data);
        assert_eq!(mf.slice(v[1], 0, 0).to_vec(), b"", "a zero-length slice");

        // Frame copies and zeroing go through the same slices.
        let spare = mf.allocate().unwrap();
        mf.copy_frame(v[1], spare);
        assert_eq!(mf.frame(spare).to_vec(), mf.frame(v[1]).to_vec());
        mf.zero(v[1]);
        assert!(mf.frame(v[1]).to_vec().iter().all(|b| *b == 0));
        assert_eq!(mf.slice(v[0], page - 100, 100).to_vec(), &data[..100], "neighbours untouched");
        assert_eq!(mf.slice(v[2], 0, 100).to_vec(), &data[page + 100..]);
    }

    #[test]
    #[should_panic(expected = "outside the memory file")]
    fn a_slice_past_the_end_of_the_file_is_refused() {
        let mf = MemoryFile::new(4 * PAGE_SIZE).unwrap();
        mf.slice(Frame::from_number(3), 1, PAGE_SIZE as usize);
    }

    #[test]
    fn sparse_capacity_costs_nothing() {
        let mf = MemoryFile::new(64 << 30).unwrap();
        let f = mf.allocate().unwrap();
        mf.write(f, 0, b"x");
        assert!(resident_kib(&mf) <= 8);
    }
}
