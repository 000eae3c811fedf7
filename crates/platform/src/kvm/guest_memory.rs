//! The memory file as KVM sees it: memory slots, and invalidation of the
//! translations KVM caches for it.
//!
//! KVM reads guest memory through its own shared mapping of the memory file.
//! Slots are added as the file grows, so a small sandbox never pays for the
//! per-slot bookkeeping of a large one.
//!
//! Translations: on PVM (software shadow paging) KVM caches guest page-table
//! contents and does not notice the sentry editing them from the host, and
//! even with EPT the guest TLB may hold old entries. Two host operations
//! invalidate reliably on both, and KVM kicks every vCPU as part of each:
//! - dropping a frame from KVM's host mapping (`MADV_DONTNEED` on a shared
//!   mapping keeps the data) zaps every translation of that frame;
//! - deleting any memory slot invalidates every cached translation and page
//!   table of the VM (the global flush), done with a one-page slot kept for
//!   the purpose.

use std::ptr::NonNull;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use kvm_bindings::kvm_userspace_memory_region;
use kvm_ioctls::VmFd;
use memory::{Frame, MemoryFile, PAGE_SIZE, frame_runs};
use rustix::mm::{Advice, MapFlags, ProtFlags, madvise, mmap, mmap_anonymous};

use crate::PlatformError;

/// Memory is registered with KVM in slots of this size.
const SLOT_BYTES: u64 = 256 << 20;
/// The slot number used for global flushes; memory slots count up from 0.
const FLUSH_SLOT: u32 = 32000;
/// Above this many separate runs of frames, one global flush is cheaper than
/// a host call per run.
const MAX_RUNS_PER_INVALIDATION: usize = 64;

pub(crate) struct GuestMemory {
    base: NonNull<u8>,
    size: u64,
    covered: AtomicU64,
    next_slot: Mutex<u32>,
    flush_page: NonNull<u8>,
    flush_gpa: u64,
    flush_lock: Mutex<()>,
    pub(crate) global_flushes: AtomicU64,
    pub(crate) invalidations: AtomicU64,
}

// SAFETY: the raw pointers are a shared file mapping and a private page used
// only as slot backing; neither is dereferenced by this type, only handed to
// the kernel.
unsafe impl Send for GuestMemory {}
// SAFETY: as above; mutable state is behind atomics and mutexes.
unsafe impl Sync for GuestMemory {}

impl GuestMemory {
    pub(crate) fn new(vm: &VmFd, mem: &MemoryFile, flush_gpa: u64) -> Result<Self, PlatformError> {
        let size = mem.capacity();
        // SAFETY: a new shared mapping of the memory file for KVM's use; it is
        // never unmapped while the VM exists (the VM lives as long as this).
        let base = unsafe {
            mmap(
                std::ptr::null_mut(),
                size as usize,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED | MapFlags::NORESERVE,
                mem.fd(),
                0,
            )
        }
        .map_err(|e| PlatformError::host("map guest memory", e))?;
        // SAFETY: a fresh private page, used only as the backing of the flush
        // slot and never accessed by us.
        let flush_page = unsafe {
            mmap_anonymous(
                std::ptr::null_mut(),
                PAGE_SIZE as usize,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::PRIVATE,
            )
        }
        .map_err(|e| PlatformError::host("map flush page", e))?;
        let g = GuestMemory {
            base: NonNull::new(base.cast()).expect("mmap returned null"),
            size,
            covered: AtomicU64::new(0),
            next_slot: Mutex::new(0),
            flush_page: NonNull::new(flush_page.cast()).expect("mmap returned null"),
            flush_gpa,
            flush_lock: Mutex::new(()),
            global_flushes: AtomicU64::new(0),
            invalidations: AtomicU64::new(0),
        };
        g.set_flush_slot(vm, true)?;
        Ok(g)
    }

    fn set_flush_slot(&self, vm: &VmFd, present: bool) -> Result<(), PlatformError> {
        let region = kvm_userspace_memory_region {
            slot: FLUSH_SLOT,
            flags: 0,
            guest_phys_addr: self.flush_gpa,
            memory_size: if present { PAGE_SIZE } else { 0 },
            userspace_addr: self.flush_page.as_ptr() as u64,
        };
        // SAFETY: the backing page lives as long as self, which outlives the
        // VM's use of it.
        unsafe { vm.set_user_memory_region(region) }.map_err(|e| PlatformError::kvm("flush slot", e))
    }

    /// Makes sure KVM has a slot covering `frame`.
    pub(crate) fn ensure_covered(&self, vm: &VmFd, frame: Frame) -> Result<(), PlatformError> {
        if frame.offset() < self.covered.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut next = self.next_slot.lock().unwrap();
        while frame.offset() >= self.covered.load(Ordering::Acquire) {
            let start = self.covered.load(Ordering::Acquire);
            let len = SLOT_BYTES.min(self.size - start);
            let region = kvm_userspace_memory_region {
                slot: *next,
                flags: 0,
                guest_phys_addr: start,
                memory_size: len,
                userspace_addr: self.base.as_ptr() as u64 + start,
            };
            // SAFETY: the range lies inside our mapping of the memory file,
            // which outlives the VM.
            unsafe { vm.set_user_memory_region(region) }.map_err(|e| PlatformError::kvm("add memory slot", e))?;
            *next += 1;
            self.covered.store(start + len, Ordering::Release);
        }
        Ok(())
    }

    /// Faults frames into KVM's mapping ahead of use. With accessed bits
    /// preset in the guest's tables, KVM then maps neighbouring pages in
    /// batches instead of taking a fault for each.
    pub(crate) fn populate(&self, frames: &mut [Frame]) {
        frames.sort_unstable();
        for (first, n) in frame_runs(frames) {
            // SAFETY: the range is inside our mapping; populating only faults
            // pages in and does not change their contents.
            let _ = unsafe {
                madvise(
                    self.base.as_ptr().add(first.offset() as usize).cast(),
                    (n * PAGE_SIZE) as usize,
                    Advice::LinuxPopulateWrite,
                )
            };
        }
    }

    /// What the memory file calls before it reuses a freed frame without
    /// punching it: drops the frame from KVM's mapping, and with it every
    /// translation KVM holds of it.
    pub(crate) fn invalidator(&self) -> memory::Invalidator {
        let base = self.base.as_ptr() as usize;
        let size = self.size;
        Box::new(move |first: Frame, n: u64| {
            if first.offset() + n * PAGE_SIZE > size {
                return false;
            }
            // SAFETY: the range is inside KVM's shared mapping of the memory
            // file, which is never unmapped (see `new`); dropping pages of a
            // shared mapping keeps their contents in the file.
            unsafe {
                madvise((base + first.offset() as usize) as *mut _, (n * PAGE_SIZE) as usize, Advice::LinuxDontNeed)
            }
            .is_ok()
        })
    }

    /// Invalidates every cached translation of `frames`.
    pub(crate) fn invalidate(&self, vm: &VmFd, frames: &mut [Frame]) {
        if frames.is_empty() {
            return;
        }
        frames.sort_unstable();
        if frame_runs(frames).nth(MAX_RUNS_PER_INVALIDATION).is_some() {
            return self.global_flush(vm);
        }
        for (first, n) in frame_runs(frames) {
            // SAFETY: the range is inside our shared mapping of the memory
            // file; dropping pages of a shared mapping keeps their contents.
            let r = unsafe {
                madvise(
                    self.base.as_ptr().add(first.offset() as usize).cast(),
                    (n * PAGE_SIZE) as usize,
                    Advice::LinuxDontNeed,
                )
            };
            if r.is_err() {
                return self.global_flush(vm);
            }
            self.invalidations.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Invalidates every translation and cached page table of the VM.
    pub(crate) fn global_flush(&self, vm: &VmFd) {
        let _g = self.flush_lock.lock().unwrap();
        // Failure here would leave stale translations, which is never
        // acceptable; the slot calls cannot fail for a slot we created.
        self.set_flush_slot(vm, false).expect("delete flush slot");
        self.set_flush_slot(vm, true).expect("re-add flush slot");
        self.global_flushes.fetch_add(1, Ordering::Relaxed);
    }
}
