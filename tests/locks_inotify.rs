//! File locks and inotify, C programs (tests/c) run natively and in the
//! sandbox in a fresh directory under /tmp: both must pass and print the
//! same, so every expectation (and every inotify event sequence) is Linux's
//! own. locks.c and inotify.c find their own directory; fs_locks.c and
//! fs_inotify.c are told theirs (tests/c/work_dir.h), like the writable
//! file system tests.

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

/// flock, fcntl record and OFD locks between two processes taking turns
/// through pipes, F_SETLKW waiting for the holder, and EDEADLK refusing
/// exactly one of two crossed waits.
#[test]
fn fs_locks() {
    require_kvm!();
    common::c_test_in_work_dir("fs_locks");
}

/// Event sequences of a file's life in watched directories and of a file
/// watched itself, IN_ONESHOT, removed watches, and the calls' errors.
#[test]
fn fs_inotify() {
    require_kvm!();
    common::c_test_in_work_dir("fs_inotify");
}
