//! Timers that send signals: ITIMER_REAL (alarm, setitimer) and POSIX
//! timers. One host thread serves every timer of the sandbox.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::kernel::Kernel;
use crate::signal::{SigFields, SigInfo, code};
use crate::waiter::WaitQueue;

/// The longest time Linux keeps (KTIME_MAX nanoseconds, about 292 years).
/// Longer timeouts and timer values are clamped to it: they never end.
pub const TIME_MAX: Duration = Duration::from_nanos(i64::MAX as u64);

/// The instant `d` after `now`, `d` clamped as Linux clamps it, so that
/// any timeout an application gives is a deadline, however long.
pub fn after(now: Instant, d: Duration) -> Instant {
    now + d.min(TIME_MAX)
}

/// Who a timer's signal goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Process(i32),
    Thread(i32),
}

/// How a POSIX timer notifies (sigev_notify).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Notify {
    Signal { signo: u32, value: u64, target: Target },
    None,
}

struct Timer {
    process: i32,
    /// The clock of a POSIX timer (for absolute settings).
    clock: u32,
    /// ITIMER_REAL, or the POSIX timer id.
    posix_id: Option<i32>,
    notify: Notify,
    deadline: Option<Instant>,
    interval: Duration,
    /// Expirations not signalled because the last signal was still pending.
    overrun: i32,
    /// Overrun reported by timer_getoverrun (of the last signal sent).
    last_overrun: i32,
    /// Bumped on every change so stale heap entries are skipped.
    generation: u64,
}

#[derive(Default)]
struct State {
    timers: HashMap<u64, Timer>,
    heap: BinaryHeap<Reverse<(Instant, u64, u64)>>,
    /// One-shot wake-ups of a wait queue at an instant: a timer
    /// descriptor's next expiry, which it counts itself when asked.
    wakes: HashMap<u64, (Instant, Weak<WaitQueue>)>,
    next: u64,
    shutdown: bool,
}

/// The sandbox's timers.
pub struct Timers {
    state: Mutex<State>,
    cv: Condvar,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Default for Timers {
    fn default() -> Self {
        Timers { state: Mutex::new(State::default()), cv: Condvar::new(), thread: Mutex::new(None) }
    }
}

/// A timer's setting: time to the next expiry (zero: disarmed) and period.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Setting {
    pub value: Duration,
    pub interval: Duration,
}

impl Timers {
    /// Starts the service thread.
    pub fn start(self: &Arc<Self>, kernel: Weak<Kernel>) {
        let me = self.clone();
        let h = std::thread::Builder::new()
            .name("timers".into())
            .spawn(move || me.serve(kernel))
            .expect("spawn the timer thread");
        *self.thread.lock().unwrap() = Some(h);
    }

    /// Stops the service thread.
    pub fn stop(&self) {
        self.state.lock().unwrap().shutdown = true;
        self.cv.notify_all();
        if let Some(h) = self.thread.lock().unwrap().take() {
            let _ = h.join();
        }
    }

    fn serve(&self, kernel: Weak<Kernel>) {
        let mut st = self.state.lock().unwrap();
        loop {
            if st.shutdown {
                return;
            }
            let now = Instant::now();
            let mut due = Vec::new();
            let mut wakes = Vec::new();
            while let Some(Reverse((at, id, generation))) = st.heap.peek().copied() {
                if at > now {
                    break;
                }
                st.heap.pop();
                if st.timers.get(&id).is_some_and(|t| t.generation == generation && t.deadline == Some(at)) {
                    due.push(id);
                }
                if st.wakes.get(&id).is_some_and(|(d, _)| *d == at) {
                    wakes.extend(st.wakes.remove(&id).map(|(_, q)| q));
                }
            }
            if !wakes.is_empty() {
                // Waiters take the queue's lock and then ours: not under it.
                drop(st);
                for q in wakes.iter().filter_map(Weak::upgrade) {
                    q.notify_all();
                }
                st = self.state.lock().unwrap();
            }
            for id in due {
                let Some((info, target)) = self.expire(&mut st, id, now) else { continue };
                let Some(k) = kernel.upgrade() else { continue };
                // Sending takes task locks; not under the timer lock.
                drop(st);
                let posix = match info.fields {
                    SigFields::Timer { key, seq, .. } => Some((key, seq)),
                    _ => None,
                };
                // A POSIX timer's signal still queued counts this expiry as
                // an overrun instead of queueing another.
                let overrun = posix.is_some_and(|(key, seq)| queued(&k, target, info.signo, key, seq));
                if !overrun {
                    deliver(&k, target, info);
                }
                st = self.state.lock().unwrap();
                if overrun && let Some(t) = st.timers.get_mut(&id) {
                    t.overrun = t.overrun.saturating_add(1);
                }
            }
            st = match st.heap.peek() {
                Some(Reverse((at, _, _))) => {
                    let wait = at.saturating_duration_since(Instant::now());
                    self.cv.wait_timeout(st, wait).unwrap().0
                }
                None => self.cv.wait(st).unwrap(),
            };
        }
    }

    /// Handles an expiry: re-arms and decides whether to signal.
    fn expire(&self, st: &mut State, id: u64, now: Instant) -> Option<(SigInfo, Target)> {
        let t = st.timers.get_mut(&id)?;
        let deadline = t.deadline?;
        if t.interval.is_zero() {
            t.deadline = None;
        } else {
            // Missed periods count as overruns.
            let mut next = deadline + t.interval;
            while next <= now {
                next += t.interval;
                t.overrun = t.overrun.saturating_add(1);
            }
            t.deadline = Some(next);
        }
        let signal = match t.notify {
            Notify::None => None,
            Notify::Signal { signo, value, target } => {
                let (fields, c) = match t.posix_id {
                    // The overrun is filled in when the signal is taken.
                    Some(pid) => {
                        (SigFields::Timer { id: pid, overrun: 0, value, key: id, seq: t.generation }, code::SI_TIMER)
                    }
                    None => (SigFields::None, code::SI_KERNEL),
                };
                Some((SigInfo { signo, errno: 0, code: c, fields }, target))
            }
        };
        let generation = t.generation;
        if let Some(d) = t.deadline {
            st.heap.push(Reverse((d, id, generation)));
        }
        signal
    }

    /// A POSIX timer's signal is being delivered or taken by sigtimedwait:
    /// returns the overrun to report, or None if the signal is stale (the
    /// timer was re-armed or deleted since) and must be dropped.
    pub fn signal_taken(&self, key: u64, seq: u64) -> Option<i32> {
        let mut st = self.state.lock().unwrap();
        let t = st.timers.get_mut(&key)?;
        if t.generation != seq {
            return None;
        }
        t.last_overrun = t.overrun;
        t.overrun = 0;
        Some(t.last_overrun)
    }

    fn arm(&self, st: &mut State, id: u64, s: Setting) -> Setting {
        let now = Instant::now();
        let t = st.timers.get_mut(&id).expect("timer exists");
        let old = Setting {
            value: t.deadline.map(|d| d.saturating_duration_since(now)).unwrap_or_default(),
            interval: t.interval,
        };
        t.generation += 1;
        t.interval = s.interval.min(TIME_MAX);
        t.deadline = (!s.value.is_zero()).then(|| after(now, s.value));
        t.overrun = 0;
        if let Some(d) = t.deadline {
            let g = t.generation;
            st.heap.push(Reverse((d, id, g)));
        }
        self.cv.notify_all();
        old
    }

    fn itimer_id(st: &mut State, process: i32) -> u64 {
        if let Some((id, _)) = st.timers.iter().find(|(_, t)| t.process == process && t.posix_id.is_none()) {
            return *id;
        }
        st.next += 1;
        let id = st.next;
        st.timers.insert(
            id,
            Timer {
                process,
                clock: linux_raw_sys::general::CLOCK_MONOTONIC,
                posix_id: None,
                notify: Notify::Signal {
                    signo: linux_raw_sys::general::SIGALRM,
                    value: 0,
                    target: Target::Process(process),
                },
                deadline: None,
                interval: Duration::ZERO,
                overrun: 0,
                last_overrun: 0,
                generation: 0,
            },
        );
        id
    }

    /// setitimer(ITIMER_REAL) / alarm: returns the previous setting.
    pub fn set_itimer_real(&self, process: i32, s: Setting) -> Setting {
        let mut st = self.state.lock().unwrap();
        let id = Self::itimer_id(&mut st, process);
        self.arm(&mut st, id, s)
    }

    /// getitimer(ITIMER_REAL).
    pub fn get_itimer_real(&self, process: i32) -> Setting {
        let mut st = self.state.lock().unwrap();
        let id = Self::itimer_id(&mut st, process);
        let t = &st.timers[&id];
        Setting {
            value: t.deadline.map(|d| d.saturating_duration_since(Instant::now())).unwrap_or_default(),
            interval: t.interval,
        }
    }

    fn posix(st: &State, process: i32, posix_id: i32) -> Option<u64> {
        st.timers.iter().find(|(_, t)| t.process == process && t.posix_id == Some(posix_id)).map(|(id, _)| *id)
    }

    /// timer_create: returns the new timer's id within the process, or
    /// None if the sandbox has `limit` POSIX timers already. (Linux
    /// preallocates each timer's signal against its user's
    /// RLIMIT_SIGPENDING and fails with EAGAIN past it; the sandbox is one
    /// user.)
    pub fn create(&self, process: i32, clock: u32, notify: Notify, limit: u64) -> Option<i32> {
        let mut st = self.state.lock().unwrap();
        if st.timers.values().filter(|t| t.posix_id.is_some()).count() as u64 >= limit {
            return None;
        }
        let posix_id = (0..).find(|i| Self::posix(&st, process, *i).is_none()).expect("ids");
        let notify = match notify {
            Notify::Signal { signo, value: u64::MAX, target } => {
                Notify::Signal { signo, value: posix_id as u64, target }
            }
            n => n,
        };
        st.next += 1;
        let id = st.next;
        st.timers.insert(
            id,
            Timer {
                process,
                clock,
                posix_id: Some(posix_id),
                notify,
                deadline: None,
                interval: Duration::ZERO,
                overrun: 0,
                last_overrun: 0,
                generation: 0,
            },
        );
        Some(posix_id)
    }

    /// timer_settime: None if there is no such timer.
    pub fn settime(&self, process: i32, posix_id: i32, s: Setting) -> Option<Setting> {
        let mut st = self.state.lock().unwrap();
        let id = Self::posix(&st, process, posix_id)?;
        Some(self.arm(&mut st, id, s))
    }

    /// The clock of a POSIX timer.
    pub fn clock(&self, process: i32, posix_id: i32) -> Option<u32> {
        let st = self.state.lock().unwrap();
        Some(st.timers[&Self::posix(&st, process, posix_id)?].clock)
    }

    /// timer_gettime.
    pub fn gettime(&self, process: i32, posix_id: i32) -> Option<Setting> {
        let st = self.state.lock().unwrap();
        let t = &st.timers[&Self::posix(&st, process, posix_id)?];
        Some(Setting {
            value: t.deadline.map(|d| d.saturating_duration_since(Instant::now())).unwrap_or_default(),
            interval: t.interval,
        })
    }

    /// timer_getoverrun.
    pub fn overrun(&self, process: i32, posix_id: i32) -> Option<i32> {
        let st = self.state.lock().unwrap();
        Some(st.timers[&Self::posix(&st, process, posix_id)?].last_overrun)
    }

    /// timer_delete.
    pub fn delete(&self, process: i32, posix_id: i32) -> bool {
        let mut st = self.state.lock().unwrap();
        match Self::posix(&st, process, posix_id) {
            Some(id) => {
                st.timers.remove(&id);
                true
            }
            None => false,
        }
    }

    /// Drops every timer of a process that has exited (or exec'd, for
    /// POSIX timers).
    pub fn cancel_process(&self, process: i32) {
        self.state.lock().unwrap().timers.retain(|_, t| t.process != process);
    }

    /// A key for [`Timers::wake_at`].
    pub fn new_wake(&self) -> u64 {
        let mut st = self.state.lock().unwrap();
        st.next += 1;
        st.next
    }

    /// Wakes `queue` once at `at` (None: never), replacing what was set
    /// for `key` before.
    pub fn wake_at(&self, key: u64, at: Option<Instant>, queue: &Arc<WaitQueue>) {
        let mut st = self.state.lock().unwrap();
        match at {
            Some(at) => {
                if st.wakes.insert(key, (at, Arc::downgrade(queue))).is_some_and(|(old, _)| old == at) {
                    return;
                }
                st.heap.push(Reverse((at, key, 0)));
                self.cv.notify_all();
            }
            None => {
                st.wakes.remove(&key);
            }
        }
    }

    /// At execve POSIX timers go; ITIMER_REAL stays.
    pub fn cancel_posix(&self, process: i32) {
        self.state.lock().unwrap().timers.retain(|_, t| t.process != process || t.posix_id.is_none());
    }
}

/// True if the signal of this arming of a timer waits to be delivered at
/// the target.
fn queued(k: &Kernel, target: Target, signo: u32, key: u64, seq: u64) -> bool {
    let mine = |i: &SigInfo| {
        i.signo == signo && matches!(i.fields, SigFields::Timer { key: k2, seq: s2, .. } if k2 == key && s2 == seq)
    };
    match target {
        Target::Process(pid) => {
            let tg = k.procs.lock().unwrap().group(pid);
            tg.is_some_and(|tg| tg.shared_pending.lock().unwrap().any(mine))
        }
        Target::Thread(tid) => {
            let t = k.procs.lock().unwrap().thread(tid);
            t.is_some_and(|t| t.sig.lock().unwrap().pending.any(mine))
        }
    }
}

/// Sends a timer's signal; false if the target is gone.
fn deliver(k: &Kernel, target: Target, info: SigInfo) -> bool {
    match target {
        Target::Process(pid) => {
            let tg = k.procs.lock().unwrap().group(pid);
            tg.map(|tg| crate::task::send_to_group(k, &tg, info)).is_some()
        }
        Target::Thread(tid) => {
            let t = k.procs.lock().unwrap().thread(tid);
            t.map(|t| crate::task::send_to_thread(k, &t, info)).is_some()
        }
    }
}
