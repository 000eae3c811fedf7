//! CPU time of threads and processes, split as Linux splits it: user
//! time is the application's code (what the platform counted running it:
//! the vCPU on kvm, the stub thread on trap), system time the sentry's
//! work for the task (its calls and faults), the rest of the host CPU
//! clock of the thread that runs the task.

use std::ops::{Add, AddAssign};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use platform::CpuClock;

use super::{TaskShared, ThreadGroup};

/// CPU time split into user and system time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTimes {
    pub user: Duration,
    pub system: Duration,
}

impl CpuTimes {
    /// Both together: what the CPU clocks read.
    pub fn total(&self) -> Duration {
        self.user + self.system
    }
}

impl Add for CpuTimes {
    type Output = CpuTimes;
    fn add(self, o: CpuTimes) -> CpuTimes {
        CpuTimes { user: self.user + o.user, system: self.system + o.system }
    }
}

impl AddAssign for CpuTimes {
    fn add_assign(&mut self, o: CpuTimes) {
        *self = *self + o;
    }
}

impl std::iter::Sum for CpuTimes {
    fn sum<I: Iterator<Item = CpuTimes>>(iter: I) -> CpuTimes {
        iter.fold(CpuTimes::default(), Add::add)
    }
}

/// Where a running task's CPU time is read.
pub struct CpuSource {
    /// The CPU clock of the task's host thread.
    host: libc::clockid_t,
    platform: Arc<dyn CpuClock>,
}

impl CpuSource {
    fn read(&self) -> Option<CpuTimes> {
        let host = host_clock(self.host)?;
        let app = self.platform.consumed();
        Some(if self.platform.on_calling_thread() {
            // Read after the host clock, so it may be slightly ahead.
            CpuTimes { user: app.min(host), system: host.saturating_sub(app) }
        } else {
            CpuTimes { user: app, system: host }
        })
    }
}

/// The time on a host CPU clock of the sentry's own threads.
fn host_clock(id: libc::clockid_t) -> Option<Duration> {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: writes only `t`; a clock of a thread that ended fails.
    let r = unsafe { libc::clock_gettime(id, &mut t) };
    (r == 0).then(|| Duration::new(t.tv_sec as u64, t.tv_nsec as u32))
}

impl TaskShared {
    /// Starts reading the task's CPU time from the calling host thread,
    /// which runs it, and from `platform`.
    pub(super) fn start_cpu_clock(&self, platform: Arc<dyn CpuClock>) {
        let mut host: libc::clockid_t = 0;
        // SAFETY: asks for the calling thread's own clock id, written to
        // `host`.
        if unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut host) } != 0 {
            return;
        }
        *self.cpu_source.lock().unwrap() = Some(CpuSource { host, platform });
    }

    /// The task ends: its CPU time is kept as it stands now (returned),
    /// and no longer read from its host thread.
    pub(super) fn stop_cpu_clock(&self) -> CpuTimes {
        let mut src = self.cpu_source.lock().unwrap();
        let t = src.as_ref().and_then(CpuSource::read).unwrap_or_default();
        self.cpu_user_ns.store(t.user.as_nanos() as u64, Ordering::Relaxed);
        self.cpu_system_ns.store(t.system.as_nanos() as u64, Ordering::Relaxed);
        *src = None;
        t
    }

    /// CPU time the thread has used, user and system.
    pub fn cpu_times(&self) -> CpuTimes {
        // The source is read under its lock, which the thread holds to
        // drop it before it ends: its host clock is never another's.
        let src = self.cpu_source.lock().unwrap();
        match src.as_ref().and_then(CpuSource::read) {
            Some(t) => t,
            None => CpuTimes {
                user: Duration::from_nanos(self.cpu_user_ns.load(Ordering::Relaxed)),
                system: Duration::from_nanos(self.cpu_system_ns.load(Ordering::Relaxed)),
            },
        }
    }

    /// CPU time the thread has used, all of it.
    pub fn cpu_time(&self) -> Duration {
        self.cpu_times().total()
    }
}

impl ThreadGroup {
    /// CPU time the process has used: its live threads' and its exited
    /// threads'.
    pub fn cpu_times(&self) -> CpuTimes {
        // A thread that exits after this snapshot is summed from its own
        // record, which keeps its time when it stops.
        let (threads, dead) = {
            let _moving = self.cpu_accounting.lock().unwrap();
            let threads: Vec<Arc<TaskShared>> = self.threads.lock().unwrap().clone();
            (threads, self.state.lock().unwrap().dead_threads_cpu)
        };
        let live: CpuTimes = threads.iter().map(|t| t.cpu_times()).sum();
        live + dead
    }

    /// CPU time the process has used, all of it.
    pub fn cpu_time(&self) -> Duration {
        self.cpu_times().total()
    }

    /// CPU time of the children the process has reaped, theirs included.
    pub fn children_cpu_times(&self) -> CpuTimes {
        self.state.lock().unwrap().children_cpu
    }

    /// All of the children's CPU time.
    pub fn children_cpu_time(&self) -> Duration {
        self.children_cpu_times().total()
    }
}
