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

#[test]
fn cpu_clocks_and_cpu_timers_agree_with_linux() {
    require_kvm!();
    common::c_test("cpu_time", &[]);
}

/// CPU time split as Linux splits it: application code is user time, the
/// sentry's work for a call is system time; getrusage, times(),
/// /proc/self/stat and the itimers (ITIMER_VIRTUAL on user time alone)
/// agree, natively and in the sandbox.
#[test]
fn user_and_system_time_are_told_apart() {
    require_kvm!();
    common::c_test("cpu_split", &[]);
}

/// RLIMIT_CPU ends a spinning process: SIGXCPU at the soft limit, SIGKILL
/// at the hard one. Each run spins for seconds of CPU time, so one variant
/// of the program is enough.
#[test]
fn the_cpu_limit_stops_a_spinning_process() {
    require_kvm!();
    let prog = common::c_program("cpu_limit", "static");
    let p = prog.to_str().expect("utf-8 path");
    let native = common::native(p, &[], None);
    assert!(native.status.success(), "cpu_limit fails natively:\n{}", String::from_utf8_lossy(&native.stderr));
    let sandboxed = common::finish_within(common::spawn_cordon(&[p]), std::time::Duration::from_secs(120), "cpu_limit");
    common::assert_same("cpu_limit", &sandboxed, &native);
}
