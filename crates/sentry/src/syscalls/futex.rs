//! The futex system call.

use std::time::{Duration, Instant};

use linux_raw_sys::general as g;
use rustix::time::ClockId;

use super::{SysError, SysResult, read_timespec};
use crate::errno::Errno;
use crate::task::{RestartBlock, Task};
use crate::timers;

/// A futex wait with a timeout. Interrupted by a signal without a handler
/// it goes on until the same deadline (through restart_syscall), checking
/// the word again; with a handler it fails with EINTR.
pub fn wait_until(task: &mut Task, addr: u64, val: u32, bitset: u32, private: bool, deadline: Instant) -> SysResult {
    let mm = task.mm.clone();
    match task.kernel.futexes.wait(&mm, addr, private, val, bitset, Some(deadline)) {
        Ok(()) => Ok(0),
        Err(Errno::EINTR) => {
            task.restart_block = Some(RestartBlock::Futex { addr, val, bitset, private, deadline });
            Err(Errno::ERESTART_RESTARTBLOCK.into())
        }
        Err(e) => Err(e.into()),
    }
}

/// An absolute time on `clock` as an instant.
pub fn absolute_deadline(clock: ClockId, at: Duration) -> Instant {
    let now = rustix::time::clock_gettime(clock);
    let now = Duration::new(now.tv_sec as u64, now.tv_nsec as u32);
    timers::after(Instant::now(), at.saturating_sub(now))
}

/// How many waiters a wake's count lets go: Linux counts a wake before
/// comparing with the count (a signed int), so 0 and negative counts wake
/// one waiter too.
fn wake_count(n: u32) -> usize {
    (n as i32).max(1) as usize
}

/// A requeue's counts are exact; negative ones are refused.
fn requeue_count(n: u32) -> Result<usize, SysError> {
    usize::try_from(n as i32).map_err(|_| Errno::EINVAL.into())
}

pub fn futex(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (uaddr, op, val, val2, uaddr2, val3) = (a[0], a[1] as u32, a[2] as u32, a[3], a[4], a[5] as u32);
    let private = op & g::FUTEX_PRIVATE_FLAG != 0;
    let realtime = op & g::FUTEX_CLOCK_REALTIME != 0;
    let cmd = op & !(g::FUTEX_PRIVATE_FLAG | g::FUTEX_CLOCK_REALTIME);
    // A futex word is a naturally aligned u32, in every operation that
    // names one.
    let two_words = matches!(cmd, g::FUTEX_REQUEUE | g::FUTEX_CMP_REQUEUE | g::FUTEX_WAKE_OP);
    if !uaddr.is_multiple_of(4) || (two_words && !uaddr2.is_multiple_of(4)) {
        return Err(Errno::EINVAL.into());
    }
    let clock = if realtime { ClockId::Realtime } else { ClockId::Monotonic };
    let f = &task.kernel.futexes;
    let mm = task.mm.clone();
    let relative = |task: &Task| -> Result<Option<Instant>, SysError> {
        if val2 == 0 { Ok(None) } else { Ok(Some(timers::after(Instant::now(), read_timespec(task, val2)?))) }
    };
    let absolute = |task: &Task, clock: ClockId| -> Result<Option<Instant>, SysError> {
        if val2 == 0 { Ok(None) } else { Ok(Some(absolute_deadline(clock, read_timespec(task, val2)?))) }
    };
    match cmd {
        g::FUTEX_WAIT => match relative(task)? {
            Some(d) => wait_until(task, uaddr, val, u32::MAX, private, d),
            None => {
                f.wait(&mm, uaddr, private, val, u32::MAX, None)?;
                Ok(0)
            }
        },
        g::FUTEX_WAIT_BITSET => match absolute(task, clock)? {
            Some(d) => wait_until(task, uaddr, val, val3, private, d),
            None => {
                f.wait(&mm, uaddr, private, val, val3, None)?;
                Ok(0)
            }
        },
        g::FUTEX_WAKE => Ok(f.wake(&mm, uaddr, private, wake_count(val), u32::MAX) as u64),
        g::FUTEX_WAKE_BITSET => {
            if val3 == 0 {
                return Err(Errno::EINVAL.into());
            }
            Ok(f.wake(&mm, uaddr, private, wake_count(val), val3) as u64)
        }
        g::FUTEX_REQUEUE => {
            let (n_wake, n_move) = (requeue_count(val)?, requeue_count(val2 as u32)?);
            Ok(f.requeue(&mm, uaddr, uaddr2, private, n_wake, n_move, None)? as u64)
        }
        g::FUTEX_CMP_REQUEUE => {
            let (n_wake, n_move) = (requeue_count(val)?, requeue_count(val2 as u32)?);
            Ok(f.requeue(&mm, uaddr, uaddr2, private, n_wake, n_move, Some(val3))? as u64)
        }
        g::FUTEX_WAKE_OP => {
            Ok(f.wake_op(&mm, uaddr, uaddr2, private, wake_count(val), wake_count(val2 as u32), val3)? as u64)
        }
        g::FUTEX_LOCK_PI => {
            let deadline = absolute(task, ClockId::Realtime)?;
            f.lock_pi(&mm, uaddr, private, false, deadline)?;
            Ok(0)
        }
        g::FUTEX_LOCK_PI2 => {
            let deadline = absolute(task, clock)?;
            f.lock_pi(&mm, uaddr, private, false, deadline)?;
            Ok(0)
        }
        g::FUTEX_TRYLOCK_PI => {
            f.lock_pi(&mm, uaddr, private, true, None)?;
            Ok(0)
        }
        g::FUTEX_UNLOCK_PI => {
            f.unlock_pi(&mm, uaddr, private)?;
            Ok(0)
        }
        _ => Err(Errno::ENOSYS.into()),
    }
}
