//! `AF_UNIX` sockets: stream, datagram and seqpacket, as Linux's
//! net/unix/af_unix.c behaves.
//!
//! A socket is a [`Sock`]; the file's [`UnixSocket`] is the handle the
//! application holds, and dropping it (the last descriptor closing) is the
//! socket's release. Messages are [`Skb`]s on the receiver's queue, charged
//! to the sender's write allocation until they are read, so a sender blocks
//! on its own send buffer as on Linux. Data is copied once in (from the
//! sender's memory into the message) and once out.
//!
//! Names live in the sandbox's [`UnixSpace`]: a socket bound to a path is
//! found by the node's identity, an abstract one by its bytes; both only
//! weakly, so a name never keeps a socket alive.
//!
//! Files passed with SCM_RIGHTS are held by the message carrying them. A
//! socket whose only references are such messages, on queues of sockets
//! themselves unreachable, is garbage (a socket sent over itself, or two
//! sockets sent over each other, then closed): [`UnixSpace::collect`] finds
//! and frees them as Linux's unix_gc does, whenever a socket is released
//! while files are in flight.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Instant;

use linux_raw_sys::general as g;
use linux_raw_sys::net as n;
use memory::{GuestSlice, GuestSliceMut};

use super::accounting::{SocketCharge, SocketMemory};
use super::options::{RMEM_DEFAULT, SocketOptions, WMEM_DEFAULT};
use super::{Control, NetCall, Received, RecvMsg, SendMsg, Socket, SocketFile, SocketPair, Ucred};
use crate::errno::Errno;
use crate::fs::{Dentry, FileKey, OpenFile};
use crate::mm::MemoryManager;
use crate::waiter::{BlockError, WaitQueue};

/// `sun_path` starts this far into a `sockaddr_un`.
const SUN_PATH_OFFSET: usize = 2;
/// `sizeof(struct sockaddr_un)`.
const SOCKADDR_UN_LEN: usize = 110;
/// What a message costs its sender beyond its data (an sk_buff and its
/// shared info, as Linux's truesize counts them).
const SKB_OVERHEAD: usize = 576;
/// What the list of a message's passed files costs (struct scm_fp_list,
/// room for SCM_MAX_FD files, charged to the sender's memory cgroup).
const SCM_FP_LIST_SIZE: usize = 2_064;
/// The most data one stream message carries (SKB_MAX_HEAD(0) plus
/// UNIX_SKB_FRAGS_SZ).
const STREAM_SKB_MAX: usize = 3_712 + 32_768;
/// net.unix.max_dgram_qlen: the most datagrams queued on a socket by
/// senders it is not connected to.
pub const MAX_DGRAM_QLEN: usize = 512;
/// Sockets in flight past which a send collects garbage first
/// (UNIX_INFLIGHT_TRIGGER_GC).
const GC_TRIGGER: usize = 16_000;
/// What a missing uid or gid reads as (overflowuid, overflowgid).
const OVERFLOW_ID: u32 = 65_534;

/// sk_shutdown bits.
const RCV_SHUTDOWN: u8 = 1;
const SEND_SHUTDOWN: u8 = 2;
const SHUTDOWN_MASK: u8 = 3;

/// SIOCINQ is FIONREAD; SIOCOUTQ is TIOCOUTQ.
const SIOCINQ: u32 = 0x541b;
const SIOCOUTQ: u32 = 0x5411;

/// Flags of /proc/net/unix.
const SO_ACCEPTCON: u32 = 1 << 16;

/// A socket's place in the connection life (Linux's sk_state for unix
/// sockets: TCP_CLOSE, TCP_LISTEN, TCP_ESTABLISHED).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Unconnected,
    Listening,
    Connected,
}

/// How a name is found.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum NameKey {
    /// A socket node in the file system, by its identity.
    Node(FileKey),
    /// An abstract name: the bytes of `sun_path`, leading NUL included.
    Abstract(Vec<u8>),
}

/// A socket's name.
struct Bound {
    /// The address as getsockname gives it.
    addr: Vec<u8>,
    key: NameKey,
    /// The node a path name made, held as Linux holds the path.
    _node: Option<Arc<Dentry>>,
}

/// An address a socket call names.
enum Target {
    Path(Vec<u8>),
    Abstract(Vec<u8>),
}

/// Files in flight: the SCM_RIGHTS of one message, counted in the space's
/// table while they travel.
struct InFlight {
    files: Vec<Arc<OpenFile>>,
    space: Arc<UnixSpace>,
}

impl InFlight {
    fn new(files: Vec<Arc<OpenFile>>, space: &Arc<UnixSpace>) -> InFlight {
        space.count_in_flight(&files, true);
        InFlight { files, space: space.clone() }
    }

    /// The files, no longer in flight (received).
    fn land(mut self) -> Vec<Arc<OpenFile>> {
        let files = std::mem::take(&mut self.files);
        self.space.count_in_flight(&files, false);
        files
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.space.count_in_flight(&self.files, false);
    }
}

/// One message on a receive queue.
struct Skb {
    data: Vec<u8>,
    /// Bytes of a stream message already read.
    read: usize,
    /// What the message costs its sender, given back when it is freed.
    truesize: usize,
    sender: Weak<Sock>,
    /// The sender's address when it sent.
    from: Option<Vec<u8>>,
    creds: Option<Ucred>,
    rights: Option<InFlight>,
    /// Its truesize, and the list of its rights, charged to the sandbox's
    /// memory while it is queued.
    _charge: SocketCharge,
}

impl Skb {
    fn remaining(&self) -> usize {
        self.data.len() - self.read
    }
}

impl Drop for Sock {
    fn drop(&mut self) {
        self.space.all.lock().unwrap().remove(&self.id);
    }
}

impl Drop for Skb {
    fn drop(&mut self) {
        if let Some(s) = self.sender.upgrade() {
            s.wmem.fetch_sub(self.truesize, Ordering::SeqCst);
            s.queue.notify_all();
        }
    }
}

struct Inner {
    state: State,
    /// Released: the handle is gone.
    dead: bool,
    peer: Option<Arc<Sock>>,
    bound: Option<Bound>,
    recv: VecDeque<Skb>,
    /// A listener's connections not yet accepted.
    backlog: VecDeque<Arc<Sock>>,
    max_backlog: usize,
    shutdown: u8,
    err: Option<Errno>,
    /// SO_PEERCRED: for a listener its own, from listen.
    peercred: Option<Ucred>,
    /// Datagram sockets waiting for room on this socket's queue, to be
    /// woken when it drains (Linux's peer_wait).
    peer_waiters: Vec<Weak<Sock>>,
}

/// An `AF_UNIX` socket.
pub struct Sock {
    id: u64,
    kind: u32,
    space: Arc<UnixSpace>,
    options: SocketOptions,
    inner: Mutex<Inner>,
    queue: WaitQueue,
    /// Truesize of this socket's messages not yet freed.
    wmem: AtomicUsize,
    /// The file's inode number once the socket has one (an embryo of a
    /// connection not yet accepted has none).
    ino: AtomicU64,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn sockaddr_family_only() -> Vec<u8> {
    (n::AF_UNIX as u16).to_ne_bytes().to_vec()
}

/// Parses a `sockaddr_un` (unix_validate_addr): None for the bare family.
fn parse_addr(addr: &[u8]) -> Result<Option<Target>, Errno> {
    if addr.len() < SUN_PATH_OFFSET || addr.len() > SOCKADDR_UN_LEN {
        return Err(Errno::EINVAL);
    }
    if u16::from_ne_bytes([addr[0], addr[1]]) as u32 != n::AF_UNIX {
        return Err(Errno::EINVAL);
    }
    let path = &addr[SUN_PATH_OFFSET..];
    if path.is_empty() {
        return Ok(None);
    }
    if path[0] == 0 {
        return Ok(Some(Target::Abstract(path.to_vec())));
    }
    let end = path.iter().position(|b| *b == 0).unwrap_or(path.len());
    Ok(Some(Target::Path(path[..end].to_vec())))
}

/// The address of a name, as getsockname reports it.
fn addr_of(target: &Target) -> Vec<u8> {
    let mut a = sockaddr_family_only();
    match target {
        // Linux counts the terminating NUL.
        Target::Path(p) => {
            a.extend_from_slice(p);
            a.push(0);
        }
        Target::Abstract(p) => a.extend_from_slice(p),
    }
    a
}

/// Copies `src` into the concatenation of `bufs`, starting `at` bytes in.
fn scatter(bufs: &[GuestSliceMut<'_>], mut at: usize, src: &[u8]) {
    let mut from = 0;
    for b in bufs {
        if from == src.len() {
            break;
        }
        if at >= b.len() {
            at -= b.len();
            continue;
        }
        let k = (b.len() - at).min(src.len() - from);
        b.subslice(at, k).copy_from(&src[from..from + k]);
        from += k;
        at = 0;
    }
}

/// `len` bytes of the concatenation of `src`, starting `from` bytes in.
fn gather(src: &[GuestSlice<'_>], mut from: usize, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    for s in src {
        if out.len() == len {
            break;
        }
        if from >= s.len() {
            from -= s.len();
            continue;
        }
        let k = (s.len() - from).min(len - out.len());
        s.subslice(from, k).append_to(&mut out);
        from = 0;
    }
    out
}

/// A blocking wait's failure as the call returns it: a signal restarts the
/// call unless a timeout was set (then EINTR, as sock_intr_errno), a
/// timeout is EAGAIN.
fn block_errno(e: BlockError, timed: bool) -> Errno {
    match e {
        BlockError::Interrupted if timed => Errno::EINTR,
        BlockError::Interrupted => Errno::ERESTARTSYS,
        BlockError::TimedOut => Errno::EAGAIN,
    }
}

/// Locks two sockets in a fixed order (the lower id first), so two calls
/// locking the same pair never wait on each other.
fn lock_two<'a>(a: &'a Sock, b: &'a Sock) -> (MutexGuard<'a, Inner>, MutexGuard<'a, Inner>) {
    if a.id < b.id {
        let ga = a.inner.lock().unwrap();
        (ga, b.inner.lock().unwrap())
    } else {
        let gb = b.inner.lock().unwrap();
        (a.inner.lock().unwrap(), gb)
    }
}

impl Sock {
    fn new(space: &Arc<UnixSpace>, kind: u32) -> Arc<Sock> {
        let s = Arc::new(Sock {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            kind,
            space: space.clone(),
            options: SocketOptions::new(WMEM_DEFAULT, RMEM_DEFAULT),
            inner: Mutex::new(Inner {
                state: State::Unconnected,
                dead: false,
                peer: None,
                bound: None,
                recv: VecDeque::new(),
                backlog: VecDeque::new(),
                max_backlog: 0,
                shutdown: 0,
                err: None,
                peercred: None,
                peer_waiters: Vec::new(),
            }),
            queue: WaitQueue::default(),
            wmem: AtomicUsize::new(0),
            ino: AtomicU64::new(0),
        });
        space.all.lock().unwrap().insert(s.id, Arc::downgrade(&s));
        s
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap()
    }

    fn connection_oriented(&self) -> bool {
        self.kind != n::SOCK_DGRAM
    }

    fn sndbuf(&self) -> usize {
        self.options.values().sndbuf as usize
    }

    /// unix_writable: room in the send buffer (a quarter of it free).
    fn writable(&self, state: State) -> bool {
        state != State::Listening && self.wmem.load(Ordering::SeqCst) << 2 <= self.sndbuf()
    }

    /// The socket's own address, or the bare family if unnamed.
    fn name(&self) -> Vec<u8> {
        self.lock().bound.as_ref().map_or_else(sockaddr_family_only, |b| b.addr.clone())
    }

    fn bound_addr(&self) -> Option<Vec<u8>> {
        self.lock().bound.as_ref().map(|b| b.addr.clone())
    }

    /// Whether credentials go with what this socket sends or receives.
    fn passcred(&self) -> bool {
        self.options.values().passcred
    }

    /// Binds an unbound socket to a fresh abstract name (unix_autobind).
    fn autobind(self: &Arc<Self>) -> Result<(), Errno> {
        let mut i = self.lock();
        if i.bound.is_some() {
            return Ok(());
        }
        let mut names = self.space.names.lock().unwrap();
        for _ in 0..0x100000 {
            let num = self.space.autobind_next.fetch_add(1, Ordering::Relaxed) & 0xfffff;
            let mut path = vec![0u8];
            path.extend_from_slice(format!("{num:05x}").as_bytes());
            let key = NameKey::Abstract(path.clone());
            if names.get(&key).is_some_and(|w| w.strong_count() > 0) {
                continue;
            }
            names.insert(key.clone(), Arc::downgrade(self));
            i.bound = Some(Bound { addr: addr_of(&Target::Abstract(path)), key, _node: None });
            return Ok(());
        }
        Err(Errno::ENOSPC)
    }

    /// The socket a name leads to, of this socket's type (unix_find_other).
    fn find_other(&self, call: &NetCall, target: &Target) -> Result<Arc<Sock>, Errno> {
        let key = match target {
            Target::Path(p) => NameKey::Node(call.names.find_socket_node(p)?.key()),
            Target::Abstract(p) => NameKey::Abstract(p.clone()),
        };
        let other = self.space.names.lock().unwrap().get(&key).and_then(Weak::upgrade).ok_or(Errno::ECONNREFUSED)?;
        if other.kind != self.kind {
            return Err(Errno::EPROTOTYPE);
        }
        Ok(other)
    }

    /// The socket's release: its last descriptor closed (or, for a
    /// connection never accepted, its listener's).
    fn release(self: &Arc<Self>, embryo: bool) {
        let (peer, recv, backlog, key) = {
            let mut i = self.lock();
            if i.dead {
                return;
            }
            i.dead = true;
            i.shutdown = SHUTDOWN_MASK;
            i.state = State::Unconnected;
            (
                i.peer.take(),
                std::mem::take(&mut i.recv),
                std::mem::take(&mut i.backlog),
                i.bound.as_ref().map(|b| b.key.clone()),
            )
        };
        self.queue.notify_all();
        if let Some(key) = key {
            let mut names = self.space.names.lock().unwrap();
            if names.get(&key).is_some_and(|w| w.as_ptr() == Arc::as_ptr(self)) {
                names.remove(&key);
            }
        }
        if let Some(peer) = &peer {
            if self.connection_oriented() {
                let mut p = peer.lock();
                p.shutdown = SHUTDOWN_MASK;
                if !recv.is_empty() || embryo {
                    p.err = Some(Errno::ECONNRESET);
                }
            }
            peer.queue.notify_all();
        }
        drop(peer);
        for e in backlog {
            e.release(true);
        }
        drop(recv);
        self.wake_peer_waiters();
        self.space.collect_garbage();
    }

    /// Wakes datagram sockets that waited for room on this one's queue.
    fn wake_peer_waiters(&self) {
        let waiters = std::mem::take(&mut self.lock().peer_waiters);
        for w in waiters.iter().filter_map(Weak::upgrade) {
            w.queue.notify_all();
        }
    }

    /// unix_recvq_full for a datagram socket.
    fn recvq_full(i: &Inner) -> bool {
        i.recv.len() > MAX_DGRAM_QLEN
    }

    /// Waits until the send buffer has room (sock_alloc_send_pskb's wait);
    /// EPIPE once sending is shut down.
    fn wait_sndbuf(&self, call: &NetCall, nonblock: bool, deadline: Option<Instant>) -> Result<(), Errno> {
        let ready = || {
            let i = self.lock();
            if i.err.is_some() || i.shutdown & SEND_SHUTDOWN != 0 {
                return Some(());
            }
            (self.wmem.load(Ordering::SeqCst) < self.sndbuf()).then_some(())
        };
        if ready().is_none() {
            if nonblock {
                return Err(Errno::EAGAIN);
            }
            call.ctx.block_on(&[&self.queue], deadline, ready).map_err(|e| block_errno(e, deadline.is_some()))?;
        }
        let mut i = self.lock();
        if let Some(e) = i.err.take() {
            return Err(e);
        }
        if i.shutdown & SEND_SHUTDOWN != 0 {
            return Err(Errno::EPIPE);
        }
        Ok(())
    }

    /// A new message of `len` bytes of `data` from `from`, charged to this
    /// socket's send buffer and to the sandbox's memory; ENOBUFS if the
    /// memory has no room for it (as sock_alloc_send_pskb when the
    /// allocation fails).
    fn make_skb(
        self: &Arc<Self>,
        data: &[GuestSlice<'_>],
        from: usize,
        len: usize,
        creds: Option<Ucred>,
        rights: Option<InFlight>,
    ) -> Result<Skb, Errno> {
        let truesize = len + SKB_OVERHEAD;
        let rights_size = if rights.is_some() { SCM_FP_LIST_SIZE } else { 0 };
        let charge = self.space.memory.charge(truesize + rights_size)?;
        self.wmem.fetch_add(truesize, Ordering::SeqCst);
        Ok(Skb {
            data: gather(data, from, len),
            read: 0,
            truesize,
            sender: Arc::downgrade(self),
            from: self.bound_addr(),
            creds,
            rights,
            _charge: charge,
        })
    }

    /// The credentials a message to `other` carries (maybe_add_creds):
    /// those given, else the sender's if either side asked for them or the
    /// receiver is a connection not yet accepted.
    fn creds_for(&self, call: &NetCall, given: Option<Ucred>, other: &Sock) -> Option<Ucred> {
        given.or_else(|| {
            (self.passcred() || other.passcred() || other.ino.load(Ordering::Relaxed) == 0).then_some(call.ucred)
        })
    }

    fn rights_of(self: &Arc<Self>, control: &mut Control) -> Option<InFlight> {
        let files = std::mem::take(&mut control.rights);
        if !files.is_empty() && self.space.in_flight.lock().unwrap().len() > GC_TRIGGER {
            // Many sockets in flight: collect before adding more, as
            // Linux's wait_for_unix_gc.
            self.space.collect_garbage();
        }
        (!files.is_empty()).then(|| InFlight::new(files, &self.space))
    }

    fn stream_send(self: &Arc<Self>, call: &NetCall, mut msg: SendMsg) -> Result<usize, Errno> {
        if msg.flags & n::MSG_OOB != 0 {
            return Err(Errno::EOPNOTSUPP);
        }
        let peer = {
            let i = self.lock();
            if msg.to.is_some_and(|t| !t.is_empty()) {
                return Err(if i.state == State::Connected { Errno::EISCONN } else { Errno::EOPNOTSUPP });
            }
            let peer = i.peer.clone().ok_or(Errno::ENOTCONN)?;
            if i.shutdown & SEND_SHUTDOWN != 0 {
                return Err(Errno::EPIPE);
            }
            peer
        };
        let nonblock = call.nonblocking() || msg.flags & n::MSG_DONTWAIT != 0;
        let deadline = self.options.send_deadline();
        let total = msg.len();
        let mut rights = self.rights_of(&mut msg.control);
        let given = msg.control.creds;
        let mut sent = 0;
        while sent < total {
            let size = (total - sent).min((self.sndbuf() >> 1).saturating_sub(64).max(1)).min(STREAM_SKB_MAX);
            if let Err(e) = self.wait_sndbuf(call, nonblock, deadline) {
                return if sent > 0 { Ok(sent) } else { Err(e) };
            }
            let creds = self.creds_for(call, given, &peer);
            let skb = match self.make_skb(msg.data, sent, size, creds, rights.take()) {
                Ok(skb) => skb,
                Err(e) => return if sent > 0 { Ok(sent) } else { Err(e) },
            };
            let mut p = peer.lock();
            if p.dead || p.shutdown & RCV_SHUTDOWN != 0 {
                drop(p);
                drop(skb);
                return if sent > 0 { Ok(sent) } else { Err(Errno::EPIPE) };
            }
            p.recv.push_back(skb);
            drop(p);
            peer.queue.notify_all();
            sent += size;
        }
        Ok(sent)
    }

    fn dgram_send(self: &Arc<Self>, call: &NetCall, mut msg: SendMsg) -> Result<usize, Errno> {
        if msg.flags & n::MSG_OOB != 0 {
            return Err(Errno::EOPNOTSUPP);
        }
        let seqpacket = self.kind == n::SOCK_SEQPACKET;
        if seqpacket {
            let mut i = self.lock();
            if let Some(e) = i.err.take() {
                return Err(e);
            }
            if i.state != State::Connected {
                return Err(Errno::ENOTCONN);
            }
        }
        let to = if seqpacket { None } else { msg.to.filter(|t| !t.is_empty()) };
        let (target, mut other) = match to {
            Some(t) => match parse_addr(t)? {
                Some(target) => (Some(target), None),
                None => return Err(Errno::EINVAL),
            },
            None => (None, Some(self.lock().peer.clone().ok_or(Errno::ENOTCONN)?)),
        };
        if self.passcred() {
            self.autobind()?;
        }
        let len = msg.len();
        if len > self.sndbuf().saturating_sub(32) {
            return Err(Errno::EMSGSIZE);
        }
        let nonblock = call.nonblocking() || msg.flags & n::MSG_DONTWAIT != 0;
        let deadline = self.options.send_deadline();
        if self.wmem.load(Ordering::SeqCst) >= self.sndbuf() {
            if nonblock {
                return Err(Errno::EAGAIN);
            }
            let ready = || (self.wmem.load(Ordering::SeqCst) < self.sndbuf()).then_some(());
            call.ctx.block_on(&[&self.queue], deadline, ready).map_err(|e| block_errno(e, deadline.is_some()))?;
        }
        let rights = self.rights_of(&mut msg.control);
        let given = msg.control.creds;
        let mut skb = Some((rights, given));
        loop {
            let o = match &other {
                Some(o) => o.clone(),
                None => {
                    let Some(target) = &target else { return Err(Errno::ECONNRESET) };
                    let o = self.find_other(call, target)?;
                    other = Some(o.clone());
                    o
                }
            };
            let full = {
                let is_self = Arc::ptr_eq(&o, self);
                let oi = o.lock();
                let o_peer_is_me = oi.peer.as_ref().is_some_and(|p| Arc::ptr_eq(p, self));
                if oi.peer.is_some() && !o_peer_is_me {
                    return Err(Errno::EPERM);
                }
                if oi.dead {
                    drop(oi);
                    if seqpacket {
                        return Err(Errno::EPIPE);
                    }
                    let mut i = self.lock();
                    if i.peer.as_ref().is_some_and(|p| Arc::ptr_eq(p, &o)) {
                        i.peer = None;
                        i.state = State::Unconnected;
                        return Err(Errno::ECONNREFUSED);
                    }
                    drop(i);
                    other = None;
                    continue;
                }
                if oi.shutdown & RCV_SHUTDOWN != 0 {
                    return Err(Errno::EPIPE);
                }
                let full = !is_self && !o_peer_is_me && Sock::recvq_full(&oi);
                if !full {
                    let (rights, given) = skb.take().expect("one message");
                    drop(oi);
                    let creds = self.creds_for(call, given, &o);
                    let m = self.make_skb(msg.data, 0, len, creds, rights)?;
                    let mut oi = o.lock();
                    if oi.dead {
                        drop(oi);
                        drop(m);
                        return Err(if seqpacket { Errno::EPIPE } else { Errno::ECONNREFUSED });
                    }
                    oi.recv.push_back(m);
                    drop(oi);
                    o.queue.notify_all();
                    return Ok(len);
                }
                full
            };
            debug_assert!(full);
            if nonblock {
                return Err(Errno::EAGAIN);
            }
            let ready = || {
                let oi = o.lock();
                (oi.dead || !Sock::recvq_full(&oi)).then_some(())
            };
            call.ctx.block_on(&[&o.queue], deadline, ready).map_err(|e| block_errno(e, deadline.is_some()))?;
        }
    }

    /// Waits for something to read, an error or the end; the caller checks
    /// which.
    fn wait_readable(
        &self,
        call: &NetCall,
        deadline: Option<Instant>,
        mut more: impl FnMut(&Inner) -> bool,
    ) -> Result<(), Errno> {
        let ready = || {
            let i = self.lock();
            (more(&i) || i.err.is_some() || i.shutdown & RCV_SHUTDOWN != 0 || i.dead).then_some(())
        };
        call.ctx.block_on(&[&self.queue], deadline, ready).map_err(|e| block_errno(e, deadline.is_some()))
    }

    fn stream_recv(&self, call: &NetCall, msg: RecvMsg) -> Result<Received, Errno> {
        let flags = msg.flags;
        if flags & n::MSG_OOB != 0 {
            return Err(Errno::EINVAL);
        }
        if self.lock().state != State::Connected {
            return Err(Errno::EINVAL);
        }
        let peek = flags & n::MSG_PEEK != 0;
        let nonblock = call.nonblocking() || flags & n::MSG_DONTWAIT != 0;
        let deadline = self.options.recv_deadline();
        let values = self.options.values();
        let size = msg.len();
        // sock_rcvlowat: never below one byte, even for an empty read.
        let target =
            if flags & n::MSG_WAITALL != 0 { size } else { (values.rcvlowat.max(1) as usize).min(size) }.max(1);
        let mut out = Received::default();
        let mut landed: Vec<InFlight> = Vec::new();
        let mut freed: Vec<Skb> = Vec::new();
        // Credentials of the first message read: later ones from another
        // writer are not glued on.
        let mut creds_of_first: Option<Option<Ucred>> = None;
        let mut copied = 0;
        // Where a peek continues: the message and the bytes in it.
        let (mut at, mut skip) = (0usize, if peek { values.peek_off.max(0) as usize } else { 0 });
        loop {
            let mut i = self.lock();
            while at < i.recv.len() && skip >= i.recv[at].remaining() {
                skip -= i.recv[at].remaining();
                at += 1;
            }
            if at >= i.recv.len() {
                if copied >= target {
                    break;
                }
                if let Some(e) = i.err.take() {
                    if copied == 0 {
                        return Err(e);
                    }
                    break;
                }
                if i.shutdown & RCV_SHUTDOWN != 0 {
                    break;
                }
                if nonblock {
                    if copied > 0 {
                        break;
                    }
                    return Err(Errno::EAGAIN);
                }
                drop(i);
                drop(std::mem::take(&mut freed));
                let (wait_at, wait_skip) = (at, skip);
                let r = self.wait_readable(call, deadline, |i| {
                    i.recv.iter().skip(wait_at).map(Skb::remaining).sum::<usize>() > wait_skip
                });
                if let Err(e) = r {
                    if copied > 0 {
                        break;
                    }
                    return Err(e);
                }
                continue;
            }
            let skb = &mut i.recv[at];
            match creds_of_first {
                Some(c) if c != skb.creds => break,
                Some(_) => {}
                None if values.passcred => {
                    creds_of_first = Some(skb.creds);
                    out.control.creds = Some(skb.creds.unwrap_or(Ucred { pid: 0, uid: OVERFLOW_ID, gid: OVERFLOW_ID }));
                }
                None => {}
            }
            if out.from.is_none() {
                out.from = skb.from.clone();
            }
            let chunk = (skb.remaining() - skip).min(size - copied);
            let start = skb.read + skip;
            scatter(msg.bufs, copied, &skb.data[start..start + chunk]);
            copied += chunk;
            if !peek {
                skb.read += chunk;
                let had_rights = skb.rights.is_some();
                if let Some(r) = skb.rights.take() {
                    landed.push(r);
                }
                let done = skb.remaining() == 0;
                self.options.update(|v| {
                    if v.peek_off >= 0 {
                        v.peek_off = (v.peek_off - chunk as i32).max(0);
                    }
                });
                if !done {
                    break;
                }
                freed.push(i.recv.pop_front().expect("the message read"));
                if had_rights {
                    break;
                }
            } else {
                let has_rights = skb.rights.is_some();
                if let Some(r) = &skb.rights {
                    out.control.rights.extend(r.files.iter().cloned());
                }
                self.options.update(|v| {
                    if v.peek_off >= 0 {
                        v.peek_off += chunk as i32;
                    }
                });
                if has_rights {
                    break;
                }
                skip = 0;
                at += 1;
                if at >= i.recv.len() {
                    break;
                }
            }
            if copied == size {
                break;
            }
        }
        drop(freed);
        for r in landed {
            out.control.rights.extend(r.land());
        }
        out.ret = copied;
        Ok(out)
    }

    fn dgram_recv(&self, call: &NetCall, msg: RecvMsg) -> Result<Received, Errno> {
        let flags = msg.flags;
        if flags & n::MSG_OOB != 0 {
            return Err(Errno::EOPNOTSUPP);
        }
        if self.kind == n::SOCK_SEQPACKET && self.lock().state != State::Connected {
            return Err(Errno::ENOTCONN);
        }
        let peek = flags & n::MSG_PEEK != 0;
        let nonblock = call.nonblocking() || flags & n::MSG_DONTWAIT != 0;
        let deadline = self.options.recv_deadline();
        let values = self.options.values();
        let mut out = Received::default();
        let size = msg.len();
        let (skb, skip) = loop {
            let mut i = self.lock();
            let mut skip = if peek { values.peek_off.max(0) as usize } else { 0 };
            let mut at = 0;
            while at < i.recv.len() {
                let len = i.recv[at].data.len();
                if skip >= len && (len > 0 || skip > 0) {
                    skip -= len;
                    at += 1;
                } else {
                    break;
                }
            }
            if at < i.recv.len() {
                if peek {
                    let skb = &i.recv[at];
                    let avail = skb.data.len() - skip;
                    let k = avail.min(size);
                    scatter(msg.bufs, 0, &skb.data[skip..skip + k]);
                    out.ret = if flags & n::MSG_TRUNC != 0 { avail } else { k };
                    if avail > size {
                        out.flags |= n::MSG_TRUNC;
                    }
                    out.from = skb.from.clone();
                    if values.passcred {
                        out.control.creds =
                            Some(skb.creds.unwrap_or(Ucred { pid: 0, uid: OVERFLOW_ID, gid: OVERFLOW_ID }));
                    }
                    if let Some(r) = &skb.rights {
                        out.control.rights.extend(r.files.iter().cloned());
                    }
                    self.options.update(|v| {
                        if v.peek_off >= 0 {
                            v.peek_off += k as i32;
                        }
                    });
                    return Ok(out);
                }
                let skb = i.recv.remove(at).expect("the message found");
                break (skb, skip);
            }
            if let Some(e) = i.err.take() {
                return Err(e);
            }
            if i.shutdown & RCV_SHUTDOWN != 0 {
                return Ok(out);
            }
            if nonblock {
                return Err(Errno::EAGAIN);
            }
            drop(i);
            self.wait_readable(call, deadline, |i| !i.recv.is_empty())?;
        };
        // Room on the queue: senders waiting for it go on.
        self.queue.notify_all();
        self.wake_peer_waiters();
        let mut skb = skb;
        let avail = skb.data.len() - skip;
        let k = avail.min(size);
        scatter(msg.bufs, 0, &skb.data[skip..skip + k]);
        out.ret = if flags & n::MSG_TRUNC != 0 { avail } else { k };
        if avail > size {
            out.flags |= n::MSG_TRUNC;
        }
        out.from = skb.from.take();
        if values.passcred {
            out.control.creds = Some(skb.creds.unwrap_or(Ucred { pid: 0, uid: OVERFLOW_ID, gid: OVERFLOW_ID }));
        }
        let len = skb.data.len() as i32;
        self.options.update(|v| {
            if v.peek_off >= 0 {
                v.peek_off = (v.peek_off - len).max(0);
            }
        });
        if let Some(r) = skb.rights.take() {
            out.control.rights = r.land();
        }
        drop(skb);
        Ok(out)
    }

    fn stream_connect(self: &Arc<Self>, call: &NetCall, addr: &[u8]) -> Result<(), Errno> {
        if addr.len() <= SUN_PATH_OFFSET {
            return Err(Errno::EINVAL);
        }
        let target = parse_addr(addr)?.ok_or(Errno::EINVAL)?;
        if self.passcred() {
            self.autobind()?;
        }
        let nonblock = call.nonblocking();
        let deadline = self.options.send_deadline();
        loop {
            let listener = self.find_other(call, &target)?;
            if Arc::ptr_eq(&listener, self) {
                // Only a listener finds itself: it cannot connect.
                return Err(if self.lock().state == State::Listening { Errno::EINVAL } else { Errno::ECONNREFUSED });
            }
            let (mut li, mut si) = lock_two(&listener, self);
            if li.dead {
                continue;
            }
            if li.state != State::Listening || li.shutdown & RCV_SHUTDOWN != 0 {
                return Err(Errno::ECONNREFUSED);
            }
            if li.backlog.len() > li.max_backlog {
                drop(li);
                drop(si);
                if nonblock {
                    return Err(Errno::EAGAIN);
                }
                let ready = || {
                    let li = listener.lock();
                    (li.dead || li.state != State::Listening || li.backlog.len() <= li.max_backlog).then_some(())
                };
                call.ctx
                    .block_on(&[&listener.queue], deadline, ready)
                    .map_err(|e| block_errno(e, deadline.is_some()))?;
                continue;
            }
            match si.state {
                State::Unconnected => {}
                State::Connected => return Err(Errno::EISCONN),
                State::Listening => return Err(Errno::EINVAL),
            }
            let embryo = Sock::new(&self.space, self.kind);
            {
                let mut e = embryo.lock();
                e.state = State::Connected;
                e.peer = Some(self.clone());
                e.peercred = Some(call.ucred);
                e.bound = li.bound.as_ref().map(|b| Bound { addr: b.addr.clone(), key: b.key.clone(), _node: None });
            }
            // The accepted socket takes SO_PASSCRED from its listener.
            let passcred = listener.passcred();
            embryo.options.update(|v| v.passcred = passcred);
            si.peer = Some(embryo.clone());
            si.state = State::Connected;
            si.peercred = li.peercred;
            li.backlog.push_back(embryo);
            drop(li);
            drop(si);
            listener.queue.notify_all();
            self.queue.notify_all();
            return Ok(());
        }
    }

    fn dgram_connect(self: &Arc<Self>, call: &NetCall, addr: &[u8]) -> Result<(), Errno> {
        if addr.len() < SUN_PATH_OFFSET {
            return Err(Errno::EINVAL);
        }
        let family = u16::from_ne_bytes([addr[0], addr[1]]) as u32;
        let new_peer = if family == n::AF_UNSPEC {
            None
        } else {
            if addr.len() == SUN_PATH_OFFSET {
                return Err(Errno::EINVAL);
            }
            let target = parse_addr(addr)?.ok_or(Errno::EINVAL)?;
            if self.passcred() {
                self.autobind()?;
            }
            Some(self.find_other(call, &target)?)
        };
        let old = {
            let mut i = self.lock();
            if let Some(o) = &new_peer
                && !Arc::ptr_eq(o, self)
            {
                drop(i);
                let (oi, si) = lock_two(o, self);
                if oi.peer.as_ref().is_some_and(|p| !Arc::ptr_eq(p, self)) {
                    return Err(Errno::EPERM);
                }
                if oi.dead {
                    return Err(Errno::ECONNREFUSED);
                }
                drop(oi);
                i = si;
            }
            let old = std::mem::replace(&mut i.peer, new_peer.clone());
            i.state = if new_peer.is_some() { State::Connected } else { State::Unconnected };
            old
        };
        // Leaving a peer for another drops what was queued and tells the
        // old peer, if it was connected back (unix_dgram_disconnected).
        if let Some(old) = old
            && !new_peer.as_ref().is_some_and(|p| Arc::ptr_eq(p, &old))
        {
            let dropped = std::mem::take(&mut self.lock().recv);
            if !dropped.is_empty() {
                self.queue.notify_all();
                let mut oi = old.lock();
                if !oi.dead && oi.peer.as_ref().is_some_and(|p| Arc::ptr_eq(p, self)) {
                    oi.err = Some(Errno::ECONNRESET);
                    drop(oi);
                    old.queue.notify_all();
                }
            }
            drop(dropped);
        }
        Ok(())
    }
}

/// The sandbox's unix sockets: their names, the files in flight between
/// them, and the list /proc/net/unix shows.
pub struct UnixSpace {
    names: Mutex<HashMap<NameKey, Weak<Sock>>>,
    all: Mutex<std::collections::BTreeMap<u64, Weak<Sock>>>,
    /// Unix sockets whose files are in flight, by socket id.
    in_flight: Mutex<HashMap<u64, Carried>>,
    autobind_next: AtomicU32,
    collecting: AtomicBool,
    /// What queued messages are charged to.
    memory: Arc<SocketMemory>,
}

/// A unix socket in flight: the socket, its file, and how many messages
/// carry it.
struct Carried {
    sock: Weak<Sock>,
    file: Weak<OpenFile>,
    count: usize,
}

/// The unix socket behind an open file, if it is one.
fn unix_sock_of(f: &OpenFile) -> Option<&Arc<Sock>> {
    f.ops.downcast_ref::<SocketFile>()?.socket.downcast_ref::<UnixSocket>().map(|u| &u.sock)
}

impl UnixSpace {
    pub fn new(memory: Arc<SocketMemory>) -> Arc<UnixSpace> {
        Arc::new(UnixSpace {
            names: Mutex::new(HashMap::new()),
            all: Mutex::new(Default::default()),
            in_flight: Mutex::new(HashMap::new()),
            autobind_next: AtomicU32::new(0),
            collecting: AtomicBool::new(false),
            memory,
        })
    }

    /// Counts the unix sockets among `files` as in flight (or landed).
    fn count_in_flight(&self, files: &[Arc<OpenFile>], add: bool) {
        let mut t = None;
        for f in files {
            let Some(s) = unix_sock_of(f) else { continue };
            let t = t.get_or_insert_with(|| self.in_flight.lock().unwrap());
            if add {
                let e = t.entry(s.id).or_insert_with(|| Carried {
                    sock: Arc::downgrade(s),
                    file: Arc::downgrade(f),
                    count: 0,
                });
                e.count += 1;
            } else if let Some(e) = t.get_mut(&s.id) {
                e.count -= 1;
                if e.count == 0 {
                    t.remove(&s.id);
                }
            }
        }
    }

    /// Frees sockets only messages on unreachable sockets hold (unix_gc),
    /// until none is left.
    fn collect_garbage(&self) {
        if self.in_flight.lock().unwrap().is_empty() || self.collecting.swap(true, Ordering::SeqCst) {
            return;
        }
        loop {
            let garbage = self.find_garbage();
            if garbage.is_empty() {
                break;
            }
            // Freed with no lock held: the files dropping release sockets.
            drop(garbage);
        }
        self.collecting.store(false, Ordering::SeqCst);
    }

    /// The messages of garbage sockets, taken off their queues.
    fn find_garbage(&self) -> Vec<Skb> {
        let table = self.in_flight.lock().unwrap();
        // Candidates: every reference to the socket's file is a message's.
        let mut refs: HashMap<u64, (Arc<Sock>, usize)> = HashMap::new();
        for (id, c) in table.iter() {
            let (Some(sock), Some(file)) = (c.sock.upgrade(), c.file.upgrade()) else { continue };
            // The upgrade above is one more.
            if Arc::strong_count(&file) - 1 == c.count {
                refs.insert(*id, (sock, c.count));
            }
        }
        drop(table);
        if refs.is_empty() {
            return Vec::new();
        }
        // What each candidate's queues (its embryos' too) carry.
        let carried = |s: &Sock| -> Vec<u64> {
            let i = s.lock();
            let mut ids = Vec::new();
            let mut scan = |q: &VecDeque<Skb>| {
                for skb in q {
                    for f in skb.rights.iter().flat_map(|r| r.files.iter()) {
                        if let Some(u) = unix_sock_of(f) {
                            ids.push(u.id);
                        }
                    }
                }
            };
            scan(&i.recv);
            for e in &i.backlog {
                scan(&e.lock().recv);
            }
            ids
        };
        let socks: Vec<(u64, Arc<Sock>)> = refs.iter().map(|(id, (s, _))| (*id, s.clone())).collect();
        let mut edges: HashMap<u64, Vec<u64>> = HashMap::new();
        for (id, s) in &socks {
            let out = carried(s);
            for to in &out {
                if let Some(r) = refs.get_mut(to) {
                    r.1 -= 1;
                }
            }
            edges.insert(*id, out);
        }
        // Candidates still referenced from outside are alive, and so is
        // everything they carry.
        let mut alive: HashSet<u64> = refs.iter().filter(|(_, r)| r.1 > 0).map(|(id, _)| *id).collect();
        let mut work: Vec<u64> = alive.iter().copied().collect();
        while let Some(id) = work.pop() {
            for to in edges.get(&id).into_iter().flatten() {
                if refs.contains_key(to) && alive.insert(*to) {
                    work.push(*to);
                }
            }
        }
        let mut garbage = Vec::new();
        for (id, s) in socks {
            if alive.contains(&id) {
                continue;
            }
            let mut i = s.lock();
            garbage.extend(i.recv.drain(..));
            let embryos: Vec<Arc<Sock>> = i.backlog.iter().cloned().collect();
            drop(i);
            for e in embryos {
                garbage.extend(e.lock().recv.drain(..));
            }
        }
        garbage
    }

    /// /proc/net/unix.
    pub fn proc_net_unix(&self) -> String {
        let mut out = String::from("Num       RefCount Protocol Flags    Type St Inode Path\n");
        let socks: Vec<Arc<Sock>> = {
            let mut all = self.all.lock().unwrap();
            all.retain(|_, w| w.strong_count() > 0);
            all.values().filter_map(Weak::upgrade).collect()
        };
        for s in socks {
            let i = s.lock();
            if i.dead {
                continue;
            }
            let ino = s.ino.load(Ordering::Relaxed);
            let flags = if i.state == State::Listening { SO_ACCEPTCON } else { 0 };
            // SS_UNCONNECTED, SS_CONNECTING, SS_CONNECTED, SS_DISCONNECTING.
            let st = match (ino != 0, i.state == State::Connected) {
                (true, true) => 3,
                (true, false) => 1,
                (false, true) => 2,
                (false, false) => 4,
            };
            out.push_str(&format!(
                "0000000000000000: {:08X} {:08X} {:08X} {:04X} {:02X} {:5}",
                2, 0, flags, s.kind, st, ino
            ));
            if let Some(b) = &i.bound {
                let path = &b.addr[SUN_PATH_OFFSET..];
                out.push(' ');
                match b.key {
                    NameKey::Abstract(_) => {
                        out.push('@');
                        let rest: Vec<u8> = path[1..].iter().map(|c| if *c == 0 { b'@' } else { *c }).collect();
                        out.push_str(&String::from_utf8_lossy(&rest));
                    }
                    NameKey::Node(_) => out.push_str(&String::from_utf8_lossy(&path[..path.len() - 1])),
                }
            }
            out.push('\n');
        }
        out
    }
}

/// An `AF_UNIX` socket as its file holds it: dropping it releases the
/// socket.
pub struct UnixSocket {
    sock: Arc<Sock>,
}

impl UnixSocket {
    fn new(sock: Arc<Sock>) -> Arc<UnixSocket> {
        sock.ino.store(super::next_socket_ino(), Ordering::Relaxed);
        Arc::new(UnixSocket { sock })
    }

    /// socket(2).
    pub fn create(space: &Arc<UnixSpace>, kind: u32, protocol: u32) -> Result<Arc<dyn Socket>, Errno> {
        if protocol != 0 && protocol != n::AF_UNIX {
            return Err(Errno::EPROTONOSUPPORT);
        }
        match kind {
            n::SOCK_STREAM | n::SOCK_DGRAM | n::SOCK_SEQPACKET => Ok(UnixSocket::new(Sock::new(space, kind))),
            // SOCK_RAW is taken as SOCK_DGRAM, as Linux does.
            n::SOCK_RAW => Ok(UnixSocket::new(Sock::new(space, n::SOCK_DGRAM))),
            _ => Err(Errno::ESOCKTNOSUPPORT),
        }
    }

    /// socketpair(2).
    pub fn create_pair(space: &Arc<UnixSpace>, call: &NetCall, kind: u32, protocol: u32) -> Result<SocketPair, Errno> {
        let a = Self::create(space, kind, protocol)?;
        let b = Self::create(space, kind, protocol)?;
        let sa = &a.downcast_ref::<UnixSocket>().expect("a unix socket").sock;
        let sb = &b.downcast_ref::<UnixSocket>().expect("a unix socket").sock;
        for (x, y) in [(sa, sb), (sb, sa)] {
            let mut i = x.lock();
            i.peer = Some(y.clone());
            i.state = State::Connected;
            i.peercred = Some(call.ucred);
        }
        Ok((a, b))
    }
}

impl Drop for UnixSocket {
    fn drop(&mut self) {
        self.sock.release(false);
    }
}

impl Socket for UnixSocket {
    fn family(&self) -> u32 {
        n::AF_UNIX
    }

    fn kind(&self) -> u32 {
        self.sock.kind
    }

    fn protocol(&self) -> u32 {
        0
    }

    fn ino(&self) -> Option<u64> {
        Some(self.sock.ino.load(Ordering::Relaxed))
    }

    fn bind(&self, call: &NetCall, addr: &[u8]) -> Result<(), Errno> {
        let s = &self.sock;
        let target = match parse_addr(addr)? {
            // A bare family autobinds; a bound socket keeps its name.
            None => return s.autobind(),
            Some(t) => t,
        };
        match &target {
            Target::Path(p) => {
                if s.lock().bound.is_some() {
                    // Linux makes the node first: a name in use is
                    // EADDRINUSE even then.
                    return match call.names.find_socket_node(p) {
                        Err(Errno::ENOENT) => Err(Errno::EINVAL),
                        _ => Err(Errno::EADDRINUSE),
                    };
                }
                let node = call.names.make_socket_node(p)?;
                let key = NameKey::Node(node.key());
                let mut i = s.lock();
                if i.bound.is_some() {
                    return Err(Errno::EINVAL);
                }
                s.space.names.lock().unwrap().insert(key.clone(), Arc::downgrade(s));
                i.bound = Some(Bound { addr: addr_of(&target), key, _node: Some(node) });
                Ok(())
            }
            Target::Abstract(p) => {
                let mut i = s.lock();
                if i.bound.is_some() {
                    return Err(Errno::EINVAL);
                }
                let key = NameKey::Abstract(p.clone());
                let mut names = s.space.names.lock().unwrap();
                if names.get(&key).is_some_and(|w| w.strong_count() > 0) {
                    return Err(Errno::EADDRINUSE);
                }
                names.insert(key.clone(), Arc::downgrade(s));
                i.bound = Some(Bound { addr: addr_of(&target), key, _node: None });
                Ok(())
            }
        }
    }

    fn listen(&self, call: &NetCall, backlog: i32) -> Result<(), Errno> {
        let s = &self.sock;
        if s.kind == n::SOCK_DGRAM {
            return Err(Errno::EOPNOTSUPP);
        }
        let mut i = s.lock();
        if i.bound.is_none() {
            return Err(Errno::EINVAL);
        }
        if i.state == State::Connected {
            return Err(Errno::EINVAL);
        }
        let backlog = backlog.max(0) as usize;
        let grew = backlog > i.max_backlog;
        i.max_backlog = backlog;
        i.state = State::Listening;
        i.peercred = Some(call.ucred);
        drop(i);
        if grew {
            s.queue.notify_all();
        }
        Ok(())
    }

    fn accept(&self, call: &NetCall) -> Result<(Arc<dyn Socket>, Vec<u8>), Errno> {
        let s = &self.sock;
        if s.kind == n::SOCK_DGRAM {
            return Err(Errno::EOPNOTSUPP);
        }
        let nonblock = call.nonblocking();
        let deadline = s.options.recv_deadline();
        let embryo = loop {
            let mut i = s.lock();
            if i.state != State::Listening {
                return Err(Errno::EINVAL);
            }
            if let Some(e) = i.backlog.pop_front() {
                break e;
            }
            drop(i);
            if nonblock {
                return Err(Errno::EAGAIN);
            }
            let ready = || {
                let i = s.lock();
                (i.state != State::Listening || !i.backlog.is_empty()).then_some(())
            };
            call.ctx.block_on(&[&s.queue], deadline, ready).map_err(|e| block_errno(e, deadline.is_some()))?;
        };
        // Room in the backlog: a waiting connect goes on.
        s.queue.notify_all();
        let peer = embryo.lock().peer.clone();
        let addr = peer.map_or_else(sockaddr_family_only, |p| p.name());
        Ok((UnixSocket::new(embryo), addr))
    }

    fn connect(&self, call: &NetCall, addr: &[u8]) -> Result<(), Errno> {
        if self.sock.kind == n::SOCK_DGRAM {
            self.sock.dgram_connect(call, addr)
        } else {
            self.sock.stream_connect(call, addr)
        }
    }

    fn shutdown(&self, _call: &NetCall, how: u32) -> Result<(), Errno> {
        let s = &self.sock;
        // SHUT_RD, SHUT_WR, SHUT_RDWR as the sk_shutdown bits.
        let mode = ((how + 1) & 3) as u8;
        let peer = {
            let mut i = s.lock();
            i.shutdown |= mode;
            i.peer.clone()
        };
        s.queue.notify_all();
        if let Some(p) = peer
            && s.connection_oriented()
        {
            let mut peer_mode = 0;
            if mode & RCV_SHUTDOWN != 0 {
                peer_mode |= SEND_SHUTDOWN;
            }
            if mode & SEND_SHUTDOWN != 0 {
                peer_mode |= RCV_SHUTDOWN;
            }
            p.lock().shutdown |= peer_mode;
            p.queue.notify_all();
        }
        Ok(())
    }

    fn local_addr(&self) -> Result<Vec<u8>, Errno> {
        Ok(self.sock.name())
    }

    fn peer_addr(&self) -> Result<Vec<u8>, Errno> {
        let peer = self.sock.lock().peer.clone().ok_or(Errno::ENOTCONN)?;
        Ok(peer.name())
    }

    fn getsockopt(&self, _call: &NetCall, level: u32, name: u32, _len: usize) -> Result<Vec<u8>, Errno> {
        let s = &self.sock;
        if level != n::SOL_SOCKET {
            return Err(Errno::EOPNOTSUPP);
        }
        let int = |v: i32| Ok(v.to_ne_bytes().to_vec());
        match name {
            n::SO_ERROR => {
                let e = s.lock().err.take();
                int(e.map_or(0, |e| e.get() as i32))
            }
            n::SO_ACCEPTCONN => int((s.lock().state == State::Listening) as i32),
            n::SO_PEERCRED => {
                let c = s.lock().peercred.unwrap_or(Ucred { pid: 0, uid: u32::MAX, gid: u32::MAX });
                let mut b = c.pid.to_ne_bytes().to_vec();
                b.extend_from_slice(&c.uid.to_ne_bytes());
                b.extend_from_slice(&c.gid.to_ne_bytes());
                Ok(b)
            }
            _ => s.options.get(name).unwrap_or(Err(Errno::ENOPROTOOPT)),
        }
    }

    fn setsockopt(&self, call: &NetCall, level: u32, name: u32, value: &[u8]) -> Result<(), Errno> {
        let s = &self.sock;
        if level != n::SOL_SOCKET {
            return Err(Errno::EOPNOTSUPP);
        }
        if name == n::SO_PEEK_OFF {
            let v: [u8; 4] = value.get(..4).ok_or(Errno::EINVAL)?.try_into().expect("four bytes");
            let v = i32::from_ne_bytes(v);
            s.options.update(|o| o.peek_off = v);
            return Ok(());
        }
        let r = s.options.set(&call.ctx.creds, name, value).unwrap_or(Err(Errno::ENOPROTOOPT));
        if r.is_ok() && name == n::SO_SNDBUF {
            // More room may let a blocked sender go on.
            s.queue.notify_all();
        }
        r
    }

    fn send(&self, call: &NetCall, msg: SendMsg) -> Result<usize, Errno> {
        if self.sock.kind == n::SOCK_STREAM {
            self.sock.stream_send(call, msg)
        } else {
            self.sock.dgram_send(call, msg)
        }
    }

    fn recv(&self, call: &NetCall, msg: RecvMsg) -> Result<Received, Errno> {
        if self.sock.kind == n::SOCK_STREAM {
            self.sock.stream_recv(call, msg)
        } else {
            self.sock.dgram_recv(call, msg)
        }
    }

    fn poll(&self) -> u32 {
        let s = &self.sock;
        let i = s.lock();
        let mut mask = 0;
        if i.err.is_some() {
            mask |= g::POLLERR;
        }
        if i.shutdown == SHUTDOWN_MASK {
            mask |= g::POLLHUP;
        }
        if i.shutdown & RCV_SHUTDOWN != 0 {
            mask |= g::POLLRDHUP | g::POLLIN | g::POLLRDNORM;
        }
        if !i.recv.is_empty() || !i.backlog.is_empty() {
            mask |= g::POLLIN | g::POLLRDNORM;
        }
        if s.connection_oriented() && i.state == State::Unconnected {
            mask |= g::POLLHUP;
        }
        let mut writable = s.writable(i.state);
        let peer = i.peer.clone();
        drop(i);
        // A datagram socket connected to one that is not connected back
        // waits for room on that one's queue.
        if writable
            && s.kind == n::SOCK_DGRAM
            && let Some(p) = peer
            && !Arc::ptr_eq(&p, s)
        {
            let mut pi = p.lock();
            if !pi.peer.as_ref().is_some_and(|pp| Arc::ptr_eq(pp, s)) && Sock::recvq_full(&pi) {
                writable = false;
                if !pi.peer_waiters.iter().any(|w| w.as_ptr() == Arc::as_ptr(s)) {
                    pi.peer_waiters.push(Arc::downgrade(s));
                }
            }
        }
        if writable {
            mask |= g::POLLOUT | g::POLLWRNORM | g::POLLWRBAND;
        }
        mask
    }

    fn poll_queue(&self) -> &WaitQueue {
        &self.sock.queue
    }

    fn ioctl(&self, _call: &NetCall, mm: &MemoryManager, cmd: u32, arg: u64) -> Result<u64, Errno> {
        let s = &self.sock;
        let value = match cmd {
            SIOCINQ => {
                if s.lock().state == State::Listening {
                    return Err(Errno::EINVAL);
                }
                self.readable_bytes().unwrap_or(0) as i32
            }
            SIOCOUTQ => s.wmem.load(Ordering::SeqCst) as i32,
            _ => return Err(Errno::ENOTTY),
        };
        mm.write(arg, &value).map_err(|_| Errno::EFAULT)?;
        Ok(0)
    }

    fn readable_bytes(&self) -> Option<u64> {
        let i = self.sock.lock();
        match i.state {
            State::Listening => None,
            _ if self.sock.kind == n::SOCK_DGRAM => Some(i.recv.front().map_or(0, |s| s.data.len() as u64)),
            _ => Some(i.recv.iter().map(|s| s.remaining() as u64).sum()),
        }
    }
}
