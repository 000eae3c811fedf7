//! x86_64 parts of the kvm platform.

pub mod cpu;
pub mod pagetable;
pub mod supervisor;
pub mod trampoline;
