//! The run loop of a task.

use std::cell::Cell;

use linux_raw_sys::general as g;
use platform::Event;

use super::{ExitStatus, Task};
use crate::mm::MmError;
use crate::signal::{DefaultAction, default_action};

thread_local! {
    /// Thread-group id of the task running on this host thread.
    static CURRENT_TGID: Cell<i32> = const { Cell::new(0) };
}

/// Thread-group id of the task on the calling host thread.
pub fn current_tgid() -> i32 {
    CURRENT_TGID.with(|c| c.get())
}

impl Task {
    /// A signal the task sends itself (kill on its own pid, SIGPIPE from a
    /// write). Ignored signals vanish; the default action applies otherwise
    /// (running handlers comes with signal delivery).
    pub fn signal_self(&mut self, sig: u32) {
        let act = self.tg.handlers.lock().unwrap().get(sig);
        let catchable = sig != g::SIGKILL && sig != g::SIGSTOP;
        if catchable && (act.handler == crate::signal::SIG_IGN || act.handler != crate::signal::SIG_DFL) {
            return;
        }
        if catchable && self.signal_mask.contains(sig) {
            return;
        }
        self.force_signal(sig);
    }

    /// A synchronous signal caused by the task itself (fault, exception).
    /// Handlers are not run yet: the default action applies.
    fn force_signal(&mut self, sig: u32) {
        match default_action(sig) {
            DefaultAction::Ignore | DefaultAction::Continue | DefaultAction::Stop => {}
            DefaultAction::Terminate | DefaultAction::CoreDump => {
                self.exit_group(ExitStatus::Signaled { signal: sig, core: false })
            }
        }
    }
}

/// Runs application code until the task exits; returns how it ended.
pub fn run_task(mut task: Task) -> ExitStatus {
    CURRENT_TGID.with(|c| c.set(task.tg.tgid));
    while task.exit.is_none() {
        let event = match task.ctx.switch(&**task.mm.space(), &mut task.regs) {
            Ok(e) => e,
            Err(e) => {
                eprintln!("cordon: task {} stopped: {e}", task.tid);
                task.exit_group(ExitStatus::Signaled { signal: g::SIGKILL, core: false });
                break;
            }
        };
        match event {
            Event::Syscall => crate::syscalls::dispatch(&mut task),
            Event::Fault(f) => {
                if let Err(e) = task.mm.handle_fault(f.addr, f.access) {
                    let sig = if matches!(e, MmError::BeyondEof) { g::SIGBUS } else { g::SIGSEGV };
                    task.force_signal(sig);
                }
            }
            Event::Exception(x) => {
                let (sig, _code) = crate::arch::exception_signal(&x);
                task.force_signal(sig);
            }
            Event::Interrupted => {}
        }
        if task.exit.is_none()
            && let Some(e) = *task.tg.exit.lock().unwrap()
        {
            task.exit = Some(e);
        }
    }
    let status = task.exit.expect("loop ends on exit");
    task.kernel.processes.remove(task.tg.tgid);
    status
}
