//! File locks between processes (flock, fcntl record and OFD locks,
//! F_SETLKW waiting, EDEADLK) and inotify event sequences on a writable
//! file system, one C program each (tests/c/fs_locks.c, fs_inotify.c), run
//! natively and in the sandbox in a fresh work directory: both must pass
//! and print the same.

mod common;

#[test]
fn fs_locks() {
    require_kvm!();
    common::c_test_in_work_dir("fs_locks");
}

#[test]
fn fs_inotify() {
    require_kvm!();
    common::c_test_in_work_dir("fs_inotify");
}
