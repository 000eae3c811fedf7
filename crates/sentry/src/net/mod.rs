//! Sockets: the one seam every address family stands behind.
//!
//! A socket is a file ([`SocketFile`], the only `FileOps` of every family)
//! holding a [`Socket`], the family's own object. The syscall layer reads
//! the application's arguments (addresses as bytes, message headers,
//! control messages) and calls the socket; a family parses and checks the
//! addresses it takes and answers with Linux's errno. Families:
//! - [`unix`]: `AF_UNIX` stream, datagram and seqpacket sockets, named in
//!   the sandbox's file system or its abstract namespace.
//! - [`inet`]: `AF_INET`/`AF_INET6` TCP and UDP, on the sandbox's loopback
//!   or, with `--network=host`, on host sockets the sentry owns.
//! - [`netlink`]: `AF_NETLINK` `NETLINK_ROUTE`, describing the sandbox's
//!   interfaces.
//!
//! net sits beside fs and task: it uses fs's files and contexts, and never
//! reaches for a task; what a call needs of its caller comes in a
//! [`NetCall`].

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use linux_raw_sys::general as g;
use linux_raw_sys::net as n;
use memory::{GuestSlice, GuestSliceMut};

use crate::errno::Errno;
use crate::fs::{AsAny, Context, Dentry, FileOps, FsError, OpenFile, OpenFlags, Stat};
use crate::mm::MemoryManager;
use crate::waiter::WaitQueue;

pub mod accounting;
pub mod hostinet;
pub mod inet;
pub mod interfaces;
pub mod netlink;
pub mod options;
pub mod publish;
pub mod unix;

/// Largest socket address accepted (`sizeof(struct sockaddr_storage)`).
pub const SOCKADDR_MAX: usize = 128;

/// A process's identity as `SCM_CREDENTIALS` and `SO_PEERCRED` carry it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ucred {
    pub pid: i32,
    pub uid: u32,
    pub gid: u32,
}

/// What the caller's process offers a socket call beyond its context:
/// the names of its file system, for sockets bound to paths.
pub trait SocketNames {
    /// Creates a socket node at `path` (mode 0777 under the umask, as
    /// Linux's unix_bind) and returns its dentry; EADDRINUSE if the name
    /// exists.
    fn make_socket_node(&self, path: &[u8]) -> Result<Arc<Dentry>, Errno>;
    /// Finds the socket node at `path` for a connect or send, checking the
    /// caller may write it; ECONNREFUSED if it is no socket.
    fn find_socket_node(&self, path: &[u8]) -> Result<Arc<Dentry>, Errno>;
}

/// One socket call's caller.
pub struct NetCall<'a> {
    pub ctx: &'a Context<'a>,
    /// The caller's process id (the sandbox's) and real ids.
    pub ucred: Ucred,
    pub names: &'a dyn SocketNames,
    /// The file the call came through (its O_NONBLOCK, its identity).
    pub file: Option<&'a OpenFile>,
}

impl NetCall<'_> {
    /// True if the description is non-blocking.
    pub fn nonblocking(&self) -> bool {
        self.file.is_some_and(|f| f.flags().contains(OpenFlags::NONBLOCK))
    }
}

/// Ancillary data of one message, in either direction.
#[derive(Default)]
pub struct Control {
    /// `SCM_RIGHTS`: open files, in order.
    pub rights: Vec<Arc<OpenFile>>,
    /// `SCM_CREDENTIALS`.
    pub creds: Option<Ucred>,
    /// Messages of a protocol's level (IP_PKTINFO, IP_TTL...), received
    /// only: (level, type, data), written as they are.
    pub protocol: Vec<(i32, i32, Vec<u8>)>,
}

/// A message to send.
pub struct SendMsg<'a> {
    /// The data, gathered from application memory.
    pub data: &'a [GuestSlice<'a>],
    /// The destination, as the application gave it (sendto, msg_name).
    pub to: Option<&'a [u8]>,
    pub control: Control,
    /// MSG_* flags of the call.
    pub flags: u32,
}

impl SendMsg<'_> {
    pub fn len(&self) -> usize {
        self.data.iter().map(|s| s.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Where a received message goes.
pub struct RecvMsg<'a> {
    /// The buffers, scattered in application memory.
    pub bufs: &'a [GuestSliceMut<'a>],
    /// MSG_* flags of the call.
    pub flags: u32,
    /// True if the caller gave room for control messages.
    pub want_control: bool,
}

impl RecvMsg<'_> {
    pub fn len(&self) -> usize {
        self.bufs.iter().map(|s| s.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What a receive got.
#[derive(Default)]
pub struct Received {
    /// What the call returns: bytes copied, or with MSG_TRUNC on a
    /// datagram socket the datagram's whole length.
    pub ret: usize,
    /// The sender's address, if the family reports one.
    pub from: Option<Vec<u8>>,
    pub control: Control,
    /// msg_flags: MSG_TRUNC, MSG_EOR, MSG_CTRUNC (the syscall layer adds
    /// that one when control messages do not fit).
    pub flags: u32,
}

/// A socket of one family: the operations of Linux's `struct proto_ops`.
/// Every error is the errno Linux gives for the case.
pub trait Socket: AsAny {
    /// AF_* of the socket.
    fn family(&self) -> u32;
    /// SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET or SOCK_RAW.
    fn kind(&self) -> u32;
    fn protocol(&self) -> u32;

    fn bind(&self, call: &NetCall, addr: &[u8]) -> Result<(), Errno>;
    fn listen(&self, call: &NetCall, backlog: i32) -> Result<(), Errno> {
        let _ = (call, backlog);
        Err(Errno::EOPNOTSUPP)
    }
    /// Takes a connection; the new socket and its peer's address.
    fn accept(&self, call: &NetCall) -> Result<(Arc<dyn Socket>, Vec<u8>), Errno> {
        let _ = call;
        Err(Errno::EOPNOTSUPP)
    }
    fn connect(&self, call: &NetCall, addr: &[u8]) -> Result<(), Errno>;
    /// SHUT_RD, SHUT_WR or SHUT_RDWR (already checked).
    fn shutdown(&self, call: &NetCall, how: u32) -> Result<(), Errno>;
    /// getsockname.
    fn local_addr(&self) -> Result<Vec<u8>, Errno>;
    /// getpeername: ENOTCONN if there is no peer.
    fn peer_addr(&self) -> Result<Vec<u8>, Errno>;
    /// The option's value; `len` is the room the caller gave (the syscall
    /// layer copies at most that).
    fn getsockopt(&self, call: &NetCall, level: u32, name: u32, len: usize) -> Result<Vec<u8>, Errno>;
    fn setsockopt(&self, call: &NetCall, level: u32, name: u32, value: &[u8]) -> Result<(), Errno>;
    /// Sends a message; a short count only where Linux gives one.
    fn send(&self, call: &NetCall, msg: SendMsg) -> Result<usize, Errno>;
    fn recv(&self, call: &NetCall, msg: RecvMsg) -> Result<Received, Errno>;
    /// Readiness as poll reports it (POLLIN, POLLOUT, POLLHUP, POLLRDHUP,
    /// POLLERR...).
    fn poll(&self) -> u32;
    /// Woken whenever `poll` may have changed.
    fn poll_queue(&self) -> &WaitQueue;
    /// Socket ioctls beyond those of every socket (FIONBIO, FIOASYNC,
    /// SIOCGIF* are answered by the syscall layer).
    fn ioctl(&self, call: &NetCall, mm: &MemoryManager, cmd: u32, arg: u64) -> Result<u64, Errno> {
        let _ = (call, mm, cmd, arg);
        Err(Errno::ENOTTY)
    }
    /// Bytes ready to read (FIONREAD/SIOCINQ), if the family counts them.
    fn readable_bytes(&self) -> Option<u64> {
        None
    }
    /// The line for /proc/PID/fd and /proc/net: the family's own inode
    /// number is the file's.
    fn describe(&self) -> String {
        String::new()
    }
    /// The inode number the family gave the socket (so /proc/net lists it
    /// as its file shows), if it keeps one; else the file makes its own.
    fn ino(&self) -> Option<u64> {
        None
    }
}

impl dyn Socket {
    /// The socket as its family's type.
    pub fn downcast_ref<T: Socket>(&self) -> Option<&T> {
        self.as_any().downcast_ref::<T>()
    }
}

/// The device number of socket files (Linux's sockfs is anonymous too).
const SOCKFS_DEV: u64 = 0x08;

/// Socket inode numbers, as sockfs hands them out.
static NEXT_INO: AtomicU64 = AtomicU64::new(10_000);

/// A fresh socket inode number.
pub fn next_socket_ino() -> u64 {
    NEXT_INO.fetch_add(1, Ordering::Relaxed)
}

/// A socket as a file.
pub struct SocketFile {
    pub socket: Arc<dyn Socket>,
    ino: u64,
    /// The owner, as fstat reports it: who made the socket.
    owner: (u32, u32),
}

impl SocketFile {
    pub fn new(socket: Arc<dyn Socket>, owner: (u32, u32)) -> Arc<SocketFile> {
        let ino = socket.ino().unwrap_or_else(next_socket_ino);
        Arc::new(SocketFile { socket, ino, owner })
    }

    /// The inode number, as /proc/PID/fd shows it (`socket:[N]`).
    pub fn ino(&self) -> u64 {
        self.ino
    }
}

/// A context-free call for the file operations (read and write on a socket
/// are recv and send without flags or addresses).
struct NoNames;

impl SocketNames for NoNames {
    fn make_socket_node(&self, _: &[u8]) -> Result<Arc<Dentry>, Errno> {
        Err(Errno::EINVAL)
    }
    fn find_socket_node(&self, _: &[u8]) -> Result<Arc<Dentry>, Errno> {
        Err(Errno::EINVAL)
    }
}

/// The caller of a file operation as credentials name it.
fn caller_ucred(ctx: &Context) -> Ucred {
    Ucred { pid: ctx.caller.process_id(), uid: ctx.creds.uid.real, gid: ctx.creds.gid.real }
}

/// A socket's error as the file operations return it: EPIPE of a stream
/// socket as a broken pipe, so write(2) raises SIGPIPE (Linux's datagram
/// and seqpacket sockets give EPIPE without the signal).
fn errno_to_fs(socket: &dyn Socket, e: Errno) -> FsError {
    match e {
        Errno::EPIPE if socket.kind() == n::SOCK_STREAM => FsError::BrokenPipe,
        Errno::EPIPE => FsError::Host(e),
        e => FsError::from_errno(e),
    }
}

impl FileOps for SocketFile {
    fn read(&self, ctx: &Context, file: &OpenFile, bufs: &[GuestSliceMut<'_>], _: u64) -> Result<usize, FsError> {
        let call = NetCall { ctx, ucred: caller_ucred(ctx), names: &NoNames, file: Some(file) };
        let r = self
            .socket
            .recv(&call, RecvMsg { bufs, flags: 0, want_control: false })
            .map_err(|e| errno_to_fs(&*self.socket, e))?;
        Ok(r.ret)
    }
    fn write(&self, ctx: &Context, file: &OpenFile, bufs: &[GuestSlice<'_>], _: u64) -> Result<usize, FsError> {
        let call = NetCall { ctx, ucred: caller_ucred(ctx), names: &NoNames, file: Some(file) };
        self.socket
            .send(&call, SendMsg { data: bufs, to: None, control: Control::default(), flags: 0 })
            .map_err(|e| errno_to_fs(&*self.socket, e))
    }
    fn stat(&self) -> Result<Stat, FsError> {
        Ok(Stat {
            dev: SOCKFS_DEV,
            ino: self.ino,
            mode: g::S_IFSOCK | 0o777,
            nlink: 1,
            uid: self.owner.0,
            gid: self.owner.1,
            blksize: 4096,
            ..Default::default()
        })
    }
    fn poll(&self) -> u32 {
        self.socket.poll()
    }
    fn poll_queue(&self) -> Option<&WaitQueue> {
        Some(self.socket.poll_queue())
    }
    fn readable_bytes(&self) -> Option<u64> {
        self.socket.readable_bytes()
    }
    fn ioctl(&self, ctx: &Context, file: &OpenFile, mm: &MemoryManager, cmd: u32, arg: u64) -> Result<u64, FsError> {
        let call = NetCall { ctx, ucred: caller_ucred(ctx), names: &NoNames, file: Some(file) };
        match self.socket.ioctl(&call, mm, cmd, arg) {
            // As Linux's sock_do_ioctl: what the family does not answer,
            // the interface ioctls of every socket may, and an AF_INET
            // socket's also the address ones (inet_ioctl's devinet_ioctl).
            Err(Errno::ENOTTY) => {
                let answer = if self.socket.family() == n::AF_INET {
                    interfaces::interface_ioctl(&call, mm, cmd, arg)
                } else {
                    interfaces::device_ioctl(&call, mm, cmd, arg)
                };
                answer.unwrap_or(Err(Errno::ENOTTY)).map_err(|e| errno_to_fs(&*self.socket, e))
            }
            r => r.map_err(|e| errno_to_fs(&*self.socket, e)),
        }
    }
}

/// Socket types and the flags socket(2) and socketpair(2) accept with them.
pub const SOCK_TYPE_MASK: u32 = 0xf;

/// Two connected sockets (socketpair).
pub type SocketPair = (Arc<dyn Socket>, Arc<dyn Socket>);

/// The sandbox's network: what every socket of one family shares.
pub struct Network {
    /// How inet sockets reach out (`--network`).
    pub mode: NetworkMode,
    /// The bound netlink sockets, by port.
    pub netlink_ports: netlink::Ports,
    /// The sandbox's unix socket names and files in flight.
    pub unix: Arc<unix::UnixSpace>,
    /// The sandbox's own loopback stack (`--network=none`).
    pub loopback: Arc<inet::Loopback>,
    /// What the sockets' queued buffers are charged to.
    pub memory: Arc<accounting::SocketMemory>,
}

/// The /proc/net files made from the sandbox's interfaces.
const INTERFACE_FILES: &[&str] = &["dev", "if_inet6", "netstat", "route", "snmp"];

/// The /proc/net socket tables the families here keep.
const FAMILY_FILES: &[&str] = &["tcp", "tcp6", "udp", "udp6", "unix"];

/// The socket tables of /proc/net of the families with no sockets here yet:
/// their headers, as Linux writes them for a namespace without sockets.
const EMPTY_TABLES: &[(&str, &str)] = &[
    (
        "raw",
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n",
    ),
    (
        "raw6",
        "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n",
    ),
];

/// `--network`, as runsc and docker name the modes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NetworkMode {
    /// A sandbox stack with loopback only.
    #[default]
    None,
    /// inet sockets are host sockets the sentry owns.
    Host,
}

impl Network {
    /// The sandbox's network; socket buffers are charged to `mf`.
    pub fn new(mode: NetworkMode, mf: Arc<memory::MemoryFile>) -> Arc<Network> {
        let memory = accounting::SocketMemory::new(mf);
        Arc::new(Network {
            mode,
            netlink_ports: netlink::Ports::default(),
            unix: unix::UnixSpace::new(memory.clone()),
            loopback: inet::Loopback::new(memory.clone()),
            memory,
        })
    }

    /// The names below /proc/net.
    pub fn proc_net_names(&self) -> Vec<String> {
        let mut v: Vec<String> = INTERFACE_FILES
            .iter()
            .chain(FAMILY_FILES)
            .chain(EMPTY_TABLES.iter().map(|(n, _)| n))
            .map(|s| s.to_string())
            .collect();
        v.sort();
        v
    }

    /// The contents of /proc/net/`name`, None if there is no such file:
    /// the interfaces' files, and each family's table of its sockets (a
    /// family answers its own names here; one without sockets in the
    /// sandbox shows the header alone).
    pub fn proc_net_file(&self, name: &str) -> Option<String> {
        match name {
            // On the host's network the interfaces are the host's; the
            // sentry's own /proc/net is of the host's network namespace.
            "dev" | "if_inet6" | "route" if self.mode == NetworkMode::Host => {
                std::fs::read_to_string(format!("/proc/net/{name}")).ok()
            }
            "dev" => Some(interfaces::proc_net_dev()),
            "if_inet6" => Some(interfaces::proc_net_if_inet6()),
            "route" => Some(interfaces::proc_net_route()),
            "snmp" => Some(interfaces::proc_net_snmp()),
            "netstat" => Some(interfaces::proc_net_netstat()),
            "unix" => Some(self.unix.proc_net_unix()),
            "tcp" => Some(self.loopback.proc_tcp(false)),
            "tcp6" => Some(self.loopback.proc_tcp(true)),
            "udp" => Some(self.loopback.proc_udp(false)),
            "udp6" => Some(self.loopback.proc_udp(true)),
            _ => EMPTY_TABLES.iter().find(|(n, _)| *n == name).map(|(_, h)| h.to_string()),
        }
    }

    /// socket(2): a new socket of `family`, `kind` (SOCK_* without flags)
    /// and `protocol`.
    pub fn create(
        self: &Arc<Self>,
        call: &NetCall,
        family: u32,
        kind: u32,
        protocol: u32,
    ) -> Result<Arc<dyn Socket>, Errno> {
        match family {
            // Raw IP sockets and packet sockets are refused as runsc refuses
            // them by default: the sandbox holds no CAP_NET_RAW for them.
            n::AF_INET | n::AF_INET6 if kind == n::SOCK_RAW => Err(Errno::EPERM),
            n::AF_UNIX => unix::UnixSocket::create(&self.unix, kind, protocol),
            n::AF_INET | n::AF_INET6 if self.mode == NetworkMode::Host => hostinet::create(family, kind, protocol),
            n::AF_INET | n::AF_INET6 => self.loopback.create(call, family == n::AF_INET6, kind, protocol),
            n::AF_NETLINK => netlink::create(self, kind, protocol),
            n::AF_PACKET => Err(Errno::EPERM),
            // The families Linux has but the sandbox does not (Bluetooth,
            // AF_ALG, vsock, CAN, TIPC...).
            _ => Err(Errno::EAFNOSUPPORT),
        }
    }

    /// socketpair(2): two connected sockets.
    pub fn create_pair(
        self: &Arc<Self>,
        call: &NetCall,
        family: u32,
        kind: u32,
        protocol: u32,
    ) -> Result<SocketPair, Errno> {
        match family {
            n::AF_UNIX => unix::UnixSocket::create_pair(&self.unix, call, kind, protocol),
            // Linux: socketpair on other families is EOPNOTSUPP once the
            // socket exists.
            n::AF_INET | n::AF_INET6 => Err(Errno::EOPNOTSUPP),
            n::AF_NETLINK => netlink::create(self, kind, protocol).and(Err(Errno::EOPNOTSUPP)),
            _ => Err(Errno::EAFNOSUPPORT),
        }
    }
}
