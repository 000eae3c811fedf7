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

/// Without -w the program starts in the caller's directory where the
/// sandbox shows it, else in /: the sandbox's /tmp is a tmpfs of its own,
/// so a caller in the host's /tmp starts in / unless a bind brings the
/// directory in.
#[test]
fn the_callers_directory_is_kept_only_where_the_sandbox_shows_it() {
    require_kvm!();
    let pwd_from = |dir: &str, opts: &[&str]| {
        let mut cmd = std::process::Command::new(common::cordon());
        cmd.current_dir(dir).arg("run").args(opts).args(["--", "/bin/pwd"]);
        let out = cmd.output().expect("run cordon");
        assert_eq!(out.status.code(), Some(0), "from {dir}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let host_tmp = std::path::PathBuf::from(format!("/tmp/cordon-cwd-test-{}", std::process::id()));
    std::fs::create_dir_all(&host_tmp).expect("a directory in the host's /tmp");
    let dir = host_tmp.to_str().expect("utf-8").to_string();
    assert_eq!(pwd_from("/usr/share", &[]), "/usr/share\n");
    assert_eq!(pwd_from("/tmp", &[]), "/tmp\n");
    assert_eq!(pwd_from(&dir, &[]), "/\n");
    let bind = format!("{dir}:{dir}");
    assert_eq!(pwd_from(&dir, &["-v", &bind]), format!("{dir}\n"));
    let _ = std::fs::remove_dir_all(&host_tmp);
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

/// `cordon` with the user's cache directory at `cache` and no platform
/// named in the environment, so that auto decides.
fn cordon_with_cache(cache: &std::path::Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(cordon());
    cmd.env("XDG_CACHE_HOME", cache).env_remove("CORDON_PLATFORM");
    cmd
}

/// The lines of `cordon platforms`, by platform name.
fn platform_lines(out: &std::process::Output) -> Vec<(String, String)> {
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    text.lines()
        .map(|l| {
            let (name, rest) = l.split_once(' ').expect("a name, then the rest");
            (name.to_string(), rest.trim().to_string())
        })
        .collect()
}

/// The microseconds after `label` in a line of `cordon platforms`.
fn micros_after(line: &str, label: &str) -> f64 {
    let rest = &line[line.find(label).unwrap_or_else(|| panic!("no {label:?} in {line:?}")) + label.len()..];
    let number = rest.split_whitespace().next().expect("a number");
    assert!(rest.trim_start()[number.len()..].trim_start().starts_with("us"), "{line:?}");
    number.parse().unwrap_or_else(|_| panic!("{number:?} in {line:?}"))
}

/// The platform `cordon platforms` marks as auto's choice.
fn auto_choice(lines: &[(String, String)]) -> String {
    let chosen: Vec<&String> = lines.iter().filter(|(_, l)| l.ends_with("<- auto")).map(|(n, _)| n).collect();
    assert_eq!(chosen.len(), 1, "exactly one choice: {lines:?}");
    chosen[0].clone()
}

#[test]
fn platforms_lists_each_platform_with_its_costs_and_auto_choice() {
    let cache = common::scratch_dir("platforms-list");
    let out = common::run_with(
        {
            let mut c = cordon_with_cache(&cache);
            c.arg("platforms");
            c
        },
        None,
    );
    let lines = platform_lines(&out);
    let names: Vec<&str> = lines.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["kvm", "trap"], "one line per platform");
    for (name, line) in &lines {
        if line.starts_with("unavailable: ") {
            assert!(line.len() > "unavailable: ".len(), "{name}: says why");
            assert!(name != "kvm" || !common::kvm_available(), "kvm is usable here: {line}");
            continue;
        }
        assert!(line.starts_with("available"), "{name}: {line}");
        assert!(micros_after(line, "round trip") > 0.0, "{name}: {line}");
        assert!(micros_after(line, "first-touch fault") > 0.0, "{name}: {line}");
    }
    if lines.iter().any(|(_, l)| l.starts_with("available")) {
        let chosen = auto_choice(&lines);
        let line = &lines.iter().find(|(n, _)| *n == chosen).unwrap().1;
        assert!(line.starts_with("available"), "auto picks an available platform: {line}");
    }
}

/// The cache file under `cache`, parsed.
fn cached(cache: &std::path::Path) -> serde_json::Value {
    let text = std::fs::read(cache.join("cordon/platforms.json")).expect("the calibration is cached");
    serde_json::from_slice(&text).expect("the cache is JSON")
}

fn write_cache(cache: &std::path::Path, v: &serde_json::Value) {
    std::fs::write(cache.join("cordon/platforms.json"), serde_json::to_vec(v).unwrap()).unwrap();
}

#[test]
fn the_calibration_is_cached_per_host_and_redone_on_request() {
    let cache = common::scratch_dir("platforms-cache");
    let platforms = |extra: &[&str]| {
        let mut c = cordon_with_cache(&cache);
        c.arg("platforms").args(extra);
        platform_lines(&common::run_with(c, None))
    };
    platforms(&[]);
    let first = cached(&cache);
    for field in ["kernel", "cpu", "kvm", "cordon"] {
        assert!(first["host"][field].as_str().is_some_and(|s| !s.is_empty()), "host {field}: {first}");
    }
    let available: Vec<usize> = (0..2).filter(|&i| first["platforms"][i]["status"] == "available").collect();
    if available.is_empty() {
        eprintln!("skipping: no platform is available here");
        return;
    }

    // Costs no measurement gives: seen again, they came from the cache.
    let mut planted = first.clone();
    for &i in &available {
        planted["platforms"][i]["round_trip_ns"] = 987_654_321u64.into();
    }
    write_cache(&cache, &planted);
    let lines = platforms(&[]);
    for &i in &available {
        assert_eq!(micros_after(&lines[i].1, "round trip"), 987654.3, "read from the cache: {lines:?}");
    }

    // --calibrate measures again and rewrites the cache.
    let lines = platforms(&["--calibrate"]);
    let again = cached(&cache);
    for &i in &available {
        assert_ne!(again["platforms"][i]["round_trip_ns"], 987_654_321u64, "re-measured: {again}");
        assert_ne!(micros_after(&lines[i].1, "round trip"), 987654.3, "{lines:?}");
    }
    assert_eq!(again["host"], first["host"]);

    // A cache made on another host is measured over.
    let mut elsewhere = planted.clone();
    elsewhere["host"]["kernel"] = "another kernel".into();
    write_cache(&cache, &elsewhere);
    platforms(&[]);
    let redone = cached(&cache);
    assert_eq!(redone["host"], first["host"], "the cache is this host's again");
    for &i in &available {
        assert_ne!(redone["platforms"][i]["round_trip_ns"], 987_654_321u64, "re-measured: {redone}");
    }
}

#[test]
fn a_corrupt_cache_is_ignored_and_rewritten() {
    let cache = common::scratch_dir("platforms-corrupt");
    std::fs::create_dir_all(cache.join("cordon")).unwrap();
    for garbage in [&b"{\"host\": {\"kernel\": 7"[..], b"\x00\xff not json", b"{}"] {
        std::fs::write(cache.join("cordon/platforms.json"), garbage).unwrap();
        let mut c = cordon_with_cache(&cache);
        c.arg("platforms");
        let out = common::run_with(c, None);
        assert_eq!(platform_lines(&out).len(), 2);
        assert!(out.stderr.is_empty(), "nothing said about the old cache: {}", String::from_utf8_lossy(&out.stderr));
        let now = cached(&cache);
        if now["platforms"].as_array().unwrap().iter().any(|p| p["status"] == "available") {
            assert!(now["host"]["kernel"].is_string(), "rewritten whole: {now}");
        }
    }
}

#[test]
fn unknown_platforms_are_one_line_errors() {
    let mut cmd = cordon_with_cache(&common::scratch_dir("platforms-bogus"));
    cmd.args(["run", "--platform", "bogus", "--", "/bin/true"]);
    one_line_error(&common::run_with(cmd, None), 2, "bogus");
    let mut cmd = cordon_with_cache(&common::scratch_dir("platforms-bogus-env"));
    cmd.env("CORDON_PLATFORM", "bogus").args(["run", "--", "/bin/true"]);
    one_line_error(&common::run_with(cmd, None), 2, "CORDON_PLATFORM");
}

#[test]
fn auto_runs_the_program_and_the_profile_says_what_chose_the_platform() {
    require_kvm!();
    let cache = common::scratch_dir("platforms-auto");
    let mut c = cordon_with_cache(&cache);
    c.arg("platforms");
    let chosen = auto_choice(&platform_lines(&common::run_with(c, None)));
    let p = c_program("hello", "static");
    let p = p.to_str().unwrap();
    let n = native(p, &["3"], None);
    let profile = cache.join("profile.json");
    let run = |env_platform: Option<&str>, opts: &[&str]| {
        let mut cmd = cordon_with_cache(&cache);
        if let Some(name) = env_platform {
            cmd.env("CORDON_PLATFORM", name);
        }
        cmd.arg("run").arg(format!("--profile={}", profile.display())).args(opts).args(["--", p, "3"]);
        let out = common::run_with(cmd, None);
        common::assert_same("hello", &out, &n);
        let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&profile).unwrap()).unwrap();
        let header =
            String::from_utf8_lossy(&out.stderr).lines().find(|l| l.starts_with("cordon profile (")).map(str::to_owned);
        (
            json["platform"].as_str().unwrap().to_owned(),
            json["platform_chosen_by"].as_str().unwrap().to_owned(),
            header.unwrap(),
        )
    };
    let (platform, by, header) = run(None, &[]);
    assert_eq!((platform.as_str(), by.as_str()), (chosen.as_str(), "auto"), "the cached choice");
    assert!(header.starts_with(&format!("cordon profile ({chosen} platform chosen by auto,")), "{header}");
    let (platform, by, _) = run(Some("kvm"), &["--platform=auto"]);
    assert_eq!((platform.as_str(), by.as_str()), (chosen.as_str(), "auto"), "--platform wins over the environment");
    let pinned = common::platform();
    let (platform, by, header) = run(None, &["--platform", &pinned]);
    assert_eq!((platform.as_str(), by.as_str()), (pinned.as_str(), "--platform"));
    assert!(header.starts_with(&format!("cordon profile ({pinned} platform chosen by --platform,")), "{header}");
    let (platform, by, _) = run(Some(&pinned), &[]);
    assert_eq!((platform.as_str(), by.as_str()), (pinned.as_str(), "CORDON_PLATFORM"));
}

#[test]
fn auto_without_a_writable_cache_measures_and_stays_quiet() {
    require_kvm!();
    // A cache "directory" that is a file: nothing can be made under it.
    let dir = common::scratch_dir("platforms-unwritable");
    let blocked = dir.join("not-a-directory");
    std::fs::write(&blocked, b"").unwrap();
    let p = c_program("hello", "static");
    let p = p.to_str().unwrap();
    let n = native(p, &["5"], None);
    for _ in 0..2 {
        let mut cmd = cordon_with_cache(&blocked);
        cmd.args(["run", "--", p, "5"]);
        let out = common::run_with(cmd, None);
        common::assert_same("hello", &out, &n);
        assert_eq!(String::from_utf8_lossy(&out.stderr), String::from_utf8_lossy(&n.stderr), "nothing said");
    }
    assert_eq!(std::fs::read(&blocked).unwrap(), b"", "the file is left alone");
}

#[test]
fn auto_leaves_no_process_of_its_calibration_behind() {
    require_kvm!();
    // An empty cache: this run calibrates every platform.
    let cache = common::scratch_dir("platforms-leftovers");
    let mut cmd = cordon_with_cache(&cache);
    cmd.args(["run", "--", "/bin/true"]);
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let child = cmd.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let group = child.id() as i32;
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(cache.join("cordon/platforms.json").exists(), "the run calibrated");
    let left = rustix::process::test_kill_process_group(rustix::process::Pid::from_raw(group).unwrap());
    assert_eq!(left, Err(rustix::io::Errno::SRCH), "processes left in cordon's process group");
}
