//! membarrier(2): after the call, every other thread of the sandbox that
//! was running application code has passed a full memory barrier.
//!
//! Application threads run on host CPUs the sentry does not own: vCPU
//! threads in guest mode on kvm, stub threads in user mode on trap. Both
//! are ordered by the host's MEMBARRIER_CMD_GLOBAL, which returns only
//! once every host CPU has gone through the kernel (a tick, an interrupt
//! or a switch: on kvm a VM exit, on trap a kernel entry, each
//! serializing), so it serves every command here, the private ones
//! included, on both platforms. Where the host offers no such barrier
//! (nohz_full kernels refuse it) the sandbox offers none either.

use std::sync::OnceLock;
use std::sync::atomic::Ordering;

use super::SysResult;
use crate::errno::Errno;
use crate::task::Task;

const MEMBARRIER_CMD_QUERY: u32 = 0;
const MEMBARRIER_CMD_GLOBAL: u32 = 1 << 0;
const MEMBARRIER_CMD_GLOBAL_EXPEDITED: u32 = 1 << 1;
const MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED: u32 = 1 << 2;
const MEMBARRIER_CMD_PRIVATE_EXPEDITED: u32 = 1 << 3;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: u32 = 1 << 4;
const MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE: u32 = 1 << 5;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE: u32 = 1 << 6;
const MEMBARRIER_CMD_GET_REGISTRATIONS: u32 = 1 << 9;

/// What the sandbox offers. The restartable-sequence commands are
/// missing, as on a kernel without rseq (the sentry has none).
const OFFERED: u32 = MEMBARRIER_CMD_GLOBAL
    | MEMBARRIER_CMD_GLOBAL_EXPEDITED
    | MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED
    | MEMBARRIER_CMD_PRIVATE_EXPEDITED
    | MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED
    | MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE
    | MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE
    | MEMBARRIER_CMD_GET_REGISTRATIONS;

/// The host's membarrier(cmd, 0).
fn host_membarrier(cmd: u32) -> i64 {
    // SAFETY: membarrier takes no pointers; QUERY and GLOBAL only read or
    // wait.
    unsafe { libc::syscall(libc::SYS_membarrier, cmd as libc::c_int, 0 as libc::c_uint) }
}

/// The commands the sandbox offers on this host: none unless the host has
/// MEMBARRIER_CMD_GLOBAL.
fn offered() -> u32 {
    static HOST: OnceLock<i64> = OnceLock::new();
    let host = *HOST.get_or_init(|| host_membarrier(MEMBARRIER_CMD_QUERY));
    if host >= 0 && host as u32 & MEMBARRIER_CMD_GLOBAL != 0 { OFFERED } else { 0 }
}

/// Waits until every host CPU has passed a full barrier.
fn barrier() -> SysResult {
    if host_membarrier(MEMBARRIER_CMD_GLOBAL) < 0 {
        // Not expected once QUERY said yes; never a false success.
        return Err(Errno::EINVAL.into());
    }
    Ok(0)
}

pub fn membarrier(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (cmd, flags) = (a[0] as u32, a[1] as u32);
    if flags != 0 {
        // Only the rseq command, which the sandbox lacks, takes a flag.
        return Err(Errno::EINVAL.into());
    }
    if cmd == MEMBARRIER_CMD_QUERY {
        return Ok(u64::from(offered()));
    }
    if cmd & offered() == 0 || !cmd.is_power_of_two() {
        return Err(Errno::EINVAL.into());
    }
    let registrations = &task.tg.membarrier_registrations;
    let registered = |r: u32| registrations.load(Ordering::Acquire) & r != 0;
    match cmd {
        MEMBARRIER_CMD_GLOBAL | MEMBARRIER_CMD_GLOBAL_EXPEDITED => barrier(),
        MEMBARRIER_CMD_PRIVATE_EXPEDITED | MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE => {
            // The registration the command needs: its own, one bit up.
            if !registered(cmd << 1) {
                return Err(Errno::EPERM.into());
            }
            barrier()
        }
        MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED
        | MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED
        | MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE => {
            registrations.fetch_or(cmd, Ordering::AcqRel);
            Ok(0)
        }
        MEMBARRIER_CMD_GET_REGISTRATIONS => Ok(u64::from(registrations.load(Ordering::Acquire))),
        _ => Err(Errno::EINVAL.into()),
    }
}
