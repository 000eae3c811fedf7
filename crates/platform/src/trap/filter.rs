//! The seccomp programs of a stub, and of the factory that forks them.
//!
//! A stub's two check the instruction pointer first: a system call made anywhere
//! but the stub's code raises SIGSYS (`SECCOMP_RET_TRAP`), which is how
//! application system calls reach the sentry. From the stub's code only the
//! listed calls pass, with the arguments pinned that a filter can read;
//! anything else kills the stub (`SECCOMP_RET_KILL_PROCESS`).
//!
//! The control filter is the whole stub's; application threads add the
//! thread filter on top, and the stricter answer wins, so an application
//! thread that jumps into the stub's code gets only `futex`,
//! `rt_sigreturn` and `exit`.
//!
//! The factory's program ([`factory`]) is below both in every stub, which
//! inherits it; it lets the factory make only its own calls.

use super::stub;

const RET_KILL_PROCESS: u32 = 0x8000_0000;
const RET_TRAP: u32 = 0x0003_0000;
const RET_ALLOW: u32 = 0x7fff_0000;
const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;

// seccomp_data offsets.
const NR: u32 = 0;
const ARCH: u32 = 4;
const IP_LO: u32 = 8;
const IP_HI: u32 = 12;
const fn arg_lo(i: u32) -> u32 {
    16 + 8 * i
}
const fn arg_hi(i: u32) -> u32 {
    20 + 8 * i
}

const LD_W_ABS: u16 = 0x20;
const JEQ_K: u16 = 0x15;
const JGE_K: u16 = 0x35;
const RET_K: u16 = 0x06;

/// One BPF instruction, as `struct sock_filter`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub(crate) struct Insn {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

/// A condition on one argument, as the kernel reads it.
#[derive(Clone, Copy)]
enum Pin {
    /// All 64 bits equal the value: a pointer, a size, a `long`.
    Eq(u32, u64),
    /// The low 32 bits equal the value: an `int` or `unsigned int`, of
    /// which the kernel reads no more (a caller may leave anything above).
    Low(u32, u32),
    /// The low 32 bits are at least the first value and below the second.
    LowIn(u32, u32, u32),
}

const fn eq(arg: u32, value: u64) -> Pin {
    Pin::Eq(arg, value)
}

const fn low(arg: u32, value: u32) -> Pin {
    Pin::Low(arg, value)
}

const JA: u16 = 0x05;

fn load(insns: &mut Vec<Insn>, off: u32) {
    insns.push(Insn { code: LD_W_ABS, jt: 0, jf: 0, k: off });
}

fn ret(insns: &mut Vec<Insn>, action: u32) {
    insns.push(Insn { code: RET_K, jt: 0, jf: 0, k: action });
}

/// A call of another ABI than x86_64's (`int 0x80`, say) traps: the
/// sentry answers it as Linux would.
fn check_arch(insns: &mut Vec<Insn>) {
    load(insns, ARCH);
    insns.push(Insn { code: JEQ_K, jt: 1, jf: 0, k: AUDIT_ARCH_X86_64 });
    ret(insns, RET_TRAP);
}

/// Goes on to the next instruction but one if the call comes from the
/// stub's code; else to the next one, which the caller appends.
fn check_stub_code(insns: &mut Vec<Insn>) {
    let lo = stub::CODE as u32;
    load(insns, IP_HI);
    insns.push(Insn { code: JEQ_K, jt: 0, jf: 3, k: (stub::CODE >> 32) as u32 });
    load(insns, IP_LO);
    insns.push(Insn { code: JGE_K, jt: 0, jf: 1, k: lo });
    insns.push(Insn { code: JGE_K, jt: 0, jf: 1, k: lo + stub::CODE_SIZE as u32 });
}

/// One allowed call: its number and pinned arguments.
struct Allowed {
    nr: i64,
    pins: &'static [Pin],
}

/// Appends a block per allowed call: it allows the call if the number and
/// every pin match, and otherwise falls through to the next block.
fn allow(insns: &mut Vec<Insn>, allowed: &[Allowed]) {
    for a in allowed {
        // (instruction, whether it fails on its true branch)
        let mut fails = Vec::new();
        let mut check = |insns: &mut Vec<Insn>, code: u16, k: u32, on_true: bool| {
            fails.push((insns.len(), on_true));
            insns.push(Insn { code, jt: 0, jf: 0, k });
        };
        load(insns, NR);
        check(insns, JEQ_K, a.nr as u32, false);
        for pin in a.pins {
            match *pin {
                Pin::Eq(arg, value) => {
                    load(insns, arg_lo(arg));
                    check(insns, JEQ_K, value as u32, false);
                    load(insns, arg_hi(arg));
                    check(insns, JEQ_K, (value >> 32) as u32, false);
                }
                Pin::Low(arg, value) => {
                    load(insns, arg_lo(arg));
                    check(insns, JEQ_K, value, false);
                }
                Pin::LowIn(arg, start, end) => {
                    load(insns, arg_lo(arg));
                    check(insns, JGE_K, start, false);
                    check(insns, JGE_K, end, true);
                }
            }
        }
        ret(insns, RET_ALLOW);
        let end = insns.len() - 1;
        for (at, on_true) in fails {
            let off = u8::try_from(end - at).expect("a short block");
            if on_true {
                insns[at].jt = off;
            } else {
                insns[at].jf = off;
            }
        }
    }
}

/// A stub's program: a call from outside its code traps; from its code,
/// one of `allowed` passes and any other kills the stub.
fn build(allowed: &[Allowed]) -> Vec<Insn> {
    let mut insns = Vec::new();
    check_arch(&mut insns);
    check_stub_code(&mut insns);
    ret(&mut insns, RET_TRAP);
    allow(&mut insns, allowed);
    ret(&mut insns, RET_KILL_PROCESS);
    insns
}

const FUTEX_WAIT: &[Pin] = &[eq(1, 0)];
const FUTEX_WAKE: &[Pin] = &[eq(1, 1)];

/// The calls the control thread and the handler make.
const CONTROL_CALLS: &[Allowed] = {
    const MMAP: &[Pin] = &[eq(3, (libc::MAP_SHARED | libc::MAP_FIXED) as u64), eq(4, stub::MEM_FD as u64)];
    const MMAP_RESIDENT: &[Pin] =
        &[eq(3, (libc::MAP_SHARED | libc::MAP_FIXED | libc::MAP_POPULATE) as u64), eq(4, stub::MEM_FD as u64)];
    const CLONE: &[Pin] = &[eq(0, stub::clone_flags()), eq(2, 0), eq(4, 0)];
    const WRITE: &[Pin] = &[eq(0, stub::ACK_FD as u64), eq(2, 8)];
    const SECCOMP: &[Pin] = &[eq(0, 1), eq(1, 0)];
    &[
        Allowed { nr: libc::SYS_futex, pins: FUTEX_WAIT },
        Allowed { nr: libc::SYS_futex, pins: FUTEX_WAKE },
        Allowed { nr: libc::SYS_rt_sigreturn, pins: &[] },
        Allowed { nr: libc::SYS_exit, pins: &[] },
        Allowed { nr: libc::SYS_exit_group, pins: &[] },
        Allowed { nr: libc::SYS_mmap, pins: MMAP },
        Allowed { nr: libc::SYS_mmap, pins: MMAP_RESIDENT },
        Allowed { nr: libc::SYS_munmap, pins: &[] },
        Allowed { nr: libc::SYS_mprotect, pins: &[] },
        Allowed { nr: libc::SYS_clone, pins: CLONE },
        Allowed { nr: libc::SYS_write, pins: WRITE },
        Allowed { nr: libc::SYS_sigaltstack, pins: &[eq(1, 0)] },
        Allowed { nr: libc::SYS_seccomp, pins: SECCOMP },
    ]
};

/// The calls the control thread and the handler make.
pub(crate) fn control() -> Vec<Insn> {
    build(CONTROL_CALLS)
}

/// The calls an application thread's handler makes.
pub(crate) fn thread() -> Vec<Insn> {
    const THREAD_CALLS: &[Allowed] = &[
        Allowed { nr: libc::SYS_futex, pins: FUTEX_WAIT },
        Allowed { nr: libc::SYS_futex, pins: FUTEX_WAKE },
        Allowed { nr: libc::SYS_rt_sigreturn, pins: &[] },
        Allowed { nr: libc::SYS_exit, pins: &[eq(0, 0)] },
    ];
    build(THREAD_CALLS)
}

/// The calls the factory makes serving requests, and those a new stub
/// makes after the fork, before it jumps to its own code.
const FACTORY_CALLS: &[Allowed] = {
    use super::control::MAX_STUBS;
    use super::factory::{FD_ACKS, FD_CONTROL, FD_MEMORY, FD_REQUEST, FD_SIGNALS, RSEQ_FLAG_UNREGISTER, RSEQ_SIG};
    const ACK: u32 = FD_ACKS as u32;
    const ACKS_END: u32 = ACK + MAX_STUBS as u32;
    const SIGINFO_SIZE: u64 = 128;
    const PROT_RW: u32 = (libc::PROT_READ | libc::PROT_WRITE) as u32;
    const SHARED_FIXED: u32 = (libc::MAP_SHARED | libc::MAP_FIXED) as u32;
    &[
        // The factory: a request, a stub's end, a fork, a reply, an ack.
        Allowed { nr: libc::SYS_poll, pins: &[low(1, 2), low(2, -1i32 as u32)] },
        Allowed { nr: libc::SYS_read, pins: &[low(0, FD_REQUEST as u32), eq(2, 8)] },
        Allowed { nr: libc::SYS_read, pins: &[low(0, FD_SIGNALS as u32), eq(2, SIGINFO_SIZE)] },
        Allowed { nr: libc::SYS_clone, pins: &[eq(0, libc::SIGCHLD as u64), eq(1, 0), eq(2, 0), eq(3, 0), eq(4, 0)] },
        Allowed { nr: libc::SYS_wait4, pins: &[low(0, -1i32 as u32), low(2, libc::WNOHANG as u32), eq(3, 0)] },
        Allowed { nr: libc::SYS_futex, pins: &[low(1, libc::FUTEX_WAKE as u32)] },
        Allowed { nr: libc::SYS_write, pins: &[Pin::LowIn(0, ACK, ACKS_END), eq(2, 8)] },
        Allowed { nr: libc::SYS_exit_group, pins: &[] },
        // A new stub, before its code is there to make its calls.
        Allowed { nr: libc::SYS_prctl, pins: &[low(0, libc::PR_SET_PDEATHSIG as u32), eq(1, libc::SIGKILL as u64)] },
        Allowed {
            nr: libc::SYS_mmap,
            pins: &[
                eq(0, stub::CODE),
                eq(1, stub::CODE_SIZE),
                low(2, PROT_RW),
                low(3, (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED) as u32),
                low(4, -1i32 as u32),
                eq(5, 0),
            ],
        },
        Allowed {
            nr: libc::SYS_mprotect,
            pins: &[eq(0, stub::CODE), eq(1, stub::CODE_SIZE), low(2, (libc::PROT_READ | libc::PROT_EXEC) as u32)],
        },
        Allowed {
            nr: libc::SYS_mmap,
            pins: &[
                eq(0, stub::SLOT),
                eq(1, 4096),
                low(2, libc::PROT_READ as u32),
                low(3, SHARED_FIXED),
                low(4, FD_CONTROL as u32),
            ],
        },
        Allowed {
            nr: libc::SYS_mmap,
            pins: &[
                eq(0, stub::SLOT + 4096),
                eq(1, stub::SLOT_SIZE - 4096),
                low(2, PROT_RW),
                low(3, SHARED_FIXED),
                low(4, FD_CONTROL as u32),
            ],
        },
        Allowed { nr: libc::SYS_dup3, pins: &[low(0, FD_MEMORY as u32), low(1, stub::MEM_FD as u32), low(2, 0)] },
        Allowed { nr: libc::SYS_dup3, pins: &[Pin::LowIn(0, ACK, ACKS_END), low(1, stub::ACK_FD as u32), low(2, 0)] },
        Allowed { nr: libc::SYS_close_range, pins: &[low(0, 0), low(1, stub::MEM_FD as u32 - 1), low(2, 0)] },
        Allowed { nr: libc::SYS_close_range, pins: &[low(0, stub::ACK_FD as u32 + 1), low(1, u32::MAX), low(2, 0)] },
        Allowed { nr: libc::SYS_rt_sigaction, pins: &[eq(2, 0), eq(3, 8)] },
        Allowed { nr: libc::SYS_rt_sigprocmask, pins: &[low(0, libc::SIG_SETMASK as u32), eq(2, 0), eq(3, 8)] },
        Allowed { nr: libc::SYS_rseq, pins: &[low(2, RSEQ_FLAG_UNREGISTER), low(3, RSEQ_SIG)] },
    ]
};

/// The factory's program, which every stub inherits beneath its own.
///
/// A call from the stub's code passes only as the control filter lets it
/// (so a factory that jumped to code it mapped there would gain nothing
/// more), and any other kills. A call from anywhere else passes only if
/// it is one of the factory's own, pinned, and otherwise *traps* rather
/// than kill: in a stub, the application's calls come from there and
/// must reach the stub's handler, as its own filter says; in the factory,
/// which handles no SIGSYS, the trap kills it all the same.
pub(crate) fn factory() -> Vec<Insn> {
    let mut insns = Vec::new();
    check_arch(&mut insns);
    check_stub_code(&mut insns);
    let to_outside = insns.len();
    insns.push(Insn { code: JA, jt: 0, jf: 0, k: 0 });
    allow(&mut insns, CONTROL_CALLS);
    ret(&mut insns, RET_KILL_PROCESS);
    insns[to_outside].k = (insns.len() - to_outside - 1) as u32;
    allow(&mut insns, FACTORY_CALLS);
    ret(&mut insns, RET_TRAP);
    insns
}

#[cfg(test)]
mod tests {
    use super::super::factory::{FD_ACKS, FD_CONTROL, FD_REQUEST};
    use super::*;

    /// The answer of `prog` to a call, as the kernel runs a classic BPF
    /// program on `seccomp_data` (only the instructions built here).
    fn run(prog: &[Insn], arch: u32, nr: i64, ip: u64, args: [u64; 6]) -> u32 {
        let word = |off: u32| -> u32 {
            match off {
                NR => nr as u32,
                ARCH => arch,
                IP_LO => ip as u32,
                IP_HI => (ip >> 32) as u32,
                _ => {
                    let i = ((off - 16) / 8) as usize;
                    if (off - 16).is_multiple_of(8) { args[i] as u32 } else { (args[i] >> 32) as u32 }
                }
            }
        };
        let (mut pc, mut acc) = (0usize, 0u32);
        loop {
            let i = prog[pc];
            pc += 1;
            match i.code {
                LD_W_ABS => acc = word(i.k),
                JEQ_K => pc += if acc == i.k { i.jt } else { i.jf } as usize,
                JGE_K => pc += if acc >= i.k { i.jt } else { i.jf } as usize,
                JA => pc += i.k as usize,
                RET_K => return i.k,
                c => panic!("unexpected instruction {c:#x}"),
            }
        }
    }

    const OUTSIDE: u64 = 0x5555_5555_1000;
    const IN_STUB: u64 = stub::CODE + 0x100;

    fn call(prog: &[Insn], nr: i64, ip: u64, args: [u64; 6]) -> u32 {
        run(prog, AUDIT_ARCH_X86_64, nr, ip, args)
    }

    /// The factory's own calls pass with their pins and trap with any
    /// other argument; what it never does traps.
    #[test]
    fn the_factory_makes_only_its_own_calls() {
        let f = factory();
        let ack = |n: i32| [(FD_ACKS + n) as u64, 0, 8, 0, 0, 0];
        assert_eq!(call(&f, libc::SYS_write, OUTSIDE, ack(0)), RET_ALLOW);
        assert_eq!(call(&f, libc::SYS_write, OUTSIDE, ack(511)), RET_ALLOW);
        assert_eq!(call(&f, libc::SYS_write, OUTSIDE, ack(512)), RET_TRAP);
        assert_eq!(call(&f, libc::SYS_write, OUTSIDE, [FD_REQUEST as u64, 0, 8, 0, 0, 0]), RET_TRAP);
        assert_eq!(call(&f, libc::SYS_write, OUTSIDE, [(FD_ACKS as u64) | 1 << 32, 0, 8, 0, 0, 0]), RET_ALLOW);
        assert_eq!(call(&f, libc::SYS_write, OUTSIDE, [FD_ACKS as u64, 0, 9, 0, 0, 0]), RET_TRAP);
        let sigchld = libc::SIGCHLD as u64;
        assert_eq!(call(&f, libc::SYS_clone, OUTSIDE, [sigchld, 0, 0, 0, 0, 0]), RET_ALLOW);
        let newuser = libc::CLONE_NEWUSER as u64 | sigchld;
        assert_eq!(call(&f, libc::SYS_clone, OUTSIDE, [newuser, 0, 0, 0, 0, 0]), RET_TRAP);
        assert_eq!(call(&f, libc::SYS_clone, OUTSIDE, [sigchld, 0x1000, 0, 0, 0, 0]), RET_TRAP);
        assert_eq!(call(&f, libc::SYS_read, OUTSIDE, [FD_REQUEST as u64, 0, 8, 0, 0, 0]), RET_ALLOW);
        assert_eq!(call(&f, libc::SYS_read, OUTSIDE, [FD_CONTROL as u64, 0, 8, 0, 0, 0]), RET_TRAP);
        let control_fd = FD_CONTROL as u64;
        let shared = (libc::MAP_SHARED | libc::MAP_FIXED) as u64;
        let slot_page = [stub::SLOT, 4096, libc::PROT_READ as u64, shared, control_fd, 1 << 30];
        assert_eq!(call(&f, libc::SYS_mmap, OUTSIDE, slot_page), RET_ALLOW);
        let writable = [stub::SLOT, 4096, (libc::PROT_READ | libc::PROT_WRITE) as u64, shared, control_fd, 1 << 30];
        assert_eq!(call(&f, libc::SYS_mmap, OUTSIDE, writable), RET_TRAP);
        let pdeathsig = libc::PR_SET_PDEATHSIG as u64;
        assert_eq!(call(&f, libc::SYS_prctl, OUTSIDE, [pdeathsig, 9, 0, 0, 0, 0]), RET_ALLOW);
        let no_new_privs = libc::PR_SET_NO_NEW_PRIVS as u64;
        assert_eq!(call(&f, libc::SYS_prctl, OUTSIDE, [no_new_privs, 0, 0, 0, 0, 0]), RET_TRAP);
        for nr in [libc::SYS_kill, libc::SYS_openat, libc::SYS_socket, libc::SYS_ptrace, libc::SYS_setns] {
            assert_eq!(call(&f, nr, OUTSIDE, [0; 6]), RET_TRAP, "call {nr}");
        }
        assert_eq!(run(&f, 0x4000_0003, libc::SYS_write, OUTSIDE, ack(0)), RET_TRAP, "i386's ABI");
    }

    /// Every stub inherits the factory's program: it must never kill a
    /// call the stub's own filters trap (the application's), and from the
    /// stub's code it answers as the control filter does, so that a
    /// factory mapping code there gains nothing.
    #[test]
    fn beneath_a_stub_the_factory_changes_no_answer() {
        let (f, c) = (factory(), control());
        let mut samples: Vec<[u64; 6]> = vec![[0; 6], [u64::MAX; 6]];
        for a in CONTROL_CALLS.iter().chain(FACTORY_CALLS) {
            let mut args = [0u64; 6];
            for pin in a.pins {
                match *pin {
                    Pin::Eq(i, v) => args[i as usize] = v,
                    Pin::Low(i, v) | Pin::LowIn(i, v, _) => args[i as usize] = v as u64,
                }
            }
            samples.push(args);
        }
        for nr in 0..460 {
            for args in &samples {
                assert_eq!(call(&c, nr, OUTSIDE, *args), RET_TRAP);
                let outside = call(&f, nr, OUTSIDE, *args);
                assert!(outside == RET_TRAP || outside == RET_ALLOW, "call {nr} {args:x?}: {outside:#x}");
                assert_eq!(call(&f, nr, IN_STUB, *args), call(&c, nr, IN_STUB, *args), "call {nr} {args:x?}");
            }
        }
        let control_mmap = [0x1000, 4096, 3, (libc::MAP_SHARED | libc::MAP_FIXED) as u64, stub::MEM_FD as u64, 0];
        assert_eq!(call(&f, libc::SYS_mmap, IN_STUB, control_mmap), RET_ALLOW);
        assert_eq!(call(&f, libc::SYS_getpid, IN_STUB, [0; 6]), RET_KILL_PROCESS);
    }

    /// The kernel takes the factory's program and kills a process under it
    /// that makes a call it does not list.
    #[test]
    fn the_kernel_runs_the_factorys_program() {
        let prog = factory();
        let fprog = libc::sock_fprog { len: prog.len() as u16, filter: prog.as_ptr().cast_mut().cast() };
        let in_child = |forbidden: bool| {
            // SAFETY: the child makes raw calls only, on memory that
            // exists before the fork, and leaves through _exit.
            unsafe {
                let pid = libc::fork();
                assert!(pid >= 0, "fork");
                if pid == 0 {
                    libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
                    if libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, 0, &fprog) != 0 {
                        libc::_exit(2);
                    }
                    if forbidden {
                        libc::syscall(libc::SYS_getppid);
                    } else {
                        let mut n = 0u64;
                        libc::syscall(
                            libc::SYS_read,
                            FD_REQUEST as libc::c_long,
                            &mut n as *mut u64,
                            8 as libc::c_long,
                        );
                    }
                    libc::_exit(0);
                }
                let mut status = 0;
                libc::waitpid(pid, &mut status, 0);
                status
            }
        };
        let allowed = in_child(false);
        assert!(libc::WIFEXITED(allowed) && libc::WEXITSTATUS(allowed) == 0, "status {allowed:#x}");
        let forbidden = in_child(true);
        assert!(libc::WIFSIGNALED(forbidden) && libc::WTERMSIG(forbidden) == libc::SIGSYS, "status {forbidden:#x}");
    }
}
