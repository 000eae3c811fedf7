//! `cordon run` as a user meets it: finding programs, arguments,
//! environment, working directory, exit statuses and error reports.

mod common;

use common::{c_program, cordon, native, sandbox};

#[test]
fn every_executable_kind_runs_with_arguments_and_status() {
    require_kvm!();
    for v in common::VARIANTS {
        let p = c_program("hello", v);
        let p = p.to_str().unwrap();
        let out = sandbox(&["-e", "CORDON_TEST_VAR=set here"], p, &["7", "two words"], None);
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(7), "{v}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(text.contains("argv[2]=two words"), "{v}: {text}");
        assert!(text.contains("CORDON_TEST_VAR=set here"), "{v}: {text}");
    }
}

#[test]
fn environment_is_passed_only_when_asked() {
    require_kvm!();
    let p = c_program("hello", "static");
    let p = p.to_str().unwrap();
    let run = |opts: &[&str]| {
        let mut cmd = std::process::Command::new(cordon());
        cmd.env("CORDON_TEST_VAR", "from caller").arg("run").args(opts).args(["--", p]);
        String::from_utf8_lossy(&common::run_with(cmd, None).stdout).into_owned()
    };
    assert!(run(&[]).contains("CORDON_TEST_VAR=(unset)"), "not on the default allow-list");
    assert!(run(&["--env-all"]).contains("CORDON_TEST_VAR=from caller"));
    assert!(run(&["-e", "CORDON_TEST_VAR"]).contains("CORDON_TEST_VAR=from caller"));
    assert!(run(&["--env-all", "--env-clear"]).is_empty(), "the two conflict");
    assert!(run(&["--env-clear", "-e", "CORDON_TEST_VAR"]).contains("CORDON_TEST_VAR=from caller"));
}

#[test]
fn programs_are_found_on_the_sandbox_path() {
    require_kvm!();
    let out = sandbox(&[], "echo", &["found", "on", "PATH"], None);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "found on PATH\n");
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn working_directory() {
    require_kvm!();
    let out = sandbox(&["-w", "/usr/share"], "/bin/pwd", &[], None);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "/usr/share\n");
    let out = sandbox(&["-w", "/no/such/dir"], "/bin/pwd", &[], None);
    assert_eq!(out.status.code(), Some(125));
    assert_eq!(String::from_utf8_lossy(&out.stderr).lines().count(), 1, "one-line error");
}

fn one_line_error(out: &std::process::Output, code: i32, text: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{err}");
    assert_eq!(err.lines().count(), 1, "expected one line, got: {err}");
    assert!(err.contains(text), "expected '{text}' in: {err}");
}

#[test]
fn bad_input_gives_one_line_and_a_distinct_status() {
    require_kvm!();
    one_line_error(&sandbox(&[], "/no/such/program", &[], None), 127, "No such file or directory");
    one_line_error(&sandbox(&[], "no-such-command-anywhere", &[], None), 127, "command not found");
    one_line_error(&sandbox(&[], "/etc/passwd", &[], None), 126, "Permission denied");
    let scratch = common::scratch_dir("notelf");
    let bad = scratch.join("not-an-elf");
    std::fs::write(&bad, b"\x7fELF garbage that is no executable").unwrap();
    std::fs::set_permissions(&bad, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    one_line_error(&sandbox(&[], bad.to_str().unwrap(), &[], None), 126, "Exec format error");
    let mut cmd = std::process::Command::new(cordon());
    cmd.args(["run", "--no-such-option", "--", "/bin/true"]);
    one_line_error(&common::run_with(cmd, None), 2, "--no-such-option");
    let mut cmd = std::process::Command::new(cordon());
    cmd.args(["run", "--memory", "lots", "--", "/bin/true"]);
    one_line_error(&common::run_with(cmd, None), 2, "lots");
    let mut cmd = std::process::Command::new(cordon());
    cmd.args(["run", "--"]);
    one_line_error(&common::run_with(cmd, None), 2, "not provided: <PROGRAM");
    one_line_error(&common::run_with(std::process::Command::new(cordon()), None), 2, "no command given");
    let mut cmd = std::process::Command::new(cordon());
    cmd.arg("walk");
    one_line_error(&common::run_with(cmd, None), 2, "walk");
}

#[test]
fn exit_status_matches_native() {
    require_kvm!();
    for (prog, args) in [("/bin/true", vec![]), ("/bin/false", vec![]), ("/bin/sh", vec!["-c", "exit 3"])] {
        let s = sandbox(&[], prog, &args, None);
        let n = native(prog, &args, None);
        assert_eq!(s.status.code(), n.status.code(), "{prog} {args:?}: {}", String::from_utf8_lossy(&s.stderr));
    }
}

/// The sandbox reports a host name and kernel build of its own (the
/// release stays a real one, the host's, for programs that parse it);
/// `--hostname` names it.
#[test]
fn uname_is_the_sandboxes_own() {
    require_kvm!();
    let text = |o: std::process::Output| String::from_utf8_lossy(&o.stdout).into_owned();
    let host_version = text(native("uname", &["-v"], None));
    assert_eq!(text(sandbox(&[], "uname", &["-n"], None)), "cordon\n");
    assert_eq!(text(sandbox(&["--hostname", "box-7"], "uname", &["-n"], None)), "box-7\n");
    assert_eq!(text(sandbox(&[], "uname", &["-r"], None)), text(native("uname", &["-r"], None)));
    let version = text(sandbox(&[], "uname", &["-v"], None));
    assert!(version.contains("cordon") && version != host_version, "version: {version}");
    let proc_version = text(sandbox(&[], "cat", &["/proc/version"], None));
    assert!(proc_version.contains(version.trim_end()), "/proc/version: {proc_version}");
    assert!(!proc_version.contains(host_version.trim_end()), "/proc/version: {proc_version}");
    let out = sandbox(&["--hostname", &"x".repeat(65)], "true", &[], None);
    assert_eq!(out.status.code(), Some(2), "a host name longer than Linux allows is refused");
}

/// cordon's own notes (an unsupported system call) never reach the
/// program's streams: stdout and stderr are the program's alone, as
/// natively, unless `--debug` asks for the log on stderr; `--log FILE`
/// writes it to FILE, `--profile` counts the call and `--strace` shows it.
#[test]
fn unsupported_calls_are_reported_only_where_asked() {
    require_kvm!();
    const NOTE: &str = "unsupported system call tuxcall (184)";
    let p = c_program("unsupported_call", "static");
    let p = p.to_str().unwrap();
    let n = native(p, &[], None);
    assert!(n.status.success(), "fails natively: {}", String::from_utf8_lossy(&n.stderr));

    let quiet = sandbox(&[], p, &[], None);
    common::assert_same("no flags", &quiet, &n);
    assert_eq!(String::from_utf8_lossy(&quiet.stderr), String::from_utf8_lossy(&n.stderr), "stderr is the program's");

    let debug = sandbox(&["--debug"], p, &[], None);
    common::assert_same("--debug", &debug, &n);
    let err = String::from_utf8_lossy(&debug.stderr);
    assert_eq!(err.matches(NOTE).count(), 1, "--debug shows the note once:\n{err}");

    let dir = common::scratch_dir("unsupported-log");
    let log = dir.join("cordon.log");
    let logged = sandbox(&["--log", log.to_str().unwrap()], p, &[], None);
    common::assert_same("--log", &logged, &n);
    assert_eq!(String::from_utf8_lossy(&logged.stderr), String::from_utf8_lossy(&n.stderr), "stderr is the program's");
    let text = std::fs::read_to_string(&log).expect("--log writes its file");
    assert_eq!(text.matches(NOTE).count(), 1, "the log holds the note once:\n{text}");

    let profiled = sandbox(&["--profile=json"], p, &[], None);
    common::assert_same("--profile", &profiled, &n);
    let err = String::from_utf8_lossy(&profiled.stderr);
    let json_start = err.find('{').expect("a JSON profile on stderr");
    let json: serde_json::Value = serde_json::from_str(&err[json_start..]).expect("one JSON document");
    let unsupported = json["unsupported"].as_array().expect("an unsupported list");
    assert!(
        unsupported.iter().any(|u| u["name"] == "tuxcall" && u["nr"] == 184 && u["count"] == 1),
        "tuxcall counted once: {unsupported:?}"
    );
    assert!(!err.contains(NOTE), "--profile alone keeps the log off stderr:\n{err}");

    let traced = sandbox(&["--strace"], p, &[], None);
    let err = String::from_utf8_lossy(&traced.stderr);
    assert!(
        err.lines().any(|l| l.contains("tuxcall(") && l.ends_with("= -1 ENOSYS (Function not implemented)")),
        "{err}"
    );
}
