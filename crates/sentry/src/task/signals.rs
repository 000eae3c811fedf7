//! Sending signals, and delivering them when a task returns to application
//! code: default actions, job-control stops, handler frames and the restart
//! of interrupted system calls.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use linux_raw_sys::general as g;
use platform::FpState;

use super::{ExitStatus, Task, TaskShared, ThreadGroup};
use crate::arch::signal::{FrameSpec, build_frame, frame_sp, restore_frame};
use crate::errno::Errno;
use crate::kernel::Kernel;
use crate::signal::{
    DefaultAction, QueueFull, SIG_DFL, SIG_IGN, STOP_SIGNALS, SigAction, SigFields, SigInfo, SigSet, default_action,
    flags,
};

/// Why a signal frame could not be built or restored; the task then gets
/// SIGSEGV, as on Linux.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("signal frame memory: {0}")]
    Memory(#[from] crate::mm::MmError),
    #[error("floating-point state: {0}")]
    Cpu(#[from] platform::PlatformError),
    #[error("handler without SA_RESTORER")]
    NoRestorer,
    #[error("alternate signal stack overflow")]
    StackOverflow,
    #[error("floating-point state the CPU refuses")]
    BadFpState,
}

/// `restart_syscall`.
const NR_RESTART_SYSCALL: u64 = 219;

/// Takes the next signal of `allowed` pending for thread `t` (its own
/// first, then its process's). A POSIX timer's signal gets its overrun
/// count now; one of a timer re-armed or deleted since is dropped.
pub fn take_signal(kernel: &Kernel, t: &TaskShared, allowed: SigSet) -> Option<SigInfo> {
    loop {
        let mut info = t.sig.lock().unwrap().pending.dequeue(allowed);
        if info.is_none() {
            info = t.tg.shared_pending.lock().unwrap().dequeue(allowed);
        }
        t.recalc_sigpending();
        let mut info = info?;
        if let SigFields::Timer { key, seq, ref mut overrun, .. } = info.fields {
            match kernel.timers.signal_taken(key, seq) {
                Some(o) => *overrun = o,
                None => continue,
            }
        }
        return Some(info);
    }
}

/// Ends every thread of a process with `status` (the first exit wins).
pub fn group_exit(tg: &ThreadGroup, status: ExitStatus) {
    {
        let mut st = tg.state.lock().unwrap();
        if st.exit.is_none() {
            st.exit = Some(status);
        }
        st.sigkilled |= matches!(status, ExitStatus::Signaled { signal: g::SIGKILL, .. });
    }
    for t in tg.threads.lock().unwrap().iter() {
        t.kill();
    }
    tg.thread_events.notify_all();
}

/// Tells a process's parent that it exited, stopped or continued: the
/// signal (unless the parent asked not to get it) and a wake-up of waits.
pub fn notify_parent(kernel: &Kernel, child: &ThreadGroup, code: i32, status: i32) {
    let parent = {
        let tree = kernel.procs.lock().unwrap();
        tree.parent_of(child.tgid).and_then(|p| tree.group(p))
    };
    if let Some(parent) = parent {
        notify(kernel, &parent, child, code, status);
    }
}

/// [`notify_parent`] with the parent given (a child reaped at once is no
/// longer in the process tree when its parent hears of it).
pub(super) fn notify(kernel: &Kernel, parent: &Arc<ThreadGroup>, child: &ThreadGroup, code: i32, status: i32) {
    let exiting = code != g::CLD_STOPPED as i32 && code != g::CLD_CONTINUED as i32;
    let signo = if exiting { child.state.lock().unwrap().exit_signal } else { g::SIGCHLD };
    if signo != 0 {
        let act = parent.handlers().lock().unwrap().get(g::SIGCHLD);
        let muted = !exiting && signo == g::SIGCHLD && act.flags & flags::SA_NOCLDSTOP != 0;
        if !muted {
            // The child's CPU time in clock ticks (USER_HZ, 100).
            let t = child.cpu_times();
            let ticks = |d: std::time::Duration| (d.as_millis() / 10) as i64;
            let (utime, stime) = (ticks(t.user), ticks(t.system));
            let info = SigInfo {
                signo,
                errno: 0,
                code,
                fields: SigFields::Child { pid: child.tgid, uid: child.creds().uid.real, status, utime, stime },
            };
            send_to_group(kernel, parent, info);
        }
    }
    parent.child_events.notify_all();
}

/// What every signal does at the moment it is sent, whatever the target
/// does later: SIGKILL kills, SIGCONT continues, stop signals cancel a
/// pending SIGCONT. Returns false if the signal needs no queueing.
fn on_send(kernel: &Kernel, tg: &Arc<ThreadGroup>, sig: u32) -> bool {
    if sig == g::SIGKILL {
        group_exit(tg, ExitStatus::Signaled { signal: g::SIGKILL, core: false });
        return false;
    }
    if STOP_SIGNALS.contains(sig) {
        let cont = SigSet::of(g::SIGCONT);
        tg.shared_pending.lock().unwrap().discard(cont);
        for t in tg.threads.lock().unwrap().iter() {
            t.sig.lock().unwrap().pending.discard(cont);
        }
    }
    if sig == g::SIGCONT {
        tg.shared_pending.lock().unwrap().discard(STOP_SIGNALS);
        for t in tg.threads.lock().unwrap().iter() {
            t.sig.lock().unwrap().pending.discard(STOP_SIGNALS);
        }
        let was_stopped = {
            let mut st = tg.state.lock().unwrap();
            st.continues += 1;
            let was = st.stopped.take().is_some();
            if was {
                st.stop_unreported = false;
                st.continue_unreported = true;
            }
            was
        };
        if was_stopped {
            tg.thread_events.notify_all();
            for t in tg.threads.lock().unwrap().iter() {
                t.waiter.wake();
            }
            notify_parent(kernel, tg, g::CLD_CONTINUED as i32, g::SIGCONT as i32);
        }
    }
    true
}

/// True if the signal would be thrown away on arrival: ignored and not
/// blocked by `mask`.
fn discarded(tg: &ThreadGroup, sig: u32, mask: SigSet) -> bool {
    !mask.contains(sig) && tg.handlers().lock().unwrap().ignores(sig) && !tg.has_tracee()
}

/// The signals `t` keeps even if ignored, as Linux's sig_ignored does:
/// those it blocks, and those it awaits in sigtimedwait (which unblocks
/// them only to be woken by them).
fn kept(t: &TaskShared) -> SigSet {
    let s = t.sig.lock().unwrap();
    s.mask.union(s.real_blocked)
}

/// Linux's wants_signal: `t` could take `sig` now.
fn wants_signal(t: &TaskShared, sig: u32) -> bool {
    if t.is_killed() {
        return false;
    }
    let s = t.sig.lock().unwrap();
    if s.mask.contains(sig) {
        return false;
    }
    if sig == g::SIGKILL {
        return true;
    }
    if t.tg.state.lock().unwrap().stop_pending() {
        return false;
    }
    !s.sigpending
}

/// Queues `info` for the process (`thread` None) or one of its threads,
/// its siginfo charged to the process's account.
fn enqueue(tg: &ThreadGroup, thread: Option<&TaskShared>, info: SigInfo) -> Result<(), QueueFull> {
    let limit = tg.rlimit(g::RLIMIT_SIGPENDING).cur;
    let account = &tg.signal_account;
    match thread {
        Some(t) => t.sig.lock().unwrap().pending.enqueue(info, account, limit)?,
        None => tg.shared_pending.lock().unwrap().enqueue(info, account, limit)?,
    };
    super::signalfd::SIGNAL_ARRIVALS.notify_all();
    Ok(())
}

/// Linux's complete_signal for a signal that `t` is to take now: one
/// whose default action kills takes the whole process down at once, as
/// a SIGKILL would, so that it ends even a thread that waits without
/// taking signals (a vfork parent). A thread waiting for the signal in
/// sigtimedwait takes it instead.
fn kill_if_fatal(tg: &ThreadGroup, t: &TaskShared, sig: u32) {
    if default_action(sig) != DefaultAction::Terminate {
        return;
    }
    let handler = tg.handlers().lock().unwrap().get(sig).handler;
    let awaited = t.sig.lock().unwrap().real_blocked.contains(sig);
    let exiting = tg.state.lock().unwrap().exit.is_some();
    if handler == SIG_DFL && !awaited && !exiting {
        group_exit(tg, ExitStatus::Signaled { signal: sig, core: false });
    }
}

/// Sends a signal to a process. It waits in the process's queue; one
/// thread is chosen to take it, as Linux's complete_signal does: the main
/// thread if it can take it now, else the next one that can, from the one
/// chosen last time. If none can now, the first to unblock it or to finish
/// with its other signals takes it.
pub fn send_to_group(kernel: &Kernel, tg: &Arc<ThreadGroup>, info: SigInfo) {
    let _ = queue_to_group(kernel, tg, info);
}

/// [`send_to_group`] for a sender that learns of a full queue: a real-time
/// signal with the sender's siginfo (sigqueue) is then not sent.
pub fn queue_to_group(kernel: &Kernel, tg: &Arc<ThreadGroup>, info: SigInfo) -> Result<(), QueueFull> {
    let sig = info.signo;
    if !on_send(kernel, tg, sig) {
        return Ok(());
    }
    let threads: Vec<Arc<TaskShared>> = tg.threads.lock().unwrap().clone();
    let all_block = !threads.is_empty() && threads.iter().all(|t| kept(t).contains(sig));
    let mask = if all_block { SigSet::of(sig) } else { SigSet::EMPTY };
    if discarded(tg, sig, mask) {
        return Ok(());
    }
    enqueue(tg, None, info)?;
    let main = threads.iter().find(|t| t.tid() == tg.tgid);
    let target = match main {
        Some(m) if wants_signal(m, sig) => Some(m),
        _ => {
            let last = tg.curr_target.load(Ordering::Relaxed);
            let start = threads.iter().position(|t| t.tid() == last).unwrap_or(0);
            let n = threads.len();
            let t = (0..n).map(|i| &threads[(start + i) % n]).find(|t| wants_signal(t, sig));
            if let Some(t) = t {
                tg.curr_target.store(t.tid(), Ordering::Relaxed);
            }
            t
        }
    };
    if let Some(t) = target {
        kill_if_fatal(tg, t, sig);
        t.signal_wake_up();
    }
    Ok(())
}

/// Sends a signal to one thread.
pub fn send_to_thread(kernel: &Kernel, t: &Arc<TaskShared>, info: SigInfo) {
    let _ = queue_to_thread(kernel, t, info);
}

/// [`send_to_thread`] for a sender that learns of a full queue.
pub fn queue_to_thread(kernel: &Kernel, t: &Arc<TaskShared>, info: SigInfo) -> Result<(), QueueFull> {
    let sig = info.signo;
    if !on_send(kernel, &t.tg, sig) {
        return Ok(());
    }
    if discarded(&t.tg, sig, kept(t)) {
        return Ok(());
    }
    enqueue(&t.tg, Some(t), info)?;
    if wants_signal(t, sig) {
        kill_if_fatal(&t.tg, t, sig);
    }
    t.wake_for_queued(sig);
    Ok(())
}

/// A signal task `t` raises for itself from code that has only its shared
/// part at hand: a pipe write cut short by the reader leaving returns its
/// count and raises SIGPIPE all the same.
pub fn raise_for(t: &TaskShared, sig: u32) {
    if discarded(&t.tg, sig, kept(t)) {
        return;
    }
    let _ = enqueue(&t.tg, Some(t), SigInfo::user(sig, crate::signal::code::SI_USER, t.tg.tgid, t.tg.creds().uid.real));
    t.wake_for_queued(sig);
}

/// Linux's retarget_shared_pending: process signals in `which` that `t`
/// will not take (it blocks them now, or is exiting) are handed to other
/// threads that can take them.
pub(super) fn retarget_shared(t: &TaskShared, which: SigSet) {
    let mut retarget = SigSet(t.tg.shared_pending.lock().unwrap().pending().0 & which.0);
    if retarget.is_empty() {
        return;
    }
    let threads: Vec<Arc<TaskShared>> = t.tg.threads.lock().unwrap().clone();
    for other in threads.iter().filter(|o| !std::ptr::eq(o.as_ref(), t)) {
        if other.is_killed() {
            continue;
        }
        let (mask, pending) = {
            let s = other.sig.lock().unwrap();
            (s.mask, s.sigpending)
        };
        if retarget.minus(mask).is_empty() {
            continue;
        }
        // What this one can take is taken care of.
        retarget = SigSet(retarget.0 & mask.0);
        if !pending {
            other.signal_wake_up();
        }
        if retarget.is_empty() {
            break;
        }
    }
}

impl Task {
    /// A signal the task raised itself (SIGPIPE from a write, raise()).
    pub fn signal_self(&mut self, sig: u32) {
        let info = SigInfo::user(sig, crate::signal::code::SI_USER, self.tg.tgid, self.tg.creds().uid.real);
        send_to_thread(&self.kernel, &self.shared.clone(), info);
    }

    /// A signal caused by the instruction that just ran (a fault). It
    /// cannot be ignored or blocked: if it is, the default action applies.
    pub fn force_signal(&mut self, info: SigInfo, trap: (u64, u64, u64)) {
        let sig = info.signo;
        let handlers = self.tg.handlers();
        let mut h = handlers.lock().unwrap();
        let mut s = self.shared.sig.lock().unwrap();
        if h.get(sig).handler == SIG_IGN || s.mask.contains(sig) {
            h.set(sig, SigAction::default());
            s.mask.remove(sig);
        }
        // A fault's siginfo always has room (its code is positive).
        let _ = s.pending.enqueue(info, &self.tg.signal_account, self.tg.rlimit(g::RLIMIT_SIGPENDING).cur);
        s.sigpending = true;
        self.last_trap = trap;
    }

    /// Takes the next deliverable signal: the thread's own first.
    fn dequeue_signal(&self) -> Option<SigInfo> {
        let allowed = SigSet(!self.signal_mask().0);
        take_signal(&self.kernel, &self.shared, allowed)
    }

    /// Stops with the process until SIGCONT or death.
    fn stop_wait(&self) {
        let task = &self.shared;
        let _r = self.tg.thread_events.register(&task.waiter);
        loop {
            // A tracer that attaches takes the stop over (a ptrace stop).
            if task.is_killed() || !self.tg.state.lock().unwrap().stop_pending() || task.is_traced() {
                return;
            }
            task.waiter.sleep(None);
        }
    }

    /// True if this process's group is orphaned.
    fn pgrp_orphaned(&self) -> bool {
        let tree = self.kernel.procs.lock().unwrap();
        let pgid = tree.pgid_of(self.tg.tgid).unwrap_or(self.tg.tgid);
        tree.pgrp_orphaned(pgid, None)
    }

    /// A stop signal with its default action: the whole process stops.
    /// `continues` is the count of SIGCONTs when the signal was taken; a
    /// later one has already continued the process.
    fn group_stop(&self, sig: u32, continues: u64) {
        {
            let mut st = self.tg.state.lock().unwrap();
            if st.exit.is_some() || st.continues != continues {
                return;
            }
            st.stopped = Some(sig);
            st.stop_unreported = true;
            st.continue_unreported = false;
        }
        for t in self.tg.threads.lock().unwrap().iter() {
            t.notify();
        }
        notify_parent(&self.kernel, &self.tg, g::CLD_STOPPED as i32, sig as i32);
    }

    /// Decides what becomes of an interrupted system call now that a
    /// handler (`Some`) runs or none does (`None`).
    fn apply_restart(&mut self, handler: Option<&SigAction>) {
        let Some((err, nr)) = self.restart.take() else { return };
        let rewind = |t: &mut Task, rax: u64| {
            t.regs.rax = rax;
            t.regs.rip -= crate::arch::SYSCALL_INSN_LEN;
        };
        match (err, handler) {
            (Errno::ERESTART_RESTARTBLOCK, None) => rewind(self, NR_RESTART_SYSCALL),
            (_, None) => rewind(self, nr),
            (Errno::ERESTARTNOINTR, Some(_)) => rewind(self, nr),
            (Errno::ERESTARTSYS, Some(a)) if a.flags & flags::SA_RESTART != 0 => rewind(self, nr),
            (_, Some(_)) => self.regs.rax = Errno::EINTR.as_return(),
        }
    }

    /// Delivers pending signals before returning to application code.
    pub fn handle_signals(&mut self) {
        loop {
            if self.shared.is_killed() {
                return;
            }
            if self.ptrace_interrupt_stop() {
                continue;
            }
            if self.tg.state.lock().unwrap().stop_pending() {
                // A tracee reports its part in the stop to the tracer, and
                // runs on once resumed, as Linux's do_signal_stop.
                if self.ptrace_group_stop() {
                    continue;
                }
                if !self.shared.is_traced() {
                    self.stop_wait();
                    // Back from the stop: signals that came meanwhile are
                    // taken now.
                    self.shared.recalc_sigpending();
                    continue;
                }
            }
            if !self.shared.sig.lock().unwrap().sigpending {
                break;
            }
            // Read before the dequeue: a SIGCONT sent after it cancels a
            // stop signal taken here, as one sent before discards it.
            let continues = self.tg.state.lock().unwrap().continues;
            let Some(mut info) = self.dequeue_signal() else { break };
            if info.signo != g::SIGKILL && self.shared.is_traced() {
                // The signal-delivery stop: the tracer delivers this
                // signal, another, or none.
                match self.ptrace_signal(info) {
                    None => continue,
                    Some(i) if self.signal_mask().contains(i.signo) => {
                        send_to_thread(&self.kernel, &self.shared.clone(), i);
                        continue;
                    }
                    Some(i) => info = i,
                }
            }
            let sig = info.signo;
            let handlers = self.tg.handlers();
            let act = handlers.lock().unwrap().get(sig);
            if act.handler == SIG_IGN && sig != g::SIGKILL && sig != g::SIGSTOP {
                continue;
            }
            if act.handler == SIG_DFL || sig == g::SIGKILL || sig == g::SIGSTOP {
                match default_action(sig) {
                    DefaultAction::Ignore | DefaultAction::Continue => continue,
                    DefaultAction::Stop => {
                        // SIGTSTP, SIGTTIN and SIGTTOU would leave an
                        // orphaned group stopped for good: Linux drops them.
                        if sig != g::SIGSTOP && self.pgrp_orphaned() {
                            continue;
                        }
                        self.group_stop(sig, continues);
                        continue;
                    }
                    DefaultAction::Terminate | DefaultAction::CoreDump => {
                        group_exit(&self.tg, ExitStatus::Signaled { signal: sig, core: false });
                        return;
                    }
                }
            }
            self.apply_restart(Some(&act));
            if self.deliver_to_handler(&info, &act).is_err() {
                group_exit(&self.tg, ExitStatus::Signaled { signal: g::SIGSEGV, core: false });
                return;
            }
            if act.flags & flags::SA_RESETHAND != 0 {
                // Only the handler goes back to the default; the flags and
                // mask stay, as Linux's SA_ONESHOT leaves them.
                let mut h = handlers.lock().unwrap();
                let mut reset = h.get(sig);
                reset.handler = SIG_DFL;
                h.set(sig, reset);
            }
        }
        self.apply_restart(None);
        let saved = self.shared.sig.lock().unwrap().saved_mask.take();
        if let Some(m) = saved {
            self.set_signal_mask(m);
        }
    }

    /// Builds the frame of a handler and points the registers at it.
    fn deliver_to_handler(&mut self, info: &SigInfo, act: &SigAction) -> Result<(), FrameError> {
        if act.flags & flags::SA_RESTORER == 0 {
            // x86_64 has no kernel-provided return trampoline.
            return Err(FrameError::NoRestorer);
        }
        let fp = self.ctx.fp_state()?;
        let (base, size, ss_flags) = self.altstack;
        let enabled = ss_flags & g::SS_DISABLE == 0 && size > 0;
        let on_alt = enabled && self.regs.rsp > base && self.regs.rsp <= base + size;
        let use_alt = act.flags & flags::SA_ONSTACK != 0 && enabled && !on_alt;
        let shown_flags = if on_alt {
            g::SS_ONSTACK
        } else if enabled {
            ss_flags & g::SS_AUTODISARM
        } else {
            g::SS_DISABLE
        };
        let (mask_before, frame_mask) = {
            let mut s = self.shared.sig.lock().unwrap();
            let frame_mask = s.saved_mask.take().unwrap_or(s.mask);
            (s.mask, frame_mask)
        };
        let spec = FrameSpec {
            regs: &self.regs,
            fp: &fp,
            info,
            mask: frame_mask,
            restorer: act.restorer,
            stack_top: use_alt.then_some(base + size),
            altstack: (base, shown_flags, size),
            trap: std::mem::take(&mut self.last_trap),
        };
        // A frame on the alternate stack, whether it switches there or is
        // already on it (a nested signal), must fit in it, as Linux's
        // get_sigframe insists: one that would not is a SIGSEGV, never a
        // frame written below the stack over whatever lies there.
        let on_stack = |sp: u64| sp > base && sp - base <= size;
        if (use_alt || on_alt) && !frame_sp(&spec).is_some_and(on_stack) {
            return Err(FrameError::StackOverflow);
        }
        let placed = build_frame(&self.mm, &spec)?;
        if use_alt && ss_flags & g::SS_AUTODISARM != 0 {
            self.altstack = (0, 0, g::SS_DISABLE);
        }
        self.regs.rip = act.handler;
        self.regs.rsp = placed.sp;
        self.regs.rdi = info.signo as u64;
        self.regs.rsi = placed.info;
        self.regs.rdx = placed.ucontext;
        self.regs.rax = 0;
        // DF, TF and RF are clear on handler entry; the FPU starts fresh.
        self.regs.rflags &= !(0x400 | 0x100 | 0x1_0000);
        self.ctx.set_fp_state(&FpState::default())?;
        let mut new_mask = mask_before.union(act.mask);
        if act.flags & flags::SA_NODEFER == 0 {
            new_mask.add(info.signo);
        }
        self.set_signal_mask(new_mask);
        Ok(())
    }

    /// rt_sigreturn: restores what the frame at the stack pointer saved.
    /// As on Linux, the mask and registers are restored before the FPU
    /// state; an FPU image the CPU would refuse leaves the FPU reset and
    /// fails the call (the caller raises SIGSEGV).
    pub fn sigreturn(&mut self) -> Result<(), FrameError> {
        let r = restore_frame(&self.mm, self.regs.rsp, &self.regs)?;
        self.set_signal_mask(r.mask);
        self.regs = r.regs;
        let Some(fp) = r.fp else {
            self.ctx.set_fp_state(&FpState::default())?;
            return Err(FrameError::BadFpState);
        };
        self.ctx.set_fp_state(&fp)?;
        let (sp, fl, size) = r.altstack;
        let on_alt = self.altstack.2 & g::SS_DISABLE == 0
            && self.regs.rsp > self.altstack.0
            && self.regs.rsp <= self.altstack.0 + self.altstack.1;
        if !on_alt {
            if fl & g::SS_DISABLE != 0 || size == 0 {
                self.altstack = (0, 0, g::SS_DISABLE);
            } else {
                self.altstack = (sp, size, fl & g::SS_AUTODISARM);
            }
        }
        Ok(())
    }
}
