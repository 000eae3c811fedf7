//! The kernel: state shared by every task of one sandbox.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use memory::MemoryFile;
use platform::Platform;

use crate::fs::dentry::MountTable;
use crate::fs::{Dentry, Mount};
use crate::futex::Futexes;
use crate::loader::AuxFacts;
use crate::stats::Stats;
use crate::task::{ExitStatus, ProcessTree};
use crate::timers::Timers;
use crate::vdso::Clock;

impl Drop for Kernel {
    fn drop(&mut self) {
        self.timers.stop();
    }
}

/// The kernel version string the sandbox reports (uname's version,
/// /proc/version): the sentry's own, not the host's build.
pub const KERNEL_VERSION: &str = concat!("#1 SMP cordon ", env!("CARGO_PKG_VERSION"));

/// The kernel release the sandbox reports: the host's, a real release
/// number that programs checking for features can parse and trust, since
/// the sentry answers the system calls of the kernels they know.
pub fn kernel_release() -> String {
    rustix::system::uname().release().to_string_lossy().into_owned()
}

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
    pub procs: Mutex<ProcessTree>,
    pub futexes: Futexes,
    pub timers: Arc<Timers>,
    /// The clocks applications read, through the vDSO or by syscall.
    pub clock: Arc<Clock>,
    next_tid: AtomicI32,
    reported: Mutex<HashSet<u64>>,
    host_threads: Mutex<Vec<JoinHandle<()>>>,
    /// Host threads running tasks right now.
    live_threads: AtomicU64,
    init_status: Mutex<Option<ExitStatus>>,
    init_done: Condvar,
}

impl Kernel {
    pub fn new(
        platform: Arc<dyn Platform>,
        mf: Arc<MemoryFile>,
        root_mount: Arc<Mount>,
        config: KernelConfig,
        facts: AuxFacts,
        clock: Arc<Clock>,
    ) -> Arc<Kernel> {
        let k = Arc::new(Kernel {
            platform,
            mf,
            mounts: MountTable::default(),
            root: Dentry::root(root_mount),
            config,
            facts,
            started: Instant::now(),
            stats: Stats::default(),
            procs: Mutex::new(ProcessTree::default()),
            futexes: Futexes::default(),
            timers: Arc::new(Timers::default()),
            clock,
            next_tid: AtomicI32::new(1),
            reported: Mutex::new(HashSet::new()),
            host_threads: Mutex::new(Vec::new()),
            live_threads: AtomicU64::new(0),
            init_status: Mutex::new(None),
            init_done: Condvar::new(),
        });
        k.timers.start(Arc::downgrade(&k));
        k.clock.start();
        k
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

    /// Runs a task on a new host thread.
    pub fn spawn_task_thread(self: &Arc<Self>, tid: i32, f: impl FnOnce() + Send + 'static) {
        let k = self.clone();
        k.live_threads.fetch_add(1, Ordering::AcqRel);
        let h = std::thread::Builder::new()
            .name(format!("task-{tid}"))
            .spawn(move || {
                f();
                k.live_threads.fetch_sub(1, Ordering::AcqRel);
            })
            .expect("spawn a task thread");
        let mut hs = self.host_threads.lock().unwrap();
        hs.retain(|h| !h.is_finished());
        hs.push(h);
    }

    /// Host threads running tasks.
    pub fn live_task_threads(&self) -> u64 {
        self.live_threads.load(Ordering::Acquire)
    }

    /// The first process has exited: the sandbox ends.
    pub fn init_exited(&self, status: ExitStatus) {
        *self.init_status.lock().unwrap() = Some(status);
        self.init_done.notify_all();
    }

    /// Waits for the first process to exit.
    pub fn wait_init(&self) -> ExitStatus {
        let mut s = self.init_status.lock().unwrap();
        loop {
            if let Some(st) = *s {
                return st;
            }
            s = self.init_done.wait(s).unwrap();
        }
    }

    /// Kills every remaining task and waits until their host threads are
    /// gone, then stops the timer thread.
    pub fn shutdown(&self) {
        loop {
            let groups = self.procs.lock().unwrap().processes();
            for g in &groups {
                crate::task::group_exit(
                    g,
                    ExitStatus::Signaled { signal: linux_raw_sys::general::SIGKILL, core: false },
                );
            }
            let handles: Vec<_> = std::mem::take(&mut *self.host_threads.lock().unwrap());
            if handles.is_empty() && self.live_task_threads() == 0 {
                break;
            }
            for h in handles {
                let _ = h.join();
            }
        }
        self.timers.stop();
        self.clock.stop();
        // What remains cached is not in use by anyone: release it so the
        // account of memory at exit shows only what is live.
        self.root.inode.release_caches();
        self.platform.release_cached();
        self.mf.reclaim();
    }
}
