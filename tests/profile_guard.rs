//! Regression guard on what running a program costs in VM exits and page
//! faults. These counts are deterministic for a deterministic program, so
//! unlike times they can be compared exactly from run to run: an accidental
//! extra exit per syscall, or a fault-around that stopped working, shows up
//! here as a changed count long before anyone reads a benchmark.
//!
//! Each case runs the `exits` test program with `--profile=json` and checks
//! two things:
//! - the counts against `tests/data/profile_counts.json` (on the trap
//!   platform `tests/data/profile_counts_trap.json`: its traps differ),
//!   within a small tolerance (a libc or kernel update may move them a
//!   little);
//! - the cost of each phase against the run without phases, against bounds
//!   that follow from the design (one exit per syscall, fault-around).
//!
//! After an intended change to the counts, rerun with
//! `CORDON_BLESS_PROFILE=1` to rewrite the expectations, and say why in the
//! commit.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;

/// The counters compared, as named in the profile's JSON.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Counts {
    syscall_exits: u64,
    page_fault_exits: u64,
    exception_exits: u64,
    pages_mapped: u64,
    signalled_faults: u64,
    /// Calls the platform answered without an exit (`in_guest`).
    #[serde(default)]
    fast_path_calls: u64,
    /// System call sites rewritten to skip the trap, and the syscall exits
    /// that came through them.
    #[serde(default)]
    rewritten_sites: u64,
    #[serde(default)]
    rewritten_calls: u64,
}

/// The cases: arguments of the `exits` program.
const CASES: [&str; 9] = [
    "",
    "syscalls=2000",
    "getpid=2000",
    "affinity=2000",
    "touch=1024",
    "cow=256",
    "signals=100",
    "file=64",
    "clock=1000",
];

fn expectations_path() -> PathBuf {
    let name = if common::platform() == "trap" { "profile_counts_trap.json" } else { "profile_counts.json" };
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

/// Counts of one run, and whether clocks were read in the guest.
fn profile(args: &str) -> (Counts, bool) {
    let prog = common::c_program("exits", "static");
    let args: Vec<&str> = args.split_whitespace().collect();
    let out = common::sandbox(&["--env-clear", "--profile=json"], prog.to_str().unwrap(), &args, None);
    let native = common::native(prog.to_str().unwrap(), &args, None);
    common::assert_same(&format!("exits {args:?}"), &out, &native);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let json: Value = serde_json::from_str(&stderr)
        .unwrap_or_else(|e| panic!("--profile=json did not print one JSON document ({e}):\n{stderr}"));
    let exit = |reason: &str| {
        json["exits"]
            .as_array()
            .expect("exits is a list")
            .iter()
            .find(|x| x["reason"] == reason)
            .and_then(|x| x["count"].as_u64())
            .unwrap_or_else(|| panic!("no {reason} count in the profile"))
    };
    let faults = &json["faults"];
    let counts = Counts {
        syscall_exits: exit("syscall"),
        page_fault_exits: exit("page fault"),
        exception_exits: exit("exception"),
        pages_mapped: faults["pages_mapped"].as_u64().expect("pages_mapped"),
        signalled_faults: faults["signalled"].as_u64().expect("signalled"),
        fast_path_calls: json["syscalls"]
            .as_array()
            .expect("syscalls is a list")
            .iter()
            .map(|c| c["in_guest"].as_u64().expect("in_guest"))
            .sum(),
        rewritten_sites: json["rewritten_sites"].as_u64().expect("rewritten_sites"),
        rewritten_calls: json["rewritten_calls"].as_u64().expect("rewritten_calls"),
    };
    (counts, json["vdso_clock"].as_bool().expect("vdso_clock"))
}

/// Within max(2, 5%) of the expectation.
fn close(measured: u64, expected: u64) -> bool {
    measured.abs_diff(expected) <= (expected / 20).max(2)
}

#[test]
fn exit_and_fault_counts_match_expectations() {
    require_kvm!();
    let runs: BTreeMap<String, (Counts, bool)> = CASES.iter().map(|c| (c.to_string(), profile(c))).collect();
    let measured: BTreeMap<String, Counts> = runs.iter().map(|(k, v)| (k.clone(), v.0)).collect();

    // Bounds from the design, relative to the run that does nothing.
    let base = measured[""];
    let delta = |case: &str| {
        let m = measured[case];
        (
            m.syscall_exits as i64 - base.syscall_exits as i64,
            m.page_fault_exits as i64 - base.page_fault_exits as i64,
            m.pages_mapped as i64 - base.pages_mapped as i64,
        )
    };
    let (sys, faults, _) = delta("syscalls=2000");
    let fast = measured["syscalls=2000"].fast_path_calls - base.fast_path_calls;
    if common::platform() == "trap" {
        // The loop's site keeps the number out of the instruction before
        // the syscall, so it is not rewritten: after its first trap the
        // handler answers it from the published parent.
        assert_eq!(fast, 1999, "of 2000 getppid calls {fast} were answered without an exit");
        assert!(sys <= 3, "2000 getppid calls took {sys} syscall exits");
    } else {
        assert!((2000..=2010).contains(&sys), "2000 getppid calls took {sys} syscall exits");
        assert_eq!(fast, 0, "the kvm platform answered {fast} raw getppid calls without an exit");
    }
    // glibc's getpid is a rewritable site on both platforms: the call
    // before the loop traps, the trampoline answers the loop's (from the stub's published
    // state on trap, from a page of the address space at ring 3 on kvm).
    let (sys, _, _) = delta("getpid=2000");
    let fast = measured["getpid=2000"].fast_path_calls - base.fast_path_calls;
    let sites = measured["getpid=2000"].rewritten_sites - base.rewritten_sites;
    assert_eq!(fast, 2000, "of 2000 getpid calls {fast} were answered without an exit");
    assert!(sys <= 3, "2000 getpid calls took {sys} syscall exits");
    assert!(sites >= 1, "the getpid loop rewrote no site");
    // glibc's sched_getaffinity too, on trap: the trampoline writes the
    // mask the sentry published into the caller's buffer. The guest's
    // trampoline on kvm answers only calls whose answer is one value per
    // process.
    let (sys, _, _) = delta("affinity=2000");
    let fast = measured["affinity=2000"].fast_path_calls - base.fast_path_calls;
    if common::platform() == "trap" {
        assert_eq!(fast, 2000, "of 2000 sched_getaffinity calls {fast} were answered without an exit");
        assert!(sys <= 3, "2000 sched_getaffinity calls took {sys} syscall exits");
    } else {
        assert_eq!(fast, 0, "the kvm platform answered {fast} sched_getaffinity calls without an exit");
        assert!((2000..=2010).contains(&sys), "2000 sched_getaffinity calls took {sys} syscall exits");
    }
    if common::platform() == "trap" {
        for (case, c) in measured.iter().filter(|(case, _)| !case.starts_with("signals")) {
            // Once rewritten a site no longer traps: most calls come
            // through the trampoline (rt_sigreturn's site is not of the
            // rewritten form, so every handled signal traps once).
            assert!(c.rewritten_sites > 0, "case {case:?}: no site rewritten");
            assert!(
                c.syscall_exits - c.rewritten_calls <= c.rewritten_sites + 12,
                "case {case:?}: {} of {} syscall exits trapped with {} sites rewritten",
                c.syscall_exits - c.rewritten_calls,
                c.syscall_exits,
                c.rewritten_sites
            );
        }
    } else {
        // Only sites of calls the guest's trampoline answers are
        // rewritten there: every other call exits as before.
        for (case, c) in &measured {
            assert_eq!(c.rewritten_calls, 0, "case {case:?}: calls reached the sentry through a rewritten site");
        }
    }
    assert!(faults <= 2, "2000 getppid calls took {faults} page faults");
    let (_, faults, pages) = delta("touch=1024");
    assert!(pages >= 1024, "touching 1024 pages mapped only {pages}");
    assert!(faults <= 1024 / 8, "touching 1024 pages took {faults} faults: fault-around is not working");
    let (sys, _, _) = delta("signals=100");
    assert!(sys <= 100 * 5 + 10, "100 raise() took {sys} syscall exits");
    let (sys, _, _) = delta("clock=1000");
    if runs["clock=1000"].1 {
        assert!(sys <= 5, "1000 clock reads took {sys} syscall exits with the vDSO clock in use");
    } else {
        eprintln!("clocks are read by syscall on this host (its TSC is not usable), so clock=1000 is not bounded");
    }
    let (_, faults, _) = delta("cow=256");
    assert!(faults <= 256 + 40, "a child writing 256 shared pages took {faults} faults");
    for (case, c) in &measured {
        assert_eq!(c.signalled_faults, 0, "case {case:?}: faults were signalled");
        assert_eq!(c.exception_exits, 0, "case {case:?}: unexpected exceptions");
    }

    let path = expectations_path();
    if std::env::var("CORDON_BLESS_PROFILE").as_deref() == Ok("1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let text = serde_json::to_string_pretty(&measured).unwrap() + "\n";
        std::fs::write(&path, text).expect("write expectations");
        eprintln!("wrote {}", path.display());
        return;
    }
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with CORDON_BLESS_PROFILE=1 to create it)", path.display()));
    let expected: BTreeMap<String, Counts> = serde_json::from_str(&text).expect("expectations parse");
    let mut wrong = Vec::new();
    for case in CASES {
        let m = measured[case];
        let Some(e) = expected.get(case) else {
            wrong.push(format!("case {case:?}: no expectation"));
            continue;
        };
        for (what, mv, ev) in [
            ("syscall exits", m.syscall_exits, e.syscall_exits),
            ("page-fault exits", m.page_fault_exits, e.page_fault_exits),
            ("exception exits", m.exception_exits, e.exception_exits),
            ("pages mapped", m.pages_mapped, e.pages_mapped),
            ("signalled faults", m.signalled_faults, e.signalled_faults),
            ("calls answered without an exit", m.fast_path_calls, e.fast_path_calls),
            ("rewritten sites", m.rewritten_sites, e.rewritten_sites),
            ("calls through rewritten sites", m.rewritten_calls, e.rewritten_calls),
        ] {
            if !close(mv, ev) {
                wrong.push(format!("case {case:?}: {what} {mv}, expected {ev}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "counts moved (rerun with CORDON_BLESS_PROFILE=1 if the change is intended):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn counts_do_not_vary_between_runs() {
    require_kvm!();
    let (a, _) = profile("touch=300 syscalls=100 file=16");
    let (b, _) = profile("touch=300 syscalls=100 file=16");
    assert_eq!(a, b, "the same program gave different counts in two runs");
}

#[test]
fn tolerance_is_small() {
    assert!(close(100, 104));
    assert!(!close(100, 106));
    assert!(close(3, 5));
    assert!(!close(3, 6));
    assert!(!close(2000, 4000), "a doubling must never pass");
}
