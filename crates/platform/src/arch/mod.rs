//! Architecture-specific types of the platform seam.

#[cfg(target_arch = "x86_64")]
pub mod x86_64;
#[cfg(target_arch = "x86_64")]
pub use x86_64::{Exception, FpState, Registers, has_rdtscp, read_tsc, rewrite, vector};
