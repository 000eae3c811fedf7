//! Tasks (threads) and thread groups (processes).
//!
//! Each task runs on a host thread of its own and holds a platform context
//! while it runs application code; the run loop turns the platform's events
//! into system calls, resolved faults and signals.

pub mod exec;
mod proc_source;
mod run;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};

use linux_raw_sys::general as g;
use platform::{Context, Registers};

pub use proc_source::{KernelProcSource, online_cpus};
pub use run::run_task;

use crate::fd::FdTable;
use crate::fs::{Dentry, Resolver};
use crate::kernel::Kernel;
use crate::mm::MemoryManager;
use crate::signal::{SigHandlers, SigSet};

/// How a process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitStatus {
    Exited(u8),
    Signaled { signal: u32, core: bool },
}

impl ExitStatus {
    /// The status as a shell reports it: the code, or 128 + signal.
    pub fn shell_code(self) -> i32 {
        match self {
            ExitStatus::Exited(c) => c as i32,
            ExitStatus::Signaled { signal, .. } => 128 + signal as i32,
        }
    }

    /// The wait(2) status word.
    pub fn wait_status(self) -> i32 {
        match self {
            ExitStatus::Exited(c) => (c as i32) << 8,
            ExitStatus::Signaled { signal, core } => signal as i32 | if core { 0x80 } else { 0 },
        }
    }
}

/// Root, working directory and umask (shared by CLONE_FS).
#[derive(Clone)]
pub struct FsContext {
    pub root: Arc<Dentry>,
    pub cwd: Arc<Dentry>,
    pub umask: u32,
}

/// One resource limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rlimit {
    pub cur: u64,
    pub max: u64,
}

/// RLIM_INFINITY.
pub const RLIM_INFINITY: u64 = u64::MAX;

/// Resource limits of a process, indexed by RLIMIT_*.
#[derive(Clone, Debug)]
pub struct Rlimits(pub [Rlimit; 16]);

impl Default for Rlimits {
    fn default() -> Self {
        let inf = Rlimit { cur: RLIM_INFINITY, max: RLIM_INFINITY };
        let mut l = [inf; 16];
        l[g::RLIMIT_STACK as usize] = Rlimit { cur: 8 << 20, max: RLIM_INFINITY };
        l[g::RLIMIT_CORE as usize] = Rlimit { cur: 0, max: RLIM_INFINITY };
        l[g::RLIMIT_NOFILE as usize] = Rlimit { cur: 1024, max: 524288 };
        l[g::RLIMIT_MEMLOCK as usize] = Rlimit { cur: 8 << 20, max: 8 << 20 };
        l[g::RLIMIT_NPROC as usize] = Rlimit { cur: 65536, max: 65536 };
        l[g::RLIMIT_SIGPENDING as usize] = Rlimit { cur: 65536, max: 65536 };
        l[g::RLIMIT_MSGQUEUE as usize] = Rlimit { cur: 819200, max: 819200 };
        l[g::RLIMIT_NICE as usize] = Rlimit { cur: 0, max: 0 };
        l[g::RLIMIT_RTPRIO as usize] = Rlimit { cur: 0, max: 0 };
        Rlimits(l)
    }
}

/// What /proc shows of a process.
#[derive(Clone, Default)]
pub struct ProcessInfo {
    pub exe: Option<Arc<Dentry>>,
    pub argv: Vec<Vec<u8>>,
    pub envp: Vec<Vec<u8>>,
    pub auxv: Vec<(u64, u64)>,
    /// Thread name (prctl PR_SET_NAME, at most 15 bytes).
    pub comm: Vec<u8>,
}

/// The resources of a process's leader, for /proc.
#[derive(Clone)]
pub struct ProcessView {
    pub mm: Arc<MemoryManager>,
    pub fs: Arc<Mutex<FsContext>>,
    pub files: Arc<FdTable>,
}

/// A process.
pub struct ThreadGroup {
    pub tgid: i32,
    pub handlers: Mutex<SigHandlers>,
    pub info: Mutex<ProcessInfo>,
    pub rlimits: Mutex<Rlimits>,
    pub view: Mutex<Option<ProcessView>>,
    pub exit: Mutex<Option<ExitStatus>>,
}

impl ThreadGroup {
    pub fn new(tgid: i32) -> Arc<ThreadGroup> {
        Arc::new(ThreadGroup {
            tgid,
            handlers: Mutex::new(SigHandlers::default()),
            info: Mutex::new(ProcessInfo::default()),
            rlimits: Mutex::new(Rlimits::default()),
            view: Mutex::new(None),
            exit: Mutex::new(None),
        })
    }

    pub fn rlimit(&self, resource: u32) -> Rlimit {
        self.rlimits.lock().unwrap().0[resource as usize]
    }
}

/// Processes of the sandbox, for /proc and signals.
#[derive(Default)]
pub struct ProcessTable {
    groups: Mutex<BTreeMap<i32, Weak<ThreadGroup>>>,
}

impl ProcessTable {
    pub fn insert(&self, tg: &Arc<ThreadGroup>) {
        self.groups.lock().unwrap().insert(tg.tgid, Arc::downgrade(tg));
    }
    pub fn remove(&self, tgid: i32) {
        self.groups.lock().unwrap().remove(&tgid);
    }
    pub fn get(&self, tgid: i32) -> Option<Arc<ThreadGroup>> {
        self.groups.lock().unwrap().get(&tgid).and_then(Weak::upgrade)
    }
    pub fn pids(&self) -> Vec<i32> {
        self.groups.lock().unwrap().iter().filter(|(_, w)| w.strong_count() > 0).map(|(k, _)| *k).collect()
    }
}

/// A thread of the sandbox, owned by the host thread that runs it.
pub struct Task {
    pub kernel: Arc<Kernel>,
    pub tid: i32,
    pub tg: Arc<ThreadGroup>,
    pub mm: Arc<MemoryManager>,
    pub fs: Arc<Mutex<FsContext>>,
    pub files: Arc<FdTable>,
    pub regs: Registers,
    pub ctx: Box<dyn Context>,
    pub signal_mask: SigSet,
    /// Alternate signal stack: (base, size, flags).
    pub altstack: (u64, u64, u32),
    /// set_tid_address: cleared and woken at thread exit.
    pub clear_child_tid: u64,
    /// set_robust_list: head and length.
    pub robust_list: (u64, u64),
    /// Set when the task must stop running.
    pub exit: Option<ExitStatus>,
}

impl Task {
    /// A snapshot of root and cwd.
    pub fn fs_context(&self) -> FsContext {
        self.fs.lock().unwrap().clone()
    }

    /// Runs `f` with a resolver for this task.
    pub fn with_resolver<R>(&self, f: impl FnOnce(&Resolver) -> R) -> R {
        let fsc = self.fs_context();
        let r = Resolver { root: &fsc.root, cwd: &fsc.cwd, mounts: &self.kernel.mounts };
        f(&r)
    }

    /// Ends the whole process with `status` (exit_group, fatal signals).
    pub fn exit_group(&mut self, status: ExitStatus) {
        let mut e = self.tg.exit.lock().unwrap();
        if e.is_none() {
            *e = Some(status);
        }
        self.exit = Some(e.expect("set"));
    }
}
