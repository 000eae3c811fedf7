//! Rewritten system call sites: the bytes a patched site and its cell hold,
//! shared by the sentry, which writes them, and the platforms, whose
//! trampolines run them.
//!
//! A site is the seven bytes `mov $nr, %eax; syscall` (`b8 imm32 0f 05`),
//! the form glibc's wrappers and Go's runtime use. A patched site holds
//! `jmp *abs32` (`ff 24 25 abs32`) through a slot of the trampoline table,
//! at a low address the sentry keeps in the address space, holding the
//! address of the site's cell:
//!
//! ```text
//!  +0  lea  r11, [rip - 7]       r11 = the cell
//!  +7  mov  rcx, [rip + RET]     rcx = the instruction after the site
//! +14  jmp  [rip + ENTRY]        the platform's trampoline
//! +20  syscall                   the fallback, with eax = nr
//! +22  jmp  [rip + RET]
//! +32  nr (u32)   +40  RET (u64)   +48  ENTRY (u64)
//! ```
//!
//! The trampoline gets rcx and r11, which a system call clobbers anyway,
//! and answers with the registers a `syscall` would leave (rcx the return
//! address, r11 the flags). When it cannot serve the call it jumps to the
//! fallback with eax = nr, an ordinary system call from the cell.
//!
//! Every slot's address has `06 00` as its two high bytes, which are the
//! last two bytes of the patched site: a thread that executed the old
//! `mov` and resumes at the old `syscall` after the patch meets `06`, an
//! invalid opcode, and the sentry takes that for the system call it was.

/// The table of slots, one 8-byte cell address per patched site.
pub const TABLE: u64 = 0x6_0000;
/// Slots in the table; its addresses keep `06 00` in bytes 2 and 3.
pub const SLOTS: u64 = 0x1_0000 / 8;
/// The cells, one per slot, in the same order.
pub const CELLS: u64 = TABLE + SLOTS * 8;
/// Bytes of one cell.
pub const CELL_SIZE: u64 = 64;
/// A page of answers a trampoline in the application's own memory reads
/// (the kvm platform's): [`ANSWERS_ON`], then a u64 answer and a u64 count
/// of calls answered per [`crate::FAST_PATH_SYSCALLS`] entry.
pub const ANSWERS: u64 = CELLS + SLOTS * CELL_SIZE;
/// Nonzero while the answers hold (a u32).
pub const ANSWERS_ON: u64 = 0;
pub const ANSWERS_VALUES: u64 = 8;
pub const ANSWERS_HITS: u64 = ANSWERS_VALUES + 8 * crate::FAST_PATH_SYSCALLS.len() as u64;
/// A page for the code of such a trampoline.
pub const CODE: u64 = ANSWERS + 0x1000;
/// The end of the table, cells, answers and code.
pub const END: u64 = CODE + 0x1000;

/// Offsets in a cell.
pub const CELL_FALLBACK: u64 = 20;
pub const CELL_NR: u64 = 32;
pub const CELL_RET: u64 = 40;
pub const CELL_ENTRY: u64 = 48;

/// Bytes of a site.
pub const SITE_LEN: usize = 7;
/// Opcode of `mov imm32, %eax`.
const MOV_EAX: u8 = 0xb8;
const SYSCALL: [u8; 2] = [0x0f, 0x05];
const JMP_ABS: [u8; 3] = [0xff, 0x24, 0x25];

/// The slot of cell `index`.
pub const fn slot(index: u64) -> u64 {
    TABLE + index * 8
}

/// Cell `index`'s address.
pub const fn cell(index: u64) -> u64 {
    CELLS + index * CELL_SIZE
}

/// True if `site` is `mov $nr, %eax; syscall`.
pub fn is_site(site: &[u8; SITE_LEN], nr: u64) -> bool {
    site[0] == MOV_EAX
        && u64::from(u32::from_le_bytes([site[1], site[2], site[3], site[4]])) == nr
        && site[5..] == SYSCALL
}

/// What a site holds once patched to go through slot `index`.
pub fn patched_site(index: u64) -> [u8; SITE_LEN] {
    let a = (slot(index) as u32).to_le_bytes();
    [JMP_ABS[0], JMP_ABS[1], JMP_ABS[2], a[0], a[1], a[2], a[3]]
}

/// The slot index a patched site jumps through, if `site` is one.
pub fn patched_index(site: &[u8; SITE_LEN]) -> Option<u64> {
    if site[..3] != JMP_ABS {
        return None;
    }
    let a = u64::from(u32::from_le_bytes([site[3], site[4], site[5], site[6]]));
    (TABLE..CELLS).contains(&a).then(|| (a - TABLE) / 8).filter(|_| a.is_multiple_of(8))
}

/// The cell for a site whose system call is `nr`, returning to `ret`,
/// served by the trampoline at `entry`.
pub fn cell_bytes(nr: u32, ret: u64, entry: u64) -> [u8; CELL_SIZE as usize] {
    let mut c = [0xcc_u8; CELL_SIZE as usize];
    // lea r11, [rip - 7]
    c[0..7].copy_from_slice(&[0x4c, 0x8d, 0x1d, 0xf9, 0xff, 0xff, 0xff]);
    // mov rcx, [rip + (CELL_RET - 14)]
    c[7..10].copy_from_slice(&[0x48, 0x8b, 0x0d]);
    c[10..14].copy_from_slice(&((CELL_RET - 14) as u32).to_le_bytes());
    // jmp [rip + (CELL_ENTRY - 20)]
    c[14..16].copy_from_slice(&[0xff, 0x25]);
    c[16..20].copy_from_slice(&((CELL_ENTRY - 20) as u32).to_le_bytes());
    // syscall; jmp [rip + (CELL_RET - 28)]
    c[20..22].copy_from_slice(&SYSCALL);
    c[22..24].copy_from_slice(&[0xff, 0x25]);
    c[24..28].copy_from_slice(&((CELL_RET - 28) as u32).to_le_bytes());
    c[CELL_NR as usize..CELL_NR as usize + 8].copy_from_slice(&u64::from(nr).to_le_bytes());
    c[CELL_RET as usize..CELL_RET as usize + 8].copy_from_slice(&ret.to_le_bytes());
    c[CELL_ENTRY as usize..CELL_ENTRY as usize + 8].copy_from_slice(&entry.to_le_bytes());
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_end_in_the_invalid_opcode() {
        for i in [0, 1, SLOTS / 2, SLOTS - 1] {
            let s = patched_site(i);
            assert_eq!(&s[5..], &[0x06, 0x00]);
            assert_eq!(patched_index(&s), Some(i));
        }
    }

    #[test]
    fn sites_are_recognised_by_their_number() {
        let s = [0xb8, 0x27, 0, 0, 0, 0x0f, 0x05];
        assert!(is_site(&s, 0x27));
        assert!(!is_site(&s, 0x28));
        assert!(!is_site(&[0xb8, 0x27, 0, 0, 0, 0x0f, 0x34], 0x27));
    }

    #[test]
    fn the_cell_decodes_as_documented() {
        use iced_x86::{Code, Decoder, DecoderOptions, Register};
        let at = cell(5);
        let c = cell_bytes(39, 0x1234_5678, 0x6fff_0000_0100);
        let mut d = Decoder::with_ip(64, &c[..28], at, DecoderOptions::NONE);
        let i = d.decode();
        assert_eq!((i.code(), i.op0_register(), i.memory_displacement64()), (Code::Lea_r64_m, Register::R11, at));
        let i = d.decode();
        assert_eq!((i.code(), i.op0_register()), (Code::Mov_r64_rm64, Register::RCX));
        assert_eq!(i.memory_displacement64(), at + CELL_RET);
        let i = d.decode();
        assert_eq!((i.code(), i.memory_displacement64()), (Code::Jmp_rm64, at + CELL_ENTRY));
        let i = d.decode();
        assert_eq!((i.code(), i.ip()), (Code::Syscall, at + CELL_FALLBACK));
        let i = d.decode();
        assert_eq!((i.code(), i.memory_displacement64()), (Code::Jmp_rm64, at + CELL_RET));
        assert_eq!(u64::from_le_bytes(c[40..48].try_into().unwrap()), 0x1234_5678);
        assert_eq!(u64::from_le_bytes(c[48..56].try_into().unwrap()), 0x6fff_0000_0100);
    }

    #[test]
    fn a_patched_site_is_one_jump_of_the_same_length() {
        use iced_x86::{Code, Decoder, DecoderOptions};
        let s = patched_site(3);
        let mut d = Decoder::with_ip(64, &s, 0x40_1000, DecoderOptions::NONE);
        let i = d.decode();
        assert_eq!((i.code(), i.len(), i.memory_displacement64()), (Code::Jmp_rm64, SITE_LEN, slot(3)));
    }
}
