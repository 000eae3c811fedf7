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
    fork_threads,
    signal_fault_race,
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
}

/// SIGBUS past the end of a file mapping, wherever the fault falls.
#[test]
fn sig_bus() {
    require_kvm!();
    common::c_test("sig_bus", &[]);
}
