//! Virtual memory areas: the ranges an application has mapped and what each
//! one is.

use std::collections::BTreeMap;
use std::sync::Arc;

use platform::Access;

use super::shared::SharedMemory;
use super::{MapPath, Mappable};

/// What backs a VMA's pages.
#[derive(Clone)]
pub enum Backing {
    /// Private zero-filled memory.
    Anonymous,
    /// Memory shared with whoever else maps the same object (MAP_SHARED
    /// anonymous mappings and their fork copies).
    Shared { object: Arc<SharedMemory>, offset: u64 },
    /// Pages of a file. Private mappings copy a page on first write.
    /// `name` is the name it was mapped by, which /proc/PID/maps shows.
    File { file: Arc<dyn Mappable>, offset: u64, shared: bool, name: Option<Arc<dyn MapPath>> },
}

impl Backing {
    /// The backing for the part of a mapping starting `delta` bytes in.
    pub(super) fn advanced(&self, delta: u64) -> Backing {
        match self {
            Backing::Anonymous => Backing::Anonymous,
            Backing::Shared { object, offset } => Backing::Shared { object: object.clone(), offset: offset + delta },
            Backing::File { file, offset, shared, name } => {
                Backing::File { file: file.clone(), offset: offset + delta, shared: *shared, name: name.clone() }
            }
        }
    }

    /// True if two backings continue each other seamlessly at `delta`.
    fn continues(&self, next: &Backing, delta: u64) -> bool {
        match (self, next) {
            (Backing::Anonymous, Backing::Anonymous) => true,
            (Backing::Shared { object: a, offset: x }, Backing::Shared { object: b, offset: y }) => {
                Arc::ptr_eq(a, b) && x + delta == *y
            }
            (
                Backing::File { file: a, offset: x, shared: s, name: m },
                Backing::File { file: b, offset: y, shared: t, name: n },
            ) => {
                let same_name = match (m, n) {
                    (Some(m), Some(n)) => Arc::ptr_eq(m, n),
                    (None, None) => true,
                    _ => false,
                };
                Arc::ptr_eq(a, b) && x + delta == *y && s == t && same_name
            }
            _ => false,
        }
    }
}

/// Special roles a VMA can have, shown in /proc/PID/maps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Plain,
    Heap,
    Stack,
    /// The table and cells of rewritten system call sites, which the
    /// application does not see.
    Trampolines,
}

/// One virtual memory area.
#[derive(Clone)]
pub struct Vma {
    pub start: u64,
    pub end: u64,
    /// What the application may do now (mprotect changes it).
    pub access: Access,
    /// The most `access` may become: a shared mapping of a read-only file
    /// can never be made writable.
    pub max_access: Access,
    pub backing: Backing,
    /// The area grows down on faults below it (the main stack).
    pub grows_down: bool,
    pub role: Role,
    /// Locked in memory (mlock, mlockall, MAP_LOCKED: Linux's VM_LOCKED):
    /// counted against RLIMIT_MEMLOCK and kept resident.
    pub locked: bool,
    /// Locked, but pages become resident only when first touched
    /// (MLOCK_ONFAULT, MCL_ONFAULT: Linux's VM_LOCKONFAULT).
    pub lock_onfault: bool,
}

impl Vma {
    pub fn new(start: u64, end: u64, access: Access, backing: Backing) -> Vma {
        Vma {
            start,
            end,
            access,
            max_access: Access::ALL,
            backing,
            grows_down: false,
            role: Role::Plain,
            locked: false,
            lock_onfault: false,
        }
    }

    pub fn len(&self) -> u64 {
        self.end - self.start
    }

    /// Never true: a VMA covers at least one page.
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }

    /// True for a private mapping (anonymous or file).
    pub fn is_private(&self) -> bool {
        match &self.backing {
            Backing::Anonymous => true,
            Backing::Shared { .. } => false,
            Backing::File { shared, .. } => !shared,
        }
    }

    /// The part of this VMA within `[start, end)`.
    fn slice(&self, start: u64, end: u64) -> Vma {
        debug_assert!(start >= self.start && end <= self.end && start < end);
        let mut v = self.clone();
        v.backing = self.backing.advanced(start - self.start);
        v.start = start;
        v.end = end;
        v
    }

    fn mergeable_with(&self, next: &Vma) -> bool {
        self.end == next.start
            && self.access == next.access
            && self.max_access == next.max_access
            && self.grows_down == next.grows_down
            && self.role == next.role
            && self.locked == next.locked
            && self.lock_onfault == next.lock_onfault
            && self.backing.continues(&next.backing, self.len())
    }
}

/// The VMAs of an address space, ordered and non-overlapping.
#[derive(Clone, Default)]
pub struct VmaMap {
    map: BTreeMap<u64, Vma>,
    /// What the last top-down search for free space learnt, so the next
    /// one need not walk every mapping again (Linux's old free_area_cache).
    free_cache: Option<FreeCache>,
}

/// No free gap between `below` and the top of the mmap area is larger than
/// `largest` bytes.
#[derive(Clone, Copy, Debug)]
pub struct FreeCache {
    pub below: u64,
    pub largest: u64,
}

impl VmaMap {
    /// The VMA containing `addr`.
    pub fn find(&self, addr: u64) -> Option<&Vma> {
        self.map.range(..=addr).next_back().map(|(_, v)| v).filter(|v| addr < v.end)
    }

    /// The first VMA ending above `addr`.
    pub fn first_ending_after(&self, addr: u64) -> Option<&Vma> {
        if let Some(v) = self.find(addr) {
            return Some(v);
        }
        self.map.range(addr..).next().map(|(_, v)| v)
    }

    /// The last VMA starting below `addr`.
    pub fn last_before(&self, addr: u64) -> Option<&Vma> {
        self.map.range(..addr).next_back().map(|(_, v)| v)
    }

    /// VMAs starting below `addr`, highest first.
    pub fn descending_below(&self, addr: u64) -> impl Iterator<Item = &Vma> {
        self.map.range(..addr).rev().map(|(_, v)| v)
    }

    /// What the last search for free space left (see [`FreeCache`]).
    pub fn free_cache(&self) -> Option<FreeCache> {
        self.free_cache
    }

    /// Records what a search for free space learnt.
    pub fn set_free_cache(&mut self, cache: FreeCache) {
        self.free_cache = Some(cache);
    }

    /// VMAs overlapping `[start, end)`, in order.
    pub fn overlapping(&self, start: u64, end: u64) -> impl Iterator<Item = &Vma> {
        let first =
            self.map.range(..=start).next_back().filter(|(_, v)| v.end > start).map(|(k, _)| *k).unwrap_or(start);
        self.map.range(first..end).map(|(_, v)| v).filter(move |v| v.end > start)
    }

    /// True if nothing is mapped in `[start, end)` and none of it is
    /// reserved.
    pub fn is_free(&self, start: u64, end: u64) -> bool {
        !super::overlaps_reserved(start, end) && self.overlapping(start, end).next().is_none()
    }

    /// True if `[start, end)` is entirely mapped, without holes.
    pub fn is_fully_mapped(&self, start: u64, end: u64) -> bool {
        let mut at = start;
        for v in self.overlapping(start, end) {
            if v.start > at {
                return false;
            }
            at = v.end;
        }
        at >= end
    }

    pub fn iter(&self) -> impl Iterator<Item = &Vma> {
        self.map.values()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Splits VMAs so that `addr` is a boundary.
    fn split_at(&mut self, addr: u64) {
        let Some(v) = self.find(addr) else { return };
        if v.start == addr {
            return;
        }
        let v = v.clone();
        self.map.insert(v.start, v.slice(v.start, addr));
        self.map.insert(addr, v.slice(addr, v.end));
    }

    /// Removes `[start, end)` and returns the removed pieces.
    pub fn remove(&mut self, start: u64, end: u64) -> Vec<Vma> {
        // Space freed above the cached point may be a gap larger than the
        // cache knows of.
        if self.free_cache.is_some_and(|c| end > c.below) {
            self.free_cache = None;
        }
        self.split_at(start);
        self.split_at(end);
        let keys: Vec<u64> = self.map.range(start..end).map(|(k, _)| *k).collect();
        keys.into_iter().map(|k| self.map.remove(&k).expect("present")).collect()
    }

    /// Inserts a VMA over a free range, merging with equal neighbours.
    pub fn insert(&mut self, vma: Vma) {
        debug_assert!(self.is_free(vma.start, vma.end), "insert over mapped range");
        self.map.insert(vma.start, vma);
    }

    /// Applies `f` to each VMA piece within `[start, end)` (splitting at the
    /// bounds), then merges neighbours that became equal.
    pub fn update(&mut self, start: u64, end: u64, mut f: impl FnMut(&mut Vma)) {
        self.split_at(start);
        self.split_at(end);
        for (_, v) in self.map.range_mut(start..end) {
            f(v);
        }
        self.merge_around(start, end);
    }

    /// Merges mergeable neighbours in and at the edges of `[start, end)`.
    pub fn merge_around(&mut self, start: u64, end: u64) {
        let from = self.last_before(start).map(|v| v.start).unwrap_or(start);
        let keys: Vec<u64> = self.map.range(from..=end).map(|(k, _)| *k).collect();
        let mut prev: Option<u64> = None;
        for k in keys {
            if let Some(p) = prev {
                let mergeable = self.map[&p].mergeable_with(&self.map[&k]);
                if mergeable {
                    let next = self.map.remove(&k).expect("present");
                    self.map.get_mut(&p).expect("present").end = next.end;
                    continue;
                }
            }
            prev = Some(k);
        }
    }

    /// Moves the bounds of the VMA starting at `start` into free space
    /// (growing the end, or the start of an anonymous area downwards).
    pub fn resize(&mut self, start: u64, new_start: u64, new_end: u64) {
        let mut v = self.map.remove(&start).expect("resize of unknown VMA");
        debug_assert!(
            new_start == v.start || matches!(v.backing, Backing::Anonymous),
            "only anonymous areas grow down"
        );
        v.start = new_start;
        v.end = new_end;
        self.map.insert(new_start, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn anon(start: u64, end: u64, access: Access) -> Vma {
        Vma::new(start, end, access, Backing::Anonymous)
    }

    fn ranges(m: &VmaMap) -> Vec<(u64, u64)> {
        m.iter().map(|v| (v.start, v.end)).collect()
    }

    #[test]
    fn find_and_overlap() {
        let mut m = VmaMap::default();
        m.insert(anon(0x1000, 0x3000, Access::READ));
        m.insert(anon(0x5000, 0x6000, Access::READ_WRITE));
        assert!(m.find(0x0fff).is_none());
        assert_eq!(m.find(0x2fff).unwrap().start, 0x1000);
        assert!(m.find(0x3000).is_none());
        assert_eq!(m.overlapping(0x2000, 0x5001).count(), 2);
        assert!(m.is_free(0x3000, 0x5000));
        assert!(!m.is_fully_mapped(0x1000, 0x6000));
        assert!(m.is_fully_mapped(0x1000, 0x3000));
        assert_eq!(m.first_ending_after(0x3000).unwrap().start, 0x5000);
    }

    #[test]
    fn remove_splits() {
        let mut m = VmaMap::default();
        m.insert(anon(0x1000, 0x9000, Access::READ));
        let removed = m.remove(0x3000, 0x5000);
        assert_eq!(removed.len(), 1);
        assert_eq!((removed[0].start, removed[0].end), (0x3000, 0x5000));
        assert_eq!(ranges(&m), vec![(0x1000, 0x3000), (0x5000, 0x9000)]);
        m.remove(0, 0x10000);
        assert!(m.is_empty());
    }

    #[test]
    fn update_splits_then_merges_back() {
        let mut m = VmaMap::default();
        m.insert(anon(0x1000, 0x9000, Access::READ_WRITE));
        m.update(0x2000, 0x3000, |v| v.access = Access::READ);
        assert_eq!(ranges(&m), vec![(0x1000, 0x2000), (0x2000, 0x3000), (0x3000, 0x9000)]);
        m.update(0x2000, 0x3000, |v| v.access = Access::READ_WRITE);
        assert_eq!(ranges(&m), vec![(0x1000, 0x9000)], "equal neighbours merge");
    }

    #[test]
    fn file_offsets_follow_splits() {
        struct NoFile;
        impl Mappable for NoFile {
            fn page(&self, _: u64) -> Result<Option<memory::Frame>, crate::mm::MmError> {
                Ok(None)
            }
            fn size(&self) -> u64 {
                0
            }
            fn describe(&self) -> crate::mm::MapName {
                crate::mm::MapName::default()
            }
        }
        let f: Arc<dyn Mappable> = Arc::new(NoFile);
        let mut m = VmaMap::default();
        m.insert(Vma::new(
            0x10000,
            0x20000,
            Access::READ,
            Backing::File { file: f.clone(), offset: 0x3000, shared: false, name: None },
        ));
        m.update(0x14000, 0x15000, |v| v.access = Access::READ_WRITE);
        let mid = m.find(0x14000).unwrap();
        let Backing::File { offset, .. } = &mid.backing else { panic!() };
        assert_eq!(*offset, 0x7000);
        m.update(0x14000, 0x15000, |v| v.access = Access::READ);
        assert_eq!(m.len(), 1, "contiguous file pieces merge again");
    }
}
