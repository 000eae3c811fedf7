//! cordon under containerd: the runtime v2 shim (`shim/`, built here with
//! Go) run by a containerd of the test's own, driven with `ctr` as a person
//! would, each scenario run with runc's shim too and the two compared.
//!
//! The containerd is private (its config, root, state and sockets in a
//! directory of the test's under /var/tmp) so it never meets another
//! containerd on the host; its image is a busybox-static root imported from
//! an OCI image tarball the test writes. Everything it started (shims,
//! containers, mounts) is ended when the test ends, failed or not.

mod common;

use common::containerd::{Containerd, LIMIT, busybox_root, image_tar, run};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The image every scenario runs.
const IMAGE: &str = "docker.io/library/cordon-busybox:test";

/// cordon's shim and the image, or None if the test should skip.
fn tools() -> Option<(PathBuf, PathBuf)> {
    let (_go, shim) = common::containerd::tools(&["script"])?;
    Some((shim, image().clone()))
}

/// The image's tarball: the host's busybox-static with the applets the
/// scenarios use, and a C test program that allocates in a child until the
/// memory runs out.
fn image() -> &'static PathBuf {
    static IMAGE_TAR: OnceLock<PathBuf> = OnceLock::new();
    IMAGE_TAR.get_or_init(|| {
        let dir = common::scratch_dir("containerd-image");
        let rootfs = busybox_root(&dir, &["sh", "cat", "echo", "sleep", "id", "ls", "ps", "true"]);
        std::fs::copy(common::c_program("memory_limits", "static"), rootfs.join("bin/memory_limits")).unwrap();
        image_tar(&dir, &rootfs, IMAGE, &[], &["/bin/sh"])
    })
}

/// The test's containerd, with the CRI plugin off, and the image imported
/// into the test's namespace.
fn start(name: &str, shim: &Path, image: &Path) -> Containerd {
    let c = Containerd::start(name, shim, "[plugins.\"io.containerd.grpc.v1.cri\"]\n  disable = true\n", |_| {});
    c.import(&c.namespace, image);
    c
}

/// The `ctr run` options that pick a runtime.
fn runtime_args(c: &Containerd, runtime: Runtime) -> Vec<String> {
    match runtime {
        Runtime::Cordon => vec![
            "--runtime".into(),
            "io.containerd.cordon.v2".into(),
            "--runtime-config-path".into(),
            c.dir.join("cordon.toml").display().to_string(),
        ],
        Runtime::Runc => vec![
            "--runtime".into(),
            "io.containerd.runc.v2".into(),
            "--runc-root".into(),
            c.dir.join("runc-root").display().to_string(),
        ],
    }
}

/// `ctr run --rm` of `args` in a container of the image.
fn ctr_run(c: &Containerd, runtime: Runtime, id: &str, args: &[&str]) -> Command {
    let mut cmd = c.ctr(&["run", "--rm"]);
    cmd.args(runtime_args(c, runtime)).args([IMAGE, id]).args(args);
    cmd
}

/// How many processes `ctr task ps` lists for the task.
fn process_count(c: &Containerd, id: &str) -> usize {
    let out = c.ctr(&["task", "ps", id]).output().expect("ctr task ps");
    String::from_utf8_lossy(&out.stdout).lines().skip(1).filter(|l| !l.trim().is_empty()).count()
}

/// Polls until the task has `n` processes.
fn wait_processes(c: &Containerd, id: &str, n: usize) {
    let deadline = Instant::now() + LIMIT;
    while process_count(c, id) != n {
        assert!(Instant::now() < deadline, "{id}: never {n} processes; containerd's log:\n{}", c.log());
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[derive(Clone, Copy, Debug)]
enum Runtime {
    Cordon,
    Runc,
}

fn finish(child: Child, what: &str) -> Output {
    common::finish_within(child, LIMIT, what)
}

fn spawn(mut cmd: Command, stdin: Option<&[u8]>) -> Child {
    cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn ctr");
    if let Some(data) = stdin {
        let mut w = child.stdin.take().unwrap();
        w.write_all(data).unwrap();
    }
    child
}

/// `ctr run` with stdin, stdout, stderr and the exit status: what it shows.
fn stdio_and_status(c: &Containerd, runtime: Runtime) -> (String, bool, Option<i32>) {
    let id = format!("stdio-{runtime:?}").to_lowercase();
    let script = "read line; echo \"got $line\"; echo to-stderr >&2; id -u; exit 7";
    let out = finish(spawn(ctr_run(c, runtime, &id, &["sh", "-c", script]), Some(b"hello\n")), "ctr run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    (String::from_utf8_lossy(&out.stdout).into_owned(), stderr.contains("to-stderr"), out.status.code())
}

#[test]
fn ctr_run_passes_stdio_and_exit_status() {
    require_kvm!();
    let Some((shim, image)) = tools() else { return };
    let c = start("ctr-run", &shim, &image);
    let runc = stdio_and_status(&c, Runtime::Runc);
    let cordon = stdio_and_status(&c, Runtime::Cordon);
    assert_eq!(runc, ("got hello\n0\n".into(), true, Some(7)), "runc, the reference");
    assert_eq!(cordon, runc, "cordon against runc; containerd's log:\n{}", c.log());
    // And it was cordon's kernel that answered, not the host's.
    let version = |runtime: Runtime| {
        let id = format!("version-{runtime:?}").to_lowercase();
        let out = finish(spawn(ctr_run(&c, runtime, &id, &["cat", "/proc/version"]), None), "ctr run");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(version(Runtime::Cordon).contains("(cordon)"), "{}", version(Runtime::Cordon));
    assert!(!version(Runtime::Runc).contains("(cordon)"));
}

/// A running container's exec'd processes: stdio and status, and signals
/// sent to them by exec id; then the container killed.
fn exec_and_kill(c: &Containerd, runtime: Runtime) -> Vec<String> {
    let id = format!("exec-{runtime:?}").to_lowercase();
    let mut seen = Vec::new();
    let init = spawn(ctr_run(c, runtime, &id, &["sleep", "1000"]), None);
    wait_processes(c, &id, 1);

    let out = finish(
        spawn(c.ctr(&["task", "exec", "--exec-id", "e1", &id, "sh", "-c", "cat; echo out; exit 5"]), Some(b"in\n")),
        "ctr task exec",
    );
    seen.push(format!("exec: {:?} {:?}", String::from_utf8_lossy(&out.stdout), out.status.code()));

    for (exec_id, signal) in [("e2", "TERM"), ("e3", "KILL")] {
        let sleeper = spawn(c.ctr(&["task", "exec", "--exec-id", exec_id, &id, "sleep", "1000"]), None);
        wait_processes(c, &id, 2);
        run(&mut c.ctr(&["task", "kill", "--exec-id", exec_id, "-s", signal, &id]), "ctr task kill --exec-id");
        let out = finish(sleeper, "ctr task exec of sleep");
        seen.push(format!("exec killed with {signal}: {:?}", out.status.code()));
        wait_processes(c, &id, 1);
        seen.push(format!("after {signal}: {} process", process_count(c, &id)));
    }

    run(&mut c.ctr(&["task", "kill", "-s", "KILL", &id]), "ctr task kill");
    let out = finish(init, "ctr run");
    seen.push(format!("container killed: {:?}", out.status.code()));
    seen
}

#[test]
fn ctr_task_exec_and_kill() {
    require_kvm!();
    let Some((shim, image)) = tools() else { return };
    let c = start("ctr-exec", &shim, &image);
    let runc = exec_and_kill(&c, Runtime::Runc);
    let cordon = exec_and_kill(&c, Runtime::Cordon);
    assert_eq!(runc[0], "exec: \"in\\nout\\n\" Some(5)", "runc, the reference");
    assert_eq!(cordon, runc, "cordon against runc; containerd's log:\n{}", c.log());
}

/// `ctr run -t` under `script` (a terminal for ctr): what the program sees
/// of its terminal, and its exit status.
fn terminal(c: &Containerd, runtime: Runtime) -> (String, Option<i32>) {
    let id = format!("tty-{runtime:?}").to_lowercase();
    let ctr = format!("ctr --address {} --namespace {}", c.dir.join("containerd.sock").display(), c.namespace);
    let command = format!(
        "{ctr} run -t --rm {} {IMAGE} {id} sh -c 'tty; test -t 0 && echo stdin-is-a-tty; exit 4'",
        runtime_args(c, runtime).join(" ")
    );
    let mut script = Command::new("script");
    script.args(["-eqc", &command, "/dev/null"]);
    let out = finish(spawn(script, None), "script ctr run -t");
    // The terminal's line endings aside, and a NUL byte that reaches the
    // terminal first (with either runtime), echoed as ^@.
    let text = String::from_utf8_lossy(&out.stdout).replace(['\r', '\0'], "").replacen("^@", "", 1);
    (text, out.status.code())
}

#[test]
fn ctr_run_with_a_terminal() {
    require_kvm!();
    let Some((shim, image)) = tools() else { return };
    let c = start("ctr-tty", &shim, &image);
    let runc = terminal(&c, Runtime::Runc);
    let cordon = terminal(&c, Runtime::Cordon);
    assert_eq!(runc, ("/dev/pts/0\nstdin-is-a-tty\n".into(), Some(4)), "runc, the reference");
    assert_eq!(cordon, runc, "cordon against runc; containerd's log:\n{}", c.log());
}

/// A process of a container with a 64 MiB memory limit that needs more:
/// how it ended, and whether containerd published an OOM event for the
/// container.
fn oom(c: &Containerd, runtime: Runtime) -> (String, bool) {
    let id = format!("oom-{runtime:?}").to_lowercase();
    let mut events = c.ctr(&["events"]);
    events.stdout(Stdio::piped()).stderr(Stdio::null()).stdin(Stdio::null());
    let mut events = events.spawn().expect("ctr events");
    let lines = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let reader = {
        let (lines, out) = (lines.clone(), events.stdout.take().unwrap());
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                lines.lock().unwrap().push_str(&(line + "\n"));
            }
        })
    };
    // A child allocates until the OOM killer kills it; its parent says so
    // (and exits), the container waits.
    let script = "memory_limits oom | head -n 1; sleep 1000";
    let mut cmd = c.ctr(&["run", "--rm", "--memory-limit", "67108864"]);
    cmd.args(runtime_args(c, runtime)).args([IMAGE, id.as_str(), "sh", "-c", script]);
    let mut container = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("ctr run");
    let mut first = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(container.stdout.take().unwrap()), &mut first).unwrap();
    let deadline = Instant::now() + LIMIT;
    let seen = |lines: &str| lines.lines().any(|l| l.contains("/tasks/oom") && l.contains(&id));
    while !seen(&lines.lock().unwrap()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let oom_event = seen(&lines.lock().unwrap());
    run(&mut c.ctr(&["task", "kill", "-s", "KILL", &id]), "ctr task kill");
    finish(container, "ctr run");
    let _ = events.kill();
    let _ = events.wait();
    let _ = reader.join();
    (first, oom_event)
}

#[test]
fn oom_kill_is_an_event() {
    require_kvm!();
    let Some((shim, image)) = tools() else { return };
    let c = start("ctr-oom", &shim, &image);
    let cordon = oom(&c, Runtime::Cordon);
    assert_eq!(
        cordon,
        ("allocating child killed by signal 9\n".into(), true),
        "cordon; containerd's log:\n{}",
        c.log()
    );
    let runc = oom(&c, Runtime::Runc);
    assert_eq!(runc, cordon, "runc, the reference");
}
