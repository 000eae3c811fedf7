//! AF_INET and AF_INET6 on the sandbox's loopback (`--network=none`): C
//! programs (tests/c/inet_*.c) run natively against the host's loopback
//! and in the sandbox must pass and print the same, so every expectation,
//! errno cases included, is Linux's own. What differs by design (nothing
//! leaves the sandbox) is checked in the sandbox only.

mod common;

#[test]
fn inet_tcp() {
    require_kvm!();
    common::c_test("inet_tcp", &[]);
}

#[test]
fn inet_udp() {
    require_kvm!();
    common::c_test("inet_udp", &[]);
}

#[test]
fn inet_proc() {
    require_kvm!();
    common::c_test("inet_proc", &[]);
}

/// Nothing leaves the sandbox: outside addresses are unreachable and raw
/// sockets refused (the host has a network, so no native run).
#[test]
fn inet_isolated() {
    require_kvm!();
    common::c_test_sandbox_only("inet_isolated", &[], &[]);
}
