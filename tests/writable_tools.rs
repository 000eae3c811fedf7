//! Real tools that write files, natively and in the sandbox: a C project
//! built with make and gcc, git, sqlite3 in WAL mode, tar with xz, Python's
//! file and process machinery, pip installing into a venv, and Node's fs.
//!
//! Each tool is driven by a script in `tests/data/writable` that takes its
//! work directory WORK as first argument and writes only below it (and, for
//! semaphores, in /dev/shm). The script is run with WORK in two places, each
//! natively and then in the sandbox with the same path, and stdout and exit
//! status must agree:
//! - under `/tmp`, which is a tmpfs in the sandbox;
//! - under `/var/tmp`, a directory of the root, which the sandbox can write
//!   only through its overlay. The host directory is there, empty, while the
//!   sandbox runs, and must still be empty afterwards.
//!
//! Both runs get the same small environment (TMPDIR and HOME are WORK) and
//! start in `/`. A tool that is missing skips its test, saying so, unless
//! `CORDON_REQUIRE_KVM=1` (as in CI), where it fails: `scripts/install-deps`
//! installs them all.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::{cordon, finish_within};

/// Far more than any of these scripts takes in the sandbox: reaching it
/// means a hang.
const HANG: Duration = Duration::from_secs(900);

/// The scripts' directory.
fn scripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/writable")
}

/// Where a run's work directory is.
#[derive(Clone, Copy, Debug)]
enum Place {
    /// Under `/tmp`: the sandbox's tmpfs.
    Tmp,
    /// Under `/var/tmp`: in the sandbox, the root's writable overlay.
    Overlay,
}

impl Place {
    fn work_dir(self, tool: &str) -> String {
        let base = match self {
            Place::Tmp => "/tmp",
            Place::Overlay => "/var/tmp",
        };
        format!("{base}/cordon-tools-{tool}-{}", std::process::id())
    }

    fn describe(self) -> &'static str {
        match self {
            Place::Tmp => "under /tmp (tmpfs in the sandbox)",
            Place::Overlay => "under /var/tmp (the overlay root in the sandbox)",
        }
    }
}

/// `name` on the test's PATH, if it is there; an absolute path if it is a
/// file.
fn on_path(name: &str) -> Option<PathBuf> {
    if name.starts_with('/') {
        return Path::new(name).is_file().then(|| PathBuf::from(name));
    }
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| PathBuf::from(d).join(name)).find(|p| p.is_file())
}

/// True if every program in `tools` is on PATH (or, given by absolute
/// path, there). Otherwise the test is
/// skipped, saying which is missing, or fails under CORDON_REQUIRE_KVM=1.
fn tools_present(tools: &[&str]) -> bool {
    let missing: Vec<&str> = tools.iter().copied().filter(|t| on_path(t).is_none()).collect();
    if missing.is_empty() {
        return true;
    }
    let why = format!("not on PATH: {} (scripts/install-deps installs them)", missing.join(", "));
    if std::env::var("CORDON_REQUIRE_KVM").as_deref() == Ok("1") {
        panic!("this test needs {why}");
    }
    eprintln!("skipping: {why}");
    false
}

/// The environment of both runs.
fn environment(work: &str) -> Vec<(&'static str, String)> {
    vec![
        ("PATH", "/usr/local/bin:/usr/bin:/bin".to_string()),
        ("LC_ALL", "C".to_string()),
        ("TZ", "UTC".to_string()),
        ("TMPDIR", work.to_string()),
        ("HOME", work.to_string()),
    ]
}

fn run_native(argv: &[String], work: &str) -> Output {
    let child = Command::new(&argv[0])
        .args(&argv[1..])
        .env_clear()
        .envs(environment(work))
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", argv[0]));
    finish_within(child, HANG, &format!("{argv:?} natively"))
}

fn run_sandboxed(argv: &[String], work: &str) -> Output {
    let mut cmd = Command::new(cordon());
    cmd.args(["run", "--env-clear", "-w", "/"]);
    for (k, v) in environment(work) {
        cmd.arg("-e").arg(format!("{k}={v}"));
    }
    let child = cmd
        .arg("--")
        .args(argv)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn cordon");
    finish_within(child, HANG, &format!("{argv:?} in the sandbox"))
}

/// Where two outputs part, line by line, for a failure message.
fn first_difference(native: &str, sandboxed: &str) -> String {
    let (n, s): (Vec<&str>, Vec<&str>) = (native.lines().collect(), sandboxed.lines().collect());
    let at = n.iter().zip(&s).position(|(a, b)| a != b).unwrap_or(n.len().min(s.len()));
    let line = |v: &[&str]| v.get(at).map_or("(no more lines)".to_string(), |l| format!("{l:?}"));
    format!(
        "first difference at line {}:\n  native:  {}\n  sandbox: {}\n(native printed {} lines, the sandbox {})",
        at + 1,
        line(&n),
        line(&s),
        n.len(),
        s.len()
    )
}

/// Runs `interpreter SCRIPT WORK extra...` natively and in the sandbox with
/// WORK in each place, and compares; a failure names every place where the
/// sandbox's run differed.
fn check_tool(tool: &str, interpreter: &str, script: &str, extra: &[&str]) {
    let failures: Vec<String> = [Place::Tmp, Place::Overlay]
        .into_iter()
        .filter_map(|place| run_both(tool, place, interpreter, script, extra))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// One place's native and sandboxed runs: what differed, if anything.
fn run_both(tool: &str, place: Place, interpreter: &str, script: &str, extra: &[&str]) -> Option<String> {
    let work = place.work_dir(tool);
    let what = format!("{tool} {}", place.describe());
    let argv: Vec<String> = [interpreter.to_string(), scripts().join(script).display().to_string(), work.clone()]
        .into_iter()
        .chain(extra.iter().map(|s| s.to_string()))
        .collect();

    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap_or_else(|e| panic!("creating {work}: {e}"));
    let n = run_native(&argv, &work);
    let _ = std::fs::remove_dir_all(&work);
    assert!(
        n.status.success(),
        "{what} fails natively (status {:?}), so the test or a host tool is wrong:\n{}{}",
        n.status.code(),
        String::from_utf8_lossy(&n.stdout),
        String::from_utf8_lossy(&n.stderr)
    );

    // Under /var/tmp the sandbox finds the directory in the root, empty, and
    // writes into it through the overlay; under /tmp it makes it in its own
    // tmpfs.
    if let Place::Overlay = place {
        std::fs::create_dir(&work).unwrap_or_else(|e| panic!("creating {work}: {e}"));
    }
    let s = run_sandboxed(&argv, &work);
    let host_after: Vec<String> = match std::fs::read_dir(&work) {
        Ok(entries) => entries.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect(),
        Err(_) => Vec::new(),
    };
    let host_dir_appeared = matches!(place, Place::Tmp) && Path::new(&work).exists();
    let _ = std::fs::remove_dir_all(&work);

    let stderr = String::from_utf8_lossy(&s.stderr);
    let (n_out, s_out) = (String::from_utf8_lossy(&n.stdout), String::from_utf8_lossy(&s.stdout));
    if n_out != s_out || n.status.code() != s.status.code() {
        return Some(format!(
            "{what}: the sandbox's run differs from the native one\n\
             exit status: native {:?}, sandbox {:?}\n{}\nsandbox stdout:\n{s_out}\nsandbox stderr:\n{stderr}",
            n.status.code(),
            s.status.code(),
            first_difference(&n_out, &s_out),
        ));
    }
    if !host_after.is_empty() {
        return Some(format!("{what}: the sandbox's writes reached the host's {work}: {host_after:?}"));
    }
    if host_dir_appeared {
        return Some(format!("{what}: the sandbox's /tmp is the host's: {work} appeared on the host"));
    }
    None
}

#[test]
fn make_and_gcc_build_a_multi_file_project() {
    require_kvm!();
    if !tools_present(&["sh", "make", "cc", "ar", "sed"]) {
        return;
    }
    let project = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/cproject");
    check_tool("make", "/bin/sh", "make.sh", &[project.to_str().expect("utf-8 path")]);
}

#[test]
fn git_init_commit_branch_merge_log() {
    require_kvm!();
    if !tools_present(&["sh", "git"]) {
        return;
    }
    check_tool("git", "/bin/sh", "git.sh", &[]);
}

#[test]
fn sqlite_wal_with_concurrent_readers() {
    require_kvm!();
    if !tools_present(&["sh", "sqlite3", "awk"]) {
        return;
    }
    check_tool("sqlite", "/bin/sh", "sqlite.sh", &[]);
}

#[test]
fn tar_xz_round_trip_with_checksums() {
    require_kvm!();
    if !tools_present(&["sh", "tar", "xz", "gzip", "sha256sum"]) {
        return;
    }
    check_tool("tar", "/bin/sh", "tar.sh", &[]);
}

#[test]
fn python_tempfile_shutil_pool_semaphores_and_replace() {
    require_kvm!();
    if !tools_present(&["/usr/bin/python3"]) {
        return;
    }
    check_tool("python", "/usr/bin/python3", "python_files.py", &[]);
}

#[test]
fn pip_installs_a_local_wheel_into_a_venv() {
    require_kvm!();
    if !tools_present(&["sh", "/usr/bin/python3"]) {
        return;
    }
    // python3 -m venv needs ensurepip (Debian's python3-venv).
    let venv = Command::new("/usr/bin/python3").args(["-c", "import ensurepip, venv"]).output();
    if !venv.is_ok_and(|o| o.status.success()) {
        let why = "python3 cannot make a venv with pip: no ensurepip (python3-venv; scripts/install-deps installs it)";
        if std::env::var("CORDON_REQUIRE_KVM").as_deref() == Ok("1") {
            panic!("this test needs {why}");
        }
        eprintln!("skipping: {why}");
        return;
    }
    check_tool("pip", "/bin/sh", "pip.sh", &[]);
}

#[test]
fn node_fs_writes_renames_and_watch() {
    require_kvm!();
    if !tools_present(&["node"]) {
        return;
    }
    let node = on_path("node").expect("node on PATH");
    check_tool("node", node.to_str().expect("utf-8 path"), "node_fs.js", &[]);
}
