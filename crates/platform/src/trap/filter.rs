//! The seccomp programs of a stub.
//!
//! Both check the instruction pointer first: a system call made anywhere
//! but the stub's code raises SIGSYS (`SECCOMP_RET_TRAP`), which is how
//! application system calls reach the sentry. From the stub's code only the
//! listed calls pass, with the arguments pinned that a filter can read;
//! anything else kills the stub (`SECCOMP_RET_KILL_PROCESS`).
//!
//! The control filter is the whole stub's; application threads add the
//! thread filter on top, and the stricter answer wins, so an application
//! thread that jumps into the stub's code gets only `futex`,
//! `rt_sigreturn` and `exit`.

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

/// A condition on one argument: it equals `value`, on all 64 bits.
#[derive(Clone, Copy)]
struct Pin {
    arg: u32,
    value: u64,
}

/// A builder of straight-line programs whose failed checks jump forward to
/// one of the program's fixed exits.
struct Program {
    insns: Vec<Insn>,
    /// (instruction, exit) pairs whose false branch goes to an exit.
    to_exit: Vec<(usize, u32)>,
}

impl Program {
    fn new() -> Self {
        Program { insns: Vec::new(), to_exit: Vec::new() }
    }
    fn load(&mut self, off: u32) {
        self.insns.push(Insn { code: LD_W_ABS, jt: 0, jf: 0, k: off });
    }
    /// Continues if the accumulator equals `k`, else goes to `exit`.
    fn expect_eq(&mut self, k: u32, exit: u32) {
        self.to_exit.push((self.insns.len(), exit));
        self.insns.push(Insn { code: JEQ_K, jt: 0, jf: 0, k });
    }
    /// Continues if the accumulator is at least `k`, else goes to `exit`.
    fn expect_ge(&mut self, k: u32, exit: u32) {
        self.to_exit.push((self.insns.len(), exit));
        self.insns.push(Insn { code: JGE_K, jt: 0, jf: 0, k });
    }
    /// Continues if the accumulator is below `k`, else goes to `exit`.
    fn expect_lt(&mut self, k: u32, exit: u32) {
        // JGE with the branches swapped.
        self.to_exit.push((self.insns.len(), exit | SWAPPED));
        self.insns.push(Insn { code: JGE_K, jt: 0, jf: 0, k });
    }
    fn ret(&mut self, action: u32) {
        self.insns.push(Insn { code: RET_K, jt: 0, jf: 0, k: action });
    }
    /// Appends the exits and resolves every jump to them.
    fn finish(mut self, exits: &[u32]) -> Vec<Insn> {
        let base = self.insns.len();
        for a in exits {
            self.ret(*a);
        }
        for (at, exit) in std::mem::take(&mut self.to_exit) {
            let swapped = exit & SWAPPED != 0;
            let target = base + (exit & !SWAPPED) as usize;
            let off = u8::try_from(target - at - 1).expect("a short program");
            if swapped {
                self.insns[at].jt = off;
            } else {
                self.insns[at].jf = off;
            }
        }
        self.insns
    }
}

const SWAPPED: u32 = 0x8000_0000;
/// Exit indexes.
const EXIT_TRAP: u32 = 0;

/// One allowed call: its number and pinned arguments. A call from the
/// stub's code that matches no allowed call kills the stub.
struct Allowed {
    nr: i64,
    pins: &'static [Pin],
}

fn build(allowed: &[Allowed]) -> Vec<Insn> {
    let mut p = Program::new();
    p.load(ARCH);
    p.expect_eq(AUDIT_ARCH_X86_64, EXIT_TRAP);
    let lo = stub::CODE as u32;
    let hi = (stub::CODE >> 32) as u32;
    p.load(IP_HI);
    p.expect_eq(hi, EXIT_TRAP);
    p.load(IP_LO);
    p.expect_ge(lo, EXIT_TRAP);
    p.expect_lt(lo + stub::CODE_SIZE as u32, EXIT_TRAP);
    for a in allowed {
        // Each call is a block that allows it if the number and every pin
        // match, and otherwise falls through to the next block.
        let start = p.insns.len();
        let end = start + 2 + a.pins.len() * 4 + 1;
        let skip = |p: &Program| u8::try_from(end - p.insns.len() - 1).expect("a short block");
        p.load(NR);
        let jf = skip(&p);
        p.insns.push(Insn { code: JEQ_K, jt: 0, jf, k: a.nr as u32 });
        for pin in a.pins {
            p.load(arg_lo(pin.arg));
            let jf = skip(&p);
            p.insns.push(Insn { code: JEQ_K, jt: 0, jf, k: pin.value as u32 });
            p.load(arg_hi(pin.arg));
            let jf = skip(&p);
            p.insns.push(Insn { code: JEQ_K, jt: 0, jf, k: (pin.value >> 32) as u32 });
        }
        p.ret(RET_ALLOW);
    }
    p.insns.push(Insn { code: RET_K, jt: 0, jf: 0, k: RET_KILL_PROCESS });
    p.finish(&[RET_TRAP])
}

const FUTEX_WAIT: &[Pin] = &[Pin { arg: 1, value: 0 }];
const FUTEX_WAKE: &[Pin] = &[Pin { arg: 1, value: 1 }];

/// The calls the control thread and the handler make.
pub(crate) fn control() -> Vec<Insn> {
    const MMAP: &[Pin] = &[
        Pin { arg: 3, value: (libc::MAP_SHARED | libc::MAP_FIXED) as u64 },
        Pin { arg: 4, value: stub::MEM_FD as u64 },
    ];
    const MMAP_RESIDENT: &[Pin] = &[
        Pin { arg: 3, value: (libc::MAP_SHARED | libc::MAP_FIXED | libc::MAP_POPULATE) as u64 },
        Pin { arg: 4, value: stub::MEM_FD as u64 },
    ];
    const CLONE: &[Pin] =
        &[Pin { arg: 0, value: stub::clone_flags() }, Pin { arg: 2, value: 0 }, Pin { arg: 4, value: 0 }];
    const WRITE: &[Pin] = &[Pin { arg: 0, value: stub::ACK_FD as u64 }, Pin { arg: 2, value: 8 }];
    const SECCOMP: &[Pin] = &[Pin { arg: 0, value: 1 }, Pin { arg: 1, value: 0 }];
    build(&[
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
        Allowed { nr: libc::SYS_sigaltstack, pins: &[Pin { arg: 1, value: 0 }] },
        Allowed { nr: libc::SYS_seccomp, pins: SECCOMP },
    ])
}

/// The calls an application thread's handler makes.
pub(crate) fn thread() -> Vec<Insn> {
    build(&[
        Allowed { nr: libc::SYS_futex, pins: FUTEX_WAIT },
        Allowed { nr: libc::SYS_futex, pins: FUTEX_WAKE },
        Allowed { nr: libc::SYS_rt_sigreturn, pins: &[] },
        Allowed { nr: libc::SYS_exit, pins: &[Pin { arg: 0, value: 0 }] },
    ])
}
