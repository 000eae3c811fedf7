//! The overlay root: the sandbox may change any file of the root, the
//! changes live in sandbox memory, and the host's files never change.

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{VARIANTS, assert_same, c_program, finish_within, native, scratch_dir, spawn_cordon, spawn_cordon_with};

/// Far more than the test programs take: reaching it means a hang.
const HANG: Duration = Duration::from_secs(300);

/// The tree tests/c/overlay.c changes (see there).
fn prepared_tree(at: &Path) {
    std::fs::create_dir_all(at.join("dir/sub")).unwrap();
    std::fs::create_dir_all(at.join("full")).unwrap();
    std::fs::create_dir_all(at.join("big")).unwrap();
    let data: Vec<u8> = (0..10000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(at.join("data"), data).unwrap();
    std::fs::set_permissions(at.join("data"), std::fs::Permissions::from_mode(0o640)).unwrap();
    std::fs::write(at.join("keep"), b"keep me").unwrap();
    std::fs::write(at.join("gone"), b"gone").unwrap();
    std::fs::write(at.join("hard1"), b"hard").unwrap();
    std::fs::hard_link(at.join("hard1"), at.join("hard2")).unwrap();
    symlink("data", at.join("link")).unwrap();
    std::fs::write(at.join("dir/a"), b"a").unwrap();
    std::fs::write(at.join("dir/sub/deep"), b"deep").unwrap();
    std::fs::write(at.join("full/x"), b"x").unwrap();
    for i in 0..2000 {
        std::fs::write(at.join(format!("big/l{i}")), b"l").unwrap();
    }
}

/// Every name below `root` with its type, mode, size, modification time and
/// inode number: what a change on the host would show in.
fn snapshot(root: &Path) -> BTreeMap<PathBuf, (u32, u64, i64, i64, u64)> {
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            if m.is_dir() {
                todo.push(p.clone());
            }
            out.insert(p, (m.mode(), m.size(), m.mtime(), m.mtime_nsec(), m.ino()));
        }
    }
    let m = std::fs::metadata(root).unwrap();
    out.insert(root.to_path_buf(), (m.mode(), m.size(), m.mtime(), m.mtime_nsec(), m.ino()));
    out
}

#[test]
fn changes_to_the_root_stay_in_the_sandbox() {
    require_kvm!();
    let base = scratch_dir("overlay");
    for v in VARIANTS {
        let prog = c_program("overlay", v);
        let prog = prog.to_str().unwrap();
        // Natively on a copy of the tree, in the sandbox on the tree itself:
        // a directory of the host root, so the overlay's lower layer.
        let lower = base.join(format!("lower-{v}"));
        prepared_tree(&lower);
        let copy = base.join(format!("native-{v}"));
        let cp = Command::new("cp").arg("-a").arg(&lower).arg(&copy).status().unwrap();
        assert!(cp.success());
        let n = native(prog, &[copy.to_str().unwrap()], None);
        assert!(
            n.status.success(),
            "overlay-{v} fails natively, so the test itself is wrong:\n{}{}",
            String::from_utf8_lossy(&n.stdout),
            String::from_utf8_lossy(&n.stderr)
        );
        let before = snapshot(&lower);
        let s = finish_within(spawn_cordon(&[prog, lower.to_str().unwrap()]), HANG, &format!("overlay-{v}"));
        assert_same(&format!("overlay-{v}"), &s, &n);
        assert!(snapshot(&lower) == before, "overlay-{v}: the host tree changed");
    }
}

#[test]
fn the_root_mount_is_an_overlay_and_read_only_keeps_it_read_only() {
    require_kvm!();
    let dir = scratch_dir("overlay-ro");
    std::fs::write(dir.join("f"), b"host").unwrap();
    let f = dir.join("f");
    let script = format!(
        "grep ' / ' /proc/self/mounts; echo sandbox > {0} && cat {0}; mkdir {1}/made && echo made",
        f.display(),
        dir.display()
    );
    let out = finish_within(spawn_cordon(&["/bin/sh", "-c", &script]), HANG, "overlay root");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text, "overlay / overlay rw 0 0\nsandbox\nmade\n", "{}", String::from_utf8_lossy(&out.stderr));
    let out = finish_within(spawn_cordon_with(&["--read-only"], &["/bin/sh", "-c", &script]), HANG, "--read-only");
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(text.ends_with(" / hostfs ro 0 0\n"), "{text}{err}");
    assert_eq!(err.matches("Read-only file system").count(), 2, "{err}");
    assert_eq!(std::fs::read(&f).unwrap(), b"host");
    assert!(!dir.join("made").exists());
}

/// statfs of the root reports the sandbox's memory as the space free.
#[test]
fn free_space_is_the_sandbox_memory() {
    require_kvm!();
    let out = finish_within(
        spawn_cordon_with(&["--memory", "512M"], &["/bin/sh", "-c", "stat -f -c '%T %S %b %a' /"]),
        HANG,
        "statfs",
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let fields: Vec<&str> = text.split_whitespace().collect();
    assert_eq!(fields.len(), 4, "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(fields[0], "overlayfs");
    let bytes = fields[1].parse::<u64>().unwrap() * fields[2].parse::<u64>().unwrap();
    assert_eq!(bytes, 512 << 20);
    assert!(fields[3].parse::<u64>().unwrap() > 0);
}
