//! Unix domain sockets, one C program per socket type or feature
//! (tests/c/unix_*.c), run natively and in the sandbox: both runs must pass
//! and print the same, so every expectation, errno cases included, is
//! Linux's own.

mod common;

macro_rules! work_dir_tests {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                require_kvm!();
                common::c_test_in_work_dir(stringify!($name));
            }
        )*
    };
}

work_dir_tests! {
    unix_stream,
    unix_dgram,
}

#[test]
fn unix_rights() {
    require_kvm!();
    common::c_test("unix_rights", &[]);
}

/// 10,000 descriptors passed in cycles and closed at both ends leave no
/// socket behind (sandbox only: the host's /proc/net/unix lists the host's
/// sockets, and Linux collects cycles in the background).
#[test]
fn unix_rights_leak() {
    require_kvm!();
    common::c_test_sandbox_only("unix_rights_leak", &[], &[]);
}
