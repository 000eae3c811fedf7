//! System V message queues: msgget, msgsnd, msgrcv, msgctl.

use std::collections::VecDeque;
use std::fmt::Write;
use std::sync::{Arc, Mutex};

use super::{Caller, IPC_NOWAIT, Ids, IpcObject, IpcPerm, Lookup, S_IRUGO, S_IWUGO, lookup, now, put};
use crate::auth::{Creds, cap};
use crate::errno::Errno;
use crate::waiter::{BlockError, WaitQueue, block_on};

/// Linux's defaults: the largest message, the bytes a queue holds, queues.
pub const MSGMAX: usize = 8192;
pub const MSGMNB: usize = 16384;
pub const MSGMNI: usize = 32000;

pub const MSG_STAT: i32 = 11;
pub const MSG_INFO: i32 = 12;
pub const MSG_STAT_ANY: i32 = 13;

pub const MSG_NOERROR: i32 = 0o10000;
pub const MSG_EXCEPT: i32 = 0o20000;
pub const MSG_COPY: i32 = 0o40000;

struct Message {
    mtype: i64,
    data: Vec<u8>,
}

pub struct MessageQueue {
    perm: IpcPerm,
    messages: VecDeque<Message>,
    /// Bytes of message text held, and the most it may hold.
    cbytes: usize,
    qbytes: usize,
    stime: i64,
    rtime: i64,
    ctime: i64,
    lspid: i32,
    lrpid: i32,
    queue: Arc<WaitQueue>,
}

impl IpcObject for MessageQueue {
    fn perm(&self) -> &IpcPerm {
        &self.perm
    }
    fn perm_mut(&mut self) -> &mut IpcPerm {
        &mut self.perm
    }
}

impl MessageQueue {
    /// `struct msqid64_ds` (120 bytes).
    fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; 120];
        self.perm.encode(&mut b);
        put(&mut b, 48, &self.stime.to_ne_bytes());
        put(&mut b, 56, &self.rtime.to_ne_bytes());
        put(&mut b, 64, &self.ctime.to_ne_bytes());
        put(&mut b, 72, &(self.cbytes as u64).to_ne_bytes());
        put(&mut b, 80, &(self.messages.len() as u64).to_ne_bytes());
        put(&mut b, 88, &(self.qbytes as u64).to_ne_bytes());
        put(&mut b, 96, &self.lspid.to_ne_bytes());
        put(&mut b, 100, &self.lrpid.to_ne_bytes());
        b
    }

    /// Linux's msg_fits(): a message of `len` bytes fits in bytes and in
    /// count (a queue holds at most `qbytes` messages too).
    fn fits(&self, len: usize) -> bool {
        self.cbytes + len <= self.qbytes && self.messages.len() < self.qbytes
    }

    /// The index of the message msgrcv's `msgtyp` and flags choose.
    fn choose(&self, msgtyp: i64, flags: i32) -> Option<usize> {
        if flags & MSG_COPY != 0 {
            return usize::try_from(msgtyp).ok().filter(|i| *i < self.messages.len());
        }
        let m = &self.messages;
        if msgtyp == 0 {
            return (!m.is_empty()).then_some(0);
        }
        if msgtyp > 0 {
            let except = flags & MSG_EXCEPT != 0;
            return m.iter().position(|x| (x.mtype == msgtyp) != except);
        }
        // The first of the lowest types at most |msgtyp|.
        let limit = msgtyp.unsigned_abs();
        let mut best: Option<usize> = None;
        for (i, x) in m.iter().enumerate() {
            if (x.mtype as u64) <= limit && best.is_none_or(|b| x.mtype < m[b].mtype) {
                best = Some(i);
            }
        }
        best
    }
}

/// The message queues of a namespace.
#[derive(Default)]
pub struct MessageQueues {
    queues: Mutex<Ids<MessageQueue>>,
}

/// What msgctl answers.
pub enum CtlOut {
    Value(i64),
    Struct(Vec<u8>, i64),
}

/// How an interrupted msgsnd or msgrcv ends: restarted if no handler ran,
/// else EINTR whatever SA_RESTART says (Linux's ERESTARTNOHAND).
fn interrupted(e: BlockError) -> Errno {
    match e {
        BlockError::Interrupted => Errno::ERESTARTNOHAND,
        BlockError::TimedOut => Errno::EAGAIN,
    }
}

impl MessageQueues {
    pub fn get(&self, key: i32, flags: i32, creds: &Creds) -> Result<i32, Errno> {
        let mut queues = self.queues.lock().unwrap();
        match lookup(&queues, key, flags, creds, |_| Ok(()))? {
            Lookup::Existing(index) => Ok(queues.id_at(index)),
            Lookup::Create => {
                let q = MessageQueue {
                    perm: IpcPerm::new(key, flags, creds),
                    messages: VecDeque::new(),
                    cbytes: 0,
                    qbytes: MSGMNB,
                    stime: 0,
                    rtime: 0,
                    ctime: now(),
                    lspid: 0,
                    lrpid: 0,
                    queue: Arc::new(WaitQueue::default()),
                };
                queues.add(q, MSGMNI).ok_or(Errno::ENOSPC)
            }
        }
    }

    /// msgsnd of a message already read from the caller.
    pub fn send(&self, id: i32, mtype: i64, data: Vec<u8>, flags: i32, caller: &Caller) -> Result<(), Errno> {
        let (creds, tgid) = (caller.creds, caller.tgid);
        let mut data = Some(data);
        let mut attempt = || -> Result<Option<()>, Errno> {
            let mut queues = self.queues.lock().unwrap();
            let q = queues.get_mut(id)?;
            q.perm.check(creds, S_IWUGO)?;
            let len = data.as_ref().map_or(0, Vec::len);
            if !q.fits(len) {
                return Ok(None);
            }
            q.messages.push_back(Message { mtype, data: data.take().unwrap_or_default() });
            q.cbytes += len;
            q.lspid = tgid;
            q.stime = now();
            q.queue.notify_all();
            Ok(Some(()))
        };
        if attempt()?.is_some() {
            return Ok(());
        }
        if flags & IPC_NOWAIT != 0 {
            return Err(Errno::EAGAIN);
        }
        let queue = self.queues.lock().unwrap().get(id)?.queue.clone();
        block_on(caller.blocker, &[&queue], None, || match attempt() {
            Ok(Some(())) => Some(Ok(())),
            Ok(None) => None,
            Err(Errno::EINVAL) => Some(Err(Errno::EIDRM)),
            Err(e) => Some(Err(e)),
        })
        .map_err(interrupted)?
    }

    /// msgrcv: the chosen message's type and at most `max` bytes of it.
    pub fn receive(
        &self,
        id: i32,
        max: usize,
        msgtyp: i64,
        flags: i32,
        caller: &Caller,
    ) -> Result<(i64, Vec<u8>), Errno> {
        let (creds, tgid) = (caller.creds, caller.tgid);
        if flags & MSG_COPY != 0 && (flags & MSG_EXCEPT != 0 || flags & IPC_NOWAIT == 0) {
            return Err(Errno::EINVAL);
        }
        let attempt = || -> Result<Option<(i64, Vec<u8>)>, Errno> {
            let mut queues = self.queues.lock().unwrap();
            let q = queues.get_mut(id)?;
            q.perm.check(creds, S_IRUGO)?;
            let Some(i) = q.choose(msgtyp, flags) else { return Ok(None) };
            let m = &q.messages[i];
            if m.data.len() > max && flags & MSG_NOERROR == 0 {
                return Err(Errno::E2BIG);
            }
            if flags & MSG_COPY != 0 {
                let n = m.data.len().min(max);
                return Ok(Some((m.mtype, m.data[..n].to_vec())));
            }
            let mut m = q.messages.remove(i).expect("chosen message");
            q.cbytes -= m.data.len();
            q.lrpid = tgid;
            q.rtime = now();
            q.queue.notify_all();
            m.data.truncate(max);
            Ok(Some((m.mtype, m.data)))
        };
        if let Some(m) = attempt()? {
            return Ok(m);
        }
        if flags & IPC_NOWAIT != 0 {
            return Err(Errno::ENOMSG);
        }
        let queue = self.queues.lock().unwrap().get(id)?.queue.clone();
        block_on(caller.blocker, &[&queue], None, || match attempt() {
            Ok(Some(m)) => Some(Ok(m)),
            Ok(None) => None,
            Err(Errno::EINVAL) => Some(Err(Errno::EIDRM)),
            Err(e) => Some(Err(e)),
        })
        .map_err(interrupted)?
    }

    /// msgctl. `set` is IPC_SET's uid, gid, mode and qbytes.
    pub fn ctl(&self, id: i32, cmd: i32, set: Option<(u32, u32, u32, u64)>, creds: &Creds) -> Result<CtlOut, Errno> {
        let mut queues = self.queues.lock().unwrap();
        match cmd {
            super::IPC_INFO | MSG_INFO => {
                let info = cmd == MSG_INFO;
                let messages: usize = queues.iter().map(|(_, q)| q.messages.len()).sum();
                let bytes: usize = queues.iter().map(|(_, q)| q.cbytes).sum();
                let pool = MSGMNI * MSGMNB / 1024;
                let fields: [i32; 7] = [
                    if info { queues.len() as i32 } else { pool as i32 },
                    if info { messages as i32 } else { MSGMNB as i32 },
                    MSGMAX as i32,
                    MSGMNB as i32,
                    MSGMNI as i32,
                    16,
                    if info { bytes as i32 } else { MSGMNB as i32 },
                ];
                let mut b = vec![0u8; 32];
                for (i, f) in fields.iter().enumerate() {
                    put(&mut b, i * 4, &f.to_ne_bytes());
                }
                put(&mut b, 28, &0xffffu16.to_ne_bytes());
                return Ok(CtlOut::Struct(b, queues.max_index() as i64));
            }
            MSG_STAT | MSG_STAT_ANY => {
                let (full, q) = queues.at_index(id)?;
                if cmd == MSG_STAT {
                    q.perm.check(creds, S_IRUGO)?;
                }
                return Ok(CtlOut::Struct(q.encode(), full as i64));
            }
            _ => {}
        }
        if id < 0 {
            return Err(Errno::EINVAL);
        }
        let q = queues.get_mut(id)?;
        match cmd {
            super::IPC_STAT => {
                q.perm.check(creds, S_IRUGO)?;
                Ok(CtlOut::Struct(q.encode(), 0))
            }
            super::IPC_SET => {
                q.perm.check_owner(creds)?;
                let Some((uid, gid, mode, qbytes)) = set else { return Err(Errno::EINVAL) };
                if qbytes > MSGMNB as u64 && !creds.has(cap::SYS_RESOURCE) {
                    return Err(Errno::EPERM);
                }
                q.qbytes = qbytes as usize;
                q.perm.set(uid, gid, mode);
                q.ctime = now();
                // More room may let senders go on.
                q.queue.notify_all();
                Ok(CtlOut::Value(0))
            }
            super::IPC_RMID => {
                q.perm.check_owner(creds)?;
                let queue = q.queue.clone();
                queues.remove(id);
                queue.notify_all();
                Ok(CtlOut::Value(0))
            }
            _ => Err(Errno::EINVAL),
        }
    }

    /// /proc/sysvipc/msg.
    pub fn proc_lines(&self) -> String {
        let mut s = String::from(
            "       key      msqid perms      cbytes       qnum lspid lrpid   uid   gid  cuid  cgid      stime      rtime      ctime\n",
        );
        for (id, q) in self.queues.lock().unwrap().iter() {
            let p = &q.perm;
            let _ = writeln!(
                s,
                "{:>10} {:>10}  {:>4o}  {:>10} {:>10} {:>5} {:>5} {:>5} {:>5} {:>5} {:>5} {:>10} {:>10} {:>10}",
                p.key,
                id,
                p.mode,
                q.cbytes,
                q.messages.len(),
                q.lspid,
                q.lrpid,
                p.uid,
                p.gid,
                p.cuid,
                p.cgid,
                q.stime,
                q.rtime,
                q.ctime
            );
        }
        s
    }
}
