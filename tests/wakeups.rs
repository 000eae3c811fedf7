//! Lost wake-ups (tests/c/wakeups.c), run natively and in the sandbox in
//! every executable variant with the same output. A lost wake-up hangs the
//! program, so each run is killed after two minutes: a test that fails
//! rather than waits.

mod common;

use std::process::Command;

use common::{VARIANTS, assert_same, c_program, cordon, native, run_with};

#[test]
fn wakeups() {
    require_kvm!();
    for v in VARIANTS {
        let prog = c_program("wakeups", v);
        let p = prog.to_str().expect("utf-8 path");
        let n = native(p, &[], None);
        assert!(
            n.status.success(),
            "wakeups-{v} fails natively, so the test itself is wrong:\n{}{}",
            String::from_utf8_lossy(&n.stdout),
            String::from_utf8_lossy(&n.stderr)
        );
        let mut cmd = Command::new("timeout");
        cmd.args(["-s", "KILL", "120"]).arg(cordon()).args(["run", "--", p]);
        assert_same(&format!("wakeups-{v}"), &run_with(cmd, None), &n);
    }
}
