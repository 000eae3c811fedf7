//! `-p HOSTPORT:PORT[/udp]`: a port of the host published to a sandbox
//! whose network is its own (docker's publish). The listening host socket
//! is made before the sentry confines itself (a port that cannot be had is
//! an error before the program starts); the sentry then forwards each
//! connection it accepts into the sandbox's loopback, to what listens on
//! PORT there, and UDP datagrams both ways, per peer.
//!
//! The sandbox's end of a forwarded connection is an ordinary socket of
//! the sandbox's network, connected to 127.0.0.1 (or ::1) like a client
//! inside would: nothing listening there refuses it, and the host's
//! client is reset, as docker's proxy does.

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use linux_raw_sys::net as n;
use memory::{GuestSlice, GuestSliceMut};

use super::{Control, NetCall, Network, RecvMsg, SendMsg, Socket, SocketNames, Ucred};
use crate::auth::Creds;
use crate::errno::Errno;
use crate::fs::{Caller, Context, Dentry};
use crate::waiter::{Blocker, Waiter};

/// One `-p` of the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublishSpec {
    /// The host address listened on (docker's default: every IPv4 one).
    pub host_ip: IpAddr,
    pub host_port: u16,
    /// The port inside the sandbox.
    pub port: u16,
    pub udp: bool,
}

impl PublishSpec {
    /// Parses docker's `[IP:]HOSTPORT:PORT[/tcp|/udp]`; an IPv6 address is
    /// written in brackets.
    pub fn parse(s: &str) -> Result<PublishSpec, String> {
        let (ports, udp) = match s.rsplit_once('/') {
            Some((p, "udp")) => (p, true),
            Some((p, "tcp")) => (p, false),
            Some((_, proto)) => return Err(format!("unknown protocol '{proto}' (expected tcp or udp)")),
            None => (s, false),
        };
        let (ip, rest) = if let Some(v6) = ports.strip_prefix('[') {
            let (ip, rest) = v6.split_once("]:").ok_or("expected [IPv6]:HOSTPORT:PORT")?;
            (Some(ip), rest)
        } else {
            match ports.matches(':').count() {
                1 => (None, ports),
                2 => {
                    let (ip, rest) = ports.split_once(':').expect("a colon");
                    (Some(ip), rest)
                }
                _ => return Err("expected [IP:]HOSTPORT:PORT[/udp]".into()),
            }
        };
        let host_ip = match ip {
            None => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            Some(ip) => ip.parse().map_err(|_| format!("'{ip}' is not an IP address"))?,
        };
        let (host_port, port) = rest.split_once(':').ok_or("expected [IP:]HOSTPORT:PORT[/udp]")?;
        let port_of = |p: &str| match p.parse::<u16>() {
            Ok(v) if v > 0 => Ok(v),
            _ => Err(format!("'{p}' is not a port (1 to 65535)")),
        };
        Ok(PublishSpec { host_ip, host_port: port_of(host_port)?, port: port_of(port)?, udp })
    }

    fn host_addr(&self) -> SocketAddr {
        SocketAddr::new(self.host_ip, self.host_port)
    }
}

impl fmt::Display for PublishSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}/{}", self.host_addr(), self.port, if self.udp { "udp" } else { "tcp" })
    }
}

/// A published port's host socket, listening (TCP) or bound (UDP).
pub struct Listener {
    spec: PublishSpec,
    fd: OwnedFd,
}

/// Makes the host sockets of `specs`: called before the sentry confines
/// itself, in the host's network namespace, where they stay. The error
/// is one line naming the port.
pub fn listen(specs: &[PublishSpec]) -> Result<Vec<Listener>, String> {
    specs
        .iter()
        .map(|spec| {
            let addr = spec.host_addr();
            let fd: OwnedFd = if spec.udp {
                std::net::UdpSocket::bind(addr).and_then(|s| s.set_nonblocking(true).map(|()| s)).map(OwnedFd::from)
            } else {
                // Blocking: the accepting thread waits in accept.
                std::net::TcpListener::bind(addr).map(OwnedFd::from)
            }
            .map_err(|e| format!("-p {spec}: cannot listen on {addr}: {e}"))?;
            Ok(Listener { spec: spec.clone(), fd })
        })
        .collect()
}

/// Starts forwarding every published port into `net`, the sandbox's
/// network: one thread per port, and one per TCP connection.
pub fn start(net: &Arc<Network>, listeners: Vec<Listener>) {
    for l in listeners {
        let net = net.clone();
        let name = format!("publish-{}", l.spec.host_port);
        let spec = l.spec.clone();
        let r = std::thread::Builder::new().name(name).spawn(move || {
            if l.spec.udp {
                forward_datagrams(&net, &l);
            } else {
                accept_loop(&net, &l);
            }
        });
        if let Err(e) = r {
            tracing::debug!("-p {spec}: no thread to forward it: {e}");
        }
    }
}

/// The caller of the sandbox's socket calls a forwarder makes: it is the
/// network, no process; it waits (for a connect inside) and is never
/// interrupted.
struct Forwarder {
    waiter: Arc<Waiter>,
    creds: Arc<Creds>,
}

impl Forwarder {
    fn new() -> Forwarder {
        Forwarder { waiter: Waiter::new(), creds: Arc::new(Creds::new(0, 0, Vec::new())) }
    }

    fn with_call<R>(&self, f: impl FnOnce(&NetCall) -> R) -> R {
        let ctx = Context::new(self.creds.clone(), self);
        f(&NetCall { ctx: &ctx, ucred: Ucred::default(), names: &NoNames, file: None })
    }

    /// Sleeps until the host descriptor has one of `events` or a sandbox
    /// socket this forwarder registered on wakes it.
    fn sleep(&self, host: BorrowedFd, events: i16, timeout: Option<Duration>) {
        let ev = self.waiter.eventfd();
        let mut fds = [
            libc::pollfd { fd: host.as_raw_fd(), events, revents: 0 },
            libc::pollfd { fd: ev.as_raw_fd(), events: libc::POLLIN, revents: 0 },
        ];
        let ms = timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as i32);
        // SAFETY: two pollfds of ours.
        unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
        if fds[1].revents != 0 {
            self.waiter.drain_eventfd();
        }
    }
}

impl Blocker for Forwarder {
    fn waiter(&self) -> &Arc<Waiter> {
        &self.waiter
    }
    fn interrupted(&self) -> bool {
        false
    }
}

impl Caller for Forwarder {
    fn send_signal(&self, _: u32) {}
}

/// A forwarder names no file.
struct NoNames;

impl SocketNames for NoNames {
    fn make_socket_node(&self, _: &[u8]) -> Result<Arc<Dentry>, Errno> {
        Err(Errno::EINVAL)
    }
    fn find_socket_node(&self, _: &[u8]) -> Result<Arc<Dentry>, Errno> {
        Err(Errno::EINVAL)
    }
}

/// The sandbox's loopback address and `port`, as a sockaddr.
fn loopback(v6: bool, port: u16) -> Vec<u8> {
    let mut a = Vec::new();
    if v6 {
        a.extend_from_slice(&(n::AF_INET6 as u16).to_ne_bytes());
        a.extend_from_slice(&port.to_be_bytes());
        a.extend_from_slice(&[0; 4]);
        a.extend_from_slice(&std::net::Ipv6Addr::LOCALHOST.octets());
        a.extend_from_slice(&[0; 4]);
    } else {
        a.extend_from_slice(&(n::AF_INET as u16).to_ne_bytes());
        a.extend_from_slice(&port.to_be_bytes());
        a.extend_from_slice(&Ipv4Addr::LOCALHOST.octets());
        a.extend_from_slice(&[0; 8]);
    }
    a
}

/// A socket of the sandbox's network of `kind`, connected to `port` on
/// its loopback: IPv4's, else IPv6's.
fn connect_inside(net: &Arc<Network>, me: &Forwarder, kind: u32, port: u16) -> Result<Arc<dyn Socket>, Errno> {
    me.with_call(|call| {
        let mut last = Errno::ECONNREFUSED;
        for (family, v6) in [(n::AF_INET, false), (n::AF_INET6, true)] {
            let s = match net.create(call, family, kind, 0) {
                Ok(s) => s,
                Err(e) => {
                    last = e;
                    continue;
                }
            };
            match s.connect(call, &loopback(v6, port)) {
                Ok(()) => return Ok(s),
                Err(e) => last = e,
            }
        }
        Err(last)
    })
}

/// Resets a host connection: closed with a zero linger, it sends RST.
fn reset(fd: OwnedFd) {
    let linger = libc::linger { l_onoff: 1, l_linger: 0 };
    // SAFETY: `linger` is ours and of the size given; the host only reads it.
    unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as u32,
        )
    };
    drop(fd);
}

fn host_errno() -> Errno {
    let raw = std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO);
    Errno::from_host(rustix::io::Errno::from_raw_os_error(raw))
}

/// One host recv or send without blocking: the count, or the error.
fn host_recv(fd: BorrowedFd, buf: &mut [u8]) -> Result<usize, Errno> {
    // SAFETY: the host writes at most buf.len() bytes into `buf`, ours.
    let r = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
    if r < 0 { Err(host_errno()) } else { Ok(r as usize) }
}

fn host_send(fd: BorrowedFd, buf: &[u8]) -> Result<usize, Errno> {
    // SAFETY: the host reads at most buf.len() bytes of `buf`, ours.
    let r =
        unsafe { libc::send(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len(), libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
    if r < 0 { Err(host_errno()) } else { Ok(r as usize) }
}

/// Takes the TCP connections of a published port, each forwarded by a
/// thread of its own.
fn accept_loop(net: &Arc<Network>, l: &Listener) {
    loop {
        // SAFETY: accept4 with no address asked; the listener is live.
        let fd = unsafe {
            libc::accept4(
                l.fd.as_raw_fd(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            )
        };
        if fd < 0 {
            let e = host_errno();
            match i32::from(e.get()) {
                // A connection gone before it was taken, a signal: the next.
                libc::ECONNABORTED | libc::EINTR | libc::EPROTO => continue,
                _ => {
                    // Out of descriptors or memory: the connection waits
                    // in the backlog; try again shortly rather than spin.
                    tracing::debug!("-p {}: accept: {e:?}", l.spec);
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                }
            }
        }
        // SAFETY: the descriptor was just made and is owned by nothing else.
        let conn = unsafe { OwnedFd::from_raw_fd(fd) };
        let net = net.clone();
        let port = l.spec.port;
        let r = std::thread::Builder::new()
            .name(format!("publish-{}-conn", l.spec.host_port))
            .spawn(move || forward_connection(&net, conn, port));
        if let Err(e) = r {
            tracing::debug!("-p {}: no thread for a connection: {e}", l.spec);
        }
    }
}

/// Bytes held between the two ends, per direction.
const RELAY_BUFFER: usize = 64 * 1024;

/// One direction of a forwarded connection.
struct Direction {
    buf: Vec<u8>,
    /// `buf[start..end]` waits to be sent on.
    start: usize,
    end: usize,
    /// The source ended; shut the destination's writing once flushed.
    eof: bool,
    /// The destination's writing was shut.
    closed: bool,
}

impl Direction {
    fn new() -> Direction {
        Direction { buf: vec![0; RELAY_BUFFER], start: 0, end: 0, eof: false, closed: false }
    }

    fn pending(&self) -> bool {
        self.start < self.end
    }

    /// True once the source ended and everything went on.
    fn done(&self) -> bool {
        self.closed
    }
}

/// Forwards one accepted host connection to `port` inside until both
/// directions end; an error on either side resets the other.
fn forward_connection(net: &Arc<Network>, host: OwnedFd, port: u16) {
    let me = Forwarder::new();
    let inside = match connect_inside(net, &me, n::SOCK_STREAM, port) {
        Ok(s) => s,
        Err(_) => return reset(host),
    };
    let mut to_inside = Direction::new();
    let mut to_host = Direction::new();
    let failed = loop {
        // Registered before trying, so no wake between the two is lost.
        let _registered = inside.poll_queue().register(&me.waiter);
        let mut progress = false;
        // Host to sandbox.
        if !to_inside.pending() && !to_inside.eof {
            match host_recv(host.as_fd(), &mut to_inside.buf) {
                Ok(0) => to_inside.eof = true,
                Ok(k) => (to_inside.start, to_inside.end) = (0, k),
                Err(Errno::EAGAIN) => {}
                Err(_) => break true,
            }
            progress |= to_inside.pending() || to_inside.eof;
        }
        if to_inside.pending() {
            let data = [GuestSlice::from(&to_inside.buf[to_inside.start..to_inside.end])];
            let msg = SendMsg {
                data: &data,
                to: None,
                control: Control::default(),
                flags: n::MSG_DONTWAIT | n::MSG_NOSIGNAL,
            };
            match me.with_call(|call| inside.send(call, msg)) {
                Ok(k) => {
                    to_inside.start += k;
                    progress |= k > 0;
                }
                Err(Errno::EAGAIN) => {}
                Err(_) => break true,
            }
        }
        if to_inside.eof && !to_inside.pending() && !to_inside.closed {
            let _ = me.with_call(|call| inside.shutdown(call, n::SHUT_WR));
            to_inside.closed = true;
            progress = true;
        }
        // Sandbox to host.
        if !to_host.pending() && !to_host.eof {
            let bufs = [GuestSliceMut::from(&mut to_host.buf[..])];
            let msg = RecvMsg { bufs: &bufs, flags: n::MSG_DONTWAIT, want_control: false };
            match me.with_call(|call| inside.recv(call, msg)) {
                Ok(r) if r.ret == 0 => to_host.eof = true,
                Ok(r) => (to_host.start, to_host.end) = (0, r.ret),
                Err(Errno::EAGAIN) => {}
                Err(_) => break true,
            }
            progress |= to_host.pending() || to_host.eof;
        }
        if to_host.pending() {
            match host_send(host.as_fd(), &to_host.buf[to_host.start..to_host.end]) {
                Ok(k) => {
                    to_host.start += k;
                    progress |= k > 0;
                }
                Err(Errno::EAGAIN) => {}
                Err(_) => break true,
            }
        }
        if to_host.eof && !to_host.pending() && !to_host.closed {
            // SAFETY: shutdown(2) takes no pointers.
            unsafe { libc::shutdown(host.as_raw_fd(), libc::SHUT_WR) };
            to_host.closed = true;
            progress = true;
        }
        if to_inside.done() && to_host.done() {
            break false;
        }
        if !progress {
            let mut events = 0;
            if !to_inside.pending() && !to_inside.eof {
                events |= libc::POLLIN;
            }
            if to_host.pending() {
                events |= libc::POLLOUT;
            }
            me.sleep(host.as_fd(), events, None);
        }
    };
    if failed {
        let linger = [1i32.to_ne_bytes(), 0i32.to_ne_bytes()].concat();
        let _ = me.with_call(|call| inside.setsockopt(call, n::SOL_SOCKET, n::SO_LINGER, &linger));
        reset(host);
    }
}

/// A UDP peer of a published port, with its socket inside.
struct Peer {
    inside: Arc<dyn Socket>,
    last: Instant,
}

/// How long a UDP peer's socket inside lasts without traffic (docker's
/// proxy keeps its UDP flows 90 seconds).
const UDP_IDLE: Duration = Duration::from_secs(90);
/// Most UDP peers forwarded at once; past it the longest idle goes.
const UDP_PEERS: usize = 1024;
/// The largest UDP datagram.
const DATAGRAM_MAX: usize = 65_536;

/// Forwards the datagrams of a published UDP port: each host peer gets a
/// socket inside, connected to the port, whose replies go back to it.
fn forward_datagrams(net: &Arc<Network>, l: &Listener) {
    let me = Forwarder::new();
    let mut peers: HashMap<Vec<u8>, Peer> = HashMap::new();
    let mut buf = vec![0u8; DATAGRAM_MAX];
    loop {
        let sockets: Vec<Arc<dyn Socket>> = peers.values().map(|p| p.inside.clone()).collect();
        let _registered: Vec<_> = sockets.iter().map(|s| s.poll_queue().register(&me.waiter)).collect();
        let mut progress = false;
        // Host to sandbox.
        let mut addr = [0u8; super::SOCKADDR_MAX];
        let mut len = addr.len() as libc::socklen_t;
        // SAFETY: the host writes at most buf.len() bytes into `buf` and
        // `len` bytes of address into `addr`, both ours.
        let r = unsafe {
            libc::recvfrom(
                l.fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
                addr.as_mut_ptr().cast(),
                &mut len,
            )
        };
        if r >= 0 {
            progress = true;
            let from = addr[..(len as usize).min(addr.len())].to_vec();
            if !peers.contains_key(&from) {
                if peers.len() >= UDP_PEERS
                    && let Some(oldest) = peers.iter().min_by_key(|(_, p)| p.last).map(|(k, _)| k.clone())
                {
                    peers.remove(&oldest);
                }
                if let Ok(inside) = connect_inside(net, &me, n::SOCK_DGRAM, l.spec.port) {
                    peers.insert(from.clone(), Peer { inside, last: Instant::now() });
                }
            }
            if let Some(p) = peers.get_mut(&from) {
                p.last = Instant::now();
                let data = [GuestSlice::from(&buf[..r as usize])];
                let msg = SendMsg { data: &data, to: None, control: Control::default(), flags: n::MSG_DONTWAIT };
                // A datagram that finds no room is dropped, as UDP may.
                let _ = me.with_call(|call| p.inside.send(call, msg));
            }
        }
        // Sandbox to host.
        for (to, p) in peers.iter_mut() {
            loop {
                let bufs = [GuestSliceMut::from(&mut buf[..])];
                let msg = RecvMsg { bufs: &bufs, flags: n::MSG_DONTWAIT, want_control: false };
                let Ok(got) = me.with_call(|call| p.inside.recv(call, msg)) else { break };
                let k = got.ret.min(buf.len());
                // SAFETY: the host reads `k` bytes of `buf` and the address
                // `to`, both ours.
                unsafe {
                    libc::sendto(
                        l.fd.as_raw_fd(),
                        buf.as_ptr().cast(),
                        k,
                        libc::MSG_DONTWAIT,
                        to.as_ptr().cast(),
                        to.len() as u32,
                    )
                };
                p.last = Instant::now();
                progress = true;
            }
        }
        let now = Instant::now();
        peers.retain(|_, p| now.duration_since(p.last) < UDP_IDLE);
        if !progress {
            let next = peers.values().map(|p| p.last + UDP_IDLE).min();
            me.sleep(l.fd.as_fd(), libc::POLLIN, next.map(|t| t.saturating_duration_since(now)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_syntax() {
        let p = PublishSpec::parse("8080:80").unwrap();
        assert_eq!(p, PublishSpec { host_ip: "0.0.0.0".parse().unwrap(), host_port: 8080, port: 80, udp: false });
        let p = PublishSpec::parse("127.0.0.1:5353:53/udp").unwrap();
        assert_eq!(p, PublishSpec { host_ip: "127.0.0.1".parse().unwrap(), host_port: 5353, port: 53, udp: true });
        let p = PublishSpec::parse("[::1]:8443:443/tcp").unwrap();
        assert_eq!(p, PublishSpec { host_ip: "::1".parse().unwrap(), host_port: 8443, port: 443, udp: false });
        for bad in ["80", "0:80", "8080:70000", "a:b", "8080:80/sctp", "1.2.3:80:80", "::1:80:80", "1:2:3:4"] {
            assert!(PublishSpec::parse(bad).is_err(), "{bad}");
        }
    }
}
