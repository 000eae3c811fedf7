//! The vDSO: a small shared object mapped into every process, whose clock
//! functions read the time page instead of making a syscall. Each clock
//! read a program makes through libc would otherwise be a VM exit.
//!
//! The object is built from `arch/x86_64/vdso/vdso.c` by the build script
//! and embedded here. Every process gets the time page (`[vvar]`, read-only,
//! updated in place by the [`Clock`]) and right above it the code
//! (`[vdso]`, copy-on-write like any private mapping), and finds the code
//! through `AT_SYSINFO_EHDR`.

mod clock;

use std::sync::Arc;

use memory::{Frame, MemoryError, MemoryFile, PAGE_SIZE};
use platform::Access;

pub use clock::{Clock, ClockKind};

use crate::mm::{Backing, MapFlags, MemoryManager, MmError};
use crate::mm::{MapName, Mappable};

/// The vDSO image.
static IMAGE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/vdso.so"));

/// Fixed frames shown to applications as a read-only file.
struct Frames {
    mf: Arc<MemoryFile>,
    frames: Vec<Frame>,
    name: &'static str,
}

impl Mappable for Frames {
    fn page(&self, index: u64) -> Result<Option<Frame>, crate::mm::MmError> {
        Ok(self.cached(index))
    }

    fn size(&self) -> u64 {
        self.frames.len() as u64 * PAGE_SIZE
    }

    fn describe(&self) -> MapName {
        MapName { path: self.name.to_string(), dev: 0, ino: 0 }
    }

    fn cached(&self, index: u64) -> Option<Frame> {
        let f = *self.frames.get(usize::try_from(index).ok()?)?;
        self.mf.inc_ref(f);
        Some(f)
    }
}

impl Drop for Frames {
    fn drop(&mut self) {
        for f in &self.frames {
            self.mf.dec_ref(*f);
        }
    }
}

/// The time page and the vDSO code, ready to map.
pub struct Vdso {
    time: Arc<Frames>,
    code: Arc<Frames>,
}

impl std::fmt::Debug for Vdso {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Vdso({} code pages)", self.code.frames.len())
    }
}

impl Vdso {
    pub fn new(mf: &Arc<MemoryFile>, clock: &Clock) -> Result<Vdso, MemoryError> {
        let mut frames = Vec::new();
        mf.allocate_many(IMAGE.len().div_ceil(PAGE_SIZE as usize), &mut frames)?;
        for (f, chunk) in frames.iter().zip(IMAGE.chunks(PAGE_SIZE as usize)) {
            mf.write(*f, 0, chunk);
        }
        mf.inc_ref(clock.frame());
        Ok(Vdso {
            time: Arc::new(Frames { mf: mf.clone(), frames: vec![clock.frame()], name: "[vvar]" }),
            code: Arc::new(Frames { mf: mf.clone(), frames, name: "[vdso]" }),
        })
    }

    /// Maps the time page and the code into `mm`; returns the code's address
    /// (AT_SYSINFO_EHDR).
    pub fn map_into(&self, mm: &MemoryManager) -> Result<u64, MmError> {
        let code_len = self.code.size();
        let base = mm.map(0, PAGE_SIZE + code_len, Access::NONE, Backing::Anonymous, MapFlags::default())?;
        // Populated now: libc reads the code at start-up and the time page
        // on its first clock read, and a fault costs a VM exit.
        let fixed = MapFlags { fixed: true, populate: true, ..MapFlags::default() };
        let file = |f: &Arc<Frames>| Backing::File {
            file: f.clone() as Arc<dyn Mappable>,
            offset: 0,
            shared: false,
            name: None,
        };
        mm.map(base, PAGE_SIZE, Access::READ, file(&self.time), fixed)?;
        // The page changes under the application's feet; it may never write
        // it, not even to a private copy.
        mm.set_max_access(base, base + PAGE_SIZE, Access::READ);
        mm.map(base + PAGE_SIZE, code_len, Access::READ_EXECUTE, file(&self.code), fixed)?;
        Ok(base + PAGE_SIZE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object::read::elf::{ElfFile64, FileHeader, ProgramHeader};
    use object::{Object, ObjectSymbol, elf};

    #[test]
    fn image_is_a_relocation_free_shared_object_loadable_at_zero() {
        let file = ElfFile64::<object::Endianness>::parse(IMAGE).expect("the vDSO parses as ELF64");
        assert_eq!(file.elf_header().e_type(file.endian()), elf::ET_DYN);
        assert!(file.dynamic_relocations().is_none_or(|mut r| r.next().is_none()), "no relocations");
        let loads: Vec<_> = file
            .elf_program_headers()
            .iter()
            .filter(|p| p.p_type(file.endian()) == elf::PT_LOAD)
            .map(|p| (p.p_vaddr(file.endian()), p.p_memsz(file.endian())))
            .collect();
        assert_eq!(loads.len(), 1, "one PT_LOAD");
        assert_eq!(loads[0].0, 0);
        assert!(loads[0].1 <= IMAGE.len().div_ceil(4096) as u64 * 4096);
        let names: Vec<String> = file.dynamic_symbols().filter_map(|s| s.name().ok().map(str::to_string)).collect();
        for want in ["__vdso_clock_gettime", "__vdso_gettimeofday", "__vdso_time", "clock_gettime"] {
            assert!(names.iter().any(|n| n == want), "{want} exported; have {names:?}");
        }
    }
}
