//! Signal state: dispositions, masks, default actions.

use linux_raw_sys::general as g;

/// Number of signals.
pub const NSIG: usize = 64;

/// A set of signals; bit `n - 1` is signal `n`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SigSet(pub u64);

impl SigSet {
    pub const EMPTY: SigSet = SigSet(0);

    pub fn of(sig: u32) -> SigSet {
        SigSet(1u64 << (sig - 1))
    }
    pub fn contains(self, sig: u32) -> bool {
        (1..=NSIG as u32).contains(&sig) && self.0 & (1u64 << (sig - 1)) != 0
    }
    /// SIGKILL and SIGSTOP can never be blocked.
    pub fn blockable(self) -> SigSet {
        SigSet(self.0 & !(Self::of(g::SIGKILL).0 | Self::of(g::SIGSTOP).0))
    }
}

/// What a signal does when it has no handler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DefaultAction {
    Terminate,
    /// Terminate, reporting a core dump in the wait status.
    CoreDump,
    Ignore,
    Stop,
    Continue,
}

/// The default action of `sig`.
pub fn default_action(sig: u32) -> DefaultAction {
    match sig {
        g::SIGCHLD | g::SIGURG | g::SIGWINCH => DefaultAction::Ignore,
        g::SIGCONT => DefaultAction::Continue,
        g::SIGSTOP | g::SIGTSTP | g::SIGTTIN | g::SIGTTOU => DefaultAction::Stop,
        g::SIGQUIT
        | g::SIGILL
        | g::SIGTRAP
        | g::SIGABRT
        | g::SIGBUS
        | g::SIGFPE
        | g::SIGSEGV
        | g::SIGXCPU
        | g::SIGXFSZ
        | g::SIGSYS => DefaultAction::CoreDump,
        _ => DefaultAction::Terminate,
    }
}

/// The disposition of one signal, as rt_sigaction stores it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SigAction {
    pub handler: u64,
    pub flags: u64,
    pub restorer: u64,
    pub mask: SigSet,
}

pub const SIG_DFL: u64 = 0;
pub const SIG_IGN: u64 = 1;

/// `struct sigaction` as the rt_sigaction system call takes it on x86_64
/// (handler, flags, restorer, mask).
#[derive(
    Clone, Copy, Debug, Default, zerocopy::FromBytes, zerocopy::IntoBytes, zerocopy::Immutable, zerocopy::KnownLayout,
)]
#[repr(C)]
pub struct KernelSigAction {
    pub handler: u64,
    pub flags: u64,
    pub restorer: u64,
    pub mask: u64,
}

impl SigAction {
    pub fn to_abi(&self) -> KernelSigAction {
        KernelSigAction { handler: self.handler, flags: self.flags, restorer: self.restorer, mask: self.mask.0 }
    }
    pub fn from_abi(k: &KernelSigAction) -> SigAction {
        SigAction { handler: k.handler, flags: k.flags, restorer: k.restorer, mask: SigSet(k.mask) }
    }
}

/// Dispositions of every signal (shared by threads of a process).
#[derive(Clone, Debug)]
pub struct SigHandlers {
    pub actions: [SigAction; NSIG],
}

impl Default for SigHandlers {
    fn default() -> Self {
        SigHandlers { actions: [SigAction::default(); NSIG] }
    }
}

impl SigHandlers {
    pub fn get(&self, sig: u32) -> SigAction {
        self.actions[sig as usize - 1]
    }
    pub fn set(&mut self, sig: u32, a: SigAction) {
        self.actions[sig as usize - 1] = a;
    }
    /// At execve: handled signals go back to their default; ignored ones
    /// stay ignored.
    pub fn reset_for_exec(&mut self) {
        for a in self.actions.iter_mut() {
            if a.handler != SIG_IGN {
                *a = SigAction::default();
            }
        }
    }
}

/// The C library's description of a signal ("Segmentation fault").
pub fn describe(sig: u32) -> String {
    // SAFETY: strsignal returns a pointer to a static or thread-local string
    // (or NULL), which is copied out immediately.
    let p = unsafe { libc::strsignal(sig as i32) };
    if p.is_null() {
        return format!("Signal {sig}");
    }
    // SAFETY: non-null and NUL-terminated per strsignal's contract.
    unsafe { std::ffi::CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_sets() {
        assert_eq!(default_action(g::SIGSEGV), DefaultAction::CoreDump);
        assert_eq!(default_action(g::SIGTERM), DefaultAction::Terminate);
        assert_eq!(default_action(g::SIGCHLD), DefaultAction::Ignore);
        let s = SigSet(u64::MAX).blockable();
        assert!(!s.contains(g::SIGKILL) && !s.contains(g::SIGSTOP) && s.contains(g::SIGINT));
        assert_eq!(describe(g::SIGSEGV), "Segmentation fault");
    }
}
