//! epoll_create(1), epoll_ctl, epoll_wait, epoll_pwait(2), eventfd(2).

use std::os::fd::BorrowedFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use linux_raw_sys::general as g;

use super::pipe::{set_temporary_mask, sleep_once};
use super::{SysError, SysResult, file, read_timeout};
use crate::errno::Errno;
use crate::fs::epoll::{Epoll, Key, Ready};
use crate::fs::eventfd::EventFd;
use crate::fs::{OpenFile, OpenFlags};
use crate::task::Task;
use crate::timers;

/// struct epoll_event is packed on x86_64: a u32 and a u64 in 12 bytes.
const EVENT_SIZE: u64 = 12;
/// Linux's cap on maxevents.
const MAX_EVENTS: u64 = (i32::MAX as u64) / EVENT_SIZE;

fn install(task: &mut Task, ops: Arc<dyn crate::fs::FileOps>, flags: OpenFlags, cloexec: bool) -> SysResult {
    let f = OpenFile::new(ops, None, OpenFlags::RDWR | flags);
    Ok(task.files.install(f, cloexec, 0)? as u64)
}

pub fn epoll_create1(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let flags = a[0] as u32;
    if flags & !g::EPOLL_CLOEXEC != 0 {
        return Err(Errno::EINVAL.into());
    }
    install(task, Arc::new(Epoll::default()), OpenFlags::empty(), flags & g::EPOLL_CLOEXEC != 0)
}

pub fn epoll_create(task: &mut Task, a: &[u64; 6]) -> SysResult {
    if a[0] as i32 <= 0 {
        return Err(Errno::EINVAL.into());
    }
    epoll_create1(task, &[0; 6])
}

/// The epoll instance behind `epfd`: EBADF if not open, EINVAL if not
/// an epoll descriptor.
fn epoll_file(task: &Task, epfd: u64) -> Result<Arc<OpenFile>, SysError> {
    let f = file(task, epfd)?;
    if f.ops.downcast_ref::<crate::fs::epoll::Epoll>().is_none() {
        return Err(Errno::EINVAL.into());
    }
    Ok(f)
}

pub fn epoll_ctl(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let (op, fd) = (a[1] as u32, a[2] as i32);
    let epf = epoll_file(task, a[0])?;
    let ep = epf.ops.downcast_ref::<crate::fs::epoll::Epoll>().expect("checked");
    let (events, data) = if op == g::EPOLL_CTL_DEL {
        (0, 0)
    } else {
        let mut raw = [0u8; 12];
        task.mm.copy_in(a[3], &mut raw)?;
        (u32::from_ne_bytes(raw[..4].try_into().unwrap()), u64::from_ne_bytes(raw[4..].try_into().unwrap()))
    };
    let target = file(task, a[2])?;
    if Arc::ptr_eq(&target, &epf) {
        return Err(Errno::EINVAL.into());
    }
    // Files with no readiness to watch (regular files, directories, the
    // /dev devices) are refused, as Linux refuses them. Nesting epoll
    // instances is not provided.
    if target.ops.downcast_ref::<crate::fs::epoll::Epoll>().is_some() {
        return Err(Errno::EINVAL.into());
    }
    if target.ops.poll_queue().is_none() && target.ops.host_fd().is_none() {
        return Err(Errno::EPERM.into());
    }
    let exclusive = events & g::EPOLLEXCLUSIVE != 0;
    if exclusive
        && events
            & !(g::EPOLLIN | g::EPOLLOUT | g::EPOLLERR | g::EPOLLHUP | g::EPOLLWAKEUP | g::EPOLLET | g::EPOLLEXCLUSIVE)
            != 0
    {
        return Err(Errno::EINVAL.into());
    }
    let key = Key::new(fd, &target);
    match op {
        g::EPOLL_CTL_ADD => ep.add(key, &target, events, data)?,
        g::EPOLL_CTL_MOD if exclusive => return Err(Errno::EINVAL.into()),
        g::EPOLL_CTL_MOD => ep.modify(key, events, data)?,
        g::EPOLL_CTL_DEL => ep.remove(key)?,
        _ => return Err(Errno::EINVAL.into()),
    }
    Ok(0)
}

/// Waits for events on `epfd` until `deadline`; a signal ends the wait
/// with EINTR (epoll_wait is never restarted).
fn wait(task: &mut Task, epfd: u64, events_addr: u64, max: u64, deadline: Option<Instant>) -> SysResult {
    if max == 0 || max > MAX_EVENTS {
        return Err(Errno::EINVAL.into());
    }
    let epf = epoll_file(task, epfd)?;
    let ep = epf.ops.downcast_ref::<crate::fs::epoll::Epoll>().expect("checked");
    // Linux checks only that the array lies in user space up front; a
    // bad page there is found when the events are copied out.
    if events_addr.checked_add(max * EVENT_SIZE).is_none_or(|end| end > crate::mm::USER_TOP) {
        return Err(Errno::EFAULT.into());
    }
    let me = crate::task::current();
    let ready = loop {
        // Registered before the scan, so no wake-up between them is lost.
        let _registered = ep.queue().register(&me.waiter);
        let ready = ep.collect(max as usize);
        if !ready.is_empty() || deadline.is_some_and(|d| Instant::now() >= d) {
            break ready;
        }
        if me.interrupted() {
            return Err(Errno::EINTR.into());
        }
        let files = ep.watched_host_files();
        let host: Vec<(BorrowedFd, u32)> =
            files.iter().filter_map(|(f, events)| f.ops.host_fd().map(|fd| (fd, *events))).collect();
        sleep_once(&me, &host, deadline);
    };
    write_events(task, events_addr, &ready)?;
    Ok(ready.len() as u64)
}

fn write_events(task: &Task, addr: u64, ready: &[Ready]) -> Result<(), SysError> {
    let mut out = Vec::with_capacity(ready.len() * EVENT_SIZE as usize);
    for r in ready {
        out.extend_from_slice(&r.events.to_ne_bytes());
        out.extend_from_slice(&r.data.to_ne_bytes());
    }
    task.mm.copy_out(addr, &out)?;
    Ok(())
}

/// A timeout in milliseconds: any negative value waits forever.
fn deadline_ms(ms: u64) -> Option<Instant> {
    let ms = ms as i32;
    (ms >= 0).then(|| Instant::now() + Duration::from_millis(ms as u64))
}

pub fn epoll_wait(task: &mut Task, a: &[u64; 6]) -> SysResult {
    wait(task, a[0], a[1], a[2] as i32 as u64, deadline_ms(a[3]))
}

pub fn epoll_pwait(task: &mut Task, a: &[u64; 6]) -> SysResult {
    set_temporary_mask(task, a[4], a[5])?;
    wait(task, a[0], a[1], a[2] as i32 as u64, deadline_ms(a[3]))
}

pub fn epoll_pwait2(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let deadline = read_timeout(task, a[3])?.map(|d| timers::after(Instant::now(), d));
    set_temporary_mask(task, a[4], a[5])?;
    wait(task, a[0], a[1], a[2] as i32 as u64, deadline)
}

pub fn eventfd2(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let flags = a[1] as u32;
    if flags & !(g::EFD_CLOEXEC | g::EFD_NONBLOCK | g::EFD_SEMAPHORE) != 0 {
        return Err(Errno::EINVAL.into());
    }
    let nonblock = OpenFlags::from_bits_retain(flags & g::O_NONBLOCK);
    let ops = Arc::new(EventFd::new(a[0] as u32 as u64, flags & g::EFD_SEMAPHORE != 0));
    install(task, ops, nonblock, flags & g::EFD_CLOEXEC != 0)
}

pub fn eventfd(task: &mut Task, a: &[u64; 6]) -> SysResult {
    eventfd2(task, &[a[0], 0, 0, 0, 0, 0])
}
