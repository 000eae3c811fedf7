//! ptrace(2): the requests a tracer makes of its tracees (see
//! `task::ptrace` for the relation and its stops).

use std::sync::Arc;

use linux_raw_sys::general as g;

use super::{Args, SysError, SysResult};
use crate::arch::ptrace::{self as regs, BadRegister};
use crate::errno::Errno;
use crate::signal::{SigInfo, SigSet};
use crate::task::ptrace::{PtraceState, Resume, StepMode, SyscallStop, event, options};
use crate::task::{Task, TaskShared};

const TRACEME: u64 = 0;
const PEEKTEXT: u64 = 1;
const PEEKDATA: u64 = 2;
const PEEKUSER: u64 = 3;
const POKETEXT: u64 = 4;
const POKEDATA: u64 = 5;
const POKEUSER: u64 = 6;
const CONT: u64 = 7;
const KILL: u64 = 8;
const SINGLESTEP: u64 = 9;
const GETREGS: u64 = 12;
const SETREGS: u64 = 13;
const GETFPREGS: u64 = 14;
const SETFPREGS: u64 = 15;
const ATTACH: u64 = 16;
const DETACH: u64 = 17;
const SYSCALL: u64 = 24;
const ARCH_PRCTL: u64 = 30;
const SETOPTIONS: u64 = 0x4200;
const GETEVENTMSG: u64 = 0x4201;
const GETSIGINFO: u64 = 0x4202;
const SETSIGINFO: u64 = 0x4203;
const GETREGSET: u64 = 0x4204;
const SETREGSET: u64 = 0x4205;
const SEIZE: u64 = 0x4206;
const INTERRUPT: u64 = 0x4207;
const LISTEN: u64 = 0x4208;
const GETSIGMASK: u64 = 0x420a;
const SETSIGMASK: u64 = 0x420b;
const GET_SYSCALL_INFO: u64 = 0x420e;

/// Regset note types.
const NT_PRSTATUS: u64 = 1;
const NT_PRFPREG: u64 = 2;
const NT_X86_XSTATE: u64 = 0x202;

/// PTRACE_SYSCALL_INFO_* ops.
const INFO_NONE: u8 = 0;
const INFO_ENTRY: u8 = 1;
const INFO_EXIT: u8 = 2;
/// AUDIT_ARCH_X86_64.
const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;

pub fn ptrace(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (request, pid, addr, data) = (a[0], a.int(1), a[2], a[3]);
    match request {
        TRACEME => return traceme(task),
        ATTACH | SEIZE => return attach(task, pid, request == SEIZE, addr, data),
        _ => {}
    }
    let t = tracee(task, pid)?;
    match request {
        KILL => {
            crate::task::send_to_group(&task.kernel, &t.tg, SigInfo::kernel(g::SIGKILL));
            return Ok(0);
        }
        INTERRUPT => {
            if !t.ptrace.lock().unwrap().seized {
                return Err(Errno::EIO.into());
            }
            if !t.ptrace_stopped() {
                t.trap_pending.store(true, std::sync::atomic::Ordering::Release);
                t.signal_wake_up();
            }
            return Ok(0);
        }
        _ => {}
    }
    if !t.ptrace_stopped() {
        return Err(Errno::ESRCH.into());
    }
    match request {
        CONT | SYSCALL | SINGLESTEP => {
            let sig = signal_arg(data)?;
            let mode = match request {
                CONT => StepMode::Continue,
                SYSCALL => StepMode::Syscall,
                _ => StepMode::SingleStep,
            };
            resume(&t, Resume::Run { sig, mode })
        }
        LISTEN => {
            let group_stop = {
                let p = t.ptrace.lock().unwrap();
                let sig = p.stop.map(|s| (s >> 8) & 0xff).unwrap_or(0) as u32;
                p.seized && p.stop.is_some_and(|s| (s >> 16) as u32 == event::STOP) && sig != g::SIGTRAP
            };
            if !group_stop {
                return Err(Errno::EIO.into());
            }
            resume(&t, Resume::Listen)
        }
        DETACH => {
            let sig = signal_arg(data)?;
            t.detach(sig);
            Ok(0)
        }
        PEEKTEXT | PEEKDATA => {
            let mut word = [0u8; 8];
            tracee_mm(&t)?.copy_in(addr, &mut word).map_err(|_| Errno::EIO)?;
            task.mm.write(data, &word)?;
            Ok(0)
        }
        POKETEXT | POKEDATA => {
            tracee_mm(&t)?.poke(addr, &data.to_le_bytes()).map_err(|_| Errno::EIO)?;
            Ok(0)
        }
        PEEKUSER => {
            let v = peek_user(&t.ptrace.lock().unwrap(), addr)?;
            task.mm.write(data, &v)?;
            Ok(0)
        }
        POKEUSER => poke_user(&mut t.ptrace.lock().unwrap(), addr, data),
        GETREGS => {
            let words = {
                let p = t.ptrace.lock().unwrap();
                regs::user_regs(&p.regs, p.orig_rax)
            };
            task.mm.write(data, &words)?;
            Ok(0)
        }
        SETREGS => {
            let words: [u64; regs::USER_REGS_WORDS] = task.mm.read(data)?;
            set_regs(&mut t.ptrace.lock().unwrap(), &words)
        }
        GETFPREGS => {
            let b = regs::fpregs(&fp_of(&t)?);
            task.mm.copy_out(data, &b)?;
            Ok(0)
        }
        SETFPREGS => {
            let mut b = [0u8; regs::FPREGS_SIZE];
            task.mm.copy_in(data, &mut b)?;
            with_fp(&t, |fp| regs::set_fpregs(fp, &b))
        }
        GETREGSET => get_regset(task, &t, addr, data),
        SETREGSET => set_regset(task, &t, addr, data),
        ARCH_PRCTL => arch_prctl(task, &t, data, addr),
        SETOPTIONS => {
            let opts = data as u32;
            if data & !(options::ALL as u64) != 0 {
                return Err(Errno::EINVAL.into());
            }
            t.ptrace.lock().unwrap().options = opts;
            Ok(0)
        }
        GETEVENTMSG => {
            let msg = t.ptrace.lock().unwrap().event_msg;
            task.mm.write(data, &msg)?;
            Ok(0)
        }
        GETSIGINFO => {
            let info = t.ptrace.lock().unwrap().siginfo.ok_or(Errno::EINVAL)?;
            task.mm.copy_out(data, &info.to_bytes())?;
            Ok(0)
        }
        SETSIGINFO => {
            let mut b = [0u8; 128];
            task.mm.copy_in(data, &mut b)?;
            let signo = u32::from_le_bytes(b[0..4].try_into().expect("4 bytes"));
            let mut p = t.ptrace.lock().unwrap();
            if p.siginfo.is_none() {
                return Err(Errno::EINVAL.into());
            }
            p.siginfo = Some(SigInfo::from_bytes(signo, &b));
            Ok(0)
        }
        GETSIGMASK => {
            if addr != 8 {
                return Err(Errno::EINVAL.into());
            }
            let mask = t.sig.lock().unwrap().mask.0;
            task.mm.write(data, &mask)?;
            Ok(0)
        }
        SETSIGMASK => {
            if addr != 8 {
                return Err(Errno::EINVAL.into());
            }
            let mask: u64 = task.mm.read(data)?;
            t.set_mask(SigSet(mask));
            Ok(0)
        }
        GET_SYSCALL_INFO => syscall_info(task, &t, addr, data),
        // PTRACE_SYSEMU and the rest: not requests this kernel serves.
        _ => Err(Errno::EIO.into()),
    }
}

/// The tracee `pid` of the calling process: ESRCH for any other task.
fn tracee(task: &Task, pid: i32) -> Result<Arc<TaskShared>, SysError> {
    let t = task.kernel.procs.lock().unwrap().thread(pid).ok_or(Errno::ESRCH)?;
    match t.tracer() {
        Some(tracer) if Arc::ptr_eq(&tracer, &task.tg) => Ok(t),
        _ => Err(Errno::ESRCH.into()),
    }
}

fn tracee_mm(t: &TaskShared) -> Result<Arc<crate::mm::MemoryManager>, SysError> {
    Ok(t.ptrace.lock().unwrap().mm.clone().ok_or(Errno::ESRCH)?)
}

/// A signal number given to a resume: 0 or a valid signal, else EIO.
fn signal_arg(data: u64) -> Result<u32, SysError> {
    if data > 64 { Err(Errno::EIO.into()) } else { Ok(data as u32) }
}

fn resume(t: &TaskShared, r: Resume) -> SysResult {
    if t.resume(r) { Ok(0) } else { Err(Errno::ESRCH.into()) }
}

/// PTRACE_TRACEME: the caller's parent becomes its tracer.
fn traceme(task: &mut Task) -> SysResult {
    if task.shared.is_traced() {
        return Err(Errno::EPERM.into());
    }
    let parent = {
        let tree = task.kernel.procs.lock().unwrap();
        tree.parent_of(task.tg.tgid).and_then(|p| tree.group(p))
    }
    .ok_or(Errno::EPERM)?;
    let parent_thread = task.tg.state.lock().unwrap().parent_thread;
    let tracer_tid = if parent_thread != 0 { parent_thread } else { parent.tgid };
    task.shared.attach(&parent, tracer_tid, false, 0);
    task.mm.stop_rewriting();
    Ok(0)
}

/// PTRACE_ATTACH (a SIGSTOP sent) and PTRACE_SEIZE (`data` the options).
fn attach(task: &mut Task, pid: i32, seize: bool, addr: u64, data: u64) -> SysResult {
    if seize && (addr != 0 || data & !(options::ALL as u64) != 0) {
        return Err(Errno::EIO.into());
    }
    let t = task.kernel.procs.lock().unwrap().thread(pid).ok_or(Errno::ESRCH)?;
    if Arc::ptr_eq(&t.tg, &task.tg) || t.is_killed() {
        return Err(Errno::EPERM.into());
    }
    super::ipc::may_access(task, &t.tg)?;
    if t.is_traced() {
        return Err(Errno::EPERM.into());
    }
    t.attach(&task.tg, task.tid(), seize, if seize { data as u32 } else { 0 });
    let mm = t.tg.view.lock().unwrap().as_ref().map(|v| v.mm.clone());
    if let Some(mm) = mm {
        mm.stop_rewriting();
    }
    if !seize {
        let info = SigInfo::user(g::SIGSTOP, crate::signal::code::SI_USER, task.tg.tgid, task.tg.creds().uid.real);
        crate::task::send_to_group(&task.kernel, &t.tg, info);
    }
    // A task stopped with its group, or running application code whose
    // calls the platform answers alone, comes back to see its tracer.
    t.notify();
    t.tg.thread_events.notify_all();
    Ok(0)
}

fn peek_user(p: &PtraceState, off: u64) -> Result<u64, SysError> {
    let off = off as usize;
    if !off.is_multiple_of(8) || off >= regs::USER_SIZE {
        return Err(Errno::EIO.into());
    }
    if off < regs::USER_REGS_SIZE {
        return Ok(regs::user_regs(&p.regs, p.orig_rax)[off / 8]);
    }
    if off >= regs::USER_DEBUGREG {
        return Ok(p.debugregs[(off - regs::USER_DEBUGREG) / 8]);
    }
    Ok(0)
}

fn poke_user(p: &mut PtraceState, off: u64, v: u64) -> SysResult {
    let off = off as usize;
    if !off.is_multiple_of(8) || off >= regs::USER_SIZE {
        return Err(Errno::EIO.into());
    }
    if off < regs::USER_REGS_SIZE {
        let PtraceState { regs: r, orig_rax, .. } = p;
        return regs::set_user_reg(r, orig_rax, off / 8, v).map(|_| 0).map_err(bad_register);
    }
    if off >= regs::USER_DEBUGREG {
        let i = (off - regs::USER_DEBUGREG) / 8;
        // Hardware breakpoints and watchpoints are not armed: enabling one
        // in DR7 is refused rather than silently ignored.
        if i == 7 && v & 0xff != 0 {
            return Err(Errno::EINVAL.into());
        }
        if i == 4 || i == 5 {
            return Err(Errno::EIO.into());
        }
        p.debugregs[i] = v;
        return Ok(0);
    }
    Err(Errno::EIO.into())
}

fn bad_register(e: BadRegister) -> SysError {
    match e {
        BadRegister::Selector => Errno::EIO.into(),
        BadRegister::Base => Errno::EPERM.into(),
    }
}

fn set_regs(p: &mut PtraceState, words: &[u64; regs::USER_REGS_WORDS]) -> SysResult {
    let PtraceState { regs: r, orig_rax, .. } = p;
    regs::set_user_regs(r, orig_rax, words).map(|_| 0).map_err(bad_register)
}

fn fp_of(t: &TaskShared) -> Result<platform::FpState, SysError> {
    Ok(t.ptrace.lock().unwrap().fp.clone().ok_or(Errno::EIO)?)
}

fn with_fp(t: &TaskShared, f: impl FnOnce(&mut platform::FpState)) -> SysResult {
    let mut p = t.ptrace.lock().unwrap();
    let fp = p.fp.as_mut().ok_or(Errno::EIO)?;
    f(fp);
    p.fp_changed = true;
    Ok(0)
}

/// The iovec of a regset request.
fn read_iov(task: &Task, iov: u64) -> Result<(u64, usize), SysError> {
    let base: u64 = task.mm.read(iov)?;
    let len: u64 = task.mm.read(iov + 8)?;
    Ok((base, len as usize))
}

fn get_regset(task: &Task, t: &TaskShared, note: u64, iov: u64) -> SysResult {
    let (base, len) = read_iov(task, iov)?;
    let bytes: Vec<u8> = match note {
        NT_PRSTATUS => {
            let p = t.ptrace.lock().unwrap();
            regs::user_regs(&p.regs, p.orig_rax).iter().flat_map(|w| w.to_le_bytes()).collect()
        }
        NT_PRFPREG => regs::fpregs(&fp_of(t)?).to_vec(),
        NT_X86_XSTATE => regs::xstate(&fp_of(t)?),
        _ => return Err(Errno::EINVAL.into()),
    };
    let n = len.min(bytes.len());
    task.mm.copy_out(base, &bytes[..n])?;
    task.mm.write(iov + 8, &(n as u64))?;
    Ok(0)
}

fn set_regset(task: &Task, t: &TaskShared, note: u64, iov: u64) -> SysResult {
    let (base, len) = read_iov(task, iov)?;
    match note {
        NT_PRSTATUS => {
            // A short image changes the words it covers.
            let n = len.min(regs::USER_REGS_SIZE) / 8;
            let mut b = vec![0u8; n * 8];
            task.mm.copy_in(base, &mut b)?;
            let mut p = t.ptrace.lock().unwrap();
            let mut words = regs::user_regs(&p.regs, p.orig_rax);
            for (i, w) in b.chunks_exact(8).enumerate() {
                words[i] = u64::from_le_bytes(w.try_into().expect("8 bytes"));
            }
            set_regs(&mut p, &words)?;
        }
        NT_PRFPREG => {
            let mut b = vec![0u8; len.min(regs::FPREGS_SIZE)];
            task.mm.copy_in(base, &mut b)?;
            with_fp(t, |fp| regs::set_fpregs(fp, &b))?;
        }
        NT_X86_XSTATE => {
            let mut b = vec![0u8; len.min(platform::FpState::SIZE)];
            task.mm.copy_in(base, &mut b)?;
            with_fp(t, |fp| regs::set_xstate(fp, &b))?;
        }
        _ => return Err(Errno::EINVAL.into()),
    }
    task.mm.write(iov + 8, &(len.min(regs_len(note)) as u64))?;
    Ok(0)
}

fn regs_len(note: u64) -> usize {
    match note {
        NT_PRSTATUS => regs::USER_REGS_SIZE,
        NT_PRFPREG => regs::FPREGS_SIZE,
        _ => crate::arch::signal::xsave_layout().1,
    }
}

/// PTRACE_ARCH_PRCTL: arch_prctl's segment bases, on the tracee.
fn arch_prctl(task: &Task, t: &TaskShared, code: u64, addr: u64) -> SysResult {
    const ARCH_SET_GS: u64 = 0x1001;
    const ARCH_SET_FS: u64 = 0x1002;
    const ARCH_GET_FS: u64 = 0x1003;
    const ARCH_GET_GS: u64 = 0x1004;
    let mut p = t.ptrace.lock().unwrap();
    let canonical = addr < (1 << 47);
    match code {
        ARCH_SET_FS if canonical => p.regs.fs_base = addr,
        ARCH_SET_GS if canonical => p.regs.gs_base = addr,
        ARCH_SET_FS | ARCH_SET_GS => return Err(Errno::EPERM.into()),
        ARCH_GET_FS => task.mm.write(addr, &p.regs.fs_base)?,
        ARCH_GET_GS => task.mm.write(addr, &p.regs.gs_base)?,
        _ => return Err(Errno::EINVAL.into()),
    }
    Ok(0)
}

/// PTRACE_GET_SYSCALL_INFO: what the stop is, with the call's number and
/// arguments at entry or its result at exit. Returns the size of the
/// whole structure for the stop; copies at most `size` bytes of it.
fn syscall_info(task: &Task, t: &TaskShared, size: u64, addr: u64) -> SysResult {
    let (stop, r) = {
        let p = t.ptrace.lock().unwrap();
        (p.syscall, p.regs)
    };
    let mut b = Vec::with_capacity(88);
    let op = match stop {
        SyscallStop::None => INFO_NONE,
        SyscallStop::Entry { .. } => INFO_ENTRY,
        SyscallStop::Exit { .. } => INFO_EXIT,
    };
    b.extend_from_slice(&[op, 0, 0, 0]);
    b.extend_from_slice(&AUDIT_ARCH_X86_64.to_le_bytes());
    b.extend_from_slice(&r.rip.to_le_bytes());
    b.extend_from_slice(&r.rsp.to_le_bytes());
    match stop {
        SyscallStop::None => {}
        SyscallStop::Entry { nr, args } => {
            b.extend_from_slice(&nr.to_le_bytes());
            for a in args {
                b.extend_from_slice(&a.to_le_bytes());
            }
        }
        SyscallStop::Exit { rval } => {
            b.extend_from_slice(&rval.to_le_bytes());
            b.push(u8::from((-4095..0).contains(&rval)));
        }
    }
    let n = (size as usize).min(b.len());
    task.mm.copy_out(addr, &b[..n])?;
    Ok(b.len() as u64)
}
