//! The kvm platform against real KVM: guest code in ring 3 and the events it
//! produces. Skipped with a message where /dev/kvm is missing, unless
//! CORDON_REQUIRE_KVM=1.

use std::sync::Arc;

use iced_x86::code_asm::*;
use memory::{Frame, MemoryFile};
use platform::kvm::KvmPlatform;
use platform::{Access, AddressSpace, Context, Event, FpState, Platform, Registers};

const CODE: u64 = 0x40_0000;
const DATA: u64 = 0x60_0000;
const STACK_TOP: u64 = 0x80_0000;

fn platform() -> Option<(Arc<MemoryFile>, KvmPlatform)> {
    let mem = Arc::new(MemoryFile::new(1 << 30).unwrap());
    match KvmPlatform::new(mem.clone()) {
        Ok(p) => Some((mem, p)),
        Err(e) if std::env::var("CORDON_REQUIRE_KVM").as_deref() != Ok("1") => {
            eprintln!("skipping: KVM unavailable: {e}");
            None
        }
        Err(e) => panic!("KVM required but unavailable: {e}"),
    }
}

struct Guest {
    mem: Arc<MemoryFile>,
    space: Arc<dyn AddressSpace>,
    ctx: Box<dyn Context>,
    regs: Registers,
}

impl Guest {
    fn new(mem: Arc<MemoryFile>, p: &KvmPlatform, build: impl FnOnce(&mut CodeAssembler)) -> Guest {
        let mut a = CodeAssembler::new(64).unwrap();
        build(&mut a);
        let code = a.assemble(CODE).unwrap();
        assert!(code.len() <= 4096);
        let space = p.new_address_space().unwrap();
        let cf = mem.allocate().unwrap();
        mem.write(cf, 0, &code);
        space.map(CODE, &[cf], Access::READ_EXECUTE).unwrap();
        let sf = mem.allocate().unwrap();
        space.map(STACK_TOP - 4096, &[sf], Access::READ_WRITE).unwrap();
        let ctx = p.new_context().unwrap();
        Guest { mem, space, ctx, regs: Registers::for_entry(CODE, STACK_TOP) }
    }

    fn run(&mut self) -> Event {
        self.ctx.switch(&*self.space, &mut self.regs).unwrap()
    }

    fn map_data(&self, va: u64, access: Access) -> Frame {
        let f = self.mem.allocate().unwrap();
        self.space.map(va, &[f], access).unwrap();
        f
    }
}

#[test]
fn syscalls_round_trip_with_registers() {
    let Some((mem, p)) = platform() else { return };
    let mut g = Guest::new(mem, &p, |a| {
        a.mov(eax, 39).unwrap();
        a.mov(rdi, 0x1111u64).unwrap();
        a.mov(r10, 0x4444u64).unwrap();
        a.syscall().unwrap();
        a.mov(rbx, rax).unwrap();
        a.mov(eax, 60).unwrap();
        a.syscall().unwrap();
    });
    assert_eq!(g.run(), Event::Syscall);
    assert_eq!(g.regs.syscall_number(), 39);
    assert_eq!(g.regs.syscall_args()[0], 0x1111);
    assert_eq!(g.regs.syscall_args()[3], 0x4444);
    assert_eq!(g.regs.rsp, STACK_TOP, "the stack pointer is the app's");
    g.regs.set_return(1234);
    assert_eq!(g.run(), Event::Syscall);
    assert_eq!(g.regs.syscall_number(), 60);
    assert_eq!(g.regs.rbx, 1234, "the return value reached the app");
    assert_eq!(g.regs.rcx, g.regs.rip, "syscall leaves the return address in rcx");
}

#[test]
fn demand_fault_then_resume() {
    let Some((mem, p)) = platform() else { return };
    let mut g = Guest::new(mem, &p, |a| {
        a.mov(rdi, DATA).unwrap();
        a.mov(qword_ptr(rdi), 0x77).unwrap();
        a.mov(rbx, qword_ptr(rdi)).unwrap();
        a.mov(eax, 1).unwrap();
        a.syscall().unwrap();
    });
    let ev = g.run();
    let Event::Fault(f) = ev else { panic!("{ev:?}") };
    assert_eq!(f.addr, DATA);
    assert!(f.access.write && !f.present);
    let page = g.map_data(DATA, Access::READ_WRITE);
    assert_eq!(g.run(), Event::Syscall);
    assert_eq!(g.regs.rbx, 0x77);
    let mut b = [0u8; 1];
    g.mem.read(page, 0, &mut b);
    assert_eq!(b[0], 0x77, "the guest wrote the frame the sentry sees");
}

#[test]
fn downgrades_and_unmaps_take_effect() {
    let Some((mem, p)) = platform() else { return };
    // Store, syscall, store again, syscall, load, syscall.
    let mut g = Guest::new(mem, &p, |a| {
        a.mov(rdi, DATA).unwrap();
        a.mov(byte_ptr(rdi), 1).unwrap();
        a.syscall().unwrap();
        a.mov(byte_ptr(rdi), 2).unwrap();
        a.syscall().unwrap();
        a.mov(al, byte_ptr(rdi)).unwrap();
        a.syscall().unwrap();
    });
    g.map_data(DATA, Access::READ_WRITE);
    assert_eq!(g.run(), Event::Syscall, "the page was writable and is now cached as such");
    g.space.protect(DATA, 4096, Access::READ);
    let ev = g.run();
    assert_eq!(
        ev,
        Event::Fault(platform::Fault { addr: DATA, access: Access { write: true, ..Access::NONE }, present: true })
    );
    g.space.protect(DATA, 4096, Access::READ_WRITE);
    assert_eq!(g.run(), Event::Syscall);
    g.space.unmap(DATA, 4096);
    let Event::Fault(f) = g.run() else { panic!("read of an unmapped page must fault") };
    assert!(!f.present && f.access.read);
}

#[test]
fn replaced_frame_is_seen() {
    let Some((mem, p)) = platform() else { return };
    let mut g = Guest::new(mem.clone(), &p, |a| {
        a.mov(rdi, DATA).unwrap();
        a.mov(rbx, qword_ptr(rdi)).unwrap();
        a.syscall().unwrap();
        a.mov(rbx, qword_ptr(rdi)).unwrap();
        a.syscall().unwrap();
    });
    let a = g.map_data(DATA, Access::READ);
    mem.write(a, 0, &1u64.to_le_bytes());
    assert_eq!(g.run(), Event::Syscall);
    assert_eq!(g.regs.rbx, 1);
    let b = mem.allocate().unwrap();
    mem.write(b, 0, &2u64.to_le_bytes());
    g.space.map(DATA, &[b], Access::READ).unwrap();
    assert_eq!(g.run(), Event::Syscall);
    assert_eq!(g.regs.rbx, 2, "a replaced mapping must not be served from a stale translation");
}

#[test]
fn exceptions_are_reported() {
    let Some((mem, p)) = platform() else { return };
    let mut g = Guest::new(mem, &p, |a| {
        a.ud2().unwrap();
    });
    match g.run() {
        Event::Exception(e) => {
            assert_eq!(e.vector, platform::arch::vector::INVALID_OPCODE);
            assert_eq!(g.regs.rip, CODE);
        }
        other => panic!("{other:?}"),
    }
    let Some((mem, p)) = platform() else { return };
    let mut g = Guest::new(mem, &p, |a| {
        a.int3().unwrap();
    });
    match g.run() {
        Event::Exception(e) => {
            assert_eq!(e.vector, platform::arch::vector::BREAKPOINT);
            assert_eq!(g.regs.rip, CODE + 1, "int3 is a trap: rip is past it");
        }
        other => panic!("{other:?}"),
    }
    let Some((mem, p)) = platform() else { return };
    let mut g = Guest::new(mem, &p, |a| {
        a.xor(edx, edx).unwrap();
        a.xor(ecx, ecx).unwrap();
        a.mov(eax, 1).unwrap();
        a.div(ecx).unwrap();
    });
    match g.run() {
        Event::Exception(e) => assert_eq!(e.vector, platform::arch::vector::DIVIDE_ERROR),
        other => panic!("{other:?}"),
    }
}

#[test]
fn supervisor_area_is_out_of_reach() {
    let Some((mem, p)) = platform() else { return };
    let mut g = Guest::new(mem, &p, |a| {
        a.mov(rdi, 0xffff_ff80_0001_0000u64).unwrap();
        a.mov(rax, qword_ptr(rdi)).unwrap();
    });
    let Event::Fault(f) = g.run() else { panic!("reading the IDT from user mode must fault") };
    assert_eq!(f.addr, 0xffff_ff80_0001_0000);
    assert!(f.present);
}

#[test]
fn vector_instructions_and_fp_state() {
    let Some((mem, p)) = platform() else { return };
    let mut g = Guest::new(mem, &p, |a| {
        a.pcmpeqd(xmm1, xmm1).unwrap();
        a.vpxor(ymm0, ymm0, ymm0).unwrap();
        a.vpcmpeqd(ymm2, ymm2, ymm2).unwrap();
        a.syscall().unwrap();
        a.movq(rbx, xmm3).unwrap();
        a.syscall().unwrap();
    });
    assert_eq!(g.run(), Event::Syscall, "SSE and AVX run in user mode");
    let mut fp = g.ctx.fp_state().unwrap();
    // xmm1 is all ones; xmm registers start at byte 160 of the image.
    assert_eq!(&fp.0[160 + 16..160 + 32], &[0xff; 16]);
    fp.0[160 + 48..160 + 56].copy_from_slice(&0x1234_5678u64.to_le_bytes());
    g.ctx.set_fp_state(&fp).unwrap();
    assert_eq!(g.run(), Event::Syscall);
    assert_eq!(g.regs.rbx, 0x1234_5678, "xmm3 came from the state the sentry set");
    let fresh = FpState::default();
    g.ctx.set_fp_state(&fresh).unwrap();
}

#[test]
fn fs_base_reaches_the_guest() {
    let Some((mem, p)) = platform() else { return };
    let mut g = Guest::new(mem.clone(), &p, |a| {
        a.mov(rbx, qword_ptr(0u64).fs()).unwrap();
        a.syscall().unwrap();
        a.mov(rbx, qword_ptr(0u64).fs()).unwrap();
        a.syscall().unwrap();
    });
    let f = g.map_data(DATA, Access::READ);
    mem.write(f, 0, &7u64.to_le_bytes());
    mem.write(f, 8, &9u64.to_le_bytes());
    g.regs.fs_base = DATA;
    assert_eq!(g.run(), Event::Syscall);
    assert_eq!(g.regs.rbx, 7);
    g.regs.fs_base = DATA + 8;
    assert_eq!(g.run(), Event::Syscall);
    assert_eq!(g.regs.rbx, 9);
}

#[test]
fn interrupt_from_another_thread() {
    let Some((mem, p)) = platform() else { return };
    let mut g = Guest::new(mem, &p, |a| {
        let mut l = a.create_label();
        a.set_label(&mut l).unwrap();
        a.jmp(l).unwrap();
    });
    let int = g.ctx.interrupter();
    let t = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(50));
        int.interrupt();
    });
    assert_eq!(g.run(), Event::Interrupted);
    assert_eq!(g.regs.rip, CODE, "stopped in the app's loop");
    t.join().unwrap();
    // An interrupt delivered while not running is reported by the next switch.
    g.ctx.interrupter().interrupt();
    assert_eq!(g.run(), Event::Interrupted);
}

#[test]
fn contexts_are_recycled() {
    let Some((mem, p)) = platform() else { return };
    for _ in 0..3 {
        let mut g = Guest::new(mem.clone(), &p, |a| {
            a.syscall().unwrap();
        });
        assert_eq!(g.run(), Event::Syscall);
    }
    let s = p.stats();
    assert_eq!(s.vcpus_in_use, 0);
    assert!(s.vcpus <= 2, "vCPUs are reused: {} created", s.vcpus);
}

#[test]
fn instruction_fetch_from_data_faults_as_execute() {
    let Some((mem, p)) = platform() else { return };
    let mut g = Guest::new(mem, &p, |a| {
        a.mov(rdi, DATA).unwrap();
        a.jmp(rdi).unwrap();
    });
    g.map_data(DATA, Access::READ_WRITE);
    let ev = g.run();
    let Event::Fault(f) = ev else { panic!("running a no-execute page must fault: {ev:?}") };
    assert_eq!(f.addr, DATA, "the fault address is the fetch target");
    assert_eq!(f.access, Access { execute: true, ..Access::NONE });
    assert!(f.present);
    assert_eq!(g.regs.rip, DATA, "rip is the instruction that could not be fetched");
}

#[test]
fn guest_reads_the_hosts_tsc() {
    let Some((mem, p)) = platform() else { return };
    let mut g = Guest::new(mem, &p, |a| {
        a.rdtsc().unwrap();
        a.shl(rdx, 32).unwrap();
        a.or(rax, rdx).unwrap();
        a.mov(rbx, rax).unwrap();
        a.syscall().unwrap();
    });
    // SAFETY: rdtsc has no memory effects; every x86_64 CPU has it.
    let before = unsafe { core::arch::x86_64::_rdtsc() };
    assert_eq!(g.run(), Event::Syscall);
    // SAFETY: as above.
    let after = unsafe { core::arch::x86_64::_rdtsc() };
    // The platform learns the guest's TSC on the first entry of a vCPU.
    let Some(khz) = p.guest_tsc_khz() else {
        eprintln!("skipping: the host's clock source is not the TSC, so the guest's is not trusted");
        return;
    };
    assert!(khz > 100_000, "{khz} kHz");
    assert!((before..=after).contains(&g.regs.rbx), "guest TSC {} outside the host's {before}..={after}", g.regs.rbx);
}
