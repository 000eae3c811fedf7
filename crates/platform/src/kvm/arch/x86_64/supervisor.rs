//! The supervisor area: the part of every address space above the
//! application, shared by all of them. It holds the entry code, the IDT, the
//! MMIO pages used to leave the guest, and per-vCPU GDT, TSS and stacks.

use std::sync::Mutex;

use memory::{Frame, MemoryFile};

use super::pagetable::{self, entry};
use crate::PlatformError;

/// Start of the supervisor area: the last 512 GiB slot of the address space
/// (PML4 index 511), far above anything an application can map.
pub const BASE: u64 = 0xffff_ff80_0000_0000;
/// PML4 index of [`BASE`].
pub const PML4_INDEX: usize = 511;

/// Entry code callable from user mode (the PVM syscall path).
pub const USER_CODE: u64 = BASE;
/// Ring-0 entry code.
pub const KERNEL_CODE: u64 = BASE + 0x1000;
/// The interrupt descriptor table, shared by every vCPU.
pub const IDT: u64 = BASE + 0x1_0000;
/// Stores here are syscalls made at CPL 3.
pub const SYSCALL_MMIO: u64 = BASE + 0x2_0000;
/// Stores here are exceptions (and the exit of the CPL-0 syscall path's
/// frame is below).
pub const EXCEPTION_MMIO: u64 = BASE + 0x2_1000;
/// Stores here are syscalls that arrived at CPL 0.
pub const KERNEL_SYSCALL_MMIO: u64 = BASE + 0x2_2000;
/// Offsets of the MMIO pages from the platform's MMIO base address.
pub const SYSCALL_MMIO_OFFSET: u64 = 0;
pub const EXCEPTION_MMIO_OFFSET: u64 = 0x1000;
pub const KERNEL_SYSCALL_MMIO_OFFSET: u64 = 0x2000;

/// Per-vCPU areas start here, one every [`VCPU_STRIDE`] bytes.
const VCPU_AREAS: u64 = BASE + 0x10_0000;
const VCPU_STRIDE: u64 = 0x8000;
/// Most vCPUs the supervisor area has room for.
pub const MAX_VCPUS: u32 = 1024;

// Layout of one vCPU area (offsets from its start). Unmapped gaps are guard
// pages.
const PERCPU_PAGE: u64 = 0x0000;
const GDT_OFFSET: u64 = 0x000;
const TSS_OFFSET: u64 = 0x100;
const PERCPU_DATA_OFFSET: u64 = 0x200;
const STACK_PAGES: [u64; 2] = [0x2000, 0x3000];
const STACK_TOP: u64 = 0x4000;
const IST_PAGE: u64 = 0x5000;
const IST_TOP: u64 = 0x6000;

/// Offsets in the per-vCPU data block that KERNEL_GS_BASE points at.
pub const PERCPU_STACK_TOP: u64 = 0;
pub const PERCPU_SCRATCH: u64 = 8;

/// Segment selectors, laid out as Linux does so that `sysret` and PVM agree
/// with the host about which selectors are user code and data.
pub const KERNEL_CS: u16 = 0x10;
pub const KERNEL_DS: u16 = 0x18;
pub const USER32_CS: u16 = 0x23;
pub const USER_DS: u16 = 0x2b;
pub const USER_CS: u16 = 0x33;
pub const TSS_SELECTOR: u16 = 0x40;
/// Number of GDT entries (the TSS descriptor takes two).
pub const GDT_ENTRIES: u16 = 10;

/// Words of an iretq frame: rip, cs, rflags, rsp, ss.
pub const IRET_FRAME_WORDS: usize = 5;

/// Whether the CPU pushes an error code for exception `vector`.
pub fn has_error_code(vector: u64) -> bool {
    matches!(vector, 8 | 10..=14 | 17 | 21 | 29 | 30)
}

core::arch::global_asm!(
    include_str!("entry.S"),
    SYSCALL_MMIO = const SYSCALL_MMIO,
    EXCEPTION_MMIO = const EXCEPTION_MMIO,
    KERNEL_SYSCALL_MMIO = const KERNEL_SYSCALL_MMIO,
    PERCPU_SCRATCH = const PERCPU_SCRATCH,
    PERCPU_STACK_TOP = const PERCPU_STACK_TOP,
    USER_DS = const USER_DS,
    USER_CS = const USER_CS,
    options(att_syntax)
);

unsafe extern "C" {
    safe static cordon_guest_user_page: u8;
    safe static cordon_guest_syscall_user: u8;
    safe static cordon_guest_syscall_user_done: u8;
    safe static cordon_guest_probe: u8;
    safe static cordon_guest_kernel_page: u8;
    safe static cordon_guest_vectors: u8;
    safe static cordon_guest_return: u8;
    safe static cordon_guest_syscall_kernel: u8;
    safe static cordon_guest_kernel_end: u8;
}

fn offset_in(sym: &u8, page: &u8) -> u64 {
    (sym as *const u8 as u64) - (page as *const u8 as u64)
}

/// Guest addresses of the entry points.
pub fn syscall_user_entry() -> u64 {
    USER_CODE + offset_in(&cordon_guest_syscall_user, &cordon_guest_user_page)
}
/// Where a genuine CPL-3 syscall exit leaves the instruction pointer.
pub fn syscall_user_done() -> u64 {
    USER_CODE + offset_in(&cordon_guest_syscall_user_done, &cordon_guest_user_page)
}
pub fn probe_entry() -> u64 {
    USER_CODE + offset_in(&cordon_guest_probe, &cordon_guest_user_page)
}
pub fn syscall_kernel_entry() -> u64 {
    KERNEL_CODE + offset_in(&cordon_guest_syscall_kernel, &cordon_guest_kernel_page)
}
/// Resuming here unwinds an exit frame and returns to user mode.
pub fn return_entry() -> u64 {
    KERNEL_CODE + offset_in(&cordon_guest_return, &cordon_guest_kernel_page)
}
fn vector_entry(v: u64) -> u64 {
    KERNEL_CODE + offset_in(&cordon_guest_vectors, &cordon_guest_kernel_page) + 16 * v
}

fn code_bytes(start: &u8, end: &u8) -> &'static [u8] {
    let len = (end as *const u8 as usize) - (start as *const u8 as usize);
    // SAFETY: both symbols delimit one contiguous block of the binary's
    // read-only data emitted by the global_asm above; it lives for 'static.
    unsafe { std::slice::from_raw_parts(start as *const u8, len) }
}

/// A GDT descriptor for a flat segment.
const fn segment_descriptor(access: u64, flags: u64) -> u64 {
    0xffff | (access << 40) | (0xf << 48) | (flags << 52)
}

/// An IDT interrupt gate.
fn gate(handler: u64, dpl: u64, ist: u64) -> [u64; 2] {
    let low = (handler & 0xffff)
        | ((KERNEL_CS as u64) << 16)
        | (ist << 32)
        | ((0x8e | (dpl << 5)) << 40)
        | (((handler >> 16) & 0xffff) << 48);
    [low, handler >> 32]
}

/// The fixed addresses of one vCPU's part of the supervisor area.
#[derive(Clone, Copy, Debug)]
pub struct VcpuArea {
    pub gdt: u64,
    pub tss: u64,
    /// KERNEL_GS_BASE.
    pub percpu_data: u64,
    /// Top of the kernel stack, where exit frames are built.
    pub stack_top: u64,
    /// The frame holding the top page of the kernel stack, so the host can
    /// read and write exit frames without a page walk.
    pub stack_top_frame: Frame,
}

impl VcpuArea {
    /// Guest address of the exit frame an exception from user mode leaves
    /// (the CPU's iretq frame, below the error code if the vector has one);
    /// also where the host writes the frame to return to user mode with.
    pub fn frame_base(&self, error_code: bool) -> u64 {
        self.stack_top - (IRET_FRAME_WORDS as u64 + error_code as u64) * 8
    }
    /// Memory-file offset of the stack word at guest address `addr`, which
    /// must lie in the top page of the kernel stack.
    pub fn stack_word_offset(&self, addr: u64) -> u64 {
        debug_assert!(addr < self.stack_top && addr >= self.stack_top - 4096);
        self.stack_top_frame.offset() + (addr & 0xfff)
    }
}

/// The shared supervisor page tables and the frames they map.
pub struct Supervisor {
    /// The PDPT every address space's PML4 slot 511 points at.
    pub pdpt: Frame,
    pd: Frame,
    /// Page tables under `pd`, by PD index, created as vCPU areas need them.
    tables: Mutex<Vec<Option<Frame>>>,
    /// Every frame owned by the supervisor area.
    frames: Mutex<Vec<Frame>>,
}

impl Supervisor {
    /// Builds the shared part of the supervisor area. `mmio_base` is a
    /// guest-physical address with no memory behind it.
    pub fn new(mem: &MemoryFile, mmio_base: u64) -> Result<Self, PlatformError> {
        let pdpt = mem.allocate()?;
        let pd = mem.allocate()?;
        let sup = Supervisor { pdpt, pd, tables: Mutex::new(vec![None; 512]), frames: Mutex::new(vec![pdpt, pd]) };
        mem.write_u64(pdpt.offset(), pd.offset() | entry::TABLE);

        let user = code_bytes(&cordon_guest_user_page, &cordon_guest_kernel_page);
        let kernel = code_bytes(&cordon_guest_kernel_page, &cordon_guest_kernel_end);
        assert!(user.len() <= 4096 && kernel.len() <= 4096, "entry code outgrew its pages");
        let user_frame = sup.new_page(mem, USER_CODE, entry::USER_CODE)?;
        write_bytes(mem, user_frame, user);
        let kernel_frame = sup.new_page(mem, KERNEL_CODE, entry::KERNEL_CODE)?;
        write_bytes(mem, kernel_frame, kernel);

        let idt = sup.new_page(mem, IDT, entry::KERNEL_RO)?;
        for v in 0..32u64 {
            // int3 and into must work from user mode; the double fault, NMI
            // and machine check get a known-good stack.
            let dpl = if v == 3 || v == 4 { 3 } else { 0 };
            let ist = if matches!(v, 2 | 8 | 18) { 1 } else { 0 };
            let g = gate(vector_entry(v), dpl, ist);
            mem.write_u64(idt.offset() + 16 * v, g[0]);
            mem.write_u64(idt.offset() + 16 * v + 8, g[1]);
        }

        sup.map_mmio(mem, SYSCALL_MMIO, mmio_base + SYSCALL_MMIO_OFFSET, entry::USER_MMIO)?;
        sup.map_mmio(mem, EXCEPTION_MMIO, mmio_base + EXCEPTION_MMIO_OFFSET, entry::KERNEL_MMIO)?;
        sup.map_mmio(mem, KERNEL_SYSCALL_MMIO, mmio_base + KERNEL_SYSCALL_MMIO_OFFSET, entry::KERNEL_MMIO)?;
        Ok(sup)
    }

    /// Frames of the supervisor area, for slot coverage checks.
    pub fn frames(&self) -> Vec<Frame> {
        self.frames.lock().unwrap().clone()
    }

    fn table_for(&self, mem: &MemoryFile, va: u64) -> Result<Frame, PlatformError> {
        let pd_index = ((va - BASE) >> 21) as usize;
        assert!(pd_index < 512, "supervisor address {va:#x} outside the area");
        let mut tables = self.tables.lock().unwrap();
        if let Some(t) = tables[pd_index] {
            return Ok(t);
        }
        let t = mem.allocate()?;
        self.frames.lock().unwrap().push(t);
        mem.write_u64(self.pd.offset() + 8 * pd_index as u64, t.offset() | entry::TABLE);
        tables[pd_index] = Some(t);
        Ok(t)
    }

    fn set_pte(&self, mem: &MemoryFile, va: u64, value: u64) -> Result<(), PlatformError> {
        let t = self.table_for(mem, va)?;
        mem.write_u64(t.offset() + 8 * ((va >> 12) & 511), value);
        Ok(())
    }

    fn new_page(&self, mem: &MemoryFile, va: u64, flags: u64) -> Result<Frame, PlatformError> {
        let f = mem.allocate()?;
        self.frames.lock().unwrap().push(f);
        self.set_pte(mem, va, f.offset() | flags)?;
        Ok(f)
    }

    fn map_mmio(&self, mem: &MemoryFile, va: u64, gpa: u64, flags: u64) -> Result<(), PlatformError> {
        self.set_pte(mem, va, gpa | flags)
    }

    /// Sets up the area of vCPU `index`: GDT, TSS, kernel and IST stacks.
    pub fn add_vcpu(&self, mem: &MemoryFile, index: u32) -> Result<VcpuArea, PlatformError> {
        assert!(index < MAX_VCPUS);
        let base = VCPU_AREAS + index as u64 * VCPU_STRIDE;
        let percpu = self.new_page(mem, base + PERCPU_PAGE, entry::KERNEL_DATA)?;
        let mut stack_top_frame = percpu;
        for off in STACK_PAGES {
            stack_top_frame = self.new_page(mem, base + off, entry::KERNEL_DATA)?;
        }
        self.new_page(mem, base + IST_PAGE, entry::KERNEL_DATA)?;

        let gdt = [
            0,
            segment_descriptor(0x9b, 0xc), // 0x08: 32-bit kernel code
            segment_descriptor(0x9b, 0xa), // 0x10: 64-bit kernel code
            segment_descriptor(0x93, 0xc), // 0x18: kernel data
            segment_descriptor(0xfb, 0xc), // 0x23: 32-bit user code
            segment_descriptor(0xf3, 0xc), // 0x2b: user data
            segment_descriptor(0xfb, 0xa), // 0x33: 64-bit user code
            0,
        ];
        for (i, d) in gdt.iter().enumerate() {
            mem.write_u64(percpu.offset() + GDT_OFFSET + 8 * i as u64, *d);
        }
        let tss = base + PERCPU_PAGE + TSS_OFFSET;
        let limit = 0x67u64;
        let tss_low = limit | ((tss & 0xff_ffff) << 16) | (0x89 << 40) | (((tss >> 24) & 0xff) << 56);
        mem.write_u64(percpu.offset() + GDT_OFFSET + 8 * 8, tss_low);
        mem.write_u64(percpu.offset() + GDT_OFFSET + 8 * 9, tss >> 32);

        let stack_top = base + STACK_TOP;
        // TSS fields: rsp0 at 4, ist1 at 36, I/O map base at 102 (none).
        let tss_off = percpu.offset() + TSS_OFFSET;
        write_bytes_at(mem, percpu, TSS_OFFSET as usize + 4, &stack_top.to_le_bytes());
        write_bytes_at(mem, percpu, TSS_OFFSET as usize + 36, &(base + IST_TOP).to_le_bytes());
        write_bytes_at(mem, percpu, TSS_OFFSET as usize + 102, &104u16.to_le_bytes());
        debug_assert_eq!(tss_off % 8, 0);

        let data = percpu.offset() + PERCPU_DATA_OFFSET;
        mem.write_u64(data + PERCPU_STACK_TOP, stack_top);
        Ok(VcpuArea {
            gdt: base + PERCPU_PAGE + GDT_OFFSET,
            tss,
            percpu_data: base + PERCPU_PAGE + PERCPU_DATA_OFFSET,
            stack_top,
            stack_top_frame,
        })
    }
}

fn write_bytes(mem: &MemoryFile, f: Frame, bytes: &[u8]) {
    mem.write(f, 0, bytes);
}

fn write_bytes_at(mem: &MemoryFile, f: Frame, off: usize, bytes: &[u8]) {
    mem.write(f, off, bytes);
}

/// The PML4 entry every address space needs for the supervisor area.
pub fn pml4_entry(sup: &Supervisor) -> u64 {
    sup.pdpt.offset() | pagetable::entry::TABLE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_code_layout() {
        assert!(syscall_user_entry() >= USER_CODE && syscall_user_entry() < USER_CODE + 4096);
        assert!(syscall_user_done() > syscall_user_entry());
        assert_eq!(vector_entry(0) % 16, 0);
        assert!(return_entry() > vector_entry(31));
        assert!(syscall_kernel_entry() > return_entry());
        assert!(syscall_kernel_entry() < KERNEL_CODE + 4096);
    }

    #[test]
    fn gates_encode_handler_and_privilege() {
        let g = gate(0xffff_ff80_0000_1234, 3, 1);
        assert_eq!(g[0] & 0xffff, 0x1234);
        assert_eq!((g[0] >> 16) & 0xffff, KERNEL_CS as u64);
        assert_eq!((g[0] >> 32) & 7, 1);
        assert_eq!((g[0] >> 40) & 0xff, 0xee);
        assert_eq!(g[1], 0xffff_ff80);
    }

    #[test]
    fn vcpu_area_frames() {
        let mem = MemoryFile::new(16 << 20).unwrap();
        let sup = Supervisor::new(&mem, 1 << 32).unwrap();
        let a = sup.add_vcpu(&mem, 3).unwrap();
        assert_eq!(a.frame_base(false) + 40, a.stack_top);
        assert_eq!(a.frame_base(true) + 48, a.stack_top);
        assert_eq!(a.stack_word_offset(a.frame_base(false) + 32) % 4096, 4088, "ss is the last word of the stack page");
        assert_eq!(a.stack_word_offset(a.frame_base(false)) / 4096, a.stack_top_frame.number());
        assert!(has_error_code(14) && has_error_code(13) && has_error_code(8));
        assert!(!has_error_code(0) && !has_error_code(3) && !has_error_code(6) && !has_error_code(16));
        // The percpu data holds the stack top for the CPL-0 syscall path.
        let mut w = [0u8; 8];
        let percpu = sup.frames().into_iter().find(|f| {
            mem.read(*f, PERCPU_DATA_OFFSET as usize, &mut w);
            u64::from_le_bytes(w) == a.stack_top
        });
        assert!(percpu.is_some());
    }
}
