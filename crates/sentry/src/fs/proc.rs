//! /proc, served by the sentry from its own tasks. The kernel supplies the
//! facts through [`ProcSource`]; nothing here reads the host's /proc.

use std::sync::Arc;

use super::synthetic::{DirSource, Owner, SynthDir, SynthFile, SynthSymlink};
use super::{Dentry, FsError, Inode, Mount};

/// What a descriptor refers to.
pub enum FdTarget {
    /// A file with a name.
    Named(Arc<Dentry>),
    /// An object without one, shown by a description such as `pipe:[7]`;
    /// `inode` opens it again, where that is possible.
    Anonymous { desc: Vec<u8>, inode: Option<Arc<dyn Inode>> },
}

/// What /proc needs to know about the sandbox's tasks.
pub trait ProcSource: Send + Sync {
    /// Thread-group id of the calling task.
    fn current_pid(&self) -> i32;
    /// Thread-group ids of every process.
    fn pids(&self) -> Vec<i32>;
    /// True if the process exists.
    fn exists(&self, pid: i32) -> bool;
    /// The process's effective user and group id, which own its /proc
    /// files, and whether it is dumpable (else root owns all but its
    /// directory).
    fn owner(&self, pid: i32) -> Option<(u32, u32, bool)>;
    /// The process's root, working directory and executable.
    fn root(&self, pid: i32) -> Option<Arc<Dentry>>;
    fn cwd(&self, pid: i32) -> Option<Arc<Dentry>>;
    fn exe(&self, pid: i32) -> Option<Arc<Dentry>>;
    /// Open descriptors: number, and the dentry if the file has one, else a
    /// description such as `pipe:[7]`.
    fn fds(&self, pid: i32) -> Vec<(i32, FdTarget)>;
    /// Contents of per-process files: "cmdline", "environ", "maps", "stat",
    /// "status", "comm", "auxv", "mounts", "mountinfo".
    fn file(&self, pid: i32, name: &str) -> Option<Vec<u8>>;
    /// Contents of global files: "meminfo", "cpuinfo", "stat", "uptime",
    /// "loadavg", "version", "filesystems", "mounts".
    fn global(&self, name: &str) -> Option<Vec<u8>>;
}

const PROCESS_FILES: &[&str] = &["cmdline", "environ", "maps", "stat", "status", "comm", "auxv", "mounts", "mountinfo"];
const GLOBAL_FILES: &[&str] = &["meminfo", "cpuinfo", "stat", "uptime", "loadavg", "version", "filesystems", "mounts"];

/// A file's path as /proc shows it: with " (deleted)" once its name is
/// gone, as Linux's d_path does.
fn dentry_path(d: &Arc<Dentry>) -> Vec<u8> {
    let mut p = d.path();
    if d.is_deleted() {
        p.extend_from_slice(b" (deleted)");
    }
    p
}

struct ProcRoot {
    src: Arc<dyn ProcSource>,
}

impl DirSource for ProcRoot {
    fn entries(&self) -> Vec<(Vec<u8>, Arc<dyn Inode>)> {
        let mut v: Vec<(Vec<u8>, Arc<dyn Inode>)> = Vec::new();
        for name in GLOBAL_FILES {
            if let Some(i) = self.lookup(name.as_bytes()) {
                v.push((name.as_bytes().to_vec(), i));
            }
        }
        v.push((b"self".to_vec(), self.lookup(b"self").expect("self")));
        v.push((b"thread-self".to_vec(), self.lookup(b"thread-self").expect("thread-self")));
        for pid in self.src.pids() {
            v.push((pid.to_string().into_bytes(), process_dir(self.src.clone(), pid)));
        }
        v
    }

    fn lookup(&self, name: &[u8]) -> Option<Arc<dyn Inode>> {
        match name {
            b"self" | b"thread-self" => {
                let src = self.src.clone();
                Some(SynthSymlink::computed(move || Ok(src.current_pid().to_string().into_bytes())))
            }
            _ => {
                let s = std::str::from_utf8(name).ok()?;
                if let Ok(pid) = s.parse::<i32>() {
                    return self.src.exists(pid).then(|| process_dir(self.src.clone(), pid));
                }
                if GLOBAL_FILES.contains(&s) {
                    let src = self.src.clone();
                    let n = s.to_string();
                    return Some(SynthFile::inode(0o444, None, move || src.global(&n).ok_or(FsError::NotFound)));
                }
                None
            }
        }
    }
}

fn process_dir(src: Arc<dyn ProcSource>, pid: i32) -> Arc<dyn Inode> {
    let s = src.clone();
    let owner: Owner = Arc::new(move || s.owner(pid).map_or((0, 0), |(uid, gid, _)| (uid, gid)));
    SynthDir::with_source(Box::new(ProcessDir { src, pid }), 0o555, Some(owner))
}

/// A process's files belong to its effective ids while it is dumpable,
/// else (or once it is gone) to root, as Linux's task_dump_owner has it.
fn owner_of(src: &Arc<dyn ProcSource>, pid: i32) -> Option<Owner> {
    let src = src.clone();
    Some(Arc::new(move || match src.owner(pid) {
        Some((uid, gid, true)) => (uid, gid),
        _ => (0, 0),
    }))
}

fn link_to(src: Arc<dyn ProcSource>, pid: i32, get: fn(&dyn ProcSource, i32) -> Option<Arc<Dentry>>) -> Arc<dyn Inode> {
    let s2 = src.clone();
    SynthSymlink::magic(
        owner_of(&src, pid),
        move || get(&*src, pid).map(|d| dentry_path(&d)).ok_or(FsError::NotFound),
        move || get(&*s2, pid).ok_or(FsError::NotFound),
    )
}

struct ProcessDir {
    src: Arc<dyn ProcSource>,
    pid: i32,
}

impl DirSource for ProcessDir {
    fn entries(&self) -> Vec<(Vec<u8>, Arc<dyn Inode>)> {
        let names = PROCESS_FILES.iter().copied().chain(["root", "cwd", "exe", "fd"]);
        names.filter_map(|n| self.lookup(n.as_bytes()).map(|i| (n.as_bytes().to_vec(), i))).collect()
    }

    fn lookup(&self, name: &[u8]) -> Option<Arc<dyn Inode>> {
        let (src, pid) = (self.src.clone(), self.pid);
        match name {
            b"root" => Some(link_to(src, pid, |s, p| s.root(p))),
            b"cwd" => Some(link_to(src, pid, |s, p| s.cwd(p))),
            b"exe" => Some(link_to(src, pid, |s, p| s.exe(p))),
            b"fd" => Some(SynthDir::with_source(Box::new(FdDir { src: src.clone(), pid }), 0o500, owner_of(&src, pid))),
            _ => {
                let n = std::str::from_utf8(name).ok()?;
                PROCESS_FILES.contains(&n).then(|| {
                    let n = n.to_string();
                    SynthFile::inode(0o444, owner_of(&src, pid), move || src.file(pid, &n).ok_or(FsError::NotFound))
                })
            }
        }
    }
}

struct FdDir {
    src: Arc<dyn ProcSource>,
    pid: i32,
}

impl DirSource for FdDir {
    fn entries(&self) -> Vec<(Vec<u8>, Arc<dyn Inode>)> {
        self.src
            .fds(self.pid)
            .into_iter()
            .filter_map(|(fd, _)| self.fd_link(fd).map(|i| (fd.to_string().into_bytes(), i)))
            .collect()
    }

    fn lookup(&self, name: &[u8]) -> Option<Arc<dyn Inode>> {
        let fd: i32 = std::str::from_utf8(name).ok()?.parse().ok()?;
        self.fd_link(fd)
    }
}

impl FdDir {
    fn fd_link(&self, fd: i32) -> Option<Arc<dyn Inode>> {
        let (src, pid) = (self.src.clone(), self.pid);
        let find = move |s: &dyn ProcSource| s.fds(pid).into_iter().find(|(n, _)| *n == fd).map(|(_, t)| t);
        let _present = find(&*src)?;
        let s2 = src.clone();
        Some(SynthSymlink::magic(
            owner_of(&src, pid),
            move || match find(&*src) {
                Some(FdTarget::Named(d)) => Ok(dentry_path(&d)),
                Some(FdTarget::Anonymous { desc, .. }) => Ok(desc),
                None => Err(FsError::NotFound),
            },
            move || match find(&*s2) {
                Some(FdTarget::Named(d)) => Ok(d),
                Some(FdTarget::Anonymous { inode: Some(i), desc }) => {
                    let name = String::from_utf8_lossy(&desc).into_owned();
                    Ok(Dentry::root(Mount::new("pipefs", name, false, i)))
                }
                _ => Err(FsError::NotFound),
            },
        ))
    }
}

/// The root of /proc.
pub fn new_procfs(src: Arc<dyn ProcSource>) -> Arc<dyn Inode> {
    SynthDir::with_source(Box::new(ProcRoot { src }), 0o555, None)
}
