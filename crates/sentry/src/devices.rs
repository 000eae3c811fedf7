//! The character devices the sentry serves, found by number when a device
//! node that is only a name and a number (one mknod made in a tmpfs, or one
//! the container's configuration lists) is opened, as Linux's chrdev_open
//! finds a driver in its table of character devices. A number nothing
//! serves gives ENXIO, as a device with no driver does.

use std::sync::Arc;

use crate::fs::{Context, FileOps, FsError, OpenFlags, dev_major, dev_minor};
use crate::kernel::Kernel;

/// Major of the memory devices (null, zero, full, random, urandom).
const MEM_MAJOR: u32 = 1;
/// Major of /dev/tty (minor 0) and /dev/ptmx (minor 2).
const TTYAUX_MAJOR: u32 = 5;

/// True if the sandbox serves the character device `rdev`: opening a node
/// of that number reaches a device rather than failing with ENXIO.
pub fn served(rdev: u64) -> bool {
    matches!((dev_major(rdev), dev_minor(rdev)), (MEM_MAJOR, 3 | 5 | 7 | 8 | 9) | (TTYAUX_MAJOR, 0 | 2))
}

/// Opens character device `rdev` for the caller of `ctx`.
pub fn open(kernel: &Kernel, ctx: &Context, rdev: u64, flags: OpenFlags) -> Result<Arc<dyn FileOps>, FsError> {
    match (dev_major(rdev), dev_minor(rdev)) {
        (MEM_MAJOR, _) => crate::fs::dev::open_device(rdev, flags),
        (TTYAUX_MAJOR, 0) => kernel.devpts.get().ok_or(FsError::NoDevice)?.open_controlling(ctx, flags),
        (TTYAUX_MAJOR, 2) => {
            let devpts = kernel.devpts.get().ok_or(FsError::NoDevice)?;
            Ok(devpts.open_master(ctx.creds.uid.fs)? as Arc<dyn FileOps>)
        }
        _ => Err(FsError::NoDevice),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::makedev;

    #[test]
    fn served_numbers_are_the_memory_devices_and_terminals() {
        for (major, minor) in [(1, 3), (1, 5), (1, 7), (1, 8), (1, 9), (5, 0), (5, 2)] {
            assert!(served(makedev(major, minor)), "{major}:{minor}");
        }
        // /dev/mem, /dev/console, a pty slave by number, a disk.
        for (major, minor) in [(1, 1), (5, 1), (136, 0), (8, 0), (10, 666)] {
            assert!(!served(makedev(major, minor)), "{major}:{minor}");
        }
    }
}
