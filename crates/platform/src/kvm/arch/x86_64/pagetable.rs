//! x86_64 4-level page tables, built by the host in frames of the memory
//! file. Only the lower (user) half is managed here; PML4 slot 511 points at
//! the shared supervisor tables.

use memory::Frame;

use crate::{Access, PlatformError};

/// Page-table entry bits.
pub mod entry {
    use memory::Frame;

    use crate::Access;

    pub const PRESENT: u64 = 1 << 0;
    pub const WRITABLE: u64 = 1 << 1;
    pub const USER: u64 = 1 << 2;
    pub const ACCESSED: u64 = 1 << 5;
    pub const DIRTY: u64 = 1 << 6;
    pub const NO_EXECUTE: u64 = 1 << 63;
    pub const ADDR_MASK: u64 = 0x000f_ffff_ffff_f000;

    /// Intermediate tables allow everything; leaves decide. Accessed and
    /// dirty are set up front so the hypervisor never writes them back, and
    /// so KVM's shadow MMU prefetches neighbouring entries.
    pub const TABLE: u64 = PRESENT | WRITABLE | USER | ACCESSED;
    pub const USER_CODE: u64 = PRESENT | USER | ACCESSED;
    pub const KERNEL_CODE: u64 = PRESENT | ACCESSED;
    pub const KERNEL_RO: u64 = PRESENT | ACCESSED | NO_EXECUTE;
    pub const KERNEL_DATA: u64 = PRESENT | WRITABLE | ACCESSED | DIRTY | NO_EXECUTE;
    pub const USER_MMIO: u64 = PRESENT | WRITABLE | USER | ACCESSED | DIRTY | NO_EXECUTE;
    pub const KERNEL_MMIO: u64 = PRESENT | WRITABLE | ACCESSED | DIRTY | NO_EXECUTE;

    /// A leaf entry mapping `frame` for user code with `access`. x86 cannot
    /// express write-only or execute-only pages: both are also readable.
    pub fn leaf(frame: Frame, access: Access) -> u64 {
        let mut e = frame.offset() | PRESENT | USER | ACCESSED;
        if access.write {
            e |= WRITABLE | DIRTY;
        }
        if !access.execute {
            e |= NO_EXECUTE;
        }
        e
    }

    /// The frame a present entry points at.
    pub fn frame(e: u64) -> Frame {
        Frame::containing(e & ADDR_MASK)
    }

    /// The access a present leaf entry grants.
    pub fn access(e: u64) -> Access {
        Access { read: true, write: e & WRITABLE != 0, execute: e & NO_EXECUTE == 0 }
    }
}

/// Where page tables live. The kvm platform backs this with the memory file;
/// tests back it with a map.
pub trait TableMemory {
    /// A zero-filled frame for a new table.
    fn alloc_table(&self) -> Result<Frame, PlatformError>;
    /// A table no longer in use.
    fn release_table(&self, table: Frame);
    fn read(&self, table: Frame, index: usize) -> u64;
    fn write(&self, table: Frame, index: usize, value: u64);
}

/// First address above the user half.
pub const USER_END: u64 = 1 << 47;
const SUPERVISOR_SLOT: usize = super::supervisor::PML4_INDEX;

fn index(va: u64, level: u32) -> usize {
    ((va >> (12 + 9 * (level - 1))) & 511) as usize
}

fn span(level: u32) -> u64 {
    1u64 << (12 + 9 * (level - 1))
}

/// One address space's tables.
pub struct PageTables {
    root: Frame,
    tables: usize,
}

impl PageTables {
    /// An empty address space whose PML4 maps the supervisor area with
    /// `supervisor_entry`.
    pub fn new(mem: &impl TableMemory, supervisor_entry: u64) -> Result<Self, PlatformError> {
        let root = mem.alloc_table()?;
        mem.write(root, SUPERVISOR_SLOT, supervisor_entry);
        Ok(PageTables { root, tables: 1 })
    }

    /// The PML4 frame (CR3).
    pub fn root(&self) -> Frame {
        self.root
    }

    /// Number of table frames held.
    #[cfg(test)]
    pub fn table_count(&self) -> usize {
        self.tables
    }

    /// The leaf table covering `va`, created if `create`.
    fn leaf_table(&mut self, mem: &impl TableMemory, va: u64, create: bool) -> Result<Option<Frame>, PlatformError> {
        let mut table = self.root;
        for level in [4, 3, 2] {
            let i = index(va, level);
            let e = mem.read(table, i);
            table = if e & entry::PRESENT != 0 {
                entry::frame(e)
            } else if create {
                let t = mem.alloc_table()?;
                self.tables += 1;
                mem.write(table, i, t.offset() | entry::TABLE);
                t
            } else {
                return Ok(None);
            };
        }
        Ok(Some(table))
    }

    /// Maps consecutive pages from `va` to `frames`. Entries that were
    /// present and pointed elsewhere, or allowed more, are reported in
    /// `stale`: translations of them may still be cached.
    pub fn map(
        &mut self,
        mem: &impl TableMemory,
        va: u64,
        frames: &[Frame],
        access: Access,
        stale: &mut Vec<Frame>,
    ) -> Result<(), PlatformError> {
        assert!(va.is_multiple_of(4096) && va + 4096 * frames.len() as u64 <= USER_END, "bad user range {va:#x}");
        let mut cached: Option<(u64, Frame)> = None;
        for (i, f) in frames.iter().enumerate() {
            let page = va + 4096 * i as u64;
            let region = page & !(span(2) - 1);
            let table = match cached {
                Some((r, t)) if r == region => t,
                _ => {
                    let t = self.leaf_table(mem, page, true)?.expect("created");
                    cached = Some((region, t));
                    t
                }
            };
            let idx = index(page, 1);
            let old = mem.read(table, idx);
            let new = entry::leaf(*f, access);
            if old & entry::PRESENT != 0 && (entry::frame(old) != *f || !access.contains(entry::access(old))) {
                stale.push(entry::frame(old));
            }
            mem.write(table, idx, new);
        }
        Ok(())
    }

    /// Calls `visit(table, index, entry)` for every present leaf entry in
    /// `[start, end)`, skipping absent subtrees whole.
    fn for_each_leaf(&self, mem: &impl TableMemory, start: u64, end: u64, visit: &mut impl FnMut(Frame, usize, u64)) {
        fn walk(
            mem: &impl TableMemory,
            table: Frame,
            level: u32,
            base: u64,
            start: u64,
            end: u64,
            visit: &mut impl FnMut(Frame, usize, u64),
        ) {
            let s = span(level);
            let first = ((start.max(base) - base) / s) as usize;
            let last = (((end.min(base + 512 * s)) - base).div_ceil(s)) as usize;
            for i in first..last.min(512) {
                if level == 4 && i >= 256 {
                    break;
                }
                let e = mem.read(table, i);
                if e & entry::PRESENT == 0 {
                    continue;
                }
                if level == 1 {
                    visit(table, i, e);
                } else {
                    let child_base = base + i as u64 * s;
                    walk(mem, entry::frame(e), level - 1, child_base, start, end, visit);
                }
            }
        }
        if start < end {
            walk(mem, self.root, 4, 0, start, end.min(USER_END), visit);
        }
    }

    /// Removes every mapping in `[start, end)`, reporting the frames that
    /// were mapped in `stale`.
    pub fn unmap(&mut self, mem: &impl TableMemory, start: u64, end: u64, stale: &mut Vec<Frame>) {
        self.for_each_leaf(mem, start, end, &mut |table, i, e| {
            mem.write(table, i, 0);
            stale.push(entry::frame(e));
        });
    }

    /// Changes the access of every mapped page in `[start, end)`. Pages
    /// whose rights shrink are reported in `stale`.
    pub fn protect(&mut self, mem: &impl TableMemory, start: u64, end: u64, access: Access, stale: &mut Vec<Frame>) {
        if access.is_none() {
            return self.unmap(mem, start, end, stale);
        }
        self.for_each_leaf(mem, start, end, &mut |table, i, e| {
            let f = entry::frame(e);
            if !access.contains(entry::access(e)) {
                stale.push(f);
            }
            mem.write(table, i, entry::leaf(f, access));
        });
    }

    /// The leaf entry mapping `va`, if present.
    #[cfg(test)]
    pub fn lookup(&mut self, mem: &impl TableMemory, va: u64) -> Option<u64> {
        let t = self.leaf_table(mem, va, false).ok()??;
        let e = mem.read(t, index(va, 1));
        (e & entry::PRESENT != 0).then_some(e)
    }

    /// Releases every table; frames still mapped are reported in `mapped`.
    pub fn destroy(self, mem: &impl TableMemory, mapped: &mut Vec<Frame>) {
        fn free(mem: &impl TableMemory, table: Frame, level: u32, mapped: &mut Vec<Frame>) {
            for i in 0..if level == 4 { 256 } else { 512 } {
                let e = mem.read(table, i);
                if e & entry::PRESENT == 0 {
                    continue;
                }
                if level == 1 {
                    mapped.push(entry::frame(e));
                } else {
                    free(mem, entry::frame(e), level - 1, mapped);
                }
            }
            mem.release_table(table);
        }
        free(mem, self.root, 4, mapped);
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::collections::HashMap;

    use super::*;

    #[derive(Default)]
    struct FakeMemory {
        tables: RefCell<HashMap<u64, [u64; 512]>>,
        next: RefCell<u64>,
        released: RefCell<Vec<Frame>>,
    }

    impl TableMemory for FakeMemory {
        fn alloc_table(&self) -> Result<Frame, PlatformError> {
            let mut n = self.next.borrow_mut();
            *n += 1;
            let f = Frame::from_number(1000 + *n);
            self.tables.borrow_mut().insert(f.number(), [0; 512]);
            Ok(f)
        }
        fn release_table(&self, table: Frame) {
            self.tables.borrow_mut().remove(&table.number()).expect("release of unknown table");
            self.released.borrow_mut().push(table);
        }
        fn read(&self, table: Frame, index: usize) -> u64 {
            self.tables.borrow()[&table.number()][index]
        }
        fn write(&self, table: Frame, index: usize, value: u64) {
            self.tables.borrow_mut().get_mut(&table.number()).unwrap()[index] = value;
        }
    }

    fn frames(range: std::ops::Range<u64>) -> Vec<Frame> {
        range.map(Frame::from_number).collect()
    }

    #[test]
    fn map_builds_four_levels_and_keeps_supervisor_slot() {
        let mem = FakeMemory::default();
        let mut pt = PageTables::new(&mem, 0xabc000 | entry::TABLE).unwrap();
        let mut stale = vec![];
        pt.map(&mem, 0x40_0000, &frames(1..4), Access::READ_EXECUTE, &mut stale).unwrap();
        assert!(stale.is_empty());
        assert_eq!(pt.table_count(), 4);
        let e = pt.lookup(&mem, 0x40_1000).unwrap();
        assert_eq!(entry::frame(e), Frame::from_number(2));
        assert_eq!(entry::access(e), Access::READ_EXECUTE);
        assert_eq!(e & entry::USER, entry::USER);
        assert_eq!(mem.read(pt.root(), 511), 0xabc000 | entry::TABLE);
        assert!(pt.lookup(&mem, 0x40_3000).is_none());
    }

    #[test]
    fn mapping_across_table_boundaries() {
        let mem = FakeMemory::default();
        let mut pt = PageTables::new(&mem, 0).unwrap();
        let mut stale = vec![];
        // Straddles a 2 MiB and a 1 GiB boundary.
        let va = (1 << 30) - 2 * 4096;
        pt.map(&mem, va, &frames(10..14), Access::READ_WRITE, &mut stale).unwrap();
        for i in 0..4 {
            let e = pt.lookup(&mem, va + i * 4096).unwrap();
            assert_eq!(entry::frame(e).number(), 10 + i);
            assert_ne!(e & entry::DIRTY, 0);
        }
    }

    #[test]
    fn replacing_or_downgrading_reports_stale_frames() {
        let mem = FakeMemory::default();
        let mut pt = PageTables::new(&mem, 0).unwrap();
        let mut stale = vec![];
        pt.map(&mem, 0x1000, &frames(5..7), Access::READ, &mut stale).unwrap();
        pt.map(&mem, 0x1000, &frames(5..6), Access::READ_WRITE, &mut stale).unwrap();
        assert!(stale.is_empty(), "an upgrade needs no invalidation");
        pt.map(&mem, 0x2000, &frames(9..10), Access::READ, &mut stale).unwrap();
        assert_eq!(stale, frames(6..7), "a replaced frame is stale");
        stale.clear();
        pt.protect(&mem, 0, 0x10000, Access::READ, &mut stale);
        assert_eq!(stale, frames(5..6), "only the page that lost write is stale");
        stale.clear();
        pt.protect(&mem, 0, 0x10000, Access::ALL, &mut stale);
        assert!(stale.is_empty());
    }

    #[test]
    fn unmap_skips_holes_and_reports_mapped_frames() {
        let mem = FakeMemory::default();
        let mut pt = PageTables::new(&mem, 0).unwrap();
        let mut stale = vec![];
        pt.map(&mem, 0x7000_0000_0000, &frames(1..3), Access::READ_WRITE, &mut stale).unwrap();
        pt.map(&mem, 0x1000, &frames(3..4), Access::READ_WRITE, &mut stale).unwrap();
        // A huge, mostly empty range is cheap because absent subtrees are skipped.
        pt.unmap(&mem, 0x2000, USER_END, &mut stale);
        assert_eq!(stale, frames(1..3));
        assert!(pt.lookup(&mem, 0x7000_0000_0000).is_none());
        assert!(pt.lookup(&mem, 0x1000).is_some(), "pages outside the range stay");
    }

    #[test]
    fn partial_ranges_respect_bounds() {
        let mem = FakeMemory::default();
        let mut pt = PageTables::new(&mem, 0).unwrap();
        let mut stale = vec![];
        pt.map(&mem, 0x10_0000, &frames(1..9), Access::READ_WRITE, &mut stale).unwrap();
        pt.unmap(&mem, 0x10_2000, 0x10_4000, &mut stale);
        assert_eq!(stale, frames(3..5));
        assert!(pt.lookup(&mem, 0x10_1000).is_some());
        assert!(pt.lookup(&mem, 0x10_2000).is_none());
        assert!(pt.lookup(&mem, 0x10_4000).is_some());
    }

    #[test]
    fn destroy_releases_every_table() {
        let mem = FakeMemory::default();
        let mut pt = PageTables::new(&mem, 0).unwrap();
        let mut stale = vec![];
        pt.map(&mem, 0x1000, &frames(1..2), Access::READ, &mut stale).unwrap();
        pt.map(&mem, 0x5000_0000_0000, &frames(2..3), Access::READ, &mut stale).unwrap();
        let n = pt.table_count();
        let mut mapped = vec![];
        pt.destroy(&mem, &mut mapped);
        mapped.sort();
        assert_eq!(mapped, frames(1..3));
        assert_eq!(mem.released.borrow().len(), n);
        assert!(mem.tables.borrow().is_empty());
    }
}
