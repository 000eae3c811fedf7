//! Blocking in the sentry: each task has a [`Waiter`]; objects a task can
//! wait for have [`WaitQueue`]s; [`block_on`] sleeps until a condition holds.
//! This module is below `fs`, `task` and `net`: the blocking caller is
//! passed in as a [`Blocker`], never found through a thread-local. A wake-up is never lost: a waiter is
//! registered before the condition is checked, and a wake sets a flag the
//! sleeper consumes. A [`Forward`] is a standing member of a queue that
//! passes its wakes on to another queue, so an epoll instance hears of its
//! files without holding them open.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::time::Instant;

/// Why a wait ended without its condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockError {
    /// A signal is deliverable, or the task must stop or exit.
    Interrupted,
    TimedOut,
}

/// The caller of a blocking operation: how it sleeps and whether it must
/// stop waiting.
pub trait Blocker: Send + Sync {
    /// The waiter queues wake.
    fn waiter(&self) -> &Arc<Waiter>;
    /// True if a signal is deliverable or the caller must stop or exit: a
    /// blocking call gives up.
    fn interrupted(&self) -> bool;
}

/// Waits until `ready` gives a value, woken by any of `queues`. Fails when
/// `blocker` is interrupted or `deadline` passes.
pub fn block_on<T>(
    blocker: &dyn Blocker,
    queues: &[&WaitQueue],
    deadline: Option<Instant>,
    mut ready: impl FnMut() -> Option<T>,
) -> Result<T, BlockError> {
    let waiter = blocker.waiter();
    let _registered: Vec<_> = queues.iter().map(|q| q.register(waiter)).collect();
    loop {
        if let Some(v) = ready() {
            return Ok(v);
        }
        if blocker.interrupted() {
            return Err(BlockError::Interrupted);
        }
        if !waiter.sleep(deadline) {
            return ready().ok_or(BlockError::TimedOut);
        }
    }
}

/// What a queue wakes.
pub trait Wake: Send + Sync {
    fn wake(&self);
}

/// How one task sleeps and is woken.
#[derive(Default)]
pub struct Waiter {
    woken: Mutex<bool>,
    cv: Condvar,
    /// Written on every wake, for sleeps in a host poll (host descriptors).
    eventfd: OnceLock<OwnedFd>,
}

impl Waiter {
    pub fn new() -> Arc<Waiter> {
        Arc::new(Waiter::default())
    }

    /// Wakes the task if it sleeps, or makes its next sleep return at once.
    pub fn wake(&self) {
        *self.woken.lock().unwrap() = true;
        self.cv.notify_one();
        if let Some(fd) = self.eventfd.get() {
            let _ = rustix::io::write(fd, &1u64.to_ne_bytes());
        }
    }

    /// Sleeps until woken or `deadline`; returns false on timeout.
    pub fn sleep(&self, deadline: Option<Instant>) -> bool {
        let mut w = self.woken.lock().unwrap();
        while !*w {
            match deadline {
                None => w = self.cv.wait(w).unwrap(),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return false;
                    }
                    w = self.cv.wait_timeout(w, d - now).unwrap().0;
                }
            }
        }
        *w = false;
        true
    }

    /// An eventfd that becomes readable on every wake, to include in a host
    /// poll; drained with [`Waiter::drain_eventfd`].
    pub fn eventfd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.eventfd
            .get_or_init(|| {
                rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK)
                    .expect("eventfd")
            })
            .as_fd()
    }

    pub fn drain_eventfd(&self) {
        if let Some(fd) = self.eventfd.get() {
            let mut b = [0u8; 8];
            let _ = rustix::io::read(fd, &mut b);
        }
        *self.woken.lock().unwrap() = false;
    }
}

impl Wake for Waiter {
    fn wake(&self) {
        Waiter::wake(self)
    }
}

/// Tasks waiting for something about one object.
#[derive(Default)]
pub struct WaitQueue {
    waiters: Mutex<Vec<Weak<dyn Wake>>>,
    /// Counts notifications: an edge-triggered epoll reports a file again
    /// only after its queue moved on.
    generation: AtomicU64,
}

impl WaitQueue {
    /// An empty queue, for one kept in a static.
    pub const fn new() -> WaitQueue {
        WaitQueue { waiters: Mutex::new(Vec::new()), generation: AtomicU64::new(0) }
    }

    /// Adds `w`; it is removed when the returned guard is dropped.
    pub fn register<'a>(&'a self, w: &Arc<Waiter>) -> Registration<'a> {
        let w: Weak<dyn Wake> = Arc::downgrade(w) as Weak<dyn Wake>;
        self.waiters.lock().unwrap().push(w.clone());
        Registration { queue: self, waiter: w }
    }

    /// Wakes every waiter. The wakes are made after the list is let go, so
    /// a forwarded wake never holds two queues' locks at once.
    pub fn notify_all(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        let live: Vec<Arc<dyn Wake>> = {
            let mut list = self.waiters.lock().unwrap();
            // Forwards whose owner went away are dropped here.
            list.retain(|w| w.strong_count() > 0);
            list.iter().filter_map(Weak::upgrade).collect()
        };
        for w in live {
            w.wake();
        }
    }

    /// How many notifications there have been.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    pub fn is_empty(&self) -> bool {
        self.waiters.lock().unwrap().is_empty()
    }
}

/// Membership of a waiter in a queue.
pub struct Registration<'a> {
    queue: &'a WaitQueue,
    waiter: Weak<dyn Wake>,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        let mut list = self.queue.waiters.lock().unwrap();
        if let Some(i) = list.iter().position(|w| w.ptr_eq(&self.waiter)) {
            list.swap_remove(i);
        }
    }
}

/// A standing membership of one queue that wakes another: Linux's
/// ep_poll_callback. The source queue holds it weakly, so it leaves that
/// queue when its owner drops it, and the owner need not keep the source
/// (the file) alive.
pub struct Forward {
    to: Arc<WaitQueue>,
}

impl Forward {
    /// Joins `from`; each wake of `from` wakes every waiter of `to`.
    pub fn new(from: &WaitQueue, to: Arc<WaitQueue>) -> Arc<Forward> {
        let f = Arc::new(Forward { to });
        let mut list = from.waiters.lock().unwrap();
        list.retain(|w| w.strong_count() > 0);
        list.push(Arc::downgrade(&f) as Weak<dyn Wake>);
        f
    }
}

impl Wake for Forward {
    fn wake(&self) {
        self.to.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_wake_before_the_sleep_is_kept() {
        let w = Waiter::new();
        w.wake();
        assert!(w.sleep(Some(Instant::now() + Duration::from_secs(5))));
        assert!(!w.sleep(Some(Instant::now() + Duration::from_millis(10))), "the flag was consumed");
    }

    #[test]
    fn queues_wake_registered_waiters_only() {
        let q = WaitQueue::default();
        let a = Waiter::new();
        let b = Waiter::new();
        {
            let _r = q.register(&a);
            q.notify_all();
        }
        assert!(q.is_empty());
        q.notify_all();
        assert!(a.sleep(Some(Instant::now())));
        assert!(!b.sleep(Some(Instant::now() + Duration::from_millis(5))));
        let w2 = a.clone();
        let t = std::thread::spawn(move || w2.sleep(None));
        std::thread::sleep(Duration::from_millis(20));
        let _r = q.register(&a);
        q.notify_all();
        assert!(t.join().unwrap());
    }

    #[test]
    fn forwards_pass_wakes_on_until_dropped() {
        let source = WaitQueue::default();
        let target = Arc::new(WaitQueue::default());
        let w = Waiter::new();
        let _r = target.register(&w);
        let f = Forward::new(&source, target.clone());
        source.notify_all();
        assert!(w.sleep(Some(Instant::now())));
        assert_eq!(target.generation(), 1);
        drop(f);
        source.notify_all();
        assert_eq!(target.generation(), 1, "a dropped forward wakes nothing");
        assert!(source.is_empty(), "and leaves its queue");
    }
}
