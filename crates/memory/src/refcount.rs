//! Per-frame reference counts in one lazily backed array.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use rustix::mm::{MapFlags, ProtFlags, mmap_anonymous, munmap};

/// A reference count for every frame of the memory file. The array is an
/// anonymous mapping the size of the whole capacity; the host backs only the
/// parts that describe frames which have been used.
pub(crate) struct RefTable {
    counts: NonNull<AtomicU32>,
    len: usize,
}

// SAFETY: the table is only accessed through atomics.
unsafe impl Send for RefTable {}
// SAFETY: as above; every access is an atomic operation on one element.
unsafe impl Sync for RefTable {}

impl RefTable {
    pub(crate) fn new(len: usize) -> rustix::io::Result<Self> {
        let bytes = len.max(1) * size_of::<AtomicU32>();
        // SAFETY: a fresh anonymous mapping aliases nothing; it is unmapped
        // only in Drop.
        let p = unsafe {
            mmap_anonymous(
                std::ptr::null_mut(),
                bytes,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::PRIVATE | MapFlags::NORESERVE,
            )?
        };
        Ok(RefTable { counts: NonNull::new(p.cast()).expect("mmap returned null"), len })
    }

    fn slot(&self, frame: u64) -> &AtomicU32 {
        assert!((frame as usize) < self.len, "frame {frame} outside the memory file");
        // SAFETY: bounds-checked above; the mapping is zero-initialised, which
        // is a valid AtomicU32, and lives as long as self.
        unsafe { &*self.counts.as_ptr().add(frame as usize) }
    }

    pub(crate) fn get(&self, frame: u64) -> u32 {
        self.slot(frame).load(Ordering::Acquire)
    }

    pub(crate) fn set(&self, frame: u64, v: u32) {
        self.slot(frame).store(v, Ordering::Release)
    }

    pub(crate) fn inc(&self, frame: u64) -> u32 {
        let old = self.slot(frame).fetch_add(1, Ordering::AcqRel);
        assert!(old > 0, "reference taken on free frame {frame}");
        old + 1
    }

    /// Drops one reference and returns the count left.
    pub(crate) fn dec(&self, frame: u64) -> u32 {
        let old = self.slot(frame).fetch_sub(1, Ordering::AcqRel);
        assert!(old > 0, "reference dropped on free frame {frame}");
        old - 1
    }
}

impl Drop for RefTable {
    fn drop(&mut self) {
        // SAFETY: the mapping was created in new() with this size and no
        // reference into it outlives self.
        unsafe {
            let _ = munmap(self.counts.as_ptr().cast(), self.len.max(1) * size_of::<AtomicU32>());
        }
    }
}
