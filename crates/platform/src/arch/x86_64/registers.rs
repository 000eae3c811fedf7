//! The application's x86_64 register state.

/// General-purpose registers, instruction pointer, flags and the two segment
/// bases an application can set. Names are the architecture's; the accessors
/// give arch-neutral names to what the sentry needs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Registers {
    pub rax: u64,
    pub rbx: u64,
    pub rcx: u64,
    pub rdx: u64,
    pub rsi: u64,
    pub rdi: u64,
    pub rbp: u64,
    pub rsp: u64,
    pub r8: u64,
    pub r9: u64,
    pub r10: u64,
    pub r11: u64,
    pub r12: u64,
    pub r13: u64,
    pub r14: u64,
    pub r15: u64,
    pub rip: u64,
    pub rflags: u64,
    pub fs_base: u64,
    pub gs_base: u64,
}

/// RFLAGS bits user code may hold: CF PF AF ZF SF TF DF OF AC ID, plus RF.
const USER_FLAGS: u64 = 0x1 | 0x4 | 0x10 | 0x40 | 0x80 | 0x100 | 0x400 | 0x800 | 0x4_0000 | 0x20_0000 | 0x1_0000;
/// Bit 1 is always one; IF is always set for user code.
const FIXED_FLAGS: u64 = 0x2 | 0x200;

impl Registers {
    /// Instruction pointer.
    pub fn ip(&self) -> u64 {
        self.rip
    }
    pub fn set_ip(&mut self, v: u64) {
        self.rip = v;
    }
    /// Stack pointer.
    pub fn sp(&self) -> u64 {
        self.rsp
    }
    pub fn set_sp(&mut self, v: u64) {
        self.rsp = v;
    }
    /// The system call number of a [`crate::Event::Syscall`].
    pub fn syscall_number(&self) -> u64 {
        self.rax
    }
    /// The six system call arguments.
    pub fn syscall_args(&self) -> [u64; 6] {
        [self.rdi, self.rsi, self.rdx, self.r10, self.r8, self.r9]
    }
    /// Sets the value a system call returns.
    pub fn set_return(&mut self, v: u64) {
        self.rax = v;
    }
    /// Flags as the CPU will run them: only the bits user code may change,
    /// with interrupts enabled.
    pub fn sanitized_flags(&self) -> u64 {
        (self.rflags & USER_FLAGS) | FIXED_FLAGS
    }
    /// Registers of a new program: all zero but the entry point and stack.
    pub fn for_entry(ip: u64, sp: u64) -> Self {
        Registers { rip: ip, rsp: sp, rflags: FIXED_FLAGS, ..Default::default() }
    }
}

/// Exception vectors the sentry tells apart.
pub mod vector {
    pub const DIVIDE_ERROR: u8 = 0;
    pub const DEBUG: u8 = 1;
    pub const BREAKPOINT: u8 = 3;
    pub const OVERFLOW: u8 = 4;
    pub const BOUND_RANGE: u8 = 5;
    pub const INVALID_OPCODE: u8 = 6;
    pub const DEVICE_NOT_AVAILABLE: u8 = 7;
    pub const DOUBLE_FAULT: u8 = 8;
    pub const INVALID_TSS: u8 = 10;
    pub const SEGMENT_NOT_PRESENT: u8 = 11;
    pub const STACK_FAULT: u8 = 12;
    pub const GENERAL_PROTECTION: u8 = 13;
    pub const PAGE_FAULT: u8 = 14;
    pub const X87_FLOATING_POINT: u8 = 16;
    pub const ALIGNMENT_CHECK: u8 = 17;
    pub const MACHINE_CHECK: u8 = 18;
    pub const SIMD_FLOATING_POINT: u8 = 19;
}

/// A CPU exception other than a page fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exception {
    /// The vector (see [`vector`]).
    pub vector: u8,
    /// The error code the CPU pushed, or zero.
    pub error_code: u64,
}

/// Floating-point and vector state as an XSAVE image in standard format: the
/// 512-byte legacy (FXSAVE) area, the 64-byte header, then the extended
/// components. This is also the layout Linux puts in a signal frame.
#[derive(Clone)]
pub struct FpState(pub Box<[u8; FpState::SIZE]>);

impl FpState {
    /// Size of the image.
    pub const SIZE: usize = 4096;
    const FCW: usize = 0;
    const MXCSR: usize = 24;
    const XSTATE_BV: usize = 512;

    /// x87 control word.
    pub fn fcw(&self) -> u16 {
        u16::from_le_bytes([self.0[Self::FCW], self.0[Self::FCW + 1]])
    }
    /// SSE control and status register.
    pub fn mxcsr(&self) -> u32 {
        u32::from_le_bytes(self.0[Self::MXCSR..Self::MXCSR + 4].try_into().unwrap())
    }
    /// Components present in the image (the XSAVE header's XSTATE_BV).
    pub fn xstate_bv(&self) -> u64 {
        u64::from_le_bytes(self.0[Self::XSTATE_BV..Self::XSTATE_BV + 8].try_into().unwrap())
    }
}

impl Default for FpState {
    /// The state a new program starts with: x87 and SSE at their defaults,
    /// every other component in its initial state.
    fn default() -> Self {
        let mut b = Box::new([0u8; Self::SIZE]);
        b[Self::FCW..Self::FCW + 2].copy_from_slice(&0x037fu16.to_le_bytes());
        b[Self::MXCSR..Self::MXCSR + 4].copy_from_slice(&0x1f80u32.to_le_bytes());
        // MXCSR_MASK: every bit the CPU implements.
        b[28..32].copy_from_slice(&0xffffu32.to_le_bytes());
        FpState(b)
    }
}

impl std::fmt::Debug for FpState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FpState")
            .field("fcw", &self.fcw())
            .field("mxcsr", &self.mxcsr())
            .field("xstate_bv", &self.xstate_bv())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_are_sanitized() {
        let r = Registers { rflags: u64::MAX, ..Default::default() };
        let f = r.sanitized_flags();
        assert_eq!(f & 0x3000, 0, "IOPL never reaches the CPU");
        assert_ne!(f & 0x200, 0, "interrupts stay enabled");
        assert_eq!(f & 0x4000, 0, "NT is cleared");
        assert_ne!(f & 0x1, 0, "CF survives");
    }

    #[test]
    fn initial_fp_state() {
        let s = FpState::default();
        assert_eq!(s.fcw(), 0x37f);
        assert_eq!(s.mxcsr(), 0x1f80);
        assert_eq!(s.xstate_bv(), 0);
    }
}
