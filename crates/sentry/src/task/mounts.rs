//! What processes hold of the mount namespace: the answers umount and
//! pivot_root need from the process side.

use std::sync::Arc;

use crate::fs::Dentry;
use crate::kernel::Kernel;

/// True if a process uses one of the mounts `ids`: a descriptor, a
/// working directory, a root or a running program in it (what makes
/// Linux's umount answer EBUSY).
pub fn mounts_in_use(kernel: &Kernel, ids: &[u64]) -> bool {
    let in_it = |d: &Arc<Dentry>| ids.contains(&d.mount.id);
    let groups = kernel.procs.lock().unwrap().processes();
    groups.iter().any(|tg| {
        if tg.info.lock().unwrap().exe.as_ref().is_some_and(in_it) {
            return true;
        }
        let Some(view) = tg.view.lock().unwrap().clone() else { return false };
        {
            let fs = view.fs.lock().unwrap();
            if in_it(&fs.root) || in_it(&fs.cwd) {
                return true;
            }
        }
        view.files.list().iter().any(|(_, e)| e.file.dentry.as_ref().is_some_and(in_it))
    })
}

/// pivot_root's change of every process's root and working directory
/// that was `old` to `new` (Linux's chroot_fs_refs).
pub fn replace_root(kernel: &Kernel, old: &Arc<Dentry>, new: &Arc<Dentry>) {
    let groups = kernel.procs.lock().unwrap().processes();
    for tg in groups {
        let Some(view) = tg.view.lock().unwrap().clone() else { continue };
        let mut fs = view.fs.lock().unwrap();
        if Dentry::same(&fs.root, old) {
            fs.root = new.clone();
        }
        if Dentry::same(&fs.cwd, old) {
            fs.cwd = new.clone();
        }
    }
}
