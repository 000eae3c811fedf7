//! Blocking the current task until something happens.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Instant;

use super::TaskShared;
use super::wait_queue::WaitQueue;

thread_local! {
    /// The task running on this host thread.
    static CURRENT: RefCell<Option<Arc<TaskShared>>> = const { RefCell::new(None) };
}

pub(crate) fn set_current(t: Option<Arc<TaskShared>>) {
    CURRENT.with(|c| *c.borrow_mut() = t);
}

/// The task running on the calling host thread, if any.
pub fn current_opt() -> Option<Arc<TaskShared>> {
    CURRENT.with(|c| c.borrow().clone())
}

/// The task running on the calling host thread. Only task threads call
/// into code that blocks.
pub fn current() -> Arc<TaskShared> {
    current_opt().expect("blocking outside a task thread")
}

/// Why a wait ended without its condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockError {
    /// A signal is deliverable, or the task must stop or exit.
    Interrupted,
    TimedOut,
}

/// Waits until `ready` gives a value, woken by any of `queues`. Fails when
/// the task is interrupted or `deadline` passes.
pub fn block_on<T>(
    queues: &[&WaitQueue],
    deadline: Option<Instant>,
    mut ready: impl FnMut() -> Option<T>,
) -> Result<T, BlockError> {
    let task = current();
    let _registered: Vec<_> = queues.iter().map(|q| q.register(&task.waiter)).collect();
    loop {
        if let Some(v) = ready() {
            return Ok(v);
        }
        if task.interrupted() {
            return Err(BlockError::Interrupted);
        }
        if !task.waiter.sleep(deadline) {
            return ready().ok_or(BlockError::TimedOut);
        }
    }
}
