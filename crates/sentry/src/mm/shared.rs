//! Shared anonymous memory: pages several mappings see alike.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use memory::{Frame, MemoryFile};

use super::MmError;

/// The object behind a MAP_SHARED|MAP_ANONYMOUS mapping. Pages are created
/// zero-filled on first touch and live as long as the object.
pub struct SharedMemory {
    mf: Arc<MemoryFile>,
    pages: Mutex<BTreeMap<u64, Frame>>,
}

impl SharedMemory {
    pub fn new(mf: Arc<MemoryFile>) -> Arc<Self> {
        Arc::new(SharedMemory { mf, pages: Mutex::new(BTreeMap::new()) })
    }

    /// The frame of page `index`, with a new reference for the caller.
    pub fn page(&self, index: u64) -> Result<Frame, MmError> {
        let mut pages = self.pages.lock().unwrap();
        let f = match pages.get(&index) {
            Some(f) => *f,
            None => {
                let f = self.mf.allocate().map_err(|_| MmError::NoMemory)?;
                pages.insert(index, f);
                f
            }
        };
        self.mf.inc_ref(f);
        Ok(f)
    }

    /// Frames the object holds.
    pub fn resident_pages(&self) -> usize {
        self.pages.lock().unwrap().len()
    }
}

impl Drop for SharedMemory {
    fn drop(&mut self) {
        for f in self.pages.get_mut().unwrap().values() {
            self.mf.dec_ref(*f);
        }
    }
}
