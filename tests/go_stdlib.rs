//! Go's own tests for a few standard-library packages whose tests lean on
//! the runtime's wake-ups (the netpoller on pipes and process descriptors,
//! futexes, signals to running threads, timers): each package's test
//! binary is built with the installed Go, run natively and in the sandbox,
//! and must pass in both and take in the sandbox no more than a few times
//! its native time. A lost wake-up shows as a hang (caught by the kill
//! timeout) or as a stall until some unrelated timer fires (caught by the
//! time bound). `cargo test --test go_stdlib -- --nocapture` prints the
//! times and their ratio.
//!
//! Tests that need what the sandbox does not provide yet are left out with
//! `-test.skip`, each with its reason below.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use common::{cordon, run_with, scratch_dir};

/// Kill timeout of one run of a package's tests (the slowest, `time`,
/// takes about 15 s natively).
const KILL_AFTER: Duration = Duration::from_secs(240);

/// The sandbox may take this many times the native time, plus [`SLACK`]:
/// every system call leaves the guest, so tests made of little but
/// system calls, forks and execs (syscall's take 0.1 s natively) take
/// seconds however well the wake-ups go, while a stall until an unrelated
/// timer fires costs more than that.
const MAX_RATIO: u32 = 8;
const SLACK: Duration = Duration::from_secs(5);

const NO_WRITABLE_TMP: &str = "needs a writable /tmp (TempDir, MkdirTemp)";

struct Package {
    path: &'static str,
    /// (test name, why it is left out).
    skip: &'static [(&'static str, &'static str)],
}

const SYSCALL: Package = Package {
    path: "syscall",
    skip: &[
        ("TestDirent", NO_WRITABLE_TMP),
        ("TestDirentRepeat", NO_WRITABLE_TMP),
        ("TestFaccessat", NO_WRITABLE_TMP),
        ("TestFchmodat", NO_WRITABLE_TMP),
        ("TestFcntlFlock", NO_WRITABLE_TMP),
        ("TestUnshareMountNameSpace", NO_WRITABLE_TMP),
        ("TestUnshareMountNameSpaceChroot", NO_WRITABLE_TMP),
        ("TestAmbientCaps", NO_WRITABLE_TMP),
        ("TestAmbientCapsUserns", NO_WRITABLE_TMP),
        ("TestDeathSignalSetuid", NO_WRITABLE_TMP),
        ("TestAllThreadsSyscall", "needs PR_SET_KEEPCAPS to be kept per thread"),
        ("TestSetuidEtc", "needs /proc/PID/task"),
        ("TestPrlimitOtherProcess", "needs prlimit on another process"),
        ("TestPrlimitFileLimit", "needs prlimit on another process"),
        ("TestExecPtrace", "needs ptrace"),
    ],
};

const OS_SIGNAL: Package = Package { path: "os/signal", skip: &[] };

const OS_EXEC: Package = Package {
    path: "os/exec",
    skip: &[
        ("TestLookPath", NO_WRITABLE_TMP),
        ("TestLookPathUnixEmptyPath", NO_WRITABLE_TMP),
        ("TestFindExecutableVsNoexec", NO_WRITABLE_TMP),
        ("TestExplicitPWD", NO_WRITABLE_TMP),
    ],
};

const IO_FS: Package = Package {
    path: "io/fs",
    skip: &[
        ("TestReadDirPath", NO_WRITABLE_TMP),
        ("TestReadFilePath", NO_WRITABLE_TMP),
        ("TestWalkDir", NO_WRITABLE_TMP),
        ("TestIssue51617", NO_WRITABLE_TMP),
    ],
};

const PATH_FILEPATH: Package = Package {
    path: "path/filepath",
    skip: &[
        ("TestGlobSymlink", NO_WRITABLE_TMP),
        ("TestWalk", NO_WRITABLE_TMP),
        ("TestWalkDir", NO_WRITABLE_TMP),
        ("TestWalkSkipDirOnFile", NO_WRITABLE_TMP),
        ("TestWalkSkipAllOnFile", NO_WRITABLE_TMP),
        ("TestWalkFileError", NO_WRITABLE_TMP),
        ("TestWalkSymlinkRoot", NO_WRITABLE_TMP),
        ("TestWalkSymlink", NO_WRITABLE_TMP),
        ("TestEvalSymlinks", NO_WRITABLE_TMP),
        ("TestEvalSymlinksIsNotExist", NO_WRITABLE_TMP),
        ("TestEvalSymlinksAboveRoot", NO_WRITABLE_TMP),
        ("TestEvalSymlinksAboveRootChdir", NO_WRITABLE_TMP),
        ("TestEvalSymlinksTooManyLinks", NO_WRITABLE_TMP),
        ("TestIssue13582", NO_WRITABLE_TMP),
        ("TestIssue29372", NO_WRITABLE_TMP),
        ("TestIssue51617", NO_WRITABLE_TMP),
        ("TestRelativeSymlinkToAbsolute", NO_WRITABLE_TMP),
        ("TestAbs", NO_WRITABLE_TMP),
        ("TestAbsEmptyString", NO_WRITABLE_TMP),
        ("TestEscaping", NO_WRITABLE_TMP),
        ("ExampleWalk", NO_WRITABLE_TMP),
    ],
};

const TIME: Package = Package { path: "time", skip: &[] };

const SYNC: Package = Package { path: "sync", skip: &[] };

/// The Go toolchain: `go` on PATH, or where the official archive puts it.
/// None (the test skips, saying so) where Go is not installed, unless
/// CORDON_REQUIRE_KVM=1 asks for every test to run.
fn go_tool() -> Option<PathBuf> {
    let on_path =
        std::env::var_os("PATH").and_then(|p| std::env::split_paths(&p).map(|d| d.join("go")).find(|p| p.is_file()));
    let found = on_path.or_else(|| Some(PathBuf::from("/usr/local/go/bin/go")).filter(|p| p.is_file()));
    if found.is_none() {
        if std::env::var("CORDON_REQUIRE_KVM").as_deref() == Ok("1") {
            panic!("no Go toolchain (go on PATH or /usr/local/go/bin/go), and CORDON_REQUIRE_KVM=1");
        }
        eprintln!("skipping: no Go toolchain");
    }
    found
}

/// Where the toolchain keeps the standard library's sources (the tests
/// run in their package's directory, as `go test` runs them).
fn goroot(go: &Path) -> PathBuf {
    let out = Command::new(go).args(["env", "GOROOT"]).output().expect("run go env");
    assert!(out.status.success(), "go env GOROOT: {}", String::from_utf8_lossy(&out.stderr));
    PathBuf::from(String::from_utf8(out.stdout).expect("utf-8").trim())
}

struct Built {
    goroot: PathBuf,
    dir: PathBuf,
}

/// Builds `pkg`'s test binary into the scratch directory, once per run.
fn build(go: &Path, built: &Built, pkg: &Package) -> PathBuf {
    let exe = built.dir.join(format!("{}.test", pkg.path.replace('/', "_")));
    let mut cmd = Command::new(go);
    cmd.env("CGO_ENABLED", "0").env("GOTOOLCHAIN", "local");
    // Go keeps its build cache under $HOME; give it one where there is none.
    if ["GOCACHE", "XDG_CACHE_HOME", "HOME"].iter().all(|v| std::env::var_os(v).is_none()) {
        cmd.env("GOCACHE", built.dir.join("cache")).env("GOPATH", built.dir.join("gopath"));
    }
    let out = cmd.args(["test", "-c", "-o"]).arg(&exe).arg(pkg.path).output().expect("run go test -c");
    assert!(out.status.success(), "go test -c {}: {}", pkg.path, String::from_utf8_lossy(&out.stderr));
    exe
}

/// `-test.skip`'s pattern: exactly the names left out.
fn skip_pattern(pkg: &Package) -> Option<String> {
    (!pkg.skip.is_empty()).then(|| {
        let names: Vec<&str> = pkg.skip.iter().map(|(name, _)| *name).collect();
        format!("^({})$", names.join("|"))
    })
}

/// Runs `exe` with its tests' arguments, in the package's directory, ended
/// after [`KILL_AFTER`]; natively, or through `cordon run` with `sandbox`.
fn run(exe: &Path, dir: &Path, pkg: &Package, sandboxed: bool) -> (Output, Duration) {
    let mut cmd = Command::new("timeout");
    cmd.args(["-s", "KILL", &KILL_AFTER.as_secs().to_string()]);
    if sandboxed {
        let pwd = format!("PWD={}", dir.display());
        cmd.arg(cordon()).args(["run", "-w"]).arg(dir).args(["-e", &pwd, "--"]);
    }
    // -test.run selects every test explicitly: os/exec's TestMain checks
    // that a complete run used all its helper commands, which a run
    // without the tests left out does not.
    cmd.arg(exe).args(["-test.count=1", "-test.v", "-test.run=."]).current_dir(dir).env("PWD", dir);
    if let Some(p) = skip_pattern(pkg) {
        cmd.arg(format!("-test.skip={p}"));
    }
    let started = Instant::now();
    let out = run_with(cmd, None);
    (out, started.elapsed())
}

/// The failing tests of a run, for the failure message.
fn failures(out: &Output) -> String {
    let text = String::from_utf8_lossy(&out.stdout);
    let failed: Vec<&str> = text.lines().filter(|l| l.trim_start().starts_with("--- FAIL")).collect();
    let tail: Vec<&str> = text.lines().rev().take(30).collect::<Vec<_>>().into_iter().rev().collect();
    format!(
        "status {:?}\nfailed:\n{}\nlast lines:\n{}\nstderr:\n{}",
        out.status,
        failed.join("\n"),
        tail.join("\n"),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn check_package(pkg: &Package) {
    require_kvm!();
    let Some(go) = go_tool() else { return };
    // One package at a time, build included: anything running alongside
    // would skew the times.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    static BUILT: OnceLock<Built> = OnceLock::new();
    let built = BUILT.get_or_init(|| Built { goroot: goroot(&go), dir: scratch_dir("go-stdlib") });
    let exe = build(&go, built, pkg);
    let dir = built.goroot.join("src").join(pkg.path);
    let (native, native_time) = run(&exe, &dir, pkg, false);
    assert!(native.status.success(), "{} fails natively, so the test is wrong:\n{}", pkg.path, failures(&native));
    let (sandboxed, sandbox_time) = run(&exe, &dir, pkg, true);
    let ratio = sandbox_time.as_secs_f64() / native_time.as_secs_f64().max(0.001);
    eprintln!(
        "{:<14} native {:>7.2} s  sandbox {:>7.2} s  ratio {:>5.1}",
        pkg.path,
        native_time.as_secs_f64(),
        sandbox_time.as_secs_f64(),
        ratio
    );
    assert!(sandboxed.status.success(), "{} fails in the sandbox:\n{}", pkg.path, failures(&sandboxed));
    let bound = native_time * MAX_RATIO + SLACK;
    assert!(
        sandbox_time <= bound,
        "{}: {:.2} s in the sandbox against {:.2} s natively (more than {MAX_RATIO} times plus {} s): \
         a wake-up came late",
        pkg.path,
        sandbox_time.as_secs_f64(),
        native_time.as_secs_f64(),
        SLACK.as_secs()
    );
}

#[test]
fn go_syscall() {
    check_package(&SYSCALL);
}

#[test]
fn go_os_signal() {
    check_package(&OS_SIGNAL);
}

#[test]
fn go_os_exec() {
    check_package(&OS_EXEC);
}

#[test]
fn go_io_fs() {
    check_package(&IO_FS);
}

#[test]
fn go_path_filepath() {
    check_package(&PATH_FILEPATH);
}

#[test]
fn go_time() {
    check_package(&TIME);
}

#[test]
fn go_sync() {
    check_package(&SYNC);
}
