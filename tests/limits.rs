//! Limits on what a sandbox's programs may take: tasks alive at once
//! (`--pids-limit`) and open files per process (RLIMIT_NOFILE).

mod common;

use std::io::Read;
use std::process::{Child, Output};
use std::time::{Duration, Instant};

use common::{VARIANTS, c_program, c_test, cordon, spawn_cordon_with};

/// Far more than any of these runs takes: reaching it means a hang.
const HANG: Duration = Duration::from_secs(120);

/// Waits for `child` and collects its output; fails, after killing it, if
/// it runs longer than `HANG`.
fn finish(mut child: Child, what: &str) -> Output {
    let read_all = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut v);
            }
            v
        })
    };
    let out = read_all(child.stdout.take().map(|r| Box::new(r) as Box<dyn Read + Send>));
    let err = read_all(child.stderr.take().map(|r| Box::new(r) as Box<dyn Read + Send>));
    let deadline = Instant::now() + HANG;
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            let err = err.join().unwrap_or_default();
            panic!("{what}: still running after {HANG:?}; stderr:\n{}", String::from_utf8_lossy(&err));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output { status, stdout: out.join().expect("stdout"), stderr: err.join().expect("stderr") }
}

/// A fork bomb far larger than the limit ends with fork, vfork, clone,
/// clone3 and pthread_create failing with EAGAIN inside, while the sandbox
/// goes on: its processes exit, are reaped, and their places are free
/// again. (Natively the same limit needs a pids cgroup, so the program
/// checks Linux's documented outcome itself.)
#[test]
fn a_fork_bomb_meets_the_pids_limit() {
    require_kvm!();
    for v in VARIANTS {
        let prog = c_program("fork_bomb", v);
        let what = format!("fork_bomb-{v}");
        let child =
            spawn_cordon_with(&["--memory", "256M", "--pids-limit", "200"], &[prog.to_str().expect("utf-8 path")]);
        let out = finish(child, &what);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{what}: exit status\nstdout:\n{}stderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "fork failed with EAGAIN\nevery process of the tree exited\nfork works again\n13 checks, 0 failed\n",
            "{what}: stdout\nstderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A bad `--pids-limit` is a one-line usage error, status 2, before
/// anything runs.
#[test]
fn a_bad_pids_limit_is_a_usage_error() {
    for bad in ["0", "-1", "many", "99999999999", ""] {
        let out = std::process::Command::new(cordon())
            .args(["run", "--pids-limit", bad, "--", "true"])
            .output()
            .expect("run cordon");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "--pids-limit {bad:?}: status; stderr:\n{err}");
        assert_eq!(err.lines().count(), 1, "--pids-limit {bad:?}: one line expected:\n{err}");
        assert!(err.contains("--pids-limit"), "--pids-limit {bad:?}: the message names the option:\n{err}");
    }
}

/// RLIMIT_NOFILE as Linux enforces it, for every call that makes a
/// descriptor, and setrlimit/prlimit's own rules; the native run is the
/// reference.
#[test]
fn open_file_limit() {
    require_kvm!();
    c_test("nofile", &[]);
}
