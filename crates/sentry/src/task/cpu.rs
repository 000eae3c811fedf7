//! CPU time of threads and processes: what the host counted for the host
//! thread that runs a task (the application's code on kvm, where that
//! thread runs the vCPU, and the sentry's handling of its calls and faults
//! on every platform) plus what the platform counted elsewhere (the stub
//! thread on trap).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use platform::CpuClock;

use super::{TaskShared, ThreadGroup};

/// Where a running task's CPU time is read.
pub struct CpuSource {
    /// The CPU clock of the task's host thread.
    host: libc::clockid_t,
    platform: Arc<dyn CpuClock>,
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

    /// The task ends: its CPU time is kept as it stands now (returned, in
    /// nanoseconds), and no longer read from its host thread.
    pub(super) fn stop_cpu_clock(&self) -> u64 {
        let mut src = self.cpu_source.lock().unwrap();
        let total =
            src.as_ref().map_or(Duration::ZERO, |s| host_clock(s.host).unwrap_or_default() + s.platform.consumed());
        let ns = total.as_nanos() as u64;
        self.cpu_ns.store(ns, Ordering::Relaxed);
        *src = None;
        ns
    }

    /// CPU time the thread has used.
    pub fn cpu_time(&self) -> Duration {
        // The source is read under its lock, which the thread holds to
        // drop it before it ends: its host clock is never another's.
        let src = self.cpu_source.lock().unwrap();
        match src.as_ref().and_then(|s| Some(host_clock(s.host)? + s.platform.consumed())) {
            Some(t) => t,
            None => Duration::from_nanos(self.cpu_ns.load(Ordering::Relaxed)),
        }
    }
}

impl ThreadGroup {
    /// CPU time the process has used: its live threads' and its exited
    /// threads'.
    pub fn cpu_time(&self) -> Duration {
        // A thread that exits after this snapshot is summed from its own
        // record, which keeps its time when it stops.
        let (threads, dead_ns) = {
            let _moving = self.cpu_accounting.lock().unwrap();
            let threads: Vec<Arc<TaskShared>> = self.threads.lock().unwrap().clone();
            (threads, self.state.lock().unwrap().dead_threads_ns)
        };
        let live: Duration = threads.iter().map(|t| t.cpu_time()).sum();
        live + Duration::from_nanos(dead_ns)
    }

    /// CPU time of the children the process has reaped, theirs included.
    pub fn children_cpu_time(&self) -> Duration {
        Duration::from_nanos(self.state.lock().unwrap().children_ns)
    }
}
