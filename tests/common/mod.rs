//! Shared helpers of the end-to-end tests: running programs natively and in
//! the sandbox, and finding the C test programs.

#![allow(dead_code)]

pub mod containerd;
pub mod engine;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The cordon binary under test.
pub fn cordon() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_cordon"))
}

/// The platform cordon runs the tests on: `CORDON_PLATFORM` (which cordon
/// itself reads as its default), else kvm.
pub fn platform() -> String {
    std::env::var("CORDON_PLATFORM").unwrap_or_else(|_| "kvm".into())
}

/// A C test program built by build.rs; `variant` is "static",
/// "static-pie" or "dynamic".
pub fn c_program(name: &str, variant: &str) -> PathBuf {
    let p = Path::new(test_programs::DIR).join(format!("{name}-{variant}"));
    assert!(p.exists(), "test program {} was not built", p.display());
    p
}

/// The variants every C program is built in.
pub const VARIANTS: [&str; 3] = ["static", "static-pie", "dynamic"];

/// True if KVM can be used. Without it, prints why and returns false so the
/// test can skip, unless CORDON_REQUIRE_KVM=1 makes that a failure.
pub fn kvm_available() -> bool {
    if platform() == "trap" {
        // Stub processes need no KVM.
        return true;
    }
    let why = match std::fs::OpenOptions::new().read(true).write(true).open("/dev/kvm") {
        Ok(_) => return true,
        Err(e) => format!("/dev/kvm: {e}"),
    };
    if std::env::var("CORDON_REQUIRE_KVM").as_deref() == Ok("1") {
        panic!("KVM is required (CORDON_REQUIRE_KVM=1) but unusable: {why}");
    }
    eprintln!("skipping: KVM unavailable ({why})");
    false
}

/// Skips the calling test when KVM is unavailable.
#[macro_export]
macro_rules! require_kvm {
    () => {
        if !common::kvm_available() {
            return;
        }
    };
}

/// Runs a command with `stdin` as input and returns its output.
pub fn run_with(mut cmd: Command, stdin: Option<&[u8]>) -> Output {
    cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    if let Some(data) = stdin {
        let mut w = child.stdin.take().expect("stdin");
        let data = data.to_vec();
        std::thread::spawn(move || {
            let _ = w.write_all(&data);
        });
    }
    child.wait_with_output().expect("wait")
}

/// `cordon run [opts] -- program args...`.
pub fn sandbox(opts: &[&str], program: &str, args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut cmd = Command::new(cordon());
    cmd.arg("run").args(opts).arg("--").arg(program).args(args);
    run_with(cmd, stdin)
}

/// The same program run natively.
pub fn native(program: &str, args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut cmd = Command::new(program);
    cmd.args(args);
    run_with(cmd, stdin)
}

/// Asserts that sandboxed and native runs agree on stdout and exit status.
pub fn assert_same(what: &str, sandboxed: &Output, native: &Output) {
    compare(what, sandboxed, native.status.code(), native);
}

/// An exit status as a shell reports it: the code, or 128 + the signal
/// that killed the process (what cordon itself exits with then).
pub fn shell_status(out: &Output) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    out.status.code().or_else(|| out.status.signal().map(|s| 128 + s))
}

/// Like [`assert_same`], for programs that may die of a signal: the
/// native death by signal N must be the sandbox's exit status 128 + N.
pub fn assert_same_shell_status(what: &str, sandboxed: &Output, native: &Output) {
    compare(what, sandboxed, shell_status(native), native);
}

fn compare(what: &str, sandboxed: &Output, expected_code: Option<i32>, native: &Output) {
    assert_eq!(
        sandboxed.status.code(),
        expected_code,
        "{what}: exit status differs\nsandbox stderr:\n{}",
        String::from_utf8_lossy(&sandboxed.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&sandboxed.stdout),
        String::from_utf8_lossy(&native.stdout),
        "{what}: stdout differs\nsandbox stderr:\n{}",
        String::from_utf8_lossy(&sandboxed.stderr)
    );
}

/// Starts `cordon run -- args...` with stdout and stderr piped, for tests
/// that watch or signal it while it runs.
pub fn spawn_cordon(args: &[&str]) -> std::process::Child {
    spawn_cordon_with(&[], args)
}

/// `cordon run OPTIONS -- ARGS` with piped output, not waited for.
pub fn spawn_cordon_with(options: &[&str], args: &[&str]) -> std::process::Child {
    Command::new(cordon())
        .arg("run")
        .args(options)
        .arg("--")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn cordon")
}

/// Runs a C test program natively and in the sandbox in each variant; both
/// must pass (exit 0) with the same output.
pub fn c_test(name: &str, args: &[&str]) {
    c_test_with(name, &[], args);
}

/// [`c_test`] with `cordon run` options (such as `--cap-add ALL`, for a
/// program that compares with what root may do natively).
pub fn c_test_with(name: &str, opts: &[&str], args: &[&str]) {
    for v in VARIANTS {
        let prog = c_program(name, v);
        let p = prog.to_str().expect("utf-8 path");
        let n = native(p, args, None);
        assert!(
            n.status.success(),
            "{name}-{v} fails natively, so the test itself is wrong:\n{}{}",
            String::from_utf8_lossy(&n.stdout),
            String::from_utf8_lossy(&n.stderr)
        );
        let s = finish_within(spawn_cordon_with(opts, &[&[p], args].concat()), C_TEST_HANG, &format!("{name}-{v}"));
        assert_same(&format!("{name}-{v}"), &s, &n);
    }
}

/// Runs a C program of the writable file system tests (tests/c/work_dir.h)
/// natively and in the sandbox in each variant, each run making a fresh work
/// directory of its own: natively under the host's temporary directory, in
/// the sandbox under its /tmp, which is a tmpfs. Both must pass and print the
/// same.
pub fn c_test_in_work_dir(name: &str) {
    let native_tmp = std::env::temp_dir();
    let native_on_tmpfs = {
        let dir = std::ffi::CString::new(native_tmp.to_str().expect("utf-8 path")).expect("path without NUL");
        // SAFETY: an all-zero statfs is a valid value for statfs to overwrite.
        let mut sfs: libc::statfs = unsafe { std::mem::zeroed() };
        // SAFETY: `dir` is a NUL-terminated path and `sfs` a valid exclusive
        // pointer for the call.
        let r = unsafe { libc::statfs(dir.as_ptr(), &mut sfs) };
        r == 0 && sfs.f_type == libc::TMPFS_MAGIC
    };
    for v in VARIANTS {
        let prog = c_program(name, v);
        let p = prog.to_str().expect("utf-8 path");
        let dir = native_tmp.join(format!("cordon-{name}-{v}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut args = vec![dir.to_str().expect("utf-8 path")];
        if native_on_tmpfs {
            args.push("tmpfs");
        }
        let n = native(p, &args, None);
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            n.status.success(),
            "{name}-{v} fails natively, so the test itself is wrong:\n{}{}",
            String::from_utf8_lossy(&n.stdout),
            String::from_utf8_lossy(&n.stderr)
        );
        let sandbox_dir = format!("/tmp/{name}-{v}");
        let s = finish_within(spawn_cordon(&[p, &sandbox_dir, "tmpfs"]), C_TEST_HANG, &format!("{name}-{v}"));
        assert_same(&format!("{name}-{v}"), &s, &n);
    }
}

/// Far more than any C test program takes in the sandbox: a hang fails its
/// test instead of stalling the suite.
const C_TEST_HANG: std::time::Duration = std::time::Duration::from_secs(300);

/// Runs a C test program only in the sandbox (for behaviour that differs
/// from the host by design, such as the read-only root); it must pass.
pub fn c_test_sandbox_only(name: &str, opts: &[&str], args: &[&str]) {
    for v in VARIANTS {
        let prog = c_program(name, v);
        let s = sandbox(opts, prog.to_str().expect("utf-8 path"), args, None);
        assert!(
            s.status.success(),
            "{name}-{v} failed in the sandbox (status {:?}):\n{}{}",
            s.status.code(),
            String::from_utf8_lossy(&s.stdout),
            String::from_utf8_lossy(&s.stderr)
        );
    }
}

/// The pid of `parent`'s child process.
pub fn child_of(parent: u32) -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
        // The fields after the command name, which may hold anything.
        let rest = &stat[stat.rfind(')')? + 2..];
        let ppid: u32 = rest.split(' ').nth(1)?.parse().ok()?;
        (ppid == parent).then_some(pid)
    })
}

/// The value of `key` in /proc/PID/status.
pub fn status_field(pid: u32, key: &str) -> String {
    status_file_field(&format!("/proc/{pid}/status"), key)
}

/// The value of `key` in a status file of /proc.
pub fn status_file_field(path: &str, key: &str) -> String {
    let text = std::fs::read_to_string(path).expect("status");
    let line = text.lines().find(|l| l.starts_with(&format!("{key}:"))).unwrap_or_else(|| panic!("no {key}"));
    line[key.len() + 1..].trim().to_string()
}

/// Where each of PID's descriptors leads.
pub fn descriptors(pid: u32) -> Vec<(String, String)> {
    let mut fds: Vec<(String, String)> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("fd directory")
        .flatten()
        .map(|e| {
            let target = std::fs::read_link(e.path()).map(|t| t.display().to_string()).unwrap_or_default();
            (e.file_name().to_string_lossy().into_owned(), target)
        })
        .collect();
    fds.sort();
    fds
}

/// A fresh empty directory under the target directory.
pub fn scratch_dir(name: &str) -> PathBuf {
    let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).expect("create scratch directory");
    base
}

/// Waits for `child` and collects its output; fails, after killing it, if
/// it runs longer than `limit` (far more than the run takes: reaching it
/// means a hang). Reading stdout and stderr to their end also shows that no
/// process kept them open after cordon was gone.
pub fn finish_within(mut child: std::process::Child, limit: std::time::Duration, what: &str) -> Output {
    use std::io::Read;
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
    let deadline = std::time::Instant::now() + limit;
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            let err = err.join().unwrap_or_default();
            panic!("{what}: still running after {limit:?}; stderr:\n{}", String::from_utf8_lossy(&err));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    Output { status, stdout: out.join().expect("stdout"), stderr: err.join().expect("stderr") }
}

/// `[TID] name(arguments) = result`, the result a number, `?`, or
/// `-1 ENAME (description)`.
pub fn well_formed_strace_line(line: &str) -> bool {
    let Some(rest) = line.strip_prefix('[') else { return false };
    let Some((tid, rest)) = rest.split_once("] ") else { return false };
    let Some((call, result)) = rest.rsplit_once(") = ") else {
        return false;
    };
    let Some((name, _args)) = call.split_once('(') else { return false };
    let name_ok = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    let number =
        |s: &str| s.strip_prefix("0x").map_or_else(|| s.parse::<i64>().is_ok(), |h| u64::from_str_radix(h, 16).is_ok());
    let result_ok = number(result)
        || result == "?"
        || result.strip_prefix("-1 E").is_some_and(|r| {
            r.split_once(" (").is_some_and(|(e, d)| {
                e.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_') && d.ends_with(')')
            })
        });
    tid.parse::<u32>().is_ok() && name_ok && result_ok
}

/// A KVM device node owned by user and group `id`, in `dir`.
pub fn kvm_node_for(dir: &Path, id: u32) -> PathBuf {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata("/dev/kvm").expect("/dev/kvm").rdev();
    let node = dir.join("kvm");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &node,
        rustix::fs::FileType::CharacterDevice,
        rustix::fs::Mode::from_raw_mode(0o600),
        dev,
    )
    .expect("mknod");
    rustix::fs::chown(&node, Some(rustix::process::Uid::from_raw(id)), Some(rustix::process::Gid::from_raw(id)))
        .expect("chown");
    node
}

/// Makes `slave` (a pty's) the command's stdin, stdout and stderr and its
/// controlling terminal, in a session of its own, as a terminal emulator
/// starts a shell.
pub fn on_controlling_terminal(cmd: &mut Command, slave: std::os::fd::OwnedFd) {
    use std::os::unix::process::CommandExt;
    cmd.stdin(Stdio::from(slave.try_clone().unwrap()))
        .stdout(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave));
    // SAFETY: between fork and exec only async-signal-safe calls are made:
    // a new session, then the pty (stdin) as its terminal.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}
