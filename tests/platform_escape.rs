//! The trap platform's threat model, tried by an application
//! (tests/c/stub_escape.c): host system calls made from the stub's own code,
//! the one place its seccomp filter lets any through, a jump to a fast
//! path's write to application memory, and writes over the stub's pages,
//! must get the application nothing and leave the sandbox running. On a platform without stubs the program finds none there, as
//! natively. And the factory that forks the stubs runs confined, as do
//! the stubs it forks.

mod common;

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

#[test]
fn the_stubs_code_and_pages_give_nothing() {
    require_kvm!();
    for variant in common::VARIANTS {
        let prog = common::c_program("stub_escape", variant);
        let prog = prog.to_str().expect("utf-8 path");
        let out = common::sandbox(&[], prog, &[], None);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let what = format!("stub_escape-{variant}");
        assert!(!stdout.contains("ESCAPED"), "{what}: a host call got through:\n{stdout}");
        if common::platform() == "trap" {
            assert_eq!(out.status.code(), Some(0), "{what}:\n{stdout}{}", String::from_utf8_lossy(&out.stderr));
            // The filters kill the stub (and so the process) for a call
            // they do not allow; the read-only request page faults.
            for line in [
                "host write: killed by signal 9",
                "host getpid: killed by signal 9",
                "host mmap: killed by signal 9",
                "host clone: killed by signal 9",
                "request page write: killed by signal 11",
                // The fast paths' writes fault there, and their fixup
                // makes the call in rax as any call is made.
                "fast-path write 0 to the request page: exited 3",
                "fast-path write 1 to the request page: exited 3",
                "parent alive",
            ] {
                assert!(stdout.lines().any(|l| l == line), "{what}: no {line:?} in:\n{stdout}");
            }
        } else {
            let native = common::native(prog, &[], None);
            common::assert_same(&what, &out, &native);
        }
    }
}

/// The host identity of a sandbox started by root, and the user the
/// unprivileged run is made as.
const NOBODY: u32 = 65534;

/// While a sandbox runs, started by root or by `as_user`: on trap, the
/// sentry's one child, the stub factory, holds no capability in any set,
/// has `PR_SET_NO_NEW_PRIVS` and a seccomp filter, nobody's ids (the
/// caller's, for a caller who is not root), an empty root and only its
/// own descriptors at their fixed numbers; each stub it forked has its
/// ids, no capability and a filter of its own above the factory's. On
/// kvm, the sentry forks nothing.
fn check_factory(as_user: Option<u32>) {
    let what = format!("as uid {}", as_user.unwrap_or(0));
    let mut cmd = Command::new(common::cordon());
    cmd.args(["run", "--", "/bin/sh", "-c", "echo ready; read x; echo done"]).current_dir("/");
    if let Some(id) = as_user {
        cmd.uid(id).gid(id);
    }
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start");
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().expect("stdout")));
    assert_eq!(lines.next().expect("a line").expect("read"), "ready", "{what}");

    let sentry = common::child_of(child.id()).expect("the sentry, cordon's child");
    let factory = common::child_of(sentry);
    if common::platform() != "trap" {
        assert_eq!(factory, None, "{what}: the sentry forks nothing on {}", common::platform());
    } else {
        let factory = factory.expect("the factory, the sentry's child");
        let id = as_user.unwrap_or(NOBODY);
        let ids = format!("{id}\t{id}\t{id}\t{id}");
        let none = "0000000000000000";
        let confined = |pid: u32, whose: &str, filters: &str| {
            let what = format!("{what}: {whose} {pid}");
            assert_eq!(common::status_field(pid, "Uid"), ids, "{what}");
            assert_eq!(common::status_field(pid, "Gid"), ids, "{what}");
            assert_eq!(common::status_field(pid, "Groups"), "", "{what}");
            for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
                assert_eq!(common::status_field(pid, set), none, "{what}: {set}");
            }
            assert_eq!(common::status_field(pid, "NoNewPrivs"), "1", "{what}");
            assert_eq!(common::status_field(pid, "Seccomp"), "2", "{what}");
            assert_eq!(common::status_field(pid, "Seccomp_filters"), filters, "{what}");
        };
        confined(factory, "factory", "1");
        let root: Vec<_> = std::fs::read_dir(format!("/proc/{factory}/root")).expect("its root").flatten().collect();
        assert!(root.is_empty(), "{what}: the factory's root is empty: {root:?}");
        let fds = common::descriptors(factory);
        let numbers: Vec<u32> = fds.iter().map(|(fd, _)| fd.parse().expect("a number")).collect();
        let mut sorted = numbers.clone();
        sorted.sort();
        assert_eq!(sorted, (3..7 + 512).collect::<Vec<u32>>(), "{what}: the factory's descriptors");
        for (fd, target) in &fds {
            let expected = match fd.as_str() {
                "3" => "/memfd:cordon-trap-control (deleted)",
                "4" => "/memfd:cordon-memory (deleted)",
                "6" => "anon_inode:[signalfd]",
                _ => "anon_inode:[eventfd]",
            };
            assert_eq!(target, expected, "{what}: the factory's descriptor {fd}");
        }
        let stub = common::child_of(factory).expect("a stub, the factory's child");
        confined(stub, "stub", "2");
    }
    drop(child.stdin.take());
    let rest: Vec<String> = lines.map(|l| l.expect("read")).collect();
    assert_eq!(rest, ["done"], "{what}");
    let out = common::finish_within(child, std::time::Duration::from_secs(60), &what);
    assert_eq!(out.status.code(), Some(0), "{what}: stderr:\n{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn the_factory_runs_confined() {
    require_kvm!();
    check_factory(None);
    // Started by a user who is not root (needs root to become one; on kvm,
    // a device node it may open, which the confinement tests make).
    if rustix::process::geteuid().is_root() && common::platform() == "trap" {
        check_factory(Some(NOBODY));
    } else {
        eprintln!("skipping the run as a user who is not root: it needs root, on trap");
    }
}
