//! Clocks through the vDSO and by syscall, compared with Linux's.

mod common;

#[test]
fn clocks_agree_with_linux_through_vdso_and_syscall() {
    require_kvm!();
    common::c_test("clocks", &[]);
}
