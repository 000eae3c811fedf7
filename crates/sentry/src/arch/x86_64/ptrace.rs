//! x86_64 register layouts a tracer reads and writes: `struct
//! user_regs_struct`, `struct user` (PEEKUSER/POKEUSER offsets) and the
//! FXSAVE and XSAVE images of the regsets.

use platform::{FpState, Registers};

/// Words of `struct user_regs_struct`.
pub const USER_REGS_WORDS: usize = 27;
/// Bytes of `struct user_regs_struct` (NT_PRSTATUS).
pub const USER_REGS_SIZE: usize = USER_REGS_WORDS * 8;
/// `offsetof(struct user, u_debugreg)` and `sizeof(struct user)`.
pub const USER_DEBUGREG: usize = 848;
pub const USER_SIZE: usize = USER_DEBUGREG + 8 * 8;
/// Bytes of `struct user_fpregs_struct` (NT_PRFPREG): the FXSAVE area.
pub const FPREGS_SIZE: usize = 512;

/// Selectors of user code and data as Linux loads them.
const USER_CS: u64 = 0x33;
const USER_SS: u64 = 0x2b;

/// Word indexes in `struct user_regs_struct`.
mod word {
    pub const ORIG_RAX: usize = 15;
    pub const CS: usize = 17;
    pub const EFLAGS: usize = 18;
    pub const SS: usize = 20;
    pub const FS_BASE: usize = 21;
    pub const GS_BASE: usize = 22;
    pub const DS: usize = 23;
    pub const GS: usize = 26;
}

/// The registers as `struct user_regs_struct`, `orig_rax` the number of
/// the system call the task is in.
pub fn user_regs(r: &Registers, orig_rax: u64) -> [u64; USER_REGS_WORDS] {
    [
        r.r15, r.r14, r.r13, r.r12, r.rbp, r.rbx, r.r11, r.r10, r.r9, r.r8, r.rax, r.rcx, r.rdx, r.rsi, r.rdi,
        orig_rax, r.rip, USER_CS, r.rflags, r.rsp, USER_SS, r.fs_base, r.gs_base, 0, 0, 0, 0,
    ]
}

/// Why a register write is refused (Linux's putreg).
#[derive(Debug, PartialEq, Eq)]
pub enum BadRegister {
    /// A segment selector other than user code and data: EIO.
    Selector,
    /// A segment base outside user space: EPERM.
    Base,
}

/// Flags a tracer may change (Linux's FLAG_MASK).
const FLAG_MASK: u64 = 0x1 | 0x4 | 0x10 | 0x40 | 0x80 | 0x100 | 0x400 | 0x800 | 0x4_0000 | 0x1_0000;

/// Writes word `index` of `struct user_regs_struct`.
pub fn set_user_reg(r: &mut Registers, orig_rax: &mut u64, index: usize, v: u64) -> Result<(), BadRegister> {
    let canonical = v < (1 << 47);
    match index {
        0 => r.r15 = v,
        1 => r.r14 = v,
        2 => r.r13 = v,
        3 => r.r12 = v,
        4 => r.rbp = v,
        5 => r.rbx = v,
        6 => r.r11 = v,
        7 => r.r10 = v,
        8 => r.r9 = v,
        9 => r.r8 = v,
        10 => r.rax = v,
        11 => r.rcx = v,
        12 => r.rdx = v,
        13 => r.rsi = v,
        14 => r.rdi = v,
        word::ORIG_RAX => *orig_rax = v,
        16 => r.rip = v,
        word::CS if v == USER_CS => {}
        word::SS if v == USER_SS => {}
        word::CS | word::SS => return Err(BadRegister::Selector),
        word::EFLAGS => r.rflags = (r.rflags & !FLAG_MASK) | (v & FLAG_MASK),
        19 => r.rsp = v,
        word::FS_BASE if canonical => r.fs_base = v,
        word::GS_BASE if canonical => r.gs_base = v,
        word::FS_BASE | word::GS_BASE => return Err(BadRegister::Base),
        // ds, es, fs, gs: the null selector is the only one user code has.
        word::DS..=word::GS if v == 0 => {}
        _ => return Err(BadRegister::Selector),
    }
    Ok(())
}

/// Replaces the registers with a whole `struct user_regs_struct`; nothing
/// changes if a word is refused.
pub fn set_user_regs(r: &mut Registers, orig_rax: &mut u64, words: &[u64; USER_REGS_WORDS]) -> Result<(), BadRegister> {
    let (mut nr, mut nrax) = (*r, *orig_rax);
    for (i, v) in words.iter().enumerate() {
        set_user_reg(&mut nr, &mut nrax, i, *v)?;
    }
    (*r, *orig_rax) = (nr, nrax);
    Ok(())
}

/// The FXSAVE area of the floating-point state.
pub fn fpregs(fp: &FpState) -> [u8; FPREGS_SIZE] {
    let mut b = [0u8; FPREGS_SIZE];
    b.copy_from_slice(&fp.0[..FPREGS_SIZE]);
    // The software-reserved bytes are not the tracer's.
    b[464..].fill(0);
    b
}

/// Replaces the FXSAVE area; x87 and SSE state count as present after.
pub fn set_fpregs(fp: &mut FpState, b: &[u8]) {
    let n = b.len().min(464);
    fp.0[..n].copy_from_slice(&b[..n]);
    fp.0[512] |= 0x3;
}

/// The XSAVE image of NT_X86_XSTATE: the standard-format image the task
/// has, with the features user code may use in the first software-reserved
/// word (where Linux puts XCR0 for tracers), `size` bytes of it.
pub fn xstate(fp: &FpState) -> Vec<u8> {
    let (features, size) = super::signal::xsave_layout();
    let mut v = fp.0[..size].to_vec();
    v[464..512].fill(0);
    v[464..472].copy_from_slice(&features.to_le_bytes());
    v
}

/// Replaces the state from an NT_X86_XSTATE image: the legacy area, and
/// the components the header marks present.
pub fn set_xstate(fp: &mut FpState, b: &[u8]) {
    let (features, size) = super::signal::xsave_layout();
    let n = b.len().min(size);
    if n <= 512 {
        set_fpregs(fp, b);
        return;
    }
    let mut img = fp.0.clone();
    img[..464].copy_from_slice(&b[..464]);
    img[512..n].copy_from_slice(&b[512..n]);
    let bv = u64::from_le_bytes(img[512..520].try_into().expect("8 bytes")) & features;
    img[512..520].copy_from_slice(&bv.to_le_bytes());
    fp.0 = img;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_regs_round_trip() {
        let r =
            Registers { rax: 1, rip: 0x401000, rsp: 0x7fff0000, rflags: 0x246, fs_base: 0x1234, ..Default::default() };
        let words = user_regs(&r, 39);
        assert_eq!(words[10], 1);
        assert_eq!(words[15], 39);
        assert_eq!(words[16], 0x401000);
        assert_eq!(words[17], 0x33);
        let (mut back, mut orig) = (Registers::default(), 0);
        set_user_regs(&mut back, &mut orig, &words).unwrap();
        assert_eq!(orig, 39);
        assert_eq!((back.rax, back.rip, back.rsp, back.fs_base), (1, 0x401000, 0x7fff0000, 0x1234));
    }

    #[test]
    fn bad_registers_are_refused_whole() {
        let mut r = Registers::default();
        let mut orig = 0;
        let mut words = user_regs(&r, 0);
        words[0] = 5;
        words[17] = 0x10;
        assert_eq!(set_user_regs(&mut r, &mut orig, &words), Err(BadRegister::Selector));
        assert_eq!(r.r15, 0, "nothing changed");
        words[17] = 0x33;
        words[21] = 1 << 60;
        assert_eq!(set_user_regs(&mut r, &mut orig, &words), Err(BadRegister::Base));
    }
}
