//! Counters for `--profile`. Counts are always kept (one atomic add);
//! clocks are read only when profiling is on, so a normal run pays nothing
//! for the times.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// Syscall numbers counted individually.
pub const MAX_NR: usize = 512;

/// Why a task left application code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    Syscall = 0,
    PageFault = 1,
    Exception = 2,
    Interrupt = 3,
}

impl EventKind {
    pub const ALL: [EventKind; 4] =
        [EventKind::Syscall, EventKind::PageFault, EventKind::Exception, EventKind::Interrupt];

    pub fn name(self) -> &'static str {
        match self {
            EventKind::Syscall => "syscall",
            EventKind::PageFault => "page fault",
            EventKind::Exception => "exception",
            EventKind::Interrupt => "interrupt",
        }
    }
}

#[derive(Default)]
struct Counter {
    count: AtomicU64,
    ns: AtomicU64,
}

impl Counter {
    fn add(&self, took: Option<Duration>) {
        self.count.fetch_add(1, Ordering::Relaxed);
        if let Some(t) = took {
            self.ns.fetch_add(t.as_nanos() as u64, Ordering::Relaxed);
        }
    }
    fn get(&self) -> (u64, u64) {
        (self.count.load(Ordering::Relaxed), self.ns.load(Ordering::Relaxed))
    }
}

/// Sandbox-wide counters.
pub struct Stats {
    enabled: AtomicBool,
    syscalls: Vec<Counter>,
    events: [Counter; 4],
    faults_mapped: AtomicU64,
    faults_signalled: AtomicU64,
    fault_pages: AtomicU64,
    /// Lifetime of task host threads, summed.
    task_ns: AtomicU64,
    /// Calls of numbers past [`MAX_NR`], which no Linux system call has.
    beyond_table: AtomicU64,
    /// System call sites rewritten to skip the trap.
    rewritten_sites: AtomicU64,
    /// Calls a trampoline in application memory answered, by fast-path
    /// index (the platform counts those its own trampoline answers).
    fast_path_hits: [AtomicU64; platform::FAST_PATH_SYSCALLS.len()],
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            enabled: AtomicBool::new(false),
            syscalls: (0..MAX_NR).map(|_| Counter::default()).collect(),
            events: Default::default(),
            faults_mapped: AtomicU64::new(0),
            faults_signalled: AtomicU64::new(0),
            fault_pages: AtomicU64::new(0),
            task_ns: AtomicU64::new(0),
            rewritten_sites: AtomicU64::new(0),
            fast_path_hits: Default::default(),
            beyond_table: AtomicU64::new(0),
        }
    }
}

/// A snapshot of one counter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Tally {
    pub count: u64,
    pub total_ns: u64,
}

impl Stats {
    /// Turns on timing.
    pub fn enable(&self) {
        self.enabled.store(true, Ordering::Relaxed);
    }

    /// True while profiling: callers read clocks only then.
    pub fn timing(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    pub fn record_syscall(&self, nr: u64, took: Option<Duration>) {
        match self.syscalls.get(nr as usize) {
            Some(c) => c.add(took),
            None => {
                self.beyond_table.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    pub fn record_event(&self, kind: EventKind, took: Option<Duration>) {
        self.events[kind as usize].add(took);
    }

    /// A page fault: resolved (with the pages it mapped) or signalled.
    pub fn record_fault(&self, mapped: Option<u64>) {
        match mapped {
            Some(pages) => {
                self.faults_mapped.fetch_add(1, Ordering::Relaxed);
                self.fault_pages.fetch_add(pages, Ordering::Relaxed);
            }
            None => {
                self.faults_signalled.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    pub fn record_task_lifetime(&self, took: Duration) {
        self.task_ns.fetch_add(took.as_nanos() as u64, Ordering::Relaxed);
    }

    /// Per-syscall tallies of the numbers that were used.
    pub fn syscalls(&self) -> Vec<(u64, Tally)> {
        self.syscalls
            .iter()
            .enumerate()
            .filter_map(|(nr, c)| {
                let (count, total_ns) = c.get();
                (count > 0).then_some((nr as u64, Tally { count, total_ns }))
            })
            .collect()
    }

    pub fn event(&self, kind: EventKind) -> Tally {
        let (count, total_ns) = self.events[kind as usize].get();
        Tally { count, total_ns }
    }

    /// (resolved, signalled, pages mapped).
    /// Counts a system call site rewritten (always, as counts cost
    /// nothing measurable beside a rewrite).
    pub fn record_rewritten_site(&self) {
        self.rewritten_sites.fetch_add(1, Ordering::Relaxed);
    }

    pub fn record_fast_path_hits(&self, hits: &[u64; platform::FAST_PATH_SYSCALLS.len()]) {
        for (c, h) in self.fast_path_hits.iter().zip(hits) {
            if *h != 0 {
                c.fetch_add(*h, Ordering::Relaxed);
            }
        }
    }

    pub fn fast_path_hits(&self) -> [u64; platform::FAST_PATH_SYSCALLS.len()] {
        std::array::from_fn(|i| self.fast_path_hits[i].load(Ordering::Relaxed))
    }

    pub fn rewritten_sites(&self) -> u64 {
        self.rewritten_sites.load(Ordering::Relaxed)
    }

    pub fn faults(&self) -> (u64, u64, u64) {
        (
            self.faults_mapped.load(Ordering::Relaxed),
            self.faults_signalled.load(Ordering::Relaxed),
            self.fault_pages.load(Ordering::Relaxed),
        )
    }

    /// Calls of numbers past [`MAX_NR`].
    pub fn beyond_table(&self) -> u64 {
        self.beyond_table.load(Ordering::Relaxed)
    }

    pub fn task_ns(&self) -> u64 {
        self.task_ns.load(Ordering::Relaxed)
    }
}
