//! A created sandbox's control channel: what an OCI runtime's `start` and
//! `kill` tell a sentry that is already running.
//!
//! The channel is a FIFO in the container's state directory, which the
//! sentry holds open for reading and writing (so it never sees end of
//! file, and a writer never blocks for want of a reader). Each message is
//! two bytes, a command and its argument, written at once: writes of at
//! most `PIPE_BUF` bytes are atomic, so messages of several writers never
//! interleave.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Condvar, Mutex};

use crate::kernel::Kernel;
use crate::signal::{SigInfo, code};
use crate::task::INIT_PID;

/// A message on the control channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message {
    /// Run the first process's program.
    Start,
    /// Send a signal to the first process (`all`: to every process).
    Signal { signal: u8, all: bool },
}

impl Message {
    pub fn encode(self) -> [u8; 2] {
        match self {
            Message::Start => [b's', 0],
            Message::Signal { signal, all: false } => [b'k', signal],
            Message::Signal { signal, all: true } => [b'K', signal],
        }
    }

    pub fn decode(bytes: [u8; 2]) -> Option<Message> {
        match bytes {
            [b's', 0] => Some(Message::Start),
            [b'k', signal] => Some(Message::Signal { signal, all: false }),
            [b'K', signal] => Some(Message::Signal { signal, all: true }),
            _ => None,
        }
    }
}

/// Whether the first process may run: None until the start or the
/// sandbox's end decides.
#[derive(Default)]
struct Gate {
    decided: Mutex<Option<bool>>,
    changed: Condvar,
}

impl Gate {
    fn open(&self, run: bool) {
        let mut d = self.decided.lock().unwrap();
        if d.is_none() {
            *d = Some(run);
            self.changed.notify_all();
        }
    }
}

/// The first process's wait for the start.
pub struct StartGate(Arc<Gate>);

impl StartGate {
    /// Waits for the start: true to run the program, false if the sandbox
    /// is ending first.
    pub fn wait(self) -> bool {
        let mut d = self.0.decided.lock().unwrap();
        loop {
            if let Some(run) = *d {
                return run;
            }
            d = self.0.changed.wait(d).unwrap();
        }
    }
}

/// A host thread that reads the control channel and does what it says.
pub struct Controller {
    stop: OwnedFd,
    gate: Arc<Gate>,
    handle: std::thread::JoinHandle<()>,
}

impl Controller {
    /// Signals are sent as from outside the sandbox's pid namespace (pid
    /// 0) by `uid`, as the forwarder sends them.
    pub fn start(kernel: Arc<Kernel>, uid: u32, channel: OwnedFd) -> Controller {
        use rustix::event::{EventfdFlags, PollFd, PollFlags, eventfd, poll};
        let stop = eventfd(0, EventfdFlags::CLOEXEC).expect("eventfd");
        let stop_wait = stop.try_clone().expect("dup eventfd");
        let gate = Arc::new(Gate::default());
        let opens = gate.clone();
        let handle = std::thread::Builder::new()
            .name("control".into())
            .spawn(move || {
                loop {
                    let mut fds = [PollFd::new(&stop_wait, PollFlags::IN), PollFd::new(&channel, PollFlags::IN)];
                    if poll(&mut fds, None).is_err() {
                        continue;
                    }
                    if !fds[0].revents().is_empty() {
                        return;
                    }
                    let mut msg = [0u8; 2];
                    match rustix::io::read(&channel, &mut msg) {
                        Ok(2) => {}
                        Ok(_) | Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => continue,
                        Err(_) => {
                            // Nothing can start the program any more.
                            opens.open(false);
                            return;
                        }
                    }
                    match Message::decode(msg) {
                        Some(Message::Start) => opens.open(true),
                        Some(Message::Signal { signal, all }) => send(&kernel, uid, u32::from(signal), all),
                        None => tracing::debug!("control channel: unknown message {msg:?}"),
                    }
                }
            })
            .expect("spawn the control thread");
        Controller { stop, gate, handle }
    }

    /// What the first process waits on before its program runs.
    pub fn start_gate(&self) -> StartGate {
        StartGate(self.gate.clone())
    }

    /// Stops the thread; a first process still waiting learns it will not
    /// run.
    pub fn stop(self) {
        self.gate.open(false);
        let _ = rustix::io::write(&self.stop, &1u64.to_ne_bytes());
        let _ = self.handle.join();
    }
}

/// Sends `signal` to the first process, or with `all` to every process.
fn send(kernel: &Kernel, uid: u32, signal: u32, all: bool) {
    if signal == 0 || signal > crate::signal::NSIG as u32 {
        return;
    }
    let targets = {
        let procs = kernel.procs.lock().unwrap();
        if all { procs.processes() } else { procs.group(INIT_PID).into_iter().collect() }
    };
    for tg in targets {
        // The sender is outside the sandbox's PID namespace, and Linux
        // lets such a sender reach that namespace's init with SIGKILL,
        // SIGSTOP and the signals it handles only (`docker stop` of a
        // program that does not handle SIGTERM waits, then kills it).
        if tg.tgid == INIT_PID && !reaches_init_from_outside(&tg, signal) {
            continue;
        }
        crate::task::send_to_group(kernel, &tg, SigInfo::user(signal, code::SI_USER, 0, uid));
    }
}

/// Whether `signal`, sent from outside the sandbox, is delivered to its
/// init `tg` rather than dropped.
fn reaches_init_from_outside(tg: &crate::task::ThreadGroup, signal: u32) -> bool {
    use crate::signal::SIG_DFL;
    signal == linux_raw_sys::general::SIGKILL
        || signal == linux_raw_sys::general::SIGSTOP
        || tg.handlers().lock().unwrap().get(signal).handler != SIG_DFL
}

/// A process to start in a running sandbox (an OCI runtime's exec), as the
/// runtime resolved it from the container's `process` and its own flags.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProcessSpec {
    pub args: Vec<String>,
    pub env: Vec<String>,
    pub cwd: String,
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
    /// Effective, permitted, inheritable, bounding and ambient sets.
    pub caps: [u64; 5],
    pub umask: u32,
    /// (RLIMIT_* number, soft, hard).
    pub rlimits: Vec<(u32, u64, u64)>,
    pub no_new_privs: bool,
}

/// A request on the control socket: a frame of a little-endian u32 length
/// and that many bytes of JSON. An exec's descriptors (stdin, stdout and
/// stderr, or one terminal) travel with the frame's first byte, in
/// SCM_RIGHTS.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Request {
    Exec {
        process: ProcessSpec,
        terminal: bool,
    },
    Ps,
    Stats,
    Signal {
        signal: u32,
        all: bool,
    },
    /// On an exec's connection, after it started: a signal for the process
    /// it started (the runtime forwards what its stand-in receives).
    SignalProcess {
        signal: u32,
    },
    /// Answered with an `Oom` for each process the sandbox kills for want
    /// of memory from now on, until either side closes.
    Events,
    Shutdown,
}

/// The answers, in frames of the same kind. An exec is answered twice:
/// started (or error), then exited.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Reply {
    Started {
        pid: i32,
    },
    /// The process's status as a shell gives it (128 + signal if killed).
    Exited {
        status: i32,
    },
    Error {
        message: String,
        status: i32,
    },
    Ps {
        pids: Vec<i32>,
    },
    Stats {
        memory_bytes: u64,
        memory_limit_bytes: u64,
        pids: u64,
        pids_limit: Option<u64>,
    },
    Done,
    /// A process was killed for want of memory.
    Oom,
}

/// Largest frame either side sends.
const MAX_FRAME: usize = 1 << 20;

/// Writes one frame of `value` on `fd`, with `fds` in SCM_RIGHTS.
pub fn send_frame<T: serde::Serialize>(
    fd: std::os::fd::BorrowedFd,
    value: &T,
    fds: &[std::os::fd::BorrowedFd],
) -> std::io::Result<()> {
    use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
    let body = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    let mut frame = (body.len() as u32).to_le_bytes().to_vec();
    frame.extend_from_slice(&body);
    let mut space = vec![std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(fds.len().max(1)))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() {
        control.push(SendAncillaryMessage::ScmRights(fds));
    }
    let mut sent = rustix::net::sendmsg(fd, &[std::io::IoSlice::new(&frame)], &mut control, SendFlags::NOSIGNAL)?;
    while sent < frame.len() {
        sent += rustix::io::write(fd, &frame[sent..])?;
    }
    Ok(())
}

/// Reads one frame from `fd`, with the descriptors that came with it;
/// None at end of file.
pub fn receive_frame<T: serde::de::DeserializeOwned>(
    fd: std::os::fd::BorrowedFd,
) -> std::io::Result<Option<(T, Vec<OwnedFd>)>> {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
    let mut space = vec![std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(4))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut head = [0u8; 4];
    let got =
        rustix::net::recvmsg(fd, &mut [std::io::IoSliceMut::new(&mut head)], &mut control, RecvFlags::CMSG_CLOEXEC)?;
    let mut fds = Vec::new();
    for msg in control.drain() {
        if let RecvAncillaryMessage::ScmRights(received) = msg {
            fds.extend(received);
        }
    }
    if got.bytes == 0 {
        return Ok(None);
    }
    let mut have = got.bytes;
    while have < 4 {
        let n = rustix::io::read(fd, &mut head[have..])?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        have += n;
    }
    let len = u32::from_le_bytes(head) as usize;
    if len > MAX_FRAME {
        return Err(std::io::Error::other("control frame too large"));
    }
    let mut body = vec![0u8; len];
    let mut have = 0;
    while have < len {
        let n = rustix::io::read(fd, &mut body[have..])?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        have += n;
    }
    let value = serde_json::from_slice(&body).map_err(std::io::Error::other)?;
    Ok(Some((value, fds)))
}

/// The control socket's server: a host thread that accepts the runtime's
/// connections, and one more per connection, off the sentry's own paths.
pub struct Server {
    stop: OwnedFd,
    handle: std::thread::JoinHandle<()>,
}

impl Server {
    pub fn start(
        kernel: Arc<Kernel>,
        devpts: Arc<crate::tty::Devpts>,
        uid: u32,
        memory_limit: u64,
        listener: OwnedFd,
    ) -> Server {
        use rustix::event::{EventfdFlags, PollFd, PollFlags, eventfd, poll};
        let stop = eventfd(0, EventfdFlags::CLOEXEC).expect("eventfd");
        let stop_wait = stop.try_clone().expect("dup eventfd");
        let handle = std::thread::Builder::new()
            .name("control-socket".into())
            .spawn(move || {
                loop {
                    let mut fds = [PollFd::new(&stop_wait, PollFlags::IN), PollFd::new(&listener, PollFlags::IN)];
                    if poll(&mut fds, None).is_err() {
                        continue;
                    }
                    if !fds[0].revents().is_empty() {
                        return;
                    }
                    let Ok(conn) = rustix::net::accept_with(&listener, rustix::net::SocketFlags::CLOEXEC) else {
                        continue;
                    };
                    let (kernel, devpts) = (kernel.clone(), devpts.clone());
                    let spawned = std::thread::Builder::new()
                        .name("control-conn".into())
                        .spawn(move || serve(&kernel, &devpts, uid, memory_limit, conn));
                    if let Err(e) = spawned {
                        tracing::debug!("control socket: no thread for a connection: {e}");
                    }
                }
            })
            .expect("spawn the control socket's thread");
        Server { stop, handle }
    }

    pub fn stop(self) {
        let _ = rustix::io::write(&self.stop, &1u64.to_ne_bytes());
        let _ = self.handle.join();
    }
}

/// Answers one connection's requests until it closes.
fn serve(kernel: &Arc<Kernel>, devpts: &Arc<crate::tty::Devpts>, uid: u32, memory_limit: u64, conn: OwnedFd) {
    let reply = |r: &Reply| send_frame(conn.as_fd(), r, &[]);
    loop {
        let (request, mut fds) = match receive_frame::<Request>(conn.as_fd()) {
            Ok(Some(r)) => r,
            Ok(None) => return,
            Err(e) => {
                tracing::debug!("control socket: {e}");
                return;
            }
        };
        let answered = match request {
            Request::Exec { process, terminal } => {
                let stdio = if terminal {
                    match fds.pop() {
                        Some(tty) => crate::sandbox::ProcessStdio::Terminal(tty),
                        None => {
                            let message = "an exec with a terminal needs its descriptor".into();
                            let _ = reply(&Reply::Error { message, status: 125 });
                            continue;
                        }
                    }
                } else {
                    let mut it = fds.drain(..);
                    crate::sandbox::ProcessStdio::Files([it.next(), it.next(), it.next()])
                };
                match crate::sandbox::start_process(kernel, devpts, &process, stdio) {
                    Ok(started) => {
                        let pid = started.process.tgid;
                        let _ = reply(&Reply::Started { pid });
                        let watch = ExecWatch::start(kernel.clone(), uid, &conn, started.process.clone());
                        let status = started.wait(kernel);
                        watch.stop();
                        reply(&Reply::Exited { status: status.shell_code() })
                    }
                    Err(e) => reply(&Reply::Error { message: e.to_string(), status: e.exit_code() }),
                }
            }
            Request::Ps => {
                let mut pids = kernel.procs.lock().unwrap().pids();
                pids.sort_unstable();
                reply(&Reply::Ps { pids })
            }
            Request::Stats => {
                let r = crate::profile::Resources::now(kernel);
                let procs = kernel.procs.lock().unwrap();
                reply(&Reply::Stats {
                    memory_bytes: (r.frames_in_use + r.frames_charged) * 4096,
                    memory_limit_bytes: memory_limit,
                    pids: procs.task_count() as u64,
                    pids_limit: procs.pids_limit().map(|n| n as u64),
                })
            }
            Request::Signal { signal, all } => {
                send(kernel, uid, signal, all);
                reply(&Reply::Done)
            }
            Request::SignalProcess { .. } => {
                let message = "a process's signal belongs on the connection that started it".into();
                reply(&Reply::Error { message, status: 125 })
            }
            Request::Events => {
                // The thread waits on the count and looks at the
                // connection between waits, so that a runtime that went
                // away frees it.
                let mut seen = kernel.oom_kills.count();
                loop {
                    let now = kernel.oom_kills.wait_past(seen, std::time::Duration::from_secs(1));
                    if (seen..now).try_for_each(|_| reply(&Reply::Oom)).is_err() {
                        return;
                    }
                    seen = now;
                    let mut fds = [rustix::event::PollFd::new(&conn, rustix::event::PollFlags::IN)];
                    if rustix::event::poll(&mut fds, Some(&rustix::time::Timespec::default())).is_ok_and(|n| n > 0) {
                        // Nothing more is asked on this connection: data
                        // or its end both finish it.
                        return;
                    }
                }
            }
            Request::Shutdown => {
                send(kernel, uid, linux_raw_sys::general::SIGKILL, false);
                reply(&Reply::Done)
            }
        };
        if answered.is_err() {
            return;
        }
    }
}

/// What an exec's connection carries while its process runs: signals for
/// it from the runtime's process that stands for it on the host, and, by
/// closing, that process's end. Engines hold that stand-in as the exec'd
/// process (they signal and reap its pid), so its end, even by SIGKILL,
/// which it cannot forward, is the process's: the process is killed.
struct ExecWatch {
    stop: OwnedFd,
    handle: std::thread::JoinHandle<()>,
}

impl ExecWatch {
    fn start(kernel: Arc<Kernel>, uid: u32, conn: &OwnedFd, process: Arc<crate::task::ThreadGroup>) -> ExecWatch {
        use rustix::event::{EventfdFlags, PollFd, PollFlags, eventfd, poll};
        let stop = eventfd(0, EventfdFlags::CLOEXEC).expect("eventfd");
        let stop_wait = stop.try_clone().expect("dup eventfd");
        let conn = conn.try_clone().expect("dup the control connection");
        let handle = std::thread::Builder::new()
            .name("control-exec".into())
            .spawn(move || {
                let signal = |signal: u32| {
                    if signal > 0 && signal <= crate::signal::NSIG as u32 {
                        crate::task::send_to_group(&kernel, &process, SigInfo::user(signal, code::SI_USER, 0, uid));
                    }
                };
                loop {
                    let mut fds = [PollFd::new(&stop_wait, PollFlags::IN), PollFd::new(&conn, PollFlags::IN)];
                    if poll(&mut fds, None).is_err() {
                        continue;
                    }
                    if !fds[0].revents().is_empty() {
                        return;
                    }
                    match receive_frame::<Request>(conn.as_fd()) {
                        Ok(Some((Request::SignalProcess { signal: n }, _))) => signal(n),
                        Ok(Some((other, _))) => tracing::debug!("control socket: {other:?} during an exec ignored"),
                        Ok(None) | Err(_) => {
                            signal(linux_raw_sys::general::SIGKILL);
                            return;
                        }
                    }
                }
            })
            .expect("spawn an exec's watch");
        ExecWatch { stop, handle }
    }

    fn stop(self) {
        let _ = rustix::io::write(&self.stop, &1u64.to_ne_bytes());
        let _ = self.handle.join();
    }
}
