//! A program inside `--rootfs DIR` never reaches what lies outside DIR,
//! whatever path it takes: `..` at the root, symlinks pointing out, /proc's
//! magic links, directory descriptors, the working directory.

mod common;

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use common::{c_program, cordon, run_with, sandbox, scratch_dir};

/// A name no other file has.
const MARKER: &str = "cordon-escape-marker-7f3a9c";

/// Builds `<scratch>/root` holding the test program and the traps, with the
/// marker both outside (in `<scratch>`) and inside.
fn build_rootfs(name: &str) -> (PathBuf, PathBuf) {
    let scratch = scratch_dir(name).canonicalize().unwrap();
    let root = scratch.join("root");
    std::fs::create_dir_all(root.join("sub/deep")).unwrap();
    std::fs::create_dir_all(root.join("etc")).unwrap();
    std::fs::write(scratch.join(MARKER), "OUTSIDE the root\n").unwrap();
    std::fs::write(root.join(MARKER), "decoy inside\n").unwrap();
    std::fs::write(root.join("etc/passwd"), "decoy-passwd\n").unwrap();
    let prog = root.join("prog");
    std::fs::copy(c_program("escape", "static"), &prog).unwrap();
    std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
    let link = |target: &str, name: &str| symlink(target, root.join(name)).unwrap();
    link(&format!("/../../../{MARKER}"), "abs_out");
    link("/etc/passwd", "abs_etc");
    link(&format!("../../../../../../{MARKER}"), "rel_out");
    link(&format!("../../../../../../../../{MARKER}"), "sub/deep/rel_out");
    link("chain2", "chain1");
    link("sub/chain3", "chain2");
    link(&format!("../../../{MARKER}"), "sub/chain3");
    link("/", "rootlink");
    link("..", "sub/uplink");
    link("..", "parentlink");
    link(scratch.to_str().unwrap(), "hostlink");
    (scratch, root)
}

#[test]
fn nothing_outside_the_root_is_reachable() {
    require_kvm!();
    let (scratch, root) = build_rootfs("escape");
    let out =
        sandbox(&["--rootfs", root.to_str().unwrap(), "-w", "/"], "/prog", &[MARKER, scratch.to_str().unwrap()], None);
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stdout:\n{text}\nstderr:\n{err}");
    assert!(!text.contains("OUTSIDE"), "a path led out of the root:\n{text}");
    let m = MARKER;
    let expected = format!(
        "/{m}: decoy
/../{m}: decoy
/../../../../../../../../{m}: decoy
../../../../{m}: decoy
/./.././../{m}: decoy
/abs_out: decoy
/abs_etc: decoy-passwd
/rel_out: decoy
/sub/deep/rel_out: decoy
/chain1: decoy
/rootlink/../../{m}: decoy
/rootlink/rootlink/../{m}: decoy
/sub/uplink/../../{m}: decoy
/parentlink/{m}: decoy
/hostlink/{m}: No such file or directory
host path of the outside file: No such file or directory
readlink /abs_out: /../../../{m}
readlink /abs_etc: /etc/passwd
readlink /rel_out: ../../../../../../{m}
readlink /sub/deep/rel_out: ../../../../../../../../{m}
readlink /rootlink: /
readlink /hostlink: {scratch}
readlink /proc/self/root: /
readlink /proc/self/exe: /prog
/proc/self/root/../{m}: decoy
/proc/self/root/../../../{m}: decoy
/proc/1/root/../{m}: decoy
/proc/self/cwd/../../{m}: decoy
/proc/self/cwd/../../../../../{m}: decoy
/proc/self/fd/3/../../../{m}: decoy
openat(/, ../{m}): decoy
openat(/, ../../../../{m}): decoy
openat(/sub, ../../../{m}): decoy
openat(/sub, uplink/../../../{m}): decoy
openat(/, ..) is the root: yes
openat(/.., {m}): decoy
getcwd after chdir(/), chdir(..): /
getcwd after chdir up many levels: /
{m}: decoy
getcwd after fchdir(/sub) and 20 times chdir(..): /
getcwd after chdir(/rootlink/rootlink/..): /
getcwd after chdir(/proc/self/root/..): /
/.. is /: yes
ls /: . .. abs_etc abs_out chain1 chain2 {m} etc hostlink parentlink prog rel_out rootlink sub
ls /..: . .. abs_etc abs_out chain1 chain2 {m} etc hostlink parentlink prog rel_out rootlink sub
ls /rootlink/..: . .. abs_etc abs_out chain1 chain2 {m} etc hostlink parentlink prog rel_out rootlink sub
",
        scratch = scratch.display()
    );
    let got: String = text.lines().filter(|l| !l.contains(" checks, ")).map(|l| format!("{l}\n")).collect();
    assert_eq!(got, expected, "stderr:\n{err}");
}

fn one_line_failure(rootfs: &Path) {
    let mut cmd = std::process::Command::new(cordon());
    cmd.arg("run").arg("--rootfs").arg(rootfs).args(["--", "/prog"]);
    let out = run_with(cmd, None);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "--rootfs {} was accepted", rootfs.display());
    assert_eq!(err.lines().count(), 1, "one line of error: {err}");
    assert!(err.contains(rootfs.to_str().unwrap()) || err.contains("rootfs"), "names the problem: {err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn rootfs_must_be_a_directory() {
    require_kvm!();
    let (_scratch, root) = build_rootfs("escape-notdir");
    one_line_failure(&root.join("prog"));
    one_line_failure(&root.join("no-such-directory"));
}
