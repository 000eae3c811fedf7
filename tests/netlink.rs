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
    // Root natively holds CAP_NET_ADMIN, which lets one netlink socket
    // send to another; the sandbox's root is given it to compare.
    common::c_test_with("netlink", &["--cap-add", "NET_ADMIN"], &[]);
}

#[test]
fn netlink_refusals() {
    require_kvm!();
    common::c_test_sandbox_only("netlink_refusals", &[], &[]);
    common::c_test_sandbox_only("netlink_refusals", &["--cap-add", "NET_ADMIN"], &[]);
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
    // The policy rules every namespace starts with.
    ip_prints(&["rule"], "0:\tfrom all lookup local\n32766:\tfrom all lookup main\n32767:\tfrom all lookup default\n");
    ip_prints(&["-6", "rule"], "0:\tfrom all lookup local\n32766:\tfrom all lookup main\n");
}

#[test]
fn ip_route_get() {
    require_kvm!();
    // The sandbox's programs run as the caller.
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    ip_prints(
        &["route", "get", "127.0.0.5"],
        &format!("local 127.0.0.5 dev lo src 127.0.0.1 uid {uid} \n    cache <local> \n"),
    );
    ip_prints(
        &["route", "get", "127.0.0.1", "from", "127.0.0.1"],
        &format!("local 127.0.0.1 from 127.0.0.1 dev lo uid {uid} \n    cache <local> \n"),
    );
    ip_prints(
        &["-6", "route", "get", "::1"],
        "local ::1 from :: dev lo table local proto kernel src ::1 metric 0 pref medium\n",
    );
    // Nothing else is reachable.
    let Some(ip) = ip() else { return };
    for (args, family) in [(["route", "get", "10.0.0.1"], "-4"), (["route", "get", "2001::1"], "-6")] {
        let out = sandbox(&[], ip, &[&[family], &args[..]].concat(), None);
        assert_eq!(out.status.code(), Some(2), "ip {family} {args:?}");
        assert_eq!(String::from_utf8_lossy(&out.stderr), "RTNETLINK answers: Network is unreachable\n");
    }
}

/// Runs `sh -c script` in the sandbox; it must succeed and print `expected`.
fn shell_prints(script: &str, expected: &str) {
    let out = sandbox(&["-w", "/"], "/bin/sh", &["-c", script], None);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{script}: failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), expected, "{script}");
}

/// /proc/net as Linux shows a namespace with only `lo`, and the tables of
/// sockets (none yet) with their headers.
#[test]
fn proc_net() {
    require_kvm!();
    shell_prints("readlink /proc/net; ls /proc/self/net | grep -c .", "self/net\n12\n");
    shell_prints(
        "cat /proc/net/dev /proc/net/if_inet6 /proc/net/route /proc/net/snmp",
        "Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0
00000000000000000000000000000001 01 80 10 80       lo
Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT                                                       
Ip: Forwarding DefaultTTL InReceives InHdrErrors InAddrErrors ForwDatagrams InUnknownProtos InDiscards InDelivers OutRequests OutDiscards OutNoRoutes ReasmTimeout ReasmReqds ReasmOKs ReasmFails FragOKs FragFails FragCreates OutTransmits
Ip: 2 64 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
Icmp: InMsgs InErrors InCsumErrors InDestUnreachs InTimeExcds InParmProbs InSrcQuenchs InRedirects InEchos InEchoReps InTimestamps InTimestampReps InAddrMasks InAddrMaskReps OutMsgs OutErrors OutRateLimitGlobal OutRateLimitHost OutDestUnreachs OutTimeExcds OutParmProbs OutSrcQuenchs OutRedirects OutEchos OutEchoReps OutTimestamps OutTimestampReps OutAddrMasks OutAddrMaskReps
Icmp: 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors
Tcp: 1 200 120000 -1 0 0 0 0 0 0 0 0 0 0 0
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
Udp: 0 0 0 0 0 0 0 0 0
UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
UdpLite: 0 0 0 0 0 0 0 0 0
",
    );
    shell_prints(
        "head -c 14 /proc/net/tcp; echo; cat /proc/net/unix",
        "  sl  local_ad\nNum       RefCount Protocol Flags    Type St Inode Path\n",
    );
}

/// /sys/class/net/lo: a link to the device's directory, with its
/// attributes as sysfs writes them.
#[test]
fn sys_class_net() {
    require_kvm!();
    shell_prints(
        "readlink /sys/class/net/lo; cd /sys/class/net/lo && cat ifindex iflink mtu flags address broadcast operstate type",
        "../../devices/virtual/net/lo\n1\n1\n65536\n0x9\n00:00:00:00:00:00\n00:00:00:00:00:00\nunknown\n772\n",
    );
}
