//! System V semaphore sets: semget, semop/semtimedop with SEM_UNDO, semctl.

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::{Caller, IPC_NOWAIT, Ids, IpcObject, IpcPerm, Lookup, S_IRUGO, S_IWUGO, lookup, now, put};
use crate::auth::Creds;
use crate::errno::Errno;
use crate::waiter::{BlockError, WaitQueue, block_on};

/// Linux's limits (/proc/sys/kernel/sem): semaphores per set, in all,
/// operations per call, sets.
pub const SEMMSL: usize = 32000;
pub const SEMMNS: usize = SEMMSL * SEMMNI;
pub const SEMOPM: usize = 500;
pub const SEMMNI: usize = 32000;
/// The largest value of a semaphore, and of an adjustment.
pub const SEMVMX: i32 = 32767;
pub const SEMAEM: i32 = SEMVMX;

pub const SEM_UNDO: i16 = 0x1000;

pub const GETPID: i32 = 11;
pub const GETVAL: i32 = 12;
pub const GETALL: i32 = 13;
pub const GETNCNT: i32 = 14;
pub const GETZCNT: i32 = 15;
pub const SETVAL: i32 = 16;
pub const SETALL: i32 = 17;
pub const SEM_STAT: i32 = 18;
pub const SEM_INFO: i32 = 19;
pub const SEM_STAT_ANY: i32 = 20;

/// One `struct sembuf`.
#[derive(Clone, Copy, Debug)]
pub struct SemOp {
    pub num: u16,
    pub op: i16,
    pub flags: i16,
}

#[derive(Clone, Copy, Default)]
struct Sem {
    value: i32,
    /// The process that last changed it.
    pid: i32,
}

/// What a blocked semop waits for: a semaphore to grow, or to reach zero.
#[derive(Clone, Copy)]
struct Waiting {
    num: u16,
    zero: bool,
}

pub struct SemSet {
    perm: IpcPerm,
    sems: Vec<Sem>,
    otime: i64,
    ctime: i64,
    /// SEM_UNDO adjustments, by process.
    undo: HashMap<i32, Vec<i32>>,
    /// Blocked operations, by a token of each call (GETNCNT, GETZCNT).
    waiting: HashMap<u64, Waiting>,
    queue: Arc<WaitQueue>,
    /// Set by IPC_RMID: blocked callers fail with EIDRM.
    removed: bool,
}

impl IpcObject for SemSet {
    fn perm(&self) -> &IpcPerm {
        &self.perm
    }
    fn perm_mut(&mut self) -> &mut IpcPerm {
        &mut self.perm
    }
}

/// Why an attempt at a semop did not complete.
enum Attempt {
    Done,
    Block(Waiting, bool),
    Fail(Errno),
}

impl SemSet {
    /// Linux's perform_atomic_semop(): all of `ops` or none. A blocking
    /// result names the operation that blocked and whether it said
    /// IPC_NOWAIT.
    fn try_ops(&mut self, ops: &[SemOp], pid: i32, tgid: i32) -> Attempt {
        let mut values: Vec<i32> = self.sems.iter().map(|s| s.value).collect();
        let mut adjust = self.undo.get(&tgid).cloned().unwrap_or_else(|| vec![0; self.sems.len()]);
        for o in ops {
            let n = o.num as usize;
            let v = values[n];
            let nowait = o.flags as i32 & IPC_NOWAIT != 0;
            if o.op == 0 {
                if v != 0 {
                    return Attempt::Block(Waiting { num: o.num, zero: true }, nowait);
                }
                continue;
            }
            let result = v + o.op as i32;
            if result < 0 {
                return Attempt::Block(Waiting { num: o.num, zero: false }, nowait);
            }
            if result > SEMVMX {
                return Attempt::Fail(Errno::ERANGE);
            }
            if o.flags & SEM_UNDO != 0 {
                let a = adjust[n] - o.op as i32;
                if !(-SEMAEM - 1..=SEMAEM).contains(&a) {
                    return Attempt::Fail(Errno::ERANGE);
                }
                adjust[n] = a;
            }
            values[n] = result;
        }
        for o in ops {
            self.sems[o.num as usize].pid = pid;
        }
        for (s, v) in self.sems.iter_mut().zip(values) {
            s.value = v;
        }
        if ops.iter().any(|o| o.flags & SEM_UNDO != 0) {
            self.undo.insert(tgid, adjust);
        }
        self.otime = now();
        Attempt::Done
    }

    /// Forgets every adjustment of semaphore `num` (SETVAL, SETALL).
    fn clear_undo(&mut self, num: Option<usize>) {
        for adj in self.undo.values_mut() {
            match num {
                Some(n) => adj[n] = 0,
                None => adj.iter_mut().for_each(|a| *a = 0),
            }
        }
    }

    /// `struct semid64_ds` (104 bytes).
    fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; 104];
        self.perm.encode(&mut b);
        put(&mut b, 48, &self.otime.to_ne_bytes());
        put(&mut b, 64, &self.ctime.to_ne_bytes());
        put(&mut b, 80, &(self.sems.len() as u64).to_ne_bytes());
        b
    }
}

/// The semaphore sets of a namespace.
#[derive(Default)]
pub struct Semaphores {
    sets: Mutex<Ids<SemSet>>,
    next_token: AtomicU64,
}

/// What semctl answers or was given.
pub enum CtlArg {
    None,
    Value(i32),
    Values(Vec<u16>),
    Set { uid: u32, gid: u32, mode: u32 },
}

pub enum CtlOut {
    Value(i64),
    /// A structure to copy out, and the call's result.
    Struct(Vec<u8>, i64),
    Values(Vec<u16>),
}

impl Semaphores {
    pub fn get(&self, key: i32, nsems: i32, flags: i32, creds: &Creds) -> Result<i32, Errno> {
        if !(0..=SEMMSL as i32).contains(&nsems) {
            return Err(Errno::EINVAL);
        }
        let mut sets = self.sets.lock().unwrap();
        match lookup(
            &sets,
            key,
            flags,
            creds,
            |s| {
                if nsems as usize > s.sems.len() { Err(Errno::EINVAL) } else { Ok(()) }
            },
        )? {
            Lookup::Existing(index) => Ok(sets.id_at(index)),
            Lookup::Create => {
                if nsems == 0 {
                    return Err(Errno::EINVAL);
                }
                let in_use: usize = sets.iter().map(|(_, s)| s.sems.len()).sum();
                if in_use + nsems as usize > SEMMNS {
                    return Err(Errno::ENOSPC);
                }
                let set = SemSet {
                    perm: IpcPerm::new(key, flags, creds),
                    sems: vec![Sem::default(); nsems as usize],
                    otime: 0,
                    ctime: now(),
                    undo: HashMap::new(),
                    waiting: HashMap::new(),
                    queue: Arc::new(WaitQueue::default()),
                    removed: false,
                };
                sets.add(set, SEMMNI).ok_or(Errno::ENOSPC)
            }
        }
    }

    /// semop and semtimedop: `ops` (already read and counted) on set `id`.
    /// Interrupted, it fails with EINTR as Linux's does, never restarted;
    /// past `deadline`, EAGAIN.
    pub fn op(&self, id: i32, ops: &[SemOp], caller: &Caller, deadline: Option<Instant>) -> Result<(), Errno> {
        let (creds, pid, tgid) = (caller.creds, caller.tgid, caller.tgid);
        if id < 0 {
            return Err(Errno::EINVAL);
        }
        let max_num = ops.iter().map(|o| o.num).max().unwrap_or(0);
        let alter = ops.iter().any(|o| o.op != 0);
        let queue = {
            let mut sets = self.sets.lock().unwrap();
            let set = sets.get_mut(id)?;
            if max_num as usize >= set.sems.len() {
                return Err(Errno::EFBIG);
            }
            set.perm.check(creds, if alter { S_IWUGO } else { S_IRUGO })?;
            match set.try_ops(ops, pid, tgid) {
                Attempt::Done => {
                    if alter {
                        set.queue.notify_all();
                    }
                    return Ok(());
                }
                Attempt::Fail(e) => return Err(e),
                Attempt::Block(_, true) => return Err(Errno::EAGAIN),
                Attempt::Block(..) => set.queue.clone(),
            }
        };
        let token = self.next_token.fetch_add(1, Ordering::Relaxed);
        let result = block_on(caller.blocker, &[&queue], deadline, || {
            let mut sets = self.sets.lock().unwrap();
            let Ok(set) = sets.get_mut(id).map_err(|_| ()).and_then(|s| if s.removed { Err(()) } else { Ok(s) }) else {
                return Some(Err(Errno::EIDRM));
            };
            match set.try_ops(ops, pid, tgid) {
                Attempt::Done => {
                    set.waiting.remove(&token);
                    if alter {
                        set.queue.notify_all();
                    }
                    Some(Ok(()))
                }
                Attempt::Fail(e) => {
                    set.waiting.remove(&token);
                    Some(Err(e))
                }
                Attempt::Block(w, true) => {
                    set.waiting.remove(&token);
                    let _ = w;
                    Some(Err(Errno::EAGAIN))
                }
                Attempt::Block(w, false) => {
                    set.waiting.insert(token, w);
                    None
                }
            }
        });
        if result.is_err()
            && let Ok(set) = self.sets.lock().unwrap().get_mut(id)
        {
            set.waiting.remove(&token);
        }
        match result {
            Ok(r) => r,
            Err(BlockError::Interrupted) => Err(Errno::EINTR),
            Err(BlockError::TimedOut) => Err(Errno::EAGAIN),
        }
    }

    /// semctl. `arg` is what the command takes, read by the caller.
    pub fn ctl(&self, id: i32, num: i32, cmd: i32, arg: CtlArg, creds: &Creds, pid: i32) -> Result<CtlOut, Errno> {
        let mut sets = self.sets.lock().unwrap();
        match cmd {
            super::IPC_INFO | SEM_INFO => {
                let info = cmd == SEM_INFO;
                let mut b = vec![0u8; 40];
                let used: usize = sets.iter().map(|(_, s)| s.sems.len()).sum();
                let fields: [i32; 10] = [
                    SEMMNS as i32,
                    SEMMNI as i32,
                    SEMMNS as i32,
                    SEMMNS as i32,
                    SEMMSL as i32,
                    SEMOPM as i32,
                    SEMOPM as i32,
                    if info { sets.len() as i32 } else { 20 },
                    SEMVMX,
                    if info { used as i32 } else { SEMAEM },
                ];
                for (i, f) in fields.iter().enumerate() {
                    put(&mut b, i * 4, &f.to_ne_bytes());
                }
                return Ok(CtlOut::Struct(b, sets.max_index() as i64));
            }
            SEM_STAT | SEM_STAT_ANY => {
                let (full, set) = sets.at_index(id)?;
                if cmd == SEM_STAT {
                    set.perm.check(creds, S_IRUGO)?;
                }
                return Ok(CtlOut::Struct(set.encode(), full as i64));
            }
            _ => {}
        }
        if id < 0 {
            return Err(Errno::EINVAL);
        }
        let set = sets.get_mut(id)?;
        let nsems = set.sems.len();
        let sem_index = |num: i32| -> Result<usize, Errno> {
            usize::try_from(num).ok().filter(|n| *n < nsems).ok_or(Errno::EINVAL)
        };
        match cmd {
            super::IPC_STAT => {
                set.perm.check(creds, S_IRUGO)?;
                Ok(CtlOut::Struct(set.encode(), 0))
            }
            super::IPC_SET => {
                set.perm.check_owner(creds)?;
                let CtlArg::Set { uid, gid, mode } = arg else { return Err(Errno::EINVAL) };
                set.perm.set(uid, gid, mode);
                set.ctime = now();
                Ok(CtlOut::Value(0))
            }
            super::IPC_RMID => {
                set.perm.check_owner(creds)?;
                set.removed = true;
                set.queue.notify_all();
                sets.remove(id);
                Ok(CtlOut::Value(0))
            }
            GETVAL | GETPID | GETNCNT | GETZCNT => {
                set.perm.check(creds, S_IRUGO)?;
                let n = sem_index(num)?;
                Ok(CtlOut::Value(match cmd {
                    GETVAL => set.sems[n].value as i64,
                    GETPID => set.sems[n].pid as i64,
                    _ => {
                        let zero = cmd == GETZCNT;
                        set.waiting.values().filter(|w| w.num as usize == n && w.zero == zero).count() as i64
                    }
                }))
            }
            GETALL => {
                set.perm.check(creds, S_IRUGO)?;
                Ok(CtlOut::Values(set.sems.iter().map(|s| s.value as u16).collect()))
            }
            SETVAL => {
                let n = sem_index(num)?;
                let CtlArg::Value(v) = arg else { return Err(Errno::EINVAL) };
                if !(0..=SEMVMX).contains(&v) {
                    return Err(Errno::ERANGE);
                }
                set.perm.check(creds, S_IWUGO)?;
                set.sems[n] = Sem { value: v, pid };
                set.clear_undo(Some(n));
                set.ctime = now();
                set.queue.notify_all();
                Ok(CtlOut::Value(0))
            }
            SETALL => {
                set.perm.check(creds, S_IWUGO)?;
                let CtlArg::Values(vs) = arg else { return Err(Errno::EINVAL) };
                if vs.len() != nsems || vs.iter().any(|v| *v as i32 > SEMVMX) {
                    return Err(Errno::ERANGE);
                }
                for (s, v) in set.sems.iter_mut().zip(vs) {
                    *s = Sem { value: v as i32, pid };
                }
                set.clear_undo(None);
                set.ctime = now();
                set.queue.notify_all();
                Ok(CtlOut::Value(0))
            }
            _ => Err(Errno::EINVAL),
        }
    }

    /// The number of semaphores in set `id` (what GETALL and SETALL copy),
    /// checked for reading.
    pub fn nsems(&self, id: i32) -> Result<usize, Errno> {
        Ok(self.sets.lock().unwrap().get(id)?.sems.len())
    }

    /// Applies and forgets the SEM_UNDO adjustments of process `tgid`, as
    /// Linux's exit_sem(): each value moves by its adjustment, kept within
    /// 0..=SEMVMX.
    pub fn exit_process(&self, tgid: i32) {
        let mut sets = self.sets.lock().unwrap();
        for (_, set) in sets.iter_mut() {
            let Some(adjust) = set.undo.remove(&tgid) else { continue };
            if adjust.iter().all(|a| *a == 0) {
                continue;
            }
            for (s, a) in set.sems.iter_mut().zip(adjust) {
                if a != 0 {
                    s.value = (s.value + a).clamp(0, SEMVMX);
                    s.pid = tgid;
                }
            }
            set.otime = now();
            set.queue.notify_all();
        }
    }

    /// /proc/sysvipc/sem.
    pub fn proc_lines(&self) -> String {
        let mut s =
            String::from("       key      semid perms      nsems   uid   gid  cuid  cgid      otime      ctime\n");
        for (id, set) in self.sets.lock().unwrap().iter() {
            let p = &set.perm;
            let _ = writeln!(
                s,
                "{:>10} {:>10}  {:>4o} {:>10} {:>5} {:>5} {:>5} {:>5} {:>10} {:>10}",
                p.key,
                id,
                p.mode,
                set.sems.len(),
                p.uid,
                p.gid,
                p.cuid,
                p.cgid,
                set.otime,
                set.ctime
            );
        }
        s
    }
}
