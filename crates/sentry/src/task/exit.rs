//! How threads and processes end: CLEARTID and robust futexes, zombies,
//! reparenting to the first process, and the parent's notification.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use linux_raw_sys::general as g;

use super::signals::{group_exit, notify};
use super::tree::ProcessTree;
use super::{ExitStatus, Task, ThreadGroup};
use crate::kernel::Kernel;
use crate::signal::{SigInfo, code, flags};

/// How a task leaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitKind {
    /// exit(2): this thread only; the process ends with `code` if it was
    /// the last.
    Thread(u8),
    /// exit_group(2) or a fatal signal: every thread.
    Group(ExitStatus),
}

/// The pid of the sandbox's first process, which inherits orphans.
pub const INIT_PID: i32 = 1;

/// Most entries of a robust-futex list walked at exit (Linux's limit).
const ROBUST_LIST_LIMIT: usize = 2048;
const FUTEX_OWNER_DIED: u32 = 0x4000_0000;
const FUTEX_TID_MASK: u32 = 0x3fff_ffff;
const FUTEX_WAITERS: u32 = 0x8000_0000;

impl Task {
    /// Asks this task to leave as `kind` says; it stops at its next chance.
    pub fn request_exit(&mut self, kind: ExitKind) {
        match kind {
            ExitKind::Thread(code) => {
                self.exit_code = Some(code);
                self.shared.kill();
            }
            ExitKind::Group(status) => group_exit(&self.tg, status),
        }
    }

    /// Marks futexes the thread holds on its robust list as abandoned and
    /// wakes a waiter of each.
    fn release_robust_futexes(&self) {
        let (head, len) = self.robust_list;
        if head == 0 || len != 24 {
            return;
        }
        let read = |a: u64| self.mm.read::<u64>(a).ok();
        let Some(offset) = read(head + 8).map(|o| o as i64) else { return };
        let pending = read(head + 16).unwrap_or(0);
        let mut entry = read(head).unwrap_or(head);
        let tid = self.tid() as u32;
        let handle = |e: u64| {
            let uaddr = (e as i64).wrapping_add(offset) as u64;
            if let Ok(v) = self.mm.read::<u32>(uaddr)
                && v & FUTEX_TID_MASK == tid
            {
                let new = (v & FUTEX_WAITERS) | FUTEX_OWNER_DIED;
                if self.mm.write(uaddr, &new).is_ok() {
                    self.kernel.futexes.wake(&self.mm, uaddr, false, 1, u32::MAX);
                }
            }
        };
        let mut n = 0;
        while entry != head && entry != 0 && n < ROBUST_LIST_LIMIT {
            let next = read(entry).unwrap_or(head);
            if entry != pending {
                handle(entry);
            }
            entry = next;
            n += 1;
        }
        if pending != 0 {
            handle(pending);
        }
    }
}

/// Tears a task down after its run loop ended.
pub fn exit_thread(mut task: Task) {
    let kernel = task.kernel.clone();
    let tg = task.tg.clone();
    if let Some(v) = task.vfork_done.take() {
        v.release();
    }
    if task.clear_child_tid != 0 {
        let addr = task.clear_child_tid;
        if task.mm.write(addr, &0u32).is_ok() {
            kernel.futexes.wake(&task.mm, addr, false, 1, u32::MAX);
        }
    }
    task.release_robust_futexes();
    let cpu = task.shared.stop_cpu_clock();
    let tid = task.tid();
    let last = {
        let _moving = tg.cpu_accounting.lock().unwrap();
        let last = {
            let mut threads = tg.threads.lock().unwrap();
            threads.retain(|t| !Arc::ptr_eq(t, &task.shared));
            threads.is_empty()
        };
        tg.state.lock().unwrap().dead_threads_cpu += cpu;
        last
    };
    // Process signals this thread was to take go to another thread.
    if !last && task.shared.sig.lock().unwrap().sigpending {
        super::signals::retarget_shared(&task.shared, crate::signal::SigSet(u64::MAX));
    }
    kernel.procs.lock().unwrap().remove_thread(tid);
    let leader = tid == tg.tgid;
    let (thread_status, delayed_leader) = {
        let mut st = tg.state.lock().unwrap();
        if leader && !last {
            st.leader_exit_code = task.exit_code;
        }
        // Without a group exit, the process ends with what its leader
        // exited with, as Linux reports the leader's exit code.
        if last && st.exit.is_none() {
            st.exit = Some(ExitStatus::Exited(st.leader_exit_code.or(task.exit_code).unwrap_or(0)));
        }
        let status = st.exit.unwrap_or(ExitStatus::Exited(task.exit_code.unwrap_or(0)));
        (status, if last { st.delayed_leader.take() } else { None })
    };
    let mut parent_deferred = super::ptrace::tracee_exited(&kernel, &task.shared, last, thread_status);
    // The process ends with a traced leader that went before: its tracer
    // collects it now, with the process's status.
    if let Some(l) = delayed_leader {
        parent_deferred |= super::ptrace::tracee_exited(&kernel, &l.0, true, thread_status);
    }
    tg.thread_events.notify_all();
    // Release the vCPU and the process's resources with the last reference:
    // the address space before the descriptors (the task's fields drop in
    // that order), as Linux's exit_mm comes before exit_files, so whoever
    // sees a pipe close also sees the program file free to write.
    if last {
        *tg.view.lock().unwrap() = None;
    }
    drop(task);
    if last {
        // SEM_UNDO adjustments are undone before the parent can learn of
        // the exit.
        kernel.ipc.exit_process(tg.tgid);
        exit_process(&kernel, &tg, parent_deferred);
    } else {
        thread_orphans(&kernel, &tg, tid);
    }
}

/// A thread that is not its process's last has exited: children it created
/// pass to another thread of the process, and those that asked for a
/// parent-death signal get it (Linux counts the creating thread as the
/// parent).
fn thread_orphans(kernel: &Kernel, tg: &ThreadGroup, tid: i32) {
    let Some(heir) = tg.main_thread().map(|t| t.tid()) else { return };
    let children: Vec<Arc<ThreadGroup>> = {
        let tree = kernel.procs.lock().unwrap();
        tree.children_of(tg.tgid).iter().filter_map(|c| tree.group(*c)).collect()
    };
    for c in children {
        let sig = {
            let mut st = c.state.lock().unwrap();
            if st.parent_thread != tid {
                continue;
            }
            st.parent_thread = heir;
            st.pdeath_signal
        };
        if sig != 0 {
            super::send_to_group(kernel, &c, SigInfo::user(sig, code::SI_USER, tg.tgid, tg.creds().uid.real));
        }
    }
}

/// The last thread of `tg` is gone: make it a zombie (or reap it at once),
/// hand its children to the first process and tell its parent.
fn exit_process(kernel: &Arc<Kernel>, tg: &Arc<ThreadGroup>, parent_deferred: bool) {
    *tg.view.lock().unwrap() = None;
    super::ptrace::tracer_exited(kernel, tg);
    kernel.timers.cancel_process(tg.tgid);
    let status = tg.state.lock().unwrap().exit.expect("set by the last thread");
    let (orphans, parent, reaper, hangups) = {
        let mut tree = kernel.procs.lock().unwrap();
        let reaper = tree.new_reaper(tg.tgid, INIT_PID);
        let orphans = if tg.tgid == INIT_PID { Vec::new() } else { tree.reparent_children(tg.tgid, reaper) };
        let hangups = newly_orphaned_stopped_groups(&tree, tg.tgid, &orphans);
        let orphans: Vec<Arc<ThreadGroup>> = orphans.iter().filter_map(|p| tree.group(*p)).collect();
        let parent = tree.parent_of(tg.tgid).and_then(|p| tree.group(p));
        (orphans, parent, tree.group(reaper), hangups)
    };
    if !orphans.is_empty() {
        // Their getppid answers changed, also where the platform answers it.
        kernel.reparents.fetch_add(1, Ordering::AcqRel);
        for o in &orphans {
            for t in o.threads.lock().unwrap().iter() {
                t.refresh_published_ids();
            }
        }
    }
    // A group this exit leaves orphaned with stopped members would stay
    // stopped for good: POSIX has it hung up and continued.
    for pgid in hangups {
        let members = kernel.procs.lock().unwrap().members_of(pgid);
        for sig in [g::SIGHUP, g::SIGCONT] {
            for m in &members {
                super::send_to_group(kernel, m, SigInfo::kernel(sig));
            }
        }
    }
    // Children that asked for a signal when their parent dies get it.
    for o in &orphans {
        let sig = {
            let mut st = o.state.lock().unwrap();
            st.parent_thread = 0;
            // The new parent hears of the orphan's end by SIGCHLD, whatever
            // signal the old one asked for: no process chooses the signal
            // another gets (Linux's reparent_leader).
            st.exit_signal = g::SIGCHLD;
            st.pdeath_signal
        };
        if sig != 0 {
            // Sent as by the dying parent (SEND_SIG_NOINFO).
            super::send_to_group(kernel, o, SigInfo::user(sig, code::SI_USER, tg.tgid, tg.creds().uid.real));
        }
    }
    // Zombies among them are reported to their new parent, which may reap
    // them at once.
    if let Some(reaper) = &reaper {
        for o in orphans.iter().filter(|o| o.state.lock().unwrap().zombie) {
            report_exit(kernel, o, Some(reaper));
        }
    }
    // A tracer other than the parent learns of the end first; the parent
    // once the tracer has collected it (see ptrace::tracee_report).
    if !parent_deferred {
        report_exit(kernel, tg, parent.as_ref());
    }
    if tg.tgid == INIT_PID {
        kernel.init_exited(status);
    }
}

/// The process groups that `pid`'s exit orphans and that have a stopped
/// member: its own group, when its parent was that group's link to the
/// session, and the groups of its children (already handed to their new
/// parent), when it was theirs.
fn newly_orphaned_stopped_groups(tree: &ProcessTree, pid: i32, children: &[i32]) -> Vec<i32> {
    let (Some(pgid), Some(sid)) = (tree.pgid_of(pid), tree.sid_of(pid)) else { return Vec::new() };
    let mut groups = Vec::new();
    if let Some(parent) = tree.parent_of(pid)
        && tree.pgid_of(parent) != Some(pgid)
        && tree.sid_of(parent) == Some(sid)
        && tree.pgrp_orphaned(pgid, Some(pid))
        && tree.pgrp_has_stopped(pgid)
    {
        groups.push(pgid);
    }
    for &c in children {
        let Some(cg) = tree.pgid_of(c) else { continue };
        if cg != pgid
            && tree.sid_of(c) == Some(sid)
            && !groups.contains(&cg)
            && tree.pgrp_orphaned(cg, None)
            && tree.pgrp_has_stopped(cg)
        {
            groups.push(cg);
        }
    }
    groups
}

/// Tells the parent of a dead process that it died, once its tracer has
/// collected it.
pub(super) fn report_to_parent(kernel: &Kernel, tg: &Arc<ThreadGroup>) {
    let parent = {
        let tree = kernel.procs.lock().unwrap();
        tree.parent_of(tg.tgid).and_then(|p| tree.group(p))
    };
    report_exit(kernel, tg, parent.as_ref());
}

/// Tells the parent of a dead process: SIGCHLD (or its exit signal) and a
/// wake-up of its waits. A parent that ignores SIGCHLD or set SA_NOCLDWAIT
/// never sees the child as a zombie: it is reaped before the parent hears
/// of it.
fn report_exit(kernel: &Kernel, tg: &Arc<ThreadGroup>, parent: Option<&Arc<ThreadGroup>>) {
    let (status, exit_signal) = {
        let st = tg.state.lock().unwrap();
        (st.exit.expect("dead processes have a status"), st.exit_signal)
    };
    let autoreap = exit_signal == g::SIGCHLD
        && parent.is_some_and(|p| {
            let h = p.handlers();
            let a = h.lock().unwrap().get(g::SIGCHLD);
            a.handler == crate::signal::SIG_IGN || a.flags & flags::SA_NOCLDWAIT != 0
        });
    {
        // Under the tree lock, so a wait sees either a zombie or nothing.
        let mut tree = kernel.procs.lock().unwrap();
        if autoreap {
            tree.remove_process(tg.tgid);
        }
        tg.state.lock().unwrap().zombie = true;
    }
    // Process descriptors become readable now.
    tg.thread_events.notify_all();
    let (code, st) = status.child_code();
    if let Some(p) = parent {
        notify(kernel, p, tg, code, st);
    }
}
