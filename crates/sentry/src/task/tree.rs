//! The process tree: which processes and threads exist, who is whose parent,
//! process groups and sessions. One lock guards it all, as Linux's
//! tasklist_lock does.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use super::{TaskShared, ThreadGroup};

#[derive(Default)]
pub struct ProcessTree {
    groups: BTreeMap<i32, Arc<ThreadGroup>>,
    threads: HashMap<i32, Arc<TaskShared>>,
    parent: HashMap<i32, i32>,
    children: HashMap<i32, BTreeSet<i32>>,
    pgid: HashMap<i32, i32>,
    sid: HashMap<i32, i32>,
    /// The sandbox is ending: no task may be added.
    closed: bool,
    /// Most tasks alive at once (`--pids-limit`), None for no limit.
    pids_limit: Option<usize>,
}

impl ProcessTree {
    /// Adds a process with its parent (None for the first), group and session.
    pub fn add_process(&mut self, tg: &Arc<ThreadGroup>, parent: Option<i32>, pgid: i32, sid: i32) {
        let pid = tg.tgid;
        self.groups.insert(pid, tg.clone());
        if let Some(p) = parent {
            self.parent.insert(pid, p);
            self.children.entry(p).or_default().insert(pid);
        }
        self.pgid.insert(pid, pgid);
        self.sid.insert(pid, sid);
    }

    /// Forbids new tasks for good: the sandbox is ending.
    pub fn close(&mut self) {
        self.closed = true;
    }

    /// True once the sandbox is ending and takes no new task.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Limits the tasks alive at once, as a pids cgroup's `pids.max` does.
    pub fn set_pids_limit(&mut self, limit: Option<usize>) {
        self.pids_limit = limit;
    }

    /// The pids limit, if there is one.
    pub fn pids_limit(&self) -> Option<usize> {
        self.pids_limit
    }

    /// True if one more task would exceed the pids limit: the clone that
    /// asks for it fails with EAGAIN.
    pub fn at_pids_limit(&self) -> bool {
        self.pids_limit.is_some_and(|max| self.task_count() >= max)
    }

    /// Tasks a pids cgroup would count: every live thread, and the leader
    /// of each process whose leader thread is gone but which is not yet
    /// reaped (a zombie, or a process whose leader exited before its other
    /// threads), since Linux releases a leader only when it is reaped.
    /// Linear in the processes; computed only when a limit is set.
    pub fn task_count(&self) -> usize {
        self.threads.len() + self.groups.keys().filter(|pid| !self.threads.contains_key(pid)).count()
    }

    pub fn add_thread(&mut self, t: &Arc<TaskShared>) {
        self.threads.insert(t.tid(), t.clone());
    }

    pub fn remove_thread(&mut self, tid: i32) {
        self.threads.remove(&tid);
    }

    /// A thread's id changed (execve by a non-leader takes the leader's id).
    pub fn rename_thread(&mut self, old: i32, new: i32) {
        if let Some(t) = self.threads.remove(&old) {
            self.threads.insert(new, t);
        }
    }

    pub fn group(&self, pid: i32) -> Option<Arc<ThreadGroup>> {
        self.groups.get(&pid).cloned()
    }

    pub fn thread(&self, tid: i32) -> Option<Arc<TaskShared>> {
        self.threads.get(&tid).cloned()
    }

    pub fn parent_of(&self, pid: i32) -> Option<i32> {
        self.parent.get(&pid).copied()
    }

    pub fn children_of(&self, pid: i32) -> Vec<i32> {
        self.children.get(&pid).map(|c| c.iter().copied().collect()).unwrap_or_default()
    }

    pub fn pgid_of(&self, pid: i32) -> Option<i32> {
        self.pgid.get(&pid).copied()
    }

    pub fn sid_of(&self, pid: i32) -> Option<i32> {
        self.sid.get(&pid).copied()
    }

    pub fn set_pgid(&mut self, pid: i32, pgid: i32) {
        self.pgid.insert(pid, pgid);
    }

    pub fn set_sid(&mut self, pid: i32, sid: i32) {
        self.sid.insert(pid, sid);
    }

    /// True if `id` names anything: a thread, a process (a zombie too), a
    /// process group or a session (Linux's find_vpid finds it).
    pub fn id_in_use(&self, id: i32) -> bool {
        self.threads.contains_key(&id)
            || self.groups.contains_key(&id)
            || self.pgid.values().any(|g| *g == id)
            || self.sid.values().any(|s| *s == id)
    }

    /// True if some process belongs to process group `pgid`.
    pub fn group_exists(&self, pgid: i32) -> bool {
        self.pgid.values().any(|g| *g == pgid)
    }

    /// Moves every child of `from` to `to`; returns the moved ones.
    pub fn reparent_children(&mut self, from: i32, to: i32) -> Vec<i32> {
        let kids: Vec<i32> = self.children.remove(&from).map(|c| c.into_iter().collect()).unwrap_or_default();
        for k in &kids {
            self.parent.insert(*k, to);
            self.children.entry(to).or_default().insert(*k);
        }
        kids
    }

    /// Where the orphans of `pid` go: its nearest ancestor that is a
    /// live child subreaper, else the first process.
    pub fn new_reaper(&self, pid: i32, init: i32) -> i32 {
        let mut p = self.parent_of(pid);
        while let Some(a) = p {
            if a == init {
                break;
            }
            if let Some(g) = self.groups.get(&a) {
                let st = g.state.lock().unwrap();
                if st.child_subreaper && !st.zombie && st.exit.is_none() {
                    return a;
                }
            }
            p = self.parent_of(a);
        }
        init
    }

    /// Forgets a reaped process.
    pub fn remove_process(&mut self, pid: i32) {
        self.groups.remove(&pid);
        if let Some(p) = self.parent.remove(&pid)
            && let Some(c) = self.children.get_mut(&p)
        {
            c.remove(&pid);
        }
        self.pgid.remove(&pid);
        self.sid.remove(&pid);
    }

    /// Processes of a process group.
    pub fn members_of(&self, pgid: i32) -> Vec<Arc<ThreadGroup>> {
        self.pgid.iter().filter(|(_, g)| **g == pgid).filter_map(|(p, _)| self.groups.get(p).cloned()).collect()
    }

    /// True if process group `pgid` is (or, without `ignoring`, would be)
    /// orphaned: no live member has a parent in another group of the same
    /// session, so nothing outside the group can resume it. Job-control
    /// stops are discarded for such a group, and one that becomes orphaned
    /// with stopped members gets SIGHUP and SIGCONT.
    ///
    /// The first process's parent is outside the sandbox; it counts as the
    /// job-control shell that started cordon (same session, another group),
    /// so the first process's own group is never orphaned while it lives
    /// and a SIGTSTP forwarded to it stops it.
    pub fn pgrp_orphaned(&self, pgid: i32, ignoring: Option<i32>) -> bool {
        for (&pid, _) in self.pgid.iter().filter(|(_, g)| **g == pgid) {
            if Some(pid) == ignoring {
                continue;
            }
            if self.groups.get(&pid).is_some_and(|g| g.state.lock().unwrap().zombie) {
                continue;
            }
            let Some(parent) = self.parent_of(pid) else { return false };
            if self.pgid_of(parent) != Some(pgid) && self.sid_of(parent) == self.sid_of(pid) {
                return false;
            }
        }
        true
    }

    /// True if some member of process group `pgid` is stopped.
    pub fn pgrp_has_stopped(&self, pgid: i32) -> bool {
        self.members_of(pgid).iter().any(|g| g.state.lock().unwrap().stop_pending())
    }

    /// Every process, zombies included, in pid order.
    pub fn processes(&self) -> Vec<Arc<ThreadGroup>> {
        self.groups.values().cloned().collect()
    }

    pub fn pids(&self) -> Vec<i32> {
        self.groups.keys().copied().collect()
    }

    /// Live threads.
    pub fn thread_count(&self) -> usize {
        self.threads.len()
    }

    pub fn threads(&self) -> Vec<Arc<TaskShared>> {
        self.threads.values().cloned().collect()
    }
}
