//! docker running its containers with cordon: a private dockerd (its own
//! data and exec roots, socket and containerd) with cordon registered by
//! `cordon install --docker --config`, an image imported offline from a
//! root the test builds (busybox and the host's python3 with what it
//! loads), and the same `docker` commands run with `--runtime=runc`, the
//! reference, and `--runtime=cordon`: output, exit status, `-v`, `logs`,
//! `exec`, `stop` (SIGTERM, then SIGKILL), `--memory` and `--pids-limit`,
//! `-p` reaching a server inside through docker's bridge, and `run -it`
//! and `exec -it` through a pty.
//!
//! Nothing waits for time to pass: each step polls for a condition, with
//! one generous limit to catch a hang. The daemon and everything it
//! started are stopped when the test ends, failing or not.

mod common;

use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::engine::{
    Cli, IMAGE, LIMIT, cleanup_dir, expect, image_tar, kill_processes_naming, private_dir, pty, tools_present,
};

/// A private dockerd with cordon registered, stopped (with every
/// container, shim and containerd of it) when dropped.
struct Docker {
    dir: PathBuf,
    socket: PathBuf,
    daemon: std::process::Child,
    /// The bridge made for it, if the test needs a network.
    bridge: Option<String>,
}

impl Docker {
    /// Starts the daemon; with `bridge`, on a bridge of its own (for
    /// `-p`), else with no network but each container's loopback.
    fn start(name: &str, bridge: Option<(&str, &str)>) -> Docker {
        let dir = private_dir(name);
        let config = dir.join("daemon.json");
        // Another key the install must keep.
        std::fs::write(&config, br#"{"storage-driver": "overlay2"}"#).unwrap();
        let out = Command::new(common::cordon())
            .args(["install", "--docker", "--config"])
            .arg(&config)
            .arg("--")
            .arg(format!("--platform={}", common::platform()))
            .output()
            .unwrap();
        assert!(out.status.success(), "cordon install: {}", String::from_utf8_lossy(&out.stderr));
        let socket = dir.join("docker.sock");
        let mut cmd = Command::new("dockerd");
        cmd.arg("--config-file")
            .arg(&config)
            .arg("--data-root")
            .arg(dir.join("data"))
            .arg("--exec-root")
            .arg(dir.join("exec"))
            .arg("--pidfile")
            .arg(dir.join("dockerd.pid"))
            .arg("-H")
            .arg(format!("unix://{}", socket.display()))
            // The host's firewall is left alone: docker-proxy carries -p.
            .args(["--iptables=false", "--ip-masq=false", "--userland-proxy=true"]);
        let mut made_bridge = None;
        match bridge {
            Some((name, cidr)) => {
                let _ = Command::new("ip").args(["link", "del", name]).output();
                for args in [
                    vec!["link", "add", name, "type", "bridge"],
                    vec!["addr", "add", cidr, "dev", name],
                    vec!["link", "set", name, "up"],
                ] {
                    let out = Command::new("ip").args(&args).output().unwrap();
                    assert!(out.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&out.stderr));
                }
                made_bridge = Some(name.to_string());
                cmd.args(["--bridge", name]);
            }
            None => {
                cmd.args(["--bridge", "none"]);
            }
        }
        let log = std::fs::File::create(dir.join("dockerd.log")).unwrap();
        cmd.stdin(Stdio::null()).stdout(log.try_clone().unwrap()).stderr(log);
        let daemon = cmd.spawn().expect("dockerd");
        let docker = Docker { dir, socket, daemon, bridge: made_bridge };
        let deadline = Instant::now() + LIMIT;
        while !docker.cmd(&["version"]).output().unwrap().status.success() {
            assert!(Instant::now() < deadline, "dockerd did not answer:\n{}", docker.log());
            std::thread::sleep(Duration::from_millis(100));
        }
        let import = docker.ok(&["import", &image_tar().to_string_lossy(), IMAGE]);
        assert!(!import.stdout.is_empty());
        docker
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("dockerd.log")).unwrap_or_default()
    }
}

impl Cli for Docker {
    fn name(&self) -> &str {
        "docker"
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("docker");
        cmd.env("DOCKER_HOST", format!("unix://{}", self.socket.display())).args(args);
        cmd.stdin(Stdio::null());
        cmd
    }
}

impl Drop for Docker {
    fn drop(&mut self) {
        let ids = self.output(&["ps", "-aq"]);
        for id in String::from_utf8_lossy(&ids.stdout).split_whitespace() {
            let _ = self.output(&["rm", "-f", id]);
        }
        // SIGTERM: dockerd stops its containerd and leaves nothing.
        let _ = rustix::process::kill_process(
            rustix::process::Pid::from_raw(self.daemon.id() as i32).unwrap(),
            rustix::process::Signal::TERM,
        );
        let deadline = Instant::now() + LIMIT;
        while self.daemon.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
        // Whatever outlived it (shims are daemons of their own).
        kill_processes_naming(&self.dir);
        if let Some(bridge) = &self.bridge {
            let _ = Command::new("ip").args(["link", "del", bridge]).output();
        }
        cleanup_dir(&self.dir);
    }
}

fn docker_ready() -> bool {
    common::kvm_available()
        && tools_present(&["dockerd", "docker", "containerd", "docker-proxy", "busybox", "ldd", "tar", "ip"])
}

/// Both runtimes' (status, stdout, stderr) of `docker run --rm OPTS IMAGE ARGS`.
fn both(d: &Docker, opts: &[&str], args: &[&str]) -> [(Option<i32>, String, String); 2] {
    ["runc", "cordon"].map(|rt| {
        let runtime = format!("--runtime={rt}");
        let mut all = vec!["run", "--rm", runtime.as_str()];
        all.extend_from_slice(opts);
        all.push(IMAGE);
        all.extend_from_slice(args);
        let out = d.output(&all);
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    })
}

fn assert_both_same(what: &str, d: &Docker, opts: &[&str], args: &[&str]) -> (Option<i32>, String) {
    let [runc, cordon] = both(d, opts, args);
    assert_eq!(cordon, runc, "{what}: cordon (left) differs from runc (right)");
    (runc.0, runc.1)
}

#[test]
fn docker_runs_programs_as_with_runc() {
    if !docker_ready() {
        return;
    }
    let d = Docker::start("docker-run", None);
    let (status, out) = assert_both_same(
        "python",
        &d,
        &["-e", "GREETING=hi"],
        &[
            "python3",
            "-c",
            "import os, sys; print(os.environ['GREETING'], sys.version_info[:2], os.getpid(), os.getuid(), \
             sorted(os.listdir('/')), os.getcwd()); sys.exit(7)",
        ],
    );
    assert_eq!(status, Some(7));
    assert!(out.starts_with("hi (3, "), "{out}");
    // The engine's files: a host name, hosts and resolv.conf bound in.
    assert_both_same("engine files", &d, &["--hostname", "box1"], &["sh", "-c", "hostname; cat /etc/hostname; id"]);
    let (status, _) = assert_both_same("exit status", &d, &[], &["sh", "-c", "echo out; echo err >&2; exit 3"]);
    assert_eq!(status, Some(3));
}

#[test]
fn docker_volumes_logs_exec_and_stop() {
    if !docker_ready() {
        return;
    }
    let d = Docker::start("docker-life", None);
    let vol = d.dir.join("vol");
    std::fs::create_dir_all(&vol).unwrap();
    std::fs::write(vol.join("in"), "from the host\n").unwrap();
    let bind = format!("{}:/vol", vol.display());
    for rt in ["runc", "cordon"] {
        let runtime = format!("--runtime={rt}");
        let out = d.text(&["run", "--rm", &runtime, "-v", &bind, IMAGE, "sh", "-c", "cat /vol/in; echo $0 > /vol/out"]);
        assert_eq!(out, "from the host\n", "{rt}: -v");
        assert_eq!(std::fs::read_to_string(vol.join("out")).unwrap(), "sh\n", "{rt}: a write through -v");
        std::fs::remove_file(vol.join("out")).unwrap();
    }

    // A running container: logs, exec into it, then stop (it ends on
    // SIGTERM with its own status).
    let mut seen = Vec::new();
    for rt in ["runc", "cordon"] {
        let name = format!("life-{rt}");
        let runtime = format!("--runtime={rt}");
        let script = "echo started; trap 'echo stopping; exit 3' TERM; while true; do sleep 1; done";
        d.ok(&["run", "-d", "--name", &name, &runtime, IMAGE, "sh", "-c", script]);
        d.wait_for_log(&name, "started");
        let exec = d.text(&["exec", "-e", "X=y", &name, "sh", "-c", "echo in $X; cat /proc/1/cmdline | tr '\\0' ' '"]);
        let failed = d.output(&["exec", &name, "sh", "-c", "exit 4"]);
        if rt == "cordon" {
            // Refused with the runtime's reason, and the container runs on.
            let paused = d.output(&["pause", &name]);
            assert!(!paused.status.success());
            assert!(String::from_utf8_lossy(&paused.stderr).contains("pause is not supported"), "{paused:?}");
            assert_eq!(d.text(&["inspect", "-f", "{{.State.Status}}", &name]).trim(), "running");
        }
        d.ok(&["stop", "-t", "60", &name]);
        let code = d.text(&["inspect", "-f", "{{.State.ExitCode}}", &name]);
        let logs = d.ok(&["logs", &name]);
        seen.push((exec, failed.status.code(), code, String::from_utf8_lossy(&logs.stdout).into_owned()));
        d.ok(&["rm", &name]);
    }
    assert_eq!(seen[1], seen[0], "cordon (left) and runc (right): exec, exec's status, stop's status, logs");
    assert_eq!(seen[0].2.trim(), "3");

    // One that ignores SIGTERM, and one that does not handle it (as the
    // namespace's init, SIGTERM from outside does not reach it), are
    // killed after the grace period.
    let mut codes = Vec::new();
    let deaf: [&[&str]; 2] = [
        &["sh", "-c", "trap '' TERM; echo deaf; while true; do sleep 1; done"],
        &["python3", "-c", "import time; print('deaf', flush=True); time.sleep(1000)"],
    ];
    for (i, program) in deaf.iter().enumerate() {
        for rt in ["runc", "cordon"] {
            let name = format!("deaf{i}-{rt}");
            let runtime = format!("--runtime={rt}");
            let mut args = vec!["run", "-d", "--name", &name, &runtime, IMAGE];
            args.extend_from_slice(program);
            d.ok(&args);
            d.wait_for_log(&name, "deaf");
            d.ok(&["stop", "-t", "1", &name]);
            codes.push((rt, d.text(&["inspect", "-f", "{{.State.Status}} {{.State.ExitCode}}", &name])));
            d.ok(&["rm", &name]);
        }
    }
    for c in &codes {
        assert_eq!(c.1.trim(), "exited 137", "{codes:?}");
    }
}

#[test]
fn docker_memory_and_pids_limits() {
    if !docker_ready() {
        return;
    }
    let d = Docker::start("docker-limits", None);
    let grab = "b = bytearray(400 << 20); b[::4096] = b'x' * len(b[::4096]); print('kept', len(b))";
    let (status, out) = assert_both_same("over --memory", &d, &["--memory", "128m"], &["python3", "-c", grab]);
    assert_eq!(status, Some(137), "{out}");
    let (status, out) = assert_both_same("under --memory", &d, &["--memory", "512m"], &["python3", "-c", grab]);
    assert_eq!((status, out.as_str()), (Some(0), "kept 419430400\n"));
    // Ten processes at most: python and nine children; the tenth fork
    // fails with EAGAIN.
    let forks = "import os, signal\nn = 0\ntry:\n    for i in range(20):\n        if os.fork() == 0:\n            signal.pause()\n        n += 1\nexcept OSError as e:\n    print('forked', n, e.errno)\n";
    let (status, out) = assert_both_same("--pids-limit", &d, &["--pids-limit", "10"], &["python3", "-c", forks]);
    assert_eq!((status, out.as_str()), (Some(0), "forked 9 11\n"));
}

#[test]
fn docker_publishes_a_port_of_a_server_inside() {
    if !docker_ready() {
        return;
    }
    let d = Docker::start("docker-port", Some(("cordon-dkp0", "172.31.251.1/24")));
    let server = "import socket\ns = socket.socket()\ns.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
                  s.bind(('0.0.0.0', 8080))\ns.listen(8)\nprint('listening', flush=True)\nwhile True:\n    \
                  c, a = s.accept()\n    c.sendall(b'hello from ' + socket.gethostname().encode() + b'\\n')\n    c.close()\n";
    for (rt, port) in [("runc", 18181), ("cordon", 18182)] {
        let name = format!("srv-{rt}");
        let runtime = format!("--runtime={rt}");
        let publish = format!("{port}:8080");
        d.ok(&[
            "run",
            "-d",
            "--name",
            &name,
            "--hostname",
            "srv",
            &runtime,
            "-p",
            &publish,
            IMAGE,
            "python3",
            "-c",
            server,
        ]);
        d.wait_for_log(&name, "listening");
        let ip = d.text(&["inspect", "-f", "{{.NetworkSettings.IPAddress}}", &name]);
        let ip = ip.trim();
        assert!(ip.starts_with("172.31.251."), "{rt}: address {ip:?}");
        for addr in [format!("127.0.0.1:{port}"), format!("{ip}:8080")] {
            let mut c = std::net::TcpStream::connect(&addr).unwrap_or_else(|e| panic!("{rt}: {addr}: {e}"));
            c.set_read_timeout(Some(LIMIT)).unwrap();
            let mut got = String::new();
            std::io::Read::read_to_string(&mut c, &mut got).unwrap();
            assert_eq!(got, "hello from srv\n", "{rt}: {addr}");
        }
        d.ok(&["rm", "-f", &name]);
    }
}

#[test]
fn docker_interactive_shell_on_a_pty() {
    if !docker_ready() {
        return;
    }
    let d = Docker::start("docker-tty", None);
    let mut statuses = Vec::new();
    for rt in ["runc", "cordon"] {
        let runtime = format!("--runtime={rt}");
        statuses.push(shell_on_pty(&d, &["run", "--rm", "-it", &runtime, IMAGE, "sh"], &format!("{rt}: run -it")));
        // And into a running container.
        let name = format!("tty-{rt}");
        d.ok(&["run", "-d", "--name", &name, &runtime, IMAGE, "sleep", "1000"]);
        statuses.push(shell_on_pty(&d, &["exec", "-it", &name, "sh"], &format!("{rt}: exec -it")));
        d.ok(&["rm", "-f", &name]);
    }
    assert_eq!(statuses, [Some(5); 4], "runc's run and exec, then cordon's: the shell's exit status");
}

/// Runs `docker ARGS` (a shell with a terminal) on a fresh pty as its
/// controlling terminal, has it compute something and exit 5; returns
/// the exit status of `docker`.
fn shell_on_pty(d: &Docker, args: &[&str], what: &str) -> Option<i32> {
    let mut cmd = d.cmd(args);
    let (master, slave) = pty();
    common::on_controlling_terminal(&mut cmd, slave);
    let mut child = cmd.spawn().expect("docker with a terminal");
    drop(cmd);
    let mut master = std::fs::File::from(master);
    let mut seen = Vec::new();
    expect(&mut master, &mut seen, "# ", what);
    // The product is computed so the echo of the typed line never
    // matches: only the shell's answer does, with one line end as a
    // terminal makes it (one pty's, not two in a row).
    master.write_all(b"echo $((6*7))-$(tty)\n").unwrap();
    expect(&mut master, &mut seen, "42-/dev/pts/0\r\n/ # ", what);
    master.write_all(b"exit 5\n").unwrap();
    let deadline = Instant::now() + LIMIT;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "{what}: docker did not end");
        let mut buf = [0u8; 4096];
        let mut pfd = libc::pollfd { fd: master.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: polls one descriptor we own.
        if unsafe { libc::poll(&mut pfd, 1, 100) } > 0 {
            let _ = std::io::Read::read(&mut master, &mut buf);
        }
    };
    status.code()
}

#[test]
fn install_merges_into_daemon_json() {
    let dir = common::scratch_dir("install-docker");
    let config = dir.join("etc/docker/daemon.json");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(&config, br#"{"debug": true, "runtimes": {"other": {"path": "/bin/other"}}}"#).unwrap();
    let install = |extra: &[&str]| {
        let out = Command::new(common::cordon())
            .args(["install", "--docker", "--config"])
            .arg(&config)
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success(), "cordon install {extra:?}: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<serde_json::Value>(&std::fs::read(&config).unwrap()).unwrap()
    };
    let me = std::fs::canonicalize(common::cordon()).unwrap().to_string_lossy().into_owned();
    let v = install(&["--", "--platform=trap"]);
    assert_eq!(
        v,
        serde_json::json!({"debug": true, "runtimes": {
            "other": {"path": "/bin/other"},
            "cordon": {"path": me, "runtimeArgs": ["--platform=trap"]},
        }})
    );
    // Again, under another name, without arguments: both kept.
    let v = install(&["--runtime", "cordon-kvm"]);
    assert_eq!(v["runtimes"]["cordon-kvm"], serde_json::json!({"path": me}));
    assert_eq!(v["runtimes"]["cordon"]["runtimeArgs"], serde_json::json!(["--platform=trap"]));
    assert_eq!(v["debug"], serde_json::json!(true));
    // A file that is not docker's JSON is left alone, with an error.
    std::fs::write(&config, b"not json").unwrap();
    let out = Command::new(common::cordon()).args(["install", "--docker", "--config"]).arg(&config).output().unwrap();
    assert!(!out.status.success());
    assert_eq!(std::fs::read(&config).unwrap(), b"not json");
    let _ = std::fs::remove_dir_all(&dir);
}
