//! Files in the sandbox's tmpfs are memory of the sandbox: writing 2 GiB
//! into `/tmp` under `--memory 512M` gives the writer ENOSPC (a full tmpfs
//! on Linux does the same), the sandbox lives on, and deleting the file
//! gives the memory back, so the same amount can be written again.
//! `--profile` shows it from outside: the fill's frames were frames of the
//! memory file, and at exit only the one file left in `/tmp` still holds
//! any.

mod common;

use std::time::Duration;

use serde_json::Value;

use common::{c_program, finish_within, scratch_dir, spawn_cordon_with};

const MIB: u64 = 1 << 20;
const FRAME: u64 = 4096;

/// Far more than the run takes: reaching it means a hang.
const HANG: Duration = Duration::from_secs(300);

/// The bytes a `tmpfs_fill` line reports for `path`, and how the writing
/// ended.
fn filled<'a>(stdout: &'a str, path: &str) -> Option<(u64, &'a str)> {
    let line = stdout.lines().find_map(|l| l.strip_prefix(&format!("{path}: ")))?;
    let (bytes, end) = line.split_once(" bytes written, then ")?;
    Some((bytes.parse().ok()?, end))
}

/// Frames holding application memory: all in use but the supervisor
/// area's and page tables.
fn app_frames(profile: &Value, when: &str) -> u64 {
    let get = |what: &str| {
        profile[when][what].as_u64().unwrap_or_else(|| panic!("no {when}.{what} in the profile: {profile}"))
    };
    get("frames_in_use") - get("supervisor_frames") - get("page_table_frames")
}

#[test]
fn filling_tmp_gives_enospc_and_rm_gives_the_memory_back() {
    require_kvm!();
    let fill = c_program("tmpfs_fill", "static");
    let fill = fill.to_str().expect("utf-8 path");
    let report = scratch_dir("tmpfs-limits").join("profile.json");
    // Fill /tmp, delete the file, fill it again, delete that too, and leave
    // a 64 MiB file for the profile to find at exit.
    let script = format!(
        "{fill} /tmp/big 2048; rm /tmp/big && {fill} /tmp/again 2048; rm /tmp/again && {fill} /tmp/kept 64; \
         ls /tmp; echo alive"
    );
    let child = spawn_cordon_with(
        &["--memory", "512M", &format!("--profile={}", report.display())],
        &["/bin/sh", "-c", &script],
    );
    let out = finish_within(child, HANG, "filling /tmp");
    let stdout = String::from_utf8_lossy(&out.stdout);
    // The program's messages; the profile's text report follows them.
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stderr = stderr.split("cordon profile (").next().unwrap_or_default();
    let context = format!("stdout:\n{stdout}\nstderr:\n{stderr}");
    assert_eq!(out.status.code(), Some(0), "the sandbox did not live on to the end of the script\n{context}");

    let (first, end) = filled(&stdout, "/tmp/big").unwrap_or_else(|| panic!("no result for /tmp/big\n{context}"));
    assert_eq!(end, "ENOSPC", "writing 2 GiB into /tmp under --memory 512M must end in ENOSPC\n{context}");
    assert!(
        (64 * MIB..512 * MIB).contains(&first),
        "the writer got {} MiB into /tmp before ENOSPC: expected more than 64 MiB and less than the limit\n{context}",
        first / MIB
    );
    let (second, end) =
        filled(&stdout, "/tmp/again").unwrap_or_else(|| panic!("no result for /tmp/again (did rm fail?)\n{context}"));
    assert_eq!(end, "ENOSPC", "the second fill must end in ENOSPC too\n{context}");
    assert!(
        second + 16 * MIB >= first,
        "after rm, only {} MiB could be written where {} MiB went before: the memory was not given back\n{context}",
        second / MIB,
        first / MIB
    );
    assert_eq!(filled(&stdout, "/tmp/kept"), Some((64 * MIB, "done")), "the last, small file\n{context}");
    assert_eq!(stdout.matches(" checks, 0 failed").count(), 3, "a check of tmpfs_fill failed\n{context}");
    assert!(stdout.ends_with("kept\nalive\n"), "/tmp must hold only the kept file at the end\n{context}");

    let profile: Value = std::fs::read_to_string(&report)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_else(|| panic!("no JSON profile in {}\n{context}", report.display()));
    let start = app_frames(&profile, "resources_at_start");
    let exit = app_frames(&profile, "resources_at_exit");
    let peak = profile["resources_at_exit"]["frames_peak"].as_u64().expect("frames_peak");
    assert!(
        peak >= start + first / FRAME,
        "the fill's {} MiB were not frames of the memory file: peak {peak} frames, {start} at start",
        first / MIB
    );
    let kept = 64 * MIB / FRAME;
    assert!(
        exit >= start + kept,
        "the 64 MiB file left in /tmp does not show in the frames in use at exit ({exit}, {start} at start)"
    );
    assert!(
        exit <= start + kept + 16 * MIB / FRAME,
        "memory was not given back after rm: {} MiB of application frames in use at exit, {} MiB at start, \
         and only a 64 MiB file left",
        exit * FRAME / MIB,
        start * FRAME / MIB
    );
}
