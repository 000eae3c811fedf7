//! Address spaces on KVM: page tables in frames of the memory file.

use std::any::Any;
use std::sync::{Arc, Mutex};

use memory::Frame;

use super::Shared;
use super::arch::x86_64::pagetable::{PageTables, TableMemory};
use super::arch::x86_64::supervisor;
use crate::{Access, AddressSpace, PlatformError};

/// Mapping at least this many pages at once also faults them into KVM's
/// host mapping, so the guest's first touches are batched.
const POPULATE_MIN_PAGES: usize = 4;

/// Page-table frames come from the memory file and go back through the
/// platform's quarantine.
pub(crate) struct Tables<'a>(pub(crate) &'a Shared);

impl TableMemory for Tables<'_> {
    fn alloc_table(&self) -> Result<Frame, PlatformError> {
        self.0.alloc_table()
    }
    fn release_table(&self, table: Frame) {
        self.0.release_table(table)
    }
    fn read(&self, table: Frame, index: usize) -> u64 {
        self.0.mem.read_u64(table.offset() + 8 * index as u64)
    }
    fn write(&self, table: Frame, index: usize, value: u64) {
        self.0.mem.write_u64(table.offset() + 8 * index as u64, value)
    }
}

struct Inner {
    tables: Option<PageTables>,
    /// Frames whose old translations may still be cached.
    stale: Vec<Frame>,
}

pub struct KvmAddressSpace {
    shared: Arc<Shared>,
    root: Frame,
    inner: Mutex<Inner>,
    /// Held for the whole of a flush, so that a flush finding nothing left
    /// to do still waits for one in progress: no vCPU enters the guest, and
    /// no caller goes on, while a translation that was made stale before the
    /// call may survive.
    flushing: Mutex<()>,
}

impl KvmAddressSpace {
    pub(crate) fn new(shared: Arc<Shared>) -> Result<Self, PlatformError> {
        let tables = PageTables::new(&Tables(&shared), supervisor::pml4_entry(&shared.supervisor))?;
        Ok(KvmAddressSpace {
            root: tables.root(),
            shared,
            inner: Mutex::new(Inner { tables: Some(tables), stale: vec![] }),
            flushing: Mutex::new(()),
        })
    }

    /// The PML4 frame, loaded into CR3.
    pub(crate) fn root(&self) -> Frame {
        self.root
    }
}

impl AddressSpace for KvmAddressSpace {
    fn map(&self, va: u64, frames: &[Frame], access: Access) -> Result<(), PlatformError> {
        if let Some(max) = frames.iter().max() {
            self.shared.guest.ensure_covered(&self.shared.vm, *max)?;
        }
        let mut inner = self.inner.lock().unwrap();
        let Inner { tables, stale } = &mut *inner;
        tables.as_mut().expect("live").map(&Tables(&self.shared), va, frames, access, stale)?;
        drop(inner);
        if frames.len() >= POPULATE_MIN_PAGES {
            self.shared.guest.populate(&mut frames.to_vec());
        }
        Ok(())
    }

    fn unmap(&self, va: u64, len: u64) {
        let mut inner = self.inner.lock().unwrap();
        let Inner { tables, stale } = &mut *inner;
        tables.as_mut().expect("live").unmap(&Tables(&self.shared), va, va.saturating_add(len), stale);
    }

    fn protect(&self, va: u64, len: u64, access: Access) {
        let mut inner = self.inner.lock().unwrap();
        let Inner { tables, stale } = &mut *inner;
        tables.as_mut().expect("live").protect(&Tables(&self.shared), va, va.saturating_add(len), access, stale);
    }

    fn flush(&self) {
        let _flushing = self.flushing.lock().unwrap();
        let mut stale = {
            let mut inner = self.inner.lock().unwrap();
            if inner.stale.is_empty() {
                return;
            }
            std::mem::take(&mut inner.stale)
        };
        // Reclaiming drops KVM's translations of every freed frame (by
        // punching or through the invalidator); the frames still in use are
        // invalidated here.
        self.shared.mem.reclaim();
        stale.retain(|f| self.shared.mem.ref_count(*f) > 0);
        self.shared.guest.invalidate(&self.shared.vm, &mut stale);
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Drop for KvmAddressSpace {
    /// No vCPU runs a dropped address space again (every entry loads the
    /// root of the space it is given), so translations of the frames it
    /// mapped need no invalidation: frames still used elsewhere stay valid
    /// there, freed ones are punched out before reuse, and the table frames
    /// wait in quarantine for a global flush. Invalidating here would zap
    /// shared frames (libraries) in every other address space.
    fn drop(&mut self) {
        let inner = self.inner.get_mut().unwrap();
        let mut mapped = Vec::new();
        if let Some(t) = inner.tables.take() {
            t.destroy(&Tables(&self.shared), &mut mapped);
        }
    }
}
