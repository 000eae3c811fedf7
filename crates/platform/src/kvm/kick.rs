//! Interrupting a vCPU from another thread.
//!
//! The interrupter sets `immediate_exit` in the vCPU's shared run area, so a
//! `KVM_RUN` that has not started yet returns at once, and signals the thread
//! if it is inside `KVM_RUN`, which makes KVM return `EINTR`.

use std::sync::Once;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use kvm_bindings::kvm_run;

use crate::Interrupter;

/// The host signal used to kick a vCPU thread out of `KVM_RUN`.
pub(crate) fn kick_signal() -> i32 {
    libc::SIGRTMIN() + 1
}

extern "C" fn on_kick(_: libc::c_int) {}

/// Installs the (empty) kick handler once per process. SA_RESTART keeps the
/// sentry's own host calls from failing with EINTR; `KVM_RUN` still returns
/// EINTR, which is what wakes the vCPU.
pub(crate) fn install_handler() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: an all-zero sigaction is a valid value to fill in; the
        // handler is async-signal-safe (it does nothing).
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_kick as *const () as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(kick_signal(), &sa, std::ptr::null_mut());
        }
    });
}

pub(crate) struct Kick {
    run: *mut kvm_run,
    /// The host thread inside `KVM_RUN`, or 0.
    pub(crate) tid: AtomicI32,
    pending: AtomicBool,
    /// Cleared when the vCPU goes back to the pool: a stale handle must not
    /// disturb the next task to use it.
    attached: AtomicBool,
}

// SAFETY: `run` points into the vCPU's mmap'ed run area, which lives as long
// as the platform (vCPUs are pooled, never closed before it); only the
// immediate_exit byte is written through it, which KVM reads with
// READ_ONCE.
unsafe impl Send for Kick {}
// SAFETY: as above; all other state is atomic.
unsafe impl Sync for Kick {}

impl Kick {
    pub(crate) fn new(run: *mut kvm_run) -> Self {
        Kick { run, tid: AtomicI32::new(0), pending: AtomicBool::new(false), attached: AtomicBool::new(true) }
    }

    /// Consumes a pending interrupt.
    pub(crate) fn take_pending(&self) -> bool {
        if self.pending.swap(false, Ordering::AcqRel) {
            self.set_immediate_exit(false);
            true
        } else {
            false
        }
    }

    pub(crate) fn set_immediate_exit(&self, on: bool) {
        // SAFETY: see the Send impl; a single byte store to the run area.
        unsafe { std::ptr::write_volatile(&raw mut (*self.run).immediate_exit, u8::from(on)) }
    }

    pub(crate) fn detach(&self) {
        self.attached.store(false, Ordering::Release);
    }
}

impl Interrupter for Kick {
    fn interrupt(&self) {
        if !self.attached.load(Ordering::Acquire) {
            return;
        }
        self.pending.store(true, Ordering::Release);
        self.set_immediate_exit(true);
        let tid = self.tid.load(Ordering::Acquire);
        if tid != 0 {
            // SAFETY: tgkill on a thread of our own process; a thread that
            // has just left KVM_RUN ignores the signal (empty handler).
            unsafe {
                libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, kick_signal());
            }
        }
    }
}
