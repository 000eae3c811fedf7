//! /proc, served by the sentry from its own tasks. The kernel supplies the
//! facts through [`ProcSource`]; nothing here reads the host's /proc.

use std::sync::Arc;

use super::synthetic::{DirSource, Owner, SynthDir, SynthFile, SynthSymlink};
use super::{Context, Dentry, FileOps, FileType, FsError, Inode, Mount, OpenFile, OpenFlags, Stat};
use memory::{GuestSlice, GuestSliceMut};

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
    /// Thread id of the calling task.
    fn current_tid(&self) -> i32;
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
    /// Contents of per-process files, named as in [`PROCESS_FILES`].
    fn file(&self, pid: i32, name: &str) -> Option<Vec<u8>>;
    /// A write to a per-process file that takes them ("oom_score_adj",
    /// "coredump_filter"), by the calling task.
    fn write_file(&self, pid: i32, name: &str, data: &[u8]) -> Result<(), FsError>;
    /// Thread ids of a process.
    fn threads(&self, pid: i32) -> Vec<i32>;
    /// Contents of a thread's own files ("stat", "status", "comm"); None for
    /// the others, which are the process's.
    fn thread_file(&self, pid: i32, tid: i32, name: &str) -> Option<Vec<u8>>;
    /// /proc/PID/fdinfo/FD.
    fn fdinfo(&self, pid: i32, fd: i32) -> Option<Vec<u8>>;
    /// Contents of global files, named as in [`GLOBAL_FILES`], and of the
    /// sysctls below /proc/sys ("sys/kernel/pid_max").
    fn global(&self, name: &str) -> Option<Vec<u8>>;
    /// The files of /proc/PID/net: the sandbox's network, which every
    /// process shares.
    fn net_files(&self) -> Vec<String>;
    /// Contents of /proc/PID/net/`name`.
    fn net_file(&self, name: &str) -> Option<Vec<u8>>;
    /// The memory of process `pid`, for /proc/PID/mem, if the calling
    /// task may reach it (ptrace's attach rule, with its file-system ids):
    /// PermissionDenied otherwise.
    fn mem(&self, pid: i32) -> Result<Arc<dyn ProcMem>, FsError>;
}

/// A process's memory as /proc/PID/mem reaches it: the address space it
/// had when the file was opened, as long as it lives.
pub trait ProcMem: Send + Sync {
    /// False once the address space is gone: reads and writes then move
    /// nothing and say so with 0.
    fn alive(&self) -> bool;
    /// Reads at `addr` within one page; the bytes read, 0 if the page
    /// cannot be read or the address space is gone.
    fn read(&self, addr: u64, buf: &mut [u8]) -> usize;
    /// Writes at `addr` within one page as a debugger does (read-only
    /// private memory too); the bytes written, 0 if none could be.
    fn write(&self, addr: u64, data: &[u8]) -> usize;
}

/// Per-process files with their modes, as Linux's.
const PROCESS_FILES: &[(&str, u32)] = &[
    ("auxv", 0o400),
    ("cgroup", 0o444),
    ("cmdline", 0o444),
    ("comm", 0o444),
    ("coredump_filter", 0o644),
    ("environ", 0o400),
    ("limits", 0o444),
    ("maps", 0o444),
    ("mountinfo", 0o444),
    ("mounts", 0o444),
    ("oom_score_adj", 0o644),
    ("smaps", 0o444),
    ("stat", 0o444),
    ("statm", 0o444),
    ("status", 0o444),
];
/// Per-process files that take writes.
const WRITABLE_FILES: &[&str] = &["coredump_filter", "oom_score_adj"];
/// A thread's files below /proc/PID/task/TID.
const THREAD_FILES: &[&str] = &["cmdline", "comm", "environ", "limits", "maps", "stat", "statm", "status"];
const GLOBAL_FILES: &[&str] = &["meminfo", "cpuinfo", "stat", "uptime", "loadavg", "version", "filesystems", "mounts"];

/// The sysctls /proc/sys shows, with their modes. The whole of /proc/sys is
/// mounted read-only, as container runtimes mount it: the modes are
/// Linux's, but no value changes.
pub const SYSCTLS: &[(&str, u32)] = &[
    ("fs/file-max", 0o644),
    ("fs/mqueue/msg_default", 0o644),
    ("fs/mqueue/msg_max", 0o644),
    ("fs/mqueue/msgsize_default", 0o644),
    ("fs/mqueue/msgsize_max", 0o644),
    ("fs/mqueue/queues_max", 0o644),
    ("fs/nr_open", 0o644),
    ("fs/pipe-max-size", 0o644),
    ("kernel/cap_last_cap", 0o444),
    ("kernel/hostname", 0o644),
    ("kernel/msgmax", 0o644),
    ("kernel/msgmnb", 0o644),
    ("kernel/msgmni", 0o644),
    ("kernel/ngroups_max", 0o444),
    ("kernel/osrelease", 0o444),
    ("kernel/ostype", 0o444),
    ("kernel/pid_max", 0o644),
    ("kernel/random/boot_id", 0o444),
    ("kernel/random/uuid", 0o444),
    ("kernel/sem", 0o644),
    ("kernel/shmall", 0o644),
    ("kernel/shmmax", 0o644),
    ("kernel/shmmni", 0o644),
    ("kernel/threads-max", 0o644),
    ("net/core/somaxconn", 0o644),
    ("net/ipv4/ip_local_port_range", 0o644),
    ("net/unix/max_dgram_qlen", 0o644),
    ("vm/max_map_count", 0o644),
    ("vm/overcommit_memory", 0o644),
];

/// /proc/sysvipc: the System V IPC objects of the sandbox.
const SYSVIPC_FILES: &[(&str, u32)] = &[("msg", 0o444), ("sem", 0o444), ("shm", 0o444)];

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
        v.push((b"sys".to_vec(), self.lookup(b"sys").expect("sys")));
        v.push((b"sysvipc".to_vec(), self.lookup(b"sysvipc").expect("sysvipc")));
        v.push((b"net".to_vec(), self.lookup(b"net").expect("net")));
        v.push((b"self".to_vec(), self.lookup(b"self").expect("self")));
        v.push((b"thread-self".to_vec(), self.lookup(b"thread-self").expect("thread-self")));
        for pid in self.src.pids() {
            v.push((pid.to_string().into_bytes(), process_dir(self.src.clone(), pid)));
        }
        v
    }

    fn lookup(&self, name: &[u8]) -> Option<Arc<dyn Inode>> {
        match name {
            b"self" => {
                let src = self.src.clone();
                Some(SynthSymlink::computed(move || Ok(src.current_pid().to_string().into_bytes())))
            }
            b"thread-self" => {
                let src = self.src.clone();
                Some(SynthSymlink::computed(move || {
                    Ok(format!("{}/task/{}", src.current_pid(), src.current_tid()).into_bytes())
                }))
            }
            b"sys" => Some(sysctl_dir(&self.src, "sys", &SYSCTLS.iter().map(|(n, m)| (*n, *m)).collect::<Vec<_>>())),
            b"sysvipc" => Some(sysctl_dir(&self.src, "sysvipc", SYSVIPC_FILES)),
            // As Linux: the calling process's network namespace.
            b"net" => Some(SynthSymlink::inode(b"self/net")),
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
        let names =
            PROCESS_FILES.iter().map(|(n, _)| *n).chain(["root", "cwd", "exe", "fd", "fdinfo", "mem", "net", "task"]);
        names.filter_map(|n| self.lookup(n.as_bytes()).map(|i| (n.as_bytes().to_vec(), i))).collect()
    }

    fn lookup(&self, name: &[u8]) -> Option<Arc<dyn Inode>> {
        let (src, pid) = (self.src.clone(), self.pid);
        match name {
            b"root" => Some(link_to(src, pid, |s, p| s.root(p))),
            b"cwd" => Some(link_to(src, pid, |s, p| s.cwd(p))),
            b"exe" => Some(link_to(src, pid, |s, p| s.exe(p))),
            b"fd" => Some(SynthDir::with_source(Box::new(FdDir { src: src.clone(), pid }), 0o500, owner_of(&src, pid))),
            b"fdinfo" => {
                Some(SynthDir::with_source(Box::new(FdInfoDir { src: src.clone(), pid }), 0o500, owner_of(&src, pid)))
            }
            b"task" => {
                Some(SynthDir::with_source(Box::new(TaskDir { src: src.clone(), pid }), 0o555, owner_of(&src, pid)))
            }
            b"net" => Some(SynthDir::with_source(Box::new(NetDir { src: src.clone() }), 0o555, owner_of(&src, pid))),
            b"mem" => {
                Some(Arc::new(MemInode { ino: super::synthetic::next_ino(), owner: owner_of(&src, pid), src, pid }))
            }
            _ => {
                let n = std::str::from_utf8(name).ok()?;
                let &(n, mode) = PROCESS_FILES.iter().find(|(f, _)| *f == n)?;
                let owner = owner_of(&src, pid);
                let generate = {
                    let src = src.clone();
                    move || src.file(pid, n).ok_or(FsError::NotFound)
                };
                Some(if WRITABLE_FILES.contains(&n) {
                    SynthFile::writable(mode, owner, generate, move |data| src.write_file(pid, n, data))
                } else {
                    SynthFile::inode(mode, owner, generate)
                })
            }
        }
    }
}

/// /proc/PID/net: the network's files, root's as Linux has them.
struct NetDir {
    src: Arc<dyn ProcSource>,
}

impl DirSource for NetDir {
    fn entries(&self) -> Vec<(Vec<u8>, Arc<dyn Inode>)> {
        let names = self.src.net_files();
        names.iter().filter_map(|n| self.lookup(n.as_bytes()).map(|i| (n.as_bytes().to_vec(), i))).collect()
    }

    fn lookup(&self, name: &[u8]) -> Option<Arc<dyn Inode>> {
        let n = std::str::from_utf8(name).ok()?.to_string();
        if !self.src.net_files().contains(&n) {
            return None;
        }
        let src = self.src.clone();
        Some(SynthFile::inode(0o444, None, move || src.net_file(&n).ok_or(FsError::NotFound)))
    }
}

/// /proc/PID/task: a directory per thread.
struct TaskDir {
    src: Arc<dyn ProcSource>,
    pid: i32,
}

impl DirSource for TaskDir {
    fn entries(&self) -> Vec<(Vec<u8>, Arc<dyn Inode>)> {
        self.src.threads(self.pid).into_iter().map(|tid| (tid.to_string().into_bytes(), self.thread_dir(tid))).collect()
    }

    fn lookup(&self, name: &[u8]) -> Option<Arc<dyn Inode>> {
        let tid: i32 = std::str::from_utf8(name).ok()?.parse().ok()?;
        self.src.threads(self.pid).contains(&tid).then(|| self.thread_dir(tid))
    }
}

impl TaskDir {
    fn thread_dir(&self, tid: i32) -> Arc<dyn Inode> {
        let s = self.src.clone();
        let pid = self.pid;
        let owner: Owner = Arc::new(move || s.owner(pid).map_or((0, 0), |(uid, gid, _)| (uid, gid)));
        SynthDir::with_source(Box::new(ThreadDir { src: self.src.clone(), pid, tid }), 0o555, Some(owner))
    }
}

/// /proc/PID/task/TID: the thread's own stat, status and comm, the rest
/// its process's.
struct ThreadDir {
    src: Arc<dyn ProcSource>,
    pid: i32,
    tid: i32,
}

impl DirSource for ThreadDir {
    fn entries(&self) -> Vec<(Vec<u8>, Arc<dyn Inode>)> {
        THREAD_FILES
            .iter()
            .chain(&["mem"])
            .filter_map(|n| self.lookup(n.as_bytes()).map(|i| (n.as_bytes().to_vec(), i)))
            .collect()
    }

    fn lookup(&self, name: &[u8]) -> Option<Arc<dyn Inode>> {
        if name == b"mem" {
            // The process's memory: its threads share it (gdb reads it
            // through the thread it stopped).
            let (src, pid) = (self.src.clone(), self.pid);
            return Some(Arc::new(MemInode {
                ino: super::synthetic::next_ino(),
                owner: owner_of(&src, pid),
                src,
                pid,
            }));
        }
        let n = std::str::from_utf8(name).ok()?;
        let n = *THREAD_FILES.iter().find(|f| **f == n)?;
        let mode = PROCESS_FILES.iter().find(|(f, _)| *f == n).map_or(0o444, |(_, m)| *m);
        let (src, pid, tid) = (self.src.clone(), self.pid, self.tid);
        Some(SynthFile::inode(mode, owner_of(&src, pid), move || {
            src.thread_file(pid, tid, n).or_else(|| src.file(pid, n)).ok_or(FsError::NotFound)
        }))
    }
}

/// /proc/PID/fdinfo: a file per descriptor.
struct FdInfoDir {
    src: Arc<dyn ProcSource>,
    pid: i32,
}

impl DirSource for FdInfoDir {
    fn entries(&self) -> Vec<(Vec<u8>, Arc<dyn Inode>)> {
        self.src
            .fds(self.pid)
            .into_iter()
            .filter_map(|(fd, _)| self.lookup(fd.to_string().as_bytes()).map(|i| (fd.to_string().into_bytes(), i)))
            .collect()
    }

    fn lookup(&self, name: &[u8]) -> Option<Arc<dyn Inode>> {
        let fd: i32 = std::str::from_utf8(name).ok()?.parse().ok()?;
        let (src, pid) = (self.src.clone(), self.pid);
        src.fdinfo(pid, fd)?;
        Some(SynthFile::inode(0o444, owner_of(&src, pid), move || src.fdinfo(pid, fd).ok_or(FsError::NotFound)))
    }
}

/// A directory of /proc/sys: `at` is its path below /proc, `sysctls` the
/// entries below it, as paths relative to it.
fn sysctl_dir(src: &Arc<dyn ProcSource>, at: &str, sysctls: &[(&str, u32)]) -> Arc<dyn Inode> {
    let mut entries: Vec<(Vec<u8>, Arc<dyn Inode>)> = Vec::new();
    let mut subdirs: Vec<&str> = Vec::new();
    for (path, mode) in sysctls {
        match path.split_once('/') {
            Some((dir, _)) => {
                if !subdirs.contains(&dir) {
                    subdirs.push(dir);
                }
            }
            None => {
                let (src, name) = (src.clone(), format!("{at}/{path}"));
                let file = SynthFile::inode(*mode, None, move || src.global(&name).ok_or(FsError::NotFound));
                entries.push((path.as_bytes().to_vec(), file));
            }
        }
    }
    for dir in subdirs {
        let below: Vec<(&str, u32)> = sysctls
            .iter()
            .filter_map(|(p, m)| p.strip_prefix(dir).and_then(|r| r.strip_prefix('/')).map(|r| (r, *m)))
            .collect();
        entries.push((dir.as_bytes().to_vec(), sysctl_dir(src, &format!("{at}/{dir}"), &below)));
    }
    SynthDir::with_source(Box::new(entries), 0o555, None)
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

/// The root of /proc, and the /proc/sys directory to mount over its `sys`
/// read-only.
pub fn new_procfs(src: Arc<dyn ProcSource>) -> (Arc<dyn Inode>, Arc<dyn Inode>) {
    let root = ProcRoot { src };
    let sys = root.lookup(b"sys").expect("sys");
    (SynthDir::with_source(Box::new(root), 0o555, None), sys)
}

/// /proc/PID/mem: the process's memory at the file offset, opened by
/// those ptrace would let attach.
struct MemInode {
    ino: u64,
    owner: Option<Owner>,
    src: Arc<dyn ProcSource>,
    pid: i32,
}

const MEM_MODE: u32 = 0o600;

impl Inode for MemInode {
    fn file_type(&self) -> FileType {
        FileType::Regular
    }
    fn stat(&self) -> Result<Stat, FsError> {
        let mode = FileType::Regular.mode_bits() | MEM_MODE;
        Ok(super::synthetic::owned_stat(self.ino, mode, 0, 1, super::synthetic::owner_ids(&self.owner)))
    }
    fn open(&self, _: &Context, _: &Arc<Dentry>, _: OpenFlags) -> Result<Arc<dyn FileOps>, FsError> {
        let mem = self.src.mem(self.pid)?;
        Ok(Arc::new(MemFile { stat: self.stat()?, mem }))
    }
}

struct MemFile {
    stat: Stat,
    mem: Arc<dyn ProcMem>,
}

impl MemFile {
    /// Moves `len` bytes at `offset` a page at a time with `step` (the
    /// address, the bytes done so far, the count for this piece; returns
    /// the count moved). Stops at the first page that fails: what moved
    /// before it is the answer, nothing at all EIO, as Linux's mem_rw.
    fn each_page(offset: u64, len: usize, mut step: impl FnMut(u64, usize, usize) -> usize) -> Result<usize, FsError> {
        let mut done = 0;
        while done < len {
            let addr = offset.wrapping_add(done as u64);
            let n = (len - done).min((crate::mm::PAGE - addr % crate::mm::PAGE) as usize);
            let moved = step(addr, done, n);
            done += moved;
            if moved < n {
                break;
            }
        }
        if done == 0 && len > 0 {
            return Err(FsError::from_errno(crate::errno::Errno::EIO));
        }
        Ok(done)
    }
}

impl FileOps for MemFile {
    fn read(&self, _: &Context, _: &OpenFile, bufs: &[GuestSliceMut<'_>], offset: u64) -> Result<usize, FsError> {
        let len: usize = bufs.iter().map(|b| b.len()).sum();
        if !self.mem.alive() {
            return Ok(0);
        }
        let mut data = vec![0u8; len.min(1 << 20)];
        let n = Self::each_page(offset, data.len(), |addr, at, n| self.mem.read(addr, &mut data[at..at + n]))?;
        let mut at = 0;
        for b in bufs {
            if at >= n {
                break;
            }
            let k = b.len().min(n - at);
            b.copy_from(&data[at..at + k]);
            at += k;
        }
        Ok(n)
    }
    fn write(&self, _: &Context, _: &OpenFile, bufs: &[GuestSlice<'_>], offset: u64) -> Result<usize, FsError> {
        let mut data = Vec::new();
        for b in bufs {
            let at = data.len();
            if at >= 1 << 20 {
                break;
            }
            let k = b.len().min((1 << 20) - at);
            data.resize(at + b.len(), 0);
            b.copy_to(&mut data[at..]);
            data.truncate(at + k);
        }
        if !self.mem.alive() {
            return Ok(0);
        }
        Self::each_page(offset, data.len(), |addr, at, n| self.mem.write(addr, &data[at..at + n]))
    }
    fn stat(&self) -> Result<Stat, FsError> {
        Ok(self.stat)
    }
    fn seekable(&self) -> bool {
        true
    }
}
