//! podman running its containers with cordon (`--runtime PATH`), rootful,
//! with a private store (`--root`, `--runroot`, `--tmpdir`) and the
//! cgroupfs manager, compared with the same commands run with runc: the
//! image imported offline as for the docker tests, output and status,
//! `-v`, `logs`, `exec`, `stop`, `--memory`, `--pids-limit`, and `-p`
//! reaching a server inside through podman's network.
//!
//! Every container gets the same small `nofile` and `nproc` limits:
//! podman otherwise asks for the host's maximum, which runc cannot set
//! where the runtime lacks CAP_SYS_RESOURCE.

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};

use common::engine::{Cli, IMAGE, LIMIT, cleanup_dir, image_tar, kill_processes_naming, private_dir, tools_present};

/// A private podman store, emptied (containers, conmon, mounts) when
/// dropped.
struct Podman {
    dir: PathBuf,
}

impl Podman {
    fn new(name: &str) -> Podman {
        let p = Podman { dir: private_dir(name) };
        p.ok(&["import", &image_tar().to_string_lossy(), IMAGE]);
        p
    }
}

impl Cli for Podman {
    fn name(&self) -> &str {
        "podman"
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("podman");
        cmd.arg("--root")
            .arg(self.dir.join("root"))
            .arg("--runroot")
            .arg(self.dir.join("run"))
            .arg("--tmpdir")
            .arg(self.dir.join("tmp"))
            .args(["--cgroup-manager", "cgroupfs", "--events-backend", "file"])
            .args(args)
            .stdin(Stdio::null())
            // conmon leaves files (an `oom` mark) in the directory it
            // inherits.
            .current_dir(&self.dir);
        cmd
    }
}

impl Drop for Podman {
    fn drop(&mut self) {
        let _ = self.output(&["rm", "-a", "-f", "-t", "0"]);
        kill_processes_naming(&self.dir);
        cleanup_dir(&self.dir);
    }
}

/// The two runtimes: runc's name, and cordon's path with the test's
/// platform (podman passes `--runtime-flag`s on to it).
fn runtimes() -> [(&'static str, Vec<String>); 2] {
    let cordon = common::cordon().to_string_lossy().into_owned();
    [
        ("runc", vec!["--runtime".into(), "runc".into()]),
        (
            "cordon",
            vec!["--runtime".into(), cordon, "--runtime-flag".into(), format!("platform={}", common::platform())],
        ),
    ]
}

fn podman_ready() -> bool {
    common::kvm_available() && tools_present(&["podman", "conmon", "busybox", "ldd", "tar"])
}

/// `podman [runtime] run --rm LIMITS OPTS IMAGE ARGS` with each runtime; the
/// two must give the same status, stdout and stderr.
fn assert_both_same(p: &Podman, what: &str, opts: &[&str], args: &[&str]) -> (Option<i32>, String) {
    let outs = runtimes().map(|(_, flags)| {
        let mut all: Vec<&str> = flags.iter().map(String::as_str).collect();
        all.extend(["run", "--rm", "--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096"]);
        all.extend_from_slice(opts);
        all.push(IMAGE);
        all.extend_from_slice(args);
        let out = p.output(&all);
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    });
    assert_eq!(outs[1], outs[0], "{what}: cordon (left) differs from runc (right)");
    (outs[0].0, outs[0].1.clone())
}

#[test]
fn podman_runs_programs_as_with_runc() {
    if !podman_ready() {
        return;
    }
    let p = Podman::new("podman-run");
    let (status, out) = assert_both_same(
        &p,
        "python",
        &["-e", "GREETING=hi"],
        &["python3", "-c", "import os, sys; print(os.environ['GREETING'], os.getpid(), os.getuid()); sys.exit(7)"],
    );
    assert_eq!((status, out.as_str()), (Some(7), "hi 1 0\n"));
    let vol = p.dir.join("vol");
    std::fs::create_dir_all(&vol).unwrap();
    std::fs::write(vol.join("in"), "from the host\n").unwrap();
    let bind = format!("{}:/vol", vol.display());
    let (_, out) = assert_both_same(&p, "-v", &["-v", &bind], &["sh", "-c", "cat /vol/in; echo $0 >> /vol/out"]);
    assert_eq!(out, "from the host\n");
    assert_eq!(std::fs::read_to_string(vol.join("out")).unwrap(), "sh\nsh\n");
    let grab = "b = bytearray(400 << 20); b[::4096] = b'x' * len(b[::4096]); print('kept', len(b))";
    let (status, _) = assert_both_same(&p, "over --memory", &["--memory", "128m"], &["python3", "-c", grab]);
    assert_eq!(status, Some(137));
    let forks = "import os, signal\nn = 0\ntry:\n    for i in range(20):\n        if os.fork() == 0:\n            signal.pause()\n        n += 1\nexcept OSError as e:\n    print('forked', n, e.errno)\n";
    let (_, out) = assert_both_same(&p, "--pids-limit", &["--pids-limit", "10"], &["python3", "-c", forks]);
    assert_eq!(out, "forked 9 11\n");
}

#[test]
fn podman_exec_logs_stop_and_ports() {
    if !podman_ready() {
        return;
    }
    let p = Podman::new("podman-life");
    let server = "import socket, signal\nsignal.signal(signal.SIGTERM, lambda *a: exit(3))\n\
                  s = socket.socket()\ns.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
                  s.bind(('0.0.0.0', 8080))\ns.listen(8)\nprint('listening', flush=True)\nwhile True:\n    \
                  c, a = s.accept()\n    c.sendall(b'hello from ' + socket.gethostname().encode() + b'\\n')\n    c.close()\n";
    let mut seen = Vec::new();
    for ((rt, flags), port) in runtimes().into_iter().zip([18281, 18282]) {
        let name = format!("srv-{rt}");
        let publish = format!("{port}:8080");
        let mut args: Vec<&str> = flags.iter().map(String::as_str).collect();
        args.extend(["run", "-d", "--name", &name, "--hostname", "srv", "-p", &publish]);
        args.extend(["--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096", IMAGE, "python3", "-c", server]);
        p.ok(&args);
        p.wait_for_log(&name, "listening");
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap_or_else(|e| panic!("{rt}: {port}: {e}"));
        c.set_read_timeout(Some(LIMIT)).unwrap();
        let mut got = String::new();
        std::io::Read::read_to_string(&mut c, &mut got).unwrap();
        assert_eq!(got, "hello from srv\n", "{rt}: -p");
        let exec = p.text(&["exec", &name, "sh", "-c", "echo in; hostname"]);
        let failed = p.output(&["exec", &name, "sh", "-c", "exit 4"]);
        p.ok(&["stop", "-t", "60", &name]);
        let code = p.text(&["inspect", "-f", "{{.State.ExitCode}}", &name]);
        let logs = String::from_utf8(p.ok(&["logs", &name]).stdout).unwrap();
        seen.push((exec, failed.status.code(), code, logs));
        p.ok(&["rm", &name]);
    }
    assert_eq!(seen[1], seen[0], "cordon (left) and runc (right): exec, its status, stop's status, logs");
    assert_eq!(seen[0].2.trim(), "3");
}
