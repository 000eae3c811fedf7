//! Timer and signal descriptors and CPU time, each a C program run natively
//! and in the sandbox: both must pass and print the same.

mod common;

#[test]
fn timer_descriptors_count_expirations_as_linux() {
    require_kvm!();
    common::c_test("timerfd", &[]);
}

#[test]
fn signal_descriptors_read_pending_signals_as_linux() {
    require_kvm!();
    common::c_test("signalfd", &[]);
}
