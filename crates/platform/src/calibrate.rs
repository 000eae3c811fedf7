//! What a platform costs on this host, measured: the round trip of a system
//! call from application code to the sentry and back, and a first-touch
//! page fault resolved as the sentry resolves one (a new frame mapped at
//! the faulting page, then the application resumed).
//!
//! Both are measured with a few hundred events on a throw-away memory file
//! and address space, so that choosing a platform by them takes
//! milliseconds and needs no sentry.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use memory::MemoryFile;

use crate::{Access, Event, Platform, PlatformError, Registers};

/// The measured costs of one platform.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Costs {
    /// A system call's round trip: application to sentry and back.
    pub round_trip_ns: u64,
    /// A first-touch fault: the fault's exit, a frame mapped, the resume.
    pub fault_ns: u64,
}

/// Where the calibration's code page is mapped.
const CODE: u64 = 0x40_0000;
/// Where its faults land, one page after another.
const DATA: u64 = 0x1000_0000;
/// The stack pointer the code starts with (it never uses the stack).
const STACK_TOP: u64 = 0x80_0000;

/// `mov eax, 39; syscall; jmp back to the mov`: a getpid loop, each
/// iteration one system call event.
const SYSCALL_LOOP: [u8; 9] = [0xb8, 0x27, 0x00, 0x00, 0x00, 0x0f, 0x05, 0xeb, 0xf7];
/// `mov byte [rdi], 1; add rdi, 4096; jmp back to the mov`: each iteration
/// touches the next page, so each is one first-touch fault.
const TOUCH_LOOP: [u8; 12] = [0xc6, 0x07, 0x01, 0x48, 0x81, 0xc7, 0x00, 0x10, 0x00, 0x00, 0xeb, 0xf4];
/// Offset of [`TOUCH_LOOP`] in the code page.
const TOUCH_OFFSET: u64 = 64;

/// Events measured per repetition, repetitions, and events run first to
/// warm caches and make the platform's lazily built state.
const EVENTS: usize = 64;
const REPETITIONS: usize = 5;
const WARM_UP: usize = 8;

/// Memory the calibration's own memory file may use.
const MEMORY: u64 = 64 << 20;

/// Measures the kvm platform on `device`.
pub fn calibrate_kvm(device: &Path) -> Result<Costs, PlatformError> {
    let mem = Arc::new(MemoryFile::new(MEMORY)?);
    let platform = crate::kvm::KvmPlatform::with_device(device, mem.clone())?;
    measure(&platform, &mem)
}

/// Measures the trap platform, whose stubs take `unprivileged_id` when
/// run by root (see [`crate::trap::TrapPlatform::new`]).
pub fn calibrate_trap(unprivileged_id: u32) -> Result<Costs, PlatformError> {
    let mem = Arc::new(MemoryFile::new(MEMORY)?);
    let platform = crate::trap::TrapPlatform::new(mem.clone(), unprivileged_id)?;
    measure(&platform, &mem)
}

/// Measures `platform`, whose memory file is `mem`: of each kind of event,
/// the median of each of `REPETITIONS` runs of `EVENTS`, and the least of
/// those, so that a burst of load on the host during one run is not taken
/// for the platform's cost.
pub fn measure(platform: &dyn Platform, mem: &MemoryFile) -> Result<Costs, PlatformError> {
    let space = platform.new_address_space()?;
    let code = mem.allocate()?;
    mem.write(code, 0, &SYSCALL_LOOP);
    mem.write(code, TOUCH_OFFSET as usize, &TOUCH_LOOP);
    space.map(CODE, &[code], Access::READ_EXECUTE)?;
    let mut ctx = platform.new_context()?;
    // What is measured is the exit to the sentry: no call may be answered
    // on the way.
    ctx.publish_fast_path(None);

    let mut regs = Registers::for_entry(CODE, STACK_TOP);
    let mut round_trips = Vec::with_capacity(REPETITIONS * EVENTS);
    for i in 0..WARM_UP + REPETITIONS * EVENTS {
        let start = Instant::now();
        let event = ctx.switch(&*space, &mut regs)?;
        let took = start.elapsed();
        expect(event, |e| matches!(e, Event::Syscall))?;
        // The sentry's answer: getpid's value, then back to the loop.
        regs.set_return(1);
        if i >= WARM_UP {
            round_trips.push(took);
        }
    }

    let mut regs = Registers::for_entry(CODE + TOUCH_OFFSET, STACK_TOP);
    regs.rdi = DATA;
    let mut faults = Vec::with_capacity(REPETITIONS * EVENTS);
    for i in 0..WARM_UP + REPETITIONS * EVENTS {
        let page = DATA + i as u64 * 4096;
        let start = Instant::now();
        let event = ctx.switch(&*space, &mut regs)?;
        expect(event, |e| matches!(e, Event::Fault(f) if f.addr == page && f.access.write && !f.present))?;
        let frame = mem.allocate()?;
        space.map(page, &[frame], Access::READ_WRITE)?;
        let took = start.elapsed();
        if i >= WARM_UP {
            faults.push(took);
        }
    }
    // The last mapping's cost is paid when the application resumes; one
    // more entry, ending in the next fault, pays it, so that every mapping
    // measured was also used.
    ctx.switch(&*space, &mut regs)?;
    drop(ctx);
    space.unmap(DATA, (WARM_UP + REPETITIONS * EVENTS + 1) as u64 * 4096);
    space.flush();
    Ok(Costs { round_trip_ns: least_median_ns(&mut round_trips), fault_ns: least_median_ns(&mut faults) })
}

/// An error unless `event` is the one the calibration code must produce.
fn expect(event: Event, wanted: impl Fn(&Event) -> bool) -> Result<(), PlatformError> {
    if wanted(&event) {
        Ok(())
    } else {
        Err(PlatformError::CpuFailure(format!("calibration code stopped unexpectedly: {event:?}")))
    }
}

/// The least of the medians of each run of `EVENTS` samples.
fn least_median_ns(samples: &mut [Duration]) -> u64 {
    samples.chunks_mut(EVENTS).map(median_ns).min().unwrap_or(0)
}

fn median_ns(samples: &mut [Duration]) -> u64 {
    samples.sort_unstable();
    samples.get(samples.len() / 2).map_or(0, |d| d.as_nanos() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        let us = |v: &[u64]| v.iter().map(|&n| Duration::from_micros(n)).collect::<Vec<_>>();
        assert_eq!(median_ns(&mut us(&[5, 1, 3])), 3000);
        assert_eq!(median_ns(&mut us(&[4, 1, 3, 2])), 3000);
        assert_eq!(median_ns(&mut []), 0);
    }

    #[test]
    fn a_slow_run_does_not_count() {
        let mut samples = vec![Duration::from_micros(50); EVENTS];
        samples.extend(vec![Duration::from_micros(3); EVENTS]);
        samples.extend(vec![Duration::from_micros(4); EVENTS]);
        assert_eq!(least_median_ns(&mut samples), 3000);
    }

    fn decode(code: &[u8], ip: u64) -> Vec<iced_x86::Instruction> {
        let mut d = iced_x86::Decoder::with_ip(64, code, ip, iced_x86::DecoderOptions::NONE);
        let all: Vec<_> = d.iter().collect();
        assert!(all.iter().all(|i| !i.is_invalid()), "{all:?}");
        all
    }

    #[test]
    fn loops_are_the_instructions_they_claim() {
        use iced_x86::{Mnemonic, Register};
        let s = decode(&SYSCALL_LOOP, CODE);
        assert_eq!(
            s.iter().map(|i| i.mnemonic()).collect::<Vec<_>>(),
            [Mnemonic::Mov, Mnemonic::Syscall, Mnemonic::Jmp]
        );
        assert_eq!((s[0].op0_register(), s[0].immediate(1)), (Register::EAX, 39));
        assert_eq!(s[2].near_branch_target(), CODE, "the jump goes back to the mov");
        let t = decode(&TOUCH_LOOP, CODE + TOUCH_OFFSET);
        assert_eq!(t.iter().map(|i| i.mnemonic()).collect::<Vec<_>>(), [Mnemonic::Mov, Mnemonic::Add, Mnemonic::Jmp]);
        assert_eq!((t[0].memory_base(), t[0].memory_size().size(), t[0].immediate(1)), (Register::RDI, 1, 1));
        assert_eq!((t[1].op0_register(), t[1].immediate(1)), (Register::RDI, 4096));
        assert_eq!(t[2].near_branch_target(), CODE + TOUCH_OFFSET, "the jump goes back to the mov");
        assert!(TOUCH_OFFSET as usize >= SYSCALL_LOOP.len());
    }
}
