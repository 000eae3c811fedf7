//! Architecture-specific parts of the kvm platform.

#[cfg(target_arch = "x86_64")]
pub mod x86_64;
