//! x86_64 vCPU state: control registers, segments, MSRs, CPUID.

use kvm_bindings::{CpuId, kvm_msr_entry, kvm_segment, kvm_sregs};

use super::supervisor::{self, VcpuArea};

pub const MSR_IA32_TSC: u32 = 0x10;
pub const MSR_TSC_AUX: u32 = 0xc000_0103;
pub const MSR_STAR: u32 = 0xc000_0081;
pub const MSR_LSTAR: u32 = 0xc000_0082;
pub const MSR_SFMASK: u32 = 0xc000_0084;
pub const MSR_FS_BASE: u32 = 0xc000_0100;
pub const MSR_GS_BASE: u32 = 0xc000_0101;
pub const MSR_KERNEL_GS_BASE: u32 = 0xc000_0102;

/// PE MP ET NE WP AM PG.
const CR0: u64 = 0x8005_0033;
/// PAE OSFXSR OSXMMEXCPT OSXSAVE.
const CR4: u64 = (1 << 5) | (1 << 9) | (1 << 10) | (1 << 18);
/// SCE LME LMA NXE.
const EFER: u64 = 0xd01;
/// Flags cleared on `syscall`: TF DF IF IOPL AC NT, as Linux does.
const SFMASK: u64 = 0x4_7700;

/// XSAVE components user code may use: x87, SSE, AVX and AVX-512. AMX needs
/// per-process permission from the host and is left out.
const XCR0_USABLE: u64 = 0x1 | 0x2 | 0x4 | 0x20 | 0x40 | 0x80;

fn segment(selector: u16, type_: u8, dpl: u8, long: bool, base: u64) -> kvm_segment {
    kvm_segment {
        base,
        limit: 0xffff_ffff,
        selector,
        type_,
        present: 1,
        dpl,
        db: u8::from(!long),
        s: 1,
        l: u8::from(long),
        g: 1,
        avl: 0,
        unusable: 0,
        padding: 0,
    }
}

/// Special registers for a vCPU about to run ring-0 entry code that will
/// `iretq` into user mode in the address space rooted at `cr3`.
pub fn kernel_sregs(mut s: kvm_sregs, area: &VcpuArea, cr3: u64, fs_base: u64, gs_base: u64) -> kvm_sregs {
    s.cs = segment(supervisor::KERNEL_CS, 11, 0, true, 0);
    s.ss = segment(supervisor::KERNEL_DS, 3, 0, false, 0);
    let user_data = segment(supervisor::USER_DS, 3, 3, false, 0);
    s.ds = user_data;
    s.es = user_data;
    s.fs = segment(supervisor::USER_DS, 3, 3, false, fs_base);
    s.gs = segment(supervisor::USER_DS, 3, 3, false, gs_base);
    s.tr = kvm_segment {
        base: area.tss,
        limit: 0x67,
        selector: supervisor::TSS_SELECTOR,
        type_: 11,
        present: 1,
        s: 0,
        ..Default::default()
    };
    s.ldt = kvm_segment { unusable: 1, ..Default::default() };
    s.gdt.base = area.gdt;
    s.gdt.limit = supervisor::GDT_ENTRIES * 8 - 1;
    s.idt.base = supervisor::IDT;
    s.idt.limit = 32 * 16 - 1;
    s.cr0 = CR0;
    s.cr3 = cr3;
    s.cr4 = CR4;
    s.efer = EFER;
    s
}

/// MSRs for the syscall entry and the per-vCPU data.
pub fn syscall_msrs(lstar: u64, area: &VcpuArea) -> [kvm_msr_entry; 4] {
    let star = ((supervisor::USER32_CS as u64) << 48) | ((supervisor::KERNEL_CS as u64) << 32);
    [
        kvm_msr_entry { index: MSR_STAR, data: star, ..Default::default() },
        kvm_msr_entry { index: MSR_LSTAR, data: lstar, ..Default::default() },
        kvm_msr_entry { index: MSR_SFMASK, data: SFMASK, ..Default::default() },
        kvm_msr_entry { index: MSR_KERNEL_GS_BASE, data: area.percpu_data, ..Default::default() },
    ]
}

/// The CPUID the guest sees: what KVM supports, minus what the sandbox does
/// not provide.
pub fn guest_cpuid(mut cpuid: CpuId) -> CpuId {
    for e in cpuid.as_mut_slice() {
        if e.function == 7 && e.index == 0 {
            // FSGSBASE: the segment bases are the sentry's to set
            // (arch_prctl), so CR4.FSGSBASE stays clear.
            e.ebx &= !1;
        }
    }
    cpuid
}

/// The XCR0 to give the guest, from the supported CPUID leaf 0xD.
pub fn guest_xcr0(cpuid: &CpuId) -> u64 {
    let supported = cpuid
        .as_slice()
        .iter()
        .find(|e| e.function == 0xd && e.index == 0)
        .map(|e| e.eax as u64 | ((e.edx as u64) << 32))
        .unwrap_or(0x3);
    (supported & XCR0_USABLE) | 0x1
}

/// Guest physical address width, from CPUID leaf 0x8000_0008.
pub fn physical_address_bits(cpuid: &CpuId) -> u32 {
    cpuid.as_slice().iter().find(|e| e.function == 0x8000_0008).map(|e| e.eax & 0xff).filter(|&b| b >= 36).unwrap_or(36)
}
