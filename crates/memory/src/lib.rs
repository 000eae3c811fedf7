//! The sandbox's physical memory.
//!
//! All memory an application can see lives in one memfd, the [`MemoryFile`].
//! Its offsets are the guest-physical addresses on the kvm platform, and the
//! sentry maps it once so it can reach any frame without a system call. The
//! file is sparse: a frame costs host memory only once something touches it,
//! and freed frames are punched out so the host gets the memory back.
//! Its bytes are read and written only through [`guest`] slices, since the
//! application may be storing to them at the same moment.

mod file;
pub mod guest;
mod refcount;

pub use file::{DEFAULT_RECYCLE_LIMIT, Invalidator, MemoryFile, MemoryStats};
pub use guest::{GuestSlice, GuestSliceMut};

/// Size of a frame and of a page.
pub const PAGE_SIZE: u64 = 4096;
/// log2 of [`PAGE_SIZE`].
pub const PAGE_SHIFT: u32 = 12;

/// A 4 KiB frame of the [`MemoryFile`], named by its frame number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Frame(u64);

impl Frame {
    /// The frame with number `n`.
    pub const fn from_number(n: u64) -> Self {
        Frame(n)
    }
    /// The frame number.
    pub const fn number(self) -> u64 {
        self.0
    }
    /// Offset of the frame in the memory file, which is also its
    /// guest-physical address.
    pub const fn offset(self) -> u64 {
        self.0 << PAGE_SHIFT
    }
    /// The frame containing byte `offset` of the memory file.
    pub const fn containing(offset: u64) -> Self {
        Frame(offset >> PAGE_SHIFT)
    }
}

/// Errors of the memory file.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    /// Every frame of the configured capacity is in use.
    #[error("sandbox memory exhausted ({capacity} bytes)")]
    Exhausted { capacity: u64 },
    /// The host refused to create or size the memory file.
    #[error("memory file: {0}")]
    Host(#[from] rustix::io::Errno),
}

/// Splits sorted frames into runs of consecutive frame numbers, yielding
/// `(first, count)` pairs. Host calls on frames (punching, unmapping) are made
/// per run rather than per frame.
pub fn frame_runs(sorted: &[Frame]) -> impl Iterator<Item = (Frame, u64)> + '_ {
    let mut i = 0;
    std::iter::from_fn(move || {
        let first = *sorted.get(i)?;
        let mut n = 1;
        while i + (n as usize) < sorted.len() && sorted[i + n as usize].0 == first.0 + n {
            n += 1;
        }
        i += n as usize;
        Some((first, n))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_coalesce_consecutive_frames() {
        let f: Vec<Frame> = [1, 2, 3, 7, 9, 10].into_iter().map(Frame).collect();
        let runs: Vec<(u64, u64)> = frame_runs(&f).map(|(s, n)| (s.0, n)).collect();
        assert_eq!(runs, vec![(1, 3), (7, 1), (9, 2)]);
        assert_eq!(frame_runs(&[]).count(), 0);
    }
}
