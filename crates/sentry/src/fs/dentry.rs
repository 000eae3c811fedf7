//! Dentries: a name in a directory, bound to an inode, remembering its
//! parent. The chain of parents is how `..` and getcwd are answered.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

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

/// A resolved name.
pub struct Dentry {
    name: Vec<u8>,
    parent: Option<Arc<Dentry>>,
    pub inode: Arc<dyn Inode>,
    pub mount: Arc<Mount>,
    /// The inode number, cached for identity checks.
    ino: u64,
}

impl Dentry {
    /// The root of a mount with no parent (the sandbox root).
    pub fn root(mount: Arc<Mount>) -> Arc<Dentry> {
        let ino = mount.root.ino().unwrap_or(0);
        Arc::new(Dentry { name: Vec::new(), parent: None, inode: mount.root.clone(), mount, ino })
    }

    /// A child of this dentry.
    pub fn child(self: &Arc<Self>, name: &[u8], inode: Arc<dyn Inode>, mount: Arc<Mount>) -> Arc<Dentry> {
        let ino = inode.ino().unwrap_or(0);
        Arc::new(Dentry { name: name.to_vec(), parent: Some(self.clone()), inode, mount, ino })
    }

    pub fn parent(&self) -> Option<&Arc<Dentry>> {
        self.parent.as_ref()
    }

    pub fn name(&self) -> &[u8] {
        &self.name
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

    /// Absolute path from the sandbox root.
    pub fn path(&self) -> Vec<u8> {
        let mut parts: Vec<&[u8]> = Vec::new();
        let mut d = self;
        while let Some(p) = &d.parent {
            parts.push(&d.name);
            d = p;
        }
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

    /// Path relative to `root` if inside it (for getcwd under a chroot);
    /// None if this dentry is not below `root`.
    pub fn path_from(self: &Arc<Self>, root: &Arc<Dentry>) -> Option<Vec<u8>> {
        let mut parts: Vec<&[u8]> = Vec::new();
        let mut d: &Arc<Dentry> = self;
        loop {
            if Dentry::same(d, root) {
                break;
            }
            parts.push(&d.name);
            d = d.parent.as_ref()?;
        }
        if parts.is_empty() {
            return Some(b"/".to_vec());
        }
        let mut out = Vec::new();
        for p in parts.iter().rev() {
            out.push(b'/');
            out.extend_from_slice(p);
        }
        Some(out)
    }
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
