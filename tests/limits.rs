//! Limits on what a sandbox's programs may take: tasks alive at once
//! (`--pids-limit`) and open files per process (RLIMIT_NOFILE).

mod common;

use std::process::{Child, Output};
use std::time::Duration;

use common::{VARIANTS, c_program, c_test, c_test_with, cordon, spawn_cordon_with};

/// Far more than any of these runs takes: reaching it means a hang.
const HANG: Duration = Duration::from_secs(120);

/// Waits for `child` and collects its output; fails if it runs longer
/// than `HANG`.
fn finish(child: Child, what: &str) -> Output {
    common::finish_within(child, HANG, what)
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

/// Locked memory (mlock and its kin, MAP_LOCKED, mremap and brk growth,
/// SHM_LOCK) counted against RLIMIT_MEMLOCK and refused as Linux refuses
/// it, lifted by CAP_IPC_LOCK; VmLck, smaps and residency as Linux shows
/// them. The program takes CAP_IPC_LOCK from its effective set itself.
#[test]
fn locked_memory() {
    require_kvm!();
    c_test_with("mlock", &["--cap-add", "IPC_LOCK"], &[]);
}
