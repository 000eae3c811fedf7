//! Program loading: ELF executables (static, static-PIE, dynamic with an
//! interpreter), `#!` scripts, and the initial stack a new program starts
//! with.

mod elf;
mod stack;

use std::sync::Arc;

pub use elf::{ElfInfo, Role, parse_elf};
pub use stack::{AuxEntry, StackImage, build_stack, check_arguments};

use crate::fs::write_access::ExecDenial;
use crate::fs::{Dentry, FileOps, FileType, FsError, Lookup, OpenFile, OpenFlags, Resolver};
use crate::mm::MemoryManager;
use crate::vdso::Vdso;

/// Longest `#!` line considered (Linux's BINPRM_BUF_SIZE).
const SHEBANG_MAX: usize = 256;
/// Most `#!` rewrites of one execve (scripts run by scripts): Linux's
/// exec_binprm gives up with ELOOP at a sixth.
const MAX_INTERPRETERS: usize = 5;

/// Why a program could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{0}")]
    Lookup(FsError),
    /// Not a regular file, or no execute permission.
    #[error("permission denied")]
    NotExecutable,
    /// Not an ELF file for this machine, and not a script.
    #[error("exec format error")]
    BadFormat,
    /// The ELF interpreter (PT_INTERP) is no ELF file for this machine.
    #[error("accessing a corrupted shared library")]
    BadInterpreter,
    /// A header or path the file says is there is not all there (Linux's
    /// elf_read: EIO).
    #[error("input/output error")]
    ShortRead,
    /// An interpreter is itself a script too many times over.
    #[error("too many levels of interpreters")]
    TooManyInterpreters,
    /// Arguments and environment exceed the limit.
    #[error("argument list too long")]
    TooBig,
    #[error("out of memory")]
    NoMemory,
    #[error("reading the program: {0}")]
    Io(FsError),
    /// The file is open for writing.
    #[error("text file busy")]
    TextBusy,
    /// The program's file capabilities cannot all be granted.
    #[error("operation not permitted")]
    NotPermitted,
}

/// A program found and opened for execution.
pub struct Executable {
    pub dentry: Arc<Dentry>,
    pub file: Arc<OpenFile>,
    /// Nobody opens the file for writing while the program is loaded, nor,
    /// once it is handed to the address space, while that runs it.
    pub denial: Arc<ExecDenial>,
}

/// The program to run, as execve and execveat name it.
pub enum ExecFile {
    /// A path, relative ones from `start` (execveat's directory) or the
    /// working directory; a final symlink is followed unless `follow` is
    /// false (then it is ELOOP).
    Path { start: Option<Arc<Dentry>>, path: Vec<u8>, follow: bool },
    /// An open file (execveat with AT_EMPTY_PATH).
    Open(Arc<Dentry>),
}

/// Opens `path` for execution: it must be a regular file with execute
/// permission.
pub fn open_executable(resolver: &Resolver, path: &[u8]) -> Result<Executable, LoadError> {
    open_exec(resolver, &ExecFile::Path { start: None, path: path.to_vec(), follow: true })
}

/// Opens the program for execution: it must be a regular file with execute
/// permission.
pub fn open_exec(resolver: &Resolver, file: &ExecFile) -> Result<Executable, LoadError> {
    let dentry = match file {
        ExecFile::Path { start, path, follow } => {
            let how = if *follow { Lookup::FOLLOW } else { Lookup::NOFOLLOW };
            let d = resolver.resolve(start.as_ref(), path, how).map_err(LoadError::Lookup)?;
            if d.file_type() == FileType::Symlink {
                return Err(LoadError::Lookup(FsError::Loop));
            }
            d
        }
        ExecFile::Open(d) => d.clone(),
    };
    if dentry.file_type() != FileType::Regular {
        return Err(LoadError::NotExecutable);
    }
    // Nothing on a noexec mount runs (Linux's path_noexec in may_open).
    if dentry.mount.flags().contains(crate::fs::dentry::MountFlags::NOEXEC) {
        return Err(LoadError::NotExecutable);
    }
    dentry.inode.access(resolver.creds, crate::fs::MAY_EXEC).map_err(|_| LoadError::NotExecutable)?;
    let ctx = crate::fs::Context::kernel(std::sync::Arc::new(resolver.creds.clone()));
    let ops = dentry.inode.open(&ctx, &dentry, OpenFlags::empty()).map_err(|e| match e {
        FsError::PermissionDenied => LoadError::NotExecutable,
        e => LoadError::Io(e),
    })?;
    // As Linux's open_exec: a file open for writing is not run.
    let denial = Arc::new(ExecDenial::get(dentry.key()).map_err(|_| LoadError::TextBusy)?);
    Ok(Executable { file: OpenFile::new(ops, Some(dentry.clone()), OpenFlags::empty()), dentry, denial })
}

/// Reads up to `len` bytes at `offset` of an open file.
pub fn read_at(file: &dyn FileOps, of: &OpenFile, offset: u64, len: usize) -> Result<Vec<u8>, FsError> {
    let mut buf = vec![0u8; len];
    let mut done = 0;
    let ctx = crate::fs::Context::internal();
    while done < len {
        let n = file.read(&ctx, of, &[memory::GuestSliceMut::from(&mut buf[done..])], offset + done as u64)?;
        if n == 0 {
            break;
        }
        done += n;
    }
    buf.truncate(done);
    Ok(buf)
}

/// What `#!` names: the interpreter and its optional single argument,
/// parsed as Linux's binfmt_script does from the file's first
/// [`SHEBANG_MAX`] bytes. None if there is no `#!`, no interpreter, or a
/// name that may have been cut short (no newline or blank after it within
/// those bytes): never run a truncated path.
pub fn parse_shebang(head: &[u8]) -> Option<(Vec<u8>, Option<Vec<u8>>)> {
    if !head.starts_with(b"#!") {
        return None;
    }
    // As the kernel's buffer: what the file has, then zeros.
    let mut buf = [0u8; SHEBANG_MAX];
    let n = head.len().min(SHEBANG_MAX);
    buf[..n].copy_from_slice(&head[..n]);
    let blank = |b: u8| b == b' ' || b == b'\t';
    let ends_name = |b: u8| blank(b) || b == 0;
    let last = SHEBANG_MAX - 1;
    let mut end = match buf.iter().position(|b| *b == b'\n') {
        Some(newline) => newline,
        None => {
            let name = (2..last).find(|i| !blank(buf[*i]))?;
            (name..last).find(|i| ends_name(buf[*i]))?;
            last
        }
    };
    while end > 2 && blank(buf[end - 1]) {
        end -= 1;
    }
    let name = (2..end).find(|i| !blank(buf[*i]))?;
    let sep = (name..end).find(|i| ends_name(buf[*i]));
    let c_string = |from: usize, to: usize| {
        let s = &buf[from..to];
        s[..s.iter().position(|b| *b == 0).unwrap_or(s.len())].to_vec()
    };
    let interp = c_string(name, sep.unwrap_or(end));
    let arg = match sep {
        Some(sep) if buf[sep] != 0 => (sep..end).find(|i| !blank(buf[*i])).map(|a| c_string(a, end)),
        _ => None,
    };
    Some((interp, arg))
}

/// A program found and checked, ready to load: everything that can fail
/// before execve's point of no return has been done.
pub struct Program {
    pub exe: Executable,
    pub info: ElfInfo,
    /// The ELF interpreter (PT_INTERP), opened and its headers checked.
    pub interpreter: Option<(Executable, ElfInfo)>,
    /// The arguments, rewritten by any `#!` lines.
    pub argv: Vec<Vec<u8>>,
}

/// The program to run after following `#!` lines, with its ELF
/// interpreter: the executable, and argv rewritten as the kernel does
/// (interpreter, its argument, the script's name, then the original
/// arguments but the first). `filename` is the name the program goes by
/// (Linux's bprm->filename), given to a script's interpreter; if
/// `filename_inaccessible`, the interpreter could not open it (a
/// descriptor closed on exec), so a script cannot run: ENOENT.
pub fn resolve_interpreters(
    resolver: &Resolver,
    file: &ExecFile,
    filename: &[u8],
    filename_inaccessible: bool,
    mut argv: Vec<Vec<u8>>,
) -> Result<Program, LoadError> {
    let mut exe = open_exec(resolver, file)?;
    let mut name = filename.to_vec();
    for _ in 0..=MAX_INTERPRETERS {
        let head = read_at(&*exe.file.ops, &exe.file, 0, SHEBANG_MAX).map_err(LoadError::Io)?;
        if let Some((interp, arg)) = parse_shebang(&head) {
            if filename_inaccessible {
                return Err(LoadError::Lookup(FsError::NotFound));
            }
            let mut new_argv = vec![interp.clone()];
            new_argv.extend(arg);
            new_argv.push(name);
            new_argv.extend(argv.into_iter().skip(1));
            argv = new_argv;
            exe = open_executable(resolver, &interp)?;
            name = interp;
            continue;
        }
        let info = parse_elf(&*exe.file.ops, &exe.file, Role::Program)?;
        // A missing interpreter is the error of opening it (ENOENT), as
        // Linux's open_exec gives; one that is no ELF file for this
        // machine is ELIBBAD.
        let interpreter = match &info.interpreter {
            Some(path) => {
                let ie = open_executable(resolver, path)?;
                let iinfo = parse_elf(&*ie.file.ops, &ie.file, Role::Interpreter)?;
                Some((ie, iinfo))
            }
            None => None,
        };
        return Ok(Program { exe, info, interpreter, argv });
    }
    Err(LoadError::TooManyInterpreters)
}

/// A loaded program, ready to start.
pub struct Loaded {
    pub entry: u64,
    pub stack_pointer: u64,
    /// Start of the heap (brk).
    pub brk_start: u64,
    /// Where the main executable was placed (0 for fixed-address ones).
    pub load_bias: u64,
    /// The auxiliary vector given to the program.
    pub auxv: Vec<(u64, u64)>,
}

/// Process-wide facts the auxiliary vector reports.
#[derive(Clone, Debug)]
pub struct AuxFacts {
    pub uid: u32,
    pub euid: u32,
    pub gid: u32,
    pub egid: u32,
    /// The program runs with more privilege than its caller (AT_SECURE).
    pub secure: bool,
    pub hwcap: u64,
    pub hwcap2: u64,
    pub min_signal_stack: u64,
    pub clock_ticks: u64,
    /// Mapped into every new program when present.
    pub vdso: Option<Arc<Vdso>>,
}

/// The strings a new program starts with.
pub struct ProgramArgs<'a> {
    pub argv: &'a [Vec<u8>],
    pub envp: &'a [Vec<u8>],
    /// The path execve was given (AT_EXECFN).
    pub execfn: &'a [u8],
}

/// Maps the program (and its interpreter) into `mm` and builds the stack.
/// This is past execve's point of no return: Linux kills a process whose
/// image fails here with SIGSEGV rather than return to the old program.
pub fn load(mm: &MemoryManager, program: &Program, args: &ProgramArgs, facts: &AuxFacts) -> Result<Loaded, LoadError> {
    let ProgramArgs { argv, envp, execfn } = *args;
    let info = &program.info;
    let main = elf::map_image(mm, &program.exe.file, info, true)?;
    let mut entry = main.bias.wrapping_add(info.entry);
    let mut interp_base = 0;
    if let Some((ie, iinfo)) = &program.interpreter {
        let im = elf::map_image(mm, &ie.file, iinfo, false)?;
        interp_base = im.bias;
        entry = im.bias.wrapping_add(iinfo.entry);
    }
    mm.set_brk_start(main.end);
    let vdso = facts.vdso.as_ref().map(|v| v.map_into(mm)).transpose().map_err(|_| LoadError::NoMemory)?;
    let phdr = main.bias.wrapping_add(info.phdr_vaddr);
    let image = StackImage {
        argv,
        envp,
        execfn,
        auxv: vec![
            AuxEntry::Value(linux_raw_sys::auxvec::AT_HWCAP as u64, facts.hwcap),
            AuxEntry::Value(linux_raw_sys::auxvec::AT_PAGESZ as u64, 4096),
            AuxEntry::Value(linux_raw_sys::auxvec::AT_CLKTCK as u64, facts.clock_ticks),
            AuxEntry::Value(linux_raw_sys::auxvec::AT_PHDR as u64, phdr),
            AuxEntry::Value(linux_raw_sys::auxvec::AT_PHENT as u64, info.phent as u64),
            AuxEntry::Value(linux_raw_sys::auxvec::AT_PHNUM as u64, info.phnum as u64),
            AuxEntry::Value(linux_raw_sys::auxvec::AT_BASE as u64, interp_base),
            AuxEntry::Value(linux_raw_sys::auxvec::AT_FLAGS as u64, 0),
            AuxEntry::Value(linux_raw_sys::auxvec::AT_ENTRY as u64, main.bias.wrapping_add(info.entry)),
            AuxEntry::Value(linux_raw_sys::auxvec::AT_UID as u64, facts.uid as u64),
            AuxEntry::Value(linux_raw_sys::auxvec::AT_EUID as u64, facts.euid as u64),
            AuxEntry::Value(linux_raw_sys::auxvec::AT_GID as u64, facts.gid as u64),
            AuxEntry::Value(linux_raw_sys::auxvec::AT_EGID as u64, facts.egid as u64),
            AuxEntry::Value(linux_raw_sys::auxvec::AT_SECURE as u64, u64::from(facts.secure)),
            AuxEntry::Random(linux_raw_sys::auxvec::AT_RANDOM as u64),
            AuxEntry::Value(linux_raw_sys::auxvec::AT_HWCAP2 as u64, facts.hwcap2),
            AuxEntry::ExecFn(linux_raw_sys::auxvec::AT_EXECFN as u64),
            AuxEntry::Platform(linux_raw_sys::auxvec::AT_PLATFORM as u64),
            AuxEntry::Value(linux_raw_sys::auxvec::AT_MINSIGSTKSZ as u64, facts.min_signal_stack),
        ]
        .into_iter()
        .chain(vdso.map(|at| AuxEntry::Value(linux_raw_sys::auxvec::AT_SYSINFO_EHDR as u64, at)))
        .collect(),
    };
    let (sp, auxv) = build_stack(mm, &image)?;
    Ok(Loaded { entry, stack_pointer: sp, brk_start: main.end, load_bias: main.bias, auxv })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shebang_lines() {
        assert_eq!(parse_shebang(b"#!/bin/sh\necho"), Some((b"/bin/sh".to_vec(), None)));
        assert_eq!(
            parse_shebang(b"#! /usr/bin/env  python3 \n"),
            Some((b"/usr/bin/env".to_vec(), Some(b"python3".to_vec())))
        );
        assert_eq!(
            parse_shebang(b"#!/bin/awk -f -x\n"),
            Some((b"/bin/awk".to_vec(), Some(b"-f -x".to_vec()))),
            "everything after the interpreter is one argument"
        );
        assert_eq!(parse_shebang(b"#!\n"), None);
        assert_eq!(parse_shebang(b"\x7fELF"), None);
        assert_eq!(parse_shebang(b"#!/bin/sh"), Some((b"/bin/sh".to_vec(), None)), "no newline is fine");
        let long_name = [b"#!/".as_slice(), &[b'a'; 300], b"\n"].concat();
        assert_eq!(parse_shebang(&long_name), None, "a name cut short is never run");
        let long_arg = [b"#!/bin/sh ".as_slice(), &[b'a'; 300], b"\n"].concat();
        let (interp, arg) = parse_shebang(&long_arg).expect("an argument may be cut short");
        assert_eq!((interp.as_slice(), arg.map(|a| a.len())), (b"/bin/sh".as_slice(), Some(SHEBANG_MAX - 11)));
        assert_eq!(parse_shebang(b"#!/bin/sh\0 -x\n"), Some((b"/bin/sh".to_vec(), None)), "NUL ends the name");
        assert_eq!(parse_shebang(b"#!   \n"), None);
    }
}
