use std::any::Any;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use memory::{Frame, MemoryFile};
use platform::{Access, AddressSpace, PlatformError};

use super::*;
use super::{MapName, Mappable, MmError};

/// Records what the memory manager asks the platform to map.
#[derive(Default)]
struct FakeSpace {
    ptes: Mutex<BTreeMap<u64, (Frame, Access)>>,
}

impl FakeSpace {
    fn get(&self, va: u64) -> Option<(Frame, Access)> {
        self.ptes.lock().unwrap().get(&va).copied()
    }
    fn count(&self) -> usize {
        self.ptes.lock().unwrap().len()
    }
}

impl AddressSpace for FakeSpace {
    fn map(&self, va: u64, frames: &[Frame], access: Access) -> Result<(), PlatformError> {
        let mut p = self.ptes.lock().unwrap();
        for (i, f) in frames.iter().enumerate() {
            p.insert(va + 4096 * i as u64, (*f, access));
        }
        Ok(())
    }
    fn unmap(&self, va: u64, len: u64) {
        let mut p = self.ptes.lock().unwrap();
        let keys: Vec<u64> = p.range(va..va.saturating_add(len)).map(|(k, _)| *k).collect();
        for k in keys {
            p.remove(&k);
        }
    }
    fn protect(&self, va: u64, len: u64, access: Access) {
        let mut p = self.ptes.lock().unwrap();
        let keys: Vec<u64> = p.range(va..va.saturating_add(len)).map(|(k, _)| *k).collect();
        for k in keys {
            if access.is_none() {
                p.remove(&k);
            } else {
                p.get_mut(&k).unwrap().1 = access;
            }
        }
    }
    fn flush(&self) {}
    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn setup() -> (Arc<MemoryFile>, Arc<FakeSpace>, MemoryManager) {
    let mf = Arc::new(MemoryFile::new(4 << 30).unwrap());
    let space = Arc::new(FakeSpace::default());
    let mm = MemoryManager::new(mf.clone(), space.clone(), 8 << 20);
    (mf, space, mm)
}

const RW: Access = Access::READ_WRITE;
const R: Access = Access::READ;

fn anon(mm: &MemoryManager, addr: u64, len: u64, access: Access) -> u64 {
    let flags = MapFlags { fixed: addr != 0, ..Default::default() };
    mm.map(addr, len, access, Backing::Anonymous, flags).unwrap()
}

#[test]
fn fault_maps_a_window_of_pages() {
    let (_, space, mm) = setup();
    let a = anon(&mm, 0x100_0000, 1 << 20, RW);
    mm.handle_fault(a + 5 * 4096 + 12, Access { write: true, ..Access::READ }).unwrap();
    assert_eq!(space.count(), FAULT_AROUND_ANON as usize);
    assert_eq!(space.get(a + 5 * 4096).unwrap().1, RW);
    assert!(space.get(a + FAULT_AROUND_ANON * 4096).is_none(), "window stays aligned");
}

#[test]
fn writes_in_order_grow_the_window() {
    let (_, space, mm) = setup();
    let a = anon(&mm, 0x100_0000, 8 << 20, RW);
    let w = Access { write: true, ..Access::READ };
    // Each fault lands where the last one's window ended: the windows are
    // 16, 32, 64, ... pages, up to the most a stream maps at once.
    let mut at = a;
    let mut expected = FAULT_AROUND_ANON;
    for step in 0..7 {
        mm.handle_fault(at, w).unwrap();
        assert_eq!(space.count() as u64, (at - a) / 4096 + expected, "fault {step}");
        at += expected * 4096;
        expected = (expected * 2).min(FAULT_STREAM_ANON_MAX);
    }
    assert!(space.get(at).is_none());
}

#[test]
fn writes_out_of_order_keep_the_fixed_window() {
    let (_, space, mm) = setup();
    let a = anon(&mm, 0x100_0000, 8 << 20, RW);
    let w = Access { write: true, ..Access::READ };
    for i in [40u64, 3, 100, 64, 120] {
        let before = space.count();
        mm.handle_fault(a + i * FAULT_AROUND_ANON * 4096, w).unwrap();
        assert_eq!(space.count() - before, FAULT_AROUND_ANON as usize, "fault in window {i}");
    }
}

#[test]
fn a_stream_short_of_memory_falls_back_to_the_window() {
    // Room for the first windows of a stream but not for its next doubling.
    let mf = Arc::new(MemoryFile::new(80 * 4096).unwrap());
    let space = Arc::new(FakeSpace::default());
    let mm = MemoryManager::new(mf.clone(), space.clone(), 8 << 20);
    let a = anon(&mm, 0x100_0000, 1 << 20, RW);
    let w = Access { write: true, ..Access::READ };
    mm.handle_fault(a, w).unwrap();
    mm.handle_fault(a + 16 * 4096, w).unwrap();
    assert_eq!(space.count(), 48);
    // 64 more pages do not fit; 16 do.
    mm.handle_fault(a + 48 * 4096, w).unwrap();
    assert_eq!(space.count(), 64);
    assert!(space.get(a + 48 * 4096).is_some());
}

#[test]
fn reads_of_untouched_memory_map_the_zero_frame() {
    let (mf, space, mm) = setup();
    let a = anon(&mm, 0x100_0000, 1 << 20, RW);
    mm.handle_fault(a + 5 * 4096, Access::READ).unwrap();
    let zero = mf.zero_frame().unwrap();
    assert_eq!(space.count(), FAULT_AROUND_ANON as usize);
    for i in 0..FAULT_AROUND_ANON {
        assert_eq!(space.get(a + i * 4096).unwrap(), (zero, R), "page {i}: the zero frame, read-only");
    }
    let in_use = mf.stats().frames_in_use;
    // The first write gives the page a frame of its own; its neighbours
    // keep reading zeros.
    mm.handle_fault(a + 5 * 4096, Access { write: true, ..Access::READ }).unwrap();
    let (own, access) = space.get(a + 5 * 4096).unwrap();
    assert_ne!(own, zero);
    assert_eq!(access, RW);
    assert_eq!(mf.stats().frames_in_use, in_use + 1);
    assert_eq!(space.get(a + 6 * 4096).unwrap(), (zero, R));
    mm.copy_out(a + 6 * 4096, b"x").unwrap();
    assert!(mf.frame(zero).to_vec().iter().all(|b| *b == 0), "the zero frame is never written");
    let mut b = [1u8; 1];
    mm.copy_in(a + 7 * 4096, &mut b).unwrap();
    assert_eq!(b, [0]);
}

#[test]
fn the_map_count_is_capped() {
    let (mf, _, mm) = setup();
    let base = 0x100_0000;
    // Alternating access, so no two neighbours merge.
    let access = |i: u64| if i.is_multiple_of(2) { R } else { RW };
    for i in 0..=MAX_MAP_COUNT as u64 {
        anon(&mm, base + i * 4096, 4096, access(i));
    }
    assert_eq!(mm.vmas().len(), MAX_MAP_COUNT + 1, "mmap checks the count before adding one");
    assert!(mf.stats().frames_charged > 0, "VMAs are charged");
    let flags = MapFlags::default();
    assert!(matches!(mm.map(0, 4096, R, Backing::Anonymous, flags), Err(MmError::NoMemory)));
    // Three pages in one read-only mapping (its neighbour above is
    // writable), and one more apart: the count is at the limit.
    mm.unmap(base, 3 * 4096).unwrap();
    anon(&mm, base, 3 * 4096, R);
    anon(&mm, base + (1 << 30), 4096, R);
    assert_eq!(mm.vmas().len(), MAX_MAP_COUNT);
    // Its middle cannot be split off, nor any part change access.
    assert!(matches!(mm.unmap(base + 4096, 4096), Err(MmError::NoMemory)));
    assert!(matches!(mm.protect(base + 4096, 4096, RW), Err(MmError::NoMemory)));
    assert!(matches!(mm.protect(base, 4096, RW), Err(MmError::NoMemory)));
    // What needs no split is done.
    mm.protect(base, 3 * 4096, R).unwrap();
    mm.unmap(base + 2 * 4096, 4096).unwrap();
    assert_eq!(mm.vmas().len(), MAX_MAP_COUNT, "cutting an end adds nothing");
}

#[test]
fn faults_outside_mappings_or_rights_are_errors() {
    let (_, _, mm) = setup();
    let a = anon(&mm, 0x100_0000, 4096, R);
    assert!(matches!(mm.handle_fault(a + 4096, Access::READ), Err(MmError::Unmapped)));
    assert!(matches!(mm.handle_fault(a, Access { write: true, ..Access::NONE }), Err(MmError::Access)));
    assert!(matches!(mm.handle_fault(a, Access { execute: true, ..Access::NONE }), Err(MmError::Access)));
    assert!(mm.handle_fault(a, Access::READ).is_ok());
    assert_eq!(mm.stats().faults_signalled, 3);
}

#[test]
fn copies_round_trip_across_pages() {
    let (_, _, mm) = setup();
    let a = anon(&mm, 0, 3 * 4096, RW);
    let data: Vec<u8> = (0..6000u32).map(|i| i as u8).collect();
    mm.copy_out(a + 4000, &data).unwrap();
    let mut back = vec![0u8; 6000];
    mm.copy_in(a + 4000, &mut back).unwrap();
    assert_eq!(back, data);
    assert!(matches!(mm.copy_out(a + 3 * 4096 - 1, &[1, 2]), Err(MmError::Unmapped)));
    assert!(matches!(mm.copy_in(0x10, &mut [0]), Err(MmError::Unmapped)));
    assert!(mm.copy_in(u64::MAX - 1, &mut [0; 4]).is_err(), "overflowing ranges are rejected");
}

#[test]
fn pinned_slices_cover_the_range_across_pages() {
    let (_, _, mm) = setup();
    let a = anon(&mm, 0, 3 * 4096, RW);
    let data: Vec<u8> = (0..6000u32).map(|i| (i % 253) as u8).collect();
    let mut p = mm.pin(a + 4000, data.len(), true).unwrap();
    assert_eq!(p.len(), data.len());
    let slices = p.slices_mut();
    assert_eq!(slices.iter().map(|s| s.len()).sum::<usize>(), data.len());
    let mut at = 0;
    for s in &slices {
        at += s.copy_from(&data[at..]);
    }
    let mut back = vec![0u8; data.len()];
    mm.copy_in(a + 4000, &mut back).unwrap();
    assert_eq!(back, data, "stores through the slices land in the application's pages");
    mm.copy_out(a + 4096, b"through copy_out").unwrap();
    assert_eq!(&p.to_vec()[96..112], b"through copy_out", "and the slices see its stores");
    mm.zero(a + 4000, 200).unwrap();
    assert!(p.slices()[0].subslice(0, 96).to_vec().iter().all(|b| *b == 0));
    assert!(mm.pin(a, 0, true).unwrap().slices().is_empty(), "an empty range has no slices");
}

#[test]
fn copy_out_respects_protection() {
    let (_, _, mm) = setup();
    let a = anon(&mm, 0, 4096, R);
    assert!(matches!(mm.copy_out(a, &[1]), Err(MmError::Access)));
    mm.protect(a, 4096, RW).unwrap();
    mm.copy_out(a, &[1]).unwrap();
}

#[test]
fn cstrings_stop_at_the_terminator() {
    let (_, _, mm) = setup();
    let a = anon(&mm, 0, 4096, RW);
    // "hi\0" ending exactly at the end of the only mapped page.
    mm.copy_out(a + 4093, b"hi\0").unwrap();
    assert_eq!(mm.read_cstring(a + 4093, 100).unwrap(), b"hi");
    mm.copy_out(a + 4093, b"hi!").unwrap();
    assert!(matches!(mm.read_cstring(a + 4093, 100), Err(MmError::Unmapped)));
    mm.copy_out(a, &[b'x'; 200]).unwrap();
    assert!(matches!(mm.read_cstring(a, 100), Err(MmError::TooLong)));
}

#[test]
fn munmap_frees_frames_and_mappings() {
    let (mf, space, mm) = setup();
    let a = anon(&mm, 0, 64 * 4096, RW);
    mm.copy_out(a, &vec![7u8; 64 * 4096]).unwrap();
    assert_eq!(mf.stats().frames_in_use, 64);
    mm.unmap(a + 16 * 4096, 16 * 4096).unwrap();
    assert_eq!(mf.stats().frames_in_use, 48);
    assert!(space.get(a + 16 * 4096).is_none());
    assert!(matches!(mm.copy_in(a + 16 * 4096, &mut [0]), Err(MmError::Unmapped)));
    assert_eq!(mm.vmas().len(), 2);
    assert!(matches!(mm.unmap(a + 1, 4096), Err(MmError::Invalid)));
    drop(mm);
    assert_eq!(mf.stats().frames_in_use, 0, "dropping the address space frees every frame");
}

#[test]
fn fixed_and_noreplace() {
    let (_, _, mm) = setup();
    let a = anon(&mm, 0x200_0000, 4 * 4096, RW);
    mm.copy_out(a, b"old").unwrap();
    let b = mm.map(a + 4096, 4096, R, Backing::Anonymous, MapFlags { fixed: true, ..Default::default() }).unwrap();
    assert_eq!(b, a + 4096);
    assert_eq!(mm.vmas().len(), 3);
    let e = mm.map(a, 4096, R, Backing::Anonymous, MapFlags { fixed_noreplace: true, ..Default::default() });
    assert!(matches!(e, Err(MmError::Exists)));
    let e = mm.map(0x1000, 4096, R, Backing::Anonymous, MapFlags { fixed: true, ..Default::default() });
    assert!(matches!(e, Err(MmError::TooLow)));
    let mut buf = [0u8; 3];
    mm.copy_in(a, &mut buf).unwrap();
    assert_eq!(&buf, b"old", "pages outside the fixed mapping survive");
}

#[test]
fn non_fixed_mappings_go_top_down_and_honour_free_hints() {
    let (_, _, mm) = setup();
    let a = anon(&mm, 0, 4096, RW);
    let b = anon(&mm, 0, 4096, RW);
    assert_eq!(a, MMAP_TOP - 4096);
    assert_eq!(b, a - 4096);
    let hinted = mm.map(0x3000_0000, 4096, RW, Backing::Anonymous, MapFlags::default()).unwrap();
    assert_eq!(hinted, 0x3000_0000);
    let taken = mm.map(0x3000_0000, 4096, RW, Backing::Anonymous, MapFlags::default()).unwrap();
    assert_ne!(taken, 0x3000_0000);
}

#[test]
fn mprotect_none_keeps_contents() {
    let (_, space, mm) = setup();
    let a = anon(&mm, 0, 4096, RW);
    mm.copy_out(a, b"keep").unwrap();
    mm.protect(a, 4096, Access::NONE).unwrap();
    assert!(space.get(a).is_none());
    assert!(mm.copy_in(a, &mut [0; 4]).is_err());
    mm.protect(a, 4096, R).unwrap();
    let mut buf = [0u8; 4];
    mm.copy_in(a, &mut buf).unwrap();
    assert_eq!(&buf, b"keep");
    assert!(matches!(mm.protect(a, 8192, R), Err(MmError::NoMemory)), "holes are ENOMEM");
}

#[test]
fn fork_is_copy_on_write() {
    let (mf, space, mm) = setup();
    let a = anon(&mm, 0, 2 * 4096, RW);
    mm.copy_out(a, b"parent").unwrap();
    let child_space = Arc::new(FakeSpace::default());
    let child = mm.fork(child_space.clone()).unwrap();
    let frames_after_fork = mf.stats().frames_in_use;
    assert_eq!(space.get(a).unwrap().1, R, "parent page is write-protected");
    assert_eq!(child_space.get(a).unwrap().1, R);
    assert_eq!(space.get(a).unwrap().0, child_space.get(a).unwrap().0, "same frame until written");
    child.copy_out(a, b"child!").unwrap();
    assert_eq!(mf.stats().frames_in_use, frames_after_fork + 1);
    let mut buf = [0u8; 6];
    mm.copy_in(a, &mut buf).unwrap();
    assert_eq!(&buf, b"parent", "the child's write is invisible to the parent");
    child.copy_in(a, &mut buf).unwrap();
    assert_eq!(&buf, b"child!");
    assert_ne!(space.get(a).unwrap().0, child_space.get(a).unwrap().0);
    drop(child);
    // The parent's page is now referenced once: a write takes it over
    // without copying.
    mm.copy_out(a, b"again!").unwrap();
    assert_eq!(mm.stats().cow_copies, 0);
    assert_eq!(space.get(a).unwrap().1, RW);
}

#[test]
fn shared_anonymous_memory_survives_fork() {
    let (mf, _, mm) = setup();
    let obj = SharedMemory::new(mf.clone());
    let a = mm.map(0, 4096, RW, Backing::Shared { object: obj, offset: 0 }, MapFlags::default()).unwrap();
    let child = mm.fork(Arc::new(FakeSpace::default())).unwrap();
    child.copy_out(a, b"seen").unwrap();
    let mut buf = [0u8; 4];
    mm.copy_in(a, &mut buf).unwrap();
    assert_eq!(&buf, b"seen");
}

#[test]
fn brk_grows_and_shrinks() {
    let (mf, _, mm) = setup();
    mm.set_brk_start(0x60_0000);
    assert_eq!(mm.brk(0, None), 0x60_0000);
    assert_eq!(mm.brk(0x60_0000 + 10_000, None), 0x60_0000 + 10_000);
    mm.copy_out(0x60_0000 + 9_999, &[1]).unwrap();
    assert!(mm.copy_out(0x60_0000 + 12_288, &[1]).is_err(), "heap ends at the rounded brk");
    assert_eq!(mm.brk(0x60_0000, None), 0x60_0000);
    assert!(mm.copy_in(0x60_0000, &mut [0]).is_err());
    assert_eq!(mf.stats().frames_in_use, 0);
    anon(&mm, 0x60_4000, 4096, RW);
    assert_eq!(mm.brk(0x60_8000, None), 0x60_0000, "brk refuses to grow over a mapping");
}

#[test]
fn mremap_grows_in_place_or_moves() {
    let (_, _, mm) = setup();
    let a = anon(&mm, 0x100_0000, 4096, RW);
    mm.copy_out(a, b"data").unwrap();
    assert_eq!(mm.remap(a, 4096, 8192, false, None, None).unwrap(), a, "room after it: grows in place");
    anon(&mm, a + 8192, 4096, RW);
    assert!(matches!(mm.remap(a, 8192, 16384, false, None, None), Err(MmError::NoMemory)));
    let b = mm.remap(a, 8192, 16384, true, None, None).unwrap();
    assert_ne!(a, b);
    let mut buf = [0u8; 4];
    mm.copy_in(b, &mut buf).unwrap();
    assert_eq!(&buf, b"data");
    assert!(mm.copy_in(a, &mut buf).is_err(), "the old range is gone");
    assert_eq!(mm.remap(b, 16384, 4096, false, None, None).unwrap(), b);
    let c = mm.remap(b, 4096, 4096, true, Some(0x900_0000), None).unwrap();
    assert_eq!(c, 0x900_0000);
    mm.copy_in(c, &mut buf).unwrap();
    assert_eq!(&buf, b"data");
}

#[test]
fn stack_grows_down_within_its_limit() {
    let (_, _, mm) = setup();
    let top = STACK_TOP;
    mm.map(
        top - 4096 * 4,
        4096 * 4,
        RW,
        Backing::Anonymous,
        MapFlags { fixed: true, grows_down: true, ..Default::default() },
    )
    .unwrap();
    mm.handle_fault(top - 4096 * 100, Access { write: true, ..Access::NONE }).unwrap();
    assert_eq!(mm.vmas()[0].start, top - 4096 * 100);
    assert!(mm.handle_fault(top - (9 << 20), Access::READ).is_err(), "beyond RLIMIT_STACK");
}

#[test]
fn discard_reads_zero_again() {
    let (_, _, mm) = setup();
    let a = anon(&mm, 0, 4096, RW);
    mm.copy_out(a, b"junk").unwrap();
    mm.discard(a, 4096).unwrap();
    let mut buf = [9u8; 4];
    mm.copy_in(a, &mut buf).unwrap();
    assert_eq!(buf, [0; 4]);
}

#[test]
fn sparse_gigabyte_costs_only_touched_pages() {
    let (mf, _, mm) = setup();
    let a = anon(&mm, 0, 1 << 30, RW);
    for i in 0..4u64 {
        mm.handle_fault(a + i * (256 << 20), Access { write: true, ..Access::NONE }).unwrap();
    }
    assert!(mf.stats().frames_in_use <= 4 * FAULT_AROUND_ANON);
}

struct TestFile {
    mf: Arc<MemoryFile>,
    pages: Vec<Frame>,
}

impl Mappable for TestFile {
    fn page(&self, index: u64) -> Result<Option<Frame>, MmError> {
        Ok(self.pages.get(index as usize).map(|f| {
            self.mf.inc_ref(*f);
            *f
        }))
    }
    fn size(&self) -> u64 {
        self.pages.len() as u64 * 4096
    }
    fn describe(&self) -> MapName {
        MapName::default()
    }
}

#[test]
fn private_file_pages_copy_on_write_and_stop_at_eof() {
    let (mf, space, mm) = setup();
    let pages: Vec<Frame> = (0..2).map(|_| mf.allocate().unwrap()).collect();
    mf.write(pages[0], 0, b"file");
    let file = Arc::new(TestFile { mf: mf.clone(), pages });
    let a = mm
        .map(
            0,
            4 * 4096,
            RW,
            Backing::File { file: file.clone(), offset: 0, shared: false, name: None },
            MapFlags::default(),
        )
        .unwrap();
    let mut buf = [0u8; 4];
    mm.copy_in(a, &mut buf).unwrap();
    assert_eq!(&buf, b"file");
    assert_eq!(space.get(a).unwrap().0, file.pages[0], "reads share the cache frame");
    assert_eq!(space.get(a).unwrap().1, R, "read-only until written");
    mm.copy_out(a, b"mine").unwrap();
    assert_ne!(space.get(a).unwrap().0, file.pages[0]);
    mf.read(file.pages[0], 0, &mut buf);
    assert_eq!(&buf, b"file", "the file's page is untouched");
    assert!(matches!(mm.handle_fault(a + 2 * 4096, Access::READ), Err(MmError::BeyondEof)));
}

#[test]
fn a_fault_past_eof_is_beyond_eof_even_deep_in_the_window() {
    let (mf, space, mm) = setup();
    let pages: Vec<Frame> = vec![mf.allocate().unwrap()];
    let file = Arc::new(TestFile { mf: mf.clone(), pages });
    let a = mm
        .map(0, 8 * 4096, R, Backing::File { file, offset: 0, shared: false, name: None }, MapFlags::default())
        .unwrap();
    let in_use = mf.stats().frames_in_use;
    // The window starts at the mapping; the file ends after its first page.
    assert!(matches!(mm.handle_fault(a + 5 * 4096, Access::READ), Err(MmError::BeyondEof)));
    assert!(space.get(a).is_some(), "the page inside the file is mapped all the same");
    assert_eq!(mf.stats().frames_in_use, in_use, "no frame is held for pages past the end");
    assert!(matches!(mm.handle_fault(a + 4096, Access::READ), Err(MmError::BeyondEof)));
    mm.handle_fault(a, Access::READ).unwrap();
}

#[test]
fn the_reserved_range_is_never_given() {
    let (_, _, mm) = setup();
    let top = anon(&mm, 0, 4096, RW);
    let r = reserved_range();
    let fixed = MapFlags { fixed: true, ..Default::default() };
    let noreplace = MapFlags { fixed_noreplace: true, ..Default::default() };
    for (addr, len) in
        [(r.start, 4096), (r.end - 4096, 4096), (r.start - 4096, 8192), (r.start - 4096, r.end - r.start + 8192)]
    {
        assert!(matches!(mm.map(addr, len, RW, Backing::Anonymous, fixed), Err(MmError::NoMemory)));
        assert!(matches!(mm.map(addr, len, RW, Backing::Anonymous, noreplace), Err(MmError::NoMemory)));
    }
    // A search that passes the range steps over it: fill everything from
    // its end up to the lowest mapping, then ask for more.
    let filler = mm.map(0, top - r.end, Access::NONE, Backing::Anonymous, MapFlags::default()).unwrap();
    assert_eq!(filler, r.end, "the filler takes the space just above the range");
    let below = anon(&mm, 0, 4096, RW);
    assert_eq!(below, r.start - 4096, "the next search lands just below the range");
    let big = anon(&mm, 0, 2 * (r.end - r.start), RW);
    assert!(big + 2 * (r.end - r.start) <= r.start);
    // Moving or growing into it fails as an address that cannot be given.
    let a = anon(&mm, 0x100_0000, 4096, RW);
    assert!(matches!(mm.remap(a, 4096, 4096, true, Some(r.start), None), Err(MmError::NoMemory)));
    assert!(matches!(mm.remap(below, 4096, 8192, false, None, None), Err(MmError::NoMemory)));
    // A hint there is only a hint.
    let hinted = mm.map(r.start + 0x10_0000, 4096, RW, Backing::Anonymous, MapFlags::default()).unwrap();
    assert!(hinted + 4096 <= r.start || hinted >= r.end);
    assert!(mm.vmas().iter().all(|v| v.end <= r.start || v.start >= r.end));
}

mod rewrites {
    use super::*;
    use platform::Trampoline;
    use platform::arch::rewrite;

    const GETPID: u64 = 39;
    const SITE: [u8; 7] = [0xb8, 39, 0, 0, 0, 0x0f, 0x05];
    const TRAMPOLINE: Trampoline =
        Trampoline { entry: 0x6fff_0000_1000, code: None, answers_in_table: false, only: None };

    /// Maps a private anonymous page holding `SITE` at `off`, with `access`.
    fn code_page(mm: &MemoryManager, off: u64, access: Access) -> u64 {
        let at = mm.map(0, 4096, Access::READ_WRITE, Backing::Anonymous, MapFlags::default()).unwrap();
        mm.copy_out(at + off, &SITE).unwrap();
        mm.protect(at, 4096, access).unwrap();
        at
    }

    fn bytes(mm: &MemoryManager, at: u64) -> [u8; 7] {
        let mut b = [0; 7];
        mm.copy_in(at, &mut b).unwrap();
        b
    }

    #[test]
    fn a_site_is_rewritten_once_and_given_back_when_made_writable() {
        let (_mf, _space, mm) = setup();
        let at = code_page(&mm, 100, Access::READ_EXECUTE);
        assert_eq!(mm.rewrite_site(at + 107, GETPID, &TRAMPOLINE), Rewrite::NewlyPatched);
        assert_eq!(bytes(&mm, at + 100), rewrite::patched_site(0));
        assert_eq!(mm.rewrite_site(at + 107, GETPID, &TRAMPOLINE), Rewrite::Patched);
        assert_eq!(mm.rewritten_sites(), 1);
        // The cell and its slot.
        let mut slot = [0; 8];
        mm.copy_in(rewrite::slot(0), &mut slot).unwrap();
        assert_eq!(u64::from_le_bytes(slot), rewrite::cell(0));
        let mut cell = [0; 64];
        mm.copy_in(rewrite::cell(0), &mut cell).unwrap();
        assert_eq!(cell, rewrite::cell_bytes(39, at + 107, TRAMPOLINE.entry));
        // A thread that ran the old mov meets 06 at the old syscall.
        assert_eq!(mm.site_trap(false, at + 105), Some(SiteTrap::Syscall));
        // Made writable, the site has its own bytes again.
        mm.protect(at, 4096, Access::READ_WRITE).unwrap();
        assert_eq!(bytes(&mm, at + 100), SITE);
        assert_eq!(mm.site_trap(false, at + 105), Some(SiteTrap::Retry));
        assert_eq!(mm.site_trap(true, at + 101), Some(SiteTrap::Retry));
        assert_eq!(mm.rewritten_sites(), 0);
    }

    #[test]
    fn only_the_exact_pattern_in_private_read_only_code_is_rewritten() {
        let (_mf, _space, mm) = setup();
        // Writable code is the program's own business.
        let rw = code_page(&mm, 0, Access::ALL);
        assert_eq!(mm.rewrite_site(rw + 7, GETPID, &TRAMPOLINE), Rewrite::Kept);
        assert_eq!(bytes(&mm, rw), SITE);
        // The number must be the one the call was made with.
        let rx = code_page(&mm, 0, Access::READ_EXECUTE);
        assert_eq!(mm.rewrite_site(rx + 7, 110, &TRAMPOLINE), Rewrite::Kept);
        // A site across two pages would need two writes.
        let two = mm.map(0, 8192, Access::READ_WRITE, Backing::Anonymous, MapFlags::default()).unwrap();
        mm.copy_out(two + 4093, &SITE).unwrap();
        mm.protect(two, 8192, Access::READ_EXECUTE).unwrap();
        assert_eq!(mm.rewrite_site(two + 4100, GETPID, &TRAMPOLINE), Rewrite::Kept);
        // Shared memory would carry the patch to others.
        let obj = SharedMemory::new(mm.memory_file().clone());
        let shared = mm
            .map(0, 4096, Access::READ_WRITE, Backing::Shared { object: obj, offset: 0 }, MapFlags::default())
            .unwrap();
        mm.copy_out(shared, &SITE).unwrap();
        mm.protect(shared, 4096, Access::READ_EXECUTE).unwrap();
        assert_eq!(mm.rewrite_site(shared + 7, GETPID, &TRAMPOLINE), Rewrite::Kept);
        assert_eq!(bytes(&mm, shared), SITE);
        assert_eq!(mm.rewritten_sites(), 0);
    }

    #[test]
    fn the_table_is_hidden_and_kept_from_the_program() {
        let (_mf, _space, mm) = setup();
        let at = code_page(&mm, 0, Access::READ_EXECUTE);
        assert_eq!(mm.rewrite_site(at + 7, GETPID, &TRAMPOLINE), Rewrite::NewlyPatched);
        assert!(mm.vmas().iter().all(|v| v.end <= rewrite::TABLE || v.start >= rewrite::END));
        let fixed = MapFlags { fixed: true, ..MapFlags::default() };
        assert!(matches!(
            mm.map(rewrite::TABLE, 4096, Access::READ_WRITE, Backing::Anonymous, fixed),
            Err(MmError::NoMemory)
        ));
        // Unmapping or protecting over it leaves it as it was.
        mm.unmap(rewrite::TABLE - 0x10000, rewrite::END - rewrite::TABLE + 0x20000).unwrap();
        mm.protect(rewrite::TABLE, 4096, Access::READ_WRITE).unwrap_or(());
        let mut slot = [0; 8];
        mm.copy_in(rewrite::slot(0), &mut slot).unwrap();
        assert_eq!(u64::from_le_bytes(slot), rewrite::cell(0));
        assert!(matches!(mm.copy_out(rewrite::slot(0), &[0; 8]), Err(MmError::Access)));
        // A fork keeps the rewritten site and its table.
        let child = mm.fork(Arc::new(FakeSpace::default())).unwrap();
        assert_eq!(bytes(&child, at), rewrite::patched_site(0));
        assert_eq!(child.site_trap(false, at + 5), Some(SiteTrap::Syscall));
    }
}

#[test]
fn pokes_write_private_read_only_memory_on_a_page_of_its_own() {
    let (_, space, mm) = setup();
    let a = anon(&mm, 0, 4096, RW);
    mm.copy_out(a, b"shared").unwrap();
    let child_space = Arc::new(FakeSpace::default());
    let child = mm.fork(child_space.clone()).unwrap();
    mm.protect(a, 4096, R).unwrap();
    assert!(mm.copy_out(a, b"x").is_err(), "the program may not write it");
    mm.poke(a, b"poked!").unwrap();
    let mut buf = [0u8; 6];
    mm.copy_in(a, &mut buf).unwrap();
    assert_eq!(&buf, b"poked!");
    child.copy_in(a, &mut buf).unwrap();
    assert_eq!(&buf, b"shared", "the other process keeps its copy");
    assert_eq!(space.get(a).unwrap().1, R, "still read-only for the program");
    assert_ne!(space.get(a).unwrap().0, child_space.get(a).unwrap().0);
    assert!(mm.poke(0x10_0000_0000, b"x").is_err(), "nothing mapped there");
}
