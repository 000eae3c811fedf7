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

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Far longer than any step takes: reaching it means a hang.
const LIMIT: Duration = Duration::from_secs(120);

/// The image every scenario runs.
const IMAGE: &str = "docker.io/library/cordon-busybox:test";

/// The programs a scenario needs, or None (after saying why) if the test
/// should skip; with CORDON_REQUIRE_KVM=1 a missing one is a failure.
fn tools() -> Option<(PathBuf, PathBuf)> {
    let required = std::env::var("CORDON_REQUIRE_KVM").as_deref() == Ok("1");
    let missing = |what: &str| {
        assert!(!required, "{what} (scripts/install-deps), and CORDON_REQUIRE_KVM=1");
        eprintln!("skipping: {what}");
        None
    };
    if !rustix::process::geteuid().is_root() {
        return missing("containerd needs root");
    }
    for tool in ["containerd", "ctr", "containerd-shim-runc-v2", "runc", "script"] {
        if on_path(tool).is_none() {
            return missing(&format!("{tool} is missing"));
        }
    }
    if !Path::new("/bin/busybox").is_file() {
        return missing("/bin/busybox (busybox-static) is missing");
    }
    let Some(go) = on_path("go").or_else(|| Some(PathBuf::from("/usr/local/go/bin/go")).filter(|p| p.is_file())) else {
        return missing("go is missing");
    };
    Some((shim(&go).clone(), image().clone()))
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| std::env::split_paths(&p).map(|d| d.join(name)).find(|p| p.is_file()))
}

fn run(cmd: &mut Command, what: &str) -> Vec<u8> {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(out.status.success(), "{what}: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

/// The shim, built once per test run into the target directory (Go's
/// module and build caches make it quick after the first time).
fn shim(go: &Path) -> &'static PathBuf {
    static SHIM: OnceLock<PathBuf> = OnceLock::new();
    SHIM.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("containerd-shim");
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("containerd-shim-cordon-v2");
        run(
            Command::new(go)
                .args(["build", "-o"])
                .arg(&out)
                .arg(".")
                .env("CGO_ENABLED", "0")
                .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("shim")),
            "go build the shim",
        );
        out
    })
}

/// An OCI image tarball (image layout) of one uncompressed layer: the
/// host's busybox-static with the applets the scenarios use.
fn image() -> &'static PathBuf {
    static IMAGE_TAR: OnceLock<PathBuf> = OnceLock::new();
    IMAGE_TAR.get_or_init(|| {
        let dir = common::scratch_dir("containerd-image");
        let rootfs = dir.join("rootfs");
        for d in ["bin", "etc", "tmp", "proc", "sys", "dev"] {
            std::fs::create_dir_all(rootfs.join(d)).unwrap();
        }
        std::fs::copy("/bin/busybox", rootfs.join("bin/busybox")).unwrap();
        for applet in ["sh", "cat", "echo", "sleep", "id", "ls", "ps", "true"] {
            std::os::unix::fs::symlink("busybox", rootfs.join("bin").join(applet)).unwrap();
        }
        // A C test program that allocates in a child until the memory
        // runs out.
        std::fs::copy(common::c_program("memory_limits", "static"), rootfs.join("bin/memory_limits")).unwrap();
        std::fs::write(rootfs.join("etc/passwd"), "root:x:0:0:root:/:/bin/sh\n").unwrap();
        std::fs::write(rootfs.join("etc/group"), "root:x:0:\n").unwrap();
        let layout = dir.join("layout");
        let blobs = layout.join("blobs/sha256");
        std::fs::create_dir_all(&blobs).unwrap();
        let layer = dir.join("layer.tar");
        run(
            Command::new("tar")
                .args(["--sort=name", "--owner=0", "--group=0", "--numeric-owner", "--mtime=@0", "-C"])
                .arg(&rootfs)
                .arg("-cf")
                .arg(&layer)
                .arg("."),
            "tar the layer",
        );
        // Each blob is stored under its digest; returns (digest, size).
        let blob = |data: Vec<u8>| -> (String, usize) {
            let tmp = dir.join("blob");
            std::fs::write(&tmp, &data).unwrap();
            let sum = String::from_utf8(run(Command::new("sha256sum").arg(&tmp), "sha256sum")).unwrap();
            let digest = sum.split_whitespace().next().unwrap().to_string();
            std::fs::rename(&tmp, blobs.join(&digest)).unwrap();
            (format!("sha256:{digest}"), data.len())
        };
        let (layer_digest, layer_size) = blob(std::fs::read(&layer).unwrap());
        let config = serde_json::json!({
            "architecture": "amd64", "os": "linux",
            "config": {"Env": ["PATH=/bin"], "Cmd": ["/bin/sh"]},
            "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
        });
        let (config_digest, config_size) = blob(serde_json::to_vec(&config).unwrap());
        let manifest = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest, "size": config_size},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layer_digest, "size": layer_size}],
        });
        let (manifest_digest, manifest_size) = blob(serde_json::to_vec(&manifest).unwrap());
        let index = serde_json::json!({
            "schemaVersion": 2,
            "manifests": [{
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": manifest_digest, "size": manifest_size,
                "annotations": {"io.containerd.image.name": IMAGE, "org.opencontainers.image.ref.name": "test"},
            }],
        });
        std::fs::write(layout.join("index.json"), serde_json::to_vec(&index).unwrap()).unwrap();
        std::fs::write(layout.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
        let tarball = dir.join("image.tar");
        run(
            Command::new("tar").arg("-C").arg(&layout).arg("-cf").arg(&tarball).args(["oci-layout", "index.json", "blobs"]),
            "tar the image",
        );
        tarball
    })
}

/// A containerd of the test's own, stopped with everything it started when
/// dropped.
struct Containerd {
    dir: PathBuf,
    daemon: Child,
    namespace: String,
}

impl Containerd {
    fn start(name: &str, shim: &Path, image: &Path) -> Containerd {
        let dir = PathBuf::from(format!("/var/tmp/cordon-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        // containerd finds a runtime's shim on its PATH; the shim finds
        // cordon beside itself.
        std::fs::copy(shim, dir.join("bin/containerd-shim-cordon-v2")).unwrap();
        std::os::unix::fs::symlink(common::cordon(), dir.join("bin/cordon")).unwrap();
        let d = dir.display();
        let config = format!(
            "version = 2\nroot = \"{d}/root\"\nstate = \"{d}/state\"\n\
             [grpc]\n  address = \"{d}/containerd.sock\"\n\
             [ttrpc]\n  address = \"{d}/containerd.sock.ttrpc\"\n\
             [plugins.\"io.containerd.grpc.v1.cri\"]\n  disable = true\n"
        );
        std::fs::write(dir.join("config.toml"), config).unwrap();
        std::fs::write(
            dir.join("cordon.toml"),
            format!(
                "binary_name = \"{d}/bin/cordon\"\nroot = \"{d}/cordon-root\"\nplatform = \"{}\"\n",
                common::platform()
            ),
        )
        .unwrap();
        let path = format!("{d}/bin:{}", std::env::var("PATH").unwrap_or_default());
        let log = std::fs::File::create(dir.join("containerd.log")).unwrap();
        let daemon = Command::new("containerd")
            .arg("--config")
            .arg(dir.join("config.toml"))
            .env("PATH", path)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start containerd");
        let c = Containerd { dir, daemon, namespace: format!("cordon-test-{}", std::process::id()) };
        let deadline = Instant::now() + LIMIT;
        while !c.ctr(&["version"]).output().is_ok_and(|o| o.status.success()) {
            assert!(Instant::now() < deadline, "containerd did not come up: {}", c.log());
            std::thread::sleep(Duration::from_millis(50));
        }
        run(c.ctr(&["images", "import"]).arg(image), "ctr images import");
        c
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("containerd.log")).unwrap_or_default()
    }

    fn ctr(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("ctr");
        cmd.arg("--address").arg(self.dir.join("containerd.sock")).args(["--namespace", &self.namespace]).args(args);
        cmd
    }

    /// The `ctr run` options that pick a runtime.
    fn runtime_args(&self, runtime: Runtime) -> Vec<String> {
        match runtime {
            Runtime::Cordon => vec![
                "--runtime".into(),
                "io.containerd.cordon.v2".into(),
                "--runtime-config-path".into(),
                self.dir.join("cordon.toml").display().to_string(),
            ],
            Runtime::Runc => vec![
                "--runtime".into(),
                "io.containerd.runc.v2".into(),
                "--runc-root".into(),
                self.dir.join("runc-root").display().to_string(),
            ],
        }
    }

    /// `ctr run --rm` of `args` in a container of the image.
    fn run(&self, runtime: Runtime, id: &str, args: &[&str]) -> Command {
        let mut cmd = self.ctr(&["run", "--rm"]);
        cmd.args(self.runtime_args(runtime)).args([IMAGE, id]).args(args);
        cmd
    }

    /// How many processes `ctr task ps` lists for the task.
    fn process_count(&self, id: &str) -> usize {
        let out = self.ctr(&["task", "ps", id]).output().expect("ctr task ps");
        String::from_utf8_lossy(&out.stdout).lines().skip(1).filter(|l| !l.trim().is_empty()).count()
    }

    /// Polls until the task has `n` processes.
    fn wait_processes(&self, id: &str, n: usize) {
        let deadline = Instant::now() + LIMIT;
        while self.process_count(id) != n {
            assert!(Instant::now() < deadline, "{id}: never {n} processes; containerd's log:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        // Tasks first, while containerd can still end them cleanly.
        let tasks = self.ctr(&["task", "ls", "-q"]).output().map(|o| o.stdout).unwrap_or_default();
        for id in String::from_utf8_lossy(&tasks).lines().filter(|l| !l.is_empty()) {
            let _ = self.ctr(&["task", "kill", "-s", "KILL", id]).output();
            let _ = self.ctr(&["task", "delete", "--force", id]).output();
        }
        let containers = self.ctr(&["containers", "ls", "-q"]).output().map(|o| o.stdout).unwrap_or_default();
        for id in String::from_utf8_lossy(&containers).lines().filter(|l| !l.is_empty()) {
            let _ = self.ctr(&["containers", "rm", id]).output();
        }
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
        // Whatever is left that this containerd started (its shims, and the
        // containers' processes, whose command lines name its directory).
        let mine = self.dir.display().to_string();
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmdline).contains(&mine) {
                // SAFETY: kill(2) with a pid read from /proc and a valid signal.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let mut mounts: Vec<&str> =
            mountinfo.lines().filter_map(|l| l.split(' ').nth(4)).filter(|m| m.starts_with(&mine)).collect();
        mounts.reverse();
        for m in mounts {
            let _ = rustix::mount::unmount(m, rustix::mount::UnmountFlags::DETACH);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
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
    let out = finish(spawn(c.run(runtime, &id, &["sh", "-c", script]), Some(b"hello\n")), "ctr run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    (String::from_utf8_lossy(&out.stdout).into_owned(), stderr.contains("to-stderr"), out.status.code())
}

#[test]
fn ctr_run_passes_stdio_and_exit_status() {
    require_kvm!();
    let Some((shim, image)) = tools() else { return };
    let c = Containerd::start("ctr-run", &shim, &image);
    let runc = stdio_and_status(&c, Runtime::Runc);
    let cordon = stdio_and_status(&c, Runtime::Cordon);
    assert_eq!(runc, ("got hello\n0\n".into(), true, Some(7)), "runc, the reference");
    assert_eq!(cordon, runc, "cordon against runc; containerd's log:\n{}", c.log());
    // And it was cordon's kernel that answered, not the host's.
    let version = |runtime: Runtime| {
        let id = format!("version-{runtime:?}").to_lowercase();
        let out = finish(spawn(c.run(runtime, &id, &["cat", "/proc/version"]), None), "ctr run");
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
    let init = spawn(c.run(runtime, &id, &["sleep", "1000"]), None);
    c.wait_processes(&id, 1);

    let out = finish(
        spawn(c.ctr(&["task", "exec", "--exec-id", "e1", &id, "sh", "-c", "cat; echo out; exit 5"]), Some(b"in\n")),
        "ctr task exec",
    );
    seen.push(format!("exec: {:?} {:?}", String::from_utf8_lossy(&out.stdout), out.status.code()));

    for (exec_id, signal) in [("e2", "TERM"), ("e3", "KILL")] {
        let sleeper = spawn(c.ctr(&["task", "exec", "--exec-id", exec_id, &id, "sleep", "1000"]), None);
        c.wait_processes(&id, 2);
        run(&mut c.ctr(&["task", "kill", "--exec-id", exec_id, "-s", signal, &id]), "ctr task kill --exec-id");
        let out = finish(sleeper, "ctr task exec of sleep");
        seen.push(format!("exec killed with {signal}: {:?}", out.status.code()));
        c.wait_processes(&id, 1);
        seen.push(format!("after {signal}: {} process", c.process_count(&id)));
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
    let c = Containerd::start("ctr-exec", &shim, &image);
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
        c.runtime_args(runtime).join(" ")
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
    let c = Containerd::start("ctr-tty", &shim, &image);
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
    cmd.args(c.runtime_args(runtime)).args([IMAGE, id.as_str(), "sh", "-c", script]);
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
    let c = Containerd::start("ctr-oom", &shim, &image);
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
