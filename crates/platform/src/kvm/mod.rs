//! The kvm platform: application code runs in ring 3 of a KVM guest whose
//! page tables the sentry builds; syscalls and exceptions leave the guest by
//! a store to an MMIO page.
//!
//! Works on hardware VMX/SVM and on PVM (software shadow paging, guest at
//! hardware ring 3). Where the two differ, the platform finds out by trying:
//! whether `syscall` arrives at CPL 0 or stays at CPL 3 is measured at start
//! by running a probe.

mod address_space;
mod arch;
mod context;
mod guest_memory;
mod kick;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use kvm_bindings::{
    CpuId, KVM_MAX_CPUID_ENTRIES, KVM_VCPU_TSC_CTRL, KVM_VCPU_TSC_OFFSET, Msrs, kvm_device_attr, kvm_msr_entry,
    kvm_xcrs,
};
use kvm_ioctls::{Cap, Kvm, SyncReg, VmFd};
use memory::{Frame, MemoryFile};

pub use address_space::KvmAddressSpace;
use arch::x86_64::{cpu, supervisor};
pub use context::KvmContext;
use context::Vcpu;
use guest_memory::GuestMemory;

use crate::{AddressSpace, Context, Event, ExitCounts, Platform, PlatformError, PlatformStats, Registers};

/// Freed page-table frames wait here until a global flush has made sure KVM
/// keeps no shadow of them; only then can they hold anything else.
const QUARANTINE_FRAMES: usize = 1024;

/// Where `syscall` from user mode arrives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SyscallEntry {
    /// At CPL 3 (PVM): the entry code exits straight from user mode.
    UserMode,
    /// At CPL 0 (hardware virtualization): the entry code builds a frame.
    KernelMode,
}

pub(crate) struct Shared {
    vm: VmFd,
    pub(crate) mem: Arc<MemoryFile>,
    pub(crate) guest: GuestMemory,
    pub(crate) supervisor: supervisor::Supervisor,
    pub(crate) mmio_base: u64,
    syscall_entry: OnceLock<SyscallEntry>,
    cpuid: CpuId,
    xcr0: u64,
    max_vcpus: u32,
    pool: Mutex<Vec<Vcpu>>,
    next_vcpu: Mutex<u32>,
    quarantine: Mutex<Vec<Frame>>,
    table_frames: AtomicU64,
    vcpus_created: AtomicU64,
    vcpus_in_use: AtomicU64,
    retired_counts: Mutex<ExitCounts>,
    pub(crate) timing: AtomicBool,
    /// The vCPUs' TSC rate while every vCPU's TSC reads as the host's; 0
    /// once one did not (or before the first vCPU).
    tsc_khz: AtomicU64,
    /// Set once a vCPU's TSC was found not to match the host's.
    tsc_mismatch: AtomicBool,
}

impl Shared {
    pub(crate) fn alloc_table(&self) -> Result<Frame, PlatformError> {
        let f = self.mem.allocate()?;
        self.guest.ensure_covered(&self.vm, f)?;
        self.table_frames.fetch_add(1, Ordering::Relaxed);
        Ok(f)
    }

    pub(crate) fn release_table(&self, f: Frame) {
        let mut q = self.quarantine.lock().unwrap();
        q.push(f);
        if q.len() >= QUARANTINE_FRAMES {
            self.flush_quarantine_locked(&mut q);
        }
    }

    fn flush_quarantine_locked(&self, q: &mut Vec<Frame>) {
        if q.is_empty() {
            return;
        }
        self.guest.global_flush(&self.vm);
        for f in q.drain(..) {
            self.mem.dec_ref(f);
            self.table_frames.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Frees every quarantined page-table frame now.
    fn flush_quarantine(&self) {
        let mut q = self.quarantine.lock().unwrap();
        self.flush_quarantine_locked(&mut q);
        drop(q);
        self.mem.reclaim();
    }

    fn create_vcpu(&self, lstar: u64) -> Result<Vcpu, PlatformError> {
        let index = {
            let mut next = self.next_vcpu.lock().unwrap();
            if *next >= self.max_vcpus {
                return Err(PlatformError::NoCpu);
            }
            *next += 1;
            *next - 1
        };
        let area = self.supervisor.add_vcpu(&self.mem, index)?;
        for f in self.supervisor.frames() {
            self.guest.ensure_covered(&self.vm, f)?;
        }
        let fd = self.vm.create_vcpu(index as u64).map_err(|e| PlatformError::kvm("create vCPU", e))?;
        fd.set_cpuid2(&self.cpuid).map_err(|e| PlatformError::kvm("set CPUID", e))?;
        let mut xcrs = kvm_xcrs { nr_xcrs: 1, ..Default::default() };
        xcrs.xcrs[0].xcr = 0;
        xcrs.xcrs[0].value = self.xcr0;
        fd.set_xcrs(&xcrs).map_err(|e| PlatformError::kvm("set XCR0", e))?;
        self.align_tsc(&fd);
        let mut v = Vcpu::new(fd, area);
        v.set_lstar(lstar)?;
        v.fd.set_sync_valid_reg(SyncReg::Register);
        // Page faults need CR2; having KVM store the system registers on
        // every exit measured no dearer than not, and saves an ioctl per
        // fault.
        v.fd.set_sync_valid_reg(SyncReg::SystemRegister);
        self.vcpus_created.fetch_add(1, Ordering::Relaxed);
        Ok(v)
    }

    /// Makes a new vCPU's TSC read as the host's and checks that it does.
    /// KVM gives each vCPU a TSC offset of its own choosing (so that a
    /// guest's TSC starts near zero) unless told otherwise; with offset 0 on
    /// every vCPU the sentry can publish time parameters in terms of the
    /// host's TSC. PVM runs guests on the host's TSC already and has no
    /// offset control, which the check covers.
    fn align_tsc(&self, fd: &kvm_ioctls::VcpuFd) {
        let zero = 0u64;
        let attr = kvm_device_attr {
            group: KVM_VCPU_TSC_CTRL,
            attr: KVM_VCPU_TSC_OFFSET as u64,
            addr: &zero as *const u64 as u64,
            flags: 0,
        };
        // KVM_SET_DEVICE_ATTR on a vCPU, which kvm-ioctls offers only on
        // aarch64. Refused where there is no offset control; the check below
        // decides either way.
        const KVM_SET_DEVICE_ATTR: rustix::ioctl::Opcode = rustix::ioctl::opcode::write::<kvm_device_attr>(0xae, 0xe1);
        // SAFETY: the descriptor is the live vCPU fd borrowed for this call;
        // the opcode's argument is a kvm_device_attr, passed by pointer, whose
        // addr points at a live u64 for the call's duration.
        let _ = unsafe {
            let vcpu = std::os::fd::BorrowedFd::borrow_raw(std::os::fd::AsRawFd::as_raw_fd(fd));
            rustix::ioctl::ioctl(vcpu, rustix::ioctl::Setter::<KVM_SET_DEVICE_ATTR, _>::new(attr))
        };
        let mut msrs =
            Msrs::from_entries(&[kvm_msr_entry { index: cpu::MSR_IA32_TSC, ..Default::default() }]).expect("one entry");
        let before = crate::arch::read_tsc();
        let read = fd.get_msrs(&mut msrs);
        let after = crate::arch::read_tsc();
        let guest = msrs.as_slice()[0].data;
        let khz = fd.get_tsc_khz().map(u64::from).unwrap_or(0);
        let matches = read == Ok(1) && (before..=after).contains(&guest) && khz > 0;
        if !matches {
            self.tsc_mismatch.store(true, Ordering::Relaxed);
            tracing::info!("vCPU TSC does not follow the host's (guest {guest}, host {before}..{after}, {khz} kHz)");
            return;
        }
        if self.tsc_khz.swap(khz, Ordering::Relaxed) != khz && self.vcpus_created.load(Ordering::Relaxed) > 0 {
            // Two vCPUs disagree on the rate.
            self.tsc_mismatch.store(true, Ordering::Relaxed);
        }
    }

    fn take_vcpu(&self) -> Result<Vcpu, PlatformError> {
        let pooled = self.pool.lock().unwrap().pop();
        let v = match pooled {
            Some(mut v) => {
                v.recycle()?;
                v
            }
            None => {
                let entry = *self.syscall_entry.get().expect("detected at start-up");
                self.create_vcpu(context::lstar_for(entry))?
            }
        };
        self.vcpus_in_use.fetch_add(1, Ordering::Relaxed);
        Ok(v)
    }

    pub(crate) fn return_vcpu(&self, v: Vcpu) {
        self.retired_counts.lock().unwrap().add(&v.counts());
        self.vcpus_in_use.fetch_sub(1, Ordering::Relaxed);
        self.pool.lock().unwrap().push(v);
    }
}

/// The kvm platform.
pub struct KvmPlatform {
    shared: Arc<Shared>,
}

fn open_kvm() -> Result<Kvm, PlatformError> {
    match Kvm::new() {
        Ok(k) => Ok(k),
        Err(e) => Err(PlatformError::Unavailable(match e.errno() {
            libc::ENOENT => {
                "/dev/kvm does not exist: this host offers no KVM (load kvm_intel, kvm_amd or kvm_pvm)".into()
            }
            libc::EACCES | libc::EPERM => "/dev/kvm: permission denied (run as a member of the kvm group)".into(),
            n => format!("/dev/kvm cannot be opened: {}", std::io::Error::from_raw_os_error(n)),
        })),
    }
}

impl KvmPlatform {
    /// Opens KVM and builds a VM whose guest-physical memory is `mem`.
    pub fn new(mem: Arc<MemoryFile>) -> Result<Self, PlatformError> {
        let kvm = open_kvm()?;
        for (cap, name) in [
            (Cap::SyncRegs, "KVM_CAP_SYNC_REGS"),
            (Cap::ImmediateExit, "KVM_CAP_IMMEDIATE_EXIT"),
            (Cap::Xsave, "KVM_CAP_XSAVE"),
            (Cap::Xcrs, "KVM_CAP_XCRS"),
        ] {
            if !kvm.check_extension(cap) {
                return Err(PlatformError::Unavailable(format!("/dev/kvm lacks {name}")));
            }
        }
        let vm = kvm.create_vm().map_err(|e| {
            PlatformError::Unavailable(format!(
                "/dev/kvm cannot create a VM: {}",
                std::io::Error::from_raw_os_error(e.errno())
            ))
        })?;
        let xsave_size = vm.check_extension_int(Cap::Xsave2);
        if xsave_size > 4096 {
            return Err(PlatformError::Unavailable(format!(
                "guest XSAVE state of {xsave_size} bytes is not supported"
            )));
        }
        let supported =
            kvm.get_supported_cpuid(KVM_MAX_CPUID_ENTRIES).map_err(|e| PlatformError::kvm("get supported CPUID", e))?;
        let xcr0 = cpu::guest_xcr0(&supported);
        let phys_bits = cpu::physical_address_bits(&supported);
        let cpuid = cpu::guest_cpuid(supported);
        const GIB: u64 = 1 << 30;
        let mmio_base = mem.capacity().div_ceil(GIB) * GIB;
        if mmio_base + GIB > (1u64 << phys_bits) {
            return Err(PlatformError::Unavailable(format!(
                "sandbox memory of {} bytes does not fit the guest's {phys_bits}-bit physical address space",
                mem.capacity()
            )));
        }
        let guest = GuestMemory::new(&vm, &mem, mmio_base + (1 << 20))?;
        mem.add_invalidator(guest.invalidator());
        let supervisor = supervisor::Supervisor::new(&mem, mmio_base)?;
        kick::install_handler();
        let max_vcpus = (kvm.get_max_vcpus() as u32).min(supervisor::MAX_VCPUS);
        let shared = Arc::new(Shared {
            vm,
            mem,
            guest,
            supervisor,
            mmio_base,
            syscall_entry: OnceLock::new(),
            cpuid,
            xcr0,
            max_vcpus,
            pool: Mutex::new(Vec::new()),
            next_vcpu: Mutex::new(0),
            quarantine: Mutex::new(Vec::new()),
            table_frames: AtomicU64::new(0),
            vcpus_created: AtomicU64::new(0),
            vcpus_in_use: AtomicU64::new(0),
            retired_counts: Mutex::new(ExitCounts::default()),
            timing: AtomicBool::new(false),
            tsc_khz: AtomicU64::new(0),
            tsc_mismatch: AtomicBool::new(false),
        });
        let entry = detect_syscall_entry(&shared)?;
        shared.syscall_entry.set(entry).expect("set once");
        Ok(KvmPlatform { shared })
    }

    /// True if `syscall` stays at CPL 3 on this host (PVM).
    pub fn syscall_in_user_mode(&self) -> bool {
        self.shared.syscall_entry.get() == Some(&SyscallEntry::UserMode)
    }
}

/// Runs a `syscall` in a probe guest with LSTAR on a supervisor-only page.
/// Arriving at CPL 3 faults fetching the entry (PVM); arriving at CPL 0 runs
/// it and exits through the CPL-0 syscall page (hardware).
fn detect_syscall_entry(shared: &Arc<Shared>) -> Result<SyscallEntry, PlatformError> {
    let vcpu = shared.create_vcpu(supervisor::syscall_kernel_entry())?;
    let space = KvmAddressSpace::new(shared.clone())?;
    let mut ctx = KvmContext::new(shared.clone(), vcpu);
    let mut regs = Registers::for_entry(supervisor::probe_entry(), 0);
    let event = ctx
        .switch(&space, &mut regs)
        .map_err(|e| PlatformError::Unavailable(format!("KVM guest did not start: {e}")))?;
    let entry = match event {
        Event::Fault(f) if f.addr == supervisor::syscall_kernel_entry() && f.access.execute => SyscallEntry::UserMode,
        Event::Syscall => SyscallEntry::KernelMode,
        other => return Err(PlatformError::Unavailable(format!("KVM guest probe ended unexpectedly: {other:?}"))),
    };
    let v = ctx.into_vcpu();
    v.set_lstar(context::lstar_for(entry))?;
    shared.pool.lock().unwrap().push(v);
    Ok(entry)
}

impl Platform for KvmPlatform {
    fn name(&self) -> &'static str {
        "kvm"
    }

    fn new_address_space(&self) -> Result<Arc<dyn AddressSpace>, PlatformError> {
        Ok(Arc::new(KvmAddressSpace::new(self.shared.clone())?))
    }

    fn new_context(&self) -> Result<Box<dyn Context>, PlatformError> {
        let v = self.shared.take_vcpu()?;
        Ok(Box::new(KvmContext::new(self.shared.clone(), v)))
    }

    fn stats(&self) -> PlatformStats {
        let s = &self.shared;
        PlatformStats {
            vcpus: s.vcpus_created.load(Ordering::Relaxed),
            vcpus_in_use: s.vcpus_in_use.load(Ordering::Relaxed),
            table_frames: s.table_frames.load(Ordering::Relaxed),
            global_flushes: s.guest.global_flushes.load(Ordering::Relaxed),
            frame_invalidations: s.guest.invalidations.load(Ordering::Relaxed),
            supervisor_frames: s.supervisor.frames().len() as u64,
        }
    }

    fn exit_counts(&self) -> ExitCounts {
        // Contexts running now report when they finish; the pool holds the
        // finished ones.
        *self.shared.retired_counts.lock().unwrap()
    }

    fn enable_timing(&self) {
        self.shared.timing.store(true, Ordering::Relaxed);
    }

    fn release_cached(&self) {
        self.shared.flush_quarantine();
    }

    fn guest_tsc_khz(&self) -> Option<u64> {
        let s = &self.shared;
        let khz = s.tsc_khz.load(Ordering::Relaxed);
        (khz > 0 && !s.tsc_mismatch.load(Ordering::Relaxed)).then_some(khz)
    }
}
