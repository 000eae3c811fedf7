//! Who may write a file and who runs it: Linux's `i_writecount`.
//!
//! A regular file open for writing cannot be executed, and a file that an
//! address space runs cannot be opened for writing or truncated: both
//! answer ETXTBSY. Counts are kept per file identity ([`FileKey`]), so
//! every name and every open of one file meet in one count.

use std::collections::HashMap;
use std::sync::Mutex;

use super::{FileKey, FsError};

/// Per file: writers (positive) or address spaces running it (negative).
/// Files with neither have no entry.
static COUNTS: Mutex<Option<HashMap<FileKey, i64>>> = Mutex::new(None);

/// Changes a file's count by `delta` unless that would take it across
/// zero from the other side.
fn adjust(key: FileKey, delta: i64) -> Result<(), FsError> {
    let mut counts = COUNTS.lock().unwrap();
    let counts = counts.get_or_insert_with(HashMap::new);
    let count = counts.entry(key).or_insert(0);
    if *count != 0 && (*count > 0) != (delta > 0) {
        return Err(FsError::TextBusy);
    }
    *count += delta;
    Ok(())
}

/// Undoes one [`adjust`] that succeeded.
fn restore(key: FileKey, delta: i64) {
    let mut counts = COUNTS.lock().unwrap();
    let Some(counts) = counts.as_mut() else { return };
    if let Some(count) = counts.get_mut(&key) {
        *count -= delta;
        if *count == 0 {
            counts.remove(&key);
        }
    }
}

/// The right to write a file, held by a description open for writing or
/// for the length of a truncate (Linux's get_write_access).
#[derive(Debug)]
pub struct WriteAccess(FileKey);

impl WriteAccess {
    /// TextBusy if an address space runs the file.
    pub fn get(key: FileKey) -> Result<Self, FsError> {
        adjust(key, 1)?;
        Ok(WriteAccess(key))
    }
}

impl Drop for WriteAccess {
    fn drop(&mut self) {
        restore(self.0, 1);
    }
}

/// A file run by an address space: writes are refused while it is held
/// (Linux's deny_write_access at exec).
#[derive(Debug)]
pub struct ExecDenial(FileKey);

impl ExecDenial {
    /// TextBusy if the file is open for writing.
    pub fn get(key: FileKey) -> Result<Self, FsError> {
        adjust(key, -1)?;
        Ok(ExecDenial(key))
    }
}

impl Drop for ExecDenial {
    fn drop(&mut self) {
        restore(self.0, -1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(ino: u64) -> FileKey {
        FileKey { mount: u64::MAX - 7, ino }
    }

    #[test]
    fn writers_and_runners_exclude_each_other() {
        let w1 = WriteAccess::get(key(1)).unwrap();
        let w2 = WriteAccess::get(key(1)).unwrap();
        assert!(matches!(ExecDenial::get(key(1)), Err(FsError::TextBusy)));
        drop(w1);
        assert!(matches!(ExecDenial::get(key(1)), Err(FsError::TextBusy)));
        drop(w2);
        let d1 = ExecDenial::get(key(1)).unwrap();
        let d2 = ExecDenial::get(key(1)).unwrap();
        assert!(matches!(WriteAccess::get(key(1)), Err(FsError::TextBusy)));
        drop(d1);
        assert!(matches!(WriteAccess::get(key(1)), Err(FsError::TextBusy)));
        drop(d2);
        drop(WriteAccess::get(key(1)).unwrap());
        assert!(COUNTS.lock().unwrap().as_ref().unwrap().get(&key(1)).is_none());
    }

    #[test]
    fn files_are_counted_apart() {
        let _w = WriteAccess::get(key(2)).unwrap();
        let _d = ExecDenial::get(key(3)).unwrap();
    }
}
