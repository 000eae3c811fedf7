//! `--profile`: where a sandbox's time went, and what it holds at exit.

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use crate::kernel::Kernel;
use crate::stats::EventKind;

/// Resources held by the sandbox at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Resources {
    /// Host threads running tasks.
    pub task_threads: u64,
    pub vcpus_created: u64,
    pub vcpus_in_use: u64,
    /// Memory-file frames in use, and the most ever in use.
    pub frames_in_use: u64,
    pub frames_peak: u64,
    /// Of the frames in use: the platform's own (constant per vCPU count)
    /// and page tables.
    pub supervisor_frames: u64,
    pub page_table_frames: u64,
    /// Frames' worth of the memory limit charged for the sentry's records
    /// held for the application (tasks, mappings), beyond the frames.
    pub frames_charged: u64,
    /// Open host file descriptors of the cordon process.
    pub host_fds: u64,
}

impl Resources {
    pub fn now(kernel: &Kernel) -> Resources {
        let p = kernel.platform.stats();
        let m = kernel.mf.stats();
        Resources {
            task_threads: kernel.live_task_threads(),
            vcpus_created: p.vcpus,
            vcpus_in_use: p.vcpus_in_use,
            frames_in_use: m.frames_in_use,
            frames_peak: m.frames_peak,
            supervisor_frames: p.supervisor_frames,
            page_table_frames: p.table_frames,
            frames_charged: m.frames_charged,
            host_fds: std::fs::read_dir("/proc/self/fd").map(|d| d.count() as u64).unwrap_or(0),
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct ExitLine {
    pub reason: &'static str,
    /// Exits counted by the platform.
    pub count: u64,
    /// Time the sentry spent handling them (profiling only).
    pub total_ns: u64,
    pub mean_ns: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct SyscallLine {
    pub name: String,
    pub nr: u64,
    /// Calls made, whether they reached the sentry or not.
    pub count: u64,
    /// Time the sentry spent on the ones that reached it.
    pub total_ns: u64,
    pub mean_ns: u64,
    /// Of `count`, answered by the platform without an exit.
    pub in_guest: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Faults {
    pub total: u64,
    pub resolved: u64,
    pub signalled: u64,
    pub pages_mapped: u64,
    pub pages_per_fault: f64,
}

/// The split of the task threads' time.
#[derive(Clone, Debug, Serialize)]
pub struct TimeSplit {
    pub wall_ns: u64,
    /// Sum of the lifetimes of every task's host thread.
    pub task_threads_ns: u64,
    /// Inside the hypervisor running application code.
    pub guest_ns: u64,
    /// In the sentry, handling exits (system calls include their waits).
    pub sentry_ns: u64,
    /// Moving registers in and out of the vCPU.
    pub register_ns: u64,
    /// Everything else: task creation and teardown, signal delivery.
    pub other_ns: u64,
}

/// Calls the sentry answered with ENOSYS because it does not implement
/// them.
#[derive(Clone, Debug, Serialize)]
pub struct UnsupportedLine {
    pub name: String,
    /// None for numbers past any system call, counted together.
    pub nr: Option<u64>,
    pub count: u64,
}

/// The whole report.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub platform: &'static str,
    /// What chose the platform ("auto", "--platform", "CORDON_PLATFORM"),
    /// when the caller says.
    pub platform_chosen_by: Option<&'static str>,
    pub vm_entries: u64,
    /// System call sites rewritten to go to the platform's trampoline.
    pub rewritten_sites: u64,
    /// System calls that reached the sentry through a rewritten site (of
    /// the syscall exits) rather than a trap.
    pub rewritten_calls: u64,
    /// Clock reads were answered in the guest by the vDSO.
    pub vdso_clock: bool,
    pub exits: Vec<ExitLine>,
    pub syscalls: Vec<SyscallLine>,
    pub unsupported: Vec<UnsupportedLine>,
    pub faults: Faults,
    pub time: TimeSplit,
    pub resources_at_start: Resources,
    pub resources_at_exit: Resources,
}

impl Report {
    pub fn collect(kernel: &Kernel, wall: Duration, start: Resources, exit: Resources) -> Report {
        let e = kernel.platform.exit_counts();
        let st = &kernel.stats;
        let platform_counts = [e.syscalls, e.page_faults, e.exceptions, e.interrupts];
        let exits: Vec<ExitLine> = EventKind::ALL
            .iter()
            .zip(platform_counts)
            .map(|(k, count)| {
                let t = st.event(*k);
                ExitLine { reason: k.name(), count, total_ns: t.total_ns, mean_ns: t.total_ns / t.count.max(1) }
            })
            .collect();
        let mut syscalls: Vec<SyscallLine> = st
            .syscalls()
            .into_iter()
            .map(|(nr, t)| SyscallLine {
                name: crate::syscalls::name(nr),
                nr,
                count: t.count,
                total_ns: t.total_ns,
                mean_ns: t.total_ns / t.count.max(1),
                in_guest: 0,
            })
            .collect();
        // Calls the platform answered without an exit count as calls too.
        let in_memory = st.fast_path_hits();
        let answered =
            std::array::from_fn::<u64, { platform::FAST_PATH_SYSCALLS.len() }, _>(|i| e.fast_path[i] + in_memory[i]);
        for (nr, hits) in platform::FAST_PATH_SYSCALLS.into_iter().zip(answered) {
            if hits == 0 {
                continue;
            }
            let line = match syscalls.iter().position(|c| c.nr == nr) {
                Some(i) => &mut syscalls[i],
                None => {
                    let name = crate::syscalls::name(nr);
                    syscalls.push(SyscallLine { name, nr, count: 0, total_ns: 0, mean_ns: 0, in_guest: 0 });
                    syscalls.last_mut().expect("just pushed")
                }
            };
            line.count += hits;
            line.in_guest = hits;
        }
        syscalls.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(b.count.cmp(&a.count)));
        let mut unsupported: Vec<UnsupportedLine> = syscalls
            .iter()
            .filter(|c| !crate::syscalls::is_supported(c.nr))
            .map(|c| UnsupportedLine { name: c.name.clone(), nr: Some(c.nr), count: c.count })
            .collect();
        unsupported.sort_by_key(|u| u.nr);
        if st.beyond_table() > 0 {
            unsupported.push(UnsupportedLine { name: "unknown numbers".into(), nr: None, count: st.beyond_table() });
        }
        let (resolved, signalled, pages) = st.faults();
        let sentry_ns: u64 = exits.iter().map(|x| x.total_ns).sum();
        let task_ns = st.task_ns();
        let busy = e.guest_ns + sentry_ns + e.register_ns;
        Report {
            platform: kernel.platform.name(),
            platform_chosen_by: None,
            vm_entries: e.entries,
            rewritten_sites: st.rewritten_sites(),
            rewritten_calls: e.rewritten_calls,
            vdso_clock: kernel.clock.usable(),
            exits,
            syscalls,
            unsupported,
            faults: Faults {
                total: resolved + signalled,
                resolved,
                signalled,
                pages_mapped: pages,
                pages_per_fault: pages as f64 / resolved.max(1) as f64,
            },
            time: TimeSplit {
                wall_ns: wall.as_nanos() as u64,
                task_threads_ns: task_ns,
                guest_ns: e.guest_ns,
                sentry_ns,
                register_ns: e.register_ns,
                other_ns: task_ns.saturating_sub(busy),
            },
            resources_at_start: start,
            resources_at_exit: exit,
        }
    }

    /// The report for humans.
    pub fn render(&self) -> String {
        let ms = |ns: u64| ns as f64 / 1e6;
        let us = |ns: u64| ns as f64 / 1e3;
        let mut s = String::new();
        let t = &self.time;
        let pct = |ns: u64| 100.0 * ns as f64 / t.task_threads_ns.max(1) as f64;
        let _ = writeln!(
            s,
            "cordon profile ({} platform{}, {} {}, clocks read {})",
            self.platform,
            self.platform_chosen_by.map(|by| format!(" chosen by {by}")).unwrap_or_default(),
            self.vm_entries,
            if self.platform == "kvm" { "VM entries" } else { "entries into application code" },
            if self.vdso_clock { "in the guest" } else { "by syscall" }
        );
        let _ = writeln!(
            s,
            "time: wall {:.1} ms; task threads {:.1} ms = guest {:.1} ms ({:.0}%) + sentry {:.1} ms ({:.0}%) + registers {:.1} ms ({:.0}%) + other {:.1} ms ({:.0}%)",
            ms(t.wall_ns),
            ms(t.task_threads_ns),
            ms(t.guest_ns),
            pct(t.guest_ns),
            ms(t.sentry_ns),
            pct(t.sentry_ns),
            ms(t.register_ns),
            pct(t.register_ns),
            ms(t.other_ns),
            pct(t.other_ns)
        );
        let _ = writeln!(s, "exits:");
        for x in &self.exits {
            let _ = writeln!(
                s,
                "  {:<12} {:>9}  total {:>9.2} ms  mean {:>8.2} us",
                x.reason,
                x.count,
                ms(x.total_ns),
                us(x.mean_ns)
            );
        }
        if self.rewritten_sites > 0 {
            let _ = writeln!(
                s,
                "rewritten syscall sites: {}; syscall exits through them: {}",
                self.rewritten_sites, self.rewritten_calls
            );
        }
        let f = &self.faults;
        let _ = writeln!(
            s,
            "page faults: {} ({} resolved, {} signalled), {} pages mapped, {:.1} per fault",
            f.total, f.resolved, f.signalled, f.pages_mapped, f.pages_per_fault
        );
        let _ = writeln!(s, "syscalls:{:>27} {:>11} {:>11} {:>9}", "count", "total ms", "mean us", "in guest");
        for c in &self.syscalls {
            let _ = writeln!(
                s,
                "  {:<24} {:>9} {:>11.2} {:>11.2} {:>9}",
                c.name,
                c.count,
                ms(c.total_ns),
                us(c.mean_ns),
                c.in_guest
            );
        }
        if !self.unsupported.is_empty() {
            let calls: Vec<String> = self
                .unsupported
                .iter()
                .map(|u| match u.nr {
                    Some(nr) => format!("{} ({nr}) x{}", u.name, u.count),
                    None => format!("{} x{}", u.name, u.count),
                })
                .collect();
            let _ = writeln!(s, "unsupported (ENOSYS): {}", calls.join(", "));
        }
        for (label, r) in [("at start", &self.resources_at_start), ("at exit", &self.resources_at_exit)] {
            let _ = writeln!(
                s,
                "resources {label}: task threads {}, vCPUs {} ({} in use), frames {} (peak {}, supervisor {}, page tables {}), charged {}, host fds {}",
                r.task_threads,
                r.vcpus_created,
                r.vcpus_in_use,
                r.frames_in_use,
                r.frames_peak,
                r.supervisor_frames,
                r.page_table_frames,
                r.frames_charged,
                r.host_fds
            );
        }
        s
    }
}
