//! The x86_64 signal frame (Linux's `struct rt_sigframe`): what a handler
//! finds on its stack, and what rt_sigreturn restores.
//!
//! From the handler's stack pointer up: the return address (sa_restorer),
//! the ucontext (flags, link, stack, sigcontext, mask), the siginfo. The
//! XSAVE image sits above, 64-byte aligned, pointed to by the sigcontext.

use std::sync::OnceLock;

use platform::{FpState, Registers};

use crate::mm::{MemoryManager, MmError};
use crate::signal::{SigInfo, SigSet};

/// Bytes below the stack pointer that leaf functions may use (the red zone).
const RED_ZONE: u64 = 128;
const UCONTEXT: u64 = 8;
const SIGCONTEXT: u64 = UCONTEXT + 40;
const SIGMASK: u64 = SIGCONTEXT + 256;
const SIGINFO: u64 = UCONTEXT + 304;
/// sizeof(struct rt_sigframe).
const FRAME_SIZE: u64 = SIGINFO + 128;

const UC_FP_XSTATE: u64 = 1;
const UC_SIGCONTEXT_SS: u64 = 2;
const UC_STRICT_RESTORE_SS: u64 = 4;
const FP_XSTATE_MAGIC1: u32 = 0x4650_5853;
const FP_XSTATE_MAGIC2: u32 = 0x4650_5845;
/// Offset of the software-reserved bytes in the FXSAVE area.
const SW_RESERVED: usize = 464;

const USER_CS: u64 = 0x33;
const USER_DS: u64 = 0x2b;

/// XSAVE features user code may use and the size of their image (standard
/// format), as the guest sees them.
pub fn xsave_layout() -> (u64, usize) {
    static L: OnceLock<(u64, usize)> = OnceLock::new();
    *L.get_or_init(|| {
        let l0 = std::arch::x86_64::__cpuid_count(0xd, 0);
        let supported = l0.eax as u64 | ((l0.edx as u64) << 32);
        // x87, SSE, AVX and AVX-512, as the kvm platform enables.
        let features = (supported & 0xe7) | 0x3;
        let mut size = 576usize;
        for i in 2..64 {
            if features & (1 << i) != 0 {
                let l = std::arch::x86_64::__cpuid_count(0xd, i);
                size = size.max((l.ebx + l.eax) as usize);
            }
        }
        (features, size.min(FpState::SIZE))
    })
}

/// Bytes a frame takes on the stack at most (AT_MINSIGSTKSZ).
pub fn frame_bytes() -> u64 {
    (FRAME_SIZE + xsave_layout().1 as u64 + 4 + 64 + 16 + RED_ZONE).next_multiple_of(16)
}

/// What goes into a frame besides the registers.
pub struct FrameSpec<'a> {
    pub regs: &'a Registers,
    pub fp: &'a FpState,
    pub info: &'a SigInfo,
    /// The mask to restore at sigreturn.
    pub mask: SigSet,
    pub restorer: u64,
    /// The top of the alternate stack to use, if switching to it.
    pub stack_top: Option<u64>,
    /// The stack_t saved in uc_stack: (sp, flags, size).
    pub altstack: (u64, u32, u64),
    /// (error code, trap number, cr2) of a fault.
    pub trap: (u64, u64, u64),
}

/// Where the frame landed: the handler's stack pointer and the siginfo and
/// ucontext addresses it is given.
pub struct Placed {
    pub sp: u64,
    pub info: u64,
    pub ucontext: u64,
}

fn put(buf: &mut [u8], off: u64, v: u64) {
    buf[off as usize..off as usize + 8].copy_from_slice(&v.to_le_bytes());
}

fn get(buf: &[u8], off: u64) -> u64 {
    u64::from_le_bytes(buf[off as usize..off as usize + 8].try_into().unwrap())
}

/// Where a frame for `spec` goes: (the handler's stack pointer, the
/// address of the saved FP state); None if it would wrap below address 0.
fn layout(spec: &FrameSpec, xsize: usize) -> Option<(u64, u64)> {
    let top = match spec.stack_top {
        Some(top) => top,
        None => spec.regs.rsp.wrapping_sub(RED_ZONE),
    };
    let fp_addr = top.checked_sub(xsize as u64 + 4)? & !63;
    let frame = (fp_addr.checked_sub(FRAME_SIZE)? & !15).checked_sub(8)?;
    Some((frame, fp_addr))
}

/// The handler's stack pointer a frame for `spec` would give, without
/// writing anything.
pub fn frame_sp(spec: &FrameSpec) -> Option<u64> {
    layout(spec, xsave_layout().1).map(|(frame, _)| frame)
}

/// Writes a signal frame; fails with a memory error if the stack is bad.
pub fn build_frame(mm: &MemoryManager, spec: &FrameSpec) -> Result<Placed, MmError> {
    let (features, xsize) = xsave_layout();
    let regs = spec.regs;
    let (frame, fp_addr) = layout(spec, xsize).ok_or(MmError::Unmapped)?;

    let mut f = vec![0u8; FRAME_SIZE as usize];
    put(&mut f, 0, spec.restorer);
    put(&mut f, UCONTEXT, UC_FP_XSTATE | UC_SIGCONTEXT_SS | UC_STRICT_RESTORE_SS);
    put(&mut f, UCONTEXT + 16, spec.altstack.0);
    f[(UCONTEXT + 24) as usize..(UCONTEXT + 28) as usize].copy_from_slice(&spec.altstack.1.to_le_bytes());
    put(&mut f, UCONTEXT + 32, spec.altstack.2);
    let gprs = [
        regs.r8,
        regs.r9,
        regs.r10,
        regs.r11,
        regs.r12,
        regs.r13,
        regs.r14,
        regs.r15,
        regs.rdi,
        regs.rsi,
        regs.rbp,
        regs.rbx,
        regs.rdx,
        regs.rax,
        regs.rcx,
        regs.rsp,
        regs.rip,
        regs.rflags,
    ];
    for (i, v) in gprs.iter().enumerate() {
        put(&mut f, SIGCONTEXT + 8 * i as u64, *v);
    }
    // cs, gs, fs, ss as four 16-bit fields.
    put(&mut f, SIGCONTEXT + 144, USER_CS | (USER_DS << 48));
    put(&mut f, SIGCONTEXT + 152, spec.trap.0);
    put(&mut f, SIGCONTEXT + 160, spec.trap.1);
    put(&mut f, SIGCONTEXT + 168, spec.mask.0);
    put(&mut f, SIGCONTEXT + 176, spec.trap.2);
    put(&mut f, SIGCONTEXT + 184, fp_addr);
    put(&mut f, SIGMASK, spec.mask.0);
    f[SIGINFO as usize..].copy_from_slice(&spec.info.to_bytes());

    let mut fp = spec.fp.0[..xsize].to_vec();
    let bv = u64::from_le_bytes(fp[512..520].try_into().unwrap()) & features;
    fp[512..520].copy_from_slice(&bv.to_le_bytes());
    fp[SW_RESERVED..SW_RESERVED + 4].copy_from_slice(&FP_XSTATE_MAGIC1.to_le_bytes());
    fp[SW_RESERVED + 4..SW_RESERVED + 8].copy_from_slice(&(xsize as u32 + 4).to_le_bytes());
    fp[SW_RESERVED + 8..SW_RESERVED + 16].copy_from_slice(&features.to_le_bytes());
    fp[SW_RESERVED + 16..SW_RESERVED + 20].copy_from_slice(&(xsize as u32).to_le_bytes());
    fp.extend_from_slice(&FP_XSTATE_MAGIC2.to_le_bytes());

    mm.copy_out(fp_addr, &fp)?;
    mm.copy_out(frame, &f)?;
    Ok(Placed { sp: frame, info: frame + SIGINFO, ucontext: frame + UCONTEXT })
}

/// What rt_sigreturn restores.
pub struct Restored {
    pub regs: Registers,
    pub mask: SigSet,
    /// The FPU state; None if the CPU would refuse the saved image (Linux's
    /// XRSTOR or FXRSTOR of it faults, and sigreturn fails).
    pub fp: Option<FpState>,
    /// The saved stack_t: (sp, flags, size).
    pub altstack: (u64, u32, u64),
}

/// Reads the frame rt_sigreturn returns through. `sp` is the stack pointer
/// at the rt_sigreturn call (just above the popped return address).
pub fn restore_frame(mm: &MemoryManager, sp: u64, current: &Registers) -> Result<Restored, MmError> {
    let frame = sp.wrapping_sub(8);
    let mut f = vec![0u8; FRAME_SIZE as usize];
    mm.copy_in(frame, &mut f)?;
    let r = |i: u64| get(&f, SIGCONTEXT + 8 * i);
    let regs = Registers {
        r8: r(0),
        r9: r(1),
        r10: r(2),
        r11: r(3),
        r12: r(4),
        r13: r(5),
        r14: r(6),
        r15: r(7),
        rdi: r(8),
        rsi: r(9),
        rbp: r(10),
        rbx: r(11),
        rdx: r(12),
        rax: r(13),
        rcx: r(14),
        rsp: r(15),
        rip: r(16),
        rflags: r(17),
        fs_base: current.fs_base,
        gs_base: current.gs_base,
    };
    let mask = SigSet(get(&f, SIGMASK));
    let altstack = (
        get(&f, UCONTEXT + 16),
        u32::from_le_bytes(f[(UCONTEXT + 24) as usize..(UCONTEXT + 28) as usize].try_into().unwrap()),
        get(&f, UCONTEXT + 32),
    );
    let fp_addr = get(&f, SIGCONTEXT + 184);
    let fp = if fp_addr == 0 { Some(FpState::default()) } else { restore_fp(mm, fp_addr).ok().flatten() };
    Ok(Restored { regs, mask, fp, altstack })
}

/// MXCSR bits the CPU accepts (MXCSR_MASK; the rest are reserved).
const MXCSR_MASK: u32 = 0xffff;

/// Reads the FPU image at `addr` as Linux's sigreturn does: the extended
/// (XSAVE) layout if its software-reserved bytes and second magic word say
/// so, else the FXSAVE layout alone. None where XRSTOR or FXRSTOR would
/// fault on it: reserved MXCSR bits, state components the CPU does not
/// enable, a compacted or non-zero reserved XSAVE header.
fn restore_fp(mm: &MemoryManager, addr: u64) -> Result<Option<FpState>, MmError> {
    let (features, xsize) = xsave_layout();
    let mut img = vec![0u8; xsize];
    mm.copy_in(addr, &mut img[..512])?;
    let sw = |o: usize| u32::from_le_bytes(img[SW_RESERVED + o..SW_RESERVED + o + 4].try_into().unwrap());
    let (magic1, extended_size, xstate_size) = (sw(0), sw(4) as usize, sw(16) as usize);
    let user_features = u64::from_le_bytes(img[SW_RESERVED + 8..SW_RESERVED + 16].try_into().unwrap());
    let mut extended =
        magic1 == FP_XSTATE_MAGIC1 && xstate_size >= 576 && xstate_size <= xsize && xstate_size <= extended_size;
    if extended {
        let mut magic2 = [0u8; 4];
        mm.copy_in(addr + xstate_size as u64, &mut magic2)?;
        extended = u32::from_le_bytes(magic2) == FP_XSTATE_MAGIC2;
    }
    // The components restored from the image; others are reset.
    let restored = if extended {
        mm.copy_in(addr + 512, &mut img[512..xstate_size])?;
        user_features & features
    } else {
        0x3
    };
    let mxcsr = u32::from_le_bytes(img[24..28].try_into().unwrap());
    if restored & 0x6 != 0 && mxcsr & !MXCSR_MASK != 0 {
        return Ok(None);
    }
    let mut fp = FpState::default();
    fp.0[..512].copy_from_slice(&img[..512]);
    fp.0[SW_RESERVED..512].fill(0);
    fp.0[28..32].copy_from_slice(&MXCSR_MASK.to_le_bytes());
    let bv = if extended {
        let header = &img[512..576];
        let bv = u64::from_le_bytes(header[..8].try_into().unwrap());
        if bv & !features != 0 || header[8..].iter().any(|b| *b != 0) {
            return Ok(None);
        }
        fp.0[576..xstate_size].copy_from_slice(&img[576..xstate_size]);
        bv & restored
    } else {
        0x3
    };
    fp.0[512..520].copy_from_slice(&bv.to_le_bytes());
    Ok(Some(fp))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_layout_matches_linux() {
        assert_eq!(FRAME_SIZE, 440, "sizeof(struct rt_sigframe) on x86_64");
        assert_eq!(SIGMASK - UCONTEXT, 296, "offsetof(ucontext, uc_sigmask)");
        let (features, size) = xsave_layout();
        assert!(features & 3 == 3);
        assert!((576..=4096).contains(&size));
        assert!(frame_bytes() > FRAME_SIZE + size as u64);
    }
}
