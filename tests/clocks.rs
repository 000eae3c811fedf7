//! Clocks through the vDSO and by syscall, compared with Linux's.

mod common;

#[test]
fn clocks_agree_with_linux_through_vdso_and_syscall() {
    require_kvm!();
    common::c_test("clocks", &[]);
}

/// Timeouts and timer values as long as a timespec holds: Linux clamps
/// them to about 292 years, so they are valid and never end.
#[test]
fn the_longest_timeouts_are_valid() {
    require_kvm!();
    common::c_test("long_timeouts", &[]);
}
