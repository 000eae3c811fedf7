//! `AF_NETLINK` sockets of protocol `NETLINK_ROUTE`: the route netlink
//! family through which the C library (`getifaddrs`, `if_nameindex`) and
//! iproute2 learn the sandbox's interfaces, addresses and routes.
//!
//! A request sent to the kernel (port 0) is answered at once: the answers
//! queue on the socket as datagrams, framed as Linux frames them (a dump's
//! messages packed into datagrams marked NLM_F_MULTI, then NLMSG_DONE on its
//! own; NLMSG_ERROR for errors and acknowledgements). The sandbox's
//! interfaces are fixed, so requests to change them are refused. Sockets
//! also reach each other by port, as Linux's netlink does.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};

use linux_raw_sys::net as n;

use super::interfaces::{self, IF_OPER_UNKNOWN, IFA_F_PERMANENT, Interface, Route, RouteDst};
use super::options::{RMEM_DEFAULT, SocketOptions, WMEM_DEFAULT};
use super::{Control, NetCall, Network, NetworkMode, Received, RecvMsg, SendMsg, Socket, Ucred, hostinet};
use crate::auth::cap;
use crate::errno::Errno;
use crate::fs::{POLLERR, POLLIN, POLLOUT, POLLRDNORM, POLLWRNORM};
use crate::waiter::{BlockError, WaitQueue};

/// The netlink protocols (NETLINK_*): only the route family is served.
pub const NETLINK_ROUTE: u32 = 0;
/// Protocols are numbered below MAX_LINKS.
const MAX_LINKS: u32 = 32;

/// SOL_NETLINK and its options.
pub const SOL_NETLINK: u32 = 270;
const NETLINK_ADD_MEMBERSHIP: u32 = 1;
const NETLINK_DROP_MEMBERSHIP: u32 = 2;
const NETLINK_PKTINFO: u32 = 3;
const NETLINK_BROADCAST_ERROR: u32 = 4;
const NETLINK_NO_ENOBUFS: u32 = 5;
const NETLINK_LISTEN_ALL_NSID: u32 = 8;
const NETLINK_LIST_MEMBERSHIPS: u32 = 9;
const NETLINK_CAP_ACK: u32 = 10;
const NETLINK_EXT_ACK: u32 = 11;
const NETLINK_GET_STRICT_CHK: u32 = 12;

/// Multicast groups of the route family (RTNLGRP_MAX).
const RTNLGRP_MAX: u32 = 39;

/// `struct nlmsghdr`.
const NLMSG_HDRLEN: usize = 16;
/// Message types below NLMSG_MIN_TYPE are control messages.
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLMSG_MIN_TYPE: u16 = 0x10;
/// nlmsg_flags.
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_MULTI: u16 = 0x2;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_DUMP_FILTERED: u16 = 0x20;
const NLM_F_ROOT: u16 = 0x100;
const NLM_F_MATCH: u16 = 0x200;
const NLM_F_DUMP: u16 = NLM_F_ROOT | NLM_F_MATCH;
/// On NLMSG_ERROR: the request is not copied back (NETLINK_CAP_ACK or an
/// acknowledgement).
const NLM_F_CAPPED: u16 = 0x100;

/// Route netlink message types.
const RTM_BASE: u16 = 16;
/// The last message type of the route family (RTM_MAX): past it a request
/// is unsupported, whoever asks.
const RTM_MAX: u16 = 123;
const RTM_NEWLINK: u16 = 16;
const RTM_GETLINK: u16 = 18;
const RTM_NEWADDR: u16 = 20;
const RTM_GETADDR: u16 = 22;
const RTM_NEWROUTE: u16 = 24;
const RTM_GETROUTE: u16 = 26;
const RTM_GETNEIGH: u16 = 30;
const RTM_NEWRULE: u16 = 32;
const RTM_GETRULE: u16 = 34;
/// The kind of a route message type: its low two bits past RTM_BASE.
const RTNL_KIND_GET: u16 = 2;

/// Address families in messages.
const AF_UNSPEC: u8 = 0;
const AF_INET: u8 = 2;
const AF_BRIDGE: u8 = 7;
const AF_INET6: u8 = 10;

/// IFLA_* attributes of a link message.
const IFLA_ADDRESS: u16 = 1;
const IFLA_BROADCAST: u16 = 2;
const IFLA_IFNAME: u16 = 3;
const IFLA_MTU: u16 = 4;
const IFLA_QDISC: u16 = 6;
const IFLA_STATS: u16 = 7;
const IFLA_PROTINFO: u16 = 12;
const IFLA_TXQLEN: u16 = 13;
const IFLA_MAP: u16 = 14;
const IFLA_OPERSTATE: u16 = 16;
const IFLA_LINKMODE: u16 = 17;
const IFLA_STATS64: u16 = 23;
const IFLA_AF_SPEC: u16 = 26;
const IFLA_GROUP: u16 = 27;
const IFLA_EXT_MASK: u16 = 29;
const IFLA_PROMISCUITY: u16 = 30;
const IFLA_NUM_TX_QUEUES: u16 = 31;
const IFLA_NUM_RX_QUEUES: u16 = 32;
const IFLA_CARRIER: u16 = 33;
const IFLA_CARRIER_CHANGES: u16 = 35;
const IFLA_PROTO_DOWN: u16 = 39;
const IFLA_GSO_MAX_SEGS: u16 = 40;
const IFLA_GSO_MAX_SIZE: u16 = 41;
const IFLA_XDP: u16 = 43;
const IFLA_CARRIER_UP_COUNT: u16 = 47;
const IFLA_CARRIER_DOWN_COUNT: u16 = 48;
const IFLA_MIN_MTU: u16 = 50;
const IFLA_MAX_MTU: u16 = 51;
const IFLA_ALT_IFNAME: u16 = 53;
const IFLA_GRO_MAX_SIZE: u16 = 58;
const IFLA_TSO_MAX_SIZE: u16 = 59;
const IFLA_TSO_MAX_SEGS: u16 = 60;
const IFLA_ALLMULTI: u16 = 61;
const IFLA_DEVLINK_PORT: u16 = 62;
const IFLA_GSO_IPV4_MAX_SIZE: u16 = 63;
const IFLA_GRO_IPV4_MAX_SIZE: u16 = 64;
const IFLA_DPLL_PIN: u16 = 65;
const IFLA_MAX_PACING_OFFLOAD_HORIZON: u16 = 66;
const IFLA_NETNS_IMMUTABLE: u16 = 67;
const IFLA_HEADROOM: u16 = 68;
const IFLA_TAILROOM: u16 = 69;
/// An attribute holding attributes.
const NLA_F_NESTED: u16 = 0x8000;
const IFLA_XDP_ATTACHED: u16 = 2;
const IFLA_INET_CONF: u16 = 1;
const IFLA_INET6_FLAGS: u16 = 1;
const IFLA_INET6_CONF: u16 = 2;
const IFLA_INET6_STATS: u16 = 3;
const IFLA_INET6_CACHEINFO: u16 = 5;
const IFLA_INET6_ICMP6STATS: u16 = 6;
const IFLA_INET6_TOKEN: u16 = 7;
const IFLA_INET6_ADDR_GEN_MODE: u16 = 8;
/// IFLA_EXT_MASK: leave the counters out.
const RTEXT_FILTER_SKIP_STATS: u32 = 1 << 3;

/// IFA_* attributes of an address message.
const IFA_ADDRESS: u16 = 1;
const IFA_LOCAL: u16 = 2;
const IFA_LABEL: u16 = 3;
const IFA_BROADCAST: u16 = 4;
const IFA_CACHEINFO: u16 = 6;
const IFA_FLAGS: u16 = 8;
const IFA_PROTO: u16 = 11;
/// IFA_PROTO of the loopback's own addresses (IFAPROT_KERNEL_LO).
const IFAPROT_KERNEL_LO: u8 = 1;

/// RTA_* attributes of a route message.
const RTA_DST: u16 = 1;
const RTA_OIF: u16 = 4;
const RTA_PRIORITY: u16 = 6;
const RTA_PREFSRC: u16 = 7;
const RTA_CACHEINFO: u16 = 12;
const RTA_TABLE: u16 = 15;
const RTA_PREF: u16 = 20;
const RTA_SRC: u16 = 2;
const RTA_UID: u16 = 25;
/// rtm_flags of a looked-up route: a clone, and (RTCF_LOCAL) delivered
/// locally.
const RTM_F_CLONED: u32 = 0x200;
const RTCF_LOCAL: u32 = 0x8000_0000;

/// FRA_* attributes of a routing rule, and its action.
const FRA_PRIORITY: u16 = 6;
const FRA_SUPPRESS_PREFIXLEN: u16 = 14;
const FRA_TABLE: u16 = 15;
const FRA_PROTOCOL: u16 = 21;
const FR_ACT_TO_TBL: u8 = 1;
/// The rules every namespace starts with, by family: (priority, table).
/// IPv6 has no rule for the default table.
const RULES_V4: &[(u32, u8)] = &[(0, RT_TABLE_LOCAL), (32766, RT_TABLE_MAIN), (32767, RT_TABLE_DEFAULT)];
const RULES_V6: &[(u32, u8)] = &[(0, RT_TABLE_LOCAL), (32766, RT_TABLE_MAIN)];
const RT_TABLE_DEFAULT: u8 = 253;
const RT_TABLE_MAIN: u8 = interfaces::RT_TABLE_MAIN;
const RT_TABLE_LOCAL: u8 = interfaces::RT_TABLE_LOCAL;

/// `struct sockaddr_nl`.
const SOCKADDR_NL: usize = 12;

/// The largest datagram a dump fills before starting another: Linux's
/// NLMSG_GOODSIZE for 4 KiB pages, or more once the reader has offered a
/// larger buffer (up to 32 KiB, less the skb's overhead).
const NLMSG_GOODSIZE: usize = 3776;
const DUMP_MAX: usize = 32768 - 320;

/// An IPv4 device's settings as IFLA_INET_CONF lists them
/// (IPV4_DEVCONF_FORWARDING onwards): Linux's defaults for the loopback.
const INET_DEVCONF: [i32; 33] =
    [0, 0, 0, 1, 1, 1, 1, 0, 1, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10000, 1000, 0, 0, 0, 0, 1];
/// An IPv6 device's settings as IFLA_INET6_CONF lists them (DEVCONF_*):
/// Linux's defaults for the loopback (hop limit 64, mtu 65536, ...).
const INET6_DEVCONF: [i32; 60] = [
    0, 64, 65536, 1, 1, 1, 1, -1, 4000, 1000, -1, 604800, 86400, 3, 600, 16, 0, 1, 1, 1, 60000, 0, 0, 0, 0, 0, 0, -1,
    0, 0, 10000, 1000, 1, 0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 3600000, 0, 0, 1, 0, 0, 0, 0, 0, 1024, 0, 65535, -1, 1, 0, 0,
    0,
];
/// IPSTATS_MIB_MAX and ICMP6_MIB_MAX: the counts the IPv6 statistics
/// attributes start with.
const IPSTATS_MIB_MAX: usize = 38;
const ICMP6_MIB_MAX: usize = 7;
/// IF_READY: the IPv6 device is up.
const IF_READY: u32 = 0x8000_0000;
/// ND's base reachable time and retransmission timer, in milliseconds.
const ND_REACHABLE_TIME: u32 = 30000;
const ND_RETRANS_TIME: u32 = 1000;

/// The netlink ports of one sandbox: every bound socket by port id.
#[derive(Default)]
pub struct Ports {
    inner: Mutex<PortTable>,
}

#[derive(Default)]
struct PortTable {
    sockets: HashMap<u32, Weak<NetlinkSocket>>,
    /// Where the search for a free port goes on once a process's id is
    /// taken (Linux's rover, counting down from -4097).
    rover: i32,
}

impl Ports {
    fn lookup(&self, port: u32) -> Option<Arc<NetlinkSocket>> {
        self.inner.lock().unwrap().sockets.get(&port).and_then(Weak::upgrade)
    }

    /// Claims `port`; EADDRINUSE if a live socket holds it.
    fn insert(&self, port: u32, s: &Weak<NetlinkSocket>) -> Result<(), Errno> {
        let mut t = self.inner.lock().unwrap();
        if t.sockets.get(&port).is_some_and(|w| w.strong_count() > 0) {
            return Err(Errno::EADDRINUSE);
        }
        t.sockets.insert(port, s.clone());
        Ok(())
    }

    /// Claims the caller's process id as the port, or, if that is taken, a
    /// negative one (Linux's netlink_autobind).
    fn autobind(&self, pid: i32, s: &Weak<NetlinkSocket>) -> u32 {
        let mut t = self.inner.lock().unwrap();
        let mut port = pid as u32;
        loop {
            if t.sockets.get(&port).is_none_or(|w| w.strong_count() == 0) {
                t.sockets.insert(port, s.clone());
                return port;
            }
            if t.rover >= -4096 {
                t.rover = -4097;
            }
            port = t.rover as u32;
            t.rover = t.rover.wrapping_sub(1).min(-4097);
        }
    }

    fn remove(&self, port: u32) {
        let mut t = self.inner.lock().unwrap();
        if t.sockets.get(&port).is_some_and(|w| w.strong_count() == 0) {
            t.sockets.remove(&port);
        }
    }

    /// The live sockets subscribed to `group` (1-based).
    fn members(&self, group: u32) -> Vec<Arc<NetlinkSocket>> {
        // The table's lock is let go before any socket's is taken: binding
        // takes them the other way round.
        let all: Vec<Arc<NetlinkSocket>> =
            self.inner.lock().unwrap().sockets.values().filter_map(Weak::upgrade).collect();
        all.into_iter().filter(|s| s.state.lock().unwrap().in_group(group)).collect()
    }
}

/// A queued datagram and who sent it.
struct Datagram {
    data: Vec<u8>,
    /// The sender's port (0 for the kernel) and the group it went to.
    from_port: u32,
    from_group: u32,
    creds: Ucred,
}

/// Per-socket flags of SOL_NETLINK.
#[derive(Clone, Copy, Default)]
struct Flags {
    pktinfo: bool,
    broadcast_error: bool,
    no_enobufs: bool,
    listen_all_nsid: bool,
    cap_ack: bool,
    ext_ack: bool,
    strict_chk: bool,
}

#[derive(Default)]
struct State {
    /// The port id once bound (explicitly or by autobind).
    port: Option<u32>,
    /// Multicast groups subscribed to: bit g-1 for group g.
    groups: u64,
    /// connect's destination.
    dst_port: u32,
    dst_group: u32,
    queue: VecDeque<Datagram>,
    /// Bytes queued, as the receive buffer counts them.
    queued: usize,
    /// A pending error (ENOBUFS after an overrun), reported once.
    error: Option<Errno>,
    flags: Flags,
    /// The largest buffer a receive has offered (Linux's max_recvmsg_len).
    max_recvmsg_len: usize,
}

impl State {
    fn in_group(&self, group: u32) -> bool {
        (1..=64).contains(&group) && self.groups & (1 << (group - 1)) != 0
    }
}

/// An AF_NETLINK socket.
pub struct NetlinkSocket {
    kind: u32,
    protocol: u32,
    network: Arc<Network>,
    this: Weak<NetlinkSocket>,
    state: Mutex<State>,
    options: SocketOptions,
    queue: WaitQueue,
}

/// socket(AF_NETLINK, kind, protocol).
pub fn create(network: &Arc<Network>, kind: u32, protocol: u32) -> Result<Arc<dyn Socket>, Errno> {
    if kind != n::SOCK_RAW && kind != n::SOCK_DGRAM {
        return Err(Errno::new(linux_raw_sys::errno::ESOCKTNOSUPPORT as u16));
    }
    // The other protocols (audit, uevents, netfilter, generic netlink...)
    // are not served: Linux answers so for one whose module is absent.
    if protocol >= MAX_LINKS || protocol != NETLINK_ROUTE {
        return Err(Errno::EPROTONOSUPPORT);
    }
    Ok(Arc::new_cyclic(|this| NetlinkSocket {
        kind,
        protocol,
        network: network.clone(),
        this: this.clone(),
        state: Mutex::new(State::default()),
        options: SocketOptions::new(WMEM_DEFAULT, RMEM_DEFAULT),
        queue: WaitQueue::default(),
    }))
}

/// A `sockaddr_nl`.
fn sockaddr_nl(port: u32, groups: u32) -> Vec<u8> {
    let mut b = Vec::with_capacity(SOCKADDR_NL);
    b.extend_from_slice(&(n::AF_NETLINK as u16).to_ne_bytes());
    b.extend_from_slice(&0u16.to_ne_bytes());
    b.extend_from_slice(&port.to_ne_bytes());
    b.extend_from_slice(&groups.to_ne_bytes());
    b
}

/// The port and groups of a `sockaddr_nl` the application gave.
fn parse_sockaddr_nl(addr: &[u8]) -> Result<(u32, u32), Errno> {
    if addr.len() < SOCKADDR_NL || u16::from_ne_bytes([addr[0], addr[1]]) != n::AF_NETLINK as u16 {
        return Err(Errno::EINVAL);
    }
    let port = u32::from_ne_bytes(addr[4..8].try_into().expect("four bytes"));
    let groups = u32::from_ne_bytes(addr[8..12].try_into().expect("four bytes"));
    Ok((port, groups))
}

/// The group number of a group mask's lowest bit (ffs): 0 for none.
fn first_group(mask: u32) -> u32 {
    if mask == 0 { 0 } else { mask.trailing_zeros() + 1 }
}

/// The mask a group number is delivered under in the sender's address.
fn group_mask(group: u32) -> u32 {
    if group == 0 || group > 32 { 0 } else { 1 << (group - 1) }
}

const fn align4(len: usize) -> usize {
    (len + 3) & !3
}

/// Builds netlink messages and their attributes.
struct MessageWriter {
    buf: Vec<u8>,
    /// Where each open message and nest starts.
    open: Vec<usize>,
}

impl MessageWriter {
    fn new() -> Self {
        MessageWriter { buf: Vec::new(), open: Vec::new() }
    }

    /// Starts a message: its header, then the family header `body`.
    fn begin(&mut self, kind: u16, flags: u16, seq: u32, port: u32, body: &[u8]) {
        self.open.push(self.buf.len());
        self.buf.extend_from_slice(&0u32.to_ne_bytes());
        self.buf.extend_from_slice(&kind.to_ne_bytes());
        self.buf.extend_from_slice(&flags.to_ne_bytes());
        self.buf.extend_from_slice(&seq.to_ne_bytes());
        self.buf.extend_from_slice(&port.to_ne_bytes());
        self.buf.extend_from_slice(body);
        self.pad();
    }

    /// Ends the innermost message or nest, setting its length.
    fn end(&mut self, width: usize) {
        let at = self.open.pop().expect("an open message");
        let len = self.buf.len() - at;
        if width == 4 {
            self.buf[at..at + 4].copy_from_slice(&(len as u32).to_ne_bytes());
        } else {
            self.buf[at..at + 2].copy_from_slice(&(len as u16).to_ne_bytes());
        }
    }

    fn end_message(&mut self) {
        self.end(4);
    }

    fn pad(&mut self) {
        self.buf.resize(align4(self.buf.len()), 0);
    }

    fn attr(&mut self, kind: u16, value: &[u8]) {
        self.buf.extend_from_slice(&((4 + value.len()) as u16).to_ne_bytes());
        self.buf.extend_from_slice(&kind.to_ne_bytes());
        self.buf.extend_from_slice(value);
        self.pad();
    }

    fn u8(&mut self, kind: u16, v: u8) {
        self.attr(kind, &[v]);
    }

    fn u16(&mut self, kind: u16, v: u16) {
        self.attr(kind, &v.to_ne_bytes());
    }

    fn u32(&mut self, kind: u16, v: u32) {
        self.attr(kind, &v.to_ne_bytes());
    }

    fn str(&mut self, kind: u16, s: &str) {
        let mut v = s.as_bytes().to_vec();
        v.push(0);
        self.attr(kind, &v);
    }

    fn begin_nest(&mut self, kind: u16) {
        self.open.push(self.buf.len());
        self.buf.extend_from_slice(&0u16.to_ne_bytes());
        self.buf.extend_from_slice(&kind.to_ne_bytes());
    }

    fn end_nest(&mut self) {
        self.end(2);
    }

    fn finish(self) -> Vec<u8> {
        self.buf
    }
}

fn ints(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|i| i.to_ne_bytes()).collect()
}

fn u64s(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|i| i.to_ne_bytes()).collect()
}

/// The `struct ifinfomsg` of an interface.
fn ifinfomsg(family: u8, i: &Interface) -> Vec<u8> {
    let mut b = vec![family, 0];
    b.extend_from_slice(&i.hw_type.to_ne_bytes());
    b.extend_from_slice(&(i.index as i32).to_ne_bytes());
    b.extend_from_slice(&i.flags.to_ne_bytes());
    b.extend_from_slice(&0u32.to_ne_bytes());
    b
}

/// The IPv6 attributes of an interface (inet6_fill_ifla6_attrs).
fn inet6_link_attrs(w: &mut MessageWriter) {
    w.u32(IFLA_INET6_FLAGS, IF_READY);
    // max_reasm_len, tstamp (the device's creation, at the sandbox's
    // start), reachable_time, retrans_time.
    w.attr(IFLA_INET6_CACHEINFO, &ints(&[65535, 0, ND_REACHABLE_TIME as i32, ND_RETRANS_TIME as i32]));
    w.attr(IFLA_INET6_CONF, &ints(&INET6_DEVCONF));
    let mut stats = vec![0u64; IPSTATS_MIB_MAX];
    stats[0] = IPSTATS_MIB_MAX as u64;
    w.attr(IFLA_INET6_STATS, &u64s(&stats));
    let mut icmp = vec![0u64; ICMP6_MIB_MAX];
    icmp[0] = ICMP6_MIB_MAX as u64;
    w.attr(IFLA_INET6_ICMP6STATS, &u64s(&icmp));
    w.attr(IFLA_INET6_TOKEN, &[0; 16]);
    w.u8(IFLA_INET6_ADDR_GEN_MODE, 0);
}

/// RTM_NEWLINK for an interface, as rtnl_fill_ifinfo writes it.
fn link_message(w: &mut MessageWriter, i: &Interface, flags: u16, seq: u32, port: u32, ext_mask: u32) {
    w.begin(RTM_NEWLINK, flags, seq, port, &ifinfomsg(AF_UNSPEC, i));
    w.str(IFLA_IFNAME, i.name);
    w.u32(IFLA_TXQLEN, i.tx_queue_len);
    w.u8(IFLA_OPERSTATE, IF_OPER_UNKNOWN);
    w.u8(IFLA_LINKMODE, 0);
    w.u8(IFLA_NETNS_IMMUTABLE, 1);
    w.u32(IFLA_MTU, i.mtu);
    w.u32(IFLA_MIN_MTU, 0);
    w.u32(IFLA_MAX_MTU, 0);
    w.u32(IFLA_GROUP, 0);
    w.u32(IFLA_PROMISCUITY, 0);
    w.u32(IFLA_ALLMULTI, 0);
    w.u32(IFLA_NUM_TX_QUEUES, 1);
    w.u32(IFLA_GSO_MAX_SEGS, 65535);
    w.u32(IFLA_GSO_MAX_SIZE, 65536);
    w.u32(IFLA_GRO_MAX_SIZE, 65536);
    w.u32(IFLA_GSO_IPV4_MAX_SIZE, 65536);
    w.u32(IFLA_GRO_IPV4_MAX_SIZE, 65536);
    w.u32(IFLA_TSO_MAX_SIZE, 524280);
    w.u32(IFLA_TSO_MAX_SEGS, 65535);
    w.u32(IFLA_MAX_PACING_OFFLOAD_HORIZON, 0);
    w.u32(IFLA_NUM_RX_QUEUES, 1);
    w.u8(IFLA_CARRIER, 1);
    w.u32(IFLA_CARRIER_CHANGES, 0);
    w.u32(IFLA_CARRIER_UP_COUNT, 0);
    w.u32(IFLA_CARRIER_DOWN_COUNT, 0);
    w.u16(IFLA_HEADROOM, 0);
    w.u16(IFLA_TAILROOM, 0);
    w.u8(IFLA_PROTO_DOWN, 0);
    w.attr(IFLA_ADDRESS, &i.hw_addr);
    w.attr(IFLA_BROADCAST, &i.hw_broadcast);
    if ext_mask & RTEXT_FILTER_SKIP_STATS == 0 {
        // rtnl_link_stats64 (25 counters) and rtnl_link_stats (24): the
        // sandbox counts no packets.
        w.attr(IFLA_STATS64, &[0; 200]);
        w.attr(IFLA_STATS, &[0; 96]);
    }
    w.begin_nest(IFLA_XDP);
    w.u8(IFLA_XDP_ATTACHED, 0);
    w.end_nest();
    w.str(IFLA_QDISC, i.qdisc);
    w.begin_nest(IFLA_AF_SPEC);
    w.begin_nest(AF_INET as u16);
    w.attr(IFLA_INET_CONF, &ints(&INET_DEVCONF));
    w.end_nest();
    w.begin_nest(AF_INET6 as u16);
    inet6_link_attrs(w);
    w.end_nest();
    w.end_nest();
    // struct rtnl_link_ifmap: no memory, port or interrupt.
    w.attr(IFLA_MAP, &[0; 32]);
    // No devlink port and no DPLL pin: empty nests, as Linux writes them.
    w.attr(IFLA_DEVLINK_PORT | NLA_F_NESTED, &[]);
    w.attr(IFLA_DPLL_PIN | NLA_F_NESTED, &[]);
    w.end_message();
}

/// RTM_NEWLINK of the IPv6 family (inet6_fill_ifinfo).
fn inet6_link_message(w: &mut MessageWriter, i: &Interface, seq: u32, port: u32) {
    w.begin(RTM_NEWLINK, NLM_F_MULTI, seq, port, &ifinfomsg(AF_INET6, i));
    w.str(IFLA_IFNAME, i.name);
    w.attr(IFLA_ADDRESS, &i.hw_addr);
    w.u32(IFLA_MTU, i.mtu);
    w.u8(IFLA_OPERSTATE, IF_OPER_UNKNOWN);
    w.begin_nest(IFLA_PROTINFO);
    inet6_link_attrs(w);
    w.end_nest();
    w.end_message();
}

/// `struct ifa_cacheinfo` of a permanent address: lifetimes forever,
/// made at the sandbox's start.
fn ifa_cacheinfo() -> Vec<u8> {
    let mut b = Vec::new();
    for v in [u32::MAX, u32::MAX, 0, 0] {
        b.extend_from_slice(&v.to_ne_bytes());
    }
    b
}

/// RTM_NEWADDR messages of the interfaces' addresses of `family`
/// (AF_UNSPEC: all, IPv4 first), on interface `index` only if nonzero.
fn address_messages(w: &mut Vec<Vec<u8>>, family: u8, index: u32, flags: u16, seq: u32, port: u32) {
    let wanted = |i: &Interface| index == 0 || i.index == index;
    if family != AF_INET6 {
        for i in interfaces::interfaces().iter().filter(|i| wanted(i)) {
            for a in i.ipv4 {
                let mut m = MessageWriter::new();
                let mut hdr = vec![AF_INET, a.prefix_len, IFA_F_PERMANENT, scope_of_v4(a.addr)];
                hdr.extend_from_slice(&i.index.to_ne_bytes());
                m.begin(RTM_NEWADDR, flags, seq, port, &hdr);
                m.attr(IFA_ADDRESS, &a.addr.octets());
                m.attr(IFA_LOCAL, &a.addr.octets());
                if let Some(b) = a.broadcast {
                    m.attr(IFA_BROADCAST, &b.octets());
                }
                m.str(IFA_LABEL, i.name);
                m.u32(IFA_FLAGS, IFA_F_PERMANENT as u32);
                m.attr(IFA_CACHEINFO, &ifa_cacheinfo());
                m.end_message();
                w.push(m.finish());
            }
        }
    }
    if family != AF_INET {
        for i in interfaces::interfaces().iter().filter(|i| wanted(i)) {
            for a in i.ipv6 {
                let mut m = MessageWriter::new();
                let scope =
                    if a.addr.is_loopback() { interfaces::RT_SCOPE_HOST } else { interfaces::RT_SCOPE_UNIVERSE };
                let mut hdr = vec![AF_INET6, a.prefix_len, IFA_F_PERMANENT, scope];
                hdr.extend_from_slice(&i.index.to_ne_bytes());
                m.begin(RTM_NEWADDR, flags, seq, port, &hdr);
                m.attr(IFA_ADDRESS, &a.addr.octets());
                m.attr(IFA_CACHEINFO, &ifa_cacheinfo());
                m.u32(IFA_FLAGS, IFA_F_PERMANENT as u32);
                if a.addr.is_loopback() {
                    m.u8(IFA_PROTO, IFAPROT_KERNEL_LO);
                }
                m.end_message();
                w.push(m.finish());
            }
        }
    }
}

/// The scope Linux gives an IPv4 address: host for the loopback range.
fn scope_of_v4(a: std::net::Ipv4Addr) -> u8 {
    if a.is_loopback() { interfaces::RT_SCOPE_HOST } else { interfaces::RT_SCOPE_UNIVERSE }
}

/// RTM_NEWROUTE for a route, as fib_dump_info and rt6_fill_node write it.
fn route_message(r: &Route, flags: u16, seq: u32, port: u32) -> Vec<u8> {
    let mut m = MessageWriter::new();
    let family = match r.dst {
        RouteDst::V4(_) => AF_INET,
        RouteDst::V6(_) => AF_INET6,
    };
    let hdr = [family, r.dst_len, 0, 0, r.table, interfaces::RTPROT_KERNEL, r.scope, r.kind, 0, 0, 0, 0];
    m.begin(RTM_NEWROUTE, flags, seq, port, &hdr);
    m.u32(RTA_TABLE, r.table as u32);
    match r.dst {
        RouteDst::V4(d) => {
            m.attr(RTA_DST, &d.octets());
            if let Some(src) = r.prefsrc {
                m.attr(RTA_PREFSRC, &src.octets());
            }
            m.u32(RTA_OIF, r.oif);
        }
        RouteDst::V6(d) => {
            m.attr(RTA_DST, &d.octets());
            m.u32(RTA_PRIORITY, 0);
            m.u32(RTA_OIF, r.oif);
            // struct rta_cacheinfo: nothing used, no expiry.
            m.attr(RTA_CACHEINFO, &[0; 32]);
            m.u8(RTA_PREF, 0);
        }
    }
    m.end_message();
    m.finish()
}

/// A request's header.
#[derive(Clone, Copy)]
struct Header {
    len: usize,
    kind: u16,
    flags: u16,
    seq: u32,
}

fn header_of(b: &[u8]) -> Header {
    Header {
        len: u32::from_ne_bytes(b[0..4].try_into().expect("four bytes")) as usize,
        kind: u16::from_ne_bytes([b[4], b[5]]),
        flags: u16::from_ne_bytes([b[6], b[7]]),
        seq: u32::from_ne_bytes(b[8..12].try_into().expect("four bytes")),
    }
}

/// The attributes after a family header of `fixed` bytes, as (type, value);
/// None if they are malformed.
fn attributes(payload: &[u8], fixed: usize) -> Option<Vec<(u16, &[u8])>> {
    let mut v = Vec::new();
    let mut at = align4(fixed);
    while at + 4 <= payload.len() {
        let len = u16::from_ne_bytes([payload[at], payload[at + 1]]) as usize;
        let kind = u16::from_ne_bytes([payload[at + 2], payload[at + 3]]) & 0x3fff;
        if len < 4 || at + len > payload.len() {
            return None;
        }
        v.push((kind, &payload[at + 4..at + len]));
        at += align4(len);
    }
    Some(v)
}

fn attr_u32(v: &[u8]) -> Option<u32> {
    v.get(..4).map(|b| u32::from_ne_bytes(b.try_into().expect("four bytes")))
}

/// What the route family made of a request.
enum Answer {
    /// Nothing to send back but an acknowledgement if asked.
    Done,
    /// One message.
    Reply(Vec<u8>),
    /// A dump: its messages, then NLMSG_DONE with the dump's result, with
    /// these extra flags on every message.
    Dump(Vec<Vec<u8>>, i32, u16),
    /// The host kernel's answer datagrams, acknowledgement included.
    Host(Vec<Vec<u8>>),
}

/// A request of the route family that only reads (RTM_GET*).
fn is_route_get(h: Header) -> bool {
    h.kind >= RTM_BASE && (h.kind - RTM_BASE) & 3 == RTNL_KIND_GET
}

impl NetlinkSocket {
    fn port(&self) -> u32 {
        self.state.lock().unwrap().port.unwrap_or(0)
    }

    /// Binds to a free port if unbound (netlink_autobind).
    fn autobind(&self, st: &mut State, pid: i32) -> u32 {
        if let Some(p) = st.port {
            return p;
        }
        let p = self.network.netlink_ports.autobind(pid, &self.this);
        st.port = Some(p);
        p
    }

    /// Queues a datagram for the reader: past the receive buffer it is
    /// dropped and the reader told ENOBUFS, unless it asked not to be.
    fn deliver(&self, d: Datagram) -> bool {
        let mut st = self.state.lock().unwrap();
        let rcvbuf = self.options.values().rcvbuf as usize;
        if st.queued > rcvbuf {
            if !st.flags.no_enobufs {
                st.error = Some(Errno::ENOBUFS);
            }
            drop(st);
            self.queue.notify_all();
            return false;
        }
        st.queued += d.data.len();
        st.queue.push_back(d);
        drop(st);
        self.queue.notify_all();
        true
    }

    /// Queues a message from the kernel that no request asked for (a
    /// message queue's notification cookie, for glibc's SIGEV_THREAD).
    pub fn post_from_kernel(&self, data: Vec<u8>) {
        self.deliver_from_kernel(vec![data]);
    }

    /// Queues the kernel's answer datagrams.
    fn deliver_from_kernel(&self, datagrams: Vec<Vec<u8>>) {
        for data in datagrams {
            self.deliver(Datagram { data, from_port: 0, from_group: 0, creds: Ucred::default() });
        }
    }

    /// Runs the requests of one message sent to the kernel, as Linux's
    /// netlink_rcv_skb does: each request answered, errors and asked-for
    /// acknowledgements as NLMSG_ERROR; a truncated request ends the
    /// batch silently.
    fn kernel_receive(&self, call: &NetCall, data: &[u8], port: u32) {
        let (flags, max_recv) = {
            let st = self.state.lock().unwrap();
            (st.flags, st.max_recvmsg_len)
        };
        let mut out: Vec<Vec<u8>> = Vec::new();
        let mut at = 0;
        while data.len() - at >= NLMSG_HDRLEN {
            let h = header_of(&data[at..]);
            if h.len < NLMSG_HDRLEN || h.len > data.len() - at {
                break;
            }
            let msg = &data[at..at + h.len];
            let answer = if h.flags & NLM_F_REQUEST == 0 || h.kind < NLMSG_MIN_TYPE {
                Ok(Answer::Done)
            } else if self.network.mode == NetworkMode::Host && is_route_get(h) {
                // On the host's network the interfaces are the host's: its
                // kernel answers what reads them.
                let flags = [flags.cap_ack, flags.ext_ack, flags.strict_chk];
                hostinet::host_route_request(msg, flags, port).map(Answer::Host)
            } else {
                self.route_request(call, h, &msg[NLMSG_HDRLEN..], port, flags)
            };
            match answer {
                Ok(Answer::Dump(messages, result, extra)) => {
                    let limit = NLMSG_GOODSIZE.max(max_recv.min(DUMP_MAX));
                    let mut datagram: Vec<u8> = Vec::new();
                    for m in messages {
                        if !datagram.is_empty() && datagram.len() + m.len() > limit {
                            out.push(std::mem::take(&mut datagram));
                        }
                        datagram.extend_from_slice(&m);
                    }
                    if !datagram.is_empty() {
                        out.push(datagram);
                    }
                    let mut w = MessageWriter::new();
                    w.begin(NLMSG_DONE, NLM_F_MULTI | extra, h.seq, port, &result.to_ne_bytes());
                    w.end_message();
                    out.push(w.finish());
                }
                Ok(Answer::Reply(m)) => {
                    out.push(m);
                    if h.flags & NLM_F_ACK != 0 {
                        out.push(error_message(msg, h, port, 0, flags.cap_ack));
                    }
                }
                Ok(Answer::Done) => {
                    if h.flags & NLM_F_ACK != 0 {
                        out.push(error_message(msg, h, port, 0, flags.cap_ack));
                    }
                }
                Ok(Answer::Host(datagrams)) => out.extend(datagrams),
                Err(e) => out.push(error_message(msg, h, port, -(e.get() as i32), flags.cap_ack)),
            }
            at += align4(h.len).min(data.len() - at);
        }
        self.deliver_from_kernel(out);
    }

    /// rtnetlink_rcv_msg: one request of the route family.
    fn route_request(
        &self,
        call: &NetCall,
        h: Header,
        payload: &[u8],
        port: u32,
        flags: Flags,
    ) -> Result<Answer, Errno> {
        // Every message carries at least the family.
        let Some(&family) = payload.first() else { return Ok(Answer::Done) };
        let kind = h.kind.wrapping_sub(RTM_BASE) & 3;
        if !(RTM_BASE..=RTM_MAX).contains(&h.kind) {
            return Err(Errno::EOPNOTSUPP);
        }
        if kind != RTNL_KIND_GET {
            // The sandbox's interfaces, addresses and routes are fixed.
            return Err(if call.ctx.creds.has(cap::NET_ADMIN) { Errno::EOPNOTSUPP } else { Errno::EPERM });
        }
        let dump = h.flags & NLM_F_DUMP == NLM_F_DUMP;
        let strict = flags.strict_chk;
        match (h.kind, dump) {
            (RTM_GETLINK, true) => Ok(link_dump(h, payload, family, port, strict)),
            (RTM_GETLINK, false) => link_get(h, payload, port),
            (RTM_GETADDR, true) => Ok(address_dump(h, payload, family, port, strict)),
            (RTM_GETROUTE, true) => Ok(route_dump(h, payload, family, port, strict)),
            (RTM_GETROUTE, false) => route_get(h, payload, port, call.ucred.uid),
            // No neighbours: the loopback resolves nothing.
            (RTM_GETNEIGH, true) => Ok(Answer::Dump(Vec::new(), 0, 0)),
            (RTM_GETRULE, true) => Ok(rule_dump(h, family, port)),
            _ => Err(Errno::EOPNOTSUPP),
        }
    }
}

/// NLMSG_ERROR for request `msg`: `error` 0 acknowledges; an error copies
/// the whole request back unless NETLINK_CAP_ACK asked for its header only
/// (netlink_ack).
fn error_message(msg: &[u8], h: Header, port: u32, error: i32, cap_ack: bool) -> Vec<u8> {
    let capped = error == 0 || cap_ack;
    let mut body = error.to_ne_bytes().to_vec();
    let echoed = if capped { &msg[..NLMSG_HDRLEN] } else { &msg[..h.len] };
    body.extend_from_slice(echoed);
    let mut w = MessageWriter::new();
    w.begin(NLMSG_ERROR, if capped { NLM_F_CAPPED } else { 0 }, h.seq, port, &body);
    w.end_message();
    w.finish()
}

/// rtnl_dump_ifinfo and inet6_dump_ifinfo.
fn link_dump(h: Header, payload: &[u8], family: u8, port: u32, strict: bool) -> Answer {
    let mut ext_mask = 0;
    if payload.len() >= 16 {
        let Some(attrs) = attributes(payload, 16) else {
            return Answer::Dump(Vec::new(), -(Errno::EINVAL.get() as i32), 0);
        };
        for (kind, v) in attrs {
            if kind == IFLA_EXT_MASK {
                ext_mask = attr_u32(v).unwrap_or(0);
            }
        }
        if strict {
            // valid_link_dump_req: the header's other fields must be zero.
            let nonzero = payload[1] != 0 || payload[2..16].iter().any(|&b| b != 0);
            if nonzero {
                return Answer::Dump(Vec::new(), -(Errno::EINVAL.get() as i32), 0);
            }
        }
    }
    let mut messages = Vec::new();
    match family {
        AF_INET6 => {
            for i in interfaces::interfaces() {
                let mut w = MessageWriter::new();
                inet6_link_message(&mut w, i, h.seq, port);
                messages.push(w.finish());
            }
        }
        // A bridge dump lists bridge ports, which the sandbox has none of.
        AF_BRIDGE => {}
        _ => {
            for i in interfaces::interfaces() {
                let mut w = MessageWriter::new();
                link_message(&mut w, i, NLM_F_MULTI, h.seq, port, ext_mask);
                messages.push(w.finish());
            }
        }
    }
    Answer::Dump(messages, 0, 0)
}

/// rtnl_getlink: one interface by index or name.
fn link_get(h: Header, payload: &[u8], port: u32) -> Result<Answer, Errno> {
    if payload.len() < 16 {
        return Err(Errno::EINVAL);
    }
    let index = i32::from_ne_bytes(payload[4..8].try_into().expect("four bytes"));
    let attrs = attributes(payload, 16).ok_or(Errno::EINVAL)?;
    let mut ext_mask = 0;
    let mut name = None;
    for (kind, v) in attrs {
        match kind {
            IFLA_EXT_MASK => ext_mask = attr_u32(v).unwrap_or(0),
            IFLA_IFNAME | IFLA_ALT_IFNAME => {
                let end = v.iter().position(|&b| b == 0).unwrap_or(v.len());
                name = Some(&v[..end]);
            }
            _ => {}
        }
    }
    let iface = if index > 0 {
        interfaces::by_index(index as u32)
    } else if let Some(name) = name {
        interfaces::by_name(name)
    } else {
        return Err(Errno::EINVAL);
    };
    let iface = iface.ok_or(Errno::ENODEV)?;
    let mut w = MessageWriter::new();
    link_message(&mut w, iface, 0, h.seq, port, ext_mask);
    Ok(Answer::Reply(w.finish()))
}

/// inet_dump_ifaddr and inet6_dump_addr (rtnl_dump_all for other
/// families).
fn address_dump(h: Header, payload: &[u8], family: u8, port: u32, strict: bool) -> Answer {
    let mut index = 0;
    let mut extra = 0;
    if strict && payload.len() >= 8 {
        // inet_valid_dump_ifaddr_req: only the family and the index may
        // be set, and no attribute but the target namespace given.
        if payload[1..4].iter().any(|&b| b != 0) || attributes(payload, 8).is_none_or(|a| !a.is_empty()) {
            return Answer::Dump(Vec::new(), -(Errno::EINVAL.get() as i32), 0);
        }
        index = u32::from_ne_bytes(payload[4..8].try_into().expect("four bytes"));
        if index != 0 {
            extra = NLM_F_DUMP_FILTERED;
        }
    }
    let family = if family == AF_INET || family == AF_INET6 { family } else { AF_UNSPEC };
    let mut messages = Vec::new();
    address_messages(&mut messages, family, index, NLM_F_MULTI | extra, h.seq, port);
    Answer::Dump(messages, 0, extra)
}

/// inet_dump_fib and inet6_dump_fib: every table's routes, or with strict
/// checking those the request's header and attributes select.
fn route_dump(h: Header, payload: &[u8], family: u8, port: u32, strict: bool) -> Answer {
    let (mut table, mut protocol, mut kind, mut oif) = (0u32, 0u8, 0u8, 0u32);
    let mut extra = 0;
    if strict && payload.len() >= 12 {
        let Some(attrs) = attributes(payload, 12) else {
            return Answer::Dump(Vec::new(), -(Errno::EINVAL.get() as i32), 0);
        };
        table = payload[4] as u32;
        protocol = payload[5];
        kind = payload[7];
        for (a, v) in attrs {
            match a {
                RTA_TABLE => table = attr_u32(v).unwrap_or(0),
                RTA_OIF => {
                    oif = attr_u32(v).unwrap_or(0);
                    if interfaces::by_index(oif).is_none() {
                        return Answer::Dump(Vec::new(), -(Errno::ENODEV.get() as i32), 0);
                    }
                }
                _ => return Answer::Dump(Vec::new(), -(Errno::EINVAL.get() as i32), 0),
            }
        }
        if table != 0 || protocol != 0 || kind != 0 || oif != 0 {
            extra = NLM_F_DUMP_FILTERED;
        }
    }
    let messages = interfaces::routes()
        .iter()
        .filter(|r| match r.dst {
            RouteDst::V4(_) => family != AF_INET6,
            RouteDst::V6(_) => family != AF_INET,
        })
        .filter(|r| table == 0 || r.table as u32 == table)
        .filter(|_| protocol == 0 || protocol == interfaces::RTPROT_KERNEL)
        .filter(|r| kind == 0 || r.kind == kind)
        .filter(|r| oif == 0 || r.oif == oif)
        .map(|r| route_message(r, NLM_F_MULTI | extra, h.seq, port))
        .collect();
    Answer::Dump(messages, 0, extra)
}

/// inet_rtm_getroute and inet6_rtm_getroute: the route a packet to
/// RTA_DST would take. Every address the sandbox reaches is its own, so
/// the answer is the local route, or ENETUNREACH.
fn route_get(h: Header, payload: &[u8], port: u32, uid: u32) -> Result<Answer, Errno> {
    if payload.len() < 12 {
        return Err(Errno::EINVAL);
    }
    let family = payload[0];
    let attrs = attributes(payload, 12).ok_or(Errno::EINVAL)?;
    let find = |kind: u16| attrs.iter().find(|(k, _)| *k == kind).map(|(_, v)| *v);
    let (dst, src) = (find(RTA_DST), find(RTA_SRC));
    let mut m = MessageWriter::new();
    match family {
        AF_INET => {
            let dst: [u8; 4] = dst.and_then(|v| v.get(..4)).map_or([0; 4], |v| v.try_into().expect("four bytes"));
            let dst = std::net::Ipv4Addr::from(dst);
            let local = interfaces::routes().into_iter().find(|r| {
                let RouteDst::V4(net) = r.dst else { return false };
                r.kind == interfaces::RTN_LOCAL
                    && u32::from(net) & interfaces::prefix_mask(r.dst_len)
                        == u32::from(dst) & interfaces::prefix_mask(r.dst_len)
            });
            let r = local.ok_or(Errno::ENETUNREACH)?;
            let src_len = if src.is_some() { 32 } else { 0 };
            let flags = (RTM_F_CLONED | RTCF_LOCAL).to_ne_bytes();
            let hdr = [
                AF_INET,
                32,
                src_len,
                0,
                RT_TABLE_MAIN,
                0,
                interfaces::RT_SCOPE_UNIVERSE,
                interfaces::RTN_LOCAL,
                flags[0],
                flags[1],
                flags[2],
                flags[3],
            ];
            m.begin(RTM_NEWROUTE, 0, h.seq, port, &hdr);
            m.u32(RTA_TABLE, RT_TABLE_MAIN as u32);
            m.attr(RTA_DST, &dst.octets());
            if let Some(src) = src {
                m.attr(RTA_SRC, src);
            }
            m.u32(RTA_OIF, r.oif);
            if src.is_none()
                && let Some(prefsrc) = r.prefsrc
            {
                m.attr(RTA_PREFSRC, &prefsrc.octets());
            }
            m.u32(RTA_UID, uid);
        }
        AF_INET6 => {
            let dst: [u8; 16] = dst.and_then(|v| v.get(..16)).map_or([0; 16], |v| v.try_into().expect("sixteen bytes"));
            let dst = std::net::Ipv6Addr::from(dst);
            let r = interfaces::routes()
                .into_iter()
                .find(|r| r.dst == RouteDst::V6(dst) && r.kind == interfaces::RTN_LOCAL)
                .ok_or(Errno::ENETUNREACH)?;
            let hdr = [AF_INET6, 128, 128, 0, r.table, interfaces::RTPROT_KERNEL, r.scope, r.kind, 0, 0, 0, 0];
            m.begin(RTM_NEWROUTE, 0, h.seq, port, &hdr);
            m.u32(RTA_TABLE, r.table as u32);
            m.attr(RTA_DST, &dst.octets());
            m.attr(RTA_SRC, &src.and_then(|v| v.get(..16)).map_or([0; 16], |v| v.try_into().expect("sixteen bytes")));
            m.attr(RTA_PREFSRC, &dst.octets());
            m.u32(RTA_PRIORITY, 0);
            m.u32(RTA_OIF, r.oif);
        }
        _ => return Err(Errno::EOPNOTSUPP),
    }
    // struct rta_cacheinfo: the lookup holds two references.
    let mut cache = [0u8; 32];
    cache[..4].copy_from_slice(&2u32.to_ne_bytes());
    m.attr(RTA_CACHEINFO, &cache);
    if family == AF_INET6 {
        m.u8(RTA_PREF, 0);
    }
    m.end_message();
    Ok(Answer::Reply(m.finish()))
}

/// fib_nl_dumprule: the default policy rules of IPv4, then IPv6.
fn rule_dump(h: Header, family: u8, port: u32) -> Answer {
    let mut messages = Vec::new();
    for (f, rules) in [(AF_INET, RULES_V4), (AF_INET6, RULES_V6)] {
        if family != AF_UNSPEC && family != f {
            continue;
        }
        for &(priority, table) in rules {
            let mut m = MessageWriter::new();
            // struct fib_rule_hdr: family, dst_len, src_len, tos, table,
            // two reserved bytes, action, flags.
            m.begin(RTM_NEWRULE, NLM_F_MULTI, h.seq, port, &[f, 0, 0, 0, table, 0, 0, FR_ACT_TO_TBL, 0, 0, 0, 0]);
            m.u32(FRA_TABLE, table as u32);
            m.u32(FRA_SUPPRESS_PREFIXLEN, u32::MAX);
            m.u8(FRA_PROTOCOL, interfaces::RTPROT_KERNEL);
            if priority != 0 {
                m.u32(FRA_PRIORITY, priority);
            }
            m.end_message();
            messages.push(m.finish());
        }
    }
    Answer::Dump(messages, 0, 0)
}

impl Drop for NetlinkSocket {
    fn drop(&mut self) {
        if let Some(p) = self.state.get_mut().unwrap().port {
            self.network.netlink_ports.remove(p);
        }
    }
}

impl Socket for NetlinkSocket {
    fn family(&self) -> u32 {
        n::AF_NETLINK
    }

    fn kind(&self) -> u32 {
        self.kind
    }

    fn protocol(&self) -> u32 {
        self.protocol
    }

    fn bind(&self, call: &NetCall, addr: &[u8]) -> Result<(), Errno> {
        let (port, groups) = parse_sockaddr_nl(addr)?;
        let mut st = self.state.lock().unwrap();
        match st.port {
            Some(bound) if bound != port => return Err(Errno::EINVAL),
            Some(_) => {}
            None if port != 0 => {
                self.network.netlink_ports.insert(port, &self.this)?;
                st.port = Some(port);
            }
            None => {
                self.autobind(&mut st, call.ucred.pid);
            }
        }
        // The route family lets anyone listen to its groups; bind sets the
        // first 32.
        st.groups = (st.groups & !0xffff_ffff) | groups as u64;
        Ok(())
    }

    fn connect(&self, call: &NetCall, addr: &[u8]) -> Result<(), Errno> {
        if addr.len() < 2 {
            return Err(Errno::EINVAL);
        }
        let mut st = self.state.lock().unwrap();
        if u16::from_ne_bytes([addr[0], addr[1]]) == n::AF_UNSPEC as u16 {
            st.dst_port = 0;
            st.dst_group = 0;
            return Ok(());
        }
        let (port, groups) = parse_sockaddr_nl(addr)?;
        if (port != 0 || groups != 0) && !call.ctx.creds.has(cap::NET_ADMIN) {
            return Err(Errno::EPERM);
        }
        self.autobind(&mut st, call.ucred.pid);
        st.dst_port = port;
        st.dst_group = first_group(groups);
        Ok(())
    }

    fn shutdown(&self, _: &NetCall, _: u32) -> Result<(), Errno> {
        Err(Errno::EOPNOTSUPP)
    }

    fn local_addr(&self) -> Result<Vec<u8>, Errno> {
        let st = self.state.lock().unwrap();
        Ok(sockaddr_nl(st.port.unwrap_or(0), st.groups as u32))
    }

    /// Linux answers with the connected destination, the kernel if none.
    fn peer_addr(&self) -> Result<Vec<u8>, Errno> {
        let st = self.state.lock().unwrap();
        Ok(sockaddr_nl(st.dst_port, group_mask(st.dst_group)))
    }

    fn getsockopt(&self, _: &NetCall, level: u32, name: u32, len: usize) -> Result<Vec<u8>, Errno> {
        let int = |v: i32| Ok(v.to_ne_bytes().to_vec());
        if level == n::SOL_SOCKET {
            return match name {
                n::SO_ERROR => int(self.state.lock().unwrap().error.take().map_or(0, |e| e.get() as i32)),
                n::SO_ACCEPTCONN => int(0),
                // No peer process: pid 0 and the overflow ids.
                n::SO_PEERCRED => Ok([0i32, -1, -1].iter().flat_map(|v| v.to_ne_bytes()).collect()),
                _ => self.options.get(name).unwrap_or(Err(Errno::ENOPROTOOPT)),
            };
        }
        if level != SOL_NETLINK {
            return Err(Errno::ENOPROTOOPT);
        }
        let st = self.state.lock().unwrap();
        let f = st.flags;
        let flag = match name {
            NETLINK_PKTINFO => f.pktinfo,
            NETLINK_BROADCAST_ERROR => f.broadcast_error,
            NETLINK_NO_ENOBUFS => f.no_enobufs,
            NETLINK_LISTEN_ALL_NSID => f.listen_all_nsid,
            NETLINK_CAP_ACK => f.cap_ack,
            NETLINK_EXT_ACK => f.ext_ack,
            NETLINK_GET_STRICT_CHK => f.strict_chk,
            NETLINK_LIST_MEMBERSHIPS => {
                // The group bitmap in 32-bit words.
                let words = RTNLGRP_MAX.max(32).div_ceil(32) as usize;
                let v: Vec<u8> = (0..words).flat_map(|k| ((st.groups >> (32 * k)) as u32).to_ne_bytes()).collect();
                return Ok(v);
            }
            _ => return Err(Errno::ENOPROTOOPT),
        };
        if len < 4 {
            return Err(Errno::EINVAL);
        }
        int(flag as i32)
    }

    fn setsockopt(&self, call: &NetCall, level: u32, name: u32, value: &[u8]) -> Result<(), Errno> {
        if level == n::SOL_SOCKET {
            return self.options.set(&call.ctx.creds, name, value).unwrap_or(Err(Errno::ENOPROTOOPT));
        }
        if level != SOL_NETLINK {
            return Err(Errno::ENOPROTOOPT);
        }
        // A short value reads as zero, as Linux's does.
        let val = value.get(..4).map_or(0, |b| u32::from_ne_bytes(b.try_into().expect("four bytes")));
        let mut st = self.state.lock().unwrap();
        let on = val != 0;
        match name {
            NETLINK_ADD_MEMBERSHIP | NETLINK_DROP_MEMBERSHIP => {
                if val == 0 || val > RTNLGRP_MAX.max(32) {
                    return Err(Errno::EINVAL);
                }
                if name == NETLINK_ADD_MEMBERSHIP {
                    st.groups |= 1 << (val - 1);
                } else {
                    st.groups &= !(1 << (val - 1));
                }
            }
            NETLINK_PKTINFO => st.flags.pktinfo = on,
            NETLINK_BROADCAST_ERROR => st.flags.broadcast_error = on,
            NETLINK_NO_ENOBUFS => {
                st.flags.no_enobufs = on;
                if on {
                    st.error = None;
                }
            }
            NETLINK_LISTEN_ALL_NSID => {
                if !call.ctx.creds.has(cap::NET_BROADCAST) {
                    return Err(Errno::EPERM);
                }
                st.flags.listen_all_nsid = on;
            }
            NETLINK_CAP_ACK => st.flags.cap_ack = on,
            NETLINK_EXT_ACK => st.flags.ext_ack = on,
            NETLINK_GET_STRICT_CHK => st.flags.strict_chk = on,
            _ => return Err(Errno::ENOPROTOOPT),
        }
        Ok(())
    }

    fn send(&self, call: &NetCall, msg: SendMsg) -> Result<usize, Errno> {
        if msg.flags & n::MSG_OOB != 0 {
            return Err(Errno::EOPNOTSUPP);
        }
        let len = msg.len();
        if len == 0 {
            return Err(Errno::ENODATA);
        }
        let (dst_port, dst_group) = match msg.to {
            Some(to) => {
                let (port, groups) = parse_sockaddr_nl(to)?;
                (port, first_group(groups))
            }
            None => {
                let st = self.state.lock().unwrap();
                (st.dst_port, st.dst_group)
            }
        };
        // The route family takes messages for other sockets only from the
        // privileged.
        if (dst_port != 0 || dst_group != 0) && !call.ctx.creds.has(cap::NET_ADMIN) {
            return Err(Errno::EPERM);
        }
        let port = {
            let mut st = self.state.lock().unwrap();
            self.autobind(&mut st, call.ucred.pid)
        };
        if len + 32 > self.options.values().sndbuf as usize {
            return Err(Errno::EMSGSIZE);
        }
        let mut data = vec![0u8; len];
        let mut at = 0;
        for s in msg.data {
            at += s.copy_to(&mut data[at..]);
        }
        let creds = call.ucred;
        // As Linux's netlink_sendmsg: a message to a group goes to its
        // members (the sender too, if one; not the destination port, which
        // gets it below), and then to the destination port, the kernel
        // being port 0.
        if dst_group != 0 {
            for member in self.network.netlink_ports.members(dst_group) {
                if member.port() != dst_port {
                    member.deliver(Datagram { data: data.clone(), from_port: port, from_group: dst_group, creds });
                }
            }
        }
        if dst_port == 0 {
            self.kernel_receive(call, &data, port);
            return Ok(len);
        }
        let peer = self.network.netlink_ports.lookup(dst_port).ok_or(Errno::ECONNREFUSED)?;
        let d = Datagram { data, from_port: port, from_group: 0, creds };
        peer.unicast(call, d)?;
        Ok(len)
    }

    fn recv(&self, call: &NetCall, msg: RecvMsg) -> Result<Received, Errno> {
        if msg.flags & n::MSG_OOB != 0 {
            return Err(Errno::EOPNOTSUPP);
        }
        let peek = msg.flags & n::MSG_PEEK != 0;
        let take = || {
            let mut st = self.state.lock().unwrap();
            if let Some(e) = st.error.take() {
                return Some(Err(e));
            }
            let d = if peek {
                let d = st.queue.front()?;
                Datagram { data: d.data.clone(), from_port: d.from_port, from_group: d.from_group, creds: d.creds }
            } else {
                let d = st.queue.pop_front()?;
                st.queued -= d.data.len();
                d
            };
            st.max_recvmsg_len = st.max_recvmsg_len.max(msg.len()).min(DUMP_MAX);
            Some(Ok(d))
        };
        let d = match take() {
            Some(r) => r?,
            None if msg.flags & n::MSG_DONTWAIT != 0 || call.nonblocking() => return Err(Errno::EAGAIN),
            None => {
                let deadline = self.options.recv_deadline();
                match call.ctx.block_on(&[&self.queue], deadline, take) {
                    Ok(r) => r?,
                    Err(BlockError::TimedOut) => return Err(Errno::EAGAIN),
                    Err(BlockError::Interrupted) if deadline.is_some() => return Err(Errno::EINTR),
                    Err(BlockError::Interrupted) => return Err(Errno::ERESTARTSYS),
                }
            }
        };
        if !peek {
            // Room in the receive buffer for senders waiting on it.
            self.queue.notify_all();
        }
        let mut copied = 0;
        for b in msg.bufs {
            if copied == d.data.len() {
                break;
            }
            copied += b.copy_from(&d.data[copied..]);
        }
        let mut flags = 0;
        if copied < d.data.len() {
            flags |= n::MSG_TRUNC;
        }
        let ret = if msg.flags & n::MSG_TRUNC != 0 { d.data.len() } else { copied };
        let mut control = Control::default();
        if self.options.values().passcred {
            control.creds = Some(d.creds);
        }
        Ok(Received { ret, from: Some(sockaddr_nl(d.from_port, group_mask(d.from_group))), control, flags })
    }

    fn poll(&self) -> u32 {
        let st = self.state.lock().unwrap();
        let mut m = POLLOUT | POLLWRNORM;
        if !st.queue.is_empty() {
            m |= POLLIN | POLLRDNORM;
        }
        if st.error.is_some() {
            m |= POLLERR;
        }
        m
    }

    fn poll_queue(&self) -> &WaitQueue {
        &self.queue
    }

    fn describe(&self) -> String {
        format!("NETLINK protocol {} port {}", self.protocol, self.port())
    }
}

impl NetlinkSocket {
    /// Delivers a message from another socket, waiting for room in the
    /// receive buffer as Linux's netlink_attachskb does.
    fn unicast(&self, call: &NetCall, d: Datagram) -> Result<(), Errno> {
        let rcvbuf = self.options.values().rcvbuf as usize;
        let room = || {
            let st = self.state.lock().unwrap();
            (st.queued <= rcvbuf).then_some(())
        };
        if room().is_none() {
            if call.nonblocking() {
                return Err(Errno::EAGAIN);
            }
            match call.ctx.block_on(&[&self.queue], None, room) {
                Ok(()) => {}
                Err(_) => return Err(Errno::ERESTARTSYS),
            }
        }
        let mut st = self.state.lock().unwrap();
        st.queued += d.data.len();
        st.queue.push_back(d);
        drop(st);
        self.queue.notify_all();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs_of(msg: &[u8], fixed: usize) -> Vec<(u16, Vec<u8>)> {
        attributes(&msg[NLMSG_HDRLEN..], fixed).unwrap().into_iter().map(|(k, v)| (k, v.to_vec())).collect()
    }

    #[test]
    fn link_message_is_linux_s_size() {
        let mut w = MessageWriter::new();
        link_message(&mut w, &interfaces::LOOPBACK, NLM_F_MULTI, 7, 42, 0);
        let m = w.finish();
        // What Linux 6.18 sends for lo.
        let h = header_of(&m);
        assert_eq!(m.len(), 1468);
        assert_eq!(h.len, m.len());
        assert_eq!((h.kind, h.flags, h.seq), (RTM_NEWLINK, NLM_F_MULTI, 7));
        let a = attrs_of(&m, 16);
        assert_eq!(a[0], (IFLA_IFNAME, b"lo\0".to_vec()));
        let spec = a.iter().find(|(k, _)| *k == IFLA_AF_SPEC).unwrap();
        assert_eq!(spec.1.len(), 812);
    }

    #[test]
    fn addresses_of_the_loopback() {
        let mut v = Vec::new();
        address_messages(&mut v, AF_UNSPEC, 0, NLM_F_MULTI, 1, 9);
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].len(), 76);
        assert_eq!(v[1].len(), 80);
        assert_eq!(&v[0][NLMSG_HDRLEN..NLMSG_HDRLEN + 8], &[2, 8, 0x80, 0xfe, 1, 0, 0, 0]);
    }

    #[test]
    fn routes_are_linux_sized() {
        let r = interfaces::routes();
        assert_eq!(route_message(&r[0], NLM_F_MULTI, 1, 1).len(), 60);
        assert_eq!(route_message(&r[3], NLM_F_MULTI, 1, 1).len(), 116);
    }

    #[test]
    fn errors_echo_the_request() {
        let mut req = MessageWriter::new();
        req.begin(RTM_NEWADDR, NLM_F_REQUEST | NLM_F_ACK, 5, 0, &[2, 8, 0, 0, 1, 0, 0, 0]);
        req.end_message();
        let req = req.finish();
        let h = header_of(&req);
        let e = error_message(&req, h, 3, -1, false);
        assert_eq!(e.len(), NLMSG_HDRLEN + 4 + req.len());
        let ack = error_message(&req, h, 3, 0, false);
        assert_eq!(ack.len(), 36);
        assert_eq!(header_of(&ack).flags, NLM_F_CAPPED);
    }
}
