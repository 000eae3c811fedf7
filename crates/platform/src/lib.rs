//! The platform: how application code runs and how its system calls and
//! faults reach the sentry.
//!
//! The sentry decides *what* an address space contains; a platform makes it
//! so and runs application code in it until the next event. The sentry never
//! names a platform type, and a platform knows nothing of the sentry beyond
//! this interface.

pub mod arch;
pub mod calibrate;
pub mod kvm;
pub mod trap;

use std::any::Any;
use std::sync::Arc;

pub use arch::{Exception, FpState, Registers};
use memory::Frame;

/// Access rights of a mapping, as the platform enforces them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub struct Access {
    pub read: bool,
    pub write: bool,
    pub execute: bool,
}

impl Access {
    pub const NONE: Access = Access { read: false, write: false, execute: false };
    pub const READ: Access = Access { read: true, write: false, execute: false };
    pub const READ_WRITE: Access = Access { read: true, write: true, execute: false };
    pub const READ_EXECUTE: Access = Access { read: true, write: false, execute: true };
    pub const ALL: Access = Access { read: true, write: true, execute: true };

    /// True if nothing may be done with the memory.
    pub fn is_none(self) -> bool {
        !self.read && !self.write && !self.execute
    }

    /// The same rights without write.
    pub fn without_write(self) -> Access {
        Access { write: false, ..self }
    }

    /// True if every right in `other` is also in `self`.
    pub fn contains(self, other: Access) -> bool {
        (self.read || !other.read) && (self.write || !other.write) && (self.execute || !other.execute)
    }
}

/// An access by application code that the address space did not allow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    /// The faulting virtual address.
    pub addr: u64,
    /// What the access tried to do (exactly one of read, write, execute).
    pub access: Access,
    /// True if a mapping was present but forbade the access; false if there
    /// was no mapping at all.
    pub present: bool,
}

/// Why [`Context::switch`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The application made a system call; the registers hold it.
    Syscall,
    /// The application touched memory the address space does not allow.
    Fault(Fault),
    /// Any other CPU exception (divide error, invalid opcode, breakpoint...).
    Exception(Exception),
    /// [`Interrupter::interrupt`] was called, or the host thread was
    /// signalled; the registers are the application's at the point it
    /// stopped.
    Interrupted,
}

/// Errors of a platform.
#[derive(Debug, thiserror::Error)]
pub enum PlatformError {
    /// The platform cannot run on this host; the message says why.
    #[error("{0}")]
    Unavailable(String),
    /// A host call the platform depends on failed.
    #[error("{what}: {errno}")]
    Host { what: &'static str, errno: rustix::io::Errno },
    /// Sandbox memory is exhausted.
    #[error(transparent)]
    Memory(#[from] memory::MemoryError),
    /// The virtual CPU stopped in a way the platform cannot recover from.
    #[error("virtual CPU failure: {0}")]
    CpuFailure(String),
    /// Every virtual CPU the host allows is in use.
    #[error("no virtual CPU available")]
    NoCpu,
}

impl PlatformError {
    pub(crate) fn host(what: &'static str, errno: rustix::io::Errno) -> Self {
        PlatformError::Host { what, errno }
    }

    pub(crate) fn kvm(what: &'static str, e: kvm_ioctls::Error) -> Self {
        PlatformError::Host { what, errno: rustix::io::Errno::from_raw_os_error(e.errno()) }
    }
}

/// Counters of one platform, for reports and leak checks.
#[derive(Clone, Debug, Default)]
pub struct PlatformStats {
    /// Virtual CPUs created and not destroyed.
    pub vcpus: u64,
    /// Of which handed to a task right now.
    pub vcpus_in_use: u64,
    /// Page-table frames held by the platform.
    pub table_frames: u64,
    /// Whole-VM translation flushes performed.
    pub global_flushes: u64,
    /// Per-frame translation invalidations (host calls).
    pub frame_invalidations: u64,
    /// Frames the platform keeps for itself (entry code, descriptor tables,
    /// per-vCPU stacks): constant for a given number of vCPUs.
    pub supervisor_frames: u64,
}

/// A platform: a factory of address spaces and execution contexts.
pub trait Platform: Send + Sync {
    /// A short name for reports ("kvm").
    fn name(&self) -> &'static str;
    /// A new, empty address space.
    fn new_address_space(&self) -> Result<Arc<dyn AddressSpace>, PlatformError>;
    /// A new context able to run application code.
    fn new_context(&self) -> Result<Box<dyn Context>, PlatformError>;
    /// Current counters.
    fn stats(&self) -> PlatformStats;
    /// Exits counted by every context, finished or running.
    fn exit_counts(&self) -> ExitCounts;
    /// Starts measuring time in and around the guest (for `--profile`);
    /// without it no clock is read on the exit path.
    fn enable_timing(&self);
    /// Gives back memory held only as a cache (page-table frames waiting
    /// for reuse), so that what remains in use is what is live.
    fn release_cached(&self);
    /// `Some(khz)` while application code reading the TSC on any vCPU sees
    /// the host's TSC value, ticking at `khz`: the sandbox's clock page can
    /// then be read without a syscall. `None` once that cannot be promised.
    fn guest_tsc_khz(&self) -> Option<u64>;
    /// True if `rdtscp` in application code reads, in its TSC_AUX, the
    /// number of a CPU running that code (and the NUMA node from bit 12
    /// up), as Linux sets it: the vDSO then answers getcpu itself.
    fn cpu_number_in_tsc_aux(&self) -> bool {
        false
    }
    /// How rewritten system call sites reach this platform's trampoline
    /// ([`arch::rewrite`]), or `None` if it gains nothing from them and
    /// sites are left as they are.
    fn syscall_trampoline(&self) -> Option<Trampoline> {
        None
    }
}

/// A platform's trampoline for rewritten system call sites.
#[derive(Clone, Copy, Debug)]
pub struct Trampoline {
    /// The address cells jump to.
    pub entry: u64,
    /// Code to place at [`arch::rewrite::CODE`] in the application's
    /// address space, when the entry lies there.
    pub code: Option<&'static [u8]>,
    /// The trampoline answers the fast paths from the page at
    /// [`arch::rewrite::ANSWERS`], which the sentry keeps, rather than from
    /// the context's own published state.
    pub answers_in_table: bool,
    /// Only sites of these calls are worth rewriting (`None`: every one).
    pub only: Option<&'static [u64]>,
}

impl Trampoline {
    /// True if a site of system call `nr` is worth rewriting.
    pub fn rewrites(&self, nr: u64) -> bool {
        self.only.is_none_or(|only| only.contains(&nr))
    }
}

/// An address space as the platform sees it: which virtual pages map which
/// frames of the memory file, with which rights. The sentry's memory manager
/// is the authority; this is its executable image.
pub trait AddressSpace: Send + Sync + Any {
    /// Maps consecutive pages starting at `va` to `frames`, replacing any
    /// previous mapping of those pages.
    fn map(&self, va: u64, frames: &[Frame], access: Access) -> Result<(), PlatformError>;
    /// As [`map`](Self::map), for pages the program is about to touch
    /// every one of (it is filling memory in order): a platform whose
    /// host would otherwise fault each page in may back them all now.
    fn map_resident(&self, va: u64, frames: &[Frame], access: Access) -> Result<(), PlatformError> {
        self.map(va, frames, access)
    }
    /// Removes every mapping in `[va, va + len)`.
    fn unmap(&self, va: u64, len: u64);
    /// Changes the rights of every mapped page in `[va, va + len)`.
    fn protect(&self, va: u64, len: u64, access: Access);
    /// Makes every earlier `unmap`/`protect`/replacement effective on every
    /// CPU. Returns only once no CPU can use a translation made stale before
    /// the call, including when another thread's flush is doing the work.
    /// The sentry calls it before it lets anyone act on the change: before
    /// unlocking its view of the address space, before dropping a frame
    /// another address space may take over, before entering the guest.
    fn flush(&self);
    /// For downcasting by the platform's own contexts.
    fn as_any(&self) -> &dyn Any;
}

/// Interrupts a context from another thread.
pub trait Interrupter: Send + Sync {
    /// Makes the context's current or next `switch` return
    /// [`Event::Interrupted`] promptly.
    fn interrupt(&self);
}

/// CPU time a context's application code used: the time the sentry
/// reports as the task's user time. On trap it runs on stub threads,
/// apart from the thread that calls [`Context::switch`]; on kvm it runs on
/// that thread, whose CPU clock then counts it as well as the sentry's own
/// work ([`CpuClock::on_calling_thread`]).
pub trait CpuClock: Send + Sync {
    /// The time used so far; never decreases.
    fn consumed(&self) -> std::time::Duration;
    /// True if the time is part of the CPU clock of the thread that calls
    /// `switch` (the rest of that clock being the sentry's), false if it
    /// was used on other threads.
    fn on_calling_thread(&self) -> bool {
        false
    }
}

/// The CPU clock of a context whose application code runs on the calling
/// thread.
pub struct NoCpuClock;

impl CpuClock for NoCpuClock {
    fn consumed(&self) -> std::time::Duration {
        std::time::Duration::ZERO
    }
}

/// A context runs application code: it is the virtual CPU a task holds while
/// it runs.
pub trait Context: Send {
    /// Runs the application with `regs` in `space` until the next event, and
    /// stores its registers back into `regs`.
    fn switch(&mut self, space: &dyn AddressSpace, regs: &mut Registers) -> Result<Event, PlatformError>;
    /// A handle other threads use to interrupt this context.
    fn interrupter(&self) -> Arc<dyn Interrupter>;
    /// A handle other threads read the context's CPU time with (see
    /// [`CpuClock`]).
    fn cpu_clock(&self) -> Arc<dyn CpuClock> {
        Arc::new(NoCpuClock)
    }
    /// Makes now what the context needs to run in `space` (a host thread,
    /// on some platforms), so that a host that refuses it fails the call
    /// that made the context rather than its first switch.
    fn attach(&mut self, _space: &dyn AddressSpace) -> Result<(), PlatformError> {
        Ok(())
    }
    /// The application's floating-point and vector state.
    fn fp_state(&mut self) -> Result<FpState, PlatformError>;
    /// Replaces the floating-point and vector state.
    fn set_fp_state(&mut self, state: &FpState) -> Result<(), PlatformError>;
    /// Counters of this context (exits by reason), for `--profile`.
    fn exit_counts(&self) -> ExitCounts;
    /// The answers the context may give to the calls of
    /// [`FAST_PATH_SYSCALLS`] without an exit from now on, or `None` for
    /// none. The sentry publishes them before every switch and interrupts
    /// a running context whose answers another thread made stale. A
    /// platform that always exits ignores them.
    fn publish_fast_path(&mut self, _state: Option<FastPathState>) {}
    /// Tells a platform that rewrites system call sites that the sentry
    /// will not rewrite the site of a fast-path call returning to `ret`:
    /// the platform may answer calls there without the sentry from now on,
    /// as it answers calls through rewritten sites.
    fn fast_path_site_kept(&mut self, _ret: u64) {}
    /// True if the last [`Event::Syscall`] came through a rewritten site's
    /// trampoline, so that its site needs no look.
    fn last_call_rewritten(&self) -> bool {
        false
    }
}

/// System calls a context may answer from a [`FastPathState`] without an
/// exit: getpid, gettid, getppid, getuid, geteuid, getgid, getegid, whose
/// answers are [`FastPathState::answers`] in this order, then
/// sched_getaffinity of the calling thread, which writes
/// [`FastPathState::affinity`] to the caller's buffer. The order of
/// [`ExitCounts::fast_path`].
pub const FAST_PATH_SYSCALLS: [u64; 8] = [
    libc::SYS_getpid as u64,
    libc::SYS_gettid as u64,
    libc::SYS_getppid as u64,
    libc::SYS_getuid as u64,
    libc::SYS_geteuid as u64,
    libc::SYS_getgid as u64,
    libc::SYS_getegid as u64,
    libc::SYS_sched_getaffinity as u64,
];

/// How many of [`FAST_PATH_SYSCALLS`], from the first, return a value the
/// sentry publishes and touch no application memory.
pub const FAST_PATH_CONSTANTS: usize = 7;

/// Index of sched_getaffinity in [`FAST_PATH_SYSCALLS`].
pub const FAST_PATH_GETAFFINITY: usize = 7;

/// What the calls of [`FAST_PATH_SYSCALLS`] answer for one task.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FastPathState {
    pub pid: i32,
    pub tid: i32,
    pub ppid: i32,
    pub uid: u32,
    pub euid: u32,
    pub gid: u32,
    pub egid: u32,
    /// The thread's CPU affinity mask when the sandbox's mask is one
    /// 64-bit word (sched_getaffinity then writes 8 bytes), else `None`:
    /// the sentry answers.
    pub affinity: Option<u64>,
}

impl FastPathState {
    /// The return values of the first [`FAST_PATH_CONSTANTS`] calls of
    /// [`FAST_PATH_SYSCALLS`], in its order.
    pub fn answers(&self) -> [u64; FAST_PATH_CONSTANTS] {
        [
            self.pid as u64,
            self.tid as u64,
            self.ppid as u64,
            self.uid as u64,
            self.euid as u64,
            self.gid as u64,
            self.egid as u64,
        ]
    }
}

/// Exits from application code by reason, counted by one context.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExitCounts {
    /// Entries into application code (KVM_RUN calls that ran the guest).
    pub entries: u64,
    pub syscalls: u64,
    pub page_faults: u64,
    pub exceptions: u64,
    pub interrupts: u64,
    /// Time inside the hypervisor's run call, in nanoseconds, when timing is
    /// enabled.
    pub guest_ns: u64,
    /// Time spent moving registers in and out, in nanoseconds, when timing is
    /// enabled.
    pub register_ns: u64,
    /// Calls answered without an exit, by [`FAST_PATH_SYSCALLS`] index.
    pub fast_path: [u64; FAST_PATH_SYSCALLS.len()],
    /// Of `syscalls`, those that came through a rewritten site's
    /// trampoline rather than a trap.
    pub rewritten_calls: u64,
}

impl ExitCounts {
    pub fn add(&mut self, o: &ExitCounts) {
        self.entries += o.entries;
        self.syscalls += o.syscalls;
        self.page_faults += o.page_faults;
        self.exceptions += o.exceptions;
        self.interrupts += o.interrupts;
        self.guest_ns += o.guest_ns;
        self.register_ns += o.register_ns;
        self.rewritten_calls += o.rewritten_calls;
        for (a, b) in self.fast_path.iter_mut().zip(o.fast_path) {
            *a += b;
        }
    }
}
