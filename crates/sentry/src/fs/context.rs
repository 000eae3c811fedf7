//! What a file-system operation knows of its caller: passed down with every
//! call that may check permissions, block or raise a signal, so the file
//! systems never reach for a "current task".

use std::sync::Arc;
use std::time::Instant;

use crate::auth::Creds;
use crate::waiter::{BlockError, Blocker, WaitQueue, Waiter, block_on};

/// The task making a call, as the file systems see it.
pub trait Caller: Blocker + super::AsAny {
    /// Raises `sig` for the caller itself, as Linux's `send_sig(sig,
    /// current)` does (SIGPIPE after a pipe write cut short).
    fn send_signal(&self, sig: u32);
    /// The caller's process id as the sandbox numbers it (0 for the
    /// sentry's own calls), for what a call records of its caller, such
    /// as a unix socket message's credentials.
    fn process_id(&self) -> i32 {
        0
    }
}

/// One call's context.
pub struct Context<'a> {
    /// The credentials every permission check of the call uses.
    pub creds: Arc<Creds>,
    pub caller: &'a dyn Caller,
}

impl<'a> Context<'a> {
    pub fn new(creds: Arc<Creds>, caller: &'a dyn Caller) -> Self {
        Context { creds, caller }
    }

    /// Waits until `ready` gives a value, woken by any of `queues`; fails
    /// when the caller is interrupted or `deadline` passes.
    pub fn block_on<T>(
        &self,
        queues: &[&WaitQueue],
        deadline: Option<Instant>,
        ready: impl FnMut() -> Option<T>,
    ) -> Result<T, BlockError> {
        block_on(self.caller, queues, deadline, ready)
    }

    /// The caller as the type that made it (the task layer's own), for
    /// layers above fs that know it.
    pub fn caller_as<T: 'static>(&self) -> Option<&T> {
        <dyn Caller as super::AsAny>::as_any(self.caller).downcast_ref::<T>()
    }

    /// A context for the sentry's own use (loading the first program,
    /// tests): the given credentials, and a caller that never sleeps (any
    /// wait fails as interrupted) and takes no signals.
    pub fn kernel(creds: Arc<Creds>) -> Context<'static> {
        static KERNEL: KernelCaller = KernelCaller;
        Context { creds, caller: &KERNEL }
    }

    /// [`Context::kernel`] with the credentials of root, for the sentry's
    /// own reads of files it has already opened (the loader reading an
    /// executable), where no permission is asked.
    pub fn internal() -> Context<'static> {
        static ROOT: std::sync::OnceLock<Arc<Creds>> = std::sync::OnceLock::new();
        Context::kernel(ROOT.get_or_init(|| Arc::new(Creds::new(0, 0, Vec::new()))).clone())
    }
}

/// The caller of [`Context::kernel`].
struct KernelCaller;

impl Blocker for KernelCaller {
    fn waiter(&self) -> &Arc<Waiter> {
        static WAITER: std::sync::OnceLock<Arc<Waiter>> = std::sync::OnceLock::new();
        WAITER.get_or_init(Waiter::new)
    }
    fn interrupted(&self) -> bool {
        true
    }
}

impl Caller for KernelCaller {
    fn send_signal(&self, _: u32) {}
}
