//! Dentries: a name in a directory, bound to an inode, remembering its
//! parent. The chain of parents is how `..` and getcwd are answered.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};

use super::{FileType, FsError, Inode, StatFs};

/// The statfs f_type Linux reports for a file system type the sentry serves
/// itself; 0 for types whose inodes report their own.
fn fs_magic(fs_type: &str) -> u64 {
    match fs_type {
        "proc" => 0x9fa0,
        "devtmpfs" | "tmpfs" => 0x0102_1994,
        "sysfs" => 0x6265_6572,
        "cgroup2" => 0x6367_7270,
        _ => 0,
    }
}

/// A mounted file system.
pub struct Mount {
    pub id: u64,
    /// File-system type as /proc/mounts shows it.
    pub fs_type: &'static str,
    pub source: String,
    pub read_only: bool,
    pub root: Arc<dyn Inode>,
}

impl Mount {
    pub fn new(fs_type: &'static str, source: impl Into<String>, read_only: bool, root: Arc<dyn Inode>) -> Arc<Mount> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Arc::new(Mount { id: NEXT.fetch_add(1, Ordering::Relaxed), fs_type, source: source.into(), read_only, root })
    }
}

/// A name of an inode: where it sits (its parent and its name there),
/// which rename changes.
struct Link {
    name: Vec<u8>,
    parent: Option<Arc<Dentry>>,
}

/// How many recently used dentries are kept alive beyond their users, so
/// that a repeated walk of the same paths finds them cached.
const RECENT: usize = 8192;

/// A resolved name. There is at most one live dentry per name: a
/// directory remembers its children, so a lookup finds the dentry an open
/// file or a working directory already holds, and a rename moves that one
/// (getcwd and /proc/PID/fd then show the new path).
pub struct Dentry {
    link: RwLock<Link>,
    pub inode: Arc<dyn Inode>,
    pub mount: Arc<Mount>,
    /// The inode number, cached for identity checks.
    ino: u64,
    /// Children looked up through this directory, held weakly: a child
    /// lives while something holds it (an open file, a cwd, a child of its
    /// own, or the recently-used list).
    children: Mutex<HashMap<Vec<u8>, Weak<Dentry>>>,
    /// Set when the name was removed (unlink, rmdir, replaced by rename).
    deleted: AtomicBool,
}

/// The most recently looked-up dentries, kept alive (see [`RECENT`]).
fn keep_recent(d: &Arc<Dentry>) {
    static LIST: Mutex<VecDeque<Arc<Dentry>>> = Mutex::new(VecDeque::new());
    let mut list = LIST.lock().unwrap();
    if list.len() >= RECENT {
        list.pop_front();
    }
    list.push_back(d.clone());
}

/// Serialises renames, so that two of them never move dentries across
/// each other's parents half-way (Linux's s_vfs_rename_mutex).
pub static RENAME_LOCK: Mutex<()> = Mutex::new(());

impl Dentry {
    fn make(name: Vec<u8>, parent: Option<Arc<Dentry>>, inode: Arc<dyn Inode>, mount: Arc<Mount>) -> Arc<Dentry> {
        let ino = inode.ino().unwrap_or(0);
        Arc::new(Dentry {
            link: RwLock::new(Link { name, parent }),
            inode,
            mount,
            ino,
            children: Mutex::new(HashMap::new()),
            deleted: AtomicBool::new(false),
        })
    }

    /// The root of a mount with no parent (the sandbox root).
    pub fn root(mount: Arc<Mount>) -> Arc<Dentry> {
        Dentry::make(Vec::new(), None, mount.root.clone(), mount)
    }

    /// A child of this dentry that is not remembered (a mount's root seen
    /// from its mount point, or names that may change behind our back).
    pub fn child(self: &Arc<Self>, name: &[u8], inode: Arc<dyn Inode>, mount: Arc<Mount>) -> Arc<Dentry> {
        Dentry::make(name.to_vec(), Some(self.clone()), inode, mount)
    }

    /// The remembered child `name`, if it is still alive.
    pub fn cached_child(&self, name: &[u8]) -> Option<Arc<Dentry>> {
        let d = self.children.lock().unwrap().get(name)?.upgrade()?;
        keep_recent(&d);
        Some(d)
    }

    /// Remembers `inode` as the child `name`; returns the dentry, or the
    /// one another lookup remembered first.
    pub fn cache_child(self: &Arc<Self>, name: &[u8], inode: Arc<dyn Inode>) -> Arc<Dentry> {
        let mut children = self.children.lock().unwrap();
        if let Some(d) = children.get(name).and_then(Weak::upgrade) {
            return d;
        }
        if children.len() > 64 && children.len().is_power_of_two() {
            children.retain(|_, w| w.strong_count() > 0);
        }
        let d = Dentry::make(name.to_vec(), Some(self.clone()), inode, self.mount.clone());
        children.insert(name.to_vec(), Arc::downgrade(&d));
        drop(children);
        keep_recent(&d);
        d
    }

    /// Remembers the root of `mount`, mounted over the child `name`.
    pub fn cache_mount_root(self: &Arc<Self>, name: &[u8], mount: Arc<Mount>) -> Arc<Dentry> {
        let d = Dentry::make(name.to_vec(), Some(self.clone()), mount.root.clone(), mount);
        self.children.lock().unwrap().insert(name.to_vec(), Arc::downgrade(&d));
        keep_recent(&d);
        d
    }

    /// Forgets the child `name` after it was removed: its dentry, if alive,
    /// is marked deleted.
    pub fn forget_child(&self, name: &[u8]) {
        if let Some(d) = self.children.lock().unwrap().remove(name).and_then(|w| w.upgrade()) {
            d.deleted.store(true, Ordering::Release);
        }
    }

    /// Marks this name removed (an unlinked file still open).
    pub fn set_deleted(&self) {
        self.deleted.store(true, Ordering::Release);
    }

    /// Moves the remembered child `old` of `old_dir` to `new` in `new_dir`
    /// after the file system renamed it; a dentry `new` named before is
    /// deleted (it was replaced). With `exchange`, the two swap places.
    /// Callers hold [`RENAME_LOCK`].
    pub fn move_child(old_dir: &Arc<Dentry>, old: &[u8], new_dir: &Arc<Dentry>, new: &[u8], exchange: bool) {
        let moved = old_dir.children.lock().unwrap().remove(old).and_then(|w| w.upgrade());
        let replaced = new_dir.children.lock().unwrap().remove(new).and_then(|w| w.upgrade());
        if let Some(d) = &moved {
            *d.link.write().unwrap() = Link { name: new.to_vec(), parent: Some(new_dir.clone()) };
            new_dir.children.lock().unwrap().insert(new.to_vec(), Arc::downgrade(d));
        }
        if let Some(r) = replaced {
            if exchange {
                *r.link.write().unwrap() = Link { name: old.to_vec(), parent: Some(old_dir.clone()) };
                old_dir.children.lock().unwrap().insert(old.to_vec(), Arc::downgrade(&r));
            } else {
                r.deleted.store(true, Ordering::Release);
            }
        }
    }

    pub fn parent(&self) -> Option<Arc<Dentry>> {
        self.link.read().unwrap().parent.clone()
    }

    pub fn name(&self) -> Vec<u8> {
        self.link.read().unwrap().name.clone()
    }

    /// True once the name was removed.
    pub fn is_deleted(&self) -> bool {
        self.deleted.load(Ordering::Acquire)
    }

    pub fn ino(&self) -> u64 {
        self.ino
    }

    pub fn file_type(&self) -> FileType {
        self.inode.file_type()
    }

    /// statfs(2) of the file system holding this name: what the inode
    /// reports, with the type of its mount when the inode has none.
    pub fn statfs(&self) -> Result<StatFs, FsError> {
        let mut s = self.inode.statfs()?;
        if s.fs_type == 0 {
            s.fs_type = fs_magic(self.mount.fs_type);
        }
        Ok(s)
    }

    /// True if both name the same object in the same mount.
    pub fn same(a: &Arc<Dentry>, b: &Arc<Dentry>) -> bool {
        Arc::ptr_eq(a, b) || (a.mount.id == b.mount.id && a.ino == b.ino)
    }

    /// True if `self` is `ancestor` or below it.
    pub fn is_below(self: &Arc<Self>, ancestor: &Arc<Dentry>) -> bool {
        let mut d = self.clone();
        loop {
            if Dentry::same(&d, ancestor) {
                return true;
            }
            match d.parent() {
                Some(p) => d = p,
                None => return false,
            }
        }
    }

    /// Absolute path from the sandbox root.
    pub fn path(&self) -> Vec<u8> {
        let mut parts: Vec<Vec<u8>> = Vec::new();
        let (mut name, mut parent) = {
            let l = self.link.read().unwrap();
            (l.name.clone(), l.parent.clone())
        };
        while let Some(p) = parent {
            parts.push(name);
            let l = p.link.read().unwrap();
            (name, parent) = (l.name.clone(), l.parent.clone());
        }
        join(parts)
    }

    /// Path relative to `root` if inside it (for getcwd under a chroot);
    /// None if this dentry is not below `root`.
    pub fn path_from(self: &Arc<Self>, root: &Arc<Dentry>) -> Option<Vec<u8>> {
        let mut parts: Vec<Vec<u8>> = Vec::new();
        let mut d: Arc<Dentry> = self.clone();
        loop {
            if Dentry::same(&d, root) {
                break;
            }
            let (name, parent) = {
                let l = d.link.read().unwrap();
                (l.name.clone(), l.parent.clone()?)
            };
            parts.push(name);
            d = parent;
        }
        Some(join(parts))
    }
}

impl crate::mm::MapPath for Dentry {
    /// The path, with " (deleted)" once the name is gone, as Linux's
    /// d_path shows it.
    fn map_path(&self) -> Vec<u8> {
        let mut p = self.path();
        if self.is_deleted() {
            p.extend_from_slice(b" (deleted)");
        }
        p
    }
}

/// "/a/b" from ["b", "a"]; "/" from none.
fn join(parts: Vec<Vec<u8>>) -> Vec<u8> {
    if parts.is_empty() {
        return b"/".to_vec();
    }
    let mut out = Vec::new();
    for p in parts.iter().rev() {
        out.push(b'/');
        out.extend_from_slice(p);
    }
    out
}

/// A mount point: the mount and inode of the directory mounted over, and the
/// name in it.
type MountPoint = (u64, u64, Vec<u8>);

/// Where other file systems are mounted.
#[derive(Default)]
pub struct MountTable {
    points: RwLock<HashMap<MountPoint, Arc<Mount>>>,
    all: RwLock<Vec<(Vec<u8>, Arc<Mount>)>>,
}

impl MountTable {
    /// Mounts `mount` at `name` inside directory `dir`.
    pub fn mount(&self, dir: &Arc<Dentry>, name: &[u8], mount: Arc<Mount>) {
        let mut path = dir.path();
        if path != b"/" {
            path.push(b'/');
        }
        path.extend_from_slice(name);
        self.points.write().unwrap().insert((dir.mount.id, dir.ino(), name.to_vec()), mount.clone());
        self.all.write().unwrap().push((path, mount));
    }

    /// The mount over `name` in `dir`, if any.
    pub fn lookup(&self, dir: &Dentry, name: &[u8]) -> Option<Arc<Mount>> {
        let points = self.points.read().unwrap();
        if points.is_empty() {
            return None;
        }
        points.get(&(dir.mount.id, dir.ino(), name.to_vec())).cloned()
    }

    /// Every mount with its path, in mount order (for /proc/mounts).
    pub fn list(&self) -> Vec<(Vec<u8>, Arc<Mount>)> {
        self.all.read().unwrap().clone()
    }
}
