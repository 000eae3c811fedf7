//! Scheduling attributes and I/O priorities: sched_setattr/sched_getattr
//! and ioprio_set/ioprio_get. The sentry keeps what a thread asks for and
//! reports it back with Linux's checks and permissions (a container's root
//! lacks CAP_SYS_NICE, so real-time and deadline policies and a lower nice
//! value are refused by default); the host threads that run the sandbox
//! are not rescheduled by them.

use std::sync::Arc;

use linux_raw_sys::general as g;

use super::{SysError, SysResult};
use crate::auth::{Creds, cap};
use crate::errno::Errno;
use crate::task::{SchedAttrs, Task, TaskShared};

const SCHED_NORMAL: u32 = 0;
const SCHED_FIFO: u32 = 1;
const SCHED_RR: u32 = 2;
const SCHED_BATCH: u32 = 3;
const SCHED_IDLE: u32 = 5;
const SCHED_DEADLINE: u32 = 6;

const SCHED_FLAG_RESET_ON_FORK: u64 = 0x01;
const SCHED_FLAG_KEEP_POLICY: u64 = 0x08;
const SCHED_FLAG_KEEP_PARAMS: u64 = 0x10;
const SCHED_FLAG_UTIL_CLAMP: u64 = 0x20 | 0x40;
/// Every flag Linux knows (SCHED_FLAG_ALL).
const SCHED_FLAG_ALL: u64 = 0x7f;

/// struct sched_attr without (VER0) and with (VER1) the utilisation clamps.
const SCHED_ATTR_SIZE_VER0: usize = 48;
const SCHED_ATTR_SIZE_VER1: usize = 56;
const PAGE_SIZE: usize = 4096;
/// SCHED_DEADLINE's least runtime (1 << DL_SCALE ns).
const DL_MIN_RUNTIME: u64 = 1 << 10;
/// The utilisation scale (SCHED_CAPACITY_SCALE).
const UTIL_MAX: u32 = 1024;

/// struct sched_attr.
#[derive(Clone, Copy, Default)]
struct SchedAttr {
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    runtime: u64,
    deadline: u64,
    period: u64,
    util_min: u32,
    util_max: u32,
}

impl SchedAttr {
    fn from_bytes(b: &[u8; SCHED_ATTR_SIZE_VER1]) -> SchedAttr {
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
        SchedAttr {
            policy: u32_at(4),
            flags: u64_at(8),
            nice: u32_at(16) as i32,
            priority: u32_at(20),
            runtime: u64_at(24),
            deadline: u64_at(32),
            period: u64_at(40),
            util_min: u32_at(48),
            util_max: u32_at(52),
        }
    }

    fn to_bytes(self, size: u32) -> [u8; SCHED_ATTR_SIZE_VER1] {
        let mut b = [0u8; SCHED_ATTR_SIZE_VER1];
        b[0..4].copy_from_slice(&size.to_le_bytes());
        b[4..8].copy_from_slice(&self.policy.to_le_bytes());
        b[8..16].copy_from_slice(&self.flags.to_le_bytes());
        b[16..20].copy_from_slice(&self.nice.to_le_bytes());
        b[20..24].copy_from_slice(&self.priority.to_le_bytes());
        b[24..32].copy_from_slice(&self.runtime.to_le_bytes());
        b[32..40].copy_from_slice(&self.deadline.to_le_bytes());
        b[40..48].copy_from_slice(&self.period.to_le_bytes());
        b[48..52].copy_from_slice(&self.util_min.to_le_bytes());
        b[52..56].copy_from_slice(&self.util_max.to_le_bytes());
        b
    }

    /// A thread's attributes as sched_getattr reports them.
    fn of(s: &SchedAttrs) -> SchedAttr {
        SchedAttr {
            policy: s.policy,
            flags: if s.reset_on_fork { SCHED_FLAG_RESET_ON_FORK } else { 0 },
            nice: if is_fair(s.policy) { s.nice } else { 0 },
            priority: s.priority,
            runtime: s.runtime,
            deadline: s.deadline,
            period: s.period,
            util_min: 0,
            util_max: UTIL_MAX,
        }
    }
}

fn is_rt(policy: u32) -> bool {
    policy == SCHED_FIFO || policy == SCHED_RR
}

fn is_fair(policy: u32) -> bool {
    matches!(policy, SCHED_NORMAL | SCHED_BATCH | SCHED_IDLE)
}

/// The thread `pid` names (0: the caller).
fn target(task: &Task, pid: i32) -> Result<Arc<TaskShared>, SysError> {
    if pid == 0 {
        return Ok(task.shared.clone());
    }
    Ok(task.kernel.procs.lock().unwrap().thread(pid).ok_or(Errno::ESRCH)?)
}

/// Linux's check_same_owner(): the caller's effective uid is the target's
/// effective or real one.
fn same_owner(me: &Creds, them: &Creds) -> bool {
    me.uid.effective == them.uid.effective || me.uid.effective == them.uid.real
}

/// May the caller lower `t`'s nice value to `nice` without CAP_SYS_NICE
/// (is_nice_reduction(): within RLIMIT_NICE).
fn nice_allowed(t: &TaskShared, nice: i32) -> bool {
    let limit = t.tg.rlimit(g::RLIMIT_NICE).cur;
    (20 - nice) as u64 <= limit
}

/// Reads struct sched_attr as Linux's sched_copy_attr(): a size of 0 is
/// VER0's; a size outside VER0 to a page, or bytes past what the sentry
/// knows that are not zero, fail with E2BIG after writing the size the
/// sentry knows back.
fn read_attr(task: &Task, addr: u64) -> Result<SchedAttr, SysError> {
    let size: u32 = task.mm.read_pod(addr)?;
    let size = if size == 0 { SCHED_ATTR_SIZE_VER0 } else { size as usize };
    let too_big = |task: &Task| -> SysError {
        let _ = task.mm.write_pod(addr, &(SCHED_ATTR_SIZE_VER1 as u32));
        Errno::E2BIG.into()
    };
    if !(SCHED_ATTR_SIZE_VER0..=PAGE_SIZE).contains(&size) {
        return Err(too_big(task));
    }
    let mut raw = vec![0u8; size];
    task.mm.copy_in(addr, &mut raw)?;
    if raw.iter().skip(SCHED_ATTR_SIZE_VER1).any(|b| *b != 0) {
        return Err(too_big(task));
    }
    let mut known = [0u8; SCHED_ATTR_SIZE_VER1];
    let n = size.min(SCHED_ATTR_SIZE_VER1);
    known[..n].copy_from_slice(&raw[..n]);
    let mut attr = SchedAttr::from_bytes(&known);
    if attr.flags & SCHED_FLAG_UTIL_CLAMP != 0 && size < SCHED_ATTR_SIZE_VER1 {
        return Err(Errno::EINVAL.into());
    }
    attr.nice = attr.nice.clamp(-20, 19);
    Ok(attr)
}

/// SCHED_DEADLINE's parameters make sense (__checkparam_dl()).
fn deadline_params_valid(a: &SchedAttr) -> bool {
    a.deadline != 0
        && a.runtime >= DL_MIN_RUNTIME
        && a.deadline >> 63 == 0
        && a.period >> 63 == 0
        && (a.period == 0 || a.period >= a.deadline)
        && a.deadline >= a.runtime
}

pub fn sched_setattr(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let pid = a[0] as i32;
    if a[1] == 0 || pid < 0 || a[2] as u32 != 0 {
        return Err(Errno::EINVAL.into());
    }
    let mut attr = read_attr(task, a[1])?;
    let t = target(task, pid)?;
    let mut sched = t.sched.lock().unwrap();
    let old = *sched;
    if attr.flags & SCHED_FLAG_KEEP_PARAMS != 0 {
        let kept = SchedAttr::of(&old);
        (attr.nice, attr.priority, attr.runtime, attr.deadline, attr.period) =
            (kept.nice, kept.priority, kept.runtime, kept.deadline, kept.period);
    }
    let (policy, reset_on_fork) = if attr.flags & SCHED_FLAG_KEEP_POLICY != 0 {
        (old.policy, old.reset_on_fork)
    } else {
        if !is_fair(attr.policy) && !is_rt(attr.policy) && attr.policy != SCHED_DEADLINE {
            return Err(Errno::EINVAL.into());
        }
        (attr.policy, attr.flags & SCHED_FLAG_RESET_ON_FORK != 0)
    };
    if attr.flags & !SCHED_FLAG_ALL != 0 || attr.priority > 99 {
        return Err(Errno::EINVAL.into());
    }
    if (policy == SCHED_DEADLINE && !deadline_params_valid(&attr)) || is_rt(policy) != (attr.priority != 0) {
        return Err(Errno::EINVAL.into());
    }
    if attr.flags & SCHED_FLAG_UTIL_CLAMP != 0 && (attr.util_min > UTIL_MAX || attr.util_max > UTIL_MAX) {
        return Err(Errno::EINVAL.into());
    }
    // user_check_sched_setscheduler(): what needs CAP_SYS_NICE.
    let me = task.tg.creds();
    let rtprio = t.tg.rlimit(g::RLIMIT_RTPRIO).cur;
    let privileged = (is_fair(policy) && attr.nice < old.nice && !nice_allowed(&t, attr.nice))
        || (is_rt(policy)
            && ((policy != old.policy && rtprio == 0)
                || (attr.priority > old.priority && u64::from(attr.priority) > rtprio)))
        || policy == SCHED_DEADLINE
        || (old.policy == SCHED_IDLE && policy != SCHED_IDLE && !nice_allowed(&t, old.nice))
        || !same_owner(&me, &t.tg.creds())
        || (old.reset_on_fork && !reset_on_fork);
    if privileged && !me.has(cap::SYS_NICE) {
        return Err(Errno::EPERM.into());
    }
    if attr.flags & SCHED_FLAG_KEEP_PARAMS != 0 {
        // Only the reset-on-fork flag changes (__sched_setscheduler()).
        sched.reset_on_fork = reset_on_fork;
        return Ok(0);
    }
    *sched = SchedAttrs {
        policy,
        reset_on_fork,
        nice: if is_fair(policy) { attr.nice } else { old.nice },
        priority: attr.priority,
        runtime: if policy == SCHED_DEADLINE { attr.runtime } else { 0 },
        deadline: if policy == SCHED_DEADLINE { attr.deadline } else { 0 },
        period: if policy == SCHED_DEADLINE { attr.period } else { 0 },
        ioprio: old.ioprio,
    };
    Ok(0)
}

pub fn sched_getattr(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (pid, size) = (a[0] as i32, a[2] as usize);
    if a[1] == 0 || pid < 0 || !(SCHED_ATTR_SIZE_VER0..=PAGE_SIZE).contains(&size) || a[3] as u32 != 0 {
        return Err(Errno::EINVAL.into());
    }
    let t = target(task, pid)?;
    let attr = SchedAttr::of(&t.sched.lock().unwrap());
    let n = size.min(SCHED_ATTR_SIZE_VER1);
    task.mm.copy_out(a[1], &attr.to_bytes(n as u32)[..n])?;
    Ok(0)
}

/// sched_getscheduler(2): the policy, with SCHED_RESET_ON_FORK.
pub fn sched_getscheduler(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let pid = a[0] as i32;
    if pid < 0 {
        return Err(Errno::EINVAL.into());
    }
    let s = *target(task, pid)?.sched.lock().unwrap();
    Ok(u64::from(s.policy) | if s.reset_on_fork { 0x4000_0000 } else { 0 })
}

/// sched_getparam(2): the real-time priority (0 for the other policies).
pub fn sched_getparam(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let pid = a[0] as i32;
    if a[1] == 0 || pid < 0 {
        return Err(Errno::EINVAL.into());
    }
    let priority = target(task, pid)?.sched.lock().unwrap().priority as i32;
    task.mm.write_pod(a[1], &priority)?;
    Ok(0)
}

const IOPRIO_CLASS_SHIFT: u32 = 13;
const IOPRIO_CLASS_NONE: u32 = 0;
const IOPRIO_CLASS_RT: u32 = 1;
const IOPRIO_CLASS_BE: u32 = 2;
const IOPRIO_CLASS_IDLE: u32 = 3;
const IOPRIO_WHO_PROCESS: u32 = 1;
const IOPRIO_WHO_PGRP: u32 = 2;
const IOPRIO_WHO_USER: u32 = 3;

/// ioprio_check_cap(): a valid value, and the real-time class only with
/// CAP_SYS_NICE or CAP_SYS_ADMIN.
fn check_ioprio(creds: &Creds, ioprio: u32) -> Result<(), Errno> {
    let class = (ioprio >> IOPRIO_CLASS_SHIFT) & 7;
    let level = ioprio & 7;
    match class {
        IOPRIO_CLASS_RT if !creds.has(cap::SYS_NICE) && !creds.has(cap::SYS_ADMIN) => Err(Errno::EPERM),
        IOPRIO_CLASS_RT | IOPRIO_CLASS_BE | IOPRIO_CLASS_IDLE => Ok(()),
        IOPRIO_CLASS_NONE if level == 0 => Ok(()),
        _ => Err(Errno::EINVAL),
    }
}

/// What getpriority, setpriority and the ioprio calls apply to.
enum Who {
    /// One thread (0: the caller).
    Thread,
    /// Every thread of a process group (0: the caller's).
    Group,
    /// Every thread of a real user id (0: the caller's).
    User,
}

/// The threads `kind` and `who` name: ESRCH if none.
fn threads_named(task: &Task, kind: Who, who: i32) -> Result<Vec<Arc<TaskShared>>, SysError> {
    let procs = task.kernel.procs.lock().unwrap();
    let threads_of = |pick: &dyn Fn(&crate::task::ThreadGroup) -> bool| -> Vec<Arc<TaskShared>> {
        procs.processes().iter().filter(|g| pick(g)).flat_map(|g| g.threads.lock().unwrap().clone()).collect()
    };
    let found = match kind {
        Who::Thread if who == 0 => vec![task.shared.clone()],
        Who::Thread => procs.thread(who).into_iter().collect(),
        Who::Group => {
            let pgid = if who == 0 { procs.pgid_of(task.tg.tgid).unwrap_or(task.tg.tgid) } else { who };
            threads_of(&|g| procs.pgid_of(g.tgid).unwrap_or(g.tgid) == pgid)
        }
        Who::User => {
            let uid = if who == 0 { task.tg.creds().uid.real } else { who as u32 };
            threads_of(&|g| g.creds().uid.real == uid)
        }
    };
    if found.is_empty() {
        return Err(Errno::ESRCH.into());
    }
    Ok(found)
}

fn ioprio_who(which: u32) -> Result<Who, SysError> {
    match which {
        IOPRIO_WHO_PROCESS => Ok(Who::Thread),
        IOPRIO_WHO_PGRP => Ok(Who::Group),
        IOPRIO_WHO_USER => Ok(Who::User),
        _ => Err(Errno::EINVAL.into()),
    }
}

fn prio_who(which: u32) -> Result<Who, SysError> {
    match which {
        g::PRIO_PROCESS => Ok(Who::Thread),
        g::PRIO_PGRP => Ok(Who::Group),
        g::PRIO_USER => Ok(Who::User),
        _ => Err(Errno::EINVAL.into()),
    }
}

/// getpriority(2): of several threads, the best nice value; the raw call
/// answers 20 - nice.
pub fn getpriority(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let threads = threads_named(task, prio_who(a[0] as u32)?, a[1] as i32)?;
    let best = threads.iter().map(|t| t.sched.lock().unwrap().nice).min().unwrap_or(0);
    Ok((20 - best) as u64)
}

/// setpriority(2): the nice value of every thread named, as Linux's
/// set_one_prio(): EPERM for another user's without CAP_SYS_NICE, EACCES
/// for a lower value than RLIMIT_NICE allows.
pub fn setpriority(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let kind = prio_who(a[0] as u32)?;
    let nice = (a[2] as i32).clamp(-20, 19);
    let me = task.tg.creds();
    let mut error = None;
    for t in threads_named(task, kind, a[1] as i32)? {
        let them = t.tg.creds();
        if them.uid.real != me.uid.effective && them.uid.effective != me.uid.effective && !me.has(cap::SYS_NICE) {
            error = Some(Errno::EPERM);
            continue;
        }
        let mut s = t.sched.lock().unwrap();
        if nice < s.nice && !nice_allowed(&t, nice) && !me.has(cap::SYS_NICE) {
            error = Some(Errno::EACCES);
            continue;
        }
        s.nice = nice;
    }
    match error {
        Some(e) => Err(e.into()),
        None => Ok(0),
    }
}

pub fn ioprio_set(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (which, who, ioprio) = (a[0] as u32, a[1] as i32, a[2] as u32);
    let me = task.tg.creds();
    check_ioprio(&me, ioprio)?;
    ioprio_who(which)?;
    for t in threads_named(task, ioprio_who(which)?, who)? {
        // set_task_ioprio(): one's own threads, unless CAP_SYS_NICE.
        let them = t.tg.creds();
        if them.uid.real != me.uid.effective && them.uid.real != me.uid.real && !me.has(cap::SYS_NICE) {
            return Err(Errno::EPERM.into());
        }
        t.sched.lock().unwrap().ioprio = ioprio;
    }
    Ok(0)
}

/// Linux's ioprio_best(): of two, the higher priority (the lower value),
/// a value of no class counting as best-effort level 4.
fn ioprio_best(a: u32, b: u32) -> u32 {
    let valid = |p: u32| if (p >> IOPRIO_CLASS_SHIFT) & 7 == IOPRIO_CLASS_NONE { IOPRIO_BE_NORM } else { p };
    valid(a).min(valid(b))
}

/// The default, IOPRIO_PRIO_VALUE(IOPRIO_CLASS_BE, IOPRIO_BE_NORM).
const IOPRIO_BE_NORM: u32 = (IOPRIO_CLASS_BE << IOPRIO_CLASS_SHIFT) | 4;

pub fn ioprio_get(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (which, who) = (a[0] as u32, a[1] as i32);
    // One thread's value as set (0 if never); of several, the best.
    let values: Vec<u32> =
        threads_named(task, ioprio_who(which)?, who)?.iter().map(|t| t.sched.lock().unwrap().ioprio).collect();
    let best = values.iter().skip(1).fold(values[0], |best, v| ioprio_best(best, *v));
    Ok(u64::from(best))
}
