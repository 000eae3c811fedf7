//! Path resolution. The sentry walks every path itself: symlinks are
//! expanded against the sandbox root and `..` follows dentry parents, so no
//! path leads outside the root.

use std::collections::VecDeque;
use std::sync::Arc;

use super::dentry::MountTable;
use super::{Dentry, FileType, FsError, may_lookup};
use crate::auth::Creds;

/// Longest path accepted, with its terminator (PATH_MAX).
pub const PATH_MAX: usize = 4096;
/// Longest single name (NAME_MAX).
pub const NAME_MAX: usize = 255;
/// Most symlinks followed in one resolution (as Linux's MAXSYMLINKS).
const MAX_LINKS: u32 = 40;

bitflags::bitflags! {
    /// openat2's RESOLVE_* restrictions on a walk.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Restrict: u64 {
        /// No mount crossing, `..` out of a mount included (EXDEV).
        const NO_XDEV = 0x01;
        /// No /proc magic links (ELOOP).
        const NO_MAGICLINKS = 0x02;
        /// No symlinks followed at all (ELOOP).
        const NO_SYMLINKS = 0x04;
        /// Never above the start directory: absolute paths and `..` past
        /// it fail (EXDEV).
        const BENEATH = 0x08;
        /// The start directory is the root of the walk.
        const IN_ROOT = 0x10;
    }
}

/// How to treat the last component.
#[derive(Clone, Copy, Debug, Default)]
pub struct Lookup {
    /// Follow a symlink in the last component.
    pub follow: bool,
    /// The result must be a directory. This does not follow a final
    /// symlink by itself (O_DIRECTORY|O_NOFOLLOW on a link to a directory is
    /// ENOTDIR); a trailing slash does.
    pub directory: bool,
}

impl Lookup {
    pub const FOLLOW: Lookup = Lookup { follow: true, directory: false };
    pub const NOFOLLOW: Lookup = Lookup { follow: false, directory: false };
}

/// Resolves paths for one task: its root, its working directory, the
/// mount table, and the credentials each directory walked through is
/// searched with.
pub struct Resolver<'a> {
    pub root: &'a Arc<Dentry>,
    pub cwd: &'a Arc<Dentry>,
    pub mounts: &'a MountTable,
    pub creds: &'a Creds,
    /// openat2's restrictions, for walks that asked for them.
    pub restrict: Restrict,
}

fn components(path: &[u8]) -> VecDeque<Vec<u8>> {
    path.split(|b| *b == b'/').filter(|c| !c.is_empty()).map(|c| c.to_vec()).collect()
}

impl Resolver<'_> {
    /// The child `name` of directory `dir`, crossing into a mount if one
    /// covers it.
    pub fn child(&self, dir: &Arc<Dentry>, name: &[u8]) -> Result<Arc<Dentry>, FsError> {
        if let Some(m) = self.mounts.lookup(dir, name) {
            // One dentry per mount root too, so that what is cached below
            // it is found again.
            if let Some(d) = dir.cached_child(name)
                && d.mount.id == m.id
            {
                return Ok(d);
            }
            return Ok(dir.cache_mount_root(name, m));
        }
        if !dir.inode.stable_names() {
            let inode = dir.inode.lookup(name)?;
            return Ok(dir.child(name, inode, dir.mount.clone()));
        }
        if let Some(d) = dir.cached_child(name) {
            return Ok(d);
        }
        let inode = dir.inode.lookup(name)?;
        Ok(dir.cache_child(name, inode))
    }

    /// Resolves `path` starting from `start` (the cwd when None) for
    /// relative paths.
    pub fn resolve(&self, start: Option<&Arc<Dentry>>, path: &[u8], how: Lookup) -> Result<Arc<Dentry>, FsError> {
        self.resolve_in(start, path, how, self.restrict)
    }

    /// [`Resolver::resolve`] under openat2's RESOLVE_* restrictions.
    pub fn resolve_in(
        &self,
        start: Option<&Arc<Dentry>>,
        path: &[u8],
        how: Lookup,
        restrict: Restrict,
    ) -> Result<Arc<Dentry>, FsError> {
        if path.is_empty() {
            return Err(FsError::NotFound);
        }
        if path.len() >= PATH_MAX {
            return Err(FsError::NameTooLong);
        }
        let base = start.unwrap_or(self.cwd).clone();
        // RESOLVE_IN_ROOT: the start directory is the root for this walk.
        let root = if restrict.contains(Restrict::IN_ROOT) { base.clone() } else { self.root.clone() };
        let scoped = restrict.intersects(Restrict::BENEATH | Restrict::IN_ROOT);
        if path[0] == b'/' && restrict.contains(Restrict::BENEATH) {
            return Err(FsError::CrossDevice);
        }
        let mut cur = if path[0] == b'/' { root.clone() } else { base.clone() };
        let mut comps = components(path);
        let trailing_slash = path.ends_with(b"/");
        let mut links = 0;
        while let Some(c) = comps.pop_front() {
            let last = comps.is_empty();
            if cur.file_type() != FileType::Directory {
                return Err(FsError::NotDirectory);
            }
            // As Linux's link_path_walk: every component, `.` and `..`
            // included, needs search permission on the directory it is
            // looked up in.
            may_lookup(&cur, self.creds)?;
            match c.as_slice() {
                b"." => continue,
                b".." => {
                    if Dentry::same(&cur, &root) {
                        continue;
                    }
                    if restrict.contains(Restrict::BENEATH) && Dentry::same(&cur, &base) {
                        return Err(FsError::CrossDevice);
                    }
                    let up = cur.parent().unwrap_or_else(|| cur.clone());
                    if restrict.contains(Restrict::NO_XDEV) && up.mount.id != cur.mount.id {
                        return Err(FsError::CrossDevice);
                    }
                    cur = up;
                    continue;
                }
                _ => {}
            }
            if c.len() > NAME_MAX {
                return Err(FsError::NameTooLong);
            }
            let child = self.child(&cur, &c)?;
            if restrict.contains(Restrict::NO_XDEV) && child.mount.id != cur.mount.id {
                return Err(FsError::CrossDevice);
            }
            let follow = !last || how.follow || trailing_slash;
            if child.file_type() == FileType::Symlink && follow {
                if restrict.contains(Restrict::NO_SYMLINKS) {
                    return Err(FsError::Loop);
                }
                links += 1;
                if links > MAX_LINKS {
                    return Err(FsError::Loop);
                }
                if let Some(target) = child.inode.magic_link() {
                    if restrict.contains(Restrict::NO_MAGICLINKS) {
                        return Err(FsError::Loop);
                    }
                    let target = target?;
                    if scoped || (restrict.contains(Restrict::NO_XDEV) && target.mount.id != cur.mount.id) {
                        return Err(FsError::CrossDevice);
                    }
                    cur = target;
                    continue;
                }
                let target = child.inode.read_link()?;
                if target.is_empty() {
                    return Err(FsError::NotFound);
                }
                if target[0] == b'/' {
                    if restrict.contains(Restrict::BENEATH) {
                        return Err(FsError::CrossDevice);
                    }
                    cur = root.clone();
                }
                for t in components(&target).into_iter().rev() {
                    comps.push_front(t);
                }
                continue;
            }
            cur = child;
        }
        if (trailing_slash || how.directory) && cur.file_type() != FileType::Directory {
            return Err(FsError::NotDirectory);
        }
        Ok(cur)
    }

    /// Resolves all but the last component of `path`: the directory that
    /// would hold it and the final name. Fails for paths whose last
    /// component is `.` or `..`, or that name the root.
    pub fn resolve_parent(&self, start: Option<&Arc<Dentry>>, path: &[u8]) -> Result<(Arc<Dentry>, Vec<u8>), FsError> {
        if path.is_empty() {
            return Err(FsError::NotFound);
        }
        if path.len() >= PATH_MAX {
            return Err(FsError::NameTooLong);
        }
        let trimmed = {
            let mut p = path;
            while p.len() > 1 && p.ends_with(b"/") {
                p = &p[..p.len() - 1];
            }
            p
        };
        let (dir, name) = match trimmed.iter().rposition(|b| *b == b'/') {
            Some(0) => (&b"/"[..], &trimmed[1..]),
            Some(i) => (&trimmed[..i], &trimmed[i + 1..]),
            None => (&b"."[..], trimmed),
        };
        if name.is_empty() || name == b"." || name == b".." {
            return Err(FsError::Exists);
        }
        if name.len() > NAME_MAX {
            return Err(FsError::NameTooLong);
        }
        let d = self.resolve(start, dir, Lookup { follow: true, directory: true })?;
        Ok((d, name.to_vec()))
    }
}

#[cfg(test)]
mod tests {
    use super::super::synthetic::{SynthDir, SynthSymlink};
    use super::super::{Inode, Mount};
    use super::*;

    /// /a/b/file, /a/up -> .., /a/abs -> /a/b, /a/out -> ../../../../etc,
    /// /a/loop -> loop, /m (a mount of another dir holding `inner`).
    fn tree() -> (Arc<Dentry>, MountTable) {
        let file = SynthDir::file_with(b"data".to_vec());
        let b = SynthDir::new(vec![(b"file".to_vec(), file)]);
        let a = SynthDir::new(vec![
            (b"b".to_vec(), b as Arc<dyn Inode>),
            (b"up".to_vec(), SynthSymlink::inode(b"..")),
            (b"abs".to_vec(), SynthSymlink::inode(b"/a/b")),
            (b"out".to_vec(), SynthSymlink::inode(b"../../../../etc")),
            (b"loop".to_vec(), SynthSymlink::inode(b"loop")),
            (b"dangling".to_vec(), SynthSymlink::inode(b"nothing")),
        ]);
        let etc = SynthDir::new(vec![(b"passwd".to_vec(), SynthDir::file_with(b"sandbox".to_vec()))]);
        let m_dir = SynthDir::new(vec![]);
        let root =
            SynthDir::new(vec![(b"a".to_vec(), a as Arc<dyn Inode>), (b"etc".to_vec(), etc), (b"m".to_vec(), m_dir)]);
        let mount = Mount::new("test", "test", true, root);
        let root = Dentry::root(mount);
        let mounts = MountTable::default();
        let other = SynthDir::new(vec![(b"inner".to_vec(), SynthDir::file_with(b"x".to_vec()))]);
        mounts.mount(&root, b"m", Mount::new("other", "other", true, other));
        (root, mounts)
    }

    /// Root's credentials, which search anywhere.
    static ROOT: std::sync::LazyLock<Creds> = std::sync::LazyLock::new(|| Creds::new(0, 0, Vec::new()));

    fn resolver<'a>(
        root: &'a Arc<Dentry>,
        cwd: &'a Arc<Dentry>,
        mounts: &'a MountTable,
        creds: &'a Creds,
    ) -> Resolver<'a> {
        Resolver { root, cwd, mounts, creds, restrict: Restrict::empty() }
    }

    fn path(r: &Resolver, p: &str, how: Lookup) -> Result<String, FsError> {
        r.resolve(None, p.as_bytes(), how).map(|d| String::from_utf8(d.path()).unwrap())
    }

    #[test]
    fn plain_and_dot_paths() {
        let (root, mounts) = tree();
        let r = resolver(&root, &root, &mounts, &ROOT);
        assert_eq!(path(&r, "/a/b/file", Lookup::FOLLOW).unwrap(), "/a/b/file");
        assert_eq!(path(&r, "a/./b/../b//file", Lookup::FOLLOW).unwrap(), "/a/b/file");
        assert_eq!(path(&r, "/", Lookup::FOLLOW).unwrap(), "/");
        assert_eq!(path(&r, "/a/nope", Lookup::FOLLOW), Err(FsError::NotFound));
        assert_eq!(path(&r, "/a/b/file/x", Lookup::FOLLOW), Err(FsError::NotDirectory));
        assert_eq!(path(&r, "/a/b/file/", Lookup::FOLLOW), Err(FsError::NotDirectory));
        assert_eq!(path(&r, "", Lookup::FOLLOW), Err(FsError::NotFound));
    }

    #[test]
    fn dotdot_never_leaves_the_root() {
        let (root, mounts) = tree();
        let r = resolver(&root, &root, &mounts, &ROOT);
        assert_eq!(path(&r, "/../../..", Lookup::FOLLOW).unwrap(), "/");
        assert_eq!(path(&r, "../../etc/passwd", Lookup::FOLLOW).unwrap(), "/etc/passwd");
        assert_eq!(path(&r, "/a/out/passwd", Lookup::FOLLOW).unwrap(), "/etc/passwd", "relative link out stays in");
        assert_eq!(path(&r, "/a/up/a/abs/file", Lookup::FOLLOW).unwrap(), "/a/b/file");
    }

    #[test]
    fn symlinks_follow_rules() {
        let (root, mounts) = tree();
        let r = resolver(&root, &root, &mounts, &ROOT);
        assert_eq!(path(&r, "/a/abs", Lookup::NOFOLLOW).unwrap(), "/a/abs");
        assert_eq!(path(&r, "/a/abs", Lookup::FOLLOW).unwrap(), "/a/b");
        assert_eq!(path(&r, "/a/abs/", Lookup::NOFOLLOW).unwrap(), "/a/b", "a trailing slash follows");
        assert_eq!(path(&r, "/a/loop", Lookup::FOLLOW), Err(FsError::Loop));
        assert_eq!(path(&r, "/a/dangling", Lookup::FOLLOW), Err(FsError::NotFound));
        assert_eq!(path(&r, "/a/dangling", Lookup::NOFOLLOW).unwrap(), "/a/dangling");
        let dir_nofollow = Lookup { follow: false, directory: true };
        assert_eq!(path(&r, "/a/abs", dir_nofollow), Err(FsError::NotDirectory), "O_DIRECTORY does not follow");
        assert_eq!(path(&r, "/a/abs/", dir_nofollow).unwrap(), "/a/b", "but a trailing slash does");
        assert_eq!(path(&r, "/a/abs", Lookup { follow: true, directory: true }).unwrap(), "/a/b");
    }

    #[test]
    fn mounts_are_crossed_both_ways() {
        let (root, mounts) = tree();
        let r = resolver(&root, &root, &mounts, &ROOT);
        assert_eq!(path(&r, "/m/inner", Lookup::FOLLOW).unwrap(), "/m/inner");
        assert_eq!(path(&r, "/m/../a/b", Lookup::FOLLOW).unwrap(), "/a/b");
        assert_eq!(path(&r, "/m/inner/..", Lookup::FOLLOW), Err(FsError::NotDirectory));
        let d = r.resolve(None, b"/m", Lookup::FOLLOW).unwrap();
        assert_eq!(d.mount.fs_type, "other");
    }

    #[test]
    fn relative_to_a_start_directory() {
        let (root, mounts) = tree();
        let r = resolver(&root, &root, &mounts, &ROOT);
        let a = r.resolve(None, b"/a", Lookup::FOLLOW).unwrap();
        let r2 = resolver(&root, &a, &mounts, &ROOT);
        assert_eq!(path(&r2, "b/file", Lookup::FOLLOW).unwrap(), "/a/b/file");
        assert_eq!(path(&r2, "..", Lookup::FOLLOW).unwrap(), "/");
        let (dir, name) = r2.resolve_parent(None, b"b/newfile").unwrap();
        assert_eq!(dir.path(), b"/a/b");
        assert_eq!(name, b"newfile");
        assert!(r2.resolve_parent(None, b"/").is_err());
    }

    #[test]
    fn long_names_are_refused() {
        let (root, mounts) = tree();
        let r = resolver(&root, &root, &mounts, &ROOT);
        let long = "x".repeat(256);
        assert_eq!(path(&r, &long, Lookup::FOLLOW), Err(FsError::NameTooLong));
        let very_long = "a/".repeat(2100);
        assert_eq!(path(&r, &very_long, Lookup::FOLLOW), Err(FsError::NameTooLong));
    }

    #[test]
    fn every_directory_walked_needs_search_permission() {
        let inner: Vec<(Vec<u8>, Arc<dyn Inode>)> = vec![(b"f".to_vec(), SynthDir::file_with(b"x".to_vec()))];
        let locked = SynthDir::with_source(Box::new(inner), 0o700, None);
        let root = Dentry::root(Mount::new("test", "test", true, SynthDir::new(vec![(b"locked".to_vec(), locked)])));
        let mounts = MountTable::default();
        let nobody = Creds::new(65534, 65534, Vec::new());
        let r = resolver(&root, &root, &mounts, &nobody);
        assert_eq!(path(&r, "/locked", Lookup::FOLLOW).unwrap(), "/locked", "only / is searched");
        assert_eq!(path(&r, "/locked/f", Lookup::FOLLOW), Err(FsError::PermissionDenied));
        assert_eq!(path(&r, "/locked/..", Lookup::FOLLOW), Err(FsError::PermissionDenied), "`..` too");
        let root_creds = Creds::new(0, 0, Vec::new());
        let r = resolver(&root, &root, &mounts, &root_creds);
        assert_eq!(path(&r, "/locked/f", Lookup::FOLLOW).unwrap(), "/locked/f");
    }
}
