//! TCP over the sandbox's loopback, without packets.
//!
//! A connection is a [`Link`]: a byte stream each way between two sockets,
//! with what each side has shut and the error each side has pending. The
//! handshake is the listener's accept queue: a connect finds the listener
//! through the port table and leaves the accepted side there at once, or,
//! with the queue beyond its backlog, waits as Linux's client does while
//! its SYNs go unanswered, until an accept makes room. The states Linux
//! reports (TCP_INFO, /proc/net/tcp, poll) follow from the link: FIN sent
//! and received, reset, closed.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use linux_raw_sys::net as n;
use memory::{GuestSlice, GuestSliceMut};

use super::{
    Claim, Endpoint, IPPROTO_IP, IPPROTO_IPV6, IPPROTO_TCP, IpOptions, Loopback, ProcEntry, Target, any, int_bytes,
    int_of, next_id, parse_bind, parse_target, port_forbidden, route, sockaddr, source_for,
};
use crate::errno::Errno;
use crate::fs::{POLLERR, POLLHUP, POLLIN, POLLOUT, POLLPRI, POLLRDNORM, POLLWRNORM};
use crate::mm::MemoryManager;
use crate::net::accounting::{SocketCharge, SocketMemory};
use crate::net::options::{SocketOptions, Values};
use crate::net::{NetCall, Received, RecvMsg, SendMsg, Socket};
use crate::waiter::{BlockError, WaitQueue};

/// net.ipv4.tcp_wmem and tcp_rmem's middle values: a new socket's buffers.
pub const TCP_SNDBUF: u32 = 16_384;
pub const TCP_RCVBUF: u32 = 131_072;

const POLLRDHUP: u32 = 0x2000;

/// net.core.somaxconn: the backlog a negative one stands for.
const SOMAXCONN: usize = 4096;

/// TCP states as Linux numbers them.
const ESTABLISHED: u8 = 1;
const SYN_SENT: u8 = 2;
const FIN_WAIT2: u8 = 5;
const CLOSE: u8 = 7;
const CLOSE_WAIT: u8 = 8;
const LISTEN: u8 = 10;

/// TCP-level options.
const TCP_NODELAY: u32 = 1;
const TCP_MAXSEG: u32 = 2;
const TCP_CORK: u32 = 3;
const TCP_KEEPIDLE: u32 = 4;
const TCP_KEEPINTVL: u32 = 5;
const TCP_KEEPCNT: u32 = 6;
const TCP_SYNCNT: u32 = 7;
const TCP_LINGER2: u32 = 8;
const TCP_DEFER_ACCEPT: u32 = 9;
const TCP_WINDOW_CLAMP: u32 = 10;
const TCP_INFO: u32 = 11;
const TCP_QUICKACK: u32 = 12;
const TCP_CONGESTION: u32 = 13;
const TCP_USER_TIMEOUT: u32 = 18;
const TCP_FASTOPEN: u32 = 23;
const TCP_NOTSENT_LOWAT: u32 = 25;

/// net.ipv4.tcp_wmem and tcp_rmem's largest values: how far Linux grows
/// buffers the application has not set.
const TCP_WMEM_MAX: usize = 4_194_304;
const TCP_RMEM_MAX: usize = 6_291_456;

/// Most bytes in flight from a sender with options `from` to a receiver
/// with `to`: the sender's buffer and the receiver's, each as Linux grows
/// it unless the application fixed it.
fn stream_limit(from: &Values, to: &Values) -> usize {
    let snd = if from.sndbuf_locked { from.sndbuf as usize } else { TCP_WMEM_MAX };
    let rcv = if to.rcvbuf_locked { to.rcvbuf as usize } else { TCP_RMEM_MAX };
    snd + rcv
}

/// The MSS of an unconnected socket (TCP_MSS_DEFAULT) and of a loopback
/// connection (the loopback MTU less the IP and TCP headers and the
/// timestamp option).
const MSS_DEFAULT: i32 = 536;
const MSS_LOOPBACK: i32 = 65_483;
/// sizeof(struct tcp_info) as Linux fills it.
const TCP_INFO_LEN: usize = 232;
/// TCP_CA_NAME_MAX.
const CA_NAME_MAX: usize = 16;

/// ioctls.
const SIOCINQ: u32 = 0x541b;
const SIOCOUTQ: u32 = 0x5411;
const SIOCATMARK: u32 = 0x8905;
const SIOCOUTQNSD: u32 = 0x894b;

/// Copies `dst.len()` bytes of the concatenation of `src`, from `from`.
fn gather(src: &[GuestSlice<'_>], mut from: usize, dst: &mut [u8]) {
    let mut at = 0;
    for s in src {
        if at == dst.len() {
            break;
        }
        if from >= s.len() {
            from -= s.len();
            continue;
        }
        let k = (s.len() - from).min(dst.len() - at);
        s.subslice(from, k).copy_to(&mut dst[at..at + k]);
        at += k;
        from = 0;
    }
}

/// Copies `src` into the concatenation of `dst`, from `at` on.
fn scatter(dst: &[GuestSliceMut<'_>], mut at: usize, src: &[u8]) {
    let mut done = 0;
    for d in dst {
        if done == src.len() {
            break;
        }
        if at >= d.len() {
            at -= d.len();
            continue;
        }
        let k = (d.len() - at).min(src.len() - done);
        d.subslice(at, k).copy_from(&src[done..done + k]);
        done += k;
        at = 0;
    }
}

/// A byte stream in flight: a ring that grows to what its link allows,
/// its capacity charged to the sandbox's socket memory.
#[derive(Default)]
pub(crate) struct Ring {
    buf: Vec<u8>,
    head: usize,
    len: usize,
    charge: Option<SocketCharge>,
}

impl Ring {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Makes room for `need` bytes; ENOBUFS if the sandbox's memory has
    /// none for the bigger buffer.
    fn grow(&mut self, memory: &Arc<SocketMemory>, need: usize) -> Result<(), Errno> {
        if need <= self.buf.len() {
            return Ok(());
        }
        let size = need.next_power_of_two().max(4096);
        match &mut self.charge {
            Some(c) => c.resize(size)?,
            None => self.charge = Some(memory.charge(size)?),
        }
        let mut bigger = vec![0u8; size];
        let (a, b) = self.spans(0, self.len);
        bigger[..a.len()].copy_from_slice(a);
        bigger[a.len()..a.len() + b.len()].copy_from_slice(b);
        self.buf = bigger;
        self.head = 0;
        Ok(())
    }

    /// The `n` bytes after the first `skip`, as at most two runs.
    fn spans(&self, skip: usize, n: usize) -> (&[u8], &[u8]) {
        let cap = self.buf.len();
        if cap == 0 || n == 0 {
            return (&[], &[]);
        }
        let start = (self.head + skip) % cap;
        let first = n.min(cap - start);
        (&self.buf[start..start + first], &self.buf[..n - first])
    }

    /// Appends up to `n` bytes of the concatenation of `src` from `from`
    /// on: all of them, or what the buffer holds if the sandbox's memory
    /// has no room to grow it. Returns how many; ENOBUFS if none fit.
    fn push(
        &mut self,
        memory: &Arc<SocketMemory>,
        src: &[GuestSlice<'_>],
        from: usize,
        n: usize,
    ) -> Result<usize, Errno> {
        let n = match self.grow(memory, self.len + n) {
            Ok(()) => n,
            Err(e) if self.buf.len() == self.len => return Err(e),
            Err(_) => n.min(self.buf.len() - self.len),
        };
        let cap = self.buf.len();
        let tail = (self.head + self.len) % cap;
        let first = n.min(cap - tail);
        gather(src, from, &mut self.buf[tail..tail + first]);
        gather(src, from + first, &mut self.buf[..n - first]);
        self.len += n;
        Ok(n)
    }

    /// Copies `n` bytes after the first `skip` into `dst` from `at` on.
    fn copy_out(&self, dst: &[GuestSliceMut<'_>], at: usize, skip: usize, n: usize) {
        let (a, b) = self.spans(skip, n);
        scatter(dst, at, a);
        scatter(dst, at + a.len(), b);
    }

    fn consume(&mut self, n: usize) {
        self.len -= n;
        self.head = if self.len == 0 { 0 } else { (self.head + n) % self.buf.len() };
    }

    /// Takes the last byte.
    fn pop_back(&mut self) -> Option<u8> {
        if self.len == 0 {
            return None;
        }
        let at = (self.head + self.len - 1) % self.buf.len();
        self.len -= 1;
        Some(self.buf[at])
    }
}

/// The two directions of one connection. Side 0 is the connecting socket,
/// side 1 the accepted one; everything indexed `[i]` is side i's.
struct LinkState {
    /// Bytes side i sent that the other has not read.
    data: [Ring; 2],
    /// Side i sent its FIN (shutdown SHUT_WR, or close).
    fin: [bool; 2],
    /// Side i shut its reading half.
    rd_shut: [bool; 2],
    /// Side i's connection was reset: it is closed.
    dead: [bool; 2],
    /// Side i's pending error (sk_err).
    err: [Option<Errno>; 2],
    /// Side i's socket still exists.
    open: [bool; 2],
    /// Most bytes `data[i]` holds: side i's send buffer and the other's
    /// receive buffer.
    limit: [usize; 2],
    /// Each side's buffer options, for the limits.
    buffers: [Values; 2],
    /// Side i's urgent byte (MSG_OOB) the other has not read.
    urgent: [Option<u8>; 2],
}

pub(crate) struct Link {
    state: Mutex<LinkState>,
    queues: [Arc<WaitQueue>; 2],
}

impl Link {
    fn notify(&self, side: usize) {
        self.queues[side].notify_all();
    }

    fn state_of(&self, side: usize) -> u8 {
        let l = self.state.lock().unwrap();
        l.tcp_state(side)
    }
}

impl LinkState {
    fn tcp_state(&self, i: usize) -> u8 {
        let o = 1 - i;
        if self.dead[i] || (self.fin[i] && self.fin[o]) {
            CLOSE
        } else if self.fin[i] {
            FIN_WAIT2
        } else if self.fin[o] {
            CLOSE_WAIT
        } else {
            ESTABLISHED
        }
    }

    fn rcv_shut(&self, i: usize) -> bool {
        self.rd_shut[i] || self.fin[1 - i] || self.dead[i]
    }

    fn snd_shut(&self, i: usize) -> bool {
        self.fin[i] || self.dead[i]
    }

    /// Side i is reset: RST from the other side.
    fn reset(&mut self, i: usize) {
        if !self.dead[i] {
            self.dead[i] = true;
            // tcp_reset: a socket that had the peer's FIN sees EPIPE.
            self.err[i] = Some(if self.fin[1 - i] { Errno::EPIPE } else { Errno::ECONNRESET });
        }
    }

    fn poll(&self, i: usize) -> u32 {
        let o = 1 - i;
        let mut mask = 0;
        let (rcv, snd) = (self.rcv_shut(i), self.snd_shut(i));
        if (rcv && snd) || self.tcp_state(i) == CLOSE {
            mask |= POLLHUP;
        }
        if rcv {
            mask |= POLLIN | POLLRDNORM | POLLRDHUP;
        }
        if self.data[o].len() > 0 {
            mask |= POLLIN | POLLRDNORM;
        }
        if snd || self.data[i].len() < self.limit[i] {
            mask |= POLLOUT | POLLWRNORM;
        }
        if self.urgent[o].is_some() {
            mask |= POLLPRI;
        }
        if self.err[i].is_some() {
            mask |= POLLERR;
        }
        mask
    }
}

/// TCP-level options.
#[derive(Clone, Debug)]
struct TcpOptions {
    nodelay: bool,
    cork: bool,
    keepidle: i32,
    keepintvl: i32,
    keepcnt: i32,
    syncnt: i32,
    linger2: i32,
    defer_accept: i32,
    window_clamp: i32,
    maxseg: i32,
    quickack: bool,
    user_timeout: i32,
    congestion: &'static str,
    fastopen: i32,
    notsent_lowat: i32,
}

impl Default for TcpOptions {
    fn default() -> Self {
        TcpOptions {
            nodelay: false,
            cork: false,
            keepidle: 7200,
            keepintvl: 75,
            keepcnt: 9,
            syncnt: 6,
            linger2: 60,
            defer_accept: 0,
            window_clamp: 0,
            maxseg: 0,
            quickack: true,
            user_timeout: 0,
            congestion: "cubic",
            fastopen: 0,
            notsent_lowat: 0,
        }
    }
}

/// Congestion controls a socket may choose (the built-in ones).
const CONGESTION: [&str; 2] = ["cubic", "reno"];

enum Phase {
    /// TCP_CLOSE: new, refused, or disconnected.
    Closed,
    Listening {
        backlog: usize,
        /// Connections waiting for accept, oldest first.
        ready: VecDeque<Arc<TcpSocket>>,
        /// Connectors beyond the backlog, waiting for room.
        waiting: VecDeque<Weak<TcpSocket>>,
    },
    /// SYN_SENT: queued at a full listener.
    Connecting {
        listener: Weak<TcpSocket>,
        to: Endpoint,
    },
    Connected {
        link: Arc<Link>,
        side: usize,
        peer: Endpoint,
    },
}

struct State {
    /// The address and port claimed in the port table.
    local: Option<Endpoint>,
    /// The application chose the port (SOCK_BINDPORT_LOCK): a disconnect
    /// keeps it.
    port_locked: bool,
    phase: Phase,
    /// A pending error with no connection (a refused connect).
    error: Option<Errno>,
    /// connect answered EINPROGRESS and no connect since has reported how
    /// it went (SS_CONNECTING).
    connect_pending: bool,
    /// Shutdowns of a socket with no connection, as poll reports them.
    shut: u32,
    ip: IpOptions,
    tcp: TcpOptions,
}

/// A TCP socket on the loopback.
pub struct TcpSocket {
    stack: Arc<Loopback>,
    v6: bool,
    id: u64,
    uid: u32,
    options: SocketOptions,
    queue: Arc<WaitQueue>,
    state: Mutex<State>,
    /// Close with a reset (an unaccepted connection of a closed listener).
    abort: AtomicBool,
    this: Weak<TcpSocket>,
}

/// The errno of a wait that ended without its condition.
fn blocked(e: BlockError, timeout_set: bool) -> Errno {
    match e {
        BlockError::Interrupted if timeout_set => Errno::EINTR,
        BlockError::Interrupted => Errno::ERESTARTSYS,
        BlockError::TimedOut => Errno::EAGAIN,
    }
}

impl TcpSocket {
    pub(crate) fn new(stack: Arc<Loopback>, v6: bool, uid: u32) -> Arc<TcpSocket> {
        Self::with_options(stack, v6, uid, SocketOptions::new(TCP_SNDBUF, TCP_RCVBUF), State::new())
    }

    fn with_options(stack: Arc<Loopback>, v6: bool, uid: u32, options: SocketOptions, state: State) -> Arc<TcpSocket> {
        Arc::new_cyclic(|this| TcpSocket {
            stack,
            v6,
            id: next_id(),
            uid,
            options,
            queue: Arc::new(WaitQueue::default()),
            state: Mutex::new(state),
            abort: AtomicBool::new(false),
            this: this.clone(),
        })
    }

    pub(crate) fn is_v6(&self) -> bool {
        self.v6
    }

    fn arc(&self) -> Arc<TcpSocket> {
        self.this.upgrade().expect("a socket in use is alive")
    }

    fn claim(&self, ip: IpAddr, st: &State, listening: bool) -> Claim<TcpSocket> {
        let v = self.options.values();
        Claim {
            id: self.id,
            ip,
            v6only: st.ip.v6only,
            reuseaddr: v.reuseaddr,
            reuseport: v.reuseport,
            listening,
            uid: self.uid,
            peer: None,
            socket: self.this.clone(),
        }
    }

    /// Claims an ephemeral port for a socket with none (inet_autobind).
    fn autobind(&self, st: &mut State, ip: IpAddr) -> Result<(), Errno> {
        if st.local.is_none() {
            let claim = self.claim(ip, st, false);
            let port = self.stack.tcp.lock().unwrap().claim(0, claim, true)?;
            st.local = Some(Endpoint { ip, port });
            st.port_locked = false;
        }
        Ok(())
    }

    /// Gives up the port, unless the application chose it and `keep_chosen`.
    fn unbind(&self, st: &mut State, keep_chosen: bool) {
        if keep_chosen && st.port_locked {
            return;
        }
        if let Some(l) = st.local.take() {
            self.stack.tcp.lock().unwrap().release(l.port, self.id);
        }
    }

    fn connected_link(&self) -> Option<(Arc<Link>, usize)> {
        match &self.state.lock().unwrap().phase {
            Phase::Connected { link, side, .. } => Some((link.clone(), *side)),
            _ => None,
        }
    }

    /// Connects to `to` without waiting (for the sentry's own clients).
    pub(crate) fn connect_nonblocking(&self, to: Endpoint) -> Result<(), Errno> {
        match self.start_connect(to)? {
            true => Ok(()),
            false => {
                // Queued at a full listener: the outside client is refused
                // rather than left waiting.
                self.disconnect();
                Err(Errno::EAGAIN)
            }
        }
    }

    /// Starts a connection to `to`: true if established, false if waiting
    /// at a full listener.
    fn start_connect(&self, to: Endpoint) -> Result<bool, Errno> {
        let dst = route(to.ip)?;
        if self.v6 && dst.is_ipv4() && self.state.lock().unwrap().ip.v6only {
            return Err(Errno::ENETUNREACH);
        }
        let to = Endpoint { ip: dst, port: to.port };
        let src = source_for(dst);
        let listener = {
            let mut st = self.state.lock().unwrap();
            self.autobind(&mut st, src)?;
            let local = st.local.expect("bound");
            if local.ip.is_unspecified() {
                // The route's source becomes the socket's address.
                st.local = Some(Endpoint { ip: src, port: local.port });
                if let Some(c) = self.stack.tcp.lock().unwrap().get_mut(local.port, self.id) {
                    c.ip = src;
                }
            }
            let (listener, _others) =
                self.stack.tcp.lock().unwrap().lookup(dst, to.port, |c| c.listening && c.id != self.id);
            let Some(listener) = listener else {
                self.unbind(&mut st, true);
                return Err(Errno::ECONNREFUSED);
            };
            st.phase = Phase::Connecting { listener: Arc::downgrade(&listener), to };
            listener
        };
        match listener.admit(&self.arc(), to) {
            Some(accepted) => Ok(accepted),
            None => {
                // It stopped listening meanwhile.
                let mut st = self.state.lock().unwrap();
                st.phase = Phase::Closed;
                self.unbind(&mut st, true);
                Err(Errno::ECONNREFUSED)
            }
        }
    }

    /// A connector arrives at this listener: accepted into the queue
    /// (true), or left waiting if the queue is beyond the backlog (false);
    /// None if it no longer listens.
    fn admit(&self, client: &Arc<TcpSocket>, to: Endpoint) -> Option<bool> {
        let mut st = self.state.lock().unwrap();
        let Phase::Listening { backlog, ready, waiting } = &mut st.phase else { return None };
        // sk_acceptq_is_full: the queue takes backlog + 1.
        if ready.len() > *backlog {
            waiting.push_back(Arc::downgrade(client));
            return Some(false);
        }
        let server = self.establish(client, to, &st.ip, &st.tcp);
        let Phase::Listening { ready, .. } = &mut st.phase else { unreachable!("checked above") };
        ready.push_back(server);
        drop(st);
        self.queue.notify_all();
        Some(true)
    }

    /// Makes the connection between `client` and a new socket accepted
    /// here; returns the new socket.
    fn establish(&self, client: &Arc<TcpSocket>, to: Endpoint, ip: &IpOptions, tcp: &TcpOptions) -> Arc<TcpSocket> {
        let mut cst = client.state.lock().unwrap();
        let from = cst.local.expect("a connector is bound");
        let server_state =
            State { local: Some(to), port_locked: true, ip: ip.clone(), tcp: tcp.clone(), ..State::new() };
        let server =
            TcpSocket::with_options(self.stack.clone(), self.v6, self.uid, self.options.inherit(), server_state);
        let (cv, sv) = (client.options.values(), server.options.values());
        let link = Arc::new(Link {
            state: Mutex::new(LinkState {
                data: [Ring::default(), Ring::default()],
                fin: [false; 2],
                rd_shut: [false; 2],
                dead: [false; 2],
                err: [None, None],
                open: [true; 2],
                limit: [stream_limit(&cv, &sv), stream_limit(&sv, &cv)],
                buffers: [cv.clone(), sv.clone()],
                urgent: [None, None],
            }),
            queues: [client.queue.clone(), server.queue.clone()],
        });
        {
            let mut sst = server.state.lock().unwrap();
            sst.phase = Phase::Connected { link: link.clone(), side: 1, peer: from };
            let claim = server.claim(to.ip, &sst, false);
            self.stack.tcp.lock().unwrap().ports.entry(to.port).or_default().push(claim);
        }
        cst.phase = Phase::Connected { link, side: 0, peer: to };
        drop(cst);
        client.queue.notify_all();
        server
    }

    /// A connect that will not complete: ECONNREFUSED for the connector.
    fn refuse(&self) {
        let mut st = self.state.lock().unwrap();
        if matches!(st.phase, Phase::Connecting { .. }) {
            st.phase = Phase::Closed;
            st.error = Some(Errno::ECONNREFUSED);
            self.unbind(&mut st, true);
        }
        drop(st);
        self.queue.notify_all();
    }

    /// connect(AF_UNSPEC), shutdown of a listener or connector: back to
    /// TCP_CLOSE; a connection is reset.
    fn disconnect(&self) {
        let mut st = self.state.lock().unwrap();
        let phase = std::mem::replace(&mut st.phase, Phase::Closed);
        self.unbind(&mut st, true);
        st.connect_pending = false;
        drop(st);
        self.end(phase, true);
        self.queue.notify_all();
    }

    /// Ends what `phase` holds: a connection closes (reset if `abort`), a
    /// listener's queued connections are reset and its waiters refused.
    fn end(&self, phase: Phase, abort: bool) {
        match phase {
            Phase::Connected { link, side, .. } => {
                let o = 1 - side;
                let mut l = link.state.lock().unwrap();
                l.open[side] = false;
                if abort || l.data[o].len() > 0 || l.urgent[o].is_some() {
                    // Unread data or SO_LINGER 0: RST (tcp_close).
                    l.reset(o);
                    l.dead[side] = true;
                } else if !l.fin[side] {
                    l.fin[side] = true;
                }
                drop(l);
                link.notify(o);
            }
            Phase::Listening { ready, waiting, .. } => {
                for s in ready {
                    s.abort.store(true, Ordering::Relaxed);
                }
                for w in waiting {
                    if let Some(c) = w.upgrade() {
                        c.refuse();
                    }
                }
            }
            Phase::Connecting { .. } | Phase::Closed => {}
        }
    }

    /// After an accept made room: the oldest waiting connector gets in.
    fn admit_waiting(&self) {
        loop {
            let next = {
                let mut st = self.state.lock().unwrap();
                let Phase::Listening { backlog, ready, waiting } = &mut st.phase else { return };
                if ready.len() > *backlog {
                    return;
                }
                match waiting.pop_front() {
                    Some(w) => w,
                    None => return,
                }
            };
            let Some(client) = next.upgrade() else { continue };
            let to = match &client.state.lock().unwrap().phase {
                Phase::Connecting { listener, to } if listener.ptr_eq(&self.this) => *to,
                _ => continue,
            };
            if self.admit(&client, to).is_none() {
                client.refuse();
            }
            return;
        }
    }

    fn tcp_state(&self) -> u8 {
        let st = self.state.lock().unwrap();
        match &st.phase {
            Phase::Closed => CLOSE,
            Phase::Listening { .. } => LISTEN,
            Phase::Connecting { .. } => SYN_SENT,
            Phase::Connected { link, side, .. } => link.state_of(*side),
        }
    }

    pub(crate) fn proc_entry(&self) -> ProcEntry {
        let st = self.state.lock().unwrap();
        let local = st.local.unwrap_or(Endpoint { ip: any(self.v6), port: 0 });
        let (remote, state, tx, rx) = match &st.phase {
            Phase::Closed => (Endpoint { ip: any(self.v6), port: 0 }, CLOSE, 0, 0),
            Phase::Listening { ready, .. } => (Endpoint { ip: any(self.v6), port: 0 }, LISTEN, 0, ready.len()),
            Phase::Connecting { to, .. } => (*to, SYN_SENT, 0, 0),
            Phase::Connected { link, side, peer } => {
                let l = link.state.lock().unwrap();
                (*peer, l.tcp_state(*side), 0, l.data[1 - side].len())
            }
        };
        ProcEntry { local, remote, state, tx_queue: tx, rx_queue: rx, uid: self.uid, ino: self.id }
    }

    /// Reads what has arrived without waiting: Ok(0) at end of stream,
    /// EAGAIN if nothing is there yet.
    pub fn read_nonblocking(&self, buf: &mut [u8]) -> Result<usize, Errno> {
        let bufs = [GuestSliceMut::from(buf)];
        self.receive(&bufs, n::MSG_DONTWAIT, None, true).map(|r| r.ret)
    }

    /// Writes what fits without waiting; EAGAIN if nothing does.
    pub fn write_nonblocking(&self, buf: &[u8]) -> Result<usize, Errno> {
        let bufs = [GuestSlice::from(buf)];
        self.transmit(&bufs, n::MSG_DONTWAIT, None, true)
    }

    /// Sends FIN: shutdown(SHUT_WR).
    pub fn shutdown_write(&self) -> Result<(), Errno> {
        self.shut(n::SHUT_WR)
    }

    /// Waits for a connect queued at a full listener to finish (or fails
    /// EAGAIN if `nonblocking`).
    fn wait_connected(
        &self,
        call: Option<&NetCall>,
        nonblocking: bool,
        deadline: Option<Instant>,
    ) -> Result<(), Errno> {
        let connecting = || matches!(self.state.lock().unwrap().phase, Phase::Connecting { .. });
        if !connecting() {
            return Ok(());
        }
        let Some(call) = call.filter(|_| !nonblocking) else { return Err(Errno::EAGAIN) };
        call.ctx
            .block_on(&[&self.queue], deadline, || (!connecting()).then_some(()))
            .map_err(|e| blocked(e, deadline.is_some()))
    }

    fn transmit(
        &self,
        data: &[GuestSlice<'_>],
        flags: u32,
        call: Option<&NetCall>,
        nonblocking: bool,
    ) -> Result<usize, Errno> {
        let total: usize = data.iter().map(|s| s.len()).sum();
        let deadline = self.options.send_deadline();
        self.wait_connected(call, nonblocking, deadline)?;
        let (link, i) = {
            let mut st = self.state.lock().unwrap();
            match &st.phase {
                Phase::Connected { link, side, .. } => (link.clone(), *side),
                // sk_stream_wait_connect: the pending error, else EPIPE.
                _ => return Err(st.error.take().unwrap_or(Errno::EPIPE)),
            }
        };
        let o = 1 - i;
        let oob = flags & n::MSG_OOB != 0;
        let mut sent = 0;
        loop {
            {
                let mut l = link.state.lock().unwrap();
                if l.err[i].is_some() && sent == 0 {
                    return Err(l.err[i].take().expect("checked"));
                }
                if l.snd_shut(i) {
                    return if sent > 0 { Ok(sent) } else { Err(Errno::EPIPE) };
                }
                if !l.open[o] {
                    // The peer is gone: what it is sent draws a reset.
                    l.reset(i);
                    drop(l);
                    link.notify(i);
                    return Ok(total);
                }
                let room = l.limit[i].saturating_sub(l.data[i].len());
                let k = room.min(total - sent);
                if k > 0 {
                    // Short of memory, a send takes what fits and fails
                    // only when nothing does.
                    let k = match l.data[i].push(&self.stack.memory, data, sent, k) {
                        Ok(k) => k,
                        Err(e) if sent == 0 => return Err(e),
                        Err(_) => return Ok(sent),
                    };
                    sent += k;
                    if sent == total && oob {
                        // The last byte of an urgent send is the urgent
                        // byte, out of the stream.
                        l.urgent[i] = l.data[i].pop_back();
                    }
                    drop(l);
                    link.notify(o);
                } else {
                    drop(l);
                }
                if sent == total {
                    return Ok(sent);
                }
            }
            let Some(call) = call.filter(|_| !nonblocking) else {
                return if sent > 0 { Ok(sent) } else { Err(Errno::EAGAIN) };
            };
            let r = call.ctx.block_on(&[&self.queue], deadline, || {
                let l = link.state.lock().unwrap();
                (l.data[i].len() < l.limit[i] || l.err[i].is_some() || l.snd_shut(i) || !l.open[o]).then_some(())
            });
            if let Err(e) = r {
                return if sent > 0 { Ok(sent) } else { Err(blocked(e, deadline.is_some())) };
            }
        }
    }

    fn receive(
        &self,
        bufs: &[GuestSliceMut<'_>],
        flags: u32,
        call: Option<&NetCall>,
        nonblocking: bool,
    ) -> Result<Received, Errno> {
        let want: usize = bufs.iter().map(|b| b.len()).sum();
        let deadline = self.options.recv_deadline();
        let (link, i) = {
            let mut st = self.state.lock().unwrap();
            match &st.phase {
                Phase::Connected { link, side, .. } => (link.clone(), *side),
                Phase::Connecting { .. } if nonblocking => return Err(Errno::EAGAIN),
                Phase::Connecting { .. } => {
                    drop(st);
                    self.wait_connected(call, nonblocking, deadline)?;
                    return self.receive(bufs, flags, call, nonblocking);
                }
                _ => return Err(st.error.take().unwrap_or(Errno::ENOTCONN)),
            }
        };
        let o = 1 - i;
        if flags & n::MSG_OOB != 0 {
            let mut l = link.state.lock().unwrap();
            if self.options.values().oobinline {
                return Err(Errno::EINVAL);
            }
            return match l.urgent[o] {
                Some(b) => {
                    if want > 0 {
                        scatter(bufs, 0, &[b]);
                        if flags & n::MSG_PEEK == 0 {
                            l.urgent[o] = None;
                        }
                    }
                    Ok(Received { ret: want.min(1), ..Default::default() })
                }
                None if l.rcv_shut(i) && l.data[o].len() == 0 => Ok(Received::default()),
                None => Err(Errno::EINVAL),
            };
        }
        let peek = flags & n::MSG_PEEK != 0;
        let waitall = flags & n::MSG_WAITALL != 0 && !peek;
        let discard = flags & n::MSG_TRUNC != 0;
        let mut copied = 0;
        loop {
            {
                let mut l = link.state.lock().unwrap();
                let skip = if peek { copied } else { 0 };
                let avail = l.data[o].len().saturating_sub(skip);
                let k = avail.min(want - copied);
                if k > 0 {
                    if !discard {
                        l.data[o].copy_out(bufs, copied, skip, k);
                    }
                    if !peek {
                        l.data[o].consume(k);
                    }
                    copied += k;
                }
                if k > 0 && !peek {
                    drop(l);
                    link.notify(o);
                    l = link.state.lock().unwrap();
                }
                if copied == want || (copied > 0 && !waitall) {
                    return Ok(Received { ret: copied, ..Default::default() });
                }
                if copied == 0 {
                    if l.fin[o] {
                        return Ok(Received::default());
                    }
                    if let Some(e) = l.err[i].take() {
                        return Err(e);
                    }
                    if l.rcv_shut(i) {
                        return Ok(Received::default());
                    }
                } else if l.rcv_shut(i) || l.err[i].is_some() {
                    return Ok(Received { ret: copied, ..Default::default() });
                }
            }
            let Some(call) = call.filter(|_| !nonblocking) else {
                return if copied > 0 {
                    Ok(Received { ret: copied, ..Default::default() })
                } else {
                    Err(Errno::EAGAIN)
                };
            };
            let r = call.ctx.block_on(&[&self.queue], deadline, || {
                let l = link.state.lock().unwrap();
                let skip = if peek { copied } else { 0 };
                (l.data[o].len() > skip || l.err[i].is_some() || l.rcv_shut(i)).then_some(())
            });
            if let Err(e) = r {
                return if copied > 0 {
                    Ok(Received { ret: copied, ..Default::default() })
                } else {
                    Err(blocked(e, deadline.is_some()))
                };
            }
        }
    }

    fn shut(&self, how: u32) -> Result<(), Errno> {
        let mut st = self.state.lock().unwrap();
        match &st.phase {
            Phase::Closed => {
                st.shut |= how + 1;
                drop(st);
                self.queue.notify_all();
                Err(Errno::ENOTCONN)
            }
            Phase::Listening { .. } => {
                if how == n::SHUT_WR {
                    return Ok(());
                }
                drop(st);
                self.disconnect();
                Ok(())
            }
            Phase::Connecting { .. } => {
                drop(st);
                self.disconnect();
                Ok(())
            }
            Phase::Connected { link, side, .. } => {
                let (link, i) = (link.clone(), *side);
                drop(st);
                let mut l = link.state.lock().unwrap();
                if l.tcp_state(i) == CLOSE {
                    return Err(Errno::ENOTCONN);
                }
                if how != n::SHUT_WR {
                    l.rd_shut[i] = true;
                }
                if how != n::SHUT_RD && !l.fin[i] {
                    l.fin[i] = true;
                }
                drop(l);
                link.notify(i);
                link.notify(1 - i);
                Ok(())
            }
        }
    }

    fn tcp_info(&self, len: usize) -> Vec<u8> {
        let mut info = vec![0u8; TCP_INFO_LEN];
        info[0] = self.tcp_state();
        let st = self.state.lock().unwrap();
        let mss = if matches!(st.phase, Phase::Connected { .. }) { MSS_LOOPBACK } else { MSS_DEFAULT };
        // tcpi_rto (µs): TCP_TIMEOUT_INIT, 1 s.
        info[8..12].copy_from_slice(&1_000_000u32.to_ne_bytes());
        // tcpi_snd_mss, tcpi_rcv_mss.
        info[16..20].copy_from_slice(&(mss as u32).to_ne_bytes());
        info[20..24].copy_from_slice(&(MSS_DEFAULT as u32).to_ne_bytes());
        // tcpi_pmtu, tcpi_rcv_ssthresh left zero; tcpi_snd_cwnd: TCP_INIT_CWND.
        info[80..84].copy_from_slice(&10u32.to_ne_bytes());
        info.truncate(len);
        info
    }

    fn get_tcp(&self, name: u32, len: usize) -> Result<Vec<u8>, Errno> {
        let st = self.state.lock().unwrap();
        let t = &st.tcp;
        let v = match name {
            TCP_NODELAY => t.nodelay as i32,
            TCP_MAXSEG => match (&st.phase, t.maxseg) {
                (Phase::Connected { .. }, 0) => MSS_LOOPBACK,
                (Phase::Connected { .. }, m) => m.min(MSS_LOOPBACK),
                (_, 0) => MSS_DEFAULT,
                (_, m) => m,
            },
            TCP_CORK => t.cork as i32,
            TCP_KEEPIDLE => t.keepidle,
            TCP_KEEPINTVL => t.keepintvl,
            TCP_KEEPCNT => t.keepcnt,
            TCP_SYNCNT => t.syncnt,
            TCP_LINGER2 => t.linger2,
            TCP_DEFER_ACCEPT => t.defer_accept,
            TCP_WINDOW_CLAMP => t.window_clamp,
            TCP_QUICKACK => t.quickack as i32,
            TCP_USER_TIMEOUT => t.user_timeout,
            TCP_FASTOPEN => t.fastopen,
            TCP_NOTSENT_LOWAT => t.notsent_lowat,
            TCP_INFO => {
                drop(st);
                return Ok(self.tcp_info(len));
            }
            TCP_CONGESTION => {
                let mut name = t.congestion.as_bytes().to_vec();
                name.resize(CA_NAME_MAX, 0);
                return Ok(name);
            }
            _ => return Err(Errno::ENOPROTOOPT),
        };
        Ok(int_bytes(v))
    }

    fn set_tcp(&self, name: u32, value: &[u8]) -> Result<(), Errno> {
        if name == TCP_CONGESTION {
            let want: Vec<u8> = value.iter().take(CA_NAME_MAX).take_while(|b| **b != 0).copied().collect();
            let found = CONGESTION.iter().find(|c| c.as_bytes() == want).ok_or(Errno::ENOENT)?;
            self.state.lock().unwrap().tcp.congestion = found;
            return Ok(());
        }
        let v = int_of(value)?;
        let mut st = self.state.lock().unwrap();
        let t = &mut st.tcp;
        match name {
            TCP_NODELAY => t.nodelay = v != 0,
            TCP_CORK => t.cork = v != 0,
            TCP_MAXSEG => {
                // TCP_MIN_MSS to MAX_TCP_WINDOW, or 0 for the default.
                if v != 0 && !(88..=32767).contains(&v) {
                    return Err(Errno::EINVAL);
                }
                t.maxseg = v;
            }
            TCP_KEEPIDLE | TCP_KEEPINTVL => {
                if !(1..=32767).contains(&v) {
                    return Err(Errno::EINVAL);
                }
                if name == TCP_KEEPIDLE {
                    t.keepidle = v;
                } else {
                    t.keepintvl = v;
                }
            }
            TCP_KEEPCNT => {
                if !(1..=127).contains(&v) {
                    return Err(Errno::EINVAL);
                }
                t.keepcnt = v;
            }
            TCP_SYNCNT => {
                if !(1..=127).contains(&v) {
                    return Err(Errno::EINVAL);
                }
                t.syncnt = v;
            }
            TCP_LINGER2 => t.linger2 = if v < 0 { -1 } else { v.min(120) },
            TCP_DEFER_ACCEPT => t.defer_accept = v.max(0),
            TCP_WINDOW_CLAMP => {
                if v != 0 && v < 2304 / 2 {
                    t.window_clamp = 2304 / 2;
                } else {
                    t.window_clamp = v;
                }
            }
            TCP_QUICKACK => t.quickack = v != 0,
            TCP_USER_TIMEOUT => {
                if v < 0 {
                    return Err(Errno::EINVAL);
                }
                t.user_timeout = v;
            }
            TCP_FASTOPEN => t.fastopen = v,
            TCP_NOTSENT_LOWAT => t.notsent_lowat = v,
            _ => return Err(Errno::ENOPROTOOPT),
        }
        Ok(())
    }
}

impl State {
    fn new() -> State {
        State {
            local: None,
            port_locked: false,
            phase: Phase::Closed,
            error: None,
            connect_pending: false,
            shut: 0,
            ip: IpOptions::default(),
            tcp: TcpOptions::default(),
        }
    }
}

impl Drop for TcpSocket {
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap();
        let phase = std::mem::replace(&mut st.phase, Phase::Closed);
        if let Some(l) = st.local.take() {
            self.stack.tcp.lock().unwrap().release(l.port, self.id);
        }
        let linger0 = {
            let v = self.options.values();
            v.linger.0 != 0 && v.linger.1 == 0
        };
        self.end(phase, linger0 || self.abort.load(Ordering::Relaxed));
    }
}

impl Socket for TcpSocket {
    fn family(&self) -> u32 {
        if self.v6 { n::AF_INET6 } else { n::AF_INET }
    }

    fn kind(&self) -> u32 {
        n::SOCK_STREAM
    }

    fn protocol(&self) -> u32 {
        IPPROTO_TCP
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
        if st.local.is_some() || !matches!(st.phase, Phase::Closed) {
            return Err(Errno::EINVAL);
        }
        let claim = self.claim(ep.ip, &st, false);
        let port = self.stack.tcp.lock().unwrap().claim(ep.port, claim, true)?;
        st.local = Some(Endpoint { ip: ep.ip, port });
        st.port_locked = ep.port != 0;
        Ok(())
    }

    fn listen(&self, _: &NetCall, backlog: i32) -> Result<(), Errno> {
        // A negative backlog is taken as unsigned: net.core.somaxconn.
        let backlog = if backlog < 0 { SOMAXCONN } else { backlog as usize };
        let mut st = self.state.lock().unwrap();
        match &mut st.phase {
            Phase::Listening { backlog: b, .. } => {
                *b = backlog;
                return Ok(());
            }
            Phase::Closed => {}
            _ => return Err(Errno::EINVAL),
        }
        self.autobind(&mut st, any(self.v6))?;
        let local = st.local.expect("bound");
        {
            let mut table = self.stack.tcp.lock().unwrap();
            let claim = self.claim(local.ip, &st, true);
            if !table.fits(local.port, &claim, true) {
                return Err(Errno::EADDRINUSE);
            }
            if let Some(c) = table.get_mut(local.port, self.id) {
                *c = claim;
            }
        }
        st.phase = Phase::Listening { backlog, ready: VecDeque::new(), waiting: VecDeque::new() };
        Ok(())
    }

    fn accept(&self, call: &NetCall) -> Result<(Arc<dyn Socket>, Vec<u8>), Errno> {
        let deadline = self.options.recv_deadline();
        let take = || -> Option<Result<Arc<TcpSocket>, Errno>> {
            let mut st = self.state.lock().unwrap();
            match &mut st.phase {
                Phase::Listening { ready, .. } => match ready.pop_front() {
                    Some(s) => Some(Ok(s)),
                    None if call.nonblocking() => Some(Err(Errno::EAGAIN)),
                    None => None,
                },
                _ => Some(Err(Errno::EINVAL)),
            }
        };
        let s = call.ctx.block_on(&[&self.queue], deadline, take).map_err(|e| blocked(e, deadline.is_some()))??;
        self.admit_waiting();
        let peer = match &s.state.lock().unwrap().phase {
            Phase::Connected { peer, .. } => *peer,
            _ => Endpoint { ip: any(self.v6), port: 0 },
        };
        Ok((s as Arc<dyn Socket>, sockaddr(self.v6, peer)))
    }

    fn connect(&self, call: &NetCall, addr: &[u8]) -> Result<(), Errno> {
        let to = match parse_target(self.v6, addr, false, true)? {
            Target::Unspec => {
                self.disconnect();
                return Ok(());
            }
            Target::Addr(ep) => ep,
        };
        let nonblocking = call.nonblocking();
        let deadline = self.options.send_deadline();
        {
            let mut st = self.state.lock().unwrap();
            match &st.phase {
                Phase::Connected { .. } if st.connect_pending => {
                    st.connect_pending = false;
                    return Ok(());
                }
                Phase::Connected { .. } | Phase::Listening { .. } => return Err(Errno::EISCONN),
                Phase::Connecting { .. } if nonblocking => return Err(Errno::EALREADY),
                Phase::Connecting { .. } => {}
                Phase::Closed if st.connect_pending => {
                    st.connect_pending = false;
                    return Err(st.error.take().unwrap_or(Errno::ECONNABORTED));
                }
                Phase::Closed => {
                    drop(st);
                    match self.start_connect(to) {
                        Ok(true) if !nonblocking => return Ok(()),
                        Ok(_) if nonblocking => {
                            self.state.lock().unwrap().connect_pending = true;
                            return Err(Errno::EINPROGRESS);
                        }
                        Ok(_) => {}
                        Err(Errno::ECONNREFUSED) if nonblocking => {
                            // Linux answers EINPROGRESS and the refusal
                            // comes as the socket's error.
                            let mut st = self.state.lock().unwrap();
                            st.error = Some(Errno::ECONNREFUSED);
                            st.connect_pending = true;
                            drop(st);
                            self.queue.notify_all();
                            return Err(Errno::EINPROGRESS);
                        }
                        Err(e) => return Err(e),
                    }
                }
            }
        }
        // Blocking, queued at a full listener.
        let r = call.ctx.block_on(&[&self.queue], deadline, || {
            let st = self.state.lock().unwrap();
            (!matches!(st.phase, Phase::Connecting { .. })).then_some(())
        });
        match r {
            Ok(()) => {}
            Err(BlockError::TimedOut) => {
                self.state.lock().unwrap().connect_pending = true;
                return Err(Errno::EINPROGRESS);
            }
            Err(e) => {
                self.state.lock().unwrap().connect_pending = true;
                return Err(blocked(e, deadline.is_some()));
            }
        }
        let mut st = self.state.lock().unwrap();
        st.connect_pending = false;
        match st.phase {
            Phase::Connected { .. } => Ok(()),
            _ => Err(st.error.take().unwrap_or(Errno::ECONNABORTED)),
        }
    }

    fn shutdown(&self, _: &NetCall, how: u32) -> Result<(), Errno> {
        self.shut(how)
    }

    fn local_addr(&self) -> Result<Vec<u8>, Errno> {
        let st = self.state.lock().unwrap();
        Ok(sockaddr(self.v6, st.local.unwrap_or(Endpoint { ip: any(self.v6), port: 0 })))
    }

    fn peer_addr(&self) -> Result<Vec<u8>, Errno> {
        let st = self.state.lock().unwrap();
        match &st.phase {
            Phase::Connected { link, side, peer } => {
                // A reset connection has no peer (TCP_CLOSE).
                if link.state.lock().unwrap().dead[*side] {
                    return Err(Errno::ENOTCONN);
                }
                Ok(sockaddr(self.v6, *peer))
            }
            _ => Err(Errno::ENOTCONN),
        }
    }

    fn getsockopt(&self, _: &NetCall, level: u32, name: u32, len: usize) -> Result<Vec<u8>, Errno> {
        match level {
            n::SOL_SOCKET => match name {
                n::SO_ERROR => {
                    let mut st = self.state.lock().unwrap();
                    let e = match st.error.take() {
                        Some(e) => Some(e),
                        None => match &st.phase {
                            Phase::Connected { link, side, .. } => link.state.lock().unwrap().err[*side].take(),
                            _ => None,
                        },
                    };
                    Ok(int_bytes(e.map_or(0, |e| e.get() as i32)))
                }
                n::SO_ACCEPTCONN => {
                    Ok(int_bytes(matches!(self.state.lock().unwrap().phase, Phase::Listening { .. }) as i32))
                }
                _ => self.options.get(name).unwrap_or(Err(Errno::ENOPROTOOPT)),
            },
            IPPROTO_TCP => self.get_tcp(name, len),
            IPPROTO_IP | IPPROTO_IPV6 => {
                let st = self.state.lock().unwrap();
                st.ip.get(self.v6, level, name, matches!(st.phase, Phase::Connected { .. }))
            }
            _ => Err(Errno::ENOPROTOOPT),
        }
    }

    fn setsockopt(&self, call: &NetCall, level: u32, name: u32, value: &[u8]) -> Result<(), Errno> {
        match level {
            n::SOL_SOCKET => {
                self.options.set(&call.ctx.creds, name, value).unwrap_or(Err(Errno::ENOPROTOOPT))?;
                if matches!(name, n::SO_SNDBUF | n::SO_RCVBUF | n::SO_SNDBUFFORCE | n::SO_RCVBUFFORCE)
                    && let Some((link, i)) = self.connected_link()
                {
                    let mut l = link.state.lock().unwrap();
                    l.buffers[i] = self.options.values();
                    l.limit[i] = stream_limit(&l.buffers[i], &l.buffers[1 - i]);
                    l.limit[1 - i] = stream_limit(&l.buffers[1 - i], &l.buffers[i]);
                    drop(l);
                    link.notify(i);
                    link.notify(1 - i);
                }
                Ok(())
            }
            IPPROTO_TCP => self.set_tcp(name, value),
            IPPROTO_IP | IPPROTO_IPV6 => {
                let mut st = self.state.lock().unwrap();
                let bound = st.local.is_some();
                st.ip.set(self.v6, level, name, value, bound)
            }
            _ => Err(Errno::ENOPROTOOPT),
        }
    }

    fn send(&self, call: &NetCall, msg: SendMsg) -> Result<usize, Errno> {
        let nonblocking = call.nonblocking() || msg.flags & n::MSG_DONTWAIT != 0;
        self.transmit(msg.data, msg.flags, Some(call), nonblocking)
    }

    fn recv(&self, call: &NetCall, msg: RecvMsg) -> Result<Received, Errno> {
        let nonblocking = call.nonblocking() || msg.flags & n::MSG_DONTWAIT != 0;
        self.receive(msg.bufs, msg.flags, Some(call), nonblocking)
    }

    fn poll(&self) -> u32 {
        let st = self.state.lock().unwrap();
        match &st.phase {
            Phase::Listening { ready, .. } => {
                if ready.is_empty() {
                    0
                } else {
                    POLLIN | POLLRDNORM
                }
            }
            Phase::Connected { link, side, .. } => link.state.lock().unwrap().poll(*side),
            Phase::Connecting { .. } => 0,
            Phase::Closed => {
                // tcp_poll of a TCP_CLOSE socket.
                let mut mask = POLLHUP | POLLOUT | POLLWRNORM;
                if st.shut & 1 != 0 {
                    mask |= POLLIN | POLLRDNORM | POLLRDHUP;
                }
                if st.error.is_some() {
                    mask |= POLLERR;
                }
                mask
            }
        }
    }

    fn poll_queue(&self) -> &WaitQueue {
        &self.queue
    }

    fn ioctl(&self, _: &NetCall, mm: &MemoryManager, cmd: u32, arg: u64) -> Result<u64, Errno> {
        let st = self.state.lock().unwrap();
        let value = match (&st.phase, cmd) {
            (Phase::Listening { .. }, SIOCINQ | SIOCOUTQ | SIOCOUTQNSD) => return Err(Errno::EINVAL),
            (Phase::Connected { link, side, .. }, SIOCINQ) => link.state.lock().unwrap().data[1 - side].len() as i32,
            (_, SIOCINQ | SIOCOUTQ | SIOCOUTQNSD) => 0,
            (Phase::Connected { link, side, .. }, SIOCATMARK) => {
                let l = link.state.lock().unwrap();
                (l.urgent[1 - side].is_some() && l.data[1 - side].len() == 0) as i32
            }
            (_, SIOCATMARK) => 0,
            _ => return Err(Errno::ENOTTY),
        };
        drop(st);
        mm.write(arg, &value).map_err(|_| Errno::EFAULT)?;
        Ok(0)
    }

    fn readable_bytes(&self) -> Option<u64> {
        let st = self.state.lock().unwrap();
        match &st.phase {
            Phase::Listening { .. } => None,
            Phase::Connected { link, side, .. } => Some(link.state.lock().unwrap().data[1 - side].len() as u64),
            _ => Some(0),
        }
    }

    fn ino(&self) -> Option<u64> {
        Some(self.id)
    }

    fn describe(&self) -> String {
        format!("TCP{} state {}", if self.v6 { "v6" } else { "" }, self.tcp_state())
    }
}
