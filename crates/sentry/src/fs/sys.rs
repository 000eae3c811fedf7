//! /sys: the little of sysfs the sandbox serves, all of it its own. The C
//! library reads the CPU lists here to count processors, and runtimes read
//! their limits from the cgroup files; nothing of the host's /sys is
//! reachable.

use std::sync::Arc;

use super::synthetic::{SynthDir, SynthFile, SynthSymlink};
use super::{FsError, Inode};

/// What /sys needs to know about the sandbox.
pub trait SysSource: Send + Sync {
    /// CPUs the sandbox has, all online.
    fn cpus(&self) -> usize;
    /// Contents of a cgroup v2 interface file of the sandbox's cgroup
    /// (one of [`CGROUP_FILES`]).
    fn cgroup(&self, name: &str) -> Option<Vec<u8>>;
    /// The network interfaces, each with its attribute files (ifindex,
    /// mtu, address...): fixed for the sandbox's life.
    fn net_interfaces(&self) -> Vec<NetInterfaceFiles>;
}

/// An interface's name and its attribute files, as (name, contents).
pub type NetInterfaceFiles = (String, Vec<(String, Vec<u8>)>);

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
    // Each interface's directory is under devices/virtual/net, and
    // class/net links to it, as Linux lays out a virtual device.
    let interfaces = src.net_interfaces();
    let mut net_devices: Vec<(Vec<u8>, Arc<dyn Inode>)> = Vec::new();
    let mut net_class: Vec<(Vec<u8>, Arc<dyn Inode>)> = Vec::new();
    for (name, attrs) in interfaces {
        let files = attrs.into_iter().map(|(a, v)| (a.into_bytes(), SynthDir::file_with(v))).collect();
        net_devices.push((name.as_bytes().to_vec(), SynthDir::new(files) as Arc<dyn Inode>));
        let target = format!("../../devices/virtual/net/{name}");
        net_class.push((name.into_bytes(), SynthSymlink::inode(target.as_bytes())));
    }
    let virtual_net = SynthDir::new(vec![(b"net".to_vec(), SynthDir::new(net_devices) as Arc<dyn Inode>)]);
    let devices = SynthDir::new(vec![
        (b"system".to_vec(), system as Arc<dyn Inode>),
        (b"virtual".to_vec(), virtual_net as Arc<dyn Inode>),
    ]);
    let class = SynthDir::new(vec![(b"net".to_vec(), SynthDir::new(net_class) as Arc<dyn Inode>)]);
    let cgroup = new_cgroupfs(src);
    let fs = SynthDir::new(vec![(b"cgroup".to_vec(), cgroup.clone())]);
    let root = SynthDir::new(vec![
        (b"class".to_vec(), class as Arc<dyn Inode>),
        (b"devices".to_vec(), devices as Arc<dyn Inode>),
        (b"fs".to_vec(), fs as Arc<dyn Inode>),
    ]);
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
