//! Counters for `--profile`: per-syscall counts and time, fault outcomes.

use std::sync::Mutex;
use std::time::Duration;

/// Per-syscall totals.
#[derive(Clone, Copy, Debug, Default)]
pub struct SyscallStat {
    pub count: u64,
    pub total: Duration,
    /// Answered without leaving the guest (in-VM fast paths).
    pub in_guest: u64,
}

/// Sandbox-wide counters.
#[derive(Default)]
pub struct Stats {
    pub syscalls: Mutex<Vec<SyscallStat>>,
}

impl Stats {
    pub fn record_syscall(&self, nr: u64, took: Duration) {
        let mut s = self.syscalls.lock().unwrap();
        let i = nr as usize;
        if i >= 1024 {
            return;
        }
        if s.len() <= i {
            s.resize(i + 1, SyscallStat::default());
        }
        s[i].count += 1;
        s[i].total += took;
    }
}
