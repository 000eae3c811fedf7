//! clone, fork and vfork: new threads and processes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use linux_raw_sys::general as g;

use super::pidfd::PidFd;
use super::{ProcessView, Task, TaskShared, ThreadGroup, WaitQueue, run_task};
use memory::MemoryFile;

use crate::errno::Errno;
use crate::fs::{OpenFile, OpenFlags};
use crate::mm::MemoryManager;

/// What a task costs the host outside the memory file (its host thread's
/// stack as far as the sentry uses it, its records and its CPU context),
/// in frames, charged to the memory file's capacity for the task's life as
/// Linux charges a task's kernel stack to its memory cgroup. It keeps a
/// fork bomb under `--memory` from growing the host without bound: forks
/// fail with ENOMEM once memory is used up.
const TASK_CHARGE_FRAMES: u64 = 32;

/// A task's charge, given back when dropped (when its host thread ends).
struct TaskCharge(Arc<MemoryFile>);

impl TaskCharge {
    fn take(mf: &Arc<MemoryFile>) -> Result<Self, Errno> {
        mf.charge(TASK_CHARGE_FRAMES).map_err(|_| Errno::ENOMEM)?;
        Ok(TaskCharge(mf.clone()))
    }
}

impl Drop for TaskCharge {
    fn drop(&mut self) {
        self.0.uncharge(TASK_CHARGE_FRAMES);
    }
}

/// What a clone asks for (the clone3 argument structure, decoded).
#[derive(Clone, Copy, Debug, Default)]
pub struct CloneArgs {
    pub flags: u64,
    pub exit_signal: u32,
    pub stack: u64,
    pub parent_tid: u64,
    pub child_tid: u64,
    pub tls: u64,
    /// Where CLONE_PIDFD stores the child's process descriptor.
    pub pidfd: u64,
}

/// A vfork parent waits on this until its child execs or exits.
#[derive(Default)]
pub struct VforkDone {
    done: AtomicBool,
    queue: WaitQueue,
}

impl VforkDone {
    pub fn release(&self) {
        self.done.store(true, Ordering::Release);
        self.queue.notify_all();
    }

    /// Waits as Linux's killable wait does: signals wait until the child
    /// is done, but a fatal one (which kills the process at once, see
    /// `kill_if_fatal`) ends the wait.
    fn wait(&self, parent: &TaskShared) {
        let _r = self.queue.register(&parent.waiter);
        while !self.done.load(Ordering::Acquire) && !parent.is_killed() {
            parent.waiter.sleep(None);
        }
    }
}

const NAMESPACE_FLAGS: u64 = (g::CLONE_NEWNS
    | g::CLONE_NEWUTS
    | g::CLONE_NEWIPC
    | g::CLONE_NEWUSER
    | g::CLONE_NEWPID
    | g::CLONE_NEWNET
    | g::CLONE_NEWCGROUP) as u64
    | g::CLONE_NEWTIME as u64;

/// Flags whose meaning is carried out; others are refused.
const SUPPORTED_FLAGS: u64 = (g::CLONE_VM
    | g::CLONE_FS
    | g::CLONE_FILES
    | g::CLONE_SIGHAND
    | g::CLONE_THREAD
    | g::CLONE_SYSVSEM
    | g::CLONE_SETTLS
    | g::CLONE_PARENT_SETTID
    | g::CLONE_CHILD_CLEARTID
    | g::CLONE_CHILD_SETTID
    | g::CLONE_VFORK
    | g::CLONE_PARENT
    | g::CLONE_DETACHED
    | g::CLONE_UNTRACED
    | g::CLONE_IO
    | g::CLONE_PIDFD) as u64
    | g::CLONE_CLEAR_SIGHAND;

/// The error of a clone whose thread id could not be stored: EFAULT for a
/// bad address, ENOMEM if storing it needed memory there was none of.
fn settid_error(e: crate::mm::MmError) -> Errno {
    if e.is_out_of_memory() { Errno::ENOMEM } else { Errno::EFAULT }
}

/// Creates a task as `args` says; returns its thread id (the new pid for
/// a process).
pub fn clone_task(parent: &mut Task, args: &CloneArgs) -> Result<i32, Errno> {
    let f = args.flags;
    let has = |bit: u32| f & bit as u64 != 0;
    if f & NAMESPACE_FLAGS != 0 {
        return Err(Errno::EPERM);
    }
    if f & !SUPPORTED_FLAGS != 0 {
        return Err(Errno::EINVAL);
    }
    if (has(g::CLONE_THREAD) && !has(g::CLONE_SIGHAND))
        || (has(g::CLONE_SIGHAND) && !has(g::CLONE_VM))
        || (f & g::CLONE_CLEAR_SIGHAND != 0 && has(g::CLONE_SIGHAND))
        || (has(g::CLONE_THREAD) && args.exit_signal != 0)
        || (has(g::CLONE_PIDFD) && (has(g::CLONE_THREAD) || has(g::CLONE_DETACHED)))
        || args.exit_signal > 64
    {
        return Err(Errno::EINVAL);
    }
    if parent.tg.tgid == super::exit::INIT_PID && has(g::CLONE_PARENT) {
        return Err(Errno::EINVAL);
    }
    let kernel = parent.kernel.clone();
    let charge = TaskCharge::take(&kernel.mf)?;
    let mut ctx = kernel.platform.new_context().map_err(|_| Errno::EAGAIN)?;
    let mm = if has(g::CLONE_VM) {
        parent.mm.clone()
    } else {
        let space = kernel.platform.new_address_space().map_err(|_| Errno::ENOMEM)?;
        Arc::new(parent.mm.fork(space).map_err(|_| Errno::ENOMEM)?)
    };
    // A thread the host refuses is EAGAIN, as at Linux's own limits.
    ctx.attach(&**mm.space()).map_err(|_| Errno::EAGAIN)?;
    let fs = if has(g::CLONE_FS) { parent.fs.clone() } else { Arc::new(Mutex::new(parent.fs_context())) };
    let files = if has(g::CLONE_FILES) { parent.files.clone() } else { Arc::new(parent.files.fork()) };
    let tid = kernel.allocate_tid();
    let thread = kernel.new_task_thread(tid).map_err(|_| Errno::EAGAIN)?;
    let tg = if has(g::CLONE_THREAD) {
        parent.tg.clone()
    } else {
        let handlers = if has(g::CLONE_SIGHAND) {
            parent.tg.handlers()
        } else {
            let mut h = parent.tg.handlers().lock().unwrap().clone();
            if f & g::CLONE_CLEAR_SIGHAND != 0 {
                h.reset_for_exec();
            }
            Arc::new(Mutex::new(h))
        };
        // A child given the caller's parent tells that parent of its end
        // with the caller's own exit signal, as Linux does: the caller
        // cannot choose the signal another process gets.
        let exit_signal =
            if has(g::CLONE_PARENT) { parent.tg.state.lock().unwrap().exit_signal } else { args.exit_signal };
        let tg = ThreadGroup::new(tid, handlers, exit_signal, parent.tg.signal_account.clone(), parent.tg.creds());
        tg.pkey_slot_spent.store(parent.tg.pkey_slot_spent.load(Ordering::Relaxed), Ordering::Relaxed);
        tg.session_keyring.store(parent.tg.session_keyring.load(Ordering::Relaxed), Ordering::Relaxed);
        tg.personality.store(parent.tg.personality.load(Ordering::Relaxed), Ordering::Relaxed);
        tg.container.store(parent.tg.container.load(Ordering::Relaxed), Ordering::Relaxed);
        tg.state.lock().unwrap().parent_thread = if has(g::CLONE_PARENT) { 0 } else { parent.tid() };
        let mut info = parent.tg.info.lock().unwrap().clone();
        info.comm = parent.shared.comm.lock().unwrap().clone();
        info.started = std::time::Instant::now();
        *tg.info.lock().unwrap() = info;
        *tg.rlimits.lock().unwrap() = parent.tg.rlimits.lock().unwrap().clone();
        // A CPU limit is inherited with the rest, and enforced for the child
        // on its own CPU time.
        if tg.rlimit(g::RLIMIT_CPU).cur != super::RLIM_INFINITY {
            parent.kernel.timers.watch_cpu_limit(tid);
        }
        *tg.view.lock().unwrap() = Some(ProcessView { mm: mm.clone(), fs: fs.clone(), files: files.clone() });
        tg
    };
    let mask = parent.signal_mask();
    let shared = TaskShared::new(tid, tg.clone(), mask);
    *shared.comm.lock().unwrap() = parent.shared.comm.lock().unwrap().clone();
    shared.no_new_privs.store(parent.shared.no_new_privs.load(Ordering::Relaxed), Ordering::Relaxed);
    *shared.affinity.lock().unwrap() = parent.shared.affinity.lock().unwrap().clone();
    *shared.sched.lock().unwrap() = parent.shared.sched.lock().unwrap().for_child();
    *shared.mempolicy.lock().unwrap() = *parent.shared.mempolicy.lock().unwrap();

    let mut regs = parent.regs;
    regs.rax = 0;
    if args.stack != 0 {
        regs.rsp = args.stack;
    }
    if has(g::CLONE_SETTLS) {
        regs.fs_base = args.tls;
    }
    let mut ctx = ctx;
    let fp = parent.ctx.fp_state().map_err(|_| Errno::EAGAIN)?;
    ctx.set_fp_state(&fp).map_err(|_| Errno::EAGAIN)?;

    if has(g::CLONE_PARENT_SETTID) {
        parent.mm.write(args.parent_tid, &(tid as u32)).map_err(settid_error)?;
    }
    if has(g::CLONE_CHILD_SETTID) {
        mm.write(args.child_tid, &(tid as u32)).map_err(settid_error)?;
    }
    let mut pidfd = None;
    if has(g::CLONE_PIDFD) {
        // Installed before the child runs, so the parent has it whatever
        // the child does (a vfork child may exec, exit and be reaped before
        // the parent resumes); not in a table the child copied already.
        let file = OpenFile::new(Arc::new(PidFd { process: tg.clone() }), None, OpenFlags::RDWR);
        let fd = parent.files.install(file, true, 0).map_err(Errno::from)?;
        if parent.mm.write(args.pidfd, &fd).is_err() {
            let _ = parent.files.remove(fd);
            return Err(Errno::EFAULT);
        }
        pidfd = Some(fd);
    }
    let vfork = has(g::CLONE_VFORK).then(|| Arc::new(VforkDone::default()));
    // A thread sharing the address space starts without the alternate
    // stack, which belongs to the thread that set it up.
    let altstack = if has(g::CLONE_VM) && !has(g::CLONE_VFORK) { (0, 0, g::SS_DISABLE) } else { parent.altstack };
    let child = Task {
        kernel: kernel.clone(),
        shared: shared.clone(),
        tg: tg.clone(),
        mm,
        fs,
        files,
        regs,
        ctx,
        altstack,
        clear_child_tid: if has(g::CLONE_CHILD_CLEARTID) { args.child_tid } else { 0 },
        robust_list: (0, 0),
        restart: None,
        restart_block: None,
        vfork_done: vfork.clone(),
        exit_code: None,
        last_trap: (0, 0, 0),
        orig_rax: 0,
        stepping: false,
    };

    {
        let mut tree = kernel.procs.lock().unwrap();
        let mut siblings = parent.tg.threads.lock().unwrap();
        // No task may escape what is killing every task it could join, as
        // in Linux's copy_process: an ending sandbox takes no new task (fork
        // fails with ENOMEM, as in a PID namespace whose init has died), and
        // a killed thread (its process exits, another thread execs) creates
        // none; it exits instead of restarting the call. Those kills are
        // made under the tree lock or the caller's thread list, both held
        // here from the check to the addition.
        let refused = if tree.is_closed() {
            Some(Errno::ENOMEM)
        } else if parent.shared.is_killed() {
            Some(Errno::ERESTARTNOINTR)
        } else if tree.at_pids_limit() {
            // As the pids cgroup refuses a fork past pids.max.
            Some(Errno::EAGAIN)
        } else {
            None
        };
        if let Some(e) = refused {
            drop(siblings);
            drop(tree);
            if let Some(fd) = pidfd {
                let _ = parent.files.remove(fd);
            }
            return Err(e);
        }
        if has(g::CLONE_THREAD) {
            siblings.push(shared.clone());
        } else {
            drop(siblings);
            let me = parent.tg.tgid;
            let parent_pid = if has(g::CLONE_PARENT) { tree.parent_of(me) } else { Some(me) };
            let pgid = tree.pgid_of(me).unwrap_or(me);
            let sid = tree.sid_of(me).unwrap_or(me);
            tree.add_process(&tg, parent_pid, pgid, sid);
            tg.threads.lock().unwrap().push(shared.clone());
        }
        tree.add_thread(&shared);
    }
    let traced = parent.ptrace_clone_event(f, args.exit_signal);
    if traced.is_some() {
        parent.ptrace_inherit(&shared);
    }
    thread.start(move || {
        let _charge = charge;
        run_task(child);
    });
    if let Some((option, event)) = traced {
        parent.ptrace_event(option, event, tid as u64);
    }
    if let Some(v) = vfork {
        v.wait(&parent.shared);
        parent.ptrace_event(super::ptrace::options::TRACEVFORKDONE, super::ptrace::event::VFORK_DONE, tid as u64);
    }
    Ok(tid)
}

impl MemoryManager {
    /// True if `self` and `other` are the same address space.
    pub fn same(a: &Arc<MemoryManager>, b: &Arc<MemoryManager>) -> bool {
        Arc::ptr_eq(a, b)
    }
}
