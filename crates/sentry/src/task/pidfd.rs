//! Process descriptors (pidfd_open, CLONE_PIDFD): a handle on one process
//! that cannot be confused with a later process given the same pid. It
//! becomes readable when the process has exited.

use std::sync::Arc;

use super::{ThreadGroup, WaitQueue};
use crate::fs::{FileOps, FsError, POLLIN, POLLRDNORM, Stat};

pub struct PidFd {
    pub process: Arc<ThreadGroup>,
}

impl FileOps for PidFd {
    fn stat(&self) -> Result<Stat, FsError> {
        Ok(crate::fs::synthetic::anon_inode_stat())
    }

    fn poll(&self) -> u32 {
        if self.process.state.lock().unwrap().zombie { POLLIN | POLLRDNORM } else { 0 }
    }

    fn poll_queue(&self) -> Option<&WaitQueue> {
        Some(&self.process.thread_events)
    }

    fn anon_name(&self) -> Option<&'static str> {
        Some("anon_inode:[pidfd]")
    }
}
