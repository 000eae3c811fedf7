//! The C programs of the processes issue (tests/c), each run natively and
//! in the sandbox in every executable variant: both must pass with the
//! same output, so every expectation is Linux's own.

mod common;

macro_rules! c_tests {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                require_kvm!();
                common::c_test(stringify!($name), &[]);
            }
        )*
    };
}

c_tests! {
    fork_cow,
    futex_mutex,
    pthread_sync,
    sig_eintr,
    sig_faults,
    wait_status,
    thread_exit,
    exec_threads,
    fpu_signal,
    sig_mask,
    pgrp,
    pipes,
    poll_select,
    epoll,
    pidfd,
    timers,
    prctl_orphans,
    sig_edges,
    sched_affinity,
}

/// SIGBUS past the end of a file mapping, wherever the fault falls.
#[test]
fn sig_bus() {
    require_kvm!();
    common::c_test("sig_bus", &[]);
}

/// `int $0x80` in a 64-bit process: the sandbox runs no 32-bit system
/// calls, so it is what Linux without IA-32 emulation gives, a general
/// protection fault naming vector 0x80 (SIGSEGV, SI_KERNEL). Natively the
/// 32-bit call runs, so this is checked in the sandbox only.
#[test]
fn int80_is_a_general_protection_fault() {
    require_kvm!();
    for v in common::VARIANTS {
        let prog = common::c_program("sig_edges", v);
        let out = common::sandbox(&[], prog.to_str().unwrap(), &["int80"], None);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "int 0x80: signal 11 code 128 addr (nil) trapno 13 err 0x402\n",
            "sig_edges-{v}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
