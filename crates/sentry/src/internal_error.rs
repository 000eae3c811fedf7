//! What a bug in cordon does: a panic anywhere ends the sandbox at once.
//!
//! A panicking sentry thread may hold locks and leave half-updated state
//! behind; other tasks would block on those locks or act on that state, and
//! the run would hang or go wrong. So no panic unwinds: the first one
//! prints a single line naming the bug and where it is, puts the terminal
//! back as cordon found it, and ends the cordon process with status 125
//! (cordon's own failure), which ends every task of the sandbox with it:
//! they are all threads of this process. Nothing is cleaned up in between,
//! as nothing that state touches can be trusted.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

/// The exit status of a run that cordon itself failed.
pub const EXIT_STATUS: i32 = 125;

/// Terminal settings of the standard descriptors that are terminals, as
/// they were when cordon started.
static TERMINALS: OnceLock<Vec<(i32, libc::termios)>> = OnceLock::new();

/// Set by the first panic; later ones (other threads failing meanwhile)
/// wait for it to end the process.
static PANICKING: AtomicBool = AtomicBool::new(false);

/// Makes every later panic end the process as described above. Called
/// once, first thing, by the program that runs sandboxes.
pub fn install() {
    TERMINALS.get_or_init(|| {
        (0..3)
            .filter_map(|fd| {
                // SAFETY: tcgetattr writes a termios we own; a descriptor
                // that is closed or not a terminal makes it fail.
                let mut t: libc::termios = unsafe { std::mem::zeroed() };
                // SAFETY: as above.
                (unsafe { libc::tcgetattr(fd, &mut t) } == 0).then_some((fd, t))
            })
            .collect()
    });
    std::panic::set_hook(Box::new(|info| {
        if PANICKING.swap(true, Ordering::AcqRel) {
            loop {
                std::thread::park();
            }
        }
        let payload = info.payload();
        let message = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("panic");
        let mut line = format!("cordon: internal error: {}", one_line(message));
        if let Some(at) = info.location() {
            line.push_str(&format!(" at {}:{}", at.file(), at.line()));
        }
        line.push('\n');
        // With RUST_BACKTRACE set, where it came from, for whoever fixes it.
        let trace = std::backtrace::Backtrace::capture();
        if trace.status() == std::backtrace::BacktraceStatus::Captured {
            line.push_str(&format!("{trace}\n"));
        }
        // Straight to the descriptor: the lock of Rust's stderr may be held
        // by the thread that panicked, or by one that waits on it.
        // SAFETY: writes from a buffer we own; errors are of no interest.
        let _ = unsafe { libc::write(2, line.as_ptr().cast(), line.len()) };
        restore_terminals();
        // SAFETY: _exit ends the process without running anything that
        // could touch the state the panic left behind.
        unsafe { libc::_exit(EXIT_STATUS) }
    }));
}

/// Puts back the terminal settings saved at start.
pub fn restore_terminals() {
    for (fd, t) in TERMINALS.get().into_iter().flatten() {
        // SAFETY: tcsetattr reads a termios we own; an error leaves the
        // terminal as it is.
        unsafe { libc::tcsetattr(*fd, libc::TCSANOW, t) };
    }
}

/// A multi-line panic message (as `assert_eq!` makes) on one line.
fn one_line(message: &str) -> String {
    let parts: Vec<&str> = message.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    if parts.is_empty() { "panic".into() } else { parts.join("; ") }
}

#[cfg(test)]
mod tests {
    use super::one_line;

    #[test]
    fn messages_become_one_line() {
        assert_eq!(one_line("index out of bounds"), "index out of bounds");
        assert_eq!(
            one_line("assertion `left == right` failed\n  left: 1\n right: 2"),
            "assertion `left == right` failed; left: 1; right: 2"
        );
        assert_eq!(one_line("\n"), "panic");
    }
}
