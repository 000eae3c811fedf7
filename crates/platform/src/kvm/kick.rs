//! Interrupting a vCPU from another thread.
//!
//! The interrupter sets `immediate_exit` in the vCPU's shared run area, so a
//! `KVM_RUN` that has not started yet returns at once, and signals the thread
//! if it is inside `KVM_RUN`, which makes KVM return `EINTR`.

use std::sync::Once;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, Ordering};

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

/// How other threads interrupt one context. It belongs to the context, not
/// to a vCPU: a task keeps the same handle while it moves between vCPUs.
pub(crate) struct Kick {
    /// The run area of the vCPU the context holds, or null.
    run: AtomicPtr<kvm_run>,
    /// The host thread inside `KVM_RUN`, or 0.
    pub(crate) tid: AtomicI32,
    pending: AtomicBool,
    /// Set by a thread waiting for a vCPU: the holder should give its vCPU
    /// up at its next switch.
    yield_requested: AtomicBool,
}

impl Kick {
    pub(crate) fn new() -> Self {
        Kick {
            run: AtomicPtr::new(std::ptr::null_mut()),
            tid: AtomicI32::new(0),
            pending: AtomicBool::new(false),
            yield_requested: AtomicBool::new(false),
        }
    }

    /// Points the kick at the run area of the vCPU the context now holds,
    /// carrying a pending interrupt over to it.
    pub(crate) fn attach(&self, run: *mut kvm_run) {
        // SeqCst pairs with `interrupt`: either it sees the run area, or
        // this sees its pending flag.
        self.run.store(run, Ordering::SeqCst);
        let pending = self.pending.load(Ordering::SeqCst);
        self.set_immediate_exit(pending);
    }

    /// Forgets the run area of a vCPU the context gives up.
    pub(crate) fn detach(&self) {
        self.set_immediate_exit(false);
        self.run.store(std::ptr::null_mut(), Ordering::SeqCst);
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
        let run = self.run.load(Ordering::SeqCst);
        if run.is_null() {
            return;
        }
        // SAFETY: `run` points into the mmap'ed run area of a vCPU, which
        // lives as long as the platform (vCPUs are pooled, never closed
        // before it); only the immediate_exit byte is written, which KVM
        // reads with READ_ONCE. A store that lands after the vCPU has moved
        // to another context at worst makes that context's next run return
        // at once, as a spurious interruption.
        unsafe { std::ptr::write_volatile(&raw mut (*run).immediate_exit, u8::from(on)) }
    }

    /// Asks the holder to give its vCPU up, and interrupts it.
    pub(crate) fn request_yield(&self) {
        self.yield_requested.store(true, Ordering::Release);
        self.interrupt();
    }

    pub(crate) fn take_yield_request(&self) -> bool {
        self.yield_requested.swap(false, Ordering::AcqRel)
    }
}

impl Interrupter for Kick {
    fn interrupt(&self) {
        self.pending.store(true, Ordering::SeqCst);
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
