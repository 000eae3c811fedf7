//! `AF_INET`/`AF_INET6` on the sandbox's own loopback (`--network=none`).
//!
//! With no network but loopback, no packet ever needs to exist: the stack
//! is packetless and Linux-shaped. A TCP connection is a pair of byte
//! streams between two sentry sockets ([`tcp`]); a UDP datagram goes
//! straight to the queue of the socket bound to its destination ([`udp`]).
//! What an application sees is Linux's: the port table's conflicts
//! (SO_REUSEADDR, SO_REUSEPORT, IPV6_V6ONLY, the v4 and v6 wildcards), the
//! ephemeral range, the errno of every refusal, TCP's states as poll,
//! SO_ERROR and TCP_INFO report them. Addresses outside loopback are no
//! one's: bind gives EADDRNOTAVAIL, connect and sendto ENETUNREACH.
//!
//! # Reaching the stack from outside (publish)
//!
//! The sentry's own code (the `-p` forwarder) reaches sandbox servers
//! through [`Loopback::connect_from_outside`], which gives a connected
//! [`tcp::TcpSocket`] whose peer waits in the listener's accept queue as
//! any client's would, and [`Loopback::udp_from_outside`], which gives a
//! [`udp::UdpSocket`] connected to the sandbox's port. Both are driven
//! without blocking: [`tcp::TcpSocket::read_nonblocking`],
//! [`tcp::TcpSocket::write_nonblocking`], [`tcp::TcpSocket::shutdown_write`],
//! [`udp::UdpSocket::send_nonblocking`], [`udp::UdpSocket::recv_nonblocking`],
//! with [`Socket::poll`] and [`Socket::poll_queue`] saying when to try
//! again. Dropping the socket closes it as a close(2) would.

pub mod tcp;
pub mod udp;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, Mutex, Weak};

use linux_raw_sys::net as n;

use super::accounting::SocketMemory;
use super::{NetCall, Socket};
use crate::auth::cap;
use crate::errno::Errno;

/// net.ipv4.ip_local_port_range.
pub const EPHEMERAL_FIRST: u16 = 32768;
pub const EPHEMERAL_LAST: u16 = 60999;
/// net.ipv4.ip_unprivileged_port_start.
const UNPRIVILEGED_PORT_START: u16 = 1024;

/// Protocol numbers.
pub const IPPROTO_IP: u32 = 0;
pub const IPPROTO_ICMP: u32 = 1;
pub const IPPROTO_TCP: u32 = 6;
pub const IPPROTO_UDP: u32 = 17;
pub const IPPROTO_IPV6: u32 = 41;
pub const IPPROTO_ICMPV6: u32 = 58;

/// An address and port as the stack keeps them: a v4-mapped v6 address is
/// the v4 address it maps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub ip: IpAddr,
    pub port: u16,
}

/// A v6 address as the stack keeps it.
fn unmap(ip: Ipv6Addr) -> IpAddr {
    match ip.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4),
        None => IpAddr::V6(ip),
    }
}

/// True if `ip` is one of the sandbox's own addresses (or a wildcard).
fn is_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => a.is_loopback() || a.is_unspecified(),
        IpAddr::V6(a) => a.is_loopback() || a.is_unspecified(),
    }
}

/// Where a packet to `ip` would go from the sandbox: its loopback address
/// (a wildcard destination is loopback, as Linux routes it), or
/// ENETUNREACH.
fn route(ip: IpAddr) -> Result<IpAddr, Errno> {
    match ip {
        IpAddr::V4(a) if a.is_unspecified() => Ok(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        IpAddr::V6(a) if a.is_unspecified() => Ok(IpAddr::V6(Ipv6Addr::LOCALHOST)),
        ip if is_local(ip) => Ok(ip),
        _ => Err(Errno::ENETUNREACH),
    }
}

/// The source address of a packet to `dst` (already routed): the route's
/// preferred source, 127.0.0.1 or ::1.
fn source_for(dst: IpAddr) -> IpAddr {
    match dst {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
    }
}

fn family_of(addr: &[u8]) -> Option<u32> {
    addr.get(..2).map(|b| u16::from_ne_bytes([b[0], b[1]]) as u32)
}

/// A `sockaddr_in`'s endpoint (at least 16 bytes).
fn parse_v4(addr: &[u8]) -> Endpoint {
    let port = u16::from_be_bytes([addr[2], addr[3]]);
    let ip = Ipv4Addr::new(addr[4], addr[5], addr[6], addr[7]);
    Endpoint { ip: IpAddr::V4(ip), port }
}

/// A `sockaddr_in6`'s endpoint (at least 24 bytes).
fn parse_v6(addr: &[u8]) -> Endpoint {
    let port = u16::from_be_bytes([addr[2], addr[3]]);
    let b: [u8; 16] = addr[8..24].try_into().expect("sixteen bytes");
    Endpoint { ip: unmap(Ipv6Addr::from(b)), port }
}

/// sizeof(struct sockaddr_in) and SIN6_LEN_RFC2133.
const SOCKADDR_IN: usize = 16;
const SOCKADDR_IN6_MIN: usize = 24;

/// What an address argument names.
enum Target {
    /// AF_UNSPEC: disconnect (connect) or no address (v6 sendto).
    Unspec,
    Addr(Endpoint),
}

/// Reads the address of a connect or sendto on a socket of `v6`'s family,
/// as Linux's checks go (inet_stream_connect, inet_dgram_connect,
/// tcp_v4_connect, tcp_v6_connect, udp_sendmsg, udpv6_sendmsg).
/// `datagram` allows a v6 socket an `AF_INET` address, as UDP does;
/// `connecting` makes AF_UNSPEC a disconnect, where a v4 datagram send
/// takes it as AF_INET.
fn parse_target(v6: bool, addr: &[u8], datagram: bool, connecting: bool) -> Result<Target, Errno> {
    let family = family_of(addr).ok_or(Errno::EINVAL)?;
    if family == n::AF_UNSPEC && (v6 || !datagram || connecting) {
        return Ok(Target::Unspec);
    }
    if v6 {
        match family {
            n::AF_INET6 if addr.len() >= SOCKADDR_IN6_MIN => Ok(Target::Addr(parse_v6(addr))),
            n::AF_INET if datagram && addr.len() >= SOCKADDR_IN => Ok(Target::Addr(parse_v4(addr))),
            n::AF_INET6 | n::AF_INET => Err(Errno::EINVAL),
            _ if datagram => Err(Errno::EINVAL),
            _ if addr.len() < SOCKADDR_IN6_MIN => Err(Errno::EINVAL),
            _ => Err(Errno::EAFNOSUPPORT),
        }
    } else {
        if addr.len() < SOCKADDR_IN {
            return Err(Errno::EINVAL);
        }
        // A v4 datagram socket takes AF_UNSPEC as AF_INET.
        if family != n::AF_INET && family != n::AF_UNSPEC {
            return Err(Errno::EAFNOSUPPORT);
        }
        Ok(Target::Addr(parse_v4(addr)))
    }
}

/// Reads a bind address (inet_bind, inet6_bind).
fn parse_bind(v6: bool, addr: &[u8]) -> Result<(Endpoint, bool), Errno> {
    if v6 {
        if addr.len() < SOCKADDR_IN6_MIN {
            return Err(Errno::EINVAL);
        }
        if family_of(addr) != Some(n::AF_INET6) {
            return Err(Errno::EAFNOSUPPORT);
        }
        let b: [u8; 16] = addr[8..24].try_into().expect("sixteen bytes");
        let mapped = Ipv6Addr::from(b).to_ipv4_mapped().is_some();
        Ok((parse_v6(addr), mapped))
    } else {
        if addr.len() < SOCKADDR_IN {
            return Err(Errno::EINVAL);
        }
        let ep = parse_v4(addr);
        match family_of(addr) {
            Some(n::AF_INET) => {}
            // Old programs bind AF_UNSPEC to INADDR_ANY; Linux lets them.
            Some(n::AF_UNSPEC) if ep.ip == IpAddr::V4(Ipv4Addr::UNSPECIFIED) => {}
            _ => return Err(Errno::EAFNOSUPPORT),
        }
        Ok((ep, false))
    }
}

/// The address as a socket of `v6`'s family reports it: `sockaddr_in`, or
/// `sockaddr_in6` with v4 addresses mapped.
pub fn sockaddr(v6: bool, ep: Endpoint) -> Vec<u8> {
    if v6 {
        let ip = match ep.ip {
            IpAddr::V4(a) => a.to_ipv6_mapped(),
            IpAddr::V6(a) => a,
        };
        let mut b = Vec::with_capacity(28);
        b.extend_from_slice(&(n::AF_INET6 as u16).to_ne_bytes());
        b.extend_from_slice(&ep.port.to_be_bytes());
        b.extend_from_slice(&[0; 4]);
        b.extend_from_slice(&ip.octets());
        b.extend_from_slice(&[0; 4]);
        b
    } else {
        let ip = match ep.ip {
            IpAddr::V4(a) => a,
            IpAddr::V6(a) => a.to_ipv4_mapped().unwrap_or(Ipv4Addr::UNSPECIFIED),
        };
        let mut b = Vec::with_capacity(16);
        b.extend_from_slice(&(n::AF_INET as u16).to_ne_bytes());
        b.extend_from_slice(&ep.port.to_be_bytes());
        b.extend_from_slice(&ip.octets());
        b.extend_from_slice(&[0; 8]);
        b
    }
}

/// The wildcard of a socket's family.
fn any(v6: bool) -> IpAddr {
    if v6 { IpAddr::V6(Ipv6Addr::UNSPECIFIED) } else { IpAddr::V4(Ipv4Addr::UNSPECIFIED) }
}

/// What one address binding covers of one address family.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Cover<A> {
    Nothing,
    All,
    One(A),
}

impl<A: PartialEq> Cover<A> {
    fn meets(&self, other: &Cover<A>) -> bool {
        match (self, other) {
            (Cover::Nothing, _) | (_, Cover::Nothing) => false,
            (Cover::All, _) | (_, Cover::All) => true,
            (Cover::One(a), Cover::One(b)) => a == b,
        }
    }

    fn holds(&self, a: &A) -> bool {
        match self {
            Cover::Nothing => false,
            Cover::All => true,
            Cover::One(b) => b == a,
        }
    }
}

/// One socket's claim on a port.
#[derive(Clone)]
struct Claim<T> {
    id: u64,
    ip: IpAddr,
    v6only: bool,
    reuseaddr: bool,
    reuseport: bool,
    listening: bool,
    uid: u32,
    /// A connected datagram socket's peer: it takes only what comes from
    /// there.
    peer: Option<Endpoint>,
    socket: Weak<T>,
}

impl<T> Claim<T> {
    fn v4(&self) -> Cover<Ipv4Addr> {
        match self.ip {
            IpAddr::V4(a) if a.is_unspecified() => Cover::All,
            IpAddr::V4(a) => Cover::One(a),
            IpAddr::V6(a) if a.is_unspecified() && !self.v6only => Cover::All,
            IpAddr::V6(_) => Cover::Nothing,
        }
    }

    fn v6(&self) -> Cover<Ipv6Addr> {
        match self.ip {
            IpAddr::V4(_) => Cover::Nothing,
            IpAddr::V6(a) if a.is_unspecified() => Cover::All,
            IpAddr::V6(a) => Cover::One(a),
        }
    }

    fn overlaps(&self, other: &Claim<T>) -> bool {
        self.v4().meets(&other.v4()) || self.v6().meets(&other.v6())
    }

    /// True if the claim takes packets for `ip`; a higher score is a more
    /// exact match (Linux's compute_score prefers an exact address, then a
    /// socket of the packet's own family).
    fn score(&self, ip: IpAddr) -> Option<u32> {
        let holds = match ip {
            IpAddr::V4(a) => self.v4().holds(&a),
            IpAddr::V6(a) => self.v6().holds(&a),
        };
        if !holds {
            return None;
        }
        let exact = !self.ip.is_unspecified();
        let same_family = self.ip.is_ipv4() == ip.is_ipv4();
        Some(2 * exact as u32 + same_family as u32)
    }
}

/// The claims on each port of one protocol.
struct PortTable<T> {
    ports: BTreeMap<u16, Vec<Claim<T>>>,
    /// Where the next ephemeral search starts.
    rotor: u16,
    /// Per port: the next of a SO_REUSEPORT group to take a connection.
    spread: BTreeMap<u16, usize>,
}

impl<T> PortTable<T> {
    fn new(seed: u16) -> Self {
        PortTable { ports: BTreeMap::new(), rotor: seed, spread: BTreeMap::new() }
    }

    /// True if `claim` may join the port's claims (inet_csk_bind_conflict,
    /// udp_lib_lport_inuse).
    fn fits(&self, port: u16, claim: &Claim<T>, stream: bool) -> bool {
        let Some(claims) = self.ports.get(&port) else { return true };
        claims.iter().filter(|c| c.id != claim.id).all(|c| {
            if !c.overlaps(claim) {
                return true;
            }
            let reuse = claim.reuseaddr && c.reuseaddr && (!stream || !c.listening);
            let reuseport = claim.reuseport && c.reuseport && claim.uid == c.uid;
            reuse || reuseport
        })
    }

    /// Adds `claim` at `port` (0: a free ephemeral port); the port.
    fn claim(&mut self, port: u16, claim: Claim<T>, stream: bool) -> Result<u16, Errno> {
        if port != 0 {
            if !self.fits(port, &claim, stream) {
                return Err(Errno::EADDRINUSE);
            }
            self.ports.entry(port).or_default().push(claim);
            return Ok(port);
        }
        let span = (EPHEMERAL_LAST - EPHEMERAL_FIRST) as u32 + 1;
        for i in 0..span {
            let p = EPHEMERAL_FIRST + ((self.rotor as u32 + i) % span) as u16;
            if !self.ports.contains_key(&p) {
                self.rotor = ((self.rotor as u32 + i + 1) % span) as u16;
                self.ports.entry(p).or_default().push(claim);
                return Ok(p);
            }
        }
        Err(Errno::EADDRINUSE)
    }

    fn release(&mut self, port: u16, id: u64) {
        if let Some(claims) = self.ports.get_mut(&port) {
            claims.retain(|c| c.id != id);
            if claims.is_empty() {
                self.ports.remove(&port);
                self.spread.remove(&port);
            }
        }
    }

    fn get_mut(&mut self, port: u16, id: u64) -> Option<&mut Claim<T>> {
        self.ports.get_mut(&port)?.iter_mut().find(|c| c.id == id)
    }

    /// The live socket whose claim best matches `ip` on `port` among
    /// those `accept` takes; of a SO_REUSEPORT group, the next in turn.
    /// The other sockets looked at come back too, to be let go once the
    /// table is: the last reference to a socket may be one of them, and
    /// its drop takes the table's lock.
    fn lookup(&mut self, ip: IpAddr, port: u16, accept: impl Fn(&Claim<T>) -> bool) -> (Option<Arc<T>>, Vec<Arc<T>>) {
        let mut others = Vec::new();
        let Some(claims) = self.ports.get(&port) else { return (None, others) };
        let mut best: Vec<(bool, Arc<T>)> = Vec::new();
        let mut top = 0;
        for c in claims {
            let Some(score) = c.score(ip) else { continue };
            if !accept(c) {
                continue;
            }
            let Some(s) = c.socket.upgrade() else { continue };
            if best.is_empty() || score > top {
                others.extend(best.drain(..).map(|b| b.1));
                top = score;
            }
            if score == top {
                best.push((c.reuseport, s));
            } else {
                others.push(s);
            }
        }
        let pick = if best.len() > 1 && best.iter().all(|b| b.0) {
            let turn = self.spread.entry(port).or_default();
            let pick = *turn % best.len();
            *turn = turn.wrapping_add(1);
            pick
        } else {
            // Of sockets sharing a port without SO_REUSEPORT, the first bound.
            0
        };
        if best.is_empty() {
            return (None, others);
        }
        let found = best.swap_remove(pick).1;
        others.extend(best.into_iter().map(|b| b.1));
        (Some(found), others)
    }

    fn all(&self) -> Vec<Arc<T>> {
        self.ports.values().flatten().filter_map(|c| c.socket.upgrade()).collect()
    }
}

/// The sandbox's loopback stack: the port tables every inet socket shares.
pub struct Loopback {
    tcp: Mutex<PortTable<tcp::TcpSocket>>,
    udp: Mutex<PortTable<udp::UdpSocket>>,
    /// What queued stream and datagram data is charged to.
    memory: Arc<SocketMemory>,
    this: Weak<Loopback>,
}

/// A socket's identity in the port table: its inode number, as
/// /proc/net shows it.
fn next_id() -> u64 {
    super::next_socket_ino()
}

impl Loopback {
    pub fn new(memory: Arc<SocketMemory>) -> Arc<Loopback> {
        // Where the ephemeral search starts differs between sandboxes, as
        // Linux's is randomised.
        let seed = (std::process::id() as u64).wrapping_mul(0x9e37_79b9) as u16;
        Arc::new_cyclic(|this| Loopback {
            tcp: Mutex::new(PortTable::new(seed)),
            udp: Mutex::new(PortTable::new(seed.wrapping_add(7919))),
            memory,
            this: this.clone(),
        })
    }

    fn arc(&self) -> Arc<Loopback> {
        self.this.upgrade().expect("the stack outlives its sockets")
    }

    /// socket(2) for AF_INET (`v6` false) or AF_INET6, as inet_create and
    /// inet6_create answer: TCP and UDP; raw sockets are EPERM, as in a
    /// container without CAP_NET_RAW; ICMP datagram sockets EACCES, as
    /// net.ipv4.ping_group_range's default allows nobody.
    pub fn create(&self, call: &NetCall, v6: bool, kind: u32, protocol: u32) -> Result<Arc<dyn Socket>, Errno> {
        let family = if v6 { n::AF_INET6 } else { n::AF_INET };
        match kind {
            n::SOCK_STREAM => match protocol {
                IPPROTO_IP | IPPROTO_TCP => {
                    Ok(tcp::TcpSocket::new(self.arc(), v6, call.ctx.creds.uid.effective) as Arc<dyn Socket>)
                }
                _ => Err(Errno::EPROTONOSUPPORT),
            },
            n::SOCK_DGRAM => match protocol {
                IPPROTO_IP | IPPROTO_UDP => {
                    Ok(udp::UdpSocket::new(self.arc(), v6, call.ctx.creds.uid.effective) as Arc<dyn Socket>)
                }
                IPPROTO_ICMP if family == n::AF_INET => Err(Errno::EACCES),
                IPPROTO_ICMPV6 if family == n::AF_INET6 => Err(Errno::EACCES),
                _ => Err(Errno::EPROTONOSUPPORT),
            },
            n::SOCK_RAW => Err(Errno::EPERM),
            _ => Err(Errno::ESOCKTNOSUPPORT),
        }
    }

    /// Connects a new sentry-side TCP socket to the sandbox's listener on
    /// `port` (of 127.0.0.1, or ::1 if `v6`), as a client inside would: the
    /// listener accepts its peer. ECONNREFUSED if nothing listens, EAGAIN
    /// if the listener's queue is full.
    pub fn connect_from_outside(&self, port: u16, v6: bool) -> Result<Arc<tcp::TcpSocket>, Errno> {
        let s = tcp::TcpSocket::new(self.arc(), v6, 0);
        let ip = if v6 { IpAddr::V6(Ipv6Addr::LOCALHOST) } else { IpAddr::V4(Ipv4Addr::LOCALHOST) };
        s.connect_nonblocking(Endpoint { ip, port })?;
        Ok(s)
    }

    /// A new sentry-side UDP socket connected to the sandbox's `port` (of
    /// 127.0.0.1, or ::1 if `v6`): what it sends arrives from it, and
    /// replies to it come back to it.
    pub fn udp_from_outside(&self, port: u16, v6: bool) -> Result<Arc<udp::UdpSocket>, Errno> {
        let s = udp::UdpSocket::new(self.arc(), v6, 0);
        let ip = if v6 { IpAddr::V6(Ipv6Addr::LOCALHOST) } else { IpAddr::V4(Ipv4Addr::LOCALHOST) };
        s.connect_to(Endpoint { ip, port })?;
        Ok(s)
    }

    /// The lines of /proc/net/tcp (`v6` false) or tcp6.
    pub fn proc_tcp(&self, v6: bool) -> String {
        let sockets = self.tcp.lock().unwrap().all();
        let width = (!v6).then_some(149);
        let mut out = padded((if v6 { TCP6_HEADER } else { TCP_HEADER }).to_string(), width);
        for (i, s) in sockets.iter().filter(|s| s.is_v6() == v6).enumerate() {
            // refcnt, address, rto, ato, quick/pingpong, cwnd, ssthresh.
            let line = format!("{} 1 0000000000000000 100 0 0 10 -1", proc_fields(i, 4, v6, &s.proc_entry()));
            out.push_str(&padded(line, width));
        }
        out
    }

    /// The lines of /proc/net/udp (`v6` false) or udp6.
    pub fn proc_udp(&self, v6: bool) -> String {
        let sockets = self.udp.lock().unwrap().all();
        let width = (!v6).then_some(127);
        let mut out = padded((if v6 { UDP6_HEADER } else { UDP_HEADER }).to_string(), width);
        for (i, s) in sockets.iter().filter(|s| s.is_v6() == v6).enumerate() {
            // refcnt, address, drops.
            let line = format!("{} 2 0000000000000000 0", proc_fields(i, 5, v6, &s.proc_entry()));
            out.push_str(&padded(line, width));
        }
        out
    }
}

/// What /proc/net lists of one socket.
pub(crate) struct ProcEntry {
    local: Endpoint,
    remote: Endpoint,
    state: u8,
    tx_queue: usize,
    rx_queue: usize,
    uid: u32,
    ino: u64,
}

const TCP_HEADER: &str =
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode";
const TCP6_HEADER: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode";
const UDP_HEADER: &str = "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops";
const UDP6_HEADER: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops";

/// /proc/net/tcp and udp pad each line to a fixed width (Linux's
/// seq_setwidth); the v6 files do not.
fn padded(line: String, width: Option<usize>) -> String {
    match width {
        Some(w) => format!("{line:<w$}\n"),
        None => format!("{line}\n"),
    }
}

/// An address as /proc/net shows it: the bytes in memory order, each
/// 32-bit word printed as a host-order number.
fn proc_addr(v6: bool, ep: Endpoint) -> String {
    let words = |octets: &[u8]| -> String {
        octets.chunks(4).map(|w| format!("{:08X}", u32::from_ne_bytes(w.try_into().expect("four bytes")))).collect()
    };
    let ip = if v6 {
        let a = match ep.ip {
            IpAddr::V4(a) => a.to_ipv6_mapped(),
            IpAddr::V6(a) => a,
        };
        words(&a.octets())
    } else {
        let a = match ep.ip {
            IpAddr::V4(a) => a,
            IpAddr::V6(_) => Ipv4Addr::UNSPECIFIED,
        };
        words(&a.octets())
    };
    format!("{ip}:{:04X}", ep.port)
}

/// The fields every line has, up to the inode; `sl` is four wide for
/// TCP and five for UDP.
fn proc_fields(i: usize, sl: usize, v6: bool, e: &ProcEntry) -> String {
    format!(
        "{i:sl$}: {} {} {:02X} {:08X}:{:08X} 00:00000000 00000000 {:5} {:8} {}",
        proc_addr(v6, e.local),
        proc_addr(v6, e.remote),
        e.state,
        e.tx_queue,
        e.rx_queue,
        e.uid,
        0,
        e.ino
    )
}

/// True if binding `port` needs CAP_NET_BIND_SERVICE the caller lacks.
fn port_forbidden(call: &NetCall, port: u16) -> bool {
    port != 0 && port < UNPRIVILEGED_PORT_START && !call.ctx.creds.has(cap::NET_BIND_SERVICE)
}

fn int_of(value: &[u8]) -> Result<i32, Errno> {
    let b: [u8; 4] = value.get(..4).ok_or(Errno::EINVAL)?.try_into().expect("four bytes");
    Ok(i32::from_ne_bytes(b))
}

/// An int option's value as setsockopt takes it: four bytes, or for the
/// options Linux reads with a byte fallback, one.
fn int_or_byte(value: &[u8]) -> Result<i32, Errno> {
    match value.len() {
        0 => Err(Errno::EINVAL),
        1..=3 => Ok(value[0] as i32),
        _ => int_of(value),
    }
}

fn int_bytes(v: i32) -> Vec<u8> {
    v.to_ne_bytes().to_vec()
}

/// The IP-level options of a socket (SOL_IP and SOL_IPV6) both protocols
/// keep.
#[derive(Clone, Debug)]
pub(crate) struct IpOptions {
    pub tos: i32,
    /// -1: the default (64).
    pub ttl: i32,
    pub recverr: bool,
    pub pktinfo: bool,
    pub recvtos: bool,
    pub recvttl: bool,
    pub mtu_discover: i32,
    pub freebind: bool,
    pub bind_address_no_port: bool,
    pub multicast_ttl: i32,
    pub multicast_loop: bool,
    pub multicast_if: [u8; 4],
    pub v6only: bool,
    /// -1: the default (64).
    pub unicast_hops: i32,
    pub multicast_hops: i32,
    pub multicast_loop6: bool,
    pub recvpktinfo6: bool,
    pub tclass: i32,
    pub recverr6: bool,
    pub multicast_if6: i32,
}

impl Default for IpOptions {
    fn default() -> Self {
        IpOptions {
            tos: 0,
            ttl: -1,
            recverr: false,
            pktinfo: false,
            recvtos: false,
            recvttl: false,
            // IP_PMTUDISC_WANT, net.ipv4.ip_no_pmtu_disc's default.
            mtu_discover: 1,
            freebind: false,
            bind_address_no_port: false,
            multicast_ttl: 1,
            multicast_loop: true,
            multicast_if: [0; 4],
            v6only: false,
            unicast_hops: -1,
            multicast_hops: 1,
            multicast_loop6: true,
            recvpktinfo6: false,
            tclass: 0,
            recverr6: false,
            multicast_if6: 0,
        }
    }
}

const IP_TOS: u32 = 1;
const IP_TTL: u32 = 2;
const IP_PKTINFO: u32 = 8;
const IP_MTU_DISCOVER: u32 = 10;
const IP_RECVERR: u32 = 11;
const IP_RECVTTL: u32 = 12;
const IP_RECVTOS: u32 = 13;
const IP_MTU: u32 = 14;
const IP_FREEBIND: u32 = 15;
const IP_BIND_ADDRESS_NO_PORT: u32 = 24;
const IP_MULTICAST_IF: u32 = 32;
const IP_MULTICAST_TTL: u32 = 33;
const IP_MULTICAST_LOOP: u32 = 34;
const IP_ADD_MEMBERSHIP: u32 = 35;
const IP_DROP_MEMBERSHIP: u32 = 36;
const IPV6_UNICAST_HOPS: u32 = 16;
const IPV6_MULTICAST_IF: u32 = 17;
const IPV6_MULTICAST_HOPS: u32 = 18;
const IPV6_MULTICAST_LOOP: u32 = 19;
const IPV6_MTU: u32 = 24;
const IPV6_RECVERR: u32 = 25;
pub(crate) const IPV6_V6ONLY: u32 = 26;
const IPV6_RECVPKTINFO: u32 = 49;
const IPV6_TCLASS: u32 = 67;
/// The loopback device's MTU.
const LOOPBACK_MTU: i32 = 65536;
/// The default hop limit (net.ipv4.ip_default_ttl, hop_limit).
pub(crate) const DEFAULT_TTL: i32 = 64;

impl IpOptions {
    /// getsockopt at SOL_IP or SOL_IPV6 for a socket of `v6`'s family;
    /// `connected` for IP_MTU. None: not an IP-level option here.
    pub fn get(&self, v6: bool, level: u32, name: u32, connected: bool) -> Result<Vec<u8>, Errno> {
        let flag = |b: bool| Ok(int_bytes(b as i32));
        match (level, name) {
            // ip_getsockopt refuses other levels so.
            (IPPROTO_IPV6, _) if !v6 => Err(Errno::EOPNOTSUPP),
            (IPPROTO_IP, IP_TOS) => Ok(int_bytes(self.tos)),
            (IPPROTO_IP, IP_TTL) => Ok(int_bytes(if self.ttl < 0 { DEFAULT_TTL } else { self.ttl })),
            (IPPROTO_IP, IP_PKTINFO) => flag(self.pktinfo),
            (IPPROTO_IP, IP_MTU_DISCOVER) => Ok(int_bytes(self.mtu_discover)),
            (IPPROTO_IP, IP_RECVERR) => flag(self.recverr),
            (IPPROTO_IP, IP_RECVTTL) => flag(self.recvttl),
            (IPPROTO_IP, IP_RECVTOS) => flag(self.recvtos),
            (IPPROTO_IP, IP_MTU) | (IPPROTO_IPV6, IPV6_MTU) => {
                if connected {
                    Ok(int_bytes(LOOPBACK_MTU))
                } else {
                    Err(Errno::ENOTCONN)
                }
            }
            (IPPROTO_IP, IP_FREEBIND) => flag(self.freebind),
            (IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT) => flag(self.bind_address_no_port),
            (IPPROTO_IP, IP_MULTICAST_IF) => Ok(self.multicast_if.to_vec()),
            (IPPROTO_IP, IP_MULTICAST_TTL) => Ok(int_bytes(self.multicast_ttl)),
            (IPPROTO_IP, IP_MULTICAST_LOOP) => flag(self.multicast_loop),
            (IPPROTO_IPV6, IPV6_V6ONLY) => flag(self.v6only),
            (IPPROTO_IPV6, IPV6_UNICAST_HOPS) => {
                Ok(int_bytes(if self.unicast_hops < 0 { DEFAULT_TTL } else { self.unicast_hops }))
            }
            (IPPROTO_IPV6, IPV6_MULTICAST_HOPS) => Ok(int_bytes(self.multicast_hops)),
            (IPPROTO_IPV6, IPV6_MULTICAST_LOOP) => flag(self.multicast_loop6),
            (IPPROTO_IPV6, IPV6_MULTICAST_IF) => Ok(int_bytes(self.multicast_if6)),
            (IPPROTO_IPV6, IPV6_RECVPKTINFO) => flag(self.recvpktinfo6),
            (IPPROTO_IPV6, IPV6_TCLASS) => Ok(int_bytes(self.tclass)),
            (IPPROTO_IPV6, IPV6_RECVERR) => flag(self.recverr6),
            _ => Err(Errno::ENOPROTOOPT),
        }
    }

    /// setsockopt at SOL_IP or SOL_IPV6, as do_ip_setsockopt and
    /// do_ipv6_setsockopt check the values. `bound` refuses IPV6_V6ONLY.
    pub fn set(&mut self, v6: bool, level: u32, name: u32, value: &[u8], bound: bool) -> Result<(), Errno> {
        match (level, name) {
            (IPPROTO_IP, IP_TOS) => {
                self.tos = int_or_byte(value)?;
                Ok(())
            }
            (IPPROTO_IP, IP_TTL) => {
                let v = int_or_byte(value)?;
                if v != -1 && !(1..=255).contains(&v) {
                    return Err(Errno::EINVAL);
                }
                self.ttl = v;
                Ok(())
            }
            (IPPROTO_IP, IP_PKTINFO) => int_or_byte(value).map(|v| self.pktinfo = v != 0),
            (IPPROTO_IP, IP_RECVERR) => int_or_byte(value).map(|v| self.recverr = v != 0),
            (IPPROTO_IP, IP_RECVTTL) => int_or_byte(value).map(|v| self.recvttl = v != 0),
            (IPPROTO_IP, IP_RECVTOS) => int_or_byte(value).map(|v| self.recvtos = v != 0),
            (IPPROTO_IP, IP_FREEBIND) => int_or_byte(value).map(|v| self.freebind = v != 0),
            // Every port here is one bind or connect claims at once; the
            // flag is kept for the application to read back.
            (IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT) => int_or_byte(value).map(|v| self.bind_address_no_port = v != 0),
            (IPPROTO_IP, IP_MTU_DISCOVER) => {
                let v = int_or_byte(value)?;
                if !(0..=5).contains(&v) {
                    return Err(Errno::EINVAL);
                }
                self.mtu_discover = v;
                Ok(())
            }
            (IPPROTO_IP, IP_MULTICAST_TTL) => {
                let v = int_or_byte(value)?;
                let v = if v == -1 { 1 } else { v };
                if !(0..=255).contains(&v) {
                    return Err(Errno::EINVAL);
                }
                self.multicast_ttl = v;
                Ok(())
            }
            (IPPROTO_IP, IP_MULTICAST_LOOP) => int_or_byte(value).map(|v| self.multicast_loop = v != 0),
            (IPPROTO_IP, IP_MULTICAST_IF) => {
                if value.len() < 4 {
                    return Err(Errno::EINVAL);
                }
                let a = [value[0], value[1], value[2], value[3]];
                if a != [0; 4] && !Ipv4Addr::from(a).is_loopback() {
                    return Err(Errno::EADDRNOTAVAIL);
                }
                self.multicast_if = a;
                Ok(())
            }
            // The loopback device takes no multicast: no group is joined.
            (IPPROTO_IP, IP_ADD_MEMBERSHIP) => {
                if value.len() < 8 {
                    Err(Errno::EINVAL)
                } else {
                    Err(Errno::ENODEV)
                }
            }
            (IPPROTO_IP, IP_DROP_MEMBERSHIP) => {
                if value.len() < 8 {
                    Err(Errno::EINVAL)
                } else {
                    Err(Errno::EADDRNOTAVAIL)
                }
            }
            (IPPROTO_IPV6, _) if !v6 => Err(Errno::ENOPROTOOPT),
            (IPPROTO_IPV6, IPV6_V6ONLY) => {
                let v = int_of(value)?;
                if bound {
                    return Err(Errno::EINVAL);
                }
                self.v6only = v != 0;
                Ok(())
            }
            (IPPROTO_IPV6, IPV6_UNICAST_HOPS) | (IPPROTO_IPV6, IPV6_MULTICAST_HOPS) => {
                let v = int_of(value)?;
                if !(-1..=255).contains(&v) {
                    return Err(Errno::EINVAL);
                }
                if name == IPV6_UNICAST_HOPS {
                    self.unicast_hops = v;
                } else {
                    self.multicast_hops = if v == -1 { 1 } else { v };
                }
                Ok(())
            }
            (IPPROTO_IPV6, IPV6_MULTICAST_LOOP) => {
                let v = int_of(value)?;
                if !(0..=1).contains(&v) {
                    return Err(Errno::EINVAL);
                }
                self.multicast_loop6 = v != 0;
                Ok(())
            }
            (IPPROTO_IPV6, IPV6_MULTICAST_IF) => {
                let v = int_of(value)?;
                // Interface 1 is lo.
                if v != 0 && v != 1 {
                    return Err(Errno::ENODEV);
                }
                self.multicast_if6 = v;
                Ok(())
            }
            (IPPROTO_IPV6, IPV6_RECVPKTINFO) => int_of(value).map(|v| self.recvpktinfo6 = v != 0),
            (IPPROTO_IPV6, IPV6_RECVERR) => int_of(value).map(|v| self.recverr6 = v != 0),
            (IPPROTO_IPV6, IPV6_TCLASS) => {
                let v = int_of(value)?;
                if !(-1..=255).contains(&v) {
                    return Err(Errno::EINVAL);
                }
                self.tclass = v.max(0);
                Ok(())
            }
            _ => Err(Errno::ENOPROTOOPT),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::{Context, Dentry};
    use crate::net::{RecvMsg, SendMsg, SocketNames, Ucred};
    use memory::{GuestSlice, GuestSliceMut};

    struct NoNames;

    impl SocketNames for NoNames {
        fn make_socket_node(&self, _: &[u8]) -> Result<Arc<Dentry>, Errno> {
            Err(Errno::EINVAL)
        }
        fn find_socket_node(&self, _: &[u8]) -> Result<Arc<Dentry>, Errno> {
            Err(Errno::EINVAL)
        }
    }

    fn test_loopback() -> Arc<Loopback> {
        let mf = Arc::new(memory::MemoryFile::new(1 << 24).unwrap());
        Loopback::new(SocketMemory::new(mf))
    }

    fn loopback_v4(port: u16) -> Vec<u8> {
        sockaddr(false, Endpoint { ip: IpAddr::V4(Ipv4Addr::LOCALHOST), port })
    }

    fn port_of(s: &dyn Socket) -> u16 {
        let a = s.local_addr().unwrap();
        u16::from_be_bytes([a[2], a[3]])
    }

    /// The publish path's view: a sentry-side client reaches a sandbox
    /// listener, and data goes both ways without blocking.
    #[test]
    fn outside_client_reaches_a_listener() {
        let ctx = Context::internal();
        let call = NetCall { ctx: &ctx, ucred: Ucred::default(), names: &NoNames, file: None };
        let lo = test_loopback();
        let listener = lo.create(&call, false, n::SOCK_STREAM, 0).unwrap();
        listener.bind(&call, &loopback_v4(0)).unwrap();
        let port = port_of(&*listener);
        assert_eq!(lo.connect_from_outside(port, false).err(), Some(Errno::ECONNREFUSED));
        listener.listen(&call, 4).unwrap();

        let outside = lo.connect_from_outside(port, false).unwrap();
        let (inside, peer) = listener.accept(&call).unwrap();
        assert_eq!(u16::from_be_bytes([peer[2], peer[3]]), port_of(&*outside));
        let mut buf = [0u8; 16];
        assert_eq!(outside.read_nonblocking(&mut buf), Err(Errno::EAGAIN));
        assert_eq!(outside.write_nonblocking(b"request").unwrap(), 7);
        let r =
            inside.recv(&call, RecvMsg { bufs: &[GuestSliceMut::from(&mut buf[..])], flags: 0, want_control: false });
        assert_eq!(r.unwrap().ret, 7);
        assert_eq!(&buf[..7], b"request");
        let sent = inside.send(
            &call,
            SendMsg { data: &[GuestSlice::from(&b"reply"[..])], to: None, control: Default::default(), flags: 0 },
        );
        assert_eq!(sent.unwrap(), 5);
        assert!(outside.poll() & crate::fs::POLLIN != 0);
        assert_eq!(outside.read_nonblocking(&mut buf).unwrap(), 5);
        outside.shutdown_write().unwrap();
        let r =
            inside.recv(&call, RecvMsg { bufs: &[GuestSliceMut::from(&mut buf[..])], flags: 0, want_control: false });
        assert_eq!(r.unwrap().ret, 0);
        drop(inside);
        assert_eq!(outside.read_nonblocking(&mut buf).unwrap(), 0);
    }

    #[test]
    fn outside_datagrams_reach_a_bound_socket_and_replies_come_back() {
        let ctx = Context::internal();
        let call = NetCall { ctx: &ctx, ucred: Ucred::default(), names: &NoNames, file: None };
        let lo = test_loopback();
        let server = lo.create(&call, false, n::SOCK_DGRAM, 0).unwrap();
        server.bind(&call, &loopback_v4(0)).unwrap();
        let outside = lo.udp_from_outside(port_of(&*server), false).unwrap();
        assert_eq!(outside.send_nonblocking(b"ping").unwrap(), 4);
        let mut buf = [0u8; 16];
        let r = server
            .recv(&call, RecvMsg { bufs: &[GuestSliceMut::from(&mut buf[..])], flags: 0, want_control: false })
            .unwrap();
        assert_eq!(r.ret, 4);
        let from = r.from.unwrap();
        let reply =
            SendMsg { data: &[GuestSlice::from(&b"pong"[..])], to: Some(&from), control: Default::default(), flags: 0 };
        assert_eq!(server.send(&call, reply).unwrap(), 4);
        assert_eq!(outside.recv_nonblocking(&mut buf).unwrap(), 4);
        assert_eq!(&buf[..4], b"pong");
        assert_eq!(outside.recv_nonblocking(&mut buf), Err(Errno::EAGAIN));
    }

    /// Queued data is charged to the sandbox's memory: with none left, a
    /// TCP send that cannot grow its buffer fails with ENOBUFS and a UDP
    /// datagram is dropped; memory given back makes both work again.
    #[test]
    fn queued_data_is_charged_to_the_sandbox_memory() {
        let ctx = Context::internal();
        let call = NetCall { ctx: &ctx, ucred: Ucred::default(), names: &NoNames, file: None };
        let mf = Arc::new(memory::MemoryFile::new(64 * memory::PAGE_SIZE).unwrap());
        let lo = Loopback::new(SocketMemory::new(mf.clone()));
        let listener = lo.create(&call, false, n::SOCK_STREAM, 0).unwrap();
        listener.bind(&call, &loopback_v4(0)).unwrap();
        listener.listen(&call, 4).unwrap();
        let outside = lo.connect_from_outside(port_of(&*listener), false).unwrap();
        let (inside, _) = listener.accept(&call).unwrap();
        let server = lo.create(&call, false, n::SOCK_DGRAM, 0).unwrap();
        server.bind(&call, &loopback_v4(0)).unwrap();
        let client = lo.udp_from_outside(port_of(&*server), false).unwrap();

        let free = 64 - mf.stats().frames_in_use - mf.stats().frames_charged;
        mf.charge(free).unwrap();
        assert_eq!(outside.write_nonblocking(b"request"), Err(Errno::ENOBUFS));
        assert_eq!(client.send_nonblocking(b"ping").unwrap(), 4, "the sender does not know");
        let mut buf = [0u8; 16];
        let recv = |s: &Arc<dyn Socket>, buf: &mut [u8]| {
            let flags = n::MSG_DONTWAIT;
            s.recv(&call, RecvMsg { bufs: &[GuestSliceMut::from(buf)], flags, want_control: false }).map(|r| r.ret)
        };
        assert_eq!(recv(&server, &mut buf), Err(Errno::EAGAIN), "dropped");

        mf.uncharge(free);
        assert_eq!(outside.write_nonblocking(b"request").unwrap(), 7);
        assert_eq!(recv(&inside, &mut buf), Ok(7));
        assert_eq!(client.send_nonblocking(b"ping").unwrap(), 4);
        assert_eq!(recv(&server, &mut buf), Ok(4));
        assert!(lo.memory.charged() > 0, "the connection keeps its buffer");
        drop((inside, outside, client, server, listener));
        assert_eq!(lo.memory.charged(), 0);
    }
}
