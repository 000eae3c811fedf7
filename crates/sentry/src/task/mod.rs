//! Tasks (threads), thread groups (processes) and the process tree.
//!
//! Each task runs on a host thread of its own and holds a platform context
//! while it runs application code; the run loop turns the platform's events
//! into system calls, resolved faults and signals. What other tasks may
//! touch (signal state, the waiter, the kill flag) lives in [`TaskShared`].

mod block;
mod clone;
mod cpu;
pub use cpu::CpuTimes;
pub mod exec;
mod exit;
pub mod mounts;
pub mod pidfd;
mod proc_source;
pub mod ptrace;
pub use ptrace::may_access;
mod run;
pub mod signalfd;
mod signals;
mod tree;
mod wait;

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use linux_raw_sys::general as g;
use platform::{Context, Interrupter, Registers};

pub use crate::auth::Creds;
pub use crate::waiter::{BlockError, Blocker, WaitQueue, Waiter, block_on};
pub use block::{current, current_opt};
pub use clone::{CloneArgs, clone_task};
pub use exit::{ExitKind, INIT_PID};
pub use proc_source::{KernelProcSource, KernelSysSource, PID_MAX, host_cpus, random_bytes};
pub use run::{RestartBlock, current_tgid, run_task};
pub use signals::{
    group_exit, notify_parent, queue_to_group, queue_to_thread, send_to_group, send_to_thread, take_signal,
};
pub use tree::ProcessTree;
pub use wait::{WaitFor, WaitOptions, WaitOutcome, wait_child};

use crate::fd::FdTable;
use crate::fs::{Dentry, Resolver};
use crate::kernel::Kernel;
use crate::mm::MemoryManager;
use crate::signal::{SigHandlers, SigQueue, SigSet, SignalAccount};

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

    /// si_code and si_status of the SIGCHLD/waitid report.
    pub fn child_code(self) -> (i32, i32) {
        match self {
            ExitStatus::Exited(c) => (g::CLD_EXITED as i32, c as i32),
            ExitStatus::Signaled { signal, core: false } => (g::CLD_KILLED as i32, signal as i32),
            ExitStatus::Signaled { signal, core: true } => (g::CLD_DUMPED as i32, signal as i32),
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
#[derive(Clone)]
pub struct ProcessInfo {
    pub exe: Option<Arc<Dentry>>,
    pub argv: Vec<Vec<u8>>,
    pub envp: Vec<Vec<u8>>,
    pub auxv: Vec<(u64, u64)>,
    /// Name of the main thread (prctl PR_SET_NAME, at most 15 bytes).
    pub comm: Vec<u8>,
    /// /proc/PID/oom_score_adj and coredump_filter: kept across fork and
    /// execve, as Linux keeps them.
    pub oom_score_adj: i32,
    pub coredump_filter: u32,
    /// When the process was made (/proc/PID/stat's starttime).
    pub started: std::time::Instant,
}

impl Default for ProcessInfo {
    fn default() -> Self {
        ProcessInfo {
            exe: None,
            argv: Vec::new(),
            envp: Vec::new(),
            auxv: Vec::new(),
            comm: Vec::new(),
            oom_score_adj: 0,
            // Linux's MMF_DUMP_FILTER_DEFAULT.
            coredump_filter: 0x33,
            started: std::time::Instant::now(),
        }
    }
}

/// The resources of a process's leader, for /proc.
#[derive(Clone)]
pub struct ProcessView {
    pub mm: Arc<MemoryManager>,
    pub fs: Arc<Mutex<FsContext>>,
    pub files: Arc<FdTable>,
}

/// A thread's own signal state.
#[derive(Default)]
pub struct ThreadSignals {
    pub mask: SigSet,
    pub pending: SigQueue,
    /// The mask to restore when the current call (sigsuspend, ppoll,
    /// pselect) returns or its signal handler returns.
    pub saved_mask: Option<SigSet>,
    /// Linux's TIF_SIGPENDING: this thread has a signal to take, of its own
    /// or chosen for it among its process's. A thread takes signals (and
    /// a blocking call of it is interrupted) only while this is set.
    pub sigpending: bool,
    /// While in sigtimedwait: the mask from before the wait unblocked the
    /// awaited signals (Linux's real_blocked). A signal in it is waited
    /// for, so even one that would kill is left for the wait to take.
    pub real_blocked: SigSet,
}

/// The part of a task other tasks reach.
pub struct TaskShared {
    tid: AtomicI32,
    pub tg: Arc<ThreadGroup>,
    pub sig: Mutex<ThreadSignals>,
    pub waiter: Arc<Waiter>,
    interrupter: Mutex<Option<Arc<dyn Interrupter>>>,
    /// The task must exit at its next chance (group exit, SIGKILL, exec of
    /// another thread).
    killed: AtomicBool,
    /// CPU time the task used (user, system), recorded when it exits.
    pub cpu_user_ns: AtomicU64,
    pub cpu_system_ns: AtomicU64,
    /// Where its CPU time is read while it runs.
    cpu_source: Mutex<Option<cpu::CpuSource>>,
    /// The thread's name (PR_SET_NAME, at most 15 bytes).
    pub comm: Mutex<Vec<u8>>,
    /// PR_SET_NO_NEW_PRIVS: set once, inherited by clone and kept by execve.
    pub no_new_privs: AtomicBool,
    /// The CPUs the thread may run on (sched_setaffinity), as the mask
    /// sched_getaffinity gives: inherited by clone, kept by execve.
    pub affinity: Mutex<Vec<u8>>,
    /// The scheduling attributes the thread asked for (sched_setattr,
    /// ioprio_set): kept and reported back; host threads are not
    /// rescheduled by them.
    pub sched: Mutex<SchedAttrs>,
    /// set_mempolicy's policy: inherited by clone, kept by execve.
    pub mempolicy: Mutex<MemPolicy>,
    /// The task's side of a ptrace relation.
    pub ptrace: Mutex<ptrace::PtraceState>,
    /// A PTRACE_EVENT_STOP is due (PTRACE_INTERRUPT, a seized child's
    /// first stop, the end of a PTRACE_LISTEN): cuts blocking calls short.
    pub trap_pending: AtomicBool,
}

/// A thread's memory policy on the sandbox's one node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemPolicy {
    /// MPOL_DEFAULT, MPOL_BIND, ...
    pub mode: u32,
    /// MPOL_F_STATIC_NODES, MPOL_F_RELATIVE_NODES, MPOL_F_NUMA_BALANCING.
    pub flags: u32,
    /// The first 64 nodes of the mask given (reported back for the
    /// static and relative flags, which keep the mask as given).
    pub user_mask: u64,
}

/// A thread's scheduling policy and its parameters, and its I/O priority.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SchedAttrs {
    /// SCHED_NORMAL, SCHED_FIFO, ...
    pub policy: u32,
    /// SCHED_FLAG_RESET_ON_FORK.
    pub reset_on_fork: bool,
    /// -20 to 19, for the fair policies.
    pub nice: i32,
    /// 1 to 99 for SCHED_FIFO and SCHED_RR, else 0.
    pub priority: u32,
    /// SCHED_DEADLINE's runtime, deadline and period, in ns.
    pub runtime: u64,
    pub deadline: u64,
    pub period: u64,
    /// ioprio_set's value; 0 (IOPRIO_CLASS_NONE) follows the nice value.
    pub ioprio: u32,
}

impl SchedAttrs {
    /// What a clone starts with: the parent's, but under
    /// SCHED_FLAG_RESET_ON_FORK a real-time or deadline policy becomes
    /// SCHED_NORMAL and a negative nice value 0, and the flag goes.
    pub fn for_child(&self) -> SchedAttrs {
        if !self.reset_on_fork {
            return *self;
        }
        let mut c = *self;
        if matches!(c.policy, 1 | 2 | 6) {
            c = SchedAttrs { ioprio: c.ioprio, ..SchedAttrs::default() };
        }
        c.nice = c.nice.max(0);
        c.reset_on_fork = false;
        c
    }
}

/// The affinity mask of a sandbox's `n` CPUs, in whole 64-bit words as
/// Linux's cpumask_size() gives it.
pub fn all_cpus_mask(n: usize) -> Vec<u8> {
    let mut m = vec![0u8; n.div_ceil(64) * 8];
    for c in 0..n {
        m[c / 8] |= 1 << (c % 8);
    }
    m
}

impl crate::waiter::Blocker for TaskShared {
    fn waiter(&self) -> &Arc<Waiter> {
        &self.waiter
    }
    fn interrupted(&self) -> bool {
        TaskShared::interrupted(self)
    }
}

impl crate::fs::Caller for TaskShared {
    fn send_signal(&self, sig: u32) {
        signals::raise_for(self, sig);
    }
    fn process_id(&self) -> i32 {
        self.tg.tgid
    }
}

impl TaskShared {
    pub fn new(tid: i32, tg: Arc<ThreadGroup>, mask: SigSet) -> Arc<TaskShared> {
        Arc::new(TaskShared {
            tid: AtomicI32::new(tid),
            tg,
            sig: Mutex::new(ThreadSignals { mask, ..Default::default() }),
            waiter: Waiter::new(),
            interrupter: Mutex::new(None),
            killed: AtomicBool::new(false),
            cpu_user_ns: AtomicU64::new(0),
            cpu_system_ns: AtomicU64::new(0),
            cpu_source: Mutex::new(None),
            comm: Mutex::new(Vec::new()),
            no_new_privs: AtomicBool::new(false),
            // The first task's is set by the sandbox, a clone's copied
            // from its parent.
            affinity: Mutex::new(Vec::new()),
            sched: Mutex::new(SchedAttrs::default()),
            mempolicy: Mutex::new(MemPolicy::default()),
            ptrace: Mutex::new(ptrace::PtraceState::default()),
            trap_pending: AtomicBool::new(false),
        })
    }

    pub fn tid(&self) -> i32 {
        self.tid.load(Ordering::Acquire)
    }

    pub(crate) fn set_tid(&self, tid: i32) {
        self.tid.store(tid, Ordering::Release)
    }

    pub fn set_interrupter(&self, i: Option<Arc<dyn Interrupter>>) {
        *self.interrupter.lock().unwrap() = i;
    }

    /// Gets the task's attention: wakes it if it sleeps in the sentry and
    /// stops it if it runs application code.
    pub fn notify(&self) {
        self.waiter.wake();
        if let Some(i) = self.interrupter.lock().unwrap().as_ref() {
            i.interrupt();
        }
    }

    /// Brings the task back from application code, if it runs any, so
    /// that it publishes its ids to the platform afresh: another thread
    /// changed what its getppid, getuid or sched_getaffinity answer.
    pub fn refresh_published_ids(&self) {
        if let Some(i) = self.interrupter.lock().unwrap().as_ref() {
            i.interrupt();
        }
    }

    /// Makes the task exit at its next chance.
    pub fn kill(&self) {
        self.killed.store(true, Ordering::Release);
        self.notify();
    }

    pub fn is_killed(&self) -> bool {
        self.killed.load(Ordering::Acquire)
    }

    /// True if a signal waits for this thread, or the task must stop or
    /// exit: what cuts a blocking call short.
    pub fn interrupted(&self) -> bool {
        if self.is_killed() || self.trap_pending.load(Ordering::Acquire) {
            return true;
        }
        let stop = {
            let st = self.tg.state.lock().unwrap();
            st.stop_pending().then_some(st.continues)
        };
        // A tracee its tracer resumed from the group stop runs on.
        if let Some(continues) = stop
            && self.ptrace.lock().unwrap().group_stop_done != Some(continues)
        {
            return true;
        }
        self.sig.lock().unwrap().sigpending
    }

    /// Linux's recalc_sigpending: the flag is set while a signal the thread
    /// does not block waits in its own queue or its process's.
    pub fn recalc_sigpending(&self) {
        let mut s = self.sig.lock().unwrap();
        let allowed = !s.mask.0;
        let shared = self.tg.shared_pending.lock().unwrap().pending().0;
        s.sigpending = (s.pending.pending().0 | shared) & allowed != 0;
    }

    /// Replaces the mask (see [`Task::set_signal_mask`]).
    pub fn set_mask(&self, mask: SigSet) {
        let (newly_blocked, had_pending) = {
            let mut s = self.sig.lock().unwrap();
            let new = mask.blockable();
            let newly = new.minus(s.mask);
            s.mask = new;
            (newly, s.sigpending)
        };
        if had_pending && !newly_blocked.is_empty() {
            signals::retarget_shared(self, newly_blocked);
        }
        self.recalc_sigpending();
    }

    /// Linux's signal_wake_up: the thread is to take a signal.
    pub fn signal_wake_up(&self) {
        self.sig.lock().unwrap().sigpending = true;
        self.notify();
    }

    /// A signal was just queued for this thread alone: wakes it if its
    /// mask lets `sig` through. The mask is read under the lock that
    /// changes it, after the signal is queued: a thread unblocking `sig`
    /// meanwhile either is seen unblocked here or sees the signal queued
    /// when it recounts what it has pending.
    pub fn wake_for_queued(&self, sig: u32) {
        let wake = {
            let mut s = self.sig.lock().unwrap();
            let wake = !s.mask.contains(sig);
            s.sigpending |= wake;
            wake
        };
        if wake {
            self.notify();
        }
    }
}

/// Job-control and exit state of a process.
#[derive(Debug, Default)]
pub struct GroupState {
    /// The process is exiting with this status (set once).
    pub exit: Option<ExitStatus>,
    /// Every thread is gone; the process waits to be reaped.
    pub zombie: bool,
    /// A stop signal took effect: the signal, until SIGCONT.
    pub stopped: Option<u32>,
    /// The stop was not yet reported to a waiting parent.
    pub stop_unreported: bool,
    /// A SIGCONT was not yet reported to a waiting parent (WCONTINUED).
    pub continue_unreported: bool,
    /// SIGCONTs sent so far: a stop signal taken before the latest one
    /// must not stop the process (Linux's JOBCTL_STOP_DEQUEUED).
    pub continues: u64,
    /// The signal the parent gets when this process dies.
    pub exit_signal: u32,
    /// The process has called execve (setpgid on it then fails).
    pub did_exec: bool,
    /// CPU time of threads that have exited, and of reaped children.
    pub dead_threads_cpu: cpu::CpuTimes,
    pub children_cpu: cpu::CpuTimes,
    /// Signal sent to this process when its parent dies (PR_SET_PDEATHSIG).
    pub pdeath_signal: u32,
    /// The thread of the parent that created this process (its parent
    /// "dies", for PR_SET_PDEATHSIG, when that thread exits); 0 if unknown.
    pub parent_thread: i32,
    /// PR_SET_CHILD_SUBREAPER: orphaned descendants come to this process
    /// rather than to the first one.
    pub child_subreaper: bool,
    /// PR_SET_DUMPABLE 0 (reset by execve).
    pub undumpable: bool,
    /// SIGKILL came, even after the process began to exit otherwise: it
    /// ends a tracee's stop on the way out.
    pub sigkilled: bool,
    /// The leader's own exit code, once it has exited while other
    /// threads run on: the process's status unless a group exit sets one.
    pub leader_exit_code: Option<u8>,
    /// A traced leader that exited before its other threads: its tracer
    /// collects it once the last of them is gone (Linux's
    /// delay_group_leader).
    pub delayed_leader: Option<DelayedLeader>,
}

/// A leader whose exit waits for its process's other threads.
pub struct DelayedLeader(pub Arc<TaskShared>);

impl std::fmt::Debug for DelayedLeader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DelayedLeader({})", self.0.tid())
    }
}

impl GroupState {
    /// True while threads must stop (or are stopped).
    pub fn stop_pending(&self) -> bool {
        self.stopped.is_some() && self.exit.is_none()
    }
}

/// A process.
pub struct ThreadGroup {
    pub tgid: i32,
    /// Signal dispositions; shared with processes cloned with CLONE_SIGHAND.
    pub handlers: Mutex<Arc<Mutex<SigHandlers>>>,
    /// Signals sent to the process as a whole.
    pub shared_pending: Mutex<SigQueue>,
    /// Where the siginfos queued for this process's threads are counted
    /// against RLIMIT_SIGPENDING (its user's account).
    pub signal_account: Arc<SignalAccount>,
    /// Live threads.
    pub threads: Mutex<Vec<Arc<TaskShared>>>,
    /// Held while a thread's time moves from the live threads to
    /// `dead_threads_cpu`, and while the process's time is summed, so that a
    /// sum counts an exiting thread once.
    pub(crate) cpu_accounting: Mutex<()>,
    pub state: Mutex<GroupState>,
    /// Woken when a child changes state (wait).
    pub child_events: WaitQueue,
    /// Woken when a thread of this process exits or the process stops or
    /// continues.
    pub thread_events: WaitQueue,
    pub info: Mutex<ProcessInfo>,
    pub rlimits: Mutex<Rlimits>,
    /// User and group ids and capabilities; replaced whole when they
    /// change, so a check holds one consistent identity.
    pub creds: Mutex<Arc<Creds>>,
    pub view: Mutex<Option<ProcessView>>,
    /// The thread that took the last process-wide signal no thread in
    /// particular was the best for (Linux's curr_target).
    pub curr_target: AtomicI32,
    /// The membarrier registrations of the process's memory (the
    /// MEMBARRIER_CMD_REGISTER_* bits): dropped by execve.
    pub membarrier_registrations: AtomicU32,
    /// The memory's one protection key slot is spent (see
    /// `syscalls::mm::pkey_alloc`): copied by fork, reset by execve.
    pub pkey_slot_spent: AtomicBool,
    /// The serial of the process's session keyring (0 until one is
    /// wanted): inherited by fork, kept by execve.
    pub session_keyring: AtomicI32,
    /// The tasks this process traces, dead ones not yet collected included.
    pub tracees: Mutex<Vec<Arc<TaskShared>>>,
    /// personality(2)'s persona: kept across fork and execve.
    pub personality: AtomicU32,
    /// Which of the sandbox's containers the process belongs to (0: the
    /// first; a pod's others are numbered as they join): inherited by
    /// fork, so that a container's processes are found, signalled and
    /// ended together.
    pub container: AtomicU32,
}

impl ThreadGroup {
    pub fn new(
        tgid: i32,
        handlers: Arc<Mutex<SigHandlers>>,
        exit_signal: u32,
        signal_account: Arc<SignalAccount>,
        creds: Arc<Creds>,
    ) -> Arc<ThreadGroup> {
        Arc::new(ThreadGroup {
            tgid,
            handlers: Mutex::new(handlers),
            shared_pending: Mutex::new(SigQueue::default()),
            signal_account,
            threads: Mutex::new(Vec::new()),
            cpu_accounting: Mutex::new(()),
            state: Mutex::new(GroupState { exit_signal, ..Default::default() }),
            child_events: WaitQueue::default(),
            thread_events: WaitQueue::default(),
            info: Mutex::new(ProcessInfo::default()),
            rlimits: Mutex::new(Rlimits::default()),
            creds: Mutex::new(creds),
            view: Mutex::new(None),
            curr_target: AtomicI32::new(tgid),
            membarrier_registrations: AtomicU32::new(0),
            pkey_slot_spent: AtomicBool::new(false),
            session_keyring: AtomicI32::new(0),
            tracees: Mutex::new(Vec::new()),
            personality: AtomicU32::new(0),
            container: AtomicU32::new(0),
        })
    }

    /// The process's credentials as they are now.
    pub fn creds(&self) -> Arc<Creds> {
        self.creds.lock().unwrap().clone()
    }

    pub fn rlimit(&self, resource: u32) -> Rlimit {
        self.rlimits.lock().unwrap().0[resource as usize]
    }

    /// The current dispositions.
    pub fn handlers(&self) -> Arc<Mutex<SigHandlers>> {
        self.handlers.lock().unwrap().clone()
    }

    /// The thread that represents the process (the leader, or any live
    /// thread once it is gone).
    pub fn main_thread(&self) -> Option<Arc<TaskShared>> {
        let t = self.threads.lock().unwrap();
        t.iter().find(|x| x.tid() == self.tgid).or(t.first()).cloned()
    }
}

/// A thread of the sandbox, owned by the host thread that runs it.
pub struct Task {
    pub kernel: Arc<Kernel>,
    pub shared: Arc<TaskShared>,
    pub tg: Arc<ThreadGroup>,
    pub mm: Arc<MemoryManager>,
    pub fs: Arc<Mutex<FsContext>>,
    pub files: Arc<FdTable>,
    pub regs: Registers,
    pub ctx: Box<dyn Context>,
    /// Alternate signal stack: (base, size, flags).
    pub altstack: (u64, u64, u32),
    /// set_tid_address: cleared and woken at thread exit.
    pub clear_child_tid: u64,
    /// set_robust_list: head and length.
    pub robust_list: (u64, u64),
    /// The system call just made, if it asked to be restarted.
    pub restart: Option<(crate::errno::Errno, u64)>,
    /// What restart_syscall resumes: the deadline of an interrupted sleep.
    pub restart_block: Option<run::RestartBlock>,
    /// Set while this task is the child of a vfork that has not yet called
    /// execve or exited: the parent waits for it.
    pub vfork_done: Option<Arc<clone::VforkDone>>,
    /// exit(2)'s code, used if this is the process's last thread.
    pub exit_code: Option<u8>,
    /// (error code, trap number, cr2) of the last fault, for the signal
    /// frame's sigcontext.
    pub last_trap: (u64, u64, u64),
    /// The number of the system call being made (orig_rax), which a
    /// tracer may change at its entry.
    pub orig_rax: u64,
    /// The trap flag was set for PTRACE_SINGLESTEP.
    pub stepping: bool,
}

impl Task {
    pub fn tid(&self) -> i32 {
        self.shared.tid()
    }

    /// A snapshot of root and cwd.
    pub fn fs_context(&self) -> FsContext {
        self.fs.lock().unwrap().clone()
    }

    /// The context of a file-system call made by this task.
    pub fn ctx(&self) -> crate::fs::Context<'_> {
        crate::fs::Context::new(self.tg.creds(), &*self.shared)
    }

    /// Runs `f` with a resolver for this task.
    pub fn with_resolver<R>(&self, f: impl FnOnce(&Resolver) -> R) -> R {
        self.with_resolver_in(crate::fs::path::Restrict::empty(), f)
    }

    /// Runs `f` with a resolver for this task under openat2's restrictions.
    pub fn with_resolver_in<R>(&self, restrict: crate::fs::path::Restrict, f: impl FnOnce(&Resolver) -> R) -> R {
        let fsc = self.fs_context();
        let creds = self.tg.creds();
        let r = Resolver { root: &fsc.root, cwd: &fsc.cwd, mounts: &self.kernel.mounts, creds: &creds, restrict };
        f(&r)
    }

    /// The thread's signal mask.
    pub fn signal_mask(&self) -> SigSet {
        self.shared.sig.lock().unwrap().mask
    }

    /// Replaces the signal mask (SIGKILL and SIGSTOP stay unblocked).
    /// Signals of the process that this thread was to take and now blocks
    /// go to other threads, as Linux's set_current_blocked does.
    pub fn set_signal_mask(&self, mask: SigSet) {
        self.shared.set_mask(mask);
    }

    /// The parent process's id, 0 for the first process.
    pub fn ppid(&self) -> i32 {
        self.kernel.procs.lock().unwrap().parent_of(self.tg.tgid).unwrap_or(0)
    }
}
