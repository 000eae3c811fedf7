//! The run loop of a task.

use std::time::Instant;

use crate::stats::EventKind;

use linux_raw_sys::general as g;
use platform::{Event, FastPathState};

use super::block::set_current;
use super::exit::{ExitKind, exit_thread};
use super::{ExitStatus, Task};
use crate::mm::{MmError, Rewrite, SiteTrap};
use crate::signal::{SigFields, SigInfo};

/// What restart_syscall resumes: a call with a timeout that a signal
/// without a handler (a stop, say) interrupted; it goes on until the same
/// deadline. A handler makes the call fail with EINTR instead.
#[derive(Clone, Copy, Debug)]
pub enum RestartBlock {
    /// nanosleep and relative clock_nanosleep; the time left is reported
    /// at `rem_addr` (if not 0) when interrupted again.
    Sleep { deadline: Instant, rem_addr: u64 },
    /// poll: the same descriptors.
    Poll { fds: u64, nfds: u64, deadline: Instant },
    /// futex wait with a timeout: the word is checked again.
    Futex { addr: u64, val: u32, bitset: u32, private: bool, deadline: Instant },
}

/// Thread-group id of the task on the calling host thread (0 if none).
pub fn current_tgid() -> i32 {
    super::block::current_opt().map(|t| t.tg.tgid).unwrap_or(0)
}

impl Task {
    /// A page fault the memory manager could not resolve.
    fn fault_signal(&mut self, f: platform::Fault, e: MmError) {
        if e.is_out_of_memory() {
            // No memory left to back the page: the OOM killer's answer,
            // SIGKILL for the faulting process, which nothing can catch.
            self.kernel.oom_kills.record();
            crate::task::send_to_group(&self.kernel, &self.tg, SigInfo::kernel(g::SIGKILL));
            return;
        }
        let (sig, code) = match e {
            MmError::BeyondEof => (g::SIGBUS, g::BUS_ADRERR as i32),
            MmError::Access => (g::SIGSEGV, g::SEGV_ACCERR as i32),
            _ => (g::SIGSEGV, g::SEGV_MAPERR as i32),
        };
        let err = u64::from(f.present) | (u64::from(f.access.write) << 1) | 4 | (u64::from(f.access.execute) << 4);
        let info = SigInfo { signo: sig, errno: 0, code, fields: SigFields::Fault { addr: f.addr } };
        self.force_signal(info, (err, platform::arch::vector::PAGE_FAULT as u64, f.addr));
    }

    /// What getpid, gettid, getppid, the id getters and
    /// sched_getaffinity answer for this task, for the platform to answer
    /// them without an exit. `parent` holds the parent's pid and the
    /// kernel's count of reparentings it was read at.
    fn fast_path_state(&self, parent: &mut (u64, i32)) -> FastPathState {
        let reparents = self.kernel.reparents.load(std::sync::atomic::Ordering::Acquire);
        if parent.0 != reparents {
            *parent = (reparents, self.ppid());
        }
        let c = self.tg.creds();
        let affinity = self.shared.affinity.lock().unwrap();
        FastPathState {
            pid: self.tg.tgid,
            tid: self.tid(),
            ppid: parent.1,
            uid: c.uid.real,
            euid: c.uid.effective,
            gid: c.gid.real,
            egid: c.gid.effective,
            affinity: <[u8; 8]>::try_from(affinity.as_slice()).ok().map(u64::from_le_bytes),
        }
    }

    /// An invalid opcode or breakpoint that a rewritten system call site
    /// explains (see [`MemoryManager::site_trap`]); moves rip to where the
    /// call returns or to the instruction to run again.
    ///
    /// [`MemoryManager::site_trap`]: crate::mm::MemoryManager::site_trap
    fn site_trap(&mut self, x: &platform::Exception) -> Option<SiteTrap> {
        use platform::arch::vector;
        let breakpoint = match x.vector {
            vector::BREAKPOINT => true,
            vector::INVALID_OPCODE => false,
            _ => return None,
        };
        let trap = self.mm.site_trap(breakpoint, self.regs.rip)?;
        match (trap, breakpoint) {
            (SiteTrap::Syscall, _) => self.regs.rip += 2,
            (SiteTrap::Retry, true) => self.regs.rip -= 1,
            (SiteTrap::Retry, false) => {}
        }
        Some(trap)
    }

    /// A CPU exception other than a page fault.
    fn exception_signal(&mut self, x: platform::Exception) {
        let mut code = [0u8; 2];
        let x = if x.vector == platform::arch::vector::INVALID_OPCODE
            && self.mm.copy_in(self.regs.rip, &mut code).is_ok()
        {
            crate::arch::refused_software_interrupt(&x, &code).unwrap_or(x)
        } else {
            x
        };
        let (sig, code) = crate::arch::exception_signal(&x, || self.ctx.fp_state().ok());
        let addr = if code == g::SI_KERNEL as i32 { 0 } else { self.regs.rip };
        let info = SigInfo { signo: sig, errno: 0, code, fields: SigFields::Fault { addr } };
        self.force_signal(info, (x.error_code, x.vector as u64, 0));
    }
}

/// Runs a task until it exits, then tears it down.
pub fn run_task(mut task: Task) {
    set_current(Some(task.shared.clone()));
    task.shared.set_interrupter(Some(task.ctx.interrupter()));
    task.shared.start_cpu_clock(task.ctx.cpu_clock());
    let kernel = task.kernel.clone();
    let timing = kernel.stats.timing();
    let born = timing.then(Instant::now);
    // With --strace every call must reach the sentry to be printed.
    let fast_paths = !kernel.config.strace;
    let mut parent = (u64::MAX, 0);
    let trampoline = kernel.platform.syscall_trampoline().filter(|_| kernel.config.rewrite_sites);
    let answers_in_table = trampoline.is_some_and(|t| t.answers_in_table);
    loop {
        task.handle_signals();
        if task.shared.is_killed() {
            break;
        }
        // A tracee's every call reaches the sentry, for its tracer to see.
        let traced = task.shared.is_traced();
        let state = (fast_paths && !traced).then(|| task.fast_path_state(&mut parent));
        if state.is_some() || traced {
            task.ctx.publish_fast_path(state);
        }
        if answers_in_table {
            let hits = task.mm.publish_answers(task.tg.tgid, state.map(|s| s.answers()));
            kernel.stats.record_fast_path_hits(&hits);
        }
        let event = match task.ctx.switch(&**task.mm.space(), &mut task.regs) {
            Ok(e) => e,
            Err(e) => {
                crate::diag::line(format_args!("cordon: task {} stopped: {e}", task.tid()));
                task.request_exit(ExitKind::Group(ExitStatus::Signaled { signal: g::SIGKILL, core: false }));
                break;
            }
        };
        let started = timing.then(Instant::now);
        let kind = match event {
            Event::Syscall => {
                let nr = task.regs.syscall_number();
                let rewritten = task.ctx.last_call_rewritten();
                let kept = match trampoline
                    .filter(|_| !rewritten && !traced)
                    .map(|t| task.mm.rewrite_site(task.regs.rip, nr, &t))
                {
                    Some(Rewrite::NewlyPatched) => {
                        kernel.stats.record_rewritten_site();
                        false
                    }
                    Some(Rewrite::Patched) => false,
                    Some(Rewrite::Kept) => true,
                    None => !rewritten,
                };
                if kept && fast_paths && !traced && platform::FAST_PATH_SYSCALLS.contains(&nr) {
                    task.ctx.fast_path_site_kept(task.regs.rip);
                }
                crate::syscalls::dispatch(&mut task);
                EventKind::Syscall
            }
            Event::Fault(f) => {
                match task.mm.handle_fault(f.addr, f.access) {
                    Ok(pages) => kernel.stats.record_fault(Some(pages)),
                    Err(e) => {
                        kernel.stats.record_fault(None);
                        task.fault_signal(f, e);
                    }
                }
                EventKind::PageFault
            }
            Event::Exception(x) => match task.site_trap(&x) {
                Some(SiteTrap::Syscall) => {
                    crate::syscalls::dispatch(&mut task);
                    EventKind::Syscall
                }
                Some(SiteTrap::Retry) => EventKind::Exception,
                None => {
                    task.exception_signal(x);
                    EventKind::Exception
                }
            },
            Event::Interrupted => EventKind::Interrupt,
        };
        kernel.stats.record_event(kind, started.map(|s| s.elapsed()));
    }
    task.ptrace_exit_event();
    task.shared.set_interrupter(None);
    exit_thread(task);
    if let Some(b) = born {
        kernel.stats.record_task_lifetime(b.elapsed());
    }
    set_current(None);
}
