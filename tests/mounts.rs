//! mount, umount2 and pivot_root from inside the sandbox, and the mount
//! table /proc shows. Natively the programs run as root in a private
//! mount namespace (`unshare -m`), so the host's mounts never change.

mod common;

use std::process::Command;

use common::{VARIANTS, assert_same, c_program, finish_within, run_with, sandbox, spawn_cordon_with};

/// Mounting takes CAP_SYS_ADMIN, which a container's root lacks unless
/// given it.
const MOUNTER: [&str; 2] = ["--cap-add", "SYS_ADMIN"];

/// Far more than the program takes: reaching it means a hang.
const HANG: std::time::Duration = std::time::Duration::from_secs(300);

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

#[test]
fn mount_table_changes_from_inside() {
    require_kvm!();
    if !is_root() {
        eprintln!("skipping: mounting needs root, natively and in the sandbox");
        return;
    }
    for v in VARIANTS {
        let prog = c_program("mounts", v);
        let p = prog.to_str().expect("utf-8 path");
        let mut cmd = Command::new("unshare");
        cmd.args(["--mount", "--propagation", "private", p]);
        let n = run_with(cmd, None);
        assert!(
            n.status.success(),
            "mounts-{v} fails natively, so the test itself is wrong:\n{}{}",
            String::from_utf8_lossy(&n.stdout),
            String::from_utf8_lossy(&n.stderr)
        );
        let s = finish_within(spawn_cordon_with(&MOUNTER, &[p]), HANG, &format!("mounts-{v}"));
        assert_same(&format!("mounts-{v}"), &s, &n);
    }
}

#[test]
fn shell_mounts_and_unmounts_a_tmpfs() {
    require_kvm!();
    if !is_root() {
        eprintln!("skipping: mounting needs root");
        return;
    }
    let script = "mkdir -p /tmp/x && mount -t tmpfs -o size=1m tmpfs /tmp/x && df /tmp/x && \
                  grep ' /tmp/x ' /proc/mounts && echo data > /tmp/x/f && umount /tmp/x && \
                  ! grep ' /tmp/x ' /proc/mounts && ! test -e /tmp/x/f && echo unmounted";
    let out = sandbox(&MOUNTER, "/bin/sh", &["-c", script], None);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "status {:?}\n{stdout}{}", out.status, String::from_utf8_lossy(&out.stderr));
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{stdout}");
    let df: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(df, ["tmpfs", "1024", "0", "1024", "0%", "/tmp/x"], "df of an empty 1m tmpfs:\n{stdout}");
    assert_eq!(lines[2], "tmpfs /tmp/x tmpfs rw,relatime,size=1024k 0 0");
    assert_eq!(lines[3], "unmounted");
}

#[test]
fn mqueue_mounted_inside_lists_the_sandboxs_queues() {
    require_kvm!();
    if !is_root() {
        eprintln!("skipping: mounting needs root, natively and in the sandbox");
        return;
    }
    // A queue made with mq_open (through Python's ctypes: no tool makes
    // one) shows as a file of its mode whose contents are its status.
    let script = "mkdir -p /tmp/mq && mount -t mqueue none /tmp/mq && grep ' /tmp/mq ' /proc/mounts && \
                  python3 -c \"import ctypes, os; rt = ctypes.CDLL('librt.so.1'); \
                  print(rt.mq_open(b'/cordon-mq', os.O_CREAT | os.O_RDWR, 0o640, None) >= 0)\" && \
                  ls -l /tmp/mq | cut -d' ' -f1,9 && cat /tmp/mq/cordon-mq && umount /tmp/mq && echo unmounted";
    let mut cmd = Command::new("unshare");
    cmd.args(["--mount", "--ipc", "--propagation", "private", "/bin/sh", "-c", script]);
    let n = run_with(cmd, None);
    assert!(n.status.success(), "fails natively, so the test itself is wrong: {n:?}");
    assert!(String::from_utf8_lossy(&n.stdout).contains("-rw-r----- cordon-mq\nQSIZE:0 "), "{n:?}");
    let s = sandbox(&MOUNTER, "/bin/sh", &["-c", script], None);
    assert_same("mount -t mqueue", &s, &n);
}
