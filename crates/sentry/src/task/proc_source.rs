//! What /proc shows, taken from the kernel's processes.

use std::fmt::Write;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Instant;

use super::{TaskShared, ThreadGroup};

use crate::fs::pipe::PipeInode;
use crate::fs::proc::{FdTarget, ProcSource};
use crate::fs::stdio::StreamInode;
use crate::fs::sys::SysSource;
use crate::fs::{Dentry, FsError};
use crate::kernel::Kernel;
use crate::mm::{Backing, Role, Vma};

/// Process (or, given `tid`, thread) state as /proc shows it: (letter,
/// word).
fn state_of(tg: &ThreadGroup, tid: Option<i32>) -> (char, &'static str) {
    let st = tg.state.lock().unwrap();
    if st.zombie {
        ('Z', "zombie")
    } else if st.stop_pending() {
        ('T', "stopped")
    } else {
        // A task reading its own /proc is running; others are not told
        // apart from sleeping ones.
        let me = match tid {
            Some(tid) => super::current_opt().is_some_and(|t| t.tid() == tid),
            None => super::run::current_tgid() == tg.tgid,
        };
        if me { ('R', "running") } else { ('S', "sleeping") }
    }
}

/// Ten-millisecond clock ticks (USER_HZ 100) in `ns`.
fn ticks(ns: u64) -> u64 {
    ns / 10_000_000
}

/// CPU time of a process's threads, live and exited, and of its reaped
/// children.
fn cpu_ns(tg: &ThreadGroup) -> (u64, u64) {
    (tg.cpu_time().as_nanos() as u64, tg.children_cpu_time().as_nanos() as u64)
}

/// CPU time every process of the sandbox has used, the reaped included
/// (counted in their parents').
fn sandbox_cpu_ns(k: &Kernel) -> u64 {
    let groups = k.procs.lock().unwrap().processes();
    groups.iter().map(|g| cpu_ns(g)).map(|(own, children)| own + children).sum()
}

/// Memory figures of a process, in pages: (size, resident, shared, text,
/// data), as /proc/PID/statm counts them.
fn memory_of(tg: &ThreadGroup) -> (u64, u64, u64, u64, u64) {
    let Some(view) = tg.view.lock().unwrap().clone() else { return Default::default() };
    let (mut size, mut resident, mut shared, mut text, mut data) = (0, 0, 0, 0, 0);
    for (v, pages) in view.mm.vmas_resident() {
        let len = v.len() / 4096;
        size += len;
        resident += pages;
        let file_backed = matches!(v.backing, Backing::File { .. } | Backing::Shared { .. });
        if file_backed {
            shared += pages;
        }
        if v.access.execute && matches!(v.backing, Backing::File { .. }) {
            text += len;
        } else if v.is_private() && v.access.write {
            data += len;
        }
    }
    (size, resident, shared, text, data)
}

/// The thread `tid` of a process.
fn thread_of(tg: &ThreadGroup, tid: i32) -> Option<Arc<TaskShared>> {
    tg.threads.lock().unwrap().iter().find(|t| t.tid() == tid).cloned()
}

/// A thread's name (its own, once it set one), else its process's.
fn comm_of(thread: Option<&Arc<TaskShared>>, process_comm: &[u8]) -> Vec<u8> {
    thread.map(|t| t.comm.lock().unwrap().clone()).filter(|c| !c.is_empty()).unwrap_or_else(|| process_comm.to_vec())
}

/// A CPU mask as /proc/PID/status writes it: 32-bit hex words, most
/// significant first, separated by commas.
fn mask_words(mask: &[u8], cpus: usize) -> String {
    let words = cpus.div_ceil(32).max(1);
    let word = |i: usize| -> u32 {
        (0..4).map(|b| u32::from(*mask.get(i * 4 + b).unwrap_or(&0)) << (8 * b)).fold(0, |a, x| a | x)
    };
    (0..words).rev().map(|i| format!("{:08x}", word(i))).collect::<Vec<_>>().join(",")
}

/// The CPUs in a mask as a list ("0-3,6").
fn mask_list(mask: &[u8], cpus: usize) -> String {
    let on = |c: usize| mask.get(c / 8).is_some_and(|b| b & (1 << (c % 8)) != 0);
    let mut parts = Vec::new();
    let mut c = 0;
    while c < cpus {
        if !on(c) {
            c += 1;
            continue;
        }
        let first = c;
        while c + 1 < cpus && on(c + 1) {
            c += 1;
        }
        parts.push(if first == c { first.to_string() } else { format!("{first}-{c}") });
        c += 1;
    }
    parts.join(",")
}

/// (ppid, pgid, sid) of a process.
fn ids_of(k: &Kernel, pid: i32) -> (i32, i32, i32) {
    let tree = k.procs.lock().unwrap();
    (tree.parent_of(pid).unwrap_or(0), tree.pgid_of(pid).unwrap_or(pid), tree.sid_of(pid).unwrap_or(pid))
}

/// /proc/PID/status (or, given a thread, /proc/PID/task/TID/status): the
/// lines programs read (identity, parentage, memory, threads, signal sets,
/// CPUs).
fn status(k: &Kernel, tg: &Arc<ThreadGroup>, thread: Option<&Arc<TaskShared>>, comm: &[u8]) -> String {
    let pid = tg.tgid;
    let tid = thread.map_or(pid, |t| t.tid());
    let (ppid, _, _) = ids_of(k, pid);
    let (letter, word) = state_of(tg, thread.map(|t| t.tid()));
    let threads = tg.threads.lock().unwrap().clone();
    let main = thread.cloned().or_else(|| tg.main_thread());
    let (blocked, private) = match &main {
        Some(t) => {
            let s = t.sig.lock().unwrap();
            (s.mask, s.pending.pending())
        }
        None => Default::default(),
    };
    let shared = tg.shared_pending.lock().unwrap().pending();
    let (mut ignored, mut caught) = (0u64, 0u64);
    {
        let h = tg.handlers();
        let h = h.lock().unwrap();
        for sig in 1..=crate::signal::NSIG as u32 {
            match h.get(sig).handler {
                crate::signal::SIG_DFL => {}
                crate::signal::SIG_IGN => ignored |= 1 << (sig - 1),
                _ => caught |= 1 << (sig - 1),
            }
        }
    }
    let creds = tg.creds();
    let umask = tg.view.lock().unwrap().as_ref().map(|v| v.fs.lock().unwrap().umask);
    let (size, resident, file_pages, text, data) = memory_of(tg);
    let mut s = String::new();
    let _ = writeln!(s, "Name:\t{}", String::from_utf8_lossy(comm));
    if let Some(umask) = umask {
        let _ = writeln!(s, "Umask:\t{umask:04o}");
    }
    let tracer = main.as_ref().map_or(0, |t| t.tracer_tid());
    let (letter, word) =
        if main.as_ref().is_some_and(|t| t.ptrace_stopped()) { ('t', "tracing stop") } else { (letter, word) };
    let _ = writeln!(s, "State:\t{letter} ({word})");
    let _ = writeln!(s, "Tgid:\t{pid}\nNgid:\t0\nPid:\t{tid}\nPPid:\t{ppid}\nTracerPid:\t{tracer}");
    for (name, ids) in [("Uid", creds.uid), ("Gid", creds.gid)] {
        let _ = writeln!(s, "{name}:\t{}\t{}\t{}\t{}", ids.real, ids.effective, ids.saved, ids.fs);
    }
    let groups: Vec<String> = creds.groups.iter().map(u32::to_string).collect();
    let _ = writeln!(s, "Groups:\t{}", groups.join(" "));
    let _ = writeln!(s, "NSpid:\t{tid}\nNSpgid:\t{}\nNSsid:\t{}", ids_of(k, pid).1, ids_of(k, pid).2);
    if size > 0 {
        let kb = |pages: u64| pages * 4;
        let locked = tg.view.lock().unwrap().as_ref().map_or(0, |v| v.mm.locked_pages());
        let _ = writeln!(s, "VmSize:\t{:8} kB\nVmLck:\t{:8} kB", kb(size), kb(locked));
        let _ = writeln!(s, "VmRSS:\t{:8} kB", kb(resident));
        let _ = writeln!(s, "RssAnon:\t{:8} kB\nRssFile:\t{:8} kB", kb(resident - file_pages), kb(file_pages));
        let _ = writeln!(s, "VmData:\t{:8} kB\nVmExe:\t{:8} kB", kb(data), kb(text));
    }
    let _ = writeln!(s, "Threads:\t{}", threads.len());
    let _ = writeln!(s, "SigPnd:\t{:016x}\nShdPnd:\t{:016x}", private.0, shared.0);
    let _ = writeln!(s, "SigBlk:\t{:016x}\nSigIgn:\t{ignored:016x}\nSigCgt:\t{caught:016x}", blocked.0);
    let c = &creds.caps;
    for (name, set) in
        [("Inh", c.inheritable), ("Prm", c.permitted), ("Eff", c.effective), ("Bnd", c.bounding), ("Amb", c.ambient)]
    {
        let _ = writeln!(s, "Cap{name}:\t{set:016x}");
    }
    let no_new_privs = main.as_ref().is_some_and(|t| t.no_new_privs.load(Ordering::Relaxed));
    let _ = writeln!(s, "NoNewPrivs:\t{}\nSeccomp:\t0", u8::from(no_new_privs));
    let cpus = k.config.cpus;
    let affinity = main.as_ref().map(|t| t.affinity.lock().unwrap().clone()).unwrap_or_default();
    let _ = writeln!(s, "Cpus_allowed:\t{}", mask_words(&affinity, cpus));
    let _ = writeln!(s, "Cpus_allowed_list:\t{}", mask_list(&affinity, cpus));
    let _ = writeln!(s, "Mems_allowed:\t00000001\nMems_allowed_list:\t0");
    s
}

/// /proc/PID/stat (or, given a thread, /proc/PID/task/TID/stat): the 52
/// fields of proc_pid_stat(5), those the sentry keeps filled in, the
/// others zero.
fn stat(k: &Kernel, tg: &Arc<ThreadGroup>, thread: Option<&Arc<TaskShared>>, comm: &[u8], started: Instant) -> String {
    let pid = tg.tgid;
    let tid = thread.map_or(pid, |t| t.tid());
    let (ppid, pgid, sid) = ids_of(k, pid);
    let (letter, _) = state_of(tg, thread.map(|t| t.tid()));
    let threads = tg.threads.lock().unwrap().len();
    let own = thread.map_or_else(|| tg.cpu_times(), |t| t.cpu_times());
    let children = tg.children_cpu_times();
    let t = |d: std::time::Duration| ticks(d.as_nanos() as u64);
    let (utime, stime, cutime, cstime) = (t(own.user), t(own.system), t(children.user), t(children.system));
    let exit_signal = tg.state.lock().unwrap().exit_signal;
    let start = ticks(started.saturating_duration_since(k.started).as_nanos() as u64);
    let (size, resident, ..) = memory_of(tg);
    let vsize = size * 4096;
    let minflt = tg.view.lock().unwrap().as_ref().map_or(0, |v| v.mm.stats().faults_mapped);
    // pid (comm) state ppid pgrp session tty_nr tpgid flags minflt cminflt
    // majflt cmajflt utime stime cutime cstime priority nice num_threads
    // itrealvalue starttime vsize rss ...
    let mut s = format!(
        "{tid} ({}) {letter} {ppid} {pgid} {sid} 0 -1 4194304 {minflt} 0 0 0 {utime} {stime} {cutime} {cstime} 20 0 {threads} 0 \
         {start} {vsize} {resident}",
        String::from_utf8_lossy(comm)
    );
    // rsslim startcode endcode startstack kstkesp kstkeip signal blocked
    // sigignore sigcatch wchan nswap cnswap exit_signal processor
    // rt_priority policy delayacct_blkio_ticks guest_time cguest_time
    // start_data end_data start_brk arg_start arg_end env_start env_end
    // exit_code
    s.push_str(&format!(" {} 0 0 0 0 0 0 0 0 0 0 0 0 {exit_signal} 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n", u64::MAX));
    s
}

/// The kernel as a source for /proc.
pub struct KernelProcSource {
    pub kernel: Weak<Kernel>,
}

impl KernelProcSource {
    fn view(&self, pid: i32) -> Option<super::ProcessView> {
        let k = self.kernel.upgrade()?;
        let tg = k.procs.lock().unwrap().group(pid)?;
        tg.view.lock().unwrap().clone()
    }
}

fn nul_joined(v: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for s in v {
        out.extend_from_slice(s);
        out.push(0);
    }
    out
}

impl ProcSource for KernelProcSource {
    fn current_pid(&self) -> i32 {
        super::run::current_tgid()
    }

    fn current_tid(&self) -> i32 {
        super::current_opt().map_or(0, |t| t.tid())
    }

    fn threads(&self, pid: i32) -> Vec<i32> {
        let Some(tg) = self.kernel.upgrade().and_then(|k| k.procs.lock().unwrap().group(pid)) else {
            return Vec::new();
        };
        let mut tids: Vec<i32> = tg.threads.lock().unwrap().iter().map(|t| t.tid()).collect();
        tids.sort_unstable();
        tids
    }

    fn thread_file(&self, pid: i32, tid: i32, name: &str) -> Option<Vec<u8>> {
        let k = self.kernel.upgrade()?;
        let tg = k.procs.lock().unwrap().group(pid)?;
        let thread = thread_of(&tg, tid)?;
        let info = tg.info.lock().unwrap().clone();
        let comm = comm_of(Some(&thread), &info.comm);
        match name {
            "comm" => Some([comm.as_slice(), b"\n"].concat()),
            "stat" => Some(stat(&k, &tg, Some(&thread), &comm, info.started).into_bytes()),
            "status" => Some(status(&k, &tg, Some(&thread), &comm).into_bytes()),
            _ => None,
        }
    }

    fn fdinfo(&self, pid: i32, fd: i32) -> Option<Vec<u8>> {
        let e = self.view(pid)?.files.entry(fd).ok()?;
        let f = &e.file;
        let pos = *f.offset.lock().unwrap();
        // F_GETFL's flags, with O_CLOEXEC added for a close-on-exec
        // descriptor, as Linux shows them.
        let flags = f.flags().bits() | if e.cloexec { linux_raw_sys::general::O_CLOEXEC } else { 0 };
        let mnt_id = f.dentry.as_ref().map_or(0, |d| d.mount.id);
        let ino = f.ops.stat().map_or(0, |s| s.ino);
        let extra = f.ops.fdinfo();
        Some(format!("pos:\t{pos}\nflags:\t0{flags:o}\nmnt_id:\t{mnt_id}\nino:\t{ino}\n{extra}").into_bytes())
    }

    fn mem(&self, pid: i32) -> Result<Arc<dyn crate::fs::proc::ProcMem>, FsError> {
        let k = self.kernel.upgrade().ok_or(FsError::NotFound)?;
        let tg = k.procs.lock().unwrap().group(pid).ok_or(FsError::NotFound)?;
        let caller = super::current_opt().ok_or(FsError::PermissionDenied)?;
        super::may_access(&caller.tg, &tg, true).map_err(|_| FsError::PermissionDenied)?;
        let mm = tg.view.lock().unwrap().as_ref().map(|v| Arc::downgrade(&v.mm)).unwrap_or_default();
        Ok(Arc::new(ProcessMemory { mm }))
    }

    fn write_file(&self, pid: i32, name: &str, data: &[u8]) -> Result<(), FsError> {
        let k = self.kernel.upgrade().ok_or(FsError::NotFound)?;
        let tg = k.procs.lock().unwrap().group(pid).ok_or(FsError::NotFound)?;
        let text = std::str::from_utf8(data).map_err(|_| FsError::Invalid)?.trim();
        match name {
            "oom_score_adj" => {
                let v: i32 = text.parse().map_err(|_| FsError::Invalid)?;
                if !(-1000..=1000).contains(&v) {
                    return Err(FsError::Invalid);
                }
                let mut info = tg.info.lock().unwrap();
                // Lowering it (making the process less likely to be
                // killed) takes CAP_SYS_RESOURCE.
                let writer = super::current_opt().map(|t| t.tg.creds());
                if v < info.oom_score_adj && !writer.is_some_and(|c| c.has(crate::auth::cap::SYS_RESOURCE)) {
                    return Err(FsError::PermissionDenied);
                }
                info.oom_score_adj = v;
                Ok(())
            }
            "coredump_filter" => {
                let v = parse_c_uint(text).ok_or(FsError::Invalid)?;
                // Only the filter's nine bits are kept (MMF_DUMP_FILTER_BITS).
                tg.info.lock().unwrap().coredump_filter = v & 0x1ff;
                Ok(())
            }
            _ => Err(FsError::PermissionDenied),
        }
    }

    fn pids(&self) -> Vec<i32> {
        self.kernel.upgrade().map(|k| k.procs.lock().unwrap().pids()).unwrap_or_default()
    }

    fn exists(&self, pid: i32) -> bool {
        self.kernel.upgrade().and_then(|k| k.procs.lock().unwrap().group(pid)).is_some()
    }

    fn owner(&self, pid: i32) -> Option<(u32, u32, bool)> {
        let tg = self.kernel.upgrade()?.procs.lock().unwrap().group(pid)?;
        let c = tg.creds();
        let dumpable = !tg.state.lock().unwrap().undumpable;
        Some((c.uid.effective, c.gid.effective, dumpable))
    }

    fn root(&self, pid: i32) -> Option<Arc<Dentry>> {
        Some(self.view(pid)?.fs.lock().unwrap().root.clone())
    }

    fn cwd(&self, pid: i32) -> Option<Arc<Dentry>> {
        Some(self.view(pid)?.fs.lock().unwrap().cwd.clone())
    }

    fn exe(&self, pid: i32) -> Option<Arc<Dentry>> {
        self.kernel.upgrade()?.procs.lock().unwrap().group(pid)?.info.lock().unwrap().exe.clone()
    }

    fn fds(&self, pid: i32) -> Vec<(i32, FdTarget)> {
        let Some(v) = self.view(pid) else { return vec![] };
        v.files
            .list()
            .into_iter()
            .map(|(fd, e)| {
                // A pipe shows as one even when it was opened by a name.
                let target = match (crate::fs::pipe::pipe_of(&*e.file.ops), &e.file.dentry) {
                    (Some(p), _) => FdTarget::Anonymous {
                        desc: p.describe(),
                        inode: Some(Arc::new(PipeInode(p.clone())) as Arc<dyn crate::fs::Inode>),
                    },
                    (None, Some(d)) => FdTarget::Named(d.clone()),
                    // The caller's streams open again, as what they are.
                    (None, None) if e.file.ops.host_fd().is_some() => {
                        let st = e.file.ops.stat().ok();
                        let desc = match st {
                            Some(s) if s.file_type() == crate::fs::FileType::Fifo => format!("pipe:[{}]", s.ino),
                            _ => e.file.ops.anon_name().unwrap_or("anon_inode:[unknown]").to_string(),
                        };
                        FdTarget::Anonymous {
                            desc: desc.into_bytes(),
                            inode: Some(Arc::new(StreamInode(e.file.ops.clone())) as Arc<dyn crate::fs::Inode>),
                        }
                    }
                    (None, None) => match e.file.ops.downcast_ref::<crate::net::SocketFile>() {
                        Some(s) => {
                            FdTarget::Anonymous { desc: format!("socket:[{}]", s.ino()).into_bytes(), inode: None }
                        }
                        None => FdTarget::Anonymous {
                            desc: e.file.ops.anon_name().unwrap_or("anon_inode:[unknown]").as_bytes().to_vec(),
                            inode: None,
                        },
                    },
                };
                (fd, target)
            })
            .collect()
    }

    fn file(&self, pid: i32, name: &str) -> Option<Vec<u8>> {
        let k = self.kernel.upgrade()?;
        let tg = k.procs.lock().unwrap().group(pid)?;
        let info = tg.info.lock().unwrap().clone();
        match name {
            "cmdline" => Some(nul_joined(&info.argv)),
            "environ" => Some(nul_joined(&info.envp)),
            "comm" => {
                let mut c = info.comm.clone();
                c.push(b'\n');
                Some(c)
            }
            "auxv" => Some(
                info.auxv
                    .iter()
                    .chain(&[(0, 0)])
                    .flat_map(|(a, b)| [a.to_le_bytes(), b.to_le_bytes()])
                    .flatten()
                    .collect(),
            ),
            "maps" => {
                let view = tg.view.lock().unwrap().clone()?;
                let mut out = Vec::new();
                for v in view.mm.vmas() {
                    maps_line(&mut out, &v);
                }
                Some(out)
            }
            "status" => Some(status(&k, &tg, None, &info.comm).into_bytes()),
            "stat" => Some(stat(&k, &tg, None, &info.comm, info.started).into_bytes()),
            "statm" => {
                let (size, resident, shared, text, data) = memory_of(&tg);
                Some(format!("{size} {resident} {shared} {text} 0 {data} 0\n").into_bytes())
            }
            "smaps" => {
                let view = tg.view.lock().unwrap().clone()?;
                let mut out = Vec::new();
                for (v, pages) in view.mm.vmas_resident() {
                    maps_line(&mut out, &v);
                    smaps_block(&mut out, &v, pages);
                }
                Some(out)
            }
            "limits" => Some(limits(&tg.rlimits.lock().unwrap()).into_bytes()),
            "mounts" => Some(mount_lines(&k, self.root(pid), false)),
            "mountinfo" => Some(mount_lines(&k, self.root(pid), true)),
            // The sandbox is the root of its own cgroup namespace.
            "cgroup" => Some(b"0::/\n".to_vec()),
            "oom_score_adj" => Some(format!("{}\n", info.oom_score_adj).into_bytes()),
            "coredump_filter" => Some(format!("{:08x}\n", info.coredump_filter).into_bytes()),
            _ => None,
        }
    }

    fn net_files(&self) -> Vec<String> {
        self.kernel.upgrade().map_or_else(Vec::new, |k| k.net.proc_net_names())
    }

    fn net_file(&self, name: &str) -> Option<Vec<u8>> {
        self.kernel.upgrade()?.net.proc_net_file(name).map(String::into_bytes)
    }

    fn global(&self, name: &str) -> Option<Vec<u8>> {
        let k = self.kernel.upgrade()?;
        if let Some(sysctl) = name.strip_prefix("sys/") {
            return sysctl_value(&k, sysctl).map(|v| format!("{v}\n").into_bytes());
        }
        if let Some(kind) = name.strip_prefix("sysvipc/") {
            return k.ipc.proc_file(kind).map(String::into_bytes);
        }
        let cpus = k.config.cpus;
        match name {
            "mounts" => Some(mount_lines(&k, self.root(self.current_pid()), false)),
            "filesystems" => Some(
                b"nodev	sysfs
nodev	tmpfs
nodev	proc
nodev	cgroup2
nodev	devtmpfs
nodev	mqueue
	hostfs
nodev	overlay
"
                .to_vec(),
            ),
            "uptime" => {
                let up = k.started.elapsed().as_secs_f64();
                // Idle: the time the sandbox's CPUs ran none of its tasks.
                let idle = (up * cpus as f64 - sandbox_cpu_ns(&k) as f64 / 1e9).max(0.0);
                Some(format!("{up:.2} {idle:.2}\n").into_bytes())
            }
            "loadavg" => {
                // The sentry keeps no run-queue history to average, so the
                // averages are zero; the counts are live: tasks on a vCPU
                // now (the reader at least), tasks in all, the last id.
                let running = k.platform.stats().vcpus_in_use.max(1);
                let tasks = k.procs.lock().unwrap().thread_count();
                Some(format!("0.00 0.00 0.00 {running}/{tasks} {}\n", k.tids_allocated()).into_bytes())
            }
            "version" => Some(
                format!(
                    "Linux version {} (cordon) {}\n",
                    crate::kernel::kernel_release(),
                    crate::kernel::KERNEL_VERSION
                )
                .into_bytes(),
            ),
            "meminfo" => {
                let (total, used) = memory_use(&k);
                let (total, free) = (total / 1024, total.saturating_sub(used) / 1024);
                let mut s = String::new();
                for (name, kb) in [
                    ("MemTotal", total),
                    ("MemFree", free),
                    ("MemAvailable", free),
                    ("Buffers", 0),
                    ("Cached", 0),
                    ("SwapCached", 0),
                    ("SwapTotal", 0),
                    ("SwapFree", 0),
                    ("Shmem", 0),
                    ("SReclaimable", 0),
                ] {
                    let _ = writeln!(s, "{:<15} {kb:8} kB", format!("{name}:"));
                }
                Some(s.into_bytes())
            }
            "cpuinfo" => Some(cpuinfo(cpus).into_bytes()),
            "stat" => {
                // The sentry does not track which vCPU ran a thread: the
                // busy time is shared evenly among the CPUs.
                let uptime = ticks(k.started.elapsed().as_nanos() as u64);
                let busy = ticks(sandbox_cpu_ns(&k));
                let idle = (uptime * cpus as u64).saturating_sub(busy);
                let line = |name: &str, user: u64, idle: u64| format!("{name} {user} 0 0 {idle} 0 0 0 0 0 0\n");
                let mut s = line("cpu ", busy, idle);
                for c in 0..cpus as u64 {
                    let share = |x: u64| x / cpus as u64 + u64::from(c < x % cpus as u64);
                    s.push_str(&line(&format!("cpu{c}"), share(busy), share(idle)));
                }
                let boot = crate::fs::synthetic::boot_time().sec;
                let e = k.platform.exit_counts();
                let running = k.platform.stats().vcpus_in_use.max(1);
                let _ = write!(
                    s,
                    "intr {}\nctxt {}\nbtime {boot}\nprocesses {}\nprocs_running {running}\nprocs_blocked 0\n",
                    e.interrupts,
                    e.entries,
                    k.tids_allocated()
                );
                Some(s.into_bytes())
            }
            _ => None,
        }
    }
}

/// The sandbox's memory: (limit, in use), in bytes. In use counts what the
/// limit is charged with: frames, and the sentry's records held for the
/// application.
fn memory_use(k: &Kernel) -> (u64, u64) {
    let m = k.mf.stats();
    (k.mf.capacity(), (m.frames_in_use + m.frames_charged) * 4096)
}

/// The value of a sysctl below /proc/sys, from the sentry's own limits.
fn sysctl_value(k: &Kernel, name: &str) -> Option<String> {
    Some(match name {
        "kernel/hostname" => String::from_utf8_lossy(&k.hostname.lock().unwrap()).into_owned(),
        "kernel/ostype" => "Linux".into(),
        "kernel/osrelease" => crate::kernel::kernel_release(),
        "kernel/pid_max" => PID_MAX.to_string(),
        "kernel/ngroups_max" => crate::auth::NGROUPS_MAX.to_string(),
        // Linux's default from the memory size (one thread per 128 KiB),
        // and the pids limit when it is lower.
        "kernel/threads-max" => {
            let by_memory = (k.mf.capacity() / (128 << 10)).clamp(20, 0x3fff_ffff);
            let limit = k.procs.lock().unwrap().pids_limit();
            limit.map_or(by_memory, |l| by_memory.min(l as u64)).to_string()
        }
        "kernel/cap_last_cap" => crate::auth::cap::LAST.to_string(),
        "kernel/sem" | "kernel/msgmax" | "kernel/msgmnb" | "kernel/msgmni" | "kernel/shmmax" | "kernel/shmall"
        | "kernel/shmmni" => k.ipc.sysctl(&name["kernel/".len()..])?,
        "fs/mqueue/msg_default"
        | "fs/mqueue/msg_max"
        | "fs/mqueue/msgsize_default"
        | "fs/mqueue/msgsize_max"
        | "fs/mqueue/queues_max" => k.ipc.sysctl(&name["fs/".len()..])?,
        "kernel/random/uuid" => uuid(&random_bytes()),
        "kernel/random/boot_id" => uuid(&k.config.boot_id),
        // Memory is promised freely and taken only when touched: mmap
        // never refuses for want of memory, as with overcommit always.
        "vm/overcommit_memory" => "1".into(),
        "vm/max_map_count" => crate::mm::MAX_MAP_COUNT.to_string(),
        // Linux's default: a tenth of memory in KiB, at least 8192.
        "fs/file-max" => (k.mf.capacity() / 1024 / 10).max(8192).to_string(),
        "fs/nr_open" => crate::fd::NR_OPEN.to_string(),
        "fs/pipe-max-size" => crate::fs::pipe::MAX_CAPACITY.to_string(),
        // Linux's defaults, until the sandbox has sockets to apply them to.
        "net/ipv4/ip_local_port_range" => "32768\t60999".into(),
        "net/core/somaxconn" => "4096".into(),
        "net/unix/max_dgram_qlen" => crate::net::unix::MAX_DGRAM_QLEN.to_string(),
        _ => return None,
    })
}

/// Most process ids: Linux's PID_MAX_LIMIT on 64-bit machines.
pub const PID_MAX: i32 = 4 << 20;

/// Sixteen random bytes (a UUID's worth).
pub fn random_bytes() -> [u8; 16] {
    let mut b = [0u8; 16];
    let mut done = 0;
    while done < b.len() {
        done += rustix::rand::getrandom(&mut b[done..], rustix::rand::GetRandomFlags::empty()).unwrap_or(0);
    }
    b
}

/// A random (version 4) UUID as Linux writes one.
fn uuid(b: &[u8; 16]) -> String {
    let mut b = *b;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: Vec<String> = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{}-{}-{}-{}-{}", h[0..4].concat(), h[4..6].concat(), h[6..8].concat(), h[8..10].concat(), h[10..].concat())
}

/// An unsigned number as the C library's strtoul reads it with base 0
/// (decimal, 0x hex, 0 octal), as Linux's kstrtouint does.
fn parse_c_uint(s: &str) -> Option<u32> {
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u32::from_str_radix(h, 16).ok()
    } else if s.len() > 1
        && let Some(o) = s.strip_prefix('0')
    {
        u32::from_str_radix(o, 8).ok()
    } else {
        s.parse().ok()
    }
}

/// /proc/PID/limits, laid out as Linux's proc_pid_limits.
fn limits(l: &super::Rlimits) -> String {
    const NAMES: [(&str, &str); 16] = [
        ("Max cpu time", "seconds"),
        ("Max file size", "bytes"),
        ("Max data size", "bytes"),
        ("Max stack size", "bytes"),
        ("Max core file size", "bytes"),
        ("Max resident set", "bytes"),
        ("Max processes", "processes"),
        ("Max open files", "files"),
        ("Max locked memory", "bytes"),
        ("Max address space", "bytes"),
        ("Max file locks", "locks"),
        ("Max pending signals", "signals"),
        ("Max msgqueue size", "bytes"),
        ("Max nice priority", ""),
        ("Max realtime priority", ""),
        ("Max realtime timeout", "us"),
    ];
    let shown = |v: u64| if v == super::RLIM_INFINITY { "unlimited".to_string() } else { v.to_string() };
    let mut s = format!("{:<25} {:<20} {:<20} {:<10}\n", "Limit", "Soft Limit", "Hard Limit", "Units");
    for ((name, unit), r) in NAMES.iter().zip(l.0.iter()) {
        let _ = write!(s, "{name:<25} {:<20} {:<20} ", shown(r.cur), shown(r.max));
        if unit.is_empty() {
            s.push('\n');
        } else {
            let _ = writeln!(s, "{unit:<10}");
        }
    }
    s
}

/// The per-mapping lines of /proc/PID/smaps after the mapping's maps line.
/// Proportional sizes are the resident ones: the sentry does not count
/// how many processes map each page.
fn smaps_block(out: &mut Vec<u8>, v: &Vma, pages: u64) {
    use std::io::Write as _;
    let (size, rss) = (v.len() / 1024, pages * 4);
    let anon = if matches!(v.backing, Backing::Anonymous) { rss } else { 0 };
    for (name, kb) in [
        ("Size", size),
        ("KernelPageSize", 4),
        ("MMUPageSize", 4),
        ("Rss", rss),
        ("Pss", rss),
        ("Anonymous", anon),
        ("Swap", 0),
        ("SwapPss", 0),
        ("Locked", if v.locked { rss } else { 0 }),
    ] {
        let _ = writeln!(out, "{:<16}{kb:>8} kB", format!("{name}:"));
    }
    let a = v.access;
    let mut flags = Vec::new();
    for (on, f) in [
        (a.read, "rd"),
        (a.write, "wr"),
        (a.execute, "ex"),
        (!v.is_private(), "sh"),
        (v.max_access.read, "mr"),
        (v.max_access.write, "mw"),
        (v.max_access.execute, "me"),
        (!v.is_private(), "ms"),
        (v.grows_down, "gd"),
        (v.locked, "lo"),
    ] {
        if on {
            flags.push(f);
        }
    }
    let _ = writeln!(out, "VmFlags: {} ", flags.join(" "));
}

/// The kernel as a source for /sys.
pub struct KernelSysSource {
    pub kernel: Weak<Kernel>,
}

impl SysSource for KernelSysSource {
    fn cpus(&self) -> usize {
        self.kernel.upgrade().map_or(1, |k| k.config.cpus)
    }

    fn net_interfaces(&self) -> Vec<crate::fs::sys::NetInterfaceFiles> {
        crate::net::interfaces::interfaces()
            .iter()
            .map(|i| {
                let attrs = crate::net::interfaces::SYS_CLASS_NET_ATTRS
                    .iter()
                    .filter_map(|a| {
                        crate::net::interfaces::sys_class_net(i.name, a).map(|v| (a.to_string(), v.into_bytes()))
                    })
                    .collect();
                (i.name.to_string(), attrs)
            })
            .collect()
    }

    fn cgroup(&self, name: &str) -> Option<Vec<u8>> {
        let k = self.kernel.upgrade()?;
        let (limit, used) = memory_use(&k);
        let text = match name {
            "cgroup.controllers" => "cpu memory pids".to_string(),
            "cgroup.type" => "domain".to_string(),
            "cgroup.procs" | "cgroup.threads" => {
                let tree = k.procs.lock().unwrap();
                let mut ids: Vec<i32> =
                    if name == "cgroup.procs" { tree.pids() } else { tree.threads().iter().map(|t| t.tid()).collect() };
                ids.sort_unstable();
                return Some(ids.iter().map(|p| format!("{p}\n")).collect::<String>().into_bytes());
            }
            // --cpus as a quota: that many CPUs' worth of each period.
            "cpu.max" => match k.config.cpu_limit {
                Some(n) => format!("{} 100000", n as u64 * 100_000),
                None => "max 100000".to_string(),
            },
            "cpu.stat" => {
                let usec = sandbox_cpu_ns(&k) / 1000;
                format!("usage_usec {usec}\nuser_usec {usec}\nsystem_usec 0")
            }
            "memory.max" => limit.to_string(),
            "memory.current" => used.to_string(),
            "memory.peak" => (k.mf.stats().frames_peak * 4096).to_string(),
            "memory.swap.max" => "0".to_string(),
            "pids.max" => k.procs.lock().unwrap().pids_limit().map_or("max".to_string(), |n| n.to_string()),
            "pids.current" => k.procs.lock().unwrap().task_count().to_string(),
            _ => return None,
        };
        Some(format!("{text}\n").into_bytes())
    }
}

/// /proc/PID/mounts (`info` false) or /proc/PID/mountinfo: the mounts
/// of the tree (the container's) seen from the process's root `root`, with
/// their mount points relative to it; those outside it are not shown, as
/// Linux's seq_path_root leaves them out.
fn mount_lines(k: &Kernel, root: Option<Arc<Dentry>>, info: bool) -> Vec<u8> {
    let Some(root) = root else { return Vec::new() };
    let (Some(base), Some(tree)) = (k.mounts.path_of(&root), k.mounts.tree_of(root.mount.id)) else {
        return Vec::new();
    };
    let mut s = String::new();
    for e in k.mounts.list().into_iter().filter(|e| e.tree == tree) {
        let Some(at) = below(&e.path, &base) else { continue };
        let m = &e.mount;
        let flags = m.flags();
        let source = if m.source.is_empty() { "none".to_string() } else { mangle(m.source.as_bytes()) };
        let mut mnt_opts = String::new();
        flags.show(&mut mnt_opts);
        let sb_opts = m.sb.options();
        if info {
            let dev = m.root.stat().map(|st| st.dev).unwrap_or(0);
            let mut tags = String::new();
            let p = m.propagation();
            if let Some(g) = p.shared {
                let _ = write!(tags, " shared:{g}");
            }
            if let Some(g) = p.master {
                let _ = write!(tags, " master:{g}");
            }
            if p.unbindable {
                tags.push_str(" unbindable");
            }
            let _ = writeln!(
                s,
                "{} {} {}:{} {} {} {}{mnt_opts}{tags} - {} {source} {}{sb_opts}",
                m.id,
                e.parent_id,
                crate::fs::dev_major(dev),
                crate::fs::dev_minor(dev),
                mangle(&m.root_path),
                mangle(&at),
                if flags.contains(crate::fs::dentry::MountFlags::READ_ONLY) { "ro" } else { "rw" },
                m.fs_type,
                if m.sb.read_only() { "ro" } else { "rw" },
            );
        } else {
            let _ = writeln!(
                s,
                "{source} {} {} {}{mnt_opts}{sb_opts} 0 0",
                mangle(&at),
                m.fs_type,
                if m.read_only() { "ro" } else { "rw" },
            );
        }
    }
    s.into_bytes()
}

/// `path` relative to `base` ("/" for `base` itself), if below it.
fn below(path: &[u8], base: &[u8]) -> Option<Vec<u8>> {
    if base == b"/" {
        return Some(path.to_vec());
    }
    let rest = path.strip_prefix(base)?;
    if rest.is_empty() {
        return Some(b"/".to_vec());
    }
    rest.starts_with(b"/").then(|| rest.to_vec())
}

/// A name in /proc/PID/mounts, with the characters that would split its
/// fields escaped in octal, as Linux's mangle() does.
fn mangle(name: &[u8]) -> String {
    let mut out = Vec::new();
    for &b in name {
        match b {
            b' ' | b'\t' | b'\n' | b'\\' => out.extend_from_slice(format!("\\{b:03o}").as_bytes()),
            _ => out.push(b),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// CPUs of the host this process may use: the sandbox's CPUs without
/// `--cpus`.
pub fn host_cpus() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// /proc/cpuinfo from CPUID, one block per CPU of the sandbox.
fn cpuinfo(cpus: usize) -> String {
    use std::arch::x86_64::__cpuid;
    let (vendor, brand, family, model, stepping) = {
        let l0 = __cpuid(0);
        let mut v = Vec::new();
        for r in [l0.ebx, l0.edx, l0.ecx] {
            v.extend_from_slice(&r.to_le_bytes());
        }
        let mut b = Vec::new();
        for leaf in 0x8000_0002u32..=0x8000_0004 {
            let r = __cpuid(leaf);
            for x in [r.eax, r.ebx, r.ecx, r.edx] {
                b.extend_from_slice(&x.to_le_bytes());
            }
        }
        let l1 = __cpuid(1).eax;
        let fam = (l1 >> 8) & 0xf;
        let ext_fam = (l1 >> 20) & 0xff;
        let model = ((l1 >> 4) & 0xf) | (((l1 >> 16) & 0xf) << 4);
        (v, b, fam + if fam == 0xf { ext_fam } else { 0 }, model, l1 & 0xf)
    };
    let trim = |v: &[u8]| String::from_utf8_lossy(v).trim_matches(char::from(0)).trim().to_string();
    let (vendor, brand) = (trim(&vendor), trim(&brand));
    let mut s = String::new();
    for c in 0..cpus {
        let _ = write!(
            s,
            "processor\t: {c}\nvendor_id\t: {vendor}\ncpu family\t: {family}\nmodel\t\t: {model}\n\
             model name\t: {brand}\nstepping\t: {stepping}\nphysical id\t: 0\nsiblings\t: {cpus}\n\
             core id\t\t: {c}\ncpu cores\t: {cpus}\nfpu\t\t: yes\nwp\t\t: yes\n\n"
        );
    }
    s
}

/// One line of /proc/PID/maps, laid out as Linux does: the name (a file's
/// path, or [heap], [stack], [vdso]...) starts in column 74.
fn maps_line(out: &mut Vec<u8>, v: &crate::mm::Vma) {
    use std::io::Write as _;
    let a = v.access;
    let (off, dev, ino, name) = match &v.backing {
        Backing::File { file, offset, name, .. } => {
            let n = file.describe();
            let shown = match name {
                Some(d) => d.map_path(),
                None => n.path.into_bytes(),
            };
            (*offset, n.dev, n.ino, shown)
        }
        _ => (0, 0, 0, Vec::new()),
    };
    let name = match v.role {
        Role::Heap => b"[heap]".to_vec(),
        Role::Stack => b"[stack]".to_vec(),
        Role::Plain | Role::Trampolines => name,
    };
    let line_start = out.len();
    let _ = write!(
        out,
        "{:08x}-{:08x} {}{}{}{} {:08x} {:02x}:{:02x} {} ",
        v.start,
        v.end,
        if a.read { 'r' } else { '-' },
        if a.write { 'w' } else { '-' },
        if a.execute { 'x' } else { '-' },
        if v.is_private() { 'p' } else { 's' },
        off,
        crate::fs::dev_major(dev),
        crate::fs::dev_minor(dev),
        ino,
    );
    if !name.is_empty() {
        // Padded to 72 columns, then one more space.
        let pad = (line_start + 72).saturating_sub(out.len());
        out.resize(out.len() + pad, b' ');
        out.push(b' ');
        // A newline in a name would split the line: Linux escapes it.
        for &b in &name {
            if b == b'\n' {
                out.extend_from_slice(b"\\012");
            } else {
                out.push(b);
            }
        }
    }
    out.push(b'\n');
}

/// A process's memory for /proc/PID/mem: its address space at open, not
/// kept alive by the file (once the process exits or execs, reads and
/// writes find nothing, as Linux's).
struct ProcessMemory {
    mm: Weak<crate::mm::MemoryManager>,
}

impl crate::fs::proc::ProcMem for ProcessMemory {
    fn alive(&self) -> bool {
        self.mm.strong_count() > 0
    }

    fn read(&self, addr: u64, buf: &mut [u8]) -> usize {
        match self.mm.upgrade() {
            Some(mm) if mm.copy_in(addr, buf).is_ok() => buf.len(),
            _ => 0,
        }
    }

    fn write(&self, addr: u64, data: &[u8]) -> usize {
        match self.mm.upgrade() {
            Some(mm) if mm.poke(addr, data).is_ok() => data.len(),
            _ => 0,
        }
    }
}
