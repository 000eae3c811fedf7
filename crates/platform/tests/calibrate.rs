//! Calibration against the real platforms: each either measures plausible
//! costs or says why it cannot run here.

use std::path::Path;

use platform::PlatformError;
use platform::calibrate::{self, Costs};

/// Checks a calibration's result; `required` makes unavailability a
/// failure.
fn check(name: &str, result: Result<Costs, PlatformError>, required: bool) {
    match result {
        Ok(c) => {
            eprintln!("{name}: round trip {} ns, fault {} ns", c.round_trip_ns, c.fault_ns);
            // A round trip leaves and re-enters application code: never
            // free, and never a second.
            assert!(c.round_trip_ns > 0 && c.round_trip_ns < 1_000_000_000, "{name}: {c:?}");
            assert!(c.fault_ns > 0 && c.fault_ns < 1_000_000_000, "{name}: {c:?}");
        }
        Err(PlatformError::Unavailable(why)) if !required => {
            eprintln!("skipping {name}: unavailable: {why}")
        }
        Err(e) => panic!("{name}: calibration failed: {e}"),
    }
}

#[test]
fn kvm_calibrates() {
    let required = std::env::var("CORDON_REQUIRE_KVM").as_deref() == Ok("1");
    check("kvm", calibrate::calibrate_kvm(Path::new(platform::kvm::DEFAULT_DEVICE)), required);
}

#[test]
fn trap_calibrates() {
    // Needs no KVM; the host kernel may still refuse it (FSGSBASE).
    // The ids a sentry of root's takes (nobody's).
    check("trap", calibrate::calibrate_trap(65534), false);
}

#[test]
fn a_missing_kvm_device_is_unavailable_with_the_reason() {
    let Err(PlatformError::Unavailable(why)) = calibrate::calibrate_kvm(Path::new("/nonexistent/kvm")) else {
        panic!("a missing device must be unavailable");
    };
    assert!(why.contains("does not exist"), "{why}");
}
