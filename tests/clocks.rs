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

/// True if the host keeps time with an invariant TSC: then application code
/// on every platform reads a TSC the sandbox's clock can follow.
fn host_tsc_is_invariant_clocksource() -> bool {
    let source = std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource");
    let flags = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let flags: Vec<&str> =
        flags.lines().find(|l| l.starts_with("flags")).map(|l| l.split_whitespace().collect()).unwrap_or_default();
    source.is_ok_and(|s| s.trim() == "tsc") && flags.contains(&"constant_tsc") && flags.contains(&"nonstop_tsc")
}

/// The vDSO reads the clock from the time page, without a syscall, on
/// every platform, and agrees with the syscall: each vDSO read lies
/// between the two syscall reads around it.
#[test]
fn the_vdso_answers_clock_reads_itself() {
    require_kvm!();
    common::c_test("vdso_reads", &[]);
    if !host_tsc_is_invariant_clocksource() {
        eprintln!("skipping the profile check: the host does not keep time with an invariant TSC");
        return;
    }
    let prog = common::c_program("vdso_reads", "static");
    let out = common::sandbox(&["--profile=json"], prog.to_str().unwrap(), &[], None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let json: serde_json::Value = serde_json::from_str(&stderr)
        .unwrap_or_else(|e| panic!("--profile=json did not print one JSON document ({e}):\n{stderr}"));
    assert_eq!(json["vdso_clock"], true, "the time page is not in use on {}", common::platform());
    let calls = json["syscalls"]
        .as_array()
        .expect("syscalls is a list")
        .iter()
        .find(|s| s["name"] == "clock_gettime")
        .and_then(|s| s["count"].as_u64());
    // 1000 rounds of two raw reads; a vDSO falling back would add 1000.
    assert_eq!(calls, Some(2000), "clock_gettime syscalls on {}", common::platform());
}

/// getcpu through the vDSO makes no syscall where the CPU's number is in
/// TSC_AUX (every CPU with RDTSCP: Linux sets it, and the kvm platform
/// sets each vCPU's): of clocks.c's 100 rounds of two vDSO calls and one
/// raw call, only the raw calls reach the sentry.
#[test]
fn the_vdso_answers_getcpu_itself() {
    require_kvm!();
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    if !cpuinfo.lines().any(|l| l.starts_with("flags") && l.split_whitespace().any(|f| f == "rdtscp")) {
        eprintln!("skipping: the host CPU has no RDTSCP");
        return;
    }
    let prog = common::c_program("clocks", "static");
    let out = common::sandbox(&["--profile=json"], prog.to_str().unwrap(), &[], None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let json: serde_json::Value = serde_json::from_str(&stderr)
        .unwrap_or_else(|e| panic!("--profile=json did not print one JSON document ({e}):\n{stderr}"));
    let calls = json["syscalls"]
        .as_array()
        .expect("syscalls is a list")
        .iter()
        .find(|s| s["name"] == "getcpu")
        .and_then(|s| s["count"].as_u64());
    assert_eq!(calls, Some(100), "getcpu syscalls on {}", common::platform());
}
