//! cordon's own messages on stderr: strace lines, notices, the profile
//! report, errors. Writing them must never fail the sandbox: when stderr
//! is a pipe whose reader has gone (`cordon run ... 2>&1 | head -1`), or
//! is otherwise unwritable, the message is lost and the run goes on, as
//! the application's own writes there fail without ending cordon.

use std::fmt;
use std::io::Write;

/// Writes `text` to stderr as it is, in one write where the pipe or
/// terminal takes it whole; errors (EPIPE, EBADF, EIO...) are ignored.
pub fn text(text: &str) {
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// Writes one line (the newline is added) to stderr, ignoring errors.
pub fn line(args: fmt::Arguments<'_>) {
    let mut s = args.to_string();
    s.push('\n');
    text(&s);
}
