//! The control file: a memfd the sentry, the factory and every stub share.
//! Its first slot-sized region is the factory's page; slot `n` of a stub
//! follows at `(n + 1) * SLOT_SIZE`. A stub maps only its own slot, and its
//! request page read-only.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::stub;

/// Stub processes alive at once: address spaces of the sandbox, which a
/// program with a few hundred processes needs (the factory page's tables
/// fill its page at this count).
pub(crate) const MAX_STUBS: usize = 512;
/// Bytes of the control file.
pub(crate) const FILE_SIZE: u64 = (MAX_STUBS as u64 + 1) * stub::SLOT_SIZE;

// The factory page.
const F_REQ_SLOT: usize = 0;
const F_REPLY_SEQ: usize = 4;
const F_REPLY_PID: usize = 8;
/// What the factory did without while it confined itself (`KEPT_*` bits
/// of the factory module; written by the factory only, before its first
/// reply).
const F_SETUP_KEPT: usize = 12;
/// One byte per slot: the stub there died (written by the factory only).
const F_DEAD: usize = 1024;
/// One word per slot: the highest thread area the sentry handed out
/// (written by the sentry only).
const F_HIGH: usize = 2048;
/// One word per slot: how the stub there ended, as `waitpid` told the
/// factory, plus one (0 while it lives; written by the factory only).
const F_STATUS: usize = 4096;
const _: () = assert!(
    F_DEAD + MAX_STUBS <= F_HIGH && F_HIGH + 4 * MAX_STUBS <= F_STATUS && F_STATUS + 4 * MAX_STUBS <= 8192,
    "the factory's pages hold every slot"
);

/// Offset of slot `n` in the control file.
pub(crate) fn slot_offset(n: usize) -> u64 {
    (n as u64 + 1) * stub::SLOT_SIZE
}

fn word(base: *mut u8, off: usize) -> &'static AtomicU32 {
    // SAFETY: `base` maps the whole control file for the life of the
    // process (the sentry never unmaps it; the factory inherits it), and
    // every offset used is 4-aligned and inside it.
    unsafe { &*base.add(off).cast::<AtomicU32>() }
}

/// The factory's page, seen from the sentry or from the factory.
#[derive(Clone, Copy)]
pub(crate) struct FactoryPage(pub *mut u8);

impl FactoryPage {
    pub(crate) fn request_slot(&self) -> u32 {
        word(self.0, F_REQ_SLOT).load(Ordering::Acquire)
    }
    pub(crate) fn set_request_slot(&self, slot: u32) {
        word(self.0, F_REQ_SLOT).store(slot, Ordering::Release)
    }
    /// The reply sequence before a request.
    pub(crate) fn reply_seq(&self) -> u32 {
        word(self.0, F_REPLY_SEQ).load(Ordering::Acquire)
    }
    /// Posts the pid of a new stub (negative: none).
    pub(crate) fn reply(&self, pid: i32) {
        word(self.0, F_REPLY_PID).store(pid as u32, Ordering::Release);
        word(self.0, F_REPLY_SEQ).fetch_add(1, Ordering::AcqRel);
        futex_wake(word(self.0, F_REPLY_SEQ));
    }
    /// Waits for the reply after `seq`; the new stub's pid.
    pub(crate) fn wait_reply(&self, seq: u32) -> i32 {
        let w = word(self.0, F_REPLY_SEQ);
        while w.load(Ordering::Acquire) == seq {
            futex_wait(w, seq);
        }
        word(self.0, F_REPLY_PID).load(Ordering::Acquire) as i32
    }
    pub(crate) fn set_setup_kept(&self, kept: u32) {
        word(self.0, F_SETUP_KEPT).store(kept, Ordering::Release)
    }
    pub(crate) fn setup_kept(&self) -> u32 {
        word(self.0, F_SETUP_KEPT).load(Ordering::Acquire)
    }
    /// Records how the stub of `slot` ended (a `waitpid` status), or
    /// clears the record for a new stub.
    pub(crate) fn set_wait_status(&self, slot: usize, status: Option<i32>) {
        word(self.0, F_STATUS + 4 * slot).store(status.map_or(0, |s| s as u32 + 1), Ordering::Release)
    }
    /// How the stub of `slot` ended, once the factory reaped it.
    pub(crate) fn wait_status(&self, slot: usize) -> Option<i32> {
        match word(self.0, F_STATUS + 4 * slot).load(Ordering::Acquire) {
            0 => None,
            s => Some(s.wrapping_sub(1) as i32),
        }
    }
    pub(crate) fn set_dead(&self, slot: usize, dead: bool) {
        // SAFETY: as in `word`; one byte per slot inside the factory page.
        unsafe {
            (*self.0.add(F_DEAD + slot).cast::<std::sync::atomic::AtomicU8>()).store(dead as u8, Ordering::Release)
        }
    }
    /// Notes that thread area `index` of `slot` is in use.
    pub(crate) fn raise_high(&self, slot: usize, index: usize) {
        word(self.0, F_HIGH + 4 * slot).fetch_max(index as u32, Ordering::AcqRel);
    }
    /// The highest thread area of `slot` in use since the slot was reset.
    pub(crate) fn high(&self, slot: usize) -> usize {
        word(self.0, F_HIGH + 4 * slot).load(Ordering::Acquire) as usize
    }
    pub(crate) fn reset_high(&self, slot: usize) {
        word(self.0, F_HIGH + 4 * slot).store(0, Ordering::Release)
    }
    pub(crate) fn is_dead(&self, slot: usize) -> bool {
        // SAFETY: as in set_dead.
        unsafe { (*self.0.add(F_DEAD + slot).cast::<std::sync::atomic::AtomicU8>()).load(Ordering::Acquire) != 0 }
    }
}

/// The state word of thread area `index` (1-based) of `slot`.
pub(crate) fn thread_state(base: *mut u8, slot: usize, index: usize) -> &'static AtomicU32 {
    word(base, slot_offset(slot) as usize + index * stub::AREA as usize + stub::A_STATE)
}

/// A u64 of a slot's memory at `off` from the slot's start.
pub(crate) fn slot_u64(base: *mut u8, slot: usize, off: usize) -> &'static AtomicU64 {
    // SAFETY: as in `word`, 8-aligned.
    unsafe { &*base.add(slot_offset(slot) as usize + off).cast::<AtomicU64>() }
}

/// A u32 of a slot's memory.
pub(crate) fn slot_u32(base: *mut u8, slot: usize, off: usize) -> &'static AtomicU32 {
    word(base, slot_offset(slot) as usize + off)
}

/// Marks every thread of a dead stub gone and wakes whoever waits on them.
pub(crate) fn wake_all_threads(base: *mut u8, slot: usize) {
    let high = FactoryPage(base).high(slot).min(stub::MAX_THREADS);
    for i in 1..=high {
        let w = thread_state(base, slot, i);
        if w.swap(stub::STATE_DEAD, Ordering::AcqRel) != stub::STATE_DEAD {
            futex_wake(w);
        }
    }
}

/// FUTEX_WAIT on a word shared between processes.
pub(crate) fn futex_wait(w: &AtomicU32, expected: u32) {
    // SAFETY: the word is live shared memory; a spurious return is handled
    // by every caller's loop.
    unsafe {
        libc::syscall(libc::SYS_futex, w.as_ptr(), libc::FUTEX_WAIT, expected, std::ptr::null::<libc::timespec>());
    }
}

/// FUTEX_WAKE of every waiter on a shared word.
pub(crate) fn futex_wake(w: &AtomicU32) {
    // SAFETY: as in futex_wait.
    unsafe {
        libc::syscall(libc::SYS_futex, w.as_ptr(), libc::FUTEX_WAKE, i32::MAX);
    }
}
