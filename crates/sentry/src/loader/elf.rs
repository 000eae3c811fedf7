//! ELF executables: header checks and mapping of PT_LOAD segments.

use object::elf::{self, FileHeader64, ProgramHeader64};
use object::read::elf::{FileHeader, ProgramHeader};
use object::{LittleEndian as LE, pod};
use platform::Access;

use super::{LoadError, read_at};
use crate::fs::{FileOps, OpenFile};
use crate::mm::{Backing, MapFlags, MemoryManager, MmError, PAGE, PIE_BASE, USER_TOP, page_down, page_up};

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

/// Which file is read: the program, or the interpreter it names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Program,
    Interpreter,
}

/// What the loader needs from an ELF file.
#[derive(Clone, Debug)]
pub struct ElfInfo {
    /// e_type: a program's is known to be ET_EXEC or ET_DYN; an
    /// interpreter's is checked only when it is mapped.
    pub e_type: elf::FileType,
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

/// Reads and checks the headers of an ELF file: what Linux checks before
/// the point of no return of execve, where a failure is still an error
/// the caller gets back. The program headers' contents are checked when
/// the image is mapped ([`map_image`]).
///
/// An interpreter that is no ELF file for this machine is
/// [`LoadError::BadInterpreter`]; its own PT_INTERP is ignored, as Linux
/// ignores it.
pub fn parse_elf(ops: &dyn FileOps, file: &OpenFile, role: Role) -> Result<ElfInfo, LoadError> {
    let bad = || match role {
        Role::Program => LoadError::BadFormat,
        Role::Interpreter => LoadError::BadInterpreter,
    };
    let mut head = read_at(ops, file, 0, size_of::<FileHeader64<LE>>()).map_err(LoadError::Io)?;
    if head.len() < size_of::<FileHeader64<LE>>() {
        // Linux reads a program's first bytes into a zero-filled buffer
        // (so a short file is only a bad format), and an interpreter's
        // header with a read that must be whole.
        if role == Role::Interpreter {
            return Err(LoadError::ShortRead);
        }
        head.resize(size_of::<FileHeader64<LE>>(), 0);
    }
    let hdr = FileHeader64::<LE>::parse(&*head).map_err(|_| bad())?;
    let e = LE;
    if !hdr.is_little_endian() || hdr.e_machine(e) != elf::EM_X86_64 {
        return Err(bad());
    }
    let e_type = hdr.e_type(e);
    if role == Role::Program && e_type != elf::ET_EXEC && e_type != elf::ET_DYN {
        return Err(bad());
    }
    let phnum = hdr.e_phnum(e) as usize;
    if hdr.e_phentsize(e) as usize != size_of::<ProgramHeader64<LE>>() || phnum == 0 || phnum > MAX_PHDRS {
        return Err(bad());
    }
    let phoff = hdr.e_phoff(e);
    let raw = read_at(ops, file, phoff, phnum * size_of::<ProgramHeader64<LE>>()).map_err(LoadError::Io)?;
    let (phdrs, _) = pod::slice_from_bytes::<ProgramHeader64<LE>>(&raw, phnum).map_err(|_| bad())?;
    let mut segments = Vec::new();
    let mut interpreter = None;
    let mut phdr_vaddr = None;
    for ph in phdrs {
        match ph.p_type(e) {
            elf::PT_LOAD => {
                let f = ph.p_flags(e);
                segments.push(Segment {
                    vaddr: ph.p_vaddr(e),
                    offset: ph.p_offset(e),
                    filesz: ph.p_filesz(e),
                    memsz: ph.p_memsz(e),
                    access: Access {
                        read: f.contains(elf::PF_R),
                        write: f.contains(elf::PF_W),
                        execute: f.contains(elf::PF_X),
                    },
                });
            }
            // The first PT_INTERP counts, as on Linux.
            elf::PT_INTERP if role == Role::Program && interpreter.is_none() => {
                let len = ph.p_filesz(e);
                if !(2..=PATH_MAX).contains(&len) {
                    return Err(LoadError::BadFormat);
                }
                let mut p = read_at(ops, file, ph.p_offset(e), len as usize).map_err(LoadError::Io)?;
                if p.len() as u64 != len {
                    return Err(LoadError::ShortRead);
                }
                if p.last() != Some(&0) {
                    return Err(LoadError::BadFormat);
                }
                // The path is a C string: it ends at the first NUL.
                let end = p.iter().position(|b| *b == 0).expect("ends with NUL");
                p.truncate(end);
                interpreter = Some(p);
            }
            elf::PT_PHDR => phdr_vaddr = Some(ph.p_vaddr(e)),
            _ => {}
        }
    }
    let phdr_vaddr = phdr_vaddr
        .or_else(|| {
            segments
                .iter()
                .find(|s| phoff >= s.offset && phoff - s.offset < s.filesz)
                .map(|s| s.vaddr.wrapping_add(phoff - s.offset))
        })
        .unwrap_or(0);
    Ok(ElfInfo {
        e_type,
        dynamic: e_type == elf::ET_DYN,
        entry: hdr.e_entry(e),
        segments,
        interpreter,
        phdr_vaddr,
        phent: hdr.e_phentsize(e),
        phnum: phnum as u16,
    })
}

/// Longest PT_INTERP path, its NUL included (Linux's PATH_MAX).
const PATH_MAX: u64 = 4096;

/// Checks what Linux checks of an image while mapping it, past the point
/// of no return: its type (an interpreter's is first checked here), that
/// it has something to load, and that each segment's sizes, alignment and
/// addresses make sense.
fn check_image(info: &ElfInfo) -> Result<(), LoadError> {
    if info.e_type != elf::ET_EXEC && info.e_type != elf::ET_DYN {
        return Err(LoadError::BadFormat);
    }
    if info.segments.is_empty() {
        return Err(LoadError::BadFormat);
    }
    for s in &info.segments {
        if s.filesz > s.memsz
            || !s.vaddr.wrapping_sub(s.offset).is_multiple_of(PAGE)
            || s.memsz > USER_TOP
            || (!info.dynamic && s.vaddr > USER_TOP - s.memsz)
        {
            return Err(LoadError::BadFormat);
        }
    }
    Ok(())
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
/// wherever mmap would put it. Later segments replace what earlier ones
/// mapped where they overlap, as on Linux.
pub fn map_image(mm: &MemoryManager, file: &OpenFile, info: &ElfInfo, main: bool) -> Result<MappedImage, LoadError> {
    check_image(info)?;
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
        let start = bias.checked_add(s.vaddr).ok_or(LoadError::BadFormat)?;
        let map_start = page_down(start);
        let file_end = start.checked_add(s.filesz).ok_or(LoadError::BadFormat)?;
        let mem_end = start.checked_add(s.memsz).and_then(page_up).ok_or(LoadError::BadFormat)?;
        if s.filesz > 0 {
            let map_end = page_up(file_end).ok_or(LoadError::BadFormat)?;
            let backing = Backing::File {
                file: mappable.clone(),
                offset: s.offset - (start - map_start),
                shared: false,
                name: file.dentry.clone().map(|d| d as std::sync::Arc<dyn crate::mm::MapPath>),
            };
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use memory::GuestSliceMut;

    use super::*;
    use crate::fs::{FsError, OpenFlags, Stat};

    /// A file held in memory.
    struct MemFile(Vec<u8>);

    impl FileOps for MemFile {
        fn read(
            &self,
            _: &crate::fs::Context,
            _: &OpenFile,
            bufs: &[GuestSliceMut<'_>],
            offset: u64,
        ) -> Result<usize, FsError> {
            let mut at = (offset as usize).min(self.0.len());
            let mut n = 0;
            for b in bufs {
                let k = b.len().min(self.0.len() - at);
                b.copy_from(&self.0[at..at + k]);
                at += k;
                n += k;
            }
            Ok(n)
        }
        fn stat(&self) -> Result<Stat, FsError> {
            Ok(Stat { size: self.0.len() as u64, ..Default::default() })
        }
        fn seekable(&self) -> bool {
            true
        }
    }

    fn parse_as(image: Vec<u8>, role: Role) -> Result<ElfInfo, LoadError> {
        let ops: Arc<dyn FileOps> = Arc::new(MemFile(image));
        let file = OpenFile::new(ops.clone(), None, OpenFlags::empty());
        parse_elf(&*ops, &file, role)
    }

    fn parse(image: Vec<u8>) -> Result<ElfInfo, LoadError> {
        parse_as(image, Role::Program)
    }

    const PT_LOAD: u32 = 1;
    const PT_INTERP: u32 = 3;
    const PT_PHDR: u32 = 6;
    const INTERP: &[u8] = b"/lib64/ld-linux-x86-64.so.2\0";

    /// A program header: type, flags, offset, vaddr, filesz, memsz.
    struct Ph(u32, u32, u64, u64, u64, u64);

    fn put16(b: &mut [u8], at: usize, v: u16) {
        b[at..at + 2].copy_from_slice(&v.to_le_bytes());
    }
    fn put32(b: &mut [u8], at: usize, v: u32) {
        b[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }
    fn put64(b: &mut [u8], at: usize, v: u64) {
        b[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }

    /// An x86_64 ELF image of type `e_type` with entry `entry`, program
    /// headers at offset 64, and the interpreter path at 0x200.
    fn image(e_type: u16, entry: u64, phdrs: &[Ph]) -> Vec<u8> {
        let mut b = vec![0u8; 0x400];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2; // ELFCLASS64
        b[5] = 1; // little endian
        b[6] = 1; // EV_CURRENT
        put16(&mut b, 16, e_type);
        put16(&mut b, 18, 62); // EM_X86_64
        put32(&mut b, 20, 1);
        put64(&mut b, 24, entry);
        put64(&mut b, 32, 64); // e_phoff
        put16(&mut b, 52, 64); // e_ehsize
        put16(&mut b, 54, 56); // e_phentsize
        put16(&mut b, 56, phdrs.len() as u16);
        for (i, p) in phdrs.iter().enumerate() {
            let o = 64 + 56 * i;
            put32(&mut b, o, p.0);
            put32(&mut b, o + 4, p.1);
            put64(&mut b, o + 8, p.2);
            put64(&mut b, o + 16, p.3);
            put64(&mut b, o + 24, p.3);
            put64(&mut b, o + 32, p.4);
            put64(&mut b, o + 40, p.5);
            put64(&mut b, o + 48, 0x1000);
        }
        b[0x200..0x200 + INTERP.len()].copy_from_slice(INTERP);
        b
    }

    /// A position-independent executable with an interpreter: PT_PHDR,
    /// PT_INTERP, a text and a data segment.
    fn dynamic_image() -> Vec<u8> {
        image(
            3, // ET_DYN
            0x1040,
            &[
                Ph(PT_PHDR, 4, 64, 64, 4 * 56, 4 * 56),
                Ph(PT_INTERP, 4, 0x200, 0x200, INTERP.len() as u64, INTERP.len() as u64),
                Ph(PT_LOAD, 5, 0, 0, 0x400, 0x400),
                Ph(PT_LOAD, 6, 0x300, 0x2300, 0x100, 0x5000),
            ],
        )
    }

    fn bad(image: Vec<u8>, why: &str) {
        match parse(image) {
            Err(LoadError::BadFormat) => {}
            Err(e) => panic!("{why}: expected BadFormat, got {e:?}"),
            Ok(i) => panic!("{why}: accepted as {i:?}"),
        }
    }

    #[test]
    fn a_valid_dynamic_image_parses() {
        let info = parse(dynamic_image()).unwrap();
        assert!(info.dynamic);
        assert_eq!(info.entry, 0x1040);
        assert_eq!(info.interpreter.as_deref(), Some(&INTERP[..INTERP.len() - 1]));
        assert_eq!(info.phdr_vaddr, 64);
        assert_eq!((info.phent, info.phnum), (56, 4));
        assert_eq!(info.segments.len(), 2);
        let (text, data) = (info.segments[0], info.segments[1]);
        assert_eq!((text.vaddr, text.offset, text.filesz, text.memsz), (0, 0, 0x400, 0x400));
        assert_eq!(text.access, Access { read: true, write: false, execute: true });
        assert_eq!((data.vaddr, data.offset, data.filesz, data.memsz), (0x2300, 0x300, 0x100, 0x5000));
        assert_eq!(data.access, Access::READ_WRITE);
    }

    #[test]
    fn a_static_image_finds_its_headers_in_the_first_segment() {
        let info = parse(image(2, 0x401000, &[Ph(PT_LOAD, 5, 0, 0x400000, 0x400, 0x400)])).unwrap();
        assert!(!info.dynamic);
        assert_eq!(info.entry, 0x401000);
        assert_eq!(info.interpreter, None);
        assert_eq!(info.phdr_vaddr, 0x400040, "no PT_PHDR: where the load maps e_phoff");
        assert_eq!(info.phnum, 1);
    }

    #[test]
    fn bad_headers_are_refused() {
        let mut b = dynamic_image();
        b[0] = 0x7e;
        bad(b, "bad magic");
        let mut b = dynamic_image();
        b[4] = 1;
        bad(b, "32-bit class");
        let mut b = dynamic_image();
        b[5] = 2;
        bad(b, "big endian");
        let mut b = dynamic_image();
        put16(&mut b, 18, 3); // EM_386
        bad(b, "wrong machine");
        let mut b = dynamic_image();
        put16(&mut b, 18, 183); // EM_AARCH64
        bad(b, "wrong machine");
        let mut b = dynamic_image();
        put16(&mut b, 16, 1); // ET_REL
        bad(b, "relocatable object");
        let mut b = dynamic_image();
        put16(&mut b, 16, 4); // ET_CORE
        bad(b, "core file");
        let mut b = dynamic_image();
        put16(&mut b, 54, 32);
        bad(b, "wrong phentsize");
        let mut b = dynamic_image();
        put16(&mut b, 56, 0);
        bad(b, "zero phnum");
        bad(dynamic_image()[..40].to_vec(), "truncated header");
        let mut b = dynamic_image();
        put64(&mut b, 32, 0x10_0000);
        bad(b, "program headers past the end of the file");
        bad(b"#!/bin/sh\n".to_vec(), "a script");
        bad(Vec::new(), "an empty file");
    }

    #[test]
    fn bad_program_headers_are_refused() {
        let interp_without_nul = image(
            3,
            0x1000,
            &[
                Ph(PT_INTERP, 4, 0x200, 0x200, INTERP.len() as u64 - 1, INTERP.len() as u64 - 1),
                Ph(PT_LOAD, 5, 0, 0, 0x400, 0x400),
            ],
        );
        bad(interp_without_nul, "PT_INTERP without NUL");
        bad(
            image(3, 0x1000, &[Ph(PT_INTERP, 4, 0x200, 0x200, 1, 1), Ph(PT_LOAD, 5, 0, 0, 0x400, 0x400)]),
            "PT_INTERP of one byte",
        );
        bad(
            image(3, 0x1000, &[Ph(PT_INTERP, 4, 0x200, 0x200, 4097, 4097), Ph(PT_LOAD, 5, 0, 0, 0x400, 0x400)]),
            "PT_INTERP longer than PATH_MAX",
        );
        assert!(
            matches!(
                parse(image(3, 0x1000, &[Ph(PT_INTERP, 4, 0x1_0000, 0, 16, 16), Ph(PT_LOAD, 5, 0, 0, 0x400, 0x400)])),
                Err(LoadError::ShortRead)
            ),
            "PT_INTERP past the end of the file"
        );
    }

    /// What Linux finds wrong only once past the point of no return
    /// parses, and is refused when the image is checked for mapping.
    #[test]
    fn bad_segments_are_refused_when_mapped() {
        let unmappable = |img: Vec<u8>, why: &str| {
            let info = parse(img).unwrap_or_else(|e| panic!("{why}: refused by parse_elf: {e:?}"));
            assert!(matches!(check_image(&info), Err(LoadError::BadFormat)), "{why}: accepted");
        };
        unmappable(image(3, 0x1000, &[Ph(PT_LOAD, 5, 0, 0, 0x400, 0x300)]), "filesz > memsz");
        unmappable(image(3, 0x1000, &[Ph(PT_LOAD, 5, 0, 0x1001, 0x400, 0x400)]), "vaddr misaligned with offset");
        unmappable(image(3, 0x1000, &[Ph(PT_LOAD, 5, 0x10, 0x1000, 0x400, 0x400)]), "offset misaligned with vaddr");
        unmappable(image(3, 0x1000, &[Ph(PT_PHDR, 4, 64, 64, 56, 56)]), "no PT_LOAD");
        unmappable(image(2, 0x1000, &[Ph(PT_LOAD, 5, 0, 0x40_0000, 0x400, u64::MAX)]), "memsz past user space");
        unmappable(image(2, 0x1000, &[Ph(PT_LOAD, 5, 0, 0xffff_8000_0000_0000, 0x400, 0x400)]), "kernel address");
        assert!(check_image(&parse(dynamic_image()).unwrap()).is_ok());
    }

    /// An interpreter's type is checked only when it is mapped; bad magic,
    /// machine or program headers are ELIBBAD and a short header EIO; its
    /// own PT_INTERP is ignored.
    #[test]
    fn interpreters() {
        let mut rel = dynamic_image();
        put16(&mut rel, 16, 1); // ET_REL
        let info = parse_as(rel, Role::Interpreter).expect("an ET_REL interpreter parses");
        assert!(check_image(&info).is_err());
        let info = parse_as(dynamic_image(), Role::Interpreter).unwrap();
        assert_eq!(info.interpreter, None);
        let mut b = dynamic_image();
        b[0] = 0;
        assert!(matches!(parse_as(b, Role::Interpreter), Err(LoadError::BadInterpreter)));
        let mut b = dynamic_image();
        put16(&mut b, 54, 32);
        assert!(matches!(parse_as(b, Role::Interpreter), Err(LoadError::BadInterpreter)));
        assert!(matches!(parse_as(dynamic_image()[..40].to_vec(), Role::Interpreter), Err(LoadError::ShortRead)));
    }
}
