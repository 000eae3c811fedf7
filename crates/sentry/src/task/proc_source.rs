//! What /proc shows, taken from the kernel's processes.

use std::fmt::Write;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use super::ThreadGroup;

use crate::fs::Dentry;
use crate::fs::pipe::PipeInode;
use crate::fs::proc::{FdTarget, ProcSource};
use crate::kernel::Kernel;
use crate::mm::{Backing, Role};

/// Process state as /proc shows it: (letter, word).
fn state_of(tg: &ThreadGroup) -> (char, &'static str) {
    let st = tg.state.lock().unwrap();
    if st.zombie {
        ('Z', "zombie")
    } else if st.stop_pending() {
        ('T', "stopped")
    } else {
        // A task reading its own /proc is running; others are not told
        // apart from sleeping ones.
        let me = super::run::current_tgid() == tg.tgid;
        if me { ('R', "running") } else { ('S', "sleeping") }
    }
}

/// (ppid, pgid, sid) of a process.
fn ids_of(k: &Kernel, pid: i32) -> (i32, i32, i32) {
    let tree = k.procs.lock().unwrap();
    (tree.parent_of(pid).unwrap_or(0), tree.pgid_of(pid).unwrap_or(pid), tree.sid_of(pid).unwrap_or(pid))
}

/// /proc/PID/status: the lines programs read (identity, parentage, threads
/// and signal sets).
fn status(k: &Kernel, tg: &Arc<ThreadGroup>, comm: &[u8]) -> String {
    let pid = tg.tgid;
    let (ppid, _, _) = ids_of(k, pid);
    let (letter, word) = state_of(tg);
    let threads = tg.threads.lock().unwrap().clone();
    let (blocked, private) = match tg.main_thread() {
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
    let mut s = String::new();
    let _ = writeln!(s, "Name:\t{}", String::from_utf8_lossy(comm));
    let _ = writeln!(s, "State:\t{letter} ({word})");
    let _ = writeln!(s, "Tgid:\t{pid}\nNgid:\t0\nPid:\t{pid}\nPPid:\t{ppid}\nTracerPid:\t0");
    for (name, ids) in [("Uid", creds.uid), ("Gid", creds.gid)] {
        let _ = writeln!(s, "{name}:\t{}\t{}\t{}\t{}", ids.real, ids.effective, ids.saved, ids.fs);
    }
    let groups: Vec<String> = creds.groups.iter().map(u32::to_string).collect();
    let _ = writeln!(s, "Groups:\t{}", groups.join(" "));
    let _ = writeln!(s, "Threads:\t{}", threads.len());
    let _ = writeln!(s, "SigPnd:\t{:016x}\nShdPnd:\t{:016x}", private.0, shared.0);
    let _ = writeln!(s, "SigBlk:\t{:016x}\nSigIgn:\t{ignored:016x}\nSigCgt:\t{caught:016x}", blocked.0);
    let c = &creds.caps;
    for (name, set) in
        [("Inh", c.inheritable), ("Prm", c.permitted), ("Eff", c.effective), ("Bnd", c.bounding), ("Amb", c.ambient)]
    {
        let _ = writeln!(s, "Cap{name}:\t{set:016x}");
    }
    s
}

/// /proc/PID/stat: the 52 fields of proc_pid_stat(5), those the sentry
/// keeps filled in, the others zero.
fn stat(k: &Kernel, tg: &Arc<ThreadGroup>, comm: &[u8]) -> String {
    let pid = tg.tgid;
    let (ppid, pgid, sid) = ids_of(k, pid);
    let (letter, _) = state_of(tg);
    let threads = tg.threads.lock().unwrap().len();
    let live: u64 = tg.threads.lock().unwrap().iter().map(|t| t.cpu_ns.load(Ordering::Relaxed)).sum();
    let (utime, cutime, exit_signal) = {
        let st = tg.state.lock().unwrap();
        ((st.dead_threads_ns + live) / 10_000_000, st.children_ns / 10_000_000, st.exit_signal)
    };
    // pid (comm) state ppid pgrp session tty_nr tpgid flags minflt cminflt
    // majflt cmajflt utime stime cutime cstime priority nice num_threads
    // itrealvalue starttime vsize rss ...
    let mut s = format!(
        "{pid} ({}) {letter} {ppid} {pgid} {sid} 0 -1 4194304 0 0 0 0 {utime} 0 {cutime} 0 20 0 {threads} 0 0 0 0",
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
                    (None, None) => FdTarget::Anonymous {
                        desc: e.file.ops.anon_name().unwrap_or("anon_inode:[unknown]").as_bytes().to_vec(),
                        inode: None,
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
            "status" => Some(status(&k, &tg, &info.comm).into_bytes()),
            "stat" => Some(stat(&k, &tg, &info.comm).into_bytes()),
            "mounts" => self.global("mounts"),
            _ => None,
        }
    }

    fn global(&self, name: &str) -> Option<Vec<u8>> {
        let k = self.kernel.upgrade()?;
        match name {
            "mounts" => {
                let mut s = String::new();
                let root = [(b"/".to_vec(), k.root.mount.clone())];
                for (path, m) in root.into_iter().chain(k.mounts.list()) {
                    let p = String::from_utf8_lossy(&path);
                    let _ =
                        writeln!(s, "{} {} {} {} 0 0", m.source, p, m.fs_type, if m.read_only { "ro" } else { "rw" });
                }
                Some(s.into_bytes())
            }
            "filesystems" => Some(b"nodev\tsysfs\nnodev\tproc\nnodev\tdevtmpfs\n\thostfs\nnodev\toverlay\n".to_vec()),
            "uptime" => {
                let up = k.started.elapsed().as_secs_f64();
                Some(format!("{up:.2} 0.00\n").into_bytes())
            }
            "loadavg" => Some(b"0.00 0.00 0.00 1/1 1\n".to_vec()),
            "version" => Some(
                format!(
                    "Linux version {} (cordon) {}\n",
                    crate::kernel::kernel_release(),
                    crate::kernel::KERNEL_VERSION
                )
                .into_bytes(),
            ),
            "meminfo" => {
                let total = k.mf.capacity() / 1024;
                let used = k.mf.stats().frames_in_use * 4;
                let free = total.saturating_sub(used);
                Some(
                    format!(
                        "MemTotal:       {total:8} kB\nMemFree:        {free:8} kB\nMemAvailable:   {free:8} kB\n\
                         Buffers:               0 kB\nCached:                0 kB\nSwapCached:            0 kB\n\
                         SwapTotal:             0 kB\nSwapFree:              0 kB\nShmem:                 0 kB\n"
                    )
                    .into_bytes(),
                )
            }
            "cpuinfo" => Some(cpuinfo().into_bytes()),
            "stat" => {
                let cpus = online_cpus();
                let mut s = String::from("cpu  0 0 0 0 0 0 0 0 0 0\n");
                for c in 0..cpus {
                    let _ = writeln!(s, "cpu{c} 0 0 0 0 0 0 0 0 0 0");
                }
                let boot = crate::fs::synthetic::boot_time().sec;
                let _ = write!(
                    s,
                    "intr 0\nctxt 0\nbtime {boot}\nprocesses {}\nprocs_running 1\nprocs_blocked 0\n",
                    k.procs.lock().unwrap().pids().len()
                );
                Some(s.into_bytes())
            }
            _ => None,
        }
    }
}

/// CPUs the sandbox may run on.
pub fn online_cpus() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// /proc/cpuinfo from CPUID, one block per CPU.
fn cpuinfo() -> String {
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
    let cpus = online_cpus();
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
                Some(d) => d.path(),
                None => n.path.into_bytes(),
            };
            (*offset, n.dev, n.ino, shown)
        }
        _ => (0, 0, 0, Vec::new()),
    };
    let name = match v.role {
        Role::Heap => b"[heap]".to_vec(),
        Role::Stack => b"[stack]".to_vec(),
        Role::Plain => name,
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
