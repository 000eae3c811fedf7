//! File locks and inotify, one C program each (tests/c), run natively and
//! in the sandbox in a fresh directory under /tmp: both must pass and
//! print the same, so every expectation (and every inotify event sequence)
//! is Linux's own.

mod common;

use common::c_test;

/// flock, fcntl record locks and OFD locks between processes: conflicts,
/// F_GETLK's answers, splitting and merging, release on close and exit,
/// F_SETLKW waiting for the holder, and EDEADLK.
#[test]
fn file_locks_between_processes() {
    require_kvm!();
    c_test("locks", &[]);
}

/// The events of creates, writes, closes, attribute changes, renames
/// within and across watched directories, links, unlinks and rmdir; the
/// watch interface; and a `tail -f` reader woken by another process.
#[test]
fn inotify_event_sequences() {
    require_kvm!();
    c_test("inotify", &[]);
}
