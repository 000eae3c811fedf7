//! Timers that send signals: interval timers (alarm, setitimer) and POSIX
//! timers, on real-time clocks and on CPU clocks, and RLIMIT_CPU. One host
//! thread serves every timer of the sandbox. Timers on CPU clocks are
//! checked every tick while one is armed (or a process has a CPU limit):
//! the CPU clocks of running threads are read live, so a thread spinning
//! in application code is caught within a tick, as Linux's scheduler tick
//! catches it.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
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

/// The CPU clock a timer runs on: a process's or one thread's, or a
/// process's user time alone (ITIMER_VIRTUAL).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuTimeOf {
    Process(i32),
    ProcessUser(i32),
    Thread(i32),
}

/// The CPU time on `of`, None if its process or thread is gone.
pub fn cpu_time_of(k: &Kernel, of: CpuTimeOf) -> Option<Duration> {
    match of {
        CpuTimeOf::Process(pid) => {
            let tg = k.procs.lock().unwrap().group(pid)?;
            Some(tg.cpu_time())
        }
        CpuTimeOf::ProcessUser(pid) => {
            let tg = k.procs.lock().unwrap().group(pid)?;
            Some(tg.cpu_times().user)
        }
        CpuTimeOf::Thread(tid) => {
            let t = k.procs.lock().unwrap().thread(tid)?;
            Some(t.cpu_time())
        }
    }
}

/// How often CPU timers and limits are checked: Linux's tick, as the
/// coarse clocks' resolution tells it (1/HZ), within 1 to 10 ms.
pub fn cpu_tick() -> Duration {
    let r = rustix::time::clock_getres(rustix::time::ClockId::RealtimeCoarse);
    Duration::new(r.tv_sec as u64, r.tv_nsec as u32).clamp(Duration::from_millis(1), Duration::from_millis(10))
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
    /// The POSIX timer id; None for an interval timer.
    posix_id: Option<i32>,
    /// Which interval timer (ITIMER_REAL, _VIRTUAL, _PROF).
    itimer: u32,
    notify: Notify,
    /// When it expires, on a real-time clock.
    deadline: Option<Instant>,
    /// The CPU clock it runs on instead, and the time on it when it
    /// expires.
    cpu: Option<CpuTimeOf>,
    cpu_deadline: Option<Duration>,
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
    /// Processes with a finite RLIMIT_CPU, checked every tick.
    cpu_limited: HashSet<i32>,
    /// When CPU clocks are looked at next, while anything runs on them.
    next_cpu_check: Option<Instant>,
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
            let mut cpu_fired = Vec::new();
            if st.next_cpu_check.is_some_and(|at| at <= now) {
                st = self.check_cpu(st, &kernel, &mut cpu_fired);
            }
            due.extend(cpu_fired.iter().map(|(id, _)| *id));
            if !wakes.is_empty() {
                // Waiters take the queue's lock and then ours: not under it.
                drop(st);
                for q in wakes.iter().filter_map(Weak::upgrade) {
                    q.notify_all();
                }
                st = self.state.lock().unwrap();
            }
            for id in due {
                let expired = match cpu_fired.iter().find(|(i, _)| *i == id) {
                    Some((_, cpu_now)) => self.expire_cpu(&mut st, id, *cpu_now),
                    None => self.expire(&mut st, id, now),
                };
                let Some((info, target)) = expired else { continue };
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
            let next = st.heap.peek().map(|Reverse((at, _, _))| *at);
            let next = match (next, st.next_cpu_check) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            st = match next {
                Some(at) => {
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
        let signal = Self::signal_of(t, id);
        let generation = t.generation;
        if let Some(d) = t.deadline {
            st.heap.push(Reverse((d, id, generation)));
        }
        signal
    }

    /// Looks at the CPU clocks timers run on and the CPU time of limited
    /// processes; returns the timers due, with the time on their clock.
    /// The clocks are read without the timer lock (they take task locks).
    fn check_cpu<'a>(
        &'a self,
        mut st: std::sync::MutexGuard<'a, State>,
        kernel: &Weak<Kernel>,
        fired: &mut Vec<(u64, Duration)>,
    ) -> std::sync::MutexGuard<'a, State> {
        let armed: Vec<(u64, u64, CpuTimeOf)> = st
            .timers
            .iter()
            .filter_map(|(id, t)| Some((*id, t.generation, t.cpu?)).filter(|_| t.cpu_deadline.is_some()))
            .collect();
        let limited: Vec<i32> = st.cpu_limited.iter().copied().collect();
        if armed.is_empty() && limited.is_empty() {
            st.next_cpu_check = None;
            return st;
        }
        st.next_cpu_check = Some(Instant::now() + cpu_tick());
        let Some(k) = kernel.upgrade() else { return st };
        drop(st);
        let readings: Vec<(u64, u64, Option<Duration>)> =
            armed.into_iter().map(|(id, generation, of)| (id, generation, cpu_time_of(&k, of))).collect();
        let unlimited: Vec<i32> = limited.into_iter().filter(|pid| !enforce_cpu_limit(&k, *pid)).collect();
        let mut st = self.state.lock().unwrap();
        for pid in unlimited {
            st.cpu_limited.remove(&pid);
        }
        for (id, generation, now) in readings {
            let Some(now) = now else { continue };
            let t = st.timers.get(&id);
            if t.is_some_and(|t| t.generation == generation && t.cpu_deadline.is_some_and(|d| d <= now)) {
                fired.push((id, now));
            }
        }
        st
    }

    /// Makes sure the CPU clocks are looked at within a tick.
    fn watch_cpu(&self, st: &mut State) {
        if st.next_cpu_check.is_none() {
            st.next_cpu_check = Some(Instant::now() + cpu_tick());
            self.cv.notify_all();
        }
    }

    /// A process's RLIMIT_CPU is finite: it is enforced from now on.
    pub fn watch_cpu_limit(&self, pid: i32) {
        let mut st = self.state.lock().unwrap();
        st.cpu_limited.insert(pid);
        self.watch_cpu(&mut st);
    }

    /// [`Timers::expire`] for a timer on a CPU clock that reads `now`.
    fn expire_cpu(&self, st: &mut State, id: u64, now: Duration) -> Option<(SigInfo, Target)> {
        let t = st.timers.get_mut(&id)?;
        // Re-armed since it was seen due: not due.
        let deadline = t.cpu_deadline.filter(|d| *d <= now)?;
        if t.interval.is_zero() {
            t.cpu_deadline = None;
        } else {
            // Missed periods count as overruns.
            let period = t.interval.as_nanos();
            let missed = (now.saturating_sub(deadline)).as_nanos() / period;
            t.overrun = t.overrun.saturating_add(missed.min(i32::MAX as u128) as i32);
            t.cpu_deadline =
                deadline.checked_add(Duration::from_nanos(((missed + 1) * period).min(u64::MAX as u128) as u64));
        }
        Self::signal_of(t, id)
    }

    /// The signal a timer's expiry sends, if any.
    fn signal_of(t: &Timer, id: u64) -> Option<(SigInfo, Target)> {
        match t.notify {
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
        }
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

    /// Arms timer `id` with `s`; `cpu_now` is the time on its CPU clock,
    /// for a timer on one. Returns the previous setting.
    fn arm(&self, st: &mut State, id: u64, s: Setting, cpu_now: Option<Duration>) -> Setting {
        let now = Instant::now();
        let t = st.timers.get_mut(&id).expect("timer exists");
        let old = Setting { value: remaining(t, now, cpu_now), interval: t.interval };
        t.generation += 1;
        t.interval = s.interval.min(TIME_MAX);
        t.overrun = 0;
        if t.cpu.is_some() {
            let base = cpu_now.unwrap_or_default();
            t.cpu_deadline = (!s.value.is_zero()).then(|| base.saturating_add(s.value.min(TIME_MAX)));
            if t.cpu_deadline.is_some() {
                self.watch_cpu(st);
            }
            return old;
        }
        t.deadline = (!s.value.is_zero()).then(|| after(now, s.value));
        if let Some(d) = t.deadline {
            let g = t.generation;
            st.heap.push(Reverse((d, id, g)));
        }
        self.cv.notify_all();
        old
    }

    fn itimer_id(st: &mut State, process: i32, which: u32) -> u64 {
        use linux_raw_sys::general as g;
        if let Some((id, _)) =
            st.timers.iter().find(|(_, t)| t.process == process && t.posix_id.is_none() && t.itimer == which)
        {
            return *id;
        }
        let (signo, cpu) = match which {
            g::ITIMER_VIRTUAL => (g::SIGVTALRM, Some(CpuTimeOf::ProcessUser(process))),
            g::ITIMER_PROF => (g::SIGPROF, Some(CpuTimeOf::Process(process))),
            _ => (g::SIGALRM, None),
        };
        st.next += 1;
        let id = st.next;
        st.timers.insert(
            id,
            Timer {
                process,
                clock: g::CLOCK_MONOTONIC,
                posix_id: None,
                itimer: which,
                notify: Notify::Signal { signo, value: 0, target: Target::Process(process) },
                deadline: None,
                cpu,
                cpu_deadline: None,
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
        self.set_itimer(process, linux_raw_sys::general::ITIMER_REAL, s, None)
    }

    /// setitimer: returns the previous setting. `cpu_now` is the process's
    /// CPU time, for ITIMER_VIRTUAL and ITIMER_PROF.
    pub fn set_itimer(&self, process: i32, which: u32, s: Setting, cpu_now: Option<Duration>) -> Setting {
        let mut st = self.state.lock().unwrap();
        let id = Self::itimer_id(&mut st, process, which);
        self.arm(&mut st, id, s, cpu_now)
    }

    /// getitimer.
    pub fn get_itimer(&self, process: i32, which: u32, cpu_now: Option<Duration>) -> Setting {
        let mut st = self.state.lock().unwrap();
        let id = Self::itimer_id(&mut st, process, which);
        let t = &st.timers[&id];
        Setting { value: remaining(t, Instant::now(), cpu_now), interval: t.interval }
    }

    fn posix(st: &State, process: i32, posix_id: i32) -> Option<u64> {
        st.timers.iter().find(|(_, t)| t.process == process && t.posix_id == Some(posix_id)).map(|(id, _)| *id)
    }

    /// timer_create: returns the new timer's id within the process, or
    /// None if the sandbox has `limit` POSIX timers already. (Linux
    /// preallocates each timer's signal against its user's
    /// RLIMIT_SIGPENDING and fails with EAGAIN past it; the sandbox is one
    /// user.)
    pub fn create(&self, process: i32, clock: u32, cpu: Option<CpuTimeOf>, notify: Notify, limit: u64) -> Option<i32> {
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
                itimer: 0,
                notify,
                deadline: None,
                cpu,
                cpu_deadline: None,
                interval: Duration::ZERO,
                overrun: 0,
                last_overrun: 0,
                generation: 0,
            },
        );
        Some(posix_id)
    }

    /// timer_settime: None if there is no such timer. `cpu_now`: the
    /// time on its CPU clock, for a timer on one.
    pub fn settime(&self, process: i32, posix_id: i32, s: Setting, cpu_now: Option<Duration>) -> Option<Setting> {
        let mut st = self.state.lock().unwrap();
        let id = Self::posix(&st, process, posix_id)?;
        Some(self.arm(&mut st, id, s, cpu_now))
    }

    /// The clock of a POSIX timer, and the CPU clock it names if it is one.
    pub fn clock(&self, process: i32, posix_id: i32) -> Option<(u32, Option<CpuTimeOf>)> {
        let st = self.state.lock().unwrap();
        let t = &st.timers[&Self::posix(&st, process, posix_id)?];
        Some((t.clock, t.cpu))
    }

    /// timer_gettime.
    pub fn gettime(&self, process: i32, posix_id: i32, cpu_now: Option<Duration>) -> Option<Setting> {
        let st = self.state.lock().unwrap();
        let t = &st.timers[&Self::posix(&st, process, posix_id)?];
        Some(Setting { value: remaining(t, Instant::now(), cpu_now), interval: t.interval })
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
        let mut st = self.state.lock().unwrap();
        st.timers.retain(|_, t| t.process != process);
        st.cpu_limited.remove(&process);
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

/// Time to a timer's next expiry (zero: disarmed). A timer on a CPU clock
/// that is due but not yet seen to be is about to expire: 1 ns, as Linux
/// says.
fn remaining(t: &Timer, now: Instant, cpu_now: Option<Duration>) -> Duration {
    match (t.cpu, t.cpu_deadline) {
        (Some(_), Some(d)) => d.saturating_sub(cpu_now.unwrap_or_default()).max(Duration::from_nanos(1)),
        (Some(_), None) => Duration::ZERO,
        _ => t.deadline.map(|d| d.saturating_duration_since(now)).unwrap_or_default(),
    }
}

/// Linux's check for RLIMIT_CPU, every tick: SIGKILL at the hard limit;
/// SIGXCPU at the soft limit, which then moves a second on, so that
/// another comes every second of CPU time. False once the limit is gone.
fn enforce_cpu_limit(k: &Kernel, pid: i32) -> bool {
    use linux_raw_sys::general as g;
    // A child not yet in the tree is watched from its fork; an exited
    // process is forgotten by cancel_process.
    let Some(tg) = k.procs.lock().unwrap().group(pid) else { return true };
    let limit = tg.rlimit(g::RLIMIT_CPU);
    if limit.cur == crate::task::RLIM_INFINITY {
        return false;
    }
    let used = tg.cpu_time();
    let secs = |s: u64| Duration::from_secs(s);
    if limit.max != crate::task::RLIM_INFINITY && used >= secs(limit.max) {
        crate::task::send_to_group(k, &tg, SigInfo::kernel(g::SIGKILL));
        return false;
    }
    if used >= secs(limit.cur) {
        tg.rlimits.lock().unwrap().0[g::RLIMIT_CPU as usize].cur = limit.cur + 1;
        crate::task::send_to_group(k, &tg, SigInfo::kernel(g::SIGXCPU));
    }
    true
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
