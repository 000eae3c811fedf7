//! wait4 and waitid: a process collecting the state changes of its children.

use linux_raw_sys::general as g;

use super::{Task, ThreadGroup};
use crate::errno::Errno;
use crate::waiter::{BlockError, block_on};

/// Which children a wait is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitFor {
    Pid(i32),
    Pgid(i32),
    Any,
}

/// What a wait reports and how it waits.
#[derive(Clone, Copy, Debug, Default)]
pub struct WaitOptions {
    pub exited: bool,
    pub stopped: bool,
    pub continued: bool,
    pub nohang: bool,
    /// Report without reaping.
    pub nowait: bool,
    /// __WALL / __WCLONE: which children by their exit signal.
    pub all: bool,
    pub clone_only: bool,
}

/// A reported change.
#[derive(Clone, Copy, Debug)]
pub struct WaitOutcome {
    pub pid: i32,
    /// The wait(2) status word.
    pub status: i32,
    /// CLD_* and si_status, as waitid reports them.
    pub code: i32,
    pub si_status: i32,
    /// CPU time of the child (reaped exits only).
    pub cpu: super::CpuTimes,
    /// The child's real user id.
    pub uid: u32,
}

fn eligible(child: &ThreadGroup, opts: &WaitOptions) -> bool {
    if opts.all {
        return true;
    }
    let clone_child = child.state.lock().unwrap().exit_signal != g::SIGCHLD;
    clone_child == opts.clone_only
}

/// Checks one child for something to report; reaps it if asked.
fn check(task: &Task, child: &ThreadGroup, opts: &WaitOptions) -> Option<WaitOutcome> {
    // Asked before the state is locked: a change of credentials takes
    // the locks the other way round.
    let uid = child.creds().uid.real;
    // A child its parent traces reports its stops as ptrace stops.
    let traced = (opts.stopped || opts.continued) && super::ptrace::traced_by(child, &task.tg);
    let mut st = child.state.lock().unwrap();
    if st.zombie {
        // A dead child reports its exit and nothing else.
        if !opts.exited {
            return None;
        }
        let status = st.exit.expect("zombies have a status");
        let (code, si_status) = status.child_code();
        let cpu = st.dead_threads_cpu + st.children_cpu;
        let out = WaitOutcome { pid: child.tgid, status: status.wait_status(), code, si_status, cpu, uid };
        drop(st);
        if !opts.nowait {
            task.kernel.procs.lock().unwrap().remove_process(child.tgid);
            task.tg.state.lock().unwrap().children_cpu += cpu;
        }
        return Some(out);
    }
    if traced {
        return None;
    }
    if opts.stopped
        && st.stop_unreported
        && let Some(sig) = st.stopped
    {
        if !opts.nowait {
            st.stop_unreported = false;
        }
        let status = ((sig as i32) << 8) | 0x7f;
        return Some(WaitOutcome {
            pid: child.tgid,
            status,
            code: g::CLD_STOPPED as i32,
            si_status: sig as i32,
            cpu: Default::default(),
            uid,
        });
    }
    if opts.continued && st.continue_unreported {
        if !opts.nowait {
            st.continue_unreported = false;
        }
        return Some(WaitOutcome {
            pid: child.tgid,
            status: 0xffff,
            code: g::CLD_CONTINUED as i32,
            si_status: g::SIGCONT as i32,
            cpu: Default::default(),
            uid,
        });
    }
    None
}

/// Waits for a child of the calling process. `Ok(None)` is WNOHANG with
/// nothing to report.
pub fn wait_child(task: &Task, which: WaitFor, opts: WaitOptions) -> Result<Option<WaitOutcome>, Errno> {
    let me = task.tg.tgid;
    let poll = || -> Result<Option<WaitOutcome>, Errno> {
        // Tracees first: the tracer waits for them whoever their parent is.
        let matches = |t: &super::TaskShared| match which {
            WaitFor::Pid(p) => t.tid() == p,
            WaitFor::Pgid(pg) => task.kernel.procs.lock().unwrap().pgid_of(t.tg.tgid) == Some(pg),
            WaitFor::Any => true,
        };
        let (tracees, report) = super::ptrace::tracee_report(task, &matches, opts.exited, opts.nowait);
        if report.is_some() {
            return Ok(report);
        }
        let candidates: Vec<std::sync::Arc<ThreadGroup>> = {
            let tree = task.kernel.procs.lock().unwrap();
            tree.children_of(me)
                .into_iter()
                .filter(|c| match which {
                    WaitFor::Pid(p) => *c == p,
                    WaitFor::Pgid(pg) => tree.pgid_of(*c) == Some(pg),
                    WaitFor::Any => true,
                })
                .filter_map(|c| tree.group(c))
                .filter(|c| eligible(c, &opts))
                // A wait for stops or continues alone has nothing to wait
                // for in a child that has exited: when every child it may
                // wait for has, it fails with ECHILD, as on Linux.
                .filter(|c| opts.exited || !c.state.lock().unwrap().zombie)
                .collect()
        };
        if candidates.is_empty() && !tracees {
            return Err(Errno::ECHILD);
        }
        Ok(candidates.iter().find_map(|c| check(task, c, &opts)))
    };
    if opts.nohang {
        return poll();
    }
    let r = block_on(&*task.shared, &[&task.tg.child_events], None, || match poll() {
        Ok(None) => None,
        other => Some(other),
    });
    match r {
        Ok(v) => v,
        Err(BlockError::Interrupted) => Err(Errno::ERESTARTSYS),
        Err(BlockError::TimedOut) => unreachable!("no deadline"),
    }
}
