//! The sentry confines itself: a seccomp allow-list that kills it on any
//! other host call, namespaces of its own, a root holding only what it
//! serves, no capability beyond the one documented, no inherited
//! descriptors, and an unprivileged host identity; and cordon works for a
//! user who is not root.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

/// Far more than any of these runs takes: reaching it means a hang.
const HANG: Duration = Duration::from_secs(60);

/// The host identity of a sentry started by root, and the user the
/// unprivileged runs are made as.
const NOBODY: u32 = 65534;

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// `cmd` with the sentry's test bugs armed or not.
fn armed(mut cmd: Command, on: bool) -> Command {
    // The one line, not a backtrace after it, is what is checked.
    cmd.env_remove("RUST_BACKTRACE").env_remove("RUST_LIB_BACKTRACE");
    if on {
        cmd.env("CORDON_TEST_PANIC_SYSCALL", "1");
    } else {
        cmd.env_remove("CORDON_TEST_PANIC_SYSCALL");
    }
    cmd
}

fn spawn(mut cmd: Command) -> Child {
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start")
}

/// Checks a run in which the sentry made a forbidden host call: cordon
/// ends with status 125 and one line saying so, and nothing of the
/// sandbox is left in its process group.
fn assert_killed_by_filter(what: &str, out: &Output, group: i32) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{what}: stderr:\n{stderr}");
    assert_eq!(
        stderr,
        "cordon: internal error: the sentry made a host system call its seccomp filter forbids (killed by SIGSYS)\n",
        "{what}"
    );
    assert!(out.stdout.is_empty(), "{what}: {}", String::from_utf8_lossy(&out.stdout));
    let left = rustix::process::test_kill_process_group(rustix::process::Pid::from_raw(group).expect("pid"));
    assert_eq!(left, Err(rustix::io::Errno::SRCH), "{what}: processes left behind");
}

/// The sentry's own host call outside its allow-list (made on purpose from
/// a second application thread) kills it, and cordon says so; unarmed, the
/// same system call is the unknown one it is natively.
#[test]
fn a_forbidden_host_call_kills_the_sentry() {
    require_kvm!();
    for variant in common::VARIANTS {
        let prog = common::c_program("forbidden_host_call", variant);
        let what = format!("forbidden_host_call-{variant}");
        let mut cmd = armed(Command::new(common::cordon()), true);
        cmd.args(["run", "--"]).arg(&prog).process_group(0);
        let child = spawn(cmd);
        let group = child.id() as i32;
        let out = common::finish_within(child, HANG, &what);
        assert_killed_by_filter(&what, &out, group);

        let native = common::native(prog.to_str().expect("utf-8 path"), &[], None);
        assert_eq!(native.status.code(), Some(0), "{what} natively: {}", String::from_utf8_lossy(&native.stderr));
        let mut cmd = armed(Command::new(common::cordon()), false);
        cmd.args(["run", "--"]).arg(&prog);
        let unarmed = common::finish_within(spawn(cmd), HANG, &what);
        common::assert_same(&format!("{what} unarmed"), &unarmed, &native);
    }
}

/// Run by root, the sentry, while the application runs, is in namespaces
/// of its own, as nobody, with CAP_DAC_READ_SEARCH as its one capability,
/// PR_SET_NO_NEW_PRIVS, the seccomp filter on every thread, a root holding
/// only the served root, the sources of bind mounts, /proc and cordon's
/// executable, and no descriptor but its own: not one its caller left
/// open. The monitor, cordon's own process, is nobody without any
/// capability, with stdio and its pipe to the sentry. The application is
/// still root.
#[test]
fn the_sentry_runs_confined() {
    require_kvm!();
    if !is_root() {
        eprintln!("skipping: the identity a sentry drops to is checked when cordon is run by root");
        return;
    }
    let dir = common::scratch_dir("confined");
    let marker = dir.join("left-open");
    std::fs::write(&marker, "a descriptor the caller leaves open\n").expect("marker");
    let left_open = std::fs::File::open(&marker).expect("open marker");
    let mut cmd = Command::new(common::cordon());
    cmd.args(["run", "--", "/bin/sh", "-c", "echo ready $(id -u) $(id -g); read x; echo done"]);
    let raw = std::os::fd::AsRawFd::as_raw_fd(&left_open);
    // SAFETY: between fork and exec, dup2 is async-signal-safe; it puts
    // the marker's descriptor (close-on-exec in this process) at 7 without
    // close-on-exec, as a careless caller would leave it.
    unsafe {
        cmd.pre_exec(move || if libc::dup2(raw, 7) == 7 { Ok(()) } else { Err(std::io::Error::last_os_error()) });
    }
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start");
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().expect("stdout")));
    let first = lines.next().expect("a line").expect("read");
    assert_eq!(first, "ready 0 0", "the application keeps its caller's ids");

    let monitor = child.id();
    let sentry = common::child_of(monitor).expect("the sentry, cordon's child");
    for ns in ["pid", "net", "ipc", "uts", "mnt"] {
        let theirs = std::fs::read_link(format!("/proc/{sentry}/ns/{ns}")).expect("ns");
        let ours = std::fs::read_link(format!("/proc/self/ns/{ns}")).expect("ns");
        assert_ne!(theirs, ours, "the sentry's {ns} namespace is its own");
    }
    assert_eq!(common::status_field(sentry, "Uid"), "65534\t65534\t65534\t65534");
    assert_eq!(common::status_field(sentry, "Gid"), "65534\t65534\t65534\t65534");
    assert_eq!(common::status_field(sentry, "Groups"), "");
    // CAP_DAC_READ_SEARCH is capability 2.
    let dac_read_search = format!("{:016x}", 1u64 << 2);
    assert_eq!(common::status_field(sentry, "CapEff"), dac_read_search);
    assert_eq!(common::status_field(sentry, "CapPrm"), dac_read_search);
    assert_eq!(common::status_field(sentry, "CapInh"), "0000000000000000");
    assert_eq!(common::status_field(sentry, "CapBnd"), "0000000000000000");
    assert_eq!(common::status_field(sentry, "CapAmb"), "0000000000000000");
    assert_eq!(common::status_field(sentry, "NoNewPrivs"), "1");
    assert_eq!(common::status_field(sentry, "Seccomp"), "2");
    // Every host thread, the application's task threads among them, the
    // same: a thread keeps the identity of the one that made it.
    // (KVM's own workers, such as kvm-nx-lpage-recovery, are kernel
    // threads the host puts in the process's thread group: not cordon's.)
    let threads: Vec<String> = std::fs::read_dir(format!("/proc/{sentry}/task"))
        .expect("the sentry's threads")
        .flatten()
        .filter(|e| !std::fs::read_to_string(e.path().join("comm")).unwrap_or_default().starts_with("kvm-"))
        .map(|e| e.path().join("status").display().to_string())
        .collect();
    assert!(threads.len() > 1, "the sentry runs the application on threads of its own");
    for status in &threads {
        assert_eq!(common::status_file_field(status, "Uid"), "65534\t65534\t65534\t65534", "{status}");
        assert_eq!(common::status_file_field(status, "CapEff"), dac_read_search, "{status}");
        assert_eq!(common::status_file_field(status, "CapPrm"), dac_read_search, "{status}");
        assert_eq!(common::status_file_field(status, "CapBnd"), "0000000000000000", "{status}");
        assert_eq!(common::status_file_field(status, "NoNewPrivs"), "1", "{status}");
        assert_eq!(common::status_file_field(status, "Seccomp"), "2", "{status}");
    }
    let mut root: Vec<String> = std::fs::read_dir(format!("/proc/{sentry}/root"))
        .expect("the sentry's root")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    root.sort();
    // And, at its own path, cordon's executable (for backtraces).
    let exe = common::cordon();
    let exe_top = exe.components().nth(1).expect("an absolute path").as_os_str().to_string_lossy().into_owned();
    let mut expected = vec!["binds".to_string(), "proc".to_string(), "rootfs".to_string(), exe_top];
    expected.sort();
    assert_eq!(
        root, expected,
        "the sentry's root holds the served root, bind sources, /proc and cordon's executable only"
    );

    // Its own descriptors: stdio and the monitor's pipe, KVM's, the memory
    // file, event and signal descriptors, its procfs, and what it opened of
    // the served root.
    let own = |target: &str| {
        ["pipe:", "anon_inode:", "/memfd:", "/rootfs", "/binds/"].iter().any(|p| target.starts_with(p))
            || target == "/1/fd"
    };
    let marker_shown = marker.display().to_string();
    for (fd, target) in common::descriptors(sentry) {
        assert_ne!(target, marker_shown, "the sentry holds the caller's descriptor as {fd}");
        assert!(own(&target), "the sentry's descriptor {fd} leads to {target}");
    }
    // The monitor left behind in the host's namespaces needs no right.
    assert_eq!(common::status_field(monitor, "Uid"), "65534\t65534\t65534\t65534");
    assert_eq!(common::status_field(monitor, "CapEff"), "0000000000000000");
    assert_eq!(common::status_field(monitor, "CapPrm"), "0000000000000000");
    assert_eq!(common::status_field(monitor, "CapBnd"), "0000000000000000");
    assert_eq!(common::status_field(monitor, "NoNewPrivs"), "1");
    let monitor_fds = common::descriptors(monitor);
    assert!(
        monitor_fds.len() == 4 && monitor_fds.iter().all(|(_, t)| t.starts_with("pipe:")),
        "the monitor holds stdio and its pipe to the sentry only: {monitor_fds:?}"
    );

    drop(child.stdin.take());
    let rest: Vec<String> = lines.map(|l| l.expect("read")).collect();
    assert_eq!(rest, ["done"]);
    let out = common::finish_within(child, HANG, "confined sentry");
    assert_eq!(out.status.code(), Some(0), "stderr:\n{}", String::from_utf8_lossy(&out.stderr));
}

/// A KVM device node for `NOBODY` in `dir`, the same device as /dev/kvm:
/// how a user who is not root gets KVM here without changing the host's
/// /dev/kvm (made by root, removed with the directory).
fn kvm_node_for_nobody(dir: &Path) -> PathBuf {
    common::kvm_node_for(dir, NOBODY)
}

/// `program args` as nobody (no supplementary groups), natively or, with
/// `kvm`, in the sandbox.
fn as_nobody(kvm: Option<&Path>, program: &str, args: &[&str]) -> Command {
    let mut cmd = match kvm {
        Some(node) => {
            let mut c = Command::new(common::cordon());
            c.arg("run").arg("--kvm-device").arg(node).arg("--").arg(program);
            c
        }
        None => Command::new(program),
    };
    cmd.args(args).uid(NOBODY).gid(NOBODY).current_dir("/");
    cmd
}

/// A user who is not root, with a KVM device it may open, runs programs
/// in the sandbox as natively, as itself, and its sentry is confined too:
/// the forbidden host call still kills it.
#[test]
fn a_user_who_is_not_root_runs_programs() {
    require_kvm!();
    if !is_root() {
        eprintln!("skipping: making a KVM device node for another user needs root");
        return;
    }
    let dir = common::scratch_dir("unprivileged");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let kvm = kvm_node_for_nobody(&dir);
    for variant in common::VARIANTS {
        let prog = common::c_program("hello", variant);
        let prog = prog.to_str().expect("utf-8 path");
        let what = format!("hello-{variant} as nobody");
        let sandboxed = common::run_with(as_nobody(Some(&kvm), prog, &["3", "x"]), None);
        let native = common::run_with(as_nobody(None, prog, &["3", "x"]), None);
        assert_eq!(native.status.code(), Some(3), "{what} natively");
        assert!(sandboxed.stderr.is_empty(), "{what}: {}", String::from_utf8_lossy(&sandboxed.stderr));
        common::assert_same(&what, &sandboxed, &native);
    }
    let script = "echo $(id -u) $(id -g); cat /etc/hostname >/dev/null && echo read";
    let sandboxed = common::run_with(as_nobody(Some(&kvm), "/bin/sh", &["-c", script]), None);
    let native = common::run_with(as_nobody(None, "/bin/sh", &["-c", script]), None);
    assert_eq!(String::from_utf8_lossy(&native.stdout), "65534 65534\nread\n");
    common::assert_same("ids as nobody", &sandboxed, &native);

    let prog = common::c_program("forbidden_host_call", "static");
    let mut cmd = armed(as_nobody(Some(&kvm), prog.to_str().expect("utf-8 path"), &[]), true);
    cmd.process_group(0);
    let child = spawn(cmd);
    let group = child.id() as i32;
    let out = common::finish_within(child, HANG, "forbidden_host_call as nobody");
    assert_killed_by_filter("forbidden_host_call as nobody", &out, group);
}

/// With RUST_BACKTRACE, a sentry bug's backtrace names the sentry's
/// functions: the sentry, in its own root, still reads cordon's executable
/// for them.
#[test]
fn a_sentry_bug_backtrace_names_functions() {
    require_kvm!();
    let prog = common::c_program("sentry_bug", "static");
    let mut cmd = armed(Command::new(common::cordon()), true);
    cmd.env("RUST_BACKTRACE", "1").args(["run", "--"]).arg(&prog);
    let out = common::finish_within(spawn(cmd), HANG, "sentry_bug with a backtrace");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "stderr:\n{stderr}");
    assert!(stderr.starts_with("cordon: internal error: "), "stderr:\n{stderr}");
    assert!(stderr.contains("sentry::syscalls::test_panic"), "no function names in the backtrace:\n{stderr}");
}

/// A user id no other process uses, so that its count of processes (what
/// RLIMIT_NPROC limits) is this test's alone.
const THREAD_LIMITED_ID: u32 = 54321;

/// A host that refuses the sentry another thread (RLIMIT_NPROC here) makes
/// the application's clone fail with EAGAIN, as Linux's does at its own
/// limits; the sandbox goes on and ends as the program decides.
#[test]
fn a_thread_the_host_refuses_is_eagain() {
    require_kvm!();
    if !is_root() {
        eprintln!("skipping: making a KVM device node for another user needs root");
        return;
    }
    let dir = common::scratch_dir("thread-limit");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let id = THREAD_LIMITED_ID;
    let node = common::kvm_node_for(&dir, id);
    let prog = common::c_program("many_threads", "static");
    let mut cmd = Command::new(common::cordon());
    cmd.arg("run").arg("--kvm-device").arg(&node).arg("--").arg(&prog).arg("200");
    cmd.uid(id).gid(id).current_dir("/");
    // SAFETY: between fork and exec, setrlimit is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit { rlim_cur: 40, rlim_max: 40 };
            if libc::setrlimit(libc::RLIMIT_NPROC, &limit) == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
        });
    }
    let out = common::run_with(cmd, None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "the program reports its failed pthread_create; stderr:\n{stderr}");
    assert!(stderr.contains("Resource temporarily unavailable"), "pthread_create fails with EAGAIN:\n{stderr}");
    assert!(!stderr.contains("internal error"), "no sentry failure:\n{stderr}");
}
