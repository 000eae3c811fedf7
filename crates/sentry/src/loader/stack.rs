//! The initial stack: argument and environment strings, the auxiliary
//! vector, and the pointer arrays a program finds at its entry.

use platform::Access;

use super::LoadError;
use crate::mm::{Backing, MapFlags, MemoryManager, MmError, Role, STACK_TOP};

/// Size of the stack mapped at exec; it grows on demand below.
const INITIAL_STACK: u64 = 128 << 10;
/// Longest single argument or environment string (Linux's MAX_ARG_STRLEN).
const MAX_ARG_STRLEN: usize = 32 * 4096;
/// Total space for strings and pointers (a quarter of the default 8 MiB
/// stack limit, as Linux allows).
const MAX_ARG_SPACE: usize = 2 << 20;

/// An entry of the auxiliary vector; some take their value from the strings
/// placed on the stack.
#[derive(Clone, Copy, Debug)]
pub enum AuxEntry {
    Value(u64, u64),
    /// Address of 16 random bytes.
    Random(u64),
    /// Address of the executable's name.
    ExecFn(u64),
    /// Address of the platform string.
    Platform(u64),
}

/// What goes on a new program's stack.
pub struct StackImage<'a> {
    pub argv: &'a [Vec<u8>],
    pub envp: &'a [Vec<u8>],
    pub execfn: &'a [u8],
    pub auxv: Vec<AuxEntry>,
}

/// Most entries of the auxiliary vector a program starts with.
const MAX_AUXV: usize = 24;

/// The bytes the strings and pointers of a new program's stack take; E2BIG
/// if they exceed the limits.
fn stack_space(argv: &[Vec<u8>], envp: &[Vec<u8>], execfn: &[u8], auxv: usize) -> Result<usize, LoadError> {
    let strings: usize = argv.iter().chain(envp).map(|s| s.len() + 1).sum::<usize>() + execfn.len() + 1;
    let pointers = (argv.len() + envp.len() + 3 + 2 * (auxv + 1)) * 8;
    if argv.iter().chain(envp).any(|s| s.len() >= MAX_ARG_STRLEN) || strings + pointers > MAX_ARG_SPACE {
        return Err(LoadError::TooBig);
    }
    Ok(strings + pointers)
}

/// E2BIG if the arguments and environment cannot go on a new program's
/// stack: checked before execve's point of no return, as Linux does.
pub fn check_arguments(argv: &[Vec<u8>], envp: &[Vec<u8>], execfn: &[u8]) -> Result<(), LoadError> {
    stack_space(argv, envp, execfn, MAX_AUXV).map(|_| ())
}

/// Maps the stack and writes the image; returns the initial stack pointer
/// and the resolved auxiliary vector.
pub fn build_stack(mm: &MemoryManager, image: &StackImage) -> Result<(u64, Vec<(u64, u64)>), LoadError> {
    debug_assert!(image.auxv.len() <= MAX_AUXV);
    let space = stack_space(image.argv, image.envp, image.execfn, image.auxv.len())?;
    let size = INITIAL_STACK.max((space as u64 + 4096).next_multiple_of(4096) + 64 * 1024);
    let flags = MapFlags { fixed: true, grows_down: true, ..Default::default() };
    mm.map(STACK_TOP - size, size, Access::READ_WRITE, Backing::Anonymous, flags).map_err(|_| LoadError::NoMemory)?;
    mm.set_role(STACK_TOP - size, STACK_TOP, Role::Stack);
    let w = |e: MmError| match e {
        MmError::NoMemory => LoadError::NoMemory,
        _ => LoadError::TooBig,
    };

    // Strings, from the top: an 8-byte zero, the executable's name, the
    // environment, the arguments.
    let mut p = STACK_TOP - 8;
    let mut put = |s: &[u8]| -> Result<u64, LoadError> {
        p -= s.len() as u64 + 1;
        mm.copy_out(p, s).map_err(w)?;
        mm.copy_out(p + s.len() as u64, &[0]).map_err(w)?;
        Ok(p)
    };
    let execfn = put(image.execfn)?;
    let mut env_ptrs: Vec<u64> = image.envp.iter().rev().map(|s| put(s)).collect::<Result<_, _>>()?;
    env_ptrs.reverse();
    let mut arg_ptrs: Vec<u64> = image.argv.iter().rev().map(|s| put(s)).collect::<Result<_, _>>()?;
    arg_ptrs.reverse();
    let platform = put(b"x86_64")?;
    let mut random = [0u8; 16];
    rustix::rand::getrandom(&mut random, rustix::rand::GetRandomFlags::empty()).map_err(|_| LoadError::NoMemory)?;
    p = (p - 16) & !15;
    mm.copy_out(p, &random).map_err(w)?;
    let random_at = p;

    let auxv: Vec<(u64, u64)> = image
        .auxv
        .iter()
        .map(|a| match *a {
            AuxEntry::Value(k, v) => (k, v),
            AuxEntry::Random(k) => (k, random_at),
            AuxEntry::ExecFn(k) => (k, execfn),
            AuxEntry::Platform(k) => (k, platform),
        })
        .collect();
    let mut words: Vec<u64> = vec![image.argv.len() as u64];
    words.extend(&arg_ptrs);
    words.push(0);
    words.extend(&env_ptrs);
    words.push(0);
    for (k, v) in &auxv {
        words.push(*k);
        words.push(*v);
    }
    words.extend([0, 0]);
    let sp = (p - 8 * words.len() as u64) & !15;
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    mm.copy_out(sp, &bytes).map_err(w)?;
    Ok((sp, auxv))
}
