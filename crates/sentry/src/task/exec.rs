//! execve: replacing a process's program.

use std::sync::{Arc, Mutex};

use platform::{FpState, Registers};

use super::{ExitStatus, ProcessView, Task};
use crate::loader::{self, LoadError, Program};
use crate::mm::MemoryManager;

impl Task {
    /// Ends every other thread of the process and waits until they are
    /// gone; the caller then takes the process's id if it did not have it.
    fn become_sole_thread(&mut self) {
        let alone = {
            let threads = self.tg.threads.lock().unwrap();
            // Killed under the list's lock, which a clone holds while it
            // adds a thread: a thread one of them clones meanwhile is in
            // the list already, or is refused.
            for t in threads.iter().filter(|t| !Arc::ptr_eq(t, &self.shared)) {
                t.kill();
            }
            threads.len() == 1
        };
        if alone {
            return;
        }
        let _r = self.tg.thread_events.register(&self.shared.waiter);
        while self.tg.threads.lock().unwrap().len() > 1 {
            self.shared.waiter.sleep(None);
        }
        // A traced leader that exited before is released without a report,
        // as Linux's de_thread releases it.
        let delayed = self.tg.state.lock().unwrap().delayed_leader.take();
        if let Some(l) = delayed {
            super::ptrace::untrace(&l.0);
        }
        let old = self.tid();
        let leader = self.tg.tgid;
        if old != leader {
            self.shared.set_tid(leader);
            self.kernel.procs.lock().unwrap().rename_thread(old, leader);
        }
    }
}

/// What execve was asked to run.
pub struct ExecRequest {
    pub file: loader::ExecFile,
    /// The name the program goes by (Linux's bprm->filename): the path as
    /// given, or /dev/fd/N[/path] when execveat names it by a descriptor.
    /// A script's interpreter gets it; AT_EXECFN shows it.
    pub filename: Vec<u8>,
    /// The new comm is the name of the file run (execveat with
    /// AT_EMPTY_PATH) rather than the last component of `filename`.
    pub comm_from_file: bool,
    /// `filename` names a descriptor closed on exec: the new program could
    /// not open it, so a script is refused.
    pub filename_inaccessible: bool,
}

impl ExecRequest {
    /// A program named by a path.
    pub fn path(path: &[u8]) -> ExecRequest {
        ExecRequest {
            file: loader::ExecFile::Path { start: None, path: path.to_vec(), follow: true },
            filename: path.to_vec(),
            comm_from_file: false,
            filename_inaccessible: false,
        }
    }
}

/// Loads the program into a new address space and makes it the task's
/// program. On error the task is unchanged, unless the error came past
/// the point of no return (an image that cannot be mapped as its headers
/// say): then, as on Linux, the process is killed by SIGSEGV.
pub fn exec(task: &mut Task, req: &ExecRequest, argv: Vec<Vec<u8>>, envp: Vec<Vec<u8>>) -> Result<(), LoadError> {
    let kernel = task.kernel.clone();
    let fsc = task.fs_context();
    let creds = task.tg.creds();
    let resolver = crate::fs::Resolver {
        root: &fsc.root,
        cwd: &fsc.cwd,
        mounts: &kernel.mounts,
        creds: &creds,
        restrict: crate::fs::path::Restrict::empty(),
    };
    let program = loader::resolve_interpreters(&resolver, &req.file, &req.filename, req.filename_inaccessible, argv)?;
    loader::check_arguments(&program.argv, &envp, &req.filename)?;
    let no_new_privs = task.shared.no_new_privs.load(std::sync::atomic::Ordering::Relaxed);
    let mut new_creds = (*creds).clone();
    let secure =
        new_creds.exec(&file_privileges(&program.exe.dentry), no_new_privs).map_err(|_| LoadError::NotPermitted)?;
    let space = kernel.platform.new_address_space().map_err(|_| LoadError::NoMemory)?;
    let stack_limit = task.tg.rlimit(linux_raw_sys::general::RLIMIT_STACK).cur;
    let mm = Arc::new(MemoryManager::new(kernel.mf.clone(), space, stack_limit));
    let args = loader::ProgramArgs { argv: &program.argv, envp: &envp, execfn: &req.filename };
    let facts = loader::AuxFacts {
        uid: new_creds.uid.real,
        euid: new_creds.uid.effective,
        gid: new_creds.gid.real,
        egid: new_creds.gid.effective,
        secure,
        ..kernel.facts.clone()
    };
    let loaded = loader::load(&mm, &program, &args, &facts);

    // Past the point of no return.
    let old_tid = task.tid();
    task.become_sole_thread();
    task.mm = mm;
    if let Some(v) = task.vfork_done.take() {
        v.release();
    }
    let Ok(loaded) = loaded else {
        super::group_exit(&task.tg, ExitStatus::Signaled { signal: linux_raw_sys::general::SIGSEGV, core: false });
        return Ok(());
    };
    let Program { exe, argv, .. } = program;
    task.mm.hold_exe(exe.denial.clone());
    task.regs = Registers::for_entry(loaded.entry, loaded.stack_pointer);
    task.ctx.set_fp_state(&FpState::default()).map_err(|_| LoadError::NoMemory)?;
    task.files.close_on_exec();
    {
        // Dispositions shared with another process are copied first.
        let mut h = task.tg.handlers.lock().unwrap();
        if Arc::strong_count(&h) > 1 {
            let copy = h.lock().unwrap().clone();
            *h = Arc::new(Mutex::new(copy));
        }
        h.lock().unwrap().reset_for_exec();
    }
    // POSIX timers end with the program (their queued signals with them);
    // the ITIMER_REAL timer stays.
    kernel.timers.cancel_posix(task.tg.tgid);
    task.altstack = (0, 0, linux_raw_sys::general::SS_DISABLE);
    task.robust_list = (0, 0);
    task.clear_child_tid = 0;
    // The new memory has no membarrier registrations.
    task.tg.membarrier_registrations.store(0, std::sync::atomic::Ordering::Relaxed);
    task.tg.pkey_slot_spent.store(false, std::sync::atomic::Ordering::Relaxed);
    *task.tg.creds.lock().unwrap() = Arc::new(new_creds);
    {
        let mut st = task.tg.state.lock().unwrap();
        st.did_exec = true;
        // As Linux's begin_new_exec: a program run with effective ids other
        // than the real ones may not be dumped.
        let c = task.tg.creds();
        st.undumpable = c.uid.effective != c.uid.real || c.gid.effective != c.gid.real;
    }
    {
        // As Linux names the task: after the file run by descriptor, else
        // after the last component of the name it was run by (a script's,
        // a symlink's), cut to 15 bytes.
        let name = if req.comm_from_file {
            exe.dentry.name()
        } else {
            req.filename.rsplit(|b| *b == b'/').next().unwrap_or(&req.filename).to_vec()
        };
        let comm: Vec<u8> = name.iter().take(15).copied().collect();
        *task.shared.comm.lock().unwrap() = comm.clone();
        let mut info = task.tg.info.lock().unwrap();
        info.exe = Some(exe.dentry.clone());
        info.comm = comm;
        info.argv = argv;
        info.envp = envp;
        info.auxv = loaded.auxv;
    }
    *task.tg.view.lock().unwrap() =
        Some(ProcessView { mm: task.mm.clone(), fs: task.fs.clone(), files: task.files.clone() });
    task.ptrace_exec(old_tid);
    Ok(())
}

/// What the program file changes the credentials with at execve: its
/// set-user-id and set-group-id owners, unless its mount is nosuid (Linux's
/// bprm_fill_uid(): set-group-id only with group execute), and its
/// `security.capability`, where its file system carries one.
fn file_privileges(d: &crate::fs::Dentry) -> crate::auth::FilePrivileges {
    use linux_raw_sys::general::{S_ISGID, S_ISUID, S_IXGRP};
    if d.mount.flags().contains(crate::fs::dentry::MountFlags::NOSUID) {
        return crate::auth::FilePrivileges::default();
    }
    let Ok(st) = d.inode.stat() else { return crate::auth::FilePrivileges::default() };
    crate::auth::FilePrivileges {
        setuid: (st.mode & S_ISUID != 0).then_some(st.uid),
        setgid: (st.mode & (S_ISGID | S_IXGRP) == S_ISGID | S_IXGRP).then_some(st.gid),
        caps: d.inode.getxattr(crate::auth::FILE_CAPS_XATTR).ok().and_then(|v| crate::auth::FileCaps::parse(&v)),
    }
}
