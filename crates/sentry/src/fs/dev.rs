//! /dev: the devices the sentry serves itself. Nothing here reaches a host
//! device.

use crate::fs::Context;
use std::sync::Arc;

use memory::{GuestSlice, GuestSliceMut};

use super::synthetic::{DeviceNode, SynthDir, SynthSymlink};
use super::{FileOps, FsError, Inode, OpenFile, Stat, makedev};

/// Which memory device a file is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemDevice {
    /// Reads end at once, writes vanish.
    Null,
    /// Reads zeros, writes vanish; mapping it gives anonymous memory.
    Zero,
    /// Reads zeros, writes fail with ENOSPC.
    Full,
    /// Reads random bytes from the host's CSPRNG, writes vanish.
    Random,
}

struct MemDeviceFile {
    kind: MemDevice,
    stat: Stat,
}

impl FileOps for MemDeviceFile {
    fn read(&self, _: &Context, _: &OpenFile, bufs: &[GuestSliceMut<'_>], _: u64) -> Result<usize, FsError> {
        let mut n = 0;
        for b in bufs {
            match self.kind {
                MemDevice::Null => return Ok(0),
                MemDevice::Zero | MemDevice::Full => b.fill(0),
                MemDevice::Random => {
                    let mut done = 0;
                    while done < b.len() {
                        done += memory::guest::getrandom(b.subslice(done, b.len() - done))?;
                    }
                }
            }
            n += b.len();
        }
        Ok(n)
    }

    fn write(&self, _: &Context, _: &OpenFile, bufs: &[GuestSlice<'_>], _: u64) -> Result<usize, FsError> {
        if self.kind == MemDevice::Full {
            return Err(FsError::Host(crate::errno::Errno::ENOSPC));
        }
        Ok(bufs.iter().map(|b| b.len()).sum())
    }

    fn stat(&self) -> Result<Stat, FsError> {
        Ok(self.stat)
    }

    fn seekable(&self) -> bool {
        // pread and pwrite work; the offset itself is meaningless.
        true
    }

    fn ignores_offset(&self) -> bool {
        true
    }

    fn anonymous_mapping(&self) -> bool {
        self.kind == MemDevice::Zero
    }
}

fn mem_device(kind: MemDevice, minor: u32) -> Arc<dyn Inode> {
    let rdev = makedev(1, minor);
    let node: Arc<std::sync::OnceLock<Stat>> = Arc::new(std::sync::OnceLock::new());
    let n2 = node.clone();
    let inode = DeviceNode::inode(0o666, rdev, move |_, _| {
        let stat = *n2.get().expect("stat set at creation");
        Ok(Arc::new(MemDeviceFile { kind, stat }) as Arc<dyn FileOps>)
    });
    let _ = node.set(inode.stat().expect("device stat"));
    inode
}

/// Opens a device node made by mknod elsewhere (a tmpfs): the memory
/// devices by their numbers, as Linux's chrdev_open finds their driver;
/// ENXIO for any other number, as for a device with no driver.
pub fn open_device(rdev: u64, _flags: super::OpenFlags) -> Result<Arc<dyn FileOps>, FsError> {
    let kind = match (super::dev_major(rdev), super::dev_minor(rdev)) {
        (1, 3) => MemDevice::Null,
        (1, 5) => MemDevice::Zero,
        (1, 7) => MemDevice::Full,
        (1, 8) | (1, 9) => MemDevice::Random,
        _ => return Err(FsError::NoDevice),
    };
    let stat = mem_device(kind, super::dev_minor(rdev)).stat()?;
    Ok(Arc::new(MemDeviceFile { kind, stat }))
}

/// A /dev/null node, which a masked file of the root shows instead of
/// itself (as OCI runtimes bind /dev/null over masked files).
pub fn null_device() -> Arc<dyn Inode> {
    mem_device(MemDevice::Null, 3)
}

/// The root of /dev, with the terminals of `devpts`.
pub fn new_devfs(more: Vec<(Vec<u8>, Arc<dyn Inode>)>) -> Arc<dyn Inode> {
    let mut entries: Vec<(Vec<u8>, Arc<dyn Inode>)> = vec![
        (b"null".to_vec(), mem_device(MemDevice::Null, 3)),
        (b"zero".to_vec(), mem_device(MemDevice::Zero, 5)),
        (b"full".to_vec(), mem_device(MemDevice::Full, 7)),
        (b"random".to_vec(), mem_device(MemDevice::Random, 8)),
        (b"urandom".to_vec(), mem_device(MemDevice::Random, 9)),
        (b"stdin".to_vec(), SynthSymlink::inode(b"/proc/self/fd/0")),
        (b"stdout".to_vec(), SynthSymlink::inode(b"/proc/self/fd/1")),
        (b"stderr".to_vec(), SynthSymlink::inode(b"/proc/self/fd/2")),
        (b"fd".to_vec(), SynthSymlink::inode(b"/proc/self/fd")),
    ];
    entries.extend(more);
    SynthDir::new(entries)
}

/// Fills `root`, the fresh tmpfs a container's configuration mounts at
/// /dev, as runc fills it: the memory devices and /dev/tty as nodes (which
/// the kernel's table of devices serves when opened), the standard
/// symlinks, `ptmx` leading to the devpts mount's own, and the directories
/// the configuration's devpts, shm and mqueue mounts go on.
pub fn populate_container_dev(root: &Arc<dyn Inode>) -> Result<(), FsError> {
    use super::{FileType, NewNode};
    let ctx = Context::internal();
    let node = |mode: u32, rdev: u64| NewNode { mode, uid: 0, gid: 0, rdev };
    let chr = FileType::CharDevice.mode_bits() | 0o666;
    for (name, major, minor) in
        [("null", 1, 3), ("zero", 1, 5), ("full", 1, 7), ("random", 1, 8), ("urandom", 1, 9), ("tty", 5, 0)]
    {
        root.mknod(&ctx, name.as_bytes(), node(chr, makedev(major, minor)))?;
    }
    let link = FileType::Symlink.mode_bits() | 0o777;
    for (name, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
        ("ptmx", "pts/ptmx"),
    ] {
        root.symlink(&ctx, name.as_bytes(), target.as_bytes(), node(link, 0))?;
    }
    for name in ["pts", "shm", "mqueue"] {
        root.mkdir(&ctx, name.as_bytes(), node(FileType::Directory.mode_bits() | 0o755, 0))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::FileType;

    #[test]
    fn a_container_dev_has_runcs_nodes_and_links() {
        let mf = Arc::new(memory::MemoryFile::new(16 << 20).unwrap());
        let root: Arc<dyn Inode> = crate::fs::tmpfs::Tmpfs::new_root(mf, 0o755, 0, 0, None);
        populate_container_dev(&root).unwrap();
        for (name, major, minor) in [("null", 1, 3), ("zero", 1, 5), ("urandom", 1, 9), ("tty", 5, 0)] {
            let n = root.lookup(name.as_bytes()).unwrap();
            let st = n.stat().unwrap();
            assert_eq!(st.file_type(), FileType::CharDevice, "{name}");
            assert_eq!(st.rdev, makedev(major, minor), "{name}");
            assert_eq!(st.mode & 0o7777, 0o666, "{name}");
            assert_eq!(n.device_number(), Some(makedev(major, minor)), "{name}");
        }
        assert_eq!(root.lookup(b"ptmx").unwrap().read_link().unwrap(), b"pts/ptmx");
        assert_eq!(root.lookup(b"fd").unwrap().read_link().unwrap(), b"/proc/self/fd");
        for dir in ["pts", "shm", "mqueue"] {
            assert_eq!(root.lookup(dir.as_bytes()).unwrap().file_type(), FileType::Directory);
        }
        assert!(root.lookup(b"console").is_err());
    }
}
