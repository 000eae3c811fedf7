//! `--network=host`: the sandbox's inet sockets are host sockets the
//! sentry owns. A client inside reaches a server the test runs on the
//! host, a server inside is reached by a client on the host, and every
//! answer (errors included) is the one the same program gets natively.
//! With the default `--network=none`, the host is out of reach and the
//! sentry holds no host socket.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Far more than any of these runs takes: reaching it means a hang.
const HANG: Duration = Duration::from_secs(120);

/// Answers each connection's first line (or all it sent, at its end) with
/// "hello LINE\n", then closes it.
fn answer(mut s: TcpStream) {
    let mut got = Vec::new();
    let mut b = [0u8; 1];
    while let Ok(1) = s.read(&mut b) {
        if b[0] == b'\n' {
            break;
        }
        got.push(b[0]);
    }
    let _ = s.write_all(format!("hello {}\n", String::from_utf8_lossy(&got)).as_bytes());
}

/// A server on the host's loopback, IPv4 and IPv6 on one port, answering
/// for as long as the test runs; its port.
fn host_server() -> u16 {
    loop {
        let v4 = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("a port on 127.0.0.1");
        let port = v4.local_addr().expect("address").port();
        // The same port on ::1; taken already, another try.
        let Ok(v6) = TcpListener::bind((Ipv6Addr::LOCALHOST, port)) else { continue };
        for l in [v4, v6] {
            std::thread::spawn(move || {
                for s in l.incoming().flatten() {
                    std::thread::spawn(move || answer(s));
                }
            });
        }
        return port;
    }
}

/// A client inside fetches from the host's server: the same replies and
/// checks as natively, in every variant.
#[test]
fn a_client_inside_reaches_a_host_server() {
    require_kvm!();
    let port = host_server().to_string();
    for variant in common::VARIANTS {
        let prog = common::c_program("net_host_client", variant);
        let p = prog.to_str().expect("utf-8 path");
        let what = format!("net_host_client-{variant}");
        let native = common::native(p, &[&port], None);
        assert!(native.status.success(), "{what} fails natively:\n{}", String::from_utf8_lossy(&native.stderr));
        let out = common::finish_within(common::spawn_cordon_with(&["--network=host"], &[p, &port]), HANG, &what);
        common::assert_same(&what, &out, &native);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.starts_with("reply: hello first\nhalf-closed reply: hello sec\nv6 reply: hello six\n"), "{text}");
    }
}

/// Runs the server program (`cmd`, listening on `family`'s loopback),
/// connects to it from the host `connections` times once it says it
/// listens, and returns the replies and the rest of what it printed.
fn drive_server(mut cmd: Command, six: bool, connections: usize, what: &str) -> (Vec<String>, String, Option<i32>) {
    let mut child: Child =
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut first = String::new();
    stdout.read_line(&mut first).expect("read");
    let port: u16 = first
        .strip_prefix("listening ")
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("{what}: printed {first:?} instead of its port"));
    let ip = if six { Ipv6Addr::LOCALHOST.into() } else { Ipv4Addr::LOCALHOST.into() };
    let mut replies = Vec::new();
    for i in 0..connections {
        let mut s = TcpStream::connect_timeout(&SocketAddr::new(ip, port), HANG).expect("connect to the server");
        s.set_read_timeout(Some(HANG)).expect("timeout");
        s.write_all(format!("ping {i}\n").as_bytes()).expect("send");
        let mut reply = String::new();
        s.read_to_string(&mut reply).expect("reply");
        replies.push(reply);
    }
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).expect("read");
    let out = common::finish_within(child, HANG, what);
    assert!(out.stderr.is_empty() || out.status.success(), "{what}: {}", String::from_utf8_lossy(&out.stderr));
    (replies, rest, out.status.code())
}

/// A server inside listens on a host port of the loopback (IPv4 and IPv6),
/// and a client on the host reaches it: blocking accept, poll and accept4
/// on the host socket, and the same answers as the program gets natively.
#[test]
fn a_server_inside_is_reached_from_the_host() {
    require_kvm!();
    for variant in common::VARIANTS {
        let prog = common::c_program("net_host_server", variant);
        for family in ["4", "6"] {
            let six = family == "6";
            let what = format!("net_host_server-{variant} IPv{family}");
            let mut native = Command::new(&prog);
            native.args([family, "3"]);
            let native = drive_server(native, six, 3, &what);
            assert_eq!(native.2, Some(0), "{what} fails natively: {}", native.1);
            let mut sandboxed = Command::new(common::cordon());
            sandboxed.args(["run", "--network=host", "--"]).arg(&prog).args([family, "3"]);
            let sandboxed = drive_server(sandboxed, six, 3, &what);
            assert_eq!(sandboxed, native, "{what}");
            assert_eq!(sandboxed.0, ["echo: ping 0\n", "echo: ping 1\n", "echo: ping 2\n"], "{what}");
        }
    }
}

/// The name resolution inside is the host's.
#[test]
fn resolution_files_are_the_hosts() {
    require_kvm!();
    let script = "cat /etc/resolv.conf /etc/hosts";
    let native = common::native("/bin/sh", &["-c", script], None);
    let out = common::finish_within(
        common::spawn_cordon_with(&["--network=host"], &["/bin/sh", "-c", script]),
        HANG,
        "resolution files",
    );
    common::assert_same("resolution files", &out, &native);
}

/// The interfaces, addresses and routes the route netlink reports (what
/// `ip`, getifaddrs and if_nameindex read) and /proc/net describes are the
/// host's, whose network the sandbox's sockets use, not the sandbox's own
/// loopback. (/proc/net/dev's counters move between the runs: only its
/// interface names are compared.)
#[test]
fn interfaces_are_the_hosts() {
    require_kvm!();
    let script = "ip -o link; ip -o addr; ip route; ip -6 route; ip rule; ip -o link show lo; \
                  cut -d: -f1 /proc/net/dev; cat /proc/net/if_inet6 /proc/net/route";
    let native = common::native("/bin/sh", &["-c", script], None);
    assert!(native.status.success(), "ip fails natively:\n{}", String::from_utf8_lossy(&native.stderr));
    let out = common::finish_within(
        common::spawn_cordon_with(&["--network=host"], &["/bin/sh", "-c", script]),
        HANG,
        "ip with the host's network",
    );
    common::assert_same("interfaces", &out, &native);
}

/// Runs a C program natively and with --network=host in every variant;
/// both pass with the same output.
fn host_network_c_test(name: &str) {
    for variant in common::VARIANTS {
        let prog = common::c_program(name, variant);
        let p = prog.to_str().expect("utf-8 path");
        let what = format!("{name}-{variant}");
        let native = common::native(p, &[], None);
        assert!(native.status.success(), "{what} fails natively:\n{}", String::from_utf8_lossy(&native.stderr));
        let out = common::finish_within(common::spawn_cordon_with(&["--network=host"], &[p]), HANG, &what);
        common::assert_same(&what, &out, &native);
    }
}

/// Host sockets' readiness as Linux reports it: edge-triggered epoll sees
/// each arrival once, level-triggered epoll and poll what is there, and
/// blocked readers and accepts are woken.
#[test]
fn readiness_of_host_sockets() {
    require_kvm!();
    host_network_c_test("net_host_epoll");
}

/// How many of `pid`'s descriptors are sockets.
fn sockets_of(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("fd directory")
        .flatten()
        .filter(|e| std::fs::read_link(e.path()).is_ok_and(|t| t.to_string_lossy().starts_with("socket:")))
        .count()
}

/// With the default network, an address beyond the sandbox's own
/// loopback (here one of the host's network and one of IPv6's
/// documentation range) is unreachable: ENETUNREACH. The sentry meanwhile
/// holds no host socket and is in a network namespace of its own; with
/// --network=host it is in the host's.
#[test]
fn without_the_host_network_the_host_is_unreachable() {
    require_kvm!();
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipping: the sentry's descriptors are read when cordon is run by root");
        return;
    }
    for variant in common::VARIANTS {
        let prog = common::c_program("net_host_unreachable", variant);
        let what = format!("net_host_unreachable-{variant}");
        let mut cmd = Command::new(common::cordon());
        cmd.args(["run", "--"]).arg(&prog).args(["192.0.2.1", "2001:db8::1"]);
        let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut first = String::new();
        stdout.read_line(&mut first).expect("read");
        assert_eq!(first, "unreachable\n", "{what}");
        let sentry = common::child_of(child.id()).expect("the sentry, cordon's child");
        assert_eq!(sockets_of(sentry), 0, "{what}: the sentry holds a host socket");
        let theirs = std::fs::read_link(format!("/proc/{sentry}/ns/net")).expect("ns");
        let ours = std::fs::read_link("/proc/self/ns/net").expect("ns");
        assert_ne!(theirs, ours, "{what}: the sentry's network namespace is its own");
        drop(child.stdin.take());
        let mut rest = String::new();
        stdout.read_to_string(&mut rest).expect("read");
        let out = common::finish_within(child, HANG, &what);
        assert_eq!(out.status.code(), Some(0), "{what}: {}{}", rest, String::from_utf8_lossy(&out.stderr));
    }

    // With the host's network, the sentry is in the host's namespace.
    let mut cmd = Command::new(common::cordon());
    cmd.args(["run", "--network=host", "--", "/bin/sh", "-c", "echo ready; read x; exit 0"]);
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut first = String::new();
    stdout.read_line(&mut first).expect("read");
    assert_eq!(first, "ready\n");
    let sentry = common::child_of(child.id()).expect("the sentry, cordon's child");
    let theirs = std::fs::read_link(format!("/proc/{sentry}/ns/net")).expect("ns");
    let ours = std::fs::read_link("/proc/self/ns/net").expect("ns");
    assert_eq!(theirs, ours, "with --network=host the sentry is on the host's network");
    drop(child.stdin.take());
    let out = common::finish_within(child, HANG, "host network namespace");
    assert_eq!(out.status.code(), Some(0));
}
