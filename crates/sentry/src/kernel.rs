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
    /// Rewrite system call sites where the platform gains from it.
    pub rewrite_sites: bool,
    /// Host name the sandbox reports at first.
    pub hostname: String,
    /// CPUs the sandbox shows its programs (`--cpus`, else the host's):
    /// what sched_getaffinity, /proc/cpuinfo and /sys count.
    pub cpus: usize,
    /// `--cpus`, which the sandbox's cgroup shows as its CPU quota.
    pub cpu_limit: Option<u32>,
    /// This sandbox's /proc/sys/kernel/random/boot_id.
    pub boot_id: [u8; 16],
    /// For cordon's own tests: system call [`TEST_PANIC_SYSCALL`] panics
    /// in the sentry, as a bug would.
    ///
    /// [`TEST_PANIC_SYSCALL`]: crate::syscalls::TEST_PANIC_SYSCALL
    pub test_panic_syscall: bool,
    /// `--network`.
    pub network: crate::net::NetworkMode,
}

/// Everything tasks share.
pub struct Kernel {
    pub platform: Arc<dyn Platform>,
    pub mf: Arc<MemoryFile>,
    pub mounts: MountTable,
    /// The sandbox's `/`.
    pub root: Arc<Dentry>,
    /// The root of /dev, for mounting it again (devtmpfs is one instance).
    pub devfs: std::sync::OnceLock<Arc<dyn crate::fs::Inode>>,
    /// The sandbox's ptys, which /dev/tty and /dev/ptmx nodes open.
    pub devpts: std::sync::OnceLock<Arc<crate::tty::Devpts>>,
    /// The host's files as the sandbox reaches them: the roots and bind
    /// mounts of containers that join the sandbox later come from it too,
    /// so their files have the same numbers.
    pub hostfs: std::sync::OnceLock<Arc<crate::fs::host::HostFs>>,
    /// The unmounted tmpfs memfds live in (Linux's shm_mnt).
    pub memfd_root: Arc<Dentry>,
    pub config: KernelConfig,
    /// The host name uname reports; sethostname changes it.
    pub hostname: Mutex<Vec<u8>>,
    pub facts: AuxFacts,
    pub started: Instant,
    pub stats: Stats,
    pub procs: Mutex<ProcessTree>,
    /// Counts the exits that gave children a new parent: a task that read
    /// its parent at another count reads it again.
    pub reparents: AtomicU64,
    pub futexes: Futexes,
    pub timers: Arc<Timers>,
    /// The clocks applications read, through the vDSO or by syscall.
    pub clock: Arc<Clock>,
    /// The sandbox's sockets and network.
    pub net: Arc<crate::net::Network>,
    /// The sandbox's System V IPC objects.
    pub ipc: crate::ipc::IpcNamespace,
    /// Processes killed for want of memory.
    pub oom_kills: OomKills,
    next_tid: AtomicI32,
    reported: Mutex<HashSet<u64>>,
    host_threads: Mutex<Vec<JoinHandle<()>>>,
    /// Host threads running tasks right now; `threads_gone` is notified
    /// when the count reaches zero.
    live_threads: Mutex<u64>,
    threads_gone: Condvar,
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
        let mounts = MountTable::default();
        mounts.set_root(root_mount.clone());
        let k = Arc::new(Kernel {
            platform,
            mf: mf.clone(),
            mounts,
            root: Dentry::root(root_mount),
            devfs: std::sync::OnceLock::new(),
            devpts: std::sync::OnceLock::new(),
            hostfs: std::sync::OnceLock::new(),
            memfd_root: Dentry::root(crate::fs::Mount::new(
                "tmpfs",
                "memfd",
                false,
                crate::fs::tmpfs::Tmpfs::new_root(mf.clone(), 0o1777, 0, 0, None),
            )),
            hostname: Mutex::new(config.hostname.as_bytes().to_vec()),
            net: crate::net::Network::new(config.network, mf.clone()),
            ipc: crate::ipc::IpcNamespace::new(mf.clone()),
            config,
            facts,
            started: Instant::now(),
            stats: Stats::default(),
            procs: Mutex::new(ProcessTree::default()),
            reparents: AtomicU64::new(0),
            oom_kills: OomKills::default(),
            futexes: Futexes::default(),
            timers: Arc::new(Timers::default()),
            clock,
            next_tid: AtomicI32::new(1),
            reported: Mutex::new(HashSet::new()),
            host_threads: Mutex::new(Vec::new()),
            live_threads: Mutex::new(0),
            threads_gone: Condvar::new(),
            init_status: Mutex::new(None),
            init_done: Condvar::new(),
        });
        // The zero page is part of the sandbox's fixed state from the start
        // (were memory too short even for it, the first read of untouched
        // memory tries again).
        let _ = k.mf.zero_frame();
        k
    }

    /// Starts the kernel's own host threads (timers, the clock). Apart from
    /// `new`: the sentry confines itself in between, while it has a single
    /// thread.
    pub fn start_services(self: &Arc<Self>) {
        self.timers.start(Arc::downgrade(self));
        self.clock.start();
    }

    /// Thread ids handed out so far: every clone since the sandbox started
    /// (/proc/stat's `processes`, /proc/loadavg's last pid).
    pub fn tids_allocated(&self) -> i32 {
        self.next_tid.load(Ordering::Relaxed) - 1
    }

    /// A new thread id (also the pid of a new process).
    pub fn allocate_tid(&self) -> i32 {
        self.next_tid.fetch_add(1, Ordering::Relaxed)
    }

    /// Reports an unsupported system call to cordon's log, once per
    /// number: never on the application's streams, where it would change
    /// the program's output. `--debug` or `--log FILE` show the log,
    /// `--strace` the call itself and `--profile` how often it was made.
    pub fn report_unsupported(&self, nr: u64, name: &str) {
        // Numbers past any Linux has are one entry, so that a program
        // trying every number cannot grow the set.
        if self.reported.lock().unwrap().insert(nr.min(crate::stats::MAX_NR as u64)) {
            tracing::warn!("unsupported system call {name} ({nr}), returning ENOSYS");
        }
    }

    /// Makes the host thread a task will run on, parked until
    /// [`TaskThread::start`]. Made before the task joins the process tree,
    /// so a host that refuses a thread fails the clone (EAGAIN) with
    /// nothing to undo.
    pub fn new_task_thread(self: &Arc<Self>, tid: i32) -> std::io::Result<TaskThread> {
        /// Counts a task thread for as long as its closure lives, however
        /// the task body ends.
        struct LiveThread(Arc<Kernel>);
        impl Drop for LiveThread {
            fn drop(&mut self) {
                let mut n = self.0.live_threads.lock().unwrap();
                *n -= 1;
                if *n == 0 {
                    self.0.threads_gone.notify_all();
                }
            }
        }
        let (start, body) = std::sync::mpsc::sync_channel::<TaskBody>(1);
        *self.live_threads.lock().unwrap() += 1;
        let live = LiveThread(self.clone());
        let h = std::thread::Builder::new().name(format!("task-{tid}")).spawn(move || {
            let _live = live;
            // A dropped TaskThread ends the thread without running anything.
            if let Ok(f) = body.recv() {
                f();
            }
        })?;
        let mut hs = self.host_threads.lock().unwrap();
        hs.retain(|h| !h.is_finished());
        hs.push(h);
        Ok(TaskThread { start })
    }

    /// Host threads running tasks.
    pub fn live_task_threads(&self) -> u64 {
        *self.live_threads.lock().unwrap()
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
        // From here on no task is created (clone fails, as fork does in a
        // PID namespace whose init has died), so killing every task there
        // is now kills every task there will be.
        let groups = {
            let mut tree = self.procs.lock().unwrap();
            tree.close();
            tree.processes()
        };
        for g in &groups {
            crate::task::group_exit(g, ExitStatus::Signaled { signal: linux_raw_sys::general::SIGKILL, core: false });
        }
        // A thread is spawned only by a live one (or before the first
        // process runs), so once none is live, every handle is here.
        {
            let mut n = self.live_threads.lock().unwrap();
            while *n > 0 {
                n = self.threads_gone.wait(n).unwrap();
            }
        }
        for h in std::mem::take(&mut *self.host_threads.lock().unwrap()) {
            let _ = h.join();
        }
        self.timers.stop();
        self.clock.stop();
        // What remains cached is not in use by anyone: release it so the
        // account of memory at exit shows only what is live.
        crate::fs::dentry::release_recent();
        self.root.inode.release_caches();
        self.platform.release_cached();
        self.mf.reclaim();
    }
}

type TaskBody = Box<dyn FnOnce() + Send>;

/// A host thread waiting for the task it was made for.
pub struct TaskThread {
    start: std::sync::mpsc::SyncSender<TaskBody>,
}

impl TaskThread {
    /// Runs `f` (the task's body) on the thread.
    pub fn start(self, f: impl FnOnce() + Send + 'static) {
        // The thread holds the receiver until it has taken the body.
        let _ = self.start.send(Box::new(f));
    }
}

/// The count of processes killed for want of memory (the sandbox's OOM
/// killer), which a runtime's `events` waits on to report each.
#[derive(Default)]
pub struct OomKills {
    count: Mutex<u64>,
    changed: std::sync::Condvar,
}

impl OomKills {
    pub fn record(&self) {
        *self.count.lock().unwrap() += 1;
        self.changed.notify_all();
    }

    pub fn count(&self) -> u64 {
        *self.count.lock().unwrap()
    }

    /// Waits at most `limit` for the count to pass `seen`; the count then.
    pub fn wait_past(&self, seen: u64, limit: std::time::Duration) -> u64 {
        let count = self.count.lock().unwrap();
        let (count, _) = self.changed.wait_timeout_while(count, limit, |c| *c <= seen).unwrap();
        *count
    }
}

#[cfg(test)]
mod oom_kills_tests {
    use super::OomKills;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn a_waiter_sees_each_kill_past_what_it_saw() {
        let kills = Arc::new(OomKills::default());
        assert_eq!(kills.wait_past(0, Duration::from_millis(1)), 0, "nothing to see: the wait times out");
        let waiter = {
            let kills = kills.clone();
            std::thread::spawn(move || kills.wait_past(0, Duration::from_secs(600)))
        };
        kills.record();
        assert_eq!(waiter.join().unwrap(), 1);
        kills.record();
        assert_eq!(kills.count(), 2);
        assert_eq!(kills.wait_past(1, Duration::from_secs(600)), 2, "already past: no wait");
    }
}
