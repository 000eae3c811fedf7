//! File descriptor tables. Lookup is O(1); allocating the lowest free
//! descriptor and freeing one are O(log n) through an ordered set of holes.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::fs::OpenFile;
use crate::fs::lock::{self, LockOwner};

/// Most descriptors a process may have (fs.nr_open): RLIMIT_NOFILE's hard
/// limit may not go above it, whatever the privilege.
pub const NR_OPEN: u64 = 1 << 20;

/// Errors of descriptor operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FdError {
    #[error("bad file descriptor")]
    BadFd,
    #[error("too many open files")]
    TooMany,
}

/// One descriptor.
#[derive(Clone)]
pub struct FdEntry {
    pub file: Arc<OpenFile>,
    pub cloexec: bool,
}

#[derive(Clone, Default)]
struct Table {
    slots: Vec<Option<FdEntry>>,
    /// Free descriptor numbers below `slots.len()`.
    holes: BTreeSet<u32>,
}

/// A process's descriptors (shared by threads and CLONE_FILES children).
/// The table is what owns the process's POSIX record locks, as Linux's
/// files_struct does: closing any descriptor of a file drops them on that
/// file, and so does the table's end with the process.
pub struct FdTable {
    table: Mutex<Table>,
    limit: Mutex<u32>,
    /// Unique for the life of the sentry: the owner id of the locks.
    id: u64,
    /// Set once a POSIX lock was taken through this table, so that closes
    /// of a table that never locked skip the lock table.
    has_locks: AtomicBool,
}

impl Default for FdTable {
    fn default() -> Self {
        FdTable::new(1024)
    }
}

impl FdTable {
    pub fn new(limit: u32) -> Self {
        FdTable::with_table(Table::default(), limit)
    }

    fn with_table(table: Table, limit: u32) -> Self {
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        FdTable {
            table: Mutex::new(table),
            limit: Mutex::new(limit),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            has_locks: AtomicBool::new(false),
        }
    }

    /// The owner of the POSIX record locks taken through this table; the
    /// caller is about to take one.
    pub fn lock_owner(&self) -> LockOwner {
        self.has_locks.store(true, Ordering::Relaxed);
        LockOwner::Process(self.id)
    }

    /// The owner id of this table's POSIX locks, for asking about locks
    /// without taking one.
    pub fn lock_owner_id(&self) -> u64 {
        self.id
    }

    /// Descriptors were closed: the process's POSIX locks on their files go.
    fn closed<'a>(&self, entries: impl IntoIterator<Item = &'a FdEntry>) {
        if !self.has_locks.load(Ordering::Relaxed) {
            return;
        }
        for e in entries {
            if let Ok(key) = e.file.key() {
                lock::release_process(key, self.id);
            }
        }
    }

    /// RLIMIT_NOFILE: descriptors must be below this.
    pub fn set_limit(&self, limit: u32) {
        *self.limit.lock().unwrap() = limit;
    }

    pub fn limit(&self) -> u32 {
        *self.limit.lock().unwrap()
    }

    /// The open file of `fd`.
    pub fn get(&self, fd: i32) -> Result<Arc<OpenFile>, FdError> {
        self.entry(fd).map(|e| e.file)
    }

    /// The descriptor `fd`.
    pub fn entry(&self, fd: i32) -> Result<FdEntry, FdError> {
        let t = self.table.lock().unwrap();
        usize::try_from(fd).ok().and_then(|i| t.slots.get(i)).and_then(|e| e.clone()).ok_or(FdError::BadFd)
    }

    /// Installs `file` at the lowest free descriptor not below `min`.
    pub fn install(&self, file: Arc<OpenFile>, cloexec: bool, min: u32) -> Result<i32, FdError> {
        let limit = self.limit();
        if min >= limit {
            return Err(FdError::TooMany);
        }
        let mut t = self.table.lock().unwrap();
        let fd = match t.holes.range(min..).next().copied() {
            // Holes above a lowered limit are not free to use.
            Some(h) if h >= limit => return Err(FdError::TooMany),
            Some(h) => {
                t.holes.remove(&h);
                h
            }
            None => {
                let len = t.slots.len() as u32;
                let fd = len.max(min);
                if fd >= limit {
                    return Err(FdError::TooMany);
                }
                for gap in len..fd {
                    t.holes.insert(gap);
                }
                t.slots.resize(fd as usize + 1, None);
                fd
            }
        };
        t.slots[fd as usize] = Some(FdEntry { file, cloexec });
        Ok(fd as i32)
    }

    /// Installs `file` at exactly `fd` (dup2), returning what was there.
    pub fn install_at(&self, fd: i32, file: Arc<OpenFile>, cloexec: bool) -> Result<Option<FdEntry>, FdError> {
        let fd = u32::try_from(fd).map_err(|_| FdError::BadFd)?;
        if fd >= self.limit() {
            return Err(FdError::BadFd);
        }
        let mut t = self.table.lock().unwrap();
        let len = t.slots.len() as u32;
        if fd >= len {
            for gap in len..fd {
                t.holes.insert(gap);
            }
            t.slots.resize(fd as usize + 1, None);
        } else {
            t.holes.remove(&fd);
        }
        let old = t.slots[fd as usize].replace(FdEntry { file, cloexec });
        drop(t);
        self.closed(old.iter());
        Ok(old)
    }

    /// Closes `fd`, returning its entry.
    pub fn remove(&self, fd: i32) -> Result<FdEntry, FdError> {
        let mut t = self.table.lock().unwrap();
        let i = usize::try_from(fd).map_err(|_| FdError::BadFd)?;
        let e = t.slots.get_mut(i).and_then(Option::take).ok_or(FdError::BadFd)?;
        t.holes.insert(i as u32);
        drop(t);
        self.closed([&e]);
        Ok(e)
    }

    /// Sets or clears close-on-exec.
    pub fn set_cloexec(&self, fd: i32, on: bool) -> Result<(), FdError> {
        let mut t = self.table.lock().unwrap();
        let e =
            usize::try_from(fd).ok().and_then(|i| t.slots.get_mut(i)).and_then(|e| e.as_mut()).ok_or(FdError::BadFd)?;
        e.cloexec = on;
        Ok(())
    }

    /// Closes every close-on-exec descriptor (at execve).
    pub fn close_on_exec(&self) -> Vec<FdEntry> {
        let mut t = self.table.lock().unwrap();
        let mut closed = Vec::new();
        let mut freed = Vec::new();
        for (i, slot) in t.slots.iter_mut().enumerate() {
            if slot.as_ref().is_some_and(|e| e.cloexec) {
                closed.push(slot.take().expect("checked"));
                freed.push(i as u32);
            }
        }
        t.holes.extend(freed);
        drop(t);
        self.closed(&closed);
        closed
    }

    /// Closes descriptors in `[first, last]` (close_range), returning them.
    pub fn remove_range(&self, first: u32, last: u32) -> Vec<FdEntry> {
        let mut t = self.table.lock().unwrap();
        let end = (last as usize).saturating_add(1).min(t.slots.len());
        let mut closed = Vec::new();
        for i in first as usize..end {
            if let Some(e) = t.slots[i].take() {
                closed.push(e);
                t.holes.insert(i as u32);
            }
        }
        drop(t);
        self.closed(&closed);
        closed
    }

    /// A copy for a child that does not share the table (fork without
    /// CLONE_FILES): the same open files, independent descriptors.
    pub fn fork(&self) -> FdTable {
        FdTable::with_table(self.table.lock().unwrap().clone(), self.limit())
    }

    /// Every open descriptor, in order.
    pub fn list(&self) -> Vec<(i32, FdEntry)> {
        let t = self.table.lock().unwrap();
        t.slots.iter().enumerate().filter_map(|(i, e)| e.clone().map(|e| (i as i32, e))).collect()
    }

    /// Number of open descriptors.
    pub fn count(&self) -> usize {
        let t = self.table.lock().unwrap();
        t.slots.len() - t.holes.len()
    }
}

/// The table's last user is gone (the process exited, or execve gave it
/// a table of its own): its POSIX locks go with it.
impl Drop for FdTable {
    fn drop(&mut self) {
        if *self.has_locks.get_mut() {
            lock::release_table(self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::{FileOps, FsError, OpenFlags, Stat};

    struct Dummy;
    impl FileOps for Dummy {
        fn stat(&self) -> Result<Stat, FsError> {
            Ok(Stat::default())
        }
    }

    fn file() -> Arc<OpenFile> {
        OpenFile::new(Arc::new(Dummy), None, OpenFlags::empty())
    }

    #[test]
    fn lowest_free_first() {
        let t = FdTable::new(64);
        for want in 0..5 {
            assert_eq!(t.install(file(), false, 0).unwrap(), want);
        }
        t.remove(1).unwrap();
        t.remove(3).unwrap();
        assert_eq!(t.install(file(), false, 0).unwrap(), 1);
        assert_eq!(t.install(file(), false, 2).unwrap(), 3, "F_DUPFD takes the lowest at or above its argument");
        assert_eq!(t.install(file(), false, 10).unwrap(), 10);
        assert_eq!(t.install(file(), false, 0).unwrap(), 5, "the gap below 10 is free");
        assert_eq!(t.count(), 7);
    }

    #[test]
    fn dup2_replaces_and_limits_apply() {
        let t = FdTable::new(8);
        let a = file();
        t.install(a.clone(), false, 0).unwrap();
        assert!(t.install_at(0, file(), true).unwrap().is_some());
        assert!(t.entry(0).unwrap().cloexec);
        assert!(t.install_at(5, a, false).unwrap().is_none());
        assert_eq!(t.install(file(), false, 0).unwrap(), 1, "holes below a dup2 target are free");
        assert_eq!(t.install_at(8, file(), false).err(), Some(FdError::BadFd));
        assert_eq!(t.install(file(), false, 8).unwrap_err(), FdError::TooMany);
        for _ in 0..5 {
            let _ = t.install(file(), false, 0);
        }
        assert_eq!(t.install(file(), false, 0).unwrap_err(), FdError::TooMany);
        assert_eq!(t.get(-1).err(), Some(FdError::BadFd));
        // Lowering the limit below free descriptors leaves those unusable.
        t.remove(7).unwrap();
        t.remove(6).unwrap();
        t.set_limit(7);
        assert_eq!(t.install(file(), false, 0).unwrap(), 6);
        assert_eq!(t.install(file(), false, 0).unwrap_err(), FdError::TooMany, "hole 7 is beyond the limit");
        assert_eq!(t.remove(100).err(), Some(FdError::BadFd));
    }

    #[test]
    fn close_on_exec_and_fork() {
        let t = FdTable::new(64);
        t.install(file(), false, 0).unwrap();
        t.install(file(), true, 0).unwrap();
        let child = t.fork();
        assert_eq!(t.close_on_exec().len(), 1);
        assert!(t.get(1).is_err());
        assert!(child.get(1).is_ok(), "the fork copy is independent");
        assert_eq!(t.install(file(), false, 0).unwrap(), 1);
        assert_eq!(child.remove_range(0, u32::MAX).len(), 2);
        assert_eq!(child.count(), 0);
    }
}
