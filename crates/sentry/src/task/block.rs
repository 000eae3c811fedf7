//! The task running on each host thread, for the task layer's own use
//! (futexes, signal delivery); file systems are given their caller instead.

use std::cell::RefCell;
use std::sync::Arc;

use super::TaskShared;

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
