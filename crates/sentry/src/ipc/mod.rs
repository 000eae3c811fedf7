//! System V IPC: semaphore sets, message queues and shared memory
//! segments, in one namespace per sandbox (Linux's ipc_namespace). Objects
//! are found by key or id, carry an owner, a creator and a mode checked as
//! Linux's ipcperms() does, and live until IPC_RMID, whoever made them.
//!
//! This module knows nothing of tasks: callers pass their credentials,
//! their process id and a [`Blocker`](crate::waiter::Blocker) to sleep on.

pub mod mqueue;
pub mod msg;
pub mod sem;
pub mod shm;

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::auth::{Creds, cap};
use crate::errno::Errno;

/// IPC_PRIVATE: a key that always makes a new object.
pub const IPC_PRIVATE: i32 = 0;
pub const IPC_CREAT: i32 = 0o1000;
pub const IPC_EXCL: i32 = 0o2000;
pub const IPC_NOWAIT: i32 = 0o4000;

pub const IPC_RMID: i32 = 0;
pub const IPC_SET: i32 = 1;
pub const IPC_STAT: i32 = 2;
pub const IPC_INFO: i32 = 3;

/// Linux's IPCMNI: indices of one kind of object stay below it, and an id
/// is `seq * IPCMNI + index`.
const IPCMNI: usize = 32768;
/// The sequence number wraps here (Linux's IPCID_SEQ_MAX).
const SEQ_MAX: u32 = (i32::MAX as usize / IPCMNI) as u32;

/// Read, write (alter) and execute bits of a mode, for each class.
pub const S_IRUGO: u32 = 0o444;
pub const S_IWUGO: u32 = 0o222;
pub const CAP_IPC_LOCK: u32 = 14;
pub const CAP_IPC_OWNER: u32 = 15;

/// The owner, creator and mode of an object (Linux's kern_ipc_perm).
#[derive(Clone, Debug)]
pub struct IpcPerm {
    pub key: i32,
    pub uid: u32,
    pub gid: u32,
    pub cuid: u32,
    pub cgid: u32,
    /// The low nine bits are the permissions; shared memory keeps its
    /// SHM_DEST and SHM_LOCKED flags above them.
    pub mode: u32,
    pub seq: u32,
}

impl IpcPerm {
    fn new(key: i32, flags: i32, creds: &Creds) -> IpcPerm {
        IpcPerm {
            key,
            uid: creds.uid.effective,
            gid: creds.gid.effective,
            cuid: creds.uid.effective,
            cgid: creds.gid.effective,
            mode: flags as u32 & 0o777,
            seq: 0,
        }
    }

    /// Linux's ipcperms(): the bits of `flags` (any class) asked for must
    /// be granted to the caller's class, unless it has CAP_IPC_OWNER.
    pub fn check(&self, creds: &Creds, flags: u32) -> Result<(), Errno> {
        let requested = (flags >> 6 | flags >> 3 | flags) & 7;
        let euid = creds.uid.effective;
        let granted = if euid == self.cuid || euid == self.uid {
            self.mode >> 6
        } else if creds.in_group(self.cgid) || creds.in_group(self.gid) {
            self.mode >> 3
        } else {
            self.mode
        };
        if requested & !granted & 7 != 0 && !creds.has(CAP_IPC_OWNER) {
            return Err(Errno::EACCES);
        }
        Ok(())
    }

    /// IPC_SET and IPC_RMID: the owner, the creator or CAP_SYS_ADMIN
    /// (Linux's ipcctl_obtain_check), else EPERM.
    pub fn check_owner(&self, creds: &Creds) -> Result<(), Errno> {
        let euid = creds.uid.effective;
        if euid == self.cuid || euid == self.uid || creds.has(cap::SYS_ADMIN) { Ok(()) } else { Err(Errno::EPERM) }
    }

    /// IPC_SET's change of owner and permission bits.
    pub fn set(&mut self, uid: u32, gid: u32, mode: u32) {
        self.uid = uid;
        self.gid = gid;
        self.mode = (self.mode & !0o777) | (mode & 0o777);
    }

    /// `struct ipc64_perm` as x86_64 lays it out (48 bytes).
    pub fn encode(&self, out: &mut [u8]) {
        put(out, 0, &self.key.to_ne_bytes());
        put(out, 4, &self.uid.to_ne_bytes());
        put(out, 8, &self.gid.to_ne_bytes());
        put(out, 12, &self.cuid.to_ne_bytes());
        put(out, 16, &self.cgid.to_ne_bytes());
        put(out, 20, &self.mode.to_ne_bytes());
        put(out, 24, &(self.seq as u16).to_ne_bytes());
    }

    /// The uid, gid and mode IPC_SET takes from a `struct ipc64_perm`.
    pub fn decode_set(buf: &[u8]) -> (u32, u32, u32) {
        (get_u32(buf, 4), get_u32(buf, 8), get_u32(buf, 20))
    }
}

/// Copies `bytes` into `out` at `offset`.
pub fn put(out: &mut [u8], offset: usize, bytes: &[u8]) {
    out[offset..offset + bytes.len()].copy_from_slice(bytes);
}

pub fn get_u32(buf: &[u8], offset: usize) -> u32 {
    u32::from_ne_bytes(buf[offset..offset + 4].try_into().unwrap())
}

pub fn get_u64(buf: &[u8], offset: usize) -> u64 {
    u64::from_ne_bytes(buf[offset..offset + 8].try_into().unwrap())
}

/// Seconds since the epoch, as the objects' times are kept.
pub fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// Who makes a call that may block: its identity, its process and how it
/// sleeps.
pub struct Caller<'a> {
    pub creds: &'a Creds,
    pub tgid: i32,
    pub blocker: &'a dyn crate::waiter::Blocker,
}

/// Something an [`Ids`] table holds.
pub trait IpcObject {
    fn perm(&self) -> &IpcPerm;
    fn perm_mut(&mut self) -> &mut IpcPerm;
}

/// The objects of one kind, by index (Linux's ipc_ids).
pub struct Ids<T> {
    objects: BTreeMap<usize, T>,
    /// The index given last: indices are handed out cyclically, and the
    /// sequence number moves on each time they wrap.
    last_index: Option<usize>,
    seq: u32,
}

impl<T> Default for Ids<T> {
    fn default() -> Self {
        Ids { objects: BTreeMap::new(), last_index: None, seq: 0 }
    }
}

impl<T: IpcObject> Ids<T> {
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// The highest index in use (IPC_INFO's answer), 0 with none.
    pub fn max_index(&self) -> usize {
        self.objects.keys().next_back().copied().unwrap_or(0)
    }

    /// The index of the object `key` names; IPC_PRIVATE names none, nor
    /// does a removed object (which has taken that key).
    pub fn find_key(&self, key: i32) -> Option<usize> {
        if key == IPC_PRIVATE {
            return None;
        }
        self.objects.iter().find(|(_, o)| o.perm().key == key).map(|(i, _)| *i)
    }

    /// Adds `object` under a new id, or None if every index is taken (or
    /// `limit` objects exist already).
    pub fn add(&mut self, mut object: T, limit: usize) -> Option<i32> {
        if self.objects.len() >= limit.min(IPCMNI) {
            return None;
        }
        let start = self.last_index.map_or(0, |i| (i + 1) % IPCMNI);
        let index = (start..IPCMNI).chain(0..start).find(|i| !self.objects.contains_key(i))?;
        if self.last_index.is_some_and(|last| index <= last) {
            self.seq = if self.seq + 1 >= SEQ_MAX { 0 } else { self.seq + 1 };
        }
        self.last_index = Some(index);
        object.perm_mut().seq = self.seq;
        self.objects.insert(index, object);
        Some(id_of(index, self.seq))
    }

    /// The object an id names: EINVAL for an id no object has (a removed
    /// one's included).
    pub fn get(&self, id: i32) -> Result<&T, Errno> {
        let (index, seq) = split_id(id)?;
        self.objects.get(&index).filter(|o| o.perm().seq == seq).ok_or(Errno::EINVAL)
    }

    pub fn get_mut(&mut self, id: i32) -> Result<&mut T, Errno> {
        let (index, seq) = split_id(id)?;
        self.objects.get_mut(&index).filter(|o| o.perm().seq == seq).ok_or(Errno::EINVAL)
    }

    /// The object at `index` with its id (the *_STAT commands, which take
    /// an index).
    pub fn at_index(&self, index: i32) -> Result<(i32, &T), Errno> {
        let index = usize::try_from(index).map_err(|_| Errno::EINVAL)?;
        let o = self.objects.get(&index).ok_or(Errno::EINVAL)?;
        Ok((id_of(index, o.perm().seq), o))
    }

    pub fn remove(&mut self, id: i32) -> Option<T> {
        let (index, seq) = split_id(id).ok()?;
        if self.objects.get(&index)?.perm().seq != seq {
            return None;
        }
        self.objects.remove(&index)
    }

    /// Every object with its id, in index order (/proc/sysvipc).
    pub fn iter(&self) -> impl Iterator<Item = (i32, &T)> {
        self.objects.iter().map(|(i, o)| (id_of(*i, o.perm().seq), o))
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = (i32, &mut T)> {
        self.objects.iter_mut().map(|(i, o)| (id_of(*i, o.perm().seq), o))
    }
}

fn id_of(index: usize, seq: u32) -> i32 {
    (seq as usize * IPCMNI + index) as i32
}

fn split_id(id: i32) -> Result<(usize, u32), Errno> {
    let id = usize::try_from(id).map_err(|_| Errno::EINVAL)?;
    Ok((id % IPCMNI, (id / IPCMNI) as u32))
}

/// What a get call asks: Linux's ipcget() for both public keys and
/// IPC_PRIVATE.
pub enum Lookup {
    /// An object to make.
    Create,
    /// The existing object at this index.
    Existing(usize),
}

/// Linux's ipcget(): finds the object `key` names or says to make one,
/// with its errors (ENOENT without IPC_CREAT, EEXIST with IPC_EXCL, EACCES
/// from the object's mode). `more_checks` is the kind's own check of an
/// existing object (a size or a count too large: EINVAL).
pub fn lookup<T: IpcObject>(
    ids: &Ids<T>,
    key: i32,
    flags: i32,
    creds: &Creds,
    more_checks: impl FnOnce(&T) -> Result<(), Errno>,
) -> Result<Lookup, Errno> {
    if key == IPC_PRIVATE {
        return Ok(Lookup::Create);
    }
    match ids.find_key(key) {
        None if flags & IPC_CREAT == 0 => Err(Errno::ENOENT),
        None => Ok(Lookup::Create),
        Some(_) if flags & IPC_CREAT != 0 && flags & IPC_EXCL != 0 => Err(Errno::EEXIST),
        Some(index) => {
            let o = &ids.objects[&index];
            o.perm().check(creds, flags as u32)?;
            more_checks(o)?;
            Ok(Lookup::Existing(index))
        }
    }
}

impl<T: IpcObject> Ids<T> {
    /// The id of the object at `index`.
    pub fn id_at(&self, index: usize) -> i32 {
        id_of(index, self.objects[&index].perm().seq)
    }
}

/// The sandbox's IPC namespace.
pub struct IpcNamespace {
    pub sem: sem::Semaphores,
    pub msg: msg::MessageQueues,
    pub shm: std::sync::Arc<shm::SharedSegments>,
    /// POSIX message queues, by name.
    pub mq: std::sync::Arc<mqueue::PosixQueues>,
}

impl IpcNamespace {
    pub fn new(mf: std::sync::Arc<memory::MemoryFile>) -> IpcNamespace {
        IpcNamespace {
            sem: sem::Semaphores::default(),
            msg: msg::MessageQueues::default(),
            shm: shm::SharedSegments::new(mf),
            mq: std::sync::Arc::default(),
        }
    }

    /// The process `tgid` ended: its semaphore adjustments are applied.
    pub fn exit_process(&self, tgid: i32) {
        self.sem.exit_process(tgid);
    }

    /// /proc/sys/kernel's IPC limits and /proc/sys/fs/mqueue's, by name.
    pub fn sysctl(&self, name: &str) -> Option<String> {
        Some(match name {
            "sem" => format!("{}\t{}\t{}\t{}", sem::SEMMSL, sem::SEMMNS, sem::SEMOPM, sem::SEMMNI),
            "msgmax" => msg::MSGMAX.to_string(),
            "msgmnb" => msg::MSGMNB.to_string(),
            "msgmni" => msg::MSGMNI.to_string(),
            "shmmax" => shm::SHMMAX.to_string(),
            "shmall" => shm::SHMALL.to_string(),
            "shmmni" => shm::SHMMNI.to_string(),
            "mqueue/msg_default" => mqueue::MSG_DEFAULT.to_string(),
            "mqueue/msg_max" => mqueue::MSG_MAX.to_string(),
            "mqueue/msgsize_default" => mqueue::MSGSIZE_DEFAULT.to_string(),
            "mqueue/msgsize_max" => mqueue::MSGSIZE_MAX.to_string(),
            "mqueue/queues_max" => mqueue::QUEUES_MAX.to_string(),
            _ => return None,
        })
    }

    /// /proc/sysvipc/`name`, as Linux formats it.
    pub fn proc_file(&self, name: &str) -> Option<String> {
        match name {
            "sem" => Some(self.sem.proc_lines()),
            "msg" => Some(self.msg.proc_lines()),
            "shm" => Some(self.shm.proc_lines()),
            _ => None,
        }
    }
}
