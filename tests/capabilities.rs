//! Capabilities as a container runtime grants them: root of the sandbox
//! holds docker's and runsc's default set, whatever the host process holds;
//! `--cap-add` and `--cap-drop` change it as docker's flags do; securebits,
//! the ambient and bounding sets, execve and file capabilities follow
//! Linux's rules.

mod common;

use common::sandbox;

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// The container default, as capsh names it, in capability order.
const DEFAULT: &str = "cap_chown,cap_dac_override,cap_fowner,cap_fsetid,cap_kill,cap_setgid,cap_setuid,\
                       cap_setpcap,cap_net_bind_service,cap_net_raw,cap_sys_chroot,cap_mknod,cap_audit_write,\
                       cap_setfcap";

/// `capsh --print` in the sandbox run with `opts`: its `Current:` and
/// `Bounding set` lines. It must finish and exit 0.
fn capsh(opts: &[&str]) -> (String, String) {
    let out = sandbox(opts, "/usr/sbin/capsh", &["--print"], None);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "capsh --print: {stdout}{}", String::from_utf8_lossy(&out.stderr));
    let line = |prefix: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} line in:\n{stdout}"))
            .trim()
            .to_string()
    };
    (line("Current:"), line("Bounding set ="))
}

#[test]
fn capsh_prints_the_container_default() {
    require_kvm!();
    if !std::path::Path::new("/usr/sbin/capsh").exists() {
        assert!(std::env::var("CORDON_REQUIRE_KVM").as_deref() != Ok("1"), "capsh is missing (scripts/install-deps)");
        eprintln!("skipping: capsh is not installed");
        return;
    }
    if !is_root() {
        eprintln!("skipping: only root of the sandbox holds capabilities");
        return;
    }
    assert_eq!(capsh(&[]), (format!("{DEFAULT}=ep"), DEFAULT.to_string()));
    // docker's spellings: with or without CAP_, any case, ALL.
    assert_eq!(
        capsh(&["--cap-drop", "ALL", "--cap-add", "net_admin"]),
        ("cap_net_admin=ep".into(), "cap_net_admin".into())
    );
    let (current, bounding) = capsh(&["--cap-add", "CAP_SYS_ADMIN", "--cap-drop", "Kill", "--cap-drop", "cap_mknod"]);
    let expected = DEFAULT
        .replace("cap_kill,", "")
        .replace("cap_mknod,", "")
        .replace("cap_sys_chroot,", "cap_sys_chroot,cap_sys_admin,");
    assert_eq!((current, bounding), (format!("{expected}=ep"), expected));
    let (current, bounding) = capsh(&["--cap-add", "all", "--cap-drop", "SYS_TIME"]);
    assert_eq!(current, "=ep cap_sys_time-ep");
    assert!(bounding.ends_with("cap_bpf,cap_checkpoint_restore") && !bounding.contains("cap_sys_time"), "{bounding}");
}

#[test]
fn unknown_capability_is_a_one_line_error() {
    for flag in ["--cap-add", "--cap-drop"] {
        let out = sandbox(&[flag, "CAP_FLY"], "/bin/true", &[], None);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains("CAP_FLY"), "{stderr}");
    }
}

/// Securebits, ambient and bounding sets, execve as root, as nobody, of a
/// set-user-id-root program and of programs carrying file capabilities:
/// natively (narrowed to the container's set first) and in the sandbox.
#[test]
fn capability_rules() {
    require_kvm!();
    if !is_root() {
        eprintln!("skipping: the program starts as root, natively and in the sandbox");
        return;
    }
    common::c_test_in_work_dir("caps");
}
