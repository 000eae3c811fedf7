//! Socket system calls: the application's arguments (addresses, message
//! headers, control messages) read and written as Linux's net/socket.c
//! does, and the work handed to the socket's family through
//! [`crate::net::Socket`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use linux_raw_sys::general as g;
use linux_raw_sys::net as n;
use memory::{GuestSlice, GuestSliceMut};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use super::io::{MAX_RW, Segment, pin_step, read_iov};
use super::{Args, SysError, SysResult, file};
use crate::errno::Errno;
use crate::fs::{Dentry, FileType, OpenFile, OpenFlags, namei};
use crate::net::{Control, NetCall, Received, RecvMsg, SOCKADDR_MAX, SendMsg, Socket, SocketFile, SocketNames, Ucred};
use crate::task::Task;

/// Most descriptors one SCM_RIGHTS message carries (Linux's SCM_MAX_FD).
const SCM_MAX_FD: usize = 253;
/// Most messages one sendmmsg or recvmmsg moves (UIO_MAXIOV).
const MMSG_MAX: u32 = 1024;
/// Most bytes of option value read (larger values are no option's).
const OPTION_MAX: usize = 4096;

/// `struct user_msghdr`.
#[repr(C)]
#[derive(Clone, Copy, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
struct MsgHdr {
    name: u64,
    namelen: u32,
    _pad0: u32,
    iov: u64,
    iovlen: u64,
    control: u64,
    controllen: u64,
    flags: u32,
    _pad1: u32,
}

/// `struct cmsghdr`.
#[repr(C)]
#[derive(Clone, Copy, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
struct CmsgHdr {
    len: u64,
    level: i32,
    kind: i32,
}

const CMSG_HDR: usize = std::mem::size_of::<CmsgHdr>();

/// `struct ucred`.
#[repr(C)]
#[derive(Clone, Copy, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
struct UcredAbi {
    pid: i32,
    uid: u32,
    gid: u32,
}

const fn cmsg_align(len: usize) -> usize {
    (len + 7) & !7
}

const fn cmsg_space(len: usize) -> usize {
    CMSG_HDR + cmsg_align(len)
}

/// The sandbox's file system as a socket call reaches it.
struct TaskNames<'a>(&'a Task);

impl SocketNames for TaskNames<'_> {
    fn make_socket_node(&self, path: &[u8]) -> Result<Arc<Dentry>, Errno> {
        let task = self.0;
        let umask = task.fs.lock().unwrap().umask;
        let mode = g::S_IFSOCK | (0o777 & !umask);
        let ctx = task.ctx();
        let r = task.with_resolver(|r| {
            let parent = namei::parent_of(r, None, path)?;
            namei::create_node(r, &ctx, &parent, false, |dir, name| {
                let node = namei::new_node(&parent.dir, &ctx.creds, mode, 0)?;
                dir.mknod(&ctx, name, node)
            })
        });
        r.map_err(|e| match e {
            crate::fs::FsError::Exists => Errno::EADDRINUSE,
            e => e.into(),
        })
    }

    fn find_socket_node(&self, path: &[u8]) -> Result<Arc<Dentry>, Errno> {
        let task = self.0;
        let d = task.with_resolver(|r| r.resolve(None, path, crate::fs::Lookup::FOLLOW))?;
        crate::fs::permission(&d, &task.tg.creds(), crate::fs::MAY_WRITE)?;
        if d.file_type() != FileType::Socket {
            return Err(Errno::ECONNREFUSED);
        }
        Ok(d)
    }
}

/// The caller of a socket call, for the family.
fn ucred_of(task: &Task) -> Ucred {
    let c = task.tg.creds();
    Ucred { pid: task.tg.tgid, uid: c.uid.real, gid: c.gid.real }
}

/// Runs `f` with the call's caller.
fn with_call<R>(task: &Task, f: Option<&OpenFile>, run: impl FnOnce(&NetCall) -> R) -> R {
    let ctx = task.ctx();
    let names = TaskNames(task);
    let call = NetCall { ctx: &ctx, ucred: ucred_of(task), names: &names, file: f };
    run(&call)
}

/// The socket behind descriptor `fd`: EBADF for no descriptor (or an
/// O_PATH one), ENOTSOCK for another kind of file.
fn socket_of(task: &Task, fd: i32) -> Result<(Arc<OpenFile>, Arc<dyn Socket>), SysError> {
    let f = file(task, fd as u32 as u64)?;
    if f.flags().contains(OpenFlags::PATH) {
        return Err(Errno::EBADF.into());
    }
    let s = f.ops.downcast_ref::<SocketFile>().ok_or(Errno::ENOTSOCK)?.socket.clone();
    Ok((f, s))
}

/// Reads a socket address the application passes (move_addr_to_kernel).
fn read_addr(task: &Task, addr: u64, len: u32) -> Result<Vec<u8>, SysError> {
    let len = len as i32;
    if len < 0 || len as usize > SOCKADDR_MAX {
        return Err(Errno::EINVAL.into());
    }
    let mut buf = vec![0u8; len as usize];
    if len > 0 {
        task.mm.copy_in(addr, &mut buf)?;
    }
    Ok(buf)
}

/// Writes an address back (move_addr_to_user): at most the room the
/// caller's length gives, then the whole length into `*len_ptr`.
fn write_addr(task: &Task, addr: u64, len_ptr: u64, value: &[u8]) -> Result<(), SysError> {
    if len_ptr == 0 {
        return Ok(());
    }
    let room: i32 = task.mm.read(len_ptr)?;
    if room < 0 {
        return Err(Errno::EINVAL.into());
    }
    let k = value.len().min(room as usize);
    if k > 0 {
        task.mm.copy_out(addr, &value[..k])?;
    }
    task.mm.write(len_ptr, &(value.len() as u32))?;
    Ok(())
}

/// Installs a new socket as a descriptor.
fn install(task: &Task, socket: Arc<dyn Socket>, flags: u32) -> Result<i32, SysError> {
    let creds = task.tg.creds();
    let ops = SocketFile::new(socket, (creds.uid.effective, creds.gid.effective));
    let mut oflags = OpenFlags::RDWR;
    if flags & g::O_NONBLOCK != 0 {
        oflags |= OpenFlags::NONBLOCK;
    }
    let f = OpenFile::new(ops, None, oflags);
    Ok(task.files.install(f, flags & g::O_CLOEXEC != 0, 0)?)
}

/// The type argument of socket and socketpair: the kind and its flags.
fn split_type(ty: i32) -> Result<(u32, u32), SysError> {
    let ty = ty as u32;
    let flags = ty & !crate::net::SOCK_TYPE_MASK;
    if flags & !(g::O_NONBLOCK | g::O_CLOEXEC) != 0 {
        return Err(Errno::EINVAL.into());
    }
    let kind = ty & crate::net::SOCK_TYPE_MASK;
    // SOCK_STREAM (1) to SOCK_PACKET (10).
    if kind == 0 || kind > 10 {
        return Err(Errno::EINVAL.into());
    }
    Ok((kind, flags))
}

fn family_arg(v: i32) -> Result<u32, SysError> {
    if v < 0 || v as u32 >= n::AF_MAX { Err(Errno::EAFNOSUPPORT.into()) } else { Ok(v as u32) }
}

pub fn socket(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let family = family_arg(a.int(0))?;
    let (kind, flags) = split_type(a.int(1))?;
    let net = task.kernel.net.clone();
    let s = with_call(task, None, |call| net.create(call, family, kind, a.uint(2)))?;
    Ok(install(task, s, flags)? as u64)
}

pub fn socketpair(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let family = family_arg(a.int(0))?;
    let (kind, flags) = split_type(a.int(1))?;
    let net = task.kernel.net.clone();
    let (s1, s2) = with_call(task, None, |call| net.create_pair(call, family, kind, a.uint(2)))?;
    let fd1 = install(task, s1, flags)?;
    let fd2 = match install(task, s2, flags) {
        Ok(fd) => fd,
        Err(e) => {
            let _ = task.files.remove(fd1);
            return Err(e);
        }
    };
    if let Err(e) = task.mm.write(a.ptr(3), &[fd1, fd2]) {
        let _ = task.files.remove(fd1);
        let _ = task.files.remove(fd2);
        return Err(e.into());
    }
    Ok(0)
}

pub fn bind(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (f, s) = socket_of(task, a.int(0))?;
    let addr = read_addr(task, a.ptr(1), a.uint(2))?;
    with_call(task, Some(&f), |call| s.bind(call, &addr))?;
    Ok(0)
}

pub fn listen(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (f, s) = socket_of(task, a.int(0))?;
    // As Linux: a backlog above net.core.somaxconn (a negative one taken
    // as unsigned) is cut to it.
    let backlog = (a.int(1) as u32).min(SOMAXCONN) as i32;
    with_call(task, Some(&f), |call| s.listen(call, backlog))?;
    Ok(0)
}

/// net.core.somaxconn.
pub const SOMAXCONN: u32 = 4096;

fn accept_common(task: &mut Task, fd: i32, addr: u64, len_ptr: u64, flags: u32) -> SysResult {
    if flags & !(g::O_NONBLOCK | g::O_CLOEXEC) != 0 {
        return Err(Errno::EINVAL.into());
    }
    let (f, s) = socket_of(task, fd)?;
    let (new, peer) = with_call(task, Some(&f), |call| s.accept(call))?;
    let nfd = install(task, new, flags)?;
    if addr != 0
        && let Err(e) = write_addr(task, addr, len_ptr, &peer)
    {
        let _ = task.files.remove(nfd);
        return Err(e);
    }
    Ok(nfd as u64)
}

pub fn accept(task: &mut Task, a: &[u64; 6]) -> SysResult {
    accept_common(task, a.int(0), a.ptr(1), a.ptr(2), 0)
}

pub fn accept4(task: &mut Task, a: &[u64; 6]) -> SysResult {
    accept_common(task, a.int(0), a.ptr(1), a.ptr(2), a.uint(3))
}

pub fn connect(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (f, s) = socket_of(task, a.int(0))?;
    let addr = read_addr(task, a.ptr(1), a.uint(2))?;
    with_call(task, Some(&f), |call| s.connect(call, &addr))?;
    Ok(0)
}

pub fn getsockname(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (_, s) = socket_of(task, a.int(0))?;
    let addr = s.local_addr()?;
    write_addr(task, a.ptr(1), a.ptr(2), &addr)?;
    Ok(0)
}

pub fn getpeername(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (_, s) = socket_of(task, a.int(0))?;
    let addr = s.peer_addr()?;
    write_addr(task, a.ptr(1), a.ptr(2), &addr)?;
    Ok(0)
}

pub fn shutdown(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (f, s) = socket_of(task, a.int(0))?;
    let how = a.uint(1);
    if how > n::SHUT_RDWR {
        return Err(Errno::EINVAL.into());
    }
    with_call(task, Some(&f), |call| s.shutdown(call, how))?;
    Ok(0)
}

pub fn getsockopt(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (f, s) = socket_of(task, a.int(0))?;
    let (level, name, val, len_ptr) = (a.uint(1), a.uint(2), a.ptr(3), a.ptr(4));
    let room: i32 = task.mm.read(len_ptr)?;
    if room < 0 {
        return Err(Errno::EINVAL.into());
    }
    let room = room as usize;
    // What every socket answers alike.
    let value = match (level, name) {
        (n::SOL_SOCKET, n::SO_TYPE) => (s.kind() as i32).to_ne_bytes().to_vec(),
        (n::SOL_SOCKET, n::SO_DOMAIN) => (s.family() as i32).to_ne_bytes().to_vec(),
        (n::SOL_SOCKET, n::SO_PROTOCOL) => (s.protocol() as i32).to_ne_bytes().to_vec(),
        _ => with_call(task, Some(&f), |call| s.getsockopt(call, level, name, room))?,
    };
    let k = value.len().min(room);
    task.mm.copy_out(val, &value[..k])?;
    task.mm.write(len_ptr, &(k as u32))?;
    Ok(0)
}

pub fn setsockopt(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (f, s) = socket_of(task, a.int(0))?;
    let (level, name, val, len) = (a.uint(1), a.uint(2), a.ptr(3), a.int(4));
    if len < 0 {
        return Err(Errno::EINVAL.into());
    }
    let mut value = vec![0u8; (len as usize).min(OPTION_MAX)];
    task.mm.copy_in(val, &mut value)?;
    with_call(task, Some(&f), |call| s.setsockopt(call, level, name, &value))?;
    Ok(0)
}

/// Reads the control messages of a sendmsg (__scm_send): descriptors and
/// credentials at SOL_SOCKET; other levels are the protocol's, and no
/// family here takes any.
fn read_control(task: &Task, addr: u64, len: usize) -> Result<Control, SysError> {
    let mut control = Control::default();
    if len == 0 {
        return Ok(control);
    }
    if len > i32::MAX as usize {
        return Err(Errno::ENOBUFS.into());
    }
    let mut buf = vec![0u8; len];
    task.mm.copy_in(addr, &mut buf)?;
    let mut at = 0;
    while at + CMSG_HDR <= len {
        let hdr = CmsgHdr::read_from_bytes(&buf[at..at + CMSG_HDR]).expect("a header's bytes");
        let clen = hdr.len as usize;
        if clen < CMSG_HDR || clen > len - at {
            return Err(Errno::EINVAL.into());
        }
        let data = &buf[at + CMSG_HDR..at + clen];
        if hdr.level == n::SOL_SOCKET as i32 {
            match hdr.kind as u32 {
                n::SCM_RIGHTS => {
                    let count = data.len() / 4;
                    if count == 0 {
                        // An empty list is no list (Linux's scm_fp_copy).
                    } else if count + control.rights.len() > SCM_MAX_FD {
                        return Err(Errno::EINVAL.into());
                    }
                    for c in data.chunks_exact(4) {
                        let fd = i32::from_ne_bytes(c.try_into().expect("four bytes"));
                        let f = task.files.get(fd).map_err(|_| Errno::EBADF)?;
                        if f.flags().contains(OpenFlags::PATH) {
                            return Err(Errno::EBADF.into());
                        }
                        control.rights.push(f);
                    }
                }
                n::SCM_CREDENTIALS => {
                    if data.len() != std::mem::size_of::<UcredAbi>() {
                        return Err(Errno::EINVAL.into());
                    }
                    let u = UcredAbi::read_from_bytes(data).expect("a ucred's bytes");
                    check_credentials(task, &u)?;
                    control.creds = Some(Ucred { pid: u.pid, uid: u.uid, gid: u.gid });
                }
                _ => return Err(Errno::EINVAL.into()),
            }
        }
        at += cmsg_align(clen);
    }
    Ok(control)
}

/// SCM_CREDENTIALS may name only the sender's own process and ids, unless
/// it holds the capability to claim others (Linux's scm_check_creds).
fn check_credentials(task: &Task, u: &UcredAbi) -> Result<(), SysError> {
    use crate::auth::cap;
    let c = task.tg.creds();
    let pid_ok = u.pid == task.tg.tgid || c.has(cap::SYS_ADMIN);
    let uid_ok = [c.uid.real, c.uid.effective, c.uid.saved].contains(&u.uid) || c.has(cap::SETUID);
    let gid_ok = [c.gid.real, c.gid.effective, c.gid.saved].contains(&u.gid) || c.has(cap::SETGID);
    if pid_ok && uid_ok && gid_ok { Ok(()) } else { Err(Errno::EPERM.into()) }
}

/// Writes received control messages into the caller's buffer
/// (put_cmsg, scm_detach_fds); returns the bytes used and MSG_CTRUNC if
/// something did not fit.
fn write_control(
    task: &Task,
    addr: u64,
    room: usize,
    control: Control,
    cloexec: bool,
) -> Result<(usize, u32), SysError> {
    let mut used = 0;
    let mut flags = 0;
    if let Some(c) = control.creds {
        let data = UcredAbi { pid: c.pid, uid: c.uid, gid: c.gid };
        let clen = CMSG_HDR + std::mem::size_of::<UcredAbi>();
        if room - used < CMSG_HDR {
            flags |= n::MSG_CTRUNC;
        } else {
            let mut bytes = CmsgHdr { len: clen as u64, level: n::SOL_SOCKET as i32, kind: n::SCM_CREDENTIALS as i32 }
                .as_bytes()
                .to_vec();
            bytes.extend_from_slice(data.as_bytes());
            let k = clen.min(room - used);
            if k < clen {
                flags |= n::MSG_CTRUNC;
            }
            task.mm.copy_out(addr + used as u64, &bytes[..k])?;
            used += cmsg_space(std::mem::size_of::<UcredAbi>()).min(room - used);
        }
    }
    // The protocol's own (an inet socket carries no rights).
    for (level, kind, data) in &control.protocol {
        let clen = CMSG_HDR + data.len();
        if room - used < CMSG_HDR {
            flags |= n::MSG_CTRUNC;
            break;
        }
        let k = clen.min(room - used);
        if k < clen {
            flags |= n::MSG_CTRUNC;
        }
        let mut bytes = CmsgHdr { len: k as u64, level: *level, kind: *kind }.as_bytes().to_vec();
        bytes.extend_from_slice(data);
        task.mm.copy_out(addr + used as u64, &bytes[..k])?;
        used += cmsg_space(data.len()).min(room - used);
    }
    if !control.rights.is_empty() {
        let left = room - used;
        let fit = if left <= CMSG_HDR { 0 } else { (left - CMSG_HDR) / 4 };
        let mut fds: Vec<i32> = Vec::new();
        for f in control.rights.iter().take(fit) {
            match task.files.install(f.clone(), cloexec, 0) {
                Ok(fd) => fds.push(fd),
                Err(_) => break,
            }
        }
        if !fds.is_empty() {
            let clen = CMSG_HDR + 4 * fds.len();
            let mut bytes = CmsgHdr { len: clen as u64, level: n::SOL_SOCKET as i32, kind: n::SCM_RIGHTS as i32 }
                .as_bytes()
                .to_vec();
            for fd in &fds {
                bytes.extend_from_slice(&fd.to_ne_bytes());
            }
            if let Err(e) = task.mm.copy_out(addr + used as u64, &bytes) {
                for fd in fds {
                    let _ = task.files.remove(fd);
                }
                return Err(e.into());
            }
            used += cmsg_space(4 * fds.len()).min(left);
        }
        if fds.len() < control.rights.len() {
            flags |= n::MSG_CTRUNC;
        }
    }
    Ok((used, flags))
}

/// Sends one message whose header is `hdr` (the data in `segs`). A stream
/// socket's large message goes in steps; the count sent so far is the
/// answer once some went.
fn send_one(
    task: &mut Task,
    f: &OpenFile,
    s: &Arc<dyn Socket>,
    segs: &[Segment],
    to: Option<&[u8]>,
    mut control: Control,
    flags: u32,
) -> SysResult {
    let stream = s.kind() == n::SOCK_STREAM;
    let total: usize = segs.iter().map(|s| s.1).sum();
    let mut done = 0;
    loop {
        let (pins, len, complete) = match pin_step(task, segs, done, false) {
            Ok(step) => step,
            Err(e) if done == 0 => return Err(e),
            Err(_) => return Ok(done as u64),
        };
        if !stream && !complete && len < total {
            return Err(Errno::EFAULT.into());
        }
        let slices: Vec<GuestSlice> = pins.iter().flat_map(|p| p.slices()).collect();
        let msg = SendMsg { data: &slices, to, control: std::mem::take(&mut control), flags };
        let r = with_call(task, Some(f), |call| s.send(call, msg));
        drop(slices);
        drop(pins);
        match r {
            Ok(n) => {
                done += n;
                if !stream || n < len || !complete || done >= total {
                    return Ok(done as u64);
                }
            }
            Err(Errno::EPIPE) if done == 0 => {
                // Only stream sockets raise it, as Linux's.
                if flags & n::MSG_NOSIGNAL == 0 && stream {
                    task.signal_self(g::SIGPIPE);
                }
                return Err(Errno::EPIPE.into());
            }
            Err(e) if done == 0 => return Err(e.into()),
            Err(_) => return Ok(done as u64),
        }
    }
}

/// Receives one message into `segs`: the result and the bytes stored.
fn recv_one(
    task: &mut Task,
    f: &OpenFile,
    s: &Arc<dyn Socket>,
    segs: &[Segment],
    flags: u32,
    want_control: bool,
) -> Result<Received, SysError> {
    let mut pins = if segs.iter().any(|s| s.1 > 0) {
        match pin_step(task, segs, 0, true) {
            Ok((pins, _, _)) => pins,
            Err(e) => return Err(e),
        }
    } else {
        Vec::new()
    };
    let slices: Vec<GuestSliceMut> = pins.iter_mut().flat_map(|p| p.slices_mut()).collect();
    let r = with_call(task, Some(f), |call| s.recv(call, RecvMsg { bufs: &slices, flags, want_control }));
    Ok(r?)
}

/// The data buffers of a plain send or recv.
fn one_buffer(addr: u64, len: usize) -> Vec<Segment> {
    vec![(addr, len.min(MAX_RW))]
}

pub fn sendto(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (f, s) = socket_of(task, a.int(0))?;
    let to = if a.ptr(4) != 0 { Some(read_addr(task, a.ptr(4), a.uint(5))?) } else { None };
    let segs = one_buffer(a.ptr(1), a.size(2));
    send_one(task, &f, &s, &segs, to.as_deref(), Control::default(), a.uint(3))
}

pub fn recvfrom(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (f, s) = socket_of(task, a.int(0))?;
    let segs = one_buffer(a.ptr(1), a.size(2));
    let r = recv_one(task, &f, &s, &segs, a.uint(3), false)?;
    if a.ptr(4) != 0 {
        match &r.from {
            Some(from) => write_addr(task, a.ptr(4), a.ptr(5), from)?,
            // No address: the length says so.
            None if a.ptr(5) != 0 => task.mm.write(a.ptr(5), &0u32)?,
            None => {}
        }
    }
    Ok(r.ret as u64)
}

/// Reads a message header and the iovecs it names.
fn read_msghdr(task: &Task, addr: u64) -> Result<(MsgHdr, Vec<Segment>), SysError> {
    let hdr: MsgHdr = task.mm.read(addr)?;
    if hdr.iovlen > 1024 {
        return Err(Errno::EMSGSIZE.into());
    }
    let segs = read_iov(task, hdr.iov, hdr.iovlen)?;
    Ok((hdr, segs))
}

fn sendmsg_one(task: &mut Task, f: &OpenFile, s: &Arc<dyn Socket>, addr: u64, flags: u32) -> SysResult {
    let (hdr, segs) = read_msghdr(task, addr)?;
    // A longer name is cut to sockaddr_storage's size, not refused
    // (copy_msghdr_from_user); a negative one is EINVAL.
    if (hdr.namelen as i32) < 0 {
        return Err(Errno::EINVAL.into());
    }
    let namelen = hdr.namelen.min(SOCKADDR_MAX as u32);
    let to = if hdr.name != 0 && namelen != 0 { Some(read_addr(task, hdr.name, namelen)?) } else { None };
    let control = read_control(task, hdr.control, hdr.controllen as usize)?;
    send_one(task, f, s, &segs, to.as_deref(), control, flags)
}

pub fn sendmsg(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (f, s) = socket_of(task, a.int(0))?;
    sendmsg_one(task, &f, &s, a.ptr(1), a.uint(2))
}

fn recvmsg_one(task: &mut Task, f: &OpenFile, s: &Arc<dyn Socket>, addr: u64, flags: u32) -> SysResult {
    let (mut hdr, segs) = read_msghdr(task, addr)?;
    if (hdr.namelen as i32) < 0 {
        return Err(Errno::EINVAL.into());
    }
    let room = hdr.controllen as usize;
    let r = recv_one(task, f, s, &segs, flags & !n::MSG_CMSG_CLOEXEC, room > 0 && hdr.control != 0)?;
    // msg_flags starts as the caller's MSG_CMSG_CLOEXEC (____sys_recvmsg),
    // and the family adds its own.
    let mut out_flags = r.flags | (flags & n::MSG_CMSG_CLOEXEC);
    if hdr.name != 0 {
        match &r.from {
            Some(from) => {
                let k = from.len().min(hdr.namelen as usize);
                task.mm.copy_out(hdr.name, &from[..k])?;
                hdr.namelen = from.len() as u32;
            }
            None => hdr.namelen = 0,
        }
    } else {
        hdr.namelen = 0;
    }
    let (used, cflags) = if hdr.control != 0 {
        write_control(task, hdr.control, room, r.control, flags & n::MSG_CMSG_CLOEXEC != 0)?
    } else {
        (
            0,
            if r.control.rights.is_empty() && r.control.creds.is_none() && r.control.protocol.is_empty() {
                0
            } else {
                n::MSG_CTRUNC
            },
        )
    };
    out_flags |= cflags;
    hdr.controllen = used as u64;
    hdr.flags = out_flags;
    task.mm.write(addr, &hdr)?;
    Ok(r.ret as u64)
}

pub fn recvmsg(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (f, s) = socket_of(task, a.int(0))?;
    recvmsg_one(task, &f, &s, a.ptr(1), a.uint(2))
}

/// recvmmsg: block for the first message only.
const MSG_WAITFORONE: u32 = 0x10000;

/// Size of `struct mmsghdr`: a msghdr and the count moved.
const MMSGHDR: u64 = std::mem::size_of::<MsgHdr>() as u64 + 8;

pub fn sendmmsg(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (f, s) = socket_of(task, a.int(0))?;
    let (vec, count, flags) = (a.ptr(1), a.uint(2).min(MMSG_MAX), a.uint(3));
    let mut sent = 0u32;
    while sent < count {
        let at = vec + sent as u64 * MMSGHDR;
        match sendmsg_one(task, &f, &s, at, flags) {
            Ok(len) => task.mm.write(at + std::mem::size_of::<MsgHdr>() as u64, &(len as u32))?,
            Err(e) if sent == 0 => return Err(e),
            Err(_) => break,
        }
        sent += 1;
    }
    Ok(sent as u64)
}

pub fn recvmmsg(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (f, s) = socket_of(task, a.int(0))?;
    let (vec, count, mut flags, timeout) = (a.ptr(1), a.uint(2).min(MMSG_MAX), a.uint(3), a.ptr(4));
    let deadline = if timeout != 0 {
        let ts: g::__kernel_timespec = task.mm.read_pod(timeout)?;
        if ts.tv_sec < 0 || !(0..1_000_000_000).contains(&ts.tv_nsec) {
            return Err(Errno::EINVAL.into());
        }
        Some(Instant::now() + Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
    } else {
        None
    };
    let mut got = 0u32;
    while got < count {
        let at = vec + got as u64 * MMSGHDR;
        match recvmsg_one(task, &f, &s, at, flags & !MSG_WAITFORONE) {
            Ok(len) => task.mm.write(at + std::mem::size_of::<MsgHdr>() as u64, &(len as u32))?,
            Err(e) if got == 0 => return Err(e),
            Err(_) => break,
        }
        got += 1;
        if flags & MSG_WAITFORONE != 0 {
            flags |= n::MSG_DONTWAIT;
        }
        // As Linux, the timeout is checked between messages only.
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
    }
    if let Some(d) = deadline {
        let left = d.saturating_duration_since(Instant::now());
        let ts = g::__kernel_timespec { tv_sec: left.as_secs() as i64, tv_nsec: left.subsec_nanos() as i64 };
        task.mm.write_pod(timeout, &ts)?;
    }
    Ok(got as u64)
}
