//! The overlay root: the read-only root (the host's `/` or `--rootfs`) as
//! the lower layer under a tmpfs upper layer in sandbox memory, so the
//! application may change any file while the host's never change.
//!
//! As Linux's overlayfs: an object is taken from the upper layer where it
//! is there, else from the lower one; the first change of a lower object
//! copies it up (its parent directories first), data and metadata; a lower
//! name that is removed leaves a whiteout that hides it. Unlike Linux, the
//! overlay's own bookkeeping (whiteouts, which upper directories merge which
//! lower one) is kept beside the upper layer rather than in it as device
//! nodes and `trusted.overlay.*` attributes: the upper layer is ours alone,
//! so the application never sees those markers and can make any node or
//! attribute it likes. An upper directory merges a lower one only when it
//! was copied up from it; any other (made by mkdir, also over a whiteout)
//! is opaque by construction.
//!
//! Renaming a lower directory works (Linux refuses it with EXDEV unless
//! `redirect_dir` is on, and `mv` then copies the tree): the directory is
//! copied up without its entries and keeps merging the lower directory it
//! came from wherever it moves, as `redirect_dir` does.
//!
//! Copy-up copies a file's data into upper pages; it does not share the
//! lower file's pages until written.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};

use linux_raw_sys::general as g;
use memory::{GuestSlice, GuestSliceMut, MemoryFile};

use super::synthetic::{push_dirent, push_dot_entries};
use super::tmpfs::{TmpInode, Tmpfs, anon_dev};
use super::{
    Context, Dentry, FileOps, FileType, FsError, Inode, MapName, Mappable, Mount, NewNode, OpenFile, OpenFlags,
    RenameFlags, SetAttr, Stat, StatFs,
};
use crate::mm::MemoryManager;

/// statfs f_type of overlayfs.
const OVERLAYFS_SUPER_MAGIC: u64 = 0x794c_7630;
/// Inode numbers of objects made in the upper layer are this plus their
/// upper number: above every number the lower layer gives (it counts the
/// host objects seen from 2), so the two never meet.
const UPPER_INO_BASE: u64 = 1 << 32;
/// Directory positions: below this, 2 + the index of a name in the lower
/// directory's listing; from it on, this plus the upper directory's cookie
/// of a name only the upper layer has. Both stay valid while entries come
/// and go, so telldir/seekdir keep working.
const UPPER_POS: u64 = 1 << 40;
/// Upper entries read per lock of the upper directory in readdir.
const READDIR_BATCH: usize = 256;

/// One overlay mount.
pub struct Overlay {
    dev: u64,
    upper_root: Arc<TmpInode>,
    /// A dentry of the lower layer to open lower objects with (the host's
    /// `open` asks for one but needs nothing of it).
    lower_dentry: Arc<Dentry>,
    /// Held to read the merged namespace (lookup, readdir) and exclusively
    /// to change it (copy-up and every directory operation), so that a
    /// lookup never sees half a rename or half a copy-up.
    ns: RwLock<()>,
    state: Mutex<State>,
}

/// What the overlay knows beside its layers, by upper inode number.
#[derive(Default)]
struct State {
    /// The overlay inode number of an upper object copied up from the lower
    /// layer: the lower one's, kept for the sandbox's life.
    origin: HashMap<u64, u64>,
    /// The lower directory an upper directory merges: the one it was copied
    /// up from, wherever it has moved since.
    merged: HashMap<u64, Arc<dyn Inode>>,
    /// Names of lower entries removed from a merged directory.
    whiteouts: HashMap<u64, HashSet<Vec<u8>>>,
    /// The upper copies of lower files with several names, by lower inode
    /// number: copying up another name of the same file links that copy, so
    /// the names stay one file (Linux's `index=on`).
    copies: HashMap<u64, Weak<TmpInode>>,
}

impl Overlay {
    /// An overlay of `lower` (a directory) under a new tmpfs in `mf`;
    /// returns its root.
    pub fn over(lower: Arc<dyn Inode>, mf: Arc<MemoryFile>) -> Result<Arc<OverlayInode>, FsError> {
        let st = lower.stat()?;
        // The upper layer may take all of the sandbox's memory (a tmpfs
        // mount's default is half).
        let size = mf.capacity();
        let upper_root = Tmpfs::new_root(mf, st.mode & 0o7777, st.uid, st.gid, Some(size));
        let ctx = Context::internal();
        upper_root.setattr(&ctx, &SetAttr { atime: Some(st.atime), mtime: Some(st.mtime), ..Default::default() })?;
        let lower_mount = Mount::new("hostfs", "lower", true, lower.clone());
        let fs = Arc::new(Overlay {
            dev: anon_dev(),
            upper_root: upper_root.clone(),
            lower_dentry: Dentry::root(lower_mount),
            ns: RwLock::new(()),
            state: Mutex::new(State::default()),
        });
        {
            let mut state = fs.state.lock().unwrap();
            state.origin.insert(upper_root.number(), st.ino);
            state.merged.insert(upper_root.number(), lower.clone());
        }
        let root = OverlayInode::new(&fs, st.ino, FileType::Directory, None, Some(lower), Some(upper_root));
        Ok(root)
    }

    fn read(&self) -> RwLockReadGuard<'_, ()> {
        self.ns.read().unwrap()
    }

    fn write(&self) -> RwLockWriteGuard<'_, ()> {
        self.ns.write().unwrap()
    }

    /// The overlay's inode number of upper object `u`.
    fn upper_ino(&self, u: &TmpInode) -> u64 {
        let n = u.number();
        self.state.lock().unwrap().origin.get(&n).copied().unwrap_or(UPPER_INO_BASE + n)
    }

    fn is_whiteout(&self, upper_dir: &TmpInode, name: &[u8]) -> bool {
        self.state.lock().unwrap().whiteouts.get(&upper_dir.number()).is_some_and(|w| w.contains(name))
    }

    fn set_whiteout(&self, upper_dir: &TmpInode, name: &[u8], on: bool) {
        let mut state = self.state.lock().unwrap();
        if on {
            state.whiteouts.entry(upper_dir.number()).or_default().insert(name.to_vec());
        } else if let Some(w) = state.whiteouts.get_mut(&upper_dir.number()) {
            w.remove(name);
        }
    }

    /// Forgets what was kept for upper object `u`, which was removed.
    fn forget(&self, u: &TmpInode) {
        let mut state = self.state.lock().unwrap();
        state.merged.remove(&u.number());
        state.whiteouts.remove(&u.number());
        if u.stat().is_ok_and(|s| s.nlink == 0) {
            state.origin.remove(&u.number());
        }
    }
}

/// A name of the lower layer's listing of a directory.
struct LowerEntry {
    name: Vec<u8>,
    ino: u64,
    kind: FileType,
}

/// A lower directory's names, read once per directory: the lower layer does
/// not change, and positions in it must stay put.
#[derive(Default)]
struct Listing {
    entries: Vec<LowerEntry>,
    names: HashSet<Vec<u8>>,
}

/// Most lower misses one directory remembers; past it they are forgotten
/// and learned again.
const MAX_LOWER_MISSES: usize = 4096;

/// An object of the overlay as seen at one name: at most one is alive per
/// name (a directory remembers its children), so a rename or removal
/// through the directory reaches the object that open files and working
/// directories hold.
pub struct OverlayInode {
    fs: Arc<Overlay>,
    me: Weak<OverlayInode>,
    ino: u64,
    kind: FileType,
    /// The directory and name it is at: what copy-up needs. None for the
    /// root, an unnamed file (O_TMPFILE) and a removed name.
    place: Mutex<Option<(Arc<OverlayInode>, Vec<u8>)>>,
    /// The lower object: a lower-only object, or the lower directory a
    /// merged one merges.
    lower: Option<Arc<dyn Inode>>,
    upper: OnceLock<Arc<TmpInode>>,
    children: Mutex<HashMap<Vec<u8>, Weak<OverlayInode>>>,
    /// Names the lower directory was asked for and does not have: it never
    /// changes, so a miss is remembered and the host is not asked again
    /// (the negative dentries of this file system).
    lower_misses: Mutex<std::collections::HashSet<Vec<u8>>>,
    listing: OnceLock<Arc<Listing>>,
    /// The pages mappings of the file share (see [`OverlayPages`]).
    mapped: Mutex<Weak<OverlayPages>>,
}

impl OverlayInode {
    fn new(
        fs: &Arc<Overlay>,
        ino: u64,
        kind: FileType,
        place: Option<(Arc<OverlayInode>, Vec<u8>)>,
        lower: Option<Arc<dyn Inode>>,
        upper: Option<Arc<TmpInode>>,
    ) -> Arc<OverlayInode> {
        Arc::new_cyclic(|me| OverlayInode {
            fs: fs.clone(),
            me: me.clone(),
            ino,
            kind,
            place: Mutex::new(place),
            lower,
            upper: upper.map(OnceLock::from).unwrap_or_default(),
            children: Mutex::new(HashMap::new()),
            lower_misses: Mutex::new(std::collections::HashSet::new()),
            listing: OnceLock::new(),
            mapped: Mutex::new(Weak::new()),
        })
    }

    fn arc(&self) -> Arc<OverlayInode> {
        self.me.upgrade().expect("an overlay inode in use is alive")
    }

    /// The overlay's view of upper object `u` at `name` of `self`.
    fn view_of_upper(&self, name: &[u8], u: Arc<TmpInode>) -> Arc<OverlayInode> {
        let (ino, lower) = {
            let state = self.fs.state.lock().unwrap();
            let n = u.number();
            (state.origin.get(&n).copied().unwrap_or(UPPER_INO_BASE + n), state.merged.get(&n).cloned())
        };
        OverlayInode::new(&self.fs, ino, u.file_type(), Some((self.arc(), name.to_vec())), lower, Some(u))
    }

    /// The child `name` of this directory; the namespace lock is held.
    fn child(&self, name: &[u8]) -> Result<Arc<OverlayInode>, FsError> {
        if self.kind != FileType::Directory {
            return Err(FsError::NotDirectory);
        }
        let mut children = self.children.lock().unwrap();
        if let Some(c) = children.get(name).and_then(Weak::upgrade) {
            return Ok(c);
        }
        let c = self.find(name)?;
        if children.len() > 64 && children.len().is_power_of_two() {
            children.retain(|_, w| w.strong_count() > 0);
        }
        children.insert(name.to_vec(), Arc::downgrade(&c));
        Ok(c)
    }

    /// Looks `name` up in the layers.
    fn find(&self, name: &[u8]) -> Result<Arc<OverlayInode>, FsError> {
        if let Some(upper) = self.upper.get() {
            if let Some(u) = upper.child(name) {
                return Ok(self.view_of_upper(name, u));
            }
            if self.fs.is_whiteout(upper, name) {
                return Err(FsError::NotFound);
            }
        }
        let lower_dir = self.lower.as_ref().ok_or(FsError::NotFound)?;
        if self.lower_misses.lock().unwrap().contains(name) {
            return Err(FsError::NotFound);
        }
        let lower = match lower_dir.lookup(name) {
            Err(FsError::NotFound) => {
                let mut misses = self.lower_misses.lock().unwrap();
                if misses.len() >= MAX_LOWER_MISSES {
                    misses.clear();
                }
                misses.insert(name.to_vec());
                return Err(FsError::NotFound);
            }
            r => r?,
        };
        let ino = lower.ino()?;
        Ok(OverlayInode::new(&self.fs, ino, lower.file_type(), Some((self.arc(), name.to_vec())), Some(lower), None))
    }

    /// The upper object this one shows: its own, or for another name of a
    /// lower file with several names, the copy an earlier copy-up of one
    /// of them made (all names stay one file).
    fn shown_upper(&self) -> Option<Arc<TmpInode>> {
        if let Some(u) = self.upper.get() {
            return Some(u.clone());
        }
        if self.kind != FileType::Regular {
            return None;
        }
        let state = self.fs.state.lock().unwrap();
        state.copies.get(&self.ino).and_then(Weak::upgrade).filter(|c| c.stat().is_ok_and(|s| s.nlink > 0))
    }

    /// True if the lower directory this one merges has `name`: removing
    /// `name` must then leave a whiteout.
    fn lower_has(&self, name: &[u8]) -> bool {
        self.lower.as_ref().is_some_and(|l| l.lookup(name).is_ok())
    }

    /// The lower directory's names (none for a directory of the upper
    /// layer only).
    fn listing(&self) -> Result<Arc<Listing>, FsError> {
        if let Some(l) = self.listing.get() {
            return Ok(l.clone());
        }
        let listing = match &self.lower {
            Some(lower) => Arc::new(read_listing(lower, &self.fs.lower_dentry)?),
            None => Arc::new(Listing::default()),
        };
        Ok(self.listing.get_or_init(|| listing).clone())
    }

    /// The number of subdirectories of this merged directory, whose upper
    /// directory is `upper`.
    fn merged_subdirs(&self, upper: &TmpInode) -> Result<u64, FsError> {
        let listing = self.listing()?;
        let _ns = self.fs.read();
        let mut n = 0;
        for e in &listing.entries {
            let is_dir = match upper.child(&e.name) {
                Some(c) => c.file_type() == FileType::Directory,
                None => e.kind == FileType::Directory && !self.fs.is_whiteout(upper, &e.name),
            };
            n += u64::from(is_dir);
        }
        for (_, name, c) in upper.entries_from(0, usize::MAX) {
            n += u64::from(c.file_type() == FileType::Directory && !listing.names.contains(&name));
        }
        Ok(n)
    }

    /// True if the merged directory has no entries.
    fn is_empty_dir(&self) -> Result<bool, FsError> {
        let upper = self.upper.get();
        if upper.is_some_and(|u| !u.entries_from(0, 1).is_empty()) {
            return Ok(false);
        }
        let listing = self.listing()?;
        Ok(listing.entries.iter().all(|e| upper.is_some_and(|u| self.fs.is_whiteout(u, &e.name))))
    }

    /// The upper object, copying this one up first if it has none (its
    /// parents first); with `data` false a regular file's contents are
    /// left behind (it is about to be truncated). The namespace lock is
    /// held exclusively.
    fn copy_up(&self, ctx: &Context, data: bool) -> Result<Arc<TmpInode>, FsError> {
        if let Some(u) = self.upper.get() {
            return Ok(u.clone());
        }
        let (parent, name) = self.place.lock().unwrap().clone().ok_or(FsError::NotFound)?;
        let dir = parent.copy_up(ctx, true)?;
        let lower = self.lower.as_ref().expect("an object without an upper one is in the lower layer");
        let st = lower.stat()?;
        let dir_times = dir.stat()?;
        let node = NewNode { mode: st.mode, uid: st.uid, gid: st.gid, rdev: st.rdev };
        let shared_copy = if self.kind == FileType::Regular && st.nlink > 1 {
            let state = self.fs.state.lock().unwrap();
            state.copies.get(&self.ino).and_then(Weak::upgrade).filter(|c| c.stat().is_ok_and(|s| s.nlink > 0))
        } else {
            None
        };
        let upper = if let Some(copy) = shared_copy {
            dir.link(ctx, &name, &(copy.clone() as Arc<dyn Inode>))?;
            copy
        } else {
            let made = match self.kind {
                FileType::Directory => dir.mkdir(ctx, &name, node)?,
                FileType::Regular => dir.create(ctx, &name, node)?,
                FileType::Symlink => dir.symlink(ctx, &name, &lower.read_link()?, node)?,
                _ => dir.mknod(ctx, &name, node)?,
            };
            let upper = made.downcast_ref::<TmpInode>().expect("the upper layer is a tmpfs").arc();
            let filled =
                if self.kind == FileType::Regular && data { copy_data(lower, &upper, &self.fs) } else { Ok(()) };
            let copied = filled.and_then(|()| copy_xattrs(ctx, lower.as_ref(), &upper)).and_then(|()| {
                let attr = SetAttr {
                    mode: Some(st.mode & 0o7777),
                    uid: Some(st.uid),
                    gid: Some(st.gid),
                    atime: Some(st.atime),
                    mtime: Some(st.mtime),
                    size: None,
                };
                upper.setattr(ctx, &attr)
            });
            if let Err(e) = copied {
                // Leave no half copy behind (out of memory, say).
                let _ = if self.kind == FileType::Directory { dir.rmdir(ctx, &name) } else { dir.unlink(ctx, &name) };
                return Err(e);
            }
            upper
        };
        // Making the copy is no change of the directory to the application.
        dir.setattr(
            ctx,
            &SetAttr { atime: Some(dir_times.atime), mtime: Some(dir_times.mtime), ..Default::default() },
        )?;
        {
            let mut state = self.fs.state.lock().unwrap();
            state.origin.insert(upper.number(), self.ino);
            if self.kind == FileType::Directory {
                state.merged.insert(upper.number(), lower.clone());
            }
            if self.kind == FileType::Regular && st.nlink > 1 {
                state.copies.insert(self.ino, Arc::downgrade(&upper));
            }
        }
        Ok(self.upper.get_or_init(|| upper).clone())
    }

    /// Makes a new object `name` in this directory with `make`, on the
    /// upper layer.
    fn make(
        &self,
        ctx: &Context,
        name: &[u8],
        make: impl FnOnce(&TmpInode) -> Result<Arc<dyn Inode>, FsError>,
    ) -> Result<Arc<dyn Inode>, FsError> {
        let _ns = self.fs.write();
        match self.child(name) {
            Ok(_) => return Err(FsError::Exists),
            Err(FsError::NotFound) => {}
            Err(e) => return Err(e),
        }
        let dir = self.copy_up(ctx, true)?;
        let made = make(&dir)?;
        let made = made.downcast_ref::<TmpInode>().expect("the upper layer is a tmpfs").arc();
        self.fs.set_whiteout(&dir, name, false);
        let view = self.view_of_upper(name, made);
        self.children.lock().unwrap().insert(name.to_vec(), Arc::downgrade(&view));
        Ok(view)
    }

    /// Removes `child`, the object at `name` (unlink and rmdir); the
    /// namespace lock is held exclusively.
    fn remove(&self, ctx: &Context, name: &[u8], child: &OverlayInode) -> Result<(), FsError> {
        let dir = self.copy_up(ctx, true)?;
        if let Some(u) = child.upper.get() {
            if child.kind == FileType::Directory {
                dir.rmdir(ctx, name)?;
            } else {
                dir.unlink(ctx, name)?;
            }
            self.fs.forget(u);
        }
        if self.lower_has(name) {
            self.fs.set_whiteout(&dir, name, true);
        }
        self.children.lock().unwrap().remove(name);
        *child.place.lock().unwrap() = None;
        Ok(())
    }

    /// The overlay's inode in `other`, if it is one of this overlay.
    fn same_fs(&self, other: &Arc<dyn Inode>) -> Result<Arc<OverlayInode>, FsError> {
        match other.downcast_ref::<OverlayInode>() {
            Some(o) if Arc::ptr_eq(&o.fs, &self.fs) => Ok(o.arc()),
            _ => Err(FsError::CrossDevice),
        }
    }
}

/// Reads the whole of lower directory `lower`.
fn read_listing(lower: &Arc<dyn Inode>, dentry: &Arc<Dentry>) -> Result<Listing, FsError> {
    let file = lower.open(&Context::internal(), dentry, OpenFlags::DIRECTORY)?;
    let mut listing = Listing::default();
    let mut buf = vec![0u8; 32 * 1024];
    let mut pos = 0;
    loop {
        let n = file.getdents(&mut pos, &mut buf)?;
        if n == 0 {
            break;
        }
        let mut at = 0;
        while at + 19 <= n {
            let ino = u64::from_le_bytes(buf[at..at + 8].try_into().unwrap());
            let reclen = u16::from_le_bytes([buf[at + 16], buf[at + 17]]) as usize;
            if reclen == 0 {
                break;
            }
            let d_type = buf[at + 18];
            let name: Vec<u8> = buf[at + 19..at + reclen].iter().take_while(|b| **b != 0).copied().collect();
            at += reclen;
            if name == b"." || name == b".." {
                continue;
            }
            let kind = match dirent_file_type(d_type) {
                Some(k) => k,
                // A file system that does not say: ask the object.
                None => match lower.lookup(&name) {
                    Ok(i) => i.file_type(),
                    Err(_) => continue,
                },
            };
            listing.names.insert(name.clone());
            listing.entries.push(LowerEntry { name, ino, kind });
        }
    }
    Ok(listing)
}

/// The file type of a dirent's d_type; None for DT_UNKNOWN.
fn dirent_file_type(d_type: u8) -> Option<FileType> {
    Some(match u32::from(d_type) {
        g::DT_REG => FileType::Regular,
        g::DT_DIR => FileType::Directory,
        g::DT_LNK => FileType::Symlink,
        g::DT_CHR => FileType::CharDevice,
        g::DT_BLK => FileType::BlockDevice,
        g::DT_FIFO => FileType::Fifo,
        g::DT_SOCK => FileType::Socket,
        _ => return None,
    })
}

/// Copies a lower regular file's data into its new upper copy.
fn copy_data(lower: &Arc<dyn Inode>, upper: &TmpInode, fs: &Overlay) -> Result<(), FsError> {
    let ctx = Context::internal();
    let ops = lower.open(&ctx, &fs.lower_dentry, OpenFlags::empty())?;
    let size = ops.stat()?.size;
    let file = OpenFile::new(ops.clone(), None, OpenFlags::empty());
    upper.fill_from(&move |bufs, offset| ops.read(&ctx, &file, bufs, offset), size)
}

/// Copies the extended attributes the lower object lets us read.
fn copy_xattrs(ctx: &Context, lower: &dyn Inode, upper: &TmpInode) -> Result<(), FsError> {
    for name in lower.listxattr().unwrap_or_default() {
        if let Ok(value) = lower.getxattr(&name) {
            upper.setxattr(ctx, &name, &value, 0)?;
        }
    }
    Ok(())
}

impl Inode for OverlayInode {
    fn file_type(&self) -> FileType {
        self.kind
    }

    fn stat(&self) -> Result<Stat, FsError> {
        let upper = self.shown_upper();
        let mut st = match (&upper, &self.lower) {
            (Some(u), _) => u.stat()?,
            (None, Some(l)) => l.stat()?,
            (None, None) => unreachable!("an overlay object is in one layer at least"),
        };
        st.dev = self.fs.dev;
        st.ino = self.ino;
        if self.kind == FileType::Directory
            && let (Some(u), Some(_)) = (&upper, &self.lower)
        {
            // Neither layer's count is the merged directory's: count its
            // subdirectories (Linux's overlayfs gives up and says 1).
            st.nlink = 2 + self.merged_subdirs(u)?;
        }
        Ok(st)
    }

    fn ino(&self) -> Result<u64, FsError> {
        Ok(self.ino)
    }

    fn lookup(&self, name: &[u8]) -> Result<Arc<dyn Inode>, FsError> {
        let _ns = self.fs.read();
        Ok(self.child(name)?)
    }

    fn stable_names(&self) -> bool {
        // The lower layer is read-only and the upper one is ours: names
        // change only through this file system.
        self.kind == FileType::Directory
    }

    fn read_link(&self) -> Result<Vec<u8>, FsError> {
        match (self.shown_upper(), &self.lower) {
            (Some(u), _) => u.read_link(),
            (None, Some(l)) => l.read_link(),
            (None, None) => Err(FsError::Invalid),
        }
    }

    fn open(&self, ctx: &Context, dentry: &Arc<Dentry>, flags: OpenFlags) -> Result<Arc<dyn FileOps>, FsError> {
        if self.kind == FileType::Directory {
            let parent_ino = dentry.parent().map_or(self.ino, |p| p.ino());
            return Ok(Arc::new(OverlayDir { inode: self.arc(), parent_ino }));
        }
        let writes = !flags.contains(OpenFlags::PATH) && (flags.writable() || flags.contains(OpenFlags::TRUNC));
        let inner = if writes && self.kind == FileType::Regular {
            let upper = {
                let _ns = self.fs.write();
                self.copy_up(ctx, !flags.contains(OpenFlags::TRUNC))?
            };
            upper.open(ctx, dentry, flags)?
        } else {
            match (self.shown_upper(), &self.lower) {
                (Some(u), _) => u.open(ctx, dentry, flags)?,
                // A lower file opened for reading goes on reading the lower
                // data after a copy-up, as on Linux.
                (None, Some(l)) => l.open(ctx, &self.fs.lower_dentry, flags)?,
                (None, None) => return Err(FsError::NotFound),
            }
        };
        Ok(Arc::new(OverlayFile { inode: self.arc(), inner }))
    }

    fn device_number(&self) -> Option<u64> {
        match (self.shown_upper(), &self.lower) {
            (Some(u), _) => u.device_number(),
            (None, Some(l)) => l.device_number(),
            (None, None) => None,
        }
    }

    fn statfs(&self) -> Result<StatFs, FsError> {
        // The space that matters is the upper layer's: the sandbox's memory.
        let mut s = self.fs.upper_root.statfs()?;
        s.fs_type = OVERLAYFS_SUPER_MAGIC;
        Ok(s)
    }

    fn create(&self, ctx: &Context, name: &[u8], node: NewNode) -> Result<Arc<dyn Inode>, FsError> {
        self.make(ctx, name, |d| d.create(ctx, name, node))
    }

    fn mkdir(&self, ctx: &Context, name: &[u8], node: NewNode) -> Result<Arc<dyn Inode>, FsError> {
        self.make(ctx, name, |d| d.mkdir(ctx, name, node))
    }

    fn mknod(&self, ctx: &Context, name: &[u8], node: NewNode) -> Result<Arc<dyn Inode>, FsError> {
        self.make(ctx, name, |d| d.mknod(ctx, name, node))
    }

    fn symlink(&self, ctx: &Context, name: &[u8], target: &[u8], node: NewNode) -> Result<Arc<dyn Inode>, FsError> {
        self.make(ctx, name, |d| d.symlink(ctx, name, target, node))
    }

    fn link(&self, ctx: &Context, name: &[u8], inode: &Arc<dyn Inode>) -> Result<(), FsError> {
        let target = self.same_fs(inode)?;
        let _ns = self.fs.write();
        match self.child(name) {
            Ok(_) => return Err(FsError::Exists),
            Err(FsError::NotFound) => {}
            Err(e) => return Err(e),
        }
        let file = target.copy_up(ctx, true)?;
        let dir = self.copy_up(ctx, true)?;
        dir.link(ctx, name, &(file.clone() as Arc<dyn Inode>))?;
        self.fs.set_whiteout(&dir, name, false);
        Ok(())
    }

    fn unlink(&self, ctx: &Context, name: &[u8]) -> Result<(), FsError> {
        let _ns = self.fs.write();
        let child = self.child(name)?;
        if child.kind == FileType::Directory {
            return Err(FsError::IsDirectory);
        }
        self.remove(ctx, name, &child)
    }

    fn rmdir(&self, ctx: &Context, name: &[u8]) -> Result<(), FsError> {
        let _ns = self.fs.write();
        let child = self.child(name)?;
        if child.kind != FileType::Directory {
            return Err(FsError::NotDirectory);
        }
        if !child.is_empty_dir()? {
            return Err(FsError::NotEmpty);
        }
        self.remove(ctx, name, &child)
    }

    fn rename(
        &self,
        ctx: &Context,
        old_name: &[u8],
        new_dir: &Arc<dyn Inode>,
        new_name: &[u8],
        flags: RenameFlags,
    ) -> Result<(), FsError> {
        if flags.contains(RenameFlags::WHITEOUT) {
            // As Linux's overlayfs.
            return Err(FsError::Invalid);
        }
        let new_parent = self.same_fs(new_dir)?;
        let exchange = flags.contains(RenameFlags::EXCHANGE);
        let _ns = self.fs.write();
        let moved = self.child(old_name)?;
        let replaced = match new_parent.child(new_name) {
            Ok(c) => Some(c),
            Err(FsError::NotFound) => None,
            Err(e) => return Err(e),
        };
        if let Some(r) = &replaced {
            let same_upper = matches!((moved.upper.get(), r.upper.get()), (Some(a), Some(b)) if Arc::ptr_eq(a, b));
            if Arc::ptr_eq(r, &moved) || same_upper {
                // Two names of one file: nothing happens (rename(2)).
                return Ok(());
            }
            if !exchange {
                if flags.contains(RenameFlags::NOREPLACE) {
                    return Err(FsError::Exists);
                }
                match (moved.kind == FileType::Directory, r.kind == FileType::Directory) {
                    (true, false) => return Err(FsError::NotDirectory),
                    (false, true) => return Err(FsError::IsDirectory),
                    (true, true) if !r.is_empty_dir()? => return Err(FsError::NotEmpty),
                    _ => {}
                }
            }
        } else if exchange {
            return Err(FsError::NotFound);
        }
        moved.copy_up(ctx, true)?;
        if exchange && let Some(r) = &replaced {
            r.copy_up(ctx, true)?;
        }
        let from = self.copy_up(ctx, true)?;
        let to: Arc<dyn Inode> = new_parent.copy_up(ctx, true)?;
        from.rename(ctx, old_name, &to, new_name, flags)?;
        let to = to.downcast_ref::<TmpInode>().expect("the upper layer is a tmpfs");
        if !exchange {
            if let Some(u) = replaced.as_ref().and_then(|r| r.upper.get()) {
                self.fs.forget(u);
            }
            self.fs.set_whiteout(to, new_name, false);
            if self.lower_has(old_name) {
                self.fs.set_whiteout(&from, old_name, true);
            }
        }
        self.children.lock().unwrap().remove(old_name);
        new_parent.children.lock().unwrap().remove(new_name);
        *moved.place.lock().unwrap() = Some((new_parent.clone(), new_name.to_vec()));
        new_parent.children.lock().unwrap().insert(new_name.to_vec(), Arc::downgrade(&moved));
        if let Some(r) = replaced {
            if exchange {
                *r.place.lock().unwrap() = Some((self.arc(), old_name.to_vec()));
                self.children.lock().unwrap().insert(old_name.to_vec(), Arc::downgrade(&r));
            } else {
                *r.place.lock().unwrap() = None;
            }
        }
        Ok(())
    }

    fn tmpfile(&self, ctx: &Context, node: NewNode, linkable: bool) -> Result<Arc<dyn Inode>, FsError> {
        let _ns = self.fs.write();
        let dir = self.copy_up(ctx, true)?;
        let made = dir.tmpfile(ctx, node, linkable)?;
        let made = made.downcast_ref::<TmpInode>().expect("the upper layer is a tmpfs").arc();
        let ino = UPPER_INO_BASE + made.number();
        Ok(OverlayInode::new(&self.fs, ino, FileType::Regular, None, None, Some(made)))
    }

    fn setattr(&self, ctx: &Context, attr: &SetAttr) -> Result<(), FsError> {
        let upper = {
            let _ns = self.fs.write();
            self.copy_up(ctx, attr.size != Some(0))?
        };
        upper.setattr(ctx, attr)
    }

    fn getxattr(&self, name: &[u8]) -> Result<Vec<u8>, FsError> {
        match (self.shown_upper(), &self.lower) {
            (Some(u), _) => u.getxattr(name),
            (None, Some(l)) => l.getxattr(name),
            (None, None) => Err(FsError::NoData),
        }
    }

    fn setxattr(&self, ctx: &Context, name: &[u8], value: &[u8], flags: u32) -> Result<(), FsError> {
        let upper = {
            let _ns = self.fs.write();
            self.copy_up(ctx, true)?
        };
        upper.setxattr(ctx, name, value, flags)
    }

    fn listxattr(&self) -> Result<Vec<Vec<u8>>, FsError> {
        match (self.shown_upper(), &self.lower) {
            (Some(u), _) => u.listxattr(),
            (None, Some(l)) => l.listxattr(),
            (None, None) => Ok(Vec::new()),
        }
    }

    fn removexattr(&self, ctx: &Context, name: &[u8]) -> Result<(), FsError> {
        let upper = {
            let _ns = self.fs.write();
            self.copy_up(ctx, true)?
        };
        upper.removexattr(ctx, name)
    }

    fn read_only(&self) -> bool {
        false
    }

    fn release_caches(&self) {
        if let Some(l) = &self.lower {
            l.release_caches();
        }
    }
}

/// An open non-directory of the overlay: the layer's file does the work;
/// its metadata is the overlay object's (fstat after a copy-up shows the
/// copy, as on Linux, even while the file reads the lower data).
struct OverlayFile {
    inode: Arc<OverlayInode>,
    inner: Arc<dyn FileOps>,
}

impl FileOps for OverlayFile {
    fn read(&self, ctx: &Context, file: &OpenFile, bufs: &[GuestSliceMut<'_>], offset: u64) -> Result<usize, FsError> {
        self.inner.read(ctx, file, bufs, offset)
    }
    fn write(&self, ctx: &Context, file: &OpenFile, bufs: &[GuestSlice<'_>], offset: u64) -> Result<usize, FsError> {
        self.inner.write(ctx, file, bufs, offset)
    }
    fn write_append(&self, ctx: &Context, file: &OpenFile, bufs: &[GuestSlice<'_>]) -> Result<(usize, u64), FsError> {
        self.inner.write_append(ctx, file, bufs)
    }
    fn seek_data(&self, offset: u64, hole: bool) -> Option<Result<u64, FsError>> {
        self.inner.seek_data(offset, hole)
    }
    fn fallocate(&self, mode: u32, offset: u64, len: u64) -> Result<(), FsError> {
        self.inner.fallocate(mode, offset, len)
    }
    fn smallest_transfer(&self) -> usize {
        self.inner.smallest_transfer()
    }
    fn writes_each_buffer(&self) -> bool {
        self.inner.writes_each_buffer()
    }
    fn stat(&self) -> Result<Stat, FsError> {
        self.inode.stat()
    }
    fn seekable(&self) -> bool {
        self.inner.seekable()
    }
    fn ignores_offset(&self) -> bool {
        self.inner.ignores_offset()
    }
    fn getdents(&self, pos: &mut u64, buf: &mut [u8]) -> Result<usize, FsError> {
        self.inner.getdents(pos, buf)
    }
    fn ioctl(&self, ctx: &Context, file: &OpenFile, mm: &MemoryManager, cmd: u32, arg: u64) -> Result<u64, FsError> {
        self.inner.ioctl(ctx, file, mm, cmd, arg)
    }
    fn mappable(&self) -> Option<Arc<dyn Mappable>> {
        let inner = self.inner.mappable()?;
        // One wrapper per layer file, so that mappings of it still merge.
        let mut mapped = self.inode.mapped.lock().unwrap();
        if let Some(m) = mapped.upgrade()
            && Arc::ptr_eq(&m.inner, &inner)
        {
            return Some(m);
        }
        let m = Arc::new(OverlayPages { inner, dev: self.inode.fs.dev, ino: self.inode.ino });
        *mapped = Arc::downgrade(&m);
        Some(m)
    }
    fn readable_bytes(&self) -> Option<u64> {
        self.inner.readable_bytes()
    }
    fn sync(&self, data_only: bool) -> Result<(), FsError> {
        self.inner.sync(data_only)
    }
    fn anonymous_mapping(&self) -> bool {
        self.inner.anonymous_mapping()
    }
    fn seek_stream(&self, offset: i64, whence: u32) -> Result<u64, FsError> {
        self.inner.seek_stream(offset, whence)
    }
    fn poll(&self) -> u32 {
        self.inner.poll()
    }
    fn poll_queue(&self) -> Option<&crate::waiter::WaitQueue> {
        self.inner.poll_queue()
    }
    fn host_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.inner.host_fd()
    }
    fn anon_name(&self) -> Option<&'static str> {
        self.inner.anon_name()
    }
}

/// The pages of a mapped overlay file: the layer's, named in /proc/PID/maps
/// by the overlay's device and inode numbers, as stat shows them.
struct OverlayPages {
    inner: Arc<dyn Mappable>,
    dev: u64,
    ino: u64,
}

impl Mappable for OverlayPages {
    fn page(&self, index: u64) -> Result<Option<memory::Frame>, crate::mm::MmError> {
        self.inner.page(index)
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn describe(&self) -> MapName {
        MapName { path: self.inner.describe().path, dev: self.dev, ino: self.ino }
    }
    fn cached(&self, index: u64) -> Option<memory::Frame> {
        self.inner.cached(index)
    }
    fn prefetch(&self, index: u64, count: u64) {
        self.inner.prefetch(index, count)
    }
    fn unchanging(&self) -> bool {
        self.inner.unchanging()
    }
    fn write_back(&self) -> Result<(), crate::mm::MmError> {
        self.inner.write_back()
    }
}

/// An open directory of the overlay: the merged listing.
///
/// Positions: 0 and 1 are `.` and `..`; then the names of the lower
/// directory in its order, each shown as the merged directory has it now
/// (skipped if removed, the upper object if replaced or copied up); then
/// the names only the upper layer has, in the order they were made. A name
/// that existed throughout a listing is therefore seen exactly once, however
/// many others come and go or are copied up meanwhile.
struct OverlayDir {
    inode: Arc<OverlayInode>,
    parent_ino: u64,
}

impl FileOps for OverlayDir {
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
        let node = &self.inode;
        let fs = &node.fs;
        let listing = node.listing()?;
        let _ns = fs.read();
        let upper = node.upper.get();
        if *pos < UPPER_POS {
            let start = (*pos - 2) as usize;
            for (i, e) in listing.entries.iter().enumerate().skip(start) {
                let next = i as u64 + 3;
                let shown = match upper {
                    Some(u) => match u.child(&e.name) {
                        Some(c) => Some((fs.upper_ino(&c), c.file_type())),
                        None if fs.is_whiteout(u, &e.name) => None,
                        None => Some((e.ino, e.kind)),
                    },
                    None => Some((e.ino, e.kind)),
                };
                if let Some((ino, kind)) = shown
                    && !push_dirent(buf, &mut used, ino, next, kind, &e.name)
                {
                    return full(used);
                }
                *pos = next;
            }
            *pos = UPPER_POS;
        }
        if let Some(u) = upper {
            loop {
                let batch = u.entries_from(*pos - UPPER_POS, READDIR_BATCH);
                if batch.is_empty() {
                    break;
                }
                for (cookie, name, child) in batch {
                    let next = UPPER_POS + cookie + 1;
                    if !listing.names.contains(&name)
                        && !push_dirent(buf, &mut used, fs.upper_ino(&child), next, child.file_type(), &name)
                    {
                        return full(used);
                    }
                    *pos = next;
                }
            }
        }
        Ok(used)
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use std::path::{Path, PathBuf};

    use super::super::host::HostFs;
    use super::*;

    /// A host directory for a lower layer, removed when dropped.
    struct Tree(PathBuf);

    impl Tree {
        fn new() -> Tree {
            use std::sync::atomic::{AtomicU32, Ordering};
            static N: AtomicU32 = AtomicU32::new(0);
            let p = std::env::temp_dir().join(format!(
                "cordon-overlay-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(p.join("d/sub")).unwrap();
            std::fs::write(p.join("d/f"), b"lower data").unwrap();
            std::fs::set_permissions(p.join("d/f"), std::fs::Permissions::from_mode(0o640)).unwrap();
            std::fs::write(p.join("d/sub/inner"), b"inner").unwrap();
            std::fs::write(p.join("top"), b"top").unwrap();
            std::os::unix::fs::symlink("d/f", p.join("link")).unwrap();
            Tree(p)
        }

        fn path(&self, rel: &str) -> PathBuf {
            self.0.join(rel)
        }
    }

    impl Drop for Tree {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn overlay(tree: &Path) -> (Arc<OverlayInode>, Arc<Dentry>) {
        let mf = Arc::new(MemoryFile::new(64 << 20).unwrap());
        let host = HostFs::new(mf.clone()).unwrap();
        let root = Overlay::over(host.open_tree(tree, false).unwrap(), mf).unwrap();
        let dentry = Dentry::root(Mount::new("overlay", "overlay", false, root.clone()));
        (root, dentry)
    }

    /// The inode at a slash-separated path below `root`.
    fn walk(root: &Arc<OverlayInode>, path: &str) -> Result<Arc<dyn Inode>, FsError> {
        let mut cur: Arc<dyn Inode> = root.clone();
        for c in path.split('/').filter(|c| !c.is_empty()) {
            cur = cur.lookup(c.as_bytes())?;
        }
        Ok(cur)
    }

    fn read_all(inode: &Arc<dyn Inode>, dentry: &Arc<Dentry>) -> Vec<u8> {
        let ctx = Context::internal();
        let ops = inode.open(&ctx, dentry, OpenFlags::empty()).unwrap();
        read_ops(&ops)
    }

    fn read_ops(ops: &Arc<dyn FileOps>) -> Vec<u8> {
        let ctx = Context::internal();
        let file = OpenFile::new(ops.clone(), None, OpenFlags::empty());
        let mut buf = vec![0u8; 4096];
        let n = ops.read(&ctx, &file, &[GuestSliceMut::from(&mut buf[..])], 0).unwrap();
        buf.truncate(n);
        buf
    }

    fn write_at(inode: &Arc<dyn Inode>, dentry: &Arc<Dentry>, data: &[u8], offset: u64) {
        let ctx = Context::internal();
        let ops = inode.open(&ctx, dentry, OpenFlags::RDWR).unwrap();
        let file = OpenFile::new(ops.clone(), None, OpenFlags::RDWR);
        assert_eq!(ops.write(&ctx, &file, &[GuestSlice::from(data)], offset).unwrap(), data.len());
    }

    /// Every name a full readdir of `dir` gives, `.` and `..` left out.
    fn names(dir: &Arc<dyn Inode>, dentry: &Arc<Dentry>) -> Vec<String> {
        let ops = dir.open(&Context::internal(), dentry, OpenFlags::DIRECTORY).unwrap();
        let mut pos = 0;
        let mut out = Vec::new();
        while let Some(batch) = next_names(&ops, &mut pos, 4096) {
            out.extend(batch.into_iter().map(|(n, _)| n));
        }
        out.retain(|n| n != "." && n != "..");
        out
    }

    /// One getdents call's names with the position after each; None at the
    /// end.
    fn next_names(ops: &Arc<dyn FileOps>, pos: &mut u64, size: usize) -> Option<Vec<(String, u64)>> {
        let mut buf = vec![0u8; size];
        let n = ops.getdents(pos, &mut buf).unwrap();
        if n == 0 {
            return None;
        }
        let mut out = Vec::new();
        let mut off = 0;
        while off < n {
            let next = u64::from_le_bytes(buf[off + 8..off + 16].try_into().unwrap());
            let reclen = u16::from_le_bytes([buf[off + 16], buf[off + 17]]) as usize;
            let name: Vec<u8> = buf[off + 19..off + reclen].iter().take_while(|b| **b != 0).copied().collect();
            out.push((String::from_utf8(name).unwrap(), next));
            off += reclen;
        }
        Some(out)
    }

    fn node(mode: u32) -> NewNode {
        NewNode { mode, uid: 0, gid: 0, rdev: 0 }
    }

    #[test]
    fn copy_up_keeps_content_mode_and_inode_and_leaves_the_lower_alone() {
        let tree = Tree::new();
        let (root, dentry) = overlay(&tree.0);
        let f = walk(&root, "d/f").unwrap();
        let before = f.stat().unwrap();
        let reader = f.open(&Context::internal(), &dentry, OpenFlags::empty()).unwrap();
        write_at(&f, &dentry, b"UPPER", 0);
        let after = f.stat().unwrap();
        assert_eq!(after.ino, before.ino, "copy-up keeps the inode number");
        assert_eq!(after.dev, before.dev);
        assert_eq!(after.mode, before.mode);
        assert_ne!(after.mtime, before.mtime, "the write moved the modification time");
        assert_eq!(read_all(&f, &dentry), b"UPPER data");
        assert_eq!(read_ops(&reader), b"lower data", "a file opened before the copy-up reads the lower data");
        let again = walk(&root, "d/f").unwrap();
        assert_eq!(again.ino().unwrap(), before.ino);
        assert_eq!(std::fs::read(tree.path("d/f")).unwrap(), b"lower data", "the host file is unchanged");
        let d = walk(&root, "d").unwrap();
        let host_dir = std::fs::metadata(tree.path("d")).unwrap();
        let shown = d.stat().unwrap().mtime;
        assert_eq!(
            (shown.sec, shown.nsec as i64),
            (host_dir.mtime(), host_dir.mtime_nsec()),
            "copy-up is no change of the directory"
        );
        assert_eq!(std::fs::metadata(tree.path("d/f")).unwrap().permissions().mode() & 0o777, 0o640);
    }

    #[test]
    fn whiteouts_hide_lower_names_and_new_directories_are_opaque() {
        let tree = Tree::new();
        let (root, dentry) = overlay(&tree.0);
        let ctx = Context::internal();
        let d = walk(&root, "d").unwrap();
        d.unlink(&ctx, b"f").unwrap();
        assert_eq!(walk(&root, "d/f").err(), Some(FsError::NotFound));
        let mut shown = names(&d, &dentry);
        shown.sort();
        assert_eq!(shown, ["sub"]);
        assert_eq!(root.stat().unwrap().nlink, 3, "one subdirectory: d");
        assert_eq!(d.rmdir(&ctx, b"sub"), Err(FsError::NotEmpty), "the lower entries count");
        walk(&root, "d/sub").unwrap().unlink(&ctx, b"inner").unwrap();
        assert_eq!(d.stat().unwrap().nlink, 3, "a merged directory counts its subdirectories");
        d.rmdir(&ctx, b"sub").unwrap();
        assert_eq!(walk(&root, "d/sub").err(), Some(FsError::NotFound));
        assert_eq!(d.stat().unwrap().nlink, 2);
        let sub = d.mkdir(&ctx, b"sub", node(g::S_IFDIR | 0o700)).unwrap();
        d.mkdir(&ctx, b"other", node(g::S_IFDIR | 0o700)).unwrap();
        assert_eq!(d.stat().unwrap().nlink, 4);
        assert_eq!(walk(&root, "d/sub/inner").err(), Some(FsError::NotFound), "a remade directory is opaque");
        assert!(names(&sub, &dentry).is_empty());
        let f = d.create(&ctx, b"f", node(g::S_IFREG | 0o600)).unwrap();
        assert!(read_all(&f, &dentry).is_empty(), "a file made over a whiteout is new");
        assert_ne!(f.ino().unwrap(), walk(&root, "top").unwrap().ino().unwrap());
        assert_eq!(d.unlink(&ctx, b"sub"), Err(FsError::IsDirectory));
        assert_eq!(d.rmdir(&ctx, b"f"), Err(FsError::NotDirectory));
        assert!(tree.path("d/sub/inner").exists() && tree.path("d/f").exists(), "the host tree is unchanged");
    }

    #[test]
    fn renaming_a_lower_directory_takes_its_lower_entries_along() {
        let tree = Tree::new();
        let (root, dentry) = overlay(&tree.0);
        let ctx = Context::internal();
        let top: Arc<dyn Inode> = root.clone();
        let ino = walk(&root, "d").unwrap().ino().unwrap();
        root.rename(&ctx, b"d", &top, b"e", RenameFlags::empty()).unwrap();
        assert_eq!(walk(&root, "d").err(), Some(FsError::NotFound));
        let e = walk(&root, "e").unwrap();
        assert_eq!(e.ino().unwrap(), ino, "the directory keeps its inode number");
        assert_eq!(read_all(&walk(&root, "e/f").unwrap(), &dentry), b"lower data");
        assert_eq!(read_all(&walk(&root, "e/sub/inner").unwrap(), &dentry), b"inner");
        let mut shown = names(&e, &dentry);
        shown.sort();
        assert_eq!(shown, ["f", "sub"]);
        // Back again, and over a lower file: the renamed directory still
        // merges its own lower directory only.
        root.rename(&ctx, b"e", &top, b"d", RenameFlags::empty()).unwrap();
        assert_eq!(read_all(&walk(&root, "d/sub/inner").unwrap(), &dentry), b"inner");
        let sub = walk(&root, "d/sub").unwrap();
        let d = walk(&root, "d").unwrap();
        assert_eq!(d.rename(&ctx, b"sub", &top, b"top", RenameFlags::empty()), Err(FsError::NotDirectory));
        root.create(&ctx, b"empty", node(g::S_IFREG | 0o644)).unwrap();
        root.unlink(&ctx, b"empty").unwrap();
        d.rename(&ctx, b"sub", &top, b"moved", RenameFlags::empty()).unwrap();
        assert!(Arc::ptr_eq(&walk(&root, "moved").unwrap(), &sub), "the moved object is the one open files hold");
        assert_eq!(read_all(&walk(&root, "moved/inner").unwrap(), &dentry), b"inner");
        assert_eq!(walk(&root, "d/sub").err(), Some(FsError::NotFound));
        assert_eq!(root.rename(&ctx, b"top", &top, b"x", RenameFlags::WHITEOUT), Err(FsError::Invalid));
        root.rename(&ctx, b"top", &d, b"f", RenameFlags::empty()).unwrap();
        assert_eq!(read_all(&walk(&root, "d/f").unwrap(), &dentry), b"top");
        assert_eq!(walk(&root, "top").err(), Some(FsError::NotFound));
        assert_eq!(std::fs::read(tree.path("top")).unwrap(), b"top");
        assert!(tree.path("d/sub/inner").exists());
    }

    #[test]
    fn hard_links_share_one_inode_number() {
        let tree = Tree::new();
        std::fs::hard_link(tree.path("top"), tree.path("top2")).unwrap();
        let (root, dentry) = overlay(&tree.0);
        let ctx = Context::internal();
        let f = walk(&root, "d/f").unwrap();
        let d = walk(&root, "d").unwrap();
        root.link(&ctx, b"alias", &f).unwrap();
        let alias = walk(&root, "alias").unwrap();
        assert_eq!(alias.ino().unwrap(), f.ino().unwrap());
        assert_eq!(alias.stat().unwrap().nlink, 2);
        write_at(&alias, &dentry, b"LINKED", 0);
        assert_eq!(read_all(&walk(&root, "d/f").unwrap(), &dentry), b"LINKEDdata");
        let made = d.create(&ctx, b"new", node(g::S_IFREG | 0o644)).unwrap();
        root.link(&ctx, b"new2", &made).unwrap();
        assert_eq!(walk(&root, "new2").unwrap().ino().unwrap(), made.ino().unwrap());
        // Two names of one lower file stay one file after copy-up.
        let (a, b) = (walk(&root, "top").unwrap(), walk(&root, "top2").unwrap());
        assert_eq!(a.ino().unwrap(), b.ino().unwrap());
        write_at(&a, &dentry, b"T", 0);
        assert_eq!(read_all(&b, &dentry), b"Top");
        write_at(&b, &dentry, b"TO", 0);
        assert_eq!(read_all(&a, &dentry), b"TOp");
        assert_eq!(std::fs::read(tree.path("top")).unwrap(), b"top");
    }

    #[test]
    fn metadata_changes_copy_up() {
        let tree = Tree::new();
        let (root, dentry) = overlay(&tree.0);
        let ctx = Context::internal();
        let host_path = std::ffi::CString::new(tree.path("d/f").as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid path, name and value, each with its length; the
        // call reads them only.
        let xattr_set =
            unsafe { libc::setxattr(host_path.as_ptr(), c"user.origin".as_ptr(), b"host".as_ptr().cast(), 4, 0) } == 0;
        let f = walk(&root, "d/f").unwrap();
        let ino = f.ino().unwrap();
        f.setattr(&ctx, &SetAttr { mode: Some(0o604), uid: Some(7), ..Default::default() }).unwrap();
        if xattr_set {
            assert_eq!(f.getxattr(b"user.origin").unwrap(), b"host", "copy-up copies the extended attributes");
        }
        let st = walk(&root, "d/f").unwrap().stat().unwrap();
        assert_eq!((st.mode & 0o7777, st.uid, st.ino, st.size), (0o604, 7, ino, 10));
        assert_eq!(read_all(&f, &dentry), b"lower data");
        let link = walk(&root, "link").unwrap();
        link.setxattr(&ctx, b"user.k", b"v", 0).unwrap();
        assert_eq!(link.read_link().unwrap(), b"d/f");
        assert_eq!(link.getxattr(b"user.k").unwrap(), b"v");
        let top = walk(&root, "top").unwrap();
        top.setattr(&ctx, &SetAttr { size: Some(0), ..Default::default() }).unwrap();
        assert_eq!(top.stat().unwrap().size, 0);
        let meta = std::fs::metadata(tree.path("d/f")).unwrap();
        assert_eq!((meta.mode() & 0o7777, meta.len()), (0o640, 10));
        assert_eq!(root.statfs().unwrap().fs_type, OVERLAYFS_SUPER_MAGIC);
    }

    #[test]
    fn readdir_positions_hold_while_entries_come_and_go() {
        let tree = Tree::new();
        for i in 0..300 {
            std::fs::write(tree.path(&format!("d/low{i}")), b"x").unwrap();
        }
        let (root, dentry) = overlay(&tree.0);
        let ctx = Context::internal();
        let d = walk(&root, "d").unwrap();
        for i in 0..300 {
            d.create(&ctx, format!("up{i}").as_bytes(), node(g::S_IFREG | 0o644)).unwrap();
        }
        let mut existing: HashSet<String> = names(&d, &dentry).into_iter().collect();
        assert_eq!(existing.len(), 602);
        let ops = d.open(&ctx, &dentry, OpenFlags::DIRECTORY).unwrap();
        let mut pos = 0;
        let mut seen: Vec<String> = Vec::new();
        let mut marks: Vec<(usize, u64)> = Vec::new();
        let mut round = 0;
        loop {
            // telldir before each read.
            marks.push((seen.len(), pos));
            let Some(batch) = next_names(&ops, &mut pos, 512) else { break };
            seen.extend(batch.into_iter().map(|(n, _)| n).filter(|n| n != "." && n != ".."));
            // Meanwhile: remove a lower and an upper name, add one, copy a
            // lower file up.
            if round == 40 {
                continue;
            }
            let gone = [format!("low{}", 299 - round), format!("up{}", 299 - round)];
            for g in &gone {
                d.unlink(&ctx, g.as_bytes()).unwrap();
                existing.remove(g);
            }
            d.create(&ctx, format!("late{round}").as_bytes(), node(g::S_IFREG | 0o644)).unwrap();
            write_at(&walk(&root, &format!("d/low{round}")).unwrap_or_else(|_| panic!("low{round}")), &dentry, b"y", 0);
            round += 1;
        }
        let unique: HashSet<&String> = seen.iter().collect();
        assert_eq!(unique.len(), seen.len(), "no name twice");
        for name in &existing {
            if !name.starts_with("late") {
                assert!(unique.contains(name), "{name} existed throughout but was not listed");
            }
        }
        // seekdir back to a mark gives the names from there again.
        let (at, mark) = marks[3];
        let mut p = mark;
        let again = next_names(&ops, &mut p, 512).unwrap();
        let expect: Vec<&String> = seen[at..].iter().filter(|n| names(&d, &dentry).contains(n)).take(3).collect();
        assert_eq!(again.iter().take(3).map(|(n, _)| n).collect::<Vec<_>>(), expect);
        assert_eq!(std::fs::read_dir(tree.path("d")).unwrap().count(), 302, "the host directory is unchanged");
    }
}
