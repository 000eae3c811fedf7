//! POSIX message queues: named queues of prioritised messages, opened as
//! descriptors (mq_open), which poll and epoll watch like any file.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use memory::GuestSliceMut;

use crate::auth::Creds;
use crate::errno::Errno;
use crate::fs::{Context, FileOps, FsError, OpenFile, POLLIN, POLLOUT, POLLRDNORM, POLLWRNORM, Stat};
use crate::waiter::{BlockError, Blocker, WaitQueue, block_on};

/// Linux's defaults (/proc/sys/fs/mqueue): messages and message size a
/// queue gets without attributes, the most an unprivileged caller may ask
/// for, and the queues there may be.
pub const MSG_DEFAULT: i64 = 10;
pub const MSGSIZE_DEFAULT: i64 = 8192;
pub const MSG_MAX: i64 = 10;
pub const MSGSIZE_MAX: i64 = 8192;
pub const QUEUES_MAX: usize = 256;
/// What CAP_SYS_RESOURCE may ask for at most (HARD_MSGMAX, HARD_MSGSIZEMAX).
const HARD_MSG_MAX: i64 = 65536;
const HARD_MSGSIZE_MAX: i64 = 16 << 20;
/// Priorities are below this.
pub const MQ_PRIO_MAX: u32 = 32768;
const NAME_MAX: usize = 255;
const CAP_SYS_RESOURCE: u32 = 24;

/// How the registered process hears of a message arriving at an empty
/// queue: its sender's pid and uid are passed on. None: SIGEV_NONE.
pub type Notifier = Box<dyn Fn(i32, u32) + Send + Sync>;

struct Notification {
    owner: i32,
    notify: Option<Notifier>,
    /// Told when the registration is taken back unused.
    removed: Option<Notifier>,
    /// How (the sigevent's sigev_notify) and which signal, for the status.
    how: i32,
    signo: u32,
}

/// A registration mq_notify asks for: how (SIGEV_*), the signal, and
/// what to call when a message arrives (None: SIGEV_NONE).
pub struct Registration {
    pub how: i32,
    pub signo: u32,
    pub notify: Option<Notifier>,
    /// What to call if the registration is removed without firing.
    pub removed: Option<Notifier>,
}

struct State {
    /// Kept highest priority first, oldest first within a priority.
    messages: Vec<(u32, Vec<u8>)>,
    bytes: usize,
    notification: Option<Notification>,
    /// Receivers asleep in mq_receive: a notification is sent only when
    /// none waits.
    receivers: usize,
}

pub struct PosixQueue {
    /// What the queue holds against its creator's RLIMIT_MSGQUEUE, given
    /// back when it goes.
    _charge: Charge,
    uid: u32,
    gid: u32,
    mode: u32,
    max_messages: usize,
    message_size: usize,
    ino: u64,
    state: Mutex<State>,
    queue: WaitQueue,
}

/// The attributes mq_open takes and mq_getsetattr answers.
#[derive(Clone, Copy, Debug, Default)]
pub struct Attr {
    pub flags: i64,
    pub max_messages: i64,
    pub message_size: i64,
    pub current: i64,
}

impl PosixQueue {
    pub fn attr(&self) -> Attr {
        Attr {
            flags: 0,
            max_messages: self.max_messages as i64,
            message_size: self.message_size as i64,
            current: self.state.lock().unwrap().messages.len() as i64,
        }
    }

    /// mq_timedsend of a message already read. Waits (unless
    /// `nonblocking`) while the queue is full, until `deadline`
    /// (ETIMEDOUT); interrupted, restarts or fails with EINTR as the
    /// handler says.
    pub fn send(
        &self,
        data: Vec<u8>,
        priority: u32,
        nonblocking: bool,
        deadline: Option<Instant>,
        sender: (i32, u32),
        blocker: &dyn Blocker,
    ) -> Result<(), Errno> {
        if priority >= MQ_PRIO_MAX {
            return Err(Errno::EINVAL);
        }
        if data.len() > self.message_size {
            return Err(Errno::EMSGSIZE);
        }
        let mut data = Some(data);
        let mut put = || {
            let mut st = self.state.lock().unwrap();
            if st.messages.len() >= self.max_messages {
                return None;
            }
            let d = data.take().unwrap_or_default();
            let at = st.messages.iter().position(|(p, _)| *p < priority).unwrap_or(st.messages.len());
            st.bytes += d.len();
            st.messages.insert(at, (priority, d));
            // A message arriving at an empty queue no receiver waits for
            // is announced once, and the registration ends.
            if st.messages.len() == 1
                && st.receivers == 0
                && let Some(n) = st.notification.take()
                && let Some(f) = n.notify
            {
                drop(st);
                f(sender.0, sender.1);
            }
            Some(())
        };
        match put() {
            Some(()) => {}
            None if nonblocking => return Err(Errno::EAGAIN),
            None => block_on(blocker, &[&self.queue], deadline, put).map_err(blocked)?,
        }
        self.queue.notify_all();
        Ok(())
    }

    /// mq_timedreceive: the first message of the highest priority, into a
    /// buffer of `size` bytes (EMSGSIZE if smaller than the queue's
    /// message size).
    pub fn receive(
        &self,
        size: usize,
        nonblocking: bool,
        deadline: Option<Instant>,
        blocker: &dyn Blocker,
    ) -> Result<(u32, Vec<u8>), Errno> {
        if size < self.message_size {
            return Err(Errno::EMSGSIZE);
        }
        let take = || {
            let mut st = self.state.lock().unwrap();
            if st.messages.is_empty() {
                return None;
            }
            let m = st.messages.remove(0);
            st.bytes -= m.1.len();
            Some(m)
        };
        let m = match take() {
            Some(m) => m,
            None if nonblocking => return Err(Errno::EAGAIN),
            None => {
                self.state.lock().unwrap().receivers += 1;
                let r = block_on(blocker, &[&self.queue], deadline, take);
                self.state.lock().unwrap().receivers -= 1;
                r.map_err(blocked)?
            }
        };
        self.queue.notify_all();
        Ok(m)
    }

    /// mq_notify: registers process `owner` (`notify` None: SIGEV_NONE),
    /// EBUSY if another is registered; `None` removes the caller's own
    /// registration.
    pub fn set_notification(&self, owner: i32, notify: Option<Registration>) -> Result<(), Errno> {
        let mut st = self.state.lock().unwrap();
        match notify {
            None => {
                if st.notification.as_ref().is_some_and(|n| n.owner == owner)
                    && let Some(removed) = st.notification.take().and_then(|n| n.removed)
                {
                    drop(st);
                    removed(0, 0);
                }
                Ok(())
            }
            Some(r) => {
                if st.notification.is_some() {
                    return Err(Errno::EBUSY);
                }
                st.notification =
                    Some(Notification { owner, notify: r.notify, removed: r.removed, how: r.how, signo: r.signo });
                Ok(())
            }
        }
    }

    /// What reading the descriptor gives, as Linux's mqueue file system
    /// writes it.
    fn status(&self) -> String {
        let st = self.state.lock().unwrap();
        let (notify, signo, pid) = match &st.notification {
            Some(n) => (n.how, if n.how == 0 { n.signo } else { 0 }, n.owner),
            None => (0, 0, 0),
        };
        format!("QSIZE:{:<10} NOTIFY:{:<5} SIGNO:{:<5} NOTIFY_PID:{:<6}\n", st.bytes, notify, signo, pid)
    }
}

fn blocked(e: BlockError) -> Errno {
    match e {
        BlockError::Interrupted => Errno::ERESTARTSYS,
        BlockError::TimedOut => Errno::ETIMEDOUT,
    }
}

/// An open queue: the descriptor mq_open returns.
pub struct QueueFile {
    pub queue: Arc<PosixQueue>,
}

impl FileOps for QueueFile {
    fn read(&self, _: &Context, _: &OpenFile, bufs: &[GuestSliceMut<'_>], offset: u64) -> Result<usize, FsError> {
        let text = self.queue.status();
        let mut from = (offset as usize).min(text.len());
        let mut n = 0;
        for b in bufs {
            let c = b.copy_from(&text.as_bytes()[from..]);
            from += c;
            n += c;
        }
        Ok(n)
    }

    fn seekable(&self) -> bool {
        true
    }

    fn stat(&self) -> Result<Stat, FsError> {
        let q = &self.queue;
        let mut st = crate::fs::synthetic::anon_inode_stat();
        st.ino = q.ino;
        st.mode = (st.mode & !0o7777) | q.mode;
        st.uid = q.uid;
        st.gid = q.gid;
        st.size = q.status().len() as u64;
        Ok(st)
    }

    fn poll(&self) -> u32 {
        let st = self.queue.state.lock().unwrap();
        let mut m = 0;
        if !st.messages.is_empty() {
            m |= POLLIN | POLLRDNORM;
        }
        if st.messages.len() < self.queue.max_messages {
            m |= POLLOUT | POLLWRNORM;
        }
        m
    }

    fn poll_queue(&self) -> Option<&WaitQueue> {
        Some(&self.queue.queue)
    }
}

/// The named queues of the sandbox (Linux's mqueue file system of its IPC
/// namespace).
#[derive(Default)]
pub struct PosixQueues {
    by_name: Mutex<HashMap<Vec<u8>, Arc<PosixQueue>>>,
    next_ino: std::sync::atomic::AtomicU64,
    /// Bytes charged to each real user id by the queues it made.
    charged: Arc<Mutex<HashMap<u32, u64>>>,
}

/// Bytes one queue counts against RLIMIT_MSGQUEUE, as Linux counts them:
/// its messages at their largest, plus the kernel's record of each message
/// (struct msg_msg) and of each priority it may hold (a tree node), 48
/// bytes each on x86_64.
fn queue_charge(max_messages: u64, message_size: u64) -> u64 {
    const MSG_RECORD: u64 = 48;
    const TREE_NODE: u64 = 48;
    max_messages * (message_size + MSG_RECORD) + max_messages.min(u64::from(MQ_PRIO_MAX)) * TREE_NODE
}

/// Bytes a queue holds charged to a user, given back when it goes (its
/// last name and descriptor gone).
struct Charge {
    charged: Arc<Mutex<HashMap<u32, u64>>>,
    uid: u32,
    bytes: u64,
}

impl Drop for Charge {
    fn drop(&mut self) {
        let mut charged = self.charged.lock().unwrap();
        if let Some(total) = charged.get_mut(&self.uid) {
            *total = total.saturating_sub(self.bytes);
            if *total == 0 {
                charged.remove(&self.uid);
            }
        }
    }
}

/// What mq_open asks: the access mode (O_RDONLY, O_WRONLY, O_RDWR), and to
/// create with a mode and attributes, exclusively or not.
pub struct OpenRequest {
    pub access: u32,
    pub create: Option<(u32, Option<Attr>)>,
    pub exclusive: bool,
    /// The caller's RLIMIT_MSGQUEUE (soft): a new queue past it fails
    /// with EMFILE.
    pub limit: u64,
}

/// Checks a queue's name (without glibc's leading slash): one component.
fn check_name(name: &[u8]) -> Result<(), Errno> {
    if name.len() > NAME_MAX {
        return Err(Errno::ENAMETOOLONG);
    }
    if name.is_empty() {
        return Err(Errno::ENOENT);
    }
    if name.contains(&b'/') || name == b"." || name == b".." {
        return Err(Errno::EACCES);
    }
    Ok(())
}

/// The owner's, group's or others' bits of `mode` for `creds` allow
/// `want` (MAY_READ, MAY_WRITE), or CAP_DAC_OVERRIDE does.
fn permits(uid: u32, gid: u32, mode: u32, creds: &Creds, want: u32) -> bool {
    let bits = if creds.uid.fs == uid {
        mode >> 6
    } else if creds.in_group(gid) {
        mode >> 3
    } else {
        mode
    };
    want & !bits & 7 == 0 || creds.has(crate::auth::cap::DAC_OVERRIDE)
}

impl PosixQueues {
    /// mq_open: the queue `name` names, made if asked (with `umask`
    /// applied to its mode).
    pub fn open(&self, name: &[u8], req: OpenRequest, umask: u32, creds: &Creds) -> Result<Arc<PosixQueue>, Errno> {
        check_name(name)?;
        let mut names = self.by_name.lock().unwrap();
        let want = match req.access {
            0 => crate::fs::MAY_READ,
            1 => crate::fs::MAY_WRITE,
            2 => crate::fs::MAY_READ | crate::fs::MAY_WRITE,
            _ => return Err(Errno::EINVAL),
        };
        if let Some(q) = names.get(name) {
            if req.create.is_some() && req.exclusive {
                return Err(Errno::EEXIST);
            }
            if !permits(q.uid, q.gid, q.mode, creds, want) {
                return Err(Errno::EACCES);
            }
            return Ok(q.clone());
        }
        let Some((mode, attr)) = req.create else { return Err(Errno::ENOENT) };
        let (max_messages, message_size) = match attr {
            None => (MSG_DEFAULT, MSGSIZE_DEFAULT),
            Some(a) => {
                if a.max_messages <= 0 || a.message_size <= 0 {
                    return Err(Errno::EINVAL);
                }
                let privileged = creds.has(CAP_SYS_RESOURCE);
                let (mm, ms) = if privileged { (HARD_MSG_MAX, HARD_MSGSIZE_MAX) } else { (MSG_MAX, MSGSIZE_MAX) };
                if a.max_messages > mm || a.message_size > ms {
                    return Err(Errno::EINVAL);
                }
                (a.max_messages, a.message_size)
            }
        };
        if names.len() >= QUEUES_MAX && !creds.has(CAP_SYS_RESOURCE) {
            return Err(Errno::ENOSPC);
        }
        let bytes = queue_charge(max_messages as u64, message_size as u64);
        let uid = creds.uid.real;
        {
            let mut charged = self.charged.lock().unwrap();
            let total = charged.get(&uid).copied().unwrap_or(0).saturating_add(bytes);
            if total > req.limit {
                return Err(Errno::EMFILE);
            }
            charged.insert(uid, total);
        }
        let q = Arc::new(PosixQueue {
            _charge: Charge { charged: self.charged.clone(), uid, bytes },
            uid: creds.uid.fs,
            gid: creds.gid.fs,
            mode: mode & 0o777 & !umask,
            max_messages: max_messages as usize,
            message_size: message_size as usize,
            ino: self.next_ino.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1,
            state: Mutex::new(State { messages: Vec::new(), bytes: 0, notification: None, receivers: 0 }),
            queue: WaitQueue::default(),
        });
        names.insert(name.to_vec(), q.clone());
        Ok(q)
    }

    /// mq_unlink: the name goes; open descriptors keep the queue. The
    /// queues live in a sticky directory: only the owner (or
    /// CAP_FOWNER) removes one.
    pub fn unlink(&self, name: &[u8], creds: &Creds) -> Result<(), Errno> {
        check_name(name)?;
        let mut names = self.by_name.lock().unwrap();
        let q = names.get(name).ok_or(Errno::ENOENT)?;
        if q.uid != creds.uid.fs && !creds.has(crate::auth::cap::FOWNER) {
            return Err(Errno::EPERM);
        }
        names.remove(name);
        Ok(())
    }
}

/// The mqueue file system's root, as `/dev/mqueue` shows it: a sticky
/// directory with a file per named queue (of the queue's owner and mode)
/// whose contents are the queue's status line, as Linux's shows them.
pub fn mqueue_root(queues: &Arc<PosixQueues>) -> Arc<dyn crate::fs::Inode> {
    crate::fs::synthetic::SynthDir::with_source(Box::new(QueueNames(Arc::downgrade(queues))), 0o1777, None)
}

struct QueueNames(std::sync::Weak<PosixQueues>);

impl QueueNames {
    fn node(q: &Arc<PosixQueue>) -> Arc<dyn crate::fs::Inode> {
        let (uid, gid) = (q.uid, q.gid);
        let status = Arc::downgrade(q);
        crate::fs::synthetic::SynthFile::inode(q.mode, Some(Arc::new(move || (uid, gid))), move || {
            Ok(status.upgrade().map(|q| q.status().into_bytes()).unwrap_or_default())
        })
    }
}

impl crate::fs::synthetic::DirSource for QueueNames {
    fn entries(&self) -> Vec<(Vec<u8>, Arc<dyn crate::fs::Inode>)> {
        let Some(queues) = self.0.upgrade() else { return Vec::new() };
        let mut names: Vec<_> =
            queues.by_name.lock().unwrap().iter().map(|(n, q)| (n.clone(), Self::node(q))).collect();
        names.sort_by(|a, b| a.0.cmp(&b.0));
        names
    }

    fn lookup(&self, name: &[u8]) -> Option<Arc<dyn crate::fs::Inode>> {
        let queues = self.0.upgrade()?;
        let q = queues.by_name.lock().unwrap().get(name)?.clone();
        Some(Self::node(&q))
    }
}

#[cfg(test)]
mod fs_tests {
    use super::*;

    #[test]
    fn the_mqueue_root_lists_the_named_queues() {
        let queues = Arc::new(PosixQueues::default());
        let root = mqueue_root(&queues);
        assert_eq!(root.stat().unwrap().mode & 0o7777, 0o1777);
        assert!(root.lookup(b"q").is_err());
        let creds = Creds::new(1000, 1000, Vec::new());
        let req = OpenRequest { access: 2, create: Some((0o640, None)), exclusive: true, limit: u64::MAX };
        queues.open(b"q", req, 0o022, &creds).unwrap();
        let q = root.lookup(b"q").unwrap();
        let st = q.stat().unwrap();
        assert_eq!((st.mode & 0o777, st.uid, st.gid), (0o640, 1000, 1000));
        queues.unlink(b"q", &creds).unwrap();
        assert!(root.lookup(b"q").is_err());
    }
}

#[cfg(test)]
mod limit_tests {
    use super::*;

    fn make(queues: &PosixQueues, name: &[u8], limit: u64) -> Result<Arc<PosixQueue>, Errno> {
        let creds = Creds::new(1000, 1000, Vec::new());
        let req = OpenRequest { access: 2, create: Some((0o600, None)), exclusive: true, limit };
        queues.open(name, req, 0, &creds)
    }

    #[test]
    fn queues_are_charged_to_rlimit_msgqueue_until_they_go() {
        // Linux's default limit holds nine queues of the default size.
        assert_eq!(queue_charge(10, 8192), 82_880);
        let queues = PosixQueues::default();
        let limit = 819_200;
        let mut held: Vec<_> = (0..9).map(|i| make(&queues, format!("q{i}").as_bytes(), limit).unwrap()).collect();
        assert_eq!(make(&queues, b"one-more", limit).err(), Some(Errno::EMFILE));
        // Unlinked but still open: still charged.
        let creds = Creds::new(1000, 1000, Vec::new());
        queues.unlink(b"q0", &creds).unwrap();
        assert_eq!(make(&queues, b"one-more", limit).err(), Some(Errno::EMFILE));
        held.remove(0);
        make(&queues, b"one-more", limit).unwrap();
    }
}
