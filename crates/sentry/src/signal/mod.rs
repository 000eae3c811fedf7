//! Signal state: dispositions, masks, pending queues, siginfo, default
//! actions.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

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
    pub fn add(&mut self, sig: u32) {
        self.0 |= Self::of(sig).0;
    }
    pub fn remove(&mut self, sig: u32) {
        self.0 &= !Self::of(sig).0;
    }
    pub fn union(self, o: SigSet) -> SigSet {
        SigSet(self.0 | o.0)
    }
    pub fn minus(self, o: SigSet) -> SigSet {
        SigSet(self.0 & !o.0)
    }
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

/// Signals raised by the CPU for the instruction that just ran; they are
/// delivered before any other pending signal.
pub const SYNCHRONOUS: SigSet = SigSet(
    (1 << (g::SIGSEGV - 1))
        | (1 << (g::SIGBUS - 1))
        | (1 << (g::SIGILL - 1))
        | (1 << (g::SIGTRAP - 1))
        | (1 << (g::SIGFPE - 1))
        | (1 << (g::SIGSYS - 1)),
);

/// The stop signals.
pub const STOP_SIGNALS: SigSet =
    SigSet((1 << (g::SIGSTOP - 1)) | (1 << (g::SIGTSTP - 1)) | (1 << (g::SIGTTIN - 1)) | (1 << (g::SIGTTOU - 1)));

/// First real-time signal: these queue every instance.
pub const SIGRTMIN: u32 = 32;

/// What a siginfo carries beyond number, errno and code.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SigFields {
    #[default]
    None,
    /// kill, tkill, tgkill: the sender.
    Kill { pid: i32, uid: u32 },
    /// sigqueue and the like: the sender and a value.
    Queue { pid: i32, uid: u32, value: u64 },
    /// A fault: the address.
    Fault { addr: u64 },
    /// A child changed state.
    Child { pid: i32, uid: u32, status: i32, utime: i64, stime: i64 },
    /// A POSIX timer expired. `key` and `seq` name the timer and its
    /// arming inside the sentry (not part of the ABI): a signal of an
    /// arming that was replaced, or of a deleted timer, is dropped.
    Timer { id: i32, overrun: i32, value: u64, key: u64, seq: u64 },
    /// Raw bytes from rt_sigqueueinfo, kept as given past the header.
    Raw([u8; 112]),
}

/// A signal instance with its siginfo.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SigInfo {
    pub signo: u32,
    pub errno: i32,
    pub code: i32,
    pub fields: SigFields,
}

/// si_code values.
pub mod code {
    use linux_raw_sys::general as g;
    pub const SI_USER: i32 = g::SI_USER as i32;
    pub const SI_KERNEL: i32 = g::SI_KERNEL as i32;
    pub const SI_QUEUE: i32 = g::SI_QUEUE;
    pub const SI_TIMER: i32 = g::SI_TIMER;
    pub const SI_TKILL: i32 = g::SI_TKILL;
}

impl SigInfo {
    /// A signal sent with kill(2) and friends by process `pid`, whose real
    /// user id is `uid`.
    pub fn user(signo: u32, code: i32, pid: i32, uid: u32) -> SigInfo {
        SigInfo { signo, errno: 0, code, fields: SigFields::Kill { pid, uid } }
    }

    /// A signal the kernel sends for no particular sender.
    pub fn kernel(signo: u32) -> SigInfo {
        SigInfo { signo, errno: 0, code: code::SI_KERNEL, fields: SigFields::None }
    }

    /// The 128-byte x86_64 siginfo_t.
    pub fn to_bytes(&self) -> [u8; 128] {
        let mut b = [0u8; 128];
        b[0..4].copy_from_slice(&self.signo.to_le_bytes());
        b[4..8].copy_from_slice(&self.errno.to_le_bytes());
        b[8..12].copy_from_slice(&self.code.to_le_bytes());
        let mut put = |off: usize, v: &[u8]| b[off..off + v.len()].copy_from_slice(v);
        match self.fields {
            SigFields::None => {}
            SigFields::Kill { pid, uid } => {
                put(16, &pid.to_le_bytes());
                put(20, &uid.to_le_bytes());
            }
            SigFields::Queue { pid, uid, value } => {
                put(16, &pid.to_le_bytes());
                put(20, &uid.to_le_bytes());
                put(24, &value.to_le_bytes());
            }
            SigFields::Fault { addr } => put(16, &addr.to_le_bytes()),
            SigFields::Child { pid, uid, status, utime, stime } => {
                put(16, &pid.to_le_bytes());
                put(20, &uid.to_le_bytes());
                put(24, &status.to_le_bytes());
                put(32, &utime.to_le_bytes());
                put(40, &stime.to_le_bytes());
            }
            SigFields::Timer { id, overrun, value, .. } => {
                put(16, &id.to_le_bytes());
                put(20, &overrun.to_le_bytes());
                put(24, &value.to_le_bytes());
            }
            SigFields::Raw(r) => put(16, &r),
        }
        b
    }

    /// A siginfo given by the application (rt_sigqueueinfo), signal number
    /// forced to `signo`.
    pub fn from_bytes(signo: u32, b: &[u8; 128]) -> SigInfo {
        let i32_at = |o: usize| i32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        let mut raw = [0u8; 112];
        raw.copy_from_slice(&b[16..128]);
        SigInfo { signo, errno: i32_at(4), code: i32_at(8), fields: SigFields::Raw(raw) }
    }
}

/// Signals queued for a user, counted against RLIMIT_SIGPENDING as Linux
/// counts them: every queued siginfo, whoever sent it. The processes of a
/// sandbox share one account (they are one user of the host).
#[derive(Debug, Default)]
pub struct SignalAccount {
    queued: AtomicU64,
}

/// Most siginfos the sentry keeps queued for one account whatever the
/// limit says: signals past it are still delivered, without their siginfo.
const MAX_QUEUED: u64 = 1 << 20;

impl SignalAccount {
    /// Siginfos queued now.
    pub fn queued(&self) -> u64 {
        self.queued.load(Ordering::Relaxed)
    }

    /// Room for one more siginfo: always given when `enforce` is false (the
    /// count still grows), else only while the count stays within `limit`.
    fn charge(self: &Arc<Self>, limit: u64, enforce: bool) -> Option<Charge> {
        let limit = if enforce { limit.min(MAX_QUEUED) } else { MAX_QUEUED };
        let n = self.queued.fetch_add(1, Ordering::Relaxed) + 1;
        if n > limit {
            self.queued.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        Some(Charge(self.clone()))
    }
}

/// One queued siginfo's place in its account, given back when dropped.
#[derive(Debug)]
struct Charge(Arc<SignalAccount>);

impl Drop for Charge {
    fn drop(&mut self) {
        self.0.queued.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A queued signal instance and what it costs its account.
#[derive(Debug)]
struct Queued {
    info: SigInfo,
    _charge: Charge,
}

/// A real-time signal sent with a siginfo of the sender's (sigqueue,
/// tgkill) found the queue full: the send fails with EAGAIN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueFull;

/// Pending signals: one instance of each standard signal, every instance of
/// a real-time one, each with its siginfo. A signal can be pending without
/// a siginfo when there was no room for one (Linux's lost siginfo); it is
/// then delivered as a kill from pid 0.
#[derive(Debug, Default)]
pub struct SigQueue {
    set: SigSet,
    infos: VecDeque<Queued>,
}

impl SigQueue {
    pub fn pending(&self) -> SigSet {
        self.set
    }

    /// Adds a signal, its siginfo charged to `account` within `limit` as
    /// Linux's __send_signal does. A standard signal already pending is not
    /// queued again (except a POSIX timer's, which has a queue entry of its
    /// own, as on Linux). Only real-time signals sent with a siginfo of the
    /// sender's are refused when there is no room; others lose their
    /// siginfo, and standard ones sent by kill or the kernel always get
    /// one. Returns false if the signal was already pending.
    pub fn enqueue(&mut self, info: SigInfo, account: &Arc<SignalAccount>, limit: u64) -> Result<bool, QueueFull> {
        let timer = matches!(info.fields, SigFields::Timer { .. });
        if info.signo < SIGRTMIN && self.set.contains(info.signo) && !timer {
            return Ok(false);
        }
        let enforce = !timer && (info.signo >= SIGRTMIN || info.code < 0);
        match account.charge(limit, enforce) {
            Some(c) => self.infos.push_back(Queued { info, _charge: c }),
            None if info.signo >= SIGRTMIN && info.code != code::SI_USER => return Err(QueueFull),
            None => {}
        }
        self.set.add(info.signo);
        Ok(true)
    }

    /// Takes the next signal allowed by `allowed`: synchronous ones first,
    /// then the lowest number; real-time instances in order.
    pub fn dequeue(&mut self, allowed: SigSet) -> Option<SigInfo> {
        let ready = SigSet(self.set.0 & allowed.0);
        if ready.is_empty() {
            return None;
        }
        let sync = SigSet(ready.0 & SYNCHRONOUS.0);
        let pick = if sync.is_empty() { ready } else { sync };
        let sig = pick.0.trailing_zeros() + 1;
        self.take(sig)
    }

    /// Takes the first instance of `sig`.
    pub fn take(&mut self, sig: u32) -> Option<SigInfo> {
        if !self.set.contains(sig) {
            return None;
        }
        let Some(i) = self.infos.iter().position(|s| s.info.signo == sig) else {
            // Pending without a siginfo.
            self.set.remove(sig);
            return Some(SigInfo {
                signo: sig,
                errno: 0,
                code: code::SI_USER,
                fields: SigFields::Kill { pid: 0, uid: 0 },
            });
        };
        let q = self.infos.remove(i).expect("present");
        if !self.infos.iter().any(|s| s.info.signo == sig) {
            self.set.remove(sig);
        }
        Some(q.info)
    }

    /// True if some queued signal passes `f`.
    pub fn any(&self, f: impl Fn(&SigInfo) -> bool) -> bool {
        self.infos.iter().any(|q| f(&q.info))
    }

    /// Discards every instance of the signals in `set`.
    pub fn discard(&mut self, set: SigSet) {
        self.infos.retain(|s| !set.contains(s.info.signo));
        self.set = self.set.minus(set);
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

/// sigaction flags.
pub mod flags {
    use linux_raw_sys::general as g;
    pub const SA_NOCLDSTOP: u64 = g::SA_NOCLDSTOP as u64;
    pub const SA_NOCLDWAIT: u64 = g::SA_NOCLDWAIT as u64;
    pub const SA_SIGINFO: u64 = g::SA_SIGINFO as u64;
    pub const SA_ONSTACK: u64 = g::SA_ONSTACK as u64;
    pub const SA_RESTART: u64 = g::SA_RESTART as u64;
    pub const SA_NODEFER: u64 = g::SA_NODEFER as u64;
    pub const SA_RESETHAND: u64 = g::SA_RESETHAND as u64;
    pub const SA_RESTORER: u64 = g::SA_RESTORER as u64;
}

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
    /// True if a signal with this disposition would be dropped when sent:
    /// ignored explicitly, or by default and not a stop signal.
    pub fn ignores(&self, sig: u32) -> bool {
        let a = self.get(sig);
        a.handler == SIG_IGN || (a.handler == SIG_DFL && default_action(sig) == DefaultAction::Ignore)
    }

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
    fn standard_signals_coalesce_realtime_ones_queue() {
        let acct = Arc::new(SignalAccount::default());
        let mut q = SigQueue::default();
        let mut put = |i| q.enqueue(i, &acct, 100);
        assert_eq!(put(SigInfo::kernel(g::SIGUSR1)), Ok(true));
        assert_eq!(put(SigInfo::kernel(g::SIGUSR1)), Ok(false));
        assert_eq!(put(SigInfo::kernel(40)), Ok(true));
        assert_eq!(put(SigInfo::kernel(40)), Ok(true));
        assert_eq!(put(SigInfo::kernel(g::SIGSEGV)), Ok(true));
        assert_eq!(acct.queued(), 4);
        assert_eq!(q.dequeue(SigSet(u64::MAX)).unwrap().signo, g::SIGSEGV, "synchronous first");
        assert_eq!(q.dequeue(SigSet(u64::MAX)).unwrap().signo, g::SIGUSR1);
        assert_eq!(q.dequeue(SigSet::of(g::SIGUSR2)), None, "blocked signals stay");
        assert_eq!(q.dequeue(SigSet(u64::MAX)).unwrap().signo, 40);
        assert!(q.pending().contains(40), "second instance still pending");
        assert_eq!(q.dequeue(SigSet(u64::MAX)).unwrap().signo, 40);
        assert!(q.pending().is_empty());
        assert_eq!(acct.queued(), 0, "every charge given back");
    }

    #[test]
    fn a_full_queue_refuses_only_realtime_siginfos() {
        let acct = Arc::new(SignalAccount::default());
        let mut q = SigQueue::default();
        let queued = |signo, code| SigInfo { signo, errno: 0, code, fields: SigFields::None };
        assert_eq!(q.enqueue(queued(40, code::SI_QUEUE), &acct, 1), Ok(true));
        assert_eq!(q.enqueue(queued(40, code::SI_QUEUE), &acct, 1), Err(QueueFull));
        assert_eq!(q.enqueue(queued(41, code::SI_TKILL), &acct, 1), Err(QueueFull));
        assert_eq!(q.enqueue(queued(41, code::SI_USER), &acct, 1), Ok(true), "kill loses the siginfo");
        assert_eq!(q.enqueue(queued(g::SIGUSR1, code::SI_QUEUE), &acct, 1), Ok(true));
        assert_eq!(q.enqueue(SigInfo::kernel(g::SIGUSR2), &acct, 1), Ok(true), "kernel signals have room");
        assert_eq!(acct.queued(), 2);
        let lost = q.take(g::SIGUSR1).unwrap();
        assert_eq!((lost.code, lost.fields), (code::SI_USER, SigFields::Kill { pid: 0, uid: 0 }));
        assert_eq!(q.take(41).unwrap().fields, SigFields::Kill { pid: 0, uid: 0 });
        assert_eq!(q.take(40).unwrap().code, code::SI_QUEUE);
        assert_eq!(q.take(g::SIGUSR2).unwrap().code, code::SI_KERNEL);
        assert_eq!(acct.queued(), 0);
    }

    #[test]
    fn siginfo_layout() {
        let i = SigInfo {
            signo: 17,
            errno: 0,
            code: 1,
            fields: SigFields::Child { pid: 5, uid: 7, status: 3, utime: 0, stime: 0 },
        };
        let b = i.to_bytes();
        assert_eq!(i32::from_le_bytes(b[0..4].try_into().unwrap()), 17);
        assert_eq!(i32::from_le_bytes(b[16..20].try_into().unwrap()), 5);
        assert_eq!(i32::from_le_bytes(b[24..28].try_into().unwrap()), 3);
        let f = SigInfo { signo: 11, errno: 0, code: 2, fields: SigFields::Fault { addr: 0xdead } }.to_bytes();
        assert_eq!(u64::from_le_bytes(f[16..24].try_into().unwrap()), 0xdead);
    }

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
