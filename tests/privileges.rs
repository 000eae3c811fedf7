//! Privilege checks inside the sandbox ask the sandboxed process's own
//! credentials and capabilities, never the host's: a program that drops
//! from root to nobody loses root's powers there as it does natively.

mod common;

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::PathBuf;

use common::{c_test_with, scratch_dir};

/// secret (0600), plain (0644), link -> plain, locked/ (0700) holding
/// inner (0644) and link -> ../plain; all root's.
fn fixture() -> PathBuf {
    let d = scratch_dir("privs");
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
    let file = |name: &str, mode: u32| {
        std::fs::write(d.join(name), name).unwrap();
        std::fs::set_permissions(d.join(name), std::fs::Permissions::from_mode(mode)).unwrap();
    };
    file("secret", 0o600);
    file("plain", 0o644);
    symlink("plain", d.join("link")).unwrap();
    std::fs::create_dir(d.join("locked")).unwrap();
    file("locked/inner", 0o644);
    symlink("../plain", d.join("locked/link")).unwrap();
    std::fs::set_permissions(d.join("locked"), std::fs::Permissions::from_mode(0o700)).unwrap();
    d.canonicalize().unwrap()
}

/// The names of the capabilities this process holds in effect
/// (/proc/self/status CapEff).
fn host_capabilities() -> Vec<String> {
    const NAMES: [&str; 41] = [
        "CHOWN",
        "DAC_OVERRIDE",
        "DAC_READ_SEARCH",
        "FOWNER",
        "FSETID",
        "KILL",
        "SETGID",
        "SETUID",
        "SETPCAP",
        "LINUX_IMMUTABLE",
        "NET_BIND_SERVICE",
        "NET_BROADCAST",
        "NET_ADMIN",
        "NET_RAW",
        "IPC_LOCK",
        "IPC_OWNER",
        "SYS_MODULE",
        "SYS_RAWIO",
        "SYS_CHROOT",
        "SYS_PTRACE",
        "SYS_PACCT",
        "SYS_ADMIN",
        "SYS_BOOT",
        "SYS_NICE",
        "SYS_RESOURCE",
        "SYS_TIME",
        "SYS_TTY_CONFIG",
        "MKNOD",
        "LEASE",
        "AUDIT_WRITE",
        "AUDIT_CONTROL",
        "SETFCAP",
        "MAC_OVERRIDE",
        "MAC_ADMIN",
        "SYSLOG",
        "WAKE_ALARM",
        "BLOCK_SUSPEND",
        "AUDIT_READ",
        "PERFMON",
        "BPF",
        "CHECKPOINT_RESTORE",
    ];
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:")).expect("CapEff").trim();
    let set = u64::from_str_radix(hex, 16).unwrap();
    NAMES.iter().enumerate().filter(|(c, _)| set >> c & 1 != 0).map(|(_, n)| n.to_string()).collect()
}

#[test]
fn dropping_root_drops_its_powers() {
    require_kvm!();
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipping: the program drops from root, so the test runs as root");
        return;
    }
    let d = fixture();
    // The sandbox's root is given what root holds natively.
    let caps = host_capabilities();
    let mut opts = vec!["--cap-drop", "ALL"];
    for c in &caps {
        opts.extend(["--cap-add", c.as_str()]);
    }
    c_test_with("privs", &opts, &[d.to_str().unwrap()]);
}

#[test]
fn root_names_its_own_host() {
    require_kvm!();
    // Only inside the sandbox: natively it would rename the host.
    let code = "import os, socket; socket.sethostname('renamed-inside'); print(os.uname().nodename)";
    let out =
        common::sandbox(&["--hostname", "before", "--cap-add", "SYS_ADMIN"], "/usr/bin/python3", &["-c", code], None);
    let expected = if rustix::process::geteuid().is_root() { "renamed-inside\n" } else { "" };
    assert_eq!(String::from_utf8_lossy(&out.stdout), expected, "{}", String::from_utf8_lossy(&out.stderr));
}
