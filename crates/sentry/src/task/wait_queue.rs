//! Blocking in the sentry: each task has a [`Waiter`]; objects a task can
//! wait for have [`WaitQueue`]s. A wake-up is never lost: a waiter is
//! registered before the condition is checked, and a wake sets a flag the
//! sleeper consumes.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::time::Instant;

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

/// Tasks waiting for something about one object.
#[derive(Default)]
pub struct WaitQueue {
    waiters: Mutex<Vec<Weak<Waiter>>>,
    /// Counts notifications: an edge-triggered epoll reports a file again
    /// only after its queue moved on.
    generation: AtomicU64,
}

impl WaitQueue {
    /// Adds `w`; it is removed when the returned guard is dropped.
    pub fn register<'a>(&'a self, w: &Arc<Waiter>) -> Registration<'a> {
        self.waiters.lock().unwrap().push(Arc::downgrade(w));
        Registration { queue: self, waiter: Arc::downgrade(w) }
    }

    /// Wakes every waiter.
    pub fn notify_all(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        let list = self.waiters.lock().unwrap();
        for w in list.iter() {
            if let Some(w) = w.upgrade() {
                w.wake();
            }
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
    waiter: Weak<Waiter>,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        let mut list = self.queue.waiters.lock().unwrap();
        if let Some(i) = list.iter().position(|w| w.ptr_eq(&self.waiter)) {
            list.swap_remove(i);
        }
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
}
