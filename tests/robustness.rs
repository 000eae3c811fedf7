//! The sentry must answer anything an application can do, however
//! nonsensical, without panicking or hanging.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Every system call number with garbage arguments, each in a child of its
/// own. The children may die; the sandbox must finish normally.
#[test]
fn garbage_system_calls_never_break_the_sandbox() {
    require_kvm!();
    let prog = common::c_program("syscall_fuzz", "static");
    let mut child = Command::new(common::cordon())
        .args(["run", "--"])
        .arg(&prog)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start cordon");
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("collect");
            panic!("the sandbox hung; its stderr:\n{}", String::from_utf8_lossy(&out.stderr));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("collect");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "the sentry panicked:\n{stderr}");
    assert_eq!(out.status.code(), Some(0), "sandbox exit status; stderr:\n{stderr}");
    let last = stdout.lines().rfind(|l| l.starts_with("fuzzed "));
    let last = last.unwrap_or_else(|| panic!("no summary line; stdout:\n{stdout}\nstderr:\n{stderr}"));
    let ran: u32 = last.split_whitespace().nth(1).and_then(|n| n.parse().ok()).expect("count");
    assert!(ran > 400, "only {ran} system calls were tried: {last}");
}
