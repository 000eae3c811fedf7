//! x86_64 register state and exceptions as they cross the platform seam.

mod registers;
pub mod rewrite;
mod tsc;

pub use registers::{Exception, FpState, Registers, vector};
pub use tsc::{has_rdtscp, read_tsc};
