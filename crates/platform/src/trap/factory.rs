//! The factory: a process forked from the sentry before it confines
//! itself, which forks stub processes on request. The sentry's own seccomp
//! filter forbids making processes; the factory runs no application code
//! and takes requests only from the sentry, through the control file.
//!
//! The factory and the stubs run between `fork` and their own code with
//! nothing but raw system calls: a fork of a multi-threaded process must not
//! take locks or allocate.
//!
//! # Its confinement
//!
//! A sentry taken over by an attacker can post any request and scribble
//! the factory's page; the factory must then still do nothing but fork
//! stubs. Before it serves a request it gives up everything that job does
//! not need, in this order:
//!
//! - a root of its own: an empty, read-only tmpfs (`nosuid`, `nodev`,
//!   `noexec`) that is attached nowhere, entered with `chroot`. Neither the
//!   factory nor a stub opens a path: the memory file and the control file
//!   are descriptors. It is forked after the sentry made its namespaces
//!   (so it is in them), before the sentry enters its own root and drops
//!   its identity. Forking it later, between those steps and the sentry's
//!   filter, would not confine it more: it would get the sentry's root,
//!   with the served root and every writable bind, and (for root with a
//!   writable bind) root's file-system ids and the capabilities to write
//!   as root, all of which it would have to give up again; and the
//!   sentry's lock-down would have to call into the platform halfway. A
//!   caller without the capability to mount (one who is not root, where
//!   the host refuses user namespaces) leaves it on the root the sentry
//!   has.
//! - descriptors: the control file, the memory file, the request eventfd,
//!   its signalfd and the stubs' acknowledgement eventfds, moved to fixed
//!   numbers (`FD_CONTROL` up) so that its filter can name them; every
//!   other descriptor the sentry had (its served root, its terminal, its
//!   listeners) is closed.
//! - identity: started by root, the factory takes the ids the sentry
//!   takes, `unprivileged_id` (nobody), with no supplementary groups, as
//!   every stub did already; anyone else keeps its ids. It keeps no
//!   capability at all, in any set: nothing a stub does needs one (mapping
//!   the memory file at the stub's addresses, above `mmap_min_addr`;
//!   making threads; installing a filter, under `PR_SET_NO_NEW_PRIVS`),
//!   and the sentry may signal its stubs because they share its uid, not
//!   by a capability. Root of a user namespace that maps no nobody keeps
//!   uid 0, without capabilities, as the sentry does there.
//! - it is not dumpable (no process of its uid may ptrace it or read its
//!   memory), and neither are the stubs it forks;
//! - `PR_SET_NO_NEW_PRIVS`, which the stubs inherit, and the seccomp
//!   program of [`filter::factory`]: its own calls, with their descriptors,
//!   flags and sizes pinned, and the calls a new stub makes before it runs
//!   its own code. Every stub inherits that program beneath its own, which
//!   is why its default is to trap, not to kill: see there.
//!
//! What it keeps: the memory file and the control file, which it must hand
//! to every stub, so it reaches no more than all the stubs together; its
//! namespaces (the sentry's: its filter allows no call that would use its
//! network, IPC or UTS namespace, nor `kill`).
//!
//! A step the host refuses that only narrows the factory further (the
//! root, the ids) is done without, and the sentry logs it
//! (`RUST_LOG=debug`); one that the rest relies on (the descriptors, the
//! capabilities, `PR_SET_NO_NEW_PRIVS`, the filter) ends the factory, and
//! the sentry reports the platform unavailable rather than run stubs
//! forked by a factory that is not confined.

use std::os::fd::RawFd;

use super::{control, filter, stub};

/// Where the factory keeps its descriptors, whatever their numbers in the
/// sentry: its filter names them.
pub(crate) const FD_CONTROL: RawFd = 3;
pub(crate) const FD_MEMORY: RawFd = 4;
pub(crate) const FD_REQUEST: RawFd = 5;
pub(crate) const FD_SIGNALS: RawFd = 6;
/// The acknowledgement eventfd of slot `n` is `FD_ACKS + n`.
pub(crate) const FD_ACKS: RawFd = 7;
const FD_END: RawFd = FD_ACKS + control::MAX_STUBS as RawFd;
const _: () = assert!(FD_END < stub::MEM_FD, "a stub moves its two descriptors above the factory's");

/// rseq's flag and signature, as a stub unregisters the C library's area.
pub(crate) const RSEQ_FLAG_UNREGISTER: u32 = 1;
pub(crate) const RSEQ_SIG: u32 = 0x5305_3053;

/// What the factory needs, all made before it is forked.
pub(crate) struct FactoryFds {
    /// The control file (the factory page, then one slot per stub).
    pub control: RawFd,
    /// The sandbox's memory file.
    pub memory: RawFd,
    /// Written by the sentry when it posts a request.
    pub request: RawFd,
    /// One eventfd per slot: the stub's acknowledgements, and the
    /// factory's word that the stub died.
    pub acks: Vec<RawFd>,
}

/// Steps of the factory's confinement, as its set-up reply names the one
/// that failed, and bits of what it did without (see [`setup_outcome`]).
const STEPS: [&str; 6] =
    ["its descriptors", "its capabilities", "PR_SET_DUMPABLE", "PR_SET_NO_NEW_PRIVS", "its seccomp filter", "its ids"];
const STEP_FDS: i32 = 0;
const STEP_CAPS: i32 = 1;
const STEP_DUMPABLE: i32 = 2;
const STEP_NO_NEW_PRIVS: i32 = 3;
const STEP_FILTER: i32 = 4;
const STEP_IDS: i32 = 5;
/// Done without: the empty root; the unprivileged ids.
pub(crate) const KEPT_ROOT: u32 = 1;
pub(crate) const KEPT_IDS: u32 = 2;

/// How the factory's set-up ended, from its reply: `Ok` with what it did
/// without (`KEPT_*` bits), or the step that failed.
pub(crate) fn setup_outcome(reply: i32, kept: u32) -> Result<u32, String> {
    if reply >= 0 {
        return Ok(kept);
    }
    let code = reply.unsigned_abs();
    let step = STEPS.get((code >> 16) as usize).copied().unwrap_or("its set-up");
    Err(format!(
        "the stub factory could not confine itself: {step}: {}",
        std::io::Error::from_raw_os_error((code & 0xffff) as i32)
    ))
}

/// Forks the factory; returns its pid. Run by root, it takes
/// `unprivileged_id` as its ids, and so do the stubs it forks.
pub(crate) fn spawn(fds: &FactoryFds, base: *mut u8, unprivileged_id: u32) -> std::io::Result<i32> {
    let control_filter = filter::control();
    let thread_filter = filter::thread();
    let mut code = vec![0u8; stub::CODE_SIZE as usize];
    let blob = stub::code();
    assert!(blob.len() + 4096 <= code.len() / 2, "the stub's code fits its area");
    code[..blob.len()].copy_from_slice(blob);
    let filters_at = code.len() / 2;
    let as_bytes = |f: &[filter::Insn]| {
        // SAFETY: Insn is repr(C) plain data with no padding (2+1+1+4 bytes).
        unsafe { std::slice::from_raw_parts(f.as_ptr().cast::<u8>(), std::mem::size_of_val(f)) }.to_vec()
    };
    let c = as_bytes(&control_filter);
    let t = as_bytes(&thread_filter);
    code[filters_at..filters_at + c.len()].copy_from_slice(&c);
    let thread_at = filters_at + c.len().next_multiple_of(64);
    code[thread_at..thread_at + t.len()].copy_from_slice(&t);
    let plan = StubPlan {
        code,
        control_prog: (control_filter.len() as u16, stub::CODE + filters_at as u64),
        thread_prog: (thread_filter.len() as u16, stub::CODE + thread_at as u64),
        factory_filter: filter::factory(),
        unprivileged_id,
    };
    // Its descriptors in the order of their fixed numbers.
    let mut keep = vec![fds.control, fds.memory, fds.request, -1];
    keep.extend_from_slice(&fds.acks);
    // SAFETY: plain call.
    let sentry = unsafe { libc::getpid() };
    // SAFETY: fork; the child runs only raw system calls on memory that
    // exists before the fork (the plan, the descriptors, the control
    // mapping) and never returns.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if pid == 0 {
        factory_main(&mut keep, sentry, base, &plan);
    }
    Ok(pid)
}

struct StubPlan {
    code: Vec<u8>,
    control_prog: (u16, u64),
    thread_prog: (u16, u64),
    factory_filter: Vec<filter::Insn>,
    unprivileged_id: u32,
}

/// A failed step of the set-up: its index and errno, as the factory's
/// reply carries them.
fn failure(step: i32) -> i32 {
    let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO);
    -((step << 16) | (errno & 0xffff))
}

/// The calling process's errno after a failed rustix call, as `failure`
/// reads it.
fn set_errno(e: rustix::io::Errno) {
    // SAFETY: writes the calling thread's errno.
    unsafe { *libc::__errno_location() = e.raw_os_error() };
}

/// Enters an empty, read-only tmpfs attached nowhere as root and working
/// directory. Needs the capabilities to mount and to chroot.
fn enter_empty_root() -> rustix::io::Result<()> {
    use rustix::mount::{FsMountFlags, FsOpenFlags, MountAttrFlags};
    let fs = rustix::mount::fsopen(c"tmpfs", FsOpenFlags::FSOPEN_CLOEXEC)?;
    rustix::mount::fsconfig_create(&fs)?;
    let attrs = MountAttrFlags::MOUNT_ATTR_RDONLY
        | MountAttrFlags::MOUNT_ATTR_NOSUID
        | MountAttrFlags::MOUNT_ATTR_NODEV
        | MountAttrFlags::MOUNT_ATTR_NOEXEC;
    let mnt = rustix::mount::fsmount(&fs, FsMountFlags::FSMOUNT_CLOEXEC, attrs)?;
    rustix::process::fchdir(&mnt)?;
    rustix::process::chroot(c".")?;
    rustix::process::chdir(c"/")
}

/// Moves descriptor `fds[i]` to `FD_CONTROL + i` and closes every other
/// one. Needs no more free numbers than the descriptors it moves.
fn settle_descriptors(fds: &mut [RawFd]) -> Result<(), i32> {
    let end = FD_CONTROL + fds.len() as RawFd;
    // SAFETY: plain calls on this process's descriptor table,
    // which only this thread uses.
    unsafe {
        // Those in the way go above the fixed numbers first.
        for (i, fd) in fds.iter_mut().enumerate() {
            if *fd != FD_CONTROL + i as RawFd && *fd < end {
                let moved = libc::fcntl(*fd, libc::F_DUPFD, end);
                if moved < 0 {
                    return Err(failure(STEP_FDS));
                }
                libc::close(*fd);
                *fd = moved;
            }
        }
        for fd in 0..end {
            if fd < FD_CONTROL || fds[(fd - FD_CONTROL) as usize] != fd {
                libc::close(fd);
            }
        }
        for (i, fd) in fds.iter().enumerate() {
            let at = FD_CONTROL + i as RawFd;
            if *fd != at && libc::dup3(*fd, at, 0) != at {
                return Err(failure(STEP_FDS));
            }
        }
        if libc::syscall(libc::SYS_close_range, end as libc::c_long, u32::MAX as libc::c_long, 0 as libc::c_long) != 0 {
            return Err(failure(STEP_FDS));
        }
    }
    Ok(())
}

/// Takes the factory's identity (see the module's documentation); `Ok`
/// with `KEPT_IDS` if the ids could not change.
fn drop_identity(unprivileged_id: u32) -> Result<u32, i32> {
    use rustix::io::Errno;
    use rustix::thread::{CapabilitySet, CapabilitySets};
    let mut kept = 0;
    // The bounding set needs CAP_SETPCAP, which a caller who is not root,
    // outside a user namespace of its own, does not hold: it has nothing
    // to bound either.
    for cap in 0.. {
        // SAFETY: PR_CAPBSET_DROP takes a capability number; past the last
        // one it fails with EINVAL.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) } != 0 {
            break;
        }
    }
    rustix::thread::clear_ambient_capability_set().map_err(|e| {
        set_errno(e);
        failure(STEP_CAPS)
    })?;
    if rustix::process::geteuid().is_root() {
        let ids = |r: rustix::io::Result<()>, tolerated: Errno| match r {
            Err(e) if e == tolerated => Ok(KEPT_IDS),
            Err(e) => {
                set_errno(e);
                Err(failure(STEP_IDS))
            }
            Ok(()) => Ok(0),
        };
        let gid = rustix::process::Gid::from_raw(unprivileged_id);
        let uid = rustix::process::Uid::from_raw(unprivileged_id);
        kept |= ids(rustix::thread::set_thread_groups(&[]), Errno::PERM)?;
        kept |= ids(rustix::thread::set_thread_res_gid(gid, gid, gid), Errno::INVAL)?;
        // Root's change of uid clears every capability (PR_SET_KEEPCAPS is
        // off); what is left is cleared below.
        kept |= ids(rustix::thread::set_thread_res_uid(uid, uid, uid), Errno::INVAL)?;
    }
    let none = CapabilitySets {
        effective: CapabilitySet::empty(),
        permitted: CapabilitySet::empty(),
        inheritable: CapabilitySet::empty(),
    };
    rustix::thread::set_capabilities(None, none).map_err(|e| {
        set_errno(e);
        failure(STEP_CAPS)
    })?;
    Ok(kept)
}

/// Confines the factory (see the module's documentation); what it did
/// without, or the failed step.
fn confine(keep: &mut [RawFd], sentry: i32, plan: &StubPlan) -> Result<u32, i32> {
    let mut kept = 0;
    if enter_empty_root().is_err() {
        kept |= KEPT_ROOT;
    }
    settle_descriptors(keep)?;
    kept |= drop_identity(plan.unprivileged_id)?;
    // SAFETY: plain calls on this process; the filter program
    // lives in the plan, which outlives the call.
    unsafe {
        if libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) != 0 {
            return Err(failure(STEP_DUMPABLE));
        }
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(failure(STEP_NO_NEW_PRIVS));
        }
        // After the change of ids, which clears it; a sentry gone before
        // it was set leaves the factory to end now.
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
        if libc::getppid() != sentry {
            libc::_exit(0);
        }
        let prog = libc::sock_fprog {
            len: plan.factory_filter.len() as u16,
            filter: plan.factory_filter.as_ptr().cast_mut().cast(),
        };
        if libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, 0, &prog as *const libc::sock_fprog) != 0 {
            return Err(failure(STEP_FILTER));
        }
    }
    Ok(kept)
}

fn raw_write_u64(fd: RawFd, v: u64) {
    // SAFETY: writes 8 bytes from a live local.
    unsafe { libc::syscall(libc::SYS_write, fd as libc::c_long, &v as *const u64, 8 as libc::c_long) };
}

fn factory_main(keep: &mut [RawFd], sentry: i32, base: *mut u8, plan: &StubPlan) -> ! {
    let page = control::FactoryPage(base);
    // SAFETY: raw calls on the factory's own state; see spawn.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        keep[(FD_SIGNALS - FD_CONTROL) as usize] = libc::signalfd(-1, &set, libc::SFD_CLOEXEC);
        // The first reply says how the set-up went.
        match confine(keep, sentry, plan) {
            Ok(kept) => {
                page.set_setup_kept(kept);
                page.reply(0);
            }
            Err(code) => {
                page.reply(code);
                libc::_exit(126);
            }
        }
        let mut pids = [0i32; control::MAX_STUBS];
        loop {
            let mut polls = [
                libc::pollfd { fd: FD_REQUEST, events: libc::POLLIN, revents: 0 },
                libc::pollfd { fd: FD_SIGNALS, events: libc::POLLIN, revents: 0 },
            ];
            if libc::syscall(libc::SYS_poll, polls.as_mut_ptr(), 2 as libc::c_long, -1 as libc::c_long) < 0 {
                continue;
            }
            if polls[0].revents & libc::POLLHUP != 0 {
                libc::_exit(0);
            }
            if polls[0].revents & libc::POLLIN != 0 {
                let mut n = 0u64;
                libc::syscall(libc::SYS_read, FD_REQUEST as libc::c_long, &mut n as *mut u64, 8 as libc::c_long);
                let slot = page.request_slot() as usize;
                let pid = if slot < control::MAX_STUBS {
                    page.set_dead(slot, false);
                    page.set_wait_status(slot, None);
                    // A plain fork: the C library's fork would take its
                    // locks and run its handlers, which the stub needs
                    // none of.
                    let pid = libc::syscall(libc::SYS_clone, libc::SIGCHLD as libc::c_long, 0, 0, 0, 0) as i32;
                    if pid == 0 {
                        stub_main(slot, plan);
                    }
                    if pid > 0 {
                        pids[slot] = pid;
                    }
                    pid
                } else {
                    -1
                };
                page.reply(pid);
            }
            if polls[1].revents & libc::POLLIN != 0 {
                let mut info: libc::signalfd_siginfo = std::mem::zeroed();
                libc::syscall(
                    libc::SYS_read,
                    FD_SIGNALS as libc::c_long,
                    &mut info as *mut libc::signalfd_siginfo,
                    size_of::<libc::signalfd_siginfo>() as libc::c_long,
                );
                loop {
                    let mut status = 0;
                    let pid = libc::syscall(
                        libc::SYS_wait4,
                        -1 as libc::c_long,
                        &mut status as *mut i32,
                        libc::WNOHANG as libc::c_long,
                        0 as libc::c_long,
                    ) as i32;
                    if pid <= 0 {
                        break;
                    }
                    if let Some(slot) = pids.iter().position(|p| *p == pid) {
                        pids[slot] = 0;
                        page.set_wait_status(slot, Some(status));
                        page.set_dead(slot, true);
                        control::wake_all_threads(base, slot);
                        raw_write_u64(FD_ACKS + slot as RawFd, 1);
                    }
                }
            }
        }
    }
}

/// Linux's flag for a sigaction that names its own restorer.
const SA_RESTORER: u64 = 0x0400_0000;

/// Builds a stub in the child of the factory, then enters the control loop.
/// It has the factory's ids, root, descriptors, `PR_SET_NO_NEW_PRIVS` and
/// filter; each call here is one the filter names.
fn stub_main(slot: usize, plan: &StubPlan) -> ! {
    use libc::c_long;
    // SAFETY: raw calls in a freshly forked child that owns all it touches;
    // every mapping made here is at the stub's reserved addresses.
    unsafe {
        libc::syscall(libc::SYS_prctl, libc::PR_SET_PDEATHSIG as c_long, libc::SIGKILL as c_long);
        let fail = || -> ! { libc::_exit(126) };
        let mmap = |addr: u64, len: u64, prot: i32, flags: i32, fd: RawFd, off: u64| {
            libc::syscall(
                libc::SYS_mmap,
                addr as c_long,
                len as c_long,
                prot as c_long,
                flags as c_long,
                fd as c_long,
                off as c_long,
            ) as u64
        };
        let rw = libc::PROT_READ | libc::PROT_WRITE;
        let private = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED;
        if mmap(stub::CODE, stub::CODE_SIZE, rw, private, -1, 0) != stub::CODE {
            fail();
        }
        std::ptr::copy_nonoverlapping(plan.code.as_ptr(), stub::CODE as *mut u8, plan.code.len());
        if libc::mprotect(stub::CODE as *mut libc::c_void, stub::CODE_SIZE as usize, libc::PROT_READ | libc::PROT_EXEC)
            != 0
        {
            fail();
        }
        let off = control::slot_offset(slot);
        let shared = libc::MAP_SHARED | libc::MAP_FIXED;
        let req = mmap(stub::SLOT, 4096, libc::PROT_READ, shared, FD_CONTROL, off);
        let rest = mmap(stub::SLOT + 4096, stub::SLOT_SIZE - 4096, rw, shared, FD_CONTROL, off + 4096);
        if req != stub::SLOT || rest != stub::SLOT + 4096 {
            fail();
        }
        // The seccomp program headers the control loop hands the kernel.
        let prog = |at: usize, (len, filter): (u16, u64)| {
            let p = (stub::SLOT as usize + at) as *mut u64;
            p.write(len as u64);
            p.add(1).write(filter);
        };
        prog(stub::SETUP_CONTROL_FPROG, plan.control_prog);
        prog(stub::SETUP_THREAD_FPROG, plan.thread_prog);
        // Descriptors: the memory file and the acknowledgement eventfd at
        // their fixed numbers, nothing else.
        if libc::dup3(FD_MEMORY, stub::MEM_FD, 0) < 0 || libc::dup3(FD_ACKS + slot as RawFd, stub::ACK_FD, 0) < 0 {
            fail();
        }
        libc::syscall(libc::SYS_close_range, 0 as c_long, (stub::MEM_FD - 1) as c_long, 0 as c_long);
        libc::syscall(libc::SYS_close_range, (stub::ACK_FD + 1) as c_long, u32::MAX as c_long, 0 as c_long);
        // Every trap of application code goes to the handler, on the
        // thread's alternate stack, with every signal blocked meanwhile.
        #[repr(C)]
        struct KernelSigaction {
            handler: u64,
            flags: u64,
            restorer: u64,
            mask: u64,
        }
        let sa = KernelSigaction {
            handler: stub::handler(),
            flags: (libc::SA_SIGINFO | libc::SA_ONSTACK) as u64 | SA_RESTORER,
            restorer: stub::restorer(),
            mask: !0,
        };
        for sig in super::TRAPPED_SIGNALS {
            let sa = &sa as *const KernelSigaction;
            if libc::syscall(libc::SYS_rt_sigaction, sig as c_long, sa, 0 as c_long, 8 as c_long) != 0 {
                fail();
            }
        }
        let none: u64 = 0;
        let none = &none as *const u64;
        libc::syscall(libc::SYS_rt_sigprocmask, libc::SIG_SETMASK as c_long, none, 0 as c_long, 8 as c_long);
        // The C library registered this thread's rseq area, which the
        // kernel writes on preemption: unregister it before it is unmapped.
        unsafe extern "C" {
            static __rseq_offset: isize;
            static __rseq_size: u32;
        }
        if __rseq_size > 0 {
            let tp: u64;
            std::arch::asm!("mov {}, fs:0", out(reg) tp, options(nostack, readonly));
            let area = tp.wrapping_add_signed(__rseq_offset as i64);
            let len = __rseq_size.max(32) as c_long;
            libc::syscall(libc::SYS_rseq, area, len, RSEQ_FLAG_UNREGISTER as c_long, RSEQ_SIG as c_long);
        }
        // No return: the control loop unmaps everything this code lives in.
        std::arch::asm!("jmp {entry}", entry = in(reg) stub::control(), options(noreturn));
    }
}
