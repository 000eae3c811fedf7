//! What a sandboxed program sees by default: the host's root with home
//! directories, credentials and daemon state hidden, and only a small
//! allow-list of the caller's environment. `-v` mounts what the user wants
//! to share, and nothing below such a mount leads back out to the host.

mod common;

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{c_program, cordon, run_with, scratch_dir};

/// `cordon run OPTS -- PROGRAM ARGS` with `env` added to the caller's
/// environment and `dir` as the caller's working directory.
fn run(opts: &[&str], program: &str, args: &[&str], env: &[(&str, &str)], dir: Option<&Path>) -> Output {
    let mut cmd = Command::new(cordon());
    cmd.arg("run").args(opts).arg("--").arg(program).args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    if let Some(d) = dir {
        cmd.current_dir(d);
    }
    run_with(cmd, None)
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A secret planted where the default root hides it (root's home), removed
/// when the test ends.
struct PlantedSecret {
    path: PathBuf,
}

impl PlantedSecret {
    fn new(name: &str, content: &str) -> Option<PlantedSecret> {
        let path = PathBuf::from(format!("/root/.cordon-test-secret-{name}-{}", std::process::id()));
        if std::fs::write(&path, content).is_err() {
            eprintln!("skipping: cannot plant a secret in /root (the tests run as root)");
            return None;
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        Some(PlantedSecret { path })
    }

    fn path(&self) -> &str {
        self.path.to_str().unwrap()
    }
}

impl Drop for PlantedSecret {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

const SECRET: &str = "cordon-planted-secret-b41d";

#[test]
fn host_secrets_are_hidden_by_default() {
    require_kvm!();
    let Some(secret) = PlantedSecret::new("hidden", SECRET) else { return };
    let show = c_program("show_files", "static");
    let show = show.to_str().unwrap();
    let out = run(&[], show, &[secret.path(), "/etc/shadow", "/root"], &[], None);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(!text.contains(SECRET), "the planted secret was readable:\n{text}");
    assert!(text.contains(&format!("{}: No such file or directory", secret.path())), "{text}");
    assert!(text.contains("/etc/shadow: (empty)"), "/etc/shadow shows as /dev/null:\n{text}");
    // What hides a directory is an empty one.
    let ls = run(&[], "/bin/ls", &["-A", "/root", "/home", "/var/lib", "/run"], &[], None);
    assert_eq!(ls.status.code(), Some(0), "{}", String::from_utf8_lossy(&ls.stderr));
    assert_eq!(stdout(&ls), "/home:\n\n/root:\n\n/run:\n\n/var/lib:\n", "masked directories are empty");
}

#[test]
fn a_volume_shows_what_the_default_hides() {
    require_kvm!();
    let Some(secret) = PlantedSecret::new("volume", SECRET) else { return };
    let show = c_program("show_files", "static");
    let show = show.to_str().unwrap();
    let file_mount = format!("{}:/shared/secret:ro", secret.path());
    let out = run(&["-v", &file_mount, "-v", "/root:/root"], show, &["/shared/secret", secret.path()], &[], None);
    assert_eq!(
        stdout(&out),
        format!("/shared/secret: {SECRET}\n{}: {SECRET}\n", secret.path()),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn only_an_allow_list_of_the_environment_passes() {
    require_kvm!();
    let env = [
        ("AWS_SECRET_ACCESS_KEY", "cordon-test-aws-secret"),
        ("LC_TIME", "C"),
        ("TZ", "UTC"),
        ("HOME", "/home/cordon-test-user"),
    ];
    let out = run(&[], "/usr/bin/env", &[], &env, None);
    let text = stdout(&out);
    assert!(!text.contains("cordon-test-aws-secret"), "a credential in the environment passed:\n{text}");
    for line in ["LC_TIME=C", "TZ=UTC", "HOME=/home/cordon-test-user"] {
        assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
    }
    let names: Vec<&str> = text.lines().filter_map(|l| l.split('=').next()).collect();
    for n in &names {
        assert!(
            ["PATH", "LANG", "LANGUAGE", "TERM", "TZ", "HOME"].contains(n) || n.starts_with("LC_"),
            "{n} is not on the allow-list:\n{text}"
        );
    }
    // HOME exists inside, empty.
    let home = run(&[], "/bin/ls", &["-A", "/home/cordon-test-user"], &env, None);
    assert_eq!(
        (home.status.code(), stdout(&home).as_str()),
        (Some(0), ""),
        "{}",
        String::from_utf8_lossy(&home.stderr)
    );

    let all = stdout(&run(&["--env-all"], "/usr/bin/env", &[], &env, None));
    assert!(all.contains("AWS_SECRET_ACCESS_KEY=cordon-test-aws-secret"), "--env-all passes everything:\n{all}");
    let one = stdout(&run(&["-e", "AWS_SECRET_ACCESS_KEY", "-e", "X=1"], "/usr/bin/env", &[], &env, None));
    assert!(one.contains("AWS_SECRET_ACCESS_KEY=cordon-test-aws-secret"), "-e NAME passes the caller's:\n{one}");
    assert!(one.lines().any(|l| l == "X=1"), "{one}");
    let none = run(&["--env-clear"], "/usr/bin/env", &[], &env, None);
    assert_eq!((none.status.code(), stdout(&none).as_str()), (Some(0), ""), "--env-clear passes nothing");
}

#[test]
fn a_masked_working_directory_becomes_the_root() {
    require_kvm!();
    let out = run(&[], "/bin/pwd", &[], &[], Some(Path::new("/root")));
    assert_eq!(stdout(&out), "/\n", "{}", String::from_utf8_lossy(&out.stderr));
    let shared = run(&["-v", "/root:/root"], "/bin/pwd", &[], &[], Some(Path::new("/root")));
    assert_eq!(stdout(&shared), "/root\n", "{}", String::from_utf8_lossy(&shared.stderr));
}

/// A marker file outside the volume's source and a decoy of the same
/// name inside the sandbox root.
const MARKER: &str = "cordon-volume-marker-3c1e";

#[test]
fn nothing_below_a_volume_leads_out() {
    require_kvm!();
    let scratch = scratch_dir("volume-escape").canonicalize().unwrap();
    let (root, host) = (scratch.join("root"), scratch.join("host"));
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(host.join("deep")).unwrap();
    std::fs::write(scratch.join(MARKER), "OUTSIDE\n").unwrap();
    std::fs::write(root.join(MARKER), "decoy\n").unwrap();
    std::fs::write(host.join("inside"), "inside\n").unwrap();
    symlink(format!("../{MARKER}"), host.join("up")).unwrap();
    symlink(format!("../../{MARKER}"), host.join("deep/up")).unwrap();
    symlink(scratch.join(MARKER), host.join("abs")).unwrap();
    symlink("/", host.join("rootlink")).unwrap();
    let prog = root.join("prog");
    std::fs::copy(c_program("show_files", "static"), &prog).unwrap();
    let volume = format!("{}:/mnt/data", host.display());
    let file = format!("{}:/etc/one-file:ro", host.join("inside").display());
    let m = MARKER;
    let paths = [
        "/mnt/data/inside".to_string(),
        "/etc/one-file".to_string(),
        "/mnt/data/up".to_string(),
        "/mnt/data/deep/up".to_string(),
        "/mnt/data/abs".to_string(),
        format!("/mnt/data/../../{m}"),
        format!("/mnt/data/deep/../../../{m}"),
        format!("/mnt/data/rootlink/{m}"),
    ];
    let args: Vec<&str> = paths.iter().map(String::as_str).collect();
    let out =
        run(&["--rootfs", root.to_str().unwrap(), "-w", "/", "-v", &volume, "-v", &file], "/prog", &args, &[], None);
    let text = stdout(&out);
    assert!(!text.contains("OUTSIDE"), "a path led out of the volume:\n{text}");
    let abs = scratch.join(MARKER);
    let expected = format!(
        "/mnt/data/inside: inside
/etc/one-file: inside
/mnt/data/up: No such file or directory
/mnt/data/deep/up: No such file or directory
/mnt/data/abs: No such file or directory
/mnt/data/../../{m}: decoy
/mnt/data/deep/../../../{m}: decoy
/mnt/data/rootlink/{m}: decoy
"
    );
    assert_eq!(text, expected, "stderr: {}\n(abs link to {})", String::from_utf8_lossy(&out.stderr), abs.display());
}

#[test]
fn bad_volumes_are_one_line_errors() {
    require_kvm!();
    let dir = scratch_dir("bad-volumes");
    let d = dir.to_str().unwrap();
    let cases = [
        (format!("{d}/missing:/x"), "missing"),
        (format!("{d}:relative"), "absolute"),
        (format!("{d}:/x:zz"), "zz"),
        (format!("{d}:/"), "root"),
        (format!("{d}:/a/../b"), ".."),
        (d.to_string(), "HOST:SANDBOX"),
    ];
    for (spec, says) in cases {
        let out = run(&["-v", &spec], "/bin/true", &[], &[], None);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "-v {spec}: {err}");
        assert_eq!(err.lines().count(), 1, "-v {spec}: one line: {err}");
        assert!(err.starts_with("cordon: ") && err.contains(says), "-v {spec}: {err}");
    }
}

#[test]
fn home_is_slash_when_the_caller_has_none() {
    require_kvm!();
    for home in ["/", "relative"] {
        let out = run(&[], "/usr/bin/printenv", &["HOME"], &[("HOME", home)], None);
        assert_eq!(stdout(&out), "/\n", "HOME={home}: {}", String::from_utf8_lossy(&out.stderr));
    }
}
