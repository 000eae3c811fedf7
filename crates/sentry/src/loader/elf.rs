//! ELF executables: header checks and mapping of PT_LOAD segments.

use object::elf::{self, FileHeader64, ProgramHeader64};
use object::read::elf::{FileHeader, ProgramHeader};
use object::{LittleEndian as LE, pod};
use platform::Access;

use super::{LoadError, read_at};
use crate::fs::{FileOps, OpenFile};
use crate::mm::{Backing, MapFlags, MemoryManager, MmError, PAGE, PIE_BASE, page_down, page_up};

/// Most program headers accepted (as Linux: 64 KiB of them).
const MAX_PHDRS: usize = 65536 / size_of::<ProgramHeader64<LE>>();

/// A loadable segment.
#[derive(Clone, Copy, Debug)]
pub struct Segment {
    pub vaddr: u64,
    pub offset: u64,
    pub filesz: u64,
    pub memsz: u64,
    pub access: Access,
}

/// What the loader needs from an ELF file.
#[derive(Clone, Debug)]
pub struct ElfInfo {
    /// Position independent (ET_DYN).
    pub dynamic: bool,
    pub entry: u64,
    pub segments: Vec<Segment>,
    pub interpreter: Option<Vec<u8>>,
    /// Address of the program headers in the image (before relocation).
    pub phdr_vaddr: u64,
    pub phent: u16,
    pub phnum: u16,
}

/// Reads and checks the ELF headers of an open file.
pub fn parse_elf(ops: &dyn FileOps, file: &OpenFile) -> Result<ElfInfo, LoadError> {
    let head = read_at(ops, file, 0, size_of::<FileHeader64<LE>>()).map_err(LoadError::Io)?;
    let hdr = FileHeader64::<LE>::parse(&*head).map_err(|_| LoadError::BadFormat)?;
    let e = LE;
    if !hdr.is_little_endian() || hdr.e_machine(e) != elf::EM_X86_64 {
        return Err(LoadError::BadFormat);
    }
    let dynamic = match hdr.e_type(e) {
        elf::ET_EXEC => false,
        elf::ET_DYN => true,
        _ => return Err(LoadError::BadFormat),
    };
    let phnum = hdr.e_phnum(e) as usize;
    if hdr.e_phentsize(e) as usize != size_of::<ProgramHeader64<LE>>() || phnum == 0 || phnum > MAX_PHDRS {
        return Err(LoadError::BadFormat);
    }
    let phoff = hdr.e_phoff(e);
    let raw = read_at(ops, file, phoff, phnum * size_of::<ProgramHeader64<LE>>()).map_err(LoadError::Io)?;
    let (phdrs, _) = pod::slice_from_bytes::<ProgramHeader64<LE>>(&raw, phnum).map_err(|_| LoadError::BadFormat)?;
    let mut segments = Vec::new();
    let mut interpreter = None;
    let mut phdr_vaddr = None;
    for ph in phdrs {
        match ph.p_type(e) {
            elf::PT_LOAD => {
                let f = ph.p_flags(e);
                let seg = Segment {
                    vaddr: ph.p_vaddr(e),
                    offset: ph.p_offset(e),
                    filesz: ph.p_filesz(e),
                    memsz: ph.p_memsz(e),
                    access: Access {
                        read: f.contains(elf::PF_R),
                        write: f.contains(elf::PF_W),
                        execute: f.contains(elf::PF_X),
                    },
                };
                if seg.filesz > seg.memsz || !seg.vaddr.wrapping_sub(seg.offset).is_multiple_of(PAGE) {
                    return Err(LoadError::BadFormat);
                }
                segments.push(seg);
            }
            elf::PT_INTERP => {
                let len = ph.p_filesz(e) as usize;
                if !(2..=4096).contains(&len) {
                    return Err(LoadError::BadFormat);
                }
                let mut p = read_at(ops, file, ph.p_offset(e), len).map_err(LoadError::Io)?;
                if p.last() != Some(&0) {
                    return Err(LoadError::BadFormat);
                }
                p.pop();
                interpreter = Some(p);
            }
            elf::PT_PHDR => phdr_vaddr = Some(ph.p_vaddr(e)),
            _ => {}
        }
    }
    if segments.is_empty() {
        return Err(LoadError::BadFormat);
    }
    let phdr_vaddr = phdr_vaddr
        .or_else(|| {
            segments
                .iter()
                .find(|s| phoff >= s.offset && phoff < s.offset + s.filesz)
                .map(|s| s.vaddr + (phoff - s.offset))
        })
        .unwrap_or(0);
    Ok(ElfInfo {
        dynamic,
        entry: hdr.e_entry(e),
        segments,
        interpreter,
        phdr_vaddr,
        phent: hdr.e_phentsize(e),
        phnum: phnum as u16,
    })
}

/// Where an image landed.
pub struct MappedImage {
    /// Added to every address in the file.
    pub bias: u64,
    /// First page after the last segment (the start of the heap).
    pub end: u64,
}

fn mm_err(e: MmError) -> LoadError {
    match e {
        MmError::NoMemory => LoadError::NoMemory,
        _ => LoadError::BadFormat,
    }
}

/// Maps the PT_LOAD segments of an image. The main program of a
/// position-independent executable goes at [`PIE_BASE`]; an interpreter
/// wherever mmap would put it.
pub fn map_image(mm: &MemoryManager, file: &OpenFile, info: &ElfInfo, main: bool) -> Result<MappedImage, LoadError> {
    let lo = info.segments.iter().map(|s| page_down(s.vaddr)).min().expect("segments");
    let hi = info.segments.iter().map(|s| s.vaddr.saturating_add(s.memsz)).max().expect("segments");
    let hi = page_up(hi).ok_or(LoadError::BadFormat)?;
    let span = hi - lo;
    let fixed = MapFlags { fixed: true, ..Default::default() };
    let bias = if !info.dynamic {
        0
    } else {
        let want = if main { PIE_BASE } else { 0 };
        let flags = MapFlags { fixed: main, ..Default::default() };
        let at = mm.map(want, span, Access::NONE, Backing::Anonymous, flags).map_err(mm_err)?;
        at - lo
    };
    let mappable = file.ops.mappable().ok_or(LoadError::BadFormat)?;
    let mut covered: Vec<(u64, u64)> = Vec::new();
    for s in &info.segments {
        let start = bias + s.vaddr;
        let map_start = page_down(start);
        let file_end = start + s.filesz;
        let mem_end = page_up(start + s.memsz).ok_or(LoadError::BadFormat)?;
        if s.filesz > 0 {
            let map_end = page_up(file_end).ok_or(LoadError::BadFormat)?;
            let backing =
                Backing::File { file: mappable.clone(), offset: s.offset - (start - map_start), shared: false };
            mm.map(map_start, map_end - map_start, s.access, backing, fixed).map_err(mm_err)?;
            if s.memsz > s.filesz && s.access.write && !file_end.is_multiple_of(PAGE) {
                // The bss starts inside the last file page: what follows the
                // file data there must read as zero.
                let n = (page_up(file_end).expect("checked") - file_end) as usize;
                mm.zero(file_end, n).map_err(mm_err)?;
            }
        }
        let anon_start = page_up(file_end).ok_or(LoadError::BadFormat)?.max(map_start);
        if mem_end > anon_start {
            mm.map(anon_start, mem_end - anon_start, s.access, Backing::Anonymous, fixed).map_err(mm_err)?;
        }
        covered.push((map_start, mem_end));
    }
    if info.dynamic {
        // Give back the parts of the reservation no segment uses.
        covered.sort();
        let mut at = bias + lo;
        for (s, e) in covered {
            if s > at {
                mm.unmap(at, s - at).map_err(mm_err)?;
            }
            at = at.max(e);
        }
    }
    Ok(MappedImage { bias, end: bias + hi })
}
