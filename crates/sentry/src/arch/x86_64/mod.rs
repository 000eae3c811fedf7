//! x86_64: how exceptions become signals, signal frames, and CPU facts for
//! the auxiliary vector.

pub mod signal;

use linux_raw_sys::general as g;
use platform::Exception;
use platform::arch::vector;

/// The signal and si_code an exception raises, as Linux's trap handlers do.
pub fn exception_signal(e: &Exception) -> (u32, i32) {
    match e.vector {
        vector::DIVIDE_ERROR => (g::SIGFPE, g::FPE_INTDIV as i32),
        vector::DEBUG | vector::BREAKPOINT => (g::SIGTRAP, g::TRAP_BRKPT as i32),
        vector::INVALID_OPCODE => (g::SIGILL, g::ILL_ILLOPN as i32),
        vector::X87_FLOATING_POINT | vector::SIMD_FLOATING_POINT => (g::SIGFPE, 0),
        vector::ALIGNMENT_CHECK => (g::SIGBUS, g::BUS_ADRALN as i32),
        vector::STACK_FAULT => (g::SIGBUS, g::SI_KERNEL as i32),
        _ => (g::SIGSEGV, g::SI_KERNEL as i32),
    }
}

/// CPUID leaf 1 EDX, which Linux reports as AT_HWCAP on x86.
pub fn hwcap() -> u64 {
    std::arch::x86_64::__cpuid(1).edx as u64
}

/// Bytes a signal frame needs, reported as AT_MINSIGSTKSZ.
pub fn min_signal_stack() -> u64 {
    signal::frame_bytes()
}

/// Length of the `syscall` instruction: a restarted system call backs the
/// instruction pointer up by this much.
pub const SYSCALL_INSN_LEN: u64 = 2;
