//! UDP over the sandbox's loopback: a datagram goes straight from the
//! sender's memory to the queue of the socket bound to its destination.
//! A datagram for a port nobody has is dropped, and the sender learns of
//! it as Linux's does from the ICMP port-unreachable loopback returns: as
//! ECONNREFUSED on its next call, if it is connected or asked for errors
//! (IP_RECVERR).

use std::collections::VecDeque;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, Weak};

use linux_raw_sys::net as n;
use memory::{GuestSlice, GuestSliceMut};

use super::{
    Claim, Endpoint, IPPROTO_IP, IPPROTO_IPV6, IPPROTO_UDP, IpOptions, Loopback, ProcEntry, Target, any, int_bytes,
    int_of, next_id, parse_bind, parse_target, port_forbidden, route, sockaddr, source_for,
};
use crate::errno::Errno;
use crate::fs::{POLLERR, POLLHUP, POLLIN, POLLOUT, POLLRDNORM, POLLWRNORM};
use crate::mm::MemoryManager;
use crate::net::accounting::SocketCharge;
use crate::net::options::{RMEM_DEFAULT, SocketOptions, WMEM_DEFAULT};
use crate::net::{Control, NetCall, Received, RecvMsg, SendMsg, Socket};
use crate::waiter::{BlockError, WaitQueue};

const POLLRDHUP: u32 = 0x2000;
const POLLWRBAND: u32 = 0x200;

/// The largest datagram over IPv4 and over IPv6 (65535 less the headers).
const MAX_V4: usize = 65_507;
const MAX_V6: usize = 65_527;
/// What Linux charges a queued datagram beyond its bytes (its sk_buff),
/// against the receive buffer.
const DATAGRAM_OVERHEAD: usize = 768;

const UDP_CORK: u32 = 1;
/// The loopback device's interface index.
const LOOPBACK_IFINDEX: i32 = 1;
const IP_TOS: u32 = 1;
const IP_TTL: u32 = 2;
const IP_PKTINFO: u32 = 8;
const IPV6_PKTINFO: u32 = 50;
const SIOCINQ: u32 = 0x541b;
const SIOCOUTQ: u32 = 0x5411;
/// TCP_ESTABLISHED and TCP_CLOSE, as /proc/net/udp shows a socket.
const ESTABLISHED: u8 = 1;
const CLOSE: u8 = 7;

struct Datagram {
    from: Endpoint,
    /// The address it was sent to, for IP_PKTINFO.
    to: IpAddr,
    /// The sender's IP_TTL (or hop limit) and IP_TOS, for IP_RECVTTL and
    /// IP_RECVTOS.
    ttl: i32,
    tos: u8,
    data: Vec<u8>,
    /// What it costs the sandbox's memory while queued.
    charge: Option<SocketCharge>,
}

struct State {
    local: Option<Endpoint>,
    /// The application chose the port or the address (SOCK_BINDPORT_LOCK,
    /// SOCK_BINDADDR_LOCK): a disconnect keeps them.
    port_locked: bool,
    addr_locked: bool,
    peer: Option<Endpoint>,
    queue: VecDeque<Datagram>,
    /// What the queue is charged against the receive buffer.
    queued: usize,
    error: Option<Errno>,
    /// sk_shutdown: 1 reading, 2 writing.
    shut: u32,
    cork: bool,
    ip: IpOptions,
}

/// A UDP socket on the loopback.
pub struct UdpSocket {
    stack: Arc<Loopback>,
    v6: bool,
    id: u64,
    uid: u32,
    options: SocketOptions,
    queue: WaitQueue,
    state: Mutex<State>,
    this: Weak<UdpSocket>,
}

impl UdpSocket {
    pub(crate) fn new(stack: Arc<Loopback>, v6: bool, uid: u32) -> Arc<UdpSocket> {
        Arc::new_cyclic(|this| UdpSocket {
            stack,
            v6,
            id: next_id(),
            uid,
            options: SocketOptions::new(WMEM_DEFAULT, RMEM_DEFAULT),
            queue: WaitQueue::default(),
            state: Mutex::new(State {
                local: None,
                port_locked: false,
                addr_locked: false,
                peer: None,
                queue: VecDeque::new(),
                queued: 0,
                error: None,
                shut: 0,
                cork: false,
                ip: IpOptions::default(),
            }),
            this: this.clone(),
        })
    }

    pub(crate) fn is_v6(&self) -> bool {
        self.v6
    }

    fn claim(&self, ip: IpAddr, st: &State) -> Claim<UdpSocket> {
        let v = self.options.values();
        Claim {
            id: self.id,
            ip,
            v6only: st.ip.v6only,
            reuseaddr: v.reuseaddr,
            reuseport: v.reuseport,
            listening: false,
            uid: self.uid,
            peer: st.peer,
            socket: self.this.clone(),
        }
    }

    /// Writes the socket's address and peer into its claim.
    fn update_claim(&self, st: &State) {
        if let Some(l) = st.local
            && let Some(c) = self.stack.udp.lock().unwrap().get_mut(l.port, self.id)
        {
            c.ip = l.ip;
            c.peer = st.peer;
        }
    }

    fn autobind(&self, st: &mut State) -> Result<Endpoint, Errno> {
        if let Some(l) = st.local {
            return Ok(l);
        }
        let ip = any(self.v6);
        let claim = self.claim(ip, st);
        let port = self.stack.udp.lock().unwrap().claim(0, claim, false)?;
        let l = Endpoint { ip, port };
        st.local = Some(l);
        Ok(l)
    }

    /// Connects to `to` (already parsed).
    pub(crate) fn connect_to(&self, to: Endpoint) -> Result<(), Errno> {
        let dst = route(to.ip)?;
        let mut st = self.state.lock().unwrap();
        if self.v6 && dst.is_ipv4() && st.ip.v6only {
            return Err(Errno::ENETUNREACH);
        }
        let local = self.autobind(&mut st)?;
        if local.ip.is_unspecified() {
            st.local = Some(Endpoint { ip: source_for(dst), port: local.port });
        }
        st.peer = Some(Endpoint { ip: dst, port: to.port });
        self.update_claim(&st);
        Ok(())
    }

    /// connect(AF_UNSPEC): forgets the peer, and the address and port the
    /// connect chose (udp_disconnect).
    fn disconnect(&self) {
        let mut st = self.state.lock().unwrap();
        st.peer = None;
        if let Some(l) = st.local {
            if !st.port_locked {
                self.stack.udp.lock().unwrap().release(l.port, self.id);
                st.local = None;
                return;
            }
            if !st.addr_locked {
                st.local = Some(Endpoint { ip: any(self.v6), port: l.port });
            }
        }
        self.update_claim(&st);
    }

    pub(crate) fn proc_entry(&self) -> ProcEntry {
        let st = self.state.lock().unwrap();
        let none = Endpoint { ip: any(self.v6), port: 0 };
        ProcEntry {
            local: st.local.unwrap_or(none),
            remote: st.peer.unwrap_or(none),
            state: if st.peer.is_some() { ESTABLISHED } else { CLOSE },
            tx_queue: 0,
            rx_queue: st.queued,
            uid: self.uid,
            ino: self.id,
        }
    }

    /// Sends one datagram to the connected port without waiting.
    pub fn send_nonblocking(&self, data: &[u8]) -> Result<usize, Errno> {
        self.transmit(&[GuestSlice::from(data)], None, 0)
    }

    /// Takes the next datagram without waiting: its length, truncated to
    /// `buf`; EAGAIN if none is queued.
    pub fn recv_nonblocking(&self, buf: &mut [u8]) -> Result<usize, Errno> {
        let bufs = [GuestSliceMut::from(buf)];
        self.receive(&bufs, n::MSG_DONTWAIT, None).map(|r| r.ret)
    }

    fn transmit(&self, data: &[GuestSlice<'_>], to: Option<&[u8]>, flags: u32) -> Result<usize, Errno> {
        let len: usize = data.iter().map(|s| s.len()).sum();
        if len > 0xffff {
            return Err(Errno::EMSGSIZE);
        }
        if flags & n::MSG_OOB != 0 {
            return Err(Errno::EOPNOTSUPP);
        }
        let (from, dst, ttl, tos) = {
            let mut st = self.state.lock().unwrap();
            // inet_sendmsg binds a port before anything is checked.
            let local = self.autobind(&mut st)?;
            let target = match to {
                Some(addr) => parse_target(self.v6, addr, true, false)?,
                None => Target::Unspec,
            };
            let dst = match target {
                Target::Addr(ep) => {
                    if ep.port == 0 {
                        return Err(Errno::EINVAL);
                    }
                    ep
                }
                Target::Unspec => st.peer.ok_or(Errno::EDESTADDRREQ)?,
            };
            if self.v6 && dst.ip.is_ipv4() && st.ip.v6only {
                return Err(Errno::ENETUNREACH);
            }
            let ip = route(dst.ip)?;
            let max = if ip.is_ipv4() { MAX_V4 } else { MAX_V6 };
            if len > max {
                return Err(Errno::EMSGSIZE);
            }
            if let Some(e) = st.error.take() {
                return Err(e);
            }
            if st.shut & 2 != 0 {
                return Err(Errno::EPIPE);
            }
            let src =
                if local.ip.is_unspecified() || local.ip.is_ipv4() != ip.is_ipv4() { source_for(ip) } else { local.ip };
            let hops = if ip.is_ipv4() { st.ip.ttl } else { st.ip.unicast_hops };
            let ttl = if hops < 0 { super::DEFAULT_TTL } else { hops };
            let tos = if ip.is_ipv4() { st.ip.tos } else { st.ip.tclass };
            (Endpoint { ip: src, port: local.port }, Endpoint { ip, port: dst.port }, ttl, tos as u8)
        };
        let (receiver, _others) = {
            let mut table = self.stack.udp.lock().unwrap();
            table.lookup(dst.ip, dst.port, |c| c.peer.is_none_or(|p| p == from))
        };
        let Some(receiver) = receiver else {
            // ICMP port unreachable: reported to a connected sender, or
            // one that asked for errors.
            let mut st = self.state.lock().unwrap();
            if st.peer.is_some() || st.ip.recverr || st.ip.recverr6 {
                st.error = Some(Errno::ECONNREFUSED);
                drop(st);
                self.queue.notify_all();
            }
            return Ok(len);
        };
        let mut bytes = Vec::with_capacity(len);
        for s in data {
            s.append_to(&mut bytes);
        }
        receiver.deliver(Datagram { from, to: dst.ip, ttl, tos, data: bytes, charge: None });
        Ok(len)
    }

    /// Queues a datagram, unless the receive buffer is full or the
    /// sandbox's memory has no room for it (then it is dropped, as Linux
    /// drops it when the receiver's buffer or memory cgroup is full).
    fn deliver(&self, mut d: Datagram) {
        let rcvbuf = self.options.values().rcvbuf as usize;
        let mut st = self.state.lock().unwrap();
        let charge = d.data.len() + DATAGRAM_OVERHEAD;
        if st.queued > 0 && st.queued + charge > rcvbuf {
            return;
        }
        let Ok(memory) = self.stack.memory.charge(charge) else { return };
        d.charge = Some(memory);
        st.queued += charge;
        st.queue.push_back(d);
        drop(st);
        self.queue.notify_all();
    }

    /// The control messages a datagram carries for this socket's options
    /// (ip_cmsg_recv, ip6_datagram_recv_ctl).
    fn ancillary(&self, ip: &IpOptions, d: &Datagram) -> Vec<(i32, i32, Vec<u8>)> {
        let mut out = Vec::new();
        if let IpAddr::V4(to) = d.to {
            if ip.pktinfo {
                // in_pktinfo: the interface (lo), the local address, the
                // header's destination.
                let mut b = LOOPBACK_IFINDEX.to_ne_bytes().to_vec();
                b.extend_from_slice(&to.octets());
                b.extend_from_slice(&to.octets());
                out.push((IPPROTO_IP as i32, IP_PKTINFO as i32, b));
            }
            if ip.recvttl {
                out.push((IPPROTO_IP as i32, IP_TTL as i32, d.ttl.to_ne_bytes().to_vec()));
            }
            if ip.recvtos {
                out.push((IPPROTO_IP as i32, IP_TOS as i32, vec![d.tos]));
            }
        }
        if self.v6 && ip.recvpktinfo6 {
            // in6_pktinfo: the destination (v4 ones mapped), the interface.
            let to = match d.to {
                IpAddr::V4(a) => a.to_ipv6_mapped(),
                IpAddr::V6(a) => a,
            };
            let mut b = to.octets().to_vec();
            b.extend_from_slice(&LOOPBACK_IFINDEX.to_ne_bytes());
            out.push((IPPROTO_IPV6 as i32, IPV6_PKTINFO as i32, b));
        }
        out
    }

    fn receive(&self, bufs: &[GuestSliceMut<'_>], flags: u32, call: Option<&NetCall>) -> Result<Received, Errno> {
        self.receive_with(bufs, flags, call, false)
    }

    fn receive_with(
        &self,
        bufs: &[GuestSliceMut<'_>],
        flags: u32,
        call: Option<&NetCall>,
        want_control: bool,
    ) -> Result<Received, Errno> {
        let want: usize = bufs.iter().map(|b| b.len()).sum();
        let nonblocking = flags & n::MSG_DONTWAIT != 0 || call.is_none_or(|c| c.nonblocking());
        if flags & n::MSG_ERRQUEUE != 0 {
            // No error is ever queued: ICMP errors come as the socket's
            // error instead.
            return Err(Errno::EAGAIN);
        }
        let deadline = self.options.recv_deadline();
        let take = || -> Option<Result<Received, Errno>> {
            let mut st = self.state.lock().unwrap();
            if let Some(e) = st.error.take() {
                return Some(Err(e));
            }
            if let Some(d) = st.queue.front() {
                let mut at = 0;
                for b in bufs {
                    if at >= d.data.len() {
                        break;
                    }
                    let k = b.len().min(d.data.len() - at);
                    b.subslice(0, k).copy_from(&d.data[at..at + k]);
                    at += k;
                }
                let full = d.data.len();
                let protocol = if want_control { self.ancillary(&st.ip, d) } else { Vec::new() };
                let r = Received {
                    ret: if flags & n::MSG_TRUNC != 0 { full } else { at },
                    from: Some(sockaddr(self.v6, d.from)),
                    flags: if full > want { n::MSG_TRUNC } else { 0 },
                    control: Control { protocol, ..Default::default() },
                };
                if flags & n::MSG_PEEK == 0 {
                    st.queue.pop_front();
                    st.queued -= full + DATAGRAM_OVERHEAD;
                }
                return Some(Ok(r));
            }
            if st.shut & 1 != 0 {
                return Some(Ok(Received::default()));
            }
            if nonblocking {
                return Some(Err(Errno::EAGAIN));
            }
            None
        };
        let Some(call) = call else {
            return take().unwrap_or(Err(Errno::EAGAIN));
        };
        match call.ctx.block_on(&[&self.queue], deadline, take) {
            Ok(r) => r,
            Err(BlockError::Interrupted) if deadline.is_some() => Err(Errno::EINTR),
            Err(BlockError::Interrupted) => Err(Errno::ERESTARTSYS),
            Err(BlockError::TimedOut) => Err(Errno::EAGAIN),
        }
    }
}

impl Drop for UdpSocket {
    fn drop(&mut self) {
        if let Some(l) = self.state.get_mut().unwrap().local.take() {
            self.stack.udp.lock().unwrap().release(l.port, self.id);
        }
    }
}

impl Socket for UdpSocket {
    fn family(&self) -> u32 {
        if self.v6 { n::AF_INET6 } else { n::AF_INET }
    }

    fn kind(&self) -> u32 {
        n::SOCK_DGRAM
    }

    fn protocol(&self) -> u32 {
        IPPROTO_UDP
    }

    fn bind(&self, call: &NetCall, addr: &[u8]) -> Result<(), Errno> {
        let (ep, mapped) = parse_bind(self.v6, addr)?;
        let mut st = self.state.lock().unwrap();
        if mapped && st.ip.v6only {
            return Err(Errno::EINVAL);
        }
        if !super::is_local(ep.ip) {
            return Err(Errno::EADDRNOTAVAIL);
        }
        if port_forbidden(call, ep.port) {
            return Err(Errno::EACCES);
        }
        if st.local.is_some() {
            return Err(Errno::EINVAL);
        }
        let claim = self.claim(ep.ip, &st);
        let port = self.stack.udp.lock().unwrap().claim(ep.port, claim, false)?;
        st.local = Some(Endpoint { ip: ep.ip, port });
        st.port_locked = ep.port != 0;
        st.addr_locked = !ep.ip.is_unspecified();
        Ok(())
    }

    fn connect(&self, _: &NetCall, addr: &[u8]) -> Result<(), Errno> {
        match parse_target(self.v6, addr, true, true)? {
            Target::Unspec => {
                self.disconnect();
                Ok(())
            }
            Target::Addr(ep) => self.connect_to(ep),
        }
    }

    fn shutdown(&self, _: &NetCall, how: u32) -> Result<(), Errno> {
        let mut st = self.state.lock().unwrap();
        // inet_shutdown: the flags are set either way; an unconnected
        // socket also answers ENOTCONN.
        st.shut |= how + 1;
        let connected = st.peer.is_some();
        drop(st);
        self.queue.notify_all();
        if connected { Ok(()) } else { Err(Errno::ENOTCONN) }
    }

    fn local_addr(&self) -> Result<Vec<u8>, Errno> {
        let st = self.state.lock().unwrap();
        Ok(sockaddr(self.v6, st.local.unwrap_or(Endpoint { ip: any(self.v6), port: 0 })))
    }

    fn peer_addr(&self) -> Result<Vec<u8>, Errno> {
        let st = self.state.lock().unwrap();
        st.peer.map(|p| sockaddr(self.v6, p)).ok_or(Errno::ENOTCONN)
    }

    fn getsockopt(&self, _: &NetCall, level: u32, name: u32, _: usize) -> Result<Vec<u8>, Errno> {
        match level {
            n::SOL_SOCKET => match name {
                n::SO_ERROR => {
                    let e = self.state.lock().unwrap().error.take();
                    Ok(int_bytes(e.map_or(0, |e| e.get() as i32)))
                }
                n::SO_ACCEPTCONN => Ok(int_bytes(0)),
                _ => self.options.get(name).unwrap_or(Err(Errno::ENOPROTOOPT)),
            },
            IPPROTO_UDP => match name {
                UDP_CORK => Ok(int_bytes(self.state.lock().unwrap().cork as i32)),
                _ => Err(Errno::ENOPROTOOPT),
            },
            IPPROTO_IP | IPPROTO_IPV6 => {
                let st = self.state.lock().unwrap();
                st.ip.get(self.v6, level, name, st.peer.is_some())
            }
            _ => Err(Errno::ENOPROTOOPT),
        }
    }

    fn setsockopt(&self, call: &NetCall, level: u32, name: u32, value: &[u8]) -> Result<(), Errno> {
        match level {
            n::SOL_SOCKET => self.options.set(&call.ctx.creds, name, value).unwrap_or(Err(Errno::ENOPROTOOPT)),
            IPPROTO_UDP => match name {
                UDP_CORK => {
                    let v = int_of(value)?;
                    self.state.lock().unwrap().cork = v != 0;
                    Ok(())
                }
                _ => Err(Errno::ENOPROTOOPT),
            },
            IPPROTO_IP | IPPROTO_IPV6 => {
                let mut st = self.state.lock().unwrap();
                let bound = st.local.is_some();
                let r = st.ip.set(self.v6, level, name, value, bound);
                if r.is_ok() && name == super::IPV6_V6ONLY {
                    self.update_claim(&st);
                }
                r
            }
            _ => Err(Errno::ENOPROTOOPT),
        }
    }

    fn send(&self, call: &NetCall, msg: SendMsg) -> Result<usize, Errno> {
        let _ = call;
        self.transmit(msg.data, msg.to, msg.flags)
    }

    fn recv(&self, call: &NetCall, msg: RecvMsg) -> Result<Received, Errno> {
        self.receive_with(msg.bufs, msg.flags, Some(call), msg.want_control)
    }

    fn poll(&self) -> u32 {
        let st = self.state.lock().unwrap();
        let mut mask = POLLOUT | POLLWRNORM | POLLWRBAND;
        if !st.queue.is_empty() {
            mask |= POLLIN | POLLRDNORM;
        }
        if st.error.is_some() {
            mask |= POLLERR;
        }
        if st.shut & 1 != 0 {
            mask |= POLLIN | POLLRDNORM | POLLRDHUP;
        }
        if st.shut == 3 {
            mask |= POLLHUP;
        }
        mask
    }

    fn poll_queue(&self) -> &WaitQueue {
        &self.queue
    }

    fn ioctl(&self, _: &NetCall, mm: &MemoryManager, cmd: u32, arg: u64) -> Result<u64, Errno> {
        let value = match cmd {
            SIOCINQ => self.readable_bytes().unwrap_or(0) as i32,
            SIOCOUTQ => 0,
            _ => return Err(Errno::ENOTTY),
        };
        mm.write(arg, &value).map_err(|_| Errno::EFAULT)?;
        Ok(0)
    }

    /// The length of the next datagram, as Linux's SIOCINQ answers.
    fn readable_bytes(&self) -> Option<u64> {
        Some(self.state.lock().unwrap().queue.front().map_or(0, |d| d.data.len() as u64))
    }

    fn ino(&self) -> Option<u64> {
        Some(self.id)
    }

    fn describe(&self) -> String {
        format!("UDP{}", if self.v6 { "v6" } else { "" })
    }
}
