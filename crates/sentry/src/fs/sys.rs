//! /sys: the little of sysfs the sandbox serves, all of it its own. The C
//! library reads the CPU lists here to count processors; nothing of the
//! host's /sys is reachable.

use std::sync::Arc;

use super::Inode;
use super::synthetic::SynthDir;

/// A CPU list as sysfs writes it ("0", "0-3").
fn cpu_list(cpus: usize) -> Vec<u8> {
    match cpus {
        0 | 1 => b"0\n".to_vec(),
        n => format!("0-{}\n", n - 1).into_bytes(),
    }
}

/// The root of /sys for a sandbox with `cpus` processors, all online.
pub fn new_sysfs(cpus: usize) -> Arc<dyn Inode> {
    let cpu = SynthDir::new(
        ["online", "possible", "present"]
            .into_iter()
            .map(|name| (name.as_bytes().to_vec(), SynthDir::file_with(cpu_list(cpus))))
            .collect(),
    );
    let system = SynthDir::new(vec![(b"cpu".to_vec(), cpu as Arc<dyn Inode>)]);
    let devices = SynthDir::new(vec![(b"system".to_vec(), system as Arc<dyn Inode>)]);
    SynthDir::new(vec![(b"devices".to_vec(), devices as Arc<dyn Inode>)])
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
