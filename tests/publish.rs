//! `-p [IP:]HOSTPORT:PORT[/udp]` with the sandbox's own network: the
//! sentry listens on the host port before the program starts and forwards
//! each TCP connection (UDP datagrams, per peer, both ways) into the
//! sandbox's loopback, to what listens on PORT there. A port that cannot
//! be had is a one-line error; a connection nothing takes inside is reset.

mod common;

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Far more than any of these runs takes: reaching it means a hang.
const HANG: Duration = Duration::from_secs(120);

/// A port of the host's loopback that was free a moment ago.
fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("a port").local_addr().expect("address").port()
}

/// A UDP port of the host's loopback that was free a moment ago.
fn free_udp_port() -> u16 {
    UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).expect("a port").local_addr().expect("address").port()
}

/// Starts `cordon run OPTIONS -- PROGRAM ARGS` and waits for the line the
/// program prints once it listens.
fn start(
    options: &[String],
    program: &std::path::Path,
    args: &[&str],
    what: &str,
) -> (Child, BufReader<std::process::ChildStdout>) {
    let mut cmd = Command::new(common::cordon());
    cmd.arg("run").args(options).arg("--").arg(program).args(args);
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut first = String::new();
    stdout.read_line(&mut first).expect("read");
    assert!(first.starts_with("listening ") || first == "ready\n", "{what}: printed {first:?}");
    (child, stdout)
}

/// Ends a run whose program prints its checks last: all passed.
fn finish(child: Child, mut stdout: BufReader<std::process::ChildStdout>, what: &str) -> String {
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).expect("read");
    let out = common::finish_within(child, HANG, what);
    assert_eq!(out.status.code(), Some(0), "{what}: {rest}{}", String::from_utf8_lossy(&out.stderr));
    rest
}

/// A server inside, on IPv4's loopback and on IPv6's, is reached from the
/// host through the published port, one connection after another.
#[test]
fn a_server_inside_is_reached_through_a_published_port() {
    require_kvm!();
    for variant in common::VARIANTS {
        let prog = common::c_program("net_host_server", variant);
        for family in ["4", "6"] {
            let what = format!("net_host_server-{variant} IPv{family} published");
            let host_port = free_port();
            let options = [format!("-p=127.0.0.1:{host_port}:8080")];
            let (child, stdout) = start(&options, &prog, &[family, "3", "8080"], &what);
            for i in 0..3 {
                let to = SocketAddr::from((Ipv4Addr::LOCALHOST, host_port));
                let mut s = TcpStream::connect_timeout(&to, HANG).expect("connect to the published port");
                s.set_read_timeout(Some(HANG)).expect("timeout");
                s.write_all(format!("ping {i}\n").as_bytes()).expect("send");
                let mut reply = String::new();
                s.read_to_string(&mut reply).expect("reply");
                assert_eq!(reply, format!("echo: ping {i}\n"), "{what}");
            }
            let rest = finish(child, stdout, &what);
            assert!(rest.ends_with("0 failed\n"), "{what}: {rest}");
        }
    }
}

/// A published UDP port forwards each host peer's datagrams to the server
/// inside from a sender of its own, and the replies back to that peer.
#[test]
fn udp_datagrams_are_forwarded_both_ways_per_peer() {
    require_kvm!();
    let prog = common::c_program("net_host_udp_echo", "static");
    let what = "net_host_udp_echo published";
    let host_port = free_udp_port();
    let options = [format!("--publish=127.0.0.1:{host_port}:5353/udp")];
    let (child, stdout) = start(&options, &prog, &["5353", "4"], what);
    let peers: Vec<UdpSocket> = (0..2).map(|_| UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).expect("a peer")).collect();
    for round in 0..2 {
        for (i, p) in peers.iter().enumerate() {
            p.set_read_timeout(Some(HANG)).expect("timeout");
            let msg = format!("peer {i} round {round}");
            p.send_to(msg.as_bytes(), (Ipv4Addr::LOCALHOST, host_port)).expect("send");
            let mut buf = [0u8; 256];
            let (n, from) = p.recv_from(&mut buf).expect("the echo");
            assert_eq!(from, SocketAddr::from((Ipv4Addr::LOCALHOST, host_port)), "{what}");
            assert_eq!(String::from_utf8_lossy(&buf[..n]), format!("echo: {msg}"), "{what}");
        }
    }
    let rest = finish(child, stdout, what);
    assert!(rest.starts_with("senders 2\n") && rest.ends_with("0 failed\n"), "{what}: {rest}");
}

/// How many of `pid`'s descriptors are sockets.
fn sockets_of(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("fd directory")
        .flatten()
        .filter(|e| std::fs::read_link(e.path()).is_ok_and(|t| t.to_string_lossy().starts_with("socket:")))
        .count()
}

/// A connection to a published port that nothing inside listens on is
/// reset, as docker's is; the next one too, and the run goes on. The
/// listener is the sentry's alone (the monitor holds none), and the
/// sentry stays in a network namespace of its own.
#[test]
fn a_connection_nothing_takes_inside_is_reset() {
    require_kvm!();
    let host_port = free_port();
    let mut cmd = Command::new(common::cordon());
    cmd.args(["run", &format!("-p=127.0.0.1:{host_port}:9"), "--", "/bin/sh", "-c", "echo ready; read x; echo done"]);
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut first = String::new();
    stdout.read_line(&mut first).expect("read");
    assert_eq!(first, "ready\n");
    if rustix::process::geteuid().is_root() {
        let monitor = child.id();
        let sentry = common::child_of(monitor).expect("the sentry, cordon's child");
        assert_eq!(sockets_of(monitor), 0, "the monitor holds a socket");
        assert_eq!(sockets_of(sentry), 1, "the sentry holds the listener only");
        let theirs = std::fs::read_link(format!("/proc/{sentry}/ns/net")).expect("ns");
        let ours = std::fs::read_link("/proc/self/ns/net").expect("ns");
        assert_ne!(theirs, ours, "the sentry's network namespace is its own");
    }
    for _ in 0..2 {
        let to = SocketAddr::from((Ipv4Addr::LOCALHOST, host_port));
        // The host's kernel takes the connection; the reset may come
        // before the connect has returned.
        let r = TcpStream::connect_timeout(&to, HANG).and_then(|mut s| {
            s.set_read_timeout(Some(HANG))?;
            s.read(&mut [0u8; 16])
        });
        assert!(matches!(&r, Err(e) if e.kind() == ErrorKind::ConnectionReset), "expected a reset, got {r:?}");
    }
    child.stdin.take().expect("stdin").write_all(b"\n").expect("write");
    let rest = finish(child, stdout, "reset");
    assert_eq!(rest, "done\n");
}

/// A port the host will not give is one line and status 125 before the
/// program runs; a malformed -p, or -p with the host's network, is a bad
/// command line (status 2).
#[test]
fn a_port_that_cannot_be_had_is_an_error_before_the_program_starts() {
    let held = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("a port");
    let port = held.local_addr().expect("address").port();
    let out = common::sandbox(&[&format!("-p=127.0.0.1:{port}:80")], "/bin/echo", &["ran"], None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(out.stdout.is_empty(), "the program ran");
    assert!(
        stderr.starts_with(&format!("cordon: -p 127.0.0.1:{port}:80/tcp: cannot listen on 127.0.0.1:{port}: "))
            && stderr.lines().count() == 1,
        "{stderr}"
    );
    for (opts, says) in [
        (vec!["-p=80"], "expected [IP:]HOSTPORT:PORT[/udp]"),
        (vec!["-p=8080:0"], "is not a port"),
        (vec!["-p=8080:80/sctp"], "unknown protocol"),
        (vec!["--network=host", "-p=8080:80"], "--network=host"),
    ] {
        let out = common::sandbox(&opts, "/bin/echo", &["ran"], None);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{opts:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{opts:?}: the program ran");
        assert!(stderr.contains(says) && stderr.lines().count() == 1, "{opts:?}: {stderr}");
    }
}
