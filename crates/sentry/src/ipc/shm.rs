//! System V shared memory: shmget, shmat, shmdt, shmctl.
//!
//! A segment's pages are frames of the sandbox memory file, made on first
//! touch and charged to its memory like any other; every attach maps the
//! same [`SharedMemory`]. The attaches of a segment share one
//! [`ShmAttachment`], the file their VMAs map: each VMA holds a reference
//! (a fork's and a split's copy too, as Linux counts shm_nattch), so the
//! number of references is the number of attaches, and the last one gone
//! destroys a segment IPC_RMID marked.

use std::fmt::Write;
use std::sync::{Arc, Mutex, Weak};

use memory::{Frame, MemoryFile};

use super::{CAP_IPC_LOCK, Ids, IpcObject, IpcPerm, Lookup, S_IRUGO, lookup, now, put};
use crate::auth::Creds;
use crate::errno::Errno;
use crate::mm::{MapName, Mappable, MmError, PAGE, SharedMemory};

/// Linux's defaults: the largest segment, all segments' pages, segments.
pub const SHMMAX: u64 = u64::MAX - (1 << 24);
pub const SHMALL: u64 = u64::MAX - (1 << 24);
pub const SHMMNI: usize = 4096;
const SHMMIN: u64 = 1;

pub const SHM_LOCK: i32 = 11;
pub const SHM_UNLOCK: i32 = 12;
pub const SHM_STAT: i32 = 13;
pub const SHM_INFO: i32 = 14;
pub const SHM_STAT_ANY: i32 = 15;

/// Mode bits a segment keeps above its permissions.
pub const SHM_DEST: u32 = 0o1000;
pub const SHM_LOCKED: u32 = 0o2000;
pub const SHM_HUGETLB: i32 = 0o4000;

pub struct Segment {
    perm: IpcPerm,
    size: u64,
    pages: Arc<SharedMemory>,
    atime: i64,
    dtime: i64,
    ctime: i64,
    cpid: i32,
    lpid: i32,
    /// What the current attaches map; none while nothing is attached.
    attachment: Weak<ShmAttachment>,
    /// The real user whose locked memory SHM_LOCK charged the segment to.
    lock_charged: Option<u32>,
}

impl IpcObject for Segment {
    fn perm(&self) -> &IpcPerm {
        &self.perm
    }
    fn perm_mut(&mut self) -> &mut IpcPerm {
        &mut self.perm
    }
}

impl Segment {
    fn nattch(&self) -> usize {
        self.attachment.strong_count()
    }

    fn page_count(&self) -> u64 {
        self.size.div_ceil(PAGE)
    }

    /// `struct shmid64_ds` (112 bytes).
    fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; 112];
        self.perm.encode(&mut b);
        put(&mut b, 48, &self.size.to_ne_bytes());
        put(&mut b, 56, &self.atime.to_ne_bytes());
        put(&mut b, 64, &self.dtime.to_ne_bytes());
        put(&mut b, 72, &self.ctime.to_ne_bytes());
        put(&mut b, 80, &self.cpid.to_ne_bytes());
        put(&mut b, 84, &self.lpid.to_ne_bytes());
        put(&mut b, 88, &(self.nattch() as u64).to_ne_bytes());
        b
    }
}

/// The file every attach of a segment maps.
pub struct ShmAttachment {
    id: i32,
    key: i32,
    size: u64,
    pages: Arc<SharedMemory>,
    segments: Weak<SharedSegments>,
}

impl Mappable for ShmAttachment {
    fn page(&self, index: u64) -> Result<Option<Frame>, MmError> {
        if index >= self.size.div_ceil(PAGE) {
            return Ok(None);
        }
        self.pages.page(index).map(Some)
    }

    fn size(&self) -> u64 {
        self.size
    }

    /// As Linux names a segment's file: by its key, unlinked.
    fn describe(&self) -> MapName {
        MapName { path: format!("/SYSV{:08x} (deleted)", self.key), dev: 1, ino: self.id as u64 }
    }
}

impl Drop for ShmAttachment {
    fn drop(&mut self) {
        if let Some(segments) = self.segments.upgrade() {
            segments.last_detach(self.id);
        }
    }
}

/// The shared memory segments of a namespace.
pub struct SharedSegments {
    mf: Arc<MemoryFile>,
    segments: Mutex<Ids<Segment>>,
    /// Pages of locked segments by the real user charged for them, which
    /// SHM_LOCK holds to the locker's RLIMIT_MEMLOCK (Linux's per-user
    /// UCOUNT_RLIMIT_MEMLOCK). Taken after `segments`.
    locked_pages: Mutex<std::collections::HashMap<u32, u64>>,
    me: Weak<SharedSegments>,
}

/// What shmat needs to map a segment.
pub struct Attach {
    pub file: Arc<ShmAttachment>,
    /// The length to map: the size in whole pages.
    pub len: u64,
}

pub enum CtlOut {
    Value(i64),
    Struct(Vec<u8>, i64),
}

impl SharedSegments {
    pub fn new(mf: Arc<MemoryFile>) -> Arc<SharedSegments> {
        Arc::new_cyclic(|me| SharedSegments {
            mf,
            segments: Mutex::new(Ids::default()),
            locked_pages: Mutex::new(std::collections::HashMap::new()),
            me: me.clone(),
        })
    }

    pub fn get(&self, key: i32, size: u64, flags: i32, creds: &Creds, pid: i32) -> Result<i32, Errno> {
        let mut segs = self.segments.lock().unwrap();
        match lookup(&segs, key, flags, creds, |s| if size > s.size { Err(Errno::EINVAL) } else { Ok(()) })? {
            Lookup::Existing(index) => Ok(segs.id_at(index)),
            Lookup::Create => {
                if !(SHMMIN..=SHMMAX).contains(&size) {
                    return Err(Errno::EINVAL);
                }
                let pages = size.div_ceil(PAGE);
                let total: u64 = segs.iter().map(|(_, s)| s.page_count()).sum();
                if total.checked_add(pages).is_none_or(|t| t > SHMALL) {
                    return Err(Errno::ENOSPC);
                }
                if flags & SHM_HUGETLB != 0 {
                    // No huge page pool, as on a host with none reserved.
                    return Err(Errno::ENOMEM);
                }
                let seg = Segment {
                    perm: IpcPerm::new(key, flags, creds),
                    size,
                    pages: SharedMemory::new(self.mf.clone()),
                    atime: 0,
                    dtime: 0,
                    ctime: now(),
                    cpid: pid,
                    lpid: 0,
                    attachment: Weak::new(),
                    lock_charged: None,
                };
                segs.add(seg, SHMMNI).ok_or(Errno::ENOSPC)
            }
        }
    }

    /// The first half of shmat: the permission check (`access` the mode
    /// bits asked for) and the file to map. The caller maps it and then
    /// calls [`SharedSegments::attached`].
    pub fn attach(&self, id: i32, access: u32, creds: &Creds) -> Result<Attach, Errno> {
        if id < 0 {
            return Err(Errno::EINVAL);
        }
        let mut segs = self.segments.lock().unwrap();
        let seg = segs.get_mut(id)?;
        seg.perm.check(creds, access)?;
        // A segment too large for any address space cannot be mapped.
        let len = seg.page_count().checked_mul(PAGE).ok_or(Errno::ENOMEM)?;
        // Nothing may fail from here on: a new attachment dropped under
        // the lock would take it again.
        let file = match seg.attachment.upgrade() {
            Some(f) => f,
            None => {
                let f = Arc::new(ShmAttachment {
                    id,
                    key: seg.perm.key,
                    size: seg.size,
                    pages: seg.pages.clone(),
                    segments: self.me.clone(),
                });
                seg.attachment = Arc::downgrade(&f);
                f
            }
        };
        Ok(Attach { len, file })
    }

    /// Records a completed attach (shm_atime, shm_lpid).
    pub fn attached(&self, id: i32, pid: i32) {
        if let Ok(seg) = self.segments.lock().unwrap().get_mut(id) {
            seg.atime = now();
            seg.lpid = pid;
        }
    }

    /// The segment `file` belongs to, if it is one of this namespace's
    /// attachments: shmdt's test of a VMA, with the segment's size.
    pub fn attachment_of(&self, file: &Arc<dyn Mappable>) -> Option<(i32, u64)> {
        let segs = self.segments.lock().unwrap();
        segs.iter()
            .find(|(_, s)| std::ptr::addr_eq(s.attachment.as_ptr(), Arc::as_ptr(file)))
            .map(|(id, s)| (id, s.size))
    }

    /// Records a detach (shm_dtime, shm_lpid).
    pub fn detached(&self, id: i32, pid: i32) {
        if let Ok(seg) = self.segments.lock().unwrap().get_mut(id) {
            seg.dtime = now();
            seg.lpid = pid;
        }
    }

    /// The last attach of segment `id` is gone: a segment marked for
    /// destruction goes now. A new attach made meanwhile keeps it.
    fn last_detach(&self, id: i32) {
        let mut segs = self.segments.lock().unwrap();
        if let Ok(seg) = segs.get_mut(id) {
            if seg.attachment.strong_count() > 0 {
                return;
            }
            seg.dtime = now();
            if seg.perm.mode & SHM_DEST != 0 {
                self.destroy(&mut segs, id);
            }
        }
    }

    /// shmctl. `set` is IPC_SET's uid, gid and mode; `memlock` the
    /// caller's RLIMIT_MEMLOCK.
    pub fn ctl(
        &self,
        id: i32,
        cmd: i32,
        set: Option<(u32, u32, u32)>,
        creds: &Creds,
        memlock: u64,
    ) -> Result<CtlOut, Errno> {
        let mut segs = self.segments.lock().unwrap();
        match cmd {
            super::IPC_INFO => {
                let mut b = vec![0u8; 72];
                for (i, f) in [SHMMAX, SHMMIN, SHMMNI as u64, SHMMNI as u64, SHMALL].iter().enumerate() {
                    put(&mut b, i * 8, &f.to_ne_bytes());
                }
                return Ok(CtlOut::Struct(b, segs.max_index() as i64));
            }
            SHM_INFO => {
                let mut b = vec![0u8; 48];
                let total: u64 = segs.iter().map(|(_, s)| s.page_count()).sum();
                let rss: u64 = segs.iter().map(|(_, s)| s.pages.resident_pages() as u64).sum();
                put(&mut b, 0, &(segs.len() as i32).to_ne_bytes());
                put(&mut b, 8, &total.to_ne_bytes());
                put(&mut b, 16, &rss.to_ne_bytes());
                return Ok(CtlOut::Struct(b, segs.max_index() as i64));
            }
            SHM_STAT | SHM_STAT_ANY => {
                let (full, s) = segs.at_index(id)?;
                if cmd == SHM_STAT {
                    s.perm.check(creds, S_IRUGO)?;
                }
                return Ok(CtlOut::Struct(s.encode(), full as i64));
            }
            _ => {}
        }
        if id < 0 {
            return Err(Errno::EINVAL);
        }
        let seg = segs.get_mut(id)?;
        match cmd {
            super::IPC_STAT => {
                seg.perm.check(creds, S_IRUGO)?;
                Ok(CtlOut::Struct(seg.encode(), 0))
            }
            super::IPC_SET => {
                seg.perm.check_owner(creds)?;
                let Some((uid, gid, mode)) = set else { return Err(Errno::EINVAL) };
                seg.perm.set(uid, gid, mode);
                seg.ctime = now();
                Ok(CtlOut::Value(0))
            }
            super::IPC_RMID => {
                seg.perm.check_owner(creds)?;
                if seg.nattch() == 0 {
                    self.destroy(&mut segs, id);
                } else {
                    // Destroyed at the last detach; its key is free for a
                    // new segment at once.
                    seg.perm.mode |= SHM_DEST;
                    seg.perm.key = super::IPC_PRIVATE;
                }
                Ok(CtlOut::Value(0))
            }
            SHM_LOCK | SHM_UNLOCK => {
                if !creds.has(CAP_IPC_LOCK) {
                    let euid = creds.uid.effective;
                    if euid != seg.perm.uid && euid != seg.perm.cuid {
                        return Err(Errno::EPERM);
                    }
                    if cmd == SHM_LOCK && memlock == 0 {
                        return Err(Errno::EPERM);
                    }
                }
                let mut locked = self.locked_pages.lock().unwrap();
                let pages = seg.page_count();
                if cmd == SHM_LOCK && seg.lock_charged.is_none() {
                    // The limit is in bytes, counted in whole pages.
                    let charged = locked.get(&creds.uid.real).copied().unwrap_or(0) + pages;
                    if charged > memlock / PAGE && !creds.has(CAP_IPC_LOCK) {
                        return Err(Errno::ENOMEM);
                    }
                    locked.insert(creds.uid.real, charged);
                    seg.lock_charged = Some(creds.uid.real);
                } else if cmd == SHM_UNLOCK
                    && let Some(uid) = seg.lock_charged.take()
                {
                    uncharge(&mut locked, uid, pages);
                }
                if cmd == SHM_LOCK {
                    seg.perm.mode |= SHM_LOCKED;
                } else {
                    seg.perm.mode &= !SHM_LOCKED;
                }
                Ok(CtlOut::Value(0))
            }
            _ => Err(Errno::EINVAL),
        }
    }

    /// Removes segment `id`, giving back the locked memory it was charged.
    fn destroy(&self, segs: &mut Ids<Segment>, id: i32) {
        if let Some(seg) = segs.remove(id)
            && let Some(uid) = seg.lock_charged
        {
            uncharge(&mut self.locked_pages.lock().unwrap(), uid, seg.page_count());
        }
    }

    /// /proc/sysvipc/shm.
    pub fn proc_lines(&self) -> String {
        let mut s = String::from(
            "       key      shmid perms                  size  cpid  lpid nattch   uid   gid  cuid  cgid      atime      dtime      ctime                   rss                  swap\n",
        );
        for (id, seg) in self.segments.lock().unwrap().iter() {
            let p = &seg.perm;
            let _ = writeln!(
                s,
                "{:>10} {:>10}  {:>4o} {:>21} {:>5} {:>5}  {:>5} {:>5} {:>5} {:>5} {:>5} {:>10} {:>10} {:>10} {:>21} {:>21}",
                p.key,
                id,
                p.mode,
                seg.size,
                seg.cpid,
                seg.lpid,
                seg.nattch(),
                p.uid,
                p.gid,
                p.cuid,
                p.cgid,
                seg.atime,
                seg.dtime,
                seg.ctime,
                seg.pages.resident_pages() as u64 * PAGE,
                0
            );
        }
        s
    }
}

/// Takes `pages` off what `uid` has locked.
fn uncharge(locked: &mut std::collections::HashMap<u32, u64>, uid: u32, pages: u64) {
    if let Some(n) = locked.get_mut(&uid) {
        *n = n.saturating_sub(pages);
        if *n == 0 {
            locked.remove(&uid);
        }
    }
}
