//! Language runtimes with event loops of their own: a Go program and a
//! Node script (tests/go, tests/js), run natively and in the sandbox with
//! the same output. Each is skipped, saying so, where its toolchain is not
//! installed.

mod common;

use std::path::PathBuf;

use common::{assert_same, cordon, native, run_with, scratch_dir};

/// `cordon run -- program args`, ended after a minute: a runtime that
/// lost a wake-up hangs, and the test must fail rather than wait.
fn sandbox(program: &str, args: &[&str]) -> std::process::Output {
    let mut cmd = std::process::Command::new("timeout");
    cmd.args(["-s", "KILL", "60"]).arg(cordon()).args(["run", "--", program]).args(args);
    run_with(cmd, None)
}

/// `name` on PATH, if it is there.
fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| PathBuf::from(d).join(name)).find(|p| p.is_file())
}

#[test]
fn go_goroutines_netpoller_and_exec() {
    require_kvm!();
    let Some(go) = on_path("go") else {
        eprintln!("skipping: no Go toolchain on PATH");
        return;
    };
    let dir = scratch_dir("go");
    let prog = dir.join("runtime_check");
    let mut build = std::process::Command::new(go);
    build.env("CGO_ENABLED", "0").env("GOTOOLCHAIN", "local");
    // Go keeps its build cache under $HOME; give it one where there is none.
    if ["GOCACHE", "XDG_CACHE_HOME", "HOME"].iter().all(|v| std::env::var_os(v).is_none()) {
        build.env("GOCACHE", dir.join("cache")).env("GOPATH", dir.join("gopath"));
    }
    let built = build
        .args(["build", "-o"])
        .arg(&prog)
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/go/runtime_check.go"))
        .output()
        .expect("run go build");
    assert!(built.status.success(), "go build: {}", String::from_utf8_lossy(&built.stderr));
    let p = prog.to_str().unwrap();
    let n = native(p, &[], None);
    assert!(n.status.success(), "fails natively: {}", String::from_utf8_lossy(&n.stderr));
    // Several runs: a lost wake-up in the scheduler or the netpoller shows
    // as a hang in some of them, not all.
    for _ in 0..3 {
        assert_same("runtime_check", &sandbox(p, &[]), &n);
    }
}

/// Callbacks of one loop turn finish in any order: compare sorted lines.
fn sorted_lines(out: &[u8]) -> Vec<String> {
    let mut v: Vec<String> = String::from_utf8_lossy(out).lines().map(str::to_string).collect();
    v.sort();
    v
}

#[test]
fn node_event_loop_and_thread_pool() {
    require_kvm!();
    let Some(node) = on_path("node") else {
        eprintln!("skipping: no node on PATH");
        return;
    };
    let node = node.to_str().unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/js/runtime_check.js");
    let n = native(node, &[script], None);
    assert!(n.status.success(), "fails natively: {}", String::from_utf8_lossy(&n.stderr));
    assert_eq!(sorted_lines(&n.stdout).len(), 5);
    for _ in 0..2 {
        let s = sandbox(node, &[script]);
        assert_eq!(s.status.code(), Some(0), "{}", String::from_utf8_lossy(&s.stderr));
        assert_eq!(sorted_lines(&s.stdout), sorted_lines(&n.stdout));
    }
}
