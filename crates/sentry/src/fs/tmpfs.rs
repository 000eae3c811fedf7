//! tmpfs: a file system held in sandbox memory. File pages are frames of
//! the memory file, so `read`/`write` are one copy, a shared mapping maps
//! the very frames `read` sees, and every byte counts against `--memory`
//! (a write that finds no frame gets ENOSPC; deleting a file gives its
//! frames back). It is also the upper layer of the overlay root.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use linux_raw_sys::general as g;
use memory::{Frame, GuestSlice, GuestSliceMut, MemoryFile};

use super::synthetic::{push_dirent, push_dot_entries};
use super::{
    Context, Dentry, FileOps, FileType, FsError, Inode, MapName, Mappable, NewNode, OpenFile, OpenFlags, RenameFlags,
    SetAttr, Stat, StatFs, Timespec, makedev,
};

const PAGE: u64 = 4096;
/// statfs f_type of tmpfs.
const TMPFS_MAGIC: u64 = 0x0102_1994;
/// Longest symlink target (as PATH_MAX less its terminator).
const SYMLINK_MAX: usize = 4095;
/// Largest total size of one inode's extended attributes.
const XATTR_TOTAL_MAX: usize = 64 * 1024;

/// Reads into buffers at an offset: where a copy-up takes its data.
pub type ReadAt = dyn Fn(&[GuestSliceMut<'_>], u64) -> Result<usize, FsError>;

/// One mounted tmpfs: where its pages come from and what it may hold.
pub struct Tmpfs {
    mf: Arc<MemoryFile>,
    dev: u64,
    next_ino: AtomicU64,
    /// Most pages (size=).
    max_pages: u64,
    pages: AtomicU64,
    inodes: AtomicU64,
}

/// Device numbers of sentry-held file systems (Linux's anonymous devices,
/// major 0).
pub fn anon_dev() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0x40);
    makedev(0, NEXT.fetch_add(1, Ordering::Relaxed) as u32)
}

impl Tmpfs {
    /// A new tmpfs of at most `size` bytes, by default half the sandbox's
    /// memory as Linux's default is half the machine's: a writer filling
    /// it gets ENOSPC while the programs still have memory to run in.
    /// Returns its root directory.
    pub fn new_root(mf: Arc<MemoryFile>, mode: u32, uid: u32, gid: u32, size: Option<u64>) -> Arc<TmpInode> {
        let size = size.unwrap_or(mf.capacity() / 2);
        let fs = Arc::new(Tmpfs {
            mf,
            dev: anon_dev(),
            next_ino: AtomicU64::new(1),
            max_pages: size.div_ceil(PAGE),
            pages: AtomicU64::new(0),
            inodes: AtomicU64::new(0),
        });
        let node = NewNode { mode: g::S_IFDIR | (mode & 0o7777), uid, gid, rdev: 0 };
        TmpInode::new(&fs, node, Body::Dir(Mutex::new(Dir::default())))
    }

    pub fn dev(&self) -> u64 {
        self.dev
    }

    /// A zeroed frame for a file page, counted against `size=` and the
    /// sandbox's memory: ENOSPC when either is used up.
    fn allocate(&self) -> Result<Frame, FsError> {
        if self.pages.fetch_add(1, Ordering::Relaxed) >= self.max_pages {
            self.pages.fetch_sub(1, Ordering::Relaxed);
            return Err(FsError::NoSpace);
        }
        self.mf.allocate().map_err(|_| {
            self.pages.fetch_sub(1, Ordering::Relaxed);
            FsError::NoSpace
        })
    }

    fn release(&self, f: Frame) {
        self.pages.fetch_sub(1, Ordering::Relaxed);
        self.mf.dec_ref(f);
    }
}

/// Metadata of one inode.
#[derive(Clone, Copy)]
struct Meta {
    /// Permission bits with S_ISUID/S_ISGID/S_ISVTX; the type is the body's.
    perm: u32,
    uid: u32,
    gid: u32,
    nlink: u64,
    rdev: u64,
    atime: Timespec,
    mtime: Timespec,
    ctime: Timespec,
    btime: Timespec,
}

/// A directory's entries. Each entry has a cookie, its readdir position,
/// that never changes while it exists: telldir/seekdir stay valid while
/// entries come and go.
#[derive(Default)]
struct Dir {
    entries: HashMap<Vec<u8>, (u64, Arc<TmpInode>)>,
    order: BTreeMap<u64, Vec<u8>>,
    /// Next cookie; 0 and 1 are "." and "..".
    next_cookie: u64,
    /// Removed by rmdir or replaced by rename: nothing may be created in it.
    dead: bool,
}

impl Dir {
    fn insert(&mut self, name: &[u8], inode: Arc<TmpInode>) {
        let cookie = self.next_cookie.max(2);
        self.next_cookie = cookie + 1;
        self.order.insert(cookie, name.to_vec());
        self.entries.insert(name.to_vec(), (cookie, inode));
    }

    fn remove(&mut self, name: &[u8]) -> Option<Arc<TmpInode>> {
        let (cookie, inode) = self.entries.remove(name)?;
        self.order.remove(&cookie);
        Some(inode)
    }

    fn get(&self, name: &[u8]) -> Option<&Arc<TmpInode>> {
        self.entries.get(name).map(|(_, i)| i)
    }
}

/// A regular file's pages and size.
#[derive(Default)]
struct Pages {
    frames: BTreeMap<u64, Frame>,
    size: u64,
}

enum Body {
    Dir(Mutex<Dir>),
    File(Mutex<Pages>),
    Symlink(Vec<u8>),
    /// A FIFO: its pipe, made on first open and kept while the inode lives,
    /// so readers and writers opening the name meet.
    Fifo(Mutex<Option<Arc<super::pipe::Pipe>>>),
    /// Device and socket nodes: names only.
    Node,
}

/// An inode of a tmpfs.
pub struct TmpInode {
    fs: Arc<Tmpfs>,
    me: Weak<TmpInode>,
    ino: u64,
    kind: FileType,
    meta: Mutex<Meta>,
    body: Body,
    xattrs: Mutex<BTreeMap<Vec<u8>, Vec<u8>>>,
    /// Made by O_TMPFILE without O_EXCL: may be linked in although it has
    /// no name (Linux's I_LINKABLE).
    linkable: std::sync::atomic::AtomicBool,
    /// F_SEAL_* bits. A file that was not made sealable (only memfds are)
    /// has F_SEAL_SEAL, so no seal can be added.
    seals: AtomicU32,
    /// Shared mappings that may write (Linux's i_mmap_writable).
    writable_maps: AtomicU64,
}

/// A use of a tmpfs file's pages (an open file, a mapping): the inode,
/// and with it the pages, live while any use does. A removed file's pages
/// go back when the last holder of the inode lets go (Linux's last iput):
/// a lookup in flight when the name went still opens the old data.
struct Use(Arc<TmpInode>);

impl Use {
    fn new(inode: &Arc<TmpInode>) -> Use {
        Use(inode.clone())
    }
}

/// A mapping of a tmpfs file: a use of its pages while it exists.
struct MapUse(Use);

impl Mappable for MapUse {
    fn page(&self, index: u64) -> Result<Option<Frame>, crate::mm::MmError> {
        self.0.0.page(index)
    }
    fn size(&self) -> u64 {
        TmpInode::size(&self.0.0)
    }
    fn describe(&self) -> MapName {
        self.0.0.describe()
    }
    fn cached(&self, index: u64) -> Option<Frame> {
        self.0.0.cached(index)
    }
}

/// A shared mapping of a tmpfs file opened for writing: counted while it
/// exists, so F_SEAL_WRITE is refused (EBUSY) meanwhile.
pub struct WritableMap {
    inode: Arc<TmpInode>,
    _use: Use,
}

impl WritableMap {
    /// EPERM if the file is sealed against writes.
    pub fn create(inode: &Arc<TmpInode>) -> Result<Arc<dyn Mappable>, FsError> {
        let _pages = inode.pages()?.lock().unwrap();
        if inode.seals.load(Ordering::Relaxed) & (seal::WRITE | seal::FUTURE_WRITE) != 0 {
            return Err(FsError::NotPermitted);
        }
        inode.writable_maps.fetch_add(1, Ordering::Relaxed);
        Ok(Arc::new(WritableMap { inode: inode.clone(), _use: Use::new(inode) }))
    }
}

impl Drop for WritableMap {
    fn drop(&mut self) {
        self.inode.writable_maps.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Mappable for WritableMap {
    fn page(&self, index: u64) -> Result<Option<Frame>, crate::mm::MmError> {
        self.inode.page(index)
    }
    fn size(&self) -> u64 {
        TmpInode::size(&self.inode)
    }
    fn describe(&self) -> MapName {
        self.inode.describe()
    }
    fn cached(&self, index: u64) -> Option<Frame> {
        self.inode.cached(index)
    }
}

/// fcntl's file seals (F_SEAL_*).
pub mod seal {
    pub const SEAL: u32 = 0x01;
    pub const SHRINK: u32 = 0x02;
    pub const GROW: u32 = 0x04;
    pub const WRITE: u32 = 0x08;
    pub const FUTURE_WRITE: u32 = 0x10;
    pub const EXEC: u32 = 0x20;
    pub const ALL: u32 = SEAL | SHRINK | GROW | WRITE | FUTURE_WRITE | EXEC;
}

impl TmpInode {
    fn new(fs: &Arc<Tmpfs>, node: NewNode, body: Body) -> Arc<TmpInode> {
        let now = Timespec::now();
        let kind = node.file_type();
        fs.inodes.fetch_add(1, Ordering::Relaxed);
        Arc::new_cyclic(|me| TmpInode {
            fs: fs.clone(),
            me: me.clone(),
            ino: fs.next_ino.fetch_add(1, Ordering::Relaxed),
            kind,
            meta: Mutex::new(Meta {
                perm: node.mode & 0o7777,
                uid: node.uid,
                gid: node.gid,
                nlink: if kind == FileType::Directory { 2 } else { 1 },
                rdev: node.rdev,
                atime: now,
                mtime: now,
                ctime: now,
                btime: now,
            }),
            body,
            xattrs: Mutex::new(BTreeMap::new()),
            linkable: std::sync::atomic::AtomicBool::new(false),
            seals: AtomicU32::new(seal::SEAL),
            writable_maps: AtomicU64::new(0),
        })
    }

    /// A memfd: a regular file with no name in this file system, sealable
    /// when `sealing` (else it has F_SEAL_SEAL like any other file).
    pub fn memfd(&self, node: NewNode, sealing: bool) -> Arc<TmpInode> {
        let i = TmpInode::new(&self.fs, node, Body::File(Mutex::new(Pages::default())));
        i.seals.store(if sealing { 0 } else { seal::SEAL }, Ordering::Relaxed);
        i
    }

    /// The seals (F_GET_SEALS).
    pub fn seals(&self) -> u32 {
        self.seals.load(Ordering::Relaxed)
    }

    /// F_ADD_SEALS: EPERM once F_SEAL_SEAL is set.
    pub fn add_seals(&self, add: u32) -> Result<(), FsError> {
        if add & !seal::ALL != 0 {
            return Err(FsError::Invalid);
        }
        let pages = self.pages()?.lock().unwrap();
        let cur = self.seals.load(Ordering::Relaxed);
        if cur & seal::SEAL != 0 {
            return Err(FsError::NotPermitted);
        }
        // Sealing against writes while someone could still write through
        // a shared mapping would not hold.
        if add & seal::WRITE != 0 && self.writable_maps.load(Ordering::Relaxed) > 0 {
            return Err(FsError::Busy);
        }
        self.seals.store(cur | add, Ordering::Relaxed);
        drop(pages);
        Ok(())
    }

    /// A write by a caller without CAP_FSETID drops the set-user-id bit,
    /// and the set-group-id bit when it means that (group execute), as
    /// Linux's file_remove_privs does.
    fn drop_set_id(&self, creds: &crate::auth::Creds) {
        let mut m = self.meta.lock().unwrap();
        let mut kill = g::S_ISUID;
        if m.perm & g::S_IXGRP != 0 {
            kill |= g::S_ISGID;
        }
        if m.perm & kill != 0 && !creds.has(crate::auth::cap::FSETID) {
            m.perm &= !kill;
            m.ctime = Timespec::now();
        }
    }

    /// This inode as a shared reference.
    pub fn arc(&self) -> Arc<TmpInode> {
        self.me.upgrade().expect("a tmpfs inode in use is alive")
    }

    /// The inode number (the tmpfs's own).
    pub fn number(&self) -> u64 {
        self.ino
    }

    /// The child `name` of this directory, if there is one.
    pub fn child(&self, name: &[u8]) -> Option<Arc<TmpInode>> {
        self.dir().ok()?.lock().unwrap().get(name).cloned()
    }

    /// Up to `max` entries of this directory whose readdir cookie is at
    /// least `cookie`, in cookie order: how another file system built on
    /// this one (the overlay) lists it.
    pub fn entries_from(&self, cookie: u64, max: usize) -> Vec<(u64, Vec<u8>, Arc<TmpInode>)> {
        let Ok(dir) = self.dir() else { return Vec::new() };
        let dir = dir.lock().unwrap();
        dir.order.range(cookie..).take(max).map(|(c, name)| (*c, name.clone(), dir.entries[name].1.clone())).collect()
    }

    fn dir(&self) -> Result<&Mutex<Dir>, FsError> {
        match &self.body {
            Body::Dir(d) => Ok(d),
            _ => Err(FsError::NotDirectory),
        }
    }

    fn pages(&self) -> Result<&Mutex<Pages>, FsError> {
        match &self.body {
            Body::File(p) => Ok(p),
            Body::Dir(_) => Err(FsError::IsDirectory),
            _ => Err(FsError::Invalid),
        }
    }

    /// The file's size in bytes.
    pub fn size(&self) -> u64 {
        match &self.body {
            Body::File(p) => p.lock().unwrap().size,
            Body::Symlink(t) => t.len() as u64,
            Body::Dir(_) => 4096,
            _ => 0,
        }
    }

    fn touch(&self, m: bool, c: bool) {
        let now = Timespec::now();
        let mut meta = self.meta.lock().unwrap();
        if m {
            meta.mtime = now;
        }
        if c {
            meta.ctime = now;
        }
    }

    /// Makes a new inode for `node` as the child `name`.
    fn add_child(&self, name: &[u8], node: NewNode, body: Body) -> Result<Arc<TmpInode>, FsError> {
        let mut dir = self.dir()?.lock().unwrap();
        if dir.dead {
            return Err(FsError::NotFound);
        }
        if dir.entries.contains_key(name) {
            return Err(FsError::Exists);
        }
        let child = TmpInode::new(&self.fs, node, body);
        if child.kind == FileType::Directory {
            self.meta.lock().unwrap().nlink += 1;
        }
        dir.insert(name, child.clone());
        drop(dir);
        self.touch(true, true);
        Ok(child)
    }

    /// Reads from the file at `offset`.
    fn read_at(&self, bufs: &[GuestSliceMut<'_>], offset: u64) -> Result<usize, FsError> {
        let pages = self.pages()?.lock().unwrap();
        let mut pos = offset;
        let mut done = 0;
        for b in bufs {
            let mut off = 0;
            while off < b.len() && pos < pages.size {
                let in_page = (pos % PAGE) as usize;
                let n = (b.len() - off).min(PAGE as usize - in_page).min((pages.size - pos) as usize);
                let dst = b.subslice(off, n);
                match pages.frames.get(&(pos / PAGE)) {
                    Some(f) => {
                        dst.copy_from_guest(self.fs.mf.slice(*f, in_page, n).as_read_only());
                    }
                    None => dst.fill(0),
                }
                off += n;
                pos += n as u64;
                done += n;
            }
            if pos >= pages.size {
                break;
            }
        }
        Ok(done)
    }

    /// Writes at `offset`, growing the file. A write that runs out of
    /// space returns what went in, or ENOSPC if nothing did.
    fn write_at(&self, bufs: &[GuestSlice<'_>], offset: u64) -> Result<usize, FsError> {
        let mut pages = self.pages()?.lock().unwrap();
        let n = self.write_locked(&mut pages, bufs, offset)?;
        drop(pages);
        self.touch(true, true);
        Ok(n)
    }

    /// Writes at the end of the file, found under the same lock as the
    /// write, so appenders never overwrite each other; returns the count
    /// and the new end.
    fn append(&self, bufs: &[GuestSlice<'_>]) -> Result<(usize, u64), FsError> {
        let mut pages = self.pages()?.lock().unwrap();
        let at = pages.size;
        let n = self.write_locked(&mut pages, bufs, at)?;
        drop(pages);
        self.touch(true, true);
        Ok((n, at + n as u64))
    }

    fn write_locked(&self, pages: &mut Pages, bufs: &[GuestSlice<'_>], offset: u64) -> Result<usize, FsError> {
        let total: u64 = bufs.iter().map(|b| b.len() as u64).sum();
        if offset.checked_add(total).is_none_or(|end| end > i64::MAX as u64) {
            return Err(FsError::Host(crate::errno::Errno::EFBIG));
        }
        let seals = self.seals.load(Ordering::Relaxed);
        if seals & (seal::WRITE | seal::FUTURE_WRITE) != 0 || (seals & seal::GROW != 0 && offset + total > pages.size) {
            return Err(FsError::NotPermitted);
        }
        let mut pos = offset;
        let mut done = 0usize;
        let mut failed = None;
        'bufs: for b in bufs {
            let mut off = 0;
            while off < b.len() {
                let index = pos / PAGE;
                let in_page = (pos % PAGE) as usize;
                let n = (b.len() - off).min(PAGE as usize - in_page);
                let frame = match pages.frames.get(&index) {
                    Some(f) => *f,
                    None => match self.fs.allocate() {
                        Ok(f) => {
                            pages.frames.insert(index, f);
                            f
                        }
                        Err(e) => {
                            failed = Some(e);
                            break 'bufs;
                        }
                    },
                };
                self.fs.mf.slice(frame, in_page, n).copy_from_guest(b.subslice(off, n));
                off += n;
                pos += n as u64;
                done += n;
            }
        }
        if pos > pages.size {
            pages.size = pos;
        }
        match failed {
            Some(e) if done == 0 => Err(e),
            _ => Ok(done),
        }
    }

    /// Sets the size: pages past the end go back, and the bytes of the
    /// last page past the end are zeroed, so growing again reads zeros.
    fn truncate(&self, size: u64) -> Result<(), FsError> {
        let mut pages = self.pages()?.lock().unwrap();
        let seals = self.seals.load(Ordering::Relaxed);
        if (seals & seal::SHRINK != 0 && size < pages.size) || (seals & seal::GROW != 0 && size > pages.size) {
            return Err(FsError::NotPermitted);
        }
        if size < pages.size {
            let keep = size.div_ceil(PAGE);
            let gone = pages.frames.split_off(&keep);
            for f in gone.into_values() {
                self.fs.release(f);
            }
            if !size.is_multiple_of(PAGE)
                && let Some(f) = pages.frames.get(&(size / PAGE))
            {
                let at = (size % PAGE) as usize;
                self.fs.mf.slice(*f, at, PAGE as usize - at).fill(0);
            }
        }
        pages.size = size;
        Ok(())
    }

    /// fallocate(2): allocates the range, or punches a hole in it.
    pub fn fallocate(&self, mode: u32, offset: u64, len: u64) -> Result<(), FsError> {
        let keep_size = mode & g::FALLOC_FL_KEEP_SIZE != 0;
        let end = offset
            .checked_add(len)
            .filter(|e| *e <= i64::MAX as u64)
            .ok_or(FsError::Host(crate::errno::Errno::EFBIG))?;
        let mut pages = self.pages()?.lock().unwrap();
        let seals = self.seals.load(Ordering::Relaxed);
        let punch = mode & g::FALLOC_FL_PUNCH_HOLE != 0;
        if (punch && seals & (seal::WRITE | seal::FUTURE_WRITE) != 0)
            || (!keep_size && seals & seal::GROW != 0 && end > pages.size)
        {
            return Err(FsError::NotPermitted);
        }
        if punch {
            let mut pos = offset;
            while pos < end.min(pages.size) {
                let index = pos / PAGE;
                let in_page = pos % PAGE;
                let n = (PAGE - in_page).min(end - pos);
                if in_page == 0 && n == PAGE {
                    if let Some(f) = pages.frames.remove(&index) {
                        self.fs.release(f);
                    }
                } else if let Some(f) = pages.frames.get(&index) {
                    self.fs.mf.slice(*f, in_page as usize, n as usize).fill(0);
                }
                pos += n;
            }
        } else if mode & !g::FALLOC_FL_KEEP_SIZE != 0 {
            return Err(FsError::NotSupported);
        } else {
            let mut index = offset / PAGE;
            while index * PAGE < end {
                if let std::collections::btree_map::Entry::Vacant(e) = pages.frames.entry(index) {
                    e.insert(self.fs.allocate()?);
                }
                index += 1;
            }
            if !keep_size && end > pages.size {
                pages.size = end;
            }
        }
        drop(pages);
        self.touch(true, true);
        Ok(())
    }

    /// Copies this file's data and metadata into `dst`, a new regular
    /// file: the overlay's copy-up source.
    pub fn fill_from(&self, src: &ReadAt, size: u64) -> Result<(), FsError> {
        let mut pages = self.pages()?.lock().unwrap();
        let mut index = 0;
        while index * PAGE < size {
            let f = match pages.frames.get(&index) {
                Some(f) => *f,
                None => {
                    let f = self.fs.allocate()?;
                    pages.frames.insert(index, f);
                    f
                }
            };
            let n = (size - index * PAGE).min(PAGE) as usize;
            let mut got = 0;
            while got < n {
                let r = src(&[self.fs.mf.slice(f, got, n - got)], index * PAGE + got as u64)?;
                if r == 0 {
                    break;
                }
                got += r;
            }
            index += 1;
        }
        pages.size = size;
        Ok(())
    }

    fn fifo_pipe(&self, ctx_owner: (u32, u32)) -> Option<Arc<super::pipe::Pipe>> {
        match &self.body {
            Body::Fifo(p) => {
                let mut p = p.lock().unwrap();
                Some(p.get_or_insert_with(|| super::pipe::Pipe::new(self.fs.mf.clone(), ctx_owner)).clone())
            }
            _ => None,
        }
    }
}

impl Drop for TmpInode {
    fn drop(&mut self) {
        self.fs.inodes.fetch_sub(1, Ordering::Relaxed);
        if let Body::File(p) = &mut self.body {
            for f in std::mem::take(&mut p.get_mut().unwrap().frames).into_values() {
                self.fs.release(f);
            }
        }
    }
}

/// The inode of `i` as a tmpfs inode of the same tmpfs, for link and rename.
fn same_fs<'a>(me: &TmpInode, other: &'a Arc<dyn Inode>) -> Result<&'a TmpInode, FsError> {
    match other.downcast_ref::<TmpInode>() {
        Some(t) if Arc::ptr_eq(&t.fs, &me.fs) => Ok(t),
        _ => Err(FsError::CrossDevice),
    }
}

fn is_empty_dir(i: &TmpInode) -> bool {
    matches!(&i.body, Body::Dir(d) if d.lock().unwrap().entries.is_empty())
}

impl Inode for TmpInode {
    fn file_type(&self) -> FileType {
        self.kind
    }

    fn stat(&self) -> Result<Stat, FsError> {
        let m = *self.meta.lock().unwrap();
        let blocks = match &self.body {
            Body::File(p) => p.lock().unwrap().frames.len() as u64 * (PAGE / 512),
            _ => 0,
        };
        Ok(Stat {
            dev: self.fs.dev,
            ino: self.ino,
            mode: self.kind.mode_bits() | m.perm,
            nlink: m.nlink,
            uid: m.uid,
            gid: m.gid,
            rdev: m.rdev,
            size: self.size(),
            blksize: PAGE as u32,
            blocks,
            atime: m.atime,
            mtime: m.mtime,
            ctime: m.ctime,
            btime: Some(m.btime),
            mount_id: 0,
        })
    }

    fn ino(&self) -> Result<u64, FsError> {
        Ok(self.ino)
    }

    fn lookup(&self, name: &[u8]) -> Result<Arc<dyn Inode>, FsError> {
        let dir = self.dir()?.lock().unwrap();
        dir.get(name).map(|i| i.clone() as Arc<dyn Inode>).ok_or(FsError::NotFound)
    }

    fn stable_names(&self) -> bool {
        true
    }

    fn read_link(&self) -> Result<Vec<u8>, FsError> {
        match &self.body {
            Body::Symlink(t) => Ok(t.clone()),
            _ => Err(FsError::Invalid),
        }
    }

    fn open(&self, ctx: &Context, dentry: &Arc<Dentry>, flags: OpenFlags) -> Result<Arc<dyn FileOps>, FsError> {
        let me = self.arc();
        match &self.body {
            Body::File(_) => Ok(Arc::new(TmpFile { _use: Use::new(&me), inode: me })),
            Body::Dir(_) => {
                let parent_ino = dentry.parent().map_or(self.ino, |p| p.ino());
                Ok(Arc::new(TmpDirFile { inode: me, parent_ino }))
            }
            Body::Fifo(_) => {
                let pipe = self.fifo_pipe((ctx.creds.uid.fs, ctx.creds.gid.fs)).expect("a FIFO has a pipe");
                super::pipe::open_fifo(ctx, &pipe, flags)
            }
            Body::Node if self.kind == FileType::CharDevice => {
                let rdev = self.meta.lock().unwrap().rdev;
                super::dev::open_device(rdev, flags)
            }
            _ => Err(FsError::NoDevice),
        }
    }

    fn device_number(&self) -> Option<u64> {
        match self.body {
            Body::Node if self.kind == FileType::CharDevice => Some(self.meta.lock().unwrap().rdev),
            _ => None,
        }
    }

    fn statfs(&self) -> Result<StatFs, FsError> {
        let used = self.fs.pages.load(Ordering::Relaxed);
        let total = self.fs.max_pages;
        let free = total.saturating_sub(used);
        Ok(StatFs {
            fs_type: TMPFS_MAGIC,
            block_size: PAGE,
            blocks: total,
            blocks_free: free,
            blocks_avail: free,
            files: total,
            files_free: total.saturating_sub(self.fs.inodes.load(Ordering::Relaxed)),
            name_max: 255,
            flags: 0,
        })
    }

    fn create(&self, _: &Context, name: &[u8], node: NewNode) -> Result<Arc<dyn Inode>, FsError> {
        Ok(self.add_child(name, node, Body::File(Mutex::new(Pages::default())))?)
    }

    fn mkdir(&self, _: &Context, name: &[u8], node: NewNode) -> Result<Arc<dyn Inode>, FsError> {
        Ok(self.add_child(name, node, Body::Dir(Mutex::new(Dir::default())))?)
    }

    fn mknod(&self, _: &Context, name: &[u8], node: NewNode) -> Result<Arc<dyn Inode>, FsError> {
        let body = match node.file_type() {
            FileType::Regular => Body::File(Mutex::new(Pages::default())),
            FileType::Fifo => Body::Fifo(Mutex::new(None)),
            FileType::CharDevice | FileType::BlockDevice | FileType::Socket => Body::Node,
            _ => return Err(FsError::Invalid),
        };
        Ok(self.add_child(name, node, body)?)
    }

    fn symlink(&self, _: &Context, name: &[u8], target: &[u8], node: NewNode) -> Result<Arc<dyn Inode>, FsError> {
        if target.len() > SYMLINK_MAX {
            return Err(FsError::NameTooLong);
        }
        Ok(self.add_child(name, node, Body::Symlink(target.to_vec()))?)
    }

    fn link(&self, _: &Context, name: &[u8], inode: &Arc<dyn Inode>) -> Result<(), FsError> {
        let target = same_fs(self, inode)?;
        let mut dir = self.dir()?.lock().unwrap();
        if dir.dead {
            return Err(FsError::NotFound);
        }
        if dir.entries.contains_key(name) {
            return Err(FsError::Exists);
        }
        {
            let mut m = target.meta.lock().unwrap();
            if m.nlink == 0 && !target.linkable.load(Ordering::Relaxed) {
                return Err(FsError::NotFound);
            }
            m.nlink += 1;
            m.ctime = Timespec::now();
        }
        dir.insert(name, target.arc());
        drop(dir);
        self.touch(true, true);
        Ok(())
    }

    fn unlink(&self, _: &Context, name: &[u8]) -> Result<(), FsError> {
        let mut dir = self.dir()?.lock().unwrap();
        let victim = dir.get(name).ok_or(FsError::NotFound)?;
        if victim.kind == FileType::Directory {
            return Err(FsError::IsDirectory);
        }
        let victim = dir.remove(name).expect("present");
        drop(dir);
        {
            let mut m = victim.meta.lock().unwrap();
            m.nlink = m.nlink.saturating_sub(1);
            m.ctime = Timespec::now();
        }
        self.touch(true, true);
        Ok(())
    }

    fn rmdir(&self, _: &Context, name: &[u8]) -> Result<(), FsError> {
        let mut dir = self.dir()?.lock().unwrap();
        let victim = dir.get(name).ok_or(FsError::NotFound)?;
        if victim.kind != FileType::Directory {
            return Err(FsError::NotDirectory);
        }
        {
            let mut vd = victim.dir()?.lock().unwrap();
            if !vd.entries.is_empty() {
                return Err(FsError::NotEmpty);
            }
            vd.dead = true;
        }
        let victim = dir.remove(name).expect("present");
        drop(dir);
        victim.meta.lock().unwrap().nlink = 0;
        self.meta.lock().unwrap().nlink -= 1;
        self.touch(true, true);
        Ok(())
    }

    fn rename(
        &self,
        _: &Context,
        old_name: &[u8],
        new_dir: &Arc<dyn Inode>,
        new_name: &[u8],
        flags: RenameFlags,
    ) -> Result<(), FsError> {
        let new_parent = same_fs(self, new_dir)?;
        let same_dir = std::ptr::eq(self, new_parent);
        // Both directories locked, always in address order, so that two
        // renames across the same pair never wait for each other.
        let (mut ga, mut gb) = if same_dir {
            (self.dir()?.lock().unwrap(), None)
        } else if (self as *const TmpInode) < (new_parent as *const TmpInode) {
            let a = self.dir()?.lock().unwrap();
            (a, Some(new_parent.dir()?.lock().unwrap()))
        } else {
            let b = new_parent.dir()?.lock().unwrap();
            (self.dir()?.lock().unwrap(), Some(b))
        };
        // The source and target directory, borrowed one at a time.
        macro_rules! dst {
            () => {
                match gb.as_mut() {
                    Some(b) => &mut **b,
                    None => &mut *ga,
                }
            };
        }
        if dst!().dead {
            return Err(FsError::NotFound);
        }
        let moved = ga.get(old_name).ok_or(FsError::NotFound)?.clone();
        let existing = dst!().get(new_name).cloned();
        if let Some(e) = &existing
            && Arc::ptr_eq(e, &moved)
        {
            // Two names of one inode: nothing happens (rename(2)).
            return Ok(());
        }
        if flags.contains(RenameFlags::EXCHANGE) {
            let other = existing.ok_or(FsError::NotFound)?;
            ga.entries.get_mut(old_name).expect("present").1 = other.clone();
            dst!().entries.get_mut(new_name).expect("present").1 = moved.clone();
            if !same_dir && moved.kind != other.kind {
                // The directory of the two takes its `..` link along.
                let (from, to) =
                    if moved.kind == FileType::Directory { (self, new_parent) } else { (new_parent, self) };
                from.meta.lock().unwrap().nlink -= 1;
                to.meta.lock().unwrap().nlink += 1;
            }
            other.touch(false, true);
        } else {
            if let Some(e) = &existing {
                if flags.contains(RenameFlags::NOREPLACE) {
                    return Err(FsError::Exists);
                }
                match (moved.kind == FileType::Directory, e.kind == FileType::Directory) {
                    (true, false) => return Err(FsError::NotDirectory),
                    (false, true) => return Err(FsError::IsDirectory),
                    (true, true) if !is_empty_dir(e) => return Err(FsError::NotEmpty),
                    _ => {}
                }
            }
            ga.remove(old_name);
            if let Some(e) = dst!().remove(new_name) {
                if e.kind == FileType::Directory {
                    e.meta.lock().unwrap().nlink = 0;
                    e.dir()?.lock().unwrap().dead = true;
                    new_parent.meta.lock().unwrap().nlink -= 1;
                } else {
                    {
                        let mut m = e.meta.lock().unwrap();
                        m.nlink = m.nlink.saturating_sub(1);
                        m.ctime = Timespec::now();
                    }
                }
            }
            dst!().insert(new_name, moved.clone());
            if flags.contains(RenameFlags::WHITEOUT) {
                let node = NewNode { mode: g::S_IFCHR, uid: 0, gid: 0, rdev: 0 };
                ga.insert(old_name, TmpInode::new(&self.fs, node, Body::Node));
            }
            if moved.kind == FileType::Directory && !same_dir {
                self.meta.lock().unwrap().nlink -= 1;
                new_parent.meta.lock().unwrap().nlink += 1;
            }
        }
        drop(gb);
        drop(ga);
        moved.touch(false, true);
        self.touch(true, true);
        if !same_dir {
            new_parent.touch(true, true);
        }
        Ok(())
    }

    fn tmpfile(&self, _: &Context, node: NewNode, linkable: bool) -> Result<Arc<dyn Inode>, FsError> {
        let i = TmpInode::new(&self.fs, node, Body::File(Mutex::new(Pages::default())));
        i.meta.lock().unwrap().nlink = 0;
        i.linkable.store(linkable, Ordering::Relaxed);
        Ok(i)
    }

    fn setattr(&self, _: &Context, attr: &SetAttr) -> Result<(), FsError> {
        if let Some(size) = attr.size {
            self.truncate(size)?;
        }
        let now = Timespec::now();
        let mut m = self.meta.lock().unwrap();
        if let Some(mode) = attr.mode {
            m.perm = mode & 0o7777;
        }
        if let Some(uid) = attr.uid {
            m.uid = uid;
        }
        if let Some(gid) = attr.gid {
            m.gid = gid;
        }
        if let Some(t) = attr.atime {
            m.atime = t;
        }
        if let Some(t) = attr.mtime {
            m.mtime = t;
        }
        if attr.size.is_some() && attr.mtime.is_none() {
            m.mtime = now;
        }
        m.ctime = now;
        Ok(())
    }

    fn getxattr(&self, name: &[u8]) -> Result<Vec<u8>, FsError> {
        self.xattrs.lock().unwrap().get(name).cloned().ok_or(FsError::NoData)
    }

    fn setxattr(&self, _: &Context, name: &[u8], value: &[u8], flags: u32) -> Result<(), FsError> {
        let mut x = self.xattrs.lock().unwrap();
        let exists = x.contains_key(name);
        if flags & g::XATTR_CREATE != 0 && exists {
            return Err(FsError::Exists);
        }
        if flags & g::XATTR_REPLACE != 0 && !exists {
            return Err(FsError::NoData);
        }
        let total: usize = x.iter().filter(|(k, _)| k.as_slice() != name).map(|(k, v)| k.len() + v.len()).sum();
        if total + name.len() + value.len() > XATTR_TOTAL_MAX {
            return Err(FsError::NoSpace);
        }
        x.insert(name.to_vec(), value.to_vec());
        drop(x);
        self.touch(false, true);
        Ok(())
    }

    fn listxattr(&self) -> Result<Vec<Vec<u8>>, FsError> {
        Ok(self.xattrs.lock().unwrap().keys().cloned().collect())
    }

    fn removexattr(&self, _: &Context, name: &[u8]) -> Result<(), FsError> {
        self.xattrs.lock().unwrap().remove(name).ok_or(FsError::NoData)?;
        self.touch(false, true);
        Ok(())
    }

    fn read_only(&self) -> bool {
        false
    }
}

/// An open regular file of a tmpfs.
pub struct TmpFile {
    inode: Arc<TmpInode>,
    _use: Use,
}

impl TmpFile {
    pub fn inode(&self) -> &Arc<TmpInode> {
        &self.inode
    }
}

impl FileOps for TmpFile {
    fn read(&self, _: &Context, _: &OpenFile, bufs: &[GuestSliceMut<'_>], offset: u64) -> Result<usize, FsError> {
        let n = self.inode.read_at(bufs, offset)?;
        let mut m = self.inode.meta.lock().unwrap();
        // relatime: the access time moves when it is older than the last
        // change, so "was it read since written" still has an answer.
        if m.atime.sec < m.mtime.sec || (m.atime.sec == m.mtime.sec && m.atime.nsec <= m.mtime.nsec) {
            m.atime = Timespec::now();
        }
        Ok(n)
    }

    fn write(&self, ctx: &Context, file: &OpenFile, bufs: &[GuestSlice<'_>], offset: u64) -> Result<usize, FsError> {
        self.inode.drop_set_id(&ctx.creds);
        if file.flags().contains(OpenFlags::APPEND) {
            return self.inode.append(bufs).map(|(n, _)| n);
        }
        self.inode.write_at(bufs, offset)
    }

    fn stat(&self) -> Result<Stat, FsError> {
        self.inode.stat()
    }

    fn seekable(&self) -> bool {
        true
    }

    fn mappable(&self) -> Option<Arc<dyn Mappable>> {
        Some(Arc::new(MapUse(Use::new(&self.inode))))
    }

    fn sync(&self, _: bool) -> Result<(), FsError> {
        Ok(())
    }

    fn write_append(&self, ctx: &Context, _: &OpenFile, bufs: &[GuestSlice<'_>]) -> Result<(usize, u64), FsError> {
        self.inode.drop_set_id(&ctx.creds);
        self.inode.append(bufs)
    }

    fn fallocate(&self, mode: u32, offset: u64, len: u64) -> Result<(), FsError> {
        self.inode.fallocate(mode, offset, len)
    }

    fn seek_data(&self, offset: u64, hole: bool) -> Option<Result<u64, FsError>> {
        let Ok(pages) = self.inode.pages() else { return Some(Err(FsError::Invalid)) };
        let pages = pages.lock().unwrap();
        if offset >= pages.size {
            return Some(Err(FsError::NoDevice));
        }
        let first = offset / PAGE;
        let r = if hole {
            // The first page from `first` on that has no frame, or the end.
            let mut index = first;
            for (i, _) in pages.frames.range(first..) {
                if *i != index {
                    break;
                }
                index += 1;
            }
            (index * PAGE).max(offset).min(pages.size)
        } else {
            match pages.frames.range(first..).next() {
                Some((i, _)) if i * PAGE < pages.size => (i * PAGE).max(offset),
                _ => return Some(Err(FsError::NoDevice)),
            }
        };
        Some(Ok(r))
    }
}

impl Mappable for TmpInode {
    fn page(&self, index: u64) -> Result<Option<Frame>, crate::mm::MmError> {
        let mut pages = self.pages()?.lock().unwrap();
        if index * PAGE >= pages.size {
            return Ok(None);
        }
        let f = match pages.frames.get(&index) {
            Some(f) => *f,
            None => {
                let f = self.fs.allocate().map_err(|_| crate::mm::MmError::NoMemory)?;
                pages.frames.insert(index, f);
                f
            }
        };
        self.fs.mf.inc_ref(f);
        Ok(Some(f))
    }

    fn size(&self) -> u64 {
        TmpInode::size(self)
    }

    fn describe(&self) -> MapName {
        MapName { path: String::new(), dev: self.fs.dev, ino: self.ino }
    }

    fn cached(&self, index: u64) -> Option<Frame> {
        let pages = self.pages().ok()?.lock().unwrap();
        let f = *pages.frames.get(&index)?;
        self.fs.mf.inc_ref(f);
        Some(f)
    }
}

/// An open directory of a tmpfs.
struct TmpDirFile {
    inode: Arc<TmpInode>,
    parent_ino: u64,
}

impl FileOps for TmpDirFile {
    fn stat(&self) -> Result<Stat, FsError> {
        self.inode.stat()
    }

    fn seekable(&self) -> bool {
        true
    }

    fn sync(&self, _: bool) -> Result<(), FsError> {
        Ok(())
    }

    fn getdents(&self, pos: &mut u64, buf: &mut [u8]) -> Result<usize, FsError> {
        let mut used = 0;
        let full = |used: usize| if used == 0 { Err(FsError::Invalid) } else { Ok(used) };
        if !push_dot_entries(buf, &mut used, pos, self.inode.ino, self.parent_ino) {
            return full(used);
        }
        let dir = self.inode.dir()?.lock().unwrap();
        for (cookie, name) in dir.order.range(*pos..) {
            let (_, inode) = &dir.entries[name];
            if !push_dirent(buf, &mut used, inode.ino, cookie + 1, inode.kind, name) {
                return full(used);
            }
            *pos = cookie + 1;
        }
        Ok(used)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fs() -> (Arc<TmpInode>, Context<'static>) {
        let mf = Arc::new(MemoryFile::new(64 << 20).unwrap());
        (Tmpfs::new_root(mf, 0o1777, 0, 0, None), Context::internal())
    }

    fn node(mode: u32) -> NewNode {
        NewNode { mode, uid: 0, gid: 0, rdev: 0 }
    }

    #[test]
    fn write_read_truncate_round_trip() {
        let (root, ctx) = fs();
        let f = root.create(&ctx, b"f", node(g::S_IFREG | 0o644)).unwrap();
        let t = f.downcast_ref::<TmpInode>().unwrap();
        let data: Vec<u8> = (0..10000u32).map(|i| (i % 251) as u8).collect();
        assert_eq!(t.write_at(&[GuestSlice::from(&data[..])], 100).unwrap(), data.len());
        assert_eq!(t.size(), 10100);
        let mut back = vec![0xffu8; 10100];
        assert_eq!(t.read_at(&[GuestSliceMut::from(&mut back[..])], 0).unwrap(), 10100);
        assert!(back[..100].iter().all(|b| *b == 0));
        assert_eq!(&back[100..], &data[..]);
        t.truncate(150).unwrap();
        t.truncate(9000).unwrap();
        let mut back = vec![0xffu8; 9000];
        t.read_at(&[GuestSliceMut::from(&mut back[..])], 0).unwrap();
        assert_eq!(&back[100..150], &data[..50]);
        assert!(back[150..].iter().all(|b| *b == 0), "bytes past a truncation read as zero");
    }

    #[test]
    fn readdir_positions_survive_changes() {
        let (root, ctx) = fs();
        for i in 0..10 {
            root.create(&ctx, format!("f{i}").as_bytes(), node(g::S_IFREG | 0o644)).unwrap();
        }
        let dentry = Dentry::root(super::super::Mount::new("tmpfs", "tmpfs", false, root.clone()));
        let d = root.open(&ctx, &dentry, OpenFlags::DIRECTORY).unwrap();
        let mut pos = 0;
        let mut buf = vec![0u8; 24 * 5];
        d.getdents(&mut pos, &mut buf).unwrap();
        let mark = pos;
        root.unlink(&ctx, b"f9").unwrap();
        root.create(&ctx, b"late", node(g::S_IFREG | 0o644)).unwrap();
        let mut rest = Vec::new();
        let mut buf = vec![0u8; 4096];
        let mut p = mark;
        loop {
            let n = d.getdents(&mut p, &mut buf).unwrap();
            if n == 0 {
                break;
            }
            let mut off = 0;
            while off < n {
                let reclen = u16::from_le_bytes([buf[off + 16], buf[off + 17]]) as usize;
                let name: Vec<u8> = buf[off + 19..off + reclen].iter().take_while(|b| **b != 0).copied().collect();
                rest.push(String::from_utf8(name).unwrap());
                off += reclen;
            }
        }
        assert!(!rest.contains(&"f9".to_string()));
        assert_eq!(rest.last().unwrap(), "late", "new entries come after the old ones");
        assert!(!rest.contains(&"f0".to_string()), "entries before the mark are not seen again");
    }

    #[test]
    fn rename_replaces_and_refuses_what_linux_refuses() {
        let (root, ctx) = fs();
        let dir: Arc<dyn Inode> = root.clone();
        root.mkdir(&ctx, b"d", node(g::S_IFDIR | 0o755)).unwrap();
        root.mkdir(&ctx, b"e", node(g::S_IFDIR | 0o755)).unwrap();
        root.create(&ctx, b"f", node(g::S_IFREG | 0o644)).unwrap();
        assert_eq!(root.rename(&ctx, b"f", &dir, b"d", RenameFlags::empty()), Err(FsError::IsDirectory));
        assert_eq!(root.rename(&ctx, b"d", &dir, b"f", RenameFlags::empty()), Err(FsError::NotDirectory));
        assert_eq!(root.rename(&ctx, b"d", &dir, b"e", RenameFlags::NOREPLACE), Err(FsError::Exists));
        let e = root.lookup(b"e").unwrap();
        e.create(&ctx, b"x", node(g::S_IFREG | 0o644)).unwrap();
        assert_eq!(root.rename(&ctx, b"d", &dir, b"e", RenameFlags::empty()), Err(FsError::NotEmpty));
        assert_eq!(root.stat().unwrap().nlink, 4);
        root.rename(&ctx, b"d", &e, b"d2", RenameFlags::empty()).unwrap();
        assert_eq!(root.stat().unwrap().nlink, 3, "a directory moved out takes its `..` link along");
        assert_eq!(e.stat().unwrap().nlink, 3);
        root.rename(&ctx, b"f", &e, b"x", RenameFlags::empty()).unwrap();
        assert!(root.lookup(b"f").is_err());
        assert_eq!(e.lookup(b"x").unwrap().ino().unwrap(), 4);
    }

    #[test]
    fn freed_pages_return_to_the_memory_file() {
        let (root, ctx) = fs();
        let before = root.fs.mf.stats();
        let f = root.create(&ctx, b"big", node(g::S_IFREG | 0o644)).unwrap();
        let data = vec![7u8; 1 << 20];
        f.downcast_ref::<TmpInode>().unwrap().write_at(&[GuestSlice::from(&data[..])], 0).unwrap();
        assert_eq!(root.fs.pages.load(Ordering::Relaxed), 256);
        drop(f);
        root.unlink(&ctx, b"big").unwrap();
        assert_eq!(root.fs.pages.load(Ordering::Relaxed), 0);
        assert_eq!(root.fs.mf.stats().frames_in_use, before.frames_in_use);
    }

    #[test]
    fn a_size_limit_gives_enospc() {
        let mf = Arc::new(MemoryFile::new(64 << 20).unwrap());
        let root = Tmpfs::new_root(mf, 0o1777, 0, 0, Some(3 * PAGE));
        let ctx = Context::internal();
        let f = root.create(&ctx, b"f", node(g::S_IFREG | 0o644)).unwrap();
        let t = f.downcast_ref::<TmpInode>().unwrap();
        let data = vec![1u8; 5 * PAGE as usize];
        assert_eq!(t.write_at(&[GuestSlice::from(&data[..])], 0).unwrap(), 3 * PAGE as usize);
        assert_eq!(t.write_at(&[GuestSlice::from(&data[..])], 3 * PAGE), Err(FsError::NoSpace));
    }
}
