//! ptrace inside the sandbox: a C tracer checked against Linux, and the
//! two programs people trace with, `strace -f` and `gdb -batch`, giving
//! the same trace and the same stops as they do natively.

mod common;

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use common::{c_program, c_test, finish_within, run_with, spawn_cordon_with};

/// /proc/PID/mem: reads and writes at an address, EIO where nothing is
/// mapped, forced writes into read-only memory, ptrace's access rule.
#[test]
fn proc_pid_mem_reads_and_writes_as_linux() {
    require_kvm!();
    common::c_test("proc_mem", &[]);
}

/// A traced leader that exits before its other threads: its exit stop at
/// once, its exit when the process ends, to a tracer that is its parent
/// and to one that is not.
#[test]
fn a_leader_outlived_by_its_threads_is_reported_to_its_tracer() {
    require_kvm!();
    common::c_test("ptrace_leader", &[]);
}

#[test]
fn tracer_sees_what_linux_shows() {
    require_kvm!();
    c_test("ptrace", &[]);
}

/// The host program `path`, which the test needs: missing, the test skips,
/// or fails under CORDON_REQUIRE_KVM=1 (scripts/install-deps installs it).
fn tool(path: &str) -> bool {
    if Path::new(path).exists() {
        return true;
    }
    assert!(std::env::var("CORDON_REQUIRE_KVM").as_deref() != Ok("1"), "{path} is missing (scripts/install-deps)");
    eprintln!("skipping: {path} is not installed");
    false
}

/// Runs `program args` natively and in the sandbox with the same small
/// environment.
fn both(program: &str, args: &[&str], what: &str) -> (Output, Output) {
    let mut cmd = Command::new(program);
    cmd.env_clear().env("PATH", "/usr/bin:/bin").args(args);
    let native = run_with(cmd, None);
    let opts = ["--env-clear", "-e", "PATH=/usr/bin:/bin"];
    let sandboxed =
        finish_within(spawn_cordon_with(&opts, &[&[program][..], args].concat()), Duration::from_secs(300), what);
    (native, sandboxed)
}

/// The system calls of each process in an `strace -f` trace, by name, in
/// order: the first process first, then the others in the order their
/// parents' fork or clone returned them. Calls whose number depends on
/// when children end (a shell's `wait4`, interrupted or not, and the
/// `rt_sigreturn` of each SIGCHLD handled) are left out.
fn calls_by_process(trace: &str) -> Vec<Vec<String>> {
    let mut calls: Vec<(String, String)> = Vec::new();
    let mut children: Vec<String> = Vec::new();
    for line in trace.lines() {
        // "[pid  N] " once several processes are traced; none before.
        let (pid, rest) = match line.strip_prefix("[pid") {
            Some(r) => {
                let (p, rest) = r.split_once(']').expect("pid prefix");
                (p.trim().to_string(), rest.trim_start())
            }
            None => (String::new(), line),
        };
        let resumed = rest.starts_with("<...");
        let name_end = if resumed { None } else { rest.find('(') };
        if let Some(end) = name_end {
            let name = &rest[..end];
            if !name.is_empty()
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                && !matches!(name, "wait4" | "rt_sigreturn")
            {
                calls.push((pid.clone(), name.to_string()));
            }
        }
        // A fork's result, whether printed whole or resumed.
        let forked = ["clone(", "clone3(", "fork(", "vfork(", "<... clone resumed>", "<... clone3 resumed>"]
            .iter()
            .any(|p| rest.starts_with(p));
        if forked
            && let Some(child) = rest.rsplit_once("= ").map(|(_, r)| r.trim())
            && child.bytes().all(|b| b.is_ascii_digit())
        {
            children.push(child.to_string());
        }
    }
    // Lines without a prefix are the first process's: the one no fork
    // returned (a child may print before its parent's fork returns).
    let first =
        calls.iter().map(|(p, _)| p).find(|p| !p.is_empty() && !children.contains(p)).cloned().unwrap_or_default();
    let mut by_pid: HashMap<String, Vec<String>> = HashMap::new();
    for (pid, name) in calls {
        let pid = if pid.is_empty() { first.clone() } else { pid };
        by_pid.entry(pid).or_default().push(name);
    }
    let mut out = vec![by_pid.remove(&first).unwrap_or_default()];
    for c in &children {
        out.push(by_pid.remove(c).unwrap_or_default());
    }
    out
}

#[test]
fn strace_of_a_pipeline_shows_the_native_calls() {
    require_kvm!();
    if !tool("/usr/bin/strace") {
        return;
    }
    let args = ["-f", "-qq", "--signal=none", "/bin/sh", "-c", "echo hi | cat"];
    let (native, sandboxed) = both("/usr/bin/strace", &args, "strace -f");
    let text = |o: &Output| String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(native.status.success(), "strace natively:\n{}", text(&native));
    assert_eq!(sandboxed.status.code(), Some(0), "strace in the sandbox:\n{}", text(&sandboxed));
    assert_eq!(String::from_utf8_lossy(&sandboxed.stdout), "hi\n");
    let (n, s) = (calls_by_process(&text(&native)), calls_by_process(&text(&sandboxed)));
    assert_eq!(n.len(), 3, "a shell and its two children natively:\n{}", text(&native));
    assert_eq!(
        s,
        n,
        "system calls per process differ; in the sandbox:\n{}\nnatively:\n{}",
        text(&sandboxed),
        text(&native)
    );
    // The calls left out above are there all the same.
    let names = |t: &str| -> BTreeSet<String> {
        t.lines().filter_map(|l| l.split('(').next()).map(|n| n.rsplit(' ').next().unwrap_or("").to_string()).collect()
    };
    assert!(names(&text(&sandboxed)).contains("wait4"), "{}", text(&sandboxed));
}

/// What gdb printed, with addresses and process ids made alike.
fn normalized(out: &[u8]) -> String {
    let text = String::from_utf8_lossy(out);
    let mut s = String::new();
    for line in text.lines() {
        let mut l = String::new();
        let mut rest = line;
        while let Some(i) = rest.find("0x") {
            l.push_str(&rest[..i]);
            l.push_str("0xADDR");
            rest = rest[i + 2..].trim_start_matches(|c: char| c.is_ascii_hexdigit());
        }
        l.push_str(rest);
        if let Some(i) = l.find("(process ") {
            let end = l[i..].find(')').map_or(l.len(), |e| i + e);
            l.replace_range(i..end, "(process N");
        }
        s.push_str(&l);
        s.push('\n');
    }
    s
}

#[test]
fn gdb_stops_where_it_stops_natively() {
    require_kvm!();
    if !tool("/usr/bin/gdb") {
        return;
    }
    for v in common::VARIANTS {
        let prog = c_program("gdb_target", v);
        let p = prog.to_str().expect("utf-8 path");
        let script = [
            "break square",
            "run",
            "bt",
            "next",
            "next",
            "info registers rip",
            "finish",
            "continue",
            "step",
            "bt",
            "continue",
            "bt",
            "info registers rip",
            "continue",
        ];
        let mut args = vec!["-batch", "-nx"];
        for c in &script {
            args.push("-ex");
            args.push(c);
        }
        args.push(p);
        let what = format!("gdb gdb_target-{v}");
        let (native, sandboxed) = both("/usr/bin/gdb", &args, &what);
        let (n, s) = (normalized(&native.stdout), normalized(&sandboxed.stdout));
        assert!(
            n.contains("Program received signal SIGSEGV"),
            "{what} natively:\n{n}{}",
            String::from_utf8_lossy(&native.stderr)
        );
        assert!(n.contains("#1  ") && n.contains("in main"), "{what}: a backtrace natively:\n{n}");
        assert_eq!(s, n, "{what}: in the sandbox (stderr {})", String::from_utf8_lossy(&sandboxed.stderr));
        assert_eq!(sandboxed.status.code(), native.status.code(), "{what}");
    }
}
