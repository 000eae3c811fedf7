//! Memory policies on the sandbox's single memory node: set_mempolicy,
//! get_mempolicy and mbind accept the policies Linux has with node 0 and
//! refuse nodes the sandbox lacks as Linux refuses nodes a machine lacks
//! (EINVAL); allocation is unchanged, as on a one-node machine.

use super::{SysError, SysResult};
use crate::auth::cap;
use crate::errno::Errno;
use crate::task::{MemPolicy, Task};

const MPOL_DEFAULT: u32 = 0;
const MPOL_PREFERRED: u32 = 1;
const MPOL_BIND: u32 = 2;
const MPOL_INTERLEAVE: u32 = 3;
const MPOL_LOCAL: u32 = 4;
const MPOL_PREFERRED_MANY: u32 = 5;
const MPOL_WEIGHTED_INTERLEAVE: u32 = 6;
const MPOL_MAX: u32 = 7;

const MPOL_F_STATIC_NODES: u32 = 1 << 15;
const MPOL_F_RELATIVE_NODES: u32 = 1 << 14;
const MPOL_F_NUMA_BALANCING: u32 = 1 << 13;
const MPOL_MODE_FLAGS: u32 = MPOL_F_STATIC_NODES | MPOL_F_RELATIVE_NODES | MPOL_F_NUMA_BALANCING;

const MPOL_F_NODE: u64 = 1 << 0;
const MPOL_F_ADDR: u64 = 1 << 1;
const MPOL_F_MEMS_ALLOWED: u64 = 1 << 2;

const MPOL_MF_STRICT: u64 = 1 << 0;
const MPOL_MF_MOVE_ALL: u64 = 1 << 2;
const MPOL_MF_VALID: u64 = 0b111;

/// Nodes a node mask may name (MAX_NUMNODES of a distribution kernel);
/// the sandbox has node 0 only.
const MAX_NUMNODES: u64 = 1024;
const PAGE: u64 = 4096;

/// Splits a mode argument into the mode and its flags
/// (sanitize_mpol_flags()).
fn mode_and_flags(arg: u64) -> Result<(u32, u32), SysError> {
    let arg = arg as u32;
    let (flags, mode) = (arg & MPOL_MODE_FLAGS, arg & !MPOL_MODE_FLAGS);
    if mode >= MPOL_MAX
        || (flags & MPOL_F_STATIC_NODES != 0 && flags & MPOL_F_RELATIVE_NODES != 0)
        || (flags & MPOL_F_NUMA_BALANCING != 0 && mode != MPOL_BIND && mode != MPOL_PREFERRED_MANY)
    {
        return Err(Errno::EINVAL.into());
    }
    Ok((mode, flags))
}

/// Reads a node mask of `maxnode` bits (get_nodes()): bits past the nodes
/// a kernel may have must be clear. Returns its first 64 nodes and
/// whether any node is in it.
fn read_nodes(task: &Task, addr: u64, maxnode: u64) -> Result<(u64, bool), SysError> {
    let bits = maxnode.saturating_sub(1);
    if bits == 0 || addr == 0 {
        return Ok((0, false));
    }
    if bits > PAGE * 8 {
        return Err(Errno::EINVAL.into());
    }
    let mut words = vec![0u64; bits.div_ceil(64) as usize];
    let bytes: &mut [u8] = zerocopy::IntoBytes::as_mut_bytes(words.as_mut_slice());
    task.mm.copy_in(addr, bytes)?;
    if !bits.is_multiple_of(64) {
        let last = words.len() - 1;
        words[last] &= (1u64 << (bits % 64)) - 1;
    }
    for (i, w) in words.iter().enumerate() {
        let first_bit = i as u64 * 64;
        let past_max = if first_bit >= MAX_NUMNODES { *w } else { 0 };
        if past_max != 0 {
            return Err(Errno::EINVAL.into());
        }
    }
    Ok((words[0], words.iter().any(|w| *w != 0)))
}

/// The policy `mode` with `flags` over the nodes read (mpol_new() and
/// mpol_set_nodemask()): only node 0 exists, so a mask that needs nodes
/// and holds none of the sandbox's is refused.
fn new_policy(mode: u32, flags: u32, first: u64, any: bool) -> Result<MemPolicy, SysError> {
    let node0 = first & 1 != 0;
    let relative = flags & MPOL_F_RELATIVE_NODES != 0;
    let fixed = flags & (MPOL_F_STATIC_NODES | MPOL_F_RELATIVE_NODES) != 0;
    let mode = match mode {
        MPOL_DEFAULT if any => return Err(Errno::EINVAL.into()),
        MPOL_DEFAULT => return Ok(MemPolicy::default()),
        MPOL_PREFERRED if !any && fixed => return Err(Errno::EINVAL.into()),
        MPOL_PREFERRED if !any => MPOL_LOCAL,
        MPOL_LOCAL if any || fixed => return Err(Errno::EINVAL.into()),
        MPOL_LOCAL => MPOL_LOCAL,
        _ if !any => return Err(Errno::EINVAL.into()),
        m => m,
    };
    // Relative masks fold onto the nodes there are: any node is node 0.
    let has_node0 = node0 || (relative && any);
    if mode != MPOL_LOCAL && !has_node0 {
        return Err(Errno::EINVAL.into());
    }
    Ok(MemPolicy { mode, flags, user_mask: first })
}

pub fn set_mempolicy(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (mode, flags) = mode_and_flags(a[0])?;
    let (first, any) = read_nodes(task, a[1], a[2])?;
    let policy = new_policy(mode, flags, first, any)?;
    *task.shared.mempolicy.lock().unwrap() = policy;
    Ok(0)
}

/// True if every page of `start..end` is mapped.
fn all_mapped(task: &Task, start: u64, end: u64) -> bool {
    let mut at = start;
    for v in task.mm.vmas() {
        if v.end <= at {
            continue;
        }
        if v.start > at {
            return false;
        }
        at = v.end;
        if at >= end {
            return true;
        }
    }
    at >= end
}

pub fn mbind(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (start, len, flags) = (a[0], a[1], a[5]);
    let (mode, mode_flags) = mode_and_flags(a[2])?;
    let (first, any) = read_nodes(task, a[3], a[4])?;
    if flags & !MPOL_MF_VALID != 0 {
        return Err(Errno::EINVAL.into());
    }
    if flags & MPOL_MF_MOVE_ALL != 0 && !task.tg.creds().has(cap::SYS_NICE) {
        return Err(Errno::EPERM.into());
    }
    if !start.is_multiple_of(PAGE) {
        return Err(Errno::EINVAL.into());
    }
    let _strict = mode != MPOL_DEFAULT && flags & MPOL_MF_STRICT != 0;
    let end = start.checked_add(len.next_multiple_of(PAGE)).ok_or(Errno::EINVAL)?;
    if end == start {
        return Ok(0);
    }
    new_policy(mode, mode_flags, first, any)?;
    // Every page is on node 0 already, so nothing moves and MPOL_MF_STRICT
    // finds nothing amiss; a hole in the range is EFAULT.
    if !all_mapped(task, start, end) {
        return Err(Errno::EFAULT.into());
    }
    Ok(0)
}

pub fn get_mempolicy(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (policy_addr, nmask, maxnode, addr, flags) = (a[0], a[1], a[2], a[3], a[4]);
    if flags & !(MPOL_F_NODE | MPOL_F_ADDR | MPOL_F_MEMS_ALLOWED) != 0 {
        return Err(Errno::EINVAL.into());
    }
    // nr_node_ids is 1.
    if nmask != 0 && maxnode < 1 {
        return Err(Errno::EINVAL.into());
    }
    let own = *task.shared.mempolicy.lock().unwrap();
    let (value, reported_mask) = if flags & MPOL_F_MEMS_ALLOWED != 0 {
        if flags & (MPOL_F_NODE | MPOL_F_ADDR) != 0 {
            return Err(Errno::EINVAL.into());
        }
        (0, 1)
    } else {
        // A mapping's own policy (mbind's) is not kept: a mapping follows
        // the default one.
        let pol = if flags & MPOL_F_ADDR != 0 {
            if !task.mm.vmas().iter().any(|v| v.start <= addr && addr < v.end) {
                return Err(Errno::EFAULT.into());
            }
            MemPolicy::default()
        } else if addr != 0 {
            return Err(Errno::EINVAL.into());
        } else {
            own
        };
        let value = if flags & MPOL_F_NODE != 0 {
            if flags & MPOL_F_ADDR != 0 {
                // The node of the page at addr, touched in as Linux does.
                let mut b = [0u8];
                task.mm.copy_in(addr, &mut b)?;
                0
            } else if matches!(own.mode, MPOL_INTERLEAVE | MPOL_WEIGHTED_INTERLEAVE) {
                0
            } else {
                return Err(Errno::EINVAL.into());
            }
        } else {
            pol.mode | pol.flags
        };
        let mask = match pol.mode {
            _ if pol.flags & (MPOL_F_STATIC_NODES | MPOL_F_RELATIVE_NODES) != 0 => pol.user_mask,
            MPOL_DEFAULT | MPOL_LOCAL => 0,
            _ => 1,
        };
        (value, mask)
    };
    if policy_addr != 0 {
        task.mm.write_pod(policy_addr, &(value as i32))?;
    }
    if nmask != 0 {
        // copy_nodes_to_user(): the bits asked for, in whole longs.
        let copy = (maxnode - 1).next_multiple_of(64) / 8;
        if copy > PAGE {
            return Err(Errno::EINVAL.into());
        }
        if copy > 0 {
            let mut bytes = vec![0u8; copy as usize];
            let first = reported_mask.to_le_bytes();
            let n = bytes.len().min(8);
            bytes[..n].copy_from_slice(&first[..n]);
            task.mm.copy_out(nmask, &bytes)?;
        }
    }
    Ok(0)
}
