//! Running application code on a vCPU.
//!
//! A vCPU is in one of three places when the sentry hands it registers:
//! - `User`: stopped in user mode (a CPL-3 syscall exit, or kicked while
//!   running the app). Registers go straight into the run area's register
//!   block.
//! - `Kernel`: inside the ring-0 entry code, halfway through an exception or
//!   a CPL-0 syscall. The app's instruction pointer, flags and stack live in
//!   the exit frame on the kernel stack; the host rewrites the frame and the
//!   entry code `iretq`s with it.
//! - `Fresh`: a new or recycled vCPU. It is put in ring 0 with an exit frame
//!   as if returning from an exception: on PVM only a real return from ring
//!   0 sets user mode up fully (see the platform notes).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use kvm_bindings::{Msrs, kvm_msr_entry, kvm_regs, kvm_run, kvm_xsave};
use kvm_ioctls::{VcpuExit, VcpuFd};
use memory::Frame;

use super::arch::x86_64::cpu;
use super::arch::x86_64::supervisor::{self, VcpuArea};
use super::kick::Kick;
use super::{KvmAddressSpace, Shared, SyscallEntry};
use crate::arch::vector;
use crate::{
    Access, AddressSpace, Context, CpuClock, Event, Exception, ExitCounts, Fault, FpState, Interrupter, PlatformError,
    Registers,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Location {
    Fresh,
    User,
    Kernel,
}

pub(crate) struct Vcpu {
    pub(crate) fd: VcpuFd,
    pub(crate) area: VcpuArea,
    /// The vCPU's run area, shared with KVM.
    run: *mut kvm_run,
    location: Location,
    loaded_root: Option<Frame>,
    loaded_fs: u64,
    loaded_gs: u64,
}

// SAFETY: `run` points into the vCPU's own mmap'ed run area, which lives as
// long as `fd`; the vCPU is used by one thread at a time (its holder).
unsafe impl Send for Vcpu {}

/// What one `KVM_RUN` ended with, copied out of the run area.
enum Exit {
    MmioWrite(u64),
    MmioRead,
    Interrupted,
    Other(String),
}

impl Vcpu {
    pub(crate) fn new(fd: VcpuFd, area: VcpuArea) -> Self {
        let mut fd = fd;
        let run: *mut kvm_run = fd.get_kvm_run();
        Vcpu { fd, area, run, location: Location::Fresh, loaded_root: None, loaded_fs: 0, loaded_gs: 0 }
    }

    /// Readies a vCPU for a context that had none, giving it `fp`.
    pub(crate) fn bind(&mut self, fp: &FpState) -> Result<(), PlatformError> {
        self.location = Location::Fresh;
        self.loaded_root = None;
        self.set_fp(fp)
    }

    pub(crate) fn run_area(&self) -> *mut kvm_run {
        self.run
    }

    /// True if KVM holds an exception, NMI or interrupt that it has begun
    /// or decided to deliver to the guest and not yet delivered.
    fn event_in_delivery(&self) -> Result<bool, PlatformError> {
        let ev = self.fd.get_vcpu_events().map_err(|e| PlatformError::kvm("get vCPU events", e))?;
        Ok(ev.exception.injected != 0
            || ev.exception.pending != 0
            || ev.nmi.injected != 0
            || ev.interrupt.injected != 0)
    }

    pub(crate) fn set_lstar(&self, lstar: u64) -> Result<(), PlatformError> {
        let msrs = Msrs::from_entries(&cpu::syscall_msrs(lstar, &self.area)).expect("four entries");
        match self.fd.set_msrs(&msrs) {
            Ok(4) => Ok(()),
            Ok(_) => Err(PlatformError::Unavailable("KVM refused the syscall MSRs".into())),
            Err(e) => Err(PlatformError::kvm("set MSRs", e)),
        }
    }

    fn regs(&mut self) -> &mut kvm_regs {
        &mut self.fd.sync_regs_mut().regs
    }

    /// CR3, segment bases and, for a fresh vCPU, ring-0 mode.
    fn load_control_state(&mut self, root: Frame, regs: &Registers) -> Result<(), PlatformError> {
        let fresh = self.location == Location::Fresh;
        if fresh || self.loaded_root != Some(root) {
            let s = self.fd.get_sregs().map_err(|e| PlatformError::kvm("get sregs", e))?;
            let s = if fresh {
                cpu::kernel_sregs(s, &self.area, root.offset(), regs.fs_base, regs.gs_base)
            } else {
                let mut s = s;
                s.cr3 = root.offset();
                s.fs.base = regs.fs_base;
                s.gs.base = regs.gs_base;
                s
            };
            self.fd.set_sregs(&s).map_err(|e| PlatformError::kvm("set sregs", e))?;
            self.loaded_root = Some(root);
            self.loaded_fs = regs.fs_base;
            self.loaded_gs = regs.gs_base;
            if fresh {
                self.location = Location::Kernel;
            }
        } else if self.loaded_fs != regs.fs_base || self.loaded_gs != regs.gs_base {
            let msrs = Msrs::from_entries(&[
                kvm_msr_entry { index: cpu::MSR_FS_BASE, data: regs.fs_base, ..Default::default() },
                kvm_msr_entry { index: cpu::MSR_GS_BASE, data: regs.gs_base, ..Default::default() },
            ])
            .expect("two entries");
            self.fd.set_msrs(&msrs).map_err(|e| PlatformError::kvm("set segment bases", e))?;
            self.loaded_fs = regs.fs_base;
            self.loaded_gs = regs.gs_base;
        }
        Ok(())
    }

    /// Puts the application's registers where the vCPU will take them from.
    fn stage(&mut self, shared: &Shared, regs: &Registers) {
        let flags = regs.sanitized_flags();
        let mut k = kvm_regs {
            rax: regs.rax,
            rbx: regs.rbx,
            rcx: regs.rcx,
            rdx: regs.rdx,
            rsi: regs.rsi,
            rdi: regs.rdi,
            rsp: regs.rsp,
            rbp: regs.rbp,
            r8: regs.r8,
            r9: regs.r9,
            r10: regs.r10,
            r11: regs.r11,
            r12: regs.r12,
            r13: regs.r13,
            r14: regs.r14,
            r15: regs.r15,
            rip: regs.rip,
            rflags: flags,
        };
        if self.location != Location::User {
            let base = self.area.frame_base(false);
            let frame = [regs.rip, supervisor::USER_CS as u64, flags, regs.rsp, supervisor::USER_DS as u64];
            for (i, w) in frame.iter().enumerate() {
                shared.mem.write_u64(self.area.stack_word_offset(base + 8 * i as u64), *w);
            }
            k.rsp = base;
            k.rip = supervisor::return_entry();
            k.rflags = 0x2;
        }
        *self.regs() = k;
        self.fd.get_kvm_run().kvm_dirty_regs = kvm_bindings::KVM_SYNC_X86_REGS as u64;
    }

    /// Registers of the app at a user-mode stop.
    fn read_user(&mut self, regs: &mut Registers) {
        let k = *self.regs();
        copy_gprs(&k, regs);
        regs.rip = k.rip;
        regs.rsp = k.rsp;
        regs.rflags = k.rflags;
    }

    /// Reads the exit frame of an exception (`vector`) or of a CPL-0
    /// syscall (`None`) into the app's registers; returns the error code.
    fn read_frame(&mut self, shared: &Shared, regs: &mut Registers, vector: Option<u64>) -> Result<u64, PlatformError> {
        let k = *self.regs();
        let error_code = vector.is_some_and(supervisor::has_error_code);
        let base = self.area.frame_base(error_code);
        if k.rsp != base {
            return Err(PlatformError::CpuFailure(format!(
                "exception {vector:?} inside the entry code (rip {:#x}, rsp {:#x})",
                k.rip, k.rsp
            )));
        }
        let word = |i: u64| shared.mem.read_u64(self.area.stack_word_offset(base + 8 * i));
        let (error, f) = if error_code { (word(0), 1) } else { (0, 0) };
        let (rip, cs, rflags, rsp) = (word(f), word(f + 1), word(f + 2), word(f + 3));
        if cs != supervisor::USER_CS as u64 {
            return Err(PlatformError::CpuFailure(format!(
                "exception {vector:?} in supervisor mode at {rip:#x} (error {error:#x})"
            )));
        }
        copy_gprs(&k, regs);
        regs.rip = rip;
        regs.rflags = rflags;
        regs.rsp = rsp;
        self.location = Location::Kernel;
        Ok(error)
    }

    fn run_once(&mut self, kick: &Kick, counts: &mut ExitCounts) -> Result<Exit, PlatformError> {
        counts.entries += 1;
        kick.tid.store(rustix::thread::gettid().as_raw_nonzero().get(), Ordering::Release);
        let r = self.fd.run();
        let exit = match r {
            Ok(VcpuExit::MmioWrite(addr, _)) => Exit::MmioWrite(addr),
            Ok(VcpuExit::MmioRead(_, data)) => {
                data.fill(0);
                Exit::MmioRead
            }
            Ok(other) => Exit::Other(format!("{other:?}")),
            Err(e) if e.errno() == libc::EINTR => Exit::Interrupted,
            Err(e) => {
                kick.tid.store(0, Ordering::Release);
                return Err(PlatformError::kvm("KVM_RUN", e));
            }
        };
        kick.tid.store(0, Ordering::Release);
        Ok(exit)
    }

    fn fp(&self) -> Result<FpState, PlatformError> {
        let x = self.fd.get_xsave().map_err(|e| PlatformError::kvm("get xsave", e))?;
        let mut s = FpState::default();
        for (i, w) in x.region.iter().enumerate() {
            s.0[4 * i..4 * i + 4].copy_from_slice(&w.to_le_bytes());
        }
        Ok(s)
    }

    fn set_fp(&mut self, state: &FpState) -> Result<(), PlatformError> {
        let mut x = kvm_xsave::default();
        for (i, w) in x.region.iter_mut().enumerate() {
            *w = u32::from_le_bytes(state.0[4 * i..4 * i + 4].try_into().unwrap());
        }
        // SAFETY: the VM's XSAVE size (KVM_CAP_XSAVE2) was checked at start-up
        // to fit the 4 KiB region of kvm_xsave.
        unsafe { self.fd.set_xsave(&x) }.map_err(|e| PlatformError::kvm("set xsave", e))
    }
}

fn copy_gprs(k: &kvm_regs, r: &mut Registers) {
    r.rax = k.rax;
    r.rbx = k.rbx;
    r.rcx = k.rcx;
    r.rdx = k.rdx;
    r.rsi = k.rsi;
    r.rdi = k.rdi;
    r.rbp = k.rbp;
    r.r8 = k.r8;
    r.r9 = k.r9;
    r.r10 = k.r10;
    r.r11 = k.r11;
    r.r12 = k.r12;
    r.r13 = k.r13;
    r.r14 = k.r14;
    r.r15 = k.r15;
}

fn fault_from(cr2: u64, error: u64) -> Fault {
    let access = if error & 0x10 != 0 {
        Access { execute: true, ..Access::NONE }
    } else if error & 0x2 != 0 {
        Access { write: true, ..Access::NONE }
    } else {
        Access::READ
    };
    Fault { addr: cr2, access, present: error & 0x1 != 0 }
}

/// What a context holds: the vCPU it runs on, if it has one, and its
/// floating-point state while it has none. Tasks get a vCPU when they run
/// application code; one that is not running may have its vCPU taken by a
/// task that has none (see `Shared::acquire_vcpu`), so a thousand sleeping
/// threads hold no vCPU at all.
pub(crate) struct Hold {
    pub(crate) kick: Kick,
    /// When the owner last left the guest, for choosing whom to take a vCPU
    /// from (a platform-wide sequence number).
    pub(crate) left_guest: AtomicU64,
    /// Locked by the owner while it runs the guest or touches its vCPU. A
    /// thread short of a vCPU takes one only from a hold it can lock.
    pub(crate) slot: Mutex<Slot>,
}

pub(crate) struct Slot {
    pub(crate) vcpu: Option<Vcpu>,
    /// The application's floating-point state while `vcpu` is None.
    pub(crate) fp: FpState,
}

impl Hold {
    fn new(vcpu: Option<Vcpu>) -> Arc<Hold> {
        let kick = Kick::new();
        if let Some(v) = &vcpu {
            kick.attach(v.run_area());
        }
        Arc::new(Hold { kick, left_guest: AtomicU64::new(0), slot: Mutex::new(Slot { vcpu, fp: FpState::default() }) })
    }

    /// Locks the slot; a panic elsewhere while it was held leaves it usable
    /// (its fields are always consistent between statements).
    pub(crate) fn lock(&self) -> MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes the vCPU out of the slot, keeping its FP state in the slot.
    pub(crate) fn unbind(&self, slot: &mut Slot) -> Result<Option<Vcpu>, PlatformError> {
        let Some(v) = slot.vcpu.take() else { return Ok(None) };
        match v.fp() {
            Ok(fp) => slot.fp = fp,
            Err(e) => {
                slot.vcpu = Some(v);
                return Err(e);
            }
        }
        self.kick.detach();
        Ok(Some(v))
    }
}

impl Interrupter for Hold {
    fn interrupt(&self) {
        self.kick.interrupt()
    }
}

/// A task's execution context on KVM.
pub struct KvmContext {
    shared: Arc<Shared>,
    hold: Arc<Hold>,
    counts: ExitCounts,
    guest_time: Arc<GuestCpuClock>,
}

/// The CPU time a context's thread spent running the guest: its host CPU
/// clock while inside the `KVM_RUN` loop of `switch` (the application's
/// code, and the host's handling of its exits), read live while it is
/// there.
#[derive(Default)]
struct GuestCpuClock {
    state: Mutex<GuestTime>,
}

#[derive(Default)]
struct GuestTime {
    /// The CPU clock of the thread that runs the context.
    clock: Option<libc::clockid_t>,
    /// Time of the runs that ended.
    done: Duration,
    /// The thread's clock when the current run began.
    since: Option<Duration>,
}

fn read_cpu_clock(id: libc::clockid_t) -> Option<Duration> {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: writes only `t`; a clock of a thread that ended fails.
    let r = unsafe { libc::clock_gettime(id, &mut t) };
    (r == 0).then(|| Duration::new(t.tv_sec as u64, t.tv_nsec as u32))
}

impl GuestCpuClock {
    /// The calling thread starts running the guest.
    fn enter(&self) {
        let mut s = self.state.lock().unwrap();
        if s.clock.is_none() {
            let mut id: libc::clockid_t = 0;
            // SAFETY: asks for the calling thread's own clock id, written
            // to `id`.
            if unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut id) } == 0 {
                s.clock = Some(id);
            }
        }
        s.since = s.clock.and_then(read_cpu_clock);
    }

    /// The calling thread is back from the guest.
    fn leave(&self) {
        let mut s = self.state.lock().unwrap();
        if let (Some(id), Some(since)) = (s.clock, s.since.take())
            && let Some(now) = read_cpu_clock(id)
        {
            s.done += now.saturating_sub(since);
        }
    }
}

impl CpuClock for GuestCpuClock {
    fn consumed(&self) -> Duration {
        let s = self.state.lock().unwrap();
        let running = match (s.clock, s.since) {
            (Some(id), Some(since)) => read_cpu_clock(id).map_or(Duration::ZERO, |now| now.saturating_sub(since)),
            _ => Duration::ZERO,
        };
        s.done + running
    }

    fn on_calling_thread(&self) -> bool {
        true
    }
}

/// Counts the guest time of one `switch`, however it ends.
struct InGuest<'a>(&'a GuestCpuClock);

impl<'a> InGuest<'a> {
    fn new(clock: &'a GuestCpuClock) -> Self {
        clock.enter();
        InGuest(clock)
    }
}

impl Drop for InGuest<'_> {
    fn drop(&mut self) {
        self.0.leave();
    }
}

impl KvmContext {
    /// A context that gets a vCPU when it first runs.
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        KvmContext { shared, hold: Hold::new(None), counts: ExitCounts::default(), guest_time: Default::default() }
    }

    /// A context running on `vcpu`, outside the pool (the start-up probe).
    pub(crate) fn with_vcpu(shared: Arc<Shared>, vcpu: Vcpu) -> Self {
        KvmContext {
            shared,
            hold: Hold::new(Some(vcpu)),
            counts: ExitCounts::default(),
            guest_time: Default::default(),
        }
    }

    /// The vCPU back, for the pool; the probe's exits are not the
    /// application's and are not counted.
    pub(crate) fn into_vcpu(mut self) -> Vcpu {
        self.counts = ExitCounts::default();
        let v = self.hold.lock().vcpu.take().expect("context with a vCPU");
        self.hold.kick.detach();
        v
    }
}

impl Context for KvmContext {
    fn switch(&mut self, space: &dyn AddressSpace, regs: &mut Registers) -> Result<Event, PlatformError> {
        let space = space
            .as_any()
            .downcast_ref::<KvmAddressSpace>()
            .ok_or_else(|| PlatformError::CpuFailure("address space of another platform".into()))?;
        space.flush();
        let shared = &*self.shared;
        let timing = shared.timing.load(Ordering::Relaxed);
        let hold = &*self.hold;
        let kick = &hold.kick;
        let counts = &mut self.counts;
        if kick.take_pending() {
            counts.interrupts += 1;
            return Ok(Event::Interrupted);
        }
        let mut slot = hold.lock();
        if kick.take_yield_request() && slot.vcpu.is_some() && shared.vcpu_wanted() {
            // Another task has waited its turn for a vCPU: give this one up
            // and queue behind it.
            if let Some(v) = hold.unbind(&mut slot)? {
                shared.release_vcpu(hold, v);
            }
        }
        if slot.vcpu.is_none() {
            let v = shared.acquire_vcpu(&self.hold, &slot.fp)?;
            slot.vcpu = Some(v);
        }
        let v = slot.vcpu.as_mut().expect("bound above");
        let t0 = timing.then(Instant::now);
        v.load_control_state(space.root(), regs)?;
        v.stage(shared, regs);
        let mut t_run = t0.map(|_| Instant::now());
        if let (Some(a), Some(b)) = (t0, t_run) {
            counts.register_ns += (b - a).as_nanos() as u64;
        }
        let mmio = shared.mmio_base;
        let in_guest = InGuest::new(&self.guest_time);
        let event = loop {
            let exit = v.run_once(kick, counts)?;
            let t_exit = t_run.map(|t| {
                let now = Instant::now();
                counts.guest_ns += (now - t).as_nanos() as u64;
                now
            });
            let event = match exit {
                Exit::MmioWrite(gpa) if gpa == mmio + supervisor::SYSCALL_MMIO_OFFSET => {
                    let k = *v.regs();
                    v.location = Location::User;
                    if k.rip == supervisor::syscall_user_done() {
                        copy_gprs(&k, regs);
                        regs.rip = k.rcx;
                        regs.rflags = k.r11;
                        regs.rsp = k.rsp;
                        counts.syscalls += 1;
                        Event::Syscall
                    } else {
                        // The app stored to the syscall page itself.
                        v.read_user(regs);
                        counts.page_faults += 1;
                        Event::Fault(Fault {
                            addr: supervisor::SYSCALL_MMIO,
                            access: Access { write: true, ..Access::NONE },
                            present: true,
                        })
                    }
                }
                Exit::MmioWrite(gpa)
                    if (mmio + supervisor::EXCEPTION_MMIO_OFFSET
                        ..mmio + supervisor::EXCEPTION_MMIO_OFFSET + 32 * 8)
                        .contains(&gpa) =>
                {
                    let vec = (gpa - mmio - supervisor::EXCEPTION_MMIO_OFFSET) / 8;
                    let error = v.read_frame(shared, regs, Some(vec))?;
                    if vec == vector::PAGE_FAULT as u64 {
                        // CR2 is the one thing the frame lacks. KVM stores
                        // it in the run area on every exit, which costs less
                        // than the emulated ring-0 instructions it would
                        // take to save it in the guest.
                        let cr2 = v.fd.sync_regs().sregs.cr2;
                        counts.page_faults += 1;
                        Event::Fault(fault_from(cr2, error))
                    } else {
                        counts.exceptions += 1;
                        Event::Exception(Exception { vector: vec as u8, error_code: error })
                    }
                }
                Exit::MmioWrite(gpa) if gpa == mmio + supervisor::KERNEL_SYSCALL_MMIO_OFFSET => {
                    v.read_frame(shared, regs, None)?;
                    counts.syscalls += 1;
                    Event::Syscall
                }
                Exit::MmioRead => {
                    // The app read the syscall page. Complete the access
                    // (it reads zeros) without re-entering the guest, then
                    // report the fault.
                    kick.set_immediate_exit(true);
                    let r = v.fd.run();
                    kick.set_immediate_exit(false);
                    if !matches!(&r, Err(e) if e.errno() == libc::EINTR) {
                        return Err(PlatformError::CpuFailure("MMIO read did not complete".into()));
                    }
                    v.location = Location::User;
                    v.read_user(regs);
                    counts.page_faults += 1;
                    Event::Fault(Fault { addr: supervisor::SYSCALL_MMIO, access: Access::READ, present: true })
                }
                Exit::MmioWrite(gpa) => {
                    return Err(PlatformError::CpuFailure(format!("store to unknown MMIO address {gpa:#x}")));
                }
                Exit::Interrupted => {
                    kick.set_immediate_exit(false);
                    let rip = v.regs().rip;
                    if rip >= supervisor::BASE || v.event_in_delivery()? {
                        // Stopped inside the entry code, or with an exception
                        // KVM has queued but not yet delivered (a page fault,
                        // typically: the run was interrupted between KVM
                        // deciding to reflect it and entering the guest). Let
                        // it reach its exit: the sentry would otherwise move
                        // the registers (to a signal handler, say) and the
                        // queued fault would be delivered there, or, on a
                        // vCPU handed to another task, at ring 0 inside the
                        // entry code. The pending interrupt is reported on
                        // the next switch.
                        t_run = t_exit;
                        continue;
                    }
                    v.location = Location::User;
                    v.read_user(regs);
                    kick.take_pending();
                    counts.interrupts += 1;
                    Event::Interrupted
                }
                Exit::Other(what) => {
                    return Err(PlatformError::CpuFailure(format!(
                        "unexpected exit {what} at rip {:#x}",
                        v.regs().rip
                    )));
                }
            };
            if let (Some(t), true) = (t_exit, timing) {
                counts.register_ns += t.elapsed().as_nanos() as u64;
            }
            break event;
        };
        drop(in_guest);
        hold.left_guest.store(shared.exit_sequence.fetch_add(1, Ordering::Relaxed), Ordering::Relaxed);
        drop(slot);
        if shared.vcpu_wanted() {
            shared.nudge_waiter();
        }
        Ok(event)
    }

    fn interrupter(&self) -> Arc<dyn Interrupter> {
        self.hold.clone()
    }

    fn cpu_clock(&self) -> Arc<dyn CpuClock> {
        self.guest_time.clone()
    }

    fn fp_state(&mut self) -> Result<FpState, PlatformError> {
        let slot = self.hold.lock();
        match &slot.vcpu {
            Some(v) => v.fp(),
            None => Ok(slot.fp.clone()),
        }
    }

    fn set_fp_state(&mut self, state: &FpState) -> Result<(), PlatformError> {
        let mut slot = self.hold.lock();
        match &mut slot.vcpu {
            Some(v) => v.set_fp(state),
            None => {
                slot.fp = state.clone();
                Ok(())
            }
        }
    }

    fn exit_counts(&self) -> ExitCounts {
        self.counts
    }
}

impl Drop for KvmContext {
    fn drop(&mut self) {
        let v = {
            let mut slot = self.hold.lock();
            self.hold.kick.detach();
            slot.vcpu.take()
        };
        if let Some(v) = v {
            self.shared.release_vcpu(&self.hold, v);
        }
        self.shared.retire_counts(&self.counts);
    }
}

/// Which LSTAR a vCPU gets.
pub(crate) fn lstar_for(entry: SyscallEntry) -> u64 {
    match entry {
        SyscallEntry::UserMode => supervisor::syscall_user_entry(),
        SyscallEntry::KernelMode => supervisor::syscall_kernel_entry(),
    }
}
