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
fn unix_events() {
    require_kvm!();
    common::c_test("unix_events", &[]);
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

/// Sockets named on a host directory mounted with -v: the node is made on
/// the host, the socket lives in the sandbox.
#[test]
fn unix_stream_on_host_mount() {
    require_kvm!();
    use std::os::unix::fs::FileTypeExt;
    let dir = common::scratch_dir("unix-host-mount");
    let volume = format!("{}:/vol", dir.display());
    for v in common::VARIANTS {
        let prog = common::c_program("unix_stream", v);
        let work = format!("/vol/{v}");
        let out = common::sandbox(&["-v", &volume], prog.to_str().expect("utf-8 path"), &[&work], None);
        assert!(
            out.status.success(),
            "unix_stream-{v} failed on a host mount:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let node = dir.join(v).join("s2");
        let meta = std::fs::symlink_metadata(&node).expect("the socket node on the host");
        assert!(meta.file_type().is_socket(), "{} is no socket node on the host", node.display());
        // A node only: nothing on the host listens behind it.
        let err = std::os::unix::net::UnixStream::connect(&node).expect_err("no host socket");
        assert_eq!(err.raw_os_error(), Some(libc::ECONNREFUSED));
    }
}
