//! The system call families a single-threaded program uses, one C program
//! each (tests/c), run natively and in the sandbox: both must pass and print
//! the same, so every expectation is Linux's own.

mod common;

use std::os::unix::fs::{PermissionsExt, symlink};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{c_program, c_test, c_test_sandbox_only, cordon, scratch_dir};

/// The fixture the C programs read:
///   data      10000 bytes, byte i = i % 251, mode 0644
///   empty     an empty file
///   link      -> data
///   dangling  -> nowhere
///   loop      -> loop
///   dir/      holding a, b, c
///   dirlink   -> dir
///   chain0 -> chain1 -> ... -> chain40 -> data
fn fixture(name: &str) -> PathBuf {
    let d = scratch_dir(name);
    let data: Vec<u8> = (0..10000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(d.join("data"), data).unwrap();
    std::fs::set_permissions(d.join("data"), std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(d.join("empty"), b"").unwrap();
    symlink("data", d.join("link")).unwrap();
    symlink("nowhere", d.join("dangling")).unwrap();
    symlink("loop", d.join("loop")).unwrap();
    std::fs::create_dir(d.join("dir")).unwrap();
    std::fs::set_permissions(d.join("dir"), std::fs::Permissions::from_mode(0o755)).unwrap();
    for f in ["a", "b", "c"] {
        std::fs::write(d.join("dir").join(f), f).unwrap();
    }
    symlink("dir", d.join("dirlink")).unwrap();
    for i in 0..41 {
        let next = if i == 40 { "data".to_string() } else { format!("chain{}", i + 1) };
        symlink(next, d.join(format!("chain{i}"))).unwrap();
    }
    d.canonicalize().unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

#[test]
fn files() {
    require_kvm!();
    let d = fixture("files");
    c_test("files", &[s(&d), "/etc"]);
}

#[test]
fn fd_table_and_close_on_exec() {
    require_kvm!();
    c_test("fdtable", &[]);
}

#[test]
fn memory() {
    require_kvm!();
    let d = fixture("memory");
    c_test("memory", &[s(&d)]);
}

/// The addresses the trap platform keeps for its stub are no application's
/// on any platform, so a program behaves the same whichever runs it.
#[test]
fn the_platform_reserved_range_is_never_mapped() {
    require_kvm!();
    let r = platform::trap::reserved_range();
    c_test_sandbox_only("reserved_range", &[], &[&format!("{:x}", r.start), &format!("{:x}", r.end)]);
}

#[test]
fn zero_page_is_never_written() {
    require_kvm!();
    c_test("zero_page", &[]);
}

#[test]
fn errno_cases() {
    require_kvm!();
    let d = fixture("errnos");
    c_test("errnos", &[s(&d)]);
}

#[test]
fn descriptor_edge_cases() {
    require_kvm!();
    c_test("fd_edges", &[]);
}

#[test]
fn process_time_and_system_info() {
    require_kvm!();
    c_test("sysinfo", &[]);
}

#[test]
fn read_only_root() {
    require_kvm!();
    let d = fixture("rofs");
    c_test_sandbox_only("rofs", &["--read-only"], &[s(&d)]);
}

/// Peak resident memory, in KiB, of `cordon run` with `args`, as wait4
/// reports it for that child alone; with its exit status. (The child is
/// reaped by wait4 itself, which std's Child does not know.)
#[allow(clippy::zombie_processes)]
fn sandbox_maxrss(args: &[&str]) -> (i64, i32, String) {
    let child = Command::new(cordon())
        .arg("run")
        .arg("--")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn cordon");
    let pid = child.id() as libc::pid_t;
    let mut stderr = child.stderr.expect("stderr");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
        s
    });
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to overwrite.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our own unwaited child; status and ru are valid
    // exclusive pointers for the call.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    assert_eq!(r, pid, "wait4: {}", std::io::Error::last_os_error());
    let code = std::process::ExitStatus::from_raw(status).code().unwrap_or(-1);
    (ru.ru_maxrss, code, reader.join().unwrap_or_default())
}

#[test]
fn sparse_gigabyte_costs_little_host_memory() {
    require_kvm!();
    let d = fixture("sparse");
    let prog = c_program("memory", "static");
    let (maxrss_kib, code, err) = sandbox_maxrss(&[s(&prog), s(&d)]);
    assert_eq!(code, 0, "memory test failed in the sandbox:\n{err}");
    assert!(
        maxrss_kib < 200 * 1024,
        "cordon's peak RSS was {} MiB running a program that touches a few pages of a 1 GiB mapping",
        maxrss_kib / 1024
    );
}

/// /sys is the sandbox's own: the CPU lists the C library counts
/// processors by, and nothing of the host's sysfs, not even by stat or
/// readlink.
#[test]
fn sys_is_the_sandboxes_own() {
    require_kvm!();
    let run = |script: &str| {
        let out = common::sandbox(&[], "/bin/sh", &["-c", script], None);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let cpus: usize = run("getconf _NPROCESSORS_ONLN").trim().parse().expect("a CPU count");
    let list = if cpus == 1 { "0".to_string() } else { format!("0-{}", cpus - 1) };
    for f in ["online", "possible", "present"] {
        assert_eq!(run(&format!("cat /sys/devices/system/cpu/{f}")), format!("{list}\n"), "{f}");
    }
    assert_eq!(run("getconf _NPROCESSORS_CONF").trim(), cpus.to_string());
    assert!(Path::new("/sys/kernel").exists() && Path::new("/sys/dev/char").exists(), "the host has a sysfs");
    assert!(Path::new("/sys/class/tty").exists(), "the host has a sysfs");
    let reached = run("for p in /sys/kernel /sys/class/tty /sys/dev/char; do \
         stat $p >/dev/null 2>&1 && echo stat $p; ls $p >/dev/null 2>&1 && echo list $p; done; \
         readlink /sys/dev/char/1:3 && echo readlink");
    assert_eq!(reached, "", "host sysfs reached");
    // Its classes are its own: the network interfaces alone.
    assert_eq!(run("ls /sys/class"), "net\n");
    // The cgroup directory is the sandbox's own: it holds the sandbox's
    // processes (the shell, 1, and cat, 2) and nothing of the host's.
    assert_eq!(run("cat /sys/fs/cgroup/cgroup.procs"), "1\n2\n");
}

/// Files of the host root carry device and inode numbers of the sandbox's
/// own, in stat and in /proc/PID/maps alike, never the host's.
#[test]
fn maps_show_the_sandboxes_numbers() {
    use std::os::unix::fs::MetadataExt;
    require_kvm!();
    // The maps of a cat, then stat of each file it maps, in one sandbox.
    let script = "m=$(cat /proc/self/maps); echo \"$m\"; echo END; \
                  echo \"$m\" | awk '$6 ~ /^\\// {print $6}' | sort -u | xargs stat -c '%n %Hd %Ld %i'";
    let out = common::sandbox(&[], "/bin/sh", &["-c", script], None);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (maps, stats) = text.split_once("END\n").expect("maps, then stats");
    let stat_of = |path: &str| {
        let line = stats.lines().find(|l| l.split(' ').next() == Some(path)).expect("stat of a mapped file");
        let n: Vec<u64> = line.split(' ').skip(1).map(|x| x.parse().unwrap()).collect();
        (format!("{:02x}:{:02x}", n[0], n[1]), n[2].to_string())
    };
    let mut files = 0;
    for line in maps.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let Some(path) = f.get(5).filter(|p| p.starts_with('/')) else { continue };
        let (dev, ino) = (f[3].to_string(), f[4].to_string());
        let host = std::fs::metadata(path).unwrap();
        let host_dev = format!("{:02x}:{:02x}", libc::major(host.dev()), libc::minor(host.dev()));
        assert!(dev != host_dev || ino != host.ino().to_string(), "host numbers shown: {line}");
        assert_eq!((dev, ino), stat_of(path), "maps and stat agree: {line}");
        files += 1;
    }
    assert!(files >= 2, "file mappings in:\n{maps}");
}

#[test]
fn proc_sys_and_dev_files() {
    require_kvm!();
    c_test("procfs", &[]);
}

#[test]
fn pseudo_terminals() {
    require_kvm!();
    c_test("pty", &[]);
}
