//! A created sandbox's control channel: what an OCI runtime's `start` and
//! `kill` tell a sentry that is already running.
//!
//! The channel is a FIFO in the container's state directory, which the
//! sentry holds open for reading and writing (so it never sees end of
//! file, and a writer never blocks for want of a reader). Each message is
//! two bytes, a command and its argument, written at once: writes of at
//! most `PIPE_BUF` bytes are atomic, so messages of several writers never
//! interleave.

use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};

use crate::fs::Dentry;
use crate::kernel::Kernel;
use crate::sandbox::{Bind, ContainerLayout, JoiningContainer, ProcessPlace, ProcessStdio, StartedProcess};
use crate::signal::{SigInfo, code};
use crate::task::{INIT_PID, ThreadGroup};

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

/// What decides a [`StartGate`] made by [`start_gate`].
#[derive(Clone)]
pub struct GateOpener(Arc<Gate>);

impl GateOpener {
    /// Lets the process run (`run`), or not; the first answer stands.
    pub fn open(&self, run: bool) {
        self.0.open(run);
    }
}

/// A gate for a process that waits for its container's start.
pub fn start_gate() -> (StartGate, GateOpener) {
    let gate = Arc::new(Gate::default());
    (StartGate(gate.clone()), GateOpener(gate))
}

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
                        Some(Message::Signal { signal, all }) => {
                            // SIGKILL ends a container that has not started,
                            // as it ends runc's process waiting for start.
                            if u32::from(signal) == linux_raw_sys::general::SIGKILL {
                                opens.open(false);
                            }
                            send(&kernel, uid, u32::from(signal), all)
                        }
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

/// Sends `signal` to the first process, or with `all` to every process of
/// the first container.
fn send(kernel: &Kernel, uid: u32, signal: u32, all: bool) {
    let first = kernel.procs.lock().unwrap().group(INIT_PID);
    send_to_container(kernel, uid, signal, first, all.then_some(0));
}

/// Sends `signal` to a container's first process `first`, and with
/// `all_of` to every process of that container.
fn send_to_container(kernel: &Kernel, uid: u32, signal: u32, first: Option<Arc<ThreadGroup>>, all_of: Option<u32>) {
    if signal == 0 || signal > crate::signal::NSIG as u32 {
        return;
    }
    let targets = match all_of {
        Some(number) => processes_of(kernel, number),
        None => first.clone().into_iter().collect(),
    };
    for tg in targets {
        // The sender is outside the sandbox's PID namespace, and Linux
        // lets such a sender reach that namespace's init with SIGKILL,
        // SIGSTOP and the signals it handles only (`docker stop` of a
        // program that does not handle SIGTERM waits, then kills it). A
        // container's first process is its namespace's init.
        let is_first = first.as_ref().is_some_and(|f| Arc::ptr_eq(f, &tg));
        if is_first && !reaches_init_from_outside(&tg, signal) {
            continue;
        }
        crate::task::send_to_group(kernel, &tg, SigInfo::user(signal, code::SI_USER, 0, uid));
    }
}

/// The processes of container `number`.
fn processes_of(kernel: &Kernel, number: u32) -> Vec<Arc<ThreadGroup>> {
    let all = kernel.procs.lock().unwrap().processes();
    all.into_iter().filter(|tg| tg.container.load(Ordering::Relaxed) == number).collect()
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
    /// Its /proc/self/oom_score_adj.
    #[serde(default)]
    pub oom_score_adj: i32,
}

/// A request on the control socket: a frame of a little-endian u32 length
/// and that many bytes of JSON. An exec's descriptors (stdin, stdout and
/// stderr, or one terminal) travel with the frame's first byte, in
/// SCM_RIGHTS.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Request {
    /// Start a process in the sandbox's first container, or in the
    /// joined container `container`.
    Exec {
        process: ProcessSpec,
        terminal: bool,
        #[serde(default)]
        container: Option<String>,
    },
    /// The pids of a container's processes (of the first without a name).
    Ps {
        #[serde(default)]
        container: Option<String>,
    },
    Stats,
    /// A signal for a container's first process, or with `all` for all of
    /// its processes (the first container's without a name).
    Signal {
        signal: u32,
        all: bool,
        #[serde(default)]
        container: Option<String>,
    },
    /// A container joins the sandbox (a pod's container joins its pod): its
    /// tree of mounts is laid out and its first process loaded, waiting
    /// for `StartContainer`. The descriptors: its root's, its binds'
    /// sources' in order, then its stdio (three, or one terminal). Answered
    /// as an exec is (started, then exited), with signals for the process
    /// taken on the same connection; its closing kills the container.
    CreateContainer {
        container: ContainerSpec,
    },
    /// Let a created container's first process run.
    StartContainer {
        id: String,
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

/// A container that joins a running sandbox, as the runtime resolved it
/// from its configuration.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ContainerSpec {
    pub id: String,
    pub process: ProcessSpec,
    pub terminal: bool,
    /// What errors and mountinfo call its root.
    pub rootfs: String,
    pub read_only_root: bool,
    /// Its bind mounts, whose sources come as descriptors.
    pub binds: Vec<BindSpec>,
    /// Paths hidden from it (`linux.maskedPaths`).
    pub masks: Vec<Vec<u8>>,
    pub layout: ContainerLayout,
}

/// A bind mount of a joining container.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BindSpec {
    /// The host's path, as mountinfo shows it.
    pub source: String,
    /// Absolute path inside the container.
    pub at: Vec<u8>,
    pub read_only: bool,
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

/// Most descriptors one frame carries: a joining container's root, its
/// bind mounts' sources and its stdio.
pub const MAX_FRAME_FDS: usize = 64;

/// Reads one frame from `fd`, with the descriptors that came with it;
/// None at end of file.
pub fn receive_frame<T: serde::de::DeserializeOwned>(
    fd: std::os::fd::BorrowedFd,
) -> std::io::Result<Option<(T, Vec<OwnedFd>)>> {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
    let mut space = vec![std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FRAME_FDS))];
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
    joined: Arc<Mutex<Joined>>,
}

/// The containers that joined the sandbox (a pod's), by id.
#[derive(Default)]
struct Joined {
    /// The next container's number (0 is the first container's).
    next: u32,
    by_id: HashMap<String, JoinedContainer>,
    /// The sandbox is ending: no container joins any more.
    closed: bool,
}

struct JoinedContainer {
    number: u32,
    /// What its first process waits on until its start.
    start: GateOpener,
    /// Its tree's root and its first process, once made.
    root: Option<Arc<Dentry>>,
    first: Option<Arc<ThreadGroup>>,
}

/// What a connection's requests are served with.
struct Served {
    kernel: Arc<Kernel>,
    devpts: Arc<crate::tty::Devpts>,
    /// The user signals from the runtime are sent as.
    uid: u32,
    memory_limit: u64,
    joined: Arc<Mutex<Joined>>,
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
        let joined = Arc::new(Mutex::new(Joined { next: 1, ..Joined::default() }));
        let served = Arc::new(Served { kernel, devpts, uid, memory_limit, joined: joined.clone() });
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
                    let served = served.clone();
                    let spawned =
                        std::thread::Builder::new().name("control-conn".into()).spawn(move || serve(&served, conn));
                    if let Err(e) = spawned {
                        tracing::debug!("control socket: no thread for a connection: {e}");
                    }
                }
            })
            .expect("spawn the control socket's thread");
        Server { stop, handle, joined }
    }

    /// The sandbox is ending: no container joins it any more, and those
    /// created but not started never start (their first processes, which
    /// wait for that, can then be ended with the rest).
    pub fn close(&self) {
        let mut joined = self.joined.lock().unwrap();
        joined.closed = true;
        for c in joined.by_id.values() {
            c.start.open(false);
        }
    }

    pub fn stop(self) {
        self.close();
        let _ = rustix::io::write(&self.stop, &1u64.to_ne_bytes());
        let _ = self.handle.join();
    }
}

/// An error reply of a request the sandbox cannot do.
fn refusal(message: impl Into<String>) -> Reply {
    Reply::Error { message: message.into(), status: 125 }
}

/// Answers one connection's requests until it closes.
fn serve(served: &Served, conn: OwnedFd) {
    let kernel = &served.kernel;
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
            Request::Exec { process, terminal, container } => {
                let Some(stdio) = stdio_of(&mut fds, terminal) else {
                    let _ = reply(&refusal("an exec with a terminal needs its descriptor"));
                    continue;
                };
                let place = match &container {
                    None => Ok(ProcessPlace::first_container(kernel)),
                    Some(id) => served.place_in(id),
                };
                match place.and_then(|place| {
                    crate::sandbox::start_process(kernel, &served.devpts, &process, stdio, place)
                        .map_err(|e| Reply::Error { message: e.to_string(), status: e.exit_code() })
                }) {
                    Ok(started) => served.run_to_end(&conn, started, None).map(|_| ()),
                    Err(r) => reply(&r),
                }
            }
            Request::CreateContainer { container } => served.create_container(&conn, container, fds),
            Request::StartContainer { id } => {
                let start = served.joined.lock().unwrap().by_id.get(&id).map(|c| c.start.clone());
                match start {
                    Some(start) => {
                        start.open(true);
                        reply(&Reply::Done)
                    }
                    None => reply(&refusal(format!("no container {id} in the sandbox"))),
                }
            }
            Request::Ps { container } => match served.number_of(container.as_deref()) {
                Ok(number) => {
                    let mut pids: Vec<i32> = processes_of(kernel, number).iter().map(|tg| tg.tgid).collect();
                    pids.sort_unstable();
                    reply(&Reply::Ps { pids })
                }
                Err(r) => reply(&r),
            },
            Request::Stats => {
                let r = crate::profile::Resources::now(kernel);
                let procs = kernel.procs.lock().unwrap();
                reply(&Reply::Stats {
                    memory_bytes: (r.frames_in_use + r.frames_charged) * 4096,
                    memory_limit_bytes: served.memory_limit,
                    pids: procs.task_count() as u64,
                    pids_limit: procs.pids_limit().map(|n| n as u64),
                })
            }
            Request::Signal { signal, all, container: None } => {
                send(kernel, served.uid, signal, all);
                reply(&Reply::Done)
            }
            Request::Signal { signal, all, container: Some(id) } => {
                let target = {
                    let joined = served.joined.lock().unwrap();
                    joined.by_id.get(&id).map(|c| {
                        if signal == linux_raw_sys::general::SIGKILL {
                            c.start.open(false);
                        }
                        (c.first.clone(), c.number)
                    })
                };
                match target {
                    Some((first, number)) => {
                        send_to_container(kernel, served.uid, signal, first, all.then_some(number));
                        reply(&Reply::Done)
                    }
                    None => reply(&refusal(format!("no container {id} in the sandbox"))),
                }
            }
            Request::SignalProcess { .. } => {
                reply(&refusal("a process's signal belongs on the connection that started it"))
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
                send(kernel, served.uid, linux_raw_sys::general::SIGKILL, false);
                reply(&Reply::Done)
            }
        };
        if answered.is_err() {
            return;
        }
    }
}

/// A process's stdio from the descriptors that came with its request:
/// one terminal, or up to three files (None: a terminal is missing).
fn stdio_of(fds: &mut Vec<OwnedFd>, terminal: bool) -> Option<ProcessStdio> {
    if terminal {
        return fds.pop().map(ProcessStdio::Terminal);
    }
    let mut it = fds.drain(..);
    Some(ProcessStdio::Files([it.next(), it.next(), it.next()]))
}

impl Served {
    /// Where a process started in joined container `id` goes.
    fn place_in(&self, id: &str) -> Result<ProcessPlace, Reply> {
        let joined = self.joined.lock().unwrap();
        match joined.by_id.get(id) {
            Some(JoinedContainer { root: Some(root), number, .. }) => {
                Ok(ProcessPlace { root: root.clone(), container: *number, start: None })
            }
            _ => Err(refusal(format!("no container {id} in the sandbox"))),
        }
    }

    /// The number of container `id` (the first's without one).
    fn number_of(&self, id: Option<&str>) -> Result<u32, Reply> {
        let Some(id) = id else { return Ok(0) };
        let joined = self.joined.lock().unwrap();
        joined.by_id.get(id).map(|c| c.number).ok_or_else(|| refusal(format!("no container {id} in the sandbox")))
    }

    /// Answers `started` (it started), then its end; meanwhile the
    /// connection carries signals for it, and its closing kills it (and
    /// makes `start`, if the process waits for one, a no).
    fn run_to_end(
        &self,
        conn: &OwnedFd,
        started: StartedProcess,
        start: Option<GateOpener>,
    ) -> std::io::Result<crate::task::ExitStatus> {
        let pid = started.process.tgid;
        // Sent or not, the process is watched and waited for: a runtime
        // gone already makes the watch kill it (and end its wait for a
        // start), so that it is reaped rather than left waiting.
        let _ = send_frame(conn.as_fd(), &Reply::Started { pid }, &[]);
        let watch = ExecWatch::start(self.kernel.clone(), self.uid, conn, started.process.clone(), start);
        let status = started.wait(&self.kernel);
        watch.stop();
        send_frame(conn.as_fd(), &Reply::Exited { status: status.shell_code() }, &[])?;
        Ok(status)
    }

    /// `CreateContainer`: lays the container out, loads its first process
    /// (which waits for its start), and answers as an exec until it ends;
    /// then the container's other processes are killed, as a PID
    /// namespace's are when its init dies, and its tree goes.
    fn create_container(&self, conn: &OwnedFd, spec: ContainerSpec, fds: Vec<OwnedFd>) -> std::io::Result<()> {
        let reply = |r: &Reply| send_frame(conn.as_fd(), r, &[]);
        let id = spec.id.clone();
        let (gate, opener) = start_gate();
        let number = {
            let mut joined = self.joined.lock().unwrap();
            if joined.closed {
                return reply(&refusal("the sandbox is ending"));
            }
            if joined.by_id.contains_key(&id) {
                return reply(&refusal(format!("container {id} is in the sandbox already")));
            }
            let number = joined.next;
            joined.next += 1;
            joined.by_id.insert(id.clone(), JoinedContainer { number, start: opener.clone(), root: None, first: None });
            number
        };
        let unlisted = || {
            self.joined.lock().unwrap().by_id.remove(&id);
        };
        let made = self.make_container(spec, fds, number, gate);
        let (root, started) = match made {
            Ok(m) => m,
            Err(e) => {
                unlisted();
                return reply(&Reply::Error { message: e.to_string(), status: e.exit_code() });
            }
        };
        if let Some(c) = self.joined.lock().unwrap().by_id.get_mut(&id) {
            c.root = Some(root.clone());
            c.first = Some(started.process.clone());
        }
        let ended = self.run_to_end(conn, started, Some(opener));
        for tg in processes_of(&self.kernel, number) {
            crate::task::send_to_group(&self.kernel, &tg, SigInfo::kernel(linux_raw_sys::general::SIGKILL));
        }
        crate::sandbox::remove_container_tree(&self.kernel, &root);
        unlisted();
        ended.map(|_| ())
    }

    /// The container's tree and its first process, waiting on `gate`.
    fn make_container(
        &self,
        spec: ContainerSpec,
        fds: Vec<OwnedFd>,
        number: u32,
        gate: StartGate,
    ) -> Result<(Arc<Dentry>, StartedProcess), crate::sandbox::SandboxError> {
        use crate::sandbox::SandboxError;
        let missing = || SandboxError::Setup("the container's descriptors did not all come".into());
        let mut fds = fds.into_iter();
        let root_fd = fds.next().ok_or_else(missing)?;
        let bind_fds: Vec<OwnedFd> = fds.by_ref().take(spec.binds.len()).collect();
        if bind_fds.len() != spec.binds.len() {
            return Err(missing());
        }
        let mut rest: Vec<OwnedFd> = fds.collect();
        let stdio = stdio_of(&mut rest, spec.terminal).ok_or_else(missing)?;
        // Opened through their descriptors: the sentry reaches no host path.
        let by_fd = |fd: &OwnedFd| PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
        let binds = spec
            .binds
            .iter()
            .zip(&bind_fds)
            .map(|(b, fd)| Bind {
                host: PathBuf::from(&b.source),
                open_at: Some(by_fd(fd)),
                at: b.at.clone(),
                read_only: b.read_only,
            })
            .collect();
        let joining = JoiningContainer {
            rootfs: spec.rootfs.clone(),
            rootfs_open_at: by_fd(&root_fd),
            read_only_root: spec.read_only_root,
            binds,
            masks: spec.masks.clone(),
            layout: spec.layout.clone(),
            owner: (spec.process.uid, spec.process.gid),
        };
        let root = crate::sandbox::container_tree(&self.kernel, &joining)?;
        let place = ProcessPlace { root: root.clone(), container: number, start: Some(gate) };
        match crate::sandbox::start_process(&self.kernel, &self.devpts, &spec.process, stdio, place) {
            Ok(started) => Ok((root, started)),
            Err(e) => {
                crate::sandbox::remove_container_tree(&self.kernel, &root);
                Err(e)
            }
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
    fn start(
        kernel: Arc<Kernel>,
        uid: u32,
        conn: &OwnedFd,
        process: Arc<crate::task::ThreadGroup>,
        start: Option<GateOpener>,
    ) -> ExecWatch {
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
                            if let Some(start) = &start {
                                start.open(false);
                            }
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
