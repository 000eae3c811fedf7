//! The trap platform: application code runs natively in host *stub*
//! processes, one per address space, and every system call it makes traps
//! to the sentry through seccomp's SIGSYS.
//!
//! # How it works
//!
//! - The sentry forks a *factory* while it starts, before it confines
//!   itself (its own filter forbids making processes). The factory
//!   confines itself, then forks a stub whenever the sentry asks, through a
//!   shared control file (a memfd) and an eventfd.
//! - A stub unmaps everything it inherited but a small code area and its
//!   slot of the control file (both at addresses reserved in every
//!   application address space, [`stub::RESERVED`]), installs its seccomp
//!   filter and serves the sentry's requests: map frames of the memory file
//!   (`MAP_SHARED|MAP_FIXED` at the application's address), unmap, protect,
//!   make a thread, exit. Requests come in batches in a page the stub maps
//!   read-only; each batch is acknowledged through an eventfd.
//! - Each task context gets one stub thread. Application code runs on it
//!   directly; its system calls raise SIGSYS (the filter traps every call
//!   not made from the stub's code), its faults SIGSEGV/SIGBUS, other
//!   exceptions their signals, and [`Interrupter::interrupt`] sends it
//!   SIGURG. The handler runs on the thread's alternate stack inside the
//!   thread's area of the control file, posts the event on a futex and waits
//!   there; the sentry reads and writes the registers and the FP state in
//!   the signal frame itself, then lets the handler return through
//!   `rt_sigreturn` into the application.
//!
//! # Fast paths
//!
//! The sentry publishes the answers to getpid, gettid, getppid and the
//! id getters ([`crate::FAST_PATH_SYSCALLS`]) in the thread's area before
//! it runs the thread; the handler answers those calls itself (rax in the
//! signal frame, and back through `rt_sigreturn`) and counts them there,
//! and the sentry collects the counts at the next event. The sentry
//! interrupts a thread whose answers another thread made stale (a parent's
//! exit, a change of the process's ids or of the thread's affinity), so
//! that it publishes them afresh.
//!
//! The trampoline also answers sched_getaffinity of the calling thread,
//! writing the published mask to the application's buffer: the one fast
//! path that touches application memory. That write may fault (a bad
//! pointer, a page the stub has not been given yet, a page shared
//! copy-on-write, which the stub maps read-only). The handler knows where
//! such writes lie (a table of them, `cordon_trap_stub_fixups`) and sends
//! a fault at one to its fixup, the trampoline's way to the
//! sentry, with the registers of the call: the sentry then answers it as
//! if no fast path existed (EFAULT, or the page made and the mask
//! written). The handler never touches application memory itself: it
//! runs with every signal blocked, where a fault would kill the stub.
//!
//! # Rewritten sites and the trampoline
//!
//! The sentry rewrites a `mov $nr, %eax; syscall` site after its first
//! trap ([`crate::arch::rewrite`]), so that the next calls jump to the
//! trampoline in the stub's code instead of raising SIGSYS. The trampoline
//! finds the thread's area through gs: the application's gs is virtual, 0
//! while the real one is the thread's area (the handler translates both
//! ways), and a thread whose application set its own gs takes the cell's
//! plain `syscall`, which traps as before. The trampoline answers the fast
//! paths itself; any other call it posts as the handler does, with the
//! registers and an XSAVE image in a frame shaped as a signal frame's at
//! the bottom of the thread's alternate stack, and returns to whatever the
//! sentry left there with no signal and no `rt_sigreturn`. Kicks:
//! - while it posts or waits, the handler leaves the kick pending (the
//!   sentry hears from the thread anyway, and sees it at the next switch);
//! - in a fast path, the sentry puts the thread back at its site, or past
//!   it once the fast path committed;
//! - on the way back, the sentry reports an interruption with the
//!   registers it had given, which the handler's frame resumes later.
//!
//! Fast-path calls at a site the sentry will not rewrite (glibc's
//! `syscall()`, say) are answered by the handler as before, once the
//! sentry has named the site ([`stub::A_FAST_SITES`]); any other reaches
//! the sentry once, to be rewritten. sched_getaffinity at such a site (as
//! glibc's wrapper is) goes on from the handler to a path of the
//! trampoline's, which writes the mask as for a rewritten site: the
//! handler itself never touches application memory.
//!
//! # The handoff
//!
//! The state word of a thread area says whose turn it is: `RUN` (the
//! application's), `EVENT` (the sentry's), `EXIT`, or `DEAD` (the kernel
//! clears the word when the thread ends). Each side waits for the other by
//! polling the word for a bounded number of rounds, then sleeping on it
//! with FUTEX_WAIT: a futex call costs a sleep and a wake-up of a thread on
//! each side, several microseconds where an idle core wakes slowly, while a
//! poll sees the answer as soon as the other core writes it.
//! - A side done polling announces that it sleeps by turning the value it
//!   waits on into its sleeping twin with a compare-and-swap (`EVENT` to
//!   `EVENT_SLEEPING` in the stub, `RUN` to `RUN_SLEEPING` in the sentry),
//!   and only then calls FUTEX_WAIT with the twin as the expected value.
//! - A side that hands over swaps its value in and calls FUTEX_WAKE unless
//!   the old value says the other side is still polling (`RUN` seen by the
//!   stub, `EVENT` by the sentry).
//!
//! No wakeup is lost: the swap and the compare-and-swap are atomic on one
//! word, so either the swap comes first (the compare-and-swap fails and the
//! waiter sees the answer) or it sees the sleeping twin and wakes; a wake
//! that comes before the FUTEX_WAIT makes the wait return at once, because
//! the kernel compares the word with the twin under its lock.
//!
//! Polling burns a core, so it is allowed only while the sandbox leaves one
//! free: each context in [`TrapContext::run`] may keep two cores busy (its
//! application or handler, and the sentry thread waiting for it), and both
//! sides poll only while twice the number of such contexts fits in the
//! CPUs the sentry may run on. Polls are bounded (about [`SPIN_MAX_NS`]),
//! and halved each time they ran out and the side slept anyway (a loaded
//! host), so a busy machine degrades to the futex path.
//!
//! # Threat model
//!
//! The application is hostile and runs native code in the stub, so it can
//! read and write everything the stub maps writable and jump anywhere in
//! the stub's code.
//! - Host system calls: from outside the stub's code every call traps to
//!   the sentry. An application thread that jumps to a `syscall` in the
//!   stub's code passes both filters only for `futex` (wait or wake),
//!   `rt_sigreturn` and `exit(0)`; anything else kills its stub. `futex`
//!   reaches only memory the stub maps; `rt_sigreturn` sets only the
//!   thread's own registers, signal mask and alternate stack; `exit` ends
//!   the thread, which the sentry sees as a stopped task. The calls that
//!   change mappings (`mmap` only of the memory file, at `MAP_SHARED |
//!   MAP_FIXED`, with `MAP_POPULATE` or without), `clone` (threads only) and `write` (only to the
//!   acknowledgement eventfd) are allowed only by the control filter, which
//!   application threads stack the thread filter upon: they cannot make
//!   them. The control thread keeps its state in registers and reads its
//!   orders from a page the stub maps read-only (and cannot `mprotect`).
//! - Shared memory: an application can scribble its own slot: the
//!   response page, the thread areas, the signal frames. That changes only
//!   what the sentry reads as its own registers, or makes the sentry wait
//!   on a thread that will not come back (it is then stopped when the stub
//!   dies). The sentry bounds-checks every pointer it reads there and
//!   trusts nothing in the slot for its own decisions: acknowledgements come
//!   through the eventfd only the control thread may write, deaths through
//!   the factory's page, which no stub maps.
//! - Memory: a stub maps only frames the sentry gave its address space, and
//!   its slot. Frames are unmapped before the sentry frees them
//!   ([`AddressSpace::flush`] waits for the stub's acknowledgement).
//! - The state word: an application can write any value to it. The stub
//!   then polls at most [`stub::SPIN_CAP`] rounds of its own thread's time;
//!   the sentry takes a value it does not expect as the thread's end, and
//!   any other change only as "wake up and look".
//! - The published answers and counts: an application that changes them
//!   changes what its own calls answer and what `--profile` counts for it.
//! - The trampoline: it makes only the handler's calls (`futex` on the
//!   thread's area, `exit`), so jumping into it gains nothing; its write
//!   to application memory is one the application could make itself, and
//!   the fixup of a fault there leads only to the trampoline's way to the
//!   sentry, which the application may jump to anyway; its frame
//!   and XSAVE image are the application's registers, which it may change
//!   anyway (an image XRSTOR refuses makes the way back fault, which the
//!   sentry reports as the application's own fault). A gs pointing at
//!   another thread's area of the same stub is as writing that area. The
//!   table and cells are mapped read-only and cannot be unmapped,
//!   remapped or made writable by the application.
//! - The factory: it runs no application code, and reads only the
//!   request slot from its page (bounded by the slot count); but the
//!   sentry, which this model assumes may be taken over, writes that page
//!   and posts the requests. The factory confines itself before the first
//!   one ([`factory`]): its own empty root, its own descriptors only, the
//!   sentry's unprivileged ids, no capability, `PR_SET_NO_NEW_PRIVS`, and a
//!   filter that allows its own calls and a new stub's set-up only,
//!   pinned. Every stub inherits that filter beneath its own; it never
//!   turns a trap of the stub's into a kill, and from the stub's code it
//!   allows what the stub's control filter allows, no more.
//! - Not covered: the application can read the host's vsyscall page and
//!   execute `cpuid`, `rdtsc` and the like natively (it sees the host CPU),
//!   and the reserved range is refused to it.

mod control;
mod factory;
mod filter;
mod stub;
mod tsc;

use std::any::Any;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use memory::{Frame, MemoryFile};

use crate::{
    Access, AddressSpace, Context, CpuClock, Event, Exception, ExitCounts, FAST_PATH_SYSCALLS, FastPathState, Fault,
    FpState, Interrupter, Platform, PlatformError, PlatformStats, Registers,
};

/// The host signal that interrupts application code in a stub.
pub const KICK_SIGNAL: i32 = libc::SIGURG;

/// Signals the stub's handler takes.
const TRAPPED_SIGNALS: [i32; 7] =
    [libc::SIGSYS, libc::SIGSEGV, libc::SIGBUS, libc::SIGILL, libc::SIGFPE, libc::SIGTRAP, KICK_SIGNAL];

/// The application's addresses the platform keeps for the stub: no
/// application mapping may enter them.
pub fn reserved_range() -> std::ops::Range<u64> {
    stub::RESERVED
}

struct Shared {
    /// The memory file the stubs map (the factory holds its descriptor).
    _mem: Arc<MemoryFile>,
    /// The sentry's mapping of the control file.
    base: *mut u8,
    control: OwnedFd,
    factory_request: OwnedFd,
    /// The reply sequence before the factory's first reply, which says
    /// how its set-up went.
    factory_setup_seq: u32,
    /// That reply came, and said the factory is confined.
    factory_ready: AtomicBool,
    acks: Vec<OwnedFd>,
    free_slots: Mutex<Vec<usize>>,
    retired_counts: Mutex<ExitCounts>,
    stubs: AtomicU32,
    /// Contexts inside [`TrapContext::run`]: each may keep two cores busy.
    running: AtomicU32,
    /// CPUs the sentry may run on.
    cpus: u32,
    /// Polls of a state word in [`SPIN_MAX_NS`], measured at start.
    spin_max: u32,
}

/// The longest one side polls the state word before it sleeps.
const SPIN_MAX_NS: u64 = 20_000;

/// How many polls of a word take about `ns` on this CPU: `pause`'s
/// latency varies tenfold between CPU models.
fn polls_in(ns: u64) -> u32 {
    const ROUNDS: u32 = 4096;
    let word = AtomicU32::new(0);
    let start = Instant::now();
    for _ in 0..ROUNDS {
        if word.load(Ordering::Acquire) != 0 {
            break;
        }
        std::hint::spin_loop();
    }
    let elapsed = start.elapsed().as_nanos().max(1) as u64;
    (ROUNDS as u64 * ns / elapsed).clamp(1, stub::SPIN_CAP as u64) as u32
}

// SAFETY: `base` maps the control file for the life of the process; every
// access through it is atomic or to memory owned by one party at a time.
unsafe impl Send for Shared {}
// SAFETY: as above.
unsafe impl Sync for Shared {}

fn errno() -> rustix::io::Errno {
    rustix::io::Errno::from_raw_os_error(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO))
}

impl Shared {
    fn page(&self) -> control::FactoryPage {
        control::FactoryPage(self.base)
    }

    /// Waits, the first time, for the factory to have confined itself
    /// (it does so while the sentry goes on setting up); an error if it
    /// could not, every time. Called with the factory's request lock.
    fn factory_confined(&self) -> Result<(), PlatformError> {
        if self.factory_ready.load(Ordering::Acquire) {
            return Ok(());
        }
        let page = self.page();
        let kept = factory::setup_outcome(page.wait_reply(self.factory_setup_seq), page.setup_kept())
            .map_err(PlatformError::Unavailable)?;
        if kept & factory::KEPT_ROOT != 0 {
            tracing::debug!("the stub factory keeps the sentry's root: the host refused it a root of its own");
        }
        if kept & factory::KEPT_IDS != 0 {
            tracing::debug!("the stub factory keeps root's ids: the host refused to change them");
        }
        self.factory_ready.store(true, Ordering::Release);
        Ok(())
    }

    /// Waits until the ack eventfd of `slot` is written; true if the stub
    /// there is alive.
    fn wait_ack(&self, slot: usize) -> bool {
        let fd = self.acks[slot].as_raw_fd();
        loop {
            let mut n = 0u64;
            // SAFETY: reads 8 bytes into a live local.
            let r = unsafe { libc::read(fd, (&mut n as *mut u64).cast(), 8) };
            if r == 8 {
                return !self.page().is_dead(slot);
            }
            if self.page().is_dead(slot) {
                return false;
            }
            let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
            // SAFETY: polls one live descriptor.
            unsafe { libc::poll(&mut p, 1, -1) };
        }
    }

    fn drain_ack(&self, slot: usize) {
        let mut n = 0u64;
        // SAFETY: reads 8 bytes into a live local; the eventfd is
        // non-blocking.
        unsafe { libc::read(self.acks[slot].as_raw_fd(), (&mut n as *mut u64).cast(), 8) };
    }
}

/// The trap platform.
pub struct TrapPlatform {
    shared: Arc<Shared>,
    tsc: tsc::HostTsc,
}

fn eventfd(flags: i32) -> Result<OwnedFd, PlatformError> {
    // SAFETY: plain call; the result is a new descriptor we own.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | flags) };
    if fd < 0 {
        return Err(PlatformError::host("eventfd", errno()));
    }
    // SAFETY: fd is new and ours.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl TrapPlatform {
    /// Starts the factory of stubs, whose memory comes from `mem`. Must run
    /// before the sentry confines itself. Run by root, the stubs take
    /// `unprivileged_id` as their user and group ids: those a sentry of
    /// root's takes, so that it may still signal them.
    pub fn new(mem: Arc<MemoryFile>, unprivileged_id: u32) -> Result<Self, PlatformError> {
        // The handler saves and restores the application's FS and GS bases
        // with the FSGSBASE instructions, which the kernel must allow.
        const HWCAP2_FSGSBASE: u64 = 1 << 1;
        // SAFETY: reads the auxiliary vector.
        if unsafe { libc::getauxval(libc::AT_HWCAP2) } & HWCAP2_FSGSBASE == 0 {
            return Err(PlatformError::Unavailable("the host kernel does not allow FSGSBASE in user mode".into()));
        }
        // SAFETY: plain call with a static name.
        let fd = unsafe { libc::memfd_create(c"cordon-trap-control".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(PlatformError::host("memfd_create", errno()));
        }
        // SAFETY: fd is new and ours.
        let control = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: sizes the file we own.
        if unsafe { libc::ftruncate(fd, control::FILE_SIZE as libc::off_t) } != 0 {
            return Err(PlatformError::host("ftruncate", errno()));
        }
        // SAFETY: a new shared mapping of the whole file, kept for the life
        // of the process.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                control::FILE_SIZE as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(PlatformError::host("mmap control file", errno()));
        }
        let request = eventfd(0)?;
        // A descriptor per slot besides the sandbox's own host files: take
        // the whole allowance the host gives, not the customary 1024.
        let mut nofile = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: reads and sets this process's limit through a live local.
        unsafe {
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut nofile) == 0 && nofile.rlim_cur < nofile.rlim_max {
                nofile.rlim_cur = nofile.rlim_max;
                libc::setrlimit(libc::RLIMIT_NOFILE, &nofile);
            }
        }
        let acks = (0..control::MAX_STUBS).map(|_| eventfd(libc::EFD_NONBLOCK)).collect::<Result<Vec<_>, _>>()?;
        let fds = factory::FactoryFds {
            control: control.as_raw_fd(),
            memory: mem.fd().as_raw_fd(),
            request: request.as_raw_fd(),
            acks: acks.iter().map(|a| a.as_raw_fd()).collect::<Vec<RawFd>>(),
        };
        let factory_setup_seq = control::FactoryPage(base.cast()).reply_seq();
        factory::spawn(&fds, base.cast(), unprivileged_id).map_err(|e| {
            PlatformError::host(
                "fork stub factory",
                rustix::io::Errno::from_raw_os_error(e.raw_os_error().unwrap_or(0)),
            )
        })?;
        Ok(TrapPlatform {
            shared: Arc::new(Shared {
                _mem: mem,
                base: base.cast(),
                control,
                factory_request: request,
                factory_setup_seq,
                factory_ready: AtomicBool::new(false),
                acks,
                free_slots: Mutex::new((0..control::MAX_STUBS).rev().collect()),
                retired_counts: Mutex::new(ExitCounts::default()),
                stubs: AtomicU32::new(0),
                running: AtomicU32::new(0),
                cpus: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
                spin_max: polls_in(SPIN_MAX_NS),
            }),
            tsc: tsc::HostTsc::new(),
        })
    }
}

impl Platform for TrapPlatform {
    fn name(&self) -> &'static str {
        "trap"
    }

    fn new_address_space(&self) -> Result<Arc<dyn AddressSpace>, PlatformError> {
        Ok(Arc::new(TrapAddressSpace { stub: Stub::start(&self.shared)? }))
    }

    fn new_context(&self) -> Result<Box<dyn Context>, PlatformError> {
        Ok(Box::new(TrapContext {
            shared: self.shared.clone(),
            thread: None,
            kick: Arc::new(Kick { pending: AtomicBool::new(false), target: Mutex::new((0, 0)) }),
            cpu: Arc::new(StubCpuClock::default()),
            pending_fp: Some(FpState::default()),
            counts: ExitCounts::default(),
            sentry_polls: self.shared.spin_max,
            stub_polls: self.shared.spin_max,
            stub_polled: false,
            fast_path: None,
            resumed: Registers::default(),
            next_fast_site: 0,
            last_call_rewritten: false,
        }))
    }

    fn stats(&self) -> PlatformStats {
        PlatformStats::default()
    }

    fn exit_counts(&self) -> ExitCounts {
        *self.shared.retired_counts.lock().unwrap()
    }

    fn enable_timing(&self) {}

    fn release_cached(&self) {}

    fn syscall_trampoline(&self) -> Option<crate::Trampoline> {
        Some(crate::Trampoline { entry: stub::trampoline().entry, code: None, answers_in_table: false, only: None })
    }

    fn guest_tsc_khz(&self) -> Option<u64> {
        // Application code runs on the host CPU and reads the host's TSC.
        self.tsc.khz()
    }

    fn cpu_number_in_tsc_aux(&self) -> bool {
        // Linux keeps each CPU's number in its TSC_AUX wherever the CPU
        // has RDTSCP, and application code runs on the host's CPUs.
        crate::arch::has_rdtscp()
    }
}

/// One stub process.
struct Stub {
    shared: Arc<Shared>,
    slot: usize,
    pid: i32,
    inner: Mutex<StubInner>,
}

struct StubInner {
    /// Operations not yet sent: (kind, a, b, c, d).
    pending: Vec<[u64; 5]>,
    seq: u32,
    /// Thread areas handed to contexts (index 0 unused).
    areas_in_use: Vec<bool>,
    dead: bool,
}

impl Stub {
    fn start(shared: &Arc<Shared>) -> Result<Arc<Stub>, PlatformError> {
        let slot = shared.free_slots.lock().unwrap().pop().ok_or(PlatformError::NoCpu)?;
        let pid = {
            // The factory takes one request at a time; the slot lock
            // serialises them.
            let _one = shared.free_slots.lock().unwrap();
            if let Err(e) = shared.factory_confined() {
                drop(_one);
                shared.free_slots.lock().unwrap().push(slot);
                return Err(e);
            }
            control::slot_u32(shared.base, slot, stub::REQ_SEQ).store(0, Ordering::Release);
            control::slot_u64(shared.base, slot, stub::REQ_ONE).store(1, Ordering::Release);
            shared.drain_ack(slot);
            let page = shared.page();
            let seq = page.reply_seq();
            page.set_request_slot(slot as u32);
            let one = 1u64;
            // SAFETY: writes 8 bytes from a live local to our eventfd.
            unsafe { libc::write(shared.factory_request.as_raw_fd(), (&one as *const u64).cast(), 8) };
            page.wait_reply(seq)
        };
        if pid <= 0 {
            shared.free_slots.lock().unwrap().push(slot);
            return Err(PlatformError::Unavailable("the stub factory is gone".into()));
        }
        shared.stubs.fetch_add(1, Ordering::Relaxed);
        let s = Arc::new(Stub {
            shared: shared.clone(),
            slot,
            pid,
            inner: Mutex::new(StubInner {
                pending: Vec::new(),
                seq: 0,
                areas_in_use: vec![false; stub::MAX_THREADS + 1],
                dead: false,
            }),
        });
        // The first acknowledged request says the stub is up.
        let mut inner = s.inner.lock().unwrap();
        s.send(&mut inner)?;
        drop(inner);
        Ok(s)
    }

    fn push(&self, inner: &mut StubInner, op: [u64; 5]) -> Result<(), PlatformError> {
        inner.pending.push(op);
        if inner.pending.len() >= stub::MAX_OPS { self.send(inner) } else { Ok(()) }
    }

    /// Sends the pending operations and waits for the stub to have done
    /// them.
    fn send(&self, inner: &mut StubInner) -> Result<(), PlatformError> {
        if inner.dead {
            inner.pending.clear();
            return Err(PlatformError::CpuFailure("stub process died".into()));
        }
        let ops = std::mem::take(&mut inner.pending);
        for chunk in ops.chunks(stub::MAX_OPS).map(Some).chain(ops.is_empty().then_some(None)) {
            let chunk = chunk.unwrap_or(&[]);
            let mut err = self.post(inner, chunk)?;
            if err == -(libc::ENOMEM as i64) {
                // The host gives a process only so many mappings
                // (vm.max_map_count), and scattered frames take one each.
                // The stub's mappings are only a cache of the memory
                // manager's, which enters a page again when it faults: drop
                // them all (whole mappings, which no split can refuse) and
                // apply the chunk again.
                tracing::debug!("trap stub {}: out of host mappings, dropping them", self.pid);
                let wipe: Vec<[u64; 5]> =
                    outside_reserved(0, stub::TASK_TOP).map(|(a, l)| [stub::OP_UNMAP, a, l, 0, 0]).collect();
                self.post(inner, &wipe)?;
                err = self.post(inner, chunk)?;
            }
            if err != 0 {
                tracing::debug!("trap stub {}: request failed: {err}", self.pid);
            }
        }
        Ok(())
    }

    /// Hands the stub one batch of at most MAX_OPS operations and waits
    /// until it has done them; returns the first error among them.
    fn post(&self, inner: &mut StubInner, ops: &[[u64; 5]]) -> Result<i64, PlatformError> {
        let base = self.shared.base;
        for (i, op) in ops.iter().enumerate() {
            for (j, v) in op.iter().enumerate() {
                control::slot_u64(base, self.slot, stub::REQ_OPS + i * stub::OP_SIZE + j * 8)
                    .store(*v, Ordering::Relaxed);
            }
        }
        control::slot_u32(base, self.slot, stub::REQ_COUNT).store(ops.len() as u32, Ordering::Relaxed);
        inner.seq = inner.seq.wrapping_add(1).max(1);
        let w = control::slot_u32(base, self.slot, stub::REQ_SEQ);
        w.store(inner.seq, Ordering::Release);
        control::futex_wake(w);
        if !self.shared.wait_ack(self.slot) {
            inner.dead = true;
            return Err(PlatformError::CpuFailure("stub process died".into()));
        }
        Ok(control::slot_u64(base, self.slot, stub::RESP_ERR).load(Ordering::Acquire) as i64)
    }

    fn flush(&self) -> Result<(), PlatformError> {
        let mut inner = self.inner.lock().unwrap();
        if inner.pending.is_empty() {
            return Ok(());
        }
        self.send(&mut inner)
    }

    /// A new thread of this stub, parked in its handler.
    fn new_thread(self: &Arc<Self>) -> Result<StubThread, PlatformError> {
        let mut inner = self.inner.lock().unwrap();
        let base = self.shared.base;
        let high = self.shared.page().high(self.slot);
        let index = (1..=stub::MAX_THREADS.min(high + 1))
            .find(|i| {
                !inner.areas_in_use[*i]
                    && control::thread_state(base, self.slot, *i).load(Ordering::Acquire) == stub::STATE_DEAD
            })
            .ok_or(PlatformError::NoCpu)?;
        let state = control::thread_state(base, self.slot, index);
        state.store(stub::STATE_RUN, Ordering::Release);
        inner.areas_in_use[index] = true;
        self.shared.page().raise_high(self.slot, index);
        let area_va = stub::SLOT + index as u64 * stub::AREA;
        inner.pending.push([stub::OP_THREAD, area_va, 0, 0, 0]);
        let sent = self.send(&mut inner);
        let tid = control::slot_u64(base, self.slot, stub::RESP_TID).load(Ordering::Acquire) as i32;
        let err = control::slot_u64(base, self.slot, stub::RESP_ERR).load(Ordering::Acquire);
        drop(inner);
        let thread = StubThread { stub: self.clone(), index, tid };
        sent?;
        if err != 0 {
            return Err(PlatformError::CpuFailure(format!("stub thread not made: {}", err as i64)));
        }
        // Wait for it to park (its first trap is its own).
        thread.wait_event(0)?;
        thread.prepare_trampoline_frame()?;
        for i in 0..stub::FAST_SITES {
            thread.set_area_u64(stub::A_FAST_SITES + 8 * i, 0);
        }
        Ok(thread)
    }
}

impl Stub {
    fn control_fd(&self) -> RawFd {
        self.shared.control.as_raw_fd()
    }
}

impl Drop for Stub {
    fn drop(&mut self) {
        let inner = self.inner.get_mut().unwrap();
        inner.pending.clear();
        if !inner.dead {
            inner.pending.push([stub::OP_EXIT, 0, 0, 0, 0]);
            let mut inner =
                std::mem::replace(inner, StubInner { pending: vec![], seq: 0, areas_in_use: vec![], dead: true });
            // Acknowledged by the factory once the stub is gone.
            let _ = self.send(&mut inner);
            while !self.shared.page().is_dead(self.slot) {
                self.shared.wait_ack(self.slot);
            }
        }
        // Give the slot's memory back; its state words read as dead.
        // SAFETY: punches a hole in the control file we own, in a slot no
        // live stub maps.
        unsafe {
            libc::fallocate(
                self.control_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                control::slot_offset(self.slot) as libc::off_t,
                stub::SLOT_SIZE as libc::off_t,
            )
        };
        self.shared.page().reset_high(self.slot);
        self.shared.stubs.fetch_sub(1, Ordering::Relaxed);
        self.shared.free_slots.lock().unwrap().push(self.slot);
    }
}

/// An address space: the mappings of one stub process.
pub struct TrapAddressSpace {
    stub: Arc<Stub>,
}

/// `[va, va + len)` without the reserved range, as at most two pieces.
fn outside_reserved(va: u64, len: u64) -> impl Iterator<Item = (u64, u64)> {
    let end = va.saturating_add(len);
    let r = stub::RESERVED;
    let below = (va, end.min(r.start));
    let above = (va.max(r.end), end);
    [below, above].into_iter().filter(|(a, b)| a < b).map(|(a, b)| (a, b - a))
}

fn prot(access: Access) -> u64 {
    let mut p = 0;
    if access.read {
        p |= libc::PROT_READ;
    }
    if access.write {
        p |= libc::PROT_READ | libc::PROT_WRITE;
    }
    if access.execute {
        p |= libc::PROT_READ | libc::PROT_EXEC;
    }
    p as u64
}

impl TrapAddressSpace {
    /// Queues `op` (OP_MAP or OP_MAP_RESIDENT) for each run of consecutive
    /// frames.
    fn map_as(&self, op: u64, va: u64, frames: &[Frame], access: Access) -> Result<(), PlatformError> {
        let end = va + frames.len() as u64 * 4096;
        if va < stub::RESERVED.end && end > stub::RESERVED.start {
            return Err(PlatformError::Unavailable("address reserved for the trap platform's stub".into()));
        }
        let p = prot(access);
        let mut inner = self.stub.inner.lock().unwrap();
        let mut i = 0;
        while i < frames.len() {
            let mut n = 1;
            while i + n < frames.len() && frames[i + n].offset() == frames[i].offset() + n as u64 * 4096 {
                n += 1;
            }
            let at = va + i as u64 * 4096;
            self.stub.push(&mut inner, [op, at, n as u64 * 4096, p, frames[i].offset()])?;
            i += n;
        }
        Ok(())
    }
}

impl AddressSpace for TrapAddressSpace {
    fn map(&self, va: u64, frames: &[Frame], access: Access) -> Result<(), PlatformError> {
        self.map_as(stub::OP_MAP, va, frames, access)
    }

    fn map_resident(&self, va: u64, frames: &[Frame], access: Access) -> Result<(), PlatformError> {
        self.map_as(stub::OP_MAP_RESIDENT, va, frames, access)
    }

    fn unmap(&self, va: u64, len: u64) {
        let mut inner = self.stub.inner.lock().unwrap();
        for (a, l) in outside_reserved(va, len) {
            let _ = self.stub.push(&mut inner, [stub::OP_UNMAP, a, l, 0, 0]);
        }
    }

    fn protect(&self, va: u64, len: u64, access: Access) {
        let mut inner = self.stub.inner.lock().unwrap();
        for (a, l) in outside_reserved(va, len) {
            let _ = self.stub.push(&mut inner, [stub::OP_PROTECT, a, l, prot(access), 0]);
        }
    }

    fn flush(&self) {
        let _ = self.stub.flush();
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A stub thread a context runs on.
struct StubThread {
    stub: Arc<Stub>,
    index: usize,
    tid: i32,
}

// Offsets in ucontext_t and siginfo_t (x86_64).
const UC_GREGS: usize = 40;
const UC_FPREGS: usize = UC_GREGS + 23 * 8;
const UC_SIGMASK: usize = UC_GREGS + 256;
const UC_SIZE: usize = UC_SIGMASK + 128;
const SI_CODE: usize = 8;
const SI_ADDR: usize = 16;
const SI_ARCH: usize = 28;
const SI_SIZE: usize = 128;
// gregs indexes.
const REG_R8: usize = 0;
const REG_RIP: usize = 16;
const REG_EFL: usize = 17;
const REG_ERR: usize = 19;
const REG_TRAPNO: usize = 20;
const REG_CR2: usize = 22;
// The software-reserved bytes of a signal frame's XSAVE image.
const FPX_SW: usize = 464;
const FPX_SW_END: usize = 512;

impl StubThread {
    /// The failure of a thread that is gone: its whole stub, if the
    /// factory saw that end (an application cannot end its stub by any
    /// call or fault: such an end is the platform's fault, and says how).
    fn gone(&self) -> PlatformError {
        let page = self.stub.shared.page();
        // The kernel clears the thread's word before the factory reaps the
        // process: give the factory a moment to say how it ended.
        for _ in 0..100 {
            if page.is_dead(self.stub.slot) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let status = if page.is_dead(self.stub.slot) { page.wait_status(self.stub.slot) } else { None };
        PlatformError::CpuFailure(match status {
            Some(s) if libc::WIFSIGNALED(s) => {
                format!("stub process {} killed by signal {}", self.stub.pid, libc::WTERMSIG(s))
            }
            Some(s) => format!("stub process {} exited with status {}", self.stub.pid, libc::WEXITSTATUS(s)),
            None => "stub thread gone".into(),
        })
    }

    fn state(&self) -> &'static AtomicU32 {
        control::thread_state(self.stub.shared.base, self.stub.slot, self.index)
    }

    fn area_va(&self) -> u64 {
        stub::SLOT + self.index as u64 * stub::AREA
    }

    fn area_u64(&self, off: usize) -> u64 {
        control::slot_u64(self.stub.shared.base, self.stub.slot, self.index * stub::AREA as usize + off)
            .load(Ordering::Acquire)
    }

    fn set_area_u32(&self, off: usize, v: u32) {
        control::slot_u32(self.stub.shared.base, self.stub.slot, self.index * stub::AREA as usize + off)
            .store(v, Ordering::Release)
    }

    fn set_area_u64(&self, off: usize, v: u64) {
        control::slot_u64(self.stub.shared.base, self.stub.slot, self.index * stub::AREA as usize + off)
            .store(v, Ordering::Release)
    }

    /// The sentry's pointer to `len` bytes the stub has at `va`, if they lie
    /// in this thread's alternate stack.
    fn frame_ptr(&self, va: u64, len: usize) -> Option<*mut u8> {
        let lo = self.area_va() + 4096;
        let hi = self.area_va() + stub::AREA;
        if va < lo || va.checked_add(len as u64)? > hi {
            return None;
        }
        let off = control::slot_offset(self.stub.slot) + (va - stub::SLOT);
        // SAFETY: inside the control file's mapping, checked above.
        Some(unsafe { self.stub.shared.base.add(off as usize) })
    }

    fn ucontext(&self) -> Result<*mut u8, PlatformError> {
        self.frame_ptr(self.area_u64(stub::A_UCONTEXT), UC_SIZE)
            .ok_or_else(|| PlatformError::CpuFailure("stub signal frame out of place".into()))
    }

    /// The trampoline's frame, where it keeps the application's registers
    /// while the sentry has a call made through a rewritten site.
    fn trampoline_frame(&self) -> Result<*mut u8, PlatformError> {
        self.frame_ptr(self.area_va() + stub::FAKE_UC as u64, UC_SIZE)
            .ok_or_else(|| PlatformError::CpuFailure("trampoline frame out of place".into()))
    }

    /// Readies the trampoline's frame from the signal frame the thread is
    /// parked in: the FP pointer, and the XSAVE layout the kernel uses
    /// (its software-reserved bytes and component mask), which the
    /// trampoline's XSAVE then follows.
    fn prepare_trampoline_frame(&self) -> Result<(), PlatformError> {
        let uc = self.ucontext()?;
        // SAFETY: uc is a checked ucontext.
        let fp_va = unsafe { uc.add(UC_FPREGS).cast::<u64>().read_volatile() };
        let head = self.frame_ptr(fp_va, FPX_SW_END).ok_or_else(|| PlatformError::CpuFailure("no FP frame".into()))?;
        let fake_fp = self.area_va() + stub::FAKE_FP as u64;
        let fake =
            self.frame_ptr(fake_fp, FPX_SW_END).ok_or_else(|| PlatformError::CpuFailure("no FP frame".into()))?;
        // SAFETY: both images were checked for their first 512 bytes.
        let xfeatures = unsafe {
            std::ptr::copy_nonoverlapping(head.add(FPX_SW), fake.add(FPX_SW), FPX_SW_END - FPX_SW);
            head.add(FPX_SW + 8).cast::<u64>().read_unaligned()
        };
        self.set_area_u64(stub::A_XMASK, xfeatures);
        let frame = self.trampoline_frame()?;
        // SAFETY: inside the checked trampoline frame.
        unsafe { frame.add(UC_FPREGS).cast::<u64>().write_volatile(fake_fp) };
        Ok(())
    }

    /// Waits for the thread to post an event, polling `polls` times
    /// before sleeping (see the handoff in the module docs); true if the
    /// polls ran out.
    fn wait_event(&self, polls: u32) -> Result<bool, PlatformError> {
        let w = self.state();
        let mut left = polls;
        loop {
            let s = w.load(Ordering::Acquire);
            match s {
                stub::STATE_EVENT | stub::STATE_EVENT_SLEEPING => return Ok(left == 0),
                stub::STATE_RUN | stub::STATE_RUN_SLEEPING => {}
                _ => return Err(self.gone()),
            }
            if left > 0 {
                left -= 1;
                std::hint::spin_loop();
                continue;
            }
            if s == stub::STATE_RUN
                && w.compare_exchange(s, stub::STATE_RUN_SLEEPING, Ordering::AcqRel, Ordering::Acquire).is_err()
            {
                continue;
            }
            control::futex_wait(w, stub::STATE_RUN_SLEEPING);
        }
    }
}

impl Drop for StubThread {
    fn drop(&mut self) {
        let w = self.state();
        for parked in [stub::STATE_EVENT, stub::STATE_EVENT_SLEEPING] {
            if w.compare_exchange(parked, stub::STATE_EXIT, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                control::futex_wake(w);
            }
        }
        self.stub.inner.lock().unwrap().areas_in_use[self.index] = false;
    }
}

fn greg(uc: *mut u8, i: usize) -> u64 {
    // SAFETY: `uc` was bounds-checked for a whole ucontext.
    unsafe { uc.add(UC_GREGS + 8 * i).cast::<u64>().read_volatile() }
}

fn set_greg(uc: *mut u8, i: usize, v: u64) {
    // SAFETY: as in greg.
    unsafe { uc.add(UC_GREGS + 8 * i).cast::<u64>().write_volatile(v) }
}

/// gregs order of the registers from R8 to RSP.
fn gregs_of(r: &mut Registers) -> [&mut u64; 16] {
    [
        &mut r.r8, &mut r.r9, &mut r.r10, &mut r.r11, &mut r.r12, &mut r.r13, &mut r.r14, &mut r.r15, &mut r.rdi,
        &mut r.rsi, &mut r.rbp, &mut r.rbx, &mut r.rdx, &mut r.rax, &mut r.rcx, &mut r.rsp,
    ]
}

struct Kick {
    pending: AtomicBool,
    /// The stub process and thread running the context's code, or zeros.
    target: Mutex<(i32, i32)>,
}

impl Interrupter for Kick {
    fn interrupt(&self) {
        self.pending.store(true, Ordering::Release);
        let (pid, tid) = *self.target.lock().unwrap();
        if tid > 0 {
            // SAFETY: signals one thread of a stub process of ours; a stale
            // tid fails harmlessly (tgkill checks the thread group).
            unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, KICK_SIGNAL) };
        }
    }
}

/// The CPU time of a context's stub threads: the host's count for the
/// thread it runs on now (`/proc/PID/task/TID/schedstat`, nanoseconds the
/// scheduler ran it) and what the threads it left behind had used. The
/// count is opened at each reading: a descriptor held per context would
/// cost one host descriptor per sandbox thread.
#[derive(Default)]
struct StubCpuClock {
    retired: std::sync::atomic::AtomicU64,
    /// The current thread, and its last reading: a thread the host ended
    /// (its stub killed) keeps what it had.
    current: Mutex<Option<(i32, i32, u64)>>,
}

impl StubCpuClock {
    fn read(pid: i32, tid: i32) -> Option<u64> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/schedstat")).ok()?;
        text.split_whitespace().next()?.parse().ok()
    }

    fn live(cur: &mut Option<(i32, i32, u64)>) -> u64 {
        match cur {
            Some((pid, tid, last)) => {
                *last = Self::read(*pid, *tid).unwrap_or(*last).max(*last);
                *last
            }
            None => 0,
        }
    }

    /// Starts counting the stub thread `tid` of process `pid`, after the
    /// one before it, which no longer runs.
    fn follow(&self, pid: i32, tid: i32) {
        self.leave();
        *self.current.lock().unwrap() = Some((pid, tid, 0));
    }

    /// Stops counting the current thread: what it used so far is kept.
    fn leave(&self) {
        let mut cur = self.current.lock().unwrap();
        // Retired before the thread is let go, so no reader sees it twice
        // or not at all.
        self.retired.fetch_add(Self::live(&mut cur), Ordering::AcqRel);
        *cur = None;
    }
}

impl CpuClock for StubCpuClock {
    fn consumed(&self) -> std::time::Duration {
        let mut cur = self.current.lock().unwrap();
        let live = Self::live(&mut cur);
        std::time::Duration::from_nanos(self.retired.load(Ordering::Acquire) + live)
    }
}

/// A context: one stub thread at a time, in the stub of the address space
/// it last ran.
pub struct TrapContext {
    shared: Arc<Shared>,
    thread: Option<StubThread>,
    kick: Arc<Kick>,
    cpu: Arc<StubCpuClock>,
    /// FP state to load into the frame before the thread next runs.
    pending_fp: Option<FpState>,
    counts: ExitCounts,
    /// Polls before sleeping of the sentry waiting for an event, and of
    /// the handler waiting for the sentry: halved when they ran out,
    /// restored when they sufficed.
    sentry_polls: u32,
    stub_polls: u32,
    /// The handler was allowed to poll at the last handoff: only then does
    /// its sleep say that its polls ran out.
    stub_polled: bool,
    /// The answers the handler may give without the sentry.
    fast_path: Option<FastPathState>,
    /// The registers the thread was last given to run with.
    resumed: Registers,
    /// The entry of the thread's fast-path sites to fill next.
    next_fast_site: usize,
    /// The last event was a call through the trampoline.
    last_call_rewritten: bool,
}

impl TrapContext {
    fn write_fp(&self, t: &StubThread, fp: &FpState) -> Result<(), PlatformError> {
        Self::write_fp_at(t, t.ucontext()?, fp)
    }

    fn write_fp_at(t: &StubThread, uc: *mut u8, fp: &FpState) -> Result<(), PlatformError> {
        // SAFETY: uc is a checked ucontext.
        let fp_va = unsafe { uc.add(UC_FPREGS).cast::<u64>().read_volatile() };
        let head = t.frame_ptr(fp_va, FPX_SW_END).ok_or_else(|| PlatformError::CpuFailure("no FP frame".into()))?;
        // SAFETY: 512 bytes at head were checked.
        let (xfeatures, size) = unsafe {
            (head.add(FPX_SW + 8).cast::<u64>().read_unaligned(), head.add(FPX_SW + 16).cast::<u32>().read_unaligned())
        };
        let size = (size as usize).clamp(FPX_SW_END, FpState::SIZE);
        let p = t.frame_ptr(fp_va, size).ok_or_else(|| PlatformError::CpuFailure("FP frame out of place".into()))?;
        // SAFETY: `size` bytes at p were checked; the software-reserved
        // bytes the kernel checks are kept.
        unsafe {
            std::ptr::copy_nonoverlapping(fp.0.as_ptr(), p, FPX_SW);
            if size > FPX_SW_END {
                std::ptr::copy_nonoverlapping(fp.0.as_ptr().add(FPX_SW_END), p.add(FPX_SW_END), size - FPX_SW_END);
                let bv = p.add(FPX_SW_END).cast::<u64>();
                bv.write_unaligned(bv.read_unaligned() & xfeatures);
            }
        }
        Ok(())
    }

    fn read_fp(&self, t: &StubThread) -> Result<FpState, PlatformError> {
        Self::read_fp_at(t, t.ucontext()?)
    }

    fn read_fp_at(t: &StubThread, uc: *mut u8) -> Result<FpState, PlatformError> {
        // SAFETY: uc is a checked ucontext.
        let fp_va = unsafe { uc.add(UC_FPREGS).cast::<u64>().read_volatile() };
        let head = t.frame_ptr(fp_va, FPX_SW_END).ok_or_else(|| PlatformError::CpuFailure("no FP frame".into()))?;
        // SAFETY: checked as above.
        let size = unsafe { head.add(FPX_SW + 16).cast::<u32>().read_unaligned() } as usize;
        let size = size.clamp(FPX_SW_END, FpState::SIZE);
        let p = t.frame_ptr(fp_va, size).ok_or_else(|| PlatformError::CpuFailure("FP frame out of place".into()))?;
        let mut fp = FpState(Box::new([0u8; FpState::SIZE]));
        // SAFETY: `size` bytes at p were checked.
        unsafe { std::ptr::copy_nonoverlapping(p, fp.0.as_mut_ptr(), size) };
        fp.0[FPX_SW..FPX_SW_END].fill(0);
        Ok(fp)
    }

    fn event(&mut self, t: &StubThread, regs: &mut Registers) -> Result<Event, PlatformError> {
        let uc = t.ucontext()?;
        for (i, r) in gregs_of(regs).into_iter().enumerate() {
            *r = greg(uc, REG_R8 + i);
        }
        regs.rip = greg(uc, REG_RIP);
        regs.rflags = greg(uc, REG_EFL);
        regs.fs_base = t.area_u64(stub::A_FS);
        regs.gs_base = t.area_u64(stub::A_GS);
        let signo = t.area_u64(stub::A_SIGNO) as u32 as i32;
        let info = t.frame_ptr(t.area_u64(stub::A_INFO), SI_SIZE);
        let read = |off: usize| -> u64 {
            // SAFETY: inside the checked siginfo.
            info.map_or(0, |p| unsafe { p.add(off).cast::<u64>().read_unaligned() })
        };
        let trapno = greg(uc, REG_TRAPNO) as u8;
        let error_code = greg(uc, REG_ERR);
        self.last_call_rewritten = signo == stub::SIGNO_TRAMPOLINE as i32;
        if self.last_call_rewritten {
            self.counts.syscalls += 1;
            self.counts.rewritten_calls += 1;
            return Ok(Event::Syscall);
        }
        let tramp = stub::trampoline();
        if (tramp.entry..tramp.end).contains(&regs.rip)
            && let Some(e) = self.in_trampoline(t, &tramp, signo, regs)?
        {
            return Ok(e);
        }
        let c = &mut self.counts;
        Ok(match signo {
            libc::SIGSYS if read(SI_ARCH) as u32 == 0xc000_003e => {
                c.syscalls += 1;
                Event::Syscall
            }
            libc::SIGSEGV if trapno == crate::arch::vector::PAGE_FAULT => {
                c.page_faults += 1;
                let access = if error_code & 0x10 != 0 {
                    Access { execute: true, ..Access::NONE }
                } else if error_code & 0x2 != 0 {
                    Access { write: true, ..Access::NONE }
                } else {
                    Access { read: true, ..Access::NONE }
                };
                Event::Fault(Fault { addr: greg(uc, REG_CR2), access, present: error_code & 1 != 0 })
            }
            libc::SIGBUS => {
                c.page_faults += 1;
                Event::Fault(Fault {
                    addr: read(SI_ADDR),
                    access: Access { read: true, ..Access::NONE },
                    present: true,
                })
            }
            // `int $0x80`, the only way to a foreign system call: the
            // general protection fault a kernel without IA-32 emulation
            // gives (the IDT entry 0x80 named in the error code), at the
            // instruction, as the kvm platform reports it.
            libc::SIGSYS => {
                c.exceptions += 1;
                regs.rip = regs.rip.wrapping_sub(2);
                Event::Exception(Exception {
                    vector: crate::arch::vector::GENERAL_PROTECTION,
                    error_code: 0x80 << 3 | 2,
                })
            }
            libc::SIGSEGV | libc::SIGILL | libc::SIGFPE | libc::SIGTRAP => {
                c.exceptions += 1;
                let _ = read(SI_CODE);
                Event::Exception(Exception { vector: trapno, error_code })
            }
            _ => {
                c.interrupts += 1;
                self.kick.pending.store(false, Ordering::Release);
                Event::Interrupted
            }
        })
    }
}

impl TrapContext {
    /// A signal that stopped the thread inside the trampoline, with
    /// `regs` read from its frame: makes `regs` what the application
    /// would see. In a fast path, or on the way to the cell's fallback,
    /// the call has not happened: the thread is put back at its site
    /// (past it once the fast path committed). On the way back from the
    /// sentry it has not resumed: its registers are the ones the sentry
    /// gave. Returns the event to report instead of the signal's own.
    fn in_trampoline(
        &mut self,
        t: &StubThread,
        tramp: &stub::TrampolineCode,
        signo: i32,
        regs: &mut Registers,
    ) -> Result<Option<Event>, PlatformError> {
        let rip = regs.rip;
        // A kick after the sentry answered, before the registers it gave
        // ran (the handler passes on only those, of the kicks that land
        // in the handoff), is an interruption of those registers.
        if rip >= tramp.returning || (rip >= tramp.posted && signo == KICK_SIGNAL) {
            *regs = self.resumed;
            self.pending_fp = Some(Self::read_fp_at(t, t.trampoline_frame()?).unwrap_or_default());
            return Ok(Some(if signo == KICK_SIGNAL {
                self.counts.interrupts += 1;
                self.kick.pending.store(false, Ordering::Release);
                Event::Interrupted
            } else {
                // Only an application that scribbled its frame makes the
                // way back fault.
                self.counts.exceptions += 1;
                Event::Exception(Exception { vector: crate::arch::vector::GENERAL_PROTECTION, error_code: 0 })
            }));
        }
        if rip >= tramp.posting {
            // Other kicks there are left pending by the handler (the
            // sentry finds them when it next switches to the thread), and
            // nothing there faults.
            return Err(PlatformError::CpuFailure(format!("signal {signo} while posting a call")));
        }
        if rip == tramp.commit || rip == tramp.kept_commit {
            regs.rip = regs.rcx;
        } else if (tramp.kept..tramp.kept_end).contains(&rip) {
            // Sent from a kept site's `syscall`, rax still the number.
            regs.rip = regs.rcx.wrapping_sub(2);
        } else {
            regs.rsp = regs.rsp.wrapping_add(match rip {
                r if r == tramp.lowered || r == tramp.popped => 128,
                r if r == tramp.pushed => 136,
                _ => 0,
            });
            regs.rip = regs.rcx.wrapping_sub(crate::arch::rewrite::SITE_LEN as u64);
        }
        Ok(None)
    }
}

impl Context for TrapContext {
    fn switch(&mut self, space: &dyn AddressSpace, regs: &mut Registers) -> Result<Event, PlatformError> {
        let space = trap_space(space)?;
        self.enter(space)?;
        space.stub.flush()?;
        if self.kick.pending.swap(false, Ordering::AcqRel) {
            self.counts.interrupts += 1;
            return Ok(Event::Interrupted);
        }
        let t = self.thread.take().expect("a thread");
        let result = self.run(&t, regs);
        self.thread = Some(t);
        result
    }

    fn interrupter(&self) -> Arc<dyn Interrupter> {
        self.kick.clone()
    }

    fn cpu_clock(&self) -> Arc<dyn CpuClock> {
        self.cpu.clone()
    }

    fn attach(&mut self, space: &dyn AddressSpace) -> Result<(), PlatformError> {
        self.enter(trap_space(space)?)
    }

    fn fp_state(&mut self) -> Result<FpState, PlatformError> {
        if let Some(fp) = &self.pending_fp {
            return Ok(fp.clone());
        }
        match &self.thread {
            Some(t) => self.read_fp(t),
            None => Ok(FpState::default()),
        }
    }

    fn set_fp_state(&mut self, state: &FpState) -> Result<(), PlatformError> {
        self.pending_fp = Some(state.clone());
        Ok(())
    }

    fn exit_counts(&self) -> ExitCounts {
        self.counts
    }

    fn publish_fast_path(&mut self, state: Option<FastPathState>) {
        self.fast_path = state;
    }

    fn last_call_rewritten(&self) -> bool {
        self.last_call_rewritten
    }

    fn fast_path_site_kept(&mut self, ret: u64) {
        if let Some(t) = &self.thread {
            t.set_area_u64(stub::A_FAST_SITES + 8 * self.next_fast_site, ret);
            self.next_fast_site = (self.next_fast_site + 1) % stub::FAST_SITES;
        }
    }
}

fn trap_space(space: &dyn AddressSpace) -> Result<&TrapAddressSpace, PlatformError> {
    space
        .as_any()
        .downcast_ref::<TrapAddressSpace>()
        .ok_or_else(|| PlatformError::CpuFailure("not a trap address space".into()))
}

impl TrapContext {
    /// Gives the context a thread in `space`'s stub, unless it has one.
    fn enter(&mut self, space: &TrapAddressSpace) -> Result<(), PlatformError> {
        if self.thread.as_ref().is_none_or(|t| !Arc::ptr_eq(&t.stub, &space.stub)) {
            if let Some(t) = self.thread.take() {
                // Keep the FP state across the move.
                if self.pending_fp.is_none() {
                    self.pending_fp = self.read_fp(&t).ok();
                }
                *self.kick.target.lock().unwrap() = (0, 0);
                self.cpu.leave();
                drop(t);
            }
            let t = space.stub.new_thread()?;
            *self.kick.target.lock().unwrap() = (space.stub.pid, t.tid);
            self.cpu.follow(space.stub.pid, t.tid);
            self.thread = Some(t);
        }
        Ok(())
    }

    fn run(&mut self, t: &StubThread, regs: &mut Registers) -> Result<Event, PlatformError> {
        let uc = t.ucontext()?;
        self.resumed = *regs;
        let mut r = *regs;
        for (i, v) in gregs_of(&mut r).into_iter().enumerate() {
            set_greg(uc, REG_R8 + i, *v);
        }
        set_greg(uc, REG_RIP, regs.rip);
        set_greg(uc, REG_EFL, regs.sanitized_flags());
        // SAFETY: inside the checked ucontext.
        unsafe { uc.add(UC_SIGMASK).cast::<u64>().write_volatile(0) };
        t.set_area_u64(stub::A_FS, regs.fs_base);
        t.set_area_u64(stub::A_GS, regs.gs_base);
        if let Some(state) = &self.fast_path {
            for (i, v) in state.answers().into_iter().enumerate() {
                t.set_area_u64(stub::A_FAST_ANSWERS + 8 * i, v);
            }
            t.set_area_u64(stub::A_AFFINITY, state.affinity.unwrap_or(0));
        }
        t.set_area_u32(stub::A_AFFINITY_ON, self.fast_path.is_some_and(|s| s.affinity.is_some()) as u32);
        t.set_area_u32(stub::A_FAST_ON, self.fast_path.is_some() as u32);
        if let Some(fp) = self.pending_fp.take() {
            self.write_fp(t, &fp)?;
        }
        self.counts.entries += 1;
        let shared = &self.shared;
        let running = shared.running.fetch_add(1, Ordering::AcqRel) + 1;
        let core_free = running.saturating_mul(2) <= shared.cpus;
        let w = t.state();
        let before = w.swap(stub::STATE_RUN, Ordering::AcqRel);
        if before != stub::STATE_EVENT {
            control::futex_wake(w);
        }
        // The handler's polls ran out if it announced sleep.
        if self.stub_polled {
            self.stub_polls = adapt(self.stub_polls, before == stub::STATE_EVENT_SLEEPING, shared.spin_max);
        }
        // For the handler's next wait, which begins after this run.
        t.set_area_u32(stub::A_SPIN, if core_free { self.stub_polls } else { 0 });
        self.stub_polled = core_free;
        let polls = if core_free { self.sentry_polls } else { 0 };
        let waited = t.wait_event(polls);
        shared.running.fetch_sub(1, Ordering::AcqRel);
        let ran_out = waited?;
        if core_free {
            self.sentry_polls = adapt(self.sentry_polls, ran_out, shared.spin_max);
        }
        // The thread is parked: its counts of calls answered in the
        // handler are ours to take.
        for i in 0..FAST_PATH_SYSCALLS.len() {
            let hits = t.area_u64(stub::A_FAST_HITS + 8 * i);
            if hits != 0 {
                t.set_area_u64(stub::A_FAST_HITS + 8 * i, 0);
                self.counts.fast_path[i] += hits;
            }
        }
        self.event(t, regs)
    }
}

/// The next poll budget after one that ran out or sufficed: halved down
/// to a sixteenth of `max` (so that a lighter load is noticed again), or
/// back to `max`.
fn adapt(polls: u32, ran_out: bool, max: u32) -> u32 {
    if ran_out { (polls / 2).max(max / 16) } else { max }
}

impl Drop for TrapContext {
    fn drop(&mut self) {
        // The thread goes with the context: its time stays counted.
        self.cpu.leave();
        self.shared.retired_counts.lock().unwrap().add(&self.counts);
    }
}
