//! Terminals: pseudo-terminal pairs (`/dev/ptmx`, `/dev/pts/N`), the
//! controlling terminal of a session (`/dev/tty`) and job control.
//!
//! Each open of `/dev/ptmx` makes a [`Pty`]: a master and a slave sharing
//! one [line discipline](ldisc). What the master writes is the slave's
//! input; what the slave writes (and the echo of its input) is what the
//! master reads. The slave is listed in `/dev/pts` while its master is
//! open; closing the master hangs the slave up.
//!
//! A pty may be the controlling terminal of one session: it then knows the
//! session and its foreground process group, as Linux's tty does, and
//! signals that group for ^C, ^Z, ^\ and window-size changes; a process of
//! the session outside that group that reads (or writes under TOSTOP, or
//! changes the settings) is sent SIGTTIN or SIGTTOU instead.
//!
//! Unlike Linux, a session's terminal is not given up when its leader
//! exits: a session whose leader is gone simply no longer holds it (the
//! terminal may be taken by another), without the hang-up Linux sends.

pub mod ldisc;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use linux_raw_sys::general as g;
use linux_raw_sys::ioctl as io;
use memory::{GuestSlice, GuestSliceMut};

use self::ldisc::{LineDiscipline, Termios};
use crate::errno::Errno;
use crate::fs::synthetic::{DeviceNode, DirSource, SYNTHETIC_DEV, SynthDir, boot_time, next_ino};
use crate::fs::{
    Context, Dentry, FileOps, FileType, FsError, Inode, OpenFile, OpenFlags, POLLERR, POLLHUP, POLLIN, POLLOUT,
    POLLRDNORM, POLLWRNORM, Stat, makedev,
};
use crate::kernel::Kernel;
use crate::mm::MemoryManager;
use crate::signal::{SIG_IGN, SigInfo};
use crate::task::TaskShared;
use crate::waiter::{BlockError, WaitQueue};

/// Device major of the pty slaves (Linux's UNIX98_PTY_SLAVE_MAJOR).
const PTS_MAJOR: u32 = 136;
/// Device major of /dev/tty (minor 0) and /dev/ptmx (minor 2).
const TTYAUX_MAJOR: u32 = 5;
/// Most pairs alive at once (Linux's default kernel.pty.max).
const MAX_PTYS: u32 = 4096;
/// Bytes the slave may write ahead of the master's reads before it waits.
const OUTPUT_LIMIT: usize = 64 << 10;
/// The group pty slaves belong to (`tty`, as devpts's gid=5 mounts give).
const TTY_GID: u32 = 5;

/// The pty pairs of the sandbox: what `/dev/pts` lists and `/dev/ptmx`
/// makes.
pub struct Devpts {
    kernel: Weak<Kernel>,
    ptys: Mutex<BTreeMap<u32, Arc<Pty>>>,
    ptmx: std::sync::OnceLock<Stat>,
}

impl Devpts {
    pub fn new(kernel: Weak<Kernel>) -> Arc<Devpts> {
        Arc::new(Devpts { kernel, ptys: Mutex::new(BTreeMap::new()), ptmx: std::sync::OnceLock::new() })
    }

    /// A new pair, its master open (`/dev/ptmx`). The slave belongs to
    /// `uid` and starts locked.
    pub fn open_master(self: &Arc<Devpts>, uid: u32) -> Result<Arc<MasterFile>, FsError> {
        let pty = {
            let mut ptys = self.ptys.lock().unwrap();
            let index = (0..MAX_PTYS).find(|i| !ptys.contains_key(i)).ok_or(FsError::Host(Errno::ENOSPC))?;
            let pty = Arc::new(Pty {
                index,
                devpts: Arc::downgrade(self),
                kernel: self.kernel.clone(),
                slave_ino: next_ino(),
                uid,
                state: Mutex::new(PtyState {
                    ld: LineDiscipline::new(Termios::pty_slave()),
                    winsize: <g::winsize as crate::abi::Pod>::zeroed(),
                    locked: true,
                    slave_opens: 0,
                    slave_closed: false,
                    hung_up: false,
                    session: None,
                    pgrp: None,
                    detached: BTreeSet::new(),
                    last_input: Instant::now(),
                }),
                queue: WaitQueue::default(),
            });
            ptys.insert(index, pty.clone());
            pty
        };
        let stat = *self.ptmx.get().ok_or(FsError::NoDevice)?;
        Ok(Arc::new(MasterFile { pty, stat }))
    }

    /// The pty that is the controlling terminal of `caller`, if any.
    fn controlling(&self, caller: &Caller, kernel: &Kernel) -> Option<Arc<Pty>> {
        let ptys: Vec<Arc<Pty>> = self.ptys.lock().unwrap().values().cloned().collect();
        ptys.into_iter().find(|p| p.is_controlling_terminal_of(caller, kernel))
    }

    /// `/dev/tty`: the caller's controlling terminal, ENXIO without one.
    pub fn open_controlling(&self, ctx: &Context, flags: OpenFlags) -> Result<Arc<dyn FileOps>, FsError> {
        let kernel = self.kernel.upgrade().ok_or(FsError::NoDevice)?;
        let caller = Caller::of(ctx, &kernel).ok_or(FsError::NoDevice)?;
        let pty = self.controlling(&caller, &kernel).ok_or(FsError::NoDevice)?;
        let _ = flags;
        pty.open_slave(ctx, OpenFlags::NOCTTY, Some(dev_tty_stat()))
    }
}

/// The stat of /dev/tty, which a file opened through it shows.
fn dev_tty_stat() -> Stat {
    static INO: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let t = boot_time();
    Stat {
        dev: SYNTHETIC_DEV,
        ino: *INO.get_or_init(next_ino),
        mode: FileType::CharDevice.mode_bits() | 0o666,
        nlink: 1,
        rdev: makedev(TTYAUX_MAJOR, 0),
        blksize: 4096,
        atime: t,
        mtime: t,
        ctime: t,
        ..Default::default()
    }
}

/// The /dev entries of terminals: `ptmx`, `tty` and the `pts` directory.
pub fn dev_entries(devpts: &Arc<Devpts>) -> Vec<(Vec<u8>, Arc<dyn Inode>)> {
    let ptmx = ptmx_node(devpts, 0o666);
    let _ = devpts.ptmx.set(ptmx.stat().expect("device stat"));
    let tty = {
        let d = devpts.clone();
        DeviceNode::inode(0o666, makedev(TTYAUX_MAJOR, 0), move |ctx, flags| d.open_controlling(ctx, flags))
    };
    let pts = pts_root(devpts, 0);
    vec![(b"ptmx".to_vec(), ptmx), (b"tty".to_vec(), tty), (b"pts".to_vec(), pts)]
}

/// The root of a devpts mount: its own `ptmx` (of permissions
/// `ptmx_mode`, devpts's ptmxmode=) and a node per pty of the sandbox.
pub fn pts_root(devpts: &Arc<Devpts>, ptmx_mode: u32) -> Arc<dyn Inode> {
    SynthDir::with_source(
        Box::new(PtsSource { devpts: Arc::downgrade(devpts), ptmx: ptmx_node(devpts, ptmx_mode & 0o777) }),
        0o755,
        None,
    )
}

fn ptmx_node(devpts: &Arc<Devpts>, perm: u32) -> Arc<dyn Inode> {
    let d = Arc::downgrade(devpts);
    DeviceNode::inode(perm, makedev(TTYAUX_MAJOR, 2), move |ctx, _| {
        let d = d.upgrade().ok_or(FsError::NoDevice)?;
        let uid = ctx.creds.uid.fs;
        Ok(d.open_master(uid)? as Arc<dyn FileOps>)
    })
}

/// `/dev/pts`: `ptmx` and a node per live slave.
struct PtsSource {
    devpts: Weak<Devpts>,
    ptmx: Arc<dyn Inode>,
}

impl DirSource for PtsSource {
    fn entries(&self) -> Vec<(Vec<u8>, Arc<dyn Inode>)> {
        let mut v = vec![(b"ptmx".to_vec(), self.ptmx.clone())];
        if let Some(d) = self.devpts.upgrade() {
            for (i, p) in d.ptys.lock().unwrap().iter() {
                v.push((i.to_string().into_bytes(), Arc::new(SlaveNode { pty: p.clone() }) as Arc<dyn Inode>));
            }
        }
        v
    }

    fn lookup(&self, name: &[u8]) -> Option<Arc<dyn Inode>> {
        if name == b"ptmx" {
            return Some(self.ptmx.clone());
        }
        let index: u32 = std::str::from_utf8(name).ok()?.parse().ok()?;
        if index.to_string().as_bytes() != name {
            return None;
        }
        let pty = self.devpts.upgrade()?.ptys.lock().unwrap().get(&index)?.clone();
        Some(Arc::new(SlaveNode { pty }))
    }
}

/// `/dev/pts/N`.
struct SlaveNode {
    pty: Arc<Pty>,
}

impl Inode for SlaveNode {
    fn file_type(&self) -> FileType {
        FileType::CharDevice
    }
    fn stat(&self) -> Result<Stat, FsError> {
        Ok(self.pty.slave_stat())
    }
    fn open(&self, ctx: &Context, _: &Arc<Dentry>, flags: OpenFlags) -> Result<Arc<dyn FileOps>, FsError> {
        self.pty.open_slave(ctx, flags, None)
    }
    fn read_only(&self) -> bool {
        false
    }
}

/// The task making the current call, as job control sees it; None for
/// cordon's own use of a master (the caller's terminal relayed).
struct Caller<'a> {
    task: &'a TaskShared,
    pid: i32,
    pgid: i32,
    sid: i32,
}

impl<'a> Caller<'a> {
    /// The task making the call `ctx` is of, as the one place the pty
    /// asks who calls; None for the sentry's own calls.
    fn of(ctx: &'a Context, kernel: &Kernel) -> Option<Caller<'a>> {
        let task = ctx.caller_as::<TaskShared>()?;
        let pid = task.tg.tgid;
        let tree = kernel.procs.lock().unwrap();
        let pgid = tree.pgid_of(pid)?;
        let sid = tree.sid_of(pid)?;
        Some(Caller { task, pid, pgid, sid })
    }

    fn is_session_leader(&self) -> bool {
        self.pid == self.sid
    }

    /// Linux's is_ignored: the signal is blocked or ignored.
    fn ignores(&self, sig: u32) -> bool {
        self.task.sig.lock().unwrap().mask.contains(sig)
            || self.task.tg.handlers().lock().unwrap().get(sig).handler == SIG_IGN
    }
}

/// Sends `sig` to every process of group `pgid`, from the kernel.
fn kill_pgrp(kernel: &Kernel, pgid: i32, sig: u32) {
    let members = kernel.procs.lock().unwrap().members_of(pgid);
    for tg in members {
        crate::task::send_to_group(kernel, &tg, SigInfo::kernel(sig));
    }
}

/// True if process `sid` still leads its session.
fn session_alive(kernel: &Kernel, sid: i32) -> bool {
    let tree = kernel.procs.lock().unwrap();
    tree.sid_of(sid) == Some(sid)
        && tree.group(sid).is_some_and(|g| {
            let st = g.state.lock().unwrap();
            !st.zombie && st.exit.is_none()
        })
}

struct PtyState {
    ld: LineDiscipline,
    winsize: g::winsize,
    /// Slaves cannot be opened until unlockpt.
    locked: bool,
    slave_opens: usize,
    /// Every slave closed since one was last open: the master reads EIO
    /// once drained and polls POLLHUP (Linux's TTY_OTHER_CLOSED).
    slave_closed: bool,
    /// The master closed: slaves read end of file, writes fail.
    hung_up: bool,
    /// The session this is the controlling terminal of, and its
    /// foreground process group.
    session: Option<i32>,
    pgrp: Option<i32>,
    /// Processes of the session that gave it up with TIOCNOTTY without
    /// leading the session.
    detached: BTreeSet<i32>,
    /// When input last arrived (VTIME's inter-byte timer).
    last_input: Instant,
}

impl PtyState {
    fn output_room(&self) -> bool {
        self.ld.output.len() < OUTPUT_LIMIT && !self.ld.stopped
    }
}

/// A pseudo-terminal pair.
pub struct Pty {
    index: u32,
    devpts: Weak<Devpts>,
    kernel: Weak<Kernel>,
    slave_ino: u64,
    /// Who opened the master: the slave's owner.
    uid: u32,
    state: Mutex<PtyState>,
    /// Woken on every change, for both ends and their pollers.
    queue: WaitQueue,
}

/// Which end of a pair a file is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum End {
    Master,
    Slave,
}

impl Pty {
    /// unlockpt, for a pair the sandbox makes itself.
    pub fn unlock(&self) {
        self.state.lock().unwrap().locked = false;
    }

    /// The slave's number: N of /dev/pts/N.
    pub fn index(&self) -> u32 {
        self.index
    }

    fn slave_stat(&self) -> Stat {
        let t = boot_time();
        Stat {
            dev: SYNTHETIC_DEV,
            ino: self.slave_ino,
            mode: FileType::CharDevice.mode_bits() | 0o620,
            nlink: 1,
            uid: self.uid,
            gid: TTY_GID,
            rdev: makedev(PTS_MAJOR, self.index),
            blksize: 1024,
            atime: t,
            mtime: t,
            ctime: t,
            ..Default::default()
        }
    }

    /// Waits on the pair's queue until `ready` gives a value, or
    /// `deadline` passes (None back). The one place a pty blocks.
    fn wait<T>(
        &self,
        ctx: &Context,
        deadline: Option<Instant>,
        ready: impl FnMut() -> Option<T>,
    ) -> Result<Option<T>, FsError> {
        match ctx.block_on(&[&self.queue], deadline, ready) {
            Ok(v) => Ok(Some(v)),
            Err(BlockError::TimedOut) => Ok(None),
            Err(BlockError::Interrupted) => Err(FsError::Interrupted),
        }
    }

    /// Opens the slave. Without O_NOCTTY, a session leader with no
    /// controlling terminal makes it its own, if no session holds it.
    pub fn open_slave(
        self: &Arc<Pty>,
        ctx: &Context,
        flags: OpenFlags,
        shown: Option<Stat>,
    ) -> Result<Arc<dyn FileOps>, FsError> {
        let kernel = self.kernel.upgrade().ok_or(FsError::NoDevice)?;
        {
            let mut st = self.state.lock().unwrap();
            if st.locked || st.hung_up {
                return Err(FsError::Host(Errno::EIO));
            }
            st.slave_opens += 1;
            st.slave_closed = false;
        }
        let file = Arc::new(SlaveFile { pty: self.clone(), stat: shown.unwrap_or_else(|| self.slave_stat()) });
        if !flags.contains(OpenFlags::NOCTTY)
            && let Some(caller) = Caller::of(ctx, &kernel)
            && caller.is_session_leader()
        {
            let devpts = self.devpts.upgrade().ok_or(FsError::NoDevice)?;
            if devpts.controlling(&caller, &kernel).is_none() && self.session_holder(&kernel).is_none() {
                self.set_session(caller.sid, caller.pgid);
            }
        }
        self.queue.notify_all();
        Ok(file)
    }

    /// Makes this the controlling terminal of session `sid` with `pgrp` in
    /// the foreground (the first process of a sandbox run with a terminal).
    pub fn set_session(&self, sid: i32, pgrp: i32) {
        let mut st = self.state.lock().unwrap();
        st.session = Some(sid);
        st.pgrp = Some(pgrp);
        st.detached.clear();
    }

    /// The session holding this terminal, if its leader is still there.
    fn session_holder(&self, kernel: &Kernel) -> Option<i32> {
        let sid = self.state.lock().unwrap().session?;
        if session_alive(kernel, sid) {
            return Some(sid);
        }
        let mut st = self.state.lock().unwrap();
        if st.session == Some(sid) {
            st.session = None;
            st.pgrp = None;
        }
        None
    }

    fn is_controlling_terminal_of(&self, caller: &Caller, kernel: &Kernel) -> bool {
        if self.session_holder(kernel) != Some(caller.sid) {
            return false;
        }
        !self.state.lock().unwrap().detached.contains(&caller.pid)
    }

    /// Linux's __tty_check_change: a process of the terminal's session
    /// outside its foreground group is sent `sig` (SIGTTIN, SIGTTOU) and
    /// its call restarts once it is continued, unless it ignores or blocks
    /// the signal (then a read fails with EIO and anything else goes
    /// ahead) or its group is orphaned (EIO).
    fn check_job_control(&self, ctx: &Context, sig: u32) -> Result<(), FsError> {
        let Some(kernel) = self.kernel.upgrade() else { return Ok(()) };
        let Some(caller) = Caller::of(ctx, &kernel) else { return Ok(()) };
        if !self.is_controlling_terminal_of(&caller, &kernel) {
            return Ok(());
        }
        let Some(fg) = self.state.lock().unwrap().pgrp else { return Ok(()) };
        if fg == caller.pgid {
            return Ok(());
        }
        if caller.ignores(sig) {
            return if sig == g::SIGTTIN { Err(FsError::Host(Errno::EIO)) } else { Ok(()) };
        }
        if kernel.procs.lock().unwrap().pgrp_orphaned(caller.pgid, None) {
            return Err(FsError::Host(Errno::EIO));
        }
        kill_pgrp(&kernel, caller.pgid, sig);
        Err(FsError::Interrupted)
    }

    /// Sends `sig` to the foreground process group, if there is one.
    fn signal_foreground(&self, sig: u32) {
        let Some(kernel) = self.kernel.upgrade() else { return };
        let Some(pgrp) = self.state.lock().unwrap().pgrp else { return };
        kill_pgrp(&kernel, pgrp, sig);
    }

    /// Input for the slave (a write on the master): returns the bytes
    /// taken, which may be fewer than given only in raw mode when the input
    /// is full. Signal characters signal the foreground group.
    fn receive(&self, data: &[u8]) -> usize {
        let r = {
            let mut st = self.state.lock().unwrap();
            let r = st.ld.receive(data);
            if r.taken > 0 {
                st.last_input = Instant::now();
            }
            r
        };
        for sig in &r.signals {
            self.signal_foreground(*sig);
        }
        if r.taken > 0 || !r.signals.is_empty() {
            self.queue.notify_all();
        }
        r.taken
    }

    /// Sets the window size; the foreground group hears of a change.
    pub fn set_window_size(&self, ws: g::winsize) {
        let changed = {
            let mut st = self.state.lock().unwrap();
            let old = st.winsize;
            st.winsize = ws;
            (old.ws_row, old.ws_col, old.ws_xpixel, old.ws_ypixel) != (ws.ws_row, ws.ws_col, ws.ws_xpixel, ws.ws_ypixel)
        };
        if changed {
            self.signal_foreground(g::SIGWINCH);
        }
    }

    /// Writes input into the slave without waiting: what fits is taken
    /// (for cordon's relay of the caller's terminal).
    pub fn offer_input(&self, data: &[u8]) -> usize {
        self.receive(data)
    }

    /// Takes what the slave wrote, without waiting (for cordon's relay).
    pub fn take_output(&self) -> Vec<u8> {
        let out: Vec<u8> = self.state.lock().unwrap().ld.output.drain(..).collect();
        if !out.is_empty() {
            self.queue.notify_all();
        }
        out
    }

    /// Where cordon's relay waits for output.
    pub fn queue(&self) -> &WaitQueue {
        &self.queue
    }

    fn read_slave(&self, ctx: &Context, file: &OpenFile, bufs: &[GuestSliceMut<'_>]) -> Result<usize, FsError> {
        let want: usize = bufs.iter().map(|b| b.len()).sum();
        if self.state.lock().unwrap().hung_up {
            return Ok(0);
        }
        self.check_job_control(ctx, g::SIGTTIN)?;
        if want == 0 {
            return Ok(0);
        }
        let nonblock = file.flags().contains(OpenFlags::NONBLOCK);
        let (canonical, vmin, vtime) = {
            let st = self.state.lock().unwrap();
            (st.ld.termios.canonical(), st.ld.termios.vmin() as usize, st.ld.termios.vtime() as u64)
        };
        let take = |min: usize| {
            let mut st = self.state.lock().unwrap();
            if st.hung_up {
                return Some(Vec::new());
            }
            let ready = if canonical { st.ld.read_ready() } else { st.ld.readable() >= min.max(1) };
            ready.then(|| st.ld.take_input(want))
        };
        let data = if canonical {
            match take(1) {
                Some(d) => d,
                None if nonblock => return Err(FsError::WouldBlock),
                None => self.wait(ctx, None, || take(1))?.unwrap_or_default(),
            }
        } else if vmin == 0 {
            // Whatever is there; with VTIME, waiting that long for a byte.
            match take(1) {
                Some(d) => d,
                None if vtime == 0 => Vec::new(),
                None if nonblock => return Err(FsError::WouldBlock),
                None => {
                    let deadline = Instant::now() + Duration::from_millis(vtime * 100);
                    self.wait(ctx, Some(deadline), || take(1))?.unwrap_or_default()
                }
            }
        } else {
            // VMIN bytes (or fewer if fewer were asked for); with VTIME,
            // fewer once that long passed since the last byte came.
            let min = vmin.min(want);
            match take(min) {
                Some(d) => d,
                None if nonblock => match take(1) {
                    Some(d) => d,
                    None => return Err(FsError::WouldBlock),
                },
                None => loop {
                    let deadline = {
                        let st = self.state.lock().unwrap();
                        (vtime > 0 && st.ld.readable() > 0).then(|| st.last_input + Duration::from_millis(vtime * 100))
                    };
                    if let Some(d) = self.wait(ctx, deadline, || take(min))? {
                        break d;
                    }
                    if let Some(d) = take(1) {
                        break d;
                    }
                },
            }
        };
        self.queue.notify_all();
        Ok(scatter(bufs, &data))
    }

    fn write_slave(&self, ctx: &Context, file: &OpenFile, bufs: &[GuestSlice<'_>]) -> Result<usize, FsError> {
        if self.state.lock().unwrap().hung_up {
            return Err(FsError::Host(Errno::EIO));
        }
        if self.state.lock().unwrap().ld.termios.tostop() {
            self.check_job_control(ctx, g::SIGTTOU)?;
        }
        let data = gather(bufs);
        let nonblock = file.flags().contains(OpenFlags::NONBLOCK);
        let mut done = 0;
        while done < data.len() {
            let put = || {
                let mut st = self.state.lock().unwrap();
                if st.hung_up {
                    return Some(Err(FsError::Host(Errno::EIO)));
                }
                if !st.output_room() {
                    return None;
                }
                let room = OUTPUT_LIMIT - st.ld.output.len();
                let n = room.min(data.len() - done);
                for &c in &data[done..done + n] {
                    st.ld.put_output(c);
                }
                Some(Ok(n))
            };
            let r = match put() {
                Some(r) => r,
                None if nonblock => Err(FsError::WouldBlock),
                None => match self.wait(ctx, None, put) {
                    Ok(r) => r.unwrap_or(Err(FsError::WouldBlock)),
                    Err(e) => Err(e),
                },
            };
            match r {
                Ok(n) => {
                    done += n;
                    self.queue.notify_all();
                }
                Err(_) if done > 0 => break,
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }

    fn read_master(&self, ctx: &Context, file: &OpenFile, bufs: &[GuestSliceMut<'_>]) -> Result<usize, FsError> {
        let want: usize = bufs.iter().map(|b| b.len()).sum();
        if want == 0 {
            return Ok(0);
        }
        let take = || {
            let mut st = self.state.lock().unwrap();
            if st.ld.output.is_empty() {
                return st.slave_closed.then_some(Err(FsError::Host(Errno::EIO)));
            }
            let n = st.ld.output.len().min(want);
            Some(Ok(st.ld.output.drain(..n).collect::<Vec<u8>>()))
        };
        let data = match take() {
            Some(r) => r?,
            None if file.flags().contains(OpenFlags::NONBLOCK) => return Err(FsError::WouldBlock),
            None => self.wait(ctx, None, take)?.unwrap_or(Err(FsError::WouldBlock))?,
        };
        self.queue.notify_all();
        Ok(scatter(bufs, &data))
    }

    fn write_master(&self, ctx: &Context, file: &OpenFile, bufs: &[GuestSlice<'_>]) -> Result<usize, FsError> {
        if self.state.lock().unwrap().slave_opens == 0 {
            return Err(FsError::Host(Errno::EIO));
        }
        let data = gather(bufs);
        let nonblock = file.flags().contains(OpenFlags::NONBLOCK);
        let mut done = 0;
        while done < data.len() {
            let n = self.receive(&data[done..]);
            if n > 0 {
                done += n;
                continue;
            }
            if nonblock {
                break;
            }
            let room = || {
                let st = self.state.lock().unwrap();
                st.ld.input_room().then_some(())
            };
            if let Err(e) = self.wait(ctx, None, room) {
                if done > 0 {
                    break;
                }
                return Err(e);
            }
        }
        if done == 0 && !data.is_empty() {
            return Err(FsError::WouldBlock);
        }
        Ok(done)
    }

    fn poll(&self, end: End) -> u32 {
        let st = self.state.lock().unwrap();
        let mut m = 0;
        match end {
            End::Slave => {
                if st.hung_up {
                    return POLLIN | POLLOUT | POLLERR | POLLHUP | POLLRDNORM | POLLWRNORM;
                }
                if st.ld.read_ready() {
                    m |= POLLIN | POLLRDNORM;
                }
                if st.output_room() {
                    m |= POLLOUT | POLLWRNORM;
                }
            }
            End::Master => {
                if !st.ld.output.is_empty() {
                    m |= POLLIN | POLLRDNORM;
                }
                if st.slave_closed {
                    m |= POLLHUP;
                }
                if st.ld.input_room() {
                    m |= POLLOUT | POLLWRNORM;
                }
            }
        }
        m
    }

    /// The master closed: the slave is hung up and leaves /dev/pts; the
    /// leader of the session it controlled gets SIGHUP and SIGCONT.
    fn hang_up(&self) {
        let session = {
            let mut st = self.state.lock().unwrap();
            st.hung_up = true;
            st.pgrp = None;
            st.session.take()
        };
        if let Some(d) = self.devpts.upgrade() {
            d.ptys.lock().unwrap().remove(&self.index);
        }
        self.queue.notify_all();
        let Some(kernel) = self.kernel.upgrade() else { return };
        if let Some(sid) = session
            && session_alive(&kernel, sid)
            && let Some(leader) = kernel.procs.lock().unwrap().group(sid)
        {
            crate::task::send_to_group(&kernel, &leader, SigInfo::kernel(g::SIGHUP));
            crate::task::send_to_group(&kernel, &leader, SigInfo::kernel(g::SIGCONT));
        }
    }

    /// The terminal requests both ends answer.
    fn ioctl(&self, ctx: &Context, end: End, mm: &MemoryManager, cmd: u32, arg: u64) -> Result<u64, FsError> {
        if end == End::Slave && self.state.lock().unwrap().hung_up {
            // Linux's hung_up_tty_ioctl.
            return Err(FsError::Host(if cmd == io::TIOCSPGRP { Errno::ENOTTY } else { Errno::EIO }));
        }
        match cmd {
            io::TCGETS => {
                mm.write_pod(arg, &self.state.lock().unwrap().ld.termios.to_abi())?;
                Ok(0)
            }
            io::TCGETS2 => {
                mm.write_pod(arg, &self.state.lock().unwrap().ld.termios.to_abi2())?;
                Ok(0)
            }
            io::TCSETS | io::TCSETSW | io::TCSETSF => {
                let t: g::termios = mm.read_pod(arg)?;
                self.check_job_control(ctx, g::SIGTTOU)?;
                let old = self.state.lock().unwrap().ld.termios;
                self.set_termios(Termios::from_abi(&t, &old), cmd == io::TCSETSF);
                Ok(0)
            }
            io::TCSETS2 | io::TCSETSW2 | io::TCSETSF2 => {
                let t: g::termios2 = mm.read_pod(arg)?;
                self.check_job_control(ctx, g::SIGTTOU)?;
                self.set_termios(Termios::from_abi2(&t), cmd == io::TCSETSF2);
                Ok(0)
            }
            io::TIOCGWINSZ => {
                mm.write_pod(arg, &self.state.lock().unwrap().winsize)?;
                Ok(0)
            }
            io::TIOCSWINSZ => {
                let ws: g::winsize = mm.read_pod(arg)?;
                self.set_window_size(ws);
                Ok(0)
            }
            io::TCFLSH => {
                self.check_job_control(ctx, g::SIGTTOU)?;
                let (input, output) = match arg as u32 {
                    g::TCIFLUSH => (true, false),
                    g::TCOFLUSH => (false, true),
                    g::TCIOFLUSH => (true, true),
                    _ => return Err(FsError::Invalid),
                };
                {
                    // One buffer each way: the slave's input (what the
                    // master wrote) and the master's (what the slave
                    // wrote). A side's input flush and the other side's
                    // output flush empty the same one.
                    let mut st = self.state.lock().unwrap();
                    let (to_slave, to_master) = if end == End::Slave { (input, output) } else { (output, input) };
                    if to_slave {
                        st.ld.flush_input();
                    }
                    if to_master {
                        st.ld.output.clear();
                    }
                }
                self.queue.notify_all();
                Ok(0)
            }
            io::TCXONC => {
                self.check_job_control(ctx, g::SIGTTOU)?;
                match arg as u32 {
                    g::TCOOFF => self.state.lock().unwrap().ld.stopped = true,
                    g::TCOON => self.state.lock().unwrap().ld.stopped = false,
                    g::TCIOFF | g::TCION => {}
                    _ => return Err(FsError::Invalid),
                }
                self.queue.notify_all();
                Ok(0)
            }
            // tcdrain and breaks: a pty's output is with the master at once.
            io::TCSBRK | io::TCSBRKP | io::TIOCSBRK | io::TIOCCBRK => Ok(0),
            io::TIOCOUTQ => {
                let n = match end {
                    End::Slave => 0,
                    End::Master => self.state.lock().unwrap().ld.readable() as i32,
                };
                mm.write_pod(arg, &n)?;
                Ok(0)
            }
            io::TIOCGETD => {
                mm.write_pod(arg, &0i32)?;
                Ok(0)
            }
            io::TIOCSETD => {
                let ld: i32 = mm.read_pod(arg)?;
                if ld == 0 { Ok(0) } else { Err(FsError::Invalid) }
            }
            io::TIOCSCTTY => self.set_controlling(ctx, arg),
            io::TIOCNOTTY => {
                if end == End::Master {
                    return Err(FsError::NotTty);
                }
                self.give_up_controlling(ctx)
            }
            io::TIOCGPGRP | io::TIOCGSID => {
                let kernel = self.kernel.upgrade().ok_or(FsError::NotTty)?;
                if end == End::Slave {
                    let caller = Caller::of(ctx, &kernel).ok_or(FsError::NotTty)?;
                    if !self.is_controlling_terminal_of(&caller, &kernel) {
                        return Err(FsError::NotTty);
                    }
                }
                let st = self.state.lock().unwrap();
                let v = if cmd == io::TIOCGPGRP { st.pgrp.unwrap_or(0) } else { st.session.ok_or(FsError::NotTty)? };
                drop(st);
                mm.write_pod(arg, &v)?;
                Ok(0)
            }
            io::TIOCSPGRP => {
                let kernel = self.kernel.upgrade().ok_or(FsError::NotTty)?;
                match self.check_job_control(ctx, g::SIGTTOU) {
                    Err(FsError::Host(Errno::EIO)) => return Err(FsError::NotTty),
                    Err(e) => return Err(e),
                    Ok(()) => {}
                }
                let caller = Caller::of(ctx, &kernel).ok_or(FsError::NotTty)?;
                if !self.is_controlling_terminal_of(&caller, &kernel) {
                    return Err(FsError::NotTty);
                }
                let pgrp: i32 = mm.read_pod(arg)?;
                if pgrp < 0 {
                    return Err(FsError::Invalid);
                }
                {
                    let tree = kernel.procs.lock().unwrap();
                    let members = tree.members_of(pgrp);
                    if members.is_empty() {
                        return Err(FsError::Host(Errno::ESRCH));
                    }
                    if tree.sid_of(members[0].tgid) != Some(caller.sid) {
                        return Err(FsError::Host(Errno::EPERM));
                    }
                }
                self.state.lock().unwrap().pgrp = Some(pgrp);
                Ok(0)
            }
            io::TIOCSIG if end == End::Master => {
                let sig = arg as u32;
                if sig == 0 || sig > crate::signal::NSIG as u32 {
                    return Err(FsError::Invalid);
                }
                self.signal_foreground(sig);
                Ok(0)
            }
            io::TIOCGPTN | io::TIOCSPTLCK | io::TIOCGPTLCK if end == End::Master => {
                match cmd {
                    io::TIOCGPTN => mm.write_pod(arg, &self.index)?,
                    io::TIOCGPTLCK => mm.write_pod(arg, &(self.state.lock().unwrap().locked as i32))?,
                    _ => {
                        let lock: i32 = mm.read_pod(arg)?;
                        self.state.lock().unwrap().locked = lock != 0;
                    }
                }
                Ok(0)
            }
            // Linux's ptm_open_peer refuses anything but a master.
            io::TIOCGPTPEER => Err(FsError::Host(Errno::EIO)),
            _ => Err(FsError::NotTty),
        }
    }

    fn set_termios(&self, t: Termios, flush: bool) {
        {
            let mut st = self.state.lock().unwrap();
            if flush {
                st.ld.flush_input();
            }
            st.ld.set_termios(t);
        }
        self.queue.notify_all();
    }

    /// TIOCSCTTY, as Linux's tiocsctty: a session leader without a
    /// terminal takes this one, if no session holds it (with `steal` and
    /// CAP_SYS_ADMIN, even then).
    fn set_controlling(&self, ctx: &Context, steal: u64) -> Result<u64, FsError> {
        let kernel = self.kernel.upgrade().ok_or(FsError::NotTty)?;
        let caller = Caller::of(ctx, &kernel).ok_or(FsError::NotTty)?;
        let holder = self.session_holder(&kernel);
        if caller.is_session_leader() && holder == Some(caller.sid) {
            return Ok(0);
        }
        let devpts = self.devpts.upgrade().ok_or(FsError::NotTty)?;
        if !caller.is_session_leader() || devpts.controlling(&caller, &kernel).is_some() {
            return Err(FsError::Host(Errno::EPERM));
        }
        if holder.is_some() {
            let admin = caller.task.tg.creds().has(crate::auth::cap::SYS_ADMIN);
            if steal != 1 || !admin {
                return Err(FsError::Host(Errno::EPERM));
            }
        }
        self.set_session(caller.sid, caller.pgid);
        Ok(0)
    }

    /// TIOCNOTTY: the caller gives its controlling terminal up; when the
    /// session leader does, the whole session loses it and the foreground
    /// group gets SIGHUP and SIGCONT.
    fn give_up_controlling(&self, ctx: &Context) -> Result<u64, FsError> {
        let kernel = self.kernel.upgrade().ok_or(FsError::NotTty)?;
        let caller = Caller::of(ctx, &kernel).ok_or(FsError::NotTty)?;
        if !self.is_controlling_terminal_of(&caller, &kernel) {
            return Err(FsError::NotTty);
        }
        if !caller.is_session_leader() {
            self.state.lock().unwrap().detached.insert(caller.pid);
            return Ok(0);
        }
        let pgrp = {
            let mut st = self.state.lock().unwrap();
            st.session = None;
            st.detached.clear();
            st.pgrp.take()
        };
        if let Some(p) = pgrp {
            kill_pgrp(&kernel, p, g::SIGHUP);
            kill_pgrp(&kernel, p, g::SIGCONT);
        }
        Ok(0)
    }
}

/// Copies `data` into the buffers; returns the bytes copied.
fn scatter(bufs: &[GuestSliceMut<'_>], data: &[u8]) -> usize {
    let mut n = 0;
    for b in bufs {
        if n == data.len() {
            break;
        }
        n += b.copy_from(&data[n..]);
    }
    n
}

fn gather(bufs: &[GuestSlice<'_>]) -> Vec<u8> {
    let mut v = Vec::new();
    for b in bufs {
        b.append_to(&mut v);
    }
    v
}

/// An open master (`/dev/ptmx`). Its last close hangs the pair up.
pub struct MasterFile {
    pty: Arc<Pty>,
    stat: Stat,
}

impl MasterFile {
    pub fn pty(&self) -> &Arc<Pty> {
        &self.pty
    }
}

impl Drop for MasterFile {
    fn drop(&mut self) {
        self.pty.hang_up();
    }
}

impl FileOps for MasterFile {
    fn read(&self, ctx: &Context, file: &OpenFile, bufs: &[GuestSliceMut<'_>], _: u64) -> Result<usize, FsError> {
        self.pty.read_master(ctx, file, bufs)
    }
    fn write(&self, ctx: &Context, file: &OpenFile, bufs: &[GuestSlice<'_>], _: u64) -> Result<usize, FsError> {
        self.pty.write_master(ctx, file, bufs)
    }
    fn stat(&self) -> Result<Stat, FsError> {
        Ok(self.stat)
    }
    fn ioctl(&self, ctx: &Context, _: &OpenFile, mm: &MemoryManager, cmd: u32, arg: u64) -> Result<u64, FsError> {
        self.pty.ioctl(ctx, End::Master, mm, cmd, arg)
    }
    fn readable_bytes(&self) -> Option<u64> {
        Some(self.pty.state.lock().unwrap().ld.output.len() as u64)
    }
    fn poll(&self) -> u32 {
        self.pty.poll(End::Master)
    }
    fn poll_queue(&self) -> Option<&WaitQueue> {
        Some(&self.pty.queue)
    }
}

/// An open slave (`/dev/pts/N`, or `/dev/tty` leading to one).
struct SlaveFile {
    pty: Arc<Pty>,
    stat: Stat,
}

impl Drop for SlaveFile {
    fn drop(&mut self) {
        {
            let mut st = self.pty.state.lock().unwrap();
            st.slave_opens -= 1;
            if st.slave_opens == 0 {
                st.slave_closed = true;
            }
        }
        self.pty.queue.notify_all();
    }
}

impl FileOps for SlaveFile {
    fn read(&self, ctx: &Context, file: &OpenFile, bufs: &[GuestSliceMut<'_>], _: u64) -> Result<usize, FsError> {
        self.pty.read_slave(ctx, file, bufs)
    }
    fn write(&self, ctx: &Context, file: &OpenFile, bufs: &[GuestSlice<'_>], _: u64) -> Result<usize, FsError> {
        self.pty.write_slave(ctx, file, bufs)
    }
    fn stat(&self) -> Result<Stat, FsError> {
        Ok(self.stat)
    }
    fn ioctl(&self, ctx: &Context, _: &OpenFile, mm: &MemoryManager, cmd: u32, arg: u64) -> Result<u64, FsError> {
        self.pty.ioctl(ctx, End::Slave, mm, cmd, arg)
    }
    fn readable_bytes(&self) -> Option<u64> {
        Some(self.pty.state.lock().unwrap().ld.readable() as u64)
    }
    fn poll(&self) -> u32 {
        self.pty.poll(End::Slave)
    }
    fn poll_queue(&self) -> Option<&WaitQueue> {
        Some(&self.pty.queue)
    }
}
