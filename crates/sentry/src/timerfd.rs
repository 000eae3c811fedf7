//! timerfd: a timer read as a count of its expirations.
//!
//! The descriptor counts its own expirations from its deadline and period
//! whenever it is asked (read, poll, gettime), as Linux forwards its
//! hrtimer on read; the sandbox's timer thread is asked only to wake the
//! descriptor's waiters at the next expiry, once, so a periodic timer
//! nobody reads costs nothing.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use memory::GuestSliceMut;

use crate::fs::{Context, FileOps, FsError, OpenFile, OpenFlags, POLLIN, POLLRDNORM, Stat};
use crate::mm::MemoryManager;
use crate::timers::{Setting, Timers};
use crate::waiter::WaitQueue;

/// TFD_IOC_SET_TICKS: _IOW('T', 0, u64).
const TFD_IOC_SET_TICKS: u32 = 0x4008_5400;

struct State {
    /// The next expiry not yet counted; None while disarmed.
    next: Option<Instant>,
    interval: Duration,
    /// Expirations counted and not read yet.
    ticks: u64,
    /// The flags of the last timerfd_settime (TFD_TIMER_ABSTIME,
    /// TFD_TIMER_CANCEL_ON_SET), for /proc/PID/fdinfo.
    settime_flags: u32,
}

pub struct TimerFd {
    /// The clock id given to timerfd_create.
    clock: u32,
    timers: Arc<Timers>,
    /// This descriptor's key in `timers`.
    wake: u64,
    queue: Arc<WaitQueue>,
    state: Mutex<State>,
}

impl TimerFd {
    pub fn new(clock: u32, timers: Arc<Timers>) -> TimerFd {
        let wake = timers.new_wake();
        TimerFd {
            clock,
            timers,
            wake,
            queue: Arc::new(WaitQueue::default()),
            state: Mutex::new(State { next: None, interval: Duration::ZERO, ticks: 0, settime_flags: 0 }),
        }
    }

    /// The clock id it was made with.
    pub fn clock(&self) -> u32 {
        self.clock
    }

    /// Counts the expirations up to `now` into `ticks` and moves the
    /// deadline past `now` (or disarms a one-shot timer), asking the timer
    /// thread for a wake-up at the new deadline.
    fn forward(&self, st: &mut State, now: Instant) {
        let Some(next) = st.next else { return };
        if next > now {
            return;
        }
        if st.interval.is_zero() {
            st.ticks = st.ticks.saturating_add(1);
            st.next = None;
        } else {
            let period = st.interval.as_nanos();
            let missed = (now - next).as_nanos() / period;
            st.ticks = st.ticks.saturating_add(missed as u64 + 1);
            st.next =
                u64::try_from((missed + 1) * period).ok().and_then(|ns| next.checked_add(Duration::from_nanos(ns)));
        }
        self.timers.wake_at(self.wake, st.next, &self.queue);
    }

    fn setting(st: &State, now: Instant) -> Setting {
        Setting { value: st.next.map(|n| n.saturating_duration_since(now)).unwrap_or_default(), interval: st.interval }
    }

    /// timerfd_settime: arms the timer to expire at `deadline` (None:
    /// disarms it), then every `interval`; returns the previous setting.
    pub fn set(&self, deadline: Option<Instant>, interval: Duration, flags: u32) -> Setting {
        let mut st = self.state.lock().unwrap();
        let now = Instant::now();
        self.forward(&mut st, now);
        let old = Self::setting(&st, now);
        st.next = deadline;
        st.interval = if deadline.is_some() { interval.min(crate::timers::TIME_MAX) } else { Duration::ZERO };
        st.ticks = 0;
        st.settime_flags = flags;
        self.timers.wake_at(self.wake, st.next, &self.queue);
        old
    }

    /// timerfd_gettime: the time to the next expiry and the period.
    pub fn get(&self) -> Setting {
        let mut st = self.state.lock().unwrap();
        let now = Instant::now();
        self.forward(&mut st, now);
        Self::setting(&st, now)
    }

    /// Takes the expirations counted so far, if any.
    fn take(&self) -> Option<u64> {
        let mut st = self.state.lock().unwrap();
        self.forward(&mut st, Instant::now());
        (st.ticks > 0).then(|| std::mem::take(&mut st.ticks))
    }
}

impl Drop for TimerFd {
    fn drop(&mut self) {
        self.timers.wake_at(self.wake, None, &self.queue);
    }
}

impl FileOps for TimerFd {
    fn read(&self, ctx: &Context, file: &OpenFile, bufs: &[GuestSliceMut<'_>], _: u64) -> Result<usize, FsError> {
        if bufs.iter().map(|b| b.len()).sum::<usize>() < 8 {
            return Err(FsError::Invalid);
        }
        let ticks = match self.take() {
            Some(t) => t,
            None if file.flags().contains(OpenFlags::NONBLOCK) => return Err(FsError::WouldBlock),
            None => ctx.block_on(&[&self.queue], None, || self.take()).map_err(|_| FsError::Interrupted)?,
        };
        let bytes = ticks.to_ne_bytes();
        let mut n = 0;
        for b in bufs {
            let put = (8 - n).min(b.len());
            b.copy_from(&bytes[n..n + put]);
            n += put;
            if n == 8 {
                break;
            }
        }
        Ok(8)
    }

    fn smallest_transfer(&self) -> usize {
        8
    }

    fn stat(&self) -> Result<Stat, FsError> {
        Ok(crate::fs::synthetic::anon_inode_stat())
    }

    fn poll(&self) -> u32 {
        let mut st = self.state.lock().unwrap();
        self.forward(&mut st, Instant::now());
        if st.ticks > 0 { POLLIN | POLLRDNORM } else { 0 }
    }

    fn poll_queue(&self) -> Option<&WaitQueue> {
        Some(&self.queue)
    }

    fn ioctl(&self, _: &Context, _: &OpenFile, mm: &MemoryManager, cmd: u32, arg: u64) -> Result<u64, FsError> {
        if cmd != TFD_IOC_SET_TICKS {
            return Err(FsError::NotTty);
        }
        let ticks: u64 = mm.read_pod(arg)?;
        if ticks == 0 {
            return Err(FsError::Invalid);
        }
        self.state.lock().unwrap().ticks = ticks;
        self.queue.notify_all();
        Ok(0)
    }

    fn anon_name(&self) -> Option<&'static str> {
        Some("anon_inode:[timerfd]")
    }

    /// Linux's timerfd_show: the expirations its timer counted unread
    /// (at most one, as the hrtimer stops at its first until read) and the
    /// time left, not forwarded.
    fn fdinfo(&self) -> String {
        let st = self.state.lock().unwrap();
        let now = Instant::now();
        let expired = st.next.is_some_and(|n| n <= now);
        let ticks = st.ticks + u64::from(expired && st.ticks == 0);
        let value = st.next.map(|n| n.saturating_duration_since(now)).unwrap_or_default();
        format!(
            "clockid: {}\nticks: {ticks}\nsettime flags: 0{:o}\nit_value: ({}, {})\nit_interval: ({}, {})\n",
            self.clock,
            st.settime_flags,
            value.as_secs(),
            value.subsec_nanos(),
            st.interval.as_secs(),
            st.interval.subsec_nanos()
        )
    }
}
