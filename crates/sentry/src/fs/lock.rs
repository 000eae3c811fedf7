//! Advisory file locks (Linux's fs/locks.c): BSD `flock` locks, owned by an
//! open file description, and record locks (`fcntl` F_SETLK & co.) over
//! byte ranges, owned by a process's descriptor table (POSIX locks) or by an
//! open file description (OFD locks). Locks belong to a file, named by its
//! [`FileKey`], so separate opens and processes see each other's. The
//! owners are ids the callers pass in: this module knows nothing of tasks.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::{Context, FileKey, FsError};
use crate::waiter::WaitQueue;

/// The last byte a record lock can cover: a lock "to the end of the file"
/// ends here, whatever the file grows to (Linux's OFFSET_MAX).
pub const OFFSET_MAX: i64 = i64::MAX;

/// Who holds a record lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LockOwner {
    /// A process, by the id of its descriptor table (POSIX locks): every
    /// thread sharing the table shares the locks, a forked child does not.
    Process(u64),
    /// An open file description, by its id (OFD locks).
    File(u64),
}

/// Shared (read) or exclusive (write).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockKind {
    Read,
    Write,
}

/// One record lock: bytes `start..=end` of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordLock {
    pub owner: LockOwner,
    /// The process that set it, as F_GETLK reports (-1 for OFD locks).
    pub pid: i32,
    pub kind: LockKind,
    pub start: i64,
    pub end: i64,
}

impl RecordLock {
    fn overlaps(&self, other: &RecordLock) -> bool {
        self.start <= other.end && other.start <= self.end
    }

    /// Would `self`, held by another owner, keep `req` from being granted?
    fn blocks(&self, req: &RecordLock) -> bool {
        self.owner != req.owner && self.overlaps(req) && (self.kind == LockKind::Write || req.kind == LockKind::Write)
    }
}

#[derive(Default)]
struct State {
    /// flock locks: the id of the owning description and the kind.
    flocks: Vec<(u64, LockKind)>,
    /// Record locks of every owner, each owner's sorted by start, never
    /// overlapping each other, and merged with adjacent ones of its kind.
    records: Vec<RecordLock>,
}

impl State {
    fn is_empty(&self) -> bool {
        self.flocks.is_empty() && self.records.is_empty()
    }

    fn first_blocker(&self, req: &RecordLock) -> Option<RecordLock> {
        self.records.iter().filter(|l| l.blocks(req)).min_by_key(|l| l.start).copied()
    }

    /// Sets (`kind` Some) or clears bytes `start..=end` of `owner`'s locks,
    /// splitting the locks that straddle the range and merging the new one
    /// with overlapping or adjacent locks of the same kind, as Linux's
    /// posix_lock_inode does.
    fn apply(&mut self, owner: LockOwner, pid: i32, kind: Option<LockKind>, start: i64, end: i64) {
        let mut new = kind.map(|kind| RecordLock { owner, pid, kind, start, end });
        let mut kept = Vec::with_capacity(self.records.len() + 2);
        for l in self.records.drain(..) {
            if l.owner != owner {
                kept.push(l);
                continue;
            }
            if let Some(n) = new.as_mut()
                && l.kind == n.kind
                && l.start <= n.end.saturating_add(1)
                && n.start <= l.end.saturating_add(1)
            {
                n.start = n.start.min(l.start);
                n.end = n.end.max(l.end);
                continue;
            }
            if l.end < start || l.start > end {
                kept.push(l);
                continue;
            }
            if l.start < start {
                kept.push(RecordLock { end: start - 1, ..l });
            }
            if l.end > end {
                kept.push(RecordLock { start: end + 1, ..l });
            }
        }
        kept.extend(new);
        kept.sort_by_key(|l| l.start);
        self.records = kept;
    }
}

/// The locks of one file and the tasks waiting to take one.
pub struct FileLocks {
    state: Mutex<State>,
    /// Woken whenever a lock goes or is weakened.
    queue: WaitQueue,
}

/// Every file that has locks or waiters. An entry is dropped once its file
/// has neither, so files never locked cost nothing.
static FILES: Mutex<Option<HashMap<FileKey, Arc<FileLocks>>>> = Mutex::new(None);

/// What each POSIX owner blocked in F_SETLKW waits for: the file and the
/// lock asked for. Held while a blocking request is tried and while the
/// chain of waiters is followed, so two owners can never both start
/// waiting on each other (Linux's blocked_lock_lock).
static WAITING: Mutex<Option<Waiting>> = Mutex::new(None);

/// Each waiting owner's file and request.
type Waiting = HashMap<LockOwner, (Arc<FileLocks>, RecordLock)>;

/// How many owners a chain of waiters is followed through before giving
/// up on finding a cycle (Linux's MAX_DEADLK_ITERATIONS is 10).
const MAX_DEADLOCK_STEPS: usize = 64;

/// The locks of `key`, made if it has none.
fn file_locks(key: FileKey) -> Arc<FileLocks> {
    let mut files = FILES.lock().unwrap();
    files
        .get_or_insert_with(HashMap::new)
        .entry(key)
        .or_insert_with(|| Arc::new(FileLocks { state: Mutex::new(State::default()), queue: WaitQueue::default() }))
        .clone()
}

/// The locks of `key` if it has any.
fn existing(key: FileKey) -> Option<Arc<FileLocks>> {
    FILES.lock().unwrap().as_ref()?.get(&key).cloned()
}

/// Gives back a reference from [`file_locks`], dropping the file's entry
/// if nothing is locked and nobody else holds it (a waiter does).
fn put(key: FileKey, locks: Arc<FileLocks>) {
    let mut files = FILES.lock().unwrap();
    if Arc::strong_count(&locks) == 2
        && locks.state.lock().unwrap().is_empty()
        && let Some(map) = files.as_mut()
    {
        map.remove(&key);
    }
}

/// flock(2): takes (`kind` Some) or drops the lock of the description
/// `file`. A description holding the other kind loses it first, so a
/// conversion is not atomic, as in Linux. With `nonblock`, a conflicting
/// lock gives EWOULDBLOCK; otherwise the call waits, interruptibly.
pub fn flock(ctx: &Context, key: FileKey, file: u64, kind: Option<LockKind>, nonblock: bool) -> Result<(), FsError> {
    let locks = file_locks(key);
    let r = flock_in(ctx, &locks, file, kind, nonblock);
    put(key, locks);
    r
}

fn flock_in(
    ctx: &Context,
    locks: &FileLocks,
    file: u64,
    kind: Option<LockKind>,
    nonblock: bool,
) -> Result<(), FsError> {
    {
        let mut st = locks.state.lock().unwrap();
        if let Some(i) = st.flocks.iter().position(|(f, _)| *f == file) {
            if Some(st.flocks[i].1) == kind {
                return Ok(());
            }
            st.flocks.remove(i);
            drop(st);
            locks.queue.notify_all();
        }
    }
    let Some(kind) = kind else { return Ok(()) };
    let try_lock = || {
        let mut st = locks.state.lock().unwrap();
        let conflict = st.flocks.iter().any(|(f, k)| *f != file && (*k == LockKind::Write || kind == LockKind::Write));
        (!conflict).then(|| st.flocks.push((file, kind)))
    };
    if try_lock().is_some() {
        return Ok(());
    }
    if nonblock {
        return Err(FsError::WouldBlock);
    }
    ctx.block_on(&[&locks.queue], None, try_lock).map_err(|_| FsError::Interrupted)
}

/// F_GETLK: the first lock that would keep `req` from being granted.
pub fn test(key: FileKey, req: &RecordLock) -> Option<RecordLock> {
    let locks = existing(key)?;
    locks.state.lock().unwrap().first_blocker(req)
}

/// F_SETLK and F_SETLKW: sets (`req.kind` Some) or clears the owner's
/// locks over `req`'s range. A conflict gives EAGAIN, or with `wait`
/// blocks interruptibly until the range is free; a POSIX owner whose
/// wait would close a cycle of owners waiting on each other gets EDEADLK.
pub fn set(
    ctx: &Context,
    key: FileKey,
    owner: LockOwner,
    pid: i32,
    kind: Option<LockKind>,
    (start, end): (i64, i64),
    wait: bool,
) -> Result<(), FsError> {
    let Some(kind) = kind else {
        if let Some(locks) = existing(key) {
            locks.state.lock().unwrap().apply(owner, pid, None, start, end);
            locks.queue.notify_all();
            put(key, locks);
        }
        return Ok(());
    };
    let req = RecordLock { owner, pid, kind, start, end };
    let locks = file_locks(key);
    let r = set_in(ctx, &locks, &req, wait);
    put(key, locks);
    r
}

fn set_in(ctx: &Context, locks: &Arc<FileLocks>, req: &RecordLock, wait: bool) -> Result<(), FsError> {
    let granted = {
        let mut st = locks.state.lock().unwrap();
        let free = st.first_blocker(req).is_none();
        if free {
            st.apply(req.owner, req.pid, Some(req.kind), req.start, req.end);
        }
        free
    };
    if granted {
        // Replacing a write lock by a read lock lets readers in.
        locks.queue.notify_all();
        return Ok(());
    }
    if !wait {
        return Err(FsError::WouldBlock);
    }
    let _waiting = WaitEntry { owner: req.owner };
    let mut deadlock = false;
    let r = ctx.block_on(&[&locks.queue], None, || {
        let mut waiting = WAITING.lock().unwrap();
        let waiting = waiting.get_or_insert_with(HashMap::new);
        let blockers: Vec<LockOwner> = {
            let mut st = locks.state.lock().unwrap();
            let blockers: Vec<LockOwner> = st.records.iter().filter(|l| l.blocks(req)).map(|l| l.owner).collect();
            if blockers.is_empty() {
                st.apply(req.owner, req.pid, Some(req.kind), req.start, req.end);
                waiting.remove(&req.owner);
                return Some(());
            }
            blockers
        };
        if matches!(req.owner, LockOwner::Process(_)) {
            if closes_cycle(waiting, req.owner, blockers) {
                deadlock = true;
                return Some(());
            }
            waiting.insert(req.owner, (locks.clone(), *req));
        }
        None
    });
    match r {
        Ok(()) if deadlock => Err(FsError::Deadlock),
        Ok(()) => {
            locks.queue.notify_all();
            Ok(())
        }
        Err(_) => Err(FsError::Interrupted),
    }
}

/// Removes an owner from [`WAITING`] however its wait ends.
struct WaitEntry {
    owner: LockOwner,
}

impl Drop for WaitEntry {
    fn drop(&mut self) {
        if let Some(w) = WAITING.lock().unwrap().as_mut() {
            w.remove(&self.owner);
        }
    }
}

/// Linux's posix_locks_deadlock: would `me`, waiting for locks of
/// `blockers`, wait for itself? Follows each blocker to what it waits for
/// in turn; only POSIX owners wait in [`WAITING`].
fn closes_cycle(waiting: &Waiting, me: LockOwner, mut blockers: Vec<LockOwner>) -> bool {
    let mut steps = 0;
    while let Some(o) = blockers.pop() {
        if o == me {
            return true;
        }
        steps += 1;
        if steps > MAX_DEADLOCK_STEPS {
            return false;
        }
        if let Some((locks, want)) = waiting.get(&o) {
            let st = locks.state.lock().unwrap();
            blockers.extend(st.records.iter().filter(|l| l.blocks(want)).map(|l| l.owner));
        }
    }
    false
}

/// Drops every lock of `key` the predicate picks, waking waiters if any went.
fn release_where(key: FileKey, pick: impl Fn(&State) -> bool, drop_locks: impl FnOnce(&mut State)) {
    let Some(locks) = existing(key) else { return };
    let changed = {
        let mut st = locks.state.lock().unwrap();
        let had = pick(&st);
        if had {
            drop_locks(&mut st);
        }
        had
    };
    if changed {
        locks.queue.notify_all();
    }
    put(key, locks);
}

/// A process closed a descriptor of `key`: its POSIX locks on the file go,
/// whichever descriptor set them (Linux's locks_remove_posix).
pub fn release_process(key: FileKey, table: u64) {
    let owner = LockOwner::Process(table);
    release_where(key, |st| st.records.iter().any(|l| l.owner == owner), |st| st.records.retain(|l| l.owner != owner));
}

/// The last reference to the description `file` of `key` went: its flock
/// and OFD locks go (Linux's locks_remove_file).
pub fn release_file(key: FileKey, file: u64) {
    let owner = LockOwner::File(file);
    release_where(
        key,
        |st| st.flocks.iter().any(|(f, _)| *f == file) || st.records.iter().any(|l| l.owner == owner),
        |st| {
            st.flocks.retain(|(f, _)| *f != file);
            st.records.retain(|l| l.owner != owner);
        },
    );
}

/// A descriptor table went away: every POSIX lock it owned goes, on every
/// file.
pub fn release_table(table: u64) {
    let keys: Vec<FileKey> = match FILES.lock().unwrap().as_ref() {
        Some(m) => m.keys().copied().collect(),
        None => return,
    };
    for key in keys {
        release_process(key, table);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: LockOwner = LockOwner::Process(1);
    const B: LockOwner = LockOwner::Process(2);

    fn ranges(st: &State, owner: LockOwner) -> Vec<(LockKind, i64, i64)> {
        st.records.iter().filter(|l| l.owner == owner).map(|l| (l.kind, l.start, l.end)).collect()
    }

    #[test]
    fn unlocking_the_middle_splits_a_lock() {
        let mut st = State::default();
        st.apply(A, 1, Some(LockKind::Write), 0, 99);
        st.apply(A, 1, None, 10, 19);
        assert_eq!(ranges(&st, A), [(LockKind::Write, 0, 9), (LockKind::Write, 20, 99)]);
        st.apply(A, 1, Some(LockKind::Read), 5, 24);
        assert_eq!(ranges(&st, A), [(LockKind::Write, 0, 4), (LockKind::Read, 5, 24), (LockKind::Write, 25, 99)]);
    }

    #[test]
    fn adjacent_locks_of_a_kind_merge() {
        let mut st = State::default();
        st.apply(A, 1, Some(LockKind::Read), 0, 4);
        st.apply(A, 1, Some(LockKind::Read), 10, 14);
        st.apply(A, 1, Some(LockKind::Read), 5, 9);
        assert_eq!(ranges(&st, A), [(LockKind::Read, 0, 14)]);
        st.apply(A, 1, Some(LockKind::Read), 12, OFFSET_MAX);
        assert_eq!(ranges(&st, A), [(LockKind::Read, 0, OFFSET_MAX)]);
    }

    #[test]
    fn only_other_owners_and_writes_conflict() {
        let mut st = State::default();
        st.apply(A, 1, Some(LockKind::Read), 0, 9);
        let req = |owner, kind, start, end| RecordLock { owner, pid: 2, kind, start, end };
        assert!(st.first_blocker(&req(B, LockKind::Read, 0, 9)).is_none());
        assert_eq!(st.first_blocker(&req(B, LockKind::Write, 9, 20)).map(|l| l.owner), Some(A));
        assert!(st.first_blocker(&req(B, LockKind::Write, 10, 20)).is_none());
        assert!(st.first_blocker(&req(A, LockKind::Write, 0, 9)).is_none());
    }

    #[test]
    fn a_wait_on_a_waiter_for_us_is_a_cycle() {
        let locks = Arc::new(FileLocks { state: Mutex::new(State::default()), queue: WaitQueue::default() });
        locks.state.lock().unwrap().apply(A, 1, Some(LockKind::Write), 0, 0);
        locks.state.lock().unwrap().apply(B, 2, Some(LockKind::Write), 1, 1);
        let mut waiting = HashMap::new();
        // B waits for A's byte 0.
        waiting.insert(B, (locks.clone(), RecordLock { owner: B, pid: 2, kind: LockKind::Write, start: 0, end: 0 }));
        assert!(closes_cycle(&waiting, A, vec![B]), "A waiting for B's byte 1 would wait for itself");
        assert!(!closes_cycle(&waiting, LockOwner::Process(3), vec![B]));
    }
}
