//! x86_64 register state and exceptions as they cross the platform seam.

mod registers;

pub use registers::{Exception, FpState, Registers, vector};
