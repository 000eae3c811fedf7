//! /sys: the little of sysfs the sandbox serves, all of it its own. The C
//! library reads the CPU lists here to count processors, and runtimes read
//! their limits from the cgroup files; nothing of the host's /sys is
//! reachable.

use std::sync::Arc;

use super::synthetic::{SynthDir, SynthFile};
use super::{FsError, Inode};

/// What /sys needs to know about the sandbox.
pub trait SysSource: Send + Sync {
    /// CPUs the sandbox has, all online.
    fn cpus(&self) -> usize;
    /// Contents of a cgroup v2 interface file of the sandbox's cgroup
    /// (one of [`CGROUP_FILES`]).
    fn cgroup(&self, name: &str) -> Option<Vec<u8>>;
}

/// The cgroup v2 files of the sandbox's cgroup, which it sees as the root
/// of its own cgroup namespace, as a container does.
pub const CGROUP_FILES: &[&str] = &[
    "cgroup.controllers",
    "cgroup.procs",
    "cgroup.threads",
    "cgroup.type",
    "cpu.max",
    "cpu.stat",
    "memory.current",
    "memory.max",
    "memory.peak",
    "memory.swap.max",
    "pids.current",
    "pids.max",
];

/// A CPU list as sysfs writes it ("0", "0-3").
fn cpu_list(cpus: usize) -> Vec<u8> {
    match cpus {
        0 | 1 => b"0\n".to_vec(),
        n => format!("0-{}\n", n - 1).into_bytes(),
    }
}

/// The sandbox's cgroup directory, mounted at /sys/fs/cgroup.
pub fn new_cgroupfs(src: Arc<dyn SysSource>) -> Arc<dyn Inode> {
    let files = CGROUP_FILES
        .iter()
        .map(|name| {
            let src = src.clone();
            let file = SynthFile::inode(0o444, None, move || src.cgroup(name).ok_or(FsError::NotFound));
            (name.as_bytes().to_vec(), file)
        })
        .collect();
    SynthDir::new(files)
}

/// The root of /sys, and the cgroup directory to mount at /sys/fs/cgroup.
pub fn new_sysfs(src: Arc<dyn SysSource>) -> (Arc<dyn Inode>, Arc<dyn Inode>) {
    let cpu = SynthDir::new(
        ["online", "possible", "present"]
            .into_iter()
            .map(|name| (name.as_bytes().to_vec(), SynthDir::file_with(cpu_list(src.cpus()))))
            .collect(),
    );
    let system = SynthDir::new(vec![(b"cpu".to_vec(), cpu as Arc<dyn Inode>)]);
    let devices = SynthDir::new(vec![(b"system".to_vec(), system as Arc<dyn Inode>)]);
    let cgroup = new_cgroupfs(src);
    let fs = SynthDir::new(vec![(b"cgroup".to_vec(), cgroup.clone())]);
    let root =
        SynthDir::new(vec![(b"devices".to_vec(), devices as Arc<dyn Inode>), (b"fs".to_vec(), fs as Arc<dyn Inode>)]);
    (root, cgroup)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(cpu_list(1), b"0\n");
        assert_eq!(cpu_list(2), b"0-1\n");
        assert_eq!(cpu_list(64), b"0-63\n");
    }
}
