//! The system calls a container meets that the sandbox answers as a
//! container's kernel does: setting the clocks (refused without
//! CAP_SYS_TIME) and reading their state, scheduling attributes and I/O
//! priorities, memory protection keys (none, as on a CPU without them),
//! memory policies on one node, membarrier, and session keyrings with
//! "user" keys. Each C program runs natively (narrowed to a container's
//! capabilities first where privileges matter) and in the sandbox.

mod common;

use common::c_test;

#[test]
fn clock_set() {
    require_kvm!();
    c_test("clock_set", &[]);
}

#[test]
fn sched_attr() {
    require_kvm!();
    c_test("sched_attr", &[]);
}

#[test]
fn mem_policy() {
    require_kvm!();
    c_test("mem_policy", &[]);
}

#[test]
fn keyrings() {
    require_kvm!();
    c_test("keyrings", &[]);
}
