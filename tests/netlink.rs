//! The sandbox's network interfaces as programs learn them: AF_NETLINK
//! NETLINK_ROUTE (dumps, errors, options), the interface ioctls, the C
//! library's getifaddrs and if_nameindex, iproute2's `ip`, and /proc/net
//! and /sys/class/net. The C program runs natively too and prints only what
//! the loopback shows, which is the same in any network namespace.

mod common;

use common::sandbox;

#[test]
fn netlink() {
    require_kvm!();
    common::c_test("netlink", &[]);
}

#[test]
fn netlink_refusals() {
    require_kvm!();
    common::c_test_sandbox_only("netlink_refusals", &[], &[]);
}

/// iproute2's `ip`, if installed (scripts/install-deps installs it).
fn ip() -> Option<&'static str> {
    let found = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip"].into_iter().find(|p| std::path::Path::new(p).is_file());
    if found.is_none() {
        if std::env::var("CORDON_REQUIRE_KVM").as_deref() == Ok("1") {
            panic!("ip is not installed (scripts/install-deps installs it), and CORDON_REQUIRE_KVM=1");
        }
        eprintln!("skipping: ip is not installed");
    }
    found
}

/// Runs `ip args` in the sandbox; it must succeed and print `expected`,
/// which is what Linux prints in a network namespace with only `lo`, up.
fn ip_prints(args: &[&str], expected: &str) {
    let Some(ip) = ip() else { return };
    let out = sandbox(&[], ip, args, None);
    assert_eq!(
        out.status.code(),
        Some(0),
        "ip {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), expected, "ip {args:?}");
}

#[test]
fn ip_addr() {
    require_kvm!();
    ip_prints(
        &["addr"],
        "1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN group default qlen 1000
    link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00
    inet 127.0.0.1/8 scope host lo
       valid_lft forever preferred_lft forever
    inet6 ::1/128 scope host 
       valid_lft forever preferred_lft forever
",
    );
}

#[test]
fn ip_link() {
    require_kvm!();
    ip_prints(
        &["link"],
        "1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN mode DEFAULT group default qlen 1000
    link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00
",
    );
    ip_prints(
        &["-s", "link", "show", "lo"],
        "1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN mode DEFAULT group default qlen 1000
    link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00
    RX:  bytes packets errors dropped  missed   mcast           
             0       0      0       0       0       0 
    TX:  bytes packets errors dropped carrier collsns           
             0       0      0       0       0       0 
",
    );
}

#[test]
fn ip_route() {
    require_kvm!();
    // The main tables are empty: the loopback's routes are local ones.
    ip_prints(&["route"], "");
    ip_prints(&["-6", "route"], "");
    ip_prints(
        &["route", "show", "table", "all"],
        "local 127.0.0.0/8 dev lo table local proto kernel scope host src 127.0.0.1 
local 127.0.0.1 dev lo table local proto kernel scope host src 127.0.0.1 
broadcast 127.255.255.255 dev lo table local proto kernel scope link src 127.0.0.1 
local ::1 dev lo table local proto kernel metric 0 pref medium
",
    );
    ip_prints(&["neigh"], "");
}
