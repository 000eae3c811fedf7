//! x86_64 register state and exceptions as they cross the platform seam.

mod registers;
mod tsc;

pub use registers::{Exception, FpState, Registers, vector};
pub use tsc::read_tsc;
