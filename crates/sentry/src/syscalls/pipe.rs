//! pipe, pipe2, poll, ppoll, select, pselect6.

use std::os::fd::BorrowedFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use linux_raw_sys::general as g;
use rustix::event::{PollFd, PollFlags};

use super::{SysError, SysResult, read_timeout};
use crate::errno::Errno;
use crate::fs::pipe::Pipe;
use crate::fs::{OpenFile, OpenFlags, POLLERR, POLLHUP, POLLIN, POLLNVAL, POLLOUT, POLLPRI, POLLRDNORM, POLLWRNORM};
use crate::signal::SigSet;
use crate::task::{RestartBlock, Task, TaskShared};
use crate::timers;

pub fn pipe2(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let flags = a[1] as u32;
    if flags & !(g::O_CLOEXEC | g::O_NONBLOCK) != 0 {
        // O_DIRECT (packet mode) is not provided.
        return Err(Errno::EINVAL.into());
    }
    let extra = OpenFlags::from_bits_retain(flags & g::O_NONBLOCK);
    let creds = task.tg.creds();
    let (r, w) = Pipe::new_pair(task.mm.memory_file().clone(), (creds.uid.fs, creds.gid.fs));
    let rf = OpenFile::new(r, None, extra);
    let wf = OpenFile::new(w, None, OpenFlags::WRONLY | extra);
    let cloexec = flags & g::O_CLOEXEC != 0;
    let rfd = task.files.install(rf, cloexec, 0)?;
    let wfd = match task.files.install(wf, cloexec, 0) {
        Ok(fd) => fd,
        Err(e) => {
            let _ = task.files.remove(rfd);
            return Err(Errno::from(e).into());
        }
    };
    if let Err(e) = task.mm.write(a[0], &[rfd, wfd]) {
        let _ = task.files.remove(rfd);
        let _ = task.files.remove(wfd);
        return Err(Errno::from(e).into());
    }
    Ok(0)
}

pub fn pipe(task: &mut Task, a: &[u64; 6]) -> SysResult {
    pipe2(task, &[a[0], 0, 0, 0, 0, 0])
}

/// One descriptor being polled.
struct Polled {
    fd: i32,
    events: u32,
    revents: u32,
    file: Option<Arc<OpenFile>>,
}

/// Polls until something is ready, the deadline passes, or a signal comes.
fn poll_files(task: &Task, items: &mut [Polled], deadline: Option<Instant>) -> Result<usize, SysError> {
    for it in items.iter_mut() {
        it.file = if it.fd < 0 { None } else { task.files.get(it.fd).ok() };
    }
    let scan = |items: &mut [Polled]| -> usize {
        let mut n = 0;
        for it in items.iter_mut() {
            it.revents = match (&it.file, it.fd < 0) {
                (_, true) => 0,
                (None, false) => POLLNVAL,
                (Some(f), false) => f.ops.poll() & (it.events | POLLERR | POLLHUP),
            };
            if it.revents != 0 {
                n += 1;
            }
        }
        n
    };
    let me = crate::task::current();
    let polled: Vec<(Arc<OpenFile>, u32)> =
        items.iter().filter_map(|i| i.file.clone().map(|f| (f, i.events))).collect();
    loop {
        // Registered before the scan, so no wake-up between them is lost;
        // again on every round, since an epoll descriptor's files change.
        let sources = wake_sources(&polled);
        let _registered: Vec<_> = sources.queues().map(|q| q.register(&me.waiter)).collect();
        let n = scan(items);
        if n > 0 {
            return Ok(n);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(0);
        }
        if me.interrupted() {
            return Err(Errno::ERESTARTNOHAND.into());
        }
        sleep_once(&me, &sources.host_fds(), deadline);
    }
}

/// What can make polled files ready: the files themselves (an epoll
/// descriptor's queue hears of the sentry's files it watches), and for an
/// epoll descriptor the host descriptors it watches.
struct WakeSources {
    files: Vec<(Arc<OpenFile>, u32)>,
}

impl WakeSources {
    fn queues(&self) -> impl Iterator<Item = &crate::task::WaitQueue> {
        self.files.iter().filter_map(|(f, _)| f.ops.poll_queue())
    }

    fn host_fds(&self) -> Vec<(BorrowedFd<'_>, u32)> {
        self.files.iter().filter_map(|(f, ev)| f.ops.host_fd().map(|fd| (fd, *ev))).collect()
    }
}

fn wake_sources(polled: &[(Arc<OpenFile>, u32)]) -> WakeSources {
    let mut files = polled.to_vec();
    for (f, _) in polled {
        if let Some(ep) = f.ops.downcast_ref::<crate::fs::epoll::Epoll>() {
            files.extend(ep.watched_host_files());
        }
    }
    WakeSources { files }
}

/// Sleeps until the task is woken (through the queues it registered on),
/// one of the host descriptors `host` has one of its events, or `deadline`.
pub(super) fn sleep_once(me: &TaskShared, host: &[(BorrowedFd, u32)], deadline: Option<Instant>) {
    if host.is_empty() {
        me.waiter.sleep(deadline);
        return;
    }
    // Host descriptors: one host poll covers them and the task's wake-ups
    // (through its eventfd).
    let ev = me.waiter.eventfd();
    let mut fds: Vec<PollFd> = host
        .iter()
        .map(|(fd, e)| {
            let mut fl = PollFlags::empty();
            if e & (POLLIN | POLLRDNORM) != 0 {
                fl |= PollFlags::IN;
            }
            if e & (POLLOUT | POLLWRNORM) != 0 {
                fl |= PollFlags::OUT;
            }
            if e & POLLPRI != 0 {
                fl |= PollFlags::PRI;
            }
            PollFd::new(fd, fl)
        })
        .collect();
    fds.push(PollFd::new(&ev, PollFlags::IN));
    let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
    let ts = left.map(|l| rustix::time::Timespec { tv_sec: l.as_secs() as i64, tv_nsec: l.subsec_nanos() as i64 });
    let _ = rustix::event::poll(&mut fds, ts.as_ref());
    if !fds.last().expect("eventfd").revents().is_empty() {
        me.waiter.drain_eventfd();
    }
}

/// Installs a temporary signal mask for ppoll/pselect6; the old one comes
/// back when the call returns or its interrupting handler does.
pub(super) fn set_temporary_mask(task: &Task, addr: u64, size: u64) -> Result<(), SysError> {
    if addr == 0 {
        return Ok(());
    }
    if size != 8 {
        return Err(Errno::EINVAL.into());
    }
    let set = SigSet(task.mm.read::<u64>(addr)?);
    {
        let mut s = task.shared.sig.lock().unwrap();
        s.saved_mask = Some(s.mask);
    }
    task.shared.set_mask(set);
    Ok(())
}

fn poll_common(task: &mut Task, fds_addr: u64, nfds: u64, deadline: Option<Instant>) -> SysResult {
    if nfds > task.files.limit() as u64 {
        return Err(Errno::EINVAL.into());
    }
    let mut raw = vec![0u8; 8 * nfds as usize];
    task.mm.copy_in(fds_addr, &mut raw)?;
    let mut items: Vec<Polled> = raw
        .chunks(8)
        .map(|c| Polled {
            fd: i32::from_le_bytes(c[0..4].try_into().unwrap()),
            events: u16::from_le_bytes(c[4..6].try_into().unwrap()) as u32,
            revents: 0,
            file: None,
        })
        .collect();
    let n = poll_files(task, &mut items, deadline)?;
    for (c, it) in raw.chunks_mut(8).zip(&items) {
        c[6..8].copy_from_slice(&(it.revents as u16).to_le_bytes());
    }
    task.mm.copy_out(fds_addr, &raw)?;
    Ok(n as u64)
}

pub fn poll(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let timeout = a[2] as i32;
    if timeout < 0 {
        return poll_common(task, a[0], a[1], None);
    }
    poll_until(task, a[0], a[1], Instant::now() + Duration::from_millis(timeout as u64))
}

/// poll with a deadline: interrupted by a signal without a handler, it goes
/// on until the same deadline (through restart_syscall).
pub fn poll_until(task: &mut Task, fds: u64, nfds: u64, deadline: Instant) -> SysResult {
    match poll_common(task, fds, nfds, Some(deadline)) {
        Err(SysError::Errno(Errno::ERESTARTNOHAND)) => {
            task.restart_block = Some(RestartBlock::Poll { fds, nfds, deadline });
            Err(Errno::ERESTART_RESTARTBLOCK.into())
        }
        r => r,
    }
}

/// ppoll and pselect6 report the time left in their timespec (unless it
/// was zero), also when interrupted, so a restart waits only for the rest.
fn write_time_left(task: &Task, addr: u64, timeout: Option<Duration>, deadline: Option<Instant>) -> SysResult {
    let (Some(t), Some(d)) = (timeout, deadline) else { return Ok(0) };
    if t.is_zero() {
        return Ok(0);
    }
    let left = d.saturating_duration_since(Instant::now());
    let mut ts = <g::__kernel_timespec as crate::abi::Pod>::zeroed();
    ts.tv_sec = left.as_secs() as _;
    ts.tv_nsec = left.subsec_nanos() as _;
    task.mm.write_pod(addr, &ts)?;
    Ok(0)
}

pub fn ppoll(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let timeout = read_timeout(task, a[2])?;
    let deadline = timeout.map(|d| timers::after(Instant::now(), d));
    set_temporary_mask(task, a[3], a[4])?;
    let r = poll_common(task, a[0], a[1], deadline);
    write_time_left(task, a[2], timeout, deadline)?;
    r
}

/// select's three descriptor sets, as poll items.
fn select_common(task: &mut Task, nfds: u64, sets: [u64; 3], deadline: Option<Instant>) -> SysResult {
    let nfds = nfds as i64;
    if !(0..=1024).contains(&nfds) {
        return Err(Errno::EINVAL.into());
    }
    let bytes = (nfds as usize).div_ceil(64) * 8;
    let mut bits = [vec![0u8; bytes], vec![0u8; bytes], vec![0u8; bytes]];
    for (i, addr) in sets.iter().enumerate() {
        if *addr != 0 {
            task.mm.copy_in(*addr, &mut bits[i])?;
        }
    }
    let isset = |b: &[u8], fd: usize| b[fd / 8] & (1 << (fd % 8)) != 0;
    let mut items = Vec::new();
    for fd in 0..nfds as usize {
        let mut ev = 0;
        if isset(&bits[0], fd) {
            ev |= POLLIN | POLLRDNORM;
        }
        if isset(&bits[1], fd) {
            ev |= POLLOUT | POLLWRNORM;
        }
        if isset(&bits[2], fd) {
            ev |= POLLPRI;
        }
        if ev != 0 {
            items.push(Polled { fd: fd as i32, events: ev, revents: 0, file: None });
        }
    }
    for it in &items {
        if task.files.get(it.fd).is_err() {
            return Err(Errno::EBADF.into());
        }
    }
    poll_files(task, &mut items, deadline)?;
    let mut out = [vec![0u8; bytes], vec![0u8; bytes], vec![0u8; bytes]];
    let mut count = 0;
    for it in &items {
        let fd = it.fd as usize;
        let mut mark = |set: usize| {
            out[set][fd / 8] |= 1 << (fd % 8);
            count += 1;
        };
        if it.events & POLLIN != 0 && it.revents & (POLLIN | POLLRDNORM | POLLHUP | POLLERR) != 0 {
            mark(0);
        }
        if it.events & POLLOUT != 0 && it.revents & (POLLOUT | POLLWRNORM | POLLERR) != 0 {
            mark(1);
        }
        if it.events & POLLPRI != 0 && it.revents & POLLPRI != 0 {
            mark(2);
        }
    }
    for (i, addr) in sets.iter().enumerate() {
        if *addr != 0 {
            task.mm.copy_out(*addr, &out[i])?;
        }
    }
    Ok(count)
}

pub fn select(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let deadline = if a[4] == 0 {
        None
    } else {
        let t: g::__kernel_old_timeval = task.mm.read_pod(a[4])?;
        if t.tv_sec < 0 || !(0..1_000_000).contains(&t.tv_usec) {
            return Err(Errno::EINVAL.into());
        }
        Some(timers::after(Instant::now(), Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000)))
    };
    let r = select_common(task, a[0], [a[1], a[2], a[3]], deadline);
    if a[4] != 0 {
        // Linux reports the time left.
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now())).unwrap_or_default();
        let mut t = <g::__kernel_old_timeval as crate::abi::Pod>::zeroed();
        t.tv_sec = left.as_secs() as _;
        t.tv_usec = left.subsec_micros() as _;
        task.mm.write_pod(a[4], &t)?;
    }
    r
}

pub fn pselect6(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let timeout = read_timeout(task, a[4])?;
    let deadline = timeout.map(|d| timers::after(Instant::now(), d));
    if a[5] != 0 {
        let ss: [u64; 2] = task.mm.read_pod(a[5])?;
        set_temporary_mask(task, ss[0], ss[1])?;
    }
    let r = select_common(task, a[0], [a[1], a[2], a[3]], deadline);
    write_time_left(task, a[4], timeout, deadline)?;
    r
}
