//! signalfd: pending signals read as `signalfd_siginfo` records.
//!
//! As in Linux, a signalfd belongs to no process: a read takes the
//! signals pending for the thread that reads (its own, then its
//! process's), so after fork the child's copy reads the child's signals.
//! Pollers wait on [`SIGNAL_ARRIVALS`], which every queued signal wakes.

use std::sync::{Mutex, Weak};

use memory::GuestSliceMut;

use super::{TaskShared, current_opt, take_signal};
use crate::fs::{Context, FileOps, FsError, OpenFile, OpenFlags, POLLIN, POLLRDNORM, Stat};
use crate::kernel::Kernel;
use crate::signal::{SigFields, SigInfo, SigSet};
use crate::waiter::WaitQueue;

/// Woken whenever a signal is queued anywhere: a signalfd's readiness
/// depends on who asks, so its pollers wait here and look again.
pub static SIGNAL_ARRIVALS: WaitQueue = WaitQueue::new();

/// sizeof(struct signalfd_siginfo).
const RECORD: usize = 128;

pub struct SignalFd {
    /// The signals it reads (never SIGKILL or SIGSTOP).
    mask: Mutex<SigSet>,
    kernel: Weak<Kernel>,
}

impl SignalFd {
    pub fn new(mask: SigSet, kernel: Weak<Kernel>) -> SignalFd {
        SignalFd { mask: Mutex::new(mask.blockable()), kernel }
    }

    /// signalfd4 on an existing descriptor: reads `mask` from now on.
    pub fn set_mask(&self, mask: SigSet) {
        *self.mask.lock().unwrap() = mask.blockable();
        SIGNAL_ARRIVALS.notify_all();
    }

    fn take(&self, t: &TaskShared) -> Option<SigInfo> {
        let k = self.kernel.upgrade()?;
        let mask = *self.mask.lock().unwrap();
        take_signal(&k, t, mask)
    }
}

/// Linux's signalfd_copyinfo: the fields of the siginfo's layout, in
/// `struct signalfd_siginfo`.
fn record(info: &SigInfo) -> [u8; RECORD] {
    let mut b = [0u8; RECORD];
    let mut put = |off: usize, v: &[u8]| b[off..off + v.len()].copy_from_slice(v);
    put(0, &info.signo.to_le_bytes());
    put(4, &info.errno.to_le_bytes());
    put(8, &info.code.to_le_bytes());
    let value = |put: &mut dyn FnMut(usize, &[u8]), v: u64| {
        put(44, &(v as i32).to_le_bytes());
        put(48, &v.to_le_bytes());
    };
    match info.fields {
        SigFields::None => {}
        SigFields::Kill { pid, uid } => {
            put(12, &pid.to_le_bytes());
            put(16, &uid.to_le_bytes());
        }
        SigFields::Queue { pid, uid, value: v } => {
            put(12, &pid.to_le_bytes());
            put(16, &uid.to_le_bytes());
            value(&mut put, v);
        }
        SigFields::Fault { addr } => put(72, &addr.to_le_bytes()),
        SigFields::Child { pid, uid, status, utime, stime } => {
            put(12, &pid.to_le_bytes());
            put(16, &uid.to_le_bytes());
            put(40, &status.to_le_bytes());
            put(56, &utime.to_le_bytes());
            put(64, &stime.to_le_bytes());
        }
        SigFields::Timer { id, overrun, value: v, .. } => {
            put(24, &id.to_le_bytes());
            put(32, &overrun.to_le_bytes());
            value(&mut put, v);
        }
        SigFields::Raw(raw) => {
            // rt_sigqueueinfo's: the sender's fields, and a value for the
            // codes only user space sends (negative ones).
            put(12, &raw[0..4]);
            put(16, &raw[4..8]);
            if info.code < 0 {
                value(&mut put, u64::from_le_bytes(raw[8..16].try_into().unwrap()));
            }
        }
    }
    b
}

/// Writes `bytes` at `offset` of the buffers taken as one.
fn put_at(bufs: &[GuestSliceMut<'_>], mut offset: usize, mut bytes: &[u8]) {
    for s in bufs {
        if bytes.is_empty() {
            return;
        }
        if offset >= s.len() {
            offset -= s.len();
            continue;
        }
        let n = s.subslice(offset, s.len() - offset).copy_from(bytes);
        bytes = &bytes[n..];
        offset = 0;
    }
}

impl FileOps for SignalFd {
    fn read(&self, ctx: &Context, file: &OpenFile, bufs: &[GuestSliceMut<'_>], _: u64) -> Result<usize, FsError> {
        let room = bufs.iter().map(|b| b.len()).sum::<usize>() / RECORD;
        if room == 0 {
            return Err(FsError::Invalid);
        }
        let me = current_opt().ok_or(FsError::Invalid)?;
        let first = match self.take(&me) {
            Some(i) => i,
            None if file.flags().contains(OpenFlags::NONBLOCK) => return Err(FsError::WouldBlock),
            None => ctx.block_on(&[&SIGNAL_ARRIVALS], None, || self.take(&me)).map_err(|_| FsError::Interrupted)?,
        };
        put_at(bufs, 0, &record(&first));
        // The rest only if they are pending already.
        let mut n = 1;
        while n < room {
            let Some(info) = self.take(&me) else { break };
            put_at(bufs, n * RECORD, &record(&info));
            n += 1;
        }
        Ok(n * RECORD)
    }

    fn smallest_transfer(&self) -> usize {
        RECORD
    }

    fn stat(&self) -> Result<Stat, FsError> {
        Ok(crate::fs::synthetic::anon_inode_stat())
    }

    /// Readable while a signal of the mask is pending for the thread that
    /// asks, or for its process.
    fn poll(&self) -> u32 {
        let Some(me) = current_opt() else { return 0 };
        let own = me.sig.lock().unwrap().pending.pending();
        let shared = me.tg.shared_pending.lock().unwrap().pending();
        let mask = *self.mask.lock().unwrap();
        if own.union(shared).0 & mask.0 != 0 { POLLIN | POLLRDNORM } else { 0 }
    }

    fn poll_queue(&self) -> Option<&WaitQueue> {
        Some(&SIGNAL_ARRIVALS)
    }

    fn anon_name(&self) -> Option<&'static str> {
        Some("anon_inode:[signalfd]")
    }

    fn fdinfo(&self) -> String {
        format!("sigmask:\t{:016x}\n", self.mask.lock().unwrap().0)
    }
}
