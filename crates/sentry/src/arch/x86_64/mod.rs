//! x86_64: how exceptions become signals, signal frames, and CPU facts for
//! the auxiliary vector.

pub mod ptrace;
pub mod signal;

use linux_raw_sys::general as g;
use platform::arch::vector;
use platform::{Exception, FpState};

/// The signal and si_code an exception raises, as Linux's trap handlers do.
/// `fp` is the FPU state at the fault, read for floating-point exceptions.
pub fn exception_signal(e: &Exception, fp: impl FnOnce() -> Option<FpState>) -> (u32, i32) {
    match e.vector {
        vector::DIVIDE_ERROR => (g::SIGFPE, g::FPE_INTDIV as i32),
        // int3 goes through do_trap: a plain kernel-sent SIGTRAP.
        vector::BREAKPOINT => (g::SIGTRAP, g::SI_KERNEL as i32),
        // Debug registers are never armed: a #DB is a single step (the
        // trap flag), which Linux reports as TRAP_TRACE.
        vector::DEBUG => (g::SIGTRAP, g::TRAP_TRACE as i32),
        vector::INVALID_OPCODE => (g::SIGILL, g::ILL_ILLOPN as i32),
        vector::X87_FLOATING_POINT | vector::SIMD_FLOATING_POINT => {
            (g::SIGFPE, fp().map_or(0, |fp| fp_exception_code(e.vector, &fp)))
        }
        vector::ALIGNMENT_CHECK => (g::SIGBUS, g::BUS_ADRALN as i32),
        vector::STACK_FAULT => (g::SIGBUS, g::SI_KERNEL as i32),
        _ => (g::SIGSEGV, g::SI_KERNEL as i32),
    }
}

/// The exception hardware raises for an `int n` (CD ib) the IDT refuses
/// to user mode, which is every vector but int3's and into's: a general
/// protection fault whose error code names the IDT entry, (n << 3) | 2.
/// PVM reports such an instruction as an invalid opcode instead; `code`
/// holds the bytes at the faulting instruction.
pub fn refused_software_interrupt(e: &Exception, code: &[u8]) -> Option<Exception> {
    match (e.vector, code) {
        (vector::INVALID_OPCODE, [0xcd, n, ..]) => {
            Some(Exception { vector: vector::GENERAL_PROTECTION, error_code: (u64::from(*n) << 3) | 2 })
        }
        _ => None,
    }
}

/// The FPE_* code of an x87 (#MF) or SSE (#XM) exception: the first of the
/// raised and unmasked exceptions, in Linux's order (fpu__exception_code).
fn fp_exception_code(vector: u8, fp: &FpState) -> i32 {
    let u16_at = |o: usize| u16::from_le_bytes([fp.0[o], fp.0[o + 1]]) as u32;
    let err = if vector == vector::SIMD_FLOATING_POINT {
        // MXCSR: flags in bits 0-5, their masks in bits 7-12.
        let mxcsr = u32::from_le_bytes(fp.0[24..28].try_into().expect("4 bytes"));
        !(mxcsr >> 7) & mxcsr & 0x3f
    } else {
        // Status word against the control word's masks (a stack fault
        // comes with the invalid-operation flag).
        u16_at(2) & !u16_at(0) & 0x3f
    };
    if err & 0x01 != 0 {
        g::FPE_FLTINV as i32
    } else if err & 0x04 != 0 {
        g::FPE_FLTDIV as i32
    } else if err & 0x08 != 0 {
        g::FPE_FLTOVF as i32
    } else if err & 0x12 != 0 {
        g::FPE_FLTUND as i32
    } else if err & 0x20 != 0 {
        g::FPE_FLTRES as i32
    } else {
        0
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
