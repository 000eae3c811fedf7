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

use std::collections::VecDeque;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use kvm_bindings::{
    CpuId, KVM_MAX_CPUID_ENTRIES, KVM_VCPU_TSC_CTRL, KVM_VCPU_TSC_OFFSET, Msrs, kvm_device_attr, kvm_msr_entry,
    kvm_xcrs,
};
use kvm_ioctls::{Cap, Kvm, SyncReg, VmFd};
use memory::{Frame, MemoryFile};

pub use address_space::KvmAddressSpace;
use arch::x86_64::{cpu, supervisor};
pub use context::KvmContext;
use context::{Hold, Vcpu};
use guest_memory::GuestMemory;

use crate::{AddressSpace, Context, Event, ExitCounts, FpState, Platform, PlatformError, PlatformStats, Registers};

/// Freed page-table frames wait here until a global flush has made sure KVM
/// keeps no shadow of them; only then can they hold anything else.
const QUARANTINE_FRAMES: usize = 1024;

/// How long a task waits its turn for a vCPU before it asks a task running
/// application code to give one up: the time slice of tasks when more want
/// to run than there are vCPUs.
const YIELD_AFTER: Duration = Duration::from_millis(10);

/// vCPUs per host CPU in the default pool: as gVisor does, allow some
/// overcommit so that threads waking briefly (a runtime's monitor thread,
/// say) rarely wait for one.
const VCPUS_PER_HOST_CPU: u32 = 3;

/// The vCPUs of the VM and who holds them.
struct Pool {
    free: Vec<Vcpu>,
    /// vCPUs created so far, held or free.
    created: u32,
    /// Most vCPUs the sandbox uses.
    limit: u32,
    /// Contexts holding a vCPU, in the order they got it.
    holders: Vec<Arc<Hold>>,
    /// Tasks waiting for a vCPU, in the order they asked.
    waiting: VecDeque<Arc<Waiter>>,
    /// The holder asked to yield next, round robin.
    yield_cursor: usize,
}

/// A task waiting for a vCPU; a released one is handed over in `vcpu`.
struct Waiter {
    thread: std::thread::Thread,
    hold: Arc<Hold>,
    vcpu: Mutex<Option<Vcpu>>,
}

impl Waiter {
    fn take(&self) -> Option<Vcpu> {
        self.vcpu.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

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
    pool: Mutex<Pool>,
    /// Tasks in `Pool::waiting`, read without the lock on every exit.
    waiting: AtomicU64,
    /// Counts exits from the guest, to order holders by their last one.
    pub(crate) exit_sequence: AtomicU64,
    next_vcpu: Mutex<u32>,
    /// The CPUs the sandbox says it has: vCPU `i` calls itself CPU
    /// `i % numbered_cpus` (the pool may hold more vCPUs than that).
    numbered_cpus: AtomicU32,
    quarantine: Mutex<Vec<Frame>>,
    table_frames: AtomicU64,
    vcpus_created: AtomicU64,
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
        let number = index % self.numbered_cpus.load(Ordering::Relaxed).max(1);
        let mut v = Vcpu::new(fd, area);
        v.set_lstar(lstar)?;
        if crate::arch::has_rdtscp() {
            // rdtscp then tells application code which vCPU runs it, as
            // Linux's TSC_AUX tells which CPU: the vDSO's getcpu reads it.
            // (KVM may leave RDTSCP out of the CPUID it offers, as under
            // PVM, where guest code runs it all the same.)
            let aux = Msrs::from_entries(&[kvm_msr_entry {
                index: cpu::MSR_TSC_AUX,
                data: number as u64,
                ..Default::default()
            }])
            .expect("one entry");
            match v.fd.set_msrs(&aux) {
                Ok(1) => {}
                Ok(_) => return Err(PlatformError::Unavailable("KVM refused TSC_AUX".into())),
                Err(e) => return Err(PlatformError::kvm("set TSC_AUX", e)),
            }
        }
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

    fn lock_pool(&self) -> std::sync::MutexGuard<'_, Pool> {
        self.pool.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// True if a task is waiting for a vCPU.
    pub(crate) fn vcpu_wanted(&self) -> bool {
        self.waiting.load(Ordering::Acquire) > 0
    }

    /// Called by a holder that has just left the guest while tasks wait: the
    /// first of them may now be able to take a vCPU from a holder that is
    /// not running application code.
    pub(crate) fn nudge_waiter(&self) {
        if let Some(w) = self.lock_pool().waiting.front() {
            w.thread.unpark();
        }
    }

    /// A vCPU for `hold`, which has none, loaded with `fp`: a free one, a
    /// new one while under the limit, or one taken from a holder that is not
    /// running application code, longest out of the guest first. Tasks that
    /// find none wait in line; the first asks a holder to yield every
    /// YIELD_AFTER, and a released vCPU goes straight to it.
    pub(crate) fn acquire_vcpu(&self, hold: &Arc<Hold>, fp: &FpState) -> Result<Vcpu, PlatformError> {
        let mut pool = self.lock_pool();
        if pool.waiting.is_empty() {
            match self.take_or_create(pool, hold)? {
                Ok(v) => return self.bind(hold, v, fp),
                Err(p) => pool = p,
            }
        }
        let me = Arc::new(Waiter { thread: std::thread::current(), hold: hold.clone(), vcpu: Mutex::new(None) });
        pool.waiting.push_back(me.clone());
        self.waiting.fetch_add(1, Ordering::AcqRel);
        drop(pool);
        let v = loop {
            if let Some(v) = me.take() {
                break v;
            }
            // Only the first in line watches the clock; the others sleep
            // until they are first or are handed a vCPU.
            let first = self.lock_pool().waiting.front().is_some_and(|w| Arc::ptr_eq(w, &me));
            let started = Instant::now();
            if first {
                std::thread::park_timeout(YIELD_AFTER);
            } else {
                std::thread::park();
            }
            if let Some(v) = me.take() {
                break v;
            }
            let mut pool = self.lock_pool();
            if !pool.waiting.front().is_some_and(|w| Arc::ptr_eq(w, &me)) {
                continue;
            }
            // Released vCPUs are handed to the first in line, so one is free
            // here only if that hand-over found no one; take it all the same.
            if let Some(v) = pool.free.pop().or_else(|| Self::steal(&mut pool)) {
                pool.waiting.pop_front();
                self.waiting.fetch_sub(1, Ordering::AcqRel);
                pool.holders.push(hold.clone());
                if let Some(next) = pool.waiting.front() {
                    next.thread.unpark();
                }
                break v;
            }
            if started.elapsed() >= YIELD_AFTER && !pool.holders.is_empty() {
                let i = pool.yield_cursor % pool.holders.len();
                pool.yield_cursor = pool.yield_cursor.wrapping_add(1);
                pool.holders[i].kick.request_yield();
            }
        };
        self.bind(hold, v, fp)
    }

    /// With no one waiting: a free vCPU, a new one, or a stolen one, entered
    /// in the holders; or the pool back if there is none.
    #[allow(clippy::type_complexity)]
    fn take_or_create<'a>(
        &'a self,
        mut pool: std::sync::MutexGuard<'a, Pool>,
        hold: &Arc<Hold>,
    ) -> Result<Result<Vcpu, std::sync::MutexGuard<'a, Pool>>, PlatformError> {
        let v = if let Some(v) = pool.free.pop() {
            v
        } else if pool.created < pool.limit {
            pool.created += 1;
            drop(pool);
            let entry = *self.syscall_entry.get().expect("detected at start-up");
            let created = self.create_vcpu(context::lstar_for(entry));
            pool = self.lock_pool();
            match created {
                Ok(v) => v,
                Err(e) => {
                    pool.created -= 1;
                    return Err(e);
                }
            }
        } else if let Some(v) = Self::steal(&mut pool) {
            v
        } else {
            return Ok(Err(pool));
        };
        pool.holders.push(hold.clone());
        Ok(Ok(v))
    }

    fn bind(&self, hold: &Arc<Hold>, mut v: Vcpu, fp: &FpState) -> Result<Vcpu, PlatformError> {
        if let Err(e) = v.bind(fp) {
            self.release_vcpu(hold, v);
            return Err(e);
        }
        hold.kick.attach(v.run_area());
        Ok(v)
    }

    /// Takes the vCPU of the holder longest out of the guest among those not
    /// running application code now (their slot can be locked): most likely
    /// one asleep, not one in the middle of a quick system call.
    fn steal(pool: &mut Pool) -> Option<Vcpu> {
        let mut order: Vec<(u64, usize)> =
            pool.holders.iter().enumerate().map(|(i, h)| (h.left_guest.load(Ordering::Relaxed), i)).collect();
        order.sort_unstable();
        for (_, i) in order {
            let h = &pool.holders[i];
            let Ok(mut slot) = h.slot.try_lock() else { continue };
            if let Ok(Some(v)) = h.unbind(&mut slot) {
                drop(slot);
                pool.holders.remove(i);
                return Some(v);
            }
        }
        None
    }

    /// Gives back the vCPU `hold` had: to the first task waiting, if any.
    pub(crate) fn release_vcpu(&self, hold: &Hold, v: Vcpu) {
        let mut pool = self.lock_pool();
        if let Some(i) = pool.holders.iter().position(|h| std::ptr::eq(&**h, hold)) {
            pool.holders.remove(i);
        }
        match pool.waiting.pop_front() {
            Some(w) => {
                self.waiting.fetch_sub(1, Ordering::AcqRel);
                pool.holders.push(w.hold.clone());
                *w.vcpu.lock().unwrap_or_else(|p| p.into_inner()) = Some(v);
                w.thread.unpark();
                if let Some(next) = pool.waiting.front() {
                    next.thread.unpark();
                }
            }
            None => pool.free.push(v),
        }
    }

    pub(crate) fn retire_counts(&self, counts: &ExitCounts) {
        self.retired_counts.lock().unwrap_or_else(|p| p.into_inner()).add(counts);
    }
}

/// The kvm platform.
pub struct KvmPlatform {
    shared: Arc<Shared>,
}

/// The default pool: VCPUS_PER_HOST_CPU for each CPU this process may use.
fn default_vcpu_limit() -> u32 {
    let cpus = std::thread::available_parallelism().map(|n| n.get() as u32).unwrap_or(1);
    cpus.saturating_mul(VCPUS_PER_HOST_CPU)
}

/// The KVM device cordon uses unless told otherwise.
pub const DEFAULT_DEVICE: &str = "/dev/kvm";

fn open_kvm(device: &Path) -> Result<Kvm, PlatformError> {
    let shown = device.display();
    let path = CString::new(device.as_os_str().as_bytes())
        .map_err(|_| PlatformError::Unavailable(format!("{shown}: not a path")))?;
    match Kvm::new_with_path(&path) {
        Ok(k) => Ok(k),
        Err(e) => Err(PlatformError::Unavailable(match e.errno() {
            libc::ENOENT => {
                format!("{shown} does not exist: this host offers no KVM (load kvm_intel, kvm_amd or kvm_pvm)")
            }
            libc::EACCES | libc::EPERM => format!("{shown}: permission denied (run as a member of the kvm group)"),
            n => format!("{shown} cannot be opened: {}", std::io::Error::from_raw_os_error(n)),
        })),
    }
}

/// The ioctl requests the kvm platform makes on the KVM device, its VM and
/// its vCPUs once the sandbox runs (vCPUs are made as they are needed), for
/// the sentry's seccomp allow-list. Requests made only while the VM is built
/// (KVM_CREATE_VM, KVM_GET_SUPPORTED_CPUID) are on it too: the filter may be
/// installed before the platform is.
pub fn host_ioctls() -> Vec<u64> {
    use kvm_bindings::{kvm_cpuid2, kvm_msrs, kvm_sregs, kvm_userspace_memory_region, kvm_vcpu_events, kvm_xsave};
    use rustix::ioctl::opcode::{none, read, read_write, write};
    const KVMIO: u8 = 0xae;
    [
        none(KVMIO, 0x01),                                 // KVM_CREATE_VM
        none(KVMIO, 0x03),                                 // KVM_CHECK_EXTENSION
        none(KVMIO, 0x04),                                 // KVM_GET_VCPU_MMAP_SIZE
        read_write::<kvm_cpuid2>(KVMIO, 0x05),             // KVM_GET_SUPPORTED_CPUID
        none(KVMIO, 0x41),                                 // KVM_CREATE_VCPU
        write::<kvm_userspace_memory_region>(KVMIO, 0x46), // KVM_SET_USER_MEMORY_REGION
        none(KVMIO, 0x80),                                 // KVM_RUN
        read::<kvm_sregs>(KVMIO, 0x83),                    // KVM_GET_SREGS
        write::<kvm_sregs>(KVMIO, 0x84),                   // KVM_SET_SREGS
        read_write::<kvm_msrs>(KVMIO, 0x88),               // KVM_GET_MSRS
        write::<kvm_msrs>(KVMIO, 0x89),                    // KVM_SET_MSRS
        write::<kvm_cpuid2>(KVMIO, 0x90),                  // KVM_SET_CPUID2
        read::<kvm_vcpu_events>(KVMIO, 0x9f),              // KVM_GET_VCPU_EVENTS
        none(KVMIO, 0xa3),                                 // KVM_GET_TSC_KHZ
        read::<kvm_xsave>(KVMIO, 0xa4),                    // KVM_GET_XSAVE
        write::<kvm_xsave>(KVMIO, 0xa5),                   // KVM_SET_XSAVE
        write::<kvm_xcrs>(KVMIO, 0xa7),                    // KVM_SET_XCRS
        write::<kvm_device_attr>(KVMIO, 0xe1),             // KVM_SET_DEVICE_ATTR
    ]
    .into_iter()
    .map(|op| op as u64)
    .collect()
}

impl KvmPlatform {
    /// Opens KVM and builds a VM whose guest-physical memory is `mem`.
    pub fn new(mem: Arc<MemoryFile>) -> Result<Self, PlatformError> {
        Self::with_device(Path::new(DEFAULT_DEVICE), mem)
    }

    /// As [`KvmPlatform::new`], with the KVM device at `device`.
    pub fn with_device(device: &Path, mem: Arc<MemoryFile>) -> Result<Self, PlatformError> {
        let kvm = open_kvm(device)?;
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
            numbered_cpus: AtomicU32::new(
                std::thread::available_parallelism().map(|n| n.get() as u32).unwrap_or(1).min(max_vcpus),
            ),
            pool: Mutex::new(Pool {
                free: Vec::new(),
                created: 0,
                limit: default_vcpu_limit().min(max_vcpus),
                holders: Vec::new(),
                waiting: VecDeque::new(),
                yield_cursor: 0,
            }),
            waiting: AtomicU64::new(0),
            exit_sequence: AtomicU64::new(1),
            next_vcpu: Mutex::new(0),
            quarantine: Mutex::new(Vec::new()),
            table_frames: AtomicU64::new(0),
            vcpus_created: AtomicU64::new(0),
            retired_counts: Mutex::new(ExitCounts::default()),
            timing: AtomicBool::new(false),
            tsc_khz: AtomicU64::new(0),
            tsc_mismatch: AtomicBool::new(false),
        });
        let entry = detect_syscall_entry(&shared)?;
        shared.syscall_entry.set(entry).expect("set once");
        Ok(KvmPlatform { shared })
    }

    /// Limits the vCPUs application code runs on at once (at least 1).
    pub fn set_vcpu_limit(&self, n: u32) {
        self.shared.lock_pool().limit = n.clamp(1, self.shared.max_vcpus);
        self.shared.numbered_cpus.store(n.clamp(1, self.shared.max_vcpus), Ordering::Relaxed);
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
    let mut ctx = KvmContext::with_vcpu(shared.clone(), vcpu);
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
    let mut pool = shared.lock_pool();
    pool.free.push(v);
    pool.created += 1;
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
        Ok(Box::new(KvmContext::new(self.shared.clone())))
    }

    fn stats(&self) -> PlatformStats {
        let s = &self.shared;
        PlatformStats {
            vcpus: s.vcpus_created.load(Ordering::Relaxed),
            vcpus_in_use: s.lock_pool().holders.len() as u64,
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

    fn syscall_trampoline(&self) -> Option<crate::Trampoline> {
        use arch::x86_64::trampoline;
        Some(crate::Trampoline {
            entry: crate::arch::rewrite::CODE,
            code: Some(trampoline::code()),
            answers_in_table: true,
            only: Some(&trampoline::ANSWERED),
        })
    }

    fn guest_tsc_khz(&self) -> Option<u64> {
        let s = &self.shared;
        let khz = s.tsc_khz.load(Ordering::Relaxed);
        (khz > 0 && !s.tsc_mismatch.load(Ordering::Relaxed)).then_some(khz)
    }

    fn cpu_number_in_tsc_aux(&self) -> bool {
        // Every vCPU's TSC_AUX is its number (see create_vcpu); where the
        // guest reads the host's instead (PVM runs guest user code with
        // the host's), that is the number of the host CPU running it.
        crate::arch::has_rdtscp()
    }
}
