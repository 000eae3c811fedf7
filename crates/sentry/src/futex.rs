//! Futexes: waiting on and waking application memory words.
//!
//! A futex is named by its address in one address space (private futexes,
//! and any futex in private memory), or by the frame and offset of its word
//! (futexes in shared memory, seen by several processes). Checking the word
//! and queueing a waiter happen under the table lock, so a wake that follows
//! a store the waiter has not seen is never lost.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::errno::Errno;
use crate::mm::MemoryManager;
use crate::task::{BlockError, TaskShared, block_on, current};

/// Owner-thread bits of a PI futex word.
const TID_MASK: u32 = 0x3fff_ffff;
const OWNER_DIED: u32 = 0x4000_0000;
const WAITERS: u32 = 0x8000_0000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Key {
    Private { mm: usize, addr: u64 },
    Shared { frame: u64, offset: u64 },
}

struct Waiter {
    task: Arc<TaskShared>,
    bitset: u32,
    woken: AtomicBool,
    key: Mutex<Key>,
}

/// Every waiting futex of the sandbox.
#[derive(Default)]
pub struct Futexes {
    queues: Mutex<HashMap<Key, VecDeque<Arc<Waiter>>>>,
}

fn key_of(mm: &Arc<MemoryManager>, addr: u64, private: bool) -> Result<Key, Errno> {
    if !addr.is_multiple_of(4) {
        return Err(Errno::EINVAL);
    }
    if !private && let Some((frame, offset)) = mm.shared_key(addr).map_err(|_| Errno::EFAULT)? {
        return Ok(Key::Shared { frame, offset });
    }
    Ok(Key::Private { mm: Arc::as_ptr(mm) as usize, addr })
}

fn load(mm: &MemoryManager, addr: u64) -> Result<u32, Errno> {
    mm.with_atomic_u32(addr, false, |a| a.load(Ordering::SeqCst)).map_err(|_| Errno::EFAULT)
}

impl Futexes {
    fn wake_key(queues: &mut HashMap<Key, VecDeque<Arc<Waiter>>>, key: Key, n: usize, bitset: u32) -> usize {
        let Some(q) = queues.get_mut(&key) else { return 0 };
        let mut woken = 0;
        let mut i = 0;
        while i < q.len() && woken < n {
            if q[i].bitset & bitset != 0 {
                let w = q.remove(i).expect("index in range");
                w.woken.store(true, Ordering::Release);
                w.task.waiter.wake();
                woken += 1;
            } else {
                i += 1;
            }
        }
        if q.is_empty() {
            queues.remove(&key);
        }
        woken
    }

    /// Blocks on a queued waiter until woken, the deadline or a signal.
    fn sleep(&self, w: &Arc<Waiter>, deadline: Option<Instant>) -> Result<(), BlockError> {
        let r = block_on(&*w.task, &[], deadline, || w.woken.load(Ordering::Acquire).then_some(()));
        if r.is_err() {
            let mut queues = self.queues.lock().unwrap();
            if w.woken.load(Ordering::Acquire) {
                return Ok(());
            }
            let key = *w.key.lock().unwrap();
            if let Some(q) = queues.get_mut(&key) {
                q.retain(|x| !Arc::ptr_eq(x, w));
                if q.is_empty() {
                    queues.remove(&key);
                }
            }
        }
        r
    }

    /// FUTEX_WAIT(_BITSET): sleeps if the word still holds `val`.
    pub fn wait(
        &self,
        mm: &Arc<MemoryManager>,
        addr: u64,
        private: bool,
        val: u32,
        bitset: u32,
        deadline: Option<Instant>,
    ) -> Result<(), Errno> {
        if bitset == 0 {
            return Err(Errno::EINVAL);
        }
        let key = key_of(mm, addr, private)?;
        let w = Arc::new(Waiter { task: current(), bitset, woken: AtomicBool::new(false), key: Mutex::new(key) });
        {
            let mut queues = self.queues.lock().unwrap();
            if load(mm, addr)? != val {
                return Err(Errno::EAGAIN);
            }
            queues.entry(key).or_default().push_back(w.clone());
        }
        match self.sleep(&w, deadline) {
            Ok(()) => Ok(()),
            Err(BlockError::TimedOut) => Err(Errno::ETIMEDOUT),
            Err(BlockError::Interrupted) => Err(if deadline.is_some() { Errno::EINTR } else { Errno::ERESTARTSYS }),
        }
    }

    /// FUTEX_WAKE(_BITSET): wakes up to `n` waiters; returns how many.
    pub fn wake(&self, mm: &Arc<MemoryManager>, addr: u64, private: bool, n: usize, bitset: u32) -> usize {
        let Ok(key) = key_of(mm, addr, private) else { return 0 };
        Self::wake_key(&mut self.queues.lock().unwrap(), key, n, bitset)
    }

    /// FUTEX_(CMP_)REQUEUE: wakes `n_wake` waiters of the first word and
    /// moves up to `n_move` of the rest to the second.
    #[allow(clippy::too_many_arguments)] // the operation's own arguments
    pub fn requeue(
        &self,
        mm: &Arc<MemoryManager>,
        addr: u64,
        addr2: u64,
        private: bool,
        n_wake: usize,
        n_move: usize,
        expect: Option<u32>,
    ) -> Result<usize, Errno> {
        let k1 = key_of(mm, addr, private)?;
        let k2 = key_of(mm, addr2, private)?;
        let mut queues = self.queues.lock().unwrap();
        if let Some(v) = expect
            && load(mm, addr)? != v
        {
            return Err(Errno::EAGAIN);
        }
        let woken = Self::wake_key(&mut queues, k1, n_wake, u32::MAX);
        let mut moved = Vec::new();
        if let Some(q) = queues.get_mut(&k1) {
            while moved.len() < n_move {
                let Some(w) = q.pop_front() else { break };
                *w.key.lock().unwrap() = k2;
                moved.push(w);
            }
            if q.is_empty() {
                queues.remove(&k1);
            }
        }
        let n = moved.len();
        queues.entry(k2).or_default().extend(moved);
        if queues.get(&k2).is_some_and(|q| q.is_empty()) {
            queues.remove(&k2);
        }
        Ok(woken + n)
    }

    /// FUTEX_WAKE_OP: applies `op` to the second word, wakes `n1` waiters of
    /// the first, and `n2` of the second if the old value passes the test.
    #[allow(clippy::too_many_arguments)] // the operation's own arguments
    pub fn wake_op(
        &self,
        mm: &Arc<MemoryManager>,
        addr: u64,
        addr2: u64,
        private: bool,
        n1: usize,
        n2: usize,
        op: u32,
    ) -> Result<usize, Errno> {
        let k1 = key_of(mm, addr, private)?;
        let k2 = key_of(mm, addr2, private)?;
        let sext12 = |v: u32| ((v << 20) as i32) >> 20;
        let mut oparg = sext12((op >> 12) & 0xfff);
        let cmparg = sext12(op & 0xfff);
        if op & (8 << 28) != 0 {
            if !(0..32).contains(&oparg) {
                return Err(Errno::EINVAL);
            }
            oparg = 1 << oparg;
        }
        let kind = (op >> 28) & 7;
        if kind > 4 || (op >> 24) & 0xf > 5 {
            return Err(Errno::ENOSYS);
        }
        let mut queues = self.queues.lock().unwrap();
        let old = mm
            .with_atomic_u32(addr2, true, |a| {
                let f = |o: u32| match kind {
                    0 => oparg as u32,
                    1 => o.wrapping_add(oparg as u32),
                    2 => o | oparg as u32,
                    3 => o & !(oparg as u32),
                    _ => o ^ oparg as u32,
                };
                match a.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |o| Some(f(o))) {
                    Ok(o) | Err(o) => o,
                }
            })
            .map_err(|_| Errno::EFAULT)? as i32;
        let pass = match (op >> 24) & 0xf {
            0 => old == cmparg,
            1 => old != cmparg,
            2 => old < cmparg,
            3 => old <= cmparg,
            4 => old > cmparg,
            _ => old >= cmparg,
        };
        let mut n = Self::wake_key(&mut queues, k1, n1, u32::MAX);
        if pass {
            n += Self::wake_key(&mut queues, k2, n2, u32::MAX);
        }
        Ok(n)
    }

    /// FUTEX_LOCK_PI / FUTEX_TRYLOCK_PI: takes a priority-inheritance lock
    /// (without the priority boost: tasks here have one priority).
    pub fn lock_pi(
        &self,
        mm: &Arc<MemoryManager>,
        addr: u64,
        private: bool,
        try_only: bool,
        deadline: Option<Instant>,
    ) -> Result<(), Errno> {
        let key = key_of(mm, addr, private)?;
        let me = current();
        let tid = me.tid() as u32;
        enum Step {
            Acquired,
            Deadlock,
            Wait,
        }
        let w = {
            let mut queues = self.queues.lock().unwrap();
            let has_waiters = queues.get(&key).is_some_and(|q| !q.is_empty());
            let step = mm
                .with_atomic_u32(addr, true, |a| {
                    loop {
                        let v = a.load(Ordering::SeqCst);
                        if v & TID_MASK == 0 {
                            let new = tid | (v & OWNER_DIED) | if has_waiters { WAITERS } else { 0 };
                            if a.compare_exchange(v, new, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
                                return Step::Acquired;
                            }
                        } else if v & TID_MASK == tid {
                            return Step::Deadlock;
                        } else if try_only
                            || v & WAITERS != 0
                            || a.compare_exchange(v, v | WAITERS, Ordering::SeqCst, Ordering::SeqCst).is_ok()
                        {
                            return Step::Wait;
                        }
                    }
                })
                .map_err(|_| Errno::EFAULT)?;
            match step {
                Step::Acquired => return Ok(()),
                Step::Deadlock => return Err(Errno::EDEADLK),
                Step::Wait if try_only => return Err(Errno::EBUSY),
                Step::Wait => {}
            }
            let w =
                Arc::new(Waiter { task: me, bitset: u32::MAX, woken: AtomicBool::new(false), key: Mutex::new(key) });
            queues.entry(key).or_default().push_back(w.clone());
            w
        };
        match self.sleep(&w, deadline) {
            Ok(()) => Ok(()),
            Err(BlockError::TimedOut) => Err(Errno::ETIMEDOUT),
            Err(BlockError::Interrupted) => Err(Errno::ERESTARTNOINTR),
        }
    }

    /// FUTEX_UNLOCK_PI: hands the lock to the first waiter, or frees it.
    pub fn unlock_pi(&self, mm: &Arc<MemoryManager>, addr: u64, private: bool) -> Result<(), Errno> {
        let key = key_of(mm, addr, private)?;
        let tid = current().tid() as u32;
        let mut queues = self.queues.lock().unwrap();
        if load(mm, addr)? & TID_MASK != tid {
            return Err(Errno::EPERM);
        }
        let next = queues.get_mut(&key).and_then(|q| q.pop_front());
        let more = queues.get(&key).is_some_and(|q| !q.is_empty());
        if !more {
            queues.remove(&key);
        }
        let value = match &next {
            Some(w) => w.task.tid() as u32 | if more { WAITERS } else { 0 },
            None => 0,
        };
        mm.with_atomic_u32(addr, true, |a| a.store(value, Ordering::SeqCst)).map_err(|_| Errno::EFAULT)?;
        if let Some(w) = next {
            w.woken.store(true, Ordering::Release);
            w.task.waiter.wake();
        }
        Ok(())
    }

    /// Number of tasks waiting on futexes.
    pub fn waiters(&self) -> usize {
        self.queues.lock().unwrap().values().map(|q| q.len()).sum()
    }
}
