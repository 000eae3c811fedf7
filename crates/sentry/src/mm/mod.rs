//! Application address spaces: what is mapped where (VMAs), which frames
//! back it (pages), and the platform's executable image of both.
//!
//! The memory manager is the authority; the platform address space is kept
//! equal to it. A page is entered in both when it is first needed: on a
//! fault, by the sentry touching app memory, or eagerly (MAP_POPULATE, the
//! neighbours of a fault). Private pages shared after fork or still showing a
//! file's page-cache frame are copy-on-write: mapped read-only until written.
//!
//! Untouched private anonymous memory reads as zero through one shared
//! read-only frame of zeros, as Linux's zero page: a read fault maps it
//! copy-on-write, and only the first write gives a page a frame of its own.
//! Reading far more untouched memory than the sandbox has costs nothing.
//!
//! Translations. Other vCPUs may be running the address space while the
//! sentry changes it, and may hold translations the change made stale. Two
//! rules keep that invisible to the application, as Linux keeps them with
//! its TLB shootdowns under the page-table lock:
//! - every change is flushed on every vCPU before the lock is released
//!   ([`Locked`] does so when dropped), so no thread can act on the new
//!   state (break copy-on-write of a page another vCPU still writes through
//!   an old writable translation, say) while an old translation survives;
//! - a frame that leaves a page is released only after that flush, so no
//!   other address space can take it over (a copy-on-write sharer writing
//!   it in place) while a stale translation here still reads it.

mod io;
mod mappable;
mod rewrite;
mod shared;
mod vma;

use std::collections::BTreeMap;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, MutexGuard};

use memory::{Frame, MemoryFile};
use platform::{Access, AddressSpace};

pub use io::Pinned;
pub use mappable::{MapName, MapPath, Mappable};
pub use rewrite::{Rewrite, SiteTrap};
pub use shared::SharedMemory;
pub use vma::{Backing, Role, Vma, VmaMap};

/// Page size.
pub const PAGE: u64 = 4096;
/// End of the user address space (Linux's TASK_SIZE on x86_64).
pub const USER_TOP: u64 = 0x7fff_ffff_f000;
/// Top of the main stack.
pub const STACK_TOP: u64 = USER_TOP;
/// mmap allocates downwards from here, leaving room for the stack to grow.
pub const MMAP_TOP: u64 = 0x7fff_f7ff_f000;
/// Where position-independent executables are loaded.
pub const PIE_BASE: u64 = 0x5555_5555_4000;
/// Nothing is mapped below this (Linux's default vm.mmap_min_addr).
pub const MMAP_MIN_ADDR: u64 = 0x10000;
/// Most mappings an address space may have (Linux's default
/// vm.max_map_count). As on Linux, mmap is refused once the count is past
/// it, and a split that would add one (munmap of a middle, mprotect of a
/// part) once the count has reached it.
pub const MAX_MAP_COUNT: usize = 65530;
/// Addresses no mapping may take, on every platform: the trap platform
/// keeps its stub's code and control slot there in each address space.
/// Refusing them everywhere keeps a program's behaviour the same whatever
/// platform runs it.
pub fn reserved_range() -> std::ops::Range<u64> {
    platform::trap::reserved_range()
}

/// True if `[start, end)` enters the reserved range.
fn overlaps_reserved(start: u64, end: u64) -> bool {
    let r = reserved_range();
    start < r.end && end > r.start
}

/// Free space kept between the stack and the area below it.
const STACK_GUARD_GAP: u64 = 256 * PAGE;
/// Pages mapped around a faulting one, for anonymous and file memory. On
/// KVM a fault costs tens of microseconds while mapping a present page costs
/// a few, so neighbours are mapped generously.
const FAULT_AROUND_ANON: u64 = 16;
const FAULT_AROUND_FILE: u64 = 64;
/// A write fault in anonymous memory right where the previous one's window
/// ended is a program filling memory in order (a heap, an array, a buffer
/// being cleared): each such fault doubles the window, up to this many
/// pages, as Linux's readahead ramps up on a sequential reader. A program
/// touching memory here and there keeps the fixed window.
const FAULT_STREAM_ANON_MAX: u64 = 512;
/// A write fault in a private file mapping (a library's data and
/// relocations) copies this many pages around it at once: relocation writes
/// nearly all of them.
const COW_AROUND: u64 = 16;
/// Besides the window, a fault in a file mapping maps up to this many more
/// of its pages that are already cached (no I/O, only table entries).
const MAP_CACHED_MAX: u64 = 1024;

/// Rounds down to a page boundary.
pub const fn page_down(a: u64) -> u64 {
    a & !(PAGE - 1)
}

/// Rounds up to a page boundary, None on overflow.
pub const fn page_up(a: u64) -> Option<u64> {
    match a.checked_add(PAGE - 1) {
        Some(v) => Some(v & !(PAGE - 1)),
        None => None,
    }
}

/// Errors of the memory manager.
#[derive(Debug, thiserror::Error)]
pub enum MmError {
    /// No mapping at the address.
    #[error("address not mapped")]
    Unmapped,
    /// A mapping exists but forbids the access.
    #[error("access not permitted by the mapping")]
    Access,
    /// The page lies beyond the end of the mapped file.
    #[error("mapping beyond the end of the file")]
    BeyondEof,
    #[error("out of memory")]
    NoMemory,
    #[error("invalid argument")]
    Invalid,
    /// The range is already mapped (MAP_FIXED_NOREPLACE).
    #[error("range already mapped")]
    Exists,
    /// The mapping's file does not allow the requested protection.
    #[error("protection not allowed by the file")]
    Denied,
    /// Below the lowest address mappings may use.
    #[error("address below mmap_min_addr")]
    TooLow,
    /// A string had no terminator within the allowed length.
    #[error("string too long")]
    TooLong,
    /// Reading the mapped file failed.
    #[error("reading the mapped file: {0}")]
    Io(crate::errno::Errno),
    /// Locking the memory would pass RLIMIT_MEMLOCK.
    #[error("locked memory limit reached")]
    LockLimit,
}

impl MmError {
    /// True if memory ran out: no frame for a page or for a file's page
    /// cache, or no room for the records of a mapping.
    pub fn is_out_of_memory(&self) -> bool {
        matches!(self, MmError::NoMemory | MmError::Io(crate::errno::Errno::ENOMEM))
    }
}

/// How a page is held.
#[derive(Clone, Copy, Debug)]
struct Page {
    frame: Frame,
    /// Someone else may see this frame: copy before the first write.
    cow: bool,
}

/// Counters for `--profile`.
#[derive(Clone, Copy, Debug, Default)]
pub struct MmStats {
    /// Faults resolved by mapping memory.
    pub faults_mapped: u64,
    /// Faults that became signals.
    pub faults_signalled: u64,
    /// Pages mapped while resolving faults.
    pub fault_pages: u64,
    /// Pages copied on write.
    pub cow_copies: u64,
}

/// The sentry's records of an address space live on its heap, outside the
/// memory file, yet an application decides how many there are: a page-map
/// entry for every page it maps (the zero page makes those free of frames)
/// and a VMA for every mapping. They are charged to the memory file's
/// capacity, a frame for this many of each (about what they take on the
/// heap), as Linux charges page tables and VMAs to the memory cgroup.
const PAGES_PER_CHARGED_FRAME: usize = 64;
const VMAS_PER_CHARGED_FRAME: usize = 16;

/// Frames charged for `pages` page-map entries and `vmas` VMAs.
fn metadata_frames(pages: usize, vmas: usize) -> u64 {
    (pages.div_ceil(PAGES_PER_CHARGED_FRAME) + vmas.div_ceil(VMAS_PER_CHARGED_FRAME)) as u64
}

/// The parts of the address space protected by the lock.
struct State {
    vmas: VmaMap,
    pages: BTreeMap<u64, Page>,
    brk_start: u64,
    brk: u64,
    stack_limit: u64,
    stats: MmStats,
    /// Frames that left the page map under the current lock, released once
    /// their translations are flushed.
    released: Vec<Frame>,
    /// Frames of the memory file's capacity charged for the records above.
    charged: u64,
    /// Rewritten system call sites.
    rewrites: rewrite::Rewrites,
    /// Where the last anonymous write fault's window ended and its size in
    /// pages: a fault there continues the stream (see
    /// [`FAULT_STREAM_ANON_MAX`]).
    anon_stream: (u64, u64),
    /// How new mappings are locked (mlockall's MCL_FUTURE: Linux's
    /// mm->def_flags).
    future_lock: MemLock,
}

impl State {
    /// The program's mappings, as the limit counts them: the table of
    /// rewritten sites is not one of them.
    fn map_count(&self) -> usize {
        self.vmas.len() - self.rewrites.vmas()
    }

    /// Drops the page map's reference to `frame` once the lock is released.
    fn release(&mut self, frame: Frame) {
        self.released.push(frame);
    }

    /// Pages of the locked mappings (Linux's mm->locked_vm).
    fn locked_pages(&self) -> u64 {
        self.vmas.iter().filter(|v| v.locked && v.role != Role::Trampolines).map(|v| v.len() / PAGE).sum()
    }

    /// True if `pages` more locked pages stay within `limit` (in pages;
    /// None: no limit, as with CAP_IPC_LOCK).
    fn may_lock_more(&self, pages: u64, limit: Option<u64>) -> bool {
        limit.is_none_or(|l| self.locked_pages() + pages <= l)
    }
}

/// Whether memory is locked in, and when its pages become resident.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MemLock {
    #[default]
    Unlocked,
    /// Locked, every page made resident at once (Linux's VM_LOCKED).
    Locked,
    /// Locked, pages resident from their first touch on (MLOCK_ONFAULT,
    /// MCL_ONFAULT).
    LockedOnFault,
}

impl MemLock {
    fn apply(self, v: &mut Vma) {
        if v.role == Role::Trampolines {
            return;
        }
        v.locked = self != MemLock::Unlocked;
        v.lock_onfault = self == MemLock::LockedOnFault;
    }

    fn of(v: &Vma) -> MemLock {
        match (v.locked, v.lock_onfault) {
            (false, _) => MemLock::Unlocked,
            (true, false) => MemLock::Locked,
            (true, true) => MemLock::LockedOnFault,
        }
    }
}

/// The locked state of a memory manager. Dropping it makes every change
/// effective on every vCPU, then releases the frames that left the page map,
/// then unlocks.
struct Locked<'a> {
    mm: &'a MemoryManager,
    state: MutexGuard<'a, State>,
}

impl Deref for Locked<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        &self.state
    }
}

impl DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.state
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        let mf = &self.mm.mf;
        // Records that went give their charge back.
        let need = metadata_frames(self.state.pages.len(), self.state.vmas.len());
        if need < self.state.charged {
            mf.uncharge(self.state.charged - need);
            self.state.charged = need;
        }
        // A frame only this map holds can go at once: it cannot be handed
        // out again before the memory file has invalidated it, and nobody
        // else can see it meanwhile. A frame shared with another holder waits
        // for the flush, or that holder could write it in place while a stale
        // translation here still reads it.
        let mut later = Vec::new();
        for f in self.state.released.drain(..) {
            if mf.ref_count(f) == 1 { mf.dec_ref(f) } else { later.push(f) }
        }
        self.mm.space.flush();
        for f in later {
            mf.dec_ref(f);
        }
    }
}

/// An application's address space.
pub struct MemoryManager {
    mf: Arc<MemoryFile>,
    space: Arc<dyn AddressSpace>,
    state: Mutex<State>,
    /// What the address space holds of the file it runs for as long as it
    /// lives (Linux's mm->exe_file): the exec layer's denial of writes.
    exe_hold: Mutex<Option<Arc<dyn std::any::Any + Send + Sync>>>,
}

/// What x86 page tables grant for a VMA access: write and execute imply
/// read.
fn effective(a: Access) -> Access {
    Access { read: a.read || a.write || a.execute, ..a }
}

/// Arguments of an mmap that the memory manager needs.
#[derive(Clone, Copy, Debug, Default)]
pub struct MapFlags {
    pub fixed: bool,
    pub fixed_noreplace: bool,
    pub populate: bool,
    pub grows_down: bool,
    /// MAP_LOCKED (else the lock mlockall's MCL_FUTURE asked for).
    pub locked: bool,
    /// The most pages the address space may have locked (RLIMIT_MEMLOCK),
    /// None for no limit.
    pub lock_limit: Option<u64>,
}

impl MemoryManager {
    /// An empty address space running in `space`.
    pub fn new(mf: Arc<MemoryFile>, space: Arc<dyn AddressSpace>, stack_limit: u64) -> Self {
        MemoryManager {
            mf,
            space,
            state: Mutex::new(State {
                vmas: VmaMap::default(),
                pages: BTreeMap::new(),
                brk_start: 0,
                brk: 0,
                stack_limit,
                stats: MmStats::default(),
                released: Vec::new(),
                charged: 0,
                rewrites: rewrite::Rewrites::default(),
                anon_stream: (0, 0),
                future_lock: MemLock::Unlocked,
            }),
            exe_hold: Mutex::new(None),
        }
    }

    /// Keeps `hold` for the life of the address space and of its forks.
    pub fn hold_exe(&self, hold: Arc<dyn std::any::Any + Send + Sync>) {
        *self.exe_hold.lock().unwrap() = Some(hold);
    }

    /// Charges the records of the address space as they will be with
    /// `pages` more page-map entries and `vmas` more VMAs; NoMemory if the
    /// memory file has no room for them.
    fn charge_records(&self, st: &mut State, pages: usize, vmas: usize) -> Result<(), MmError> {
        let need = metadata_frames(st.pages.len() + pages, st.vmas.len() + vmas);
        if need > st.charged {
            self.mf.charge(need - st.charged).map_err(|_| MmError::NoMemory)?;
            st.charged = need;
        }
        Ok(())
    }

    /// The platform address space.
    pub fn space(&self) -> &Arc<dyn AddressSpace> {
        &self.space
    }

    /// The memory file.
    pub fn memory_file(&self) -> &Arc<MemoryFile> {
        &self.mf
    }

    fn lock(&self) -> Locked<'_> {
        Locked { mm: self, state: self.state.lock().unwrap() }
    }

    pub fn stats(&self) -> MmStats {
        self.lock().stats
    }

    /// Copies of the VMAs, for /proc and tests.
    pub fn vmas(&self) -> Vec<Vma> {
        self.lock().vmas.iter().filter(|v| v.role != Role::Trampolines).cloned().collect()
    }

    /// Copies of the VMAs, each with the pages of it backed by frames
    /// (/proc/PID/smaps and statm).
    pub fn vmas_resident(&self) -> Vec<(Vma, u64)> {
        let st = self.lock();
        st.vmas
            .iter()
            .filter(|v| v.role != Role::Trampolines)
            .map(|v| (v.clone(), st.pages.range(v.start..v.end).count() as u64))
            .collect()
    }

    /// Pages currently backed by frames.
    pub fn resident_pages(&self) -> usize {
        self.lock().pages.len()
    }

    /// Sets the start of the heap (just above the executable).
    pub fn set_brk_start(&self, addr: u64) {
        let mut st = self.lock();
        st.brk_start = addr;
        st.brk = addr;
    }

    /// Changes the stack size limit (RLIMIT_STACK).
    pub fn set_stack_limit(&self, limit: u64) {
        self.lock().stack_limit = limit;
    }

    // ---- mapping ----

    /// Maps `len` bytes with `access` and `backing`; returns the address.
    pub fn map(&self, addr: u64, len: u64, access: Access, backing: Backing, flags: MapFlags) -> Result<u64, MmError> {
        let len = page_up(len).filter(|l| *l > 0 && *l <= USER_TOP).ok_or(MmError::NoMemory)?;
        let mut st = self.lock();
        if st.map_count() > MAX_MAP_COUNT {
            return Err(MmError::NoMemory);
        }
        let lock = if flags.locked { MemLock::Locked } else { st.future_lock };
        if lock != MemLock::Unlocked && !st.may_lock_more(len / PAGE, flags.lock_limit) {
            return Err(MmError::LockLimit);
        }
        let start = if flags.fixed || flags.fixed_noreplace {
            if !addr.is_multiple_of(PAGE) {
                return Err(MmError::Invalid);
            }
            let end = addr.checked_add(len).filter(|e| *e <= USER_TOP).ok_or(MmError::NoMemory)?;
            if addr < MMAP_MIN_ADDR {
                return Err(MmError::TooLow);
            }
            // An address the address space cannot give, as Linux answers
            // for one past TASK_SIZE.
            if overlaps_reserved(addr, end) || st.rewrites.overlaps(addr, end) {
                return Err(MmError::NoMemory);
            }
            if flags.fixed_noreplace && !st.vmas.is_free(addr, end) {
                return Err(MmError::Exists);
            }
            self.unmap_locked(&mut st, addr, end);
            addr
        } else {
            let hint = page_down(addr);
            match hint.checked_add(len) {
                Some(end) if hint >= MMAP_MIN_ADDR && end <= USER_TOP && st.vmas.is_free(hint, end) => hint,
                _ => find_free(&mut st.vmas, len, MMAP_TOP).ok_or(MmError::NoMemory)?,
            }
        };
        self.charge_records(&mut st, 0, 1)?;
        let mut vma = Vma::new(start, start + len, access, backing);
        vma.grows_down = flags.grows_down;
        lock.apply(&mut vma);
        if let Backing::File { shared: true, .. } = vma.backing {
            vma.max_access = Access::ALL;
        }
        st.vmas.insert(vma);
        st.vmas.merge_around(start, start + len);
        if flags.populate && !access.is_none() {
            self.populate_range(&mut st, start, start + len, access.write)?;
        }
        self.populate_locked(&mut st, start, start + len);
        drop(st);
        Ok(start)
    }

    /// Limits how far `mprotect` may raise the access of `[start, end)`.
    pub fn set_max_access(&self, start: u64, end: u64, max: Access) {
        self.lock().vmas.update(start, end, |v| v.max_access = max);
    }

    /// Sets the role of the VMAs in a range (stack, heap) for /proc.
    pub fn set_role(&self, start: u64, end: u64, role: Role) {
        self.lock().vmas.update(start, end, |v| v.role = role);
    }

    /// Unmaps `[addr, addr + len)`.
    pub fn unmap(&self, addr: u64, len: u64) -> Result<(), MmError> {
        if !addr.is_multiple_of(PAGE) || len == 0 {
            return Err(MmError::Invalid);
        }
        let end = page_up(len).and_then(|l| addr.checked_add(l)).ok_or(MmError::Invalid)?;
        if end > USER_TOP {
            return Err(MmError::Invalid);
        }
        let mut st = self.lock();
        // Taking a hole out of the middle of one mapping makes one more.
        if st.map_count() >= MAX_MAP_COUNT && st.vmas.find(addr).is_some_and(|v| v.start < addr && end < v.end) {
            return Err(MmError::NoMemory);
        }
        for (s, e) in st.rewrites.outside(addr, end) {
            self.unmap_locked(&mut st, s, e);
        }
        drop(st);
        Ok(())
    }

    fn unmap_locked(&self, st: &mut State, start: u64, end: u64) {
        st.vmas.remove(start, end);
        Self::forget_sites(st, start, end);
        self.drop_pages(st, start, end);
    }

    /// Forgets the pages of `[start, end)` and removes their mappings. The
    /// caller flushes the address space.
    fn drop_pages(&self, st: &mut State, start: u64, end: u64) {
        let mut tail = st.pages.split_off(&start);
        let mut rest = tail.split_off(&end);
        st.pages.append(&mut rest);
        if tail.is_empty() {
            return;
        }
        self.space.unmap(start, end - start);
        for p in tail.values() {
            st.release(p.frame);
        }
    }

    /// Changes the access of `[addr, addr + len)`.
    pub fn protect(&self, addr: u64, len: u64, access: Access) -> Result<(), MmError> {
        if !addr.is_multiple_of(PAGE) {
            return Err(MmError::Invalid);
        }
        let end = page_up(len).and_then(|l| addr.checked_add(l)).ok_or(MmError::NoMemory)?;
        if end > USER_TOP {
            return Err(MmError::NoMemory);
        }
        if len == 0 {
            return Ok(());
        }
        let mut st = self.lock();
        if !st.vmas.is_fully_mapped(addr, end) {
            return Err(MmError::NoMemory);
        }
        let parts = st.rewrites.outside(addr, end);
        if parts[..] != [(addr, end)] {
            drop(st);
            for (a, e) in parts {
                self.protect(a, e - a, access)?;
            }
            return Ok(());
        }
        if st.vmas.overlapping(addr, end).any(|v| !v.max_access.contains(access)) {
            return Err(MmError::Denied);
        }
        if access.write {
            self.restore_sites(&mut st, addr, end);
        }
        // Each mapping cut at an end of the range, if its access changes,
        // is one more.
        let splits = [st.vmas.find(addr), st.vmas.find(end - 1)]
            .into_iter()
            .flatten()
            .enumerate()
            .filter(|(i, v)| (if *i == 0 { v.start < addr } else { end < v.end }) && v.access != access)
            .count();
        if splits > 0 && st.map_count() + splits > MAX_MAP_COUNT {
            return Err(MmError::NoMemory);
        }
        self.charge_records(&mut st, 0, splits)?;
        st.vmas.update(addr, end, |v| v.access = access);
        self.apply_access(&st, addr, end, access);
        drop(st);
        Ok(())
    }

    /// Makes the platform's view of the present pages in `[start, end)`
    /// match `access`, keeping copy-on-write pages read-only.
    fn apply_access(&self, st: &State, start: u64, end: u64, access: Access) {
        let eff = effective(access);
        let mut run: Option<(u64, u64, Access)> = None;
        let flush = |r: Option<(u64, u64, Access)>| {
            if let Some((s, e, a)) = r {
                self.space.protect(s, e - s, a);
            }
        };
        for (&va, p) in st.pages.range(start..end) {
            let a = if p.cow && eff.write { eff.without_write() } else { eff };
            run = match run {
                Some((s, e, ra)) if e == va && ra == a => Some((s, va + PAGE, a)),
                other => {
                    flush(other);
                    Some((va, va + PAGE, a))
                }
            };
        }
        flush(run);
    }

    /// Moves or resizes a mapping (mremap).
    pub fn remap(
        &self,
        old: u64,
        old_len: u64,
        new_len: u64,
        may_move: bool,
        fixed: Option<u64>,
        lock_limit: Option<u64>,
    ) -> Result<u64, MmError> {
        if !old.is_multiple_of(PAGE) {
            return Err(MmError::Invalid);
        }
        let old_len = page_up(old_len).ok_or(MmError::Invalid)?;
        // A size no address space holds is EINVAL, as on Linux.
        let new_len = page_up(new_len).filter(|l| *l > 0 && *l <= USER_TOP).ok_or(MmError::Invalid)?;
        let old_end = old.checked_add(old_len).filter(|e| *e <= USER_TOP).ok_or(MmError::Invalid)?;
        let mut st = self.lock();
        let vma = st.vmas.find(old).cloned().filter(|v| v.role != Role::Trampolines).ok_or(MmError::Unmapped)?;
        if old_end > vma.end {
            return Err(MmError::Unmapped);
        }
        if vma.locked && new_len > old_len && !st.may_lock_more((new_len - old_len) / PAGE, lock_limit) {
            return Err(MmError::LockLimit);
        }
        // A move may split the source in two and add the destination:
        // Linux keeps that much room below the limit.
        let near_limit = st.map_count() + 3 >= MAX_MAP_COUNT;
        self.charge_records(&mut st, 0, 2)?;
        if old_len == 0 {
            let r = self.duplicate_locked(&mut st, &vma, old, new_len, may_move, fixed);
            drop(st);
            return r;
        }
        if let Some(dest) = fixed {
            if !dest.is_multiple_of(PAGE) || !may_move {
                return Err(MmError::Invalid);
            }
            if near_limit {
                return Err(MmError::NoMemory);
            }
            let dest_end = dest.checked_add(new_len).filter(|e| *e <= USER_TOP).ok_or(MmError::Invalid)?;
            if dest < old_end && old < dest_end {
                return Err(MmError::Invalid);
            }
            if overlaps_reserved(dest, dest_end) || st.rewrites.overlaps(dest, dest_end) {
                return Err(MmError::NoMemory);
            }
            self.unmap_locked(&mut st, dest, dest_end);
            let r = self.move_locked(&mut st, &vma, old, old_len.min(new_len), dest, new_len);
            if old_len > new_len {
                self.unmap_locked(&mut st, old + new_len, old_end);
            }
            self.populate_locked(&mut st, dest + old_len.min(new_len), dest_end);
            drop(st);
            return r;
        }
        if new_len <= old_len {
            self.unmap_locked(&mut st, old + new_len, old_end);
            drop(st);
            return Ok(old);
        }
        let grow_end = old.checked_add(new_len).filter(|e| *e <= USER_TOP);
        if let Some(ge) = grow_end
            && old_end == vma.end
            && st.vmas.is_free(old_end, ge)
        {
            st.vmas.resize(vma.start, vma.start, ge);
            self.populate_locked(&mut st, old_end, ge);
            return Ok(old);
        }
        if !may_move || near_limit {
            return Err(MmError::NoMemory);
        }
        let dest = find_free(&mut st.vmas, new_len, MMAP_TOP).ok_or(MmError::NoMemory)?;
        let r = self.move_locked(&mut st, &vma, old, old_len, dest, new_len);
        self.populate_locked(&mut st, dest + old_len, dest + new_len);
        drop(st);
        r
    }

    /// mremap with an old size of 0: a second mapping of the same shared
    /// pages, starting at `old`, `new_len` long. Private memory cannot be
    /// duplicated (EINVAL), and the copy never goes in place.
    fn duplicate_locked(
        &self,
        st: &mut State,
        vma: &Vma,
        old: u64,
        new_len: u64,
        may_move: bool,
        fixed: Option<u64>,
    ) -> Result<u64, MmError> {
        if vma.is_private() {
            return Err(MmError::Invalid);
        }
        if !may_move || st.map_count() + 3 >= MAX_MAP_COUNT {
            return Err(MmError::NoMemory);
        }
        let dest = match fixed {
            Some(d) => {
                let end = d.checked_add(new_len).filter(|e| *e <= USER_TOP).ok_or(MmError::Invalid)?;
                if overlaps_reserved(d, end) || st.rewrites.overlaps(d, end) {
                    return Err(MmError::NoMemory);
                }
                self.unmap_locked(st, d, end);
                d
            }
            None => find_free(&mut st.vmas, new_len, MMAP_TOP).ok_or(MmError::NoMemory)?,
        };
        let mut copy = Vma::new(dest, dest + new_len, vma.access, vma.backing.advanced(old - vma.start));
        copy.max_access = vma.max_access;
        st.vmas.insert(copy);
        st.vmas.merge_around(dest, dest + new_len);
        Ok(dest)
    }

    /// Moves `[old, old + len)` of `vma` to `dest` with size `new_len`.
    fn move_locked(
        &self,
        st: &mut State,
        vma: &Vma,
        old: u64,
        len: u64,
        dest: u64,
        new_len: u64,
    ) -> Result<u64, MmError> {
        let piece = st.vmas.remove(old, old + len);
        Self::forget_sites(st, old, old + len);
        let Some(first) = piece.first() else { return Err(MmError::Unmapped) };
        let mut moved = first.clone();
        moved.start = dest;
        moved.end = dest + new_len;
        moved.grows_down = false;
        debug_assert_eq!(vma.access, moved.access);
        st.vmas.insert(moved.clone());
        let mut tail = st.pages.split_off(&old);
        let mut rest = tail.split_off(&(old + len));
        st.pages.append(&mut rest);
        self.space.unmap(old, len);
        let eff = effective(moved.access);
        for (va, p) in tail {
            let nva = va - old + dest;
            st.pages.insert(nva, p);
            if !moved.access.is_none() {
                let a = if p.cow { eff.without_write() } else { eff };
                self.space.map(nva, &[p.frame], a).map_err(|_| MmError::NoMemory)?;
            }
        }
        Ok(dest)
    }

    /// Drops the pages of a range (MADV_DONTNEED): private memory reads as
    /// zero or as the file again, shared memory is unaffected.
    pub fn discard(&self, addr: u64, len: u64) -> Result<(), MmError> {
        if !addr.is_multiple_of(PAGE) {
            return Err(MmError::Invalid);
        }
        let end = page_up(len).and_then(|l| addr.checked_add(l)).ok_or(MmError::Invalid)?;
        let mut st = self.lock();
        if !st.vmas.is_fully_mapped(addr, end) {
            return Err(MmError::NoMemory);
        }
        for (s, e) in st.rewrites.outside(addr, end) {
            // The pages read as the file or zero again: so do their sites.
            Self::forget_sites(&mut st, s, e);
            self.drop_pages(&mut st, s, e);
        }
        drop(st);
        Ok(())
    }

    // ---- locking ----

    /// Pages of the locked mappings (VmLck).
    pub fn locked_pages(&self) -> u64 {
        self.lock().locked_pages()
    }

    /// mlock, mlock2 and munlock of `[start, end)` (page-aligned): locks
    /// or unlocks every mapping of it, which must all be mapped
    /// (NoMemory). Locking more than `limit` pages in all is LockLimit;
    /// pages already locked in the range are not counted twice. Newly
    /// locked pages are made resident unless only on fault.
    pub fn set_lock(&self, start: u64, end: u64, lock: MemLock, limit: Option<u64>) -> Result<(), MmError> {
        if end <= start {
            return Ok(());
        }
        let mut st = self.lock();
        if lock != MemLock::Unlocked && !st.may_lock_more((end - start) / PAGE, limit) {
            let already: u64 = st
                .vmas
                .overlapping(start, end)
                .filter(|v| v.locked && v.role != Role::Trampolines)
                .map(|v| (v.end.min(end) - v.start.max(start)) / PAGE)
                .sum();
            if limit.is_some_and(|l| st.locked_pages() + (end - start) / PAGE - already > l) {
                return Err(MmError::LockLimit);
            }
        }
        if !st.vmas.is_fully_mapped(start, end) {
            return Err(MmError::NoMemory);
        }
        // Cutting the range out of a mapping at each end makes two more.
        self.charge_records(&mut st, 0, 2)?;
        st.vmas.update(start, end, |v| lock.apply(v));
        self.populate_locked(&mut st, start, end);
        drop(st);
        Ok(())
    }

    /// mlockall and munlockall: new mappings are locked as `future` says,
    /// and if `current` is given, every present mapping is locked (or
    /// unlocked) so. Locking all that is mapped must not pass `limit`
    /// pages (LockLimit).
    pub fn set_lock_all(&self, current: Option<MemLock>, future: MemLock, limit: Option<u64>) -> Result<(), MmError> {
        let mut st = self.lock();
        if current.is_some_and(|c| c != MemLock::Unlocked) {
            let total: u64 = st.vmas.iter().filter(|v| v.role != Role::Trampolines).map(|v| v.len() / PAGE).sum();
            if limit.is_some_and(|l| total > l) {
                return Err(MmError::LockLimit);
            }
        }
        st.future_lock = future;
        if let Some(c) = current {
            st.vmas.update(0, USER_TOP, |v| c.apply(v));
            self.populate_locked(&mut st, 0, USER_TOP);
        }
        drop(st);
        Ok(())
    }

    /// Makes the pages of the mappings in `[start, end)` that are locked
    /// (not only on fault) resident, as Linux populates mlocked memory:
    /// written (copy-on-write broken) where the mapping is private and
    /// writable. Memory running out leaves the rest to fault in later.
    fn populate_locked(&self, st: &mut State, start: u64, end: u64) {
        let todo: Vec<(u64, u64, bool)> = st
            .vmas
            .overlapping(start, end)
            .filter(|v| MemLock::of(v) == MemLock::Locked && !v.access.is_none())
            .map(|v| (v.start.max(start), v.end.min(end), v.access.write && v.is_private()))
            .collect();
        for (s, e, write) in todo {
            if let Err(e) = self.populate_range(st, s, e, write)
                && e.is_out_of_memory()
            {
                break;
            }
        }
    }

    // ---- heap ----

    /// The brk system call: moves the end of the heap and returns it.
    /// Growth locked by mlockall(MCL_FUTURE) must stay within `lock_limit`
    /// pages of locked memory.
    pub fn brk(&self, new: u64, lock_limit: Option<u64>) -> u64 {
        let mut st = self.lock();
        let cur = st.brk;
        if new < st.brk_start {
            return cur;
        }
        let (Some(old_end), Some(new_end)) = (page_up(cur), page_up(new)) else { return cur };
        if new_end > old_end {
            if new_end > MMAP_TOP || !st.vmas.is_free(old_end, new_end) {
                return cur;
            }
            let extends_heap = st.vmas.last_before(old_end).is_some_and(|v| v.end == old_end && v.role == Role::Heap);
            if !extends_heap && (st.map_count() > MAX_MAP_COUNT || self.charge_records(&mut st, 0, 1).is_err()) {
                return cur;
            }
            // Linux counts the bytes asked for, in whole pages.
            let lock = st.future_lock;
            if lock != MemLock::Unlocked && !st.may_lock_more((new - cur) / PAGE, lock_limit) {
                return cur;
            }
            let mut v = Vma::new(old_end, new_end, Access::READ_WRITE, Backing::Anonymous);
            v.role = Role::Heap;
            lock.apply(&mut v);
            st.vmas.insert(v);
            st.vmas.merge_around(old_end, new_end);
            self.populate_locked(&mut st, old_end, new_end);
        } else if new_end < old_end {
            self.unmap_locked(&mut st, new_end, old_end);
        }
        st.brk = new;
        drop(st);
        new
    }

    // ---- faults ----

    /// Resolves a fault at `addr`: maps the page (and its neighbours) if the
    /// VMAs allow `access`. Returns the number of pages newly backed.
    pub fn handle_fault(&self, addr: u64, access: Access) -> Result<u64, MmError> {
        let mut st = self.lock();
        let before = st.stats.fault_pages;
        let r = self.fault_locked(&mut st, addr, access);
        match r {
            Ok(()) => st.stats.faults_mapped += 1,
            Err(_) => st.stats.faults_signalled += 1,
        }
        r.map(|()| st.stats.fault_pages - before)
    }

    fn fault_locked(&self, st: &mut State, addr: u64, access: Access) -> Result<(), MmError> {
        if addr >= USER_TOP {
            return Err(MmError::Unmapped);
        }
        let vma = match st.vmas.find(addr) {
            Some(v) => v.clone(),
            None => self.grow_stack(st, addr)?,
        };
        if !effective(vma.access).contains(access) {
            return Err(MmError::Access);
        }
        let page = page_down(addr);
        let around = match vma.backing {
            Backing::File { .. } => FAULT_AROUND_FILE,
            _ => FAULT_AROUND_ANON,
        };
        let window = around * PAGE;
        let ws = (page & !(window - 1)).max(vma.start);
        let we = ((page & !(window - 1)) + window).min(vma.end);
        let before = st.stats.fault_pages;
        let private_file = matches!(&vma.backing, Backing::File { shared: false, file, .. } if file.unchanging());
        if access.write && private_file {
            let span = COW_AROUND * PAGE;
            let cs = (page & !(span - 1)).max(vma.start);
            let ce = ((page & !(span - 1)) + span).min(vma.end);
            self.populate_vma(st, &vma, cs, ce, Some((cs, ce)), Some(page))?;
        }
        let write = if access.write { Some((page, page + PAGE)) } else { None };
        let stream = matches!(vma.backing, Backing::Anonymous) && access.write;
        let (stream_end, stream_pages) = st.anon_stream;
        if stream && page == stream_end && stream_pages > 0 {
            let pages = (stream_pages * 2).min(FAULT_STREAM_ANON_MAX);
            let end = page.saturating_add(pages * PAGE).min(vma.end);
            // A stream that outgrows the memory left falls back to the fixed
            // window rather than failing a fault one page would satisfy.
            let streamed = end > we && self.populate_vma_as(st, &vma, page, end, write, Some(page), true).is_ok();
            if !streamed {
                self.populate_vma(st, &vma, ws, we, write, Some(page))?;
            }
            st.anon_stream = (if streamed { end } else { we }, pages);
        } else {
            self.populate_vma(st, &vma, ws, we, write, Some(page))?;
            if stream {
                st.anon_stream = (we, FAULT_AROUND_ANON);
            }
        }
        if let Backing::File { .. } = vma.backing {
            self.map_cached(st, &vma, page);
        }
        if st.stats.fault_pages == before {
            // Nothing was missing: the platform lost a translation it should
            // have had, or the access was a write to a copy-on-write page
            // already resolved by another thread. Re-enter the page.
            let p = st.pages.get(&page).copied().ok_or(MmError::Unmapped)?;
            let eff = effective(vma.access);
            let a = if p.cow { eff.without_write() } else { eff };
            if !a.contains(access) {
                return Err(MmError::Access);
            }
            self.space.map(page, &[p.frame], a).map_err(|_| MmError::NoMemory)?;
        }
        Ok(())
    }

    /// Maps the pages of a file VMA that are already in memory and not yet
    /// mapped, nearest to `around` first, up to MAP_CACHED_MAX. A program
    /// that starts after another has loaded the same library then faults
    /// once per mapping instead of once per window.
    fn map_cached(&self, st: &mut State, vma: &Vma, around: u64) {
        let Backing::File { file, offset, shared, .. } = &vma.backing else { return };
        let eff = effective(vma.access);
        if vma.access.is_none() {
            return;
        }
        let access = if *shared { eff } else { eff.without_write() };
        let pages = (vma.end - vma.start) / PAGE;
        let first =
            ((around - vma.start) / PAGE).saturating_sub(MAP_CACHED_MAX / 2).min(pages.saturating_sub(MAP_CACHED_MAX));
        let mut run: Vec<(u64, Frame)> = Vec::new();
        let mut mapped = 0;
        let flush_run = |run: &mut Vec<(u64, Frame)>, st: &mut State| {
            if run.is_empty() {
                return;
            }
            let frames: Vec<Frame> = run.iter().map(|(_, f)| *f).collect();
            if self.charge_records(st, run.len(), 0).is_ok() && self.space.map(run[0].0, &frames, access).is_ok() {
                for (va, f) in run.drain(..) {
                    st.pages.insert(va, Page { frame: f, cow: !shared });
                }
            } else {
                for (_, f) in run.drain(..) {
                    st.release(f);
                }
            }
        };
        for i in first..pages.min(first + MAP_CACHED_MAX) {
            let va = vma.start + i * PAGE;
            let cached = if st.pages.contains_key(&va) { None } else { file.cached((offset + i * PAGE) / PAGE) };
            match cached {
                Some(f) => {
                    if run.last().is_some_and(|(last, _)| *last + PAGE != va) {
                        flush_run(&mut run, st);
                    }
                    run.push((va, f));
                    mapped += 1;
                }
                None => flush_run(&mut run, st),
            }
        }
        flush_run(&mut run, st);
        st.stats.fault_pages += mapped;
    }

    /// Extends the stack VMA down to cover `addr`, if it may.
    fn grow_stack(&self, st: &mut State, addr: u64) -> Result<Vma, MmError> {
        let next = st.vmas.first_ending_after(addr).cloned().ok_or(MmError::Unmapped)?;
        if !next.grows_down || addr >= next.start {
            return Err(MmError::Unmapped);
        }
        let new_start = page_down(addr);
        if next.end - new_start > st.stack_limit || overlaps_reserved(new_start, next.start) {
            return Err(MmError::Unmapped);
        }
        if let Some(prev) = st.vmas.last_before(next.start)
            && prev.end + STACK_GUARD_GAP > new_start
        {
            return Err(MmError::Unmapped);
        }
        st.vmas.resize(next.start, new_start, next.end);
        Ok(st.vmas.find(addr).expect("just grown").clone())
    }

    /// Makes every page of `[start, end)` present, and writable if `write`.
    fn populate_range(&self, st: &mut State, start: u64, end: u64, write: bool) -> Result<(), MmError> {
        let vmas: Vec<Vma> = st.vmas.overlapping(start, end).cloned().collect();
        for v in vmas {
            let s = v.start.max(start);
            let e = v.end.min(end);
            let mut va = s;
            while va < e {
                // Each page that must become writable is populated on its own
                // so copy-on-write happens for exactly the pages written.
                if write {
                    self.populate_vma(st, &v, va, va + PAGE, Some((va, va + PAGE)), Some(va))?;
                    va += PAGE;
                } else {
                    self.populate_vma(st, &v, s, e, None, Some(s))?;
                    break;
                }
            }
        }
        Ok(())
    }

    /// Backs the missing pages of `[start, end)` (all within `vma`) and maps
    /// them. Pages in `writes` must end up writable (copy-on-write broken);
    /// `required` must end up present, or the call fails.
    fn populate_vma(
        &self,
        st: &mut State,
        vma: &Vma,
        start: u64,
        end: u64,
        writes: Option<(u64, u64)>,
        required: Option<u64>,
    ) -> Result<(), MmError> {
        self.populate_vma_as(st, vma, start, end, writes, required, false)
    }

    /// As [`populate_vma`](Self::populate_vma); with `resident`, the
    /// platform is told the program is about to touch every page, so that
    /// it backs them now in bulk rather than on a host fault each.
    #[allow(clippy::too_many_arguments)]
    fn populate_vma_as(
        &self,
        st: &mut State,
        vma: &Vma,
        start: u64,
        end: u64,
        writes: Option<(u64, u64)>,
        required: Option<u64>,
        resident: bool,
    ) -> Result<(), MmError> {
        let write_page = |va: u64| writes.is_some_and(|(s, e)| va >= s && va < e);
        let mut new_pages: Vec<(u64, Page)> = Vec::new();
        let mut anon_missing: Vec<u64> = Vec::new();
        if let Backing::File { file, offset, .. } = &vma.backing
            && (start..end).step_by(PAGE as usize).any(|va| !st.pages.contains_key(&va))
        {
            file.prefetch((offset + (start - vma.start)) / PAGE, (end - start) / PAGE);
        }
        // The first page past the end of the file, if the range reaches it.
        let mut eof = None;
        let collected = (|| -> Result<(), MmError> {
            let mut va = start;
            while va < end {
                match st.pages.get(&va).copied() {
                    Some(p) if p.cow && write_page(va) => {
                        new_pages.push((va, self.break_cow(st, p)?));
                    }
                    Some(_) => {}
                    None => match &vma.backing {
                        Backing::Anonymous => anon_missing.push(va),
                        Backing::Shared { object, offset } => {
                            let f = object.page((offset + (va - vma.start)) / PAGE)?;
                            new_pages.push((va, Page { frame: f, cow: false }));
                        }
                        Backing::File { file, offset, shared, .. } => {
                            let index = (offset + (va - vma.start)) / PAGE;
                            let Some(f) = file.page(index)? else {
                                eof = Some(va);
                                break;
                            };
                            let page = if !shared && write_page(va) {
                                let Ok(copy) = self.mf.allocate() else {
                                    self.mf.dec_ref(f);
                                    return Err(MmError::NoMemory);
                                };
                                self.mf.copy_frame(f, copy);
                                self.mf.dec_ref(f);
                                st.stats.cow_copies += 1;
                                Page { frame: copy, cow: false }
                            } else {
                                Page { frame: f, cow: !shared }
                            };
                            new_pages.push((va, page));
                        }
                    },
                }
                va += PAGE;
            }
            if !anon_missing.is_empty() && writes.is_none() {
                // Read: the zero page, until written.
                let zero = self.mf.zero_frame().map_err(|_| MmError::NoMemory)?;
                for va in anon_missing.drain(..) {
                    self.mf.inc_ref(zero);
                    new_pages.push((va, Page { frame: zero, cow: true }));
                }
                new_pages.sort_by_key(|(va, _)| *va);
            } else if !anon_missing.is_empty() {
                let mut frames = Vec::with_capacity(anon_missing.len());
                self.mf.allocate_many(anon_missing.len(), &mut frames).map_err(|_| MmError::NoMemory)?;
                new_pages.extend(anon_missing.drain(..).zip(frames).map(|(va, f)| (va, Page { frame: f, cow: false })));
                new_pages.sort_by_key(|(va, _)| *va);
            }
            Ok(())
        })();
        if let Err(e) = collected {
            for (_, p) in new_pages {
                self.mf.dec_ref(p.frame);
            }
            return Err(e);
        }
        // Pages before the end of the file are mapped all the same; a fault
        // on a page at or past it is a SIGBUS.
        let outcome = match (eof, required) {
            (Some(e), Some(r)) if r >= e => Err(MmError::BeyondEof),
            _ => Ok(()),
        };
        if new_pages.is_empty() {
            return outcome;
        }
        let entries = new_pages.iter().filter(|(va, _)| !st.pages.contains_key(va)).count();
        if self.charge_records(st, entries, 0).is_err() {
            for (_, p) in new_pages {
                self.mf.dec_ref(p.frame);
            }
            return Err(MmError::NoMemory);
        }
        st.stats.fault_pages += new_pages.len() as u64;
        let eff = effective(vma.access);
        let mut i = 0;
        while i < new_pages.len() {
            let a = |p: &Page| if p.cow { eff.without_write() } else { eff };
            let first_access = a(&new_pages[i].1);
            let mut j = i + 1;
            while j < new_pages.len()
                && new_pages[j].0 == new_pages[j - 1].0 + PAGE
                && a(&new_pages[j].1) == first_access
            {
                j += 1;
            }
            let frames: Vec<Frame> = new_pages[i..j].iter().map(|(_, p)| p.frame).collect();
            let mapped = if vma.access.is_none() {
                Ok(())
            } else if resident {
                self.space.map_resident(new_pages[i].0, &frames, first_access)
            } else {
                self.space.map(new_pages[i].0, &frames, first_access)
            };
            if mapped.is_err() {
                // Out of memory for page tables. Forget this attempt whole:
                // pages already in the map fault back in on their next use.
                self.space.unmap(start, end - start);
                for (_, p) in new_pages {
                    st.release(p.frame);
                }
                return Err(MmError::NoMemory);
            }
            i = j;
        }
        for (va, p) in new_pages {
            if let Some(old) = st.pages.insert(va, p) {
                st.release(old.frame);
            }
        }
        outcome
    }

    /// Gives a copy-on-write page a frame of its own.
    fn break_cow(&self, st: &mut State, p: Page) -> Result<Page, MmError> {
        if self.mf.ref_count(p.frame) == 1 {
            // Nobody else holds it any more: take it over. The caller's
            // insert drops one reference, so take one to balance.
            self.mf.inc_ref(p.frame);
            return Ok(Page { frame: p.frame, cow: false });
        }
        let copy = self.mf.allocate().map_err(|_| MmError::NoMemory)?;
        // A fresh frame is zero already: nothing to copy from the zero page.
        if !self.mf.is_zero_frame(p.frame) {
            self.mf.copy_frame(p.frame, copy);
        }
        st.stats.cow_copies += 1;
        Ok(Page { frame: copy, cow: false })
    }

    // ---- fork ----

    /// A copy of this address space for a forked child, running in `space`.
    /// Private pages become copy-on-write in both, except pages pinned for
    /// host I/O (a read may still be storing into them): the child gets a
    /// copy of those at once and the parent keeps its frame writable, so the
    /// data lands where the reader will look for it. This is Linux's answer
    /// to the same race between pinned pages and fork.
    pub fn fork(&self, space: Arc<dyn AddressSpace>) -> Result<MemoryManager, MmError> {
        let mut st = self.lock();
        let child = MemoryManager::new(self.mf.clone(), space, st.stack_limit);
        *child.exe_hold.lock().unwrap() = self.exe_hold.lock().unwrap().clone();
        let mut cs = child.lock();
        let (pages, vmas) = (st.pages.len(), st.vmas.len());
        child.charge_records(&mut cs, pages, vmas)?;
        cs.vmas = st.vmas.clone();
        // Locks are not inherited: the child's memory is its own to lock.
        cs.vmas.update(0, USER_TOP, |v| MemLock::Unlocked.apply(v));
        cs.brk_start = st.brk_start;
        cs.brk = st.brk;
        cs.rewrites = st.rewrites.forked();
        let vmas: Vec<Vma> = st.vmas.iter().cloned().collect();
        // Runs of the parent's pages that lose write access.
        let mut write_protect: Vec<(u64, u64, Access)> = Vec::new();
        for v in &vmas {
            let private = v.is_private();
            let eff = effective(v.access);
            let mut run: Option<(u64, Vec<Frame>, Access)> = None;
            let keys: Vec<u64> = st.pages.range(v.start..v.end).map(|(k, _)| *k).collect();
            for va in keys {
                let p = st.pages.get_mut(&va).expect("present");
                // An exclusively owned private page has one reference; more
                // mean a pin.
                let pinned = private && !p.cow && self.mf.ref_count(p.frame) > 1;
                let cp = if pinned {
                    let copy = self.mf.allocate().map_err(|_| MmError::NoMemory)?;
                    self.mf.copy_frame(p.frame, copy);
                    Page { frame: copy, cow: false }
                } else {
                    self.mf.inc_ref(p.frame);
                    if private {
                        p.cow = true;
                        if eff.write {
                            match write_protect.last_mut() {
                                Some((_, e, a)) if *e == va && *a == eff.without_write() => *e += PAGE,
                                _ => write_protect.push((va, va + PAGE, eff.without_write())),
                            }
                        }
                    }
                    *p
                };
                cs.pages.insert(va, cp);
                if v.access.is_none() {
                    continue;
                }
                let a = if cp.cow { eff.without_write() } else { eff };
                run = match run {
                    Some((s, mut fr, ra)) if s + PAGE * fr.len() as u64 == va && ra == a => {
                        fr.push(cp.frame);
                        Some((s, fr, ra))
                    }
                    other => {
                        if let Some((s, fr, ra)) = other {
                            child.space.map(s, &fr, ra).map_err(|_| MmError::NoMemory)?;
                        }
                        Some((va, vec![cp.frame], a))
                    }
                };
            }
            if let Some((s, fr, ra)) = run {
                child.space.map(s, &fr, ra).map_err(|_| MmError::NoMemory)?;
            }
        }
        for (s, e, a) in write_protect {
            self.space.protect(s, e - s, a);
        }
        drop(cs);
        // Dropping the lock flushes: no thread of the parent writes through
        // an old writable translation once the child can run or another
        // thread can break copy-on-write.
        drop(st);
        Ok(child)
    }
}

impl Drop for MemoryManager {
    /// The address space is going away with its platform image: no CPU will
    /// run it again, so its translations need no invalidation; frames are
    /// simply released (the platform makes sure freed frames and page-table
    /// frames are not reused while a translation of them may survive).
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap();
        for p in st.pages.values() {
            self.mf.dec_ref(p.frame);
        }
        st.pages.clear();
        self.mf.uncharge(st.charged);
    }
}

/// The highest free range of `len` bytes below `top`. A search from the
/// top of the mmap area remembers the gaps it passed, so that the next one
/// for more than the largest of them starts where this one ended: mapping
/// after mapping costs a few steps each, not a walk over all of them.
fn find_free(vmas: &mut VmaMap, len: u64, top: u64) -> Option<u64> {
    let cache = vmas.free_cache().filter(|c| top == MMAP_TOP && len > c.largest);
    let (start, mut largest) = match cache {
        Some(c) => (c.below, c.largest),
        None => (top, 0),
    };
    let mut ceiling = start;
    // A stack keeps a guard gap below it.
    if vmas.find(start).is_some_and(|v| v.start == start && v.grows_down) {
        ceiling = ceiling.saturating_sub(STACK_GUARD_GAP);
    }
    // No wrap past the top of the address space, whatever `len` is.
    let fits = |ceiling: u64, floor: u64| {
        floor.checked_add(len).is_some_and(|end| ceiling >= end) && ceiling - len >= MMAP_MIN_ADDR
    };
    // The mappings below `start`, highest first, with the reserved range
    // among them as one more taken range: (start, end, grows down).
    let reserved = reserved_range();
    let mut reserved_pending = (reserved.start < start).then_some((reserved.start, reserved.end, false));
    let mut below = vmas.descending_below(start).map(|v| (v.start, v.end, v.grows_down)).peekable();
    let taken = std::iter::from_fn(move || match (reserved_pending, below.peek()) {
        (Some(r), Some(v)) if v.0 >= r.1 => below.next(),
        (Some(r), _) => {
            reserved_pending = None;
            Some(r)
        }
        (None, _) => below.next(),
    });
    let mut found = None;
    for (v_start, v_end, grows_down) in taken {
        if fits(ceiling, v_end) {
            found = Some(ceiling - len);
            break;
        }
        largest = largest.max(ceiling.saturating_sub(v_end));
        ceiling = v_start.min(ceiling);
        if grows_down {
            ceiling = ceiling.saturating_sub(STACK_GUARD_GAP);
        }
    }
    if found.is_none() && fits(ceiling, MMAP_MIN_ADDR) {
        found = Some(ceiling - len);
    }
    if let Some(addr) = found
        && top == MMAP_TOP
    {
        vmas.set_free_cache(vma::FreeCache { below: addr, largest });
    }
    found
}

#[cfg(test)]
mod tests;
