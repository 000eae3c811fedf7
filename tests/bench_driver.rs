//! The benchmark driver's own tests (`bench/test_run.py`): how it reads
//! results, failures and unsupported cases, with fake platforms, so they
//! need neither KVM nor gVisor. Run here so the normal test command covers
//! them.

use std::path::Path;
use std::process::Command;

#[test]
fn bench_driver_self_tests_pass() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("/usr/bin/python3")
        .arg(root.join("bench/test_run.py"))
        .current_dir(root)
        .output()
        .expect("run /usr/bin/python3 (installed by scripts/install-deps)");
    assert!(
        out.status.success(),
        "bench/test_run.py failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
