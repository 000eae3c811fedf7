//! How a sandbox ends, whatever happens on the way: when its first process
//! exits while others fork, when cordon's stderr is closed under it, when
//! cordon is killed outright, and when the sentry itself has a bug.

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

/// Far more than any of these runs takes: reaching it means a hang.
const HANG: Duration = Duration::from_secs(60);

/// Waits for `child` and collects its output; fails if it runs longer
/// than `HANG`.
fn finish(child: Child, what: &str) -> Output {
    common::finish_within(child, HANG, what)
}

/// True if `unshare` can run a program as the first process of a new PID
/// namespace here, which needs privileges a test machine may not give.
fn pid_namespaces_available() -> bool {
    Command::new("unshare")
        .args(["--pid", "--fork", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The first process exits while the others fork without end: the sandbox
/// ends every time, with the first process's status. Natively, the same
/// program is run as the first process of a PID namespace, whose end Linux
/// makes the sandbox's: every other process in it is killed.
#[test]
fn the_end_kills_processes_forked_while_it_comes() {
    require_kvm!();
    let native = pid_namespaces_available().then(|| {
        let prog = common::c_program("fork_tree", "static");
        let mut cmd = Command::new("unshare");
        cmd.args(["--pid", "--fork"]).arg(&prog).stdout(Stdio::piped()).stderr(Stdio::piped());
        finish(cmd.spawn().expect("start unshare"), "fork_tree natively in a PID namespace")
    });
    match &native {
        Some(n) => assert_eq!(n.status.code(), Some(3), "natively: {}", String::from_utf8_lossy(&n.stderr)),
        None => eprintln!("no PID namespaces here: the sandbox's runs are checked on their own"),
    }
    for round in 0..18 {
        let variant = common::VARIANTS[round % common::VARIANTS.len()];
        let prog = common::c_program("fork_tree", variant);
        let what = format!("fork_tree-{variant}, run {round}");
        let s = finish(common::spawn_cordon(&[prog.to_str().expect("utf-8 path")]), &what);
        assert_eq!(s.status.code(), Some(3), "{what}: stderr:\n{}", String::from_utf8_lossy(&s.stderr));
        assert_eq!(String::from_utf8_lossy(&s.stdout), "16 trees growing\n", "{what}");
        if let Some(n) = &native {
            common::assert_same(&what, &s, n);
        }
    }
}

/// cordon's stderr is a pipe whose reader goes away after one line, as in
/// `cordon run --strace ... 2>&1 | head -1`: cordon's own messages (strace
/// lines, the notice of an unknown system call, the profile at exit) are
/// lost, and the program runs to its end with its status, as natively.
#[test]
fn a_closed_stderr_changes_nothing() {
    require_kvm!();
    let run = |mut cmd: Command, what: &str| {
        let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
        {
            let mut first = String::new();
            let mut err = BufReader::new(child.stderr.take().expect("stderr"));
            err.read_line(&mut first).expect("read stderr");
            assert!(!first.is_empty(), "{what}: no line on stderr");
        } // the reader goes away
        finish(child, what)
    };
    for variant in common::VARIANTS {
        let prog = common::c_program("stderr_closed", variant);
        let what = format!("stderr_closed-{variant}");
        let native = run(Command::new(&prog), &format!("{what} natively"));
        assert_eq!(native.status.code(), Some(7), "{what} natively: {}", String::from_utf8_lossy(&native.stdout));
        let mut cmd = Command::new(common::cordon());
        cmd.args(["run", "--strace", "--profile", "--"]).arg(&prog);
        let sandboxed = run(cmd, &what);
        common::assert_same(&what, &sandboxed, &native);
    }
}

/// Runs `sentry_bug` in the sandbox, in a process group of its own, with
/// the sentry's test bug armed or not.
fn run_sentry_bug(variant: &str, armed: bool) -> (Output, i32) {
    let prog = common::c_program("sentry_bug", variant);
    let mut cmd = Command::new(common::cordon());
    cmd.args(["run", "--"]).arg(&prog).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    // The one line, not a backtrace after it, is what is checked.
    cmd.env_remove("RUST_BACKTRACE").env_remove("RUST_LIB_BACKTRACE").process_group(0);
    if armed {
        cmd.env("CORDON_TEST_PANIC_SYSCALL", "1");
    } else {
        cmd.env_remove("CORDON_TEST_PANIC_SYSCALL");
    }
    let child = cmd.spawn().expect("start cordon");
    let group = child.id() as i32;
    (finish(child, &format!("sentry_bug-{variant}")), group)
}

/// A panic in the sentry, made on purpose in one task while other tasks
/// spin in the guest and sleep in the sentry: cordon ends at once with
/// status 125 and one line naming the bug and where it is, and nothing of
/// the sandbox is left.
#[test]
fn a_sentry_bug_ends_the_sandbox_with_one_line() {
    require_kvm!();
    for variant in common::VARIANTS {
        let (out, group) = run_sentry_bug(variant, true);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(125), "sentry_bug-{variant}: stderr:\n{stderr}");
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines.len(), 1, "sentry_bug-{variant}: one line expected:\n{stderr}");
        let line = lines[0];
        let (message, place) = line
            .strip_prefix("cordon: internal error: ")
            .and_then(|rest| rest.rsplit_once(" at "))
            .unwrap_or_else(|| panic!("sentry_bug-{variant}: not an internal error line: {line}"));
        assert!(message.contains("0xbadc0de"), "sentry_bug-{variant}: the message names the bug: {line}");
        let (file, number) = place.rsplit_once(':').expect("file:line");
        assert!(file.ends_with(".rs") && number.parse::<u32>().is_ok(), "sentry_bug-{variant}: {line}");
        assert!(out.stdout.is_empty(), "sentry_bug-{variant}: {}", String::from_utf8_lossy(&out.stdout));
        // cordon's process group is empty: nothing it started outlived it.
        let left = rustix::process::test_kill_process_group(rustix::process::Pid::from_raw(group).expect("pid"));
        assert_eq!(left, Err(rustix::io::Errno::SRCH), "sentry_bug-{variant}: processes left behind");
    }
}

/// Unarmed, the same system call is an unknown one, as natively: ENOSYS,
/// and the program passes.
#[test]
fn the_test_bug_is_out_of_reach_in_normal_runs() {
    require_kvm!();
    for variant in common::VARIANTS {
        let prog = common::c_program("sentry_bug", variant);
        let native = common::native(prog.to_str().expect("utf-8 path"), &[], None);
        assert_eq!(native.status.code(), Some(0), "natively: {}", String::from_utf8_lossy(&native.stderr));
        let (sandboxed, _) = run_sentry_bug(variant, false);
        common::assert_same(&format!("sentry_bug-{variant}"), &sandboxed, &native);
    }
}

/// Every process below `pid` on the host (children, theirs, ...).
fn descendants(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else { continue };
        for t in tasks.flatten() {
            let children = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
            for c in children.split_whitespace().filter_map(|c| c.parse().ok()) {
                found.push(c);
                todo.push(c);
            }
        }
    }
    found
}

/// True while `pid` is a process that has not ended (a zombie has).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|(_, rest)| rest.trim_start().starts_with(|c| c != 'Z' && c != 'X')))
        .unwrap_or(false)
}

/// cordon killed with SIGKILL while its program spins in its own code,
/// making no system call: the sentry, the processes it started (the trap
/// platform's stubs and their factory) and the program all end with it,
/// holding no CPU nor memory of the host's after it.
#[test]
fn a_killed_cordon_leaves_nothing_running() {
    require_kvm!();
    let mut child = common::spawn_cordon(&["/bin/sh", "-c", "echo ready; while :; do :; done"]);
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().expect("piped stdout")).read_line(&mut line).expect("read");
    assert_eq!(line, "ready\n", "the program did not start");
    let below = descendants(child.id());
    assert!(!below.is_empty(), "cordon started no process");
    child.kill().expect("SIGKILL cordon");
    child.wait().expect("reap cordon");
    let start = std::time::Instant::now();
    loop {
        let left: Vec<u32> = below.iter().copied().filter(|p| alive(*p)).collect();
        if left.is_empty() {
            break;
        }
        assert!(start.elapsed() < HANG, "processes left running after cordon was killed: {left:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
