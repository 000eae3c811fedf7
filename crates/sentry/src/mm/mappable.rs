//! What a file mapping maps: the pages of an object that can be mapped
//! (a file's page cache, a tmpfs file, the vDSO), and how /proc names it.
//! File systems implement these; mm knows nothing else of files.

use memory::Frame;

use super::MmError;

/// How a mapped object is described in /proc/PID/maps.
#[derive(Clone, Debug, Default)]
pub struct MapName {
    /// The name of an object that has no path (`[vdso]`); a file mapped by
    /// a name shows that name instead.
    pub path: String,
    pub dev: u64,
    pub ino: u64,
}

/// A file whose pages can be mapped into an address space.
pub trait Mappable: Send + Sync {
    /// The frame holding page `index` of the file, with a reference for the
    /// caller; `None` past the end of the file. Bytes of the last page past
    /// the end of the file are zero.
    fn page(&self, index: u64) -> Result<Option<Frame>, MmError>;
    /// Current size in bytes.
    fn size(&self) -> u64;
    /// Name and identity for /proc.
    fn describe(&self) -> MapName;
    /// Page `index` if it is already in memory (with a reference for the
    /// caller); never reads the file.
    fn cached(&self, _index: u64) -> Option<Frame> {
        None
    }
    /// True if the pages never change while mapped (a read-only file's
    /// cached copy): a write to a private mapping may then copy its
    /// neighbours at once, which would otherwise stop showing the file's
    /// later changes (Linux shows them until the page itself is written).
    fn unchanging(&self) -> bool {
        false
    }
    /// Writes what shared mappings changed back to where the file lives
    /// (msync, and when the last such mapping goes away), for files whose
    /// pages are a copy of something outside sandbox memory.
    fn write_back(&self) -> Result<(), MmError> {
        Ok(())
    }
    /// Brings pages `[index, index + count)` into memory in as few host
    /// reads as possible, so that `page` on each of them is then a lookup.
    /// Only a hint: errors are left for `page` to report.
    fn prefetch(&self, _index: u64, _count: u64) {}
}

/// The path a file mapping shows in /proc/PID/maps: where the file was
/// opened, following later renames.
pub trait MapPath: Send + Sync {
    fn map_path(&self) -> Vec<u8>;
}
