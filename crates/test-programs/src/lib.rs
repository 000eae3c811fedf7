//! Where the C test programs are: built by this crate's build script for
//! the end-to-end tests only.

/// The directory holding NAME-static, NAME-static-pie and NAME-dynamic for
/// every tests/c/NAME.c of the workspace.
pub const DIR: &str = concat!(env!("OUT_DIR"), "/c");
