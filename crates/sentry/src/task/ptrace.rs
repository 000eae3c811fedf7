//! ptrace: one task traced by another process, entirely inside the sentry.
//!
//! A tracee that reaches a point the tracer asked to see (a signal about
//! to be delivered, a group stop, a system call's entry or exit, an event
//! such as fork or exec) enters a *ptrace stop*: it publishes its registers
//! and floating-point state into [`PtraceState`], tells the tracer (a wait
//! report and SIGCHLD, as Linux's CLD_TRAPPED) and sleeps until the tracer
//! resumes it. While it sleeps, the tracer reads and changes what was
//! published; the tracee takes it back when it resumes.
//!
//! The tracer is a process: any of its threads may wait for, and command,
//! its tracees, and its tracees detach when it ends.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use linux_raw_sys::general as g;
use platform::{FpState, Registers};

use super::{ExitStatus, Task, TaskShared, ThreadGroup};
use crate::kernel::Kernel;
use crate::mm::MemoryManager;
use crate::signal::{SigFields, SigInfo, code, flags};

/// PTRACE_O_* options.
pub mod options {
    pub const TRACESYSGOOD: u32 = 1;
    pub const TRACEFORK: u32 = 1 << 1;
    pub const TRACEVFORK: u32 = 1 << 2;
    pub const TRACECLONE: u32 = 1 << 3;
    pub const TRACEEXEC: u32 = 1 << 4;
    pub const TRACEVFORKDONE: u32 = 1 << 5;
    pub const TRACEEXIT: u32 = 1 << 6;
    pub const TRACESECCOMP: u32 = 1 << 7;
    pub const EXITKILL: u32 = 1 << 20;
    pub const SUSPEND_SECCOMP: u32 = 1 << 21;
    /// Every option Linux knows.
    pub const ALL: u32 = 0xff | EXITKILL | SUSPEND_SECCOMP;
}

/// PTRACE_EVENT_* numbers.
pub mod event {
    pub const FORK: u32 = 1;
    pub const VFORK: u32 = 2;
    pub const CLONE: u32 = 3;
    pub const EXEC: u32 = 4;
    pub const VFORK_DONE: u32 = 5;
    pub const EXIT: u32 = 6;
    pub const STOP: u32 = 128;
}

/// What a resumed tracee runs until its next stop.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StepMode {
    /// PTRACE_CONT: until a signal or event.
    #[default]
    Continue,
    /// PTRACE_SYSCALL: also at each system call's entry and exit.
    Syscall,
    /// PTRACE_SINGLESTEP: also after one instruction.
    SingleStep,
}

/// The tracer's command to a stopped tracee.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resume {
    /// Run on, delivering signal `sig` (0: none) if the stop was a
    /// signal-delivery stop.
    Run { sig: u32, mode: StepMode },
    /// PTRACE_LISTEN: stay stopped with the group, but report the next
    /// change (the group continued, a new signal) with a new stop.
    Listen,
}

/// Where in a system call a syscall stop is (PTRACE_GET_SYSCALL_INFO).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SyscallStop {
    /// Not a syscall stop.
    #[default]
    None,
    Entry {
        nr: u64,
        args: [u64; 6],
    },
    Exit {
        rval: i64,
    },
}

/// PTRACE_EVENTMSG_SYSCALL_ENTRY and _EXIT: what PTRACE_GETEVENTMSG
/// answers in syscall stops, as Linux's ptrace_report_syscall sets it.
const EVENTMSG_SYSCALL_ENTRY: u64 = 1;
const EVENTMSG_SYSCALL_EXIT: u64 = 2;

/// A task's side of a ptrace relation.
#[derive(Default)]
pub struct PtraceState {
    /// The tracing process and the thread that attached.
    pub tracer: Option<Arc<ThreadGroup>>,
    pub tracer_tid: i32,
    /// Attached with PTRACE_SEIZE (group stops are PTRACE_EVENT_STOP,
    /// PTRACE_INTERRUPT and PTRACE_LISTEN work).
    pub seized: bool,
    pub options: u32,
    /// The wait status word of the stop the tracee is in, while it is in one.
    pub stop: Option<i32>,
    /// The stop was reported to a wait of the tracer.
    pub reported: bool,
    /// The tracer's command, until the tracee takes it.
    pub resume: Option<Resume>,
    /// What the last resume asked for.
    pub mode: StepMode,
    /// PTRACE_GETEVENTMSG.
    pub event_msg: u64,
    /// The signal of a signal-delivery stop, or the SIGTRAP an event or
    /// syscall stop reports (PTRACE_GETSIGINFO).
    pub siginfo: Option<SigInfo>,
    pub syscall: SyscallStop,
    /// The tracee's registers while stopped, with the number of the system
    /// call it is in (orig_rax), and its floating-point state.
    pub regs: Registers,
    pub orig_rax: u64,
    pub fp: Option<FpState>,
    pub fp_changed: bool,
    /// Debug registers as written with POKEUSER (never armed).
    pub debugregs: [u64; 8],
    /// The tracee's memory while stopped.
    pub mm: Option<Arc<MemoryManager>>,
    /// The group stop (by its count of SIGCONTs) the tracee has reported
    /// and been resumed from: it does not stop for it again.
    pub group_stop_done: Option<u64>,
    /// The tracee is dead: its exit waits to be reported to the tracer.
    pub exit_report: Option<ExitStatus>,
    /// The tracer learns of the process's end first; its parent only once
    /// the tracer has collected it.
    pub parent_deferred: bool,
}

impl PtraceState {
    pub fn is_traced(&self) -> bool {
        self.tracer.is_some()
    }
}

/// The wait(2) status word of a ptrace stop for `sig` with `event`.
pub fn stop_status(sig: u32, event: u32) -> i32 {
    (((event << 8) | sig) as i32) << 8 | 0x7f
}

impl TaskShared {
    /// The tracer's process, if the task is traced.
    pub fn tracer(&self) -> Option<Arc<ThreadGroup>> {
        self.ptrace.lock().unwrap().tracer.clone()
    }

    pub fn is_traced(&self) -> bool {
        self.ptrace.lock().unwrap().is_traced()
    }

    /// The thread id of the tracer (/proc's TracerPid), 0 if none.
    pub fn tracer_tid(&self) -> i32 {
        let p = self.ptrace.lock().unwrap();
        if p.tracer.is_some() { p.tracer_tid } else { 0 }
    }

    /// Makes `tracer` (thread `tracer_tid` of it) trace this task.
    pub fn attach(self: &Arc<Self>, tracer: &Arc<ThreadGroup>, tracer_tid: i32, seized: bool, options: u32) {
        {
            // A task still on its way out of a stop of an earlier tracer
            // keeps that stop's command and registers.
            let mut p = self.ptrace.lock().unwrap();
            p.tracer = Some(tracer.clone());
            p.tracer_tid = tracer_tid;
            p.seized = seized;
            p.options = options;
            p.mode = StepMode::Continue;
            p.event_msg = 0;
            p.group_stop_done = None;
            p.exit_report = None;
            p.parent_deferred = false;
        }
        tracer.tracees.lock().unwrap().push(self.clone());
    }

    /// Ends the relation: the tracee runs on with `sig` (delivered if it
    /// was in a signal-delivery stop), as PTRACE_DETACH and the tracer's
    /// end leave it.
    pub fn detach(self: &Arc<Self>, sig: u32) {
        let tracer = {
            let mut p = self.ptrace.lock().unwrap();
            let t = p.tracer.take();
            if p.stop.is_some() {
                p.resume = Some(Resume::Run { sig, mode: StepMode::Continue });
            }
            p.mode = StepMode::Continue;
            p.group_stop_done = None;
            t
        };
        if let Some(t) = tracer {
            t.tracees.lock().unwrap().retain(|x| !Arc::ptr_eq(x, self));
        }
        self.trap_pending.store(false, Ordering::Release);
        self.notify();
        // A tracee of a stopped group goes back to the group stop.
        self.tg.thread_events.notify_all();
    }

    /// Resumes a tracee stopped in a ptrace stop. Fails (ESRCH) if it is
    /// not in one.
    pub fn resume(&self, r: Resume) -> bool {
        {
            let mut p = self.ptrace.lock().unwrap();
            if p.stop.is_none() || p.resume.is_some() {
                return false;
            }
            if let Resume::Run { mode, .. } = r {
                p.mode = mode;
            }
            p.resume = Some(r);
        }
        self.waiter.wake();
        true
    }

    /// True if the task is in a ptrace stop the tracer may act on.
    pub fn ptrace_stopped(&self) -> bool {
        let p = self.ptrace.lock().unwrap();
        p.stop.is_some() && p.resume.is_none()
    }
}

impl ThreadGroup {
    /// True if some thread of the process is traced: signals it ignores
    /// are still queued, for the tracer to see, as Linux's sig_ignored
    /// keeps them.
    pub fn has_tracee(&self) -> bool {
        self.threads.lock().unwrap().iter().any(|t| t.is_traced())
    }
}

/// Sends the tracer the SIGCHLD of a ptrace stop (CLD_TRAPPED) unless it
/// asked not to hear of stops, and wakes its waits.
fn notify_tracer(kernel: &Kernel, tracer: &Arc<ThreadGroup>, tracee: &TaskShared, sig: u32) {
    let act = tracer.handlers().lock().unwrap().get(g::SIGCHLD);
    if act.flags & flags::SA_NOCLDSTOP == 0 {
        let info = SigInfo {
            signo: g::SIGCHLD,
            errno: 0,
            code: g::CLD_TRAPPED as i32,
            fields: SigFields::Child {
                pid: tracee.tid(),
                uid: tracee.tg.creds().uid.real,
                status: sig as i32,
                utime: 0,
                stime: 0,
            },
        };
        super::send_to_group(kernel, tracer, info);
    }
    tracer.child_events.notify_all();
}

impl Task {
    /// The options of the task's tracer, if traced.
    pub fn ptrace_options(&self) -> Option<u32> {
        let p = self.shared.ptrace.lock().unwrap();
        p.tracer.as_ref().map(|_| p.options)
    }

    /// Enters a ptrace stop reporting `status` and sleeps until the tracer
    /// resumes it, detaches, or the task is killed. `None` if it is not
    /// traced (or no longer is, or was killed).
    fn ptrace_stop(&mut self, status: i32, info: SigInfo, syscall: SyscallStop, exiting: bool) -> Option<Resume> {
        // A task on its way out stops no more (but for the exit event,
        // which only SIGKILL prevents): its tracer must never see a stop
        // it does not stay in, as after exit_group's entry.
        let doomed = |t: &Task| if exiting { t.sigkilled() } else { t.shared.is_killed() };
        if doomed(self) {
            return None;
        }
        let tracer = {
            let mut p = self.shared.ptrace.lock().unwrap();
            let tracer = p.tracer.clone()?;
            p.stop = Some(status);
            p.reported = false;
            p.resume = None;
            p.siginfo = Some(info);
            p.syscall = syscall;
            p.regs = self.regs;
            p.orig_rax = self.orig_rax;
            p.fp = self.ctx.fp_state().ok();
            p.fp_changed = false;
            p.mm = Some(self.mm.clone());
            tracer
        };
        notify_tracer(&self.kernel, &tracer, &self.shared, ((status >> 8) & 0xff) as u32);
        drop(tracer);
        let shared = self.shared.clone();
        let resume = loop {
            {
                let mut p = shared.ptrace.lock().unwrap();
                if let Some(r) = p.resume.take() {
                    break Some(r);
                }
                if p.tracer.is_none() {
                    break None;
                }
            }
            // A stop on the way out waits even though the task is marked
            // to exit; only SIGKILL ends it.
            if doomed(self) {
                break None;
            }
            shared.waiter.sleep(None);
        };
        let mut p = shared.ptrace.lock().unwrap();
        p.stop = None;
        p.syscall = SyscallStop::None;
        p.mm = None;
        self.regs = p.regs;
        self.orig_rax = p.orig_rax;
        let fp = p.fp.take().filter(|_| p.fp_changed);
        let siginfo = p.siginfo;
        drop(p);
        if let Some(fp) = fp {
            let _ = self.ctx.set_fp_state(&fp);
        }
        // The tracer may have replaced the siginfo; the caller reads it
        // back with the resume.
        self.shared.ptrace.lock().unwrap().siginfo = siginfo;
        resume
    }

    /// True if the process is dying of SIGKILL.
    fn sigkilled(&self) -> bool {
        self.tg.state.lock().unwrap().sigkilled
    }

    /// The SIGTRAP siginfo Linux's ptrace_notify gives an event or syscall
    /// stop: si_code is the reported status.
    fn trap_info(&self, exit_code: u32) -> SigInfo {
        SigInfo {
            signo: g::SIGTRAP,
            errno: 0,
            code: exit_code as i32,
            fields: SigFields::Kill { pid: self.tid(), uid: self.tg.creds().uid.real },
        }
    }

    /// A stop at a traced event (`event::*`) if the tracer asked for it
    /// (`option`), with `msg` for PTRACE_GETEVENTMSG. Returns true if it
    /// stopped.
    pub fn ptrace_event(&mut self, option: u32, ev: u32, msg: u64) -> bool {
        {
            let mut p = self.shared.ptrace.lock().unwrap();
            if p.tracer.is_none() || p.options & option == 0 {
                return false;
            }
            p.event_msg = msg;
        }
        let exit_code = g::SIGTRAP | (ev << 8);
        let resume = self.ptrace_stop(
            stop_status(g::SIGTRAP, ev),
            self.trap_info(exit_code),
            SyscallStop::None,
            ev == event::EXIT,
        );
        self.after_stop(resume);
        true
    }

    /// What a resume from a stop other than a signal-delivery stop leaves
    /// the task to do: PTRACE_LISTEN waits on with the group.
    fn after_stop(&mut self, resume: Option<Resume>) {
        if resume == Some(Resume::Listen) {
            self.listen();
        }
        self.apply_step_mode();
    }

    /// Sets or clears the trap flag as the last resume asked.
    fn apply_step_mode(&mut self) {
        let step = self.shared.ptrace.lock().unwrap().mode == StepMode::SingleStep;
        if step {
            self.regs.rflags |= TRAP_FLAG;
            self.stepping = true;
        } else if self.stepping {
            self.regs.rflags &= !TRAP_FLAG;
            self.stepping = false;
        }
    }

    /// PTRACE_LISTEN: the tracee stays stopped until its group is continued
    /// or killed, or a new signal comes, then reports PTRACE_EVENT_STOP.
    fn listen(&mut self) {
        let shared = self.shared.clone();
        let _r = self.tg.thread_events.register(&shared.waiter);
        loop {
            if shared.is_killed() || !shared.is_traced() {
                return;
            }
            if !self.tg.state.lock().unwrap().stop_pending() || shared.sig.lock().unwrap().sigpending {
                break;
            }
            shared.waiter.sleep(None);
        }
        shared.trap_pending.store(true, Ordering::Release);
    }

    /// A traced task's system call entry (PTRACE_SYSCALL): stops with
    /// SIGTRAP (|0x80 under PTRACE_O_TRACESYSGOOD). Returns the number of
    /// the call to make, which the tracer may have changed (u64::MAX, -1,
    /// skips it), or None if the task was not stopped.
    pub fn ptrace_syscall_entry(&mut self, nr: u64) -> Option<u64> {
        let good = {
            let mut p = self.shared.ptrace.lock().unwrap();
            if p.tracer.is_none() || p.mode != StepMode::Syscall {
                return None;
            }
            p.event_msg = EVENTMSG_SYSCALL_ENTRY;
            p.options & options::TRACESYSGOOD != 0
        };
        let sig = g::SIGTRAP | if good { 0x80 } else { 0 };
        self.orig_rax = nr;
        self.regs.rax = crate::errno::Errno::ENOSYS.as_return();
        let args = self.regs.syscall_args();
        let resume = self.ptrace_stop(stop_status(sig, 0), self.trap_info(sig), SyscallStop::Entry { nr, args }, false);
        self.after_stop(resume);
        if self.shared.is_killed() {
            return Some(u64::MAX);
        }
        Some(self.orig_rax)
    }

    /// A traced task's system call exit: stops as at entry, with the
    /// result in the registers for the tracer to read or change.
    pub fn ptrace_syscall_exit(&mut self) {
        let good = {
            let mut p = self.shared.ptrace.lock().unwrap();
            if p.tracer.is_none() || p.mode != StepMode::Syscall {
                return;
            }
            p.event_msg = EVENTMSG_SYSCALL_EXIT;
            p.options & options::TRACESYSGOOD != 0
        };
        let sig = g::SIGTRAP | if good { 0x80 } else { 0 };
        let rval = self.regs.rax as i64;
        let resume = self.ptrace_stop(stop_status(sig, 0), self.trap_info(sig), SyscallStop::Exit { rval }, false);
        self.after_stop(resume);
    }

    /// True if the tracer watches system calls (they must all reach the
    /// sentry).
    pub fn ptrace_syscalls(&self) -> bool {
        let p = self.shared.ptrace.lock().unwrap();
        p.tracer.is_some() && p.mode == StepMode::Syscall
    }

    /// A signal about to be delivered to a traced task: the
    /// signal-delivery stop. Returns the signal to deliver instead (the
    /// tracer's choice, with the siginfo it left), or None to deliver
    /// nothing.
    pub(super) fn ptrace_signal(&mut self, info: SigInfo) -> Option<SigInfo> {
        let resume = self.ptrace_stop(stop_status(info.signo, 0), info, SyscallStop::None, false)?;
        let given = self.shared.ptrace.lock().unwrap().siginfo.unwrap_or(info);
        let sig = match resume {
            Resume::Run { sig, .. } => sig,
            Resume::Listen => 0,
        };
        self.after_stop(Some(resume));
        if sig == 0 || sig > 64 {
            return None;
        }
        if sig == given.signo {
            return Some(given);
        }
        // Another signal than the one stopped for: as sent by the tracer.
        let (pid, uid) = self.tracer_ids();
        Some(SigInfo::user(sig, code::SI_USER, pid, uid))
    }

    fn tracer_ids(&self) -> (i32, u32) {
        let p = self.shared.ptrace.lock().unwrap();
        p.tracer.as_ref().map(|t| (t.tgid, t.creds().uid.real)).unwrap_or((0, 0))
    }

    /// A traced task's part in a group stop: a ptrace stop the tracer sees
    /// (PTRACE_EVENT_STOP for a seized one), once per group stop.
    pub(super) fn ptrace_group_stop(&mut self) -> bool {
        let (sig, continues) = {
            let st = self.tg.state.lock().unwrap();
            match st.stopped {
                Some(sig) if st.exit.is_none() => (sig, st.continues),
                _ => return false,
            }
        };
        let seized = {
            let p = self.shared.ptrace.lock().unwrap();
            if p.tracer.is_none() || p.group_stop_done == Some(continues) {
                return false;
            }
            p.seized
        };
        let status = if seized { stop_status(sig, event::STOP) } else { stop_status(sig, 0) };
        let info = SigInfo::kernel(sig);
        let resume = self.ptrace_stop(status, info, SyscallStop::None, false);
        self.shared.ptrace.lock().unwrap().group_stop_done = Some(continues);
        self.after_stop(resume);
        true
    }

    /// PTRACE_INTERRUPT or a seized new child's first stop: a
    /// PTRACE_EVENT_STOP with SIGTRAP, or with the stop signal while the
    /// group is stopped.
    pub(super) fn ptrace_interrupt_stop(&mut self) -> bool {
        if !self.shared.trap_pending.swap(false, Ordering::AcqRel) {
            return false;
        }
        let group = {
            let st = self.tg.state.lock().unwrap();
            st.stopped.filter(|_| st.exit.is_none()).map(|s| (s, st.continues))
        };
        let sig = group.map_or(g::SIGTRAP, |(s, _)| s);
        let resume = self.ptrace_stop(
            stop_status(sig, event::STOP),
            self.trap_info(sig | event::STOP << 8),
            SyscallStop::None,
            false,
        );
        if let Some((_, c)) = group {
            self.shared.ptrace.lock().unwrap().group_stop_done = Some(c);
        }
        self.after_stop(resume);
        true
    }

    /// After a system call made while single-stepping, the step is over:
    /// Linux reports it at the instruction after the call, as a
    /// breakpoint's SIGTRAP (TRAP_BRKPT), not a trace trap.
    pub fn ptrace_syscall_step(&mut self) {
        if self.stepping {
            let info = SigInfo {
                signo: g::SIGTRAP,
                errno: 0,
                code: g::TRAP_BRKPT as i32,
                fields: SigFields::Fault { addr: 0 },
            };
            self.force_signal(info, (0, platform::arch::vector::DEBUG as u64, 0));
        }
    }
}

/// The trap flag of RFLAGS.
pub const TRAP_FLAG: u64 = 0x100;

/// Detaches every tracee of a process that has ended: those it asked to
/// kill with it (PTRACE_O_EXITKILL) get SIGKILL, the others run on; dead
/// ones it never collected are reported to their parents.
pub fn tracer_exited(kernel: &Arc<Kernel>, tracer: &ThreadGroup) {
    let tracees: Vec<Arc<TaskShared>> = std::mem::take(&mut *tracer.tracees.lock().unwrap());
    for t in tracees {
        let (kill, dead, deferred) = {
            let mut p = t.ptrace.lock().unwrap();
            let kill = p.options & options::EXITKILL != 0;
            let dead = p.exit_report.take().is_some();
            let deferred = std::mem::take(&mut p.parent_deferred);
            (kill, dead, deferred)
        };
        if dead {
            t.ptrace.lock().unwrap().tracer = None;
            if deferred {
                super::exit::report_to_parent(kernel, &t.tg);
            }
            continue;
        }
        if kill {
            super::send_to_group(kernel, &t.tg, SigInfo::kernel(g::SIGKILL));
        }
        t.detach(0);
    }
}

/// What a wait of `task`'s process finds among its tracees matching
/// `matches`: a stop not yet reported or a death. Reaps (forgets) a dead
/// tracee unless `nowait`.
pub(super) fn tracee_report(
    task: &Task,
    matches: &dyn Fn(&TaskShared) -> bool,
    exited: bool,
    nowait: bool,
) -> (bool, Option<super::WaitOutcome>) {
    let tracees: Vec<Arc<TaskShared>> = task.tg.tracees.lock().unwrap().clone();
    let mut any = false;
    for t in tracees.iter().filter(|t| matches(t)) {
        any = true;
        let uid = t.tg.creds().uid.real;
        let mut p = t.ptrace.lock().unwrap();
        if let Some(status) = p.exit_report {
            if !exited {
                continue;
            }
            let (code, si_status) = status.child_code();
            let out = super::WaitOutcome {
                pid: t.tid(),
                status: status.wait_status(),
                code,
                si_status,
                cpu: Default::default(),
                uid,
            };
            if !nowait {
                p.exit_report = None;
                p.tracer = None;
                let deferred = std::mem::take(&mut p.parent_deferred);
                drop(p);
                task.tg.tracees.lock().unwrap().retain(|x| !Arc::ptr_eq(x, t));
                if deferred {
                    super::exit::report_to_parent(&task.kernel, &t.tg);
                }
            }
            return (true, Some(out));
        }
        if let Some(status) = p.stop
            && !p.reported
            && p.resume.is_none()
        {
            if !nowait {
                p.reported = true;
            }
            return (
                true,
                Some(super::WaitOutcome {
                    pid: t.tid(),
                    status,
                    code: g::CLD_TRAPPED as i32,
                    si_status: (status >> 8) & 0xff,
                    cpu: Default::default(),
                    uid,
                }),
            );
        }
    }
    (any, None)
}

/// True if `child`'s stops are reported to `tracer` as ptrace stops
/// rather than as job-control stops (its tracer is its parent).
pub(super) fn traced_by(child: &ThreadGroup, tracer: &ThreadGroup) -> bool {
    child.threads.lock().unwrap().iter().any(|t| t.tracer().is_some_and(|x| std::ptr::eq(&*x, tracer)))
}

/// A traced thread has exited with `status`: its tracer gets to collect
/// it. Returns true if the process's parent must wait for that (the
/// process ended and its tracer is another process than its parent).
pub(super) fn tracee_exited(kernel: &Kernel, t: &Arc<TaskShared>, last: bool, status: ExitStatus) -> bool {
    let Some(tracer) = t.tracer() else { return false };
    let leader = t.tid() == t.tg.tgid;
    if leader && !last {
        // Outlived by its threads: the tracer finds nothing to wait for
        // until the last of them is gone, then the leader's exit.
        t.ptrace.lock().unwrap().stop = None;
        t.tg.state.lock().unwrap().delayed_leader = Some(super::DelayedLeader(t.clone()));
        return false;
    }
    let parent = kernel.procs.lock().unwrap().parent_of(t.tg.tgid);
    // A leader collected by its tracer as the parent's child: the
    // relation ends here.
    if leader && parent == Some(tracer.tgid) {
        untrace(t);
        return false;
    }
    {
        let mut p = t.ptrace.lock().unwrap();
        p.exit_report = Some(status);
        p.parent_deferred = leader;
        p.stop = None;
    }
    let (code, si_status) = status.child_code();
    let info = SigInfo {
        signo: g::SIGCHLD,
        errno: 0,
        code,
        fields: SigFields::Child { pid: t.tid(), uid: t.tg.creds().uid.real, status: si_status, utime: 0, stime: 0 },
    };
    super::send_to_group(kernel, &tracer, info);
    tracer.child_events.notify_all();
    leader
}

impl Task {
    /// PTRACE_O_TRACEEXIT: the stop of a task on its way out, its exit
    /// status the event message. A task dying of SIGKILL does not stop.
    pub(super) fn ptrace_exit_event(&mut self) {
        if self.ptrace_options().is_none_or(|o| o & options::TRACEEXIT == 0) || self.sigkilled() {
            return;
        }
        let status = self.tg.state.lock().unwrap().exit.unwrap_or(ExitStatus::Exited(self.exit_code.unwrap_or(0)));
        self.ptrace_event(options::TRACEEXIT, event::EXIT, status.wait_status() as u64);
    }

    /// After a successful execve: PTRACE_EVENT_EXEC (its message the
    /// thread id the task had before), or for a tracer that did not ask
    /// for it and did not seize, a SIGTRAP.
    pub fn ptrace_exec(&mut self, old_tid: i32) {
        let (seized, opts) = {
            let p = self.shared.ptrace.lock().unwrap();
            if p.tracer.is_none() {
                return;
            }
            (p.seized, p.options)
        };
        if opts & options::TRACEEXEC != 0 {
            self.ptrace_event(options::TRACEEXEC, event::EXEC, old_tid as u64);
        } else if !seized {
            let info = SigInfo::user(g::SIGTRAP, code::SI_USER, self.tg.tgid, self.tg.creds().uid.real);
            super::send_to_thread(&self.kernel, &self.shared.clone(), info);
        }
    }

    /// The event a clone with `flags` and `exit_signal` reports to a tracer
    /// that asked for it, as (option, event).
    pub fn ptrace_clone_event(&self, flags: u64, exit_signal: u32) -> Option<(u32, u32)> {
        let opts = self.ptrace_options()?;
        let has = |bit: u32| flags & bit as u64 != 0;
        if has(g::CLONE_UNTRACED) {
            return None;
        }
        let e = if has(g::CLONE_VFORK) {
            (options::TRACEVFORK, event::VFORK)
        } else if has(g::CLONE_THREAD) || exit_signal != g::SIGCHLD {
            (options::TRACECLONE, event::CLONE)
        } else {
            (options::TRACEFORK, event::FORK)
        };
        (opts & e.0 != 0).then_some(e)
    }

    /// Makes a new task traced by this task's tracer, as Linux's
    /// ptrace_init_task: a seized one starts with a PTRACE_EVENT_STOP, an
    /// attached one with SIGSTOP pending.
    pub fn ptrace_inherit(&self, child: &Arc<TaskShared>) {
        let (tracer, tracer_tid, seized, opts) = {
            let p = self.shared.ptrace.lock().unwrap();
            let Some(t) = p.tracer.clone() else { return };
            (t, p.tracer_tid, p.seized, p.options)
        };
        child.attach(&tracer, tracer_tid, seized, opts);
        if seized {
            child.trap_pending.store(true, Ordering::Release);
        } else {
            let limit = child.tg.rlimit(g::RLIMIT_SIGPENDING).cur;
            let mut s = child.sig.lock().unwrap();
            let _ = s.pending.enqueue(SigInfo::kernel(g::SIGSTOP), &child.tg.signal_account, limit);
            s.sigpending = true;
        }
    }
}

/// Linux's ptrace_may_access in PTRACE_MODE_ATTACH: `caller` may reach
/// its own process; else a target whose user and group ids (real,
/// effective and saved) all are the caller's real ones (its file-system
/// ones with `fscreds`, as /proc/PID/mem checks) and which is dumpable;
/// else it needs CAP_SYS_PTRACE.
pub fn may_access(caller: &ThreadGroup, target: &ThreadGroup, fscreds: bool) -> Result<(), crate::errno::Errno> {
    if target.tgid == caller.tgid {
        return Ok(());
    }
    let me = caller.creds();
    if me.has(crate::auth::cap::SYS_PTRACE) {
        return Ok(());
    }
    let them = target.creds();
    let (uid, gid) = if fscreds { (me.uid.fs, me.gid.fs) } else { (me.uid.real, me.gid.real) };
    let same_ids = [them.uid.real, them.uid.effective, them.uid.saved].iter().all(|u| *u == uid)
        && [them.gid.real, them.gid.effective, them.gid.saved].iter().all(|g| *g == gid);
    if !same_ids || target.state.lock().unwrap().undumpable {
        return Err(crate::errno::Errno::EPERM);
    }
    Ok(())
}

/// Ends the tracing of `t`, which has exited, without a report.
pub(super) fn untrace(t: &Arc<TaskShared>) {
    let tracer = t.ptrace.lock().unwrap().tracer.take();
    if let Some(tracer) = tracer {
        tracer.tracees.lock().unwrap().retain(|x| !Arc::ptr_eq(x, t));
    }
}
