//! The trampoline of rewritten system call sites on the kvm platform: code
//! the sentry places at [`rewrite::CODE`] in the application's own address
//! space, which the guest runs at ring 3 like the application. It answers
//! the calls whose answers are the same for every thread of a process
//! from the page at [`rewrite::ANSWERS`] the sentry keeps, with no exit;
//! any other call, or any call while the page is off, takes the cell's
//! plain `syscall`. An exit or a signal in the middle changes nothing: the
//! code keeps its state in registers until its last jump.

use std::arch::global_asm;

use crate::FAST_PATH_SYSCALLS;
use crate::arch::rewrite;

/// The calls the trampoline answers: the fast paths but gettid, whose
/// answer differs per thread while the page is per address space.
pub const ANSWERED: [u64; 6] = [
    FAST_PATH_SYSCALLS[0],
    FAST_PATH_SYSCALLS[2],
    FAST_PATH_SYSCALLS[3],
    FAST_PATH_SYSCALLS[4],
    FAST_PATH_SYSCALLS[5],
    FAST_PATH_SYSCALLS[6],
];

global_asm!(
    ".pushsection .rodata.cordon_kvm_trampoline,\"a\",@progbits",
    ".globl cordon_kvm_trampoline_start",
    "cordon_kvm_trampoline_start:",
    // r11 = the site's cell, rcx = its return address.
    "mov eax, dword ptr [r11 + {cell_nr}]",
    "cmp dword ptr [{on}], 0",
    "je 70f",
    "cmp eax, {nr0}",
    "je 10f",
    "cmp eax, {nr2}",
    "je 12f",
    "cmp eax, {nr3}",
    "je 13f",
    "cmp eax, {nr4}",
    "je 14f",
    "cmp eax, {nr5}",
    "je 15f",
    "cmp eax, {nr6}",
    "je 16f",
    "70:",
    "add r11, {cell_fallback}",
    "jmp r11",
    "10:",
    "xor r11d, r11d",
    "jmp 9f",
    "12:",
    "mov r11d, 2",
    "jmp 9f",
    "13:",
    "mov r11d, 3",
    "jmp 9f",
    "14:",
    "mov r11d, 4",
    "jmp 9f",
    "15:",
    "mov r11d, 5",
    "jmp 9f",
    "16:",
    "mov r11d, 6",
    // The answer, a count, r11 = the flags as a system call leaves them
    // (pushed below the red zone), and back.
    "9:",
    "mov rax, qword ptr [{values} + r11 * 8]",
    "lock inc qword ptr [{hits} + r11 * 8]",
    "lea rsp, [rsp - 128]",
    "pushfq",
    "pop r11",
    "lea rsp, [rsp + 128]",
    "jmp rcx",
    ".globl cordon_kvm_trampoline_end",
    "cordon_kvm_trampoline_end:",
    ".popsection",
    cell_nr = const rewrite::CELL_NR,
    cell_fallback = const rewrite::CELL_FALLBACK,
    on = const rewrite::ANSWERS + rewrite::ANSWERS_ON,
    values = const rewrite::ANSWERS + rewrite::ANSWERS_VALUES,
    hits = const rewrite::ANSWERS + rewrite::ANSWERS_HITS,
    nr0 = const FAST_PATH_SYSCALLS[0],
    nr2 = const FAST_PATH_SYSCALLS[2],
    nr3 = const FAST_PATH_SYSCALLS[3],
    nr4 = const FAST_PATH_SYSCALLS[4],
    nr5 = const FAST_PATH_SYSCALLS[5],
    nr6 = const FAST_PATH_SYSCALLS[6],
);

unsafe extern "C" {
    static cordon_kvm_trampoline_start: u8;
    static cordon_kvm_trampoline_end: u8;
}

/// The trampoline's code, to be placed at [`rewrite::CODE`].
pub fn code() -> &'static [u8] {
    let start = &raw const cordon_kvm_trampoline_start;
    let end = &raw const cordon_kvm_trampoline_end;
    // SAFETY: both symbols delimit one read-only section of this binary,
    // mapped for the life of the process.
    unsafe { std::slice::from_raw_parts(start, end as usize - start as usize) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_code_fits_its_page_and_addresses_the_answers_absolutely() {
        use iced_x86::{Decoder, DecoderOptions, Mnemonic};
        let c = code();
        assert!(!c.is_empty() && c.len() < 0x1000);
        let mut d = Decoder::with_ip(64, c, rewrite::CODE, DecoderOptions::NONE);
        let mut absolute = 0;
        for i in &mut d {
            assert_ne!(i.mnemonic(), Mnemonic::INVALID);
            assert!(!i.is_ip_rel_memory_operand(), "{i:?} is relative to rip");
            if i.memory_displacement64() >= rewrite::ANSWERS && i.memory_displacement64() < rewrite::CODE {
                absolute += 1;
            }
        }
        assert_eq!(absolute, 3, "on, value and count");
    }
}
