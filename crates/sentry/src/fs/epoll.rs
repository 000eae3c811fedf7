//! epoll: an interest list of (descriptor, open file) pairs and the
//! readiness scan behind epoll_wait. Readiness comes from the files' own
//! `poll`; each entry forwards the wakes of its file's queue to the
//! instance's own queue, where waiters sleep. The waiting itself is the
//! syscall layer's.
//!
//! An entry holds its file weakly, and a waiter holds none of them: like
//! Linux, a file goes away when its open file description is closed
//! everywhere, even while a thread waits on an epoll instance watching it
//! (the other end of a pipe sees the hang-up), and an entry outlives a close
//! of one descriptor while a duplicate keeps the file open.

use std::collections::BTreeMap;
use std::ops::Bound::{Excluded, Unbounded};
use std::sync::{Arc, Mutex, Weak};

use linux_raw_sys::general as g;

use super::{FileOps, FsError, OpenFile, POLLIN, POLLRDNORM, Stat};
use crate::waiter::Forward;
use crate::waiter::WaitQueue;

/// Flags that steer an entry rather than name events.
const CONTROL: u32 = g::EPOLLET | g::EPOLLONESHOT | g::EPOLLWAKEUP | g::EPOLLEXCLUSIVE;

/// An interest-list key: the descriptor number and the file it named when
/// added (Linux keys on both).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key {
    pub fd: i32,
    file: usize,
}

impl Key {
    pub fn new(fd: i32, file: &Arc<OpenFile>) -> Key {
        Key { fd, file: Arc::as_ptr(file) as usize }
    }
}

struct Entry {
    file: Weak<OpenFile>,
    events: u32,
    data: u64,
    /// EPOLLONESHOT fired: nothing is reported until EPOLL_CTL_MOD.
    disabled: bool,
    /// EPOLLET: the file's queue generation when it was last reported.
    reported_at: Option<u64>,
    /// Passes the file's wakes to the instance's waiters while the entry
    /// lasts.
    _forward: Option<Arc<Forward>>,
}

/// One event for epoll_wait to hand out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ready {
    pub events: u32,
    pub data: u64,
}

#[derive(Default)]
struct State {
    entries: BTreeMap<Key, Entry>,
    /// The scan starts after the entry reported last, so files that stay
    /// ready take turns when there are more of them than a wait takes.
    resume_after: Option<Key>,
}

#[derive(Default)]
pub struct Epoll {
    state: Mutex<State>,
    /// Woken when a watched file's queue is, and when the interest list
    /// changes, so a wait sees new entries.
    queue: Arc<WaitQueue>,
}

impl Epoll {
    pub fn add(&self, key: Key, file: &Arc<OpenFile>, events: u32, data: u64) -> Result<(), FsError> {
        let mut st = self.state.lock().unwrap();
        if st.entries.get(&key).is_some_and(|e| e.file.strong_count() > 0) {
            return Err(FsError::Exists);
        }
        let forward = file.ops.poll_queue().map(|q| Forward::new(q, self.queue.clone()));
        let entry =
            Entry { file: Arc::downgrade(file), events, data, disabled: false, reported_at: None, _forward: forward };
        st.entries.insert(key, entry);
        drop(st);
        self.queue.notify_all();
        Ok(())
    }

    pub fn modify(&self, key: Key, events: u32, data: u64) -> Result<(), FsError> {
        let mut st = self.state.lock().unwrap();
        let e = st.entries.get_mut(&key).filter(|e| e.file.strong_count() > 0).ok_or(FsError::NotFound)?;
        if e.events & g::EPOLLEXCLUSIVE != 0 {
            return Err(FsError::Invalid);
        }
        e.events = events;
        e.data = data;
        e.disabled = false;
        e.reported_at = None;
        drop(st);
        self.queue.notify_all();
        Ok(())
    }

    pub fn remove(&self, key: Key) -> Result<(), FsError> {
        let mut st = self.state.lock().unwrap();
        match st.entries.remove(&key) {
            Some(e) if e.file.strong_count() > 0 => Ok(()),
            _ => Err(FsError::NotFound),
        }
    }

    /// The watched files that are host descriptors, and the events asked
    /// of each, for a wait to poll in the host for just those events
    /// (polling a terminal for output when only input is wanted would wake
    /// at once, every time). The host poll holds these files, as poll(2)
    /// holds its files; the sentry's own files wake the instance's queue
    /// and are not held.
    pub fn watched_host_files(&self) -> Vec<(Arc<OpenFile>, u32)> {
        let st = self.state.lock().unwrap();
        st.entries
            .values()
            .filter(|e| !e.disabled)
            .filter_map(|e| {
                let f = e.file.upgrade()?;
                f.ops.host_fd().is_some().then_some((f, e.events & !CONTROL))
            })
            .collect()
    }

    /// The queue a waiter sleeps on: woken by the watched files and by
    /// changes of the interest list.
    pub fn queue(&self) -> &WaitQueue {
        &self.queue
    }

    /// Takes up to `max` events, applying EPOLLET and EPOLLONESHOT, and
    /// forgets entries whose files are closed.
    pub fn collect(&self, max: usize) -> Vec<Ready> {
        let mut st = self.state.lock().unwrap();
        let st = &mut *st;
        let split = st.resume_after;
        let keys: Vec<Key> = match split {
            // Strictly after `k`, which may have been removed since.
            Some(k) => {
                st.entries.range((Excluded(k), Unbounded)).chain(st.entries.range(..=k)).map(|(k, _)| *k).collect()
            }
            None => st.entries.keys().copied().collect(),
        };
        let mut out = Vec::new();
        let mut dead = Vec::new();
        for key in keys {
            if out.len() == max {
                break;
            }
            let e = st.entries.get_mut(&key).expect("listed");
            let Some(file) = e.file.upgrade() else {
                dead.push(key);
                continue;
            };
            if e.disabled {
                continue;
            }
            // The generation is read before the readiness: a change in
            // between is reported again rather than lost.
            let generation = file.ops.poll_queue().map(WaitQueue::generation);
            let events = file.ops.poll() & ((e.events & !CONTROL) | g::EPOLLERR | g::EPOLLHUP);
            if events == 0 {
                continue;
            }
            if e.events & g::EPOLLET != 0 && generation.is_some() {
                if e.reported_at == generation {
                    continue;
                }
                e.reported_at = generation;
            }
            if e.events & g::EPOLLONESHOT != 0 {
                e.disabled = true;
            }
            out.push(Ready { events, data: e.data });
            st.resume_after = Some(key);
        }
        for k in dead {
            st.entries.remove(&k);
        }
        out
    }

    /// True if a wait would report something now (poll on the epoll
    /// descriptor itself); nothing is consumed.
    fn any_ready(&self) -> bool {
        let st = self.state.lock().unwrap();
        st.entries.values().any(|e| {
            !e.disabled
                && e.file.upgrade().is_some_and(|f| {
                    let generation = f.ops.poll_queue().map(WaitQueue::generation);
                    let et_seen = e.events & g::EPOLLET != 0 && generation.is_some() && e.reported_at == generation;
                    !et_seen && f.ops.poll() & ((e.events & !CONTROL) | g::EPOLLERR | g::EPOLLHUP) != 0
                })
        })
    }
}

impl FileOps for Epoll {
    fn stat(&self) -> Result<Stat, FsError> {
        Ok(super::synthetic::anon_inode_stat())
    }

    fn poll(&self) -> u32 {
        if self.any_ready() { POLLIN | POLLRDNORM } else { 0 }
    }

    fn poll_queue(&self) -> Option<&WaitQueue> {
        Some(&self.queue)
    }

    fn anon_name(&self) -> Option<&'static str> {
        Some("anon_inode:[eventpoll]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::OpenFlags;
    use crate::fs::eventfd::EventFd;

    fn counter(initial: u64) -> Arc<OpenFile> {
        OpenFile::new(Arc::new(EventFd::new(initial, false)), None, OpenFlags::RDWR)
    }

    fn datas(r: &[Ready]) -> Vec<u64> {
        r.iter().map(|r| r.data).collect()
    }

    #[test]
    fn ready_files_take_turns_and_removal_keeps_the_rest_in_view() {
        let ep = Epoll::default();
        let files: Vec<_> = (0..3).map(|_| counter(1)).collect();
        for (i, f) in files.iter().enumerate() {
            ep.add(Key::new(i as i32, f), f, g::EPOLLIN, i as u64).unwrap();
        }
        assert_eq!(datas(&ep.collect(1)), [0]);
        assert_eq!(datas(&ep.collect(1)), [1]);
        assert_eq!(datas(&ep.collect(2)), [2, 0]);
        // The scan resumes after entry 0; removing it must not hide 1.
        ep.remove(Key::new(0, &files[0])).unwrap();
        assert_eq!(datas(&ep.collect(8)), [1, 2]);
        assert_eq!(ep.remove(Key::new(0, &files[0])), Err(FsError::NotFound));
    }

    #[test]
    fn closed_files_leave_the_interest_list() {
        let ep = Epoll::default();
        let f = counter(1);
        let key = Key::new(3, &f);
        ep.add(key, &f, g::EPOLLIN, 7).unwrap();
        assert_eq!(ep.add(key, &f, g::EPOLLIN, 7), Err(FsError::Exists));
        drop(f);
        assert!(ep.collect(8).is_empty());
        assert!(ep.state.lock().unwrap().entries.is_empty());
    }

    #[test]
    fn watched_files_wake_waiters_without_being_held() {
        use crate::waiter::Waiter;
        use std::time::{Duration, Instant};
        let ep = Epoll::default();
        let f = counter(0);
        let key = Key::new(1, &f);
        ep.add(key, &f, g::EPOLLIN, 1).unwrap();
        assert_eq!(Arc::strong_count(&f), 1, "the interest list holds no file");
        let w = Waiter::new();
        let _r = ep.queue().register(&w);
        f.ops.poll_queue().unwrap().notify_all();
        assert!(w.sleep(Some(Instant::now())), "the file's wake reached the instance's waiter");
        ep.remove(key).unwrap();
        f.ops.poll_queue().unwrap().notify_all();
        assert!(!w.sleep(Some(Instant::now() + Duration::from_millis(5))), "a removed file wakes nobody");
    }

    #[test]
    fn edge_triggered_reports_again_only_after_a_change() {
        let ep = Epoll::default();
        let f = counter(1);
        ep.add(Key::new(1, &f), &f, g::EPOLLIN | g::EPOLLET, 1).unwrap();
        assert_eq!(datas(&ep.collect(8)), [1]);
        assert!(ep.collect(8).is_empty(), "still readable, but nothing new");
        f.ops.poll_queue().unwrap().notify_all();
        assert_eq!(datas(&ep.collect(8)), [1]);
    }

    #[test]
    fn oneshot_disarms_until_modified() {
        let ep = Epoll::default();
        let f = counter(1);
        let key = Key::new(1, &f);
        ep.add(key, &f, g::EPOLLIN | g::EPOLLONESHOT, 1).unwrap();
        assert_eq!(datas(&ep.collect(8)), [1]);
        assert!(ep.collect(8).is_empty());
        ep.modify(key, g::EPOLLIN | g::EPOLLONESHOT, 2).unwrap();
        assert_eq!(datas(&ep.collect(8)), [2]);
    }

    #[test]
    fn events_are_masked_by_interest() {
        let ep = Epoll::default();
        let f = counter(0);
        ep.add(Key::new(1, &f), &f, g::EPOLLIN, 1).unwrap();
        assert!(ep.collect(8).is_empty(), "writable only, and only input is watched");
        ep.modify(Key::new(1, &f), g::EPOLLIN | g::EPOLLOUT, 1).unwrap();
        assert_eq!(ep.collect(8), [Ready { events: g::EPOLLOUT, data: 1 }]);
    }
}
