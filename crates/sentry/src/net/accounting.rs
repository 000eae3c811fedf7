//! What the sandbox's socket buffers cost, charged to its memory.
//!
//! Queued socket data lives on the sentry's heap, not in the memory file,
//! so without a charge a program filling many socket buffers would make the
//! sentry hold host memory past `--memory`. As Linux charges socket memory
//! to the sender's memory cgroup, every byte a socket queue holds (data and
//! the per-message overhead Linux's truesize counts) is charged to the
//! sandbox's [`MemoryFile`] while it is queued; a charge that does not fit
//! fails, and the family answers as Linux does when it cannot allocate a
//! buffer (ENOBUFS from a unix send, a dropped UDP datagram, a short TCP
//! send).
//!
//! Charges are in bytes; the memory file counts frames, so the account
//! takes whole frames and keeps a few spare ones between messages (as
//! memcg keeps a per-cpu stock) so that a ping-pong of small messages does
//! not take and give back a frame on every message.

use std::sync::{Arc, Mutex};

use memory::{MemoryFile, PAGE_SIZE};

use crate::errno::Errno;

/// Frames the account keeps beyond what its charges need before it gives
/// them back.
const SPARE_FRAMES: u64 = 16;

/// The sandbox's socket memory.
pub struct SocketMemory {
    mf: Arc<MemoryFile>,
    state: Mutex<Account>,
}

#[derive(Default)]
struct Account {
    /// Bytes charged by live [`SocketCharge`]s.
    bytes: u64,
    /// Frames taken from the memory file for them.
    frames: u64,
}

fn frames_for(bytes: u64) -> u64 {
    bytes.div_ceil(PAGE_SIZE)
}

impl SocketMemory {
    pub fn new(mf: Arc<MemoryFile>) -> Arc<SocketMemory> {
        Arc::new(SocketMemory { mf, state: Mutex::new(Account::default()) })
    }

    /// Charges `bytes` for a buffer about to be queued; ENOBUFS if the
    /// sandbox's memory has no room for them. The charge is given back
    /// when the returned [`SocketCharge`] is dropped.
    pub fn charge(self: &Arc<Self>, bytes: usize) -> Result<SocketCharge, Errno> {
        self.take(bytes as u64)?;
        Ok(SocketCharge { memory: self.clone(), bytes: bytes as u64 })
    }

    /// Bytes charged now.
    pub fn charged(&self) -> u64 {
        self.state.lock().unwrap().bytes
    }

    fn take(&self, bytes: u64) -> Result<(), Errno> {
        let mut st = self.state.lock().unwrap();
        let need = frames_for(st.bytes + bytes);
        if need > st.frames {
            self.mf.charge(need - st.frames).map_err(|_| Errno::ENOBUFS)?;
            st.frames = need;
        }
        st.bytes += bytes;
        Ok(())
    }

    fn give_back(&self, bytes: u64) {
        let mut st = self.state.lock().unwrap();
        st.bytes -= bytes;
        let need = frames_for(st.bytes);
        if st.frames > need + SPARE_FRAMES {
            self.mf.uncharge(st.frames - need);
            st.frames = need;
        }
    }
}

/// Bytes of a queued buffer charged to the sandbox's memory, given back on
/// drop.
pub struct SocketCharge {
    memory: Arc<SocketMemory>,
    bytes: u64,
}

impl SocketCharge {
    /// Grows or shrinks the charge to `bytes`; ENOBUFS, leaving it as it
    /// was, if growing does not fit.
    pub fn resize(&mut self, bytes: usize) -> Result<(), Errno> {
        let bytes = bytes as u64;
        if bytes > self.bytes {
            self.memory.take(bytes - self.bytes)?;
        } else if bytes < self.bytes {
            self.memory.give_back(self.bytes - bytes);
        }
        self.bytes = bytes;
        Ok(())
    }
}

impl Drop for SocketCharge {
    fn drop(&mut self) {
        self.memory.give_back(self.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_take_frames_until_the_memory_is_full() {
        let mf = Arc::new(MemoryFile::new(64 * PAGE_SIZE).unwrap());
        let mem = SocketMemory::new(mf.clone());
        let a = mem.charge(100).unwrap();
        assert_eq!(mf.stats().frames_charged, 1);
        let b = mem.charge(PAGE_SIZE as usize).unwrap();
        assert_eq!(mf.stats().frames_charged, 2);
        assert_eq!(mem.charged(), 100 + PAGE_SIZE);
        assert_eq!(mem.charge(64 * PAGE_SIZE as usize).err(), Some(Errno::ENOBUFS));
        assert_eq!(mem.charged(), 100 + PAGE_SIZE, "a failed charge takes nothing");
        drop(a);
        drop(b);
        assert_eq!(mem.charged(), 0);
        // Spare frames are kept only up to a few.
        let big = mem.charge(40 * PAGE_SIZE as usize).unwrap();
        assert_eq!(mf.stats().frames_charged, 40);
        drop(big);
        assert_eq!(mf.stats().frames_charged, 0);
    }

    #[test]
    fn a_resized_charge_follows_its_buffer() {
        let mf = Arc::new(MemoryFile::new(8 * PAGE_SIZE).unwrap());
        let mem = SocketMemory::new(mf.clone());
        let mut c = mem.charge(0).unwrap();
        c.resize(4 * PAGE_SIZE as usize).unwrap();
        assert_eq!(mf.stats().frames_charged, 4);
        assert_eq!(c.resize(16 * PAGE_SIZE as usize).err(), Some(Errno::ENOBUFS));
        assert_eq!(mem.charged(), 4 * PAGE_SIZE);
        c.resize(PAGE_SIZE as usize).unwrap();
        assert_eq!(mem.charged(), PAGE_SIZE);
        drop(c);
        assert_eq!(mem.charged(), 0);
    }
}
