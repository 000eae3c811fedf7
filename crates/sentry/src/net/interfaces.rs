//! The sandbox's network interfaces as the application sees them: the
//! interface ioctls (SIOCGIF*), the facts netlink's RTM_GETLINK,
//! RTM_GETADDR and RTM_GETROUTE report, and /proc/net and
//! /sys/class/net. With `--network=none` the sandbox has one interface,
//! `lo`, as a fresh network namespace has it once brought up: index 1,
//! 127.0.0.1/8 and ::1/128, no hardware address, mtu 65536.

use std::net::{Ipv4Addr, Ipv6Addr};

use linux_raw_sys::ioctl as io;

use super::NetCall;
use crate::auth::cap;
use crate::errno::Errno;
use crate::mm::MemoryManager;

/// Interface flags (IFF_*) of `<linux/if.h>`.
pub const IFF_UP: u32 = 0x1;
pub const IFF_BROADCAST: u32 = 0x2;
pub const IFF_LOOPBACK: u32 = 0x8;
pub const IFF_RUNNING: u32 = 0x40;
pub const IFF_MULTICAST: u32 = 0x1000;
/// Reported by netlink only: the 16-bit ifr_flags of SIOCGIFFLAGS cannot
/// hold it.
pub const IFF_LOWER_UP: u32 = 0x10000;

/// ARPHRD_LOOPBACK, the loopback's hardware type.
pub const ARPHRD_LOOPBACK: u16 = 772;

/// IFNAMSIZ: an interface name and its NUL.
pub const IFNAMSIZ: usize = 16;

/// RFC 2863 operational states (IF_OPER_*): the loopback's is "unknown",
/// as Linux reports for a device without carrier detection.
pub const IF_OPER_UNKNOWN: u8 = 0;

/// An IPv4 address of an interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv4Address {
    pub addr: Ipv4Addr,
    pub prefix_len: u8,
    /// The broadcast address, for interfaces that have one.
    pub broadcast: Option<Ipv4Addr>,
}

impl Ipv4Address {
    pub fn netmask(&self) -> Ipv4Addr {
        Ipv4Addr::from(prefix_mask(self.prefix_len))
    }
}

/// An IPv6 address of an interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv6Address {
    pub addr: Ipv6Addr,
    pub prefix_len: u8,
}

/// A network interface.
#[derive(Debug)]
pub struct Interface {
    pub index: u32,
    pub name: &'static str,
    /// IFF_* as netlink reports them (IFF_LOWER_UP included).
    pub flags: u32,
    pub mtu: u32,
    pub tx_queue_len: u32,
    /// ARPHRD_*.
    pub hw_type: u16,
    pub hw_addr: [u8; 6],
    pub hw_broadcast: [u8; 6],
    /// The queueing discipline `ip link` names.
    pub qdisc: &'static str,
    pub ipv4: &'static [Ipv4Address],
    pub ipv6: &'static [Ipv6Address],
}

/// The loopback interface.
pub static LOOPBACK: Interface = Interface {
    index: 1,
    name: "lo",
    flags: IFF_UP | IFF_LOOPBACK | IFF_RUNNING | IFF_LOWER_UP,
    mtu: 65536,
    tx_queue_len: 1000,
    hw_type: ARPHRD_LOOPBACK,
    hw_addr: [0; 6],
    hw_broadcast: [0; 6],
    qdisc: "noqueue",
    ipv4: &[Ipv4Address { addr: Ipv4Addr::new(127, 0, 0, 1), prefix_len: 8, broadcast: None }],
    ipv6: &[Ipv6Address { addr: Ipv6Addr::LOCALHOST, prefix_len: 128 }],
};

/// Every interface of the sandbox, by index.
pub fn interfaces() -> &'static [&'static Interface] {
    static ALL: [&Interface; 1] = [&LOOPBACK];
    &ALL
}

pub fn by_index(index: u32) -> Option<&'static Interface> {
    interfaces().iter().copied().find(|i| i.index == index)
}

pub fn by_name(name: &[u8]) -> Option<&'static Interface> {
    interfaces().iter().copied().find(|i| i.name.as_bytes() == name)
}

/// The mask of a prefix length, as a host-order integer.
pub fn prefix_mask(len: u8) -> u32 {
    if len == 0 { 0 } else { u32::MAX << (32 - len.min(32) as u32) }
}

/// Routing tables (RT_TABLE_*).
pub const RT_TABLE_MAIN: u8 = 254;
pub const RT_TABLE_LOCAL: u8 = 255;
/// Route types (RTN_*).
pub const RTN_UNICAST: u8 = 1;
pub const RTN_LOCAL: u8 = 2;
pub const RTN_BROADCAST: u8 = 3;
/// Route scopes (RT_SCOPE_*).
pub const RT_SCOPE_UNIVERSE: u8 = 0;
pub const RT_SCOPE_LINK: u8 = 253;
pub const RT_SCOPE_HOST: u8 = 254;
/// Who made a route (RTPROT_*).
pub const RTPROT_KERNEL: u8 = 2;

/// A route's destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouteDst {
    V4(Ipv4Addr),
    V6(Ipv6Addr),
}

/// A route of one of the sandbox's tables.
#[derive(Clone, Copy, Debug)]
pub struct Route {
    pub dst: RouteDst,
    pub dst_len: u8,
    pub table: u8,
    /// RTN_*.
    pub kind: u8,
    pub scope: u8,
    /// The source address the route prefers (IPv4 only).
    pub prefsrc: Option<Ipv4Addr>,
    pub oif: u32,
}

/// The routes the kernel makes for the interfaces' addresses, in the
/// order Linux dumps them (table by table, IPv4 before IPv6): for each
/// IPv4 address of the loopback, a local route for its whole prefix, one
/// for the address and one for the prefix's broadcast address; for each
/// IPv6 address a local route. A loopback-only namespace has nothing in
/// its main table.
pub fn routes() -> Vec<Route> {
    let mut v = Vec::new();
    for i in interfaces() {
        for a in i.ipv4 {
            let addr = u32::from(a.addr);
            let mask = prefix_mask(a.prefix_len);
            let local = |dst: u32, len: u8| Route {
                dst: RouteDst::V4(Ipv4Addr::from(dst)),
                dst_len: len,
                table: RT_TABLE_LOCAL,
                kind: RTN_LOCAL,
                scope: RT_SCOPE_HOST,
                prefsrc: Some(a.addr),
                oif: i.index,
            };
            if i.flags & IFF_LOOPBACK != 0 && a.prefix_len < 32 {
                v.push(local(addr & mask, a.prefix_len));
            }
            v.push(local(addr, 32));
            if a.prefix_len < 31 {
                v.push(Route {
                    dst: RouteDst::V4(Ipv4Addr::from(addr | !mask)),
                    dst_len: 32,
                    table: RT_TABLE_LOCAL,
                    kind: RTN_BROADCAST,
                    scope: RT_SCOPE_LINK,
                    prefsrc: Some(a.addr),
                    oif: i.index,
                });
            }
        }
    }
    for i in interfaces() {
        for a in i.ipv6 {
            v.push(Route {
                dst: RouteDst::V6(a.addr),
                dst_len: 128,
                table: RT_TABLE_LOCAL,
                kind: RTN_LOCAL,
                scope: RT_SCOPE_UNIVERSE,
                prefsrc: None,
                oif: i.index,
            });
        }
    }
    v
}

/// `struct ifreq`: a name and a 24-byte union.
const IFREQ: usize = 40;
/// `struct ifconf`: a length, padding and a pointer.
const IFCONF: usize = 16;
const AF_INET: u16 = 2;

/// The interface an ifreq names: its name ends at the first NUL or, as
/// Linux's dev_ioctl cuts an alias off, at a colon.
fn named(req: &[u8; IFREQ]) -> Result<&'static Interface, Errno> {
    let name = &req[..IFNAMSIZ - 1];
    let end = name.iter().position(|&b| b == 0 || b == b':').unwrap_or(name.len());
    by_name(&name[..end]).ok_or(Errno::ENODEV)
}

/// A sockaddr_in as the address ioctls write it into the union.
fn sockaddr_in(addr: Ipv4Addr) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..2].copy_from_slice(&AF_INET.to_ne_bytes());
    b[4..8].copy_from_slice(&addr.octets());
    b
}

/// SIOCGIFCONF: an ifreq per IPv4 address (name and sockaddr_in), as
/// many as fit; with a null buffer only the length needed.
fn ifconf(mm: &MemoryManager, arg: u64) -> Result<u64, Errno> {
    let mut conf = [0u8; IFCONF];
    mm.copy_in(arg, &mut conf)?;
    let room = i32::from_ne_bytes(conf[..4].try_into().expect("four bytes"));
    let buf = u64::from_ne_bytes(conf[8..16].try_into().expect("eight bytes"));
    let mut entries = Vec::new();
    for i in interfaces() {
        for a in i.ipv4 {
            let mut req = [0u8; IFREQ];
            req[..i.name.len()].copy_from_slice(i.name.as_bytes());
            req[IFNAMSIZ..IFNAMSIZ + 16].copy_from_slice(&sockaddr_in(a.addr));
            entries.push(req);
        }
    }
    let used = if buf == 0 {
        entries.len() * IFREQ
    } else {
        let fit = (room.max(0) as usize / IFREQ).min(entries.len());
        for (k, e) in entries.iter().take(fit).enumerate() {
            mm.copy_out(buf + (k * IFREQ) as u64, e)?;
        }
        fit * IFREQ
    };
    mm.copy_out(arg, &(used as i32).to_ne_bytes())?;
    Ok(0)
}

/// Interface ioctls every socket answers, whatever its family (Linux's
/// dev_ioctl, reached when the family has no answer of its own): None if
/// `cmd` is not one.
pub fn device_ioctl(call: &NetCall, mm: &MemoryManager, cmd: u32, arg: u64) -> Option<Result<u64, Errno>> {
    match cmd {
        io::SIOCGIFCONF => Some(ifconf(mm, arg)),
        io::SIOCGIFFLAGS
        | io::SIOCGIFMETRIC
        | io::SIOCGIFMTU
        | io::SIOCGIFHWADDR
        | io::SIOCGIFMAP
        | io::SIOCGIFINDEX
        | io::SIOCGIFTXQLEN
        | io::SIOCGIFNAME => Some(get_device(mm, cmd, arg)),
        io::SIOCSIFFLAGS
        | io::SIOCSIFMETRIC
        | io::SIOCSIFMTU
        | io::SIOCSIFHWADDR
        | io::SIOCSIFMAP
        | io::SIOCSIFTXQLEN
        | io::SIOCSIFNAME
        | io::SIOCSIFHWBROADCAST
        | io::SIOCADDMULTI
        | io::SIOCDELMULTI
        | io::SIOCSIFSLAVE
        | io::SIOCSIFPFLAGS => Some(refuse_change(call)),
        _ => None,
    }
}

/// Interface ioctls of an AF_INET socket: the address ioctls of Linux's
/// devinet_ioctl, then those of every socket. None if `cmd` is none of
/// them.
pub fn interface_ioctl(call: &NetCall, mm: &MemoryManager, cmd: u32, arg: u64) -> Option<Result<u64, Errno>> {
    match cmd {
        io::SIOCGIFADDR | io::SIOCGIFDSTADDR | io::SIOCGIFBRDADDR | io::SIOCGIFNETMASK => {
            Some(get_address(mm, cmd, arg))
        }
        io::SIOCSIFADDR | io::SIOCSIFDSTADDR | io::SIOCSIFBRDADDR | io::SIOCSIFNETMASK | io::SIOCDIFADDR => {
            Some(refuse_change(call))
        }
        _ => device_ioctl(call, mm, cmd, arg),
    }
}

/// The sandbox's interfaces are fixed: a change is refused as Linux
/// refuses it without CAP_NET_ADMIN, and as unsupported with it.
fn refuse_change(call: &NetCall) -> Result<u64, Errno> {
    if call.ctx.creds.has(cap::NET_ADMIN) { Err(Errno::EOPNOTSUPP) } else { Err(Errno::EPERM) }
}

fn get_device(mm: &MemoryManager, cmd: u32, arg: u64) -> Result<u64, Errno> {
    let mut req = [0u8; IFREQ];
    mm.copy_in(arg, &mut req)?;
    let iface = if cmd == io::SIOCGIFNAME {
        let index = i32::from_ne_bytes(req[IFNAMSIZ..IFNAMSIZ + 4].try_into().expect("four bytes"));
        let i = u32::try_from(index).ok().and_then(by_index).ok_or(Errno::ENODEV)?;
        req[..IFNAMSIZ].fill(0);
        req[..i.name.len()].copy_from_slice(i.name.as_bytes());
        mm.copy_out(arg, &req)?;
        return Ok(0);
    } else {
        named(&req)?
    };
    let u = &mut req[IFNAMSIZ..];
    match cmd {
        // The short ifr_flags: IFF_LOWER_UP and above do not fit.
        io::SIOCGIFFLAGS => u[..2].copy_from_slice(&(iface.flags as u16).to_ne_bytes()),
        io::SIOCGIFMETRIC => u[..4].copy_from_slice(&0i32.to_ne_bytes()),
        io::SIOCGIFMTU => u[..4].copy_from_slice(&(iface.mtu as i32).to_ne_bytes()),
        io::SIOCGIFHWADDR => {
            u[..16].fill(0);
            u[..2].copy_from_slice(&iface.hw_type.to_ne_bytes());
            u[2..8].copy_from_slice(&iface.hw_addr);
        }
        io::SIOCGIFMAP => u.fill(0),
        io::SIOCGIFINDEX => u[..4].copy_from_slice(&(iface.index as i32).to_ne_bytes()),
        io::SIOCGIFTXQLEN => u[..4].copy_from_slice(&(iface.tx_queue_len as i32).to_ne_bytes()),
        _ => unreachable!("not a device ioctl: {cmd:#x}"),
    }
    mm.copy_out(arg, &req)?;
    Ok(0)
}

/// SIOCGIFADDR and the like: the interface's first IPv4 address (the one
/// whose label is the name given), EADDRNOTAVAIL if it has none.
fn get_address(mm: &MemoryManager, cmd: u32, arg: u64) -> Result<u64, Errno> {
    let mut req = [0u8; IFREQ];
    mm.copy_in(arg, &mut req)?;
    let iface = named(&req)?;
    // An alias ("lo:1") is an address label the sandbox never has.
    let label_end = req[..IFNAMSIZ - 1].iter().position(|&b| b == 0).unwrap_or(IFNAMSIZ - 1);
    let a = match iface.ipv4.first() {
        Some(a) if &req[..label_end] == iface.name.as_bytes() => a,
        _ => return Err(Errno::EADDRNOTAVAIL),
    };
    let value = match cmd {
        io::SIOCGIFADDR | io::SIOCGIFDSTADDR => a.addr,
        io::SIOCGIFBRDADDR => a.broadcast.unwrap_or(Ipv4Addr::UNSPECIFIED),
        io::SIOCGIFNETMASK => a.netmask(),
        _ => unreachable!("not an address ioctl: {cmd:#x}"),
    };
    req[IFNAMSIZ..IFNAMSIZ + 16].copy_from_slice(&sockaddr_in(value));
    mm.copy_out(arg, &req)?;
    Ok(0)
}

/// /proc/net/dev: the interfaces' counters (the sandbox keeps none).
pub fn proc_net_dev() -> String {
    let mut s = String::from(
        "Inter-|   Receive                                                |  Transmit\n \
         face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n",
    );
    for i in interfaces() {
        s.push_str(&format!(
            "{:>6}: {:>7} {:>7} {:>4} {:>4} {:>4} {:>5} {:>10} {:>9} {:>8} {:>7} {:>4} {:>4} {:>4} {:>5} {:>7} {:>10}\n",
            i.name, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
        ));
    }
    s
}

/// IPv6 address flags and scopes as /proc/net/if_inet6 and netlink show
/// them.
pub const IFA_F_PERMANENT: u8 = 0x80;
/// IPV6_ADDR_LOOPBACK as if_inet6's scope column shows ::1.
const IPV6_ADDR_SCOPE_LOOPBACK: u8 = 0x10;

/// /proc/net/if_inet6: address, index, prefix, scope, flags, name.
pub fn proc_net_if_inet6() -> String {
    let mut s = String::new();
    for i in interfaces() {
        for a in i.ipv6 {
            let hex: String = a.addr.octets().iter().map(|b| format!("{b:02x}")).collect();
            let scope = if a.addr.is_loopback() { IPV6_ADDR_SCOPE_LOOPBACK } else { 0 };
            s.push_str(&format!(
                "{hex} {:02x} {:02x} {scope:02x} {:02x} {:>8}\n",
                i.index, a.prefix_len, IFA_F_PERMANENT, i.name
            ));
        }
    }
    s
}

/// /proc/net/route: the IPv4 main table, which holds nothing on a
/// loopback-only network (its routes are in the local table).
pub fn proc_net_route() -> String {
    let mut s =
        format!("{:<127}\n", "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT");
    for r in routes().iter().filter(|r| r.table == RT_TABLE_MAIN) {
        let RouteDst::V4(dst) = r.dst else { continue };
        let name = by_index(r.oif).map_or("*", |i| i.name);
        // RTF_UP, in the kernel's byte order of the addresses.
        let line = format!(
            "{name}\t{:08X}\t{:08X}\t{:04X}\t{}\t{}\t{}\t{:08X}\t{}\t{}\t{}",
            u32::from_ne_bytes(dst.octets()),
            0,
            1,
            0,
            0,
            0,
            u32::from_ne_bytes(Ipv4Addr::from(prefix_mask(r.dst_len)).octets()),
            0,
            0,
            0
        );
        s.push_str(&format!("{line:<127}\n"));
    }
    s
}

/// The MIB counters /proc/net/snmp shows, by section: the sandbox's
/// stack keeps none, so all are zero but the constants Linux shows.
const SNMP: &[(&str, &[(&str, i64)])] = &[
    (
        "Ip",
        &[
            ("Forwarding", 2),
            ("DefaultTTL", 64),
            ("InReceives", 0),
            ("InHdrErrors", 0),
            ("InAddrErrors", 0),
            ("ForwDatagrams", 0),
            ("InUnknownProtos", 0),
            ("InDiscards", 0),
            ("InDelivers", 0),
            ("OutRequests", 0),
            ("OutDiscards", 0),
            ("OutNoRoutes", 0),
            ("ReasmTimeout", 0),
            ("ReasmReqds", 0),
            ("ReasmOKs", 0),
            ("ReasmFails", 0),
            ("FragOKs", 0),
            ("FragFails", 0),
            ("FragCreates", 0),
            ("OutTransmits", 0),
        ],
    ),
    (
        "Icmp",
        &[
            ("InMsgs", 0),
            ("InErrors", 0),
            ("InCsumErrors", 0),
            ("InDestUnreachs", 0),
            ("InTimeExcds", 0),
            ("InParmProbs", 0),
            ("InSrcQuenchs", 0),
            ("InRedirects", 0),
            ("InEchos", 0),
            ("InEchoReps", 0),
            ("InTimestamps", 0),
            ("InTimestampReps", 0),
            ("InAddrMasks", 0),
            ("InAddrMaskReps", 0),
            ("OutMsgs", 0),
            ("OutErrors", 0),
            ("OutRateLimitGlobal", 0),
            ("OutRateLimitHost", 0),
            ("OutDestUnreachs", 0),
            ("OutTimeExcds", 0),
            ("OutParmProbs", 0),
            ("OutSrcQuenchs", 0),
            ("OutRedirects", 0),
            ("OutEchos", 0),
            ("OutEchoReps", 0),
            ("OutTimestamps", 0),
            ("OutTimestampReps", 0),
            ("OutAddrMasks", 0),
            ("OutAddrMaskReps", 0),
        ],
    ),
    ("IcmpMsg", &[]),
    (
        "Tcp",
        &[
            ("RtoAlgorithm", 1),
            ("RtoMin", 200),
            ("RtoMax", 120000),
            ("MaxConn", -1),
            ("ActiveOpens", 0),
            ("PassiveOpens", 0),
            ("AttemptFails", 0),
            ("EstabResets", 0),
            ("CurrEstab", 0),
            ("InSegs", 0),
            ("OutSegs", 0),
            ("RetransSegs", 0),
            ("InErrs", 0),
            ("OutRsts", 0),
            ("InCsumErrors", 0),
        ],
    ),
    ("Udp", UDP_MIB),
    ("UdpLite", UDP_MIB),
];

const UDP_MIB: &[(&str, i64)] = &[
    ("InDatagrams", 0),
    ("NoPorts", 0),
    ("InErrors", 0),
    ("OutDatagrams", 0),
    ("RcvbufErrors", 0),
    ("SndbufErrors", 0),
    ("InCsumErrors", 0),
    ("IgnoredMulti", 0),
    ("MemErrors", 0),
];

/// /proc/net/netstat's sections, which tools read by name: the common
/// TcpExt and IpExt counters, all zero.
const NETSTAT: &[(&str, &[&str])] = &[
    (
        "TcpExt",
        &[
            "SyncookiesSent",
            "SyncookiesRecv",
            "SyncookiesFailed",
            "EmbryonicRsts",
            "PruneCalled",
            "RcvPruned",
            "OfoPruned",
            "OutOfWindowIcmps",
            "LockDroppedIcmps",
            "ArpFilter",
            "TW",
            "TWRecycled",
            "TWKilled",
            "PAWSActive",
            "PAWSEstab",
            "DelayedACKs",
            "DelayedACKLocked",
            "DelayedACKLost",
            "ListenOverflows",
            "ListenDrops",
            "TCPHPHits",
            "TCPPureAcks",
            "TCPHPAcks",
            "TCPTimeouts",
            "TCPAbortOnData",
            "TCPAbortOnClose",
            "TCPAbortOnMemory",
            "TCPAbortOnTimeout",
            "TCPAbortOnLinger",
            "TCPBacklogDrop",
            "TCPRcvCoalesce",
            "TCPOFOQueue",
            "TCPAutoCorking",
            "TCPOrigDataSent",
            "TCPDelivered",
        ],
    ),
    (
        "IpExt",
        &[
            "InNoRoutes",
            "InTruncatedPkts",
            "InMcastPkts",
            "OutMcastPkts",
            "InBcastPkts",
            "OutBcastPkts",
            "InOctets",
            "OutOctets",
            "InMcastOctets",
            "OutMcastOctets",
            "InBcastOctets",
            "OutBcastOctets",
            "InCsumErrors",
            "InNoECTPkts",
            "InECT1Pkts",
            "InECT0Pkts",
            "InCEPkts",
            "ReasmOverlaps",
        ],
    ),
];

/// /proc/net/snmp: each section a line of names and a line of values.
pub fn proc_net_snmp() -> String {
    let mut s = String::new();
    for (section, fields) in SNMP {
        if fields.is_empty() {
            continue;
        }
        let names: Vec<&str> = fields.iter().map(|(n, _)| *n).collect();
        let values: Vec<String> = fields.iter().map(|(_, v)| v.to_string()).collect();
        s.push_str(&format!("{section}: {}\n{section}: {}\n", names.join(" "), values.join(" ")));
    }
    s
}

/// /proc/net/netstat, in the layout of /proc/net/snmp.
pub fn proc_net_netstat() -> String {
    let mut s = String::new();
    for (section, names) in NETSTAT {
        let zeros = vec!["0"; names.len()];
        s.push_str(&format!("{section}: {}\n{section}: {}\n", names.join(" "), zeros.join(" ")));
    }
    s
}

/// /sys/class/net/NAME's attribute `attr`, as sysfs writes it.
pub fn sys_class_net(name: &str, attr: &str) -> Option<String> {
    let i = by_name(name.as_bytes())?;
    let mac = |a: &[u8; 6]| a.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":");
    Some(match attr {
        "ifindex" => format!("{}\n", i.index),
        "iflink" => format!("{}\n", i.index),
        "mtu" => format!("{}\n", i.mtu),
        // dev->flags: RUNNING and LOWER_UP are the operational state's.
        "flags" => format!("{:#x}\n", i.flags & !(IFF_RUNNING | IFF_LOWER_UP) & 0xffff),
        "address" => format!("{}\n", mac(&i.hw_addr)),
        "broadcast" => format!("{}\n", mac(&i.hw_broadcast)),
        "type" => format!("{}\n", i.hw_type),
        "tx_queue_len" => format!("{}\n", i.tx_queue_len),
        "operstate" => "unknown\n".to_string(),
        "carrier" => "1\n".to_string(),
        "addr_len" => "6\n".to_string(),
        "carrier_changes" | "dev_port" | "dormant" | "link_mode" | "netdev_group" | "proto_down" => "0\n".to_string(),
        "dev_id" => "0x0\n".to_string(),
        "uevent" => format!("INTERFACE={}\nIFINDEX={}\n", i.name, i.index),
        _ => return None,
    })
}

/// The attributes /sys/class/net/NAME holds.
pub const SYS_CLASS_NET_ATTRS: &[&str] = &[
    "addr_len",
    "address",
    "broadcast",
    "carrier",
    "carrier_changes",
    "dev_id",
    "dev_port",
    "dormant",
    "flags",
    "ifindex",
    "iflink",
    "link_mode",
    "mtu",
    "netdev_group",
    "operstate",
    "proto_down",
    "tx_queue_len",
    "type",
    "uevent",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_routes_are_linux_s() {
        let r = routes();
        let v4: Vec<(RouteDst, u8, u8)> = r.iter().map(|r| (r.dst, r.dst_len, r.kind)).collect();
        assert_eq!(
            v4,
            vec![
                (RouteDst::V4(Ipv4Addr::new(127, 0, 0, 0)), 8, RTN_LOCAL),
                (RouteDst::V4(Ipv4Addr::new(127, 0, 0, 1)), 32, RTN_LOCAL),
                (RouteDst::V4(Ipv4Addr::new(127, 255, 255, 255)), 32, RTN_BROADCAST),
                (RouteDst::V6(Ipv6Addr::LOCALHOST), 128, RTN_LOCAL),
            ]
        );
        assert!(r.iter().all(|r| r.table == RT_TABLE_LOCAL));
    }

    #[test]
    fn proc_files_are_linux_shaped() {
        assert_eq!(proc_net_if_inet6(), "00000000000000000000000000000001 01 80 10 80       lo\n");
        assert!(proc_net_dev().ends_with(
            "    lo:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0\n"
        ));
        assert_eq!(proc_net_route().lines().count(), 1);
        assert_eq!(prefix_mask(8), 0xff00_0000);
        assert_eq!(prefix_mask(0), 0);
    }
}
