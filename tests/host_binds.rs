//! Host directories and files mounted with `-v`: writable by default, so a
//! program changes the host there as it would natively; read-only with
//! `:ro`; and however a program climbs, links or races, nothing of the host
//! outside the mounted directory is read or written.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::{VARIANTS, assert_same, c_program, native, sandbox, scratch_dir};

/// What a tree holds, one line per entry in name order: type, mode, owner,
/// links, size, content or link target, and with `times` the modification
/// time. The tree's top itself is left out (its times move when it is
/// looked at from another mount).
fn snapshot(top: &Path, times: bool) -> Vec<String> {
    fn walk(top: &Path, dir: &Path, times: bool, out: &mut Vec<String>) {
        let mut names: Vec<PathBuf> =
            std::fs::read_dir(dir).expect("read_dir").map(|e| e.expect("entry").path()).collect();
        names.sort();
        for p in names {
            let m = std::fs::symlink_metadata(&p).expect("lstat");
            let rel = p.strip_prefix(top).expect("below top").display().to_string();
            let ft = m.file_type();
            let what = if ft.is_symlink() {
                format!("-> {}", std::fs::read_link(&p).expect("readlink").display())
            } else if ft.is_file() {
                format!("{:?}", String::from_utf8_lossy(&std::fs::read(&p).unwrap_or_default()))
            } else {
                String::new()
            };
            let size = if ft.is_dir() { 0 } else { m.size() };
            let mut line =
                format!("{rel} {:o} {}:{} nlink={} size={size} {what}", m.mode(), m.uid(), m.gid(), m.nlink());
            if times && !ft.is_dir() {
                line += &format!(" mtime={}.{}", m.mtime(), m.mtime_nsec());
            }
            out.push(line);
            if ft.is_dir() {
                walk(top, &p, times, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(top, top, times, &mut out);
    out
}

/// A directory holding "existing", as bind_writes.c expects.
fn starting_tree(dir: &Path) {
    std::fs::create_dir_all(dir).expect("mkdir");
    std::fs::write(dir.join("existing"), "old contents\n").expect("write");
}

fn text(out: &std::process::Output) -> String {
    format!("stdout:\n{}\nstderr:\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// Creating, writing, appending, truncating, renaming, linking, removing,
/// chmod, utimensat, FIFOs and xattrs in a `-v` directory: the program sees
/// what it sees natively, and the host tree is left as the native run left
/// its own copy.
#[test]
fn a_writable_bind_changes_the_host_as_a_native_run_does() {
    require_kvm!();
    let scratch = scratch_dir("bind-writes").canonicalize().unwrap();
    for v in VARIANTS {
        let prog = c_program("bind_writes", v);
        let prog = prog.to_str().expect("utf-8 path");
        let native_dir = scratch.join(format!("native-{v}"));
        let bound_dir = scratch.join(format!("bound-{v}"));
        starting_tree(&native_dir);
        starting_tree(&bound_dir);
        let n = native(prog, &[native_dir.to_str().unwrap()], None);
        assert!(n.status.success(), "bind_writes-{v} fails natively, so the test is wrong:\n{}", text(&n));
        let volume = format!("{}:/data", bound_dir.display());
        let s = sandbox(&["-v", &volume], prog, &["/data"], None);
        assert_same(&format!("bind_writes-{v}"), &s, &n);
        assert_eq!(snapshot(&bound_dir, false), snapshot(&native_dir, false), "bind_writes-{v}: the trees differ");
    }
}

/// The same as a user who is not root: the sentry keeps that user's
/// identity and writes where it could, and a file made with a mode that
/// denies writing is still written through the descriptor that made it.
#[test]
fn a_writable_bind_of_a_user_who_is_not_root_changes_the_host_as_natively() {
    use std::os::unix::process::CommandExt;
    require_kvm!();
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipping: making a KVM device node for another user needs root");
        return;
    }
    const NOBODY: u32 = 65534;
    let scratch = scratch_dir("bind-writes-nobody").canonicalize().unwrap();
    std::fs::set_permissions(&scratch, std::fs::Permissions::from_mode(0o755)).unwrap();
    let kvm = common::kvm_node_for(&scratch, NOBODY);
    let as_nobody = |mut cmd: std::process::Command| {
        cmd.uid(NOBODY).gid(NOBODY).current_dir("/");
        common::run_with(cmd, None)
    };
    for v in VARIANTS {
        let prog = c_program("bind_writes", v);
        let native_dir = scratch.join(format!("native-{v}"));
        let bound_dir = scratch.join(format!("bound-{v}"));
        for dir in [&native_dir, &bound_dir] {
            starting_tree(dir);
            for p in [dir.clone(), dir.join("existing")] {
                std::os::unix::fs::chown(&p, Some(NOBODY), Some(NOBODY)).unwrap();
            }
        }
        let mut cmd = std::process::Command::new(&prog);
        cmd.arg(&native_dir);
        let n = as_nobody(cmd);
        assert!(n.status.success(), "bind_writes-{v} fails natively as nobody, so the test is wrong:\n{}", text(&n));
        let mut cmd = std::process::Command::new(common::cordon());
        cmd.arg("run").arg("--kvm-device").arg(&kvm).arg("-v").arg(format!("{}:/data", bound_dir.display()));
        cmd.arg("--").arg(&prog).arg("/data");
        let s = as_nobody(cmd);
        assert_same(&format!("bind_writes-{v} as nobody"), &s, &n);
        assert_eq!(snapshot(&bound_dir, false), snapshot(&native_dir, false), "bind_writes-{v}: the trees differ");
    }
}

/// `:ro` refuses every change with EROFS, and the host is untouched.
#[test]
fn a_read_only_bind_refuses_changes() {
    require_kvm!();
    let scratch = scratch_dir("bind-ro").canonicalize().unwrap();
    let dir = scratch.join("src");
    starting_tree(&dir);
    std::fs::create_dir(dir.join("sub")).unwrap();
    let before = snapshot(&dir, true);
    let script = r#"
        try() { out=$("$@" 2>&1); case "$out" in *"Read-only file system"*) echo "$*: EROFS";; *) echo "$*: $out";; esac; }
        try sh -c 'echo x > /r/new'
        try sh -c 'echo x >> /r/existing'
        try mkdir /r/d
        try rmdir /r/sub
        try rm /r/existing
        try mv /r/existing /r/moved
        try chmod 600 /r/existing
        try ln -s existing /r/link
        try ln /r/existing /r/hard
        try touch /r/existing
        try truncate -s 0 /r/existing
        cat /r/existing
    "#;
    let volume = format!("{}:/r:ro", dir.display());
    let out = sandbox(&["-v", &volume], "/bin/sh", &["-c", script], None);
    let expected = "sh -c echo x > /r/new: EROFS
sh -c echo x >> /r/existing: EROFS
mkdir /r/d: EROFS
rmdir /r/sub: EROFS
rm /r/existing: EROFS
mv /r/existing /r/moved: EROFS
chmod 600 /r/existing: EROFS
ln -s existing /r/link: EROFS
ln /r/existing /r/hard: EROFS
touch /r/existing: EROFS
truncate -s 0 /r/existing: EROFS
old contents
";
    assert_eq!(String::from_utf8_lossy(&out.stdout), expected, "{}", text(&out));
    assert_eq!(snapshot(&dir, true), before, "a read-only bind changed the host");
}

/// A single host file mounted with `-v` is writable in place; the mount
/// point itself cannot be removed or renamed (EBUSY), as in Linux (in a
/// writable directory, /tmp: a read-only one says EROFS first).
#[test]
fn a_bound_file_is_writable() {
    require_kvm!();
    let scratch = scratch_dir("bind-file").canonicalize().unwrap();
    let file = scratch.join("notes");
    std::fs::write(&file, "first\n").unwrap();
    let script = "echo second >> /tmp/notes; cat /tmp/notes; rm /tmp/notes; mv /tmp/notes /tmp/moved;
        printf replaced > /tmp/notes; cat /tmp/notes";
    let volume = format!("{}:/tmp/notes", file.display());
    let out = sandbox(&["-v", &volume], "/bin/sh", &["-c", script], None);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout, "first\nsecond\nreplaced", "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.matches("Device or resource busy").count(), 2, "{}", text(&out));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "replaced");
}

/// What a program writes through a shared mapping of a bound file
/// reaches the host file: by msync, and by munmap without one.
#[test]
fn writes_through_a_shared_mapping_reach_the_host_file() {
    require_kvm!();
    let scratch = scratch_dir("bind-mmap").canonicalize().unwrap();
    for v in VARIANTS {
        let prog = c_program("bind_mmap", v);
        let prog = prog.to_str().expect("utf-8 path");
        let (native_dir, bound_dir) = (scratch.join(format!("native-{v}")), scratch.join(format!("bound-{v}")));
        for d in [&native_dir, &bound_dir] {
            std::fs::create_dir_all(d).unwrap();
            for f in ["a", "b"] {
                std::fs::write(d.join(f), "0123456789\n").unwrap();
            }
        }
        let n = native(prog, &[native_dir.to_str().unwrap()], None);
        let volume = format!("{}:/data", bound_dir.display());
        let s = sandbox(&["-v", &volume], prog, &["/data"], None);
        assert_same(&format!("bind_mmap-{v}"), &s, &n);
        for f in ["a", "b"] {
            let (host, native) = (
                std::fs::read_to_string(bound_dir.join(f)).unwrap(),
                std::fs::read_to_string(native_dir.join(f)).unwrap(),
            );
            assert_eq!(host, native, "bind_mmap-{v}: {f} on the host");
        }
    }
}

/// A name no other file has.
const MARKER: &str = "cordon-bind-escape-marker-51c2";

/// `<scratch>/root` (the sandbox root, with the test program and a decoy
/// marker), `<scratch>/src` (mounted at /b, with its own marker and the
/// traps), and outside both the real marker and an empty `victim`
/// directory.
fn escape_layout(name: &str) -> (PathBuf, PathBuf, PathBuf) {
    let scratch = scratch_dir(name).canonicalize().unwrap();
    let root = scratch.join("root");
    let src = scratch.join("src");
    std::fs::create_dir_all(root.join("b")).unwrap();
    std::fs::create_dir_all(root.join("tmp")).unwrap();
    std::fs::create_dir_all(src.join("sub/deep")).unwrap();
    std::fs::create_dir_all(src.join("race/x")).unwrap();
    std::fs::create_dir_all(scratch.join("victim")).unwrap();
    std::fs::write(scratch.join(MARKER), "OUTSIDE the bind\n").unwrap();
    std::fs::write(root.join(MARKER), "decoy in the root\n").unwrap();
    std::fs::write(src.join(MARKER), "inside the bind\n").unwrap();
    std::fs::write(src.join("race/x").join(MARKER), "inside the bind\n").unwrap();
    let prog = root.join("prog");
    std::fs::copy(c_program("bind_escape", "static"), &prog).unwrap();
    std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
    let link = |target: &str, name: &str| symlink(target, src.join(name)).unwrap();
    let host = scratch.display().to_string();
    link(&format!("/../../{MARKER}"), "abs_out");
    link(&format!("../../../../{MARKER}"), "rel_out");
    link(&format!("../../../../../../{MARKER}"), "sub/deep/rel_out");
    link("..", "up");
    link("../..", "dir_out");
    link(&host, "hostlink");
    link(&format!("{host}/victim/created"), "w_abs");
    link("../../victim/created", "w_rel");
    link("../../../..", "race/y");
    link(&host, "race/z");
    (scratch, root, src)
}

/// Every trick of tests/path_escape.rs, from inside a writable bind mount,
/// reading and writing, with the host swapping a name between a directory
/// and symlinks pointing out while the program looks it up: the host
/// outside the bind's source is neither read nor changed.
#[test]
fn nothing_outside_a_writable_bind_is_reached() {
    require_kvm!();
    let (scratch, root, src) = escape_layout("bind-escape");
    let outside = |scratch: &Path| -> Vec<String> {
        let mut all = snapshot(scratch, true);
        all.retain(|l| !l.starts_with("src"));
        all
    };
    let before = outside(&scratch);

    // The racer: on the host, `race/x` trades places with a symlink
    // climbing out and one naming the host directory, over and over, until
    // the sandbox is done.
    let stop = Arc::new(AtomicBool::new(false));
    let racer = {
        let stop = stop.clone();
        let race = src.join("race");
        std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for other in ["y", "z"] {
                    rustix::fs::renameat_with(
                        rustix::fs::CWD,
                        race.join("x"),
                        rustix::fs::CWD,
                        race.join(other),
                        rustix::fs::RenameFlags::EXCHANGE,
                    )
                    .expect("renameat2");
                    swaps += 1;
                }
            }
            swaps
        })
    };
    let out = sandbox(
        &["--rootfs", root.to_str().unwrap(), "-v", &format!("{}:/b", src.display()), "-w", "/"],
        "/prog",
        &[MARKER, scratch.to_str().unwrap()],
        None,
    );
    stop.store(true, Ordering::Relaxed);
    racer.join().expect("racer");

    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(!stdout.contains("OUTSIDE"), "a path led out of the bind:\n{stdout}");
    let m = MARKER;
    let expected = format!(
        "/b/{m}: inside
/b/../{m}: decoy
/b/../../../../{m}: decoy
/b/sub/../../{m}: decoy
/b/sub/deep/../../../../../../{m}: decoy
/b/abs_out: decoy
/b/rel_out: decoy
/b/sub/deep/rel_out: decoy
/b/up/{m}: decoy
/b/up/b/up/../{m}: decoy
/b/dir_out/{m}: decoy
/b/hostlink/MARKER: No such file or directory
host path of the outside file: No such file or directory
openat(/b, ../MARKER): decoy
openat(/b/sub, ../../../../MARKER): decoy
/proc/self/fd/SUB/../MARKER: inside
/proc/self/fd/SUB/../../MARKER: decoy
/proc/self/fd/B/../../../../MARKER: decoy
getcwd after climbing from /b/sub/deep: /
MARKER from there: decoy
getcwd after fchdir(/b/sub) and ../../..: /
create through /b/w_abs: No such file or directory
create through /b/w_rel: No such file or directory
create at the host path of the outside directory: No such file or directory
mkdir /b/hostlink/victim/x: No such file or directory
symlink /b/hostlink/victim/l: No such file or directory
rename /b/sub to /tmp/sub: Invalid cross-device link
rename /b/sub to /b/../escaped: Invalid cross-device link
link /b/MARKER to /tmp/linked: Invalid cross-device link
rename /b/MARKER to /b/up/tmp/moved: Invalid cross-device link
racing lookups reached the outside: no
"
    );
    let got: String = stdout.lines().filter(|l| !l.contains(" checks, ")).map(|l| format!("{l}\n")).collect();
    assert_eq!(got, expected, "stderr:\n{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(outside(&scratch), before, "the host changed outside the bind's source");
    assert_eq!(std::fs::read_dir(scratch.join("victim")).unwrap().count(), 0);
}
