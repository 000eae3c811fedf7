//! inotify (Linux's fs/notify/inotify): instances that watch files and
//! directories, and the events the VFS raises for them. Watches are on
//! files (a [`FileKey`]), so a file reached through two names reports to
//! the watchers of both. An event on a file goes to the watch of its
//! parent directory (with the file's name) and then to the file's own;
//! events on names (create, delete, moves) go to the directory's watch.
//!
//! Raising an event with no watch anywhere costs one atomic load: the VFS
//! calls these hooks on every read and write.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use linux_raw_sys::general as g;
use memory::GuestSliceMut;

use super::{Context, Dentry, FileKey, FileOps, FileType, FsError, OpenFile, OpenFlags, POLLIN, POLLRDNORM, Stat};
use crate::waiter::WaitQueue;

pub use g::{
    IN_ACCESS, IN_ALL_EVENTS, IN_ATTRIB, IN_CLOSE_NOWRITE, IN_CLOSE_WRITE, IN_CREATE, IN_DELETE, IN_DELETE_SELF,
    IN_DONT_FOLLOW, IN_EXCL_UNLINK, IN_IGNORED, IN_ISDIR, IN_MASK_ADD, IN_MASK_CREATE, IN_MODIFY, IN_MOVE_SELF,
    IN_MOVED_FROM, IN_MOVED_TO, IN_ONESHOT, IN_ONLYDIR, IN_OPEN, IN_Q_OVERFLOW,
};

/// Events an instance holds before the rest are dropped for one
/// IN_Q_OVERFLOW (/proc/sys/fs/inotify/max_queued_events).
pub const MAX_QUEUED_EVENTS: usize = 16384;

/// Size of `struct inotify_event` without its name.
const EVENT_HEADER: usize = 16;

/// One queued event.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Event {
    wd: i32,
    mask: u32,
    cookie: u32,
    name: Vec<u8>,
}

impl Event {
    /// Bytes `read` gives for it: the name is NUL-terminated and padded to
    /// a multiple of the header's size, as Linux's round_event_name_len.
    fn size(&self) -> usize {
        EVENT_HEADER + name_space(&self.name)
    }

    fn write_to(&self, out: &mut Vec<u8>) {
        let space = name_space(&self.name);
        out.extend_from_slice(&self.wd.to_ne_bytes());
        out.extend_from_slice(&self.mask.to_ne_bytes());
        out.extend_from_slice(&self.cookie.to_ne_bytes());
        out.extend_from_slice(&(space as u32).to_ne_bytes());
        out.extend_from_slice(&self.name);
        out.resize(out.len() + space - self.name.len(), 0);
    }
}

fn name_space(name: &[u8]) -> usize {
    if name.is_empty() { 0 } else { (name.len() + 1).div_ceil(EVENT_HEADER) * EVENT_HEADER }
}

#[derive(Default)]
struct Queue {
    events: VecDeque<Event>,
    /// What reading every queued event would give, for FIONREAD.
    bytes: usize,
    /// This instance's watches: descriptor to file.
    watches: HashMap<i32, FileKey>,
    /// The last watch descriptor given; they count up from 1.
    last_wd: i32,
}

/// An inotify instance: its queue and watches.
struct Instance {
    state: Mutex<Queue>,
    /// Woken when an event is queued.
    queue: WaitQueue,
}

impl Instance {
    /// Queues `ev`, unless it repeats the last one queued (Linux's
    /// inotify_merge) or the queue is full: then one IN_Q_OVERFLOW stands
    /// for everything dropped until it is read.
    fn push(&self, ev: Event) {
        {
            let mut q = self.state.lock().unwrap();
            let last = q.events.back();
            if q.events.len() >= MAX_QUEUED_EVENTS {
                if last.is_some_and(|l| l.mask == IN_Q_OVERFLOW) {
                    return;
                }
                let overflow = Event { wd: -1, mask: IN_Q_OVERFLOW, cookie: 0, name: Vec::new() };
                q.bytes += overflow.size();
                q.events.push_back(overflow);
            } else {
                if last.is_some_and(|l| {
                    l.mask & IN_IGNORED == 0 && l.mask == ev.mask && l.wd == ev.wd && l.name == ev.name
                }) {
                    return;
                }
                q.bytes += ev.size();
                q.events.push_back(ev);
            }
        }
        self.queue.notify_all();
    }
}

/// One watch, as the file's list of watchers holds it.
struct Watch {
    instance: Weak<Instance>,
    wd: i32,
    mask: u32,
}

/// The watches of every watched file.
static WATCHES: Mutex<Option<HashMap<FileKey, Vec<Watch>>>> = Mutex::new(None);
/// How many watches exist, so that events nobody watches cost nothing.
static WATCH_COUNT: AtomicUsize = AtomicUsize::new(0);

fn watched() -> bool {
    WATCH_COUNT.load(Ordering::Relaxed) != 0
}

/// Removes watch `wd` of `instance` from the file `key`'s list and the
/// instance, and tells the instance (IN_IGNORED).
fn drop_watch(watches: &mut HashMap<FileKey, Vec<Watch>>, key: FileKey, instance: &Arc<Instance>, wd: i32) {
    if let Some(list) = watches.get_mut(&key) {
        let before = list.len();
        list.retain(|w| !(w.wd == wd && Weak::ptr_eq(&w.instance, &Arc::downgrade(instance))));
        WATCH_COUNT.fetch_sub(before - list.len(), Ordering::Relaxed);
        if list.is_empty() {
            watches.remove(&key);
        }
    }
    instance.state.lock().unwrap().watches.remove(&wd);
    instance.push(Event { wd, mask: IN_IGNORED, cookie: 0, name: Vec::new() });
}

/// Raises `mask` (an event, perhaps with IN_ISDIR) for the watchers of
/// `key`. With `unlinked`, watches that asked for IN_EXCL_UNLINK hear
/// nothing. A one-shot watch goes after its event.
fn deliver(key: FileKey, mask: u32, cookie: u32, name: &[u8], unlinked: bool) {
    // inotify never told directories apart in these two, and Linux keeps
    // it so.
    let mask = if mask & (IN_MOVE_SELF | IN_DELETE_SELF) != 0 { mask & !IN_ISDIR } else { mask };
    let mut guard = WATCHES.lock().unwrap();
    let Some(watches) = guard.as_mut() else { return };
    let Some(list) = watches.get(&key) else { return };
    let mut spent = Vec::new();
    for w in list {
        if w.mask & mask & IN_ALL_EVENTS == 0 || (unlinked && w.mask & IN_EXCL_UNLINK != 0) {
            continue;
        }
        let Some(instance) = w.instance.upgrade() else { continue };
        instance.push(Event { wd: w.wd, mask, cookie, name: name.to_vec() });
        if w.mask & IN_ONESHOT != 0 {
            spent.push((instance, w.wd));
        }
    }
    for (instance, wd) in spent {
        drop_watch(watches, key, &instance, wd);
    }
}

fn isdir(ty: FileType) -> u32 {
    if ty == FileType::Directory { IN_ISDIR } else { 0 }
}

/// The directory `d` sits in, if it is of the same mount (a mount's root
/// has no parent to tell, as in Linux).
fn parent_in_mount(d: &Dentry) -> Option<Arc<Dentry>> {
    d.parent().filter(|p| p.mount.id == d.mount.id)
}

fn notify_object(d: &Dentry, mask: u32, path_event: bool) {
    if !watched() {
        return;
    }
    let mask = mask | isdir(d.file_type());
    let unlinked = path_event && d.is_deleted();
    if let Some(p) = parent_in_mount(d) {
        deliver(p.key(), mask, 0, &d.name(), unlinked);
    }
    deliver(d.key(), mask, 0, &[], unlinked);
}

/// An event of an open file (IN_OPEN, IN_ACCESS, IN_MODIFY, IN_CLOSE_*):
/// to its directory's watch with its name, then to its own.
pub fn notify_file(d: &Dentry, mask: u32) {
    notify_object(d, mask, true);
}

/// An attribute change of the file `d` names (IN_ATTRIB, IN_MODIFY for a
/// truncate): as [`notify_file`], also for files no longer linked.
pub fn notify_change(d: &Dentry, mask: u32) {
    notify_object(d, mask, false);
}

/// An event on the file itself only (IN_ATTRIB when its link count
/// changes, IN_MOVE_SELF).
pub fn notify_self(d: &Dentry, mask: u32) {
    if watched() {
        deliver(d.key(), mask | isdir(d.file_type()), 0, &[], false);
    }
}

/// An event on the entry `name` of directory `dir` (IN_CREATE, IN_DELETE,
/// IN_MOVED_FROM, IN_MOVED_TO), for a file of type `ty`.
pub fn notify_name(dir: &Dentry, mask: u32, name: &[u8], ty: FileType, cookie: u32) {
    if watched() {
        deliver(dir.key(), mask | isdir(ty), cookie, name, false);
    }
}

/// The file `d` lost its last name: IN_DELETE_SELF, and its watches go.
pub fn notify_gone(d: &Dentry) {
    if !watched() {
        return;
    }
    let key = d.key();
    deliver(key, IN_DELETE_SELF | isdir(d.file_type()), 0, &[], false);
    let mut guard = WATCHES.lock().unwrap();
    let Some(watches) = guard.as_mut() else { return };
    let Some(list) = watches.get(&key) else { return };
    let doomed: Vec<(Arc<Instance>, i32)> = list.iter().filter_map(|w| Some((w.instance.upgrade()?, w.wd))).collect();
    for (instance, wd) in doomed {
        drop_watch(watches, key, &instance, wd);
    }
    // Watches of instances already closed go too.
    if let Some(list) = watches.remove(&key) {
        WATCH_COUNT.fetch_sub(list.len(), Ordering::Relaxed);
    }
}

/// The cookie that ties the two halves of one rename together.
pub fn new_cookie() -> u32 {
    static NEXT: AtomicU32 = AtomicU32::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// An inotify instance as an open file.
pub struct Inotify {
    instance: Arc<Instance>,
}

impl Default for Inotify {
    fn default() -> Self {
        Inotify { instance: Arc::new(Instance { state: Mutex::new(Queue::default()), queue: WaitQueue::default() }) }
    }
}

impl Inotify {
    /// inotify_add_watch: watches `key` (of a file of type `ty`) for the
    /// events of `mask`; a file already watched keeps its descriptor, its
    /// mask replaced, or extended with IN_MASK_ADD, or EEXIST with
    /// IN_MASK_CREATE.
    pub fn add_watch(&self, key: FileKey, mask: u32) -> Result<i32, FsError> {
        let kept = mask & (IN_ALL_EVENTS | IN_EXCL_UNLINK | IN_ONESHOT);
        let mut guard = WATCHES.lock().unwrap();
        let watches = guard.get_or_insert_with(HashMap::new);
        let me = Arc::downgrade(&self.instance);
        let list = watches.entry(key).or_default();
        if let Some(w) = list.iter_mut().find(|w| Weak::ptr_eq(&w.instance, &me)) {
            if mask & IN_MASK_CREATE != 0 {
                return Err(FsError::Exists);
            }
            w.mask = if mask & IN_MASK_ADD != 0 { w.mask | kept } else { kept };
            return Ok(w.wd);
        }
        let wd = {
            let mut q = self.instance.state.lock().unwrap();
            // Descriptors are not reused while the instance lives, as
            // Linux's cyclic allocation gives them.
            let mut wd = q.last_wd;
            loop {
                wd = if wd == i32::MAX { 1 } else { wd + 1 };
                if !q.watches.contains_key(&wd) {
                    break;
                }
            }
            q.last_wd = wd;
            q.watches.insert(wd, key);
            wd
        };
        list.push(Watch { instance: me, wd, mask: kept });
        WATCH_COUNT.fetch_add(1, Ordering::Relaxed);
        Ok(wd)
    }

    /// inotify_rm_watch: EINVAL for a descriptor this instance has not.
    pub fn rm_watch(&self, wd: i32) -> Result<(), FsError> {
        let mut guard = WATCHES.lock().unwrap();
        let key = self.instance.state.lock().unwrap().watches.get(&wd).copied().ok_or(FsError::Invalid)?;
        let watches = guard.get_or_insert_with(HashMap::new);
        drop_watch(watches, key, &self.instance, wd);
        Ok(())
    }

    /// Takes whole events that fit in `room` bytes; EINVAL if the first
    /// does not, None if there is none.
    fn take(&self, room: usize) -> Option<Result<Vec<u8>, FsError>> {
        let mut q = self.instance.state.lock().unwrap();
        let first = q.events.front()?;
        if first.size() > room {
            return Some(Err(FsError::Invalid));
        }
        let mut out = Vec::new();
        while let Some(ev) = q.events.front() {
            let size = ev.size();
            if out.len() + size > room {
                break;
            }
            ev.write_to(&mut out);
            q.bytes -= size;
            q.events.pop_front();
        }
        Some(Ok(out))
    }
}

/// The instance's last descriptor closed: its watches go.
impl Drop for Inotify {
    fn drop(&mut self) {
        let mut guard = WATCHES.lock().unwrap();
        let Some(watches) = guard.as_mut() else { return };
        let mine: Vec<(i32, FileKey)> = self.instance.state.lock().unwrap().watches.drain().collect();
        let me = Arc::downgrade(&self.instance);
        for (wd, key) in mine {
            if let Some(list) = watches.get_mut(&key) {
                let before = list.len();
                list.retain(|w| !(w.wd == wd && Weak::ptr_eq(&w.instance, &me)));
                WATCH_COUNT.fetch_sub(before - list.len(), Ordering::Relaxed);
                if list.is_empty() {
                    watches.remove(&key);
                }
            }
        }
    }
}

impl FileOps for Inotify {
    fn read(&self, ctx: &Context, file: &OpenFile, bufs: &[GuestSliceMut<'_>], _: u64) -> Result<usize, FsError> {
        let room: usize = bufs.iter().map(|b| b.len()).sum();
        let out = match self.take(room) {
            Some(r) => r?,
            None if file.flags().contains(OpenFlags::NONBLOCK) => return Err(FsError::WouldBlock),
            None => {
                ctx.block_on(&[&self.instance.queue], None, || self.take(room)).map_err(|_| FsError::Interrupted)??
            }
        };
        let mut done = 0;
        for b in bufs {
            if done == out.len() {
                break;
            }
            done += b.copy_from(&out[done..]);
        }
        Ok(out.len())
    }

    fn stat(&self) -> Result<Stat, FsError> {
        Ok(super::synthetic::anon_inode_stat())
    }

    fn poll(&self) -> u32 {
        if self.instance.state.lock().unwrap().events.is_empty() { 0 } else { POLLIN | POLLRDNORM }
    }

    fn poll_queue(&self) -> Option<&WaitQueue> {
        Some(&self.instance.queue)
    }

    fn readable_bytes(&self) -> Option<u64> {
        Some(self.instance.state.lock().unwrap().bytes as u64)
    }

    fn anon_name(&self) -> Option<&'static str> {
        Some("anon_inode:inotify")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_padded_to_whole_headers() {
        let ev = |name: &[u8]| Event { wd: 1, mask: IN_CREATE, cookie: 0, name: name.to_vec() };
        assert_eq!(ev(b"").size(), 16);
        assert_eq!(ev(b"a").size(), 32);
        assert_eq!(ev(&[b'x'; 15]).size(), 32);
        assert_eq!(ev(&[b'x'; 16]).size(), 48);
        let mut out = Vec::new();
        ev(b"ab").write_to(&mut out);
        assert_eq!(out.len(), 32);
        assert_eq!(&out[12..16], &16u32.to_ne_bytes());
        assert_eq!(&out[16..19], b"ab\0");
    }

    #[test]
    fn repeats_merge_and_a_full_queue_overflows_once() {
        let i = Inotify::default();
        let ev = |mask| Event { wd: 1, mask, cookie: 0, name: b"f".to_vec() };
        i.instance.push(ev(IN_MODIFY));
        i.instance.push(ev(IN_MODIFY));
        assert_eq!(i.instance.state.lock().unwrap().events.len(), 1);
        for n in 0..MAX_QUEUED_EVENTS + 10 {
            i.instance.push(ev(if n % 2 == 0 { IN_ACCESS } else { IN_MODIFY }));
        }
        let q = i.instance.state.lock().unwrap();
        assert_eq!(q.events.len(), MAX_QUEUED_EVENTS + 1);
        assert_eq!(q.events.back().unwrap().mask, IN_Q_OVERFLOW);
        assert_eq!(q.bytes, q.events.iter().map(Event::size).sum::<usize>());
    }
}
