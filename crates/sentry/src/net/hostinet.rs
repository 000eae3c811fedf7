//! `--network=host`: inet sockets that are host sockets the sentry owns,
//! as runsc's hostinet. The application never holds the host descriptor:
//! each call it makes is checked here and made by the sentry on the host
//! socket, and data moves between the application's memory and the host
//! socket with one copy, the host's.
//!
//! Host sockets are non-blocking on the host. A call that would block
//! waits in the sentry on the socket's queue, which the [`HostNotifier`]
//! wakes on every host readiness edge (an edge-triggered host epoll), so a
//! blocked caller is woken without polling and an edge-triggered epoll of
//! the application sees each new edge as Linux reports it. Timeouts
//! (SO_RCVTIMEO, SO_SNDTIMEO) are the sentry's: the host socket never
//! waits.
//!
//! Options pass to the host from a vetted list; what is not on it is
//! ENOPROTOOPT, so no option reaches the host that would make it send
//! control messages or change the host beyond this socket.

use std::collections::{HashMap, HashSet};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use linux_raw_sys::ioctl as io;
use linux_raw_sys::net as n;
use memory::{GuestSlice, GuestSliceMut};

use super::{NetCall, Received, RecvMsg, SOCKADDR_MAX, SendMsg, Socket};
use crate::auth::cap;
use crate::errno::Errno;
use crate::mm::MemoryManager;
use crate::waiter::{BlockError, WaitQueue};

/// SO_RCVTIMEO and SO_SNDTIMEO, the old and the y2038 numbers: kept by the
/// sentry, since the host socket never blocks.
const SO_RCVTIMEO_OLD: u32 = 20;
const SO_SNDTIMEO_OLD: u32 = 21;
const SO_RCVTIMEO_NEW: u32 = 66;
const SO_SNDTIMEO_NEW: u32 = 67;

/// MSG_* flags an application's send may pass to the host.
const SEND_FLAGS: u32 = n::MSG_OOB | n::MSG_DONTROUTE | n::MSG_EOR | n::MSG_MORE | n::MSG_CONFIRM;
/// MSG_* flags an application's receive may pass to the host.
const RECV_FLAGS: u32 = n::MSG_OOB | n::MSG_PEEK | n::MSG_TRUNC;

/// net.ipv4.ip_unprivileged_port_start: binding a port below it takes
/// CAP_NET_BIND_SERVICE.
const UNPRIVILEGED_PORT_START: u16 = 1024;

/// The obsolete packet socket type, which AF_INET turns into AF_PACKET.
const SOCK_PACKET: u32 = 10;

/// Most bytes of an option value asked of the host (struct tcp_info is
/// the largest on the list).
const OPTION_ROOM: usize = 512;

/// The socket options passed to the host, by level.
fn vetted(level: u32, name: u32) -> bool {
    let l = level as i32;
    let o = name as i32;
    match l {
        libc::SOL_SOCKET => matches!(
            o,
            libc::SO_ERROR
                | libc::SO_ACCEPTCONN
                | libc::SO_REUSEADDR
                | libc::SO_REUSEPORT
                | libc::SO_KEEPALIVE
                | libc::SO_BROADCAST
                | libc::SO_LINGER
                | libc::SO_OOBINLINE
                | libc::SO_SNDBUF
                | libc::SO_RCVBUF
                | libc::SO_RCVLOWAT
                | libc::SO_SNDLOWAT
                | libc::SO_PRIORITY
                | libc::SO_DONTROUTE
                | libc::SO_INCOMING_CPU
                | libc::SO_COOKIE
        ),
        libc::IPPROTO_TCP => matches!(
            o,
            libc::TCP_NODELAY
                | libc::TCP_MAXSEG
                | libc::TCP_CORK
                | libc::TCP_KEEPIDLE
                | libc::TCP_KEEPINTVL
                | libc::TCP_KEEPCNT
                | libc::TCP_SYNCNT
                | libc::TCP_LINGER2
                | libc::TCP_DEFER_ACCEPT
                | libc::TCP_WINDOW_CLAMP
                | libc::TCP_INFO
                | libc::TCP_QUICKACK
                | libc::TCP_CONGESTION
                | libc::TCP_USER_TIMEOUT
                | libc::TCP_NOTSENT_LOWAT
        ),
        libc::IPPROTO_IP => matches!(
            o,
            libc::IP_TOS
                | libc::IP_TTL
                | libc::IP_MTU_DISCOVER
                | libc::IP_MTU
                | libc::IP_FREEBIND
                | libc::IP_BIND_ADDRESS_NO_PORT
                | libc::IP_MULTICAST_TTL
                | libc::IP_MULTICAST_LOOP
                | libc::IP_MULTICAST_IF
                | libc::IP_ADD_MEMBERSHIP
                | libc::IP_DROP_MEMBERSHIP
        ),
        libc::IPPROTO_IPV6 => matches!(
            o,
            libc::IPV6_V6ONLY
                | libc::IPV6_UNICAST_HOPS
                | libc::IPV6_MULTICAST_HOPS
                | libc::IPV6_MULTICAST_LOOP
                | libc::IPV6_MULTICAST_IF
                | libc::IPV6_TCLASS
                | libc::IPV6_MTU_DISCOVER
                | libc::IPV6_MTU
                | libc::IPV6_ADD_MEMBERSHIP
                | libc::IPV6_DROP_MEMBERSHIP
        ),
        _ => false,
    }
}

/// The host's answer to a call returning a count or -1.
fn host_result(r: isize) -> Result<usize, Errno> {
    if r < 0 { Err(last_errno()) } else { Ok(r as usize) }
}

fn last_errno() -> Errno {
    let raw = std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO);
    Errno::from_host(rustix::io::Errno::from_raw_os_error(raw))
}

/// Ok(None) for a call the host would have blocked.
fn would_block<T>(r: Result<T, Errno>) -> Result<Option<T>, Errno> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(Errno::EAGAIN) => Ok(None),
        Err(e) => Err(e),
    }
}

/// socket(2) with `--network=host`: a host socket of `family`
/// (AF_INET or AF_INET6), `kind` and `protocol`, checked as Linux's
/// inet_create checks them. Only TCP and UDP reach the host.
pub fn create(family: u32, kind: u32, protocol: u32) -> Result<Arc<dyn Socket>, Errno> {
    if protocol as i32 >= 263 || (protocol as i32) < 0 {
        // IPPROTO_MAX.
        return Err(Errno::EINVAL);
    }
    let tcp = libc::IPPROTO_TCP as u32;
    let udp = libc::IPPROTO_UDP as u32;
    let protocol = match (kind, protocol) {
        (n::SOCK_STREAM, 0) => tcp,
        (n::SOCK_STREAM, p) if p == tcp => tcp,
        (n::SOCK_DGRAM, 0) => udp,
        (n::SOCK_DGRAM, p) if p == udp => udp,
        // Ping sockets: as a host whose ping_group_range leaves the user
        // out.
        (n::SOCK_DGRAM, p) if p == libc::IPPROTO_ICMP as u32 || p == libc::IPPROTO_ICMPV6 as u32 => {
            return Err(Errno::EACCES);
        }
        (n::SOCK_STREAM | n::SOCK_DGRAM, _) => return Err(Errno::EPROTONOSUPPORT),
        // Raw IP has no wildcard protocol.
        (n::SOCK_RAW, 0) => return Err(Errno::EPROTONOSUPPORT),
        // As a container without CAP_NET_RAW; SOCK_PACKET is a packet
        // socket on AF_INET.
        (n::SOCK_RAW | SOCK_PACKET, _) => return Err(Errno::EPERM),
        _ => return Err(Errno::new(libc::ESOCKTNOSUPPORT as u16)),
    };
    let ty = kind as i32 | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
    // SAFETY: socket(2) takes no pointers.
    let fd = unsafe { libc::socket(family as i32, ty, protocol as i32) };
    if fd < 0 {
        return Err(last_errno());
    }
    // SAFETY: the descriptor was just made and is owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    Ok(HostSocket::new(fd, family, kind, protocol)?)
}

/// An inet socket that is a host socket.
pub struct HostSocket {
    fd: OwnedFd,
    family: u32,
    kind: u32,
    protocol: u32,
    /// Woken on every host readiness edge (see [`HostNotifier`]).
    queue: Arc<WaitQueue>,
    /// The socket's entry in the notifier.
    token: u64,
    /// SO_RCVTIMEO and SO_SNDTIMEO.
    timeouts: Mutex<(Option<Duration>, Option<Duration>)>,
}

impl HostSocket {
    fn new(fd: OwnedFd, family: u32, kind: u32, protocol: u32) -> Result<Arc<HostSocket>, Errno> {
        let queue = Arc::new(WaitQueue::default());
        let token = notifier()?.add(fd.as_fd(), &queue)?;
        Ok(Arc::new(HostSocket { fd, family, kind, protocol, queue, token, timeouts: Mutex::new((None, None)) }))
    }

    fn raw(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    fn stream(&self) -> bool {
        self.kind == n::SOCK_STREAM
    }

    /// Runs `attempt` until it is done, waiting for host readiness between
    /// tries unless the call may not block. A signal ends the wait with
    /// ERESTARTSYS, or EINTR with a timeout set, as Linux's
    /// sock_intr_errno; the timeout passing gives `timed_out`.
    fn wait<T>(
        &self,
        call: &NetCall,
        nonblocking: bool,
        timeout: Option<Duration>,
        timed_out: Errno,
        mut attempt: impl FnMut() -> Result<Option<T>, Errno>,
    ) -> Result<T, Errno> {
        if let Some(v) = attempt()? {
            return Ok(v);
        }
        if nonblocking {
            return Err(Errno::EAGAIN);
        }
        let deadline = timeout.map(|t| Instant::now() + t);
        let r = call.ctx.block_on(&[&self.queue], deadline, || attempt().transpose());
        match r {
            Ok(r) => r,
            Err(BlockError::Interrupted) => Err(if timeout.is_some() { Errno::EINTR } else { Errno::ERESTARTSYS }),
            Err(BlockError::TimedOut) => Err(timed_out),
        }
    }

    fn rcvtimeo(&self) -> Option<Duration> {
        self.timeouts.lock().unwrap().0
    }

    fn sndtimeo(&self) -> Option<Duration> {
        self.timeouts.lock().unwrap().1
    }

    /// One host sendmsg of `data` (without blocking, never raising
    /// SIGPIPE in the sentry).
    fn send_once(&self, data: &[GuestSlice], to: Option<&[u8]>, flags: u32) -> Result<usize, Errno> {
        let iov = GuestSlice::as_iovecs(data);
        // SAFETY: an all-zero msghdr is valid (no name, no control).
        let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
        hdr.msg_iov = iov.as_ptr().cast_mut();
        hdr.msg_iovlen = iov.len();
        if let Some(to) = to {
            hdr.msg_name = to.as_ptr().cast_mut().cast();
            hdr.msg_namelen = to.len() as u32;
        }
        let flags = (flags & SEND_FLAGS) as i32 | libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL;
        // SAFETY: the iovecs name application memory the slices keep valid
        // for reads through the call, and the name is a live buffer of the
        // length given; the host only reads them.
        host_result(unsafe { libc::sendmsg(self.raw(), &hdr, flags) })
    }

    /// One host recvmsg into `bufs`: the count (or a datagram's length
    /// with MSG_TRUNC), the sender and the message flags.
    fn recv_once(&self, bufs: &[GuestSliceMut], flags: u32) -> Result<(usize, Vec<u8>, u32), Errno> {
        let iov = GuestSliceMut::as_iovecs(bufs);
        let mut name = [0u8; SOCKADDR_MAX];
        // SAFETY: an all-zero msghdr is valid (no name, no control).
        let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
        hdr.msg_iov = iov.as_ptr().cast_mut();
        hdr.msg_iovlen = iov.len();
        hdr.msg_name = name.as_mut_ptr().cast();
        hdr.msg_namelen = name.len() as u32;
        let flags = (flags & RECV_FLAGS) as i32 | libc::MSG_DONTWAIT;
        // SAFETY: the iovecs name application memory the slices keep valid
        // for writes through the call, the name buffer is ours and of the
        // length given; no control buffer is passed.
        let got = host_result(unsafe { libc::recvmsg(self.raw(), &mut hdr, flags) })?;
        let from = name[..(hdr.msg_namelen as usize).min(SOCKADDR_MAX)].to_vec();
        Ok((got, from, hdr.msg_flags as u32))
    }

    /// A host ioctl whose argument is a buffer of ours.
    fn ioctl_buf(&self, cmd: u32, buf: &mut [u8]) -> Result<(), Errno> {
        // SAFETY: `buf` is at least as large as the request's argument
        // (checked by the callers); the host writes only inside it.
        let r = unsafe { libc::ioctl(self.raw(), cmd as libc::c_ulong, buf.as_mut_ptr()) };
        host_result(r as isize).map(drop)
    }

    /// SIOCGIFCONF: the host's interfaces into the caller's `struct ifconf`.
    fn ifconf(&self, mm: &MemoryManager, arg: u64) -> Result<u64, Errno> {
        /// `struct ifconf`: the length, padding, the buffer's address.
        const IFCONF: usize = 16;
        const IFREQ: usize = 40;
        let mut conf = [0u8; IFCONF];
        mm.copy_in(arg, &mut conf).map_err(|_| Errno::EFAULT)?;
        let len = i32::from_ne_bytes(conf[..4].try_into().expect("four bytes"));
        let buf_addr = u64::from_ne_bytes(conf[8..].try_into().expect("eight bytes"));
        // As many whole requests as the caller has room for, within reason.
        let room = if buf_addr == 0 { 0 } else { (len.max(0) as usize).min(IFREQ * 1024) / IFREQ * IFREQ };
        let mut buf = vec![0u8; room];
        let mut host = [0u8; IFCONF];
        host[..4].copy_from_slice(&(room as i32).to_ne_bytes());
        let ptr = if room == 0 { 0u64 } else { buf.as_mut_ptr() as u64 };
        host[8..].copy_from_slice(&ptr.to_ne_bytes());
        // SAFETY: `host` is a struct ifconf naming `buf` (or no buffer, for
        // the length alone), both ours and live through the call.
        let r = unsafe { libc::ioctl(self.raw(), io::SIOCGIFCONF as libc::c_ulong, host.as_mut_ptr()) };
        host_result(r as isize)?;
        let got = i32::from_ne_bytes(host[..4].try_into().expect("four bytes"));
        if buf_addr != 0 {
            let k = (got.max(0) as usize).min(room);
            mm.copy_out(buf_addr, &buf[..k]).map_err(|_| Errno::EFAULT)?;
        }
        mm.copy_out(arg, &got.to_ne_bytes()).map_err(|_| Errno::EFAULT)?;
        Ok(0)
    }
}

impl Drop for HostSocket {
    fn drop(&mut self) {
        if let Ok(n) = notifier() {
            n.remove(self.fd.as_fd(), self.token);
        }
    }
}

/// An int-sized option value out of the host, or the bytes it gave.
fn getsockopt_host(fd: i32, level: u32, name: u32, room: usize) -> Result<Vec<u8>, Errno> {
    let mut buf = vec![0u8; room.min(OPTION_ROOM)];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: the host writes at most `len` bytes into `buf`, ours, and the
    // length back into `len`.
    let r = unsafe { libc::getsockopt(fd, level as i32, name as i32, buf.as_mut_ptr().cast(), &mut len) };
    host_result(r as isize)?;
    buf.truncate(len as usize);
    Ok(buf)
}

/// A timeval as SO_RCVTIMEO and SO_SNDTIMEO take it: None for none.
fn timeout_of(value: &[u8]) -> Result<Option<Duration>, Errno> {
    if value.len() < 16 {
        return Err(Errno::EINVAL);
    }
    let sec = i64::from_ne_bytes(value[..8].try_into().expect("eight bytes"));
    let usec = i64::from_ne_bytes(value[8..16].try_into().expect("eight bytes"));
    if !(0..1_000_000).contains(&usec) {
        return Err(Errno::EDOM);
    }
    if sec < 0 || (sec == 0 && usec == 0) {
        return Ok(None);
    }
    Ok(Some(Duration::new(sec as u64, usec as u32 * 1000)))
}

fn timeout_bytes(t: Option<Duration>) -> Vec<u8> {
    let (sec, usec) = t.map_or((0, 0), |d| (d.as_secs() as i64, d.subsec_micros() as i64));
    let mut b = sec.to_ne_bytes().to_vec();
    b.extend_from_slice(&usec.to_ne_bytes());
    b
}

impl Socket for HostSocket {
    fn family(&self) -> u32 {
        self.family
    }
    fn kind(&self) -> u32 {
        self.kind
    }
    fn protocol(&self) -> u32 {
        self.protocol
    }

    fn bind(&self, call: &NetCall, addr: &[u8]) -> Result<(), Errno> {
        // The host asks the sentry's capability for a privileged port; the
        // caller's own is asked here, as Linux's inet_bind does.
        let port = addr.get(2..4).map_or(0, |p| u16::from_be_bytes([p[0], p[1]]));
        if port != 0 && port < UNPRIVILEGED_PORT_START && !call.ctx.creds.has(cap::NET_BIND_SERVICE) {
            return Err(Errno::EACCES);
        }
        // SAFETY: `addr` is a live buffer of the length given; the host
        // checks the address and only reads it.
        let r = unsafe { libc::bind(self.raw(), addr.as_ptr().cast(), addr.len() as u32) };
        host_result(r as isize).map(drop)
    }

    fn listen(&self, _: &NetCall, backlog: i32) -> Result<(), Errno> {
        // SAFETY: listen(2) takes no pointers.
        host_result(unsafe { libc::listen(self.raw(), backlog) } as isize).map(drop)
    }

    fn accept(&self, call: &NetCall) -> Result<(Arc<dyn Socket>, Vec<u8>), Errno> {
        let (fd, peer) = self.wait(call, call.nonblocking(), self.rcvtimeo(), Errno::EAGAIN, || {
            let mut addr = [0u8; SOCKADDR_MAX];
            let mut len = addr.len() as libc::socklen_t;
            // SAFETY: the host writes at most `len` bytes of address into
            // `addr`, ours, and its length into `len`.
            let fd = unsafe {
                libc::accept4(self.raw(), addr.as_mut_ptr().cast(), &mut len, libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC)
            };
            would_block(host_result(fd as isize).map(|fd| {
                // SAFETY: the descriptor was just made and is owned by
                // nothing else.
                let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
                (fd, addr[..(len as usize).min(SOCKADDR_MAX)].to_vec())
            }))
        })?;
        let s = HostSocket::new(fd, self.family, self.kind, self.protocol)?;
        *s.timeouts.lock().unwrap() = *self.timeouts.lock().unwrap();
        Ok((s, peer))
    }

    fn connect(&self, call: &NetCall, addr: &[u8]) -> Result<(), Errno> {
        // SAFETY: `addr` is a live buffer of the length given; the host
        // checks the address and only reads it.
        let r = unsafe { libc::connect(self.raw(), addr.as_ptr().cast(), addr.len() as u32) };
        match host_result(r as isize) {
            Ok(_) => return Ok(()),
            Err(Errno::EINPROGRESS) if self.stream() => {}
            Err(e) => return Err(e),
        }
        if call.nonblocking() {
            return Err(Errno::EINPROGRESS);
        }
        // As Linux's inet_stream_connect: wait for the handshake, then its
        // outcome is the socket's error; a timeout leaves it in progress.
        self.wait(call, false, self.sndtimeo(), Errno::EINPROGRESS, || {
            let ready = self.poll();
            if ready & (libc::POLLOUT | libc::POLLERR | libc::POLLHUP) as u32 == 0 {
                return Ok(None);
            }
            let err = getsockopt_host(self.raw(), n::SOL_SOCKET, n::SO_ERROR, 4)?;
            let err = i32::from_ne_bytes(err.get(..4).ok_or(Errno::EIO)?.try_into().expect("four bytes"));
            if err != 0 {
                return Err(Errno::from_host(rustix::io::Errno::from_raw_os_error(err)));
            }
            // The host socket knows itself connected only once a connect
            // sees it so (it answers 0 then, and EISCONN after), as the
            // application's own blocking connect would have.
            // SAFETY: as above.
            unsafe { libc::connect(self.raw(), addr.as_ptr().cast(), addr.len() as u32) };
            Ok(Some(()))
        })
    }

    fn shutdown(&self, _: &NetCall, how: u32) -> Result<(), Errno> {
        // SAFETY: shutdown(2) takes no pointers.
        host_result(unsafe { libc::shutdown(self.raw(), how as i32) } as isize).map(drop)
    }

    fn local_addr(&self) -> Result<Vec<u8>, Errno> {
        let mut addr = [0u8; SOCKADDR_MAX];
        let mut len = addr.len() as libc::socklen_t;
        // SAFETY: the host writes at most `len` bytes into `addr`, ours.
        host_result(unsafe { libc::getsockname(self.raw(), addr.as_mut_ptr().cast(), &mut len) } as isize)?;
        Ok(addr[..(len as usize).min(SOCKADDR_MAX)].to_vec())
    }

    fn peer_addr(&self) -> Result<Vec<u8>, Errno> {
        let mut addr = [0u8; SOCKADDR_MAX];
        let mut len = addr.len() as libc::socklen_t;
        // SAFETY: the host writes at most `len` bytes into `addr`, ours.
        host_result(unsafe { libc::getpeername(self.raw(), addr.as_mut_ptr().cast(), &mut len) } as isize)?;
        Ok(addr[..(len as usize).min(SOCKADDR_MAX)].to_vec())
    }

    fn getsockopt(&self, _: &NetCall, level: u32, name: u32, len: usize) -> Result<Vec<u8>, Errno> {
        if level == n::SOL_SOCKET {
            match name {
                SO_RCVTIMEO_OLD | SO_RCVTIMEO_NEW => return Ok(timeout_bytes(self.rcvtimeo())),
                SO_SNDTIMEO_OLD | SO_SNDTIMEO_NEW => return Ok(timeout_bytes(self.sndtimeo())),
                _ => {}
            }
        }
        if !vetted(level, name) {
            return Err(Errno::ENOPROTOOPT);
        }
        getsockopt_host(self.raw(), level, name, len)
    }

    fn setsockopt(&self, _: &NetCall, level: u32, name: u32, value: &[u8]) -> Result<(), Errno> {
        if level == n::SOL_SOCKET {
            match name {
                SO_RCVTIMEO_OLD | SO_RCVTIMEO_NEW => {
                    self.timeouts.lock().unwrap().0 = timeout_of(value)?;
                    return Ok(());
                }
                SO_SNDTIMEO_OLD | SO_SNDTIMEO_NEW => {
                    self.timeouts.lock().unwrap().1 = timeout_of(value)?;
                    return Ok(());
                }
                _ => {}
            }
        }
        if !vetted(level, name) {
            return Err(Errno::ENOPROTOOPT);
        }
        // SAFETY: `value` is a live buffer of the length given; the host
        // only reads it.
        let r = unsafe {
            libc::setsockopt(self.raw(), level as i32, name as i32, value.as_ptr().cast(), value.len() as u32)
        };
        host_result(r as isize).map(drop)
    }

    fn send(&self, call: &NetCall, msg: SendMsg) -> Result<usize, Errno> {
        // Descriptors and credentials do not travel over inet (Linux's
        // __sock_cmsg_send refuses them).
        if !msg.control.rights.is_empty() || msg.control.creds.is_some() {
            return Err(Errno::EINVAL);
        }
        let nonblocking = call.nonblocking() || msg.flags & n::MSG_DONTWAIT != 0;
        let total = msg.len();
        let mut done = 0;
        loop {
            let rest = tail(msg.data, done);
            let r = self.wait(call, nonblocking, self.sndtimeo(), Errno::EAGAIN, || {
                would_block(self.send_once(&rest, msg.to, msg.flags))
            });
            match r {
                Ok(k) => done += k,
                // What went before the error is the answer.
                Err(_) if done > 0 => return Ok(done),
                Err(e) => return Err(e),
            }
            // A blocking stream send sends everything, as Linux's
            // tcp_sendmsg waits for room; a datagram goes whole or not.
            if !self.stream() || nonblocking || done >= total {
                return Ok(done);
            }
        }
    }

    fn recv(&self, call: &NetCall, msg: RecvMsg) -> Result<Received, Errno> {
        // Nothing ever asks the host to queue errors (IP_RECVERR is not
        // passed), so the error queue is empty.
        if msg.flags & n::MSG_ERRQUEUE != 0 {
            return Err(Errno::EAGAIN);
        }
        let nonblocking = call.nonblocking() || msg.flags & n::MSG_DONTWAIT != 0;
        let waitall = self.stream() && msg.flags & (n::MSG_WAITALL | n::MSG_PEEK | n::MSG_TRUNC) == n::MSG_WAITALL;
        let total = msg.len();
        let mut got = 0;
        let mut out = Received::default();
        loop {
            let rest = tail_mut(msg.bufs, got);
            let r = self.wait(call, nonblocking, self.rcvtimeo(), Errno::EAGAIN, || {
                would_block(self.recv_once(&rest, msg.flags))
            });
            let (k, from, flags) = match r {
                Ok(v) => v,
                Err(_) if got > 0 => break,
                Err(e) => return Err(e),
            };
            got += k;
            out.flags = flags & (n::MSG_TRUNC | n::MSG_CTRUNC | n::MSG_OOB | n::MSG_EOR);
            // TCP reports no sender; a datagram's is its source.
            if !from.is_empty() && !self.stream() {
                out.from = Some(from);
            }
            // MSG_WAITALL on a blocking stream: until full, end of stream,
            // an error or a signal.
            if !waitall || nonblocking || k == 0 || got >= total {
                break;
            }
        }
        out.ret = got;
        Ok(out)
    }

    fn poll(&self) -> u32 {
        let mut fd = libc::pollfd {
            fd: self.raw(),
            events: libc::POLLIN | libc::POLLOUT | libc::POLLPRI | libc::POLLRDHUP,
            revents: 0,
        };
        // SAFETY: one pollfd of ours; a zero timeout only asks.
        let r = unsafe { libc::poll(&mut fd, 1, 0) };
        if r < 0 {
            return libc::POLLERR as u32;
        }
        let mut ready = fd.revents as u32;
        // Linux reports the normal-data bits along with IN and OUT.
        if ready & libc::POLLIN as u32 != 0 {
            ready |= libc::POLLRDNORM as u32;
        }
        if ready & libc::POLLOUT as u32 != 0 {
            ready |= libc::POLLWRNORM as u32;
        }
        ready
    }

    fn poll_queue(&self) -> &WaitQueue {
        &self.queue
    }

    fn ioctl(&self, _: &NetCall, mm: &MemoryManager, cmd: u32, arg: u64) -> Result<u64, Errno> {
        match cmd {
            // The bytes queued to read or not yet sent, and the urgent mark:
            // an int each.
            io::FIONREAD | io::TIOCOUTQ | io::SIOCATMARK => {
                let mut v = [0u8; 4];
                self.ioctl_buf(cmd, &mut v)?;
                mm.copy_out(arg, &v).map_err(|_| Errno::EFAULT)?;
                Ok(0)
            }
            io::SIOCGIFCONF => self.ifconf(mm, arg),
            // The interface requests that read a `struct ifreq`.
            io::SIOCGIFNAME
            | io::SIOCGIFINDEX
            | io::SIOCGIFFLAGS
            | io::SIOCGIFADDR
            | io::SIOCGIFDSTADDR
            | io::SIOCGIFBRDADDR
            | io::SIOCGIFNETMASK
            | io::SIOCGIFMETRIC
            | io::SIOCGIFMTU
            | io::SIOCGIFHWADDR
            | io::SIOCGIFTXQLEN => {
                let mut req = [0u8; 40];
                mm.copy_in(arg, &mut req).map_err(|_| Errno::EFAULT)?;
                self.ioctl_buf(cmd, &mut req)?;
                mm.copy_out(arg, &req).map_err(|_| Errno::EFAULT)?;
                Ok(0)
            }
            _ => Err(Errno::ENOTTY),
        }
    }
}

/// The buffers after the first `skip` bytes.
fn tail<'a>(bufs: &[GuestSlice<'a>], mut skip: usize) -> Vec<GuestSlice<'a>> {
    let mut out = Vec::with_capacity(bufs.len());
    for b in bufs {
        if skip >= b.len() {
            skip -= b.len();
            continue;
        }
        out.push(b.subslice(skip, b.len() - skip));
        skip = 0;
    }
    out
}

fn tail_mut<'a>(bufs: &[GuestSliceMut<'a>], mut skip: usize) -> Vec<GuestSliceMut<'a>> {
    let mut out = Vec::with_capacity(bufs.len());
    for b in bufs {
        if skip >= b.len() {
            skip -= b.len();
            continue;
        }
        out.push(b.subslice(skip, b.len() - skip));
        skip = 0;
    }
    out
}

/// Wakes host sockets' queues on their host readiness edges: one host
/// epoll, edge-triggered, watched by one sentry thread. Each host event on
/// a socket (data or a connection arriving, room to send, a hang-up, an
/// error) notifies its queue, which wakes blocked calls, poll and epoll
/// waiters, and moves the generation an edge-triggered epoll reports by.
struct HostNotifier {
    epoll: OwnedFd,
    queues: Mutex<HashMap<u64, Weak<WaitQueue>>>,
    next_token: AtomicU64,
    /// Sockets whose first event, the readiness the host epoll queues when
    /// a socket is added, the watcher has not yet passed on.
    unsettled: Mutex<HashSet<u64>>,
    settled: Condvar,
}

static NOTIFIER: OnceLock<Result<Arc<HostNotifier>, Errno>> = OnceLock::new();

/// The notifier, started with the first host socket.
fn notifier() -> Result<&'static HostNotifier, Errno> {
    let n = NOTIFIER.get_or_init(|| {
        // SAFETY: epoll_create1 takes no pointers.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(last_errno());
        }
        // SAFETY: the descriptor was just made and is owned by nothing else.
        let epoll = unsafe { OwnedFd::from_raw_fd(fd) };
        let n = Arc::new(HostNotifier {
            epoll,
            queues: Mutex::new(HashMap::new()),
            next_token: AtomicU64::new(1),
            unsettled: Mutex::new(HashSet::new()),
            settled: Condvar::new(),
        });
        let watcher = n.clone();
        std::thread::Builder::new()
            .name("host-sockets".into())
            .spawn(move || watcher.run())
            .map_err(|_| Errno::EAGAIN)?;
        Ok(n)
    });
    n.as_deref().map_err(|e| *e)
}

impl HostNotifier {
    /// Watches `fd`, whose edges wake `queue`; the token to remove it by.
    fn add(&self, fd: BorrowedFd, queue: &Arc<WaitQueue>) -> Result<u64, Errno> {
        let token = self.next_token.fetch_add(1, Ordering::Relaxed);
        self.queues.lock().unwrap().insert(token, Arc::downgrade(queue));
        // Before the add: the watcher may pass the first event on at once.
        self.unsettled.lock().unwrap().insert(token);
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLPRI | libc::EPOLLRDHUP | libc::EPOLLET) as u32,
            u64: token,
        };
        // SAFETY: `ev` is ours and only read; both descriptors are live.
        let r = unsafe { libc::epoll_ctl(self.epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, fd.as_raw_fd(), &mut ev) };
        if r < 0 {
            let e = last_errno();
            self.queues.lock().unwrap().remove(&token);
            self.unsettled.lock().unwrap().remove(&token);
            return Err(e);
        }
        self.settle(fd, token);
        Ok(token)
    }

    /// Waits until the watcher has passed on the event the host queued
    /// when `fd` was added, if it is ready at all: that event is no edge
    /// of the application's, and passed on after the application first
    /// waited it would look like a new one to an edge-triggered epoll.
    fn settle(&self, fd: BorrowedFd, token: u64) {
        let mut unsettled = self.unsettled.lock().unwrap();
        let mut p =
            libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN | libc::POLLOUT | libc::POLLPRI, revents: 0 };
        // SAFETY: polls one live descriptor without blocking.
        let ready = unsafe { libc::poll(&mut p, 1, 0) } > 0;
        if ready {
            // The host queued the event; the watcher takes it promptly. The
            // bound only keeps a wedged watcher from wedging this caller.
            let deadline = Instant::now() + Duration::from_secs(5);
            while unsettled.contains(&token) {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                unsettled = self.settled.wait_timeout(unsettled, left).unwrap().0;
            }
        }
        unsettled.remove(&token);
    }

    fn remove(&self, fd: BorrowedFd, token: u64) {
        // SAFETY: both descriptors are live; DEL reads no event.
        unsafe { libc::epoll_ctl(self.epoll.as_raw_fd(), libc::EPOLL_CTL_DEL, fd.as_raw_fd(), std::ptr::null_mut()) };
        self.queues.lock().unwrap().remove(&token);
    }

    fn run(&self) {
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 64];
        loop {
            // SAFETY: the host writes at most `events.len()` events into
            // the vector, ours.
            let r = unsafe { libc::epoll_wait(self.epoll.as_raw_fd(), events.as_mut_ptr(), events.len() as i32, -1) };
            if r <= 0 {
                continue;
            }
            let woken: Vec<Arc<WaitQueue>> = {
                let queues = self.queues.lock().unwrap();
                events[..r as usize].iter().filter_map(|e| queues.get(&{ e.u64 }).and_then(Weak::upgrade)).collect()
            };
            for q in woken {
                q.notify_all();
            }
            let mut unsettled = self.unsettled.lock().unwrap();
            if !unsettled.is_empty() {
                for e in &events[..r as usize] {
                    unsettled.remove(&{ e.u64 });
                }
                self.settled.notify_all();
            }
        }
    }
}

/// SOL_NETLINK options a host route socket takes from the application's:
/// NETLINK_CAP_ACK, NETLINK_EXT_ACK, NETLINK_GET_STRICT_CHK.
pub const ROUTE_SOCKET_FLAGS: [u32; 3] = [10, 11, 12];
const SOL_NETLINK: i32 = 270;
/// A dump's datagrams are at most 32 KiB on Linux; room for one.
const ROUTE_DATAGRAM_ROOM: usize = 64 << 10;
const NLMSG_HDRLEN: usize = 16;

/// Asks the host's route netlink the read-only `request` (RTM_GET*
/// messages only, checked by the caller), on a host socket made for it
/// with the application's socket `flags` (by [`ROUTE_SOCKET_FLAGS`], on or
/// off), and returns the host's answer datagrams as they came, each
/// message's port id made `port`. The host answers within the calls: a
/// request's replies are queued as it is sent, and a dump's next part as
/// its previous one is read, so reading until nothing is left reads the
/// whole answer without waiting.
pub fn host_route_request(request: &[u8], flags: [bool; 3], port: u32) -> Result<Vec<Vec<u8>>, Errno> {
    // SAFETY: socket(2) takes no pointers.
    let fd = unsafe {
        libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, libc::NETLINK_ROUTE)
    };
    host_result(fd as isize)?;
    // SAFETY: `fd` was just made and is owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    for (name, on) in ROUTE_SOCKET_FLAGS.iter().zip(flags) {
        let v = on as i32;
        // SAFETY: the value is an int of ours, its size given.
        let r = unsafe { libc::setsockopt(fd.as_raw_fd(), SOL_NETLINK, *name as i32, (&v as *const i32).cast(), 4) };
        host_result(r as isize)?;
    }
    // SAFETY: sockaddr_nl is plain integers, for which zero is valid.
    let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    kernel.nl_family = libc::AF_NETLINK as u16;
    // SAFETY: `request` and the address are ours and live through the call.
    let r = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            request.as_ptr().cast(),
            request.len(),
            0,
            (&kernel as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as u32,
        )
    };
    host_result(r)?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; ROUTE_DATAGRAM_ROOM];
    loop {
        // SAFETY: `buf` is ours, its length given.
        let r = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
        let len = match host_result(r) {
            Ok(len) => len,
            Err(Errno::EAGAIN) => break,
            Err(e) => return Err(e),
        };
        let mut datagram = buf[..len].to_vec();
        let mut at = 0;
        while datagram.len() - at >= NLMSG_HDRLEN {
            let h = &mut datagram[at..];
            let msg_len = u32::from_ne_bytes(h[..4].try_into().expect("four bytes")) as usize;
            h[12..16].copy_from_slice(&port.to_ne_bytes());
            if msg_len < NLMSG_HDRLEN {
                break;
            }
            at += msg_len.next_multiple_of(4).min(datagram.len() - at);
        }
        out.push(datagram);
    }
    Ok(out)
}
