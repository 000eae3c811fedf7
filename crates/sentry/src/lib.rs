//! The sentry: the sandbox's kernel. It implements the Linux ABI for the
//! application, reached through a platform.

pub mod errno;
pub mod fs;
pub mod mm;
