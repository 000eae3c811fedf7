//! execve: replacing a process's program.

use std::sync::Arc;

use platform::{FpState, Registers};

use super::{ProcessView, Task};
use crate::loader::{self, LoadError};
use crate::mm::MemoryManager;

/// Loads `path` into a new address space and makes it the task's program.
/// On error the task is unchanged.
pub fn exec(task: &mut Task, path: &[u8], argv: Vec<Vec<u8>>, envp: Vec<Vec<u8>>) -> Result<(), LoadError> {
    let kernel = task.kernel.clone();
    let fsc = task.fs_context();
    let resolver = crate::fs::Resolver { root: &fsc.root, cwd: &fsc.cwd, mounts: &kernel.mounts };
    let (exe, argv, info) = loader::resolve_interpreters(&resolver, path, argv)?;
    let space = kernel.platform.new_address_space().map_err(|_| LoadError::NoMemory)?;
    let stack_limit = task.tg.rlimit(linux_raw_sys::general::RLIMIT_STACK).cur;
    let mm = Arc::new(MemoryManager::new(kernel.mf.clone(), space, stack_limit));
    let args = loader::ProgramArgs { argv: &argv, envp: &envp, execfn: path };
    let loaded = loader::load(&resolver, &mm, &exe, &info, &args, &kernel.facts)?;

    // Past the point of no return.
    task.mm = mm;
    task.regs = Registers::for_entry(loaded.entry, loaded.stack_pointer);
    task.ctx.set_fp_state(&FpState::default()).map_err(|_| LoadError::NoMemory)?;
    task.files.close_on_exec();
    task.tg.handlers.lock().unwrap().reset_for_exec();
    task.altstack = (0, 0, linux_raw_sys::general::SS_DISABLE);
    task.robust_list = (0, 0);
    {
        let mut info = task.tg.info.lock().unwrap();
        info.exe = Some(exe.dentry.clone());
        info.comm = exe.dentry.name().iter().take(15).copied().collect();
        info.argv = argv;
        info.envp = envp;
        info.auxv = loaded.auxv;
    }
    *task.tg.view.lock().unwrap() =
        Some(ProcessView { mm: task.mm.clone(), fs: task.fs.clone(), files: task.files.clone() });
    Ok(())
}
