//! The kernel: state shared by every task of one sandbox.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use memory::MemoryFile;
use platform::Platform;

use crate::fs::dentry::MountTable;
use crate::fs::{Dentry, Mount};
use crate::loader::AuxFacts;
use crate::stats::Stats;
use crate::task::ProcessTable;

/// How the sandbox was configured.
#[derive(Clone, Debug)]
pub struct KernelConfig {
    /// Host directory that is the sandbox's `/`.
    pub rootfs: PathBuf,
    /// Print one line per syscall to stderr.
    pub strace: bool,
    /// Host name the sandbox reports.
    pub hostname: String,
}

/// Everything tasks share.
pub struct Kernel {
    pub platform: Arc<dyn Platform>,
    pub mf: Arc<MemoryFile>,
    pub mounts: MountTable,
    /// The sandbox's `/`.
    pub root: Arc<Dentry>,
    pub config: KernelConfig,
    pub facts: AuxFacts,
    pub started: Instant,
    pub stats: Stats,
    pub processes: ProcessTable,
    next_tid: AtomicI32,
    reported: Mutex<HashSet<u64>>,
}

impl Kernel {
    pub fn new(
        platform: Arc<dyn Platform>,
        mf: Arc<MemoryFile>,
        root_mount: Arc<Mount>,
        config: KernelConfig,
        facts: AuxFacts,
    ) -> Kernel {
        Kernel {
            platform,
            mf,
            mounts: MountTable::default(),
            root: Dentry::root(root_mount),
            config,
            facts,
            started: Instant::now(),
            stats: Stats::default(),
            processes: ProcessTable::default(),
            next_tid: AtomicI32::new(1),
            reported: Mutex::new(HashSet::new()),
        }
    }

    /// A new thread id (also the pid of a new process).
    pub fn allocate_tid(&self) -> i32 {
        self.next_tid.fetch_add(1, Ordering::Relaxed)
    }

    /// Reports an unsupported system call on stderr, once per number.
    pub fn report_unsupported(&self, nr: u64, name: &str) {
        if self.reported.lock().unwrap().insert(nr) {
            eprintln!("cordon: unsupported system call {name} ({nr}), returning ENOSYS");
        }
    }
}

/// Kernel handle shared by tasks.
pub type KernelRef = Arc<Kernel>;
