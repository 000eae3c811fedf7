//! inotify_init(1), inotify_add_watch, inotify_rm_watch.

use std::sync::Arc;

use linux_raw_sys::general as g;

use super::{SysResult, file, read_path, start_dir};
use crate::errno::Errno;
use crate::fs::inotify::{self, Inotify};
use crate::fs::{Lookup, MAY_READ, OpenFile, OpenFlags};
use crate::task::Task;

/// Every bit inotify_add_watch accepts (Linux's ALL_INOTIFY_BITS).
const ALL_INOTIFY_BITS: u32 = inotify::IN_ALL_EVENTS
    | g::IN_UNMOUNT
    | inotify::IN_Q_OVERFLOW
    | inotify::IN_IGNORED
    | inotify::IN_ONLYDIR
    | inotify::IN_DONT_FOLLOW
    | inotify::IN_EXCL_UNLINK
    | inotify::IN_MASK_ADD
    | inotify::IN_MASK_CREATE
    | inotify::IN_ISDIR
    | inotify::IN_ONESHOT;

pub fn inotify_init1(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let flags = a[0] as u32;
    if flags & !(g::IN_CLOEXEC | g::IN_NONBLOCK) != 0 {
        return Err(Errno::EINVAL.into());
    }
    let mut open = OpenFlags::empty();
    if flags & g::IN_NONBLOCK != 0 {
        open |= OpenFlags::NONBLOCK;
    }
    let f = OpenFile::new(Arc::new(Inotify::default()), None, open);
    Ok(task.files.install(f, flags & g::IN_CLOEXEC != 0, 0)? as u64)
}

pub fn inotify_init(task: &mut Task, _a: &[u64; 6]) -> SysResult {
    inotify_init1(task, &[0; 6])
}

/// The inotify instance behind `fd`: EBADF if not open, EINVAL if not an
/// inotify descriptor.
fn instance(task: &Task, fd: u64) -> Result<Arc<OpenFile>, Errno> {
    let f = file(task, fd).map_err(|_| Errno::EBADF)?;
    if f.ops.downcast_ref::<Inotify>().is_none() {
        return Err(Errno::EINVAL);
    }
    Ok(f)
}

pub fn inotify_add_watch(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let mask = a[2] as u32;
    if mask & !ALL_INOTIFY_BITS != 0
        || (mask & inotify::IN_MASK_ADD != 0 && mask & inotify::IN_MASK_CREATE != 0)
        || mask & ALL_INOTIFY_BITS == 0
    {
        return Err(Errno::EINVAL.into());
    }
    let f = instance(task, a[0])?;
    let path = read_path(task, a[1])?;
    let start = start_dir(task, g::AT_FDCWD as u64, &path)?;
    let how = Lookup { follow: mask & inotify::IN_DONT_FOLLOW == 0, directory: mask & inotify::IN_ONLYDIR != 0 };
    let d = task.with_resolver(|r| r.resolve(start.as_ref(), &path, how))?;
    crate::fs::permission(&d, &task.tg.creds(), MAY_READ)?;
    let ino = f.ops.downcast_ref::<Inotify>().expect("checked");
    Ok(ino.add_watch(d.key(), mask)? as u64)
}

pub fn inotify_rm_watch(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let f = instance(task, a[0])?;
    f.ops.downcast_ref::<Inotify>().expect("checked").rm_watch(a[1] as i32)?;
    Ok(0)
}
