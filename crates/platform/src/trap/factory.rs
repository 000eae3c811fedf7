//! The factory: a process forked from the sentry before it confines itself,
//! which forks stub processes on request. The sentry's own seccomp filter
//! forbids making processes; the factory runs no application code and
//! takes requests only from the sentry, through the control file.
//!
//! The factory and the stubs run between `fork` and their own code with
//! nothing but raw system calls: a fork of a multi-threaded process must not
//! take locks or allocate.

use std::os::fd::RawFd;

use super::{control, filter, stub};

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

/// Forks the factory; returns its pid. Stubs the factory makes as root
/// take `unprivileged_id` as their ids (see [`stub_main`]).
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
        unprivileged_id,
    };
    let acks = fds.acks.clone();
    // SAFETY: fork; the child runs only raw system calls on memory that
    // exists before the fork (the plan, the descriptors, the control
    // mapping) and never returns.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if pid == 0 {
        factory_main(fds, &acks, base, &plan);
    }
    Ok(pid)
}

struct StubPlan {
    code: Vec<u8>,
    control_prog: (u16, u64),
    thread_prog: (u16, u64),
    unprivileged_id: u32,
}

fn raw_write_u64(fd: RawFd, v: u64) {
    // SAFETY: writes 8 bytes from a live local.
    unsafe { libc::write(fd, (&v as *const u64).cast(), 8) };
}

fn factory_main(fds: &FactoryFds, acks: &[RawFd], base: *mut u8, plan: &StubPlan) -> ! {
    // SAFETY: raw calls on the factory's own state; see spawn.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        let sigfd = libc::signalfd(-1, &set, libc::SFD_CLOEXEC);
        let mut pids = [0i32; control::MAX_STUBS];
        let page = control::FactoryPage(base);
        loop {
            let mut polls = [
                libc::pollfd { fd: fds.request, events: libc::POLLIN, revents: 0 },
                libc::pollfd { fd: sigfd, events: libc::POLLIN, revents: 0 },
            ];
            if libc::poll(polls.as_mut_ptr(), 2, -1) < 0 {
                continue;
            }
            if polls[0].revents & libc::POLLHUP != 0 {
                libc::_exit(0);
            }
            if polls[0].revents & libc::POLLIN != 0 {
                let mut n = 0u64;
                libc::read(fds.request, (&mut n as *mut u64).cast(), 8);
                let slot = page.request_slot() as usize;
                let pid = if slot < control::MAX_STUBS {
                    page.set_dead(slot, false);
                    page.set_wait_status(slot, None);
                    let pid = libc::fork();
                    if pid == 0 {
                        stub_main(fds, acks[slot], slot, plan);
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
                libc::read(
                    sigfd,
                    (&mut info as *mut libc::signalfd_siginfo).cast(),
                    size_of::<libc::signalfd_siginfo>(),
                );
                loop {
                    let mut status = 0;
                    let pid = libc::waitpid(-1, &mut status, libc::WNOHANG);
                    if pid <= 0 {
                        break;
                    }
                    if let Some(slot) = pids.iter().position(|p| *p == pid) {
                        pids[slot] = 0;
                        page.set_wait_status(slot, Some(status));
                        page.set_dead(slot, true);
                        control::wake_all_threads(base, slot);
                        raw_write_u64(acks[slot], 1);
                    }
                }
            }
        }
    }
}

/// Builds a stub in the child of the factory, then enters the control loop.
/// Linux's flag for a sigaction that names its own restorer.
const SA_RESTORER: u64 = 0x0400_0000;

fn stub_main(fds: &FactoryFds, ack: RawFd, slot: usize, plan: &StubPlan) -> ! {
    // SAFETY: raw calls in a freshly forked child that owns all it touches;
    // every mapping made here is at the stub's reserved addresses.
    unsafe {
        // A stub of root's takes the ids a sentry of root's takes when it
        // confines itself, where the user namespace maps them (failing
        // where the sentry's change fails too): the sentry interrupts
        // application code with a signal, which it may send only to
        // processes of its own uid. A stub has no use for root's rights.
        if libc::geteuid() == 0 {
            let id = plan.unprivileged_id;
            libc::setgroups(0, std::ptr::null());
            libc::setresgid(id, id, id);
            libc::setresuid(id, id, id);
        }
        // After the change of ids, which clears it.
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        let fail = || -> ! { libc::_exit(126) };
        let off = control::slot_offset(slot) as libc::off_t;
        let code = libc::mmap(
            stub::CODE as *mut libc::c_void,
            stub::CODE_SIZE as usize,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
            -1,
            0,
        );
        if code as u64 != stub::CODE {
            fail();
        }
        std::ptr::copy_nonoverlapping(plan.code.as_ptr(), code.cast::<u8>(), plan.code.len());
        if libc::mprotect(code, stub::CODE_SIZE as usize, libc::PROT_READ | libc::PROT_EXEC) != 0 {
            fail();
        }
        let req = libc::mmap(
            stub::SLOT as *mut libc::c_void,
            4096,
            libc::PROT_READ,
            libc::MAP_SHARED | libc::MAP_FIXED,
            fds.control,
            off,
        );
        let rest = libc::mmap(
            (stub::SLOT + 4096) as *mut libc::c_void,
            (stub::SLOT_SIZE - 4096) as usize,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_FIXED,
            fds.control,
            off + 4096,
        );
        if req as u64 != stub::SLOT || rest as u64 != stub::SLOT + 4096 {
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
        if libc::dup3(fds.memory, stub::MEM_FD, 0) < 0 || libc::dup3(ack, stub::ACK_FD, 0) < 0 {
            fail();
        }
        libc::syscall(libc::SYS_close_range, 0, stub::MEM_FD - 1, 0);
        libc::syscall(libc::SYS_close_range, stub::ACK_FD + 1, u32::MAX, 0);
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
            if libc::syscall(libc::SYS_rt_sigaction, sig, &sa as *const KernelSigaction, 0usize, 8usize) != 0 {
                fail();
            }
        }
        let none: u64 = 0;
        libc::syscall(libc::SYS_rt_sigprocmask, libc::SIG_SETMASK, &none as *const u64, 0usize, 8usize);
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            fail();
        }
        // The C library registered this thread's rseq area, which the
        // kernel writes on preemption: unregister it before it is unmapped.
        unsafe extern "C" {
            static __rseq_offset: isize;
            static __rseq_size: u32;
        }
        if __rseq_size > 0 {
            const RSEQ_FLAG_UNREGISTER: u64 = 1;
            const RSEQ_SIG: u64 = 0x5305_3053;
            let tp: u64;
            std::arch::asm!("mov {}, fs:0", out(reg) tp, options(nostack, readonly));
            let area = tp.wrapping_add_signed(__rseq_offset as i64);
            libc::syscall(libc::SYS_rseq, area, __rseq_size.max(32) as u64, RSEQ_FLAG_UNREGISTER, RSEQ_SIG);
        }
        // No return: the control loop unmaps everything this code lives in.
        std::arch::asm!("jmp {entry}", entry = in(reg) stub::control(), options(noreturn));
    }
}
