//! The sentry must answer anything an application can do, however
//! nonsensical, without panicking or hanging: tests/c/syscall_fuzz.c makes
//! random system calls with adversarial arguments from many processes and
//! threads at once, with `--profile` and `--strace` on, which must stay
//! correct throughout.
//!
//! A long run by hand (the seed and the number of calls from the
//! environment; the summary names the calls reached):
//!
//! ```sh
//! CORDON_FUZZ_SEED=7 CORDON_FUZZ_CALLS=5000000 \
//!     cargo test --release --test robustness -- --ignored --nocapture
//! ```
//!
//! or the fuzzer itself, which then also tells the calls reached every
//! PROGRESS batches (tests/c/syscall_fuzz.c says what its arguments are):
//!
//! ```sh
//! cordon run --memory 1G -- syscall_fuzz-static SEED CALLS 4 4 500 PROGRESS
//! ```

mod common;

use std::process::Output;
use std::time::Duration;

/// Far more than any run here takes: reaching it means a hang.
const HANG: Duration = Duration::from_secs(1200);

/// What the fuzzer's last line says.
struct Summary {
    calls: u64,
    hung: u64,
}

/// Runs the fuzzer in the sandbox with cordon options `options` and checks
/// what every run must give: a normal exit, no sentry bug, the summary.
fn fuzz(options: &[&str], variant: &str, seed: u64, calls: u64, limit: Duration) -> (Output, Summary) {
    let prog = common::c_program("syscall_fuzz", variant);
    let prog = prog.to_str().expect("utf-8 path");
    let (seed, calls) = (seed.to_string(), calls.to_string());
    // The memory the sandbox may use is bounded: calls ask for the most
    // they can.
    let options = [&["--memory", "1G"], options].concat();
    let child = common::spawn_cordon_with(&options, &[prog, &seed, &calls]);
    let out = common::finish_within(child, limit, &format!("fuzzing with seed {seed}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let bug = stderr.lines().find(|l| l.contains("internal error") || l.contains("panicked"));
    assert!(bug.is_none(), "seed {seed}: a sentry bug: {}\nstdout:\n{stdout}", bug.unwrap_or_default());
    assert_eq!(out.status.code(), Some(0), "seed {seed}: sandbox exit status; stdout:\n{stdout}");
    let last = stdout.lines().last().unwrap_or_default();
    let words: Vec<&str> = last.split_whitespace().collect();
    let number_before = |word: &str| {
        let at = words.iter().position(|w| w.trim_end_matches(';') == word)?;
        words.get(at.checked_sub(1)?)?.parse::<u64>().ok()
    };
    let summary = match (words.first(), number_before("calls"), number_before("hung")) {
        (Some(&"fuzz:"), Some(calls), Some(hung)) => Summary { calls, hung },
        _ => panic!("seed {seed}: no summary line; stdout:\n{stdout}"),
    };
    println!("{last}");
    assert_eq!(summary.hung, 0, "seed {seed}: workers hung:\n{stdout}");
    assert!(summary.calls >= calls.parse().unwrap(), "seed {seed}: the run stopped early:\n{stdout}");
    (out, summary)
}

/// The fuzzer's output: a line on how the workers ended, and the summary.
fn assert_only_the_fuzzers_output(out: &Output) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines.len() == 2 && lines[0].starts_with("workers ended: ") && lines[1].starts_with("fuzz: "),
        "stdout holds more than the fuzzer's output:\n{stdout}"
    );
}

/// About a minute of CPU on a two-core machine: 4 processes of 4 threads
/// at a time, a fresh set every batch. The JSON profile that follows
/// cordon's notices on stderr must parse and count every call made.
#[test]
fn random_system_calls_from_many_processes_and_threads() {
    require_kvm!();
    let (out, summary) = fuzz(&["--profile=json"], "static", 1, 350_000, HANG);
    assert_only_the_fuzzers_output(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let start = stderr.find("\n{\n").map(|i| i + 1).or_else(|| stderr.starts_with("{\n").then_some(0));
    let start = start.unwrap_or_else(|| panic!("no JSON profile on stderr:\n{stderr}"));
    for line in stderr[..start].lines() {
        assert!(line.starts_with("cordon: "), "not one of cordon's notices before the profile: {line:?}");
    }
    let json: serde_json::Value = serde_json::from_str(&stderr[start..])
        .unwrap_or_else(|e| panic!("the profile is no JSON document ({e}):\n{}", &stderr[start..]));
    let syscalls = json["syscalls"].as_array().expect("the profile lists system calls");
    let counted: u64 = syscalls.iter().map(|s| s["count"].as_u64().expect("a count per system call")).sum();
    // The fuzzer counts each call just before making it; the profile also
    // counts the fuzzer's own calls.
    assert!(
        counted >= summary.calls,
        "the profile counts {counted} system calls, the fuzzer made {} itself",
        summary.calls
    );
    let exits = json["exits"].as_array().expect("the profile lists exits");
    let syscall_exits = exits.iter().find(|e| e["reason"] == "syscall").and_then(|e| e["count"].as_u64());
    assert!(syscall_exits.is_some_and(|n| n >= summary.calls), "syscall exits in the profile: {syscall_exits:?}");
}

/// With `--strace`, every line cordon writes to stderr is whole and well
/// formed (a traced call, or a notice) up to the profile report, and none
/// reaches the program's stdout.
#[test]
fn strace_stays_well_formed_under_random_system_calls() {
    require_kvm!();
    let (out, summary) = fuzz(&["--strace", "--profile"], "dynamic", 2, 40_000, HANG);
    assert_only_the_fuzzers_output(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let (trace, report) = stderr.split_once("\ncordon profile (").expect("the profile report follows the trace");
    assert!(report.contains("\nsyscalls:"), "the profile report is cut short:\n{report}");
    let mut traced = 0;
    for line in trace.lines() {
        if line.starts_with("cordon: ") {
            continue;
        }
        assert!(common::well_formed_strace_line(line), "not a whole strace line: {line:?}");
        traced += 1;
    }
    assert!(traced >= summary.calls, "{traced} calls traced, {} made", summary.calls);
}

/// The long run by hand: `CORDON_FUZZ_SEED` (default 1) and
/// `CORDON_FUZZ_CALLS` (default ten million).
#[test]
#[ignore = "long: run by hand"]
fn long_fuzz_run() {
    require_kvm!();
    let env = |name: &str, default: u64| {
        std::env::var(name).map_or(default, |v| v.parse().unwrap_or_else(|_| panic!("{name}: not a number")))
    };
    let (seed, calls) = (env("CORDON_FUZZ_SEED", 1), env("CORDON_FUZZ_CALLS", 10_000_000));
    fuzz(&[], "static", seed, calls, Duration::from_secs(7 * 24 * 3600));
}
