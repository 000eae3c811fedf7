//! The time-stamp counter, as the host reads it.

/// Reads the TSC after every earlier instruction has completed, so a read
/// cannot be hoisted above the memory accesses before it.
pub fn read_tsc() -> u64 {
    // SAFETY: lfence and rdtsc have no memory effects; every x86_64 CPU has
    // both, and the host kernel lets user mode read the TSC (the vDSO does).
    unsafe {
        core::arch::x86_64::_mm_lfence();
        core::arch::x86_64::_rdtsc()
    }
}

/// True if the CPU has RDTSCP (CPUID 0x8000_0001, EDX bit 27).
pub fn has_rdtscp() -> bool {
    // Every x86_64 CPU has the extended leaves up to 0x8000_0001.
    let ext = core::arch::x86_64::__cpuid(0x8000_0001);
    ext.edx & (1 << 27) != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tsc_advances() {
        let a = read_tsc();
        let b = read_tsc();
        assert!(b >= a);
    }
}
