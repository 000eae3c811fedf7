//! Programs of the host, run in the sandbox: output and exit status must be
//! what they are natively.

mod common;

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::process::Output;

use common::{assert_same, native, sandbox, scratch_dir};

/// Runs `program args` both ways with `stdin` and compares.
fn same(program: &str, args: &[&str], stdin: Option<&[u8]>) -> Output {
    let n = native(program, args, stdin);
    let s = sandbox(&[], program, args, stdin);
    assert_same(&format!("{program} {args:?}"), &s, &n);
    s
}

#[test]
fn echo() {
    require_kvm!();
    let out = same("/bin/echo", &["hello", "from", "the sandbox", "-n"], None);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hello from the sandbox -n\n");
    same("/bin/echo", &["-n", "no newline"], None);
}

#[test]
fn cat_a_file() {
    require_kvm!();
    let d = scratch_dir("cat");
    let f = d.join("text");
    let text: String = (0..2000).map(|i| format!("line {i}: {}\n", "x".repeat(i % 90))).collect();
    std::fs::write(&f, &text).unwrap();
    let out = same("/bin/cat", &[f.to_str().unwrap()], None);
    assert_eq!(out.stdout, text.as_bytes());
    let out = same("/bin/cat", &[f.to_str().unwrap(), "/no/such/file"], None);
    assert_eq!(out.status.code(), Some(1));
}

/// Names in / the sandbox answers differently by design: its own mounts,
/// and the directories the default root masks.
const OWN_MOUNTS: [&str; 7] = ["dev", "proc", "sys", "home", "root", "run", "tmp"];

/// `ls -la /` without the lines of [`OWN_MOUNTS`], and `total`, which
/// sums them. The columns are aligned to the widest value, which may be
/// on those lines, so runs of blanks count as one.
fn listing_without_own_mounts(out: &[u8]) -> String {
    String::from_utf8_lossy(out)
        .lines()
        .filter(|l| !l.starts_with("total "))
        .filter(|l| {
            let name = l.split_whitespace().last().unwrap_or("");
            !OWN_MOUNTS.contains(&name)
        })
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" ") + "\n")
        .collect()
}

#[test]
fn ls_la_root() {
    require_kvm!();
    let n = native("/bin/ls", &["-la", "/"], None);
    let s = sandbox(&[], "/bin/ls", &["-la", "/"], None);
    assert_eq!(s.status.code(), n.status.code(), "{}", String::from_utf8_lossy(&s.stderr));
    let (sl, nl) = (listing_without_own_mounts(&s.stdout), listing_without_own_mounts(&n.stdout));
    assert!(nl.lines().count() > 5, "native listing: {nl}");
    assert_eq!(sl, nl);
    let text = String::from_utf8_lossy(&s.stdout);
    for name in OWN_MOUNTS {
        assert!(text.lines().any(|l| l.ends_with(&format!(" {name}"))), "{name} is listed:\n{text}");
    }
}

#[test]
fn sha256sum_of_50_megabytes() {
    require_kvm!();
    let d = scratch_dir("sha");
    let f = d.join("big");
    let mut w = std::io::BufWriter::new(std::fs::File::create(&f).unwrap());
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut block = vec![0u8; 1 << 20];
    for _ in 0..50 {
        for b in block.chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b.copy_from_slice(&x.to_le_bytes());
        }
        w.write_all(&block).unwrap();
    }
    drop(w);
    let out = same("/usr/bin/sha256sum", &[f.to_str().unwrap()], None);
    assert_eq!(out.stdout.len(), 64 + 2 + f.to_str().unwrap().len() + 1);
}

#[test]
fn sort_and_wc_on_piped_stdin() {
    require_kvm!();
    let input: String = (0..5000).map(|i| format!("{}\n", (i * 7919) % 5003)).collect();
    let out = same("/usr/bin/sort", &["-n"], Some(input.as_bytes()));
    assert_eq!(out.stdout.iter().filter(|b| **b == b'\n').count(), 5000);
    same("/usr/bin/sort", &["-r", "-u"], Some(b"b\na\nc\na\n"));
    let out = same("/usr/bin/wc", &[], Some(input.as_bytes()));
    assert!(String::from_utf8_lossy(&out.stdout).contains("5000"));
    same("/usr/bin/wc", &["-c", "-l"], Some(b""));
}

#[test]
fn python() {
    require_kvm!();
    // /usr/bin/python3 itself: `python3` on PATH may be a wrapper script
    // that needs fork.
    let code = r#"import json, hashlib, os; print(json.dumps(sorted(os.listdir("/etc"))[:5]), hashlib.sha256(b"x").hexdigest())"#;
    let out = same("/usr/bin/python3", &["-c", code], None);
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881")
    );
    let out = same("/usr/bin/python3", &["-c", "import sys; sys.exit(3)"], None);
    assert_eq!(out.status.code(), Some(3));
}

#[test]
fn shebang_script_with_an_argument() {
    require_kvm!();
    let d = scratch_dir("shebang");
    let script = d.join("script");
    std::fs::write(
        &script,
        "#!/bin/sh -eu\necho \"script $0 got $# arguments: $*\"\necho \"unset: ${NOT_SET_ANYWHERE:-default}\"\nfalse\necho not reached\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let p = script.to_str().unwrap();
    let out = same(p, &["one", "two words"], None);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&format!("script {p} got 2 arguments: one two words")), "{text}");
    assert!(!text.contains("not reached"), "-e from the #! line applies: {text}");
    assert_eq!(out.status.code(), Some(1));
    // An interpreter taking the script as its program file.
    let awk = d.join("prog.awk");
    std::fs::write(&awk, "#!/usr/bin/awk -f\nBEGIN { print \"awk says\", ARGV[1] }\n").unwrap();
    std::fs::set_permissions(&awk, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = same(awk.to_str().unwrap(), &["hi"], None);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "awk says hi\n");
}
