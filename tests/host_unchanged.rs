//! Nothing a sandboxed program does changes the host, except below a
//! directory the user mounted writable with `-v HOST:SANDBOX`.
//!
//! A host tree is snapshotted (every name, kind, mode, size, mtime, ctime,
//! symlink target and file content) before and after a sandbox run that
//! rewrites, truncates, appends to, deletes, renames, links, chmods and
//! touches files of it through the root's overlay, covers one of its
//! directories with `--tmpfs` and writes there, writes to `/tmp`, and
//! creates, edits, deletes and renames files in a `-v` target. Afterwards
//! only the `-v` target differs, only inside it, and it holds what the same
//! script leaves natively in a copy of it. What the program sees during the
//! run is compared with the same script run natively on copies of the trees.
//!
//! A `-v HOST:SANDBOX:ro` mount refuses every kind of write with EROFS and
//! leaves its host directory as it was.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::{cordon, finish_within, scratch_dir};

/// Far more than these runs take: reaching it means a hang.
const HANG: Duration = Duration::from_secs(300);

/// One entry of a snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    kind: &'static str,
    mode: u32,
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
    /// A symlink's target, or a regular file's bytes.
    content: Vec<u8>,
}

type Snapshot = BTreeMap<PathBuf, Entry>;

/// Every entry below `root` (and `root` itself, as ""), without following
/// symlinks.
fn snapshot(root: &Path) -> Snapshot {
    fn walk(root: &Path, rel: &Path, out: &mut Snapshot) {
        let path = root.join(rel);
        let md = std::fs::symlink_metadata(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let ft = md.file_type();
        let (kind, content) = if ft.is_symlink() {
            ("symlink", std::fs::read_link(&path).expect("readlink").into_os_string().into_encoded_bytes())
        } else if ft.is_file() {
            ("file", std::fs::read(&path).expect("read"))
        } else if ft.is_dir() {
            ("dir", Vec::new())
        } else {
            ("other", Vec::new())
        };
        out.insert(
            rel.to_path_buf(),
            Entry {
                kind,
                mode: md.mode(),
                size: md.size(),
                mtime_ns: md.mtime() as i128 * 1_000_000_000 + md.mtime_nsec() as i128,
                ctime_ns: md.ctime() as i128 * 1_000_000_000 + md.ctime_nsec() as i128,
                content,
            },
        );
        if ft.is_dir() {
            let mut names: Vec<_> =
                std::fs::read_dir(&path).expect("read_dir").map(|e| e.expect("entry").file_name()).collect();
            names.sort();
            for name in names {
                walk(root, &rel.join(name), out);
            }
        }
    }
    let mut out = Snapshot::new();
    walk(root, Path::new(""), &mut out);
    out
}

/// What differs between two snapshots, one line per path.
fn changes(before: &Snapshot, after: &Snapshot) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    for (path, b) in before {
        match after.get(path) {
            None => {
                out.insert(path.clone(), "removed".to_string());
            }
            Some(a) if a != b => {
                let mut what = Vec::new();
                if a.kind != b.kind {
                    what.push(format!("kind {} -> {}", b.kind, a.kind));
                }
                if a.mode != b.mode {
                    what.push(format!("mode {:o} -> {:o}", b.mode, a.mode));
                }
                if a.size != b.size {
                    what.push(format!("size {} -> {}", b.size, a.size));
                }
                if a.mtime_ns != b.mtime_ns {
                    what.push("mtime".to_string());
                }
                if a.ctime_ns != b.ctime_ns {
                    what.push("ctime".to_string());
                }
                if a.content != b.content {
                    what.push("content".to_string());
                }
                out.insert(path.clone(), format!("changed: {}", what.join(", ")));
            }
            Some(_) => {}
        }
    }
    for path in after.keys().filter(|p| !before.contains_key(*p)) {
        out.insert(path.clone(), "added".to_string());
    }
    out
}

fn describe(changes: &BTreeMap<PathBuf, String>) -> String {
    changes.iter().map(|(p, c)| format!("  {}: {c}\n", p.display())).collect()
}

fn write(path: &Path, text: &str) {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    }
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// The host tree the sandbox writes over through its overlay.
fn make_tree(tree: &Path) {
    for (name, text) in [
        ("keep.txt", "kept as it is\n"),
        ("rewrite.txt", "the original text\n"),
        ("delete.txt", "to be deleted\n"),
        ("rename-from.txt", "to be renamed\n"),
        ("append.txt", "first line\n"),
        ("truncate.txt", "to be emptied\n"),
        ("perms.txt", "mode 644\n"),
        ("touched.txt", "to get an old date\n"),
        ("edited-in-place.txt", "sed will rewrite this line\n"),
        ("sub/nested.txt", "in a directory that is renamed\n"),
        ("sub/deep/leaf.txt", "deep down\n"),
        ("dir-to-remove/a", "a\n"),
        ("dir-to-remove/b/c", "c\n"),
        ("tmpfs-here/hidden.txt", "covered by the tmpfs\n"),
    ] {
        write(&tree.join(name), text);
    }
    std::os::unix::fs::symlink("keep.txt", tree.join("link")).expect("symlink");
    std::fs::set_permissions(tree.join("perms.txt"), std::fs::Permissions::from_mode(0o644)).expect("chmod");
}

/// The `-v` target.
fn make_volume(vol: &Path) {
    for (name, text) in [
        ("edit.txt", "before the edit\n"),
        ("remove.txt", "to be removed\n"),
        ("rename-from.txt", "to be renamed\n"),
        ("untouched.txt", "left alone\n"),
        ("sub/inner.txt", "inside the volume\n"),
    ] {
        write(&vol.join(name), text);
    }
}

/// Run as `sh -c SCRIPT sh TREE VOL TMPFILE`: changes TREE (through the
/// overlay in the sandbox) and its tmpfs-here, VOL (a `-v` target in the
/// sandbox), and TMPFILE (in /tmp in the sandbox), and prints what it sees,
/// relative to those places.
const SCRIPT: &str = r#"
set -eu
tree=$1 vol=$2 tmpfile=$3
cd "$tree"
echo rewritten > rewrite.txt
rm delete.txt
mv rename-from.txt renamed.txt
echo 'second line' >> append.txt
truncate -s 0 truncate.txt
chmod 600 perms.txt
touch -d '2001-02-03 04:05:06 UTC' touched.txt
sed -i 's/will rewrite/rewrote/' edited-in-place.txt
chown "$(id -u):$(id -g)" keep.txt
ln keep.txt hardlink.txt
ln -sfn renamed.txt link
echo new > sub/new.txt
mv sub sub-renamed
rm -r dir-to-remove
mkdir made-dir
echo inside > made-dir/file.txt
echo 'in the tmpfs' > tmpfs-here/file.txt
echo 'in /tmp' > "$tmpfile"
umask 027
echo created > "$vol/new.txt"
echo 'after the edit' >> "$vol/edit.txt"
rm "$vol/remove.txt"
mv "$vol/rename-from.txt" "$vol/renamed.txt"
mkdir "$vol/newdir"
echo inner > "$vol/newdir/file.txt"
echo "== tree"
find . -path ./tmpfs-here -prune -o -printf '%p %y %m %s %l\n' | awk '$2 == "d" { $4 = "-" } 1' | sort
find . -path ./tmpfs-here -prune -o -type f -print | sort | xargs sha256sum
echo "== tmpfs-here"
ls -A tmpfs-here
cat tmpfs-here/file.txt
echo "== tmp"
cat "$tmpfile"
echo "== vol"
cd "$vol"
find . -printf '%p %y %m %s %l\n' | awk '$2 == "d" { $4 = "-" } 1' | sort
find . -type f | sort | xargs sha256sum
"#;

fn run(cmd: &mut Command, what: &str) -> Output {
    let child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
    finish_within(child, HANG, what)
}

fn copy_tree(from: &Path, to: &Path) {
    let st = Command::new("cp").arg("-a").arg(from).arg(to).status().expect("run cp");
    assert!(st.success(), "cp -a {} {}", from.display(), to.display());
}

#[test]
fn only_the_writable_bind_mount_changes_on_the_host() {
    require_kvm!();
    let base = scratch_dir("host-unchanged");
    let (tree, vol, ro, beside) = (base.join("tree"), base.join("vol"), base.join("ro"), base.join("beside.txt"));
    make_tree(&tree);
    make_volume(&vol);
    write(&ro.join("keep.txt"), "read-only\n");
    write(&beside, "next to the volume\n");

    // The same script natively, on copies: the tmpfs is an empty directory
    // there, and the /tmp file a file of the copy.
    let reference = scratch_dir("host-unchanged-native");
    let (ref_tree, ref_vol) = (reference.join("tree"), reference.join("vol"));
    copy_tree(&tree, &ref_tree);
    copy_tree(&vol, &ref_vol);
    std::fs::remove_file(ref_tree.join("tmpfs-here/hidden.txt")).expect("empty the tmpfs stand-in");
    let n = run(
        Command::new("/bin/sh").args(["-c", SCRIPT, "sh"]).arg(&ref_tree).arg(&ref_vol).arg(reference.join("tmpfile")),
        "the script natively",
    );
    assert!(
        n.status.success(),
        "the script fails natively, so the test is wrong:\n{}{}",
        String::from_utf8_lossy(&n.stdout),
        String::from_utf8_lossy(&n.stderr)
    );

    // A name of its own, to tell whether it reached the host's /tmp.
    let tmp_file = format!("/tmp/cordon-host-unchanged-{}.txt", std::process::id());
    let _ = std::fs::remove_file(&tmp_file);
    let before = snapshot(&base);
    let s = run(
        Command::new(cordon())
            .arg("run")
            .arg("--tmpfs")
            .arg(tree.join("tmpfs-here"))
            .arg("-v")
            .arg(format!("{}:/mnt/vol", vol.display()))
            .arg("-v")
            .arg(format!("{}:/mnt/ro:ro", ro.display()))
            .args(["--", "/bin/sh", "-c", SCRIPT, "sh"])
            .arg(&tree)
            .arg("/mnt/vol")
            .arg(&tmp_file),
        "the script in the sandbox",
    );
    let after = snapshot(&base);

    let stderr = String::from_utf8_lossy(&s.stderr);
    assert_eq!(
        s.status.code(),
        Some(0),
        "the script failed in the sandbox; stdout:\n{}\nstderr:\n{stderr}",
        String::from_utf8_lossy(&s.stdout)
    );
    assert_eq!(
        String::from_utf8_lossy(&s.stdout),
        String::from_utf8_lossy(&n.stdout),
        "what the script saw in the sandbox differs from what it saw natively; sandbox stderr:\n{stderr}"
    );

    // Only the volume and what is inside it changed on the host.
    let changed = changes(&before, &after);
    let outside: BTreeMap<PathBuf, String> =
        changed.iter().filter(|(p, _)| !p.starts_with("vol")).map(|(p, c)| (p.clone(), c.clone())).collect();
    assert!(outside.is_empty(), "the sandbox changed the host outside its -v target:\n{}", describe(&outside));
    let expected: BTreeSet<PathBuf> = [
        "vol",
        "vol/edit.txt",
        "vol/new.txt",
        "vol/remove.txt",
        "vol/rename-from.txt",
        "vol/renamed.txt",
        "vol/newdir",
    ]
    .iter()
    .chain(&["vol/newdir/file.txt"])
    .map(PathBuf::from)
    .collect();
    let inside: BTreeSet<PathBuf> = changed.keys().cloned().collect();
    assert_eq!(
        inside,
        expected,
        "the -v target's changes on the host are not the ones the script made:\n{}",
        describe(&changed)
    );

    // And they are what the script leaves natively: names, kinds, modes
    // (the umask applied), sizes and contents.
    let strip = |s: Snapshot| -> BTreeMap<PathBuf, (&'static str, u32, u64, Vec<u8>)> {
        s.into_iter()
            .filter(|(p, _)| !p.as_os_str().is_empty())
            .map(|(p, e)| (p, (e.kind, e.mode, if e.kind == "dir" { 0 } else { e.size }, e.content)))
            .collect()
    };
    let (host_vol, native_vol) = (strip(snapshot(&vol)), strip(snapshot(&ref_vol)));
    assert!(
        host_vol == native_vol,
        "the -v target on the host differs from what the script leaves natively:\nhost:   {:?}\nnative: {:?}",
        host_vol.iter().map(|(p, (k, m, s, _))| format!("{} {k} {m:o} {s}", p.display())).collect::<Vec<_>>(),
        native_vol.iter().map(|(p, (k, m, s, _))| format!("{} {k} {m:o} {s}", p.display())).collect::<Vec<_>>(),
    );
    assert!(!Path::new(&tmp_file).exists(), "the sandbox's /tmp file {tmp_file} appeared in the host's /tmp");
}

/// Each write a program can try on a read-only bind mount. Linux answers
/// every one with EROFS on a bind mount remounted read-only (`mount -o
/// remount,bind,ro`), which the expectation below was checked against.
const READ_ONLY_SCRIPT: &str = r#"
import errno, os, sys
os.chdir(sys.argv[1])
print("read:", open("keep.txt").read(), end="")
tries = [
    ("create", lambda: os.open("new.txt", os.O_CREAT | os.O_WRONLY, 0o644)),
    ("open for writing", lambda: os.open("keep.txt", os.O_WRONLY)),
    ("open for appending", lambda: os.open("keep.txt", os.O_RDWR | os.O_APPEND)),
    ("open with O_TRUNC", lambda: os.open("keep.txt", os.O_RDONLY | os.O_TRUNC)),
    ("truncate", lambda: os.truncate("keep.txt", 0)),
    ("unlink", lambda: os.unlink("keep.txt")),
    ("rename", lambda: os.rename("keep.txt", "renamed.txt")),
    ("mkdir", lambda: os.mkdir("newdir")),
    ("rmdir", lambda: os.rmdir("emptydir")),
    ("chmod", lambda: os.chmod("keep.txt", 0o600)),
    ("utime", lambda: os.utime("keep.txt", (0, 0))),
    ("symlink", lambda: os.symlink("keep.txt", "link")),
    ("link", lambda: os.link("keep.txt", "hardlink")),
    ("mkfifo", lambda: os.mkfifo("fifo")),
]
for name, f in tries:
    try:
        f()
        print(f"{name}: allowed")
    except OSError as e:
        print(f"{name}: {errno.errorcode[e.errno]}")
print("listing:", sorted(os.listdir(".")))
"#;

#[test]
fn read_only_bind_mount_refuses_writes() {
    require_kvm!();
    let ro = scratch_dir("host-unchanged-ro");
    write(&ro.join("keep.txt"), "read-only\n");
    std::fs::create_dir(ro.join("emptydir")).expect("mkdir");
    let before = snapshot(&ro);
    let s = run(
        Command::new(cordon()).arg("run").arg("-v").arg(format!("{}:/mnt/ro:ro", ro.display())).args([
            "--",
            "/usr/bin/python3",
            "-c",
            READ_ONLY_SCRIPT,
            "/mnt/ro",
        ]),
        "writes to a read-only mount",
    );
    let after = snapshot(&ro);
    let expected = "read: read-only\n\
        create: EROFS\n\
        open for writing: EROFS\n\
        open for appending: EROFS\n\
        open with O_TRUNC: EROFS\n\
        truncate: EROFS\n\
        unlink: EROFS\n\
        rename: EROFS\n\
        mkdir: EROFS\n\
        rmdir: EROFS\n\
        chmod: EROFS\n\
        utime: EROFS\n\
        symlink: EROFS\n\
        link: EROFS\n\
        mkfifo: EROFS\n\
        listing: ['emptydir', 'keep.txt']\n";
    let stderr = String::from_utf8_lossy(&s.stderr);
    assert_eq!(s.status.code(), Some(0), "exit status; stderr:\n{stderr}");
    assert_eq!(String::from_utf8_lossy(&s.stdout), expected, "what the program got; stderr:\n{stderr}");
    let changed = changes(&before, &after);
    assert!(changed.is_empty(), "the read-only mount's host directory changed:\n{}", describe(&changed));
}
