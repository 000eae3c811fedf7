//! Dentries: a name in a directory, bound to an inode, remembering its
//! parent. The chain of parents is how `..` and getcwd are answered.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
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
        "devpts" => 0x1cd1,
        "mqueue" => 0x1980_0202,
        _ => 0,
    }
}

bitflags::bitflags! {
    /// Per-mount flags (Linux's MNT_*): what one mount of a file system
    /// allows, whatever other mounts of it allow.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
    pub struct MountFlags: u32 {
        const READ_ONLY = 1 << 0;
        const NOSUID = 1 << 1;
        const NODEV = 1 << 2;
        const NOEXEC = 1 << 3;
        const NOATIME = 1 << 4;
        const NODIRATIME = 1 << 5;
        const RELATIME = 1 << 6;
        const NOSYMFOLLOW = 1 << 7;
        /// Made read-only by the sandbox: no remount inside makes it
        /// writable (Linux's MNT_LOCK_READONLY).
        const LOCK_READ_ONLY = 1 << 8;
    }
}

impl MountFlags {
    /// The flags a mount(2) caller sets, as opposed to the locks.
    pub const SETTABLE: MountFlags = MountFlags::from_bits_truncate(0xff);
    /// The atime flags, kept by a remount that names none.
    pub const ATIME: MountFlags = MountFlags::NOATIME.union(MountFlags::NODIRATIME).union(MountFlags::RELATIME);

    /// The per-mount options as /proc/PID/mountinfo shows them after
    /// ro/rw, in Linux's order.
    pub fn show(self, out: &mut String) {
        for (flag, name) in [
            (MountFlags::NOSUID, ",nosuid"),
            (MountFlags::NODEV, ",nodev"),
            (MountFlags::NOEXEC, ",noexec"),
            (MountFlags::NOATIME, ",noatime"),
            (MountFlags::NODIRATIME, ",nodiratime"),
            (MountFlags::RELATIME, ",relatime"),
            (MountFlags::NOSYMFOLLOW, ",nosymfollow"),
        ] {
            if self.contains(flag) {
                out.push_str(name);
            }
        }
    }
}

/// What all mounts of one file system instance share (Linux's
/// super_block): its read-only state and the options it was made with.
pub struct SuperBlock {
    read_only: AtomicBool,
    /// File-system options as /proc/mounts shows them after ro/rw
    /// (",size=1024k,mode=755"), empty when there are none.
    options: Mutex<String>,
}

impl SuperBlock {
    pub fn read_only(&self) -> bool {
        self.read_only.load(Ordering::Acquire)
    }

    pub fn set_read_only(&self, ro: bool) {
        self.read_only.store(ro, Ordering::Release);
    }

    pub fn options(&self) -> String {
        self.options.lock().unwrap().clone()
    }

    pub fn set_options(&self, options: String) {
        *self.options.lock().unwrap() = options;
    }
}

/// How mount and unmount events spread from a mount (shared subtrees).
/// The sandbox has one mount namespace; the state is kept for what
/// mountinfo shows and for the rules that depend on it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Propagation {
    /// The peer group this mount shares events with (shared:N).
    pub shared: Option<u64>,
    /// The peer group it receives events from (master:N).
    pub master: Option<u64>,
    pub unbindable: bool,
}

/// A mounted file system.
pub struct Mount {
    pub id: u64,
    /// File-system type as /proc/mounts shows it.
    pub fs_type: &'static str,
    pub source: String,
    pub sb: Arc<SuperBlock>,
    pub root: Arc<dyn Inode>,
    /// Where `root` is within its file system ("/" unless a bind mount of
    /// a subtree), as mountinfo's fourth field shows.
    pub root_path: Vec<u8>,
    flags: AtomicU32,
    propagation: Mutex<Propagation>,
    /// Set by a first umount2(MNT_EXPIRE): a second one unmounts.
    expiry_mark: AtomicBool,
}

fn next_mount_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl Mount {
    /// A mount of a new instance of a file system; a `read_only` one stays
    /// so (the sandbox's own views of the host).
    pub fn new(fs_type: &'static str, source: impl Into<String>, read_only: bool, root: Arc<dyn Inode>) -> Arc<Mount> {
        Mount::new_subtree(fs_type, source, read_only, root, b"/".to_vec())
    }

    /// [`Mount::new`] of a subtree of a file system: `root_path` is where
    /// `root` is within it, as mountinfo's fourth field shows (a host
    /// directory bound in).
    pub fn new_subtree(
        fs_type: &'static str,
        source: impl Into<String>,
        read_only: bool,
        root: Arc<dyn Inode>,
        root_path: Vec<u8>,
    ) -> Arc<Mount> {
        let flags = if read_only { MountFlags::READ_ONLY | MountFlags::LOCK_READ_ONLY } else { MountFlags::empty() };
        let sb = Arc::new(SuperBlock { read_only: AtomicBool::new(false), options: Mutex::new(String::new()) });
        Mount::with(fs_type, source.into(), sb, root, root_path, flags)
    }

    fn with(
        fs_type: &'static str,
        source: String,
        sb: Arc<SuperBlock>,
        root: Arc<dyn Inode>,
        root_path: Vec<u8>,
        flags: MountFlags,
    ) -> Arc<Mount> {
        Arc::new(Mount {
            id: next_mount_id(),
            fs_type,
            source,
            sb,
            root,
            root_path,
            flags: AtomicU32::new(flags.bits()),
            propagation: Mutex::new(Propagation::default()),
            expiry_mark: AtomicBool::new(false),
        })
    }

    /// A new mount of the file system of `self` whose root is `d`, a
    /// dentry of it (a bind mount), with the same flags.
    pub fn bind_of(self: &Arc<Self>, d: &Arc<Dentry>) -> Arc<Mount> {
        let mut root_path = self.root_path.clone();
        let below = path_in_mount(d);
        if below != b"/" {
            if root_path == b"/" {
                root_path.clear();
            }
            root_path.extend_from_slice(&below);
        }
        let m =
            Mount::with(self.fs_type, self.source.clone(), self.sb.clone(), d.inode.clone(), root_path, self.flags());
        // A bind of a shared mount joins its peer group.
        let p = self.propagation();
        if p.shared.is_some() {
            m.set_propagation(Propagation { unbindable: false, ..p });
        }
        m
    }

    pub fn flags(&self) -> MountFlags {
        MountFlags::from_bits_truncate(self.flags.load(Ordering::Acquire))
    }

    pub fn set_flags(&self, flags: MountFlags) {
        self.flags.store(flags.bits(), Ordering::Release);
    }

    /// Writes are refused on this mount (it or its file system is
    /// read-only).
    pub fn read_only(&self) -> bool {
        self.flags().contains(MountFlags::READ_ONLY) || self.sb.read_only()
    }

    pub fn propagation(&self) -> Propagation {
        *self.propagation.lock().unwrap()
    }

    pub fn set_propagation(&self, p: Propagation) {
        *self.propagation.lock().unwrap() = p;
    }

    /// Marks the mount for expiry; true if it was marked already.
    pub fn mark_expired(&self) -> bool {
        self.expiry_mark.swap(true, Ordering::AcqRel)
    }
}

/// A new peer group id for a shared mount.
pub fn new_peer_group() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The path of `d` below the root of the mount it is in ("/" for that
/// root).
fn path_in_mount(d: &Arc<Dentry>) -> Vec<u8> {
    let mut parts = Vec::new();
    let mut cur = d.clone();
    while let Some(p) = cur.parent() {
        if p.mount.id != cur.mount.id {
            break;
        }
        parts.push(cur.name());
        cur = p;
    }
    join(parts)
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
static RECENT_LIST: Mutex<VecDeque<Arc<Dentry>>> = Mutex::new(VecDeque::new());

/// Lets go of the recently used dentries (for an exact account of what
/// the sandbox holds at its end).
pub fn release_recent() {
    let gone = std::mem::take(&mut *RECENT_LIST.lock().unwrap());
    drop(gone);
}

/// Lets go of the recently used dentries of mounts `ids` (a tree of mounts
/// taken away for good: what it holds of the host goes with it).
pub fn release_recent_of(ids: &[u64]) {
    RECENT_LIST.lock().unwrap().retain(|d| !ids.contains(&d.mount.id));
}

fn keep_recent(d: &Arc<Dentry>) {
    let mut list = RECENT_LIST.lock().unwrap();
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
        let removed = self.children.lock().unwrap().remove(name);
        if let Some(d) = removed.and_then(|w| w.upgrade()) {
            d.set_deleted();
        }
    }

    /// Forgets the child `name` if it is the root of mount `id` (that
    /// mount is gone from there); the dentry itself stays usable.
    pub fn forget_mount_root(&self, name: &[u8], id: u64) {
        let mut children = self.children.lock().unwrap();
        if children.get(name).and_then(Weak::upgrade).is_some_and(|d| d.mount.id == id) {
            children.remove(name);
        }
    }

    /// Puts this dentry, the root of its mount, at `place` (its mount was
    /// moved there): no parent at the namespace root, else the child of the
    /// directory there.
    pub fn relink(self: &Arc<Self>, place: &Place) {
        let _serial = RENAME_LOCK.lock().unwrap();
        let old = std::mem::replace(&mut *self.link.write().unwrap(), Link { name: Vec::new(), parent: None });
        if let Some(p) = old.parent {
            let mut children = p.children.lock().unwrap();
            if children.get(&old.name).and_then(Weak::upgrade).is_some_and(|d| Arc::ptr_eq(&d, self)) {
                children.remove(&old.name);
            }
        }
        if let Place::Over(dir, name) = place {
            *self.link.write().unwrap() = Link { name: name.clone(), parent: Some(dir.clone()) };
            if !name.is_empty() {
                dir.children.lock().unwrap().insert(name.clone(), Arc::downgrade(self));
            }
        }
    }

    /// Marks this name removed (an unlinked file still open). The cache
    /// lets go of it, so the object goes as soon as its last user does.
    pub fn set_deleted(&self) {
        self.deleted.store(true, Ordering::Release);
        RECENT_LIST.lock().unwrap().retain(|d| !std::ptr::eq(&**d, self));
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
                r.set_deleted();
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
    let mut out = Vec::new();
    for p in parts.iter().rev().filter(|p| !p.is_empty()) {
        out.push(b'/');
        out.extend_from_slice(p);
    }
    if out.is_empty() {
        out.push(b'/');
    }
    out
}

/// A mount point: the mount and inode of the directory mounted over, and
/// the name in it; the name is empty for a mount over a directory that has
/// no name to look it up by (a root).
type MountPoint = (u64, u64, Vec<u8>);

/// Where a mount is attached.
#[derive(Clone)]
pub enum Place {
    /// The root of the mount namespace.
    Root,
    /// Over the child `name` of `dir`, or over `dir` itself when `name`
    /// is empty.
    Over(Arc<Dentry>, Vec<u8>),
}

impl Place {
    /// The place a mount over `d` goes.
    pub fn over(d: &Arc<Dentry>) -> Place {
        match d.parent() {
            Some(p) => Place::Over(p, d.name()),
            None => Place::Over(d.clone(), Vec::new()),
        }
    }

    fn key(&self) -> Option<MountPoint> {
        match self {
            Place::Root => None,
            Place::Over(dir, name) => Some((dir.mount.id, dir.ino(), name.clone())),
        }
    }
}

/// A mount in the table.
#[derive(Clone)]
struct Attached {
    mount: Arc<Mount>,
    /// The mount it is mounted on; None for the namespace root.
    parent: Option<Arc<Mount>>,
    place: Place,
    /// Mounted over the root of `parent` at the same place (stacked).
    stacked: bool,
}

/// One mount as /proc/PID/mountinfo shows it.
pub struct MountEntry {
    pub mount: Arc<Mount>,
    /// The parent's id; its own for the namespace root.
    pub parent_id: u64,
    /// The mount point from the namespace root.
    pub path: Vec<u8>,
    /// The id of the root of the tree it is in (see [`MountTable::add_tree`]).
    pub tree: u64,
}

#[derive(Default)]
struct Table {
    /// The mounts at each mount point, newest (the one seen) last.
    points: HashMap<MountPoint, Vec<Arc<Mount>>>,
    /// Every attached mount, in mount order.
    all: Vec<Attached>,
}

impl Table {
    fn attach(&mut self, place: Place, mount: Arc<Mount>) {
        let (parent, stacked) = match &place {
            Place::Root => (None, false),
            Place::Over(dir, _) => {
                match self.points.get(&place.key().expect("a place over something")).and_then(|v| v.last()) {
                    Some(below) => (Some(below.clone()), true),
                    None => (Some(dir.mount.clone()), false),
                }
            }
        };
        if let Some(key) = place.key() {
            self.points.entry(key).or_default().push(mount.clone());
        }
        self.all.push(Attached { mount, parent, place, stacked });
    }

    /// Takes `id` out of the table (not its children); returns where it was.
    fn detach(&mut self, id: u64) -> Option<Attached> {
        let i = self.all.iter().position(|a| a.mount.id == id)?;
        let a = self.all.remove(i);
        if let Some(key) = a.place.key()
            && let Some(stack) = self.points.get_mut(&key)
        {
            stack.retain(|m| m.id != id);
            if stack.is_empty() {
                self.points.remove(&key);
            }
        }
        // A mount stacked on this one now sits on what this one sat on.
        for other in self.all.iter_mut() {
            if other.stacked && other.parent.as_ref().is_some_and(|p| p.id == id) {
                other.parent = a.parent.clone();
                other.stacked = a.stacked;
            }
        }
        Some(a)
    }

    fn get(&self, id: u64) -> Option<&Attached> {
        self.all.iter().find(|a| a.mount.id == id)
    }

    /// The mount point of `id` from the root of its tree, walking up the
    /// mount tree (a loop, not recursion: stacks of mounts can be tall).
    fn path(&self, id: u64) -> Option<Vec<u8>> {
        self.path_and_tree(id).map(|(path, _)| path)
    }

    /// [`Table::path`], and the id of the root of the tree `id` is in.
    fn path_and_tree(&self, id: u64) -> Option<(Vec<u8>, u64)> {
        let mut parts: Vec<Vec<u8>> = Vec::new();
        let mut cur = self.get(id)?;
        for _ in 0..=self.all.len() {
            let Place::Over(dir, name) = &cur.place else {
                let mut out = Vec::new();
                for p in parts.iter().rev() {
                    out.push(b'/');
                    out.extend_from_slice(p);
                }
                if out.is_empty() {
                    out.push(b'/');
                }
                return Some((out, cur.mount.id));
            };
            if !cur.stacked {
                if !name.is_empty() {
                    parts.push(name.clone());
                }
                let within = path_in_mount(dir);
                for c in within.split(|b| *b == b'/').filter(|c| !c.is_empty()).rev() {
                    parts.push(c.to_vec());
                }
            }
            cur = self.get(cur.parent.as_ref()?.id)?;
        }
        None
    }
}

/// The sandbox's mounts: where each file system is mounted. It holds one
/// tree of mounts per container of the sandbox, each with a root of its
/// own (a pod's containers each see their own image and mounts); a
/// process sees the tree its root is in, as a mount namespace of its own.
#[derive(Default)]
pub struct MountTable {
    table: RwLock<Table>,
}

impl MountTable {
    /// Makes `mount` the root of the first container's tree.
    pub fn set_root(&self, mount: Arc<Mount>) {
        self.add_tree(mount);
    }

    /// Makes `mount` the root of a tree of its own, beside the others.
    pub fn add_tree(&self, mount: Arc<Mount>) {
        self.table.write().unwrap().attach(Place::Root, mount);
    }

    /// The id of the root of the tree `id` is in, if `id` is attached.
    pub fn tree_of(&self, id: u64) -> Option<u64> {
        self.table.read().unwrap().path_and_tree(id).map(|(_, tree)| tree)
    }

    /// Mounts `mount` at `name` inside directory `dir`.
    pub fn mount(&self, dir: &Arc<Dentry>, name: &[u8], mount: Arc<Mount>) {
        self.attach(Place::Over(dir.clone(), name.to_vec()), mount);
    }

    /// Mounts `mount` at `place`, over what is there.
    pub fn attach(&self, place: Place, mount: Arc<Mount>) {
        self.table.write().unwrap().attach(place, mount);
    }

    /// The mount over `name` in `dir`, if any.
    pub fn lookup(&self, dir: &Dentry, name: &[u8]) -> Option<Arc<Mount>> {
        let t = self.table.read().unwrap();
        if t.points.is_empty() {
            return None;
        }
        t.points.get(&(dir.mount.id, dir.ino(), name.to_vec())).and_then(|v| v.last()).cloned()
    }

    /// The mount that covers `d` itself, if one does: the topmost at its
    /// place when that is not `d`'s own mount.
    pub fn covering(&self, d: &Arc<Dentry>) -> Option<Arc<Mount>> {
        let key = Place::over(d).key()?;
        let t = self.table.read().unwrap();
        let top = t.points.get(&key)?.last()?;
        (top.id != d.mount.id).then(|| top.clone())
    }

    /// How many mounts the namespace holds.
    pub fn count(&self) -> usize {
        self.table.read().unwrap().all.len()
    }

    /// True if `id` is attached to the namespace.
    pub fn is_attached(&self, id: u64) -> bool {
        self.table.read().unwrap().get(id).is_some()
    }

    /// True if `id` is the root of a tree.
    pub fn is_root(&self, id: u64) -> bool {
        self.table.read().unwrap().get(id).is_some_and(|a| matches!(a.place, Place::Root))
    }

    /// Where `id` is attached and the mount it is attached to.
    pub fn place_of(&self, id: u64) -> Option<(Place, Option<Arc<Mount>>)> {
        self.table.read().unwrap().get(id).map(|a| (a.place.clone(), a.parent.clone()))
    }

    /// The mounts attached on `id` (its children in the mount tree).
    pub fn children(&self, id: u64) -> Vec<Arc<Mount>> {
        let t = self.table.read().unwrap();
        t.all.iter().filter(|a| a.parent.as_ref().is_some_and(|p| p.id == id)).map(|a| a.mount.clone()).collect()
    }

    /// `id` and every mount below it, parents before children.
    pub fn subtree(&self, id: u64) -> Vec<Arc<Mount>> {
        let t = self.table.read().unwrap();
        let Some(top) = t.get(id) else { return Vec::new() };
        let mut out = vec![top.mount.clone()];
        let mut i = 0;
        while i < out.len() {
            let pid = out[i].id;
            out.extend(
                t.all.iter().filter(|a| a.parent.as_ref().is_some_and(|p| p.id == pid)).map(|a| a.mount.clone()),
            );
            i += 1;
        }
        out
    }

    /// Takes `id` and every mount below it out of the namespace (a lazy
    /// unmount: what still uses them keeps them). Returns the mounts
    /// removed.
    pub fn detach_tree(&self, id: u64) -> Vec<Arc<Mount>> {
        let gone = self.subtree(id);
        let mut t = self.table.write().unwrap();
        for m in gone.iter().rev() {
            if let Some(Attached { place: Place::Over(dir, name), .. }) = t.detach(m.id)
                && !name.is_empty()
            {
                dir.forget_mount_root(&name, m.id);
            }
        }
        gone
    }

    /// Moves `id` from where it is to `place`; its dentry `root`, the
    /// mount's root as it was seen, moves with it.
    pub fn move_mount(&self, id: u64, root: &Arc<Dentry>, place: Place) {
        {
            let mut t = self.table.write().unwrap();
            let Some(a) = t.detach(id) else { return };
            t.attach(place.clone(), a.mount);
        }
        root.relink(&place);
    }

    /// pivot_root: the mount of `new_root` takes the place of the mount of
    /// `old_root`, which moves to `put_old`. Both dentries are the roots
    /// of their mounts and move with them.
    pub fn pivot(&self, new_root: &Arc<Dentry>, old_root: &Arc<Dentry>, put_old: Place) -> Result<(), FsError> {
        let old_place = {
            let mut t = self.table.write().unwrap();
            let old = t.detach(old_root.mount.id).ok_or(FsError::Invalid)?;
            let Some(new) = t.detach(new_root.mount.id) else {
                t.attach(old.place, old.mount);
                return Err(FsError::Invalid);
            };
            t.attach(old.place.clone(), new.mount);
            t.attach(put_old.clone(), old.mount);
            old.place
        };
        new_root.relink(&old_place);
        old_root.relink(&put_old);
        Ok(())
    }

    /// Every mount in mount order, with its parent and mount point.
    pub fn list(&self) -> Vec<MountEntry> {
        let t = self.table.read().unwrap();
        t.all
            .iter()
            .filter_map(|a| {
                let (path, tree) = t.path_and_tree(a.mount.id)?;
                let parent_id = a.parent.as_ref().map_or(a.mount.id, |p| p.id);
                Some(MountEntry { mount: a.mount.clone(), parent_id, path, tree })
            })
            .collect()
    }

    /// The path of `d` from the root of its tree, if its mount is attached.
    pub fn path_of(&self, d: &Arc<Dentry>) -> Option<Vec<u8>> {
        let mut p = self.table.read().unwrap().path(d.mount.id)?;
        let below = path_in_mount(d);
        if below != b"/" {
            if p == b"/" {
                p.clear();
            }
            p.extend_from_slice(&below);
        }
        Some(p)
    }
}

#[cfg(test)]
mod tests {
    use super::super::Inode;
    use super::super::synthetic::SynthDir;
    use super::*;

    fn dir_with(names: &[&str]) -> Arc<dyn Inode> {
        SynthDir::new(
            names.iter().map(|n| (n.as_bytes().to_vec(), SynthDir::new(Vec::new()) as Arc<dyn Inode>)).collect(),
        )
    }

    #[test]
    fn each_tree_has_its_own_root_paths_and_listing() {
        let table = MountTable::default();
        let first = Mount::new("test", "first", true, dir_with(&["tmp", "proc"]));
        table.set_root(first.clone());
        let first_root = Dentry::root(first.clone());
        let second = Mount::new("test", "second", true, dir_with(&["tmp"]));
        table.add_tree(second.clone());
        let second_root = Dentry::root(second.clone());
        let tmp1 = Mount::new("tmpfs", "tmp1", false, dir_with(&[]));
        let tmp2 = Mount::new("tmpfs", "tmp2", false, dir_with(&[]));
        table.mount(&first_root, b"tmp", tmp1.clone());
        table.mount(&second_root, b"tmp", tmp2.clone());

        // A name in one tree finds that tree's mount.
        assert_eq!(table.lookup(&first_root, b"tmp").map(|m| m.id), Some(tmp1.id));
        assert_eq!(table.lookup(&second_root, b"tmp").map(|m| m.id), Some(tmp2.id));
        assert_eq!(table.tree_of(tmp1.id), Some(first.id));
        assert_eq!(table.tree_of(tmp2.id), Some(second.id));
        assert!(table.is_root(first.id) && table.is_root(second.id));

        // Paths are from each tree's own root.
        let list = table.list();
        let seen: Vec<(u64, Vec<u8>, u64)> = list.iter().map(|e| (e.mount.id, e.path.clone(), e.tree)).collect();
        assert!(seen.contains(&(tmp1.id, b"/tmp".to_vec(), first.id)), "{seen:?}");
        assert!(seen.contains(&(tmp2.id, b"/tmp".to_vec(), second.id)), "{seen:?}");
        assert!(seen.contains(&(second.id, b"/".to_vec(), second.id)), "{seen:?}");

        // Taking one tree away leaves the other whole.
        let gone: Vec<u64> = table.detach_tree(second.id).iter().map(|m| m.id).collect();
        assert_eq!(gone.len(), 2);
        assert!(gone.contains(&second.id) && gone.contains(&tmp2.id));
        assert_eq!(table.count(), 2);
        assert_eq!(table.lookup(&first_root, b"tmp").map(|m| m.id), Some(tmp1.id));
        assert!(table.lookup(&second_root, b"tmp").is_none());
    }
}
