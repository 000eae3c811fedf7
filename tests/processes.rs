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

/// 10,000 threads that each block in a futex, then all finish. Sleeping
/// threads hold no vCPU: with `--cpus 2` the sandbox creates at most two,
/// and ten thousand threads exceed what one vCPU each would allow.
#[test]
fn many_threads() {
    require_kvm!();
    let prog = common::c_program("many_threads", "dynamic");
    let p = prog.to_str().expect("utf-8 path");
    let n = common::native(p, &[], None);
    assert!(n.status.success(), "many_threads fails natively: {}", String::from_utf8_lossy(&n.stderr));
    let report = common::scratch_dir("many-threads").join("profile.json");
    let s = common::sandbox(&["--cpus", "2", &format!("--profile={}", report.display())], p, &[], None);
    common::assert_same("many_threads", &s, &n);
    let profile: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).expect("profile written")).expect("profile JSON");
    let exit = &profile["resources_at_exit"];
    assert!(exit["vcpus_created"].as_u64().expect("vcpus_created") <= 2, "more vCPUs than --cpus 2: {exit}");
    assert_eq!(exit["vcpus_in_use"].as_u64(), Some(0), "vCPUs still held: {exit}");
}
