//! The sentry: the sandbox's kernel. It implements the Linux ABI for the
//! application, reached through a platform.

pub mod abi;
pub mod arch;
pub mod auth;
pub mod confine;
pub mod control;
pub mod devices;
pub mod diag;
pub mod errno;
pub mod fd;
pub mod fs;
pub mod futex;
pub mod internal_error;
pub mod ipc;
pub mod kernel;
pub mod loader;
pub mod mm;
pub mod net;
pub mod profile;
pub mod sandbox;
pub mod signal;
pub mod stats;
pub mod syscalls;
pub mod task;
pub mod terminal;
pub mod timerfd;
pub mod timers;
pub mod tty;
pub mod vdso;
pub mod waiter;
